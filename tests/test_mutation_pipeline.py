"""Tests that kill mutants of ``clir.pipeline`` the rest of the suite let live: step keys that
must change with what a step's output depends on, a step's verification before reuse, the
reranker data's feature columns per candidate, and the report's rows (each test names what it
guards)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from clir.pipeline import cache
from clir.pipeline.cache import DONE, StepRebuiltWarning, StepRunner
from clir.pipeline.features import (
    OVERLAP_FEATURES,
    PROXIMITY_FEATURES,
    DocumentTokens,
    build_rerank_data,
)
from clir.types import Document, Query


def _quiet(root: Path, **kwargs) -> StepRunner:
    return StepRunner(root, log=lambda line: None, **kwargs)


def _write(text: str):
    def build(work: Path) -> None:
        (work / "out.txt").write_text(text)

    return build


# ------------------------------------------------------------------------------------ cache


def test_a_step_s_name_is_part_of_its_key():
    """Two steps of the same params and inputs but other names (``train-a``, ``train-b``) have
    other keys: a step that reads them keys them by name too, so swapping two systems' configs
    re-keys the rerank step (without the name, its runs were reused under the swapped names)."""
    assert cache.step_key("train-a", {"lr": 1}) != cache.step_key("train-b", {"lr": 1})
    a = cache.StepResult("train-a", cache.step_key("train-a", {"lr": 1}), Path("a"), False, 0.0)
    b = cache.StepResult("train-b", cache.step_key("train-b", {"lr": 2}), Path("b"), False, 0.0)
    swapped_a = cache.StepResult("train-a", cache.step_key("train-a", {"lr": 2}), Path("a"), False, 0.0)
    swapped_b = cache.StepResult("train-b", cache.step_key("train-b", {"lr": 1}), Path("b"), False, 0.0)
    assert cache.step_key("rerank", {}, [a, b]) != cache.step_key("rerank", {}, [swapped_a, swapped_b])
    assert cache.step_key("rerank", {}, [a, b]) == cache.step_key("rerank", {}, [b, a])  # order: none


@pytest.mark.parametrize("seconds", [None, "12", [1.0]])
def test_a_step_json_without_a_build_time_is_rebuilt_not_a_crash(tmp_path, seconds):
    with _quiet(tmp_path) as runner:
        path = runner.run("a", {}, _write("x")).path
    record = json.loads((path / DONE).read_text())
    if seconds is None:
        del record["seconds"]
    else:
        record["seconds"] = seconds
    (path / DONE).write_text(json.dumps(record))
    with pytest.warns(StepRebuiltWarning, match="records no build time"), _quiet(tmp_path) as runner:
        assert not runner.run("a", {}, _write("x")).cached


def test_the_index_drops_a_step_whose_folder_was_removed_even_when_it_is_readable(tmp_path):
    with _quiet(tmp_path) as runner:
        a = runner.run("a", {}, _write("a"))
        runner.run("b", {}, _write("b"))
    shutil.rmtree(a.path)
    with _quiet(tmp_path) as runner:
        c = runner.run("c", {}, _write("c"))
    index = json.loads((tmp_path / "steps" / "index.json").read_text())
    assert "a" not in index and index["c"] == c.path.name and set(index) == {"b", "c"}


def test_a_reused_step_reports_the_seconds_of_its_build(tmp_path):
    with _quiet(tmp_path) as runner:
        built = runner.run("a", {}, _write("x"))
    with _quiet(tmp_path) as runner:
        reused = runner.run("a", {}, _write("x"))
        assert reused.cached and reused.seconds == built.seconds
        assert runner.reused == {"a": built.seconds} and runner.timings == {"a": 0.0}


def test_a_file_that_fills_the_hash_budget_exactly_is_hashed(tmp_path):
    """The smallest files "up to the budget in all" are hashed: a file whose size is the
    budget left is within it (``>=`` had skipped it, and its damage went unseen)."""
    from clir.formats.manifest import file_manifest, find_damage

    (tmp_path / "small.bin").write_bytes(b"a" * 10)
    (tmp_path / "big.bin").write_bytes(b"b" * 30)
    files = file_manifest(tmp_path)
    (tmp_path / "big.bin").write_bytes(b"c" * 30)  # same size
    assert find_damage(tmp_path, files, hash_budget=40) == ("big.bin", "differs from the manifest (SHA-256)")
    assert find_damage(tmp_path, files, hash_budget=39) is None  # beyond the budget: sizes only


# ------------------------------------------------------------------------------- features


class _Split:
    """An analyzer that splits on spaces (the language's own loads its lemmas: seconds)."""

    def analyze(self, text: str) -> list[str]:
        return text.split()


def _identity_table(source: list[str], target: list[str], src: str, tgt: str):
    """Word i translates to word i."""
    import scipy.sparse as sp

    from clir.translation import TranslationTable

    n = len(source)
    probs = sp.csr_matrix((np.ones(n), (np.arange(n), np.arange(n))), shape=(n, n))
    return TranslationTable(source, target, probs, src, tgt)


def _idf(df: int, n: int) -> float:
    import math

    return math.log(1.0 + (n - df + 0.5) / (df + 0.5))


def test_text_features_are_each_candidate_s_own_on_each_side():
    """Overlap and proximity columns, by hand, for candidates whose values all differ: a column
    computed from another candidate's tokens, the other side's tokens or idf, the unweighted
    value under the weighted name, or a window one token wider, each gives other numbers."""
    src = {
        "d1": ["s01x", "f", "f", "f", "s02x"],  # both terms 4 apart
        "d2": ["s01x"],
        "d3": ["s02x", *["f"] * 9, "s01x"],  # both terms exactly 10 apart: not in one 10-window
        "d4": ["f"],
    }
    en = {"d1": ["e02x"], "d2": ["e01x", "e02x"], "d3": ["e01x"], "d4": ["e01x"]}
    df_src = {"s01x": 3, "s02x": 2, "f": 3}
    df_en = {"e01x": 3, "e02x": 2}
    tokens = DocumentTokens(src, en, df_src, df_en, 4)
    features = [*OVERLAP_FEATURES, *PROXIMITY_FEATURES]
    queries = [Query("q1", "e01x e02x"), Query("q2", "e02x")]
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d3": 2.0, "d1": 1.0}}
    table = _identity_table(["e01x", "e02x"], ["s01x", "s02x"], "en", "sw")
    data = build_rerank_data(
        queries, run, documents=tokens, table_en_doc=table, doc_lang="sw", features=features,
        en_analyzer=_Split(), progress=False,
    )  # fmt: skip
    first, second = data.queries
    assert first.query_src == ["s01x", "s02x"] and first.docnos == ["d1", "d2", "d3"]
    a, b = _idf(3, 4), _idf(2, 4)  # s01x, s02x
    c, d = _idf(3, 4), _idf(2, 4)  # e01x, e02x (the same counts, the other side's)
    expected = {  # overlap_src, _src_idf, _en, _en_idf, window10_src, window10_en, window20_src, window20_en
        "d1": [1, 1, 0.5, d / (c + d), 1, d / (c + d), 1, d / (c + d)],
        "d2": [0.5, a / (a + b), 1, 1, a / (a + b), 1, a / (a + b), 1],
        "d3": [1, 1, 0.5, c / (c + d), max(a, b) / (a + b), c / (c + d), 1, c / (c + d)],
    }
    assert features == [
        "overlap_src", "overlap_src_idf", "overlap_en", "overlap_en_idf",
        "window10_src", "window10_en", "window20_src", "window20_en",
    ]  # fmt: skip
    np.testing.assert_allclose(first.features, [expected[docno] for docno in first.docnos], rtol=1e-6)
    # the second query's own terms (s02x / e02x alone), for its own candidates in its order
    assert second.docnos == ["d3", "d1"] and second.query_src == ["s02x"]
    np.testing.assert_allclose(second.features, [[1, 1, 0, 0, 1, 0, 1, 0], [1, 1, 1, 1, 1, 1, 1, 1]])
    np.testing.assert_allclose(first.idf_src, [a, b])
    np.testing.assert_allclose(second.idf_en, [d])


def test_document_frequency_counts_a_document_once_however_often_it_repeats_a_term():
    documents = [Document("d1", "s01x s01x s01x s02x"), Document("d2", "s01x")]
    table = _identity_table(["s01x", "s02x"], ["e01x", "e02x"], "sw", "en")
    tokens = DocumentTokens.build(documents, _Split(), table, progress=False)
    assert tokens.src["d1"] == ["s01x", "s01x", "s01x", "s02x"]
    assert (tokens.df_src["s01x"], tokens.df_src["s02x"], tokens.n_docs) == (2, 1, 2)
    assert tokens.en["d1"] == ["e01x", "e01x", "e01x", "e02x"]
    assert (tokens.df_en["e01x"], tokens.df_en["e02x"]) == (2, 1)


# ------------------------------------------------------------------------------- step keys


def test_an_mt_model_replaced_in_place_rekeys_the_baselines_and_the_rerank_data(tmp_path, monkeypatch):
    """The MT models' files digest is in the keys of every step that translates with them: a
    model retrained into the same directory had left the baselines' runs and the rerank data
    (D-hat_en, Q-hat) of the old model in use."""
    import dataclasses

    from test_weak import CONFIGS, plan

    from clir.pipeline.baselines import TranslationConfig
    from clir.pipeline.config import load_experiment
    from clir.translation.mt import MTModels

    for name in ("sw-en", "en-sw", "tl-en"):
        (tmp_path / name).mkdir()
        (tmp_path / name / "config.json").write_text("{}")
    models = {
        "sw": MTModels(to_en=str(tmp_path / "sw-en"), from_en=str(tmp_path / "en-sw")),
        "tl": MTModels(to_en=str(tmp_path / "tl-en")),
    }
    config = dataclasses.replace(
        load_experiment(CONFIGS / "experiment-fast.yaml"), translation=TranslationConfig("mt", models)
    )
    before = plan(config, monkeypatch)
    (tmp_path / "sw-en" / "config.json").write_text('{"d_model": 8}')  # retrained in place
    after = plan(config, monkeypatch)
    changed = {name for name in after if after[name]["key"] != before[name]["key"]}
    assert {"baselines-en-sw", "data-en-sw", "train-full", "rerank-en-sw", "rerank-en-tl"} <= changed
    assert not changed & {"tables-en-sw", "collection-en-sw", "space"}  # (every pair holds every digest)
    assert after["data-en-sw"]["params"]["mt_files"] != before["data-en-sw"]["params"]["mt_files"]


# ------------------------------------------------------------------------------ experiment


def test_a_data_step_holds_the_union_of_each_stage_s_top_depth_and_the_whole_fused_run(monkeypatch):
    """The rerank data's candidates are the union of each first stage's top ``depth``, all of
    them (up to ``depth`` per stage), and ``candidates.<split>.run`` the fusion of the whole
    runs (what the rerank step puts beneath the reranked candidates)."""
    from clir.pipeline import experiment as experiment_module
    from clir.pipeline.baselines import BaselineConfig
    from clir.pipeline.features import fuse_runs
    from clir.training import TrainConfig

    runs = {
        "qt-bm25": {"q": {"a": 4.0, "b": 3.0, "c": 2.0}},
        "psq-bm25": {"q": {"c": 5.0, "d": 4.0, "e": 3.0}},
    }
    written: dict[str, object] = {}
    asked: dict[str, object] = {}

    class Features:
        def __init__(self) -> None:
            self.stages = dict(runs)

    class Saved:
        def save(self, path):
            pass

    def rerank_data(features, queries, **kwargs):
        asked.update(kwargs)
        return Saved()

    class Queries:
        def split(self, name):
            return [Query("q", "text")]

    monkeypatch.setattr(experiment_module.CollectionFeatures, "build", lambda *a, **k: Features())
    monkeypatch.setattr(experiment_module, "search_stage", lambda stage, queries, engine, k: stage)
    monkeypatch.setattr(experiment_module, "collection_rerank_data", rerank_data)
    monkeypatch.setattr(
        experiment_module, "write_run", lambda path, run, tag: written.update({path.name: run})
    )
    config = TrainConfig.from_dict({"data": {"first_stage": ["qt-bm25", "psq-bm25"], "depth": 2}})
    experiment_module.write_rerank_data(
        Path("/nowhere"), Queries(), (None, None), config, BaselineConfig(), ["test"]
    )  # type: ignore[arg-type]
    assert set(asked["candidates"]["q"]) == {"a", "b", "c", "d"}
    assert asked["candidates"] == fuse_runs(list(runs.values()), 2) and asked["depth"] == 4
    assert written["candidates.test.run"] == fuse_runs(list(runs.values()))
    assert set(written["candidates.test.run"]["q"]) == {"a", "b", "c", "d", "e"}


def test_a_system_s_row_is_its_first_member_and_its_ensemble_all(monkeypatch):
    """The rerank step writes ``<system>`` from the first member's scores and
    ``<system>-ensemble`` from every member's; a system of one seed scores one member."""
    from test_weak import CONFIGS

    from clir.pipeline import experiment as experiment_module
    from clir.pipeline.config import load_experiment

    written: dict[str, object] = {}

    class Now:
        def run(self, name, params, build, inputs=(), *, resumable=False):
            build(Path("/nowhere"))

    def scores(members, data, **kwargs):
        return [[member] for member in members]

    for name, value in {
        "member_scores": scores,
        "load_models": lambda path: [f"{path.name}:seed0", f"{path.name}:seed1"],
        "read_run": lambda path: {},
        "combine": lambda rows: tuple(row[0] for row in rows),
        "scores_to_run": lambda data, combined, full: {"members": combined},
        "write_run": lambda path, run, tag: written.update({path.stem: run["members"]}),
        "_system_data": lambda config, system, data: data,
    }.items():
        monkeypatch.setattr(experiment_module, name, value)
    monkeypatch.setattr(experiment_module.SharedSpace, "load", staticmethod(lambda path: None))
    monkeypatch.setattr(experiment_module.RerankData, "load", staticmethod(lambda path: None))
    config = load_experiment(CONFIGS / "experiment-fast.yaml")  # full: seeds 0 and 1
    steps = {s: experiment_module.StepResult(s, s, Path(s), True, 0.0) for s in ("lexical-fusion", "full")}
    step = steps["full"]
    experiment_module._rerank_step(Now(), config, "en-sw", step, step, steps, False, experiment_module.LOCAL)
    assert written == {
        "lexical-fusion": ("lexical-fusion:seed0",),
        "full": ("full:seed0",),
        "full-ensemble": ("full:seed0", "full:seed1"),
    }


def test_a_system_with_dense_reads_the_dense_column_and_the_others_do_not():
    import dataclasses

    from test_weak import CONFIGS

    from clir.pipeline import experiment as experiment_module
    from clir.pipeline.config import load_experiment
    from clir.pipeline.features import DEFAULT_FEATURES

    class Data:
        def select_features(self, names):
            return list(names)

    base = load_experiment(CONFIGS / "experiment-fast.yaml")
    config = dataclasses.replace(base, dense=True, systems={"full": {}, "full+e5": {"with_dense": True}})
    assert experiment_module._system_data(config, "full", Data()) == list(DEFAULT_FEATURES)
    assert experiment_module._system_data(config, "full+e5", Data()) == [*DEFAULT_FEATURES, "e5-dense"]


def test_the_index_cache_is_keyed_by_the_tables_and_the_first_stage_settings(tmp_path, monkeypatch):
    """``CollectionFeatures.cached`` (``clir search``, ``rerank --index-cache``) reuses an index
    step only for the same tables and first-stage settings: QT/PSQ translate queries with the
    en->doc table, DT indexes documents translated with the doc->en one, and the retrievers'
    parameters make the scores (another table or ``mu`` had been served the old index)."""
    from types import SimpleNamespace

    from clir.datasets import Collection
    from clir.pipeline import features as features_module
    from clir.pipeline.baselines import BaselineConfig

    keys: list[str] = []

    class Runner:
        def __init__(self, root, log, wait) -> None:
            pass

        def __enter__(self) -> Runner:
            return self

        def __exit__(self, *exc: object) -> None:
            return None

        def run(self, name, params, build, inputs=()):
            keys.append(cache.step_key(name, params, inputs))
            return cache.StepResult(name, keys[-1], tmp_path, False, 0.0)

    class Analyzer:
        def __init__(self, lang: str) -> None:
            self.lang = lang

        def to_config(self) -> dict[str, str]:
            return {"lang": self.lang}

    monkeypatch.setattr(features_module, "StepRunner", Runner)
    monkeypatch.setattr(features_module, "get_analyzer", Analyzer)
    load = classmethod(lambda cls, *args, **kwargs: SimpleNamespace())
    monkeypatch.setattr(features_module.CollectionFeatures, "load", load)
    collection = Collection(
        "c", "sw", "en", [Document("d1", "s01x s02x")], {"test": [Query("q", "e01x")]}, {}
    )
    tables = (
        _identity_table(["e01x", "e02x"], ["s01x", "s02x"], "en", "sw"),
        _identity_table(["s01x", "s02x"], ["e01x", "e02x"], "sw", "en"),
    )
    other_en_doc = (_identity_table(["e01x", "e02x"], ["s02x", "s01x"], "en", "sw"), tables[1])
    other_doc_en = (tables[0], _identity_table(["s01x", "s02x"], ["e02x", "e01x"], "sw", "en"))

    def key(tables, baseline: BaselineConfig | None = None) -> str:
        features_module.CollectionFeatures.cached(
            collection,
            tmp_path,
            stage_names=["qt-ql"],
            tables=tables,
            baseline=baseline or BaselineConfig(),
            progress=False,
        )
        return keys[-1]

    base = key(tables)
    assert key(tables) == base
    others = [
        key(other_en_doc),
        key(other_doc_en),
        key(tables, BaselineConfig(model_params={"ql": {"mu": 50}})),
        key(tables, BaselineConfig(psq_top_k=3)),
        key(tables, BaselineConfig(spelling=None)),
    ]
    assert len({base, *others}) == 1 + len(others)


# ---------------------------------------------------------------------------------- report


def test_a_significant_loss_is_not_marked_as_an_improvement():
    from clir.pipeline.report import significance_marks

    def test(diff: float) -> dict[str, float]:
        return {"diff": diff, "p_randomization_corrected": 0.001}

    results = {
        "config": {"significance": {"alpha": 0.05}},
        "systems": {"en-sw": {"qt-bm25": {}, "lexical-fusion": {}, "worse": {}, "better": {}}},
        "significance": {
            "en-sw": {
                "best_baseline": "qt-bm25",
                "worse": {"qt-bm25": {"AP": test(-0.2)}, "lexical-fusion": {"AP": test(-0.1)}},
                "better": {"qt-bm25": {"AP": test(0.2)}, "lexical-fusion": {"AP": test(-0.1)}},
            }
        },
    }
    assert significance_marks(results, "en-sw") == {"better": {"AP": "*"}}


def test_the_plots_get_each_run_s_own_per_query_ap(tmp_path, monkeypatch):
    """The AP-difference plot reads each run's per-query AP by name: runs given in another
    order than the report's (by role) keep their own values."""
    from clir.pipeline import report as report_module
    from clir.pipeline.config import ExperimentConfig

    seen = {}

    def plots(out, config, per_query_ap, significance, curves, bli):
        seen.update(per_query_ap)
        return []

    monkeypatch.setattr(report_module, "_plots", plots)
    monkeypatch.setattr(report_module, "write_html_report", lambda *args, **kwargs: None)

    class Pair:
        def __init__(self) -> None:
            self.documents = [Document(d, d) for d in ("rel", "other", "third")]

        def qrels_of(self, split):
            return {"q1": {"rel": 1}, "q2": {"rel": 1}}

    first = {"rel": 3.0, "other": 2.0, "third": 1.0}
    second = {"other": 3.0, "rel": 2.0, "third": 1.0}
    third = {"other": 3.0, "third": 2.0, "rel": 1.0}
    runs = {  # not in the report's order (qt-bm25, dt-bm25, full)
        "full": {"q1": first, "q2": first},
        "dt-bm25": {"q1": third, "q2": second},
        "qt-bm25": {"q1": second, "q2": second},
    }
    report_module.write_report(
        tmp_path, ExperimentConfig(), {"en-sw": runs}, collections={"en-sw": Pair()}, curves={}, bli={},
        timings={}, measures=["AP"],
    )  # fmt: skip
    assert seen["en-sw"] == {
        "qt-bm25": {"q1": 0.5, "q2": 0.5},
        "dt-bm25": {"q1": pytest.approx(1 / 3), "q2": 0.5},
        "full": {"q1": 1.0, "q2": 1.0},
    }

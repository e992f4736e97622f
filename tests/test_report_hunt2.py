"""The experiment's report with ``<system>-ensemble`` rows (a helper's hunt): a system named as a
key of the report's own (``best_baseline``) had crashed the report after every step had run; the
ensemble rows' order and significance families are pinned as the README describes them."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from clir.errors import ConfigError
from clir.pipeline.config import ExperimentConfig, load_experiment
from clir.pipeline.report import write_report
from clir.types import Document, Query

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


class _Pair:
    """What the report reads of a collection: the split's queries, qrels and documents."""

    def __init__(self, qrels):
        self.qrels = qrels
        self.documents = [Document(d, d) for d in ("d1", "d2", "d3", "d4")]

    def qrels_of(self, split):
        return self.qrels

    def split(self, name):
        return [Query(qid, qid) for qid in self.qrels]


def _runs(names, qids):
    """Each run ranks the relevant ``d1`` at a rank of its own per query (so the APs differ)."""
    runs = {}
    for i, name in enumerate(names):
        runs[name] = {}
        for j, qid in enumerate(qids):
            rank = (i + j) % 4
            order = ["d2", "d3", "d4"]
            order.insert(rank, "d1")
            runs[name][qid] = {docno: 4.0 - k for k, docno in enumerate(order)}
    return runs


def _report(tmp_path, systems, names):
    qids = [f"q{i}" for i in range(8)]
    return write_report(
        tmp_path, ExperimentConfig(systems=systems), {"en-sw": _runs(names, qids)},
        collections={"en-sw": _Pair({q: {"d1": 1} for q in qids})}, curves={}, bli={}, timings={},
        measures=["AP"],
    )  # fmt: skip


def test_a_run_named_best_baseline_is_refused_by_the_report(tmp_path):
    # results.json's significance of a pair keeps its best baseline under 'best_baseline' beside
    # the systems' names: a system so named had raised "TypeError: 'str' object does not support
    # item assignment" once every step had run
    systems = {"lexical-fusion": {}}  # (a config refuses the name too: the test below)
    with pytest.raises(ConfigError, match=r"runs\.best_baseline: a name other than 'best_baseline'"):
        _report(tmp_path, systems, ["qt-bm25", "lexical-fusion", "best_baseline"])
    assert not (tmp_path / "results.json").exists()


def test_an_experiment_with_a_system_named_best_baseline_is_refused_when_read():
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    expected = r"systems\.best_baseline='best_baseline' is invalid; expected a name other"
    with pytest.raises(ConfigError, match=expected):
        dataclasses.replace(config, systems={**config.systems, "best_baseline": {}})


def test_ensemble_rows_come_after_the_systems_and_join_every_family(tmp_path):
    # documented order (README "orders the report's systems by role"): lexical runs, the lexical
    # fusion, the components in the config's order, full, then the ensembles in the config's
    # order; each -ensemble row is one more system of each reference's Holm family
    systems = {
        "lexical-fusion": {"ensemble": {"seeds": [0, 1]}},
        "en-en": {"ensemble": {"seeds": [3, 1]}},
        "full": {},
    }
    names = ["full-ensemble", "en-en-ensemble", "full", "lexical-fusion-ensemble", "en-en", "qt-bm25"]
    names.append("lexical-fusion")
    results = _report(tmp_path, systems, names)
    order = list(results["systems"]["en-sw"])
    assert order == [
        "qt-bm25", "lexical-fusion", "en-en", "full",
        "lexical-fusion-ensemble", "en-en-ensemble", "full-ensemble",
    ]  # fmt: skip
    sig = results["significance"]["en-sw"]
    assert sig["best_baseline"] == "qt-bm25"
    against_fusion = [n for n in order if "lexical-fusion" in sig.get(n, {})]
    assert against_fusion == ["en-en", "full", "lexical-fusion-ensemble", "en-en-ensemble", "full-ensemble"]
    against_best = [n for n in order if "qt-bm25" in sig.get(n, {})]
    assert against_best == order[1:]
    html = (tmp_path / "report.html").read_text()
    header = html[html.index('id="queries-en-sw"') :]
    header = header[: header.index("</thead>")]
    positions = [header.index(f">{name}</th>") for name in order]
    assert positions == sorted(positions)  # the explorer's columns in the tables' order


def test_the_explorer_promises_full_s_passage_only_when_there_is_a_full_system(tmp_path):
    # a config without 'full' (its other systems' ensembles reported): the page had said "Click a
    # query for ... the passage full ranked first ... the similarities of full's first passage",
    # which no query held
    _report(tmp_path, {"lexical-fusion": {"ensemble": {"seeds": [0, 1]}}}, ["qt-bm25", "lexical-fusion"])
    html = (tmp_path / "report.html").read_text()
    assert "ranked first by" not in html and "<code>full</code> ranked first" not in html
    assert "no <code>full</code> system, so no passage it ranked first and no similarities" in html
    _report(tmp_path, {"full": {}}, ["qt-bm25", "full"])
    html = (tmp_path / "report.html").read_text()
    assert "the passage <code>full</code> ranked first" in html and "ranked first by full" in html

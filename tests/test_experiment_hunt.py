"""Experiment configs whose results had been silently wrong (a defect hunt): a system named as a
run the report lists beside the systems, the trained pair listed as zero-shot, an earlier
config's bundle and plots left in ``--out``, the BLI rows in the order of the run that built
the reused step."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from clir.errors import ConfigError
from clir.formats.atomic import foreign_entry
from clir.pipeline import experiment as experiment_module
from clir.pipeline.cache import StepResult
from clir.pipeline.config import ExperimentConfig, load_experiment, members
from clir.pipeline.parallel import LOCAL
from clir.types import Document, Query

CONFIGS = Path(__file__).resolve().parents[1] / "configs"


@pytest.mark.parametrize("name", ["qt-bm25", "psq-ql", "dt-bm25", "e5-dense", "full-ensemble"])
def test_a_system_named_as_a_reported_run_is_refused(name):
    # a system 'qt-bm25' had replaced the QT baseline's row with its reranked run (and become the
    # best baseline every system was tested against); 'full-ensemble' had replaced full's ensemble
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    with pytest.raises(ConfigError, match=rf"systems\.{name}='{name}' is invalid; expected a name other"):
        dataclasses.replace(config, systems={**config.systems, name: {"model": {"components": []}}})


def test_the_reported_runs_are_the_experiment_s():
    from clir.pipeline.config import REPORTED_RUNS

    assert experiment_module.DENSE in REPORTED_RUNS and "full-ensemble" in REPORTED_RUNS
    assert ExperimentConfig(systems={"qt-bm25+x": {}, "full-ensembles": {}, "lexical-fusion": {}})


def test_a_system_named_as_another_system_s_ensemble_is_refused():
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    systems = {"a": {"ensemble": {"seeds": [0, 1]}}, "a-ensemble": {}}
    with pytest.raises(
        ConfigError, match=r"systems\.a-ensemble='a-ensemble' is invalid; expected a name other"
    ):
        dataclasses.replace(config, systems=systems)
    assert dataclasses.replace(config, systems={"a": {}, "a-ensemble": {}})  # a of one seed: no ensemble


def test_the_trained_pair_listed_as_zero_shot_is_refused():
    # the report had said 'zero-shot on en-sw, en-tl' of the pair the reranker was trained on
    with pytest.raises(ConfigError, match=r"zero_shot_pairs\[1\]='en-sw' is invalid; expected a pair other"):
        ExperimentConfig(train_pair="en-sw", zero_shot_pairs=("en-tl", "en-sw"))


class _Pair:
    """What the report reads of a collection: the split's queries, qrels and documents."""

    def __init__(self, qrels):
        self.qrels, self.documents = qrels, [Document(d, d) for d in ("rel", "other")]

    def qrels_of(self, split):
        return self.qrels

    def split(self, name):
        return [Query(qid, qid) for qid in self.qrels]


def test_the_plots_of_an_earlier_config_are_removed(tmp_path):
    from clir.pipeline.report import write_report

    for stale in ("ap_diff_en-ny.png", "ap_diff_en-sw.png", "training_curves.png", "bli_frequency.png"):
        (tmp_path / stale).write_bytes(b"\x89PNG old")
    (tmp_path / "mine.png").write_bytes(b"a user's")
    qids = ["q1", "q2"]
    runs = {name: {q: {"rel": 1.0, "other": 0.5} for q in qids} for name in ("qt-bm25", "full")}
    write_report(
        tmp_path, ExperimentConfig(systems={"full": {}}), {"en-sw": runs},
        collections={"en-sw": _Pair({q: {"rel": 1} for q in qids})}, curves={}, bli={}, timings={},
        measures=["AP"],
    )  # fmt: skip
    pngs = sorted(p.name for p in tmp_path.glob("*.png"))
    assert pngs == ["ap_diff_en-sw.png", "mine.png"]  # en-ny's, the curves' and BLI's were stale
    assert (tmp_path / "ap_diff_en-sw.png").read_bytes() != b"\x89PNG old"


@pytest.mark.slow
def test_a_rerun_of_another_config_in_the_same_out_reports_as_a_fresh_run(tmp_path):
    from clir.pipeline.config import WeakConfig

    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    config = dataclasses.replace(
        config,
        zero_shot_pairs=("en-tl", "en-ny"),
        weak=WeakConfig(n_train=20, n_dev=10),
        systems={
            "lexical-fusion": {"model": {"components": []}},
            "full": {"train_on": "weak", "model": {"components": []}},
        },
        ensemble_seeds=(0,),
    )
    out = tmp_path / "out"
    experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)
    # a full system trained on pseudo-queries: its card had named the labelled collection (30
    # train queries it never saw) as its training data
    card = json.loads((out / "bundle" / "config.json").read_text())
    assert card["training_data"]["collection"] == "pseudo-en-sw"
    assert card["training_data"]["queries"] == {"train": 20, "dev": 10}
    # the bundle (its space a copy of the space step, step.json and all) is clir's whole, so a
    # re-run may replace it: its space's step.json had been taken for a user's file
    assert foreign_entry(out / "bundle", "bundle") is None
    fusion = {"model": {"components": []}, "ensemble": {"seeds": [0, 1]}}
    swapped = dataclasses.replace(
        config, zero_shot_pairs=("en-ny", "en-tl"), systems={"lexical-fusion": fusion}
    )
    lines: list[str] = []
    results = experiment_module.run_experiment(swapped, out, progress=False, log=lines.append)
    assert "[cached] bli" in lines
    # the reused BLI step had been built for en-tl before en-ny: its rows kept that order
    sources = list(dict.fromkeys(row["source"] for row in results["bli"]["rows"]))
    assert sources == ["sw", "ny", "tl"]
    assert list(results["bli"]["by_frequency"]) == ["sw", "ny", "tl"]
    assert list(results["systems"]) == ["en-sw", "en-ny", "en-tl"]
    report = (out / "report.md").read_text()
    bli = report[report.index("bilingual lexicon induction") :]
    assert bli.index("| ny |") < bli.index("| tl |")
    # a system trained on two seeds: its first member and the mean of both (only full's had been
    # reported: lexical-fusion's second member was trained and never scored)
    for pair in swapped.pairs:
        assert {"lexical-fusion", "lexical-fusion-ensemble"} <= set(results["systems"][pair])
    assert results["significance"]["en-sw"]["lexical-fusion-ensemble"]["lexical-fusion"]["AP"]["diff"] != 0
    # the first config's bundle (of its full system) and plots are gone, as after a fresh run
    assert not (out / "bundle").exists() and not list(out.glob("ap_diff_*.png"))


def test_a_bundle_in_out_holding_a_users_file_is_refused_before_any_step(tmp_path):
    """The bundle, saved last, replaced out/bundle whole with what the user had put in it; now
    refused at once (nothing built), naming the file."""
    from clir.errors import OutputExistsError
    from clir.formats.atomic import atomic_directory

    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    assert "full" in config.systems and not config.with_dense("full")
    out = tmp_path / "out"
    with atomic_directory(out / "bundle", kind="bundle") as tmp:
        (tmp / "config.json").write_text("{}")
    (out / "bundle" / "notes.txt").write_text("mine")
    with pytest.raises(
        OutputExistsError, match=r"bundle is a clir 'bundle' output holding .*bundle/notes\.txt"
    ):
        experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)
    assert sorted(p.name for p in out.iterdir()) == ["bundle"]
    assert (out / "bundle" / "notes.txt").read_text() == "mine"


class _Keys:
    """A step runner that builds nothing: it records each step's params."""

    def __init__(self) -> None:
        self.params: dict[str, Any] = {}

    def run(self, name, params, build, inputs=(), *, resumable=False):
        self.params[name] = params
        return StepResult(name, "k", Path("/nowhere") / name, True, 0.0)


def test_a_system_cross_validated_on_one_seed_is_reported_as_an_ensemble_of_its_folds():
    # cv.folds 2 of one seed trains a model per fold, which clir rerank of its directory and the
    # bundle average: the experiment had reported its first fold's model alone as the system
    # (the model card's 'full' row too, of a bundle that scores otherwise) and no ensemble row
    folds = {"cv": {"folds": 2}}
    config = ExperimentConfig(
        systems={"full": folds, "fusion": {**folds, "model": {"components": []}}, "one": {}}
    )
    assert [members(config.train_config(s)) for s in config.systems] == [2, 2, 1]
    assert experiment_module.ensemble_systems(config, config.systems) == ["full", "fusion"]
    with pytest.raises(ConfigError, match=r"systems\.fusion-ensemble='fusion-ensemble' is invalid"):
        dataclasses.replace(config, systems={**config.systems, "fusion-ensemble": {}})

    def rerank_params(config: ExperimentConfig) -> dict[str, Any]:
        runner = _Keys()
        train = {s: StepResult(f"train-{s}", s, Path("/nowhere"), True, 0.0) for s in config.systems}
        data = StepResult("data-en-sw", "d", Path("/nowhere"), True, 0.0)
        experiment_module._rerank_step(runner, config, "en-sw", data, data, train, False, LOCAL)
        return runner.params["rerank-en-sw"]

    assert rerank_params(config) == {"split": "test", "ensembles": ["full", "fusion"]}  # keyed anew
    seeds = dataclasses.replace(config, systems={"full": {}, "one": {}}, ensemble_seeds=(0, 1))
    assert experiment_module.ensemble_systems(seeds, seeds.systems) == ["full"]
    assert rerank_params(seeds) == {"split": "test"}  # full's seeds: keys as before


def test_query_counts_the_data_cannot_give_name_the_config_s_keys(tmp_path, capsys):
    # the builders' errors had named their own arguments (n_test=100000, holdout=0.3), which no
    # experiment config has
    from battery_cases import tiny_experiment

    from clir.cli import main

    values = tiny_experiment()
    values["collection"]["n_test"] = 100000
    (tmp_path / "big.yaml").write_text(yaml.safe_dump(values))
    assert main(["experiment", str(tmp_path / "big.yaml"), "--out", str(tmp_path / "a"), "--quiet"]) != 0
    assert capsys.readouterr().err.strip() == (
        "clir: error: asked for 100012 queries (collection.n_train 8, collection.n_dev 4, "
        "collection.n_test 100000) but only 24 passages have a verse usable as a query; lower the "
        "sizes or add books"
    )
    values = tiny_experiment()
    values["weak"] = {"n_train": 20, "n_dev": 2, "holdout": 0.3}
    values["systems"] = {"full": {"train_on": "weak"}}
    (tmp_path / "weak.yaml").write_text(yaml.safe_dump(values))
    assert main(["experiment", str(tmp_path / "weak.yaml"), "--out", str(tmp_path / "b"), "--quiet"]) != 0
    assert capsys.readouterr().err.strip() == (
        "clir: error: weak.n_train 20 and weak.n_dev 2 ask for 22 queries but only 7 passages of 31 "
        "pairs (weak.holdout 0.3) have a pair usable as a query; lower the sizes or give more pairs"
    )


def test_a_device_or_precision_the_machine_cannot_give_is_refused_before_any_step(tmp_path, monkeypatch):
    # a cuda device without CUDA or bf16 on a CPU had been refused at the first training, after
    # the collections, tables, baselines, space and rerank data ('device=...', no config key); a
    # CUDA device with the Ray engine at the first rerank, after every training ('--device')
    import torch

    from clir.pipeline.engine import EngineConfig

    config = load_experiment(CONFIGS / "experiment-fast.yaml")  # its reranker's device: cpu
    out = tmp_path / "out"

    def refused(config: ExperimentConfig, message: str) -> None:
        with pytest.raises(ConfigError, match=message):
            experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)
        assert not out.exists()

    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cuda = dataclasses.replace(config, systems={**config.systems, "full": {"device": "cuda"}})
    refused(cuda, r"^systems\.full\.device: device='cuda' but torch sees no CUDA device")
    reranker = dataclasses.replace(config.reranker, device="auto", precision="bf16")
    refused(
        dataclasses.replace(config, reranker=reranker),
        r"^reranker\.precision: precision='bf16' .* needs CUDA",
    )
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    ray = dataclasses.replace(config, engine=EngineConfig(name="ray", workers=1))
    refused(
        dataclasses.replace(ray, reranker=dataclasses.replace(config.reranker, device="auto")),
        r"^reranker\.device 'auto' is cuda here, and the ray engine's workers score on CPUs \(system "
        r"'lexical-fusion'\); expected 'cpu' with engine\.name 'ray'",
    )


def test_a_base_reranker_s_seeds_that_full_would_not_take_are_refused():
    # full trains on ensemble_seeds: a base reranker's ensemble.seeds [0, 1, 2] had trained full
    # on seed 0 alone beside the other systems on all three, silently
    config = load_experiment(CONFIGS / "experiment-fast.yaml")  # ensemble_seeds [0, 1]
    three = dataclasses.replace(
        config.reranker, ensemble=dataclasses.replace(config.reranker.ensemble, seeds=[0, 1, 2])
    )
    with pytest.raises(
        ConfigError,
        match=r"reranker\.ensemble\.seeds=\[0, 1, 2\] is invalid; expected \[0\] \(the default\) or the "
        r"experiment's ensemble_seeds \(\[0, 1\]\)",
    ):
        dataclasses.replace(config, reranker=three)
    same = dataclasses.replace(config, reranker=three, ensemble_seeds=(0, 1, 2))
    assert [same.train_config(s).ensemble.seeds for s in same.systems] == [[0, 1, 2], [0, 1, 2]]
    fusion = dataclasses.replace(
        config, reranker=three, systems={"lexical-fusion": config.systems["lexical-fusion"]}
    )
    assert fusion.train_config("lexical-fusion").ensemble.seeds == [0, 1, 2]  # no full: its seeds are none's


def test_two_pairs_of_one_document_language_are_refused():
    # the space step keys the collections by document language ({doc_lang: [path]}): with en-tl
    # and en-tl-ulb, the space had been learned from en-tl-ulb's text alone, en-tl's left out
    # silently (and the BLI step's curve of 'tl' was the last pair's)
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    with pytest.raises(
        ConfigError,
        match=r"zero_shot_pairs\[0\]='en-tl-ulb' is invalid; expected a pair whose document language is "
        r"not 'tl', that of train_pair 'en-tl'",
    ):
        dataclasses.replace(config, train_pair="en-tl", zero_shot_pairs=("en-tl-ulb",))
    with pytest.raises(
        ConfigError,
        match=r"zero_shot_pairs\[1\]='en-tl' is invalid; .* that of zero_shot_pairs\[0\] 'en-tl-ulb'",
    ):
        dataclasses.replace(config, zero_shot_pairs=("en-tl-ulb", "en-tl"))
    other = dataclasses.replace(config, train_pair="en-tl-ulb", zero_shot_pairs=("en-sw",))
    assert other.pairs == ["en-tl-ulb", "en-sw"]

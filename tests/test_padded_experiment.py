"""A scale experiment: the ``distractors`` section pads every collection (``clir data pad``) for
the first stages and the reranker, while the tables' parallel text, the space and the
pseudo-queries stay those of the collections as they are."""

from __future__ import annotations

import dataclasses
import json

from test_weak import CONFIGS, plan

from clir.datasets import Collection
from clir.datasets.distractors import DISTRACTOR_PREFIX
from clir.formats import read_run
from clir.pipeline import experiment as experiment_module
from clir.pipeline.config import DistractorsConfig, load_experiment
from clir.training import RerankData


def test_padding_keeps_the_space_and_pseudo_steps_and_rekeys_what_searches(monkeypatch):
    config = load_experiment(CONFIGS / "default.yaml")
    before = plan(config, monkeypatch)
    padded = plan(dataclasses.replace(config, distractors=DistractorsConfig(n=1000)), monkeypatch)
    unchanged = {"space", "pseudo-en-sw", *(f"collection-{p}" for p in ("en-sw", "en-tl", "en-ny"))}
    for step in unchanged:
        assert padded[step]["key"] == before[step]["key"], step
    for pair in ("en-sw", "en-tl", "en-ny"):
        assert padded[f"padded-{pair}"]["inputs"] == [f"collection-{pair}"]
        assert padded[f"padded-{pair}"]["params"] == {"n": 1000, "seed": 0, "bigram": 0.5}
        assert padded[f"tables-{pair}"]["inputs"] == [f"padded-{pair}"]
        for step in (f"tables-{pair}", f"baselines-{pair}", f"data-{pair}", f"rerank-{pair}"):
            assert padded[step]["key"] != before[step]["key"], step
    assert set(padded) - set(before) == {"padded-en-sw", "padded-en-tl", "padded-en-ny"}


def test_a_padded_experiment_end_to_end(tmp_path):
    config = load_experiment(CONFIGS / "experiment-fast.yaml")
    config = dataclasses.replace(
        config,
        zero_shot_pairs=(),
        systems={"lexical-fusion": {"model": {"components": []}}},
        ensemble_seeds=(0,),
        distractors=DistractorsConfig(n=400, seed=3),
    )
    out = tmp_path / "padded"
    results = experiment_module.run_experiment(config, out, progress=False, log=lambda line: None)
    index = json.loads((out / "steps" / "index.json").read_text())
    original = Collection.load(out / "steps" / index["collection-en-sw"] / "collection")
    padded = Collection.load(out / "steps" / index["padded-en-sw"] / "collection")
    extra = padded.documents[len(original.documents) :]
    assert padded.documents[: len(original.documents)] == original.documents
    assert len(extra) == 400 and all(d.docno.startswith(DISTRACTOR_PREFIX) for d in extra)
    assert padded.qrels == original.qrels and padded.all_queries() == original.all_queries()
    # the first stages searched the padded collection: distractors come up, and are never judged
    baselines = out / "steps" / index["baselines-en-sw"]
    run = read_run(next(baselines.rglob("qt-bm25.run")))
    retrieved = {d for ranking in run.values() for d in ranking}
    assert any(d.startswith(DISTRACTOR_PREFIX) for d in retrieved)
    # the rerank data holds the tokens of its candidates (distractors among them), nothing else
    data = RerankData.load(out / "steps" / index["data-en-sw"] / "test")
    candidates = {d for query in data.queries for d in query.docnos}
    assert set(data.doc_src) == candidates and any(d.startswith(DISTRACTOR_PREFIX) for d in candidates)
    reranked = read_run(out / "steps" / index["rerank-en-sw"] / "runs" / "lexical-fusion.run")
    assert set(reranked) == {q.qid for q in original.split("test")}
    assert 0 < results["systems"]["en-sw"]["lexical-fusion"]["AP"] <= 1

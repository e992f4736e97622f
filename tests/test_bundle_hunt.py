"""Defects of a hunt over the bundle, ``clir search`` and ``clir explain``: the numbers these
paths print must be those of the experiment's own runs."""

from __future__ import annotations

import pytest
from test_bundle import _explain_argv
from test_union import tiny_reranker_config, tiny_world

from clir.cli import main
from clir.formats import ranked
from clir.pipeline.explain import explain_pair
from clir.pipeline.features import rerank_collection, train_reranker
from clir.training import TrainConfig


@pytest.fixture(scope="module")
def ensemble(tmp_path_factory):
    """A three-member ensemble of the tiny en-sw world, with its pieces on disk."""
    root = tmp_path_factory.mktemp("ensemble")
    collection, tables, space = tiny_world()
    collection.save(root / "sw")
    tables[0].save(root / "tables" / "en-doc")
    tables[1].save(root / "tables" / "doc-en")
    space.save(root / "space")
    config = TrainConfig.from_dict({**tiny_reranker_config().to_dict(), "ensemble": {"seeds": [0, 1, 2]}})
    model = train_reranker(config, collection, space, root / "model", tables=tables)
    return root, model, collection, space, tables


def _ranks(run, qid):
    return {docno: rank for rank, (docno, _) in enumerate(ranked(run[qid]), start=1)}


def test_explain_ranks_a_document_as_the_ensembles_run_does(ensemble, capsys):
    """explain printed the first member's rank for an ensemble: on runs/default's en-sw
    Q06001001 with a two-member ensemble (full's seed0 and weak-full's), B06C008V016 printed
    "rank 47" where the ensemble's run (clir rerank) ranks it 40, B06C004V011 11 for 10."""
    root, model, collection, space, tables = ensemble
    run = rerank_collection(model, collection, space, split="test", tables=tables)
    first = rerank_collection(model / "seed0", collection, space, split="test", tables=tables)
    depth = tiny_reranker_config().data.depth
    qid = next(
        q.qid
        for q in collection.split("test")
        if [d for d, _ in ranked(run[q.qid])[:depth]] != [d for d, _ in ranked(first[q.qid])[:depth]]
    )  # a query whose candidates the first member orders otherwise than the ensemble
    ranks = _ranks(run, qid)
    explained = {
        docno: explain_pair(model, collection, space, qid, docno, tables_dir=root / "tables")
        for docno, _ in ranked(run[qid])[:depth]
    }
    assert {docno: e.rank for docno, e in explained.items() if e.candidate} == {
        docno: ranks[docno] for docno, e in explained.items() if e.candidate
    }
    assert {e.members for e in explained.values()} == {3}
    docno = next(d for d, e in explained.items() if e.candidate and _ranks(first, qid)[d] != ranks[d])
    main([*_explain_argv(root, model), "--tables", str(root / "tables"), "--qid", qid, "--docno", docno])
    out = capsys.readouterr().out
    assert f"rank {ranks[docno]} among" in out and "an ensemble of 3 models" in out

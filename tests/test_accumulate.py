"""Exact BM25 top-k by accumulation with MaxScore candidate bounds (clir.retrieval.accumulate):
the same documents and the same scores, to the bit, as the exhaustive scoring, on random
collections (hypothesis), against rank-bm25, with floors, and over shards."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import scipy.sparse as sp
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import clir.retrieval.accumulate as accumulate
import clir.retrieval.base as base
from clir.formats import write_run
from clir.retrieval import BM25
from clir.retrieval.accumulate import accumulate_topk, max_weights
from clir.retrieval.shards import ShardedIndex, ShardedRetriever

WORDS = [f"w{i}" for i in range(15)]


def collection(seed: int, n_docs: int) -> tuple[list[str], list[list[str]], dict[str, list[str]]]:
    """Zipf documents (a few very common words, many rare ones: the essential terms of MaxScore
    vary, and lengths and tfs repeat, so scores tie), docnos in shuffled order, and queries of
    1-5 words, some repeated, some unseen."""
    rng = np.random.default_rng(seed)
    p = 1 / np.arange(1, len(WORDS) + 1) ** 1.3
    p /= p.sum()
    docs = [list(rng.choice(WORDS, size=int(rng.integers(1, 12)), p=p)) for _ in range(n_docs)]
    docnos = [f"d{i:04d}" for i in rng.permutation(n_docs)]
    queries = {f"q{i}": list(rng.choice([*WORDS, "unseen"], size=int(rng.integers(1, 6)))) for i in range(12)}
    return docnos, docs, queries


def exhaustive_topk(retriever: BM25, queries: list[list[str]], k: int) -> list[tuple[list[str], list[float]]]:
    """The reference: every document's score from the sparse product (``score``), the matching
    ones sorted by score, then docno, both descending (trec_eval's order), the first ``k``."""
    dense = retriever.score(queries)
    docnos = retriever.index_.docnos
    out = []
    for row in dense:
        listed = np.flatnonzero(row != 0)
        order = sorted(listed, key=lambda j: (row[j], docnos[j]), reverse=True)[:k]
        out.append(([str(docnos[j]) for j in order], [float(row[j]) for j in order]))
    return out


@pytest.fixture(params=["compiled", "public"])
def accumulate_always(monkeypatch, request):
    """Route every batch of plain queries to accumulate_topk and the others to sparse_topk (tiny
    collections would be ranked densely otherwise); postings added by scipy's private compiled
    kernel, or by ``np.add.at`` as where a scipy lacks it."""
    monkeypatch.setattr(base, "MIN_DOCS", 1)
    monkeypatch.setattr(base, "prefer_dense", lambda n_docs, matches: False)
    if request.param == "public":
        monkeypatch.setattr(accumulate, "csc_matvec", None)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 100_000),
    n_docs=st.integers(1, 80),
    k=st.integers(1, 90),
    idf=st.sampled_from(["okapi", "lucene"]),
    k1=st.sampled_from([0.0, 0.9, 1.5]),
    b=st.sampled_from([0.0, 0.75, 1.0]),
)
def test_same_documents_and_scores_as_exhaustive_scoring(accumulate_always, seed, n_docs, k, idf, k1, b):
    docnos, docs, queries = collection(seed, n_docs)
    retriever = BM25(k1=k1, b=b, idf=idf).index(docnos, docs, progress=False)
    qs = list(queries.values())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # queries of unseen words only
        got = retriever.retrieve(qs, k=k)
    for i, (ref_docnos, ref_scores) in enumerate(exhaustive_topk(retriever, qs, k)):
        assert got.docnos[i].tolist() == ref_docnos, (i, qs[i])
        assert got.scores[i].tolist() == ref_scores  # to the bit
    if idf == "okapi" and k1 > 0:  # rank-bm25's BM25Okapi (0/0 at k1 = 0): the same top k
        check_against_rank_bm25(docnos, docs, qs, got, k, k1=k1, b=b)


def check_against_rank_bm25(docnos, docs, queries, got, k, **params) -> None:
    """Each listed document has rank-bm25's score, and no unlisted matching document scores
    more than the k-th listed one (rank-bm25 sums in another order: ties may break otherwise)."""
    from rank_bm25 import BM25Okapi

    reference = BM25Okapi(docs, **params)
    position = {docno: j for j, docno in enumerate(docnos)}
    for i, query in enumerate(queries):
        scores = reference.get_scores(query)
        listed = [position[d] for d in got.docnos[i].tolist()]
        np.testing.assert_allclose(got.scores[i], scores[listed], rtol=0, atol=1e-9)
        matching = [j for j in range(len(docs)) if set(query) & set(docs[j]) and abs(scores[j]) > 1e-12]
        assert len(listed) == min(k, len(matching))
        if len(listed) == k:
            rest = sorted(set(matching) - set(listed))
            assert (scores[rest] <= got.scores[i][-1] + 1e-9).all()


def test_negative_idf_and_ties_at_the_cut(accumulate_always):
    # okapi idf is negative for a word in most documents and floored at epsilon * mean idf,
    # which is negative here: contributions of either sign, where no MaxScore bound applies.
    docs = [["a", "b", "c"], ["a", "b"], ["a", "b"], ["a", "b"], ["a", "b"], ["a"]]
    docnos = ["d1", "d2", "d3", "d4", "d5", "d6"]
    retriever = BM25(idf="okapi").index(docnos, docs, progress=False)
    assert retriever.idf_of(np.array([6.0, 5.0])).tolist() == [retriever._idf_floor] * 2
    assert retriever._idf_floor < 0
    queries = [["a"], ["a", "c"], ["b", "c"], ["c"], ["c", "a", "a"]]
    for k in range(1, 7):
        got = retriever.retrieve(queries, k=k)
        for i, (ref_docnos, ref_scores) in enumerate(exhaustive_topk(retriever, queries, k)):
            assert got.docnos[i].tolist() == ref_docnos
            assert got.scores[i].tolist() == ref_scores
    # "a" once in each: the longest document scores least below 0, the four of length 2 tie
    # (docno descending), the shortest is last
    assert retriever.retrieve([["a"]], k=6).docnos[0].tolist() == ["d1", "d5", "d4", "d3", "d2", "d6"]


def test_matches_rank_bm25_on_a_larger_collection(accumulate_always):
    docnos, docs, _ = collection(7, 400)
    rng = np.random.default_rng(8)
    queries = [list(rng.choice(WORDS, size=int(rng.integers(1, 5)))) for _ in range(30)]
    retriever = BM25(k1=1.5, b=0.75, idf="okapi").index(docnos, docs, progress=False)
    got = retriever.retrieve(queries, k=25)
    assert sum(len(row) == 25 for row in got.docnos) >= 25  # the comparison is not vacuous
    check_against_rank_bm25(docnos, docs, queries, got, 25, k1=1.5, b=0.75)


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 100_000), n_docs=st.integers(1, 60), k=st.integers(1, 40), cut=st.floats(0, 1))
def test_a_floor_lists_the_top_k_that_reach_it(seed, n_docs, k, cut):
    docnos, docs, queries = collection(seed, n_docs)
    retriever = BM25(idf="lucene").index(docnos, docs, progress=False)
    weights, bounds = retriever._weights, max_weights(retriever._weights)
    plan = retriever._compile(list(queries.values()))
    n, kk = len(queries), min(k, n_docs)
    ids, scores = _out(n, kk)
    counts = accumulate_topk(weights, bounds, plan.eager, kk, ids, scores)
    floor = np.quantile(retriever.score(list(queries.values())), cut, axis=1)  # none to all
    floored_ids, floored_scores = _out(n, kk)
    floored = accumulate_topk(weights, bounds, plan.eager, kk, floored_ids, floored_scores, floor)
    for r in range(n):
        reached = scores[r, : counts[r]] >= floor[r]
        assert floored[r] == reached.sum()
        assert floored_scores[r, : floored[r]].tolist() == scores[r, : counts[r]][reached].tolist()
        assert floored_ids[r, : floored[r]].tolist() == ids[r, : counts[r]][reached].tolist()


def _out(n: int, k: int) -> tuple[np.ndarray, np.ndarray]:
    return np.zeros((n, k), dtype=np.int64), np.empty((n, k))


def test_max_weights_of_rows_empty_rows_zero():
    weights = sp.csr_matrix(np.array([[0.5, 0.0, 2.0], [0.0, 0.0, 0.0], [1.0, 3.0, 0.0]]))
    assert max_weights(weights).tolist() == [2.0, 0.0, 3.0]


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    seed=st.integers(0, 100_000),
    n_docs=st.integers(1, 70),
    shard_docs=st.integers(1, 40),
    k=st.integers(1, 60),
    workers=st.integers(1, 3),
)
def test_shards_searched_with_floors_give_the_exhaustive_run_byte_for_byte(
    tmp_path_factory, accumulate_always, seed, n_docs, shard_docs, k, workers
):
    tmp = tmp_path_factory.mktemp("shards")
    docnos, docs, queries = collection(seed, n_docs)
    if seed % 2:  # a PSQ term: the batch is ranked by sparse_topk, with the floors too
        queries["psq"] = [{"w0": 0.5, "w4": 0.3, "w9": 0.2}, "w2"]
    single = BM25().index(docnos, docs, progress=False)
    reference = exhaustive_topk(single, list(queries.values()), k)
    expected = {qid: dict(zip(*ranked, strict=True)) for qid, ranked in zip(queries, reference, strict=True)}
    index = ShardedIndex.build(
        tmp / "idx", zip(docnos, docs, strict=True), shard_docs=shard_docs, progress=False
    )
    sharded = ShardedRetriever("bm25", workers=workers).use_index(index)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        got = sharded.search(queries, k=k)
    assert got == expected
    write_run(tmp / "single", expected)
    write_run(tmp / "sharded", got)
    assert (tmp / "single").read_bytes() == (tmp / "sharded").read_bytes()

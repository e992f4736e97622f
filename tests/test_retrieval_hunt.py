"""Defects of a first-stage hunt on unusual but legal inputs, each against a brute-force reference."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from clir.errors import ConfigError
from clir.retrieval import get_retriever
from clir.translation.document import translate_tokens_expected, translate_tokens_top1
from clir.translation.table import TranslationTable

DOCS = [["a", "b", "c"], ["a", "b"], ["a", "b", "d"], ["c", "d"]]
DOCNOS = ["d1", "d2", "d3", "d4"]


def _bm25(tf: float, doc_len: float, avgdl: float, idf: float, k1: float = 1.5, b: float = 0.75) -> float:
    return idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * doc_len / avgdl))


@pytest.mark.parametrize("idf", ["okapi", "lucene"])
def test_psq_weights_summing_above_one_score_as_a_term_in_every_document(idf):
    # {a: 0.9, b: 0.9}: df = 0.9 * 3 + 0.9 * 3 = 5.4 > N = 4; okapi's log(N - df + 0.5) had been
    # NaN, and the dense ranking had then listed d4, which holds neither term, at -inf
    retriever = get_retriever("bm25", idf=idf).index(DOCNOS, DOCS, progress=False)
    run = retriever.search({"q": [{"a": 0.9, "b": 0.9}]}, k=10)["q"]
    n = len(DOCS)
    if idf == "okapi":
        raw = [math.log(n - df + 0.5) - math.log(df + 0.5) for df in (3, 3, 2, 2)]  # a, b, c, d
        term_idf = 0.25 * sum(raw) / len(raw)  # a term in every document: floored
    else:
        term_idf = math.log1p(0.5 / (n + 0.5))
    avgdl = sum(map(len, DOCS)) / n
    pairs = zip(DOCNOS, DOCS, strict=True)
    expected = {docno: _bm25(1.8, len(doc), avgdl, term_idf) for docno, doc in pairs if "a" in doc}
    assert set(run) == set(expected)
    assert all(math.isfinite(score) for score in run.values())
    assert run == pytest.approx(expected, rel=1e-12)
    assert np.isfinite(retriever.score([[{"a": 0.9, "b": 0.9}]])).all()


def test_a_weight_float32_rounds_to_zero_is_no_posting():
    # 1e-50 had been stored as a posting of tf 0 counted in a's df (2 of 4, okapi idf 0): 'x',
    # which holds a, was not retrieved at all
    docs = [{"a": 1e-50, "b": 1.0}, {"a": 1.0}, {"b": 2.0}, {"c": 1.0}]
    retriever = get_retriever("bm25").index(["w", "x", "y", "z"], docs, progress=False)
    index = retriever.index_
    assert index.df[index.term_id("a")] == 1
    avgdl = (1.0 + 1e-50 + 1.0 + 2.0 + 1.0) / 4
    raw = [math.log(4 - df + 0.5) - math.log(df + 0.5) for df in (2, 1, 1)]  # b, a, c
    expected = _bm25(1.0, 1.0, avgdl, raw[1])
    assert retriever.search({"q": ["a"]}, k=10)["q"] == pytest.approx({"x": expected}, rel=1e-12)


@pytest.mark.parametrize("model", ["bm25", "ql"])
def test_a_weight_beyond_float32_is_refused(model):
    # 1e39 had become an inf tf: BM25 listed only 'z', which lacks the term, at -inf; QL gave NaN
    with pytest.raises(ConfigError, match=r"weight of term 'a' must be finite and >= 0 .*largest float32"):
        get_retriever(model).index(["w", "z"], [{"a": 1e39, "b": 1.0}, {"c": 1.0}], progress=False)


def test_an_infinite_mu_is_refused():
    # QL with mu = inf (a config's .inf, a first_stage.json's Infinity) scored every document NaN
    with pytest.raises(ConfigError, match="mu must be finite, got inf"):
        get_retriever("ql", mu=math.inf)


@pytest.mark.parametrize(
    ("model", "params", "message"),
    [
        ("bm25", {"k1": 1e308}, r"k1 must be at most 1e\+100, got 1e\+308"),
        ("bm25", {"epsilon": 1e308}, r"epsilon must be at most 1e\+100, got 1e\+308"),
        ("ql", {"mu": 1e-320}, r"mu must be at least 1e-100, got 1e-320"),
    ],
)
def test_parameters_that_overflow_the_weights_are_refused(model, params, message):
    # k1 = 1e308 made tf (k1 + 1) infinite: 'a' listed d2 and d3 (which lacks 'a') at -inf, not
    # d1; mu = 1e-320 made 1 / (mu P(t|C)) infinite: NaN and inf scores
    with pytest.raises(ConfigError, match=message):
        get_retriever(model, **params)


def test_the_extreme_parameters_taken_give_finite_scores():
    docs = [["a", "a", "b"], ["a", "c"], ["b"]]
    bm25 = get_retriever("bm25", k1=1e100, epsilon=1e100).index(["d1", "d2", "d3"], docs, progress=False)
    # okapi: every idf floored at epsilon * mean idf, mean of (-0.51, -0.51, 0.51) < 0; the
    # saturated tf is tf / L: d1 2 / (0.25 + 0.75 * 3 / 2) = 2 / 1.375, d2 1 / 1
    floor = 1e100 * np.mean(np.log(np.array([1.5, 1.5, 2.5])) - np.log(np.array([2.5, 2.5, 1.5])))
    assert bm25.search({"q": ["a"]}, k=3)["q"] == pytest.approx({"d2": floor, "d1": floor * 2 / 1.375})
    assert list(bm25.search({"q": ["a"]}, k=3)["q"]) == ["d2", "d1"]
    ql = get_retriever("ql", mu=1e-100).index(["d1", "d2", "d3"], docs, progress=False)
    scores = ql.score([["a"], ["a", "zz"]])
    assert np.isfinite(scores).all()
    # P(a|C) = 3 / 6: d1 log((2 + mu / 2) / (3 + mu)) = log(2 / 3), d2 log(1 / 2)
    assert scores[0, :2] == pytest.approx([math.log(2 / 3), math.log(1 / 2)])


def test_a_stored_zero_is_no_translation_for_dt_either():
    # row x holds explicit zeros only: QT, PSQ and expected counts pass x through, but DT's
    # top-1 had translated it into y, a translation of probability 0
    probs = sp.csr_matrix((np.array([0.0, 0.0, 1.0]), np.array([0, 1, 1]), np.array([0, 2, 3])), shape=(2, 2))
    table = TranslationTable(["x", "w"], ["y", "z"], probs, "sw", "en")
    assert table.translations("x") == []
    assert "x" not in table
    assert translate_tokens_top1(["x", "w"], table) == ["x", "z"]
    assert translate_tokens_expected(["x", "w"], table) == {"x": 1.0, "z": 1.0}


def test_a_docno_holding_a_nul_is_refused_not_renamed_into_another_documents_name(tmp_path):
    # numpy's strings drop a trailing NUL: 'd1\0' had been indexed as 'd1', so that the run
    # listed 'd1' twice (two documents, one name; a run dict keeps one of them) and a lone
    # 'd1\0' came back as 'd1'
    docs = [["a"], ["a", "b"], ["c"]]
    with pytest.raises(ConfigError, match=r"docno 'd1\\x00' holds a NUL character"):
        get_retriever("bm25").index(["d1", "d1\0", "d2"], docs, progress=False)
    with pytest.raises(ConfigError, match="holds a NUL character"):
        get_retriever("bm25").index(["d\x001"], [["a"]], progress=False)
    from clir.retrieval.shards import ShardedIndex

    with pytest.raises(ConfigError, match="holds a NUL character"):
        ShardedIndex.build(tmp_path / "shards", zip(["d1", "d1\0"], docs[:2], strict=True), shard_docs=1)
    retriever = get_retriever("bm25").index(["d1", "d2", "d3"], docs, progress=False)
    assert list(retriever.retrieve([["a"]], k=3).docnos[0]) == ["d1", "d2"]  # indexed as given

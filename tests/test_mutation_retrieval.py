"""Tests written by a mutation-testing hunt over clir.retrieval, clir.translation and clir.text:
each pins down a behaviour that a small deliberate change of the source (named in the test's
docstring) left every earlier test passing. Values are worked by hand or taken from rank-bm25,
the reference clir's BM25 agrees with."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp
from rank_bm25 import BM25Okapi

from clir.errors import TermlessQueriesWarning
from clir.retrieval import BM25, FirstStage, QueryLikelihood, SparseIndex
from clir.text import get_analyzer
from clir.translation.ibm1 import IBMModel1
from clir.translation.table import TranslationTable
from clir.types import Document, Query

# --- BM25 (okapi idf) against rank-bm25 ------------------------------------------------------------

# Six documents; "a" is in 5 of them and "b" in 4 (negative raw idf: floored), "c" in 3 (idf 0).
_DOCS = [
    ["a", "b", "c", "d"],
    ["a", "b", "c"],
    ["a", "b", "e", "e", "f"],
    ["a", "c", "g"],
    ["a", "b", "h", "i", "j", "k"],
    ["l", "m"],
]
_DOCNOS = [f"d{i}" for i in range(len(_DOCS))]
_QUERIES = [["a"], ["b", "e"], ["c", "d", "a"], ["m", "a", "a"], ["k", "g"]]


def _rank_bm25_scores(docs, queries, **params) -> np.ndarray:
    reference = BM25Okapi(docs, **params)
    return np.array([reference.get_scores(q) for q in queries])


@pytest.mark.parametrize("epsilon", [0.0, 0.25, 0.6])
def test_bm25_okapi_epsilon_is_rank_bm25s_floor_factor(epsilon):
    """Kills a floor of ``0.25 * mean idf`` whatever ``epsilon`` (only the default was compared)."""
    retriever = BM25(k1=1.2, b=0.5, epsilon=epsilon).index(_DOCNOS, _DOCS, progress=False)
    expected = _rank_bm25_scores(_DOCS, _QUERIES, k1=1.2, b=0.5, epsilon=epsilon)
    np.testing.assert_allclose(retriever.score(_QUERIES), expected, rtol=0, atol=1e-12)


def test_bm25_okapi_floor_mean_leaves_out_terms_no_document_holds():
    """The floor is ``epsilon`` times the mean idf of the terms the collection holds (rank-bm25's
    vocabulary): an index from token ids whose vocabulary has unused terms (df 0, a large idf)
    must score as rank-bm25 on the same documents. Kills a mean over every vocabulary entry."""
    vocab = [chr(ord("a") + i) for i in range(13)] + ["unused1", "unused2", "unused3"]
    ids = {t: i for i, t in enumerate(vocab)}
    token_ids = [np.array([ids[t] for t in doc], dtype=np.int64) for doc in _DOCS]
    index = SparseIndex.from_token_ids(_DOCNOS, token_ids, vocab, progress=False)
    assert (index.df == 0).sum() == 3
    retriever = BM25().use_index(index)
    expected = _rank_bm25_scores(_DOCS, _QUERIES)
    assert (expected[0] > 0).sum() == 5  # "a" scores with the floor, not 0
    np.testing.assert_allclose(retriever.score(_QUERIES), expected, rtol=0, atol=1e-12)


def test_bm25_okapi_idf_of_a_term_in_half_the_documents_is_zero_not_floored():
    """rank-bm25 floors only negative idfs: ``log((6 - 3 + .5) / (3 + .5)) = 0`` stays 0."""
    retriever = BM25().index(_DOCNOS, _DOCS, progress=False)
    assert retriever.idf_of(np.array([3.0]))[0] == 0.0
    assert retriever.idf_of(np.array([4.0]))[0] == pytest.approx(0.25 * BM25Okapi(_DOCS).average_idf)
    assert len(retriever.retrieve([["c"]], k=6).docnos[0]) == 0  # every score 0: nothing matches
    assert math.isclose(BM25Okapi(_DOCS).idf["c"], 0.0, abs_tol=1e-15)


# --- PSQ terms of weight 0 ---------------------------------------------------------------------------


@pytest.mark.parametrize("model", [BM25(), QueryLikelihood(mu=10.0)])
def test_psq_term_whose_known_translations_all_weigh_zero_is_no_term_in_the_index(model):
    """``{a: 0.0}`` has no translation in the index (a weight 0 is none): the query lists nothing
    and is warned about, even under query likelihood (which ranks every document of a query with a
    term). Kills keeping ``p == 0`` translations (``p >= 0``), which had QL list all 6 documents."""
    retriever = model.index(_DOCNOS, _DOCS, progress=False)
    with pytest.warns(TermlessQueriesWarning):
        results = retriever.retrieve([[{"a": 0.0, "b": 0.0}], [{"a": 0.0, "zzz": 1.0}]], k=6)
    assert [len(row) for row in results.docnos] == [0, 0]
    # with one translation of weight > 0 the query has a term: the weight-0 one changes nothing
    np.testing.assert_array_equal(retriever.score([[{"a": 0.0, "b": 0.5}]]), retriever.score([[{"b": 0.5}]]))


def test_psq_query_scores_do_not_depend_on_the_other_queries_of_its_batch():
    """A query's PSQ terms are summed in one fixed order, whatever order other queries of its
    batch name them in: its scores are the same to the bit alone or in any batch. Kills
    compiling PSQ terms in the batch's first-seen order."""
    rng = np.random.default_rng(3)
    vocab = [f"t{i}" for i in range(12)]
    docs = [list(rng.choice(vocab, size=int(rng.integers(3, 15)))) for _ in range(60)]
    docnos = [f"d{i:02d}" for i in range(60)]
    psq = [
        {"t0": 0.3, "t1": 0.7},
        {"t2": 0.55, "t3": 0.25, "t4": 0.2},
        {"t5": 0.9, "t6": 0.1},
        {"t7": 0.6, "t8": 0.4},
    ]
    query = [*psq, "t9"]
    for retriever in (BM25(k1=0.9, b=0.4), QueryLikelihood(mu=7.0)):
        retriever.index(docnos, docs, progress=False)
        alone = retriever.score([query])[0]
        batched = retriever.score([[*reversed(psq)], [psq[2], psq[0]], query])[2]
        np.testing.assert_array_equal(batched, alone)
        ranked = retriever.retrieve([[*reversed(psq)], query], k=60)
        np.testing.assert_array_equal(ranked.scores[1], retriever.retrieve([query], k=60).scores[0])


# --- IBM Model 1: repeated words, by hand -----------------------------------------------------------


def test_ibm1_two_iterations_with_repeated_words_by_hand():
    """EM weighs each source type by its count in the sentence and each target type's posterior
    by its count (the earlier hand test had no repeated word). Kills dropping either count.

    a a b / x x y and b / y, no NULL, t = 1/2. Iteration 1, sentence 1: x is a's with
    2 (1/2) / (2 (1/2) + 1/2) = 2/3 (twice), y the same; counts (a,x) 4/3, (a,y) 2/3,
    (b,x) 2/3, (b,y) 1/3 + 1: t(x|a) = 2/3, t(x|b) = 1/3. Iteration 2: x is a's with
    (4/3) / (4/3 + 1/3) = 4/5, y with (2/3) / (4/3) = 1/2: t(x|a) = 1.6 / 2.1, t(x|b) = 0.4 / 1.9.
    """
    source, target = [["a", "a", "b"], ["b"]], [["x", "x", "y"], ["y"]]
    one = IBMModel1(iterations=1, null=False, progress=False).fit(source, target)
    assert dict(one.table_.translations("a")) == pytest.approx({"x": 2 / 3, "y": 1 / 3})
    assert dict(one.table_.translations("b")) == pytest.approx({"x": 1 / 3, "y": 2 / 3})
    two = IBMModel1(iterations=2, null=False, progress=False).fit(source, target)
    assert dict(two.table_.translations("a")) == pytest.approx({"x": 16 / 21, "y": 5 / 21})
    assert dict(two.table_.translations("b")) == pytest.approx({"x": 4 / 19, "y": 15 / 19})
    # each target token's likelihood is sum_e c_e t(f|e) / |source|: 1/2 under t = 1/2; then
    # sentence 1: x (4/3 + 1/3) / 3 = 5/9 twice, y (2/3 + 2/3) / 3 = 4/9; sentence 2: y 2/3
    assert two.log_likelihoods_[0] == pytest.approx(4 * math.log(0.5))
    assert two.log_likelihoods_[1] == pytest.approx(2 * math.log(5 / 9) + math.log(4 / 9) + math.log(2 / 3))


def test_ibm1_null_word_by_hand():
    """NULL is one more source word of every sentence, counted once however long it is.

    a / x y and a a / x, t = 1/2 over {x, y}. Sentence 1: each target token is NULL's or a's
    with 1/2; sentence 2 (NULL once, a twice): x is NULL's with 1/3, a's with 2/3. Counts
    (NULL,x) 1/2 + 1/3, (NULL,y) 1/2, (a,x) 1/2 + 2/3, (a,y) 1/2.
    """
    model = IBMModel1(iterations=1, null=True, progress=False).fit([["a"], ["a", "a"]], [["x", "y"], ["x"]])
    assert model.table_.source_vocab == ["a"]
    assert dict(model.table_.translations("a")) == pytest.approx({"x": 7 / 10, "y": 3 / 10})
    null = dict(zip(model.table_.target_vocab, model.null_probs_.tolist(), strict=True))
    assert null == pytest.approx({"x": 5 / 8, "y": 3 / 8})
    # 3 target tokens, each of likelihood (t(f|NULL) + c_a t(f|a)) / (len + 1) = 1/2
    assert model.log_likelihoods_[0] == pytest.approx(3 * math.log(0.5))


def test_from_weights_normalises_rows_of_huge_and_subnormal_weights():
    """Rows are scaled by a power of two before summing: ``1e308 + 1e308`` would overflow to inf
    (every probability 0) and ``1 / 4e-320`` to inf. Kills leaving out that scaling."""
    table = TranslationTable.from_weights(
        [("big", "a", 1e308), ("big", "b", 1e308), ("tiny", "a", 1e-320), ("tiny", "b", 3e-320)], "xx", "yy"
    )
    assert dict(table.translations("big")) == {"a": 0.5, "b": 0.5}
    assert dict(table.translations("tiny")) == pytest.approx({"a": 0.25, "b": 0.75}, rel=1e-3)
    np.testing.assert_allclose(np.asarray(table.probs.sum(axis=1)).ravel(), 1.0)


# --- analyzers ----------------------------------------------------------------------------------------


def test_a_word_whose_stem_is_a_stopword_is_dropped():
    """``doing``, ``having`` and ``seeing`` are no stopwords, but their stems ``do``, ``have`` and
    ``see`` are: analyze drops them. Kills checking stopwords only before normalising."""
    analyzer = get_analyzer("en")
    assert not any(analyzer.is_stopword(w) for w in ("doing", "having", "seeing"))
    assert analyzer.analyze("Doing, having and seeing the waters") == ["water"]


def test_ascii_hyphen_and_apostrophe_join_a_word_only_inside_it():
    """ASCII text takes the fast pattern: a hyphen or apostrophe between letters stays inside the
    word, one at either end or doubled separates words. Kills a pattern without the hyphen."""
    analyzer = get_analyzer("tl")
    assert analyzer.tokenize("Mag-aral don't co-operate -x- a--b") == [
        "mag-aral",
        "don't",
        "co-operate",
        "x",
        "a",
        "b",
    ]
    assert analyzer.tokenize("mag‑aral") == ["mag-aral"]  # U+2011 reads as the ASCII hyphen


def test_lemmas_are_lowercased_like_tokens():
    """simplemma gives names capitalised lemmas (``maynila`` -> ``Maynila``); a term is lowercase,
    so a name matches across queries, documents and tables. Kills keeping the lemma's case."""
    # (Tagalog's lemmas load in a fraction of a second, Swahili's in several)
    assert get_analyzer("tl").analyze("Maynila Pedro Hesus") == ["maynila", "pedro", "hesus"]


# --- the first stage passes its translation settings on ------------------------------------------


def test_first_stage_prunes_psq_sets_and_widens_qt_as_asked(tmp_path):
    """``psq_cumulative``, ``psq_top_k`` and ``qt_k`` reach the query translation, and survive a
    save and load. Kills a first stage that drops any of them (every earlier test of the modes
    used the defaults: all translations, one for QT)."""
    en, sw = get_analyzer("en"), get_analyzer("sw", lemmatize=False)  # no lemmas to load
    god, love = en.analyze("God love")
    mungu, bwana, upendo = sw.analyze("Mungu Bwana upendo")
    table = TranslationTable(
        [god, love],
        [mungu, bwana, upendo],
        sp.csr_matrix(np.array([[0.6, 0.3, 0.1], [0.0, 0.0, 1.0]])),
        "en",
        "sw",
    )
    documents = [Document("s1", "Mungu ni upendo"), Document("s2", "Bwana nuru")]
    query = Query("q", "God")

    def stage(mode: str, **options) -> FirstStage:
        return FirstStage(
            mode, "bm25", en_analyzer=en, doc_analyzer=sw, table_en_doc=table, progress=False, **options
        )

    assert stage("psq").query_terms(query) == [pytest.approx({mungu: 0.6, bwana: 0.3, upendo: 0.1})]
    # 0.6 of the row reaches half its mass; 0.6 + 0.3 reaches 0.85 of it
    assert stage("psq", psq_cumulative=0.5).query_terms(query) == [{mungu: 1.0}]
    two = [pytest.approx({mungu: 2 / 3, bwana: 1 / 3})]
    assert stage("psq", psq_cumulative=0.85).query_terms(query) == two
    assert stage("psq", psq_top_k=2).query_terms(query) == two
    assert stage("qt", qt_k=2).query_terms(query) == [mungu, bwana]
    saved = stage("psq", psq_top_k=2, psq_cumulative=0.5).index(documents).save(tmp_path / "stage")
    assert FirstStage.load(saved, progress=False).query_terms(query) == [{mungu: 1.0}]

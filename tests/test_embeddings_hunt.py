"""Defects of an embedding hunt, each checked against a reference written with numpy / gensim."""

from __future__ import annotations

import numpy as np
import pytest
from gensim.models import KeyedVectors

from clir.embeddings import SharedSpace, evaluate_bli, load_word2vec, save_word2vec
from clir.embeddings.vectors_io import make_keyed_vectors
from clir.errors import ConfigError, FormatError


def test_a_text_word2vec_file_named_bin_is_read_as_text(tmp_path):
    # gensim's save_word2vec_format writes text unless told binary=True, whatever the name
    kv = KeyedVectors(4)
    kv.add_vectors(["the", "a", "mbwa"], np.random.default_rng(0).normal(size=(3, 4)).astype(np.float32))
    kv.save_word2vec_format(str(tmp_path / "vectors.bin"))
    reference = KeyedVectors.load_word2vec_format(str(tmp_path / "vectors.bin"), binary=False)
    got = load_word2vec(tmp_path / "vectors.bin")  # had been: words 'the', '210486', '900114\na'
    assert got.index_to_key == reference.index_to_key == ["the", "a", "mbwa"]
    np.testing.assert_array_equal(got.vectors, reference.vectors)
    space = SharedSpace.from_word2vec({"en": tmp_path / "vectors.bin"}, normalize=False)
    np.testing.assert_array_equal(space.array("en"), reference.vectors)
    # a real binary file of that name is still read as binary, zero vectors included
    kv.vectors[1] = 0
    save_word2vec(kv, tmp_path / "real.bin", binary=True)
    np.testing.assert_array_equal(load_word2vec(tmp_path / "real.bin").vectors, kv.vectors)


@pytest.mark.parametrize("word", ["\nfoo", "two words", "foo\n"])
def test_a_word_the_word2vec_format_cannot_hold_is_refused_before_writing(tmp_path, word):
    # "\nfoo" had come back from a binary file as "foo", silently; "two words" had been written
    # as a space that no load could read
    kv = make_keyed_vectors([word, "x"], np.ones((2, 3), np.float32))
    for binary in (True, False):
        with pytest.raises(ConfigError, match="space or a newline"):
            save_word2vec(kv, tmp_path / f"v{binary}.bin", binary=binary)
        assert not (tmp_path / f"v{binary}.bin").exists()
    with pytest.raises(ConfigError, match="space or a newline"):
        SharedSpace({"en": kv}).save(tmp_path / "space")
    assert not (tmp_path / "space").exists()
    # what the format holds still round-trips bit for bit
    odd = ["a\tb", "日本", "", "e\u0301", "a\u00a0b"]
    vectors = np.random.default_rng(1).normal(size=(5, 3)).astype(np.float32)
    SharedSpace({"en": make_keyed_vectors(odd, vectors)}).save(tmp_path / "ok")
    loaded = SharedSpace.load(tmp_path / "ok")
    assert loaded.vocabulary("en") == odd
    assert loaded.array("en").tobytes() == vectors.tobytes()


def test_bli_gold_mapping_with_one_target_word_per_source_word():
    # {"s0": "e0"} had been read as the gold {"e", "0"} (its letters): no word evaluated
    rng = np.random.default_rng(2)
    vectors = rng.normal(size=(6, 4)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    space = SharedSpace(
        {
            "sw": make_keyed_vectors([f"s{i}" for i in range(6)], vectors),
            "en": make_keyed_vectors([f"e{i}" for i in range(6)], vectors[[0, 1, 2, 4, 3, 5]]),
        }
    )
    as_words = evaluate_bli(space, "sw", "en", {f"s{i}": f"e{i}" for i in range(6)})
    as_sets = evaluate_bli(space, "sw", "en", {f"s{i}": {f"e{i}"} for i in range(6)})
    assert [r.to_dict() for r in as_words] == [r.to_dict() for r in as_sets]
    assert [(r.queries, r.p_at_1) for r in as_words] == [(6, 4 / 6), (6, 4 / 6)]


@pytest.mark.parametrize("lang", ["../x", "pt-br", "sw/x", ""])
def test_a_language_that_is_no_code_is_refused_before_a_space_is_written(tmp_path, lang):
    # each language names a file of the space: "../x" had written x.bin beside the space's
    # directory, over a user's file of that name, and "pt-br" a space that load refused
    user = tmp_path / "x.bin"
    user.write_text("the user's file", encoding="utf-8")
    kv = make_keyed_vectors(["w"], np.ones((1, 2), np.float32))
    with pytest.raises(ConfigError, match=f"the space's language {lang!r} is no language code"):
        SharedSpace({"en": kv, lang: kv}).save(tmp_path / "space")
    assert user.read_text(encoding="utf-8") == "the user's file"
    assert sorted(path.name for path in tmp_path.iterdir()) == ["x.bin"]
    # a code of letters saves and loads back
    SharedSpace({"en": kv, "ny": kv}).save(tmp_path / "space")
    assert SharedSpace.load(tmp_path / "space").languages == ["en", "ny"]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        # gensim broadcast one number along the row: vectors [3, 3] and, for the tab, word 'b\t3'
        ("2 2\na 1 2\nb 3\n", r"w\.vec:3: expected a word and 2 numbers .* got 1 field"),
        ("2 2\na 1 2\nb\t3 4\n", r"w\.vec:3: expected a word and 2 numbers .* got 1 field"),
        ("2 2\na 1 2 3\nb 3 4\n", r"w\.vec:2: expected a word and 2 numbers .* got 3 field"),
        ("1 0\na\n", r"w\.vec:1: header 1 0: expected a count >= 0 and a dimension >= 1"),
        # gensim allocated the rows of the count first: a MemoryError
        ("99999999999 2\na 1 2\n", r"w\.vec:3: header 99999999999 2: the file ends after 1 of its"),
    ],
)
def test_a_text_vector_file_whose_entries_do_not_fit_its_header_is_refused(tmp_path, text, message):
    (tmp_path / "w.vec").write_text(text, encoding="utf-8")
    with pytest.raises(FormatError, match=message):
        load_word2vec(tmp_path / "w.vec")
    with pytest.raises(FormatError, match=message):
        SharedSpace.from_word2vec({"en": tmp_path / "w.vec"})


def test_a_binary_vector_file_whose_count_the_file_cannot_hold_is_refused(tmp_path):
    kv = make_keyed_vectors(["a", ""], np.arange(6, dtype=np.float32).reshape(2, 3))
    save_word2vec(kv, tmp_path / "v.bin", binary=True)
    data = (tmp_path / "v.bin").read_bytes()
    np.testing.assert_array_equal(load_word2vec(tmp_path / "v.bin").vectors, kv.vectors)  # "" fits
    (tmp_path / "big.bin").write_bytes(data.replace(b"2 3", b"99999999999 3", 1))  # a MemoryError
    with pytest.raises(FormatError, match=r"big\.bin:1: header 99999999999 3: .* need more than"):
        load_word2vec(tmp_path / "big.bin")
    # a good text file still reads, with CRLF ends, a trailing space and a limit under its count
    (tmp_path / "ok.vec").write_bytes(b"3 2\r\na 1 2 \r\nb 3 4\r\nc 5 6\r\n")
    assert load_word2vec(tmp_path / "ok.vec").vectors.tolist() == [[1, 2], [3, 4], [5, 6]]
    assert load_word2vec(tmp_path / "ok.vec", limit=2).index_to_key == ["a", "b"]

"""Scale collections: distractors are new, never judged, never a document's text, deterministic."""

from __future__ import annotations

import itertools
import json
from collections import Counter

import numpy as np
import pytest

from clir.cli import main
from clir.datasets import Collection, build_bible_collection
from clir.datasets.distractors import BigramSampler, pad_collection, sample_distractors
from clir.errors import ConfigError
from clir.types import Document, Query

BOOKS = (8, 61, 65)  # Ruth, 2 Peter, Jude: 38 passages
SIZES = {"n_train": 6, "n_dev": 6, "n_test": 12}


@pytest.fixture(scope="module")
def sw() -> Collection:
    return build_bible_collection("en-sw", collection_books=BOOKS, **SIZES, progress=False)


def tiny(texts: list[str], qrels: dict | None = None) -> Collection:
    documents = [Document(f"d{i}", text) for i, text in enumerate(texts)]
    queries = {"test": [Query("q1", "light")]}
    return Collection("tiny", "sw", "en", documents, queries, qrels or {"q1": {"d0": 2}})


def test_padded_collection_keeps_qrels_and_never_judges_a_distractor(sw, tmp_path):
    stats = pad_collection(sw, tmp_path / "padded", 500, seed=3, progress=False)
    padded = Collection.load(tmp_path / "padded")
    assert stats["documents"] == len(sw.documents) + 500 == len(padded.documents)
    assert padded.qrels == sw.qrels
    assert [d.docno for d in padded.documents[: len(sw.documents)]] == [d.docno for d in sw.documents]
    distractors = padded.documents[len(sw.documents) :]
    assert [d.docno for d in distractors] == [f"Z{i:03d}" for i in range(1, 501)]
    judged = {d for docs in padded.qrels.values() for d in docs}
    assert judged <= {d.docno for d in sw.documents}
    assert not judged & {d.docno for d in distractors}
    texts = {" ".join(d.text.split()) for d in sw.documents}
    assert not texts & {d.text for d in distractors}
    assert len({d.text for d in distractors}) == 500
    assert padded.queries == sw.queries and padded.parallel == sw.parallel
    info = json.loads((tmp_path / "padded" / "collection.json").read_text())
    assert info["distractors"] == {
        "n": 500,
        "seed": 3,
        "bigram": 0.5,
        "docnos": "Z001..Z500",
        "model": "bigram",
    }


def test_distractors_are_deterministic_for_a_seed(sw):
    first = list(sample_distractors(sw, 50, seed=1, progress=False))
    again = list(sample_distractors(sw, 50, seed=1, progress=False))
    other = list(sample_distractors(sw, 50, seed=2, progress=False))
    assert first == again
    assert [d.text for d in first] != [d.text for d in other]


def test_distractors_speak_the_collections_language(sw):
    """Every token is one of the collection's, at about the collection's unigram frequencies."""
    vocab = Counter(t for d in sw.documents for t in d.text.split())
    tokens = Counter(t for d in sample_distractors(sw, 400, progress=False) for t in d.text.split())
    assert set(tokens) <= set(vocab)
    top = [t for t, _ in vocab.most_common(5)]
    assert all(tokens[t] / tokens.total() == pytest.approx(vocab[t] / vocab.total(), rel=0.25) for t in top)


def test_a_sample_equal_to_a_document_is_drawn_again():
    """A model of two one-word documents can only say 'a', 'b' or their concatenations: the
    one-word samples are documents and must never come out; with length 1 only, nothing new
    can come out and the sampler says so instead of looping."""
    collection = tiny(["a b a", "b a", "a"])
    out = [d.text for d in sample_distractors(collection, 5, seed=0, progress=False)]
    assert not set(out) & {"a b a", "b a", "a"}
    assert len(set(out)) == 5
    with pytest.raises(ConfigError, match="produced no new text"):
        list(sample_distractors(tiny(["a", "b"]), 3, progress=False))


def test_docno_clash_with_a_document_or_a_judgement_is_an_error():
    with pytest.raises(ConfigError, match="already names docno 'Z1'"):
        list(sample_distractors(tiny(["a b c", "c d"], {"q1": {"d0": 2, "Z1": 1}}), 3, progress=False))
    with pytest.raises(ConfigError, match="positive integer, got 0"):
        list(sample_distractors(tiny(["a b c"]), 0, progress=False))


def test_bigram_sampler_follows_successors_only_when_bigram_is_one():
    """With bigram = 1 every token after the first follows its predecessor as in the text."""
    text = "x y z x y w"
    sampler = BigramSampler(1.0).fit([text])
    pairs = {("x", "y"), ("y", "z"), ("z", "x"), ("y", "w")}
    for sample in sampler.sample(200, np.random.default_rng(0)):
        words = sample.split()
        assert len(words) == 6
        assert all(pair in pairs or pair[0] == "w" for pair in itertools.pairwise(words))
    with pytest.raises(ConfigError, match=r"bigram must be a weight in \[0, 1\], got 1.5"):
        BigramSampler(1.5)


def test_cli_pad(sw, tmp_path, capsys):
    sw.save(tmp_path / "sw")
    assert (
        main(["data", "pad", str(tmp_path / "sw"), "--distractors", "20", "--out", str(tmp_path / "p"), "-q"])
        == 0
    )
    assert json.loads(capsys.readouterr().out)["distractors"] == 20
    assert (
        main(
            [
                "data",
                "pad",
                str(tmp_path / "sw"),
                "--distractors",
                "20",
                "--out",
                str(tmp_path / "p2"),
                "--bigram",
                "2",
            ]
        )
        == 2
    )
    assert "bigram must be a weight in [0, 1], got 2.0" in capsys.readouterr().err


def test_padding_a_padded_collection_keeps_its_counts_and_first_padding(tmp_path):
    """A padded collection padded again recorded the distractors of the first padding as original
    documents and only the second padding's count of distractors (20 + 5 reported as 5 of 30)."""
    texts = ["mwanga wa jua ni mzuri", "maji ya mto ni baridi", "nyumba ya mfalme", "mtoto na mbwa"]
    pad_collection(tiny(texts), tmp_path / "p20", 20, progress=False)
    stats = pad_collection(tmp_path / "p20", tmp_path / "p25", 5, seed=1, progress=False)
    assert (stats["original_documents"], stats["distractors"], stats["documents"]) == (4, 25, 29)
    padding = json.loads((tmp_path / "p25" / "collection.json").read_text())["distractors"]
    assert (padding["n"], padding["seed"], padding["docnos"]) == (5, 1, "Z1..Z5")
    assert padding["previous"] == {"n": 20, "seed": 0, "bigram": 0.5, "docnos": "Z01..Z20", "model": "bigram"}

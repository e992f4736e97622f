"""Configuration of the embedding family: how vectors are trained and how they are aligned.

Two families are configurable by name:

- the static word-vector model (:data:`EMBEDDING_MODELS`: gensim ``FastText`` or ``Word2Vec``);
- the method that puts every language into one English-pivot space (:data:`SPACE_METHODS`):
  ``"procrustes"`` (monolingual models mapped with orthogonal Procrustes and CSLS refinement) or
  ``"joint"`` (one model over a pseudo-bilingual corpus).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, fields
from typing import Any, Protocol, runtime_checkable

import numpy as np

from clir.errors import ConfigError

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


def _check_choice(name: str, value: str, choices: Any) -> None:
    if value not in choices:
        raise ConfigError(f"{name}={value!r} is not known; expected one of {sorted(choices)}")


def _check_positive(name: str, value: float, minimum: float = 1) -> None:
    if value < minimum:
        raise ConfigError(f"{name}={value!r} must be >= {minimum}")


class _Config:
    """Shared helpers: ``to_dict`` / ``from_dict`` for JSON round trips."""

    def to_dict(self) -> dict[str, Any]:
        """The config as a JSON-serialisable dict."""
        return asdict(self)  # type: ignore[call-overload]

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Any:
        """Build a config from a dict, rejecting unknown keys.

        Raises:
            ConfigError: On a key the config does not have.
        """
        known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
        unknown = sorted(set(data) - known)
        if unknown:
            raise ConfigError(f"{cls.__name__}: unknown key(s) {unknown}; expected some of {sorted(known)}")
        return cls(**data)


@dataclass(frozen=True)
class EmbeddingConfig(_Config):
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
        negative: Negative samples per positive.
        sample: Down-sampling threshold of frequent words (gensim's default 1e-3; 1e-4 starves a
            Bible-sized corpus: all vectors stay near one direction and Procrustes fails).
        min_n: Shortest character n-gram (FastText only).
        max_n: Longest character n-gram (FastText only).
        bucket: Hash buckets of the n-grams (FastText only).
        seed: Random seed (initial vectors, sampling, the joint corpus's shuffles).
        workers: gensim worker threads (1 = deterministic).
    """

    method: str = "fasttext"
    dim: int = 100
    window: int = 5
    min_count: int = 2
    epochs: int = 10
    negative: int = 5
    sample: float = 1e-3
    min_n: int = 3
    max_n: int = 6
    bucket: int = 200_000
    seed: int = 0
    workers: int = 1

    def __post_init__(self) -> None:
        _check_choice("method", self.method, EMBEDDING_MODELS)
        for name in ("dim", "window", "min_count", "epochs", "workers"):
            _check_positive(name, getattr(self, name))
        if self.method == "fasttext" and not 1 <= self.min_n <= self.max_n:
            raise ConfigError(f"min_n={self.min_n}, max_n={self.max_n}: expected 1 <= min_n <= max_n")


@dataclass(frozen=True)
class AlignConfig(_Config):
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

    refine_iterations: int = 5
    csls_k: int = 10
    max_rank: int = 10_000
    validation_rank: int = 10_000
    centre: bool = True
    seed_source: str = "ibm1"
    seed_min_prob: float = 0.1
    seed_with_identical: bool = False
    keep_seed: bool = True

    def __post_init__(self) -> None:
        _check_choice("seed_source", self.seed_source, SEED_SOURCES)
        _check_positive("refine_iterations", self.refine_iterations, 0)
        for name in ("csls_k", "max_rank", "validation_rank"):
            _check_positive(name, getattr(self, name))
        if not 0.0 <= self.seed_min_prob <= 1.0:
            raise ConfigError(f"seed_min_prob={self.seed_min_prob!r} must lie in [0, 1]")


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

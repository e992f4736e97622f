"""Joint training: one skip-gram model over a pseudo-bilingual corpus puts every language in one
space without a mapping step.

Each aligned pair (English pivot, other language) becomes one pseudo-sentence: the tokens of
both sides, tagged with their language (``"sw:mungu"``), merged and shuffled, so a word's
context includes its translation's neighbours (Vulić & Moens 2016, "Bilingual Distributed Word
Representations from Document-Aligned Comparable Data", JAIR: "merge and shuffle"; Gouws &
Søgaard 2015). Every language's monolingual text is added with the same tags.
"""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
from gensim.models.keyedvectors import KeyedVectors

from clir.embeddings.align import normalize_vectors, subwords_of
from clir.embeddings.base import PIVOT, EmbeddingConfig
from clir.embeddings.space import SharedSpace, SubwordVectors
from clir.embeddings.train import train_vectors
from clir.embeddings.vectors_io import make_keyed_vectors
from clir.errors import ConfigError

JOINT_CONFIG = EmbeddingConfig(method="word2vec", window=20, epochs=20)
"""The default of joint training: the space of ``make run`` (``configs/default.yaml``; window 20
gave the best sw->en BLI on the Bibles, see experiments/embeddings_bli.py, and 20 epochs a better
space than 5 or 10 under the reranker)."""

MIXES = ("shuffle", "ratio")
"""How a pair's two sides are merged: random shuffle, or interleaved by their length ratio."""


def tag(lang: str, tokens: Sequence[str]) -> list[str]:
    """Prefix every token with its language: ``tag("sw", ["mungu"]) == ["sw:mungu"]``."""
    return [f"{lang}:{token}" for token in tokens]


def _merge(a: list[str], b: list[str], mix: str, rng: random.Random) -> list[str]:
    if mix == "shuffle":
        merged = a + b
        rng.shuffle(merged)
        return merged
    # "ratio": keep each side's order and interleave by position (length-ratio merge).
    if not a or not b:
        return a + b
    keyed = [((i + 0.5) / len(a), 0, t) for i, t in enumerate(a)] + [
        ((j + 0.5) / len(b), 1, t) for j, t in enumerate(b)
    ]
    return [t for _, _, t in sorted(keyed, key=lambda x: (x[0], x[1]))]


def pseudo_bilingual_corpus(
    parallel: Mapping[str, Sequence[tuple[Sequence[str], Sequence[str]]]],
    monolingual: Mapping[str, Sequence[Sequence[str]]] | None = None,
    *,
    pivot: str = PIVOT,
    mix: str = "shuffle",
    copies: int = 1,
    seed: int = 0,
) -> list[list[str]]:
    """Build the tagged pseudo-bilingual training corpus.

    Args:
        parallel: ``{lang: [(pivot tokens, lang tokens), ...]}`` aligned pairs per language.
        monolingual: ``{lang: [tokens, ...]}`` further text per language (the pivot included).
        pivot: The pivot language code (the first side of every pair).
        mix: ``"shuffle"`` or ``"ratio"`` (see :data:`MIXES`).
        copies: Merged versions per pair (each a different shuffle).
        seed: Seed of the shuffles and of the final sentence order.

    Returns:
        Token lists, tagged, in a seeded random order.

    Raises:
        ConfigError: On an unknown mix or ``copies < 1``.
    """
    if mix not in MIXES:
        raise ConfigError(f"mix={mix!r} is not known; expected one of {sorted(MIXES)}")
    if copies < 1:
        raise ConfigError(f"copies={copies!r} must be >= 1")
    rng = random.Random(seed)
    corpus: list[list[str]] = []
    for lang in sorted(parallel):
        if lang == pivot:
            raise ConfigError(f"parallel[{lang!r}]: pairs are (pivot, other language); the pivot needs none")
        for pivot_tokens, tokens in parallel[lang]:
            a, b = tag(pivot, pivot_tokens), tag(lang, tokens)
            for _ in range(copies):
                merged = _merge(a, b, mix, rng)
                if merged:
                    corpus.append(merged)
    for lang in sorted(monolingual or {}):
        corpus.extend(tag(lang, tokens) for tokens in (monolingual or {})[lang] if tokens)
    rng.shuffle(corpus)
    return corpus


def split_joint(
    kv: KeyedVectors, languages: Sequence[str]
) -> tuple[dict[str, KeyedVectors], dict[str, SubwordVectors]]:
    """Split a joint model's tagged vocabulary into raw per-language vectors.

    Args:
        kv: Vectors of tagged tokens (``"sw:mungu"``).
        languages: The language codes to extract.

    Returns:
        ``(vectors, subwords)``: per language its untagged words (frequency order kept) and, for
        FastText, the shared n-gram model with the language's tag as hashing prefix.
    """
    vectors: dict[str, KeyedVectors] = {}
    subwords: dict[str, SubwordVectors] = {}
    for lang in languages:
        prefix = f"{lang}:"
        rows = [i for i, key in enumerate(kv.index_to_key) if key.startswith(prefix)]
        if not rows:
            raise ConfigError(f"the joint model has no word of language {lang!r}")
        words = [kv.index_to_key[i][len(prefix) :] for i in rows]
        vectors[lang] = make_keyed_vectors(words, kv.vectors[rows])
        sub = subwords_of(kv, prefix)
        if sub is not None:
            subwords[lang] = sub
    return vectors, subwords


def joint_space(
    kv: KeyedVectors, languages: Sequence[str], centre: bool = False, meta: Mapping[str, Any] | None = None
) -> SharedSpace:
    """A SharedSpace straight from a joint model (no mapping), vectors normalised per language.

    Args:
        kv: The joint model's vectors.
        languages: Language codes.
        centre: Centre each language separately (removes a language's common direction; may
            help or hurt: compare BLI).
        meta: Stored in the space's meta.
    """
    vectors, raw_subwords = split_joint(kv, languages)
    out: dict[str, KeyedVectors] = {}
    subwords: dict[str, SubwordVectors] = {}
    for lang, lang_kv in vectors.items():
        matrix, mean = normalize_vectors(lang_kv.vectors, centre)
        out[lang] = make_keyed_vectors(lang_kv.index_to_key, matrix)
        if lang in raw_subwords:
            sub = raw_subwords[lang]
            subwords[lang] = SubwordVectors(
                sub.ngrams, sub.min_n, sub.max_n, np.vstack([sub.mean, mean]), sub.prefix
            )
    return SharedSpace(out, subwords=subwords, meta={"method": "joint", "centre": centre, **(meta or {})})


def train_joint(
    parallel: Mapping[str, Sequence[tuple[Sequence[str], Sequence[str]]]],
    monolingual: Mapping[str, Sequence[Sequence[str]]] | None = None,
    config: EmbeddingConfig | None = None,
    *,
    pivot: str = PIVOT,
    mix: str = "shuffle",
    copies: int = 1,
    centre: bool = False,
    progress: bool = True,
) -> tuple[SharedSpace, KeyedVectors]:
    """Train one model over the pseudo-bilingual corpus and return the shared space.

    Args:
        parallel: ``{lang: [(pivot tokens, lang tokens), ...]}``.
        monolingual: ``{lang: [tokens, ...]}``.
        config: Model parameters (its ``seed`` also seeds the corpus shuffles). Default:
            word2vec, window 20, 20 epochs (:data:`JOINT_CONFIG`). A wide window matters: with
            it every word of a merged pair sees most of the other language's words (sw->en
            FreeDict P@1 with CSLS rose from 0.36 with window 5 to 0.47 with window 20, 5 epochs
            each).
        pivot: The pivot language.
        mix: Pair merging (see :func:`pseudo_bilingual_corpus`).
        copies: Shuffled copies per pair.
        centre: Centre each language separately (see :func:`joint_space`).
        progress: Show progress bars.

    Returns:
        ``(space, joint_vectors)``: the space and the raw tagged model (to refine with
        :func:`~clir.embeddings.align.map_to_pivot` via :func:`split_joint`).

    Raises:
        ConfigError: If no word of a language is left in the model (none occurs ``min_count``
            times).
    """
    config = config or JOINT_CONFIG
    corpus = pseudo_bilingual_corpus(
        parallel, monolingual, pivot=pivot, mix=mix, copies=copies, seed=config.seed
    )
    kv = train_vectors(
        corpus, config, progress=progress, desc="train joint", what="the pseudo-bilingual corpus"
    )
    languages = sorted({pivot, *parallel, *(monolingual or {})})
    for lang in languages:  # split_joint's "has no word of language 'en'" named no cause
        if not any(key.startswith(f"{lang}:") for key in kv.index_to_key):
            raise ConfigError(
                f"the joint model has no word of language {lang!r}: none of its words occurs "
                f"min_count={config.min_count} times in the {len(corpus)} sentences of the corpus "
                "(give more text of it, or lower min_count: clir embed train --min-count)"
            )
    meta = {
        "embedding_config": config.to_dict(),
        "mix": mix,
        "copies": copies,
        "pivot": pivot,
        "sentences": len(corpus),
        "tokens": int(np.sum([len(s) for s in corpus])),
    }
    return joint_space(kv, languages, centre, meta), kv

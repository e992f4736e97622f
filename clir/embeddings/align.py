"""Mapping a monolingual space onto the pivot: Procrustes from a seed lexicon, then iterative
refinement on CSLS mutual nearest neighbours, keeping the iteration with the best unsupervised
validation criterion.

Conneau et al. 2018, "Word Translation Without Parallel Data", ICLR (MUSE): refinement, CSLS and
the validation criterion (mean cosine of the CSLS translations of the most frequent source words).
Artetxe et al. 2018, "Generalizing and improving bilingual word embedding mappings with
linear transformations", AAAI: length normalisation and centring before the mapping.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from gensim.models.fasttext import FastTextKeyedVectors
from gensim.models.keyedvectors import KeyedVectors

from clir.embeddings.base import PIVOT, AlignConfig
from clir.embeddings.csls import translate
from clir.embeddings.procrustes import procrustes
from clir.embeddings.space import SharedSpace, SubwordVectors
from clir.embeddings.vectors_io import make_keyed_vectors
from clir.errors import ConfigError
from clir.progress import progress_bar

logger = logging.getLogger(__name__)


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def normalize_vectors(vectors: np.ndarray, centre: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Length-normalise, centre, length-normalise again (MUSE's ``renorm,center,renorm``).

    Args:
        vectors: ``(n, d)`` raw vectors (rows ordered by frequency, all of a language).
        centre: Subtract the mean of the unit vectors; without it every language keeps a common
            direction and nearest neighbours collapse onto a few hub words.

    Returns:
        ``(normalised (n, d) float32, mean (d,) float32)``; ``mean`` is the vector subtracted after
        the first normalisation (zeros when ``centre`` is false), so an unseen word's vector ``v``
        is normalised the same way as ``unit(unit(v) - mean)``.
    """
    unit = _unit(np.asarray(vectors, dtype=np.float32))
    mean = unit.mean(axis=0) if centre else np.zeros(unit.shape[1], dtype=np.float32)
    return _unit(unit - mean).astype(np.float32), mean.astype(np.float32)


def induce_dictionary(
    source: np.ndarray, target: np.ndarray, max_rank: int = 10_000, csls_k: int = 10
) -> np.ndarray:
    """Mutual CSLS nearest neighbours among the most frequent words of each side.

    Args:
        source: ``(n, d)`` mapped source vectors, unit length, rows by descending frequency.
        target: ``(m, d)`` target vectors, same conventions.
        max_rank: Only the first ``max_rank`` rows of each side are candidates; CSLS's hub
            terms are still each word's mean similarity to its ``csls_k`` nearest words of the
            other side's whole vocabulary, as in MUSE.
        csls_k: CSLS neighbourhood size.

    Returns:
        ``(p, 2)`` int64 array of ``(source row, target row)`` pairs, each the other's best CSLS
        match (MUSE's ``S2T&T2S``).
    """
    src = source[:max_rank]
    tgt = target[:max_rank]
    # the background: a target's r over every source word (it had been over the first max_rank)
    _, s2t = translate(src, tgt, 1, method="csls", csls_k=csls_k, source_background=source)
    _, t2s = translate(tgt, src, 1, method="csls", csls_k=csls_k, source_background=target)
    rows = np.arange(src.shape[0])
    mutual = t2s[s2t[:, 0], 0] == rows
    return np.stack([rows[mutual], s2t[mutual, 0]], axis=1).astype(np.int64)


def validation_criterion(
    source: np.ndarray, target: np.ndarray, rank: int = 10_000, csls_k: int = 10
) -> float:
    """MUSE's unsupervised model-selection score: the mean cosine between each of the ``rank``
    most frequent source words and its CSLS translation (higher is better).

    Args:
        source: ``(n, d)`` mapped source vectors, unit length, rows by descending frequency.
        target: ``(m, d)`` target vectors, unit length.
        rank: How many frequent source words to average over.
        csls_k: CSLS neighbourhood size.
    """
    src = source[:rank]
    _, best = translate(src, target, 1, method="csls", csls_k=csls_k, source_background=source)
    return float(np.mean(np.sum(src * target[best[:, 0]], axis=1)))


@dataclass
class Alignment:
    """The result of :func:`align`.

    Attributes:
        rotation: ``(d, d)`` orthogonal map; mapped source rows are ``source @ rotation``.
        best_iteration: The kept iteration (0 = the seed Procrustes solution).
        history: Per iteration: ``{"iteration", "pairs", "criterion"}``.
    """

    rotation: np.ndarray
    best_iteration: int
    history: list[dict[str, float]] = field(default_factory=list)


def align(
    source: np.ndarray,
    target: np.ndarray,
    seed_pairs: np.ndarray | None,
    config: AlignConfig | None = None,
    *,
    progress: bool = True,
) -> Alignment:
    """Procrustes from a seed dictionary, refined on CSLS mutual nearest neighbours.

    Both inputs must already be normalised (:func:`normalize_vectors`) and have rows ordered by
    descending frequency.

    Args:
        source: ``(n, d)`` source-language vectors.
        target: ``(m, d)`` pivot-language vectors.
        seed_pairs: ``(p, 2)`` ``(source row, target row)`` seed pairs; ``None`` or empty starts
            from the identity map (useful when both spaces are already roughly aligned, e.g. a
            joint model).
        config: Refinement parameters.
        progress: Show a progress bar over the refinement iterations.

    Returns:
        The best :class:`Alignment` by the validation criterion.

    Raises:
        ConfigError: If the two spaces differ in dimension.
    """
    config = config or AlignConfig()
    if source.shape[1] != target.shape[1]:
        raise ConfigError(f"source dim {source.shape[1]} != target dim {target.shape[1]}")
    seed = np.zeros((0, 2), dtype=np.int64) if seed_pairs is None else np.asarray(seed_pairs, np.int64)
    if len(seed):
        rotation = procrustes(source[seed[:, 0]], target[seed[:, 1]])
    else:
        rotation = np.eye(source.shape[1], dtype=np.float32)

    def score(w: np.ndarray) -> float:
        return validation_criterion(source @ w, target, config.validation_rank, config.csls_k)

    best = Alignment(rotation, 0, [{"iteration": 0, "pairs": len(seed), "criterion": score(rotation)}])
    current = rotation
    for iteration in progress_bar(
        range(1, config.refine_iterations + 1), desc="refine", unit="iter", enabled=progress
    ):
        pairs = induce_dictionary(source @ current, target, config.max_rank, config.csls_k)
        if config.keep_seed and len(seed):
            pairs = np.unique(np.concatenate([pairs, seed]), axis=0)
        if len(pairs) == 0:
            logger.warning("refinement iteration %d induced no pairs; stopping", iteration)
            break
        current = procrustes(source[pairs[:, 0]], target[pairs[:, 1]])
        criterion = score(current)
        best.history.append({"iteration": iteration, "pairs": len(pairs), "criterion": criterion})
        logger.info("refinement %d: %d pairs, criterion %.4f", iteration, len(pairs), criterion)
        if criterion > best.history[best.best_iteration]["criterion"]:
            best.rotation, best.best_iteration = current, iteration
    return best


def _rows(kv: KeyedVectors, pivot_kv: KeyedVectors, pairs: Sequence[tuple[str, str]]) -> np.ndarray:
    src, tgt = kv.key_to_index, pivot_kv.key_to_index
    rows = [(src[s], tgt[t]) for s, t in pairs if s in src and t in tgt]
    return np.asarray(rows, dtype=np.int64).reshape(-1, 2)


def subwords_of(kv: KeyedVectors, prefix: str = "") -> SubwordVectors | None:
    """The raw (unrotated, uncentred) n-gram model of FastText vectors, ``None`` for others."""
    if not isinstance(kv, FastTextKeyedVectors) or kv.vectors_ngrams is None or not kv.bucket:
        return None
    return SubwordVectors(kv.vectors_ngrams, kv.min_n, kv.max_n, prefix=prefix)


def map_to_pivot(
    vectors: Mapping[str, KeyedVectors],
    seeds: Mapping[str, Sequence[tuple[str, str]]] | None = None,
    config: AlignConfig | None = None,
    *,
    pivot: str = PIVOT,
    subwords: Mapping[str, SubwordVectors] | None = None,
    progress: bool = True,
) -> SharedSpace:
    """Put every language's vectors into the pivot's space (the Procrustes method).

    Each language is normalised (:func:`normalize_vectors`); every non-pivot language is then
    mapped onto the pivot with :func:`align` from its seed pairs. FastText n-gram vectors are
    rotated along, so unseen words still get vectors in the shared space.

    Args:
        vectors: ``{lang: KeyedVectors}`` (rows by descending frequency), the pivot included.
        seeds: ``{lang: [(lang word, pivot word), ...]}`` seed lexicons; a language without one
            starts from the identity map (only sensible when the spaces are already close, as
            the per-language parts of a joint model are).
        config: Alignment parameters.
        pivot: The pivot language code.
        subwords: Per language, the raw n-gram model for unseen words (:func:`subwords_of`, or
            the per-language part of a joint model); taken from FastText vectors when omitted.
        progress: Show progress bars.

    Returns:
        The shared space; ``meta["alignment"][lang]`` holds each language's refinement history.

    Raises:
        ConfigError: If the pivot is missing or a seed lexicon has no pair in the vocabularies.
    """
    config = config or AlignConfig()
    seeds = seeds or {}
    raw_subwords = {lang: subwords_of(kv) for lang, kv in vectors.items()}
    raw_subwords.update(subwords or {})
    if pivot not in vectors:
        raise ConfigError(f"pivot={pivot!r} has no vectors; languages given: {sorted(vectors)}")
    normalised = {lang: normalize_vectors(kv.vectors, config.centre) for lang, kv in vectors.items()}
    target = normalised[pivot][0]
    out: dict[str, KeyedVectors] = {}
    mapped_subwords: dict[str, SubwordVectors] = {}
    history: dict[str, Any] = {}
    for lang, kv in vectors.items():
        matrix, mean = normalised[lang]
        rotation = np.eye(kv.vector_size, dtype=np.float32)
        if lang != pivot:
            pairs = _rows(kv, vectors[pivot], seeds.get(lang, []))
            if lang in seeds and len(pairs) == 0:
                raise ConfigError(
                    f"seed lexicon of {lang!r}: none of its {len(seeds[lang])} pairs is in both vocabularies"
                )
            result = align(matrix, target, pairs, config, progress=progress)
            rotation = result.rotation
            history[lang] = {
                "seed_pairs": len(pairs),
                "best_iteration": result.best_iteration,
                "history": result.history,
            }
        out[lang] = make_keyed_vectors(kv.index_to_key, matrix @ rotation)
        sub = raw_subwords.get(lang)
        if sub is not None:
            mapped_subwords[lang] = SubwordVectors(
                sub.ngrams @ rotation,
                sub.min_n,
                sub.max_n,
                np.vstack([sub.mean, mean]) @ rotation,
                sub.prefix,
            )
    meta = {"method": "procrustes", "pivot": pivot, "align_config": config.to_dict(), "alignment": history}
    return SharedSpace(out, subwords=mapped_subwords, meta=meta)

"""Nearest neighbours and Cross-domain Similarity Local Scaling (CSLS).

Conneau et al. 2018, "Word Translation Without Parallel Data", ICLR: for unit vectors,
``CSLS(x, y) = 2 cos(x, y) - r_T(x) - r_S(y)`` where ``r_T(x)`` is the mean cosine of ``x`` to
its ``k`` nearest target vectors and ``r_S(y)`` the mean cosine of ``y`` to its ``k`` nearest
source vectors. It penalises hubs, the words that are near everything.

Exact inner-product search uses faiss ``IndexFlatIP``.
"""

from __future__ import annotations

import faiss
import numpy as np

from clir.errors import ConfigError


def _f32(x: np.ndarray) -> np.ndarray:
    return np.ascontiguousarray(x, dtype=np.float32)


def knn(queries: np.ndarray, base: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Exact top-``k`` inner products of each query row against ``base`` (faiss IndexFlatIP).

    Ties are broken by row of ``base``, lower first, both in the order and in which rows make the
    top ``k``: two rows of equal score (e.g. duplicate vectors) come out in vocabulary order, the
    most frequent word first. (faiss alone orders ties by its heap: rows 77, 42, 10, 3 of seven
    duplicates, of which 3, 10, 42, 77 are the first four.)

    Args:
        queries: ``(n, d)``.
        base: ``(m, d)``.
        k: Neighbours per query (capped at ``m``).

    Returns:
        ``(scores (n, k), indices (n, k))``, best first, equal scores by ascending index.
    """
    if queries.shape[1] != base.shape[1]:
        raise ConfigError(f"queries have dim {queries.shape[1]} but base has dim {base.shape[1]}")
    m = base.shape[0]
    k = min(int(k), m)  # a Python int: faiss refuses numpy's
    index = faiss.IndexFlatIP(base.shape[1])
    index.add(_f32(base))
    queries = _f32(queries)
    if k < 1:
        return index.search(queries, k)
    scores = np.empty((len(queries), k), np.float32)
    indices = np.empty((len(queries), k), np.int64)
    rows, wide = np.arange(len(queries)), min(k + 1, m)
    while rows.size:
        found, at = index.search(queries[rows], wide)
        order = np.lexsort((at, -found), axis=-1)[:, :k]  # by score, then by index
        scores[rows] = np.take_along_axis(found, order, axis=1)
        indices[rows] = np.take_along_axis(at, order, axis=1)
        if wide == m:
            break
        # where the k-th score equals the last one fetched, rows of that score may lie beyond
        rows, wide = rows[found[:, k - 1] == found[:, -1]], min(2 * wide, m)
    return scores, indices


def mean_knn_similarity(queries: np.ndarray, base: np.ndarray, k: int) -> np.ndarray:
    """Mean cosine of each query to its ``k`` nearest rows of ``base`` (CSLS's ``r`` term)."""
    scores, _ = knn(queries, base, k)
    return scores.mean(axis=1)


def csls_scores(
    source: np.ndarray,
    target: np.ndarray,
    k: int = 10,
    *,
    r_source: np.ndarray | None = None,
    r_target: np.ndarray | None = None,
) -> np.ndarray:
    """The dense CSLS matrix ``(n_source, n_target)`` for unit-length rows.

    Args:
        source: ``(n, d)`` mapped source vectors (unit length).
        target: ``(m, d)`` target vectors (unit length).
        k: Neighbourhood size.
        r_source: Precomputed ``r_T`` of the source rows (mean similarity to their ``k`` nearest
            targets); computed when omitted.
        r_target: Precomputed ``r_S`` of the target rows (mean similarity to their ``k`` nearest
            sources, over the full source vocabulary); computed from ``source`` when omitted.

    Returns:
        ``2 cos - r_source[:, None] - r_target[None, :]``.
    """
    if r_source is None:
        r_source = mean_knn_similarity(source, target, k)
    if r_target is None:
        r_target = mean_knn_similarity(target, source, k)
    return 2 * (_f32(source) @ _f32(target).T) - r_source[:, None] - r_target[None, :]


def translate(
    source: np.ndarray,
    target: np.ndarray,
    k: int = 1,
    *,
    method: str = "csls",
    csls_k: int = 10,
    source_background: np.ndarray | None = None,
) -> tuple[np.ndarray, np.ndarray]:
    """Top-``k`` target rows for each source row by nearest neighbour or CSLS.

    Args:
        source: ``(n, d)`` queries (unit length, already mapped into the target space).
        target: ``(m, d)`` candidates (unit length).
        k: Candidates to return per query.
        method: ``"nn"`` (cosine) or ``"csls"``.
        csls_k: CSLS neighbourhood size.
        source_background: The source vectors over which the targets' ``r_S`` is computed (the
            whole source vocabulary, as in MUSE); defaults to ``source``.

    Returns:
        ``(scores (n, k), indices (n, k))``, best first; equal scores by ascending target index
        (vocabulary order), as :func:`knn` breaks ties.

    Raises:
        ConfigError: On an unknown method, or ``k`` or ``csls_k`` that is not a positive integer
            (faiss had failed on 0 with a bare AssertionError, on a numpy integer with a SWIG
            TypeError).
    """
    for name, value in (("k", k), ("csls_k", csls_k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    if method == "nn":
        return knn(source, target, k)
    if method != "csls":
        raise ConfigError(f"method={method!r} is not known; expected one of ['csls', 'nn']")
    background = source if source_background is None else source_background
    r_target = mean_knn_similarity(target, background, csls_k)
    r_source = mean_knn_similarity(source, target, csls_k)
    # For a fixed source row, CSLS ranks targets by 2 x·y - r_S(y) = [2x, -1]·[y, r_S(y)]: an
    # exact inner-product search over augmented vectors, no dense (n, m) matrix needed.
    queries = np.hstack([2 * _f32(source), -np.ones((source.shape[0], 1), np.float32)])
    base = np.hstack([_f32(target), r_target[:, None].astype(np.float32)])
    scores, indices = knn(queries, base, k)
    return scores - r_source[:, None], indices

"""Exact top-k of sums of weighted postings, one query at a time, with MaxScore candidate pruning.

A query's score of document ``d`` is ``sum_t c_t * w(t, d)`` over its terms ``t`` (BM25: ``c_t``
the idf times the term's multiplicity, ``w`` the saturated tf). :func:`accumulate_topk` adds each
term's postings into a dense accumulator in term-id order, each in one compiled loop
(scipy's CSC matrix-vector kernel: 1.4 ns a posting on the development machine, against 4 for
``np.add.at`` and about 16 for the batched sparse product ``queries @ weights`` with its
per-row ranking), so every score has the value, to the bit, that the sparse product gives
(the same products, added in the same order, from 0).

Only documents that can be in the top ``k`` are then read back and ranked, which MaxScore
(Turtle & Flood 1995) bounds. ``theta``, a lower bound of the query's k-th best score, is the
``floor`` given (e.g. by the shards searched before this one), or else the k-th best score
among the documents of one term (the term of largest upper bound ``c_t * max_d w(t, d)``
among those in at least ``k`` documents). With non-negative contributions, a document none of
whose terms is *essential* scores at most the sum of the upper bounds of the others; terms are
made essential by decreasing upper bound until the rest sum to less than ``theta``, and only
the documents in the essential terms' postings that score at least ``theta`` are ranked. On the
padded en-sw collection (three terms a query, shards of 250k documents) that reads back 42 %
of a query's postings (14.5k of 34.5k) and ranks 1,200 documents instead of the 33,000 it matches.

Pruning the scoring itself (MaxScore proper: only the essential terms' postings scored, the
others looked up for the candidates) was measured slower here: the upper bounds are loose
(a term's largest weight is about 2.5 times its typical one), so a third of the essential
terms' documents still need every other term's weight, and numpy looks a posting up (binary
search, ~45 ns) thirty times slower than the compiled loop adds one.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import scipy.sparse as sp

try:
    # The compiled ``y += A @ x`` of a CSC matrix that scipy's sparse products run; it adds a
    # posting list into an existing accumulator without copying the list (public scipy would
    # copy the rows and allocate a fresh dense result per call). Private: where a scipy lacks
    # it, ``np.add.at`` adds the same products in the same order (the same bits, ~3x slower).
    from scipy.sparse._sparsetools import csc_matvec
except ImportError:  # pragma: no cover - depends on the installed scipy
    csc_matvec = None

MIN_DOCS = 10_000
"""Smaller collections are ranked as fast by the batched dense top-k of :mod:`clir.retrieval.topk`
(the 6,221-passage Swahili Bible, 500 queries: 3.9-5.4k q/s dense, 3.5-4.7k accumulated); from
here on the accumulator wins, the more the larger the collection."""

_TOLERANCE = 1e-9
"""Relative slack of the bound comparisons: rounding of sums of a few positive floats is many
orders of magnitude smaller, and the slack only keeps a few more candidates."""


def max_weights(weights: sp.csr_matrix) -> np.ndarray:
    """The largest weight of each row (term) of a term-major weight matrix (0 for empty rows)."""
    out = np.zeros(weights.shape[0])
    rows = np.flatnonzero(np.diff(weights.indptr))
    if rows.size:
        out[rows] = np.maximum.reduceat(np.asarray(weights.data), weights.indptr[rows])
    return out


def accumulate_topk(
    weights: sp.csr_matrix,
    max_weight: np.ndarray,
    queries: sp.csr_matrix,
    k: int,
    out_ids: np.ndarray,
    out_scores: np.ndarray,
    floor: np.ndarray | None = None,
) -> np.ndarray:
    """Fill ``out_ids``/``out_scores`` with each query's exact top ``k`` matching documents.

    A document matches a query when its score is not 0; only matching documents are listed,
    best first, ties broken by column descending (docno descending in an index). With a
    ``floor``, a query lists only the documents scoring at least its value (it may then fill
    fewer than ``k`` slots even with more matches): a lower bound of the k-th best score of a
    larger collection of which ``weights`` is a shard.

    Args:
        weights: ``(n_terms, n_docs)`` CSR of float64 weights ``w`` with sorted indices.
        max_weight: ``(n_terms,)`` largest weight of each row (:func:`max_weights`).
        queries: ``(n_rows, n_terms)`` CSR of the coefficients ``c`` with sorted indices.
        k: Depth, ``k >= 1``.
        out_ids: ``(n_rows, >= min(k, n_docs))`` int64 output columns.
        out_scores: ``(n_rows, >= min(k, n_docs))`` float64 output scores.
        floor: ``(n_rows,)`` least scores to list (``-inf``: none), or ``None``.

    Returns:
        ``(n_rows,)`` int64: the slots filled in each row.
    """
    n_docs = weights.shape[1]
    # plain ndarray views: slicing a memory map's subclass costs a Python call each time
    bounds, docs, values = (np.asarray(a) for a in (weights.indptr, weights.indices, weights.data))
    index_dtype = bounds.dtype
    acc = np.zeros(n_docs)  # per call, so concurrent calls are safe
    rows = queries.indptr.tolist()
    floors = [-np.inf] * queries.shape[0] if floor is None else floor.tolist()
    counts = np.zeros(queries.shape[0], dtype=np.int64)
    for r in range(queries.shape[0]):
        terms = queries.indices[rows[r] : rows[r + 1]]
        if not terms.size:
            continue
        coefs = np.asarray(queries.data[rows[r] : rows[r + 1]], dtype=np.float64)
        starts = bounds[terms].tolist()
        ends = bounds[terms + 1].tolist()
        lists = [docs[s:e] for s, e in zip(starts, ends, strict=True)]
        for s, e, coef in zip(starts, ends, coefs.tolist(), strict=True):
            if csc_matvec is None:
                np.add.at(acc, docs[s:e], values[s:e] * coef)
            else:
                pointers = np.array([0, e - s], dtype=index_dtype)
                csc_matvec(n_docs, 1, pointers, docs[s:e], values[s:e], np.array([coef]), acc)
        cand = _candidates(acc, lists, coefs, max_weight[terms], k, floors[r])
        scores = acc[cand]
        if sum(e - s for s, e in zip(starts, ends, strict=True)) > n_docs // 8:
            acc.fill(0.0)
        else:
            for ids in lists:
                acc[ids] = 0.0
        top = _best(cand, scores, k)
        n = len(top)
        out_ids[r, :n] = cand[top]
        out_scores[r, :n] = scores[top]
        counts[r] = n
    return counts


def _candidates(
    acc: np.ndarray, lists: list[np.ndarray], coefs: np.ndarray, max_weight: np.ndarray, k: int, floor: float
) -> np.ndarray:
    """The matching documents (ascending) that may be in the top ``k``: all those scoring at
    least ``theta`` (a lower bound of the k-th best score, see the module docstring)."""
    theta = floor
    upper = coefs * max_weight
    scored: dict[int, np.ndarray] = {}  # acc gathered over a term's documents
    positive = bool((coefs > 0).all())
    long = [i for i, ids in enumerate(lists) if len(ids) >= k]
    # the k-th best of k matching documents' scores (a floor, the k-th best score of a whole
    # other shard, is most often higher than this shard's k-th best among one term's documents)
    if long and positive and floor == -np.inf:
        i = max(long, key=lambda j: upper[j])
        scored[i] = acc[lists[i]]
        theta = float(np.partition(scored[i], len(lists[i]) - k)[len(lists[i]) - k])
    essential: Sequence[int] = range(len(lists))
    if positive and theta > -np.inf and len(lists) > 1:
        order = np.argsort(-upper, kind="stable")
        rest = upper.sum() - np.cumsum(upper[order])  # rest[j]: the bounds of order[j + 1:]
        slack = _TOLERANCE * (1.0 + float(upper.sum()))
        enough = np.flatnonzero(rest + slack < theta - slack)
        if enough.size:
            essential = order[: int(enough[0]) + 1].tolist()
    parts = []
    for i in essential:
        ids = lists[i]
        scores = scored[i] if i in scored else acc[ids]
        keep = scores >= theta if theta > 0 else (scores >= theta) & (scores != 0.0)  # matches only
        parts.append(ids[keep])
    if len(parts) == 1:
        return parts[0]
    cand = np.sort(np.concatenate(parts))
    first = np.ones(len(cand), dtype=bool)
    first[1:] = cand[1:] != cand[:-1]
    return cand[first]


def _best(cand: np.ndarray, scores: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best of ``scores`` (``cand`` ascending), best first, ties by
    ``cand`` descending."""
    n = len(scores)
    if n > k:
        threshold = np.partition(scores, n - k)[n - k]
        above = np.flatnonzero(scores > threshold)
        at = np.flatnonzero(scores == threshold)
        keep = np.concatenate([above, at[len(at) - (k - len(above)) :]])  # the largest ids tie best
        cand_keep, scores_keep = cand[keep], scores[keep]
        return keep[np.lexsort((cand_keep, scores_keep))[::-1]]
    return np.lexsort((cand, scores))[::-1]

"""Exact top-k selection of score rows, best first, ties broken by column (= docno) descending.

Ties fall as trec_eval breaks them (docno descending, see :mod:`clir.formats.runs`), so a top
``k`` is always a prefix of the full ranking in the order every evaluator uses. Both ways below
work on mirrored columns (column ``j`` seen as ``n_cols - 1 - j``), where that rule reads
"ties by column ascending", and mirror the result back.

Two ways to the same result (the same columns, the same float64 values, in the same order):

- :func:`dense_topk` ranks a dense ``(n_rows, n_cols)`` block of scores for every row at once:
  ``np.argpartition`` along the rows; the kept cells tied with the ``k``-th value are replaced
  by the first such columns of the row (placed last); the others get an (unstable, SIMD)
  ``argsort`` and one more argsort puts the runs of equal values in column order. A fixed
  number of numpy calls per block, whatever its number of rows, at a cost proportional to
  ``n_rows * n_cols``.
- :func:`sparse_topk` ranks the matching documents of each row of a sparse block and fills in
  the non-matching ones from a precomputed order, at a cost proportional to the number of
  matches plus ``k``, but with a loop of small numpy calls per row.

:func:`prefer_dense` picks between them with a cost model measured on this code (see there).
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

DENSE_BLOCK_BYTES = 2 << 20
"""Size of the float64 scores of one dense block. Small blocks keep the temporaries of the
ranking in cache (and out of the page-fault path of fresh large allocations): on the Bible
collection 16-64 rows ran 1.6x faster than 128-500."""

_DENSE_NS_PER_CELL = 7.0
_SPARSE_NS_PER_ROW = 35_000.0
_SPARSE_NS_PER_MATCH = 35.0


def prefer_dense(n_docs: int, matches_per_row: float) -> bool:
    """Whether :func:`dense_topk` is expected to be at least as fast as :func:`sparse_topk`.

    A cost model fitted to single-threaded runs at k = 1000 (numpy 2.4, AVX-512): the dense
    path costs about 7 ns per document per row (the block is densified and passed over ~15
    times), the sparse path about 35 us per row (its loop of small numpy calls) plus 35 ns per
    matching document. On a synthetic Zipf collection of 10^5 documents (~4,200 matches a
    query) the sparse path ran 3.5x faster; on the Swahili Bible (6,221 passages, ~1,900
    matches a query) the two ran at parity. So the dense path takes small collections
    (n_docs <= 5 * matches + 5,000).

    Args:
        n_docs: Columns of a dense row.
        matches_per_row: Mean number of matching documents of a row (an upper bound will do).

    Returns:
        ``True`` to use :func:`dense_topk`.
    """
    return n_docs * _DENSE_NS_PER_CELL <= _SPARSE_NS_PER_ROW + matches_per_row * _SPARSE_NS_PER_MATCH


def dense_rows(n_docs: int, budget: int = DENSE_BLOCK_BYTES) -> int:
    """Rows of a dense block of ``n_docs`` float64 columns that fit ``budget`` bytes (at least 1)."""
    return max(1, budget // (n_docs * 8))


def dense_topk(scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``k`` best columns of every row of a dense score block, best first.

    Ties are broken by column descending, as a stable sort of ``-scores[:, ::-1]`` would rank
    the mirrored columns. A cell of ``-inf`` ranks last and is returned as ``-inf`` when the row
    has fewer than ``k`` other cells: callers hide the documents a row must not list so.

    Args:
        scores: ``(n_rows, n_cols)`` float64 scores (no NaN); left unchanged.
        k: Depth, ``1 <= k <= n_cols``.

    Returns:
        ``(cols, values)``: ``(n_rows, k)`` int64 columns and their float64 scores.
    """
    n_rows, n_cols = scores.shape
    # Rank costs (smallest first) of the mirrored columns: numpy's introselect is several times
    # faster on -scores than on scores when most cells are 0 (BM25's unmatched documents),
    # measured with numpy 2.4.
    costs = np.negative(scores[:, ::-1])
    rows = np.arange(n_rows, dtype=np.int64)
    if k < n_cols:
        cols = np.argpartition(costs, k - 1, axis=1)[:, :k]
        values = np.take(costs, cols + (rows * n_cols)[:, None])
        threshold = values[:, k - 1].copy()  # each row's k-th smallest cost
    else:
        cols = np.broadcast_to(np.arange(n_cols, dtype=np.int64), (n_rows, n_cols))
        values = costs
        threshold = values.max(axis=1)
    # Every kept cell is below the threshold or equal to it, and argpartition kept an arbitrary
    # subset of the cells equal to it: they are replaced by the first ``need`` such columns,
    # placed last in column order. Only the cells below the threshold are sorted.
    at_threshold = values == threshold[:, None]
    need = np.count_nonzero(at_threshold, axis=1)
    threshold_cols = _first_columns(costs == threshold[:, None], need)
    values[at_threshold] = np.inf
    order = np.argsort(values, axis=1)  # unstable (SIMD) sort; equal values fixed below
    order += (rows * k)[:, None]
    sorted_values = np.take(values, order)
    sorted_cols = np.take(cols, order)
    _sort_runs_by_column(sorted_cols, sorted_values, n_cols)
    slots = _slots(rows * k + (k - need), need)  # the last need[r] slots of each row r
    sorted_cols.reshape(-1)[slots] = threshold_cols
    sorted_values.reshape(-1)[slots] = np.repeat(threshold, need)
    return (n_cols - 1) - sorted_cols, np.negative(sorted_values, out=sorted_values)


def _sort_runs_by_column(cols: np.ndarray, values: np.ndarray, n_cols: int) -> None:
    """Within each row sorted by value, order the runs of equal finite values by column (in place).

    All runs are sorted by one argsort of ``(run, column)`` keys: runs never span rows, and a
    run's cells stay in the run's own positions.
    """
    n_rows, m = values.shape
    same = values[:, 1:] == values[:, :-1]
    same &= values[:, 1:] != np.inf
    if not same.any():
        return
    new_run = np.ones((n_rows, m), dtype=bool)
    np.logical_not(same, out=new_run[:, 1:])
    in_run = np.zeros((n_rows, m), dtype=bool)
    in_run[:, 1:] = same
    in_run[:, :-1] |= same
    cells = np.flatnonzero(in_run)
    run = np.cumsum(new_run.reshape(-1))[cells]
    flat = cols.reshape(-1)
    tied = flat[cells]
    flat[cells] = tied[np.argsort(run * np.int64(n_cols) + tied)]


def _first_columns(equal: np.ndarray, need: np.ndarray) -> np.ndarray:
    """Row by row, the first ``need[r]`` columns where ``equal[r]`` holds, concatenated.

    Rows with many more true cells than needed (BM25's unmatched documents at the cut) are
    first scanned over a prefix sized to likely hold enough of them.
    """
    n_rows, n_cols = equal.shape
    out = np.empty(int(need.sum()), dtype=np.int64)
    row_start = np.zeros(n_rows, dtype=np.int64)
    np.cumsum(need[:-1], out=row_start[1:])
    todo = np.arange(n_rows)
    n_true = np.count_nonzero(equal, axis=1)
    wide = np.flatnonzero(n_true > 4 * need)
    if wide.size:
        prefix = int((need[wide] * (n_cols / n_true[wide])).max() * 1.5) + 64
        if prefix < n_cols:
            found, ok = _first_true(equal[wide, :prefix], need[wide])
            out[_slots(row_start[wide[ok]], need[wide[ok]])] = found
            todo = np.sort(np.concatenate([np.flatnonzero(n_true <= 4 * need), wide[~ok]]))
    if todo.size:
        found, _ = _first_true(equal[todo] if todo.size < n_rows else equal, need[todo])
        out[_slots(row_start[todo], need[todo])] = found
    return out


def _first_true(mask: np.ndarray, need: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The first ``need[r]`` true columns of each row that has that many (concatenated), and
    which rows have."""
    n_rows, width = mask.shape
    cells = np.flatnonzero(mask)
    row = cells // width
    count = np.bincount(row, minlength=n_rows)
    start = np.zeros(n_rows, dtype=np.int64)
    np.cumsum(count[:-1], out=start[1:])
    ok = count >= need
    keep = np.arange(cells.size) - start[row] < need[row]
    keep &= ok[row]
    return cells[keep] - row[keep] * width, ok


def _slots(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """``concatenate([arange(s, s + c) for s, c in zip(start, count)])``, vectorised."""
    total = int(count.sum())
    offset = np.zeros(len(count), dtype=np.int64)
    np.cumsum(count[:-1], out=offset[1:])
    return np.repeat(start - offset, count) + np.arange(total)


def unmatched_order(prior: np.ndarray) -> np.ndarray:
    """Columns by ``prior`` ascending, ties by column descending: the order in which
    :func:`sparse_topk` takes the documents a row does not match (best unmatched score first)."""
    return (len(prior) - 1) - np.argsort(prior[::-1], kind="stable")


def sparse_topk(
    sparse: sp.csr_matrix,
    beta: np.ndarray,
    prior: np.ndarray | None,
    prior_order: np.ndarray | None,
    k: int,
    out_ids: np.ndarray,
    out_scores: np.ndarray,
    matched_only: np.ndarray,
    floor: np.ndarray | None = None,
) -> np.ndarray:
    """Fill ``out_ids``/``out_scores`` with each row's exact top ``k`` of ``sparse - beta * prior``.

    A row's documents absent from ``sparse`` score ``-beta * prior`` (0 without a prior); they
    are ranked by ``prior_order``, so only the matching documents and the ``k`` best
    non-matching ones are ever compared. A row of ``matched_only`` ranks its matching documents
    (the stored entries of its row of ``sparse``) alone and may fill fewer than ``k`` slots;
    with a ``floor``, only those scoring at least its value (a row's documents below a lower
    bound of the k-th best score of a larger collection, of which these are a shard, cannot be
    in that collection's top ``k``), so that most matches are dropped by one comparison.

    Args:
        sparse: ``(n_rows, n_docs)`` CSR of the sparse part of the scores.
        beta: ``(n_rows,)`` prior weights (>= 0).
        prior: ``(n_docs,)`` per-document prior, or ``None`` for none.
        prior_order: ``unmatched_order(prior)`` (ignored without a prior).
        k: Depth, ``1 <= k <= n_docs``.
        out_ids: ``(n_rows, k)`` int64 output columns.
        out_scores: ``(n_rows, k)`` float64 output scores.
        matched_only: ``(n_rows,)`` bool, the rows that list only their matching documents.
        floor: ``(n_rows,)`` float64 least scores of the ``matched_only`` rows (``-inf``: none),
            or ``None``.

    Returns:
        ``(n_rows,)`` int64: the slots filled in each row (``k`` unless ``matched_only``).
    """
    n_docs = sparse.shape[1]
    last = n_docs - 1
    # Mirrored columns (see the module docstring): ties go to the smaller mirrored id below.
    indptr, indices, data = sparse.indptr, last - sparse.indices, sparse.data
    if prior is not None:
        prior, prior_order = np.ascontiguousarray(prior[::-1]), last - prior_order  # type: ignore[operator]
    mask = np.zeros(n_docs, dtype=bool)  # per call, so concurrent retrieve() calls are safe
    doc_order = np.arange(n_docs)
    best_prior = 0.0 if prior is None else float(prior[prior_order[0]])  # type: ignore[index]
    bounds = indptr.tolist()  # Python ints: cheaper to index in the loop than numpy scalars
    betas = beta.tolist()
    only = matched_only.tolist()
    floors = [-np.inf] * len(only) if floor is None else floor.tolist()
    counts = np.full(sparse.shape[0], k, dtype=np.int64)
    for r in range(sparse.shape[0]):
        s, e = bounds[r], bounds[r + 1]
        m = e - s
        b = betas[r]
        use_prior = prior is not None and b != 0.0
        idx = indices[s:e]
        val = data[s:e]
        if only[r] and floors[r] > -np.inf:
            keep = np.flatnonzero(val >= floors[r])
            idx, val, m = idx[keep], val[keep], len(keep)
        # Documents matching no query term are ranked by prior, then docno.
        order = prior_order if use_prior else doc_order
        if use_prior:
            val = val - b * prior[idx]
            best_unmatched = -b * best_prior
        else:
            best_unmatched = 0.0
        if m > k:
            top = _select(val, idx, k)
            idx, val = idx[top], val[top]
        o = _sort_desc(val, idx, n_docs)
        idx, val = idx[o], val[o]
        n = len(idx)
        if only[r] or (n and val[-1] > best_unmatched):
            # The row lists its matching documents alone, or every kept one beats every other
            # document: no merge needed.
            out_ids[r, :n] = last - idx
            out_scores[r, :n] = val
            if only[r]:
                counts[r] = n
            elif n < k:
                mask[idx] = True
                pre = order[:k]
                un = pre[~mask[pre]][: k - n]
                mask[idx] = False
                out_ids[r, n:] = last - un
                out_scores[r, n:] = -b * prior[un] if use_prior else 0.0
            continue
        if m:
            matched = indices[s:e]
            mask[matched] = True
            # A prefix of k + m documents always holds k unmatched ones; start with a
            # prefix sized for the expected share of matched documents and grow it.
            span = min(n_docs, k + m, k + 16 + (2 * k * m) // max(n_docs - m, 1))
            while True:
                pre = order[:span]
                un = pre[~mask[pre]][:k]
                if len(un) == k or span >= min(n_docs, k + m):
                    break
                span = min(n_docs, k + m, 2 * span)
            mask[matched] = False
        else:
            un = order[:k]
        uval = -b * prior[un] if use_prior else np.zeros(len(un))
        ids, out_scores[r] = _merge(idx, val, un, uval, k)
        out_ids[r] = last - ids
    return counts


def _select(val: np.ndarray, idx: np.ndarray, k: int) -> np.ndarray:
    """Positions of the ``k`` best values; ties at the boundary go to the smaller doc id."""
    thr = np.partition(val, len(val) - k)[len(val) - k]  # the k-th best value
    top = np.flatnonzero(val >= thr)
    if len(top) > k:
        gt = np.flatnonzero(val > thr)
        eq = np.flatnonzero(val == thr)
        eq = eq[np.argsort(idx[eq], kind="stable")[: k - len(gt)]]
        top = np.concatenate([gt, eq])
    return top


def _sort_desc(val: np.ndarray, idx: np.ndarray, n_docs: int) -> np.ndarray:
    """Order by value descending, then doc id ascending."""
    o = np.argsort(-val)
    v = val[o]
    if v.size > 1:
        new_value = v[1:] != v[:-1]
        if not new_value.all():
            group = np.zeros(v.size, dtype=np.int64)
            np.cumsum(new_value, out=group[1:])
            o = o[np.argsort(group * n_docs + idx[o])]
    return o


def _merge(
    a_ids: np.ndarray, a_val: np.ndarray, b_ids: np.ndarray, b_val: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Merge two disjoint lists sorted by (value desc, id asc); keep the first ``k``."""
    if not len(b_ids):
        return a_ids[:k], a_val[:k]
    if not len(a_ids):
        return b_ids[:k], b_val[:k]
    neg_b = -b_val
    before = np.searchsorted(neg_b, -a_val, side="left")
    upto = np.searchsorted(neg_b, -a_val, side="right")
    for i in np.flatnonzero(upto > before):
        before[i] += np.searchsorted(b_ids[before[i] : upto[i]], a_ids[i])
    pos_a = before + np.arange(len(a_ids))
    n = len(a_ids) + len(b_ids)
    is_a = np.zeros(n, dtype=bool)
    is_a[pos_a] = True
    ids = np.empty(n, dtype=np.int64)
    val = np.empty(n, dtype=np.float64)
    ids[pos_a] = a_ids
    val[pos_a] = a_val
    ids[~is_a] = b_ids
    val[~is_a] = b_val
    return ids[:k], val[:k]

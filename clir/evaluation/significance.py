"""Paired significance tests between two runs, measure by measure.

Both runs are evaluated on the same queries (every query of the qrels with a relevant
document, see :mod:`clir.evaluation.measures`), so their per-query values pair up. Two
two-sided tests of "no difference" are reported:

- the paired t-test (:func:`scipy.stats.ttest_rel`);
- the paired randomization test (Fisher's sign-flip test, as in Smucker et al., CIKM 2007):
  under the null hypothesis each per-query difference is as likely to have either sign, so the
  statistic ``|mean(s * d)|`` is compared over sign vectors ``s``. With at most
  ``EXACT_MAX_QUERIES`` queries all ``2**n`` sign vectors are enumerated and ``p`` is the exact
  fraction reaching the observed statistic (the observed signs included). With more, ``p`` is
  estimated from ``n_permutations`` random sign vectors as ``(count + 1) / (n_permutations + 1)``,
  which counts the observed assignment and so is never 0 (Phipson & Smyth, 2010).

Degenerate cases: when every difference is 0 both p-values are 1; when every difference is the
same non-zero value the t-test p-value is 0 (infinite t); with fewer than two queries the t-test
p-value is NaN.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from scipy import stats

from clir.errors import ConfigError
from clir.evaluation.aqwv import AQWVConfig
from clir.evaluation.measures import DEFAULT_MEASURES, _per_query
from clir.types import Qrels, Run

EXACT_MAX_QUERIES = 16
"""Up to this many queries, the randomization test enumerates all ``2**n`` sign vectors."""

_BATCH = 2048


@dataclass(frozen=True)
class Comparison:
    """Two runs compared on one measure.

    Attributes:
        mean_a: Mean of run A over the evaluated queries.
        mean_b: Mean of run B.
        diff: ``mean_b - mean_a``: positive when B is better.
        p_ttest: Two-sided p-value of the paired t-test.
        p_randomization: Two-sided p-value of the paired randomization (sign-flip) test.
        n_queries: Number of paired queries.
    """

    mean_a: float
    mean_b: float
    diff: float
    p_ttest: float
    p_randomization: float
    n_queries: int


def _differences(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> np.ndarray:
    a_values = np.asarray(a, dtype=np.float64)
    b_values = np.asarray(b, dtype=np.float64)
    if a_values.ndim != 1 or a_values.shape != b_values.shape:
        raise ConfigError(
            f"paired tests need two 1-d sequences of equal length, got shapes {a_values.shape} "
            f"and {b_values.shape}"
        )
    if a_values.size == 0:
        raise ConfigError("paired tests need at least one query, got none")
    if not (np.isfinite(a_values).all() and np.isfinite(b_values).all()):
        raise ConfigError("paired tests need finite per-query values, got NaN or infinity")
    return b_values - a_values


def paired_ttest(a: Sequence[float] | np.ndarray, b: Sequence[float] | np.ndarray) -> float:
    """Two-sided p-value of the paired t-test of ``b`` against ``a`` (per-query values).

    Raises:
        ConfigError: If the sequences differ in length, are empty or hold non-finite values.
    """
    diffs = _differences(a, b)
    if not diffs.any():
        return 1.0
    if diffs.size < 2:
        return float("nan")
    if np.ptp(diffs) == 0:
        return 0.0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # scipy's precision note on near-constant data
        result = stats.ttest_rel(np.asarray(b, dtype=np.float64), np.asarray(a, dtype=np.float64))
    return float(result.pvalue)


def _check_permutations(n_permutations: int) -> None:
    if isinstance(n_permutations, bool) or not isinstance(n_permutations, int) or n_permutations < 1:
        raise ConfigError(f"n_permutations must be an integer >= 1, got {n_permutations!r}")


def randomization_test(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> float:
    """Two-sided p-value of the paired randomization (sign-flip) test of ``b`` against ``a``.

    Exact for at most ``EXACT_MAX_QUERIES`` queries; otherwise Monte Carlo with
    ``n_permutations`` random sign vectors drawn from ``numpy.random.default_rng(seed)``.

    Raises:
        ConfigError: On unequal lengths, no query, non-finite values or ``n_permutations < 1``.
    """
    _check_permutations(n_permutations)
    diffs = _differences(a, b)
    n = diffs.size
    observed = abs(diffs.sum()) / n
    # Sums in another order can differ in the last bits: the observed assignment must count.
    reached = observed - 1e-12 * max(1.0, observed)
    if n <= EXACT_MAX_QUERIES:
        patterns = np.arange(2**n, dtype=np.int64)[:, None] >> np.arange(n, dtype=np.int64)
        signs = 1.0 - 2.0 * (patterns & 1)
        count = int(np.count_nonzero(np.abs(signs @ diffs) / n >= reached))
        return count / 2**n
    rng = np.random.default_rng(seed)
    count = 0
    for start in range(0, n_permutations, _BATCH):
        rows = min(_BATCH, n_permutations - start)
        signs = 1.0 - 2.0 * rng.integers(0, 2, size=(rows, n))
        count += int(np.count_nonzero(np.abs(signs @ diffs) / n >= reached))
    return (count + 1) / (n_permutations + 1)


def compare(
    run_a: Run,
    run_b: Run,
    qrels: Qrels,
    measures: Sequence[str] = DEFAULT_MEASURES,
    *,
    collection_size: int | None = None,
    aqwv: AQWVConfig | None = None,
    n_permutations: int = 10_000,
    seed: int = 0,
) -> dict[str, Comparison]:
    """Compare two runs on each measure with paired t and randomization tests.

    Args:
        run_a: The reference run (e.g. the baseline).
        run_b: The run compared with it; ``diff`` is B minus A.
        qrels: ``qrels[qid][docno] = relevance``.
        measures: Measure names as for :func:`clir.evaluation.evaluate`.
        collection_size: Documents in the collection; required when an AQWV measure is asked.
        aqwv: Returned-set rule and beta of the AQWV measures.
        n_permutations: Random sign vectors of the randomization test (unused when exact).
        seed: Seed of the randomization test.

    Returns:
        ``{measure: Comparison}`` in the order of ``measures``.

    Raises:
        ConfigError: As :func:`clir.evaluation.evaluate`, or on ``n_permutations < 1``.
    """
    _check_permutations(n_permutations)
    values_a = _per_query(run_a, qrels, measures, aqwv, collection_size, "run_a", stacklevel=4)
    values_b = _per_query(run_b, qrels, measures, aqwv, collection_size, "run_b", stacklevel=4)
    comparisons: dict[str, Comparison] = {}
    for name, per_query_a in values_a.items():
        qids = list(per_query_a)
        a = np.array([per_query_a[qid] for qid in qids])
        b = np.array([values_b[name][qid] for qid in qids])
        comparisons[name] = Comparison(
            mean_a=float(a.mean()),
            mean_b=float(b.mean()),
            diff=float(b.mean() - a.mean()),
            p_ttest=paired_ttest(a, b),
            p_randomization=randomization_test(a, b, n_permutations=n_permutations, seed=seed),
            n_queries=len(qids),
        )
    return comparisons

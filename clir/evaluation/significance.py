"""Paired significance tests between runs, measure by measure, corrected for multiple testing.

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

Several runs compared with one reference (:func:`compare_runs`) make a family of tests per
measure: its p-values are adjusted together (:func:`adjust_pvalues`), by Holm's step-down
Bonferroni method by default (Holm, Scand. J. Statist. 1979), which controls the family-wise
error rate at any dependence between the tests. Each difference also gets a confidence interval
(:func:`confidence_interval`): the percentile interval of a paired bootstrap of the mean
difference (queries resampled with replacement, :func:`scipy.stats.bootstrap`), or the paired
t interval.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Annotated

import numpy as np
from scipy import stats

from clir.config import OneOf, PositiveInt, Range, Section, Seed, Where
from clir.errors import ConfigError
from clir.evaluation.aqwv import AQWVConfig
from clir.evaluation.measures import DEFAULT_MEASURES, _per_query, aggregate, summed
from clir.evaluation.table import natural_order
from clir.types import Qrels, Run

EXACT_MAX_QUERIES = 16
"""Up to this many queries, the randomization test enumerates all ``2**n`` sign vectors."""

_BATCH = 2048

CORRECTIONS = ("holm", "bonferroni", "none")
"""Multiple-testing corrections of :func:`adjust_pvalues`."""

INTERVALS = ("bootstrap", "t")
"""Confidence intervals of :func:`confidence_interval`."""
BOOTSTRAP_SAMPLES = 10_000
"""The default of ``bootstrap_samples``, the one value the ``t`` interval takes."""


@dataclass(frozen=True)
class SignificanceConfig(Section):
    """How runs are compared (the ``significance`` section of an experiment config).

    Attributes:
        correction: Adjustment of the p-values of one family (every run against one reference
            on one measure): ``holm`` (Holm-Bonferroni), ``bonferroni`` or ``none``.
        alpha: Level below which a corrected p-value counts as significant.
        permutations: Random sign vectors of the randomization test (unused when exact).
        interval: Confidence interval of a difference: ``bootstrap`` (paired, percentile) or
            ``t`` (paired t).
        confidence: Coverage of the interval.
        bootstrap_samples: Resamples of the bootstrap interval (the ``t`` interval takes only the
            default, 10,000).
        seed: Seed of the randomization test and of the bootstrap.
    """

    correction: Annotated[str, OneOf(CORRECTIONS)] = "holm"
    alpha: Annotated[float, Range(gt=0, lt=1)] = 0.05
    permutations: PositiveInt = 10_000
    interval: Annotated[str, OneOf(INTERVALS)] = "bootstrap"
    confidence: Annotated[float, Range(gt=0, lt=1)] = 0.95
    bootstrap_samples: PositiveInt = BOOTSTRAP_SAMPLES
    seed: Seed = 0

    def check(self, where: Where) -> None:
        if self.interval != "bootstrap" and self.bootstrap_samples != BOOTSTRAP_SAMPLES:  # was ignored
            expected = f"{BOOTSTRAP_SAMPLES} (the default): only the 'bootstrap' interval resamples"
            raise where.error("bootstrap_samples", self.bootstrap_samples, expected)


@dataclass(frozen=True)
class Comparison:
    """Run B compared with a reference run A on one measure.

    Attributes:
        mean_a: Run A's value over the evaluated queries, as :func:`~clir.evaluation.evaluate`
            gives it: the mean, or the sum for trec_eval's counts (``NumRet``, ``NumRelRet``,
            ...; see :func:`~clir.evaluation.measures.summed`).
        mean_b: Run B's value, likewise.
        diff: ``mean_b - mean_a``: positive when B is better.
        ci_low: Lower end of the confidence interval of ``diff`` (NaN with fewer than 2 queries;
            for a summed count, the interval of the mean difference times the number of queries).
        ci_high: Upper end.
        p_ttest: Two-sided p-value of the paired t-test.
        p_ttest_corrected: ``p_ttest`` adjusted over its family (see :func:`compare_runs`).
        p_randomization: Two-sided p-value of the paired randomization (sign-flip) test.
        p_randomization_corrected: ``p_randomization`` adjusted over its family.
        n_queries: Number of paired queries.
    """

    mean_a: float
    mean_b: float
    diff: float
    ci_low: float
    ci_high: float
    p_ttest: float
    p_ttest_corrected: float
    p_randomization: float
    p_randomization_corrected: float
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


def adjust_pvalues(pvalues: Sequence[float], method: str = "holm") -> list[float]:
    """P-values adjusted for testing them together (one family).

    ``holm``: sort the ``m`` p-values ascending, multiply the ``i``-th smallest (from 1) by
    ``m - i + 1``, cap at 1 and carry the running maximum up the order (Holm's step-down method);
    ``bonferroni``: each times ``m``, capped at 1; ``none``: unchanged. A NaN p-value (a test
    that could not be computed) stays NaN and is not counted in ``m``.

    Args:
        pvalues: The family's p-values, each in [0, 1] or NaN.
        method: One of :data:`CORRECTIONS`.

    Returns:
        The adjusted p-values, in the order given.

    Raises:
        ConfigError: On an unknown method or a p-value outside [0, 1].
    """
    if method not in CORRECTIONS:
        raise ConfigError(f"correction method {method!r} is unknown; expected one of {list(CORRECTIONS)}")
    values = np.asarray(pvalues, dtype=np.float64)
    bad = values[~np.isnan(values) & ((values < 0) | (values > 1))]
    if bad.size:
        raise ConfigError(f"p-values must lie in [0, 1] (or be NaN), got {float(bad[0])!r}")
    adjusted = values.copy()
    tested = np.flatnonzero(~np.isnan(values))
    m = tested.size
    if method == "bonferroni":
        adjusted[tested] = np.minimum(1.0, values[tested] * m)
    elif method == "holm":
        order = tested[np.argsort(values[tested], kind="stable")]
        scaled = values[order] * (m - np.arange(m))
        adjusted[order] = np.minimum(1.0, np.maximum.accumulate(scaled))
    return [float(p) for p in adjusted]


def confidence_interval(
    a: Sequence[float] | np.ndarray,
    b: Sequence[float] | np.ndarray,
    *,
    method: str = "bootstrap",
    confidence: float = 0.95,
    samples: int = 10_000,
    seed: int = 0,
) -> tuple[float, float]:
    """Confidence interval of the mean paired difference ``mean(b - a)``.

    Args:
        a: Per-query values of the reference.
        b: Per-query values of the other run, in the same query order.
        method: ``bootstrap``: percentile interval of ``samples`` resamples of the queries
            (:func:`scipy.stats.bootstrap`, seeded); ``t``: mean difference plus or minus the
            t quantile times its standard error.
        confidence: Coverage, in (0, 1).
        samples: Bootstrap resamples.
        seed: Seed of the bootstrap.

    Returns:
        ``(low, high)``; a single point when every difference is the same; NaN with fewer than
        two queries.

    Raises:
        ConfigError: As :func:`paired_ttest`, or on an unknown method.
    """
    if method not in INTERVALS:
        raise ConfigError(f"interval method {method!r} is unknown; expected one of {list(INTERVALS)}")
    diffs = _differences(a, b)
    if diffs.size < 2:
        return (math.nan, math.nan)
    if np.ptp(diffs) == 0:
        return (float(diffs[0]), float(diffs[0]))
    if method == "t":
        interval = stats.ttest_1samp(diffs, 0.0).confidence_interval(confidence)
    else:
        interval = stats.bootstrap(
            (diffs,),
            np.mean,
            n_resamples=samples,
            confidence_level=confidence,
            method="percentile",
            rng=np.random.default_rng(seed),
        ).confidence_interval
    return (float(interval.low), float(interval.high))


def compare_runs(
    reference: Run,
    runs: Mapping[str, Run],
    qrels: Qrels,
    measures: Sequence[str] = DEFAULT_MEASURES,
    *,
    collection_size: int | None = None,
    aqwv: AQWVConfig | None = None,
    config: SignificanceConfig | None = None,
    reference_name: str = "reference",
) -> dict[str, dict[str, Comparison]]:
    """Compare every run with one reference, correcting each measure's family of tests.

    A family is every run of ``runs`` against ``reference`` on one measure: its t-test p-values
    are adjusted together, and so are its randomization p-values (``config.correction``).

    Args:
        reference: Run A of every comparison (e.g. the baseline).
        runs: ``{name: run}``, each run B of one comparison; ``diff`` is B minus A.
        qrels: ``qrels[qid][docno] = relevance``.
        measures: Measure names as for :func:`clir.evaluation.evaluate`.
        collection_size: Documents in the collection; required when an AQWV measure is asked.
        aqwv: Returned-set rule and beta of the AQWV measures.
        config: Tests, interval and correction (default :class:`SignificanceConfig`).
        reference_name: Names the reference in warnings (the runs are named by their keys).

    Returns:
        ``{name: {measure: Comparison}}`` in the order of ``runs`` and ``measures``.

    Raises:
        ConfigError: As :func:`clir.evaluation.evaluate`, or on an empty ``runs``.
    """
    if not isinstance(runs, Mapping):
        raise ConfigError(f"runs must be a mapping {{name: run}}, got a {type(runs).__name__}")
    if not runs:
        raise ConfigError("runs is empty: give at least one run to compare with the reference")
    values_a = _per_query(reference, qrels, measures, aqwv, collection_size, reference_name, stacklevel=4)
    values = {
        name: _per_query(run, qrels, measures, aqwv, collection_size, name, stacklevel=4)
        for name, run in runs.items()
    }
    return compare_per_query(values_a, values, config)


def compare_per_query(
    reference: Mapping[str, Mapping[str, float]],
    runs: Mapping[str, Mapping[str, Mapping[str, float]]],
    config: SignificanceConfig | None = None,
) -> dict[str, dict[str, Comparison]]:
    """:func:`compare_runs` of runs already evaluated query by query.

    Args:
        reference: The reference's :func:`~clir.evaluation.evaluate_per_query` values.
        runs: ``{name: values}``, each as ``reference`` (the same measures and queries).
        config: Tests, interval and correction (default :class:`SignificanceConfig`).

    Returns:
        As :func:`compare_runs`. The queries are paired by qid and taken in their natural order
        (:func:`~clir.evaluation.natural_order`), not in the order of the mappings: the Monte
        Carlo p-value and the bootstrap interval draw their signs and resamples by position, so
        the same values in another order (qrels sorted otherwise) gave other numbers.

    Raises:
        ConfigError: If a run was evaluated on other measures or queries than the reference
            (the test pairs each query's values).
    """
    config = config or SignificanceConfig()
    for name, values in runs.items():
        if missing := [measure for measure in reference if measure not in values]:
            raise ConfigError(
                f"{name!r} was evaluated without {missing}, which the reference has: compare "
                "values of the same measures"
            )
        for measure in reference:
            per_query = values[measure]
            if set(per_query) != set(reference[measure]):
                differ = sorted(set(per_query) ^ set(reference[measure]))
                raise ConfigError(
                    f"{name!r} and the reference were evaluated on other queries ({measure}: "
                    f"{len(differ)} in one only, e.g. {differ[:3]}); evaluate both against the same qrels"
                )
    raw: dict[str, dict[str, Comparison]] = {name: {} for name in runs}
    for measure, per_query_a in reference.items():
        qids = natural_order(per_query_a)  # the same numbers whatever the qrels' order
        a = np.array([per_query_a[qid] for qid in qids])
        scale = len(qids) if summed(measure) else 1  # a sum's difference is n times the mean's
        for name in runs:
            b = np.array([runs[name][measure][qid] for qid in qids])
            p_ttest = paired_ttest(a, b)
            p_randomization = randomization_test(a, b, n_permutations=config.permutations, seed=config.seed)
            low, high = confidence_interval(
                a,
                b,
                method=config.interval,
                confidence=config.confidence,
                samples=config.bootstrap_samples,
                seed=config.seed,
            )
            mean_a, mean_b = aggregate(measure, a.tolist()), aggregate(measure, b.tolist())
            raw[name][measure] = Comparison(
                mean_a=mean_a,
                mean_b=mean_b,
                diff=mean_b - mean_a,
                ci_low=low * scale,
                ci_high=high * scale,
                p_ttest=p_ttest,
                p_ttest_corrected=p_ttest,
                p_randomization=p_randomization,
                p_randomization_corrected=p_randomization,
                n_queries=len(qids),
            )
        family = [raw[name][measure] for name in runs]
        ttest = adjust_pvalues([c.p_ttest for c in family], config.correction)
        randomization = adjust_pvalues([c.p_randomization for c in family], config.correction)
        for name, c, p_t, p_r in zip(runs, family, ttest, randomization, strict=True):
            raw[name][measure] = replace(c, p_ttest_corrected=p_t, p_randomization_corrected=p_r)
    return raw


def compare(
    run_a: Run,
    run_b: Run,
    qrels: Qrels,
    measures: Sequence[str] = DEFAULT_MEASURES,
    *,
    collection_size: int | None = None,
    aqwv: AQWVConfig | None = None,
    config: SignificanceConfig | None = None,
) -> dict[str, Comparison]:
    """Compare two runs on each measure with paired t and randomization tests.

    One comparison per measure is a family of one: its corrected p-values equal the
    uncorrected. To compare several runs with one reference use :func:`compare_runs`.

    Args:
        run_a: The reference run (e.g. the baseline).
        run_b: The run compared with it; ``diff`` is B minus A.
        qrels: ``qrels[qid][docno] = relevance``.
        measures: Measure names as for :func:`clir.evaluation.evaluate`.
        collection_size: Documents in the collection; required when an AQWV measure is asked.
        aqwv: Returned-set rule and beta of the AQWV measures.
        config: Tests and interval (default :class:`SignificanceConfig`).

    Returns:
        ``{measure: Comparison}`` in the order of ``measures``.

    Raises:
        ConfigError: As :func:`clir.evaluation.evaluate`.
    """
    by_run = compare_runs(
        run_a,
        {"run_b": run_b},
        qrels,
        measures,
        collection_size=collection_size,
        aqwv=aqwv,
        config=config,
        reference_name="run_a",
    )
    return by_run["run_b"]

"""Tests added by a mutation-testing hunt over clir.evaluation and clir.formats.

Each test pins a behaviour that a small change of the source (a mutation) had left unnoticed by
the rest of the suite: the docstring names the mutation it kills. Expected values are computed
by hand (or, for the plumbing of a config, from the clir function it must be passed to).
"""

from __future__ import annotations

import math
import warnings
from types import MappingProxyType

import numpy as np
import pytest
from scipy import stats

from clir.errors import ConfigError, FormatError
from clir.evaluation import (
    AQWVConfig,
    SignificanceConfig,
    aqwv_per_query,
    compare_per_query,
    confidence_interval,
    evaluate,
    markdown_table,
    paired_ttest,
    randomization_test,
)
from clir.formats import RunArrays, read_topics, write_qrels, write_run, write_topics
from clir.formats.manifest import manifest_of, manifest_problem
from clir.types import Query

# N = 100 documents; qa has 2 relevant (r1, r2); qb has 1 relevant and is absent from the run.
N = 100
AQ_QRELS = {"qa": {"r1": 1, "r2": 2, "n1": 0}, "qb": {"s1": 1}}
# qa's ranking: r1 (rel), n1 (non-rel), x1 (unjudged), r2 (rel), x2 (unjudged)
AQ_RUN = {"qa": {"r1": 0.9, "n1": 0.8, "x1": 0.7, "r2": 0.6, "x2": 0.5}}


def _quiet(function, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return function(*args, **kwargs)


# ---------------------------------------------------------------- AQWV names and configs


@pytest.mark.parametrize("name", ["AQWV@0", "aqwv@00"])
def test_an_aqwv_cutoff_of_zero_is_refused_by_name(name):
    """Mutation ``int(tail) >= 1`` -> ``>= 0`` in measures._parse: 'AQWV@0' (an empty set for
    every query, a constant 0) had been accepted."""
    with pytest.raises(ConfigError, match=r"AQWV takes '@<cutoff>' \(>= 1\)"):
        evaluate(AQ_RUN, AQ_QRELS, [name], collection_size=N)


def test_aqwv_at_oracle_drops_the_threshold_of_the_given_config():
    """Mutation: measures._aqwv_config's oracle without ``threshold=None``. A config with a
    threshold (for 'AQWV') must still let 'AQWV@oracle' be asked beside it; the oracle takes
    no threshold, so it had raised."""
    config = AQWVConfig(cutoff=None, threshold=0.75)
    values = _quiet(evaluate, AQ_RUN, AQ_QRELS, ["AQWV", "AQWV@oracle"], collection_size=N, aqwv=config)
    # AQWV: scores >= 0.75 return r1, n1: 1 - 1/2 - 40/98; qb 0. Oracle: the best prefix, k = 1: 0.5
    assert values == pytest.approx({"AQWV": (0.5 - 40 / 98) / 2, "AQWV@oracle": 0.25})


def test_aqwv_at_a_cutoff_is_no_oracle_even_when_the_config_is():
    """Mutation: measures._aqwv_config's cutoff without ``oracle=False``. 'AQWV@3' with an
    oracle config had been the oracle (0.25) instead of the top 3."""
    config = AQWVConfig(oracle=True)
    values = _quiet(evaluate, AQ_RUN, AQ_QRELS, ["AQWV@3", "AQWV"], collection_size=N, aqwv=config)
    assert values == pytest.approx({"AQWV@3": (0.5 - 80 / 98) / 2, "AQWV": 0.25})


def test_the_default_aqwv_config_returns_the_top_ten():
    """Mutation: AQWVConfig's default cutoff 10 -> 20. The eleventh document, relevant, is not
    returned by default: 1 relevant of 2 found, 9 false alarms."""
    assert AQWVConfig() == AQWVConfig(beta=40.0, cutoff=10, threshold=None, oracle=False)
    run = {"q": {f"d{i:02d}": float(20 - i) for i in range(1, 13)}}  # d01 best ... d12
    qrels = {"q": {"d01": 1, "d11": 1}}
    expected = 1 - 1 / 2 - 40 * 9 / (1000 - 2)
    assert aqwv_per_query(run, qrels, 1000)["q"] == pytest.approx(expected)
    assert evaluate(run, qrels, ["AQWV"], collection_size=1000)["AQWV"] == pytest.approx(expected)


def test_an_aqwv_threshold_returns_a_document_scoring_exactly_it():
    """Mutation ``score >= threshold`` -> ``>``: the documented rule is "at least threshold"."""
    config = AQWVConfig(cutoff=None, threshold=0.8)  # r1 (0.9) and n1 (0.8, exactly)
    assert _quiet(aqwv_per_query, AQ_RUN, AQ_QRELS, N, config)["qa"] == pytest.approx(1 - 1 / 2 - 40 * 1 / 98)


def test_a_negative_grade_is_no_relevant_document_for_aqwv():
    """Mutation: a returned document counted relevant when its grade is not 0 (``!= 0``) rather
    than ``>= 1``. TREC qrels use -1 and -2 for junk/spam: non-relevant, a false alarm."""
    qrels = {"q": {"r": 1, "junk": -1, "spam": -2}}
    run = {"q": {"junk": 3.0, "r": 2.0, "spam": 1.0}}
    # top 3: 1 relevant of 1, 2 false alarms among N - R = 99
    assert aqwv_per_query(run, qrels, 100, AQWVConfig(cutoff=3))["q"] == pytest.approx(1 - 40 * 2 / 99)
    # and the binary measures of trec_eval agree that a negative grade is not relevant
    assert evaluate(run, qrels, ["P@3", "AP"]) == pytest.approx({"P@3": 1 / 3, "AP": 1 / 2})


# ---------------------------------------------------------------- significance


def test_exact_randomization_covers_sixteen_queries():
    """Mutation ``n <= EXACT_MAX_QUERIES`` -> ``<``: 16 queries are enumerated exactly (a
    constant gain: only the all-plus and all-minus sign vectors reach it, p = 2 / 2**16), not
    estimated ((count + 1) / 10001 = 1 / 10001 or more)."""
    assert randomization_test(np.zeros(16), np.full(16, 0.5)) == 2 / 2**16
    assert randomization_test(np.zeros(17), np.full(17, 0.5), n_permutations=999) == 1 / 1000


def test_a_constant_non_zero_difference_has_a_t_test_p_value_of_exactly_zero():
    """Mutation: paired_ttest without its ``ptp == 0`` case. scipy gives 9.6e-33 for three
    differences of 0.1 (their mean is not exactly 0.1, so the variance is not exactly 0); the
    documented value, an infinite t, is 0."""
    assert paired_ttest(np.zeros(3), np.full(3, 0.1)) == 0.0


def test_one_query_has_no_t_test_p_value():
    """Mutation ``diffs.size < 2`` -> ``< 1``: one query has no variance to test against; its
    p-value had been 0 (as for a constant difference) instead of NaN."""
    assert math.isnan(paired_ttest([0.2], [0.5]))
    assert paired_ttest([0.2], [0.2]) == 1.0  # no difference at all: p = 1 whatever the count


def test_the_bootstrap_interval_is_the_percentile_interval():
    """Mutation ``method="percentile"`` -> ``"basic"`` in confidence_interval. Differences 0, 0,
    1: a resample's mean is 0, 1/3, 2/3 or 1 with probabilities 8/27, 12/27, 6/27, 1/27, so the
    2.5% and 97.5% quantiles are 0 and 1 (26/27 = 0.963 < 0.975). The basic interval,
    ``2 * mean - quantiles``, is (-1/3, 2/3): below every difference."""
    assert confidence_interval([0.0, 0.0, 0.0], [0.0, 0.0, 1.0]) == (0.0, 1.0)


def test_the_t_interval_takes_its_confidence():
    """Mutation: the t interval computed at 0.95 whatever ``confidence``."""
    a = [0.1, 0.2, 0.3, 0.4, 0.5]
    b = [0.15, 0.22, 0.41, 0.38, 0.6]
    d = np.array(b) - np.array(a)
    half = stats.t.ppf(0.95, df=4) * d.std(ddof=1) / math.sqrt(5)  # 90%: the 5% and 95% quantiles
    low, high = confidence_interval(a, b, method="t", confidence=0.9)
    assert (low, high) == pytest.approx((d.mean() - half, d.mean() + half))


# ---------------------------------------------------------------- tables


def test_a_pipe_in_a_markdown_cell_is_escaped():
    """Mutation: markdown_table without ``replace("|", "\\|")``. A system named 'bm25|rm3' (a
    pipeline) had split its row into one cell too many, shifting every value a column."""
    table = markdown_table({"bm25|rm3": {"AP": 0.5}}, ["AP"], markers={"bm25|rm3": {"AP": "|"}})
    assert table.splitlines()[-1] == "| bm25\\|rm3 | 0.5000\\| |"


def test_compare_per_query_applies_every_setting_of_its_config():
    """Mutations: compare_per_query calling the tests with their defaults rather than the config's
    ``permutations``, ``seed``, ``confidence`` or ``bootstrap_samples``. 20 queries: above the
    exact limit, so the randomization p-value depends on the seed and the permutations."""
    rng = np.random.default_rng(3)
    qids = [f"q{i}" for i in range(20)]
    a, b = rng.random(20), rng.random(20)
    reference = {"AP": dict(zip(qids, a.tolist(), strict=True))}
    runs = {"b": {"AP": dict(zip(qids, b.tolist(), strict=True))}}
    config = SignificanceConfig(permutations=301, seed=5, confidence=0.8, bootstrap_samples=777)
    got = compare_per_query(reference, runs, config)["b"]["AP"]
    p = randomization_test(a, b, n_permutations=301, seed=5)
    interval = confidence_interval(a, b, confidence=0.8, samples=777, seed=5)
    assert (got.p_randomization, got.ci_low, got.ci_high) == (p, *interval)
    # and each setting matters here, so that a default in its place would show
    assert p * 302 == round(p * 302)  # (count + 1) / (301 + 1)
    assert p != randomization_test(a, b, n_permutations=301, seed=0)
    assert interval != confidence_interval(a, b, confidence=0.95, samples=777, seed=5)
    assert interval != confidence_interval(a, b, confidence=0.8, samples=10_000, seed=5)
    assert interval != confidence_interval(a, b, confidence=0.8, samples=777, seed=0)


# ---------------------------------------------------------------- runs


def _arrays(run):
    docnos = list(dict.fromkeys(d for docs in run.values() for d in docs))
    index = {d: i for i, d in enumerate(docnos)}
    return RunArrays(
        docnos,
        list(run),
        [np.array([index[d] for d in docs], dtype=np.int64) for docs in run.values()],
        [np.array(list(docs.values()), dtype=np.float64) for docs in run.values()],
    )


def test_a_query_split_over_two_parts_is_refused_and_the_file_kept(tmp_path):
    """Mutation ``qids[0] <= last`` -> ``<`` in write_run: a query in two parts had been written
    as two rankings of one qid (ranks 1, 2 and again 1), which trec_eval reads as one ranking of
    the union in another order."""
    path = tmp_path / "r.run"
    path.write_text("old\n")
    first, second = _arrays({"q1": {"a": 2.0, "b": 1.0}}), _arrays({"q1": {"c": 3.0}, "q2": {"a": 1.0}})
    with pytest.raises(ConfigError, match=r"not in the file's order \(query 'q1' comes after 'q1'\)"):
        write_run(path, [first, second], workers=0)
    assert path.read_text() == "old\n"


@pytest.mark.parametrize("depth", [-1, -5])
def test_a_negative_depth_is_refused_before_the_file_is_replaced(tmp_path, depth):
    """Mutation: write_run without its ``depth < 0`` check (a negative depth had made negative
    line counts per query)."""
    path = tmp_path / "r.run"
    path.write_text("old\n")
    with pytest.raises(ConfigError, match=r"depth must be an integer >= 0 or None, got -"):
        write_run(path, {"q1": {"a": 1.0, "b": 0.5}}, depth=depth, workers=0)
    assert path.read_text() == "old\n"


# ---------------------------------------------------------------- qrels


def test_qrels_are_written_sorted_by_qid_then_docno(tmp_path):
    """Mutation: write_qrels writing rows in the order given (its docstring promises the sorted
    file, so the same judgements always give the same bytes)."""
    path = tmp_path / "qrels.txt"
    write_qrels(path, {"q2": {"b": 1, "a": 0}, "q1": {"z": 2, "c": 1}})
    assert path.read_text() == "q1 0 c 1\nq1 0 z 2\nq2 0 a 0\nq2 0 b 1\n"
    write_qrels(path, [("q2", "a", 0), ("q1", "z", 2), ("q2", "b", 1), ("q1", "c", 1)])
    assert path.read_text() == "q1 0 c 1\nq1 0 z 2\nq2 0 a 0\nq2 0 b 1\n"


@pytest.mark.parametrize("grade", [True, False, 1.0, "1"])
def test_a_relevance_that_is_no_integer_is_refused_and_the_file_kept(tmp_path, grade):
    """Mutation: write_qrels without its ``isinstance(relevance, bool)`` check: True had been
    written as 'True', a file that read_qrels (and trec_eval) refuses."""
    path = tmp_path / "qrels.txt"
    path.write_text("old\n")
    with pytest.raises(ConfigError, match=r"relevance of 'd1' for query 'q1' is .*expected an integer"):
        write_qrels(path, {"q1": {"d1": grade}})
    assert path.read_text() == "old\n"


def test_qrels_of_any_mapping_are_written_as_a_dict_is(tmp_path):
    """Bug: write_qrels read a mapping that is no dict (a ``MappingProxyType``, a read-only
    view) as rows of (qid, docno, relevance): "relevance of '1' for query 'q' is '0'" for
    ``{"q10": {"d1": 1}}``."""
    path = tmp_path / "qrels.txt"
    write_qrels(path, MappingProxyType({"q10": MappingProxyType({"d1": 1})}))
    assert path.read_text() == "q10 0 d1 1\n"


# ---------------------------------------------------------------- topics


def test_whitespace_inside_a_topic_text_becomes_one_space(tmp_path):
    """Mutation: write_topics stripping the text only. A tab or line break inside a text (a
    title pasted from a topic file) had made a line of 4 fields, or two lines."""
    path = tmp_path / "topics.tsv"
    write_topics(path, [Query("q1", " cross\tlingual\n retrieval ", "a\r\nb")])
    assert path.read_text() == "q1\tcross lingual retrieval\ta b\n"
    assert read_topics(path) == [Query("q1", "cross lingual retrieval", "a b")]


def test_a_topic_line_of_four_fields_is_refused(tmp_path):
    """Mutation ``len(parts) not in (2, 3)`` -> ``len(parts) < 2`` in read_topics: a fourth
    field (a tab inside a description) had been dropped without a word."""
    path = tmp_path / "topics.tsv"
    path.write_text("q1\ttext\tdescription\textra\n")
    with pytest.raises(FormatError, match=r":1: expected 2 or 3 tab-separated fields .*found 4"):
        read_topics(path)


# ---------------------------------------------------------------- manifests


def test_a_file_that_fills_the_hash_budget_exactly_is_hashed(tmp_path):
    """Mutation ``hashed > hash_budget`` -> ``>=`` in find_damage: the files "up to" the budget
    are hashed, so a file of exactly the budget's size that changed (same size) is found."""
    (tmp_path / "a.txt").write_bytes(b"12345678")
    files = manifest_of(tmp_path, ["a.txt"])
    (tmp_path / "a.txt").write_bytes(b"87654321")
    assert manifest_problem(tmp_path, files, hash_budget=8) == "a.txt differs from the manifest (SHA-256)"
    assert manifest_problem(tmp_path, files, hash_budget=7) is None  # beyond the budget: size only

"""Tests of clir.evaluation: hand-computed measures, AQWV worked examples, significance tests."""

from __future__ import annotations

import itertools
import json
import math
import re
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import ir_measures
import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from scipy import stats

from clir.errors import ConfigError
from clir.evaluation import (
    DEFAULT_MEASURES,
    AQWVConfig,
    SignificanceConfig,
    adjust_pvalues,
    aqwv,
    aqwv_per_query,
    compare,
    compare_per_query,
    compare_runs,
    confidence_interval,
    evaluate,
    evaluate_per_query,
    format_p,
    format_table,
    markdown_table,
    means,
    measure_name,
    paired_ttest,
    qwv,
    randomization_test,
)
from clir.formats import read_run, write_run

# q1 judges 3 relevant documents (d1: 1, d3: 2, d4: 1) and one non-relevant (d2).
# q2 judges one relevant document and is absent from the run: it scores 0 everywhere.
# q3 judges no relevant document: it is not evaluated.
QRELS = {
    "q1": {"d1": 1, "d2": 0, "d3": 2, "d4": 1},
    "q2": {"e1": 1},
    "q3": {"f1": 0},
}
# q1's ranking: d1 (rel 1), d2 (rel 0), d3 (rel 2), d5 (unjudged), d6 (unjudged); d4 is missed.
RUN = {
    "q1": {"d1": 0.9, "d2": 0.8, "d3": 0.7, "d5": 0.6, "d6": 0.5},
    "q3": {"f1": 1.0},
}

# AP(q1) = (1/1 + 2/3) / 3 relevant = 5/9
AP_Q1 = 5 / 9
# P@10(q1) = 2 relevant in the top 10 / 10
P10_Q1 = 0.2
# nDCG@10(q1), trec_eval gain = grade, discount log2(rank + 1):
#   DCG  = 1/log2(2) + 0/log2(3) + 2/log2(4)             = 1 + 1 = 2
#   IDCG = 2/log2(2) + 1/log2(3) + 1/log2(4)  (grades 2, 1, 1) = 2 + 0.6309 + 0.5
NDCG10_Q1 = 2 / (2 + 1 / math.log2(3) + 0.5)
# R@100(q1) = 2 of 3 relevant retrieved
R100_Q1 = 2 / 3


pytestmark = pytest.mark.filterwarnings("ignore:.*missing count 0 \\(trec_eval -c\\)")


def evaluate_quietly(*args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return evaluate(*args, **kwargs)


# ---------------------------------------------------------------- standard measures


def test_hand_computed_measures_average_over_queries_with_a_relevant_document():
    values = evaluate_quietly(RUN, QRELS, ["AP", "P@10", "nDCG@10", "nDCG@20", "R@100", "R@1000"])
    assert list(values) == ["AP", "P@10", "nDCG@10", "nDCG@20", "R@100", "R@1000"]
    # Two evaluated queries (q1, q2); q2 is missing from the run and counts 0.
    assert values["AP"] == pytest.approx(AP_Q1 / 2)
    assert values["P@10"] == pytest.approx(P10_Q1 / 2)
    assert values["nDCG@10"] == pytest.approx(NDCG10_Q1 / 2)
    assert values["nDCG@20"] == pytest.approx(NDCG10_Q1 / 2)
    assert values["R@100"] == pytest.approx(R100_Q1 / 2)
    assert values["R@1000"] == pytest.approx(R100_Q1 / 2)


def test_per_query_values_include_the_missing_query_as_zero():
    with pytest.warns(UserWarning, match=r"run: 1 query\(ies\) have no relevant document.*'q3'"):
        per_query = evaluate_per_query(RUN, QRELS, ["AP", "nDCG@10"])
    assert per_query["AP"] == pytest.approx({"q1": AP_Q1, "q2": 0.0})
    assert per_query["nDCG@10"] == pytest.approx({"q1": NDCG10_Q1, "q2": 0.0})


def test_run_query_without_qrels_is_ignored_with_a_warning():
    run = {**RUN, "q9": {"x": 1.0}, "q8": {"y": 1.0}}
    with pytest.warns(UserWarning, match=r"3 query\(ies\)"):
        values = evaluate(run, QRELS, ["AP"])
    assert values["AP"] == pytest.approx(AP_Q1 / 2)


def test_map_is_an_alias_of_ap_and_duplicates_are_dropped():
    values = evaluate_quietly(RUN, QRELS, ["MAP", "AP", "P@10"])
    assert list(values) == ["AP", "P@10"]
    assert measure_name("MAP") == "AP"
    assert measure_name("aqwv@20") == "AQWV@20"


def test_relevance_threshold_is_passed_to_ir_measures():
    # AP(rel=2): only d3 (rank 3) is relevant for q1 -> 1/3; q2 has nothing of grade 2 -> 0.
    values = evaluate_quietly(RUN, QRELS, ["AP(rel=2)"])
    assert values == {"AP(rel=2)": pytest.approx(1 / 6)}


def test_numrel_with_a_relevance_threshold_counts_the_qrels_as_trec_eval():
    # ir_measures' pytrec_eval provider takes NumRel(rel=1) only, so clir refused NumRel(rel=2)
    # as "not one of trec_eval's"; trec_eval's num_rel at -l 2 counts the grades >= 2.
    import pytrec_eval

    qrels = {"q1": {"a": 2, "b": 1, "c": 0, "d": 3}, "q2": {"x": 1, "y": 2}, "q3": {"z": 2}}
    run = {"q1": {"a": 1.0, "b": 0.5, "e": 0.2}, "q2": {"x": 1.0}}  # q3 retrieved nothing
    per_query = evaluate_per_query(run, qrels, ["NumRel(rel=2)", "NumRel", "NumRet(rel=2)"])
    assert per_query["NumRel(rel=2)"] == {"q1": 2.0, "q2": 1.0, "q3": 1.0}  # a, d; y; z
    assert per_query["NumRel"] == {"q1": 3.0, "q2": 2.0, "q3": 1.0}
    assert per_query["NumRet(rel=2)"] == {"q1": 1.0, "q2": 0.0, "q3": 0.0}  # a; -; -
    strict = pytrec_eval.RelevanceEvaluator(qrels, {"num_rel"}, relevance_level=2).evaluate(run)
    assert {qid: values["num_rel"] for qid, values in strict.items()} == {"q1": 2.0, "q2": 1.0}
    assert evaluate(run, qrels, ["NumRel(rel=2)"]) == {"NumRel(rel=2)": 4.0}  # summed
    assert measure_name("NumRel(rel=3)") == "NumRel(rel=3)"


def test_agrees_with_ir_measures_when_every_query_is_retrieved():
    rng = np.random.default_rng(3)
    qrels = {f"q{i}": {f"d{j}": int(rng.integers(0, 3)) for j in range(30)} for i in range(8)}
    for i, judged in enumerate(qrels.values()):
        judged[f"d{i}"] = 2  # at least one relevant document each
    run = {qid: {f"d{j}": float(s) for j, s in enumerate(rng.permutation(40))} for qid in qrels}
    names = ["AP", "P@10", "nDCG@10", "nDCG@20", "R@100"]
    expected = ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], qrels, run)
    values = evaluate(run, qrels, names)
    for name in names:
        assert values[name] == pytest.approx(expected[ir_measures.parse_measure(name)])


def test_counts_are_summed_over_queries_as_ir_measures_and_trec_eval_sum_them():
    # q1 retrieves 3 (2 of its 2 relevant), q2 2 (1 of its 1 relevant): trec_eval's counts are
    # totals (NumQ 2, NumRet 5, ...), not means over queries (NumQ 1.0, NumRet 2.5 before).
    qrels = {"q1": {"d1": 2, "d3": 1}, "q2": {"d1": 1, "d2": 0}}
    run = {"q1": {"d1": 3.0, "d2": 2.0, "d3": 1.0}, "q2": {"d3": 5.0, "d1": 4.0}}
    names = ["NumQ", "NumRet", "NumRel", "NumRelRet", "AP"]
    expected = ir_measures.calc_aggregate([ir_measures.parse_measure(n) for n in names], qrels, run)
    values = evaluate(run, qrels, names)
    assert values == {str(m): float(v) for m, v in expected.items()}
    assert values == pytest.approx({"NumQ": 2, "NumRet": 5, "NumRel": 3, "NumRet(rel=1)": 3, "AP": 2 / 3})
    assert means(evaluate_per_query(run, qrels, names)) == values
    # compare reports each run's value as evaluate does, the difference of the totals and its
    # interval (the mean difference's, times the number of queries); AP stays a mean
    fewer = {"q1": {"d1": 3.0}, "q2": {"d3": 5.0}}
    c = compare(run, fewer, qrels, ["NumRet", "AP"])
    assert (c["NumRet"].mean_a, c["NumRet"].mean_b, c["NumRet"].diff) == (5.0, 2.0, -3.0)
    assert (c["NumRet"].ci_low, c["NumRet"].ci_high) == (-4.0, -2.0)
    assert c["AP"].mean_a == values["AP"] and c["AP"].mean_b == 0.25  # (1/2 + 0) / 2


def _in_a_fresh_process(script: str) -> subprocess.CompletedProcess[str]:
    """``script`` run by a new Python (pytrec_eval's buffers as in the CLI's first evaluation)."""
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)


_NOTHING_RETRIEVED_SCRIPT = """
import json, warnings
from clir.evaluation import evaluate_per_query
warnings.simplefilter("ignore")
qrels = {"q1": {"d1": 1, "d2": 2, "d3": 0, "d4": -1}, "q2": {"e1": 1}}
run = {"q1": {}, "q2": {"e1": 1.0, "e2": 0.5}}
names = ["NumQ", "NumRel", "NumRet", "AP", "IPrec@0.0"]
print(json.dumps([evaluate_per_query(run, qrels, names) for _ in range(2)]))
"""


def test_a_query_that_retrieved_nothing_scores_as_with_trec_eval_c_in_a_fresh_process():
    # q1 retrieved nothing: trec_eval -c counts it once and its 2 relevant documents, 0 elsewhere.
    # pytrec_eval read an empty ranking's values from buffers not yet allocated in a process's
    # first evaluation (NumRel 0: `clir evaluate` printed 2 here, trec_eval -c 3) and freed ones
    # after (IPrec@0.0 NaN): such a query is never given to it. A fresh process, as the CLI's.
    done = _in_a_fresh_process(_NOTHING_RETRIEVED_SCRIPT)
    expected = {
        "NumQ": {"q1": 1.0, "q2": 1.0},
        "NumRel": {"q1": 2.0, "q2": 1.0},
        "NumRet": {"q1": 0.0, "q2": 2.0},
        "AP": {"q1": 0.0, "q2": 1.0},
        "IPrec@0.0": {"q1": 0.0, "q2": 1.0},
    }
    assert json.loads(done.stdout) == [expected, expected]


_NOTHING_JUDGED_SCRIPT = """
import json, warnings
from clir.evaluation import evaluate_per_query
warnings.simplefilter("ignore")
qrels = {"q1": {"d1": 1, "d2": -1}, "q2": {"e1": 1}}
run = {"q1": {"x": 2.0, "d2": 1.0}, "q2": {"e1": 1.0, "e2": 0.5}}
names = ["IPrec(judged_only=True)@0.0", "P(judged_only=True)@1", "AP(judged_only=True)", "IPrec@0.0"]
print(json.dumps([evaluate_per_query(run, qrels, names) for _ in range(2)]))
"""


def test_a_ranking_with_no_judged_document_scores_0_on_judged_only_measures():
    # judged_only (trec_eval -J) drops q1's x (unjudged) and d2 (a negative grade, as trec_eval
    # drops it): an empty ranking, whose values pytrec_eval read from freed buffers
    # (IPrec(judged_only=True)@0.0 NaN, so the mean too). A fresh process, as the CLI's.
    done = _in_a_fresh_process(_NOTHING_JUDGED_SCRIPT)
    expected = {
        "IPrec(judged_only=True)@0.0": {"q1": 0.0, "q2": 1.0},
        "P(judged_only=True)@1": {"q1": 0.0, "q2": 1.0},
        "AP(judged_only=True)": {"q1": 0.0, "q2": 1.0},
        "IPrec@0.0": {"q1": 0.0, "q2": 1.0},  # d1 not retrieved: no precision at any recall
    }
    assert json.loads(done.stdout) == [expected, expected]


def test_a_query_named_no_query_is_evaluated_as_any_other():
    # trec_eval caches a query's ranking under its qid and, once an evaluation ends, under the
    # placeholder "no_query": a query of that name read the last query's counts (NumRel 3 here)
    # and ranks from freed memory (nDCG@5 5e13), so pytrec_eval is given positions, not qids.
    names = ["AP", "NumRel", "NumRet", "nDCG@5"]
    evaluate_per_query({"a": {"x": 1.0, "w": 0.5}}, {"a": {"x": 1, "y": 1, "z": 1}}, names)  # ends one
    qrels = {"no_query": {"d1": 1}, "a": {"x": 1, "y": 1, "z": 1}}
    run = {"no_query": {"d1": 2.0, "d2": 1.0}, "a": {"x": 1.0}}
    values = evaluate_per_query(run, qrels, names)
    assert {name: values[name]["no_query"] for name in names} == {
        "AP": 1.0,
        "NumRel": 1.0,
        "NumRet": 2.0,
        "nDCG@5": 1.0,
    }
    assert values["AP"]["a"] == pytest.approx(1 / 3)


# x (unjudged), d1 (grade 1), d2 (grade 2): three retrieved, two of them judged.
_MIXED_QRELS = {"q": {"d1": 1, "d2": 2}}
_MIXED_RUN = {"q": {"x": 3.0, "d1": 2.0, "d2": 1.0}}
_MIXED_EXPECTED = {
    "NumRet": 3.0,  # every retrieved document: judged_only is P's alone
    "P(judged_only=True)@2": 1.0,  # x dropped: d1, d2
    # gains are the grades: DCG 1/log2(3) + 2/log2(4); ideal 2 + 1/log2(3)
    "nDCG@3": (1 / math.log2(3) + 1) / (2 + 1 / math.log2(3)),
    # gains 10 and 100: DCG 10/log2(3) + 100/2; ideal 100 + 10/log2(3)
    "nDCG(gains={1:10,2:100})@3": (10 / math.log2(3) + 50) / (100 + 10 / math.log2(3)),
}


@pytest.mark.parametrize("names", list(itertools.permutations(_MIXED_EXPECTED)))
def test_each_measure_is_computed_as_alone_whatever_the_others(names):
    # ir_measures puts NumRet (and NumQ, a plain nDCG) into whichever trec_eval run it made
    # first: beside P(judged_only=True)@2 NumRet had counted 2 documents, and beside nDCG with
    # gains a plain nDCG had taken those gains, depending on the order of the measures.
    values = evaluate(_MIXED_RUN, _MIXED_QRELS, list(names))
    assert values == pytest.approx(_MIXED_EXPECTED, abs=1e-12)


# Ties as trec_eval breaks them: score read as float32 descending, then docno descending.
# "aa" scores 1 + 2**-40, which is 1.0 as a float32: it ties with a, b and c.
TIED_RUN = {"q": {"d": 2.0, "a": 1.0, "aa": 1.0 + 2**-40, "b": 1.0, "c": 1.0, "e": 0.5}}
TIED_QRELS = {"q": {"a": 1, "aa": 2, "e": 1, "b": 0}}
# Ranking d, c, b, aa, a, e: relevant aa (grade 2) at rank 4, a at 5, e at 6.
TIED_EXPECTED = {
    "AP": (1 / 4 + 2 / 5 + 3 / 6) / 3,
    "P@2": 0.0,
    "P@4": 1 / 4,
    "nDCG@10": (2 / math.log2(5) + 1 / math.log2(6) + 1 / math.log2(7)) / (2 + 1 / math.log2(3) + 1 / 2),
}


def test_ties_are_broken_as_trec_eval_in_memory_from_the_file_and_in_ir_measures(tmp_path):
    names = list(TIED_EXPECTED)
    in_memory = evaluate(TIED_RUN, TIED_QRELS, names)
    assert in_memory == pytest.approx(TIED_EXPECTED, abs=1e-12)
    path = tmp_path / "tied.run"
    write_run(path, TIED_RUN)
    assert [line.split()[2] for line in path.read_text().splitlines()] == ["d", "c", "b", "aa", "a", "e"]
    assert evaluate(read_run(path), TIED_QRELS, names) == in_memory
    measures = [ir_measures.parse_measure(name) for name in names]
    from_file = ir_measures.calc_aggregate(measures, TIED_QRELS, ir_measures.read_trec_run(str(path)))
    assert {str(m): float(v) for m, v in from_file.items()} == in_memory


_DOCNOS = st.text(alphabet="abAB09-", min_size=1, max_size=3)
_SCORES = st.sampled_from([0.0, 1.0, 1.0 + 2**-40, 1.0 - 2**-40, 2.5, -1.0, 1e-9, 1e-300])


@settings(max_examples=80, deadline=None)
@given(
    run=st.dictionaries(st.sampled_from(["q1", "q2", "q3"]), st.dictionaries(_DOCNOS, _SCORES, max_size=12)),
    qrels=st.dictionaries(
        st.sampled_from(["q1", "q2", "q3", "q4"]), st.dictionaries(_DOCNOS, st.integers(0, 2), min_size=1)
    ),
)
def test_written_runs_evaluate_as_in_memory_and_as_ir_measures_reads_them(run, qrels):
    assume(any(grade >= 1 for judged in qrels.values() for grade in judged.values()))
    names = ["AP", "P@3", "nDCG@5", "R@5", "AQWV"]
    with warnings.catch_warnings(), tempfile.TemporaryDirectory() as tmp:
        warnings.simplefilter("ignore", UserWarning)
        path = Path(tmp) / "run"
        write_run(path, run)
        in_memory = evaluate_per_query(run, qrels, names, collection_size=1000)
        assert evaluate_per_query(read_run(path), qrels, names, collection_size=1000) == in_memory
        measures = [ir_measures.parse_measure(name) for name in names[:-1]]
        for metric in ir_measures.iter_calc(measures, qrels, ir_measures.read_trec_run(str(path))):
            if metric.query_id in in_memory["AP"]:
                assert in_memory[str(metric.measure)][metric.query_id] == metric.value


def test_aqwv_reads_the_returned_set_in_trec_eval_order():
    # Top 4 of d, c, b, aa, a, e: one relevant (aa) of three, three false alarms out of N - 3.
    config = AQWVConfig(cutoff=4, beta=2.0)
    assert aqwv(TIED_RUN, TIED_QRELS, 10, config) == pytest.approx(1 - 2 / 3 - 2.0 * 3 / 7)


def test_queries_missing_from_the_run_are_counted_in_a_warning():
    qrels = {f"q{i}": {"d1": 1} for i in range(1, 8)}
    run = {"q1": {"d1": 1.0}, "q2": {"d1": 1.0}, "q3": {}}
    expected = (
        r"run lists 2 of the 7 qrels queries with a relevant document; the 5 missing count 0 "
        r"\(trec_eval -c\): 'q3', 'q4', 'q5', 'q6', 'q7'; evaluate against the qrels of the run's split"
    )
    with pytest.warns(UserWarning, match=expected) as record:
        assert evaluate(run, qrels, ["AP"]) == {"AP": pytest.approx(2 / 7)}
    assert len(record) == 1


def test_unknown_measure_names_it():
    with pytest.raises(ConfigError, match=r"unknown measure 'Bogus@3'"):
        evaluate(RUN, QRELS, ["AP", "Bogus@3"])
    with pytest.raises(ConfigError, match=r"unknown measure 'AQWV@ten'"):
        evaluate(RUN, QRELS, ["AQWV@ten"], collection_size=100)


@pytest.mark.parametrize("cutoff", ["²", "1²", "⑤"])
def test_an_aqwv_cutoff_of_digits_int_cannot_read_names_the_measure(cutoff):
    """str.isdigit() takes superscripts and circled digits, which int() refuses: 'AQWV@²' had
    been an "unexpected ValueError" (reported as a bug in clir)."""
    with pytest.raises(ConfigError, match=rf"unknown measure 'AQWV@{cutoff}'"):
        evaluate(RUN, QRELS, [f"AQWV@{cutoff}"], collection_size=100)


@pytest.mark.parametrize("name", ["RR@10", "Judged@10", "ERR@10", "RBP(p=0.5)"])
def test_measures_trec_eval_does_not_compute_are_refused(name):
    """ir_measures computes these with other providers, which break ties by docno ascending
    (msmarco's RR@10 gave 1.0 here, trec_eval's order 0) or fail on clir's runs."""
    run = {"q1": {f"d{i}": 1.0 for i in range(1, 13)}}  # trec_eval: d9 ... d2, d12, d11, d10, d1
    with pytest.raises(ConfigError, match=rf"measure '{re.escape(name)}' is not one of trec_eval's"):
        evaluate(run, {"q1": {"d1": 1, "d10": 1}}, [name])


@pytest.mark.parametrize(
    ("name", "match"),
    [
        ("P@0", r"'P@0' has cutoff=0, expected an integer >= 1"),  # aborted pytrec_eval (SIGABRT)
        ("nDCG@0", r"'nDCG@0' has cutoff=0"),
        ("R@1.5", r"'R@1.5' has cutoff=1.5"),
        ("P(rel=0)@5", r"'P\(rel=0\)@5' has rel=0"),
        ("IPrec@2", r"unknown measure 'IPrec@2' \(invalid param recall=2\)"),
        ("SDCG@10", r"unknown measure 'SDCG@10'"),
    ],
)
def test_measure_parameters_pytrec_eval_cannot_take_are_refused(name, match):
    with pytest.raises(ConfigError, match=match):
        evaluate(RUN, QRELS, [name])


def test_aqwv_without_collection_size_is_an_error():
    with pytest.raises(ConfigError, match=r"'AQWV' needs collection_size"):
        evaluate(RUN, QRELS)


def test_qrels_without_relevant_documents_is_an_error():
    with pytest.raises(ConfigError, match="no query with a relevant document"):
        evaluate(RUN, {"q3": {"f1": 0}}, ["AP"])


def test_default_measures_with_collection_size():
    values = evaluate_quietly(RUN, QRELS, collection_size=100)
    assert list(values) == list(DEFAULT_MEASURES)
    # AQWV (top 10, beta 40), q1 returns its 5 documents: 2 of 3 relevant, 3 false alarms
    #   QWV(q1) = 1 - 1/3 - 40 * 3 / (100 - 3); QWV(q2) = 0 (nothing returned).
    assert values["AQWV"] == pytest.approx((1 - 1 / 3 - 40 * 3 / 97) / 2)


# ---------------------------------------------------------------- AQWV

# N = 100 documents; qa has 2 relevant (r1, r2); qb has 1 relevant and is absent from the run.
N = 100
AQ_QRELS = {"qa": {"r1": 1, "r2": 2, "n1": 0}, "qb": {"s1": 1}}
# qa's ranking: r1 (rel), n1 (non-rel), x1 (unjudged), r2 (rel), x2 (unjudged)
AQ_RUN = {"qa": {"r1": 0.9, "n1": 0.8, "x1": 0.7, "r2": 0.6, "x2": 0.5}}


def test_qwv_worked_example():
    # top 3 returns 1 of 2 relevant and 2 non-relevant: 1 - 1/2 - 40 * 2 / (100 - 2)
    assert qwv(2, 3, 1, 100) == pytest.approx(1 - 0.5 - 40 * 2 / 98)
    assert qwv(2, 3, 1, 100) == pytest.approx(-0.3163265306)
    assert qwv(2, 0, 0, 100) == 0.0  # nothing returned: P_miss = 1
    assert qwv(2, 2, 2, 100) == 1.0  # perfect set


@pytest.mark.parametrize(
    ("cutoff", "expected"),
    [
        (0, 0.0),  # nothing returned
        (1, 1 - 1 / 2),  # r1: P_miss 1/2, no false alarm
        (2, 1 - 1 / 2 - 40 * 1 / 98),  # r1 n1
        (3, 1 - 1 / 2 - 40 * 2 / 98),  # r1 n1 x1
        (4, 1 - 40 * 2 / 98),  # r1 n1 x1 r2: nothing missed
        (5, 1 - 40 * 3 / 98),
        (50, 1 - 40 * 3 / 98),  # the ranking is only 5 long
    ],
)
def test_aqwv_fixed_cutoff(cutoff, expected):
    config = AQWVConfig(cutoff=cutoff)
    per_query = aqwv_per_query(AQ_RUN, AQ_QRELS, N, config)
    assert per_query == pytest.approx({"qa": expected, "qb": 0.0})
    assert aqwv(AQ_RUN, AQ_QRELS, N, config) == pytest.approx(expected / 2)


def test_aqwv_threshold():
    # scores >= 0.75 return r1, n1: 1 - 1/2 - 40 * 1/98
    assert aqwv_per_query(AQ_RUN, AQ_QRELS, N, AQWVConfig(cutoff=None, threshold=0.75))["qa"] == (
        pytest.approx(0.5 - 40 / 98)
    )
    # both limits apply: threshold 0.55 would return 4, the cutoff keeps 3
    assert aqwv_per_query(AQ_RUN, AQ_QRELS, N, AQWVConfig(cutoff=3, threshold=0.55))["qa"] == (
        pytest.approx(0.5 - 80 / 98)
    )
    # a threshold above every score returns nothing
    assert aqwv_per_query(AQ_RUN, AQ_QRELS, N, AQWVConfig(threshold=5.0))["qa"] == 0.0


def test_aqwv_oracle_takes_the_best_cutoff_per_query():
    # cutoffs 0..5 give 0, 0.5, 0.0918, -0.3163, 0.1837, -0.2245: the best is 0.5 (k = 1)
    assert aqwv_per_query(AQ_RUN, AQ_QRELS, N, AQWVConfig(oracle=True)) == pytest.approx({"qa": 0.5, "qb": 0})
    # with beta = 1 false alarms are cheap: k = 4 gives 1 - 2/98, the best
    oracle_beta1 = aqwv_per_query(AQ_RUN, AQ_QRELS, N, AQWVConfig(beta=1.0, oracle=True))
    assert oracle_beta1["qa"] == pytest.approx(1 - 2 / 98)
    # an oracle ranking with only non-relevant documents returns nothing: 0, never negative
    run = {"qa": {"n1": 1.0, "x1": 0.5}}
    assert aqwv_per_query(run, AQ_QRELS, N, AQWVConfig(oracle=True))["qa"] == 0.0


@settings(max_examples=200, deadline=None)
@given(
    relevant=st.lists(st.booleans(), min_size=1, max_size=8),
    missed=st.integers(0, 3),
    extra=st.integers(0, 60),
    beta=st.sampled_from([40.0, 20.0, 3.0, 1.0, 0.1]),
)
@example(relevant=[False, False, True, False], missed=0, extra=45, beta=20.0)
def test_aqwv_oracle_is_the_best_fixed_cutoff_to_the_last_bit(relevant, missed, extra, beta):
    """The oracle had computed QWV in other operations than qwv() (hits / R rather than
    1 - (R - hits) / R), and fell below a fixed cutoff by a rounding: R = 1, N = 49, beta 20,
    the relevant document third: oracle 0.16666666666666663, AQWV@3 0.16666666666666674."""
    assume(any(relevant) or missed)
    run = {"q": {f"d{i}": float(len(relevant) - i) for i in range(len(relevant))}}
    qrels = {"q": {f"d{i}": int(rel) for i, rel in enumerate(relevant)}}
    qrels["q"].update({f"r{i}": 1 for i in range(missed)})
    size = len(relevant) + missed + extra
    cutoffs = [aqwv_per_query(run, qrels, size, AQWVConfig(beta=beta, cutoff=k))["q"] for k in range(9)]
    assert aqwv_per_query(run, qrels, size, AQWVConfig(beta=beta, oracle=True))["q"] == max(cutoffs)


def test_aqwv_beta():
    # beta = 20, top 4: 1 - 20 * 2 / 98
    assert aqwv_per_query(AQ_RUN, AQ_QRELS, N, AQWVConfig(beta=20.0, cutoff=4))["qa"] == (
        pytest.approx(1 - 40 / 98)
    )


def test_aqwv_measure_names_in_evaluate():
    values = evaluate(
        AQ_RUN, AQ_QRELS, ["AQWV", "AQWV@1", "AQWV@oracle"], collection_size=N, aqwv=AQWVConfig(cutoff=3)
    )
    assert values == pytest.approx({"AQWV": (0.5 - 80 / 98) / 2, "AQWV@1": 0.25, "AQWV@oracle": 0.25})


def test_aqwv_collection_size_errors():
    with pytest.raises(ConfigError, match="collection_size"):
        aqwv(AQ_RUN, AQ_QRELS, None)  # type: ignore[arg-type]
    # N = 4: N - R = 2 cannot hold the 3 false alarms of the top 5
    with pytest.raises(ConfigError, match=r"query 'qa': collection_size=4 is too small"):
        aqwv(AQ_RUN, AQ_QRELS, 4, AQWVConfig(cutoff=5))
    with pytest.raises(ConfigError, match="too small"):
        qwv(2, 3, 1, 2)


def test_aqwv_of_a_query_judging_every_document_relevant_has_no_false_alarm_rate():
    """N = R made P_FA 0/0: 'clir baselines' failed with "collection_size=3 is too small" on a
    query judging all 3 documents relevant. No false alarm is possible: P_FA = 0."""
    assert qwv(3, 3, 3, 3) == 1.0
    assert qwv(3, 1, 1, 3) == pytest.approx(1 - 2 / 3)
    assert qwv(3, 0, 0, 3) == 0.0
    run = {"q": {"d1": 3.0, "d2": 2.0, "d3": 1.0}}
    qrels = {"q": {"d1": 1, "d2": 1, "d3": 1}}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert aqwv(run, qrels, 3, AQWVConfig(cutoff=2)) == pytest.approx(2 / 3)
        assert aqwv(run, qrels, 3, AQWVConfig(oracle=True)) == 1.0
    with pytest.raises(ConfigError, match=r"collection_size=2 is too small: it must hold the 3 relevant"):
        qwv(3, 3, 3, 2)  # really inconsistent: fewer documents than relevant ones
    with pytest.raises(ConfigError, match="too small"):
        qwv(3, 4, 3, 3)  # a returned non-relevant document that N = R leaves no room for


@pytest.mark.parametrize(
    ("run", "qrels", "message"),
    [
        # a grade of 0.5 had made b non-relevant: AQWV -3.44 (a false alarm), silently
        ({"q": {"a": 1.0, "b": 0.5}}, {"q": {"a": 1, "b": 0.5}}, r"grade of 'q' / 'b' must be an integer"),
        # strings had been read as numbers
        ({"q": {"a": "1", "b": "10"}}, {"q": {"a": 1}}, r"score of 'q' / 'a' must be a finite number"),
        # an infinite score had ranked first
        ({"q": {"a": math.inf, "b": 1.0}}, {"q": {"b": 1}}, r"score of 'q' / 'a' must be a finite number"),
        # one query's {docno: score} had scored 0 (every query missing)
        ({"a": 1.0}, {"q": {"a": 1}}, r"query 'a' holds a float; expected \{docno: score\}"),
    ],
)
def test_aqwv_checks_the_run_and_qrels_as_evaluate_does(run, qrels, message):
    for function in (aqwv, aqwv_per_query):
        with warnings.catch_warnings(), pytest.raises(ConfigError, match=message):
            warnings.simplefilter("ignore", UserWarning)
            function(run, qrels, 10)
        with warnings.catch_warnings(), pytest.raises(ConfigError, match=message):
            warnings.simplefilter("ignore", UserWarning)
            evaluate(run, qrels, ["AQWV"], collection_size=10)


def test_aqwv_config_validation():
    with pytest.raises(ConfigError, match="cutoff"):
        AQWVConfig(cutoff=-1)
    with pytest.raises(ConfigError, match="beta"):
        AQWVConfig(beta=float("nan"))
    with pytest.raises(ConfigError, match="oracle"):
        AQWVConfig(oracle=True, threshold=0.5)


# ---------------------------------------------------------------- significance


def brute_force_randomization(a, b):
    """Exact sign-flip p-value by plain enumeration (an independent reference)."""
    diffs = [y - x for x, y in zip(a, b, strict=True)]
    observed = abs(sum(diffs))
    signs = list(itertools.product((1, -1), repeat=len(diffs)))
    count = sum(
        abs(sum(s * d for s, d in zip(sign, diffs, strict=True))) >= observed - 1e-12 for sign in signs
    )
    return count / len(signs)


def test_identical_runs_have_no_difference():
    result = compare(AQ_RUN, AQ_RUN, AQ_QRELS, ["AP", "AQWV"], collection_size=N)
    for comparison in result.values():
        assert comparison.diff == 0.0
        assert comparison.p_ttest == 1.0
        assert comparison.p_randomization == 1.0
        assert comparison.n_queries == 2


def test_constant_improvement_on_ten_queries():
    # Run A ranks the relevant document second (AP 1/2), run B first (AP 1): diff +1/2 on each of
    # 10 queries. Only the all-plus and all-minus sign vectors reach |mean| = 1/2: p = 2 / 2**10.
    qrels = {f"q{i}": {"rel": 1} for i in range(10)}
    run_a = {qid: {"other": 2.0, "rel": 1.0} for qid in qrels}
    run_b = {qid: {"rel": 2.0, "other": 1.0} for qid in qrels}
    result = compare(run_a, run_b, qrels, ["AP", "P@10"])
    ap = result["AP"]
    assert (ap.mean_a, ap.mean_b, ap.diff, ap.n_queries) == (0.5, 1.0, 0.5, 10)
    assert ap.p_randomization == 2 / 2**10
    assert ap.p_ttest == 0.0  # constant difference: infinite t
    assert result["P@10"].diff == 0.0 and result["P@10"].p_randomization == 1.0


def test_ttest_matches_the_hand_formula():
    a = [0.1, 0.2, 0.3, 0.4, 0.5]
    b = [0.15, 0.22, 0.41, 0.38, 0.6]
    d = np.array(b) - np.array(a)  # 0.05, 0.02, 0.11, -0.02, 0.10
    t = d.mean() / (d.std(ddof=1) / math.sqrt(len(d)))
    expected = 2 * stats.t.sf(abs(t), df=len(d) - 1)
    assert paired_ttest(a, b) == pytest.approx(expected)
    assert 0.01 < expected < 0.2


def test_exact_randomization_matches_brute_force():
    rng = np.random.default_rng(7)
    a = rng.random(9)
    b = a + rng.normal(0.1, 0.2, size=9)
    assert randomization_test(a, b) == pytest.approx(brute_force_randomization(a, b))


def test_monte_carlo_randomization_is_seeded_and_close_to_exact():
    rng = np.random.default_rng(11)
    a = rng.random(18)  # above the exact limit of 16 queries
    b = a + rng.normal(0.05, 0.2, size=18)
    exact = brute_force_randomization(a, b)
    estimate = randomization_test(a, b, n_permutations=20_000, seed=1)
    assert estimate == randomization_test(a, b, n_permutations=20_000, seed=1)
    # standard error of the estimate is at most 0.5 / sqrt(20000) = 0.0035
    assert abs(estimate - exact) < 0.015
    # an all-positive difference on 20 queries: no random sign vector reaches it
    assert randomization_test(np.zeros(20), np.ones(20), n_permutations=999) == pytest.approx(1 / 1000)


def test_significance_input_errors():
    with pytest.raises(ConfigError, match="equal length"):
        paired_ttest([1.0, 2.0], [1.0])
    with pytest.raises(ConfigError, match="n_permutations"):
        randomization_test([1.0], [2.0], n_permutations=0)


def test_holm_and_bonferroni_by_hand():
    p = [0.01, 0.04, 0.03, 0.005]
    # sorted: 0.005*4 = 0.02, 0.01*3 = 0.03, 0.03*2 = 0.06, 0.04*1 = 0.04 -> running max 0.06
    assert adjust_pvalues(p) == pytest.approx([0.03, 0.06, 0.06, 0.02])
    assert adjust_pvalues(p, "bonferroni") == pytest.approx([0.04, 0.16, 0.12, 0.02])
    assert adjust_pvalues(p, "none") == p
    assert adjust_pvalues([0.6, 0.7]) == [1.0, 1.0]  # 1.2 and 0.7 -> capped, then the running max
    # a test that could not run (NaN) stays NaN and is not counted: m = 2
    adjusted = adjust_pvalues([0.02, math.nan, 0.5])
    assert adjusted[0] == pytest.approx(0.04) and math.isnan(adjusted[1]) and adjusted[2] == 0.5
    assert adjust_pvalues([]) == []
    with pytest.raises(ConfigError, match="correction method 'fdr' is unknown"):
        adjust_pvalues(p, "fdr")
    with pytest.raises(ConfigError, match=r"p-values must lie in \[0, 1\].*1\.5"):
        adjust_pvalues([0.1, 1.5])


def _holm_rejections(p: list[float], alpha: float) -> set[int]:
    """Holm's step-down procedure as he wrote it: reject the i-th smallest p-value while it is at
    most alpha / (m - i + 1), stop at the first that is not."""
    rejected: set[int] = set()
    for rank, index in enumerate(sorted(range(len(p)), key=lambda i: p[i])):
        if p[index] > alpha / (len(p) - rank):
            break
        rejected.add(index)
    return rejected


@given(
    st.lists(st.floats(0, 1), min_size=1, max_size=12),
    st.sampled_from([0.01, 0.05, 0.1]),
)
def test_holm_adjustment_properties(p, alpha):
    holm, bonferroni = adjust_pvalues(p), adjust_pvalues(p, "bonferroni")
    for raw, h, b in zip(p, holm, bonferroni, strict=True):
        assert raw <= h <= b <= 1.0
    for i, j in itertools.product(range(len(p)), repeat=2):
        if p[i] <= p[j]:
            assert holm[i] <= holm[j]  # the adjustment keeps the order
    assert min(holm) == pytest.approx(min(1.0, len(p) * min(p)))
    # rejecting where the adjusted p is at most alpha is Holm's sequential procedure
    assert {i for i, h in enumerate(holm) if h <= alpha} == _holm_rejections(p, alpha)


def test_t_interval_matches_the_hand_formula():
    a = [0.1, 0.2, 0.3, 0.4, 0.5]
    b = [0.15, 0.22, 0.41, 0.38, 0.6]
    d = np.array(b) - np.array(a)
    half = stats.t.ppf(0.975, df=4) * d.std(ddof=1) / math.sqrt(5)
    low, high = confidence_interval(a, b, method="t")
    assert (low, high) == pytest.approx((d.mean() - half, d.mean() + half))


def test_bootstrap_interval_of_two_queries_by_hand():
    # differences 0 and 1: a resample's mean is 0, 1/2 or 1 with probabilities 1/4, 1/2, 1/4
    a, b = [0.0, 0.0], [0.0, 1.0]
    assert confidence_interval(a, b, confidence=0.95) == (0.0, 1.0)
    assert confidence_interval(a, b, confidence=0.4) == (0.5, 0.5)  # the 30% and 70% quantiles
    assert confidence_interval(a, b, seed=3) == confidence_interval(a, b, seed=3)
    assert confidence_interval([0.1, 0.2], [0.3, 0.4]) == pytest.approx((0.2, 0.2))  # one shift
    assert all(math.isnan(x) for x in confidence_interval([0.1], [0.3]))
    with pytest.raises(ConfigError, match="interval method 'bca' is unknown"):
        confidence_interval(a, b, method="bca")


def test_bootstrap_interval_is_close_to_the_t_interval_on_normal_data():
    rng = np.random.default_rng(5)
    a = rng.random(300)
    b = a + rng.normal(0.05, 0.2, size=300)
    boot, t = confidence_interval(a, b, seed=1), confidence_interval(a, b, method="t")
    assert boot[0] < np.mean(b - a) < boot[1]
    assert boot == pytest.approx(t, abs=0.004)  # half-width ~0.023; sampling noise ~0.001


def test_compare_runs_corrects_each_measure_over_the_runs():
    # 10 queries. "better" ranks the relevant document first where the reference ranks it second
    # (AP +1/2 on every query: exact randomization p = 2 / 2**10, t-test p = 0); "same" equals the
    # reference (p = 1); "half" wins on 5 queries (AP +1/2) and equals on 5.
    qrels = {f"q{i}": {"rel": 1} for i in range(10)}
    reference = {qid: {"other": 2.0, "rel": 1.0} for qid in qrels}
    better = {qid: {"rel": 2.0, "other": 1.0} for qid in qrels}
    half = {qid: better[qid] if i < 5 else reference[qid] for i, qid in enumerate(qrels)}
    runs = {"better": better, "same": reference, "half": half}
    result = compare_runs(reference, runs, qrels, ["AP"])
    p_better, p_half = 2 / 2**10, 2**5 * 2 / 2**10  # half: 5 zeros free, only +-all of the rest
    ap = {name: result[name]["AP"] for name in runs}
    assert [ap[n].p_randomization for n in runs] == pytest.approx([p_better, 1.0, p_half])
    # Holm over m = 3: p_better * 3, then max(p_half * 2, that), then 1
    assert [ap[n].p_randomization_corrected for n in runs] == pytest.approx([3 * p_better, 1.0, 2 * p_half])
    assert ap["better"].p_ttest == ap["better"].p_ttest_corrected == 0.0
    assert (ap["better"].ci_low, ap["better"].ci_high) == (0.5, 0.5)
    assert ap["half"].ci_low >= 0.0 and ap["half"].ci_high <= 0.5
    bonferroni = compare_runs(
        reference, runs, qrels, ["AP"], config=SignificanceConfig(correction="bonferroni")
    )
    assert bonferroni["half"]["AP"].p_randomization_corrected == pytest.approx(3 * p_half)
    none = compare_runs(reference, runs, qrels, ["AP"], config=SignificanceConfig(correction="none"))
    assert none["half"]["AP"].p_randomization_corrected == pytest.approx(p_half)
    alone = compare(reference, half, qrels, ["AP"])["AP"]  # a family of one
    assert alone.p_randomization_corrected == alone.p_randomization == pytest.approx(p_half)
    # the same tests from per-query values computed once (as the experiment's report does), and
    # evaluate as their means
    values = {name: evaluate_per_query(run, qrels, ["AP", "P@1"]) for name, run in runs.items()}
    reused = compare_per_query(evaluate_per_query(reference, qrels, ["AP", "P@1"]), values)
    assert reused == compare_runs(reference, runs, qrels, ["AP", "P@1"])
    assert reused["better"]["P@1"].diff == 1.0 and reused["half"]["AP"].diff == 0.25
    assert means(values["half"]) == evaluate(half, qrels, ["AP", "P@1"]) == {"AP": 0.75, "P@1": 0.5}
    # values of other queries or measures are refused (a bare KeyError; extra queries were
    # silently left out of the paired test)
    fewer = {q: judged for q, judged in list(qrels.items())[:-1]}
    with pytest.raises(ConfigError, match="'half' and the reference were evaluated on other queries"):
        compare_per_query(values["half"], {"half": evaluate_per_query(half, fewer, ["AP", "P@1"])})
    with pytest.raises(ConfigError, match=r"'half' was evaluated without \['P@1'\]"):
        compare_per_query(values["half"], {"half": evaluate_per_query(half, qrels, ["AP"])})


def test_format_p():
    assert [format_p(p) for p in (0.0, 0.00004, 0.0001, 0.03125, 1.0)] == [
        "<0.0001", "<0.0001", "0.0001", "0.0312", "1.0000",
    ]  # fmt: skip
    assert format_p(0.004, digits=2) == "<0.01" and format_p(math.nan) == format_p(None) == "-"
    # beside a mark of significance a p below alpha never reads as alpha ("0.0500" had been marked)
    assert [format_p(p, alpha=0.05) for p in (0.04996, 0.049999, 0.05, 0.05004, 0.0312)] == [
        "0.04996", "0.049999", "0.0500", "0.0500", "0.0312",
    ]  # fmt: skip


# ---------------------------------------------------------------- tables


def test_format_table():
    rows = {"bm25": {"AP": 0.12345, "P@10": 0.5}, "rerank": {"AP": 0.2}}
    table = format_table(rows, ["AP", "P@10"], digits=3, markers={"rerank": {"AP": "*"}})
    assert table.splitlines() == [
        "system      AP   P@10",
        "------  ------  -----",
        "bm25    0.123   0.500",
        "rerank  0.200*      -",
    ]
    # a zero up to rounding (an AQWV mean of -2.8e-17) had shown as -0.0000
    rows = {"q1": {"AQWV": -2.8e-17, "AP": -0.00004}, "q2": {"AQWV": -0.5, "AP": 0.0}}
    assert format_table(rows, ["AQWV", "AP"], first="query").splitlines() == [
        "query     AQWV      AP",
        "-----  -------  ------",
        "q1      0.0000  0.0000",
        "q2     -0.5000  0.0000",
    ]


def test_markdown_table():
    table = markdown_table({"bm25": {"AP": 0.12345}}, ["AP", "P@10"], digits=2)
    assert table.splitlines() == [
        "| system | AP | P@10 |",
        "| --- | ---: | ---: |",
        "| bm25 | 0.12 | - |",
    ]


def test_in_memory_runs_and_qrels_are_checked_as_the_file_readers_check_them():
    """evaluate() took a NaN score (pytrec_eval ranked it second, AQWV first: two rankings in one
    call) and raised TypeErrors from pytrec_eval on numpy float32 scores, whole float grades
    (pandas' 1.0) and integer qids."""
    qrels = {"q1": {"d1": 1, "d2": 0}}
    run = {"q1": {"d1": 0.5, "d2": 1.0, "d3": 0.25}}
    expected = evaluate(run, qrels, ["AP", "P@1", "AQWV@1"], collection_size=10)
    as_numpy = {"q1": {d: np.float32(s) for d, s in run["q1"].items()}}
    assert evaluate(as_numpy, {"q1": {"d1": 1.0, "d2": np.int64(0)}}, ["AP", "P@1", "AQWV@1"],
                    collection_size=10) == expected  # fmt: skip
    for bad in (float("nan"), float("inf"), "0.5", None):
        with pytest.raises(ConfigError, match=r"run: the score of 'q1' / 'd1' must be a finite number"):
            evaluate({"q1": {**run["q1"], "d1": bad}}, qrels, ["AP"])
    for grade in (1.5, "1", float("nan"), True, 2**15, -(2**15) - 1, 2**32 + 1, 2**40, 40000.0):
        # past the grades a qrels file may hold, pytrec_eval gave AP 0 and nDCG@10 3.4e13
        with pytest.raises(ConfigError, match=r"qrels: the grade of 'q1' / 'd1' must be an integer"):
            evaluate(run, {"q1": {"d1": grade}}, ["AP"])
    assert evaluate(run, {"q1": {"d1": 2**15 - 1}}, ["AP", "P@1"]) == {"AP": 0.5, "P@1": 0.0}
    # a NUL in a docno: trec_eval read "d1\0x" as "d1", judged relevant (AP 1 for a wrong run)
    with pytest.raises(ConfigError, match=r"run: docno 'd1\\x00x' of 'q1' holds a NUL character"):
        evaluate({"q1": {"d1\0x": 1.0}}, qrels, ["AP"])
    with pytest.raises(ConfigError, match=r"qrels: docno 'd3\\x00' of 'q1' holds a NUL character"):
        evaluate(run, {"q1": {"d3\0": 1}}, ["AP"])
    with pytest.raises(ConfigError, match="qrels: qids and docnos must be strings, got 1 / 'd1'"):
        evaluate(run, {1: {"d1": 1}}, ["AP"])
    # a run's qid or docno that is not a string (an integer qid scored 0 with two warnings; an
    # integer docno raised pytrec_eval's TypeError, naming nothing)
    with pytest.raises(ConfigError, match="run: qids must be strings, got 1"):
        evaluate({1: {"d1": 1.0}}, {"1": {"d1": 1}}, ["AP"])
    with pytest.raises(ConfigError, match="run: docnos must be strings, got 1 in query 'q1'"):
        evaluate({"q1": {1: 1.0}}, {"q1": {"1": 1}}, ["AP"])


def test_a_query_judged_only_non_relevant_is_left_out_with_a_warning_run_or_not():
    """The warning named such a query only when the run listed it (README: 'left out, with a
    warning naming it, where trec_eval and ir_measures count it 0')."""
    run = {"q1": {"d1": 1.0, "d2": 0.5}}
    qrels = {"q1": {"d2": 1}, "q3": {"d1": 0}}
    for scored in (run, {**run, "q3": {"d1": 1.0}}):
        with pytest.warns(UserWarning, match=r"1 query\(ies\) have no relevant document .* left out: 'q3'"):
            assert evaluate(scored, qrels, ["AP"]) == {"AP": 0.5}

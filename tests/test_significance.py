"""Defects found in clir's significance tests and ``clir compare``, each with the example that
showed it (the tests of the statistics themselves are in ``test_evaluation.py``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from clir.cli import main
from clir.evaluation import compare_per_query

# 20 queries: past the exact enumeration (16), so a Monte Carlo p-value and a bootstrap interval.
A = [
    0.72,
    0.17,
    0.92,
    0.13,
    0.76,
    0.85,
    0.5,
    0.82,
    0.9,
    0.33,
    0.7,
    0.58,
    0.24,
    0.2,
    0.96,
    0.07,
    0.42,
    0.8,
    0.83,
    0.55,
]
B = [
    0.83,
    0.3,
    1.0,
    0.08,
    0.78,
    1.0,
    0.86,
    1.0,
    0.97,
    0.32,
    0.81,
    0.17,
    0.45,
    0.37,
    0.89,
    0.21,
    0.51,
    0.69,
    1.0,
    0.66,
]
QIDS = [f"q{i}" for i in range(1, 21)]


def test_compare_per_query_does_not_depend_on_the_order_of_the_queries():
    """The random sign vectors and resamples were drawn by position in the reference's order (the
    qrels'): the same values with the qrels reversed gave p(rand) 0.0499 instead of 0.0521, and a
    mark of significance at 0.05, and another bootstrap interval."""
    reference = {"AP": dict(zip(QIDS, A, strict=True))}
    run = {"AP": dict(zip(QIDS, B, strict=True))}
    expected = compare_per_query(reference, {"run": run})["run"]["AP"]
    assert expected.p_randomization == pytest.approx(0.0521, abs=1e-4)
    reordered = [q for i in (1, 0) for q in reversed(QIDS[i::2])]  # q20 q18 ... q2 q19 ... q1
    for order in (QIDS[::-1], reordered, sorted(QIDS)):  # sorted as text: q1 q10 q11 ... q2 q20 q3
        shuffled = {"AP": {q: reference["AP"][q] for q in order}}
        assert compare_per_query(shuffled, {"run": run})["run"]["AP"] == expected
        shuffled_run = {"AP": {q: run["AP"][q] for q in order}}
        assert compare_per_query(shuffled, {"run": shuffled_run})["run"]["AP"] == expected


@pytest.fixture
def files(tmp_path: Path) -> dict[str, str]:
    """Qrels of 4 queries (one relevant document each) and three runs, two named ``x.run`` in
    two folders: ``base`` ranks the relevant document second everywhere, ``other`` first on q1-q3,
    ``better`` first everywhere."""
    qids = ["q1", "q2", "q3", "q4"]
    (tmp_path / "qrels").write_text("".join(f"{q} 0 rel 1\n" for q in qids))

    def write(path: Path, first: list[str]) -> str:
        path.parent.mkdir(exist_ok=True)
        lines = []
        for q in qids:
            order = ["rel", "other"] if q in first else ["other", "rel"]
            lines += [f"{q} Q0 {doc} {rank} {3 - rank} t\n" for rank, doc in enumerate(order, 1)]
        path.write_text("".join(lines))
        return str(path)

    return {
        "qrels": str(tmp_path / "qrels"),
        "base": write(tmp_path / "a" / "x.run", []),
        "other": write(tmp_path / "b" / "x.run", qids[:3]),
        "better": write(tmp_path / "better.run", qids),
    }


def _table(capsys) -> list[str]:
    return capsys.readouterr().out.splitlines()


def test_compare_prints_the_coverage_of_its_interval(files, capsys):
    """``--confidence 0.975`` printed a "98% CI" column (and 0.999 "100% CI")."""
    argv = ["compare", files["base"], files["better"], files["qrels"], "--metrics", "AP"]
    for confidence, label in (("0.975", "97.5% CI"), ("0.999", "99.9% CI"), ("0.95", "95% CI")):
        assert main([*argv, "--confidence", confidence]) == 0
        assert _table(capsys)[1].split()[3:5] == label.split()


def test_compare_names_runs_of_one_file_name_by_their_paths(files, capsys):
    """Two rows (the baseline's and another run's) both read ``x.run``, with different means."""
    assert (
        main(["compare", files["base"], files["other"], files["better"], files["qrels"], "--metrics", "AP"])
        == 0
    )
    rows = [line.split()[0] for line in _table(capsys)[2:5]]
    assert rows == [files["base"], files["other"], files["better"]]
    assert main(["compare", files["base"], files["better"], files["qrels"], "--metrics", "AP"]) == 0
    assert [line.split()[0] for line in _table(capsys)[2:4]] == ["x.run", "better.run"]  # unique: names


def test_compare_refuses_a_run_repeated_beside_a_baseline(files, capsys):
    """With ``--baseline`` every RUN that was the baseline was dropped, so one given twice passed
    (a file given twice is refused, the baseline included); once among the RUNs it still may be."""
    argv = [files["base"], files["base"], files["better"], files["qrels"], "--baseline", files["base"]]
    assert main(["compare", *argv]) == 2
    assert f"RUN {files['base']} is given twice" in capsys.readouterr().err
    argv = ["compare", files["base"], files["better"], files["qrels"], "--baseline", files["base"], "--json"]
    assert main([*argv, "--metrics", "AP"]) == 0
    assert list(json.loads(capsys.readouterr().out)["runs"]) == [files["better"]]

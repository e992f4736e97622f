"""The fast part of the issue-12 battery (tests/battery_cases.py): every in-process case is the
``clear error`` or ``ok`` it expects. The slow part (experiment runs, kills, races) runs from
``python experiments/battery.py``. The harness's own verdicts are tested first, on made-up runs."""

from __future__ import annotations

import pytest
import yaml
from battery_cases import (
    AP,
    CLEAR,
    OK,
    Case,
    Ctx,
    Expect,
    Fixtures,
    Trace,
    call,
    classify,
    error_at,
    fast_cases,
    file_hashes,
    files,
    per_query,
    run_case,
    tiny_experiment,
)

CASES = fast_cases()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    return Fixtures(tmp_path_factory.mktemp("battery-fixtures"))


def _verdict(tmp_path, expect: Expect, trace: Trace, change=None) -> str:
    """The harness's outcome for a command that left ``trace`` (and ran ``change`` on the files)."""
    case = Case("made up", "harness", files(**{"mine.txt": b"mine\n"}), (), expect)
    ctx = Ctx(tmp_path, Fixtures(tmp_path / "fx"))
    case.setup(ctx)
    before = file_hashes(tmp_path)
    if change:
        change(tmp_path)
    ctx.trace = trace
    return classify(case, ctx, before)[0]


def test_harness_tells_the_outcomes_apart(tmp_path):
    named = error_at("bad.run", 2)
    line = f"clir: error: {tmp_path}/bad.run:2: score must be finite, got 'nan'\n"
    assert _verdict(tmp_path, named, Trace(2, err=line)) == CLEAR
    assert _verdict(tmp_path, named, Trace(2, err=line.replace(":2:", ":3:"))) == "unclear error"
    assert (
        _verdict(tmp_path, named, Trace(2, err="usage: clir\nclir evaluate: error: bad\n")) == "unclear error"
    )
    assert _verdict(tmp_path, named, Trace(1, err=line)) == "unclear error"
    assert _verdict(tmp_path, named, Trace(2, err="clir: error: unexpected KeyError: 'q1'\n")) == "traceback"
    assert _verdict(tmp_path, named, Trace(None, escaped="Traceback ...\nKeyError: 'q1'")) == "traceback"
    assert _verdict(tmp_path, named, Trace(0, out="{}")) == "silent wrong number"
    assert _verdict(tmp_path, named, Trace(2, err=line), lambda d: (d / "mine.txt").unlink()) == "data lost"
    assert _verdict(tmp_path, named, Trace(None, started="collection-en-sw")) == "unclear error"


def test_harness_checks_the_numbers_and_warnings(tmp_path):
    """A BOM-shifted qid read as another query gave AP 0.5 for q1's 0.8333: a silent wrong number."""
    right = '{"AP": 0.6666666666666666, "per_query": {"AP": {"q1": 0.8333333333333334, "q2": 0.5}}}'
    shifted = '{"AP": 0.5, "per_query": {"AP": {"q1": 0.5, "q2": 0.5}}}'
    expect = Expect(OK, check=per_query({"AP": AP}))
    assert _verdict(tmp_path, expect, Trace(0, out=right)) == OK
    assert _verdict(tmp_path, expect, Trace(0, out=shifted)) == "silent wrong number"
    warned = Expect(OK, warns=("1 of the 2",), check=per_query({"AP": AP}))
    assert _verdict(tmp_path, warned, Trace(0, out=right)) == "silent wrong number"
    assert (
        _verdict(tmp_path, warned, Trace(0, out=right, err="clir: warning: run lists 1 of the 2 ...")) == OK
    )


def test_guard_stops_an_accepted_config_at_its_first_step(tmp_path):
    config = tmp_path / "exp.yaml"
    config.write_text(yaml.safe_dump(tiny_experiment()))
    trace = call(["experiment", str(config), "--out", str(tmp_path / "out"), "--quiet"], guard=True)
    assert trace.started.startswith("collection-en-sw")
    assert not (tmp_path / "out" / "steps").exists()


def test_the_battery_is_big_enough():
    categories = {case.category.split(":")[0] for case in CASES}
    assert len(CASES) >= 200
    assert {"readers", "configs", "outputs", "evaluation"} <= categories


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_case(case, fixtures, tmp_path):
    result = run_case(case, tmp_path, fixtures)
    assert result.passed, f"expected {result.expected}, got {result.outcome}: {result.detail}"

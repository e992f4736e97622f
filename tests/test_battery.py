"""The fast part of the issue-12 battery (tests/battery_cases.py): every in-process case is the
``clear error`` or ``ok`` it expects. The slow part (experiment runs, kills, races) runs from
``python experiments/battery.py``."""

from __future__ import annotations

import pytest
from battery_cases import Fixtures, fast_cases, run_case

CASES = fast_cases()


@pytest.fixture(scope="module")
def fixtures(tmp_path_factory):
    return Fixtures(tmp_path_factory.mktemp("battery-fixtures"))


def test_the_battery_is_big_enough():
    categories = {case.category.split(":")[0] for case in CASES}
    assert len(CASES) >= 200
    assert {"readers", "configs", "outputs", "evaluation"} <= categories


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_case(case, fixtures, tmp_path):
    result = run_case(case, tmp_path, fixtures)
    assert result.passed, f"expected {result.expected}, got {result.outcome}: {result.detail}"

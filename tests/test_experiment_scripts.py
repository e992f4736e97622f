"""The experiment scripts' own arithmetic (``experiments/*.py``), on tiny made-up inputs: the
scripts import each other by name, so their directory is put on the path."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

EXPERIMENTS = Path(__file__).resolve().parents[1] / "experiments"


@pytest.fixture(autouse=True, scope="module")
def _experiments_on_path():
    sys.path.insert(0, str(EXPERIMENTS))
    yield
    sys.path.remove(str(EXPERIMENTS))


def test_ceiling_moves_chosen_candidates_first_whatever_the_scores():
    from ceiling import moved_first

    from clir.evaluation import evaluate

    # Negative scores: adding max + 1 (0 here) had left 'c' last, the ceiling's AP at 1/3.
    run = {"q": {"a": -1.0, "b": -2.0, "c": -3.0}}
    moved = moved_first(run, {"q": {"c"}})
    assert moved == {"q": {"c": 3.0, "a": 2.0, "b": 1.0}}
    assert evaluate(moved, {"q": {"c": 2}}, ["AP"])["AP"] == 1.0
    # A gap of exactly 1: 'a' had tied the top 'z' (trec_eval puts 'z' first: docno descending).
    moved = moved_first({"q": {"z": 1.0, "a": 0.0}}, {"q": {"a"}})
    assert moved == {"q": {"a": 2.0, "z": 1.0}}
    assert evaluate(moved, {"q": {"a": 1}}, ["AP"])["AP"] == 1.0
    # Several chosen: their own order kept (ties by docno descending), the rest beneath in theirs.
    run = {"q": {"a": 5.0, "b": -7.0, "c": -7.0, "d": 0.5}, "r": {}}
    moved = moved_first(run, {"q": {"b", "c", "d"}})
    assert list(sorted(moved["q"], key=moved["q"].get, reverse=True)) == ["d", "c", "b", "a"]
    assert moved["r"] == {}

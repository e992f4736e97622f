"""``clir explain``'s numbers: what its shares and contributions say of the model's score."""

from __future__ import annotations

import pytest

from clir.pipeline.explain import PairExplanation, signed_shares


def test_shares_keep_the_sign_of_each_contribution():
    """An input that lowers the score (positive value, negative weight) had shown a positive
    share (|c| / sum |c|): on runs/default's en-sw Q06001001 / B06C024V026, src_src 0.9374 with
    weight -1.23 (contribution -1.15) printed as 12.8%, read as raising the score."""
    assert signed_shares([2.0, -1.0, 1.0]) == [0.5, -0.25, 0.25]
    assert signed_shares([0.0, 0.0]) == [0.0, 0.0]
    shares = signed_shares([0.3, -1.15, 0.02])
    assert sum(abs(s) for s in shares) == pytest.approx(1.0) and shares[1] < 0


def test_explanation_carries_contributions_and_bias_that_add_up_to_the_score():
    explained = PairExplanation(
        "q1", "d1", 1, 0.5, {"a": 1.0, "b": 2.0}, {"a": 0.25, "b": -0.75}, {}, None,
        contributions={"a": 1.5, "b": -4.5}, bias=3.5,
    )  # fmt: skip
    assert explained.bias + sum(explained.contributions.values()) == pytest.approx(explained.score)

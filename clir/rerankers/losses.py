"""Training objectives for the rerankers."""

from __future__ import annotations

import torch
from torch import Tensor

from clir.errors import ConfigError
from clir.rerankers.base import check_choice

REDUCTIONS = ("mean", "sum", "none")


def hinge_loss(
    pos_scores: Tensor, neg_scores: Tensor, margin: float = 1.0, reduction: str = "mean"
) -> Tensor:
    """Pairwise hinge loss ``max(0, margin - s(q, d+) + s(q, d-))``.

    The objective of DRMM, PACRR and POSIT-DRMM training (margin 1).

    Args:
        pos_scores: Scores of relevant documents (B,).
        neg_scores: Scores of the sampled non-relevant documents (B,), paired row by row.
        margin: The margin (1.0).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Returns:
        A scalar, or (B,) with ``reduction="none"``.

    Raises:
        ConfigError: If the shapes differ or ``reduction`` is unknown.
    """
    check_choice("reduction", reduction, REDUCTIONS)
    if pos_scores.shape != neg_scores.shape:
        raise ConfigError(
            f"pos_scores and neg_scores must have the same shape, got {tuple(pos_scores.shape)} "
            f"and {tuple(neg_scores.shape)}"
        )
    losses = torch.clamp(margin - pos_scores + neg_scores, min=0.0)
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses

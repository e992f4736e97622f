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


def softmax_loss(pos_scores: Tensor, neg_scores: Tensor, reduction: str = "mean") -> Tensor:
    """Listwise softmax cross-entropy: ``-log softmax(s(q, d+), s(q, d-_1), ..., s(q, d-_n))[0]``.

    Each relevant document against a list of sampled non-relevant ones for the same query, as in
    the localised contrastive estimation of Gao et al. (ECIR 2021), "Rethink Training of BERT
    Rerankers in Multi-Stage Retrieval Pipeline".

    Args:
        pos_scores: Scores of relevant documents (B,).
        neg_scores: Scores of each one's sampled non-relevant documents (B, n).
        reduction: ``"mean"``, ``"sum"`` or ``"none"``.

    Returns:
        A scalar, or (B,) with ``reduction="none"``.

    Raises:
        ConfigError: If the shapes do not match or ``reduction`` is unknown.
    """
    check_choice("reduction", reduction, REDUCTIONS)
    if neg_scores.dim() != 2 or pos_scores.shape != neg_scores.shape[:1]:
        raise ConfigError(
            f"pos_scores must be (B,) and neg_scores (B, n), got {tuple(pos_scores.shape)} "
            f"and {tuple(neg_scores.shape)}"
        )
    logits = torch.cat([pos_scores.unsqueeze(1), neg_scores], dim=1)
    losses = torch.logsumexp(logits, dim=1) - pos_scores
    if reduction == "mean":
        return losses.mean()
    return losses.sum() if reduction == "sum" else losses

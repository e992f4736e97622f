"""DRMM: matching histograms per query term, a small feed-forward net, term gating.

Guo, Fan, Ai, Croft. "A Deep Relevance Matching Model for Ad-hoc Retrieval". CIKM 2016.
"""

from __future__ import annotations

import torch
from torch import Tensor, nn

from clir.errors import ConfigError
from clir.rerankers.base import (
    InteractionModel,
    check_choice,
    check_positive,
    masked_softmax,
    register,
    torch_seed,
)
from clir.rerankers.encoding import EncodedPair

HISTOGRAMS = ("lch", "nh", "ch")
GATINGS = ("idf", "vector")


def matching_histogram(
    sim: Tensor, exact: Tensor, q_mask: Tensor, d_mask: Tensor, n_bins: int = 30, mode: str = "lch"
) -> Tensor:
    """Matching histogram of each query term over the document.

    ``n_bins - 1`` equal intervals cover [-1, 1] (an interval is closed on the left; a cosine of
    1.0 that is not an exact match falls in the last interval), and the last bin counts exact
    (surface) matches only, as in Guo et al. ("exact match in its own bin"). Padding on either
    side counts nowhere.

    Args:
        sim: (B, Lq, Ld) cosine similarities.
        exact: ``bool`` (B, Lq, Ld) exact matches.
        q_mask: ``bool`` (B, Lq).
        d_mask: ``bool`` (B, Ld).
        n_bins: Number of bins including the exact-match bin (>= 2).
        mode: ``"ch"`` counts, ``"nh"`` counts / document length, ``"lch"`` log(1 + count)
            (natural log; Guo et al.'s best variant).

    Returns:
        Float32 tensor (B, Lq, n_bins); rows of padded query terms are 0.
    """
    intervals = n_bins - 1
    position = (sim.float().clamp(-1.0, 1.0) + 1.0) * (intervals / 2.0)
    index = position.floor().long().clamp_(0, intervals - 1)
    index = index.masked_fill(exact, intervals)
    valid = (q_mask.unsqueeze(2) & d_mask.unsqueeze(1)).float()
    counts = torch.zeros(*sim.shape[:2], n_bins, device=sim.device, dtype=torch.float32)
    counts.scatter_add_(2, index, valid)
    if mode == "lch":
        return torch.log1p(counts)
    if mode == "nh":
        return counts / d_mask.sum(1).clamp(min=1).float()[:, None, None]
    return counts


@register("drmm")
class DRMM(InteractionModel):
    """Deep Relevance Matching Model (Guo et al., CIKM 2016).

    Per query term: the matching histogram of its cosines with the document terms, scored by a
    feed-forward net (``n_bins -> hidden -> 1``, tanh at each layer as in the paper); the term
    scores are summed with term-gating weights ``softmax_i(w · idf_i)`` (or ``w · x_i`` for the
    term vector with ``gating="vector"``) over the real query terms. Histograms are not
    differentiable in the embeddings, which are frozen anyway.

    Args:
        embedding_dim: Dimension of the shared space.
        embeddings: Optional frozen matrix (V, embedding_dim).
        n_bins: Histogram bins including the exact-match bin (paper setting 30).
        hidden: Hidden units of the term net (5).
        histogram: ``"lch"``, ``"nh"`` or ``"ch"``.
        gating: ``"idf"`` or ``"vector"``.
        seed: Seed of the weight initialisation.
    """

    config_keys = ("n_bins", "hidden", "histogram", "gating")
    needs_exact = True

    def __init__(
        self,
        embedding_dim: int,
        embeddings: Tensor | None = None,
        *,
        n_bins: int = 30,
        hidden: int = 5,
        histogram: str = "lch",
        gating: str = "idf",
        seed: int = 0,
    ) -> None:
        super().__init__(embedding_dim, embeddings, seed)
        check_positive("hidden", hidden)
        if not isinstance(n_bins, int) or n_bins < 2:
            raise ConfigError(f"n_bins must be an int >= 2, got {n_bins!r}")
        check_choice("histogram", histogram, HISTOGRAMS)
        check_choice("gating", gating, GATINGS)
        self.n_bins, self.hidden, self.histogram, self.gating = n_bins, hidden, histogram, gating
        with torch_seed(seed):
            self.term_net = nn.Sequential(
                nn.Linear(n_bins, hidden), nn.Tanh(), nn.Linear(hidden, 1), nn.Tanh()
            )
            self.gate = nn.Linear(1 if gating == "idf" else embedding_dim, 1, bias=False)

    def term_scores(self, pair: EncodedPair) -> Tensor:
        """Score of each query term (B, Lq), before gating."""
        hist = matching_histogram(pair.sim, pair.exact, pair.q_mask, pair.d_mask, self.n_bins, self.histogram)
        return self.term_net(hist).squeeze(-1)

    def score_pair(self, pair: EncodedPair) -> Tensor:
        gate_in = pair.q_idf.unsqueeze(-1) if self.gating == "idf" else pair.q_unit
        weights = masked_softmax(self.gate(gate_in.float()).squeeze(-1), pair.q_mask)
        return (weights * self.term_scores(pair)).sum(-1)

"""PACRR-DRMM: PACRR's position-aware n-gram convolutions with DRMM's per-term scoring and gating.

Hui, Yates, Berberich, de Melo. "PACRR: A Position-Aware Neural IR Model for Relevance
Matching". EMNLP 2017. McDonald, Brokos, Androutsopoulos. "Deep Relevance Ranking Using
Enhanced Document-Query Interactions". EMNLP 2018 (the PACRR-DRMM variant).
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clir.errors import ConfigError
from clir.rerankers.base import InteractionModel, check_positive, masked_softmax, register, torch_seed
from clir.rerankers.encoding import EncodedPair


def kmax_pool(values: Tensor, d_mask: Tensor, k: int) -> Tensor:
    """The k largest values along the document axis among real document positions.

    Padded positions never win; when a document has fewer than ``k`` terms, the missing slots
    are 0.

    Args:
        values: (B, Lq, Ld).
        d_mask: ``bool`` (B, Ld).
        k: How many to keep.

    Returns:
        (B, Lq, k), largest first.
    """
    if values.shape[-1] < k:
        extra = k - values.shape[-1]
        values = F.pad(values, (0, extra))
        d_mask = F.pad(d_mask, (0, extra), value=False)
    filled = values.masked_fill(~d_mask.unsqueeze(1), torch.finfo(values.dtype).min)
    top = filled.topk(k, dim=-1).values
    present = torch.arange(k, device=values.device) < d_mask.sum(1, keepdim=True)
    return top.masked_fill(~present.unsqueeze(1), 0.0)


@register("pacrr_drmm")
class PACRRDRMM(InteractionModel):
    """PACRR-DRMM (Hui et al. 2017; McDonald et al. 2018).

    n×n convolutions (n = 1..``max_ngram``, ``n_filters`` each, ReLU, "same" zero padding) over
    the cosine matrix M; max over the filters of each n; k-max pooling along the document per
    query term; the softmax-normalised idf of the term appended. Each query term's vector
    (``max_ngram · k_max + 1`` values) goes through one shared dense net to a term score; the
    scores are summed with gating weights ``softmax_i(w · idf_i)``.

    Padding: M is 0 at padded positions, exactly what the convolutions' own zero padding adds
    beyond the edge, so real positions see the same windows however much padding follows;
    padded document positions are excluded from the k-max.

    Args:
        embedding_dim: Dimension of the shared space.
        embeddings: Optional frozen matrix (V, embedding_dim).
        max_ngram: Largest convolution size (3).
        n_filters: Filters per size (32).
        k_max: Values kept per query term and size (2).
        hidden: Hidden units of the per-term dense net (8).
        seed: Seed of the weight initialisation.
    """

    config_keys = ("max_ngram", "n_filters", "k_max", "hidden")
    needs_exact = False

    def __init__(
        self,
        embedding_dim: int,
        embeddings: Tensor | None = None,
        *,
        max_ngram: int = 3,
        n_filters: int = 32,
        k_max: int = 2,
        hidden: int = 8,
        seed: int = 0,
    ) -> None:
        super().__init__(embedding_dim, embeddings, seed)
        for name, value in (("max_ngram", max_ngram), ("n_filters", n_filters), ("k_max", k_max)):
            check_positive(name, value)
        check_positive("hidden", hidden)
        self.max_ngram, self.n_filters, self.k_max, self.hidden = max_ngram, n_filters, k_max, hidden
        with torch_seed(seed):
            self.convs = nn.ModuleList(
                nn.Conv2d(1, n_filters, kernel_size=n) for n in range(1, max_ngram + 1)
            )
            self.term_net = nn.Sequential(
                nn.Linear(max_ngram * k_max + 1, hidden), nn.ReLU(), nn.Linear(hidden, 1)
            )
            self.gate = nn.Linear(1, 1, bias=False)

    def term_features(self, pair: EncodedPair) -> Tensor:
        """Per-query-term features (B, Lq, max_ngram · k_max + 1)."""
        valid = pair.q_mask.unsqueeze(2) & pair.d_mask.unsqueeze(1)
        sim = pair.sim.masked_fill(~valid, 0.0).unsqueeze(1)
        pooled = []
        for n, conv in enumerate(self.convs, start=1):
            # "same" zero padding, the extra row/column of an even size at the end (as torch's "same")
            before, after = (n - 1) // 2, n - 1 - (n - 1) // 2
            grid = F.relu(conv(F.pad(sim, (before, after, before, after)).to(conv.weight.dtype))).amax(dim=1)
            pooled.append(kmax_pool(grid, pair.d_mask, self.k_max))
        idf = masked_softmax(pair.q_idf, pair.q_mask).unsqueeze(-1)
        return torch.cat([*(p.float() for p in pooled), idf], dim=-1)

    def score_pair(self, pair: EncodedPair) -> Tensor:
        if pair.sim.shape[1] == 0:
            raise ConfigError("PACRR-DRMM needs at least one query position (Lq >= 1)")
        term = self.term_net(self.term_features(pair)).squeeze(-1)
        weights = masked_softmax(self.gate(pair.q_idf.unsqueeze(-1).float()).squeeze(-1), pair.q_mask)
        return (weights * term).sum(-1)

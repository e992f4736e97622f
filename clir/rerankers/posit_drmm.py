"""POSIT-DRMM: context-sensitive term encodings, three similarity views, per-term max/top-k pooling.

McDonald, Brokos, Androutsopoulos. "Deep Relevance Ranking Using Enhanced Document-Query
Interactions". EMNLP 2018.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch.nn.utils.rnn import pack_padded_sequence, pad_packed_sequence

from clir.errors import ConfigError
from clir.rerankers.base import InteractionModel, check_positive, masked_softmax, register, torch_seed
from clir.rerankers.encoding import EncodedPair

FEATURE_NAMES = ("ctx_max", "ctx_top_mean", "raw_max", "raw_top_mean", "exact_max", "exact_top_mean")


def max_and_top_mean(values: Tensor, d_mask: Tensor, k: int) -> tuple[Tensor, Tensor]:
    """Per query term: the maximum over real document terms and the mean of the ``k`` largest.

    A document with fewer than ``k`` terms averages the ones it has; an empty document gives 0.

    Args:
        values: (B, Lq, Ld).
        d_mask: ``bool`` (B, Ld).
        k: How many of the largest to average.

    Returns:
        Two (B, Lq) tensors: max, mean of the top k.
    """
    if values.shape[-1] < k:
        extra = k - values.shape[-1]
        values = F.pad(values, (0, extra))
        d_mask = F.pad(d_mask, (0, extra), value=False)
    filled = values.masked_fill(~d_mask.unsqueeze(1), torch.finfo(values.dtype).min)
    top = filled.topk(k, dim=-1).values
    length = d_mask.sum(1, keepdim=True)
    present = (torch.arange(k, device=values.device) < length).unsqueeze(1)
    top = top.masked_fill(~present, 0.0)
    count = length.clamp(min=1, max=k).unsqueeze(-1).to(top.dtype)
    return top[..., 0], top.sum(-1) / count.squeeze(-1)


def posit_features(ctx_sim: Tensor, raw_sim: Tensor, exact: Tensor, d_mask: Tensor, k: int = 5) -> Tensor:
    """POSIT-DRMM's six features per query term.

    For each view (cosine of contextual encodings, cosine of raw vectors, exact match): the max
    over the document terms and the mean of the top ``k``, in the order of
    :data:`FEATURE_NAMES`.

    Args:
        ctx_sim: (B, Lq, Ld) cosines of the contextual encodings.
        raw_sim: (B, Lq, Ld) cosines of the frozen vectors.
        exact: (B, Lq, Ld) exact matches (bool or 0/1).
        d_mask: ``bool`` (B, Ld).
        k: Top-k of the mean (5).

    Returns:
        Float32 (B, Lq, 6).
    """
    feats: list[Tensor] = []
    for view in (ctx_sim, raw_sim, exact):
        feats.extend(max_and_top_mean(view.float(), d_mask, k))
    return torch.stack(feats, dim=-1)


@register("posit_drmm")
class POSITDRMM(InteractionModel):
    """POSIT-DRMM (McDonald et al., EMNLP 2018).

    Frozen vectors go through a BiLSTM (``lstm_layers`` layers, ``lstm_hidden`` units per
    direction, packed sequences so padding never reaches a real position's state); a term's
    context-sensitive encoding is its vector plus the BiLSTM output (projected to the vector
    dimension when ``2 · lstm_hidden`` differs from it). Per query term, :func:`posit_features`
    of three views gives 6 features; an MLP (6 → ``mlp_hidden``, leaky ReLU 0.1, → 1) scores
    the term, and the term scores are summed with gating weights
    ``softmax_i(W · [contextual encoding_i; idf_i])``. The paper's final layer over the extra
    features is the bilingual model's fusion layer.

    Args:
        embedding_dim: Dimension of the shared space.
        embeddings: Optional frozen matrix (V, embedding_dim).
        lstm_hidden: Units per direction (default ``embedding_dim // 2``).
        lstm_layers: BiLSTM layers (2).
        k_top: k of the top-k mean (5).
        mlp_hidden: Hidden units of the term MLP (8).
        dropout: Dropout on the contextual encodings during training (0.3 in the reference code).
        seed: Seed of the weight initialisation.
    """

    config_keys = ("lstm_hidden", "lstm_layers", "k_top", "mlp_hidden", "dropout")
    needs_vectors = True
    needs_exact = True

    def __init__(
        self,
        embedding_dim: int,
        embeddings: Tensor | None = None,
        *,
        lstm_hidden: int | None = None,
        lstm_layers: int = 2,
        k_top: int = 5,
        mlp_hidden: int = 8,
        dropout: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__(embedding_dim, embeddings, seed)
        lstm_hidden = max(1, embedding_dim // 2) if lstm_hidden is None else lstm_hidden
        for name, value in (
            ("lstm_hidden", lstm_hidden),
            ("lstm_layers", lstm_layers),
            ("k_top", k_top),
            ("mlp_hidden", mlp_hidden),
        ):
            check_positive(name, value)
        if not 0.0 <= dropout < 1.0:
            raise ConfigError(f"dropout must lie in [0, 1), got {dropout!r}")
        self.lstm_hidden, self.lstm_layers, self.k_top = lstm_hidden, lstm_layers, k_top
        self.mlp_hidden, self.dropout = mlp_hidden, float(dropout)
        with torch_seed(seed):
            self.lstm = nn.LSTM(
                embedding_dim, lstm_hidden, num_layers=lstm_layers, batch_first=True, bidirectional=True
            )
            self.project: nn.Module = (
                nn.Identity()
                if 2 * lstm_hidden == embedding_dim
                else nn.Linear(2 * lstm_hidden, embedding_dim)
            )
            self.term_mlp = nn.Sequential(
                nn.Linear(6, mlp_hidden), nn.LeakyReLU(0.1), nn.Linear(mlp_hidden, 1)
            )
            self.gate = nn.Linear(embedding_dim + 1, 1, bias=False)
        self.drop = nn.Dropout(self.dropout)

    def contextual(self, vectors: Tensor, mask: Tensor) -> Tensor:
        """Context-sensitive encodings (B, L, dim): vector + projected BiLSTM output, 0 at padding."""
        length = vectors.shape[1]
        lengths = mask.sum(1).clamp(min=1).cpu()
        packed = pack_padded_sequence(vectors, lengths, batch_first=True, enforce_sorted=False)
        output, _ = self.lstm(packed)
        output, _ = pad_packed_sequence(output, batch_first=True, total_length=length)
        encoded = vectors + self.project(output)
        return self.drop(encoded) * mask.unsqueeze(-1)

    def features(self, pair: EncodedPair) -> tuple[Tensor, Tensor]:
        """(6 features per query term (B, Lq, 6), contextual query encodings (B, Lq, dim))."""
        if pair.q_vectors is None or pair.d_vectors is None or pair.exact is None:
            raise ConfigError("POSIT-DRMM needs raw vectors and exact matches in the EncodedPair")
        q_ctx = self.contextual(pair.q_vectors, pair.q_mask)
        d_ctx = self.contextual(pair.d_vectors, pair.d_mask)
        ctx_sim = torch.bmm(F.normalize(q_ctx, dim=-1), F.normalize(d_ctx, dim=-1).transpose(1, 2))
        return posit_features(ctx_sim, pair.sim, pair.exact, pair.d_mask, self.k_top), q_ctx

    def score_pair(self, pair: EncodedPair) -> Tensor:
        feats, q_ctx = self.features(pair)
        term = self.term_mlp(feats).squeeze(-1)
        gate_in = torch.cat([q_ctx, pair.q_idf.unsqueeze(-1).to(q_ctx.dtype)], dim=-1)
        weights = masked_softmax(self.gate(gate_in).squeeze(-1), pair.q_mask)
        return (weights * term).sum(-1)

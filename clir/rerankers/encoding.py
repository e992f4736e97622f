"""The frozen embedding table and the encoded tensors every interaction model reads.

One :class:`FrozenEmbedding` holds the shared-space matrix E (V, dim) as a buffer (never a
parameter: it is not trained and not handed to an optimiser) together with a unit-normalised
copy, so that a cosine similarity matrix is one ``bmm``. Row 0 is padding: its unit row is
zeroed, so every similarity that involves padding is exactly 0.

:class:`EncodedView` is one side (query or document) looked up once; :class:`EncodedPair` is
what a model scores. The bilingual model looks each of its four views up once and builds the
four component pairs from them, so the matrix is stored, moved and looked up once.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clir.errors import ConfigError


class FrozenEmbedding(nn.Module):
    """A frozen embedding matrix with a unit-normalised copy for cosine similarities.

    Args:
        weight: Float tensor (V, dim); row 0 is padding.

    Raises:
        ConfigError: If ``weight`` is not a 2-D floating tensor with at least one row.
    """

    weight: Tensor
    unit: Tensor

    def __init__(self, weight: Tensor) -> None:
        super().__init__()
        if not isinstance(weight, Tensor) or weight.dim() != 2 or not weight.is_floating_point():
            got = tuple(weight.shape) if isinstance(weight, Tensor) else type(weight).__name__
            raise ConfigError(f"embeddings must be a float tensor of shape (V, dim), got {got}")
        if weight.shape[0] < 1 or weight.shape[1] < 1:
            raise ConfigError(f"embeddings must have at least one row and column, got {tuple(weight.shape)}")
        self.register_buffer("weight", weight.detach().to(torch.float32).clone(), persistent=True)
        self.register_buffer("unit", self._unit(self.weight), persistent=False)
        self.register_load_state_dict_post_hook(lambda module, _keys: module.refresh())

    @staticmethod
    def _unit(weight: Tensor) -> Tensor:
        unit = F.normalize(weight, dim=1)
        unit[0] = 0.0
        return unit

    def refresh(self) -> None:
        """Recompute the unit-normalised copy (after ``weight`` was replaced in place)."""
        self.unit = self._unit(self.weight)

    @property
    def num_embeddings(self) -> int:
        """V, the number of rows."""
        return int(self.weight.shape[0])

    @property
    def dim(self) -> int:
        """The vector dimension."""
        return int(self.weight.shape[1])

    def extra_repr(self) -> str:
        return f"{self.num_embeddings}, {self.dim}, frozen"


@dataclass
class EncodedView:
    """One side of a batch looked up in the frozen table.

    Attributes:
        mask: ``bool`` (B, L), True at real terms.
        surface: ``long`` (B, L) ids (>= 0) compared for exact match.
        unit: (B, L, dim) unit-normalised vectors, zero at padding.
        vectors: (B, L, dim) raw vectors, zero at padding; ``None`` unless requested.
    """

    mask: Tensor
    surface: Tensor
    unit: Tensor
    vectors: Tensor | None = None

    @classmethod
    def encode(
        cls, embedding: FrozenEmbedding, tokens: Tensor, surface: Tensor | None = None, vectors: bool = False
    ) -> EncodedView:
        """Look ``tokens`` up; raw vectors only when ``vectors`` (they cost a second gather).

        Ids outside the table make ``torch.nn.functional.embedding`` raise (CPU) or assert (CUDA);
        no check here, so the hot path has no host-device synchronisation.
        """
        mask = tokens != 0
        raw = None
        if vectors:
            raw = F.embedding(tokens, embedding.weight) * mask.unsqueeze(-1)
        return cls(
            mask=mask,
            surface=tokens if surface is None else surface,
            unit=F.embedding(tokens, embedding.unit),
            vectors=raw,
        )


def exact_matches(rows: EncodedView, cols: EncodedView) -> Tensor:
    """``bool`` (B, L_rows, L_cols): True where two real terms have the same surface id."""
    # padding gets surface ids -1 (rows) and -2 (columns), so it matches nothing
    row_surface = rows.surface.masked_fill(~rows.mask, -1)
    col_surface = cols.surface.masked_fill(~cols.mask, -2)
    return row_surface.unsqueeze(2) == col_surface.unsqueeze(1)


@dataclass
class EncodedPair:
    """What an interaction model scores: a query side, a document side and their interactions.

    Attributes:
        q_mask: ``bool`` (B, Lq).
        d_mask: ``bool`` (B, Ld).
        q_idf: float (B, Lq), 0 at padding.
        q_unit: (B, Lq, dim) unit query vectors.
        d_unit: (B, Ld, dim) unit document vectors.
        sim: (B, Lq, Ld) cosine similarities, exactly 0 wherever either side is padding.
        exact: ``bool`` (B, Lq, Ld) exact surface matches between real terms, or ``None``.
        q_vectors: raw query vectors (B, Lq, dim) or ``None``.
        d_vectors: raw document vectors (B, Ld, dim) or ``None``.
    """

    q_mask: Tensor
    d_mask: Tensor
    q_idf: Tensor
    q_unit: Tensor
    d_unit: Tensor
    sim: Tensor
    exact: Tensor | None = None
    q_vectors: Tensor | None = None
    d_vectors: Tensor | None = None

    @classmethod
    def build(cls, query: EncodedView, doc: EncodedView, q_idf: Tensor, exact: bool = True) -> EncodedPair:
        """Pair two encoded views: one ``bmm`` for the cosine matrix, one comparison for exact match."""
        if query.mask.shape[0] != doc.mask.shape[0]:
            raise ConfigError(
                f"query batch has {query.mask.shape[0]} rows, document batch {doc.mask.shape[0]}"
            )
        return cls(
            q_mask=query.mask,
            d_mask=doc.mask,
            q_idf=q_idf * query.mask,
            q_unit=query.unit,
            d_unit=doc.unit,
            sim=torch.bmm(query.unit, doc.unit.transpose(1, 2)),
            exact=exact_matches(query, doc) if exact else None,
            q_vectors=query.vectors,
            d_vectors=doc.vectors,
        )

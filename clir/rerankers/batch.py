"""Tensor records that carry (query, document) pairs into the rerankers.

Every tensor is padded with 0: token id 0 is the padding row of the frozen embedding matrix,
so a mask is always ``tokens != 0``. Nothing here reads files: the data side builds these
records from analysed text and hands them over.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, fields, replace

import torch
import torch.nn.functional as F
from torch import Tensor
from torch.nn.utils.rnn import pad_sequence

from clir.errors import ConfigError

QUERY_VIEWS = ("en", "src")
DOC_VIEWS = ("src", "en")


def _check_tokens(name: str, value: object) -> Tensor:
    if not isinstance(value, Tensor):
        raise ConfigError(f"{name} must be a torch.Tensor, got {type(value).__name__}")
    if value.dim() != 2 or value.dtype not in (torch.int64, torch.int32):
        raise ConfigError(
            f"{name} must be an integer tensor of shape (B, L), got dtype {value.dtype} "
            f"and shape {tuple(value.shape)}"
        )
    return value


def _check_like(name: str, value: Tensor | None, tokens: Tensor, floating: bool) -> None:
    if value is None:
        return
    if not isinstance(value, Tensor) or value.shape != tokens.shape:
        shape = tuple(value.shape) if isinstance(value, Tensor) else type(value).__name__
        raise ConfigError(f"{name} must have the shape of its tokens {tuple(tokens.shape)}, got {shape}")
    if value.is_floating_point() != floating:
        kind = "a floating" if floating else "an integer"
        raise ConfigError(f"{name} must be {kind} tensor, got dtype {value.dtype}")


def pad_ids(sequences: Sequence[Sequence[int]], min_length: int = 1) -> Tensor:
    """Pad lists of token ids with 0 into a ``long`` tensor of shape (B, L).

    Args:
        sequences: One list of row ids per example; ids must be > 0 (0 is padding).
        min_length: Pad to at least this many columns.

    Returns:
        A ``long`` tensor of shape (len(sequences), max(min_length, longest)).
    """
    rows = [torch.as_tensor(list(s), dtype=torch.long) for s in sequences]
    rows.append(torch.zeros(min_length, dtype=torch.long))
    return pad_sequence(rows, batch_first=True, padding_value=0)[:-1]


def pad_floats(sequences: Sequence[Sequence[float]], min_length: int = 1) -> Tensor:
    """Pad lists of floats (e.g. idf per query term) with 0.0 into a float32 tensor (B, L)."""
    rows = [torch.as_tensor(list(s), dtype=torch.float32) for s in sequences]
    rows.append(torch.zeros(min_length, dtype=torch.float32))
    return pad_sequence(rows, batch_first=True, padding_value=0.0)[:-1]


@dataclass(frozen=True)
class PairBatch:
    """A batch of B (query, document) pairs, as row ids into one frozen embedding matrix.

    Attributes:
        q_tokens: ``long`` (B, Lq) row ids of the query terms, 0 = padding.
        d_tokens: ``long`` (B, Ld) row ids of the document terms, 0 = padding.
        q_idf: ``float`` (B, Lq) idf of each query term (its value at padding is ignored).
        q_surface: ``long`` (B, Lq) id of each query token's surface string (without language);
            exact match is ``q_surface[:, :, None] == d_surface[:, None, :]``. ``None`` means the
            row ids themselves are compared.
        d_surface: ``long`` (B, Ld), as ``q_surface``.
    """

    q_tokens: Tensor
    d_tokens: Tensor
    q_idf: Tensor
    q_surface: Tensor | None = None
    d_surface: Tensor | None = None

    def __post_init__(self) -> None:
        q = _check_tokens("q_tokens", self.q_tokens)
        d = _check_tokens("d_tokens", self.d_tokens)
        if q.shape[0] != d.shape[0]:
            raise ConfigError(f"q_tokens has {q.shape[0]} rows but d_tokens has {d.shape[0]}")
        _check_like("q_idf", self.q_idf, q, floating=True)
        if self.q_idf is None:
            raise ConfigError("q_idf is required (float tensor of shape (B, Lq))")
        _check_like("q_surface", self.q_surface, q, floating=False)
        _check_like("d_surface", self.d_surface, d, floating=False)

    @property
    def q_mask(self) -> Tensor:
        """``bool`` (B, Lq): True where a query term is present."""
        return self.q_tokens != 0

    @property
    def d_mask(self) -> Tensor:
        """``bool`` (B, Ld): True where a document term is present."""
        return self.d_tokens != 0

    def __len__(self) -> int:
        return int(self.q_tokens.shape[0])

    def to(self, device: torch.device | str) -> PairBatch:
        """The same batch with every tensor moved to ``device``."""
        moved = {f.name: getattr(self, f.name) for f in fields(self)}
        return replace(self, **{k: v.to(device) for k, v in moved.items() if v is not None})

    @classmethod
    def from_lists(
        cls,
        q_tokens: Sequence[Sequence[int]],
        d_tokens: Sequence[Sequence[int]],
        q_idf: Sequence[Sequence[float]],
        q_surface: Sequence[Sequence[int]] | None = None,
        d_surface: Sequence[Sequence[int]] | None = None,
    ) -> PairBatch:
        """Pad Python lists into a batch (see :func:`pad_ids`)."""
        return cls(
            q_tokens=pad_ids(q_tokens),
            d_tokens=pad_ids(d_tokens),
            q_idf=pad_floats(q_idf),
            q_surface=None if q_surface is None else pad_ids(q_surface),
            d_surface=None if d_surface is None else pad_ids(d_surface),
        )


@dataclass(frozen=True)
class TokenView:
    """One representation of the query or of the document side of a batch (e.g. the English query).

    Attributes:
        tokens: ``long`` (B, L) row ids into the shared frozen embedding matrix, 0 = padding.
        surface: ``long`` (B, L) surface-string ids for exact match; ``None`` = compare row ids.
        idf: ``float`` (B, L) idf per term; required on query views, unused on document views.
    """

    tokens: Tensor
    surface: Tensor | None = None
    idf: Tensor | None = None

    def __post_init__(self) -> None:
        _check_tokens("tokens", self.tokens)
        _check_like("surface", self.surface, self.tokens, floating=False)
        _check_like("idf", self.idf, self.tokens, floating=True)

    @property
    def mask(self) -> Tensor:
        """``bool`` (B, L): True where a term is present."""
        return self.tokens != 0

    def to(self, device: torch.device | str) -> TokenView:
        """The same view with every tensor moved to ``device``."""
        return TokenView(
            *(None if t is None else t.to(device) for t in (self.tokens, self.surface, self.idf))
        )

    def pad_to(self, length: int) -> TokenView:
        """This view with its columns padded with 0 up to ``length`` (itself if it has as many)."""
        extra = length - self.tokens.shape[1]
        if extra == 0:
            return self
        return TokenView(
            *(None if t is None else F.pad(t, (0, extra)) for t in (self.tokens, self.surface, self.idf))
        )

    @classmethod
    def from_lists(
        cls,
        tokens: Sequence[Sequence[int]],
        surface: Sequence[Sequence[int]] | None = None,
        idf: Sequence[Sequence[float]] | None = None,
    ) -> TokenView:
        """Pad Python lists into a view (see :func:`pad_ids`)."""
        return cls(
            tokens=pad_ids(tokens),
            surface=None if surface is None else pad_ids(surface),
            idf=None if idf is None else pad_floats(idf),
        )


def pad_views(views: Sequence[TokenView]) -> list[TokenView]:
    """The views padded with 0 to the longest of their lengths (see :meth:`TokenView.pad_to`)."""
    length = max(v.tokens.shape[1] for v in views)
    return [v.pad_to(length) for v in views]


def concat_views(views: Sequence[TokenView]) -> TokenView:
    """Views of the same B rows side by side: view i takes columns [i·L, (i+1)·L), each view
    padded with 0 to the longest length L.

    A view without surface ids contributes its token ids (what it compares for exact match);
    the result has idf only if every view has it.

    Args:
        views: At least one view, all with B rows.

    Returns:
        A view of shape (B, len(views) · L).
    """
    views = pad_views(views)
    surface = None
    if any(v.surface is not None for v in views):
        surface = torch.cat([v.tokens if v.surface is None else v.surface for v in views], dim=1)
    idfs = [v.idf for v in views if v.idf is not None]
    idf = torch.cat(idfs, dim=1) if len(idfs) == len(views) else None
    return TokenView(torch.cat([v.tokens for v in views], dim=1), surface, idf)


@dataclass(frozen=True)
class BilingualBatch:
    """A batch for :class:`~clir.rerankers.bilingual.BilingualReranker`: two query views, two
    document views and extra per-pair features.

    Attributes:
        q_en: The English query (``idf`` required).
        q_src: The query translated into the document language (``idf`` required).
        d_src: The document in its own language.
        d_en: The document translated into English.
        features: ``float`` (B, F) extra features of each pair (e.g. first-stage QL/BM25 scores
            normalised per query, idf-weighted overlap), or ``None`` when F = 0.
    """

    q_en: TokenView
    q_src: TokenView
    d_src: TokenView
    d_en: TokenView
    features: Tensor | None = None

    def __post_init__(self) -> None:
        size = self.q_en.tokens.shape[0]
        for name in ("q_en", "q_src", "d_src", "d_en"):
            view = getattr(self, name)
            if not isinstance(view, TokenView):
                raise ConfigError(f"{name} must be a TokenView, got {type(view).__name__}")
            if view.tokens.shape[0] != size:
                raise ConfigError(f"{name} has {view.tokens.shape[0]} rows but q_en has {size}")
        for name in ("q_en", "q_src"):
            if getattr(self, name).idf is None:
                raise ConfigError(f"{name}.idf is required on a query view")
        if self.features is not None and (
            not isinstance(self.features, Tensor)
            or self.features.dim() != 2
            or self.features.shape[0] != size
            or not self.features.is_floating_point()
        ):
            got = tuple(self.features.shape) if isinstance(self.features, Tensor) else self.features
            raise ConfigError(f"features must be a float tensor of shape ({size}, F), got {got}")

    def __len__(self) -> int:
        return int(self.q_en.tokens.shape[0])

    def query(self, view: str) -> TokenView:
        """The query view ``"en"`` or ``"src"``."""
        if view not in QUERY_VIEWS:
            raise ConfigError(f"unknown query view {view!r}; expected one of {list(QUERY_VIEWS)}")
        return self.q_en if view == "en" else self.q_src

    def doc(self, view: str) -> TokenView:
        """The document view ``"src"`` or ``"en"``."""
        if view not in DOC_VIEWS:
            raise ConfigError(f"unknown document view {view!r}; expected one of {list(DOC_VIEWS)}")
        return self.d_src if view == "src" else self.d_en

    def pair(self, query_view: str, doc_view: str) -> PairBatch:
        """The :class:`PairBatch` of one component, e.g. ``pair("en", "src")``."""
        q, d = self.query(query_view), self.doc(doc_view)
        return PairBatch(q.tokens, d.tokens, q.idf, q.surface, d.surface)  # type: ignore[arg-type]

    def to(self, device: torch.device | str) -> BilingualBatch:
        """The same batch with every tensor moved to ``device``."""
        return BilingualBatch(
            self.q_en.to(device),
            self.q_src.to(device),
            self.d_src.to(device),
            self.d_en.to(device),
            None if self.features is None else self.features.to(device),
        )

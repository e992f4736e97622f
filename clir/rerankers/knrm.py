"""K-NRM: RBF kernel pooling over the translation (similarity) matrix.

Xiong, Dai, Callan, Liu, Power. "End-to-End Neural Ad-hoc Ranking with Kernel Pooling".
SIGIR 2017.
"""

from __future__ import annotations

import math
from collections.abc import Iterator

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clir.errors import ConfigError
from clir.rerankers.base import InteractionModel, check_choice, masked_softmax, register, torch_seed
from clir.rerankers.encoding import EncodedPair, EncodedView, exact_matches

OUTPUTS = ("tanh", "linear")
GATINGS = ("none", "idf", "vector")

# exp(x) for x below this is < 1.2e-37 (float32's smallest normal is 1.18e-38): such terms are
# set to exactly 0 instead, which keeps denormals (10-50x slower on x86 CPUs) out of the sums
# and changes nothing visible, since a kernel sum is clamped at eps = 1e-10 before its log.
_MIN_EXPONENT = -85.0
# Where padded document positions are moved so that every kernel gives them exactly 0.
_PAD_SIMILARITY = -1.0e4


def kernel_mus(n_kernels: int) -> list[float]:
    """Kernel centres of K-NRM: 1.0 (exact match) then the centres of ``n_kernels - 1`` equal bins
    of [-1, 1], from high to low (11 kernels: 1.0, 0.9, 0.7, ..., -0.9)."""
    if n_kernels < 2:
        raise ConfigError(f"n_kernels must be >= 2, got {n_kernels!r}")
    width = 2.0 / (n_kernels - 1)
    return [1.0] + [round(1.0 - width / 2 - i * width, 10) for i in range(n_kernels - 1)]


def _window_padding(length: int, window: int) -> int:
    """Positions to add to a dimension of ``length`` so that windows of ``window`` positions,
    every ``window // 2``, cover it exactly (0 when one window covers it all)."""
    return (-(length - window)) % max(1, window // 2) if length > window else 0


def window_sums(values: Tensor, window: int) -> Tensor:
    """Sums over windows of ``window`` positions of the last dimension, every ``window // 2``
    positions; the last dimension is padded with zeros so that every position is covered. A
    window longer than the dimension sums all of it.

    Padding the input further never changes the largest window sum of a non-negative input:
    each window added then holds a subset of an earlier window's non-zero positions.

    Args:
        values: (..., L) non-negative values.
        window: Window length (>= 1).

    Returns:
        (..., n_windows).
    """
    length = values.shape[-1]
    if length <= window:
        return values.sum(-1, keepdim=True)
    stride = max(1, window // 2)
    extra = _window_padding(length, window)
    padded = F.pad(values, (0, extra)) if extra else values
    if window != 2 * stride:
        return padded.unfold(-1, window, stride).sum(-1)
    # an even window is two adjacent blocks of `stride`: sum the blocks once, add neighbours
    blocks = padded.reshape(*padded.shape[:-1], -1, stride).sum(-1)
    return blocks[..., :-1] + blocks[..., 1:]


def _eager_inference(t: Tensor) -> bool:
    """Whether work on ``t`` may be done in place: no autograd and no ``torch.compile`` tracing
    (inductor fuses functional code into fewer passes than in-place updates would allow)."""
    return not t.requires_grad and not torch.compiler.is_compiling()


def _kernel_terms(s: Tensor, mus: list[float], sigmas: list[float]) -> Iterator[tuple[Tensor, float]]:
    """Per kernel, ``(values, factor)`` with ``exp(-(s - μ)² / 2σ²) = factor · values`` elementwise.

    Terms below ``exp(-85)`` are 0 in ``values`` (see ``_MIN_EXPONENT``). In eager inference the
    values of every kernel are written into one scratch buffer, so each must be reduced before
    the next is asked for; under autograd and under ``torch.compile`` (which fuses all kernels
    into one pass that in-place updates would split) they are fresh tensors.

    Args:
        s: Float32 similarities, any shape.
        mus: Kernel centres.
        sigmas: Kernel widths.

    Yields:
        ``values`` (shaped like ``s``) and the Python float ``factor`` of each kernel in turn.
    """
    inplace = _eager_inference(s)
    squares: dict[float, Tensor] = {}
    buffer: Tensor | None = None
    for mu, sigma in zip(mus, sigmas, strict=True):
        scale = -0.5 / (sigma * sigma)
        offset = -scale * mu * mu  # exp(scale (s - mu)^2) = exp(scale s^2 - 2 scale mu s) * exp(-offset)
        if offset < 60.0 and abs(mu) <= 1.0:
            # expanded form, 4 passes: exp(base + a s) with base = scale s^2 shared by equal sigmas;
            # the argument stays <= offset < 60, so no overflow; exp(-offset) leaves the sum.
            if scale not in squares:
                squares[scale] = s.square() * scale
            if inplace:  # one scratch buffer for all kernels: no allocation (and page faults) per kernel
                buffer = torch.empty_like(s) if buffer is None else buffer
                arg = torch.add(squares[scale], s, alpha=-2.0 * scale * mu, out=buffer)
            else:
                arg = torch.add(squares[scale], s, alpha=-2.0 * scale * mu)
            factor = math.exp(-offset)
            limit = _MIN_EXPONENT + offset
        else:
            arg = (s - mu).square_() if inplace else (s - mu).square()
            arg = arg.mul_(scale) if inplace else arg * scale
            factor, limit = 1.0, _MIN_EXPONENT
        values = F.threshold(arg, limit, -math.inf, inplace=inplace)
        yield (values.exp_() if inplace else values.exp()), factor


def kernel_sums(
    sim: Tensor, d_mask: Tensor, mus: list[float], sigmas: list[float], window: int = 0
) -> Tensor:
    """Soft-TF of each query term in each kernel: ``K_k(i) = Σ_j exp(-(M_ij - μ_k)² / 2σ_k²)``.

    Padded document positions contribute exactly 0. Terms below ``exp(-85)`` are dropped (set
    to 0; see ``_MIN_EXPONENT``). The kernels are computed one at a time over the similarities,
    so (B, Lq, Ld, K) is never materialised.

    Args:
        sim: (B, Lq, Ld) similarities (computed in float32 whatever its dtype), or (B, Lq, n, Ld)
            for n documents per query, each summed on its own.
        d_mask: ``bool`` (B, Ld), or (B, n, Ld) with a 4-D ``sim``.
        mus: Kernel centres.
        sigmas: Kernel widths.
        window: 0: sum over the whole document; else sum over each window of this many
            positions (:func:`window_sums`), giving (..., n_windows, K).

    Returns:
        Float32 (B, Lq, K), or (B, Lq, n, K) with a 4-D ``sim``.
    """
    s = sim.float().masked_fill(~d_mask.unsqueeze(1), _PAD_SIMILARITY)
    extra = _window_padding(s.shape[-1], window) if window else 0
    if extra:  # pad once here rather than once per kernel in window_sums
        s = F.pad(s, (0, extra), value=_PAD_SIMILARITY)
    sums = []
    for values, factor in _kernel_terms(s, mus, sigmas):
        total = window_sums(values, window) if window else values.sum(-1)
        sums.append(total * factor if factor != 1.0 else total)
    return torch.stack(sums, dim=-1)


def window_kernel_sums(
    sim_t: Tensor, d_mask: Tensor, mus: list[float], sigmas: list[float], window: int
) -> Tensor:
    """:func:`kernel_sums` over windows, for similarities that come document-major.

    The same windows as :func:`window_sums` (every ``window // 2`` positions, the last ones
    padded), summed along the document axis while the query terms stay the last, contiguous
    axis: every pass reads memory in order, and under ``torch.compile`` the kernels fuse into
    one reduction over half-window blocks that writes only the block sums.

    Args:
        sim_t: (B, n_d, Ld, R) similarities of n_d documents and R query terms (computed in
            float32 whatever its dtype).
        d_mask: ``bool`` (B, n_d, Ld).
        mus: Kernel centres.
        sigmas: Kernel widths.
        window: Window length (>= 1).

    Returns:
        Float32 (B, n_d, n_windows, K, R).
    """
    s = sim_t.float().masked_fill(~d_mask.unsqueeze(-1), _PAD_SIMILARITY)
    length = s.shape[2]
    stride = max(1, window // 2)
    whole, even = length <= window, window == 2 * stride
    extra = _window_padding(length, window)
    if extra:
        s = F.pad(s, (0, 0, 0, extra), value=_PAD_SIMILARITY)
    if even and not whole and s.device.type == "cpu" and _eager_inference(s):
        return _block_window_sums_in_place(s, mus, sigmas, stride)
    sums = []
    for values, factor in _kernel_terms(s, mus, sigmas):
        if whole:
            total = values.sum(2, keepdim=True)
        elif even:  # half-window blocks; a window is two adjacent blocks, added once below
            total = values.unflatten(2, (-1, stride)).sum(3)
        else:
            total = values.unfold(2, window, stride).sum(-1)
        sums.append(total * factor if factor != 1.0 else total)
    out = torch.stack(sums, dim=3)
    return out[:, :, :-1] + out[:, :, 1:] if even and not whole else out


def _block_window_sums_in_place(s: Tensor, mus: list[float], sigmas: list[float], stride: int) -> Tensor:
    """:func:`window_kernel_sums` of windows of two blocks of ``stride`` positions, eagerly.

    Each kernel's block sums are written straight into one (B, n_d, n_blocks, K, R) buffer as
    ``stride`` strided slices added together: on a CPU this is about a fifth faster than a
    reduction over a middle dimension of ``stride`` followed by a stack (on an H200, eagerly,
    about a sixth slower, so GPUs take the reduction).

    Args:
        s: (B, n_d, n_blocks · stride, R) float32 similarities, padding already set.
        mus: Kernel centres.
        sigmas: Kernel widths.
        stride: Block length (half the window).

    Returns:
        Float32 (B, n_d, n_blocks - 1, K, R).
    """
    size, n_docs, length, rows = s.shape
    blocks = s.new_empty(size, n_docs, length // stride, len(mus), rows)
    factors = []
    for k, (values, factor) in enumerate(_kernel_terms(s, mus, sigmas)):
        target = blocks[:, :, :, k]
        if stride == 1:
            target.copy_(values)
        else:
            torch.add(values[:, :, 0::stride], values[:, :, 1::stride], out=target)
            for j in range(2, stride):
                target.add_(values[:, :, j::stride])
        factors.append(factor)
    blocks.mul_(torch.tensor(factors, device=s.device).unsqueeze(-1))
    return torch.add(blocks[:, :, :-1], blocks[:, :, 1:])


def grid_kernel_pooling(
    sim_t: Tensor,
    q_mask: Tensor,
    d_mask: Tensor,
    n_queries: int,
    mus: list[float],
    sigmas: list[float],
    eps: float = 1e-10,
    log_scale: float = 0.01,
    window: int = 0,
    weights: Tensor | None = None,
) -> Tensor:
    """:func:`kernel_pooling` of several queries against several documents in one pass.

    The similarities come document-major, as ``bmm(D, Qᵀ)`` gives them: the query terms are
    the last dimension, so the large operand of the product (the documents) is read in its
    natural layout. The queries lie side by side along that dimension, Lq terms each.

    Args:
        sim_t: (B, n_d, Ld, n_q · Lq) similarities of n_d documents and n_q queries.
        q_mask: ``bool`` (B, n_q · Lq).
        d_mask: ``bool`` (B, n_d, Ld).
        n_queries: n_q.
        mus: Kernel centres.
        sigmas: Kernel widths.
        eps: Floor of a kernel sum before its log.
        log_scale: Factor on the log features.
        window: 0: pool over the whole document; else pool each window of this many document
            positions and keep, per kernel, the largest feature over the windows.
        weights: Optional float (B, n_d, n_q · Lq): each query term's weight in the sum over the
            terms, per document (term gating; 0 at padding); ``None``: 1 for every real term.

    Returns:
        Float32 (B, n_q, n_d, K): entry (i, j) is the pooling of query i against document j.
    """
    size, n_docs, _, rows = sim_t.shape
    if window:  # (B, n_d, n_windows, K, rows): the features of each window, then the best per kernel
        sums = window_kernel_sums(sim_t, d_mask, mus, sigmas, window)
        mask = q_mask.reshape(size, 1, 1, 1, rows) if weights is None else weights[:, :, None, None]
        if _eager_inference(sums):  # sums is a fresh tensor: no copies in eager inference
            logs = sums.clamp_(min=eps).log_().mul_(mask)
        else:
            logs = torch.log(sums.clamp(min=eps)) * mask
        phi = logs.unflatten(-1, (n_queries, rows // n_queries)).sum(-1).amax(2)
        return phi.permute(0, 3, 1, 2) * log_scale
    sums = kernel_sums(sim_t.permute(0, 3, 1, 2), d_mask, mus, sigmas)
    mask = q_mask.reshape(size, rows, 1, 1) if weights is None else weights.transpose(1, 2).unsqueeze(-1)
    logs = torch.log(sums.clamp(min=eps)) * mask
    return logs.reshape(size, n_queries, rows // n_queries, n_docs, len(mus)).sum(2) * log_scale


def kernel_pooling(
    sim: Tensor,
    q_mask: Tensor,
    d_mask: Tensor,
    mus: list[float],
    sigmas: list[float],
    eps: float = 1e-10,
    log_scale: float = 0.01,
    window: int = 0,
    weights: Tensor | None = None,
) -> Tensor:
    """K-NRM's soft-TF features: ``φ_k = log_scale · Σ_i log(max(K_k(i), eps))`` over real query terms.

    Args:
        sim: (B, Lq, Ld) similarities.
        q_mask: ``bool`` (B, Lq).
        d_mask: ``bool`` (B, Ld).
        mus: Kernel centres.
        sigmas: Kernel widths.
        eps: Floor of a kernel sum before its log.
        log_scale: Factor on the log features.
        window: Pool windows of this many document positions, keep the best (0: whole document).
        weights: Optional float (B, Lq) weight of each term in the sum (term gating; 0 at padding).

    Returns:
        Float32 (B, K).
    """
    sim_t = sim.transpose(1, 2).unsqueeze(1)
    if weights is not None:
        weights = weights.unsqueeze(1)
    phi = grid_kernel_pooling(
        sim_t, q_mask, d_mask.unsqueeze(1), 1, mus, sigmas, eps, log_scale, window, weights
    )
    return phi[:, 0, 0]


@register("knrm")
class KNRM(InteractionModel):
    """Kernel-based Neural Ranking Model (Xiong et al., SIGIR 2017).

    ``score = tanh(w · φ + b)`` (``output="tanh"``, as in the paper) or ``w · φ + b``
    (``output="linear"``, unbounded, often easier to fuse with other features), where φ are the
    kernel-pooled features of the similarity matrix (:func:`kernel_pooling`; the 0.01 scaling of
    the log features follows the authors' code). The first kernel (μ = 1, σ = ``exact_sigma``)
    counts exact matches; with ``exact_match=True`` an exact surface match is given similarity
    1.0 whatever its cosine (the same string in two languages has two vectors).

    Args:
        embedding_dim: Dimension of the shared space.
        embeddings: Optional frozen matrix (V, embedding_dim).
        n_kernels: Number of kernels including the exact-match kernel (11).
        sigma: Width of the soft-match kernels (0.1).
        exact_sigma: Width of the exact-match kernel (0.001).
        exact_match: Set exact surface matches to similarity 1.0.
        output: ``"tanh"`` or ``"linear"``.
        log_scale: Factor on the log kernel features (0.01; positive).
        eps: Floor of a kernel sum before its log (1e-10).
        window: 0 (the paper): pool over the whole document. Else pool every window of this many
            document tokens (half-overlapping) and keep, per kernel, the best window: soft
            matches that meet in one verse of a passage count more than scattered ones (en-sw
            out-of-fold MAP of the four-component model 0.453 -> 0.466 with 10).
        gating: ``"none"`` (the paper): every query term's log-kernel features count once.
            ``"idf"`` or ``"vector"``: DRMM's term gating (Guo et al., CIKM 2016) inside the
            pooling, ``φ_k = log_scale · Σ_i n · g_i · log K_k(i)`` with ``g = softmax_i(w · idf_i)``
            (or ``w · x_i``, the term's unit vector) over the n real query terms; w starts at 0,
            where the model equals K-NRM.
        seed: Seed of the weight initialisation.
    """

    config_keys = ("n_kernels", "sigma", "exact_sigma", "exact_match", "output", "log_scale", "eps")
    config_keys += ("window", "gating")

    def __init__(
        self,
        embedding_dim: int,
        embeddings: Tensor | None = None,
        *,
        n_kernels: int = 11,
        sigma: float = 0.1,
        exact_sigma: float = 0.001,
        exact_match: bool = True,
        output: str = "tanh",
        log_scale: float = 0.01,
        eps: float = 1e-10,
        window: int = 0,
        gating: str = "none",
        seed: int = 0,
    ) -> None:
        super().__init__(embedding_dim, embeddings, seed)
        check_choice("output", output, OUTPUTS)
        check_choice("gating", gating, GATINGS)
        if not isinstance(n_kernels, int) or not 2 <= n_kernels <= 1000:
            raise ConfigError(f"n_kernels must be an integer from 2 to 1000, got {n_kernels!r}")
        # log_scale 0 had made every kernel feature 0: a component of constant score, silently
        for name, value in (
            ("sigma", sigma),
            ("exact_sigma", exact_sigma),
            ("eps", eps),
            ("log_scale", log_scale),
        ):
            if isinstance(value, bool) or not isinstance(value, (int, float)) or value <= 0:
                raise ConfigError(f"{name} must be a positive number, got {value!r}")
        self.n_kernels, self.sigma, self.exact_sigma = n_kernels, float(sigma), float(exact_sigma)
        self.exact_match, self.output, self.log_scale, self.eps = bool(exact_match), output, log_scale, eps
        self.needs_exact = self.exact_match
        if isinstance(window, bool) or not isinstance(window, int) or window < 0:
            raise ConfigError(f"window must be an integer >= 0, got {window!r}")
        self.window = window
        self.mus = kernel_mus(n_kernels)
        self.sigmas = [self.exact_sigma] + [self.sigma] * (n_kernels - 1)
        with torch_seed(seed):
            self.dense = nn.Linear(n_kernels, 1)
        self.gating = gating
        if gating != "none":
            self.gate = nn.Linear(1 if gating == "idf" else embedding_dim, 1, bias=False)
            nn.init.zeros_(self.gate.weight)

    def term_weights(self, unit: Tensor, idf: Tensor, mask: Tensor) -> Tensor | None:
        """Each query term's weight in the pooling (B, L), 0 at padding; ``None`` without gating.

        Args:
            unit: (B, L, dim) unit term vectors.
            idf: (B, L) idf of each term.
            mask: ``bool`` (B, L), True at real terms.
        """
        if self.gating == "none":
            return None
        gate_in = idf.unsqueeze(-1) if self.gating == "idf" else unit
        gates = masked_softmax(self.gate(gate_in.float()).squeeze(-1), mask)
        return gates * mask.sum(-1, keepdim=True)

    def similarity(self, pair: EncodedPair) -> Tensor:
        """The matrix the kernels read: cosines, with exact matches at 1.0 if ``exact_match``."""
        if self.exact_match and pair.exact is not None:
            return pair.sim.float().masked_fill(pair.exact, 1.0)
        return pair.sim

    def features(self, pair: EncodedPair) -> Tensor:
        """Kernel features φ (B, n_kernels)."""
        return kernel_pooling(
            self.similarity(pair),
            pair.q_mask,
            pair.d_mask,
            self.mus,
            self.sigmas,
            self.eps,
            self.log_scale,
            self.window,
            self.term_weights(pair.q_unit, pair.q_idf, pair.q_mask),
        )

    def grid_features(
        self, query: EncodedView, docs: list[EncodedView], n_queries: int, weights: Tensor | None = None
    ) -> Tensor:
        """Kernel features of n_q queries, side by side in ``query``, against each of ``docs``.

        One ``bmm(D, Qᵀ)`` per document and one kernel pass over all of them: this is how the
        bilingual model scores its K-NRM components, and under ``torch.compile`` it avoids the
        transposed copy of the document vectors that ``bmm(Q, Dᵀ)`` costs.

        Args:
            query: n_q queries of Lq terms each, side by side (B, n_q · Lq).
            docs: n_d documents, all of one length Ld.
            n_queries: n_q.
            weights: Optional float (B, n_d, n_q · Lq) term weights per document
                (:meth:`term_weights` of each component); ``None``: 1 for every real term.

        Returns:
            Float32 (B, n_q, n_d, n_kernels), equal to :meth:`features` of each (query, document).
        """
        sim_t = torch.stack([torch.bmm(d.unit, query.unit.transpose(1, 2)) for d in docs], dim=1)
        if self.exact_match:
            exact = torch.stack([exact_matches(d, query) for d in docs], dim=1)
            sim_t = sim_t.float().masked_fill(exact, 1.0)
        d_mask = torch.stack([d.mask for d in docs], dim=1)
        pooling = (self.mus, self.sigmas, self.eps, self.log_scale, self.window)
        return grid_kernel_pooling(sim_t, query.mask, d_mask, n_queries, *pooling, weights)

    @property
    def kernel_signature(self) -> tuple:
        """Models with equal signatures compute equal features from equal pairs."""
        return (tuple(self.mus), tuple(self.sigmas), self.exact_match, self.eps, self.log_scale, self.window)

    def score_features(self, features: Tensor) -> Tensor:
        """Scores (B,) from kernel features (B, n_kernels)."""
        score = self.dense(features.to(self.dense.weight.dtype)).squeeze(-1)
        return torch.tanh(score) if self.output == "tanh" else score

    def score_pair(self, pair: EncodedPair) -> Tensor:
        return self.score_features(self.features(pair))

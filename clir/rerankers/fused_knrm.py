"""A fused Triton kernel for the windowed K-NRM pooling of the bilingual model.

One program per (pair, document view) walks the document in tiles of 32 consecutive positions: it
gathers their unit vectors straight from the frozen table, computes the cosine similarities with
every query term on the tensor cores (exact surface matches set to 1.0), and per RBF kernel
the kernel values, the sums over every window of the tile (one product with a 0/1 matrix of
which positions each window covers, also on the tensor cores), the logs and the sums over each
query's terms, keeping per kernel the best window: the (B, Lq, Ld, K) tensor, the gathered
vectors and the similarity matrix never reach memory.

It computes :func:`clir.rerankers.knrm.grid_kernel_pooling` for even windows (``window = 2 ·
stride``) of documents longer than one window, in float32 (the products in ``tf32x3``: three
tensor-core passes that keep float32's accuracy), for inference only;
:func:`fused_pooling_supported` says when. The PyTorch code is the fallback and the test
oracle. Triton is optional: without it (or without CUDA, unless ``TRITON_INTERPRET=1``)
nothing here runs.
"""

from __future__ import annotations

import functools
import os
from typing import Any

import torch
from torch import Tensor

try:  # optional: the PyTorch path needs none of this
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None

# exp(x) for x below this is dropped, as in clir.rerankers.knrm (_MIN_EXPONENT)
_MIN_EXPONENT = -85.0
_TILE = 32  # document positions per tile
_WARPS = 2  # warps per program (32 positions and 2 warps beat 64 / 4 and 128 / 4 on an H200: README)
_PRECISION = "tf32x3"  # of the products: three tensor-core passes, float32's accuracy


def fused_pooling_supported(window: int, doc_length: int, device: torch.device, grad: bool) -> bool:
    """Whether :func:`fused_window_pooling` computes this pooling: Triton importable, a CUDA
    device (or Triton's interpreter), no autograd, an even window shorter than the documents,
    half-windows of at most 16 positions."""
    if triton is None or grad or window < 2 or window % 2 or doc_length <= window or window // 2 > 16:
        return False
    return device.type == "cuda" or _interpreting()


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def fused_window_pooling(
    unit: Tensor,
    q_tokens: Tensor,
    q_surface: Tensor,
    d_tokens: Tensor,
    d_surface: Tensor,
    n_queries: int,
    mus: list[float],
    sigmas: list[float],
    eps: float,
    log_scale: float,
    window: int,
) -> Tensor:
    """:func:`~clir.rerankers.knrm.grid_kernel_pooling` with windows, from token ids.

    Args:
        unit: (V, dim) unit-normalised table (row 0 zero), float32.
        q_tokens: (B, n_q · Lq) row ids of the queries side by side (0 = padding).
        q_surface: (B, n_q · Lq) surface ids.
        d_tokens: (B, n_d, Ld) row ids of the documents (0 = padding).
        d_surface: (B, n_d, Ld) surface ids.
        n_queries: n_q.
        mus: Kernel centres.
        sigmas: Kernel widths.
        eps: Floor of a window's kernel sum before its log.
        log_scale: Factor on the log features.
        window: Even window length, shorter than Ld.

    Returns:
        Float32 (B, n_q, n_d, K).
    """
    size, rows = q_tokens.shape
    n_docs, length = d_tokens.shape[1], d_tokens.shape[2]
    stride = window // 2
    extra = (-(length - window)) % stride
    n_windows = (length + extra) // stride - 1
    k = len(mus)
    r_p = max(16, triton.next_power_of_2(rows))
    step = _TILE // stride - 1  # windows per tile: window w covers positions [w·stride, (w + 2)·stride)
    device = unit.device
    out = torch.empty(size, n_queries, n_docs, k, dtype=torch.float32, device=device)
    params = _params(tuple(mus), tuple(sigmas), device)
    grid = (size, n_docs)
    _pool_kernel[grid](
        unit.float().contiguous(),
        q_tokens.contiguous(),
        q_surface.contiguous(),
        rows,
        d_tokens.contiguous(),
        d_surface.contiguous(),
        n_docs,
        length,
        params,
        out,
        n_windows,
        eps,
        log_scale,
        LQ=rows // n_queries,
        N_Q=n_queries,
        K=k,
        K_P=triton.next_power_of_2(k),
        STRIDE=stride,
        TILE=_TILE,
        STEP=step,
        W_P=_window_rows(step),
        N_TILES=-(-n_windows // step),
        DIM=unit.shape[1],
        R_P=r_p,
        BLOCK_D=32,
        MIN_EXP=_MIN_EXPONENT,
        PRECISION=_PRECISION,
        num_warps=_WARPS,
    )
    return out


@functools.lru_cache(maxsize=64)
def _params(mus: tuple[float, ...], sigmas: tuple[float, ...], device: torch.device) -> Tensor:
    """The kernels' ``(mu, -1 / (2 sigma^2))`` on ``device``, made once: a copy from the host
    per call would wait for the device each batch."""
    return torch.tensor(
        [[mu, -0.5 / (sigma * sigma)] for mu, sigma in zip(mus, sigmas, strict=True)],
        dtype=torch.float32,
        device=device,
    )


def _window_rows(step: int) -> int:
    """Rows of the window matrix of ``step`` windows (a power of two, at least 16)."""
    return max(16, triton.next_power_of_2(step))


def _kernel(fn: Any) -> Any:
    return triton.jit(fn) if triton is not None else fn


@_kernel
def _pool_kernel(
    unit_ptr,
    q_tok_ptr,
    q_surf_ptr,
    rows,
    d_tok_ptr,
    d_surf_ptr,
    n_docs,
    length,
    params_ptr,
    out_ptr,
    n_windows,
    eps,
    log_scale,
    LQ: tl.constexpr,
    N_Q: tl.constexpr,
    K: tl.constexpr,
    K_P: tl.constexpr,
    STRIDE: tl.constexpr,
    TILE: tl.constexpr,
    STEP: tl.constexpr,
    W_P: tl.constexpr,
    N_TILES: tl.constexpr,
    DIM: tl.constexpr,
    R_P: tl.constexpr,
    BLOCK_D: tl.constexpr,
    MIN_EXP: tl.constexpr,
    PRECISION: tl.constexpr,
):
    b = tl.program_id(0)
    j = tl.program_id(1)
    r = tl.arange(0, R_P)
    r_ok = r < rows
    q_tok = tl.load(q_tok_ptr + b * rows + r, mask=r_ok, other=0)
    q_surf = tl.load(q_surf_ptr + b * rows + r, mask=r_ok, other=-1)
    q_real = q_tok != 0
    q_weight = q_real.to(tl.float32)
    group = r // LQ
    p = tl.arange(0, TILE)
    w_local = tl.arange(0, W_P)
    # window w of a tile = its positions [w·STRIDE, (w + 2)·STRIDE), as a (W_P, TILE) 0/1 matrix
    half = p // STRIDE
    cover = ((half[None, :] == w_local[:, None]) | (half[None, :] == w_local[:, None] + 1)).to(tl.float32)
    q_row = tl.arange(0, 2)
    kk = tl.arange(0, K_P)
    best = tl.full((2, K_P), float("-inf"), tl.float32)
    doc = (b * n_docs + j) * length
    for tile in range(N_TILES):
        t0 = tile * STEP  # the tile's first window
        pos = t0 * STRIDE + p
        ok = pos < length
        d_tok = tl.load(d_tok_ptr + doc + pos, mask=ok, other=0)
        d_surf = tl.load(d_surf_ptr + doc + pos, mask=ok, other=-2)
        d_real = d_tok != 0
        sim = tl.zeros((TILE, R_P), dtype=tl.float32)
        for c in range(0, DIM, BLOCK_D):
            cols = c + tl.arange(0, BLOCK_D)
            c_ok = cols < DIM
            dv = tl.load(
                unit_ptr + d_tok[:, None] * DIM + cols[None, :],
                mask=d_real[:, None] & c_ok[None, :],
                other=0.0,
            )
            qv = tl.load(
                unit_ptr + q_tok[:, None] * DIM + cols[None, :],
                mask=q_real[:, None] & c_ok[None, :],
                other=0.0,
            )
            sim = tl.dot(dv, tl.trans(qv), sim, input_precision=PRECISION)
        exact = (d_surf[:, None] == q_surf[None, :]) & d_real[:, None] & q_real[None, :]
        sim = tl.where(exact, 1.0, sim)
        w_ok = (w_local < STEP) & (t0 + w_local < n_windows)
        for k in tl.static_range(K):
            mu = tl.load(params_ptr + 2 * k)
            scale = tl.load(params_ptr + 2 * k + 1)
            diff = sim - mu
            arg = scale * diff * diff
            values = tl.where(d_real[:, None] & (arg >= MIN_EXP), tl.exp(arg), 0.0)
            sums = tl.dot(cover, values, input_precision=PRECISION)
            logs = tl.log(tl.maximum(sums, eps)) * q_weight[None, :]
            for q in tl.static_range(N_Q):
                per_window = tl.sum(tl.where((group == q)[None, :], logs, 0.0), axis=1)
                top = tl.max(tl.where(w_ok, per_window, float("-inf")), axis=0)
                hit = (q_row == q)[:, None] & (kk == k)[None, :]
                best = tl.where(hit, tl.maximum(best, top), best)
    out = out_ptr + ((b * N_Q + q_row[:, None]) * n_docs + j) * K + kk[None, :]
    tl.store(out, best * log_scale, mask=(q_row < N_Q)[:, None] & (kk < K)[None, :])

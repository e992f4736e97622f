"""A fused Triton kernel for the windowed K-NRM pooling of the bilingual model.

One program per (pair, document view) gathers the document's unit vectors straight from the
frozen table, computes the cosine similarities with every query term (exact surface matches
set to 1.0), the RBF kernel values, their half-window block sums, the window sums, the logs and
the sums over each query's terms, and keeps per kernel the best window: the
(B, Lq, Ld, K) tensor, the gathered vectors and the similarity matrix never reach memory.

It computes :func:`clir.rerankers.knrm.grid_kernel_pooling` for even windows (``window = 2 ·
stride``) of documents longer than one window, in float32 (dots in IEEE float32), for inference
only; :func:`fused_pooling_supported` says when. The PyTorch code is the fallback and the test
oracle. Triton is optional: without it (or without CUDA, unless ``TRITON_INTERPRET=1``)
nothing here runs.
"""

from __future__ import annotations

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
_BLOCKS = 16  # half-window blocks per tile (15 windows per tile)


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
    device = unit.device
    out = torch.empty(size, n_queries, n_docs, k, dtype=torch.float32, device=device)
    params = torch.tensor(
        [[mu, -0.5 / (sigma * sigma)] for mu, sigma in zip(mus, sigmas, strict=True)],
        dtype=torch.float32,
        device=device,
    )
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
        STRIDE_P=triton.next_power_of_2(stride),
        NB=_BLOCKS,
        STEP=_BLOCKS - 1,
        N_TILES=-(-n_windows // (_BLOCKS - 1)),
        DIM=unit.shape[1],
        R_P=max(16, triton.next_power_of_2(rows)),
        BLOCK_D=32,
        MIN_EXP=_MIN_EXPONENT,
        num_warps=4,
    )
    return out


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
    STRIDE_P: tl.constexpr,
    NB: tl.constexpr,
    STEP: tl.constexpr,
    N_TILES: tl.constexpr,
    DIM: tl.constexpr,
    R_P: tl.constexpr,
    BLOCK_D: tl.constexpr,
    MIN_EXP: tl.constexpr,
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
    slot_row = tl.arange(0, NB * STRIDE_P)
    block = slot_row // STRIDE_P
    slot = slot_row % STRIDE_P
    w_local = tl.arange(0, NB)
    t_col = tl.arange(0, NB)
    # window w = block w + block w + 1, as a (NB, NB) 0/1 matrix applied to the block sums
    shift = ((t_col[None, :] == w_local[:, None]) | (t_col[None, :] == w_local[:, None] + 1)).to(tl.float32)
    q_row = tl.arange(0, 2)
    kk = tl.arange(0, K_P)
    best = tl.full((2, K_P), float("-inf"), tl.float32)
    doc = (b * n_docs + j) * length
    for tile in range(N_TILES):
        t0 = tile * STEP
        pos = (t0 + block) * STRIDE + slot
        ok = (slot < STRIDE) & (pos < length)
        d_tok = tl.load(d_tok_ptr + doc + pos, mask=ok, other=0)
        d_surf = tl.load(d_surf_ptr + doc + pos, mask=ok, other=-2)
        d_real = d_tok != 0
        sim = tl.zeros((NB * STRIDE_P, R_P), dtype=tl.float32)
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
            sim = tl.dot(dv, tl.trans(qv), sim, input_precision="ieee")
        exact = (d_surf[:, None] == q_surf[None, :]) & d_real[:, None] & q_real[None, :]
        sim = tl.where(exact, 1.0, sim)
        w_ok = (w_local < STEP) & (t0 + w_local < n_windows)
        for k in tl.static_range(K):
            mu = tl.load(params_ptr + 2 * k)
            scale = tl.load(params_ptr + 2 * k + 1)
            diff = sim - mu
            arg = scale * diff * diff
            values = tl.where(d_real[:, None] & (arg >= MIN_EXP), tl.exp(arg), 0.0)
            blocks = tl.sum(tl.reshape(values, (NB, STRIDE_P, R_P)), axis=1)
            sums = tl.dot(shift, blocks, input_precision="ieee")
            logs = tl.log(tl.maximum(sums, eps)) * q_weight[None, :]
            for q in tl.static_range(N_Q):
                per_window = tl.sum(tl.where((group == q)[None, :], logs, 0.0), axis=1)
                top = tl.max(tl.where(w_ok, per_window, float("-inf")), axis=0)
                hit = (q_row == q)[:, None] & (kk == k)[None, :]
                best = tl.where(hit, tl.maximum(best, top), best)
    out = out_ptr + ((b * N_Q + q_row[:, None]) * n_docs + j) * K + kk[None, :]
    tl.store(out, best * log_scale, mask=(q_row < N_Q)[:, None] & (kk < K)[None, :])

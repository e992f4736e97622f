"""Fused Triton kernels for the windowed K-NRM pooling of the bilingual model.

They compute :func:`clir.rerankers.knrm.grid_kernel_pooling` for even windows (``window = 2 ·
stride``) of documents longer than one window, from token ids, for inference only
(:func:`fused_pooling_supported` says when), in two phases:

1. **Block sums** (one program per (pair, document view, tile of about ``blocks_per_tile``
   half-window blocks)). A tile's blocks are laid out in groups of ``group_rows`` rows (16:
   three blocks of 5 positions, where a block alone in 8 rows left 3 of 8 rows idle; the rows
   past a group's blocks are masked and read nothing). The program gathers the tile's unit
   vectors straight from the frozen table and computes the cosine similarities with every query
   term of every query view on the tensor cores as three bf16 products of the table's
   precomputed bf16 halves (``hi·hi + hi·lo + lo·hi``: about 16 bits of mantissa, similarities
   within about 1e-5; no per-tile split as ``tf32x3`` does; under bf16 autocast one product of
   the high halves, ``split=False``), sets exact surface matches to 1, and per RBF kernel makes
   every kernel value once (in the expanded form ``2^(p s² + a s)`` of
   :func:`~clir.rerankers.knrm._kernel_terms`, the ``p s²`` shared by the kernels of one width)
   and sums each block over its rows of the group. Only the block sums, (K, blocks, query
   terms) per document, reach memory: not the gathered vectors, the similarity matrix or the
   kernel values.
2. **Windows** (one program per (pair, document view)): a window is two neighbouring blocks,
   read back by pointer arithmetic (the shift that registers cannot do); their logs, the sums over
   each query's terms and, per kernel, the best window.

The PyTorch code is the fallback and the test oracle (``tests/test_fused_knrm.py``). Triton is
optional: without it (or without CUDA, unless ``TRITON_INTERPRET=1``) nothing here runs.
"""

from __future__ import annotations

import functools
import math
import os
import weakref
from typing import Any

import torch
from torch import Tensor

try:  # optional: the PyTorch path needs none of this
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - depends on the installation
    triton = None


def fused_pooling_supported(window: int, doc_length: int, device: torch.device, grad: bool) -> bool:
    """Whether :func:`fused_window_pooling` computes this pooling: Triton importable, a CUDA
    device (or Triton's interpreter), no autograd, an even window shorter than the documents,
    half-windows of at most 16 positions."""
    if triton is None or grad or window < 2 or window % 2 or doc_length <= window or window // 2 > 16:
        return False
    return device.type == "cuda" or _interpreting()


def _interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET") == "1"


def _kernel(fn: Any) -> Any:
    return triton.jit(fn) if triton is not None else fn


def _bf16_halves(unit: Tensor) -> tuple[Tensor, Tensor]:
    """``(hi, lo)``, bf16 with ``hi + lo`` about ``unit`` to 16 bits, made once per table (kept
    while ``unit`` lives and is not modified in place)."""
    key = id(unit)
    hit = _HALVES.get(key)
    if hit is not None and hit[0] == unit._version:
        return hit[1], hit[2]
    hi = unit.float().to(torch.bfloat16)
    lo = (unit.float() - hi.float()).to(torch.bfloat16)
    if hit is None:
        weakref.finalize(unit, _HALVES.pop, key, None)
    _HALVES[key] = (unit._version, hi, lo)
    return hi, lo


_HALVES: dict[int, tuple[int, Tensor, Tensor]] = {}


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
    blocks_per_tile: int = 8,
    block_d: int = 64,
    warps: int = 4,
    tiles_per_program: int = 1,
    group_rows: int = 16,
    split: bool = True,
) -> Tensor:
    """:func:`~clir.rerankers.knrm.grid_kernel_pooling` with windows, from token ids.

    Args:
        unit: (V, dim) unit-normalised table (row 0 zero), float32; its bf16 halves are made
            once per table (:func:`_bf16_halves`).
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
        blocks_per_tile: Half-window blocks per tile of phase 1.
        block_d: Vector dimensions per product step.
        warps: Warps per program.
        tiles_per_program: Tiles per program of phase 1; 0: one program per document runs both
            phases (a barrier between them).
        group_rows: Rows per group of blocks, a power of two of at least the stride (0: the
            stride rounded up, one block a group); a group holds ``group_rows // stride``
            blocks, so 16 rows hold three blocks of 5 where 8 rows hold one.
        split: Three bf16 products of the halves (about float32's accuracy); False: one product
            of the high halves (bf16's accuracy, as autocast gives).

    The defaults were the fastest on an H200 (README).

    Returns:
        Float32 (B, n_q, n_d, K).
    """
    size, rows = q_tokens.shape
    n_docs, length = d_tokens.shape[1], d_tokens.shape[2]
    stride = window // 2
    extra = (-(length - window)) % stride
    n_blocks = (length + extra) // stride
    n_windows = n_blocks - 1
    k = len(mus)
    slots = max(group_rows, triton.next_power_of_2(stride))
    per_group = slots // stride
    groups = max(-(-blocks_per_tile // per_group), 16 // slots)  # at least 16 rows a tile (tl.dot)
    n_groups = triton.next_power_of_2(groups)
    nb_t = n_groups * per_group
    n_tiles = -(-n_blocks // nb_t)
    per_program = tiles_per_program or n_tiles
    n_parts = -(-n_tiles // per_program)
    r_p = max(16, triton.next_power_of_2(rows))
    nw_t = min(64, max(16, triton.next_power_of_2(n_windows)))
    device = unit.device
    hi, lo = _bf16_halves(unit)
    out = torch.empty(size, n_queries, n_docs, k, dtype=torch.float32, device=device)
    nbp = n_parts * per_program * nb_t
    scratch = torch.empty(size * n_docs * k * nbp * r_p, dtype=torch.float32, device=device)
    params, expanded, shared = _block_params(tuple(mus), tuple(sigmas), device)
    tokens = (hi, lo, q_tokens.contiguous(), q_surface.contiguous(), rows, d_tokens.contiguous(),
              d_surface.contiguous(), n_docs, length, params, scratch)  # fmt: skip
    tile_shape = dict(K=k, STRIDE=stride, SLOTS=slots, NG_T=n_groups, PER_GROUP=per_group, NBP=nbp,
                      DIM=unit.shape[1], R_P=r_p, BLOCK_D=block_d, EXPANDED=expanded, SHARED=shared,
                      SPLIT=split, UPCAST=_interpreting())  # fmt: skip
    window_shape = dict(LQ=rows // n_queries, N_Q=n_queries, NQ_P=max(2, triton.next_power_of_2(n_queries)),
                        K_P=triton.next_power_of_2(k), NW_T=nw_t,
                        N_WCHUNKS=-(-n_windows // nw_t))  # fmt: skip
    if n_parts == 1:
        _block_kernel[(size, n_docs)](
            *tokens, out, n_windows, eps, log_scale, **tile_shape, **window_shape, N_TILES=n_tiles,
            num_warps=warps,
        )  # fmt: skip
    else:
        _tiles_kernel[(size, n_docs, n_parts)](*tokens, **tile_shape, TPP=per_program, num_warps=warps)
        _windows_kernel[(size, n_docs)](
            q_tokens.contiguous(), rows, n_docs, scratch, out, n_windows, eps, log_scale, K=k, NBP=nbp,
            R_P=r_p, **window_shape, num_warps=warps,
        )  # fmt: skip
    return out


@functools.lru_cache(maxsize=64)
def _block_params(
    mus: tuple[float, ...], sigmas: tuple[float, ...], device: torch.device
) -> tuple[Tensor, int, bool]:
    """The kernels' constants on ``device``: per kernel ``(m, p, a, factor)``, then a row holding
    the ``p`` that the kernels in expanded form share; a bit mask of those kernels, and whether
    they share one ``p``. Kernel ``k``'s value at similarity ``s`` is ``factor · 2^(p s² + a s)``
    in expanded form (as :func:`clir.rerankers.knrm._kernel_terms` computes it), else
    ``2^(p (s - m)²)``. Terms below ``exp(-85)``, which the PyTorch pooling drops, are kept:
    under ``factor`` each stays below ``e^-85``, nothing beside the ``eps`` floor of a window."""
    rows, expanded, ps = [], 0, set()
    for i, (mu, sigma) in enumerate(zip(mus, sigmas, strict=True)):
        scale = -0.5 / (sigma * sigma)
        offset = -scale * mu * mu
        if offset < 60.0 and abs(mu) <= 1.0:  # exp(scale s² - 2 scale mu s) · exp(-offset)
            rows.append([0.0, scale * _LOG2E, -2.0 * scale * mu * _LOG2E, math.exp(-offset)])
            expanded |= 1 << i
            ps.add(scale)
        else:
            rows.append([mu, scale * _LOG2E, 0.0, 1.0])
    rows.append([0.0, (min(ps) if ps else 0.0) * _LOG2E, 0.0, 0.0])
    return torch.tensor(rows, dtype=torch.float32, device=device), expanded, len(ps) <= 1


_LOG2E = 1.4426950408889634


@_kernel
def _tiles(
    hi_ptr, lo_ptr, q_tok_ptr, q_surf_ptr, rows, d_tok_ptr, d_surf_ptr, n_docs, length, params_ptr,
    scratch_ptr, first, count,
    K: tl.constexpr, STRIDE: tl.constexpr, SLOTS: tl.constexpr, NG_T: tl.constexpr,
    PER_GROUP: tl.constexpr, NBP: tl.constexpr, DIM: tl.constexpr, R_P: tl.constexpr, BLOCK_D: tl.constexpr,
    EXPANDED: tl.constexpr, SHARED: tl.constexpr, SPLIT: tl.constexpr, UPCAST: tl.constexpr,
):  # fmt: skip
    """Phase 1: the block sums of tiles ``first .. first + count - 1`` of one (pair, document)."""
    b = tl.program_id(0)
    j = tl.program_id(1)
    prog = b * n_docs + j
    r = tl.arange(0, R_P)
    r_ok = r < rows
    q_tok = tl.load(q_tok_ptr + b * rows + r, mask=r_ok, other=0)
    q_surf = tl.load(q_surf_ptr + b * rows + r, mask=r_ok, other=-1)
    q_real = q_tok != 0
    TROWS: tl.constexpr = NG_T * SLOTS
    t = tl.arange(0, TROWS)
    slot = t % SLOTS
    in_group = slot // STRIDE  # which block of its group a row holds (PER_GROUP: none)
    slot3 = (tl.arange(0, SLOTS) // STRIDE)[None, :, None]
    g = tl.arange(0, NG_T)
    scratch = scratch_ptr + prog * (K * NBP * R_P)
    doc = prog * length
    for step in tl.range(count, num_stages=1):  # pipelined tiles were slower (register pressure)
        tile = first + step
        pos = ((tile * NG_T + t // SLOTS) * PER_GROUP) * STRIDE + slot
        ok = (in_group < PER_GROUP) & (pos < length)
        d_tok = tl.load(d_tok_ptr + doc + pos, mask=ok, other=0)
        d_surf = tl.load(d_surf_ptr + doc + pos, mask=ok, other=-2)
        d_real = d_tok != 0
        sim = tl.zeros((TROWS, R_P), dtype=tl.float32)
        for c in tl.static_range(0, DIM, BLOCK_D):
            cols = c + tl.arange(0, BLOCK_D)
            c_ok = cols < DIM
            d_at = d_tok[:, None] * DIM + cols[None, :]
            d_ok = d_real[:, None] & c_ok[None, :]
            q_at = q_tok[:, None] * DIM + cols[None, :]
            q_ok = q_real[:, None] & c_ok[None, :]
            dh = tl.load(hi_ptr + d_at, mask=d_ok, other=0.0)
            qh = tl.trans(tl.load(hi_ptr + q_at, mask=q_ok, other=0.0))
            if UPCAST:  # Triton's interpreter multiplies bf16 wrongly: the same values in float32
                dh, qh = dh.to(tl.float32), qh.to(tl.float32)
            sim = tl.dot(dh, qh, sim)
            if SPLIT:
                dl = tl.load(lo_ptr + d_at, mask=d_ok, other=0.0)
                ql = tl.trans(tl.load(lo_ptr + q_at, mask=q_ok, other=0.0))
                if UPCAST:
                    dl, ql = dl.to(tl.float32), ql.to(tl.float32)
                sim = tl.dot(dh, ql, sim)
                sim = tl.dot(dl, qh, sim)
        exact = (d_surf[:, None] == q_surf[None, :]) & d_real[:, None] & q_real[None, :]
        sim = tl.where(exact, 1.0, sim)
        sim = tl.where(d_real[:, None], sim, -1.0e4)  # padding: every kernel value 0
        sim3 = tl.reshape(sim, (NG_T, SLOTS, R_P))
        if SHARED:
            base = sim3 * sim3 * tl.load(params_ptr + 4 * K + 1)  # the p all expanded kernels share
        block = (tile * NG_T + g) * PER_GROUP  # each group's first block
        for k in tl.static_range(K):
            p = tl.load(params_ptr + 4 * k + 1)
            if (EXPANDED >> k) & 1:
                a = tl.load(params_ptr + 4 * k + 2)
                if SHARED:  # noqa: SIM108 - a branch taken when compiling, not a value
                    arg = base + a * sim3
                else:
                    arg = (p * sim3 + a) * sim3
            else:
                diff = sim3 - tl.load(params_ptr + 4 * k)
                arg = p * diff * diff
            values = tl.exp2(arg)
            factor = tl.load(params_ptr + 4 * k + 3)
            for i in tl.static_range(PER_GROUP):
                if PER_GROUP == 1:
                    sums = tl.sum(values, axis=1)
                else:
                    sums = tl.sum(tl.where(slot3 == i, values, 0.0), axis=1)
                at = scratch + (k * NBP + block[:, None] + i) * R_P + r[None, :]
                tl.store(at, sums * factor)


@_kernel
def _windows(
    q_tok_ptr, rows, n_docs, scratch_ptr, out_ptr, n_windows, eps, log_scale,
    K: tl.constexpr, NBP: tl.constexpr, R_P: tl.constexpr, LQ: tl.constexpr, N_Q: tl.constexpr,
    NQ_P: tl.constexpr, K_P: tl.constexpr, NW_T: tl.constexpr, N_WCHUNKS: tl.constexpr,
):  # fmt: skip
    """Phase 2: per kernel, the windows (two neighbouring blocks, read by pointer arithmetic: the
    shift that registers cannot do), their logs, the sums over each query's terms, the best."""
    b = tl.program_id(0)
    j = tl.program_id(1)
    prog = b * n_docs + j
    r = tl.arange(0, R_P)
    q_weight = (tl.load(q_tok_ptr + b * rows + r, mask=r < rows, other=0) != 0).to(tl.float32)
    group = r // LQ
    scratch = scratch_ptr + prog * (K * NBP * R_P)
    q_row = tl.arange(0, NQ_P)
    kk = tl.arange(0, K_P)
    w_local = tl.arange(0, NW_T)
    best = tl.full((NQ_P, K_P), float("-inf"), tl.float32)
    for k in tl.static_range(K):
        for chunk in range(N_WCHUNKS):
            w = chunk * NW_T + w_local
            w_ok = w < n_windows
            at = scratch + (k * NBP + w[:, None]) * R_P + r[None, :]
            sums = tl.load(at, mask=w_ok[:, None], other=1.0)
            sums += tl.load(at + R_P, mask=w_ok[:, None], other=1.0)
            logs = tl.log(tl.maximum(sums, eps)) * q_weight[None, :]
            for q in tl.static_range(N_Q):
                per_window = tl.sum(tl.where((group == q)[None, :], logs, 0.0), axis=1)
                top = tl.max(tl.where(w_ok, per_window, float("-inf")), axis=0)
                hit = (q_row == q)[:, None] & (kk == k)[None, :]
                best = tl.where(hit, tl.maximum(best, top), best)
    out = out_ptr + ((b * N_Q + q_row[:, None]) * n_docs + j) * K + kk[None, :]
    tl.store(out, best * log_scale, mask=(q_row < N_Q)[:, None] & (kk < K)[None, :])


@_kernel
def _block_kernel(
    hi_ptr, lo_ptr, q_tok_ptr, q_surf_ptr, rows, d_tok_ptr, d_surf_ptr, n_docs, length, params_ptr,
    scratch_ptr, out_ptr, n_windows, eps, log_scale,
    K: tl.constexpr, STRIDE: tl.constexpr, SLOTS: tl.constexpr, NG_T: tl.constexpr,
    PER_GROUP: tl.constexpr, NBP: tl.constexpr, DIM: tl.constexpr, R_P: tl.constexpr, BLOCK_D: tl.constexpr,
    EXPANDED: tl.constexpr, SHARED: tl.constexpr, SPLIT: tl.constexpr, UPCAST: tl.constexpr, LQ: tl.constexpr,
    N_Q: tl.constexpr, NQ_P: tl.constexpr, K_P: tl.constexpr, NW_T: tl.constexpr, N_WCHUNKS: tl.constexpr,
    N_TILES: tl.constexpr,
):  # fmt: skip
    """Both phases in one program per (pair, document), a barrier between them."""
    _tiles(hi_ptr, lo_ptr, q_tok_ptr, q_surf_ptr, rows, d_tok_ptr, d_surf_ptr, n_docs, length, params_ptr,
           scratch_ptr, 0, N_TILES, K, STRIDE, SLOTS, NG_T, PER_GROUP, NBP, DIM, R_P, BLOCK_D, EXPANDED,
           SHARED, SPLIT, UPCAST)  # fmt: skip
    tl.debug_barrier()
    _windows(q_tok_ptr, rows, n_docs, scratch_ptr, out_ptr, n_windows, eps, log_scale, K, NBP, R_P, LQ, N_Q,
             NQ_P, K_P, NW_T, N_WCHUNKS)  # fmt: skip


@_kernel
def _tiles_kernel(
    hi_ptr, lo_ptr, q_tok_ptr, q_surf_ptr, rows, d_tok_ptr, d_surf_ptr, n_docs, length, params_ptr,
    scratch_ptr,
    K: tl.constexpr, STRIDE: tl.constexpr, SLOTS: tl.constexpr, NG_T: tl.constexpr,
    PER_GROUP: tl.constexpr, NBP: tl.constexpr, DIM: tl.constexpr, R_P: tl.constexpr, BLOCK_D: tl.constexpr,
    EXPANDED: tl.constexpr, SHARED: tl.constexpr, SPLIT: tl.constexpr, UPCAST: tl.constexpr,
    TPP: tl.constexpr,
):  # fmt: skip
    """Phase 1 alone, ``TPP`` tiles per program (axis 2 of the grid)."""
    _tiles(hi_ptr, lo_ptr, q_tok_ptr, q_surf_ptr, rows, d_tok_ptr, d_surf_ptr, n_docs, length, params_ptr,
           scratch_ptr, tl.program_id(2) * TPP, TPP, K, STRIDE, SLOTS, NG_T, PER_GROUP, NBP, DIM, R_P,
           BLOCK_D, EXPANDED, SHARED, SPLIT, UPCAST)  # fmt: skip


@_kernel
def _windows_kernel(
    q_tok_ptr, rows, n_docs, scratch_ptr, out_ptr, n_windows, eps, log_scale,
    K: tl.constexpr, NBP: tl.constexpr, R_P: tl.constexpr, LQ: tl.constexpr, N_Q: tl.constexpr,
    NQ_P: tl.constexpr, K_P: tl.constexpr, NW_T: tl.constexpr, N_WCHUNKS: tl.constexpr,
):  # fmt: skip
    """Phase 2 alone."""
    _windows(q_tok_ptr, rows, n_docs, scratch_ptr, out_ptr, n_windows, eps, log_scale, K, NBP, R_P, LQ, N_Q,
             NQ_P, K_P, NW_T, N_WCHUNKS)  # fmt: skip

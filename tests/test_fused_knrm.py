"""The fused Triton K-NRM pooling against the PyTorch pooling it replaces (its oracle).

The kernel tests need Triton and CUDA, or Triton's interpreter (``TRITON_INTERPRET=1``, on a
CPU). Where Triton is installed (the ``dev`` extra on Linux x86-64) but there is no CUDA, one test
runs this file again in a fresh process under the interpreter, which must be set before the
kernels are defined. The bf16 halves of the table are plain torch and always run.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from clir.rerankers import fused_knrm
from clir.rerankers.encoding import EncodedView, FrozenEmbedding
from clir.rerankers.knrm import KNRM

fused_runs = pytest.mark.skipif(
    fused_knrm.triton is None or not (torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1"),
    reason="needs Triton and CUDA (or TRITON_INTERPRET=1)",
)


@pytest.mark.skipif(
    fused_knrm.triton is None or torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1",
    reason="runs the kernel tests under Triton's interpreter where Triton is installed and CUDA is not",
)
def test_the_kernels_under_tritons_interpreter():
    env = {**os.environ, "TRITON_INTERPRET": "1"}
    argv = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", __file__, "-k", "not interpreter"]
    done = subprocess.run(argv, env=env, capture_output=True, text=True, timeout=600)
    summary = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr[-2000:]
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    assert "passed" in summary and "skipped" not in summary and "failed" not in summary, summary


def _device() -> torch.device:
    return torch.device("cuda" if torch.cuda.is_available() else "cpu")


@fused_runs
@pytest.mark.parametrize(
    ("window", "q_len", "n_q", "d_len", "dim", "n_docs"),
    [
        (10, 5, 2, 37, 20, 2),
        (4, 8, 2, 23, 33, 1),
        (12, 20, 2, 61, 16, 2),
        (10, 8, 2, 150, 300, 2),  # the default model's shape at the anchor's dimension
        (2, 3, 1, 9, 8, 1),  # blocks of one position, one query view
        (32, 4, 3, 100, 24, 2),  # the largest half-window (16), three query views
        (10, 8, 2, 501, 64, 2),  # more windows than one chunk of phase 2
    ],
)
@pytest.mark.parametrize(
    ("tiles_per_program", "group_rows"),  # 0: one program per document, both phases
    [(0, 0), (1, 0), (1, 16), (2, 32)],  # 16 rows: 3 blocks of 5, 8 of 2, 2 of 6, one of 16, ...
)
def test_fused_kernel_matches_the_pytorch_pooling(
    window, q_len, n_q, d_len, dim, n_docs, tiles_per_program, group_rows
):
    device = _device()
    gen = torch.Generator().manual_seed(window + d_len)
    table = FrozenEmbedding(torch.randn(50, dim, generator=gen)).to(device)
    q = torch.randint(1, 50, (3, n_q * q_len), generator=gen)
    q[:, q_len - min(2, q_len - 1) : q_len] = 0  # padded query terms
    d = torch.randint(1, 50, (3, n_docs, d_len), generator=gen)
    d[:, :, d_len - 7 :] = 0
    d[1, 0, 3:] = 0  # a document shorter than a window
    d[2, -1, :] = 0  # an empty document
    q_surface, d_surface = q % 17, d % 17  # surfaces shared across rows: exact matches happen
    q, q_surface, d, d_surface = (t.to(device) for t in (q, q_surface, d, d_surface))
    knrm = KNRM(dim, window=window)
    query = EncodedView.encode(table, q, q_surface)
    docs = [EncodedView.encode(table, d[:, i], d_surface[:, i]) for i in range(n_docs)]
    reference = knrm.grid_features(query, docs, n_q)
    assert fused_knrm.fused_pooling_supported(window, d_len, device, grad=False)
    fused = fused_knrm.fused_window_pooling(
        table.unit, q, q_surface, d, d_surface, n_q, knrm.mus, knrm.sigmas, knrm.eps, knrm.log_scale, window,
        tiles_per_program=tiles_per_program, group_rows=group_rows,
    )  # fmt: skip
    assert fused.shape == reference.shape
    assert torch.isfinite(fused).all()
    assert float((fused - reference).norm() / reference.norm()) < 1e-4
    torch.testing.assert_close(fused, reference, rtol=1e-3, atol=2e-5)


@fused_runs
def test_fused_kernel_near_duplicate_vectors():
    """Distinct words whose vectors nearly coincide sit on the steep side of the exact-match
    kernel (sigma 0.001): the bf16 halves keep the similarity to about 1e-5 there."""
    device = _device()
    gen = torch.Generator().manual_seed(3)
    base = torch.randn(10, 64, generator=gen)
    near = base + 1e-3 * torch.randn(10, 64, generator=gen)  # cosines of 0.999-0.99999
    table = FrozenEmbedding(torch.cat([torch.zeros(1, 64), base, near])).to(device)
    q = torch.arange(1, 9).repeat(2, 2).to(device)  # words 1-8, twice
    d = (torch.arange(11, 21).repeat(2, 2, 3)[:, :, :24]).to(device)  # their near twins
    knrm = KNRM(64, window=6)
    query = EncodedView.encode(table, q, q)
    docs = [EncodedView.encode(table, d[:, i], d[:, i]) for i in range(2)]
    reference = knrm.grid_features(query, docs, 2)
    fused = fused_knrm.fused_window_pooling(
        table.unit, q, q, d, d, 2, knrm.mus, knrm.sigmas, knrm.eps, knrm.log_scale, 6
    )
    assert float((fused - reference).norm() / reference.norm()) < 1e-3


@fused_runs
def test_one_bf16_product_is_the_pooling_of_the_bf16_table():
    """``split=False`` multiplies the high halves alone: the pooling of the table rounded to bf16
    (to float32's accuracy there), which differs from the table's own pooling."""
    device = _device()
    gen = torch.Generator().manual_seed(5)
    table = FrozenEmbedding(torch.randn(60, 48, generator=gen)).to(device)
    q = torch.randint(1, 60, (4, 16), generator=gen).to(device)
    d = torch.randint(1, 60, (4, 2, 70), generator=gen).to(device)
    knrm = KNRM(48, window=10)
    args = (2, knrm.mus, knrm.sigmas, knrm.eps, knrm.log_scale, 10)
    one = fused_knrm.fused_window_pooling(table.unit, q, q, d, d, *args, split=False, group_rows=16)
    three = fused_knrm.fused_window_pooling(table.unit, q, q, d, d, *args)
    table.unit = table.unit.to(torch.bfloat16).float()
    query = EncodedView.encode(table, q, q)
    rounded = knrm.grid_features(query, [EncodedView.encode(table, d[:, i], d[:, i]) for i in range(2)], 2)
    error = float((one - rounded).norm() / rounded.norm())
    assert error < 1e-5
    assert float((three - rounded).norm() / rounded.norm()) > 10 * error


def test_bf16_halves_sum_to_the_table_and_follow_its_changes():
    gen = torch.Generator().manual_seed(1)
    unit = torch.nn.functional.normalize(torch.randn(40, 30, generator=gen), dim=1)
    hi, lo = fused_knrm._bf16_halves(unit)
    assert hi.dtype == lo.dtype == torch.bfloat16
    assert float((hi.float() + lo.float() - unit).abs().max()) < 2e-5
    assert float((hi.float() - unit).abs().max()) > 1e-4  # hi alone is coarser: lo carries the rest
    again = fused_knrm._bf16_halves(unit)
    assert again[0] is hi and again[1] is lo  # made once per table
    unit.mul_(-1.0)  # changed in place: made anew
    hi2, lo2 = fused_knrm._bf16_halves(unit)
    torch.testing.assert_close(hi2.float() + lo2.float(), unit, rtol=0, atol=2e-5)
    key = id(unit)
    del unit, hi, lo, again, hi2, lo2
    assert key not in fused_knrm._HALVES  # dropped with the table

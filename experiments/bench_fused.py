"""The fused K-NRM pooling kernels against PyTorch, pooling alone, on one CUDA device.

Times :func:`clir.rerankers.fused_knrm.fused_window_pooling` (from token ids to the (B, n_q,
n_d, K) features: gather, similarities, RBF kernels, windows, logs, best window) against the
PyTorch pooling of the same ids (:meth:`KNRM.grid_features` after the embedding lookup, eager
fp32, ``torch.compile`` fp32 and ``torch.compile`` under bf16 autocast), on random batches of
two query views of ``--query-length`` terms and two document views, the bilingual model's
shape. Prints JSON: pairs per second (``triton.testing.do_bench``, median), the relative error
of each variant against eager fp32, sizes beside every figure, and the embedding-gather
floor (the document vectors read once, fp32, by ``index_select``).

    python experiments/bench_fused.py --dim 300 --vocab 100000 --doc-lengths 150,500
"""

from __future__ import annotations

import argparse
import json
import sys
import time

import torch

from clir.rerankers import fused_knrm
from clir.rerankers.encoding import EncodedView, FrozenEmbedding
from clir.rerankers.knrm import KNRM


def time_length(args, table, knrm, torch_pooling, compiled, q, d) -> dict:
    """Every variant on one batch of documents of one length (surfaces = ids)."""
    from triton.testing import do_bench

    runs: dict = {}
    pooling_args = (2, knrm.mus, knrm.sigmas, knrm.eps, knrm.log_scale, args.window)
    reference = torch_pooling(q, q, d, d)
    variants = {"eager_fp32": lambda: torch_pooling(q, q, d, d)}
    if compiled is not None:
        variants["compiled_fp32"] = lambda: compiled(q, q, d, d)

        def bf16():
            with torch.autocast("cuda", dtype=torch.bfloat16):
                return compiled(q, q, d, d)

        variants["compiled_bf16"] = bf16

    def fused(**kw):
        return fused_knrm.fused_window_pooling(table.unit, q, q, d, d, *pooling_args, **kw)

    variants["fused"] = fused
    variants["fused_bf16"] = lambda: fused(split=False)  # one bf16 product: compiled bf16's peer
    if args.sweep:
        settings = [
            {"group_rows": 8}, {"group_rows": 16}, {"group_rows": 32},
            {"group_rows": 16, "blocks_per_tile": 16},
            {"group_rows": 16, "warps": 8}, {"group_rows": 16, "tiles_per_program": 2},
            {"group_rows": 16, "block_d": 32}, {"tiles_per_program": 0}, {"blocks_per_tile": 16, "warps": 8},
            {"split": False, "group_rows": 8}, {"split": False, "group_rows": 16},
            {"split": False, "group_rows": 16, "blocks_per_tile": 16}, {"split": False, "group_rows": 32},
            {"split": False, "group_rows": 16, "block_d": 128},
        ]  # fmt: skip
        for kw in settings:
            name = "fused/" + "/".join(f"{k}={v}" for k, v in kw.items())
            variants[name] = lambda kw=kw: fused(**kw)
    for name, fn in variants.items():
        try:
            out = fn()
            ms = do_bench(fn, warmup=50, rep=300)
        except Exception as error:  # a tile setting that does not compile: say so, go on
            runs[name] = {"error": f"{type(error).__name__}: {str(error)[:200]}"}
            continue
        record = {"ms": round(ms, 4), "pairs_per_second": round(args.batch / ms * 1e3)}
        if name != "eager_fp32":
            record["relative_error"] = float((out.float() - reference).norm() / reference.norm())
        runs[name] = record
        print(f"d{d.shape[2]} {name}: {record}", file=sys.stderr, flush=True)
    rows = d.reshape(-1)
    floor = do_bench(lambda: table.unit.index_select(0, rows), warmup=50, rep=300)
    runs["gather_floor"] = {"ms": round(floor, 4), "pairs_per_second": round(args.batch / floor * 1e3)}
    return runs


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--dim", type=int, default=300)
    parser.add_argument("--vocab", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=4096)
    parser.add_argument("--query-length", type=int, default=8)
    parser.add_argument("--doc-lengths", default="150,500")
    parser.add_argument("--window", type=int, default=10)
    parser.add_argument("--sweep", action="store_true", help="also time the blocks kernel's tile settings")
    parser.add_argument("--no-compile", action="store_true")
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    if not torch.cuda.is_available() or fused_knrm.triton is None:
        parser.error("the benchmark needs a CUDA device and Triton")
    gen = torch.Generator().manual_seed(0)
    table = FrozenEmbedding(torch.randn(args.vocab, args.dim, generator=gen)).cuda()
    knrm = KNRM(args.dim, window=args.window).cuda()
    result: dict = {"gpu": torch.cuda.get_device_name(), "torch": torch.__version__, "dim": args.dim,
                    "vocab": args.vocab, "batch": args.batch, "query_length": args.query_length,
                    "window": args.window, "date": time.strftime("%Y-%m-%d"), "runs": {}}  # fmt: skip

    def torch_pooling(q, qs, d, ds):
        query = EncodedView.encode(table, q, qs)
        docs = [EncodedView.encode(table, d[:, i], ds[:, i]) for i in range(d.shape[1])]
        return knrm.grid_features(query, docs, 2)

    compiled = None if args.no_compile else torch.compile(torch_pooling, dynamic=False)
    for length in (int(x) for x in args.doc_lengths.split(",")):
        q = torch.randint(1, args.vocab, (args.batch, 2 * args.query_length), generator=gen).cuda()
        d = torch.randint(1, args.vocab, (args.batch, 2, length), generator=gen).cuda()
        d[:, :, length - length // 10 :] = 0  # some padding, as in real batches
        with torch.inference_mode():
            result["runs"][f"d{length}"] = time_length(args, table, knrm, torch_pooling, compiled, q, d)
    text = json.dumps(result, indent=2)
    print(text)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            f.write(text + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

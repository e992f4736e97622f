"""The Ray engine against the local one on a CPU-bound rerank job: throughput and identity.

Prints one JSON object. The job is ``rerank()`` of ``--queries`` × ``--depth`` candidates of a
SYNTHETIC collection (bench_rerank.py's: random words and vectors, 6,220 passages of
``--doc-length`` tokens) by the default reranker (reranker-knrm.yaml, untrained: speed does not
depend on the weights), on the CPU in batches of 256 pairs. Engines: ``local`` (this process,
torch with ``--threads`` threads), ``ray-1`` and ``ray-2`` (the local Ray instance of 2 CPUs
that ``--engine ray --workers 2`` starts, the pairs cut into 1 or 2 chunks of whole batches, one
task of one CPU each: Ray sets one torch thread per worker). Each engine runs the job once to
warm up, then ``--repeats`` times; the best time counts. Every engine's run must equal the local
one's exactly. The machine's load average is recorded: other work on the cores skews it all.

    flock /tmp/clir-heavy.lock python experiments/bench_engine.py --queries 100
"""

from __future__ import annotations

import argparse
import json
import os
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch
from bench_rerank import RandomSpace, synthetic_data

from clir.pipeline.engine import LocalEngine, RayEngine
from clir.pipeline.parallel import pair_scorer
from clir.training import ScoringOptions, TrainedReranker, load_config, rerank
from clir.training.trainer import build_reranker


def _threads(shared: None, chunk: list[int]) -> list[int]:
    return [torch.get_num_threads() for _ in chunk]


def time_engine(engine: Any, job: dict[str, Any], repeats: int) -> tuple[dict[str, Any], Any]:
    """Best seconds of ``repeats`` runs of the job on ``engine`` (after a warm-up) and its run."""
    scorer = pair_scorer(engine)
    run = rerank(**job, scorer=scorer)  # warm-up: workers start, import torch, receive the model
    seconds = []
    for _ in range(repeats):
        start = time.perf_counter()
        run = rerank(**job, scorer=scorer)
        seconds.append(time.perf_counter() - start)
    pairs = sum(len(q.docnos) for q in job["data"].queries)
    best = min(seconds)
    return {"seconds": [round(s, 2) for s in seconds], "pairs_per_second": round(pairs / best)}, run


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--queries", type=int, default=100)
    parser.add_argument("--depth", type=int, default=1000)
    parser.add_argument("--docs", type=int, default=6220)
    parser.add_argument("--doc-length", type=int, default=150)
    parser.add_argument("--query-length", type=int, default=8)
    parser.add_argument("--dim", type=int, default=100)
    parser.add_argument("--vocab", type=int, default=50_000)
    parser.add_argument("--threads", type=int, default=2, help="torch threads of the local engine")
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the JSON here")
    args = parser.parse_args()

    config = load_config(Path(__file__).resolve().parents[1] / "configs" / "reranker-knrm.yaml")
    config.data.depth = args.depth
    config.data.max_doc_len = max(config.data.max_doc_len, args.doc_length)
    data, run = synthetic_data(
        args.queries, args.depth, args.docs, args.doc_length, args.query_length, args.vocab, args.seed
    )
    member = TrainedReranker(
        build_reranker(config, np.zeros((2, args.dim), np.float32), 2, seed=0), config, ["f1", "f2"]
    )
    job = {
        "models": [member],
        "data": data,
        "space": RandomSpace(args.vocab, args.dim, args.seed),
        "run": run,
        "options": ScoringOptions("cpu"),
    }
    out: dict[str, Any] = {
        "job": "rerank() of a synthetic collection by reranker-knrm.yaml (untrained), CPU, fp32",
        "date": time.strftime("%Y-%m-%d"),
        "cpus": os.cpu_count(),
        "queries": args.queries,
        "depth": args.depth,
        "pairs": args.queries * args.depth,
        "docs": args.docs,
        "doc_length": args.doc_length,
        "dim": args.dim,
        "engines": {},
    }
    torch.set_num_threads(args.threads)
    out["engines"]["local"], reference = time_engine(LocalEngine(), job, args.repeats)
    out["engines"]["local"]["torch_threads"] = args.threads
    identical = True
    with RayEngine(workers=2) as two:  # a local instance of 2 CPUs, as `--engine ray --workers 2`
        for engine in (RayEngine(workers=1), two):  # the first reuses the instance
            record, reranked = time_engine(engine, job, args.repeats)
            threads = engine.map(_threads, list(range(engine.workers)))
            record["torch_threads_per_worker"] = sorted({n for part in threads for n in part})
            out["engines"][f"ray-{engine.workers}"] = record
            identical &= reranked == reference
    engines = out["engines"]
    out["identical_runs"] = identical
    out["speedup_ray2_over_ray1"] = round(
        engines["ray-2"]["pairs_per_second"] / engines["ray-1"]["pairs_per_second"], 2
    )
    out["speedup_ray2_over_local"] = round(
        engines["ray-2"]["pairs_per_second"] / engines["local"]["pairs_per_second"], 2
    )
    out["target_met"] = out["speedup_ray2_over_ray1"] >= 1.6 and identical
    out["load_average_at_end"] = [round(x, 2) for x in os.getloadavg()]  # others' work shares the cores
    text = json.dumps(out, indent=2)
    print(text)
    if args.json is not None:
        args.json.write_text(text + "\n")


if __name__ == "__main__":
    main()

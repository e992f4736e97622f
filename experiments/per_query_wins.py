"""Where one system beats another, query by query: wins, losses and ties in AP, bucketed by how
well the reference system already ranked the relevant passage.

Reads a finished ``clir experiment`` directory (its ``steps/index.json``, the rerank steps' runs
and each pair's test qrels) and prints JSON per pair: wins / losses / ties of ``--system`` against
``--reference``, and per bucket of the reference's AP (1: ranked first; 0.1-1; below 0.1, which
includes passages missing from the candidates) the number of queries, the mean AP difference and
the wins and losses.

    python experiments/per_query_wins.py runs/default --reference lexical-fusion --system full
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from clir.evaluation import evaluate_per_query
from clir.formats import read_qrels, read_run

BUCKETS = {"ranked first (AP 1)": (0.999, 2.0), "AP 0.1-1": (0.1, 0.999), "AP < 0.1": (-1.0, 0.1)}
TIE = 1e-9


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("experiment", type=Path, help="a finished clir experiment directory")
    parser.add_argument("--reference", default="lexical-fusion")
    parser.add_argument("--system", default="full")
    parser.add_argument("--split", default="test")
    args = parser.parse_args()
    index = json.loads((args.experiment / "steps" / "index.json").read_text())
    report = {}
    for step in sorted(name for name in index if name.startswith("rerank-")):
        pair = step.removeprefix("rerank-")
        runs = args.experiment / "steps" / index[step] / "runs"
        qrels = read_qrels(
            args.experiment / "steps" / index[f"collection-{pair}"] / "collection" / f"qrels.{args.split}.txt"
        )
        ap = {}
        for name in (args.reference, args.system):
            scores = evaluate_per_query(read_run(runs / f"{name}.run"), qrels, ["AP"])["AP"]
            ap[name] = np.array([scores[q] for q in sorted(scores)])
        ref, diff = ap[args.reference], ap[args.system] - ap[args.reference]
        row = {
            "wins": int((diff > TIE).sum()),
            "losses": int((diff < -TIE).sum()),
            "ties": int((abs(diff) <= TIE).sum()),
        }
        for bucket, (lo, hi) in BUCKETS.items():
            mask = (ref >= lo) & (ref < hi)
            row[bucket] = {
                "queries": int(mask.sum()),
                "mean_diff": round(float(diff[mask].mean()), 4) if mask.any() else None,
                "wins": int((diff[mask] > TIE).sum()),
                "losses": int((diff[mask] < -TIE).sum()),
            }
        report[pair] = row
    print(json.dumps({"reference": args.reference, "system": args.system, "pairs": report}, indent=2))


if __name__ == "__main__":
    main()

"""Effectiveness against collection size: a markdown table and a plot from bench_scale.py's JSON
files and (optionally) reranked run files of the padded collections.

    python experiments/scale_table.py --bench 4137=b4k.json 104137=b100k.json \
        --runs full:104137=full-100k.run --qrels data/en-sw/qrels.test.txt --plot docs/scale_map.png
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from clir.evaluation import evaluate
from clir.formats import read_qrels, read_run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", nargs="+", default=[], help="DOCS=bench_scale.json ...")
    parser.add_argument("--runs", nargs="*", default=[], help="SYSTEM:DOCS=run file ...")
    parser.add_argument("--qrels", type=Path, help="qrels of the test queries (for --runs)")
    parser.add_argument("--measure", default="AP")
    parser.add_argument("--plot", type=Path, help="write a PNG plot here")
    args = parser.parse_args()
    table: dict[str, dict[int, float]] = {}
    for item in args.bench:
        size, path = item.split("=", 1)
        for name, result in json.loads(Path(path).read_text())["systems"].items():
            table.setdefault(name, {})[int(size)] = result["test"][args.measure]
    qrels = read_qrels(args.qrels) if args.runs else {}
    for item in args.runs:
        key, path = item.split("=", 1)
        name, size = key.split(":")
        # every query of the qrels, one the run does not list counting 0 (as bench_scale.py's rows
        # count): only the run's own queries had been evaluated, raising its mean
        run = {q: docs for q, docs in read_run(path).items() if q in qrels}
        table.setdefault(name, {})[int(size)] = evaluate(run, qrels, [args.measure])[args.measure]
    sizes = sorted({s for row in table.values() for s in row})
    print(f"| {args.measure} (en-sw test) | " + " | ".join(f"{s:,} docs" for s in sizes) + " |")
    print("| --- |" + " ---: |" * len(sizes))
    for name, row in table.items():
        print(f"| {name} | " + " | ".join(f"{row[s]:.4f}" if s in row else "" for s in sizes) + " |")
    if args.plot:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(6, 4))
        for name, row in table.items():
            xs = sorted(row)
            ax.plot(xs, [row[x] for x in xs], marker="o", label=name)
        ax.set_xscale("log")
        ax.set_xlabel("documents (4,137 passages + distractors)")
        ax.set_ylabel(f"{args.measure}, en-sw test queries")
        ax.grid(alpha=0.3)
        ax.legend()
        fig.tight_layout()
        fig.savefig(args.plot, dpi=120)


if __name__ == "__main__":
    main()

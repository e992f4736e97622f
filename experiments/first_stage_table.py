"""The lexical baselines table: {QT, PSQ, DT} x {BM25, QL} on the en-sw and en-tl test queries.

Usage: python experiments/first_stage_table.py [--pairs en-sw en-tl] [--out runs/first-stage]
[--spelling 0.5|off] (spelling-variant matching of query terms outside the index; default 0.5).
Builds the collections under data/ when missing, then prints one Markdown table per pair.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from clir.datasets import Collection, build_bible_collection
from clir.evaluation import DEFAULT_MEASURES, markdown_table
from clir.pipeline.baselines import BaselineConfig, run_baselines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--pairs", nargs="+", default=["en-sw", "en-tl"])
    parser.add_argument("--data", type=Path, default=Path("data"))
    parser.add_argument("--out", type=Path, default=Path("runs/first-stage"))
    parser.add_argument("--spelling", type=lambda v: None if v == "off" else float(v), default=0.5)
    args = parser.parse_args()
    for pair in args.pairs:
        directory = args.data / pair
        if (directory / "collection.json").is_file():
            collection = Collection.load(directory)
        else:
            collection = build_bible_collection(pair, out=directory)
        config = BaselineConfig(spelling=args.spelling)
        results = run_baselines(collection, args.out / pair, config, progress=False)
        print(f"\n{pair} ({len(collection.split('test'))} test queries)\n")
        print(markdown_table(results, list(DEFAULT_MEASURES)))


if __name__ == "__main__":
    main()

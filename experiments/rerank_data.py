"""A rerank data step's splits with other candidate or query settings (issue 13's levers).

Builds what ``clir experiment``'s ``data-<pair>`` step builds (the union of the config's first
stages, every feature computed exactly for every candidate), with ``data.depth`` or
``data.qt_k`` replaced, into ``OUT`` (:func:`clir.pipeline.experiment.write_rerank_data`);
prints, per split, the candidates' recall and number a query (``candidates_oof.candidate_stats``).
With neither replaced it reproduces the step byte for byte (checked on `make run`'s en-sw step).
Feed ``OUT`` to ``oof_seeds.py run --data``:

    python experiments/rerank_data.py --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --tables runs/default/steps/tables-en-sw-<hash> --depth 150 --out runs/data-en-sw-150
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from candidates_oof import candidate_stats

from clir.datasets import Collection
from clir.pipeline.config import load_experiment
from clir.pipeline.experiment import write_rerank_data
from clir.pipeline.tables import load_tables


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collection", type=Path, required=True, help="a collection directory")
    parser.add_argument("--tables", type=Path, required=True, help="its translation tables (a tables step)")
    parser.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
    parser.add_argument("--depth", type=int, help="candidates per first stage (default: the config's)")
    parser.add_argument("--qt-k", type=int, help="translations a query word in Q-hat (default: the config's)")
    parser.add_argument("--splits", nargs="+", default=["train", "dev"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()

    config = load_experiment(args.experiment)
    changed = {k: v for k, v in (("depth", args.depth), ("qt_k", args.qt_k)) if v is not None}
    train_config = replace(config.reranker, data=replace(config.reranker.data, **changed))
    collection = Collection.load(args.collection)
    written = write_rerank_data(
        args.out, collection, load_tables(args.tables), train_config, config.baseline_config(), args.splits
    )
    for split, data in written.items():
        stats = candidate_stats(data, {q: collection.qrels[q] for q in data.qids if q in collection.qrels})
        print(json.dumps({"split": split, **changed, **stats}))


if __name__ == "__main__":
    main()

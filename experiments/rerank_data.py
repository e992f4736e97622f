"""A rerank data step's splits with other candidate or query settings (issue 13's levers).

Builds what ``clir experiment``'s ``data-<pair>`` step builds (the union of the config's first
stages, every feature computed exactly for every candidate), with ``data.depth`` or
``data.qt_k`` replaced, into ``OUT/<split>``; prints, per split, the candidates a query and the
share of the relevant passages among them. With neither replaced it reproduces the step byte for
byte (checked on `make run`'s en-sw step). Feed ``OUT`` to ``oof_seeds.py run --data``:

    python experiments/rerank_data.py --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --tables runs/default/steps/tables-en-sw-<hash> --depth 150 --out runs/data-en-sw-150
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace
from pathlib import Path

from clir.datasets import Collection
from clir.pipeline.config import load_experiment
from clir.pipeline.experiment import stage_names
from clir.pipeline.features import DEFAULT_FEATURES, CollectionFeatures, collection_rerank_data, fuse_runs
from clir.pipeline.parallel import LOCAL, search_stage
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
    data = train_config.data
    collection = Collection.load(args.collection)
    features = CollectionFeatures.build(
        collection,
        stage_names=stage_names(train_config),
        tables=load_tables(args.tables),
        baseline=config.baseline_config(),
        progress=False,
        engine=LOCAL,
        candidates_only=True,
    )
    for split in args.splits:
        queries = collection.split(split)
        runs = [search_stage(features.stages[name], queries, LOCAL, k=1000) for name in data.first_stages]
        rerank_data = collection_rerank_data(
            features,
            queries,
            candidates=fuse_runs(runs, data.depth),
            feature_names=list(DEFAULT_FEATURES),
            data=data,
            depth=data.max_candidates,
            progress=False,
        )
        rerank_data.save(args.out / split)
        found = total = 0
        for query in rerank_data.queries:
            relevant = {d for d, grade in collection.qrels.get(query.qid, {}).items() if grade >= 1}
            found, total = found + len(relevant & set(query.docnos)), total + len(relevant)
        per_query = sum(len(q.docnos) for q in rerank_data.queries) / len(rerank_data.queries)
        print(json.dumps({"split": split, **changed, "candidates_per_query": round(per_query, 1),
                          "share_of_relevant": round(found / total, 4)}))  # fmt: skip


if __name__ == "__main__":
    main()

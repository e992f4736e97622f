"""Single-stage vs union candidates under the reranker: out-of-fold MAP, candidate recall and size.

k-fold cross-validation over a collection's training + dev queries (the test queries are never
used) with the ``lexical-fusion`` and ``full`` systems of an experiment config (default
``configs/qt-candidates.yaml``: the QT BM25 top 100; ``configs/default.yaml``'s candidates are
already the union, so it has no single list to compare), one seed, the same folds for every row.
The candidates are either the config's own ``data.first_stage`` (``single``) or the union of
several first stages' top ``depth`` lists, reciprocal-rank fused (``union``, ``data.first_stage:
[qt-bm25, psq-bm25, dt-bm25]``). For each candidate set: the share of relevant passages among the
candidates (pooled over queries, and the mean per-query recall), the mean number of candidates per
query, the MAP of the candidate order itself, then the OOF MAP of each system; and paired per-query
comparisons (MAP difference, randomization p) of union against single candidates per system and of
``full`` against ``lexical-fusion`` per candidate set. Prints JSON (and writes it with ``--out``).
Each fold early-stops on a fold of its training queries (``cross_validate``; the README's rows of
this script were made when it stopped on the held-out fold, a little optimistic, all alike).

    python experiments/candidates_oof.py \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --tables runs/default/steps/tables-en-sw-<hash> --space runs/default/steps/space-<hash>
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.evaluation import compare, evaluate
from clir.pipeline.config import load_experiment
from clir.pipeline.experiment import stage_names
from clir.pipeline.features import CollectionFeatures, collection_rerank_data, map_metric
from clir.pipeline.tables import load_tables
from clir.training import RerankData, TrainConfig
from clir.training.cv import cross_validate
from clir.types import Qrels, Run

SYSTEMS = ("lexical-fusion", "full")


def candidate_stats(data: RerankData, qrels: Qrels) -> dict[str, float]:
    """Recall of the candidates (pooled share and per-query mean), their number, their MAP.

    The mean recall is over the queries with a relevant document, as trec_eval averages (and
    the MAP beside it): a query without one had counted 0.
    """
    found = total = 0
    recalls = []
    for query in data.queries:
        relevant = {d for d, grade in qrels.get(query.qid, {}).items() if grade >= 1}
        hits = len(relevant & set(query.docnos))
        found, total = found + hits, total + len(relevant)
        if relevant:
            recalls.append(hits / len(relevant))
    return {
        "share_of_relevant": round(found / total, 4),
        "mean_recall": round(sum(recalls) / len(recalls), 4),
        "candidates_per_query": round(sum(len(q.docnos) for q in data.queries) / len(data.queries), 1),
        "candidate_order_map": round(map_metric(data.first_stage_run(), qrels), 4),
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collection", type=Path, required=True, help="a collection directory")
    parser.add_argument("--tables", type=Path, required=True, help="its translation tables (a tables step)")
    parser.add_argument("--space", type=Path, required=True, help="the shared space (a space step)")
    parser.add_argument("--experiment", type=Path, default=Path("configs/qt-candidates.yaml"))
    parser.add_argument("--union", nargs="+", default=["qt-bm25", "psq-bm25", "dt-bm25"])
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="the models' seed (the folds: optim.seed's)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()

    collection = Collection.load(args.collection)
    experiment = load_experiment(args.experiment)
    single = experiment.reranker_config("full")["data"]
    configs = {
        (candidates, system): TrainConfig.from_dict(
            {
                **experiment.reranker_config(system),
                "data": {**single, "first_stage": first_stage},
                "cv": {"folds": args.folds},
                "ensemble": {"seeds": [args.seed]},
                "progress": False,
            },
            f"{args.experiment}: {system} ({candidates})",
        )
        for candidates, first_stage in (("single", single["first_stage"]), ("union", args.union))
        for system in SYSTEMS
    }
    if configs["single", "full"].data.first_stages == configs["union", "full"].data.first_stages:
        parser.error(f"{args.experiment}'s candidates are already the union of {args.union}")
    features = CollectionFeatures.build(
        collection, stage_names=stage_names(configs["union", "full"]), tables=load_tables(args.tables)
    )
    queries = [*collection.split("train"), *collection.split("dev")]
    qrels = {q.qid: collection.qrels[q.qid] for q in queries}
    space = SharedSpace.load(args.space)

    results: dict[str, dict[str, object]] = {}
    runs: dict[tuple[str, str], Run] = {}
    for candidates in ("single", "union"):
        data_config = configs[candidates, "full"].data
        data = collection_rerank_data(features, queries, data=data_config)
        row: dict[str, object] = {"first_stage": data_config.first_stage, **candidate_stats(data, qrels)}
        for system in SYSTEMS:
            start = time.time()
            with tempfile.TemporaryDirectory() as tmp:
                cv = cross_validate(
                    configs[candidates, system], data, collection.qrels, tmp, space=space, metric=map_metric
                )
            runs[candidates, system] = cv.oof_run
            scores = evaluate(cv.oof_run, qrels, ["AP", "P@10"])
            row[system] = {
                "oof_map": round(float(scores["AP"]), 4),
                "oof_p10": round(float(scores["P@10"]), 4),
                "seconds": round(time.time() - start, 1),
            }
        results[candidates] = row
        print(candidates, row, flush=True)
    pairs = {f"union - single, {s}": (("single", s), ("union", s)) for s in SYSTEMS}
    pairs.update({f"full - lexical-fusion, {c}": ((c, "lexical-fusion"), (c, "full")) for c in results})
    comparisons = {}
    for name, (a, b) in pairs.items():
        ap = compare(runs[a], runs[b], qrels, ["AP"])["AP"]
        comparisons[name] = {"diff": round(ap.diff, 4), "p_randomization": round(ap.p_randomization, 4)}
    report = {
        "collection": str(args.collection),
        "queries": len(queries),
        "folds": args.folds,
        "seed": args.seed,
        "depth_per_stage": single["depth"],
        "results": results,
        "comparisons": comparisons,
    }
    text = json.dumps(report, indent=2)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()

"""Do the neural columns count once the lexical ones cannot drown them? Out-of-fold MAP.

Issue 13, lever 4. k-fold cross-validation over a collection's training + dev queries (the
test queries are never used; the rerank data of an experiment's finished ``data-<pair>`` step,
its ``train/`` and ``dev/``), one seed, the same folds for every row (split by
``optim.seed``, as :func:`clir.training.cv.cross_validate` splits). Rows:

- ``lexical-fusion`` and ``full``: the experiment's systems as configured;
- ``full+feature_dropout=<p>``: ``full`` with ``optim.feature_dropout: p``;
- ``no-features``: the four components alone (stage 1 of the next rows);
- ``two-stage,component_lr=<r>``: stage 2, ``full`` started in each fold from that fold's
  stage-1 model (``optim.init_from``; the fusion layer starts fresh) with the components at
  learning rate ``r`` (0: frozen).

For each row: OOF MAP and P@10, seconds, and the paired per-query MAP difference and
randomization p against ``lexical-fusion`` and against ``full``. Each fold early-stops on a
fold of its training queries (``cross_validate``; the README's rows of this script were made when
it stopped on the held-out fold, a little optimistic, all alike). Prints JSON after every row
(and writes it with ``--out``).

    python experiments/fusion_oof.py --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --data runs/default/steps/data-en-sw-<hash> --space runs/default/steps/space-<hash> --out oof.json
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.evaluation import compare, evaluate
from clir.pipeline.config import load_experiment
from clir.pipeline.features import map_metric
from clir.training import RerankData, TrainConfig, Trainer
from clir.training.cv import CVResult, cross_validate
from clir.training.ensemble import TrainedReranker, combine, ensemble_meta, member_scores
from clir.training.scoring import scores_to_run
from clir.types import Qrels, Run

BASELINES = ("lexical-fusion", "full")


def labelled_data(step: Path) -> RerankData:
    """The ``train/`` and ``dev/`` rerank data of a data step, as one set of queries."""
    train, dev = RerankData.load(step / "train"), RerankData.load(step / "dev")
    return RerankData(
        train.doc_lang,
        [*train.queries, *dev.queries],
        {**train.doc_src, **dev.doc_src},
        {**train.doc_en, **dev.doc_en},
        train.feature_names,
        train.query_lang,
        train.meta,
    )


def warm_started_oof(
    config: dict[str, Any], data: RerankData, qrels: Qrels, stage1: CVResult, out: Path, space: SharedSpace
) -> Run:
    """Out-of-fold run of ``config`` trained in each fold of ``stage1`` from that fold's model.

    Each fold trains on the queries its stage-1 model trained on and early-stops on the ones
    that model stopped on (``stopped_on`` of its ``ensemble.json``): never on the held-out fold,
    which it then scores (these rows had stopped on it, optimistic beside the other rows).
    (``cross_validate`` with ``optim.init_from`` would start every fold from one member, which
    saw the other folds' held-out queries.)
    """
    stopped_on = ensemble_meta(stage1.path).get("stopped_on")
    if not isinstance(stopped_on, list) or len(stopped_on) != len(stage1.folds):
        raise SystemExit(f"{stage1.path}: stage 1 records no early-stopping queries of its own per fold")
    scores = {}
    folds = zip(stage1.folds, stage1.members, stopped_on, strict=True)
    for f, (held_out, member, stop) in enumerate(folds):
        fold = TrainConfig.from_dict(
            {**config, "optim": {**config["optim"], "init_from": str(member)}, "cv": {"folds": 1}},
            f"fold {f}",
        )
        held = data.subset(held_out)
        if set(stop) & set(held_out):
            raise SystemExit(f"fold {f} of {stage1.path} early-stopped on its held-out queries")
        skip = set(held_out) | set(stop)
        train, stop_data = data.subset([q for q in data.qids if q not in skip]), data.subset(stop)
        path = Trainer(fold, metric=map_metric).fit(train, stop_data, qrels, out / f"fold{f}", space=space)
        models = [TrainedReranker.load(path)]
        fold_scores = combine(member_scores(models, held, space=space, depth=fold.data.max_candidates))
        scores.update(zip(held.qids, fold_scores, strict=True))
    return scores_to_run(data, [scores[q] for q in data.qids])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collection", type=Path, required=True, help="a collection directory (its qrels)")
    parser.add_argument("--data", type=Path, required=True, help="a data step (train/ and dev/ rerank data)")
    parser.add_argument("--space", type=Path, required=True, help="the shared space (a space step)")
    parser.add_argument(  # no-features (the stage 1 of the two-stage rows) is an ablation
        "--experiment", type=Path, default=Path("configs/ablations.yaml")
    )
    parser.add_argument("--feature-dropout", type=float, nargs="*", default=[0.3, 0.5])
    parser.add_argument("--component-lr", type=float, nargs="*", default=[0.0], help="two-stage rows")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0, help="the models' seed (the folds: optim.seed's)")
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()

    experiment = load_experiment(args.experiment)

    def config(system: str, **optim: Any) -> dict[str, Any]:
        base = experiment.reranker_config(system)
        return {
            **base,
            "optim": {**base["optim"], **optim},
            "cv": {"folds": args.folds},
            "ensemble": {"seeds": [args.seed]},
            "progress": False,
        }

    rows = {system: config(system) for system in BASELINES}
    rows.update(
        {f"full+feature_dropout={p}": config("full", feature_dropout=p) for p in args.feature_dropout}
    )
    if args.component_lr:
        rows["no-features"] = config("no-features")
    for r in args.component_lr:  # stage 2, after its stage 1 (no-features)
        rows[f"two-stage,component_lr={r}"] = config("full", component_lr=r, seed=args.seed)

    data = labelled_data(args.data)
    judged = Collection.load(args.collection).qrels
    qrels = {q: judged[q] for q in data.qids}
    space = SharedSpace.load(args.space)
    cvs: dict[str, CVResult] = {}
    runs: dict[str, Run] = {}
    results: dict[str, dict[str, Any]] = {}
    text = ""
    with tempfile.TemporaryDirectory() as tmp:
        for name, row in rows.items():
            start = time.time()
            if name.startswith("two-stage"):
                runs[name] = warm_started_oof(row, data, qrels, cvs["no-features"], Path(tmp) / name, space)
            else:
                train_config = TrainConfig.from_dict(row, f"{args.experiment}: {name}")
                cvs[name] = cross_validate(
                    train_config, data, qrels, Path(tmp) / name, space=space, metric=map_metric
                )
                runs[name] = cvs[name].oof_run
            scores = evaluate(runs[name], qrels, ["AP", "P@10"])
            results[name] = {
                "oof_map": round(float(scores["AP"]), 4),
                "oof_p10": round(float(scores["P@10"]), 4),
                "seconds": round(time.time() - start, 1),
            }
            for baseline in BASELINES:
                if baseline in runs and baseline != name:
                    ap = compare(runs[baseline], runs[name], qrels, ["AP"])["AP"]
                    results[name][f"vs {baseline}"] = {
                        "diff": round(ap.diff, 4),
                        "p_randomization": round(ap.p_randomization, 4),
                    }
            print(name, results[name], flush=True)
            report = {"data": str(args.data), "queries": len(data), "folds": args.folds, "seed": args.seed}
            text = json.dumps({**report, "results": results}, indent=2)
            if args.out is not None:
                args.out.write_text(text + "\n", encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()

"""Out-of-fold runs over several model seeds, and the table that compares them (issue 13).

``run`` writes one OOF run file per system x space x seed: k-fold cross-validation over a data
step's ``train/`` + ``dev/`` queries (the test queries are never used), the same folds for every
file (split by ``optim.seed``), the model seed from ``--seeds``; ``--init-from`` starts every fold
from a trained model (one that saw none of these queries, e.g. a ``weak-full`` model), and
``--weak DATA_STEP`` trains a system on a pseudo-query data step instead and scores the
labelled queries with it (no fold: it saw none of them). ``compare`` prints, per row, the MAP of
each seed, their mean and the paired randomization test (per-query AP averaged over the seeds)
against reference rows. Each fold early-stops on a fold of its own training queries; the rows
before 2026-12-06 early-stopped on the held-out fold (``--stop-on-held-out`` reproduces them).

    python experiments/oof_seeds.py run --data runs/default/steps/data-en-sw-<hash> \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --space default=runs/default/steps/space-<hash> --systems full-labels lexical-fusion \\
        --seeds 0 1 2 --out runs/oof
    python experiments/oof_seeds.py run ... --systems weak-full \\
        --weak runs/default/steps/data-pseudo-en-sw-<hash> runs/default/steps/pseudo-en-sw-<hash>/collection
    python experiments/oof_seeds.py run ... --systems full-labels --init-from MODEL --tag +weak
    python experiments/oof_seeds.py run ... --systems weak-full --weak ... --keep models  # keep the model
    python experiments/oof_seeds.py compare runs/oof --collection ... --reference lexical-fusion@default
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from collections import defaultdict
from pathlib import Path

import numpy as np
from fusion_oof import labelled_data

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.evaluation import evaluate, evaluate_per_query
from clir.evaluation.significance import randomization_test
from clir.formats import read_run, write_run
from clir.pipeline.config import load_experiment
from clir.pipeline.features import map_metric
from clir.training import RerankData, TrainConfig, Trainer
from clir.training.cv import cross_validate
from clir.training.ensemble import TrainedReranker, combine, member_scores
from clir.training.scoring import scores_to_run


def run(args: argparse.Namespace) -> None:
    experiment = load_experiment(args.experiment)
    data = labelled_data(args.data)
    judged = Collection.load(args.collection).qrels
    qrels = {q: judged[q] for q in data.qids}
    args.out.mkdir(parents=True, exist_ok=True)
    for item in args.space:
        name, _, path = item.partition("=")
        space = SharedSpace.load(path)
        for system in args.systems:
            for seed in args.seeds:
                base = experiment.reranker_config(system)
                optim = {**base["optim"], "seed": seed} if args.weak else dict(base["optim"])
                if args.init_from is not None:
                    optim["init_from"] = str(args.init_from)
                config = {**base, "optim": optim, "cv": {"folds": args.folds}, "progress": False}
                config["ensemble"] = {"seeds": [seed]}
                start = time.time()
                train_config = TrainConfig.from_dict(config, system)
                with tempfile.TemporaryDirectory() as tmp:
                    if args.weak is not None:  # trained on pseudo-queries: every labelled query held out
                        step, pseudo_dir = args.weak
                        pseudo = Collection.load(pseudo_dir)
                        train, dev = RerankData.load(step / "train"), RerankData.load(step / "dev")
                        model_dir = args.keep / f"{system}{args.tag}-s{seed}" if args.keep else tmp
                        path_ = Trainer(train_config, metric=map_metric).fit(
                            train, dev, pseudo.qrels, model_dir, space=space
                        )
                        scores = combine(member_scores([TrainedReranker.load(path_)], data, space=space))
                        oof = scores_to_run(data, scores)
                    else:
                        cv = cross_validate(
                            train_config, data, qrels, tmp, space=space, metric=map_metric,
                            stop_on_held_out=args.stop_on_held_out,
                        )  # fmt: skip
                        oof = cv.oof_run
                tag = f"{system}{args.tag}@{name}@s{seed}"
                write_run(args.out / f"{tag}.run", oof)
                ap = float(evaluate(oof, qrels, ["AP"])["AP"])
                print(json.dumps({"run": tag, "map": round(ap, 4), "seconds": round(time.time() - start)}))


def compare(args: argparse.Namespace) -> None:
    judged = Collection.load(args.collection).qrels
    runs: dict[str, dict[int, dict]] = defaultdict(dict)
    for path in sorted(args.runs.glob("*.run")):
        row, _, seed = path.stem.rpartition("@s")
        runs[row][int(seed)] = read_run(path)
    qids = sorted(next(iter(next(iter(runs.values())).values())))
    qrels = {q: judged[q] for q in qids}

    def per_query(run: dict) -> np.ndarray:
        return np.array([v for _, v in sorted(evaluate_per_query(run, qrels, ["AP"])["AP"].items())])

    ap = {row: {seed: per_query(r) for seed, r in seeds.items()} for row, seeds in runs.items()}
    table = {}
    for row, seeds in sorted(ap.items()):
        entry = {"seeds": {s: round(float(v.mean()), 4) for s, v in sorted(seeds.items())}}
        entry["mean"] = round(float(np.mean([v.mean() for v in seeds.values()])), 4)
        for reference in args.reference:
            common = sorted(set(seeds) & set(ap.get(reference, {})))
            if reference == row or not common:
                continue
            mine = np.mean([seeds[s] for s in common], axis=0)
            theirs = np.mean([ap[reference][s] for s in common], axis=0)
            entry[f"vs {reference}"] = {
                "diff": round(float(mine.mean() - theirs.mean()), 4),
                "p_randomization": round(randomization_test(theirs, mine), 4),
            }
        table[row] = entry
    print(json.dumps({"queries": len(qids), "rows": table}, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    r = commands.add_parser("run", help="write OOF run files")
    r.add_argument("--data", type=Path, required=True, help="a data step (train/ and dev/ rerank data)")
    r.add_argument("--collection", type=Path, required=True, help="the collection (its qrels)")
    r.add_argument("--space", nargs="+", required=True, help="NAME=DIR of shared spaces")
    r.add_argument("--systems", nargs="+", default=["full-labels"], help="systems of the experiment config")
    r.add_argument("--seeds", nargs="+", type=int, default=[0])
    r.add_argument("--folds", type=int, default=5)
    r.add_argument("--init-from", type=Path, help="start every fold from this model")
    r.add_argument(
        "--weak",
        nargs=2,
        type=Path,
        metavar=("DATA_STEP", "COLLECTION"),
        help="train on a pseudo-query data step (and its collection, for the qrels) instead, no folds",
    )
    r.add_argument("--keep", type=Path, help="with --weak: keep the models in KEEP/SYSTEM[TAG]-sSEED")
    r.add_argument("--tag", default="", help="appended to the system in the file names")
    r.add_argument(
        "--stop-on-held-out",
        action="store_true",
        help="each fold early-stops on its held-out fold (the optimistic scheme of the rows before "
        "2026-12-06) instead of on a fold of its training queries",
    )
    r.add_argument("--experiment", type=Path, default=Path("configs/ablations.yaml"))  # every system
    r.add_argument("--out", type=Path, required=True, help="directory of the run files")
    c = commands.add_parser("compare", help="the table of a directory of OOF run files")
    c.add_argument("runs", type=Path)
    c.add_argument("--collection", type=Path, required=True)
    c.add_argument("--reference", nargs="+", default=["lexical-fusion@default", "full-labels@default"])
    args = parser.parse_args()
    run(args) if args.command == "run" else compare(args)


if __name__ == "__main__":
    main()

"""Pseudo-queries of the zero-shot pairs' own parallel text (issue 13): does pretraining on them
help the zero-shot pairs, and at what cost to the trained pair?

``steps`` builds, from a finished ``make run`` (read only), a pair's pseudo collection and its
rerank data with that pair's tables (``pseudo-<pair>``, ``data-pseudo-<pair>``: the experiment's
own steps, as ``make run`` builds them for en-sw) and the rerank data of the pair's labelled dev
queries (``data-dev-<pair>``, the selection set of the zero-shot pairs; the test queries are never
read). ``pretrain`` trains ``weak-full`` on one pseudo data step (several, the qids of all but the
first prefixed as pseudo qids name verses, needed ``Trainer.fit`` of several sets: commit 4f521c7,
removed by 3b98479, so they are refused), ``finetune`` trains ``full`` on the en-sw labels from a
model as ``make run`` does, and ``evaluate`` scores a data split with models, paired randomization
tests against the first. The en-sw cross-validation of a start is ``oof_seeds.py run ...
--init-from MODEL``.

    S=runs/default/steps
    python experiments/pseudo_other_pairs.py steps --steps $S --pair en-ny --out runs/other
    O=runs/other/steps
    python experiments/pseudo_other_pairs.py pretrain --space $S/space-<hash> \\
        --set - $O/data-pseudo-en-ny-<hash> $O/pseudo-en-ny-<hash>/collection --out runs/models/weak-full+ny
    python experiments/pseudo_other_pairs.py finetune --steps $S --init runs/models/weak-full+ny --seed 0 \\
        --out runs/models/full+ny-s0
    python experiments/pseudo_other_pairs.py evaluate --steps $S --pair en-ny \\
        --data $O/data-dev-en-ny-<hash>/dev full=$S/train-full-<hash> full+ny=runs/models/full+ny-s0
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path

import numpy as np
from pseudo_per_passage import finished

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.evaluation import evaluate_per_query
from clir.evaluation.significance import randomization_test
from clir.formats import write_run
from clir.pipeline import experiment as steps_module
from clir.pipeline.cache import StepResult, StepRunner
from clir.pipeline.config import load_experiment
from clir.pipeline.features import map_metric
from clir.pipeline.parallel import LOCAL
from clir.training import RerankData, TrainConfig, Trainer
from clir.training.ensemble import TrainedReranker, combine, load_models, member_scores
from clir.training.scoring import scores_to_run


def collection_step(steps: Path, pair: str) -> StepResult:
    found = finished(steps, f"collection-{pair}")
    return StepResult(found.name, found.key, found.path / "collection", True, 0.0)


def build_steps(args: argparse.Namespace) -> None:
    config = load_experiment(args.experiment)
    if args.per_passage is not None:
        config = replace(config, weak=replace(config.weak, per_passage=args.per_passage))
    collection, tables = collection_step(args.steps, args.pair), finished(args.steps, f"tables-{args.pair}")
    with StepRunner(args.out) as runner:
        options = config.weak.pseudo_options(config.collection.passage_verses)
        pseudo = steps_module._pseudo_step(runner, args.pair, options, collection)
        for name, source, splits, first_stage in (
            (f"data-pseudo-{args.pair}", pseudo, ["train", "dev"], config.weak.first_stage),
            (f"data-dev-{args.pair}", collection, ["dev"], None),
        ):
            step = steps_module._data_step(
                runner, config, name, source, tables, splits, config.baseline_config(), None, False, LOCAL,
                first_stage=first_stage,
            )  # fmt: skip
            print(step.path)


def config_of(experiment: Path, system: str, **optim: object) -> TrainConfig:
    base = load_experiment(experiment).reranker_config(system)
    return TrainConfig.from_dict({**base, "optim": {**base["optim"], **optim}, "progress": False}, system)


def pretrain(args: argparse.Namespace) -> None:
    if len(args.set) > 1:  # Trainer.fit takes one set of queries since 3b98479
        raise SystemExit("pretrain: several --set need Trainer.fit of several sets (commit 4f521c7)")
    trains, devs, qrels = [], [], {}
    for prefix, step, collection in args.set:
        prefix = "" if prefix == "-" else prefix
        judged = Collection.load(collection).qrels
        for split, into in (("train", trains), ("dev", devs)):
            data = RerankData.load(Path(step) / split)
            data = replace(data, queries=[replace(q, qid=prefix + q.qid) for q in data.queries])
            into.append(data)
            qrels.update({q.qid: judged[q.qid.removeprefix(prefix)] for q in data.queries})
    config = config_of(args.experiment, "weak-full", seed=args.seed)
    many = len(trains) > 1
    space = SharedSpace.load(args.space)
    trainer = Trainer(config, metric=map_metric)
    print(trainer.fit(trains if many else trains[0], devs if many else devs[0], qrels, args.out, space=space))


def finetune(args: argparse.Namespace) -> None:
    step = finished(args.steps, f"data-{args.pair}").path
    config = config_of(args.experiment, "full", seed=args.seed, init_from=str(args.init))
    train, dev = RerankData.load(step / "train"), RerankData.load(step / "dev")
    qrels = Collection.load(collection_step(args.steps, args.pair).path).qrels
    space = SharedSpace.load(args.space or finished(args.steps, "space").path)
    print(Trainer(config, metric=map_metric).fit(train, dev, qrels, args.out, space=space))


def evaluate(args: argparse.Namespace) -> None:
    data = RerankData.load(args.data)
    space = SharedSpace.load(args.space or finished(args.steps, "space").path)
    judged = Collection.load(collection_step(args.steps, args.pair).path).qrels
    qrels = {q: judged[q] for q in data.qids}
    aps = {}
    for item in args.models:
        name, _, path = item.partition("=")
        path = Path(path)
        members = load_models(path) if (path / "ensemble.json").exists() else [TrainedReranker.load(path)]
        run = scores_to_run(data, combine(member_scores(members, data, space=space)))
        if args.runs:
            args.runs.mkdir(parents=True, exist_ok=True)
            write_run(args.runs / f"{name}.run", run)
        # every query with a relevant document (0 where the run misses it), as trec_eval averages:
        # a query without one had counted 0 here, lowering every MAP
        per_query = evaluate_per_query(run, qrels, ["AP"])["AP"]
        aps[name] = np.array([per_query[q] for q in sorted(per_query)])
    first = next(iter(aps))
    for name, ap in aps.items():
        test = f"  {ap.mean() - aps[first].mean():+.4f} (p {randomization_test(aps[first], ap):.4f})"
        print(f"{name:24s} MAP {ap.mean():.4f}{'' if name == first else test}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    for name, handler in (
        ("steps", build_steps),
        ("pretrain", pretrain),
        ("finetune", finetune),
        ("evaluate", evaluate),
    ):
        command = commands.add_parser(name)
        command.set_defaults(handler=handler)
        command.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
        if name != "pretrain":
            command.add_argument("--steps", type=Path, required=True, help="a finished make run's steps/")
            command.add_argument(
                "--pair", default="en-sw" if name == "finetune" else None, required=name != "finetune"
            )
        if name == "steps":
            command.add_argument("--per-passage", type=int, help="weak.per_passage (unset: the config's)")
        if name != "steps":
            command.add_argument(
                "--space", type=Path, required=name == "pretrain", help="a saved space (default: the steps')"
            )
        if name == "pretrain":
            command.add_argument(
                "--set",
                nargs=3,
                action="append",
                required=True,
                metavar=("PREFIX", "DATA_STEP", "COLLECTION"),
                help="'-': no qid prefix",
            )
        if name == "finetune":
            command.add_argument("--init", type=Path, required=True)
        if name in ("pretrain", "finetune"):
            command.add_argument("--seed", type=int, default=0)
        if name != "evaluate":
            command.add_argument("--out", type=Path, required=True)
        else:
            command.add_argument("--data", type=Path, required=True, help="a rerank-data split directory")
            command.add_argument("--runs", type=Path, help="also write each model's run here")
            command.add_argument("models", nargs="+", help="NAME=MODEL (a checkpoint or an ensemble)")
    args = parser.parse_args()
    args.handler(args)


if __name__ == "__main__":
    main()

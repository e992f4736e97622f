"""What the shared space does to the reranker: out-of-fold MAP of the default reranker per space.

k-fold cross-validation over a collection's training + dev queries (the test queries are never
used) with the ``full`` and ``lexical-fusion`` systems of an experiment config (default
``configs/default.yaml``), one seed. Compared on the same folds: the lexical fusion (no space);
random vectors over the same vocabulary (no meaning: only identical words match, so the
components see exact matches only); joint spaces trained here on the collection
(``EPOCHSxCOPIES``: word2vec epochs and shuffled copies of each verse pair); any saved space.
Prints JSON. Each fold early-stops on a fold of its training queries (``cross_validate``; the
README's rows of this script were made when it stopped on the held-out fold, a little
optimistic, all alike).

    python experiments/space_under_reranker.py \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --tables runs/default/steps/tables-en-sw-<hash> --joint 5x1 20x1 10x3 \\
        --space default=runs/default/steps/space-<hash>
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
from gensim.models import KeyedVectors

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.embeddings.joint import JOINT_CONFIG
from clir.embeddings.workflow import train_embeddings
from clir.evaluation import evaluate
from clir.formats.manifest import sha256_of
from clir.pipeline.cache import StepRunner
from clir.pipeline.config import load_experiment
from clir.pipeline.experiment import stage_names
from clir.pipeline.features import CollectionFeatures, collection_rerank_data, map_metric
from clir.pipeline.tables import load_tables
from clir.training import TrainConfig
from clir.training.cv import cross_validate


def random_space(like: SharedSpace, seed: int) -> SharedSpace:
    """Unit random vectors for every word of ``like``: its vocabulary without its meaning."""
    rng = np.random.default_rng(seed)
    vectors = {}
    for lang in like.languages:
        words = like.vocabulary(lang)
        matrix = rng.standard_normal((len(words), like.dim)).astype(np.float32)
        kv = KeyedVectors(like.dim)
        kv.add_vectors(words, matrix / np.linalg.norm(matrix, axis=1, keepdims=True))
        vectors[lang] = kv
    return SharedSpace(vectors, meta={"method": "random", "seed": seed})


def joint(runner: StepRunner, collection_dir: Path, lang: str, spec: str, centre: bool) -> SharedSpace:
    """A joint space of ``spec`` = ``EPOCHSxCOPIES``, trained once (a cached step of ``runner``,
    keyed by the collection's ``parallel.tsv`` and ``documents.jsonl`` as well as its path)."""
    epochs, copies = (int(x) for x in spec.split("x"))
    config = replace(JOINT_CONFIG, epochs=epochs)

    def build(work: Path) -> None:
        train_embeddings({lang: [collection_dir]}, work, config, joint=True, copies=copies, centre=centre)

    params = {
        "collection": str(collection_dir.resolve()),
        # what the training reads, by content: a collection rebuilt at the same path had reused
        # the space of its former text
        "inputs_sha256": {
            name: sha256_of(collection_dir / name)
            for name in ("parallel.tsv", "documents.jsonl")
            if (collection_dir / name).is_file()
        },
        "copies": copies,
        "centre": centre,
        **config.to_dict(),
    }
    return SharedSpace.load(runner.run(f"space-{lang}", params, build).path)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collection", type=Path, required=True, help="a collection directory")
    parser.add_argument("--tables", type=Path, required=True, help="its translation tables (a tables step)")
    parser.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
    parser.add_argument("--joint", nargs="*", default=["5x1", "20x1"], help="EPOCHSxCOPIES per joint space")
    parser.add_argument("--space", nargs="*", default=[], help="NAME=DIR of saved spaces")
    parser.add_argument("--uncentred", action="store_true", help="do not centre the joint spaces")
    parser.add_argument("--folds", type=int, default=5)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--work", type=Path, default=Path("runs/space-under-reranker"))
    args = parser.parse_args()
    for spec in args.joint:
        if not re.fullmatch(r"[1-9]\d*x[1-9]\d*", spec):
            parser.error(f"--joint {spec!r}: expected EPOCHSxCOPIES, e.g. 20x1")
    for item in args.space:
        if not all(item.partition("=")[::2]):
            parser.error(f"--space {item!r}: expected NAME=DIR")
    if not args.joint and not args.space:
        parser.error("give at least one space (--joint or --space)")

    collection = Collection.load(args.collection)
    experiment = load_experiment(args.experiment)
    configs = {
        system: TrainConfig.from_dict(
            {
                **experiment.reranker_config(system),
                "cv": {"folds": args.folds},
                "ensemble": {"seeds": [args.seed]},
                "progress": False,
            },
            f"{args.experiment}: {system}",
        )
        for system in ("full", "lexical-fusion")
    }
    config = configs["full"]
    tables = load_tables(args.tables)
    features = CollectionFeatures.build(collection, stage_names=stage_names(config), tables=tables)
    queries = [*collection.split("train"), *collection.split("dev")]
    data = collection_rerank_data(features, queries, data=config.data)

    spaces: dict[str, SharedSpace] = {}
    with StepRunner(args.work) as runner:
        for spec in args.joint:
            spaces[f"joint {spec}"] = joint(
                runner, args.collection, collection.doc_lang, spec, not args.uncentred
            )
    for item in args.space:
        name, _, path = item.partition("=")
        spaces[name] = SharedSpace.load(path)
    first = next(iter(spaces.values()))
    runs = {"lexical-fusion": ("lexical-fusion", first)}  # the fusion layer reads no vectors
    runs.update({name: ("full", space) for name, space in spaces.items()})
    runs["random vectors"] = ("full", random_space(first, args.seed))

    qrels = {qid: collection.qrels[qid] for qid in data.qids}
    results = {}
    for name, (system, space) in runs.items():
        start = time.time()
        with tempfile.TemporaryDirectory() as tmp:
            cv = cross_validate(
                configs[system],
                data,
                collection.qrels,
                tmp,
                space=space,
                metric=map_metric,
            )
        scores = evaluate(cv.oof_run, qrels, ["AP", "P@10"])
        results[name] = {"oof_map": round(float(scores["AP"]), 4), "oof_p10": round(float(scores["P@10"]), 4),
                         "seconds": round(time.time() - start, 1)}  # fmt: skip
        print(name, results[name], flush=True)
    print(
        json.dumps(
            {
                "collection": str(args.collection),
                "queries": len(data.qids),
                "folds": args.folds,
                "results": results,
            },
            indent=2,
        )
    )


if __name__ == "__main__":
    main()

"""Scale benchmark: streamed, sharded first-stage indexes of a padded collection (clir data pad).

For each mode (QT / PSQ / DT BM25, the baselines' settings: spelling matching 0.5, PSQ top 10 /
90 %), one fresh process streams ``documents.jsonl`` through :meth:`FirstStage.index_shards`
(index build seconds and peak RSS), and another memory-maps the shards and runs every query of
the collection (train + dev + test) at k = 1000, after 5 warm-up queries, then evaluates the
test queries. ``qps`` is the retrieval of the translated queries (analysed, translated and
spelling-matched terms -> ranked run over all shards, exactly merged); ``qps_with_translation``
adds the query analysis and translation (all queries at once, :meth:`FirstStage.queries_terms`).
Single-threaded BLAS; ``--workers`` threads search the shards, ``--processes`` forked processes
batches of 64 queries (each over every shard); ``--skip-build`` searches the
stages an earlier run left in ``--work``. Prints one JSON object (and writes it with --out).

    clir data pad data/en-sw --distractors 1000000 --out data/en-sw-1m
    python experiments/bench_scale.py --collection data/en-sw-1m --tables T --work /tmp/scale
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
    os.environ[_var] = "1"
os.environ.setdefault("DISABLE_TQDM", "1")

import argparse  # noqa: E402
import hashlib  # noqa: E402
import json  # noqa: E402
import multiprocessing  # noqa: E402
import resource  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
import warnings  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402


def _stage(mode: str, collection: Path, tables: Path, model: str) -> Any:
    from clir.pipeline.baselines import BaselineConfig, baseline_stage
    from clir.pipeline.tables import load_tables

    info = json.loads((collection / "collection.json").read_text())
    return baseline_stage(
        mode,
        model,
        info.get("query_lang", "en"),
        info["doc_lang"],
        load_tables(tables),
        BaselineConfig(),
        False,
    )


def _peak_mib() -> float:
    return round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1)


def build(
    mode: str, model: str, collection: Path, tables: Path, work: Path, shard_docs: int
) -> dict[str, Any]:
    """Stream the documents into shards; seconds (reading, analysis, translation, indexing) and RSS."""
    from clir.formats import iter_documents

    stage = _stage(mode, collection, tables, model)
    rss_before = _peak_mib()
    start = time.perf_counter()
    stage.index_shards(iter_documents(collection / "documents.jsonl"), work, shard_docs=shard_docs)
    seconds = time.perf_counter() - start
    index = stage.retriever.index_
    return {
        "build_s": round(seconds, 1),
        "build_peak_rss_mib": _peak_mib(),
        "rss_after_imports_mib": rss_before,
        "docs": index.n_docs,
        "terms": len(index.vocab),
        "postings": int(sum(shard.postings.nnz for shard in index.shards)),
        "shards": len(index.shards),
        "index_mib": round(sum(f.stat().st_size for f in work.rglob("*") if f.is_file()) / 2**20, 1),
    }


def search(collection: Path, work: Path, k: int, workers: int = 1, processes: int = 1) -> dict[str, Any]:
    """Load the shards (mmap) and search every query; q/s, peak RSS and the test split's measures."""
    from clir.evaluation import DEFAULT_MEASURES, evaluate
    from clir.formats import read_qrels
    from clir.formats.topics import read_topics
    from clir.retrieval import FirstStage

    start = time.perf_counter()
    stage = FirstStage.load(work, progress=False, workers=workers, processes=processes)
    load_s = time.perf_counter() - start
    splits = {p.name.split(".")[1]: read_topics(p) for p in sorted(collection.glob("topics.*.tsv"))}
    queries = [q for split in splits.values() for q in split]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        stage.search(queries[:5], k=k)  # warm up: the spelling matcher's n-gram index, page cache
        start = time.perf_counter()
        terms = stage.queries_terms(queries)
        translate_s = time.perf_counter() - start
        start = time.perf_counter()
        run = stage.retriever.search(terms, k=k)
        seconds = time.perf_counter() - start
        test = {q.qid for q in splits["test"]}
        qrels = {q: d for q, d in read_qrels(collection / "qrels.txt").items() if q in test}
        n_docs = stage.retriever.index_.n_docs
        measures = evaluate({q: run[q] for q in test}, qrels, DEFAULT_MEASURES, collection_size=n_docs)
    return {
        "load_s": round(load_s, 2),
        "queries": len(queries),
        "k": k,
        "workers": workers,
        "processes": processes,
        "qps": round(len(queries) / seconds, 1),
        "qps_with_translation": round(len(queries) / (seconds + translate_s), 1),
        "search_peak_rss_mib": _peak_mib(),
        "processes_peak_rss_mib": round(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024, 1),
        "run_sha256": hashlib.sha256(json.dumps(run, sort_keys=True).encode()).hexdigest(),
        "test": {name: round(value, 4) for name, value in measures.items()},
    }


def in_child(fn: Any, *args: Any) -> dict[str, Any]:
    """Run ``fn(*args)`` in a fresh interpreter (its own peak RSS; not a pool's daemon, so it may
    fork search processes), return its result."""
    context = multiprocessing.get_context("spawn")
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=_reply, args=(send, fn, args))
    child.start()
    ok, result = receive.recv()
    child.join()
    if not ok:
        raise RuntimeError(f"{fn.__name__} failed in its process:\n{result}")
    return result


def _reply(send: Any, fn: Any, args: tuple[Any, ...]) -> None:
    try:
        send.send((True, fn(*args)))
    except BaseException:
        send.send((False, traceback.format_exc()))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--collection", type=Path, required=True, help="a (padded) collection directory")
    parser.add_argument("--tables", type=Path, required=True, help="translation tables (clir tables)")
    parser.add_argument("--work", type=Path, required=True, help="where the shards are written")
    parser.add_argument("--modes", nargs="+", default=["qt"], choices=["qt", "psq", "dt"])
    parser.add_argument("--model", default="bm25", choices=["bm25", "ql"])
    parser.add_argument("--shard-docs", type=int, default=250_000)
    parser.add_argument("--k", type=int, default=1000)
    parser.add_argument("--workers", type=int, default=1, help="threads searching shards at once")
    parser.add_argument(
        "--processes", type=int, default=1, help="processes searching batches of queries at once"
    )
    parser.add_argument(
        "--skip-build", action="store_true", help="search the first stages already in --work (no build)"
    )
    parser.add_argument("--out", type=Path, help="also write the JSON here")
    args = parser.parse_args()
    stats = json.loads((args.collection / "stats.json").read_text())
    report: dict[str, Any] = {
        "collection": str(args.collection),
        "documents": stats["documents"],
        "shard_docs": args.shard_docs,
        "cpus": len(os.sched_getaffinity(0)),
        "systems": {},
    }
    for mode in args.modes:
        work = args.work / f"{mode}-{args.model}"
        result = {}
        if not args.skip_build:
            result = in_child(build, mode, args.model, args.collection, args.tables, work, args.shard_docs)
            print(json.dumps({mode: result}), flush=True)
        result.update(in_child(search, args.collection, work, args.k, args.workers, args.processes))
        report["systems"][f"{mode}-{args.model}"] = result
        print(json.dumps({mode: result}), flush=True)
    print(json.dumps(report, indent=1))
    if args.out:
        args.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

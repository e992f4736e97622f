"""How much MAP a reranker of these candidates could still gain, and what is out of its reach.

The Bible collections judge two grades: the passage holding the query's verse (grade 2, one a
query) and the passages holding its cross-referenced verses (grade 1, about 0.6 a query). For a
run of reranked candidates (e.g. ``oof_seeds.py``'s out-of-fold runs over the train + dev
queries: never the test queries) this prints JSON with

* ``map``: the run's MAP, and the MAP with the grade-2 passage moved first (where it is among
  the candidates) and with every relevant candidate moved first: the ceilings of a better
  reranker of the same candidates;
* ``in_candidates``: the share of each grade's passages among the candidates;
* ``cross_references_by_text``: whether the grade-1 passages could be found from the grade-2
  one by text: the rank of each among the collection's passages by BM25 (``rank_bm25``, the
  reference implementation) with the grade-2 passage's analysed text as the query (an oracle:
  the right passage given), and with the run's first passage instead.

    python experiments/ceiling.py RUN --collection runs/default/steps/collection-en-sw-<hash>/collection
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
from rank_bm25 import BM25Okapi

from clir.datasets import Collection
from clir.evaluation import evaluate
from clir.formats import ranked, read_run
from clir.text import get_analyzer

VERSE, CROSS_REFERENCE = 2, 1
"""The two relevance grades of the Bible collections."""
DEPTHS = (1, 10, 100)


def moved_first(run: dict[str, dict[str, float]], chosen: dict[str, set[str]]) -> dict[str, dict[str, float]]:
    """``run`` with each query's ``chosen`` candidates above the rest, each group in the run's
    order (trec_eval's: score descending, then docno descending).

    The scores become ranks (``n`` for the first of ``n`` candidates, down to 1): adding the
    query's top score plus one to the chosen ones had left a chosen candidate of score below -1
    under the top (z-scored runs, as the out-of-fold runs are, hold many), and tied one of -1
    with it.
    """
    out = {}
    for qid, scores in run.items():
        picked = chosen.get(qid, set())
        order = [docno for docno, _ in ranked(scores)]
        order = [d for d in order if d in picked] + [d for d in order if d not in picked]
        out[qid] = {docno: float(len(order) - i) for i, docno in enumerate(order)}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("run", type=Path)
    parser.add_argument("--collection", type=Path, required=True)
    parser.add_argument("--splits", nargs="+", default=["train", "dev"])
    args = parser.parse_args()
    collection = Collection.load(args.collection)
    qids = {q.qid for split in args.splits for q in collection.split(split)}
    qrels = {q: j for q, j in collection.qrels.items() if q in qids}
    run = {q: r for q, r in read_run(args.run).items() if q in qids}

    def graded(grade: int) -> dict[str, set[str]]:
        return {q: {d for d, g in j.items() if g == grade} for q, j in qrels.items()}

    verse, cross = graded(VERSE), graded(CROSS_REFERENCE)
    relevant = {q: verse[q] | cross[q] for q in qrels}
    report: dict[str, object] = {
        "run": str(args.run),
        "queries": len(qrels),
        "map": {
            "run": evaluate(run, qrels, ["AP"])["AP"],
            "verse_passage_first": evaluate(moved_first(run, verse), qrels, ["AP"])["AP"],
            "every_relevant_first": evaluate(moved_first(run, relevant), qrels, ["AP"])["AP"],
        },
        "in_candidates": {
            name: float(np.mean([d in run.get(q, {}) for q, ds in by.items() for d in ds]))
            for name, by in (("verse_passage", verse), ("cross_references", cross))
        },
    }
    analyzer = get_analyzer(collection.doc_lang)
    docnos = [d.docno for d in collection.documents]
    position = {d: i for i, d in enumerate(docnos)}
    tokens = [analyzer.analyze(d.text) for d in collection.documents]
    bm25 = BM25Okapi(tokens)
    ranks: dict[str, list[int]] = {"verse_passage": [], "run_first": []}
    for qid in sorted(q for q in qrels if cross[q] and verse[q]):
        first = ranked(run[qid])[0][0] if run.get(qid) else None  # ties: trec_eval's order
        for name, source in (("verse_passage", min(verse[qid])), ("run_first", first)):
            if source is None:
                ranks[name] += [len(docnos)] * len(cross[qid])
                continue
            scores = bm25.get_scores(tokens[position[source]])
            scores[position[source]] = -np.inf  # the passage itself
            order = np.argsort(-scores, kind="stable")
            rank = np.empty(len(order), dtype=np.int64)
            rank[order] = np.arange(1, len(order) + 1)
            ranks[name] += [int(rank[position[d]]) for d in sorted(cross[qid])]
    report["cross_references_by_text"] = {
        name: {"passages": len(r), **{f"in_top_{k}": float(np.mean(np.array(r) <= k)) for k in DEPTHS}}
        for name, r in ranks.items()
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()

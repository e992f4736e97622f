"""A pseudo-relevance feedback column in the rerank data (issue 13, lever R).

RM3 (Lavrenko & Croft 2001, "Relevance-based language models", SIGIR; Abdul-Jaleel et al. 2004,
"UMass at TREC 2004") over the translated query, the post-translation expansion of Ballesteros &
Croft (1997, "Phrasal translation and query expansion techniques for cross-language information
retrieval", SIGIR). Per query the feedback set is the ``--fb-docs`` candidates with the highest
first-stage score (the union's reciprocal-rank fusion, the candidates' order), weighted
uniformly; ``P(w|R)`` is the mean of ``tf(w, d) / |d|`` over them in the document language, its
``--fb-terms`` best terms kept and renormalised; the expanded query is ``theta = lambda *
q(w) + (1 - lambda) * P(w|R)`` with ``q`` the term distribution of ``Q-hat_src``. The column
``rm3-bm25`` is ``sum_w theta(w) * BM25(w, d)`` (k1 1.5, b 0.75, Lucene's idf, statistics over
the whole collection), z-scored per query as the others.

Writes ``OUT/SPLIT`` rerank data for each of the ``--splits`` of a data step, to be read by
``oof_seeds.py run --data OUT`` (and, for the pseudo-query data step with the pseudo collection,
``--weak OUT PSEUDO_COLLECTION``):

    python experiments/rm3_column.py --data runs/default/steps/data-en-sw-<hash> \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection --out runs/r/data-en-sw
"""

from __future__ import annotations

import argparse
import math
from collections import Counter
from pathlib import Path

import numpy as np

from clir.datasets import Collection
from clir.text import get_analyzer
from clir.training import RerankData, RerankQuery, normalise_scores


class FeedbackBM25:
    """BM25 statistics of a collection's analyzed documents, and RM3 over them."""

    def __init__(self, collection: Collection, k1: float = 1.5, b: float = 0.75) -> None:
        analyze = get_analyzer(collection.doc_lang)
        self.tf = {d.docno: Counter(analyze(d.text)) for d in collection.documents}
        self.length = {docno: sum(tf.values()) for docno, tf in self.tf.items()}
        df: Counter[str] = Counter()
        for tf in self.tf.values():
            df.update(tf.keys())
        n = len(self.tf)
        self.idf = {w: math.log(1 + (n - k + 0.5) / (k + 0.5)) for w, k in df.items()}
        self.avgdl = sum(self.length.values()) / max(n, 1)
        self.k1, self.b = k1, b

    def expanded(self, query: RerankQuery, fb_docs: int, fb_terms: int, weight: float) -> dict[str, float]:
        """``theta``: the query's terms mixed with the relevance model of its feedback set."""
        feedback = [query.docnos[i] for i in np.argsort(-query.scores, kind="stable")[:fb_docs]]
        relevance: Counter[str] = Counter()
        for docno in feedback:
            length = self.length[docno] or 1
            for word, count in self.tf[docno].items():
                relevance[word] += count / length / len(feedback)
        best = relevance.most_common(fb_terms)
        mass = sum(p for _, p in best) or 1.0
        theta: Counter[str] = Counter()
        for word in query.query_src:
            theta[word] += weight / len(query.query_src)
        for word, p in best:
            theta[word] += (1 - weight) * p / mass
        return theta

    def score(self, theta: dict[str, float], docno: str) -> float:
        """``sum_w theta(w) * BM25(w, d)``."""
        tf, norm = self.tf[docno], self.k1 * (1 - self.b + self.b * self.length[docno] / self.avgdl)
        return sum(
            weight * self.idf[w] * tf[w] * (self.k1 + 1) / (tf[w] + norm)
            for w, weight in theta.items()
            if tf.get(w)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a data step (SPLIT/ rerank data)")
    parser.add_argument("--collection", type=Path, required=True, help="the collection of its documents")
    parser.add_argument("--splits", nargs="+", default=["train", "dev"])
    parser.add_argument("--fb-docs", type=int, default=10)
    parser.add_argument("--fb-terms", type=int, default=10)
    parser.add_argument("--weight", type=float, default=0.5, help="lambda: the original query's weight")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    bm25 = FeedbackBM25(Collection.load(args.collection))
    for split in args.splits:
        data = RerankData.load(args.data / split)
        for docno, tokens in data.doc_src.items():  # the same analyzer as the data's D_src
            if Counter(tokens) != bm25.tf[docno]:
                raise SystemExit(f"{docno}: the collection's tokens differ from the data's D_src")
        for query in data.queries:
            theta = bm25.expanded(query, args.fb_docs, args.fb_terms, args.weight)
            raw = np.array([bm25.score(theta, docno) for docno in query.docnos])
            column = normalise_scores(raw).astype(np.float32)[:, None]
            query.features = np.hstack([query.features, column])
        data.feature_names = [*data.feature_names, "rm3-bm25"]
        data.save(args.out / split)
        print(f"wrote {args.out / split}: {len(data.queries)} queries, {len(data.feature_names)} columns")


if __name__ == "__main__":
    main()

"""Lexical columns appended to the rerank data (issue 13, levers R and N).

``--column rm3``: a pseudo-relevance feedback column, RM3 (Lavrenko & Croft 2001, "Relevance-based
language models", SIGIR; Abdul-Jaleel et al. 2004, "UMass at TREC 2004") over the translated query,
the post-translation expansion of Ballesteros & Croft (1997, "Phrasal translation and query
expansion techniques for cross-language information retrieval", SIGIR). Per query the feedback set
is the ``--fb-docs`` candidates with the highest first-stage score (the union's reciprocal-rank
fusion, the candidates' order), weighted uniformly; ``P(w|R)`` is the mean of ``tf(w, d) / |d|``
over them in the document language, its ``--fb-terms`` best terms kept and renormalised; the
expanded query is ``theta = lambda * q(w) + (1 - lambda) * P(w|R)`` with ``q`` the term distribution
of ``Q-hat_src``. The column ``rm3-bm25`` is ``sum_w theta(w) * BM25(w, d)`` (k1 1.5, b 0.75,
Lucene's idf, statistics over the whole collection), z-scored per query as the others.

``--column char4``: character 4-gram matching (McNamee & Mayfield 2004, "Character n-gram
tokenization for European language text retrieval", Information Retrieval), which matches the
inflected and prefixed forms of an agglutinative language (Swahili's noun classes, *wakushi* /
*mkushi*; its verb prefixes, *umewaacha* / *acha*). Every analyzed token of ``D_src`` and of
``Q-hat_src`` is cut into the character 4-grams of ``_token_`` (a shorter one is one gram); the
column ``char4-bm25`` is the BM25 of the query's grams (with their multiplicity) over the
documents' grams (k1 1.5, b 0.75, Lucene's idf over the whole collection), z-scored per query.

Writes ``OUT/SPLIT`` rerank data for each of the ``--splits`` of a data step, to be read by
``oof_seeds.py run --data OUT`` (and, for the pseudo-query data step with the pseudo collection,
``--weak OUT PSEUDO_COLLECTION``):

    python experiments/lexical_columns.py --column rm3 --data runs/default/steps/data-en-sw-<hash> \\
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

GRAM = 4


def char_grams(tokens: list[str], n: int = GRAM) -> Counter[str]:
    """The character ``n``-grams of ``_token_`` for every token (a shorter one is one gram)."""
    grams: Counter[str] = Counter()
    for token in tokens:
        marked = f"_{token}_"
        grams.update(marked[i : i + n] for i in range(max(1, len(marked) - n + 1)))
    return grams


class CollectionBM25:
    """BM25 (k1 1.5, b 0.75, Lucene's idf) of weighted query terms over a collection's terms.

    Args:
        tf: ``docno -> term counts`` of every document of the collection.
    """

    def __init__(self, tf: dict[str, Counter[str]], k1: float = 1.5, b: float = 0.75) -> None:
        self.tf = tf
        self.length = {docno: sum(counts.values()) for docno, counts in tf.items()}
        df: Counter[str] = Counter()
        for counts in tf.values():
            df.update(counts.keys())
        n = len(tf)
        self.idf = {w: math.log(1 + (n - k + 0.5) / (k + 0.5)) for w, k in df.items()}
        self.avgdl = sum(self.length.values()) / max(n, 1)
        self.k1, self.b = k1, b

    def score(self, theta: dict[str, float], docno: str) -> float:
        """``sum_w theta(w) * BM25(w, d)``."""
        tf, norm = self.tf[docno], self.k1 * (1 - self.b + self.b * self.length[docno] / self.avgdl)
        return sum(
            weight * self.idf[w] * tf[w] * (self.k1 + 1) / (tf[w] + norm)
            for w, weight in theta.items()
            if tf.get(w)
        )

    def expanded(self, query: RerankQuery, fb_docs: int, fb_terms: int, weight: float) -> dict[str, float]:
        """RM3's ``theta``: the query's terms mixed with the relevance model of its feedback set."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--column", choices=["rm3", "char4"], required=True)
    parser.add_argument("--data", type=Path, required=True, help="a data step (SPLIT/ rerank data)")
    parser.add_argument("--collection", type=Path, required=True, help="the collection of its documents")
    parser.add_argument("--splits", nargs="+", default=["train", "dev"])
    parser.add_argument("--fb-docs", type=int, default=10)
    parser.add_argument("--fb-terms", type=int, default=10)
    parser.add_argument("--weight", type=float, default=0.5, help="lambda: the original query's weight")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    collection = Collection.load(args.collection)
    analyze = get_analyzer(collection.doc_lang)
    tokens = {d.docno: analyze(d.text) for d in collection.documents}
    if args.column == "rm3":
        bm25 = CollectionBM25({docno: Counter(t) for docno, t in tokens.items()})
    else:
        bm25 = CollectionBM25({docno: char_grams(t) for docno, t in tokens.items()})
    for split in args.splits:
        data = RerankData.load(args.data / split)
        for docno, analyzed in data.doc_src.items():  # the same analyzer as the data's D_src
            if analyzed != tokens[docno]:
                raise SystemExit(f"{docno}: the collection's tokens differ from the data's D_src")
        for query in data.queries:
            if args.column == "rm3":
                theta = bm25.expanded(query, args.fb_docs, args.fb_terms, args.weight)
            else:
                theta = char_grams(query.query_src)
            raw = np.array([bm25.score(theta, docno) for docno in query.docnos])
            column = normalise_scores(raw).astype(np.float32)[:, None]
            query.features = np.hstack([query.features, column])
        data.feature_names = [*data.feature_names, f"{args.column}-bm25"]
        data.save(args.out / split)
        print(f"wrote {args.out / split}: {len(data.queries)} queries, {len(data.feature_names)} columns")


if __name__ == "__main__":
    main()

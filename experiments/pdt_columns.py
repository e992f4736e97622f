"""Probabilistic document translation columns in the rerank data (issue 13, lever H).

The translation language model of Xu, Weischedel & Nguyen (2001, "Evaluating a probabilistic
model for cross-lingual information retrieval", SIGIR; Berger & Lafferty 1999): each document
word ``s`` gives every English reading ``e`` the count ``p(e|s)`` (the doc->en IBM Model 1 table
pruned as PSQ prunes, top 10 and 0.9 of the mass; a word without entries counts as itself), where
``D-hat_en`` and the ``dt-*`` first stages take its first reading only. Two columns are appended
to every candidate's features, z-scored per query as the others: ``pdt-ql`` (Dirichlet query
likelihood of ``Q_en``, mu 2500, the background over every document's expected counts) and
``pdt-bm25`` (BM25, k1 1.5, b 0.75, over the expected counts, Lucene's idf of the expected document
frequency ``sum_D min(1, c(e, D))``).

Writes ``OUT/SPLIT`` rerank data for each of the ``--splits`` of a data step, to be read by
``oof_seeds.py run --data OUT`` (and, for the pseudo-query data step with the pseudo collection,
``--weak OUT PSEUDO_COLLECTION``):

    python experiments/pdt_columns.py --data runs/default/steps/data-en-sw-<hash> \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --tables runs/default/steps/tables-en-sw-<hash> --out runs/h/data-en-sw
"""

from __future__ import annotations

import argparse
import math
from collections import Counter, defaultdict
from pathlib import Path

import numpy as np

from clir.datasets import Collection
from clir.text import get_analyzer
from clir.training import RerankData, normalise_scores
from clir.translation import TranslationTable


class ExpectedCounts:
    """Every document's expected English counts and the collection's statistics over them."""

    def __init__(self, collection: Collection, doc_en: TranslationTable) -> None:
        analyze = get_analyzer(collection.doc_lang)
        readings: dict[str, list[tuple[str, float]]] = {}
        self.counts: dict[str, dict[str, float]] = {}
        for document in collection.documents:
            counts: dict[str, float] = defaultdict(float)
            for word in analyze(document.text):
                if word not in readings:
                    readings[word] = doc_en.translations(word) or [(word, 1.0)]
                for english, p in readings[word]:
                    counts[english] += p
            self.counts[document.docno] = counts
        self.cf: Counter[str] = Counter()
        self.df: Counter[str] = Counter()
        for counts in self.counts.values():
            for english, count in counts.items():
                self.cf[english] += count
                self.df[english] += min(1.0, count)
        self.total = sum(self.cf.values())
        self.n = len(self.counts)

    def scores(self, query: list[str], docno: str, mu: float = 2500.0, k1: float = 1.5, b: float = 0.75):
        """``(pdt-ql, pdt-bm25)`` of one candidate."""
        counts = self.counts[docno]
        length = sum(counts.values())
        ql = bm25 = 0.0
        for english in query:
            tf = counts.get(english, 0.0)
            background = (self.cf.get(english, 0.0) + 0.5) / (self.total + 1.0)
            ql += math.log((tf + mu * background) / (length + mu))
            if tf > 0:
                df = self.df[english]
                idf = math.log(1 + (self.n - df + 0.5) / (df + 0.5))
                bm25 += idf * tf * (k1 + 1) / (tf + k1 * (1 - b + b * length * self.n / self.total))
        return ql, bm25


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, required=True, help="a data step (SPLIT/ rerank data)")
    parser.add_argument("--collection", type=Path, required=True, help="the collection of its documents")
    parser.add_argument("--tables", type=Path, required=True, help="the tables step (doc-en/)")
    parser.add_argument("--splits", nargs="+", default=["train", "dev"])
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    doc_en = TranslationTable.load(args.tables / "doc-en").prune(top_k=10, cumulative=0.9)
    expected = ExpectedCounts(Collection.load(args.collection), doc_en)
    for split in args.splits:
        data = RerankData.load(args.data / split)
        for query in data.queries:
            raw = np.array([expected.scores(query.query_en, docno) for docno in query.docnos]).reshape(-1, 2)
            columns = [normalise_scores(raw[:, 0]), normalise_scores(raw[:, 1])]
            query.features = np.hstack([query.features, np.stack(columns, axis=1).astype(np.float32)])
        data.feature_names = [*data.feature_names, "pdt-ql", "pdt-bm25"]
        data.save(args.out / split)
        print(f"wrote {args.out / split}: {len(data.queries)} queries, {len(data.feature_names)} columns")


if __name__ == "__main__":
    main()

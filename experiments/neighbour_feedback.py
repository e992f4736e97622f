"""Score regularisation by the candidates' neighbours, out of fold (issue 13, lever E).

The cluster hypothesis (Diaz 2005, "Regularizing ad hoc retrieval scores", CIKM; Kurland & Lee
2004): a candidate that resembles the reranker's best candidates is more likely relevant. Here
about one en-sw query in five (48 of the 250 train + dev queries) has grade-1 cross-reference
passages besides its own, and they share content with it. Post hoc, no training: per query, ``z``
is the reranker's score z-scored over its candidates, ``T_k`` its top ``k`` candidates, ``f(d)``
the mean cosine of ``d``'s document vector with those of ``T_k`` (``d`` itself included), ``f_z``
that z-scored, and the new score ``z + lambda * f_z``. Document vectors: ``lex``, tf-idf of the
candidate's analyzed document-language tokens (idf over the candidates of the data); ``emb``, the
idf-weighted mean of the shared space's vectors of those tokens.

Reads OOF run files (``oof_seeds.py run``, one per seed: ``ROW@SPACE@sSEED.run``) and selects
``(v, k, lambda)`` by nested cross-validation: for each of 5 folds of the queries, the setting
of highest MAP on the other folds' queries scores the fold. Prints, per seed, the reference MAP,
the selected procedure's OOF MAP and what each fold chose, then the paired randomization test
over the per-query AP averaged over the seeds. ``apply`` writes one run with a fixed setting
(for the zero-shot pairs' dev runs; ``--data`` there is the run's rerank data split):

    python experiments/neighbour_feedback.py select --data runs/default/steps/data-en-sw-<hash> \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection \\
        --space runs/default/steps/space-<hash> --runs runs/oof/full@default@s*.run
    python experiments/neighbour_feedback.py apply --data DATA_STEP/dev --space SPACE \\
        --kind emb --k 3 --lam 0.1 --run RUN --out OUT
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
from collections import Counter
from pathlib import Path

import numpy as np
from fusion_oof import labelled_data
from scipy import sparse

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.evaluation import evaluate_per_query
from clir.evaluation.significance import randomization_test
from clir.formats import read_run, write_run
from clir.training import RerankData

KS = (1, 3, 5)
LAMBDAS = (0.0, 0.05, 0.1, 0.2, 0.3, 0.5)


class DocumentVectors:
    """Unit document vectors of every candidate: ``matrix`` rows in ``index`` order."""

    def __init__(self, index: dict[str, int], matrix: np.ndarray | sparse.csr_matrix) -> None:
        self.index = index
        self.matrix = matrix

    def cosines(self, docnos: list[str], top: np.ndarray) -> np.ndarray:
        """``(len(docnos), len(top))`` cosines of the docnos with ``docnos[top]``."""
        rows = self.matrix[[self.index[d] for d in docnos]]
        product = rows @ rows[top].T
        return np.asarray(product.todense() if sparse.issparse(product) else product, dtype=np.float64)


def document_vectors(data: RerankData, space: SharedSpace | None) -> dict[str, DocumentVectors]:
    """``{"lex" | "emb": DocumentVectors}`` for every candidate of ``data``."""
    docs = data.doc_src
    index = {d: i for i, d in enumerate(docs)}
    df = Counter(t for tokens in docs.values() for t in set(tokens))
    idf = {t: math.log(len(docs) / c) for t, c in df.items()}
    vocab = {t: i for i, t in enumerate(sorted(df))}
    rows, cols, vals = [], [], []
    for row, tokens in enumerate(docs.values()):
        weights = {vocab[t]: (1 + math.log(c)) * idf[t] for t, c in Counter(tokens).items()}
        norm = max(math.sqrt(sum(w * w for w in weights.values())), 1e-12)
        for col, w in weights.items():
            rows.append(row)
            cols.append(col)
            vals.append(w / norm)
    lex = sparse.csr_matrix((vals, (rows, cols)), shape=(len(docs), len(vocab)), dtype=np.float64)
    out = {"lex": DocumentVectors(index, lex)}
    if space is not None:
        emb = np.zeros((len(docs), space.dim), dtype=np.float64)
        for row, tokens in enumerate(docs.values()):
            if not tokens:
                continue
            vectors, oov = space.lookup(data.doc_lang, tokens)
            weights = np.array([idf[t] for t in tokens]) * ~oov
            unit = vectors / np.maximum(np.linalg.norm(vectors, axis=1, keepdims=True), 1e-12)
            vec = (weights[:, None] * unit).sum(0)
            emb[row] = vec / max(np.linalg.norm(vec), 1e-12)
        out["emb"] = DocumentVectors(index, emb)
    return out


def _z(x: np.ndarray) -> np.ndarray:
    sd = x.std()
    return (x - x.mean()) / sd if sd > 0 else x - x.mean()


def regularised(run: dict, vectors: DocumentVectors, k: int, lam: float) -> dict:
    """``run`` with every query's scores replaced by ``z + lam * f_z`` (module docstring)."""
    out = {}
    for qid, scores in run.items():
        docnos = list(scores)
        z = _z(np.array([scores[d] for d in docnos], dtype=np.float64))
        if lam == 0.0:
            out[qid] = dict(zip(docnos, z.tolist(), strict=True))
            continue
        top = np.argsort(-z, kind="stable")[:k]
        f = vectors.cosines(docnos, top).mean(1)
        out[qid] = dict(zip(docnos, (z + lam * _z(f)).tolist(), strict=True))
    return out


def settings(kinds: list[str]) -> list[tuple[str, int, float]]:
    """Every ``(v, k, lambda)`` of the grid; lambda 0 once (it ignores ``v`` and ``k``)."""
    grid = [(v, k, lam) for v, k, lam in itertools.product(kinds, KS, LAMBDAS) if lam > 0]
    return [(kinds[0], 1, 0.0), *grid]


def per_query_ap(run: dict, qrels: dict, qids: list[str]) -> np.ndarray:
    ap = evaluate_per_query(run, qrels, ["AP"])["AP"]
    return np.array([ap[q] for q in qids])


def select(args: argparse.Namespace) -> None:
    data = labelled_data(args.data)
    judged = Collection.load(args.collection).qrels
    qids = list(data.qids)
    qrels = {q: judged[q] for q in qids}
    space = SharedSpace.load(args.space) if args.space else None
    vectors = document_vectors(data, space)
    grid = settings(sorted(vectors, key=["lex", "emb"].index))
    folds = np.random.default_rng(args.fold_seed).permutation(len(qids)) % args.folds
    reference, selected, report = [], [], {}
    for path in sorted(args.runs):
        run = read_run(path)
        aps = np.stack(
            [per_query_ap(regularised(run, vectors[v], k, lam), qrels, qids) for v, k, lam in grid]
        )
        oof = np.zeros(len(qids))
        chosen = []
        for fold in range(args.folds):
            best = int(np.argmax(aps[:, folds != fold].mean(1)))
            oof[folds == fold] = aps[best, folds == fold]
            chosen.append(grid[best])
        whole = grid[int(np.argmax(aps.mean(1)))]
        reference.append(aps[0])
        selected.append(oof)
        report[path.name] = {
            "reference": round(float(aps[0].mean()), 4),
            "selected_oof": round(float(oof.mean()), 4),
            "folds_chose": chosen,
            "best_on_all": whole,
            "best_on_all_map": round(float(aps.mean(1).max()), 4),
        }
        print(json.dumps({path.name: report[path.name]}), flush=True)
    a, b = np.mean(reference, 0), np.mean(selected, 0)
    summary = {
        "diff": round(float(b.mean() - a.mean()), 4),
        "p_randomization": round(randomization_test(a, b), 4),
        "higher_every_seed": all(s.mean() > r.mean() for s, r in zip(selected, reference, strict=True)),
    }
    print(json.dumps({"summary": summary}))


def apply(args: argparse.Namespace) -> None:
    data = RerankData.load(args.data)
    space = SharedSpace.load(args.space) if args.space else None
    vectors = document_vectors(data, space)[args.kind]
    write_run(args.out, regularised(read_run(args.run), vectors, args.k, args.lam))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("select", help="nested selection over OOF run files")
    s.add_argument("--data", type=Path, required=True, help="a data step (train/ and dev/)")
    s.add_argument("--collection", type=Path, required=True)
    s.add_argument("--space", type=Path, help="a shared space (adds the emb vectors)")
    s.add_argument("--runs", type=Path, nargs="+", required=True, help="OOF run files, one per seed")
    s.add_argument("--folds", type=int, default=5)
    s.add_argument("--fold-seed", type=int, default=0)
    a = commands.add_parser("apply", help="one run with a fixed setting")
    a.add_argument("--data", type=Path, required=True, help="rerank data of the run's queries")
    a.add_argument("--space", type=Path)
    a.add_argument("--kind", choices=["lex", "emb"], required=True)
    a.add_argument("--k", type=int, required=True)
    a.add_argument("--lam", type=float, required=True)
    a.add_argument("--run", type=Path, required=True)
    a.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    select(args) if args.command == "select" else apply(args)


if __name__ == "__main__":
    main()

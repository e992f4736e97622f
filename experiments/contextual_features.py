"""Contextual e5 features appended to a rerank data step (issue 13, lever 3; CEDR-style).

MacAvaney, Yates, Cohan, Goharian. "CEDR: Contextualized Embeddings for Document Ranking".
SIGIR 2019: K-NRM over the similarity matrix of contextual token vectors. Here the encoder is
multilingual-e5-small (:class:`~clir.embeddings.e5.E5TokenEncoder`, offline), its word
vectors frozen; each query's keyword text (``"query: "``) is matched against each candidate's
text in the document language (``"passage: "``). Every vector is centred by its side's mean
word vector (the documents' over the candidates encoded, the queries' over the data's queries)
and re-normalised: e5's vectors share a large common component (raw cosines sit in 0.7-0.9), so
uncentred, every kernel but the one at 0.9 ranks at chance. Per (query, candidate), 13 columns,
z-scored over the query's candidates: the 11 K-NRM kernels pooled over windows of 10 document
words (as the default reranker's components), the mean over query words of the best cosine, and
the cosine of the mean vectors. The K-NRM weights over these columns are the fusion layer's.

Writes a copy of the data step with the columns appended (the word vectors are cached under
``--cache``, verified by a digest of what was encoded), to train and cross-validate on like any data step:

    python experiments/contextual_features.py --step runs/default/steps/data-en-sw-<hash> \\
        --collection runs/default/steps/collection-en-sw-<hash>/collection --out runs/ctx/en-sw
    python experiments/contextual_features.py --step runs/default/steps/data-pseudo-en-sw-<hash> \\
        --collection runs/default/steps/pseudo-en-sw-<hash>/collection --out runs/ctx/pseudo
    python experiments/oof_seeds.py run --data runs/ctx/en-sw ... --systems weak-full \\
        --weak runs/ctx/pseudo runs/default/steps/pseudo-en-sw-<hash>/collection --keep runs/ctx/models
    python experiments/oof_seeds.py run --data runs/ctx/en-sw ... --systems full \\
        --init-from runs/ctx/models/weak-full-s0 --seeds 0 1 2 --tag +ctx
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
from pathlib import Path

import numpy as np
import torch

from clir.datasets import Collection
from clir.embeddings.e5 import E5TokenEncoder
from clir.formats.atomic import atomic_write
from clir.rerankers.knrm import kernel_mus, kernel_pooling
from clir.training import RerankData
from clir.training.data import RerankQuery, normalise_scores

WORD = re.compile(r"\w+(?:[-']\w+)*")
MUS = kernel_mus(11)
SIGMAS = [0.001] + [0.1] * 10
WINDOW = 10
NAMES = [*(f"ctx_k{i}" for i in range(len(MUS))), "ctx_maxsim", "ctx_dense"]


def encode(encoder: E5TokenEncoder, texts: dict[str, str], prefix: str, cache: Path) -> dict[str, np.ndarray]:
    """Each text's word vectors (``(n_words, 384)`` float16), cached in ``cache``: reused only
    when its digest (of the model file, the layer, the dtype, the prefix and every text) matches."""
    keys = list(texts)
    digest = hashlib.sha256(encoder.checkpoint.path.read_bytes())
    digest.update(json.dumps([encoder.layer, str(encoder.dtype), prefix, texts]).encode())
    if cache.exists():
        stored = np.load(cache)
        if str(stored["digest"]) == digest.hexdigest():
            offsets, vectors = stored["offsets"], stored["vectors"]
            return {k: vectors[offsets[i] : offsets[i + 1]] for i, k in enumerate(keys)}
    per_text = encoder.encode([WORD.findall(texts[k]) for k in keys], prefix=prefix)
    offsets = np.cumsum([0] + [len(v) for v in per_text])
    vectors = np.concatenate(per_text).astype(np.float16)
    with atomic_write(cache, "wb") as out:
        np.savez(out, digest=digest.hexdigest(), offsets=offsets, vectors=vectors)
    return {k: vectors[offsets[i] : offsets[i + 1]] for i, k in enumerate(keys)}


def centred(vectors: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], dict[str, np.ndarray]]:
    """The word vectors minus their mean word vector, length-normalised; and each text's mean
    centred vector, length-normalised."""
    mean = np.concatenate(list(vectors.values())).astype(np.float32).mean(0)
    words, texts = {}, {}
    for key, v in vectors.items():
        c = v.astype(np.float32) - mean
        words[key] = c / np.linalg.norm(c, axis=1, keepdims=True).clip(1e-6)
        text = c.mean(0) if len(c) else np.zeros_like(mean)
        texts[key] = text / max(float(np.linalg.norm(text)), 1e-6)
    return words, texts


def features(
    query: np.ndarray, docs: list[np.ndarray], query_text: np.ndarray, doc_texts: np.ndarray
) -> np.ndarray:
    """``(len(docs), 13)`` raw columns of one query against its candidates (word vectors, and
    the text vectors of :func:`centred`)."""
    lq, ld = max(1, len(query)), max(1, *(len(d) for d in docs))
    sim = torch.zeros(len(docs), lq, ld)
    d_mask = torch.zeros(len(docs), ld, dtype=torch.bool)
    q = torch.from_numpy(query)
    for j, doc in enumerate(docs):
        sim[j, : len(query), : len(doc)] = q @ torch.from_numpy(doc).T
        d_mask[j, : len(doc)] = True
    q_mask = torch.zeros(len(docs), lq, dtype=torch.bool)
    q_mask[:, : len(query)] = True
    kernels = kernel_pooling(sim, q_mask, d_mask, MUS, SIGMAS, window=WINDOW).numpy()
    best = sim.masked_fill(~d_mask[:, None, :], -1.0).amax(-1)[:, : len(query)]
    maxsim = best.mean(-1).numpy() if len(query) else np.zeros(len(docs))
    return np.column_stack([kernels, maxsim, doc_texts @ query_text])


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--step", type=Path, required=True, help="a data step (train/, dev/[, test/])")
    parser.add_argument("--collection", type=Path, required=True, help="the collection it was built from")
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--cache", type=Path, default=Path("runs/cache/e5-words"))
    parser.add_argument("--layer", type=int, default=-1, help="the encoder's hidden layer (-1: last)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16"])
    args = parser.parse_args()

    collection = Collection.load(args.collection)
    splits = [s for s in ("train", "dev", "test") if (args.step / s).is_dir()]
    data = {s: RerankData.load(args.step / s) for s in splits}
    docnos = sorted({d for part in data.values() for q in part.queries for d in q.docnos})
    qids = [q.qid for part in data.values() for q in part.queries]
    texts = {d.docno: d.text for d in collection.documents}
    keywords = {q.qid: q.text for q in collection.all_queries()}
    encoder = E5TokenEncoder(layer=args.layer, dtype=args.dtype)
    args.cache.mkdir(parents=True, exist_ok=True)
    tag = f"{collection.name}-layer{args.layer}-{args.dtype}"
    doc_texts, query_texts = {d: texts[d] for d in docnos}, {q: keywords[q] for q in qids}
    doc_vectors, doc_pooled = centred(encode(encoder, doc_texts, "passage: ", args.cache / f"{tag}-docs.npz"))
    query_vectors, query_pooled = centred(
        encode(encoder, query_texts, "query: ", args.cache / f"{tag}-queries.npz")
    )
    for split, part in data.items():
        queries = []
        for q in part.queries:
            columns = np.zeros((len(q.docnos), len(NAMES)), dtype=np.float32)  # no candidate: no row
            if q.docnos:
                docs = [doc_vectors[d] for d in q.docnos]
                pooled = np.stack([doc_pooled[d] for d in q.docnos])
                raw = features(query_vectors[q.qid], docs, query_pooled[q.qid], pooled)
                columns = np.column_stack([normalise_scores(raw[:, c]) for c in range(raw.shape[1])])
            queries.append(
                RerankQuery(
                    q.qid, q.query_en, q.query_src, q.idf_en, q.idf_src, q.docnos, q.scores,
                    np.concatenate([q.features, columns.astype(np.float32)], axis=1),
                )
            )  # fmt: skip
        names = [*part.feature_names, *NAMES]
        RerankData(part.doc_lang, queries, part.doc_src, part.doc_en, names, part.query_lang, part.meta).save(
            args.out / split
        )
    for run in args.step.glob("candidates.*.run"):
        (args.out / run.name).write_bytes(run.read_bytes())


if __name__ == "__main__":
    main()

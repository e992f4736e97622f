"""Hubness of a shared space: how unevenly English words appear among other languages' neighbours.

For up to 5,000 of the most frequent words of each language, the k nearest English words by
cosine (NN) and by CSLS; prints JSON per language: skewness of the English words' k-occurrence,
the largest k-occurrence, the share of all neighbour slots taken by the top 1 % of English words
and the share of English words that are never a neighbour.

    python experiments/hubness.py runs/default/steps/space-<hash> [--k 10]
"""

from __future__ import annotations

import argparse
import json

import numpy as np
from scipy.stats import skew

from clir.embeddings import SharedSpace


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=1, keepdims=True).clip(1e-9)


def occurrence_stats(scores: np.ndarray, k: int) -> dict[str, float]:
    neighbours = np.argpartition(-scores, k, axis=1)[:, :k]
    occurrence = np.bincount(neighbours.ravel(), minlength=scores.shape[1])
    hubs = np.sort(occurrence)[::-1][: max(1, scores.shape[1] // 100)]
    return {
        "skew": round(float(skew(occurrence)), 2),
        "max": int(occurrence.max()),
        "top1pct_share": round(float(hubs.sum() / occurrence.sum()), 3),
        "never": round(float((occurrence == 0).mean()), 3),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("space")
    parser.add_argument("--k", type=int, default=10)
    parser.add_argument("--words", type=int, default=5000)
    args = parser.parse_args()
    space = SharedSpace.load(args.space)
    english = unit(space.array("en"))
    out = {}
    for lang in space.languages:
        if lang == "en":
            continue
        source = unit(space.array(lang)[: args.words])
        cosine = source @ english.T
        r_target = np.sort(cosine, axis=1)[:, -args.k :].mean(1)
        r_source = np.sort(cosine.T, axis=1)[:, -args.k :].mean(1)
        csls = 2 * cosine - r_target[:, None] - r_source[None, :]
        out[lang] = {"nn": occurrence_stats(cosine, args.k), "csls": occurrence_stats(csls, args.k)}
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()

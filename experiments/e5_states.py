"""Cache multilingual-e5-small word vectors of a collection's documents and of query files.

Writes a directory (replaced only if it is an earlier output of this script, or with --force):

- ``states.npz`` (no pickles), for each side ``docs`` and ``queries``: ``{side}_ids`` (docnos or
  qids), ``{side}_offsets`` (``n + 1``: the words of item ``i`` are rows ``offsets[i]:offsets[i+1]``),
  ``{side}_words`` (the words, one per row) and ``{side}_vectors`` (``(rows, 384)``, each word's
  L2-normalised mean of its pieces' states, as :meth:`E5TokenEncoder.encode` gives them);
- ``meta.json``: the settings, the counts, ``digest``, a SHA-256 of the model file, the
  settings (the languages, whose analyzers cut the words, among them) and every id and text
  encoded, and ``states_sha256``, the SHA-256 of ``states.npz``. A second run with the same
  inputs finds the digest, checks ``states.npz`` against its SHA-256 and does nothing, so the
  script can sit at the head of any experiment; a ``states.npz`` missing or changed since is
  encoded again.

Words are the analyzer's ``tokenize`` (``--words tokenize``, default: lowercase word tokens, the
ones clir indexes before stopwords and lemmas, so an experiment can match ``analyze``'s terms)
or the whitespace-split text (``--words split``: case and punctuation kept). Documents get the
``passage: `` prefix, queries (``Query.text``, the keywords) ``query: ``.

    flock /tmp/clir-heavy.lock python experiments/e5_states.py data/en-sw \\
        --queries data/en-sw/topics.train.tsv data/en-sw/topics.dev.tsv data/en-sw/topics.test.tsv \\
        --out runs/e5-states/en-sw --dtype bfloat16
"""

from __future__ import annotations

import argparse
import hashlib
import json
from pathlib import Path

import numpy as np

from clir.embeddings.e5 import PREFIXES, E5TokenEncoder
from clir.formats import atomic_directory, read_documents, read_topics
from clir.formats.atomic import check_output
from clir.progress import progress_bar
from clir.text import get_analyzer

CHUNK = 256  # items per call of encode (and per progress step)


def encode_side(encoder: E5TokenEncoder, words: list[list[str]], prefix: str, quiet: bool) -> np.ndarray:
    """Word vectors of every item, concatenated in item order (encoded longest-first in chunks)."""
    order = sorted(range(len(words)), key=lambda i: -len(words[i]))
    vectors: list[np.ndarray | None] = [None] * len(words)
    for start in progress_bar(range(0, len(order), CHUNK), desc=prefix.strip(": "), enabled=not quiet):
        rows = order[start : start + CHUNK]
        for row, array in zip(rows, encoder.encode([words[i] for i in rows], prefix=prefix), strict=True):
            vectors[row] = array
    return np.concatenate([*vectors, np.zeros((0, encoder.dim), np.float32)])  # type: ignore[list-item]


def _sha256(path: Path) -> str:
    """The SHA-256 of a file, read in blocks."""
    digest = hashlib.sha256()
    with path.open("rb") as file:
        for block in iter(lambda: file.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "collection", type=Path, help="a collection directory (documents.jsonl, collection.json)"
    )
    parser.add_argument("--queries", type=Path, nargs="*", default=[], help="topics TSV files")
    parser.add_argument("--out", type=Path, required=True, help="the output directory")
    parser.add_argument("--words", choices=("tokenize", "split"), default="tokenize")
    parser.add_argument("--layer", type=int, default=-1, help="hidden state (-1 = last, 0 = embeddings)")
    parser.add_argument("--dtype", choices=("float32", "bfloat16"), default="float32", help="compute dtype")
    parser.add_argument("--store", choices=("float16", "float32"), default="float16", help="stored dtype")
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--force", action="store_true", help="replace a directory this script did not write")
    parser.add_argument("--quiet", action="store_true")
    args = parser.parse_args()
    check_output(args.out, kind="e5-states", force=args.force)
    documents = read_documents(args.collection / "documents.jsonl")
    queries = [query for path in args.queries for query in read_topics(path)]
    meta_file = json.loads((args.collection / "collection.json").read_text())
    doc_lang, query_lang = meta_file["doc_lang"], meta_file.get("query_lang", "en")
    encoder = E5TokenEncoder(layer=args.layer, dtype=args.dtype, batch_size=args.batch_size)
    settings = {key: getattr(args, key) for key in ("words", "layer", "dtype", "store")}
    settings.update(doc_lang=doc_lang, query_lang=query_lang)  # their analyzers cut the words
    sides = {
        "docs": (doc_lang, PREFIXES[False], [(doc.docno, doc.text) for doc in documents]),
        "queries": (query_lang, PREFIXES[True], [(query.qid, query.text) for query in queries]),
    }
    digest = hashlib.sha256(hashlib.sha256(encoder.checkpoint.path.read_bytes()).digest())
    digest.update(json.dumps([settings, {side: items for side, (_, _, items) in sides.items()}]).encode())
    meta = {"digest": digest.hexdigest(), "model": str(encoder.checkpoint.path), **settings}
    meta_path = args.out / "meta.json"
    if meta_path.is_file() and json.loads(meta_path.read_text()).get("digest") == meta["digest"]:
        found = json.loads(meta_path.read_text()).get("states_sha256")
        states = args.out / "states.npz"
        if states.is_file() and found == _sha256(states):
            print(f"{args.out}: up to date (digest {meta['digest'][:12]})")
            return
        print(f"{args.out}: states.npz is missing or not the one meta.json records: encoding again")
    arrays = {}
    for side, (lang, prefix, items) in sides.items():
        split = get_analyzer(lang).tokenize if args.words == "tokenize" else str.split
        words = [split(text) for _, text in items]
        arrays[f"{side}_ids"] = np.array([key for key, _ in items], dtype=str)
        arrays[f"{side}_offsets"] = np.cumsum([0, *map(len, words)])
        arrays[f"{side}_words"] = np.array([word for item in words for word in item], dtype=str)
        arrays[f"{side}_vectors"] = encode_side(encoder, words, prefix, args.quiet).astype(args.store)
        meta[side] = {"items": len(items), "words": len(arrays[f"{side}_words"])}
    with atomic_directory(args.out, kind="e5-states", force=args.force) as tmp:
        np.savez(tmp / "states.npz", **arrays)
        meta["states_sha256"] = _sha256(tmp / "states.npz")
        (tmp / "meta.json").write_text(json.dumps(meta, indent=2) + "\n")
    print(json.dumps(meta))


if __name__ == "__main__":
    main()

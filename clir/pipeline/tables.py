"""Translation tables of a collection: IBM Model 1 in both directions over its parallel side, or
from an outside aligner's links over the same tokens, or imported from another toolkit."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from contextlib import nullcontext
from pathlib import Path

from clir.datasets import Collection
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_directory, atomic_write
from clir.formats.atomic import check_output, claimed_directory, directory_lock, output_directory
from clir.progress import progress_bar
from clir.text import get_analyzer
from clir.translation import TranslationTable, train_ibm1_both
from clir.translation.alignments import read_links, read_table, tables_from_links, transpose
from clir.types import ParallelPair

EN_DOC, DOC_EN = "en-doc", "doc-en"
PAIR = "pair.json"
"""Written last by a save of both tables: the SHA-256 of each table's ``meta.json`` (which lists
its files' hashes), so that a directory holding one table of a save killed midway and one of an
earlier save is known for it (absent: tables saved before clir wrote it, taken as they are)."""


def holds_tables(path: str | Path) -> bool:
    """Whether ``path`` holds both tables (``en-doc/`` and ``doc-en/``, each with its meta)."""
    return all((Path(path) / name / "meta.json").is_file() for name in (EN_DOC, DOC_EN))


def learn_tables(
    collection: Collection,
    out: str | Path | None = None,
    *,
    iterations: int | None = None,
    seed: int | None = None,
    progress: bool = True,
) -> tuple[TranslationTable, TranslationTable]:
    """Learn p(doc term | English term) and p(English term | doc term) from the parallel side.

    Tables are learned over the analyzers' terms (English stems, document-language lemmas), the
    vocabulary of the indexes. When ``out`` already holds both tables they are loaded instead:
    as they are when neither ``iterations`` nor ``seed`` is given (a user's ``--tables DIR``,
    whatever settings made it); when either is given, only if learned with those settings from
    the same parallel text (its digest, ``parallel_sha256`` in their meta; or by any settings
    from any text when the collection has no parallel text to learn from, or made otherwise:
    from alignments or imported), IBM Model 1 tables of other settings or other text, and tables
    of another language pair, being replaced (``clir baselines --out`` had kept another
    collection's tables, and stopped at another pair's; tables learned before the digest are
    learned again once).

    Args:
        collection: A collection with parallel pairs (never its collection side).
        out: Directory to save the tables to (``out/en-doc``, ``out/doc-en``), or ``None``.
        iterations: EM iterations of IBM Model 1 (``None``: 10, and tables in ``out`` kept).
        seed: Seed of the model (``None``: 0, and tables in ``out`` kept).
        progress: Show progress bars.

    Returns:
        ``(en->doc, doc->en)`` tables.

    Raises:
        ConfigError: If the collection has no parallel text and ``out`` holds no tables (the
            message names ``--tables`` and ``--parallel``).
        FormatError: If its parallel text file holds no pair, or none with words on both sides
            after analysis (naming the file).
    """
    keep = iterations is None and seed is None  # tables given as they are
    iterations, seed = 10 if iterations is None else iterations, seed or 0
    languages = (collection.query_lang, collection.doc_lang)
    # tables of another language pair are other text too when settings are asked for (`clir
    # baselines --collection en-tl --out X` over an en-sw X had stopped, telling to pass tables)
    if (
        out is not None
        and holds_tables(out)
        and (keep or (_pair_problem(out) is None and _languages(out) in (None, languages)))
    ):
        tables = load_tables(out, languages)
        if keep:
            return tables
        digest = parallel_digest(collection.parallel)
        same = all(  # the settings and the text asked for
            t.meta.get("iterations") == iterations
            and t.meta.get("seed") == seed
            and t.meta.get("parallel_sha256") == digest
            for t in tables
        )
        given = any(t.meta.get("model") != "ibm1" for t in tables)  # from alignments or another toolkit
        if same or given or not collection.parallel:
            return tables
    if not collection.parallel and collection.parallel_file is not None:
        raise FormatError(collection.parallel_file, None, "holds no pair to learn translation tables from")
    if not collection.parallel:
        raise ConfigError(
            f"collection {collection.name!r} has no parallel text to learn translation tables from: "
            f"pass --tables DIR (tables written by 'clir tables') or --parallel FILE (English / "
            f"{collection.doc_lang} text, TSV: pair_id, English, {collection.doc_lang})"
        )
    _check_saves(out)  # before the learning, which takes long
    with nullcontext() if out is None else claimed_directory(out, kind="tables"):
        en_doc, doc_en = train_ibm1_both(
            collection.parallel,
            get_analyzer(collection.query_lang),
            get_analyzer(collection.doc_lang),
            iterations=iterations,
            seed=seed,
            progress=progress,
            source=collection.parallel_file,
        )
        digest = parallel_digest(collection.parallel)  # what they were learned from: other text relearns
        for table in (en_doc, doc_en):
            table.meta["parallel_sha256"] = digest
        return _saved((en_doc, doc_en), out)


def parallel_digest(pairs: Sequence[ParallelPair]) -> str:
    """The SHA-256 of a parallel text as IBM Model 1 reads it: each pair's English and
    document-language text, in order (pair ids left out)."""
    digest = hashlib.sha256()
    for pair in pairs:
        for text in (pair.source, pair.target):
            data = text.encode("utf-8")
            digest.update(len(data).to_bytes(8, "little") + data)
    return digest.hexdigest()


def load_tables(
    path: str | Path, languages: tuple[str, str] | None = None
) -> tuple[TranslationTable, TranslationTable]:
    """Load the ``(en->doc, doc->en)`` tables saved by :func:`learn_tables` (``clir tables``).

    Args:
        path: The tables' directory.
        languages: ``(query language, document language)`` the tables must translate between
            (a collection's), or ``None``.

    Raises:
        DataNotFoundError: If ``path`` is not a directory.
        ConfigError: If the tables translate between other languages (e.g. English-Tagalog
            tables given for a Swahili collection: every translation would be silently wrong).
        FormatError: If ``doc-en`` is not the reverse of ``en-doc`` (e.g. a copy of it, or of
            another pair's table), naming its ``meta.json``.
    """
    if not Path(path).is_dir():
        raise DataNotFoundError(f"{path}: no translation tables directory (one written by 'clir tables')")
    if (problem := _pair_problem(path)) is not None:
        raise FormatError(
            Path(path) / PAIR,
            None,
            f"{problem}: en-doc and doc-en may come from two different saves (one killed between "
            "them); learn the tables again ('clir tables --out')",
        )
    tables = TranslationTable.load(Path(path) / EN_DOC), TranslationTable.load(Path(path) / DOC_EN)
    found = (tables[0].source_lang, tables[0].target_lang)
    if (tables[1].target_lang, tables[1].source_lang) != found:  # DT had used it as it was
        raise FormatError(
            Path(path) / DOC_EN / "meta.json",
            None,
            f"translates {tables[1].source_lang}-{tables[1].target_lang}, not {found[1]}-{found[0]} "
            f"(the reverse of {EN_DOC}, {found[0]}-{found[1]})",
        )
    if languages is not None and found != tuple(languages):
        query_lang, doc_lang = languages
        raise ConfigError(
            f"{path}: translation tables of {found[0]}-{found[1]}, the collection's queries are in "
            f"{query_lang!r} and its documents in {doc_lang!r}: pass tables of {query_lang}-{doc_lang}"
        )
    return tables


def parallel_tokens(
    collection: Collection, progress: bool = False
) -> tuple[list[list[str]], list[list[str]]]:
    """The analyzed tokens of the parallel side, English then the document language, pair by pair:
    the tokens IBM Model 1 learns from and an outside aligner must align (:func:`write_tokens`)."""
    analyzers = get_analyzer(collection.query_lang), get_analyzer(collection.doc_lang)
    sides: tuple[list[list[str]], list[list[str]]] = ([], [])
    for pair in progress_bar(collection.parallel, desc="analyze parallel text", enabled=progress):
        sides[0].append(list(analyzers[0].analyze(pair.source)))
        sides[1].append(list(analyzers[1].analyze(pair.target)))
    return sides


def write_tokens(
    collection: Collection, out: str | Path, progress: bool = False, force: bool = False
) -> Path:
    """Write the parallel side's analyzed tokens for an aligner: ``out/en.txt`` and
    ``out/doc.txt``, one pair per line, tokens separated by spaces (empty lines kept), e.g.
    ``eflomal-align -s en.txt -t doc.txt -f en-doc.links -r doc-en.links``. ``force`` writes
    over a directory that clir did not write, moved aside (see :func:`atomic_directory`).

    Raises:
        ConfigError: If the collection has no parallel text.
    """
    _need_parallel(collection)
    en, doc = parallel_tokens(collection, progress)
    with atomic_directory(out, kind="aligner-input", force=force) as tmp:
        for name, side in (("en.txt", en), ("doc.txt", doc)):
            with atomic_write(tmp / name) as handle:
                handle.writelines(" ".join(tokens) + "\n" for tokens in side)
    return Path(out)


def tables_from_alignments(
    collection: Collection, links: Sequence[str | Path], out: str | Path | None = None, progress: bool = False
) -> tuple[TranslationTable, TranslationTable]:
    """``(en->doc, doc->en)`` tables from an aligner's links over the tokens of
    :func:`write_tokens` (Pharaoh ``i-j`` lines, English the source; see
    :func:`clir.translation.alignments.tables_from_links`), saved to ``out`` when given.

    Raises:
        ConfigError: If the collection has no parallel text.
        FormatError: If a links file does not fit the tokens.
    """
    _need_parallel(collection)
    en, doc = parallel_tokens(collection, progress)
    tables = tables_from_links(
        en, doc, [(path, read_links(path)) for path in links], collection.query_lang, collection.doc_lang
    )
    return _saved(tables, out)


def import_tables(
    collection: Collection,
    en_doc: str | Path,
    doc_en: str | Path | None = None,
    out: str | Path | None = None,
) -> tuple[TranslationTable, TranslationTable]:
    """``(en->doc, doc->en)`` tables read from other toolkits' files (TSV or JSON, see
    :func:`clir.translation.alignments.read_table`), their words mapped to the collection's
    index terms by its analyzers; without ``doc_en`` the reverse is ``en_doc`` transposed.
    Saved to ``out`` when given."""
    en, doc = get_analyzer(collection.query_lang), get_analyzer(collection.doc_lang)
    forward = read_table(
        en_doc, collection.query_lang, collection.doc_lang, source_analyzer=en, target_analyzer=doc
    )
    if doc_en is None:
        backward = transpose(forward)
    else:
        backward = read_table(
            doc_en, collection.doc_lang, collection.query_lang, source_analyzer=doc, target_analyzer=en
        )
    return _saved((forward, backward), out)


def _need_parallel(collection: Collection) -> None:
    if not collection.parallel:
        raise ConfigError(
            f"collection {collection.name!r} has no parallel text to align: pass --parallel FILE (TSV: "
            f"pair_id, English, {collection.doc_lang})"
        )


def _check_saves(out: str | Path | None) -> None:
    """Refuse, before any work, tables in ``out`` that their saves would not replace (a user's
    file in one of them: the first save had gone in and the second refused, leaving a half-saved
    pair)."""
    if out is not None and Path(out).is_dir():
        for name in (EN_DOC, DOC_EN):
            check_output(Path(out) / name, kind="translation-table")


def _saved(
    tables: tuple[TranslationTable, TranslationTable], out: str | Path | None
) -> tuple[TranslationTable, TranslationTable]:
    _check_saves(out)
    if out is not None:  # pair.json first marks a save under way, last records the pair saved
        output_directory(out, kind="tables")
        # two runs at once save one pair after the other, not a mix of both (the lock is on the
        # parent: each table's own save locks ``out`` while it swaps itself in)
        with directory_lock(Path(out).resolve().parent):
            _write_pair(out, {"saving": True})
            tables[0].save(Path(out) / EN_DOC)
            tables[1].save(Path(out) / DOC_EN)
            _write_pair(out, {name: _sha256(Path(out) / name / "meta.json") for name in (EN_DOC, DOC_EN)})
    return tables


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write_pair(out: str | Path, value: dict) -> None:
    with atomic_write(Path(out) / PAIR) as handle:
        handle.write(json.dumps(value, indent=1) + "\n")


def _languages(path: str | Path) -> tuple[str, str] | None:
    """The ``(source, target)`` languages that ``path``'s ``en-doc`` table records (``None``: its
    ``meta.json`` is unreadable, which :func:`load_tables` reports)."""
    try:
        meta = json.loads((Path(path) / EN_DOC / "meta.json").read_text(encoding="utf-8"))
        return meta["source_lang"], meta["target_lang"]
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _pair_problem(path: str | Path) -> str | None:
    """What is wrong with the tables directory's :data:`PAIR` record, in words (``None``: nothing,
    or no record: tables saved before clir wrote one)."""
    try:
        pair = json.loads((Path(path) / PAIR).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as error:
        return f"not readable ({error})"
    if not isinstance(pair, dict) or pair.get("saving"):
        return "the save that wrote these tables was interrupted"
    for name in (EN_DOC, DOC_EN):
        try:
            if pair.get(name) != _sha256(Path(path) / name / "meta.json"):
                return f"{name}/meta.json is not the one saved with the other table"
        except OSError:
            return f"{name}/meta.json is missing"
    return None

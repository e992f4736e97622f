"""Translation tables of a collection: IBM Model 1 in both directions over its parallel side."""

from __future__ import annotations

from pathlib import Path

from clir.datasets import Collection
from clir.errors import ConfigError, DataNotFoundError
from clir.formats.atomic import output_directory
from clir.text import get_analyzer
from clir.translation import TranslationTable, train_ibm1_both

EN_DOC, DOC_EN = "en-doc", "doc-en"


def learn_tables(
    collection: Collection,
    out: str | Path | None = None,
    *,
    iterations: int = 10,
    seed: int = 0,
    progress: bool = True,
) -> tuple[TranslationTable, TranslationTable]:
    """Learn p(doc term | English term) and p(English term | doc term) from the parallel side.

    Tables are learned over the analyzers' terms (English stems, document-language lemmas), the
    vocabulary of the indexes. When ``out`` already holds both tables, learned with the same
    ``iterations`` and ``seed`` (or by any settings, when the collection has no parallel text to
    learn from), they are loaded instead (tables of other settings are replaced).

    Args:
        collection: A collection with parallel pairs (never its collection side).
        out: Directory to save the tables to (``out/en-doc``, ``out/doc-en``), or ``None``.
        iterations: EM iterations of IBM Model 1.
        seed: Seed of the model.
        progress: Show progress bars.

    Returns:
        ``(en->doc, doc->en)`` tables.

    Raises:
        ConfigError: If the collection has no parallel text and ``out`` holds no tables (the
            message names ``--tables`` and ``--parallel``).
    """
    if out is not None and all((Path(out) / name / "meta.json").is_file() for name in (EN_DOC, DOC_EN)):
        tables = load_tables(out)
        same = all(t.meta.get("iterations") == iterations and t.meta.get("seed") == seed for t in tables)
        if same or not collection.parallel:
            return tables
    if not collection.parallel:
        raise ConfigError(
            f"collection {collection.name!r} has no parallel text to learn translation tables from: "
            f"pass --tables DIR (tables written by 'clir tables') or --parallel FILE (English / "
            f"{collection.doc_lang} text, TSV: pair_id, English, {collection.doc_lang})"
        )
    if out is not None:
        output_directory(out, kind="tables")
    en_doc, doc_en = train_ibm1_both(
        collection.parallel,
        get_analyzer(collection.query_lang),
        get_analyzer(collection.doc_lang),
        iterations=iterations,
        seed=seed,
        progress=progress,
    )
    if out is not None:
        en_doc.save(Path(out) / EN_DOC)
        doc_en.save(Path(out) / DOC_EN)
    return en_doc, doc_en


def load_tables(path: str | Path) -> tuple[TranslationTable, TranslationTable]:
    """Load the ``(en->doc, doc->en)`` tables saved by :func:`learn_tables` (``clir tables``).

    Raises:
        DataNotFoundError: If ``path`` is not a directory.
    """
    if not Path(path).is_dir():
        raise DataNotFoundError(f"{path}: no translation tables directory (one written by 'clir tables')")
    return TranslationTable.load(Path(path) / EN_DOC), TranslationTable.load(Path(path) / DOC_EN)

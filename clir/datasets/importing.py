"""Bring your own collection: documents, topics and qrels from files in common layouts, or an
ir_datasets dataset, written as a clir collection directory (``clir data import``, ``clir data
irds``).

>>> from clir.datasets import ImportConfig, import_collection
>>> import_collection(                                              # doctest: +SKIP
...     "data/mine", documents="corpus.jsonl", topics={"test": "topics.xml"}, qrels=["qrels.txt"],
...     doc_lang="so", config=ImportConfig(docno_field="_id", text_fields=("title", "text")))

The layouts (see :mod:`clir.formats.layouts`) are told from each file's first line unless
named; documents are streamed, never all held in memory.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any

from clir.config import NonEmpty, OneOf, Section
from clir.datasets.collection import save_collection
from clir.datasets.irds import ir_dataset_parts
from clir.errors import ConfigError, FormatError
from clir.formats import read_parallel
from clir.formats.layouts import TOPIC_FIELDS, iter_documents_as, read_qrels_as, read_topics_as, sniff_format
from clir.types import Document, Qrels, Query


@dataclass(frozen=True)
class ImportConfig(Section):
    """How the files of a collection are read.

    Attributes:
        documents_layout: ``"auto"`` (from the first line), ``"jsonl"`` or ``"tsv"``
            (``docno<TAB>text``).
        docno_field: JSON field of the document id (BEIR: ``_id``; Pyserini: ``id``).
        text_fields: JSON fields joined with a space into the document text, e.g.
            ``("title", "text")``.
        topics_layout: ``"auto"``, ``"tsv"`` (``qid<TAB>text[<TAB>description]``), ``"jsonl"``
            or ``"trec"`` (TREC topic SGML or XML).
        qid_field: JSON field of the qid (default ``qid``; TREC topics: ``<num>`` or the
            ``number`` attribute).
        query_field: The searched text: JSON field (default ``text``) or TREC element (default
            ``title``).
        description_field: The long form: JSON field (default ``description``) or TREC element
            (default ``desc`` / ``description``).
        qrels_layout: ``"auto"``, ``"trec"`` or ``"tsv"`` (``qid<TAB>docno<TAB>relevance``).
    """

    documents_layout: Annotated[str, OneOf(("auto", "jsonl", "tsv"))] = "auto"
    docno_field: str = "docno"
    text_fields: Annotated[tuple[str, ...], NonEmpty()] = ("text",)
    topics_layout: Annotated[str, OneOf(("auto", "tsv", "jsonl", "trec"))] = "auto"
    qid_field: str | None = None
    query_field: str | None = None
    description_field: str | None = None
    qrels_layout: Annotated[str, OneOf(("auto", "trec", "tsv"))] = "auto"


def _layout(path: str | Path, layout: str, kind: str) -> str:
    return sniff_format(path, kind) if layout == "auto" else layout


def read_topic_files(
    topics: Mapping[str, str | Path], config: ImportConfig = ImportConfig()
) -> dict[str, list[Query]]:
    """The queries of each split, read from its file.

    Raises:
        FormatError: On a bad file, or a qid in two splits' files.
    """
    layouts = {split: _layout(path, config.topics_layout, "topics") for split, path in topics.items()}
    for name in ("qid_field", "query_field", "description_field"):  # ignored, silently, until 2026-12-07
        if getattr(config, name) is not None and not any(name in TOPIC_FIELDS[x] for x in layouts.values()):
            raise ConfigError(
                f"--{name.replace('_', '-')} names a field that no --topics file has: their layouts "
                f"({', '.join(sorted(set(layouts.values())))}) have none (TSV is read by column: qid, "
                "text, description; a TREC topic's qid is its number attribute or <num>)"
            )
    queries: dict[str, list[Query]] = {}
    owner: dict[str, tuple[str, Path]] = {}
    for split, path in topics.items():
        path = Path(path)
        queries[split] = read_topics_as(
            path,
            layouts[split],
            qid_field=config.qid_field,
            query_field=config.query_field,
            description_field=config.description_field,
        )
        if not queries[split]:
            raise FormatError(path, None, "holds no topic")
        for query in queries[split]:
            if query.qid in owner:
                other_split, other = owner[query.qid]
                raise FormatError(
                    path,
                    None,
                    f"qid {query.qid!r} of split {split!r} is also in {other} (split {other_split!r})",
                )
            owner[query.qid] = (split, path)
    return queries


def read_qrels_files(paths: Sequence[str | Path], config: ImportConfig = ImportConfig()) -> Qrels:
    """The judgements of several qrels files, merged.

    Raises:
        FormatError: On a bad file, or a (qid, docno) judged in two files.
    """
    qrels: Qrels = {}
    for path in paths:
        for qid, judged in read_qrels_as(path, _layout(path, config.qrels_layout, "qrels")).items():
            merged = qrels.setdefault(qid, {})
            twice = sorted(set(merged) & set(judged))
            if twice:
                raise FormatError(
                    path, None, f"query {qid!r}: {twice[0]!r} is also judged in an earlier qrels file"
                )
            merged.update(judged)
    return qrels


def import_collection(
    out: str | Path,
    *,
    documents: str | Path,
    topics: Mapping[str, str | Path],
    qrels: Sequence[str | Path],
    doc_lang: str,
    query_lang: str = "en",
    name: str | None = None,
    parallel: str | Path | None = None,
    config: ImportConfig = ImportConfig(),
    xml: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Write a clir collection directory from a user's files (``clir data import``).

    Args:
        out: The collection directory (written atomically; see
            :func:`~clir.datasets.collection.save_collection`).
        documents: The documents file (JSONL or TSV, ``.gz`` allowed), streamed.
        topics: ``split -> topics file`` (e.g. ``{"test": "topics.xml"}``).
        qrels: Qrels files (TREC or TSV), merged.
        doc_lang: Language code of the documents (picks their analyzer).
        query_lang: Language code of the queries.
        name: The collection's name (default: ``out``'s name).
        parallel: A ``pair_id<TAB>English<TAB>doc language`` file to learn translation tables
            from (copied into the collection as ``parallel.tsv``).
        config: Layouts and field names.
        xml: Also write the topics as TREC XML.
        force: Replace a directory that is not a saved collection.

    Returns:
        The collection's statistics.
    """
    layout = _layout(documents, config.documents_layout, "documents")
    defaults = ImportConfig()
    if layout == "tsv" and (config.docno_field, config.text_fields) != (
        defaults.docno_field,
        defaults.text_fields,
    ):
        raise ConfigError(  # ignored, silently, until 2026-12-07
            f"--docno-field / --text-field name JSON fields, but --documents {documents} is TSV, read by "
            "column (docno, text)"
        )
    source = {"documents": str(documents), "topics": {s: str(p) for s, p in topics.items()}}
    source["qrels"] = [str(p) for p in qrels]
    if parallel is not None:
        source["parallel"] = str(parallel)
    rows = iter_documents_as(
        documents, layout, docno_field=config.docno_field, text_fields=config.text_fields
    )
    return save_collection(
        out,
        name=name or Path(out).name,
        doc_lang=doc_lang,
        query_lang=query_lang,
        documents=_not_empty(rows, documents),
        queries=read_topic_files(topics, config),
        qrels=read_qrels_files(qrels, config),
        parallel=read_parallel(parallel) if parallel is not None else [],
        metadata={"type": "import", "source": source, "parameters": config.to_dict()},
        xml=xml,
        force=force,
    )


def _not_empty(documents: Iterator[Document], path: str | Path) -> Iterator[Document]:
    """``documents``, then an error naming ``path`` if there were none (the error had named the
    output, ``OUT/documents.jsonl: not written: no document``)."""
    empty = True
    for document in documents:
        empty = False
        yield document
    if empty:
        raise FormatError(path, None, "holds no document")


def save_ir_dataset(
    dataset_id: str,
    out: str | Path,
    *,
    doc_lang: str | None = None,
    fields: Sequence[str] | None = None,
    query_field: str | None = None,
    query_lang: str | None = None,
    split: str = "test",
    name: str | None = None,
    force: bool = False,
) -> dict[str, Any]:
    """``clir data irds``: write an ir_datasets dataset as a clir collection directory, streaming
    its documents (see :func:`~clir.datasets.irds.ir_dataset_parts` for the arguments).

    Args:
        split: The split its queries form.
        name: The collection's name (default: the dataset id, ``/`` as ``-``).
        force: Replace a directory that is not a saved collection.

    Returns:
        The collection's statistics.
    """
    parts = ir_dataset_parts(
        dataset_id, doc_lang=doc_lang, fields=fields, query_field=query_field, query_lang=query_lang
    )
    return save_collection(
        out,
        name=name or dataset_id.replace("/", "-"),
        doc_lang=parts.doc_lang,
        query_lang=parts.query_lang,
        documents=parts.documents,
        queries={split: parts.queries},
        qrels=parts.qrels,
        metadata=parts.metadata,
        force=force,
    )

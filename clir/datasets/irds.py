"""Collections from ir_datasets (HC4, NeuCLIR, MIRACL, Mr. TyDi, CLIRMatrix, CIRAL, ...).

``ir_datasets`` (the optional extra ``irds``) downloads and caches a dataset on first use, as
PyTerrier's ``irds:`` and Patapsco's ``format: irds`` do; clir reads its documents, queries and
qrels by the dataset's id:

>>> Collection.from_ir_datasets("hc4/fa/test")                         # doctest: +SKIP
>>> save_ir_dataset("neuclir/1/fa/trec-2022", "data/neuclir-fa")      # doctest: +SKIP

(:func:`~clir.datasets.importing.save_ir_dataset`, ``clir data irds``).

A document's text is its ``default_text()`` (title and text for HC4 / NeuCLIR / MIRACL) unless
``fields`` names the fields to join; a query's text is its ``default_text()`` (the English
``title`` of HC4 / NeuCLIR topics) unless ``query_field`` names another (e.g. ``description``),
and its long form is its ``description`` field where it has one. The queries of one id form one
split (``test`` by default). Documents are streamed when saved (NeuCLIR has millions).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any, NamedTuple

from clir.errors import ClirError, ConfigError, DataNotFoundError, MissingDependencyError
from clir.types import Document, Qrels, Query


class IrdsParts(NamedTuple):
    """What a collection needs from an ir_datasets dataset: documents (an iterator, read once),
    queries, qrels, the languages and ``collection.json`` metadata."""

    documents: Iterator[Document]
    queries: list[Query]
    qrels: Qrels
    doc_lang: str
    query_lang: str
    metadata: dict[str, Any]


def _load(dataset_id: str) -> Any:
    try:
        import ir_datasets
    except ImportError:
        raise MissingDependencyError("ir_datasets", "irds", "reading ir_datasets collections") from None
    try:
        return ir_datasets.load(dataset_id)
    except KeyError:
        raise DataNotFoundError(
            f"ir_datasets has no dataset {dataset_id!r}; ids look like 'hc4/fa/test', "
            "'neuclir/1/fa/trec-2022', 'miracl/sw/dev' (see ir_datasets.registry)"
        ) from None


@contextmanager
def _fetched(dataset_id: str) -> Iterator[None]:
    """Reading a dataset's files, which ir_datasets downloads on first use: a failed download
    (no network, a moved URL) is a :class:`DataNotFoundError` naming the dataset and where
    ir_datasets keeps what it has (its own log lines of the retries still print before it)."""
    try:
        yield
    except ClirError:
        raise
    except OSError as error:  # requests' ConnectionError is one
        raise DataNotFoundError(
            f"ir_datasets dataset {dataset_id!r} is not in its cache (~/.ir_datasets, or "
            f"$IR_DATASETS_HOME) and could not be downloaded: {type(error).__name__}: "
            f"{' '.join(str(error).split())[:200]}"
        ) from None
    except (RuntimeError, ValueError) as error:  # its parsers on a malformed file (a local one)
        raise ConfigError(
            f"ir_datasets dataset {dataset_id!r}: ir_datasets could not read its files "
            f"({type(error).__name__}: {' '.join(str(error).split())[:200]}); check the files it was "
            "registered with, or those in its cache (~/.ir_datasets, or $IR_DATASETS_HOME)"
        ) from None


def _text(record: Any, fields: Sequence[str] | None, what: str, option: str) -> str:
    if not fields:
        if hasattr(record, "default_text"):
            return record.default_text()
        if not hasattr(record, "text"):  # had been an unexpected AttributeError
            raise ConfigError(
                f"{what} of this dataset have neither default_text() nor a 'text' field: name the "
                f"fields to read with {option}; their fields: {', '.join(getattr(record, '_fields', ()))}"
            )
        return record.text
    missing = [name for name in fields if name not in record._fields]
    if missing:
        raise ConfigError(
            f"{option}: {what} of this dataset have no field {missing[0]!r}; their fields: "
            f"{', '.join(record._fields)}"
        )
    values = (getattr(record, name) for name in fields)  # a None field is empty, not the word "None"
    return " ".join(str(value) for value in values if value is not None and str(value).strip())


def _grade(dataset_id: str, qrel: Any) -> int:
    """A judgement's relevance as clir's qrels hold it, an integer (``2``, ``2.0`` or ``"2"``):
    ``int`` had made a grade of 0.5 a 0 (a relevant document non-relevant), silently, and one of
    ``"high"`` an unexpected ValueError."""
    value = qrel.relevance
    try:
        grade = int(value)
        exact = not isinstance(value, bool) and grade == float(value)
    except (TypeError, ValueError, OverflowError):
        exact = False
    if not exact:
        raise ConfigError(
            f"ir_datasets dataset {dataset_id!r}: the relevance of document {str(qrel.doc_id)!r} for "
            f"query {str(qrel.query_id)!r} is {value!r}; clir's qrels hold integer grades"
        )
    return grade


def ir_dataset_parts(
    dataset_id: str,
    *,
    doc_lang: str | None = None,
    fields: Sequence[str] | None = None,
    query_field: str | None = None,
    query_lang: str | None = None,
) -> IrdsParts:
    """Read an ir_datasets dataset as the parts of a clir collection.

    Args:
        dataset_id: The dataset's id, e.g. ``"hc4/sw/..."``, ``"miracl/sw/dev"``.
        doc_lang: Language of the documents (default: the dataset's ``docs_lang()``).
        fields: Document fields joined into the text (default: each document's
            ``default_text()``).
        query_field: The query field searched (default: each query's ``default_text()``).
        query_lang: Language of the queries (default: the dataset's ``queries_lang()``, else
            ``"en"``; MIRACL's queries are in the documents' language).

    Raises:
        MissingDependencyError: Without ``ir_datasets``.
        DataNotFoundError: For an unknown id, or a dataset neither cached nor downloadable.
        ConfigError: If the dataset has no documents or queries, its language is unknown and
            ``doc_lang`` not given, a named field does not exist, or a relevance is no integer.
    """
    dataset = _load(dataset_id)
    for part in ("docs", "queries"):
        if not getattr(dataset, f"has_{part}")():
            raise ConfigError(f"ir_datasets dataset {dataset_id!r} has no {part}; a collection needs both")
    doc_lang = doc_lang or dataset.docs_lang()
    if not doc_lang:
        raise ConfigError(
            f"ir_datasets dataset {dataset_id!r} does not say its language: pass --doc-lang LANG"
        )
    with _fetched(dataset_id):
        queries = [
            Query(
                str(q.query_id),
                _text(q, [query_field] if query_field else None, "queries", "--query-field"),
                str(getattr(q, "description", "") or ""),
            )
            for q in dataset.queries_iter()
        ]
        qrels: Qrels = {}
        if dataset.has_qrels():
            for qrel in dataset.qrels_iter():
                judged = qrels.setdefault(str(qrel.query_id), {})
                if str(qrel.doc_id) in judged:  # the last grade had won, silently
                    raise ConfigError(
                        f"ir_datasets dataset {dataset_id!r}: document {str(qrel.doc_id)!r} is judged "
                        f"twice for query {str(qrel.query_id)!r}, as clir's qrels reader refuses"
                    )
                judged[str(qrel.doc_id)] = _grade(dataset_id, qrel)

    def documents() -> Iterator[Document]:
        with _fetched(dataset_id):
            for doc in dataset.docs_iter():
                yield Document(str(doc.doc_id), _text(doc, fields, "documents", "--field"))

    metadata = {
        "type": "ir_datasets",
        "source": {"ir_datasets": dataset_id},
        "parameters": {"fields": list(fields) if fields else None, "query_field": query_field},
    }
    query_lang = query_lang or dataset.queries_lang() or "en"
    return IrdsParts(documents(), queries, qrels, doc_lang, query_lang, metadata)

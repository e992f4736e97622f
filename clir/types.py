"""Typed records shared by every layer: one name for each thing everywhere.

``qid`` names a query, ``docno`` a document, ``score`` a retrieval score and ``relevance`` a
graded judgement. Runs and qrels are nested dicts (``qid -> docno -> value``), the shape
ir_measures and pytrec_eval take directly.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, NamedTuple

if TYPE_CHECKING:  # annotations only: this module imports no numpy
    import numpy as np

Run = dict[str, dict[str, float]]
"""A ranked run: ``run[qid][docno] = score`` (higher is better)."""

Qrels = dict[str, dict[str, int]]
"""Relevance judgements: ``qrels[qid][docno] = relevance`` (0 = judged non-relevant)."""


@dataclass(frozen=True, slots=True)
class Document:
    """A document of a collection.

    Attributes:
        docno: Unique document id.
        text: The document's text in its own language.
        fields: Further named text fields, e.g. ``{"text_en": "..."}`` for a translation.
    """

    docno: str
    text: str
    fields: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Query:
    """A query (topic).

    Attributes:
        qid: Unique query id.
        text: The query as it is searched: the short keyword form.
        description: A longer natural-language form (empty when there is none).
    """

    qid: str
    text: str
    description: str = ""


class Qrel(NamedTuple):
    """One relevance judgement."""

    qid: str
    docno: str
    relevance: int


class ScoredDoc(NamedTuple):
    """One line of a run."""

    qid: str
    docno: str
    score: float


class ParallelPair(NamedTuple):
    """One aligned pair of texts (e.g. a verse), ``source`` in English."""

    pair_id: str
    source: str
    target: str


@dataclass(frozen=True)
class MatrixSources:
    """Where the rows of an embedding matrix come from (what a shared space's ``matrix`` copies),
    for a caller that gathers them elsewhere, e.g. on a GPU.

    Attributes:
        tables: Per language of the entries, its in-vocabulary vectors ``(V, dim)`` float32.
        table: ``int64`` (n,) the table of each entry's row (-1: none, a zero or composed row).
        row: ``int64`` (n,) its row in that table.
        composed: Entry position -> the subword-composed vector of an unseen word.
        dim: Vector dimension.
    """

    tables: list[np.ndarray]
    table: np.ndarray
    row: np.ndarray
    composed: dict[int, np.ndarray]
    dim: int

    def table_rows(self) -> int:
        """Rows of all the tables together (what copying them moves)."""
        return sum(len(t) for t in self.tables)

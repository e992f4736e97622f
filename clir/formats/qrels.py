"""TREC qrels: ``qid iteration docno relevance``, whitespace-separated."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clir.errors import FormatError
from clir.formats._lines import fields_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.types import Qrel, Qrels


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file into ``qrels[qid][docno] = relevance``.

    Raises:
        FormatError: On a malformed line or a docno judged twice for one query.
    """
    qrels: Qrels = {}
    for number, line in numbered_lines(path):
        qid, _iteration, docno, rel = fields_of(path, number, line, None, 4, "qid iter docno relevance")
        try:
            relevance = int(rel)
        except ValueError:
            raise FormatError(path, number, f"relevance must be an integer, got {rel!r}") from None
        judged = qrels.setdefault(qid, {})
        if docno in judged:
            raise FormatError(path, number, f"document {docno!r} judged twice for query {qid!r}")
        judged[docno] = relevance
    return qrels


def write_qrels(path: str | Path, qrels: Qrels | Iterable[Qrel]) -> None:
    """Write qrels in TREC format (atomically), sorted by qid then docno."""
    rows = _as_qrel_rows(qrels)
    with atomic_write(path) as out:
        for qrel in sorted(rows):
            out.write(f"{qrel.qid} 0 {qrel.docno} {qrel.relevance}\n")


def _as_qrel_rows(qrels: Qrels | Iterable[Qrel]) -> list[Qrel]:
    if isinstance(qrels, dict):
        return [Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    return [Qrel(*row) for row in qrels]

"""TREC qrels: ``qid iteration docno relevance``, whitespace-separated."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from pathlib import Path

import numpy as np

from clir.errors import ConfigError, FormatError
from clir.formats._lines import GRADES, fields_of, integer_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import Qrel, Qrels


def read_qrels(path: str | Path) -> Qrels:
    """Read a TREC qrels file into ``qrels[qid][docno] = relevance``.

    Raises:
        FormatError: On a malformed line, an invalid qid or docno (see
            :mod:`clir.formats.identifiers`), a relevance that is not an integer, or a docno
            judged twice for one query.
    """
    qrels: Qrels = {}
    for number, line in numbered_lines(path):
        qid, _iteration, docno, rel = fields_of(path, number, line, None, 4, "qid iter docno relevance")
        check_identifier(qid, "qid", path, number)
        check_identifier(docno, "docno", path, number)
        relevance = integer_of(path, number, rel, "relevance", GRADES)
        judged = qrels.setdefault(qid, {})
        if docno in judged:
            raise FormatError(path, number, f"document {docno!r} judged twice for query {qid!r}")
        judged[docno] = relevance
    return qrels


def write_qrels(path: str | Path, qrels: Qrels | Iterable[Qrel]) -> None:
    """Write qrels in TREC format (atomically), sorted by qid then docno.

    Raises:
        ConfigError: Before the file is replaced, on an invalid qid or docno (see
            :mod:`clir.formats.identifiers`), a relevance that is not an integer, or a document
            judged twice for one query (:func:`read_qrels` refuses the file it would make).
    """
    rows = _as_qrel_rows(qrels)
    judged: set[tuple[str, str]] = set()
    for qid, docno, relevance in rows:
        check_identifier(qid, "qid", path)
        check_identifier(docno, "docno", path)
        if (qid, docno) in judged:
            raise ConfigError(f"{path}: not written: document {docno!r} judged twice for query {qid!r}")
        judged.add((qid, docno))
        if (
            isinstance(relevance, bool)
            or not isinstance(relevance, (int, np.integer))
            or not GRADES[0] <= relevance <= GRADES[1]
        ):
            raise ConfigError(
                f"{path}: not written: relevance of {docno!r} for query {qid!r} is {relevance!r}; "
                f"expected an integer from {GRADES[0]} to {GRADES[1]}"
            )
    with atomic_write(path) as out:
        for qrel in sorted(rows):
            out.write(f"{qrel.qid} 0 {qrel.docno} {qrel.relevance}\n")


def _as_qrel_rows(qrels: Qrels | Iterable[Qrel]) -> list[Qrel]:
    if isinstance(qrels, Mapping):  # a dict's other kinds too (a mapping proxy had been read as rows)
        return [Qrel(q, d, r) for q, docs in qrels.items() for d, r in docs.items()]
    return [Qrel(*row) for row in qrels]

"""TREC runs: ``qid Q0 docno rank score tag``.

trec_eval ignores the rank column and orders by score, breaking ties by docno, so the writer
makes scores distinct and ranks consistent: it sorts by (score desc, docno asc) and writes the
rank of that order; the reader keeps scores as they are.
"""

from __future__ import annotations

import math
from pathlib import Path

from clir.errors import FormatError
from clir.formats._lines import fields_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.types import Run


def read_run(path: str | Path) -> Run:
    """Read a 6-column TREC run into ``run[qid][docno] = score``.

    Raises:
        FormatError: On a malformed line, a non-finite score or a docno listed twice for a query.
    """
    run: Run = {}
    for number, line in numbered_lines(path):
        qid, _q0, docno, rank, score_text, _tag = fields_of(
            path, number, line, None, 6, "qid Q0 docno rank score tag"
        )
        try:
            int(rank)
        except ValueError:
            raise FormatError(path, number, f"rank must be an integer, got {rank!r}") from None
        try:
            score = float(score_text)
        except ValueError:
            raise FormatError(path, number, f"score must be a number, got {score_text!r}") from None
        if not math.isfinite(score):
            raise FormatError(path, number, f"score must be finite, got {score_text!r}")
        ranked = run.setdefault(qid, {})
        if docno in ranked:
            raise FormatError(path, number, f"document {docno!r} listed twice for query {qid!r}")
        ranked[docno] = score
    return run


def ranked(docs: dict[str, float]) -> list[tuple[str, float]]:
    """Order one query's documents by score (descending), ties broken by docno (ascending)."""
    return sorted(docs.items(), key=lambda item: (-item[1], item[0]))


def write_run(path: str | Path, run: Run, tag: str = "clir", depth: int | None = None) -> None:
    """Write a run in TREC format (atomically).

    Documents are ordered by score, ties broken by docno; tied scores are written with a tiny
    decreasing offset so that every evaluator sees the same order.

    Args:
        path: Output file.
        run: ``run[qid][docno] = score``.
        tag: The run tag (sixth column); must not contain whitespace.
        depth: Keep only the top ``depth`` documents per query.
    """
    if not tag or any(ch.isspace() for ch in tag):
        raise ValueError(f"run tag must be a non-empty word without whitespace, got {tag!r}")
    with atomic_write(path) as out:
        for qid in sorted(run):
            previous = math.inf
            for rank, (docno, score) in enumerate(ranked(run[qid])[:depth], start=1):
                if score >= previous:
                    score = math.nextafter(previous, -math.inf)
                previous = score
                out.write(f"{qid} Q0 {docno} {rank} {score!r} {tag}\n")

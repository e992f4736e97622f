"""TREC runs: ``qid Q0 docno rank score tag``, in trec_eval's order.

trec_eval ignores the rank column: it reads each score into a C ``float`` (32-bit; see
``TEXT_RESULTS`` in its ``trec_format.h``) and ranks by that score descending, ties broken by
docno *descending* (``comp_sim_docno`` in ``form_res_rels.c``); pytrec_eval, and so ir_measures,
does the same. clir adopts that order everywhere: :func:`ranked` sorts by the score rounded to
float32 (descending), then docno (descending), so that two float64 scores that differ only
beyond float32 precision tie, exactly as in trec_eval. :func:`write_run` writes each score as it
is (``repr`` of the float64, which reads back to the same value) with the rank of that order,
and :func:`read_run` keeps scores as they are; a run evaluated in memory, from its file by clir,
or from its file by trec_eval or ir_measures is therefore ranked identically.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from clir.errors import ConfigError, FormatError
from clir.formats._lines import decimal_of, fields_of, integer_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import Run


def read_run(path: str | Path) -> Run:
    """Read a 6-column TREC run into ``run[qid][docno] = score``.

    Raises:
        FormatError: On a malformed line, an invalid qid or docno (see
            :mod:`clir.formats.identifiers`), a rank that is not an integer, a score that is not
            a finite decimal number, or a docno listed twice for a query.
    """
    run: Run = {}
    for number, line in numbered_lines(path):
        qid, _q0, docno, rank, score_text, _tag = fields_of(
            path, number, line, None, 6, "qid Q0 docno rank score tag"
        )
        check_identifier(qid, "qid", path, number)
        check_identifier(docno, "docno", path, number)
        integer_of(path, number, rank, "rank")
        score = decimal_of(path, number, score_text, "score")
        docs = run.setdefault(qid, {})
        if docno in docs:
            raise FormatError(path, number, f"document {docno!r} listed twice for query {qid!r}")
        docs[docno] = score
    return run


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """One query's documents in trec_eval's order: score as float32 descending, then docno
    descending (see the module docstring).

    Args:
        docs: ``{docno: score}``.

    Returns:
        ``[(docno, score), ...]`` best first, scores as given (not rounded).
    """
    docnos = list(docs)
    scores = list(docs.values())
    with np.errstate(over="ignore"):  # beyond float32's range: +-inf, as C's float conversion
        sims = np.asarray(scores, dtype=np.float64).astype(np.float32).tolist()
    order = sorted(zip(sims, docnos, scores, strict=True), key=lambda row: row[:2], reverse=True)
    return [(docno, score) for _, docno, score in order]


def write_run(path: str | Path, run: Run, tag: str = "clir", depth: int | None = None) -> None:
    """Write a run in TREC format (atomically), each query's documents in :func:`ranked` order.

    Scores are written exactly (``repr`` of the float64) and the rank column numbers that order,
    so trec_eval, ir_measures and :func:`read_run` all rank the file as :func:`ranked` ranks
    ``run``.

    Args:
        path: Output file.
        run: ``run[qid][docno] = score``.
        tag: The run tag (sixth column): an identifier (no whitespace).
        depth: Keep only the top ``depth`` documents per query (``None``: all).

    Raises:
        ConfigError: Before the file is replaced, on an invalid qid, docno or tag (see
            :mod:`clir.formats.identifiers`), a score that is not a finite number, or a
            negative ``depth``.
    """
    check_identifier(tag, "run tag", path)
    if depth is not None and (isinstance(depth, bool) or not isinstance(depth, int) or depth < 0):
        raise ConfigError(f"{path}: not written: depth must be an integer >= 0 or None, got {depth!r}")
    qids = sorted(check_identifier(qid, "qid", path) for qid in run)
    for qid in qids:
        for docno, score in run[qid].items():
            check_identifier(docno, "docno", path)
            _check_score(path, qid, docno, score)
    with atomic_write(path) as out:
        for qid in qids:
            for rank, (docno, score) in enumerate(ranked(run[qid])[:depth], start=1):
                out.write(f"{qid} Q0 {docno} {rank} {float(score)!r} {tag}\n")


def _check_score(path: str | Path, qid: str, docno: str, score: object) -> None:
    try:
        finite = math.isfinite(float(score))  # type: ignore[arg-type]
    except (TypeError, ValueError, OverflowError):
        finite = False
    if not finite:
        raise ConfigError(
            f"{path}: not written: score of {docno!r} for query {qid!r} is {score!r}; "
            "expected a finite number"
        )

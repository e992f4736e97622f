"""Which queries an evaluation counts, shared by every measure of the package.

A query counts when the qrels judge at least one of its documents relevant
(``relevance >= RELEVANT``). A counted query that the run does not list retrieved nothing and
scores 0 on every measure. A run's queries that do not count are ignored with a warning.
"""

from __future__ import annotations

import warnings

from clir.errors import ConfigError
from clir.formats import ranked
from clir.types import Qrels, Run

RELEVANT = 1
"""The lowest grade that counts as relevant for binary measures (ir_measures' default ``rel=1``)."""


def evaluated_queries(qrels: Qrels) -> list[str]:
    """Return the qids, in qrels order, that have at least one relevant judged document.

    Raises:
        ConfigError: If no query has a relevant document, so there is nothing to average.
    """
    qids = [qid for qid, judged in qrels.items() if any(rel >= RELEVANT for rel in judged.values())]
    if not qids:
        raise ConfigError(
            f"qrels hold no query with a relevant document (relevance >= {RELEVANT}) among "
            f"{len(qrels)} judged queries: nothing to evaluate"
        )
    return qids


def warn_ignored(run: Run, qids: list[str], run_name: str = "run", stacklevel: int = 3) -> None:
    """Warn once about the run's queries that are not evaluated (no relevant judgement)."""
    counted = set(qids)
    ignored = [qid for qid in run if qid not in counted]
    if ignored:
        shown = ", ".join(repr(qid) for qid in ignored[:5]) + (", ..." if len(ignored) > 5 else "")
        warnings.warn(
            f"{run_name}: {len(ignored)} query(ies) have no relevant document in the qrels and are "
            f"ignored: {shown}",
            stacklevel=stacklevel,
        )


def untied(docs: dict[str, float]) -> dict[str, float]:
    """Replace scores by distinct ones of the same order: score descending, ties by docno ascending.

    trec_eval (and so pytrec_eval) breaks score ties by docno *descending*; clir's
    :func:`clir.formats.ranked` and :func:`clir.formats.write_run` break them ascending. Untying
    in memory makes ``evaluate(run)`` equal to evaluating the run file that ``write_run`` writes.
    """
    size = len(docs)
    return {docno: float(size - rank) for rank, (docno, _score) in enumerate(ranked(docs))}

"""Which queries an evaluation counts, shared by every measure of the package.

A query counts when the qrels judge at least one of its documents relevant
(``relevance >= RELEVANT``). A counted query that the run does not list retrieved nothing and
scores 0 on every measure but trec_eval's counts of the qrels, ``NumQ`` and ``NumRel``
(``trec_eval -c``), with a warning that counts such queries. The
queries that do not count, the run's and the qrels' (judged, none relevant), are left out with a
warning naming them.
"""

from __future__ import annotations

import warnings

from clir.errors import ConfigError
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


class CoverageWarning(UserWarning):
    """The run's queries and the evaluated ones differ (some ignored, or some counted 0).

    A caller that knows why (a pipeline whose queries may legitimately retrieve nothing) can
    filter this category alone.
    """


def warn_coverage(
    run: Run, qids: list[str], run_name: str = "run", stacklevel: int = 3, qrels: Qrels | None = None
) -> None:
    """Warn once about each mismatch between the run's queries and the evaluated ``qids``.

    Two warnings, each emitted only when it applies: the queries of the run and of ``qrels``
    that are not evaluated (no relevant judgement: left out, where trec_eval counts a judged
    one 0), and the evaluated queries the run does not list or lists with no document (they
    count 0, as with ``trec_eval -c``; most often the qrels hold other splits' queries too).
    """
    counted = set(qids)
    ignored = [qid for qid in run if qid not in counted]
    ignored += [qid for qid in qrels or {} if qid not in counted and qid not in run]
    if ignored:
        warnings.warn(
            f"{run_name}: {len(ignored)} query(ies) have no relevant document in the qrels and are "
            f"left out: {_some(ignored)}",
            CoverageWarning,
            stacklevel=stacklevel,
        )
    missing = [qid for qid in qids if not run.get(qid)]
    if missing:
        warnings.warn(
            f"{run_name} lists {len(qids) - len(missing)} of the {len(qids)} qrels queries with a "
            f"relevant document; the {len(missing)} missing count 0 (trec_eval -c): {_some(missing)}; "
            "evaluate against the qrels of the run's split, e.g. a collection's qrels.<split>.txt "
            "or Collection.qrels_of(split), unless they should count",
            CoverageWarning,
            stacklevel=stacklevel,
        )


def _some(qids: list[str]) -> str:
    return ", ".join(repr(qid) for qid in qids[:5]) + (", ..." if len(qids) > 5 else "")

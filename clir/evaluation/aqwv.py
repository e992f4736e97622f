"""AQWV, the Actual Query Weighted Value of the IARPA MATERIAL programme.

MATERIAL systems return a *set* of documents per query rather than a ranking. For a query with
``R`` relevant documents in a collection of ``N`` documents, if the returned set holds ``r``
relevant and ``f`` non-relevant documents::

    P_miss = (R - r) / R
    P_FA   = f / (N - R)
    QWV    = 1 - P_miss - beta * P_FA

AQWV is the mean QWV over the queries with at least one relevant document; a query the run does
not list returned nothing and scores ``QWV = 0``. A query that judges every document of the
collection relevant (``N = R``) can return no non-relevant document, so its false-alarm rate,
``0 / 0`` as written, is taken as 0 (no false alarm was possible). Unjudged returned documents count as
non-relevant. Relevant means ``relevance >= 1``.

The returned set is read off the ranking in trec_eval's order (:func:`clir.formats.ranked`:
score as float32 descending, ties broken by docno descending) in one of three ways
(:class:`AQWVConfig`): the top ``cutoff`` documents, the documents scoring at least
``threshold`` (both limits apply when both are set), or, for the *oracle* variant, the best
prefix of the ranking for each query (cutoffs ``0..len(ranking)``; the empty set gives 0, so
oracle QWV is never negative).

References:
    Zhang, Rui, et al. "Improving Low-Resource Cross-lingual Document Retrieval by Reranking with
    Deep Bilingual Representations." ACL 2019 (reports MAP and AQWV; beta = 40 is the setting
    as recalled, hence a parameter).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from clir.errors import ConfigError
from clir.evaluation._queries import RELEVANT
from clir.formats import ranked
from clir.types import Qrels, Run

AQWV = "AQWV"
"""The measure's name, as :mod:`clir.evaluation.measures` reads it."""


@dataclass(frozen=True)
class AQWVConfig:
    """How AQWV reads a returned set off a ranking.

    Attributes:
        beta: Weight of a false alarm against a miss (MATERIAL used 40; early tooling 20).
        cutoff: Return the top ``cutoff`` documents; ``None`` for no limit. The default 10 is the
            depth of the other headline measures (P@10, nDCG@10). Ignored when ``oracle``.
        threshold: Return only documents whose score is at least ``threshold``; ``None`` for no
            threshold. Applies together with ``cutoff``: set ``cutoff=None`` for a pure threshold.
        oracle: Use the best cutoff of each query (over ``0..len(ranking)``), an upper bound on
            what any per-query cutoff could reach.

    Raises:
        ConfigError: On a negative or non-finite ``beta``, a negative ``cutoff``, a non-finite
            ``threshold``, or ``oracle`` together with a ``threshold``.
    """

    beta: float = 40.0
    cutoff: int | None = 10
    threshold: float | None = None
    oracle: bool = False

    def __post_init__(self) -> None:
        if not math.isfinite(self.beta) or self.beta < 0:
            raise ConfigError(f"AQWV beta must be a finite number >= 0, got {self.beta!r}")
        if self.cutoff is not None and (
            isinstance(self.cutoff, bool) or not isinstance(self.cutoff, int) or self.cutoff < 0
        ):
            raise ConfigError(f"AQWV cutoff must be an integer >= 0 or None, got {self.cutoff!r}")
        if self.threshold is not None and not math.isfinite(self.threshold):
            raise ConfigError(f"AQWV threshold must be a finite number or None, got {self.threshold!r}")
        if self.oracle and self.threshold is not None:
            raise ConfigError(
                f"AQWV oracle picks the best cutoff per query and takes no threshold, "
                f"got threshold={self.threshold!r}"
            )


def qwv(
    n_relevant: int,
    n_returned: int,
    n_returned_relevant: int,
    collection_size: int,
    beta: float = 40.0,
) -> float:
    """Query weighted value of one returned set: ``1 - P_miss - beta * P_FA``.

    Args:
        n_relevant: Relevant documents of the query in the collection (``R >= 1``).
        n_returned: Size of the returned set.
        n_returned_relevant: Relevant documents in the returned set.
        collection_size: Documents in the collection (``N``).
        beta: Weight of the false-alarm rate.

    Returns:
        The QWV, at most 1 and possibly negative.

    Raises:
        ConfigError: If the counts are inconsistent, e.g. ``collection_size`` too small to hold
            the relevant documents and the returned non-relevant ones.
    """
    if n_relevant < 1:
        raise ConfigError(f"QWV needs n_relevant >= 1, got {n_relevant}")
    if not 0 <= n_returned_relevant <= min(n_relevant, n_returned):
        raise ConfigError(
            f"n_returned_relevant must lie in 0..min(n_relevant={n_relevant}, "
            f"n_returned={n_returned}), got {n_returned_relevant}"
        )
    false_alarms = n_returned - n_returned_relevant
    if collection_size - n_relevant < false_alarms or collection_size < n_relevant:
        raise ConfigError(
            f"collection_size={collection_size} is too small: it must hold the {n_relevant} relevant "
            f"documents and the {false_alarms} returned non-relevant ones"
        )
    p_miss = (n_relevant - n_returned_relevant) / n_relevant
    non_relevant = collection_size - n_relevant  # 0: no false alarm possible, P_FA = 0 (not 0/0)
    p_fa = false_alarms / non_relevant if non_relevant else 0.0
    return 1.0 - p_miss - beta * p_fa


def _query_qwv(
    qid: str,
    scores: Mapping[str, float],
    judged: Mapping[str, int],
    collection_size: int,
    config: AQWVConfig,
) -> float:
    n_relevant = sum(rel >= RELEVANT for rel in judged.values())
    order = ranked(dict(scores))
    if config.oracle:
        hits = np.concatenate(([0], np.cumsum([judged.get(docno, 0) >= RELEVANT for docno, _ in order])))
        depth = np.arange(len(order) + 1)
        # Validate once on the deepest prefix, which holds the most false alarms.
        _checked(qid, n_relevant, len(order), int(hits[-1]), collection_size, config.beta)
        non_relevant = max(collection_size - n_relevant, 1)  # none: depth - hits is 0 (P_FA = 0)
        # qwv()'s own operations, so that the oracle is never below a fixed cutoff by a rounding
        values = 1.0 - (n_relevant - hits) / n_relevant - config.beta * ((depth - hits) / non_relevant)
        return float(values.max())
    returned = order if config.cutoff is None else order[: config.cutoff]
    if config.threshold is not None:
        returned = [(docno, score) for docno, score in returned if score >= config.threshold]
    n_hits = sum(judged.get(docno, 0) >= RELEVANT for docno, _ in returned)
    return _checked(qid, n_relevant, len(returned), n_hits, collection_size, config.beta)


def _checked(qid: str, n_relevant: int, n_returned: int, n_hits: int, size: int, beta: float) -> float:
    try:
        return qwv(n_relevant, n_returned, n_hits, size, beta)
    except ConfigError as error:
        raise ConfigError(f"query {qid!r}: {error}") from None


def aqwv_values(
    run: Run, qrels: Qrels, qids: list[str], collection_size: int | None, config: AQWVConfig
) -> dict[str, float]:
    """QWV of each of ``qids`` (no query selection, no warnings): the engine of this module."""
    if isinstance(collection_size, bool) or not isinstance(collection_size, (int, np.integer)):
        raise ConfigError(
            f"AQWV needs collection_size, the number of documents in the collection, as an "
            f"integer; got {collection_size!r}"
        )
    return {qid: _query_qwv(qid, run.get(qid, {}), qrels[qid], int(collection_size), config) for qid in qids}


def aqwv_per_query(
    run: Run, qrels: Qrels, collection_size: int, config: AQWVConfig | None = None
) -> dict[str, float]:
    """QWV of every query with at least one relevant document.

    Args:
        run: ``run[qid][docno] = score``.
        qrels: ``qrels[qid][docno] = relevance``.
        collection_size: Documents in the collection (``N``); required, as P_FA depends on it.
        config: Returned-set rule and beta; defaults to ``AQWVConfig()`` (top 10, beta 40).

    Returns:
        ``{qid: QWV}`` in qrels order; a query absent from the run scores 0.

    Raises:
        ConfigError: If ``collection_size`` is missing or too small for some query, no query
            has a relevant document, or the run or qrels are checked as
            :func:`~clir.evaluation.evaluate` checks them and refused (a grade that is no whole
            number, a score that is no finite number, a flat ``{docno: score}``).

    Warns:
        UserWarning: Naming the run's queries that have no relevant judgement (ignored), and
            counting the evaluated queries the run does not list (they count 0).
    """
    return _checked_values(run, qrels, collection_size, config)


def aqwv(run: Run, qrels: Qrels, collection_size: int, config: AQWVConfig | None = None) -> float:
    """AQWV: the mean QWV over queries with at least one relevant document.

    Args, Raises and Warns as :func:`aqwv_per_query`.

    Returns:
        The AQWV, at most 1 and possibly negative (0 for a system that returns nothing).
    """
    values = _checked_values(run, qrels, collection_size, config)
    return float(np.mean(list(values.values())))


def _checked_values(
    run: Run, qrels: Qrels, collection_size: int, config: AQWVConfig | None
) -> dict[str, float]:
    """:func:`aqwv_per_query`, through :func:`~clir.evaluation.evaluate`'s checks of the run and
    qrels: without them a grade of 0.5 had been non-relevant, a string score read as a number,
    and a flat ``{docno: score}`` (one query's) scored 0, where ``evaluate`` refuses each."""
    from clir.evaluation.measures import _per_query  # it imports this module

    return _per_query(run, qrels, [AQWV], config or AQWVConfig(), collection_size, "run", stacklevel=5)[AQWV]

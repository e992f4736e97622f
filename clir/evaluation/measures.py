"""Standard retrieval measures through ir_measures (pytrec_eval backend), plus AQWV.

Measure names are ir_measures' own (``"AP"``, ``"P@10"``, ``"nDCG@10"``, ``"R@1000"``,
``"AP(rel=2)"``, ...; ``"MAP"`` is read as ``"AP"``), and results are keyed by
``str(ir_measures.parse_measure(name))``. Three AQWV names are added (:mod:`clir.evaluation.aqwv`):
``"AQWV"`` (the given :class:`AQWVConfig`, by default top 10 and beta 40), ``"AQWV@<k>"`` (that
config with cutoff ``k``) and ``"AQWV@oracle"`` (that config's beta, best cutoff per query).
Only trec_eval's measures (those ir_measures computes with pytrec_eval, and ``NumRel(rel=<k>)``,
which clir counts in the qrels as trec_eval does) are accepted, with cutoffs and ``rel`` of at
least 1: ir_measures' other providers (msmarco's ``RR@10``, ``Judged@10``,
gdeval's ``ERR@10``, ...) rank tied scores by docno ascending or fail on clir's runs, and
pytrec_eval aborts on ``P@0``.

Which queries count (the same for every measure, so values are comparable and paired):
    Every query of the qrels with at least one relevant judged document (``relevance >= 1``),
    whether or not the run lists it. A query the run does not list retrieved nothing and scores
    0, as with ``trec_eval -c`` (except trec_eval's counts of the qrels: ``NumQ`` 1 and
    ``NumRel`` its relevant documents); plain pytrec_eval would skip it and inflate the mean. Such
    queries are counted in a warning (qrels of every split against a run of one split is the
    usual cause). Their values are set here, never asked of pytrec_eval: it reads an empty
    ranking's from freed or unallocated buffers (``NumRel`` 0 in a process's first evaluation,
    ``IPrec@0.0`` NaN). Queries without a relevant judgement, the run's and those whose judgements
    are all non-relevant, are not evaluated, with a warning naming them (trec_eval and
    ir_measures count a judged one 0).

Relevance:
    Binary measures (AP, P, R, ...) count ``relevance >= 1`` as relevant (ir_measures' default
    ``rel=1``; write ``"AP(rel=2)"`` for a stricter one). nDCG uses trec_eval's gain, the grade
    itself, with a ``log2(rank + 1)`` discount. Unjudged documents are non-relevant.

Ties:
    Documents are ranked as trec_eval ranks them (:mod:`clir.formats.runs`): by score read as a
    32-bit float, descending, ties broken by docno *descending*. Scores are passed to
    pytrec_eval as they are, and it applies that order itself; AQWV uses the same order
    (:func:`clir.formats.ranked`). Since :func:`clir.formats.write_run` writes scores exactly,
    a run evaluated in memory, from its file, or from its file by trec_eval or ir_measures
    gives the same values.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Mapping, Sequence

import ir_measures
import numpy as np

from clir.errors import ConfigError
from clir.evaluation._queries import evaluated_queries, warn_coverage
from clir.evaluation.aqwv import AQWVConfig, aqwv_values
from clir.formats import GRADES
from clir.types import Qrels, Run

DEFAULT_MEASURES: tuple[str, ...] = ("AP", "P@10", "nDCG@10", "nDCG@20", "R@100", "R@1000", "AQWV")
"""The headline measures: MAP, P@10, nDCG@10/20, recall at 100/1000 and AQWV (needs N)."""

AQWV_NAME = "AQWV"


def measure_name(name: str) -> str:
    """The canonical name of a measure, as results are keyed (``"MAP"`` -> ``"AP"``).

    Raises:
        ConfigError: If ``name`` is not an ir_measures measure nor an AQWV name.
    """
    return _parse(name)[0]


def _parse(name: str) -> tuple[str, object]:
    """Return ``(canonical name, ir_measures Measure or AQWV spec)`` where the spec is
    ``None`` (the config as given), an int cutoff or ``"oracle"``."""
    if not isinstance(name, str):
        raise ConfigError(f"a measure name must be a string, got {name!r}")
    text = name.strip()
    head, sep, tail = text.partition("@")
    if head.upper() == AQWV_NAME:
        if not sep:
            return AQWV_NAME, None
        if tail.lower() == "oracle":
            return f"{AQWV_NAME}@oracle", "oracle"
        if tail.isdecimal() and int(tail) >= 1:  # isdigit() takes "²", which int() refuses
            return f"{AQWV_NAME}@{int(tail)}", int(tail)
        raise ConfigError(
            f"unknown measure {name!r}: AQWV takes '@<cutoff>' (>= 1) or '@oracle', got {tail!r}"
        )
    expected = (
        "expected a trec_eval measure of ir_measures such as 'AP' (or 'MAP'), 'P@10', 'nDCG@10', "
        "'R@1000', 'RR', or 'AQWV', 'AQWV@<k>', 'AQWV@oracle'"
    )
    try:  # ir_measures checks parameters with assert, some only in supports()
        measure = ir_measures.parse_measure(text)
        problem = _unsupported(measure)
    except (NameError, ValueError, KeyError, TypeError, SyntaxError, AssertionError) as error:
        raise ConfigError(f"unknown measure {name!r} ({error}); {expected}") from None
    if problem:
        raise ConfigError(f"measure {name!r} {problem}; {expected}")
    return str(measure), measure


def _unsupported(measure: object) -> str | None:
    """Why clir cannot compute ``measure`` as trec_eval does, or ``None``.

    Only what pytrec_eval computes ranks tied scores as trec_eval does (ir_measures' other
    providers, e.g. msmarco's ``RR@10`` or ``Judged@10``, break ties by docno ascending, and some
    fail on clir's runs); a cutoff below 1 aborts pytrec_eval, a ``rel`` below 1 is refused by it.
    """
    params = getattr(measure, "params", {})
    for key in ("cutoff", "rel"):
        value = params.get(key)
        if value is not None and not (isinstance(value, int) and value >= 1):
            return f"has {key}={value!r}, expected an integer >= 1"
    if measure.NAME in _COUNTED:  # type: ignore[attr-defined]
        return None  # ir_measures' pytrec_eval provider takes NumRel's rel=1 only; counted here
    if not ir_measures.providers.registry["pytrec_eval"].supports(measure):
        return (
            "is not one of trec_eval's (ir_measures would compute it with another provider, which "
            "does not rank tied scores as trec_eval does)"
        )
    return None


def _is_aqwv(name: str) -> bool:
    return name == AQWV_NAME or name.startswith(f"{AQWV_NAME}@")


def _aqwv_config(spec: object, config: AQWVConfig) -> AQWVConfig:
    if spec is None:
        return config
    if spec == "oracle":
        return dataclasses.replace(config, oracle=True, threshold=None)
    return dataclasses.replace(config, cutoff=spec, oracle=False)


def _per_query(
    run: Run,
    qrels: Qrels,
    measures: Sequence[str],
    aqwv: AQWVConfig | None,
    collection_size: int | None,
    run_name: str,
    stacklevel: int,
) -> dict[str, dict[str, float]]:
    if isinstance(measures, str):
        measures = (measures,)
    parsed = dict(_parse(name) for name in measures)  # canonical name -> spec; drops duplicates
    if not parsed:
        raise ConfigError("measures is empty: name at least one measure, e.g. 'AP'")
    aqwv_names = [name for name in parsed if _is_aqwv(name)]
    if aqwv_names and collection_size is None:
        raise ConfigError(
            f"measure {aqwv_names[0]!r} needs collection_size (the number of documents in the "
            f"collection); pass collection_size=... or leave {aqwv_names[0]!r} out of measures"
        )
    qrels = _checked_qrels(qrels)
    if (bad := next((qid for qid in run if not isinstance(qid, str)), None)) is not None:
        raise ConfigError(f"run: qids must be strings, got {bad!r}")
    if (bad := next((qid for qid, docs in run.items() if not isinstance(docs, Mapping)), None)) is not None:
        raise ConfigError(  # a flat {docno: score} (one query's) had scored 0, with warnings only
            f"{run_name}: query {bad!r} holds a {type(run[bad]).__name__}; expected {{docno: score}} (a run "
            "is {qid: {docno: score}}; compare_runs takes {name: run})"
        )
    qids = evaluated_queries(qrels)
    warn_coverage(run, qids, run_name, stacklevel=stacklevel, qrels=qrels)
    run = {qid: _checked_scores(qid, run[qid]) for qid in qids if qid in run}

    standard = [spec for name, spec in parsed.items() if not _is_aqwv(name)]
    computed = {str(m): {qid: _nothing_retrieved(m, qrels[qid]) for qid in qids} for m in standard}
    ranked = [m for m in standard if m.NAME not in _COUNTED]  # type: ignore[attr-defined]
    for group in _invocation_groups(ranked):
        retrieved = _ranking_left(run, qrels, qids, group[0])  # pytrec_eval gets no empty ranking
        if not retrieved:
            continue
        # Queries named by position: trec_eval caches a query's ranking under its qid, and under
        # "no_query" once an evaluation ends, which a query of that name read back (nDCG@5 5e13).
        sub_qrels = {str(i): dict(qrels[qid]) for i, qid in enumerate(retrieved)}
        sub_run = {str(i): run[qid] for i, qid in enumerate(retrieved)}
        for metric in ir_measures.iter_calc(group, sub_qrels, sub_run):
            computed[str(metric.measure)][retrieved[int(metric.query_id)]] = float(metric.value)

    results: dict[str, dict[str, float]] = {}
    for name, spec in parsed.items():
        if not _is_aqwv(name):
            results[name] = computed[name]
            continue
        config = _aqwv_config(spec, aqwv or AQWVConfig())
        results[name] = aqwv_values(run, qrels, qids, collection_size, config)
    return results


def _invocation_groups(measures: Sequence[object]) -> list[list[object]]:
    """``measures`` (ir_measures measures) in groups that one ``ir_measures.iter_calc`` call each
    computes as it computes every measure alone: those of one ``judged_only`` flag and one nDCG
    ``gains`` mapping, in the order given.

    ir_measures' pytrec_eval provider runs trec_eval once per relevance level, ``judged_only``
    flag and ``gains`` mapping, and puts ``NumRet``, ``NumQ`` and a plain ``nDCG`` into whichever
    of those runs it made first: beside ``P(judged_only=True)@10``, ``NumRet`` counted the judged
    documents only, and beside ``nDCG(gains=...)`` a plain ``nDCG`` took those gains (or a
    ``nDCG(judged_only=True)`` them), depending on the order of the measures. A relevance level
    changes none of the measures so placed.
    """
    groups: list[tuple[tuple[bool, object], list[object]]] = []
    for measure in measures:
        params = getattr(measure, "params", {})
        key = (bool(params.get("judged_only", False)), params.get("gains"))
        group = next((members for other, members in groups if other == key), None)
        if group is None:
            groups.append((key, group := []))
        group.append(measure)
    return [group for _, group in groups]


def _ranking_left(run: Run, qrels: Qrels, qids: list[str], measure: object) -> list[str]:
    """The ``qids`` whose ranking trec_eval evaluates ``measure`` on is not empty.

    With ``judged_only`` (trec_eval ``-J``) a ranking keeps only the documents judged for its
    query with a grade (a ``gains`` value, for nDCG) of 0 or more; one left with none retrieved
    nothing, and its values, 0 for every such measure, are set by the caller (pytrec_eval read
    an empty ranking's from freed buffers: ``IPrec(judged_only=True)@0.0`` NaN).
    """
    params = getattr(measure, "params", {})
    if not params.get("judged_only", False):
        return [qid for qid in qids if run.get(qid)]
    gains = params.get("gains") or {}
    return [
        qid
        for qid in qids
        if any(
            gains.get(grade, grade) >= 0
            for grade in map(qrels[qid].get, run.get(qid, ()))
            if grade is not None
        )
    ]


_NOTHING_RETRIEVED = {
    "NumQ": lambda measure, judged: 1.0,
    "NumRel": lambda measure, judged: float(sum(grade >= measure["rel"] for grade in judged.values())),
}
"""trec_eval's value of a measure for a query that retrieved nothing, where it is not 0: its
counts of the qrels (``NumRel(rel=<k>)``: the judged documents of grade ``k`` or more, as
trec_eval's ``num_rel`` at ``-l k``)."""

_COUNTED = frozenset({"NumRel"})
"""Measures clir takes from :data:`_NOTHING_RETRIEVED` for every query, retrieved or not, rather
than from pytrec_eval: they count the qrels only, and ir_measures' pytrec_eval provider refuses
``NumRel`` with a ``rel`` other than 1 (pytrec_eval itself applies it)."""


def _nothing_retrieved(measure: object, judged: Mapping[str, int]) -> float:
    """The value of ``measure`` (an ir_measures measure) for a query with ``judged`` documents
    that retrieved nothing (see :data:`_NOTHING_RETRIEVED`; 0 for every other measure)."""
    rule = _NOTHING_RETRIEVED.get(measure.NAME)  # type: ignore[attr-defined]
    return rule(measure, judged) if rule else 0.0


_NUL = "trec_eval reads a docno up to it, so another document's judgement would count"


def _checked_qrels(qrels: Qrels) -> Qrels:
    """``qrels`` with string qids and docnos and integer grades (a whole float such as pandas
    gives, ``1.0``, read as ``1``), as pytrec_eval wants them: within the grades a qrels file
    may hold (-32768 to 32767; pytrec_eval reads larger ones wrongly, without a word).

    Raises:
        ConfigError: On another key or grade (a NaN, ``1.5``, ``"1"``, ``2**32``) or a docno
            holding a NUL character, naming it.
    """
    checked: Qrels = {}
    for qid, judged in qrels.items():
        if not isinstance(judged, Mapping):
            kind = type(judged).__name__
            raise ConfigError(f"qrels: query {qid!r} holds a {kind}; expected {{docno: grade}}")
        for docno, grade in judged.items():
            if not isinstance(qid, str) or not isinstance(docno, str):
                raise ConfigError(f"qrels: qids and docnos must be strings, got {qid!r} / {docno!r}")
            if "\0" in docno:
                raise ConfigError(f"qrels: docno {docno!r} of {qid!r} holds a NUL character ({_NUL})")
            whole = isinstance(grade, (int, np.integer)) or (
                isinstance(grade, (float, np.floating)) and float(grade).is_integer()
            )
            if isinstance(grade, bool) or not whole or not GRADES[0] <= grade <= GRADES[1]:
                raise ConfigError(
                    f"qrels: the grade of {qid!r} / {docno!r} must be an integer from {GRADES[0]} "
                    f"to {GRADES[1]}, got {grade!r}"
                )
            checked.setdefault(qid, {})[docno] = int(grade)
    return checked


def _checked_scores(qid: str, scores: Mapping[str, float]) -> dict[str, float]:
    """A query's scores as Python floats (numpy's float32 included).

    Raises:
        ConfigError: On a docno that is not a string or holds a NUL character, or a score that
            is not a finite number (a NaN has no rank), naming it.
    """
    values = list(scores.values())
    strings = all(type(docno) is str for docno in scores)
    floats = all(type(value) is float for value in values) and np.isfinite(values).all()
    if strings and floats and "\0" not in "".join(scores):
        return dict(scores)  # the usual run: string docnos without NUL, Python floats, all finite
    checked = {}
    for docno, score in scores.items():
        if not isinstance(docno, str):
            raise ConfigError(f"run: docnos must be strings, got {docno!r} in query {qid!r}")
        if "\0" in docno:
            raise ConfigError(f"run: docno {docno!r} of {qid!r} holds a NUL character ({_NUL})")
        value = (
            float(score)
            if isinstance(score, (int, float, np.number)) and not isinstance(score, bool)
            else None
        )
        if value is None or not np.isfinite(value):
            raise ConfigError(f"run: the score of {qid!r} / {docno!r} must be a finite number, got {score!r}")
        checked[docno] = value
    return checked


def evaluate_per_query(
    run: Run,
    qrels: Qrels,
    measures: Sequence[str] = DEFAULT_MEASURES,
    *,
    aqwv: AQWVConfig | None = None,
    collection_size: int | None = None,
    run_name: str = "run",
) -> dict[str, dict[str, float]]:
    """Evaluate a run query by query.

    Args:
        run: ``run[qid][docno] = score``.
        qrels: ``qrels[qid][docno] = relevance``.
        measures: Measure names (see the module docstring); ``"MAP"`` is read as ``"AP"``.
        aqwv: Returned-set rule and beta of the AQWV measures; defaults to ``AQWVConfig()``.
        collection_size: Documents in the collection; required when an AQWV measure is asked.
        run_name: What the warnings call the run, e.g. its file.

    Returns:
        ``{measure: {qid: value}}``, measures in the order given (canonical names, duplicates
        dropped), qids in qrels order: every query with a relevant document, 0 where the run
        does not list it.

    Raises:
        ConfigError: On an unknown measure name, an AQWV measure without ``collection_size`` (or
            one too small), or qrels without any relevant document.

    Warns:
        UserWarning: Naming the run's queries that have no relevant judgement (ignored), and,
            in another warning, counting and naming the evaluated queries the run does not list
            (they count 0).
    """
    return _per_query(run, qrels, measures, aqwv, collection_size, run_name, stacklevel=4)


def evaluate(
    run: Run,
    qrels: Qrels,
    measures: Sequence[str] = DEFAULT_MEASURES,
    *,
    aqwv: AQWVConfig | None = None,
    collection_size: int | None = None,
    run_name: str = "run",
) -> dict[str, float]:
    """Evaluate a run: each measure aggregated over the evaluated queries, as ir_measures and
    trec_eval aggregate it (the mean; the sum for the counts ``NumQ``, ``NumRet``, ``NumRel``,
    ``NumRelRet``).

    Args, Raises and Warns as :func:`evaluate_per_query`, over the same queries (every query
    of the qrels with a relevant document; one missing from the run counts 0).

    Returns:
        ``{measure: value}``, e.g. ``{"AP": 0.31, "P@10": 0.42, ..., "AQWV": 0.12}``.

    Example:
        >>> evaluate(run, qrels, ["MAP", "P@10", "AQWV"], collection_size=31102)  # doctest: +SKIP
        {'AP': ..., 'P@10': ..., 'AQWV': ...}
    """
    return means(_per_query(run, qrels, measures, aqwv, collection_size, run_name, stacklevel=4))


def means(per_query: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """:func:`evaluate` from :func:`evaluate_per_query`'s values: each measure aggregated over
    the queries by :func:`aggregate` (the mean; the sum for trec_eval's counts)."""
    return {name: aggregate(name, values.values()) for name, values in per_query.items()}


def summed(name: str) -> bool:
    """Whether ``name``'s value over queries is their sum, not their mean.

    ir_measures (as trec_eval) sums its counts, ``NumQ``, ``NumRet``, ``NumRel`` and
    ``NumRelRet`` (``SumAgg``); every other measure, AQWV included, is averaged.
    """
    canonical, spec = _parse(name)
    return not _is_aqwv(canonical) and isinstance(spec.aggregator(), ir_measures.SumAgg)  # type: ignore[attr-defined]


def aggregate(name: str, values: Iterable[float]) -> float:
    """A measure's value over queries from its per-query ``values``, as ir_measures aggregates it
    (the measure's own aggregator): the sum for the counts of :func:`summed`, else the mean
    (NaN for no value)."""
    canonical, spec = _parse(name)
    aggregator = ir_measures.MeanAgg() if _is_aqwv(canonical) else spec.aggregator()  # type: ignore[attr-defined]
    for value in values:
        aggregator.add(value)
    return float(aggregator.result())

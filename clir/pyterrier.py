"""clir's stages as PyTerrier transformers (the optional extra ``pyterrier``).

A first stage (QT / PSQ / DT x BM25 / QL, or the dense e5 reference: anything with
``search(queries, k) -> Run``) becomes a queries -> results transformer, and the bilingual
reranker a results -> results one, so that they compose with ``>>`` and compare with
``pt.Experiment``::

    import pyterrier as pt
    from clir.pyterrier import Reranker, Retriever, topics_frame, qrels_frame

    qt = Retriever(first_stage("qt", "bm25", collection, tables, BaselineConfig()))
    full = qt >> Reranker("runs/default/.../full", collection, "space/", tables=tables)
    pt.Experiment([qt, full], topics_frame(collection.split("test")),
                  qrels_frame(collection.qrels_of("test")), eval_metrics=["map", "P_10"])

None of this starts a Java virtual machine: clir's stages are Python, and PyTerrier needs Java
only for its own Terrier indexes. Results are ranked as trec_eval ranks them (score descending,
then docno descending; ``rank`` from 0, as in PyTerrier), so ``pt.Experiment`` reports what
``clir evaluate`` reports on the same run, except for a query judged only non-relevant, which
``pt.Experiment`` counts 0 and ``clir evaluate`` leaves out (with a warning).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from numbers import Integral
from pathlib import Path
from typing import Any

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError, MissingDependencyError
from clir.formats import ranked
from clir.pipeline.baselines import BaselineConfig
from clir.pipeline.features import CollectionFeatures, collection_rerank_data, stage_features
from clir.pipeline.trained_with import model_baseline
from clir.training import load_models, rerank
from clir.training.ensemble import check_depth
from clir.translation import TranslationTable
from clir.types import Qrels, Query, Run

try:
    import pandas as pd
    import pyterrier as pt
except ImportError as error:  # pragma: no cover - exercised only without the extra
    raise MissingDependencyError("python-terrier", "pyterrier", "clir.pyterrier") from error


def topics_frame(queries: Sequence[Query]) -> pd.DataFrame:
    """Queries as PyTerrier topics: columns ``qid``, ``query`` (and ``description``)."""
    return pd.DataFrame(
        {
            "qid": [q.qid for q in queries],
            "query": [q.text for q in queries],
            "description": [q.description for q in queries],
        }
    )


def qrels_frame(qrels: Qrels) -> pd.DataFrame:
    """Judgements as PyTerrier qrels: columns ``qid``, ``docno``, ``label``."""
    rows = [(qid, docno, grade) for qid, judged in qrels.items() for docno, grade in judged.items()]
    return pd.DataFrame(rows, columns=["qid", "docno", "label"])


def queries_of(frame: pd.DataFrame) -> list[Query]:
    """The distinct queries of a topics or results frame, in order of first appearance.

    Raises:
        ConfigError: Without a ``qid`` or ``query`` column, or with a qid or query that is
            missing (NaN or None, which ``str`` would have made the word ``"nan"``) or a qid that
            is not a string or an integer (``1.0`` would no longer match the qrels' ``"1"``).
    """
    missing = [column for column in ("qid", "query") if column not in frame.columns]
    if missing:
        raise ConfigError(f"the input frame has no column {missing[0]!r}; its columns: {list(frame.columns)}")
    first = frame.drop_duplicates("qid")
    descriptions = first["description"] if "description" in first.columns else [""] * len(first)
    queries = []
    for qid, text, description in zip(first["qid"], first["query"], descriptions, strict=True):
        if not isinstance(qid, str | Integral) or isinstance(qid, bool):
            raise ConfigError(f"the input frame's qid {qid!r} must be a string (or an integer)")
        if not isinstance(text, str) and _missing(text):
            raise ConfigError(f"the input frame's query of {str(qid)!r} is missing ({text!r})")
        queries.append(Query(str(qid), str(text), "" if _missing(description) else str(description)))
    return queries


def _missing(value: Any) -> bool:
    """A frame's empty cell: ``None``, NaN, ``pd.NA``, ``NaT``."""
    return value is None or (not isinstance(value, str) and bool(pd.isna(value)))


def run_frame(run: Run, queries: Sequence[Query]) -> pd.DataFrame:
    """A run as PyTerrier results (``qid``, ``query``, ``docno``, ``score``, ``rank`` from 0),
    each query's documents in trec_eval's order."""
    rows = [
        (query.qid, query.text, docno, score, rank)
        for query in queries
        for rank, (docno, score) in enumerate(ranked(run.get(query.qid, {})))
    ]
    return pd.DataFrame(rows, columns=["qid", "query", "docno", "score", "rank"])


def _passed_on(results: pd.DataFrame, given: pd.DataFrame, keys: list[str]) -> pd.DataFrame:
    """``results`` with the columns of the ``given`` frame that they lack, matched on ``keys``: as
    PyTerrier's own transformers, clir's pass on a topic's ``query_0`` (a rewrite's original, which
    ``pt.rewrite.reset()`` restores) or a result's ``text`` (they had been dropped)."""
    extra = [column for column in given.columns if column not in results.columns]
    if not extra:
        return results
    given = given.drop_duplicates(keys)[[*keys, *extra]].astype({key: str for key in keys})
    return results.merge(given, on=keys, how="left")


def frame_run(frame: pd.DataFrame) -> Run:
    """PyTerrier results as a run ``{qid: {docno: score}}``.

    Raises:
        ConfigError: Without ``qid``, ``docno`` and ``score`` columns, on a score that is not a
            finite number, or on a (qid, docno) given twice (one of its scores would be kept,
            silently).
    """
    missing = [column for column in ("qid", "docno", "score") if column not in frame.columns]
    if missing:
        raise ConfigError(
            f"the results frame has no column {missing[0]!r}; its columns: {list(frame.columns)}"
        )
    run: Run = {}
    for qid, docno, score in zip(frame["qid"], frame["docno"], frame["score"], strict=True):
        try:
            value = float(score)
        except (TypeError, ValueError):
            value = math.nan
        if not math.isfinite(value):
            raise ConfigError(
                f"the results frame's column 'score' holds {score!r} for qid {str(qid)!r}, docno "
                f"{str(docno)!r}: expected a finite number"
            )
        docs = run.setdefault(str(qid), {})
        if str(docno) in docs:
            raise ConfigError(f"the results frame lists docno {str(docno)!r} twice for qid {str(qid)!r}")
        docs[str(docno)] = value
    return run


class Retriever(pt.Transformer):
    """A first stage (or any object with ``search(queries, k) -> Run``) as queries -> results.
    The topics' other columns (``query_0``, ...; of results, their query columns) are passed on to
    each of their results.

    Args:
        stage: An indexed :class:`~clir.retrieval.FirstStage`, a
            :class:`~clir.retrieval.DenseRetriever`, ...
        k: Depth of each ranking.
    """

    def __init__(self, stage: Any, k: int = 1000) -> None:
        super().__init__()
        self.stage = stage
        self.k = k

    def transform(self, topics: pd.DataFrame) -> pd.DataFrame:
        queries = queries_of(topics)
        if "docno" in topics.columns:  # results: a document's columns are not its query's
            topics = topics[pt.model.query_columns(topics)]
        return _passed_on(run_frame(self.stage.search(queries, k=self.k), queries), topics, ["qid"])

    def __repr__(self) -> str:
        name = (
            f"{self.stage.mode}-{self.stage.model}"
            if hasattr(self.stage, "mode")
            else type(self.stage).__name__
        )
        return f"clir.Retriever({name}, k={self.k})"


class Reranker(pt.Transformer):
    """The bilingual reranker (one trained model or an ensemble) as results -> results.

    As ``clir rerank --run``: the top ``depth`` of each query's results (in trec_eval's order)
    are its candidates, reranked (their first-stage scores are the model's candidate scores);
    the rest follow beneath in their order. The output holds the same documents, with their
    other columns (``text``, ...).

    Args:
        model: A checkpoint or ensemble directory.
        collection: The collection the results come from (its documents are scored).
        space: The shared space (holding the collection's language) or its directory.
        tables: ``(en->doc, doc->en)`` tables; else learned (or loaded) into ``tables_dir``.
        tables_dir: Where the tables are cached.
        baseline: First-stage settings of the score features (default: those the model was
            trained with, :func:`~clir.pipeline.trained_with.model_baseline`, else the
            baselines').
        depth: Results reranked per query (default: the model's ``data.depth``, as
            ``clir rerank``; pass the retriever's ``k`` to rerank every result).

    Raises:
        ConfigError: On a ``depth`` that is not a positive integer.
    """

    def __init__(
        self,
        model: str | Path,
        collection: Collection,
        space: SharedSpace | str | Path,
        *,
        tables: tuple[TranslationTable, TranslationTable] | None = None,
        tables_dir: str | Path | None = None,
        baseline: BaselineConfig | None = None,
        depth: int | None = None,
    ) -> None:
        super().__init__()
        check_depth(depth)
        self.model = model
        self.models = load_models(model)
        self.depth = depth or self.models[0].config.data.depth
        self.baseline = model_baseline(model, baseline)
        self.space = space if isinstance(space, SharedSpace) else SharedSpace.load(space)
        config = self.models[0].config
        self.features = CollectionFeatures.build(
            collection,
            stage_names=stage_features(self.models[0].feature_names),
            tables=tables,
            tables_dir=tables_dir,
            baseline=self.baseline,
            progress=config.progress,
        )

    def transform(self, results: pd.DataFrame) -> pd.DataFrame:
        queries = queries_of(results)
        run = frame_run(results)
        config = self.models[0].config
        data = collection_rerank_data(
            self.features,
            queries,
            candidates=run,
            feature_names=self.models[0].feature_names,
            data=config.data,
            depth=self.depth,
            progress=config.progress,
        )
        depth = max((len(query.docnos) for query in data.queries), default=0) or 1  # as clir rerank
        reranked = rerank(self.models, data, space=self.space, run=run, depth=depth, progress=config.progress)
        return _passed_on(run_frame(reranked, queries), results, ["qid", "docno"])

    def __repr__(self) -> str:
        return f"clir.Reranker({self.model}, depth={self.depth})"

"""The lexical baselines: {QT, PSQ, DT} x {BM25, QL} first-stage runs on a collection, evaluated."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from clir.config import NonEmpty, OneOf, PositiveInt, Range, Section, Unique, Where, check_arguments
from clir.datasets import Collection
from clir.evaluation import DEFAULT_MEASURES, CoverageWarning, evaluate, markdown_table
from clir.formats import atomic_write, write_run
from clir.formats.atomic import output_directory
from clir.pipeline.tables import learn_tables
from clir.retrieval import MODES, RETRIEVERS, FirstStage, get_retriever, retriever_class
from clir.translation import TranslationTable
from clir.types import Run


@dataclass(frozen=True)
class BaselineOptions(Section):
    """Which first-stage baselines run and how (the ``baselines`` section of an experiment,
    whose split and IBM Model 1 iterations are the experiment's own).

    Attributes:
        modes: Any of ``"qt"``, ``"psq"``, ``"dt"``.
        models: Any of ``"bm25"`` (rank-bm25's BM25Okapi: k1 1.5, b 0.75, Okapi idf floored at
            0.25 * mean idf) and ``"ql"`` (Dirichlet, mu 2500).
        k: Depth of each run.
        psq_top_k: Translations per query word in PSQ.
        psq_cumulative: Probability mass kept per query word in PSQ.
        spelling: Spelling-variant matching of query terms outside the index (the least
            similarity, see :class:`~clir.translation.SpellingMatcher`); ``None``: off. It
            raised the MAP of every en-sw first stage by 0.05-0.07 on the dev queries.
        model_params: Per-model parameters, e.g. ``{"ql": {"mu": 2500}}`` (checked against the
            retriever's constructor).
    """

    modes: Annotated[tuple[Annotated[str, OneOf(MODES)], ...], NonEmpty(), Unique()] = ("qt", "psq", "dt")
    models: Annotated[tuple[Annotated[str, OneOf(RETRIEVERS)], ...], NonEmpty(), Unique()] = ("bm25", "ql")
    k: PositiveInt = 1000
    psq_top_k: PositiveInt = 10
    psq_cumulative: Annotated[float, Range(gt=0, le=1)] = 0.9
    spelling: Annotated[float, Range(gt=0, le=1)] | None = 0.5
    model_params: dict[Annotated[str, OneOf(RETRIEVERS)], dict[str, Any]] = field(default_factory=dict)

    def check(self, where: Where) -> None:
        for name, params in self.model_params.items():
            checked = check_arguments(retriever_class(name), params, where, f"model_params.{name}")
            with where.context(f"model_params.{name}: "):
                get_retriever(name, **checked)


@dataclass(frozen=True)
class BaselineConfig(BaselineOptions):
    """Settings of the first-stage baselines: :class:`BaselineOptions` plus

    Attributes:
        split: The query split evaluated.
        iterations: IBM Model 1 EM iterations.
    """

    split: str = "test"
    iterations: PositiveInt = 10


def first_stage(
    mode: str,
    model: str,
    collection: Collection,
    tables: tuple[TranslationTable, TranslationTable],
    config: BaselineConfig,
    progress: bool = True,
) -> FirstStage:
    """An indexed first stage of one mode and model over the collection's documents."""
    stage = baseline_stage(mode, model, collection.query_lang, collection.doc_lang, tables, config, progress)
    return stage.index(collection.documents)


def baseline_stage(
    mode: str,
    model: str,
    query_lang: str,
    doc_lang: str,
    tables: tuple[TranslationTable, TranslationTable],
    config: BaselineConfig,
    progress: bool = True,
) -> FirstStage:
    """The first stage of one mode and model with the baselines' settings, not yet indexed
    (:meth:`FirstStage.index`, or :meth:`FirstStage.index_shards` for a large collection)."""
    return FirstStage(
        mode,
        model,
        en_analyzer=query_lang,
        doc_analyzer=doc_lang,
        table_en_doc=tables[0],
        table_doc_en=tables[1],
        psq_top_k=config.psq_top_k,
        psq_cumulative=config.psq_cumulative,
        spelling=config.spelling,
        progress=progress,
        **config.model_params.get(model, {}),
    )


def run_baselines(
    collection: Collection,
    out: str | Path,
    config: BaselineConfig = BaselineConfig(),
    *,
    tables: tuple[TranslationTable, TranslationTable] | None = None,
    progress: bool = True,
) -> dict[str, dict[str, float]]:
    """Run and evaluate every mode x model; write runs, ``results.json`` and ``results.md``.

    Args:
        collection: The collection (its parallel side trains the tables).
        out: Output directory: ``tables/``, ``runs/<mode>-<model>.run``, ``results.json``,
            ``results.md``.
        config: What to run.
        tables: ``(en->doc, doc->en)`` tables; learned into ``out/tables`` when not given.
        progress: Show progress bars.

    Returns:
        ``{"<mode>-<model>": {measure: value}}`` on the configured split.

    Raises:
        OutputExistsError: If ``out`` is neither new, empty nor a baselines directory.
    """
    out = output_directory(out, kind="baselines")
    if tables is None:
        tables = learn_tables(collection, out / "tables", iterations=config.iterations, progress=progress)
    queries = collection.split(config.split)
    qrels = collection.qrels_of(config.split)
    results: dict[str, dict[str, float]] = {}
    runs: dict[str, Run] = {}
    size = len(collection.documents)
    for mode in config.modes:
        for model in config.models:
            name = f"{mode}-{model}"
            run = first_stage(mode, model, collection, tables, config, progress).search(queries, k=config.k)
            write_run(out / "runs" / f"{name}.run", run, tag=name)
            runs[name] = run
            with warnings.catch_warnings():  # a query that retrieved nothing counts 0: search warned
                warnings.simplefilter("ignore", CoverageWarning)
                results[name] = evaluate(run, qrels, DEFAULT_MEASURES, collection_size=size)
    with atomic_write(out / "results.json") as handle:
        json.dump(
            {"collection": collection.name, "config": config.to_dict(), "systems": results}, handle, indent=2
        )
    with atomic_write(out / "results.md") as handle:
        handle.write(markdown_table(results, list(DEFAULT_MEASURES)) + "\n")
    return results

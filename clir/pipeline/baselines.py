"""The lexical baselines: {QT, PSQ, DT} x {BM25, QL} first-stage runs on a collection, evaluated."""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

from clir.config import (
    NonEmpty,
    OmitWhenNone,
    OneOf,
    PositiveInt,
    Range,
    Section,
    Unique,
    Where,
    check_arguments,
)
from clir.datasets import Collection
from clir.errors import ConfigError
from clir.evaluation import DEFAULT_MEASURES, CoverageWarning, evaluate, markdown_table
from clir.formats import atomic_write, write_run
from clir.formats.atomic import directory_lock, output_directory
from clir.pipeline.engine import Engine
from clir.pipeline.parallel import LOCAL, index_stage, search_stage
from clir.pipeline.tables import learn_tables
from clir.retrieval import MODES, RETRIEVERS, FirstStage, get_retriever, retriever_class
from clir.translation import TranslationTable
from clir.translation.mt import MTModels, MTTranslation, mt_translation
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
        psq_cumulative: Share of the ``psq_top_k`` translations' mass kept per query word in PSQ.
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


TRANSLATION_MODES = ("table", "mt")


@dataclass(frozen=True)
class TranslationConfig(Section):
    """How queries and documents are translated (the ``translation`` section of an experiment).

    Attributes:
        mode: ``"table"``: word by word with the IBM Model 1 tables (QT for queries, DT top-1
            for documents); ``"mt"``: with local MT models (:class:`~clir.translation.mt.MTModels`)
            where a language has them: the documents' English view (D-hat_en of the reranker,
            the ``dt`` first stages) and the queries' document-language view (Q-hat, the ``qt``
            first stages). PSQ and the reranker's query_en stay as they are.
        models: ``{document language: MTModels}``, e.g. ``{"sw": {"to_en": DIR, "from_en": DIR}}``.
    """

    mode: Annotated[str, OneOf(TRANSLATION_MODES)] = "table"
    models: dict[str, MTModels] = field(default_factory=dict)

    def check(self, where: Where) -> None:
        if self.mode == "mt" and not self.models:
            expected = "{<doc_lang>: {to_en: DIR, from_en: DIR}} with mode 'mt'"
            raise where.error("models", self.models, expected)
        if self.mode == "table" and self.models:  # they had been ignored without a word
            warnings.warn(
                f"{where.source}: {where.prefix}models {sorted(self.models)} are not used in mode "
                f"'table' (the tables translate word by word); set {where.prefix}mode: mt to use them",
                stacklevel=2,
            )

    def mt(self, doc_lang: str) -> MTTranslation | None:
        """The MT of a document language (``None`` in ``table`` mode).

        Raises:
            ConfigError: In ``mt`` mode, for a language without models.
        """
        if self.mode != "mt":
            return None
        if doc_lang not in self.models:
            raise ConfigError(
                f"translation.mode is 'mt' but translation.models has no {doc_lang!r} "
                f"(it has {sorted(self.models)})"
            )
        return mt_translation(self.models[doc_lang], doc_lang)

    def files_key(self) -> dict[str, Any]:
        """What a cached step's key holds beyond the section's settings: in ``mt`` mode a digest
        of each language's model files (:meth:`MTModels.files_digest`), so that a model replaced
        at the same path is not served the old one's translations, and ``mt_long_texts``: texts
        longer than ``max_length`` are translated in pieces (until 2026-12-07 their tails were cut,
        and such steps are not reused); nothing in ``table`` mode."""
        if self.mode != "mt":
            return {}
        files = {lang: models.files_digest() for lang, models in sorted(self.models.items())}
        return {"mt_files": files, "mt_long_texts": "pieces"}


@dataclass(frozen=True)
class BaselineConfig(BaselineOptions):
    """Settings of the first-stage baselines: :class:`BaselineOptions` plus

    Attributes:
        split: The query split evaluated.
        iterations: IBM Model 1 EM iterations.
        translation: Machine translation (the experiment's ``translation`` section in ``mt``
            mode); ``None``: the tables.
    """

    split: str = "test"
    iterations: PositiveInt = 10
    translation: Annotated[TranslationConfig | None, OmitWhenNone()] = None


def first_stage(
    mode: str,
    model: str,
    collection: Collection,
    tables: tuple[TranslationTable, TranslationTable],
    config: BaselineConfig,
    progress: bool = True,
    engine: Engine = LOCAL,
) -> FirstStage:
    """An indexed first stage of one mode and model over the collection's documents (analysed,
    and in DT translated, on ``engine``)."""
    stage = baseline_stage(mode, model, collection.query_lang, collection.doc_lang, tables, config, progress)
    return index_stage(stage, collection.documents, engine)


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
        mt=config.translation.mt(doc_lang) if config.translation else None,
        **config.model_params.get(model, {}),
    )


def run_baselines(
    collection: Collection,
    out: str | Path,
    config: BaselineConfig = BaselineConfig(),
    *,
    tables: tuple[TranslationTable, TranslationTable] | None = None,
    progress: bool = True,
    engine: Engine = LOCAL,
) -> dict[str, dict[str, float]]:
    """Run and evaluate every mode x model; write runs, ``results.json`` and ``results.md``.

    Args:
        collection: The collection (its parallel side trains the tables).
        out: Output directory: ``tables/``, ``runs/<mode>-<model>.run``, ``results.json``,
            ``results.md``.
        config: What to run.
        tables: ``(en->doc, doc->en)`` tables; learned into ``out/tables`` when not given.
        progress: Show progress bars.
        engine: Runs the indexing's analysis and the searches (:mod:`clir.pipeline.engine`).

    Returns:
        ``{"<mode>-<model>": {measure: value}}`` on the configured split.

    Raises:
        OutputExistsError: If ``out`` is neither new, empty nor a baselines directory.
        OutputLockedError: If another run writes into ``out`` (two at once had mixed their runs,
            under a ``results.json`` of one of them).
    """
    out = output_directory(out, kind="baselines")
    with directory_lock(out, wait=False):  # one run at a time writes its runs and results here
        return _run_baselines(collection, out, config, tables, progress, engine)


def _run_baselines(
    collection: Collection,
    out: Path,
    config: BaselineConfig,
    tables: tuple[TranslationTable, TranslationTable] | None,
    progress: bool,
    engine: Engine,
) -> dict[str, dict[str, float]]:
    """:func:`run_baselines` into its claimed and locked ``out``."""
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
            stage = first_stage(mode, model, collection, tables, config, progress, engine)
            run = search_stage(stage, queries, engine, k=config.k)
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

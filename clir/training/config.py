"""Training configuration: dataclasses that map one-to-one onto the YAML files of ``configs/``.

A config file has five sections and four top-level keys::

    model:          # the bilingual reranker (clir.rerankers)
      interaction: knrm          # registry name of the per-component interaction model
      interaction_kwargs: {}     # keyword arguments of that model
      shared_weights: false      # one interaction model for all four components
      components: [en_src, en_en, src_src, src_en]
      fusion: linear             # "linear" | "mlp"
      fusion_hidden: 8           # hidden units of the "mlp" fusion
      features: true             # feed the first-stage / overlap features to the fusion layer
    data:
      first_stage: psq-ql        # which first-stage run supplies the candidates (or a list)
      depth: 100                 # candidates reranked per query (per first stage)
      negatives_per_positive: 1
      max_query_len: 20
      max_doc_len: 200
      feature_norm: zscore       # "zscore" | "minmax" (per query, over its candidates)
      qt_k: 1                    # translations per query word in Q̂_src
      spelling: null             # e.g. 0.5: match unknown query terms (names) by spelling
    optim:
      lr: 0.001
      epochs: 10
      batch_size: 32
      margin: 1.0
      dropout: 0.0               # passed to interaction models that take one (posit_drmm)
      weight_decay: 0.0
      seed: 0
      patience: 3                # epochs without dev improvement before stopping (0: never)
      init_from: null            # a checkpoint or ensemble directory to start from
      feature_dropout: null      # e.g. 0.3: drop feature columns in training (null: off)
      component_lr: null         # learning rate of the components (null: lr; 0: frozen)
      loss: null                 # "hinge" | "softmax" (null: hinge)
      hard_negatives: null       # e.g. {share: 0.5, depth: 20}: negatives from the top ranks
    cv:
      folds: 1                   # > 1: k-fold cross-validation over the training queries
    ensemble:
      seeds: [0]                 # one model per seed (per fold); scores averaged
    device: auto                 # "cpu" | "cuda" | "auto"
    progress: true
    precision: null              # dev / test scoring: "fp32" | "bf16" | "auto" (null: auto)
    score_batch_size: null       # pairs per forward pass when scoring (null: 256 CPU, 8192 CUDA)

Every key is optional (the defaults are those above); an unknown key is an error naming the key,
its section and the file.

**Union candidates.** ``data.first_stage`` names one first stage (``qt-bm25``) or several
(``[qt-bm25, psq-bm25, dt-bm25]``). With several, a query's candidates are the union of each
stage's top ``depth`` documents (so up to ``depth`` × stages of them, :attr:`DataConfig.max_candidates`),
ranked by reciprocal-rank fusion (:func:`clir.pipeline.features.fuse_runs`); every feature
column is computed exactly for every candidate, whichever stages retrieved it. A single name
builds exactly the data it always did (and a config with one keeps its cached steps).

**Starting from a checkpoint.** ``optim.init_from`` names a checkpoint or ensemble directory
(relative to the working directory); for an ensemble, the member trained with the same seed
(else its first member) is used. Its interaction components' weights, and its fusion layer's
when its feature names are this data's, replace the random initialisation
(:func:`clir.training.warmstart.load_init_weights`). Left out of the config's ``to_dict`` while
unset, so configs without it keep their step keys; the experiment keys a training step by
the path and the digest of the weights it names (:func:`clir.training.warmstart.init_digest`).

**Regularising the fusion** (issue 13, lever 4: the lexical columns may drown the neural ones
when everything is trained jointly). ``optim.feature_dropout`` zeroes each feature of each
training pair with that probability (inverted dropout; nothing is dropped at inference).
``optim.component_lr`` trains the interaction components at their own learning rate, ``0``
freezing them: with ``init_from`` a components-only model (``model.features: false``), that is
"components first, then the fusion". Both are left out of ``to_dict`` while unset, as
``init_from`` is.

**Hard negatives** (issue 13, lever 4). By default each relevant candidate's
``data.negatives_per_positive`` negatives are drawn uniformly from the query's non-relevant
candidates. ``optim.hard_negatives: {share: s, depth: d}`` draws the nearest whole number
(halves up) to ``s`` × that many of them from the non-relevant candidates among the first ``d``
in first-stage order (the reciprocal-rank-fused order of union candidates) and the rest
uniformly from the negatives left (:func:`clir.training.data.sample_groups`). It is an ``optim``
key, as ``loss`` is, so that each system of an experiment chooses it. Left out of ``to_dict``
while unset: the default's sampling and step keys are unchanged.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Annotated, Any

import torch
import yaml

from clir.config import (
    NonEmpty,
    NonNegativeInt,
    OmitWhenNone,
    OneOf,
    PositiveInt,
    Range,
    Section,
    Seed,
    Unique,
    Where,
    check_arguments,
    load_yaml,
)
from clir.formats import atomic_write
from clir.rerankers import COMPONENTS as BILINGUAL_COMPONENTS
from clir.rerankers import INTERACTION_MODELS
from clir.rerankers.fusion import FUSIONS, Fusion
from clir.retrieval import MODES, RETRIEVERS

COMPONENTS: tuple[str, ...] = tuple(BILINGUAL_COMPONENTS)
"""The four (query, document) pairings of the bilingual reranker (Zhang et al., 2019):
``en_src`` = (Q_en, D_src), ``en_en`` = (Q_en, D̂_en), ``src_src`` = (Q̂_src, D_src),
``src_en`` = (Q̂_src, D̂_en). ``src`` is the document language, a hat marks a translation."""
FEATURE_NORMS: tuple[str, ...] = ("zscore", "minmax")
DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")
PRECISIONS: tuple[str, ...] = ("auto", "fp32", "bf16")
LOSSES: tuple[str, ...] = ("hinge", "softmax")
"""Scoring precisions: ``fp32``; ``bf16`` (autocast, CUDA only); ``auto``: fp32 on a CPU, bf16 on
CUDA where it ranks as fp32 does (:func:`clir.training.scoring.choose_precision`), else fp32."""
FUSION_HIDDEN = 8
"""The default of ``model.fusion_hidden``, the one value a fusion without hidden units takes."""
MARGIN = 1.0
"""The default of ``optim.margin``, the one value a loss without a margin takes."""
_UNBUILDABLE = (RuntimeError, TypeError, OverflowError, ValueError)
"""What torch raises when a module's sizes cannot be laid out, even on the meta device."""


def _first_line(error: BaseException) -> str:
    """The first line of an exception's message (torch's may run on over several)."""
    return str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__


@dataclass
class ModelConfig(Section):
    """The reranker's architecture.

    Attributes:
        interaction: Registry name of the interaction model of each component
            (``"drmm"``, ``"knrm"``, ``"pacrr_drmm"``, ``"posit_drmm"``).
        interaction_kwargs: Keyword arguments of that model (e.g. ``{"n_bins": 30}``), among its
            ``config_keys``, each of the type its constructor declares.
        shared_weights: One interaction model shared by the components instead of one each.
        components: Which of :data:`COMPONENTS` are on.
        fusion: The layer combining component scores and features: ``"linear"`` or ``"mlp"``.
        fusion_hidden: Hidden units of the ``"mlp"`` fusion (another fusion takes only the
            default, 8).
        features: Whether the fusion layer sees the extra (first-stage, overlap) features.
    """

    interaction: Annotated[str, OneOf(INTERACTION_MODELS)] = "knrm"
    interaction_kwargs: dict[str, Any] = field(default_factory=dict)
    shared_weights: bool = False
    components: Annotated[list[Annotated[str, OneOf(COMPONENTS)]], Unique()] = field(
        default_factory=lambda: list(COMPONENTS)
    )
    fusion: Annotated[str, OneOf(FUSIONS)] = "linear"
    fusion_hidden: PositiveInt = FUSION_HIDDEN
    features: bool = True

    def check(self, where: Where) -> None:
        model = INTERACTION_MODELS[self.interaction]
        check_arguments(model, self.interaction_kwargs, where, "interaction_kwargs", model.config_keys)
        # the model's own range checks, at load; on the meta device, which holds no weights (a
        # `max_ngram: 1000000` had taken the machine's memory before anything ran)
        # Sizes torch cannot lay out (`lstm_hidden: 1000000000`, `fusion_hidden: 2**64`) had
        # been "unexpected RuntimeError / TypeError", naming neither the key nor the file.
        try:
            with where.context("interaction_kwargs: "), torch.device("meta"):
                model(2, None, **self.interaction_kwargs)
        except _UNBUILDABLE as error:
            expected = f"sizes whose weights torch can lay out (torch: {_first_line(error)})"
            raise where.error("interaction_kwargs", self.interaction_kwargs, expected) from None
        try:
            with torch.device("meta"):
                Fusion(max(1, len(self.components)), self.fusion, self.fusion_hidden)
        except _UNBUILDABLE as error:
            expected = f"a size torch can lay out (torch: {_first_line(error)})"
            raise where.error("fusion_hidden", self.fusion_hidden, expected) from None
        if not self.components and not self.features:
            raise where.error("components", self.components, "at least one component when features are off")
        if self.fusion != "mlp" and self.fusion_hidden != FUSION_HIDDEN:  # it had been ignored, silently
            expected = f"{FUSION_HIDDEN} (the default): only the 'mlp' fusion has hidden units"
            raise where.error("fusion_hidden", self.fusion_hidden, expected)


@dataclass
class DataConfig(Section):
    """What the reranker is trained and applied on.

    Attributes:
        first_stage: Name ``"<mode>-<model>"`` of the first-stage run whose top ``depth`` are
            reranked (e.g. ``"psq-ql"``, ``"qt-bm25"``; see :mod:`clir.pipeline.features`), or
            a list of names: the union of their top ``depth`` lists, fused by reciprocal rank.
        depth: Candidates per query (per first stage); at least 2 in all.
        negatives_per_positive: Negatives sampled per (query, relevant candidate) per epoch.
        max_query_len: Query tokens kept (longer queries are truncated).
        max_doc_len: Document tokens kept (the first ones).
        feature_norm: Per-query normalisation of first-stage scores over the candidate list:
            ``"zscore"`` ((s - mean) / std, 0 when constant) or ``"minmax"`` (to [0, 1]).
        qt_k: Translations per query word in the translated query Q̂_src.
        spelling: Spelling-variant matching of query terms outside the documents' vocabulary
            (the least similarity; ``None``: off; see :class:`~clir.translation.SpellingMatcher`).
    """

    first_stage: str | Annotated[list[str], NonEmpty(), Unique()] = "psq-ql"
    depth: PositiveInt = 100
    negatives_per_positive: PositiveInt = 1
    max_query_len: PositiveInt = 20
    max_doc_len: PositiveInt = 200
    feature_norm: Annotated[str, OneOf(FEATURE_NORMS)] = "zscore"
    qt_k: PositiveInt = 1
    spelling: Annotated[float, Range(gt=0, le=1)] | None = None

    @property
    def first_stages(self) -> list[str]:
        """The first stages whose candidates are reranked (one or several)."""
        return [self.first_stage] if isinstance(self.first_stage, str) else list(self.first_stage)

    @property
    def max_candidates(self) -> int:
        """The most candidates a query can have: ``depth`` per first stage."""
        return self.depth * len(self.first_stages)

    def check(self, where: Where) -> None:
        check_first_stages(self.first_stage, where)
        if self.max_candidates < 2:  # refused by the trainer only once the features were built
            expected = (
                "a value >= 2 with one first stage: a query of one candidate has no relevant and "
                "non-relevant pair to train on, and reranking one candidate changes nothing"
            )
            raise where.error("depth", self.depth, expected)


def check_first_stages(first_stage: str | Sequence[str], where: Where) -> None:
    """Every name of a ``first_stage`` key (one name or a list) is ``"<mode>-<model>"`` of a
    known mode and model, else an error naming the key (``first_stage[i]`` in a list)."""
    several = not isinstance(first_stage, str)
    for i, name in enumerate([first_stage] if isinstance(first_stage, str) else first_stage):
        mode, _, model = name.partition("-")
        if mode not in MODES or model not in RETRIEVERS:
            raise where.error(
                f"first_stage[{i}]" if several else "first_stage",
                name,
                f"'<mode>-<model>' with a mode among {sorted(MODES)} and a model among {sorted(RETRIEVERS)}",
            )


@dataclass
class HardNegativesConfig(Section):
    """Negatives drawn from the top of the first-stage list (see the module docstring).

    Attributes:
        share: Share of each relevant candidate's negatives drawn from the top ``depth``
            candidates (rounded to the nearest count, halves up); the rest are drawn uniformly.
        depth: The rank cut: the hard negatives are the non-relevant candidates among a
            query's first ``depth`` candidates, in first-stage order.
    """

    share: Annotated[float, Range(gt=0, le=1)] = 1.0
    depth: PositiveInt = 20

    def count(self, negatives: int) -> int:
        """The hard negatives among ``negatives`` per relevant candidate: the nearest whole
        number to ``share`` × ``negatives``, halves up, of the share as written (its shortest
        decimal form): 0.58 × 25 is 14.5, so 15 (the float product 14.499999999999998 had
        given 14)."""
        return int(Decimal(repr(self.share)) * negatives + Decimal("0.5"))


@dataclass
class OptimConfig(Section):
    """Optimisation (Adam on a pairwise hinge or a listwise softmax loss, early stopping on dev MAP).

    Attributes:
        lr: Adam learning rate.
        epochs: Maximum number of epochs.
        batch_size: (positive, negative) pairs per step.
        margin: Hinge margin (the softmax loss takes only the default, 1.0).
        dropout: Dropout of the interaction models that have one (``dropout`` among their
            config keys, e.g. ``posit_drmm``); must be 0 for the others. A ``dropout`` in
            ``model.interaction_kwargs`` takes precedence.
        weight_decay: Adam weight decay (L2).
        seed: Seed of initialisation, dropout, sampling and shuffling of a :class:`Trainer` used
            alone, and of the cross-validation's folds. An ensemble (``clir train``) seeds its
            models with ``ensemble.seeds`` instead (one model per seed).
        patience: Stop after this many epochs without a better dev score (0: run all epochs).
        init_from: A checkpoint or ensemble directory whose trained weights start training
            (see the module docstring); ``None``: random initialisation.
        feature_dropout: Probability with which each feature (not a component score) of each
            training pair is zeroed, the kept ones scaled by ``1 / (1 - p)``; never at
            inference. ``None``: off (as 0, but keeps the step keys of configs without it).
            Only ``None`` or 0 when ``model.features`` is off.
        component_lr: Adam learning rate of the interaction components (``lr`` stays the
            fusion layer's); ``0`` freezes them. ``None``: ``lr`` for everything (the only value
            when ``model.components`` is empty).
        loss: ``"hinge"`` (each relevant candidate against one sampled negative at a time,
            ``margin``) or ``"softmax"`` (against its ``data.negatives_per_positive`` negatives
            at once, :func:`~clir.rerankers.losses.softmax_loss`; ``batch_size`` then counts
            such lists). ``None``: hinge (keeps the step keys of configs without it).
        hard_negatives: Draw a share of the negatives from the top of the first-stage list
            (:class:`HardNegativesConfig`). ``None``: every negative drawn uniformly. Its
            ``depth`` must be below ``data.max_candidates`` and its ``share`` must round to one
            hard negative or more (else every negative is drawn uniformly, as without it).
    """

    lr: Annotated[float, Range(gt=0)] = 1e-3
    epochs: PositiveInt = 10
    batch_size: PositiveInt = 32
    margin: Annotated[float, Range(ge=0)] = MARGIN
    dropout: Annotated[float, Range(ge=0, lt=1)] = 0.0
    weight_decay: Annotated[float, Range(ge=0)] = 0.0
    seed: Seed = 0
    patience: NonNegativeInt = 3
    init_from: Annotated[str | None, OmitWhenNone()] = None
    feature_dropout: Annotated[Annotated[float, Range(ge=0, lt=1)] | None, OmitWhenNone()] = None
    component_lr: Annotated[Annotated[float, Range(ge=0)] | None, OmitWhenNone()] = None
    loss: Annotated[Annotated[str, OneOf(LOSSES)] | None, OmitWhenNone()] = None
    hard_negatives: Annotated[HardNegativesConfig | None, OmitWhenNone()] = None

    def check(self, where: Where) -> None:
        if self.init_from is not None and not self.init_from.strip():
            raise where.error("init_from", self.init_from, "a checkpoint or ensemble directory, or null")
        if self.loss == "softmax" and self.margin != MARGIN:  # it had been ignored, silently
            expected = f"{MARGIN} (the default): the softmax loss has no margin (the hinge loss has)"
            raise where.error("margin", self.margin, expected)


@dataclass
class CVConfig(Section):
    """Cross-validation over queries.

    Attributes:
        folds: Number of folds; 1 trains once on all training queries.
    """

    folds: PositiveInt = 1


@dataclass
class EnsembleConfig(Section):
    """Ensembles of models.

    Attributes:
        seeds: One model per seed (and per fold); their per-query normalised scores are averaged.
    """

    seeds: Annotated[list[Seed], NonEmpty(), Unique()] = field(default_factory=lambda: [0])


@dataclass
class TrainConfig(Section):
    """A whole training configuration (one YAML file).

    ``device``, ``progress``, ``precision`` and ``score_batch_size`` say where and how (not what)
    is trained and scored: a resumed run may change them. ``precision`` and ``score_batch_size``
    are left out of ``to_dict`` while unset (configs without them keep their step keys).

    Values are checked on construction, by :meth:`~clir.config.Section.from_dict` and
    :func:`load_config` (naming the file and the dotted key) and, after changes in place, by
    :meth:`~clir.config.Section.validate`, which the trainer calls.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    cv: CVConfig = field(default_factory=CVConfig)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    device: Annotated[str, OneOf(DEVICES)] = "auto"
    progress: bool = True
    precision: Annotated[Annotated[str, OneOf(PRECISIONS)] | None, OmitWhenNone()] = None
    score_batch_size: Annotated[PositiveInt | None, OmitWhenNone()] = None

    def check(self, where: Where) -> None:
        model = self.model
        if self.optim.dropout > 0 and "dropout" not in INTERACTION_MODELS[model.interaction].config_keys:
            # named at load, with the file (it had been refused once the features were built)
            expected = f"0: interaction model {model.interaction!r} has no dropout"
            raise where.error("optim.dropout", self.optim.dropout, expected)
        # options that a model or data of this config would ignore, silently, refused
        window = model.interaction_kwargs.get("window", 0) if model.interaction == "knrm" else 0
        if window >= self.data.max_doc_len:  # one window holds the whole (truncated) document
            expected = (
                f"0 or a value < data.max_doc_len ({self.data.max_doc_len}): a window that long holds "
                "every document whole, as window 0 does"
            )
            raise where.error("model.interaction_kwargs.window", window, expected)
        optim = self.optim
        if optim.feature_dropout and not model.features:
            expected = "null or 0: model.features is false, so there is no feature to drop"
            raise where.error("optim.feature_dropout", optim.feature_dropout, expected)
        if optim.component_lr is not None and not model.components:
            expected = "null: model.components is empty, so there is no component to train"
            raise where.error("optim.component_lr", optim.component_lr, expected)
        hard = optim.hard_negatives
        if hard is not None and hard.depth >= self.data.max_candidates:
            expected = (
                f"a value < {self.data.max_candidates}, the candidates a query has at most "
                "(data.depth per first stage): at that depth every negative is a hard one, "
                "so every negative would be drawn uniformly, as without hard_negatives"
            )
            raise where.error("optim.hard_negatives.depth", hard.depth, expected)
        if hard is not None and hard.count(self.data.negatives_per_positive) == 0:
            npp = self.data.negatives_per_positive
            expected = (
                f"a value >= {0.5 / npp:g}: {hard.share:g} times data.negatives_per_positive ({npp}) "
                "rounds to no hard negative, so every negative would be drawn uniformly"
            )
            raise where.error("optim.hard_negatives.share", hard.share, expected)


def load_config(path: str | Path) -> TrainConfig:
    """Read a training config from YAML (or JSON, which is YAML).

    Args:
        path: The file.

    Returns:
        The config; keys the file leaves out take their defaults.

    Raises:
        DataNotFoundError: If the file does not exist.
        ConfigError: On an unknown key, a wrong type or an invalid value (naming key and file).
    """
    return TrainConfig.from_dict(load_yaml(path), source=str(path))


def save_config(config: TrainConfig, path: str | Path) -> Path:
    """Write a config as YAML (``.yaml``/``.yml``) or JSON (any other suffix), atomically.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    with atomic_write(path) as handle:
        if path.suffix in (".yaml", ".yml"):
            yaml.safe_dump(config.to_dict(), handle, sort_keys=False)
        else:
            json.dump(config.to_dict(), handle, indent=2)
            handle.write("\n")
    return path

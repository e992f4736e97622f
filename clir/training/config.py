"""Training configuration: dataclasses that map one-to-one onto the YAML files of ``configs/``.

A config file has five sections and two top-level keys::

    model:          # the bilingual reranker (clir.rerankers)
      interaction: knrm          # registry name of the per-component interaction model
      interaction_kwargs: {}     # keyword arguments of that model
      shared_weights: false      # one interaction model for all four components
      components: [en_src, en_en, src_src, src_en]
      fusion: linear             # "linear" | "mlp"
      fusion_hidden: 8           # hidden units of the "mlp" fusion
      features: true             # feed the first-stage / overlap features to the fusion layer
    data:
      first_stage: psq-ql        # which first-stage run supplies the candidates
      depth: 100                 # candidates reranked per query
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
    cv:
      folds: 1                   # > 1: k-fold cross-validation over the training queries
    ensemble:
      seeds: [0]                 # one model per seed (per fold); scores averaged
    device: auto                 # "cpu" | "cuda" | "auto"
    progress: true

Every key is optional (the defaults are those above); an unknown key is an error naming the key,
its section and the file.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import yaml

from clir.errors import ConfigError, DataNotFoundError
from clir.formats import atomic_write
from clir.rerankers import COMPONENTS as BILINGUAL_COMPONENTS
from clir.rerankers import INTERACTION_MODELS
from clir.rerankers.fusion import FUSIONS

COMPONENTS: tuple[str, ...] = tuple(BILINGUAL_COMPONENTS)
"""The four (query, document) pairings of the bilingual reranker (Zhang et al., 2019):
``en_src`` = (Q_en, D_src), ``en_en`` = (Q_en, D̂_en), ``src_src`` = (Q̂_src, D_src),
``src_en`` = (Q̂_src, D̂_en). ``src`` is the document language, a hat marks a translation."""
FEATURE_NORMS: tuple[str, ...] = ("zscore", "minmax")
DEVICES: tuple[str, ...] = ("cpu", "cuda", "auto")


@dataclass
class ModelConfig:
    """The reranker's architecture.

    Attributes:
        interaction: Registry name of the interaction model of each component
            (``"drmm"``, ``"knrm"``, ``"pacrr_drmm"``, ``"posit_drmm"``).
        interaction_kwargs: Keyword arguments of that model (e.g. ``{"n_bins": 30}``).
        shared_weights: One interaction model shared by the components instead of one each.
        components: Which of :data:`COMPONENTS` are on.
        fusion: The layer combining component scores and features: ``"linear"`` or ``"mlp"``.
        fusion_hidden: Hidden units of the ``"mlp"`` fusion.
        features: Whether the fusion layer sees the extra (first-stage, overlap) features.
    """

    interaction: str = "knrm"
    interaction_kwargs: dict[str, Any] = field(default_factory=dict)
    shared_weights: bool = False
    components: list[str] = field(default_factory=lambda: list(COMPONENTS))
    fusion: str = "linear"
    fusion_hidden: int = 8
    features: bool = True


@dataclass
class DataConfig:
    """What the reranker is trained and applied on.

    Attributes:
        first_stage: Name of the first-stage run whose top ``depth`` are reranked
            (e.g. ``"psq-ql"``, ``"qt-ql"``, ``"dt-ql"``; see :mod:`clir.pipeline.features`).
        depth: Candidates per query.
        negatives_per_positive: Negatives sampled per (query, relevant candidate) per epoch.
        max_query_len: Query tokens kept (longer queries are truncated).
        max_doc_len: Document tokens kept (the first ones).
        feature_norm: Per-query normalisation of first-stage scores over the candidate list:
            ``"zscore"`` ((s - mean) / std, 0 when constant) or ``"minmax"`` (to [0, 1]).
        qt_k: Translations per query word in the translated query Q̂_src.
        spelling: Spelling-variant matching of query terms outside the documents' vocabulary
            (the least similarity; ``None``: off; see :class:`~clir.translation.SpellingMatcher`).
    """

    first_stage: str = "psq-ql"
    depth: int = 100
    negatives_per_positive: int = 1
    max_query_len: int = 20
    max_doc_len: int = 200
    feature_norm: str = "zscore"
    qt_k: int = 1
    spelling: float | None = None


@dataclass
class OptimConfig:
    """Optimisation (Adam on a pairwise hinge loss, early stopping on dev MAP).

    Attributes:
        lr: Adam learning rate.
        epochs: Maximum number of epochs.
        batch_size: (positive, negative) pairs per step.
        margin: Hinge margin.
        dropout: Dropout of the interaction models that have one (``dropout`` among their
            config keys, e.g. ``posit_drmm``); must be 0 for the others. A ``dropout`` in
            ``model.interaction_kwargs`` takes precedence.
        weight_decay: Adam weight decay (L2).
        seed: Seed of initialisation, dropout, sampling and shuffling.
        patience: Stop after this many epochs without a better dev score (0: run all epochs).
    """

    lr: float = 1e-3
    epochs: int = 10
    batch_size: int = 32
    margin: float = 1.0
    dropout: float = 0.0
    weight_decay: float = 0.0
    seed: int = 0
    patience: int = 3


@dataclass
class CVConfig:
    """Cross-validation over queries.

    Attributes:
        folds: Number of folds; 1 trains once on all training queries.
    """

    folds: int = 1


@dataclass
class EnsembleConfig:
    """Ensembles of models.

    Attributes:
        seeds: One model per seed (and per fold); their per-query normalised scores are averaged.
    """

    seeds: list[int] = field(default_factory=lambda: [0])


@dataclass
class TrainConfig:
    """A whole training configuration (one YAML file).

    Values are checked by :meth:`validate`, which :meth:`from_dict`, :func:`load_config` and the
    trainer call.
    """

    model: ModelConfig = field(default_factory=ModelConfig)
    data: DataConfig = field(default_factory=DataConfig)
    optim: OptimConfig = field(default_factory=OptimConfig)
    cv: CVConfig = field(default_factory=CVConfig)
    ensemble: EnsembleConfig = field(default_factory=EnsembleConfig)
    device: str = "auto"
    progress: bool = True

    def validate(self, source: str = "config") -> None:
        """Check values (not only types).

        Args:
            source: Named in error messages (e.g. the file).

        Raises:
            ConfigError: Naming the key, the value and what was expected.
        """

        def bad(key: str, value: Any, expected: str) -> ConfigError:
            return ConfigError(f"{source}: {key}={value!r} is invalid; expected {expected}")

        model, data, optim = self.model, self.data, self.optim
        unknown = [c for c in model.components if c not in COMPONENTS]
        if unknown or len(set(model.components)) != len(model.components):
            raise bad("model.components", model.components, f"distinct names among {list(COMPONENTS)}")
        if model.interaction not in INTERACTION_MODELS:
            raise bad("model.interaction", model.interaction, f"one of {sorted(INTERACTION_MODELS)}")
        takes = INTERACTION_MODELS[model.interaction].config_keys
        unknown = sorted(set(model.interaction_kwargs) - set(takes))
        if unknown:
            raise bad(
                "model.interaction_kwargs", model.interaction_kwargs, f"arguments among {sorted(takes)}"
            )
        if model.fusion not in FUSIONS:
            raise bad("model.fusion", model.fusion, f"one of {list(FUSIONS)}")
        if model.fusion_hidden < 1:
            raise bad("model.fusion_hidden", model.fusion_hidden, "an integer >= 1")
        if not model.components and not model.features:
            raise bad("model.components", model.components, "at least one component when features are off")
        if data.feature_norm not in FEATURE_NORMS:
            raise bad("data.feature_norm", data.feature_norm, f"one of {list(FEATURE_NORMS)}")
        if data.spelling is not None and not 0 < data.spelling <= 1:
            raise bad("data.spelling", data.spelling, "a number in (0, 1] or null")
        for key in ("depth", "negatives_per_positive", "max_query_len", "max_doc_len", "qt_k"):
            if getattr(data, key) < 1:
                raise bad(f"data.{key}", getattr(data, key), "an integer >= 1")
        for key in ("epochs", "batch_size"):
            if getattr(optim, key) < 1:
                raise bad(f"optim.{key}", getattr(optim, key), "an integer >= 1")
        if optim.lr <= 0:
            raise bad("optim.lr", optim.lr, "a positive number")
        if optim.margin < 0:
            raise bad("optim.margin", optim.margin, "a number >= 0")
        if not 0 <= optim.dropout < 1:
            raise bad("optim.dropout", optim.dropout, "a number in [0, 1)")
        if optim.patience < 0:
            raise bad("optim.patience", optim.patience, "an integer >= 0")
        if self.cv.folds < 1:
            raise bad("cv.folds", self.cv.folds, "an integer >= 1")
        if not self.ensemble.seeds:
            raise bad("ensemble.seeds", self.ensemble.seeds, "a non-empty list of integers")
        if self.device not in DEVICES:
            raise bad("device", self.device, f"one of {list(DEVICES)}")

    def to_dict(self) -> dict[str, Any]:
        """Plain dict, as written to YAML/JSON."""
        return asdict(self)

    @classmethod
    def from_dict(cls, values: dict[str, Any], source: str = "config") -> TrainConfig:
        """Build from a plain dict (as read from YAML), rejecting unknown keys.

        Args:
            values: The mapping.
            source: Named in error messages (e.g. the file).

        Raises:
            ConfigError: On an unknown key (naming it, its section and ``source``), a value of
                the wrong type or an invalid value.
        """
        config = _build(cls, values, source, "")
        config.validate(source)
        return config


def _build(cls: type, values: Any, source: str, prefix: str) -> Any:
    """Build dataclass ``cls`` from ``values``, recursively, checking keys and types."""
    where = prefix.rstrip(".") or "top level"
    if values is None:
        values = {}
    if not isinstance(values, dict):
        raise ConfigError(f"{source}: {where} must be a mapping, got {type(values).__name__} {values!r}")
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(str(k) for k in values if k not in names)
    if unknown:
        raise ConfigError(
            f"{source}: unknown key(s) {[prefix + k for k in unknown]} in {where}; "
            f"known keys: {sorted(names)}"
        )
    kwargs = {}
    for key, value in values.items():
        kwargs[key] = _convert(hints[key], value, source, prefix + key)
    return cls(**kwargs)


def _convert(hint: Any, value: Any, source: str, key: str) -> Any:
    """Check ``value`` against the type hint ``hint`` (dataclass, int, float, bool, str, list, dict,
    ``X | None``)."""
    if dataclasses.is_dataclass(hint):
        return _build(hint, value, source, key + ".")
    origin = typing.get_origin(hint)

    def wrong(expected: str) -> ConfigError:
        return ConfigError(f"{source}: {key} must be {expected}, got {type(value).__name__} {value!r}")

    if origin is list:
        (item,) = typing.get_args(hint)
        if not isinstance(value, list):
            raise wrong("a list")
        return [_convert(item, v, source, f"{key}[{i}]") for i, v in enumerate(value)]
    if origin is dict:
        if not isinstance(value, dict):
            raise wrong("a mapping")
        return dict(value)
    if origin in (typing.Union, types.UnionType):
        (inner,) = [arg for arg in typing.get_args(hint) if arg is not type(None)]  # only Optional[X]
        return None if value is None else _convert(inner, value, source, key)
    if hint is bool:
        if not isinstance(value, bool):
            raise wrong("true or false")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise wrong("an integer")
        return value
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise wrong("a number")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise wrong("a string")
        return value
    return value


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
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such config file")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8"))
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: not valid YAML ({error})") from None
    return TrainConfig.from_dict(values or {}, source=str(path))


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

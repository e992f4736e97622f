"""The first-stage settings a trained reranker's candidates and features were computed with.

A model learns from the scores and candidates of its first stages (BM25's ``k1`` and ``b``,
QL's ``mu``, PSQ pruning, spelling matching, machine translation): reranking with other
settings feeds it other features, and silently gives other numbers. So training writes them
beside the model (:data:`TRAINED_WITH_FILE` in the ensemble or checkpoint directory, by
:func:`record_first_stage`), and whatever reranks with the model (``clir rerank``, ``clir
bundle``, ``clir explain``, the PyTerrier ``Reranker``) defaults to them
(:func:`model_baseline`). A model saved before this record existed reranks with the default
:class:`~clir.pipeline.baselines.BaselineConfig`, as it did then.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

from clir._version import __version__
from clir.config import build
from clir.errors import FormatError
from clir.formats import atomic_write
from clir.formats.jsonfile import read_json_file
from clir.pipeline.baselines import BaselineConfig
from clir.training.ensemble import ENSEMBLE_FILE

TRAINED_WITH_FILE = "first_stage_settings.json"
TRAINED_WITH_TYPE = "first_stage_settings"

FEATURE_SETTINGS = ("psq_top_k", "psq_cumulative", "spelling", "model_params", "translation")
"""The :class:`~clir.pipeline.baselines.BaselineConfig` fields that change the first stages'
scores, and so a reranker's candidates and features (the rest say which baselines run, to what
depth and on which split)."""


class FirstStageSettingsWarning(UserWarning):
    """A model reranks with other first-stage settings than it was trained with."""


def feature_settings(baseline: BaselineConfig) -> dict[str, Any]:
    """The settings of ``baseline`` that shape a reranker's inputs (:data:`FEATURE_SETTINGS`),
    as plain JSON data."""
    values = baseline.to_dict()
    return {name: values[name] for name in FEATURE_SETTINGS if name in values}


def record_first_stage(model: str | Path, baseline: BaselineConfig) -> Path:
    """Write the first-stage settings a model was trained with into its ensemble or checkpoint
    directory ``model`` (atomically; a file beside the checkpoints' manifests, not in them).

    Returns:
        The file written.
    """
    path = Path(model) / TRAINED_WITH_FILE
    record = {"type": TRAINED_WITH_TYPE, "clir_version": __version__, "settings": feature_settings(baseline)}
    with atomic_write(path) as handle:
        json.dump(record, handle, indent=2, sort_keys=True)
        handle.write("\n")
    return path


def _record_path(model: Path) -> Path | None:
    """The record of a model directory, or of the ensemble a member checkpoint belongs to."""
    for directory in (model, model.parent):
        ensemble = directory is model or (directory / ENSEMBLE_FILE).is_file()
        if ensemble and (directory / TRAINED_WITH_FILE).is_file():
            return directory / TRAINED_WITH_FILE
    return None


def recorded_first_stage(model: str | Path) -> BaselineConfig | None:
    """The first-stage settings a model was trained with (its other fields the defaults), or
    ``None`` for a model saved without the record.

    Raises:
        FormatError: For a record that is not one, or holds invalid settings.
    """
    path = _record_path(Path(model))
    if path is None:
        return None
    record = read_json_file(path)
    is_record = isinstance(record, dict) and record.get("type") == TRAINED_WITH_TYPE
    settings = record.get("settings") if is_record else None
    if not isinstance(settings, dict):
        raise FormatError(path, None, f'expected {{"type": "{TRAINED_WITH_TYPE}", "settings": {{...}}}}')
    return build(BaselineConfig, settings, str(path), "settings.")  # named where they are in the file


def model_baseline(model: str | Path, baseline: BaselineConfig | None = None) -> BaselineConfig:
    """The first-stage settings to rerank with a model: ``baseline`` when given, else those the
    model was trained with (:func:`recorded_first_stage`), else the defaults.

    Warns:
        FirstStageSettingsWarning: When ``baseline`` differs from the recorded settings in what
            shapes the features (the model then sees other inputs than it learned from).
    """
    recorded = recorded_first_stage(model)
    if baseline is None:
        return recorded or BaselineConfig()
    if recorded is not None:
        given, trained = feature_settings(baseline), feature_settings(recorded)
        differ = sorted(name for name in {*given, *trained} if given.get(name) != trained.get(name))
        if differ:
            changes = ", ".join(f"{name} {trained.get(name)!r} -> {given.get(name)!r}" for name in differ)
            warnings.warn(
                f"{model} was trained with other first-stage settings than it reranks with "
                f"({changes}): its candidates and features differ from those it learned from; "
                "leave the settings out to use the model's",
                FirstStageSettingsWarning,
                stacklevel=3,
            )
    return baseline

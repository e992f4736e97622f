"""Training checkpoints: everything needed to use the best model and to resume training.

A checkpoint is a directory, rewritten atomically (temporary directory + ``os.replace``) after
every epoch, so an interruption leaves the previous epoch's checkpoint intact::

    checkpoint.json       type, clir_version, epoch counter, best epoch and score, patience
                          counter, finished flag, feature names, document language
    train_config.yaml     the training config used
    curve.json            per epoch: loss, dev score, pairs, seconds
    model/                the BEST epoch's reranker (config.json + model.safetensors, written by
                          the reranker's own ``save``; the frozen embedding matrix is left out)
    last/model.safetensors       the last epoch's weights (no embedding matrix)
    last/optimizer.safetensors   the optimiser's tensors; last/optimizer.json its other state
    last/rng.safetensors         torch RNG states (CPU, and CUDA where present)
    manifest.json         size and SHA-256 of every other file but the curve: a damaged
                          checkpoint is never resumed (training starts again) nor loaded for scoring,
                          and neither is one whose manifest omits a file the reader uses
                          (:data:`RESUME_FILES`, :data:`SCORING_FILES`): emptied or cut by hand

The frozen embedding matrix is not stored: it is rebuilt from the shared space for the
vocabulary of whatever data the model is applied to, which also makes zero-shot transfer to
another document language a matter of building data in that language.
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import save_file
from torch import Tensor, nn

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_directory
from clir.formats.atomic import tidy_interrupted
from clir.formats.jsonfile import read_json_file, read_typed_json
from clir.formats.manifest import file_manifest, is_manifest, manifest_problem, omission, sha256_of
from clir.rerankers.base import CONFIG_FILE as MODEL_CONFIG_FILE
from clir.rerankers.base import WEIGHTS_FILE, read_model_dir, read_tensors, weights_misfit
from clir.rerankers.encoding import FrozenEmbedding
from clir.training.config import TrainConfig, load_config, save_config

CHECKPOINT_TYPE = "reranker_checkpoint"
ARTEFACT_KIND = "checkpoint"
"""The kind in a checkpoint directory's marker (:mod:`clir.formats.atomic`)."""
CHECKPOINT_FILE = "checkpoint.json"
CONFIG_FILE = "train_config.yaml"
CURVE_FILE = "curve.json"
_RETRAIN = "; train the checkpoint again"
MODEL_DIR = "model"
LAST_DIR = "last"
MANIFEST_FILE = "manifest.json"
SCORING_FILES = (
    CHECKPOINT_FILE,
    CONFIG_FILE,
    f"{MODEL_DIR}/{MODEL_CONFIG_FILE}",
    f"{MODEL_DIR}/{WEIGHTS_FILE}",
)
"""The files of a checkpoint that scoring reads (a warm start, some of them): its manifest must
list each (:func:`checkpoint_problem`)."""
_LAST_FILES = ("model.safetensors", "optimizer.safetensors", "optimizer.json", "rng.safetensors")
RESUME_FILES = (*SCORING_FILES, *(f"{LAST_DIR}/{name}" for name in _LAST_FILES))
"""The files of a checkpoint that a resume reads, all but the curve (which the manifest leaves
out: it records timings); its manifest must list each."""


@dataclass
class TrainingState:
    """Where training stands after an epoch.

    Attributes:
        epoch: Epochs completed.
        best_epoch: The epoch whose weights are the model (0: none yet).
        best_score: Its dev score (``None`` without a dev set).
        bad_epochs: Epochs since the last improvement (for patience).
        finished: Training ended (all epochs run or stopped early).
        curve: One dict per epoch: ``epoch``, ``loss``, ``dev`` (score or ``None``), ``pairs``,
            ``seconds``.
        info: Free JSON facts about the data (feature names, document language, ...).
    """

    epoch: int = 0
    best_epoch: int = 0
    best_score: float | None = None
    bad_epochs: int = 0
    finished: bool = False
    curve: list[dict[str, Any]] = field(default_factory=list)
    info: dict[str, Any] = field(default_factory=dict)


def frozen_keys(model: nn.Module) -> set[str]:
    """State-dict keys of the frozen embedding matrices inside ``model``."""
    keys = set()
    for name, module in model.named_modules():
        if isinstance(module, FrozenEmbedding):
            keys.update(f"{name}.{key}" if name else key for key in module.state_dict())
    return keys


def trainable_state(model: nn.Module) -> dict[str, Tensor]:
    """A CPU copy of the model's state without its frozen embedding matrices."""
    skip = frozen_keys(model)
    return {k: v.detach().to("cpu").clone() for k, v in model.state_dict().items() if k not in skip}


def _misfit(model: nn.Module, state: dict[str, Tensor]) -> str | None:
    """How a state written by :func:`trainable_state` does not fit ``model`` (``None``: it does)."""
    return weights_misfit(model, state, frozen_keys(model))


def load_trainable_state(model: nn.Module, state: dict[str, Tensor]) -> None:
    """Load a state written by :func:`trainable_state` (every other key must be present).

    Raises:
        ConfigError: If keys are missing or unexpected, or a tensor has another shape.
    """
    if (misfit := _misfit(model, state)) is not None:
        raise ConfigError(f"weights do not fit the model: {misfit}")
    model.load_state_dict(state, strict=False)


def _optimizer_to_files(optimizer: torch.optim.Optimizer) -> tuple[dict[str, Tensor], dict[str, Any]]:
    """Split an optimiser state into tensors (safetensors) and JSON (no pickle)."""
    state = optimizer.state_dict()
    tensors: dict[str, Tensor] = {}
    scalars: dict[str, dict[str, Any]] = {}
    for index, values in state["state"].items():
        for key, value in values.items():
            if isinstance(value, Tensor):
                tensors[f"{index}.{key}"] = value.detach().to("cpu").contiguous()
            else:
                scalars.setdefault(str(index), {})[key] = value
    return tensors, {"param_groups": state["param_groups"], "scalars": scalars}


def _optimizer_from_files(tensors: dict[str, Tensor], meta: dict[str, Any]) -> dict[str, Any]:
    state: dict[int, dict[str, Any]] = {}
    for name, value in tensors.items():
        index, key = name.split(".", 1)
        state.setdefault(int(index), {})[key] = value
    for index, values in meta.get("scalars", {}).items():
        state.setdefault(int(index), {}).update(values)
    return {"state": state, "param_groups": meta["param_groups"]}


def _rng_tensors() -> dict[str, Tensor]:
    tensors = {"torch_cpu": torch.get_rng_state()}
    if torch.cuda.is_available():
        for i, value in enumerate(torch.cuda.get_rng_state_all()):
            tensors[f"torch_cuda_{i}"] = value
    return tensors


def _restore_rng(tensors: dict[str, Tensor]) -> None:
    torch.set_rng_state(tensors["torch_cpu"])
    cuda = [tensors[k] for k in sorted(tensors) if k.startswith("torch_cuda_")]
    if cuda and torch.cuda.is_available() and len(cuda) == torch.cuda.device_count():
        torch.cuda.set_rng_state_all(cuda)


def _json_number(value: float | None) -> float | None:
    return None if value is None or (isinstance(value, float) and not math.isfinite(value)) else value


def save_checkpoint(
    path: str | Path,
    *,
    model: nn.Module,
    best_state: dict[str, Tensor],
    optimizer: torch.optim.Optimizer,
    state: TrainingState,
    config: TrainConfig,
) -> Path:
    """Write a checkpoint directory atomically (see the module docstring).

    Args:
        path: The directory (replaced).
        model: The model after the last epoch (with ``save(dir, include_embeddings=...)``).
        best_state: :func:`trainable_state` of the best epoch.
        optimizer: The optimiser after the last epoch.
        state: Counters and curve.
        config: The training config used.

    Returns:
        ``path`` as a :class:`~pathlib.Path`.
    """
    path = Path(path)
    last = trainable_state(model)
    tensors, optim_meta = _optimizer_to_files(optimizer)
    with atomic_directory(path, kind=ARTEFACT_KIND) as tmp:
        (tmp / LAST_DIR).mkdir()
        save_file(last, str(tmp / LAST_DIR / "model.safetensors"), metadata={"clir_version": __version__})
        save_file(tensors, str(tmp / LAST_DIR / "optimizer.safetensors"))
        (tmp / LAST_DIR / "optimizer.json").write_text(json.dumps(optim_meta, indent=1), encoding="utf-8")
        save_file(_rng_tensors(), str(tmp / LAST_DIR / "rng.safetensors"))
        # The best model, through the reranker's own save (its config.json rebuilds it).
        load_trainable_state(model, best_state)
        try:
            model.save(tmp / MODEL_DIR, include_embeddings=False)  # type: ignore[operator]
        finally:
            load_trainable_state(model, last)
        save_config(config, tmp / CONFIG_FILE)
        (tmp / CURVE_FILE).write_text(json.dumps(state.curve, indent=1) + "\n", encoding="utf-8")
        meta = {
            "type": CHECKPOINT_TYPE,
            "clir_version": __version__,
            **{k: v for k, v in asdict(state).items() if k != "curve"},
            "best_score": _json_number(state.best_score),
        }
        (tmp / CHECKPOINT_FILE).write_text(json.dumps(meta, indent=1) + "\n", encoding="utf-8")
        files = file_manifest(tmp, exclude=(CURVE_FILE,))  # the curve holds timings: it varies
        (tmp / MANIFEST_FILE).write_text(json.dumps(files, indent=1) + "\n", encoding="utf-8")
    return path


def tidy_checkpoint(path: str | Path) -> None:
    """Finish or clear what a :func:`save_checkpoint` of ``path`` that was killed left beside it,
    before ``path`` is read for a resume (:func:`~clir.formats.atomic.tidy_interrupted`: killed
    between its two renames, it had left no checkpoint at ``path``)."""
    tidy_interrupted(path, ARTEFACT_KIND)


def checkpoint_problem(path: str | Path, required: Iterable[str] = RESUME_FILES) -> str | None:
    """What is wrong with a checkpoint's files against its manifest (``None``: intact, or saved by
    a clir that wrote no manifest, which is used unverified with a warning).

    Args:
        path: The checkpoint.
        required: The files the reader will use (:data:`RESUME_FILES` or :data:`SCORING_FILES`):
            a manifest that omits one (emptied or cut by hand) is a problem, never leave to use
            that file unverified.
    """
    path = Path(path)
    try:
        files = json.loads((path / MANIFEST_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:  # clir wrote checkpoints without one until 2026-12-03 (1e98a38)
        warnings.warn(
            f"{path}: a checkpoint without {MANIFEST_FILE} (saved by a clir before checkpoints had "
            "one, or the file was removed), so it is used unverified; train it again to have it verified",
            stacklevel=2,
        )
        return None
    except (OSError, ValueError) as error:
        return f"{MANIFEST_FILE} is unreadable ({error})"
    if not is_manifest(files):
        return f"{MANIFEST_FILE} is not a manifest"
    if (omitted := omission(files, required)) is not None:
        return f"{MANIFEST_FILE} {omitted}"
    return manifest_problem(path, files)


def is_checkpoint(path: str | Path) -> bool:
    """Whether ``path`` holds a checkpoint written by :func:`save_checkpoint`."""
    return (Path(path) / CHECKPOINT_FILE).is_file()


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


_STATE_TYPES: dict[str, tuple[str, Callable[[Any], bool]]] = {
    "epoch": ("an integer >= 0", _count),
    "best_epoch": ("an integer >= 0", _count),
    "bad_epochs": ("an integer >= 0", _count),
    "best_score": (
        "a number or null",
        lambda v: v is None or (type(v) in (int, float) and math.isfinite(v)),
    ),
    "finished": ("true or false", lambda v: type(v) is bool),
    "info": ("an object", lambda v: isinstance(v, dict)),
}
"""What :func:`read_state` accepts of each key of ``checkpoint.json``: (in words, test)."""


def read_state(path: str | Path, curve: bool = True) -> TrainingState:
    """The counters and curve of a checkpoint.

    Args:
        path: The checkpoint.
        curve: Read the learning curve too (scoring does not need it; ``False``: an empty one).

    Raises:
        DataNotFoundError: If ``path`` is not a checkpoint, or a file of it is missing.
        FormatError: If its ``checkpoint.json`` is of another type, or it or the curve is not
            what :func:`save_checkpoint` writes.
    """
    path = Path(path)
    if not is_checkpoint(path):
        raise DataNotFoundError(f"{path / CHECKPOINT_FILE} not found: {path} is not a reranker checkpoint")
    meta = read_typed_json(path / CHECKPOINT_FILE, CHECKPOINT_TYPE, _RETRAIN)
    keys = tuple(_STATE_TYPES)
    missing = [k for k in keys if k not in meta]
    if missing:
        raise FormatError(path / CHECKPOINT_FILE, None, f"lacks {missing}; train it again")
    names = meta["info"].get("feature_names", []) if isinstance(meta["info"], dict) else []
    wrong = [(k, meta[k], expected) for k, (expected, fits) in _STATE_TYPES.items() if not fits(meta[k])]
    if not (isinstance(names, list) and all(isinstance(name, str) for name in names)):
        wrong.append(("info.feature_names", names, "a list of names"))
    if wrong:  # a "finished": "no" had ended a resumed training at once, silently
        key, value, expected = wrong[0]
        raise FormatError(path / CHECKPOINT_FILE, None, f"{key} is {value!r}, not {expected}; train it again")
    points = read_json_file(path / CURVE_FILE, _RETRAIN) if curve else []
    if not isinstance(points, list) or not all(isinstance(point, dict) for point in points):
        raise FormatError(path / CURVE_FILE, None, "is not a list of epochs; train the checkpoint again")
    return TrainingState(curve=points, **{k: meta[k] for k in keys})


def read_config(path: str | Path) -> TrainConfig:
    """The training config stored in a checkpoint."""
    return load_config(Path(path) / CONFIG_FILE)


def restore_training(
    path: str | Path, model: nn.Module, optimizer: torch.optim.Optimizer
) -> tuple[TrainingState, dict[str, Tensor]]:
    """Put a model and its optimiser back in the state of a checkpoint's last epoch.

    Also restores the torch RNG states.

    Args:
        path: The checkpoint.
        model: A model built as the checkpoint's (same config and data).
        optimizer: An optimiser over ``model``'s parameters, as built for training.

    Returns:
        ``(state, best weights)``.

    Raises:
        DataNotFoundError: If a file of it is missing.
        FormatError: Naming the file, if one is unreadable or does not fit ``model`` or
            ``optimizer`` (one edited by hand, or left without its manifest).
    """
    path = Path(path)
    state = read_state(path)
    last = path / LAST_DIR
    weights = read_tensors(last / "model.safetensors", _RETRAIN)
    if (misfit := _misfit(model, weights)) is not None:
        raise FormatError(last / "model.safetensors", None, f"does not fit the model: {misfit}{_RETRAIN}")
    load_trainable_state(model, weights)
    tensors = read_tensors(last / "optimizer.safetensors", _RETRAIN)
    meta = read_json_file(last / "optimizer.json", _RETRAIN)
    try:
        optimizer.load_state_dict(_optimizer_from_files(tensors, meta))
    except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
        what = f"{type(error).__name__}: {error}"
        raise FormatError(
            last / "optimizer.json", None, f"not the optimiser's state ({what}){_RETRAIN}"
        ) from None
    for group in optimizer.param_groups:  # else its first step fails, naming no file
        for param in group["params"]:
            for key, value in optimizer.state.get(param, {}).items():
                if isinstance(value, Tensor) and value.dim() and value.shape != param.shape:
                    shapes = f"{tuple(value.shape)}, not the weights' {tuple(param.shape)}"
                    raise FormatError(
                        last / "optimizer.safetensors", None, f"its {key} has shape {shapes}{_RETRAIN}"
                    )
    rng = last / "rng.safetensors"
    try:
        _restore_rng(read_tensors(rng, _RETRAIN))
    except (KeyError, TypeError, RuntimeError) as error:
        raise FormatError(rng, None, f"not the random generators' states ({error}){_RETRAIN}") from None
    _, best = read_model_dir(path / MODEL_DIR)
    if (misfit := _misfit(model, best)) is not None:
        raise FormatError(
            path / MODEL_DIR / "model.safetensors", None, f"does not fit the model: {misfit}{_RETRAIN}"
        )
    return state, best


def model_dir(path: str | Path) -> Path:
    """The directory of a checkpoint's best model (loadable by the reranker's ``load``)."""
    return Path(path) / MODEL_DIR


def model_sha256(path: str | Path) -> str:
    """The SHA-256 of a checkpoint's best-model weights (``model/model.safetensors``).

    Raises:
        OSError: If the file cannot be read.
    """
    return sha256_of(model_dir(path) / WEIGHTS_FILE)

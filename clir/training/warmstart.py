"""Starting training from trained weights (``optim.init_from``): pretrain the reranker on one
set of queries (e.g. pseudo-queries made from parallel text), then train it on another.

The source is a checkpoint or an ensemble directory; of an ensemble, the member trained with the
same seed is used, else its first member. Its best model's interaction components are always
loaded; its fusion layer only when it was trained on the same feature names (otherwise the
fusion layer keeps its random initialisation: it would weigh other columns). Both models must
have the same interaction architecture — the shared space's dimension, the interaction model
and its arguments (dropout aside: it changes training, not the weights), the components and
weight sharing — and, when the fusion layer is loaded, the same fusion; otherwise a
:class:`~clir.errors.ConfigError` names what differs.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from torch import nn

from clir.errors import ConfigError, FormatError
from clir.rerankers.base import read_model_dir
from clir.training.checkpoint import SCORING_FILES, checkpoint_problem, model_dir, model_sha256, read_state
from clir.training.ensemble import member_paths

ARCHITECTURE: dict[str, str] = {
    "embedding_dim": "the shared space's dimension",
    "model": "model.interaction",
    "model_kwargs": "model.interaction_kwargs",
    "components": "model.components",
    "share_weights": "model.shared_weights",
    "component_models": "component_models",
}
"""The saved model's config keys that must be equal, with the names a user knows them by."""
FUSION: dict[str, str] = {"fusion": "model.fusion", "fusion_hidden": "model.fusion_hidden"}
"""The keys that must also be equal when the fusion layer is loaded."""
NOT_ARCHITECTURE = ("dropout",)
"""Interaction arguments that do not change the weights."""


def init_member(path: str | Path, seed: int) -> Path:
    """The checkpoint that a model of ``seed`` starts from: of an ensemble, the member trained
    with that seed, else the first; a checkpoint directory itself.

    Each member read on the way (its ``checkpoint.json`` holds its seed) is checked against its
    manifest first, the chosen one included, so a damaged file is named as such rather than met
    as a file that does not parse.

    Raises:
        DataNotFoundError: If ``path`` is neither a checkpoint nor an ensemble directory.
        FormatError: If a member read is damaged (its files do not match its manifest, or it
            omits one that scoring reads).
    """
    members = member_paths(path)
    for member in members:
        _check_intact(member)
        if read_state(member, curve=False).info.get("seed") == seed:
            return member
    return members[0]  # checked in the loop


def _check_intact(member: Path) -> None:
    if (problem := checkpoint_problem(member, SCORING_FILES)) is not None:
        raise FormatError(member, None, f"damaged checkpoint: {problem}; train it again")


def init_digest(path: str | Path) -> str:
    """SHA-256 over the best-model weights of every member of a checkpoint or ensemble: what a
    training step started from ``path`` is keyed by beside the path (retrained, it changes).

    Raises:
        DataNotFoundError: If ``path`` is neither a checkpoint nor an ensemble directory.
    """
    digest = hashlib.sha256()
    for member in member_paths(path):
        digest.update(model_sha256(member).encode("ascii"))
    return digest.hexdigest()


def _comparable(config: dict[str, Any], key: str) -> Any:
    value = config.get(key)
    if key == "model_kwargs":
        return {k: v for k, v in (value or {}).items() if k not in NOT_ARCHITECTURE}
    return value


def load_init_weights(model: nn.Module, path: str | Path, seed: int) -> dict[str, Any]:
    """Load a trained model's weights into a freshly built reranker (see the module docstring).

    Args:
        model: The :class:`~clir.rerankers.bilingual.BilingualReranker` about to be trained.
        path: ``optim.init_from``: a checkpoint or ensemble directory.
        seed: The seed of the model being trained (picks the ensemble member).

    Returns:
        What was loaded: ``path`` (the member), ``sha256`` (of its weights) and ``fusion``
        (whether the fusion layer was loaded too).

    Raises:
        DataNotFoundError: If ``path`` is neither a checkpoint nor an ensemble directory.
        ConfigError: If the architectures differ (naming each difference).
        FormatError: If the checkpoint's files do not match its manifest, or it omits one that is
            read (a damaged checkpoint).
    """
    member = init_member(path, seed)  # checked against its manifest
    saved_dir, tensors = read_model_dir(model_dir(member))
    saved = saved_dir["config"]
    ours = model.get_config()  # type: ignore[operator]
    fusion = saved.get("feature_names") == ours["feature_names"]
    keys = {**ARCHITECTURE, **(FUSION if fusion else {})}
    differ = [
        f"{name} ({_comparable(saved, key)!r} there, {_comparable(ours, key)!r} here)"
        for key, name in keys.items()
        if _comparable(saved, key) != _comparable(ours, key)
    ]
    if differ:
        raise ConfigError(
            f"optim.init_from={str(path)!r}: the model of {member} differs from this config's in "
            + "; ".join(differ)
        )
    prefixes = ("scorers.", "fusion.") if fusion else ("scorers.",)
    state = {k: v for k, v in tensors.items() if k.startswith(prefixes)}
    wanted = {k for k in model.state_dict() if k.startswith(prefixes)}
    if set(state) != wanted:
        raise ConfigError(
            f"optim.init_from={str(path)!r}: the weights of {member} do not fit the model: missing "
            f"{sorted(wanted - set(state))}, unexpected {sorted(set(state) - wanted)}"
        )
    model.load_state_dict(state, strict=False)
    return {"path": str(member), "sha256": model_sha256(member), "fusion": fusion}

"""The interaction-model family: one base class, a registry, atomic save and load.

An interaction model scores (query, document) pairs from the similarity of their terms in the
shared cross-lingual space. It may own a :class:`~clir.rerankers.encoding.FrozenEmbedding`
(stand-alone use: ``model(PairBatch)``) or own none and be fed
:class:`~clir.rerankers.encoding.EncodedPair` objects by a model that owns the table (the
bilingual model does that, so its four components share one matrix).

Persistence: ``save(dir)`` writes ``config.json`` (``"type"``, ``"clir_version"``, the
constructor arguments) and ``model.safetensors`` atomically (a temporary directory swapped
into place). The frozen matrix is stored once, as ``embedding.weight``, unless
``include_embeddings=False`` (then ``load`` needs ``embeddings=`` or yields a model without a
table, usable through ``score_pair``).
"""

from __future__ import annotations

import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Mapping, Set
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar, TypeVar

import torch
from safetensors import SafetensorError
from safetensors.torch import load_file, save_file
from torch import Tensor, nn

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats.atomic import atomic_directory
from clir.formats.jsonfile import read_json_file
from clir.rerankers.batch import PairBatch
from clir.rerankers.encoding import EncodedPair, EncodedView, FrozenEmbedding

CONFIG_FILE = "config.json"
WEIGHTS_FILE = "model.safetensors"
EMBEDDING_KEY = "embedding.weight"

INTERACTION_MODELS: dict[str, type[InteractionModel]] = {}
"""Registry: config name -> interaction model class (filled by :func:`register`)."""

M = TypeVar("M", bound="type[InteractionModel]")
ModuleT = TypeVar("ModuleT", bound=nn.Module)


def register(name: str) -> Callable[[M], M]:
    """Class decorator adding an interaction model to :data:`INTERACTION_MODELS` under ``name``."""

    def decorate(cls: M) -> M:
        cls.name = name
        INTERACTION_MODELS[name] = cls
        return cls

    return decorate


def get_interaction_model(name: str) -> type[InteractionModel]:
    """The class registered under ``name``.

    Raises:
        ConfigError: If ``name`` is unknown; the message lists the registered names.
    """
    try:
        return INTERACTION_MODELS[name]
    except (KeyError, TypeError):
        raise ConfigError(
            f"unknown interaction model {name!r}; expected one of {sorted(INTERACTION_MODELS)}"
        ) from None


def build_interaction_model(
    name: str, embedding_dim: int, embeddings: Tensor | None = None, seed: int = 0, **kwargs: Any
) -> InteractionModel:
    """Build a registered model from its name and keyword arguments (a config entry)."""
    return get_interaction_model(name)(embedding_dim, embeddings, seed=seed, **kwargs)


@contextmanager
def torch_seed(seed: int) -> Iterator[None]:
    """Run a block with the CPU generator seeded by ``seed``, without disturbing it (restored
    after) or the CUDA generators (``torch.manual_seed`` had reseeded those for good)."""
    with torch.random.fork_rng(devices=[]):
        torch.default_generator.manual_seed(seed)
        yield


def masked_softmax(logits: Tensor, mask: Tensor, dim: int = -1) -> Tensor:
    """Softmax over the True positions of ``mask``; masked positions (and all-masked rows) get 0."""
    logits = logits.float()
    weights = torch.softmax(logits.masked_fill(~mask, torch.finfo(logits.dtype).min), dim=dim)
    return weights * mask


def check_choice(name: str, value: object, choices: tuple[str, ...]) -> None:
    """Raise :class:`ConfigError` unless ``value`` is one of ``choices``."""
    if value not in choices:
        raise ConfigError(f"{name} must be one of {list(choices)}, got {value!r}")


def check_positive(name: str, value: object) -> None:
    """Raise :class:`ConfigError` unless ``value`` is a positive int."""
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")


# ----------------------------------------------------------------------------------- persistence


def write_model_dir(path: str | Path, config: dict[str, Any], tensors: dict[str, Tensor]) -> None:
    """Write ``config.json`` + ``model.safetensors`` into ``path`` atomically (an interrupted save
    leaves an older artefact at ``path`` intact)."""
    with atomic_directory(path, kind="model") as tmp:
        (tmp / CONFIG_FILE).write_text(json.dumps(config, indent=2, sort_keys=True) + "\n", encoding="utf-8")
        cpu = {k: v.detach().to("cpu").contiguous() for k, v in tensors.items()}
        save_file(cpu, str(tmp / WEIGHTS_FILE), metadata={"clir_version": __version__})


def weights_misfit(
    model: nn.Module, tensors: Mapping[str, Tensor], skip: Set[str] = frozenset()
) -> str | None:
    """How saved weights do not fit ``model`` (``None``: they do), as a phrase for an error.

    Args:
        model: The model built to receive them.
        tensors: The saved tensors, by state-dict key.
        skip: Keys of ``model``'s state that are not saved (its frozen embedding matrices).

    Returns:
        ``"missing [...], unexpected [...]"`` (keys), or the first key whose tensor has another
        shape (``"<key> has shape (2, 3), not (2, 4)"``), or ``None``.
    """
    own = model.state_dict()
    expected = set(own) - skip
    missing, unexpected = expected - set(tensors), set(tensors) - expected
    if missing or unexpected:
        return f"missing {sorted(missing)}, unexpected {sorted(unexpected)}"
    wrong = next((k for k in sorted(expected) if tensors[k].shape != own[k].shape), None)
    if wrong is None:
        return None
    return f"{wrong} has shape {tuple(tensors[wrong].shape)}, not {tuple(own[wrong].shape)}"


def restore(
    model_cls: type[ModuleT],
    path: str | Path,
    config: dict[str, Any],
    tensors: dict[str, Tensor],
    embeddings: Tensor | None,
    device: torch.device | str | None,
) -> ModuleT:
    """Build ``model_cls`` from a saved config and load its weights (the saved embedding matrix
    unless ``embeddings`` is given).

    Raises:
        FormatError: Naming the file, if the config builds no ``model_cls`` or the weights do
            not fit it (keys missing or unexpected, or a tensor of another shape).
    """
    saved = tensors.pop(EMBEDDING_KEY, None)
    try:
        model = model_cls(embeddings=embeddings if embeddings is not None else saved, **config["config"])
    except TypeError as error:  # an argument it does not take, or of another type
        raise FormatError(
            Path(path) / CONFIG_FILE, None, f"its config does not build a {model_cls.__name__} ({error})"
        ) from None
    if (misfit := weights_misfit(model, tensors, {EMBEDDING_KEY})) is not None:
        raise FormatError(Path(path) / WEIGHTS_FILE, None, f"weights do not fit the config: {misfit}")
    model.load_state_dict(tensors, strict=False)
    return model.to(device) if device is not None else model


class SavedModule:
    """What clir's torch models share: ``save`` (registry name, constructor config, weights) and
    ``predict``."""

    name: ClassVar[str]

    def get_config(self) -> dict[str, Any]:
        raise NotImplementedError

    def save(self, path: str | Path, include_embeddings: bool = True) -> None:
        """Save atomically to the directory ``path`` (config.json + model.safetensors).

        Args:
            path: Target directory (replaced if present).
            include_embeddings: Store the frozen matrix (once) as ``embedding.weight``.
        """
        state = {k: v for k, v in self.state_dict().items() if include_embeddings or k != EMBEDDING_KEY}  # type: ignore[attr-defined]
        config = {
            "type": self.name,
            "clir_version": __version__,
            "config": self.get_config(),
            "has_embeddings": EMBEDDING_KEY in state,
        }
        write_model_dir(path, config, state)

    @torch.inference_mode()
    def predict(self, batch: Any) -> Tensor:
        """Scores in eval mode without autograd (the training flag is restored afterwards)."""
        was_training = self.training  # type: ignore[attr-defined]
        self.eval()  # type: ignore[attr-defined]
        try:
            return self(batch)  # type: ignore[operator]
        finally:
            self.train(was_training)  # type: ignore[attr-defined]


def read_tensors(path: str | Path, advice: str = "") -> dict[str, Tensor]:
    """The tensors of a safetensors file, on the CPU.

    Args:
        path: The file.
        advice: What to do about a missing or unreadable one, appended to the message.

    Raises:
        DataNotFoundError: If it does not exist.
        FormatError: Naming it, if it is no whole safetensors file (truncated, edited).
    """
    try:
        return load_file(str(path), device="cpu")
    except FileNotFoundError:
        raise DataNotFoundError(f"{path} is missing{advice}") from None
    except (SafetensorError, OSError) as error:  # a raw error that named no file
        raise FormatError(path, None, f"unreadable, not a whole safetensors file ({error}){advice}") from None


def read_model_dir(path: str | Path) -> tuple[dict[str, Any], dict[str, Tensor]]:
    """Read what :func:`write_model_dir` wrote: (config, tensors on CPU).

    Raises:
        DataNotFoundError: If ``path`` or one of its two files is missing.
        FormatError: Naming the file, if ``config.json`` is not a saved model's (unreadable, no
            ``config`` object) or the weights are no whole safetensors file or hold a NaN or an
            infinity.
    """
    path = Path(path)
    for name in (CONFIG_FILE, WEIGHTS_FILE):
        if not (path / name).is_file():
            raise DataNotFoundError(f"{path / name} not found: {path} is not a saved clir reranker")
    config = read_json_file(path / CONFIG_FILE)
    if not isinstance(config, dict) or not isinstance(config.get("config"), dict):
        raise FormatError(path / CONFIG_FILE, None, "is not a saved model's config (no 'config' object)")
    tensors = read_tensors(path / WEIGHTS_FILE)
    for key, tensor in tensors.items():  # else scores are NaN, blamed on the learning rate
        if tensor.is_floating_point() and not bool(torch.isfinite(tensor).all()):
            bad = int((~torch.isfinite(tensor)).sum())
            raise FormatError(
                path / WEIGHTS_FILE,
                None,
                f"weight {key!r} holds {bad} NaN or infinite value(s): the model was saved diverged; "
                "train it again",
            )
    return config, tensors


# -------------------------------------------------------------------------------------- the base


class InteractionModel(SavedModule, nn.Module, ABC):
    """Base of the term-interaction models: shared-space term vectors in, one score per pair out.

    Subclasses implement :meth:`score_pair` and list their constructor keyword arguments in
    ``config_keys`` (stored as attributes of the same name).

    Args:
        embedding_dim: Dimension of the shared space.
        embeddings: Optional frozen matrix (V, embedding_dim), row 0 = padding. Without it the
            model scores :class:`EncodedPair` objects built by an owner of the table.
        seed: Seed of the weight initialisation.

    Raises:
        ConfigError: If ``embedding_dim`` is not positive or does not match ``embeddings``.
    """

    name: ClassVar[str] = ""
    config_keys: ClassVar[tuple[str, ...]] = ()
    needs_vectors: ClassVar[bool] = False
    """Whether :meth:`score_pair` reads raw vectors (a second lookup)."""
    needs_exact: bool = True
    """Whether :meth:`score_pair` reads the exact-match matrix."""

    def __init__(self, embedding_dim: int, embeddings: Tensor | None = None, seed: int = 0) -> None:
        super().__init__()
        check_positive("embedding_dim", embedding_dim)
        if not isinstance(seed, int):
            raise ConfigError(f"seed must be an int, got {seed!r}")
        self.embedding_dim = embedding_dim
        self.seed = seed
        self.embedding: FrozenEmbedding | None = None
        if embeddings is not None:
            self.embedding = FrozenEmbedding(embeddings)
            if self.embedding.dim != embedding_dim:
                raise ConfigError(
                    f"embeddings have dimension {self.embedding.dim} but embedding_dim={embedding_dim}"
                )

    @abstractmethod
    def score_pair(self, pair: EncodedPair) -> Tensor:
        """Score encoded pairs.

        Args:
            pair: Query/document tensors and their similarity matrix.

        Returns:
            Float tensor (B,).
        """

    def encode(self, batch: PairBatch) -> EncodedPair:
        """Look a :class:`PairBatch` up in the model's own table.

        Raises:
            ConfigError: If the model holds no embedding matrix.
        """
        if self.embedding is None:
            raise ConfigError(
                f"{type(self).__name__} holds no embedding matrix: pass embeddings= when building or "
                "loading it, or score EncodedPair objects with score_pair()"
            )
        if not isinstance(batch, PairBatch):
            raise ConfigError(f"expected a PairBatch, got {type(batch).__name__}")
        q = EncodedView.encode(self.embedding, batch.q_tokens, batch.q_surface, self.needs_vectors)
        d = EncodedView.encode(self.embedding, batch.d_tokens, batch.d_surface, self.needs_vectors)
        return EncodedPair.build(q, d, batch.q_idf, exact=self.needs_exact)

    def forward(self, batch: PairBatch) -> Tensor:
        """Score a batch of pairs: float tensor (B,)."""
        return self.score_pair(self.encode(batch))

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-serialisable) that rebuild this model, without the matrix."""
        config = {"embedding_dim": self.embedding_dim, "seed": self.seed}
        config.update({key: getattr(self, key) for key in self.config_keys})
        return config

    @classmethod
    def load(
        cls, path: str | Path, embeddings: Tensor | None = None, device: torch.device | str | None = None
    ) -> InteractionModel:
        """Rebuild a saved model from its config, then load its weights.

        Called on the base class, dispatches on the saved ``"type"``.

        Args:
            path: Directory written by :meth:`save`.
            embeddings: Frozen matrix to use instead of (or in the absence of) a saved one.
            device: Where to put the model (default CPU).

        Raises:
            DataNotFoundError: If ``path`` is not a saved model.
            ConfigError: If the saved type is unknown or not a ``cls``.
            FormatError: Naming the file, if the weights do not fit the config.
        """
        config, tensors = read_model_dir(path)
        model_cls = get_interaction_model(config.get("type"))
        if not issubclass(model_cls, cls):
            raise ConfigError(f"{path} holds a {config.get('type')!r} model, not a {cls.__name__}")
        return restore(model_cls, path, config, tensors, embeddings, device)

    def extra_repr(self) -> str:
        return ", ".join(f"{k}={v!r}" for k, v in self.get_config().items())

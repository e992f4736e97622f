"""Trained rerankers as objects, ensembles of them, and reranking a first-stage run.

An ensemble scores every candidate with each member, normalises each member's scores per query
over the candidate list (z-score by default, :func:`~clir.training.data.normalise_scores`), and
averages them (Zhang et al. 2019 report that ensembles help clearly). Documents below the
reranking depth keep their first-stage order beneath the reranked ones.

On disk an ensemble is a directory with ``ensemble.json`` (``type``, ``clir_version``,
``members``: checkpoint directories relative to it) and the member checkpoints; a single
checkpoint directory is an ensemble of one.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import RunArrays, atomic_write
from clir.rerankers.bilingual import BilingualReranker
from clir.training.checkpoint import checkpoint_problem, is_checkpoint, model_dir, read_config, read_state
from clir.training.config import TrainConfig
from clir.training.data import CandidateIndex, RerankData, Tensorizer, Vocabulary, normalise_scores
from clir.training.scoring import (
    PairScorer,
    ScoringOptions,
    score_candidates,
    score_pairs,
    scores_to_arrays,
    set_embeddings,
)
from clir.types import Run

ENSEMBLE_FILE = "ensemble.json"
ENSEMBLE_TYPE = "reranker_ensemble"


@dataclass
class TrainedReranker:
    """A trained reranker with what is needed to apply it.

    Attributes:
        model: The :class:`~clir.rerankers.bilingual.BilingualReranker` (best epoch).
        config: The training config it was trained with (max lengths, depth, features on/off).
        feature_names: The extra features it reads, in order (empty when features are off).
        path: Its checkpoint directory, when loaded from one.
    """

    model: nn.Module
    config: TrainConfig
    feature_names: list[str]
    path: Path | None = None

    @classmethod
    def load(cls, path: str | Path, device: torch.device | str | None = None) -> TrainedReranker:
        """Load a checkpoint's best model (without an embedding matrix: :func:`rerank` sets one).

        Raises:
            DataNotFoundError: If ``path`` is not a checkpoint.
            FormatError: If its files do not match its manifest (a damaged checkpoint).
        """
        path = Path(path)
        state = read_state(path)
        if (problem := checkpoint_problem(path)) is not None:
            raise FormatError(path, None, f"damaged checkpoint: {problem}; train it again")
        config = read_config(path)
        model = BilingualReranker.load(model_dir(path), device=device)
        names = list(state.info.get("feature_names", [])) if config.model.features else []
        return cls(model, config, names, path)


def ensemble_meta(path: str | Path) -> dict[str, Any]:
    """The ``ensemble.json`` of an ensemble directory (``members``, ``seeds``, and ``folds`` when
    it was cross-validated); ``{}`` for any other directory."""
    path = Path(path)
    if not (path / ENSEMBLE_FILE).is_file():
        return {}
    return json.loads((path / ENSEMBLE_FILE).read_text(encoding="utf-8"))


def member_paths(path: str | Path) -> list[Path]:
    """The checkpoint directories of an ensemble directory, or a checkpoint directory itself.

    Raises:
        DataNotFoundError: If ``path`` is neither.
    """
    path = Path(path)
    if meta := ensemble_meta(path):
        return [path / member for member in meta["members"]]
    if is_checkpoint(path):
        return [path]
    raise DataNotFoundError(f"{path} holds neither {ENSEMBLE_FILE} nor a reranker checkpoint")


def load_models(path: str | Path, device: torch.device | str | None = None) -> list[TrainedReranker]:
    """The members of an ensemble directory, or the one model of a checkpoint directory.

    Raises:
        DataNotFoundError: If ``path`` is neither.
    """
    return [TrainedReranker.load(member, device) for member in member_paths(path)]


def write_ensemble(
    path: str | Path, members: Sequence[str | Path], meta: dict[str, Any] | None = None
) -> Path:
    """Write ``ensemble.json`` listing member checkpoints (stored relative to ``path``)."""
    path = Path(path)
    relative = [str(Path(m).resolve().relative_to(path.resolve())) for m in members]
    info = {"type": ENSEMBLE_TYPE, "clir_version": __version__, "members": relative, **(meta or {})}
    with atomic_write(path / ENSEMBLE_FILE) as handle:
        json.dump(info, handle, indent=1)
        handle.write("\n")
    return path


def _prepare(member: TrainedReranker, data: RerankData) -> RerankData:
    """The data as the member reads it: its features, in its order, or none."""
    if not member.config.model.features:
        return data.without_features()
    if data.feature_names != member.feature_names:
        raise ConfigError(
            f"model {member.path or ''} was trained on features {member.feature_names} but the data has "
            f"{data.feature_names}; build the data with the same feature runs"
        )
    return data


def member_scores(
    members: Sequence[TrainedReranker],
    data: RerankData,
    *,
    space: Any,
    depth: int | None = None,
    options: ScoringOptions | None = None,
    progress: bool = False,
    timings: dict[str, float] | None = None,
    scorer: PairScorer = score_pairs,
    cache: str | Path | None = None,
) -> list[list[np.ndarray]]:
    """Each member's raw score of each query's first ``depth`` candidates.

    The vocabulary (of the tokens the members read) and frozen matrix are built for ``data``
    (from ``space``) and lent to each
    member in turn, so a model trained on one language pair scores another (zero-shot). Members
    with the same lengths and features share one :class:`~clir.training.data.Tensorizer` (and
    its tables on the device); each member's scores stay on the device until it is done.

    Args:
        members: Trained rerankers.
        data: Queries with candidates.
        space: The shared space.
        depth: Candidates reranked per query (default: each member's ``data.max_candidates``).
        options: Device, batch size, precision, compilation (default: each member's configured
            device, the rest chosen for it; see :class:`~clir.training.scoring.ScoringOptions`).
        progress: Show progress bars.
        timings: When given, seconds are added under ``"tensorize"``, ``"transfer"`` (with
            making the frozen matrix on each device) and ``"score"`` (see
            :func:`~clir.training.scoring.score_pairs`).
        scorer: Scores the pairs (default :func:`~clir.training.scoring.score_pairs`; the
            pipeline's engines pass one that spreads them over workers).
        cache: Keep the documents' id tables here and reuse them while the documents are the
            same (see :class:`~clir.training.data.Tensorizer`); ``None``: build them anew.

    Returns:
        ``scores[member][query]``: float64 arrays.
    """
    return _score_members(
        members,
        data,
        space=space,
        depth=depth,
        options=options,
        progress=progress,
        timings=timings,
        scorer=scorer,
        cache=cache,
    )[0]


def _score_members(
    members: Sequence[TrainedReranker],
    data: RerankData,
    *,
    space: Any,
    depth: int | None,
    options: ScoringOptions | None,
    progress: bool,
    timings: dict[str, float] | None,
    scorer: PairScorer,
    cache: str | Path | None,
) -> tuple[list[list[np.ndarray]], CandidateIndex]:
    """:func:`member_scores`, and the candidates as the tensorizers numbered them."""
    if not members:
        raise ConfigError("no models to rerank with")
    options = options or ScoringOptions()
    clock = time.perf_counter()
    vocab = Vocabulary()  # the tokens the tensorizers keep, added as they lay out their tables
    tensorizers: dict[tuple, Tensorizer] = {}
    keys, settled_options = [], []
    for member in members:
        settled_options.append(options.resolve(member.config.device))
        prepared = _prepare(member, data)
        key = (
            member.config.data.max_query_len,
            member.config.data.max_doc_len,
            tuple(prepared.feature_names),
        )
        if key not in tensorizers:
            tensorizers[key] = Tensorizer(vocab, prepared, key[0], key[1], extend_vocab=True, cache=cache)
        keys.append(key)
    if timings is not None:
        timings["tensorize"] = timings.get("tensorize", 0.0) + time.perf_counter() - clock
    out = []
    on_device: dict[str, torch.Tensor] = {}  # the matrix, copied once per device
    for member, key, settled in zip(members, keys, settled_options, strict=True):
        clock = time.perf_counter()
        if settled.device not in on_device:  # the matrix less its padding row, made there
            rows = vocab.device_rows(space, settled.device)
            on_device[settled.device] = torch.nn.functional.pad(rows, (0, 0, 1, 0))
        model = member.model
        lent_back = getattr(model, "embedding", None)
        set_embeddings(model, None)  # the lent-back matrix stays where it is
        model.to(settled.device)
        set_embeddings(model, on_device[settled.device])
        if timings is not None:
            timings["transfer"] = timings.get("transfer", 0.0) + time.perf_counter() - clock
        try:
            out.append(
                score_candidates(
                    model,
                    tensorizers[key],
                    depth or member.config.data.max_candidates,
                    settled,
                    progress=progress,
                    timings=timings,
                    scorer=scorer,
                )
            )
        finally:
            model.embedding = lent_back
    return out, next(iter(tensorizers.values())).candidate_index


def combine(scores: Sequence[Sequence[np.ndarray]], method: str = "zscore") -> list[np.ndarray]:
    """Average members' scores per query after normalising each over the query's candidates.

    Queries with as many candidates are normalised and averaged together, as the rows of one
    table (the same numbers as one query at a time: numpy reduces each row as it reduces one
    array; the first row of each table is checked against the one-query computation, and the
    table is computed query by query if they differ).

    Args:
        scores: ``scores[member][query]`` (every member scores the same candidates).
        method: ``"zscore"`` or ``"minmax"`` (see :func:`~clir.training.data.normalise_scores`).

    Returns:
        One array per query.

    Raises:
        ConfigError: If members scored different numbers of candidates.
        NonFiniteError: If a score is NaN or infinite.
    """
    if not scores:
        raise ConfigError("no member scores to combine")
    counts = [len(row) for row in scores[0]]
    for qi in range(len(counts)):
        rows = [member[qi] for member in scores]
        if len({len(r) for r in rows}) != 1:
            raise ConfigError(f"query {qi}: members scored {[len(r) for r in rows]} candidates")
    out: list[np.ndarray | None] = [None] * len(counts)
    alike: dict[int, list[int]] = {}
    for qi, n in enumerate(counts):
        alike.setdefault(n, []).append(qi)
    for n, queries in alike.items():
        if n and len(queries) > 1:
            table = [
                np.stack([np.asarray(member[qi], dtype=np.float64) for qi in queries]) for member in scores
            ]
            if all(np.isfinite(t).all() for t in table):
                mean = np.mean([_normalise_rows(t, method) for t in table], axis=0)
                if np.array_equal(
                    mean[0].view(np.int64), _combine_one(scores, queries[0], method).view(np.int64)
                ):
                    for qi, row in zip(queries, mean, strict=True):
                        out[qi] = row
                    continue
        for qi in queries:  # one at a time (and any error raised as it names its query)
            out[qi] = _combine_one(scores, qi, method)
    return out  # type: ignore[return-value]


def _combine_one(scores: Sequence[Sequence[np.ndarray]], qi: int, method: str) -> np.ndarray:
    """:func:`combine` of query ``qi`` alone."""
    rows = [np.asarray(member[qi], dtype=np.float64) for member in scores]
    return np.mean([normalise_scores(r, method) for r in rows], axis=0)


def _normalise_rows(table: np.ndarray, method: str) -> np.ndarray:
    """:func:`~clir.training.data.normalise_scores` of each row of a finite 2-D ``table``."""
    if method == "zscore":
        std = table.std(axis=1, keepdims=True)
        return np.divide(
            table - table.mean(axis=1, keepdims=True), std, out=np.zeros_like(table), where=std > 1e-12
        )
    if method == "minmax":
        low = table.min(axis=1, keepdims=True)
        span = table.max(axis=1, keepdims=True) - low
        return np.divide(table - low, span, out=np.zeros_like(table), where=span > 1e-12)
    raise ConfigError(f"unknown normalisation {method!r}; expected one of ['minmax', 'zscore']")


def rerank(
    models: Sequence[TrainedReranker] | str | Path,
    data: RerankData,
    *,
    space: Any,
    run: Run | None = None,
    depth: int | None = None,
    normalise: str = "zscore",
    options: ScoringOptions | None = None,
    progress: bool = False,
    timings: dict[str, float] | None = None,
    scorer: PairScorer = score_pairs,
    cache: str | Path | None = None,
) -> Run:
    """Rerank each query's candidates with one model or the mean of an ensemble.

    Args:
        models: Trained rerankers, or a checkpoint / ensemble directory.
        data: Queries with candidates (built like the training data, same features).
        space: The shared space.
        run: The full first-stage run, kept beneath the reranked candidates.
        depth: Candidates reranked (default: the first member's ``data.max_candidates``); the
            rest keep their first-stage order beneath.
        normalise: Per-query normalisation before averaging (``"zscore"`` or ``"minmax"``).
        options: Device (default: the members' configured one), batch size, precision and
            compilation of the scoring (:class:`~clir.training.scoring.ScoringOptions`).
        progress: Show progress bars.
        timings: When given, seconds are added per phase (see :func:`member_scores`), and under
            ``"write"`` those of normalising and ranking.
        scorer: Scores the pairs (see :func:`member_scores`).
        cache: Keep the documents' id tables here (see :func:`member_scores`).

    Returns:
        The reranked run (:func:`rerank_arrays` gives it as arrays, for writing).
    """
    return rerank_arrays(
        models,
        data,
        space=space,
        run=run,
        depth=depth,
        normalise=normalise,
        options=options,
        progress=progress,
        timings=timings,
        scorer=scorer,
        cache=cache,
    ).to_run()


def rerank_arrays(
    models: Sequence[TrainedReranker] | str | Path,
    data: RerankData,
    *,
    space: Any,
    run: Run | None = None,
    depth: int | None = None,
    normalise: str = "zscore",
    options: ScoringOptions | None = None,
    progress: bool = False,
    timings: dict[str, float] | None = None,
    scorer: PairScorer = score_pairs,
    cache: str | Path | None = None,
) -> RunArrays:
    """:func:`rerank`, the run as :class:`~clir.formats.runs.RunArrays` (what ``clir rerank``
    writes: :func:`~clir.formats.runs.write_run` takes it as it is)."""
    if isinstance(models, (str, Path)):
        models = load_models(models)
    if depth is None:
        depth = models[0].config.data.max_candidates
    scores, candidates = _score_members(
        models,
        data,
        space=space,
        depth=depth,
        options=options,
        progress=progress,
        timings=timings,
        scorer=scorer,
        cache=cache,
    )
    start = time.perf_counter()
    reranked = scores_to_arrays(data, combine(scores, normalise), run, candidates)
    if timings is not None:
        timings["write"] = timings.get("write", 0.0) + time.perf_counter() - start
    return reranked

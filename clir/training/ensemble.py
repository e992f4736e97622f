"""Trained rerankers as objects, ensembles of them, and reranking a first-stage run.

An ensemble scores every candidate with each member, normalises each member's scores per query
over the candidate list (z-score by default, :func:`~clir.training.data.normalise_scores`), and
averages them (Zhang et al. 2019 report that ensembles help clearly). Documents below the
reranking depth keep their first-stage order beneath the reranked ones.

On disk an ensemble is a directory with ``ensemble.json`` (``type``, ``clir_version``,
``members``: checkpoint directories relative to it, ``models``: the SHA-256 of each member's
``model/model.safetensors``) and the member checkpoints; a single checkpoint directory is an
ensemble of one. ``ensemble.json`` is written once every member is trained: a member whose model
is not the one it lists (a training into the directory started again and did not finish) is
refused, not averaged with the others. So is an ensemble whose members were trained on other
candidates or features (:data:`DATA_SETTINGS`, :func:`check_same_data`): reranking builds one set
of candidates and features for all of them.
"""

from __future__ import annotations

import json
import time
import warnings
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import RunArrays, atomic_write
from clir.formats.jsonfile import read_json_file
from clir.rerankers.base import WEIGHTS_FILE
from clir.rerankers.bilingual import BilingualReranker
from clir.training.checkpoint import (
    MODEL_DIR,
    SCORING_FILES,
    checkpoint_problem,
    is_checkpoint,
    model_dir,
    model_sha256,
    read_config,
    read_state,
)
from clir.training.config import TrainConfig
from clir.training.data import (
    LARGE_SCORE,
    PairIndex,
    RerankData,
    Tensorizer,
    Vocabulary,
    normalise_scores,
)
from clir.training.pooled import PooledCache
from clir.training.scoring import (
    PairScorer,
    ScoringOptions,
    batch_widths,
    score_pairs,
    scores_to_arrays,
    set_embeddings,
    settle_options,
    split_scores,
    to_host,
)
from clir.types import Run

ENSEMBLE_FILE = "ensemble.json"
ENSEMBLE_TYPE = "reranker_ensemble"
_UNFINISHED_TOLD: set[Path] = set()  # checkpoints of unfinished trainings warned of


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
            FormatError: If its files do not match its manifest, or it omits one that scoring
                reads (a damaged checkpoint).
        """
        path = Path(path)
        if is_checkpoint(path) and (problem := checkpoint_problem(path, SCORING_FILES)) is not None:
            raise FormatError(path, None, f"damaged checkpoint: {problem}; train it again")
        state = read_state(path, curve=False)
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
    meta = read_json_file(path / ENSEMBLE_FILE)
    members = meta.get("members") if isinstance(meta, dict) else None
    if not (isinstance(members, list) and members and all(isinstance(m, str) for m in members)):
        expected = "has no 'members': a non-empty list of member directories"
        raise FormatError(path / ENSEMBLE_FILE, None, expected)
    if any(Path(m).is_absolute() or ".." in Path(m).parts for m in members):
        raise FormatError(path / ENSEMBLE_FILE, None, "names a member outside its directory")
    models = meta.get("models", {})  # absent: written by a clir before it was recorded
    if not (
        isinstance(models, dict) and set(models) <= set(members) and all(map(_is_digest, models.values()))
    ):
        raise FormatError(path / ENSEMBLE_FILE, None, "has a 'models' that is no {member: SHA-256} object")
    return meta


def _is_digest(value: Any) -> bool:
    return isinstance(value, str) and len(value) == 64


def _model_digest(member: Path) -> str | None:
    """The SHA-256 of a member's best model (``None``: it has none, which loading it names)."""
    try:
        return model_sha256(member)
    except OSError:
        return None


def member_paths(path: str | Path) -> list[Path]:
    """The checkpoint directories of an ensemble directory, or a checkpoint directory itself.

    Raises:
        DataNotFoundError: If ``path`` is neither.
        FormatError: If a member's model is not the one ``ensemble.json`` lists (named a damaged
            checkpoint when its files do not match its own manifest either).

    Warns:
        UserWarning: For a checkpoint directory of a training that did not finish (killed, or
            still running): its model is the best of the epochs run so far.
    """
    path = Path(path)
    if meta := ensemble_meta(path):
        for member, digest in meta.get("models", {}).items():
            if (found := _model_digest(path / member)) is not None and found != digest:
                if (problem := checkpoint_problem(path / member, SCORING_FILES)) is not None:
                    # a file cut or changed since it was saved, not a training that began again
                    raise FormatError(path / member, None, f"damaged checkpoint: {problem}; train it again")
                raise FormatError(
                    path / ENSEMBLE_FILE,
                    None,
                    f"member {member} is not the model it lists (its {MODEL_DIR}/{WEIGHTS_FILE} has "
                    f"changed): a training into {path} started again and did not finish; finish it "
                    "(clir train --resume with its config) or train it again",
                )
        return [path / member for member in meta["members"]]
    if is_checkpoint(path):
        try:
            state = read_state(path, curve=False)
        except (DataNotFoundError, FormatError):  # named by whatever reads the checkpoint
            return [path]
        if not state.finished and path.resolve() not in _UNFINISHED_TOLD:
            # a killed training's member: it had been scored as a trained model, silently
            _UNFINISHED_TOLD.add(path.resolve())  # once a process, however many readers look
            warnings.warn(
                f"{path}: the checkpoint of a training that did not finish (stopped after epoch "
                f"{state.epoch}): its model is the best of those epochs only; finish it with "
                "'clir train --resume' (the same config and --out)",
                stacklevel=2,
            )
        return [path]
    raise DataNotFoundError(f"{path} holds neither {ENSEMBLE_FILE} nor a reranker checkpoint")


def load_models(path: str | Path, device: torch.device | str | None = None) -> list[TrainedReranker]:
    """The members of an ensemble directory, or the one model of a checkpoint directory.

    Raises:
        DataNotFoundError: If ``path`` is neither.
        FormatError: If a member is damaged or not the model ``ensemble.json`` lists, or the
            members were trained with other data settings (:func:`check_same_data`).
    """
    members = [TrainedReranker.load(member, device) for member in member_paths(path)]
    check_same_data(members, Path(path))
    return members


DATA_SETTINGS: tuple[str, ...] = ("first_stage", "depth", "feature_norm", "qt_k", "spelling")
"""The ``data`` keys of a training config that decide which candidates a model reranks and what
its inputs hold: its first stages and their depth (the candidates), the normalisation of the
feature columns, the translations per query word and spelling matching (the translated query).
The lengths kept (``max_query_len``, ``max_doc_len``) are each member's own when it scores, and
``negatives_per_positive`` is training's alone."""


def _data_setting(config: TrainConfig, key: str) -> Any:
    """A :data:`DATA_SETTINGS` value of ``config``, one first stage given as a list or a name alike."""
    if key == "first_stage":
        stages = config.data.first_stages
        return stages[0] if len(stages) == 1 else stages
    return getattr(config.data, key)


def check_same_data(members: Sequence[TrainedReranker], path: str | Path) -> None:
    """Refuse the members of the ensemble directory ``path`` when their training configs differ
    in a :data:`DATA_SETTINGS` key: reranking (``clir rerank``, a bundle, the PyTerrier stage)
    builds the candidates and features of the first member's settings for all of them, so the
    others would score candidates and features unlike those they learnt from, and the average
    would be silently wrong.

    Raises:
        FormatError: Naming ``ensemble.json``, each differing key and every member's value.
    """
    if len(members) < 2:
        return
    path = Path(path)

    def name(member: TrainedReranker) -> str:
        if member.path is None:
            return "?"
        try:
            return member.path.relative_to(path).as_posix()
        except ValueError:
            return str(member.path)

    differ = []
    for key in DATA_SETTINGS:
        values = [_data_setting(member.config, key) for member in members]
        if any(value != values[0] for value in values[1:]):
            shown = ", ".join(f"{name(m)} {json.dumps(v)}" for m, v in zip(members, values, strict=True))
            differ.append(f"data.{key} ({shown})")
    if differ:
        raise FormatError(
            path / ENSEMBLE_FILE,
            None,
            f"its members {', '.join(map(name, members))} were trained with different data settings, "
            f"which decide the candidates and features a model reads: {'; '.join(differ)}. An ensemble "
            "reranks one set of candidates and features with all its members, so their average would be "
            "wrong; train the members with the same data settings, or rerank with one member's directory",
        )


def write_ensemble(
    path: str | Path, members: Sequence[str | Path], meta: dict[str, Any] | None = None
) -> Path:
    """Write ``ensemble.json`` listing member checkpoints (stored relative to ``path``) and the
    SHA-256 of each one's model."""
    path = Path(path)
    relative = [str(Path(m).resolve().relative_to(path.resolve())) for m in members]
    models = {member: _model_digest(path / member) for member in relative}
    info = {
        "type": ENSEMBLE_TYPE,
        "clir_version": __version__,
        "members": relative,
        "models": {member: digest for member, digest in models.items() if digest is not None},
        **(meta or {}),
    }
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
    scoring = _Scoring(members, data, space, depth, options, progress, timings, scorer, cache)
    return [split_scores(scoring.launch(m, None)(), scoring.counts[m]) for m in range(len(members))]


def check_depth(depth: int | None) -> None:
    """Raise :class:`ConfigError` unless ``depth`` (candidates reranked per query) is ``None``
    (the default) or a positive integer: 0 meant the default and a negative one cut the last
    candidates off, silently."""
    wrong = isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or depth < 1
    if depth is not None and wrong:
        raise ConfigError(f"depth must be a positive integer, got {depth!r}")


class _Scoring:
    """The members of a rerank, ready to score any of its queries: one vocabulary, the
    tensorizers (shared by members of the same lengths and features), each member's options,
    the frozen matrix made once per device and lent to a member while it scores."""

    def __init__(
        self,
        members: Sequence[TrainedReranker],
        data: RerankData,
        space: Any,
        depth: int | None,
        options: ScoringOptions | None,
        progress: bool,
        timings: dict[str, float] | None,
        scorer: PairScorer,
        cache: str | Path | None,
    ) -> None:
        if not members:
            raise ConfigError("no models to rerank with")
        check_depth(depth)
        options = options or ScoringOptions()
        clock = time.perf_counter()
        self.vocab = Vocabulary()  # the tokens the tensorizers keep, added as they lay out their tables
        shared: dict[tuple, Tensorizer] = {}
        self.tensorizers: list[Tensorizer] = []
        self.options: list[ScoringOptions] = []
        for member in members:
            self.options.append(options.resolve(member.config.device))
            prepared = _prepare(member, data)
            key = (
                member.config.data.max_query_len,
                member.config.data.max_doc_len,
                tuple(prepared.feature_names),
            )
            if key not in shared:
                shared[key] = Tensorizer(self.vocab, prepared, key[0], key[1], extend_vocab=True, cache=cache)
            self.tensorizers.append(shared[key])
        if timings is not None:
            timings["tensorize"] = timings.get("tensorize", 0.0) + time.perf_counter() - clock
        self.members, self.space, self.scorer = members, space, scorer
        self.progress, self.timings = progress, timings
        laid_out: dict[tuple[int, int], tuple[list[int], PairIndex]] = {}  # per tensorizer and depth
        self.counts: list[list[int]] = []
        self.pairs: list[PairIndex] = []
        for tensorizer, member in zip(self.tensorizers, members, strict=True):
            d = depth or member.config.data.max_candidates
            if (id(tensorizer), d) not in laid_out:
                laid_out[id(tensorizer), d] = (tensorizer.counts(d), tensorizer.candidates(d))
            self.counts.append(laid_out[id(tensorizer), d][0])
            self.pairs.append(laid_out[id(tensorizer), d][1])
        self.candidates = self.tensorizers[0].candidate_index
        in_process = scorer is score_pairs  # a cache is not lent to workers of other processes
        self.caches = _shared_pooling(members, self.tensorizers, self.options) if in_process else {}
        self.settled: list[ScoringOptions | None] = [None] * len(members)  # at the first scoring
        self.on_device: dict[str, torch.Tensor] = {}  # the matrix, made once per device
        self.widths: dict[tuple[int, int], np.ndarray] = {}  # per pairs and batch size, on CUDA

    def launch(self, m: int, queries: np.ndarray | None) -> Callable[[], np.ndarray]:
        """Start scoring member ``m``'s pairs of ``queries`` (positions in the data; ``None``:
        all, in order, waited for here); the returned function waits for the scores, float32
        query by query."""
        options, device = self.options[m], str(self.options[m].device)
        clock = time.perf_counter()
        if device not in self.on_device:  # the matrix less its padding row, made there
            rows = self.vocab.device_rows(self.space, device)
            self.on_device[device] = torch.nn.functional.pad(rows, (0, 0, 1, 0))
        model = self.members[m].model
        lent_back = getattr(model, "embedding", None)
        set_embeddings(model, None)  # the lent-back matrix stays where it is
        model.to(device)
        set_embeddings(model, self.on_device[device])
        if self.timings is not None:
            self.timings["transfer"] = self.timings.get("transfer", 0.0) + time.perf_counter() - clock
        try:
            tensorizer, pairs = self.tensorizers[m], self.pairs[m]
            settled = self.settled[m]
            if settled is None:  # decided once, on all pairs (as one scoring of them would)
                settled = self.settled[m] = settle_options(model, tensorizer, pairs, self.counts[m], options)
            if queries is not None:
                positions = _pair_positions(self.counts[m], queries)
                if device == "cuda":  # each pair at its width among all the pairs
                    key = (id(pairs), int(settled.batch_size or 0))
                    if key not in self.widths:
                        self.widths[key] = batch_widths(tensorizer, pairs, key[1])
                    pairs = replace(pairs, width=self.widths[key])
                pairs = pairs.take(positions)
            extra = {"cache": self.caches[m]} if m in self.caches else {}
            flat = self.scorer(model, tensorizer, pairs, settled, self.progress, self.timings, **extra)
            if queries is not None:
                return to_host(flat)
            host = flat.cpu().numpy()  # all of them: nothing to overlap
            return lambda: host
        finally:
            model.embedding = lent_back


def _shared_pooling(
    members: Sequence[TrainedReranker], tensorizers: Sequence[Tensorizer], options: Sequence[ScoringOptions]
) -> dict[int, PooledCache]:
    """One :class:`~clir.training.pooled.PooledCache` for each set of two or more members that
    pool alike on the CPU (the same tensorizer and model configuration, ungated K-NRM groups):
    each pair is pooled once for all of them (a model and the one fine-tuned from it, the
    members of an ensemble). On CUDA every member is scored as before (compiled, the fused
    kernel), where pooling costs little."""
    alike: dict[tuple[int, str], list[int]] = {}
    for m, (member, tensorizer, option) in enumerate(zip(members, tensorizers, options, strict=True)):
        model = member.model
        if torch.device(option.device or "cpu").type == "cpu" and getattr(model, "pooled_groups", None):
            pooling = json.dumps([type(model).__name__, member.config.model.to_dict()], sort_keys=True)
            alike.setdefault((id(tensorizer), pooling), []).append(m)
    caches: dict[int, PooledCache] = {}
    for group in alike.values():
        if len(group) > 1:
            cache = PooledCache(members[group[0]].model, tensorizers[group[0]])
            caches.update(dict.fromkeys(group, cache))
    return caches


def _pair_positions(counts: Sequence[int], queries: np.ndarray) -> np.ndarray:
    """The positions of the pairs of ``queries`` among all queries' pairs (``counts`` each,
    query by query), query after query."""
    counts_of = np.asarray(counts, dtype=np.int64)
    first = np.cumsum(counts_of) - counts_of
    taken = counts_of[queries]
    starts = np.repeat(first[queries] - (np.cumsum(taken) - taken), taken)
    return starts + np.arange(int(taken.sum()), dtype=np.int64)


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
    peak = np.abs(table).max(axis=1, keepdims=True)
    if (peak > LARGE_SCORE).any():  # as normalise_scores scales them
        table = np.where(peak > LARGE_SCORE, table / peak, table)
    if method == "zscore":  # constant rows are 0, as normalise_scores has them (their std can be 1e-11)
        std = table.std(axis=1, keepdims=True)
        varies = (std > 1e-12) & (table.max(axis=1, keepdims=True) > table.min(axis=1, keepdims=True))
        return np.divide(
            table - table.mean(axis=1, keepdims=True), std, out=np.zeros_like(table), where=varies
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
    writes: :func:`~clir.formats.runs.write_run` takes it as it is), its queries in the data's order."""
    parts = rerank_parts(
        models, data, space=space, run=run, depth=depth, normalise=normalise, options=options,
        progress=progress, timings=timings, scorer=scorer, cache=cache, chunk_pairs=0,
    )  # fmt: skip
    return next(parts)


CHUNK_PAIRS = 125_000
"""Pairs of a chunk of :func:`rerank_parts` on CUDA, the default there (at least this many a
part, but for a query's: each part large enough for the run writer's workers,
:data:`clir.formats._runtext.WORKER_MIN_LINES`). On H100s, six rounds of 500k pairs in three
calls, it was faster than one part in 22 of 24 comparisons, the run file the same (README,
"Scoring at speed")."""


def rerank_parts(
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
    chunk_pairs: int | None = None,
) -> Iterator[RunArrays]:
    """:func:`rerank_arrays`'s run in parts, in the order of the run file, for
    :func:`~clir.formats.runs.write_run` to write as they come (what ``clir rerank`` does).

    With ``chunk_pairs`` and at least twice as many pairs, the queries are taken in qid order
    (the file's) and scored in chunks of about ``chunk_pairs`` pairs, and on CUDA the next chunk
    is queued on the device before a part is handed on (its scores copied back into pinned
    memory): the GPU scores while the caller ranks and writes. On CUDA each pair of a chunk is
    scored at the width it has among all pairs (:func:`~clir.training.scoring.batch_widths`), in
    batches of the same size, so its score does not depend on its chunk (rows are scored
    independently) and the file is the one :func:`rerank_arrays`'s run gives; on a CPU, whose
    batches are padded to their own longest pair, that holds for batches of one pair. Otherwise
    one part, as :func:`rerank_arrays`. Nothing is done until the first part is asked for.

    Args:
        models: As :func:`rerank`, and so ``data`` to ``cache``.
        chunk_pairs: Pairs of a chunk; 0: one part; ``None`` (the default): :data:`CHUNK_PAIRS`
            when every member scores on CUDA, else one part.

    Yields:
        :class:`~clir.formats.runs.RunArrays`, each query once, in the file's order when
        there are several.

    Raises:
        ConfigError: On ``chunk_pairs`` below 0 or ``depth`` below 1 (at once), and as :func:`rerank`.
    """
    if chunk_pairs is not None and (
        isinstance(chunk_pairs, bool) or not isinstance(chunk_pairs, int) or chunk_pairs < 0
    ):
        raise ConfigError(f"chunk_pairs must be an integer >= 0, got {chunk_pairs!r}")

    check_depth(depth)

    def parts() -> Iterator[RunArrays]:
        members = load_models(models) if isinstance(models, (str, Path)) else models
        scoring = _Scoring(
            members, data, space, depth or members[0].config.data.max_candidates, options, progress,
            timings, scorer, cache,
        )  # fmt: skip
        chunk = default_chunk_pairs(scoring.options) if chunk_pairs is None else chunk_pairs
        launched: deque[tuple[np.ndarray | None, list[Callable[[], np.ndarray]]]] = deque()
        for queries in _chunks(data, scoring.counts[0], chunk):  # the next queued before a part
            launched.append((queries, [scoring.launch(m, queries) for m in range(len(members))]))
            if len(launched) > 1:
                yield _part(scoring, data, run, normalise, *launched.popleft())
        while launched:
            yield _part(scoring, data, run, normalise, *launched.popleft())

    return parts()


def default_chunk_pairs(options: Sequence[ScoringOptions]) -> int:
    """:func:`rerank_parts`'s chunks for members scoring with ``options`` (resolved):
    :data:`CHUNK_PAIRS` when every one scores on CUDA, else 0 (one part)."""
    return CHUNK_PAIRS if all(str(o.device) == "cuda" for o in options) else 0


def _chunks(data: RerankData, counts: Sequence[int], chunk_pairs: int) -> list[np.ndarray | None]:
    """The queries in chunks of about ``chunk_pairs`` pairs (``counts`` each), in qid order:
    ``total // chunk_pairs`` chunks, or ``[None]`` (all, in the data's order) for fewer than 2."""
    total = int(sum(counts))
    n = total // chunk_pairs if chunk_pairs else 0
    if n < 2:
        return [None]
    order = np.asarray(sorted(range(len(data.queries)), key=lambda qi: data.queries[qi].qid), dtype=np.int64)
    ends = np.cumsum(np.asarray(counts, dtype=np.int64)[order])
    cuts = np.unique(np.searchsorted(ends, total * np.arange(1, n) / n) + 1)
    return [chunk for chunk in np.split(order, cuts) if len(chunk)]


def _part(
    scoring: _Scoring,
    data: RerankData,
    run: Run | None,
    normalise: str,
    queries: np.ndarray | None,
    fetched: list[Callable[[], np.ndarray]],
) -> RunArrays:
    """The reranked run of ``queries`` (``None``: all), from the members' scores as they come."""
    counts = scoring.counts[0] if queries is None else [scoring.counts[0][qi] for qi in queries.tolist()]
    scores = [split_scores(fetch(), counts) for fetch in fetched]
    start = time.perf_counter()
    chosen = None if queries is None else queries.tolist()
    reranked = scores_to_arrays(data, combine(scores, normalise), run, scoring.candidates, chosen)
    if scoring.timings is not None:
        scoring.timings["write"] = scoring.timings.get("write", 0.0) + time.perf_counter() - start
    return reranked

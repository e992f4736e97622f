"""Several models from few labels: seed ensembles and k-fold cross-validation over queries.

With few judged queries, every one is precious: :func:`cross_validate` splits the training
queries into ``k`` folds, trains ``len(seeds)`` models on each ``k - 1`` folds (early stopping
on a fold of those, or on a separate dev set when one is given), and reranks each held-out fold
with its own models — an out-of-fold run over all training queries, each query scored by models
whose training and epoch choice never saw it. All ``k × seeds`` models together form the
ensemble applied to new queries.

Until 2026-12-06 the epoch was chosen on the held-out fold itself, which made the out-of-fold
scores optimistic (``stop_on_held_out=True`` reproduces those numbers).
"""

from __future__ import annotations

import os
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clir.errors import ConfigError, OutputExistsError
from clir.formats import write_run
from clir.formats.atomic import artefact_kind, directory_lock, foreign_entry, output_directory
from clir.training.checkpoint import ARTEFACT_KIND, is_checkpoint
from clir.training.config import TrainConfig
from clir.training.data import RerankData
from clir.training.ensemble import TrainedReranker, combine, ensemble_meta, member_scores, write_ensemble
from clir.training.scoring import scores_to_run
from clir.training.trainer import MetricFn, Trainer
from clir.types import Qrels, Run


@dataclass
class CVResult:
    """What :func:`cross_validate` made.

    Attributes:
        path: The ensemble directory.
        members: Checkpoint directories, fold by fold, seed by seed.
        folds: The qids of each fold.
        oof_run: Each training query reranked by the models that did not train on it.
    """

    path: Path
    members: list[Path]
    folds: list[list[str]]
    oof_run: Run


def kfold_qids(qids: Sequence[str], folds: int, seed: int = 0) -> list[list[str]]:
    """Split qids into ``folds`` folds of near-equal size after a seeded shuffle.

    Raises:
        ConfigError: If there are fewer qids than folds or ``folds < 2``.
    """
    if folds < 2:
        raise ConfigError(f"folds must be >= 2 for cross-validation, got {folds}")
    if len(qids) < folds:
        raise ConfigError(f"{len(qids)} queries cannot make {folds} folds")
    order = np.random.default_rng(seed).permutation(len(qids))
    return [sorted(qids[i] for i in part) for part in np.array_split(order, folds)]


def cross_validation_of(path: str | Path) -> Path | None:
    """The cross-validation ensemble that ``path`` is, or holds as a member (a fold model named
    directly, ``DIR/fold0/seed0``: it was let through as any checkpoint); ``None`` for any other
    directory."""
    path = Path(path)
    target = path.resolve()
    for directory in (path, path.parent, path.parent.parent):
        meta = ensemble_meta(directory)
        if "folds" in meta and (
            directory == path or any((directory / m).resolve() == target for m in meta["members"])
        ):
            return directory
    return None


def member_dir(out_dir: str | Path, seed: int, fold: int | None = None) -> Path:
    """Where a training writes the checkpoint of its member of ``seed``: ``seed<s>/``, or
    ``fold<f>/seed<s>/`` in a cross-validation."""
    return (Path(out_dir) if fold is None else Path(out_dir) / f"fold{fold}") / f"seed{seed}"


def member_dirs(config: TrainConfig, out_dir: str | Path) -> list[Path]:
    """The checkpoint directories a training of ``config`` writes in ``out_dir``
    (:func:`train_ensemble`, :func:`cross_validate`: :func:`member_dir` of each seed of
    ``ensemble.seeds``, and of each fold when cross-validated)."""
    folds: list[int | None] = list(range(config.cv.folds)) if config.cv.folds > 1 else [None]
    return [member_dir(out_dir, seed, fold) for fold in folds for seed in config.ensemble.seeds]


def check_member_dirs(config: TrainConfig, out_dir: str | Path) -> None:
    """Refuse, before any training, what lies where a training of ``config`` writes a member's
    checkpoint in ``out_dir`` (:func:`member_dirs`) and that checkpoint's save would not replace:
    a user's directory (say a ``seed0/`` of their own), a file, a symbolic link or another kind
    of clir output. The save refused it only after a whole epoch, and its message suggested
    ``--force``, which does not reach the members. Nothing, an empty directory and a clir
    checkpoint (replaced, or resumed) pass, but not a checkpoint holding what clir does not write
    there (a user's notes, which its save would delete: refused by the save, after an epoch).

    Raises:
        OutputExistsError: Naming the directory and the member, and saying to move it away or
            choose another ``--out``.
    """
    out_dir = Path(out_dir)
    remedy = "move or rename it, or choose another --out (--force does not write over it)"
    for path in member_dirs(config, out_dir):
        member = path.relative_to(out_dir).as_posix()
        where = f"where this training writes the checkpoint of its member {member}"
        if path.parent != out_dir and os.path.lexists(path.parent) and not path.parent.is_dir():
            raise OutputExistsError(path.parent, f"a file, {where}", remedy=remedy)
        if not os.path.lexists(path):
            continue
        if path.is_symlink():
            what = "a symbolic link"
        elif not path.is_dir():
            what = "a file"
        elif not any(path.iterdir()):
            continue
        elif (kind := artefact_kind(path)) == ARTEFACT_KIND:
            if (foreign := foreign_entry(path, kind)) is None:
                continue
            what = f"a clir checkpoint holding {foreign}, which clir does not write there"
        elif kind is None and is_checkpoint(path):
            continue  # saved by a clir before the marker: its save decides, as before
        else:
            what = "a directory that clir did not write" if kind is None else f"a clir {kind!r} output"
        raise OutputExistsError(path, f"{what}, {where}", remedy=remedy)


def train_ensemble(
    config: TrainConfig,
    train: RerankData,
    dev: RerankData | None,
    qrels: Qrels,
    out_dir: str | Path,
    *,
    space: Any,
    metric: MetricFn | None = None,
    resume: bool = False,
) -> Path:
    """One model per seed of ``config.ensemble.seeds`` (or a cross-validated ensemble when
    ``config.cv.folds > 1``), written as an ensemble directory.

    Args:
        config: The training config.
        train: Training queries.
        dev: Dev queries for early stopping (optional with cross-validation).
        qrels: Judgements.
        out_dir: The ensemble directory: ``seed<s>/`` checkpoints (or ``fold<f>/seed<s>/``)
            and ``ensemble.json``.
        space: The shared space.
        metric: ``metric(run, qrels) -> float`` for early stopping.
        resume: Resume interrupted members (finished ones are kept).

    Returns:
        ``out_dir`` as a :class:`~pathlib.Path` (load it with
        :func:`~clir.training.ensemble.load_models`).

    Raises:
        OutputExistsError: Before any training, if a member's directory holds what its
            checkpoint's save would not replace (:func:`check_member_dirs`).
    """
    if config.cv.folds > 1:
        return cross_validate(
            config, train, qrels, out_dir, space=space, metric=metric, dev=dev, resume=resume
        ).path
    if config.optim.seed != 0 and config.optim.seed not in config.ensemble.seeds:
        warnings.warn(
            f"optim.seed {config.optim.seed} seeds no model here: the models' seeds are ensemble.seeds "
            f"{list(config.ensemble.seeds)} (set ensemble.seeds: [{config.optim.seed}] for that seed)",
            stacklevel=2,
        )
    check_member_dirs(config, out_dir)
    out_dir = output_directory(out_dir, kind="reranker")
    with directory_lock(out_dir, wait=False):  # one training (or --resume) at a time writes here
        members = []
        for seed in config.ensemble.seeds:
            trainer = Trainer(config, metric=metric, seed=seed)
            members.append(
                trainer.fit(train, dev, qrels, member_dir(out_dir, seed), space=space, resume=resume)
            )
        return write_ensemble(out_dir, members, {"seeds": list(config.ensemble.seeds)})


def cross_validate(
    config: TrainConfig,
    data: RerankData,
    qrels: Qrels,
    out_dir: str | Path,
    *,
    space: Any,
    metric: MetricFn | None,
    dev: RerankData | None = None,
    resume: bool = False,
    stop_on_held_out: bool = False,
) -> CVResult:
    """k-fold cross-validation over the queries of ``data`` (``config.cv.folds`` folds, split
    with ``config.optim.seed``), ``config.ensemble.seeds`` models per fold.

    Args:
        config: The training config.
        data: The labelled queries.
        qrels: Their judgements (and the dev queries').
        out_dir: The ensemble directory: ``fold<f>/seed<s>/`` checkpoints, ``ensemble.json``
            and ``oof.run`` (the out-of-fold run, TREC format).
        space: The shared space.
        metric: ``metric(run, qrels) -> float`` for early stopping (required).
        dev: Early-stop on this set. Without it, each fold's models early-stop on the first of
            ``max(2, k - 1)`` folds of its training queries (:func:`kfold_qids`, the same seed)
            and train on the rest: with 5 folds of 250 queries, 150 to train and 50 to stop on.
        resume: Resume interrupted members.
        stop_on_held_out: Early-stop on the held-out fold itself (training on all the rest):
            the scheme before 2026-12-06, whose out-of-fold scores are optimistic (the epoch
            is chosen on the queries then scored); kept to reproduce those numbers.

    Returns:
        A :class:`CVResult`; ``ensemble.json`` records the folds and the queries each fold
        early-stopped on (``stopped_on``).

    Raises:
        ConfigError: Without a metric, ``dev`` with ``stop_on_held_out``, with too few queries
            for the folds (and their inner folds), or with an
            ``optim.init_from`` that was itself cross-validated: its members were trained on
            queries that these folds hold out, so the out-of-fold scores would leak.
        OutputExistsError: Before any training, as :func:`train_ensemble`.
    """
    if metric is None:
        raise ConfigError("cross-validation needs metric=(run, qrels) -> float for early stopping")
    if config.optim.init_from and (ensemble := cross_validation_of(config.optim.init_from)) is not None:
        what = "" if ensemble == Path(config.optim.init_from) else f"a fold model of {ensemble}, "
        raise ConfigError(
            f"optim.init_from={config.optim.init_from!r} is {what}a cross-validation ensemble: its fold "
            "models saw the queries that these folds hold out; start from a model trained without "
            "cross-validation (cv.folds: 1), e.g. on pseudo-queries"
        )
    if dev is not None and stop_on_held_out:
        raise ConfigError("cross-validation early-stops on dev or on the held-out fold, not both")
    check_member_dirs(config, out_dir)
    out_dir = output_directory(out_dir, kind="reranker")
    with directory_lock(out_dir, wait=False):  # one cross-validation (or --resume) at a time here
        folds = kfold_qids(data.qids, config.cv.folds, config.optim.seed)
        members: list[Path] = []
        oof_scores: dict[str, np.ndarray] = {}
        stopped_on: list[list[str]] = []
        for f, held_out in enumerate(folds):
            held_set = set(held_out)
            rest = [q for q in data.qids if q not in held_set]
            held = data.subset(held_out)
            if dev is not None or stop_on_held_out:
                train_part, stop_data = data.subset(rest), dev if dev is not None else held
            else:  # a fold of the rest: the held-out fold unseen until it is scored
                stop = set(kfold_qids(rest, max(2, config.cv.folds - 1), config.optim.seed)[0])
                train_part = data.subset([q for q in rest if q not in stop])
                stop_data = data.subset([q for q in rest if q in stop])
            if dev is None:
                stopped_on.append(sorted(stop_data.qids))
            fold_members = []
            for seed in config.ensemble.seeds:
                trainer = Trainer(config, metric=metric, seed=seed)
                path = trainer.fit(
                    train_part, stop_data, qrels, member_dir(out_dir, seed, f), space=space,
                    resume=resume,
                )  # fmt: skip
                fold_members.append(path)
            models = [TrainedReranker.load(p) for p in fold_members]
            scores = combine(member_scores(models, held, space=space, depth=config.data.max_candidates))
            oof_scores.update(zip(held.qids, scores, strict=True))
            members.extend(fold_members)
        oof_run = scores_to_run(data, [oof_scores[q] for q in data.qids])
        meta = {"folds": folds, "seeds": list(config.ensemble.seeds), "stopped_on": stopped_on or "dev"}
        write_run(out_dir / "oof.run", oof_run, "clir-cv-oof")
        write_ensemble(out_dir, members, meta)  # last: it makes the directory an ensemble
        return CVResult(out_dir, members, folds, oof_run)

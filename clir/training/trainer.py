"""Training the bilingual reranker: pairwise hinge loss, Adam, early stopping on a dev score.

Zhang et al. (2019), following POSIT-DRMM (McDonald et al., 2018): for every (query, relevant
candidate) one non-relevant candidate is sampled from the first-stage top-k each epoch; the
loss is ``max(0, margin - s(q, d+) + s(q, d-))``; the epoch with the best dev score is kept.
With ``optim.loss: softmax`` each relevant candidate is instead scored against all of its
``data.negatives_per_positive`` sampled negatives at once (listwise softmax cross-entropy).

The dev score comes from a callback, ``metric(run, qrels) -> float``, rather than from
:mod:`clir.evaluation`: training is layer 8 and evaluation layer 9, and the trainer has no
business knowing which measure the experiment selects models by. The pipeline passes
:func:`clir.pipeline.features.map_metric` (MAP through ``clir.evaluation.evaluate``).
"""

from __future__ import annotations

import hashlib
import math
import time
import warnings
from collections.abc import Callable, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from clir.errors import ConfigError, NonFiniteError
from clir.progress import progress_bar
from clir.rerankers import BilingualReranker, get_interaction_model, hinge_loss, softmax_loss
from clir.training.checkpoint import (
    TrainingState,
    checkpoint_problem,
    is_checkpoint,
    load_trainable_state,
    read_config,
    restore_training,
    save_checkpoint,
    tidy_checkpoint,
    trainable_state,
)
from clir.training.config import TrainConfig
from clir.training.data import PairIndex, RerankData, Tensorizer, Vocabulary, sample_groups, sample_pairs
from clir.training.pooled import PooledCache
from clir.training.scoring import ScoringOptions, resolve_device, score_candidates, scores_to_run
from clir.training.warmstart import load_init_weights
from clir.types import Qrels, Run

MetricFn = Callable[[Run, Qrels], float]
"""``metric(run, qrels) -> float``, higher is better (e.g. MAP); ``qrels`` holds only the dev queries."""


@dataclass
class EpochInfo:
    """What a callback is told after each epoch (after the checkpoint is written)."""

    epoch: int
    loss: float
    dev: float | None
    best_epoch: int
    checkpoint: Path


def _data_digest(train: RerankData, dev: RerankData | None) -> str:
    """SHA-256 of what training reads of its data: each query's terms, candidates, first-stage
    scores and features (a resumed training must see the same)."""
    digest = hashlib.sha256()
    for data in (train, dev):
        for q in data.queries if data is not None else []:
            text = "\t".join([q.qid, " ".join(q.query_en), " ".join(q.query_src), " ".join(q.docnos)])
            digest.update(text.encode("utf-8") + b"\n")
            digest.update(np.ascontiguousarray(q.scores).tobytes())
            digest.update(np.ascontiguousarray(q.features).tobytes())
        digest.update(b"\0")
    return digest.hexdigest()


def _vectors_digest(embeddings: np.ndarray) -> str:
    """SHA-256 of the frozen matrix a model reads (its shape and float32 values): a resumed
    training must read the same space."""
    matrix = np.ascontiguousarray(embeddings, dtype=np.float32)
    return hashlib.sha256(str(matrix.shape).encode("ascii") + matrix.tobytes()).hexdigest()


_NEUTRAL = {"feature_dropout": 0.0, "loss": "hinge"}
"""``optim`` values that train as the key left out does (``None``, kept so that configs without
them keep their step keys): a config that writes them resumes one that does not."""


def _resume_form(config: dict[str, Any]) -> dict[str, Any]:
    """A config dict with the :data:`_NEUTRAL` ``optim`` values left out and ``optim.init_from``
    resolved (``./m``, ``m`` and its absolute path start from the same model)."""
    optim = {k: v for k, v in config.get("optim", {}).items() if k not in _NEUTRAL or v != _NEUTRAL[k]}
    if isinstance(optim.get("init_from"), str):
        optim["init_from"] = str(Path(optim["init_from"]).resolve())
    return {**config, "optim": optim}


def _resume_info(info: dict[str, Any]) -> dict[str, Any]:
    """A checkpoint's ``info`` with the path of the model it started from resolved (as
    :func:`_resume_form` does ``optim.init_from``); the recorded ``info`` is left as it is."""
    start = info.get("init_from")
    if isinstance(start, dict) and isinstance(start.get("path"), str):
        return {**info, "init_from": {**start, "path": str(Path(start["path"]).resolve())}}
    return info


def _differences(saved: dict[str, Any], ours: dict[str, Any], prefix: str = "") -> list[str]:
    """The dotted keys whose values differ between two config dicts."""
    differ = []
    for key in sorted(saved.keys() | ours.keys()):
        a, b = saved.get(key), ours.get(key)
        if isinstance(a, dict) and isinstance(b, dict):
            differ += _differences(a, b, f"{prefix}{key}.")
        elif a != b:
            differ.append(prefix + key)
    return differ


def build_reranker(
    config: TrainConfig,
    embeddings: np.ndarray,
    n_features: int,
    seed: int,
    feature_names: Sequence[str] | None = None,
) -> BilingualReranker:
    """The bilingual reranker a config describes.

    Args:
        config: Its ``model`` section, ``optim.dropout`` and ``optim.feature_dropout`` are read.
        embeddings: The frozen matrix ``(V, dim)`` (row 0 = padding).
        n_features: Width of the extra feature vector (0 when ``model.features`` is off).
        seed: Seed of the weight initialisation.
        feature_names: Names of the features (kept in the model's config, for ``explain``).

    Returns:
        A :class:`~clir.rerankers.bilingual.BilingualReranker`.

    Raises:
        ConfigError: On an unknown interaction model, an argument it does not take, or
            ``optim.dropout`` set for a model without dropout.
    """
    m = config.model
    kwargs = dict(m.interaction_kwargs)
    keys = get_interaction_model(m.interaction).config_keys
    unknown = sorted(set(kwargs) - set(keys))
    if unknown:
        raise ConfigError(
            f"model.interaction_kwargs {unknown} are not arguments of {m.interaction!r}; "
            f"it takes {sorted(keys)}"
        )
    if config.optim.dropout > 0 and "dropout" not in kwargs:
        if "dropout" not in keys:
            raise ConfigError(
                f"optim.dropout={config.optim.dropout} but interaction model {m.interaction!r} "
                "has no dropout; set optim.dropout: 0"
            )
        kwargs["dropout"] = config.optim.dropout
    matrix = torch.from_numpy(np.asarray(embeddings, dtype=np.float32))
    return BilingualReranker(
        int(matrix.shape[1]),
        matrix,
        model=m.interaction,
        model_kwargs=kwargs,
        components=list(m.components),
        share_weights=m.shared_weights,
        n_features=n_features,
        feature_names=list(feature_names) if feature_names is not None else None,
        fusion=m.fusion,
        fusion_hidden=m.fusion_hidden,
        feature_dropout=config.optim.feature_dropout or 0.0,
        seed=seed,
    )


def parameter_groups(model: BilingualReranker, config: TrainConfig) -> list[dict[str, Any]]:
    """The optimiser's parameter groups: everything at ``optim.lr``, or, with
    ``optim.component_lr`` set, the interaction components at that rate (frozen, and left out,
    at 0) and the rest at ``optim.lr``.

    Args:
        model: The reranker about to be trained (frozen components get ``requires_grad=False``).
        config: Its ``optim`` section is read.

    Returns:
        Groups for :class:`torch.optim.Adam`, empty ones left out.
    """
    component_lr = config.optim.component_lr
    if component_lr is None:
        return [{"params": [p for p in model.parameters() if p.requires_grad]}]
    if component_lr == 0:
        model.scorers.requires_grad_(False)
    components = {id(p) for p in model.scorers.parameters()}
    rest = [p for p in model.parameters() if p.requires_grad and id(p) not in components]
    scorers = [p for p in model.scorers.parameters() if p.requires_grad]
    groups = [{"params": rest}, {"params": scorers, "lr": component_lr}]
    return [group for group in groups if group["params"]]


@contextmanager
def deterministic(device: torch.device) -> Any:
    """``torch.use_deterministic_algorithms(True)`` for a block (warn-only), restoring the setting,
    and the states of torch's random generators (the CPU's, and ``device``'s on CUDA): the epochs
    seed the global ones, which had left a caller's later draws depending on the training."""
    before = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    torch.use_deterministic_algorithms(True, warn_only=True)
    try:
        with torch.random.fork_rng(devices=[device] if device.type == "cuda" else []):
            yield
    finally:
        torch.use_deterministic_algorithms(before, warn_only=warn_only)


class Trainer:
    """Trains one bilingual reranker (one seed) with early stopping.

    Args:
        config: The training config (validated here).
        metric: ``metric(run, dev_qrels) -> float`` selecting the best epoch (higher is better);
            needed when a dev set is given.
        seed: Overrides ``config.optim.seed`` (used by ensembles and cross-validation).
        callbacks: Called with an :class:`EpochInfo` after each epoch's checkpoint is written
            (raising stops training there; the checkpoint stays resumable).

    Example:
        >>> trainer = Trainer(load_config("configs/reranker-knrm.yaml"), metric=map_metric)  # doctest: +SKIP
        >>> path = trainer.fit(train, dev, qrels, "runs/knrm", space=space)                 # doctest: +SKIP
    """

    def __init__(
        self,
        config: TrainConfig,
        metric: MetricFn | None = None,
        seed: int | None = None,
        callbacks: Sequence[Callable[[EpochInfo], None]] = (),
    ) -> None:
        config.validate()
        self.config = config
        self.metric = metric
        self.seed = config.optim.seed if seed is None else seed
        self.callbacks = list(callbacks)
        self.device = resolve_device(config.device)
        self.scoring = ScoringOptions(
            device=config.device, batch_size=config.score_batch_size, precision=config.precision or "auto"
        ).resolve()
        self.model_: nn.Module | None = None
        self.state_: TrainingState | None = None

    def _features(self, data: RerankData) -> int:
        return len(data.feature_names) if self.config.model.features else 0

    def _strip(self, data: RerankData | None) -> RerankData | None:
        """The data without its features when the config turns them off."""
        if data is None or self.config.model.features:
            return data
        return data.without_features()

    def fit(
        self,
        train: RerankData,
        dev: RerankData | None,
        qrels: Qrels,
        out_dir: str | Path,
        *,
        space: Any,
        resume: bool = False,
    ) -> Path:
        """Train, writing a checkpoint to ``out_dir`` after every epoch.

        Args:
            train: Training queries with candidates.
            dev: Queries to select the epoch by (``None``: the last epoch is kept).
            qrels: Judgements of the training (and dev) queries.
            out_dir: The checkpoint directory (see :mod:`clir.training.checkpoint`).
            space: The shared space (``.matrix(entries)``, ``.dim``) the embeddings come from.
            resume: Continue from the checkpoint in ``out_dir`` when there is one (a finished
                one is returned as is; a damaged one, whose files do not match its manifest or
                whose manifest omits one that a resume reads, is trained again from the start with
                a warning). Without ``resume`` an existing checkpoint is replaced.

        Returns:
            ``out_dir`` as a :class:`~pathlib.Path`; its ``model/`` is the best epoch's model.

        Raises:
            ConfigError: If the data has no training pair, a dev set comes without a metric
                or with no query judged relevant in ``qrels`` or none with a relevant candidate
                among its first ``data.max_candidates`` (before the first epoch), the
                feature names of train and dev differ, ``resume`` finds a checkpoint made with
                another config, seed, data (its queries, candidates and features) or space, or
                ``optim.init_from`` names a model of another architecture.
            DataNotFoundError: If ``optim.init_from`` is neither a checkpoint nor an ensemble.
            NonFiniteError: If the training loss, an update or the dev score is NaN or infinite
                (naming the seed and epoch), or a vector of the space that the data reads is.
        """
        cfg = self.config
        out_dir = Path(out_dir)
        if dev is not None and self.metric is None:
            raise ConfigError("a dev set needs metric=(run, qrels) -> float to select the best epoch")
        if dev is not None and dev.feature_names != train.feature_names:
            raise ConfigError(
                f"train features {train.feature_names} differ from dev features {dev.feature_names}"
            )
        if dev is not None and not any(
            grade >= 1 for qid in dev.qids for grade in qrels.get(qid, {}).values()
        ):  # evaluate would refuse it only after the first epoch, naming no split
            split = dev.meta.get("split")
            of_split = f" of split {split!r}" if isinstance(split, str) else ""
            raise ConfigError(
                f"the {len(dev.queries)} dev queries{of_split} have no relevant judgement "
                "(relevance >= 1) in the qrels, so no epoch can be chosen by them: judge them, "
                "early-stop on another split or train without a dev set"
            )
        depth = cfg.data.max_candidates
        if dev is not None and not any(
            qrels.get(q.qid, {}).get(docno, 0) >= 1 for q in dev.queries for docno in q.docnos[:depth]
        ):  # the dev score would be 0 at every epoch, and the first one kept, silently
            split = dev.meta.get("split")
            of_split = f" of split {split!r}" if isinstance(split, str) else ""
            raise ConfigError(
                f"none of the {len(dev.queries)} dev queries{of_split} has a relevant candidate among "
                f"its first {depth} (data.first_stage {cfg.data.first_stage!r} retrieved none of "
                "their relevant documents), so the dev score would be 0 at every epoch and choose "
                "none: check the first stage, early-stop on another split or train without a dev set"
            )
        train, dev = self._strip(train), self._strip(dev)
        assert train is not None
        dev_qrels = {q: dict(qrels[q]) for q in (dev.qids if dev else []) if q in qrels}

        vocab = Vocabulary.build([train] + ([dev] if dev is not None else []))
        embeddings = vocab.embedding_matrix(space)
        if (bad := np.flatnonzero(~np.isfinite(embeddings).all(axis=1))).size:  # else "lower optim.lr"
            lang, word = vocab.entries[int(bad[0])]
            raise NonFiniteError(
                f"the shared space's vector of {lang} {word!r} (and {bad.size - 1} more of the data's "
                "words) holds a NaN or an infinity; give a space of finite vectors"
            )
        tensorizer = Tensorizer(vocab, train, cfg.data.max_query_len, cfg.data.max_doc_len)
        dev_tensorizer = Tensorizer(vocab, dev, cfg.data.max_query_len, cfg.data.max_doc_len) if dev else None

        model = build_reranker(cfg, embeddings, self._features(train), self.seed, train.feature_names).to(
            self.device
        )
        init = load_init_weights(model, cfg.optim.init_from, self.seed) if cfg.optim.init_from else None
        optimizer = torch.optim.Adam(
            parameter_groups(model, cfg), lr=cfg.optim.lr, weight_decay=cfg.optim.weight_decay
        )
        state = TrainingState(
            info={
                "feature_names": list(train.feature_names),
                "doc_lang": train.doc_lang,
                "seed": self.seed,
                "train_qids": len(train.queries),
                "dev_qids": len(dev.queries) if dev else 0,
                "vocabulary": len(vocab),
                "data_sha256": _data_digest(train, dev),
                # only a model with components reads the vectors (one without is trained on zeros)
                **({"space_sha256": _vectors_digest(embeddings)} if cfg.model.components else {}),
                **({"init_from": init} if init is not None else {}),
            }
        )
        best_state = trainable_state(model)
        if resume:
            tidy_checkpoint(out_dir)
        if resume and is_checkpoint(out_dir) and (problem := checkpoint_problem(out_dir)) is not None:
            warnings.warn(f"{out_dir}: damaged checkpoint ({problem}); training from the start", stacklevel=2)
        elif resume and is_checkpoint(out_dir):
            ignored = ("device", "progress", "precision", "score_batch_size")  # where and how: not what
            saved = {
                k: v for k, v in _resume_form(read_config(out_dir).to_dict()).items() if k not in ignored
            }
            ours = {k: v for k, v in _resume_form(cfg.to_dict()).items() if k not in ignored}
            differ = _differences(saved, ours)
            if differ:
                raise ConfigError(
                    f"{out_dir} was trained with another config ({', '.join(differ)} differ); resume with "
                    "the same one or write to a new --out"
                )
            info = state.info
            state, best_state = restore_training(out_dir, model, optimizer)
            if state.info.get("seed") != self.seed:
                raise ConfigError(
                    f"{out_dir} was trained with seed {state.info.get('seed')}, not {self.seed}"
                )
            mine, theirs = _resume_info(info), _resume_info(state.info)
            differ = sorted(k for k in mine.keys() & theirs.keys() if mine[k] != theirs[k])
            if "data_sha256" in differ and "space_sha256" in differ:  # other words: other rows
                differ.remove("space_sha256")
            if differ:
                raise ConfigError(
                    f"{out_dir} was trained on other data ({', '.join(differ)} differ); resume with the "
                    "same collection, space and tables or write to a new --out"
                )
            if state.finished:
                load_trainable_state(model, best_state)
                self.model_, self.state_ = model, state
                return out_dir

        # the pooled kernel features of each pair, computed at its first use (clir.training.pooled)
        pooled = PooledCache(model, tensorizer, self.device)
        dev_pooled = PooledCache(model, dev_tensorizer, self.device) if dev_tensorizer else None
        with deterministic(self.device):
            self._replay_pooling(tensorizer, qrels, state.epoch, pooled)  # a resume's, as they were
            for epoch in range(state.epoch + 1, cfg.optim.epochs + 1):
                started = time.perf_counter()
                loss, n_pairs = self._epoch(model, optimizer, tensorizer, qrels, epoch, pooled)
                score = None
                if dev_tensorizer is not None and dev is not None and self.metric is not None:
                    scores = score_candidates(
                        model, dev_tensorizer, cfg.data.max_candidates, self.scoring, cache=dev_pooled
                    )
                    score = float(self.metric(scores_to_run(dev, scores), dev_qrels))
                    if not math.isfinite(score):  # a NaN is never "better": epoch 1 had been kept, silently
                        raise NonFiniteError(
                            f"seed {self.seed}, epoch {epoch}: the dev score is {score}; the metric "
                            "must give a finite number to choose the epoch by"
                        )
                improved = score is None or state.best_score is None or score > state.best_score
                if improved:
                    state.best_epoch, state.best_score, state.bad_epochs = epoch, score, 0
                    best_state = trainable_state(model)
                else:
                    state.bad_epochs += 1
                state.epoch = epoch
                state.curve.append(
                    {
                        "epoch": epoch,
                        "loss": loss,
                        "dev": score,
                        "pairs": n_pairs,
                        "seconds": round(time.perf_counter() - started, 3),
                    }
                )
                patience = cfg.optim.patience
                state.finished = epoch == cfg.optim.epochs or (patience > 0 and state.bad_epochs >= patience)
                save_checkpoint(
                    out_dir, model=model, best_state=best_state, optimizer=optimizer, state=state, config=cfg
                )
                info = EpochInfo(epoch, loss, score, state.best_epoch, out_dir)
                for callback in self.callbacks:
                    callback(info)
                if state.finished:
                    break
        if not state.finished:  # zero epochs left to run
            state.finished = True
            save_checkpoint(
                out_dir, model=model, best_state=best_state, optimizer=optimizer, state=state, config=cfg
            )
        load_trainable_state(model, best_state)
        self.model_, self.state_ = model, state
        return out_dir

    def _epoch(
        self,
        model: nn.Module,
        optimizer: torch.optim.Optimizer,
        tensorizer: Tensorizer,
        qrels: Qrels,
        epoch: int,
        pooled: PooledCache,
    ) -> tuple[float, int]:
        """One epoch: fresh negatives, shuffled pairs, Adam steps. Returns (mean loss, pairs)."""
        cfg = self.config
        # Seeding per epoch makes epoch e identical whether or not training was resumed before it.
        items = self._draw(tensorizer, qrels, epoch)
        torch.manual_seed(self.seed * 1_000_003 + epoch)
        listwise = cfg.optim.loss == "softmax"
        model.train()
        total, size = 0.0, cfg.optim.batch_size
        steps = range(0, len(items), size)
        bar = progress_bar(steps, desc=f"epoch {epoch}", unit="batch", enabled=cfg.progress, leave=False)
        for start in bar:
            chunk = items[start : start + size]
            index = self._batch_index(tensorizer, chunk)
            batch = tensorizer.gather(index).to(self.device)
            scores = model(batch, pooled.lookup(index))
            positive, negative = scores[: len(chunk)], scores[len(chunk) :]
            if listwise:
                loss = softmax_loss(positive, negative.view(len(chunk), -1))
            else:
                loss = hinge_loss(positive, negative, margin=cfg.optim.margin)
            value = float(loss.detach())
            where = f"seed {self.seed}, epoch {epoch}, batch {start // size + 1}"
            if not math.isfinite(value):
                raise NonFiniteError(
                    f"{where}: the training loss is {value} (optim.lr={cfg.optim.lr}"
                    + ("" if listwise else f", optim.margin={cfg.optim.margin}")  # softmax has none
                    + "); lower optim.lr or check the input features"
                )
            optimizer.zero_grad(set_to_none=True)
            loss.backward()
            try:
                optimizer.step()
            except RuntimeError as error:  # torch's "value cannot be converted ... without overflow"
                if "overflow" not in str(error):
                    raise
                raise NonFiniteError(
                    f"{where}: the update overflowed (optim.lr={cfg.optim.lr}); lower optim.lr"
                ) from None
            total += value * len(chunk)
            # refresh=False: the loss is shown at the bar's own redraws (off a terminal, a line
            # every LINE_INTERVAL), not one line a batch
            bar.set_postfix(loss=f"{total / min(start + size, len(items)):.4f}", refresh=False)
        return total / len(items), len(items)

    def _draw(self, tensorizer: Tensorizer, qrels: Qrels, epoch: int) -> list[tuple[int, str, Any]]:
        """The training items of ``epoch`` (:func:`sample_pairs` or :func:`sample_groups`, drawn
        from a generator seeded by the seed and the epoch: the same whether or not training was
        resumed before it).

        Raises:
            ConfigError: When no training query has a relevant and a non-relevant candidate.
        """
        cfg = self.config
        sample = sample_groups if cfg.optim.loss == "softmax" else sample_pairs
        items = sample(
            tensorizer.data,
            qrels,
            np.random.default_rng([self.seed, epoch]),
            cfg.data.negatives_per_positive,
            depth=cfg.data.max_candidates,
            hard=cfg.optim.hard_negatives,
        )
        if not items:
            raise ConfigError(
                "no training pairs: no training query has both a relevant and a non-relevant candidate "
                f"among its first {cfg.data.max_candidates} (check the qrels and the first-stage run)"
            )
        return items

    def _batch_index(self, tensorizer: Tensorizer, chunk: Sequence[tuple[int, str, Any]]) -> PairIndex:
        """The pairs of a batch of items: its positives, then its negatives."""
        listwise = self.config.optim.loss == "softmax"
        negatives = [(qi, neg) for qi, _, negs in chunk for neg in (negs if listwise else [negs])]
        return tensorizer.pair_index([(qi, pos) for qi, pos, _ in chunk] + negatives)

    def _replay_pooling(self, tensorizer: Tensorizer, qrels: Qrels, epochs: int, pooled: PooledCache) -> None:
        """Pool the pairs of the first ``epochs`` epochs (a resumed training's) in the batches
        they were first pooled in: a pair's pooled features differ in their last bits with the
        batch that computes them (its padded width orders the additions), so a resume that
        pooled each pair where it first drew it had ended at other weights than the
        uninterrupted training (up to 6e-8 apart, on documents of varied lengths)."""
        size = self.config.optim.batch_size
        for epoch in range(1, epochs + 1):
            if not pooled.enabled:
                return
            items = self._draw(tensorizer, qrels, epoch)
            for start in range(0, len(items), size):
                pooled.lookup(self._batch_index(tensorizer, items[start : start + size]))

    def predict(self, data: RerankData, *, space: Any, run: Run | None = None) -> Run:
        """Rerank ``data`` with the trained (best-epoch) model.

        Args:
            data: Queries with candidates.
            space: The shared space.
            run: The full first-stage run, appended beneath (see :func:`scores_to_run`).

        Returns:
            The reranked run.

        Raises:
            ConfigError: Before :meth:`fit`.
        """
        if self.model_ is None:
            raise ConfigError("call fit() before predict()")
        from clir.training.ensemble import TrainedReranker, rerank

        names = list(data.feature_names) if self.config.model.features else []
        member = TrainedReranker(self.model_, self.config, names)
        return rerank([member], data, space=space, run=run, options=self.scoring)

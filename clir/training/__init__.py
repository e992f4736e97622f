"""Training the bilingual reranker (layer 8): configs, data records, tensorisation and negative
sampling, the trainer with early stopping, resumable checkpoints, seed ensembles and k-fold
cross-validation; starting from trained weights (``optim.init_from``).

>>> config = load_config("configs/reranker-knrm.yaml")                      # doctest: +SKIP
>>> trainer = Trainer(config, metric=map_metric)                            # doctest: +SKIP
>>> path = trainer.fit(train, dev, qrels, "out/knrm", space=space)          # doctest: +SKIP
>>> run = rerank(path, test, space=space, run=first_stage_run)              # doctest: +SKIP

The data records (:class:`RerankData`) are built from a collection by
:mod:`clir.pipeline.features`, which also supplies ``map_metric``.
"""

from clir.training.checkpoint import TrainingState, is_checkpoint, read_config, read_state
from clir.training.config import (
    COMPONENTS,
    CVConfig,
    DataConfig,
    EnsembleConfig,
    HardNegativesConfig,
    ModelConfig,
    OptimConfig,
    TrainConfig,
    load_config,
    save_config,
)
from clir.training.cv import CVResult, cross_validate, kfold_qids, train_ensemble
from clir.training.data import (
    RerankData,
    RerankQuery,
    Tensorizer,
    Vocabulary,
    normalise_scores,
    sample_groups,
    sample_pairs,
)
from clir.training.ensemble import (
    TrainedReranker,
    combine,
    load_models,
    member_scores,
    rerank,
    rerank_arrays,
    rerank_parts,
)
from clir.training.scoring import (
    ScoringOptions,
    precision_guard,
    resolve_device,
    score_candidates,
    scores_to_run,
)
from clir.training.trainer import EpochInfo, MetricFn, Trainer, build_reranker
from clir.training.warmstart import init_digest, load_init_weights

__all__ = [
    "COMPONENTS",
    "CVConfig",
    "CVResult",
    "DataConfig",
    "EnsembleConfig",
    "EpochInfo",
    "HardNegativesConfig",
    "MetricFn",
    "ModelConfig",
    "OptimConfig",
    "RerankData",
    "RerankQuery",
    "ScoringOptions",
    "Tensorizer",
    "TrainConfig",
    "TrainedReranker",
    "Trainer",
    "TrainingState",
    "Vocabulary",
    "build_reranker",
    "combine",
    "cross_validate",
    "init_digest",
    "is_checkpoint",
    "kfold_qids",
    "load_config",
    "load_init_weights",
    "load_models",
    "member_scores",
    "normalise_scores",
    "precision_guard",
    "read_config",
    "read_state",
    "rerank",
    "rerank_arrays",
    "rerank_parts",
    "resolve_device",
    "sample_groups",
    "sample_pairs",
    "save_config",
    "score_candidates",
    "scores_to_run",
    "train_ensemble",
]

"""Neural rerankers: term-interaction models over a shared cross-lingual space (torch only).

Tensors in, scores out: nothing here reads data files or knows about text analysis.
"""

from __future__ import annotations

from clir.rerankers.base import (
    INTERACTION_MODELS,
    InteractionModel,
    build_interaction_model,
    get_interaction_model,
    masked_softmax,
)
from clir.rerankers.batch import BilingualBatch, PairBatch, TokenView, pad_floats, pad_ids
from clir.rerankers.bilingual import COMPONENTS, BilingualReranker, Explanation
from clir.rerankers.drmm import DRMM, matching_histogram
from clir.rerankers.encoding import EncodedPair, EncodedView, FrozenEmbedding
from clir.rerankers.fusion import Fusion
from clir.rerankers.knrm import KNRM, kernel_mus, kernel_pooling, kernel_sums
from clir.rerankers.losses import hinge_loss, softmax_loss
from clir.rerankers.pacrr_drmm import PACRRDRMM, kmax_pool
from clir.rerankers.posit_drmm import POSITDRMM, max_and_top_mean, posit_features

__all__ = [
    "COMPONENTS",
    "DRMM",
    "INTERACTION_MODELS",
    "KNRM",
    "PACRRDRMM",
    "POSITDRMM",
    "BilingualBatch",
    "BilingualReranker",
    "EncodedPair",
    "EncodedView",
    "Explanation",
    "FrozenEmbedding",
    "Fusion",
    "InteractionModel",
    "PairBatch",
    "TokenView",
    "build_interaction_model",
    "get_interaction_model",
    "hinge_loss",
    "kernel_mus",
    "kernel_pooling",
    "kernel_sums",
    "kmax_pool",
    "masked_softmax",
    "matching_histogram",
    "max_and_top_mean",
    "pad_floats",
    "pad_ids",
    "posit_features",
    "softmax_loss",
]

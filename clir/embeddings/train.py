"""Monolingual static word vectors with gensim (FastText or word2vec skip-gram).

FastText: Bojanowski et al. 2017, "Enriching Word Vectors with Subword Information", TACL.
word2vec: Mikolov et al. 2013, "Distributed Representations of Words and Phrases and their
Compositionality", NeurIPS.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from gensim.models import FastText, Word2Vec
from gensim.models.callbacks import CallbackAny2Vec
from gensim.models.keyedvectors import KeyedVectors

from clir.embeddings.base import EmbeddingConfig
from clir.errors import ConfigError
from clir.progress import progress_bar

logger = logging.getLogger(__name__)


class _EpochProgress(CallbackAny2Vec):
    """A progress bar that advances once per training epoch."""

    def __init__(self, total: int, desc: str, enabled: bool) -> None:
        self.bar = progress_bar(total=total, desc=desc, unit="epoch", enabled=enabled)

    def on_epoch_end(self, model: Word2Vec) -> None:
        self.bar.update(1)

    def on_train_end(self, model: Word2Vec) -> None:
        self.bar.close()


def train_vectors(
    sentences: Sequence[list[str]],
    config: EmbeddingConfig | None = None,
    *,
    progress: bool = True,
    desc: str = "train vectors",
    what: str = "sentences",
) -> KeyedVectors:
    """Train skip-gram word vectors on tokenised sentences.

    Args:
        sentences: Token lists (a re-iterable sequence; gensim passes over it once to build the
            vocabulary and once per epoch).
        config: Model and training parameters (defaults: FastText, 100 dims).
        progress: Show a progress bar over the epochs.
        desc: The progress bar's label.
        what: What the sentences are, as an error names them (``"the sw text"``: which
            language of several failed).

    Returns:
        The trained vectors, words ordered by descending frequency (``get_vecattr(w, "count")``
        holds the corpus counts). For FastText a ``FastTextKeyedVectors`` that composes vectors for
        unseen words from character n-grams.

    Raises:
        ConfigError: If the sentences hold no token, or no word reaches ``min_count`` (naming
            ``what``).
    """
    config = config or EmbeddingConfig()
    n_tokens = sum(len(s) for s in sentences)
    if n_tokens == 0:
        raise ConfigError(f"{what}: no tokens to train on (empty corpus)")
    common = dict(
        vector_size=config.dim,
        window=config.window,
        min_count=config.min_count,
        sg=1,
        negative=config.negative,
        sample=config.sample,
        seed=config.seed,
        workers=config.workers,
    )
    if config.method == "fasttext":
        model: Word2Vec = FastText(min_n=config.min_n, max_n=config.max_n, bucket=config.bucket, **common)
    else:
        model = Word2Vec(**common)
    model.build_vocab(sentences)
    if len(model.wv) == 0:
        raise ConfigError(
            f"{what}: min_count={config.min_count}: no word occurs that often in its {len(sentences)} "
            "sentences"
        )
    logger.info("%s: %d words in vocabulary, %d tokens", desc, len(model.wv), n_tokens)
    model.train(
        sentences,
        total_examples=len(sentences),
        epochs=config.epochs,
        callbacks=[_EpochProgress(config.epochs, desc, progress)],
    )
    return model.wv

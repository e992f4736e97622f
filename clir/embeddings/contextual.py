"""Contextual token vectors from a local transformers encoder, usable in place of static vectors.

Each word's vector is the mean of its subword pieces' hidden states (as in Devlin et al. 2019,
"BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding", NAACL, and
multilingual encoders such as XLM-R, Conneau et al. 2020). torch and transformers are imported
only when an encoder is built. The checkpoint must be a local directory: nothing is downloaded.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clir.errors import ConfigError, DataNotFoundError, MissingDependencyError


def pool_words(states: np.ndarray, word_ids: np.ndarray, n_words: int, normalize: bool) -> np.ndarray:
    """Each word's vector: the mean of its pieces' states.

    Args:
        states: ``(n_pieces, dim)`` hidden states.
        word_ids: ``(n_pieces,)`` the word of each piece; ``-1`` for pieces of no word (special
            tokens, a prefix, padding).
        n_words: How many words there are.
        normalize: Length-normalise each word vector.

    Returns:
        ``(n_words, dim)`` float32; a word with no piece gets a zero row.
    """
    keep = word_ids >= 0
    vectors = np.zeros((n_words, states.shape[-1]), dtype=np.float32)
    np.add.at(vectors, word_ids[keep], states[keep])
    counts = np.bincount(word_ids[keep], minlength=n_words)
    seen = counts > 0
    vectors[seen] /= counts[seen, None]
    if normalize:
        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
        vectors = np.where(norms > 0, vectors / np.maximum(norms, 1e-12), 0).astype(np.float32)
    return vectors


def length_batches(lengths: Sequence[int], batch_size: int) -> list[list[int]]:
    """Indices grouped into batches of similar length (sorted by length), so little is padded."""
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    return [order[start : start + batch_size] for start in range(0, len(order), batch_size)]


class WordEncoder(ABC):
    """Contextual word vectors of pre-tokenised sequences; :meth:`lookup` serves them as a
    :class:`~clir.embeddings.base.TokenVectors`."""

    @property
    @abstractmethod
    def dim(self) -> int:
        """Vector dimension."""

    @abstractmethod
    def encode(self, tokens_batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Per sequence, an ``(n_words, dim)`` float32 array (zero rows for words with no piece)."""

    def lookup(self, lang: str, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of one sequence, as :meth:`SharedSpace.lookup` gives them (``lang`` unused).

        Returns:
            ``(vectors (n, dim), oov (n,))``; ``oov`` marks words with no piece (e.g. truncated).
        """
        if not tokens:
            return np.zeros((0, self.dim), np.float32), np.zeros(0, bool)
        vectors = self.encode([tokens])[0]
        return vectors, ~np.any(vectors != 0, axis=1)


class ContextualEncoder(WordEncoder):
    """Token vectors from a local encoder checkpoint (mean of each word's subword pieces).

    Args:
        path: A directory with a transformers model and its *fast* tokenizer (``save_pretrained``).
        layer: Which hidden layer to read (``-1`` = last).
        max_length: Longer inputs are truncated (their last words get zero vectors and are
            marked OOV by :meth:`lookup`).
        batch_size: Sequences per forward pass.
        device: torch device string.
        normalize: Length-normalise each word vector.

    Raises:
        MissingDependencyError: If torch or transformers is not installed.
        DataNotFoundError: If ``path`` is not a directory.
        ConfigError: If the tokenizer is not a fast one (word alignment needs ``word_ids``).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        layer: int = -1,
        max_length: int = 512,
        batch_size: int = 16,
        device: str = "cpu",
        normalize: bool = True,
    ) -> None:
        try:
            import torch  # noqa: F401
            from transformers import AutoModel, AutoTokenizer
        except ImportError as exc:  # pragma: no cover - depends on the environment
            raise MissingDependencyError("transformers", "hf", "ContextualEncoder") from exc
        path = Path(path)
        if not path.is_dir():
            raise DataNotFoundError(f"{path}: no local encoder checkpoint directory (nothing is downloaded)")
        self.tokenizer: Any = AutoTokenizer.from_pretrained(str(path), local_files_only=True)
        if not getattr(self.tokenizer, "is_fast", False):
            raise ConfigError(
                f"{path}: the tokenizer is not a fast tokenizer; word_ids() is needed to pool pieces"
            )
        self.model: Any = AutoModel.from_pretrained(str(path), local_files_only=True).to(device).eval()
        self.layer = layer
        self.max_length = max_length
        self.batch_size = batch_size
        self.device = device
        self.normalize = normalize

    @property
    def dim(self) -> int:
        """Hidden size of the encoder."""
        return int(self.model.config.hidden_size)

    def encode(self, tokens_batch: Sequence[Sequence[str]]) -> list[np.ndarray]:
        """Contextual vectors of pre-tokenised sequences.

        Args:
            tokens_batch: Sequences of words (e.g. analyzer tokens or surface words).

        Returns:
            Per sequence, an ``(n_words, dim)`` float32 array: each word's pieces' mean hidden
            state; a word with no piece left after truncation gets a zero row.
        """
        import torch

        out: list[np.ndarray | None] = [None] * len(tokens_batch)
        with torch.inference_mode():
            for rows in length_batches([len(tokens) for tokens in tokens_batch], self.batch_size):
                chunk = [list(tokens_batch[row]) for row in rows]
                enc = self.tokenizer(
                    chunk,
                    is_split_into_words=True,
                    truncation=True,
                    max_length=self.max_length,
                    padding=True,
                    return_tensors="pt",
                )
                outputs = self.model(
                    **{k: v.to(self.device) for k, v in enc.items()}, output_hidden_states=True
                )
                hidden = outputs.hidden_states[self.layer].float().cpu().numpy()
                for i, (row, words) in enumerate(zip(rows, chunk, strict=True)):
                    word_ids = np.array([-1 if w is None else w for w in enc.word_ids(i)], dtype=np.int64)
                    out[row] = pool_words(hidden[i], word_ids, len(words), self.normalize)
        return out  # type: ignore[return-value]

"""Contextual token vectors from a local transformers encoder, usable in place of static vectors.

Each word's vector is the mean of its subword pieces' hidden states (as in Devlin et al. 2019,
"BERT: Pre-training of Deep Bidirectional Transformers for Language Understanding", NAACL, and
multilingual encoders such as XLM-R, Conneau et al. 2020). torch and transformers are imported
only when an encoder is built. The checkpoint must be a local directory: nothing is downloaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clir.errors import ConfigError, DataNotFoundError, MissingDependencyError


class ContextualEncoder:
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

        out: list[np.ndarray] = []
        with torch.inference_mode():
            for start in range(0, len(tokens_batch), self.batch_size):
                chunk = [list(tokens) for tokens in tokens_batch[start : start + self.batch_size]]
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
                for i, words in enumerate(chunk):
                    vectors = np.zeros((len(words), hidden.shape[-1]), dtype=np.float32)
                    counts = np.zeros(len(words), dtype=np.int64)
                    for position, word in enumerate(enc.word_ids(i)):
                        if word is not None:
                            vectors[word] += hidden[i, position]
                            counts[word] += 1
                    seen = counts > 0
                    vectors[seen] /= counts[seen, None]
                    if self.normalize:
                        norms = np.linalg.norm(vectors, axis=1, keepdims=True)
                        vectors = np.where(norms > 0, vectors / np.maximum(norms, 1e-12), 0).astype(
                            np.float32
                        )
                    out.append(vectors)
        return out

    def lookup(self, lang: str, tokens: list[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors of one sequence, as :meth:`SharedSpace.lookup` gives them (``lang`` unused).

        Returns:
            ``(vectors (n, dim), oov (n,))``; ``oov`` marks words truncated away.
        """
        if not tokens:
            return np.zeros((0, self.dim), np.float32), np.zeros(0, bool)
        vectors = self.encode([tokens])[0]
        return vectors, ~np.any(vectors != 0, axis=1)

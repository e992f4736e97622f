"""Machine translation with a local transformers sequence-to-sequence model (Marian-style).

Nothing is downloaded: the model and tokenizer are read from a local directory written by
``save_pretrained`` (for instance an OPUS-MT Marian model copied onto the machine).
transformers is imported only when a model is loaded.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clir.errors import ConfigError, DataNotFoundError, MissingDependencyError
from clir.progress import progress_bar
from clir.translation.base import Translator, register_translator


@register_translator("marian")
class MarianTranslator(Translator):
    """Translate with a local Marian-style seq2seq model (greedy or beam decoding, in batches).

    Junczys-Dowmunt et al. (2018). Marian: Fast Neural Machine Translation in C++. ACL demos;
    the transformers port (``MarianMTModel``) is what is loaded here, through
    ``AutoModelForSeq2SeqLM``, so any local seq2seq checkpoint works.

    Args:
        path: Directory holding the model and tokenizer (``save_pretrained`` output).
        device: torch device string.
        batch_size: Texts per generation batch.
        max_length: Longest input (in tokens; longer inputs are truncated) and output.
        num_beams: Beam size (1: greedy, deterministic).
        source_lang: Language code of the inputs (recorded only).
        target_lang: Language code of the outputs (recorded only).
        progress: Show a progress bar over batches.

    Raises:
        MissingDependencyError: If transformers is not installed.
        DataNotFoundError: If ``path`` is not a directory.
    """

    def __init__(
        self,
        path: str | Path,
        device: str = "cpu",
        batch_size: int = 16,
        max_length: int = 256,
        num_beams: int = 1,
        source_lang: str = "src",
        target_lang: str = "en",
        progress: bool = False,
    ) -> None:
        if batch_size < 1:
            raise ConfigError(f"batch_size must be >= 1, got {batch_size!r}")
        if max_length < 1:
            raise ConfigError(f"max_length must be >= 1, got {max_length!r}")
        try:
            import torch
            from transformers import AutoModelForSeq2SeqLM, AutoTokenizer
        except ImportError:
            raise MissingDependencyError(
                package="transformers", extra="hf", purpose="MarianTranslator (local MT models)"
            ) from None
        path = Path(path)
        if not path.is_dir():
            raise DataNotFoundError(
                f"{path}: no local model directory (MarianTranslator needs a saved model)"
            )
        self.path = path
        self.device = device
        self.batch_size = batch_size
        self.max_length = max_length
        self.num_beams = num_beams
        self.source_lang = source_lang
        self.target_lang = target_lang
        self.progress = progress
        self._torch = torch
        self.tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
        self.model: Any = AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True).to(device)
        self.model.eval()

    def translate(self, texts: Sequence[str]) -> list[str]:
        """Translate texts in batches of ``batch_size``; one string per input, in order."""
        texts = list(texts)
        out: list[str] = []
        starts = range(0, len(texts), self.batch_size)
        for start in progress_bar(starts, desc="translate", enabled=self.progress):
            out.extend(self._translate_batch(texts[start : start + self.batch_size]))
        return out

    def _translate_batch(self, texts: list[str]) -> list[str]:
        batch = self.tokenizer(
            texts, return_tensors="pt", padding=True, truncation=True, max_length=self.max_length
        ).to(self.device)
        with self._torch.inference_mode():
            generated = self.model.generate(
                input_ids=batch["input_ids"],
                attention_mask=batch["attention_mask"],
                max_length=self.max_length,
                num_beams=self.num_beams,
                do_sample=False,
            )
        return [text.strip() for text in self.tokenizer.batch_decode(generated, skip_special_tokens=True)]

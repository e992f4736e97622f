"""Machine translation with a local transformers sequence-to-sequence model (Marian, NLLB).

Nothing is downloaded: the model and tokenizer are read from a local directory written by
``save_pretrained`` (for instance an OPUS-MT Marian model or NLLB copied onto the machine).
transformers is imported only when a model is loaded. :class:`MTTranslation` is what the
pipeline's ``mt`` translation mode uses: a document language's models both ways, each text
translated once.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from clir.config import PositiveInt, Section, Where
from clir.errors import ConfigError, DataNotFoundError, MissingDependencyError
from clir.progress import progress_bar
from clir.translation.base import Translator, register_translator

_SENTENCE_END = re.compile(r"(?<=[.!?;:])\s+")
_SPACE = re.compile(r"\s+")

NLLB_CODES = {"en": "eng_Latn", "sw": "swh_Latn", "tl": "tgl_Latn", "ny": "nya_Latn", "so": "som_Latn"}
"""clir's language codes -> NLLB's (FLORES-200) codes; a code not listed is passed as is."""


def device_problem(device: str) -> str | None:
    """What keeps this machine from running a model on the torch ``device``, or ``None``: a
    name torch does not know (``gpu``), or CUDA (MPS) it does not see. torch had said so only when
    the model was loaded (an experiment's first MT step, after its collections and tables), as an
    AssertionError or RuntimeError that named no setting."""
    if device == "cpu":
        return None
    import torch

    try:
        parsed = torch.device(device)
    except (RuntimeError, TypeError, ValueError):
        return "a torch device, e.g. 'cpu' or 'cuda' ('cuda:N')"
    if parsed.type == "cuda" and not torch.cuda.is_available():
        return "'cpu': torch sees no CUDA device here"
    if parsed.type == "cuda" and (parsed.index or 0) >= torch.cuda.device_count():
        return f"a CUDA device of this machine's {torch.cuda.device_count()} (cuda:0 ...)"
    if parsed.type == "mps" and not torch.backends.mps.is_available():
        return "'cpu': torch sees no MPS device here"
    return None


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
        max_length: Longest input and output of the model, in tokens; a longer text is
            translated in pieces (:meth:`pieces`).
        num_beams: Beam size (1: greedy, deterministic).
        source_lang: Language code of the inputs. With a multilingual tokenizer (one with a
            ``src_lang``, as NLLB's and M2M100's) it is set as ``src_lang``, clir's codes mapped
            to NLLB's (:data:`NLLB_CODES`: ``sw`` -> ``swh_Latn``); otherwise recorded only.
        target_lang: Language code of the outputs; with a multilingual tokenizer, its token is
            forced as the first generated one (``forced_bos_token_id``).
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
        if (problem := device_problem(device)) is not None:
            raise ConfigError(f"device {device!r} is invalid; expected {problem}")
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
        try:
            self.tokenizer: Any = AutoTokenizer.from_pretrained(path, local_files_only=True)
            self.model: Any = AutoModelForSeq2SeqLM.from_pretrained(path, local_files_only=True).to(device)
        except (OSError, ValueError) as exc:  # a directory without a model, or a damaged one
            reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise ConfigError(f"{path}: not a saved seq2seq model and tokenizer ({reason})") from None
        self.model.eval()

    def translate(self, texts: Sequence[str]) -> list[str]:
        """Translate texts in batches of ``batch_size``; one string per input, in order.

        A text longer than ``max_length`` tokens is translated in pieces (:meth:`pieces`) whose
        translations are joined by a space: the model would have read its first ``max_length``
        tokens only. An empty (or blank) text translates to ``""``: it is not given to the
        model, which would make words up from nothing."""
        texts = list(texts)
        split = [self.pieces(text) if text.strip() else [] for text in texts]
        todo = [piece for pieces in split for piece in pieces]
        done: list[str] = []
        starts = range(0, len(todo), self.batch_size)
        for start in progress_bar(starts, desc="translate", enabled=self.progress):
            done.extend(self._translate_batch(todo[start : start + self.batch_size]))
        translated = iter(done)
        return [" ".join(next(translated) for _ in pieces) for pieces in split]

    def pieces(self, text: str) -> list[str]:
        """``text`` cut into pieces of at most ``max_length`` tokens (special tokens included),
        halved recursively at the sentence end nearest the middle, else at the space nearest it;
        a single word longer than that stays whole (and is truncated). The pieces hold every
        word of ``text``, in order."""
        text = text.strip()
        if len(self.tokenizer(text)["input_ids"]) <= self.max_length:
            return [text]
        middle = len(text) // 2
        cuts = [m.end() for m in _SENTENCE_END.finditer(text)] or [m.end() for m in _SPACE.finditer(text)]
        if not cuts:
            return [text]
        cut = min(cuts, key=lambda end: abs(end - middle))
        return self.pieces(text[:cut]) + self.pieces(text[cut:])

    def _translate_batch(self, texts: list[str]) -> list[str]:
        language: dict[str, Any] = {}
        if hasattr(self.tokenizer, "src_lang"):  # NLLB, M2M100, mBART: language codes as tokens
            source = self._language_token(self.source_lang, "source_lang")
            self.tokenizer.src_lang = source
            target = self._language_token(self.target_lang, "target_lang")
            language["forced_bos_token_id"] = self.tokenizer.convert_tokens_to_ids(target)
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
                **language,
            )
        return [text.strip() for text in self.tokenizer.batch_decode(generated, skip_special_tokens=True)]

    def _language_token(self, lang: str, argument: str) -> str:
        """The tokenizer's token of a language code (:data:`NLLB_CODES` applied).

        Raises:
            ConfigError: If the tokenizer has no such token: its unknown token had been set as
                ``src_lang`` or forced as the first generated one, silently (a translation into
                or from no language the model was told of).
        """
        token = NLLB_CODES.get(lang, lang)
        token_id = self.tokenizer.convert_tokens_to_ids(token)
        if token_id is None or token_id == self.tokenizer.unk_token_id:
            raise ConfigError(
                f"{self.path}: the tokenizer has no language token {token!r} ({argument} {lang!r}); "
                f"give a code it knows (clir's {sorted(NLLB_CODES)} are mapped to NLLB's)"
            )
        return token


@dataclass(frozen=True)
class MTModels(Section):
    """Local MT models of one document language (``translation.models.<lang>`` of an experiment).

    Attributes:
        to_en: Directory of a document-language -> English model: translates the documents
            (the reranker's D-hat_en view and the ``dt`` first stages); ``None``: the DT table.
        from_en: Directory of an English -> document-language model: translates the queries
            (the Q-hat view and the ``qt`` first stages); ``None``: the QT table.
        batch_size: Texts per generation batch.
        max_length: Longest input and output of the model, in tokens (a longer text is
            translated in pieces).
        num_beams: Beam size (1: greedy).
        device: torch device.
    """

    to_en: str | None = None
    from_en: str | None = None
    batch_size: PositiveInt = 16
    max_length: PositiveInt = 256
    num_beams: PositiveInt = 1
    device: str = "cpu"

    def check(self, where: Where) -> None:
        for key in ("to_en", "from_en"):  # when the config is loaded, not after the first steps
            path = getattr(self, key)
            if path is not None and not Path(path).is_dir():
                raise where.error(key, path, "a local model directory (save_pretrained's)")
        if (problem := device_problem(self.device)) is not None:
            raise where.error("device", self.device, problem)

    def files_digest(self) -> str:
        """SHA-256 over the path, size and modification time of every file of the models: a
        model replaced at the same path gives another digest (the steps' keys hold it)."""
        digest = hashlib.sha256()
        for path in (self.to_en, self.from_en):
            files = sorted(p for p in Path(path).rglob("*") if p.is_file()) if path else []
            for file in files:
                stat = file.stat()
                digest.update(f"{file}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
        return digest.hexdigest()


class MTTranslation:
    """A document language's machine translation both ways; each distinct text is translated
    once (the documents by every ``dt`` first stage and the rerank data alike).

    Args:
        to_en: Translates document texts into English (``None``: no document MT).
        from_en: Translates English queries into the document language (``None``: no query MT).
    """

    def __init__(self, to_en: Translator | None, from_en: Translator | None) -> None:
        self.to_en = to_en
        self.from_en = from_en
        self._memo: dict[tuple[str, str], str] = {}

    def documents(self, texts: Sequence[str]) -> list[str]:
        """The texts translated into English."""
        return self._translate("to_en", self.to_en, texts)

    def queries(self, texts: Sequence[str]) -> list[str]:
        """The English texts translated into the document language."""
        return self._translate("from_en", self.from_en, texts)

    def _translate(self, side: str, translator: Translator | None, texts: Sequence[str]) -> list[str]:
        if translator is None:
            raise ConfigError(f"no {side} MT model is configured (translation.models.<lang>.{side})")
        new = list(dict.fromkeys(t for t in texts if (side, t) not in self._memo))
        self._memo.update(((side, t), out) for t, out in zip(new, translator.translate(new), strict=True))
        return [self._memo[side, t] for t in texts]


@cache
def mt_translation(models: MTModels, doc_lang: str) -> MTTranslation:
    """The (process-wide, shared) :class:`MTTranslation` of one language's models."""

    def load(path: str | None, source: str, target: str) -> Translator | None:
        if path is None:
            return None
        options = {"batch_size": models.batch_size, "max_length": models.max_length}
        return MarianTranslator(
            path,
            device=models.device,
            num_beams=models.num_beams,
            source_lang=source,
            target_lang=target,
            **options,
        )

    return MTTranslation(load(models.to_en, doc_lang, "en"), load(models.from_en, "en", doc_lang))

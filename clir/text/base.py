"""The analyzer interface: text in, index terms out."""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any


class Analyzer(ABC):
    """Turns text of one language into terms.

    ``tokenize`` splits and lowercases and removes nothing; ``analyze`` is the full pipeline
    used everywhere terms are compared (indexes, translation tables, embeddings, rerankers).
    """

    lang: str

    @abstractmethod
    def tokenize(self, text: str) -> list[str]:
        """Split ``text`` into lowercase word tokens, removing nothing."""

    @abstractmethod
    def normalize(self, token: str) -> str:
        """Lemmatise or stem one lowercase token (identity where the language has neither)."""

    @abstractmethod
    def is_stopword(self, token: str) -> bool:
        """Whether a lowercase token is a stopword of the language."""

    def analyze(self, text: str) -> list[str]:
        """Tokenize, drop stopwords and normalise: the terms clir indexes and compares."""
        terms = []
        for token in self.tokenize(text):
            if self.is_stopword(token):
                continue
            term = self.normalize(token)
            if term and not self.is_stopword(term):
                terms.append(term)
        return terms

    def __call__(self, text: str) -> list[str]:
        return self.analyze(text)

    @abstractmethod
    def to_config(self) -> dict[str, Any]:
        """The JSON-serialisable settings that rebuild this analyzer via ``get_analyzer``."""

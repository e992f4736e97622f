"""The translator family: a base class, a table-backed translator and the registry of names.

Configs name a translator (``"ibm1"``, ``"tsv"``, ``"freedict"``, ``"marian"``); build it with
:func:`get_translator`. Every translator maps texts to texts (``translate``) and derives query
and document translation from that.
"""

from __future__ import annotations

import dataclasses
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from clir.errors import ConfigError
from clir.progress import progress_bar
from clir.types import Document, Query

TRANSLATORS: dict[str, type[Translator]] = {}
"""Registered translators by config name."""

_T = TypeVar("_T", bound="type[Translator]")


def register_translator(name: str) -> Callable[[_T], _T]:
    """Class decorator adding a Translator subclass to :data:`TRANSLATORS` under ``name``."""

    def decorate(cls: _T) -> _T:
        TRANSLATORS[name] = cls
        cls.name = name
        return cls

    return decorate


def get_translator(name: str, **params: Any) -> Translator:
    """Build the translator a config names.

    Args:
        name: A key of :data:`TRANSLATORS`.
        **params: Constructor arguments of that translator.

    Raises:
        ConfigError: For an unknown name (listing the known ones).
    """
    import clir.translation  # noqa: F401  (importing the package registers every translator)

    if name not in TRANSLATORS:
        raise ConfigError(f"unknown translator {name!r}; known: {sorted(TRANSLATORS)}")
    return TRANSLATORS[name](**params)


class Translator(ABC):
    """Translates texts from ``source_lang`` to ``target_lang``.

    Attributes:
        name: The registry name of the class.
        source_lang: Language code of the input.
        target_lang: Language code of the output.
    """

    name: str = ""
    source_lang: str
    target_lang: str

    @abstractmethod
    def translate(self, texts: Sequence[str]) -> list[str]:
        """Translate each text; one output string per input, in order."""

    def translate_queries(self, queries: Sequence[Query]) -> list[Query]:
        """New Query records with ``text`` (and a non-empty ``description``) translated."""
        texts = self.translate([q.text for q in queries])
        with_description = [i for i, q in enumerate(queries) if q.description]
        descriptions = dict(
            zip(
                with_description,
                self.translate([queries[i].description for i in with_description]),
                strict=True,
            )
        )
        return [
            Query(q.qid, text, descriptions.get(i, ""))
            for i, (q, text) in enumerate(zip(queries, texts, strict=True))
        ]

    def translate_documents(self, documents: Sequence[Document], field: str = "text_en") -> list[Document]:
        """New Document records whose ``fields[field]`` holds the translation of ``text``."""
        translations = self.translate([doc.text for doc in documents])
        return [
            Document(doc.docno, doc.text, {**doc.fields, field: translation})
            for doc, translation in zip(documents, translations, strict=True)
        ]


class TableTranslator(Translator):
    """Word-by-word translation with a TranslationTable: analyze, then top-k per term.

    The output of ``translate`` is the space-joined *analyzed* target terms (index them as
    they are); unknown terms pass through unchanged.

    Args:
        table: p(target | source) over analyzed vocabularies.
        analyzer: Source-language analyzer (``.analyze(text)``), a language code for
            ``clir.text.get_analyzer``, or ``None`` for ``get_analyzer(table.source_lang)``.
        k: Translations per term (1: the most probable one).
        progress: Show a progress bar when translating many texts.
    """

    def __init__(self, table: Any, analyzer: Any = None, k: int = 1, progress: bool = False) -> None:
        if k < 1:
            raise ConfigError(f"k must be >= 1, got {k!r}")
        self.table = table
        self.analyzer = resolve_analyzer(analyzer, table.source_lang)
        self.k = k
        self.progress = progress
        self.source_lang = table.source_lang
        self.target_lang = table.target_lang

    def translate(self, texts: Sequence[str]) -> list[str]:
        from clir.translation.document import translate_tokens_top1
        from clir.translation.query import translate_query_qt

        out = []
        for text in progress_bar(texts, desc="translate", enabled=self.progress):
            tokens = self.analyzer.analyze(text)
            terms = (
                translate_tokens_top1(tokens, self.table)
                if self.k == 1
                else (translate_query_qt(tokens, self.table, self.k))
            )
            out.append(" ".join(terms))
        return out


def resolve_analyzer(analyzer: Any, lang: str) -> Any:
    """An analyzer object from an analyzer, a language code or ``None`` (= ``lang``)."""
    if analyzer is None or isinstance(analyzer, str):
        from clir.text import get_analyzer

        return get_analyzer(analyzer or lang)
    if not callable(getattr(analyzer, "analyze", None)):
        raise ConfigError(
            f"analyzer must have an analyze(text) method or be a language code, got {analyzer!r}"
        )
    return analyzer


def analyzer_config(analyzer: Any) -> dict[str, Any] | None:
    """A JSON-serialisable description of a ``clir.text`` analyzer (its ``config`` if it has one)."""
    if analyzer is None:
        return None
    config = getattr(analyzer, "config", None)
    if callable(config):
        config = config()
    if dataclasses.is_dataclass(config) and not isinstance(config, type):
        config = dataclasses.asdict(config)
    if isinstance(config, dict):
        return json.loads(json.dumps(config, default=list))
    return {"lang": getattr(analyzer, "lang", None), "class": type(analyzer).__name__}

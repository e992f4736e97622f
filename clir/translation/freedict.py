"""FreeDict dictionaries in the dictd format (``.index`` + ``.dict.dz``), read as lexicons.

Debian ships them as ``dict-freedict-<pair>`` packages under ``/usr/share/dictd/``. An index
line is ``headword<TAB>offset<TAB>length`` with offset and length written in base 64 (digits
``A-Z a-z 0-9 + /``, most significant first); the ``.dict.dz`` file is gzip-compatible and an
entry is ``data[offset:offset + length]``: a first line ``headword /IPA/ <pos> ...``, then
senses, numbered (``1.`` on a line of its own) or not, each a line of comma- or
semicolon-separated translations; continuation lines start with ``;``; indented lines
(``See also: {...}``, ``Plural of {...}``) are notes. Entries whose headword starts with
``00database`` are metadata.
"""

from __future__ import annotations

import gzip
import re
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from clir.errors import DataNotFoundError, FormatError
from clir.formats._lines import numbered_lines
from clir.translation.base import TableTranslator, register_translator, resolve_analyzer
from clir.translation.lexicon import Lexicon

DICTD_DIRS = ("/usr/share/dictd",)
"""Where Debian's dictd packages install dictionaries."""

_ALPHABET = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_DIGIT = {char: value for value, char in enumerate(_ALPHABET)}
_ISO3_TO_CLIR = {"eng": "en", "swh": "sw", "swa": "sw", "tgl": "tl", "nya": "ny", "som": "so"}
_SENSE_NUMBER = re.compile(r"^\d+\.$")
_PARENTHESES = re.compile(r"\([^()]*\)")
_PLACEHOLDERS = frozenset({"sth", "sb", "sth.", "sb.", "sth's", "sb's", "one's", "oneself"})


def decode_base64_number(text: str) -> int:
    """Decode a dictd base-64 number (``"B"`` = 1, ``"BA"`` = 64).

    Raises:
        ValueError: On an empty string or a character outside ``A-Z a-z 0-9 + /``.
    """
    if not text:
        raise ValueError("empty base-64 number")
    value = 0
    for char in text:
        digit = _DIGIT.get(char)
        if digit is None:
            raise ValueError(f"{char!r} is not a base-64 digit in {text!r}")
        value = value * 64 + digit
    return value


def parse_entry(text: str) -> tuple[str, list[str]]:
    """Split one dictd entry into its headword and its translations.

    Parenthesised glosses (``(sg.)``, ``(of a tree)``) are removed, nested ones too; notes
    (indented lines) and sense numbers are skipped; each sense line is split on ``,`` and ``;``;
    the placeholders ``sth``, ``sb``, ``one's``, ``oneself`` are dropped from phrases.

    Args:
        text: The entry text, first line ``headword /IPA/ <pos>``.

    Returns:
        ``(headword, translations)``, translations in order without duplicates (may be phrases).
    """
    lines = text.split("\n")
    head = lines[0]
    headword = head.split(" /", 1)[0].split(" <", 1)[0].strip()
    translations: list[str] = []
    for line in lines[1:]:
        if not line.strip() or line[:1].isspace() or _SENSE_NUMBER.match(line.strip()):
            continue
        while _PARENTHESES.search(line):
            line = _PARENTHESES.sub(" ", line)
        for item in re.split(r"[;,]", line):
            item = " ".join(word for word in item.split() if word not in _PLACEHOLDERS)
            if item and item not in translations:
                translations.append(item)
    return headword, translations


def read_freedict(index_path: str | Path, dict_path: str | Path | None = None) -> Lexicon:
    """Read a dictd dictionary as a lexicon (each translation of a headword with weight 1).

    A headword may have several entries (homographs: two index lines ``bank``, the river's and
    the money's); their translations are pooled, and one that both list is entered once, so it
    weighs as much as any other translation of the headword, not twice as much.

    Args:
        index_path: The ``.index`` file, e.g. ``/usr/share/dictd/freedict-swh-eng.index``.
        dict_path: The ``.dict.dz`` (or plain ``.dict``) file; by default beside the index.

    Returns:
        The lexicon; languages from a ``freedict-<src>-<tgt>`` file name (ISO 639-3 codes mapped
        to clir's: ``swh`` -> ``sw``), else ``"src"``/``"tgt"``; ``meta["headwords"]`` counts
        distinct headwords (homographs once).

    Raises:
        DataNotFoundError: If a file is missing.
        FormatError: On a malformed index line or an entry outside the data (naming file and line),
            or a damaged or truncated ``.dict.dz`` (naming it).
    """
    index_path = Path(index_path)
    if dict_path is None:
        stem = index_path.name.removesuffix(".index")
        candidates = [index_path.with_name(stem + ".dict.dz"), index_path.with_name(stem + ".dict")]
        dict_path = next((c for c in candidates if c.is_file()), candidates[0])
    dict_path = Path(dict_path)
    if not dict_path.is_file():
        raise DataNotFoundError(f"{dict_path}: no such dictd data file (for index {index_path})")
    opener = gzip.open if dict_path.suffix == ".dz" else open
    try:
        with opener(dict_path, "rb") as handle:
            data = handle.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as exc:  # truncated or damaged
        raise FormatError(dict_path, None, f"not a complete dictd data file ({exc})") from None
    entries: list[tuple[str, str, float]] = []
    seen: set[tuple[str, str]] = set()  # (headword, translation) pairs already entered
    headwords: set[str] = set()
    for number, line in numbered_lines(index_path):
        parts = line.split("\t")
        if len(parts) != 3:
            raise FormatError(index_path, number, f"expected headword<TAB>offset<TAB>length, got {line!r}")
        headword, offset_text, length_text = parts
        if headword.startswith("00database") or headword.startswith("00-database"):
            continue
        try:
            offset, length = decode_base64_number(offset_text), decode_base64_number(length_text)
        except ValueError as exc:
            raise FormatError(index_path, number, str(exc)) from None
        if offset + length > len(data):
            raise FormatError(
                index_path,
                number,
                f"entry {headword!r} at {offset}+{length} lies beyond the data ({len(data)} bytes)",
            )
        try:
            text = data[offset : offset + length].decode("utf-8")
        except UnicodeDecodeError:
            raise FormatError(index_path, number, f"entry {headword!r} is not valid UTF-8") from None
        _, translations = parse_entry(text)
        headwords.add(headword)
        for translation in translations:
            if (headword, translation) not in seen:  # a homograph's repeat: counted once
                seen.add((headword, translation))
                entries.append((headword, translation, 1.0))
    source_lang, target_lang = _langs_of(index_path.name)
    return Lexicon(
        entries, source_lang, target_lang, name=str(index_path), meta={"headwords": len(headwords)}
    )


def find_freedict(pair: str, dirs: Sequence[str | Path] = DICTD_DIRS) -> tuple[Path, Path]:
    """Locate an installed FreeDict dictionary.

    Args:
        pair: FreeDict language pair, e.g. ``"swh-eng"`` or ``"eng-swh"``.
        dirs: Directories to look in.

    Returns:
        ``(index_path, dict_path)``.

    Raises:
        DataNotFoundError: If it is not installed; the message names the Debian package.
    """
    for directory in dirs:
        index = Path(directory) / f"freedict-{pair}.index"
        data = Path(directory) / f"freedict-{pair}.dict.dz"
        if index.is_file() and data.is_file():
            return index, data
    raise DataNotFoundError(
        f"FreeDict dictionary {pair!r} not found in {', '.join(str(d) for d in dirs)}; "
        f"install it with: apt-get install dict-freedict-{pair}"
    )


def load_freedict(pair: str, dirs: Sequence[str | Path] = DICTD_DIRS) -> Lexicon:
    """Find and read an installed FreeDict dictionary (see :func:`find_freedict`)."""
    return read_freedict(*find_freedict(pair, dirs))


def _langs_of(name: str) -> tuple[str, str]:
    match = re.match(r"freedict-([a-z]{2,3})-([a-z]{2,3})\.", name)
    if not match:
        return "src", "tgt"
    return tuple(_ISO3_TO_CLIR.get(code, code) for code in match.groups())  # type: ignore[return-value]


@register_translator("freedict")
class FreeDictTranslator(TableTranslator):
    """Word-by-word translation with an installed FreeDict dictionary.

    Args:
        pair: FreeDict pair, e.g. ``"swh-eng"`` (Swahili -> English).
        analyzer: Source analyzer or language code (``None``: the pair's source language).
        target_analyzer: Target analyzer or language code (``None``: the pair's target language).
        k: Translations per term.
        multiword: How target phrases are handled (see :meth:`Lexicon.to_table`).
        dirs: Directories to look in.

    Raises:
        DataNotFoundError: If the dictionary is not installed (naming the Debian package).
    """

    def __init__(
        self,
        pair: str,
        analyzer: Any = None,
        target_analyzer: Any = None,
        k: int = 1,
        multiword: str = "split",
        dirs: Sequence[str | Path] = DICTD_DIRS,
    ) -> None:
        lexicon = load_freedict(pair, dirs)
        analyzer = resolve_analyzer(analyzer, lexicon.source_lang)
        table = lexicon.to_table(analyzer, resolve_analyzer(target_analyzer, lexicon.target_lang), multiword)
        super().__init__(table, analyzer, k)

"""The one rule for identifiers (qid, docno, pair id, run tag) that every reader and writer applies.

An identifier is a non-empty string without whitespace or control characters: no character of
Unicode category Cc (control: tab, newline, NUL, ...), Cf (format: zero-width space, BOM, soft
hyphen, ...), Zs / Zl / Zp (separators), none for which ``str.isspace`` holds, and no lone
surrogate (Cs, which UTF-8 cannot encode). Such a character would split a TREC line into other
fields, inject a line, or make two identifiers that print alike differ.
"""

from __future__ import annotations

import re
import unicodedata
from pathlib import Path

from clir.errors import ConfigError, FormatError

_FORBIDDEN = {
    "Cc": "a control character",
    "Cf": "an invisible format character",
    "Cs": "a lone surrogate",
    "Zl": "a line separator",
    "Zp": "a paragraph separator",
    "Zs": "a space",
}


def identifier_problem(value: object) -> str | None:
    """What makes ``value`` unfit as an identifier, or ``None`` when it is fit."""
    if not isinstance(value, str):
        return f"must be a string, got {type(value).__name__}"
    if not value:
        return "is empty"
    if value.isprintable() and " " not in value:  # fast path: no Cc, Cf, Cs, Z* character
        return None
    for position, char in enumerate(value):
        category = unicodedata.category(char)
        if category in _FORBIDDEN or char.isspace():
            kind = _FORBIDDEN.get(category, "whitespace")
            name = unicodedata.name(char, f"U+{ord(char):04X}")
            return f"holds {kind} ({name}) at position {position}"
    return None


_SURROGATE = re.compile("[\ud800-\udfff]")


def surrogate_problem(value: str) -> str | None:
    """What makes a text ``value`` unwritable as UTF-8 (a lone surrogate, which a JSON
    ``\\ud800`` escape decodes to), or ``None``."""
    match = _SURROGATE.search(value)
    if match is None:
        return None
    return (
        f"holds {_FORBIDDEN['Cs']} (U+{ord(match.group()):04X}) at position {match.start()}, "
        "which UTF-8 cannot encode"
    )


def check_identifier(value: str, what: str, path: str | Path, line: int | None = None) -> str:
    """Return ``value`` if it is a valid identifier (see the module docstring), else raise.

    Args:
        value: The identifier.
        what: What it identifies, for the message (``"qid"``, ``"docno"``, ``"pair id"``).
        path: The file being read (with ``line``) or written (without).
        line: The 1-based line being read; ``None`` when writing.

    Returns:
        ``value``.

    Raises:
        FormatError: When reading (``line`` given), naming ``path:line`` and ``repr(value)``.
        ConfigError: When writing (``line`` is ``None``), naming the file left unwritten.
    """
    problem = identifier_problem(value)
    if problem is None:
        return value
    message = (
        f"{what} {value!r} {problem}; expected a non-empty identifier without whitespace or "
        "control characters"
    )
    if line is not None:
        raise FormatError(path, line, message)
    raise ConfigError(f"{path}: not written: {message}")

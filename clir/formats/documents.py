"""Documents as JSON Lines: one object per line with ``docno``, ``text`` and optional string fields."""

from __future__ import annotations

import json
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from clir.errors import ConfigError, FormatError
from clir.formats._lines import numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier, surrogate_problem
from clir.types import Document


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a JSONL file, checking each line.

    Raises:
        FormatError: On invalid JSON, a missing or non-string ``docno``/``text``, an invalid
            docno (see :mod:`clir.formats.identifiers`), a non-string extra field, a key
            written twice in a line's object, a duplicate ``docno``, or a field holding a
            lone surrogate (a JSON ``\\ud800`` escape; UTF-8 cannot write it).
    """
    seen: set[str] = set()
    empty = 0
    for number, line in numbered_lines(path):
        try:
            pairs = _object_pairs(line)  # objects as (key, value) pairs, so that none is lost
        except json.JSONDecodeError as exc:
            raise FormatError(path, number, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        except (ValueError, RecursionError) as exc:  # an integer of > 4300 digits; deep nesting
            raise FormatError(path, number, f"invalid JSON ({type(exc).__name__}: {exc})") from None
        if not line.lstrip().startswith("{"):  # an object decodes to its pairs; anything else is no object
            raise FormatError(path, number, f"expected a JSON object, got {type(json.loads(line)).__name__}")
        obj = unique_keys(path, number)(pairs)  # json.loads keeps the last of a repeated key, silently
        for key in ("docno", "text"):  # a refused value is named as json reads it (objects as dicts)
            if key not in obj:  # had been "must be a string, got None" (BEIR's "_id" copied in)
                raise FormatError(
                    path,
                    number,
                    f"no field {key!r} (fields: {', '.join(sorted(obj))}); a document needs 'docno' "
                    "and 'text' ('clir data import --docno-field --text-field' reads other names)",
                )
            if not isinstance(obj.get(key), str):
                got = json.loads(line).get(key)
                raise FormatError(path, number, f"field {key!r} must be a string, got {got!r}")
        docno = check_identifier(obj.pop("docno"), "docno", path, number)
        text = obj.pop("text")
        if docno in seen:
            raise FormatError(path, number, f"duplicate docno {docno!r}")
        seen.add(docno)
        for key, value in obj.items():
            if not isinstance(value, str):
                got = type(json.loads(line)[key]).__name__
                raise FormatError(path, number, f"field {key!r} must be a string, got {got}")
        if "\\u" in line:  # only a JSON escape makes a lone surrogate, which UTF-8 cannot write
            _check_surrogates(path, number, {"text": text, **obj})
        if not text.strip():
            empty += 1
        yield Document(docno, text, obj)
    if empty:
        warnings.warn(f"{path}: {empty} document(s) with empty text", stacklevel=2)


def _check_surrogates(path: str | Path, number: int, fields: dict[str, str]) -> None:
    """Refuse a field name or value holding a lone surrogate, naming the file, line and field."""
    for key, value in fields.items():
        for what, string in (("field name", key), ("field", value)):
            problem = surrogate_problem(string)
            if problem is not None:
                raise FormatError(path, number, f"{what} {key!r} {problem}")


_object_pairs = json.JSONDecoder(object_pairs_hook=list).decode
"""``json.loads`` with each object read as its list of ``(key, value)`` pairs: as fast, and a
key written twice is kept twice."""


def repeated_key(pairs: list[tuple[str, Any]]) -> str | None:
    """The first key that ``pairs`` hold twice, else ``None``."""
    counts = Counter(key for key, _ in pairs)
    return next((key for key, n in counts.items() if n > 1), None)


def unique_keys(
    path: str | Path, number: int | None = None
) -> Callable[[list[tuple[str, Any]]], dict[str, Any]]:
    """An ``object_pairs_hook`` for :func:`json.loads` that refuses a key written twice in one
    object (json keeps the last, silently), naming ``path`` and line ``number``."""

    def hook(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping = dict(pairs)
        if len(mapping) < len(pairs):
            raise FormatError(path, number, f"key {repeated_key(pairs)!r} is written twice in one object")
        return mapping

    return hook


def read_documents(path: str | Path) -> list[Document]:
    """Read all documents of a JSONL file (see :func:`iter_documents`)."""
    return list(iter_documents(path))


def write_documents(path: str | Path, documents: Iterable[Document]) -> None:
    """Write documents as JSONL (atomically), extra fields after ``docno`` and ``text``.

    Raises:
        ConfigError: On an invalid or duplicate docno (see :mod:`clir.formats.identifiers`), a
            text or extra field that is not a string, or an extra field named ``docno`` or
            ``text`` (it would overwrite the document's own); ``path`` is then left as it was.
    """
    seen: set[str] = set()
    with atomic_write(path) as out:
        for doc in documents:
            docno = check_identifier(doc.docno, "docno", path)
            if docno in seen:
                raise ConfigError(f"{path}: not written: duplicate docno {docno!r}")
            seen.add(docno)
            fields = dict(doc.fields)
            if {"docno", "text"} & set(fields) or not all(
                isinstance(value, str) for value in (*fields, *fields.values(), doc.text)
            ):
                kinds = ", ".join(f"{key!r}: {type(value).__name__}" for key, value in fields.items())
                raise ConfigError(
                    f"{path}: not written: document {docno!r} needs a string text and string extra "
                    f"fields not named 'docno' or 'text'; got text of type {type(doc.text).__name__} "
                    f"and fields {{{kinds}}}"
                )
            out.write(json.dumps({"docno": docno, "text": doc.text, **fields}, ensure_ascii=False) + "\n")

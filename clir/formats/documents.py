"""Documents as JSON Lines: one object per line with ``docno``, ``text`` and optional string fields."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from clir.errors import ConfigError, FormatError
from clir.formats._lines import numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import Document


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a JSONL file, checking each line.

    Raises:
        FormatError: On invalid JSON, a missing or non-string ``docno``/``text``, an invalid
            docno (see :mod:`clir.formats.identifiers`), a non-string extra field, or a
            duplicate ``docno``.
    """
    seen: set[str] = set()
    empty = 0
    for number, line in numbered_lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(path, number, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        except (ValueError, RecursionError) as exc:  # an integer of > 4300 digits; deep nesting
            raise FormatError(path, number, f"invalid JSON ({type(exc).__name__}: {exc})") from None
        if not isinstance(obj, dict):
            raise FormatError(path, number, f"expected a JSON object, got {type(obj).__name__}")
        for key in ("docno", "text"):
            if not isinstance(obj.get(key), str):
                raise FormatError(path, number, f"field {key!r} must be a string, got {obj.get(key)!r}")
        docno = check_identifier(obj.pop("docno"), "docno", path, number)
        text = obj.pop("text")
        if docno in seen:
            raise FormatError(path, number, f"duplicate docno {docno!r}")
        seen.add(docno)
        for key, value in obj.items():
            if not isinstance(value, str):
                raise FormatError(path, number, f"field {key!r} must be a string, got {type(value).__name__}")
        if not text.strip():
            empty += 1
        yield Document(docno, text, obj)
    if empty:
        warnings.warn(f"{path}: {empty} document(s) with empty text", stacklevel=2)


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

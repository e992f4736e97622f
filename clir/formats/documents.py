"""Documents as JSON Lines: one object per line with ``docno``, ``text`` and optional string fields."""

from __future__ import annotations

import json
import warnings
from collections.abc import Iterable, Iterator
from pathlib import Path

from clir.errors import FormatError
from clir.formats._lines import numbered_lines
from clir.formats.atomic import atomic_write
from clir.types import Document


def iter_documents(path: str | Path) -> Iterator[Document]:
    """Yield the documents of a JSONL file, checking each line.

    Raises:
        FormatError: On invalid JSON, a missing or non-string ``docno``/``text``, a non-string
            extra field, or a duplicate ``docno``.
    """
    seen: set[str] = set()
    empty = 0
    for number, line in numbered_lines(path):
        try:
            obj = json.loads(line)
        except json.JSONDecodeError as exc:
            raise FormatError(path, number, f"invalid JSON ({exc.msg} at column {exc.colno})") from None
        if not isinstance(obj, dict):
            raise FormatError(path, number, f"expected a JSON object, got {type(obj).__name__}")
        for key in ("docno", "text"):
            if not isinstance(obj.get(key), str):
                raise FormatError(path, number, f"field {key!r} must be a string, got {obj.get(key)!r}")
        docno = obj.pop("docno")
        text = obj.pop("text")
        if not docno.strip():
            raise FormatError(path, number, "field 'docno' is empty")
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
    """Write documents as JSONL (atomically), extra fields after ``docno`` and ``text``."""
    with atomic_write(path) as out:
        for doc in documents:
            out.write(json.dumps({"docno": doc.docno, "text": doc.text, **doc.fields}, ensure_ascii=False))
            out.write("\n")

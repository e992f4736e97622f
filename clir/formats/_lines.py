"""Line-oriented reading shared by the TREC and TSV readers."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

from clir.errors import DataNotFoundError, FormatError


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for the non-blank lines of a UTF-8 text file.

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: If the file is not valid UTF-8 (naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such file")
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as exc:
                raise FormatError(path, number, f"not valid UTF-8 ({exc.reason})") from None
            if line.strip():
                yield number, line


def fields_of(path: str | Path, number: int, line: str, sep: str | None, count: int, what: str) -> list[str]:
    """Split a line and check it has exactly ``count`` fields."""
    parts = line.split(sep) if sep is not None else line.split()
    if len(parts) != count:
        raise FormatError(path, number, f"expected {count} fields ({what}), found {len(parts)}: {line!r}")
    return parts

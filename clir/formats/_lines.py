"""Line-oriented reading shared by every reader (TREC, TSV and JSONL)."""

from __future__ import annotations

import gzip
import math
import re
import warnings
from collections.abc import Iterator
from pathlib import Path

from clir.errors import DataNotFoundError, FormatError

BOM = "\ufeff"
"""The byte order mark; one at the start of a file is dropped, as if the file had none."""

_TREC_SPACE = re.compile(r"[ \t\v\f\r]+")
"""What separates TREC fields: C's ``isspace`` (trec_eval's parser), not Python's wider set."""

_PYTHON_ONLY_SPACE = re.compile("[\x1c-\x1f\x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000]")
"""The characters ``str.split()`` splits on and C's ``isspace`` does not."""


def numbered_lines(path: str | Path) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line)`` for the non-blank lines of a UTF-8 text file (decompressed
    when its name ends in ``.gz``).

    A UTF-8 byte order mark at the start of the file is dropped, so a file with one reads
    exactly as the same file without.

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: If the path is a directory, the file is not valid UTF-8 (naming the line),
            or a ``.gz`` file is damaged.
        OSError: If a read fails (naming the file, which a failed read does not).
    """
    path = Path(path)
    if path.is_dir():
        raise FormatError(path, None, "is a directory, not a file")
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such file")
    with gzip.open(path, "rb") if path.suffix == ".gz" else path.open("rb") as handle:
        try:
            for number, raw in enumerate(handle, start=1):
                try:
                    line = raw.decode("utf-8").rstrip("\r\n")
                except UnicodeDecodeError as exc:
                    hint = _binary_hint(raw) if number == 1 else ""
                    raise FormatError(path, number, f"not valid UTF-8 ({exc.reason}){hint}") from None
                if number == 1:
                    line = line.removeprefix(BOM)
                if line.strip():
                    yield number, line
        except (gzip.BadGzipFile, EOFError) as exc:
            raise FormatError(path, None, f"not a complete gzip file ({exc})") from None
        except OSError as exc:  # a read that failed (a bad disk's EIO) names no file: this one
            if exc.filename is not None or exc.errno is None:
                raise
            raise OSError(exc.errno, exc.strerror, str(path)) from exc


_MAGIC = (
    (b"\x1f\x8b", "a gzip file: name it *.gz to have it read decompressed"),
    (b"BZh", "a bzip2 file: decompress it first"),
    (b"\xfd7zXZ\x00", "an xz file: decompress it first"),
    (b"\x28\xb5\x2f\xfd", "a zstd file: decompress it first"),
    (b"PK\x03\x04", "a zip archive: extract it first"),
    (b"\xff\xfe", "UTF-16 text: convert it to UTF-8 first (iconv -f UTF-16 -t UTF-8)"),
    (b"\xfe\xff", "UTF-16 text: convert it to UTF-8 first (iconv -f UTF-16 -t UTF-8)"),
)
"""Starts of files that are no UTF-8 text, and what to do about them."""


def _binary_hint(first: bytes) -> str:
    """``"; it starts like ..."`` for a first line of a compressed or UTF-16 file (they had been
    reported as "not valid UTF-8 (invalid start byte)" alone), else ``""``; after a UTF-8 byte
    order mark as without one."""
    first = first.removeprefix(BOM.encode())
    return next((f"; it starts like {what}" for magic, what in _MAGIC if first.startswith(magic)), "")


_SHOWN = 120
"""The characters of a bad line quoted in an error (a JSON array on one line had been quoted
whole: a message of 230 KB)."""


def shown(line: str) -> str:
    """``line`` quoted for an error message, cut to its first characters when long."""
    if len(line) <= _SHOWN:
        return repr(line)
    return f"{line[:_SHOWN]!r}... ({len(line)} characters)"


def fields_of(path: str | Path, number: int, line: str, sep: str | None, count: int, what: str) -> list[str]:
    """Split a line and check it has exactly ``count`` fields.

    Args:
        sep: The separator (``"\\t"`` for TSV), or ``None`` for runs of ASCII whitespace as
            trec_eval splits a TREC line (a no-break space is part of a field, not a separator).
    """
    if sep is not None:
        parts = line.split(sep)
    elif _PYTHON_ONLY_SPACE.search(line) is None:
        parts = line.split()  # the same split, faster
    else:
        parts = _TREC_SPACE.split(line.strip(" \t\v\f\r"))
    if len(parts) != count:
        raise FormatError(path, number, wrong_fields(line, sep, parts, f"{count} fields ({what})"))
    return parts


def wrong_fields(line: str, sep: str | None, parts: list[str], expected: str) -> str:
    """The message for a line split into the wrong number of ``parts``: what was ``expected``,
    the count found, the line quoted, and for a TSV line without a tab that its fields are
    separated by spaces."""
    problem = f"expected {expected}, found {len(parts)}: {shown(line)}"
    if sep == "\t" and len(parts) == 1 and len(line.split()) > 1:  # a TREC line, or spaces for tabs
        problem += f" (no tab: its {len(line.split())} fields are separated by spaces)"
    return problem


INT32 = (-(2**31), 2**31 - 1)
"""The range of an integer field: a C ``int``, as pytrec_eval (and so ir_measures) stores it."""

GRADES = (-(2**15), 2**15 - 1)
"""The range of a relevance grade: pytrec_eval allocates memory per grade level (a grade of 2**31
took 17 GB and 43 s), and no qrels need more levels than this."""


_HEADER_IDS = frozenset({"id", "_id", "docno", "doc_id", "docid", "qid", "query_id", "query-id", "queryid"})
_HEADER_TEXTS = frozenset({"text", "body", "contents", "content", "query", "title", "description"})


def warn_if_header(path: str | Path, number: int, fields: list[str]) -> None:
    """Warn when the first line of a TSV file of documents or topics looks like a header
    (``docno<TAB>text``): it is read as data, which a header is not."""
    if fields[0].strip().lower() in _HEADER_IDS and fields[1].strip().lower() in _HEADER_TEXTS:
        warnings.warn(
            f"{path}:{number}: {fields[0]!r} {fields[1]!r} looks like a header and is read as an "
            "entry; remove the line if it is a header",
            stacklevel=3,
        )


def integer_of(path: str | Path, number: int, text: str, what: str, bounds: tuple[int, int] = INT32) -> int:
    """Parse an ASCII integer within ``bounds`` (``int`` alone would also read ``1_0`` and
    non-ASCII digits, which C's ``atol`` in trec_eval reads otherwise, and any size).

    Raises:
        FormatError: Naming ``path:number``, ``what`` and the text.
    """
    try:
        value = int(text) if text.isascii() and "_" not in text else None
    except ValueError:
        value = None
    if value is None:
        raise FormatError(path, number, f"{what} must be an integer, got {text!r}")
    if not bounds[0] <= value <= bounds[1]:
        raise FormatError(path, number, f"{what} {text} is out of range: expected {bounds[0]} to {bounds[1]}")
    return value


def decimal_of(path: str | Path, number: int, text: str, what: str) -> float:
    """Parse a finite ASCII decimal number such as ``-1.5e3`` (``float`` alone would also read
    ``1_0``, ``inf``, ``nan`` and non-ASCII digits, which C's ``atof`` in trec_eval reads
    otherwise).

    Raises:
        FormatError: Naming ``path:number``, ``what`` and the text, also for a value that
            overflows to infinity.
    """
    try:
        value = float(text) if text.isascii() and "_" not in text else math.nan
    except ValueError:
        value = math.nan
    if not math.isfinite(value):
        raise FormatError(path, number, f"{what} must be a finite decimal number, got {text!r}")
    return value

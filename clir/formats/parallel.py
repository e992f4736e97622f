"""Parallel text as TSV: ``pair_id<TAB>english<TAB>other``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clir.formats._lines import fields_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.types import ParallelPair


def read_parallel(path: str | Path) -> list[ParallelPair]:
    """Read aligned pairs from a 3-column TSV file.

    Raises:
        FormatError: On a line without exactly three tab-separated fields.
    """
    return [
        ParallelPair(*fields_of(path, number, line, "\t", 3, "pair_id, english, other"))
        for number, line in numbered_lines(path)
    ]


def write_parallel(path: str | Path, pairs: Iterable[ParallelPair]) -> None:
    """Write aligned pairs as 3-column TSV (atomically)."""
    with atomic_write(path) as out:
        for pair in pairs:
            out.write("\t".join(" ".join(cell.split()) for cell in pair) + "\n")

"""Parallel text as TSV: ``pair_id<TAB>english<TAB>other``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clir.formats._lines import fields_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import ParallelPair


def read_parallel(path: str | Path) -> list[ParallelPair]:
    """Read aligned pairs from a 3-column TSV file.

    Raises:
        FormatError: On a line without exactly three tab-separated fields or with an invalid pair
            id (see :mod:`clir.formats.identifiers`).
    """
    pairs = []
    for number, line in numbered_lines(path):
        pair_id, source, target = fields_of(path, number, line, "\t", 3, "pair_id, english, other")
        pairs.append(ParallelPair(check_identifier(pair_id, "pair id", path, number), source, target))
    return pairs


def write_parallel(path: str | Path, pairs: Iterable[ParallelPair]) -> None:
    """Write aligned pairs as 3-column TSV (atomically); each run of whitespace inside a text (tabs
    and line breaks included) becomes one space, and surrounding whitespace is dropped.

    Raises:
        ConfigError: On an invalid pair id (see :mod:`clir.formats.identifiers`); ``path`` is
            then left as it was.
    """
    with atomic_write(path) as out:
        for pair_id, source, target in pairs:
            check_identifier(pair_id, "pair id", path)
            out.write("\t".join([pair_id, " ".join(source.split()), " ".join(target.split())]) + "\n")

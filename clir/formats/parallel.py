"""Parallel text as TSV: ``pair_id<TAB>english<TAB>other``."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from clir.errors import ConfigError, FormatError
from clir.formats._lines import fields_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import ParallelPair


def read_parallel(path: str | Path) -> list[ParallelPair]:
    """Read aligned pairs from a 3-column TSV file.

    Raises:
        FormatError: On a line without exactly three tab-separated fields, with an invalid pair
            id (see :mod:`clir.formats.identifiers`) or with the pair id of an earlier line (the
            pair would count twice in the tables, and a pseudo collection refuses it).
    """
    pairs = []
    lines: dict[str, int] = {}
    for number, line in numbered_lines(path):
        pair_id, source, target = fields_of(path, number, line, "\t", 3, "pair_id, english, other")
        check_identifier(pair_id, "pair id", path, number)
        if (first := lines.setdefault(pair_id, number)) != number:
            raise FormatError(
                path, number, f"pair id {pair_id!r} is that of line {first}: pair ids must be unique"
            )
        pairs.append(ParallelPair(pair_id, source, target))
    return pairs


def write_parallel(path: str | Path, pairs: Iterable[ParallelPair]) -> None:
    """Write aligned pairs as 3-column TSV (atomically); each run of whitespace inside a text (tabs
    and line breaks included) becomes one space, and surrounding whitespace is dropped.

    Raises:
        ConfigError: On an invalid pair id (see :mod:`clir.formats.identifiers`) or one given
            twice (:func:`read_parallel` refuses it); ``path`` is then left as it was.
    """
    seen: set[str] = set()
    with atomic_write(path) as out:
        for pair_id, source, target in pairs:
            check_identifier(pair_id, "pair id", path)
            if pair_id in seen:
                raise ConfigError(f"{path}: not written: pair id {pair_id!r} is given twice")
            seen.add(pair_id)
            out.write("\t".join([pair_id, " ".join(source.split()), " ".join(target.split())]) + "\n")

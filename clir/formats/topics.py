"""Topics as TSV (``qid<TAB>text[<TAB>description]``) and as TREC topic XML."""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path
from xml.sax.saxutils import escape, quoteattr

from clir.errors import ConfigError, FormatError
from clir.formats._lines import numbered_lines, warn_if_header, wrong_fields
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import Query


def read_topics(path: str | Path) -> list[Query]:
    """Read a topics TSV file with 2 columns (qid, text) or 3 (qid, text, description).

    Raises:
        FormatError: On a wrong number of columns, an invalid qid (see
            :mod:`clir.formats.identifiers`; surrounding spaces are not trimmed), an empty
            text, or a duplicate qid.
    """
    queries: list[Query] = []
    seen: set[str] = set()
    for i, (number, line) in enumerate(numbered_lines(path)):
        parts = line.split("\t")
        if len(parts) not in (2, 3):
            expected = "2 or 3 tab-separated fields (qid, text[, description])"
            raise FormatError(path, number, wrong_fields(line, "\t", parts, expected))
        if i == 0:
            warn_if_header(path, number, parts)
        qid, text = check_identifier(parts[0], "qid", path, number), parts[1].strip()
        if not text:
            raise FormatError(path, number, f"empty query text for qid {qid!r}")
        if qid in seen:
            raise FormatError(path, number, f"duplicate qid {qid!r}")
        seen.add(qid)
        queries.append(Query(qid, text, parts[2].strip() if len(parts) == 3 else ""))
    return queries


def write_topics(path: str | Path, queries: Iterable[Query]) -> None:
    """Write topics as 3-column TSV (atomically); each run of whitespace inside a text (tabs and
    line breaks included) becomes one space, and surrounding whitespace is dropped.

    Raises:
        ConfigError: Before the file is replaced, on an invalid qid (see
            :mod:`clir.formats.identifiers`), a duplicate qid, or a query text that is empty or
            all whitespace.
    """
    rows: dict[str, str] = {}
    for query in queries:
        if check_identifier(query.qid, "qid", path) in rows:
            raise ConfigError(f"{path}: not written: duplicate qid {query.qid!r}")
        text, description = (" ".join(cell.split()) for cell in (query.text, query.description))
        if not text:
            raise ConfigError(f"{path}: not written: query {query.qid!r} has an empty text {query.text!r}")
        rows[query.qid] = f"{query.qid}\t{text}\t{description}\n"
    with atomic_write(path) as out:
        out.writelines(rows.values())


_NOT_XML = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")
"""Characters that XML 1.0 documents cannot hold, even escaped."""


def write_topics_xml(path: str | Path, queries: Iterable[Query]) -> None:
    """Write topics in TREC topic XML (``<topics><topic number=...><title/><description/>``).

    Raises:
        ConfigError: Before the file is replaced, on an invalid qid (see
            :mod:`clir.formats.identifiers`) or a duplicate qid, as :func:`write_topics`, or a
            text holding a character XML 1.0 cannot hold (a control character such as U+0001).
    """
    queries = list(queries)
    seen: set[str] = set()
    for query in queries:
        if check_identifier(query.qid, "qid", path) in seen:
            raise ConfigError(f"{path}: not written: duplicate qid {query.qid!r}")
        seen.add(query.qid)
        if found := _NOT_XML.search(query.text + query.description):  # the file had not parsed
            raise ConfigError(
                f"{path}: not written: query {query.qid!r} holds U+{ord(found.group()):04X}, a control "
                "character that XML 1.0 cannot hold"
            )
    with atomic_write(path) as out:
        out.write('<?xml version="1.0" encoding="UTF-8"?>\n<topics>\n')
        for query in queries:
            out.write(
                f"  <topic number={quoteattr(query.qid)}>\n"
                f"    <title>{escape(query.text)}</title>\n"
                f"    <description>{escape(query.description)}</description>\n"
                "  </topic>\n"
            )
        out.write("</topics>\n")

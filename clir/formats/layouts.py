"""Readers of other toolkits' layouts, for importing a collection (``clir data import``).

Documents: JSON Lines with any field names (BEIR's ``{"_id", "title", "text"}``, Pyserini's
``{"id", "contents"}``, ...) or ``docno<TAB>text`` TSV. Topics: JSON Lines with any field
names, TREC topics (classic SGML ``<top><num><title><desc>``, TREC / CLEF XML
``<topic number=...><title>``) or clir's ``qid<TAB>text[<TAB>description]`` TSV. Qrels: TREC
(``qid iter docno relevance``) or 3-column TSV (``qid docno relevance``, BEIR's header allowed).

Every reader names the file and line of a bad line, and the option that picks a field when a
field is missing. ``.gz`` files are read decompressed.
"""

from __future__ import annotations

import html
import json
import re
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from clir.errors import ConfigError, FormatError
from clir.formats._lines import GRADES, fields_of, integer_of, numbered_lines, warn_if_header
from clir.formats.documents import unique_keys
from clir.formats.identifiers import check_identifier, surrogate_problem
from clir.formats.qrels import read_qrels
from clir.formats.topics import read_topics
from clir.types import Document, Qrels, Query

FORMATS = ("jsonl", "tsv", "trec")
"""File layouts: ``trec`` is TREC topic SGML / XML for topics and TREC qrels for qrels."""

TOPIC_FIELDS: dict[str, tuple[str, ...]] = {
    "jsonl": ("qid_field", "query_field", "description_field"),
    "trec": ("query_field", "description_field"),
    "tsv": (),
}
"""The field settings of :func:`read_topics_as` each topics layout reads: TSV is read by column
(qid, text, description), a TREC topic's qid is its ``number`` attribute or ``<num>``."""


_JSON_ARRAY = re.compile(r"\[\s*(\{|\]|$)")
_TREC_DOC = re.compile(r"<doc[\s>]", re.IGNORECASE)


def sniff_format(path: str | Path, kind: str) -> str:
    """The layout of a documents, topics or qrels file, from its first non-blank line.

    Documents and topics starting with ``{`` are JSON Lines, topics starting with ``<`` TREC
    topics, qrels of four whitespace-separated fields TREC qrels; anything else is TSV.

    Args:
        path: The file.
        kind: ``"documents"``, ``"topics"`` or ``"qrels"``.

    Raises:
        FormatError: For documents or topics in one JSON array (not JSON Lines), or for TREC
            ``<DOC>`` documents.
    """
    line = next((line for _, line in numbered_lines(path)), "").lstrip()
    if kind != "qrels" and _JSON_ARRAY.match(line):  # had been read as TSV: "expected 2 fields"
        raise FormatError(
            path,
            None,
            "is a JSON array, not JSON Lines: write one object per line (e.g. jq -c '.[]' FILE)",
        )
    if kind == "documents" and _TREC_DOC.match(line):
        raise FormatError(
            path,
            None,
            "holds TREC <DOC> documents, which are not read: convert them to JSON Lines "
            '({"docno": ..., "text": ...}) or docno<TAB>text',
        )
    if kind == "qrels":
        return "trec" if len(line.split()) == 4 else "tsv"
    if line.startswith("{"):
        return "jsonl"
    return "trec" if kind == "topics" and line.startswith("<") else "tsv"


def _records(path: str | Path) -> Iterator[tuple[int, dict[str, Any]]]:
    for number, line in numbered_lines(path):
        try:
            obj = json.loads(line, object_pairs_hook=unique_keys(path, number))
        except FormatError:
            raise
        except (ValueError, RecursionError) as exc:
            raise FormatError(path, number, f"invalid JSON ({exc})") from None
        if not isinstance(obj, dict):
            raise FormatError(path, number, f"expected a JSON object, got {type(obj).__name__}")
        yield number, obj


def _field(path: str | Path, number: int, obj: dict[str, Any], name: str, option: str, *, text: bool) -> str:
    """A field of a JSON record: a string (or, for an identifier, an integer), else an error
    naming the record's fields and the option that names the field."""
    if name not in obj:
        raise FormatError(
            path,
            number,
            f"no field {name!r} (fields: {', '.join(sorted(obj))}); name the field with {option}",
        )
    value = obj[name]
    if isinstance(value, str) and text and (problem := surrogate_problem(value)) is not None:
        raise FormatError(path, number, f"field {name!r} ({option}) {problem}")
    if isinstance(value, str) or (not text and isinstance(value, int) and not isinstance(value, bool)):
        return str(value)
    raise FormatError(path, number, f"field {name!r} ({option}) must be a string, got {value!r}")


def iter_documents_as(
    path: str | Path,
    layout: str = "jsonl",
    *,
    docno_field: str = "docno",
    text_fields: Sequence[str] = ("text",),
) -> Iterator[Document]:
    """Yield the documents of a JSONL or TSV file (TSV: ``docno<TAB>text``).

    Args:
        path: The file.
        layout: ``"jsonl"`` or ``"tsv"``.
        docno_field: The JSON field of the document id (``--docno-field``).
        text_fields: JSON fields joined (with a space, empty ones skipped) into the text, e.g.
            ``("title", "text")`` (``--text-field``).

    Raises:
        FormatError: On a bad line, a missing field, an invalid or duplicate docno.
    """
    seen: set[str] = set()
    for number, docno, text in _document_rows(path, layout, docno_field, text_fields):
        check_identifier(docno, "docno", path, number)
        if docno in seen:
            raise FormatError(path, number, f"duplicate docno {docno!r}")
        seen.add(docno)
        yield Document(docno, text)


def _document_rows(
    path: str | Path, layout: str, docno_field: str, text_fields: Sequence[str]
) -> Iterator[tuple[int, str, str]]:
    if layout == "tsv":
        for i, (number, line) in enumerate(numbered_lines(path)):
            docno, text = fields_of(path, number, line, "\t", 2, "docno, text")
            if i == 0:
                warn_if_header(path, number, [docno, text])
            yield number, docno, text
    elif layout == "jsonl":
        for number, obj in _records(path):
            docno = _field(path, number, obj, docno_field, "--docno-field", text=False)
            parts = [_field(path, number, obj, name, "--text-field", text=True) for name in text_fields]
            yield number, docno, " ".join(part for part in parts if part.strip())
    else:
        raise ConfigError(f"documents layout must be one of ['jsonl', 'tsv'], got {layout!r}")


def read_topics_as(
    path: str | Path,
    layout: str = "tsv",
    *,
    qid_field: str | None = None,
    query_field: str | None = None,
    description_field: str | None = None,
) -> list[Query]:
    """Read topics in any of the supported layouts (see the module docstring).

    Args:
        path: The file.
        layout: ``"tsv"``, ``"jsonl"`` or ``"trec"``.
        qid_field: JSON field of the qid (default ``qid``); in TREC topics the qid is the
            ``number`` attribute or the ``<num>`` element.
        query_field: The searched text: a JSON field (default ``text``) or a TREC element
            (default ``title``; e.g. ``EN-title`` in CLEF topics).
        description_field: The long form: a JSON field (default ``description``, optional) or
            a TREC element (default ``desc`` or ``description``).

    Raises:
        FormatError: On a bad line or topic, a missing field, an invalid or duplicate qid, an
            empty query text.
    """
    if layout == "tsv":
        return read_topics(path)
    if layout == "jsonl":
        rows = _jsonl_topics(
            path, qid_field or "qid", query_field or "text", description_field or "description"
        )
    elif layout == "trec":
        rows = _trec_topics(path, query_field or "title", description_field)
    else:
        raise ConfigError(f"topics layout must be one of {list(FORMATS)}, got {layout!r}")
    queries: list[Query] = []
    seen: set[str] = set()
    for number, qid, text, description in rows:
        check_identifier(qid, "qid", path, number)
        if qid in seen:
            raise FormatError(path, number, f"duplicate qid {qid!r}")
        if not text.strip():
            raise FormatError(path, number, f"empty query text for qid {qid!r}")
        seen.add(qid)
        queries.append(Query(qid, " ".join(text.split()), " ".join(description.split())))
    return queries


def _jsonl_topics(
    path: str | Path, qid_field: str, query_field: str, description_field: str
) -> Iterator[tuple[int, str, str, str]]:
    for number, obj in _records(path):
        qid = _field(path, number, obj, qid_field, "--qid-field", text=False)
        text = _field(path, number, obj, query_field, "--query-field", text=True)
        description = ""
        if description_field in obj:
            description = _field(path, number, obj, description_field, "--description-field", text=True)
        yield number, qid, text, description


_TOPIC = re.compile(r"<(top|topic)\b([^>]*)>(.*?)</\1\s*>", re.DOTALL | re.IGNORECASE)
_TAG = re.compile(r"""<(/?)([A-Za-z_][\w.:-]*)(?:\s+[A-Za-z_][\w.:-]*\s*=\s*(?:"[^"]*"|'[^']*'))*\s*/?>""")
"""A tag: ``<name>``, ``</name>``, ``<name/>``, ``<name a="v" b='w'>``, its name an XML name. A
``<`` that starts none (``x < 5 and y > 3``, ``<5 years``) is text: all from it to the next
``>`` had been dropped as a tag."""
_OPENING = re.compile(r"<(top|topic)\b", re.IGNORECASE)
_NUMBER = re.compile(r"""\bnumber\s*=\s*(["'])(.*?)\1""", re.IGNORECASE)
"""A topic's ``number`` attribute: its value runs to the quote that opened it (``"x'y"`` is
``x'y``), entities decoded (``a&amp;b`` is ``a&b``)."""
_LABEL = re.compile(r"^\s*(number|topic|title|description|narrative)\s*:\s*", re.IGNORECASE)
_COMMENT_OR_CDATA = re.compile(r"<!--.*?-->|<!\[CDATA\[(.*?)\]\]>", re.DOTALL)


def _without_comments(text: str) -> str:
    """``text`` with each XML comment blanked (its line breaks kept, so that line numbers hold)
    and each CDATA section replaced by its text, escaped (decoded with the entities later):
    a commented-out topic had been read as a topic, and ``<![CDATA[dogs]]>`` as the query
    ``cdata dogs``."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) is not None:
            return html.escape(match.group(1), quote=False)
        return "\n" * match.group().count("\n")

    return _COMMENT_OR_CDATA.sub(replace, text) if "<!" in text else text


def _trec_topics(
    path: str | Path, query_field: str, description_field: str | None
) -> Iterator[tuple[int, str, str, str]]:
    """TREC topics: each ``<top>...</top>`` or ``<topic ...>...</topic>``. A closed element's text
    runs to its closing tag, the text of elements nested in it included (``<title>god
    <b>earth</b></title>``); an unclosed one's to the next tag (SGML leaves ``<num>``,
    ``<title>``, ``<desc>`` unclosed). The labels ``Number:``, ``Topic:``, ``Description:`` are
    dropped from the elements of a ``<top>`` (TREC's SGML, where they belong), never from those
    of a ``<topic>`` (XML, as clir writes it: a query ``Topic: x`` had been read back as ``x``).
    XML entities are decoded, XML comments skipped and CDATA sections read as text. A
    second ``<num>``, query or description element in one topic (a lost ``</top><top>`` merges
    two topics) is an error at its line."""
    lines: list[str] = []
    for number, line in numbered_lines(path):  # blank lines kept, so that line numbers hold
        lines += [""] * (number - 1 - len(lines)) + [line]
    text = _without_comments("".join(line + "\n" for line in lines))
    descriptions = {description_field.lower()} if description_field else {"desc", "description"}
    once = {"num", query_field.lower(), *descriptions}
    matches = list(_TOPIC.finditer(text))
    _check_topics_closed(path, text, matches)
    for match in matches:
        number = text.count("\n", 0, match.start()) + 1
        elements: dict[str, str] = {}
        sgml = match.group(1).lower() == "top"  # TREC's SGML <top>, whose elements carry labels
        body = match.group(3)
        tags = list(_TAG.finditer(body))
        for i, tag in enumerate(tags):
            if tag.group(1):  # a closing tag
                continue
            name = tag.group(2).lower()
            if name in elements and name in once:
                line = text.count("\n", 0, match.start(3) + tag.start()) + 1
                raise FormatError(
                    path,
                    line,
                    f"a second <{tag.group(2)}> in the topic opened on line {number}: one per topic "
                    f"(is a </{match.group(1)}> missing before it?)",
                )
            closing = _closing_tag(tags, i, name)
            if closing is not None:  # its text, nested elements' included
                value = _TAG.sub("", body[tag.end() : closing.start()])
            else:
                value = body[tag.end() : tags[i + 1].start() if i + 1 < len(tags) else len(body)]
            value = html.unescape(value)
            elements.setdefault(name, (_LABEL.sub("", value) if sgml else value).strip())
        attribute = _NUMBER.search(match.group(2))
        qid = html.unescape(attribute.group(2)).strip() if attribute else elements.get("num", "")
        if not qid:
            raise FormatError(path, number, "topic without a number attribute or <num> element")
        if query_field.lower() not in elements:
            raise FormatError(
                path,
                number,
                f"topic {qid!r} has no <{query_field}> element (elements: {', '.join(sorted(elements))}); "
                "name the element with --query-field",
            )
        description = next((elements[name] for name in descriptions if name in elements), "")
        yield number, qid, elements[query_field.lower()], description


def _closing_tag(tags: list[re.Match[str]], i: int, name: str) -> re.Match[str] | None:
    """The tag closing the element opened by ``tags[i]`` (named ``name``): the first ``</name>``
    after it, unless another ``<name>`` comes first (an unclosed SGML element); else ``None``."""
    for tag in tags[i + 1 :]:
        if tag.group(2).lower() == name:
            return tag if tag.group(1) else None
    return None


def _check_topics_closed(path: str | Path, text: str, matches: list[re.Match[str]]) -> None:
    """Raise unless every ``<top>`` / ``<topic>`` opened in ``text`` is one of ``matches``: an
    opening tag between them or inside one of them is a topic whose closing tag is missing or
    malformed, which would otherwise be dropped or merged into its neighbour."""
    if not matches:
        opening = _OPENING.search(text)
        if opening is None:
            raise FormatError(path, None, "no <top> or <topic> element: not TREC topics")
        tag = opening.group(1)
        problem = f"<{tag}> is not closed (no </{tag}> before the end)"
        raise FormatError(path, text.count("\n", 0, opening.start()) + 1, problem)
    starts = {match.start() for match in matches}
    for opening in _OPENING.finditer(text):
        if opening.start() in starts:
            continue
        tag = opening.group(1)
        inside = next((m for m in matches if m.start() < opening.start() < m.end()), None)
        if inside is None:
            problem = f"<{tag}> is not closed (no </{tag}> before the next topic or the end)"
        else:
            line = text.count("\n", 0, inside.start()) + 1
            problem = (
                f"<{tag}> inside the topic opened on line {line}, whose closing tag is missing or malformed"
            )
        raise FormatError(path, text.count("\n", 0, opening.start()) + 1, problem)


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


_HEADER_GRADES = frozenset({"score", "relevance", "rel", "label", "grade", "judgment", "judgement", "qrel"})
"""Names of a TSV qrels header's relevance column, whose line is skipped without a warning."""


def read_qrels_as(path: str | Path, layout: str = "trec") -> Qrels:
    """Read qrels: TREC (``qid iter docno relevance``) or TSV (``qid<TAB>docno<TAB>relevance``;
    a first line whose relevance is no number at all, e.g. ``score``, is a header and skipped).

    Raises:
        FormatError: On a bad line, an invalid identifier, a docno judged twice for one query.
    """
    if layout == "trec":
        return read_qrels(path)
    if layout != "tsv":
        raise ConfigError(f"qrels layout must be one of ['trec', 'tsv'], got {layout!r}")
    qrels: Qrels = {}
    for i, (number, line) in enumerate(numbered_lines(path)):
        qid, docno, grade = fields_of(path, number, line, "\t", 3, "qid, docno, relevance")
        if i == 0 and not _is_number(grade):  # a header (BEIR's "query-id corpus-id score")
            if grade.strip().lower() not in _HEADER_GRADES:  # a judgement with a typo is lost
                warnings.warn(
                    f"{path}:{number}: skipped as a header ({qid!r} {docno!r} {grade!r}); if it is a "
                    "judgement, its relevance is no number: correct it",
                    stacklevel=2,
                )
            continue
        judged = qrels.setdefault(check_identifier(qid, "qid", path, number), {})
        if check_identifier(docno, "docno", path, number) in judged:
            raise FormatError(path, number, f"document {docno!r} judged twice for query {qid!r}")
        judged[docno] = integer_of(path, number, grade.strip(), "relevance", GRADES)
    return qrels

"""Property tests of every reader and writer of clir.formats (runs, qrels, topics, documents,
parallel text): valid records round-trip; any text or bytes either read or raise a ClirError
(a FormatError naming ``path:line`` where a line is at fault), never another exception; and a
leading byte order mark changes nothing."""

from __future__ import annotations

import tempfile
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from clir.errors import ClirError, FormatError
from clir.formats import (
    identifier_problem,
    ranked,
    read_documents,
    read_parallel,
    read_qrels,
    read_run,
    read_topics,
    write_documents,
    write_parallel,
    write_qrels,
    write_run,
    write_topics,
)
from clir.types import Document, ParallelPair, Query

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])

BOM = b"\xef\xbb\xbf"

# --- strategies of valid records --------------------------------------------------------------

identifiers = st.text(
    st.characters(exclude_categories=("Cc", "Cf", "Cs", "Zs", "Zl", "Zp")), min_size=1, max_size=6
).filter(lambda value: identifier_problem(value) is None)
"""Any identifier the rule admits, non-ASCII letters, digits and symbols included."""


def _one_line(text: str) -> str:
    """A text as the TSV writers store it: runs of whitespace as one space, none around."""
    return " ".join(text.split())


texts = st.text(max_size=20)
scores = st.floats(allow_nan=False, allow_infinity=False) | st.sampled_from([0.0, 1.0, 1.0 + 2**-40])

runs = st.dictionaries(identifiers, st.dictionaries(identifiers, scores, min_size=1, max_size=6), max_size=4)
qrels = st.dictionaries(
    identifiers,
    st.dictionaries(identifiers, st.integers(-(2**15), 2**15 - 1), min_size=1, max_size=6),
    max_size=4,
)
topics = st.lists(
    st.builds(Query, identifiers, texts.map(_one_line).filter(bool), texts.map(_one_line)),
    max_size=5,
    unique_by=lambda query: query.qid,
)
documents = st.lists(
    st.builds(
        Document,
        identifiers,
        texts,
        st.dictionaries(
            st.text(max_size=5).filter(lambda key: key not in ("docno", "text")), texts, max_size=3
        ),
    ),
    max_size=5,
    unique_by=lambda doc: doc.docno,
)
parallel = st.lists(
    st.builds(ParallelPair, identifiers, texts.map(_one_line), texts.map(_one_line)),
    max_size=5,
    unique_by=lambda pair: pair.pair_id,  # a repeated pair id is refused (counted twice before)
)

FORMATS: dict[str, tuple[Callable[[Path], Any], Callable[[Path, Any], None], st.SearchStrategy]] = {
    "run": (read_run, write_run, runs),
    "qrels": (read_qrels, write_qrels, qrels),
    "topics": (read_topics, write_topics, topics),
    "documents": (read_documents, write_documents, documents),
    "parallel": (read_parallel, write_parallel, parallel),
}

# Fragments that reach each reader's branches more often than uniform text does: separators,
# identifiers good and bad, numbers good and bad, JSON pieces, a BOM, invalid UTF-8.
FRAGMENTS = [
    "q1", "Q0", "d1", "d 2", "0", "1", "-2", "1_0", "2.5", "1e999", "nan", "x", "#", " ", "\t", "\n",
    "\r\n", "\x00", "\x0b", "\xa0", "\u200b", "\u2028", "\ufeff", '{"docno": "d1", "text": "t"}',
    '{"docno": ', '"text"', ": ", ", ", "}", "[", "]", '"', "\\u00", "9" * 5000,
]  # fmt: skip
fragment_bytes = st.lists(
    st.sampled_from(FRAGMENTS).map(str.encode) | st.sampled_from([b"\xff", b"\xc3", BOM]), max_size=30
).map(b"".join)
any_bytes = st.binary(max_size=200) | st.text(max_size=100).map(str.encode) | fragment_bytes


@contextmanager
def _file(content: bytes = b"") -> Iterator[Path]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "input.txt"
        path.write_bytes(content)
        yield path


def _outcome(reader: Callable[[Path], Any], path: Path) -> Any:
    """The records read, or the error as (type, line, reason); never another exception."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", UserWarning)  # documents with empty text
            return reader(path)
    except FormatError as error:
        where = f"{path}:{error.line}: " if error.line is not None else f"{path}: "
        assert str(error).startswith(where), str(error)
        return FormatError, error.line, error.reason
    except ClirError as error:
        return type(error), None, str(error)


@pytest.mark.parametrize("name", list(FORMATS))
@SETTINGS
@given(data=st.data())
def test_valid_records_round_trip(name, data):
    reader, writer, records = FORMATS[name]
    value = data.draw(records)
    with _file() as path:
        writer(path, value)
        assert _outcome(reader, path) == value
    if name == "run":  # and in trec_eval's order
        with _file() as path:
            write_run(path, value)
            assert {qid: list(docs) for qid, docs in read_run(path).items()} == {
                qid: [docno for docno, _ in ranked(docs)] for qid, docs in value.items()
            }


@pytest.mark.parametrize("name", list(FORMATS))
@SETTINGS
@given(content=any_bytes)
def test_any_bytes_read_or_raise_a_clir_error_naming_the_line(name, content):
    reader = FORMATS[name][0]
    with _file(content) as path:
        outcome = _outcome(reader, path)
    if isinstance(outcome, tuple) and outcome[0] is FormatError:
        assert outcome[1] is not None  # every reader error here is about one line


@pytest.mark.parametrize("name", list(FORMATS))
@SETTINGS
@given(content=any_bytes)
def test_a_leading_byte_order_mark_changes_nothing(name, content):
    assume(not content.startswith(BOM))
    reader = FORMATS[name][0]
    with _file(content) as plain, _file(BOM + content) as marked:
        assert _outcome(reader, marked) == _outcome(reader, plain)


@pytest.mark.parametrize("name", list(FORMATS))
@SETTINGS
@given(data=st.data())
def test_a_byte_order_mark_before_written_records_changes_nothing(name, data):
    reader, writer, records = FORMATS[name]
    value = data.draw(records)
    with _file() as path:
        writer(path, value)
        path.write_bytes(BOM + path.read_bytes())
        assert _outcome(reader, path) == value


# A run's plain ASCII lines, good and bad: the fields the fast reader takes on trust and those it
# must send back to the checked reader (a rank or score with _, out of range, not finite; a
# field too many or too few; a docno twice).
plain_fields = st.sampled_from(
    ["q1", "q2", "Q0", "d1", "d2", "1", "-3", "+4", "1_0", "2147483648", "2.5", "-0.0", "1e999", "nan",
     "inf", "0x1", "1.5e-3", "x", "#"]
)  # fmt: skip
plain_lines = st.lists(plain_fields, min_size=0, max_size=7).flatmap(
    lambda fields: st.sampled_from([" ", "\t", "  "]).map(lambda sep: sep.join(fields))
)
plain_runs = st.lists(plain_lines, max_size=8).map(lambda lines: "\n".join(lines).encode())


@SETTINGS
@given(content=plain_runs | any_bytes)
def test_the_plain_run_reader_reads_what_the_checked_reader_reads(content):
    """In whole blocks or in blocks of 7 bytes, which cut lines anywhere."""
    from unittest import mock

    from clir.formats import runs as runs_module

    with _file(content) as path:
        checked = _outcome(runs_module._read_checked_run, path)
        assert _outcome(read_run, path) == checked
        with mock.patch.object(runs_module, "_BLOCK", 7):
            assert _outcome(read_run, path) == checked


def test_a_run_clir_writes_takes_the_plain_reader():
    from unittest import mock

    from clir.formats import runs as runs_module

    run = {"q1": {"d1": 1.5, "d2": -0.25, "d_3": 1e-300}, "q_2": {"d1": 3.0}}
    with _file() as path:
        write_run(path, run)
        for block in (runs_module._BLOCK, 7):
            with mock.patch.object(runs_module, "_BLOCK", block):
                assert runs_module._read_plain_run(path) == run
        path.write_bytes(path.read_bytes().replace(b"\n", b"\r\n"))  # not plain: the checked reader
        assert runs_module._read_plain_run(path) is None and read_run(path) == run

"""Readers reject malformed input naming file and line; writers are atomic and round-trip."""

from __future__ import annotations

import os
import stat

import pytest

from clir.errors import DataNotFoundError, FormatError
from clir.formats import (
    atomic_directory,
    atomic_write,
    read_documents,
    read_parallel,
    read_qrels,
    read_run,
    read_topics,
    write_documents,
    write_qrels,
    write_run,
    write_topics,
)
from clir.types import Document, Query


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("reader", "text", "line", "message"),
    [
        (read_run, "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 x t\n", 2, "score must be a number"),
        (read_run, "q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", 2, "listed twice"),
        (read_run, "q1 Q0 d1 one 2.0 t\n", 1, "rank must be an integer"),
        (read_run, "q1 Q0 d1 1 nan t\n", 1, "score must be finite"),
        (read_qrels, "q1 0 d1 1\nq1 0 d2\n", 2, "expected 4 fields"),
        (read_qrels, "q1 0 d1 high\n", 1, "relevance must be an integer"),
        (read_qrels, "q1 0 d1 1\n\nq1 0 d1 0\n", 3, "judged twice"),
        (read_topics, "q1\tfoo\nq2\n", 2, "expected 2 or 3 tab-separated fields"),
        (read_topics, "q1\tfoo\nq1\tbar\n", 2, "duplicate qid"),
        (read_topics, "q1\t \n", 1, "empty query text"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "a", "text": "y"}\n', 2, "duplicate docno"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "b"\n', 2, "invalid JSON"),
        (read_documents, '{"docno": 3, "text": "x"}\n', 1, "'docno' must be a string"),
        (read_documents, '{"docno": "a", "text": "x", "n": 1}\n', 1, "field 'n' must be a string"),
        (read_parallel, "v1\ta\tb\nv2\ta\n", 2, "expected 3 fields"),
    ],
)
def test_malformed_lines_are_named_by_file_and_line(tmp_path, reader, text, line, message):
    path = _write(tmp_path / "input.txt", text)
    with pytest.raises(FormatError, match=message) as error:
        reader(path)
    assert error.value.line == line
    assert str(error.value).startswith(f"{path}:{line}: ")


def test_invalid_utf8_is_named(tmp_path):
    path = tmp_path / "qrels"
    path.write_bytes(b"q1 0 d1 1\nq1 0 d\xff 1\n")
    with pytest.raises(FormatError, match=r":2: not valid UTF-8"):
        read_qrels(path)


def test_missing_file_is_a_file_not_found_error(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        read_run(tmp_path / "absent.run")
    assert issubclass(DataNotFoundError, FileNotFoundError)


def test_empty_documents_are_counted_in_one_warning(tmp_path):
    path = _write(tmp_path / "d.jsonl", '{"docno": "a", "text": ""}\n{"docno": "b", "text": " "}\n')
    with pytest.warns(UserWarning, match="2 document"):
        assert [d.docno for d in read_documents(path)] == ["a", "b"]


def test_run_writer_orders_by_score_then_docno_and_makes_scores_distinct(tmp_path):
    path = tmp_path / "r.run"
    write_run(path, {"q1": {"b": 1.0, "a": 1.0, "c": 2.0}}, tag="x")
    lines = [line.split() for line in path.read_text().splitlines()]
    assert [(parts[2], parts[3]) for parts in lines] == [("c", "1"), ("a", "2"), ("b", "3")]
    scores = [float(parts[4]) for parts in lines]
    assert scores[0] > scores[1] > scores[2] and scores[1] == 1.0
    assert list(read_run(path)["q1"]) == ["c", "a", "b"]


def test_round_trips(tmp_path):
    qrels = {"q1": {"d1": 2, "d2": 0}, "q2": {"d3": 1}}
    write_qrels(tmp_path / "qrels", qrels)
    assert read_qrels(tmp_path / "qrels") == qrels
    docs = [Document("d1", "Habari ya\tleo", {"text_en": "news of today"}), Document("d2", "x")]
    write_documents(tmp_path / "d.jsonl", docs)
    assert read_documents(tmp_path / "d.jsonl") == docs
    queries = [Query("q1", "green pastures", "He makes me lie down"), Query("q2", "x")]
    write_topics(tmp_path / "t.tsv", queries)
    assert read_topics(tmp_path / "t.tsv") == queries


def test_atomic_write_keeps_old_file_when_interrupted(tmp_path):
    path = _write(tmp_path / "f.txt", "old")
    with pytest.raises(RuntimeError), atomic_write(path) as out:
        out.write("new")
        raise RuntimeError("interrupted")
    assert path.read_text() == "old"
    assert os.listdir(tmp_path) == ["f.txt"]


def test_atomic_directory_swaps_only_on_success_with_usual_permissions(tmp_path):
    target = tmp_path / "index"
    with atomic_directory(target) as tmp:
        (tmp / "a").write_text("1")
    with pytest.raises(RuntimeError), atomic_directory(target) as tmp:
        (tmp / "a").write_text("2")
        raise RuntimeError("interrupted")
    assert (target / "a").read_text() == "1"
    assert sorted(os.listdir(tmp_path)) == ["index"]
    umask = os.umask(0)
    os.umask(umask)
    assert stat.S_IMODE(target.stat().st_mode) == 0o777 & ~umask

"""Readers reject malformed input naming file and line; writers are atomic and round-trip."""

from __future__ import annotations

import errno
import io
import os
import re
import stat
from contextlib import ExitStack, contextmanager
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import (
    RunArrays,
    _runtext,
    atomic_directory,
    atomic_write,
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
from clir.formats import runs as runs_module
from clir.types import Document, ParallelPair, Query


def _write(path, text):
    path.write_text(text, encoding="utf-8")
    return path


@pytest.mark.parametrize(
    ("reader", "text", "line", "message"),
    [
        (read_run, "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 x t\n", 2, "score must be a finite decimal number, got 'x'"),
        (read_run, "q1 Q0 d1 1 2.0 t\nq1 Q0 d1 2 1.0 t\n", 2, "listed twice"),
        (read_run, "q1 Q0 d1 one 2.0 t\n", 1, "rank must be an integer"),
        (read_run, "q1 Q0 d1 1 nan t\n", 1, "score must be a finite decimal number, got 'nan'"),
        (read_run, "q1 Q0 d1 1 1e999 t\n", 1, "score must be a finite decimal number, got '1e999'"),
        # Python's float() and int() would read these; C's atof/atol in trec_eval read 1 and 0.
        (read_run, "q1 Q0 d1 1 1_5 t\n", 1, "score must be a finite decimal number, got '1_5'"),
        (read_qrels, "q1 0 d1 1_0\n", 1, "relevance must be an integer, got '1_0'"),
        # Fields are split as trec_eval splits them (C isspace): a no-break space or an ASCII
        # separator character joins two fields, so the line is malformed, not read as 6 fields.
        (read_run, "q1\xa0Q0 d1 1 2.0 t\n", 1, "expected 6 fields"),
        (read_qrels, "q1\x1c0 d1 1\n", 1, "expected 4 fields"),
        (read_qrels, "q1 0 d1 \u0661\n", 1, "relevance must be an integer"),
        (read_qrels, "q1 0 d1 1\nq1 0 d2\n", 2, "expected 4 fields"),
        (read_qrels, "q1 0 d1 high\n", 1, "relevance must be an integer"),
        # pytrec_eval holds a C int: a larger grade made it raise a SystemError
        (read_qrels, "q1 0 d1 99999999999999999999999\n", 1, "out of range: expected -32768 to 32767"),
        (read_qrels, "q1 0 d1 32768\n", 1, "relevance 32768 is out of range"),
        (read_run, "q1 Q0 d1 2147483648 2.0 t\n", 1, "rank 2147483648 is out of range"),
        (read_qrels, "q1 0 d1 1\n\nq1 0 d1 0\n", 3, "judged twice"),
        (read_topics, "q1\tfoo\nq2\n", 2, "expected 2 or 3 tab-separated fields"),
        (read_topics, "q1\tfoo\nq1\tbar\n", 2, "duplicate qid"),
        (read_topics, "q1\t \n", 1, "empty query text"),
        (read_topics, "\tfoo\n", 1, "qid '' is empty"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "a", "text": "y"}\n', 2, "duplicate docno"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "b"\n', 2, "invalid JSON"),
        (read_documents, '{"docno": 3, "text": "x"}\n', 1, "'docno' must be a string"),
        (read_documents, '{"docno": "a", "text": "x", "n": 1}\n', 1, "field 'n' must be a string"),
        # a key written twice: json kept the last silently (d7, not d1x), however it is spaced
        (
            read_documents,
            '{"docno": "a", "text": "x"}\n{"docno":"d1x","text":"x","docno":"d7"}\n',
            2,
            "key 'docno' is written twice in one object",
        ),
        (read_documents, '{"docno" : "d1", "text" :"a: b", "docno"\t: "d7"}\n', 1, "key 'docno' is written"),
        (
            read_documents,
            '{"docno": "a", "text": "x", "m": {"k": 1}}\n',
            1,
            "field 'm' must be a string, got dict",
        ),
        (
            read_documents,
            '{"docno": {"k": 1}, "text": "x"}\n',
            1,
            r"'docno' must be a string, got \{'k': 1\}",
        ),
        (read_documents, '[["docno", "a"], ["text", "x"]]\n', 1, "expected a JSON object, got list"),
        (read_documents, '{"docno": "d1", "text": "x \\": y", "text": "z"}\n', 1, "key 'text' is written"),
        (read_parallel, "v1\ta\tb\nv2\ta\n", 2, "expected 3 fields"),
        # counted twice by the tables, refused by a pseudo collection without its file and line
        (read_parallel, "v1\ta\tb\nv2\tc\td\nv1\te\tf\n", 3, "pair id 'v1' is that of line 1: pair ids"),
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


def test_documents_with_colons_and_quotes_in_their_text_are_read(tmp_path):
    # keys are checked for repeats, not text that looks like a key
    lines = ['{"docno": "a", "text": "saa 3:15 \\": \\" : x", "src" : "b:c"}', '{"docno":"b","text":"y"}']
    path = _write(tmp_path / "d.jsonl", "\n".join(lines) + "\n")
    assert [(d.docno, d.text, d.fields) for d in read_documents(path)] == [
        ("a", 'saa 3:15 ": " : x', {"src": "b:c"}),
        ("b", "y", {}),
    ]


def test_empty_documents_are_counted_in_one_warning(tmp_path):
    path = _write(tmp_path / "d.jsonl", '{"docno": "a", "text": ""}\n{"docno": "b", "text": " "}\n')
    with pytest.warns(UserWarning, match="2 document"):
        assert [d.docno for d in read_documents(path)] == ["a", "b"]


def test_run_writer_keeps_scores_and_ranks_as_trec_eval(tmp_path):
    # trec_eval reads scores as float32 and breaks ties by docno descending: 1.0 + 2**-40 is
    # float32 1.0, so d, b and a tie (d first); scores are written exactly, with no offsets.
    run = {"q1": {"b": 1.0, "a": 1.0, "c": 2.0, "d": 1.0 + 2**-40}}
    path = tmp_path / "r.run"
    write_run(path, run, tag="x")
    lines = [line.split() for line in path.read_text().splitlines()]
    assert [(parts[2], parts[3]) for parts in lines] == [("c", "1"), ("d", "2"), ("b", "3"), ("a", "4")]
    assert read_run(path) == run
    assert list(read_run(path)["q1"]) == ["c", "d", "b", "a"]
    assert ranked(run["q1"]) == [("c", 2.0), ("d", 1.0 + 2**-40), ("b", 1.0), ("a", 1.0)]


def _reference_run_text(run, tag, depth):
    """The run file as the first writer wrote it: sorted() over (float32 score, docno) tuples."""
    lines = []
    for qid in sorted(run):
        docs = run[qid]
        with np.errstate(over="ignore"):
            sims = np.asarray(list(docs.values()), dtype=np.float64).astype(np.float32).tolist()
        rows = sorted(zip(sims, docs, docs.values(), strict=True), key=lambda row: row[:2], reverse=True)
        lines += [
            f"{qid} Q0 {d} {rank} {float(s)!r} {tag}\n" for rank, (_, d, s) in enumerate(rows[:depth], 1)
        ]
    return "".join(lines)


def test_run_writer_counts_the_queries_the_file_holds(tmp_path):
    # "wrote RUN: 30 queries" had counted queries without documents, which the file does not hold
    path = tmp_path / "r.run"
    run = {"q1": {"d1": 1.0}, "q2": {}, "q3": {"d2": 0.5, "d1": 0.2}}
    assert write_run(path, run) == 2
    assert sorted(read_run(path)) == ["q1", "q3"]
    assert write_run(path, run, depth=0) == 0 and path.read_text() == ""


@settings(max_examples=60, deadline=None)
@given(
    run=st.dictionaries(
        st.text("qQ12", min_size=1, max_size=3),
        st.dictionaries(
            st.text("abAB09-_.éΩ", min_size=1, max_size=4),
            st.one_of(
                st.floats(-1e6, 1e6),
                st.sampled_from([1.0, 1.0 + 2**-40, 1.0 - 2**-40, 0.0, -0.0, 1e39, -1e39, 3]),
            ),
            max_size=25,
        ),
        max_size=4,
    ),
    depth=st.one_of(st.none(), st.integers(0, 30)),
)
def test_run_writer_writes_what_the_first_writer_wrote(tmp_path_factory, run, depth):
    # float32 ties (1.0 + 2**-40), signed zeros, float32 overflow (1e39) and ints included
    path = tmp_path_factory.mktemp("runs") / "r.run"
    write_run(path, run, tag="t", depth=depth)
    assert path.read_text() == _reference_run_text(run, "t", depth)
    for docs in run.values():
        order = [line.split()[2] for line in _reference_run_text({"q": docs}, "t", None).splitlines()]
        assert ranked(docs) == [(d, docs[d]) for d in order]


def _mixed_run(queries=6, docs=40):
    """Queries of random scores with float32 ties, signed zeros, float32 overflow, ints and
    non-ASCII docnos."""
    rng = np.random.default_rng(7)
    special = [1.0, 1.0 + 2**-40, 1.0 - 2**-40, 0.0, -0.0, 1e39, -1e39, 3, 1e-05, 1e16]
    names = [f"d{i}" if i % 3 else f"é{i}Ω" for i in range(docs)]
    run = {}
    for q in range(queries):
        chosen = rng.choice(docs, size=int(rng.integers(1, docs)), replace=False)
        run[f"q{q}"] = {
            names[i]: special[i % len(special)] if i % 4 == 0 else float(rng.normal()) for i in chosen
        }
    return run


@pytest.mark.parametrize(("workers", "depth"), [(2, None), (3, 5), (8, None)])
def test_run_writer_in_worker_processes_writes_the_first_writers_file(tmp_path, workers, depth):
    run = _mixed_run()
    write_run(tmp_path / "r.run", run, tag="t", depth=depth, workers=workers)
    assert (tmp_path / "r.run").read_text() == _reference_run_text(run, "t", depth)


def test_run_text_workers_make_the_lines_themselves(monkeypatch):
    # this process cannot make a line (a fallback would raise): the worker program made them
    def refused(*args):
        raise AssertionError("a group was made in this process")

    monkeypatch.setattr(_runtext, "query_texts", refused)
    docnos = ["a", "é"]
    jobs = [
        ("q1", np.array([1, 0]).tobytes(), np.array([0.5, 0.1]).tobytes()),
        ("q2", np.array([0]).tobytes(), np.array([-0.0]).tobytes()),
        ("q3", np.array([0, 1]).tobytes(), np.array([1e16, 2.0]).tobytes()),
    ]
    with _runtext.started_workers([2, 1, 2], 2) as workers:
        assert len(workers.processes) == 2 and workers.counts == [2, 1]
        texts = list(_runtext.in_workers(docnos, "t", iter(jobs), workers))
    assert texts == [
        "q1 Q0 é 1 0.5 t\nq1 Q0 a 2 0.1 t\nq2 Q0 a 1 -0.0 t\n".encode(),
        b"q3 Q0 a 1 1e+16 t\nq3 Q0 \xc3\xa9 2 2.0 t\n",
    ]
    assert all(process.returncode == 0 for process in workers.processes)


def test_run_writer_writes_the_file_itself_when_workers_cannot_start(tmp_path, monkeypatch):
    monkeypatch.setattr(_runtext.sys, "executable", str(tmp_path / "no-such-python"))
    run = _mixed_run()
    with ExitStack() as stack, pytest.raises(_runtext.WorkerError, match="no-such-python"):
        _runtext.start(2, stack)
    with _runtext.started_workers([5, 5], 2) as workers:
        assert workers.processes == [] and workers.counts == []
    write_run(tmp_path / "r.run", run, tag="t", workers=2)
    assert (tmp_path / "r.run").read_text() == _reference_run_text(run, "t", None)


def test_started_workers_that_are_never_fed_exit_when_the_writer_fails(tmp_path):
    # the workers start before the arrays are checked; an error then closes their input
    arrays = _as_arrays(_mixed_run())
    arrays.positions[0][1] = arrays.positions[0][0]  # a document twice for one query
    path = _write(tmp_path / "r.run", "old\n")
    started = []
    real = _runtext.started_workers

    @contextmanager
    def spy(sizes, workers=None):
        with real(sizes, workers) as made:
            started.append(made)
            yield made

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(runs_module, "started_workers", spy)
        with pytest.raises(ConfigError, match="listed twice"):
            write_run(path, arrays, workers=3)
    assert len(started[0].processes) == 3
    assert all(process.returncode is not None for process in started[0].processes)  # waited for
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["r.run"]


def test_a_bad_score_stops_the_workers_and_leaves_the_file_alone(tmp_path):
    run = _mixed_run()
    run["q4"]["d1"] = float("inf")
    path = _write(tmp_path / "r.run", "old\n")
    with pytest.raises(ConfigError, match="score of 'd1' for query 'q4' is inf"):
        write_run(path, run, workers=3)
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["r.run"]


def _as_arrays(run, seed=0, unused=3):
    """``run`` as :class:`RunArrays`: its docnos shuffled, with ``unused`` docnos no query lists,
    each query's documents shuffled."""
    rng = np.random.default_rng(seed)
    docnos = [
        *dict.fromkeys(d for docs in run.values() for d in docs),
        *(f"unused{i}" for i in range(unused)),
    ]
    docnos = [docnos[i] for i in rng.permutation(len(docnos))]
    index = {d: i for i, d in enumerate(docnos)}
    qids = list(run)[::-1]
    positions, scores = [], []
    for qid in qids:
        names = [list(run[qid])[i] for i in rng.permutation(len(run[qid]))]
        positions.append(np.array([index[d] for d in names], dtype=np.int64))
        scores.append(np.array([run[qid][d] for d in names], dtype=np.float64))
    return RunArrays(docnos, qids, positions, scores)


@pytest.mark.parametrize(("workers", "depth"), [(0, None), (0, 4), (3, None)])
def test_run_arrays_are_written_as_the_same_run_in_dictionaries(tmp_path, workers, depth):
    run = _mixed_run()
    arrays = _as_arrays(run)
    assert arrays.to_run() == run and len(arrays) == len(run)
    write_run(tmp_path / "r.run", arrays, tag="t", depth=depth, workers=workers)
    assert (tmp_path / "r.run").read_text() == _reference_run_text(run, "t", depth)
    back = RunArrays.from_run(run)
    assert back.to_run() == run and list(back.to_run()["q0"]) == list(run["q0"])


@pytest.mark.parametrize("depth", [None, 3, 2000])
def test_a_ragged_run_is_ranked_query_by_query_as_the_first_writer_did(tmp_path, depth):
    # one long query among short ones: padding every query to the longest would more than
    # double the table, so each query is sorted on its own (the file is the same either way)
    rng = np.random.default_rng(3)
    run = _mixed_run(queries=4, docs=30)
    run["long"] = {f"d{i}": float(rng.normal()) if i % 7 else 1.0 for i in range(5000)}
    for arrays in (run, _as_arrays(run)):
        write_run(tmp_path / "r.run", arrays, tag="t", depth=depth, workers=0)
        assert (tmp_path / "r.run").read_text() == _reference_run_text(run, "t", depth)


@pytest.mark.parametrize("cells", [1, 80, 1000])
def test_a_run_ranked_in_several_tables_is_the_first_writers(tmp_path, monkeypatch, cells):
    from clir.formats import runs

    monkeypatch.setattr(runs, "_TABLE_CELLS", cells)  # a table of one, two or more queries at a time
    run = _mixed_run(queries=7)
    for depth in (None, 5):
        write_run(tmp_path / "r.run", _as_arrays(run), tag="t", depth=depth, workers=0)
        assert (tmp_path / "r.run").read_text() == _reference_run_text(run, "t", depth)


def _parts(run, cuts, shared=True):
    """``run`` as :class:`RunArrays` parts in the file's order, cut before the sorted qids at
    ``cuts``: one docno list for all (``shared``) or each part its own, reversed."""
    qids = sorted(run)
    every = _as_arrays(run)
    at = {qid: i for i, qid in enumerate(every.qids)}
    parts = []
    for start, end in zip([0, *cuts], [*cuts, len(qids)], strict=True):
        chosen = [at[qid] for qid in qids[start:end]][::-1]  # each part's queries out of order
        docnos, positions = every.docnos, [every.positions[i] for i in chosen]
        if not shared:
            docnos = every.docnos[::-1]
            positions = [len(docnos) - 1 - p for p in positions]
        parts.append(
            RunArrays(docnos, [every.qids[i] for i in chosen], positions, [every.scores[i] for i in chosen])
        )
    return parts


@pytest.mark.parametrize("cuts", [[], [1], [3], [1, 2, 5], [2, 4], [0, 6]])
@pytest.mark.parametrize(
    ("workers", "depth", "shared"), [(0, None, True), (0, 5, False), (3, None, False), (2, 5, True)]
)
def test_a_run_written_in_parts_is_the_run_written_whole(tmp_path, cuts, workers, depth, shared):
    # float32 ties, signed zeros, overflow, ints: every cut of the queries gives the same bytes
    run = _mixed_run(queries=7)
    whole = tmp_path / "whole.run"
    write_run(whole, _as_arrays(run), tag="t", depth=depth, workers=0)
    assert whole.read_text() == _reference_run_text(run, "t", depth)
    parts = tmp_path / "parts.run"
    assert write_run(parts, iter(_parts(run, cuts, shared)), tag="t", depth=depth, workers=workers) == 7
    assert parts.read_bytes() == whole.read_bytes()


def test_parts_out_of_the_files_order_are_refused_and_the_file_kept(tmp_path):
    path = _write(tmp_path / "r.run", "old\n")
    first, second = _parts(_mixed_run(), [3])
    with pytest.raises(ConfigError, match="not in the file's order \\(query 'q0' comes after 'q5'\\)"):
        write_run(path, [second, first], workers=0)
    assert path.read_text() == "old\n" and os.listdir(tmp_path) == ["r.run"]


def test_a_failed_workers_group_is_made_in_this_process(tmp_path, monkeypatch):
    # the second worker reads its input and fails: its queries' lines are made here, in place
    real = _runtext.start
    failing = [_runtext.sys.executable, "-c", "import sys; sys.stdin.buffer.read(); sys.exit(3)"]

    def start(n, stack):
        processes = real(n, stack)
        if n >= 2:
            processes[1] = stack.enter_context(
                _runtext.subprocess.Popen(
                    failing, stdin=_runtext.subprocess.PIPE, stdout=_runtext.subprocess.PIPE
                )
            )
        return processes

    monkeypatch.setattr(_runtext, "start", start)
    run = _mixed_run()
    for parts in ([_as_arrays(run)], _parts(run, [2, 4])):
        write_run(tmp_path / "r.run", parts, tag="t", workers=3)
        assert (tmp_path / "r.run").read_text() == _reference_run_text(run, "t", None)


def _first_twice(positions):
    """``positions`` with the first in place of the last."""
    return np.concatenate([positions[:-1], positions[:1]])


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (lambda a: replace(a, qids=["q0", *a.qids[1:]]), "6 qids \\(5 distinct\\)"),
        (lambda a: replace(a, scores=a.scores[:-1]), "6 position arrays and 5 score arrays"),
        (
            lambda a: replace(a, positions=[a.positions[0] + len(a.docnos), *a.positions[1:]]),
            "positions outside 0",
        ),
        (lambda a: replace(a, positions=[_first_twice(a.positions[0]), *a.positions[1:]]), "twice for query"),
        (lambda a: replace(a, scores=[a.scores[0].astype(np.float32), *a.scores[1:]]), "expected int64 and"),
        (lambda a: replace(a, scores=[np.full_like(a.scores[0], np.nan), *a.scores[1:]]), "is nan; expected"),
        (lambda a: replace(a, docnos=["a b", *a.docnos[1:]]), "docno 'a b'"),
        # a docno at two positions: a query listing both had been written with it twice
        (lambda a: replace(a, docnos=[*a.docnos[:-1], a.docnos[0]]), "is listed twice in the docnos"),
    ],
)
def test_run_arrays_that_are_no_run_are_refused_and_the_file_kept(tmp_path, change, message):
    path = _write(tmp_path / "r.run", "old\n")
    with pytest.raises(ConfigError, match=message):
        write_run(path, change(_as_arrays(_mixed_run())))
    assert path.read_text() == "old\n"


def test_run_writer_writes_numpy_scores_as_plain_numbers(tmp_path):
    write_run(tmp_path / "r.run", {"q1": {"a": np.float64(0.1), "b": np.float32(0.5)}})
    assert tmp_path.joinpath("r.run").read_text() == "q1 Q0 b 1 0.5 clir\nq1 Q0 a 2 0.1 clir\n"


@pytest.mark.parametrize(
    ("reader", "text", "bad"),
    [
        (read_run, "q1 Q0 d1 1 1.0 t\nq\x001 Q0 d2 2 0.5 t\n", "'q\\x001'"),
        (read_run, "q1 Q0 d1 1 1.0 t\nq1 Q0 d\u200b2 2 0.5 t\n", "'d\\u200b2'"),
        (read_run, "q1 Q0 d1 1 1.0 t\nq1 Q0 d\xa02 2 0.5 t\n", "'d\\xa02'"),
        (read_qrels, "q1 0 d1 1\nq1 0 d\x1f2 1\n", "'d\\x1f2'"),
        (read_topics, "q1\tfoo\nq 2\tbar\n", "'q 2'"),
        (read_topics, "q1\tfoo\nq2 \tbar\n", "'q2 '"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "a b", "text": "y"}\n', "'a b'"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "b\\u2028c", "text": "y"}\n', "'b\\u2028c'"),
        (read_documents, '{"docno": "a", "text": "x"}\n{"docno": "", "text": "y"}\n', "''"),
        (read_parallel, "v1\ta\tb\nv\r2\ta\tb\n", "'v\\r2'"),
    ],
)
def test_readers_reject_identifiers_with_whitespace_or_control_characters(tmp_path, reader, text, bad):
    path = _write(tmp_path / "input.txt", text)
    with pytest.raises(FormatError, match=re.escape(bad)) as error:
        reader(path)
    assert str(error.value).startswith(f"{path}:2: ")


@pytest.mark.parametrize(
    ("writer", "records", "bad"),
    [
        (lambda p, r: write_run(p, r), {"q1": {"d1": 1.0}, "q 2": {"d1": 1.0}}, "qid 'q 2'"),
        # A docno that would inject a line of its own into the run file.
        (
            lambda p, r: write_run(p, r),
            {"q1": {"d1 1 9.0 x\nq1 Q0 d9": 1.0}},
            "docno 'd1 1 9.0 x\\nq1 Q0 d9'",
        ),
        (lambda p, r: write_run(p, r, tag="my run"), {"q1": {"d1": 1.0}}, "run tag 'my run'"),
        (lambda p, r: write_run(p, r), {"q1": {"d1": float("nan")}}, "is nan; expected a finite number"),
        # numpy reads these as floats; evaluate refuses them, so the file would not be scored as written.
        (
            lambda p, r: write_run(p, r),
            {"q1": {"d1": 1.0, "d2": "3.5"}},
            "is '3.5'; expected a finite number",
        ),
        (lambda p, r: write_run(p, r), {"q1": {"d1": True}}, "is True; expected a finite number"),
        (lambda p, r: write_run(p, r), {"q1": {"d1": b"1"}}, "is b'1'; expected a finite number"),
        (lambda p, r: write_run(p, r), {"q1": {"d1": 10**400}}, "expected a finite number"),
        (write_qrels, {"q1": {"d\t1": 1}}, "docno 'd\\t1'"),
        (write_qrels, {"q1": {"d1": 1.0}}, "is 1.0; expected an integer"),
        (write_topics, [Query("q1", "a"), Query("q\u00a02", "b")], "qid 'q\\xa02'"),
        (write_topics, [Query("q1", "a"), Query("q1", "b")], "duplicate qid 'q1'"),
        (write_topics, [Query("q1", " \t")], "empty text"),
        (write_documents, [Document("a", "x"), Document("b\u200bc", "y")], "docno 'b\\u200bc'"),
        (write_documents, [Document("a", "x", {"docno": "b"})], "not named 'docno' or 'text'"),
        (write_parallel, [ParallelPair("v1", "a", "b"), ParallelPair("", "a", "b")], "pair id '' is empty"),
        (
            write_parallel,
            [ParallelPair("v1", "a", "b"), ParallelPair("v1", "c", "d")],
            "pair id 'v1' is given twice",
        ),
    ],
)
def test_writers_refuse_invalid_records_and_leave_the_file_alone(tmp_path, writer, records, bad):
    path = _write(tmp_path / "out.txt", "old\n")
    with pytest.raises(ConfigError, match=re.escape(bad)) as error:
        writer(path, records)
    assert str(error.value).startswith(f"{path}: not written: ")
    assert path.read_text() == "old\n"
    assert os.listdir(tmp_path) == ["out.txt"]


@pytest.mark.parametrize(
    ("reader", "text"),
    [
        (read_run, "q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n"),
        (read_qrels, "q1 0 d1 1\nq1 0 d2 0\n"),
        (read_topics, "q1\tgreen pastures\n"),
        (read_documents, '{"docno": "d1", "text": "x"}\n'),
        (read_parallel, "v1\ta\tb\n"),
    ],
)
def test_a_leading_byte_order_mark_reads_as_no_mark(tmp_path, reader, text):
    plain = _write(tmp_path / "plain.txt", text)
    marked = tmp_path / "marked.txt"
    marked.write_bytes(b"\xef\xbb\xbf" + text.encode("utf-8"))
    assert reader(marked) == reader(plain)


def test_a_byte_order_mark_no_longer_changes_average_precision(tmp_path):
    # With the mark kept, the run's first line read as query '\ufeffq1', so q1 lost d1 and its AP
    # fell from (1/1 + 2/3) / 2 = 0.8333 to (1/2) / 2 = 0.25.
    from clir.evaluation import evaluate

    run = _write(tmp_path / "run", "\ufeffq1 Q0 d1 1 3.0 t\nq1 Q0 d2 2 2.0 t\nq1 Q0 d3 3 1.0 t\n")
    qrels = _write(tmp_path / "qrels", "q1 0 d1 2\nq1 0 d3 1\n")
    assert evaluate(read_run(run), read_qrels(qrels), ["AP"]) == {"AP": pytest.approx(5 / 6)}


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


def test_a_lone_surrogate_in_jsonl_documents_names_the_file_line_and_field(tmp_path):
    """A JSON "\\ud800" escape decodes to a lone surrogate that UTF-8 cannot write: 'data check'
    passed such a collection and saving it failed later with a bare UnicodeEncodeError."""
    path = tmp_path / "docs.jsonl"
    path.write_text('{"docno": "d1", "text": "a \\u00e9"}\n{"docno": "d2", "text": "mtu \\ud800 sokoni"}\n')
    with pytest.raises(FormatError, match=rf"^{re.escape(str(path))}:2: field 'text' holds a lone surrogate"):
        read_documents(path)
    path.write_text('{"docno": "d1", "text": "a", "title": "\\udfff"}\n')
    with pytest.raises(FormatError, match=r":1: field 'title' holds a lone surrogate \(U\+DFFF\)"):
        read_documents(path)
    path.write_text('{"docno": "d1", "text": "a \\ud83d\\ude00 \\u00e9"}\n')  # a pair is one character
    assert read_documents(path)[0].text == "a \U0001f600 \u00e9"


def test_a_nan_score_has_no_rank():
    """ranked() had put a NaN first: a run with one, handed to rerank_collection or fuse_runs
    through the Python API, made that document the best candidate."""
    from clir.pipeline.features import fuse_runs

    inf = float("inf")
    docs = {"a": 1.0, "b": float("nan"), "c": 0.5}
    with pytest.raises(ConfigError, match=r"^document 'b' has a NaN score$"):
        ranked(docs)
    with pytest.raises(ConfigError, match="has a NaN score"):
        fuse_runs([{"q": docs}, {"q": {"a": 1.0}}])
    assert ranked({"a": 1.0, "b": inf, "c": -inf}) == [
        ("b", inf),
        ("a", 1.0),
        ("c", -inf),
    ]


def test_a_read_that_fails_names_the_file(tmp_path, monkeypatch):
    """A failed read (a bad disk's EIO) names no file: clir had said "Input/output error" alone."""
    path = tmp_path / "qrels.txt"
    path.write_text("q1 0 d1 1\n")

    class Failing(io.BytesIO):
        def __iter__(self):
            raise OSError(errno.EIO, os.strerror(errno.EIO))

    monkeypatch.setattr(Path, "open", lambda self, *args, **kwargs: Failing())
    with pytest.raises(OSError) as caught:
        read_qrels(path)
    assert caught.value.filename == str(path) and caught.value.errno == errno.EIO

"""The text of a TREC run's lines, in this process or in worker processes.

Writing a large run is mostly ``repr`` of its scores (the float's shortest round-trip text,
about half a microsecond each) and putting lines together, all under the GIL. For a large run
on a machine with spare cores, :func:`run_texts` hands groups of queries to short-lived worker
processes that run this file as a script (``python -I -S``: the standard library alone, neither
clir nor numpy imported), so the same :func:`query_text` makes every line, here or there.

This module imports nothing but the standard library: it is the workers' whole program.
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys
from array import array
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from itertools import chain, islice

Job = tuple[str, bytes, bytes]
"""One query: its qid, its documents' positions in the run's docno list (``int64`` bytes) and
their scores (``float64`` bytes), both in rank order."""

WORKER_MIN_LINES = 100_000
"""Lines from which :func:`run_texts` uses worker processes (when the machine has spare cores)."""
MAX_WORKERS = 8
"""Worker processes at most."""


def query_text(docnos: Sequence[str], ranks: Sequence[str], tag: str, job: Job) -> str:
    """The lines of one query, ``f"{qid} Q0 {docno} {rank} {score!r} {tag}\\n"`` each, put
    together with one ``join`` (``ranks[i]`` is ``f" {i + 1} "``; a list's ``repr`` writes each
    float as ``repr`` does).

    Args:
        docnos: The run's docnos; the job's positions index them.
        ranks: The rank texts, at least as many as the query's lines.
        tag: The run tag.
        job: ``(qid, positions, scores)`` of the query.
    """
    qid, positions, scores = job[0], array("q", job[1]), array("d", job[2])
    n = len(positions)
    if n == 0:
        return ""
    parts = [f" {tag}\n{qid} Q0 "] * (4 * n + 1)
    parts[0], parts[-1] = f"{qid} Q0 ", f" {tag}\n"
    parts[1::4] = [docnos[i] for i in positions]
    parts[2::4] = ranks[:n]
    parts[3::4] = repr(scores.tolist())[1:-1].split(", ")
    return "".join(parts)


def query_texts(docnos: Sequence[str], tag: str, jobs: Iterable[Job], most: int) -> Iterator[str]:
    """The lines of each query of ``jobs``, in order (one text per query), none longer than
    ``most`` lines."""
    ranks = [f" {rank} " for rank in range(1, most + 1)]
    return (query_text(docnos, ranks, tag, job) for job in jobs)


def spare_cores() -> int:
    """The cores this process may run on, less one for itself (none where ``sys.executable``
    is no Python to run this file with: unknown, or a frozen application)."""
    if getattr(sys, "frozen", False) or not sys.executable:
        return 0
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    return cores - 1


PIPE_BYTES = 1 << 20
"""Size asked for each worker pipe (Linux's default ceiling for a process): a group's jobs are
handed over without waiting for the worker to read them."""


class WorkerError(Exception):
    """A worker process could not be started, fed or read, or it failed."""


@contextmanager
def _worker_io() -> Iterator[None]:
    """Turns the errors of talking to workers into :class:`WorkerError` (and no other error)."""
    try:
        yield
    except (OSError, pickle.PickleError, subprocess.SubprocessError) as error:
        raise WorkerError(str(error)) from error


class Workers:
    """Worker processes started for a run, each to make the lines of ``counts[i]`` consecutive
    queries (about as many lines each); none when the run is made in this process. (A plain
    class: ``dataclasses`` would add its imports to every worker's start.)"""

    def __init__(self, processes: list[subprocess.Popen], counts: list[int]) -> None:
        self.processes = processes
        self.counts = counts


def groups(sizes: Sequence[int], workers: int) -> list[int]:
    """``sizes`` (lines per query) cut into at most ``workers`` runs of consecutive queries of
    about as many lines: the queries in each."""
    total, counts, made, start = sum(sizes), [], 0, 0
    for end, size in enumerate(sizes, 1):
        made += size
        if made * workers >= total * (len(counts) + 1) or end == len(sizes):
            counts.append(end - start)
            start = end
    return counts


@contextmanager
def started_workers(sizes: Sequence[int], workers: int | None = None) -> Iterator[Workers]:
    """Workers for a run of ``sizes`` lines per query (in the file's order), started at once so
    that they start up while the run is ranked; closed and waited for on leaving (a worker not
    fed by then reads an empty input and exits).

    Args:
        sizes: The lines of each query.
        workers: Worker processes; ``None``: up to :data:`MAX_WORKERS`, one per spare core,
            when there are at least :data:`WORKER_MIN_LINES` lines and 3 spare cores, else
            none. Where they cannot be started, none (the text is made in this process).
    """
    if workers is None:
        spare = spare_cores()
        workers = min(MAX_WORKERS, spare) if sum(sizes) >= WORKER_MIN_LINES and spare >= 3 else 0
    counts = groups(sizes, workers) if workers >= 1 and len(sizes) >= 2 else []
    with ExitStack() as stack:  # closes the pipes and waits for every worker, also on an error
        try:
            processes = start(len(counts), stack)
        except WorkerError:
            processes, counts = [], []
        yield Workers(processes, counts)


def start(n: int, stack: ExitStack) -> list[subprocess.Popen]:
    """``n`` worker processes running this file (entered into ``stack``), their pipes enlarged
    where the system allows.

    Raises:
        WorkerError: If one cannot be started.
    """
    if n and not sys.executable:
        raise WorkerError("no Python interpreter to start workers with (sys.executable is empty)")
    command = [sys.executable, "-I", "-S", __file__]
    processes = []
    with _worker_io():
        for _ in range(n):
            process = subprocess.Popen(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL
            )
            processes.append(stack.enter_context(process))
            for pipe in (process.stdin, process.stdout):
                _enlarge(pipe.fileno())  # type: ignore[union-attr]
    return processes


def _enlarge(fd: int) -> None:
    """Ask for a pipe of :data:`PIPE_BYTES` (Linux); elsewhere, or when refused, keep it."""
    try:
        import fcntl

        fcntl.fcntl(fd, fcntl.F_SETPIPE_SZ, PIPE_BYTES)
    except (ImportError, AttributeError, OSError):
        pass


def run_texts(
    docnos: Sequence[str], tag: str, jobs: Iterable[Job], sizes: Sequence[int], workers: Workers
) -> Iterable[bytes]:
    """The UTF-8 text of every job's lines, in order, made by ``workers`` or in this process.

    The workers are fed at once; their texts are read as the result is iterated, so that a
    caller can do other work (e.g. make the next part of a run) while they make them.

    Args:
        docnos: The run's docnos.
        tag: The run tag.
        jobs: The queries, in the file's order; drawn one by one, so that workers already
            format the first ones while later ones are made.
        sizes: The lines of each job.
        workers: Started by :func:`started_workers` for these ``sizes`` (none: made here).
            Where they cannot be fed, the text is made here; where one fails, its group's.

    Returns:
        Texts whose concatenation is the run's lines (made here: one per query, as they are read).

    Raises:
        UnicodeEncodeError: If a docno, qid or tag cannot be written as UTF-8 (a lone surrogate).
    """
    jobs, drawn = iter(jobs), []
    if workers.processes:
        try:
            return in_workers(docnos, tag, _kept(jobs, drawn), workers)
        except WorkerError:
            pass
    most = max(sizes, default=0)
    return (text.encode("utf-8") for text in query_texts(docnos, tag, chain(drawn, jobs), most))


def _kept(jobs: Iterator[Job], drawn: list[Job]) -> Iterator[Job]:
    """``jobs``, each also appended to ``drawn`` as it is drawn."""
    for job in jobs:
        drawn.append(job)
        yield job


def in_workers(docnos: Sequence[str], tag: str, jobs: Iterator[Job], workers: Workers) -> Iterator[bytes]:
    """Feed each group of ``workers.counts`` jobs to its worker process now; the lines come back
    as the result is iterated (one UTF-8 text per group, read from its worker, or made here
    where that worker failed).

    Raises:
        WorkerError: If a worker cannot be fed (an error in making a job is raised as it is).
    """
    docnos = list(docnos)
    groups = []
    for process, count in zip(workers.processes, workers.counts, strict=True):
        group = list(islice(jobs, count))  # an error in making a job is raised as it is
        groups.append(group)
        with _worker_io(), process.stdin as feed:
            pickle.dump((docnos, tag, group), feed, protocol=pickle.HIGHEST_PROTOCOL)
    return _read(docnos, tag, groups, workers.processes)


def _read(
    docnos: Sequence[str], tag: str, groups: list[list[Job]], processes: list[subprocess.Popen]
) -> Iterator[bytes]:
    """Each group's text from its worker (waited for), or made here where the worker failed."""
    for group, process in zip(groups, processes, strict=True):
        try:
            with _worker_io():
                text = process.stdout.read()  # type: ignore[union-attr]
                process.wait()
            if process.returncode:
                raise WorkerError(f"a run-writing worker failed: exit status {process.returncode}")
        except WorkerError:
            most = max((len(job[1]) // 8 for job in group), default=0)
            text = "".join(query_texts(docnos, tag, group, most)).encode("utf-8")
        yield text


def _work() -> None:
    """A worker's program: a pickled ``(docnos, tag, jobs)`` on stdin, its lines (UTF-8) on stdout."""
    docnos, tag, jobs = pickle.load(sys.stdin.buffer)
    text = "".join(query_texts(docnos, tag, jobs, max(len(job[1]) // 8 for job in jobs)))
    sys.stdout.buffer.write(text.encode("utf-8"))


if __name__ == "__main__":
    _work()

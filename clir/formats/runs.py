"""TREC runs: ``qid Q0 docno rank score tag``, in trec_eval's order.

trec_eval ignores the rank column: it reads each score into a C ``float`` (32-bit; see
``TEXT_RESULTS`` in its ``trec_format.h``) and ranks by that score descending, ties broken by
docno *descending* (``comp_sim_docno`` in ``form_res_rels.c``); pytrec_eval, and so ir_measures,
does the same. clir adopts that order everywhere: :func:`ranked` sorts by the score rounded to
float32 (descending), then docno (descending), so that two float64 scores that differ only
beyond float32 precision tie, exactly as in trec_eval. :func:`write_run` writes each score as it
is (``repr`` of the float64, which reads back to the same value) with the rank of that order,
and :func:`read_run` keeps scores as they are; a run evaluated in memory, from its file by clir,
or from its file by trec_eval or ir_measures is therefore ranked identically.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from itertools import chain, pairwise
from pathlib import Path

import numpy as np

from clir.errors import ConfigError, FormatError
from clir.formats._lines import INT32, decimal_of, fields_of, integer_of, numbered_lines
from clir.formats._runtext import run_texts, started_workers
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import Run


def read_run(path: str | Path) -> Run:
    """Read a 6-column TREC run into ``run[qid][docno] = score``.

    A plain ASCII file (as clir and most tools write runs) is read in one pass without the
    per-line checks that its being ASCII makes needless (see :func:`_read_plain_run`); any other
    file, or one with a problem, line by line with every check (the same run, or the error).

    Raises:
        FormatError: On a malformed line, an invalid qid or docno (see
            :mod:`clir.formats.identifiers`), a rank that is not an integer, a score that is not
            a finite decimal number, or a docno listed twice for a query.
    """
    plain = _read_plain_run(Path(path))
    return plain if plain is not None else _read_checked_run(path)


def _read_checked_run(path: str | Path) -> Run:
    """:func:`read_run`, every line checked."""
    run: Run = {}
    for number, line in numbered_lines(path):
        qid, _q0, docno, rank, score_text, _tag = fields_of(
            path, number, line, None, 6, "qid Q0 docno rank score tag"
        )
        check_identifier(qid, "qid", path, number)
        check_identifier(docno, "docno", path, number)
        integer_of(path, number, rank, "rank")
        score = decimal_of(path, number, score_text, "score")
        docs = run.setdefault(qid, {})
        if docno in docs:
            raise FormatError(path, number, f"document {docno!r} listed twice for query {qid!r}")
        docs[docno] = score
    return run


_PLAIN = bytes([0x09, 0x0A, *range(0x20, 0x7F)])
"""The bytes of a plain run: tab, newline and printable ASCII. Any other (non-ASCII text, a
control character, a carriage return) sends a run to the checked reader."""

_BLOCK = 1 << 24
"""Bytes read at a time by :func:`_read_plain_run`."""


def _read_plain_run(path: Path) -> Run | None:
    """:func:`read_run` of a file of tabs, newlines and printable ASCII (``None`` for any other
    file, or any problem: the checked reader then reads it and names the line).

    In such a file ``str.split`` splits as trec_eval does and every field is a valid identifier
    (printable, no whitespace), so only the field count, the rank, the score and duplicates are
    left to check. The file is read in blocks of :data:`_BLOCK` bytes (whole lines each)."""
    if path.suffix == ".gz":
        return None
    low, high = INT32
    run: Run = {}
    try:
        with path.open("rb") as handle:
            rest = b""
            while True:
                block = handle.read(_BLOCK)
                lines = rest + block
                if block:  # the last line may go on in the next block
                    cut = lines.rfind(b"\n") + 1
                    lines, rest = lines[:cut], lines[cut:]
                if lines.translate(None, _PLAIN):  # a byte of another kind is left
                    return None
                for line in lines.decode("ascii").split("\n"):
                    fields = line.split()
                    if not fields:
                        continue
                    qid, _q0, docno, rank, score_text, _tag = fields
                    if "_" in rank or "_" in score_text:  # int and float would read 1_0
                        return None
                    score = float(score_text)
                    if not (low <= int(rank) <= high and math.isfinite(score)):
                        return None
                    docs = run.get(qid)
                    if docs is None:
                        docs = run[qid] = {}
                    elif docno in docs:
                        return None
                    docs[docno] = score
                if not block:
                    return run
    except OSError:
        return None
    except ValueError:  # a field too many or too few, a rank or score that is not a number
        return None


def ranked(docs: Mapping[str, float]) -> list[tuple[str, float]]:
    """One query's documents in trec_eval's order: score as float32 descending, then docno
    descending (see the module docstring).

    Args:
        docs: ``{docno: score}``.

    Returns:
        ``[(docno, score), ...]`` best first, scores as given (not rounded).

    Raises:
        ConfigError: On a NaN score, which has no place in the order (it had come first, and a
            run handed to ``rerank_collection`` or ``fuse_runs`` had made it the best candidate).
    """
    docnos, scores = list(docs), list(docs.values())
    keys = np.array(docnos, dtype=str) if docnos else np.zeros(0, dtype=str)
    values = np.asarray(scores, dtype=np.float64)
    if np.isnan(values).any():
        raise ConfigError(f"document {docnos[int(np.argmax(np.isnan(values)))]!r} has a NaN score")
    return [(docnos[i], scores[i]) for i in _trec_order(keys, values)]


def _trec_order(keys: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """Positions in trec_eval's order of ``scores`` (float64): float32 score descending, then
    docno descending, ``keys`` being the docnos or anything that sorts as they do (their ranks
    among sorted docnos). The docnos of one query are distinct, so the reverse of the ascending
    sort by (score, docno) is that order."""
    if keys.dtype.kind not in "iu" or (len(keys) and not 0 <= keys.min() <= keys.max() < 2**32):
        return np.lexsort((keys, _float32_sims(scores)))[::-1]
    return np.argsort(_sort_keys(keys, scores))[::-1]


def _float32_sims(scores: np.ndarray) -> np.ndarray:
    """``scores`` as trec_eval reads them: C ``float``s (beyond float32's range: +-inf), ``-0.0``
    made ``0.0`` (they tie, as in C)."""
    with np.errstate(over="ignore"):
        return scores.astype(np.float32) + np.float32(0.0)


def _sort_keys(keys: np.ndarray, scores: np.ndarray) -> np.ndarray:
    """``uint64`` keys that sort as (float32 score, key) ascending, ``keys`` in ``0..2**32 - 1``:
    the float's bits made to sort as the float, then the key. No key of a score that is not a
    NaN is below ``(2**23 - 1) * 2**32`` (that of -inf), so a 0 sorts before all of them."""
    bits = _float32_sims(scores).view(np.uint32)
    ordered = np.where(bits >> 31, ~bits, bits | np.uint32(1 << 31)).astype(np.uint64)
    return (ordered << np.uint64(32)) | keys.astype(np.uint64)


def _trec_orders(keys: np.ndarray, scores: np.ndarray, counts: np.ndarray, depth: int | None) -> np.ndarray:
    """Positions in ``keys`` / ``scores`` (queries one after the other, ``counts`` each) that
    put each query's documents in :func:`_trec_order`, the first ``depth`` of each (``None``:
    all), query after query.

    The queries are sorted together, as the rows of tables of up to :data:`_TABLE_CELLS` keys
    padded with zeros (which sort first: see :func:`_sort_keys`), unless padding would more than
    double the keys."""
    starts = np.cumsum(counts) - counts
    kept = counts if depth is None else np.minimum(counts, depth)
    most = int(counts.max(initial=0))
    if len(counts) * most > 2 * len(keys) + 4096:
        return np.concatenate(
            [
                start + _trec_order(keys[start : start + n], scores[start : start + n])[:k]
                for start, n, k in zip(starts.tolist(), counts.tolist(), kept.tolist(), strict=True)
            ]
            or [np.zeros(0, np.int64)]
        )
    columns, sort_keys = np.arange(most), _sort_keys(keys, scores)
    rows = max(1, _TABLE_CELLS // max(most, 1))
    parts = [np.zeros(0, np.int64)]
    for first in range(0, len(counts), rows):
        block = slice(first, first + rows)
        n, at = counts[block], starts[block]
        table = np.zeros((len(n), most), dtype=np.uint64)
        table[columns < n[:, None]] = sort_keys[at[0] : at[-1] + n[-1]]
        order = np.argsort(table, axis=1)[:, ::-1]  # per row: its documents best first, then the zeros
        parts.append((order + at[:, None])[columns < kept[block][:, None]])
    return np.concatenate(parts)


_TABLE_CELLS = 1 << 22
"""Keys sorted at once by :func:`_trec_orders` (32 MB)."""


@dataclass(frozen=True)
class RunArrays:
    """A run held as arrays: what a reranker produces, written by :func:`write_run` without
    the ``{qid: {docno: score}}`` dictionaries (:meth:`to_run` makes them).

    Attributes:
        docnos: The documents that ``positions`` index, each once.
        qids: The queries, each once.
        positions: Per query, ``int64`` positions in ``docnos`` of its documents, each once.
        scores: Per query, its documents' scores (``float64``), aligned with ``positions``.
    """

    docnos: Sequence[str]
    qids: Sequence[str]
    positions: Sequence[np.ndarray]
    scores: Sequence[np.ndarray]

    def __len__(self) -> int:
        """The number of queries."""
        return len(self.qids)

    def to_run(self) -> Run:
        """The run as ``run[qid][docno] = score``, each query's documents in their order here."""
        docnos = self.docnos
        return {
            qid: dict(zip([docnos[i] for i in pos.tolist()], values.tolist(), strict=True))
            for qid, pos, values in zip(self.qids, self.positions, self.scores, strict=True)
        }

    @classmethod
    def from_run(cls, run: Run, path: str | Path = "<run>") -> RunArrays:
        """The arrays of ``run`` (its documents numbered in order of first appearance).

        Raises:
            ConfigError: On a score that is not a finite number (naming ``path``, the file left
                unwritten).
        """
        docnos = list(dict.fromkeys(chain.from_iterable(run.values())))
        index = {docno: i for i, docno in enumerate(docnos)}
        qids = list(run)
        positions = [np.fromiter(map(index.__getitem__, run[qid]), np.int64, len(run[qid])) for qid in qids]
        return cls(docnos, qids, positions, [_scores(path, qid, run[qid]) for qid in qids])


def write_run(
    path: str | Path,
    run: Run | RunArrays | Iterable[RunArrays],
    tag: str = "clir",
    depth: int | None = None,
    workers: int | None = None,
) -> int:
    """Write a run in TREC format (atomically), each query's documents in :func:`ranked` order.

    Scores are written exactly (``repr`` of the float64) and the rank column numbers that order,
    so trec_eval, ir_measures and :func:`read_run` all rank the file as :func:`ranked` ranks
    ``run``. The lines of a large run are made by worker processes where the machine has spare
    cores (:func:`clir.formats._runtext.run_texts`); the file is the same.

    The run may come in parts (e.g. :func:`clir.training.ensemble.rerank_parts`): each part is
    checked, ranked and handed to its workers as it comes, and its lines are written once the
    next part has been handed over, so that making a part overlaps the workers' formatting of
    the one before. The file is the one the parts' queries would give written as one run.

    Args:
        path: Output file.
        run: ``run[qid][docno] = score``, the same as :class:`RunArrays` (the same file), or an
            iterable of :class:`RunArrays` parts in the file's order (every qid of a part after
            every qid of the parts before it, as ``sorted`` orders strings).
        tag: The run tag (sixth column): an identifier (no whitespace).
        depth: Keep only the top ``depth`` documents per query (``None``: all).
        workers: Worker processes making the lines of a run or part (0: none; ``None``: chosen
            by its size and the machine's cores).

    Returns:
        The number of queries written: those with at least one line (a query of ``run`` without
        documents has none in the file).

    Raises:
        ConfigError: Before the file is replaced, on an invalid qid, docno or tag (see
            :mod:`clir.formats.identifiers`), a score that is not a finite number, a negative
            ``depth``, arrays that do not describe a run (a document twice for a query,
            positions outside ``docnos``, as many scores as positions), parts out of the
            file's order, or a query whose documents are no ``{docno: score}`` mapping.
    """
    check_identifier(tag, "run tag", path)
    whole = isinstance(depth, (int, np.integer)) and not isinstance(depth, bool)
    if depth is not None and (not whole or depth < 0):
        raise ConfigError(f"{path}: not written: depth must be an integer >= 0 or None, got {depth!r}")
    depth = None if depth is None else int(depth)  # numpy's integers are integers (had been refused)
    parts = [run] if isinstance(run, (Mapping, RunArrays)) else run
    written, last = 0, None
    ranks = _DocnoRanks(path)
    with atomic_write(path, "wb") as out, ExitStack() as stack:
        made: Iterable[bytes] = ()  # the lines of the part before, read once the next is handed over
        for part in parts:
            qids, sizes, texts = _part_texts(path, part, tag, depth, workers, stack, ranks)
            if qids and last is not None and qids[0] <= last:
                raise ConfigError(
                    f"{path}: not written: the parts are not in the file's order (query {qids[0]!r} "
                    f"comes after {last!r}); expected each part's qids after the parts' before it"
                )
            out.writelines(made)
            made, last = texts, qids[-1] if qids else last
            written += sum(1 for size in sizes if size)
        out.writelines(made)
    return written


class _DocnoRanks:
    """Each docno's place among a run's sorted docnos, the docnos checked; kept while parts
    share one docno list."""

    def __init__(self, path: str | Path) -> None:
        self.path, self.docnos, self.ranks = path, None, np.zeros(0, np.int64)

    def __call__(self, docnos: Sequence[str]) -> np.ndarray:
        if docnos is not self.docnos:
            for docno in docnos:
                check_identifier(docno, "docno", self.path)
            order = sorted(range(len(docnos)), key=docnos.__getitem__)
            # one docno at two positions: a query listing both had been written with a document
            # twice, a file that read_run refuses
            twice = next((docnos[i] for i, j in pairwise(order) if docnos[i] == docnos[j]), None)
            if twice is not None:
                raise ConfigError(f"{self.path}: not written: docno {twice!r} is listed twice in the docnos")
            rank = np.empty(len(docnos), dtype=np.int64)
            rank[order] = np.arange(len(docnos))
            self.docnos, self.ranks = docnos, rank
        return self.ranks


def _part_texts(
    path: str | Path,
    run: Run | RunArrays,
    tag: str,
    depth: int | None,
    workers: int | None,
    stack: ExitStack,
    ranks: _DocnoRanks,
) -> tuple[list[str], list[int], Iterable[bytes]]:
    """The qids of ``run`` in the file's order, their numbers of lines, and the text of those
    lines, handed to workers started now (entered into ``stack``) or made here as the texts are
    iterated."""
    arrays_given = isinstance(run, RunArrays)
    for qid in run.qids if arrays_given else run:
        check_identifier(qid, "qid", path)
        if not arrays_given and not isinstance(run[qid], Mapping):  # a list had been an AttributeError
            raise ConfigError(
                f"{path}: not written: query {qid!r} holds a {type(run[qid]).__name__}; expected "
                "{docno: score} (a run is {qid: {docno: score}})"
            )
    if arrays_given:
        _check_shapes(path, run)
    arrays = run if arrays_given else RunArrays.from_run(run, path)
    in_file = sorted(range(len(arrays.qids)), key=arrays.qids.__getitem__)
    counts = np.asarray([len(arrays.positions[i]) for i in in_file], dtype=np.int64)
    sizes = (counts if depth is None else np.minimum(counts, depth)).tolist()
    started = stack.enter_context(started_workers(sizes, workers))  # they start up while it is ranked
    docnos = arrays.docnos
    rank = ranks(docnos)
    positions = _concatenated([arrays.positions[i] for i in in_file], np.int64)
    values = _concatenated([arrays.scores[i] for i in in_file], np.float64)
    if arrays_given:
        _check_contents(path, arrays, in_file, counts, positions, values)
    order = _trec_orders(rank[positions], values, counts, depth)
    positions, values = positions[order], values[order]  # every query's lines in rank order
    ends = np.cumsum(sizes, dtype=np.int64).tolist()
    jobs = (
        (arrays.qids[i], positions[end - size : end].tobytes(), values[end - size : end].tobytes())
        for i, size, end in zip(in_file, sizes, ends, strict=True)
    )
    return [arrays.qids[i] for i in in_file], sizes, run_texts(docnos, tag, jobs, sizes, started)


def _concatenated(arrays: Sequence[np.ndarray], dtype: type) -> np.ndarray:
    """``arrays`` one after the other (an empty array of ``dtype`` for none)."""
    return np.concatenate(arrays) if len(arrays) else np.zeros(0, dtype=dtype)


def _check_shapes(path: str | Path, run: RunArrays) -> None:
    """Raise :class:`~clir.errors.ConfigError` unless ``run`` has one array of positions
    (``int64``) and one of scores (``float64``, as many) per distinct qid."""
    if len(set(run.qids)) != len(run.qids) or not len(run.qids) == len(run.positions) == len(run.scores):
        raise ConfigError(
            f"{path}: not written: {len(run.qids)} qids ({len(set(run.qids))} distinct), "
            f"{len(run.positions)} position arrays and {len(run.scores)} score arrays; "
            "expected one of each per query"
        )
    for qid, positions, values in zip(run.qids, run.positions, run.scores, strict=True):
        if (
            positions.dtype != np.int64
            or values.dtype != np.float64
            or positions.ndim != 1
            or positions.shape != values.shape
        ):
            raise ConfigError(
                f"{path}: not written: query {qid!r} has positions {positions.dtype}{positions.shape} and "
                f"scores {values.dtype}{values.shape}; expected int64 and float64 of one length"
            )


def _check_contents(
    path: str | Path,
    run: RunArrays,
    queries: Sequence[int],
    counts: np.ndarray,
    positions: np.ndarray,
    values: np.ndarray,
) -> None:
    """Raise :class:`~clir.errors.ConfigError` unless every position of ``run`` is one of its
    docnos, listed once per query, with a finite score; ``positions`` and ``values`` are those of
    ``run``'s ``queries`` one after the other, ``counts`` each."""

    def qid_at(at: int) -> str:  # the query of the position at ``at``
        return run.qids[queries[int(np.searchsorted(np.cumsum(counts), at, side="right"))]]

    outside = (positions < 0) | (positions >= len(run.docnos))
    if outside.any():
        raise ConfigError(
            f"{path}: not written: query {qid_at(int(outside.argmax()))!r} has document positions "
            f"outside 0..{len(run.docnos) - 1}"
        )
    last = np.full(len(run.docnos), -1, dtype=np.int64)  # per document, where a query last listed it
    for qid, listed in zip(run.qids, run.positions, strict=True):
        order = np.arange(len(listed))
        last[listed] = order
        if not np.array_equal(last[listed], order):
            twice = run.docnos[int(listed[last[listed] != order][0])]
            raise ConfigError(f"{path}: not written: document {twice!r} listed twice for query {qid!r}")
    if not np.isfinite(values).all():
        at = int(np.flatnonzero(~np.isfinite(values))[0])
        _check_score(path, qid_at(at), run.docnos[int(positions[at])], float(values[at]))


def _scores(path: str | Path, qid: str, docs: Mapping[str, object]) -> np.ndarray:
    """The scores of one query's documents as float64 (``float`` of each).

    Raises:
        ConfigError: On a score that is not a finite number (see :func:`_check_score`).
    """
    if all(isinstance(score, float) for score in docs.values()):  # the usual run (numpy's float64 is one)
        values = np.fromiter(docs.values(), dtype=np.float64, count=len(docs))
        if np.isfinite(values).all():
            return values
    for docno, score in docs.items():
        _check_score(path, qid, docno, score)
    return np.asarray([float(score) for score in docs.values()], dtype=np.float64)  # type: ignore[arg-type]


def _check_score(path: str | Path, qid: str, docno: str, score: object) -> None:
    """Raise unless ``score`` is a finite real number: a string, bytes or a bool is none (numpy
    would read ``"3.5"`` and ``True`` as floats, and :func:`~clir.evaluation.evaluate` refuses
    them)."""
    real = isinstance(score, (int, float, np.integer, np.floating)) and not isinstance(
        score, (bool, np.bool_)
    )
    try:
        finite = real and math.isfinite(score)  # type: ignore[arg-type]
    except OverflowError:  # an int past float's range
        finite = False
    if not finite:
        raise ConfigError(
            f"{path}: not written: score of {docno!r} for query {qid!r} is {score!r}; "
            "expected a finite number"
        )

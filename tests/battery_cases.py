"""The bad-input, fault and concurrency battery of issue 12 ("nothing lost, nothing silently wrong").

Each :class:`Case` writes files into a fresh directory, runs one ``clir`` command line (in this
process through :func:`clir.cli.main`, or in separate processes for kills and races) and is
classified as exactly one of :data:`OUTCOMES`:

- ``clear error``: exit 2, a ``clir: error:`` line naming what the case says it must name
  (``path:N``, the config key, the option, the path), no traceback;
- ``ok``: exit 0 and the numbers are right (checked against values computed by hand or by an
  independent route, e.g. ir_measures on the same file);
- ``traceback``: an exception escaped, or ``Traceback`` / ``unexpected`` was printed;
- ``silent wrong number``: exit 0 but a wrong value (or a bad input accepted);
- ``data lost``: a file the case's user put there changed or vanished;
- ``unclear error``: exit != 0 but the message does not name the culprit (or, for a config, work
  began before the error).

A case passes when its outcome is the one it expects. ``experiments/battery.py`` runs them all and
prints the summary; ``tests/test_battery.py`` runs the fast, in-process part. No pytest here.
"""

from __future__ import annotations

import contextlib
import copy
import hashlib
import io
import json
import math
import os
import random
import shutil
import signal
import subprocess
import sys
import time
import traceback
import warnings
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import yaml

REPO = Path(__file__).resolve().parents[1]

OUTCOMES = ("clear error", "ok", "traceback", "silent wrong number", "data lost", "unclear error")
CLEAR, OK = OUTCOMES[0], OUTCOMES[1]

# --------------------------------------------------------------------------- the harness


@dataclass
class Trace:
    """What one command (or a reduced multi-process scenario) did."""

    code: int | None
    out: str = ""
    err: str = ""
    escaped: str = ""  # the traceback of an exception that escaped main()
    started: str = ""  # the step a config reached before it was rejected (guarded runs)


@dataclass
class Ctx:
    """What a setup, a runner or a check sees: the case's directory and the shared fixtures."""

    d: Path
    fx: Fixtures
    trace: Trace = field(default_factory=lambda: Trace(None))
    others: list[Trace] = field(default_factory=list)  # the other runs of a race

    def path(self, text: str) -> str:
        return text.format(d=self.d)


Check = Callable[[Ctx], "str | None"]
"""Returns what is wrong (``None`` when right)."""


@dataclass(frozen=True)
class Expect:
    """What a case must do.

    Attributes:
        outcome: ``"clear error"`` or ``"ok"``.
        names: What the error line must hold; ``{d}`` is the case's directory; a tuple item
            is satisfied by any of its alternatives.
        warns: Substrings that some ``clir: warning:`` line must hold, each.
        quiet: For ``ok``: no ``clir: warning:`` line at all.
        check: For ``ok``: the numbers (called only on exit 0).
        after: Called whatever the outcome (e.g. the other run of a race finished right).
        may_change: Files of the case's directory (relative prefixes) the command may replace.
    """

    outcome: str
    names: tuple[str | tuple[str, ...], ...] = ()
    warns: tuple[str, ...] = ()
    quiet: bool = False
    check: Check | None = None
    after: Check | None = None
    may_change: tuple[str, ...] = ()


@dataclass(frozen=True)
class Case:
    """One case: a setup writing files into ``d``, a command line, an expectation.

    Attributes:
        argv: The ``clir`` arguments; ``{d}`` is the case's directory.
        slow: Needs an experiment run or separate processes (left out of the fast test).
        guard: Stop the battery at the first experiment step (a config case must fail before).
        runner: Replaces the in-process call (subprocesses, races, kills).
    """

    name: str
    category: str
    setup: Callable[[Ctx], None]
    argv: tuple[str, ...]
    expect: Expect
    slow: bool = False
    guard: bool = False
    runner: Callable[[Ctx, list[str]], Trace] | None = None


@dataclass
class Result:
    name: str
    category: str
    expected: str
    outcome: str
    passed: bool
    detail: str
    seconds: float


class WorkStarted(BaseException):
    """Raised by the guard at the first step of a config that should have been rejected."""


def call(argv: Sequence[str], guard: bool = False) -> Trace:
    """Run ``clir ARGV`` in this process, stdout/stderr captured, every warning shown."""
    from clir.cli import main
    from clir.pipeline.cache import StepRunner

    def refuse(self: Any, name: str, *args: Any, **kwargs: Any) -> Any:
        raise WorkStarted(name)

    out, err = io.StringIO(), io.StringIO()
    trace = Trace(None)
    with contextlib.ExitStack() as stack:
        stack.enter_context(mock.patch.dict(os.environ))
        os.environ.pop("CLIR_DEBUG", None)
        stack.enter_context(warnings.catch_warnings())
        warnings.simplefilter("always")  # each case sees its warnings, of the categories shown by default
        for hidden in (DeprecationWarning, PendingDeprecationWarning, ImportWarning, ResourceWarning):
            warnings.simplefilter("ignore", hidden)
        if guard:
            stack.enter_context(mock.patch.object(StepRunner, "run", refuse))
        stack.enter_context(contextlib.redirect_stdout(out))
        stack.enter_context(contextlib.redirect_stderr(err))
        try:
            trace.code = main(list(argv))
        except SystemExit as exit_:
            trace.code = exit_.code if isinstance(exit_.code, int) else int(exit_.code is not None)
        except WorkStarted as started:
            trace.started = str(started)
        except Exception:
            trace.escaped = traceback.format_exc()
    trace.out, trace.err = out.getvalue(), err.getvalue()
    return trace


def clir_process(argv: Sequence[str], cwd: Path, **kwargs: Any) -> subprocess.Popen:
    """Start ``python -m clir.cli ARGV`` (its own process group, output to pipes)."""
    env = {k: v for k, v in os.environ.items() if k != "CLIR_DEBUG"}
    return subprocess.Popen(
        [sys.executable, "-m", "clir.cli", *argv],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
        **kwargs,
    )


def finish(process: subprocess.Popen, timeout: float = 300) -> Trace:
    out, err = process.communicate(timeout=timeout)
    return Trace(process.returncode, out, err)


def file_hashes(root: Path) -> dict[str, str]:
    """SHA-256 of every file under ``root`` (relative POSIX paths; links not followed)."""
    hashes = {}
    for path in sorted(root.rglob("*")):
        if path.is_file() and not path.is_symlink():
            hashes[path.relative_to(root).as_posix()] = hashlib.sha256(path.read_bytes()).hexdigest()
    return hashes


def _error_lines(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("clir: error:")]


def _named(line: str, name: str | tuple[str, ...], ctx: Ctx) -> bool:
    alternatives = (name,) if isinstance(name, str) else name
    return any(ctx.path(alt) in line for alt in alternatives)


def classify(case: Case, ctx: Ctx, before: dict[str, str]) -> tuple[str, str]:
    """The outcome of a finished case and a one-line detail."""
    trace, expect = ctx.trace, case.expect
    after = file_hashes(ctx.d)
    lost = [
        name
        for name, digest in before.items()
        if after.get(name) != digest and not any(name.startswith(p) for p in expect.may_change)
    ]
    problem = expect.after(ctx) if expect.after else None
    if lost:
        return "data lost", f"changed or removed: {lost[:5]}"
    if trace.escaped:
        return "traceback", trace.escaped.strip().splitlines()[-1]
    errors = _error_lines(trace.err)
    if "Traceback" in trace.err or any("unexpected" in line for line in errors):
        return "traceback", _tail(trace.err)
    if trace.started:
        return "unclear error", f"not rejected before the work: the first step ({trace.started}) began"
    if trace.code == 0:
        if expect.outcome != OK:
            return "silent wrong number", f"exit 0 where an error was expected; stdout: {_tail(trace.out)}"
        warned = [line for line in trace.err.splitlines() if line.startswith("clir: warning:")]
        missing = [w for w in expect.warns if not any(ctx.path(w) in line for line in warned)]
        if missing:
            return "silent wrong number", f"no warning holding {missing}; stderr: {_tail(trace.err)}"
        if expect.quiet and warned:
            return "silent wrong number", f"unexpected warning: {warned[0]}"
        problem = problem or (expect.check(ctx) if expect.check else None)
        return ("silent wrong number", problem) if problem else (OK, "")
    if not errors:
        return "unclear error", f"exit {trace.code} without a 'clir: error:' line: {_tail(trace.err)}"
    missing = [name for name in expect.names if not any(_named(line, name, ctx) for line in errors)]
    if missing or trace.code != 2:
        return "unclear error", f"exit {trace.code}; {errors[0]!r} does not name {missing}"
    if problem:
        return "silent wrong number", problem
    return CLEAR, errors[0]


def _tail(text: str, width: int = 300) -> str:
    text = " | ".join(line for line in text.strip().splitlines()[-3:])
    return text if len(text) <= width else "..." + text[-width:]


def run_case(case: Case, root: Path, fx: Fixtures) -> Result:
    """Set up, run and classify one case in a fresh directory under ``root``."""
    start = time.perf_counter()
    ctx = Ctx(root / _slug(case.name), fx)
    ctx.d.mkdir(parents=True)
    try:
        case.setup(ctx)
        before = file_hashes(ctx.d)
        argv = [ctx.path(arg) for arg in case.argv]
        ctx.trace = case.runner(ctx, argv) if case.runner else call(argv, case.guard)
        outcome, detail = classify(case, ctx, before)
    except Exception:
        outcome, detail = "traceback", "the battery itself failed: " + traceback.format_exc()[-600:]
    seconds = round(time.perf_counter() - start, 2)
    expected = case.expect.outcome
    return Result(case.name, case.category, expected, outcome, outcome == expected, detail, seconds)


def _slug(name: str) -> str:
    return "".join(ch if ch.isalnum() or ch in "-_." else "_" for ch in name)[:80]


def run_battery(
    cases: Sequence[Case], root: Path, progress: Callable[[Result], None] | None = None
) -> list[Result]:
    """Run cases (the fixtures they share are built once under ``root``)."""
    fx = Fixtures(root / "_fixtures")
    results = []
    for case in cases:
        result = run_case(case, root / case.category, fx)
        results.append(result)
        if progress:
            progress(result)
    return results


COLUMNS = ("cases tried", "clear errors", "ok", "tracebacks", "silent wrong numbers", "data lost", "unclear")


def summary(results: Sequence[Result]) -> dict[str, dict[str, int]]:
    """Totals per category and overall: cases, each outcome, and cases not as expected."""
    rows: dict[str, dict[str, int]] = {}
    for key in [*dict.fromkeys(r.category for r in results), "total"]:
        chosen = [r for r in results if key in (r.category, "total")]
        row = {"cases tried": len(chosen)}
        row.update(
            {col: sum(r.outcome == o for r in chosen) for col, o in zip(COLUMNS[1:], OUTCOMES, strict=True)}
        )
        row["not as expected"] = sum(not r.passed for r in chosen)
        rows[key] = row
    return rows


def markdown(rows: dict[str, dict[str, int]]) -> str:
    header = ["category", *next(iter(rows.values()))]
    lines = ["| " + " | ".join(header) + " |", "| --- |" + " ---: |" * (len(header) - 1)]
    for name, row in rows.items():
        label = f"**{name}**" if name == "total" else name
        lines.append(f"| {label} | " + " | ".join(str(v) for v in row.values()) + " |")
    return "\n".join(lines)


def report(results: Sequence[Result]) -> dict[str, Any]:
    """The JSON the script prints: every case, and the totals."""
    return {"cases": [asdict(r) for r in results], "totals": summary(results)}


# --------------------------------------------------------------------------- shared fixtures


class Fixtures:
    """Inputs several cases copy, built once each on first use under ``root``."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[str, Path] = {}

    def get(self, name: str) -> Path:
        if name not in self.built:
            path = self.root / name
            path.parent.mkdir(parents=True, exist_ok=True)
            BUILDERS[name](self, path)
            self.built[name] = path
        return self.built[name]

    def copy(self, name: str, dest: Path) -> Path:
        shutil.copytree(self.get(name), dest, symlinks=True)
        return dest


def _clir(argv: Sequence[str]) -> None:
    trace = call([str(a) for a in argv])
    if trace.code != 0:
        raise RuntimeError(f"clir {' '.join(map(str, argv))} failed: {trace.escaped or _tail(trace.err)}")


# A hand-made English -> Swahili collection: every number below is checked against these.
DOCS = {
    "d1": "mungu aliumba mbingu na dunia",
    "d2": "yesu alikwenda mjini yerusalemu pamoja na wanafunzi",
    "d3": "mtu mwema hupenda amani na haki",
    "d4": "maji ya mto ni baridi sana",
    "d5": "mkate na samaki kwa watu wengi",
    "d6": "nyumba ya baba yangu ina vyumba vingi",
}
PARALLEL = [
    ("p1", "god created the heaven and the earth", "mungu aliumba mbingu na dunia"),
    ("p2", "jesus went to the city", "yesu alikwenda mjini"),
    ("p3", "a good man loves peace", "mtu mwema hupenda amani"),
    ("p4", "the water of the river is cold", "maji ya mto ni baridi"),
    ("p5", "bread and fish for the people", "mkate na samaki kwa watu"),
    ("p6", "the house of my father", "nyumba ya baba yangu"),
    ("p7", "god loves the people", "mungu hupenda watu"),
    ("p8", "the city of god", "mji wa mungu"),
]
TOPICS = {
    "train": [("q3", "bread fish", "bread and fish for the people")],
    "dev": [("q4", "father house", "the house of my father")],
    "test": [("q1", "god earth", "god created the earth"), ("q2", "cold water", "the water is cold")],
}
QRELS = [("q1", "d1", 2), ("q1", "d3", 1), ("q2", "d4", 2), ("q2", "d2", 0), ("q3", "d5", 2), ("q4", "d6", 1)]


def _lines(rows: Sequence[Sequence[Any]], sep: str) -> bytes:
    return "".join(sep.join(str(cell) for cell in row) + "\n" for row in rows).encode()


COLLECTION_FILES: dict[str, bytes] = {
    "documents.jsonl": "".join(json.dumps({"docno": k, "text": v}) + "\n" for k, v in DOCS.items()).encode(),
    **{f"topics.{split}.tsv": _lines(rows, "\t") for split, rows in TOPICS.items()},
    "qrels.txt": _lines([(q, 0, d, r) for q, d, r in QRELS], " "),
    "parallel.tsv": _lines(PARALLEL, "\t"),
    "collection.json": json.dumps({"name": "hand", "doc_lang": "sw", "query_lang": "en"}).encode(),
}


def expected_stats(documents: int = len(DOCS), parallel: int = len(PARALLEL)) -> dict[str, Any]:
    """``clir data check``'s statistics of the hand-made collection, counted here by hand."""
    qids = [q for rows in TOPICS.values() for q, _, _ in rows]
    judged = {q: [r for qq, _, r in QRELS if qq == q] for q in qids}
    grades = sorted({r for _, _, r in QRELS if r > 0}, reverse=True)
    return {
        "documents": documents,
        "document_words": sum(len(text.split()) for text in list(DOCS.values())[:documents]),
        "queries": {split: len(rows) for split, rows in TOPICS.items()},
        "judged_per_query": round(sum(map(len, judged.values())) / len(qids), 4),
        "relevant_per_query": {
            str(g): round(sum(rs.count(g) for rs in judged.values()) / len(qids), 4) for g in grades
        },
        "parallel_pairs": parallel,
    }


Content = bytes | bool | None
"""A file's bytes; ``None``: a directory there; ``False``: nothing there."""


def _write(root: Path, files: dict[str, Content]) -> None:
    for name, content in files.items():
        path = root / name
        if content is None:
            path.mkdir(parents=True, exist_ok=True)
        elif content is not False:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_bytes(content)


def _build_collection(fx: Fixtures, path: Path) -> None:
    _write(path, COLLECTION_FILES)


def _build_experiment(fx: Fixtures, path: Path) -> None:
    config = fx.root / "experiment.yaml"
    config.write_text(yaml.safe_dump(tiny_experiment()))
    _clir(["experiment", config, "--out", path, "--quiet"])


BUILDERS: dict[str, Callable[[Fixtures, Path], None]] = {
    "collection": _build_collection,
    "experiment": _build_experiment,
}

BIBLE_ARGS = ("--pair", "en-sw", "--n-train", "2", "--n-dev", "2", "--n-test", "2", "--quiet")


def tiny_reranker() -> dict[str, Any]:
    config = yaml.safe_load((REPO / "configs" / "reranker-tiny.yaml").read_text())
    config["optim"]["epochs"] = 1
    return config


def tiny_experiment() -> dict[str, Any]:
    """A Bible experiment that runs in about ten seconds on 2 cores."""
    return {
        "name": "battery tiny",
        "train_pair": "en-sw",
        "zero_shot_pairs": [],
        "split": "test",
        "collection": {
            "collection_books": [8, 57],
            "parallel_books": [62, 64],
            "n_train": 8,
            "n_dev": 4,
            "n_test": 8,
        },
        "tables": {"iterations": 2},
        "baselines": {"modes": ["qt"], "models": ["bm25", "ql"], "k": 100},
        "embeddings": {"method": "word2vec", "dim": 8, "window": 5, "epochs": 1, "min_count": 1},
        "reranker": tiny_reranker(),
        "systems": {"full": {}},
        "ensemble_seeds": [0],
        "significance": {"permutations": 100, "bootstrap_samples": 100},
    }


# --------------------------------------------------------------------------- helpers for cases


Setup = Callable[[Ctx], None]


def files(**content: Content) -> Setup:
    """A setup writing these files (see :data:`Content`)."""
    return lambda ctx: _write(ctx.d, content)


def copies(*fixtures: str) -> Setup:
    """A setup copying fixtures into the case's directory, under their names."""

    def setup(ctx: Ctx) -> None:
        for name in fixtures:
            ctx.fx.copy(name, ctx.d / name)

    return setup


def nothing(ctx: Ctx) -> None:
    """The setup of a case that needs no file."""


def collection_with(changes: dict[str, Content]) -> Setup:
    """A setup copying the hand-made collection to ``d/coll``, these files replaced."""

    def setup(ctx: Ctx) -> None:
        coll = ctx.fx.copy("collection", ctx.d / "coll")
        for name in changes:
            (coll / name).unlink(missing_ok=True)
        _write(coll, changes)

    return setup


def then(*setups: Setup) -> Setup:
    def setup(ctx: Ctx) -> None:
        for step in setups:
            step(ctx)

    return setup


def error_at(file: str, line: int | None = None, *names: str) -> Expect:
    """A clear error naming ``{d}/file:line`` (or just the file) and ``names``."""
    where = f"{{d}}/{file}" + (f":{line}" if line is not None else "")
    return Expect(CLEAR, names=(where, *names))


def _json_out(ctx: Ctx) -> Any:
    return json.loads(ctx.trace.out)


def _close(a: float | None, b: float | None) -> bool:
    return a is not None and b is not None and math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)


def per_query(expected: dict[str, dict[str, float]]) -> Check:
    """For ``evaluate --json --per-query``: each measure's mean and per-query values."""

    def check(ctx: Ctx) -> str | None:
        got = _json_out(ctx)
        for measure, values in expected.items():
            mean = sum(values.values()) / len(values)
            shown = got.get("per_query", {}).get(measure, {})
            if not _close(got.get(measure), mean) or set(shown) != set(values):
                return f"{measure}: got {got.get(measure)} {shown}, expected {mean} {values}"
            if not all(_close(shown[q], v) for q, v in values.items()):
                return f"{measure} per query: got {shown}, expected {values}"
        return None

    return check


def _compared_ap(ctx: Ctx) -> dict[str, Any]:
    """The AP comparison of ``compare A B --json --metrics AP`` (B against the baseline A)."""
    (by_measure,) = _json_out(ctx)["runs"].values()
    return by_measure["AP"]


def compared(expected_a: dict[str, float], expected_b: dict[str, float]) -> Check:
    """For ``compare A B --json --metrics AP``: the mean AP of A and of B."""

    def check(ctx: Ctx) -> str | None:
        got = _compared_ap(ctx)
        mean_a, mean_b = (sum(ap.values()) / len(ap) for ap in (expected_a, expected_b))
        if not (_close(got["mean_a"], mean_a) and _close(got["mean_b"], mean_b)):
            return f"AP means {got['mean_a']}, {got['mean_b']}; expected {mean_a}, {mean_b}"
        return None

    return check


def stats_are(expected: dict[str, Any]) -> Check:
    def check(ctx: Ctx) -> str | None:
        got = _json_out(ctx)
        return None if got == expected else f"stats {got}, expected {expected}"

    return check


# --------------------------------------------------------------------------- readers: runs, qrels

RUN = (
    b"q1 Q0 d1 1 3.0 mine\n"
    b"q1 Q0 d2 2 2.0 mine\n"
    b"q1 Q0 d3 3 1.0 mine\n"
    b"q2 Q0 d3 1 5.0 mine\n"
    b"q2 Q0 d1 2 4.0 mine\n"
)
QRELS_TEXT = b"q1 0 d1 2\nq1 0 d3 1\nq2 0 d1 1\nq2 0 d2 0\n"
AP = {"q1": 5 / 6, "q2": 1 / 2}  # the README's example: (1/1 + 2/3)/2 and 1/2
BOM = b"\xef\xbb\xbf"
JSON_FILE = "{d}/coll/collection.json"


def _replace_line(text: bytes, number: int, line: bytes) -> bytes:
    lines = text.split(b"\n")
    lines[number - 1] = line
    return b"\n".join(lines)


def _garbage(size: int = 256, seed: int = 12) -> bytes:
    return random.Random(seed).randbytes(size)


Variant = tuple[str, Content, "int | dict[str, float] | None"]
"""(name, the file's content, the line at fault / None: the file / the APs expected)."""


def _common_variants(base: bytes, good: dict[str, float]) -> list[Variant]:
    """Corruptions of any line-oriented TREC file: (name, content, line at fault or expected AP)."""
    return [
        ("BOM", BOM + base, good),
        ("CRLF line ends", base.replace(b"\n", b"\r\n"), good),
        ("no final newline", base.rstrip(b"\n"), good),
        ("blank lines and tabs", b"\n" + base.replace(b" ", b"\t").replace(b"\n", b"\n\n"), good),
        ("BOM and CRLF", BOM + base.replace(b"\n", b"\r\n"), good),
        ("old Mac CR line ends", base.replace(b"\n", b"\r"), 1),
        ("UTF-16", ("\ufeff" + base.decode()).encode("utf-16-le"), 1),
        ("non-UTF-8 byte", _replace_line(base, 2, base.split(b"\n")[1].replace(b"d", b"\xe9", 1)), 2),
        ("NUL bytes only", b"\0" * 64, 1),
        ("NUL in a docno", _replace_line(base, 2, base.split(b"\n")[1].replace(b" d", b" d\0", 1)), 2),
        ("binary garbage", _garbage(), None),
        ("a directory", None, None),
        ("too few fields", _replace_line(base, 2, base.split(b"\n")[1].rsplit(b" ", 1)[0]), 2),
        ("too many fields", _replace_line(base, 3, base.split(b"\n")[2] + b" extra"), 3),
        ("one field", _replace_line(base, 1, b"q1"), 1),
    ]


def _identifier_variants(base: bytes, which: int) -> list[Variant]:
    """qid (field 0) / docno (field ``which``) holding a character no identifier may hold."""
    variants: list[Variant] = []
    for label, char in [
        ("\\x01", "\x01"),
        ("DEL", "\x7f"),
        ("zero-width space", "\u200b"),
        ("right-to-left override", "\u202e"),
        ("BOM inside", "\ufeff"),
        ("no-break space", "\u00a0"),
        ("line separator", "\u2028"),
        ("vertical tab", "\x0b"),
    ]:
        for field_name, index in (("qid", 0), ("docno", which)):
            cells = base.split(b"\n")[1].decode().split(" ")
            cells[index] = cells[index][:1] + char + cells[index][1:]
            variants.append(
                (f"{field_name} with {label}", _replace_line(base, 2, " ".join(cells).encode()), 2)
            )
    return variants


def _run_variants() -> list[Variant]:
    def score(text: str) -> bytes:
        return _replace_line(RUN, 2, f"q1 Q0 d2 2 {text} mine".encode())

    def rank(text: str) -> bytes:
        return _replace_line(RUN, 2, f"q1 Q0 d2 {text} 2.0 mine".encode())

    # fmt: off
    return [
        *_common_variants(RUN, AP),
        *_identifier_variants(RUN, 2),
        *[(f"score {s}", score(s), 2) for s in ("nan", "NaN", "inf", "-Infinity", "1e999", "-1e999", "abc",
                                                 "3,0", "0x1p3", "1_000", "\u0663")],
        ("score +2.5e0 (valid)", score("+2.5e0"), AP),
        *[(f"rank {r}", rank(r), 2) for r in ("1.0", "one", "", "99999999999999999999999")],
        ("rank 0 and Q0 column 'x' (both ignored)", RUN.replace(b"Q0 d2 2", b"x d2 0"), AP),
        ("duplicate docno", _replace_line(RUN, 3, b"q1 Q0 d1 3 1.0 mine"), 3),
        ("the same line twice", RUN + b"q2 Q0 d1 2 4.0 mine\n", 6),
        ("a line of spaces only", b"   \n" + RUN, AP),
    ]
    # fmt: on


def _qrels_variants() -> list[Variant]:
    def grade(text: str) -> bytes:
        return _replace_line(QRELS_TEXT, 2, f"q1 0 d3 {text}".encode())

    return [
        *_common_variants(QRELS_TEXT, AP),
        *_identifier_variants(QRELS_TEXT, 2),
        *[
            (f"grade {g}", grade(g), 2)
            for g in ("1.5", "abc", "99999999999999999999999", "nan", "\u0662", "1_0")
        ],
        ("grade -1 (non-relevant)", grade("-1"), {"q1": 1.0, "q2": 0.5}),
        ("grade +1 (relevant)", grade("+1"), AP),
        ("iteration column 'x' (ignored)", QRELS_TEXT.replace(b"q1 0", b"q1 x"), AP),
        ("duplicate judgement", _replace_line(QRELS_TEXT, 2, b"q1 0 d1 1"), 2),
        ("empty file", b"", None),
    ]


def _trec_cases(kind: str, variants: list[Variant]) -> list[Case]:
    """Each variant of a run or qrels file, and a missing one, through ``clir evaluate`` and
    ``clir compare`` (whose run A is the README's run)."""
    bad = f"{{d}}/bad.{kind}"
    # compare's run B: the bad run, or the README's run in another file (one file twice is refused)
    run, qrels = (bad, "{d}/good.qrels") if kind == "run" else ("{d}/copy.run", bad)
    commands = {
        "evaluate": (
            "evaluate",
            run.replace("copy.run", "good.run"),
            qrels,
            "--metrics",
            "AP",
            "--json",
            "--per-query",
        ),
        "compare": (
            "compare",
            "{d}/good.run",
            run,
            qrels,
            "--metrics",
            "AP",
            "--json",
            "--permutations",
            "100",
        ),
    }
    cases = []
    for name, content, fault in [*variants, ("missing file", False, None)]:
        setup = files(**{"good.run": RUN, "copy.run": RUN, "good.qrels": QRELS_TEXT, f"bad.{kind}": content})
        if isinstance(fault, dict):
            expects = {
                "evaluate": Expect(OK, check=per_query({"AP": fault})),
                "compare": Expect(OK, check=compared(AP if kind == "run" else fault, fault)),
            }
        else:
            expects = dict.fromkeys(commands, error_at(f"bad.{kind}", fault))
        for command, argv in commands.items():
            cases.append(
                Case(f"{kind}: {name} ({command})", f"readers: {kind}", setup, argv, expects[command])
            )
    return cases


# --------------------------------------------------------------------------- readers: collections


def _check_cases() -> list[Case]:
    """Corrupt files of the hand-made collection through ``clir data check`` (and ``evaluate``)."""
    base = expected_stats()
    docs = COLLECTION_FILES["documents.jsonl"]
    topics = COLLECTION_FILES["topics.test.tsv"]
    parallel = COLLECTION_FILES["parallel.tsv"]

    def doc_line(obj: Any) -> bytes:
        raw = obj if isinstance(obj, bytes) else json.dumps(obj).encode()
        return _replace_line(docs, 2, raw)

    def topic_line(raw: str) -> bytes:
        return _replace_line(topics, 2, raw.encode())

    line2, whole = "line 2", "the file"  # the error names coll/FILE:2, or coll/FILE
    ok = Expect(OK, quiet=True, check=stats_are(base))
    no_pairs = Expect(OK, quiet=True, check=stats_are(expected_stats(parallel=0)))
    # fmt: off
    table: list[tuple[str, str, Content, Expect | str]] = [
        ("documents", "BOM", BOM + docs, ok),
        ("documents", "CRLF", docs.replace(b"\n", b"\r\n"), ok),
        ("documents", "no final newline", docs.rstrip(b"\n"), ok),
        ("documents", "empty file", b"", whole),
        ("documents", "invalid JSON", doc_line(b'{"docno": "d2", "text": '), line2),
        ("documents", "a list, not an object", doc_line(["d2", "text"]), line2),
        ("documents", "no text", doc_line({"docno": "d2"}), line2),
        ("documents", "docno a number", doc_line({"docno": 99999999999999999999999, "text": "x"}), line2),
        ("documents", "extra field a number", doc_line({"docno": "d2", "text": "x", "year": 1}), line2),
        ("documents", "empty docno", doc_line({"docno": "", "text": "x"}), line2),
        ("documents", "docno with a space", doc_line({"docno": "d 2", "text": "x"}), line2),
        ("documents", "docno with a tab", doc_line({"docno": "d\t2", "text": "x"}), line2),
        ("documents", "docno with a newline", doc_line({"docno": "d\n2", "text": "x"}), line2),
        ("documents", "docno with NUL", doc_line({"docno": "d\u00002", "text": "x"}), line2),
        ("documents", "docno with zero-width space", doc_line({"docno": "d\u200b2", "text": "x"}), line2),
        ("documents", "duplicate docno", doc_line({"docno": "d1", "text": "x"}), line2),
        ("documents", "raw NUL in the text", doc_line(b'{"docno": "d2", "text": "a\x00b"}'), line2),
        ("documents", "non-UTF-8", doc_line(b'{"docno": "d2", "text": "caf\xe9"}'), line2),
        ("documents", "NaN field", doc_line(b'{"docno": "d2", "text": "x", "score": NaN}'), line2),
        ("documents", "binary garbage", _garbage(), whole),
        ("documents", "a directory", None, whole),
        ("documents", "missing", False, whole),
        ("topics.test.tsv", "BOM", BOM + topics, ok),
        ("topics.test.tsv", "CRLF", topics.replace(b"\n", b"\r\n"), ok),
        ("topics.test.tsv", "no final newline", topics.rstrip(b"\n"), ok),
        ("topics.test.tsv", "one field", topic_line("q2"), line2),
        ("topics.test.tsv", "four fields", topic_line("q2\tcold water\tlong\tmore"), line2),
        ("topics.test.tsv", "empty qid", topic_line("\tcold water"), line2),
        ("topics.test.tsv", "empty text", topic_line("q2\t \tthe water"), line2),
        ("topics.test.tsv", "duplicate qid", topic_line("q1\tcold water"), line2),
        ("topics.test.tsv", "qid with a space", topic_line("q 2\tcold water"), line2),
        ("topics.test.tsv", "qid with \\x01", topic_line("q\x012\tcold water"), line2),
        ("topics.test.tsv", "qid with NUL", topic_line("q\x002\tcold water"), line2),
        ("topics.test.tsv", "qid with zero-width space", topic_line("q\u200b2\tcold water"), line2),
        ("topics.test.tsv", "qid with no-break space", topic_line("q\u00a02\tcold water"), line2),
        ("topics.test.tsv", "non-UTF-8", _replace_line(topics, 2, b"q2\tcold w\xe9ter"), line2),
        ("topics.test.tsv", "binary garbage", _garbage(), whole),
        ("topics.test.tsv", "a directory", None, whole),
        ("topics.train.tsv", "qid also in topics.test.tsv", b"q1\tgod earth\n",
         Expect(CLEAR, ("topics.train.tsv", "topics.test.tsv", "q1"))),
        ("parallel.tsv", "BOM", BOM + parallel, ok),
        ("parallel.tsv", "CRLF", parallel.replace(b"\n", b"\r\n"), ok),
        ("parallel.tsv", "two fields", _replace_line(parallel, 2, b"p2\tjesus went"), line2),
        ("parallel.tsv", "four fields", _replace_line(parallel, 2, b"p2\ta\tb\tc"), line2),
        ("parallel.tsv", "empty pair id", _replace_line(parallel, 2, b"\tjesus went\tyesu alikwenda"), line2),
        ("parallel.tsv", "pair id with a space", _replace_line(parallel, 2, b"p 2\tjesus\tyesu"), line2),
        ("parallel.tsv", "non-UTF-8", _replace_line(parallel, 2, b"p2\tjesus\tyes\xfa"), line2),
        ("parallel.tsv", "binary garbage", _garbage(), whole),
        ("parallel.tsv", "a directory", None, whole),
        ("parallel.tsv", "empty file", b"", no_pairs),
        ("parallel.tsv", "missing (optional)", False, no_pairs),
        ("qrels.txt", "BOM", BOM + COLLECTION_FILES["qrels.txt"], ok),
        ("qrels.txt", "missing", False, whole),
        ("collection.json", "invalid JSON", b'{"doc_lang": "sw"', whole),
        ("collection.json", "empty file", b"", whole),
        ("collection.json", "BOM", BOM + COLLECTION_FILES["collection.json"], ok),
        ("collection.json", "a list", b'["sw"]', whole),
        ("collection.json", "doc_lang a number", b'{"doc_lang": 5}', Expect(CLEAR, (JSON_FILE, "doc_lang"))),
        ("collection.json", "doc_lang empty", b'{"doc_lang": ""}', Expect(CLEAR, ("{d}/coll", "doc_lang"))),
        ("collection.json", "name a list", b'{"doc_lang": "sw", "name": [1]}',
         Expect(CLEAR, (JSON_FILE, "name"))),
        ("collection.json", "non-UTF-8", b'{"doc_lang": "sw", "name": "h\xe9"}', whole),
        ("collection.json", "missing (no --doc-lang)", False,
         Expect(CLEAR, ("{d}/coll", ("doc_lang", "doc-lang")))),
        ("stats.json", "invalid JSON", b'{"documents": ', whole),
        ("stats.json", "a list", b"[6]", whole),
        ("stats.json", "empty file", b"", whole),
        ("stats.json", "BOM", BOM + b"{}", ok),
    ]
    # fmt: on
    cases = []
    for file, name, content, expect in table:
        path = "documents.jsonl" if file == "documents" else file
        if isinstance(expect, str):
            expect = error_at(f"coll/{path}", 2 if expect == line2 else None)
        short = {"qrels.txt": "qrels", "parallel.tsv": "parallel"}.get(file, file.split(".")[0])
        cases.append(
            Case(
                f"{file}: {name} (data check)",
                f"readers: {short}",
                collection_with({path: content}),
                ("data", "check", "{d}/coll"),
                expect,
            )
        )
    cases += [
        Case(
            "collection.json: missing, --doc-lang sw (data check)",
            "readers: collection",
            collection_with({"collection.json": False}),
            ("data", "check", "{d}/coll", "--doc-lang", "sw"),
            Expect(OK, quiet=True, check=stats_are(base)),
        ),
        Case(
            "stats.json: says 999 documents (data check)",
            "readers: stats",
            collection_with({"stats.json": json.dumps({**base, "documents": 999}).encode()}),
            ("data", "check", "{d}/coll"),
            Expect(OK, check=_documents_right_or_warned),
        ),
        Case(
            "collection: not a directory (data check)",
            "readers: collection",
            files(coll=b"a file"),
            ("data", "check", "{d}/coll"),
            error_at("coll"),
        ),
    ]
    for name, content, expect in [
        ("BOM", BOM + docs, Expect(OK, check=_aqwv_of(len(DOCS)))),
        ("empty docno", doc_line({"docno": "", "text": "x"}), error_at("coll/documents.jsonl", 2)),
        ("invalid JSON", doc_line(b"{"), error_at("coll/documents.jsonl", 2)),
        ("duplicate docno", doc_line({"docno": "d1", "text": "x"}), error_at("coll/documents.jsonl", 2)),
    ]:
        cases.append(
            Case(
                f"documents: {name} (evaluate --collection)",
                "readers: documents",
                then(
                    collection_with({"documents.jsonl": content}),
                    files(**{"good.run": RUN, "good.qrels": QRELS_TEXT}),
                ),
                (
                    "evaluate",
                    "{d}/good.run",
                    "{d}/good.qrels",
                    "--collection",
                    "{d}/coll",
                    "--metrics",
                    "AQWV",
                    "--json",
                ),
                expect,
            )
        )
    return cases


def _documents_right_or_warned(ctx: Ctx) -> str | None:
    if _json_out(ctx).get("documents") == len(DOCS) or "stats.json" in ctx.trace.err:
        return None
    return "printed documents: 999 from stats.json, with no word that it disagrees with documents.jsonl"


def _aqwv_of(size: int) -> Check:
    """AQWV (beta 40, top 10) of the README run: q1 finds both relevant with 1 false alarm among
    size - 2 non-relevant documents, q2 its one relevant with 1 false alarm among size - 1."""
    expected = ((1 - 40 / (size - 2)) + (1 - 40 / (size - 1))) / 2

    def check(ctx: Ctx) -> str | None:
        got = _json_out(ctx).get("AQWV")
        return None if _close(got, expected) else f"AQWV {got}, expected {expected}"

    return check


# --------------------------------------------------------------------------- evaluation


def _agrees_with_ir_measures(measures: Sequence[str]) -> Check:
    """The CLI's means equal ir_measures reading the same run and qrels files, and clir's
    in-memory evaluation of the same scores."""

    def check(ctx: Ctx) -> str | None:
        import ir_measures

        from clir.evaluation import evaluate

        run_file, qrels_file = ctx.d / "ties.run", ctx.d / "good.qrels"
        got = _json_out(ctx)
        parsed = [ir_measures.parse_measure(m) for m in measures]
        by_file = ir_measures.calc_aggregate(
            parsed, ir_measures.read_trec_qrels(str(qrels_file)), ir_measures.read_trec_run(str(run_file))
        )
        memory: dict[str, dict[str, float]] = {}
        for line in run_file.read_text().splitlines():
            qid, _, docno, _, score, _ = line.split()
            memory.setdefault(qid, {})[docno] = float(score)
        qrels = {"q1": {"d1": 2, "d3": 1}}
        in_memory = evaluate(memory, qrels, list(measures))
        for measure, m in zip(measures, parsed, strict=True):
            if not (_close(got[measure], by_file[m]) and _close(got[measure], in_memory[measure])):
                values = f"clir {got[measure]}, ir_measures {by_file[m]}, in memory {in_memory[measure]}"
                return f"{measure}: {values}"
        return None

    return check


def _ties_case(name: str, scores: tuple[str, str, str]) -> Case:
    """q1 with d1, d2 tied (d3 below): trec_eval's order is score desc, docno DESC: d2, d1, d3,
    so AP = (1/2 + 2/3)/2 = 7/12, P@1 = 0, nDCG@10 = (2/log2 3 + 1/2)/(2 + 1/log2 3)."""
    run = "".join(f"q1 Q0 d{i} {i} {s} mine\n" for i, s in enumerate(scores, start=1)).encode()
    ndcg = (2 / math.log2(3) + 1 / 2) / (2 + 1 / math.log2(3))
    expected = {"AP": {"q1": 7 / 12}, "P@1": {"q1": 0.0}, "nDCG@10": {"q1": ndcg}}
    by_hand, agree = per_query(expected), _agrees_with_ir_measures(list(expected))
    return Case(
        f"ties: {name}",
        "evaluation",
        files(**{"ties.run": run, "good.qrels": b"q1 0 d1 2\nq1 0 d3 1\n"}),
        ("evaluate", "{d}/ties.run", "{d}/good.qrels", "--metrics", *expected, "--json", "--per-query"),
        Expect(OK, check=lambda ctx: by_hand(ctx) or agree(ctx)),
    )


def _readme_values(ctx: Ctx) -> str | None:
    """The README's example with every default measure, by hand (see README 'Evaluating a run')."""
    ndcg10 = ((2 + 1 / 2) / (2 + 1 / math.log2(3)) + 1 / math.log2(3)) / 2
    expected = {
        "AP": 2 / 3,
        "P@10": 0.15,
        "nDCG@10": ndcg10,
        "nDCG@20": ndcg10,
        "R@100": 1.0,
        "R@1000": 1.0,
        "AQWV": ((1 - 40 / 8) + (1 - 40 / 9)) / 2,
    }
    got = _json_out(ctx)
    wrong = {m: got.get(m) for m, v in expected.items() if not _close(got.get(m), v)}
    return f"wrong: {wrong}, expected {expected}" if wrong else None


def _one_query_compare(ctx: Ctx) -> str | None:
    got = _compared_ap(ctx)
    if got["n_queries"] != 1 or got["p_ttest"] is not None or not _close(got["mean_b"], 5 / 6):
        return f"one query: {got}; expected n_queries 1, p_ttest null, mean_b 5/6"
    return None


def _identical_compare(ctx: Ctx) -> str | None:
    got = _compared_ap(ctx)
    return None if got["diff"] == 0.0 and got["p_randomization"] == 1.0 else f"identical runs: {got}"


def _evaluation_cases() -> list[Case]:
    q1_only = RUN.split(b"\n", 3)
    q1_run, q2_run = b"\n".join(q1_only[:3]) + b"\n", q1_only[3]
    q1_qrels = b"q1 0 d1 2\nq1 0 d3 1\n"
    inputs = {"good.run": RUN, "good.qrels": QRELS_TEXT}
    evaluate = ("evaluate", "{d}/r.run", "{d}/good.qrels", "--metrics", "AP", "--json", "--per-query")
    # fmt: off
    return [
        _ties_case("two documents tied", ("2.0", "2.0", "1.0")),
        _ties_case("tied only as 32-bit floats", ("2.00000001", "2.0", "1.0")),
        Case("run missing a qrels query", "evaluation", files(**inputs, **{"r.run": q2_run}), evaluate,
             Expect(OK, warns=("1 of the 2",), check=per_query({"AP": {"q1": 0.0, "q2": 0.5}}))),
        Case("empty run", "evaluation", files(**inputs, **{"r.run": b""}), evaluate,
             Expect(OK, warns=("0 of the 2",), check=per_query({"AP": {"q1": 0.0, "q2": 0.0}}))),
        Case("run with an unknown qid", "evaluation",
             files(**inputs, **{"r.run": RUN + b"q9 Q0 d1 1 9.0 mine\n"}), evaluate,
             Expect(OK, check=per_query({"AP": AP}))),
        Case("qrels query with no relevant document (not evaluated)", "evaluation",
             files(**{"good.qrels": QRELS_TEXT + b"q3 0 d1 0\n", "r.run": RUN + b"q3 Q0 d1 1 1.0 mine\n"}),
             evaluate, Expect(OK, check=per_query({"AP": AP}))),
        Case("one query (evaluate)", "evaluation",
             files(**{"r.run": q1_run, "good.qrels": q1_qrels}), evaluate,
             Expect(OK, quiet=True, check=per_query({"AP": {"q1": 5 / 6}}))),
        Case("one query (compare: no p-value, null in JSON)", "evaluation",
             files(**{"r.run": q1_run, "b.run": q1_run.replace(b"3.0", b"0.5"), "good.qrels": q1_qrels}),
             ("compare", "{d}/b.run", "{d}/r.run", "{d}/good.qrels", "--metrics", "AP", "--json"),
             Expect(OK, check=_one_query_compare)),
        Case("README example, every default measure", "evaluation", files(**inputs),
             ("evaluate", "{d}/good.run", "{d}/good.qrels", "--collection-size", "10", "--json"),
             Expect(OK, quiet=True, check=_readme_values)),
        Case("compare identical runs", "evaluation", files(**inputs, **{"copy.run": RUN}),
             ("compare", "{d}/good.run", "{d}/copy.run", "{d}/good.qrels", "--metrics", "AP", "--json",
              "--permutations", "200"), Expect(OK, check=_identical_compare)),
        Case("compare: the baseline (first RUN) given again", "evaluation", files(**inputs),
             ("compare", "{d}/good.run", "{d}/good.run", "{d}/good.qrels"), Expect(CLEAR, ("given twice",))),
        *[Case(f"unknown measure {m!r}", "evaluation", files(**inputs),
               ("evaluate", "{d}/good.run", "{d}/good.qrels", "--metrics", m), Expect(CLEAR, (m,)))
          for m in ("XYZ", "P@x", "nDCG@-1")],
        Case("AQWV without a collection size", "evaluation", files(**inputs),
             ("evaluate", "{d}/good.run", "{d}/good.qrels", "--metrics", "AQWV"),
             Expect(CLEAR, (("--collection-size", "collection_size"),))),
    ]
    # fmt: on


# --------------------------------------------------------------------------- options


def _option_cases() -> list[Case]:
    """Bad values of command-line options: each error names the option (or its API name)."""
    trec = files(**{"good.run": RUN, "good.qrels": QRELS_TEXT})
    evaluate = ("evaluate", "{d}/good.run", "{d}/good.qrels", "--metrics", "AP", "AQWV", "--json")
    compare = ("compare", "{d}/good.run", "{d}/good.run", "{d}/good.qrels")
    index = ("index", "--quiet", "--collection", "{d}/collection", "--tables", "{d}/tables", "--mode", "psq",
             "--out", "{d}/out")  # fmt: skip
    retrieve = ("retrieve", "--quiet", "--index", "{d}/index", "--collection", "{d}/collection", "--out",
                "{d}/out.run")  # fmt: skip
    tables = ("tables", "--collection", "{d}/collection", "--out", "{d}/out")
    baselines = ("baselines", "--quiet", "--collection", "{d}/collection", "--out", "{d}/out")
    bible = ("data", "bible", "--quiet", "--out", "{d}/out")
    size, k = ("--collection-size", "collection_size"), ("--k", "'k'", "k must", "k=")
    psq = ("psq-cumulative", "psq_cumulative")
    # fmt: off
    table: list[tuple[Setup, tuple[str, ...], str | tuple[str, ...]]] = [
        (trec, (*evaluate, "--collection-size", "0"), size),
        (trec, (*evaluate, "--collection-size", "-3"), size),
        (trec, (*evaluate, "--collection-size", "2"), size),  # fewer documents than q1 judged relevant
        (trec, (*evaluate, "--collection-size", "10", "--cutoff", "0"), "cutoff"),
        (trec, (*evaluate, "--collection-size", "10", "--beta", "nan"), "beta"),
        (trec, (*evaluate, "--collection-size", "10", "--beta", "inf"), "beta"),
        (trec, (*evaluate, "--collection-size", "10", "--beta", "-1"), "beta"),
        (trec, (*compare, "--permutations", "0"), "permutations"),
        (trec, (*compare, "--permutations", "-5"), "permutations"),
        (copies("index", "collection"), (*retrieve, "--k", "0"), k),
        (copies("index", "collection"), (*retrieve, "--k", "-1"), k),
        (copies("index", "collection"), (*retrieve, "--split", "validation"), "validation"),
        (copies("collection", "tables"), (*index, "--k1", "nan"), "k1"),
        (copies("collection", "tables"), (*index, "--k1", "-1"), "k1"),
        (copies("collection", "tables"), (*index, "--b", "2"), ("--b", "'b'", "b must", "b=")),
        (copies("collection", "tables"), (*index, "--mu", "-1"), "mu"),
        (copies("collection", "tables"), (*index, "--psq-cumulative", "0"), psq),
        (copies("collection", "tables"), (*index, "--psq-cumulative", "nan"), psq),
        (copies("collection", "tables"), (*index, "--psq-top-k", "0"), ("psq-top-k", "psq_top_k")),
        (copies("collection", "tables"), (*index, "--spelling", "2"), "--spelling"),
        (copies("collection", "tables"), (*index[:5], "{d}/collection", *index[6:]), "{d}/collection"),
        (copies("collection"), (*tables, "--iterations", "0"), "iterations"),
        (copies("collection"), (*tables, "--iterations", "-1"), "iterations"),
        (copies("collection"), (*baselines, "--k", "0"), k),
        (copies("collection"), (*baselines, "--split", "validation"), "validation"),
        (nothing, (*bible, "--pair", "en-sw", "--passage-verses", "0"), ("passage-verses", "passage_verses")),
        (nothing, (*bible, "--pair", "en-sw", "--n-test", "-1"), ("n-test", "n_test")),
        (nothing, (*bible, "--pair", "en-xx"), ("en-xx", "'xx'", "--pair")),
        (nothing, (*bible, "--pair", "sw"), ("--pair", "en-XX", "en-sw")),
        (nothing, (*bible, "--pair", "en-en"), ("en-en", "'en'", "--pair")),
    ]
    # fmt: on
    return [
        Case(" ".join(a for a in argv if "{d}" not in a), "options", setup, argv, Expect(CLEAR, (names,)))
        for setup, argv, names in table
    ]


# --------------------------------------------------------------------------- configs


def _changed(base: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """``base`` with dotted keys set."""
    config = copy.deepcopy(base)
    for dotted, value in changes.items():
        *parents, key = dotted.split(".")
        node = config
        for part in parents:
            node = node.setdefault(part, {})
        node[key] = value
    return config


RAW_YAML: list[tuple[str, bytes | None]] = [
    ("invalid YAML", b"optim: {lr: 0.1\nmodel: [\n"),
    ("tabs for indentation", b"optim:\n\tlr: 0.1\n"),
    ("a list at the top level", b"- optim\n- model\n"),
    ("a scalar at the top level", b"hello\n"),
    ("non-UTF-8", b"name: caf\xe9\n"),
    ("a directory", None),
]

NAN, INF = float("nan"), float("inf")


def _experiment_changes() -> list[tuple[str, dict[str, Any], tuple[str | tuple[str, ...], ...]]]:
    """(name, changes to the tiny experiment, what the error must name)."""
    # fmt: off
    key = {
        "unknown key": [("colection", 1), ("collection.n_trian", 5), ("tables.iteration", 2),
                        ("baselines.depth", 10), ("embeddings.dims", 8),
                        ("reranker.optim.learning_rate", 0.1), ("reranker.modle", {}),
                        ("systems.full.optim.lrate", 1), ("systems.full.model.foo", 1)],
        "wrong type": [("collection.n_train", "ten"), ("collection.n_train", 1.5),
                       ("collection.n_test", True), ("collection.collection_books", "8"),
                       ("tables.iterations", "2"), ("embeddings.dim", "big"),
                       ("embeddings.epochs", 1.5), ("significance.permutations", "many"),
                       ("significance.permutations", True),
                       ("split", 5), ("name", [1]), ("dense", "yes"), ("baselines.k", "1000"),
                       ("collection", [1, 2]), ("systems.full", 5), ("systems", ["full"]), ("dense_cache", 5),
                       ("reranker.optim.seed", 1.5), ("reranker.model.components", "en_en"),
                       ("train_pair", 5), ("zero_shot_pairs", "en-tl"), ("zero_shot_pairs", [5]),
                       ("ensemble_seeds", 5), ("ensemble_seeds", [0, "a"]), ("reranker", 5)],
        "non-finite": [("reranker.optim.lr", NAN), ("systems.full.optim.lr", INF),
                       ("reranker.optim.margin", NAN),
                       ("baselines.psq_cumulative", NAN), ("significance.permutations", INF),
                       ("tables.iterations", NAN),
                       ("baselines.spelling", NAN), ("reranker.data.spelling", -INF),
                       ("reranker.optim.weight_decay", INF)],
        "out of range": [("collection.n_train", -1), ("collection.n_test", 0),
                         ("collection.passage_verses", 0),
                         ("tables.iterations", 0), ("embeddings.dim", 0), ("embeddings.epochs", -1),
                         ("embeddings.min_count", -1), ("embeddings.copies", 0),
                         ("significance.permutations", 0),
                         ("reranker.optim.epochs", 0), ("reranker.optim.batch_size", -1),
                         ("reranker.data.depth", 0), ("baselines.k", 0), ("baselines.psq_top_k", 0),
                         ("ensemble_seeds", []), ("systems", {}), ("systems", None)],
        "bad value": [("train_pair", "sw"), ("train_pair", "en-xx"), ("train_pair", "en-../x"),
                      ("zero_shot_pairs", ["en-zz"]), ("zero_shot_pairs", ["../x"]), ("split", "validation"),
                      ("embeddings.method", "glove"), ("reranker.model.interaction", "bogus"),
                      ("reranker.device", "tpu"), ("baselines.modes", ["qt", "xx"]),
                      ("significance.correction", "fdr"), ("significance.alpha", 1.5),
                      ("baselines.models", ["bm26"]), ("collection.collection_books", [8, 99]),
                      ("collection.parallel_books", [8]), ("reranker.data.first_stage", "xx-yy"),
                      ("reranker.model.components", ["en_en", "nonsense"]),
                      ("reranker.model.interaction_kwargs", {"bogus": 1}),
                      ("systems.full.data", {"depth": 5}), ("systems.full.with_dense", True),
                      ("baselines.model_params", {"bm25": {"k1": NAN}})],
    }
    # fmt: on
    out = [
        (f"{kind}: {k} = {v!r}", {k: v}, (_key_named(k),)) for kind, pairs in key.items() for k, v in pairs
    ]
    for name in ("../../x", "a/b", ".hidden", "", "x y"):
        out.append((f"system named {name!r}", {"systems": {"full": {}, name: {}}}, ("systems",)))
    out.append(
        (
            "bad override in the last system",
            {"systems": {"full": {}, "zz": {"optim": {"lr": -1.0}}}},
            ("systems.zz.optim.lr",),
        )
    )
    return out


def _key_named(dotted: str) -> str | tuple[str, ...]:
    """What an error about ``dotted`` must name: the dotted key (the reranker's keys may be named
    without their ``reranker.`` prefix, as in the file the reranker section came from)."""
    if dotted == "reranker":
        return "reranker"
    return (dotted, dotted.removeprefix("reranker.")) if dotted.startswith("reranker.") else dotted


def _yaml_setup(name: str, config: dict[str, Any] | bytes | None, extra: dict[str, bytes] | None = None):
    def setup(ctx: Ctx) -> None:
        text = yaml.safe_dump(config).encode() if isinstance(config, dict) else config
        _write(ctx.d, {name: text, **(extra or {})})

    return setup


def _no_steps(ctx: Ctx) -> str | None:
    steps = ctx.d / "out" / "steps"
    return (
        f"work began: {sorted(p.name for p in steps.iterdir())}"
        if steps.is_dir() and any(steps.iterdir())
        else None
    )


def _config_cases() -> list[Case]:
    experiment = ("experiment", "{d}/exp.yaml", "--out", "{d}/out", "--quiet")
    train = (
        "train",
        "--config",
        "{d}/train.yaml",
        "--collection",
        "{d}/nocoll",
        "--space",
        "{d}/nospace",
        "--out",
        "{d}/out",
    )
    cases = []

    def add(name: str, setup: Callable[[Ctx], None], argv: tuple[str, ...], names: tuple[Any, ...]) -> None:
        is_experiment = argv[0] == "experiment"
        cases.append(
            Case(
                f"{argv[0]}: {name}",
                f"configs: {argv[0]}",
                setup,
                argv,
                Expect(CLEAR, names, after=_no_steps),
                guard=is_experiment,
            )
        )

    base = tiny_experiment()
    for name, changes, names in _experiment_changes():
        add(name, _yaml_setup("exp.yaml", _changed(base, changes)), experiment, ("{d}/exp.yaml", *names))
    for name, raw in RAW_YAML:
        for file, argv in (("exp.yaml", experiment), ("train.yaml", train)):
            add(name, _yaml_setup(file, raw), argv, (f"{{d}}/{file}",))
    add("missing config file", lambda ctx: None, experiment, ("{d}/exp.yaml",))
    add("missing config file", lambda ctx: None, train, ("{d}/train.yaml",))
    add(
        "reranker file missing",
        _yaml_setup("exp.yaml", {**base, "reranker": "nope.yaml"}),
        experiment,
        ("nope.yaml",),
    )
    rr = {"rr.yaml": yaml.safe_dump(_changed(tiny_reranker(), {"optim.foo": 1})).encode()}
    add(
        "reranker file with an unknown key",
        _yaml_setup("exp.yaml", {**base, "reranker": "rr.yaml"}, rr),
        experiment,
        ("rr.yaml", "optim.foo"),
    )
    bad_yaml = {"rr.yaml": b"optim: [\n"}
    add(
        "reranker file not YAML",
        _yaml_setup("exp.yaml", {**base, "reranker": "rr.yaml"}, bad_yaml),
        experiment,
        ("rr.yaml",),
    )

    # fmt: off
    train_changes = [
        ("optim.lr", INF), ("optim.lr", NAN), ("optim.lr", -0.1), ("optim.lr", 0), ("optim.margin", NAN),
        ("optim.margin", INF), ("optim.weight_decay", NAN), ("optim.dropout", 1.0), ("optim.epochs", 0),
        ("optim.batch_size", -1), ("optim.batch_size", 0), ("optim.patience", -1), ("device", "tpu"),
        ("modle", {}), ("model.foo", 1), ("optim.foo", 1), ("data.foo", 1), ("model.interaction", "nope"),
        ("model.fusion", "max"), ("model.components", "en_en"), ("model.interaction_kwargs", {"bogus": 1}),
        ("data.depth", 0), ("data.negatives_per_positive", 0), ("data.spelling", 2),
        ("data.feature_norm", "l2"),
        ("data.first_stage", "xx-yy"), ("optim.lr", "fast"), ("optim.epochs", 2.5), ("optim.epochs", True),
        ("ensemble.seeds", []), ("ensemble.seeds", 5), ("cv.folds", 0),
    ]
    # fmt: on
    for k, v in train_changes:
        add(
            f"{k} = {v!r}",
            _yaml_setup("train.yaml", _changed(tiny_reranker(), {k: v})),
            train,
            ("{d}/train.yaml", k),
        )
    return cases


# --------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class Output:
    """A command writing ``{out}``: its inputs (fixtures copied into the case's directory), the
    arguments of a same-kind but different output, the fixture it must equal, a fixture of
    another kind of clir output, and whether ``{out}`` is a file."""

    argv: tuple[str, ...]
    inputs: tuple[str, ...] = ()
    alt: tuple[str, ...] = ()
    other: str = "index"
    is_file: bool = False


# fmt: off
OUTPUTS: dict[str, Output] = {
    "bible": Output(("data", "bible", *BIBLE_ARGS, "--out", "{out}"), alt=("--seed", "14")),
    "tables": Output(("tables", "--collection", "{d}/collection", "--out", "{out}", "--iterations", "2"),
                     ("collection",), alt=("--iterations", "1")),
    "index": Output(("index", "--quiet", "--collection", "{d}/collection", "--tables", "{d}/tables", "--mode",
                     "qt", "--out", "{out}"), ("collection", "tables"), alt=("--k1", "1.0"), other="bible"),
    "baselines": Output(("baselines", "--quiet", "--collection", "{d}/collection", "--out", "{out}",
                         "--modes", "qt", "--models", "bm25", "--k", "10"), ("collection",),
                        alt=("--k", "5")),
    "embed": Output(("embed", "train", "{d}/collection", "--out", "{out}", "--method", "word2vec", "--dim",
                     "8", "--epochs", "1", "--min-count", "1", "--quiet"), ("collection",),
                    alt=("--dim", "4")),
    "retrieve": Output(("retrieve", "--quiet", "--index", "{d}/index", "--collection", "{d}/collection",
                        "--k", "10", "--out", "{out}"), ("index", "collection"), is_file=True),
    "experiment": Output(("experiment", "{d}/exp.yaml", "--out", "{out}", "--quiet")),
}
# fmt: on
"""The commands whose ``--out`` the battery tries; all but ``experiment`` are fixtures too."""


def _output_argv(spec: Output, d: Path | str, out: str, extra: Sequence[str] = ()) -> list[str]:
    """``spec``'s arguments and ``extra``: an option of ``spec``'s in ``extra`` replaces its value
    there (an option given twice is refused), the rest follow."""
    argv, rest, i = list(spec.argv), [], 0
    while i < len(extra):
        if extra[i] in argv and i + 1 < len(extra):  # an option of spec's with its new value
            argv[argv.index(extra[i]) + 1] = extra[i + 1]
            i += 2
        else:
            rest.append(extra[i])
            i += 1
    return [arg.replace("{out}", out).replace("{d}", str(d)) for arg in (*argv, *rest)]


def _build_output(name: str) -> Callable[[Fixtures, Path], None]:
    def build(fx: Fixtures, path: Path) -> None:
        for needed in OUTPUTS[name].inputs:
            fx.get(needed)
        _clir(_output_argv(OUTPUTS[name], fx.root, str(path)))

    return build


BUILDERS.update({name: _build_output(name) for name in OUTPUTS if name != "experiment"})


def _same_as(fixture: str, out: str) -> Check:
    """The output holds the files of the fixture built by the same command in a fresh place."""

    def check(ctx: Ctx) -> str | None:
        made, want = ctx.d / ctx.path(out), ctx.fx.get(fixture)
        if want.is_file():
            same = made.is_file() and made.read_bytes() == want.read_bytes()
        else:
            got = file_hashes(made) if made.is_dir() else {}
            same = all(got.get(name) == digest for name, digest in file_hashes(want).items())
        return None if same else f"{made} differs from a fresh {fixture} output"

    return check


def _kept(check: Check) -> Check:
    """``check``, and the user's files that ``--force`` wrote over are kept: moved aside with
    their directory (``out.before-clir``) by a command that replaces ``out`` whole, left in
    ``out`` by one that fills it file by file."""

    def both(ctx: Ctx) -> str | None:
        for where in ("out.before-clir", "out"):
            if (ctx.d / where / "notes.txt").is_file():
                mine = {name: (ctx.d / where / name).read_bytes() for name in ("notes.txt", "report.md")}
                if mine != {"notes.txt": b"my notes\n", "report.md": b"# mine\n"}:
                    return f"{ctx.d / where}: the user's files changed"
                return check(ctx)
        return "the user's files are gone"

    return both


def _output_cases() -> list[Case]:
    """Every --out a user may give: what must be refused (and survive), what may be written."""
    user = files(
        **{"out/notes.txt": b"my notes\n", "out/results.json": b"{}\n", "out/report.md": b"# mine\n"}
    )
    link = then(files(**{"mine/notes.txt": b"my notes\n"}), lambda ctx: (ctx.d / "out").symlink_to("mine"))
    beside = files(**{".out.old/mine.txt": b"x\n"})
    cases = []
    for command, spec in OUTPUTS.items():
        inputs = copies(*spec.inputs)
        if command == "experiment":
            inputs = files(**{"exp.yaml": yaml.safe_dump(tiny_experiment()).encode()})

        def earlier(ctx: Ctx, spec: Output = spec) -> None:
            _clir(_output_argv(spec, ctx.d, str(ctx.d / "out"), spec.alt))

        def other(ctx: Ctx, spec: Output = spec) -> None:
            ctx.fx.copy(spec.other, ctx.d / "out")

        # (name, setup, --out, the path the error names)
        refused: list[tuple[str, Setup, str, str]] = [
            ("a user's directory with files", user, "out", "out"),
            ("a path below a file", files(afile=b"my file\n"), "afile/out", "afile"),
            ("a symlink to a user's directory", link, "out", "out"),
            *([("an empty directory", files(out=None), "out", "out"),
               ("a user's file, not a run", files(out=b"my notes\n"), "out", "out")] if spec.is_file else
              [("an existing file", files(out=b"my file\n"), "out", "out"),
               ("another kind of clir output", other, "out", "out")]),
        ]  # fmt: skip
        for name, setup, out, named in refused:
            argv = tuple(_output_argv(spec, "{d}", f"{{d}}/{out}"))
            expect = Expect(CLEAR, (f"{{d}}/{named}",))
            cases.append(Case(f"{command}: --out {name}", "outputs", then(inputs, setup), argv, expect,
                              guard=command == "experiment"))  # fmt: skip
        for needed in spec.inputs:  # the command's own input, which --force must not replace either
            argv = tuple(_output_argv(spec, "{d}", f"{{d}}/{needed}", () if spec.is_file else ("--force",)))
            expect = Expect(CLEAR, (f"{{d}}/{needed}", "one of this command's inputs"))
            cases.append(Case(f"{command}: --out its input {needed}", "outputs", inputs, argv, expect))
        if command == "experiment":
            continue  # its accepted --out: the cache cases
        # (name, setup, --out, extra arguments, what the command may replace)
        accepted: list[tuple[str, Setup, str, tuple[str, ...], tuple[str, ...]]] = [
            ("a fresh path", nothing, "out", (), ()),
            ("a missing parent directory", nothing, "a/b/out", (), ()),
            *([("an existing run (replaced)", files(out=b"q9 Q0 d9 1 0.5 old\n"), "out", (), ("out",))]
              if spec.is_file else
              [("an empty directory", files(out=None), "out", (), ()),
               ("the same kind (replaced)", earlier, "out", (), ("out/",)),
               ("the same kind, a user's .out.old beside", then(earlier, beside), "out", (), ("out/",)),
               ("--force over a user's directory", user, "out", ("--force",), ("out/",))]),
        ]  # fmt: skip
        for name, setup, out, extra, may_change in accepted:
            argv = tuple(_output_argv(spec, "{d}", f"{{d}}/{out}", extra))
            check = _same_as(command, out) if setup is not user else _kept(_same_as(command, out))
            expect = Expect(OK, check=check, may_change=may_change)
            cases.append(Case(f"{command}: --out {name}", "outputs", then(inputs, setup), argv, expect,
                              slow=command == "bible"))  # fmt: skip
    return cases


# --------------------------------------------------------------------------- cache and faults

EXPERIMENT = ("experiment", "{d}/exp.yaml", "--out", "{d}/exp", "--quiet")
VOLATILE = ("step.json", "curve.json", ".png", "report.md", "report.html", "results.json", ".lock")
"""Files that hold timings (or a lock): compared through results.json without its timings."""


def _results(path: Path) -> dict[str, Any]:
    """results.json without what says how the run went (the steps' timings, those reused)."""
    return {k: v for k, v in json.loads(path.read_text()).items() if k not in ("timings", "reused")}


def _as_reference(ctx: Ctx) -> str | None:
    """The experiment directory equals the reference run's: every file but timings, and the
    results without timings."""
    ref, made = ctx.fx.get("experiment"), ctx.d / "exp"
    if not (made / "results.json").is_file():
        return "no results.json"
    want, got = ({k: v for k, v in file_hashes(p).items() if not k.endswith(VOLATILE)} for p in (ref, made))
    differ = sorted(k for k in want.keys() | got.keys() if want.get(k) != got.get(k))
    if differ:
        return f"files differ from the reference run: {differ[:4]}"
    same = _results(made / "results.json") == _results(ref / "results.json")
    return None if same else "results.json differs from the reference run"


def _flip(path: Path) -> None:
    """Change one byte, same size: a digit from the middle on (text), else an inverted byte."""
    data = bytearray(path.read_bytes())
    middle = len(data) // 2
    digits = [i for i in range(middle, len(data)) if 48 <= data[i] <= 57]
    i = digits[0] if digits else middle
    data[i] = 48 + (data[i] - 43) % 10 if digits else data[i] ^ 0xFF
    path.write_bytes(bytes(data))


def _truncate(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


def _zero64(path: Path) -> None:
    data = bytearray(path.read_bytes())
    data[-64:] = bytes(min(64, len(data)))
    path.write_bytes(bytes(data))


def _garble(path: Path) -> None:
    path.write_bytes(_garbage())


def _old_step_json(path: Path) -> None:
    """A step.json of an older clir: no manifest."""
    record = json.loads(path.read_text())
    path.write_text(json.dumps({k: record[k] for k in ("name", "key", "params", "seconds")}))


# fmt: off
CORRUPTIONS: list[tuple[str, str, Callable[[Path], None]]] = [
    ("a digit of a baseline run changed", "steps/baselines-*/runs/qt-bm25.run", _flip),
    ("a baseline run truncated", "steps/baselines-*/runs/qt-bm25.run", _truncate),
    ("a baseline run deleted", "steps/baselines-*/runs/qt-bm25.run", Path.unlink),
    ("64 bytes of a table's .npy zeroed", "steps/tables-*/en-doc/*.npy", _zero64),
    ("a table's .npy truncated", "steps/tables-*/doc-en/*.npy", _truncate),
    ("step.json of the tables truncated", "steps/tables-*/step.json", _truncate),
    ("step.json of the tables binary garbage", "steps/tables-*/step.json", _garble),
    ("step.json of the tables deleted", "steps/tables-*/step.json", Path.unlink),
    ("step.json of the tables without a manifest (older clir)", "steps/tables-*/step.json", _old_step_json),
    ("a digit of the collection's qrels changed", "steps/collection-*/collection/qrels.txt", _flip),
    ("the collection's documents truncated", "steps/collection-*/collection/documents.jsonl", _truncate),
    ("a byte of the space's vectors flipped", "steps/space-*/en.bin", _flip),
    ("64 bytes of a rerank-data .npy zeroed", "steps/data-*/test/*.npy", _zero64),
    ("64 bytes of model.safetensors zeroed", "steps/train-*/seed0/model/model.safetensors", _zero64),
    ("a model's config.json truncated", "steps/train-*/seed0/model/config.json", _truncate),
    ("64 bytes of the last training state zeroed", "steps/train-*/seed0/last/optimizer.safetensors", _zero64),
    ("a digit of the reranked run changed", "steps/rerank-*/runs/full.run", _flip),
    ("the reranked run truncated", "steps/rerank-*/runs/full.run", _truncate),
    ("bli.json truncated", "steps/bli-*/bli.json", _truncate),
]
# fmt: on


def _experiment_copy(ctx: Ctx) -> None:
    ctx.fx.copy("experiment", ctx.d / "exp")
    _write(ctx.d, {"exp.yaml": yaml.safe_dump(tiny_experiment()).encode()})


def _corrupted(pattern: str, corrupt: Callable[[Path], None]) -> Callable[[Ctx], None]:
    def setup(ctx: Ctx) -> None:
        _experiment_copy(ctx)
        corrupt(sorted((ctx.d / "exp").glob(pattern))[0])

    return setup


def _half_built(step: str, damage: Callable[[Path], None] | None = None) -> Callable[[Ctx], None]:
    """The finished step removed and a ``.partial`` copy of it left (damaged, no step.json), as an
    interrupted build leaves it."""

    def setup(ctx: Ctx) -> None:
        _experiment_copy(ctx)
        (done,) = (ctx.d / "exp" / "steps").glob(f"{step}-*[0-9a-f]")
        partial = done.with_name(done.name + ".partial")
        done.rename(partial)
        (partial / "step.json").unlink()
        if damage:
            damage(partial)

    return setup


def _damaged_checkpoint(partial: Path) -> None:
    """A finished member's model damaged in a half-built training step; the reranking that read
    the model removed, so that the re-run reranks with what the training step then holds."""
    _zero64(partial / "seed0" / "model" / "model.safetensors")
    (rerank,) = partial.parent.glob("rerank-*[0-9a-f]")
    shutil.rmtree(rerank)


def _all_cached(ctx: Ctx) -> str | None:
    """The run's step log (``[TAG] step``) shows no step built, and the results are the reference's."""
    log = [line for line in ctx.trace.out.splitlines() if line.startswith("[")]
    built = [line for line in log if line[1:].split("]")[0] not in ("cached", "wait")]
    return f"re-ran steps of a finished experiment: {built}" if built else _as_reference(ctx)


def _cache_cases() -> list[Case]:
    cases = [
        Case(
            "untouched finished experiment: every step reused",
            "cache and faults",
            _experiment_copy,
            EXPERIMENT,
            Expect(OK, quiet=True, check=_all_cached, may_change=("exp/",)),
            slow=True,
        )
    ]
    for name, pattern, corrupt in CORRUPTIONS:
        step = pattern.split("/")[1].rstrip("-*")
        file = pattern.rsplit("/", 1)[1].replace("*", "")
        cases.append(
            Case(
                f"{name}: rebuilt, same results",
                "cache and faults",
                _corrupted(pattern, corrupt),
                EXPERIMENT,
                Expect(OK, warns=(step, file), check=_as_reference, may_change=("exp/",)),
                slow=True,
            )
        )
    stale = {
        "results.json truncated (the report is always redone)": _corrupted("results.json", _truncate),
        "a half-built tables step left by a crash": _half_built(
            "tables", lambda p: _zero64(sorted(p.rglob("*.npy"))[0])
        ),
        "a half-built training step with a damaged checkpoint": _half_built(
            "train-full", _damaged_checkpoint
        ),
    }
    for name, setup in stale.items():
        cases.append(
            Case(
                f"{name}: same results",
                "cache and faults",
                setup,
                EXPERIMENT,
                Expect(OK, check=_as_reference, may_change=("exp/",)),
                slow=True,
            )
        )
    for step in ("tables", "space", "train-full", "rerank"):
        cases.append(
            Case(
                f"kill -9 during the {step} step, then a re-run: same results",
                "cache and faults",
                files(**{"exp.yaml": yaml.safe_dump(tiny_experiment()).encode()}),
                EXPERIMENT,
                Expect(OK, check=_as_reference, may_change=("exp/",)),
                slow=True,
                runner=_killed(f"exp/steps/{step}-*.partial"),
            )
        )
    cases.append(
        Case(
            "kill -9 while clir data bible writes, then a re-run",
            "cache and faults",
            lambda ctx: None,
            tuple(_output_argv(OUTPUTS["bible"], "{d}", "{d}/out")),
            Expect(OK, check=_same_as("bible", "out")),
            slow=True,
            runner=_killed(".out.*.tmp"),
        )
    )
    return cases


def _wait_for(root: Path, pattern: str, process: subprocess.Popen, timeout: float = 300) -> bool:
    """Wait until ``pattern`` matches under ``root``; false if the process ended first."""
    deadline = time.monotonic() + timeout
    while process.poll() is None and time.monotonic() < deadline:
        if any(root.glob(pattern)):
            return True
        time.sleep(0.002)  # some steps of the tiny experiment last a few hundredths of a second
    return False


def _killed(pattern: str, delay: float = 0.2) -> Callable[[Ctx, list[str]], Trace]:
    """Start the command, ``kill -9`` it ``delay`` seconds after ``pattern`` exists, then run it
    again in-process."""

    def runner(ctx: Ctx, argv: list[str]) -> Trace:
        process = clir_process(argv, ctx.d)
        if not _wait_for(ctx.d, pattern, process):
            raise RuntimeError(f"the command ended before {pattern} appeared: {_tail(finish(process).err)}")
        time.sleep(delay)
        os.killpg(process.pid, signal.SIGKILL)
        process.wait()
        return call(argv)

    return runner


# --------------------------------------------------------------------------- concurrency


def _race(pattern: str | None) -> Callable[[Ctx, list[str]], Trace]:
    """Two processes of one command: both at once, or the first stopped (SIGSTOP) once
    ``pattern`` exists while the second runs, then continued. The trace is the refused one's (or,
    if none failed, the second's); the other is kept in ``ctx.others``."""

    def runner(ctx: Ctx, argv: list[str]) -> Trace:
        first = clir_process(argv, ctx.d)
        stopped = pattern is not None and _wait_for(ctx.d, pattern, first)
        if stopped:
            os.killpg(first.pid, signal.SIGSTOP)
        second = clir_process(argv, ctx.d)
        with contextlib.suppress(subprocess.TimeoutExpired):
            second.wait(timeout=120)  # a run that waits for the lock would wait forever here
        if stopped:
            os.killpg(first.pid, signal.SIGCONT)
        traces = sorted([finish(first), finish(second)], key=lambda t: t.code != 0)
        ctx.others = traces[:1]
        return traces[1]

    return runner


def _winner_right(ctx: Ctx) -> str | None:
    """The run that was not refused finished, with the reference results; a third run reuses every
    step (nothing half-built was kept) and gives them again."""
    (winner,) = ctx.others
    if winner.code != 0:
        return f"the other run failed too: {_tail(winner.err)}"
    problem = _as_reference(ctx)
    if problem:
        return f"after the race: {problem}"
    third = Ctx(ctx.d, ctx.fx, call([ctx.path(arg) for arg in EXPERIMENT]))
    return _all_cached(third) if third.trace.code == 0 else f"a third run failed: {_tail(third.trace.err)}"


def _waiting(ctx: Ctx, argv: list[str]) -> Trace:
    """The second run, with ``--wait``, started while the first trains: its trace (the first's is
    kept in ``ctx.others``)."""
    first = clir_process(argv, ctx.d)
    _wait_for(ctx.d, "exp/steps/train-full-*.partial", first)
    second = clir_process([*argv, "--wait"], ctx.d)
    ctx.others = [finish(first)]
    return finish(second)


def _waited_right(ctx: Ctx) -> str | None:
    """The first run finished; the second waited for it, then reused every step."""
    (first,) = ctx.others
    return _all_cached(ctx) if first.code == 0 else f"the first run failed: {_tail(first.err)}"


def _both_or_one_refused(ctx: Ctx, argv: list[str]) -> Trace:
    """Two ``clir data bible`` at once on one --out: each finishes or is refused clearly."""
    traces = [finish(p) for p in [clir_process(argv, ctx.d), clir_process(argv, ctx.d)]]
    bad = [
        t for t in traces if t.code != 0 and (t.code != 2 or not _error_lines(t.err) or "Traceback" in t.err)
    ]
    return bad[0] if bad else min(traces, key=lambda t: t.code or 0)


def _concurrency_cases() -> list[Case]:
    config = files(**{"exp.yaml": yaml.safe_dump(tiny_experiment()).encode()})
    race = Expect(CLEAR, ("{d}/exp",), after=_winner_right, may_change=("exp/",))
    return [
        Case(
            "two experiment runs on one --out at once",
            "concurrency",
            config,
            EXPERIMENT,
            race,
            slow=True,
            runner=_race(None),
        ),
        Case(
            "a second experiment run while the first trains",
            "concurrency",
            config,
            EXPERIMENT,
            race,
            slow=True,
            runner=_race("exp/steps/train-full-*.partial/*"),
        ),
        Case(
            "a second experiment run while the first writes its report",
            "concurrency",
            config,
            EXPERIMENT,
            race,
            slow=True,
            runner=_race("exp/steps/bli-*[0-9a-f]/step.json"),
        ),
        Case(
            "a second experiment run with --wait while the first trains: waits, then reuses every step",
            "concurrency",
            config,
            EXPERIMENT,
            Expect(OK, check=_waited_right, may_change=("exp/",)),
            slow=True,
            runner=_waiting,
        ),
        Case(
            "two clir data bible on one --out at once",
            "concurrency",
            lambda ctx: None,
            tuple(_output_argv(OUTPUTS["bible"], "{d}", "{d}/out")),
            Expect(OK, check=_same_as("bible", "out")),
            slow=True,
            runner=_both_or_one_refused,
        ),
    ]


def _fresh_experiment_right(ctx: Ctx) -> str | None:
    """results.json's numbers equal ir_measures on the run files and the split's qrels, a query
    of the qrels that a run lacks counting 0 (trec_eval -c); and the run equals the reference."""
    import ir_measures

    steps = ctx.d / "exp" / "steps"
    (qrels_file,) = steps.glob("collection-*/collection/qrels.test.txt")
    qrels = list(ir_measures.read_trec_qrels(str(qrels_file)))
    qids = {q.query_id for q in qrels if q.relevance >= 1}
    systems = json.loads((ctx.d / "exp" / "results.json").read_text())["systems"]["en-sw"]
    measures = [ir_measures.parse_measure(m) for m in ("AP", "P@10", "nDCG@10", "R@100")]
    runs = sorted([*steps.glob("baselines-*/runs/*.run"), *steps.glob("rerank-*/runs/*.run")])
    for run in runs:
        sums = dict.fromkeys(measures, 0.0)
        for metric in ir_measures.iter_calc(measures, qrels, ir_measures.read_trec_run(str(run))):
            sums[metric.measure] += metric.value if metric.query_id in qids else 0.0
        for m in measures:
            mean = sums[m] / len(qids)
            if not _close(systems[run.stem][str(m)], mean):
                return f"{run.stem} {m}: results.json {systems[run.stem][str(m)]}, ir_measures {mean}"
    return _as_reference(ctx) if runs else "no run files"


# --------------------------------------------------------------------------- all of them


def all_cases() -> list[Case]:
    """Every case of the battery, fast ones first."""
    fresh = Case(
        "experiment: --out a fresh empty directory (numbers = ir_measures on its runs)",
        "outputs",
        then(files(exp=None, **{"exp.yaml": yaml.safe_dump(tiny_experiment()).encode()})),
        EXPERIMENT,
        Expect(OK, check=_fresh_experiment_right),
        slow=True,
    )
    cases = [
        *_trec_cases("run", _run_variants()),
        *_trec_cases("qrels", _qrels_variants()),
        *_check_cases(),
        *_config_cases(),
        *_output_cases(),
        *_option_cases(),
        *_evaluation_cases(),
        fresh,
        *_cache_cases(),
        *_concurrency_cases(),
    ]
    names = [c.name for c in cases]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ValueError(f"duplicate case names: {duplicates}")
    return sorted(cases, key=lambda c: c.slow)


def fast_cases() -> list[Case]:
    """The cases that run in this process with no experiment run (tests/test_battery.py)."""
    return [case for case in all_cases() if not case.slow]

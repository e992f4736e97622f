"""Content-addressed steps: a step's output directory is named by a hash of its inputs.

A step is ``(name, params, inputs)``; its key hashes the clir version, the versions of the
libraries whose releases change its output (:data:`LIBRARIES`: a new simplemma lemmatises
otherwise), the name, the params and the keys of the steps it reads, so a change anywhere re-runs
exactly what depends on it (a change of clir's own code under the same version does not: a
developer's edits reuse the steps they do not key). The output is built in
``<name>-<key>.partial/`` and renamed into place when the step succeeds, so a failed or
interrupted step leaves every finished step's output intact and a re-run picks up from there. A
resumable step (training) keeps its partial directory between attempts so that it can continue
from its last checkpoint; any other step starts its partial directory afresh.

A finished step is never trusted blindly. Its ``step.json`` records a manifest (size and SHA-256
of every file in the step's directory); before a step is reused the sizes of all its files are
checked, and the SHA-256 of its smallest files up to :data:`HASH_BUDGET` bytes in all (every file
with ``verify=True``). A step whose ``step.json`` is unreadable or has no manifest, or whose files
fail the check, is rebuilt from scratch with a :class:`StepRebuiltWarning` naming the step and
the file.

Only one runner writes into an experiment directory at a time: :class:`StepRunner` is a context
manager that holds an exclusive lock on ``OUT/.lock`` (which records its PID).

Hashed folder names are for the machine; ``steps/index.json`` is for the reader: it maps each
step's readable name (``tables-en-sw``) to the folder that step last ran or was reused from
(``tables-en-sw-3f2a...``). It is rewritten (atomically) each time a step finishes or is reused,
and entries whose folder is gone are dropped, so it follows the cache.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import threading
import time
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from importlib import metadata
from pathlib import Path
from types import TracebackType
from typing import IO, Any

from clir._version import __version__
from clir.errors import OutputLockedError
from clir.formats import atomic_write
from clir.formats.atomic import output_directory
from clir.formats.manifest import (
    HASH_BUDGET,
    file_manifest,
    file_manifest_names,
    is_manifest,
    manifest_problem,
)

DONE = "step.json"
LOCK = ".lock"
INDEX = "index.json"
"""``steps/index.json``: readable step name -> step folder name."""


class StepRebuiltWarning(UserWarning):
    """A finished step failed its check (unreadable ``step.json``, or a file changed) and is
    rebuilt."""


class _StaleStep(Exception):
    """Why a finished step cannot be reused (internal: turned into a warning and a rebuild)."""


@dataclass(frozen=True)
class StepResult:
    """A finished step: where its output lies and whether this run computed it."""

    name: str
    key: str
    path: Path
    cached: bool
    seconds: float


LIBRARIES = ("simplemma", "snowballstemmer", "stopwordsiso", "gensim", "numpy", "torch")
"""The libraries whose release changes what a step computes (the analyzers' lemmas, stems and
stopwords; the space's word2vec; training and scoring): their versions are part of every key."""


@cache
def library_versions() -> dict[str, str | None]:
    """The installed version of each of :data:`LIBRARIES` (``None``: not installed)."""
    versions: dict[str, str | None] = {}
    for library in LIBRARIES:
        try:
            versions[library] = metadata.version(library)
        except metadata.PackageNotFoundError:
            versions[library] = None
    return versions


def step_key(name: str, params: Mapping[str, Any], inputs: Sequence[StepResult] = ()) -> str:
    """The content hash of a step: clir's version and :func:`library_versions`, its name, JSON
    params and the keys of its inputs."""
    payload = {
        "clir_version": __version__,
        "libraries": library_versions(),
        "name": name,
        "params": params,
        "inputs": sorted(step.key for step in inputs),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


def _verified_seconds(path: Path, verify: bool, key: str) -> float:
    """Check a finished step's files against its manifest, and that it was built for ``key``
    (the key its ``step.json`` records: a step folder renamed, copied or swapped by hand is whole
    and matches its own manifest, and had been reused as the step of its new name).

    Returns:
        The seconds its build took.

    Raises:
        _StaleStep: Naming what failed.
    """
    try:
        record = json.loads((path / DONE).read_text(encoding="utf-8"))
    except (OSError, ValueError) as error:  # ValueError: bad JSON or bad UTF-8
        raise _StaleStep(f"{DONE} is unreadable ({error})") from None
    if not isinstance(record, dict) or not is_manifest(record.get("files")):
        raise _StaleStep(f"{DONE} records no manifest of the step's files (an older clir wrote it?)")
    if record.get("key") != key:
        raise _StaleStep(
            f"{DONE} records the key {record.get('key')!r}, not its folder's {key!r} (a step folder "
            "renamed, copied or swapped by hand: the output of other inputs)"
        )
    if type(record.get("seconds")) not in (int, float):
        raise _StaleStep(f"{DONE} records no build time")
    problem = manifest_problem(path, record["files"], None if verify else HASH_BUDGET)
    if problem is not None:
        raise _StaleStep(problem)
    added = sorted(set(file_manifest_names(path)) - {DONE, *record["files"]})
    if added:  # e.g. a run dropped into a step's runs/, which the experiment would report
        raise _StaleStep(f"{added[0]} is not in the manifest (a file added after the step was built)")
    return float(record["seconds"])


class StepRunner:
    """Runs steps under ``root/steps/<name>-<key>/``, skipping those already done and intact.

    Use it as a context manager, which holds the lock of ``root`` (``with StepRunner(out) as
    runner:``).

    Args:
        root: The experiment's output directory.
        log: Called with one line per step (``print`` by default).
        verify: Check the SHA-256 of every file of a reused step, not only of the smallest
            :data:`HASH_BUDGET` bytes.
        wait: When another process holds the lock, wait for it instead of raising.
        force: Claim ``root`` even when it is a non-empty directory that is not an experiment's
            (see :func:`~clir.formats.atomic.output_directory`).

    Attributes:
        timings: Seconds each step took in this run (0 for a reused one).
        reused: Seconds each reused step's build took, when it was built.
    """

    def __init__(
        self,
        root: str | Path,
        log: Callable[[str], None] = print,
        *,
        verify: bool = False,
        wait: bool = False,
        force: bool = False,
    ) -> None:
        self.root = Path(root)
        self.log = log
        self.verify = verify
        self.wait = wait
        self.force = force
        self.timings: dict[str, float] = {}
        self.reused: dict[str, float] = {}
        self._lock: IO[str] | None = None
        self._index_lock = threading.Lock()  # steps may run in two threads (the experiment's space)

    def __enter__(self) -> StepRunner:
        """Claim ``root`` as an experiment directory and take its exclusive lock (``root/.lock``,
        which records this PID).

        Raises:
            OutputExistsError: If ``root`` is neither new, empty nor an experiment directory (and
                ``force`` is false): clir never writes its report over a user's files.
            OutputLockedError: If another process holds it (and ``wait`` is false); the message
                names the directory and that process's PID.
        """
        output_directory(self.root, kind="experiment", force=self.force)
        handle = (self.root / LOCK).open("a+", encoding="utf-8")
        try:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                handle.seek(0)
                holder = f"PID {handle.read().strip() or 'unknown'}"
                if not self.wait:
                    raise OutputLockedError(
                        f"{self.root} is in use by another clir run ({holder}, which holds "
                        f"{self.root / LOCK}); wait for it to finish, or choose another output directory"
                    ) from None
                self.log(f"[wait]   {self.root} is in use by {holder}")
                fcntl.flock(handle, fcntl.LOCK_EX)
            handle.seek(0)
            handle.truncate()
            handle.write(f"{os.getpid()}\n")
            handle.flush()
        except BaseException:
            handle.close()
            raise
        self._lock = handle
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        """Release the lock."""
        if self._lock is not None:
            self._lock.close()  # closing the file releases its flock
            self._lock = None

    def run(
        self,
        name: str,
        params: Mapping[str, Any],
        build: Callable[[Path], None],
        inputs: Sequence[StepResult] = (),
        *,
        resumable: bool = False,
    ) -> StepResult:
        """Run ``build(work_dir)`` unless a finished, intact output with the same key exists.

        Args:
            name: The step's name (also its directory prefix), e.g. ``"tables-en-sw"``.
            params: Everything the step's output depends on besides its inputs (JSON-able).
            build: Writes the step's output into the directory it is given.
            inputs: The steps whose outputs ``build`` reads.
            resumable: Keep the work directory of a failed attempt for the next one.

        Returns:
            The step's result; ``cached`` is true when it was skipped.

        Raises:
            OutputLockedError: Outside ``with StepRunner(...)``.
        """
        if self._lock is None:
            raise OutputLockedError(
                f"StepRunner.run outside `with StepRunner({str(self.root)!r}) as runner:`"
            )
        key = step_key(name, params, inputs)
        path = self.root / "steps" / f"{name}-{key}"
        work = path.with_name(f"{path.name}.partial")
        label = "[run]    "
        if path.is_dir():
            try:
                seconds = _verified_seconds(path, self.verify, key)
            except _StaleStep as stale:
                warnings.warn(
                    f"step {name} ({path}): {stale}; rebuilding it from scratch",
                    StepRebuiltWarning,
                    stacklevel=2,
                )
                shutil.rmtree(work, ignore_errors=True)
                label = "[rebuild] "
            else:
                self.log(f"[cached] {name}")
                self.timings.setdefault(name, 0.0)
                self.reused[name] = seconds
                self._index(name, path)
                return StepResult(name, key, path, True, seconds)
        if resumable and work.is_dir():
            label = "[resume] "
        else:
            shutil.rmtree(work, ignore_errors=True)
        self.log(f"{label}{name}")
        work.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        build(work)
        seconds = time.perf_counter() - start
        files = file_manifest(work, exclude=(DONE,))
        record = {"name": name, "key": key, "params": params, "seconds": seconds, "files": files}
        with atomic_write(work / DONE) as handle:
            json.dump(record, handle, indent=2, default=str)
        shutil.rmtree(path, ignore_errors=True)
        os.replace(work, path)
        self.timings[name] = seconds
        self._index(name, path)
        return StepResult(name, key, path, False, seconds)

    def _index(self, name: str, path: Path) -> None:
        """Point ``name`` at ``path`` in ``steps/index.json``, dropping entries whose folder is gone."""
        with self._index_lock:
            self._write_index(name, path)

    def _write_index(self, name: str, path: Path) -> None:
        index_path = path.parent / INDEX
        try:
            entries = json.loads(index_path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # none yet, or unreadable: rebuilt from this run's steps
            entries = {}
        if not isinstance(entries, dict):
            entries = {}
        entries[name] = path.name
        kept = {
            step: folder
            for step, folder in sorted(entries.items())
            if isinstance(folder, str) and (path.parent / folder / DONE).is_file()
        }
        with atomic_write(index_path) as handle:
            json.dump(kept, handle, indent=2)

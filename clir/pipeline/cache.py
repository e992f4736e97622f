"""Content-addressed steps: a step's output directory is named by a hash of its inputs.

A step is ``(name, params, inputs)``; its key hashes the clir version, the name, the params and
the keys of the steps it reads, so a change anywhere re-runs exactly what depends on it. The
output is built in ``<name>-<key>.partial/`` and renamed into place when the step succeeds, so a
failed or interrupted step leaves every finished step's output intact and a re-run picks up
from there. A resumable step (training) keeps its partial directory between attempts so that it
can continue from its last checkpoint; any other step starts its partial directory afresh.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import clir

DONE = "step.json"


@dataclass(frozen=True)
class StepResult:
    """A finished step: where its output lies and whether this run computed it."""

    name: str
    key: str
    path: Path
    cached: bool
    seconds: float


def step_key(name: str, params: Mapping[str, Any], inputs: Sequence[StepResult] = ()) -> str:
    """The content hash of a step: its name, JSON params and the keys of its inputs."""
    payload = {
        "clir_version": clir.__version__,
        "name": name,
        "params": params,
        "inputs": sorted(step.key for step in inputs),
    }
    text = json.dumps(payload, sort_keys=True, default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]


class StepRunner:
    """Runs steps under ``root/steps/<name>-<key>/``, skipping those already done.

    Args:
        root: The experiment's output directory.
        log: Called with one line per step (``print`` by default).
    """

    def __init__(self, root: str | Path, log: Callable[[str], None] = print) -> None:
        self.root = Path(root)
        self.log = log
        self.timings: dict[str, float] = {}

    def run(
        self,
        name: str,
        params: Mapping[str, Any],
        build: Callable[[Path], None],
        inputs: Sequence[StepResult] = (),
        *,
        resumable: bool = False,
    ) -> StepResult:
        """Run ``build(work_dir)`` unless a finished output with the same key exists.

        Args:
            name: The step's name (also its directory prefix), e.g. ``"tables-en-sw"``.
            params: Everything the step's output depends on besides its inputs (JSON-able).
            build: Writes the step's output into the directory it is given.
            inputs: The steps whose outputs ``build`` reads.
            resumable: Keep the work directory of a failed attempt for the next one.

        Returns:
            The step's result; ``cached`` is true when it was skipped.
        """
        key = step_key(name, params, inputs)
        path = self.root / "steps" / f"{name}-{key}"
        if (path / DONE).is_file():
            seconds = json.loads((path / DONE).read_text())["seconds"]
            self.log(f"[cached] {name}")
            self.timings.setdefault(name, 0.0)
            return StepResult(name, key, path, True, seconds)
        work = path.with_name(f"{path.name}.partial")
        resuming = resumable and work.is_dir()
        self.log(f"[{'resume' if resuming else 'run'}]{' ' if resuming else '    '}{name}")
        if not resumable:
            shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        build(work)
        seconds = time.perf_counter() - start
        record = {"name": name, "key": key, "params": params, "seconds": seconds}
        (work / DONE).write_text(json.dumps(record, indent=2, default=str))
        shutil.rmtree(path, ignore_errors=True)
        os.replace(work, path)
        self.timings[name] = seconds
        return StepResult(name, key, path, False, seconds)

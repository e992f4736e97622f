"""Progress bars: one policy for every bar clir shows (a leaf module, importable by any layer).

Every long loop of clir wraps its iterable in :func:`progress_bar`; the policy lives here:

- **verbosity** (:func:`set_verbosity`, set by the CLI's ``--quiet`` / ``--verbose``): ``QUIET``
  shows no bar; ``NORMAL`` shows a bar only once its work has lasted :data:`DELAY` seconds (so
  sub-second work shows none) and never for a loop of one item (``retrieving 1/1 batch``);
  ``VERBOSE`` shows every bar at once;
- **where it goes**: on a terminal, tqdm's redrawn bar on stderr; anywhere else (a log file, a
  pipe, CI) plain lines, at most one each :data:`LINE_INTERVAL` seconds and a last one when the
  bar closes, never a carriage return.

A caller's own ``progress=False`` (an API argument) turns its bars off at any verbosity.
"""

from __future__ import annotations

import sys
from collections.abc import Iterable
from typing import IO, Any, TypeVar

from tqdm import tqdm

from clir.errors import ConfigError

QUIET, NORMAL, VERBOSE = 0, 1, 2
DELAY = 1.0
"""Seconds of work before a bar appears (at ``NORMAL`` verbosity)."""
LINE_INTERVAL = 10.0
"""Seconds between two plain lines of one bar when stderr is not a terminal."""

T = TypeVar("T")
_CURSOR_UP = "\x1b[A"  # what tqdm writes to go back up to a bar drawn a line lower
_verbosity = NORMAL


def set_verbosity(level: int) -> None:
    """Set the verbosity of every later bar: :data:`QUIET`, :data:`NORMAL` or :data:`VERBOSE`."""
    global _verbosity
    if level not in (QUIET, NORMAL, VERBOSE):
        raise ConfigError(f"verbosity must be {QUIET}, {NORMAL} or {VERBOSE}, got {level!r}")
    _verbosity = level


def verbosity() -> int:
    """The current verbosity."""
    return _verbosity


class _Lines:
    """A stream for tqdm off a terminal: each redraw (``\\r`` + the bar) becomes one line; a
    redraw that only blanks the bar out, or only moves the cursor (a second bar open at the same
    time, which tqdm draws a line lower), is dropped."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> None:
        line = text.replace("\r", "").replace(_CURSOR_UP, "").rstrip()
        if line:
            self.stream.write(line + "\n")

    def flush(self) -> None:
        self.stream.flush()


def progress_bar(
    iterable: Iterable[T] | None = None,
    *,
    desc: str,
    total: float | None = None,
    unit: str = "it",
    enabled: bool = True,
    leave: bool = True,
) -> tqdm:
    """A progress bar over ``iterable`` (or one advanced by ``update``), under clir's policy.

    Args:
        iterable: What to iterate over; ``None`` for a bar advanced by hand.
        desc: The bar's label.
        total: Expected iterations (default ``len(iterable)`` where it has one).
        unit: The unit of an iteration.
        enabled: The caller's own switch (its ``progress`` argument).
        leave: Keep the finished bar on a terminal.

    Returns:
        A tqdm bar (disabled where the policy shows none: iterate over it all the same).
    """
    if total is None and hasattr(iterable, "__len__"):
        total = len(iterable)  # type: ignore[arg-type]
    shown = enabled and _verbosity > QUIET and (_verbosity == VERBOSE or total is None or total > 1)
    options: dict[str, Any] = {"delay": 0.0 if _verbosity == VERBOSE else DELAY}
    stream = sys.stderr
    if not (hasattr(stream, "isatty") and stream.isatty()):
        options.update(file=_Lines(stream), mininterval=LINE_INTERVAL, dynamic_ncols=False, ncols=100)
    return tqdm(iterable, desc=desc, total=total, unit=unit, disable=not shown, leave=leave, **options)


__all__ = [
    "DELAY",
    "LINE_INTERVAL",
    "NORMAL",
    "QUIET",
    "VERBOSE",
    "progress_bar",
    "set_verbosity",
    "verbosity",
]

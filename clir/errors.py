"""The exception hierarchy of clir.

Every error clir raises on bad input is a subclass of :class:`ClirError` *and* of the
built-in exception a caller would expect (``ValueError``, ``FileNotFoundError``, ...), so
``except ValueError`` keeps working for code that does not know about clir.
"""

from __future__ import annotations

from pathlib import Path

from clir._version import DISTRIBUTION


class ClirError(Exception):
    """Base class of every error raised by clir."""


class ConfigError(ClirError, ValueError):
    """An argument, option or configuration value is invalid."""


class FormatError(ClirError, ValueError):
    """A file is malformed; the message names the file and, where known, the line.

    Args:
        path: The file being read.
        line: 1-based line number of the offending line, or ``None`` for whole-file problems.
        message: What is wrong with it.
    """

    def __init__(self, path: str | Path, line: int | None, message: str) -> None:
        self.path = str(path)
        self.line = line
        self.reason = message
        where = f"{self.path}:{line}" if line is not None else self.path
        super().__init__(f"{where}: {message}")


class DataNotFoundError(ClirError, FileNotFoundError):
    """A file, directory or installed data package that clir needs is missing."""


class MissingDependencyError(ClirError, ImportError):
    """An optional dependency is not installed; the message names the extra to install."""

    def __init__(self, package: str, extra: str, purpose: str) -> None:
        super().__init__(
            f"{purpose} needs the '{package}' package, which is not installed. "
            f"Install it with: pip install '{DISTRIBUTION}[{extra}]'"
        )


class NonFiniteError(ClirError, ArithmeticError):
    """A loss or score became NaN or infinite; the message names where (system, seed, epoch, query)
    and the configuration value most likely to blame."""


class OutputExistsError(ClirError, FileExistsError):
    """A save would replace what clir must not: a user's directory, a file, a symbolic link or
    another kind of clir output.

    Args:
        path: Where the output was to be written.
        found: What is there, e.g. ``"a file (clir writes a directory here)"``.
        force_helps: Whether ``--force`` (``force=True``) would write there (a directory
            replaced whole is moved aside first, one filled file by file keeps its files).
        option: The option that named ``path`` (``--out``, ``--png``, ...), for the remedy.
        remedy: What to do, in place of "choose another ``option``" and the ``--force`` advice
            (for a path that no option names, e.g. a member directory inside ``--out``).
    """

    def __init__(
        self,
        path: str | Path,
        found: str,
        *,
        force_helps: bool = True,
        option: str = "--out",
        remedy: str | None = None,
    ) -> None:
        self.path = str(path)
        if remedy is None:
            remedy = f"choose another {option}" + (
                ", or pass --force to write there anyway (nothing of it is deleted)"
                if force_helps
                else " (--force never replaces it)"
            )
        super().__init__(f"{self.path} is {found}; {remedy}; clir never deletes what it did not create")


class OutputLockedError(ClirError, RuntimeError):
    """Another process holds the lock of an output directory (another run writes into it), or a
    step runner was used without taking its lock."""

"""The exception hierarchy of clir.

Every error clir raises on bad input is a subclass of :class:`ClirError` *and* of the
built-in exception a caller would expect (``ValueError``, ``FileNotFoundError``, ...), so
``except ValueError`` keeps working for code that does not know about clir.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from clir._version import DISTRIBUTION


class ClirError(Exception):
    """Base class of every error raised by clir.

    An error pickles whole (its message and attributes), whatever its constructor's arguments:
    one raised in a worker process (a Ray task, a forked search) reaches the caller as itself.
    """

    def __reduce__(self) -> tuple[Any, tuple[type, tuple[Any, ...], dict[str, Any]]]:
        # the default, ``type(self)(*self.args)``, had failed for those of other arguments than
        # their message (FormatError(path, line, message), ...): Ray had reported "Failed to
        # deserialize exception" in place of the worker's error naming its file
        return _unpickled, (type(self), self.args, dict(self.__dict__))


def _unpickled(cls: type[ClirError], args: tuple[Any, ...], state: dict[str, Any]) -> ClirError:
    """A pickled :class:`ClirError` rebuilt without its constructor (see its ``__reduce__``)."""
    error = cls.__new__(cls, *args)
    error.args = args
    error.__dict__.update(state)
    return error


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


class TermlessQueriesWarning(UserWarning):
    """Queries with no term in the index (empty after analysis, e.g. only stopwords, or only
    terms the collection never saw): they retrieve nothing.

    The warnings of one search cut into chunks (on several workers) are shown as one, counting
    them all (:meth:`joined`).

    Args:
        names: The queries, as they are named in the message (qids, or positions ``#i``).
        where: What searched (a stage's name), the message's prefix; empty for none.
    """

    def __init__(self, names: list[str], where: str = "") -> None:
        self.names, self.where = list(names), where
        shown = ", ".join(self.names[:5]) + (", ..." if len(self.names) > 5 else "")
        super().__init__(
            f"{where + ': ' if where else ''}{len(self.names)} query(ies) have no term in the index "
            "(empty after analysis, e.g. only stopwords, or only terms the collection never saw) and "
            f"retrieve nothing: {shown}"
        )

    def __reduce__(self) -> tuple[type, tuple[list[str], str]]:
        return type(self), (self.names, self.where)  # sent back from a worker process whole

    @classmethod
    def joined(cls, warnings: list[TermlessQueriesWarning]) -> list[TermlessQueriesWarning]:
        """One warning per ``where``, its names those of ``warnings`` in order."""
        names: dict[str, list[str]] = {}
        for warning in warnings:
            names.setdefault(warning.where, []).extend(warning.names)
        return [cls(found, where) for where, found in names.items()]

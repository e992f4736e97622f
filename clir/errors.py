"""The exception hierarchy of clir.

Every error clir raises on bad input is a subclass of :class:`ClirError` *and* of the
built-in exception a caller would expect (``ValueError``, ``FileNotFoundError``, ...), so
``except ValueError`` keeps working for code that does not know about clir.
"""

from __future__ import annotations

from pathlib import Path


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
            f"Install it with: pip install 'clir[{extra}]'"
        )


class NonFiniteError(ClirError, ArithmeticError):
    """A loss or score became NaN or infinite; the message names where (system, seed, epoch, query)
    and the configuration value most likely to blame."""

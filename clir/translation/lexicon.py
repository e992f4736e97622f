"""Bilingual lexicons: weighted word/phrase pairs, read from TSV, turned into tables."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clir.errors import ConfigError, FormatError
from clir.formats._lines import numbered_lines
from clir.translation.base import TableTranslator, analyzer_config, register_translator, resolve_analyzer
from clir.translation.table import TranslationTable

MULTIWORD = ("split", "drop", "keep")


@dataclass(frozen=True)
class Lexicon:
    """A bilingual lexicon: ``(source, target, weight)`` entries in surface form.

    Entries may be phrases (``"get tired"``); :meth:`to_table` decides what to do with them.

    Attributes:
        entries: The weighted pairs, in file order.
        source_lang: Language code of the headwords.
        target_lang: Language code of the translations.
        name: Where it came from (a path or a dictionary name), for the table's meta.
        meta: Further facts about the source (e.g. FreeDict's headword count).
    """

    entries: list[tuple[str, str, float]]
    source_lang: str
    target_lang: str
    name: str = ""
    meta: dict[str, Any] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.entries)

    def __iter__(self) -> Iterator[tuple[str, str, float]]:
        return iter(self.entries)

    def to_table(
        self,
        source_analyzer: Any | None = None,
        target_analyzer: Any | None = None,
        multiword: str = "split",
    ) -> TranslationTable:
        """Turn the lexicon into a normalised TranslationTable.

        Each entry's weight goes to its (analyzed) source word; rows are then normalised, so a
        word with n equally weighted senses gives each probability 1/n. With analyzers, both
        sides are analyzed as the index is (stopwords dropped, lemmatised/stemmed), so the
        table's vocabularies match the index's; without, sides are lowercased and split on
        whitespace.

        Multi-word entries: a *source* phrase is kept only if it analyzes to exactly one term
        (``"a while"`` -> ``"while"``); a *target* phrase that analyzes to several terms is
        handled by ``multiword``: ``"split"`` shares the entry's weight equally among its
        terms (``"get tired"`` -> get 1/2, tire 1/2), ``"drop"`` skips it, ``"keep"`` keeps
        the terms joined by a space as one target. Entries with nothing left (all stopwords)
        are skipped.

        Args:
            source_analyzer: Analyzer of the source language, or ``None``.
            target_analyzer: Analyzer of the target language, or ``None``.
            multiword: ``"split"``, ``"drop"`` or ``"keep"``.

        Returns:
            The table (source words without any translation left are absent).

        Raises:
            ConfigError: For an unknown ``multiword`` or when no entry survives.
        """
        if multiword not in MULTIWORD:
            raise ConfigError(f"multiword must be one of {sorted(MULTIWORD)}, got {multiword!r}")
        source_cache: dict[str, list[str]] = {}
        target_cache: dict[str, list[str]] = {}

        def triples() -> Iterator[tuple[str, str, float]]:
            for source, target, weight in self.entries:
                if source not in source_cache:
                    source_cache[source] = _terms(source, source_analyzer)
                if target not in target_cache:
                    target_cache[target] = _terms(target, target_analyzer)
                source_terms, target_terms = source_cache[source], target_cache[target]
                if len(source_terms) != 1 or not target_terms:
                    continue
                if len(target_terms) == 1:
                    yield source_terms[0], target_terms[0], weight
                elif multiword == "split":
                    for term in target_terms:
                        yield source_terms[0], term, weight / len(target_terms)
                elif multiword == "keep":
                    yield source_terms[0], " ".join(target_terms), weight

        meta = {
            "model": "lexicon",
            "lexicon": self.name,
            "multiword": multiword,
            "source_analyzer": analyzer_config(source_analyzer),
            "target_analyzer": analyzer_config(target_analyzer),
            **self.meta,
        }
        table = TranslationTable.from_weights(triples(), self.source_lang, self.target_lang, meta)
        if not len(table):
            raise ConfigError(f"lexicon {self.name or '(unnamed)'} has no usable entry after analysis")
        return table

    def inverted(self) -> Lexicon:
        """The same pairs read the other way (target -> source)."""
        return Lexicon(
            [(t, s, w) for s, t, w in self.entries], self.target_lang, self.source_lang, self.name, self.meta
        )


def read_tsv_lexicon(path: str | Path, source_lang: str, target_lang: str) -> Lexicon:
    """Read a lexicon file of ``source<TAB>target[<TAB>weight]`` lines.

    Blank lines and lines starting with ``#`` are skipped. The weight defaults to 1.

    Args:
        path: The UTF-8 TSV file.
        source_lang: Language code of the first column.
        target_lang: Language code of the second column.

    Returns:
        The lexicon.

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: On a line without 2 or 3 fields, with an empty field, a pair written
            twice (its weights would add up) or a weight that is not a finite number >= 0
            (naming the file and line).
    """
    entries: list[tuple[str, str, float]] = []
    first_line: dict[tuple[str, str], int] = {}
    for number, line in numbered_lines(path):
        if line.lstrip().startswith("#"):
            continue
        parts = line.split("\t")
        if len(parts) not in (2, 3):
            raise FormatError(
                path,
                number,
                f"expected 2 or 3 tab-separated fields (source, target[, weight]), "
                f"found {len(parts)}: {line!r}",
            )
        source, target = parts[0].strip(), parts[1].strip()
        if not source or not target:
            raise FormatError(path, number, f"empty source or target: {line!r}")
        if (first := first_line.setdefault((source, target), number)) != number:  # summed silently
            raise FormatError(
                path,
                number,
                f"pair {source!r} -> {target!r} is written twice (first on line {first}); a second "
                "line would double its weight",
            )
        weight = 1.0
        if len(parts) == 3:
            try:  # as C reads numbers: no "1_000" (Python's float() reads 1000)
                weight = float(parts[2]) if "_" not in parts[2] else math.nan
            except ValueError:
                raise FormatError(path, number, f"weight {parts[2]!r} is not a number") from None
            if not (math.isfinite(weight) and weight >= 0):
                raise FormatError(path, number, f"weight must be a finite number >= 0, got {parts[2]!r}")
        entries.append((source, target, weight))
    return Lexicon(entries, source_lang, target_lang, name=str(path))


def _terms(text: str, analyzer: Any | None) -> list[str]:
    return list(analyzer.analyze(text)) if analyzer is not None else text.lower().split()


def lexicon_from_pairs(pairs: Iterable[tuple[str, str]], source_lang: str, target_lang: str) -> Lexicon:
    """A lexicon of equally weighted ``(source, target)`` pairs."""
    return Lexicon([(s, t, 1.0) for s, t in pairs], source_lang, target_lang)


@register_translator("tsv")
class TSVTranslator(TableTranslator):
    """Word-by-word translation with a TSV lexicon (see :func:`read_tsv_lexicon`).

    Args:
        path: The lexicon file.
        source_lang: Language of its first column.
        target_lang: Language of its second column.
        analyzer: Source analyzer or language code (``None``: ``source_lang``'s).
        target_analyzer: Target analyzer or language code (``None``: ``target_lang``'s).
        k: Translations per term.
        multiword: How target phrases are handled (see :meth:`Lexicon.to_table`).
    """

    def __init__(
        self,
        path: str | Path,
        source_lang: str,
        target_lang: str,
        analyzer: Any = None,
        target_analyzer: Any = None,
        k: int = 1,
        multiword: str = "split",
    ) -> None:
        analyzer = resolve_analyzer(analyzer, source_lang)
        table = read_tsv_lexicon(path, source_lang, target_lang).to_table(
            analyzer, resolve_analyzer(target_analyzer, target_lang), multiword
        )
        super().__init__(table, analyzer, k)

"""Parallel text as TSV: ``pair_id<TAB>english<TAB>other``."""

from __future__ import annotations

import re
import warnings
from collections.abc import Iterable, Sequence
from pathlib import Path

from clir.errors import ConfigError, FormatError
from clir.formats._lines import fields_of, numbered_lines
from clir.formats.atomic import atomic_write
from clir.formats.identifiers import check_identifier
from clir.types import ParallelPair


def read_parallel(path: str | Path) -> list[ParallelPair]:
    """Read aligned pairs from a 3-column TSV file.

    Raises:
        FormatError: On a line without exactly three tab-separated fields, with an invalid pair
            id (see :mod:`clir.formats.identifiers`) or with the pair id of an earlier line (the
            pair would count twice in the tables, and a pseudo collection refuses it).

    A first line that looks like a header (``pair_id<TAB>english<TAB>swahili``) is read as a pair,
    with a warning.
    """
    pairs = []
    lines: dict[str, int] = {}
    for number, line in numbered_lines(path):
        pair_id, source, target = fields_of(path, number, line, "\t", 3, "pair_id, english, other")
        if not pairs and _looks_like_header(pair_id, source, target):
            warnings.warn(
                f"{path}:{number}: {line!r} looks like a header and is read as a pair; remove the line "
                "if it is a header",
                stacklevel=2,
            )
        check_identifier(pair_id, "pair id", path, number)
        if (first := lines.setdefault(pair_id, number)) != number:
            raise FormatError(
                path, number, f"pair id {pair_id!r} is that of line {first}: pair ids must be unique"
            )
        pairs.append(ParallelPair(pair_id, source, target))
    return pairs


_HEADER_IDS = frozenset({"id", "_id", "pair_id", "pairid", "pair-id", "pair", "sid", "segment_id", "line_id"})
_HEADER_SIDES = frozenset({"en", "eng", "english", "source", "src", "source_text", "text", "sentence"})


def _looks_like_header(pair_id: str, source: str, target: str) -> bool:
    """A first line such as ``pair_id<TAB>english<TAB>swahili``: one word a side, and a column
    name where the pair id or the English text goes."""
    one_word = len(source.split()) == 1 and len(target.split()) == 1
    return one_word and (pair_id.strip().lower() in _HEADER_IDS or source.strip().lower() in _HEADER_SIDES)


_WORD = re.compile(r"\w+")
_SAMPLE = 2000
"""Pairs read (spread over the text) to tell the sides' languages apart."""


def check_parallel_sides(pairs: Sequence[ParallelPair], doc_lang: str, path: str | Path) -> None:
    """Check that the second column reads as English and the third as ``doc_lang``, by the share
    of each side's words that are stopwords of a language (stopwordsiso's lists).

    Raises:
        FormatError: If every third field is empty, or if the third column reads as more English
            than the second (the columns swapped: ``pair_id<TAB>other<TAB>english``).

    Warns:
        When another language's stopwords are at least 15 % of the third column's words and
        three times the share of ``doc_lang``'s (``--doc-lang`` naming another language than the
        text's; a language without a list of 20 stopwords is not checked).
    """
    import stopwordsiso

    if pairs and not any(pair.target.strip() for pair in pairs):
        raise FormatError(
            path,
            None,
            f"every pair's third field (the {doc_lang} side) is empty: expected pair_id, english, other",
        )
    step = max(1, len(pairs) // _SAMPLE)
    sample = pairs[::step]
    english = [w for pair in sample for w in _WORD.findall(pair.source.lower())]
    other = [w for pair in sample for w in _WORD.findall(pair.target.lower())]
    if len(english) < 50 or len(other) < 50:  # too little text to tell
        return

    lists = {lang: stopwordsiso.stopwords(lang) for lang in sorted(stopwordsiso.langs())}  # read once

    def share(words: list[str], lang: str) -> float:
        stop = lists[lang]
        return sum(word in stop for word in words) / len(words)

    if doc_lang != "en":
        in_english, in_other = share(english, "en"), share(other, "en")
        if in_other > in_english + 0.2:
            raise FormatError(
                path,
                None,
                f"its third column reads as English ({in_other:.0%} of its words are English stopwords, "
                f"{in_english:.0%} of the second column's): the columns are expected in the order pair_id, "
                f"english, {doc_lang}; swap them (e.g. awk -F'\\t' -v OFS='\\t' '{{print $1,$3,$2}}')",
            )
    if len(lists.get(doc_lang, ())) < 20:
        return
    own = share(other, doc_lang)
    shares = {
        lang: share(other, lang)
        for lang, stop in lists.items()
        if lang not in {doc_lang, "en"} and len(stop) >= 20
    }
    best = max(shares, key=shares.__getitem__, default=None)
    if best is not None and shares[best] >= 0.15 and own < shares[best] / 3:
        warnings.warn(
            f"{path}: its third column does not read as {doc_lang!r} ({own:.0%} of its words are "
            f"{doc_lang} stopwords, {shares[best]:.0%} are {best!r} stopwords): check --doc-lang",
            stacklevel=2,
        )


def write_parallel(path: str | Path, pairs: Iterable[ParallelPair]) -> None:
    """Write aligned pairs as 3-column TSV (atomically); each run of whitespace inside a text (tabs
    and line breaks included) becomes one space, and surrounding whitespace is dropped.

    Raises:
        ConfigError: On an invalid pair id (see :mod:`clir.formats.identifiers`) or one given
            twice (:func:`read_parallel` refuses it); ``path`` is then left as it was.
    """
    seen: set[str] = set()
    with atomic_write(path) as out:
        for pair_id, source, target in pairs:
            check_identifier(pair_id, "pair id", path)
            if pair_id in seen:
                raise ConfigError(f"{path}: not written: pair id {pair_id!r} is given twice")
            seen.add(pair_id)
            out.write("\t".join([pair_id, " ".join(source.split()), " ".join(target.split())]) + "\n")

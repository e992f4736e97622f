"""Seed lexicons for the Procrustes alignment and gold dictionaries for BLI evaluation.

A *lexicon* here is a list of ``(source word, target word)`` pairs of analyzed tokens, the same
token level as every other part of clir. They come from IBM Model 1 tables learned on the
parallel side (mutual top-1 pairs), from a dictionary (TSV or FreeDict, through
:mod:`clir.translation`), or from identical strings (names, numbers).
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Iterable, Sequence
from typing import Any

from clir.errors import ConfigError
from clir.translation.lexicon import Lexicon
from clir.translation.table import TranslationTable

Pairs = list[tuple[str, str]]


def seed_from_tables(
    forward: TranslationTable,
    backward: TranslationTable | None = None,
    min_prob: float = 0.1,
) -> Pairs:
    """High-probability mutual translation pairs from IBM Model 1 tables.

    A pair ``(f, e)`` is kept when ``e`` is the most probable translation of ``f`` in
    ``forward`` (p(e|f)), ``f`` is the most probable translation of ``e`` in ``backward``
    (p(f|e)), and both probabilities reach ``min_prob``. Without ``backward`` only the forward
    condition applies.

    Args:
        forward: p(target | source), e.g. the doc->en table for a doc->en seed lexicon.
        backward: p(source | target), the table of the other direction.
        min_prob: Threshold on both probabilities.

    Returns:
        ``(source, target)`` pairs in the order of ``forward``'s source vocabulary.

    Raises:
        ConfigError: If the two tables' languages do not mirror each other.
    """
    if backward is not None and (
        backward.source_lang != forward.target_lang or backward.target_lang != forward.source_lang
    ):
        raise ConfigError(
            f"backward table is {backward.source_lang}->{backward.target_lang}, expected "
            f"{forward.target_lang}->{forward.source_lang} (the mirror of the forward table)"
        )
    pairs: Pairs = []
    for word in forward.source_vocab:
        best = forward.translations(word, k=1)
        if not best or best[0][1] < min_prob:
            continue
        target = best[0][0]
        if backward is not None:
            back = backward.translations(target, k=1)
            if not back or back[0][0] != word or back[0][1] < min_prob:
                continue
        pairs.append((word, target))
    return pairs


def pairs_from_lexicon(
    lexicon: Lexicon, source_analyzer: Any | None = None, target_analyzer: Any | None = None
) -> Pairs:
    """Single-token ``(source, target)`` pairs of a dictionary at the analyzed token level.

    Entries whose sides do not analyze to exactly one token each (phrases, stopwords) are dropped.

    Args:
        lexicon: E.g. :func:`clir.translation.freedict.load_freedict` or ``read_tsv_lexicon``.
        source_analyzer: Analyzer of the headword language (``None``: lowercase + split).
        target_analyzer: Analyzer of the translation language.

    Returns:
        Distinct pairs in dictionary order.
    """
    table = lexicon.to_table(source_analyzer, target_analyzer, multiword="drop")
    pairs: Pairs = []
    for word in table.source_vocab:
        pairs.extend((word, target) for target, _ in table.translations(word))
    return pairs


def identical_pairs(source_vocab: Iterable[str], target_vocab: Iterable[str], min_length: int = 2) -> Pairs:
    """Words spelled the same in both vocabularies (names, numbers, loans) as seed pairs.

    Args:
        source_vocab: Source words (order kept).
        target_vocab: Target words.
        min_length: Shorter strings are ignored.
    """
    targets = set(target_vocab)
    return [(w, w) for w in source_vocab if len(w) >= min_length and w in targets]


def invert(pairs: Iterable[tuple[str, str]]) -> Pairs:
    """The same pairs read the other way."""
    return [(t, s) for s, t in pairs]


def as_dictionary(pairs: Iterable[tuple[str, str]]) -> dict[str, set[str]]:
    """Group pairs by source word: ``{source: {targets}}`` (the gold form for BLI)."""
    gold: dict[str, set[str]] = defaultdict(set)
    for source, target in pairs:
        gold[source].add(target)
    return dict(gold)


def check_test_size(test_size: float | int) -> None:
    """Refuse a held-out size that :func:`split_pairs` cannot use: a fraction in ``[0, 1)`` or a
    whole number of words.

    Raises:
        ConfigError: Naming ``test_size`` (NaN, infinite, negative, or a fraction above 1).
    """
    usable = (
        isinstance(test_size, (int, float))
        and not isinstance(test_size, bool)
        and math.isfinite(test_size)
        and (0 <= test_size < 1 or (float(test_size).is_integer() and test_size >= 1))
    )
    if not usable:
        raise ConfigError(
            f"test_size={test_size!r} is invalid; expected a share of the seed words in [0, 1) or a "
            "whole number of them"
        )


def split_pairs(
    pairs: Sequence[tuple[str, str]], test_size: float | int = 0.2, seed: int = 0
) -> tuple[Pairs, Pairs]:
    """Split a lexicon by source word into train (seed) and held-out test pairs.

    All pairs of a source word go to the same side, so no test word was seen during alignment.

    Args:
        pairs: The lexicon.
        test_size: Fraction (``< 1``) or number (``>= 1``) of source words held out.
        seed: Seed of the random split.

    Returns:
        ``(train, test)``.

    Raises:
        ConfigError: On a negative test size or one larger than the number of words.
    """
    check_test_size(test_size)
    words = sorted({s for s, _ in pairs})
    n_test = round(test_size * len(words)) if test_size < 1 else int(test_size)
    if not 0 <= n_test <= len(words):
        raise ConfigError(f"test_size={test_size!r}: expected 0 <= held-out words <= {len(words)}")
    held_out = set(random.Random(seed).sample(words, n_test))
    train = [p for p in pairs if p[0] not in held_out]
    test = [p for p in pairs if p[0] in held_out]
    return train, test

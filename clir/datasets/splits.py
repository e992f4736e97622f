"""Seeded, deterministic query splits.

Candidate verses are shuffled with ``random.Random(seed)`` (whose shuffle is stable across
Python versions) and taken in that order, skipping a verse whose passage already has a query:
no two queries share their grade-2 passage, so a model trained on the train queries never sees
the passage a test query is about as a train query's own passage (it may see it as a train
query's grade-1 cross-reference passage: 17 of the 500 test queries and 3 of the 100 dev queries
of the default en-sw collection). The first ``n_test`` verses go to
``test``, the next ``n_dev`` to ``dev``, the next ``n_train`` to ``train``; so changing
``n_train`` or ``n_dev`` leaves the test queries as they are.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Sequence

from clir.datasets.base import VerseId
from clir.errors import ConfigError

SPLITS = ("train", "dev", "test")
"""Split names, in the order they are written and reported."""

_DRAW_ORDER = ("test", "dev", "train")


class SplitSizeError(ConfigError):
    """More queries asked for than the data can give. Its message names the sizes asked for as
    the API's arguments (``n_train=8``); :meth:`naming` names them otherwise (the CLI's
    ``--n-train 8``).

    Args:
        parts: The message: text, and ``(argument, value)`` pairs named by :meth:`naming`.
        source: The function named before the message (``build_pseudo_collection: ...``).
    """

    def __init__(self, *parts: str | tuple[str, object], source: str | None = None) -> None:
        self.parts = parts
        message = self.naming(lambda name, value: f"{name}={value}")
        super().__init__(f"{source}: {message}" if source else message)

    def naming(self, name: Callable[[str, object], str]) -> str:
        """The message (without its source), each ``(argument, value)`` written
        ``name(argument, value)``."""
        return "".join(part if isinstance(part, str) else name(*part) for part in self.parts)


def check_split_sizes(sizes: dict[str, int]) -> dict[str, int]:
    """Validate split sizes (non-negative integers keyed by :data:`SPLITS`).

    Raises:
        ConfigError: On an unknown split name or a size that is not a non-negative integer.
    """
    for name, size in sizes.items():
        if name not in SPLITS:
            raise ConfigError(f"unknown split {name!r}; splits: {', '.join(SPLITS)}")
        if isinstance(size, bool) or not isinstance(size, int) or size < 0:
            raise ConfigError(f"n_{name} must be a non-negative integer, got {size!r}")
    return {name: sizes.get(name, 0) for name in SPLITS}


def sample_query_verses(
    candidates: Sequence[VerseId],
    sizes: dict[str, int],
    seed: int,
    group_of: Callable[[VerseId], object],
) -> dict[str, list[VerseId]]:
    """Draw disjoint query verses for each split, at most one per group (passage).

    Args:
        candidates: Verses that may become queries (any order: they are sorted first).
        sizes: Number of queries per split, keyed by ``train``/``dev``/``test``.
        seed: Seed of the shuffle.
        group_of: Maps a verse to its group; one verse per group is drawn.

    Returns:
        ``split -> verses`` in draw order, for every split of :data:`SPLITS`.

    Raises:
        SplitSizeError: If fewer groups have candidates than the sizes ask for.
    """
    sizes = check_split_sizes(sizes)
    order = sorted(candidates)
    random.Random(seed).shuffle(order)
    drawn: list[VerseId] = []
    used: set[object] = set()
    wanted = sum(sizes.values())
    for verse in order:
        if len(drawn) == wanted:
            break
        group = group_of(verse)
        if group not in used:
            used.add(group)
            drawn.append(verse)
    if len(drawn) < wanted:
        parts: list[str | tuple[str, object]] = [f"asked for {wanted} queries ("]
        for split in SPLITS:
            parts += [", "] if len(parts) > 1 else []
            parts.append((f"n_{split}", sizes[split]))
        parts.append(
            f") but only {len(drawn)} passages have a verse usable as a query; lower the sizes or add books"
        )
        raise SplitSizeError(*parts)
    out: dict[str, list[VerseId]] = {}
    start = 0
    for name in _DRAW_ORDER:
        out[name] = drawn[start : start + sizes[name]]
        start += sizes[name]
    return {name: out[name] for name in SPLITS}

"""Bilingual lexicon induction (BLI): precision@k of a space's word translations against a gold
dictionary, by nearest neighbour and by CSLS (Conneau et al. 2018)."""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass

import numpy as np

from clir.embeddings.csls import translate
from clir.embeddings.space import SharedSpace
from clir.errors import ConfigError

METHODS = ("nn", "csls")


@dataclass(frozen=True)
class BLIResult:
    """One row of a BLI table.

    Attributes:
        dictionary: Name of the gold dictionary (e.g. ``"ibm1-heldout"``, ``"freedict"``).
        source: Source language.
        target: Target language.
        method: ``"nn"`` or ``"csls"``.
        queries: Source words evaluated (in the space, with a gold translation in the space):
            the denominator of the precisions.
        p_at_1: Precision@1.
        p_at_5: Precision@5.
        gold_words: Source words of the dictionary, ``queries`` of them evaluated (the others,
            absent from the space, are skipped, not counted as misses).
    """

    dictionary: str
    source: str
    target: str
    method: str
    queries: int
    p_at_1: float
    p_at_5: float
    gold_words: int

    def to_dict(self) -> dict[str, object]:
        """The row as a dict (JSON, table printing)."""
        return asdict(self)


@dataclass(frozen=True)
class BLIPredictions:
    """Per-word outcome of a BLI run, for analyses such as precision by frequency.

    Attributes:
        words: The evaluated source words.
        ranks: Each word's frequency rank in the source vocabulary (0 = most frequent).
        hit_rank: The rank (0-based) of the first correct candidate, ``-1`` when none of the top
            ``k`` is correct.
        predictions: The top-``k`` target words per source word.
    """

    words: list[str]
    ranks: np.ndarray
    hit_rank: np.ndarray
    predictions: list[list[str]]

    def precision(self, k: int) -> float:
        """Precision@k over all words (0.0 for none)."""
        if not self.words:
            return 0.0
        return float(np.mean((self.hit_rank >= 0) & (self.hit_rank < k)))


Gold = Mapping[str, Iterable[str] | str] | Iterable[tuple[str, str]]


def _gold_dict(gold: Gold) -> dict[str, set[str]]:
    if isinstance(gold, Mapping):
        # a str value is one translation (set("mbwa") had made its letters the gold: no hit)
        return {s: {ts} if isinstance(ts, str) else set(ts) for s, ts in gold.items()}
    out: dict[str, set[str]] = {}
    for s, t in gold:
        out.setdefault(s, set()).add(t)
    return out


def bli_predictions(
    space: SharedSpace,
    source: str,
    target: str,
    gold: Gold,
    method: str = "csls",
    k: int = 5,
    csls_k: int = 10,
) -> BLIPredictions:
    """Translate every gold source word that has an in-vocabulary vector and score the top ``k``.

    A gold word counts only when it and at least one of its translations are in the space's
    vocabularies (the usual BLI protocol: coverage is reported separately as ``queries``).
    Candidates are the whole target vocabulary; CSLS's target-side term is computed over the
    whole source vocabulary.

    Args:
        space: The shared space.
        source: Source language code.
        target: Target language code.
        gold: ``{source word: {target words}}`` (a single target word may stand for its set) or
            ``(source, target)`` pairs.
        method: ``"nn"`` or ``"csls"``.
        k: Candidates kept per word.
        csls_k: CSLS neighbourhood size.

    Raises:
        ConfigError: On an unknown method.
    """
    if method not in METHODS:
        raise ConfigError(f"method={method!r} is not known; expected one of {sorted(METHODS)}")
    gold_dict = _gold_dict(gold)
    src_index = {w: i for i, w in enumerate(space.vocabulary(source))}
    tgt_vocab = space.vocabulary(target)
    tgt_set = set(tgt_vocab)
    words = sorted(
        (w for w, ts in gold_dict.items() if w in src_index and ts & tgt_set), key=lambda w: src_index[w]
    )
    src_all = space.array(source)
    ranks = np.asarray([src_index[w] for w in words], dtype=np.int64)
    hit = np.full(len(words), -1, dtype=np.int64)
    predictions: list[list[str]] = []
    if words:
        _, top = translate(
            src_all[ranks], space.array(target), k, method=method, csls_k=csls_k, source_background=src_all
        )
        for i, w in enumerate(words):
            cands = [tgt_vocab[j] for j in top[i]]
            predictions.append(cands)
            for r, c in enumerate(cands):
                if c in gold_dict[w]:
                    hit[i] = r
                    break
    return BLIPredictions(words, ranks, hit, predictions)


def evaluate_bli(
    space: SharedSpace,
    source: str,
    target: str,
    gold: Gold,
    *,
    dictionary: str = "gold",
    methods: Sequence[str] = METHODS,
    csls_k: int = 10,
) -> list[BLIResult]:
    """Precision@1 and @5 of ``source -> target`` translation, one row per method.

    Args:
        space: The shared space.
        source: Source language code.
        target: Target language code.
        gold: The test dictionary (never used for alignment).
        dictionary: Its name, for the table.
        methods: Retrieval methods (``"nn"``, ``"csls"``).
        csls_k: CSLS neighbourhood size.

    Returns:
        One :class:`BLIResult` per method.
    """
    gold_dict = _gold_dict(gold)
    rows = []
    for method in methods:
        pred = bli_predictions(space, source, target, gold_dict, method=method, k=5, csls_k=csls_k)
        rows.append(
            BLIResult(
                dictionary,
                source,
                target,
                method,
                len(pred.words),
                pred.precision(1),
                pred.precision(5),
                len(gold_dict),
            )
        )
    return rows


def precision_by_frequency(
    predictions: BLIPredictions,
    bins: Sequence[int] = (0, 500, 1000, 2000, 5000, 10000, 20000, 10**9),
    k: int = 1,
) -> list[dict[str, float]]:
    """Precision@k within bins of source-word frequency rank.

    Args:
        predictions: From :func:`bli_predictions`.
        bins: Rank boundaries (``[lo, hi)`` bins).
        k: Precision cut-off.

    Returns:
        ``[{"lo", "hi", "words", "precision"}, ...]`` for non-empty bins.
    """
    out = []
    correct = (predictions.hit_rank >= 0) & (predictions.hit_rank < k)
    for lo, hi in itertools.pairwise(bins):
        mask = (predictions.ranks >= lo) & (predictions.ranks < hi)
        if mask.any():
            out.append(
                {"lo": lo, "hi": hi, "words": int(mask.sum()), "precision": float(correct[mask].mean())}
            )
    return out

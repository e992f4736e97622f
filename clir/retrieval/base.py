"""The retriever interface, its registry, and the batched sparse scoring both models share.

Every lexical model in clir scores a document ``D`` for a query ``q`` as

    score(q, D) = alpha_q - beta_q * prior(D) + sum_t coef(q, t) * w(t, D)

where the sum runs over the query terms present in ``D`` (``w(t, D) = 0`` for a term absent
from ``D``), ``prior`` is a per-document array (``None`` meaning zero) and ``alpha_q``,
``beta_q >= 0`` are per-query constants. BM25 has ``alpha = beta = 0``, ``coef = idf`` and
``w`` its saturated tf; Dirichlet query likelihood has ``beta_q = |q|``, ``prior = log(|D| + mu)``
and ``w = log(1 + tf / (mu P(t|C)))``. The sparse part of all queries is one product of a
query-term matrix with the term-major weight matrix. Ranking (:mod:`clir.retrieval.topk`) either
densifies blocks of queries and selects every row's top ``k`` at once (small collections, or
queries matching a large share of the documents), or, per query, compares only the matching
documents and the ``k`` best non-matching ones, which are ordered by ``prior`` alone. In
collections of ``MIN_DOCS`` documents or more, a query of plain terms that lists only its
matching documents (BM25) is instead scored alone by :mod:`clir.retrieval.accumulate` (a
compiled accumulation, the same values to the bit, and MaxScore bounds on what is ranked). Ties
are broken by docno descending, as trec_eval breaks them.

Which documents a query lists: a document *matches* a query when its sparse part is not 0 (it
holds a query term of non-zero weight). When every other document would score the same
constant (no ``prior``, as BM25; or ``beta_q = 0``), a query lists only its matching documents,
unless asked to ``pad`` its ranking to ``k`` with them (fixed-depth runs, where they would only
add arbitrary ties). When non-matching documents still score differently (Dirichlet query
likelihood ranks them by length), they are ranked like any other. A query with no term in the
index (empty after analysis, or only terms the collection never saw) lists nothing, with a
warning that counts such queries: it has no evidence to rank by.

A query term is a string, or a weighted set ``{doc_term: p}`` (probabilistic structured query,
PSQ; Darwish & Oard 2003): its tf in ``D`` is ``sum p * tf(t, D)``, its df ``sum p * df(t)`` and
its cf ``sum p * cf(t)``. ``{t: 1.0}`` is the plain term ``t``.
"""

from __future__ import annotations

import inspect
import math
import warnings
from abc import ABC, abstractmethod
from collections.abc import Callable, Mapping, Sequence
from numbers import Real
from pathlib import Path
from typing import Any, ClassVar, NamedTuple, TypeVar

import numpy as np
import scipy.sparse as sp

from clir._version import __version__
from clir.errors import ConfigError, FormatError, TermlessQueriesWarning
from clir.formats import atomic_directory
from clir.formats.manifest import manifest_of, verify_files
from clir.progress import progress_bar
from clir.retrieval.accumulate import MIN_DOCS, accumulate_topk, max_weights
from clir.retrieval.index import DocTerms, SparseIndex, load_array, read_json, write_json
from clir.retrieval.topk import dense_rows, dense_topk, prefer_dense, sparse_topk, unmatched_order
from clir.types import Run

QueryTerm = str | Mapping[str, float]
"""A query term: a plain term, or a PSQ weighted set ``{doc_term: p}``."""

QueryTerms = Sequence[QueryTerm]
"""A query as index terms (plain terms and/or PSQ sets)."""

RETRIEVERS: dict[str, type[Retriever]] = {}
"""Registry of retriever classes by config name (filled by :func:`register`)."""

R = TypeVar("R", bound="Retriever")

_CHUNK_WORK = 1 << 23
"""Postings entries gathered per batch of queries (bounds the memory of one sparse product)."""


def is_real(value: object) -> bool:
    """Whether ``value`` is a real number, numpy's included, and not a bool (which JSON's
    ``true`` and YAML's ``yes`` would give): the check of every numeric retriever setting."""
    return isinstance(value, Real) and not isinstance(value, bool)


class Results(NamedTuple):
    """Top-k results of a batch of queries (entry ``i`` answers query ``i``), best first.

    Attributes:
        docnos: Per query, an array of at most ``k`` docnos (fewer for a query that lists only
            its matching documents, see the module docstring; ``k`` is capped at the collection
            size).
        scores: Per query, the float64 scores of those documents.
    """

    docnos: list[np.ndarray]
    scores: list[np.ndarray]


def register(name: str) -> Callable[[type[R]], type[R]]:
    """Class decorator adding a retriever to :data:`RETRIEVERS` under ``name``."""

    def decorate(cls: type[R]) -> type[R]:
        cls.name = name
        RETRIEVERS[name] = cls
        return cls

    return decorate


def get_retriever(name: str, **params: Any) -> Retriever:
    """Construct a registered retriever by name.

    Args:
        name: A key of :data:`RETRIEVERS` (``"bm25"``, ``"ql"``).
        **params: Constructor arguments of that retriever.

    Raises:
        ConfigError: For an unknown name (the message lists the known ones) or a parameter that
            retriever does not take (the message lists those it takes).
    """
    cls = retriever_class(name)
    taken = inspect.signature(cls).parameters
    unknown = sorted(set(params) - set(taken))
    if unknown and not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in taken.values()):
        raise ConfigError(f"retriever {name!r} takes no parameter {unknown}; it takes {sorted(taken)}")
    return cls(**params)


def retriever_class(name: str) -> type[Retriever]:
    """The registered retriever class called ``name``.

    Raises:
        ConfigError: For an unknown name (the message lists the known ones).
    """
    try:
        return RETRIEVERS[name]
    except KeyError:
        raise ConfigError(f"unknown retriever {name!r}; expected one of {sorted(RETRIEVERS)}") from None


class Searcher(ABC):
    """``retrieve`` and ``search`` over a subclass's ``_retrieve`` (one index or its shards)."""

    @abstractmethod
    def _retrieve(
        self, queries: Sequence[QueryTerms], k: int, progress: bool, pad: bool
    ) -> tuple[Results, list[int]]:
        """The results and the positions of the queries with no known term."""

    def retrieve(
        self, queries: Sequence[QueryTerms], k: int = 1000, progress: bool = False, pad: bool = False
    ) -> Results:
        """The ``k`` best documents of each query, best first; ties broken by docno descending.

        Args:
            queries: Queries as term lists (plain and/or PSQ terms).
            k: Depth (capped at the collection size).
            progress: Show a progress bar over query batches.
            pad: Fill each ranking up to ``k`` with documents that match none of the query's
                terms even when they all score the same (BM25's 0); without it such a query
                lists only its matching documents (see the module docstring).

        Returns:
            :class:`Results`, at most ``min(k, n_docs)`` documents per query.

        Raises:
            ConfigError: For ``k < 1`` or a malformed query.

        Warns:
            UserWarning: Counting the queries with no term in the index (they list nothing) and
                naming a few by position.
        """
        results, termless = self._retrieve(queries, k, progress, pad)
        _warn_termless([f"#{i}" for i in termless])
        return results

    def search(
        self, queries: Mapping[str, QueryTerms], k: int = 1000, progress: bool = False, pad: bool = False
    ) -> Run:
        """Retrieve for named queries and return a run ``{qid: {docno: score}}``.

        Args:
            queries: ``{qid: query terms}``.
            k: Depth.
            progress: Show a progress bar.
            pad: As for :meth:`retrieve`.

        Returns:
            The run; a query with no term in the index maps to ``{}``.

        Warns:
            UserWarning: Counting the queries with no term in the index and naming a few qids.
        """
        qids = list(queries)
        results, termless = self._retrieve([queries[q] for q in qids], k, progress, pad)
        _warn_termless([repr(qids[i]) for i in termless])
        return {
            qid: dict(zip(row_docnos.tolist(), row_scores.tolist(), strict=True))
            for qid, row_docnos, row_scores in zip(qids, results.docnos, results.scores, strict=True)
        }


class Retriever(Searcher):
    """Base class of lexical retrievers over a :class:`SparseIndex` (bm25s-shaped interface).

    ``retriever.index(docnos, docs)`` (or ``.use_index(index)``) then ``.retrieve(queries, k)``,
    ``.search({qid: query}, k)``, ``.score(queries)``; ``.save(dir)`` and
    ``Retriever.load(dir, mmap=True)``.

    Attributes:
        index_: The index in use (``None`` before indexing).
    """

    name: ClassVar[str] = ""

    def __init__(self) -> None:
        self.index_: SparseIndex | None = None
        self._weights: sp.csr_matrix | None = None
        self._max_weight = np.zeros(0)
        self._prior_order: np.ndarray | None = None

    # --- what a model defines ---------------------------------------------------------------------

    @abstractmethod
    def get_params(self) -> dict[str, Any]:
        """The constructor arguments (JSON-serialisable)."""

    @abstractmethod
    def _prepare(self, index: SparseIndex) -> None:
        """Compute the collection-level statistics the model needs from ``index``."""

    @abstractmethod
    def _term_params(self, df: np.ndarray, cf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per query term with the given (PSQ-weighted) df and cf: ``(coef, alpha, beta)``."""

    @abstractmethod
    def _transform(
        self, tf: np.ndarray, doc_ids: np.ndarray, indptr: np.ndarray, df: np.ndarray, cf: np.ndarray
    ) -> np.ndarray:
        """The weights ``w`` of the entries of a term-major CSR matrix (row ``t`` = one term).

        Args:
            tf: float64 entry values (term frequencies); may be overwritten.
            doc_ids: The entries' document ids.
            indptr: Row pointers of the matrix.
            df: Per-row document frequency.
            cf: Per-row collection frequency.
        """

    def _prior(self) -> np.ndarray | None:
        """The per-document ``prior`` (``None``: zero for every document)."""
        return None

    # --- indexing ---------------------------------------------------------------------------------

    def index(self: R, docnos: Sequence[str], docs: Sequence[DocTerms], progress: bool = True) -> R:
        """Build an index of ``docs`` and use it.

        Args:
            docnos: Unique document ids.
            docs: Token lists or weighted bags ``{term: weight}`` (see :meth:`SparseIndex.build`).
            progress: Show a progress bar.

        Returns:
            ``self``.
        """
        return self.use_index(SparseIndex.build(docnos, docs, progress=progress))

    def use_index(self: R, index: SparseIndex, weights: np.ndarray | None = None) -> R:
        """Use an existing index, precomputing the model's weight of every posting.

        Args:
            index: The index.
            weights: Precomputed weights aligned with ``index.postings.data`` (as saved by
                :meth:`save`); computed when ``None``.

        Returns:
            ``self``.
        """
        self._prepare(index)
        postings = index.postings
        if weights is None:
            weights = self._transform(
                postings.data.astype(np.float64), postings.indices, postings.indptr, index.df, index.cf
            )
        elif weights.shape != postings.data.shape:
            raise ConfigError(f"weights has shape {weights.shape}, expected {postings.data.shape}")
        self._weights = sp.csr_matrix(
            (weights, postings.indices, postings.indptr), shape=postings.shape, copy=False
        )
        self._weights.has_sorted_indices = True
        self._max_weight = max_weights(self._weights)
        self.index_ = index
        prior = self._prior()
        self._prior_order = None if prior is None else unmatched_order(prior)
        return self

    def _require_index(self) -> SparseIndex:
        if self.index_ is None:
            raise ConfigError(
                f"{type(self).__name__} has no index: call .index(docnos, docs) or .use_index() first"
            )
        return self.index_

    # --- scoring ----------------------------------------------------------------------------------

    def score(self, queries: Sequence[QueryTerms]) -> np.ndarray:
        """Dense scores of every document for every query (for tests and small collections).

        Args:
            queries: Queries as term lists (plain and/or PSQ terms).

        Returns:
            ``(n_queries, n_docs)`` float64; column ``j`` is document ``index_.docnos[j]``.
        """
        index = self._require_index()
        plan = self._compile(queries)
        sparse = plan.product(0, len(queries))
        dense = sparse.toarray()
        prior = self._prior()
        if prior is not None:
            dense -= plan.beta[:, None] * prior[None, :]
        dense += plan.alpha[:, None]  # last, in the same order of operations as retrieve()
        assert dense.shape == (len(queries), index.n_docs)
        return dense

    def _retrieve(
        self,
        queries: Sequence[QueryTerms],
        k: int,
        progress: bool,
        pad: bool,
        floor: np.ndarray | None = None,
        keys: np.ndarray | None = None,
    ) -> tuple[Results, list[int]]:
        """:meth:`retrieve` without the warning: the results and the queries with no known term.

        ``keys`` (one per document, in index order) are listed in place of the docnos, e.g. each
        document's rank in the docno order of a collection of which this index is a shard.

        ``floor`` (one float64 per query, ``-inf`` for none) holds lower bounds of each query's
        k-th best score in a collection of which this index is one shard: a query that lists only
        its matching documents (and has ``alpha = 0``) lists only those scoring at least its
        floor, and its floor is raised to its k-th best score here when it has ``k`` of them
        (a lower bound for the whole collection too). Shards searched in turn thus skip the
        ranking of most of their matches (:class:`~clir.retrieval.shards.ShardedRetriever`).
        """
        index = self._require_index()
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:  # True had been k=1
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        kk = min(int(k), index.n_docs)
        plan = self._compile(queries)
        ids = np.zeros((len(queries), kk), dtype=np.int64)  # unfilled cells must index docnos too
        scores = np.empty((len(queries), kk), dtype=np.float64)
        counts = np.full(len(queries), kk, dtype=np.int64)
        prior = self._prior()
        alike = (plan.beta == 0) | (prior is None)  # the unmatched documents all score the same
        matched_only = ~plan.has_terms | (alike & (not pad))
        floored = matched_only & (plan.alpha == 0) if floor is not None else None
        # Queries of plain terms only are each scored alone (accumulate_topk) in large collections.
        plain = matched_only & (plan.alpha == 0) & ~plan.has_complex & (prior is None)
        plain &= index.n_docs >= MIN_DOCS
        for start, stop in progress_bar(plan.chunks(), desc="retrieving", unit="batch", enabled=progress):
            if plain[start:stop].all():
                assert self._weights is not None  # set with index_ by use_index()
                counts[start:stop] = accumulate_topk(
                    self._weights,
                    self._max_weight,
                    plan.eager[start:stop],
                    kk,
                    ids[start:stop],
                    scores[start:stop],
                    None if floor is None else floor[start:stop],
                )
                self._raise_floor(floor, floored, counts, scores, k, kk, start, stop)
                continue
            product = plan.product(start, stop)
            matches = np.diff(product.indptr)
            if prefer_dense(index.n_docs, float(matches.mean())):
                step = dense_rows(index.n_docs)
                for s in range(start, stop, step):
                    e = min(stop, s + step)
                    block = product[s - start : e - start]
                    row_matches = matches[s - start : e - start]
                    dense = block.toarray()
                    if prior is not None:
                        dense -= plan.beta[s:e, None] * prior[None, :]
                    hidden = matched_only[s:e]
                    if hidden.any():  # unmatched cells rank last, as -inf, and are cut off below
                        stored = np.zeros(dense.shape, dtype=bool)
                        stored[np.repeat(np.arange(e - s), row_matches), block.indices] = True
                        stored[~hidden] = True
                        dense[~stored] = -np.inf
                        counts[s:e] = np.where(hidden, np.minimum(kk, row_matches), kk)
                    ids[s:e], scores[s:e] = dense_topk(dense, kk)
            else:
                counts[start:stop] = sparse_topk(
                    product,
                    plan.beta[start:stop],
                    prior,
                    self._prior_order,
                    kk,
                    ids[start:stop],
                    scores[start:stop],
                    matched_only[start:stop],
                    None if floor is None else np.where(floored[start:stop], floor[start:stop], -np.inf),
                )
            self._raise_floor(floor, floored, counts, scores, k, kk, start, stop)
        scores += plan.alpha[:, None]
        docnos = (index.docnos if keys is None else keys)[ids]
        results = Results(
            [row[:n] for row, n in zip(docnos, counts.tolist(), strict=True)],
            [row[:n] for row, n in zip(scores, counts.tolist(), strict=True)],
        )
        return results, np.flatnonzero(~plan.has_terms).tolist()

    @staticmethod
    def _raise_floor(
        floor: np.ndarray | None,
        floored: np.ndarray | None,
        counts: np.ndarray,
        scores: np.ndarray,
        k: int,
        kk: int,
        start: int,
        stop: int,
    ) -> None:
        """Raise the floors of queries ``start:stop`` to their k-th best score where they have ``k``."""
        if floor is None or floored is None or kk != k:
            return
        full = np.flatnonzero(floored[start:stop] & (counts[start:stop] == k)) + start
        floor[full] = np.maximum(floor[full], scores[full, k - 1])

    def _compile(self, queries: Sequence[QueryTerms]) -> _Plan:
        """Turn queries into the sparse query-term matrices of one batched product."""
        index = self._require_index()
        if isinstance(queries, (str, Mapping)):
            raise ConfigError("queries must be a list of queries (each a list of terms)")
        keys: dict[Any, int] = {}
        pair_q: list[int] = []
        pair_v: list[int] = []
        pair_m: list[int] = []
        for qi, query in enumerate(queries):
            if isinstance(query, (str, Mapping)):
                raise ConfigError(
                    f"query {qi} is a {type(query).__name__}; expected a list of terms (str or {{term: p}})"
                )
            counts: dict[int, int] = {}
            for term in query:
                key = _term_key(term, qi)
                vt = keys.get(key)
                if vt is None:
                    vt = keys[key] = len(keys)
                counts[vt] = counts.get(vt, 0) + 1
            pair_q.extend([qi] * len(counts))
            pair_v.extend(counts)
            pair_m.extend(counts.values())
        n_v = len(keys)
        eager_tid = np.full(n_v, -1, dtype=np.int64)
        df = np.zeros(n_v)
        cf = np.zeros(n_v)
        complex_rows: list[tuple[int, list[int], list[float]]] = []
        for key, vt in keys.items():
            if isinstance(key, str):
                tid = index.term_ids.get(key, -1)
                if tid >= 0:
                    eager_tid[vt] = tid
                    df[vt] = index.df[tid]
                    cf[vt] = index.cf[tid]
        # PSQ terms in sorted order, not the batch's: a query's sum then runs in the same order
        # whatever other queries share its batch, so its scores do not depend on the batching
        for key in sorted(key for key in keys if not isinstance(key, str)):
            vt = keys[key]
            tids, ps = [], []
            for term, p in key:
                tid = index.term_ids.get(term, -1)
                if tid >= 0 and p > 0:
                    tids.append(tid)
                    ps.append(p)
            if tids:
                complex_rows.append((vt, tids, ps))
                df[vt] = float(np.dot(ps, index.df[tids]))
                cf[vt] = float(np.dot(ps, index.cf[tids]))
        coef, alpha, beta = self._term_params(df, cf)
        q = np.asarray(pair_q, dtype=np.int64)
        v = np.asarray(pair_v, dtype=np.int64)
        m = np.asarray(pair_m, dtype=np.float64)
        n_q = len(queries)
        plan = _Plan(
            n_q=n_q,
            alpha=np.bincount(q, weights=m * alpha[v], minlength=n_q),
            beta=np.bincount(q, weights=m * beta[v], minlength=n_q),
        )
        eager = eager_tid[v] >= 0
        plan.eager = _csr(m[eager] * coef[v[eager]], q[eager], eager_tid[v[eager]], (n_q, index.n_terms))
        plan.weights = self._weights
        # the index's own postings (a shard's, not the collection's df): the product's size
        postings = np.diff(index.postings.indptr)[eager_tid[v[eager]]]
        cost = np.bincount(q[eager], weights=postings, minlength=n_q).astype(np.float64)
        if complex_rows:
            slot = np.full(n_v, -1, dtype=np.int64)
            rows, cols, vals = [], [], []
            for c, (vt, tids, ps) in enumerate(complex_rows):
                slot[vt] = c
                rows.extend([c] * len(tids))
                cols.extend(tids)
                vals.extend(ps)
            n_c = len(complex_rows)
            mix = _csr(np.asarray(vals), np.asarray(rows), np.asarray(cols), (n_c, index.n_terms))
            pseudo = (mix @ index.postings).tocsr()
            c_vt = np.fromiter((vt for vt, _, _ in complex_rows), dtype=np.int64, count=n_c)
            pseudo.data = self._transform(pseudo.data, pseudo.indices, pseudo.indptr, df[c_vt], cf[c_vt])
            is_c = slot[v] >= 0
            plan.complex = _csr(m[is_c] * coef[v[is_c]], q[is_c], slot[v[is_c]], (n_q, n_c))
            plan.pseudo = pseudo
            cost += np.bincount(q[is_c], weights=np.diff(pseudo.indptr)[slot[v[is_c]]] + 1, minlength=n_q)
        plan.cost = cost
        plan.has_terms = np.zeros(n_q, dtype=bool)
        plan.has_terms[q[eager]] = True
        plan.has_complex = np.zeros(n_q, dtype=bool)
        if complex_rows:
            plan.has_terms[q[is_c]] = True
            plan.has_complex[q[is_c]] = True
        return plan

    # --- persistence ------------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Save the retriever (parameters, index and precomputed weights) to a directory, atomically.

        Args:
            path: Directory to create or replace.

        Returns:
            The directory.
        """
        index = self._require_index()
        assert self._weights is not None
        path = Path(path)
        with atomic_directory(path, kind="retriever") as tmp:
            (tmp / "index").mkdir()
            index.write(tmp / "index")
            np.save(tmp / "weights.npy", np.ascontiguousarray(self._weights.data), allow_pickle=False)
            meta = {
                "type": self.name,
                "clir_version": __version__,
                "params": self.get_params(),
                "files": manifest_of(tmp, ["weights.npy"]),  # the index records its own
            }
            write_json(tmp / "retriever.json", meta)
        return path

    @classmethod
    def load(cls: type[R], path: str | Path, mmap: bool = True, *, verify: bool = False) -> R:
        """Load a retriever saved by :meth:`save` (``Retriever.load`` picks the saved type),
        its files verified against their manifests (see :meth:`SparseIndex.load`).

        Args:
            path: The directory.
            mmap: Memory-map the arrays.
            verify: Hash every file (by default the smallest 64 MiB of each manifest).

        Returns:
            The retriever, ready to search.

        Raises:
            DataNotFoundError: If a file is missing.
            FormatError: If the saved type is unknown or not a ``cls``, or a file is damaged.
        """
        path = Path(path)
        meta = read_json(path / "retriever.json")
        kind = meta.get("type") if isinstance(meta, dict) else None
        if kind not in RETRIEVERS:
            raise FormatError(
                path / "retriever.json",
                None,
                f"unknown retriever type {kind!r}; expected one of {sorted(RETRIEVERS)}",
            )
        klass = RETRIEVERS[kind]
        if not issubclass(klass, cls):
            raise FormatError(
                path / "retriever.json", None, f"holds a {klass.__name__}, not a {cls.__name__}"
            )
        try:
            retriever = klass(**meta.get("params", {}))
        except (ConfigError, TypeError) as exc:  # a description edited or damaged by hand
            raise FormatError(path / "retriever.json", None, f"params: {exc}") from None
        verify_files(path, meta, path / "retriever.json", verify, required=["weights.npy"])
        index = SparseIndex.load(path / "index", mmap=mmap, verify=verify)
        weights = load_array(path / "weights.npy", mmap, "f")
        if weights.shape != index.postings.data.shape:
            raise FormatError(
                path / "weights.npy", None, f"holds {len(weights)} weights for {index.postings.nnz} postings"
            )
        return retriever.use_index(index, weights=weights)  # type: ignore[return-value]

    def __repr__(self) -> str:
        params = ", ".join(f"{k}={v!r}" for k, v in self.get_params().items())
        return f"{type(self).__name__}({params})"


class _Plan:
    """Sparse query-term matrices of a batch of queries and their per-query constants."""

    def __init__(self, n_q: int, alpha: np.ndarray, beta: np.ndarray) -> None:
        self.n_q = n_q
        self.alpha = alpha
        self.beta = beta
        self.eager: sp.csr_matrix
        self.weights: sp.csr_matrix | None = None
        self.complex: sp.csr_matrix | None = None
        self.pseudo: sp.csr_matrix | None = None
        self.cost = np.zeros(n_q)
        self.has_terms = np.zeros(n_q, dtype=bool)  # queries with at least one term in the index
        self.has_complex = np.zeros(n_q, dtype=bool)  # queries with a PSQ term in the index

    def product(self, start: int, stop: int) -> sp.csr_matrix:
        """The sparse part of the scores of queries ``start:stop`` (``(stop-start) x n_docs``)."""
        eager = self.eager[start:stop] if (start, stop) != (0, self.n_q) else self.eager
        result = eager @ self.weights
        if self.complex is not None:
            part = self.complex[start:stop] if (start, stop) != (0, self.n_q) else self.complex
            result = result + part @ self.pseudo
        return result.tocsr()

    def chunks(self) -> list[tuple[int, int]]:
        """Consecutive query ranges whose gathered postings stay under the work budget."""
        out, start, work = [], 0, 0.0
        for i, c in enumerate(self.cost.tolist()):
            if i > start and work + c > _CHUNK_WORK:
                out.append((start, i))
                start, work = i, 0.0
            work += c
        if start < self.n_q:
            out.append((start, self.n_q))
        return out


def _warn_termless(names: list[str]) -> None:
    """Warn once, counting the queries (named by ``names``) that have no term in the index."""
    if names:
        warnings.warn(TermlessQueriesWarning(names), stacklevel=3)


def _term_key(term: QueryTerm, qi: int) -> Any:
    """A hashable key of a query term; ``{t: 1.0}`` is keyed as the plain term ``t``."""
    if isinstance(term, str):
        return term
    if isinstance(term, Mapping):
        items = []
        for t, p in term.items():
            w = float(p)
            if not isinstance(t, str) or not (math.isfinite(w) and w >= 0):
                raise ConfigError(
                    f"query {qi}: PSQ term {dict(term)!r} needs str keys and finite weights >= 0"
                )
            items.append((t, w))
        if len(items) == 1 and items[0][1] == 1.0:
            return items[0][0]
        return tuple(sorted(items))
    raise ConfigError(f"query {qi}: term {term!r} is a {type(term).__name__}; expected str or {{term: p}}")


def _csr(data: np.ndarray, rows: np.ndarray, cols: np.ndarray, shape: tuple[int, int]) -> sp.csr_matrix:
    """A CSR matrix with int32 indices (matching the index's, so products do not copy it)."""
    matrix = sp.csr_matrix((np.asarray(data, dtype=np.float64), (rows, cols)), shape=shape)
    matrix.sum_duplicates()
    if matrix.nnz < np.iinfo(np.int32).max:
        matrix.indices = matrix.indices.astype(np.int32, copy=False)
        matrix.indptr = matrix.indptr.astype(np.int32, copy=False)
    return matrix

"""An inverted index held as scipy sparse arrays: postings, document lengths, df, cf, vocabulary.

The postings are a term-major CSR matrix (``n_terms x n_docs``): row ``t`` lists the documents
containing term ``t`` and their term frequencies, so gathering the postings of a batch of query
terms is one sparse product. Documents are stored in docno order (internal id ``i`` is the
``i``-th docno in sorted order), which makes "ties broken by docno" the same as "ties broken by
internal id".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import scipy.sparse as sp

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_directory
from clir.formats.manifest import manifest_of, verify_files
from clir.progress import progress_bar

DocTerms = Sequence[str] | Mapping[str, float]
"""A document as index terms: a token list, or a weighted bag ``{term: weight}``."""

_ARRAYS = ("docnos", "indptr", "doc_ids", "tf", "doc_len", "df", "cf")
_FILES = (*(f"{name}.npy" for name in _ARRAYS), "vocab.json")
"""The files a saved index's manifest lists (and its reader needs)."""
_KINDS = {"docnos": "U", "indptr": "iu", "doc_ids": "iu", "tf": "f", "doc_len": "f", "df": "f", "cf": "f"}
"""The numpy dtype kinds each saved array may have."""


class SparseIndex:
    """Term-frequency postings and collection statistics of a document collection.

    Build one with :meth:`build` (token lists or weighted bags), :meth:`from_token_ids` (integer
    arrays, e.g. already-mapped corpora) or load a saved one with :meth:`load`.

    Attributes:
        docnos: ``(n_docs,)`` unicode array of document ids, sorted ascending.
        vocab: Term strings; term id ``t`` is ``vocab[t]``.
        postings: ``n_terms x n_docs`` CSR matrix of term frequencies (float32; may be fractional
            for weighted-bag documents).
        doc_len: ``(n_docs,)`` document lengths (tokens, or sum of weights), float64.
        df: ``(n_terms,)`` document frequencies (number of documents containing the term).
        cf: ``(n_terms,)`` collection frequencies (sum of the term's tf), float64.
        stats: Size statistics of the whole collection (:class:`CollectionStats`): this index's own,
            unless it is one shard of a larger collection (:mod:`clir.retrieval.shards`), whose
            ``df``, ``cf`` and vocabulary are then the collection's too.
    """

    def __init__(
        self,
        docnos: np.ndarray,
        vocab: Sequence[str],
        postings: sp.csr_matrix,
        doc_len: np.ndarray,
        df: np.ndarray,
        cf: np.ndarray,
        *,
        stats: CollectionStats | None = None,
        term_ids: dict[str, int] | None = None,
    ) -> None:
        self.docnos = docnos
        self.vocab = vocab if isinstance(vocab, list) else list(vocab)
        self.postings = postings
        self.doc_len = doc_len
        self.df = df
        self.cf = cf
        self.term_ids: dict[str, int] = (
            term_ids if term_ids is not None else {term: i for i, term in enumerate(self.vocab)}
        )
        if len(self.term_ids) != len(self.vocab):
            raise ConfigError("vocab has duplicate terms")
        if stats is None:
            total = float(np.asarray(doc_len).sum())
            stats = CollectionStats(
                len(docnos), total, float(np.asarray(doc_len).mean()) if len(docnos) else 0.0
            )
        self.stats = stats
        if postings.shape != (len(self.vocab), len(docnos)):
            raise ConfigError(
                f"postings has shape {postings.shape}, expected (n_terms, n_docs) = "
                f"{(len(self.vocab), len(docnos))}"
            )
        self._docno_ids: dict[str, int] | None = None

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def build(cls, docnos: Sequence[str], docs: Sequence[DocTerms], progress: bool = True) -> SparseIndex:
        """Index documents given as token lists or weighted bags.

        Args:
            docnos: Unique document ids, one per document.
            docs: Each document as a list of terms (tf = count) or a ``{term: weight}`` bag (tf =
                weight, e.g. expected counts of a translated document); weights must be finite,
                non-negative and at most float32's largest (tfs are float32), zero weights (and
                those float32 rounds to zero) are dropped. Kinds may be mixed.
            progress: Show a progress bar.

        Returns:
            The index.

        Raises:
            ConfigError: On mismatched lengths, duplicate or empty docnos, an empty collection or
                a bad weight.
        """
        check_docnos(docnos, len(docs))
        vocab: dict[str, int] = {}
        ids, weights, counts, doc_len = analyzed_postings(docnos, docs, vocab, progress)
        return cls._from_arrays(docnos, list(vocab), ids, weights, counts, doc_len)

    @classmethod
    def from_token_ids(
        cls,
        docnos: Sequence[str],
        token_ids: Sequence[np.ndarray],
        vocab: Sequence[str],
        progress: bool = True,
    ) -> SparseIndex:
        """Index documents already mapped to integer term ids (e.g. a large pre-tokenised corpus).

        Args:
            docnos: Unique document ids, one per document.
            token_ids: One integer array of term ids per document (``0 <= id < len(vocab)``).
            vocab: The term string of each id.
            progress: Unused (the build is vectorised); kept for a uniform signature.

        Returns:
            The index (terms that occur in no document keep their ids, with df = cf = 0).

        Raises:
            ConfigError: On mismatched lengths, duplicate docnos or an id out of range.
        """
        del progress
        check_docnos(docnos, len(token_ids))
        counts = np.fromiter((len(d) for d in token_ids), dtype=np.int64, count=len(token_ids))
        flat = np.concatenate([np.asarray(d) for d in token_ids]) if len(token_ids) else np.zeros(0)
        if flat.size and not np.issubdtype(flat.dtype, np.integer):
            raise ConfigError(f"token_ids must be integer arrays, got dtype {flat.dtype}")
        if flat.size and (flat.min() < 0 or flat.max() >= len(vocab)):
            raise ConfigError(
                f"token_ids must lie in [0, len(vocab)={len(vocab)}), got [{flat.min()}, {flat.max()}]"
            )
        weights = np.ones(flat.size, dtype=np.float32)
        return cls._from_arrays(docnos, list(vocab), flat, weights, counts, counts.astype(np.float64))

    @classmethod
    def _from_arrays(
        cls,
        docnos: Sequence[str],
        vocab: list[str],
        ids: np.ndarray,
        weights: np.ndarray,
        counts: np.ndarray,
        doc_len: np.ndarray,
    ) -> SparseIndex:
        n_docs, n_terms = len(docnos), len(vocab)
        docno_arr = np.asarray([str(d) for d in docnos])
        order = np.argsort(docno_arr, kind="stable")
        small = max(n_docs, n_terms) < np.iinfo(np.int32).max
        index_dtype = np.int32 if small else np.int64
        new_id = np.empty(n_docs, dtype=index_dtype)
        new_id[order] = np.arange(n_docs, dtype=index_dtype)
        rows = np.repeat(new_id, counts)
        ids = ids.astype(index_dtype, copy=False)
        coo = sp.coo_matrix((weights, (ids, rows)), shape=(n_terms, n_docs))
        postings = _canonical_csr(coo.tocsr())
        df = np.diff(postings.indptr).astype(np.float64)
        term_of_nnz = np.repeat(np.arange(n_terms), np.diff(postings.indptr))
        cf = np.bincount(term_of_nnz, weights=postings.data.astype(np.float64), minlength=n_terms)
        cf = cf.astype(np.float64, copy=False)  # bincount of no posting gives int64, even with weights
        return cls(docno_arr[order], vocab, postings, np.ascontiguousarray(doc_len[order]), df, cf)

    # --- statistics -----------------------------------------------------------------------------

    @property
    def n_docs(self) -> int:
        """Number of documents."""
        return len(self.docnos)

    @property
    def n_terms(self) -> int:
        """Vocabulary size."""
        return len(self.vocab)

    def term_id(self, term: str) -> int:
        """The id of ``term``, or -1 when it is not in the vocabulary."""
        return self.term_ids.get(term, -1)

    def doc_id(self, docno: str) -> int:
        """The internal id (position in :attr:`docnos`) of ``docno``.

        Raises:
            ConfigError: If the docno is not in the index.
        """
        if self._docno_ids is None:
            self._docno_ids = {str(d): i for i, d in enumerate(self.docnos)}
        try:
            return self._docno_ids[docno]
        except KeyError:
            raise ConfigError(f"docno {docno!r} is not in the index") from None

    def __len__(self) -> int:
        return self.n_docs

    def __repr__(self) -> str:
        return f"SparseIndex(n_docs={self.n_docs}, n_terms={self.n_terms}, nnz={self.postings.nnz})"

    # --- persistence ----------------------------------------------------------------------------

    def save(self, path: str | Path) -> Path:
        """Save to a directory (``index.json``, ``vocab.json`` and ``.npy`` arrays), atomically.

        Args:
            path: Directory to create or replace.

        Returns:
            The directory.
        """
        path = Path(path)
        with atomic_directory(path, kind="index") as tmp:
            self.write(tmp)
        return path

    def write(self, directory: Path) -> None:
        """Write the index files into an existing directory (non-atomic; see :meth:`save`)."""
        self.write_arrays(directory, _ARRAYS)
        _write_json(directory / "vocab.json", self.vocab)
        meta = {
            "type": "SparseIndex",
            "clir_version": __version__,
            "n_docs": self.n_docs,
            "n_terms": self.n_terms,
            "nnz": int(self.postings.nnz),
            "files": manifest_of(directory, _FILES),
        }
        _write_json(directory / "index.json", meta)

    def write_arrays(self, directory: Path, names: Sequence[str]) -> None:
        """Write the named arrays (of ``docnos``, ``indptr``, ``doc_ids``, ``tf``, ``doc_len``,
        ``df``, ``cf``) as ``<name>.npy`` files into an existing directory."""
        arrays = {
            "docnos": self.docnos,
            "indptr": self.postings.indptr,
            "doc_ids": self.postings.indices,
            "tf": self.postings.data,
            "doc_len": self.doc_len,
            "df": self.df,
            "cf": self.cf,
        }
        for name in names:
            np.save(directory / f"{name}.npy", np.ascontiguousarray(arrays[name]), allow_pickle=False)

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True, *, verify: bool = False) -> SparseIndex:
        """Load an index saved by :meth:`save`, verified against the manifest in ``index.json``.

        Every file's size is compared with the manifest, and the SHA-256 of the smallest files
        up to :data:`~clir.formats.manifest.HASH_BUDGET` bytes (all of them with ``verify``), so
        the memory maps of a large index stay lazy; cheap invariants of the arrays (lengths,
        dtypes, ``indptr`` rising from 0 to nnz, each posting list's first and last document id
        in range, docnos sorted, df equal to the posting counts) are checked too. An index
        saved before clir recorded manifests loads with a warning.

        Args:
            path: The directory.
            mmap: Memory-map the arrays (read-only) instead of reading them into memory.
            verify: Hash every file.

        Returns:
            The index.

        Raises:
            DataNotFoundError: If the directory or one of its files is missing.
            FormatError: Naming the file, if ``index.json`` is not a SparseIndex description or
                a file is damaged (not its recorded size or hash, unreadable, or inconsistent).
        """
        path = Path(path)
        record = path / "index.json"
        meta = read_meta(record, "SparseIndex")
        verify_files(path, meta, record, verify, required=_FILES)
        arrays = {name: load_array(path / f"{name}.npy", mmap, _KINDS[name]) for name in _ARRAYS}
        vocab, term_ids = read_vocab(path / "vocab.json")
        for key, value in (
            ("n_docs", len(arrays["docnos"])),
            ("n_terms", len(vocab)),
            ("nnz", len(arrays["tf"])),
        ):
            if key in meta and meta[key] != value:
                raise FormatError(record, None, f"{key} is {meta[key]!r}, but the arrays hold {value}")
        for name in ("df", "cf"):
            if len(arrays[name]) != len(vocab):
                raise FormatError(
                    path / f"{name}.npy", None, f"holds {len(arrays[name])} values for {len(vocab)} terms"
                )
        if len(arrays["indptr"]) != len(vocab) + 1:
            raise FormatError(
                path / "indptr.npy", None, f"holds {len(arrays['indptr'])} offsets for {len(vocab)} terms"
            )
        postings = check_postings(path, arrays, len(vocab))
        if not np.array_equal(np.diff(postings.indptr), arrays["df"]):
            raise FormatError(path / "df.npy", None, "differs from the number of postings of each term")
        return cls(
            arrays["docnos"],
            vocab,
            postings,
            arrays["doc_len"],
            arrays["df"],
            arrays["cf"],
            term_ids=term_ids,
        )


class CollectionStats(NamedTuple):
    """The size of a collection, which BM25 and query likelihood read (N, |C|, avgdl).

    Attributes:
        n_docs: Number of documents N.
        total_len: Collection length |C| (sum of document lengths).
        avg_doc_len: Mean document length (the mean of the docno-ordered lengths, as numpy
            computes it, so a sharded index reproduces a single index's value to the bit).
    """

    n_docs: int
    total_len: float
    avg_doc_len: float


_FLOAT32_MAX = float(np.finfo(np.float32).max)
"""The largest weight a posting holds (tfs are float32: a larger one became inf, and NaN scores)."""
_FLOAT32_ZERO = 2.0**-150
"""Weights up to this round to 0 as float32: they are dropped, as weights of 0 are (they had been
stored as postings of tf 0, counted in the term's df)."""


def analyzed_postings(
    docnos: Sequence[str], docs: Iterable[DocTerms], vocab: dict[str, int], progress: bool = False
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """The postings of ``docs`` as flat arrays, adding new terms to ``vocab`` (first seen, next id).

    Args:
        docnos: The documents' ids (for error messages).
        docs: Token lists or weighted bags (see :meth:`SparseIndex.build`).
        vocab: Term -> id, extended in place.
        progress: Show a progress bar.

    Returns:
        ``(term_ids, weights, counts, doc_len)``: each document's postings in order (int64 ids,
        float32 weights), the number of postings and the length of each document.

    Raises:
        ConfigError: On a str document or a bad weight.
    """
    ids: list[int] = []
    weights: list[float] = []
    counts = np.zeros(len(docnos), dtype=np.int64)
    doc_len = np.zeros(len(docnos), dtype=np.float64)
    for i, doc in enumerate(
        progress_bar(docs, desc="indexing", unit="doc", enabled=progress, total=len(docnos))
    ):
        if isinstance(doc, Mapping):
            n = 0
            for term, weight in doc.items():
                w = float(weight)
                if not (math.isfinite(w) and 0 <= w <= _FLOAT32_MAX):
                    raise ConfigError(
                        f"document {docnos[i]!r}: weight of term {term!r} must be finite and >= 0 "
                        f"(at most {_FLOAT32_MAX:.7g}, the largest float32 tf), got {weight!r}"
                    )
                if w > _FLOAT32_ZERO:  # a weight that float32 rounds to 0 is no posting
                    ids.append(vocab.setdefault(term, len(vocab)))
                    weights.append(w)
                    doc_len[i] += w
                    n += 1
            counts[i] = n
        elif isinstance(doc, str):
            raise ConfigError(
                f"document {docnos[i]!r} is a str; expected a list of terms or a {{term: weight}} "
                "dict (analyze the text first)"
            )
        else:
            ids.extend([vocab.setdefault(term, len(vocab)) for term in doc])
            weights.extend(repeat(1.0, len(doc)))
            counts[i] = len(doc)
            doc_len[i] = len(doc)
    return np.asarray(ids, dtype=np.int64), np.asarray(weights, dtype=np.float32), counts, doc_len


def check_docnos(docnos: Sequence[str], n_docs: int) -> None:
    """Refuse docnos an index cannot keep apart (one a document, none empty, none twice, no NUL),
    before anything is built; shared by the sparse, sharded and dense indexes.

    Raises:
        ConfigError: Naming the docno.
    """
    if len(docnos) != n_docs:
        raise ConfigError(f"got {len(docnos)} docnos for {n_docs} documents")
    if n_docs == 0:
        raise ConfigError("cannot index an empty collection (no documents given)")
    seen: set[str] = set()
    for docno in docnos:
        if not isinstance(docno, str) or not docno:
            raise ConfigError(f"docnos must be non-empty strings, got {docno!r}")
        if "\0" in docno:  # numpy's strings drop a trailing NUL: 'd1\0' had been indexed as 'd1'
            raise ConfigError(
                f"docno {docno!r} holds a NUL character (the index would rename it, and it could "
                "then share its name with another document)"
            )
        if docno in seen:
            raise ConfigError(f"duplicate docno {docno!r}")
        seen.add(docno)


def _canonical_csr(matrix: sp.csr_matrix) -> sp.csr_matrix:
    """Sorted, duplicate-free CSR with int32 indices where they fit (what scipy's products keep)."""
    matrix.sum_duplicates()
    matrix.sort_indices()
    if matrix.nnz < np.iinfo(np.int32).max and max(matrix.shape) < np.iinfo(np.int32).max:
        index_dtype: type = np.int32
    else:
        index_dtype = np.int64
    matrix.indices = matrix.indices.astype(index_dtype, copy=False)
    matrix.indptr = matrix.indptr.astype(index_dtype, copy=False)
    matrix.data = matrix.data.astype(np.float32, copy=False)
    return matrix


def load_array(path: Path, mmap: bool, kinds: str) -> np.ndarray:
    """A saved one-dimensional array of one of the dtype ``kinds`` (``"iu"``, ``"f"``, ``"U"``),
    memory-mapped or read, naming the file when it is missing or unreadable."""
    if not path.is_file():
        raise DataNotFoundError(f"index file {path} is missing (was the directory written by save()?)")
    try:
        array = np.load(path, mmap_mode="r" if mmap else None, allow_pickle=False)
    except (OSError, ValueError, EOFError) as error:  # truncated, not .npy, or of objects
        raise FormatError(path, None, f"not a readable .npy array ({error})") from None
    if array.ndim != 1 or array.dtype.kind not in kinds:
        raise FormatError(
            path, None, f"holds a {array.dtype} array of shape {array.shape}, expected a 1-d one"
        )
    return array


def check_postings(directory: Path, arrays: Mapping[str, np.ndarray], n_terms: int) -> sp.csr_matrix:
    """The postings matrix of saved arrays (``docnos``, ``indptr``, ``doc_ids``, ``tf``,
    ``doc_len``; an ``indptr`` shorter than ``n_terms + 1`` is a shard's, padded with empty rows),
    after checks that cost O(terms + documents), not O(postings), naming the file that fails."""
    docnos, indptr, doc_ids, tf = arrays["docnos"], arrays["indptr"], arrays["doc_ids"], arrays["tf"]
    n_docs = len(docnos)
    if len(arrays["doc_len"]) != n_docs:
        raise FormatError(
            directory / "doc_len.npy", None, f"holds {len(arrays['doc_len'])} lengths for {n_docs} documents"
        )
    if not np.isfinite(arrays["doc_len"]).all() or (np.asarray(arrays["doc_len"]) < 0).any():
        raise FormatError(directory / "doc_len.npy", None, "holds a negative or non-finite document length")
    if n_docs > 1 and not (docnos[:-1] < docnos[1:]).all():
        raise FormatError(directory / "docnos.npy", None, "docnos are not unique and sorted")
    if len(tf) != len(doc_ids):
        raise FormatError(directory / "tf.npy", None, f"holds {len(tf)} values for {len(doc_ids)} postings")
    steps = np.diff(indptr)
    if (
        not 1 <= len(indptr) <= n_terms + 1
        or indptr[0] != 0
        or indptr[-1] != len(doc_ids)
        or (steps < 0).any()
    ):
        raise FormatError(
            directory / "indptr.npy",
            None,
            f"is not {n_terms + 1} offsets rising from 0 to the {len(doc_ids)} postings",
        )
    rows = np.flatnonzero(steps)  # each posting list is sorted: its ends bound its document ids
    first, last = doc_ids[indptr[rows]], doc_ids[indptr[rows + 1] - 1]
    if len(rows) and (min(first.min(), last.min()) < 0 or max(first.max(), last.max()) >= n_docs):
        raise FormatError(directory / "doc_ids.npy", None, f"holds a document id outside [0, {n_docs})")
    if (first > last).any():
        raise FormatError(directory / "doc_ids.npy", None, "holds a posting list out of order")
    if len(indptr) < n_terms + 1:  # terms first seen after this shard: empty rows
        indptr = np.concatenate([indptr, np.full(n_terms + 1 - len(indptr), indptr[-1], indptr.dtype)])
    postings = sp.csr_matrix((tf, doc_ids, indptr), shape=(n_terms, n_docs), copy=False)
    postings.has_sorted_indices = True
    return postings


def read_meta(path: Path, kind: str, required: Sequence[str] = ()) -> dict[str, Any]:
    """The JSON object of a saved artefact's description, whose ``type`` must be ``kind`` and
    which must hold the keys ``required``."""
    meta = read_json(path)
    if not isinstance(meta, dict) or meta.get("type") != kind:
        found = meta.get("type") if isinstance(meta, dict) else type(meta).__name__
        raise FormatError(path, None, f"type is {found!r}, expected {kind!r}")
    missing = [key for key in required if key not in meta]
    if missing:
        raise FormatError(path, None, f"lacks the key(s) {missing} of a saved {kind}")
    return meta


def read_vocab(path: Path) -> tuple[list[str], dict[str, int]]:
    """A saved vocabulary (a JSON list of distinct strings) and its term ids."""
    vocab = read_json(path)
    if not isinstance(vocab, list) or not all(isinstance(term, str) for term in vocab):
        raise FormatError(path, None, "is not a JSON list of terms")
    term_ids = {term: i for i, term in enumerate(vocab)}
    if len(term_ids) != len(vocab):
        raise FormatError(path, None, "holds a term twice")
    return vocab, term_ids


def _write_json(path: Path, value: Any) -> None:
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(value, handle, ensure_ascii=False)


def read_json(path: Path) -> Any:
    """Read a JSON file of a saved artefact, naming the file when it is missing or malformed."""
    if not path.is_file():
        raise DataNotFoundError(f"{path} is missing (was the directory written by save()?)")
    try:
        with open(path, encoding="utf-8") as handle:
            return json.load(handle)
    except json.JSONDecodeError as exc:
        raise FormatError(path, exc.lineno, f"invalid JSON: {exc.msg}") from None
    except UnicodeDecodeError as exc:
        raise FormatError(path, None, f"not UTF-8 text (byte {exc.start})") from None


def write_json(path: Path, value: Any) -> None:
    """Write a JSON file into a directory being saved."""
    _write_json(path, value)

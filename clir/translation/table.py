"""Translation tables: sparse p(target word | source word) over analyzed vocabularies."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_directory
from clir.formats.manifest import manifest_of, verify_files

_ARRAYS = ("data", "indices", "indptr")
_FILES = (*(f"{a}.npy" for a in _ARRAYS), "source_vocab.json", "target_vocab.json")
"""The files of a saved table that its ``meta.json`` describes (and lists in its manifest)."""


def check_tokens(tokens: object, name: str = "tokens") -> None:
    """Refuse a string where a list of analyzed tokens is wanted: each of its characters would
    be translated as a token, without a word.

    Raises:
        ConfigError: Naming the argument.
    """
    if isinstance(tokens, str):
        raise ConfigError(
            f"{name} must be a list of analyzed tokens, got the string {tokens!r:.60} "
            "(analyze it first: get_analyzer(lang).analyze(text))"
        )


class TranslationTable:
    """A sparse table of translation probabilities p(target | source).

    Rows are source words, columns target words; each row of a learned or lexicon table sums
    to 1 (a pruned table is renormalised). Vocabularies are *analyzed* tokens (the output of
    ``clir.text`` analyzers), so they match the index vocabularies of ``clir.retrieval``.

    Args:
        source_vocab: Source words, one per row.
        target_vocab: Target words, one per column.
        probs: ``len(source_vocab) x len(target_vocab)`` sparse matrix of probabilities.
        source_lang: Language code of the source words (e.g. ``"en"``).
        target_lang: Language code of the target words (e.g. ``"sw"``).
        meta: Free-form JSON-serialisable metadata (how the table was made, analyzer configs).

    Raises:
        ConfigError: If the shapes disagree, a vocabulary has duplicates or a probability is
            negative or not finite.
    """

    def __init__(
        self,
        source_vocab: list[str],
        target_vocab: list[str],
        probs: sp.spmatrix | sp.sparray,
        source_lang: str,
        target_lang: str,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        self.source_vocab = list(source_vocab)
        self.target_vocab = list(target_vocab)
        shape = (len(self.source_vocab), len(self.target_vocab))
        if probs.shape != shape:
            raise ConfigError(
                f"probs has shape {probs.shape}, expected (len(source_vocab), len(target_vocab)) = {shape}"
            )
        self.probs = probs if isinstance(probs, sp.csr_matrix) else sp.csr_matrix(probs)
        self.source_lang = source_lang
        self.target_lang = target_lang
        self.meta = dict(meta or {})
        self._source_index = {word: i for i, word in enumerate(self.source_vocab)}
        if len(self._source_index) != len(self.source_vocab):
            raise ConfigError("source_vocab has duplicate words")
        if len(set(self.target_vocab)) != len(self.target_vocab):
            raise ConfigError("target_vocab has duplicate words")
        data = self.probs.data
        if data.size and not (np.isfinite(data).all() and data.min() >= 0):
            raise ConfigError("probs must be finite and non-negative")
        self._best: np.ndarray | None = None
        self._rank: np.ndarray | None = None

    # --- construction -------------------------------------------------------------------------

    @classmethod
    def from_weights(
        cls,
        triples: Iterable[tuple[str, str, float]],
        source_lang: str,
        target_lang: str,
        meta: Mapping[str, Any] | None = None,
    ) -> TranslationTable:
        """Build a normalised table from ``(source, target, weight)`` triples.

        Weights of repeated pairs add up; each source row is then divided by its sum. Sources
        whose weights sum to zero are left out. Each row is first scaled by a power of two (an
        exact operation) that brings its largest weight to [0.5, 1), so that weights near the
        float range's ends (1e308, 1e-320) neither overflow the sum nor underflow its inverse.

        Args:
            triples: Weighted word pairs (weights >= 0).
            source_lang: Source language code.
            target_lang: Target language code.
            meta: Metadata to keep with the table.

        Returns:
            The table, vocabularies in first-seen order.
        """
        src_index: dict[str, int] = {}
        tgt_index: dict[str, int] = {}
        rows: list[int] = []
        cols: list[int] = []
        weights: list[float] = []
        for source, target, weight in triples:
            if not (weight >= 0 and np.isfinite(weight)):
                raise ConfigError(f"weight of ({source!r}, {target!r}) must be >= 0, got {weight!r}")
            rows.append(src_index.setdefault(source, len(src_index)))
            cols.append(tgt_index.setdefault(target, len(tgt_index)))
            weights.append(float(weight))
        row_of, values = np.asarray(rows, int), np.asarray(weights, dtype=np.float64)
        row_max = np.zeros(len(src_index))
        np.maximum.at(row_max, row_of, values)
        values = np.ldexp(values, -np.frexp(row_max)[1][row_of])  # exact: a power of two per row
        matrix = sp.csr_matrix(
            (values, (row_of, np.asarray(cols, int))), shape=(len(src_index), len(tgt_index))
        )
        matrix.sum_duplicates()
        matrix.eliminate_zeros()
        keep = np.flatnonzero(np.diff(matrix.indptr) > 0)
        matrix = _normalise_rows(matrix[keep])
        source_vocab = list(src_index)
        return cls([source_vocab[i] for i in keep], list(tgt_index), matrix, source_lang, target_lang, meta)

    # --- lookup -------------------------------------------------------------------------------

    def __contains__(self, word: object) -> bool:
        """Whether ``word`` is a source word with at least one translation."""
        index = self._source_index.get(word) if isinstance(word, str) else None
        if index is None:
            return False
        start, end = self.probs.indptr[index], self.probs.indptr[index + 1]
        return bool((np.asarray(self.probs.data[start:end]) > 0).any())

    def __len__(self) -> int:
        """The number of source words."""
        return len(self.source_vocab)

    def __repr__(self) -> str:
        return (
            f"TranslationTable({self.source_lang}->{self.target_lang}, {len(self.source_vocab)} source x "
            f"{len(self.target_vocab)} target words, {self.probs.nnz} entries)"
        )

    def source_index(self, word: str) -> int | None:
        """The row of ``word``, or ``None`` when it is not a source word."""
        return self._source_index.get(word)

    def translations(self, word: str, k: int | None = None) -> list[tuple[str, float]]:
        """The translations of ``word``, most probable first (ties by target string).

        Args:
            word: A source word (analyzed form).
            k: Keep only the ``k`` best; ``None`` keeps all.

        Returns:
            ``[(target, p), ...]``; ``[]`` when ``word`` is unknown (callers decide whether it
            passes through untranslated).
        """
        if k is not None and k < 1:
            raise ConfigError(f"k must be >= 1 or None, got {k!r}")
        index = self._source_index.get(word)
        if index is None:
            return []
        start, end = self.probs.indptr[index], self.probs.indptr[index + 1]
        cols = np.asarray(self.probs.indices[start:end])
        vals = np.asarray(self.probs.data[start:end])
        positive = vals > 0
        cols, vals = cols[positive], vals[positive]
        order = np.lexsort((self._target_rank()[cols], -vals))[:k]  # p descending, then target
        pairs = zip(cols[order].tolist(), vals[order].tolist(), strict=True)
        return [(self.target_vocab[c], v) for c, v in pairs]

    def best(self) -> np.ndarray:
        """The most probable target column of every source row (ties by target string).

        Returns:
            int64 array of length ``len(source_vocab)``; ``-1`` for rows without entries.
        """
        if self._best is None:
            order, rows = _sorted_entries(self.probs, self._target_rank())
            # a stored 0 is no translation (as in translations()): DT had put a row's 0 in place
            # of a word that query translation and expected counts pass through
            positive = np.asarray(self.probs.data)[order] > 0
            order, rows = order[positive], rows[positive]
            best = np.full(len(self.source_vocab), -1, dtype=np.int64)
            first = np.ones(order.size, dtype=bool)
            first[1:] = rows[1:] != rows[:-1]
            best[rows[first]] = np.asarray(self.probs.indices)[order[first]]
            self._best = best
        return self._best

    def _target_rank(self) -> np.ndarray:
        """The rank of each target word in string order (for deterministic tie-breaking)."""
        if self._rank is None:
            order = np.argsort(np.asarray(self.target_vocab, dtype=object), kind="stable")
            self._rank = np.empty(len(self.target_vocab), dtype=np.int64)
            self._rank[order] = np.arange(len(order))
        return self._rank

    # --- pruning ------------------------------------------------------------------------------

    def prune(self, top_k: int | None = 10, cumulative: float | None = 0.9) -> TranslationTable:
        """Keep the best translations of each source word and renormalise.

        Per row, translations are ranked by probability (ties by target string); a translation
        is kept while it is among the ``top_k`` best *and* the probability mass of the ones
        ranked above it is below ``cumulative`` of the row's mass (so the smallest prefix
        reaching ``cumulative`` is kept; Darwish & Oard 2003 prune PSQ translations this way).
        Kept rows are divided by their sum; zero entries are dropped.

        Args:
            top_k: At most this many translations per word; ``None`` for no limit.
            cumulative: Cumulative-probability cut-off in ``(0, 1]``; ``None`` for none.

        Returns:
            A new table with the same vocabularies.

        Raises:
            ConfigError: If ``top_k < 1`` or ``cumulative`` is outside ``(0, 1]``.
        """
        if top_k is not None and top_k < 1:
            raise ConfigError(f"top_k must be >= 1 or None, got {top_k!r}")
        if cumulative is not None and not 0 < cumulative <= 1:
            raise ConfigError(f"cumulative must be in (0, 1] or None, got {cumulative!r}")
        csr = sp.csr_matrix(self.probs, dtype=np.float64, copy=True)
        csr.eliminate_zeros()
        order, rows = _sorted_entries(csr, self._target_rank())
        data = csr.data[order]
        starts = csr.indptr[rows]
        keep = np.ones(order.size, dtype=bool)
        if top_k is not None:
            keep &= np.arange(order.size) - starts < top_k
        if cumulative is not None:
            above, row_total = _row_masses(data, csr.indptr, top_k)
            keep &= above < cumulative * row_total[rows] * (1 - 1e-12)
        matrix = sp.csr_matrix((data[keep], (rows[keep], csr.indices[order][keep])), shape=csr.shape)
        meta = {**self.meta, "pruned": {"top_k": top_k, "cumulative": cumulative}}
        return TranslationTable(
            self.source_vocab,
            self.target_vocab,
            _normalise_rows(matrix),
            self.source_lang,
            self.target_lang,
            meta,
        )

    # --- persistence --------------------------------------------------------------------------

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Save atomically as a directory of ``.npy`` CSR arrays and JSON vocabularies and meta.

        Args:
            path: The directory to create, or to replace if it holds a saved table.
            force: Replace a directory that is not a saved table (never a file).

        Returns:
            ``path`` as a Path.

        Raises:
            OutputExistsError: If ``path`` holds something else (see :func:`atomic_directory`).
        """
        path = Path(path)
        csr = self.probs
        with atomic_directory(path, kind="translation-table", force=force) as tmp:
            np.save(tmp / "data.npy", np.asarray(csr.data, dtype=np.float64), allow_pickle=False)
            # one index dtype for both, so scipy keeps the memory-mapped arrays instead of casting
            index_dtype = np.int32 if max(csr.nnz, csr.shape[1]) < 2**31 else np.int64
            np.save(tmp / "indices.npy", np.asarray(csr.indices, dtype=index_dtype), allow_pickle=False)
            np.save(tmp / "indptr.npy", np.asarray(csr.indptr, dtype=index_dtype), allow_pickle=False)
            _write_json(tmp / "source_vocab.json", self.source_vocab)
            _write_json(tmp / "target_vocab.json", self.target_vocab)
            _write_json(
                tmp / "meta.json",
                {
                    "type": "TranslationTable",
                    "clir_version": __version__,
                    "source_lang": self.source_lang,
                    "target_lang": self.target_lang,
                    "shape": list(csr.shape),
                    "meta": self.meta,
                    "files": manifest_of(tmp, _FILES),
                },
            )
        return path

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True, *, verify: bool = False) -> TranslationTable:
        """Load a table written by :meth:`save`, verified against the manifest in ``meta.json``.

        Every file's size is compared with the manifest, and the SHA-256 of the smallest files up
        to :data:`~clir.formats.manifest.HASH_BUDGET` bytes (all of them with ``verify``); a
        table saved before clir recorded manifests loads with a warning.

        Args:
            path: The directory.
            mmap: Memory-map the arrays (read-only) instead of reading them into memory.
            verify: Hash every file.

        Raises:
            DataNotFoundError: If the directory or one of its files is missing.
            FormatError: If ``meta.json`` is not a TranslationTable's (another type, or a shape,
                languages or meta missing or of another kind), or naming a file that does not
                match the manifest (truncated, edited, damaged) or, in a table saved without one,
                that is not what it should hold.
        """
        path = Path(path)
        if not path.is_dir():
            raise DataNotFoundError(f"{path}: no saved TranslationTable directory")
        for name in (*_FILES, "meta.json"):
            if not (path / name).is_file():
                raise DataNotFoundError(f"{path / name}: missing file of a saved TranslationTable")
        try:
            header = json.loads((path / "meta.json").read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise FormatError(path / "meta.json", None, f"not a table's JSON description ({exc})") from None
        if not isinstance(header, dict) or header.get("type") != "TranslationTable":
            kind = header.get("type") if isinstance(header, dict) else type(header).__name__
            raise FormatError(path / "meta.json", None, f"type is {kind!r}, expected 'TranslationTable'")
        verify_files(path, header, path / "meta.json", verify, required=_FILES)
        shape = header.get("shape")
        langs = (header.get("source_lang"), header.get("target_lang"))
        meta = header.get("meta", {})
        if not (
            isinstance(shape, list) and len(shape) == 2 and all(type(n) is int and n >= 0 for n in shape)
        ):
            raise FormatError(
                path / "meta.json", None, f"shape is {shape!r}, expected [source words, target words]"
            )
        if not all(isinstance(lang, str) and lang for lang in langs):
            raise FormatError(path / "meta.json", None, f"languages are {list(langs)!r}, expected two codes")
        if not isinstance(meta, dict):
            raise FormatError(path / "meta.json", None, f"meta is {meta!r}, expected an object")
        vocabs = [_read_vocab(path / f"{side}_vocab.json") for side in ("source", "target")]
        for side, vocab, size in zip(("source", "target"), vocabs, shape, strict=True):
            if len(vocab) != size:
                raise FormatError(
                    path / f"{side}_vocab.json", None, f"holds {len(vocab)} words, meta.json's shape {size}"
                )
        mode = "r" if mmap else None
        arrays = []
        for name in _ARRAYS:
            try:
                arrays.append(np.load(path / f"{name}.npy", mmap_mode=mode, allow_pickle=False))
            except (OSError, ValueError, EOFError) as error:  # truncated, not .npy, or of objects
                raise FormatError(
                    path / f"{name}.npy", None, f"not a readable .npy array ({error})"
                ) from None
        try:
            matrix = sp.csr_matrix(tuple(arrays), shape=tuple(shape), copy=False)
            return cls(*vocabs, matrix, langs[0], langs[1], meta)
        except (ConfigError, ValueError, TypeError) as error:  # arrays that make no table of this shape
            raise FormatError(path, None, f"its arrays are not a table of shape {shape} ({error})") from None


def _sorted_entries(csr: sp.csr_matrix, target_rank: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Entry order by (row, probability descending, target string), and each sorted entry's row."""
    rows = np.repeat(np.arange(csr.shape[0]), np.diff(csr.indptr))
    indices = np.asarray(csr.indices)
    order = np.lexsort((target_rank[indices], -np.asarray(csr.data), rows))
    return order, rows[order]


def _row_masses(data: np.ndarray, indptr: np.ndarray, top_k: int | None) -> tuple[np.ndarray, np.ndarray]:
    """Per entry of a row-sorted CSR's ``data``, the mass of the entries before it in its row
    (summed in row order, up to the first ``top_k``; ``inf`` after them); and each row's mass.

    Each row is summed on its own: a cumulative sum over the whole table, less its value at the
    row's start, had lost the last bits to the table's total mass, so that identical rows were
    cut at different places depending on how many rows came before them.
    """
    lengths = np.diff(indptr)
    row_total = np.zeros(len(lengths))
    filled = np.flatnonzero(lengths)
    if filled.size:
        row_total[filled] = np.add.reduceat(data, indptr[filled])
    above = np.full(data.size, np.inf)
    running = np.zeros(len(lengths))
    by_length = np.argsort(-lengths, kind="stable")
    longest_first = -lengths[by_length]
    depth = int(lengths.max(initial=0)) if top_k is None else min(int(lengths.max(initial=0)), top_k)
    for position in range(depth):  # one pass per rank, over the rows that long
        rows = by_length[: np.searchsorted(longest_first, -position, side="left")]
        at = indptr[rows] + position
        above[at] = running[rows]
        running[rows] += data[at]
    return above, row_total


def _normalise_rows(matrix: sp.csr_matrix) -> sp.csr_matrix:
    matrix = sp.csr_matrix(matrix, dtype=np.float64)
    sums = np.asarray(matrix.sum(axis=1)).ravel()
    scale = np.divide(1.0, sums, out=np.zeros_like(sums), where=sums > 0)
    normalised = sp.csr_matrix(sp.diags(scale) @ matrix)
    normalised.sort_indices()
    return normalised


def _write_json(path: Path, value: Any) -> None:
    path.write_text(json.dumps(value, ensure_ascii=False, indent=1), encoding="utf-8")


def _read_vocab(path: Path) -> list[str]:
    """A saved vocabulary: a JSON list of strings.

    Raises:
        FormatError: Naming ``path`` when it is anything else.
    """
    try:
        vocab = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise FormatError(path, None, f"not a JSON list of words ({exc})") from None
    if not isinstance(vocab, list) or not all(isinstance(word, str) for word in vocab):
        raise FormatError(path, None, "not a JSON list of words")
    return vocab

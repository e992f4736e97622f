"""What the reranker trains on: per-query records, the vocabulary, tensorisation and negatives.

The data side (:mod:`clir.pipeline.features`) analyses and translates texts and builds a
:class:`RerankData`; from here on everything is token strings, ids and tensors:

* :class:`RerankQuery` — one query: English tokens, translated tokens (document language), the
  idf of each, its first-stage candidates (in first-stage order) with their raw first-stage
  scores and a feature vector each.
* :class:`RerankData` — the queries plus, per candidate document, its document-language tokens
  and its English (document-translation) tokens, and the names of the features.
* :class:`Vocabulary` — ``(lang, token) -> row`` of the frozen embedding matrix (row 0 = padding)
  and ``surface string -> surface id`` for exact match across languages (0 = padding).
* :class:`Tensorizer` — (query, document) pairs to the rerankers' padded
  :class:`~clir.rerankers.batch.BilingualBatch`.
* :func:`sample_pairs` — (query, relevant candidate, non-relevant candidate) triples for the
  pairwise hinge loss, seeded; :func:`sample_groups` — the same draws as (query, relevant
  candidate, its negatives) lists for the listwise softmax loss; uniform negatives, or a share
  of them from the top of the first-stage list (hard negatives).
"""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from itertools import chain, compress, count, filterfalse, repeat
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, FormatError, NonFiniteError
from clir.formats import atomic_directory
from clir.rerankers.batch import BilingualBatch, TokenView
from clir.training.config import HardNegativesConfig
from clir.training.idtables import id_table
from clir.types import MatrixSources, Qrels

PAD = 0
"""Row / surface id of padding."""


@dataclass
class RerankQuery:
    """One query with its first-stage candidates.

    Attributes:
        qid: Query id.
        query_en: Analyzed English query tokens (Q_en).
        query_src: The query translated into the document language (Q̂_src), analyzed tokens.
        idf_en: idf of each token of ``query_en`` (over the English translations of the documents).
        idf_src: idf of each token of ``query_src`` (over the documents).
        docnos: Candidate documents, in first-stage order (best first).
        scores: Raw first-stage scores of ``docnos`` (``(n,)``), the order reranking falls back on.
        features: ``(n, n_features)`` float32 extra features of each candidate (normalised per
            query by the data side; see :func:`normalise_scores`).
    """

    qid: str
    query_en: list[str]
    query_src: list[str]
    idf_en: list[float]
    idf_src: list[float]
    docnos: list[str]
    scores: np.ndarray
    features: np.ndarray

    def __post_init__(self) -> None:
        self.scores = np.asarray(self.scores, dtype=np.float64).reshape(-1)
        self.features = np.asarray(self.features, dtype=np.float32)
        n = len(self.docnos)
        if self.features.ndim == 1 and self.features.size == 0:
            self.features = self.features.reshape(n, 0)
        if len(self.idf_en) != len(self.query_en) or len(self.idf_src) != len(self.query_src):
            raise ConfigError(f"query {self.qid!r}: one idf per query token is needed")
        if self.scores.shape != (n,) or self.features.ndim != 2 or self.features.shape[0] != n:
            raise ConfigError(
                f"query {self.qid!r}: {n} candidates but scores {self.scores.shape} and "
                f"features {self.features.shape}; expected ({n},) and ({n}, n_features)"
            )


@dataclass(frozen=True)
class CandidateIndex:
    """The candidates of a :class:`RerankData`, numbered.

    Attributes:
        docnos: Every candidate once, in order of first appearance.
        positions: Per query, ``int64`` numbers (positions in ``docnos``) of its candidates.
    """

    docnos: list[str]
    positions: list[np.ndarray]


@dataclass
class RerankData:
    """Queries with candidates, the candidates' tokens and the feature names.

    Attributes:
        doc_lang: Language code of the documents (``src``).
        queries: One :class:`RerankQuery` per query.
        doc_src: ``docno -> analyzed document-language tokens`` (D_src) for every candidate.
        doc_en: ``docno -> analyzed English tokens of the document's translation`` (D̂_en).
        feature_names: Names of the feature columns.
        query_lang: Language code of the queries (``"en"``).
        meta: How the data was made (first-stage run, normalisation, ...), JSON-serialisable.
        documents_key: Where the documents' tokens come from, when that identifies them:
            every docno of ``doc_src`` and ``doc_en`` has the tokens it has in the
            content-addressed step of that key (``clir rerank --index-cache`` sets its index
            step's). A cache of the documents' id tables is then keyed by it, the candidates'
            docnos and the texts' lengths, with no token read
            (:func:`~clir.training.idtables.id_table`); ``None`` (the default): by a digest of
            every token. Code that changes ``doc_src`` or ``doc_en`` must set it to ``None``;
            :meth:`save` does not keep it.
    """

    doc_lang: str
    queries: list[RerankQuery]
    doc_src: dict[str, list[str]]
    doc_en: dict[str, list[str]]
    feature_names: list[str] = field(default_factory=list)
    query_lang: str = "en"
    meta: dict[str, Any] = field(default_factory=dict)
    documents_key: str | None = None

    def __post_init__(self) -> None:
        for query in self.queries:
            if query.features.shape[1] != len(self.feature_names):
                raise ConfigError(
                    f"query {query.qid!r} has {query.features.shape[1]} features but feature_names "
                    f"names {len(self.feature_names)}: {self.feature_names}"
                )
            missing = [d for d in query.docnos if d not in self.doc_src or d not in self.doc_en]
            if missing:
                raise ConfigError(f"query {query.qid!r}: no tokens for candidates {missing[:5]}")

    @property
    def qids(self) -> list[str]:
        """Query ids, in order."""
        return [q.qid for q in self.queries]

    def __len__(self) -> int:
        return len(self.queries)

    def subset(self, qids: Iterable[str]) -> RerankData:
        """The data of some queries (in the order of ``qids``), sharing the document tokens.

        Raises:
            ConfigError: If a qid is unknown.
        """
        by_qid = {q.qid: q for q in self.queries}
        qids = list(qids)
        unknown = [q for q in qids if q not in by_qid]
        if unknown:
            raise ConfigError(f"unknown qids {unknown[:5]} (of {len(unknown)})")
        return RerankData(
            self.doc_lang,
            [by_qid[q] for q in qids],
            self.doc_src,
            self.doc_en,
            list(self.feature_names),
            self.query_lang,
            dict(self.meta),
            self.documents_key,
        )

    def without_features(self) -> RerankData:
        """The same queries and candidates with no extra features."""
        return self.select_features([])

    def select_features(self, names: Sequence[str]) -> RerankData:
        """The same queries and candidates with only the named feature columns, in that order.

        Raises:
            ConfigError: If a name is not a feature of the data.
        """
        unknown = [n for n in names if n not in self.feature_names]
        if unknown:
            raise ConfigError(f"features {unknown} are not among the data's {self.feature_names}")
        columns = [self.feature_names.index(n) for n in names]
        queries = [
            RerankQuery(
                q.qid,
                q.query_en,
                q.query_src,
                q.idf_en,
                q.idf_src,
                q.docnos,
                q.scores,
                q.features[:, columns],
            )
            for q in self.queries
        ]
        return RerankData(
            self.doc_lang,
            queries,
            self.doc_src,
            self.doc_en,
            list(names),
            self.query_lang,
            dict(self.meta),
            self.documents_key,
        )

    def first_stage_run(self) -> dict[str, dict[str, float]]:
        """The candidates with their first-stage scores, as a run."""
        return {q.qid: {d: float(s) for d, s in zip(q.docnos, q.scores, strict=True)} for q in self.queries}

    def save(self, path: str | Path) -> Path:
        """Write as a directory (atomically): ``rerank_data.json`` (tokens, docnos, meta) and
        ``scores.npy`` / ``features.npy`` (all queries' candidates concatenated).

        Returns:
            ``path`` as a :class:`~pathlib.Path`.
        """
        path = Path(path)
        info = {
            "type": "rerank_data",
            "clir_version": __version__,
            "doc_lang": self.doc_lang,
            "query_lang": self.query_lang,
            "feature_names": self.feature_names,
            "meta": self.meta,
            "queries": [
                {
                    "qid": q.qid,
                    "query_en": q.query_en,
                    "query_src": q.query_src,
                    "idf_en": [float(x) for x in q.idf_en],
                    "idf_src": [float(x) for x in q.idf_src],
                    "docnos": q.docnos,
                }
                for q in self.queries
            ],
            "documents": {d: {"src": self.doc_src[d], "en": self.doc_en[d]} for d in self._used_docnos()},
        }
        n_features = len(self.feature_names)
        scores = np.concatenate([q.scores for q in self.queries]) if self.queries else np.zeros(0)
        features = (
            np.concatenate([q.features for q in self.queries])
            if self.queries
            else np.zeros((0, n_features), np.float32)
        )
        with atomic_directory(path, kind="rerank-data") as tmp:
            (tmp / "rerank_data.json").write_text(json.dumps(info, ensure_ascii=False), encoding="utf-8")
            np.save(tmp / "scores.npy", scores.astype(np.float64), allow_pickle=False)
            np.save(tmp / "features.npy", features.astype(np.float32), allow_pickle=False)
        return path

    def _used_docnos(self) -> list[str]:
        """Every candidate, once, in order of first appearance."""
        return list(dict.fromkeys(chain.from_iterable(q.docnos for q in self.queries)))

    def candidate_index(self) -> CandidateIndex:
        """The candidates numbered: :meth:`_used_docnos` and each query's candidates' numbers
        (one lookup per candidate: a docno seen first is numbered as it is met)."""
        number: defaultdict[str, int] = defaultdict(count().__next__)
        counts = [len(q.docnos) for q in self.queries]
        flat = np.fromiter(
            map(number.__getitem__, chain.from_iterable(q.docnos for q in self.queries)),
            np.int64,
            sum(counts),
        )
        ends = np.cumsum(counts).tolist()
        return CandidateIndex(
            list(number), [flat[end - n : end] for n, end in zip(counts, ends, strict=True)]
        )

    @classmethod
    def load(cls, path: str | Path) -> RerankData:
        """Read a directory written by :meth:`save`.

        Raises:
            DataNotFoundError: If a file is missing.
            FormatError: If the arrays do not match the queries.
        """
        path = Path(path)
        meta_path = path / "rerank_data.json"
        if not meta_path.is_file():
            raise DataNotFoundError(f"{meta_path}: no such file (not a saved RerankData directory?)")
        info = json.loads(meta_path.read_text(encoding="utf-8"))
        scores = np.load(path / "scores.npy", allow_pickle=False)
        features = np.load(path / "features.npy", allow_pickle=False)
        total = sum(len(q["docnos"]) for q in info["queries"])
        if scores.shape != (total,) or features.shape[0] != total:
            raise FormatError(
                path,
                None,
                f"{total} candidates in rerank_data.json but arrays {scores.shape}, {features.shape}",
            )
        queries, start = [], 0
        for q in info["queries"]:
            end = start + len(q["docnos"])
            queries.append(
                RerankQuery(
                    q["qid"], q["query_en"], q["query_src"], q["idf_en"], q["idf_src"], q["docnos"],
                    scores[start:end], features[start:end],
                )
            )  # fmt: skip
            start = end
        docs = info["documents"]
        return cls(
            info["doc_lang"],
            queries,
            {d: v["src"] for d, v in docs.items()},
            {d: v["en"] for d, v in docs.items()},
            info["feature_names"],
            info.get("query_lang", "en"),
            info.get("meta", {}),
        )


LARGE_SCORE = 1e150
"""Scores of a query past this magnitude are divided by their largest magnitude before they are
normalised, which a positive scale does not change: a z-score's squared deviations would
overflow to infinity past about 1e154, and a min-max span past about 9e307."""


def normalise_scores(scores: np.ndarray, method: str = "zscore") -> np.ndarray:
    """Normalise one query's scores over its candidate list.

    First-stage scores are not comparable across queries (QL log-probabilities are negative and
    grow with query length), so each query's are rescaled before they become features or are
    averaged in an ensemble.

    Args:
        scores: ``(n,)`` scores of one query's candidates.
        method: ``"zscore"`` — ``(s - mean) / std`` (population std; all zeros when the scores
            are constant) — or ``"minmax"`` — ``(s - min) / (max - min)`` (all zeros when constant).

    Returns:
        ``(n,)`` float64.

    Raises:
        ConfigError: On an unknown method.
        NonFiniteError: If a score is NaN or infinite (normalising would hide it).
    """
    scores = np.asarray(scores, dtype=np.float64)
    if scores.size == 0:
        return scores.copy()
    # first-stage scores as well as a model's: no advice about a learning rate (it had said "the
    # model diverged: lower optim.lr" of a run's NaN score)
    check_finite(scores, "scores", "check the run or the model that gave them")
    peak = max(scores.max(), -scores.min())
    if peak > LARGE_SCORE:
        scores = scores / peak
    if method == "zscore":  # constant scores' std is their mean's rounding error (1e-11 at 1e5)
        std = scores.std()
        constant = std <= 1e-12 or scores.max() == scores.min()
        return np.zeros_like(scores) if constant else (scores - scores.mean()) / std
    if method == "minmax":
        span = scores.max() - scores.min()
        return (scores - scores.min()) / span if span > 1e-12 else np.zeros_like(scores)
    raise ConfigError(f"unknown normalisation {method!r}; expected one of ['minmax', 'zscore']")


DIVERGED = "the model diverged: lower optim.lr or check the inputs"
"""What :func:`check_finite` advises by default: a reranker's scores."""


def check_finite(values: np.ndarray, what: str, remedy: str = DIVERGED) -> None:
    """Raise :class:`~clir.errors.NonFiniteError` when ``values`` holds a NaN or an infinity.

    Args:
        values: The array to check.
        what: Named in the message (e.g. ``"query 'q1': scores"``).
        remedy: What the message advises (by default, for a reranker's scores).
    """
    bad = ~np.isfinite(values)
    if bad.any():
        raise NonFiniteError(
            f"{what}: {int(bad.sum())} of {values.size} values are not finite "
            f"(first: {values[bad][0]}); {remedy}"
        )


class Vocabulary:
    """Token ids of a reranker's frozen embedding matrix and surface ids for exact match.

    ``(lang, token)`` pairs get rows ``1..V-1`` (row 0 = padding); the surface string of a token
    (without its language) gets an id ``1..S-1`` (0 = padding), so a name that passes
    untranslated into the other language still matches exactly.
    """

    def __init__(self) -> None:
        self._rows: dict[str, dict[str, int]] = {}  # lang -> token -> row
        self._entries: list[tuple[str, str]] = [("", "")]
        self._surfaces: dict[str, int] = {}  # surface string -> id

    def __len__(self) -> int:
        return len(self._entries)

    @property
    def entries(self) -> list[tuple[str, str]]:
        """``(lang, token)`` of each row (row 0: ``("", "")``)."""
        return self._entries

    @property
    def n_surfaces(self) -> int:
        """Number of surface ids, padding included."""
        return len(self._surfaces) + 1

    def add(self, lang: str, tokens: Iterable[str]) -> None:
        """Add tokens of one language (already known ones are skipped).

        New tokens get the next rows in order of first appearance, and their surface strings
        that are new the next surface ids in that order (rows are numbered in order of addition
        across languages)."""
        known = self._rows.setdefault(lang, {})
        new = list(filterfalse(known.__contains__, dict.fromkeys(tokens)))
        known.update(zip(new, count(len(self._entries))))
        self._entries.extend(zip(repeat(lang), new))
        surfaces = self._surfaces
        surfaces.update(zip(filterfalse(surfaces.__contains__, new), count(len(surfaces) + 1)))

    def ids(self, lang: str, tokens: Sequence[str], add: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """``(rows, surface ids)`` int64 arrays of ``tokens``.

        Args:
            lang: Their language.
            tokens: The tokens.
            add: Add the tokens the vocabulary lacks (in order, as :meth:`add`) rather than fail.

        Raises:
            ConfigError: On a token not in the vocabulary (unless ``add``).
        """
        if add:
            self.add(lang, tokens)
        known = self._rows.get(lang, {})
        try:
            rows = np.fromiter(map(known.get, tokens), np.int64, len(tokens))
        except TypeError:
            missing = next(t for t in tokens if t not in known)
            raise ConfigError(f"token {missing!r} is not in the vocabulary; add it first") from None
        return rows, np.fromiter(map(self._surfaces.__getitem__, tokens), np.int64, len(tokens))

    def _add_distinct(self, lang: str, words: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """``self.ids(lang, words, add=True)`` for ``words`` that are distinct (as an
        :class:`~clir.training.idtables.IdTable`'s): the same rows, surface ids and vocabulary,
        with one lookup of each word's row and of its surface (the new ones numbered in order)."""
        known = self._rows.setdefault(lang, {})
        rows = np.fromiter(map(known.get, words, repeat(0)), np.int64, len(words))
        new = rows == 0
        added = list(compress(words, new.tolist()))
        start = len(self._entries)
        known.update(zip(added, count(start)))
        self._entries.extend(zip(repeat(lang), added))
        rows[new] = np.arange(start, start + len(added))
        surfaces = self._surfaces
        ids = np.fromiter(map(surfaces.get, words, repeat(0)), np.int64, len(words))
        fresh = ids == 0  # distinct words, so each a new surface
        first = len(surfaces) + 1
        surfaces.update(zip(compress(words, fresh.tolist()), count(first)))
        ids[fresh] = np.arange(first, len(surfaces) + 1)
        return rows, ids

    @classmethod
    def build(cls, datasets: Iterable[RerankData]) -> Vocabulary:
        """The vocabulary of every query and candidate token of ``datasets``, in a fixed order
        (so the same data always gives the same ids): per dataset the queries' English tokens,
        their translations, the documents, the documents' English translations, each language's
        tokens in order of first appearance."""
        vocab = cls()
        for data in datasets:
            docnos = data._used_docnos()
            vocab.add(data.query_lang, chain.from_iterable(q.query_en for q in data.queries))
            vocab.add(data.doc_lang, chain.from_iterable(q.query_src for q in data.queries))
            vocab.add(data.doc_lang, chain.from_iterable(map(data.doc_src.__getitem__, docnos)))
            vocab.add(data.query_lang, chain.from_iterable(map(data.doc_en.__getitem__, docnos)))
        return vocab

    def embedding_matrix(self, space: Any) -> np.ndarray:
        """The ``(len(self), dim)`` float32 matrix of the vocabulary from a shared space.

        Args:
            space: A :class:`clir.embeddings.SharedSpace` (anything with ``.matrix(entries)``);
                every language of the vocabulary must be in it.

        Returns:
            Row 0 zeros (padding); OOV tokens get zero rows (the space's convention).
        """
        rows = self.embedding_rows(space)
        matrix = np.zeros((len(rows) + 1, rows.shape[1]), dtype=np.float32)
        matrix[1:] = rows
        return matrix

    def embedding_rows(self, space: Any) -> np.ndarray:
        """:meth:`embedding_matrix` without its row 0 (the one that a caller may add where the
        matrix goes, e.g. on a GPU, rather than copy the rest on the host to make room for it).

        Returns:
            ``(len(self) - 1, dim)`` float32.
        """
        if len(self._entries) == 1:
            return np.zeros((0, _space_dim(space)), dtype=np.float32)
        _space_dim(space)
        return np.asarray(space.matrix(self._entries[1:]), dtype=np.float32)

    def device_rows(self, space: Any, device: torch.device | str) -> torch.Tensor:
        """:meth:`embedding_rows` as a tensor on ``device``. Off the CPU, from a space that says
        where its rows come from (:meth:`~clir.embeddings.SharedSpace.matrix_sources`), its
        language tables are copied there and the rows gathered there, when the tables are not
        much larger than the matrix (:data:`TABLES_PER_MATRIX`): no matrix is made on the host
        and copied (on a virtual machine, mostly its pages' first touch)."""
        device = torch.device(device)
        sources = getattr(space, "matrix_sources", None)
        if device.type != "cpu" and sources is not None and len(self._entries) > 1:
            _space_dim(space)
            found = sources(self._entries[1:])
            if gathers_there(found.table_rows(), len(self._entries) - 1):
                return gather_matrix(found, device)
        return torch.from_numpy(self.embedding_rows(space)).to(device)


TABLES_PER_MATRIX = 4
"""Table rows copied to the device at most per matrix row, beyond 65,536 (a larger space's
rows are gathered on the host)."""


def gather_matrix(sources: MatrixSources, device: torch.device | str) -> torch.Tensor:
    """The matrix of ``sources`` on ``device``: each table copied there once and its entries'
    rows gathered there (equal to the space's ``matrix`` of the same entries)."""
    out = torch.zeros((len(sources.table), sources.dim), dtype=torch.float32, device=device)
    table = torch.from_numpy(sources.table).to(device)
    row = torch.from_numpy(sources.row).to(device)
    for t, vectors in enumerate(sources.tables):
        at = torch.nonzero(table == t).squeeze(1)
        if len(at):
            out[at] = torch.from_numpy(np.asarray(vectors, dtype=np.float32)).to(device)[row[at]]
    if sources.composed:
        at = torch.tensor(list(sources.composed), dtype=torch.int64, device=device)
        out[at] = torch.from_numpy(np.stack(list(sources.composed.values()))).to(device)
    return out


def gathers_there(table_rows: int, matrix_rows: int) -> bool:
    """Whether :meth:`Vocabulary.device_rows` copies tables of ``table_rows`` rows to the device
    to gather a matrix of ``matrix_rows`` there (:data:`TABLES_PER_MATRIX`)."""
    return table_rows <= TABLES_PER_MATRIX * matrix_rows + 65536


def _space_dim(space: Any) -> int:
    dim = getattr(space, "dim", None)
    if dim is None:
        raise ConfigError(f"space {space!r} has no 'dim'; expected a clir.embeddings.SharedSpace")
    return int(dim)


@dataclass(frozen=True)
class PairIndex:
    """(query, candidate) pairs as positions into a :class:`Tensorizer`'s tables.

    Attributes:
        query: ``int64`` (n,) query index of each pair.
        doc: ``int64`` (n,) document index (row of the document tables).
        row: ``int64`` (n,) row of the pair's feature vector (the queries' candidates concatenated).
        width: ``int64`` (n,) padded document width each pair is scored at on CUDA
            (:func:`~clir.training.scoring.batch_widths`); ``None``: its batch's.
    """

    query: np.ndarray
    doc: np.ndarray
    row: np.ndarray
    width: np.ndarray | None = None

    def __len__(self) -> int:
        return len(self.query)

    def take(self, positions: np.ndarray | slice) -> PairIndex:
        """The pairs at ``positions`` (an index array or a slice)."""
        width = None if self.width is None else self.width[positions]
        return PairIndex(self.query[positions], self.doc[positions], self.row[positions], width)


@dataclass(frozen=True)
class _Table:
    """One view of every query or document: padded ids (and idf) plus each row's length."""

    tokens: torch.Tensor
    surface: torch.Tensor
    idf: torch.Tensor | None
    lengths: np.ndarray

    def to(self, device: torch.device) -> _Table:
        def move(t: torch.Tensor) -> torch.Tensor:
            return t.pin_memory().to(device, non_blocking=True)

        return _Table(
            move(self.tokens), move(self.surface), None if self.idf is None else move(self.idf), self.lengths
        )


class Tensorizer:
    """Turns (query, candidate) pairs of a :class:`RerankData` into padded tensors.

    Token lists are truncated to their first ``max_query_len`` / ``max_doc_len`` tokens; a batch
    is padded with 0 to its longest (truncated) sequence, and to at least ``min_len`` so that
    convolutional models (PACRR's n×n filters) always have room.

    Every query view and document view is laid out once, at construction, as one padded table
    (its words numbered locally, then one vocabulary lookup per distinct word; the documents'
    tables can be kept on disk, ``cache``);
    a batch is rows gathered from those tables (no Python loop over pairs), on the CPU or, after
    the tables are copied there once (:meth:`gather` with ``device``), on the GPU.

    Args:
        vocab: Must contain every token of the data (see :meth:`Vocabulary.build`).
        data: The data to read pairs from.
        max_query_len: Query tokens kept.
        max_doc_len: Document tokens kept.
        min_len: Least padded length of every side.
        extend_vocab: Add the (kept) tokens ``vocab`` lacks to it, in the order of the tables:
            the queries' two views, then the documents' (one pass over the tokens, where
            :meth:`Vocabulary.build` and then this would make two).
        cache: Keep the documents' id tables in this directory and read them back when the
            documents are the same (:func:`~clir.training.idtables.id_table`, keyed by
            ``data.documents_key`` where it is set, else by a digest of the tokens); the tables,
            the vocabulary and the scores are those of an uncached tensorizer.
    """

    def __init__(
        self,
        vocab: Vocabulary,
        data: RerankData,
        max_query_len: int,
        max_doc_len: int,
        min_len: int = 3,
        extend_vocab: bool = False,
        cache: str | Path | None = None,
    ) -> None:
        if max_query_len < 1 or max_doc_len < 1:
            raise ConfigError(
                f"max_query_len and max_doc_len must be >= 1, got {max_query_len}, {max_doc_len}"
            )
        self.vocab = vocab
        self.data = data
        self.max_query_len = max_query_len
        self.max_doc_len = max_doc_len
        self.min_len = min_len
        self._extend_vocab = extend_vocab
        queries = data.queries
        self.candidate_index = data.candidate_index()
        docnos = self.candidate_index.docnos
        self._query_tables = {
            "en": self._table(
                data.query_lang, [q.query_en[:max_query_len] for q in queries], [q.idf_en for q in queries]
            ),
            "src": self._table(
                data.doc_lang, [q.query_src[:max_query_len] for q in queries], [q.idf_src for q in queries]
            ),
        }
        self._doc_index = {d: i for i, d in enumerate(docnos)}
        source = None
        if cache is not None and data.documents_key is not None:  # what the tables are made of
            source = hashlib.sha256(f"{data.documents_key}\n{max_doc_len}\n".encode())
            source.update(json.dumps(docnos, ensure_ascii=False).encode("utf-8", "surrogatepass"))
        self._doc_tables = {
            view: self._table(
                lang,
                _truncated(texts, docnos, max_doc_len),
                cache=cache,
                source=None if source is None else f"{source.hexdigest()} {view}",
            )
            for view, lang, texts in (
                ("src", data.doc_lang, data.doc_src),
                ("en", data.query_lang, data.doc_en),
            )
        }
        self._candidates = self.candidate_index.positions
        self._first_row = np.cumsum([0, *(len(q.docnos) for q in queries)])
        n_features = len(data.feature_names)
        self._features = torch.from_numpy(
            np.concatenate([q.features for q in queries]).astype(np.float32)
            if queries
            else np.zeros((0, n_features), np.float32)
        )
        self._on_device: dict[torch.device, tuple[dict[str, _Table], dict[str, _Table], torch.Tensor]] = {}

    def _table(
        self,
        lang: str,
        texts: Sequence[Sequence[str]],
        idf: Sequence[Sequence[float]] | None = None,
        cache: str | Path | None = None,
        source: str | None = None,
    ) -> _Table:
        """The padded table of ``texts`` (their :class:`~clir.training.idtables.IdTable`, kept in
        ``cache`` when given, under ``source`` when that identifies them, mapped to the
        vocabulary's rows) and their idf (each truncated to its text's length)."""
        table = id_table(texts, self.min_len, cache, source)
        if self._extend_vocab:  # the table's words are distinct
            rows, surfaces = self.vocab._add_distinct(lang, table.words)
        else:
            rows, surfaces = self.vocab.ids(lang, table.words)
        lengths = table.lengths
        tokens = np.concatenate([[PAD], rows])[table.ids]  # local word i + 1 -> its row
        surface = np.concatenate([[PAD], surfaces])[table.ids]
        weights = None
        if idf is not None:
            weights = np.zeros(table.ids.shape, dtype=np.float32)
            flat = chain.from_iterable(w[:n] for w, n in zip(idf, lengths, strict=True))
            weights[np.arange(table.ids.shape[1]) < lengths[:, None]] = np.fromiter(
                flat, np.float32, int(lengths.sum())
            )
        return _Table(
            torch.from_numpy(tokens),
            torch.from_numpy(surface),
            None if weights is None else torch.from_numpy(weights),
            lengths,
        )

    @property
    def n_rows(self) -> int:
        """The number of (query, candidate) pairs, every query's candidates (:attr:`PairIndex.row`
        runs from 0 to this)."""
        return int(self._first_row[-1])

    @cached_property
    def _positions(self) -> list[dict[str, int]]:
        """Per query, ``docno -> position`` among its candidates (made at the first :meth:`pair_index`)."""
        return [{d: i for i, d in enumerate(q.docnos)} for q in self.data.queries]

    def pair_index(self, pairs: Sequence[tuple[int, str]]) -> PairIndex:
        """The :class:`PairIndex` of ``(query index, docno)`` pairs.

        Raises:
            ConfigError: If a docno is not a candidate of its query.
        """
        rows = []
        for qi, docno in pairs:
            position = self._positions[qi].get(docno)
            if position is None:
                raise ConfigError(f"{docno!r} is not a candidate of query {self.data.queries[qi].qid!r}")
            rows.append(self._first_row[qi] + position)
        query = np.asarray([qi for qi, _ in pairs], dtype=np.int64)
        doc = np.asarray([self._doc_index[d] for _, d in pairs], dtype=np.int64)
        return PairIndex(query, doc, np.asarray(rows, dtype=np.int64))

    def candidates(self, depth: int | None = None) -> PairIndex:
        """Every query's first ``depth`` candidates (``None``: all), query by query, in order."""
        counts = self.counts(depth)
        query = np.repeat(np.arange(len(counts), dtype=np.int64), counts)
        doc = np.concatenate(
            [c[:n] for c, n in zip(self._candidates, counts, strict=True)] or [np.zeros(0, np.int64)]
        )
        row = np.concatenate(
            [np.arange(n, dtype=np.int64) + first for n, first in zip(counts, self._first_row, strict=False)]
            or [np.zeros(0, np.int64)]
        )
        return PairIndex(query, doc.astype(np.int64), row)

    def counts(self, depth: int | None = None) -> list[int]:
        """The number of candidates of each query among its first ``depth``."""
        return [len(c) if depth is None else min(depth, len(c)) for c in self._candidates]

    def doc_lengths(self, index: PairIndex) -> np.ndarray:
        """The padded-to length each pair's documents need (the longer of its two views)."""
        return np.maximum(
            self._doc_tables["src"].lengths[index.doc], self._doc_tables["en"].lengths[index.doc]
        )

    def batch(self, pairs: Sequence[tuple[int, str]]) -> BilingualBatch:
        """Tensors of ``(query index, docno)`` pairs (the docno must be a candidate of the query).

        Raises:
            ConfigError: If a docno is not a candidate of its query.
        """
        return self.gather(self.pair_index(pairs))

    def gather(
        self, index: PairIndex, device: torch.device | None = None, widths: tuple[int, int] | None = None
    ) -> BilingualBatch:
        """The batch of the pairs of ``index``, gathered where the tables are.

        Args:
            index: The pairs (numpy arrays, or tensors already on ``device``).
            device: Gather on this device from tables copied there once (pinned, asynchronously)
                and kept; ``None``: on the CPU.
            widths: ``(query width, document width)`` to pad to (at least the batch's longest
                sequences); ``None``: the batch's longest (and ``min_len``).

        Returns:
            A :class:`~clir.rerankers.batch.BilingualBatch` on ``device``.
        """
        queries, docs, features = self._tables(device)
        if widths is None:
            widths = (
                max([self.min_len, *(queries[v].lengths[index.query].max(initial=0) for v in queries)]),
                max([self.min_len, *(docs[v].lengths[index.doc].max(initial=0) for v in docs)]),
            )
        target = features.device
        q_idx, d_idx, rows = (
            torch.as_tensor(a).to(target, non_blocking=True) for a in (index.query, index.doc, index.row)
        )

        def view(table: _Table, idx: torch.Tensor, width: int) -> TokenView:
            def take(t: torch.Tensor) -> torch.Tensor:
                t = (
                    t[:, :width]
                    if t.shape[1] >= width
                    else torch.nn.functional.pad(t, (0, width - t.shape[1]))
                )
                return t.index_select(0, idx)

            return TokenView(
                take(table.tokens), take(table.surface), None if table.idf is None else take(table.idf)
            )

        return BilingualBatch(
            q_en=view(queries["en"], q_idx, widths[0]),
            q_src=view(queries["src"], q_idx, widths[0]),
            d_src=view(docs["src"], d_idx, widths[1]),
            d_en=view(docs["en"], d_idx, widths[1]),
            features=features.index_select(0, rows) if self.data.feature_names else None,
        )

    @property
    def max_query_width(self) -> int:
        """The longest (truncated) query of either view, at least ``min_len``."""
        return max(self.min_len, *(int(t.lengths.max(initial=0)) for t in self._query_tables.values()))

    @property
    def max_doc_width(self) -> int:
        """The longest (truncated) document of either view, at least ``min_len``."""
        return max(self.min_len, *(int(t.lengths.max(initial=0)) for t in self._doc_tables.values()))

    def prepare(self, device: torch.device) -> Tensorizer:
        """Copy the tables to ``device`` now (pinned, asynchronously) rather than at the first gather."""
        self._tables(device)
        return self

    def _tables(
        self, device: torch.device | None
    ) -> tuple[dict[str, _Table], dict[str, _Table], torch.Tensor]:
        if device is None or device.type == "cpu":
            return self._query_tables, self._doc_tables, self._features
        if device not in self._on_device:
            self._on_device[device] = (
                {k: t.to(device) for k, t in self._query_tables.items()},
                {k: t.to(device) for k, t in self._doc_tables.items()},
                self._features.pin_memory().to(device, non_blocking=True),
            )
        return self._on_device[device]

    def query_pairs(self, qi: int, depth: int | None = None) -> list[tuple[int, str]]:
        """All ``(qi, docno)`` pairs of query ``qi``'s first ``depth`` candidates."""
        docnos = self.data.queries[qi].docnos
        return [(qi, d) for d in (docnos if depth is None else docnos[:depth])]


def _truncated(texts: Mapping[str, list[str]], docnos: Sequence[str], length: int) -> list[list[str]]:
    """The first ``length`` tokens of each document of ``docnos`` (its own list when it is no longer)."""
    return [text if len(text) <= length else text[:length] for text in map(texts.__getitem__, docnos)]


def sample_pairs(
    data: RerankData,
    qrels: Qrels,
    rng: np.random.Generator,
    negatives_per_positive: int = 1,
    depth: int | None = None,
    hard: HardNegativesConfig | None = None,
) -> list[tuple[int, str, str]]:
    """Training triples: each relevant candidate with negatives from the non-relevant ones.

    For every query and every candidate among its first ``depth`` with ``relevance >= 1``,
    ``negatives_per_positive`` negatives are drawn uniformly (without replacement when there
    are enough) from the query's first ``depth`` candidates with ``relevance < 1`` or no
    judgement. With ``hard``, the nearest whole number (halves up) to ``hard.share`` ×
    ``negatives_per_positive`` of them are drawn without replacement from those among the
    query's first ``hard.depth`` candidates (first-stage order: the hard negatives; all of them
    when there are fewer), and the rest uniformly from the negatives not drawn (with replacement
    from all of them when too few are left); a query with no negative in its first
    ``hard.depth`` draws uniformly. Queries without a relevant or without a non-relevant
    candidate give nothing. The triples come back shuffled.

    Args:
        data: Queries and candidates.
        qrels: Judgements.
        rng: The generator (e.g. ``np.random.default_rng([seed, epoch])``).
        negatives_per_positive: Negatives per positive.
        depth: Candidates considered (``None``: all).
        hard: Hard negatives from the top ranks (``None``: every negative drawn uniformly).

    Returns:
        ``(query index, positive docno, negative docno)`` triples.
    """
    triples = [
        (qi, pos, neg)
        for qi, pos, negs in _groups(data, qrels, rng, negatives_per_positive, depth, hard)
        for neg in negs
    ]
    order = rng.permutation(len(triples))
    return [triples[i] for i in order]


def sample_groups(
    data: RerankData,
    qrels: Qrels,
    rng: np.random.Generator,
    negatives_per_positive: int = 1,
    depth: int | None = None,
    hard: HardNegativesConfig | None = None,
) -> list[tuple[int, str, list[str]]]:
    """Training lists for a listwise loss: each relevant candidate with its own negatives.

    The negatives are drawn as by :func:`sample_pairs` (the same draws for the same generator);
    the groups, not the pairs, come back shuffled.

    Returns:
        ``(query index, positive docno, negative docnos)`` groups, ``negatives_per_positive``
        negatives each.
    """
    groups = _groups(data, qrels, rng, negatives_per_positive, depth, hard)
    order = rng.permutation(len(groups))
    return [groups[i] for i in order]


def _groups(
    data: RerankData,
    qrels: Qrels,
    rng: np.random.Generator,
    negatives_per_positive: int,
    depth: int | None,
    hard: HardNegativesConfig | None,
) -> list[tuple[int, str, list[str]]]:
    """Each relevant candidate of each query with its drawn negatives, in query order."""
    if negatives_per_positive < 1:
        raise ConfigError(f"negatives_per_positive must be >= 1, got {negatives_per_positive}")
    groups: list[tuple[int, str, list[str]]] = []
    for qi, query in enumerate(data.queries):
        judged: Mapping[str, int] = qrels.get(query.qid, {})
        docnos = query.docnos if depth is None else query.docnos[:depth]
        positives = [d for d in docnos if judged.get(d, 0) >= 1]
        negatives = [d for d in docnos if judged.get(d, 0) < 1]
        if not positives or not negatives:
            continue
        replace = len(negatives) < negatives_per_positive
        n_top = 0 if hard is None else sum(judged.get(d, 0) < 1 for d in docnos[: hard.depth])
        for positive in positives:
            if hard is not None and n_top:
                n_hard = hard.count(negatives_per_positive)
                chosen = _draw_hard(rng, len(negatives), n_top, negatives_per_positive, n_hard)
            else:
                chosen = rng.choice(len(negatives), size=negatives_per_positive, replace=replace)
            groups.append((qi, positive, [negatives[j] for j in chosen]))
    return groups


def _draw_hard(rng: np.random.Generator, n_negatives: int, n_top: int, k: int, n_hard: int) -> np.ndarray:
    """Indices of ``k`` negatives among ``n_negatives`` (in first-stage order), ``n_hard`` of them
    (:meth:`~clir.training.config.HardNegativesConfig.count`; at most ``n_top``) drawn without
    replacement from the first ``n_top``, the rest from the others left (with replacement from
    all of them when too few are left)."""
    top = rng.choice(n_top, size=min(n_hard, n_top), replace=False)
    rest = np.setdiff1d(np.arange(n_negatives), top)
    needed = k - len(top)
    if len(rest) < needed:
        more = rng.choice(n_negatives, size=needed, replace=True)
    else:
        more = rest[rng.choice(len(rest), size=needed, replace=False)]
    return np.concatenate([top, more])

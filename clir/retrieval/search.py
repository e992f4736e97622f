"""First-stage cross-lingual search over a collection: query translation (QT), probabilistic
structured queries (PSQ) or document translation (DT), each scored by a registered retriever."""

from __future__ import annotations

import hashlib
import json
import re
import warnings
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clir._version import __version__
from clir.errors import ConfigError, FormatError, TermlessQueriesWarning
from clir.formats import atomic_directory
from clir.progress import progress_bar
from clir.retrieval.base import QueryTerms, Retriever, get_retriever, is_real
from clir.retrieval.index import DocTerms, read_meta, write_json
from clir.retrieval.shards import ShardedIndex, ShardedRetriever
from clir.text import Analyzer, analyzer_from_config, get_analyzer
from clir.translation.document import translate_tokens_expected, translate_tokens_top1
from clir.translation.mt import MTTranslation
from clir.translation.query import translate_query_psq, translate_query_qt
from clir.translation.spelling import SpellingMatcher
from clir.translation.table import TranslationTable
from clir.types import Document, Query, Run

MODES = ("dt", "psq", "qt")
"""``qt``: the English query translated into the document language (top-k terms per word);
``psq``: each English word becomes a weighted set of translations; ``dt``: documents translated
word by word into English, the English query used as is."""

DT_VARIANTS = ("expected", "top1")


class DocumentsDigest:
    """A digest of a set of documents' docnos and texts, independent of their order: the sum,
    modulo 2**256, of each document's SHA-256 of ``docno \\0 text`` (docnos are distinct in an
    index). It is updated one document at a time, so a stream is digested as it is indexed, in
    constant memory; a collection whose documents are reordered keeps its digest, one whose
    text under a docno changed does not. A first stage records it (``documents_digest`` in
    ``first_stage.json``) so that an index of other texts under the same docnos can be refused.
    """

    def __init__(self, documents: Iterable[Document] = ()) -> None:
        self._sum = 0
        for document in documents:
            self.update(document)

    def update(self, document: Document) -> None:
        """Add one document."""
        digest = hashlib.sha256(f"{document.docno}\0{document.text}".encode()).digest()
        self._sum = (self._sum + int.from_bytes(digest, "big")) % (1 << 256)

    def hexdigest(self) -> str:
        """The digest as 64 hex digits."""
        return f"{self._sum:064x}"


def table_digest(table: TranslationTable) -> str:
    """SHA-256 of a translation table's vocabularies and probabilities (their values, whatever
    the arrays' integer and float types: a table saved and loaded again keeps its digest). A
    ``dt`` first stage records the digest of the table its documents were translated with
    (``table_doc_en_sha256`` in ``first_stage.json``), so that stages of other tables than a
    model's can be refused."""
    csr = table.probs
    if not csr.has_sorted_indices:
        csr = csr.sorted_indices()
    digest = hashlib.sha256(json.dumps([table.source_vocab, table.target_vocab]).encode())
    for array, dtype in ((csr.indptr, "<i8"), (csr.indices, "<i8"), (csr.data, "<f8")):
        digest.update(np.ascontiguousarray(array, dtype=dtype).tobytes())
    return digest.hexdigest()


def check_qids(queries: Iterable[Query]) -> list[Query]:
    """The queries as a list (a generator is read once, here), refusing one that repeats a qid.

    Returns:
        ``queries`` as a list: what a caller iterates again (a generator had been used up by
        this check, and the search that followed it found no query, silently).

    Raises:
        ConfigError: Naming the first repeated qid, or on ``queries`` that is a single query, a
            string or a mapping, or holds something other than :class:`~clir.types.Query` records.
    """
    if isinstance(queries, (Query, str, Mapping)):
        raise ConfigError(
            f"queries must be a sequence of Query records (e.g. collection.split('test'), or "
            f"[Query(qid, text)] for one), got a {type(queries).__name__}"
        )
    queries = list(queries)
    seen: set[str] = set()
    for query in queries:
        if not isinstance(query, Query):
            raise ConfigError(f"queries must be Query records, got {type(query).__name__} {query!r:.80}")
        if query.qid in seen:
            raise ConfigError(f"duplicate qid {query.qid!r}")
        seen.add(query.qid)
    return queries


class FirstStage:
    """Cross-lingual first-stage retrieval in one of the three modes of Zhang et al. (2019).

    Zhang et al. (2019). Improving Low-Resource Cross-lingual Document Retrieval by Reranking
    with Deep Bilingual Representations. ACL. Queries are English; documents are in the
    document language.

    Args:
        mode: ``"qt"``, ``"psq"`` or ``"dt"`` (see :data:`MODES`).
        model: Retriever name (``"ql"``, ``"bm25"``); ``**model_params`` go to its constructor.
        en_analyzer: English analyzer or its language code.
        doc_analyzer: Document-language analyzer or its language code.
        table_en_doc: p(document term | English term); needed by ``qt`` and ``psq``.
        table_doc_en: p(English term | document term); needed by ``dt`` when indexing.
        qt_k: Translations kept per query word in ``qt``.
        psq_top_k: Translations kept per query word in ``psq`` (``None``: all of the table's).
        psq_cumulative: In ``psq``, keep the smallest prefix of the ``psq_top_k`` best
            translations reaching this share of their mass.
        dt: ``"top1"`` (each word becomes its best translation) or ``"expected"`` (expected
            translation counts, a weighted bag).
        spelling: Replace each query term absent from the index by its closest spelling in the
            index vocabulary with at least this similarity (:class:`SpellingMatcher`: names the
            tables do not know); ``None``: off.
        progress: Show progress bars.
        mt: Machine translation in place of the tables (the ``mt`` translation mode): with a
            document model, ``dt`` indexes each document's analyzed English translation; with a
            query model, ``qt`` searches the query's analyzed translation; ``psq`` keeps the
            table's weighted translations. A stage with MT is not saved.
        **model_params: Retriever parameters (``k1``, ``b``, ``idf``, ``mu``).

    Raises:
        ConfigError: For an unknown mode, model or dt variant, a missing table, a table of the
            other direction (``table_en_doc`` translating the document language into the
            analyzers' English, or ``table_doc_en`` the reverse), or a spelling similarity
            outside (0, 1].
    """

    def __init__(
        self,
        mode: str = "qt",
        model: str = "ql",
        *,
        en_analyzer: Analyzer | str = "en",
        doc_analyzer: Analyzer | str,
        table_en_doc: TranslationTable | None = None,
        table_doc_en: TranslationTable | None = None,
        qt_k: int = 1,
        psq_top_k: int | None = None,
        psq_cumulative: float | None = None,
        dt: str = "top1",
        spelling: float | None = None,
        progress: bool = True,
        mt: MTTranslation | None = None,
        **model_params: Any,
    ) -> None:
        if mode not in MODES:
            raise ConfigError(f"unknown mode {mode!r}; expected one of {sorted(MODES)}")
        if dt not in DT_VARIANTS:
            raise ConfigError(f"unknown dt variant {dt!r}; expected one of {sorted(DT_VARIANTS)}")
        if mode in ("qt", "psq") and table_en_doc is None:
            raise ConfigError(f"mode {mode!r} needs table_en_doc (p(document term | English term))")
        if spelling is not None and not (is_real(spelling) and 0 < spelling <= 1):
            raise ConfigError(f"spelling must be a similarity in (0, 1] or None, got {spelling!r}")
        for name, value in (("qt_k", qt_k), ("psq_top_k", psq_top_k)):
            whole = isinstance(value, int | np.integer) and not isinstance(value, bool)
            if not (value is None and name == "psq_top_k") and (not whole or value < 1):
                raise ConfigError(f"{name} must be a whole number >= 1, got {value!r}")
        if psq_cumulative is not None and not (is_real(psq_cumulative) and 0 < psq_cumulative <= 1):
            raise ConfigError(f"psq_cumulative must be in (0, 1] or None, got {psq_cumulative!r}")
        self.mode = mode
        self.model = model
        self.retriever: Retriever | ShardedRetriever = get_retriever(model, **model_params)
        self.en_analyzer = get_analyzer(en_analyzer) if isinstance(en_analyzer, str) else en_analyzer
        self.doc_analyzer = get_analyzer(doc_analyzer) if isinstance(doc_analyzer, str) else doc_analyzer
        en, doc = getattr(self.en_analyzer, "lang", None), getattr(self.doc_analyzer, "lang", None)
        for name, table, source, target in (
            ("table_en_doc", table_en_doc, en, doc),
            ("table_doc_en", table_doc_en, doc, en),
        ):
            if (
                table is not None
                and source != target
                and (table.source_lang, table.target_lang) == (target, source)
            ):
                raise ConfigError(  # its translations had been looked up silently (e.g. swapped tables)
                    f"{name} translates {target}-{source}, the other direction: pass the "
                    f"{source}-{target} table"
                )
        self.table_en_doc = table_en_doc
        self.table_doc_en = table_doc_en
        self.qt_k = qt_k
        self.psq_top_k = psq_top_k
        self.psq_cumulative = psq_cumulative
        self.dt = dt
        self.spelling = spelling
        self.progress = progress
        self.mt = mt
        self.documents_digest: str | None = None
        """The indexed documents' :class:`DocumentsDigest` (``None``: not indexed, or saved
        before clir recorded it)."""
        self.table_doc_en_digest: str | None = None
        """In ``dt``, the :func:`table_digest` of the table a loaded stage's documents were
        translated with (``None``: not loaded, another mode, or saved before clir recorded it)."""
        self._matcher: SpellingMatcher | None = None

    @property
    def _mt_documents(self) -> bool:
        return self.mode == "dt" and self.mt is not None and self.mt.to_en is not None

    @property
    def _mt_queries(self) -> bool:
        return self.mode == "qt" and self.mt is not None and self.mt.from_en is not None

    # --- terms --------------------------------------------------------------------------------

    def document_terms(self, document: Document) -> DocTerms:
        """The index terms of a document in this mode (translated into English in ``dt``)."""
        if self._mt_documents:
            assert self.mt is not None
            return self.en_analyzer.analyze(self.mt.documents([document.text])[0])
        tokens = self.doc_analyzer.analyze(document.text)
        if self.mode != "dt":
            return tokens
        if self.table_doc_en is None:
            raise ConfigError("mode 'dt' needs table_doc_en (p(English term | document term)) to index")
        if self.dt == "expected":
            return translate_tokens_expected(tokens, self.table_doc_en)
        return translate_tokens_top1(tokens, self.table_doc_en)

    def query_terms(self, query: Query) -> QueryTerms:
        """The query's terms in the index language (translated in ``qt`` and ``psq``; terms
        outside the index matched by spelling when ``spelling`` is set)."""
        return self.queries_terms([query])[query.qid]

    def queries_terms(self, queries: Sequence[Query]) -> dict[str, QueryTerms]:
        """:meth:`query_terms` of each query, ``{qid: terms}``; the spelling matcher compares
        the unknown terms of all the queries at once."""
        translated = {query.qid: self._translated(query) for query in queries}
        matcher = self.matcher()
        if matcher is None:
            return translated
        if self.mode == "psq":
            sets: dict[str, Any] = translated
            matcher.match([term for query in sets.values() for weights in query for term in weights])
            return {qid: matcher.match_weighted(query) for qid, query in sets.items()}
        matcher.match([term for terms in translated.values() for term in terms])  # fills its cache
        return {qid: matcher.match(terms) for qid, terms in translated.items()}  # type: ignore[arg-type]

    def _translated(self, query: Query) -> QueryTerms:
        """The query's terms in the index language, before spelling matching."""
        tokens = self.en_analyzer.analyze(query.text)
        if self.mode == "psq":
            assert self.table_en_doc is not None
            return translate_query_psq(
                tokens, self.table_en_doc, top_k=self.psq_top_k, cumulative=self.psq_cumulative
            )
        if self._mt_queries:
            assert self.mt is not None
            return self.doc_analyzer.analyze(self.mt.queries([query.text])[0])
        if self.mode == "qt":
            assert self.table_en_doc is not None
            return translate_query_qt(tokens, self.table_en_doc, k=self.qt_k)
        return tokens

    def matcher(self) -> SpellingMatcher | None:
        """The spelling matcher over the index vocabulary (``None`` when ``spelling`` is off).

        Raises:
            ConfigError: Before :meth:`index`.
        """
        if self.spelling is None:
            return None
        if self._matcher is None:
            if self.retriever.index_ is None:
                raise ConfigError("the first stage has no index: call .index(documents) first")
            self._matcher = SpellingMatcher(self.retriever.index_.vocab, self.spelling)
        return self._matcher

    # --- index and search ---------------------------------------------------------------------

    def analyze(self, documents: Sequence[Document]) -> list[DocTerms]:
        """The index terms of each document (:meth:`document_terms`), in order."""
        if self._mt_documents:  # translated in batches, once
            assert self.mt is not None
            self.mt.documents([doc.text for doc in documents])
        bar = progress_bar(documents, desc=f"analyzing ({self.mode})", unit="doc", enabled=self.progress)
        return [self.document_terms(doc) for doc in bar]

    def index(self, documents: Sequence[Document], terms: Sequence[DocTerms] | None = None) -> FirstStage:
        """Analyze (and in ``dt`` translate) the documents and index them.

        Args:
            documents: The documents.
            terms: Their terms when already analyzed (e.g. by an engine's workers); default:
                :meth:`analyze`.

        Returns:
            ``self``.
        """
        terms = self.analyze(documents) if terms is None else terms
        retriever = get_retriever(self.model, **self.retriever.get_params())  # also after use_shards
        self.retriever = retriever.index([doc.docno for doc in documents], terms, progress=self.progress)
        self.documents_digest = DocumentsDigest(documents).hexdigest()
        self._matcher = None
        return self

    def index_shards(
        self,
        documents: Iterable[Document],
        path: str | Path,
        shard_docs: int = 100_000,
        *,
        force: bool = False,
    ) -> FirstStage:
        """Analyze (in ``dt`` translate) and index a stream of documents in shards, bounded memory,
        into a saved first stage that :meth:`load` reads.

        The documents are read once, ``shard_docs`` at a time (e.g. from
        :func:`clir.formats.iter_documents`) into ``path/shards``
        (:class:`~clir.retrieval.shards.ShardedIndex`); the settings and the query table are
        saved beside them, as :meth:`save` does. Searching gives the run an in-memory
        :meth:`index` of the same documents gives.

        Args:
            documents: The documents, in any number.
            path: The directory to write (atomically; replaced if it holds a saved first stage).
            shard_docs: Documents per shard.
            force: Replace a directory that is not a saved first stage (never a file).

        Returns:
            ``self``, searching the memory-mapped shards.
        """
        path = Path(path)
        digest = DocumentsDigest()

        def terms_of(document: Document) -> tuple[str, DocTerms]:
            digest.update(document)
            return document.docno, self.document_terms(document)

        terms = (terms_of(doc) for doc in documents)
        with atomic_directory(path, kind="first-stage", force=force) as tmp:
            ShardedIndex.build(tmp / "shards", terms, shard_docs=shard_docs, progress=self.progress)
            self._write_settings(tmp, index="shards", documents_digest=digest.hexdigest())
        self.use_shards(path / "shards")
        self.documents_digest = digest.hexdigest()
        return self

    def use_shards(
        self, index: ShardedIndex | str | Path, workers: int = 1, processes: int = 1
    ) -> FirstStage:
        """Search a sharded index (built by :meth:`index_shards`; a directory is memory-mapped).

        Args:
            index: The index or its directory.
            workers: Threads searching shards at once (:class:`ShardedRetriever`).
            processes: Processes searching batches of queries at once (:class:`ShardedRetriever`).

        Returns:
            ``self`` (its :attr:`documents_digest` unknown: the index's documents are not read).
        """
        index = index if isinstance(index, ShardedIndex) else ShardedIndex.load(index)
        params = self.retriever.get_params()
        retriever = ShardedRetriever(self.model, workers=workers, processes=processes, **params)
        self.retriever = retriever.use_index(index)
        self.documents_digest = None
        self._matcher = None
        return self

    def search(self, queries: Sequence[Query], k: int = 1000, pad: bool = False) -> Run:
        """Rank the collection for each query.

        With BM25 a query lists only the documents that match at least one of its terms (every
        other document scores 0, and padding the ranking with them in docno order would only
        inflate recall at depth); ``pad=True`` fills each ranking to ``k`` with them anyway.
        Query likelihood gives every document a score of its own (the Dirichlet background
        ranks non-matching documents by length), so its rankings always hold ``k`` documents (or
        the whole collection).
        A query with no term in the index (empty after analysis, e.g. only stopwords, or only
        words that neither the tables nor the collection know) lists nothing, with a warning.

        Args:
            queries: English queries (their ``text`` is searched).
            k: Depth of each ranking.
            pad: Fill BM25 rankings to ``k`` with non-matching documents (see above).

        Returns:
            The run ``{qid: {docno: score}}``; a query with no term in the index maps to ``{}``.

        Raises:
            ConfigError: On duplicate qids, ``queries`` that are no sequence of queries (see
                :func:`check_qids`), or before :meth:`index`.

        Warns:
            UserWarning: Counting the queries with no term in the index and naming a few qids,
                after the stage's name (``qt-bm25: 2 query(ies) ...``).
        """
        queries = check_qids(queries)
        if self._mt_queries:  # translated in batches, once
            assert self.mt is not None
            self.mt.queries([query.text for query in queries])
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            run = self.retriever.search(self.queries_terms(queries), k=k, progress=self.progress, pad=pad)
        for warning in caught:  # named by the stage: six stages had printed six alike
            where, message = f"{self.mode}-{self.model}", warning.message
            if isinstance(message, TermlessQueriesWarning):
                warnings.warn(TermlessQueriesWarning(message.names, where), stacklevel=2)
            else:
                warnings.warn(f"{where}: {message}", warning.category, stacklevel=2)
        return run

    def indexed_docnos(self) -> np.ndarray:
        """The docnos of the index, every shard's, sorted.

        Raises:
            ConfigError: Before :meth:`index`.
        """
        index = self.retriever.index_
        if index is None:
            raise ConfigError("index the documents first (FirstStage.index)")
        parts = (
            [shard.docnos for shard in index.shards] if isinstance(index, ShardedIndex) else [index.docnos]
        )
        return np.sort(np.concatenate([np.asarray(part) for part in parts]))

    def candidate_scores(
        self, queries: Sequence[Query], candidates: Sequence[Sequence[str]], chunk: int = 64
    ) -> list[np.ndarray]:
        """Each query's exact score of the given documents, retrieved or not (a reranker feature):
        the column of :meth:`Retriever.score` of each document (of its shard's retriever in a
        sharded index, whose scores are the single index's to the bit).

        Args:
            queries: English queries.
            candidates: Per query, the docnos to score.
            chunk: Queries scored at once (each holds one dense row of a shard's documents).

        Returns:
            One float64 array per query, in the order of its candidates.

        Raises:
            ConfigError: Before :meth:`index`, on duplicate qids (each query's terms are looked
                up by qid), ``candidates`` that are not one docno list per query, or for a docno
                that is not indexed.
        """
        queries = check_qids(queries)
        candidates = list(candidates)
        strings = sum(isinstance(docnos, str) for docnos in candidates)
        if len(candidates) != len(queries) or strings:
            raise ConfigError(
                f"candidates must be one list of docnos per query: got {len(candidates)} entries "
                f"({strings} of them a str) for {len(queries)} queries"
            )
        retriever = self.retriever
        parts = retriever.parts_ if isinstance(retriever, ShardedRetriever) else [retriever]
        if retriever.index_ is None or not parts:
            raise ConfigError("the first stage has no index: call .index(documents) first")
        terms = self.queries_terms(queries)
        out = [np.zeros(len(docnos)) for docnos in candidates]
        found = [np.zeros(len(docnos), dtype=bool) for docnos in candidates]
        for part in parts:
            shard_docnos = part._require_index().docnos
            places = []  # per query: (positions among its candidates, ids in this shard)
            for docnos in candidates:
                wanted = np.asarray(docnos, dtype=str)
                ids = np.minimum(np.searchsorted(shard_docnos, wanted), len(shard_docnos) - 1)
                hit = np.flatnonzero(shard_docnos[ids] == wanted)
                places.append((hit, ids[hit]))
            for start in range(0, len(queries), chunk):
                dense = part.score([terms[query.qid] for query in queries[start : start + chunk]])
                for row, qi in zip(dense, range(start, start + len(dense)), strict=True):
                    hit, ids = places[qi]
                    out[qi][hit] = row[ids]
                    found[qi][hit] = True
        for docnos, seen in zip(candidates, found, strict=True):
            if not seen.all():
                missing = [d for d, s in zip(docnos, seen, strict=True) if not s]
                raise ConfigError(
                    f"docno {missing[0]!r} is not in the index ({len(missing)} candidates are not)"
                )
        return out

    # --- persistence --------------------------------------------------------------------------

    def save(self, path: str | Path, *, force: bool = False) -> Path:
        """Save settings, analyzers' configs, the retriever and (qt/psq) the query table, atomically.

        Args:
            path: The directory to create, or to replace if it holds a saved first stage.
            force: Replace a directory that is not a saved first stage (never a file).

        Returns:
            The directory.

        Raises:
            OutputExistsError: If ``path`` holds something else (see :func:`atomic_directory`).
            ConfigError: For a stage with machine translation (its models are not saved).
        """
        if self.mt is not None:
            raise ConfigError(f"{path}: a first stage with machine translation (mt) is not saved")
        if isinstance(self.retriever, ShardedRetriever):
            raise ConfigError(
                "a sharded first stage is saved where index_shards() wrote it (FirstStage.load reads it)"
            )
        path = Path(path)
        with atomic_directory(path, kind="first-stage", force=force) as tmp:
            self.retriever.save(tmp / "retriever")
            self._write_settings(tmp, index="retriever", documents_digest=self.documents_digest)
        return path

    def _write_settings(self, directory: Path, index: str, documents_digest: str | None) -> None:
        """Write ``first_stage.json`` (``index``: ``"retriever"`` or ``"shards"``; the indexed
        documents' ``documents_digest`` when known) and the query table."""
        if self.table_en_doc is not None and self.mode != "dt":
            self.table_en_doc.save(directory / "table_en_doc")
        meta = {
            "type": "FirstStage",
            "clir_version": __version__,
            "mode": self.mode,
            "model": self.model,
            "model_params": self.retriever.get_params(),
            "index": index,
            "qt_k": self.qt_k,
            "psq_top_k": self.psq_top_k,
            "psq_cumulative": self.psq_cumulative,
            "dt": self.dt,
            "spelling": self.spelling,
            "en_analyzer": self.en_analyzer.to_config(),
            "doc_analyzer": self.doc_analyzer.to_config(),
        }
        if index == "shards":  # no saved retriever to contradict an edit of the model: a digest
            meta["model_sha256"] = _model_digest(self.model, meta["model_params"])
        if documents_digest is not None:
            meta["documents_digest"] = documents_digest
        if self.mode == "dt" and self.table_doc_en is not None:  # what the index was translated with
            meta["table_doc_en_sha256"] = table_digest(self.table_doc_en)
        write_json(directory / "first_stage.json", meta)

    @classmethod
    def load(
        cls,
        path: str | Path,
        mmap: bool = True,
        progress: bool = True,
        workers: int = 1,
        *,
        processes: int = 1,
        model: str | None = None,
        model_params: dict[str, Any] | None = None,
        verify: bool = False,
    ) -> FirstStage:
        """Load a first stage saved by :meth:`save` (or :meth:`index_shards`), ready to search.

        ``workers`` threads search the shards of a sharded one at once, ``processes`` processes
        batches of queries (:class:`~clir.retrieval.shards.ShardedRetriever`). With ``model``, the
        saved index is scored by that retriever instead (e.g. a BM25 stage's index as query
        likelihood: the index holds term frequencies, each model computes its weights from them
        when loaded), with ``model_params``. The index and the translation table are verified
        against their manifests (sizes, and SHA-256 of the smallest 64 MiB; of every file with
        ``verify``; see :meth:`~clir.retrieval.index.SparseIndex.load`).

        Raises:
            ConfigError: If ``workers`` or ``processes`` is not 1 for an index that is not sharded.
            DataNotFoundError: If a file is missing.
            FormatError: If the directory does not hold a FirstStage, or a file of its index or
                table is damaged (the message names it).
        """
        path = Path(path)
        description = path / "first_stage.json"
        keys = ("mode", "model", "model_params", "en_analyzer", "doc_analyzer", "qt_k", "psq_top_k")
        meta = read_meta(description, "FirstStage", (*keys, "psq_cumulative", "dt"))
        table = None
        if meta["mode"] != "dt":
            table = TranslationTable.load(path / "table_en_doc", mmap=mmap, verify=verify)
        elif (path / "table_en_doc").exists():  # a QT or PSQ stage's index: document-language terms
            raise FormatError(
                description, None, "mode is 'dt', but the stage holds a query translation table"
            )
        if meta.get("index", "retriever") not in ("retriever", "shards"):  # absent: saved before shards
            raise FormatError(
                description, None, f"index is {meta['index']!r}, expected 'retriever' or 'shards'"
            )
        saved_model = model is None
        if saved_model:
            model, model_params = meta["model"], meta["model_params"]
            if not isinstance(model_params, dict):
                raise FormatError(
                    description,
                    None,
                    f"model_params is {model_params!r}, expected an object of the retriever's parameters",
                )
        try:
            stage = cls(
                meta["mode"],
                model,
                en_analyzer=analyzer_from_config(meta["en_analyzer"]),
                doc_analyzer=analyzer_from_config(meta["doc_analyzer"]),
                table_en_doc=table,
                qt_k=meta["qt_k"],
                psq_top_k=meta["psq_top_k"],
                psq_cumulative=meta["psq_cumulative"],
                dt=meta["dt"],
                spelling=meta.get("spelling"),
                progress=progress,
                **(model_params or {}),
            )
        except (ConfigError, TypeError) as exc:
            if not saved_model:  # the caller's model and parameters
                raise
            raise FormatError(description, None, f"does not describe a first stage: {exc}") from None
        documents_digest = meta.get("documents_digest")  # absent: saved before 2026-12-07
        if documents_digest is not None and not (
            isinstance(documents_digest, str) and re.fullmatch("[0-9a-f]{64}", documents_digest)
        ):
            raise FormatError(
                description, None, f"documents_digest is {documents_digest!r}, not 64 hex digits"
            )
        table_sha256 = meta.get("table_doc_en_sha256")  # absent: saved before 2026-12-07, or not dt
        if table_sha256 is not None and not (
            isinstance(table_sha256, str) and re.fullmatch("[0-9a-f]{64}", table_sha256)
        ):
            raise FormatError(
                description, None, f"table_doc_en_sha256 is {table_sha256!r}, not 64 hex digits"
            )
        stage.table_doc_en_digest = table_sha256
        if meta.get("index") == "shards":
            digest = meta.get("model_sha256")  # absent: saved before 2026-12-06
            if saved_model and digest is not None and digest != _model_digest(model, model_params):
                raise FormatError(
                    description,
                    None,
                    f"model {model!r} with {model_params} is not the one it was saved with "
                    "(model_sha256 differs): a sharded index keeps no retriever, so the edit would "
                    "change every score; index again, or give FirstStage.load another model",
                )
            index = ShardedIndex.load(path / "shards", mmap=mmap, verify=verify)
            stage.use_shards(index, workers=workers, processes=processes)
            stage.documents_digest = documents_digest
            return stage
        for name, value in (("processes", processes), ("workers", workers)):
            if value != 1:  # they had been ignored
                raise ConfigError(
                    f"{name}={value!r} has no effect with the index {path}: it is not sharded, and "
                    "only a sharded index (FirstStage.index_shards, 'clir index --shard-docs') is "
                    "searched by several processes or threads; pass 1"
                )
        saved = Retriever.load(path / "retriever", mmap=mmap, verify=verify)
        described = stage.retriever
        if saved_model and (
            type(saved) is not type(described) or saved.get_params() != described.get_params()
        ):
            raise FormatError(
                description,
                None,
                f"model {meta['model']!r} with {described.get_params()} differs from the saved "
                f"retriever's ({type(saved).__name__} with {saved.get_params()})",
            )
        stage.retriever = saved if saved_model else described.use_index(saved._require_index())
        stage.documents_digest = documents_digest
        return stage


def _model_digest(model: str, params: dict[str, Any] | None) -> str:
    """SHA-256 of a first stage's model and parameters as ``first_stage.json`` writes them."""
    return hashlib.sha256(json.dumps([model, params or {}], sort_keys=True).encode()).hexdigest()

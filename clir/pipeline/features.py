"""From a collection to the reranker's data: tokens, translations, idf and features; and the
train / rerank entry points the CLI and the experiment call.

What one :class:`~clir.training.data.RerankQuery` holds, and where it comes from:

* ``query_en`` — the English query analyzed (``clir.text``, English stems, no stopwords);
* ``query_src`` — its QT translation into the document language (top-``qt_k`` translations
  per word from the en->doc IBM Model 1 table; unknown words pass through); with ``spelling``,
  a term of either that is not in the documents' (resp. translations') vocabulary is replaced
  by its closest spelling there (names: "anathoth" -> "anathothi");
* ``idf_en`` / ``idf_src`` — each term's idf over the document translations / the documents,
  ``log(1 + (N - df + 0.5) / (df + 0.5))`` (Lucene's BM25 idf: always positive);
* ``docnos`` / ``scores`` — the top ``depth`` of the candidate first-stage run (e.g.
  ``psq-ql``), best first, with that run's raw scores; with several first stages
  (``data.first_stage: [qt-bm25, psq-bm25, dt-bm25]``), the union of their top ``depth`` lists
  in reciprocal-rank-fusion order, with the fused scores (:func:`fuse_runs`);
* ``features`` — one column per name of ``feature_names``:

  - ``"<mode>-<model>"`` (e.g. ``"qt-ql"``, ``"psq-ql"``, ``"dt-ql"``): the candidate's score by
    that first stage (computed exactly for every candidate, retrieved or not), normalised per
    query over the candidate list (z-score by default, see
    :func:`~clir.training.data.normalise_scores`), because QL log-probabilities are not
    comparable across queries;
  - ``"overlap_src"`` / ``"overlap_en"``: the fraction of distinct query terms (Q̂_src resp.
    Q_en) found in the document (D_src resp. D̂_en);
  - ``"overlap_src_idf"`` / ``"overlap_en_idf"``: the same fraction weighted by idf (as
    POSIT-DRMM's overlap features);
  - ``"window<w>_src"`` / ``"window<w>_en"`` (e.g. ``"window10_src"``): proximity, the largest
    idf-weighted fraction of distinct query terms found together within ``w`` consecutive
    document tokens (:func:`window_coverage`). A passage holds several verses and a query's
    terms tend to meet in one of them, which the bag-of-words scores cannot see.

Documents are analyzed in their language (``D_src``) and translated word by word into English
with the doc->en table's most probable translation (``D̂_en``, DT top-1).
"""

from __future__ import annotations

import hashlib
import json
import math
import re
import warnings
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError
from clir.evaluation import CoverageWarning, evaluate
from clir.formats import RunArrays, atomic_write, ranked
from clir.formats.atomic import output_directory
from clir.pipeline.baselines import BaselineConfig, first_stage
from clir.pipeline.cache import StepRunner
from clir.pipeline.engine import Engine
from clir.pipeline.parallel import LOCAL, pair_scorer, search_stage
from clir.pipeline.tables import learn_tables
from clir.pipeline.trained_with import model_baseline, record_first_stage
from clir.progress import progress_bar
from clir.rerankers.bilingual import COMPONENTS
from clir.retrieval import FirstStage, get_retriever
from clir.retrieval.search import DocumentsDigest, check_qids, table_digest
from clir.text import Analyzer, get_analyzer
from clir.training import (
    DataConfig,
    RerankData,
    RerankQuery,
    ScoringOptions,
    TrainConfig,
    load_models,
    normalise_scores,
    rerank,
    rerank_parts,
    train_ensemble,
)
from clir.training.cv import check_member_dirs
from clir.training.ensemble import check_depth
from clir.translation import SpellingMatcher, TranslationTable, translate_query_qt, translate_tokens_top1
from clir.translation.mt import MTTranslation
from clir.types import Document, Qrels, Query, Run

OVERLAP_FEATURES: tuple[str, ...] = ("overlap_src", "overlap_src_idf", "overlap_en", "overlap_en_idf")
PROXIMITY_FEATURES: tuple[str, ...] = ("window10_src", "window10_en", "window20_src", "window20_en")
DEFAULT_FEATURES: tuple[str, ...] = (
    "qt-ql", "psq-ql", "dt-ql", "qt-bm25", "psq-bm25", "dt-bm25", *OVERLAP_FEATURES, *PROXIMITY_FEATURES,
)  # fmt: skip
"""The default feature columns: QL and BM25 scores of the three first stages, the overlaps, then
proximity. (The paper uses QL only; on the Bible collections BM25 is the stronger first stage and
adding its scores raised the lexical fusion's dev MAP from 0.34 to 0.38; the proximity columns
raised the cross-validated MAP of the full model on en-sw train+dev from 0.370 to 0.386.)"""

_WINDOW = re.compile(r"window([1-9][0-9]*)_(src|en)")


def is_text_feature(name: str) -> bool:
    """Whether a feature column is computed from the tokens (overlap, proximity) rather than
    read from a first stage of the same name."""
    return name in OVERLAP_FEATURES or _WINDOW.fullmatch(name) is not None


def stage_features(names: Sequence[str]) -> list[str]:
    """The feature columns among ``names`` that are first-stage scores."""
    return [n for n in names if not is_text_feature(n)]


def map_metric(run: Run, qrels: Qrels) -> float:
    """MAP of a run (``clir.evaluation``), the trainer's default early-stopping metric.

    A dev query with no candidate (its first stage retrieved nothing) counts 0, silently: the
    first stage has warned about it already.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", CoverageWarning)
        return float(evaluate(run, qrels, ["AP"])["AP"])


def bm25_idf(df: int, n_docs: int) -> float:
    """Lucene's BM25 idf ``log(1 + (N - df + 0.5) / (df + 0.5))`` (positive for every df)."""
    return math.log(1.0 + (n_docs - df + 0.5) / (df + 0.5))


@dataclass
class DocumentTokens:
    """Documents analyzed in their language and translated into English (every document of the
    collection, or only some: a run's candidates), with the whole collection's document
    frequencies on both sides.

    Attributes:
        src: ``docno -> analyzed tokens`` (D_src) of the documents held.
        en: ``docno -> English top-1 translation tokens`` (D̂_en) of the documents held.
        df_src: Document frequency of each document-language term in the collection.
        df_en: Document frequency of each English term over the collection's translations.
        n_docs: Number of documents in the collection (the idf's N).
    """

    src: dict[str, list[str]]
    en: dict[str, list[str]]
    df_src: Mapping[str, int]
    df_en: Mapping[str, int]
    n_docs: int
    _matchers: dict[tuple[str, float], SpellingMatcher] = field(default_factory=dict, repr=False)

    @classmethod
    def build(
        cls,
        documents: Sequence[Document],
        doc_analyzer: Analyzer,
        table_doc_en: TranslationTable,
        progress: bool = True,
        mt: MTTranslation | None = None,
        engine: Engine = LOCAL,
    ) -> DocumentTokens:
        """Analyze and translate the documents.

        Args:
            documents: The collection's documents.
            doc_analyzer: The document language's analyzer.
            table_doc_en: p(English term | document term).
            progress: Show a progress bar.
            mt: Machine translation: with a document model, D-hat_en is the English analysis
                of each document's translation instead of the table's word-by-word top-1.
            engine: Where the documents are analyzed and translated.
        """
        tokens = cls({}, {}, Counter(), Counter(), len(documents))
        tokens.add(documents, doc_analyzer, table_doc_en, progress, mt, engine)
        df_src: Counter[str] = Counter()
        df_en: Counter[str] = Counter()
        for doc in documents:
            df_src.update(set(tokens.src[doc.docno]))
            df_en.update(set(tokens.en[doc.docno]))
        tokens.df_src, tokens.df_en = df_src, df_en
        return tokens

    @classmethod
    def statistics(
        cls,
        documents: Sequence[Document],
        doc_analyzer: Analyzer,
        table_doc_en: TranslationTable,
        progress: bool = True,
        mt: MTTranslation | None = None,
        engine: Engine = LOCAL,
        chunk: int = 10_000,
    ) -> DocumentTokens:
        """The collection's document frequencies and size, with no document held: :meth:`build`
        of ``chunk`` documents at a time, keeping only the counts (arguments as for :meth:`build`)."""
        df_src: Counter[str] = Counter()
        df_en: Counter[str] = Counter()
        starts = range(0, len(documents), chunk)
        for start in progress_bar(starts, desc="document frequencies", unit="chunk", enabled=progress):
            part = cls.build(documents[start : start + chunk], doc_analyzer, table_doc_en, False, mt, engine)
            df_src.update(part.df_src)
            df_en.update(part.df_en)
        return cls({}, {}, df_src, df_en, len(documents))

    def add(
        self,
        documents: Sequence[Document],
        doc_analyzer: Analyzer,
        table_doc_en: TranslationTable,
        progress: bool = True,
        mt: MTTranslation | None = None,
        engine: Engine = LOCAL,
    ) -> None:
        """Analyze and translate more of the collection's documents into :attr:`src` and
        :attr:`en` (the statistics stay the collection's; arguments as for :meth:`build`)."""
        parts = engine.map(_tokens, documents, shared=(doc_analyzer, table_doc_en, progress))
        by_mt = {}
        if mt is not None and mt.to_en is not None:
            english = get_analyzer(mt.to_en.target_lang)
            texts = mt.documents([doc.text for doc in documents])
            by_mt = {doc.docno: english.analyze(text) for doc, text in zip(documents, texts, strict=True)}
        for doc, (tokens, translated) in zip(
            documents, (pair for part in parts for pair in part), strict=True
        ):
            self.src[doc.docno], self.en[doc.docno] = tokens, by_mt.get(doc.docno, translated)

    def matcher(self, side: str, threshold: float) -> SpellingMatcher:
        """A spelling matcher over the document (``side="src"``) or translation (``"en"``)
        vocabulary, built once per side and threshold."""
        key = (side, threshold)
        if key not in self._matchers:
            self._matchers[key] = SpellingMatcher(self.df_src if side == "src" else self.df_en, threshold)
        return self._matchers[key]

    def idf(self, tokens: Sequence[str], side: str) -> list[float]:
        """idf of each token over the documents (``side="src"``) or their translations (``"en"``)."""
        df = self.df_src if side == "src" else self.df_en
        return [bm25_idf(df.get(t, 0), self.n_docs) for t in tokens]


def _tokens(
    shared: tuple[Analyzer, TranslationTable, bool], documents: Sequence[Document]
) -> list[tuple[list[str], list[str]]]:
    """Each document's analyzed tokens and their top-1 English translation."""
    analyzer, table, progress = shared
    out = []
    for doc in progress_bar(documents, desc="analyzing documents", unit="doc", enabled=progress):
        tokens = analyzer.analyze(doc.text)
        out.append((tokens, translate_tokens_top1(tokens, table)))
    return out


def _overlap(query: Sequence[str], idf: Sequence[float], doc: set[str]) -> tuple[float, float]:
    """(fraction of distinct query terms in ``doc``, idf-weighted fraction)."""
    weights = dict(zip(query, idf, strict=True))
    if not weights:
        return 0.0, 0.0
    hit = [t for t in weights if t in doc]
    total = sum(weights.values())
    return len(hit) / len(weights), (sum(weights[t] for t in hit) / total if total > 0 else 0.0)


def window_coverage(query: Sequence[str], idf: Sequence[float], doc: Sequence[str], width: int) -> float:
    """The largest idf-weighted fraction of the distinct query terms that occur together within
    ``width`` consecutive tokens of ``doc`` (one pass over the document's matching positions).

    Args:
        query: Query terms (repeats count once).
        idf: Each query term's weight.
        doc: Document tokens, in order.
        width: Window length in tokens.

    Returns:
        A value in [0, 1]; 0 for an empty query or one of zero total weight.
    """
    weights = dict(zip(query, idf, strict=True))
    total = sum(weights.values())
    if total <= 0:
        return 0.0
    hits = [(i, t) for i, t in enumerate(doc) if t in weights]
    counts: Counter[str] = Counter()
    best = inside = 0.0
    first = 0
    for position, term in hits:
        counts[term] += 1
        inside += weights[term] if counts[term] == 1 else 0.0
        while hits[first][0] <= position - width:
            left = hits[first][1]
            counts[left] -= 1
            inside -= weights[left] if counts[left] == 0 else 0.0
            first += 1
        best = max(best, inside)
    return best / total


def _top(run: Mapping[str, float], depth: int | None) -> list[tuple[str, float]]:
    return ranked(run)[:depth]


RRF_K = 60
"""The rank offset of reciprocal-rank fusion (Cormack et al.'s k)."""


def fuse_runs(runs: Sequence[Run], depth: int | None = None, k: int = RRF_K) -> Run:
    """The candidates several first-stage runs give together: reciprocal-rank fusion of their
    top ``depth`` lists (Cormack, Clarke & Büttcher, SIGIR 2009).

    A document's fused score is ``Σ 1 / (k + rank)`` over the runs that rank it among their top
    ``depth`` (ranks from 1, in trec_eval order, :func:`clir.formats.ranked`), so a query's fused
    documents are exactly the union of those lists; rank them with ``ranked`` too (ties: docno
    descending). One run is its own fusion: its top ``depth`` with its own scores.

    Args:
        runs: First-stage runs ``{qid: {docno: score}}``.
        depth: Documents taken from each run per query (``None``: all).
        k: The rank offset.

    Returns:
        The fused run (every qid of any run).
    """
    if len(runs) == 1:
        return {qid: dict(_top(docs, depth)) for qid, docs in runs[0].items()}
    fused: Run = {}
    for run in runs:
        for qid, docs in run.items():
            scores = fused.setdefault(qid, {})
            for rank, (docno, _) in enumerate(_top(docs, depth), start=1):
                scores[docno] = scores.get(docno, 0.0) + 1.0 / (k + rank)
    return fused


def search_candidates(
    stages: Mapping[str, FirstStage],
    names: Sequence[str],
    queries: Sequence[Query],
    depth: int,
    engine: Engine = LOCAL,
) -> Run:
    """Each named first stage searched to ``depth`` (on ``engine``), fused (:func:`fuse_runs`).

    Raises:
        ConfigError: On a name that is not among ``stages``.
    """
    unknown = [name for name in names if name not in stages]
    if unknown:
        raise ConfigError(f"candidate runs {unknown} are not among the indexed stages {sorted(stages)}")
    return fuse_runs([search_stage(stages[name], queries, engine, k=depth) for name in names], depth)


def build_rerank_data(
    queries: Sequence[Query],
    candidates: Run,
    *,
    documents: DocumentTokens,
    table_en_doc: TranslationTable,
    doc_lang: str,
    stages: Mapping[str, FirstStage] | None = None,
    features: Sequence[str] = DEFAULT_FEATURES,
    depth: int = 100,
    feature_norm: str = "zscore",
    qt_k: int = 1,
    spelling: float | None = None,
    en_analyzer: Analyzer | None = None,
    meta: Mapping[str, Any] | None = None,
    progress: bool = True,
    mt: MTTranslation | None = None,
) -> RerankData:
    """The reranker's data for some queries (see the module docstring for every field).

    Args:
        queries: English queries.
        candidates: The first-stage run whose top ``depth`` documents are reranked.
        documents: The collection's documents, analyzed and translated.
        table_en_doc: p(document term | English term), for the QT query translation.
        doc_lang: The document language.
        stages: Indexed first stages by name (``"<mode>-<model>"``), for the score features.
        features: Feature columns, in order (names of ``stages``, overlap and proximity features).
        depth: Candidates per query.
        feature_norm: Per-query normalisation of the first-stage scores.
        qt_k: Translations per query word in ``query_src``.
        spelling: Replace query terms outside the documents' (``query_src``) or translations'
            (``query_en``) vocabulary by their closest spelling there, at this least similarity
            (:class:`~clir.translation.SpellingMatcher`); ``None``: off.
        en_analyzer: The English analyzer (default ``get_analyzer("en")``).
        meta: Stored in the data's ``meta``.
        progress: Show a progress bar.
        mt: Machine translation: with a query model, ``query_src`` (Q-hat) is the document
            language's analysis of each query's translation instead of the table's QT.

    Returns:
        The :class:`~clir.training.data.RerankData`; a query absent from ``candidates`` gets no
        candidates.

    Raises:
        ConfigError: On a feature name that is neither an overlap nor a given stage, a
            candidate docno that is not a document, or duplicate qids.
    """
    queries = check_qids(queries)  # a repeated qid's candidates and score features would be another query's
    stages = dict(stages or {})
    unknown = [f for f in stage_features(features) if f not in stages]
    if unknown:
        raise ConfigError(
            f"features {unknown} are neither overlap features {list(OVERLAP_FEATURES)}, proximity "
            f"features 'window<w>_src|en' nor first stages given ({sorted(stages)})"
        )
    en_analyzer = en_analyzer or get_analyzer("en")
    tops = [_top(candidates.get(q.qid, {}), depth) for q in queries]
    docnos = [[d for d, _ in top] for top in tops]
    missing = sorted({d for ds in docnos for d in ds if d not in documents.src})
    if missing:
        raise ConfigError(f"candidates {missing[:5]} (of {len(missing)}) are not documents of the collection")
    columns: dict[str, list[np.ndarray]] = {}
    for name in features:
        if name in stages:
            raw = stages[name].candidate_scores(queries, docnos)
            columns[name] = [normalise_scores(r, feature_norm) for r in raw]
    by_mt = {}
    if mt is not None and mt.from_en is not None:
        by_mt = dict(zip([q.qid for q in queries], mt.queries([q.text for q in queries]), strict=True))
    out = []
    for qi, query in enumerate(progress_bar(queries, desc="rerank data", unit="query", enabled=progress)):
        q_en = en_analyzer.analyze(query.text)
        if by_mt:
            q_src = get_analyzer(doc_lang).analyze(by_mt[query.qid])
        else:
            q_src = translate_query_qt(q_en, table_en_doc, k=qt_k)
        if spelling is not None:
            q_en = documents.matcher("en", spelling).match(q_en)
            q_src = documents.matcher("src", spelling).match(q_src)
        idf_en, idf_src = documents.idf(q_en, "en"), documents.idf(q_src, "src")
        rows = np.zeros((len(docnos[qi]), len(features)), dtype=np.float32)
        sides = {"src": (q_src, idf_src, documents.src), "en": (q_en, idf_en, documents.en)}
        for j, docno in enumerate(docnos[qi]):
            for k, name in enumerate(features):
                if name in columns:
                    rows[j, k] = columns[name][qi][j]
                elif window := _WINDOW.fullmatch(name):
                    query_terms, idf, docs = sides[window[2]]
                    rows[j, k] = window_coverage(query_terms, idf, docs[docno], int(window[1]))
                else:
                    _, side, *weighted = name.split("_")
                    query_terms, idf, docs = sides[side]
                    rows[j, k] = _overlap(query_terms, idf, set(docs[docno]))[1 if weighted else 0]
        scores = np.asarray([s for _, s in tops[qi]], dtype=np.float64)
        out.append(RerankQuery(query.qid, q_en, q_src, idf_en, idf_src, docnos[qi], scores, rows))
    used = {d for ds in docnos for d in ds}
    return RerankData(
        doc_lang,
        out,
        {d: documents.src[d] for d in used},
        {d: documents.en[d] for d in used},
        list(features),
        meta={
            "depth": depth,
            "feature_norm": feature_norm,
            "qt_k": qt_k,
            "spelling": spelling,
            **(meta or {}),
        },
    )


def _stage_name(name: str) -> tuple[str, str]:
    mode, sep, model = name.partition("-")
    if not sep:
        raise ConfigError(f"first stage name {name!r} must be '<mode>-<model>', e.g. 'psq-ql'")
    return mode, model


def collection_statistics(
    collection: Collection,
    stages: Mapping[str, Any],
    table_doc_en: TranslationTable,
    progress: bool = True,
    mt: MTTranslation | None = None,
    engine: Engine = LOCAL,
) -> DocumentTokens:
    """The collection's document frequencies and size (a :class:`DocumentTokens` holding no
    document), for features built for the candidates only.

    The document side's df is the index's of a QT or PSQ stage (its terms are the analyzed
    documents), the English side's that of a DT top-1 stage (the documents' top-1 translation by
    ``table_doc_en``): the same counts :meth:`DocumentTokens.build` makes, read from the index.
    Without such stages (or with machine translation) every document is analyzed once, streamed
    (:meth:`DocumentTokens.statistics`).
    """
    analyzer = get_analyzer(collection.doc_lang)

    def index_df(modes: tuple[str, ...]) -> tuple[dict[str, int], int] | None:
        for stage in stages.values():
            if (
                isinstance(stage, FirstStage)
                and stage.mode in modes
                and stage.mt is None
                and (stage.mode != "dt" or stage.dt == "top1")
                and stage.doc_analyzer.to_config() == analyzer.to_config()
                and (stage.table_doc_en is None or stage.table_doc_en is table_doc_en)
                and stage.retriever.index_ is not None
            ):
                index = stage.retriever.index_
                df = zip(index.vocab, np.asarray(index.df), strict=True)
                return {term: int(count) for term, count in df if count}, index.n_docs
        return None

    src, en = index_df(("qt", "psq")), index_df(("dt",))
    if src is None or en is None or (mt is not None and mt.to_en is not None):
        return DocumentTokens.statistics(collection.documents, analyzer, table_doc_en, progress, mt, engine)
    return DocumentTokens({}, {}, src[0], en[0], src[1])


def load_stages(
    path: str | Path,
    names: Sequence[str],
    baseline: BaselineConfig | None = None,
    progress: bool = True,
    collection: Collection | None = None,
    tables: tuple[TranslationTable, TranslationTable] | None = None,
) -> dict[str, FirstStage]:
    """Saved first stages (memory-mapped) for the named ``"<mode>-<model>"`` stages, from
    ``path/<name>`` (``clir index --out``, ``experiments/bench_scale.py``'s work directory), or
    else from a saved stage of the same mode whose index ``model`` scores (with the baseline's
    ``model_params``; the weights are computed from its term frequencies at load).

    With ``collection``, each stage must index that collection's documents: its document
    language and exactly its docnos (:func:`check_stage_documents`). Each stage must have been
    indexed with the baseline's settings (:func:`check_stage_settings`) and, with ``tables``,
    with those ``(en->doc, doc->en)`` tables (:func:`check_stage_tables`).

    Raises:
        ConfigError: For a name with neither, a stage of other documents than ``collection``'s,
            one of other settings than ``baseline``'s, or one of other tables than ``tables``.
    """
    path = Path(path)
    if not path.is_dir():
        raise ConfigError(f"stages directory {path} is not a directory (expected <mode>-<model>/ stages)")
    baseline = baseline or BaselineConfig()
    stages = {}
    docnos = None if collection is None else np.sort(np.asarray([d.docno for d in collection.documents]))
    digest = None  # the collection's DocumentsDigest, read once when a stage records its own
    digests: dict[int, str] = {}  # the tables' digests, each computed once
    for name in dict.fromkeys(names):
        mode, model = _stage_name(name)
        if (path / name / "first_stage.json").is_file():
            stages[name] = FirstStage.load(path / name, progress=progress)
            saved = path / name
        else:
            same_mode = sorted(p for p in path.glob(f"{mode}-*") if (p / "first_stage.json").is_file())
            if not same_mode:
                found = sorted(p.name for p in path.glob("*-*") if (p / "first_stage.json").is_file())
                raise ConfigError(
                    f"stages directory {path}: no saved first stage {name!r} nor another of mode "
                    f"{mode!r} ({mode}-<model>/first_stage.json); it holds {found}"
                )
            params = baseline.model_params.get(model, {})
            saved = same_mode[0]
            stages[name] = FirstStage.load(saved, progress=progress, model=model, model_params=params)
        check_stage_settings(stages[name], baseline, f"--stages {saved}")
        if tables is not None:
            check_stage_tables(stages[name], tables, f"--stages {saved}", digests)
        if collection is not None and docnos is not None:  # (docnos: the collection's, sorted)
            if digest is None and stages[name].documents_digest is not None:
                digest = DocumentsDigest(collection.documents).hexdigest()
            check_stage_documents(stages[name], collection, docnos, f"--stages {saved}", digest)
    return stages


def check_stage_settings(stage: FirstStage, baseline: BaselineConfig, where: str) -> None:
    """Refuse a saved first stage indexed with other settings than ``baseline``'s (a model's
    :func:`~clir.pipeline.trained_with.model_baseline`): its retriever's parameters, spelling
    matching and, in ``psq``, translation pruning. Its scores, and the features a model
    computes from them, would be other than those the model was trained on (a stage indexed
    with ``clir index --k1 0.3`` had reranked to other numbers, silently).

    Args:
        stage: The loaded first stage.
        baseline: The settings it must have.
        where: Names the stage in the error (e.g. ``"--stages DIR"``).

    Raises:
        ConfigError: Naming ``where`` and each setting that differs, with both values.
    """
    expected: dict[str, Any] = {
        "model_params": get_retriever(stage.model, **baseline.model_params.get(stage.model, {})).get_params(),
        "spelling": baseline.spelling,
    }
    found: dict[str, Any] = {"model_params": stage.retriever.get_params(), "spelling": stage.spelling}
    if stage.mode == "psq":
        expected |= {"psq_top_k": baseline.psq_top_k, "psq_cumulative": baseline.psq_cumulative}
        found |= {"psq_top_k": stage.psq_top_k, "psq_cumulative": stage.psq_cumulative}
    differ = [
        f"{key} {found[key]!r} (expected {expected[key]!r})"
        for key in expected
        if found[key] != expected[key]
    ]
    if differ:
        raise ConfigError(
            f"{where} was indexed with other first-stage settings than the model's: {'; '.join(differ)}; "
            "index it with the settings the model was trained with (clir index --k1, --b, --mu, "
            "--spelling, --psq-top-k, --psq-cumulative)"
        )


def check_stage_tables(
    stage: FirstStage,
    tables: tuple[TranslationTable, TranslationTable],
    where: str,
    digests: dict[int, str] | None = None,
) -> None:
    """Refuse a saved first stage indexed with other translation tables than ``tables``: a
    ``qt`` or ``psq`` stage translates queries with the en->doc table it saved, a ``dt`` stage's
    index holds documents translated with a doc->en table (whose digest it records; one saved
    before 2026-12-07 does not, and is not compared). Its scores and candidates would be those
    of the other tables, the features the reranker computes those of ``tables``: a mix that
    neither gives (``clir rerank --stages`` after ``clir tables --iterations 2``, silently).

    Args:
        stage: The loaded first stage.
        tables: The ``(en->doc, doc->en)`` tables it must have been indexed with.
        where: Names the stage in the error (e.g. ``"--stages DIR"``).
        digests: Digests of ``tables`` by position, filled as computed (shared between stages).

    Raises:
        ConfigError: Naming ``where`` and the table that differs.
    """
    digests = {} if digests is None else digests

    def given(position: int) -> str:
        if position not in digests:
            digests[position] = table_digest(tables[position])
        return digests[position]

    if stage.mode == "dt":
        found, position = stage.table_doc_en_digest, 1
        direction = "doc->en table its documents were translated with"
    else:
        table = stage.table_en_doc
        found, position = (None if table is None else table_digest(table)), 0
        direction = "en->doc table it translates queries with"
    if found is None or found == given(position):
        return
    raise ConfigError(
        f"{where} was indexed with other translation tables than the ones given: the "
        f"{direction} differs from --tables'; its scores would be the other tables', the "
        "reranker's features these tables'; index it with these tables (clir index --tables) or "
        "give the tables it was indexed with"
    )


def check_stage_documents(
    stage: FirstStage, collection: Collection, docnos: np.ndarray, where: str, digest: str | None = None
) -> None:
    """Refuse a first stage that does not index ``collection``'s documents: another document
    language, other docnos (``docnos``: the collection's, sorted), or other texts under the
    same docnos (when the stage records its documents' digest: an index saved before
    2026-12-07 does not, and its texts are not compared). Its scores and document frequencies
    would be another collection's.

    Args:
        stage: The first stage.
        collection: The collection it should index.
        docnos: The collection's docnos, sorted.
        where: Names the stage in the error (e.g. ``"--stages DIR"``).
        digest: The collection's :class:`~clir.retrieval.search.DocumentsDigest` when already
            computed (default: computed here, one pass over its texts, when the stage records
            its own).

    Raises:
        ConfigError: Naming ``where``, the counts and an example docno, or the differing texts.
    """
    lang = getattr(stage.doc_analyzer, "lang", None)
    if lang is not None and lang != collection.doc_lang:
        raise ConfigError(
            f"{where} indexes {lang!r} documents, collection {collection.name!r} is in "
            f"{collection.doc_lang!r}: index this collection ('clir index') or give its stages"
        )
    indexed = stage.indexed_docnos()
    if len(indexed) == len(docnos) and np.array_equal(indexed, docnos):
        if stage.documents_digest is None:  # saved before the digest: the texts are not compared
            return
        digest = digest or DocumentsDigest(collection.documents).hexdigest()
        if digest != stage.documents_digest:
            raise ConfigError(
                f"{where} indexes other texts than collection {collection.name!r} under the same "
                f"{len(docnos)} docnos (its documents' digest differs: were the documents edited "
                "after it was indexed?); index this collection ('clir index --collection') or "
                "give its stages"
            )
        return
    only_index = np.setdiff1d(indexed, docnos)
    only_collection = np.setdiff1d(docnos, indexed)
    example = (
        f"{str(only_index[0])!r} is indexed but not in the collection"
        if len(only_index)
        else f"{str(only_collection[0])!r} of the collection is not indexed"
    )
    raise ConfigError(
        f"{where} indexes other documents than collection {collection.name!r}: {len(indexed)} "
        f"documents, the collection {len(docnos)} ({example}); index this collection "
        "('clir index --collection') or give its stages"
    )


def _check_english_queries(collection: Collection) -> None:
    """Refuse a collection whose queries are not English: the reranker's data reads every query
    with the English analyzer and compares it with the documents' English translation (Q_en,
    D̂_en) in a space whose pivot is English, so other queries had trained and reranked on
    features that were silently empty.

    Raises:
        ConfigError: Naming the collection and its query language.
    """
    if collection.query_lang != "en":
        raise ConfigError(
            f"collection {collection.name!r} has queries in {collection.query_lang!r}: the reranker "
            "reads queries as English (its analyzer, the Q_en and D̂_en components and the space's "
            "pivot); the first stages (clir retrieve, clir evaluate) take queries in any language"
        )


def check_aligned_space(
    space: SharedSpace, components: Sequence[str], source: SharedSpace | str | Path
) -> None:
    """Refuse a space of monolingual vectors (``clir embed train --monolingual``, never aligned
    by ``clir embed align``) for a model whose components compare words of two languages in it
    (``en_src``, ``src_en``): each language's vectors had been trained alone, so the cosines
    between them, and every feature of those components, were noise, silently (the experiment
    refuses ``embeddings.joint: false`` for such systems).

    Args:
        space: The loaded space.
        components: The model's ``model.components``.
        source: The space as given (its directory is named in the error).

    Raises:
        ConfigError: Naming the space and the components.
    """
    crossing = [name for name in components if len(set(COMPONENTS[name])) > 1]
    if crossing and space.meta.get("method") == "monolingual":
        where = "the space" if isinstance(source, SharedSpace) else f"space {source}"
        raise ConfigError(
            f"{where} holds monolingual vectors, trained one language at a time and never aligned, "
            f"but the model's components {crossing} compare English and document-language words in "
            "it: map them onto English first (clir embed align), or train a joint space (clir "
            "embed train without --monolingual)"
        )


@dataclass
class CollectionFeatures:
    """Everything :func:`collection_rerank_data` needs from one collection, built once.

    Attributes:
        collection: The collection.
        tables: ``(en->doc, doc->en)`` translation tables.
        documents: The documents analyzed and translated.
        stages: Indexed first stages by name.
        mt: The machine translation of ``baseline.translation`` (``mt`` mode), else ``None``.
        documents_key: Identifies ``documents`` when they were read from a content-addressed
            step (:meth:`cached`), else ``None``; the rerank data built from them carries it
            (:attr:`~clir.training.data.RerankData.documents_key`).
    """

    collection: Collection
    tables: tuple[TranslationTable, TranslationTable]
    documents: DocumentTokens
    stages: dict[str, FirstStage]
    mt: MTTranslation | None = None
    documents_key: str | None = None

    def __post_init__(self) -> None:
        _check_english_queries(self.collection)

    @classmethod
    def build(
        cls,
        collection: Collection,
        *,
        stage_names: Sequence[str],
        tables: tuple[TranslationTable, TranslationTable] | None = None,
        tables_dir: str | Path | None = None,
        baseline: BaselineConfig | None = None,
        progress: bool = True,
        engine: Engine = LOCAL,
        stages: Mapping[str, FirstStage] | None = None,
        candidates_only: bool = False,
    ) -> CollectionFeatures:
        """Learn (or load) the tables, analyze the documents, index the named first stages.

        Args:
            collection: The collection.
            stage_names: First stages to index (``"<mode>-<model>"``), the candidate run and the
                score features.
            tables: Ready tables; otherwise learned (or loaded) by
                :func:`clir.pipeline.tables.learn_tables` into ``tables_dir``.
            tables_dir: Where the tables are cached.
            baseline: First-stage settings (PSQ pruning, model parameters).
            progress: Show progress bars.
            engine: Where the documents are analyzed and translated.
            stages: First stages already indexed over the collection (e.g. :func:`load_stages`),
                by name; the other names are indexed here.
            candidates_only: Analyze and translate no document now: :meth:`tokens` does it for
                the candidates of each :func:`collection_rerank_data` call. The statistics
                (:func:`collection_statistics`) come from the stages' indexes where they hold
                the same terms, else from one streamed pass over the documents.
        """
        _check_english_queries(collection)  # before any table is learned or stage indexed
        tables = tables or learn_tables(collection, tables_dir, progress=progress)
        baseline = baseline or BaselineConfig()
        mt = baseline.translation.mt(collection.doc_lang) if baseline.translation else None
        analyzer = get_analyzer(collection.doc_lang)
        indexed = dict(stages or {})
        for name in dict.fromkeys(stage_names):
            if name not in indexed:
                mode, model = _stage_name(name)
                indexed[name] = first_stage(mode, model, collection, tables, baseline, progress, engine)
        if candidates_only:
            documents = collection_statistics(collection, indexed, tables[1], progress, mt, engine)
        else:
            documents = DocumentTokens.build(
                collection.documents, analyzer, tables[1], progress=progress, mt=mt, engine=engine
            )
        return cls(collection, tables, documents, indexed, mt)

    def tokens(self, docnos: Iterable[str], progress: bool = True, engine: Engine = LOCAL) -> DocumentTokens:
        """:attr:`documents`, holding ``docnos`` (those it lacks analyzed and translated now).

        Raises:
            ConfigError: For a docno that is not a document of the collection.
        """
        wanted = set(docnos).difference(self.documents.src)
        if wanted:
            new = [document for document in self.collection.documents if document.docno in wanted]
            if len(new) < len(wanted):
                missing = sorted(wanted.difference(document.docno for document in new))
                raise ConfigError(
                    f"candidates {missing[:5]} (of {len(missing)}) are not documents of the collection"
                )
            analyzer = get_analyzer(self.collection.doc_lang)
            self.documents.add(new, analyzer, self.tables[1], progress, self.mt, engine)
        return self.documents

    def save(self, path: Path) -> None:
        """Write the analyzed documents (``documents.json``) and each indexed first stage
        (``stages/<name>``) into the new directory ``path`` (a cache step's work directory)."""
        with atomic_write(path / "documents.json") as handle:
            json.dump({"src": self.documents.src, "en": self.documents.en}, handle)
        for name, stage in self.stages.items():
            stage.save(path / "stages" / name)

    @classmethod
    def load(
        cls,
        path: Path,
        collection: Collection,
        tables: tuple[TranslationTable, TranslationTable],
        progress: bool = True,
    ) -> CollectionFeatures:
        """What :meth:`save` wrote, for ``collection`` and the ``tables`` it was built with."""
        saved = json.loads((path / "documents.json").read_text(encoding="utf-8"))
        df_src: Counter[str] = Counter()
        df_en: Counter[str] = Counter()
        for tokens in saved["src"].values():
            df_src.update(set(tokens))
        for tokens in saved["en"].values():
            df_en.update(set(tokens))
        documents = DocumentTokens(saved["src"], saved["en"], df_src, df_en, len(saved["src"]))
        stages = {
            stage.name: FirstStage.load(stage, progress=progress)
            for stage in sorted((path / "stages").iterdir())
        }
        return cls(collection, tables, documents, stages)

    @classmethod
    def cached(
        cls,
        collection: Collection,
        cache: str | Path,
        *,
        stage_names: Sequence[str],
        tables: tuple[TranslationTable, TranslationTable],
        baseline: BaselineConfig | None = None,
        progress: bool = True,
        log: Callable[[str], None] = print,
    ) -> CollectionFeatures:
        """:meth:`build`, kept in a cache directory for the next call (``clir search``).

        The cache is a :class:`~clir.pipeline.cache.StepRunner` root: one step per
        ``(collection contents, tables, analyzers, first-stage settings and names, clir
        version)``, reused only while its files are intact; a collection whose documents
        changed is indexed anew (old entries stay until the cache is deleted). With machine
        translation (``baseline.translation``) nothing is cached.

        Args:
            collection: The collection.
            cache: The cache directory (created when absent; locked while in use).
            stage_names: As for :meth:`build`.
            tables: The tables the first stages and translations use.
            baseline: First-stage settings (default: the baselines').
            progress: Show progress bars.
            log: Receives ``[cached] index`` or ``[run]    index``.
        """
        baseline = baseline or BaselineConfig()
        names = list(dict.fromkeys(stage_names))
        options = {"stage_names": names, "tables": tables, "baseline": baseline, "progress": progress}
        if baseline.translation is not None:  # first stages with MT are not saved
            log("[not cached, machine translation] index")
            return cls.build(collection, **options)
        params = {
            "collection": _collection_digest(collection),
            "tables": [table_digest(table) for table in tables],
            "analyzers": {
                lang: get_analyzer(lang).to_config() for lang in (collection.query_lang, collection.doc_lang)
            },
            "baseline": baseline.to_dict(),
            "stages": names,
        }

        def build(work: Path) -> None:
            cls.build(
                collection, stage_names=names, tables=tables, baseline=baseline, progress=progress
            ).save(work)

        with StepRunner(cache, log=log, wait=True) as runner:
            step = runner.run("index", params, build)
            features = cls.load(step.path, collection, tables, progress=progress)
        features.documents_key = f"index step {step.key}"  # the documents are a function of its params
        return features


def _collection_digest(collection: Collection) -> str:
    """SHA-256 of a collection's languages and documents (docno and text, in order)."""
    digest = hashlib.sha256(f"{collection.query_lang}\0{collection.doc_lang}\0".encode())
    for document in collection.documents:
        digest.update(f"{document.docno}\0{document.text}\0".encode())
    return digest.hexdigest()


def collection_rerank_data(
    features: CollectionFeatures,
    split: str | Sequence[Query],
    *,
    candidates: str | Sequence[str] | Run | None = None,
    feature_names: Sequence[str] = DEFAULT_FEATURES,
    data: DataConfig | None = None,
    depth: int | None = None,
    progress: bool = True,
    engine: Engine = LOCAL,
) -> RerankData:
    """The reranker's data of one split of a collection.

    Args:
        features: What :meth:`CollectionFeatures.build` made.
        split: A split name (``"train"``, ``"dev"``, ``"test"``) or the queries themselves.
        candidates: The name of an indexed first stage, or a list of names (their union,
            :func:`search_candidates`), each searched to ``depth``; or a run, whose top
            ``depth`` are the candidates (default: ``data.first_stage``).
        feature_names: Feature columns.
        data: Depth, feature normalisation, query translation and spelling settings (a model's
            ``config.data``; default: :class:`~clir.training.DataConfig`'s defaults).
        depth: Candidates per query and first stage (default ``data.depth``).
        progress: Show progress bars.
        engine: Where the candidate runs are searched (and candidates missing from
            ``features.documents`` analyzed, :meth:`CollectionFeatures.tokens`).

    Raises:
        ConfigError: On a candidate run that is not an indexed stage (see :func:`build_rerank_data`
            for the rest).
    """
    data = data or DataConfig()
    depth = depth or data.depth
    candidates = data.first_stage if candidates is None else candidates
    collection = features.collection
    queries = collection.split(split) if isinstance(split, str) else list(split)
    name: str | list[str] = "given"
    if isinstance(candidates, Mapping):
        run = candidates
    else:
        name = candidates if isinstance(candidates, str) else list(candidates)
        names = [name] if isinstance(name, str) else name
        run = search_candidates(features.stages, names, queries, depth, engine)
        depth *= len(names)
    docnos = {docno for query in queries for docno, _ in _top(run.get(query.qid, {}), depth)}
    built = build_rerank_data(
        queries,
        run,
        documents=features.tokens(docnos, progress, engine),
        table_en_doc=features.tables[0],
        doc_lang=collection.doc_lang,
        stages=features.stages,
        features=feature_names,
        depth=depth,
        feature_norm=data.feature_norm,
        qt_k=data.qt_k,
        spelling=data.spelling,
        meta={
            "collection": collection.name,
            "candidates": name,
            "split": split if isinstance(split, str) else None,
        },
        progress=progress,
        mt=features.mt,
    )
    built.documents_key = features.documents_key  # its documents' tokens are those of the step
    return built


def train_reranker(
    config: TrainConfig,
    collection: Collection,
    space: SharedSpace | str | Path,
    out_dir: str | Path,
    *,
    tables: tuple[TranslationTable, TranslationTable] | None = None,
    tables_dir: str | Path | None = None,
    feature_names: Sequence[str] = DEFAULT_FEATURES,
    train_split: str = "train",
    dev_split: str | None = "dev",
    resume: bool = False,
    baseline: BaselineConfig | None = None,
) -> Path:
    """``clir train``: train the reranker (or its ensemble / cross-validation) of a config on a
    collection's train split, early-stopping on its dev split by MAP.

    Args:
        config: The training config (``data.first_stage`` names the candidate run).
        collection: The collection (its parallel side trains the tables when none are given).
        space: The shared space or its directory.
        out_dir: The ensemble directory (``seed<s>/`` checkpoints, ``ensemble.json``).
        tables: ``(en->doc, doc->en)`` tables; learned into ``tables_dir`` when ``None``.
        tables_dir: Cache of the tables.
        feature_names: Feature columns (ignored by models with ``model.features: false``).
        train_split: The split trained on.
        dev_split: The split early-stopped on (``None``: keep the last epoch, or cross-validate).
        resume: Resume interrupted training.
        baseline: First-stage settings of the candidates and score features (default: the
            baselines'); recorded beside the model
            (:func:`~clir.pipeline.trained_with.record_first_stage`), so that reranking with it
            defaults to them.

    Returns:
        ``out_dir`` (load with :func:`clir.training.load_models`).

    Raises:
        OutputExistsError: Before the features are built, if a member's directory in
            ``out_dir`` holds what its checkpoint's save would not replace
            (:func:`~clir.training.cv.check_member_dirs`).
        ConfigError: Before the features are built, if the collection lacks ``train_split`` or
            ``dev_split``.
    """
    config.validate()
    check_member_dirs(config, out_dir)
    for split in (train_split, dev_split):  # before the tables, indexes and features are built
        if split is not None and split not in collection.queries:  # "has no split 'train'" alone
            raise ConfigError(  # had not said where labelled queries come from
                f"collection {collection.name!r} has no split {split!r}; splits: "
                f"{sorted(collection.queries)}: the reranker trains on judged {train_split} queries and "
                f"stops early on judged {dev_split} queries: import them (clir data import --topics "
                f"{train_split}=FILE {dev_split}=FILE test=FILE ...), or train on pseudo-queries made "
                "from parallel text (clir data pseudo)"
            )
    given, space = space, space if isinstance(space, SharedSpace) else SharedSpace.load(space)
    check_aligned_space(space, config.model.components, given)
    stage_names = [*config.data.first_stages, *stage_features(feature_names)]
    baseline = baseline or BaselineConfig()
    cf = CollectionFeatures.build(
        collection,
        stage_names=stage_names,
        tables=tables,
        tables_dir=tables_dir,
        baseline=baseline,
        progress=config.progress,
    )

    def data_of(split: str) -> RerankData:
        return collection_rerank_data(
            cf, split, feature_names=feature_names, data=config.data, progress=config.progress
        )

    train = data_of(train_split)
    dev = data_of(dev_split) if dev_split is not None else None
    path = train_ensemble(
        config, train, dev, collection.qrels, out_dir, space=space, metric=map_metric, resume=resume
    )
    record_first_stage(path, baseline)
    return path


def rerank_collection(
    model: str | Path,
    collection: Collection,
    space: SharedSpace | str | Path,
    *,
    split: str | Sequence[Query] = "test",
    run: Run | None = None,
    tables: tuple[TranslationTable, TranslationTable] | None = None,
    tables_dir: str | Path | None = None,
    depth: int | None = None,
    baseline: BaselineConfig | None = None,
    k: int = 1000,
    options: ScoringOptions | None = None,
    index_cache: str | Path | None = None,
    log: Callable[[str], None] = print,
    engine: Engine = LOCAL,
    stages: str | Path | None = None,
    as_parts: bool = False,
    keep_id_tables: bool = True,
) -> Run | Iterator[RunArrays]:
    """``clir rerank``: rerank a first-stage run of a collection's split with a trained model or
    ensemble (zero-shot when the collection's language differs from the training one).

    Args:
        model: A checkpoint or ensemble directory.
        collection: The collection.
        space: The shared space (must hold the collection's language) or its directory.
        split: The split whose queries are reranked, or the queries themselves.
        run: The first-stage run to rerank (e.g. read with ``clir.formats.read_run``); default:
            the models' ``data.first_stage`` searched on the collection (several: fused,
            :func:`fuse_runs`).
        tables: ``(en->doc, doc->en)`` tables; learned into ``tables_dir`` when ``None``.
        tables_dir: Cache of the tables.
        depth: Candidates reranked, per first stage (default: the models' ``data.depth``); the
            rest of the run follows beneath in its order.
        baseline: First-stage settings (PSQ pruning, model parameters; default: those the model
            was trained with, :func:`~clir.pipeline.trained_with.model_baseline`, else the
            baselines'); other settings than the model's are warned of.
        k: Depth of the first-stage runs searched when ``run`` is not given.
        options: Device, batch size and precision of the scoring (default: the models' device,
            the fast path's choices for it; see :class:`~clir.training.scoring.ScoringOptions`).
        index_cache: Keep the analyzed documents and first-stage indexes in this directory and
            reuse them while the collection, tables and settings are the same
            (:meth:`CollectionFeatures.cached`), and the documents' id tables in its ``id-tables``
            (:func:`~clir.training.idtables.id_table`); ``None``: index anew.
        log: Receives the cache's line (``[cached] index`` or ``[run]    index``).
        engine: Runs the documents' analysis, the first-stage searches and the scoring (a
            Ray engine scores on CPUs); its output is the local engine's. With ``index_cache``
            the documents are analyzed and indexed in this process.
        stages: A directory of saved first stages (:func:`load_stages`: ``<mode>-<model>/``, e.g.
            sharded ones of a large collection, built with the same tables and the baseline's
            settings), searched and scored instead of indexing the collection.
        as_parts: Return the run as :func:`~clir.training.ensemble.rerank_parts` gives it
            (:class:`~clir.formats.runs.RunArrays` in the file's order, scored as they are
            asked for: what ``clir rerank`` writes as they come, without the dictionaries).
        keep_id_tables: With ``index_cache``, keep the candidates' id tables there too (worth
            it for a split reranked again; ``False`` for ad-hoc queries, whose candidates
            recur rarely: ``clir search`` kept two files a query, never pruned).

    Without ``index_cache``, only the candidates are analyzed and translated for the features
    (their df and N are the collection's, read from the stages' indexes:
    :func:`collection_statistics`); the run is the one whole-collection features give.

    Returns:
        The reranked run.

    Raises:
        ConfigError: With both ``index_cache`` and ``stages`` (the stages had been ignored), on
            queries as :func:`~clir.retrieval.search.check_qids` refuses them or a split the
            collection lacks (before any table is learned or stage indexed), or on a ``run``
            that ranks no document for any of the queries (another split's: every ranking had
            come back empty, silently).
    """
    if index_cache is not None and stages is not None:
        raise ConfigError(
            "rerank_collection: give index_cache (index the collection, kept there) or stages (saved "
            "first stages), not both"
        )
    if not isinstance(split, str):  # read once: the first stages and the rerank data both want it
        split = check_qids(split)
    else:  # a split the collection lacks: refused before the tables are learned and it is indexed
        collection.split(split)
    if run is not None:
        qids = [query.qid for query in (collection.split(split) if isinstance(split, str) else split)]
        if not any(isinstance(run.get(qid), Mapping) and run[qid] for qid in qids):
            raise ConfigError(
                f"rerank_collection: run ranks no document for any of the {len(qids)} queries (its "
                f"{len(run)} keys: {', '.join(sorted(map(repr, run))[:3])}); give the run of these "
                "queries, {qid: {docno: score}}"
            )
    models = load_models(model)
    baseline = model_baseline(model, baseline)
    config = models[0].config
    names = models[0].feature_names
    given, space = space, space if isinstance(space, SharedSpace) else SharedSpace.load(space)
    for member in models:
        check_aligned_space(space, member.config.model.components, given)
    check_depth(depth)
    depth = depth or config.data.depth
    stage_names = stage_features(names)
    if run is None:
        stage_names += config.data.first_stages
    if index_cache is None:
        saved = None
        if stages is not None:  # checked against the tables, so these come first
            _check_english_queries(collection)
            tables = tables or learn_tables(collection, tables_dir, progress=config.progress)
            saved = load_stages(stages, stage_names, baseline, config.progress, collection, tables)
        cf = CollectionFeatures.build(
            collection,
            stage_names=stage_names,
            tables=tables,
            tables_dir=tables_dir,
            baseline=baseline,
            progress=config.progress,
            engine=engine,
            stages=saved,
            candidates_only=True,
        )
    else:
        cf = CollectionFeatures.cached(
            collection,
            index_cache,
            stage_names=stage_names,
            tables=tables or learn_tables(collection, tables_dir, progress=config.progress),
            baseline=baseline,
            progress=config.progress,
            log=log,
        )
    candidates = run
    if run is None:  # each first stage searched once: its top depth are candidates, the rest beneath
        queries = collection.split(split) if isinstance(split, str) else list(split)
        runs = [search_stage(cf.stages[name], queries, engine, k=k) for name in config.data.first_stages]
        run, candidates = fuse_runs(runs), fuse_runs(runs, depth)
        depth *= len(runs)
    data = collection_rerank_data(
        cf,
        split,
        candidates=candidates,
        feature_names=names,
        data=config.data,
        depth=depth,
        progress=config.progress,
        engine=engine,
    )
    reranked = max((len(query.docnos) for query in data.queries), default=0) or 1  # none: an empty ranking
    return (rerank_parts if as_parts else rerank)(
        models,
        data,
        space=space,
        run=run,
        depth=reranked,
        options=options,
        progress=config.progress,
        scorer=pair_scorer(engine),
        cache=(
            output_directory(index_cache, kind="experiment") / "id-tables"
            if index_cache is not None and keep_id_tables
            else None
        ),
    )

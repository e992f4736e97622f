"""``clir explain``: why one document ranked where it did for one query.

For a (query, document) pair it reports the four components' scores, each fusion input's share
of the final score, and a PNG heatmap per component of the query-term x document-term cosine
similarity matrix in the shared space.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError
from clir.formats import atomic_write
from clir.pipeline.features import (
    CollectionFeatures,
    collection_rerank_data,
    search_candidates,
    stage_features,
)
from clir.pipeline.tables import learn_tables
from clir.rerankers.bilingual import COMPONENTS
from clir.training import Tensorizer, Vocabulary, load_models
from clir.training.ensemble import _prepare
from clir.training.scoring import set_embeddings


@dataclass
class PairExplanation:
    """One (query, document) pair explained.

    Attributes:
        qid: The query.
        docno: The document.
        rank: The document's rank among the reranked candidates (1-based).
        score: The model's score.
        inputs: Fusion input name -> value (component scores, then features).
        shares: Fusion input name -> share of the score (absolute contributions sum to 1).
        heatmap: The PNG written, if any.
    """

    qid: str
    docno: str
    rank: int
    score: float
    inputs: dict[str, float]
    shares: dict[str, float]
    heatmap: Path | None


def explain_pair(
    model_dir: str | Path,
    collection: Collection,
    space: SharedSpace | str | Path,
    qid: str,
    docno: str,
    *,
    tables_dir: str | Path | None = None,
    png: str | Path | None = None,
) -> PairExplanation:
    """Explain the first model of ``model_dir`` on one pair of a collection.

    The document is scored among the first stage's candidates of the query (added to them when
    the first stage missed it), so the per-query normalised features are those of reranking.

    Raises:
        ConfigError: For an unknown qid or docno.
    """
    member = load_models(model_dir)[0]
    query = next((q for q in collection.all_queries() if q.qid == qid), None)
    if query is None:
        raise ConfigError(f"qid {qid!r} is not a query of collection {collection.name!r}")
    if docno not in {d.docno for d in collection.documents}:
        raise ConfigError(f"docno {docno!r} is not a document of collection {collection.name!r}")
    space = space if isinstance(space, SharedSpace) else SharedSpace.load(space)
    data_config = member.config.data
    stages = list(dict.fromkeys([*data_config.first_stages, *stage_features(member.feature_names)]))
    tables = learn_tables(collection, tables_dir, progress=False)
    features = CollectionFeatures.build(collection, stage_names=stages, tables=tables, progress=False)
    run = search_candidates(features.stages, data_config.first_stages, [query], data_config.depth)
    ranked = run.get(qid, {})
    if docno not in ranked:
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
    data = _prepare(member, data)
    vocab = Vocabulary.build([data])
    tensorizer = Tensorizer(vocab, data, data_config.max_query_len, data_config.max_doc_len)
    set_embeddings(member.model, torch.from_numpy(vocab.embedding_matrix(space)))
    pairs = tensorizer.query_pairs(0, None)
    with torch.no_grad():
        scores = member.model(tensorizer.batch(pairs)).double()
        explanation = member.model.explain(tensorizer.batch([(0, docno)]))
    position = [d for _, d in pairs].index(docno)
    rank = int((scores > scores[position]).sum()) + 1
    names = explanation.input_names
    heatmap = None
    if png is not None and explanation.similarity:
        heatmap = _heatmaps(Path(png), data, docno, explanation, data_config)
    return PairExplanation(
        qid,
        docno,
        rank,
        float(explanation.score[0]),
        dict(zip(names, explanation.inputs[0].tolist(), strict=True)),
        dict(zip(names, explanation.shares[0].tolist(), strict=True)),
        heatmap,
    )


def _heatmaps(path: Path, data: Any, docno: str, explanation: Any, data_config: Any) -> Path:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    query = data.queries[0]
    docs = {"src": data.doc_src[docno], "en": data.doc_en[docno]}
    components = list(explanation.similarity)
    fig, axes = plt.subplots(len(components), 1, figsize=(12, 1.6 + 0.9 * len(components) * 2), squeeze=False)
    for ax, component in zip(axes[:, 0], components, strict=True):
        q_lang, d_view = COMPONENTS[component]
        q_view = f"query_{q_lang}"
        q_tokens = list(getattr(query, q_view))[: data_config.max_query_len]
        d_tokens = list(docs[d_view])[: data_config.max_doc_len]
        sim = explanation.similarity[component][0, : len(q_tokens), : len(d_tokens)].numpy()
        image = ax.imshow(sim, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto")
        ax.set_yticks(range(len(q_tokens)), q_tokens, fontsize=7)
        ax.set_xticks(range(len(d_tokens)), d_tokens, fontsize=5, rotation=90)
        score = float(explanation.component_scores[component][0])
        ax.set_title(f"{component}: {q_view} x doc {d_view} (component score {score:.3f})", fontsize=9)
        fig.colorbar(image, ax=ax, fraction=0.02)
    fig.tight_layout()
    with atomic_write(path, "wb") as handle:
        fig.savefig(handle, format="png", dpi=130)
    plt.close(fig)
    return path

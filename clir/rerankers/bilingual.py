"""The bilingual reranker of Zhang et al. (ACL 2019): four term-interaction components and a fusion.

Zhang, Westerfield, Shim, Bingham, Fabbri, Verma, Hu, Radev. "Improving Low-Resource
Cross-lingual Document Retrieval by Reranking with Deep Bilingual Representations". ACL 2019.

Each component pairs one query view with one document view, all read in one shared
cross-lingual space; names are ``<query view>_<document view>``:

- ``en_src``: the English query with the document in its own language (Q_en, D_src);
- ``en_en``: the English query with the document translated into English (Q_en, D̂_en);
- ``src_src``: the translated query with the original document (Q̂_src, D_src);
- ``src_en``: the translated query with the translated document (Q̂_src, D̂_en).

The model owns the one frozen embedding matrix; the components hold none. K-NRM components
with equal kernels are scored together: both query views side by side against each document
view, one lookup per side and one kernel pass in all (:meth:`KNRM.grid_features`); other
models score :class:`EncodedPair` objects built from views looked up once each.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from clir.errors import ConfigError
from clir.rerankers.base import (
    InteractionModel,
    SavedModule,
    build_interaction_model,
    check_positive,
    read_model_dir,
    restore,
)
from clir.rerankers.batch import DOC_VIEWS, QUERY_VIEWS, BilingualBatch, concat_views, pad_views
from clir.rerankers.encoding import EncodedPair, EncodedView, FrozenEmbedding
from clir.rerankers.fused_knrm import fused_pooling_supported, fused_window_pooling
from clir.rerankers.fusion import Fusion
from clir.rerankers.knrm import KNRM

COMPONENTS: dict[str, tuple[str, str]] = {
    "en_src": ("en", "src"),
    "en_en": ("en", "en"),
    "src_src": ("src", "src"),
    "src_en": ("src", "en"),
}
"""Component name -> (query view, document view)."""

SHARED = "shared"


@dataclass
class Explanation:
    """What :meth:`BilingualReranker.explain` returns, for B pairs.

    Attributes:
        score: Final scores (B,).
        input_names: Names of the fusion inputs: the active components, then the features.
        inputs: Fusion inputs (B, n).
        contributions: Each input's additive part of the score before the bias (B, n); exact for
            linear fusion, gradient × input for MLP fusion.
        shares: ``|contribution| / Σ |contributions|`` (B, n); rows sum to 1 (or are 0).
        component_scores: Component name -> scores (B,).
        similarity: Component name -> cosine matrix (B, Lq, Ld), 0 at padding.
    """

    score: Tensor
    input_names: list[str]
    inputs: Tensor
    contributions: Tensor
    shares: Tensor
    component_scores: dict[str, Tensor]
    similarity: dict[str, Tensor]


class BilingualReranker(SavedModule, nn.Module):
    """Four-component bilingual reranker with a learned fusion layer (Zhang et al., ACL 2019).

    Args:
        embedding_dim: Dimension of the shared space.
        embeddings: The frozen matrix (V, embedding_dim), row 0 = padding; may be ``None`` when
            the model is only built to be filled by :meth:`load`.
        model: Registered interaction model of every component (see
            :data:`~clir.rerankers.base.INTERACTION_MODELS`).
        model_kwargs: Keyword arguments of that model.
        components: Active components, a subset of :data:`COMPONENTS` (empty: fusion over the
            features alone, the lexical-fusion ablation).
        share_weights: One interaction model for all components instead of one each.
        component_models: Per-component overrides ``{name: {"model": ..., "kwargs": {...}}}``
            (not with ``share_weights``).
        n_features: Number F of extra features per pair (``BilingualBatch.features``).
        feature_names: Optional names of the F features (for :meth:`explain`).
        fusion: ``"linear"`` or ``"mlp"``.
        fusion_hidden: Hidden units of the MLP fusion.
        feature_dropout: In training mode only, each feature of each pair (not the component
            scores) is zeroed with this probability and the kept ones are scaled by
            ``1 / (1 - p)`` (inverted dropout, so the fusion weights mean the same at inference,
            where nothing is dropped): the fusion cannot lean on the lexical columns alone.
        seed: Seed of the initialisation (component k uses ``seed + k`` unless weights are shared).

    Attributes:
        fused_kernel: When True, K-NRM components that the fused Triton kernel supports
            (:func:`~clir.rerankers.fused_knrm.fused_pooling_supported`) are pooled by it at
            inference (same features to 1e-3); set by the scorer, never saved.

    Raises:
        ConfigError: On an unknown component or model, no inputs at all, or inconsistent options.
    """

    name = "bilingual"

    def __init__(
        self,
        embedding_dim: int,
        embeddings: Tensor | None = None,
        *,
        model: str = "knrm",
        model_kwargs: Mapping[str, Any] | None = None,
        components: Sequence[str] = tuple(COMPONENTS),
        share_weights: bool = False,
        component_models: Mapping[str, Mapping[str, Any]] | None = None,
        n_features: int = 0,
        feature_names: Sequence[str] | None = None,
        fusion: str = "linear",
        fusion_hidden: int = 8,
        feature_dropout: float = 0.0,
        seed: int = 0,
    ) -> None:
        super().__init__()
        check_positive("embedding_dim", embedding_dim)
        components = list(components)
        unknown = [c for c in components if c not in COMPONENTS]
        if unknown or len(set(components)) != len(components):
            raise ConfigError(
                f"components must be distinct names from {sorted(COMPONENTS)}, got {components}"
            )
        if not isinstance(n_features, int) or n_features < 0:
            raise ConfigError(f"n_features must be a non-negative int, got {n_features!r}")
        if feature_names is not None and len(feature_names) != n_features:
            raise ConfigError(f"feature_names has {len(feature_names)} names but n_features={n_features}")
        component_models = {k: dict(v) for k, v in (component_models or {}).items()}
        if set(component_models) - set(components):
            raise ConfigError(
                f"component_models names {sorted(set(component_models) - set(components))} "
                f"are not active components {components}"
            )
        if share_weights and component_models:
            raise ConfigError("component_models cannot be combined with share_weights=True")
        if not components and n_features == 0:
            raise ConfigError("no active component and n_features=0: the model would have no input")
        if not 0 <= feature_dropout < 1:
            raise ConfigError(f"feature_dropout must be in [0, 1), got {feature_dropout!r}")

        self.embedding_dim = embedding_dim
        self.model, self.model_kwargs = model, dict(model_kwargs or {})
        self.components, self.share_weights = components, bool(share_weights)
        self.component_models = component_models
        self.n_features = n_features
        self.feature_names = list(feature_names) if feature_names is not None else None
        self.fusion_kind, self.fusion_hidden, self.seed = fusion, fusion_hidden, seed
        self.feature_dropout = float(feature_dropout)

        self.fused_kernel = False  # a switch of how (not what) it computes: see clir.rerankers.fused_knrm
        self.embedding: FrozenEmbedding | None = None
        if embeddings is not None:
            self.embedding = FrozenEmbedding(embeddings)
            if self.embedding.dim != embedding_dim:
                raise ConfigError(
                    f"embeddings have dimension {self.embedding.dim} but embedding_dim={embedding_dim}"
                )
        self.scorers = nn.ModuleDict()
        if share_weights and components:
            self.scorers[SHARED] = build_interaction_model(
                model, embedding_dim, seed=seed, **self.model_kwargs
            )
        elif not share_weights:
            for k, comp in enumerate(components):
                spec = component_models.get(comp, {})
                self.scorers[comp] = build_interaction_model(
                    spec.get("model", model),
                    embedding_dim,
                    seed=seed + k,
                    **dict(spec.get("kwargs", self.model_kwargs)),
                )
        self.fusion = Fusion(len(components) + n_features, fusion, fusion_hidden, seed=seed + 100)

    # --------------------------------------------------------------------------------- scoring

    @property
    def input_names(self) -> list[str]:
        """Names of the fusion inputs: active components then features."""
        features = self.feature_names or [f"feature_{i}" for i in range(self.n_features)]
        return [*self.components, *features]

    def scorer(self, component: str) -> InteractionModel:
        """The interaction model of ``component``."""
        return self.scorers[SHARED if self.share_weights else component]  # type: ignore[return-value]

    def _check(self, batch: BilingualBatch) -> FrozenEmbedding:
        """The embedding table, after checking that there is one and that ``batch`` fits."""
        if self.embedding is None:
            raise ConfigError(
                "BilingualReranker holds no embedding matrix: pass embeddings= when building it"
            )
        if not isinstance(batch, BilingualBatch):
            raise ConfigError(f"expected a BilingualBatch, got {type(batch).__name__}")
        return self.embedding

    def encode(
        self, batch: BilingualBatch, components: Sequence[str] | None = None
    ) -> dict[str, EncodedPair]:
        """Look every needed view up once and pair them: component name -> EncodedPair.

        Args:
            batch: The batch.
            components: The components to pair (default: all active ones).

        Raises:
            ConfigError: If the model holds no embedding matrix or ``batch`` has the wrong type.
        """
        embedding = self._check(batch)
        components = self.components if components is None else components
        wants_vectors: dict[tuple[str, str], bool] = {}
        for comp in components:
            q, d = COMPONENTS[comp]
            need = self.scorer(comp).needs_vectors
            for key in (("q", q), ("d", d)):
                wants_vectors[key] = wants_vectors.get(key, False) or need
        views: dict[tuple[str, str], EncodedView] = {}
        for (side, view), vectors in wants_vectors.items():
            tv = batch.query(view) if side == "q" else batch.doc(view)
            views[side, view] = EncodedView.encode(embedding, tv.tokens, tv.surface, vectors)
        pairs = {}
        for comp in components:
            q, d = COMPONENTS[comp]
            idf = batch.query(q).idf
            pairs[comp] = EncodedPair.build(
                views["q", q],
                views["d", d],
                idf,
                exact=self.scorer(comp).needs_exact,  # type: ignore[arg-type]
            )
        return pairs

    def _inputs(
        self, batch: BilingualBatch, pooled: Mapping[str, Tensor] | None = None
    ) -> tuple[Tensor, dict[str, Tensor]]:
        """The fusion inputs ``[component scores; features]`` (B, n) and the component scores;
        in training mode the features pass through ``feature_dropout``."""
        scores = self._scores(batch, pooled)
        columns = [s.unsqueeze(1) for s in scores.values()]
        if self.n_features:
            if batch.features is None or batch.features.shape[1] != self.n_features:
                got = None if batch.features is None else tuple(batch.features.shape)
                raise ConfigError(f"the model expects features of shape (B, {self.n_features}), got {got}")
            features = batch.features.float()
            if self.training and self.feature_dropout:
                features = F.dropout(features, self.feature_dropout)
            columns.append(features)
        return torch.cat(columns, dim=1), scores

    def _knrm_groups(self) -> list[list[str]]:
        """The K-NRM components with equal kernels, each group scored together (same result:
        one gather per side, one product per document view, one kernel pass)."""
        groups: dict[tuple, list[str]] = {}
        for comp in self.components:
            scorer = self.scorer(comp)
            if isinstance(scorer, KNRM):
                groups.setdefault(scorer.kernel_signature, []).append(comp)
        return list(groups.values())

    def _gated(self, components: list[str]) -> bool:
        """Whether any of these K-NRM components gates its query terms (its gates learn before
        the pooling)."""
        return any(self.scorer(c).gating != "none" for c in components)  # type: ignore[attr-defined]

    def _pooled(self) -> dict[str, list[str]]:
        """:attr:`pooled_groups` by name (their components joined by ``+``), with their components."""
        return {"+".join(comps): comps for comps in self._knrm_groups() if not self._gated(comps)}

    @property
    def pooled_groups(self) -> list[str]:
        """The names of the K-NRM groups whose pooled kernel features no parameter reaches (the
        space is frozen and ungated K-NRM learns only after the pooling): for a given pair they
        are constants of training, which :meth:`pooled_features` computes and ``forward(batch,
        pooled)`` takes back (``clir.training.pooled`` computes them once per pair)."""
        return list(self._pooled())

    @torch.no_grad()
    def pooled_features(self, batch: BilingualBatch) -> dict[str, Tensor]:
        """The pooled kernel features ``(B, query views, document views, kernels)`` of each
        group of :attr:`pooled_groups` (see :meth:`KNRM.grid_features`)."""
        return {name: self._knrm_pooling(batch, comps) for name, comps in self._pooled().items()}

    def _scores(self, batch: BilingualBatch, pooled: Mapping[str, Tensor] | None = None) -> dict[str, Tensor]:
        scores: dict[str, Tensor] = {}
        for comps in self._knrm_groups():
            phi = None if pooled is None else pooled.get("+".join(comps))
            scores.update(self._knrm_scores(batch, comps, phi))
        rest = [comp for comp in self.components if comp not in scores]
        if rest:
            for comp, pair in self.encode(batch, rest).items():
                scores[comp] = self.scorer(comp).score_pair(pair)
        return {comp: scores[comp].float() for comp in self.components}

    def _knrm_scores(
        self, batch: BilingualBatch, components: list[str], phi: Tensor | None = None
    ) -> dict[str, Tensor]:
        """Scores of K-NRM components with one kernel signature, from their pooled features
        ``phi`` (computed by :meth:`_knrm_pooling` when not given)."""
        q_views, d_views = self._views(components)
        if phi is None:
            phi = self._knrm_pooling(batch, components)
        scores = {}
        for comp in components:
            q, d = COMPONENTS[comp]
            features = phi[:, q_views.index(q), d_views.index(d)]
            scores[comp] = self.scorer(comp).score_features(features)  # type: ignore[operator]
        return scores

    @staticmethod
    def _views(components: list[str]) -> tuple[list[str], list[str]]:
        """The query views and the document views that ``components`` read, in view order."""
        q_views = [v for v in QUERY_VIEWS if any(COMPONENTS[c][0] == v for c in components)]
        d_views = [v for v in DOC_VIEWS if any(COMPONENTS[c][1] == v for c in components)]
        return q_views, d_views

    def _knrm_pooling(self, batch: BilingualBatch, components: list[str]) -> Tensor:
        """The pooled features of K-NRM components with one kernel signature: their query views
        side by side against each of their document views (see :meth:`KNRM.grid_features`), one
        gather per side, one product per document view and one kernel pass in all."""
        embedding = self._check(batch)
        q_views, d_views = self._views(components)
        query = concat_views([batch.query(v) for v in q_views])
        docs = pad_views([batch.doc(v) for v in d_views])
        scorer: KNRM = self.scorer(components[0])  # type: ignore[assignment]
        gated = self._gated(components)
        fused = (
            not gated
            and self.fused_kernel
            and scorer.exact_match
            and fused_pooling_supported(
                scorer.window, docs[0].tokens.shape[1], query.tokens.device, torch.is_grad_enabled()
            )
        )
        if fused:  # the same features in one Triton pass from the token ids (clir.rerankers.fused_knrm)
            phi = fused_window_pooling(
                embedding.unit,
                query.tokens,
                query.tokens if query.surface is None else query.surface,
                torch.stack([d.tokens for d in docs], dim=1),
                torch.stack([d.tokens if d.surface is None else d.surface for d in docs], dim=1),
                len(q_views),
                scorer.mus,
                scorer.sigmas,
                scorer.eps,
                scorer.log_scale,
                scorer.window,
                split=not torch.is_autocast_enabled(query.tokens.device.type),  # bf16: as autocast would
            )
        else:
            encoded = EncodedView.encode(embedding, query.tokens, query.surface)
            weights = self._term_weights(encoded, query.idf, q_views, d_views, components) if gated else None
            phi = scorer.grid_features(
                encoded,
                [EncodedView.encode(embedding, d.tokens, d.surface) for d in docs],
                len(q_views),
                weights,
            )
        # contiguous, as clir.training.pooled keeps them: the windowed pooling gave a permuted
        # view, whose strided rows the components' dense layers summed in another order, so a
        # model pooling for itself scored up to 1e-7 apart from the same model reading a cache
        # (alone or in an ensemble, locally or on Ray workers: other scores of the same pair)
        return phi.contiguous()

    def _term_weights(
        self,
        query: EncodedView,
        idf: Tensor | None,
        q_views: list[str],
        d_views: list[str],
        components: list[str],
    ) -> Tensor:
        """Term weights (B, n_d, n_q · Lq) of query views side by side, for each document view:
        each component's :meth:`KNRM.term_weights`, 1 at the real terms of a pair no component
        scores."""
        if idf is None:
            raise ConfigError("term gating needs the idf of every query view")
        parts = [torch.chunk(tensor, len(q_views), dim=1) for tensor in (query.unit, idf, query.mask)]
        rows = []
        for d in d_views:
            row = []
            for i, q in enumerate(q_views):
                unit, q_idf, mask = (part[i] for part in parts)
                comp = f"{q}_{d}"
                weights = self.scorer(comp).term_weights(unit, q_idf, mask) if comp in components else None
                row.append(mask.float() if weights is None else weights)
            rows.append(torch.cat(row, dim=1))
        return torch.stack(rows, dim=1)

    def component_scores(self, batch: BilingualBatch) -> dict[str, Tensor]:
        """Component name -> scores (B,)."""
        return self._inputs(batch)[1]

    def forward(self, batch: BilingualBatch, pooled: Mapping[str, Tensor] | None = None) -> Tensor:
        """Score a batch: float tensor (B,).

        Args:
            batch: The pairs.
            pooled: The batch's :meth:`pooled_features` of some of :attr:`pooled_groups`, computed
                before (the others are computed now).
        """
        return self.fusion(self._inputs(batch, pooled)[0])

    @torch.no_grad()
    def explain(self, batch: BilingualBatch) -> Explanation:
        """Component scores, each fusion input's contribution and share, and similarity matrices.

        Runs in eval mode (the training flag is restored afterwards).
        """
        was_training = self.training
        self.eval()
        try:
            inputs, scores = self._inputs(batch)
            contributions = self.fusion.contributions(inputs)
            total = contributions.abs().sum(1, keepdim=True)
            shares = torch.where(total > 0, contributions.abs() / total.clamp(min=1e-30), 0.0)
            return Explanation(
                score=self.fusion(inputs),
                input_names=self.input_names,
                inputs=inputs,
                contributions=contributions,
                shares=shares,
                component_scores=scores,
                similarity={comp: pair.sim for comp, pair in self.encode(batch).items()},
            )
        finally:
            self.train(was_training)

    # ----------------------------------------------------------------------------- persistence

    def get_config(self) -> dict[str, Any]:
        """Constructor arguments (JSON-serialisable) that rebuild this model, without the matrix."""
        return {
            "embedding_dim": self.embedding_dim,
            "model": self.model,
            "model_kwargs": self.model_kwargs,
            "components": self.components,
            "share_weights": self.share_weights,
            "component_models": self.component_models,
            "n_features": self.n_features,
            "feature_names": self.feature_names,
            "fusion": self.fusion_kind,
            "fusion_hidden": self.fusion_hidden,
            "feature_dropout": self.feature_dropout,
            "seed": self.seed,
        }

    @classmethod
    def load(
        cls, path: str | Path, embeddings: Tensor | None = None, device: torch.device | str | None = None
    ) -> BilingualReranker:
        """Rebuild a saved model from its config, then load its weights.

        Args:
            path: Directory written by :meth:`save`.
            embeddings: Frozen matrix to use instead of (or in the absence of) a saved one.
            device: Where to put the model (default CPU).

        Raises:
            DataNotFoundError: If ``path`` is not a saved model.
            ConfigError: If it holds another type.
            FormatError: Naming the file, if the weights do not fit the config.
        """
        config, tensors = read_model_dir(path)
        if config.get("type") != cls.name:
            raise ConfigError(f"{path} holds a {config.get('type')!r} model, not a {cls.name!r}")
        return restore(cls, path, config, tensors, embeddings, device)

"""Query likelihood with Dirichlet smoothing (Zhai & Lafferty 2001), as Indri scores it."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from clir.errors import ConfigError
from clir.retrieval.base import Retriever, is_real, register
from clir.retrieval.index import SparseIndex

MU_MIN = 1e-100
"""The smallest Dirichlet prior taken: below it ``1 / (mu P(t|C))`` overflowed float64 (``mu =
1e-320`` gave infinite and NaN scores) for a collection of up to 1e15 tokens."""


@register("ql")
class QueryLikelihood(Retriever):
    """Dirichlet-smoothed query likelihood: ``sum_t log((tf + mu P(t|C)) / (|D| + mu))``.

    Zhai and Lafferty (2001). A Study of Smoothing Methods for Language Models Applied to Ad Hoc
    Information Retrieval. SIGIR. The sum runs over query terms with multiplicity;
    ``P(t|C) = cf / |C|``, and a term never seen in the collection gets ``P(t|C) = 1 / (2 |C|)``
    as in Indri. Every document has a score; it is computed exactly as
    ``sum_t log(mu P_t) - |q| log(|D| + mu) + sum_{t in D} log(1 + tf / (mu P_t))``, the last sum
    being sparse and precomputed per posting. A PSQ term (Darwish & Oard 2003) has
    ``tf = sum p tf(t, D)`` and ``cf = sum p cf(t)`` (the unseen rule applies when that is 0).

    Args:
        mu: Dirichlet prior, finite and at least :data:`MU_MIN`.

    Raises:
        ConfigError: If ``mu`` is not a finite number of at least :data:`MU_MIN`.
    """

    def __init__(self, mu: float = 2500.0) -> None:
        super().__init__()
        if not (is_real(mu) and mu > 0):
            raise ConfigError(f"mu must be > 0, got {mu!r}")
        if mu == math.inf:  # it had given every document a NaN score
            raise ConfigError(f"mu must be finite, got {mu!r}")
        if mu < MU_MIN:
            raise ConfigError(
                f"mu must be at least {MU_MIN:g}, got {mu!r} (a smaller prior overflows the "
                "weights to infinite and NaN scores)"
            )
        self.mu = float(mu)
        self._total = 1.0
        self._log_len = np.zeros(0)

    def get_params(self) -> dict[str, Any]:
        return {"mu": self.mu}

    def _prepare(self, index: SparseIndex) -> None:
        self._total = index.stats.total_len or 1.0
        self._log_len = np.log(np.asarray(index.doc_len) + self.mu)

    def _prior(self) -> np.ndarray:
        return self._log_len

    def collection_prob(self, cf: np.ndarray) -> np.ndarray:
        """``P(t|C)`` for collection frequencies ``cf`` (``1 / (2|C|)`` where ``cf == 0``)."""
        cf = np.asarray(cf, dtype=np.float64)
        return np.where(cf > 0, cf, 0.5) / self._total

    def _term_params(self, df: np.ndarray, cf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        ones = np.ones_like(cf)
        return ones, np.log(self.mu * self.collection_prob(cf)), ones

    def _transform(
        self, tf: np.ndarray, doc_ids: np.ndarray, indptr: np.ndarray, df: np.ndarray, cf: np.ndarray
    ) -> np.ndarray:
        scale = 1.0 / (self.mu * self.collection_prob(cf))
        tf *= np.repeat(scale, np.diff(indptr))
        return np.log1p(tf, out=tf)

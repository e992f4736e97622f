"""Okapi BM25 (Robertson et al. 1994) with two idf variants."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from clir.errors import ConfigError
from clir.retrieval.base import Retriever, is_real, register
from clir.retrieval.index import SparseIndex

IDF_VARIANTS = ("lucene", "okapi")

K1_MAX = 1e100
"""The largest ``k1`` (and ``epsilon``) taken: weights stay far inside float64's range for any tf
(a float32) and document length. Beyond it they overflowed (``k1 = 1e308`` made ``tf (k1 + 1)``
infinite: -inf and NaN scores, and a document without the query's term listed in place of one
with it); near it the saturated tf is already the limit ``tf / L`` that larger values approach."""


@register("bm25")
class BM25(Retriever):
    """BM25: ``sum_t idf(t) * tf (k1 + 1) / (tf + k1 (1 - b + b |D| / avgdl))`` over query terms.

    Robertson, Walker, Jones, Hancock-Beaulieu and Gatford (1994). Okapi at TREC-3. A repeated
    query term counts once per occurrence (as rank-bm25 does). Terms are weighted eagerly: the
    saturated tf of every posting is computed at indexing time (as bm25s does), so a query is a
    gather and sum of postings; PSQ terms (Darwish & Oard 2003) are saturated after summing
    their translations' tf.

    Args:
        k1: Term-frequency saturation, from 0 to :data:`K1_MAX`.
        b: Length normalisation in [0, 1].
        idf: ``"okapi"``: ``log((N - n + 0.5) / (n + 0.5))`` with negative values floored to
            ``epsilon * mean idf`` (mean over every vocabulary term's idf before flooring),
            exactly rank-bm25's ``BM25Okapi``; ``"lucene"``: ``log(1 + (N - n + 0.5) / (n + 0.5))``
            (always positive; Lucene / bm25s default).
        epsilon: Floor factor of the ``"okapi"`` variant, from 0 to :data:`K1_MAX`.

    Raises:
        ConfigError: For an out-of-range parameter or an unknown idf variant.
    """

    def __init__(self, k1: float = 1.5, b: float = 0.75, idf: str = "okapi", epsilon: float = 0.25) -> None:
        super().__init__()
        if not (is_real(k1) and 0 <= k1 < math.inf):
            raise ConfigError(f"k1 must be a finite number >= 0, got {k1!r}")
        if not (is_real(epsilon) and 0 <= epsilon < math.inf):
            raise ConfigError(f"epsilon must be a finite number >= 0, got {epsilon!r}")
        for name, value in (("k1", k1), ("epsilon", epsilon)):
            if value > K1_MAX:
                raise ConfigError(
                    f"{name} must be at most {K1_MAX:g}, got {value!r} (larger values overflow the "
                    "weights to infinite and NaN scores)"
                )
        if not (is_real(b) and 0 <= b <= 1):
            raise ConfigError(f"b must be in [0, 1], got {b!r}")
        if idf not in IDF_VARIANTS:
            raise ConfigError(f"unknown idf variant {idf!r}; expected one of {sorted(IDF_VARIANTS)}")
        self.k1 = float(k1)
        self.b = float(b)
        self.idf = idf
        self.epsilon = float(epsilon)
        self._n_docs = 0
        self._idf_floor = 0.0
        self._length_norm = np.zeros(0)

    def get_params(self) -> dict[str, Any]:
        return {"k1": self.k1, "b": self.b, "idf": self.idf, "epsilon": self.epsilon}

    def _prepare(self, index: SparseIndex) -> None:
        self._n_docs = index.stats.n_docs
        avgdl = index.stats.avg_doc_len or 1.0
        self._length_norm = self.k1 * (1.0 - self.b + self.b * np.asarray(index.doc_len) / avgdl)
        if self.idf == "okapi":
            df = np.asarray(index.df)
            raw = self._raw_idf(df[df > 0])
            self._idf_floor = self.epsilon * float(raw.mean()) if raw.size else 0.0

    def _raw_idf(self, df: np.ndarray) -> np.ndarray:
        n = self._n_docs
        if self.idf == "okapi":
            return np.log(n - df + 0.5) - np.log(df + 0.5)
        return np.log1p((n - df + 0.5) / (df + 0.5))

    def idf_of(self, df: np.ndarray) -> np.ndarray:
        """The idf of terms with document frequencies ``df`` (after the okapi floor).

        A PSQ term's df is its translations' ``sum p * df``, which exceeds the number of
        documents when the weights sum to more than 1: it is taken as that number (a term in
        every document), whose idf is defined (okapi's had been NaN, and every score with it).
        """
        idf = self._raw_idf(np.minimum(np.asarray(df, dtype=np.float64), self._n_docs))
        if self.idf == "okapi":
            idf = np.where(idf < 0, self._idf_floor, idf)
        return idf

    def _term_params(self, df: np.ndarray, cf: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        zeros = np.zeros_like(df)
        return self.idf_of(df), zeros, zeros

    def _transform(
        self, tf: np.ndarray, doc_ids: np.ndarray, indptr: np.ndarray, df: np.ndarray, cf: np.ndarray
    ) -> np.ndarray:
        denominator = self._length_norm[doc_ids]
        denominator += tf
        tf *= self.k1 + 1.0
        tf /= denominator
        return tf

"""Spelling-variant matching: a query term no translation resource knows (most often a name:
"anathoth", "nebuchadnezzar") is replaced by the most similarly spelled term of the target
vocabulary ("anathothi", "nebukadneza").

Pirkola, Toivonen, Keskustalo, Visala and Järvelin (2003). Fuzzy Translation of Cross-Lingual
Spelling Variants. SIGIR. Like their skip-gram matching, terms are compared by character
n-grams; here as the cosine of TF-IDF weighted character 2- to 4-gram vectors (scikit-learn),
so that rare n-grams count most.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from sklearn.feature_extraction.text import TfidfVectorizer

from clir.errors import ConfigError

MIN_LENGTH = 3
"""Shorter terms (and numbers) are never matched: too little spelling to go on."""

_BATCH = 512
"""Unknown terms compared at once (bounds the dense similarity block: 512 x the vocabulary)."""


def _matchable(term: str) -> bool:
    return len(term) >= MIN_LENGTH and not term.isdigit()


class SpellingMatcher:
    """Maps terms outside a vocabulary to their closest spelling inside it.

    Args:
        vocabulary: The target terms (e.g. an index's vocabulary).
        threshold: The least cosine similarity for a match, in (0, 1]. 0.5 was chosen on the
            en-sw dev queries (MAP of QT-BM25 0.354 -> 0.422; 0.6 and 0.4 gave 0.413 and 0.418).
            The cosine is over the n-grams the term shares with the vocabulary: the vectorizer
            drops the term's other n-grams before normalising, so it is higher than the cosine
            over all of them (``baruch`` -> ``barua`` 0.65, against 0.41).
        ngram_range: Character n-gram lengths (n-grams do not cross a term's edges).

    Raises:
        ConfigError: For a threshold outside (0, 1].
    """

    def __init__(
        self, vocabulary: Iterable[str], threshold: float = 0.5, ngram_range: tuple[int, int] = (2, 4)
    ) -> None:
        if not 0 < threshold <= 1:
            raise ConfigError(f"spelling threshold must be in (0, 1], got {threshold!r}")
        self.known = set(vocabulary)
        self.threshold = threshold
        self.targets = sorted(t for t in self.known if _matchable(t))
        self.vectorizer = TfidfVectorizer(analyzer="char_wb", ngram_range=ngram_range, sublinear_tf=True)
        self.matrix = self.vectorizer.fit_transform(self.targets) if self.targets else None
        # n-grams x targets, converted once (a product with matrix.T would convert it per call)
        self._columns = None if self.matrix is None else self.matrix.T.tocsr()
        self._cache: dict[str, str] = {}

    def match(self, terms: Sequence[str]) -> list[str]:
        """Each term, or its closest vocabulary spelling when it is not in the vocabulary and one
        reaches the threshold (ties: the alphabetically first target)."""
        todo = sorted({t for t in terms if t not in self.known and t not in self._cache and _matchable(t)})
        for start in range(0, len(todo) if self._columns is not None else 0, _BATCH):
            batch = todo[start : start + _BATCH]
            similarity = (self.vectorizer.transform(batch) @ self._columns).toarray()
            best = similarity.argmax(axis=1)
            for term, column, row in zip(batch, best, similarity, strict=True):
                self._cache[term] = self.targets[column] if row[column] >= self.threshold else term
        return [self._cache.get(t, t) for t in terms]

    def match_weighted(self, sets: Sequence[dict[str, float]]) -> list[dict[str, float]]:
        """:meth:`match` applied to the keys of weighted term sets (PSQ queries); weights of keys
        that map to the same term add up."""
        out = []
        for weights in sets:
            merged: dict[str, float] = {}
            for term, weight in zip(self.match(list(weights)), weights.values(), strict=True):
                merged[term] = merged.get(term, 0.0) + weight
            out.append(merged)
        return out

    def __repr__(self) -> str:
        return f"SpellingMatcher({len(self.known)} terms, threshold={self.threshold})"

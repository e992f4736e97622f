"""Keyword queries picked from English verses by inverse document frequency.

The short form of a Bible query is a handful of the verse's own words: those that best single
out its passage among the English collection-side passages. The rule, fixed so that queries are
reproducible:

1. Tokenise the verse with the English analyzer's ``tokenize`` (lower-cased words).
2. A word is a *candidate* when it is made of letters (inner hyphens and a possessive ``'s``
   allowed; no digits, no contractions such as ``won't``), at least ``min_length`` (3) letters
   long, not an English stopword, and its Snowball stem occurs in at
   least ``min_df`` (2) English collection-side passages: a word found in one passage only is
   mostly a rare name or spelling the target translation renders unpredictably.
3. Candidates are counted once per stem (first surface form wins). With ``m`` distinct stems the
   query takes ``k = 2`` words if ``m <= 5``, ``3`` if ``m <= 9``, else ``4``; a verse with fewer
   than two candidates gives no query.
4. The ``k`` stems of highest idf ``log(N / df)`` are kept (ties: earlier in the verse), and
   their surface words are written in verse order, e.g. ``"blessed poor spirit kingdom"``.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable

from clir.errors import ConfigError
from clir.text import Analyzer


class KeywordSelector:
    """Picks a verse's most specific words as a keyword query (see the module docstring).

    Args:
        analyzer: The English analyzer (``tokenize``, ``is_stopword``, ``analyze``).
        min_df: Least number of fitted texts a stem must occur in to be picked.
        min_length: Least number of letters of a picked word.

    Raises:
        ConfigError: If ``min_df`` or ``min_length`` is below 1.
    """

    def __init__(self, analyzer: Analyzer, *, min_df: int = 2, min_length: int = 3) -> None:
        if min_df < 1 or min_length < 1:
            raise ConfigError(f"min_df and min_length must be >= 1, got {min_df} and {min_length}")
        self.analyzer = analyzer
        self.min_df = min_df
        self.min_length = min_length
        self._stems: dict[str, str | None] = {}
        self.df_: Counter[str] = Counter()
        self.n_docs_ = 0

    def _stem(self, token: str) -> str | None:
        """The stem of a candidate word, or ``None`` for a word that can never be picked."""
        if token not in self._stems:
            stem = None
            word = token.replace("’", "'")
            word = word[:-2] if word.endswith("'s") else word
            letters = word.replace("-", "")
            if letters.isalpha() and len(letters) >= self.min_length and not self.analyzer.is_stopword(token):
                analyzed = self.analyzer.analyze(token)
                if len(analyzed) == 1:
                    stem = analyzed[0]
            self._stems[token] = stem
        return self._stems[token]

    def _stems_of(self, text: str) -> list[tuple[str, str]]:
        """``(surface, stem)`` of the text's pickable words, one per stem, in text order."""
        seen: set[str] = set()
        out = []
        for token in self.analyzer.tokenize(text):
            stem = self._stem(token)
            if stem is not None and stem not in seen:
                seen.add(stem)
                out.append((token, stem))
        return out

    def fit(self, texts: Iterable[str]) -> KeywordSelector:
        """Count document frequencies of stems over ``texts`` (e.g. passages); returns ``self``."""
        df: Counter[str] = Counter()
        n_docs = 0
        for text in texts:
            df.update(stem for _surface, stem in self._stems_of(text))
            n_docs += 1
        self.df_, self.n_docs_ = df, n_docs
        return self

    def idf(self, stem: str) -> float:
        """``log(N / df)`` of a fitted stem (``0.0`` for an unseen one)."""
        df = self.df_.get(stem, 0)
        return math.log(self.n_docs_ / df) if df else 0.0

    def select(self, text: str) -> list[str]:
        """The keyword query of a verse: 2-4 surface words in verse order, or ``[]``.

        Raises:
            ConfigError: If called before :meth:`fit`.
        """
        if not self.n_docs_:
            raise ConfigError("KeywordSelector.select() called before fit()")
        candidates = [
            (position, surface, stem)
            for position, (surface, stem) in enumerate(self._stems_of(text))
            if self.df_.get(stem, 0) >= self.min_df
        ]
        m = len(candidates)
        if m < 2:
            return []
        k = 2 if m <= 5 else 3 if m <= 9 else 4
        best = sorted(candidates, key=lambda c: (-self.idf(c[2]), c[0]))[:k]
        return [surface for _position, surface, _stem in sorted(best)]

"""Query translation with a table: QT (top-k terms) and PSQ (weighted translation sets)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from clir.errors import ConfigError
from clir.translation.table import TranslationTable, check_tokens
from clir.types import Query


def translate_query_qt(tokens: Sequence[str], table: TranslationTable, k: int = 1) -> list[str]:
    """Replace each query term by its ``k`` most probable translations (query translation, QT).

    Args:
        tokens: Analyzed query terms in the table's source language.
        table: p(document term | query term).
        k: Translations kept per term (ties by target string).

    Returns:
        The translated terms, in query order; a term unknown to the table (a number, a name)
        passes through unchanged.

    Raises:
        ConfigError: On ``k`` below 1 or ``tokens`` that is a string (not yet analyzed).
    """
    check_tokens(tokens)
    if k < 1:
        raise ConfigError(f"k must be >= 1, got {k!r}")
    out: list[str] = []
    for token in tokens:
        translations = table.translations(token, k)
        out.extend([target for target, _ in translations] if translations else [token])
    return out


def translate_query_psq(
    tokens: Sequence[str],
    table: TranslationTable,
    top_k: int | None = None,
    cumulative: float | None = None,
) -> list[dict[str, float]]:
    """Turn each query term into a weighted set of translations (PSQ; Darwish & Oard 2003).

    Darwish and Oard (2003). Probabilistic Structured Query Methods. SIGIR. A retriever
    scores each set as one term whose tf and df are the probability-weighted sums of its
    translations' tf and df.

    Pass a pruned table (:meth:`TranslationTable.prune`) or prune here with ``top_k`` /
    ``cumulative``; the weights are renormalised to sum to 1. Unlike ``prune``, whose cut-off is
    a share of the whole row's mass, ``cumulative`` here is a share of the ``top_k`` kept
    translations' mass (with both set, the first ``top_k``, then the smallest prefix of them
    reaching ``cumulative`` of their sum; every run clir has measured used this rule).

    Args:
        tokens: Analyzed query terms in the table's source language.
        table: p(document term | query term).
        top_k: Keep at most this many translations per term (``None``: all in the table).
        cumulative: Keep the smallest prefix of the (``top_k``) translations reaching this share
            of their mass (``None``: all).

    Returns:
        One ``{document_term: weight}`` per query term, in query order (repeated terms give
        repeated sets); an unknown term gives ``{term: 1.0}``.

    Raises:
        ConfigError: On ``cumulative`` outside (0, 1] or ``tokens`` that is a string (not yet
            analyzed).
    """
    check_tokens(tokens)
    if cumulative is not None and not 0 < cumulative <= 1:
        raise ConfigError(f"cumulative must be in (0, 1] or None, got {cumulative!r}")
    out: list[dict[str, float]] = []
    for token in tokens:
        translations = table.translations(token, top_k)
        if not translations:
            out.append({token: 1.0})
            continue
        if cumulative is not None:
            total = sum(p for _, p in translations)
            kept, mass = [], 0.0
            for target, p in translations:
                if mass >= cumulative * total * (1 - 1e-12):
                    break
                kept.append((target, p))
                mass += p
            translations = kept
        norm = sum(p for _, p in translations)
        out.append({target: p / norm for target, p in translations})
    return out


def translate_queries(
    queries: Sequence[Query], analyzer: Any, table: TranslationTable, k: int = 1
) -> list[Query]:
    """Translate query records with QT: ``text`` becomes the space-joined translated terms.

    Args:
        queries: Queries in the table's source language.
        analyzer: ``clir.text`` analyzer of the source language (``.analyze(text)``).
        table: p(document term | query term).
        k: Translations per term.

    Returns:
        New Query records (same qid; ``description`` translated the same way when non-empty).
    """

    def convert(text: str) -> str:
        return " ".join(translate_query_qt(analyzer.analyze(text), table, k)) if text else ""

    return [Query(q.qid, convert(q.text), convert(q.description)) for q in queries]

"""Document translation with a table, word by word: top-1 (DT) or expected counts."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from clir.errors import ConfigError
from clir.progress import progress_bar
from clir.translation.table import TranslationTable, check_tokens
from clir.types import Document

DT_MODES = ("top1", "expected")


def translate_tokens_top1(tokens: Sequence[str], table: TranslationTable) -> list[str]:
    """Replace each token by its most probable translation (ties by target string).

    Args:
        tokens: Analyzed tokens in the table's source language.
        table: p(target | source).

    Returns:
        One target term per token; a token unknown to the table passes through unchanged.

    Raises:
        ConfigError: On ``tokens`` that is a string (not yet analyzed).
    """
    check_tokens(tokens)
    best = table.best()
    vocab = table.target_vocab
    out: list[str] = []
    for token in tokens:
        index = table.source_index(token)
        column = best[index] if index is not None else -1
        out.append(vocab[column] if column >= 0 else token)
    return out


def translate_tokens_expected(tokens: Sequence[str], table: TranslationTable) -> dict[str, float]:
    """Expected target-term counts of a token sequence.

    Each source token f adds p(e | f) to the count of every translation e; an unknown token
    adds 1.0 to itself.

    Args:
        tokens: Analyzed tokens in the table's source language.
        table: p(target | source).

    Returns:
        ``{target_term: expected count}``; the counts sum to ``len(tokens)`` when rows sum to 1.

    Raises:
        ConfigError: On ``tokens`` that is a string (not yet analyzed).
    """
    check_tokens(tokens)
    counts: dict[str, float] = {}
    cache: dict[str, list[tuple[str, float]]] = {}
    for token in tokens:
        if token not in cache:
            cache[token] = table.translations(token) or [(token, 1.0)]
        for target, p in cache[token]:
            counts[target] = counts.get(target, 0.0) + p
    return counts


def translate_documents(
    documents: Sequence[Document],
    analyzer: Any,
    table: TranslationTable,
    mode: str = "top1",
    field: str = "text_en",
    progress: bool = False,
) -> list[Document]:
    """Translate documents word by word and store the result in a field.

    Args:
        documents: Documents in the table's source language.
        analyzer: ``clir.text`` analyzer of that language (``.analyze(text)``).
        table: p(English term | document term).
        mode: ``"top1"``: the field holds the space-joined translated terms (already analyzed
            English terms: index them without analyzing again). ``"expected"``: the field holds
            the JSON object of expected counts (read it back with :func:`parse_expected`).
        field: Name of the field to set.
        progress: Show a progress bar.

    Returns:
        New Document records with ``fields[field]`` set (other fields kept).

    Raises:
        ConfigError: For an unknown ``mode``.
    """
    if mode not in DT_MODES:
        raise ConfigError(f"mode must be one of {sorted(DT_MODES)}, got {mode!r}")
    out: list[Document] = []
    for doc in progress_bar(documents, desc="translate documents", enabled=progress):
        tokens = analyzer.analyze(doc.text)
        if mode == "top1":
            value = " ".join(translate_tokens_top1(tokens, table))
        else:
            value = json.dumps(translate_tokens_expected(tokens, table), ensure_ascii=False, sort_keys=True)
        out.append(Document(doc.docno, doc.text, {**doc.fields, field: value}))
    return out


def parse_expected(value: str) -> dict[str, float]:
    """Read back the expected counts stored by ``translate_documents(..., mode="expected")``."""
    return {str(term): float(count) for term, count in json.loads(value).items()}

"""Translation tables from outside: word alignments of an aligner (eflomal, fast_align, ...) and
probabilistic tables of other toolkits, as alternatives to IBM Model 1.

* **Alignments** in the Pharaoh format that eflomal and fast_align write: one line per sentence
  pair (an empty line for a pair with no link), each link ``i-j`` joining the ``i``-th source
  token to the ``j``-th target token (0-based). The tables are the relative frequencies of the
  links, as Moses's lexical tables: p(t | s) = c(s, t) / c(s), p(s | t) = c(s, t) / c(t), summed
  over every file given (e.g. eflomal's forward and reverse links). A link written twice on one
  line is refused, not counted twice: aligners write each link once per pair.
* **Tables** as TSV (``source<TAB>target<TAB>probability``) or JSON (``{"source": {"target":
  probability, ...}, ...}``, Patapsco's PSQ tables), renormalised per source word. Surface words
  are mapped to the index's terms by the analyzers when given (the weights of words that share a
  term add up); words that analyze to nothing (stopwords) are dropped. A pair written twice (a
  TSV line repeated, a JSON key twice in one object) is refused, not summed.
"""

from __future__ import annotations

import codecs
import json
import math
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from clir.errors import DataNotFoundError, FormatError
from clir.translation.table import TranslationTable

Links = list[tuple[int, int]]


def read_links(path: str | Path) -> list[Links]:
    """Read Pharaoh alignments: one list of ``(source index, target index)`` links per line.

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: On a line that is not UTF-8 text, a link that is not ``i-j`` with
            non-negative integers, or a link written twice on one line (naming the line).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such alignments file")
    sentences: list[Links] = []
    with path.open("rb") as handle:
        for number, raw in enumerate(handle, start=1):
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                raise FormatError(path, number, f"not valid UTF-8 ({exc.reason})") from None
            links = []
            for link in line.split():
                source, sep, target = link.partition("-")
                if not (
                    sep and source.isascii() and source.isdigit() and target.isascii() and target.isdigit()
                ):
                    raise FormatError(path, number, f"link {link!r} is not 'i-j' (0-based token positions)")
                links.append((int(source), int(target)))
            _check_unique(path, number, links)
            sentences.append(links)
    return sentences


def _check_unique(path: str | Path, line: int, links: Links) -> None:
    """Refuse a link written twice on one line: eflomal, fast_align and the symmetrisers
    (atools) write each link once, so a repeat means lines were merged (e.g. ``paste`` of the
    forward and reverse files, which should be given as two files) and would count twice."""
    if len(set(links)) < len(links):
        repeated = next(link for link, n in Counter(links).items() if n > 1)
        raise FormatError(
            path,
            line,
            f"link {repeated[0]}-{repeated[1]} is written twice; an aligner writes each link once "
            "per sentence pair (give forward and reverse links as separate files)",
        )


def tables_from_links(
    source_tokens: Sequence[Sequence[str]],
    target_tokens: Sequence[Sequence[str]],
    alignments: Sequence[tuple[str | Path, Sequence[Links]]],
    source_lang: str,
    target_lang: str,
    meta: dict[str, Any] | None = None,
) -> tuple[TranslationTable, TranslationTable]:
    """p(target | source) and p(source | target) from link counts.

    Args:
        source_tokens: The tokens the aligner saw as its source, per sentence pair.
        target_tokens: Its target tokens, per pair.
        alignments: ``(file name, links per pair)`` of each alignment file (counts add up).
        source_lang: Language of the source tokens.
        target_lang: Language of the target tokens.
        meta: Kept in both tables' meta (with ``method: "alignments"`` and the files).

    Raises:
        FormatError: If a file's line count differs from the pairs', a link points past a
            sentence's tokens (the aligner saw other tokens), or a pair holds a link twice
            (it would count twice).
    """
    triples: list[tuple[str, str]] = []
    for path, sentences in alignments:
        if len(sentences) != len(source_tokens):
            raise FormatError(
                path,
                None,
                f"has {len(sentences)} lines, expected one per sentence pair ({len(source_tokens)})",
            )
        for number, (links, source, target) in enumerate(
            zip(sentences, source_tokens, target_tokens, strict=True)
        ):
            _check_unique(path, number + 1, links)
            for i, j in links:
                if i >= len(source) or j >= len(target):
                    raise FormatError(
                        path,
                        number + 1,
                        f"link {i}-{j} is past the pair's {len(source)} source / {len(target)} target "
                        "tokens; align the tokens that 'clir tables --write-tokens' writes",
                    )
                triples.append((source[i], target[j]))
    info = {**(meta or {}), "method": "alignments", "files": [str(path) for path, _ in alignments]}
    forward = TranslationTable.from_weights(((s, t, 1.0) for s, t in triples), source_lang, target_lang, info)
    backward = TranslationTable.from_weights(
        ((t, s, 1.0) for s, t in triples), target_lang, source_lang, info
    )
    return forward, backward


def read_table(
    path: str | Path,
    source_lang: str,
    target_lang: str,
    *,
    source_analyzer: Any | None = None,
    target_analyzer: Any | None = None,
) -> TranslationTable:
    """Read a probabilistic translation table (TSV or JSON, told by the first character).

    Args:
        path: The table file.
        source_lang: Language of its source words.
        target_lang: Language of its target words.
        source_analyzer: Maps a source word to index terms (``.analyze(text)``); ``None`` keeps
            the words as they are.
        target_analyzer: The same for target words.

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: On a malformed line or entry (an empty word included), a ``source target``
            pair written twice (a TSV line or a JSON key), or a probability that is not a finite
            number >= 0 (naming the file, and the line of a TSV); or when no entry is left (an
            empty file, or the analyzers dropped every word: such a table translates nothing).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such translation table file")
    raw = path.read_bytes().removeprefix(codecs.BOM_UTF8)
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise FormatError(path, line, f"not valid UTF-8 ({exc.reason})") from None
    entries = _json_entries(path, text) if text.lstrip().startswith("{") else _tsv_entries(path, text)

    def terms(word: str, analyzer: Any | None) -> list[str]:
        return [word] if analyzer is None else list(analyzer.analyze(word))

    read = 0

    def counted() -> Iterator[tuple[str, str, float]]:
        nonlocal read
        for entry in entries:
            read += 1
            yield entry

    def split(source: str, target: str, weight: float) -> Iterator[tuple[str, str, float]]:
        """A target phrase's weight shared among its terms, as ``Lexicon.to_table`` does (each had
        taken it whole: "mji mkuu" 0.5 beside "jiji" 0.5 had held two thirds of the row)."""
        targets = terms(target, target_analyzer)
        for s in terms(source, source_analyzer):
            for t in targets:
                yield s, t, weight / len(targets)

    triples = (triple for entry in counted() for triple in split(*entry))
    meta = {"method": "imported", "file": str(path), "analyzed": source_analyzer is not None}
    table = TranslationTable.from_weights(triples, source_lang, target_lang, meta)
    if not len(table):
        raise FormatError(
            path,
            None,
            "holds no entry"
            if not read
            else f"no entry of its {read} is left (the {source_lang} / {target_lang} analyzers dropped "
            "every word, or every probability is 0): the table would translate nothing",
        )
    return table


def _weight(path: Path, line: int | None, value: Any) -> float:
    try:  # numbers as C reads them: no "1_000" (Python's float() reads it), no int past float
        weight = math.nan if isinstance(value, str) and "_" in value else float(value)
    except (TypeError, ValueError, OverflowError):
        weight = math.nan
    if isinstance(value, bool) or not (math.isfinite(weight) and weight >= 0):
        raise FormatError(path, line, f"probability must be a finite number >= 0, got {value!r}")
    return weight


def _tsv_entries(path: Path, text: str) -> Iterator[tuple[str, str, float]]:
    first_line: dict[tuple[str, str], int] = {}
    # lines end at "\n" only, as every clir reader's: splitlines() also ends them at "\x0c",
    # "\x85", "\u2028" ..., which cut a word and shifted every later line number
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.removesuffix("\r")
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) != 3 or not parts[0].strip() or not parts[1].strip():
            raise FormatError(path, number, f"expected source<TAB>target<TAB>probability, got {line!r}")
        pair = (parts[0].strip(), parts[1].strip())
        if (first := first_line.setdefault(pair, number)) != number:  # summed silently before
            raise FormatError(
                path,
                number,
                f"pair {pair[0]!r} -> {pair[1]!r} is written twice (first on line {first}); a table "
                "holds one probability per pair",
            )
        yield *pair, _weight(path, number, parts[2].strip())


def _json_entries(path: Path, text: str) -> Iterator[tuple[str, str, float]]:
    def unique(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
        mapping = dict(pairs)
        if len(mapping) < len(pairs):  # json keeps the last of a repeated key, silently
            repeated = next(key for key, n in Counter(key for key, _ in pairs).items() if n > 1)
            raise FormatError(path, None, f"key {repeated!r} is written twice in one object")
        return mapping

    try:
        table = json.loads(text, object_pairs_hook=unique)
    except FormatError:
        raise
    except ValueError as exc:
        raise FormatError(path, None, f"invalid JSON ({exc})") from None
    for source, row in table.items():
        if not isinstance(row, dict):
            raise FormatError(
                path, None, f"entry {source!r} must map target words to probabilities, got {row!r}"
            )
        for target, value in row.items():
            if not (source.strip() and target.strip()):  # as a TSV line's empty field
                raise FormatError(path, None, f"entry {source!r} -> {target!r}: an empty word")
            yield source, target, _weight(path, None, value)


def transpose(table: TranslationTable, meta: dict[str, Any] | None = None) -> TranslationTable:
    """The reverse direction of a table when only one is given: its weights transposed and
    renormalised per (former) target word, i.e. a uniform prior over the source words."""
    probs = sp.csr_matrix(table.probs.T)
    sums = np.asarray(probs.sum(axis=1)).ravel()
    keep = np.flatnonzero(sums > 0)
    probs = sp.csr_matrix(sp.diags(1 / sums[keep]) @ probs[keep])
    vocab = [table.target_vocab[i] for i in keep]
    info = {**table.meta, **(meta or {}), "transposed": True}
    return TranslationTable(vocab, table.source_vocab, probs, table.target_lang, table.source_lang, info)

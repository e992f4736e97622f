"""Padded id tables of tokenised texts, and a verified cache of them on disk.

An :class:`IdTable` numbers the words of a list of texts locally (in order of first appearance)
and lays the texts out as one padded table of those numbers. A
:class:`~clir.training.data.Tensorizer` maps the local numbers to its vocabulary's rows with one
lookup per distinct word, so the table of a collection's documents, the costly part (one
dictionary lookup per token), can be kept on disk and reused by every rerank over the same
documents: :func:`id_table` with a ``cache`` directory.

The cache is keyed by the inputs: the texts' lengths, the least padded width and either a
digest of the texts, token by token, or a ``source`` key that the caller vouches identifies
them (e.g. the key of the content-addressed step they were read from, :attr:`RerankData.documents_key
<clir.training.data.RerankData>`: no token is read for the key). Each file holds a digest of its
own contents and its key, checked when it is read: a file that does not match (damaged,
truncated, edited, or another key's file copied over it) is rebuilt with a warning, never
used; a table found by a ``source`` key whose first or last words differ from the texts' (a
key that no longer fits the texts) is rebuilt too.
"""

from __future__ import annotations

import hashlib
import warnings
import zipfile
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, count
from pathlib import Path

import numpy as np

from clir.formats import atomic_write

FORMAT = "clir-id-table-3"
"""Written into every digest: a new layout of the files changes every key."""
_TOKEN, _TEXT = "\x1f", "\x1e"  # separators of the digested text (and of the kept word list)
_NUL = "\x00"  # a token holding a separator or a NUL gets no digest: its texts are not cached


@dataclass(frozen=True)
class IdTable:
    """Texts as a padded table of local word numbers.

    Attributes:
        words: The distinct words, in order of first appearance.
        ids: ``int32`` (texts, width): ``i + 1`` for ``words[i]``, 0 for padding.
        lengths: ``int64`` (texts,) tokens of each text.
    """

    words: list[str]
    ids: np.ndarray
    lengths: np.ndarray

    @classmethod
    def build(cls, texts: Sequence[Sequence[str]], min_len: int) -> IdTable:
        """Number the words of ``texts`` and lay them out, each row padded to the longest text
        (and to at least ``min_len``)."""
        lengths = _lengths(texts)
        width = max([min_len, *lengths])
        local: defaultdict[str, int] = defaultdict(count(1).__next__)  # a lookup numbers a new word
        ids = np.zeros((len(texts), width), dtype=np.int32)
        flat = map(local.__getitem__, chain.from_iterable(texts))
        ids[np.arange(width) < lengths[:, None]] = np.fromiter(flat, np.int32, int(lengths.sum()))
        return cls(list(local), ids, lengths)

    def checksum(self) -> str:
        """A digest of the contents (checked when read back from the cache)."""
        digest = hashlib.sha256(FORMAT.encode())
        digest.update(_word_bytes(self.words))
        for array in (self.ids, self.lengths):
            digest.update(str(array.shape).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


def _lengths(texts: Sequence[Sequence[str]]) -> np.ndarray:
    return np.fromiter(map(len, texts), np.int64, len(texts))


def _word_bytes(words: Sequence[str]) -> bytes:
    """The words joined by a separator, as UTF-8 (how the cache keeps them)."""
    return _TOKEN.join(words).encode("utf-8", "surrogatepass")


def input_key(texts: Sequence[Sequence[str]], min_len: int, source: str | None = None) -> str | None:
    """The cache key of ``texts`` padded to ``min_len``.

    Args:
        texts: Token lists.
        min_len: Least width of the table.
        source: A key that identifies ``texts`` (see :func:`id_table`); ``None``: a digest of
            every token.

    Returns:
        A digest of ``min_len``, the texts' lengths and ``source`` or every token; ``None``
        without ``source`` when a token holds a separator or a NUL (not cached).
    """
    lengths = _lengths(texts)
    if source is not None:
        digest = hashlib.sha256(f"{FORMAT} {min_len} source\n".encode())
        digest.update(lengths.tobytes())
        digest.update(source.encode("utf-8", "surrogatepass"))
        return digest.hexdigest()[:40]
    joined = _TEXT.join(map(_TOKEN.join, texts))
    separators = int(np.maximum(lengths - 1, 0).sum()), max(len(texts) - 1, 0), 0
    if (joined.count(_TOKEN), joined.count(_TEXT), joined.count(_NUL)) != separators:
        return None
    digest = hashlib.sha256(f"{FORMAT} {min_len} tokens\n".encode())
    digest.update(lengths.tobytes())
    digest.update(joined.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()[:40]


def id_table(
    texts: Sequence[Sequence[str]],
    min_len: int,
    cache: str | Path | None = None,
    source: str | None = None,
) -> IdTable:
    """The :class:`IdTable` of ``texts``, read from ``cache`` when an earlier call kept it there.

    Args:
        texts: Token lists.
        min_len: Least width of the table.
        cache: A directory of kept tables (created when missing); ``None``: build, keep nothing.
        source: A key that identifies ``texts`` (the caller vouches that other texts never come
            with it, e.g. a digest of the content-addressed step they were read from and of
            what was taken from it): the cache is then keyed by it and the texts' lengths, with
            no token read; ``None``: keyed by a digest of every token.

    Returns:
        The table, equal to ``IdTable.build(texts, min_len)``.

    Warns:
        UserWarning: When the cache's file for these texts is damaged, or found by ``source``
            but its first or last words are not the texts' (it is rebuilt).
    """
    key = None if cache is None else input_key(texts, min_len, source)
    if key is None:
        return IdTable.build(texts, min_len)
    path = Path(cache) / f"{key}.npz"
    if path.is_file():
        try:
            table = _read(path, key)
        except (OSError, ValueError, KeyError, EOFError, zipfile.BadZipFile) as error:  # EOF: empty
            warnings.warn(f"{path}: damaged id-table cache file ({error}); rebuilt", stacklevel=2)
        else:
            if source is None or _ends_match(table, texts):
                return table
            warnings.warn(
                f"{path}: the id-table cache file of source {source!r} holds other texts; rebuilt",
                stacklevel=2,
            )
            return IdTable.build(texts, min_len)
    table = IdTable.build(texts, min_len)
    blob = _word_bytes(table.words)
    if all(table.words) and blob.count(_TOKEN.encode()) == max(len(table.words) - 1, 0):  # they read back
        with atomic_write(path, "wb") as handle:
            np.savez(
                handle,
                words=np.frombuffer(blob, dtype=np.uint8),
                n_words=np.asarray(len(table.words), dtype=np.int64),
                ids=table.ids,
                lengths=table.lengths,
                checksum=np.asarray(table.checksum()),
                key=np.asarray(key),
            )
    return table


def _ends_match(table: IdTable, texts: Sequence[Sequence[str]]) -> bool:
    """Whether each text's first and last token are the table's (the texts' lengths are in the
    key): a check that a ``source`` key still fits its texts, not a proof."""
    if len(table.lengths) != len(texts):
        return False
    rows = np.flatnonzero(table.lengths)
    words = table.words
    first = [words[i - 1] for i in table.ids[rows, 0].tolist()]
    last = [words[i - 1] for i in table.ids[rows, table.lengths[rows] - 1].tolist()]
    kept = [texts[i] for i in rows.tolist()]
    return first == [text[0] for text in kept] and last == [text[-1] for text in kept]


def _read(path: Path, key: str) -> IdTable:
    """A kept table, whose contents must match the checksum kept with them, and whose key must
    be ``key`` (a file of other texts copied over this one is whole, and had been used for them).

    Raises:
        ValueError: If they do not (or an array has the wrong type or shape).
    """
    with np.load(path, allow_pickle=False) as arrays:
        blob, n_words, ids, lengths, checksum, kept_key = (
            arrays[k] for k in ("words", "n_words", "ids", "lengths", "checksum", "key")
        )
    if kept_key.shape != () or str(kept_key) != key:
        raise ValueError(f"it holds the table of key {str(kept_key)!r}, not of its name's, {key!r}")
    if (
        blob.dtype != np.uint8
        or n_words.shape != ()
        or ids.dtype != np.int32
        or lengths.dtype != np.int64
        or ids.ndim != 2
        or len(ids) != len(lengths)
    ):
        raise ValueError(f"arrays of types {ids.dtype}/{lengths.dtype}, shapes {ids.shape}/{lengths.shape}")
    words = blob.tobytes().decode("utf-8", "surrogatepass").split(_TOKEN) if int(n_words) else []
    if len(words) != int(n_words):
        raise ValueError(f"{len(words)} words where {int(n_words)} were kept")
    table = IdTable(words, ids, lengths)
    if table.checksum() != str(checksum):
        raise ValueError(f"contents do not match their checksum {str(checksum)!r}")
    return table

"""Padded id tables of tokenised texts, and a verified cache of them on disk.

An :class:`IdTable` numbers the words of a list of texts locally (in order of first appearance)
and lays the texts out as one padded table of those numbers. A
:class:`~clir.training.data.Tensorizer` maps the local numbers to its vocabulary's rows with one
lookup per distinct word, so the table of a collection's documents, the costly part (one
dictionary lookup per token), can be kept on disk and reused by every rerank over the same
documents: :func:`id_table` with a ``cache`` directory.

The cache is keyed by a digest of the inputs (the texts, token by token, and the least padded
width), and each file holds a digest of its own contents, checked when it is read: a file that
does not match (damaged, truncated, edited) is rebuilt with a warning, never used.
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

FORMAT = "clir-id-table-1"
"""Written into every digest: a new layout of the files changes every key."""
_TOKEN, _TEXT = "\x1f", "\x1e"  # separators of the digested text
_NUL = "\x00"  # numpy's str arrays drop trailing NULs: a token holding a separator or one is not cached


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
        lengths = np.asarray([len(text) for text in texts], dtype=np.int64)
        width = max([min_len, *lengths])
        local: defaultdict[str, int] = defaultdict(count(1).__next__)  # a lookup numbers a new word
        ids = np.zeros((len(texts), width), dtype=np.int32)
        flat = map(local.__getitem__, chain.from_iterable(texts))
        ids[np.arange(width) < lengths[:, None]] = np.fromiter(flat, np.int32, int(lengths.sum()))
        return cls(list(local), ids, lengths)

    def checksum(self) -> str:
        """A digest of the contents (checked when read back from the cache)."""
        digest = hashlib.blake2b(FORMAT.encode(), digest_size=20)
        digest.update(_TOKEN.join(self.words).encode("utf-8", "surrogatepass"))
        for array in (self.ids, self.lengths):
            digest.update(str(array.shape).encode())
            digest.update(np.ascontiguousarray(array).tobytes())
        return digest.hexdigest()


def input_key(texts: Sequence[Sequence[str]], min_len: int) -> str | None:
    """The cache key of ``texts`` padded to ``min_len``: a digest of every token, the texts'
    lengths and ``min_len``; ``None`` when a token holds a separator or a NUL (not cached)."""
    lengths = np.asarray([len(text) for text in texts], dtype=np.int64)
    joined = _TEXT.join(map(_TOKEN.join, texts))
    separators = int(np.maximum(lengths - 1, 0).sum()), max(len(texts) - 1, 0), 0
    if (joined.count(_TOKEN), joined.count(_TEXT), joined.count(_NUL)) != separators:
        return None
    digest = hashlib.blake2b(f"{FORMAT} {min_len}".encode(), digest_size=20)
    digest.update(lengths.tobytes())
    digest.update(joined.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()


def id_table(texts: Sequence[Sequence[str]], min_len: int, cache: str | Path | None = None) -> IdTable:
    """The :class:`IdTable` of ``texts``, read from ``cache`` when an earlier call kept it there.

    Args:
        texts: Token lists.
        min_len: Least width of the table.
        cache: A directory of kept tables (created when missing); ``None``: build, keep nothing.

    Returns:
        The table, equal to ``IdTable.build(texts, min_len)``.

    Warns:
        UserWarning: When the cache's file for these texts is damaged (it is rebuilt).
    """
    key = None if cache is None else input_key(texts, min_len)
    if key is None:
        return IdTable.build(texts, min_len)
    path = Path(cache) / f"{key}.npz"
    if path.is_file():
        try:
            return _read(path)
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as error:
            warnings.warn(f"{path}: damaged id-table cache file ({error}); rebuilt", stacklevel=2)
    table = IdTable.build(texts, min_len)
    with atomic_write(path, "wb") as handle:
        np.savez(
            handle,
            words=np.asarray(table.words, dtype=str),
            ids=table.ids,
            lengths=table.lengths,
            checksum=np.asarray(table.checksum()),
        )
    return table


def _read(path: Path) -> IdTable:
    """A kept table, whose contents must match the checksum kept with them.

    Raises:
        ValueError: If they do not (or an array has the wrong type or shape).
    """
    with np.load(path, allow_pickle=False) as arrays:
        words, ids, lengths, checksum = (arrays[k] for k in ("words", "ids", "lengths", "checksum"))
    if ids.dtype != np.int32 or lengths.dtype != np.int64 or ids.ndim != 2 or len(ids) != len(lengths):
        raise ValueError(f"arrays of types {ids.dtype}/{lengths.dtype}, shapes {ids.shape}/{lengths.shape}")
    table = IdTable(words.tolist(), ids, lengths)
    if table.checksum() != str(checksum):
        raise ValueError(f"contents do not match their checksum {str(checksum)!r}")
    return table

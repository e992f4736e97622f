"""The shared cross-lingual space: every language's vectors in one English-pivot space."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np
from gensim.models.fasttext import ft_ngram_hashes
from gensim.models.keyedvectors import KeyedVectors

from clir._version import __version__
from clir.embeddings.csls import translate
from clir.embeddings.vectors_io import check_words, load_word2vec, make_keyed_vectors, save_word2vec
from clir.errors import ClirError, ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_directory, atomic_write
from clir.formats.jsonfile import read_typed_json
from clir.formats.manifest import manifest_of, verify_files
from clir.translation.table import check_tokens
from clir.types import MatrixSources


def _by_language(entries: Sequence[tuple[str, str]]) -> dict[str, list[int]]:
    """The positions of ``(language, token)`` entries, per language (in order of appearance)."""
    by_lang: dict[str, list[int]] = {}
    for i, (lang, _) in enumerate(entries):
        by_lang.setdefault(lang, []).append(i)
    return by_lang


def _is_language_code(lang: object) -> bool:
    """Whether ``lang`` names a language of a saved space: letters only, as :meth:`SharedSpace.load`
    requires (each names the space's ``<lang>.bin``, so ``../x`` would name a file outside it)."""
    return isinstance(lang, str) and lang.isalpha()


def _unit(x: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return x / np.maximum(norms, 1e-12)


def _ngram_files(info: Mapping[str, Any], info_path: Path, languages: Sequence[str]) -> dict[str, str]:
    """Per subword language of a saved space, the n-gram array file its ``space.json`` names
    (``<lang>.ngrams.npy`` where it names none).

    Raises:
        FormatError: Naming ``space.json``, if ``subwords`` is no ``{language: parameters}``
            object, has a key that is not one of ``languages`` (checked before any file that the
            key names, ``<key>.mean.npy``, is read: a key ``../x`` named a file outside the
            space), or names a file outside the space's directory.
    """
    subwords = info.get("subwords", {})
    if isinstance(subwords, dict) and (unknown := sorted(set(subwords) - set(languages))):
        raise FormatError(
            info_path,
            None,
            f"'subwords' has the key {unknown[0]!r}, which is not one of the space's languages "
            f"{list(languages)}; train or align it again",
        )
    try:
        names = {
            lang: params.get("ngrams_file", f"{lang}.ngrams.npy")
            for lang, params in info.get("subwords", {}).items()
        }
        for name in names.values():
            if not isinstance(name, str) or Path(name).name != name:
                raise ValueError(f"ngrams_file {name!r} is not a file of the space")
    except (TypeError, ValueError, AttributeError) as error:
        raise FormatError(info_path, None, f"a damaged space ({error}); train or align it again") from None
    return names


class SubwordVectors:
    """Vectors for unseen words composed from FastText character n-grams, mapped into the space.

    An unseen word's raw FastText vector is the mean of its n-gram vectors (Bojanowski et al.
    2017); here the n-gram vectors are stored already rotated into the shared space, and the
    word's vector gets the same normalisation as the vocabulary: ``v = unit(v)``, then for each
    centring step ``v = unit(v - mean)``.

    Args:
        ngrams: ``(bucket, dim)`` n-gram vectors (rotated).
        min_n: Shortest n-gram.
        max_n: Longest n-gram.
        mean: ``(dim,)`` or ``(steps, dim)``: the (rotated) means subtracted, in order, after the
            first normalisation; ``None`` for none.
        prefix: Prepended to a word before hashing (``"sw:"`` for a joint model's tagged tokens).
    """

    def __init__(
        self, ngrams: np.ndarray, min_n: int, max_n: int, mean: np.ndarray | None = None, prefix: str = ""
    ) -> None:
        self.ngrams = np.asarray(ngrams, dtype=np.float32)
        self.min_n = int(min_n)
        self.max_n = int(max_n)
        dim = self.ngrams.shape[1]
        means = np.zeros((0, dim), np.float32) if mean is None else np.asarray(mean, np.float32)
        self.mean = means.reshape(-1, dim)
        self.prefix = prefix

    @property
    def bucket(self) -> int:
        """Number of hash buckets."""
        return self.ngrams.shape[0]

    def vector(self, word: str) -> np.ndarray | None:
        """The composed, normalised vector of ``word``, or ``None`` if it has no n-gram."""
        hashes = ft_ngram_hashes(self.prefix + word, self.min_n, self.max_n, self.bucket)
        if not hashes:
            return None
        raw = self.ngrams[hashes].mean(axis=0)
        if not np.any(raw):
            return None
        vector = _unit(raw)
        for mean in self.mean:
            vector = _unit(vector - mean)
        return vector.astype(np.float32)

    def params(self) -> dict[str, Any]:
        """The JSON part of a save."""
        return {"min_n": self.min_n, "max_n": self.max_n, "bucket": self.bucket, "prefix": self.prefix}


class SharedSpace:
    """Word vectors of several languages in one space (English as the pivot).

    Vectors are length-normalised (and centred, when the alignment did so): cosine similarity
    is a dot product, and any two languages can be compared directly.

    Args:
        vectors: Per language code, the in-vocabulary vectors (rows by descending frequency).
        dim: Vector dimension (checked against the vectors; inferred when omitted).
        subwords: Per language, an optional :class:`SubwordVectors` for unseen words.
        meta: Free-form JSON-serialisable description (method, configs, alignment history).

    Raises:
        ConfigError: On no languages or mismatched dimensions.
    """

    def __init__(
        self,
        vectors: Mapping[str, KeyedVectors],
        dim: int | None = None,
        subwords: Mapping[str, SubwordVectors] | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> None:
        if not vectors:
            raise ConfigError("vectors: a SharedSpace needs at least one language")
        dims = {lang: kv.vector_size for lang, kv in vectors.items()}
        dim = dim if dim is not None else next(iter(dims.values()))
        wrong = {lang: d for lang, d in dims.items() if d != dim}
        wrong.update(
            {lang: sw.ngrams.shape[1] for lang, sw in (subwords or {}).items() if sw.ngrams.shape[1] != dim}
        )
        if wrong:
            raise ConfigError(f"dim={dim} but these languages have other dimensions: {wrong}")
        unknown = sorted(set(subwords or {}) - set(vectors))
        if unknown:
            raise ConfigError(f"subwords given for languages without vectors: {unknown}")
        self.vectors = dict(vectors)
        self.subwords = dict(subwords or {})
        self._dim = dim
        self.meta = dict(meta or {})

    # --- lookup -------------------------------------------------------------------------------

    @property
    def dim(self) -> int:
        """Vector dimension."""
        return self._dim

    @property
    def languages(self) -> list[str]:
        """Language codes, sorted."""
        return sorted(self.vectors)

    def _kv(self, lang: str) -> KeyedVectors:
        try:
            return self.vectors[lang]
        except KeyError:
            raise ConfigError(f"language {lang!r} is not in this space; it has {self.languages}") from None

    def vocabulary(self, lang: str) -> list[str]:
        """The in-vocabulary words of ``lang``, most frequent first."""
        return list(self._kv(lang).index_to_key)

    def array(self, lang: str) -> np.ndarray:
        """The ``(V, dim)`` vectors of ``lang``'s vocabulary, in :meth:`vocabulary` order."""
        return self._kv(lang).vectors

    def __contains__(self, item: object) -> bool:
        """``(lang, word) in space``: the word has an in-vocabulary vector."""
        if not isinstance(item, tuple) or len(item) != 2:
            return False
        lang, word = item
        return lang in self.vectors and word in self.vectors[lang].key_to_index

    def lookup(self, lang: str, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Vectors for a token list of one language.

        In-vocabulary tokens get their vector; unseen tokens get a subword-composed vector when
        the language has FastText n-grams, else a zero row.

        Args:
            lang: Language code.
            tokens: Analyzed tokens.

        Returns:
            ``(vectors (n, dim) float32, oov (n,) bool)``; ``oov`` marks the zero rows (no
            vector at all). A subword-composed row is not OOV.

        Raises:
            ConfigError: If ``lang`` is not in the space, or ``tokens`` is a string (its
                characters had been looked up, one row each).
        """
        check_tokens(tokens)
        out = np.zeros((len(tokens), self.dim), dtype=np.float32)
        oov = np.zeros(len(tokens), dtype=bool)
        self._fill(out, np.arange(len(tokens)), lang, tokens, oov)
        return out, oov

    def matrix(self, entries: Sequence[tuple[str, str]]) -> np.ndarray:
        """An embedding matrix with one row per ``(lang, token)`` entry (zero rows for OOV).

        Args:
            entries: ``(language, token)`` pairs, e.g. a reranker's vocabulary (the caller
                reserves row 0 for padding).

        Returns:
            ``(len(entries), dim)`` float32.
        """
        out = np.zeros((len(entries), self.dim), dtype=np.float32)
        for lang, rows in _by_language(entries).items():
            self._fill(out, np.asarray(rows), lang, [entries[i][1] for i in rows])
        return out

    def matrix_sources(self, entries: Sequence[tuple[str, str]]) -> MatrixSources:
        """What :meth:`matrix` copies its rows from, for a caller that gathers them elsewhere
        (e.g. on a GPU, from the language tables copied there:
        :func:`clir.training.data.gather_matrix`)."""
        table = np.full(len(entries), -1, dtype=np.int64)
        row = np.zeros(len(entries), dtype=np.int64)
        tables, composed = [], {}
        for t, (lang, positions) in enumerate(_by_language(entries).items()):
            at = np.asarray(positions, dtype=np.int64)
            vectors, rows, made = self._rows(lang, [entries[i][1] for i in positions])
            known = rows >= 0
            table[at[known]], row[at[known]] = t, rows[known]
            composed.update({int(at[i]): vector for i, vector in made.items()})
            tables.append(vectors)
        return MatrixSources(tables, table, row, composed, self.dim)

    def _rows(self, lang: str, tokens: Sequence[str]) -> tuple[np.ndarray, np.ndarray, dict[int, np.ndarray]]:
        """``lang``'s vectors, each token's row in them (-1: unseen) and the subword-composed
        vectors of the unseen tokens that have one (by position)."""
        kv = self._kv(lang)
        subwords = self.subwords.get(lang)
        get = kv.key_to_index.get
        rows = np.fromiter((get(token, -1) for token in tokens), dtype=np.int64, count=len(tokens))
        composed = {}
        if subwords is not None:
            for i in np.flatnonzero(rows < 0).tolist():
                vector = subwords.vector(tokens[i])
                if vector is not None:
                    composed[i] = vector
        return kv.vectors, rows, composed

    def _fill(
        self, out: np.ndarray, at: np.ndarray, lang: str, tokens: Sequence[str], oov: np.ndarray | None = None
    ) -> None:
        """Write the vectors of ``tokens`` into rows ``at`` of ``out`` (left zero for OOV, which
        ``oov`` marks when given): the known words' rows copied in one gather, subwords composed
        for the others."""
        vectors, rows, composed = self._rows(lang, tokens)
        known = rows >= 0
        out[at[known]] = vectors[rows[known]]
        for i, vector in composed.items():
            out[at[i]] = vector
        if oov is not None:
            oov[~known] = True
            oov[list(composed)] = False

    def translate(
        self,
        words: Sequence[str],
        source: str,
        target: str,
        k: int = 5,
        method: str = "csls",
        csls_k: int = 10,
    ) -> list[list[tuple[str, float]]]:
        """The ``k`` nearest ``target``-language words of each ``source``-language word.

        Args:
            words: Source words (unseen ones use subwords when possible; a word without any
                vector gets ``[]``).
            source: Source language code.
            target: Target language code.
            k: Candidates per word.
            method: ``"nn"`` or ``"csls"``.
            csls_k: CSLS neighbourhood size.

        Returns:
            Per word, ``[(target word, score), ...]`` best first; words of equal score in
            vocabulary order (see :func:`~clir.embeddings.csls.knn`).

        Raises:
            ConfigError: On a language not in the space, ``words`` that is a string (each of
                its characters had been translated), or ``k`` / ``csls_k`` below 1.
        """
        check_tokens(words, "words")
        words = list(words)  # read once (a generator had been used up before its results were made)
        queries, oov = self.lookup(source, words)
        target_vocab = self.vocabulary(target)
        scores, indices = translate(
            queries, self.array(target), k, method=method, csls_k=csls_k, source_background=self.array(source)
        )
        out: list[list[tuple[str, float]]] = []
        for i in range(len(words)):
            pairs = zip(indices[i], scores[i], strict=True)
            out.append([] if oov[i] else [(target_vocab[j], float(s)) for j, s in pairs])
        return out

    # --- persistence --------------------------------------------------------------------------

    def save(self, path: str | Path, *, force: bool = False, beside: Mapping[str, str] | None = None) -> Path:
        """Save atomically: ``<lang>.bin`` (word2vec binary) per language, for subword languages
        ``<lang>.mean.npy`` and an n-gram array ``<lang>.ngrams.npy`` (stored once when several
        languages share one array, as a joint model's unrotated languages do), and ``space.json``
        with the size and SHA-256 of every other file (checked by :meth:`load`).

        Words must not contain a space or a newline (the word2vec format separates on them;
        refused before anything is written); analyzer tokens never do.

        Args:
            path: The directory (a previous space there is replaced; anything else is refused).
            force: Replace a directory that is not a saved space (see
                :func:`~clir.formats.atomic.atomic_directory`).
            beside: ``{file name: text}``: files written into the directory with the space, in
                the same atomic save (a kill leaves the new space with them or the old
                directory, never the space alone); outside the manifest (``heldout.sw.tsv``).

        Returns:
            ``path``.

        Raises:
            ConfigError: If a vector holds a NaN or an infinity (a space :meth:`load` would
                refuse), a word a space or a newline, or a language is not a code of letters
                (its files' names: ``../x`` names one outside ``path``), or a name of ``beside``
                is no plain file name or one of the space's own, before anything is written.
        """
        path = Path(path)
        beside = dict(beside or {})
        for name in beside:  # a file name inside the directory, none that the space writes
            own = name == "space.json" or name.endswith((".bin", ".npy"))
            if (
                own
                or name in ("", ".", "..")
                or name.startswith(".")
                or Path(name).name != name
                or "\\" in name
            ):
                raise ConfigError(f"{name!r} is no file name to save beside a space: {path} not saved")
        if bad_codes := [lang for lang in self.vectors if not _is_language_code(lang)]:
            # each names a file of the space: `../x` had written (over) x.bin beside the space's
            # directory, and `pt-br` a space that load refused
            raise ConfigError(
                f"the space's language {bad_codes[0]!r} is no language code (letters only, like 'sw'), "
                f"which names its files: {path} not saved"
            )
        for lang, kv in self.vectors.items():  # :meth:`load` refuses them: never write one
            if (bad := np.flatnonzero(~np.isfinite(kv.vectors).all(axis=1))).size:
                raise ConfigError(
                    f"the space's vector of {lang} {kv.index_to_key[int(bad[0])]!r} (and {bad.size - 1} "
                    "more) holds a NaN or an infinity: not saved"
                )
            check_words(kv, path)
        with atomic_directory(path, kind="space", force=force) as tmp:
            files = []
            for lang, kv in self.vectors.items():
                save_word2vec(kv, tmp / f"{lang}.bin", binary=True)
                files.append(f"{lang}.bin")
            subword_info: dict[str, dict[str, Any]] = {}
            written: dict[int, str] = {}
            for lang in sorted(self.subwords):
                sub = self.subwords[lang]
                name = written.get(id(sub.ngrams))
                if name is None:
                    name = written[id(sub.ngrams)] = f"{lang}.ngrams.npy"
                    np.save(tmp / name, sub.ngrams, allow_pickle=False)
                    files.append(name)
                np.save(tmp / f"{lang}.mean.npy", sub.mean, allow_pickle=False)
                files.append(f"{lang}.mean.npy")
                subword_info[lang] = {**sub.params(), "ngrams_file": name}
            info = {
                "type": "SharedSpace",
                "clir_version": __version__,
                "dim": self.dim,
                "languages": self.languages,
                "subwords": subword_info,
                "meta": self.meta,
                "files": manifest_of(tmp, files),
            }
            with atomic_write(tmp / "space.json") as out:
                json.dump(info, out, indent=2, sort_keys=True)
            for name, text in beside.items():
                with atomic_write(tmp / name) as out:
                    out.write(text)
        return path

    @classmethod
    def load(cls, path: str | Path, mmap: bool = True, *, verify: bool = False) -> SharedSpace:
        """Load a space written by :meth:`save`, verified against the manifest in ``space.json``.

        Every file's size is compared with the manifest, and the SHA-256 of the smallest files up
        to :data:`~clir.formats.manifest.HASH_BUDGET` bytes (all of them with ``verify``); a
        manifest that omits a file the space's other keys name (``languages``, ``subwords``) is
        refused; a space saved before clir recorded manifests loads with a warning.

        Args:
            path: The directory.
            mmap: Memory-map the n-gram arrays.
            verify: Hash every file.

        Raises:
            DataNotFoundError: If the directory or a file is missing.
            FormatError: If ``space.json`` is not a SharedSpace's or its ``files`` omits a file
                that is read (emptied or cut by hand), or naming a file that does not match the
                manifest (truncated, edited, damaged).
        """
        path = Path(path)
        info_path = path / "space.json"
        if not info_path.is_file():
            raise DataNotFoundError(f"{info_path}: no saved SharedSpace here")
        info = read_typed_json(info_path, "SharedSpace")
        languages = info.get("languages")
        if not isinstance(languages, list) or not all(map(_is_language_code, languages)):
            expected = f"'languages' must be a list of language codes, got {languages!r}"
            raise FormatError(info_path, None, expected)
        ngram_files = _ngram_files(info, info_path, languages)
        read = [f"{lang}.bin" for lang in languages]  # a manifest that omits one is refused
        read += [*dict.fromkeys(ngram_files.values()), *(f"{lang}.mean.npy" for lang in ngram_files)]
        verify_files(path, info, info_path, verify, required=read)
        vectors = {lang: load_word2vec(path / f"{lang}.bin", binary=True) for lang in languages}
        for lang, kv in vectors.items():
            if not np.isfinite(kv.vectors).all():
                raise FormatError(path / f"{lang}.bin", None, "holds a NaN or infinite vector component")
        subwords = {}
        arrays: dict[str, np.ndarray] = {}
        try:
            for lang, params in info.get("subwords", {}).items():
                name = ngram_files[lang]
                if name not in arrays:
                    arrays[name] = np.load(path / name, mmap_mode="r" if mmap else None, allow_pickle=False)
                mean = np.load(path / f"{lang}.mean.npy", allow_pickle=False)
                sizes = params["min_n"], params["max_n"]
                subwords[lang] = SubwordVectors(arrays[name], *sizes, mean, params["prefix"])
            return cls(vectors, info["dim"], subwords, info.get("meta"))
        except ClirError as error:
            raise FormatError(info_path, None, f"does not describe this space: {error}") from None
        except (KeyError, TypeError, ValueError, AttributeError, IndexError) as error:
            what = f"lacks {error}" if isinstance(error, KeyError) else str(error)
            raise FormatError(info_path, None, f"a damaged space ({what}); train or align it again") from None

    @classmethod
    def from_word2vec(
        cls,
        paths: Mapping[str, str | Path],
        binary: bool | None = None,
        limit: int | None = None,
        normalize: bool = True,
    ) -> SharedSpace:
        """A space from already aligned vectors in word2vec format, one file per language
        (e.g. MUSE's or fastText's aligned ``wiki.<lang>.align.vec``).

        Args:
            paths: ``{lang: file}``.
            binary: Force the format (``None``: guess per file).
            limit: Read only the most frequent ``limit`` words of each file.
            normalize: Length-normalise the vectors (cosine = dot product).

        Raises:
            FormatError: Naming a file that cannot be read, or whose dimension differs from the
                first file's (the files cannot hold one space).
        """
        vectors = {}
        first = next(iter(paths), None)
        for lang, file in paths.items():
            kv = load_word2vec(file, binary=binary, limit=limit)
            if normalize:
                kv = make_keyed_vectors(kv.index_to_key, _unit(kv.vectors))
            if kv.vector_size != vectors.get(first, kv).vector_size:  # was a ConfigError naming no file
                raise FormatError(
                    file,
                    None,
                    f"holds {kv.vector_size}-dimensional vectors ({lang}), {paths[first]} "
                    f"{vectors[first].vector_size}-dimensional ones ({first}): not one shared space",
                )
            vectors[lang] = kv
        return cls(vectors, meta={"method": "word2vec-files", "paths": {k: str(v) for k, v in paths.items()}})

    def to_word2vec(self, lang: str, path: str | Path, binary: bool = True) -> Path:
        """Write one language's in-vocabulary vectors in word2vec text or binary format."""
        return save_word2vec(self._kv(lang), path, binary=binary)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{lang}: {len(self.vectors[lang])}" for lang in self.languages)
        return f"SharedSpace(dim={self.dim}, {sizes})"

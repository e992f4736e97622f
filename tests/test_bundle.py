"""The portable bundle (``save_pretrained`` / ``from_pretrained``) and ``clir search``: the bundle
answers a query and a topics file as the pieces it holds do, and searches a collection in a
language it was not trained on (zero-shot) once that collection's tables can be had."""

from __future__ import annotations

import dataclasses
import io
import json
import re
import shutil
import sys
import warnings

import numpy as np
import pytest
from gensim.models import KeyedVectors
from test_union import EN, N_CONCEPTS, tiny_reranker_config, tiny_world

from clir.cli import main
from clir.datasets import Collection
from clir.embeddings import SharedSpace
from clir.errors import ConfigError, DataNotFoundError, FormatError, OutputExistsError
from clir.evaluation import evaluate
from clir.formats import ranked, read_parallel, read_run, write_topics
from clir.pipeline.baselines import BaselineConfig
from clir.pipeline.bundle import Bundle, model_card, read_scores, save_pretrained
from clir.pipeline.features import rerank_collection, train_reranker
from clir.pipeline.tables import learn_tables
from clir.pipeline.trained_with import TRAINED_WITH_FILE, FirstStageSettingsWarning
from clir.translation import TranslationTable
from clir.types import Document, ParallelPair, Query

TL = [f"t{i:02d}x" for i in range(N_CONCEPTS)]


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A tiny model trained on the en-sw world, its pieces on disk, and its bundle; a Tagalog-like
    copy of the collection (the same documents in other words) with parallel text of its own."""
    root = tmp_path_factory.mktemp("bundle")
    collection, tables, space = tiny_world()
    tl_space = {"en": space.vectors["en"], "sw": space.vectors["sw"]}
    kv = KeyedVectors(8)
    kv.add_vectors(TL, np.asarray([space.vectors["sw"][w] for w in collection_words()]))
    space = SharedSpace({**tl_space, "tl": kv}, 8)
    collection.save(root / "sw")
    tables[0].save(root / "tables" / "en-doc")
    tables[1].save(root / "tables" / "doc-en")
    space.save(root / "space")
    config = tiny_reranker_config()
    model = train_reranker(config, collection, space, root / "model", tables=tables)
    bundle = save_pretrained(
        root / "bundle",
        reranker=model,
        space=root / "space",
        tables=root / "tables",
        collection=Collection.load(root / "sw"),
        scores={"en-sw": {"full": {"AP": 0.5}}},
    )
    documents = [
        Document(d.docno, " ".join(TL[int(w[1:3])] for w in d.text.split())) for d in collection.documents
    ]
    tagalog = Collection("tiny-en-tl", "tl", "en", documents, collection.queries, collection.qrels)
    tagalog.save(root / "tl")
    nxt = [(i + 1) % N_CONCEPTS for i in range(N_CONCEPTS)]
    pairs = [ParallelPair(f"p{i}", f"{EN[i]} {EN[j]}", f"{TL[i]} {TL[j]}") for i, j in enumerate(nxt)]
    (root / "tl-parallel.tsv").write_text("".join(f"{p.pair_id}\t{p.source}\t{p.target}\n" for p in pairs))
    return root, model, space, tables, bundle


def collection_words() -> list[str]:
    return [f"s{i:02d}x" for i in range(N_CONCEPTS)]


def test_bundle_layout_and_model_card(trained, tmp_path):
    root, model, _, _, bundle = trained
    config = json.loads((bundle / "config.json").read_text())
    assert (config["type"], config["query_lang"], config["doc_lang"]) == ("clir-bundle", "en", "sw")
    assert config["space_languages"] == ["en", "sw", "tl"] and config["candidates"] == ["qt-bm25"]
    assert config["training_data"]["documents"] == 40 and config["scores"]["en-sw"]["full"]["AP"] == 0.5
    assert (bundle / "reranker" / "seed0" / "model" / "model.safetensors").is_file()
    card = (bundle / "README.md").read_text()
    assert card.startswith("---\nlibrary_name: clir\nlanguage:\n- en\n- sw\n- tl\n")
    assert "| full | 0.5000 |" in card and "Pretrained" not in card
    config["pretraining"] = "pseudo-queries"
    assert "parallel pairs.\nPretrained before on pseudo-queries.\n" in model_card(config)
    del config["pretraining"]
    argv = ["bundle", "--model", str(model), "--space", str(root / "space"), "--tables", str(root / "tables")]
    assert main([*argv, "--collection", str(root / "sw"), "--out", str(tmp_path / "b")]) == 0
    made = json.loads((tmp_path / "b" / "config.json").read_text())
    assert made == {**config, "scores": {}}  # the command writes what save_pretrained writes
    changed = tmp_path / "changed"
    shutil.copytree(bundle, changed)
    config["analyzers"]["en"] = {**config["analyzers"]["en"], "stem": False}
    (changed / "config.json").write_text(json.dumps(config))
    with pytest.warns(UserWarning, match=r"the 'en' analyzer of this clir differs from the bundle's"):
        Bundle.from_pretrained(changed)
    with pytest.raises(DataNotFoundError, match=r"no config\.json; not a clir bundle"):
        Bundle.from_pretrained(root / "space")
    with pytest.raises(DataNotFoundError, match=r"nor in the local Hugging Face hub cache"):
        Bundle.from_pretrained("nobody/no-such-clir-bundle")


def test_a_bundle_and_its_checkpoints_hold_only_what_clir_writes_there(trained, tmp_path):
    """A re-save replaces a bundle (or a checkpoint) only when it holds nothing else: a user's
    file in it had been deleted with it."""
    from clir.formats.atomic import foreign_entry

    root, model, _, _, bundle = trained
    assert foreign_entry(bundle, "bundle") is None
    assert foreign_entry(model / "seed0", "checkpoint") is None
    copy = shutil.copytree(bundle, tmp_path / "b")
    (copy / "reranker" / "seed0" / "notes.txt").write_text("copied with the checkpoint")
    assert foreign_entry(copy, "bundle") is None  # the reranker is a copy, whole
    (copy / "space" / "notes.txt").write_text("mine")
    assert foreign_entry(copy, "bundle") == copy / "space" / "notes.txt"
    args = {"reranker": model, "space": root / "space", "tables": root / "tables"}
    with pytest.raises(OutputExistsError, match=r"b is a clir 'bundle' output holding .*space/notes\.txt"):
        save_pretrained(copy, collection=Collection.load(root / "sw"), **args)
    assert (copy / "space" / "notes.txt").read_text() == "mine"


@pytest.mark.parametrize("analyzers", [["en", "sw"], {"en": "stopwords", "sw": {}}, None])
def test_a_bundle_whose_analyzers_are_no_mapping_names_its_config(analyzers, trained, tmp_path, capsys):
    """A bundle's config.json whose analyzers was a list failed in clir search as "unexpected
    AttributeError: 'list' object has no attribute 'items'", naming no file."""
    root, _, _, _, bundle = trained
    damaged = tmp_path / "damaged"
    shutil.copytree(bundle, damaged)
    config = json.loads((damaged / "config.json").read_text())
    (damaged / "config.json").write_text(json.dumps({**config, "analyzers": analyzers}))
    argv = ["search", "--bundle", str(damaged), "--collection", str(root / "sw"), "--query", "water"]
    assert main([*argv, "--no-index-cache"]) == 2
    assert capsys.readouterr().err.startswith(
        f"clir: error: {damaged / 'config.json'}: analyzers must be {{language: settings}}, got "
    )


def _files(root):
    return sorted(p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file())


def test_a_bundle_copies_the_model_and_nothing_else_of_its_directory(trained, tmp_path):
    """save_pretrained copied the whole reranker directory: the whole checkpoints that saves
    killed as they swapped a member in had left beside it, old members no longer listed and
    whatever else lay there went into the bundle (and a hub upload)."""
    import subprocess

    from clir.training.ensemble import write_ensemble

    root, model, _, _, bundle = trained
    child = subprocess.Popen(["true"])
    child.wait()  # a process that is gone: its saves were killed
    source = tmp_path / "model"
    shutil.copytree(model, source)
    wanted = _files(source)
    for stray in (
        f".seed0.{child.pid}.abcd_123.tmp",
        f".seed0.{child.pid}.x1y2z3w4.old",
        ".seed0.k2j3h4g5.tmp",
    ):
        shutil.copytree(source / "seed0", source / stray)
    (source / ".ensemble.json.q8w7e6r5.tmp").write_text("{")
    (source / "seed0" / ".first_stage_settings.json.a1b2c3d4.tmp").write_text("{")
    shutil.copytree(source / "seed0", source / "seed5")  # a member of an earlier, larger ensemble
    (source / "oof.run").write_text("q1 Q0 d1 1 1.0 cv\n")
    (source / "notes").mkdir()
    (source / "notes" / "mine.txt").write_text("mine")
    argv = [
        "--space",
        str(root / "space"),
        "--tables",
        str(root / "tables"),
        "--collection",
        str(root / "sw"),
    ]
    assert main(["bundle", "--model", str(source), *argv, "--out", str(tmp_path / "b")]) == 0
    assert _files(tmp_path / "b" / "reranker") == wanted
    # a cross-validation's fold<f>/seed<s> members are copied, not what lies beside them
    (source / "fold0").mkdir()
    (source / "seed0").rename(source / "fold0" / "seed0")
    (source / "seed5").rename(source / "fold0" / f".seed0.{child.pid}.abcd_123.old")
    write_ensemble(source, [source / "fold0" / "seed0"])
    assert main(["bundle", "--model", str(source), *argv, "--out", str(tmp_path / "cv")]) == 0
    assert _files(tmp_path / "cv" / "reranker") == [name.replace("seed0/", "fold0/seed0/") for name in wanted]
    # and the bundles answer as the one of the clean directory does
    collection = Collection.load(root / "sw")
    queries = collection.split("test")
    expected = Bundle.from_pretrained(bundle).search(collection, queries, log=lambda line: None)
    for made in ("b", "cv"):
        found = Bundle.from_pretrained(tmp_path / made).search(collection, queries, log=lambda line: None)
        assert found == expected


def _explain_argv(root, model):
    return ["explain", "--model", str(model), "--collection", str(root / "sw"), "--space", f"{root}/space"]


def _as_tagalog_tables(tables, out):
    """The en-sw tables saved as if they translated en-tl (a pair the model was not trained on)."""
    for table, name in ((tables[0], "en-doc"), (tables[1], "doc-en")):
        langs = ("en", "tl") if name == "en-doc" else ("tl", "en")
        TranslationTable(table.source_vocab, table.target_vocab, table.probs, *langs).save(out / name)


def test_tables_of_another_pair_or_a_space_of_another_size_are_refused(trained, tmp_path, capsys):
    """bundle and explain --tables used en-tl tables on a Swahili collection silently (rerank and
    search refused them), and rerank scored with a space of another dimension."""
    root, model, _, tables, _ = trained
    _as_tagalog_tables(tables, tmp_path / "tl")
    argv = ["bundle", "--model", str(model), "--space", str(root / "space"), "--collection", str(root / "sw")]
    assert main([*argv, "--tables", str(tmp_path / "tl"), "--out", str(tmp_path / "b")]) == 2
    assert "translation tables of en-tl" in capsys.readouterr().err and not (tmp_path / "b").exists()
    collection = Collection.load(root / "sw")
    query, docno = collection.split("test")[0], collection.documents[0].docno
    argv = _explain_argv(root, model)
    argv += ["--qid", query.qid, "--docno", docno, "--tables", str(tmp_path / "tl")]
    assert main(argv) == 2
    assert "translation tables of en-tl" in capsys.readouterr().err
    small = SharedSpace({lang: KeyedVectors(4) for lang in ("en", "sw")}, 4)
    for lang in ("en", "sw"):
        small.vectors[lang].add_vectors(["w"], np.ones((1, 4)))
    small.save(tmp_path / "small")
    argv = [
        "rerank",
        "--model",
        str(model),
        "--collection",
        str(root / "sw"),
        "--space",
        str(tmp_path / "small"),
    ]
    assert main([*argv, "--tables", str(root / "tables"), "--out", str(tmp_path / "r.run")]) == 2
    assert "the space has 4 dimensions, the model was trained on 8" in capsys.readouterr().err


def test_search_equals_its_pieces_and_goes_zero_shot(trained, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))  # the default index cache
    root, model, space, tables, bundle = trained
    collection = Collection.load(root / "sw")
    queries = collection.split("test")
    expected = rerank_collection(model, collection, space, split=queries, tables=tables)
    assert Bundle.from_pretrained(bundle).search(collection, queries) == expected

    topics = tmp_path / "topics.tsv"
    write_topics(topics, queries)
    run = tmp_path / "sw.run"
    argv = ["search", "--bundle", str(bundle), "--collection", str(root / "sw")]
    assert main([*argv, "--topics", str(topics), "--out", str(run)]) == 0
    assert read_run(run) == expected  # scores are written exactly
    assert capsys.readouterr().err == "clir search: [run]    index\n"
    assert (tmp_path / "xdg" / "clir" / "search" / "steps" / "index.json").is_file()
    assert main([*argv, "--topics", str(topics), "--out", str(run), "--quiet"]) == 0
    assert capsys.readouterr().err == ""  # --quiet: not even the cache's line
    assert main([*argv, "--query", queries[0].text, "--k", "3", "--snippet", "12"]) == 0
    lines = capsys.readouterr().out.splitlines()
    top = ranked(expected[queries[0].qid])  # the first stage searched as deep as ever, three shown
    assert [line.split()[2] for line in lines] == [docno for docno, _ in top[:3]]
    assert lines[0].split()[0] == "1" and lines[0].endswith("…") and len(lines[0].split("  ")[-1]) == 12

    # zero-shot: the same documents in another language of the space; tables from its own parallel text
    tagalog = root / "tl"
    argv = ["search", "--bundle", str(bundle), "--collection", str(tagalog), "--topics", str(topics)]
    assert main([*argv, "--out", str(tmp_path / "tl.run")]) == 2
    assert "pass --tables DIR (tables written by 'clir tables') or --parallel FILE" in capsys.readouterr().err
    assert main([*argv, "--parallel", str(root / "tl-parallel.tsv"), "--out", str(tmp_path / "tl.run")]) == 0
    collection = Collection.load(tagalog)
    collection.parallel = read_parallel(root / "tl-parallel.tsv")
    expected = rerank_collection(model, collection, space, split=queries, tables=learn_tables(collection))
    assert read_run(tmp_path / "tl.run") == expected
    assert all(len(expected[q.qid]) >= 10 for q in queries)
    # the same documents in other words: zero-shot finds them about as well (0.35 vs 0.33 here;
    # a random order of 40 documents with 2 relevant gives about 0.1)
    assert evaluate(expected, collection.qrels_of("test"), ["AP"])["AP"] > 0.25


def test_search_refuses_parallel_text_it_would_not_learn_from(trained, tmp_path, capsys):
    """A collection in the bundle's training language was searched with the bundle's tables, its
    --parallel text ignored silently; with --tables DIR the tables are learned from it."""
    root, _, _, _, bundle = trained
    topics = tmp_path / "topics.tsv"
    write_topics(topics, Collection.load(root / "sw").split("test"))
    argv = ["search", "--bundle", str(bundle), "--collection", str(root / "sw"), "--no-index-cache"]
    argv += ["--topics", str(topics), "--out", str(tmp_path / "sw.run"), "--quiet"]
    assert main([*argv, "--parallel", str(root / "tl-parallel.tsv")]) == 2
    assert capsys.readouterr().err == (
        f"clir: error: --parallel {root / 'tl-parallel.tsv'} has no effect: the collection is in the "
        "bundle's training language (sw), searched with the bundle's tables; to learn tables from the "
        "parallel text instead, add --tables DIR (a new directory)\n"
    )
    assert not (tmp_path / "sw.run").exists()


def test_search_prints_what_the_terminal_cannot_encode_escaped(trained, monkeypatch):
    """A snippet's "…" (or a Chichewa "ŵ") on a stdout that cannot encode it had been an
    "unexpected UnicodeEncodeError" (PYTHONIOENCODING=ascii, a cp1252 file on Windows)."""
    root, _, _, _, bundle = trained
    out = io.TextIOWrapper(io.BytesIO(), encoding="ascii")
    monkeypatch.setattr(sys, "stdout", out)
    argv = ["search", "--bundle", str(bundle), "--collection", str(root / "sw"), "--no-index-cache"]
    assert main([*argv, "--query", f"{EN[0]} {EN[1]}", "--k", "2", "--snippet", "10", "--quiet"]) == 0
    out.flush()
    lines = out.buffer.getvalue().decode("ascii").splitlines()
    assert len(lines) == 2 and all(line.endswith("\\u2026") for line in lines)


def test_rerank_tells_an_ensemble_from_one_of_its_seeds(trained, tmp_path, capsys):
    root, model, _, _, _ = trained
    argv = [
        "rerank",
        "--collection",
        str(root / "sw"),
        "--space",
        str(root / "space"),
        "--tables",
        str(root / "tables"),
    ]
    assert main([*argv, "--model", str(model), "--out", str(tmp_path / "a.run")]) == 0
    assert (
        f"reranked by the ensemble {model} (1 member(s), scores averaged: seed0)" in capsys.readouterr().out
    )
    assert main([*argv, "--model", str(model / "seed0"), "--out", str(tmp_path / "b.run")]) == 0
    assert f"reranked by the single checkpoint {model / 'seed0'}" in capsys.readouterr().out


def test_train_refuses_a_user_directory_where_a_member_goes_before_any_work(
    trained, tmp_path, capsys, monkeypatch
):
    """clir train --out X with a seed0/ of the user's in X failed after an epoch, saying to pass
    --force, which did not help: it is refused before the features are built, with a remedy."""
    from clir.formats.atomic import artefact_kind, output_directory
    from clir.pipeline.features import CollectionFeatures
    from clir.training import save_config

    root = trained[0]

    def no_work(*args, **kwargs):
        raise AssertionError("features were built")

    monkeypatch.setattr(CollectionFeatures, "build", no_work)
    save_config(tiny_reranker_config(), tmp_path / "train.yaml")
    out, user = tmp_path / "out", tmp_path / "out" / "seed0"
    user.mkdir(parents=True)
    (user / "notes.txt").write_text("mine")
    argv = ["train", "--config", str(tmp_path / "train.yaml"), "--collection", str(root / "sw")]
    argv += ["--space", str(root / "space"), "--tables", str(root / "tables"), "--out", str(out)]
    expected = (
        f"clir: error: {user} is a directory that clir did not write, where this training writes the "
        "checkpoint of its member seed0; move or rename it, or choose another --out (--force does not "
        "write over it); clir never deletes what it did not create\n"
    )
    assert main([*argv, "--force"]) == 2  # a user's --out claimed by --force, but not its seed0
    assert capsys.readouterr().err == expected
    assert artefact_kind(out) is None  # refused before --force marked it
    output_directory(out, kind="reranker", force=True)  # a clir reranker directory, with a user's seed0
    for force in ([], ["--force"]):
        assert main([*argv, *force]) == 2
        assert capsys.readouterr().err == expected
    assert [p.name for p in user.iterdir()] == ["notes.txt"]


def test_train_into_an_out_another_training_holds_is_refused_before_the_features(
    trained, tmp_path, monkeypatch, capsys
):
    # a second `clir train --out M` (or a --resume) beside a running one built its features for
    # minutes, then swapped its members in among the other's
    import os

    from test_concurrent_saves import held_by_another_thread

    from clir.formats.atomic import lock_holder, output_directory
    from clir.pipeline.features import CollectionFeatures
    from clir.training import save_config

    root = trained[0]

    def no_work(*args, **kwargs):
        raise AssertionError("features were built")

    monkeypatch.setattr(CollectionFeatures, "build", no_work)
    save_config(tiny_reranker_config(), tmp_path / "train.yaml")
    out = tmp_path / "out"
    output_directory(out, kind="reranker")
    argv = ["train", "--config", str(tmp_path / "train.yaml"), "--collection", str(root / "sw")]
    argv += ["--space", str(root / "space"), "--tables", str(root / "tables"), "--out", str(out), "--resume"]
    with held_by_another_thread(out):
        named = "" if lock_holder(out) is None else f" (PID {os.getpid()})"  # as /proc/locks tells
        assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"clir: error: {out} is in use by another clir run{named}; wait for it")


def test_init_from_on_the_command_line_over_the_config_s_is_named(trained, tmp_path, monkeypatch, capsys):
    # `clir train --init-from B` with `optim.init_from: A` in the YAML trained from B, silently
    from clir.pipeline.features import CollectionFeatures
    from clir.training import save_config

    root, model = trained[0], trained[1]

    def no_work(*args, **kwargs):
        raise AssertionError("features were built")

    monkeypatch.setattr(CollectionFeatures, "build", no_work)
    config = tiny_reranker_config()
    config.optim.init_from = str(model)
    save_config(config, tmp_path / "train.yaml")
    argv = ["train", "--config", str(tmp_path / "train.yaml"), "--collection", str(root / "sw")]
    argv += ["--space", str(root / "space"), "--tables", str(root / "tables"), "--out", str(tmp_path / "o")]
    other = model / "seed0"
    assert main([*argv, "--init-from", str(other)]) == 2  # (past the options: the stub's error)
    err = capsys.readouterr().err
    assert (
        f"clir: warning: --init-from {other} replaces {tmp_path / 'train.yaml'}'s optim.init_from {model}\n"
        in err
    )
    assert "features were built" in err
    assert main([*argv, "--init-from", str(model / "seed0" / "..")]) == 2  # the same model, written otherwise
    err = capsys.readouterr().err
    assert "features were built" in err and "replaces" not in err


def test_rerank_keeps_the_documents_id_tables_in_the_index_cache(trained, tmp_path, monkeypatch):
    from clir.training import idtables

    root, model, _, _, _ = trained
    argv = ["rerank", "--model", str(model), "--collection", str(root / "sw"), "--space", str(root / "space")]
    argv += ["--tables", str(root / "tables")]
    assert main([*argv, "--out", str(tmp_path / "plain.run")]) == 0
    cache = tmp_path / "cache"
    sources = []  # the files are keyed by the index step's key, not by a digest of the tokens
    key = idtables.input_key
    monkeypatch.setattr(idtables, "input_key", lambda *a: sources.append(a[2]) or key(*a))
    for name in ("cold.run", "warm.run"):  # the first call writes the tables, the second reads them
        assert main([*argv, "--index-cache", str(cache), "--out", str(tmp_path / name)]) == 0
    assert len(sources) == 4 and all(source is not None for source in sources)
    assert len(list((cache / "id-tables").glob("*.npz"))) == 2  # the documents' two views
    plain = (tmp_path / "plain.run").read_bytes()
    assert (tmp_path / "cold.run").read_bytes() == plain == (tmp_path / "warm.run").read_bytes()


def test_rerank_quiet_prints_no_index_cache_step_line(trained, tmp_path, capsys):
    """--quiet promises "no progress bars or step lines", but --index-cache's "[run]    index" /
    "[cached] index" was printed all the same."""
    root, model, _, _, _ = trained
    argv = ["rerank", "--model", str(model), "--collection", str(root / "sw"), "--space", str(root / "space")]
    argv += ["--tables", str(root / "tables"), "--index-cache", str(tmp_path / "cache")]
    wrote = f"wrote {tmp_path / 'r.run'}: "
    assert main([*argv, "--out", str(tmp_path / "r.run"), "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(wrote) and len(out.splitlines()) == 1
    assert main([*argv, "--out", str(tmp_path / "r.run")]) == 0  # without --quiet: the step line
    out = capsys.readouterr().out
    assert out.startswith("[cached] index\n" + wrote) and len(out.splitlines()) == 2


def test_rerank_refuses_a_run_of_other_queries_and_a_cache_inside_an_input(trained, tmp_path, capsys):
    """An audit of 2026-12-06: a --run of other qids (another tool's, another split's) was reranked
    into an empty run with exit 0, and --index-cache inside the collection was written there."""
    root, model, _, _, _ = trained
    argv = ["rerank", "--model", str(model), "--collection", str(root / "sw"), "--space", str(root / "space")]
    argv += ["--tables", str(root / "tables")]
    test = [query.qid for query in Collection.load(root / "sw").split("test")]
    (tmp_path / "other.run").write_text("q1 Q0 d001 1 3 x\n")
    assert main([*argv, "--run", str(tmp_path / "other.run"), "--out", str(tmp_path / "a.run")]) == 2
    assert "ranks no document for any of the" in capsys.readouterr().err
    assert not (tmp_path / "a.run").exists()
    assert main([*argv, "--out", str(tmp_path / "full.run")]) == 0
    full = read_run(tmp_path / "full.run")
    docno = next(iter(full[test[0]]))
    (tmp_path / "one.run").write_text(f"{test[0]} Q0 {docno} 1 3 x\nq1 Q0 {docno} 1 3 x\n")
    assert main([*argv, "--run", str(tmp_path / "one.run"), "--out", str(tmp_path / "b.run")]) == 0
    err = capsys.readouterr().err
    assert "1 of its queries are not --split test queries and are left out: ['q1']" in err
    assert f"ranks no document for {len(test) - 1} --split test queries" in err
    inside = root / "sw" / "cache"
    assert main([*argv, "--index-cache", str(inside), "--out", str(tmp_path / "c.run")]) == 2
    assert "choose another --index-cache" in capsys.readouterr().err and not inside.exists()
    # --parallel beside a --tables that holds tables went unused, silently
    parallel = ["--parallel", str(root / "tl-parallel.tsv")]
    assert main([*argv, *parallel, "--out", str(tmp_path / "d.run")]) == 0
    assert f"--parallel {root / 'tl-parallel.tsv'} is not learned from: --tables" in capsys.readouterr().err
    assert (tmp_path / "d.run").read_bytes() == (tmp_path / "full.run").read_bytes()


def test_search_keeps_the_index_until_the_collection_changes(trained, tmp_path, capsys, monkeypatch):
    from clir.pipeline.features import CollectionFeatures

    root, model, space, tables, bundle = trained
    built = []
    build = CollectionFeatures.build.__func__
    monkeypatch.setattr(
        CollectionFeatures, "build", classmethod(lambda *a, **k: built.append(1) or build(*a, **k))
    )
    collection = Collection.load(root / "sw")
    query = collection.split("test")[0].text
    expected = rerank_collection(model, collection, space, split=collection.split("test")[:1], tables=tables)
    assert len(built) == 1

    def search(path) -> tuple[list[str], str]:
        argv = ["search", "--bundle", str(bundle), "--collection", str(path), "--query", query, "--k", "5"]
        assert main([*argv, "--index-cache", str(tmp_path / "cache")]) == 0
        captured = capsys.readouterr()
        return [line.split()[2] for line in captured.out.splitlines()], captured.err

    top5 = [docno for docno, _ in ranked(next(iter(expected.values())))[:5]]
    assert search(root / "sw") == (top5, "clir search: [run]    index\n") and len(built) == 2
    assert search(root / "sw") == (top5, "clir search: [cached] index\n") and len(built) == 2
    shutil.copytree(root / "sw", tmp_path / "copy")  # keyed by contents, not by path
    assert search(tmp_path / "copy") == (top5, "clir search: [cached] index\n") and len(built) == 2
    (step,) = (tmp_path / "cache" / "steps").glob("index-*")
    text = (step / "documents.json").read_text()
    (step / "documents.json").write_text(text[: len(text) // 2])  # a damaged cache is rebuilt
    found, said = search(root / "sw")
    assert found == top5 and len(built) == 3
    assert said.startswith("clir: warning: step index (") and "documents.json" in said
    assert said.endswith("rebuilding it from scratch\nclir search: [rebuild] index\n")
    changed = Collection.load(root / "sw")
    first = changed.documents[0]
    changed.documents[0] = Document(first.docno, first.text + " " + first.text.split()[0])
    changed.save(tmp_path / "changed")
    assert search(tmp_path / "changed")[1] == "clir search: [run]    index\n" and len(built) == 4
    assert len(list((tmp_path / "cache" / "steps").glob("index-*"))) == 2
    # the indexes only: each query's candidates' id tables had been kept too, two files a query
    assert not list((tmp_path / "cache").glob("id-tables/*"))


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b'{"x": 1}', 'a JSON object with "systems"'),  # was: unexpected KeyError: 'systems'
        (b"[1]", 'a JSON object with "systems"'),  # unexpected TypeError
        (b'{"systems": 5}', 'a JSON object with "systems"'),  # unexpected AttributeError
        (b'{"systems": {"qt-bm25": {"AP": 0.5}}}', r'systems\.qt-bm25 is \{"AP": 0\.5\}: .* clir baselines'),
        (
            b'{"systems": {"en-sw": {"full": {"AP": "high"}}}}',
            r'systems\.en-sw\.full is \{"AP": "high"\}; expected',
        ),
        (b'{"systems": {"en-sw": 5}}', r"systems\.en-sw is 5; expected an experiment's results\.json"),
        (b"\xff\xfe{}", "invalid JSON"),  # unexpected UnicodeDecodeError
        (b'{"systems": ', "invalid JSON"),
    ],
)
def test_bundle_scores_that_are_no_results_json_name_the_file(trained, tmp_path, capsys, content, match):
    root, model, _, _, _ = trained
    scores = tmp_path / "scores.json"
    scores.write_bytes(content)
    with pytest.raises(FormatError, match=rf"^{re.escape(str(scores))}: .*{match}"):
        read_scores(scores)
    argv = ["bundle", "--model", str(model), "--space", str(root / "space"), "--tables", str(root / "tables")]
    argv += ["--collection", str(root / "sw"), "--out", str(tmp_path / "b"), "--scores", str(scores)]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(f"clir: error: {scores}: ")
    assert not (tmp_path / "b").exists()


def test_bundle_scores_of_a_baselines_results_json_say_what_is_expected(tmp_path, capsys):
    # what clir baselines writes: systems {system: {measure: value}}, one level short of an
    # experiment's {pair: {system: {measure: value}}}; it said "systems.qt-bm25.AP must map
    # measures to numbers", naming neither the file wanted nor what it got
    scores = tmp_path / "results.json"
    systems = {"qt-bm25": {"AP": 0.25, "P@10": 0.025}, "qt-ql": {"AP": 0.3, "P@10": 0.05}}
    scores.write_text(json.dumps({"collection": "bible-en-sw", "config": {}, "systems": systems}))
    argv = ["bundle", "--model", str(tmp_path / "m"), "--space", str(tmp_path / "s"), "--tables"]
    argv += [str(tmp_path / "t"), "--collection", str(tmp_path / "c"), "--out", str(tmp_path / "b")]
    assert main([*argv, "--scores", str(scores)]) == 2
    assert capsys.readouterr().err == (
        f'clir: error: {scores}: systems.qt-bm25 is {{"AP": 0.25, "P@10": 0.025}}: systems {{system: '
        "{measure: value}}, as in a clir baselines results.json; expected an experiment's results.json "
        "(clir experiment): systems {pair: {system: {measure: value}}}\n"
    )
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize("name", ["", " ", "two\nlines"])
def test_bundle_refuses_a_name_that_is_no_title(name, tmp_path, capsys):
    """clir bundle --name "" wrote a model card headed "# " (and "a\\nb" one whose title ran into
    its text), before any check."""
    collection = tmp_path / "c"
    queries, qrels = {"test": [Query("q1", "water")]}, {"q1": {"d1": 1}}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, qrels).save(collection)
    argv = ["bundle", "--model", str(tmp_path / "m"), "--space", str(tmp_path / "s"), "--tables"]
    argv += [str(tmp_path / "t"), "--collection", str(collection), "--out", str(tmp_path / "b")]
    assert main([*argv, "--name", name]) == 2
    assert capsys.readouterr().err == (
        f"clir: error: name={name!r}: the model card's title must be one line of text\n"
    )
    assert not (tmp_path / "b").exists()


def test_bundle_scores_of_a_results_json(tmp_path):
    scores = tmp_path / "results.json"
    scores.write_bytes(b'\xef\xbb\xbf{"systems": {"en-sw": {"full": {"AP": 0.5, "P@10": 1}}}, "timings": {}}')
    assert read_scores(scores) == {"en-sw": {"full": {"AP": 0.5, "P@10": 1}}}


def test_rerank_names_the_run_file_and_line_of_a_docno_outside_the_collection(trained, tmp_path, capsys):
    """A --run of another collection's documents failed with "candidates [...] are not documents
    of the collection", naming neither the run nor the line, after the tables were learned."""
    root, model, _, _, _ = trained
    argv = ["rerank", "--model", str(model), "--collection", str(root / "sw"), "--space", str(root / "space")]
    argv += ["--tables", str(tmp_path / "new-tables")]
    qid = Collection.load(root / "sw").split("test")[0].qid
    run = tmp_path / "other.run"
    run.write_text(f"q-other Q0 elsewhere 1 4 x\n{qid} Q0 d001 1 3 x\n{qid} Q0 elsewhere 2 2 x\n")
    assert main([*argv, "--run", str(run), "--out", str(tmp_path / "a.run")]) == 2
    err = capsys.readouterr().err
    assert f"clir: error: {run}:3: docno 'elsewhere' is not a document of --collection {root / 'sw'}" in err
    assert not (tmp_path / "a.run").exists() and not (tmp_path / "new-tables").exists()


def test_explain_gives_no_rank_to_a_document_the_first_stages_missed(trained, capsys, monkeypatch):
    """explain printed "rank 12 among the candidates" for a document the first stages had not
    returned (added to the candidates), and "rank 1" for any document of a query retrieving nothing."""
    import clir.pipeline.explain as explain_module

    root, model, _, _, _ = trained
    collection = Collection.load(root / "sw")
    query = collection.split("test")[0]
    real, runs = explain_module.search_candidates, []

    def missing(drop):  # the first stages' candidates, less ``drop``
        def search(*args):
            run = real(*args)
            runs.append(dict(run[query.qid]))
            return {query.qid: {d: s for d, s in run[query.qid].items() if d not in drop}}

        return search

    argv = [*_explain_argv(root, model), "--tables", str(root / "tables"), "--qid", query.qid]
    monkeypatch.setattr(explain_module, "search_candidates", missing(set()))
    docno = collection.documents[0].docno
    assert main([*argv, "--docno", docno]) == 0
    (docno, _), *_ = ranked(runs[-1])
    assert main([*argv, "--docno", docno]) == 0
    (first,) = [line for line in capsys.readouterr().out.splitlines() if f"/ {docno}: " in line]
    assert re.search(rf", rank \d+ among the {len(runs[-1])} candidates$", first), first

    monkeypatch.setattr(explain_module, "search_candidates", missing({docno}))
    explained = explain_module.explain_pair(
        model, collection, root / "space", query.qid, docno, tables_dir=root / "tables"
    )
    assert (explained.candidate, explained.candidates) == (False, len(runs[-1]) - 1)
    monkeypatch.setattr(explain_module, "search_candidates", lambda *args: {})  # retrieves nothing
    assert main([*argv, "--docno", docno]) == 0
    first = capsys.readouterr().out.splitlines()[0]
    assert first.endswith(", not among the 0 candidates of the first stages; scored as if added to them")
    assert "rank" not in first


@pytest.fixture(scope="module")
def trained_with_settings(trained, tmp_path_factory):
    """A tiny model trained with other first-stage settings than the baselines' defaults."""
    root, _, space, tables, _ = trained
    baseline = BaselineConfig(model_params={"bm25": {"k1": 0.6, "b": 0.3}, "ql": {"mu": 50}}, spelling=None)
    out = tmp_path_factory.mktemp("settings") / "model"
    model = train_reranker(
        tiny_reranker_config(["qt-bm25", "psq-ql"]),
        Collection.load(root / "sw"),
        space,
        out,
        tables=tables,
        baseline=baseline,
    )
    return model, baseline


def test_a_model_reranks_with_the_first_stage_settings_it_was_trained_with(
    trained, trained_with_settings, tmp_path
):
    """rerank, bundle + search, explain and the CLI built a model's candidates and features with
    the default first-stage settings whatever the model was trained with: other numbers, silently."""
    root, _, space, tables, _ = trained
    model, baseline = trained_with_settings
    collection = Collection.load(root / "sw")
    queries = collection.split("test")
    rerank = {"split": queries, "tables": tables}
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the model's own settings: nothing to warn of
        given = rerank_collection(model, collection, space, baseline=baseline, **rerank)
        assert rerank_collection(model, collection, space, **rerank) == given
    with pytest.warns(FirstStageSettingsWarning, match=r"model_params .*'k1': 0\.6.* -> \{\}"):
        default = rerank_collection(model, collection, space, baseline=BaselineConfig(), **rerank)
    assert default != given

    bundle = save_pretrained(
        tmp_path / "bundle",
        reranker=model,
        space=root / "space",
        tables=root / "tables",
        collection=collection,
    )
    assert (
        json.loads((bundle / "config.json").read_text())["first_stage"]["model_params"]
        == baseline.model_params
    )
    assert Bundle.from_pretrained(bundle).search(collection, queries) == given

    argv = ["rerank", "--model", str(model), "--collection", str(root / "sw"), "--space", str(root / "space")]
    assert main([*argv, "--tables", str(root / "tables"), "--out", str(tmp_path / "cli.run")]) == 0
    assert read_run(tmp_path / "cli.run") == given

    from clir.pipeline.explain import explain_pair

    query = queries[0]
    docno = ranked(given[query.qid])[0][0]
    explain = {"tables_dir": root / "tables"}
    explained = [
        explain_pair(model, collection, space, query.qid, docno, baseline=settings, **explain)
        for settings in (None, baseline)
    ]
    with pytest.warns(FirstStageSettingsWarning):
        explained.append(
            explain_pair(model, collection, space, query.qid, docno, baseline=BaselineConfig(), **explain)
        )
    own, given_explained, default_explained = [(e.score, e.inputs) for e in explained]
    assert own == given_explained != default_explained

    # a model saved before the settings were recorded reranks with the defaults, as it did
    old = tmp_path / "old"
    shutil.copytree(model, old)
    (old / TRAINED_WITH_FILE).unlink()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert rerank_collection(old, collection, space, **rerank) == default


def test_search_and_rerank_refuse_a_k_or_depth_below_1_and_search_takes_a_split_name(trained):
    """Bundle.search(k=-3) returned all but the last 3 documents, k=0 empty rankings;
    rerank_collection(depth=-5) cut candidates off and depth=0 meant the default; and
    Bundle.search(collection, "test") failed with an AttributeError."""
    from clir.errors import ConfigError
    from clir.training.ensemble import rerank, rerank_parts

    root, model, space, tables, bundle = trained
    collection = Collection.load(root / "sw")
    loaded = Bundle.from_pretrained(bundle)
    for k in (0, -3, 2.5, True):
        with pytest.raises(ConfigError, match=rf"^k must be a positive integer, got {re.escape(repr(k))}$"):
            loaded.search(collection, collection.split("test"), k=k)
    for depth in (0, -5):
        match = rf"^depth must be a positive integer, got {depth}$"
        with pytest.raises(ConfigError, match=match):
            rerank_collection(model, collection, space, split="test", tables=tables, depth=depth)
        with pytest.raises(ConfigError, match=match):
            rerank(model, None, space=space, depth=depth)
        with pytest.raises(ConfigError, match=match):
            rerank_parts(model, None, space=space, depth=depth)
    queries = collection.split("test")
    assert loaded.search(collection, "test", k=5, log=lambda line: None) == loaded.search(
        collection, queries, k=5, log=lambda line: None
    )
    with pytest.raises(ConfigError, match="nosuch"):
        loaded.search(collection, "nosuch")
    numpy_k = loaded.search(collection, queries, k=np.int64(5), log=lambda line: None)  # numpy ints are ints
    assert numpy_k == loaded.search(collection, queries, k=5, log=lambda line: None)


@pytest.mark.filterwarnings("ignore:.*no term in the index")
def test_queries_that_retrieve_nothing_give_empty_rankings_in_search_and_rerank(trained, tmp_path, capsys):
    """When no query had a candidate (`clir search --query "zzz"`, a split of such queries),
    rerank_collection asked the reranker for depth 0 and failed with "depth must be a positive
    integer, got 0", an option the user never gave; an empty ranking is what a query gets."""
    root, model, space, tables, bundle = trained
    collection = Collection.load(root / "sw")
    nothing = [Query("z1", "zzz qqq"), Query("z2", "the")]
    loaded = Bundle.from_pretrained(bundle)
    assert loaded.search(collection, nothing, k=5, log=lambda line: None) == {"z1": {}, "z2": {}}
    assert rerank_collection(model, collection, space, split=nothing, tables=tables) == {"z1": {}, "z2": {}}
    argv = ["search", "--bundle", str(bundle), "--collection", str(root / "sw"), "--no-index-cache"]
    assert main([*argv, "--query", "zzz qqq"]) == 0
    assert capsys.readouterr().out == ""
    topics = tmp_path / "nothing.tsv"
    write_topics(topics, nothing)
    run = tmp_path / "nothing.run"
    assert main([*argv, "--topics", str(topics), "--out", str(run)]) == 0
    assert run.read_text() == ""


def test_bundle_refuses_a_collection_of_another_language_than_the_model_was_trained_on(trained, tmp_path):
    """The card, the bundle's doc_lang and its own tables came from --collection alone: the en-sw
    model bundled with the Tagalog collection (and en-tl tables) became a "Tagalog" bundle whose
    card called that collection its training data."""
    root, model, _, tables, _ = trained
    _as_tagalog_tables(tables, tmp_path / "tl-tables")
    args = {"reranker": model, "space": root / "space", "tables": tmp_path / "tl-tables"}
    with pytest.raises(
        ConfigError, match="trained on 'sw' documents, the collection 'tiny-en-tl' is in 'tl'"
    ):
        save_pretrained(tmp_path / "b", collection=Collection.load(root / "tl"), **args)
    assert not (tmp_path / "b").exists()
    sw = Collection.load(root / "sw")
    fewer = dataclasses.replace(sw, queries={**sw.queries, "train": sw.split("train")[:-1]})
    with pytest.warns(
        UserWarning, match="trained on \\d+ queries, the collection .* has \\d+ in its train split"
    ):
        save_pretrained(tmp_path / "c", **{**args, "tables": root / "tables"}, collection=fewer)


def test_explain_prints_signed_contributions_and_a_bias_that_add_up_to_the_score(trained, capsys):
    """explain printed unsigned shares alone: an input that lowered the score read as one that
    raised it, and the score could not be rebuilt from what was printed."""
    root, model, _, _, _ = trained
    collection = Collection.load(root / "sw")
    argv = _explain_argv(root, model)
    argv += ["--tables", str(root / "tables"), "--qid", collection.split("test")[0].qid]
    assert main([*argv, "--docno", collection.documents[0].docno]) == 0
    first, header, *rows = capsys.readouterr().out.splitlines()
    score = float(re.search(r": score (-?\d+\.\d+) \(raw", first).group(1))
    assert header.split() == ["fusion", "input", "value", "contribution", "share"]
    contributions = [float(row.split()[2]) for row in rows[:-1]]
    shares = [float(row.split()[3].rstrip("%")) / 100 for row in rows[:-1]]
    bias = float(rows[-1].split()[1])
    assert rows[-1].startswith("bias") and abs(bias + sum(contributions) - score) < 1e-3 * len(rows)
    total = sum(abs(c) for c in contributions)
    assert all(abs(s - c / total) < 1e-3 for s, c in zip(shares, contributions, strict=True))


def test_zero_shot_tables_are_learned_with_the_bundle_s_iterations(trained, tmp_path):
    # an experiment of tables.iterations 2 bundles tables of 2 iterations and lists its zero-shot
    # scores (en-tl tables of 2 iterations) on the card; search had learned en-tl's with 10
    root, *_, bundle = trained
    loaded = Bundle.from_pretrained(bundle)
    assert loaded.table_iterations is None  # hand-made tables: the default
    sw = Collection.load(root / "sw")
    sw.parallel = [ParallelPair(f"p{i}", f"{EN[i]} {EN[j]}", f"s{i:02d}x s{j:02d}x") for i, j in _pairs()]
    two = dataclasses.replace(loaded, tables=learn_tables(sw, iterations=2, progress=False))
    assert two.table_iterations == 2
    tagalog = Collection.load(root / "tl")
    tagalog.parallel = read_parallel(root / "tl-parallel.tsv")
    learned = two.tables_for(tagalog)
    expected = learn_tables(tagalog, iterations=2, progress=False)
    assert [t.meta["iterations"] for t in learned] == [2, 2]
    assert all((a.probs != b.probs).nnz == 0 for a, b in zip(learned, expected, strict=True))
    assert (learned[0].probs != learn_tables(tagalog, progress=False)[0].probs).nnz > 0  # 10 differ
    # into a new --tables directory with those iterations; tables a directory holds, as they are
    assert [t.meta["iterations"] for t in two.tables_for(tagalog, tmp_path / "new")] == [2, 2]
    learn_tables(tagalog, tmp_path / "ten", iterations=10, progress=False)
    assert [t.meta["iterations"] for t in two.tables_for(tagalog, tmp_path / "ten")] == [10, 10]


def _pairs() -> list[tuple[int, int]]:
    return [(i, (i + 1) % N_CONCEPTS) for i in range(N_CONCEPTS)]


def test_bad_first_stage_settings_are_named_where_they_are_in_their_file(trained, tmp_path):
    # they had been named as keys of the file's top level ('psq_top_k=-1', "['bogus'] in top level")
    from clir.pipeline.trained_with import recorded_first_stage

    root, model, *_, bundle = trained
    copy = shutil.copytree(bundle, tmp_path / "bundle")
    config = json.loads((copy / "config.json").read_text())
    config["first_stage"]["psq_top_k"] = -1
    (copy / "config.json").write_text(json.dumps(config))
    collection = Collection.load(root / "sw")
    with pytest.raises(ConfigError, match=r"config\.json: first_stage\.psq_top_k=-1 is invalid; expected"):
        Bundle.from_pretrained(copy).search(collection, "test")
    record = shutil.copytree(model, tmp_path / "model")
    values = json.loads((record / TRAINED_WITH_FILE).read_text())
    values["settings"]["bogus"] = 1
    (record / TRAINED_WITH_FILE).write_text(json.dumps(values))
    with pytest.raises(ConfigError, match=r"unknown key\(s\) \['settings\.bogus'\] in settings; known keys"):
        recorded_first_stage(record)


def test_an_unaligned_monolingual_space_is_refused_where_components_cross(trained, tmp_path, capsys):
    """``clir embed train --monolingual`` saves each language's vectors unaligned (the input of
    ``clir embed align``); ``clir train``, ``rerank``, ``explain`` and ``bundle`` had taken it as
    the shared space, so the en_src / src_en cosines were of unrelated spaces, silently."""
    root, model, space, tables, _ = trained
    mono = SharedSpace(space.vectors, 8, meta={"method": "monolingual"})
    mono.save(tmp_path / "mono")
    collection = Collection.load(root / "sw")
    config = tiny_reranker_config()
    crossing = dataclasses.replace(config, model=dataclasses.replace(config.model, components=["en_src"]))
    crossed = train_reranker(crossing, collection, space, tmp_path / "crossed", tables=tables)
    # components within one language compare words of one training: the space serves as it is
    same = rerank_collection(model, collection, mono, tables=tables)
    assert same == rerank_collection(model, collection, space, tables=tables)
    with pytest.raises(ConfigError, match=r"space .*mono holds monolingual vectors.* \['en_src'\]"):
        train_reranker(crossing, collection, tmp_path / "mono", tmp_path / "m", tables=tables)
    assert not (tmp_path / "m").exists()
    common = ["--collection", str(root / "sw"), "--space", str(tmp_path / "mono")]
    yaml_config = tmp_path / "train.yaml"
    yaml_config.write_text(json.dumps(crossing.to_dict()))
    query, docno = collection.split("test")[0].qid, collection.documents[0].docno
    tables_dir = ["--tables", str(root / "tables")]
    pair = ["--qid", query, "--docno", docno]
    for argv, out in (
        (["train", "--config", str(yaml_config), *common, *tables_dir, "--out"], tmp_path / "m"),
        (["rerank", "--model", str(crossed), *common, *tables_dir, "--out"], tmp_path / "r.run"),
        (["bundle", "--model", str(crossed), *common, *tables_dir, "--out"], tmp_path / "b"),
        (["explain", "--model", str(crossed), *common, *tables_dir, *pair, "--png"], tmp_path / "h.png"),
    ):  # fmt: skip
        assert main([*argv, str(out), "--quiet"]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"clir: error: space {tmp_path / 'mono'} holds monolingual vectors"), argv[0]
        assert "['en_src'] compare English and document-language words" in err
        assert not out.exists()
    argv = ["rerank", "--model", str(crossed), *common[:2], "--space", str(root / "space"), *tables_dir]
    assert main([*argv, "--out", str(tmp_path / "r.run"), "--quiet"]) == 0  # an aligned space serves

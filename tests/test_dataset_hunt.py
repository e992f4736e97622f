"""Defects found by a hunt over the dataset builders and collection readers (small Bible
collections: Ruth, 2 Peter and Jude on the collection side)."""

from __future__ import annotations

import contextlib
import dataclasses
import json
import warnings

import pytest

from clir.datasets import Collection, build_bible_collection


@pytest.fixture(scope="module")
def sw() -> Collection:
    return build_bible_collection(
        "en-sw", collection_books=(8, 61, 65), n_train=6, n_dev=6, n_test=12, progress=False
    )


def words(pairs) -> dict[str, int]:
    return {"en": sum(len(p.source.split()) for p in pairs), "sw": sum(len(p.target.split()) for p in pairs)}


def test_a_collection_saved_with_anothers_stats_recounts_the_builders_counts(sw, tmp_path):
    # The experiment's clean collection (and pseudo.py's recipe) saves the main collection with a
    # smaller parallel side and the main collection's stats: parallel_words had stayed the main's.
    half = sw.parallel[: len(sw.parallel) // 2]
    clean = dataclasses.replace(sw, parallel=half)
    clean.save(tmp_path / "clean")
    stats = json.loads((tmp_path / "clean" / "stats.json").read_text())
    assert stats["parallel_pairs"] == len(half)
    assert stats["parallel_words"] == words(half) != words(sw.parallel)
    assert stats["query_words"] == sw.stats["query_words"]
    assert stats["queries_with_grade1"] == sw.stats["queries_with_grade1"]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert Collection.load(tmp_path / "clean").stats == stats


def test_load_recounts_and_names_a_stale_builder_count(sw, tmp_path):
    # 'clir data check' printed a hand-edited queries_with_grade1 (or a stale parallel_words) as
    # the collection's, with no warning.
    sw.save(tmp_path / "c")
    path = tmp_path / "c" / "stats.json"
    stats = json.loads(path.read_text())
    path.write_text(json.dumps({**stats, "queries_with_grade1": 999, "parallel_words": {"en": 1, "sw": 2}}))
    with pytest.warns(
        UserWarning, match=r"parallel_words: stored .*queries_with_grade1: stored 999, counted"
    ):
        loaded = Collection.load(tmp_path / "c")
    assert loaded.stats["queries_with_grade1"] == sw.stats["queries_with_grade1"]
    assert loaded.stats["parallel_words"] == words(sw.parallel)
    assert loaded.stats["collection_verses"] == sw.stats["collection_verses"]  # not recountable: kept


def test_data_bible_prints_the_stats_it_writes_with_no_dev_split(tmp_path, capsys):
    # With --n-dev 0 the printed statistics (and the in-memory collection) had a dev split of 0
    # queries that stats.json and the directory do not have.
    from clir.cli import main

    out = tmp_path / "c"
    argv = ["data", "bible", "--pair", "en-sw", "--out", str(out), "--n-train", "3", "--n-dev", "0"]
    assert main([*argv, "--n-test", "4", "--quiet"]) == 0
    printed = json.loads(capsys.readouterr().out)
    assert printed == json.loads((out / "stats.json").read_text())
    assert printed["queries"] == {"train": 3, "test": 4}
    assert set(Collection.load(out).queries) == {"train", "test"}


def test_data_check_refuses_a_bible_collection_whose_parallel_side_holds_a_documents_verse(
    sw, tmp_path, capsys
):
    # Verses of the collection side added to parallel.tsv (the tables and the space would learn the
    # passages the queries are judged on) had passed 'clir data check' with a stats warning only.
    from clir.cli import main

    sw.save(tmp_path / "c")
    assert main(["data", "check", str(tmp_path / "c")]) == 0
    capsys.readouterr()
    query = sw.split("test")[0]
    verse = f"B{query.qid[1:3]}C{query.qid[3:6]}V{query.qid[6:9]}"
    docno = next(d for d, grade in sw.qrels[query.qid].items() if grade == 2)
    with (tmp_path / "c" / "parallel.tsv").open("a", encoding="utf-8") as out:
        out.write(f"{verse}\t{query.description}\tmaneno\n")
    assert main(["data", "check", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    line = len(sw.parallel) + 1
    assert f"parallel.tsv:{line}: pair '{verse}' is a verse of document '{docno}'" in err
    assert "Traceback" not in err


def test_data_check_refuses_a_pseudo_collection_whose_parallel_side_holds_a_documents_verse(
    sw, tmp_path, capsys
):
    from clir.cli import main
    from clir.datasets import build_pseudo_collection

    pseudo = build_pseudo_collection(sw.parallel, "sw", layout="bible", holdout=0.1, n_dev=5, n_train=5)
    pseudo.save(tmp_path / "p")
    assert main(["data", "check", str(tmp_path / "p")]) == 0
    query = pseudo.split("train")[0]
    with (tmp_path / "p" / "parallel.tsv").open("a", encoding="utf-8") as out:
        out.write(f"{query.qid[1:]}\t{query.description}\tmaneno\n")
    assert main(["data", "check", str(tmp_path / "p")]) == 2
    assert f"pair '{query.qid[1:]}' is a verse of document '{next(iter(pseudo.qrels[query.qid]))}'" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (
            ["bible", "--pair", "en-sw", "--passage-verses", "0"],
            "argument --passage-verses: must be an integer >= 1",
        ),
        (["pseudo", "SOURCE", "--passage-verses", "0"], "argument --passage-verses: must be an integer >= 1"),
        (["pseudo", "SOURCE", "--holdout", "nan"], "argument --holdout: must be a finite number in [0, 1)"),
        (["pseudo", "MISSING"], "MISSING: no such collection directory or parallel.tsv file"),
        (
            ["pseudo", "MISSING", "--doc-lang", "sw"],
            "MISSING: no such collection directory or parallel.tsv file",
        ),
    ],
)
def test_data_options_are_named_in_their_errors(argv, message, tmp_path, capsys):
    # the builders' argument names had been printed (BibleCollectionBuilder: passage_verses must be
    # ..., build_pseudo_collection: holdout must be a finite number), and a missing source taken
    # for a parallel.tsv that needed --doc-lang
    from clir.cli import main

    source = tmp_path / "parallel.tsv"
    source.write_text("p1\tthe dog\tmbwa\n")
    names = {"SOURCE": str(source), "MISSING": str(tmp_path / "nothing")}
    argv = [names.get(arg, arg) for arg in argv]
    if argv[0] == "pseudo" and "--doc-lang" not in argv:
        argv += ["--doc-lang", "sw"] if argv[1] == str(source) else []
    with pytest.raises(SystemExit) if "argument" in message else contextlib.nullcontext():
        assert main(["data", *argv, "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert "clir: error: " in err and message.replace("MISSING", str(tmp_path / "nothing")) in err
    assert "Traceback" not in err and not (tmp_path / "out").exists()


def test_data_pseudo_refuses_a_bible_collection_whose_parallel_side_holds_a_documents_verse(
    sw, tmp_path, capsys
):
    # A test query's verse added to parallel.tsv had become a pseudo-query of its own (the
    # passage it is judged on, under the same docno) in the weak training data, silently.
    from clir.cli import main

    sw.save(tmp_path / "c")
    query = sw.split("test")[0]
    verse = f"B{query.qid[1:3]}C{query.qid[3:6]}V{query.qid[6:9]}"
    docno = next(d for d, grade in sw.qrels[query.qid].items() if grade == 2)
    with (tmp_path / "c" / "parallel.tsv").open("a", encoding="utf-8") as out:
        out.write(f"{verse}\t{query.description}\t{sw.documents[0].text}\n")
    argv = ["data", "pseudo", str(tmp_path / "c"), "--out", str(tmp_path / "p"), "--n-dev", "5", "--quiet"]
    assert main(argv) == 2
    err = capsys.readouterr().err
    line = len(sw.parallel) + 1
    assert f"parallel.tsv:{line}: pair '{verse}' is a verse of document '{docno}'" in err
    assert "Traceback" not in err and not (tmp_path / "p").exists()
    # the collection as built is taken
    sw.save(tmp_path / "c", force=True)
    assert main(argv) == 0
    pseudo = Collection.load(tmp_path / "p")
    assert not {d.docno for d in pseudo.documents} & {d.docno for d in sw.documents}

"""The command line: the README's hand-written example, and errors reported without a traceback."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from clir.cli import build_parser, main

README = Path(__file__).resolve().parents[1] / "README.md"


def _readme_block(label: str) -> str:
    match = re.search(rf"<!-- example:{label} -->\s*```text\n(.*?)```", README.read_text(), re.S)
    assert match, f"README has no example:{label} block"
    return match.group(1)


@pytest.fixture
def readme_example(tmp_path):
    run, qrels = tmp_path / "my.run", tmp_path / "my.qrels"
    run.write_text(_readme_block("run"))
    qrels.write_text(_readme_block("qrels"))
    return run, qrels


def test_every_command_has_help():
    parser = build_parser()
    for command in ("data", "evaluate", "compare"):
        with pytest.raises(SystemExit) as exit_info:
            parser.parse_args([command, "--help"])
        assert exit_info.value.code == 0


def test_evaluate_readme_example_matches_hand_computed_values(readme_example, capsys):
    run, qrels = readme_example
    assert main(["evaluate", str(run), str(qrels), "--collection-size", "10", "--json", "--per-query"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["AP"] == pytest.approx((5 / 6 + 1 / 2) / 2)
    assert out["P@10"] == pytest.approx(0.15)
    assert out["nDCG@10"] == pytest.approx(
        ((2 + 0.5) / (2 + 1 / 1.5849625007211562) + 0.6309297535714575) / 2
    )
    assert out["per_query"]["AP"] == pytest.approx({"q1": 5 / 6, "q2": 0.5})
    # q1: returned 3, relevant 2 (both found), 1 false alarm over 10-2 non-relevant.
    # q2: returned 2, relevant 1 (found), 1 false alarm over 10-1.
    assert out["AQWV"] == pytest.approx(((1 - 40 * 1 / 8) + (1 - 40 * 1 / 9)) / 2)


def test_evaluate_readme_table_is_what_the_command_prints(readme_example, capsys):
    run, qrels = readme_example
    main(["evaluate", str(run), str(qrels), "--collection-size", "10"])
    printed = capsys.readouterr().out.strip()
    assert printed in README.read_text()


def test_compare_identical_runs(readme_example, capsys):
    run, qrels = readme_example
    assert main(["compare", str(run), str(run), str(qrels), "--metrics", "AP", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["AP"]["diff"] == 0.0 and out["AP"]["p_randomization"] == 1.0


def test_malformed_run_is_reported_with_file_and_line(tmp_path, capsys):
    run = tmp_path / "bad.run"
    run.write_text("q1 Q0 d1 1 3.0 mine\nq1 Q0 d2 2 mine\n")
    qrels = tmp_path / "qrels"
    qrels.write_text("q1 0 d1 1\n")
    assert main(["evaluate", str(run), str(qrels)]) == 2
    assert f"{run}:2: expected 6 fields" in capsys.readouterr().err


@pytest.mark.slow
def test_command_chain_on_a_small_real_collection(tmp_path, capsys):
    from clir.datasets import BibleCollectionBuilder, Collection

    collection = tmp_path / "en-sw"
    BibleCollectionBuilder(
        "sw", collection_books=[8, 32], parallel_books=[62], n_train=5, n_dev=5, n_test=20, progress=False
    ).build().save(collection)
    assert main(["data", "check", str(collection)]) == 0
    assert json.loads(capsys.readouterr().out)["queries"]["test"] == 20

    tables, index, run = tmp_path / "tables", tmp_path / "index", tmp_path / "psq.run"
    assert main(["tables", "--collection", str(collection), "--out", str(tables), "--iterations", "3"]) == 0
    for args in (
        [
            "index",
            "--collection",
            str(collection),
            "--tables",
            str(tables),
            "--mode",
            "psq",
            "--out",
            str(index),
        ],
        ["retrieve", "--index", str(index), "--collection", str(collection), "--k", "25", "--out", str(run)],
    ):
        assert main([*args, "--quiet"]) == 0
    lines = [line.split() for line in run.read_text().splitlines()]
    # no padding: only documents that match a query term are listed, 25 at most, all scoring > 0;
    # the 4 queries with no term in this tiny index retrieve nothing (with a warning)
    per_query = {qid: sum(1 for line in lines if line[0] == qid) for qid in {line[0] for line in lines}}
    assert len(per_query) == 16 and max(per_query.values()) == 25 and min(per_query.values()) < 25
    assert all(float(line[4]) > 0 for line in lines)
    assert "4 query(ies) have no term in the index" in capsys.readouterr().err
    capsys.readouterr()
    qrels = collection / "qrels.test.txt"
    assert main(["evaluate", str(run), str(qrels), "--collection", str(collection), "--json"]) == 0
    values = json.loads(capsys.readouterr().out)
    assert set(values) == {"AP", "P@10", "nDCG@10", "nDCG@20", "R@100", "R@1000", "AQWV"}
    assert 0.05 < values["AP"] <= 1  # 2 short books: the psq run finds most verses' passages

    pseudo = tmp_path / "pseudo"
    argv = ["data", "pseudo", str(collection), "--out", str(pseudo), "--layout", "bible", "--n-dev", "4"]
    assert main([*argv, "--holdout", "0.5"]) == 0
    stats = json.loads(capsys.readouterr().out)
    assert stats["queries"]["dev"] == 4 and stats["queries"]["train"] > 0
    # half the parallel side became passages, the other half is left for the tables
    given = Collection.load(collection).parallel
    left = Collection.load(pseudo).parallel
    assert stats["pairs_given"] == len(given) and stats["pseudo_pairs"] + len(left) == len(given)
    assert {p.pair_id for p in left} < {p.pair_id for p in given}
    assert main([*argv[:2], str(collection / "parallel.tsv"), *argv[3:]]) == 2
    assert "--doc-lang is needed" in capsys.readouterr().err

    space = tmp_path / "space"
    assert main(["embed", "train", str(collection), "--joint", "--method", "word2vec", "--dim", "8",
                 "--epochs", "1", "--out", str(space), "--quiet"]) == 0  # fmt: skip
    assert main(["embed", "eval", str(space), "--json"]) == 0


def test_errors_are_reported_without_traceback(tmp_path, capsys):
    assert main(["data", "bible", "--pair", "en-xx", "--out", str(tmp_path / "c"), "--quiet"]) == 2
    assert "clir: error:" in capsys.readouterr().err
    assert main(["data", "check", str(tmp_path / "absent")]) == 2
    from clir.cli import build_parser

    base = ["index", "--collection", "c", "--tables", "t", "--mode", "qt", "--out", "o"]
    assert build_parser().parse_args(base).spelling == 0.5
    assert build_parser().parse_args([*base, "--spelling", "off"]).spelling is None
    assert build_parser().parse_args([*base, "--spelling", "0.7"]).spelling == 0.7
    for bad in ("0", "1.5", "near"):
        with pytest.raises(SystemExit):
            main(["baselines", "--collection", str(tmp_path), "--out", str(tmp_path), "--spelling", bad])
        assert f"--spelling: must be a number in (0, 1] or 'off', got '{bad}'" in capsys.readouterr().err


def test_public_names_resolve_lazily():
    import subprocess
    import sys

    code = "import clir, sys; assert 'torch' not in sys.modules; [getattr(clir, n) for n in clir.__all__]"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_out_is_checked_before_any_work_and_nothing_is_lost(tmp_path, capsys, monkeypatch):
    user = tmp_path / "mine"
    user.mkdir()
    (user / "notes.txt").write_text("keep\n")
    blocker = tmp_path / "file"
    blocker.write_text("mine\n")

    def never(*args, **kwargs):
        raise AssertionError("work started before --out was checked")

    monkeypatch.setattr("clir.datasets.build_bible_collection", never)
    absent = str(tmp_path / "absent")  # the inputs do not exist: only the --out check can answer
    cases = {
        ("data", "bible", "--pair", "en-sw", "--out", str(user)): "is a directory that clir did not write",
        (
            "data",
            "bible",
            "--pair",
            "en-sw",
            "--out",
            str(blocker),
        ): "is a file (clir writes a directory here)",
        ("index", "--collection", absent, "--tables", absent, "--mode", "qt", "--out", str(user)): (
            "expected nothing, or a clir 'first-stage' output"
        ),
        ("retrieve", "--index", absent, "--topics", absent, "--out", str(user)): (
            "is a directory (clir writes a file here)"
        ),
        ("retrieve", "--index", absent, "--topics", absent, "--out", str(blocker / "x.run")): (
            f"{blocker} is a file, so {blocker / 'x.run'} cannot be written below it"
        ),
        ("rerank", "--model", absent, "--collection", absent, "--space", absent, "--out", str(user)): (
            "is a directory (clir writes a file here)"
        ),
    }
    for argv, message in cases.items():
        assert main(list(argv)) == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("clir: error:") and message in err, (argv, err)
    assert (user / "notes.txt").read_text() == "keep\n" and sorted(p.name for p in user.iterdir()) == [
        "notes.txt"
    ]
    assert blocker.read_text() == "mine\n"


def test_unexpected_errors_are_one_line_and_debug_shows_the_traceback(readme_example, capsys, monkeypatch):
    run, qrels = readme_example

    def broken(args):
        raise KeyError("surprise")

    parser = build_parser()
    args = parser.parse_args(["evaluate", str(run), str(qrels)])
    monkeypatch.setattr("clir.cli.build_parser", lambda: _Fixed(parser, args, broken))
    assert main([]) == 2
    err = capsys.readouterr().err
    assert err.startswith("clir: error: unexpected KeyError: 'surprise'") and "--debug" in err
    args.debug = True
    with pytest.raises(KeyError):
        main([])
    args.debug = False
    monkeypatch.setenv("CLIR_DEBUG", "1")
    with pytest.raises(KeyError):
        main([])


class _Fixed:
    """A parser that always returns the same arguments, with another handler."""

    def __init__(self, parser, args, handler):
        self.args = args
        args.handler = handler

    def parse_args(self, argv):
        return self.args


def test_warnings_print_as_clir_warnings(tmp_path, capsys):
    run, qrels = tmp_path / "r.run", tmp_path / "q.txt"
    run.write_text("q1 Q0 d1 1 1.0 t\nq9 Q0 d1 1 1.0 t\n")
    qrels.write_text("q1 0 d1 1\n")
    assert main(["evaluate", str(run), str(qrels)]) == 0
    err = capsys.readouterr().err
    assert "clir: warning: run: 1 query(ies) have no relevant document in the qrels" in err
    assert "UserWarning" not in err


def test_no_module_imports_the_package_face():
    """Lower layers read the version from clir._version, never from ``import clir`` (ARCHITECTURE.md)."""
    import ast

    root = Path(__file__).resolve().parents[1] / "clir"
    offenders = [
        str(path.relative_to(root))
        for path in root.rglob("*.py")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Import) and any(alias.name == "clir" for alias in node.names)
    ]
    assert offenders == []


def test_embed_train_defaults_are_the_space_of_make_run(tmp_path, monkeypatch):
    import clir.embeddings
    from clir.pipeline.config import load_experiment

    calls = []
    monkeypatch.setattr(clir.embeddings, "train_embeddings", lambda *a, **k: calls.append((a, k)) or _Space())
    monkeypatch.setattr("clir.cli._collections_by_language", lambda paths, doc_lang: {"sw": paths})
    assert main(["embed", "train", str(tmp_path / "c"), "--out", str(tmp_path / "space")]) == 0
    assert main(["embed", "train", str(tmp_path / "c"), "--monolingual", "--out", str(tmp_path / "s2")]) == 0
    space = load_experiment(Path(__file__).resolve().parents[1] / "configs" / "default.yaml").embeddings
    (_, _, config), options = calls[0]
    assert config == space.embedding_config()
    assert (options["joint"], options["centre"]) == (space.joint, space.centre) == (True, True)
    (_, _, config), options = calls[1]
    assert (config.method, config.window, config.epochs, options["joint"]) == ("fasttext", 5, 10, False)


class _Space:
    languages = ("en", "sw")

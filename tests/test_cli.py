"""The command line: the README's hand-written example, and errors reported without a traceback."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import ir_measures
import pytest

from clir.cli import build_parser, main
from clir.datasets import Collection
from clir.errors import ConfigError
from clir.types import Document, ParallelPair, Query

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


def _commands(parser: argparse.ArgumentParser, path: tuple[str, ...] = ("clir",)):
    """Every parser of the tree with its command path, and the help line its parent lists it with."""
    yield path, parser, None
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            listed = {choice.dest: choice.help for choice in action._choices_actions}
            for name, sub in action.choices.items():
                for sub_path, sub_parser, line in _commands(sub, (*path, name)):
                    yield sub_path, sub_parser, line if sub_path != (*path, name) else listed.get(name)


def test_every_command_and_option_explains_itself():
    missing = []
    commands = list(_commands(build_parser()))
    assert len(commands) > 15
    for path, parser, listed in commands:
        name = " ".join(path)
        if not (parser.description or "").strip():
            missing.append(f"{name}: no description")
        if len(path) > 1 and not (listed or "").strip():
            missing.append(f"{name}: no help line in its parent's list")
        formatter = parser._get_formatter()
        for action in parser._actions:
            if isinstance(action, argparse._SubParsersAction):
                continue
            label = "/".join(action.option_strings) or action.dest
            if not (action.help or "").strip() or action.help == argparse.SUPPRESS:
                missing.append(f"{name} {label}: no help")
            shown = formatter._get_help_string(action) or ""
            has_default = action.option_strings and action.default not in (None, False, argparse.SUPPRESS)
            if has_default and "default" not in shown:
                missing.append(f"{name} {label}: help does not show the default {action.default!r}")
        help_text = parser.format_help()
        assert "%(" not in help_text, name
    assert missing == []


def test_every_command_takes_quiet_and_verbose_and_index_names_its_own_bm25():
    for path, parser, _ in _commands(build_parser()):
        if not any(isinstance(a, argparse._SubParsersAction) for a in parser._actions) and len(path) > 1:
            options = {o for a in parser._actions for o in a.option_strings}
            assert {"--quiet", "--verbose"} <= options, path
    index_help = build_parser()._subparsers._group_actions[0].choices["index"].format_help()
    assert "clir's own" in " ".join(index_help.split())
    assert "bm25: rank-bm25's" not in " ".join(index_help.split())


def test_help_shows_defaults(capsys):
    with pytest.raises(SystemExit):
        main(["baselines", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "first-stage modes (default: qt psq dt)" in text
    assert "depth of each run (default: 1000)" in text


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


def test_compare_identical_runs(readme_example, capsys, tmp_path):
    run, qrels = readme_example
    copy = tmp_path / "copy.run"  # the same run in another file (the same file twice is refused)
    copy.write_bytes(run.read_bytes())
    assert main(["compare", str(run), str(copy), str(qrels), "--metrics", "AP", "--json"]) == 0
    ap = json.loads(capsys.readouterr().out)["runs"][str(copy)]["AP"]
    assert ap["diff"] == 0.0 and ap["p_randomization"] == ap["p_randomization_corrected"] == 1.0


def test_evaluate_and_compare_sum_trec_eval_counts_as_ir_measures(readme_example, capsys):
    run, qrels = readme_example
    names = ["NumQ", "NumRet", "NumRel", "NumRelRet", "AP"]
    assert main(["evaluate", str(run), str(qrels), "--metrics", *names, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    expected = ir_measures.calc_aggregate(
        [ir_measures.parse_measure(n) for n in names],
        ir_measures.read_trec_qrels(str(qrels)),
        ir_measures.read_trec_run(str(run)),
    )
    assert out == {str(m): pytest.approx(v) for m, v in expected.items()}
    assert (out["NumQ"], out["NumRet"], out["NumRel"], out["NumRet(rel=1)"]) == (2, 5, 3, 3)
    one = run.parent / "one.run"
    one.write_text("q1 Q0 d3 1 10 x\nq2 Q0 d4 1 5 x\n")
    assert main(["compare", str(run), str(one), str(qrels), "--metrics", "NumRet", "AP"]) == 0
    printed = capsys.readouterr().out.splitlines()
    assert printed[1].split()[:2] == ["run", "sum"] and printed[3].split()[1:3] == ["2.0000", "-3.0000"]
    assert printed[6].split()[:2] == ["run", "mean"]


@pytest.fixture
def three_runs(tmp_path):
    """10 queries, one relevant document each. base.run ranks it second (AP 1/2); better.run first
    (AP 1); half.run first on q0-q4 only; and base-copy.run equals base.run."""
    qids = [f"q{i}" for i in range(10)]
    (tmp_path / "qrels").write_text("".join(f"{q} 0 rel 1\n" for q in qids))

    def write(name: str, first: set[str]) -> str:
        lines = []
        for q in qids:
            order = ["rel", "other"] if q in first else ["other", "rel"]
            lines += [f"{q} Q0 {doc} {rank} {3 - rank} {name}\n" for rank, doc in enumerate(order, 1)]
        (tmp_path / name).write_text("".join(lines))
        return str(tmp_path / name)

    runs = {
        "base": write("base.run", set()),
        "better": write("better.run", set(qids)),
        "half": write("half.run", set(qids[:5])),
        "copy": write("base-copy.run", set()),
    }
    return runs, str(tmp_path / "qrels")


def test_compare_many_runs_with_holm_correction(three_runs, capsys):
    runs, qrels = three_runs
    argv = ["compare", runs["base"], runs["better"], runs["half"], runs["copy"], qrels, "--metrics", "AP"]
    assert main([*argv, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["baseline"] == runs["base"] and out["significance"]["correction"] == "holm"
    ap = {name: out["runs"][runs[name]]["AP"] for name in ("better", "half", "copy")}
    p_better, p_half = 2 / 2**10, 2 / 2**5  # exact sign-flip tests on 10 and 5 non-zero differences
    assert [ap[n]["p_randomization"] for n in ap] == pytest.approx([p_better, p_half, 1.0])
    # Holm over the 3 runs: 3 p_better, max(2 p_half, 3 p_better), 1
    assert [ap[n]["p_randomization_corrected"] for n in ap] == pytest.approx([3 * p_better, 2 * p_half, 1.0])
    assert (ap["better"]["mean_a"], ap["better"]["mean_b"], ap["better"]["diff"]) == (0.5, 1.0, 0.5)
    assert ap["better"]["p_ttest"] == 0.0 and ap["copy"]["ci_low"] == ap["copy"]["ci_high"] == 0.0

    assert main([*argv, "--correction", "none"]) == 0
    text = capsys.readouterr().out
    better_line = next(line for line in text.splitlines() if line.startswith("better.run"))
    # the t-test p of a constant difference is 0: shown below the printed precision, never 0.0000
    assert better_line.split()[-4:] == ["0.0020*", "0.0020", "<0.0001", "<0.0001"]
    assert "no correction over the 3 run(s)" in text

    assert (
        main(["compare", *runs.values(), qrels, "--baseline", runs["better"], "--json", "--metrics", "AP"])
        == 0
    )
    out = json.loads(capsys.readouterr().out)
    assert out["baseline"] == runs["better"] and set(out["runs"]) == {
        runs["base"],
        runs["half"],
        runs["copy"],
    }
    assert out["runs"][runs["base"]]["AP"]["diff"] == -0.5


def test_compare_refuses_a_single_run_and_a_repeated_run(three_runs, capsys):
    runs, qrels = three_runs
    assert main(["compare", runs["base"], qrels]) == 2
    assert "nothing to compare: give at least two RUNs" in capsys.readouterr().err
    assert main(["compare", runs["base"], runs["half"], runs["half"], qrels]) == 2
    assert f"RUN {runs['half']} is given twice" in capsys.readouterr().err
    # the same file by another path: once a RUN (it counted twice in the Holm correction) ...
    other_path = str(Path(runs["half"]).parent / ".." / Path(runs["half"]).parent.name / "half.run")
    assert main(["compare", runs["base"], runs["half"], other_path, qrels]) == 2
    assert f"RUN {other_path} is given twice" in capsys.readouterr().err
    # the first RUN, the baseline without --baseline, given again (it was compared with itself,
    # and the Holm family of the others grew by one)
    assert main(["compare", runs["base"], runs["half"], runs["base"], qrels]) == 2
    assert f"RUN {runs['base']} is given twice" in capsys.readouterr().err
    # ... and a --baseline that is one of the RUNs is not compared with itself
    argv = ["compare", runs["base"], runs["half"], qrels, "--baseline", other_path, "--json"]
    assert main([*argv, "--metrics", "AP"]) == 0
    assert list(json.loads(capsys.readouterr().out)["runs"]) == [runs["base"]]
    with pytest.raises(SystemExit) as exit_info:
        main(["compare", runs["base"], runs["half"], qrels, "--alpha", "1"])
    assert exit_info.value.code == 2
    assert "argument --alpha: must be a number in (0, 1), got '1'" in capsys.readouterr().err


def test_settings_that_would_change_nothing_are_refused(three_runs, capsys):
    """--bootstrap-samples with the t interval, and FastText's n-gram settings with word2vec,
    had been ignored: the output was the default's."""
    from clir.config import build
    from clir.embeddings import EmbeddingConfig
    from clir.evaluation import SignificanceConfig

    runs, qrels = three_runs
    argv = ["compare", runs["base"], runs["half"], qrels, "--bootstrap-samples", "500"]
    assert main([*argv, "--interval", "t"]) == 2
    assert "clir: error: --bootstrap-samples with --interval t: only bootstrap resamples" in (
        capsys.readouterr().err
    )
    assert main(argv) == 0
    with pytest.raises(ConfigError, match=r"x.yaml: bootstrap_samples=500 is invalid; expected 10000 \(the"):
        build(SignificanceConfig, {"interval": "t", "bootstrap_samples": 500}, "x.yaml")
    for key, value in (("min_n", 2), ("max_n", 5), ("bucket", 1000)):
        with pytest.raises(ConfigError, match=rf"x.yaml: {key}={value} is invalid; expected .* only the 'f"):
            build(EmbeddingConfig, {"method": "word2vec", key: value}, "x.yaml")
        build(EmbeddingConfig, {"method": "fasttext", key: value, "min_n": 2}, "x.yaml")


def test_compare_takes_its_options_among_the_runs_and_the_qrels(three_runs, capsys):
    """argparse ended ``RUN [RUN ...]`` at the first option and refused the rest: ``compare A B
    --json QRELS`` was 'unrecognized arguments: QRELS'."""
    runs, qrels = three_runs
    base, better = runs["base"], runs["better"]
    outputs = []
    for argv in (
        [base, better, qrels, "--json", "--metrics", "AP"],
        [base, better, "--json", qrels, "--metrics", "AP"],
        [base, better, "--baseline", base, qrels, "--json", "--metrics", "AP"],
        ["--json", base, "--seed", "0", better, "--metrics", "AP", "--alpha", "0.05", qrels],
    ):
        assert main(["compare", *argv]) == 0
        outputs.append(capsys.readouterr().out)
    assert json.loads(outputs[0])["runs"][better]["AP"]["diff"] == 0.5
    assert outputs == [outputs[0]] * 4
    with pytest.raises(SystemExit) as exit_info:  # an unknown option is still refused
        main(["compare", base, better, "--bogus", qrels])
    assert exit_info.value.code == 2
    assert "unrecognized arguments: --bogus" in capsys.readouterr().err


def test_evaluate_warnings_name_the_run_file_as_compare_does(tmp_path, capsys):
    """They named it ``run``."""
    run, other, qrels = tmp_path / "r.run", tmp_path / "s.run", tmp_path / "q.txt"
    run.write_text("q1 Q0 d1 1 1.0 t\nq9 Q0 d1 1 1.0 t\n")
    other.write_text("q1 Q0 d1 1 1.0 t\nq9 Q0 d1 1 1.0 t\n")
    qrels.write_text("q1 0 d1 1\nq2 0 d1 1\n")
    assert main(["evaluate", str(run), str(qrels), "--metrics", "AP"]) == 0
    said = [line for line in capsys.readouterr().err.splitlines() if line.startswith("clir: warning:")]
    assert (
        said[0]
        == f"clir: warning: {run}: 1 query(ies) have no relevant document in the qrels and are left out: 'q9'"
    )
    assert said[1].startswith(f"clir: warning: {run} lists 1 of the 2 qrels queries with a relevant document")
    assert main(["compare", str(run), str(other), str(qrels), "--metrics", "AP"]) == 0
    assert f"clir: warning: {run}: 1 query(ies) have no relevant" in capsys.readouterr().err


def test_compare_choices_are_the_libraries():
    from clir import cli
    from clir.evaluation import significance

    assert (cli.CORRECTIONS, cli.INTERVALS) == (significance.CORRECTIONS, significance.INTERVALS)


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
    two = tmp_path / "pseudo-2"  # up to two train queries per train passage; dev one per passage
    assert main([*argv[:4], str(two), *argv[5:], "--per-passage", "2"]) == 0
    stats = json.loads(capsys.readouterr().out)
    passages = stats["documents"] - stats["queries"]["dev"]  # n_train unset: every passage dev leaves
    assert stats["queries"]["dev"] == 4 and passages < stats["queries"]["train"] <= 2 * passages
    auto = tmp_path / "pseudo-auto"  # no --layout: the pair ids are verse keys, so whole chapters
    assert main([*argv[:4], str(auto), "--n-dev", "4", "--holdout", "0.5"]) == 0
    capsys.readouterr()
    assert json.loads((auto / "collection.json").read_text())["parameters"]["layout"] == "bible"
    assert Collection.load(auto).parallel == Collection.load(pseudo).parallel

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
    assert f"clir: warning: {run}: 1 query(ies) have no relevant document in the qrels" in err
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


@pytest.mark.parametrize("command", ["retrieve", "dense", "search"])
def test_an_empty_topics_file_is_an_error_not_an_empty_run(command, tmp_path, capsys):
    """clir retrieve --topics EMPTY wrote a 0-byte run and exited 0."""
    empty = tmp_path / "empty.tsv"
    empty.write_text("")
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}}).save(collection)
    given = {
        "retrieve": ["--index", str(tmp_path / "i")],
        "dense": ["--collection", str(collection)],
        "search": ["--bundle", str(tmp_path / "b"), "--collection", str(collection)],
    }
    argv = [command, *given[command], "--topics", str(empty)]
    assert main([*argv, "--out", str(tmp_path / "out.run")]) == 2
    assert f"clir: error: {empty}: holds no topic" in capsys.readouterr().err
    assert not (tmp_path / "out.run").exists()


@pytest.mark.parametrize("command", ["dense", "search"])
def test_topics_fields_are_named_by_the_options_the_error_names(command, tmp_path, capsys):
    """BEIR's queries.jsonl (``_id``) was refused with "name the field with --qid-field", an
    option that neither clir search nor clir dense had."""
    topics = tmp_path / "queries.jsonl"
    topics.write_text('{"_id": "q1", "text": "water"}\n{"_id": "q2", "text": " "}\n')
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}}).save(collection)
    given = {"dense": [], "search": ["--bundle", str(tmp_path / "b")]}[command]
    argv = [command, *given, "--collection", str(collection), "--out", str(tmp_path / "out.run")]
    assert main([*argv, "--topics", str(topics)]) == 2
    assert "queries.jsonl:1: no field 'qid' (fields: _id, text); name the field with --qid-field" in (
        capsys.readouterr().err
    )
    assert main([*argv, "--topics", str(topics), "--qid-field", "_id"]) == 2  # read: its line 2 is empty
    assert "queries.jsonl:2: empty query text for qid 'q2'" in capsys.readouterr().err
    instead = ["--query", "water"] if command == "search" else ["--split", "test", *argv[-2:]]
    with pytest.raises(SystemExit):  # an option given where it cannot apply is refused
        main([*argv[:-2], *instead, "--qid-field", "_id"])
    assert "--qid-field has no effect without --topics" in capsys.readouterr().err
    assert not (tmp_path / "out.run").exists()


@pytest.mark.parametrize("command", ["dense", "search"])
@pytest.mark.parametrize(
    ("text", "option", "expected"),
    [
        ("q1\twater\tdrink\n", "--query-field", "a field of JSONL or TREC topics, but --topics {} is TSV"),
        ("q1\twater\n", "--qid-field", "a field of JSONL or TREC topics, but --topics {} is TSV"),
        ('<top number="q1"><title>water</title></top>\n', "--qid-field", "a field of JSONL topics, but"),
    ],
)
def test_topics_field_options_a_layout_has_no_field_for_are_refused(
    command, text, option, expected, tmp_path, capsys
):
    """clir search --topics topics.test.tsv --query-field description searched the titles: the
    field options were ignored silently for a TSV file (read by column), --qid-field for TREC
    topics (the qid is the number attribute or <num>)."""
    topics = tmp_path / "topics.txt"
    topics.write_text(text)
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}}).save(collection)
    given = {"dense": ["--cache", str(tmp_path / "e5")], "search": ["--bundle", str(tmp_path / "b")]}[command]
    argv = [command, *given, "--collection", str(collection), "--topics", str(topics)]
    assert main([*argv, "--out", str(tmp_path / "out.run"), option, "description"]) == 2
    assert capsys.readouterr().err.startswith(f"clir: error: {option}: {expected.format(topics)}")
    assert not (tmp_path / "out.run").exists()


@pytest.mark.parametrize("query", ["", "   "])
def test_search_refuses_an_empty_query(query, tmp_path, capsys):
    """clir search --query "" searched, warning that the query "has no term in the index", and
    exited 0 with nothing printed (a topics file's empty query text is an error)."""
    argv = ["search", "--bundle", str(tmp_path / "b"), "--collection", str(tmp_path / "c")]
    assert main([*argv, "--query", query]) == 2
    assert capsys.readouterr().err == (
        f"clir: error: clir search: --query {query!r} is empty; give the words to search for\n"
    )


def test_retrieve_refuses_a_split_with_a_topics_file(tmp_path, capsys):
    """clir retrieve --topics FILE --split train searched the file's queries, the --split
    ignored silently (dense makes the two exclusive); a --collection's default split stays test."""
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")], "train": [Query("q2", "water")]}
    qrels = {"q1": {"d1": 1}, "q2": {"d1": 1}}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, qrels).save(collection)
    topics = tmp_path / "topics.tsv"
    topics.write_text("q3\twater\n")
    run = tmp_path / "out.run"
    argv = ["retrieve", "--index", str(tmp_path / "i"), "--topics", str(topics), "--out", str(run)]
    assert main([*argv, "--split", "train"]) == 2
    assert capsys.readouterr().err == (
        "clir: error: clir retrieve: --split names a split of --collection, not of --topics FILE: drop one\n"
    )
    assert not run.exists()
    from scipy import sparse as sp

    from clir.retrieval import FirstStage
    from clir.translation import TranslationTable

    index = tmp_path / "i"
    table = TranslationTable(["water"], ["maji"], sp.csr_matrix([[1.0]]), "en", "sw")
    stage = FirstStage("qt", "bm25", doc_analyzer="sw", table_en_doc=table, progress=False)
    stage.index([Document("d1", "maji"), Document("d2", "moto"), Document("d3", "moto")]).save(index)
    argv = ["retrieve", "--index", str(index), "--out", str(run), "--quiet"]
    assert main([*argv, "--topics", str(topics)]) == 0
    assert run.read_text().split()[:3] == ["q3", "Q0", "d1"]
    assert main([*argv, "--collection", str(collection)]) == 0
    assert run.read_text().split()[:3] == ["q1", "Q0", "d1"]
    assert main([*argv, "--collection", str(collection), "--split", "train"]) == 0
    assert run.read_text().split()[:3] == ["q2", "Q0", "d1"]
    capsys.readouterr()
    # an index of another collection, whose judged documents it lacks: searched without a word
    other = tmp_path / "other"
    other_qrels = {"q1": {"x1": 1}, "q2": {"x1": 1}}
    Collection("o", "sw", "en", [Document("x1", "maji")], queries, other_qrels).save(other)
    assert main([*argv, "--collection", str(other)]) == 0
    assert (
        f"clir: warning: --index {index} lacks 1 of the 1 documents judged for these queries (e.g. 'x1'): "
        f"is it an index of --collection {other}?"
    ) in capsys.readouterr().err


def test_aqwv_without_a_size_names_the_options_and_a_zero_cutoff_is_refused(tmp_path, capsys):
    """--metrics AQWV without a size said "pass collection_size=...", a Python parameter, and
    AQWV@0 printed 0.0000 where --cutoff 0 is refused."""
    from clir.evaluation import measure_name

    (tmp_path / "a.run").write_text("q1 Q0 d1 1 2.0 t\n")
    (tmp_path / "a.qrels").write_text("q1 0 d1 1\n")
    argv = ["evaluate", str(tmp_path / "a.run"), str(tmp_path / "a.qrels"), "--metrics", "AP", "AQWV@5"]
    assert main(argv) == 2
    assert "--metrics AQWV@5 needs the number of documents: pass --collection-size N or --collection DIR" in (
        capsys.readouterr().err
    )
    assert main([*argv, "--collection-size", "10"]) == 0
    (tmp_path / "b.run").write_text("q1 Q0 d1 1 1.0 t\n")
    runs = {
        "evaluate": [str(tmp_path / "a.run")],
        "compare": [str(tmp_path / "a.run"), str(tmp_path / "b.run")],
    }
    for command, given in runs.items():  # spaces around the name, as the measures read it
        assert main([command, *given, str(tmp_path / "a.qrels"), "--metrics", " AQWV "]) == 2
        assert capsys.readouterr().err == (
            "clir: error: --metrics AQWV needs the number of documents: pass --collection-size N or "
            "--collection DIR\n"
        )
    with pytest.raises(ConfigError, match=r"AQWV takes '@<cutoff>' \(>= 1\) or '@oracle', got '0'"):
        measure_name("AQWV@0")


@pytest.mark.parametrize("command", ["evaluate", "compare"])
def test_aqwv_options_that_no_measure_uses_are_refused(tmp_path, capsys, command):
    """--cutoff and --beta had been ignored without a word where no measure took them: AQWV
    left out for want of a size, no AQWV in --metrics, or only AQWV@<k> / AQWV@oracle (which
    set their own cutoff), so 'clir evaluate R Q --cutoff 5' printed no AQWV at all."""
    (tmp_path / "a.run").write_text("q1 Q0 d1 1 2.0 t\nq1 Q0 d2 2 1.0 t\n")
    (tmp_path / "a.qrels").write_text("q1 0 d1 1\n")
    runs = [str(tmp_path / "a.run")] * (2 if command == "compare" else 1)
    argv = [command, *runs, str(tmp_path / "a.qrels")]
    if command == "compare":
        (tmp_path / "b.run").write_text("q1 Q0 d2 1 2.0 t\n")
        argv[2] = str(tmp_path / "b.run")
    size = ["--collection-size", "10"]
    for extra, message in (
        (["--cutoff", "5"], "--cutoff has no effect without --collection-size or --collection"),
        (["--beta", "20"], "--beta has no effect without --collection-size or --collection"),
        ([*size, "--metrics", "AP", "--beta", "20"], "--beta has no effect without an AQWV measure"),
        ([*size, "--metrics", "AQWV@oracle", "--cutoff", "5"], "AQWV@<k> and AQWV@oracle set their own"),
    ):
        with pytest.raises(SystemExit) as exit_:
            main([*argv, *extra])
        assert exit_.value.code == 2
        assert message in capsys.readouterr().err
    for extra in (
        [*size, "--cutoff", "5", "--beta", "20"],
        [*size, "--metrics", "AQWV@oracle", "--beta", "20"],
        [*size, "--metrics", "AP", "AQWV", "--cutoff", "1"],
        ["--metrics", "AP", "--cutoff", "10", "--beta", "40"],  # the defaults, given: nothing ignored
    ):
        assert main([*argv, *extra]) == 0, extra
        capsys.readouterr()


def test_data_check_reads_the_per_split_qrels_too(tmp_path, capsys):
    """clir data check read qrels.txt only, so a damaged qrels.test.txt (the file 'clir
    evaluate' is given) passed."""
    path = tmp_path / "c"
    queries = {"test": [Query("q1", "water")], "dev": [Query("q2", "fire")]}
    Collection("c", "sw", "en", [Document("d1", "maji"), Document("d2", "moto")], queries,
               {"q1": {"d1": 1}, "q2": {"d2": 1}}).save(path)  # fmt: skip
    assert main(["data", "check", str(path)]) == 0
    capsys.readouterr()
    split = path / "qrels.test.txt"
    for text, message in (
        ("q1 0 d1 1\ngarbage\n", f"{split}:2: "),
        ("q1 0 d1 2\n", f"{split}: differs from qrels.txt for 1 test quer(ies), e.g. ['q1']"),
        ("q1 0 d1 1\nq2 0 d2 1\n", f"{split}: differs from qrels.txt for 1 test quer(ies), e.g. ['q2']"),
    ):
        split.write_text(text)
        assert main(["data", "check", str(path)]) == 2
        assert message in capsys.readouterr().err
    # a split without topics: its judgements are checked all the same, with a warning
    (path / "qrels.test.txt").write_text("q1 0 d1 1\n")
    other = path / "qrels.bogus.txt"
    other.write_text("q1 0 d1 0\n")
    assert main(["data", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert f"clir: warning: {other}: the collection has no topics of split 'bogus'" in err
    assert f"{other}: differs from qrels.txt for 1 bogus quer(ies), e.g. ['q1']" in err
    other.write_text("q1 0 d1 1\n")
    assert main(["data", "check", str(path)]) == 0  # agreeing: the warning alone (shown once a process)


def test_data_check_reads_the_topics_xml_too(tmp_path, capsys):
    """clir data check read the TSV topics only, so a topics.<split>.xml that other toolkits
    read and that had gone stale (edited, or left from another build) passed."""
    path = tmp_path / "c"
    queries = {"test": [Query("q1", "water & <salt>", "the sea")], "dev": [Query("q2", "fire")]}
    Collection("c", "sw", "en", [Document("d1", "maji"), Document("d2", "moto")], queries,
               {"q1": {"d1": 1}, "q2": {"d2": 1}}).save(path, xml=True)  # fmt: skip
    assert main(["data", "check", str(path)]) == 0
    capsys.readouterr()
    xml = path / "topics.test.xml"
    xml.write_text(xml.read_text().replace("the sea", "the lake"))
    assert main(["data", "check", str(path)]) == 2
    assert f"clir: error: {xml}: differs from topics.test.tsv for 1 quer(ies), e.g. ['q1']" in (
        capsys.readouterr().err
    )
    xml.unlink()
    (path / "topics.dev.tsv").unlink()  # its XML left behind
    assert main(["data", "check", str(path)]) == 0
    assert f"clir: warning: {path / 'topics.dev.xml'}: the collection has no topics.dev.tsv" in (
        capsys.readouterr().err
    )


@pytest.mark.parametrize("item", ["dev=", "=dev.tsv"])
def test_import_topics_without_a_split_or_a_file_names_the_item(item, tmp_path, capsys):
    """--topics dev= said ".: is a directory, not a file"."""
    argv = ["data", "import", "--documents", str(tmp_path / "d.jsonl"), "--qrels", str(tmp_path / "q")]
    assert main([*argv, "--topics", item, "--doc-lang", "sw", "--out", str(tmp_path / "c")]) == 2
    err = capsys.readouterr().err
    assert f"clir: error: --topics {item!r}: expected FILE or SPLIT=FILE, e.g. dev=dev.tsv" in err


def test_parallel_text_with_no_pair_to_learn_from_names_its_file(tmp_path, capsys):
    """Parallel text whose pairs all lose a side to analysis said "no sentence pair has both
    sides non-empty", and an empty --parallel file "pass --parallel FILE": neither named it."""
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}}).save(collection)
    argv = ["tables", "--collection", str(collection), "--out", str(tmp_path / "t"), "--quiet"]
    parallel = tmp_path / "parallel.tsv"
    parallel.write_text("p1\tthe of\tmaji\np2\t...\tmoto\n")
    assert main([*argv, "--parallel", str(parallel)]) == 2
    err = capsys.readouterr().err
    assert f"clir: error: {parallel}: none of its 2 pairs has words on both sides after analysis" in err
    parallel.write_text("")
    assert main([*argv, "--parallel", str(parallel)]) == 2
    assert (
        f"clir: error: {parallel}: holds no pair to learn translation tables from" in capsys.readouterr().err
    )
    assert not (tmp_path / "t").exists()


def test_em_iterations_beyond_the_bound_are_refused_before_any_work(tmp_path, capsys):
    """--iterations 10**20 failed with "unexpected OverflowError" (the progress bar's len(range))."""
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}},
               parallel=[ParallelPair("p1", "water", "maji")]).save(collection)  # fmt: skip
    argv = ["tables", "--collection", str(collection), "--out", str(tmp_path / "t"), "--quiet"]
    with pytest.raises(SystemExit) as exited:  # argparse's errors exit 2, as every other
        main([*argv, "--iterations", str(10**20)])
    err = capsys.readouterr().err
    from clir.translation.ibm1 import MAX_ITERATIONS

    assert exited.value.code == 2
    assert f"clir: error: argument --iterations: must be an integer from 1 to {MAX_ITERATIONS}" in err
    assert "Traceback" not in err and not (tmp_path / "t").exists()
    with pytest.raises(SystemExit):
        main(["tables", "--help"])
    assert f"EM iterations, at most {MAX_ITERATIONS}" in " ".join(capsys.readouterr().out.split())


@pytest.mark.parametrize("command", ["retrieve", "rerank", "search", "dense"])
def test_an_empty_or_spaced_run_tag_is_refused(command, tmp_path, capsys):
    """retrieve --tag '' wrote the default tag, silently (rerank's failed once the work was done)."""
    for tag, problem in (("", "is empty"), ("a b", "holds a space")):
        with pytest.raises(SystemExit) as exited:
            main([command, "--tag", tag, "--out", str(tmp_path / "r.run")])
        assert exited.value.code == 2
        assert f"clir: error: argument --tag: the run tag {tag!r} {problem}" in capsys.readouterr().err


def test_an_unknown_language_is_warned_about_once_a_command(tmp_path, capsys, monkeypatch):
    """--doc-lang xx printed its warning once per analyzer made: 7 times in one command."""
    monkeypatch.setattr("clir.text.analyzer._WARNED", set())
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji"), Document("d2", "moto")], queries, {"q1": {"d1": 1}},
               parallel=[ParallelPair("p1", "water", "maji")]).save(collection)  # fmt: skip
    argv = ["baselines", "--collection", str(collection), "--doc-lang", "xx", "--out", str(tmp_path / "b")]
    assert main([*argv, "--quiet"]) == 0
    assert capsys.readouterr().err.count("no stopwords, lemmatiser or stemmer known for language 'xx'") == 1


def test_tables_says_the_languages_of_the_tables_it_wrote(tmp_path, capsys):
    """A collection of German queries got de->sw tables, and clir tables said it wrote en->sw ones."""
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "wasser")]}
    pairs = [ParallelPair("p1", "wasser", "maji"), ParallelPair("p2", "feuer", "moto")]
    documents = [Document("d1", "maji")]
    Collection("c", "sw", "de", documents, queries, {"q1": {"d1": 1}}, parallel=pairs).save(collection)
    assert main(["tables", "--collection", str(collection), "--out", str(tmp_path / "t"), "--quiet"]) == 0
    assert "wrote " + str(tmp_path / "t") + ": de->sw 2 words, sw->de 2 words" in capsys.readouterr().out
    assert json.loads((tmp_path / "t" / "en-doc" / "meta.json").read_text())["source_lang"] == "de"


def test_an_imported_table_left_with_no_entry_is_an_error(tmp_path, capsys):
    """A table whose every word the analyzers dropped (or an empty file) was written as a table of
    0 words, which translates nothing, without a word."""
    collection = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}}).save(collection)
    table = tmp_path / "lex.tsv"
    argv = [
        "tables",
        "--collection",
        str(collection),
        "--import-tables",
        str(table),
        "--out",
        str(tmp_path / "t"),
    ]
    for text, message in (
        (
            "the\tna\t1.0\nof\twa\t0.5\n",
            "no entry of its 2 is left (the en / sw analyzers dropped every word",
        ),
        ("", "holds no entry"),
    ):
        table.write_text(text)
        assert main(argv) == 2
        assert f"clir: error: {table}: {message}" in capsys.readouterr().err
        assert not (tmp_path / "t").exists()
    table.write_text("the\tna\t1.0\nwater\tmaji\t0.5\n")
    assert main(argv) == 0
    assert "en->sw 1 words" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [
        ("--b", "2", "argument --b: must be a finite number in [0, 1], got '2'"),
        ("--k1", "-1", "argument --k1: must be a finite number in [0, 1e+100], got '-1'"),
        ("--k1", "nan", "argument --k1: must be a finite number in [0, 1e+100], got 'nan'"),
        # finite, but its weights overflowed: -inf and NaN scores, a non-matching document listed
        ("--k1", "1e308", "argument --k1: must be a finite number in [0, 1e+100], got '1e308'"),
        ("--mu", "0", "argument --mu: must be a finite number >= 1e-100, got '0'"),
        ("--mu", "1e-320", "argument --mu: must be a finite number >= 1e-100, got '1e-320'"),
        # named BaselineConfig's psq_cumulative, its range not in the help
        ("--psq-cumulative", "2", "argument --psq-cumulative: must be a finite number in (0, 1], got '2'"),
    ],
)
def test_index_names_the_retrieval_option_out_of_range(tmp_path, capsys, option, value, message):
    """They were named by the config key they fill (``BaselineConfig: model_params.bm25: b``)."""
    args = [
        "index",
        "--collection",
        str(tmp_path),
        "--mode",
        "qt",
        "--model",
        "bm25",
        "--out",
        str(tmp_path / "i"),
    ]
    with pytest.raises(SystemExit) as exit_:
        main([*args, option, value])
    assert exit_.value.code == 2
    assert message in capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["index", "--mode", "qt", "--model", "ql", "--k1", "0.3"], "--k1 has no effect with --model ql"),
        (["index", "--mode", "qt", "--model", "ql", "--b", "0.3"], "--b has no effect with --model ql"),
        (
            ["index", "--mode", "qt", "--mu", "50"],
            "--mu has no effect with --model bm25: it is a QL parameter",
        ),
        (["index", "--mode", "qt", "--psq-top-k", "3"], "--psq-top-k has no effect with --mode qt"),
        (
            ["index", "--mode", "dt", "--psq-cumulative", "0.5"],
            "--psq-cumulative has no effect with --mode dt",
        ),
        (
            ["tables", "--alignments", "a.links", "--iterations", "3"],
            "--iterations has no effect with --alignments",
        ),
        (["tables", "--import-tables", "t.tsv", "--seed", "3"], "--seed has no effect with --import-tables"),
        (
            ["tables", "--write-tokens", "tok", "--iterations", "3"],
            "--iterations has no effect with --write-tokens",
        ),
        (
            ["search", "--bundle", "b", "--topics", "t.tsv", "--snippet", "20"],
            "--snippet has no effect with --topics",
        ),
        (
            ["search", "--bundle", "b", "--query", "sheep", "--tag", "mine"],
            "--tag has no effect with --query",
        ),
    ],
)
def test_an_option_given_where_it_has_no_effect_is_refused(argv, message, tmp_path, capsys):
    """They were taken and ignored (``clir index --model ql --k1 0.3`` indexed QL as without it)."""
    common = {"index": ["--tables", "t", "--out", str(tmp_path / "o")], "tables": [], "search": []}
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--collection", str(tmp_path), *common[argv[0]]])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith(f"clir: error: {message}") and f"drop it (see 'clir {argv[0]} --help')" in err
    assert not (tmp_path / "o").exists()


def test_a_tables_seed_that_changes_nothing_is_refused(tmp_path, capsys):
    """clir tables --seed 3 learned the same tables as --seed 0 (the EM starts uniform) and
    recorded the seed, so the tables were learned again for each seed."""
    out = tmp_path / "o"
    assert main(["tables", "--collection", str(tmp_path), "--out", str(out), "--seed", "3"]) == 2
    assert capsys.readouterr().err == (
        "clir: error: --seed 3 changes nothing: IBM Model 1's EM starts from uniform probabilities, "
        "so the tables are the same for every seed; drop it\n"
    )
    assert not out.exists()


def test_options_where_they_have_an_effect_and_defaults_pass():
    parser = build_parser()
    index = ["index", "--collection", "c", "--tables", "t", "--out", "o"]
    args = parser.parse_args([*index, "--mode", "qt", "--model", "ql"])  # the defaults are not "given"
    assert (args.k1, args.b, args.mu, args.psq_top_k, args.psq_cumulative) == (1.5, 0.75, 2500.0, 10, 0.9)
    args = parser.parse_args([*index, "--mode", "psq", "--model", "ql", "--mu", "50", "--psq-top-k", "3"])
    assert (args.mu, args.psq_top_k) == (50.0, 3)
    args = parser.parse_args(
        [*index, "--mode", "psq", "--k1", "0.3", "--b", "0.2", "--psq-cumulative", "0.5"]
    )
    assert (args.k1, args.b, args.psq_cumulative) == (0.3, 0.2, 0.5)
    args = parser.parse_args(
        ["tables", "--collection", "c", "--out", "o", "--iterations", "3", "--seed", "2"]
    )
    assert (args.iterations, args.seed) == (3, 2)
    assert parser.parse_args(["tables", "--collection", "c", "--alignments", "a.links"]).iterations == 10
    search = ["search", "--bundle", "b", "--collection", "c"]
    assert parser.parse_args([*search, "--query", "sheep", "--snippet", "20"]).snippet == 20
    assert parser.parse_args([*search, "--topics", "t.tsv", "--out", "r", "--tag", "mine"]).tag == "mine"


def test_evaluate_per_query_table_lists_queries_in_natural_order(tmp_path, capsys):
    """Qrels files are sorted as text (q1, q10, q2); the per-query table had listed them so."""
    run, qrels = tmp_path / "a.run", tmp_path / "a.qrels"
    qrels.write_text("".join(f"{q} 0 d1 1\n" for q in ("q1", "q10", "q2")))
    run.write_text("".join(f"{q} Q0 d1 1 1.0 x\n" for q in ("q1", "q10", "q2")))
    assert main(["evaluate", str(run), str(qrels), "--metrics", "AP", "--per-query"]) == 0
    first_column = [line.split()[0] for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert first_column[first_column.index("q1") : first_column.index("q1") + 3] == ["q1", "q2", "q10"]
    assert first_column[0] == "query"  # the per-query table's heading had said "system"
    # --json --per-query had kept the qrels' order (q1, q10, q2)
    assert main(["evaluate", str(run), str(qrels), "--metrics", "AP", "--per-query", "--json"]) == 0
    assert list(json.loads(capsys.readouterr().out)["per_query"]["AP"]) == ["q1", "q2", "q10"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        # named BibleCollectionBuilder's n_dev
        (["data", "bible", "--pair", "en-sw", "--n-dev", "-1"], "argument --n-dev: must be an integer >= 0"),
        # 1 had been refused as outside [0, 1) after "must be a finite number in [0, 1]" for 2
        (["data", "pseudo", "c", "--holdout", "1"], "argument --holdout: must be a finite number in [0, 1)"),
        # named AlignConfig's refine_iterations and csls_k
        (["embed", "align", "v", "--refine", "-1"], "argument --refine: must be an integer >= 0"),
        (["embed", "align", "v", "--csls-k", "0"], "argument --csls-k: must be an integer >= 1"),
        # named test_size, once the space was loaded and the seed pairs learned
        (
            ["embed", "align", "v", "--test-size", "nan"],
            "argument --test-size: must be a share of the seed words in [0, 1) or a whole number of them",
        ),
        (["embed", "align", "v", "--test-size", "1.5"], "argument --test-size: must be a share"),
        # they had been ignored
        (
            ["embed", "train", "c", "--monolingual", "--no-centre"],
            "--no-centre has no effect with --monolingual: monolingual vectors are centred by "
            "'clir embed align'; drop it",
        ),
        (
            ["embed", "align", "v", "--seed-source", "identical", "--collections", "c"],
            "--collections has no effect with --seed-source identical",
        ),
    ],
)
def test_count_share_and_ignored_options_are_named_by_the_command_line(argv, message, tmp_path, capsys):
    with pytest.raises(SystemExit) as exit_info:
        main([*argv, "--out", str(tmp_path / "o")])
    assert exit_info.value.code == 2
    assert capsys.readouterr().err.startswith(f"clir: error: {message}")
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize(
    ("option", "value", "message"),
    [("--dim", "0", "--dim 0 is invalid; expected a value >= 1 and <= 10000"),
     ("--dim", "20000", "--dim 20000 is invalid; expected a value >= 1 and <= 10000"),
     ("--epochs", "-1", "--epochs -1 is invalid; expected a value >= 1"),
     ("--min-count", "0", "--min-count 0 is invalid; expected a value >= 1")],
)  # fmt: skip
def test_embed_train_names_its_options_not_the_config_keys(option, value, message, tmp_path, capsys):
    """They had been named as EmbeddingConfig's keys: "clir embed train: dim=0 is invalid"."""
    out = tmp_path / "o"
    assert main(["embed", "train", str(tmp_path), option, value, "--out", str(out)]) == 2
    assert capsys.readouterr().err == f"clir: error: {message}\n"
    assert not out.exists()


def test_embed_align_names_the_option_its_seed_source_needs(tmp_path, capsys):
    """The default --seed-source ibm1 without --collections said "seed_source='ibm1' for 'sw'
    needs IBM Model 1 tables (lang->en, en->lang)", and tsv without --lexicon "needs a TSV
    lexicon path": neither named an option."""
    argv = ["embed", "align", str(tmp_path / "v"), "--out", str(tmp_path / "o")]
    assert main(argv) == 2
    assert capsys.readouterr().err.startswith(
        "clir: error: --seed-source ibm1 (the default) needs --collections"
    )
    assert main([*argv, "--seed-source", "tsv"]) == 2
    assert capsys.readouterr().err == (
        "clir: error: --seed-source tsv needs --lexicon LANG=FILE, one for each language\n"
    )


def test_data_pad_takes_the_doc_lang_its_error_names(tmp_path, capsys):
    """A collection without collection.json: 'clir data pad' said "pass --doc-lang LANG", an
    option it did not have."""
    collection = tmp_path / "c"
    words = "maji moto mti jua nyumba mtu mji siku".split()
    documents = [Document(f"d{i}", " ".join(words[i:] + words[:i])) for i in range(len(words))]
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", documents, queries, {"q1": {"d1": 1}}).save(collection)
    (collection / "collection.json").unlink()
    argv = ["data", "pad", str(collection), "--distractors", "2", "--out", str(tmp_path / "o"), "--quiet"]
    assert main(argv) == 2
    assert "the document language is unknown: pass --doc-lang LANG" in capsys.readouterr().err
    assert main([*argv, "--doc-lang", "sw"]) == 0
    assert json.loads((tmp_path / "o" / "collection.json").read_text())["doc_lang"] == "sw"


def test_retrieve_refuses_pad_with_a_ql_index(tmp_path, capsys):
    """--pad fills BM25 rankings; a QL index's were the same with it, which was taken silently."""
    from scipy import sparse as sp

    from clir.retrieval import FirstStage
    from clir.translation import TranslationTable

    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\twater\n")
    table = TranslationTable(["water"], ["maji"], sp.csr_matrix([[1.0]]), "en", "sw")
    documents = [Document("d1", "maji"), Document("d2", "moto"), Document("d3", "moto")]
    run = tmp_path / "out.run"
    for model, status in (("ql", 2), ("bm25", 0)):
        index = tmp_path / model
        stage = FirstStage("qt", model, doc_analyzer="sw", table_en_doc=table, progress=False)
        stage.index(documents).save(index)
        argv = ["retrieve", "--index", str(index), "--topics", str(topics), "--out", str(run), "--quiet"]
        assert main([*argv, "--pad"]) == status
    assert len(run.read_text().splitlines()) == 3  # bm25: d1, then d2 and d3 scored 0
    assert capsys.readouterr().err == (
        f"clir: error: --pad has no effect with --index {tmp_path / 'ql'}: it is a ql index, whose "
        "rankings list --k documents without it (every document has a score of its own); drop it\n"
    )


def test_data_check_names_no_option_it_lacks_for_a_topics_xml_without_title(tmp_path, capsys):
    """A topics.<split>.xml without <title> said "name the element with --query-field", an
    option of import, search and dense, not of 'clir data check'."""
    path = tmp_path / "c"
    queries = {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", [Document("d1", "maji")], queries, {"q1": {"d1": 1}}).save(path, xml=True)
    xml = path / "topics.test.xml"
    xml.write_text(re.sub(r"<title>.*?</title>", "", xml.read_text()))
    assert main(["data", "check", str(path)]) == 2
    err = capsys.readouterr().err
    assert "has no <title> element" in err and "--query-field" not in err


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (["--device", "cuda"], "device='cuda' but torch sees no CUDA device; use 'cpu' or 'auto'"),
        (["--precision", "bf16"], "precision='bf16' (--precision bf16, or precision: bf16 in a config)"),
    ],
)
@pytest.mark.parametrize("command", ["train", "rerank"])
def test_scoring_options_a_machine_cannot_honour_are_refused_before_the_features(
    command, options, message, tmp_path, monkeypatch, capsys
):
    """--device cuda without CUDA, or bf16 on a CPU, had been refused only once the tables,
    indexes and features were built (minutes on a real collection)."""
    import torch
    from test_union import tiny_reranker_config, tiny_world

    from clir.pipeline.features import CollectionFeatures
    from clir.training import save_config

    def no_work(*args, **kwargs):
        raise AssertionError("features were built")

    monkeypatch.setattr(CollectionFeatures, "build", no_work)
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    collection, tables, space = tiny_world()
    collection.save(tmp_path / "sw")
    tables[0].save(tmp_path / "tables" / "en-doc")
    tables[1].save(tmp_path / "tables" / "doc-en")
    space.save(tmp_path / "space")
    config = tiny_reranker_config()
    config.device = "auto"
    save_config(config, tmp_path / "train.yaml")
    argv = [command, "--collection", str(tmp_path / "sw"), "--space", str(tmp_path / "space")]
    argv += ["--tables", str(tmp_path / "tables")]
    if command == "train":
        argv += ["--config", str(tmp_path / "train.yaml"), "--out", str(tmp_path / "model")]
    else:
        argv += ["--model", str(tmp_path / "model"), "--out", str(tmp_path / "x.run")]
    assert main([*argv, *options]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"clir: error: {message}"), err
    assert not (tmp_path / "model").exists() and not (tmp_path / "x.run").exists()


@pytest.mark.parametrize(
    ("command", "out", "cache", "message"),
    [
        (["rerank", "--model", "m", "--space", "s"], "X", "X", "X is the path of"),
        (["rerank", "--model", "m", "--space", "s"], "D/r.run", "D", "D/r.run is inside"),
        (["search", "--bundle", "b", "--topics", "t.tsv"], "X", "X", "X is the path of"),
        (["dense"], "D/r.run", "D", "D/r.run is inside"),
    ],
)  # fmt: skip
def test_an_out_that_is_or_lies_in_the_commands_cache_is_refused_before_any_work(
    command, out, cache, message, tmp_path, capsys, monkeypatch
):
    """``clir rerank --out X --index-cache X`` had built the cache into X, then failed to write the
    run there; ``--out D/r.run --index-cache D`` kept the run among the cache's steps."""
    monkeypatch.chdir(tmp_path)
    (tmp_path / "c").mkdir()
    option = "--cache" if command[0] == "dense" else "--index-cache"
    assert main([*command, "--collection", "c", "--out", out, option, cache]) == 2
    expected = f"clir: error: {message} this command's output {option} {cache}; choose another --out"
    assert capsys.readouterr().err.startswith(expected)
    assert sorted(path.name for path in tmp_path.iterdir()) == ["c"]


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["evaluate", "r", "q", "--metrics", "AP", "--metrics", "P@10"], "--metrics is given twice: give it "
         "once, followed by all its values"),
        (["data", "import", "--documents", "d", "--topics", "train=a", "--topics", "test=b", "--qrels", "q",
          "--doc-lang", "sw", "--out", "o"], "--topics is given twice"),
        (["data", "import", "--documents", "d", "--topics", "a", "--qrels", "q1", "--qrels", "q2",
          "--doc-lang", "sw", "--out", "o"], "--qrels is given twice"),
        (["retrieve", "--index", "i", "--collection", "c", "--out", "o", "--k", "3", "--k=5"],
         "--k is given twice: give it once (see"),
        (["compare", "a", "--baseline", "b", "c", "q", "--baseline", "a"], "--baseline is given twice"),
    ],
)  # fmt: skip
def test_an_option_given_twice_is_refused(argv, message, tmp_path, capsys, monkeypatch):
    """argparse keeps an option's last value: ``--qrels a --qrels b`` had imported b's judgements
    alone, ``--topics train=a --topics test=b`` a collection without train queries, and ``clir
    evaluate --metrics AP --metrics P@10`` printed P@10 alone."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    assert capsys.readouterr().err.startswith(f"clir: error: {message}")
    assert list(tmp_path.iterdir()) == []
    # once each, with several values, and flags given twice, pass
    args = build_parser().parse_args(["evaluate", "r", "q", "--metrics", "AP", "P@10", "--json", "--json"])
    assert (args.metrics, args.json) == (["AP", "P@10"], True)
    assert not hasattr(args, "_clir_given")

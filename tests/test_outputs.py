"""Saves never destroy data: atomic_directory replaces only a clir output of the same kind."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import resource
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from clir.datasets import Collection
from clir.errors import ClirError, ConfigError, OutputExistsError
from clir.formats import atomic, atomic_directory, atomic_write
from clir.formats.atomic import MARKER, artefact_kind
from clir.translation import TranslationTable
from clir.types import Document, Query


def _user_dir(path: Path) -> Path:
    path.mkdir()
    (path / "thesis.tex").write_text("years of work")
    (path / "notes").mkdir()
    (path / "notes" / "a.txt").write_text("a")
    return path


def _tree(path: Path) -> dict[str, str]:
    """The text of every file under ``path`` but the marker."""
    files = sorted(p for p in path.rglob("*") if p.is_file() and p.name != MARKER)
    return {str(p.relative_to(path)): p.read_text() for p in files}


def _write(path: Path, kind: str, text: str, **options: bool) -> None:
    with atomic_directory(path, kind=kind, **options) as tmp:
        (tmp / "data.txt").write_text(text)


def test_a_user_directory_is_refused_before_the_build_and_left_intact(tmp_path):
    target = _user_dir(tmp_path / "out")
    before = _tree(target)
    entered = []
    with pytest.raises(OutputExistsError) as caught, atomic_directory(target, kind="data"):
        entered.append(True)
    assert entered == []
    assert _tree(target) == before
    message = str(caught.value)
    assert str(target) in message and "a directory that clir did not write" in message
    assert "choose another --out, or pass --force to write there anyway (nothing of it is deleted)" in message
    assert "clir never deletes what it did not create" in message
    assert isinstance(caught.value, ClirError) and isinstance(caught.value, FileExistsError)
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_a_file_is_refused_even_with_force(tmp_path):
    target = tmp_path / "out"
    target.write_text("a user's file")
    for force in (False, True):
        with pytest.raises(OutputExistsError, match=r"is a file \(clir writes a directory here\)"):
            _write(target, "data", "new", force=force)
    assert target.read_text() == "a user's file"
    assert os.listdir(tmp_path) == ["out"]


def test_a_symbolic_link_is_refused_even_with_force(tmp_path):
    real = _user_dir(tmp_path / "real")
    link = tmp_path / "link"
    link.symlink_to(real)
    with pytest.raises(OutputExistsError, match=r"is a symbolic link; .*--force never replaces it"):
        _write(link, "data", "new", force=True)
    assert link.is_symlink() and _tree(real) == {"thesis.tex": "years of work", "notes/a.txt": "a"}


def test_nothing_or_an_empty_directory_is_written(tmp_path):
    _write(tmp_path / "new" / "deep", "data", "1")
    (tmp_path / "empty").mkdir()
    _write(tmp_path / "empty", "data", "2")
    assert (tmp_path / "new" / "deep" / "data.txt").read_text() == "1"
    assert (tmp_path / "empty" / "data.txt").read_text() == "2"
    assert artefact_kind(tmp_path / "empty") == "data"
    marker = json.loads((tmp_path / "empty" / MARKER).read_text())
    assert set(marker) == {"kind", "clir_version"}


def test_a_clir_output_of_the_same_kind_is_replaced_another_kind_refused(tmp_path):
    target = tmp_path / "out"
    _write(target, "data", "old")
    (target / "stale.txt").write_text("from the old artefact")
    _write(target, "data", "new")
    assert _tree(target) == {"data.txt": "new"}  # replaced whole, not merged
    with pytest.raises(
        OutputExistsError, match=r"a clir 'data' output \(expected nothing, or a clir 'table'"
    ):
        _write(target, "table", "other")
    assert _tree(target) == {"data.txt": "new"} and artefact_kind(target) == "data"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_force_moves_a_directory_aside_never_deletes_it_nor_the_working_directory(tmp_path, monkeypatch):
    target = _user_dir(tmp_path / "out")
    (tmp_path / "out.before-clir").mkdir()  # a name taken: the next one is used
    with pytest.warns(
        UserWarning, match=r"out was not a clir 'data' output: it was moved to .*out\.before-clir-2"
    ):
        _write(target, "data", "new", force=True)
    assert _tree(target) == {"data.txt": "new"} and artefact_kind(target) == "data"
    assert _tree(tmp_path / "out.before-clir-2") == {"thesis.tex": "years of work", "notes/a.txt": "a"}
    with pytest.warns(UserWarning, match="was not a clir 'table' output"):  # another kind: kept too
        _write(target, "table", "newer", force=True)
    assert _tree(tmp_path / "out.before-clir-3") == {"data.txt": "new"}
    _write(target, "table", "newest")  # its own kind: replaced, nothing kept
    assert sorted(os.listdir(tmp_path)) == [
        "out",
        "out.before-clir",
        "out.before-clir-2",
        "out.before-clir-3",
    ]
    work = _user_dir(tmp_path / "cwd")
    monkeypatch.chdir(work / "notes")
    for protected in (work, work / "notes", Path(".")):
        with pytest.raises(OutputExistsError, match="working directory"):
            _write(protected, "data", "new", force=True)
    assert _tree(work) == {"thesis.tex": "years of work", "notes/a.txt": "a"}
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.chdir(empty)
    with pytest.raises(OutputExistsError, match=r"working directory .*--force never replaces it"):
        _write(Path("."), "data", "new")  # --out . would leave the shell in a deleted directory
    assert os.listdir(empty) == [] and "cwd" in os.listdir(tmp_path)


def test_a_users_dot_old_directory_survives_a_replacement(tmp_path):
    target = tmp_path / "out"
    _write(target, "data", "old")
    mine = _user_dir(tmp_path / ".out.old")
    _write(target, "data", "new")
    assert _tree(mine) == {"thesis.tex": "years of work", "notes/a.txt": "a"}
    assert (target / "data.txt").read_text() == "new"
    assert sorted(os.listdir(tmp_path)) == [".out.old", "out"]


def test_an_interrupted_build_leaves_the_old_artefact_and_no_temporary_directory(tmp_path):
    target = tmp_path / "out"
    _write(target, "data", "old")
    with pytest.raises(RuntimeError), atomic_directory(target, kind="data") as tmp:
        (tmp / "data.txt").write_text("half")
        raise RuntimeError("interrupted")
    assert _tree(target) == {"data.txt": "old"}
    assert sorted(os.listdir(tmp_path)) == ["out"]


class Killed(BaseException):
    """A ``kill -9``: once it is raised, nothing more happens on disk."""


@pytest.fixture
def dead_pid() -> int:
    """The PID of a process that has ended (the one a killed save had)."""
    process = subprocess.Popen([sys.executable, "-c", ""])
    process.wait()
    return process.pid


def save_killed(monkeypatch, save, target: Path, at: str, pid: int) -> None:
    """Run ``save()`` (an atomic_directory save of ``target``) as process ``pid``, killed ``at``:
    ``"build"`` (filling its temporary directory), ``"aside"`` (before the old directory is moved
    aside), ``"swap"`` (before the new one is renamed into place) or ``"remove"`` (before the old
    one is removed)."""
    real_replace, real_rmtree = os.replace, shutil.rmtree
    dead: list[bool] = []

    def die() -> None:
        dead.append(True)
        raise Killed

    def replace(src, dst):
        if dead or (at == "aside" and Path(src) == target) or (at == "swap" and Path(dst) == target):
            die()
        real_replace(src, dst)

    def rmtree(path, *args, **kwargs):
        if dead or at == "remove":
            die()
        real_rmtree(path, *args, **kwargs)

    with monkeypatch.context() as patch:
        patch.setattr(os, "getpid", lambda: pid)
        patch.setattr(os, "replace", replace)
        patch.setattr(shutil, "rmtree", rmtree)
        with pytest.raises(Killed):
            save(die)
    assert dead


@pytest.mark.parametrize(
    ("at", "left", "kept"),
    [("build", 1, "old"), ("aside", 2, "old"), ("swap", 2, None), ("remove", 1, "new")],
)
def test_a_save_killed_at_any_step_leaves_the_old_or_the_new_directory_and_no_leftovers(
    tmp_path, monkeypatch, dead_pid, at, left, kept
):
    target = tmp_path / "out"
    _write(target, "data", "old")

    def save(die):
        with atomic_directory(target, kind="data") as tmp:
            (tmp / "data.txt").write_text("new")
            if at == "build":
                die()

    save_killed(monkeypatch, save, target, at, dead_pid)
    with pytest.warns(UserWarning, match="was killed") if at == "swap" else contextlib.nullcontext():
        _write(target, "data", "next")  # the next save
    assert _tree(target) == {"data.txt": "next"}
    assert sorted(os.listdir(tmp_path)) == ["out"]
    # what a reader finds once the leftovers are tidied (as a resumed training does first)
    _write(target, "data", "old")
    save_killed(monkeypatch, save, target, at, dead_pid)
    leftovers = sorted(set(os.listdir(tmp_path)) - {"out"})
    assert len(leftovers) == left
    assert all(re.fullmatch(rf"\.out\.{dead_pid}\.[a-z0-9_]{{8}}\.(tmp|old)", name) for name in leftovers)
    if kept is None:  # killed between the two renames: no out at all, the new one complete beside
        assert not target.exists()
        with pytest.warns(UserWarning, match=r"out: a save of it was killed as it swapped the new data in"):
            atomic.tidy_interrupted(target, "data")
        kept = "new"
    else:
        atomic.tidy_interrupted(target, "data")
    assert _tree(target) == {"data.txt": kept} and artefact_kind(target) == "data"
    assert sorted(os.listdir(tmp_path)) == ["out"]


def test_tidying_leaves_a_running_saves_directories_and_everything_else_alone(tmp_path, dead_pid):
    target = tmp_path / "out"
    _write(target, "data", "old")
    kept = [
        f".out.{os.getpid()}.abcdefgh.tmp",  # a save of this process, under way
        ".out.1.abcdefgh.old",  # init's: running
        ".out.abcdefgh.tmp",  # no process named: a user's, or a clir before the PID was named
        ".out.old",
        f".out.{dead_pid}.abc.tmp",
        f".other.{dead_pid}.abcdefgh.tmp",  # another directory's
    ]
    for name in kept:
        _user_dir(tmp_path / name)
    (tmp_path / f".out.{dead_pid}.abcdefgh.old").write_text("a user's file")
    (tmp_path / f".out.{dead_pid}.bcdefghi.tmp").symlink_to(tmp_path / ".out.old")
    gone = _user_dir(tmp_path / f".out.{dead_pid}.cdefghij.tmp")
    _write(target, "data", "new")
    assert not gone.exists()
    for name in kept:
        assert _tree(tmp_path / name) == {"thesis.tex": "years of work", "notes/a.txt": "a"}
    assert (tmp_path / f".out.{dead_pid}.abcdefgh.old").read_text() == "a user's file"
    assert (tmp_path / f".out.{dead_pid}.bcdefghi.tmp").is_symlink()
    assert _tree(target) == {"data.txt": "new"}


def test_written_files_and_directories_get_the_usual_permissions(tmp_path):
    from safetensors.numpy import save_file

    old = os.umask(0o027)
    try:
        with atomic_directory(tmp_path / "out", kind="model") as tmp:
            np.save(tmp / "a.npy", np.zeros(3), allow_pickle=False)
            save_file({"w": np.zeros(2, np.float32)}, str(tmp / "model.safetensors"))  # makes 0600
            (tmp / "sub").mkdir()
            (tmp / "sub" / "t.txt").write_text("x")
            with atomic_write(tmp / "sub" / "atomic.json") as out:
                out.write("{}")
        with atomic_write(tmp_path / "file.txt") as out:
            out.write("x")
    finally:
        os.umask(old)
    out_dir = tmp_path / "out"
    modes = {
        str(p.relative_to(tmp_path)): stat.S_IMODE(p.stat().st_mode) for p in [out_dir, *out_dir.rglob("*")]
    }
    modes["file.txt"] = stat.S_IMODE((tmp_path / "file.txt").stat().st_mode)
    assert modes == {
        "out": 0o750,
        "out/sub": 0o750,
        **{
            f"out/{name}": 0o640
            for name in ("a.npy", "model.safetensors", "sub/t.txt", "sub/atomic.json", MARKER)
        },
        "file.txt": 0o640,
    }


def test_atomic_write_over_a_directory_is_refused(tmp_path):
    target = _user_dir(tmp_path / "run.txt")
    match = r"run\.txt is a directory \(clir writes a file here\)"
    with pytest.raises(OutputExistsError, match=match), atomic_write(target) as out:
        out.write("x")
    assert _tree(target) == {"thesis.tex": "years of work", "notes/a.txt": "a"}


def _collection() -> Collection:
    return Collection(
        "tiny",
        "sw",
        "en",
        [Document("d1", "maji safi")],
        {"test": [Query("q1", "clean water")]},
        {"q1": {"d1": 1}},
    )


def test_collection_and_table_saves_refuse_user_data_and_each_other(tmp_path):
    user = _user_dir(tmp_path / "user")
    with pytest.raises(OutputExistsError, match="user is a directory that clir did not write"):
        _collection().save(user)
    assert _tree(user) == {"thesis.tex": "years of work", "notes/a.txt": "a"}
    with pytest.warns(UserWarning, match="user was not a clir 'collection' output"):
        _collection().save(user, force=True)
    assert _tree(tmp_path / "user.before-clir") == {"thesis.tex": "years of work", "notes/a.txt": "a"}
    assert Collection.load(user).documents == [Document("d1", "maji safi")]
    table = TranslationTable(["water"], ["maji"], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    with pytest.raises(OutputExistsError, match="a clir 'collection' output"):
        table.save(user)
    table.save(tmp_path / "table")
    table.save(tmp_path / "table")  # its own kind: replaced
    assert artefact_kind(tmp_path / "table") == "translation-table"


def test_artefacts_saved_without_the_marker_still_load(tmp_path):
    _collection().save(tmp_path / "c")
    (tmp_path / "c" / MARKER).unlink()  # as an older clir wrote it
    assert Collection.load(tmp_path / "c").split("test") == [Query("q1", "clean water")]
    with pytest.raises(OutputExistsError):
        _collection().save(tmp_path / "c")


def test_directories_filled_file_by_file_are_claimed_never_taken(tmp_path):
    from clir.formats.atomic import output_directory
    from clir.pipeline.cache import StepRunner

    user = _user_dir(tmp_path / "user")
    before = _tree(user)
    with pytest.raises(OutputExistsError, match="expected nothing, or a clir 'experiment' output"):
        StepRunner(user).__enter__()
    with pytest.raises(OutputExistsError, match="a clir 'tables' output"):
        output_directory(user, kind="tables")
    assert _tree(user) == before and not (user / MARKER).exists()

    claimed = output_directory(tmp_path / "new" / "tables", kind="tables")
    assert artefact_kind(claimed) == "tables"
    (claimed / "en-doc.txt").write_text("x")
    assert output_directory(claimed, kind="tables") == claimed  # its own kind: claimed again
    assert (claimed / "en-doc.txt").read_text() == "x"  # nothing replaced
    with pytest.raises(OutputExistsError, match="a clir 'tables' output"):
        output_directory(claimed, kind="reranker")

    output_directory(user, kind="experiment", force=True)  # force claims, and deletes nothing
    assert _tree(user) == before and artefact_kind(user) == "experiment"
    with StepRunner(user) as runner:
        assert runner.root == user


def test_check_output_names_a_file_in_the_way(tmp_path):
    from clir.formats.atomic import check_output

    blocker = tmp_path / "file"
    blocker.write_text("mine")
    with pytest.raises(
        OutputExistsError, match=re.escape(f"{blocker} is a file, so {blocker / 'a' / 'b.run'} cannot")
    ):
        check_output(blocker / "a" / "b.run")
    with pytest.raises(OutputExistsError, match=r"is a directory \(clir writes a file here\)"):
        check_output(tmp_path)
    check_output(tmp_path / "x" / "y.run")  # absent parents are fine
    assert not (tmp_path / "x").exists()  # and a check creates nothing


def test_an_input_of_the_command_is_never_its_out(tmp_path, capsys):
    """clir data pad C --out C replaced the collection it padded, and clir retrieve / rerank /
    search / dense wrote the run over their own --topics or --run file (an existing file is
    replaced as an output): both are refused before any work, --force or not."""
    from clir.cli import main
    from clir.formats.atomic import check_output

    collection = tmp_path / "c"
    Collection("c", "sw", "en", [Document("d1", "mbwa mkubwa"), Document("d2", "paka")],
               {"test": [Query("q1", "dog")]}, {"q1": {"d1": 1}}).save(collection)  # fmt: skip
    before = _tree(collection)
    for force in ([], ["--force"]):
        argv = ["data", "pad", str(collection), "--out", str(collection), "--distractors", "2"]
        assert main([*argv, *force]) == 2
        expected = f"clir: error: {collection} is one of this command's inputs ({collection}); choose another"
        assert capsys.readouterr().err.startswith(expected)
    assert _tree(collection) == before
    topics = tmp_path / "topics.tsv"
    topics.write_text("q1\tdog\n")
    (tmp_path / "link.tsv").symlink_to(topics)
    argv = ["retrieve", "--index", str(tmp_path / "index"), "--topics", str(tmp_path / "link.tsv")]
    assert main([*argv, "--out", str(topics)]) == 2
    assert f"{topics} is one of this command's inputs ({tmp_path / 'link.tsv'})" in capsys.readouterr().err
    assert topics.read_text() == "q1\tdog\n"
    check_output(tmp_path / "new.run", inputs=[topics, None])  # another path, or no input: fine
    # an --out inside an input directory, or holding one, would replace or move part of it
    for force in ([], ["--force"]):
        argv = ["data", "pad", str(collection), "--distractors", "2", *force]
        assert main([*argv, "--out", str(collection / "padded")]) == 2
        assert f"is inside one of this command's inputs ({collection})" in capsys.readouterr().err
        assert main([*argv, "--out", str(tmp_path)]) == 2
        assert (
            f"is a directory holding one of this command's inputs ({collection})" in capsys.readouterr().err
        )
    assert _tree(collection) == before
    check_output(tmp_path / "cc", inputs=[collection])  # a sibling sharing a name prefix: fine
    # clir train --force marked the collection as a reranker before refusing it as its --out
    config = str(Path(__file__).parents[1] / "configs" / "reranker-tiny.yaml")
    argv = ["train", "--config", config, "--collection", str(collection), "--space", str(tmp_path / "s")]
    assert main([*argv, "--out", str(collection), "--force"]) == 2
    assert "is one of this command's inputs" in capsys.readouterr().err
    assert _tree(collection) == before and artefact_kind(collection) == "collection"


def test_data_import_refuses_an_out_holding_its_topics_as_its_other_inputs(tmp_path, capsys):
    """--topics test=ud/test.tsv inside --out ud --force moved the user's directory aside
    (ud.before-clir), while --documents or --qrels there were refused, --force or not."""
    from clir.cli import main

    (tmp_path / "docs.jsonl").write_text('{"docno": "d1", "text": "mbwa"}\n')
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    user = tmp_path / "ud"
    user.mkdir()
    (user / "test.tsv").write_text("q1\tdog\n")
    before = _tree(user)
    docs, qrels = str(tmp_path / "docs.jsonl"), str(tmp_path / "qrels.txt")
    argv = [
        "data",
        "import",
        "--documents",
        docs,
        "--qrels",
        qrels,
        "--doc-lang",
        "sw",
        "--out",
        str(user),
        "--quiet",
    ]
    for topics in (f"test={user / 'test.tsv'}", str(user / "test.tsv")):
        for force in ([], ["--force"]):
            assert main([*argv, "--topics", topics, *force]) == 2
            err = capsys.readouterr().err
            assert f"clir: error: {user} is a directory holding one of this command's inputs" in err
    assert _tree(user) == before and not (tmp_path / "ud.before-clir").exists()


def test_a_link_as_a_run_file_out_is_refused_as_a_link_as_a_directory_out(tmp_path, capsys):
    """clir retrieve --out link.run replaced the link with a regular file (its target kept)."""
    from clir.cli import main
    from clir.formats.atomic import check_output

    run = tmp_path / "mine.run"
    run.write_text("q1 Q0 d1 1 1.0 mine\n")
    link = tmp_path / "link.run"
    link.symlink_to(run)
    argv = ["retrieve", "--index", str(tmp_path / "index"), "--collection", str(tmp_path / "c")]
    assert main([*argv, "--out", str(link)]) == 2
    assert f"clir: error: {link} is a symbolic link; choose another --out" in capsys.readouterr().err
    assert link.is_symlink() and run.read_text() == "q1 Q0 d1 1 1.0 mine\n"
    with pytest.raises(OutputExistsError, match="is a symbolic link"):
        check_output(link, file_format="run")
    (tmp_path / "dangling.run").symlink_to(tmp_path / "absent.run")
    with pytest.raises(OutputExistsError, match="is a symbolic link"):
        check_output(tmp_path / "dangling.run")


def test_explain_png_refusals_name_the_png_option(tmp_path, capsys):
    """clir explain --png DIR said "choose another --out", an option explain does not have."""
    from clir.cli import main

    directory = tmp_path / "plots"
    directory.mkdir()
    blocker = tmp_path / "a-file"
    blocker.write_text("mine")
    argv = ["explain", "--model", str(tmp_path / "m"), "--collection", str(tmp_path / "c"),
            "--space", str(tmp_path / "s"), "--qid", "q1", "--docno", "d1"]  # fmt: skip
    for png, found in ((directory, "a directory (clir writes a file here)"),
                       (blocker / "h.png", "a file, so")):  # fmt: skip
        assert main([*argv, "--png", str(png)]) == 2
        err = capsys.readouterr().err
        assert err.startswith("clir: error: ") and found in err
        assert "choose another --png (--force never replaces it)" in err and "--out" not in err
    assert blocker.read_text() == "mine" and list(directory.iterdir()) == []


def test_explain_refuses_a_png_not_named_png_before_any_work(tmp_path, capsys):
    """clir explain --png x.txt wrote the PNG heatmaps under the .txt name."""
    from clir.cli import main
    from clir.pipeline.explain import explain_pair

    argv = ["explain", "--model", str(tmp_path / "m"), "--collection", str(tmp_path / "c"),
            "--space", str(tmp_path / "s"), "--qid", "q1", "--docno", "d1"]  # fmt: skip
    for name in ("x.txt", "heatmaps"):
        assert main([*argv, "--png", str(tmp_path / name)]) == 2  # the model etc. do not exist
        err = capsys.readouterr().err
        assert err.startswith(f"clir: error: --png {tmp_path / name}: ") and "ending in .png" in err
        assert "Traceback" not in err and not (tmp_path / name).exists()
    with pytest.raises(ConfigError, match=r"png must be a file name ending in \.png"):
        explain_pair(tmp_path / "m", None, tmp_path / "s", "q1", "d1", png=tmp_path / "x.txt")  # type: ignore[arg-type]


def test_a_file_output_replaces_only_a_file_of_its_format(tmp_path, capsys):
    """clir retrieve --out notes.txt (or COLLECTION/topics.test.tsv) wrote a run over the user's
    file: a run output now replaces only an empty file or a run, a PNG only a PNG."""
    from clir.cli import main
    from clir.formats.atomic import check_output

    files = {
        "notes.txt": b"my notes\n",
        "topics.tsv": b"q1\tdog\n",
        "five.run": b"q1 Q0 d1 1 2.5\n",
        "words.run": b"q1 Q0 d1 first 2.5 tag\n",
        "plot.png": b"not a png",
    }
    for name, content in files.items():
        (tmp_path / name).write_bytes(content)
        with pytest.raises(OutputExistsError, match=rf"{name} is a file that is not a TREC run"):
            check_output(tmp_path / name, file_format="run")
        assert (tmp_path / name).read_bytes() == content
    for name, content in {
        "old.run": b"\n\nq1 Q0 d1 1 -2e3 bm25\nq1 Q0 d2 2 -3 bm25\n",
        "empty.run": b"",
    }.items():
        (tmp_path / name).write_bytes(content)
        check_output(tmp_path / name, file_format="run")
    check_output(tmp_path / "notes.txt")  # no format named: any file
    with pytest.raises(OutputExistsError, match=r"plot\.png is a file that is not a PNG image"):
        check_output(tmp_path / "plot.png", file_format="png")
    (tmp_path / "real.png").write_bytes(b"\x89PNG\r\n\x1a\n" + bytes(8))
    check_output(tmp_path / "real.png", file_format="png")

    argv = ["retrieve", "--index", str(tmp_path / "index"), "--topics", str(tmp_path / "topics.tsv")]
    assert main([*argv, "--out", str(tmp_path / "notes.txt")]) == 2
    assert (
        "notes.txt is a file that is not a TREC run (clir replaces only a TREC run here)"
        in capsys.readouterr().err
    )
    assert (tmp_path / "notes.txt").read_bytes() == b"my notes\n"


def test_a_special_file_at_a_file_output_is_refused_never_replaced(tmp_path, capsys):
    """A device, a pipe or a socket at a run's --out was replaced by a regular file (the write's
    rename): `clir retrieve --out /dev/null` run as root replaced the system's /dev/null."""
    import socket

    from clir.cli import main
    from clir.formats.atomic import check_output

    fifo, sock = tmp_path / "fifo", tmp_path / "sock"
    os.mkfifo(fifo)
    with socket.socket(socket.AF_UNIX) as server:
        server.bind(str(sock))
    for path in (fifo, sock):
        with pytest.raises(
            OutputExistsError, match=rf"{path.name} is a special file \(a device, a pipe or a socket\)"
        ):
            check_output(path, file_format="run")
        with pytest.raises(OutputExistsError, match="is a special file"), atomic_write(path) as out:
            out.write("q1 Q0 d1 1 1.0 x\n")
    argv = ["retrieve", "--index", str(tmp_path / "index"), "--topics", str(tmp_path / "topics.tsv")]
    assert main([*argv, "--out", str(fifo)]) == 2
    assert f"clir: error: {fifo} is a special file" in capsys.readouterr().err
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode) and stat.S_ISSOCK(os.lstat(sock).st_mode)
    assert sorted(os.listdir(tmp_path)) == ["fifo", "sock"]  # no temporary file left either
    (tmp_path / "link").symlink_to(fifo)  # a link is refused as a link, and atomic_write replaces the link
    with pytest.raises(OutputExistsError, match="link is a symbolic link"):
        check_output(tmp_path / "link", file_format="run")


def _access_as_a_user(monkeypatch) -> None:
    """``os.access`` as for a user who is not root (the owner's bits; root may write anywhere)."""
    real = os.access
    bits = {os.R_OK: stat.S_IRUSR, os.W_OK: stat.S_IWUSR, os.X_OK: stat.S_IXUSR}

    def access(path, mode, **kwargs):
        if os.geteuid() != 0:
            return real(path, mode, **kwargs)
        have = os.stat(path).st_mode
        return all(have & bit for wanted, bit in bits.items() if mode & wanted)

    monkeypatch.setattr(atomic.os, "access", access)


def test_a_write_protected_output_is_refused_never_replaced(tmp_path, capsys, monkeypatch):
    """A write-protected clir output (chmod a-w) was replaced as any other: its old tree, moved
    aside to .NAME.<pid>.<random>.old, could not be deleted but the files of its writable
    subdirectories were (a user's `chmod a-w I` lost I/index/*, the rest left hidden there for
    good), and a write-protected run file was replaced as `>` and `mv` would not."""
    from clir.cli import main
    from clir.formats.atomic import check_output

    _access_as_a_user(monkeypatch)
    out = tmp_path / "I"

    def save(text: str) -> None:
        with atomic_directory(out, kind="retriever") as tmp:
            (tmp / "retriever.json").write_text(text)
            (tmp / "index").mkdir()
            (tmp / "index" / "index.json").write_text(text)

    save("old")
    for protected in (out, out / "index"):
        protected.chmod(0o555)
        try:
            with pytest.raises(OutputExistsError, match=rf"whose directory {protected} is write-protected"):
                save("new")
            with pytest.raises(OutputExistsError, match="is write-protected"):
                check_output(out, kind="retriever")
        finally:
            protected.chmod(0o755)
        assert _tree(out) == {"retriever.json": "old", "index/index.json": "old"}
        assert sorted(os.listdir(tmp_path)) == ["I"]  # nothing moved aside
    save("new")  # writable again: replaced
    assert _tree(out) == {"retriever.json": "new", "index/index.json": "new"}

    run = tmp_path / "kept.run"
    run.write_text("q1 Q0 d1 1 1.0 keep\n")
    run.chmod(0o444)
    with pytest.raises(OutputExistsError, match=r"kept\.run is a write-protected file"):
        check_output(run, file_format="run")
    argv = ["retrieve", "--index", str(tmp_path / "index"), "--topics", str(tmp_path / "topics.tsv")]
    assert main([*argv, "--out", str(run)]) == 2
    assert f"clir: error: {run} is a write-protected file" in capsys.readouterr().err
    assert run.read_text() == "q1 Q0 d1 1 1.0 keep\n"


def test_an_out_with_dot_dot_after_a_link_is_checked_and_written_where_the_system_puts_it(
    tmp_path, capsys, monkeypatch
):
    """``link/../x`` is ``x`` beside the link's target, for the system; clir had cut ``link/..``
    out of the text (``os.path.abspath``): ``clir data pad C --out link/../C`` replaced the input
    ``./C`` with the padded collection, and ``--out link/../notes.txt`` passed the check of
    ``./notes.txt`` and then wrote the run over the user's ``real/notes.txt``."""
    from clir.cli import main
    from clir.formats.atomic import check_output

    monkeypatch.chdir(tmp_path)
    (tmp_path / "real" / "sub").mkdir(parents=True)
    (tmp_path / "link").symlink_to(tmp_path / "real" / "sub")
    (tmp_path / "real" / "notes.txt").write_text("my notes\n")
    with pytest.raises(OutputExistsError, match=r"real/notes\.txt is a file that is not a TREC run"):
        check_output("link/../notes.txt", file_format="run")
    argv = ["retrieve", "--index", "index", "--topics", "topics.tsv", "--out", "link/../notes.txt"]
    assert main(argv) == 2
    assert "notes.txt is a file that is not a TREC run" in capsys.readouterr().err
    assert (tmp_path / "real" / "notes.txt").read_text() == "my notes\n"

    Collection("c", "sw", "en", [Document("d1", "mbwa mkubwa"), Document("d2", "paka")],
               {"test": [Query("q1", "dog")]}, {"q1": {"d1": 1}}).save("C")  # fmt: skip
    before = _tree(tmp_path / "C")
    assert main(["data", "pad", "C", "--out", "link/../C", "--distractors", "2"]) == 0
    assert _tree(tmp_path / "C") == before  # the input, untouched
    assert len(Collection.load(tmp_path / "real" / "C").documents) == 4  # where the system puts it
    with atomic_directory("link/../saved", kind="collection") as tmp:
        (tmp / "documents.jsonl").write_text("")
    assert (tmp_path / "real" / "saved" / "documents.jsonl").is_file()
    assert not (tmp_path / "saved").exists()


def test_every_path_argument_is_an_input_that_force_never_replaces(tmp_path, capsys):
    """clir index / bundle / embed train --out X --force deleted X when X was their own
    --collection or --space (only some commands named their inputs): every path argument but
    the outputs is now one."""
    from clir.cli import main

    space = _user_dir(tmp_path / "space")
    before = _tree(space)
    argv = ["bundle", "--model", str(tmp_path / "m"), "--tables", str(tmp_path / "t"), "--collection",
            str(tmp_path / "c"), "--space", str(space), "--out", str(space), "--force"]  # fmt: skip
    assert main(argv) == 2
    assert f"{space} is one of this command's inputs ({space})" in capsys.readouterr().err
    assert _tree(space) == before


def test_train_refuses_an_out_holding_its_config_s_init_from(tmp_path, capsys):
    """--init-from M --out M was refused, but the same start given as the config's
    optim.init_from trained into M and replaced the pretrained model it started from."""
    from clir.cli import main
    from clir.formats.atomic import output_directory

    pretrained = output_directory(tmp_path / "pretrained", kind="reranker")
    output_directory(pretrained / "seed0", kind="checkpoint")  # a member that training replaces
    (pretrained / "seed0" / "model.safetensors").write_bytes(b"weights")
    before = _tree(pretrained)
    tiny = (Path(__file__).parents[1] / "configs" / "reranker-tiny.yaml").read_text()
    argv = ["train", "--collection", str(tmp_path / "c"), "--space", str(tmp_path / "s")]
    for start, held in ((pretrained, "one of"), (pretrained / "seed0", "a directory holding one of")):
        config = tmp_path / "train.yaml"
        config.write_text(tiny.replace("  seed: 0\n", f"  seed: 0\n  init_from: {start}\n"))
        for force in ([], ["--force"]):
            assert main([*argv, "--config", str(config), "--out", str(pretrained), *force]) == 2
            assert f"{pretrained} is {held} this command's inputs ({start})" in capsys.readouterr().err
    assert _tree(pretrained) == before


@pytest.mark.parametrize("seed", ["-1", "4294967296", "x"])
def test_seed_options_take_what_numpy_and_gensim_take(seed, capsys):
    from clir.cli import main

    with pytest.raises(SystemExit) as exit_info:
        main(["compare", "a.run", "b.run", "q.qrels", "--seed", seed])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert f"argument --seed: must be an integer from 0 to 4294967295, got '{seed}'" in err


def _collection_with_parallel(path: Path, parallel: list[tuple[str, str, str]] | None = None) -> Path:
    from clir.types import ParallelPair

    pairs = [
        ParallelPair(*pair) for pair in parallel or [(f"p{i}", "water fire", "maji moto") for i in range(3)]
    ]
    documents, queries = [Document("d1", "maji"), Document("d2", "moto")], {"test": [Query("q1", "water")]}
    Collection("c", "sw", "en", documents, queries, {"q1": {"d1": 1}}, parallel=pairs).save(path)
    return path


@pytest.mark.parametrize("command", ["train", "rerank", "explain", "search"])
def test_tables_to_learn_are_checked_against_the_inputs_and_outputs_before_any_work(
    command, tmp_path, capsys, monkeypatch
):
    """--tables DIR holding no tables yet was learned into without the checks --out gets: inside
    the collection (written there), at the --out run's path or holding it, over a file (refused
    after the work, naming --out)."""
    from clir.cli import main

    def never(*args, **kwargs):
        raise AssertionError("tables learned before --tables was checked")

    monkeypatch.setattr("clir.pipeline.tables.learn_tables", never)
    collection = _collection_with_parallel(tmp_path / "c")
    before = _tree(collection)
    notes = tmp_path / "notes.txt"
    notes.write_text("mine")
    absent = str(tmp_path / "absent")
    config = str(Path(__file__).parents[1] / "configs" / "reranker-tiny.yaml")
    given = {
        "train": ["--config", config, "--space", absent],
        "rerank": ["--model", absent, "--space", absent],
        "explain": ["--model", absent, "--space", absent, "--qid", "q1", "--docno", "d1"],
        "search": ["--bundle", absent, "--query", "water"],
    }[command]
    out = {"train": tmp_path / "outs" / "model", "rerank": tmp_path / "outs" / "r.run"}.get(command)
    argv = [command, "--collection", str(collection), *given, *(["--out", str(out)] if out else [])]
    cases = [
        (collection / "tables", f"is inside one of this command's inputs ({collection})"),
        (notes, "is a file"),
        (_user_dir(tmp_path / "mine"), "is a directory that clir did not write"),
    ]
    if out is not None:
        cases += [(out, f"is the path of this command's output --out {out}"),
                  (out.parent, f"is a directory holding this command's output --out {out}")]  # fmt: skip
    for tables, found in cases:
        assert main([*argv, "--tables", str(tables)]) == 2, tables
        err = capsys.readouterr().err
        assert err.startswith(f"clir: error: {tables} {found}") and "choose another --tables" in err, err
    # another kind of clir output (the --space given as --tables) said "is one of this
    # command's inputs; choose another --tables", which did not say what was wrong with it
    space = tmp_path / "space"
    space.mkdir()
    (space / MARKER).write_text('{"kind": "space"}')
    assert main([*argv, "--tables", str(space)]) == 2
    assert capsys.readouterr().err.startswith(
        f"clir: error: --tables {space} holds no translation tables: it is clir's 'space' output"
    )
    assert _tree(collection) == before and not (collection / "tables").exists()
    assert notes.read_text() == "mine" and not (out or tmp_path / "x").exists()


def test_refusals_name_the_option_given_write_tokens_and_index_cache(tmp_path, capsys):
    """clir tables --write-tokens wrote the aligner's input inside the collection and named
    --out when it refused one; a link as --index-cache named --out too."""
    from clir.cli import main

    collection = _collection_with_parallel(tmp_path / "c")
    before = _tree(collection)
    argv = ["tables", "--collection", str(collection), "--quiet"]
    for path, found in ((collection / "tokens", "is inside one of"), (collection, "is one of")):
        assert main([*argv, "--write-tokens", str(path)]) == 2
        err = capsys.readouterr().err
        assert f"{path} {found} this command's inputs" in err and "choose another --write-tokens" in err
    user = _user_dir(tmp_path / "mine")
    assert main([*argv, "--write-tokens", str(user)]) == 2
    assert "choose another --write-tokens, or pass --force" in capsys.readouterr().err
    assert main([*argv, "--write-tokens", str(user), "--force"]) == 0  # moved aside, as --force says
    assert (user / "en.txt").is_file() and _tree(tmp_path / "mine.before-clir") == {
        "thesis.tex": "years of work",
        "notes/a.txt": "a",
    }
    assert _tree(collection) == before
    (tmp_path / "empty").mkdir()
    (tmp_path / "link").symlink_to(tmp_path / "empty")
    argv = ["rerank", "--model", str(tmp_path / "m"), "--collection", str(collection), "--space",
            str(tmp_path / "s"), "--out", str(tmp_path / "r.run")]  # fmt: skip
    assert main([*argv, "--index-cache", str(tmp_path / "link")]) == 2
    err = capsys.readouterr().err
    assert "link is a symbolic link; choose another --index-cache" in err and "--out" not in err


def test_a_failed_command_unclaims_the_directory_it_created(tmp_path, capsys):
    """clir baselines (and clir tables) that failed before writing anything left their --out
    behind, empty but for clir's marker; only what clir created goes, never a user's file."""
    from clir.cli import main
    from clir.formats.atomic import claimed_directory

    assert (
        main(["baselines", "--collection", str(tmp_path / "absent"), "--out", str(tmp_path / "a" / "b")]) == 2
    )
    assert "absent: no such collection directory" in capsys.readouterr().err
    assert not (tmp_path / "a").exists()  # nor the parent it made
    collection = _collection_with_parallel(tmp_path / "c", [("p1", "the of", "maji")])  # nothing to learn
    for argv in (["baselines", "--collection", str(collection), "--out", str(tmp_path / "b")],
                 ["tables", "--collection", str(collection), "--out", str(tmp_path / "b")]):  # fmt: skip
        assert main([*argv, "--quiet"]) == 2
        assert "has words on both sides" in capsys.readouterr().err and not (tmp_path / "b").exists()
    empty = tmp_path / "empty"  # an empty directory the user made stays
    empty.mkdir()
    with pytest.raises(KeyError), claimed_directory(empty, kind="baselines"):
        raise KeyError
    assert empty.is_dir() and list(empty.iterdir()) == []
    user = _user_dir(tmp_path / "user")  # --force: the marker goes, the user's files stay
    with pytest.raises(KeyError), claimed_directory(user, kind="baselines", force=True):
        raise KeyError
    assert sorted(p.name for p in user.iterdir()) == ["notes", "thesis.tex"]
    claimed = tmp_path / "claimed"  # what clir wrote before failing is kept, marker and all
    with pytest.raises(KeyError), claimed_directory(claimed, kind="baselines") as out:
        (out / "results.md").write_text("half")
        raise KeyError
    assert artefact_kind(claimed) == "baselines" and (claimed / "results.md").read_text() == "half"
    other = tmp_path / "other"  # a marker replaced with --force is put back
    _write(other, "space", "x")
    marker = (other / MARKER).read_bytes()
    with pytest.raises(KeyError), claimed_directory(other, kind="baselines", force=True):
        raise KeyError
    assert (other / MARKER).read_bytes() == marker and _tree(other) == {"data.txt": "x"}


def test_a_cache_holding_only_its_markers_temporary_file_is_taken_as_empty(tmp_path, capsys):
    """A search or rerank killed as it claimed a new --index-cache (inside the atomic write of
    its marker) left only ``.clir-artefact.json.<random>.tmp`` there, and every later run refused
    the cache as "a directory that clir did not write" (the default search cache included)."""
    from clir.cli import main

    collection = _collection_with_parallel(tmp_path / "c")
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / f".{MARKER}.k1ll3d_x.tmp").write_text('{"kind": "exp')  # cut by the kill
    argv = ["rerank", "--model", str(tmp_path / "m"), "--collection", str(collection), "--space",
            str(tmp_path / "s"), "--out", str(tmp_path / "r.run"), "--index-cache", str(cache)]  # fmt: skip
    assert main(argv) == 2  # no model: the cache is not what is refused
    err = capsys.readouterr().err
    assert "--index-cache" not in err and "did not write" not in err and str(tmp_path / "m") in err


def test_a_file_write_killed_on_the_way_leaves_a_temporary_that_the_next_write_removes(tmp_path, dead_pid):
    """A kill during a single-file write (a run, a JSON record) left ``.NAME.<random>.tmp``
    beside it, which nothing removed: they piled up, one a kill."""
    target = tmp_path / "run.txt"
    code = (
        "import os, sys\nfrom clir.formats import atomic_write\n"
        "with atomic_write(sys.argv[1]) as handle:\n    handle.write('half'); handle.flush(); os._exit(9)\n"
    )
    assert subprocess.run([sys.executable, "-c", code, str(target)]).returncode == 9
    (left,) = os.listdir(tmp_path)
    assert re.fullmatch(r"\.run\.txt\.\d+\.[a-z0-9_]{8}\.tmp", left)
    kept = [
        f".run.txt.{os.getpid()}.abcdefgh.tmp",  # a write of this process, under way
        ".run.txt.1.abcdefgh.tmp",  # init's: running
        ".run.txt.abcdefgh.tmp",  # no process named: a user's, or a clir before the PID was named
        f".other.{dead_pid}.abcdefgh.tmp",  # another file's
    ]
    for name in kept:
        (tmp_path / name).write_text("a user's file")
    (tmp_path / f".run.txt.{dead_pid}.bcdefghi.tmp").mkdir()  # a directory: not a file write's
    (tmp_path / f".run.txt.{dead_pid}.cdefghij.tmp").write_text("a killed write's")
    with atomic_write(target) as handle:
        handle.write("whole")
    assert target.read_text() == "whole"
    assert sorted(os.listdir(tmp_path)) == sorted([*kept, f".run.txt.{dead_pid}.bcdefghi.tmp", "run.txt"])
    assert all((tmp_path / name).read_text() == "a user's file" for name in kept)


@contextlib.contextmanager
def _file_size_limit(size: int):
    """Writes past ``size`` bytes fail as on a full disk (``EFBIG``: Python ignores SIGXFSZ)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
    resource.setrlimit(resource.RLIMIT_FSIZE, (size, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


@pytest.mark.parametrize("writer", ["text", "numpy", "safetensors", "file"])
def test_a_full_disk_is_an_error_naming_the_output_and_keeps_the_old_one(tmp_path, writer):
    """A write past a full disk or a file-size limit names no file (clir had said "No space left
    on device" or "File too large" alone), and numpy's short write and safetensors' error give
    neither file nor error number (both had been reported as "unexpected ... a bug in clir")."""
    from safetensors.numpy import save_file

    from clir.cli import _failure

    target = tmp_path / ("run.txt" if writer == "file" else "out")
    if writer == "file":
        target.write_text("old run")
    else:
        _write(target, "data", "old")
    big = np.zeros(1 << 14, dtype=np.float32)
    with pytest.raises(OSError) as caught, _file_size_limit(1 << 12):
        if writer == "file":
            with atomic_write(target) as handle:
                handle.write("x" * (1 << 16))
        else:
            with atomic_directory(target, kind="data") as tmp:
                if writer == "text":
                    (tmp / "data.txt").write_text("x" * (1 << 16))
                elif writer == "numpy":
                    np.save(tmp / "data.npy", big, allow_pickle=False)
                else:
                    save_file({"w": big}, str(tmp / "model.safetensors"))
    message = _failure(caught.value)
    assert message.startswith(f"{target}: ") and "bug" not in message
    assert "File too large" in message or "disk" in message
    if writer == "file":
        assert target.read_text() == "old run"
    else:
        assert _tree(target) == {"data.txt": "old"}
    assert os.listdir(tmp_path) == [target.name]


def test_an_os_error_of_a_save_names_its_output_never_its_temporary_name(tmp_path):
    """A file of the temporary directory (gone) is named as in the output; an input's error, or
    a read's that names no file, is left as it is."""
    target = tmp_path / "out"
    with pytest.raises(PermissionError) as caught, atomic_directory(target, kind="data") as tmp:
        raise PermissionError(errno.EACCES, os.strerror(errno.EACCES), str(tmp / "sub" / "a.json"))
    assert caught.value.filename == str(target / "sub" / "a.json")
    for error in (
        FileNotFoundError(errno.ENOENT, os.strerror(errno.ENOENT), str(tmp_path / "input.tsv")),
        OSError(errno.EIO, os.strerror(errno.EIO)),
    ):
        with pytest.raises(OSError) as caught, atomic_directory(target, kind="data"):
            raise error
        assert caught.value is error
    assert os.listdir(tmp_path) == []


def test_a_swap_whose_old_directory_cannot_be_put_back_keeps_both_for_the_next_save(
    tmp_path, monkeypatch, dead_pid
):
    """When the new directory cannot be renamed into place and the old one not back either, both
    are kept (as a kill between the two renames leaves them): the new one had been deleted, and
    the next save had removed the old one, the only copy left."""
    target = tmp_path / "out"
    _write(target, "data", "old")
    real_replace = os.replace

    def replace(src, dst):
        if Path(dst) == target:
            raise OSError(errno.EIO, os.strerror(errno.EIO), str(src), None, str(dst))
        real_replace(src, dst)

    with monkeypatch.context() as patch:
        patch.setattr(os, "getpid", lambda: dead_pid)
        patch.setattr(os, "replace", replace)
        with (
            pytest.warns(UserWarning, match=r"neither the new data nor the one it replaces could be put in"),
            pytest.raises(OSError) as caught,
        ):
            _write(target, "data", "new")
    assert caught.value.filename == str(target) and caught.value.errno == errno.EIO
    assert not target.exists() and len(os.listdir(tmp_path)) == 2
    with pytest.warns(UserWarning, match="swapped the new data in"):
        atomic.tidy_interrupted(target, "data")
    assert _tree(target) == {"data.txt": "new"} and artefact_kind(target) == "data"
    assert os.listdir(tmp_path) == ["out"]


@pytest.mark.parametrize(
    ("flags", "why"), [(os.ST_RDONLY, "a read-only file system"), (0, "permission denied")]
)
def test_an_output_on_a_read_only_file_system_is_refused_as_such(tmp_path, monkeypatch, flags, why):
    """``access()`` says no for both; a read-only file system had been reported as "permission
    denied", a thing no ``chmod`` helps."""
    real_statvfs = os.statvfs
    monkeypatch.setattr(os, "access", lambda path, mode: False)
    monkeypatch.setattr(os, "statvfs", lambda path: os.statvfs_result((*real_statvfs(path)[:8], flags, 255)))
    with pytest.raises(ConfigError, match=rf"out: cannot write into {re.escape(str(tmp_path))} \({why}\)"):
        atomic.check_output(tmp_path / "out", kind="data")


def test_a_claim_whose_marker_cannot_be_written_leaves_no_directory(tmp_path):
    """clir tables and baselines on a full disk left their new --out behind, empty: the claim's
    own marker had failed outside what undoes a failed claim."""
    from clir.formats.atomic import claimed_directory

    out = tmp_path / "a" / "out"
    with pytest.raises(OSError) as caught, _file_size_limit(8), claimed_directory(out, kind="tables"):
        pass
    assert caught.value.filename == str(out / MARKER)
    assert os.listdir(tmp_path) == []
    user = _user_dir(tmp_path / "user")  # refused: left as it was
    with pytest.raises(OutputExistsError), claimed_directory(user, kind="tables"):
        pass
    assert sorted(p.name for p in user.iterdir()) == ["notes", "thesis.tex"]


def _every_kind_saved(root: Path) -> dict[str, Path]:
    """One small save of each kind that :func:`atomic_directory` replaces whole (but the
    checkpoint and the bundle, which test_bundle checks), by kind."""
    import torch
    from gensim.models import KeyedVectors

    from clir.embeddings import SharedSpace
    from clir.pipeline.tables import write_tokens
    from clir.rerankers.base import write_model_dir
    from clir.retrieval import BM25, FirstStage, SparseIndex
    from clir.retrieval.shards import ShardedIndex
    from clir.training.data import RerankData, RerankQuery
    from clir.types import ParallelPair

    queries = {split: [Query(f"q{split}", "clean water")] for split in ("train", "dev", "test")}
    qrels = {q[0].qid: {"d1": 1} for q in queries.values()}
    parallel = [ParallelPair("p1", "clean water", "maji safi")]
    collection = Collection("tiny", "sw", "en", [Document("d1", "maji safi")], queries, qrels, parallel)
    collection.save(root / "collection", xml=True)
    table = TranslationTable(["water"], ["maji"], sp.csr_matrix(np.ones((1, 1))), "en", "sw")
    table.save(root / "translation-table")
    index = SparseIndex.build(["d1", "d2"], [["maji", "safi"], ["nyumba"]], progress=False)
    index.save(root / "index")
    BM25().use_index(index).save(root / "retriever")
    ShardedIndex.build(root / "sharded-index", [("d1", ["maji"]), ("d2", ["safi"])], 1, progress=False)
    stage = FirstStage("qt", "bm25", doc_analyzer="sw", table_en_doc=table, progress=False)
    stage.index(collection.documents).save(root / "first-stage")
    stage.index_shards(collection.documents, root / "first-stage-shards", shard_docs=1)
    write_model_dir(root / "model", {"type": "x"}, {"w": torch.zeros(2)})
    write_tokens(collection, root / "aligner-input")
    vectors = {lang: KeyedVectors(2) for lang in ("en", "sw")}
    for lang, words in (("en", ["water"]), ("sw", ["maji"])):
        vectors[lang].add_vectors(words, np.ones((1, 2), dtype=np.float32))
    SharedSpace(vectors, 2).save(root / "space")
    query = RerankQuery("q", ["water"], ["maji"], [1.0], [1.0], ["d1"], np.zeros(1), np.zeros((1, 0)))
    RerankData("en-sw", [query], {"d1": ["maji"]}, {"d1": ["water"]}).save(root / "rerank-data")
    return {path.name: path for path in root.iterdir()}


def test_what_each_kind_holds_is_all_clir_s_own_and_every_kind_replaced_whole_is_listed(tmp_path):
    """:data:`atomic.CONTENTS` lists every file a save of its kind writes (a name missing there
    would make every re-save refuse its own output), and every kind clir saves through
    atomic_directory (a kind missing there would be replaced whatever it held)."""
    saved = _every_kind_saved(tmp_path)
    for name, path in saved.items():
        kind = "first-stage" if name == "first-stage-shards" else name
        assert artefact_kind(path) == kind
        assert atomic.foreign_entry(path, kind) is None, name
    source = "\n".join(p.read_text() for p in Path(atomic.__file__).parents[1].rglob("*.py"))
    kinds = set(re.findall(r"atomic_directory\([^)]*kind=\"([a-z-]+)\"", source))
    kinds.add("checkpoint")  # kind=ARTEFACT_KIND
    assert kinds - set(atomic.CONTENTS) == set() and "collection" in kinds
    assert set(atomic.CONTENTS) - {"dense-retriever"} <= {*saved, "checkpoint", "bundle"}


def test_a_file_clir_does_not_write_is_found_at_any_depth_and_nested_kinds_by_their_own(tmp_path):
    saved = _every_kind_saved(tmp_path / "saved")
    assert atomic.foreign_entry(saved["index"], "data") is None  # a kind with no list: none
    for number, (name, kind, added, found) in enumerate(
        [
            ("collection", "collection", "notes.txt", "notes.txt"),
            ("collection", "collection", "topics.test.tsv.orig", "topics.test.tsv.orig"),
            ("collection", "collection", "old/topics.test.tsv", "old"),
            ("first-stage", "first-stage", "retriever/index/notes.txt", "retriever/index/notes.txt"),
            ("first-stage", "first-stage", "table_en_doc/a/b.npy", "table_en_doc/a"),
            ("first-stage-shards", "first-stage", "shards/shards/00000/x.npy", "shards/shards/00000/x.npy"),
            ("sharded-index", "sharded-index", "shards/00001/vocab.json", "shards/00001/vocab.json"),
            ("space", "space", "en.txt", "en.txt"),
        ]
    ):
        path = shutil.copytree(saved[name], tmp_path / str(number))
        assert atomic.foreign_entry(path, kind) is None
        (path / added).parent.mkdir(parents=True, exist_ok=True)
        (path / added).write_text("mine")
        assert atomic.foreign_entry(path, kind) == path / found, added
    stage = saved["first-stage"]
    shutil.rmtree(stage / "table_en_doc")
    (stage / "table_en_doc").write_text("a file where clir writes a directory")
    assert atomic.foreign_entry(stage, "first-stage") == stage / "table_en_doc"


def test_a_re_run_into_its_own_output_holding_a_users_file_refuses_and_force_moves_it_aside(tmp_path, capsys):
    """clir data import --out X over its own collection X deleted a notes.txt the user had put
    in X (the output was replaced whole), silently."""
    from clir.cli import main

    (tmp_path / "docs.tsv").write_text("d1\tmaji safi\n")
    (tmp_path / "topics.tsv").write_text("q1\tclean water\n")
    (tmp_path / "qrels.txt").write_text("q1 0 d1 1\n")
    out = tmp_path / "X"
    argv = [
        "data",
        "import",
        "--documents",
        str(tmp_path / "docs.tsv"),
        "--topics",
        str(tmp_path / "topics.tsv"),
    ]
    argv += ["--qrels", str(tmp_path / "qrels.txt"), "--doc-lang", "sw", "--out", str(out), "-q"]
    assert main(argv) == 0
    (tmp_path / "docs.tsv").write_text("d1\tmaji safi sana\n")
    assert main(argv) == 0  # nothing but its own files: replaced, as before
    assert Collection.load(out).documents == [Document("d1", "maji safi sana")]
    assert sorted(os.listdir(tmp_path)) == ["X", "docs.tsv", "qrels.txt", "topics.tsv"]
    (out / "notes.txt").write_text("my notes")
    before = _tree(out)
    (tmp_path / "docs.tsv").write_text("d1\tnyumba\n")
    capsys.readouterr()
    assert main(argv) == 2
    assert capsys.readouterr().err == (
        f"clir: error: {out} is a clir 'collection' output holding {out / 'notes.txt'}, which clir "
        "does not write there (replacing the output would delete it); move that out of it, choose "
        f"another --out, or pass --force to move the old output aside whole (to {out}.before-clir); "
        "clir never deletes what it did not create\n"
    )
    assert _tree(out) == before
    assert sorted(os.listdir(tmp_path)) == ["X", "docs.tsv", "qrels.txt", "topics.tsv"]
    assert main([*argv, "--force"]) == 0
    assert (
        f"clir: warning: {out} held {out / 'notes.txt'}, which clir does not write in a 'collection' "
        f"output: it was moved to {out}.before-clir (nothing deleted)"
    ) in capsys.readouterr().err
    assert _tree(tmp_path / "X.before-clir") == before
    assert Collection.load(out).documents == [Document("d1", "nyumba")]
    assert not (out / "notes.txt").exists()


def test_a_training_refuses_a_member_checkpoint_holding_a_users_file_before_any_work(tmp_path):
    from clir.training.config import TrainConfig
    from clir.training.cv import check_member_dirs

    member = tmp_path / "seed0"
    with atomic_directory(member, kind="checkpoint") as tmp:
        (tmp / "checkpoint.json").write_text("{}")
    check_member_dirs(TrainConfig(), tmp_path)  # its own checkpoint: replaced or resumed
    (member / "notes.txt").write_text("mine")
    with pytest.raises(OutputExistsError, match=rf"seed0 is a clir checkpoint holding {member}/notes\.txt"):
        check_member_dirs(TrainConfig(), tmp_path)
    with pytest.raises(OutputExistsError, match="which clir does not write there"):
        _write(member, "checkpoint", "new")
    assert (member / "notes.txt").read_text() == "mine"


def test_tables_to_learn_again_over_one_holding_a_users_file_are_refused_before_the_learning(
    tmp_path, monkeypatch
):
    from clir.pipeline import tables as tables_module

    collection = Collection.load(_collection_with_parallel(tmp_path / "c"))
    out = tmp_path / "t"
    tables_module.learn_tables(collection, out, iterations=2, progress=False)
    (out / "doc-en" / "notes.txt").write_text("mine")

    def files() -> dict[str, bytes]:
        return {str(p.relative_to(out)): p.read_bytes() for p in sorted(out.rglob("*")) if p.is_file()}

    before = files()
    monkeypatch.setattr(tables_module, "train_ibm1_both", lambda *a, **k: pytest.fail("learned"))
    with pytest.raises(OutputExistsError, match=r"doc-en is a clir 'translation-table' output holding"):
        tables_module.learn_tables(collection, out, iterations=3, progress=False)
    assert files() == before  # not the en-doc of 3 iterations beside the doc-en of 2

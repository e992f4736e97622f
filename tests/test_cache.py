"""The step cache: finished steps are verified before reuse, and one runner holds a directory."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from clir.errors import OutputLockedError
from clir.pipeline import cache
from clir.pipeline.cache import DONE, StepRebuiltWarning, StepRunner

ROOT = Path(__file__).resolve().parents[1]


class Build:
    """A step build that counts its calls and writes a small and a large file."""

    def __init__(self) -> None:
        self.calls = 0

    def __call__(self, work: Path) -> None:
        self.calls += 1
        (work / "run.txt").write_text("q1 Q0 d1 1 0.9 x\n")
        (work / "arrays").mkdir()
        (work / "arrays" / "big.bin").write_bytes(bytes(range(256)) * 16)  # 4096 bytes


def _first_run(root: Path) -> tuple[Build, Path]:
    build = Build()
    with StepRunner(root, log=lambda line: None) as runner:
        path = runner.run("a", {"p": 1}, build).path
    return build, path


def _again(root: Path, build: Build, verify: bool = False) -> bool:
    """Run the step once more; whether it was reused."""
    with StepRunner(root, log=lambda line: None, verify=verify) as runner:
        return runner.run("a", {"p": 1}, build).cached


def test_step_json_records_every_file_with_size_and_sha256(tmp_path):
    _, path = _first_run(tmp_path)
    record = json.loads((path / DONE).read_text())
    assert set(record["files"]) == {"run.txt", "arrays/big.bin"}
    for name, entry in record["files"].items():
        data = (path / name).read_bytes()
        assert entry == {"size": len(data), "sha256": hashlib.sha256(data).hexdigest()}
    assert sorted(p.name for p in path.parent.iterdir()) == sorted(
        [path.name, "index.json"]
    )  # no temporary file


def test_an_untouched_step_is_reused_without_building(tmp_path):
    build, _ = _first_run(tmp_path)
    assert _again(tmp_path, build) and _again(tmp_path, build, verify=True)
    assert build.calls == 1


def test_a_step_is_built_again_under_another_release_of_a_library_it_depends_on(tmp_path, monkeypatch):
    # steps were keyed by clir's version only: after a simplemma upgrade (other lemmas) every
    # collection's analysis, index and rerank data were reused from the old release's
    build, _ = _first_run(tmp_path)
    versions = dict(cache.library_versions())
    assert set(versions) == set(cache.LIBRARIES) and versions["simplemma"] is not None
    monkeypatch.setattr(cache, "library_versions", lambda: {**versions, "simplemma": "0.0.1"})
    assert not _again(tmp_path, build) and build.calls == 2
    monkeypatch.setattr(cache, "library_versions", lambda: versions)
    assert _again(tmp_path, build) and build.calls == 2  # the first release's step, still there


@pytest.mark.parametrize(
    ("damage", "reason"),
    [
        (lambda p: (p / "run.txt").write_text("q1 Q0 d1 1 0.1 x\n"), r"run\.txt differs from the manifest"),
        (lambda p: (p / "run.txt").write_text("q1 Q0"), r"run\.txt has 5 bytes, the manifest 17"),
        (lambda p: (p / "arrays" / "big.bin").unlink(), r"arrays/big\.bin is missing"),
        (lambda p: (p / DONE).write_text((p / DONE).read_text()[:40]), r"step\.json is unreadable"),
        (lambda p: (p / DONE).write_bytes(b"\xff\xfe"), r"step\.json is unreadable"),
        (lambda p: (p / DONE).write_text('{"seconds": 1.0}'), r"step\.json records no manifest"),
        (lambda p: (p / DONE).unlink(), r"step\.json is unreadable"),
        (
            lambda p: (p / "arrays" / "extra.run").write_text("q1 Q0 d1 1 1 fake\n"),
            r"arrays/extra\.run is not in the manifest \(a file added after the step was built\)",
        ),
    ],
    ids=[
        "one byte",
        "truncated",
        "deleted",
        "truncated step.json",
        "not UTF-8",
        "no manifest",
        "no step.json",
        "a file added",
    ],
)
def test_a_damaged_step_is_rebuilt_with_a_warning(tmp_path, damage, reason):
    build, path = _first_run(tmp_path)
    damage(path)
    lines: list[str] = []
    warned = pytest.warns(StepRebuiltWarning, match=rf"step a \(.*\): {reason}.*rebuilding it from scratch")
    with warned, StepRunner(tmp_path, log=lines.append) as runner:
        result = runner.run("a", {"p": 1}, build)
    assert build.calls == 2 and not result.cached and lines == ["[rebuild] a"]
    assert (path / "run.txt").read_text() == "q1 Q0 d1 1 0.9 x\n"
    assert _again(tmp_path, build) and build.calls == 2  # the rebuilt step is trusted again


def test_step_folders_swapped_by_hand_are_rebuilt_never_reused_as_each_other(tmp_path):
    """Each folder matched its own manifest, and the key in its step.json was not compared with
    its name: two step folders swapped (or one copied to another's name) were reused, each as
    the step of the other's inputs (``{"x": 1}`` read the output built for ``{"x": 2}``)."""

    def build(x: int):
        return lambda work: (work / "value.txt").write_text(str(x))

    with StepRunner(tmp_path, log=lambda line: None) as runner:
        one, two = (runner.run("step", {"x": x}, build(x)).path for x in (1, 2))
    one.rename(tmp_path / "aside")
    two.rename(one)
    (tmp_path / "aside").rename(two)
    lines: list[str] = []
    reason = rf"step\.json records the key '{two.name[5:]}', not its folder's '{one.name[5:]}'"
    with pytest.warns(StepRebuiltWarning, match=reason), StepRunner(tmp_path, log=lines.append) as runner:
        again = runner.run("step", {"x": 1}, build(1))
    assert not again.cached and lines == ["[rebuild] step"]
    assert (one / "value.txt").read_text() == "1" and json.loads((one / DONE).read_text())["key"] == one.name[
        5:
    ]
    shutil.copytree(one, two, dirs_exist_ok=True)  # a copy under another key's name: rebuilt too
    with (
        pytest.warns(StepRebuiltWarning, match="records the key"),
        StepRunner(tmp_path, log=lines.append) as runner,
    ):
        assert (runner.run("step", {"x": 2}, build(2)).path / "value.txt").read_text() == "2"


def test_only_verify_hashes_files_beyond_the_budget(tmp_path, monkeypatch):
    monkeypatch.setattr(cache, "HASH_BUDGET", 1000)  # run.txt is hashed, big.bin is not
    build, path = _first_run(tmp_path)
    with (path / "arrays" / "big.bin").open("r+b") as handle:
        handle.seek(2000)
        handle.write(b"\x00")  # same size
    assert _again(tmp_path, build)  # sizes match: reused without verify
    with pytest.warns(StepRebuiltWarning, match=r"arrays/big\.bin differs"):
        assert not _again(tmp_path, build, verify=True)
    assert build.calls == 2
    (path / "run.txt").write_text("q1 Q0 d1 1 0.1 x\n")  # within the budget: always hashed
    with pytest.warns(StepRebuiltWarning, match=r"run\.txt differs"):
        assert not _again(tmp_path, build)


def test_a_damaged_resumable_step_is_rebuilt_from_scratch(tmp_path):
    seen = []

    def train(work: Path) -> None:
        seen.append(sorted(p.name for p in work.iterdir()))
        (work / "model.bin").write_bytes(b"weights")

    with StepRunner(tmp_path, log=lambda line: None) as runner:
        path = runner.run("train", {}, train, resumable=True).path
    (path / "model.bin").write_bytes(b"zeroes!")
    stale = path.with_name(f"{path.name}.partial")
    stale.mkdir()
    (stale / "checkpoint").write_text("from another run")
    with pytest.warns(StepRebuiltWarning), StepRunner(tmp_path, log=lambda line: None) as runner:
        runner.run("train", {}, train, resumable=True)
    assert seen == [[], []] and (path / "model.bin").read_bytes() == b"weights"


def test_run_needs_the_lock(tmp_path):
    with pytest.raises(OutputLockedError, match="outside `with StepRunner"):
        StepRunner(tmp_path).run("a", {}, Build())


def _lock_in_subprocess(root: Path) -> str:
    script = (
        "import sys\n"
        "from clir.errors import OutputLockedError\n"
        "from clir.pipeline.cache import StepRunner\n"
        "try:\n"
        "    with StepRunner(sys.argv[1]):\n"
        "        print('acquired')\n"
        "except OutputLockedError as error:\n"
        "    print(error)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script, str(root)], cwd=ROOT, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_a_second_runner_is_refused_while_the_first_holds_the_directory(tmp_path):
    with StepRunner(tmp_path):
        with pytest.raises(OutputLockedError) as caught, StepRunner(tmp_path):
            pass
        message = str(caught.value)
        assert f"{tmp_path} is in use by another clir run (PID {os.getpid()}" in message
        assert _lock_in_subprocess(tmp_path).startswith(
            f"{tmp_path} is in use by another clir run (PID {os.getpid()}"
        )
    assert _lock_in_subprocess(tmp_path) == "acquired"
    with StepRunner(tmp_path) as runner:
        assert runner.run("a", {}, Build()).path.is_dir()


def test_wait_waits_for_the_holder(tmp_path):
    order = []

    def second() -> None:
        with StepRunner(tmp_path, log=order.append, wait=True):
            order.append("second")

    with StepRunner(tmp_path):
        thread = threading.Thread(target=second)
        thread.start()
        time.sleep(0.3)
        order.append("first released")
    thread.join(timeout=10)
    assert order == [f"[wait]   {tmp_path} is in use by PID {os.getpid()}", "first released", "second"]


def test_steps_index_maps_readable_names_to_the_step_folders(tmp_path):
    def index() -> dict[str, str]:
        return json.loads((tmp_path / "steps" / "index.json").read_text())

    build = Build()
    with StepRunner(tmp_path, log=lambda line: None) as runner:
        a1 = runner.run("tables-en-sw", {"p": 1}, build)
        b = runner.run("space", {}, build, [a1])
        assert index() == {"space": b.path.name, "tables-en-sw": a1.path.name}
        a2 = runner.run("tables-en-sw", {"p": 2}, build)  # another config: the index follows it
        assert a2.path != a1.path and index()["tables-en-sw"] == a2.path.name
        reused = runner.run("tables-en-sw", {"p": 1}, build)  # a reused step counts as this run's
        assert reused.cached and index()["tables-en-sw"] == a1.path.name
    shutil.rmtree(b.path)  # a folder removed by hand drops out at the next write
    (tmp_path / "steps" / "index.json").write_text("not json")  # and a damaged index is rebuilt
    with StepRunner(tmp_path, log=lambda line: None) as runner:
        runner.run("tables-en-sw", {"p": 2}, build)
    assert index() == {"tables-en-sw": a2.path.name}
    assert all((tmp_path / "steps" / folder / DONE).is_file() for folder in index().values())
    assert not list((tmp_path / "steps").glob(".index.json.*"))  # written atomically, no leftovers

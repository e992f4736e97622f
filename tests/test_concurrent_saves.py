"""Two processes saving the same output at once: each save completes, none breaks the other's.

The interleavings are forced (an in-progress save held open, or a second process run while the
first is halfway through its swap), not left to timing.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from clir.errors import OutputLockedError
from clir.formats import atomic_directory, atomic_write
from clir.formats.atomic import MARKER, artefact_kind, directory_lock, lock_holder, output_directory


def test_a_directory_another_run_is_claiming_is_not_taken_for_a_users(tmp_path):
    # two `clir experiment --out X --wait` started at once on a new X: the first has created X and
    # is writing its marker (a temporary file, not yet renamed) when the second checks X
    out = tmp_path / "x"
    out.mkdir()
    with atomic_write(out / MARKER) as handle:
        handle.write('{"kind": "experiment", "clir_version": "0"}\n')
        assert output_directory(out, kind="experiment") == out  # was: "a directory that clir did not write"
    assert artefact_kind(out) == "experiment"


def _save(path: str, text: str, moved=None, done=None) -> None:
    """Save ``path`` holding ``text``; with ``moved``, stop halfway through the swap (the old
    directory moved aside, the new one not yet in) until ``done`` is set or half a second passed."""
    if moved is not None:
        rename = os.replace

        def halfway(src, dst):
            rename(src, dst)
            if os.fspath(src) == path:  # the old directory moved aside
                moved.set()
                done.wait(0.5)  # a second save of the same directory runs meanwhile

        os.replace = halfway  # this process only
    with atomic_directory(path, kind="checkpoint") as tmp:
        (tmp / "checkpoint.json").write_text(text)
    if done is not None and moved is None:
        done.set()


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_two_saves_of_one_directory_at_once_both_complete(tmp_path):
    # two `clir train --out M` (or a --resume beside a training) checkpoint M/seed0 at once; one
    # save came in while the other had moved the old checkpoint aside: its rename found no
    # directory and went in, and the first one's failed (OSError: Directory not empty), with its
    # old checkpoint left beside as .seed0.<pid>.<random>.old
    path = tmp_path / "seed0"
    with atomic_directory(path, kind="checkpoint") as tmp:
        (tmp / "checkpoint.json").write_text("epoch 1")
    context = multiprocessing.get_context("fork")
    moved, done = context.Event(), context.Event()
    first = context.Process(target=_save, args=(str(path), "first", moved, done))
    first.start()
    assert moved.wait(10)
    second = context.Process(target=_save, args=(str(path), "second", None, done))
    second.start()
    first.join(20)
    second.join(20)
    assert (first.exitcode, second.exitcode) == (0, 0)
    assert (path / "checkpoint.json").read_text() == "second"  # the later swap, whole
    assert artefact_kind(path) == "checkpoint"
    assert sorted(os.listdir(tmp_path)) == ["seed0"]  # nothing left beside


def _hold(path: str, held, release) -> None:
    """Hold ``directory_lock(path)`` until ``release`` is set (another clir run writing there)."""
    with directory_lock(path):
        held.set()
        release.wait(20)


@contextmanager
def held_by_another_thread(path: Path) -> Iterator[None]:
    """``directory_lock(path)`` held by another thread meanwhile (as another clir run would)."""
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with directory_lock(path):
            held.set()
            release.wait(20)

    thread = threading.Thread(target=hold)
    thread.start()
    try:
        assert held.wait(10)
        yield
    finally:
        release.set()
        thread.join(10)


@pytest.mark.skipif("fork" not in multiprocessing.get_all_start_methods(), reason="needs fork")
def test_a_directory_another_process_holds_is_refused_naming_it_and_its_pid(tmp_path):
    context = multiprocessing.get_context("fork")
    held, release = context.Event(), context.Event()
    holder = context.Process(target=_hold, args=(str(tmp_path), held, release))
    holder.start()
    try:
        assert held.wait(10)
        pid = lock_holder(tmp_path)  # as Linux's /proc/locks tells (a system without it: None)
        assert pid in (holder.pid, None)
        named = "" if pid is None else rf" \(PID {pid}\)"
        with (
            pytest.raises(OutputLockedError, match=rf"{tmp_path} is in use by another clir run{named}; wait"),
            directory_lock(tmp_path, wait=False),
        ):
            pass
    finally:
        release.set()
        holder.join(20)
    with directory_lock(tmp_path, wait=False):  # free again
        pass


def test_a_thread_takes_its_own_directory_lock_again_and_other_threads_take_turns(tmp_path):
    # a training holds its --out while its checkpoints swap themselves in there: the swap's lock
    # of the same directory had waited for its own thread forever
    order = []

    def other() -> None:
        with directory_lock(tmp_path):
            order.append("other")

    with directory_lock(tmp_path, wait=False):
        with (
            directory_lock(tmp_path, wait=False),
            atomic_directory(tmp_path / "seed0", kind="checkpoint") as tmp,
        ):
            (tmp / "checkpoint.json").write_text("epoch 1")
        thread = threading.Thread(target=other)
        thread.start()
        thread.join(0.3)
        order.append("holder")  # the other thread waited for the outer lock
    thread.join(10)
    assert order == ["holder", "other"]
    assert (tmp_path / "seed0" / "checkpoint.json").read_text() == "epoch 1"


def test_a_second_baselines_into_an_out_another_writes_is_refused_and_leaves_its_claim(
    tmp_path, capsys, monkeypatch
):
    """Two `clir baselines --out B` at once (``--split dev`` beside ``--split test``) wrote their
    runs into B in turn, each over the other's, under the ``results.json`` of whichever ended
    last: numbers that were not those of the runs beside them. The second now stops at once,
    naming B; started on a new B at the same moment as the first, its failed claim leaves B and
    the first run's marker as they are (it had removed the marker, and B with it)."""
    from battery_cases import COLLECTION_FILES

    from clir.cli import main
    from clir.pipeline import baselines

    collection, out = tmp_path / "c", tmp_path / "b"
    collection.mkdir()
    for name, content in COLLECTION_FILES.items():
        (collection / name).write_bytes(content)
    argv = ["baselines", "--collection", str(collection), "--out", str(out), "--quiet"]
    claim = baselines.output_directory

    def claimed_meanwhile(path, **kwargs):
        # B is new and this run has just claimed it: another run takes B's lock now
        claimed = claim(path, **kwargs)
        stack.enter_context(held_by_another_thread(claimed))
        return claimed

    monkeypatch.setattr(baselines, "output_directory", claimed_meanwhile)
    with contextlib.ExitStack() as stack:
        assert main(argv) == 2
        assert f"clir: error: {out} is in use by another clir run" in capsys.readouterr().err
        assert sorted(os.listdir(out)) == [MARKER] and artefact_kind(out) == "baselines"
    monkeypatch.setattr(baselines, "output_directory", claim)
    assert main(argv) == 0  # free again: the runs and their results
    assert sorted(os.listdir(out / "runs")) == [
        f"{m}-{r}.run" for m in ("dt", "psq", "qt") for r in ("bm25", "ql")
    ]

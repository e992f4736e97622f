"""The progress-bar policy (clir.progress): verbosity, no bar for short or one-item work, plain
lines off a terminal."""

from __future__ import annotations

import pytest

from clir import cli, progress
from clir.errors import ConfigError


class _Captured:
    def __init__(self, capsys):
        self.capsys = capsys

    def getvalue(self) -> str:
        return self.capsys.readouterr().err


@pytest.fixture
def stderr(monkeypatch, capsys):
    """stderr as pytest captures it (not a terminal); bars shown at once and each redraw written."""
    monkeypatch.setattr(progress, "DELAY", 0.0)
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    yield _Captured(capsys)
    progress.set_verbosity(progress.NORMAL)


def _drain(bar) -> None:
    for _ in bar:
        pass


def test_off_a_terminal_a_bar_is_plain_lines(stderr):
    _drain(progress.progress_bar(range(3), desc="indexing", unit="doc"))
    text = stderr.getvalue()
    assert "\r" not in text and text.endswith("\n")
    lines = text.splitlines()
    assert lines and all(line.startswith("indexing:") for line in lines)
    assert "3/3" in lines[-1]


def test_two_bars_at_once_off_a_terminal_write_plain_lines(stderr):
    outer = progress.progress_bar(desc="space", total=3)  # a second bar is drawn a line lower
    _drain(progress.progress_bar(range(4), desc="indexing", unit="doc"))
    outer.update(3)
    outer.close()
    lines = stderr.getvalue().splitlines()
    assert "\x1b" not in "".join(lines) and all(line.strip() for line in lines), lines
    assert {line.split(":")[0] for line in lines} == {"space", "indexing"}


def test_a_bar_left_unfinished_off_a_terminal_leaves_no_blank_line(stderr):
    bar = progress.progress_bar(desc="steps", total=4, leave=False)
    bar.update(2)
    bar.close()
    assert all(line.strip() for line in stderr.getvalue().splitlines())


def test_no_bar_for_one_item_quiet_or_disabled_work(stderr):
    _drain(progress.progress_bar(range(1), desc="retrieving", unit="batch"))
    _drain(progress.progress_bar(range(5), desc="off", enabled=False))
    progress.set_verbosity(progress.QUIET)
    _drain(progress.progress_bar(range(5), desc="quiet"))
    assert stderr.getvalue() == ""  # (reading it empties it)
    progress.set_verbosity(progress.VERBOSE)  # verbose: every bar, the one-item loop included
    _drain(progress.progress_bar(range(1), desc="retrieving", unit="batch"))
    _drain(progress.progress_bar(range(5), desc="off", enabled=False))  # the caller's switch wins
    assert {line.split(":")[0] for line in stderr.getvalue().splitlines()} == {"retrieving"}


def test_a_bar_waits_for_its_delay(stderr, monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 1e9)  # work shorter than the delay shows no bar
    _drain(progress.progress_bar(range(5), desc="short"))
    assert stderr.getvalue() == ""


def test_set_verbosity_rejects_other_levels():
    with pytest.raises(ConfigError, match="verbosity must be 0, 1 or 2, got 3"):
        progress.set_verbosity(3)


@pytest.mark.parametrize(
    ("flag", "level"), [([], progress.NORMAL), (["--quiet"], progress.QUIET), (["-v"], progress.VERBOSE)]
)
def test_the_cli_sets_the_verbosity_for_its_command(monkeypatch, flag, level):
    seen = []
    monkeypatch.setattr(cli, "_evaluate", lambda args: seen.append(progress.verbosity()) or 0)
    assert cli.main(["evaluate", "run", "qrels", *flag]) == 0
    assert seen == [level] and progress.verbosity() == progress.NORMAL

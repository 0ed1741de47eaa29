"""Progress of the long commands: a line every few seconds when standard error is not a
terminal (a redirected or CI log shows life), nothing with ``--json``."""

from __future__ import annotations

import fcntl
import io
import os
import re
import struct
import termios
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest

from skewtape_pipeline import progress
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.progress import ProgressLine
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

LINE = re.compile(r"(?P<command>[a-z-]+): (?P<stage>[^:]+) (?P<count>.+) \((?P<percent>\d+)%\)")


class Clock:
    """A clock the test moves by hand."""

    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_progress_line_when_not_a_terminal_prints_one_line_per_interval():
    stream, clock = io.StringIO(), Clock()
    line = ProgressLine(stream, "files", label="verify", interval=10.0, clock=clock)
    line.update(1, 4, "hashing")  # too soon after the start: a short command prints nothing
    clock.now += 10.0
    line.update(2, 4, "hashing")
    clock.now += 5.0
    line.update(3, 4, "hashing")  # within the interval of the last line
    clock.now += 5.0
    line.update(2_500_000, 10_000_000, "hashing", "bytes")
    line.finish()
    assert stream.getvalue().splitlines() == [
        "verify: hashing 2/4 files (50%)",
        "verify: hashing 2.5 MB of 10.0 MB (25%)",
    ]


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_line_on_a_terminal_cuts_the_bar_to_its_width_and_redraws_it(monkeypatch):
    monkeypatch.setenv("COLUMNS", "60")
    stream = Terminal()
    line = ProgressLine(stream, "s", label="retier")
    line.update(1, 600, "waiting for /a/long/path/.skewtape-archive.lock, held by re-tiering")
    line.update(2, 600, "waiting")
    line.finish()
    drawn = [d.rstrip("\n") for d in stream.getvalue().split("\r")[1:]]
    assert drawn[0] == "[------------------------------] waiting for /a/... 1/600 s"  # 59 wide
    assert drawn[1].rstrip() == "[------------------------------] waiting 2/600 s"
    assert len(drawn[1]) == len(drawn[0]) and stream.getvalue().endswith("\n")


def test_progress_line_on_a_narrow_terminal_keeps_the_counts_whole(monkeypatch):
    monkeypatch.setenv("COLUMNS", "30")
    stream = Terminal()
    ProgressLine(stream, "bytes").update(150 * 10**6, 200 * 10**6, "reading", "bytes")
    assert stream.getvalue() == "\r[###--] 150.0 MB of 200.0 MB"  # 29 wide


def test_progress_line_takes_the_width_of_the_terminal_it_draws_on(monkeypatch):
    """Standard output piped (``| tee``) and standard error on a 50-column terminal."""
    monkeypatch.delenv("COLUMNS", raising=False)
    leader, follower = os.openpty()
    fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 50, 0, 0))
    with open(follower, "w", closefd=True) as stream:
        line = ProgressLine(stream, "s")
        line.update(1, 600, "waiting for /a/very/long/path/.skewtape-archive.lock, held by x")
        line.finish()
    drawn = os.read(leader, 4096).decode().split("\r")[1].rstrip("\r\n")
    os.close(leader)
    assert len(drawn) == 49 and drawn.endswith("... 1/600 s")


def test_progress_line_on_a_terminal_shows_a_notice_on_its_own_line_and_draws_the_bar_below(
    monkeypatch,
):
    monkeypatch.setenv("COLUMNS", "60")
    stream = Terminal()
    line = ProgressLine(stream, "s", label="fetch")
    line.update(1, 600, "waiting")
    line.notice("x.parquet: StalledTransfer; trying again (attempt 2 of 5)")
    line.update(2, 600, "waiting")
    line.finish()
    first, notice, second = stream.getvalue().split("\r")[1:]
    assert first.startswith("[") and first.endswith("1/600 s")
    assert notice == "fetch: x.parquet: StalledTransfer; trying again (attempt 2 of 5)\n"
    assert second.startswith("[") and second.endswith("2/600 s\n")


def test_progress_line_on_a_terminal_covers_a_longer_bar_with_a_short_notice():
    stream = Terminal()
    line = ProgressLine(stream, "s")
    line.update(1, 600, "waiting")
    line.notice("x")
    assert (
        stream.getvalue().split("\r")[2] == "x".ljust(len(stream.getvalue().split("\r")[1])) + "\n"
    )


def test_progress_line_when_not_a_terminal_prints_a_notice_at_once_and_none_when_disabled():
    stream, clock = io.StringIO(), Clock()
    ProgressLine(stream, "files", label="fetch", clock=clock).notice("trying again")
    ProgressLine(stream, "files", label="fetch", enabled=False, clock=clock).notice("hidden")
    assert stream.getvalue() == "fetch: trying again\n"


def test_notices_reach_the_reader_from_the_worker_threads_of_a_wrapped_function():
    heard: list[str] = []

    def work(n: int) -> int:
        progress.notice(f"retry {n}")
        return n

    with ThreadPoolExecutor(max_workers=2) as pool, progress.noticing(heard.append):
        assert list(pool.map(progress.carrying_notices(work), [1, 2])) == [1, 2]
        list(pool.map(work, [3]))  # not carried: the worker's context has no reader
    progress.notice("after the block")
    assert sorted(heard) == ["retry 1", "retry 2"]


def test_progress_line_when_disabled_prints_nothing():
    stream, clock = io.StringIO(), Clock()
    line = ProgressLine(stream, "files", enabled=False, interval=0.0, clock=clock)
    clock.now += 60
    line.update(1, 2, "hashing")
    line.finish()
    assert stream.getvalue() == ""


@pytest.fixture
def archive(tmp_path: Path, capsys) -> Path:
    """A tick archive of four days, compacted hot as of its last day."""
    source = write_four_day_csv(tmp_path / "ticks.csv")
    root = tmp_path / "data" / "archive"
    argv = ["compact-ticks", str(source), "--out", str(root), "--as-of", "2025-12-05",
            "--price-scale", "2"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    return root


def _argv(command: str, sample_root: Path, archive: Path) -> list[str]:
    history, deltas = sample_root / "history", sample_root / "deltas"
    first = history / SAMPLE_FIRST_MONTH
    return {
        "apply-delta": ["apply-delta", str(first), str(deltas / "2026-10"),
                        "--into", str(history / "2026-10"), "--no-audit"],
        "catch-up": ["catch-up", str(history), str(deltas), "--no-audit"],
        "verify": ["verify", str(first), "--full"],
        "retier": ["retier", str(archive), "--as-of", "2027-01-01"],
        "verify-archive": ["verify-archive", str(archive), "--full"],
    }[command]  # fmt: skip


COMMANDS = ["apply-delta", "catch-up", "verify", "retier", "verify-archive"]


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_long_command_when_stderr_is_not_a_terminal_prints_progress_lines(
    command, sample_root, archive, capsys, monkeypatch
):
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)  # a line per report
    assert main(_argv(command, sample_root, archive)) == 0
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines, f"{command} printed no progress"
    for line in lines:
        match = LINE.fullmatch(line)
        assert match and match["command"] == command, line
        assert 0 <= int(match["percent"]) <= 100
    assert "\r" not in err and out  # plain lines on stderr; the result on stdout


@pytest.mark.parametrize("command", COMMANDS)
def test_cli_long_command_when_json_prints_no_progress(
    command, sample_root, archive, capsys, monkeypatch
):
    monkeypatch.setattr(progress, "LINE_INTERVAL", 0.0)
    assert main([*_argv(command, sample_root, archive), "--json"]) == 0
    assert capsys.readouterr().err == ""

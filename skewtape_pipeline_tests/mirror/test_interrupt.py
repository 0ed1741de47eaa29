"""Ctrl-C in ``fetch``, ``sync``, ``compact-ticks`` and ``query``: one line ("interrupted; run
again to resume"), exit 130, no traceback; the rerun finishes the work. In an apply's merges, it
stops DuckDB's statement at once. A fetch lock left by
a process of this host that died is taken over by the next fetch."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.cli.app import INTERRUPTED, main
from skewtape_pipeline.mirror import merge
from skewtape_pipeline.mirror.fetch import LOCK_NAME
from skewtape_pipeline_tests.mirror.conftest import LARGE_NEXT
from skewtape_pipeline_tests.mirror.publisher_servers import FaultProxy
from skewtape_pipeline_tests.mirror.test_fetch_faults import published_files, staged_bytes

DELTA = Path("deltas") / LARGE_NEXT
REPO = Path(__file__).resolve().parents[2]


def cli(*argv: str, cwd: Path | None = None) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.Popen(
        [sys.executable, "-m", "skewtape_pipeline.cli", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
        cwd=cwd,
    )


def interrupt_when(process: subprocess.Popen, condition, timeout: float = 60) -> str:
    """Send SIGINT to ``process`` once ``condition()`` holds; its stderr (exit 130 asserted)."""
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"it ended first: {process.stderr.read()}"
        assert time.monotonic() < deadline, "it did not get there in time"
        time.sleep(0.01)
    process.send_signal(signal.SIGINT)
    try:
        _, err = process.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        process.kill()
        raise AssertionError("Ctrl-C did not stop it within 30 s") from None
    assert process.returncode == 130, err
    return err


def assert_one_line(err: str) -> None:
    assert "Traceback" not in err and "KeyboardInterrupt" not in err, err
    assert err.rstrip("\n").splitlines()[-1] == INTERRUPTED
    assert err.count(INTERRUPTED) == 1


def test_ctrl_c_in_a_table_merge_stops_duckdb_at_once_and_leaves_the_table(tmp_path, monkeypatch):
    """Ctrl-C while a merge's statement runs: DuckDB stops it there (what it did rolled back),
    the table stays as it was and Ctrl-C is raised as itself (before: DuckDB's RuntimeError, or,
    for a statement that does not look, after it ran to its end). The statement put in the
    merge's place runs tens of seconds here and leaves its rows behind if it runs to its end."""
    table, changes = tmp_path / "markets.parquet", tmp_path / "changes.parquet"
    pq.write_table(pa.table({"market_id": ["a", "b"]}), table)
    pq.write_table(pa.table({"op": ["delete"], "row": [{"market_id": "a"}]}), changes)
    before = table.read_bytes()
    con = merge.connect()
    con.execute("CREATE TABLE finished (i BIGINT)")
    slow = (
        "INSERT INTO finished SELECT i FROM range(200000000) t(i) "
        "WHERE md5(i::VARCHAR) LIKE '%abc%'"
    )
    monkeypatch.setattr(merge, "merge_query", lambda *_args, **_kwargs: slow)
    ctrl_c = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    ctrl_c.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            merge.merge_table(con, table, changes, ("market_id",), checkpoint_name="markets")
    finally:
        ctrl_c.cancel()

    assert con.execute("SELECT count(*) FROM finished").fetchone() == (0,)
    assert table.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["changes.parquet", "markets.parquet"]


@pytest.mark.parametrize("command", ["fetch", "sync"])
def test_ctrl_c_in_a_transfer_prints_one_line_exits_130_and_the_rerun_resumes(
    command, large_subscriber, large_publisher, large_nginx
):
    staged = large_subscriber / "deltas" / f".fetch-{LARGE_NEXT}"
    slow = FaultProxy(large_nginx.port, rate=4e6)
    try:
        process = cli(command, slow.url, "--root", str(large_subscriber))
        err = interrupt_when(process, lambda: staged.is_dir() and staged_bytes(staged) > 0)
    finally:
        slow.close()

    assert_one_line(err)
    assert not (large_subscriber / LOCK_NAME).exists()
    assert not (large_subscriber / DELTA).exists()
    again = cli(command, large_nginx.url, "--root", str(large_subscriber))
    assert again.wait(timeout=120) == 0, again.stderr.read()
    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)


def test_a_fetch_lock_left_by_a_dead_process_of_this_host_is_taken_over(
    large_subscriber, large_publisher, large_nginx, capsys
):
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    (large_subscriber / LOCK_NAME).write_text(
        json.dumps({"operation": "fetching", "pid": dead.pid, "host": socket.gethostname(),
                    "since": "2026-12-01T00:00:00+00:00"}) + "\n"
    )  # fmt: skip

    assert main(["fetch", large_nginx.url, "--root", str(large_subscriber)]) == 0
    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)


def write_ticks_csv(path: Path, rows: int) -> Path:
    start = 1_764_547_200 * 10**9  # 2025-12-01
    with open(path, "w") as out:
        out.write("timestamp_nanos,price,quantity,side,symbol\n")
        out.writelines(
            f"{start + i * 1_000_000},{0.5 + (i % 97) / 100:.2f},{1 + i % 7},BUY,KX-{i % 40}\n"
            for i in range(rows)
        )
    return path


def test_ctrl_c_in_compact_ticks_prints_one_line_exits_130_and_the_rerun_completes(tmp_path):
    source = write_ticks_csv(tmp_path / "ticks.csv", 1_500_000)
    archive = tmp_path / "archive"
    argv = ("compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
            "--price-scale", "2")  # fmt: skip
    process = cli(*argv)
    err = interrupt_when(process, lambda: (archive / ".skewtape-staging").is_dir())

    assert_one_line(err)
    again = cli(*argv)
    assert again.wait(timeout=300) == 0, again.stderr.read()
    assert cli("verify-archive", str(archive)).wait(timeout=120) == 0


def test_ctrl_c_in_a_query_prints_one_line_and_exits_130(tmp_path, capsys):
    """Ctrl-C while DuckDB runs the statement: DuckDB stops it and raises its own error in
    place of the KeyboardInterrupt; the command still ends with the one line and 130."""
    archive = tmp_path / "archive"
    ticks = write_ticks_csv(tmp_path / "ticks.csv", 100)
    assert main(["compact-ticks", str(ticks), "--out", str(archive), "--as-of", "2025-12-05"]) == 0
    capsys.readouterr()
    # minutes of work on any machine: the statement is still running when Ctrl-C comes
    slow = "SELECT count(*) FROM range(2000000000) t(i) WHERE md5(i::VARCHAR) LIKE '%abc%'"
    ctrl_c = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    ctrl_c.start()
    try:
        code = main(["query", slow, "--archive", str(archive)])
    finally:
        ctrl_c.cancel()

    assert code == 130
    assert capsys.readouterr().err == INTERRUPTED + "\n"


@pytest.mark.parametrize("command", ["fetch", "sync"])
def test_a_second_fetch_refuses_at_once_or_waits_with_wait_and_fetches_nothing_again(
    command, large_subscriber, large_publisher, large_nginx, capsys
):
    staged = large_subscriber / "deltas" / f".fetch-{LARGE_NEXT}"
    slow = FaultProxy(large_nginx.port, rate=4e6)
    try:
        first = cli("fetch", slow.url, "--root", str(large_subscriber))
        deadline = time.monotonic() + 60
        while not (staged.is_dir() and staged_bytes(staged) > 0):
            assert first.poll() is None and time.monotonic() < deadline, first.stderr.read()
            time.sleep(0.01)
        argv = [command, large_nginx.url, "--root", str(large_subscriber)]
        assert main(argv) == 2
        refused = capsys.readouterr().err
        assert "is held by fetching" in refused and "--wait" in refused
        assert main([*argv, "--wait", "120"]) == 0
        waited = capsys.readouterr().out
    finally:
        slow.close()
    assert first.wait(timeout=120) == 0, first.stderr.read()
    assert f"{large_subscriber / DELTA}: already in place; nothing to fetch" in waited
    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)

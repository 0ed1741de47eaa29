"""``duckdb_interrupt.interruptible``: whatever stops the main thread while DuckDB works (Ctrl-C,
Dagster's termination of a run) stops DuckDB's statement too, even one that had not begun when
the interrupt came; the statement's work is rolled back and the interrupt raised as itself.

The statement used runs tens of seconds and leaves its rows behind when it runs to its end."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest
from dagster._utils.interrupts import raise_interrupts_as

from skewtape_pipeline.duckdb_interrupt import interruptible

SLOW = "INSERT INTO finished SELECT i FROM range(200000000) t(i) WHERE md5(i::VARCHAR) LIKE '%abc%'"


def connected() -> duckdb.DuckDBPyConnection:
    con = duckdb.connect()
    con.execute("SET threads = 2")
    con.execute("CREATE TABLE finished (i BIGINT)")
    return con


class _Watched:
    """``con`` as ``interruptible`` sees it, noting its first ``interrupt()``."""

    def __init__(self, con: duckdb.DuckDBPyConnection):
        self.con, self.interrupted = con, threading.Event()

    def interrupt(self) -> None:
        self.interrupted.set()
        self.con.interrupt()


def waiting_for_the_work() -> bool:
    """True once the main thread waits for the work's answer (``Future.result``): an interrupt
    then reaches ``interruptible``'s handling, not the submitting of the work."""
    frame = sys._current_frames().get(threading.main_thread().ident)
    while frame is not None:
        code = frame.f_code
        if code.co_name == "result" and Path(code.co_filename).parts[-2:] == (
            "futures",
            "_base.py",
        ):
            return True
        frame = frame.f_back
    return False


def ctrl_c_once(started: threading.Event) -> threading.Thread:
    """SIGINT to this process once ``started`` is set and the main thread waits for the work."""

    def send() -> None:
        started.wait()
        while not waiting_for_the_work():
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGINT)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    return sender


def test_ctrl_c_before_the_statement_began_still_stops_it():
    """Ctrl-C while the work has not reached DuckDB yet (binding, Python between statements):
    DuckDB forgets an interrupt given before a statement begins, so one interrupt let the
    statement run to its end while Ctrl-C waited for it."""
    con = connected()
    watched = _Watched(con)
    started = threading.Event()

    def work() -> None:
        started.set()
        watched.interrupted.wait()  # the statement begins after the interrupt was given
        con.execute(SLOW)

    sender = ctrl_c_once(started)
    with pytest.raises(KeyboardInterrupt):
        interruptible(watched, work)  # type: ignore[arg-type]
    sender.join()

    assert con.execute("SELECT count(*) FROM finished").fetchone() == (0,)


def test_a_dagster_run_terminated_while_duckdb_works_stops_the_statement():
    """Dagster raises its own DagsterExecutionInterruptedError (no KeyboardInterrupt) in an op
    when the run is terminated; the statement is stopped and that error raised, not left to run
    to its end before the op could stop."""
    con = connected()
    watched = _Watched(con)
    started = threading.Event()

    def work() -> None:
        started.set()
        con.execute(SLOW)

    sender = ctrl_c_once(started)
    terminated = dg.DagsterExecutionInterruptedError
    with pytest.raises(terminated), raise_interrupts_as(terminated):
        interruptible(watched, work)  # type: ignore[arg-type]
    sender.join()

    assert con.execute("SELECT count(*) FROM finished").fetchone() == (0,)


def test_the_works_own_error_is_raised_as_it_is_and_the_connection_stays_usable():
    con = connected()

    def work() -> None:
        con.execute("SELECT * FROM no_such_table")

    with pytest.raises(duckdb.CatalogException):
        interruptible(con, work)
    assert interruptible(con, lambda: con.execute("SELECT 42").fetchone()) == (42,)


def test_off_the_main_thread_the_work_runs_in_place():
    con, seen = connected(), []

    def work() -> str:
        return threading.current_thread().name

    runner = threading.Thread(target=lambda: seen.append(interruptible(con, work)), name="op")
    runner.start()
    runner.join()
    assert seen == ["op"]


def test_ctrl_c_handed_to_the_works_thread_still_stops_the_statement():
    """The kernel may hand a Ctrl-C meant for the process to any of its threads. One handed to
    the work's thread did not wake a main thread blocked waiting for the answer, so the
    statement ran to its end (seen as a flaky failure under a busy test run)."""
    con = connected()
    started = threading.Event()

    def work() -> None:
        started.set()
        con.execute(SLOW)

    def send() -> None:
        started.wait()
        while not waiting_for_the_work():
            time.sleep(0.01)
        worker = next(t for t in threading.enumerate() if t.name.startswith("skewtape-duckdb"))
        signal.pthread_kill(worker.ident, signal.SIGINT)

    sender = threading.Thread(target=send, daemon=True)
    sender.start()
    with pytest.raises(KeyboardInterrupt):
        interruptible(con, work)
    sender.join()

    assert con.execute("SELECT count(*) FROM finished").fetchone() == (0,)


def test_ctrl_c_as_the_work_is_handed_over_still_stops_the_statement(monkeypatch):
    """Ctrl-C in the instant the work's thread has started but the main thread does not wait
    for its answer yet: it used to leave the statement running to its end (the handing over
    was outside the interrupt's handling)."""
    con = connected()
    started = threading.Event()

    def work() -> None:
        started.set()
        con.execute(SLOW)

    start = threading.Thread.start

    def start_then_ctrl_c(thread: threading.Thread) -> None:
        start(thread)
        if thread.name.startswith("skewtape-duckdb"):
            started.wait()
            raise KeyboardInterrupt

    monkeypatch.setattr(threading.Thread, "start", start_then_ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        interruptible(con, work)
    monkeypatch.undo()

    assert con.execute("SELECT count(*) FROM finished").fetchone() == (0,)


def test_the_works_own_timeout_error_is_raised_not_waited_on_for_ever():
    """A TimeoutError the work raises (a socket's read timing out) is the very error the wait
    for its answer in steps meets when a step passes: it was taken for one, so the main thread
    waited for good on work that had ended. An alarm ends the wait if it hangs."""
    con = connected()

    def work() -> None:
        raise TimeoutError("the read timed out")

    def hung(signum: int, frame: object) -> None:
        raise AssertionError("interruptible still waits for work that raised TimeoutError")

    before = signal.signal(signal.SIGALRM, hung)
    signal.alarm(5)
    try:
        with pytest.raises(TimeoutError, match="the read timed out"):
            interruptible(con, work)
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, before)

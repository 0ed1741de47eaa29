"""DuckDB work that Ctrl-C stops at once.

Python runs its Ctrl-C handler only between its own steps, and DuckDB looks for an interrupt
only now and then: a long statement run on the main thread ran to its end (a 2e9-row query for
seven minutes) before Ctrl-C was seen. :func:`interruptible` runs the work on a thread of its
own while the main thread waits, so Ctrl-C reaches the main thread at once, calls
``con.interrupt()`` (DuckDB stops the statement, rolling back what it wrote), and is raised.
Used by a query's fetch, an apply's checks of a change file and its merges, and a delta build's
row comparison. The fills reads and read-back comparison of ``archive-month`` still run on the
main thread: Ctrl-C stops them when DuckDB next looks (the command line says "interrupted").
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import Future, wait
from typing import TypeVar

import duckdb

T = TypeVar("T")

AGAIN_SECONDS = 0.05
"""How often the connection is interrupted again until the work has stopped."""


def interruptible(con: duckdb.DuckDBPyConnection, work: Callable[[], T]) -> T:
    """``work()`` (statements on ``con``) run on a thread of its own while the main thread waits;
    its answer or its error. Whatever stops the main thread while it runs (Ctrl-C's
    KeyboardInterrupt, the DagsterExecutionInterruptedError Dagster raises in an op when its run
    is terminated) interrupts ``con`` until the work has stopped (DuckDB's own interrupt error,
    or the answer it had finished, is dropped) and is raised. The interrupt is given again until
    then, as DuckDB forgets one given before a statement begins (the work binding it, or between
    two statements). Off the main thread, which Ctrl-C never reaches, ``work()`` runs in place."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    answer: Future[T] = Future()
    try:  # from before the work is handed over: an interrupt at any point stops it
        threading.Thread(target=_run, args=(work, answer), name="skewtape-duckdb").start()
        return _answer(answer)
    except BaseException:  # the work's own error: done already, nothing to stop
        _stop(con, answer)
        raise


def _run(work: Callable[[], T], answer: Future[T]) -> None:
    """``work()`` into ``answer``, unless ``answer`` was cancelled before the work began."""
    if not answer.set_running_or_notify_cancel():
        return
    try:
        result = work()
    except BaseException as exc:  # the caller's to raise, whatever it is
        answer.set_exception(exc)
    else:
        answer.set_result(result)


WAKE_SECONDS = 0.1
"""How often the main thread wakes while it waits for the work (see :func:`_answer`)."""


def _answer(answer: Future[T]) -> T:
    """``answer``'s result, waited for in steps of :data:`WAKE_SECONDS`: the kernel may hand a
    Ctrl-C meant for the process to another of its threads (DuckDB's), which does not wake a
    main thread blocked on a lock; waking now and then runs Python's handler within a step. A
    TimeoutError of the work's own (a socket's, say) is raised as it is, never taken for the
    wait's."""
    while True:
        try:
            return answer.result(timeout=WAKE_SECONDS)
        except TimeoutError:
            if answer.done():  # the work's own TimeoutError, or its answer just in
                return answer.result()


def _stop(con: duckdb.DuckDBPyConnection, answer: Future) -> None:
    """Interrupt ``con`` until ``answer`` is done (cancelled when its work has not begun: it never
    will); a second Ctrl-C meanwhile does not end the wait (the connection is never left to a
    statement still running)."""
    answer.cancel()
    while not answer.done():
        try:
            con.interrupt()
            wait([answer], timeout=AGAIN_SECONDS)
        except BaseException:  # a further Ctrl-C: the work is stopped first
            continue

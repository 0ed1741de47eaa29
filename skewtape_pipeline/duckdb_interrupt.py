"""DuckDB work that Ctrl-C stops at once.

Python runs its Ctrl-C handler only between its own steps, and DuckDB looks for an interrupt
only now and then: a long statement run on the main thread ran to its end (a 2e9-row query for
seven minutes) before Ctrl-C was seen. :func:`interruptible` runs the work on a thread of its
own while the main thread waits, so Ctrl-C reaches the main thread at once, calls
``con.interrupt()`` (DuckDB stops the statement, rolling back what it wrote), and is raised.
Used by every long DuckDB statement a command runs: a query's fetch, an apply's checks of a
change file and its merges, a delta build's row comparison.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor, wait
from typing import TypeVar

import duckdb

T = TypeVar("T")


def interruptible(con: duckdb.DuckDBPyConnection, work: Callable[[], T]) -> T:
    """``work()`` (statements on ``con``) run on a thread of its own while the main thread waits;
    its answer or its error. A KeyboardInterrupt while it runs interrupts ``con``, waits for the
    work to stop (DuckDB's own interrupt error, or the answer it had finished, is dropped) and is
    raised. Off the main thread, which Ctrl-C never reaches, ``work()`` runs in place."""
    if threading.current_thread() is not threading.main_thread():
        return work()
    with ThreadPoolExecutor(1, thread_name_prefix="skewtape-duckdb") as running:
        answer = running.submit(work)
        try:
            return answer.result()
        except KeyboardInterrupt:
            con.interrupt()
            wait([answer])
            raise

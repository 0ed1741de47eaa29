"""Progress of long work: reported by the core, shown by the command line.

The core calls :func:`report` at natural points (a file hashed, a delta entry applied, a file
re-tiered or verified). A caller that shows progress installs a reporter with
:func:`reporting` around a core call; it is held in a context variable, so the core's
signatures stay as they are, and without a reporter a report costs one lookup. Reports come
from the thread that called the core function (workers' results are reported as they are
collected).

Notices are the news a waiting user should read at once, one line each (a transfer tried
again after a stall, and why: :func:`notice`); a caller installs their reader with
:func:`noticing`, and work spread over a pool's threads carries it there
(:func:`carrying_notices`).

:class:`ProgressLine` is the command line's reporter: a bar redrawn in place on a terminal,
a line every :data:`LINE_INTERVAL` seconds otherwise (a redirected or CI log shows life), and
nothing when disabled (``--json``); it shows notices on lines of their own.
"""

from __future__ import annotations

import contextlib
import functools
import io
import os
import threading
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from typing import Any, ParamSpec, TypeVar

Reporter = Callable[[int, int, str, str], None]
"""``reporter(done, total, stage, unit)``."""

_REPORTER: ContextVar[Reporter | None] = ContextVar("skewtape_progress", default=None)


def report(stage: str, done: int, total: int, unit: str = "files") -> None:
    """Tell the installed reporter (if any) that ``done`` of ``total`` ``unit`` of ``stage``
    are done."""
    reporter = _REPORTER.get()
    if reporter is not None:
        reporter(done, total, stage, unit)


@contextlib.contextmanager
def reporting(reporter: Reporter) -> Iterator[None]:
    """Send the core's progress reports to ``reporter`` while the block runs."""
    token = _REPORTER.set(reporter)
    try:
        yield
    finally:
        _REPORTER.reset(token)


Notice = Callable[[str], None]
"""``notice(text)``: one line a user waiting on long work should read now (a transfer tried
again, and why), from whichever thread the work is on."""

_NOTICE: ContextVar[Notice | None] = ContextVar("skewtape_notice", default=None)

_P = ParamSpec("_P")
_R = TypeVar("_R")


def notice(text: str) -> None:
    """Tell the installed notice reader (if any) ``text``, one line."""
    reader = _NOTICE.get()
    if reader is not None:
        reader(text)


@contextlib.contextmanager
def noticing(reader: Notice) -> Iterator[None]:
    """Send the core's notices to ``reader`` while the block runs (and to the worker threads of
    the functions it wraps with :func:`carrying_notices`)."""
    token = _NOTICE.set(reader)
    try:
        yield
    finally:
        _NOTICE.reset(token)


def carrying_notices(fn: Callable[_P, _R]) -> Callable[_P, _R]:
    """``fn``, its notices sent where this thread's go whichever thread runs it (a pool's
    worker, whose context is its own)."""
    reader = _NOTICE.get()
    if reader is None:
        return fn

    @functools.wraps(fn)
    def run(*args: _P.args, **kwargs: _P.kwargs) -> _R:
        with noticing(reader):
            return fn(*args, **kwargs)

    return run


def size_text(nbytes: int) -> str:
    """``nbytes`` for a reader: ``812 B``, ``13.1 KB``, ``1.29 GB`` (powers of 1000)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("KB", 1e3)):
        if nbytes >= scale:
            return f"{nbytes / scale:.{2 if scale == 1e9 else 1}f} {unit}"
    return f"{nbytes} B"


PROGRESS_MIN_TOTAL = 20
"""Work of fewer items than this finishes too fast to need a bar on a terminal."""

LINE_INTERVAL = 10.0
"""Seconds between two progress lines when the stream is not a terminal (the first comes
after this long, so a short command prints none)."""

BYTES_MIN_TOTAL = 100_000_000
"""Work of fewer bytes than this finishes too fast to need a bar on a terminal."""

BAR_WIDTH = 30


class ProgressLine:
    """Progress on ``stream`` (standard error): on a terminal, a one-line bar redrawn with a
    carriage return once the work is long enough to need it; otherwise a plain line at most
    every ``interval`` seconds (default :data:`LINE_INTERVAL`; ``label: stage done/total unit
    (percent)``); nothing at all
    when not ``enabled``. ``clock`` gives seconds (monotonic)."""

    def __init__(
        self,
        stream: Any,
        unit: str,
        *,
        label: str = "",
        enabled: bool = True,
        min_total: int = PROGRESS_MIN_TOTAL,
        interval: float | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.stream, self.unit, self.label, self.enabled = stream, unit, label, enabled
        self.min_total, self.clock = min_total, clock
        self.interval = LINE_INTERVAL if interval is None else interval
        self.terminal = enabled and stream.isatty()
        self.last_line = clock()
        self.drawn = 0
        self._lock = threading.Lock()  # transfer threads and the caller's thread share a line

    def update(self, done: int, total: int, stage: str = "", unit: str = "") -> None:
        """Show that ``done`` of ``total`` are done (of ``stage``, counted in ``unit``); safe to
        call from several threads."""
        if not self.enabled or total <= 0:
            return
        with self._lock:
            self._update(done, total, stage, unit)

    def _update(self, done: int, total: int, stage: str, unit: str) -> None:
        counted = _counted(done, total, unit or self.unit)
        if self.terminal:
            if total >= (BYTES_MIN_TOTAL if unit == "bytes" else self.min_total):
                columns = self._columns()
                width = max(min(BAR_WIDTH, columns - len(counted) - 4), 0)  # "[", "] ", " "
                filled = width * min(done, total) // total
                bar = "#" * filled + "-" * (width - filled)
                room = columns - width - len(counted) - 4
                if len(stage) > room:  # the counts stay whole; the stage, then the bar give way
                    stage = stage[: max(room - 3, 0)] + "..." if room > 3 else ""
                self._draw(f"[{bar}] {stage + ' ' if stage else ''}{counted}")
            return
        now = self.clock()
        if now - self.last_line >= self.interval:
            self.last_line = now
            head = ": ".join(part for part in (self.label, stage) if part)
            print(f"{head + ' ' if head else ''}{counted} ({100 * done // total}%)",
                  file=self.stream, flush=True)  # fmt: skip

    def _columns(self) -> int:
        """The characters a bar may take: the width of the terminal the stream is (``COLUMNS``
        when set, else 80), less one."""
        try:
            width = int(os.environ["COLUMNS"])
        except (KeyError, ValueError):
            try:
                width = os.get_terminal_size(self.stream.fileno()).columns
            except (AttributeError, ValueError, OSError, io.UnsupportedOperation):
                width = 80
        return max(width - 1, 20)

    def _draw(self, text: str) -> None:
        """Redraw the bar's line in place, cut to the terminal's width (a line that wrapped
        could not be redrawn)."""
        text = text[: self._columns()]
        self.stream.write("\r" + text.ljust(self.drawn))
        self.stream.flush()
        self.drawn = len(text)

    def notice(self, text: str) -> None:
        """Show ``text`` on a line of its own, after the label (on a terminal over the bar,
        which the next update draws again below it); nothing when not enabled. Safe to call
        from several threads."""
        if not self.enabled:
            return
        line = f"{self.label}: {text}" if self.label else text
        with self._lock:
            self.stream.write("\r" + line.ljust(self.drawn) + "\n" if self.drawn else line + "\n")
            self.stream.flush()
            self.drawn = 0

    def finish(self) -> None:
        """End the bar's line (nothing when no bar was drawn)."""
        with self._lock:
            if self.drawn:
                self.stream.write("\n")
                self.stream.flush()
                self.drawn = 0


def _counted(done: int, total: int, unit: str) -> str:
    if unit == "bytes":
        return f"{size_text(done)} of {size_text(total)}"
    return f"{done}/{total} {unit}"

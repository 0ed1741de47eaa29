"""Small helpers shared by the benchmarks: one-core pinning, timing, markdown tables."""

from __future__ import annotations

import math
import os
import time
from collections.abc import Callable, Sequence
from typing import TypeVar

T = TypeVar("T")


def pin_to_one_core(cpu: int | None) -> str:
    """Run this process (and the threads it starts) on one CPU; returns a description."""
    available = sorted(os.sched_getaffinity(0))
    chosen = available[-1] if cpu is None else cpu
    os.sched_setaffinity(0, {chosen})
    try:
        import pyarrow as pa

        pa.set_cpu_count(1)
        pa.set_io_thread_count(1)
    except ImportError:  # pragma: no cover - pyarrow is a dependency
        pass
    return f"pinned to CPU {chosen} of {available}"


def timed(fn: Callable[[], T]) -> tuple[T, float]:
    """``fn()`` and the wall-clock seconds it took."""
    start = time.perf_counter()
    result = fn()
    return result, time.perf_counter() - start


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def markdown_table(headers: Sequence[str], rows: Sequence[Sequence[object]]) -> str:
    """A GitHub markdown table; numbers right-aligned."""

    def cell(value: object) -> str:
        return "" if value is None else str(value)

    lines = ["| " + " | ".join(headers) + " |"]
    aligns = []
    for i in range(len(headers)):
        numeric = rows and all(
            isinstance(r[i], int | float) or (isinstance(r[i], str) and _looks_numeric(r[i]))
            for r in rows
            if r[i] not in (None, "")
        )
        aligns.append("---:" if numeric else "---")
    lines.append("| " + " | ".join(aligns) + " |")
    lines.extend("| " + " | ".join(cell(v) for v in row) + " |" for row in rows)
    return "\n".join(lines)


def _looks_numeric(text: str) -> bool:
    stripped = text.replace(",", "").replace("x", "").replace("%", "").strip()
    try:
        float(stripped)
    except ValueError:
        return False
    return True


def fmt_int(value: float) -> str:
    return f"{round(value):,}"


def fmt_float(value: float, digits: int = 2) -> str:
    return f"{value:,.{digits}f}"


def fmt_ratio(value: float) -> str:
    return f"{value:.3f}x"


def fmt_rate(ticks: int, seconds: float) -> str:
    """Ticks per second, in millions when large."""
    rate = ticks / seconds if seconds > 0 else float("inf")
    return f"{rate / 1e6:,.2f} M" if rate >= 1e6 else f"{rate / 1e3:,.1f} k"

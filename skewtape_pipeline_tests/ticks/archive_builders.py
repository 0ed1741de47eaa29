"""Builders for archive lifecycle tests: a small hot archive of thin symbols, and readers of it.

:func:`build_archive` compacts a few symbols over days spread across the tiers of
:data:`POLICY` (hot 2 days, warm 10 days) into ``<folder>/archive``; thin symbol-days of 1 to 5
ticks and one busy day larger than the consolidated row-group target. :func:`view_rows` reads
everything the ``ticks`` view returns, as comparable tuples (duplicates kept).
"""

from __future__ import annotations

import json
import shutil
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import pyarrow as pa

from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.hashing import HashCache
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy, TierSettings
from skewtape_pipeline.ticks.archive.store.trust import VERIFIED_CACHE
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.sides import SIDE_NAMES
from skewtape_pipeline.ticks.encode.validate import day_start_ns
from skewtape_pipeline_tests.ticks.conftest import archive_at

SYMBOLS = ("CL/F", "ES", "KX-25MAR")
FIRST_DAY = date(2026, 1, 27)
DAYS = tuple(FIRST_DAY + timedelta(days=i) for i in (0, 3, 6, 9, 12, 15))
BUSY = ("ES", DAYS[1])
STAGE_1 = DAYS[-1] + timedelta(days=1)
"""Re-tiering date at which the days are aged 16 .. 1: cold, cold, warm, warm, warm, hot."""
STAGE_2 = DAYS[-1] + timedelta(days=14)
"""Re-tiering date at which every day is cold."""
POLICY = TierPolicy(
    hot_max_age_days=2,
    warm_max_age_days=10,
    warm=TierSettings(compression_level=3, consolidated_row_group_size=8),
    cold=TierSettings(compression_level=9, consolidated_row_group_size=8),
)


def day_ticks(symbol: str, day: date) -> TickBatch:
    """A few sorted ticks of ``symbol`` on ``day`` (a duplicate timestamp, every side)."""
    n = 40 if (symbol, day) == BUSY else 1 + (len(symbol) + day.day) % 5
    start = day_start_ns(day) + 3_600 * 10**9
    seed = sum(map(ord, symbol))
    rows = [
        (start + 1_000 * (i // 2), 5_000 + (seed + 7 * i) % 90, 1 + (seed * i) % 13, i % 3)
        for i in range(n)
    ]
    ts, price, quantity, side = zip(*rows, strict=True)
    return TickBatch.from_units(
        list(ts), list(price), list(quantity), list(side), TickSchema(price_scale=2)
    )


def build_archive(folder: Path, *, as_of: date, days: tuple[date, ...] = DAYS) -> Path:
    """Compact every symbol on every day of ``days`` into ``<folder>/archive``; return it."""
    root = folder / "archive"
    for symbol in SYMBOLS:
        for day in days:
            compact_symbol_day(
                archive_at(root, POLICY).core,
                day_ticks(symbol, day),
                SymbolDayWrite(symbol=symbol, day=day, age_days=(as_of - day).days),
            )
    return root


def expected_rows(days: tuple[date, ...] = DAYS) -> list[tuple]:
    """What the view must return for an archive built by :func:`build_archive`."""
    out = []
    for symbol in SYMBOLS:
        for day in days:
            batch = day_ticks(symbol, day)
            for ts, price, quantity, side in zip(
                batch.ts_ns.to_pylist(),
                batch.price.to_pylist(),
                batch.quantity.to_pylist(),
                batch.side.to_pylist(),
                strict=True,
            ):
                out.append((symbol, day, ts, Decimal(price).scaleb(-2), quantity, SIDE_NAMES[side]))
    return sorted(out)


def write_four_day_csv(path: Path) -> Path:
    """A CSV of 12 trades (3 a day, 2025-12-01 .. 04, quantities 1 to 3, symbols KX-0 and KX-1
    on alternate days) for ``compact-ticks --price-scale 2``; returns ``path``."""
    day_ns, start = 86_400 * 10**9, 1_764_547_200 * 10**9  # 2025-12-01
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{start + d * day_ns + i},0.{50 + i},{i + 1},BUY,KX-{d % 2}" for d in range(4)
              for i in range(3)]  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def view_rows(root: Path, *, policy: TierPolicy | None = None) -> list[tuple]:
    """Every row of the ``ticks`` view, sorted, as (symbol, date, ts_ns, price, qty, side)."""
    sql = "SELECT symbol, date, ts, price, quantity, side FROM ticks"
    table = run_query(sql, ArchiveCore(root, policy=policy))
    ts = table.column("ts").cast(pa.int64()).to_pylist()
    return sorted(
        zip(
            table.column("symbol").to_pylist(),
            table.column("date").to_pylist(),
            ts,
            table.column("price").to_pylist(),
            table.column("quantity").to_pylist(),
            table.column("side").to_pylist(),
            strict=True,
        )
    )


def tiers_by_day(root: Path, *, policy: TierPolicy | None = None) -> dict[tuple[str, date], str]:
    """The tier the view reports for each symbol-day."""
    table = run_query(
        "SELECT DISTINCT symbol, date, tier FROM ticks", ArchiveCore(root, policy=policy)
    )
    return {
        (s, d): t
        for s, d, t in zip(
            table.column("symbol").to_pylist(),
            table.column("date").to_pylist(),
            table.column("tier").to_pylist(),
            strict=True,
        )
    }


def copy_data(source: Path, target: Path) -> Path:
    """Copy a data folder (archive, tier roots, audit log); returns the copy's archive root."""
    shutil.copytree(source, target)
    return target / "archive"


def audit_events(root: Path) -> list[dict]:
    """The records of the audit log beside the archive ``root`` (its default), once the log
    verifies (hash chain and head)."""
    path = root.parent / "audit.jsonl"
    verify_audit_log(path)
    return [json.loads(line) for line in path.read_text().splitlines()]


def files_under(folder: Path) -> list[str]:
    """Relative paths of every file below ``folder``."""
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


def racy_rule_off(monkeypatch) -> None:
    """Let the verified-hash cache trust entries whatever their age: the files of a test are
    seconds old, so the racy-clean rule (``hashing.RACY_WINDOW_NS``) would make every lookup a
    miss, and what such a test checks is the stamp comparison."""
    monkeypatch.setattr(HashCache, "_trusted", lambda cache, rel: cache._entries.get(rel))


def settled_files(folder: Path) -> list[str]:
    """:func:`files_under` but the audit head's temporary file (a crash while the head is moved
    leaves it, and the head a record behind, which verification accepts, until the next append)
    and the cache of files queries verified (``trust.VERIFIED_CACHE``: the view's bookkeeping,
    there once a query ran)."""
    return [
        f
        for f in files_under(folder)
        if not f.startswith(".audit.jsonl.head.") and Path(f).name != VERIFIED_CACHE
    ]


def archive_files(folder: Path) -> list[str]:
    """:func:`settled_files` but the version log's: a run cut short after its commit leaves its
    changes to the next writer, which records them as a version of their own first (its log
    then holds a version more than that of a run not cut short: :func:`all_recorded` checks
    that it ends recording what a read shows)."""
    return [f for f in settled_files(folder) if "/_skewtape_versions/" not in f]


def all_recorded(root: Path) -> bool:
    """True when the latest version of the archive at ``root`` is what a read shows now."""
    return VersionLog(root).record("check") is None


class Crash(Exception):
    """Raised by the crash hooks below (fault injection through ``faults.installed``)."""


def crash_at(point: int):
    """A checkpoint hook that raises :class:`Crash` at its ``point``-th call (0-based)."""
    calls = iter(range(1_000_000))

    def crash(name: str) -> None:
        if next(calls) == point:
            raise Crash(name)

    return crash


def crash_at_name(name: str):
    """A checkpoint hook that raises :class:`Crash` at the first checkpoint called ``name``."""

    def crash(seen: str) -> None:
        if seen == name:
            raise Crash(seen)

    return crash

"""Archive lifecycle benchmark: symbol-days written hot, re-tiered cold, queried by symbol-date.

Run with ``make -C benchmarks archive-tiers`` (it builds ``.bench-venv``) or directly::

    .bench-venv/bin/python benchmarks/archive_tiers.py [--samples N] [--synthetic-ticks N]

For the real Kalshi file and for a larger synthetic dataset of thin markets with the same
shape, in one run:

1. every symbol-day is written to the hot tier with the project's ``compact_source`` (the hot
   tier's settings, as if each day had been compacted when it arrived), then the whole archive
   is re-tiered cold with the project's ``Archive.retier`` at a far-future date (the default
   ``TierPolicy``: consolidated files, one per year, rows by symbol then time, row groups of
   about 8,192 rows on symbol-day boundaries); the archive's bytes per tick at each stage
   (``placement.archive_metrics``) are set against the anchors storing the same ticks as one
   whole file (ClickHouse MergeTree with codecs, TKC1 + zstd-19, DuckDB Parquet zstd);
2. a sample of random symbol-days is queried through the project's view (``query.scan_stats``:
   ``SELECT ts, price, quantity, side FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ?``)
   and the bytes DuckDB read are set against the cold tier's bytes;
3. the same pipeline with other cold-tier settings (row-group target, layout) as levers;
4. versions (``archive_versions.py``, which also runs alone): an archive of 100 versions over a
   month of sample-shaped ticks against the same state unversioned (current and as-of query
   times, the bytes the versions add, as-of lookup time from 100 to 10,000 versions).

Bars (printed PASS/FAIL): the cold tier within 1.1x of the best anchor's whole-file bytes per
tick; every sampled symbol-date query reading under 5% of the cold tier's bytes. Everything
runs on one pinned CPU; scratch goes to ``--workdir`` (default: a temporary folder in
``/dev/shm`` when it exists, so that fsync costs nothing: sizes do not depend on it) and is
removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

sys.path.insert(0, str(Path(__file__).resolve().parent))

import archive_versions
from bench_util import fmt_float, fmt_int, fmt_ratio, markdown_table, pin_to_one_core
from tick_anchors import (
    Part,
    clickhouse_codecs,
    duckdb_zstd,
    fresh_dir,
    pcodec_level12,
    tkc1_zstd19,
)
from tick_data import BUY, KALSHI_FILE, NS_PER_DAY, SELL, Ticks, decimal_array, load_kalshi

from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_source
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query, scan_stats
from skewtape_pipeline.ticks.archive.store.layout import CATALOG_FILE, read_archive_marker
from skewtape_pipeline.ticks.archive.store.placement import archive_metrics
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.version_files import SUFFIX as VERSION_FILE_SUFFIX
from skewtape_pipeline.ticks.encode.sides import KALSHI_TAKER_SIDES
from skewtape_pipeline.ticks.encode.sources import (
    SourceTicks,
    read_kalshi_trades,
    source_from_table,
)

REPO = Path(__file__).resolve().parent.parent
DEFAULT_DATA = REPO.parent / "shared" / "data" / "real-ticks"

SIZE_BAR = 0.9
READ_BAR = 0.05
PRICE_SCALE = 2  # the anchors' mapping (cents); ours runs with default flags (detected)
HOT_ON_ARRIVAL = TierPolicy(hot_max_age_days=36_500, warm_max_age_days=36_501)
"""Every day still hot when it is compacted (written at the hot tier's settings)."""
FAR_FUTURE = dt.date(2100, 1, 1)
"""The re-tiering date: every symbol-day is older than the cold threshold then."""
ABSENT_SYMBOL = "\x00absent"
QUERY_SQL = "SELECT ts, price, quantity, side FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ?"
ANCHORS: dict[str, Callable[[list[Part], Path], int]] = {
    "TKC1 + zstd-19": tkc1_zstd19,
    "Parquet, DuckDB zstd": duckdb_zstd,
    "ClickHouse codecs + ZSTD(19)": clickhouse_codecs,
}
DEFAULT_LEVERS = "year:2048,year:32768,month:2048"
DEFAULT_SYNTHETIC_LEVERS = "year:2048,year:32768"  # month: ~90 s more, fails reads (see README)


# --- datasets -----------------------------------------------------------------------------------


@dataclasses.dataclass
class Dataset:
    """The same ticks twice: exact integers for the anchors, a source for the project."""

    name: str
    ticks: Ticks  # sorted by symbol then time
    source: SourceTicks
    note: str


def kalshi_dataset(data: Path) -> Dataset:
    path = data / KALSHI_FILE
    ticks = load_kalshi(path)
    return Dataset(
        name="Kalshi payrolls (real)",
        ticks=ticks,
        source=read_kalshi_trades(path),
        note=f"`{KALSHI_FILE}` read with `read_kalshi_trades`",
    )


def thin_markets(
    n_ticks: int, *, symbol_days: int, busy_share: float = 0.025, seed: int = 20250606
) -> Ticks:
    """Prediction-market trades with the real file's shape, reproducible from ``seed``.

    Markets list on a random day between 2023-03 and 2025-06 and live 7 to 61 days, trading on
    about 45% of them (the real file: 12 of 28 days); a thin market-day has
    ``round(lognormal(median 3, sigma 1.25))`` trades (real: median 3, p90 17). A
    ``busy_share`` of the markets (at least 3) trades every day of its life and takes every
    tick the thin ones leave of ``n_ticks``: a few busy markets as in the real file, with a
    heavier tail. Times are whole microseconds (a fifth repeat the previous trade's: one taker
    filling several orders), prices a random walk on 1..99 cents, sizes heavy-tailed and often
    round, sides YES/NO with runs.
    """
    rng = np.random.default_rng(seed)
    first, last = dt.date(2023, 3, 1), dt.date(2025, 6, 30)
    span = (last - first).days + 1
    per_symbol = 16  # about 0.45 * 34 days, overshoot then cut
    n_symbols = max(8, symbol_days // per_symbol * 2)
    life = rng.integers(7, 62, size=n_symbols)
    start = rng.integers(0, span - life)
    busy = rng.random(n_symbols) < busy_share
    busy[:3] = True  # a few, whatever the seed
    sym_of_day, day_of = [], []
    for s in range(n_symbols):
        days = np.arange(life[s])
        if not busy[s]:
            days = days[rng.random(life[s]) < 0.45]
        sym_of_day.append(np.full(len(days), s))
        day_of.append(start[s] + days)
    sym_of_day, day_of = np.concatenate(sym_of_day), np.concatenate(day_of)
    sym_of_day, day_of = sym_of_day[:symbol_days], day_of[:symbol_days]
    is_busy = busy[sym_of_day]
    counts = np.maximum(1, np.round(rng.lognormal(np.log(3), 1.25, size=len(sym_of_day))))
    counts = counts.astype(np.int64)
    left = max(0, n_ticks - int(counts[~is_busy].sum()))
    weights = rng.lognormal(0.0, 0.8, size=int(is_busy.sum()))
    counts[is_busy] = np.maximum(1, np.floor(left * weights / weights.sum())).astype(np.int64)

    n = int(counts.sum())
    day_index = np.repeat(np.arange(len(counts)), counts)
    us_in_day = rng.integers(0, 86_400 * 10**6, size=n)
    order = np.lexsort((us_in_day, day_index))
    us_in_day = us_in_day[order]
    repeat = rng.random(n) < 0.2
    repeat[np.r_[0, np.cumsum(counts)[:-1]]] = False  # a symbol-day's first trade is its own
    source_row = np.where(repeat, 0, np.arange(n))
    us_in_day = us_in_day[np.maximum.accumulate(source_row)]
    epoch_day = (first - dt.date(1970, 1, 1)).days
    ts_ns = ((epoch_day + day_of[day_index]) * NS_PER_DAY + us_in_day * 1000).astype(np.int64)

    symbol_of_tick = sym_of_day[day_index]
    steps = rng.choice([-2, -1, 0, 1, 2], p=[0.05, 0.2, 0.5, 0.2, 0.05], size=n)
    first_tick = np.r_[True, symbol_of_tick[1:] != symbol_of_tick[:-1]]
    walk = np.cumsum(steps)
    base = walk[first_tick][np.cumsum(first_tick) - 1]
    opening = rng.integers(5, 96, size=n_symbols)[symbol_of_tick]
    price = np.clip(opening + walk - base, 1, 99).astype(np.int64)
    quantity = np.maximum(1, np.round(rng.lognormal(np.log(30), 1.6, size=n))).astype(np.int64)
    round_lot = rng.random(n) < 0.25
    quantity[round_lot] = 10 ** np.floor(np.log10(quantity[round_lot])).astype(np.int64)
    side = (np.cumsum(rng.random(n) < 0.35) % 2).astype(np.uint8)  # BUY=0 (yes), SELL=1 (no)

    names = np.array(
        [
            f"KXSYN{s % 40:02d}-{(first + dt.timedelta(days=int(start[s]))):%y%b%d}-T{s}".upper()
            for s in range(n_symbols)
        ],
        dtype=object,
    )
    symbols = names[symbol_of_tick]
    ticks = Ticks(
        name=f"synthetic thin markets ({n:,} ticks)",
        ts_ns=ts_ns,
        price=price,
        quantity=quantity,
        side=side,
        price_scale=2,
        quantity_scale=0,
        symbol="SYNTH",
        symbols=symbols,
    )
    return ticks.take(np.lexsort((ticks.ts_ns, ticks.symbols)))


def synthetic_dataset(n_ticks: int, symbol_days: int) -> Dataset:
    ticks = thin_markets(n_ticks, symbol_days=symbol_days)
    table = pa.table(
        {
            "timestamp_nanos": pa.array(ticks.ts_ns, pa.int64()),
            "price": decimal_array(ticks.price, PRICE_SCALE),
            "quantity": pa.array(ticks.quantity, pa.int64()),
            "side": pa.array(np.where(ticks.side == BUY, "yes", "no"), pa.string()),
            "symbol": pa.array(ticks.symbols, pa.string()),
        }
    )
    return Dataset(
        name="synthetic thin markets",
        ticks=ticks,
        source=source_from_table(table, side_map=KALSHI_TAKER_SIDES),
        note="seeded; Kalshi's mapping (yes/no taker sides, cents, µs times)",
    )


def shape(counts: dict[tuple[str, dt.date], int]) -> str:
    """Ticks per symbol-day: median, p90, max, and the share the busiest 5% hold."""
    sizes = np.sort(np.fromiter(counts.values(), dtype=np.int64))[::-1]
    top = sizes[: max(1, len(sizes) // 20)].sum() / sizes.sum()
    symbols = len({symbol for symbol, _ in counts})
    return (
        f"{symbols:,} symbols; ticks per symbol-day: median {np.median(sizes):g}, "
        f"p90 {np.percentile(sizes, 90):g}, max {sizes[0]:,}; the busiest 5% of symbol-days "
        f"hold {top:.0%} of the ticks"
    )


def symbol_day_counts(ticks: Ticks) -> dict[tuple[str, dt.date], int]:
    """Ticks per (symbol, UTC day)."""
    days = ticks.ts_ns // NS_PER_DAY
    change = np.flatnonzero((ticks.symbols[1:] != ticks.symbols[:-1]) | (days[1:] != days[:-1]))
    starts = np.r_[0, change + 1]
    sizes = np.diff(np.r_[starts, len(ticks)])
    epoch = dt.date(1970, 1, 1)
    return {
        (str(ticks.symbols[i]), epoch + dt.timedelta(days=int(days[i]))): int(size)
        for i, size in zip(starts, sizes, strict=True)
    }


# --- measuring ----------------------------------------------------------------------------------


@dataclasses.dataclass
class Stage:
    label: str
    files: int
    bytes: int
    seconds: float | None = None
    counted: bool = False  # the row the size bar is evaluated on


@dataclasses.dataclass
class Reads:
    """What the sampled symbol-date queries read from one cold tier."""

    tier_bytes: int
    tier_files: int
    footer_bytes: int
    shares: list[float]
    bytes_read: list[int]
    row_groups: list[tuple[int, int]]
    wrong_rows: int
    worst: tuple[str, dt.date, int] | None
    empty_read: int
    """Bytes the same query reads when no row matches (a symbol absent from the tier)."""
    one_file_floor: int
    """The least DuckDB reads to answer any query from one file of the tier: the smallest of
    the tier's files, queried alone for an absent symbol (the reader's fixed tail read)."""

    shares_with_year: list[float]
    """Shares read by the same queries with ``AND year = <the day's year>`` added."""

    @property
    def floor_share(self) -> float:
        return self.one_file_floor / self.tier_bytes


@dataclasses.dataclass
class Lever:
    layout: str
    row_group_target: int
    stage: Stage
    reads: Reads


@dataclasses.dataclass
class Outcome:
    dataset: Dataset
    n: int
    symbol_days: int
    shape: str
    anchors: list[Stage]
    stages: list[Stage]
    reads: Reads
    levers: list[Lever]
    schema: str = ""
    """The schema ours detected with default flags (read from the archive's marker)."""
    headroom: int | None = None
    """pcodec level 12 on the whole file (a yardstick, no engine reads it); None if skipped."""


def run_anchors(ticks: Ticks, workdir: Path, skip: set[str]) -> list[Stage]:
    parts = [Part("whole", ticks.symbol, None, ticks, with_symbol=True)]
    out = []
    for name, anchor in ANCHORS.items():
        if any(s.lower() in name.lower() for s in skip):
            continue
        scratch = fresh_dir(workdir / "anchor")
        started = time.perf_counter()
        size = anchor(parts, scratch)
        out.append(Stage(name, 1, size, time.perf_counter() - started))
        log(f"  {name}: {size:,} B")
    shutil.rmtree(workdir / "anchor", ignore_errors=True)
    return out


def write_hot(ds: Dataset, root: Path) -> float:
    """Every symbol-day into the hot tier with the project's compaction; the seconds it took."""
    last_day = dt.date(1970, 1, 1) + dt.timedelta(days=int(ds.ticks.ts_ns.max() // NS_PER_DAY))
    started = time.perf_counter()
    compact_source(
        Archive(root, policy=HOT_ON_ARRIVAL, audit_log=None).core, ds.source, as_of=last_day
    )
    return time.perf_counter() - started


def link_copy(root: Path, to: Path) -> None:
    """A copy of the archive ``root`` that later writes to either leave the other as it was.

    Parquet files (``.parquet``, and the version store's ``.pq``) are hard links sharing their
    bytes: the archive never rewrites one in place, it writes a new file and renames or unlinks.
    Every other file is copied: the version index, the hot files' records and the lock are
    written in place, so a shared inode would carry ``root``'s next version into the copy's
    index without its record (re-tiering the copy then fails with "version N was pruned").
    """

    def link_or_copy(source: str, target: str) -> None:
        if source.endswith((".parquet", VERSION_FILE_SUFFIX)):
            os.link(source, target)
        else:
            shutil.copy2(source, target)

    shutil.copytree(root, to, copy_function=link_or_copy)


def to_cold(root: Path, policy: TierPolicy, audit_log: Path) -> float:
    """Re-tier the whole archive at :data:`FAR_FUTURE`; the seconds it took."""
    archive = Archive(root, policy=policy, audit_log=audit_log)
    started = time.perf_counter()
    result = archive.retier(as_of=FAR_FUTURE)
    seconds = time.perf_counter() - started
    if not result.committed:
        raise RuntimeError(f"{root}: re-tiering did not commit")
    return seconds


def check_archive(
    root: Path, policy: TierPolicy, tier: str, n: int, expected_days: int, ticks: Ticks | None
) -> tuple[int, int]:
    """The tier's (files, bytes), after checking every tick is there exactly once.

    ``ticks`` given: the view's rows are also compared, value for value, with them.
    """
    metrics = archive_metrics(ArchiveTiers.of(root, policy))
    held = metrics.tiers[tier]
    others = sum(m.ticks for t, m in metrics.tiers.items() if t != tier)
    if held.ticks != n or others or held.symbol_days != expected_days:
        raise RuntimeError(
            f"{root}: {tier} holds {held.ticks:,} ticks in {held.symbol_days:,} symbol-days "
            f"(others {others:,}); expected {n:,} in {expected_days:,}"
        )
    if metrics.retained_files:
        raise RuntimeError(f"{root}: {metrics.retained_files} superseded files left on disk")
    if ticks is not None:
        check_view_rows(root, ticks)
    return held.files, held.bytes


def check_view_rows(root: Path, ticks: Ticks) -> None:
    """The view returns exactly the dataset's ticks (as integers, in one order)."""
    got = run_query(
        "SELECT symbol, epoch_us(ts) * 1000 AS ts_ns, CAST(price * 100 AS BIGINT) AS price, "
        "quantity, side = 'SELL' AS sell FROM ticks "
        "ORDER BY symbol, ts_ns, price, quantity, sell",
        ArchiveCore(root),
        QueryOptions(threads=1),
    )
    order = np.lexsort((ticks.side, ticks.quantity, ticks.price, ticks.ts_ns, ticks.symbols))
    expected = {
        "symbol": ticks.symbols[order],
        "ts_ns": ticks.ts_ns[order],
        "price": ticks.price[order],
        "quantity": ticks.quantity[order],
        "sell": ticks.side[order] == SELL,
    }
    for name, values in expected.items():
        column = got.column(name).to_numpy(zero_copy_only=False)
        if len(column) != len(values) or not np.array_equal(column, values):
            raise RuntimeError(f"{root}: the view's {name} column differs from the dataset's")


def cold_files(root: Path) -> list[Path]:
    return sorted(HOT_ON_ARRIVAL.root_for(COLD, root).rglob("*.parquet"))


def measure_reads(
    root: Path, samples: list[tuple[str, dt.date]], counts: dict[tuple[str, dt.date], int]
) -> Reads:
    """Run the symbol-date query for every sampled symbol-day through the project's view."""
    files = cold_files(root)
    tier_bytes = sum(f.stat().st_size for f in files)
    footer = sum(pq.read_metadata(f).serialized_size + 8 for f in files)
    shares, read, groups, wrong, with_year = [], [], [], 0, []
    worst: tuple[str, dt.date, int] | None = None
    for symbol, day in samples:
        stats = scan_stats(QUERY_SQL, ArchiveCore(root), parameters=[symbol, day, day])
        pruned = scan_stats(
            QUERY_SQL + " AND year = ?",
            ArchiveCore(root),
            parameters=[symbol, day, day, day.year],
        )
        if stats.rows != counts[(symbol, day)] or pruned.rows != stats.rows:
            wrong += 1
        with_year.append(pruned.bytes_read / tier_bytes)
        shares.append(stats.bytes_read / tier_bytes)
        read.append(stats.bytes_read)
        groups.append((stats.row_groups_scanned, stats.row_groups_total))
        if worst is None or stats.bytes_read > worst[2]:
            worst = (symbol, day, stats.bytes_read)
    day = samples[0][1]
    empty = scan_stats(
        QUERY_SQL, ArchiveCore(root), parameters=[ABSENT_SYMBOL, day, day]
    ).bytes_read
    floor = min(bytes_read_alone(f) for f in files)
    return Reads(
        tier_bytes, len(files), footer, shares, read, groups, wrong, worst, empty, floor, with_year
    )


def bytes_read_alone(path: Path) -> int:
    """Bytes DuckDB reads to look for an absent symbol in ``path`` alone (its profile)."""
    con = duckdb.connect()
    try:
        con.execute("SET threads = 1")
        (row,) = con.execute(
            "EXPLAIN (ANALYZE, FORMAT json) SELECT count(*) FROM read_parquet(?) WHERE symbol = ?",
            [str(path), ABSENT_SYMBOL],
        ).fetchall()
    finally:
        con.close()
    return int(json.loads(row[1])["io"]["total_bytes_read"])


def sample_symbol_days(
    counts: dict[tuple[str, dt.date], int], k: int, seed: int
) -> list[tuple[str, dt.date]]:
    keys = sorted(counts)
    rng = np.random.default_rng(seed)
    picked = rng.choice(len(keys), size=min(k, len(keys)), replace=False)
    return [keys[i] for i in sorted(picked)]


def lever_policy(layout: str, row_group_target: int) -> TierPolicy:
    base = TierPolicy()
    cold = dataclasses.replace(
        base.cold, layout=layout, consolidated_row_group_size=row_group_target
    )
    return dataclasses.replace(base, cold=cold)


def parse_levers(text: str) -> list[tuple[str, int]]:
    out = []
    for item in filter(None, (part.strip() for part in text.split(","))):
        layout, _, size = item.partition(":")
        out.append((layout, int(size)))
    return out


def run_dataset(
    ds: Dataset, workdir: Path, *, samples: int, seed: int, levers: list, skip: set[str]
) -> Outcome:
    n = len(ds.ticks)
    counts = symbol_day_counts(ds.ticks)
    log(f"{ds.name}: {n:,} ticks in {len(counts):,} symbol-days")
    anchors = run_anchors(ds.ticks, workdir, skip)

    base = fresh_dir(workdir / "default")
    root = base / "archive"
    hot_seconds = write_hot(ds, root)
    hot_files, hot_bytes = check_archive(root, HOT_ON_ARRIVAL, HOT, n, len(counts), None)
    log(f"  hot: {hot_files:,} files, {hot_bytes:,} B in {hot_seconds:.1f} s")
    for layout, size in levers:
        link_copy(root, workdir / f"lever-{layout}-{size}" / "archive")

    policy = TierPolicy()
    cold_seconds = to_cold(root, policy, base / "audit.jsonl")
    cold_files_n, cold_bytes = check_archive(root, policy, COLD, n, len(counts), ds.ticks)
    catalog = (root / CATALOG_FILE).stat().st_size
    log(f"  cold: {cold_files_n} files, {cold_bytes:,} B in {cold_seconds:.1f} s")
    stages = [
        Stage("ours, hot tier (a file per symbol-day)", hot_files, hot_bytes, hot_seconds),
        Stage(
            "ours, cold tier (re-tiered, default policy)",
            cold_files_n,
            cold_bytes,
            cold_seconds,
            counted=True,
        ),
        Stage("ours, the archive's catalog (info)", 1, catalog),
        Stage("ours, cold tier + catalog (info)", cold_files_n + 1, cold_bytes + catalog),
    ]
    picked = sample_symbol_days(counts, samples, seed)
    started = time.perf_counter()
    reads = measure_reads(root, picked, counts)
    log(
        f"  queries: median share {statistics.median(reads.shares):.1%} "
        f"({time.perf_counter() - started:.1f} s)"
    )

    results = []
    for layout, size in levers:
        lever_root = workdir / f"lever-{layout}-{size}" / "archive"
        lever = lever_policy(layout, size)
        seconds = to_cold(lever_root, lever, lever_root.parent / "audit.jsonl")
        files_n, size_bytes = check_archive(lever_root, lever, COLD, n, len(counts), None)
        label = f"cold, {layout}, row groups of ~{size:,}"
        lever_reads = measure_reads(lever_root, picked, counts)
        results.append(Lever(layout, size, Stage(label, files_n, size_bytes, seconds), lever_reads))
        log(f"  lever {layout}:{size}: {size_bytes:,} B, {max(lever_reads.shares):.1%} worst")
        shutil.rmtree(lever_root.parent, ignore_errors=True)
    marker = read_archive_marker(root)
    detected = (
        f"timestamp_unit {marker['timestamp_unit']}, price scale {marker['price_scale']}, "
        f"quantity scale {marker['quantity_scale']}"
    )
    headroom = None
    if not any(s.lower() in "pcodec" for s in skip):
        scratch = fresh_dir(workdir / "pcodec")
        whole = [Part("whole", ds.ticks.symbol, None, ds.ticks, with_symbol=True)]
        try:
            headroom = pcodec_level12(whole, scratch)
        except ImportError:  # pcodec not installed: no headroom line
            headroom = None
    return Outcome(
        ds, n, len(counts), shape(counts), anchors, stages, reads, results, detected, headroom
    )


# --- rendering ----------------------------------------------------------------------------------


def best(anchors: list[Stage]) -> Stage:
    return min(anchors, key=lambda a: a.bytes)


def size_table(o: Outcome) -> str:
    top = best(o.anchors)
    rows = []
    for s in [*o.stages, *sorted(o.anchors, key=lambda a: a.bytes)]:
        ours = s.label.startswith("ours")
        rows.append(
            [
                f"**{s.label}**" if s.counted else s.label,
                fmt_int(s.files),
                fmt_int(s.bytes),
                fmt_float(s.bytes / o.n, 2),
                fmt_ratio(s.bytes / top.bytes),
                "" if s.seconds is None else fmt_float(s.seconds, 1),
                ("catalog (Parquet)" if "catalog" in s.label else "symbol-days")
                if ours
                else "whole file",
            ]
        )
    headers = ["stage / anchor", "files", "bytes", "bytes/tick", "vs best anchor", "s", "unit"]
    return (
        f"#### {o.dataset.name}: {o.n:,} ticks, {o.symbol_days:,} symbol-days\n\n"
        f"{o.dataset.note}. {o.shape}.\n\n"
        f"Ours: default flags (detected {o.schema}); anchors: ns, cents, one file sorted by "
        "symbol then time.\n\n" + markdown_table(headers, rows)
    )


def read_row(name: str, o: Outcome, reads: Reads, stage: Stage) -> list[object]:
    shares = reads.shares
    scanned = statistics.mean(g[0] for g in reads.row_groups)
    total = reads.row_groups[0][1] if reads.row_groups else 0
    verdict = "PASS" if max(shares) < READ_BAR and not reads.wrong_rows else "FAIL"
    return [
        name,
        fmt_ratio(stage.bytes / best(o.anchors).bytes),
        fmt_int(reads.tier_bytes),
        fmt_int(reads.tier_files),
        fmt_int(total),
        fmt_int(reads.footer_bytes),
        f"{scanned:.1f}",
        fmt_int(statistics.median(reads.bytes_read)),
        f"{statistics.median(shares):.2%}",
        f"{statistics.mean(shares):.2%}",
        f"{max(shares):.2%}",
        f"{statistics.median(reads.shares_with_year):.2%}",
        f"{reads.empty_read / reads.tier_bytes:.2%}",
        f"{reads.floor_share:.2%}",
        "yes" if not reads.wrong_rows else f"NO ({reads.wrong_rows} wrong)",
        "PASS" if stage.bytes / best(o.anchors).bytes <= SIZE_BAR else "FAIL",
        verdict,
    ]


READ_HEADERS = [
    "dataset, cold settings",
    "vs best anchor",
    "cold bytes",
    "files",
    "row groups",
    "footers",
    "groups read",
    "median read",
    "median share",
    "mean share",
    "worst share",
    "median share, + year",
    "no-match query",
    "one-file floor",
    "rows right",
    "size bar",
    "read bar",
]


def read_table(outcomes: list[Outcome], samples: int) -> str:
    rows = []
    for o in outcomes:
        cold = TierPolicy().cold
        default = (
            f"**{o.dataset.name}, default ({cold.layout or 'year'}, "
            f"~{cold.consolidated_row_group_size:,})**"
        )
        rows.append(read_row(default, o, o.reads, o.stages[1]))
        for lever in o.levers:
            name = f"{o.dataset.name}, {lever.layout}, ~{lever.row_group_target:,}"
            rows.append(read_row(name, o, lever.reads, lever.stage))
    return (
        f"#### Symbol-date queries on the cold tier ({samples} random symbol-days each)\n\n"
        f"`{QUERY_SQL}` through `scan_stats` (DuckDB's profile: bytes read, footers included; "
        "row groups summed over the files). Footers: the files' Parquet footers. + year: the "
        "same queries with `AND year = ?` (the day's year), which skips other years' files "
        "unopened. No-match "
        "query: the same query for a symbol the tier does not hold (what opening the files "
        "costs). One-file floor: the least DuckDB reads to answer any query from a single file "
        "of the tier (the smallest file alone, no row matching): its reader reads the last "
        "16 KiB of every file it opens (or the whole file when smaller).\n\n"
        + markdown_table(READ_HEADERS, rows)
    )


def bars(outcomes: list[Outcome]) -> str:
    lines = ["#### Bars (default cold policy)"]
    for o in outcomes:
        cold = o.stages[1]
        top = best(o.anchors)
        ratio = cold.bytes / top.bytes
        verdict = "PASS" if ratio <= SIZE_BAR else "FAIL"
        lines.append(
            f"- {verdict} size, {o.dataset.name}: cold tier {cold.bytes / o.n:.2f} B/tick = "
            f"{ratio:.3f}x {top.label} ({top.bytes / o.n:.2f} B/tick; bar <= {SIZE_BAR}x)"
        )
        if o.headroom is not None:
            lines.append(
                f"- headroom, {o.dataset.name}: pcodec level 12 (no engine reads it) "
                f"{o.headroom / o.n:.2f} B/tick = {o.headroom / top.bytes:.3f}x {top.label}"
            )
        catalog = o.stages[2].bytes
        with_catalog = (cold.bytes + catalog) / top.bytes
        lines.append(
            f"- info, {o.dataset.name}: counting the catalog too ({catalog:,} B, "
            f"{catalog / o.symbol_days:.0f} B per symbol-day) the cold stage is "
            f"{(cold.bytes + catalog) / o.n:.2f} B/tick = {with_catalog:.3f}x "
            f"({'within' if with_catalog <= SIZE_BAR else 'outside'} the size bar)"
        )
        worst = max(o.reads.shares)
        verdict = "PASS" if worst < READ_BAR and not o.reads.wrong_rows else "FAIL"
        symbol, day, _ = o.reads.worst or ("", None, 0)
        lines.append(
            f"- {verdict} read, {o.dataset.name}: worst symbol-date query read {worst:.2%} of "
            f"the cold tier ({symbol} {day}); median {statistics.median(o.reads.shares):.2%} "
            f"(bar < {READ_BAR:.0%})"
        )
        if o.reads.floor_share >= READ_BAR:
            lines.append(
                f"- info, {o.dataset.name}: the bar is below DuckDB's floor on this tier: any "
                f"query that opens one of its files reads at least {o.reads.one_file_floor:,} B "
                f"= {o.reads.floor_share:.2%} of its {o.reads.tier_bytes:,} B, whatever the "
                "layout inside the file"
            )
    for o in outcomes:
        both = [
            f"{lv.layout}, ~{lv.row_group_target:,}"
            for lv in o.levers
            if lv.stage.bytes / best(o.anchors).bytes <= SIZE_BAR
            and max(lv.reads.shares) < READ_BAR
            and not lv.reads.wrong_rows
        ]
        lines.append(f"- levers meeting both bars on {o.dataset.name}: {', '.join(both) or 'none'}")
    return "\n".join(lines)


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def default_workdir() -> Path | None:
    shm = Path("/dev/shm")
    return shm if shm.is_dir() and os.access(shm, os.W_OK) else None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA, help="folder of real files")
    parser.add_argument("--workdir", type=Path, default=None, help="scratch (default /dev/shm)")
    parser.add_argument("--keep", action="store_true", help="keep the scratch files")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    parser.add_argument("--samples", type=int, default=40, help="symbol-days queried per tier")
    parser.add_argument("--seed", type=int, default=7, help="seed of the query sample")
    parser.add_argument("--synthetic-ticks", type=int, default=2_500_000)
    parser.add_argument("--synthetic-symbol-days", type=int, default=20_000)
    parser.add_argument("--no-synthetic", action="store_true", help="the real file only")
    parser.add_argument(
        "--levers", default=DEFAULT_LEVERS, help="cold layout:row-group target, comma separated"
    )
    parser.add_argument(
        "--synthetic-levers", default=DEFAULT_SYNTHETIC_LEVERS, help="levers for the synthetic set"
    )
    parser.add_argument("--skip", action="append", default=[], help="skip anchors matching")
    parser.add_argument("--no-versions", action="store_true", help="skip the versions section")
    args = parser.parse_args(argv)

    log(pin_to_one_core(args.cpu))
    parent = args.workdir if args.workdir is not None else default_workdir()
    if parent is not None:
        parent.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="archive-tiers-", dir=parent))
    log(f"scratch: {workdir}")
    levers = parse_levers(args.levers)
    synthetic_levers = parse_levers(args.synthetic_levers)
    started = time.perf_counter()
    outcomes = []
    try:
        runs = [(lambda: kalshi_dataset(args.data), levers)]
        if not args.no_synthetic:
            runs.append(
                (
                    lambda: synthetic_dataset(args.synthetic_ticks, args.synthetic_symbol_days),
                    synthetic_levers,
                )
            )
        for i, (make, dataset_levers) in enumerate(runs):
            outcomes.append(
                run_dataset(
                    make(),
                    fresh_dir(workdir / f"set{i}"),
                    samples=args.samples,
                    seed=args.seed,
                    levers=dataset_levers,
                    skip=set(args.skip),
                )
            )
        if not args.no_versions:
            section = archive_versions.run(
                fresh_dir(workdir / "versions"), symbols=20, versions=100, per_day=200, repeats=15
            )
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    out = [size_table(o) for o in outcomes]
    out += [read_table(outcomes, args.samples), bars(outcomes)]
    out += [] if args.no_versions else [section]
    print("\n\n".join(out))
    log(f"total {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

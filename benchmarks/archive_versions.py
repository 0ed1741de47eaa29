"""The versions section of the archive benchmark (``archive_tiers.py`` prints it; it runs alone
with the project's own dependencies: ``python benchmarks/archive_versions.py``).

One month of sample-shaped ticks (``--symbols`` markets trading every day, a few hundred ticks a
symbol-day) is compacted into an archive with ``--versions`` versions: the first holds every
symbol-day, each later one recompacts 1% of the symbol-days with changed ticks (a correction),
committed by the project's ``compact.commit_compaction``. The anchor is the same current
state without its version store (the unversioned archive). Printed side by side:

- the current query (``SELECT count(*), sum(price) FROM ticks WHERE symbol = ? AND date BETWEEN
  ? AND ?`` through ``query.run_query``: the view built, its files verified, the query run) on
  the unversioned and on the versioned archive, and the same query as of the middle version;
  medians over ``--repeats`` rounds in which the three take turns, after one warm-up round.
  Bars: current within 1.1x, as-of within 1.5x of the unversioned archive's current query;
- the bytes the version store adds over the current state (files only it holds: hot files kept
  under their content names and not linked from the hot tier, snapshots, records, index) as a
  ratio of the current state's bytes;
- as-of lookup time (``VersionLog.resolve_as_of`` by time, by number) at 100 and at 10,000
  versions; the 10,000 are the archive's own records and index extended in their format (the
  lookup reads nothing else). Bar: growth under 2x.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import commit_compaction, compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query
from skewtape_pipeline.ticks.archive.store import version_files as files_module
from skewtape_pipeline.ticks.archive.store import version_recording as recording_module
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema

FIRST_DAY = date(2026, 11, 1)
DAYS = 30
QUERY = "SELECT count(*), sum(price) FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ?"
CURRENT_BAR, AS_OF_BAR, LOOKUP_BAR = 1.1, 1.5, 2.0
POLICY = TierPolicy()


def day_ticks(symbol: int, day: date, revision: int, per_day: int) -> TickBatch:
    """``per_day`` ticks of market ``symbol`` on ``day`` (deterministic; ``revision`` shifts
    every price, as a correction would)."""
    start = int(datetime(day.year, day.month, day.day, tzinfo=UTC).timestamp()) * 10**9
    ts = [start + 3_600 * 10**9 + 250_000_000 * i for i in range(per_day)]
    price = [1 + (symbol * 7 + i * 13 + revision) % 99 for i in range(per_day)]
    quantity = [1 + (i * symbol) % 40 for i in range(per_day)]
    side = [i % 2 for i in range(per_day)]
    return TickBatch.from_units(ts, price, quantity, side, TickSchema(price_scale=2))


def core_of(root: Path) -> ArchiveCore:
    """The core of the benchmark's archive at ``root`` (not audited)."""
    return Archive(root, policy=POLICY, audit_log=None).core


def compact(root: Path, symbol: int, day: date, revision: int, per_day: int) -> None:
    compact_symbol_day(
        core_of(root),
        day_ticks(symbol, day, revision, per_day),
        SymbolDayWrite(symbol=f"MKT-{symbol:03d}", day=day, age_days=0),
    )


def build(root: Path, *, symbols: int, versions: int, per_day: int) -> int:
    """The versioned archive; returns its symbol-days changed per version."""
    keys = [(s, FIRST_DAY + timedelta(days=d)) for s in range(symbols) for d in range(DAYS)]
    for symbol, day in keys:
        compact(root, symbol, day, 0, per_day)
    commit_compaction(core_of(root))
    per_version = max(1, len(keys) // 100)
    for number in range(1, versions):
        for offset in range(per_version):
            symbol, day = keys[(number * per_version + offset) * 7919 % len(keys)]
            compact(root, symbol, day, number, per_day)
        commit_compaction(core_of(root))
    return per_version


def median_seconds(action: Callable[[], object], repeats: int) -> float:
    return interleaved_medians([action], repeats)[0]


def interleaved_medians(actions: list[Callable[[], object]], repeats: int) -> list[float]:
    """Median seconds of each action over ``repeats`` rounds, the actions taking turns within
    a round (so a busy machine slows them alike), after one warm-up round (caches filled,
    files verified once)."""
    times: list[list[float]] = [[] for _ in actions]
    for round_ in range(repeats + 1):
        for action, kept in zip(actions, times, strict=True):
            started = time.perf_counter()
            action()
            if round_:
                kept.append(time.perf_counter() - started)
    return [statistics.median(kept) for kept in times]


def store_only_bytes(root: Path) -> int:
    """Bytes of the version store no current file shares (links to live hot files excluded)."""
    total = 0
    for path in VersionLog(root).directory.rglob("*"):
        if path.is_file():
            st = path.stat()
            total += st.st_size if st.st_nlink == 1 else 0
    return total


def current_bytes(root: Path) -> int:
    return sum(p.stat().st_size for p in root.glob("symbol=*/**/*.parquet"))


def extend_versions(root: Path, to: int) -> None:
    """Append versions in the log's own format (the latest record renumbered, later times)."""
    log = VersionLog(root)
    count = log.count()
    latest = log.read(count)
    for number in range(count + 1, to + 1):
        record = recording_module._dumps(
            files_module.Version(**{**latest.__dict__, "version": number}).to_dict()
        )
        path = log.record_path(number)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(record)
        recording_module._append_index(root, number - 1, latest.time_ns + number * 1_000_000)


def lookup_seconds(root: Path, repeats: int) -> tuple[float, float]:
    """Median seconds of resolving a time and a number (spread over the versions)."""
    log = VersionLog(root)
    count = log.count()
    with open(log.directory / files_module.INDEX_FILE, "rb") as handle:
        times = [files_module.indexed_time(handle, n) for n in range(1, count + 1)]
    probes = [1 + (i * 7919) % count for i in range(200)]
    moments = [datetime.fromtimestamp(times[p - 1] / 1e9, UTC) for p in probes]

    def by_time() -> None:
        for moment in moments:
            log.resolve_as_of(moment)

    def by_number() -> None:
        for number in probes:
            log.resolve_as_of(number)

    scale = 1 / len(probes)
    return median_seconds(by_time, repeats) * scale, median_seconds(by_number, repeats) * scale


def run(workdir: Path, *, symbols: int, versions: int, per_day: int, repeats: int) -> str:
    """Build, measure, and return the section's markdown."""
    versioned = workdir / "versioned" / "archive"
    started = time.perf_counter()
    per_version = build(versioned, symbols=symbols, versions=versions, per_day=per_day)
    built = time.perf_counter() - started
    plain = workdir / "plain" / "archive"
    shutil.copytree(versioned.parent, plain.parent)
    shutil.rmtree(VersionLog(plain).directory)
    middle = versions // 2
    params = ["MKT-001", FIRST_DAY, FIRST_DAY + timedelta(days=DAYS - 1)]
    assert run_query(QUERY, ArchiveCore(plain), QueryOptions(parameters=params)) == run_query(
        QUERY, ArchiveCore(versioned), QueryOptions(parameters=params)
    )
    unversioned, current, as_of = interleaved_medians(
        [
            lambda: run_query(QUERY, ArchiveCore(plain), QueryOptions(parameters=params)),
            lambda: run_query(QUERY, ArchiveCore(versioned), QueryOptions(parameters=params)),
            lambda: run_query(
                QUERY, ArchiveCore(versioned), QueryOptions(parameters=params, as_of=middle)
            ),
        ],
        repeats,
    )
    added = store_only_bytes(versioned)
    state = current_bytes(versioned)
    lookups_100 = lookup_seconds(versioned, repeats)
    extend_versions(versioned, 10_000)
    lookups_10k = lookup_seconds(versioned, repeats)
    growth = max(b / a for a, b in zip(lookups_100, lookups_10k, strict=True))
    rows = [
        ("current query, unversioned archive (anchor)", f"{unversioned * 1e3:.1f} ms", "1.000x"),
        ("current query, versioned", f"{current * 1e3:.1f} ms", f"{current / unversioned:.3f}x"),
        (
            f"as-of query (version {middle} of {versions})",
            f"{as_of * 1e3:.1f} ms",
            f"{as_of / unversioned:.3f}x",
        ),
    ]
    lines = [
        f"### Versions ({symbols} markets x {DAYS} days, {per_day} ticks a symbol-day, "
        f"{versions} versions, {per_version} symbol-days changed per version; built in "
        f"{built:.0f} s)",
        "",
        "| query | median | vs anchor |",
        "|---|---:|---:|",
        *(f"| {a} | {b} | {c} |" for a, b, c in rows),
        "",
        f"- bytes the {versions} versions add over the current state: {added:,} over "
        f"{state:,} = {added / state:.3f}x",
        f"- as-of lookup by time: {lookups_100[0] * 1e6:.1f} us at {versions} versions, "
        f"{lookups_10k[0] * 1e6:.1f} us at 10,000; by number: {lookups_100[1] * 1e6:.1f} us, "
        f"{lookups_10k[1] * 1e6:.1f} us",
        verdict("current query within", current / unversioned, CURRENT_BAR),
        verdict("as-of query within", as_of / unversioned, AS_OF_BAR),
        verdict(f"lookup growth {versions} -> 10,000 versions under", growth, LOOKUP_BAR),
    ]
    return "\n".join(lines)


def verdict(what: str, value: float, bar: float) -> str:
    return f"- {'PASS' if value <= bar else 'FAIL'}: {what} {bar}x ({value:.3f}x)"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workdir", type=Path, default=None, help="scratch (default /dev/shm)")
    parser.add_argument("--symbols", type=int, default=20)
    parser.add_argument("--versions", type=int, default=100)
    parser.add_argument("--ticks-per-day", type=int, default=200)
    parser.add_argument("--repeats", type=int, default=15)
    args = parser.parse_args(argv)
    parent = args.workdir
    if parent is None and Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK):
        parent = Path("/dev/shm")
    workdir = Path(tempfile.mkdtemp(prefix="archive-versions-", dir=parent))
    try:
        print(
            run(
                workdir,
                symbols=args.symbols,
                versions=args.versions,
                per_day=args.ticks_per_day,
                repeats=args.repeats,
            )
        )
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

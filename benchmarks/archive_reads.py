"""Reads and writes that cost what they touch: our archive against ArcticDB and the pyarrow floor.

Sections (each printed as a markdown table):

1. **Reads.** The same synthetic ticks (``--symbols`` x ``--days`` x ``--ticks``; default 50 x 20
   x 20,000) loaded day by day (one compaction and one version per day) into our archive and
   into ArcticDB on LMDB (one symbol per instrument, ``ts`` as the index, a day appended per
   write), then one symbol-day corrected (a new version in both). Four queries: (a) one symbol,
   all days (ts, price, quantity, side); (b) all symbols, one day (+ symbol); (c) one symbol,
   one day, ts + price; (d) (c) as of the version before the correction. Ours is
   ``Archive.read`` (``read_batch`` for (b)) on a handle opened once, ArcticDB ``read`` /
   ``read_batch`` on a library opened once (pandas frames, its default; and again asking for
   Arrow tables with strings as dictionaries, the type ours returns ``side`` as), the floor
   ``pyarrow.parquet`` reading exactly the needed files (and row groups) and columns (``side``
   as a dictionary too), paths worked out beforehand. Hot, then re-tiered into one cold
   yearly file. Warm cache, the contenders alternating, best of ``--repeat``.
2. **Scaling.** A one-symbol-day read with ``--small-files`` and 100 times as many small hot
   files in the archive (the ratio is the bar: at most 1.2x); compacting one venue-day into an
   empty archive and into the larger one (at most 1.1x).
3. **Backfill.** ``--venue-days`` venue-days written one per call (as Dagster runs them: the
   handle built anew, the symbol-days compacted, a version committed), the time per venue-day
   at the start and at the end.

``--quick`` runs a small smoke version of every section in about a minute.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import date, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline.hashing import RACY_WINDOW_NS
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite

sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_util import markdown_table

from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import (
    commit_compaction,
    compact_symbol_day,
)
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.validate import day_start_ns

FIRST_DAY = date(2026, 3, 2)
SIDES = np.array(["buy", "sell"])
COLUMNS_A = ["ts", "price", "quantity", "side"]
SIDE = ["side"]
"""Read as a dictionary by the floor, as ours returns it."""
COLUMNS_B = ["symbol", "ts", "price", "quantity", "side"]
COLUMNS_C = ["ts", "price"]


def symbol_name(i: int) -> str:
    return f"SYM{i:03d}"


def day_batch(seed: int, day: date, ticks: int, variant: int = 0) -> TickBatch:
    """``ticks`` sorted synthetic trades of one symbol-day (prices a random walk, scale 2)."""
    rng = np.random.default_rng(seed)
    start = day_start_ns(day) + 8 * 3600 * 10**9
    steps = rng.integers(1, 2 * 8 * 3600 * 10**9 // ticks, ticks)
    ts = start + np.cumsum(steps)
    price = 10_000 + np.cumsum(rng.integers(-3, 4, ticks)) + 7 * variant
    quantity = rng.integers(1, 500, ticks)
    side = rng.integers(0, 2, ticks).astype(np.int8)
    return TickBatch.from_units(
        pa.array(ts), pa.array(price), pa.array(quantity), pa.array(side), TickSchema(price_scale=2)
    )


# --- building ------------------------------------------------------------------------------------


def load_ours(root: Path, symbols: int, days: int, ticks: int) -> dict[str, object]:
    """Load day by day (one version per day), then correct one symbol-day; facts for the
    queries."""
    archive = Archive(root, audit_log=None)
    for d in range(days):
        day = FIRST_DAY + timedelta(days=d)
        for s in range(symbols):
            compact_symbol_day(
                archive.core,
                day_batch(s * 1000 + d, day, ticks),
                SymbolDayWrite(symbol=symbol_name(s), day=day, age_days=0),
            )
        commit_compaction(archive.core)
    before = archive.core.versions.count()
    corrected = (symbol_name(0), FIRST_DAY + timedelta(days=min(3, days - 1)))
    compact_symbol_day(
        archive.core,
        day_batch(3, corrected[1], ticks, variant=1),
        SymbolDayWrite(symbol=corrected[0], day=corrected[1], age_days=0),
    )
    commit_compaction(archive.core)
    return {"before": before, "corrected": corrected}


def load_arctic(store: Path, symbols: int, days: int, ticks: int, corrected) -> dict[str, int]:
    import arcticdb
    import pandas as pd

    arctic = arcticdb.Arctic(f"lmdb://{store}?map_size=32GB")
    library = arctic.get_library("ticks", create_if_missing=True)

    def frame(batch: TickBatch) -> pd.DataFrame:
        index = pd.DatetimeIndex(batch.ts_ns.to_numpy().view("datetime64[ns]"), name="ts")
        return pd.DataFrame(
            {
                "price": batch.price.to_numpy() / 100,
                "quantity": batch.quantity.to_numpy(),
                "side": SIDES[batch.side.to_numpy()],
            },
            index=index,
        )

    for d in range(days):
        day = FIRST_DAY + timedelta(days=d)
        for s in range(symbols):
            data = frame(day_batch(s * 1000 + d, day, ticks))
            if d == 0:
                library.write(symbol_name(s), data)
            else:
                library.append(symbol_name(s), data)
    symbol, day = corrected
    versions = {"before": library.read_metadata(symbol).version}
    library.update(symbol, frame(day_batch(3, day, ticks, variant=1)))
    return versions


# --- the contenders ------------------------------------------------------------------------------


def ours_queries(root: Path, facts, symbols: int, days: int) -> dict[str, Callable[[], int]]:
    archive = Archive(root, audit_log=None)
    one, day = symbol_name(0), FIRST_DAY + timedelta(days=days // 2)
    sym_c, day_c = facts["corrected"]
    names = [symbol_name(s) for s in range(symbols)]
    return {
        "a": lambda: archive.read([one], columns=COLUMNS_A).num_rows,
        "b": lambda: sum(
            t.num_rows
            for t in archive.read_batch(names, start=day, end=day, columns=COLUMNS_B).values()
        ),
        "c": lambda: archive.read([sym_c], start=day_c, end=day_c, columns=COLUMNS_C).num_rows,
        "d": lambda: (
            archive.read(
                [sym_c], start=day_c, end=day_c, columns=COLUMNS_C, as_of=facts["before"]
            ).num_rows
        ),
    }


def arctic_queries(store: Path, versions, facts, symbols: int, days: int, arrow: bool = False):
    """ArcticDB's reads of the four queries: pandas frames as a user gets them by default, or
    with ``arrow`` Arrow tables whose strings are dictionaries (the type ours returns ``side``
    as)."""
    import arcticdb
    import pandas as pd
    from arcticdb.options import ArrowOutputStringFormat

    library = arcticdb.Arctic(f"lmdb://{store}?map_size=32GB").get_library("ticks")
    out = {}
    if arrow:
        out = {"output_format": "pyarrow",
               "arrow_string_format_default": ArrowOutputStringFormat.CATEGORICAL}  # fmt: skip
    one, day = symbol_name(0), FIRST_DAY + timedelta(days=days // 2)
    sym_c, day_c = facts["corrected"]

    def span(d: date) -> tuple[pd.Timestamp, pd.Timestamp]:
        start = pd.Timestamp(d)
        return start, start + pd.Timedelta(days=1) - pd.Timedelta(1, "ns")

    names = [symbol_name(s) for s in range(symbols)]
    return {
        "a": lambda: _rows(library.read(one, columns=["price", "quantity", "side"], **out).data),
        "b": lambda: sum(
            _rows(item.data)
            for item in library.read_batch(
                [arcticdb.ReadRequest(n, date_range=span(day)) for n in names], **out
            )
        ),
        "c": lambda: _rows(
            library.read(sym_c, date_range=span(day_c), columns=["price"], **out).data
        ),
        "d": lambda: _rows(
            library.read(
                sym_c, date_range=span(day_c), columns=["price"], as_of=versions["before"], **out
            ).data
        ),
    }


def _rows(data) -> int:
    """Rows of a pandas frame or an Arrow table."""
    return data.num_rows if isinstance(data, pa.Table) else len(data)


def floor_queries(root: Path, facts, symbols: int, days: int):
    """``pyarrow.parquet`` reading exactly the files (row groups) and columns each query needs,
    located beforehand from the archive (as a reader that knew them would)."""
    archive = Archive(root, audit_log=None)
    one, day = symbol_name(0), FIRST_DAY + timedelta(days=days // 2)
    sym_c, day_c = facts["corrected"]

    def plan(symbols_: list[str], first: date | None, last: date | None, as_of=None):
        snapshot = archive.reader.snapshot(as_of)
        out = []
        for s in symbols_:
            for piece in snapshot.pieces(archive.tiers, s, first, last):
                out.append(piece)
        return out

    def reader(pieces, columns):
        stored = [c for c in columns if c in ("ts", "price", "quantity", "side")]
        by_file: dict[str, list] = {}
        for piece in pieces:
            by_file.setdefault(str(piece.file), []).append(piece)
        jobs = []
        for path, chosen in by_file.items():
            if chosen[0].rows is None:
                jobs.append((path, None))
            else:
                meta = pq.read_metadata(path)
                starts = np.cumsum(
                    [0] + [meta.row_group(g).num_rows for g in range(meta.num_row_groups)]
                )
                groups = sorted(
                    {g for p in chosen for g in range(meta.num_row_groups)
                     if starts[g] < p.rows[0] + p.rows[1] and starts[g + 1] > p.rows[0]}
                )  # fmt: skip
                jobs.append((path, groups))

        def run() -> int:
            n = 0
            for path, groups in jobs:
                if groups is None:
                    n += pq.read_table(path, columns=stored, read_dictionary=SIDE).num_rows
                else:
                    parquet = pq.ParquetFile(path, read_dictionary=SIDE)
                    n += parquet.read_row_groups(groups, columns=stored).num_rows
            return n

        return run

    names = [symbol_name(s) for s in range(symbols)]
    return {
        "a": reader(plan([one], None, None), COLUMNS_A),
        "b": reader(plan(names, day, day), COLUMNS_B),
        "c": reader(plan([sym_c], day_c, day_c), COLUMNS_C),
        "d": reader(plan([sym_c], day_c, day_c, facts["before"]), COLUMNS_C),
    }


def best_of_alternating(
    contenders: dict[str, dict[str, Callable[[], int]]], repeat: int
) -> dict[str, dict[str, tuple[float, int]]]:
    """``{query: {contender: (best seconds, rows)}}``, each round running every contender once."""
    out: dict[str, dict[str, tuple[float, int]]] = {}
    queries = sorted({q for c in contenders.values() for q in c})
    for query in queries:
        best: dict[str, tuple[float, int]] = {}
        for _ in range(repeat):
            for name, fns in contenders.items():
                if query not in fns:
                    continue
                start = time.perf_counter()
                rows = fns[query]()
                seconds = time.perf_counter() - start
                if name not in best or seconds < best[name][0]:
                    best[name] = (seconds, rows)
        out[query] = best
    return out


ARCTIC, ARCTIC_ARROW, FLOOR = "ArcticDB", "ArcticDB (Arrow)", "pyarrow floor"
"""The contenders beside ours: ArcticDB as read by default (pandas), ArcticDB asked for Arrow
tables with strings as dictionaries (what ours returns ``side`` as), the pyarrow floor."""

QUERY_NAMES = {
    "a": "(a) one symbol, all days (ts, price, quantity, side)",
    "b": "(b) all symbols, one day (+ symbol)",
    "c": "(c) one symbol, one day, ts + price",
    "d": "(d) (c) as of the version before the correction",
}


def print_reads(title: str, results) -> list[tuple[str, float, float]]:
    """Print one table of ``results``; ``[(query, ours/ArcticDB, ours/floor)]``."""
    rows, ratios = [], []
    for query, best in results.items():
        ours, rows_ours = best["ours"]
        arctic, arrow, floor = (
            best.get(name, (float("nan"), 0))[0] for name in (ARCTIC, ARCTIC_ARROW, FLOOR)
        )
        ratios.append((query, ours / arctic, ours / floor))
        rows.append(
            (
                QUERY_NAMES[query],
                f"{rows_ours:,}",
                *(f"{t * 1000:.1f} ms" for t in (ours, arctic, arrow, floor)),
                *(f"{ours / t:.2f}x" for t in (arctic, arrow, floor)),
            )
        )
    print(f"\n#### {title}\n")
    headers = ["query", "rows", "ours `Archive.read`", ARCTIC, ARCTIC_ARROW, FLOOR]
    headers += ["ours/ArcticDB", "ours/ArcticDB (Arrow)", "ours/floor"]
    print(markdown_table(headers, rows))
    return ratios


def reads_section(work: Path, args) -> None:
    root = work / "reads" / "archive"
    started = time.perf_counter()
    facts = load_ours(root, args.symbols, args.days, args.ticks)
    loaded = time.perf_counter() - started
    store = work / "reads" / "arctic"
    store.mkdir(parents=True)
    versions = load_arctic(store, args.symbols, args.days, args.ticks, facts["corrected"])
    ticks = args.symbols * args.days * args.ticks
    print(
        f"\n{ticks:,} ticks ({args.symbols} symbols x {args.days} days x {args.ticks:,}), ours "
        f"loaded in {loaded:.1f} s ({args.days} venue-days, one version each)"
    )
    settle_past_racy_window()
    contenders = {
        "ours": ours_queries(root, facts, args.symbols, args.days),
        ARCTIC: arctic_queries(store, versions, facts, args.symbols, args.days),
        ARCTIC_ARROW: arctic_queries(store, versions, facts, args.symbols, args.days, arrow=True),
        FLOOR: floor_queries(root, facts, args.symbols, args.days),
    }
    print_reads("hot (one file per symbol-day)", best_of_alternating(contenders, args.repeat))
    seconds, peak, files, moved = retier_in_child(root, FIRST_DAY + timedelta(days=args.days + 400))
    print(
        f"\nre-tiered into {files} cold file(s) in {seconds:.1f} s ({moved:,} ticks), the "
        f"re-tiering process peaking at {peak / 2**20:,.0f} MiB RSS (bar: under 1 GiB)"
    )
    settle_past_racy_window()
    contenders["ours"] = ours_queries(root, facts, args.symbols, args.days)
    contenders[FLOOR] = floor_queries(root, facts, args.symbols, args.days)
    print_reads("re-tiered to one cold yearly file", best_of_alternating(contenders, args.repeat))


def settle_past_racy_window() -> None:
    """Wait until the files just written are older than the verified-file cache's racy window
    (``hashing.RACY_WINDOW_NS``: a file hashed within it of its last write is hashed again
    on every read, as git's index does), as an archive is by the time anyone reads it; on a
    small dataset every timed round would otherwise fall inside it."""
    time.sleep(RACY_WINDOW_NS / 1e9 + 0.1)


RETIER = """
import json, resource, sys, time
from datetime import date
from pathlib import Path
from skewtape_pipeline.ticks.archive.handle import Archive
started = time.perf_counter()
result = Archive(Path(sys.argv[1]), audit_log=None).retier(as_of=date.fromisoformat(sys.argv[2]))
print(json.dumps([time.perf_counter() - started,
                  resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
                  len(result.files_written), result.metrics()["ticks_moved"]]))
"""


def retier_in_child(root: Path, as_of: date) -> tuple[float, int, int, int]:
    """(seconds, peak RSS bytes, files written, ticks moved) of re-tiering ``root`` in a child
    process (its own ``getrusage``: the peak is the re-tiering's alone)."""
    import json
    import subprocess

    project = str(Path(__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": project}
    done = subprocess.run(
        [sys.executable, "-c", RETIER, str(root), as_of.isoformat()],
        env=env, capture_output=True, text=True, check=True,
    )  # fmt: skip
    seconds, peak, files, moved = json.loads(done.stdout.strip().splitlines()[-1])
    return seconds, peak, files, moved


# --- scaling -------------------------------------------------------------------------------------


def grow(root: Path, start: int, stop: int, per_day: int, ticks: int) -> None:
    """Symbol-days ``start`` .. ``stop`` of a thin archive (``per_day`` symbols a day, ``ticks``
    ticks each), compacted a day at a time with one version per day."""
    archive = Archive(root, audit_log=None)
    i = start
    while i < stop:
        d, first = divmod(i, per_day)
        day = FIRST_DAY + timedelta(days=d)
        for s in range(first, min(per_day, first + stop - i)):
            compact_symbol_day(
                archive.core,
                day_batch(i, day, ticks),
                SymbolDayWrite(symbol=symbol_name(s), day=day, age_days=0),
            )
            i += 1
        commit_compaction(archive.core)


def one_read_time(root: Path, repeat: int) -> float:
    archive = Archive(root, audit_log=None)
    key = (symbol_name(0), FIRST_DAY)
    archive.read([key[0]], start=key[1], end=key[1], columns=COLUMNS_C)
    best = float("inf")
    for _ in range(repeat):
        start = time.perf_counter()
        archive.read([key[0]], start=key[1], end=key[1], columns=COLUMNS_C)
        best = min(best, time.perf_counter() - start)
    return best


def venue_day_time(root: Path, day: date, symbols: int, ticks: int) -> float:
    batches = [day_batch(7_000 + s, day, ticks) for s in range(symbols)]
    start = time.perf_counter()
    archive = Archive(root, audit_log=None)
    for s, batch in enumerate(batches):
        compact_symbol_day(
            archive.core, batch, SymbolDayWrite(symbol=f"VEN{s:03d}", day=day, age_days=0)
        )
    commit_compaction(archive.core)
    return time.perf_counter() - start


def scaling_section(work: Path, args) -> None:
    small, large = args.small_files, args.small_files * 100
    per_day = 1_000
    root = work / "scaling" / "archive"
    empty = work / "scaling" / "empty"
    started = time.perf_counter()
    grow(root, 0, small, per_day, args.small_ticks)
    read_small = one_read_time(root, args.repeat * 3)
    grow(root, small, large, per_day, args.small_ticks)
    grown = time.perf_counter() - started
    read_large = one_read_time(root, args.repeat * 3)
    day = FIRST_DAY + timedelta(days=large // per_day + 10)
    into_empty, into_large = [], []
    for rep in range(args.repeat):
        when = day + timedelta(days=rep)
        into_empty.append(venue_day_time(empty, when, args.symbols, args.ticks))
        into_large.append(venue_day_time(root, when, args.symbols, args.ticks))
    print(f"\n#### scaling (the larger archive grown in {grown:.0f} s)\n")
    print(
        markdown_table(
            ["measure", f"at {small:,} hot files", f"at {large:,} hot files", "ratio", "bar"],
            [
                (
                    "one symbol-day read (ts, price)",
                    f"{read_small * 1000:.2f} ms",
                    f"{read_large * 1000:.2f} ms",
                    f"{read_large / read_small:.2f}x",
                    "1.2x",
                ),
                (
                    f"compact one venue-day ({args.symbols} x {args.ticks:,} ticks)",
                    f"{min(into_empty):.3f} s (empty archive)",
                    f"{min(into_large):.3f} s",
                    f"{min(into_large) / min(into_empty):.2f}x",
                    "1.1x",
                ),
            ],
        )
    )


# --- backfill ------------------------------------------------------------------------------------


def backfill_section(work: Path, args) -> None:
    root = work / "backfill" / "archive"
    venues, symbols, ticks = 4, args.backfill_symbols, args.backfill_ticks
    times = []
    total = args.venue_days
    for i in range(total):
        venue, d = i % venues, i // venues
        day = FIRST_DAY + timedelta(days=d)
        batches = [day_batch(i * 100 + s, day, ticks) for s in range(symbols)]

        start = time.perf_counter()
        archive = Archive(root, audit_log=None)  # a fresh handle per run, as Dagster's
        for s, batch in enumerate(batches):
            compact_symbol_day(
                archive.core, batch, SymbolDayWrite(symbol=f"V{venue}S{s:03d}", day=day, age_days=0)
            )
        commit_compaction(archive.core)
        times.append(time.perf_counter() - start)
    window = max(1, min(100, total // 10))
    first, last = np.median(times[:window]), np.median(times[-window:])
    print(
        f"\n#### backfill: {total:,} venue-days of {symbols} symbol-days x {ticks} ticks "
        f"({total * symbols:,} symbol-days), one call each\n"
    )
    print(
        markdown_table(
            ["", f"first {window} venue-days", f"last {window} venue-days", "ratio"],
            [
                (
                    "median time per venue-day",
                    f"{first * 1000:.1f} ms",
                    f"{last * 1000:.1f} ms",
                    f"{last / first:.2f}x",
                )
            ],
        )
    )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run of everything")
    parser.add_argument("--symbols", type=int, default=50)
    parser.add_argument("--days", type=int, default=20)
    parser.add_argument("--ticks", type=int, default=20_000)
    parser.add_argument("--repeat", type=int, default=5, help="rounds (best kept)")
    parser.add_argument("--small-files", type=int, default=1_000)
    parser.add_argument("--small-ticks", type=int, default=20)
    parser.add_argument("--venue-days", type=int, default=2_000)
    parser.add_argument("--backfill-symbols", type=int, default=20)
    parser.add_argument("--backfill-ticks", type=int, default=200)
    parser.add_argument("--sections", default="reads,scaling,backfill")
    parser.add_argument("--work", type=Path, default=None, help="scratch folder (default: temp)")
    args = parser.parse_args(argv)
    if args.quick:
        args.symbols, args.days, args.ticks, args.repeat = 8, 5, 2_000, 3
        args.small_files, args.venue_days = 100, 120
    print(f"load: {os.getloadavg()[0]:.2f} (1 min), {os.cpu_count()} CPUs")
    scratch = Path(tempfile.mkdtemp(dir=args.work))
    try:
        sections = args.sections.split(",")
        if "reads" in sections:
            reads_section(scratch, args)
        if "scaling" in sections:
            scaling_section(scratch, args)
        if "backfill" in sections:
            backfill_section(scratch, args)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

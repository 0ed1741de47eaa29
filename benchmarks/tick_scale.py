"""Tick archive at scale: canonical CSVs of 2M, 20M and 200M synthetic ticks through
``compact-ticks`` end to end, beside pyarrow's ``read_csv`` + ``write_table`` (zstd) of the same
file where that fits in memory.

Run by ``make bench`` (as part of ``tick_compaction.py``) or alone, with the project's own
virtualenv (pyarrow only)::

    python benchmarks/tick_scale.py [--ticks 2000000,20000000,200000000] [--workdir DIR]

The synthetic file is a busy venue's day: 100 symbols interleaved in time order over one UTC
day, prices on a 0.01 grid around each symbol's level, integer sizes, BUY/SELL sides; about 42
bytes per line (the 200M file is about 7.9 GiB, written to the data folder). Each run is a fresh
child process; wall time is measured around it and max RSS read from
``resource.getrusage(RUSAGE_CHILDREN)`` of a wrapper process that runs nothing else. Both
contenders get every CPU (pyarrow's CSV reader is multithreaded; ours reads, converts and
encodes on threads), even when called from the pinned ``tick_compaction.py``. Prints a markdown
table (wall time, ticks/s, max RSS), the growth factors from one size to the next, and PASS/FAIL
for the bars of issue 18.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from itertools import pairwise
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SIZES = (2_000_000, 20_000_000, 200_000_000)
DAY_START_NS = 1_710_460_800 * 10**9  # 2024-03-15 00:00 UTC
DAY_NS = 86_400 * 10**9
GENERATE_CHUNK = 4_000_000
ANCHOR_MAX_TICKS = 50_000_000
"""Largest file the pyarrow anchor reads whole (about 9 GB of memory beyond that)."""
BAR_MAX_RSS = 3 * 2**30
BAR_GROWTH = 1.15
BAR_VS_PYARROW = 0.5
HEADER = b"timestamp_nanos,price,quantity,side,symbol\n"
SIDES = pa.array(["BUY", "SELL", "UNKNOWN"])

MEASURE = """
import json, os, resource, subprocess, sys, time
os.sched_setaffinity(0, range(os.cpu_count()))  # every CPU, even when the caller is pinned
started = time.perf_counter()
code = subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
seconds = time.perf_counter() - started
rss = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
print(json.dumps({"seconds": seconds, "max_rss": rss, "code": code.returncode,
                  "stderr": code.stderr.decode()[-2000:]}))
"""

ANCHOR = """
import sys
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
table = pa_csv.read_csv(sys.argv[1])
pq.write_table(table, sys.argv[2], compression="zstd")
"""


def _mix(index: pa.Array, salt: int) -> pa.Array:
    """A cheap reproducible pseudo-random int64 in 0 .. 2**31 - 1 for each index."""
    mixed = pc.multiply(pc.add(index, salt), 2_654_435_761)
    mixed = pc.bit_wise_xor(mixed, pc.shift_right(mixed, 13))
    mixed = pc.multiply(mixed, 1_597_334_677)
    return pc.bit_wise_and(pc.bit_wise_xor(mixed, pc.shift_right(mixed, 16)), 2**31 - 1)


def write_synthetic_csv(path: Path, ticks: int, *, symbols: int = 100) -> int:
    """Write ``ticks`` canonical CSV lines (time order, ``symbols`` interleaved); returns bytes."""
    names = pa.array([f"SYM{i:03d}" for i in range(symbols)])
    base = pa.array(range(GENERATE_CHUNK), pa.int64())
    step = DAY_NS // (ticks + 1)
    with path.open("wb") as handle:
        handle.write(HEADER)
        for start in range(0, ticks, GENERATE_CHUNK):
            count = min(GENERATE_CHUNK, ticks - start)
            index = pc.add(base.slice(0, count), start)
            mixed = _mix(index, 1)
            symbol = pc.subtract(mixed, pc.multiply(pc.divide(mixed, symbols), symbols))
            ts = pc.add(pc.multiply(index, step), DAY_START_NS)
            walk = pc.subtract(pc.bit_wise_and(_mix(index, 2), 255), 128)  # a cent grid
            cents = pc.add(pc.add(pc.multiply(symbol, 1_000), 15_015), pc.divide(walk, 8))
            price = pa.Array.from_buffers(pa.decimal64(18, 2), count, cents.buffers())
            quantity = pc.add(pc.bit_wise_and(_mix(index, 3), 511), 1)
            side = pc.take(SIDES, pc.bit_wise_and(_mix(index, 4), 1))
            table = pa.table(
                {
                    "timestamp_nanos": ts,
                    "price": price,
                    "quantity": quantity,
                    "side": side,
                    "symbol": pc.take(names, symbol),
                }
            )
            pa_csv.write_csv(
                table, handle, pa_csv.WriteOptions(include_header=False, quoting_style="none")
            )
    return path.stat().st_size


def measured(command: list[str]) -> dict:
    """Run ``command`` in a wrapper process; its wall seconds, max RSS (bytes) and exit code."""
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    done = subprocess.run(
        [sys.executable, "-c", MEASURE, *command], env=env, capture_output=True, check=True
    )
    result = json.loads(done.stdout)
    if result["code"] != 0:
        raise RuntimeError(f"{command[:4]} exited {result['code']}: {result['stderr']}")
    return result


def ours(path: Path, workdir: Path, memory_limit: str) -> dict:
    archive = workdir / "archive"
    shutil.rmtree(archive, ignore_errors=True)
    command = [sys.executable, "-m", "skewtape_pipeline.cli", "compact-ticks", str(path), "--out",
               str(archive), "--as-of", "2024-03-15", "--memory-limit", memory_limit]  # fmt: skip
    result = measured(command)
    shutil.rmtree(archive, ignore_errors=True)
    return result


def anchor(path: Path, workdir: Path) -> dict:
    target = workdir / "anchor.parquet"
    result = measured([sys.executable, "-c", ANCHOR, str(path), str(target)])
    target.unlink(missing_ok=True)
    return result


def _gb(value: float) -> str:
    return f"{value / 2**30:.2f} GiB"


def run(sizes: list[int], workdir: Path, data: Path, *, memory_limit: str, keep: bool) -> str:
    """Each size through ours and the anchor; the CSVs are written to (or found in) ``data``."""
    rows, results = [], []
    for ticks in sizes:
        path = data / f"ticks-{ticks}.csv"
        if not path.exists():
            print(f"writing {ticks:,} ticks to {path}", file=sys.stderr, flush=True)
            write_synthetic_csv(path, ticks)
        size = path.stat().st_size
        mine = ours(path, workdir, memory_limit)
        print(f"  compact-ticks {ticks:,}: {mine['seconds']:.1f} s", file=sys.stderr, flush=True)
        theirs = anchor(path, workdir) if ticks <= ANCHOR_MAX_TICKS else None
        if theirs:
            print(f"  pyarrow {ticks:,}: {theirs['seconds']:.1f} s", file=sys.stderr, flush=True)
        results.append((ticks, mine, theirs))
        rows.append(_row(ticks, size, mine, theirs))
        if not keep:
            path.unlink()
    header = (
        "| ticks | file | compact-ticks wall | ticks/s | max RSS | pyarrow read_csv + "
        "write_table wall | ticks/s | max RSS | ours/pyarrow throughput |\n"
        "|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    )
    return "\n".join([header, *rows, "", *_growth(results), "", *_bars(results)])


def _row(ticks: int, size: int, mine: dict, theirs: dict | None) -> str:
    cells = [f"{ticks:,}", _gb(size), f"{mine['seconds']:.1f} s",
             f"{ticks / mine['seconds'] / 1e6:.2f} M", _gb(mine["max_rss"])]  # fmt: skip
    if theirs:
        ratio = theirs["seconds"] / mine["seconds"]
        cells += [f"{theirs['seconds']:.1f} s", f"{ticks / theirs['seconds'] / 1e6:.2f} M",
                  _gb(theirs["max_rss"]), f"{ratio:.2f}x"]  # fmt: skip
    else:
        cells += ["(does not fit)", "", "", ""]
    return "| " + " | ".join(cells) + " |"


def _growth(results: list) -> list[str]:
    lines = []
    for (n0, a, _), (n1, b, _) in pairwise(results):
        ticks, wall = n1 / n0, b["seconds"] / a["seconds"]
        rss = b["max_rss"] / a["max_rss"]
        lines.append(
            f"- {n0:,} -> {n1:,} ticks: {ticks:.0f}x the ticks in {wall:.2f}x the time "
            f"({wall / ticks:.3f}x faster than the ticks), max RSS {rss:.2f}x"
        )
    return lines


def _bars(results: list) -> list[str]:
    lines = ["#### Bars"]
    largest = results[-1]
    rss = largest[1]["max_rss"]
    verdict = "PASS" if rss < BAR_MAX_RSS else "FAIL"
    lines.append(f"- {verdict} {largest[0]:,} ticks archive with max RSS {_gb(rss)} (bar < 3 GB)")
    for (n0, a, _), (n1, b, _) in pairwise(results):
        excess = (b["seconds"] / a["seconds"]) / (n1 / n0)
        verdict = "PASS" if excess <= BAR_GROWTH else "FAIL"
        lines.append(
            f"- {verdict} time growth {n0:,} -> {n1:,}: {excess:.3f}x the ticks' "
            f"(bar <= {BAR_GROWTH}x)"
        )
    compared = [(n, m, t) for n, m, t in results if t is not None]
    if compared:
        n, mine, theirs = max(compared, key=lambda r: r[0])
        ratio = theirs["seconds"] / mine["seconds"]
        verdict = "PASS" if ratio >= BAR_VS_PYARROW else "FAIL"
        lines.append(
            f"- {verdict} {n:,} ticks end to end at {ratio:.2f}x the throughput of pyarrow "
            f"read_csv + write_table zstd (bar >= {BAR_VS_PYARROW}x)"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", default=",".join(str(n) for n in DEFAULT_SIZES))
    parser.add_argument("--workdir", type=Path, default=None, help="scratch (default: temp)")
    parser.add_argument(
        "--data", type=Path, default=None, help="folder of ticks-N.csv (default: the workdir)"
    )
    parser.add_argument("--memory-limit", default="2G")
    parser.add_argument("--keep", action="store_true", help="keep the generated CSVs")
    args = parser.parse_args(argv)
    sizes = [int(n) for n in args.ticks.split(",")]
    if args.workdir is not None:
        args.workdir.mkdir(parents=True, exist_ok=True)
    workdir = Path(tempfile.mkdtemp(prefix="tick-scale-", dir=args.workdir))
    try:
        data = args.data or workdir
        keep = args.keep or args.data is not None
        print(run(sizes, workdir, data, memory_limit=args.memory_limit, keep=keep))
    finally:
        if not args.keep:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

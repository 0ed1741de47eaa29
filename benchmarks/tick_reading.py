"""Tick reading benchmark: our exact parsing of prices and quantities against the anchors' readers.

Run with ``make tick-reading`` (in ``.bench-venv``) or directly::

    .bench-venv/bin/python benchmarks/tick_reading.py [--ticks N] [--repeat R]

Ours reads a canonical file and scales it to a ``TickBatch``: every price and quantity parsed
exactly (decimal text and floats judged against the float-noise rule), the scales detected from the
data ("detect") or given ("scale 4"). The anchors read the same file into Arrow: pyarrow's CSV
reader and DuckDB's, letting prices be doubles (fast, and exactly what loses track of a price's
decimals), and DuckDB casting them to DECIMAL(18, 4) (exact, refusing nothing it rounds). Three
files: a float pipeline's CSV (prices computed in floats on a 0.05 grid, written at their shortest
repr: about 30% of them carry float noise), the same ticks as clean 4-decimal text, and the floats
as a float64 Parquet file. The best of ``--repeat`` runs on one pinned CPU; ticks per second.
"""

from __future__ import annotations

import argparse
import random
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import duckdb
import pyarrow as pa
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq
from bench_util import fmt_rate, markdown_table, pin_to_one_core, timed

from skewtape_pipeline.errors import SkewtapeError
from skewtape_pipeline.ticks.encode.sources import read_canonical

BASE_NS = 1_767_312_000_000_000_000


def float_walk(n: int, seed: int = 7) -> tuple[list[float], list[float]]:
    """Prices a float pipeline computes on a 0.05 grid (``100.0 + ticks * 0.05``: about 30% of
    them carry float noise) and their quantities."""
    rng = random.Random(seed)
    ticks, prices, quantities = 0, [], []
    for _ in range(n):
        ticks += rng.choice((1, -1, 1, -1, 2))
        prices.append(100.0 + ticks * 0.05)
        quantities.append(float(rng.randint(1, 500)))
    return prices, quantities


def write_files(n: int, folder: Path) -> dict[str, Path]:
    prices, quantities = float_walk(n)
    ts = [BASE_NS + i * 1_000 for i in range(n)]
    sides = ["BUY", "SELL", "UNKNOWN"] * (n // 3) + ["BUY"] * (n % 3)
    files = {
        "float pipeline CSV": folder / "float.csv",
        "4-decimal CSV": folder / "exact.csv",
        "float64 Parquet": folder / "float.parquet",
    }
    header = "timestamp_nanos,price,quantity,side\n"
    with open(files["float pipeline CSV"], "w") as out:
        out.write(header)
        out.writelines(
            f"{t},{p!r},{int(q)},{s}\n"
            for t, p, q, s in zip(ts, prices, quantities, sides, strict=True)
        )
    with open(files["4-decimal CSV"], "w") as out:
        out.write(header)
        out.writelines(
            f"{t},{p:.4f},{int(q)},{s}\n"
            for t, p, q, s in zip(ts, prices, quantities, sides, strict=True)
        )
    pq.write_table(
        pa.table({"timestamp_nanos": ts, "price": prices, "quantity": quantities, "side": sides}),
        files["float64 Parquet"],
    )
    return files


def ours(path: Path, scale: int | None) -> Callable[[], str]:
    def run() -> str:
        batch = read_canonical(path).to_batch(price_scale=scale, quantity_scale=None)
        noise = batch.price_float_noise_ticks + batch.quantity_float_noise_ticks
        return f"price scale {batch.price_scale}, {noise} noise"

    return run


def pyarrow_reader(path: Path) -> Callable[[], str]:
    def run() -> str:
        table = pq.read_table(path) if path.suffix == ".parquet" else pa_csv.read_csv(path)
        return f"price {table.schema.field('price').type}"

    return run


def duckdb_reader(path: Path, cast: str | None) -> Callable[[], str]:
    reader = "read_parquet" if path.suffix == ".parquet" else "read_csv"
    price = f"price::{cast} AS price" if cast else "price"

    def run() -> str:
        table = duckdb.sql(
            f"SELECT timestamp_nanos, {price}, quantity, side FROM {reader}('{path}')"
        ).to_arrow_table()
        return f"price {table.schema.field('price').type}"

    return run


def best_of(fn: Callable[[], str], repeat: int) -> tuple[str, float]:
    runs = []
    for _ in range(repeat):
        try:
            runs.append(timed(fn))
        except SkewtapeError as exc:
            return f"refused: {str(exc)[:60]}", 0.0
    return min(runs, key=lambda run: run[1])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=1_000_000, help="ticks per file")
    parser.add_argument("--repeat", type=int, default=3, help="runs per contender (best kept)")
    parser.add_argument("--cpu", type=int, default=None, help="CPU to pin to (default: last)")
    args = parser.parse_args(argv)
    print(pin_to_one_core(args.cpu))
    duckdb.sql("SET threads = 1")
    with tempfile.TemporaryDirectory() as scratch:
        files = write_files(args.ticks, Path(scratch))
        for title, path in files.items():
            contenders = {
                "**ours, detect**": ours(path, None),
                "**ours, scale 4**": ours(path, 4),
                "pyarrow (prices as read)": pyarrow_reader(path),
                "DuckDB (prices as read)": duckdb_reader(path, None),
                "DuckDB, DECIMAL(18, 4)": duckdb_reader(path, "DECIMAL(18, 4)"),
            }
            rows = []
            for name, fn in contenders.items():
                what, seconds = best_of(fn, args.repeat)
                rate = fmt_rate(args.ticks, seconds) if seconds else ""
                rows.append((name, rate, what))
            print(f"\n#### {title} ({args.ticks:,} ticks, {path.stat().st_size:,} bytes)\n")
            print(markdown_table(["contender", "ticks/s", "result"], rows))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

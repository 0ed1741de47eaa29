"""How the tick archive's symbol x day partitions behave at scale in Dagster (not a test).

Run: ``.venv/bin/python benchmarks/partition_scaling.py [SYMBOLS] [DAYS]`` (default 10000 x 30).
Uses a temporary SQLite instance (as ``dagster dev`` does) and prints a markdown table of the
time each operation takes: registering the symbols, listing the dynamic dimension and the whole
key space, counting it, building a one-day subset (what a UI backfill of a day selects), the
per-call cost of ``add_asset_metadata(partition_key=...)`` validation inside a one-day run, and
recording one day of materializations.
"""

import sys
import tempfile
import time
from datetime import date, timedelta

import dagster as dg
from dagster._core.definitions.partitions.partition_key_range import PartitionKeyRange

from skewtape_pipeline.orchestration.tick_partitions import SYMBOLS, symbol_key


def timed(label: str, rows: list[tuple[str, str]], fn):
    started = time.perf_counter()
    value = fn()
    rows.append((label, f"{time.perf_counter() - started:.3f}"))
    return value


def main(symbol_count: int = 10_000, day_count: int = 30) -> None:
    start = date(2026, 9, 1)
    days = dg.DailyPartitionsDefinition(
        start_date=start.isoformat(), end_date=(start + timedelta(days=day_count)).isoformat()
    )
    space = dg.MultiPartitionsDefinition(
        {"date": days, "symbol": dg.DynamicPartitionsDefinition(name=SYMBOLS)}
    )
    symbols = [symbol_key(f"kalshi:KX{n:06d}-26DEC31-T{n % 97}.5") for n in range(symbol_count)]
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as home, dg.DagsterInstance.local_temp(home) as instance:
        timed(f"register {symbol_count} symbols", rows,
              lambda: instance.add_dynamic_partitions(SYMBOLS, symbols))  # fmt: skip
        timed("list the symbol dimension", rows, lambda: instance.get_dynamic_partitions(SYMBOLS))
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            count = timed("count the key space", rows, space.get_num_partitions)
            keys = timed("list every key", rows, space.get_partition_keys)
            day = start.isoformat()
            day_range = PartitionKeyRange(f"{day}|{symbols[0]}", f"{day}|{symbols[-1]}")
            one_day = timed("keys of a one-day range (one run)", rows,
                            lambda: space.get_partition_keys_in_range(day_range))  # fmt: skip
            timed("subset of one day (a UI backfill)", rows,
                  lambda: space.empty_subset().with_partition_keys(one_day))  # fmt: skip
        rows.append(("(keys in the space)", str(count)))
        rows.append(("(keys listed)", str(len(keys))))

        @dg.asset(partitions_def=space)
        def probe(context: dg.AssetExecutionContext) -> None:
            keys = context.partition_keys
            started = time.perf_counter()
            for key in keys[:20]:
                context.add_asset_metadata({"n": 1}, partition_key=key)
            per_call = (time.perf_counter() - started) / 20
            rows.append(("add_asset_metadata per call (one-day run)", f"{per_call:.3f}"))

        timed("one-day run in process (all symbols)", rows, lambda: dg.materialize(
            [probe], instance=instance,
            tags={"dagster/asset_partition_range_start": day_range.start,
                  "dagster/asset_partition_range_end": day_range.end},
        ))  # fmt: skip
        timed("materialized partitions query", rows,
              lambda: instance.get_materialized_partitions(probe.key))  # fmt: skip
    print(f"| {symbol_count} symbols x {day_count} days | seconds |")
    print("|---|---:|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    main(*(int(arg) for arg in sys.argv[1:3]))

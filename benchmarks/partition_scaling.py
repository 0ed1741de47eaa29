"""How the tick archive's partitions behave at scale in Dagster (not a test).

Run: ``.venv/bin/python benchmarks/partition_scaling.py [SYMBOLS] [DAYS] [VENUES] [--old]``
(default 10000 x 30 x 1). Uses a temporary SQLite instance (as ``dagster dev`` does) and prints
a markdown table of the time each operation takes for the venue-day partitions (days x venues;
the symbols of a venue are not keys): registering the venues, counting and listing the key
space, building a one-day subset over every venue (what a UI backfill of a day selects), the
per-call cost of ``add_asset_metadata(partition_key=...)`` in a one-day run, and recording one
day of materializations, each carrying a table of its venue's ``SYMBOLS`` symbol-days (what the
tick archive asset records). ``--old`` measures the former days x symbols design the same way
(one-day run of 10,000 symbols: minutes).
"""

import sys
import tempfile
import time
from datetime import date, timedelta

import dagster as dg
from dagster._core.definitions.partitions.partition_key_range import PartitionKeyRange

from skewtape_pipeline.orchestration.ticks.partitions import dimension_key


def timed(label: str, rows: list[tuple[str, str]], fn):
    started = time.perf_counter()
    value = fn()
    rows.append((label, f"{time.perf_counter() - started:.3f}"))
    return value


def symbol_table(symbol_count: int) -> dg.TableMetadataValue:
    """A venue-day's metadata table of ``symbol_count`` archived symbol-days."""
    return dg.MetadataValue.table(
        [dg.TableRecord({"symbol": f"kalshi:KX{n:06d}", "tick_count": n}) for n in
         range(symbol_count)]
    )  # fmt: skip


def main(symbol_count: int = 10_000, day_count: int = 30, venue_count: int = 1, *, old=False):
    start = date(2026, 9, 1)
    days = dg.DailyPartitionsDefinition(
        start_date=start.isoformat(), end_date=(start + timedelta(days=day_count)).isoformat()
    )
    if old:
        name, dimension = "symbols", "symbol"
        keys = [dimension_key(f"kalshi:KX{n:06d}-26DEC31-T{n % 97}.5") for n in range(symbol_count)]
    else:
        name, dimension = "venues", "venue"
        keys = [dimension_key(f"venue{n:03d}") for n in range(venue_count)]
    space = dg.MultiPartitionsDefinition(
        {"date": days, dimension: dg.DynamicPartitionsDefinition(name=name)}
    )
    per_partition = 1 if old else min(symbol_count, 500)
    rows: list[tuple[str, str]] = []
    with tempfile.TemporaryDirectory() as home, dg.DagsterInstance.local_temp(home) as instance:
        timed(f"register {len(keys)} {name}", rows,
              lambda: instance.add_dynamic_partitions(name, keys))  # fmt: skip
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            count = timed("count the key space", rows, space.get_num_partitions)
            every = timed("list every key", rows, space.get_partition_keys)
            day = start.isoformat()
            day_range = PartitionKeyRange(f"{day}|{keys[0]}", f"{day}|{keys[-1]}")
            one_day = timed("keys of a one-day range (one run)", rows,
                            lambda: space.get_partition_keys_in_range(day_range))  # fmt: skip
            timed("subset of one day (a UI backfill)", rows,
                  lambda: space.empty_subset().with_partition_keys(one_day))  # fmt: skip
        rows.append(("(keys in the space)", str(count)))
        rows.append(("(keys listed)", str(len(every))))
        rows.append(("(five years of these keys)", str(1_826 * len(keys))))
        table = symbol_table(per_partition)

        @dg.asset(partitions_def=space)
        def probe(context: dg.AssetExecutionContext) -> None:
            started = time.perf_counter()
            for key in context.partition_keys:
                context.add_asset_metadata({"symbol_days": table}, partition_key=key)
            per_call = (time.perf_counter() - started) / len(context.partition_keys)
            rows.append(("add_asset_metadata per call (one-day run)", f"{per_call:.4f}"))

        timed("one-day run in process (every symbol)", rows, lambda: dg.materialize(
            [probe], instance=instance,
            tags={"dagster/asset_partition_range_start": day_range.start,
                  "dagster/asset_partition_range_end": day_range.end},
        ))  # fmt: skip
        timed("materialized partitions query", rows,
              lambda: instance.get_materialized_partitions(probe.key))  # fmt: skip
    design = "days x symbols" if old else f"days x venues ({venue_count})"
    print(f"| {design}: {symbol_count} symbols x {day_count} days | seconds |")
    print("|---|---:|")
    for label, value in rows:
        print(f"| {label} | {value} |")


if __name__ == "__main__":
    flags = {arg for arg in sys.argv[1:] if arg.startswith("--")}
    numbers = [int(arg) for arg in sys.argv[1:] if not arg.startswith("--")]
    main(*numbers[:3], old="--old" in flags)

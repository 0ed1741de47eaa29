"""Timestamp unit as archive configuration: refusal of finer timestamps, exact round trips at
us/ms/s read by DuckDB and pyarrow, one unit per archive root, consolidated files and tiers."""

from __future__ import annotations

import json
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewtape_pipeline.errors import ConfigError, PrecisionLossError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import (
    compact_source,
    compact_symbol_day,
    compact_ticks,
)
from skewtape_pipeline.ticks.archive.ops.compact_plan import CompactionRun, SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.consolidate import (
    SymbolDayRows,
    read_consolidated_file,
    write_consolidated_file,
)
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_MARKER, ensure_archive_schema
from skewtape_pipeline.ticks.archive.store.policy import COLD, TierPolicy, TierSettings
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.parquet_file import read_archive_batch, read_file_facts
from skewtape_pipeline.ticks.encode.sides import SIDE_NAMES
from skewtape_pipeline.ticks.encode.validate import day_start_ns
from skewtape_pipeline_tests.ticks.conftest import DAY, DAY_NS, TARDIS_FILE, archive_at, encoded

UNIT_NS = {"us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
PARQUET_UNIT = {"us": "microseconds", "ms": "milliseconds", "s": "milliseconds"}


def batch_at(unit: str, n: int = 30, *, start: int = DAY_NS, price_scale: int = 2) -> TickBatch:
    """``n`` sorted ticks on :data:`DAY`, every timestamp a whole number of ``unit``."""
    step = UNIT_NS[unit]
    ts = [start + step * (i * 7 // 2) for i in range(n)]  # duplicates included
    return TickBatch.from_units(
        ts,
        [9_000 + (i * 31) % 17 - 8 for i in range(n)],
        [1 + (i * 13) % 9 for i in range(n)],
        [i % 3 for i in range(n)],
        TickSchema(price_scale=price_scale),
    )


def file_listing(root: Path) -> list[str]:
    return sorted(str(p.relative_to(root)) for p in root.rglob("*"))


def duckdb_ticks(path_glob: str) -> list[tuple]:
    """``(epoch ns, price, quantity, side)`` rows as DuckDB reads them, in file order."""
    return duckdb.sql(
        f"SELECT epoch_ns(ts), price, quantity, side FROM read_parquet('{path_glob}')"
    ).fetchall()


def expected_ticks(batch: TickBatch) -> list[tuple]:
    """What DuckDB must return for ``batch`` (see :func:`duckdb_ticks`)."""
    return [
        (ts, Decimal(price).scaleb(-batch.price_scale), quantity, SIDE_NAMES[side])
        for ts, price, quantity, side in zip(
            batch.ts_ns.to_pylist(),
            batch.price.to_pylist(),
            batch.quantity.to_pylist(),
            batch.side.to_pylist(),
            strict=True,
        )
    ]


# --- refusal ----------------------------------------------------------------------------------


def test_batch_when_timestamp_finer_than_unit_refuses_naming_the_row():
    ts = [DAY_NS, DAY_NS + 2_000, DAY_NS + 2_001, DAY_NS + 3_500]
    with pytest.raises(PrecisionLossError, match=r"finer than the timestamp unit 'us'") as info:
        TickBatch.from_units(
            ts, [1] * 4, [1] * 4, [1] * 4, TickSchema(timestamp_unit="us", price_scale=0)
        )
    assert (info.value.row, info.value.field) == (2, "timestamp_nanos")
    assert str(DAY_NS + 2_001) in str(info.value)
    assert "2 such row(s)" in str(info.value)


def test_batch_when_unit_unknown_raises_config_error():
    with pytest.raises(ConfigError, match="timestamp_unit = 'minutes'"):
        batch_at("us").with_timestamp_unit("minutes")


def test_compact_symbol_day_when_timestamp_finer_than_unit_refuses_and_writes_nothing(tmp_path):
    batch = batch_at("us", 10)
    ts = batch.ts_ns.to_pylist()
    ts[6] += 1  # one nanosecond in a microsecond archive
    finer = TickBatch.from_units(
        ts, batch.price, batch.quantity, batch.side, TickSchema(price_scale=batch.price_scale)
    )
    with pytest.raises(PrecisionLossError) as info:
        compact_symbol_day(
            archive_at(tmp_path / "a", TierPolicy()).core,
            finer,
            SymbolDayWrite(symbol="S", day=DAY, age_days=1, encoding=encoded(timestamp_unit="us")),
        )
    assert info.value.row == 6
    assert not (tmp_path / "a").exists()


def test_compact_ticks_when_csv_timestamp_finer_than_unit_names_the_file_row(tmp_path):
    lines = ["timestamp_nanos,price,quantity,side"]
    lines += [f"{DAY_NS + i * 1_000_000},1.25,3,BUY" for i in range(5)]
    lines[4] = f"{DAY_NS + 3_500_000},1.25,3,SELL"  # data row 3: 3.5 ms, finer than ms
    source = tmp_path / "ticks.csv"
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    with pytest.raises(PrecisionLossError) as info:
        compact_ticks(
            archive_at(tmp_path / "a").core,
            source,
            as_of=DAY,
            encoding=encoded(timestamp_unit="ms", price_scale=2),
            run=CompactionRun(symbol="X"),
        )
    assert str(source) in str(info.value)
    assert (info.value.row, info.value.field) == (3, "timestamp_nanos")
    assert not (tmp_path / "a").exists()
    (report,) = compact_ticks(
        archive_at(tmp_path / "b").core,
        source,
        as_of=DAY,
        encoding=encoded(timestamp_unit="us", price_scale=2),
        run=CompactionRun(symbol="X"),
    )
    assert report.timestamp_unit == "us"


# --- round trips ------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", ["us", "ms", "s"])
def test_compact_symbol_day_when_unit_coarser_round_trips_through_duckdb_and_pyarrow(
    tmp_path, unit
):
    batch = batch_at(unit)
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        batch,
        SymbolDayWrite(symbol="S", day=DAY, age_days=1, encoding=encoded(timestamp_unit=unit)),
    )
    path = Path(report.path)
    assert report.timestamp_unit == unit == read_file_facts(path).timestamp_unit
    ts_column = pq.ParquetFile(path).schema.column(0)
    logical = json.loads(ts_column.logical_type.to_json())
    assert (logical["timeUnit"], logical["isAdjustedToUTC"]) == (PARQUET_UNIT[unit], True)
    assert read_archive_batch(path).equals(batch.with_timestamp_unit(unit))
    assert duckdb_ticks(str(path)) == expected_ticks(batch)
    table = pq.read_table(path)
    assert table.schema.field("ts").type == pa.timestamp("ms" if unit == "s" else unit, "UTC")
    assert table.column("ts").cast(pa.timestamp("ns", "UTC")).cast(pa.int64()).to_pylist() == (
        batch.ts_ns.to_pylist()
    )


def test_tardis_file_when_compacted_at_ms_reads_back_exactly_with_duckdb(tmp_path):
    source = sources.read_tardis_trades(TARDIS_FILE)
    at_ns = source.to_batch(price_scale=2, quantity_scale=3)
    (report,) = compact_ticks_source(source, tmp_path / "ms", timestamp_unit="ms")
    assert report.timestamp_unit == "ms"
    rows = duckdb.sql(
        f"SELECT epoch_ns(ts) FROM read_parquet('{tmp_path}/ms/**/*.parquet', "
        "hive_partitioning=true) ORDER BY ALL"
    ).fetchall()
    assert [r[0] for r in rows] == sorted(at_ns.ts_ns.to_pylist())
    capture = sources.read_tardis_trades(TARDIS_FILE, timestamp="local")
    with pytest.raises(PrecisionLossError):  # the capture time is true microseconds
        compact_ticks_source(capture, tmp_path / "local", timestamp_unit="ms")
    assert not (tmp_path / "local").exists()


def compact_ticks_source(source, out: Path, *, timestamp_unit: str):
    return compact_source(
        archive_at(out).core,
        source,
        as_of=date(2026, 11, 29),
        encoding=encoded(timestamp_unit=timestamp_unit, price_scale=2, quantity_scale=3),
    )


# --- one unit per archive root ----------------------------------------------------------------


def test_compact_symbol_day_when_archive_holds_another_unit_refuses_and_writes_nothing(tmp_path):
    compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        batch_at("ms"),
        SymbolDayWrite(symbol="A", day=DAY, age_days=1, encoding=encoded(timestamp_unit="ms")),
    )
    marker = json.loads((tmp_path / ARCHIVE_MARKER).read_text())
    assert marker["timestamp_unit"] == "ms"
    before = file_listing(tmp_path)
    with pytest.raises(ConfigError, match="timestamp_unit 'ms'"):
        compact_symbol_day(
            archive_at(tmp_path, TierPolicy()).core,
            batch_at("ms"),
            SymbolDayWrite(symbol="B", day=DAY, age_days=1),
        )
    assert file_listing(tmp_path) == before
    rows = duckdb.sql(
        f"SELECT count(*) FROM read_parquet('{tmp_path}/**/*.parquet', hive_partitioning=true)"
    ).fetchall()
    assert rows == [(30,)]


def test_ensure_archive_schema_when_marker_predates_units_means_ns(tmp_path):
    legacy = {"format": "skewtape-ticks", "format_version": "1", "price_scale": 2,
              "quantity_scale": 0}  # fmt: skip
    (tmp_path / ARCHIVE_MARKER).write_text(json.dumps(legacy), encoding="utf-8")
    ensure_archive_schema(tmp_path, price_scale=2, quantity_scale=0)
    with pytest.raises(ConfigError, match="timestamp_unit 'ns'"):
        ensure_archive_schema(tmp_path, price_scale=2, quantity_scale=0, timestamp_unit="us")


# --- consolidated files and tiers -------------------------------------------------------------


def test_consolidated_file_when_units_us_round_trips_and_duckdb_reads_it(tmp_path):
    parts = [SymbolDayRows("A", DAY, batch_at("us").with_timestamp_unit("us")),
             SymbolDayRows("B", DAY, batch_at("us", 5).with_timestamp_unit("us"))]  # fmt: skip
    written = write_consolidated_file(parts, tmp_path, settings=TierSettings(), metadata={})
    assert written.facts.timestamp_unit == "us"
    back = read_consolidated_file(written.path)
    assert [p.batch.timestamp_unit for p in back] == ["us", "us"]
    assert all(p.batch.equals(q.batch) for p, q in zip(parts, back, strict=True))
    rows = duckdb_ticks(str(written.path))
    assert rows == expected_ticks(parts[0].batch) + expected_ticks(parts[1].batch)


def test_consolidated_file_when_parts_mix_units_refuses(tmp_path):
    parts = [SymbolDayRows("A", DAY, batch_at("us").with_timestamp_unit("us")),
             SymbolDayRows("B", DAY, batch_at("us"))]  # fmt: skip
    with pytest.raises(ConfigError, match="timestamp units"):
        write_consolidated_file(parts, tmp_path, settings=TierSettings(), metadata={})
    assert list(tmp_path.iterdir()) == []


def test_retier_when_archive_unit_is_ms_keeps_the_unit_in_every_tier(tmp_path):
    policy = TierPolicy(hot_max_age_days=1, warm_max_age_days=2)
    root = tmp_path / "archive"
    days = [DAY - timedelta(days=k) for k in (0, 2, 5)]
    batches = {}
    for day in days:
        batches[day] = batch_at("ms", 12, start=day_start_ns(day))
        compact_symbol_day(
            archive_at(root, policy).core,
            batches[day],
            SymbolDayWrite(
                symbol="KX",
                day=day,
                age_days=(DAY - day).days,
                encoding=encoded(timestamp_unit="ms"),
            ),
        )
    Archive(root, policy=policy, audit_log=None).retier(as_of=DAY)
    cold_marker = json.loads((policy.root_for(COLD, root) / ARCHIVE_MARKER).read_text())
    assert cold_marker["timestamp_unit"] == "ms"
    table = run_query("SELECT epoch_ns(ts) AS ns, tier FROM ticks ORDER BY ns", ArchiveCore(root))
    assert table.column("ns").to_pylist() == sorted(
        ts for b in batches.values() for ts in b.ts_ns.to_pylist()
    )
    assert set(table.column("tier").to_pylist()) == {"HOT", "WARM", "COLD"}


@settings(
    max_examples=20, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(
    unit=st.sampled_from(["us", "ms", "s"]),
    whole_units=st.lists(st.integers(0, 86_399_999_999), min_size=1, max_size=40),
    sides=st.lists(st.integers(0, 2), min_size=40, max_size=40),
)
def test_round_trip_property_when_timestamps_are_whole_units_reads_back_exactly(
    tmp_path, unit, whole_units, sides
):
    step = UNIT_NS[unit]
    ts = sorted(DAY_NS + (w * 1_000 % (86_400 * 10**9)) // step * step for w in whole_units)
    n = len(ts)
    batch = TickBatch.from_units(ts, list(range(n)), [1] * n, sides[:n], TickSchema(price_scale=2))
    root = tmp_path / unit  # one root holds one unit
    report = compact_symbol_day(
        archive_at(root, TierPolicy()).core,
        batch,
        SymbolDayWrite(symbol="P", day=DAY, age_days=0, encoding=encoded(timestamp_unit=unit)),
    )
    assert report.timestamp_unit == unit
    assert read_archive_batch(Path(report.path)).equals(batch.with_timestamp_unit(unit))
    assert duckdb_ticks(report.path) == expected_ticks(batch)

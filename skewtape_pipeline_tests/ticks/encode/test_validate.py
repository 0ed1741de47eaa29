"""Batch validation: order, signs, side codes, day bounds; each failure names the row."""

from __future__ import annotations

from datetime import date

import duckdb
import pyarrow as pa
import pytest

from skewtape_pipeline.errors import TickValidationError
from skewtape_pipeline.ticks.archive.ops.compact import compact_ticks
from skewtape_pipeline.ticks.archive.ops.compact_plan import CompactionRun
from skewtape_pipeline.ticks.encode.validate import (
    MAX_FINITE_TS_NS,
    MIN_FINITE_TS_NS,
    check_within_day,
    day_of_ns,
    day_start_ns,
    is_sorted,
    validate_batch,
)
from skewtape_pipeline_tests.ticks.conftest import DAY, DAY_NS, archive_at, encoded, make_batch


def test_validate_when_duplicates_negative_prices_and_zero_quantity_passes():
    batch = make_batch([(5, -376_300, 0, 0), (5, 7_123_456_789, 10**10, 1), (6, 1, 1, 2)])
    validate_batch(batch)
    assert is_sorted(batch)


def test_validate_when_timestamp_goes_backwards_names_row_and_values():
    batch = make_batch([(5, 1, 1, 1), (7, 1, 1, 1), (6, 1, 1, 1), (4, 1, 1, 1)])
    with pytest.raises(TickValidationError) as info:
        validate_batch(batch)
    assert (info.value.row, info.value.field) == (2, "timestamp_nanos")
    assert "6" in str(info.value) and "7" in str(info.value)
    assert not is_sorted(batch)


def test_validate_when_quantity_negative_names_row():
    with pytest.raises(TickValidationError) as info:
        validate_batch(make_batch([(1, 1, 1, 1), (2, 1, -3, 1)]))
    assert (info.value.row, info.value.field) == (1, "quantity")


def test_validate_when_quantity_negative_quotes_it_as_the_input_wrote_it():
    with pytest.raises(TickValidationError, match=r"quantity -0\.1 is negative"):
        validate_batch(make_batch([(1, 1, -1, 1)], quantity_scale=1))  # -0.1, not "-1 (scale 1)"
    with pytest.raises(TickValidationError, match=r"quantity -0\.00000001 is negative"):
        validate_batch(make_batch([(1, 1, -1, 1)], quantity_scale=8))  # not -1E-8


def test_validate_when_side_code_out_of_range_names_row():
    with pytest.raises(TickValidationError) as info:
        validate_batch(make_batch([(1, 1, 1, 3)]))
    assert (info.value.row, info.value.field) == (0, "side")


def test_validate_when_price_beyond_18_digits_names_row():
    with pytest.raises(TickValidationError, match="18 digits") as info:
        validate_batch(make_batch([(1, 1, 1, 1), (2, 10**18, 1, 1)]))
    assert info.value.row == 1


def test_validate_when_empty_or_single_row_passes():
    validate_batch(make_batch([]))
    validate_batch(make_batch([(1, 1, 1, 1)]))


def test_check_within_day_when_tick_on_next_day_names_row():
    end = DAY_NS + 86_400 * 10**9
    check_within_day(make_batch([(DAY_NS, 1, 1, 1), (end - 1, 1, 1, 1)]), DAY)
    with pytest.raises(TickValidationError, match="2026-11-21") as info:
        check_within_day(make_batch([(DAY_NS, 1, 1, 1), (end, 1, 1, 1)]), DAY)
    assert info.value.row == 1


def test_day_helpers_when_negative_timestamps_floor_to_previous_day():
    assert day_of_ns(-1) == date(1969, 12, 31)
    assert day_start_ns(date(1970, 1, 2)) == 86_400 * 10**9
    assert day_of_ns(day_start_ns(DAY)) == DAY


def csv_of_times(path, times: list[int]):
    lines = ["timestamp_nanos,price,quantity,side"] + [f"{ts},1.25,3,BUY" for ts in times]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


DUCKDB_SHOWS = {
    2**63 - 1: "infinity",
    -(2**63 - 1): "-infinity",
    -(2**63): "1677-09-21 00:12:43.145224192+00",  # before test_all_types()'s earliest value
}


@pytest.mark.parametrize("edge", list(DUCKDB_SHOWS))
def test_compact_ticks_when_time_is_infinite_to_duckdb_refuses_naming_the_row(tmp_path, edge):
    """DuckDB reads the int64 edges as infinity/-infinity (epoch_ns NULL), and INT64_MIN lies
    before its earliest TIMESTAMP_NS: never archived."""
    edge_table = pa.table({"ts": pa.array([edge], pa.timestamp("ns", "UTC"))})
    shown = duckdb.from_arrow(edge_table).project("ts::VARCHAR").fetchall()
    assert shown == [(DUCKDB_SHOWS[edge],)]
    day_neighbour = MAX_FINITE_TS_NS if edge > 0 else MIN_FINITE_TS_NS
    source = csv_of_times(tmp_path / "ticks.csv", sorted([day_neighbour, edge]))
    with pytest.raises(TickValidationError, match="not a finite time") as info:
        compact_ticks(
            archive_at(tmp_path / "a").core,
            source,
            as_of=date(2262, 4, 12),
            encoding=encoded(price_scale=2),
            run=CompactionRun(symbol="X"),
        )
    assert (info.value.row, info.value.field) == (sorted([day_neighbour, edge]).index(edge),
                                                  "timestamp_nanos")  # fmt: skip
    assert str(source) in str(info.value) and str(edge) in str(info.value)
    assert not (tmp_path / "a").exists()


@pytest.mark.parametrize("bound", [MIN_FINITE_TS_NS, MAX_FINITE_TS_NS])
def test_compact_ticks_when_time_is_duckdbs_finite_bound_reads_back_exactly(tmp_path, bound):
    source = csv_of_times(tmp_path / "ticks.csv", [bound])
    (report,) = compact_ticks(
        archive_at(tmp_path / "a").core,
        source,
        as_of=date(2262, 4, 12),
        encoding=encoded(price_scale=2),
        run=CompactionRun(symbol="X"),
    )
    read = duckdb.sql(
        f"SELECT epoch_ns(ts), isfinite(ts::TIMESTAMP) FROM read_parquet('{report.path}')"
    ).fetchall()
    assert read == [(bound, True)]

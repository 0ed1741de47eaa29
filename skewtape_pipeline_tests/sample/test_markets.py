"""Tests of the sample's reference tables and its calendar helpers."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.mirror.format import TABLE_KEYS
from skewtape_pipeline.sample.markets import Universe
from skewtape_pipeline.sample.months import add_months, check_month, month_end_us, month_start_us
from skewtape_pipeline.sample.plan import ChainPlan
from skewtape_pipeline_tests.sample.conftest import Published

STATUS_ORDER = {"open": 0, "closed": 1, "settled": 2}


def table_rows(published: Published, month: str, table: str) -> list[dict]:
    return pq.read_table(published.oracle / month / table).to_pylist()


def test_reference_tables_when_published_are_sorted_by_unique_non_null_keys(
    published: Published,
) -> None:
    for month in published.summary.months:
        for table, keys in TABLE_KEYS.items():
            rows = table_rows(published, month, table)
            key_values = [tuple(row[k] for k in keys) for row in rows]
            assert rows, (month, table)
            assert all(None not in key for key in key_values), (month, table)
            assert key_values == sorted(key_values), (month, table)
            assert len(set(key_values)) == len(key_values), (month, table)


def test_reference_tables_when_published_use_microsecond_utc_times_and_4_decimal_prices(
    published: Published,
) -> None:
    allowed = {
        pa.string(),
        pa.int64(),
        pa.bool_(),
        pa.timestamp("us", tz="UTC"),
        pa.decimal128(10, 4),
    }
    for table in TABLE_KEYS:
        schema = pq.read_schema(published.oracle / published.summary.months[-1] / table)
        assert {field.type for field in schema} <= allowed, table
        assert any(field.type == pa.timestamp("us", tz="UTC") for field in schema), table


def test_markets_when_a_market_stays_listed_its_status_never_goes_back(
    published: Published,
) -> None:
    seen: dict[tuple[str, str], str] = {}
    moved = 0
    for month in published.summary.months:
        for row in table_rows(published, month, "markets.parquet"):
            key = (row["venue"], row["market_id"])
            if key in seen:
                assert STATUS_ORDER[row["status"]] >= STATUS_ORDER[seen[key]], key
                moved += row["status"] != seen[key]
            seen[key] = row["status"]
    assert moved > 0


def test_resolutions_when_restated_follow_a_first_resolution_of_the_same_market(
    published: Published,
) -> None:
    rows = table_rows(published, published.summary.months[-1], "resolutions.parquet")
    firsts = {(r["venue"], r["market_id"]): r for r in rows if r["seq"] == 1}

    for row in rows:
        assert row["settlement_price"] == (1 if row["outcome"] == "yes" else 0)
        if row["seq"] > 1:
            first = firsts[(row["venue"], row["market_id"])]
            assert row["resolved_at"] > first["resolved_at"]


def test_matched_events_when_published_point_at_listed_markets(published: Published) -> None:
    for month in published.summary.months:
        listed = {
            (r["venue"], r["market_id"]) for r in table_rows(published, month, "markets.parquet")
        }
        for event in table_rows(published, month, "matched_events.parquet"):
            legs = [
                (venue, event[f"{venue}_market_id"])
                for venue in ("kalshi", "polymarket", "predictit")
                if event[f"{venue}_market_id"] is not None
            ]
            assert len(legs) >= 2, event["event_id"]
            assert set(legs) <= listed, event["event_id"]


def test_fees_when_a_month_is_published_a_new_effective_from_falls_in_it(
    published: Published,
) -> None:
    for month in published.summary.months[1:]:
        starts = [r["effective_from"] for r in table_rows(published, month, "fees.parquet")]
        micros = [int(ts.timestamp()) * 1_000_000 for ts in starts]
        assert any(month_start_us(month) <= us < month_end_us(month) for us in micros), month


def test_universe_when_more_months_are_planned_earlier_snapshots_are_unchanged() -> None:
    short = Universe.build(
        ChainPlan.build(first_month="2026-09", months=4), seed=5, topics_per_month=30
    )
    longer = Universe.build(
        ChainPlan.build(first_month="2026-09", months=6), seed=5, topics_per_month=30
    )

    for index in range(4):
        for name, table in short.tables(index).items():
            assert table.equals(longer.tables(index)[name]), (index, name)


@pytest.mark.parametrize(
    ("month", "count", "expected"),
    [("2026-09", 4, "2027-01"), ("2026-01", -1, "2025-12"), ("2026-12", 0, "2026-12")],
)
def test_add_months_when_crossing_years_wraps_the_month(month: str, count: int, expected: str):
    assert add_months(month, count) == expected


def test_month_bounds_when_given_september_span_thirty_days() -> None:
    assert month_end_us("2026-09") - month_start_us("2026-09") == 30 * 86_400 * 10**6


@pytest.mark.parametrize("bad", ["2026-9", "2026-00", "26-09", None])
def test_check_month_when_malformed_raises_config_error_naming_the_option(bad: object) -> None:
    with pytest.raises(ConfigError, match="first_month"):
        check_month(bad, option="first_month")

"""Tests that the sample's trades and candles look like real prediction-market data."""

from __future__ import annotations

import re
import statistics
from collections import Counter
from decimal import Decimal
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.sample.fills import Fills, candles_from, correct_fills
from skewtape_pipeline.sample.months import month_end_us, month_start_us
from skewtape_pipeline_tests.sample.conftest import Published

UUID = re.compile(r"^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$")
DAY_NS = 86_400 * 10**9


def all_venues_snapshot(published: Published) -> Path:
    """The last snapshot that still holds every venue (the one before a venue leaves)."""
    months = published.summary.months
    leave = min(published.summary.omitted_venues)
    return published.oracle / months[months.index(leave) - 1]


def fills_files(snapshot: Path) -> list[Path]:
    return sorted((snapshot / "fills").rglob("*.parquet"))


def ticks_by_market(snapshot: Path) -> dict[tuple[str, str], Decimal]:
    markets = pq.read_table(snapshot / "markets.parquet").to_pylist()
    return {(m["venue"], m["market_id"]): m["tick_size"] for m in markets}


def test_fills_when_published_have_the_published_column_types(published: Published) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        schema = pq.read_schema(path)
        assert [(f.name, f.type) for f in schema] == [
            ("venue", pa.string()),
            ("market_id", pa.string()),
            ("trade_id", pa.string()),
            ("ts", pa.timestamp("ns", tz="UTC")),
            ("price", pa.decimal128(10, 4)),
            ("quantity", pa.int64()),
            ("taker_side", pa.string()),
        ], path


def test_fills_when_published_repeat_exact_timestamps_within_a_market(
    published: Published,
) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        table = pq.read_table(path)
        keys = Counter(zip(table["market_id"].to_pylist(), table["ts"].to_pylist(), strict=True))
        repeated = sum(count - 1 for count in keys.values())
        assert repeated >= 0.05 * table.num_rows, path


def test_fills_when_published_have_microsecond_times_inside_their_month(
    published: Published,
) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        month = path.stem
        ts = pq.read_table(path)["ts"].cast(pa.int64()).to_pylist()
        assert all(t % 1_000 == 0 for t in ts), path
        assert min(ts) >= month_start_us(month) * 1_000
        assert max(ts) < month_end_us(month) * 1_000


def test_fills_when_published_are_sorted_by_market_then_time(published: Published) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        table = pq.read_table(path)
        keys = list(zip(table["market_id"].to_pylist(), table["ts"].to_pylist(), strict=True))
        assert keys == sorted(keys), path


def test_fills_when_published_prices_sit_on_their_market_tick_grid_inside_zero_one(
    published: Published,
) -> None:
    snapshot = all_venues_snapshot(published)
    ticks = ticks_by_market(snapshot)
    off_cent_grid = Counter()
    for path in fills_files(snapshot):
        for row in pq.read_table(path).select(["venue", "market_id", "price"]).to_pylist():
            tick = ticks[(row["venue"], row["market_id"])]
            assert Decimal(0) < row["price"] < Decimal(1), row
            assert row["price"] % tick == 0, (row, tick)
            off_cent_grid[row["venue"]] += row["price"] % Decimal("0.01") != 0
    assert off_cent_grid["kalshi"] == 0 and off_cent_grid["predictit"] == 0
    assert off_cent_grid["polymarket"] > 0, "polymarket quotes most markets in 0.001 steps"


def test_fills_when_published_quantities_are_positive_and_heavy_tailed(
    published: Published,
) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        quantities = pq.read_table(path)["quantity"].to_pylist()
        median = statistics.median(quantities)
        assert min(quantities) >= 1, path
        assert sum(q <= 10 for q in quantities) >= 0.15 * len(quantities), path
        assert max(quantities) >= 20 * median, path


def test_fills_when_published_have_both_taker_sides(published: Published) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        sides = Counter(pq.read_table(path)["taker_side"].to_pylist())
        assert set(sides) == {"yes", "no"}, path
        assert min(sides.values()) >= 0.3 * sum(sides.values()), path


def test_fills_when_published_most_markets_are_thin_and_a_few_are_busy(
    published: Published,
) -> None:
    table = pq.read_table(
        all_venues_snapshot(published)
        / "fills"
        / "kalshi"
        / f"{published.summary.months[1]}.parquet"
    )
    markets = table["market_id"].to_pylist()
    days = [t // DAY_NS for t in table["ts"].cast(pa.int64()).to_pylist()]
    per_market_day = Counter(zip(markets, days, strict=True))
    per_market = Counter(markets)

    assert statistics.median(per_market_day.values()) <= 5
    assert max(per_market.values()) >= 10 * statistics.median(per_market.values())


def test_fills_when_published_trade_ids_are_unique_and_kalshi_ids_are_uuids(
    published: Published,
) -> None:
    for path in fills_files(all_venues_snapshot(published)):
        ids = pq.read_table(path)["trade_id"].to_pylist()
        assert len(set(ids)) == len(ids), path
        if path.parent.name == "kalshi":
            assert all(UUID.match(trade_id) for trade_id in ids)


def test_candles_when_published_agree_with_their_month_of_fills(published: Published) -> None:
    last = published.oracle / published.summary.months[-1]
    for fills_path in fills_files(last):
        fills = pq.read_table(fills_path).to_pylist()
        candles_path = last / "candles" / fills_path.parent.name / fills_path.name
        candles = pq.read_table(candles_path).to_pylist()
        hours: dict[tuple, list[dict]] = {}
        for row in fills:
            bucket = row["ts"].replace(minute=0, second=0, microsecond=0)
            hours.setdefault((row["market_id"], bucket), []).append(row)
        assert [(c["market_id"], c["bucket"]) for c in candles] == list(hours), fills_path
        for candle in candles:
            trades = hours[(candle["market_id"], candle["bucket"])]
            prices = [t["price"] for t in trades]
            assert candle["open"] == prices[0] and candle["close"] == prices[-1]
            assert candle["high"] == max(prices) and candle["low"] == min(prices)
            assert candle["volume"] == sum(t["quantity"] for t in trades)
            assert candle["trades"] == len(trades)


def small_fills() -> Fills:
    fills = Fills("kalshi")
    hour = 3_600 * 10**9
    start = month_start_us("2026-09") * 1_000
    for i in range(40):
        market = f"KXTEST-{i % 4}"
        fills.extend(
            market, [f"t{i}"], start + (i // 4) * hour, [100 * (1 + i % 90)], [i + 1], i % 2 == 0
        )
    order = sorted(range(40), key=lambda i: (fills.market_id[i], fills.ts[i]))
    sorted_fills = Fills("kalshi")
    rows = list(fills.rows())
    for i in order:
        market_id, trade_id, ts, price, quantity, yes = rows[i]
        sorted_fills.extend(market_id, [trade_id], ts, [price], [quantity], yes)
    return sorted_fills


def test_correct_fills_when_applied_reprices_resizes_removes_and_adds_trades() -> None:
    original = small_fills()
    before = {row[1]: row for row in original.rows()}
    ticks = {f"KXTEST-{i}": 100 for i in range(4)}

    corrected, change = correct_fills(
        original, seed=3, ticks=ticks, month_end_us=month_end_us("2026-09"), changes=2
    )

    after = {row[1]: row for row in corrected.rows()}
    assert {row[1] for row in original.rows()} == set(before), "the input is untouched"
    assert set(change.removed) == before.keys() - after.keys()
    assert set(change.added) == after.keys() - before.keys()
    assert len(change.removed) == 2 and len(change.added) == 4
    for trade_id in change.repriced:
        assert abs(after[trade_id][3] - before[trade_id][3]) == 100
    for trade_id in change.resized:
        assert after[trade_id][4] != before[trade_id][4] and after[trade_id][4] >= 1
    keys = [(row[0], row[2]) for row in corrected.rows()]
    assert keys == sorted(keys)


@pytest.mark.parametrize("hours", [1, 3])
def test_candles_from_when_trades_span_hours_gives_one_candle_per_market_hour(hours: int) -> None:
    fills = Fills("kalshi")
    start = month_start_us("2026-09") * 1_000
    for h in range(hours):
        ts = start + h * 3_600 * 10**9
        fills.extend("M", ["a", "b"], ts, [4_000, 4_100], [5, 7], True)

    candles = candles_from(fills).to_pylist()

    assert len(candles) == hours
    assert all(c["volume"] == 12 and c["trades"] == 2 for c in candles)
    assert all(c["open"] == Decimal("0.4000") and c["close"] == Decimal("0.4100") for c in candles)

"""The ticks view: one table over every tier, pruning by symbol and date, run_query."""

from __future__ import annotations

import os
from datetime import date, timedelta
from decimal import Decimal

import duckdb
import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.lifecycle import retier
from skewtape_pipeline.ticks.placement import archive_state
from skewtape_pipeline.ticks.query import (
    VIEW_COLUMNS,
    open_ticks_view,
    run_query,
    scan_stats,
    ticks_view_sql,
)
from skewtape_pipeline.ticks.tiers import COLD
from skewtape_pipeline.ticks.withdraw import withdraw_symbol_days
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    SYMBOLS,
    build_archive,
    day_ticks,
    expected_rows,
)

AS_OF = DAYS[-1] + timedelta(days=14)  # every day cold
SYMBOL_DATE = "SELECT * FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ?"


@pytest.fixture
def no_fsync(monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)


def test_scan_stats_when_hot_tier_filtered_by_symbol_and_date_opens_one_file(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF)
    symbol, day = "CL/F", DAYS[2]
    stats = scan_stats(SYMBOL_DATE, root, parameters=[symbol, day, day])
    assert stats.rows == len(day_ticks(symbol, day))
    assert (stats.files_scanned, stats.files_total) == (1, len(SYMBOLS) * len(DAYS))


def test_scan_stats_when_cold_tier_filtered_by_symbol_and_date_skips_row_groups(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF)
    retier(root, as_of=AS_OF, policy=POLICY)
    symbol, day = "KX-25MAR", DAYS[4]
    stats = scan_stats(SYMBOL_DATE, root, parameters=[symbol, day, day])
    assert stats.rows == len(day_ticks(symbol, day))
    # a row group holding the end of one symbol and the start of the next can match too
    assert stats.row_groups_scanned <= 2 < stats.row_groups_total // 2
    cold_files = archive_state(root).consolidated_files(COLD)
    assert stats.files_scanned == stats.files_total == len(cold_files) > 0
    everything = scan_stats("SELECT * FROM ticks", root)
    assert everything.row_groups_scanned == stats.row_groups_total


def test_run_query_when_days_in_different_tiers_answers_across_them(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=DAYS[-1] + timedelta(days=1))
    retier(root, as_of=DAYS[-1] + timedelta(days=1), policy=POLICY)
    table = run_query(
        "SELECT tier, count(*) AS n FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ? "
        "GROUP BY tier ORDER BY tier",
        root,
        parameters=["ES", DAYS[0], DAYS[-1]],
    )
    tiers = dict(zip(table.column("tier").to_pylist(), table.column("n").to_pylist(), strict=True))
    assert set(tiers) == {"COLD", "HOT", "WARM"}
    assert sum(tiers.values()) == sum(len(day_ticks("ES", d)) for d in DAYS)


def test_run_query_when_symbol_needs_encoding_returns_exact_values(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    retier(root, as_of=AS_OF, policy=POLICY)
    table = run_query(
        "SELECT price, quantity, tier FROM ticks WHERE symbol = 'CL/F' ORDER BY ts, price", root
    )
    wanted = [r for r in expected_rows(DAYS[:1]) if r[0] == "CL/F"]
    assert sorted(table.column("price").to_pylist()) == sorted(r[3] for r in wanted)
    assert all(isinstance(p, Decimal) for p in table.column("price").to_pylist())
    assert set(table.column("tier").to_pylist()) == {COLD}


def test_open_ticks_view_when_archive_empty_gives_typed_empty_view(tmp_path):
    root = tmp_path / "archive"
    root.mkdir()
    con = duckdb.connect()
    open_ticks_view(con, root)
    assert tuple(c[0] for c in con.execute("DESCRIBE ticks").fetchall()) == VIEW_COLUMNS
    assert con.execute("SELECT count(*) FROM ticks").fetchone() == (0,)


def test_run_query_when_sql_or_root_bad_raises_config_error(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    with pytest.raises(ConfigError, match="nope"):
        run_query("SELECT nope FROM ticks", root)
    with pytest.raises(ConfigError, match="not a folder"):
        run_query("SELECT 1", tmp_path / "missing")
    with pytest.raises(ConfigError, match="identifier"):
        open_ticks_view(duckdb.connect(), root, name="ticks; DROP")


def test_scan_stats_when_many_symbol_days_hidden_still_skips_row_groups(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF)
    retier(root, as_of=AS_OF, policy=POLICY)
    hidden = [(s, d) for s in SYMBOLS for d in DAYS if (s, d) != ("KX-25MAR", DAYS[4])]
    withdraw_symbol_days(root, hidden)
    sql = ticks_view_sql(root)
    assert "ANTI JOIN (VALUES" in sql and "symbol = '" not in sql  # one join, no OR-chain
    symbol, day = "KX-25MAR", DAYS[4]
    stats = scan_stats(SYMBOL_DATE, root, parameters=[symbol, day, day])
    assert stats.rows == len(day_ticks(symbol, day))
    assert stats.row_groups_scanned <= 2 < stats.row_groups_total // 2
    everything = run_query("SELECT symbol, date, count(*) AS n FROM ticks GROUP BY ALL", root)
    assert everything.to_pylist() == [{"symbol": symbol, "date": day, "n": stats.rows}]


def test_scan_stats_when_year_filter_given_skips_cold_files_of_other_years_unopened(
    tmp_path, no_fsync
):
    days = (date(2025, 12, 30), date(2026, 1, 2))
    as_of = days[-1] + timedelta(days=60)
    root = build_archive(tmp_path, as_of=as_of, days=days)
    retier(root, as_of=as_of, policy=POLICY)
    assert len(archive_state(root).consolidated_files(COLD)) == 2  # one per year
    symbol, day = "ES", days[1]

    stats = scan_stats(SYMBOL_DATE + " AND year = ?", root, parameters=[symbol, day, day, 2026])

    assert stats.rows == len(day_ticks(symbol, day))
    assert (stats.files_scanned, stats.files_total) == (1, 2)


def test_run_query_when_days_in_every_tier_year_and_month_match_the_date(tmp_path, no_fsync):
    as_of = DAYS[-1] + timedelta(days=1)
    root = build_archive(tmp_path, as_of=as_of)
    retier(root, as_of=as_of, policy=POLICY)
    table = run_query(
        "SELECT tier, count(*) AS n, count(*) FILTER (year = year(date) AND month = month(date))"
        " AS right FROM ticks GROUP BY tier",
        root,
    )
    rows = table.to_pylist()
    assert {r["tier"] for r in rows} == {"HOT", "WARM", "COLD"}
    assert all(r["n"] == r["right"] > 0 for r in rows)


@pytest.mark.parametrize("folder", ["year=2020", "month=07", "venue=kalshi"])
def test_run_query_when_data_folder_name_has_a_view_column_key_returns_every_tick_right(
    tmp_path, no_fsync, folder
):
    as_of = DAYS[-1] + timedelta(days=1)
    root = build_archive(tmp_path / folder, as_of=as_of)
    retier(root, as_of=as_of, policy=POLICY)
    withdraw_symbol_days(root, [("ES", DAYS[0])])
    table = run_query(
        "SELECT symbol, date, tier, year, month, count(*) AS n FROM ticks GROUP BY ALL", root
    )
    rows = table.to_pylist()
    assert {r["tier"] for r in rows} == {"HOT", "WARM", "COLD"}
    wanted = [r for r in expected_rows() if (r[0], r[1]) != ("ES", DAYS[0])]
    assert sorted((r["symbol"], r["date"]) for r in rows for _ in range(r["n"])) == sorted(
        (r[0], r[1]) for r in wanted
    )
    assert all((r["year"], r["month"]) == (r["date"].year, r["date"].month) for r in rows)


@pytest.mark.parametrize("folder", ["date=2020-01-01", "symbol=X"])
def test_run_query_when_archive_is_below_a_symbol_or_date_folder_refuses_naming_it(
    tmp_path, no_fsync, folder
):
    root = build_archive(tmp_path / folder / "data", as_of=DAYS[-1], days=DAYS[-1:])
    with pytest.raises(ConfigError, match=f"the folder '{folder}' above the archive"):
        run_query("SELECT count(*) FROM ticks", root)

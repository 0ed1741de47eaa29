"""The archive's reports table: a venue-day's file replaced whole or by symbol, read by DuckDB,
a typed error for a damaged file, and a typed empty view when there is none."""

from __future__ import annotations

from datetime import date
from pathlib import Path

import duckdb
import pytest

from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.ticks.archive.store.reports_table import (
    ARCHIVED,
    SKIPPED,
    ReportRow,
    read_venue_day_reports,
    reports_file,
    reports_view_sql,
    write_venue_day_reports,
)

DAY = date(2026, 10, 5)


def row(symbol: str, status: str = ARCHIVED, ticks: int = 3, batch: str = "run-1") -> ReportRow:
    return ReportRow(symbol, "v", DAY, status, ticks, "bundle", "fills/v/2026-10.parquet",
                     "ab" * 32, batch)  # fmt: skip


def test_write_venue_day_reports_when_some_symbols_given_replaces_only_their_rows(tmp_path: Path):
    write_venue_day_reports(tmp_path, "v", DAY, [row("v:a"), row("v:b", SKIPPED, 0)],
                            replace_all=True)  # fmt: skip
    write_venue_day_reports(tmp_path, "v", DAY, [row("v:b", ticks=7, batch="run-2")],
                            replace_all=False)  # fmt: skip
    rows = duckdb.sql(
        "SELECT symbol, status, tick_count, batch FROM read_parquet($f) ORDER BY symbol",
        params={"f": str(reports_file(tmp_path, "v", DAY))},
    ).fetchall()
    assert rows == [("v:a", ARCHIVED, 3, "run-1"), ("v:b", ARCHIVED, 7, "run-2")]
    write_venue_day_reports(tmp_path, "v", DAY, [row("v:c")], replace_all=True)
    assert read_venue_day_reports(tmp_path, "v", DAY)["symbol"].to_pylist() == ["v:c"]


def test_read_venue_day_reports_when_file_is_damaged_raises_naming_it(tmp_path: Path):
    write_venue_day_reports(tmp_path, "v", DAY, [row("v:a")], replace_all=True)
    path = reports_file(tmp_path, "v", DAY)
    path.write_bytes(path.read_bytes()[:-20])
    with pytest.raises(TickFormatError, match=str(path)):
        read_venue_day_reports(tmp_path, "v", DAY)


def test_reports_view_sql_when_no_reports_yet_gives_a_typed_empty_view(tmp_path: Path):
    con = duckdb.connect()
    con.execute(reports_view_sql([tmp_path]))
    assert con.execute("SELECT count(*) FROM tick_reports").fetchall() == [(0,)]
    types = {name: kind for name, kind, *_ in con.execute("DESCRIBE tick_reports").fetchall()[:3]}
    assert types == {"symbol": "VARCHAR", "venue": "VARCHAR", "date": "DATE"}

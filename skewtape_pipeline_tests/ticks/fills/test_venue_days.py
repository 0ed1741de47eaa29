"""A venue-day of snapshot fills into the archive: its symbol-days with trades archived, the
listed ones without trades skipped, each with a reports row; named symbols limit the work."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import duckdb
import pytest

from skewtape_pipeline.errors import ConfigError, UnreadableFolderError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.reports_table import (
    ARCHIVED,
    SKIPPED,
    read_venue_day_reports,
)
from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions, archive_venue_day
from skewtape_pipeline_tests.test_unreadable_input import as_nobody, shared_folder

DAY = date(2026, 10, 5)


def options(root: Path, batch: str = "b1") -> VenueDayOptions:
    archive = Archive(root / "archive", policy=TierPolicy(), audit_log=None)
    return VenueDayOptions(archive=archive, as_of=date(2026, 11, 29), batch=batch)


def day_counts(fills: Path) -> tuple[dict[str, int], set[str]]:
    """({symbol: trades on DAY}, every symbol of the file), by DuckDB."""
    rows = duckdb.sql(
        "SELECT venue || ':' || market_id, count(*) FILTER ((ts AT TIME ZONE 'UTC')::DATE = "
        "$d::DATE) FROM read_parquet($f) GROUP BY ALL",
        params={"f": str(fills), "d": DAY.isoformat()},
    ).fetchall()
    return {s: n for s, n in rows if n}, {s for s, _ in rows}


def test_archive_venue_day_when_run_archives_traded_symbol_days_and_skips_the_rest(
    applied_chain: Path,
):
    fills = applied_chain / "history" / "2026-11" / "fills" / "kalshi" / "2026-10.parquet"
    traded, listed = day_counts(fills)
    result = archive_venue_day(applied_chain / "history", ("kalshi", DAY), options(applied_chain))
    assert {r.symbol: r.tick_count for r in result.archived} == traded
    assert set(result.skipped) == listed - set(traded)
    table = read_venue_day_reports(applied_chain / "archive", "kalshi", DAY).to_pylist()
    assert {r["symbol"] for r in table if r["status"] == ARCHIVED} == set(traded)
    assert {r["symbol"] for r in table if r["status"] == SKIPPED} == listed - set(traded)
    assert all(r["read_back_mismatched_rows"] == 0 for r in table)


def test_archive_venue_day_when_symbols_named_rewrites_only_their_rows(applied_chain: Path):
    history = applied_chain / "history"
    first = archive_venue_day(history, ("kalshi", DAY), options(applied_chain))
    named = sorted(r.symbol for r in first.archived)[:2]
    again = archive_venue_day(history, ("kalshi", DAY), options(applied_chain, "b2"), symbols=named)
    assert sorted(r.symbol for r in again.rows) == named
    table = read_venue_day_reports(applied_chain / "archive", "kalshi", DAY).to_pylist()
    assert sorted(r["symbol"] for r in table if r["batch"] == "b2") == named
    assert len(table) == len(first.rows)


def test_archive_venue_day_when_a_symbol_of_another_venue_is_named_refuses_writing_nothing(
    applied_chain: Path,
):
    with pytest.raises(ConfigError, match="polymarket:x"):
        archive_venue_day(applied_chain / "history", ("kalshi", DAY), options(applied_chain),
                          symbols=["polymarket:x"])  # fmt: skip
    assert not (applied_chain / "archive").exists()


def test_archive_venue_day_when_the_mirror_holds_no_such_venue_refuses_naming_the_venues(
    applied_chain: Path,
):
    with pytest.raises(ConfigError, match=r"venue 'kalshii' .*venues: .*kalshi"):
        archive_venue_day(applied_chain / "history", ("kalshii", DAY), options(applied_chain))
    assert not (applied_chain / "archive").exists()


MONTHS = ("2026-09", "2026-10", "2026-11")


def test_archive_venue_day_when_no_fills_folder_can_be_listed_names_them_not_an_unknown_venue(
    applied_chain: Path,
):
    """A ``fills/`` that cannot be listed may hold the venue: the error names the folders and
    the reason, never a venue no snapshot holds (what a typo gets)."""
    history = applied_chain / "history"
    folders = [history / month / "fills" for month in MONTHS]
    for fills in folders:
        shutil.rmtree(fills)
        fills.write_text("not a folder")
    with pytest.raises(UnreadableFolderError) as raised:
        archive_venue_day(history, ("kalshi", DAY), options(applied_chain))
    said = str(raised.value)
    assert said.startswith(
        f"{folders[0]}: cannot be read (Not a directory), nor can {folders[1]}, {folders[2]}; "
        f"whether the mirror holds fills of venue 'kalshi' (2026-10-05) cannot be told"
    )
    assert "(the venues of the snapshots that can be read: none); nothing archived" in said
    assert not (applied_chain / "archive").exists()


def test_archive_venue_day_when_the_user_may_not_list_a_fills_folder_names_it_and_why(
    applied_chain: Path,
):
    with shared_folder() as folder:
        root = folder / "data"
        shutil.copytree(applied_chain, root, symlinks=True)
        history = root / "history"
        locked = history / MONTHS[-1] / "fills"
        shutil.rmtree(history / MONTHS[0] / "fills")  # a snapshot without fills holds none
        shutil.rmtree(history / MONTHS[1] / "fills")
        locked.chmod(0)
        venue_day_options = options(root)
        with as_nobody(), pytest.raises(UnreadableFolderError) as raised:
            archive_venue_day(history, ("kalshi", DAY), venue_day_options)
        locked.chmod(0o755)
        assert not (root / "archive").exists()
    assert str(raised.value).startswith(f"{locked}: cannot be read (Permission denied); whether")


def test_archive_venue_day_when_refusing_unknown_and_a_symbol_is_mistyped_writes_nothing(
    applied_chain: Path,
):
    history = applied_chain / "history"
    first = archive_venue_day(history, ("kalshi", DAY), options(applied_chain))
    named = [sorted(r.symbol for r in first.archived)[0], "kalshi:NO-SUCH-MARKET"]
    before = read_venue_day_reports(applied_chain / "archive", "kalshi", DAY).to_pylist()
    with pytest.raises(ConfigError, match=r"kalshi:NO-SUCH-MARKET \(2026-10-05\): not in fills/"):
        archive_venue_day(history, ("kalshi", DAY), options(applied_chain, "b2"), symbols=named,
                          refuse_unknown=True)  # fmt: skip
    assert read_venue_day_reports(applied_chain / "archive", "kalshi", DAY).to_pylist() == before


def test_archive_venue_day_when_an_unknown_symbol_is_named_by_default_leaves_it_out(
    applied_chain: Path,
):
    """As a correction's symbol whose rows all went: nothing to archive or remove."""
    again = archive_venue_day(applied_chain / "history", ("kalshi", DAY), options(applied_chain),
                              symbols=["kalshi:NO-SUCH-MARKET"])  # fmt: skip
    assert again.rows == []

"""``archive-month`` on a mirror the sample publisher's chain reaches through ``sync``: a month
the publisher corrects later is archived again where it was corrected, so the archive holds the
newest fills, as the corrections sensor and the asset make it."""

from __future__ import annotations

import shutil
from datetime import date
from pathlib import Path

import duckdb
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ChainError
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline.ticks.fills.month_archive import month_venue_days


def fills_rows(fills: Path) -> list[tuple]:
    """A fills file's rows as the archive should hold them, mapped by DuckDB (not our code)."""
    return duckdb.sql(
        "SELECT venue || ':' || market_id, epoch_ns(ts), price::DECIMAL(18, 6), "
        "quantity::DECIMAL(18, 6), CASE taker_side WHEN 'yes' THEN 'BUY' ELSE 'SELL' END "
        "FROM read_parquet($f) ORDER BY ALL",
        params={"f": str(fills)},
    ).fetchall()


def archive_rows(archive: Path, venue: str, month: str) -> list[tuple]:
    return duckdb.sql(
        "SELECT symbol, epoch_ns(ts), price::DECIMAL(18, 6), quantity::DECIMAL(18, 6), "
        "side::VARCHAR FROM read_parquet($glob, hive_partitioning = true) "
        "WHERE strftime(date, '%Y-%m') = $month ORDER BY ALL",
        params={"glob": f"{archive}/symbol={venue}%3A*/**/*.parquet", "month": month},
    ).fetchall()


def test_archive_month_when_a_later_month_corrects_fills_archives_the_corrected_ticks(
    published_sample: Path, tmp_path: Path, capsys
):
    publisher, mirror = tmp_path / "publisher", tmp_path / "mirror"
    shutil.copytree(published_sample, publisher)
    later = tmp_path / "later"
    later.mkdir()
    for month in ("2026-11", "2026-12"):  # published later
        shutil.move(publisher / "deltas" / month, later / month)
    assert main(["sync", str(publisher), "--root", str(mirror)]) == 0
    archived = mirror / "history" / "2026-10" / "fills" / "kalshi" / "2026-09.parquet"
    out = str(mirror / "archive")
    assert main(["compact-ticks", str(archived), "--out", out, "--as-of", "2026-10-31"]) == 0
    shutil.move(later / "2026-11", publisher / "deltas" / "2026-11")
    assert main(["sync", str(publisher), "--root", str(mirror)]) == 0
    corrected = mirror / "history" / "2026-11" / "fills" / "kalshi" / "2026-09.parquet"
    assert archive_rows(mirror / "archive", "kalshi", "2026-09") != fills_rows(corrected)
    capsys.readouterr()

    argv = ["archive-month", "2026-11", "--root", str(mirror), "--as-of", "2026-11-02"]
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert " 0 symbol-days of earlier months" not in out
    assert archive_rows(mirror / "archive", "kalshi", "2026-09") == fills_rows(corrected)

    versions = VersionLog(mirror / "archive").count()
    assert main(argv) == 0  # a rerun: everything is archived as it is
    assert capsys.readouterr().out.endswith("; 0 symbol-days changed\n")
    assert VersionLog(mirror / "archive").count() == versions


def test_month_venue_days_when_the_month_is_not_applied_refuses_naming_sync(tmp_path: Path):
    (tmp_path / "history").mkdir()
    with pytest.raises(ChainError, match=r"2027-01.*sync"):
        month_venue_days(tmp_path / "history", "2027-01", date(2027, 1, 2))


@pytest.fixture
def mirror(published_sample: Path, tmp_path: Path) -> Path:
    """A data root ``sync`` brought to the sample publisher's newest month (2026-09..12)."""
    publisher, mirror = tmp_path / "publisher", tmp_path / "mirror"
    shutil.copytree(published_sample, publisher)
    assert main(["sync", str(publisher), "--root", str(mirror)]) == 0
    return mirror


def test_archive_month_when_before_the_mirror_refuses_naming_month_and_snapshots(
    mirror: Path, capsys
):
    capsys.readouterr()
    argv = ["archive-month", "2025-01", "--root", str(mirror), "--as-of", "2027-01-01"]
    assert main(argv) == 2
    out, err = capsys.readouterr()
    assert out == "" and err.startswith(
        f"error: month 2025-01 is not in the mirror {mirror / 'history'}: it holds the snapshots "
        "of 2026-09 to 2026-12, and none has fills of 2025-01"
    )
    assert not (mirror / "archive").exists()


NEWEST = "2026-12/fills/kalshi/2026-11.parquet"
"""The newest snapshot's fills file, which archive-month 2026-11 reads kalshi's ticks from."""


@pytest.mark.parametrize(
    ("broken", "put", "archived", "said"),
    [
        (
            "2026-11/fills/kalshi/2026-09.parquet",  # the correction 2026-11 published
            "a folder",
            False,
            "cannot be read (Is a directory); which of its symbol-days changed cannot be told "
            "without it",
        ),
        (
            NEWEST,
            "a folder",
            True,
            "cannot be read (Is a directory); which symbols of kalshi traded on 2026-11-01 "
            "cannot be told without it",
        ),
        (NEWEST, "not Parquet", True, "cannot be read as Parquet ("),
        (  # a new archive: every fills file is read first for the schema it takes
            NEWEST,
            "a folder",
            False,
            "cannot be read (Is a directory); the schema a new archive of the mirror takes "
            "cannot be told without it",
        ),
        (NEWEST, "not Parquet", False, "cannot be read as Parquet ("),
        (  # a dangling link was taken for no file: the venue was left out, silently
            NEWEST,
            "a dangling link",
            True,
            "cannot be read (No such file or directory); which symbols of kalshi traded",
        ),
        (NEWEST, "a looping link", True, "cannot be read (Too many levels of symbolic links)"),
    ],
)
def test_archive_month_when_a_fills_file_cannot_be_read_exits_1_naming_it(
    mirror: Path, capsys, broken: str, put: str, archived: bool, said: str
):
    """A fills file of the mirror that cannot be read (a folder or a dangling or looping link in
    its place, which root cannot read either; bytes DuckDB cannot open) ended archive-month
    with DuckDB's traceback, was refused (2) as a file without ts, price, quantity, or (a
    dangling link) left its venue out silently: it is one line naming the file and why, an OS
    error (exit 1)."""
    if archived:  # the archive has its schema: the month's reads come first
        argv = ["archive-month", "2026-10", "--root", str(mirror), "--as-of", "2026-10-02"]
        assert main(argv) == 0
    path = mirror / "history" / broken
    path.unlink()
    if put == "a folder":
        path.mkdir()
    elif put == "a dangling link":
        path.symlink_to(path.with_name("gone.parquet"))
    elif put == "a looping link":
        path.symlink_to(path.name)
    else:
        path.write_bytes(b"PAR1" + b"\0" * 64)
    capsys.readouterr()
    argv = ["archive-month", "2026-11", "--root", str(mirror), "--as-of", "2026-11-03"]
    assert main(argv) == 1
    out, err = capsys.readouterr()
    assert err.startswith(f"error: {path}: {said}"), err
    assert err.count("\n") == 1 and "Traceback" not in err and out == ""
    if not archived:  # the corrections and the schema come before anything is written
        assert not (mirror / "archive").exists()


def test_month_venue_days_when_only_a_later_snapshot_has_the_months_fills_lists_them(
    mirror: Path,
):
    history, as_of = mirror / "history", date(2026, 9, 3)
    applied = month_venue_days(history, "2026-09", as_of)
    shutil.rmtree(history / "2026-09")  # 2026-10's snapshot still has the fills of 2026-09
    venue_days = month_venue_days(history, "2026-09", as_of)
    assert venue_days and set(venue_days) <= set(applied)
    assert {day for _, day in venue_days} == {date(2026, 9, 1), date(2026, 9, 2)}


@pytest.mark.parametrize("first", ["archive-month", "compact-ticks"])
def test_archive_months_when_the_newest_is_archived_first_the_older_still_fit_its_schema(
    mirror: Path, capsys, first: str
):
    """A venue that left the newest snapshot (its fills finer than the rest) still has older
    months to archive: the schema a new archive takes holds them too (the README's order)."""
    newest = mirror / "history" / "2026-12"
    assert not (newest / "fills" / "augur").exists(), "the sample's augur left in 2026-12"
    if first == "archive-month":
        argv = ["archive-month", "2026-12", "--root", str(mirror), "--as-of", "2027-01-01"]
    else:
        fills = newest / "fills" / "kalshi" / "2026-12.parquet"
        argv = ["compact-ticks", str(fills), "--out", str(mirror / "archive"),
                "--as-of", "2027-01-01"]  # fmt: skip
    assert main(argv) == 0
    capsys.readouterr()
    argv = ["archive-month", "2026-11", "--root", str(mirror), "--as-of", "2027-01-01"]
    assert main(argv) == 0, capsys.readouterr().err
    augur = mirror / "history" / "2026-11" / "fills" / "augur" / "2026-11.parquet"
    assert archive_rows(mirror / "archive", "augur", "2026-11") == fills_rows(augur)


def test_snapshot_fills_schema_when_asked_of_an_older_snapshot_holds_the_newest_fills(
    mirror: Path,
):
    """The first fills a run reads may come from an older snapshot (a venue that left): the
    new archive's schema must still hold the newest snapshot's finer fills."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    from skewtape_pipeline.ticks.fills.snapshot_fills import snapshot_fills_schema

    history = mirror / "history"
    fills = history / "2026-12" / "fills" / "predictit" / "2026-12.parquet"
    table = pq.read_table(fills)
    ts = pc.cast(table["ts"], pa.int64()).to_pylist()
    ts[0] += 1  # one fill a nanosecond off the microsecond
    column = pa.array(ts, pa.int64()).cast(table.schema.field("ts").type)
    fills.unlink()  # hard-linked into older snapshots: a new file, theirs unchanged
    pq.write_table(table.set_column(table.schema.get_field_index("ts"), "ts", column), fills)
    assert snapshot_fills_schema(history / "2026-12").timestamp_unit == "ns"
    assert snapshot_fills_schema(history / "2026-10") == snapshot_fills_schema(history / "2026-12")

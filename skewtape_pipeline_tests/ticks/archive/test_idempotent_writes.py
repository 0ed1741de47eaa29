"""A rerun records nothing that did not happen: compacting ticks the archive already holds (hot,
or re-tiered into a consolidated file) writes no file and records no version; a real change is
written and its version counts exactly the symbol-days that changed. Counted by inodes and
versions, on the real Kalshi file and on canonical CSVs."""

from __future__ import annotations

from datetime import date
from pathlib import Path

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.conftest import KALSHI_FILE, write_text

KALSHI_SYMBOL = "KXPAYROLLS-25APR-T0"
"""One market of the real file (hundreds of trades over many days), to keep the test short."""


def hot_inodes(archive: Path) -> dict[str, int]:
    """``{hot file: inode}`` of every symbol-day file in the hot tier."""
    return {
        str(p.relative_to(archive)): p.stat().st_ino for p in archive.glob("symbol=*/**/*.parquet")
    }


def compact(capsys, source: Path, archive: Path, *options: str) -> str:
    argv = ["compact-ticks", str(source), "--out", str(archive), *options]
    assert main(argv) == 0
    return capsys.readouterr().out


def kalshi(capsys, archive: Path) -> str:
    return compact(capsys, KALSHI_FILE, archive, "--input-format", "kalshi-trades",
                   "--symbol", KALSHI_SYMBOL, "--as-of", "2026-12-06")  # fmt: skip


def retier(capsys, archive: Path) -> str:
    assert main(["retier", str(archive), "--as-of", "2026-12-06"]) == 0
    return capsys.readouterr().out


def test_compact_ticks_when_rerun_on_the_real_kalshi_file_writes_nothing_and_records_no_version(
    tmp_path: Path, capsys, no_fsync
):
    archive = tmp_path / "archive"
    first = kalshi(capsys, archive)
    days = len(hot_inodes(archive))
    assert days > 10 and f"{days} symbol-days changed" in first
    inodes, versions = hot_inodes(archive), len(VersionLog(archive).list())

    again = kalshi(capsys, archive)
    assert hot_inodes(archive) == inodes
    assert len(VersionLog(archive).list()) == versions
    assert f"0 symbol-days changed; {days} already held" in again

    assert f"moved {days} symbol-days" in retier(capsys, archive)
    versions = len(VersionLog(archive).list())
    after_retier = kalshi(capsys, archive)
    assert hot_inodes(archive) == {}
    assert f"0 symbol-days changed; {days} already held" in after_retier
    assert "moved 0 symbol-days" in (moved := retier(capsys, archive)) and "removed 0" in moved
    assert len(VersionLog(archive).list()) == versions


CSV = "timestamp_nanos,price,quantity,side,symbol\n"


def ticks_csv(path: Path, prices: list[str]) -> Path:
    """One tick per day from 2026-11-01 of symbol S, at ``prices``."""
    start = 1_793_491_200 * 10**9  # 2026-11-01T00:00:00Z
    rows = [
        f"{start + day * 86_400 * 10**9 + 5},{price},3,BUY,S\n" for day, price in enumerate(prices)
    ]
    return write_text(path, CSV + "".join(rows))


def test_compact_ticks_when_one_day_changes_writes_that_day_alone_and_counts_it(
    tmp_path: Path, capsys, no_fsync
):
    archive = tmp_path / "archive"
    compact(capsys, ticks_csv(tmp_path / "a.csv", ["1.25", "1.50", "1.75"]), archive,
            "--as-of", "2026-11-30")  # fmt: skip
    inodes, versions = hot_inodes(archive), len(VersionLog(archive).list())

    out = compact(capsys, ticks_csv(tmp_path / "b.csv", ["1.25", "1.55", "1.75"]), archive,
                  "--as-of", "2026-11-30")  # fmt: skip
    assert "1 symbol-days changed; 2 already held" in out
    now = hot_inodes(archive)
    assert [name for name in now if now[name] != inodes[name]] == [
        "symbol=S/year=2026/month=11/date=2026-11-02/part-0.parquet"
    ]
    latest = VersionLog(archive).list()
    assert len(latest) == versions + 1
    assert latest[-1].changed == [("S", date(2026, 11, 2))]


def test_compact_ticks_when_the_same_ticks_come_at_a_later_as_of_keeps_the_hot_file(
    tmp_path: Path, capsys, no_fsync
):
    archive, source = tmp_path / "archive", ticks_csv(tmp_path / "a.csv", ["1.25", "1.50"])
    compact(capsys, source, archive, "--as-of", "2026-11-03")
    inodes, versions = hot_inodes(archive), len(VersionLog(archive).list())
    out = compact(capsys, source, archive, "--as-of", "2027-11-03")  # another tier's encoding
    assert "0 symbol-days changed; 2 already held" in out
    assert hot_inodes(archive) == inodes
    assert len(VersionLog(archive).list()) == versions

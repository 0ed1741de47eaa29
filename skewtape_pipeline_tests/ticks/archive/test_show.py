"""One symbol-day told whole (``show``): where it is, its report, its history, on the sample's
data (as the demo archives it) before and after re-tiering, recompaction and withdrawal; and
``tick_reports`` naming where each day is now."""

from __future__ import annotations

import json
import re
import shutil
from datetime import date
from pathlib import Path

import pytest

from skewtape_pipeline.audit import AuditLog
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import AuditLogError, ConfigError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.ops.show import show_symbol_day
from skewtape_pipeline.ticks.archive.store.books import default_audit_log
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, TierPolicy
from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions, archive_venue_day

DAY = date(2026, 10, 5)
LATER = date(2027, 6, 1)  # every October day is cold


@pytest.fixture
def archived(applied_chain: Path) -> tuple[Path, str]:
    """The sample's Kalshi venue-day archived as the demo does; (archive root, a symbol)."""
    root = applied_chain / "archive"
    archive = Archive(root, policy=TierPolicy(), audit_log=default_audit_log(root))
    options = VenueDayOptions(archive=archive, as_of=date(2026, 10, 7), batch="b1")
    result = archive_venue_day(applied_chain / "history", ("kalshi", DAY), options)
    return root, sorted(r.symbol for r in result.archived)[0]


def shown(root: Path, symbol: str):
    """``show`` of the symbol-day on :data:`DAY`, reading the log the archive audits to."""
    return show_symbol_day(ArchiveCore(root, audit_log=default_audit_log(root)), symbol, DAY)


def events(story) -> list[str]:
    return [item["event"] for item in story.history]


def reported_places(root: Path) -> dict[str, tuple[str | None, str | None]]:
    table = run_query(
        "SELECT symbol, tier, path FROM tick_reports WHERE status = 'archived'",
        ArchiveCore(root),
    )
    return {row["symbol"]: (row["tier"], row["path"]) for row in table.to_pylist()}


def test_show_when_just_archived_names_hot_file_report_and_written(archived):
    root, symbol = archived
    story = shown(root, symbol)
    assert story.place is not None and story.place.tier == HOT
    assert (root / story.place.file).is_file() and story.place.first_row is None
    assert story.report is not None and story.report["status"] == "archived"
    assert story.report["tick_count"] == story.place.rows
    assert events(story) == ["written"]


def test_show_when_retiered_names_cold_file_row_range_and_the_move(archived):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    story = shown(root, symbol)
    (cold,) = CatalogStore(root).read().files.values()
    assert story.place is not None and (story.place.tier, story.place.file) == (COLD, cold.path)
    assert story.place.first_row == 0 and story.place.rows == story.report["tick_count"]
    assert events(story) == ["written", "moved", "hot-file-removed"]
    assert story.history[1]["from"] == HOT and story.history[1]["to"] == COLD
    assert story.report["tier"] == COLD and story.report["reported_tier"] == HOT


def test_tick_reports_when_retiered_name_the_consolidated_file_not_the_removed_hot_file(archived):
    root, _ = archived
    before = reported_places(root)
    assert {tier for tier, _ in before.values()} == {HOT}
    Archive(root).retier(as_of=LATER)
    (cold,) = CatalogStore(root).read().files.values()
    assert reported_places(root) == {symbol: (COLD, cold.path) for symbol in before}


def test_show_when_withdrawn_then_purged_says_so_and_reports_name_no_file(archived):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    Archive(root).remove([(symbol, DAY)])
    story = shown(root, symbol)
    assert story.place is None and story.withdrawn
    assert events(story)[-1] == "withdrawn"
    assert reported_places(root)[symbol] == (None, None)
    Archive(root).retier(as_of=LATER)
    assert events(shown(root, symbol))[-2:] == ["withdrawn", "purged"]


def test_show_when_the_archive_is_not_audited_tells_no_history_beyond_the_report(archived):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    story = show_symbol_day(ArchiveCore(root, audit_log=None), symbol, DAY)
    assert story.place is not None and story.place.tier == COLD
    assert events(story) == ["written"]


def test_show_when_a_line_before_the_last_is_not_a_record_refuses_naming_log_and_line(archived):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    log = default_audit_log(root)
    lines = log.read_bytes().splitlines(keepends=True)
    log.write_bytes(b"".join([lines[0], b'{"event": "tick-archive-rem\n', *lines[1:]]))
    with pytest.raises(AuditLogError, match=rf"{re.escape(str(log))}: line 2: not a JSON record"):
        shown(root, symbol)


def test_show_when_the_last_line_was_cut_short_by_a_crash_tells_the_history_before_it(archived):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    log = default_audit_log(root)
    with log.open("ab") as handle:
        handle.write(b'{"event": "tick-archive-rem')
    assert events(shown(root, symbol)) == ["written", "moved", "hot-file-removed"]
    AuditLog(log).append([{"event": "note"}])  # ends the torn line, a repair record after it
    assert events(shown(root, symbol)) == ["written", "moved", "hot-file-removed"]


def test_show_when_symbol_day_unknown_refuses_naming_it(archived):
    root, _ = archived
    with pytest.raises(ConfigError, match=r"kalshi:NOPE 2026-10-05: not in the archive"):
        show_symbol_day(ArchiveCore(root, audit_log=None), "kalshi:NOPE", DAY)


def test_cli_show_when_json_prints_place_report_and_history(archived, capsys):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    assert main(["show", str(root), symbol, DAY.isoformat(), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["place"]["tier"] == COLD and shown["report"]["tier"] == COLD
    assert [item["event"] for item in shown["history"]] == ["written", "moved", "hot-file-removed"]


def test_cli_show_when_text_says_tier_file_rows_and_history(archived, capsys):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    assert main(["show", str(root), symbol, DAY.isoformat()]) == 0
    out = capsys.readouterr().out.splitlines()
    (cold,) = CatalogStore(root).read().files.values()
    assert out[0].startswith(f"{symbol} 2026-10-05 in {root}: COLD, {cold.path} rows 0..")
    assert out[1].startswith("report: archived,")
    assert out[2] == "history:" and "moved: from HOT to COLD into COLD/" in out[4]
    assert "x, codec of HOT)" in out[3]  # written hot, with the hot tier's codec


def test_cli_show_when_date_or_symbol_wrong_exits_2_with_one_line(archived, capsys):
    root, _ = archived
    assert main(["show", str(root), "kalshi:NOPE", DAY.isoformat()]) == 2
    assert capsys.readouterr().err.startswith("error: kalshi:NOPE 2026-10-05: not in the archive")
    assert main(["show", str(root), "kalshi:NOPE", "2026-13-01"]) == 2
    assert "expected a date YYYY-MM-DD" in capsys.readouterr().err


def test_show_when_cold_day_rearchived_unchanged_stays_in_cold_with_nothing_to_move(archived):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    (cold,) = CatalogStore(root).read().files.values()
    before = events(shown(root, symbol))
    archive = Archive(root, policy=TierPolicy(), audit_log=default_audit_log(root))
    options = VenueDayOptions(archive=archive, as_of=date(2026, 12, 3), batch="b2")
    archive_venue_day(root.parent / "history", ("kalshi", DAY), options, symbols=[symbol])
    story = shown(root, symbol)
    assert story.place is not None and (story.place.tier, story.place.file) == (COLD, cold.path)
    assert events(story) == before and story.report["batch"] == "b2"
    assert reported_places(root)[symbol] == (COLD, cold.path)

    result = Archive(root).retier(as_of=date(2026, 12, 3))  # today: October's age says WARM

    assert result.moved == [] and result.files_written == [] and result.files_removed == []
    assert events(shown(root, symbol)) == before


def test_show_when_compacted_from_the_command_line_tells_written_its_report_and_words(
    tmp_path, capsys
):
    from skewtape_pipeline.cli.app import main

    archive, source = tmp_path / "archive", tmp_path / "ticks.csv"
    day_ns = 1_793_491_200 * 10**9  # 2026-11-01
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2026-11-02"]
    for price in ("1.25", "1.35"):  # written, then corrected
        source.write_text(
            f"timestamp_nanos,price,quantity,side,symbol\n{day_ns + 5},{price},3,BUY,S\n"
        )
        assert main(argv) == 0
    capsys.readouterr()
    assert main(["show", str(archive), "S", "2026-11-01"]) == 0
    out = capsys.readouterr().out
    assert "\nreport: archived, 1 ticks, " in out
    history = out.split("history:\n")[1].splitlines()
    assert re.match(r"  \d{4}-\d\d-\d\dT\S+  written: 1 ticks, \d+ bytes", history[0])
    assert re.match(r"  \d{4}-\d\d-\d\dT\S+  recompacted: replaced its hot file \(", history[1])
    assert not any(mark in out for mark in ("{", "}", "'"))


@pytest.mark.parametrize("symbol", ["A\x1b[31mB", "A\nB"])
def test_cli_show_when_symbol_holds_control_characters_prints_their_escapes(
    tmp_path, capsys, symbol
):
    archive, source = tmp_path / "archive", tmp_path / "ticks.csv"
    quoted_symbol = '"' + symbol + '"'
    source.write_text(
        f"timestamp_nanos,price,quantity,side,symbol\n{1_793_491_200 * 10**9},1.25,3,BUY,"
        f"{quoted_symbol}\n"
    )
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2026-11-02"]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["show", str(archive), symbol, "2026-11-01"]) == 0
    out = capsys.readouterr().out
    shown = symbol.replace("\x1b", "\\x1b").replace("\n", "\\x0a")
    assert out.startswith(f"{shown} 2026-11-01 in {archive}: HOT, ")
    assert "\x1b" not in out and len(out.splitlines()) == 4


def test_show_when_the_root_is_spelled_otherwise_tells_the_same_history(archived, tmp_path):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    plain = shown(root, symbol).history
    assert [item["event"] for item in plain] == ["written", "moved", "hot-file-removed"]
    link = root.parent / "archive-link"
    link.symlink_to(root, target_is_directory=True)
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "archive").symlink_to(root, target_is_directory=True)
    for spelling in (root / ".." / root.name, link):
        assert shown(spelling, symbol).history == plain, spelling
    core = ArchiveCore(elsewhere / "archive", audit_log=default_audit_log(root))
    assert show_symbol_day(core, symbol, DAY).history == plain


def test_show_when_moved_or_copied_with_its_audit_log_tells_the_history_written_before(
    archived, tmp_path
):
    root, symbol = archived
    Archive(root).retier(as_of=LATER)
    plain = shown(root, symbol).history
    copy = tmp_path / "copied" / "data"
    shutil.copytree(root.parent, copy, symlinks=True)
    assert shown(copy / root.name, symbol).history == plain
    moved = tmp_path / "moved"
    root.parent.rename(moved)
    assert shown(moved / root.name, symbol).history == plain


def test_show_when_another_archive_shares_the_audit_log_leaves_its_records_out(archived, tmp_path):
    root, symbol = archived
    log = default_audit_log(root)
    other = root.parent / "other-archive"
    shutil.copytree(root, other, symlinks=True)
    Archive(other, audit_log=log).retier(as_of=LATER)  # audited to the log beside both
    assert events(shown(root, symbol)) == ["written"]
    story = show_symbol_day(ArchiveCore(other, audit_log=log), symbol, DAY)
    assert events(story) == ["written", "moved", "hot-file-removed"]


def test_archive_show_and_report_when_given_iso_text_tell_what_the_date_does(archived):
    root, symbol = archived
    archive = Archive(root)
    located = archive.report(symbol, DAY)
    assert located is not None and archive.report(symbol, DAY.isoformat()) == located
    assert archive.show(symbol, DAY.isoformat()) == archive.show(symbol, DAY)
    venue = symbol.split(":")[0]
    reports = archive.venue_day_reports(venue, DAY.isoformat())
    assert reports.equals(archive.venue_day_reports(venue, DAY))


@pytest.mark.parametrize("bad", ["2026-13-01", "05/10/2026", 20261005, None])
@pytest.mark.parametrize("verb", ["show", "report", "venue_day_reports"])
def test_archive_show_and_report_when_day_is_no_day_refuse_naming_it(archived, verb, bad):
    root, symbol = archived
    with pytest.raises(ConfigError, match=rf"^day = {re.escape(repr(bad))}: expected a day"):
        getattr(Archive(root), verb)(symbol, bad)


def test_show_when_reached_through_a_link_elsewhere_audits_and_reads_the_log_beside_it(
    archived, tmp_path
):
    root, symbol = archived
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    link = elsewhere / "archive"
    link.symlink_to(root, target_is_directory=True)
    Archive(link).retier(as_of=LATER)  # the default audit log
    assert not (elsewhere / "audit.jsonl").exists()
    expected = ["written", "moved", "hot-file-removed"]
    assert events(Archive(link).show(symbol, DAY)) == expected
    assert events(shown(root, symbol)) == expected


def test_show_when_a_later_run_found_the_day_unchanged_keeps_the_writers_batch(archived):
    root, symbol = archived
    assert written_batches(shown(root, symbol)) == ["b1"]
    archive = Archive(root, policy=TierPolicy(), audit_log=default_audit_log(root))
    options = VenueDayOptions(archive=archive, as_of=date(2026, 10, 7), batch="b2")
    archive_venue_day(root.parent / "history", ("kalshi", DAY), options, symbols=[symbol])

    story = shown(root, symbol)
    assert story.report["batch"] == "b2" and story.report["unchanged"]  # b2 wrote nothing
    assert written_batches(story) == [None]  # not credited to b2; b1 is not in the audit log
    assert "batch b2" not in "\n".join(story.describe()[2:])


def written_batches(story) -> list[str | None]:
    return [item.get("batch") for item in story.history if item["event"] == "written"]

"""Reading snapshot fills as ticks, finding corrected symbol-days, archiving and reading back."""

from __future__ import annotations

import json
import shutil
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import (
    ChainError,
    ManifestError,
    TickValidationError,
    UnreadableFileError,
    UnreadableFolderError,
    WriteOnceError,
)
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query
from skewtape_pipeline.ticks.archive.store import spill
from skewtape_pipeline.ticks.archive.store.books import (
    EVENT_REFUSED,
    EVENT_WITHDRAW,
)
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import POLICY_RECORD
from skewtape_pipeline.ticks.archive.store.version_files import EVENT_VERSION
from skewtape_pipeline.ticks.fills import snapshot_fills
from skewtape_pipeline.ticks.fills.snapshot_fills import (
    archive_read_back_problems,
    archive_symbol_days,
    changed_symbol_days,
    corrected_symbol_days,
    days_by_activity,
    month_files,
    new_symbols,
    read_mirror_venues,
    symbols_in,
)
from skewtape_pipeline_tests.conftest import copy_snapshot, make_snapshot, reseal
from skewtape_pipeline_tests.test_unreadable_input import as_nobody, shared_folder
from skewtape_pipeline_tests.ticks.conftest import LOCK_WAITS, archive_at

AS_OF = date(2026, 11, 29)


def log_beside(tmp_path: Path) -> Path:
    """The audit log the archive writers are given: audit.jsonl beside the archive."""
    return tmp_path / "audit.jsonl"


def busiest_symbol_days(fills_file: Path, count: int) -> list[tuple[str, date]]:
    rows = duckdb.sql(
        "SELECT venue || ':' || market_id, (ts AT TIME ZONE 'UTC')::DATE, count(*) AS n "
        "FROM read_parquet($f) GROUP BY ALL ORDER BY n DESC, 1, 2 LIMIT $count",
        params={"f": str(fills_file), "count": count},
    ).fetchall()
    return [(symbol, day) for symbol, day, _ in rows]


def test_changed_symbol_days_when_one_row_changes_names_only_its_symbol_day(
    published_full_snapshots: Path, tmp_path: Path
):
    old = published_full_snapshots / "2026-09" / "fills" / "polymarket" / "2026-09.parquet"
    table = pq.read_table(old)
    row = table.num_rows // 2
    quantity = table.column("quantity").to_pylist()
    quantity[row] += 1
    new = tmp_path / "new.parquet"
    pq.write_table(table.set_column(5, "quantity", pa.array(quantity, pa.int64())), new)
    changed = changed_symbol_days(old, new)
    venue, market, ts = (table.column(c)[row].as_py() for c in ("venue", "market_id", "ts"))
    assert changed == [(f"{venue}:{market}", ts.date())]
    assert changed_symbol_days(old, old) == []


def test_changed_symbol_days_when_rows_are_only_reordered_finds_nothing(
    published_full_snapshots: Path, tmp_path: Path
):
    old = published_full_snapshots / "2026-09" / "fills" / "kalshi" / "2026-09.parquet"
    table = pq.read_table(old)
    shuffled = tmp_path / "shuffled.parquet"
    pq.write_table(table.take(pc.sort_indices(table, [("trade_id", "descending")])), shuffled)
    assert changed_symbol_days(old, shuffled) == []


def test_corrected_symbol_days_when_month_replaces_earlier_fills_matches_the_row_diff(
    applied_chain: Path,
):
    history = applied_chain / "history"
    corrected = corrected_symbol_days(history, "2026-11")
    replaced = Path("fills/kalshi/2026-09.parquet")
    expected = changed_symbol_days(history / "2026-10" / replaced, history / "2026-11" / replaced)
    assert corrected == expected
    assert corrected, "the sample's 2026-11 delta corrects September's kalshi fills"
    assert corrected_symbol_days(history, "2026-10") == []
    assert corrected_symbol_days(history, "2026-09") == []


def test_new_symbols_when_first_month_lists_every_symbol_of_its_fills(applied_chain: Path):
    snapshot = applied_chain / "history" / "2026-09"
    expected = sorted({s for f in snapshot.glob("fills/*/*.parquet") for s in symbols_in(f)})
    assert new_symbols(applied_chain / "history", "2026-09") == expected


def test_archive_symbol_days_when_ticks_exist_writes_reports_that_read_back_equal(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    wanted = busiest_symbol_days(history / "2026-10" / "fills/kalshi/2026-10.parquet", 5)
    out = tmp_path / "archive"
    results = archive_symbol_days(archive_at(out, TierPolicy()), history, wanted, as_of=AS_OF)
    assert [(r.symbol, r.day) for r in results] == wanted
    for result in results:
        assert result.report is not None and result.report.round_trip_verified
        assert result.source.bundle_id == "skewtape-history-2026-11"
        assert result.source.path == "fills/kalshi/2026-10.parquet"
        assert Path(result.report.path) == partition_file(out, result.symbol, result.day)
    assert archive_read_back_problems(results, archive=archive_at(out)) == []


@LOCK_WAITS
def test_archive_symbol_days_records_its_version_waiting_for_the_lock_as_long_as_its_writes(
    applied_chain: Path, tmp_path: Path, version_lock_waits, lock_timeout, waited
):
    history = applied_chain / "history"
    wanted = busiest_symbol_days(history / "2026-10" / "fills/kalshi/2026-10.parquet", 1)
    archive = archive_at(tmp_path / "archive", TierPolicy(), lock_timeout=lock_timeout)
    archive_symbol_days(archive, history, wanted, as_of=AS_OF)
    assert version_lock_waits == [("recording a version", waited)]


def test_archive_read_back_when_a_file_was_altered_names_the_symbol(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    wanted = busiest_symbol_days(history / "2026-10" / "fills/kalshi/2026-10.parquet", 2)
    out = tmp_path / "archive"
    results = archive_symbol_days(archive_at(out, TierPolicy()), history, wanted, as_of=AS_OF)
    victim = partition_file(out, *wanted[0])
    table = pq.read_table(victim)
    pq.write_table(table.slice(1), victim)
    problems = archive_read_back_problems(results, archive=archive_at(out))
    assert len(problems) == 1 and wanted[0][0] in problems[0]


def test_archive_symbol_days_when_symbol_day_lost_its_ticks_removes_its_file(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    fills = history / "2026-11" / "fills" / "kalshi" / "2026-10.parquet"
    [(symbol, day)] = busiest_symbol_days(fills, 1)
    out = tmp_path / "archive"
    archive_symbol_days(archive_at(out, TierPolicy()), history, [(symbol, day)], as_of=AS_OF)
    assert partition_file(out, symbol, day).exists()
    table = pq.read_table(fills)
    fills.chmod(0o644)
    pq.write_table(
        table.filter(pc.not_equal(table.column("market_id"), symbol.split(":")[1])), fills
    )
    [gone] = archive_symbol_days(
        archive_at(out, TierPolicy()), history, [(symbol, day)], as_of=AS_OF
    )
    assert gone.report is None and gone.removed_file
    assert not partition_file(out, symbol, day).exists()


def test_archive_symbol_days_when_symbol_never_traded_that_day_reports_no_ticks(
    applied_chain: Path, tmp_path: Path
):
    [result] = archive_symbol_days(
        archive_at(tmp_path / "archive", TierPolicy()),
        applied_chain / "history",
        [("kalshi:NO-SUCH-MARKET", date(2026, 10, 1))],
        as_of=AS_OF,
    )
    assert result.report is None and not result.removed_file
    assert result.source.path == "fills/kalshi/2026-10.parquet"


def test_archive_symbol_days_when_month_not_applied_refuses_naming_it(applied_chain: Path):
    with pytest.raises(ChainError, match="2026-12"):
        archive_symbol_days(
            archive_at(applied_chain / "archive", TierPolicy()),
            applied_chain / "history",
            [("kalshi:X", date(2026, 12, 3))],
            as_of=date(2026, 12, 31),
        )


def test_read_fills_ticks_when_rows_selected_keeps_file_order_and_rows(applied_chain: Path):
    fills = applied_chain / "history" / "2026-10" / "fills/kalshi/2026-10.parquet"
    wanted = busiest_symbol_days(fills, 3)
    ticks = snapshot_fills.read_fills_ticks(fills, wanted)
    rows = ticks.row_numbers.to_pylist()
    assert rows == sorted(rows)
    assert ticks.table.num_rows == len(rows) > 0


def test_archive_symbol_days_when_books_and_records_and_a_file_exists_refuses_before_writing(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    wanted = busiest_symbol_days(history / "2026-10" / "fills/kalshi/2026-10.parquet", 3)
    out = tmp_path / "archive"
    archive_symbol_days(
        archive_at(out, TierPolicy(), audit_log=log_beside(tmp_path)),
        history,
        wanted[1:2],
        as_of=AS_OF,
    )
    archive_at(out, audit_log=log_beside(tmp_path)).core.books.enable()
    kept = partition_file(out, *wanted[1]).read_bytes()
    with pytest.raises(WriteOnceError, match="overwrite refused") as refused:
        archive_symbol_days(
            archive_at(out, TierPolicy(), audit_log=log_beside(tmp_path)),
            history,
            wanted,
            as_of=AS_OF,
        )
    assert refused.value.path == partition_file(out, *wanted[1])
    assert not partition_file(out, *wanted[0]).exists()  # refused before the first write
    assert partition_file(out, *wanted[1]).read_bytes() == kept
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert events[-1]["event"] == EVENT_REFUSED and events[-1]["operation"] == "overwrite"


def test_archive_symbol_days_when_books_and_records_and_ticks_corrected_away_keeps_the_file(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    fills = history / "2026-11" / "fills" / "kalshi" / "2026-10.parquet"
    [(symbol, day)] = busiest_symbol_days(fills, 1)
    out = tmp_path / "archive"
    archive_symbol_days(archive_at(out, TierPolicy()), history, [(symbol, day)], as_of=AS_OF)
    archive_at(out).core.books.enable()
    table = pq.read_table(fills)
    fills.chmod(0o644)
    pq.write_table(
        table.filter(pc.not_equal(table.column("market_id"), symbol.split(":")[1])), fills
    )
    with pytest.raises(WriteOnceError, match="delete refused"):
        archive_symbol_days(archive_at(out, TierPolicy()), history, [(symbol, day)], as_of=AS_OF)
    assert partition_file(out, symbol, day).exists()


def test_archive_symbol_days_when_day_corrected_away_after_it_went_cold_leaves_the_view(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    fills = history / "2026-11" / "fills" / "kalshi" / "2026-10.parquet"
    gone_key, kept_key = busiest_symbol_days(fills, 2)
    out, policy = tmp_path / "archive", TierPolicy()
    archive_symbol_days(
        archive_at(out, policy, audit_log=log_beside(tmp_path)),
        history,
        [gone_key, kept_key],
        as_of=AS_OF,
    )
    Archive(out, policy=policy, audit_log=log_beside(tmp_path)).retier(
        as_of=date(2027, 6, 1)
    )  # both days are cold now

    def view(key: tuple[str, date]) -> list[tuple[str, int]]:
        table = run_query(
            "SELECT tier, count(*) AS n FROM ticks WHERE symbol = ? AND date = ? GROUP BY tier",
            ArchiveCore(out),
            QueryOptions(parameters=list(key)),
        )
        tiers, counts = table.column("tier").to_pylist(), table.column("n").to_pylist()
        return sorted(zip(tiers, counts, strict=True))

    kept_before = view(kept_key)
    assert view(gone_key)[0][0] == kept_before[0][0] == "COLD"
    table = pq.read_table(fills)
    corrected_away = pc.and_(
        pc.equal(table.column("market_id"), gone_key[0].split(":")[1]),
        pc.equal(pc.cast(table.column("ts"), pa.date32()), pa.scalar(gone_key[1], pa.date32())),
    )
    fills.chmod(0o644)
    pq.write_table(table.filter(pc.invert(corrected_away)), fills)

    [gone] = archive_symbol_days(
        archive_at(out, policy, audit_log=log_beside(tmp_path)), history, [gone_key], as_of=AS_OF
    )

    assert gone.report is None and gone.withdrawn and not gone.removed_file
    assert view(gone_key) == [] and view(kept_key) == kept_before
    events = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    assert [e["event"] for e in events[-2:]] == [EVENT_WITHDRAW, EVENT_VERSION]
    assert events[-2]["symbol_days"] == [[gone_key[0], gone_key[1].isoformat()]]
    [again] = archive_symbol_days(
        archive_at(out, policy, audit_log=log_beside(tmp_path)), history, [gone_key], as_of=AS_OF
    )
    assert not again.withdrawn and not again.removed_file  # idempotent

    assert Archive(out, policy=policy, audit_log=log_beside(tmp_path)).retier(
        as_of=date(2027, 6, 1)
    ).purged == [gone_key]
    assert view(gone_key) == [] and view(kept_key) == kept_before


# --- a venue that leaves ------------------------------------------------------------------------


def _apply_december(root: Path) -> None:
    """Apply the sample's 2026-12 delta, in which augur leaves (``omitted_venues``)."""
    history = root / "history"
    apply_delta(
        history / "2026-11", root / "deltas" / "2026-12", into=history / "2026-12",
        audit_log=root / "audit.jsonl",
    )  # fmt: skip


def test_archive_symbol_days_when_sample_venue_leaves_keeps_its_archived_ticks(
    applied_chain: Path, tmp_path: Path
):
    history = applied_chain / "history"
    fills = history / "2026-11" / "fills" / "augur" / "2026-11.parquet"
    wanted = busiest_symbol_days(fills, 3)
    expected = {key: snapshot_fills.read_fills_ticks(fills, [key]).table.num_rows for key in wanted}
    out, policy = tmp_path / "archive", TierPolicy()
    archive_symbol_days(archive_at(out, policy), history, wanted, as_of=AS_OF)
    _apply_december(applied_chain)
    manifest, _, _ = read_snapshot(history / "2026-12")
    assert "augur" in manifest.omitted_venues  # the sample's departure, as published

    results = archive_symbol_days(archive_at(out, policy), history, wanted, as_of=AS_OF)

    for result in results:
        assert result.report is not None and not result.removed_file
        assert result.report.tick_count == expected[(result.symbol, result.day)] > 0
        assert result.source.departed
        assert result.source.bundle_id == "skewtape-history-2026-11"
        assert partition_file(out, result.symbol, result.day).exists()
    assert archive_read_back_problems(results, archive=archive_at(out)) == []
    assert not [s for s, _ in corrected_symbol_days(history, "2026-12") if s.startswith("augur")]


def _venue_leaves(root: Path, venue: str) -> Path:
    """history/2026-10 with kalshi and ``venue``; history/2026-11 the same without ``venue``'s
    month files and with ``venue`` in ``omitted_venues``. Returns history/."""
    october = make_snapshot(root, month="2026-10", venues=("kalshi", venue))
    november = copy_snapshot(october, root / "history" / "2026-11")
    for folder in ("fills", "candles"):
        shutil.rmtree(november / folder / venue)
    reseal(november, month="2026-11", venues=("kalshi",), omitted_venues=(venue,))
    return root / "history"


def test_archive_symbol_days_when_hand_built_venue_leaves_reads_the_last_snapshot_holding_it(
    tmp_path: Path,
):
    history = _venue_leaves(tmp_path / "data", "polymarket")
    fills = history / "2026-10" / "fills" / "polymarket" / "2026-10.parquet"
    wanted = busiest_symbol_days(fills, 10)  # every symbol-day of the file
    stayed = busiest_symbol_days(history / "2026-11" / "fills" / "kalshi" / "2026-10.parquet", 1)
    out = tmp_path / "archive"

    results = archive_symbol_days(
        archive_at(out, TierPolicy()), history, wanted + stayed, as_of=AS_OF
    )

    left, kept = results[:-1], results[-1]
    for result in left:
        assert result.report is not None and result.report.tick_count > 0
        assert result.source.departed and result.source.snapshot == history / "2026-10"
        assert result.source.sha256 is not None
    assert kept.report is not None and not kept.source.departed
    assert kept.source.snapshot == history / "2026-11"
    assert archive_read_back_problems(results, archive=archive_at(out)) == []
    table = run_query(
        "SELECT count(*) AS n FROM ticks WHERE symbol LIKE 'polymarket:%'", ArchiveCore(out)
    )
    assert table.column("n").to_pylist() == [pq.read_metadata(fills).num_rows]


def test_archive_symbol_days_when_month_file_never_published_reports_no_ticks_not_departed(
    tmp_path: Path,
):
    history = _venue_leaves(tmp_path / "data", "polymarket")
    [result] = archive_symbol_days(
        archive_at(tmp_path / "archive", TierPolicy()),
        history,
        [("polymarket:PO-M0", date(2026, 11, 1))],
        as_of=AS_OF,
    )
    assert result.report is None and not result.source.departed and result.source.sha256 is None


def test_corrected_symbol_days_when_venue_leaves_names_none_of_its_days(tmp_path: Path):
    history = _venue_leaves(tmp_path / "data", "polymarket")
    assert corrected_symbol_days(history, "2026-11") == []


def test_days_by_activity_when_a_venue_left_still_counts_its_fills(tmp_path: Path):
    history = _venue_leaves(tmp_path / "data", "polymarket")
    october = history / "2026-10"
    left = october / "fills" / "polymarket" / "2026-10.parquet"
    table = pq.read_table(left)
    busy = pa.array(
        [v + 9 * 86_400 * 10**9 for v in table.column("ts").cast(pa.int64()).to_pylist()]
    )
    left.chmod(0o644)
    pq.write_table(table.set_column(3, "ts", busy.cast(table.schema.field("ts").type)), left)
    reseal(october, month="2026-10")  # polymarket's 4 fills on the 10th, kalshi's on the 1st

    days = days_by_activity(history, "2026-10")

    assert sorted(days) == [date(2026, 10, 1), date(2026, 10, 10)]


def test_archive_symbol_days_when_no_snapshot_holds_the_month_file_keeps_archived_ticks(
    tmp_path: Path,
):
    history = _venue_leaves(tmp_path / "data", "polymarket")
    fills = history / "2026-10" / "fills" / "polymarket" / "2026-10.parquet"
    wanted = busiest_symbol_days(fills, 1)
    out, policy = tmp_path / "archive", TierPolicy()
    archive_symbol_days(archive_at(out, policy), history, wanted, as_of=AS_OF)
    kept = partition_file(out, *wanted[0]).read_bytes()
    shutil.rmtree(history / "2026-10")  # the last snapshot holding it is gone (pruned)
    archive_at(out).core.books.enable()  # and nothing may be refused: nothing is to be removed

    [result] = archive_symbol_days(archive_at(out, policy), history, wanted, as_of=AS_OF)

    assert result.report is None and not result.removed_file and not result.withdrawn
    assert result.source.sha256 is None
    assert partition_file(out, *wanted[0]).read_bytes() == kept


def test_archive_symbol_days_when_over_the_memory_limit_spills_and_writes_the_same_files(
    applied_chain: Path, tmp_path: Path, monkeypatch
):
    history = applied_chain / "history"
    wanted = busiest_symbol_days(history / "2026-10" / "fills/kalshi/2026-10.parquet", 6)
    unbounded = tmp_path / "unbounded"
    archive_symbol_days(archive_at(unbounded, TierPolicy()), history, wanted, as_of=AS_OF)
    over_budget = []
    original = spill.SymbolDayRouter.spill

    def counted(self):
        if self.held_bytes > self.memory_bytes:
            over_budget.append(self.held_bytes)
        original(self)

    monkeypatch.setattr(spill.SymbolDayRouter, "spill", counted)
    monkeypatch.setattr(spill, "ROW_BYTES", 2**16)  # the sample's fills weigh as a big month's
    bounded = tmp_path / "bounded"
    results = archive_symbol_days(
        archive_at(bounded, TierPolicy()), history, wanted, as_of=AS_OF, memory_limit=2**20
    )
    assert len(over_budget) >= 2
    assert all(r.report is not None for r in results)
    for key in wanted:
        assert (
            partition_file(bounded, *key).read_bytes()
            == partition_file(unbounded, *key).read_bytes()
        )
    assert not list((bounded / ".skewtape-staging").rglob("*"))


def test_open_fills_when_a_market_id_is_not_utf8_names_its_row_and_column(tmp_path):
    ids = pa.array([b"M1", b"M\xff"], pa.binary()).view(pa.string())
    ts = pa.array([1751328000 * 10**9] * 2, pa.timestamp("ns", tz="UTC"))
    columns = {"venue": ["kalshi"] * 2, "market_id": ids, "trade_id": ["a", "b"], "ts": ts,
               "price": [0.5, 0.25], "quantity": [1, 2], "taker_side": ["yes", "no"]}  # fmt: skip
    table = pa.table(columns)
    path = tmp_path / "2025-07.parquet"
    pq.write_table(table, path)
    with pytest.raises(TickValidationError) as info:
        snapshot_fills.open_fills(path).read_all()
    assert (info.value.row, info.value.field) == (1, "market_id")
    assert f"{path}: market_id b'M\\xff' is not UTF-8 text" in str(info.value)


# --- the venues of the mirror's fills folders ---------------------------------------------------


def test_read_mirror_venues_when_fills_hold_dot_entries_counts_none_of_them(applied_chain: Path):
    """A file manager's, a copy tool's or an interrupted copy's dot folders in ``fills/`` are
    no venues, for the venues sensor (which keeps a venue key the mirror holds) nor for
    archive-month (whose venue-days are the venues with a month file)."""
    history = applied_chain / "history"
    fills = history / "2026-11" / "fills"
    venues = sorted(p.name for p in fills.iterdir())
    files = month_files(history, "2026-11")
    assert venues and sorted(files) == venues
    for hidden in (".DS_Store", ".tmp", f".{venues[0]}.partial"):
        (fills / hidden).mkdir()
    shutil.copyfile(files[venues[0]], fills / f".{venues[0]}.partial" / "2026-11.parquet")
    (fills / ".hidden-file").write_text("")

    assert read_mirror_venues(history) == (venues, [])
    assert month_files(history, "2026-11") == files


def test_read_mirror_venues_when_a_fills_folder_is_a_file_says_so_apart(applied_chain: Path):
    history = applied_chain / "history"
    venues, _ = read_mirror_venues(history)
    fills = history / "2026-09" / "fills"
    shutil.rmtree(fills)
    fills.write_text("not a folder")
    assert read_mirror_venues(history) == (venues, [(fills, "Not a directory")])


def test_month_files_when_the_newest_fills_folder_is_a_file_names_it_not_an_older_file(
    applied_chain: Path,
):
    """The month file a venue-day is read from is the newest snapshot's: a ``fills/`` that
    cannot be read is named, never passed over for an older snapshot's file (a correction the
    newest snapshot published would go unarchived)."""
    history = applied_chain / "history"
    fills = history / "2026-11" / "fills"
    assert month_files(history, "2026-10")["kalshi"] == fills / "kalshi" / "2026-10.parquet"
    shutil.rmtree(fills)
    fills.write_text("not a folder")
    with pytest.raises(UnreadableFolderError) as raised:
        month_files(history, "2026-10")
    assert str(raised.value).startswith(
        f"{fills}: cannot be read (Not a directory); which venues have 2026-10 fills there "
    )


def test_new_symbols_and_corrections_when_a_fills_file_is_no_parquet_name_it(
    applied_chain: Path,
):
    """A fills file of the month DuckDB cannot open is an UnreadableFileError (what the sensors
    skip a tick on) naming the file and DuckDB's reason, not DuckDB's own error."""
    history = applied_chain / "history"
    corrected = history / "2026-11" / "fills" / "kalshi" / "2026-09.parquet"
    corrected.unlink()
    corrected.write_bytes(b"not a parquet file at all")
    with pytest.raises(UnreadableFileError) as raised:
        new_symbols(history, "2026-11")
    assert str(raised.value).startswith(f"{corrected}: cannot be read as Parquet (")
    assert str(raised.value).endswith("; the symbols it holds cannot be told without it")
    with pytest.raises(UnreadableFileError, match="which of its symbol-days changed"):
        corrected_symbol_days(history, "2026-11")


def test_new_symbols_when_the_manifest_cannot_be_read_names_it_as_an_os_error(
    applied_chain: Path,
):
    """An applied snapshot's manifest the user may not read is an UnreadableFileError (an OS
    error, still a ManifestError) naming it, so the sensors skip their tick on it."""
    with shared_folder() as folder:
        root = folder / "data"
        shutil.copytree(applied_chain, root, symlinks=True)
        manifest = root / "history" / "2026-11" / "manifest.json"
        manifest.chmod(0)
        with as_nobody(), pytest.raises(UnreadableFileError) as raised:
            new_symbols(root / "history", "2026-11")
    assert isinstance(raised.value, ManifestError) and isinstance(raised.value, OSError)
    assert str(raised.value) == f"{manifest}: cannot be read (Permission denied)"


def test_month_files_when_a_venue_folder_cannot_be_read_names_it(applied_chain: Path):
    with shared_folder() as folder:
        root = folder / "data"
        shutil.copytree(applied_chain, root, symlinks=True)
        history = root / "history"
        locked = history / "2026-11" / "fills" / "kalshi"
        locked.chmod(0)
        with as_nobody(), pytest.raises(UnreadableFolderError) as raised:
            month_files(history, "2026-10")
        locked.chmod(0o755)
    assert str(raised.value).startswith(
        f"{locked}: cannot be read (Permission denied); whether it holds 2026-10.parquet "
    )


def test_archive_symbol_days_when_a_write_fails_records_no_policy_given(
    applied_chain: Path, tmp_path: Path, monkeypatch
):
    """Under ``Archive.writing`` (as ``archive-month`` and the asset run it), the policy given is
    recorded once the whole run succeeded: the removal step, run before the symbol-days are
    written, used to record it by itself (its own ``writing``, on a copy of the core), so a run
    that failed afterwards left the policy recorded."""
    history = applied_chain / "history"
    wanted = busiest_symbol_days(history / "2026-10" / "fills/kalshi/2026-10.parquet", 1)
    out = tmp_path / "archive"
    archive = archive_at(out, TierPolicy(hot_max_age_days=3))

    def failed(*args, **kwargs):
        raise OSError("the disk went away")

    monkeypatch.setattr(snapshot_fills, "compact_planned", failed)
    with pytest.raises(OSError, match="the disk went away"), archive.writing():
        archive_symbol_days(archive, history, wanted, as_of=AS_OF)
    assert not (out / POLICY_RECORD).exists()
    monkeypatch.undo()
    with archive.writing():
        archive_symbol_days(archive, history, wanted, as_of=AS_OF)
    assert Archive(out).policy == TierPolicy(hot_max_age_days=3)

"""Re-tiering: hot -> warm -> cold, the view unchanged, crashes at every step, audit, reports."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.errors import ArchiveBusyError, ConfigError, TickFormatError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.show import relocated_report
from skewtape_pipeline.ticks.archive.store.books import EVENT_COMMIT, EVENT_REMOVE, EVENT_REWRITE
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.consolidate import read_consolidated_file
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_LOCK_FILE
from skewtape_pipeline.ticks.archive.store.placement import archive_metrics, locate, scan_hot_files
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline_tests.test_fsio import hold_in_another_process
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    SYMBOLS,
    Crash,
    all_recorded,
    archive_files,
    audit_events,
    build_archive,
    copy_data,
    crash_at,
    day_ticks,
    expected_rows,
    files_under,
    tiers_by_day,
    view_rows,
    write_four_day_csv,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at


def expected_tier(day: date, as_of: date) -> str:
    return POLICY.tier_for((as_of - day).days)


def test_retier_when_days_age_through_tiers_view_returns_same_rows_at_each_stage(
    tmp_path, no_fsync
):
    root = build_archive(tmp_path, as_of=STAGE_1)
    assert view_rows(root) == expected_rows()
    assert set(tiers_by_day(root).values()) == {HOT}

    first = Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert view_rows(root) == expected_rows()
    assert tiers_by_day(root) == {(s, d): expected_tier(d, STAGE_1) for s in SYMBOLS for d in DAYS}
    assert first.committed and len(first.moved) == len(SYMBOLS) * (len(DAYS) - 1)
    hot_left = {(h.symbol, h.day) for h in scan_hot_files(root)}
    assert hot_left == {(s, DAYS[-1]) for s in SYMBOLS}  # moved hot files are gone

    between = STAGE_1 + timedelta(days=4)  # two of the warm month's days turn cold
    partial = Archive(root, policy=POLICY).retier(as_of=between)
    assert view_rows(root) == expected_rows()
    assert tiers_by_day(root) == {(s, d): expected_tier(d, between) for s in SYMBOLS for d in DAYS}
    assert {(m.from_tier, m.to_tier) for m in partial.moved} == {(WARM, COLD), (HOT, WARM)}
    assert len(partial.files_written) == 2 and len(partial.files_removed) == len(SYMBOLS)
    assert len(partial.files_retained) == 2  # the replaced files: past versions read them

    second = Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    assert view_rows(root) == expected_rows()
    assert set(tiers_by_day(root).values()) == {COLD}
    assert {m.from_tier for m in second.moved} == {WARM}
    assert scan_hot_files(root) == []
    warm_root = POLICY.root_for(WARM, root)
    assert list(warm_root.rglob("*.parquet"))  # replaced, kept: past versions read it
    Archive(root, policy=POLICY, audit_log=None).versions.prune(keep_last=1)
    assert list(warm_root.rglob("*.parquet")) == []  # the warm file was replaced and removed
    catalog = CatalogStore(root).read()
    assert {f.tier for f in catalog.files.values()} == {COLD}


def test_retier_when_run_again_changes_nothing(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    before = files_under(tmp_path)
    again = Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert not again.committed and again.moved == [] and again.files_removed == []
    assert files_under(tmp_path) == before


def test_retier_when_moving_writes_sorted_row_groups_on_symbol_day_boundaries(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_2)
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    (cold,) = [
        ArchiveTiers.of(root).resolve(f.path) for f in CatalogStore(root).read().files.values()
    ]
    parts = read_consolidated_file(cold)
    assert [(p.symbol, p.day) for p in parts] == sorted((s, d) for s in SYMBOLS for d in DAYS)
    meta = pq.read_metadata(cold)
    ends, row = set(), 0
    for g in range(meta.num_row_groups):
        row += meta.row_group(g).num_rows
        ends.add(row)
    boundaries, row = set(), 0
    for part in parts:
        row += len(part.batch)
        boundaries.add(row)
    assert meta.num_row_groups > 3
    assert ends <= boundaries  # no row group ends inside a symbol-day


def test_retier_when_moving_appends_rewrite_commit_and_removal_to_audit_log(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    result = Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    events = audit_events(root)
    rewrites = [e for e in events if e["event"] == EVENT_REWRITE]
    commits = [e for e in events if e["event"] == EVENT_COMMIT]
    removals = [e for e in events if e["event"] == EVENT_REMOVE]
    assert len(rewrites) == len(result.files_written) == 2  # the warm month, the cold year
    assert [c["generation"] for c in commits] == [1, 1]  # the move, then forgetting stamps
    assert commits[1]["symbol_days_moved"] == 0 and "stamps" in commits[1]["reason"]
    assert {ArchiveTiers.of(root).resolve(e["file"]) for e in removals} == {
        tmp_path / "archive" / os.path.relpath(p, root) for p in result.files_removed
    }
    sources = {s["file"] for e in rewrites for s in e["sources"]}
    assert {ArchiveTiers.of(root).resolve(s) for s in sources} == set(result.files_removed)
    assert events.index(commits[0]) < events.index(removals[0])  # nothing removed before


class _RecordedTiers:
    """An archive's tiers that record every attribute read of them (methods and values)."""

    def __init__(self, tiers: ArchiveTiers, events: list[str]):
        self._tiers, self._events = tiers, events

    def __getattr__(self, name: str):
        self._events.append(f"tiers.{name}")
        return getattr(self._tiers, name)


def test_retier_when_carrying_out_its_plan_reads_no_tiers_and_lists_stores_once_after_commit(
    tmp_path, no_fsync
):
    root = build_archive(tmp_path, as_of=STAGE_1)
    events: list[str] = []
    archive = Archive(root, policy=POLICY)
    recorded = _RecordedTiers(ArchiveTiers.of(root, POLICY), events)
    archive.core.tiers = archive.core.garbage.tiers = recorded  # type: ignore[assignment]
    with faults.installed(events.append):
        result = archive.retier(as_of=STAGE_1)

    assert len(result.files_written) == 2  # the second file's sources read after the first
    first_step = next(i for i, e in enumerate(events) if not e.startswith("tiers."))
    commit = events.index("committed")
    assert [e for e in events[first_step:commit] if e.startswith("tiers.")] == []
    assert events[commit:].count("tiers.listing") == 1  # the garbage, listed once
    assert set(events[commit:]) & {"tiers.resolve", "tiers.relative", "tiers.placement"} == set()
    assert any(e.startswith("tiers.") for e in events[:first_step])  # resolved when planning


@pytest.mark.parametrize("stage", [1, 2])
def test_retier_when_crashing_at_each_step_keeps_every_tick_once_and_rerun_finishes(
    tmp_path, no_fsync, stage
):
    base = build_archive(tmp_path / "base", as_of=STAGE_1)
    if stage == 2:
        Archive(base, policy=POLICY).retier(as_of=STAGE_1)
    as_of = STAGE_1 if stage == 1 else STAGE_2
    clean = copy_data(base.parent, tmp_path / "clean")
    names: list[str] = []
    with faults.installed(names.append):
        Archive(clean, policy=POLICY).retier(as_of=as_of)
    removals = [i for i, n in enumerate(names) if n.startswith("removed:")]
    points = [i for i, n in enumerate(names) if not n.startswith("removed:")]
    points += [removals[0], removals[-1]]
    assert {"committed", "audited-removals"} <= set(names) and len(removals) > 2

    for point in points:
        work = copy_data(base.parent, tmp_path / f"crash-{point}")
        crash = crash_at(point)
        with pytest.raises(Crash), faults.installed(crash):
            Archive(work, policy=POLICY).retier(as_of=as_of)
        assert view_rows(work) == expected_rows(), f"after a crash at {names[point]}"
        Archive(work, policy=POLICY).retier(as_of=as_of)
        assert view_rows(work) == expected_rows()
        assert all_recorded(work), f"after the rerun of a crash at {names[point]}"
        assert archive_files(work.parent) == archive_files(clean.parent), (
            f"rerun after a crash at {names[point]} did not finish the move"
        )
        verify_audit_log(work.parent / "audit.jsonl")


def test_retier_when_new_file_does_not_verify_commits_and_removes_nothing(
    tmp_path, no_fsync, monkeypatch
):
    from skewtape_pipeline.errors import RoundTripError
    from skewtape_pipeline.ticks.archive.store import consolidate

    root = build_archive(tmp_path, as_of=STAGE_1)
    before = files_under(tmp_path)
    real = consolidate.consolidated_table

    def one_row_short(parts):
        table = real(parts)
        return table.slice(0, table.num_rows - 1)

    monkeypatch.setattr(consolidate, "consolidated_table", one_row_short)
    with pytest.raises(RoundTripError):
        Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    data = [f for f in files_under(tmp_path) if f.endswith(".parquet")]
    assert data == [f for f in before if f.endswith(".parquet")]
    assert CatalogStore(root).read().generation == 0 and not (tmp_path / "audit.jsonl").exists()
    assert view_rows(root) == expected_rows()


def test_view_when_hot_file_rewritten_after_move_shows_newer_copy_once(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_2)
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    symbol, day = SYMBOLS[0], DAYS[0]
    newer = day_ticks(symbol, day).slice(0, 1)  # a correction: one tick left that day
    compact_symbol_day(
        archive_at(root, POLICY).core,
        newer,
        SymbolDayWrite(symbol=symbol, day=day, age_days=(STAGE_2 - day).days),
    )
    wanted = [r for r in expected_rows() if (r[0], r[1]) != (symbol, day)]
    wanted = sorted(wanted + [r for r in expected_rows() if (r[0], r[1]) == (symbol, day)][:1])
    assert view_rows(root) == wanted
    assert tiers_by_day(root)[(symbol, day)] == HOT

    result = Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    assert [(m.symbol, m.date, m.from_tier) for m in result.moved] == [(symbol, day, HOT)]
    assert view_rows(root) == wanted
    assert tiers_by_day(root)[(symbol, day)] == COLD
    assert scan_hot_files(root) == []


def test_retier_when_months_given_moves_only_symbol_days_of_those_months(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_2)
    result = Archive(root, policy=POLICY).retier(as_of=STAGE_2, months=["2026-01"])
    assert {m.date.month for m in result.moved} == {1}
    tiers = tiers_by_day(root)
    assert {t for (s, d), t in tiers.items() if d.month == 1} == {COLD}
    assert {t for (s, d), t in tiers.items() if d.month == 2} == {HOT}
    assert view_rows(root) == expected_rows()


def test_retier_when_consolidated_file_changed_on_disk_refuses(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    (warm,) = [
        ArchiveTiers.of(root).resolve(f.path)
        for f in CatalogStore(root).read().files.values()
        if f.tier == WARM
    ]
    warm.chmod(0o644)
    data = bytearray(warm.read_bytes())
    data[10] ^= 0xFF
    warm.write_bytes(bytes(data))
    with pytest.raises(TickFormatError, match="sha256"):
        Archive(root, policy=POLICY).retier(as_of=STAGE_2)


def test_retier_when_lock_held_raises_archive_busy_naming_the_holder(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1, days=DAYS[:1])
    held = fsio.exclusive_lock(root / ARCHIVE_LOCK_FILE, what="compacting")
    with held, pytest.raises(ArchiveBusyError, match=r"held by compacting .*refused re-tiering"):
        Archive(root, policy=POLICY).retier(as_of=STAGE_1)


@pytest.mark.parametrize(
    "arguments",
    [{"as_of": None}, {"as_of": STAGE_1, "months": ["2026-13"]}],
    ids=["as_of", "months"],
)
def test_retier_when_its_arguments_are_refused_leaves_the_lock_file_as_it_was(
    tmp_path, no_fsync, arguments
):
    root = build_archive(tmp_path, as_of=STAGE_1)
    lock = root / ARCHIVE_LOCK_FILE
    before = (lock.read_bytes(), lock.stat().st_mtime_ns)

    with pytest.raises(ConfigError):
        Archive(root, policy=POLICY).retier(**arguments)
    assert (lock.read_bytes(), lock.stat().st_mtime_ns) == before


def test_plan_retier_when_as_of_before_ticks_raises(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1, days=DAYS[:1])
    with pytest.raises(ConfigError, match="after it"):
        Archive(root, policy=POLICY).plan_retier(as_of=DAYS[0] - timedelta(days=1))
    with pytest.raises(ConfigError, match="YYYY-MM"):
        Archive(root, policy=POLICY).plan_retier(as_of=STAGE_1, months=["2026-13"])


def test_plan_retier_months_when_days_are_due_names_exactly_their_months(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    assert Archive(root, policy=POLICY).plan_retier(as_of=STAGE_1).months() == [
        "2026-01",
        "2026-02",
    ]
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert Archive(root, policy=POLICY).plan_retier(as_of=STAGE_1).months() == []
    between = STAGE_1 + timedelta(days=4)  # only February's days change tier
    assert Archive(root, policy=POLICY).plan_retier(as_of=between).months() == ["2026-02"]


def test_plan_retier_when_policy_makes_tiers_warmer_holds_symbol_days(tmp_path, no_fsync):
    from dataclasses import replace

    root = build_archive(tmp_path, as_of=STAGE_2)
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    warmer = replace(POLICY, hot_max_age_days=100, warm_max_age_days=200)
    plan = Archive(root, policy=warmer).plan_retier(as_of=STAGE_2)
    assert plan.moves == [] and plan.rewrites == []
    assert len(plan.held) == len(SYMBOLS) * len(DAYS)


def test_relocated_report_when_moved_names_consolidated_file_and_honest_share(tmp_path, no_fsync):
    root = tmp_path / "archive"
    reports = [
        compact_symbol_day(
            archive_at(root, POLICY).core,
            day_ticks(s, d),
            SymbolDayWrite(symbol=s, day=d, age_days=(STAGE_2 - d).days),
        )
        for s in SYMBOLS
        for d in DAYS
    ]
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    moved = [relocated_report(r, Archive(root).core) for r in reports]
    (cold,) = {m.path for m in moved}
    assert {m.tier for m in moved} == {COLD}
    assert sum(m.compacted_size_bytes for m in moved) == os.path.getsize(cold)
    for before, after in zip(reports, moved, strict=True):
        assert after.compression_ratio == pytest.approx(
            after.raw_size_bytes / after.compacted_size_bytes
        )
        assert after.tick_count == before.tick_count
        assert "consolidated" in after.notes[-1]
    assert sum(m.compacted_size_bytes for m in moved) < sum(
        r.compacted_size_bytes for r in reports
    )  # thin symbol-days share one footer
    busy = next(m for m in moved if (m.symbol, m.date) == ("ES", DAYS[1].isoformat()))
    assert busy.compacted_size_bytes == max(m.compacted_size_bytes for m in moved)
    location = locate(ArchiveTiers.of(root), "ES", DAYS[1])
    assert location is not None and location.bytes == busy.compacted_size_bytes


def test_archive_metrics_when_retiered_counts_bytes_files_and_ticks_per_tier(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    before = archive_metrics(ArchiveTiers.of(root, POLICY))
    total_ticks = len(expected_rows())
    assert before.tiers[HOT].ticks == total_ticks and before.tiers[HOT].files == 18
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    after = archive_metrics(ArchiveTiers.of(root, POLICY)).to_dict()
    assert after["hot_files"] == len(SYMBOLS) and after["warm_files"] == 1
    assert after["cold_files"] == 1
    assert after["hot_ticks"] + after["warm_ticks"] + after["cold_ticks"] == total_ticks
    on_disk = {
        tier: sum(p.stat().st_size for p in POLICY.root_for(tier, root).rglob("*.parquet"))
        for tier in (WARM, COLD)
    }
    assert (after["warm_bytes"], after["cold_bytes"]) == (on_disk[WARM], on_disk[COLD])
    assert after["retained_files"] == 0


def rearchive(root, symbol: str, day: date, *, correct: bool = False) -> None:
    """Compact ``symbol`` on ``day`` again (as a re-run from the UI does), its ticks corrected
    to their first one when ``correct``."""
    ticks = day_ticks(symbol, day)
    compact_symbol_day(
        archive_at(root, POLICY).core,
        ticks.slice(0, 1) if correct else ticks,
        SymbolDayWrite(symbol=symbol, day=day, age_days=(STAGE_1 - day).days),
    )


def test_retier_when_cold_day_rearchived_and_month_retiered_earlier_returns_it_to_cold(
    tmp_path, no_fsync
):
    root = build_archive(tmp_path, as_of=STAGE_2)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    (cold_before,) = CatalogStore(root).read().files
    day = DAYS[2]  # February 2nd: cold at STAGE_2, warm by its age at STAGE_1
    assert expected_tier(day, STAGE_1) == WARM
    rearchive(root, SYMBOLS[0], day, correct=True)
    for symbol in SYMBOLS[1:]:
        rearchive(root, symbol, day)  # the same ticks again

    result = Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_1, months=["2026-02"])

    assert [(m.symbol, m.date, m.from_tier, m.to_tier) for m in result.moved] == [
        (SYMBOLS[0], day, HOT, COLD)
    ]
    assert set(tiers_by_day(root).values()) == {COLD}
    (cold_after,) = CatalogStore(root).read().files
    assert cold_after != cold_before and len(result.files_written) == 1
    assert scan_hot_files(root) == []
    corrected = [r for r in expected_rows() if (r[0], r[1]) == (SYMBOLS[0], day)][:1]
    others = [r for r in expected_rows() if (r[0], r[1]) != (SYMBOLS[0], day)]
    assert view_rows(root) == sorted(others + corrected)


def test_retier_when_cold_day_rearchived_unchanged_rewrites_no_file(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_2)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    catalog = CatalogStore(root).read()
    for symbol in SYMBOLS:
        rearchive(root, symbol, DAYS[2])

    result = Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_1, months=["2026-02"])

    assert result.moved == [] and result.files_written == [] and result.files_reused == []
    assert set(CatalogStore(root).read().files) == set(catalog.files)
    assert set(tiers_by_day(root).values()) == {COLD}
    assert view_rows(root) == expected_rows()


def test_retier_when_crashed_writers_left_temporary_files_removes_only_theirs(tmp_path, no_fsync):
    """A writer killed while writing the hot index or a version file left its temporary file
    there for good (only the staging folder and catalog temps were cleaned)."""
    import subprocess

    root = build_archive(tmp_path, as_of=STAGE_1)
    dead = subprocess.Popen(["true"])
    dead.wait()  # its pid names no process any more
    folders = [root, root / "_skewtape_versions" / "records", root / "_skewtape_versions" / "tags"]
    left, live = [], []
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        left.append(folder / f"._skewtape_hot_index.pq.{dead.pid}{fsio.TEMP_MARKER}")
        live.append(folder / f".a-live-writers-file.{os.getpid()}{fsio.TEMP_MARKER}")
        for path in (left[-1], live[-1]):
            path.write_bytes(b"half")
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert [p for p in left if p.exists()] == []
    assert all(p.exists() for p in live)  # a live writer's is never taken


@pytest.mark.parametrize("verb", ["retier", "compact-ticks", "tag"])
def test_cli_when_waiting_for_the_lock_says_so_in_its_log_then_goes_on(hot_only, verb):
    ticks = write_four_day_csv(hot_only.parent / "ticks.csv")
    arguments = {
        "retier": [str(hot_only), "--as-of", "2026-12-01", "--wait", "60"],
        "compact-ticks": [str(ticks), "--out", str(hot_only), "--as-of", "2025-12-05"],
        "tag": [str(hot_only), "paper", "--wait", "60"],
    }[verb]
    holder = hold_in_another_process(hot_only / ARCHIVE_LOCK_FILE, hot_only.parent / "held")
    command = [str(Path(sys.executable).parent / "skewtape-pipeline"), verb, *arguments]
    waiting = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    try:
        first = waiting.stderr.readline().decode()  # a line every 10 s off a terminal
    finally:
        holder.kill()
        holder.wait()
    rest = waiting.communicate(timeout=120)[1].decode()
    assert first.startswith(f"{verb}: waiting for {hot_only / ARCHIVE_LOCK_FILE}, held by ")
    assert "re-tiering" in first and "s (" in first
    assert waiting.returncode == 0, rest

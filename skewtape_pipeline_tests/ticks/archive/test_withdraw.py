"""Withdrawn symbol-days: hidden at once, purged by re-tiering, crash-safe; stale source stamps."""

from __future__ import annotations

import contextlib
import os
import shutil
from datetime import date
from pathlib import Path

import pytest

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.errors import ArchiveBusyError, ConfigError, WriteOnceError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.show import show_symbol_day
from skewtape_pipeline.ticks.archive.store.books import (
    EVENT_REFUSED,
    EVENT_REMOVE,
    EVENT_WITHDRAW,
    default_audit_log,
)
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.consolidate import read_consolidated_file
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.placement import (
    archive_metrics,
    archive_state,
    locate,
    locations,
    scan_hot_files,
)
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline_tests.ticks.archive_builders import (
    BUSY,
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
    crash_at_name,
    day_ticks,
    expected_rows,
    files_under,
    settled_files,
    tiers_by_day,
    view_rows,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at

COLD_KEY = BUSY  # ("ES", DAYS[1]): cold at STAGE_1, spans row groups
WARM_KEY = ("CL/F", DAYS[3])
HOT_KEY = ("KX-25MAR", DAYS[-1])  # still hot at STAGE_1: never catalogued


def without(keys) -> list[tuple]:
    """The rows the view must return once ``keys`` are withdrawn."""
    return [row for row in expected_rows() if (row[0], row[1]) not in set(keys)]


def contents(folder: Path, *, audit: bool = True) -> dict[str, bytes]:
    """Every file below ``folder`` (but the lock file; the audit log's only when ``audit``)
    and its bytes."""
    return {
        p: (folder / p).read_bytes()
        for p in files_under(folder)
        if not p.endswith(".lock") and (audit or not p.startswith("audit.jsonl"))
    }


def retiered(folder: Path, as_of: date = STAGE_1) -> Path:
    root = build_archive(folder, as_of=as_of)
    Archive(root, policy=POLICY).retier(as_of=as_of)
    return root


def consolidated_keys(root: Path) -> set[tuple[str, date]]:
    """Symbol-days inside the catalogued consolidated files (read from the files)."""
    catalog = CatalogStore(root).read()
    return {
        (part.symbol, part.day)
        for item in catalog.files.values()
        for part in read_consolidated_file(ArchiveTiers.of(root).resolve(item.path))
    }


def test_withdraw_when_days_are_warm_and_cold_view_lacks_exactly_their_ticks(tmp_path, no_fsync):
    root = retiered(tmp_path)
    assert tiers_by_day(root)[COLD_KEY] == COLD and tiers_by_day(root)[WARM_KEY] == WARM
    generation = CatalogStore(root).read().generation

    done = Archive(root).withdraw([WARM_KEY, COLD_KEY, HOT_KEY, ("NQ", DAYS[0])])

    assert done == sorted([WARM_KEY, COLD_KEY])  # the hot and unknown keys are ignored
    assert view_rows(root) == without([WARM_KEY, COLD_KEY])
    catalog = CatalogStore(root).read()
    assert catalog.withdrawn == {WARM_KEY, COLD_KEY} and catalog.generation == generation + 1
    assert (
        locate(ArchiveTiers.of(root), *COLD_KEY) is None
        and locate(ArchiveTiers.of(root), *WARM_KEY) is None
    )
    assert locate(ArchiveTiers.of(root), *HOT_KEY) is not None  # a hot day is not touched
    listed = {(loc.symbol, loc.date) for loc in locations(ArchiveTiers.of(root))}
    assert listed == {(s, d) for s in SYMBOLS for d in DAYS} - {WARM_KEY, COLD_KEY}
    [event] = [e for e in audit_events(root) if e["event"] == EVENT_WITHDRAW]
    assert event["symbol_days"] == [[s, d.isoformat()] for s, d in done]
    assert event["generation"] == catalog.generation


def test_withdraw_when_run_again_changes_nothing(tmp_path, no_fsync):
    root = retiered(tmp_path)
    Archive(root).withdraw([COLD_KEY])
    before = contents(tmp_path)
    assert Archive(root).withdraw([COLD_KEY]) == []
    assert contents(tmp_path) == before  # the catalog and the audit log included


def test_withdraw_when_archive_has_no_catalog_writes_nothing(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1, days=DAYS[:1])
    before = files_under(tmp_path)
    assert Archive(root).withdraw([("ES", DAYS[0])]) == []
    assert files_under(tmp_path) == before


def test_withdraw_when_key_is_not_a_symbol_day_raises_config_error(tmp_path, no_fsync):
    root = retiered(tmp_path)
    before = contents(tmp_path)
    with pytest.raises(ConfigError, match="not a"):
        Archive(root).withdraw([COLD_KEY, ("ES", "2026-01-30")])
    assert contents(tmp_path) == before


def test_retier_when_symbol_days_withdrawn_rewrites_their_files_without_them(tmp_path, no_fsync):
    root = retiered(tmp_path)
    Archive(root).withdraw([COLD_KEY, WARM_KEY])
    old_files = set(CatalogStore(root).read().files)

    result = Archive(root, policy=POLICY).retier(as_of=STAGE_1)

    assert result.committed and result.purged == sorted([COLD_KEY, WARM_KEY])
    assert result.moved == []  # nothing changed tier
    catalog = CatalogStore(root).read()
    assert catalog.withdrawn == frozenset()
    assert COLD_KEY not in catalog.partitions and WARM_KEY not in catalog.partitions
    assert not old_files & set(catalog.files)  # both files were rewritten
    expected_keys = {(s, d) for s in SYMBOLS for d in DAYS[:-1]} - {COLD_KEY, WARM_KEY}
    assert consolidated_keys(root) == expected_keys
    assert view_rows(root) == without([COLD_KEY, WARM_KEY])
    assert all(
        ArchiveTiers.of(root).resolve(old).exists() for old in old_files
    )  # past versions read them
    Archive(root, policy=POLICY).versions.prune(keep_last=1)
    assert not any(ArchiveTiers.of(root).resolve(old).exists() for old in old_files)
    again = Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert not again.committed and again.purged == [] and again.files_removed == []


def test_retier_when_every_symbol_day_of_a_file_withdrawn_empties_it(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_2, days=DAYS[:1])
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    (cold,) = [
        ArchiveTiers.of(root).resolve(f.path) for f in CatalogStore(root).read().files.values()
    ]
    Archive(root).withdraw([(s, DAYS[0]) for s in SYMBOLS])
    assert view_rows(root) == []

    result = Archive(root, policy=POLICY).retier(as_of=STAGE_2)

    assert result.committed and len(result.purged) == len(SYMBOLS)
    assert (
        CatalogStore(root).read().files == {} and CatalogStore(root).read().withdrawn == frozenset()
    )
    assert cold.exists() and cold in result.files_retained  # past versions read it
    assert view_rows(root) == []
    assert cold in Archive(root, policy=POLICY).versions.prune(keep_last=1).files_removed
    assert not cold.exists()


def test_retier_when_months_exclude_a_withdrawn_day_keeps_it_hidden_and_marked(tmp_path, no_fsync):
    root = retiered(tmp_path, as_of=STAGE_2)  # one cold file holds both months
    january, february = ("ES", DAYS[0]), ("ES", DAYS[-1])
    Archive(root).withdraw([january, february])

    result = Archive(root, policy=POLICY).retier(as_of=STAGE_2, months=["2026-02"])

    assert result.purged == [february]
    assert CatalogStore(root).read().withdrawn == {
        january
    }  # carried into the new file, still hidden
    assert view_rows(root) == without([january, february])
    assert Archive(root, policy=POLICY).retier(as_of=STAGE_2).purged == [january]
    assert view_rows(root) == without([january, february])


def test_retier_when_crashing_while_purging_withdrawn_days_never_shows_them(tmp_path, no_fsync):
    base = build_archive(tmp_path / "base", as_of=STAGE_1)
    with pytest.raises(Crash), faults.installed(crash_at_name("audited-removals")):
        Archive(base, policy=POLICY).retier(as_of=STAGE_1)  # committed; superseded hot copies stay
    assert partition_file(base, *COLD_KEY) in {h.path for h in archive_state(base).hot_superseded}
    Archive(base).withdraw([COLD_KEY, WARM_KEY])
    wanted = without([COLD_KEY, WARM_KEY])
    assert view_rows(base) == wanted

    clean = copy_linking_parquet(base.parent, tmp_path / "clean")
    names: list[str] = []
    with faults.installed(names.append):
        result = Archive(clean, policy=POLICY).retier(as_of=STAGE_2)
    assert partition_file(clean, *COLD_KEY) in result.files_removed
    assert names.index(f"removed:{partition_file(clean, *COLD_KEY).name}") < names.index(
        "committed"
    )  # the withdrawn hot copy goes before the commit that unlists the day
    assert view_rows(clean) == wanted

    for point, name in enumerate(names):
        work = copy_linking_parquet(base.parent, tmp_path / f"crash-{point}")
        with pytest.raises(Crash), faults.installed(crash_at(point)):
            Archive(work, policy=POLICY).retier(as_of=STAGE_2)
        assert view_rows(work) == wanted, f"after a crash at {name}"
        Archive(work, policy=POLICY).retier(as_of=STAGE_2)
        assert view_rows(work) == wanted, f"after the rerun of a crash at {name}"
        assert all_recorded(work), f"after the rerun of a crash at {name}"
        assert archive_files(work.parent) == archive_files(clean.parent), (
            f"rerun after a crash at {name} did not finish"
        )
        assert CatalogStore(work).read().withdrawn == frozenset()
        verify_audit_log(work.parent / "audit.jsonl")


def test_withdraw_when_crashing_before_the_catalog_is_replaced_changes_nothing_visible(
    tmp_path, no_fsync
):
    base = retiered(tmp_path / "base")
    names: list[str] = []
    clean = copy_data(base.parent, tmp_path / "clean")
    with faults.installed(names.append):
        Archive(clean).withdraw([COLD_KEY])
    assert names  # the audit append and the catalog rename are checkpoints
    committed = names.index("publish:_skewtape_catalog.parquet")  # then the version follows
    for point, name in enumerate(names[: committed + 1]):
        work = copy_data(base.parent, tmp_path / f"crash-{point}")
        with pytest.raises(Crash), faults.installed(crash_at(point)):
            Archive(work).withdraw([COLD_KEY])
        assert view_rows(work) == expected_rows(), f"after a crash at {name}"
        assert Archive(work).withdraw([COLD_KEY]) == [COLD_KEY]
        assert view_rows(work) == without([COLD_KEY])
        assert settled_files(work) == settled_files(clean)  # no temporary left behind


def copy_linking_parquet(source: Path, target: Path) -> Path:
    """Copy a data folder, hard-linking its Parquet files (never changed in place) so a hot
    file keeps the inode its catalog stamp names; returns the copy's archive root."""

    def link_or_copy(src: str, dst: str) -> None:
        if src.endswith(".parquet"):
            os.link(src, dst)
        else:
            shutil.copy2(src, dst)

    shutil.copytree(source, target, copy_function=link_or_copy)
    return target / "archive"


def test_withdraw_when_books_and_records_refuses_and_changes_nothing(tmp_path, no_fsync):
    root = retiered(tmp_path)
    Archive(root, audit_log=default_audit_log(root)).core.books.enable()
    before = contents(tmp_path, audit=False)
    with pytest.raises(WriteOnceError, match="delete refused") as refused:
        Archive(root).withdraw([COLD_KEY])
    assert refused.value.path == ArchiveTiers.of(root).resolve(
        CatalogStore(root).read().partitions[COLD_KEY].file
    )
    assert contents(tmp_path, audit=False) == before
    assert audit_events(root)[-1]["event"] == EVENT_REFUSED
    assert view_rows(root) == expected_rows()


@pytest.mark.parametrize("same_ticks", [True, False], ids=["same-ticks", "new-ticks"])
def test_withdraw_when_ticks_are_re_added_later_they_come_back(tmp_path, no_fsync, same_ticks):
    root = retiered(tmp_path, as_of=STAGE_2)
    Archive(root).withdraw([COLD_KEY])
    batch = day_ticks(*COLD_KEY) if same_ticks else day_ticks(*COLD_KEY).slice(0, 3)
    compact_symbol_day(
        archive_at(root, POLICY).core,
        batch,
        SymbolDayWrite(symbol=COLD_KEY[0], day=COLD_KEY[1], age_days=(STAGE_2 - COLD_KEY[1]).days),
    )
    back = [r for r in expected_rows() if (r[0], r[1]) == COLD_KEY][: len(batch)]
    wanted = sorted(without([COLD_KEY]) + back)
    assert view_rows(root) == wanted
    assert tiers_by_day(root)[COLD_KEY] == HOT
    location = locate(ArchiveTiers.of(root), *COLD_KEY)
    assert location is not None and location.tier == HOT and location.rows == len(batch)

    result = Archive(root, policy=POLICY).retier(as_of=STAGE_2)

    assert [(m.symbol, m.date, m.from_tier) for m in result.moved] == [(*COLD_KEY, HOT)]
    assert view_rows(root) == wanted and tiers_by_day(root)[COLD_KEY] == COLD
    assert CatalogStore(root).read().withdrawn == frozenset() and scan_hot_files(root) == []


def test_archive_metrics_when_withdrawn_counts_bytes_on_disk_and_visible_ticks(tmp_path, no_fsync):
    root = retiered(tmp_path)
    before = archive_metrics(ArchiveTiers.of(root, POLICY))
    Archive(root).withdraw([COLD_KEY])
    hidden = archive_metrics(ArchiveTiers.of(root, POLICY))
    rows = len(day_ticks(*COLD_KEY))
    assert hidden.tiers[COLD].bytes == before.tiers[COLD].bytes  # still inside the cold file
    assert hidden.tiers[COLD].files == before.tiers[COLD].files
    assert hidden.tiers[COLD].ticks == before.tiers[COLD].ticks - rows
    assert hidden.tiers[COLD].symbol_days == before.tiers[COLD].symbol_days - 1
    assert (hidden.hidden_symbol_days, hidden.hidden_ticks) == (1, rows)
    assert hidden.to_dict()["total_ticks"] == len(without([COLD_KEY]))

    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    Archive(root, policy=POLICY).versions.prune(keep_last=1)  # past versions read the old cold file
    after = archive_metrics(ArchiveTiers.of(root, POLICY))
    on_disk = sum(p.stat().st_size for p in POLICY.root_for(COLD, root).rglob("*.parquet"))
    assert after.tiers[COLD].bytes == on_disk < before.tiers[COLD].bytes
    assert after.tiers[COLD].ticks == hidden.tiers[COLD].ticks
    assert (after.hidden_symbol_days, after.hidden_ticks) == (0, 0)


def test_retier_when_moved_hot_files_are_removed_forgets_their_stamps(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    with pytest.raises(Crash), faults.installed(crash_at_name("audited-removals")):
        Archive(root, policy=POLICY).retier(as_of=STAGE_1)  # committed, nothing removed yet
    stamped = [p for p in CatalogStore(root).read().partitions.values() if p.source is not None]
    assert stamped and len(stamped) == len(CatalogStore(root).read().partitions)  # hot files exist

    Archive(root, policy=POLICY).retier(as_of=STAGE_1)  # the rerun removes them, then the stamps

    assert all(p.source is None for p in CatalogStore(root).read().partitions.values())
    assert view_rows(root) == expected_rows()


def test_retier_when_books_and_records_keeps_stamps_of_retained_hot_files(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    Archive(root, audit_log=default_audit_log(root)).core.books.enable()
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    partitions = CatalogStore(root).read().partitions.values()
    assert all(p.source is not None for p in partitions)
    assert view_rows(root) == expected_rows()  # the retained hot files stay superseded


def test_view_when_hot_file_recompacted_after_stamp_dropped_shows_newer_copy(tmp_path, no_fsync):
    root = retiered(tmp_path)
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    key = ("ES", DAYS[0])
    assert CatalogStore(root).read().partitions[key].source is None
    newer = day_ticks(*key).slice(0, 1)
    compact_symbol_day(
        archive_at(root, POLICY).core,
        newer,
        SymbolDayWrite(symbol=key[0], day=key[1], age_days=(STAGE_2 - key[1]).days),
    )
    wanted = sorted(without([key]) + [r for r in expected_rows() if (r[0], r[1]) == key][:1])
    assert view_rows(root) == wanted and tiers_by_day(root)[key] == HOT
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    assert view_rows(root) == wanted and tiers_by_day(root)[key] == COLD
    assert CatalogStore(root).read().partitions[key].rows == 1


def test_remove_symbol_days_when_hot_and_cold_days_go_neither_is_in_the_view(tmp_path, no_fsync):
    root = retiered(tmp_path)
    assert partition_file(root, *HOT_KEY).exists()

    removals = Archive(root).remove([COLD_KEY, HOT_KEY])

    assert [(r.symbol, r.day, r.removed_file, r.withdrawn) for r in removals] == sorted(
        [(*COLD_KEY, False, True), (*HOT_KEY, True, False)]
    )
    assert not partition_file(root, *HOT_KEY).exists()
    assert view_rows(root) == without([COLD_KEY, HOT_KEY])
    again = Archive(root).remove([COLD_KEY, HOT_KEY])  # idempotent
    assert not any(r.removed_file or r.withdrawn for r in again)


def test_remove_symbol_days_when_a_hot_file_goes_audits_its_removal_as_show_tells_it(
    tmp_path, no_fsync
):
    root = retiered(tmp_path)
    hot = partition_file(root, *HOT_KEY)
    size = hot.stat().st_size

    Archive(root).remove([HOT_KEY])

    name = hot.relative_to(root).as_posix()
    (record,) = [
        e for e in audit_events(root) if (e["event"], e.get("file")) == (EVENT_REMOVE, name)
    ]
    assert record["bytes"] == size
    assert record["reason"] == f"{HOT_KEY[0]} {HOT_KEY[1].isoformat()} has no ticks any more"
    story = show_symbol_day(ArchiveCore(root, audit_log=default_audit_log(root)), *HOT_KEY)
    assert [item["event"] for item in story.history] == ["hot-file-removed"]


def test_remove_symbol_days_when_books_and_records_refuses_and_changes_nothing(tmp_path, no_fsync):
    root = retiered(tmp_path)
    Archive(root, audit_log=default_audit_log(root)).core.books.enable()
    before = contents(tmp_path, audit=False)

    with pytest.raises(WriteOnceError, match="has no ticks any more"):
        Archive(root, audit_log=tmp_path / "audit.jsonl").remove([HOT_KEY])

    assert contents(tmp_path, audit=False) == before
    assert view_rows(root) == expected_rows()


def test_remove_symbol_days_when_retier_tries_to_run_before_the_hot_file_goes_keeps_day_out(
    tmp_path, no_fsync, monkeypatch
):
    root = retiered(tmp_path)
    corrected = day_ticks(*COLD_KEY).slice(0, 3)  # a recompaction: a newer hot copy
    age = (STAGE_1 - COLD_KEY[1]).days
    compact_symbol_day(
        archive_at(root, POLICY).core,
        corrected,
        SymbolDayWrite(symbol=COLD_KEY[0], day=COLD_KEY[1], age_days=age),
    )
    unlink = fsio.atomic_unlink
    interleaved = []

    def retier_first(path):  # a scheduled re-tiering tries to run just before the removal
        if path == partition_file(root, *COLD_KEY) and not interleaved:
            interleaved.append(path)
            with contextlib.suppress(ArchiveBusyError):
                Archive(root, policy=POLICY).retier(as_of=STAGE_1)
        return unlink(path)

    monkeypatch.setattr(fsio, "atomic_unlink", retier_first)

    Archive(root).remove([COLD_KEY])

    assert interleaved and view_rows(root) == without([COLD_KEY])
    assert locate(ArchiveTiers.of(root), *COLD_KEY) is None


def test_remove_days_when_crashing_anywhere_leaves_every_query_working_and_a_rerun_finishes(
    tmp_path, no_fsync, capsys
):
    """A removal cut short after the hot file went but before the hot index said so left the
    file listed and gone: every query of the archive refused, and remove-days refused to run
    again ("not in the archive")."""
    from skewtape_pipeline.cli.app import main

    base = retiered(tmp_path / "base")
    names: list[str] = []
    with faults.installed(names.append):
        Archive(copy_data(base.parent, tmp_path / "clean")).remove([HOT_KEY])
    assert any(name.startswith("removed:") for name in names)
    for point, name in enumerate(names):
        work = copy_data(base.parent, tmp_path / f"crash-{point}")
        with pytest.raises(Crash), faults.installed(crash_at(point)):
            Archive(work).remove([HOT_KEY])
        assert view_rows(work) in (expected_rows(), without([HOT_KEY])), name
        argv = ["remove-days", str(work), "--day", HOT_KEY[0], HOT_KEY[1].isoformat()]
        assert main(argv) == 0, (name, capsys.readouterr().err)
        assert view_rows(work) == without([HOT_KEY]), name

"""books_and_records mode: re-tiering keeps every file, deletions and overwrites are refused."""

from __future__ import annotations

import pytest

from skewtape_pipeline.errors import ConfigError, WriteOnceError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.store.books import (
    EVENT_ENABLED,
    EVENT_REFUSED,
    EVENT_REMOVE,
    default_audit_log,
)
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.placement import archive_metrics
from skewtape_pipeline.ticks.archive.store.policy import COLD
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.encode.sources import read_canonical
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    audit_events,
    build_archive,
    day_ticks,
    expected_rows,
    files_under,
    tiers_by_day,
    view_rows,
    write_four_day_csv,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at


def test_retier_when_books_and_records_writes_copies_and_deletes_nothing(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    assert Archive(root, audit_log=default_audit_log(root)).core.books.enable(
        reason="broker-dealer books"
    )
    before = [f for f in files_under(tmp_path) if f.endswith(".parquet")]

    first = Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    second = Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    after = [f for f in files_under(tmp_path) if f.endswith(".parquet")]
    assert set(before) < set(after)  # every original file is still there
    assert first.files_removed == second.files_removed == []
    assert len(second.files_retained) > len(first.files_retained) > 0
    assert view_rows(root) == expected_rows()  # never twice, although the copies remain
    assert set(tiers_by_day(root).values()) == {COLD}
    for item in CatalogStore(root).read().files.values():
        assert not ArchiveTiers.of(root).resolve(item.path).stat().st_mode & 0o222
    assert not [e for e in audit_events(root) if e["event"] == EVENT_REMOVE]
    metrics = archive_metrics(ArchiveTiers.of(root, POLICY))
    assert metrics.retained_files == len(second.files_retained)


def test_prune_when_books_and_records_refuses_and_audits_the_attempt(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    Archive(root, audit_log=default_audit_log(root)).core.books.enable()
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    before = files_under(tmp_path)
    with pytest.raises(WriteOnceError, match="delete refused") as info:
        Archive(root, policy=POLICY).prune()
    assert info.value.operation == "delete" and info.value.path is not None
    assert [f for f in files_under(tmp_path) if f != "audit.jsonl"] == [
        f for f in before if f != "audit.jsonl"
    ]
    refused = [e for e in audit_events(root) if e["event"] == EVENT_REFUSED]
    assert refused[-1]["operation"] == "delete"


def test_prune_when_not_books_and_records_removes_retained_copies(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    enable = tmp_path / "other"
    assert not Archive(root, audit_log=None).core.books.is_on() and not enable.exists()
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert Archive(root, policy=POLICY).prune() == []  # retier already removed what it replaced


def test_compact_when_books_and_records_and_file_exists_refuses_and_audits(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1, days=DAYS[:1])
    Archive(root, audit_log=default_audit_log(root)).core.books.enable()
    day = DAYS[0]
    with pytest.raises(WriteOnceError, match="overwrite refused") as refused:
        compact_symbol_day(
            archive_at(root, POLICY, audit_log=default_audit_log(root)).core,
            day_ticks("ES", day).slice(0, 1),
            SymbolDayWrite(symbol="ES", day=day, age_days=(STAGE_1 - day).days),
        )
    assert view_rows(root) == expected_rows(DAYS[:1])
    last = audit_events(root)[-1]  # the refusal is on the record, naming the file kept
    assert last["event"] == EVENT_REFUSED and last["operation"] == "overwrite"
    assert last["file"] == str(refused.value.path.absolute())
    new_day = DAYS[1]  # a symbol-day not in the archive yet is written as usual
    compact_symbol_day(
        archive_at(root, POLICY).core,
        day_ticks("ES", new_day),
        SymbolDayWrite(symbol="ES", day=new_day, age_days=(STAGE_1 - new_day).days),
    )


def test_books_and_records_when_enabled_twice_is_idempotent_and_cannot_be_disabled(tmp_path):
    root = tmp_path / "archive"
    books = Archive(root, audit_log=default_audit_log(root)).core.books
    assert books.enable() is True
    assert books.enable() is False
    with pytest.raises(WriteOnceError, match="cannot be turned off"):
        books.disable()
    assert books.is_on()
    kinds = [e["event"] for e in audit_events(root)]
    assert kinds == [EVENT_ENABLED, EVENT_REFUSED]


def test_books_and_records_asked_is_turned_on_by_the_first_write_and_refuses_its_overwrite(
    tmp_path, no_fsync
):
    """An archive opened with ``books_and_records=True`` is put in the mode by its first write,
    before that write changes anything: the overwrite it would make is refused."""
    root = build_archive(tmp_path, as_of=STAGE_1, days=DAYS[:1])
    day = DAYS[0]
    handle = archive_at(root, POLICY, audit_log=default_audit_log(root), books_and_records=True)
    with pytest.raises(WriteOnceError, match="overwrite refused"):
        handle.compact_symbol_day(
            day_ticks("ES", day).slice(0, 1),
            SymbolDayWrite(symbol="ES", day=day, age_days=(STAGE_1 - day).days),
        )
    events = [e["event"] for e in audit_events(root)]
    assert handle.core.books.is_on() and events[-1] == EVENT_REFUSED
    assert events.count(EVENT_ENABLED) == 1
    assert view_rows(root) == expected_rows(DAYS[:1])


def test_books_and_records_asked_when_an_argument_is_refused_turns_nothing_on(tmp_path):
    """A write refused for its arguments changes nothing: it used to turn the write-once mode
    on for good (audited) first, and to create a new archive's root to hold it."""
    new_root = tmp_path / "new"
    with pytest.raises(ConfigError, match="run = 5"):
        Archive(new_root, books_and_records=True).compact(
            read_canonical(write_four_day_csv(tmp_path / "t.csv")), as_of=STAGE_1, run=5
        )
    assert not new_root.exists() and not default_audit_log(new_root).exists()
    root = build_archive(tmp_path, as_of=STAGE_1, days=DAYS[:1])
    handle = archive_at(root, POLICY, audit_log=default_audit_log(root), books_and_records=True)
    refusals = {
        "months = 5": lambda: handle.retier(as_of=STAGE_2, months=5),
        "write = None": lambda: handle.compact_symbol_day(day_ticks("ES", DAYS[0]), None),
        "keys": lambda: handle.withdraw(5),
        "keys ": lambda: handle.remove(5),
        "allow_fewer": lambda: handle.rebuild_catalog(allow_fewer="no"),
        "keep_last": lambda: handle.versions.prune(keep_last="1"),
        "tag": lambda: handle.versions.tag("no/such"),
    }
    for said, refused in refusals.items():
        with pytest.raises(ConfigError, match=said.strip()):
            refused()
    assert not handle.core.books.is_on() and not default_audit_log(root).exists()

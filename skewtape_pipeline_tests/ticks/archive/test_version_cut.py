"""The versions' index cut short (a partial copy, an older index restored, a file system that lost
its tail) or its sums deleted or cut: detected and refused, never read as a shorter log nor
"repaired" by the next version overwriting a later one's record; and what a crash leaves at each
step of recording a version, a pruning, a copy of the archive: no finding."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import DamagedFileError, VersionError
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.store import version_files as files
from skewtape_pipeline.ticks.archive.store.books import default_audit_log
from skewtape_pipeline.ticks.archive.store.layout import CATALOG_FILE
from skewtape_pipeline.ticks.archive.store.version_files import (
    INDEX_FILE,
    SUMS_FILE,
    record_path,
    versions_dir,
)
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.archive.test_versions import (
    KEYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    compact,
    ticks,
)
from skewtape_pipeline_tests.ticks.archive.test_versions_damage import archive, view_rows
from skewtape_pipeline_tests.ticks.archive_builders import Crash, crash_at_name
from skewtape_pipeline_tests.ticks.conftest import archive_at

__all__ = ["archive"]  # the fixture: versions 1-10
LOCK_FILE = ".skewtape-archive.lock"
RESTORE = "Restore the folder _skewtape_versions/ from a copy"


def cut(path: Path, entries: int, extra: int = 0) -> None:
    """Cut the index (or its sums) ``path`` to ``entries`` 8-byte entries and ``extra`` bytes."""
    raw = path.read_bytes()
    path.write_bytes(raw[: entries * 8 + extra])


def files_of(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` (the archive's folder: the archive, its tier roots, the audit
    log), by relative path, with its bytes; the lock file (which names its last holder) left
    out."""
    found = sorted(p for p in root.rglob("*") if p.is_file() and p.name != LOCK_FILE)
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in found}


def writers(root: Path) -> list:
    """Each writer that records a version (a compaction, a re-tiering, a removal), and a tag."""
    symbol, day = KEYS[0]
    write = SymbolDayWrite(symbol=symbol, day=day, age_days=(STAGE_1 - day).days)
    handle = archive_at(root, POLICY, audit_log=default_audit_log(root))
    return [
        lambda: handle.compact_symbol_day(ticks(symbol, day, 1), write),
        lambda: handle.retier(as_of=STAGE_2),
        lambda: handle.remove([KEYS[2]]),
        lambda: handle.versions.tag("later"),
        lambda: handle.versions.tag("early", version=2),
    ]


def index(root: Path) -> Path:
    return versions_dir(root) / INDEX_FILE


def sums(root: Path) -> Path:
    return versions_dir(root) / SUMS_FILE


def refused(read, path: Path) -> DamagedFileError:
    with pytest.raises(DamagedFileError) as error:
        read()
    assert error.value.path == path, error.value
    assert RESTORE in str(error.value)
    return error.value


# --- the index cut short ------------------------------------------------------------------------


def test_reads_when_the_index_lost_its_end_refuse_naming_it_instead_of_a_shorter_log(archive):
    """Versions 8-10 cut off the index (their sums and records intact): every look-up by number,
    time, tag or latest is refused naming ``index.bin``, never answered from versions 1-7."""
    handle = archive_at(archive, POLICY)
    handle.versions.tag("paper", 9)
    log = VersionLog(archive)
    ninth = log.read(9).time
    cut(index(archive), 7)
    for read in (
        log.count,
        log.latest,
        log.list,
        lambda: log.at(ninth),
        lambda: log.read(9),
        lambda: log.read(3),
        lambda: handle.read(as_of=ninth),
        lambda: handle.read(as_of="paper"),
        lambda: view_rows(archive, 5),
        lambda: handle.versions.prune(keep_last=1),
    ):
        error = refused(read, index(archive))
        assert "holds 7 entries" in str(error)
    assert all(record_path(archive, n).is_file() for n in range(1, 11))  # nothing pruned


@pytest.mark.parametrize(
    "how",
    ["index alone", "index and sums", "index and sums by one, a tag pins the last"],
)
def test_a_writer_when_the_index_lost_its_end_refuses_changing_nothing(archive, how):
    """A compaction, a re-tiering, a removal (each records a version) and a tag are refused
    before they write anything: version 8's record (the index's next number) is not
    overwritten, nothing is published or audited."""
    archive_at(archive, POLICY).versions.tag("paper", 10)
    kept = 7 if how != "index and sums by one, a tag pins the last" else 9
    cut(index(archive), kept)
    if how != "index alone":
        cut(sums(archive), kept)
    before = files_of(archive.parent)
    for write in writers(archive):
        refused(write, index(archive))
        assert files_of(archive.parent) == before


@pytest.mark.parametrize("catalog", ["intact", "deleted"])
def test_rebuild_catalog_when_the_index_lost_its_end_refuses_changing_nothing(archive, catalog):
    """A rebuild records a version too: refused before it writes the catalog (the catalog
    deleted, what a rebuild is run for, it wrote a new one, then refused only its version)."""
    if catalog == "deleted":
        (archive / CATALOG_FILE).unlink()
    cut(index(archive), 7)
    before = files_of(archive.parent)
    refused(archive_at(archive, POLICY).rebuild_catalog, index(archive))
    assert files_of(archive.parent) == before


def test_index_cut_past_pruned_versions_is_found_by_writers_verify_and_the_tags(archive):
    """Versions 1-7 and 9 pruned (8 is tagged, 10 the latest), then index and sums cut to 5
    (an older copy of both restored): no record at 6 or 7 shows it, yet a writer, a read of the
    tag or of version 10, and verify-archive find it."""
    handle = archive_at(archive, POLICY)
    handle.versions.tag("paper", 8)
    handle.versions.prune(keep_last=1)
    assert [v.version for v in VersionLog(archive).list()] == [8, 10]
    cut(index(archive), 5)
    cut(sums(archive), 5)
    before = files_of(archive.parent)
    for write in writers(archive):
        refused(write, index(archive))
    refused(lambda: handle.read(as_of="paper"), index(archive))
    refused(lambda: handle.read(as_of=10), index(archive))
    refused(handle.versions.list, index(archive))
    assert files_of(archive.parent) == before
    problems = handle.verify().problems
    assert [p for p in problems if p.startswith(f"{index(archive)}: ")] == [
        p for p in problems if "lost its end" in p
    ]
    assert len([p for p in problems if "lost its end" in p]) == 1, problems


def test_verify_archive_when_the_index_lost_its_end_names_it_once(archive, capsys):
    cut(index(archive), 6)
    found = archive_at(archive, POLICY).verify()
    assert not found.ok
    named = [p for p in found.problems if p.startswith(f"{index(archive)}: ")]
    assert len(named) == 1 and "lost its end" in named[0] and RESTORE in named[0]
    assert main(["verify-archive", str(archive)]) == 2
    assert "lost its end" in capsys.readouterr().out


# --- the sums deleted or cut --------------------------------------------------------------------


@pytest.mark.parametrize("left", [None, 0, 6])
def test_sums_when_deleted_or_cut_refuse_lookups_by_time_and_writers(archive, left):
    """``index.sums`` deleted (``None``), emptied or cut to 6 of 10 sums, the records written
    with sums: a look-up by time (which would read entries unchecked) and a writer (which would
    sum them as it finds them) are refused naming it; by number still reads."""
    log = VersionLog(archive)
    fifth = log.read(9).time
    if left is None:
        sums(archive).unlink()
    else:
        cut(sums(archive), left)
    handle = archive_at(archive, POLICY)
    refused(lambda: log.at(fifth), sums(archive))
    refused(lambda: handle.read(as_of=fifth), sums(archive))
    before = files_of(archive.parent)
    for write in writers(archive)[:3]:  # those that record a version
        refused(write, sums(archive))
    assert files_of(archive.parent) == before
    assert handle.read(as_of=9).num_rows == view_rows(archive, 9)
    named = [p for p in handle.verify().problems if p.startswith(f"{sums(archive)}: ")]
    assert len(named) == 1, named


# --- no finding: crashes, pruning, copies -------------------------------------------------------


def assert_sound(root: Path, count: int) -> None:
    """Every reader sees ``count`` versions and verify-archive finds nothing."""
    log = VersionLog(root)
    assert log.count() == count
    assert log.latest().version == count
    versions = log.list()
    assert [log.at(v.time) for v in versions] == [v.version for v in versions]
    found = archive_at(root, POLICY).verify()
    assert found.ok, found.problems


@pytest.mark.parametrize("point", ["version-snapshots", "version-record", "version-indexed"])
def test_recording_when_crashing_at_a_checkpoint_leaves_no_finding_and_a_rerun_records(
    archive, point
):
    with faults.installed(crash_at_name(point)), pytest.raises(Crash):
        compact(archive, KEYS[0], variant=1)
    recorded = 11 if point == "version-indexed" else 10
    assert_sound(archive, recorded)
    compact(archive, KEYS[0], variant=1)
    assert_sound(archive, 11)


@pytest.mark.parametrize(
    ("summed", "extra_sum", "extra_entry"),
    [(10, 0, 0), (10, 5, 0), (11, 0, 0), (11, 0, 3)],
)
def test_recording_when_cut_short_inside_the_index_append_leaves_no_finding(
    archive, summed, extra_sum, extra_entry
):
    """What a crash inside the append of version 11's entry leaves (its record written; its sum
    not, partly or wholly; its entry not or partly) reads as versions 1-10, and the rerun
    records version 11 again, overwriting the record left."""
    compact(archive, KEYS[0], variant=1)
    left = record_path(archive, 11).read_bytes()
    cut(sums(archive), summed, extra_sum)
    cut(index(archive), 10, extra_entry)
    assert_sound(archive, 10)
    with pytest.raises(VersionError, match="no such version"):
        VersionLog(archive).read(11)
    compact(archive, KEYS[1], variant=1)
    assert_sound(archive, 11)
    assert record_path(archive, 11).read_bytes() != left
    assert sums(archive).stat().st_size == index(archive).stat().st_size == 11 * 8


def test_pruned_and_tagged_versions_and_a_copy_leave_no_finding(archive, tmp_path):
    handle = archive_at(archive, POLICY)
    handle.versions.tag("paper", 3)
    handle.versions.prune(keep_last=2)
    assert [v.version for v in VersionLog(archive).list()] == [3, 9, 10]
    assert_sound(archive, 10)
    copy = tmp_path / "copy"
    shutil.copytree(archive.parent, copy)
    assert_sound(copy / "archive", 10)
    compact(copy / "archive", KEYS[0], variant=1)
    assert_sound(copy / "archive", 11)
    assert archive_at(copy / "archive", POLICY).read(as_of="paper").num_rows == view_rows(
        archive, 3
    )


def test_a_read_when_a_writer_appends_between_its_reads_of_the_index_finds_no_cut(
    archive, monkeypatch
):
    """A reader that read the index's length (10) just before a writer appended version 11's
    entry and wrote version 12's record and sum (a crash or a pause before its entry) sees more
    sums and records than that length: it reads the index again and answers, never refuses."""
    compact(archive, KEYS[0], variant=1)  # version 11
    compact(archive, KEYS[1], variant=1)  # version 12, then its entry taken off: in progress
    cut(index(archive), 11)
    lengths = iter([10])
    real = files.version_count
    monkeypatch.setattr(files, "version_count", lambda root: next(lengths, None) or real(root))
    assert VersionLog(archive).latest().version == 11

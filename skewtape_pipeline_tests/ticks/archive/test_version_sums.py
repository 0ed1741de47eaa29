"""The version log's own files carry their sums: a version record, a tag and an entry of the
index with one byte changed (the bytes the real writers wrote, a bit flipped) are refused with a
DamagedFileError naming the file, by every reader that would have believed them (``read`` and a
query as of a version, ``versions``, tags, ``prune-versions``, ``verify-archive``); records,
tags and an index written before the sums still read as before."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import DamagedFileError, VersionError
from skewtape_pipeline.ticks.archive.store.layout import CATALOG_FILE
from skewtape_pipeline.ticks.archive.store.version_files import (
    INDEX_FILE,
    record_path,
    tag_path,
    versions_dir,
)
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.archive.test_version_cut import files_of
from skewtape_pipeline_tests.ticks.archive.test_versions import KEYS, POLICY, compact
from skewtape_pipeline_tests.ticks.archive.test_versions_damage import archive, view_rows
from skewtape_pipeline_tests.ticks.conftest import archive_at

__all__ = ["archive"]  # the fixture: versions 1-10
SEAL_KEY = "sha256"
"""The field of a record or a tag holding its sha256 (``version_files.SEAL_KEY``)."""
SUMS_FILE = "index.sums"
"""The index entries' sums (``version_files.SUMS_FILE``)."""


def flip(path: Path, offset: int, bit: int = 0) -> None:
    """Flip one bit of the file ``path`` in place (negative ``offset``: from its end)."""
    raw = bytearray(path.read_bytes())
    raw[offset] ^= 1 << bit
    path.write_bytes(bytes(raw))


def digit_of(path: Path, text: str) -> int:
    """The offset of the last digit of the first JSON field ``text`` in ``path``."""
    raw = path.read_bytes()
    start = raw.index(f'"{text}": '.encode()) + len(text) + 4
    end = start
    while raw[end : end + 1].isdigit():
        end += 1
    return end - 1


def unsealed(path: Path) -> None:
    """Rewrite the record or tag ``path`` as the writer before the sums wrote it: its fields
    without the sha256, keys sorted, one per line."""
    body = json.loads(path.read_bytes())
    del body[SEAL_KEY]
    path.write_bytes((json.dumps(body, sort_keys=True, indent=1) + "\n").encode())


# --- records ------------------------------------------------------------------------------------


def test_read_as_of_when_a_record_has_a_digit_flipped_refuses_naming_the_record(archive):
    """A digit of the generation flipped (still JSON, still a record: read as another
    generation before) is refused by every reader of the version, never read."""
    path = record_path(archive, 9)
    flip(path, digit_of(path, "generation"))
    handle = archive_at(archive, POLICY)
    for read in (
        lambda: handle.read(as_of=9),
        lambda: view_rows(archive, 9),
        handle.versions.list,
        lambda: VersionLog(archive).read(9),
    ):
        with pytest.raises(DamagedFileError, match="changed after it was written") as error:
            read()
        assert error.value.path == path
        assert "restore it from a copy" in str(error.value)
    assert handle.read(as_of=10).num_rows == view_rows(archive, 10)  # the others still read


def test_record_when_any_one_bit_of_it_is_flipped_is_refused_naming_it(archive):
    path = record_path(archive, 3)
    intact = path.read_bytes()
    for offset in range(len(intact)):
        flip(path, offset)
        with pytest.raises((DamagedFileError, VersionError)) as error:
            VersionLog(archive).read(3)
        assert str(path) in str(error.value), offset
        path.write_bytes(intact)
    assert VersionLog(archive).read(3).version == 3


def test_read_as_of_when_two_records_are_swapped_refuses_naming_each(archive):
    third, fourth = record_path(archive, 3), record_path(archive, 4)
    one, two = third.read_bytes(), fourth.read_bytes()
    third.write_bytes(two)
    fourth.write_bytes(one)
    for number, path in ((3, third), (4, fourth)):
        with pytest.raises(DamagedFileError, match=f"in version {number}'s place") as error:
            archive_at(archive, POLICY).read(as_of=number)
        assert error.value.path == path


def test_cli_versions_when_a_record_is_damaged_exits_2_naming_it_without_a_traceback(
    archive, capsys
):
    path = record_path(archive, 5)
    flip(path, digit_of(path, "time_ns"))
    assert main(["versions", str(archive)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and "Traceback" not in err
    assert "record" in err and "changed after it was written" in err


def test_prune_versions_when_a_record_is_damaged_refuses_pruning_nothing(archive):
    path = record_path(archive, 10)
    flip(path, digit_of(path, "generation"))
    with pytest.raises(DamagedFileError) as error:
        archive_at(archive, POLICY).versions.prune(keep_last=1)
    assert error.value.path == path
    assert all(record_path(archive, n).is_file() for n in range(1, 11))


def test_rebuild_catalog_when_the_latest_record_is_damaged_refuses_writing_nothing(archive):
    """The rebuild, run for the catalog deleted, records its version after the latest one: a
    changed latest record is refused before the catalog is written, not after."""
    path = record_path(archive, 10)
    flip(path, digit_of(path, "generation"))
    (archive / CATALOG_FILE).unlink()
    before = files_of(archive.parent)
    with pytest.raises(DamagedFileError, match="changed after it was written") as error:
        archive_at(archive, POLICY).rebuild_catalog()
    assert error.value.path == path
    assert files_of(archive.parent) == before


# --- tags ---------------------------------------------------------------------------------------


def test_read_as_of_a_tag_when_its_version_digit_is_flipped_refuses_naming_the_tag(archive):
    """A tag pinning version 3 with a bit flipped pinned version 2 before: refused instead."""
    handle = archive_at(archive, POLICY)
    handle.versions.tag("paper", 3)
    path = tag_path(archive, "paper")
    flip(path, digit_of(path, "version"))
    for read in (
        lambda: handle.read(as_of="paper"),
        lambda: view_rows(archive, "paper"),
        handle.versions.tags,
        lambda: handle.versions.prune(keep_last=1),
    ):
        with pytest.raises(DamagedFileError, match="changed after it was written") as error:
            read()
        assert error.value.path == path
        assert "tag the version again" in str(error.value)
    assert VersionLog(archive).count() == 10 and record_path(archive, 3).is_file()


def test_read_as_of_a_tag_when_two_tags_are_swapped_refuses_naming_it(archive):
    handle = archive_at(archive, POLICY)
    handle.versions.tag("early", 2)
    handle.versions.tag("late", 9)
    early, late = tag_path(archive, "early"), tag_path(archive, "late")
    one, two = early.read_bytes(), late.read_bytes()
    early.write_bytes(two)
    late.write_bytes(one)
    with pytest.raises(DamagedFileError, match="in the place of 'early'") as error:
        handle.read(as_of="early")
    assert error.value.path == early


# --- the index ----------------------------------------------------------------------------------


@pytest.mark.parametrize("damaged", [INDEX_FILE, SUMS_FILE])
def test_read_as_of_a_time_when_an_index_entry_is_off_by_a_bit_refuses_naming_the_index(
    archive, damaged
):
    """The lowest bit of version 5's entry (its time 1 ns off: still in order, so a search for
    that time found version 4 before) or of its sum: refused by a look-up by time, never read
    as another version; by number and tag still read."""
    log = VersionLog(archive)
    fifth = log.read(5).time
    assert log.at(fifth) == 5
    flip(versions_dir(archive) / damaged, 5 * 8 - 1)  # the last byte of entry (or sum) 5
    handle = archive_at(archive, POLICY)
    for read in (lambda: handle.versions.at(fifth), lambda: handle.read(as_of=fifth)):
        with pytest.raises(DamagedFileError, match="entry 5") as error:
            read()
        assert error.value.path == versions_dir(archive) / INDEX_FILE
        assert "Read by version number or tag meanwhile" in str(error.value)
    assert handle.read(as_of=5).num_rows == view_rows(archive, 5)


def test_verify_archive_when_a_record_a_tag_and_an_index_entry_are_damaged_names_each(archive):
    handle = archive_at(archive, POLICY)
    handle.versions.tag("paper", 3)
    assert handle.verify().ok
    flip(versions_dir(archive) / INDEX_FILE, 2 * 8 - 1)
    flip(tag_path(archive, "paper"), digit_of(tag_path(archive, "paper"), "version"))
    flip(record_path(archive, 4), digit_of(record_path(archive, 4), "generation"))
    found = handle.verify()
    assert not found.ok
    named = [
        record_path(archive, 4),
        versions_dir(archive) / INDEX_FILE,
        tag_path(archive, "paper"),
    ]
    for path in named:
        assert any(p.startswith(f"{path}: ") for p in found.problems), (path, found.problems)


# --- written before the sums --------------------------------------------------------------------


def test_version_log_when_written_before_the_sums_reads_as_before_then_gains_them(archive):
    """Records and tags without their sha256 and an index without ``index.sums`` (the bytes the
    writer before the sums wrote) read as they did; the next version sums every entry."""
    handle = archive_at(archive, POLICY)
    handle.versions.tag("paper", 3)
    log = VersionLog(archive)
    before = [v.to_dict() for v in log.list()]
    times = [log.at(v.time) for v in log.list()]
    for number in range(1, 11):
        unsealed(record_path(archive, number))
    unsealed(tag_path(archive, "paper"))
    (versions_dir(archive) / SUMS_FILE).unlink()
    assert [v.to_dict() for v in log.list()] == before
    assert [log.at(v.time) for v in log.list()] == times == list(range(1, 11))
    assert log.tags() == {"paper": 3}
    assert handle.read(as_of="paper").num_rows == view_rows(archive, 3)
    assert handle.verify().ok
    compact(archive, KEYS[0], variant=1)  # version 11, written with the sums
    assert log.count() == 11
    assert (versions_dir(archive) / SUMS_FILE).stat().st_size == 11 * 8
    flip(versions_dir(archive) / INDEX_FILE, 5 * 8 - 1)  # an old entry, summed by version 11
    with pytest.raises(DamagedFileError, match="entry 5"):
        log.at(log.read(5).time)


def test_record_written_before_the_sums_with_a_field_the_writer_never_wrote_is_refused(archive):
    """A record without its sha256 whose ``sha256`` field name lost a bit (or that holds any
    field the writer before the sums never wrote) is not taken for an old record."""
    path = record_path(archive, 6)
    raw = path.read_bytes()
    path.write_bytes(raw.replace(f'"{SEAL_KEY}"'.encode(), b'"sha257"'))
    with pytest.raises(DamagedFileError, match="'sha257'") as error:
        VersionLog(archive).read(6)
    assert error.value.path == path

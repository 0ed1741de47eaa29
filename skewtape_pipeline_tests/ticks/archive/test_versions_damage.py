"""Versions of the tick archive whose files changed behind its back, and as-of arguments that
name no version: refused with a typed error naming the file or the argument, never read."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skewtape_pipeline.errors import DamagedFileError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.archive.test_versions import KEYS, POLICY, STAGE_2, compact
from skewtape_pipeline_tests.ticks.conftest import archive_at


@pytest.fixture
def archive(tmp_path, no_fsync) -> Path:
    """Versions 1-8 (hot files only, manifests chained as deltas), 9 (a re-tiering: the first
    catalog snapshot) and 10 (a removal: another)."""
    root = tmp_path / "data" / "archive"
    for key in KEYS:
        compact(root, key)
    archive_at(root, POLICY).retier(as_of=STAGE_2)
    archive_at(root, POLICY).remove([KEYS[1]])
    return root


def swap_bytes(first: Path, second: Path) -> None:
    """Give each file the other's bytes (each stays a valid file, under the wrong name)."""
    one, two = first.read_bytes(), second.read_bytes()
    first.write_bytes(two)
    second.write_bytes(one)


def catalog_of(root: Path, number: int) -> Path:
    log = VersionLog(root)
    return log.catalog_snapshot_path(log.read(number).catalog)


def view_rows(root: Path, as_of: int) -> int:
    """The rows of the view ``ticks`` as of ``as_of`` (the DuckDB path)."""
    sql = "SELECT count(*) AS n FROM ticks"
    options = QueryOptions(as_of=as_of)
    return run_query(sql, ArchiveCore(root, policy=POLICY), options)["n"][0].as_py()


# --- catalog snapshots ----------------------------------------------------------------------------


def test_read_as_of_when_catalog_snapshots_are_swapped_refuses_naming_the_file(archive):
    ninth, tenth = catalog_of(archive, 9), catalog_of(archive, 10)
    swap_bytes(ninth, tenth)
    for number, path in ((9, ninth), (10, tenth)):
        with pytest.raises(DamagedFileError, match="not the bytes its content name") as error:
            archive_at(archive, POLICY).read(as_of=number)
        assert error.value.path == path
        with pytest.raises(DamagedFileError) as error:
            view_rows(archive, number)
        assert error.value.path == path


def test_read_as_of_when_an_intact_copy_was_read_first_still_refuses_the_damaged_one(
    archive, tmp_path
):
    copy = tmp_path / "copy"
    shutil.copytree(archive.parent, copy)  # the archive and its tier roots
    intact = archive_at(copy / "archive", POLICY).read(as_of=9)  # its snapshot parsed now
    assert intact.num_rows > 0
    path = catalog_of(archive, 9)
    path.write_bytes(catalog_of(archive, 10).read_bytes())
    with pytest.raises(DamagedFileError) as error:
        archive_at(archive, POLICY).read(as_of=9)
    assert error.value.path == path


def test_read_as_of_when_a_snapshot_read_before_changes_refuses_it(archive):
    path = catalog_of(archive, 9)
    expected = archive_at(archive, POLICY).read(as_of=9)
    assert archive_at(archive, POLICY).read(as_of=9).equals(expected)  # kept while unchanged
    path.write_bytes(catalog_of(archive, 10).read_bytes())
    with pytest.raises(DamagedFileError) as error:
        archive_at(archive, POLICY).read(as_of=9)
    assert error.value.path == path

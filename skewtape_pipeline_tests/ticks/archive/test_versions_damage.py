"""Versions of the tick archive whose files changed behind its back, and as-of arguments that
name no version: refused with a typed error naming the file or the argument, never read."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

import skewtape_pipeline
from skewtape_pipeline.errors import ConfigError, DamagedFileError, VersionError
from skewtape_pipeline.hashing import sha256_bytes
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query
from skewtape_pipeline.ticks.archive.store.catalog import CatalogStore
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.version_files import (
    MANIFEST_BASE_KEY,
    MANIFEST_SCHEMA,
    MAX_DELTA_DEPTH,
    manifest_path,
)
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


# --- manifests ----------------------------------------------------------------------------------

READ_AS_OF = """
import sys
from skewtape_pipeline.errors import SkewtapeError
from skewtape_pipeline.ticks.archive.handle import Archive
try:
    Archive(sys.argv[1], audit_log=None).read(as_of=int(sys.argv[2]))
except SkewtapeError as exc:
    print(type(exc).__name__, exc)
"""


def read_in_a_process(root: Path, as_of: int) -> str:
    """What reading ``root`` as of ``as_of`` raised, read in a process of its own (stopped after
    a minute: a read that loops would never end)."""
    package = Path(skewtape_pipeline.__file__).parents[1]
    argv = [sys.executable, "-c", READ_AS_OF, str(root), str(as_of)]
    env = {**os.environ, "PYTHONPATH": str(package)}
    try:
        done = subprocess.run(argv, capture_output=True, text=True, timeout=60, env=env)
    except subprocess.TimeoutExpired:
        pytest.fail(f"reading {root} as of version {as_of} did not end (its manifests loop)")
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_read_as_of_when_a_manifest_and_its_base_are_swapped_refuses_instead_of_looping(archive):
    log = VersionLog(archive)
    first, second = log.read(1).manifest, log.read(2).manifest
    assert log.manifest_chain(second) == [second, first]  # the second is a delta of the first
    swap_bytes(log.manifest_path(first), log.manifest_path(second))  # the first names itself
    said = read_in_a_process(archive, 1)
    assert said.startswith(f"DamagedFileError {log.manifest_path(first)}: "), said
    with pytest.raises(DamagedFileError) as error:
        archive_at(archive, POLICY).read(as_of=2)
    assert error.value.path == log.manifest_path(second)


def write_manifest(root: Path, base: str, depth: int) -> str:
    """Write a manifest without rows, a delta of ``base`` at ``depth``, under its content name
    (as ``version_recording`` writes one); its sha256."""
    table = MANIFEST_SCHEMA.empty_table().replace_schema_metadata(
        {MANIFEST_BASE_KEY: json.dumps([base, depth])}
    )
    sink = io.BytesIO()
    pq.write_table(table, sink)
    digest = sha256_bytes(sink.getvalue())
    path = manifest_path(root, digest)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(sink.getvalue())
    return digest


def test_manifest_chain_when_longer_than_the_format_writes_refuses_naming_the_file(tmp_path):
    chain = [write_manifest(tmp_path, "", 0)]
    for depth in range(1, MAX_DELTA_DEPTH + 1):
        chain.append(write_manifest(tmp_path, chain[-1], depth))
    assert VersionLog(tmp_path).manifest_chain(chain[-1]) == chain[::-1]  # the longest written
    too_long = write_manifest(tmp_path, chain[-1], MAX_DELTA_DEPTH + 1)
    with pytest.raises(DamagedFileError, match=f"{MAX_DELTA_DEPTH + 1} deep") as error:
        VersionLog(tmp_path).manifest_chain(too_long)
    assert error.value.path == manifest_path(tmp_path, too_long)
    skipping = write_manifest(tmp_path, chain[0], 2)  # a delta 2 deep on a whole list
    with pytest.raises(DamagedFileError, match="2 deep on one 0 deep") as error:
        VersionLog(tmp_path).manifest_chain(skipping)
    assert error.value.path == manifest_path(tmp_path, skipping)


# --- one error for any damaged version file -----------------------------------------------------


def cut_short(path: Path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


@pytest.mark.parametrize("which", ["catalog", "manifest"])
def test_reading_as_of_when_a_version_file_is_cut_short_refuses_naming_it(archive, which):
    log = VersionLog(archive)
    version = log.read(10)
    path = catalog_of(archive, 10) if which == "catalog" else log.manifest_path(version.manifest)
    cut_short(path)
    handle = archive_at(archive, POLICY)
    for read in (
        handle.read,
        handle.symbols,
        handle.state,
        lambda as_of: view_rows(archive, as_of),
    ):
        with pytest.raises(DamagedFileError) as error:
            read(as_of=10)
        assert error.value.path == path


@pytest.mark.parametrize("damage", [b"{", b'{"version": 3}'])
def test_versions_list_when_a_record_does_not_parse_refuses_naming_the_record(archive, damage):
    """Every reader of the version records names the damaged record, not the archive root:
    ``versions.list()`` (the ``versions`` command) as ``versions.latest()`` does."""
    record = archive / "_skewtape_versions" / "records" / "0000000003.json"
    assert record.is_file()
    record.write_bytes(damage)
    with pytest.raises(VersionError) as error:
        archive_at(archive, POLICY).versions.list()
    assert str(record) in str(error.value)


# --- as-of arguments ------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["\u00b2", "\u0661", "\uff11", "1\u0660"])
def test_resolve_as_of_when_text_of_digits_other_than_ascii_refuses_as_no_version(archive, text):
    with pytest.raises(VersionError, match="not a version number, a time"):
        VersionLog(archive).resolve_as_of(text)
    with pytest.raises(VersionError):
        archive_at(archive, POLICY).read(as_of=text)
    assert VersionLog(archive).resolve_as_of("1").version == 1


@pytest.mark.parametrize("version", ["1", True, 1.0])
def test_tag_when_version_is_not_an_int_refuses_naming_the_argument(archive, version):
    with pytest.raises(ConfigError, match=f"version = {version!r}: expected a version number"):
        archive_at(archive, POLICY).versions.tag("paper", version)
    assert VersionLog(archive).tags() == {}
    assert archive_at(archive, POLICY).versions.tag("paper", 1) == 1


# --- a kept hot file missing ----------------------------------------------------------------------


def test_read_as_of_when_a_version_s_consolidated_file_is_missing_names_the_version(archive):
    """Version 10's cold file, replaced by the next re-tiering (which purges the removed day)
    and kept for versions 9 and 10, is gone: a read and a query as of 10 name the version and
    the copy to restore, never rebuild-catalog (which does not bring a version's file back)."""
    before = set(CatalogStore(archive).read().files)
    archive_at(archive, POLICY).retier(as_of=STAGE_2)
    [gone] = sorted(before - set(CatalogStore(archive).read().files))
    path = ArchiveTiers.of(archive, POLICY).resolve(gone)
    path.unlink()
    assert_refused_naming_the_version(archive, path, missing_in=10, readable=11)


def test_read_as_of_when_a_kept_hot_file_is_missing_names_the_version_as_the_query_does(archive):
    log = VersionLog(archive)
    [entry] = [e for e in log.read_manifest(log.read(1)) if e.key == KEYS[0]]
    blob = log.hot_blob(entry)  # re-tiering removed the hot file: versions 1-8 keep this copy
    blob.unlink()
    assert_refused_naming_the_version(archive, blob, missing_in=1, readable=9)


def assert_refused_naming_the_version(
    archive: Path, file: Path, *, missing_in: int, readable: int
) -> None:
    """``Archive.read`` and a query as of ``missing_in`` refuse alike, naming ``file``, the
    version and the copy to restore (never rebuild-catalog); version ``readable`` still reads."""
    handle = archive_at(archive, POLICY)
    with pytest.raises(VersionError) as read:
        handle.read(as_of=missing_in)
    with pytest.raises(VersionError) as query:
        view_rows(archive, as_of=missing_in)
    assert str(read.value) == str(query.value)
    wanted = f"{file}: version {missing_in} reads it but it is missing; restore"
    assert str(read.value).startswith(wanted)
    assert "rebuild-catalog" not in str(read.value)
    assert handle.read(as_of=readable).num_rows == view_rows(archive, as_of=readable)

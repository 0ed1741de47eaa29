"""The delta applier: both modes, idempotence, links, caching, verification, audit and the lock."""

from __future__ import annotations

import json
import os
import stat
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline import fsio, hashing
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.errors import (
    ApplyInProgressError,
    ConfigError,
    SnapshotMismatchError,
    VerificationError,
)
from skewtape_pipeline.mirror import verify as verify_module
from skewtape_pipeline.mirror.apply import LOCK_FILE, apply_delta
from skewtape_pipeline.mirror.merge import connect, merge_table
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline.mirror.verify import merged_tables, verify_snapshot
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import (
    ADDED,
    CHANGED,
    DELETED,
    REPLACED,
    assert_same_snapshot,
    make_case,
    temp_files,
    tree_state,
)

CARRIED = "candles/polymarket/2026-11.parquet"
"""A parent file the delta does not touch."""


@pytest.fixture
def case(tmp_path):
    return make_case(tmp_path)


def in_place_copy(case, name: str = "mirror") -> Path:
    return copy_snapshot(case.parent, case.root / name)


def test_apply_delta_when_in_place_gives_the_next_snapshot(case):
    mirror = in_place_copy(case)
    result = apply_delta(mirror, case.delta)
    assert_same_snapshot(mirror, case.expected)
    assert read_snapshot(mirror)[2] == read_snapshot(case.expected)[2]
    assert (result.mode, result.snapshot, result.already_applied) == ("in_place", mirror, False)
    assert sorted(result.files_added) == sorted(ADDED)
    assert result.files_deleted == [DELETED]
    assert result.files_replaced[0] == REPLACED
    assert sorted(result.rows_upserted) == sorted(CHANGED)
    assert result.rows_upserted["markets.parquet"] == 2  # one row updated, one added
    assert result.rows_deleted["markets.parquet"] == 1
    assert json.loads(json.dumps(result.to_dict()))["snapshot"] == str(mirror)


def test_apply_delta_when_versioned_builds_new_folder_and_leaves_parent_untouched(case):
    before = tree_state(case.parent)
    into = case.root / "history" / "2026-12"
    result = apply_delta(case.parent, case.delta, into=into)
    assert_same_snapshot(into, case.expected)
    assert tree_state(case.parent) == before
    assert (result.mode, result.snapshot) == ("versioned", into)
    assert staging_folders(into) == []
    verify_snapshot(into)


def test_apply_delta_when_versioned_hard_links_carried_files_and_delta_sources(case):
    into = case.root / "history" / "2026-12"
    apply_delta(case.parent, case.delta, into=into)
    assert os.path.samefile(into / CARRIED, case.parent / CARRIED)
    assert os.path.samefile(into / ADDED[0], case.delta / "snapshot" / ADDED[0])
    assert not os.path.samefile(into / "markets.parquet", case.parent / "markets.parquet")


def test_apply_delta_when_link_sources_false_copies_delta_files(case):
    mirror = in_place_copy(case)
    result = apply_delta(mirror, case.delta, link_sources=False)
    assert not os.path.samefile(mirror / ADDED[0], case.delta / "snapshot" / ADDED[0])
    assert result.bytes_written >= (case.delta / "snapshot" / ADDED[0]).stat().st_size
    assert_same_snapshot(mirror, case.expected)


def test_apply_delta_when_done_makes_written_files_read_only(case):
    mirror = in_place_copy(case)
    apply_delta(mirror, case.delta)
    for rel in (*ADDED, REPLACED, *CHANGED):
        assert not stat.S_IMODE((mirror / rel).stat().st_mode) & 0o222, rel


def test_apply_delta_when_applied_twice_reports_already_applied_and_writes_nothing(case):
    mirror = in_place_copy(case)
    apply_delta(mirror, case.delta)
    before = tree_state(mirror)
    again = apply_delta(mirror, case.delta)
    assert again.already_applied
    assert (again.files_added, again.files_deleted, again.rows_upserted) == ([], [], {})
    assert tree_state(mirror) == before


def test_apply_delta_when_versioned_target_holds_next_reports_already_applied(case):
    into = case.root / "history" / "2026-12"
    apply_delta(case.parent, case.delta, into=into)
    before = tree_state(into)
    assert apply_delta(case.parent, case.delta, into=into).already_applied
    assert tree_state(into) == before


def test_apply_delta_when_versioned_target_holds_something_else_refuses(case):
    into = case.root / "history" / "2026-12"
    into.mkdir()
    (into / "notes.txt").write_text("mine")
    with pytest.raises(SnapshotMismatchError, match="already exists") as info:
        apply_delta(case.parent, case.delta, into=into)
    assert "skewtape-history-2026-12" in str(info.value)
    assert (into / "notes.txt").read_text() == "mine"


def test_apply_delta_when_into_overlaps_snapshot_raises_config_error(case):
    with pytest.raises(ConfigError, match="overlaps"):
        apply_delta(case.parent, case.delta, into=case.parent / "next")


def test_apply_delta_when_stale_temp_files_exist_removes_them(case):
    mirror = in_place_copy(case)
    stale = fsio.temp_path_for(mirror / "fills" / "kalshi" / "2026-11.parquet")
    stale.write_bytes(b"half written")
    apply_delta(mirror, case.delta)
    assert not stale.exists()
    assert temp_files(mirror) == []


def test_apply_delta_when_parent_file_modified_locally_versioned_leaves_target_absent(case):
    verify_snapshot(case.parent)  # the cache now vouches for every parent file
    carried = case.parent / CARRIED
    data = bytearray(carried.read_bytes())
    data[-20] ^= 0xFF
    carried.write_bytes(bytes(data))
    into = case.root / "history" / "2026-12"
    with pytest.raises(VerificationError, match=CARRIED):
        apply_delta(case.parent, case.delta, into=into)
    assert not into.exists()
    assert staging_folders(into) == []


def test_apply_delta_when_snapshot_file_modified_in_place_raises_verification_error(case):
    mirror = in_place_copy(case)
    (mirror / CARRIED).write_bytes(b"not the published file")
    with pytest.raises(VerificationError, match=CARRIED):
        apply_delta(mirror, case.delta)


def test_apply_delta_when_parent_cache_vouches_does_not_rehash_carried_files(case, monkeypatch):
    hour_ago = time.time_ns() - 3_600 * 10**9  # a parent published a while ago: not racy
    for path in case.parent.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(hour_ago, hour_ago))
    verify_snapshot(case.parent)
    hashed: list[Path] = []
    real = hashing.sha256_file

    def counting(path: Path) -> str:
        hashed.append(Path(path))
        return real(path)

    monkeypatch.setattr(hashing, "sha256_file", counting)
    into = case.root / "history" / "2026-12"
    apply_delta(case.parent, case.delta, into=into)
    assert any(p.is_relative_to(case.delta) for p in hashed)  # the delta is hashed, once
    # nothing else: not the parent, not the staging folder, not the published month
    assert [p for p in hashed if not p.is_relative_to(case.delta)] == []


def test_apply_delta_when_tables_merged_records_their_sha256(case):
    into = case.root / "history" / "2026-12"
    apply_delta(case.parent, case.delta, into=into)
    recorded = merged_tables(into)
    assert sorted(recorded) == sorted(CHANGED)
    assert recorded["markets.parquet"] == hashing.sha256_file(into / "markets.parquet")


def test_apply_delta_when_audit_log_given_logs_each_change_once(case):
    log = case.root / "audit.log"
    mirror = in_place_copy(case)
    result = apply_delta(mirror, case.delta, audit_log=log)
    records = [json.loads(line) for line in log.read_text().splitlines()]
    changed = result.files_added + result.files_replaced + result.files_deleted
    assert sorted(r["path"] for r in records) == sorted(changed + list(CHANGED))
    by_path = {r["path"]: r for r in records}
    assert by_path[DELETED]["op"] == "delete"
    assert by_path[DELETED]["sha256_before"] == hashing.sha256_file(case.parent / DELETED)
    assert by_path[DELETED]["sha256_after"] is None
    assert by_path["markets.parquet"]["rows_deleted"] == 1
    assert by_path["markets.parquet"]["sha256_after"] == hashing.sha256_file(
        mirror / "markets.parquet"
    )
    assert all(r["actor"] and r["snapshot"] == str(mirror.absolute()) for r in records)
    apply_delta(mirror, case.delta, audit_log=log)
    assert verify_audit_log(log) == len(records)


def test_apply_delta_when_lock_is_held_raises_apply_in_progress(case):
    mirror = in_place_copy(case)
    before = tree_state(mirror)
    with (
        fsio.exclusive_lock(mirror.parent / LOCK_FILE),
        pytest.raises(ApplyInProgressError, match=LOCK_FILE),
    ):
        apply_delta(mirror, case.delta, lock_timeout=0.1)
    assert tree_state(mirror) == before


def test_merge_table_when_changes_add_a_column_keeps_all_columns(tmp_path):
    table = tmp_path / "markets.parquet"
    pq.write_table(
        pa.table({"venue": ["k", "k"], "market_id": ["a", "b"], "title": ["A", "B"]}), table
    )
    row_type = pa.struct(
        [("venue", pa.string()), ("market_id", pa.string()), ("title", pa.string()),
         ("status", pa.string())]
    )  # fmt: skip
    rows = pa.array(
        [{"venue": "k", "market_id": "a", "title": None, "status": None},
         {"venue": "k", "market_id": "c", "title": "C", "status": "open"}],
        row_type,
    )  # fmt: skip
    changes = tmp_path / "changes.parquet"
    pq.write_table(pa.table({"op": ["delete", "upsert"], "row": rows}), changes)
    merge_table(connect(), table, changes, ("venue", "market_id"), checkpoint_name="t")
    merged = pq.read_table(table)
    assert merged.column_names == ["venue", "market_id", "title", "status"]
    assert merged.to_pylist() == [
        {"venue": "k", "market_id": "b", "title": "B", "status": None},
        {"venue": "k", "market_id": "c", "title": "C", "status": "open"},
    ]
    assert pq.ParquetFile(table).metadata.row_group(0).column(0).compression == "ZSTD"


def test_apply_delta_when_snapshot_given_as_dot_keeps_the_lock_outside_it(case, monkeypatch):
    mirror = in_place_copy(case)
    monkeypatch.chdir(mirror)
    apply_delta(Path("."), case.delta)
    assert not (mirror / LOCK_FILE).exists()
    assert (mirror.parent / LOCK_FILE).exists()
    verify_snapshot(mirror)


@pytest.mark.parametrize("versioned", [False, True], ids=["in_place", "versioned"])
def test_apply_delta_when_done_links_are_restamped_so_the_next_verify_hashes_only_new_tables(
    case, versioned
):
    hour_ago = time.time_ns() - 3_600 * 10**9  # published a while ago: nothing racy
    for folder in (case.parent, case.delta):
        for path in folder.rglob("*"):
            if path.is_file():
                os.utime(path, ns=(hour_ago, hour_ago))
    parent = case.parent if versioned else in_place_copy(case)
    verify_snapshot(parent)
    into = case.root / "history" / "2026-12" if versioned else None
    result = apply_delta(parent, case.delta, into=into)
    again = verify_snapshot(result.snapshot)
    # Links and renames moved the ctimes of carried and linked files; the apply re-stamped
    # them, so only the tables it merged a moment ago (racy by the clock) are hashed again.
    assert again.files_hashed <= len(CHANGED)


def _modify_keeping_size_and_mtime(path: Path) -> None:
    """Rewrite ``path``'s first byte, its size and mtime restored (``touch -r``): only the
    ctime tells."""
    was = path.stat()
    path.chmod(0o644)
    data = path.read_bytes()
    path.write_bytes(bytes([data[0] ^ 1]) + data[1:])
    os.utime(path, ns=(was.st_atime_ns, was.st_mtime_ns))


@pytest.mark.parametrize("mode", ["versioned", "in_place"])
def test_apply_delta_when_a_file_it_carries_was_modified_locally_names_it_in_the_parent(case, mode):
    """A parent file the next month takes as it is, modified locally: refused naming that
    file in the parent and saying it was modified locally (as a table's is), never naming a
    staging folder gone by the time the message is read; nothing staged or written."""
    mirror = case.parent if mode == "versioned" else in_place_copy(case)
    verify_snapshot(mirror)  # its hashes cached: the change is seen through the ctime alone
    _modify_keeping_size_and_mtime(mirror / CARRIED)
    before = tree_state(mirror)
    into = case.root / "history" / "2026-12" if mode == "versioned" else None

    with pytest.raises(VerificationError) as refused:
        apply_delta(mirror, case.delta, into=into)

    assert str(refused.value).startswith(
        f"{mirror} does not verify: {CARRIED}: modified locally: sha256 "
    )
    assert tree_state(mirror) == before
    assert into is None or not into.exists()
    assert staging_folders(into or mirror) == []


def test_apply_delta_when_it_hashed_a_carried_file_to_check_it_does_not_hash_it_again(
    case, monkeypatch
):
    """Without a hash cache the check hashes each carried file of the parent once, and the
    verification of the staged month trusts those hashes (their stamps held)."""
    hour_ago = time.time_ns() - 3_600 * 10**9  # nothing racy
    for path in case.parent.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(hour_ago, hour_ago))
    hashed: list[str] = []
    real = verify_module.sha256_files

    def counting(paths, **kwargs):
        paths = list(paths)
        hashed.extend(path.as_posix().rsplit(".partial/", 1)[-1] for path in paths)
        return real(paths, **kwargs)

    (case.parent / ".skewtape" / "hashes.json").unlink(missing_ok=True)
    monkeypatch.setattr(verify_module, "sha256_files", counting)
    apply_delta(case.parent, case.delta, into=case.root / "history" / "2026-12")

    assert hashed.count(f"{case.parent.as_posix()}/{CARRIED}") == 1
    assert CARRIED not in hashed  # its staged link was not hashed again


@pytest.mark.parametrize("mode", ["versioned", "in_place"])
def test_apply_delta_when_a_table_it_merges_into_was_modified_locally_refuses_it(case, mode):
    """Rewritten locally (here: the same rows in other bytes), a table the delta changes is
    neither the published bytes nor a merge recorded: the apply refuses it as verify does,
    before any write, instead of merging into it and recording the result as its own."""
    mirror = case.parent if mode == "versioned" else in_place_copy(case)
    table = mirror / "markets.parquet"
    rows = pq.read_table(table)
    os.chmod(table, 0o644)
    pq.write_table(rows, table, compression="gzip")
    before = tree_state(mirror)
    into = case.root / "history" / "2026-12" if mode == "versioned" else None

    with pytest.raises(VerificationError, match=r"markets\.parquet: modified locally"):
        apply_delta(mirror, case.delta, into=into)

    assert tree_state(mirror) == before
    assert into is None or not into.exists()

"""Hostile changes during an apply: nothing unverified is published, and the parent of an in-place
apply is untouched until every check passed on the staged result.

Each test changes the delta (or its sources) after the delta was checked, the way an rsync or a
second writer would, and asserts the apply refuses with a typed error leaving the snapshot's
published files byte for byte as they were and no change in the audit log; then that a rerun
behaves (refuses again the same way, or applies once the delta is whole again).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.errors import (
    ChangeFileError,
    ChecksumMismatchError,
    SkewtapeError,
    VerificationError,
)
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.format import LOCAL_STATE_DIR, MANIFEST
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import (
    copy_snapshot,
    make_snapshot,
    reseal,
    rewrite_keeping_stamp,
)
from skewtape_pipeline_tests.mirror.apply_support import (
    ADDED,
    NEXT_MONTH,
    PARENT_MONTH,
    REPLACED,
    assert_same_snapshot,
    edit_manifest,
    entry_index,
    evolve_snapshot,
    make_case,
    rewrite_change_file,
    tree_state,
)

COPY = "docs/README-copy.md"
"""A file of the next snapshot with the README's bytes."""


@pytest.fixture
def case(tmp_path):
    return make_case(tmp_path)


class Crash(Exception):
    """Raised by a test hook."""


def published_state(folder: Path) -> dict:
    """Every published entry of ``folder`` (bytes, mode, mtime); local state left out."""
    return {
        rel: value
        for rel, value in tree_state(folder).items()
        if rel.split("/")[0] != LOCAL_STATE_DIR
    }


def audit_records(log: Path) -> list[dict]:
    return [json.loads(line) for line in log.read_text().splitlines()] if log.exists() else []


def at_checkpoint(name: str, action):
    """A fault hook that runs ``action()`` once, at the checkpoint ``name``."""
    done = []

    def hook(seen: str) -> None:
        if seen == name and not done:
            done.append(seen)
            action()

    return hook


def mirror_and_target(case, versioned: bool) -> tuple[Path, Path | None]:
    mirror = copy_snapshot(case.parent, case.root / "mirror" / "2026-11")
    return mirror, (case.root / "mirror" / "2026-12" if versioned else None)


def flip_keeping_stamp(path: Path) -> None:
    """Change one byte of ``path`` in place, restoring its size and mtime (``touch -r``)."""
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    rewrite_keeping_stamp(path, bytes(data))


# --- wrong bytes published with exit 0 -----------------------------------------------------------


@pytest.mark.parametrize("link_sources", [True, False], ids=["link", "copy"])
@pytest.mark.parametrize("versioned", [False, True], ids=["in_place", "versioned"])
def test_apply_delta_when_source_rewritten_keeping_size_and_mtime_refuses_and_publishes_nothing(
    case, versioned, link_sources
):
    mirror, into = mirror_and_target(case, versioned)
    before = published_state(mirror)
    victim = case.delta / "snapshot" / ADDED[0]
    with (
        faults.installed(at_checkpoint("preflight", lambda: flip_keeping_stamp(victim))),
        pytest.raises(ChecksumMismatchError, match=ADDED[0]),
    ):
        apply_delta(mirror, case.delta, into=into, link_sources=link_sources)
    assert published_state(mirror) == before
    assert into is None or not into.exists()
    assert staging_folders(into or mirror) == []


@pytest.mark.parametrize(
    ("versioned", "at"),
    [(False, "verified"), (True, "verified"), (True, "before-rename")],
    ids=["in_place-verified", "versioned-verified", "versioned-before-rename"],
)
def test_apply_delta_when_a_placed_delta_file_is_rewritten_after_verification_never_publishes_it(
    case, versioned, at
):
    """Rewritten in place (size and mtime restored) after the last verification: where the
    staged file is the delta's own inode (a hard link) the stamp check right before the commit
    refuses; where it is a clone or a copy the rewrite cannot reach it. Either way what is
    published is the next snapshot, byte for byte."""
    mirror, into = mirror_and_target(case, versioned)
    before = published_state(mirror)
    victim = case.delta / "snapshot" / ADDED[0]
    try:
        with faults.installed(at_checkpoint(at, lambda: flip_keeping_stamp(victim))):
            apply_delta(mirror, case.delta, into=into)
    except ChecksumMismatchError as refused:
        assert ADDED[0] in str(refused) and "changed after it was verified" in str(refused)
        assert published_state(mirror) == before
        assert into is None or not into.exists()
        assert staging_folders(into or mirror) == []
    else:
        assert_same_snapshot(into or mirror, case.expected)
        verify_snapshot(into or mirror, full=True)


# --- in place, a state no rerun can finish -------------------------------------------------------


def drop_deletes(table: pa.Table) -> pa.Table:
    """The change table without its delete rows (the merge then keeps a row it should drop)."""
    return table.filter(pc.equal(table.column("op"), "upsert"))


def tick_size_as_double(table: pa.Table) -> pa.Table:
    rows = table.column("row").combine_chunks()
    fields, arrays = [], []
    for index in range(rows.type.num_fields):
        field = rows.type.field(index)
        column = rows.field(field.name)
        if field.name == "tick_size":
            field, column = pa.field("tick_size", pa.float64()), column.cast(pa.float64())
        fields.append(field)
        arrays.append(column)
    struct = pa.StructArray.from_arrays(arrays, fields=fields)
    return table.set_column(table.schema.get_field_index("row"), "row", struct)


@pytest.mark.parametrize(
    ("transform", "schema_break", "error"),
    [
        (drop_deletes, False, VerificationError),
        (tick_size_as_double, False, ChangeFileError),
        (tick_size_as_double, True, VerificationError),
    ],
    ids=["row_count_differs", "non_key_column_wrong_type", "wrong_type_under_schema_break"],
)
def test_apply_delta_when_in_place_result_would_not_verify_leaves_parent_and_audit_untouched(
    case, transform, schema_break, error
):
    rewrite_change_file(case.delta, "markets.parquet", transform)
    if schema_break:  # the row checks are off: only the staged verification can catch it
        edit_manifest(case.delta, lambda data: data.update(schema_break=True))
    mirror, _ = mirror_and_target(case, versioned=False)
    log = case.root / "audit.jsonl"
    before = published_state(mirror)
    for _ in range(2):  # a rerun refuses the same way: nothing half-applied to finish
        with pytest.raises(error, match=r"markets\.parquet"):
            apply_delta(mirror, case.delta, audit_log=log)
        assert published_state(mirror) == before
        assert audit_records(log) == []
        assert staging_folders(mirror) == []
    verify_snapshot(mirror, full=True)


@pytest.mark.parametrize("swapped", ["changes/markets.parquet", f"snapshot/{ADDED[0]}"])
def test_apply_delta_when_source_swapped_mid_run_in_place_leaves_parent_and_rerun_applies(
    case, swapped
):
    mirror, _ = mirror_and_target(case, versioned=False)
    log = case.root / "audit.jsonl"
    before = published_state(mirror)
    source = case.delta / swapped
    kept = case.root / "kept-source"
    os.link(source, kept)
    other = case.root / "other"
    copy_snapshot(case.delta, other)
    rewrite_change_file(other, "markets.parquet", drop_deletes)
    flip_keeping_stamp(other / "snapshot" / ADDED[0])

    def swap() -> None:  # a new inode with other bytes, renamed over the checked source
        (other / swapped).rename(source)

    with faults.installed(at_checkpoint("preflight", swap)), pytest.raises(SkewtapeError):
        apply_delta(mirror, case.delta, audit_log=log)
    assert published_state(mirror) == before
    assert audit_records(log) == []
    kept.rename(source)  # the delta is whole again: a rerun applies it
    apply_delta(mirror, case.delta, audit_log=log)
    assert_same_snapshot(mirror, case.expected)
    assert len(audit_records(log)) > 0


def test_apply_delta_when_in_place_crashed_after_commit_point_rerun_finishes(case):
    mirror, _ = mirror_and_target(case, versioned=False)
    log = case.root / "audit.jsonl"

    def crash() -> None:
        raise Crash("after the commit point")

    with faults.installed(at_checkpoint("committed", crash)), pytest.raises(Crash):
        apply_delta(mirror, case.delta, audit_log=log)
    result = apply_delta(mirror, case.delta, audit_log=log)
    assert not result.already_applied
    assert_same_snapshot(mirror, case.expected)
    verify_snapshot(mirror, full=True)
    paths = [record["path"] for record in audit_records(log)]
    assert sorted(paths) == sorted(set(paths)) and len(paths) > 0
    assert (mirror / MANIFEST).read_bytes() == (case.expected / MANIFEST).read_bytes()
    assert staging_folders(mirror) == []


def test_apply_delta_when_in_place_refused_after_staging_the_parent_cache_still_vouches(case):
    rewrite_change_file(case.delta, "markets.parquet", drop_deletes)
    mirror, _ = mirror_and_target(case, versioned=False)
    hour_ago = time.time_ns() - 3_600 * 10**9
    for path in mirror.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(hour_ago, hour_ago))
    verify_snapshot(mirror)
    with pytest.raises(VerificationError):
        apply_delta(mirror, case.delta)
    # The staged links were made and removed (each moving the parent files' ctimes); the
    # apply re-stamped the parent's cache across both, so nothing needs hashing again.
    assert verify_snapshot(mirror).files_hashed == 0


def test_apply_delta_when_two_entries_link_one_delta_file_applies_both(tmp_path):
    """Linking a delta file a second time moves the ctime of the first link too: not a
    rewrite, and the last check before the commit, hashing the file again, accepts it."""
    parent = make_snapshot(tmp_path, month=PARENT_MONTH, venues=("kalshi",))
    expected = evolve_snapshot(parent, tmp_path / "published" / NEXT_MONTH, month=NEXT_MONTH,
                               deleted="fills/kalshi/2026-10.parquet")  # fmt: skip
    (expected / COPY).parent.mkdir()
    shutil.copyfile(expected / REPLACED, expected / COPY)
    reseal(expected, month=NEXT_MONTH)
    delta = tmp_path / "deltas" / NEXT_MONTH
    build_delta(parent, expected, delta)
    readme_source = f"snapshot/{REPLACED}"

    def share_the_source(data):
        data["files"][entry_index(delta, COPY)]["source"] = readme_source

    edit_manifest(delta, share_the_source)
    mirror = copy_snapshot(parent, tmp_path / "mirror" / PARENT_MONTH)
    result = apply_delta(mirror, delta)
    assert COPY in result.files_added
    assert_same_snapshot(mirror, expected)

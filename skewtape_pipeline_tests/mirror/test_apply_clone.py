"""On a file system that clones files (a real XFS, loop-mounted), the delta's files are cloned,
not hard-linked: the published snapshot never shares an inode with the delta, so a delta file
rewritten in place during or after the apply cannot reach it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import ChecksumMismatchError
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import (
    ADDED,
    assert_same_snapshot,
    make_case,
    tree_state,
)
from skewtape_pipeline_tests.mirror.test_apply_integrity import at_checkpoint, flip_keeping_stamp

XFS_BYTES = 320 * 2**20
"""A sparse image just above mkfs.xfs's smallest file system."""


@pytest.fixture
def xfs(tmp_path: Path):
    """A folder on a fresh XFS file system (``mkfs.xfs``, Debian's xfsprogs: ``make
    reflink-filesystem``), loop-mounted for the test and unmounted after it."""
    image, mount = tmp_path / "xfs.img", tmp_path / "xfs"
    with open(image, "wb") as handle:
        handle.truncate(XFS_BYTES)
    subprocess.run(["mkfs.xfs", "-q", str(image)], check=True)
    mount.mkdir()
    subprocess.run(["mount", "-o", "loop", str(image), str(mount)], check=True)
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=True)


@pytest.mark.parametrize(
    ("versioned", "at"),
    [(False, "verified"), (True, "verified"), (True, "before-rename"), (False, "finished")],
)
def test_apply_delta_when_the_file_system_clones_a_rewritten_delta_file_never_reaches_the_snapshot(
    xfs, versioned, at
):
    case = make_case(xfs, small=True)
    mirror = copy_snapshot(case.parent, xfs / "mirror" / "2026-11")
    into = xfs / "mirror" / "2026-12" if versioned else None
    victim = case.delta / "snapshot" / ADDED[0]
    with faults.installed(at_checkpoint(at, lambda: flip_keeping_stamp(victim))):
        result = apply_delta(mirror, case.delta, into=into)
    published = into or mirror
    assert result.files_cloned == len(result.files_added) + len(result.files_replaced)
    assert not os.path.samefile(published / ADDED[0], victim)
    assert_same_snapshot(published, case.expected)
    verify_snapshot(published, full=True)


def test_apply_delta_when_a_delta_file_is_written_while_cloned_hashes_the_clone_and_refuses(
    xfs, monkeypatch
):
    """The source's stamp moved across the clone: the clone's own bytes are hashed, and bytes
    other than the manifest's are refused before anything is published."""
    case = make_case(xfs, small=True)
    mirror = copy_snapshot(case.parent, xfs / "mirror" / "2026-11")
    victim = case.delta / "snapshot" / ADDED[0]
    clone = fsio._clone

    def written_meanwhile(source, temp):
        if source == victim:
            flip_keeping_stamp(victim)
        return clone(source, temp)

    monkeypatch.setattr(fsio, "_clone", written_meanwhile)
    before = tree_state(mirror)
    with pytest.raises(ChecksumMismatchError, match="the bytes copied hash to"):
        apply_delta(mirror, case.delta)
    after = tree_state(mirror)
    assert {rel: after.get(rel) for rel in before if not rel.startswith(".skewtape")} == {
        rel: state for rel, state in before.items() if not rel.startswith(".skewtape")
    }

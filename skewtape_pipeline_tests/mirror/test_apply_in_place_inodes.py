"""An in-place apply shares no inode with the delta folder, on a file system that cannot clone
too (ext4 and the like: each delta file is copied, never hard-linked), so a delta file
rewritten after the commit never changes the published month."""

from __future__ import annotations

from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, make_case
from skewtape_pipeline_tests.mirror.test_apply_integrity import flip_keeping_stamp


def inodes(folder) -> set[tuple[int, int]]:
    return {
        (stat.st_dev, stat.st_ino)
        for path in folder.rglob("*")
        if path.is_file() and not path.is_symlink()
        for stat in [path.stat()]
    }


def test_apply_delta_in_place_when_a_delta_file_is_rewritten_after_the_commit_the_month_keeps(
    tmp_path,
):
    case = make_case(tmp_path, small=True)
    mirror = copy_snapshot(case.parent, tmp_path / "mirror" / "2026-11")
    apply_delta(mirror, case.delta, audit_log=None)

    assert inodes(mirror) & inodes(case.delta) == set()
    for path in (case.delta / "snapshot").rglob("*"):
        if path.is_file():
            flip_keeping_stamp(path)
    verify_snapshot(mirror, full=True)
    assert_same_snapshot(mirror, case.expected)

"""A full disk (a small tmpfs, mounted as root, filled to a few KB of free space at every
level from none to enough): ``apply-delta`` (in place and versioned) and ``compact-ticks`` stop
at once with one line naming the folder and the file they were writing, never a bare
``[Errno 28]``; they publish nothing half-written, leave no hidden staging folder, and once
there is space the same command gives the right result."""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline_tests.conftest import copy_snapshot, mounted_tmpfs
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, make_case
from skewtape_pipeline_tests.mirror.test_apply_integrity import published_state
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

FREE_KB = range(0, 96, 8)
"""The free space left on the file system before each run: none, then a few pages more."""


@pytest.fixture
def small_fs(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for the test (as root) and unmounted after it."""
    with mounted_tmpfs(tmp_path / "fs", "4m") as mount:
        yield mount


def fill(folder: Path, leave_kb: int) -> Path:
    """Take all but ``leave_kb`` KB of the file system's free space (a filler file)."""
    filler = folder / "filler"
    filler.unlink(missing_ok=True)
    stats = os.statvfs(folder)
    size = stats.f_bavail * stats.f_frsize - leave_kb * 1024
    fd = os.open(filler, os.O_WRONLY | os.O_CREAT)
    try:
        if size > 0:
            os.posix_fallocate(fd, 0, size)
    finally:
        os.close(fd)
    return filler


def run(capsys, argv: list[str]) -> tuple[int, str]:
    code = main(argv)
    return code, capsys.readouterr().err


def assert_stopped(err: str, folder: Path, writing: str) -> None:
    """One error line, last, naming the folder and what was written; before it only progress
    lines (a command that runs over 10 s, as on a loaded machine, prints them: ``label: ...``)."""
    *before, error = err.splitlines()
    assert err.endswith("\n") and "Errno" not in err and "Traceback" not in err, err
    assert all(line.startswith(("compact-ticks", "apply-delta")) for line in before), err
    assert error.startswith(f"error: {folder}: no space left on the device while "), err
    assert f", writing {writing}" in error or f", writing {Path(writing).resolve()}" in error, err


@pytest.mark.parametrize("versioned", [False, True], ids=["in_place", "versioned"])
def test_apply_delta_on_a_full_disk_stops_naming_the_folder_and_changes_nothing(
    small_fs, capsys, versioned
):
    case = make_case(small_fs / "case", small=True)
    stopped = 0
    for leave_kb in FREE_KB:
        mirror = copy_snapshot(case.parent, small_fs / "mirror" / "2026-11")
        into = small_fs / "mirror" / "2026-12" if versioned else None
        before = published_state(mirror)
        filler = fill(small_fs, leave_kb)
        argv = ["apply-delta", str(mirror), str(case.delta), "--no-audit"]
        code, err = run(capsys, argv + (["--into", str(into)] if into else []))
        if code == 0:
            break
        stopped += 1
        assert code == 1
        assert_stopped(err, into or mirror, str(small_fs))
        assert published_state(mirror) == before
        assert into is None or not into.exists()
        assert staging_folders(into or mirror) == []
        filler.unlink()
        assert run(capsys, argv + (["--into", str(into)] if into else []))[0] == 0
        assert_same_snapshot(into or mirror, case.expected)
        shutil.rmtree(small_fs / "mirror")
    assert stopped >= 3


def test_compact_ticks_on_a_full_disk_stops_naming_the_archive_and_what_it_was_writing(
    small_fs, tmp_path, capsys
):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = small_fs / "archive"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
            "--price-scale", "2", "--audit-log", str(small_fs / "audit.jsonl")]  # fmt: skip
    stopped = 0
    for leave_kb in FREE_KB:
        filler = fill(small_fs, leave_kb)
        code, err = run(capsys, argv)
        if code == 0:
            break
        stopped += 1
        assert code == 1
        assert_stopped(err, archive, str(small_fs))
        assert not [p for p in archive.rglob("*") if ".skewtape-tmp" in p.name]
        filler.unlink()
        assert run(capsys, argv)[0] == 0
        assert run(capsys, ["verify-archive", str(archive)])[0] == 0
        shutil.rmtree(archive)
        (small_fs / "audit.jsonl").unlink(missing_ok=True)
        (small_fs / "audit.jsonl.head").unlink(missing_ok=True)
    assert stopped >= 3

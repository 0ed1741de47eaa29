"""Two processes applying the same delta to the same history folder: one at a time."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest

from skewtape_pipeline.errors import LinkedStateFileError
from skewtape_pipeline.mirror.apply import LOCK_FILE, apply_delta
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, make_case

APPLIER = """
import sys, time
from pathlib import Path
from skewtape_pipeline.errors import ApplyInProgressError
from skewtape_pipeline import faults
from skewtape_pipeline.mirror.apply import apply_delta

snapshot, delta, timeout, flags, hold = sys.argv[1:6]
flags = Path(flags)

def hold_the_lock(name):
    if name == "locked" and hold == "hold":
        (flags / "locked").touch()
        deadline = time.monotonic() + 60
        while not (flags / "release").exists() and time.monotonic() < deadline:
            time.sleep(0.02)

with faults.installed(hold_the_lock):
    try:
        result = apply_delta(Path(snapshot), Path(delta), lock_timeout=float(timeout))
    except ApplyInProgressError as exc:
        print("in-progress:", exc)
        sys.exit(3)
print("already" if result.already_applied else "applied")
"""


def start(mirror: Path, delta: Path, flags: Path, *, timeout: float, hold: bool):
    args = [str(mirror), str(delta), str(timeout), str(flags), "hold" if hold else "-"]
    return subprocess.Popen(
        [sys.executable, "-c", APPLIER, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for(path: Path, process: subprocess.Popen) -> None:
    deadline = time.monotonic() + 60
    while not path.exists():
        assert process.poll() is None, process.communicate()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.02)


def test_apply_delta_when_two_processes_race_one_applies_and_the_other_waits_or_refuses(
    tmp_path,
):
    case = make_case(tmp_path / "case", small=True)
    mirror = copy_snapshot(case.parent, tmp_path / "history" / "2026-11")
    flags = tmp_path / "flags"
    flags.mkdir()
    holder = start(mirror, case.delta, flags, timeout=0, hold=True)
    try:
        wait_for(flags / "locked", holder)
        refused = start(mirror, case.delta, flags, timeout=0, hold=False)
        out, err = refused.communicate(timeout=120)
        assert refused.returncode == 3, err
        assert "in-progress" in out and LOCK_FILE in out
        waiter = start(mirror, case.delta, flags, timeout=60, hold=False)
        time.sleep(0.5)
        assert waiter.poll() is None  # blocked on the lock the holder still has
    finally:
        (flags / "release").touch()
    out, err = holder.communicate(timeout=120)
    assert (holder.returncode, out.strip()) == (0, "applied"), err
    out, err = waiter.communicate(timeout=120)
    assert (waiter.returncode, out.strip()) == (0, "already"), err
    assert_same_snapshot(mirror, case.expected)


def test_apply_delta_when_a_second_process_goes_through_a_symlinked_alias_it_is_refused(
    tmp_path,
):
    case = make_case(tmp_path / "case", small=True)
    mirror = copy_snapshot(case.parent, tmp_path / "history" / "2026-11")
    alias = tmp_path / "elsewhere" / "current"
    alias.parent.mkdir()
    alias.symlink_to(mirror)  # the same snapshot folder under another name
    flags = tmp_path / "flags"
    flags.mkdir()
    holder = start(mirror, case.delta, flags, timeout=0, hold=True)
    try:
        wait_for(flags / "locked", holder)
        second = start(alias, case.delta, flags, timeout=0, hold=False)
        out, err = second.communicate(timeout=120)
    finally:
        (flags / "release").touch()
    assert second.returncode == 3, (out, err)
    assert f"{mirror.parent / LOCK_FILE} is held by applying" in out
    assert f"process {holder.pid}" in out
    out, err = holder.communicate(timeout=120)
    assert (holder.returncode, out.strip()) == (0, "applied"), err
    assert_same_snapshot(mirror, case.expected)
    assert not (alias.parent / LOCK_FILE).exists()


def test_apply_delta_when_the_lock_file_is_a_planted_symlink_refuses_and_leaves_its_target(
    tmp_path,
):
    case = make_case(tmp_path / "case", small=True)
    mirror = copy_snapshot(case.parent, tmp_path / "history" / "2026-11")
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (mirror.parent / LOCK_FILE).symlink_to(precious)
    before = sorted(p.name for p in mirror.iterdir())
    with pytest.raises(LinkedStateFileError, match=LOCK_FILE):
        apply_delta(mirror, case.delta)
    assert precious.read_text() == "keep me\n"
    assert sorted(p.name for p in mirror.iterdir()) == before

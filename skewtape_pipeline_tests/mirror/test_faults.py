"""Crash at every checkpoint of an apply, rerun, and get exactly the next snapshot.

A clean run counts the checkpoints; then, for each one, a fresh copy of the parent is applied
with a hook that raises there (simulating a crash: temporary files written before the failed
rename stay behind), and the same call is run again without the hook. The result must be the
published next snapshot (bytes for files, rows for tables), verified, without leftovers, with
the parent untouched (versioned) and every change in the audit log exactly once. A last test
kills a real process with SIGKILL mid-apply and reruns.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import (
    assert_same_snapshot,
    make_case,
    temp_files,
    tree_state,
)

MODES = ("in_place", "versioned")


class InjectedCrash(Exception):
    """Raised by the test hook at the chosen checkpoint."""


def crash_at(index: int):
    seen = []

    def hook(name: str) -> None:
        seen.append(name)
        if len(seen) - 1 == index:
            raise InjectedCrash(name)

    return hook


def run_folder(root: Path, name: str, case) -> tuple[Path, Path]:
    """A fresh history folder holding a copy of the parent; returns (parent copy, history)."""
    history = root / name / "history"
    return copy_snapshot(case.parent, history / "2026-11"), history


def apply(parent: Path, history: Path, case, mode: str, **options):
    into = history / "2026-12" if mode == "versioned" else None
    return apply_delta(parent, case.delta, into=into, **options)


def logged(log: Path) -> list[tuple[str, str]]:
    records = [json.loads(line) for line in log.read_text().splitlines()]
    return sorted((r["path"], r["op"]) for r in records)


@pytest.mark.parametrize("mode", MODES)
def test_apply_delta_when_crashed_at_any_checkpoint_rerun_gives_next_snapshot(
    tmp_path, mode, monkeypatch
):
    # Durability after power loss is not what this test exercises; skipping fsync keeps the
    # hundred-odd applies fast. Everything else (renames, temp files, journal) runs for real.
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    case = make_case(tmp_path / "case", small=True)
    names: list[str] = []
    parent, history = run_folder(tmp_path, "clean", case)
    with faults.installed(names.append):
        clean = apply(parent, history, case, mode, audit_log=history / "audit.log")
    clean_log = logged(history / "audit.log")
    assert len(names) > 30 and len(set(names)) > 20  # every step boundary is a checkpoint
    for index, name in enumerate(names):
        parent, history = run_folder(tmp_path, f"crash-{index}", case)
        parent_before = tree_state(parent) if mode == "versioned" else None
        log = history / "audit.log"
        with faults.installed(crash_at(index)), pytest.raises(InjectedCrash):
            apply(parent, history, case, mode, audit_log=log)
        result = apply(parent, history, case, mode, audit_log=log)
        target = result.snapshot
        assert_same_snapshot(target, case.expected)
        verify_snapshot(target, full=True)
        assert temp_files(target) == [], name
        if mode == "versioned":
            assert staging_folders(target) == [], name
            assert tree_state(parent) == parent_before, name
        if not result.already_applied:
            assert (result.files_added, result.files_replaced, result.files_deleted) == (
                clean.files_added,
                clean.files_replaced,
                clean.files_deleted,
            ), name
            assert result.rows_upserted == clean.rows_upserted, name
        assert logged(log) == clean_log, f"audit after a crash at {index}: {name}"
        verify_audit_log(log)
        shutil.rmtree(tmp_path / f"crash-{index}")


KILLER = """
import os, signal, sys
from pathlib import Path
from skewtape_pipeline import faults
from skewtape_pipeline.mirror.apply import apply_delta

snapshot, delta, into, kill_at = sys.argv[1:5]

def hook(name):
    if name == kill_at:
        os.kill(os.getpid(), signal.SIGKILL)

with faults.installed(hook):
    apply_delta(Path(snapshot), Path(delta), into=None if into == "-" else Path(into))
sys.exit(0)
"""


@pytest.mark.parametrize(
    ("mode", "kill_at"),
    [("in_place", "publish:markets.parquet"), ("versioned", "markets.parquet:written")],
)
def test_apply_delta_when_process_killed_mid_apply_rerun_finishes(tmp_path, mode, kill_at):
    case = make_case(tmp_path / "case", small=True)
    parent, history = run_folder(tmp_path, "killed", case)
    into = history / "2026-12" if mode == "versioned" else None
    killed = subprocess.run(
        [sys.executable, "-c", KILLER, str(parent), str(case.delta), str(into or "-"), kill_at],
        capture_output=True,
        timeout=120,
    )
    assert killed.returncode == -signal.SIGKILL, killed.stderr.decode()
    work = staging_folders(into)[0] if into is not None else parent
    assert temp_files(work), "the kill should leave the merge's temporary file behind"
    result = apply(parent, history, case, mode)
    assert not result.already_applied
    assert_same_snapshot(result.snapshot, case.expected)
    verify_snapshot(result.snapshot, full=True)
    assert temp_files(result.snapshot) == []

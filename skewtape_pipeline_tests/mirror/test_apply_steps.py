"""The applier run as separate steps (check, file ops, merges, publish), as the pipeline does."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewtape_pipeline import hashing
from skewtape_pipeline.errors import ChecksumMismatchError, ConfigError
from skewtape_pipeline.mirror.apply import LOCK_FILE, apply_delta, check_delta, staging_folder
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import (
    ADDED,
    CHANGED,
    assert_same_snapshot,
    make_case,
    tree_state,
)


@pytest.fixture
def case(tmp_path):
    return make_case(tmp_path)


@pytest.fixture
def hashed(monkeypatch) -> list[Path]:
    """Every file hashed from now on."""
    seen: list[Path] = []
    real = hashing.sha256_file

    def counting(path: Path) -> str:
        seen.append(Path(path))
        return real(path)

    monkeypatch.setattr(hashing, "sha256_file", counting)
    return seen


def state_without_lock(folder: Path) -> dict:
    return {rel: v for rel, v in tree_state(folder).items() if not rel.endswith(LOCK_FILE)}


def run_in_steps(parent: Path, delta: Path, into: Path | None) -> list:
    checked = check_delta(parent, delta, into=into)
    assert checked is not None
    results = [
        apply_delta(parent, delta, into=into, prechecked=checked, stop_after=step)
        for step in ("file_ops", "merges")
    ]
    return [*results, apply_delta(parent, delta, into=into, prechecked=checked)]


@pytest.mark.parametrize("versioned", [False, True])
def test_apply_delta_when_run_in_steps_reaches_the_next_snapshot(case, versioned):
    parent = case.parent if versioned else copy_snapshot(case.parent, case.root / "mirror")
    into = case.root / "history" / "2026-12" if versioned else None
    file_ops, merges, final = run_in_steps(parent, case.delta, into)
    assert (file_ops.stopped_after, merges.stopped_after, final.stopped_after) == (
        "file_ops",
        "merges",
        None,
    )
    assert file_ops.seconds["merges"] == 0 and merges.seconds["merges"] > 0
    assert sorted(final.files_added) == sorted(ADDED)
    assert sorted(final.rows_upserted) == sorted(CHANGED)
    assert_same_snapshot(into or parent, case.expected)


def test_apply_delta_when_stopped_before_publish_versioned_target_stays_absent(case):
    into = case.root / "history" / "2026-12"
    before = tree_state(case.parent)
    apply_delta(case.parent, case.delta, into=into, stop_after="merges")
    assert not into.exists() and staging_folder(into).exists()
    assert tree_state(case.parent) == before


def test_check_delta_when_called_writes_nothing_and_prechecked_skips_rehashing(case, hashed):
    into = case.root / "history" / "2026-12"
    before = state_without_lock(case.root)
    checked = check_delta(case.parent, case.delta, into=into)
    assert state_without_lock(case.root) == before
    assert checked is not None and {p for p in hashed if p.is_relative_to(case.delta)}
    hashed.clear()
    apply_delta(case.parent, case.delta, into=into, prechecked=checked)
    assert not [p for p in hashed if p.is_relative_to(case.delta)]


def test_apply_delta_when_prechecked_file_changed_since_rehashes_and_refuses(case):
    checked = check_delta(case.parent, case.delta, into=case.root / "history" / "2026-12")
    victim = case.delta / "snapshot" / ADDED[0]
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes() + b"!")
    with pytest.raises(ChecksumMismatchError, match=ADDED[0]):
        apply_delta(case.parent, case.delta, into=case.root / "history" / "2026-12",
                    prechecked=checked)  # fmt: skip


def test_check_delta_when_next_already_in_place_returns_none(case):
    into = case.root / "history" / "2026-12"
    apply_delta(case.parent, case.delta, into=into)
    assert check_delta(case.parent, case.delta, into=into) is None


def test_apply_delta_when_stop_after_unknown_raises_config_error(case):
    with pytest.raises(ConfigError, match="stop_after"):
        apply_delta(case.parent, case.delta, into=case.root / "x", stop_after="publish")

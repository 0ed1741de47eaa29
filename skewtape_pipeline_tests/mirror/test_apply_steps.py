"""The applier run as separate steps (check, file ops, merges, publish, report), as the pipeline
runs them: each step from nothing but the JSON the previous one handed on."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewtape_pipeline import hashing
from skewtape_pipeline.errors import ChecksumMismatchError
from skewtape_pipeline.mirror.apply import (
    LOCK_FILE,
    ApplyOptions,
    ApplyTarget,
    StagedApply,
    applied_step,
    apply_delta,
    check_step,
    file_ops_step,
    merges_step,
    publish_step,
    staging_folders,
)
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


def handed_on(staged: StagedApply) -> StagedApply:
    """``staged`` as the next step in another process gets it: through JSON."""
    return StagedApply.from_dict(json.loads(json.dumps(staged.to_dict())))


def state_without_lock(folder: Path) -> dict:
    return {rel: v for rel, v in tree_state(folder).items() if not rel.endswith(LOCK_FILE)}


def target_of(case, versioned: bool) -> ApplyTarget:
    if versioned:
        return ApplyTarget(case.parent, case.delta, into=case.root / "history" / "2026-12")
    return ApplyTarget(copy_snapshot(case.parent, case.root / "mirror"), case.delta)


@pytest.mark.parametrize("versioned", [False, True], ids=["in_place", "versioned"])
def test_steps_when_run_one_by_one_reach_the_next_snapshot(case, versioned):
    target, options = target_of(case, versioned), ApplyOptions()
    staged = handed_on(check_step(target))
    file_ops_step(target, staged, options)
    merges_step(target, handed_on(staged), options)
    published = publish_step(target, handed_on(staged), options)
    committed = StagedApply(staged.run_id, committed=True)
    result, verified = applied_step(target, handed_on(committed))
    assert_same_snapshot(target.final, case.expected)
    assert result == published and not result.already_applied
    assert sorted(result.files_added) == sorted(ADDED)
    assert sorted(result.rows_upserted) == sorted(CHANGED)
    assert result.seconds["merges"] > 0 and result.seconds["verify_delta"] > 0
    assert verified.ok and verified.snapshot == target.final and verified.files_checked > 0
    assert staging_folders(target.final) == []


@pytest.mark.parametrize("versioned", [False, True], ids=["in_place", "versioned"])
def test_steps_when_stopped_before_publish_leave_the_parent_and_target_as_they_were(
    case, versioned
):
    target, options = target_of(case, versioned), ApplyOptions()
    before = tree_state(target.snapshot)
    staged = check_step(target)
    file_ops_step(target, staged, options)
    merges_step(target, staged, options)
    published = {rel: v for rel, v in tree_state(target.snapshot).items()
                 if not rel.startswith(".skewtape")}  # fmt: skip
    assert published == {rel: v for rel, v in before.items() if not rel.startswith(".skewtape")}
    assert target.into is None or not target.into.exists()
    assert len(staging_folders(target.final)) == 1


def test_check_step_when_called_writes_only_its_staging_folder_and_later_steps_rehash_nothing(
    case, hashed
):
    target = target_of(case, versioned=True)
    before = state_without_lock(case.root)
    staged = check_step(target)
    [staging] = staging_folders(target.final)
    after = state_without_lock(case.root)
    new = {rel for rel in after if rel not in before}
    assert all(rel.startswith(staging.relative_to(case.root).as_posix()) for rel in new)
    assert {p for p in hashed if p.is_relative_to(case.delta)}
    hashed.clear()
    for step in (file_ops_step, merges_step, publish_step):
        step(target, staged, ApplyOptions())
    assert not [p for p in hashed if p.is_relative_to(case.delta)]


def test_file_ops_step_when_source_changed_since_check_refuses_and_drops_the_staging(case):
    target = target_of(case, versioned=True)
    staged = check_step(target)
    victim = case.delta / "snapshot" / ADDED[0]
    victim.chmod(0o644)
    victim.write_bytes(victim.read_bytes() + b"!")
    with pytest.raises(ChecksumMismatchError, match=ADDED[0]):
        file_ops_step(target, staged, ApplyOptions())
    assert staging_folders(target.final) == [] and not target.final.exists()


def test_check_step_when_next_already_in_place_reports_already_applied(case):
    target = target_of(case, versioned=True)
    apply_delta(target.snapshot, target.delta, into=target.into)
    staged = check_step(target)
    assert staged.already_applied and staged.run_id is None
    result, verified = applied_step(target, staged)
    assert result.already_applied and verified.ok

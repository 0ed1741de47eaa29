"""The snapshot's local state files (journal, hash cache, merged-table record) under hostile
content: nested too deep to parse, or replaced by a symbolic link."""

from __future__ import annotations

import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.audit import AuditLog, audit_head_path
from skewtape_pipeline.errors import AuditLogError, LinkedStateFileError, LocalStateError
from skewtape_pipeline.hashing import HashCache
from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.journal import Journal, journal_path
from skewtape_pipeline.mirror.staging import staging_folders
from skewtape_pipeline.mirror.verify import hash_cache_path, merged_tables, verify_snapshot
from skewtape_pipeline.mirror.verify import merged_tables_path as merged_path
from skewtape_pipeline_tests.conftest import copy_snapshot
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, make_case, tree_state

DEEP = b"[" * 100_000 + b"]" * 100_000
"""JSON nested far deeper than Python's recursion limit."""


@pytest.fixture(scope="module")
def case(tmp_path_factory):
    return make_case(tmp_path_factory.mktemp("case"), small=True)


def _mirror(case, tmp_path):
    return copy_snapshot(case.parent, tmp_path / "history" / "2026-11")


def _plant(path, tmp_path):
    """A symlink at ``path`` to a file of the user's; returns that file."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.symlink_to(precious)
    return precious


def test_hash_cache_when_nested_too_deep_costs_only_a_rehash(case, tmp_path):
    mirror = _mirror(case, tmp_path)
    hash_cache_path(mirror).parent.mkdir()
    hash_cache_path(mirror).write_bytes(DEEP)
    assert HashCache(hash_cache_path(mirror)).entries() == {}
    result = verify_snapshot(mirror)
    assert result.files_hashed == result.files_checked


def test_journal_when_nested_too_deep_is_ignored_and_the_apply_finishes(case, tmp_path):
    mirror = _mirror(case, tmp_path)
    journal_path(mirror).parent.mkdir()
    journal_path(mirror).write_bytes(DEEP)
    assert Journal.find(mirror, "0" * 64) is None
    apply_delta(mirror, case.delta)
    assert_same_snapshot(mirror, case.expected)


def test_merged_tables_when_nested_too_deep_raises_local_state_error_naming_it(tmp_path):
    merged_path(tmp_path).parent.mkdir()
    merged_path(tmp_path).write_bytes(DEEP)
    with pytest.raises(LocalStateError, match=r"merged\.json: is not valid JSON"):
        merged_tables(tmp_path)


@pytest.mark.parametrize("where", [journal_path, hash_cache_path, merged_path])
def test_apply_delta_when_a_local_state_file_is_a_symlink_refuses_and_leaves_its_target(
    case, tmp_path, where
):
    mirror = _mirror(case, tmp_path)
    precious = _plant(where(mirror), tmp_path)
    with pytest.raises(LinkedStateFileError, match=where(mirror).name):
        apply_delta(mirror, case.delta)
    assert precious.read_text() == "keep me\n"
    assert where(mirror).is_symlink()


@pytest.mark.parametrize("versioned", [False, True])
def test_apply_delta_when_the_audit_log_is_a_symlink_refuses_before_writing_anything(
    case, tmp_path, versioned
):
    mirror = _mirror(case, tmp_path)
    log = tmp_path / "audit.jsonl"
    precious = _plant(log, tmp_path)
    into = mirror.parent / "2026-12" if versioned else None
    before = tree_state(mirror.parent)
    with pytest.raises(LinkedStateFileError, match=r"audit\.jsonl"):
        apply_delta(mirror, case.delta, into=into, audit_log=log)
    assert precious.read_text() == "keep me\n"
    assert tree_state(mirror.parent) == before


def test_catch_up_when_the_audit_log_is_a_symlink_refuses_before_writing_anything(case, tmp_path):
    mirror = _mirror(case, tmp_path)
    deltas = tmp_path / "deltas"
    deltas.mkdir()
    (deltas / "2026-12").symlink_to(case.delta)
    log = tmp_path / "audit.jsonl"
    precious = _plant(log, tmp_path)
    before = tree_state(mirror.parent)
    with pytest.raises(LinkedStateFileError, match=r"audit\.jsonl"):
        catch_up(mirror.parent, deltas, audit_log=log)
    assert precious.read_text() == "keep me\n"
    assert tree_state(mirror.parent) == before


def _head_planted_link(log, tmp_path):
    _plant(audit_head_path(log), tmp_path)


def _head_damaged(log, tmp_path):
    audit_head_path(log).write_bytes(b"not a head\n")


def _head_beyond_the_log(log, tmp_path):
    AuditLog(log).append([{"event": "earlier"}])
    log.write_bytes(b"")  # the log cut off below its head


HEAD_PROBLEMS = {"link": _head_planted_link, "damaged": _head_damaged,
                 "truncated": _head_beyond_the_log}  # fmt: skip


def _published(history):
    """The history folder's snapshots as readers see them (local state and the lock left out)."""
    return {rel: state for rel, state in tree_state(history).items()
            if ".skewtape" not in rel}  # fmt: skip


@pytest.mark.parametrize("at", ["locked", "verified"])
@pytest.mark.parametrize("problem", HEAD_PROBLEMS.values(), ids=HEAD_PROBLEMS.keys())
@pytest.mark.parametrize("versioned", [False, True])
def test_apply_delta_when_the_audit_log_cannot_take_its_records_refuses_before_the_commit(
    case, tmp_path, problem, at, versioned
):
    """A problem with the audit log's files, also one arising during the apply (at the
    checkpoint ``at``), is refused before the commit point: no month is published."""
    mirror = _mirror(case, tmp_path)
    log = tmp_path / "audit.jsonl"
    into = mirror.parent / "2026-12" if versioned else None
    before = _published(mirror.parent)

    def arise(name):
        if name == at:
            problem(log, tmp_path)

    with faults.installed(arise), pytest.raises((LinkedStateFileError, AuditLogError)) as info:
        apply_delta(mirror, case.delta, into=into, audit_log=log)
    assert "audit.jsonl" in str(info.value)
    assert _published(mirror.parent) == before
    assert staging_folders(into or mirror) == []

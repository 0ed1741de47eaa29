"""The audit log's head after a writer was killed while writing it (the records committed, the
head not renamed into place): any writer's rerun, even one with nothing to append, writes the
head again from a log that verifies and removes the stale temporary, so ``audit-verify
--require-head`` passes at once instead of next month."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.audit import AuditLog, audit_head_path, check_audit_log
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.fsio import TEMP_MARKER
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.ticks.archive_builders import Crash, write_four_day_csv

HEAD_PUBLISH = "publish:audit.jsonl.head"
"""The checkpoint right before the head's temporary is renamed into place."""


def killed_at_head(log: Path):
    """A hook that leaves what kill -9 at the head's rename leaves: the temporary, no head."""

    def crash(name: str) -> None:
        if name == HEAD_PUBLISH:
            audit_head_path(log).unlink(missing_ok=True)  # the first head: there was none
            raise Crash(name)

    return crash


def head_temps(log: Path) -> list[str]:
    return sorted(
        p.name
        for p in log.parent.iterdir()
        if p.name.startswith(f".{log.name}.head.") and p.name.endswith(TEMP_MARKER)
    )


def assert_head_repaired(log: Path) -> None:
    assert audit_head_path(log).is_file()
    assert head_temps(log) == []
    check = check_audit_log(log, require_head=True)
    assert check.head_status == "current"
    assert main(["audit-verify", str(log), "--require-head"]) == 0


def test_apply_rerun_when_killed_before_the_first_head_was_renamed_writes_the_head(
    sample_root,
):
    history, log = sample_root / "history", sample_root / "audit.jsonl"
    delta = sample_root / "deltas" / "2026-10"
    argv = ["apply-delta", str(history / SAMPLE_FIRST_MONTH), str(delta), "--into",
            str(history / "2026-10")]  # fmt: skip
    with faults.installed(killed_at_head(log)), pytest.raises(Crash):
        main(argv)
    assert log.is_file() and not audit_head_path(log).exists() and head_temps(log)

    assert main(argv) == 0  # the apply's records are in the log already: nothing to append
    assert_head_repaired(log)


def test_catch_up_rerun_when_the_head_is_missing_writes_it(sample_root):
    history, log = sample_root / "history", sample_root / "audit.jsonl"
    with faults.installed(killed_at_head(log)), pytest.raises(Crash):
        main(["catch-up", str(history), str(sample_root / "deltas")])
    assert not audit_head_path(log).exists()

    assert main(["catch-up", str(history), str(sample_root / "deltas")]) == 0
    assert_head_repaired(log)


def test_archive_writer_rerun_when_the_head_is_missing_writes_it(tmp_path):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive, log = tmp_path / "archive", tmp_path / "audit.jsonl"
    argv = ["compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
            "--price-scale", "2", "--audit-log", str(log)]  # fmt: skip
    assert main(argv) == 0
    assert main(["tag", str(archive), "first", "--audit-log", str(log)]) == 0
    audit_head_path(log).unlink()
    (log.parent / f".{log.name}.head.4242{TEMP_MARKER}").write_text("{")

    assert main(argv) == 0  # the same ticks again: nothing to append
    assert_head_repaired(log)


def test_repair_head_when_the_chain_is_broken_writes_no_head(tmp_path):
    log = tmp_path / "audit.jsonl"
    AuditLog(log).append([{"event": "a"}, {"event": "b"}])
    audit_head_path(log).unlink()
    lines = log.read_bytes().split(b"\n")
    log.write_bytes(b"\n".join([lines[0].replace(b'"a"', b'"x"'), *lines[1:]]))

    assert AuditLog(log).repair_head() is False
    assert not audit_head_path(log).exists()


def test_repair_head_when_a_torn_tail_follows_names_the_last_committed_record(tmp_path):
    log = tmp_path / "audit.jsonl"
    AuditLog(log).append([{"event": "a"}, {"event": "b"}])
    head = audit_head_path(log).read_bytes()
    audit_head_path(log).unlink()
    shutil.copyfile(log, tmp_path / "before")
    with open(log, "ab") as out:
        out.write(b'{"seq":3,"ti')

    assert AuditLog(log).repair_head() is True
    assert audit_head_path(log).read_bytes() == head

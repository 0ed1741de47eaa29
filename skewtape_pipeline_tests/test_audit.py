"""Tests of the hash-chained audit log."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os
import re
from datetime import UTC, datetime

import pytest

from skewtape_pipeline import audit, faults
from skewtape_pipeline.audit import (
    GENESIS,
    AuditLog,
    ChainHead,
    audit_head_path,
    check_audit_log,
    verify_audit_log,
)
from skewtape_pipeline.errors import AuditLogError, LinkedStateFileError
from skewtape_pipeline.fsio import TEMP_MARKER


def _record(i: int) -> dict:
    return {
        "actor": "apply-delta",
        "delta": "skewtape-history-2026-12",
        "snapshot": "history/2026-11",
        "path": f"fills/kalshi/2026-{i:02d}.parquet",
        "op": "add",
        "sha256_before": None,
        "sha256_after": "a" * 64,
        "rows_upserted": None,
        "rows_deleted": None,
    }


def _lines(path) -> list[bytes]:
    return path.read_bytes().splitlines()


def _write_lines(path, lines: list[bytes]) -> None:
    path.write_bytes(b"".join(line + b"\n" for line in lines))


@pytest.fixture
def log_path(tmp_path):
    path = tmp_path / "audit" / "audit.jsonl"
    AuditLog(path).append([_record(i) for i in range(1, 6)])
    return path


def test_audit_log_append_when_records_given_chains_them(tmp_path):
    path = tmp_path / "audit.jsonl"
    log = AuditLog(path)
    assert log.append([_record(1), _record(2)]) == 2
    assert log.append([_record(3)]) == 1
    lines = _lines(path)
    records = [json.loads(line) for line in lines]
    assert [r["seq"] for r in records] == [1, 2, 3]
    assert records[0]["prev_sha256"] == GENESIS
    for before, record in zip(lines, records[1:], strict=False):
        assert record["prev_sha256"] == hashlib.sha256(before).hexdigest()
    assert records[2]["path"] == _record(3)["path"]
    assert datetime.fromisoformat(records[0]["time"]).utcoffset() == UTC.utcoffset(None)
    assert verify_audit_log(path) == 3


def test_audit_log_append_when_nothing_given_writes_nothing(tmp_path):
    path = tmp_path / "audit.jsonl"
    assert AuditLog(path).append([]) == 0
    assert not path.exists()


@pytest.mark.parametrize(
    ("records", "match"),
    [
        ([{"seq": 9}], "seq"),
        ([{"when": datetime(2026, 1, 1)}], "JSON-able"),
        ([{"x": float("nan")}], "JSON-able"),
        (["not a mapping"], "mapping"),
        ({"actor": "single mapping"}, "single mapping"),
    ],
)
def test_audit_log_append_when_record_invalid_raises_and_writes_nothing(log_path, records, match):
    before = log_path.read_bytes()
    with pytest.raises(AuditLogError, match=match):
        AuditLog(log_path).append([_record(9), *records] if isinstance(records, list) else records)
    assert log_path.read_bytes() == before


def test_verify_audit_log_when_a_line_is_edited_names_the_next_line(log_path):
    lines = _lines(log_path)
    lines[1] = lines[1].replace(b'"op":"add"', b'"op":"delete"')
    _write_lines(log_path, lines)
    with pytest.raises(AuditLogError, match=r"line 3: prev_sha256"):
        verify_audit_log(log_path)


def test_verify_audit_log_when_a_line_is_deleted_names_the_gap(log_path):
    lines = _lines(log_path)
    del lines[2]
    _write_lines(log_path, lines)
    with pytest.raises(AuditLogError, match=r"line 3: has seq 4; expected 3"):
        verify_audit_log(log_path)


def test_verify_audit_log_when_lines_reordered_raises(log_path):
    lines = _lines(log_path)
    lines[1], lines[2] = lines[2], lines[1]
    _write_lines(log_path, lines)
    with pytest.raises(AuditLogError, match=r"line 2"):
        verify_audit_log(log_path)


def test_verify_audit_log_when_junk_line_inserted_names_it(log_path):
    lines = _lines(log_path)
    lines.insert(2, b"not a record")
    _write_lines(log_path, lines)
    with pytest.raises(AuditLogError, match=r"line 3: is not a record"):
        verify_audit_log(log_path)


def test_verify_audit_log_when_missing_raises(tmp_path):
    with pytest.raises(AuditLogError, match="does not exist"):
        verify_audit_log(tmp_path / "nope.jsonl")


def test_verify_audit_log_when_torn_tail_accepts_it_unless_strict(log_path):
    with open(log_path, "ab") as handle:
        handle.write(b'{"seq":6,"time":"2026-')
    assert verify_audit_log(log_path) == 5
    with pytest.raises(AuditLogError, match=r"line 6"):
        verify_audit_log(log_path, allow_torn_tail=False)


def test_audit_log_append_when_torn_tail_keeps_it_and_chains_a_repair(log_path):
    committed = log_path.read_bytes()
    torn = b'{"seq":6,"time":"2026-'
    with open(log_path, "ab") as handle:
        handle.write(torn)

    assert AuditLog(log_path).append([_record(7)]) == 1

    data = log_path.read_bytes()
    assert data.startswith(committed + torn + b"\n")  # nothing rewritten or removed
    repair, appended = (json.loads(line) for line in data.splitlines()[-2:])
    assert repair["event"] == "repair"
    assert (repair["seq"], repair["torn_offset"], repair["torn_bytes"]) == (
        6,
        len(committed),
        len(torn),
    )
    assert repair["torn_sha256"] == hashlib.sha256(torn).hexdigest()
    assert repair["prev_sha256"] == hashlib.sha256(committed.splitlines()[-1]).hexdigest()
    assert appended["seq"] == 7
    assert verify_audit_log(log_path, allow_torn_tail=False) == 7


def test_audit_log_append_when_crash_tore_a_repair_too_recovers(log_path):
    with open(log_path, "ab") as handle:
        handle.write(b'{"seq":6,"ti' + b"\n" + b'{"seq":6,"time":"x","event":"rep')
    AuditLog(log_path).append([_record(8)])
    assert verify_audit_log(log_path, allow_torn_tail=False) == 7


def test_audit_log_append_when_a_headless_logs_last_record_was_edited_refuses_it(log_path):
    lines = log_path.read_bytes().splitlines()
    _write_lines(log_path, [*lines[:-1], b"garbage"])  # the last record edited away
    audit_head_path(log_path).unlink()  # (with its head, the head check refuses first)
    before = log_path.read_bytes()
    log = AuditLog(log_path)
    for attempt in (log.check_appendable, lambda: log.append([_record(6)])):
        with pytest.raises(AuditLogError, match=r"line 5 is not a record, nor the start of one"):
            attempt()
    assert log_path.read_bytes() == before


def test_audit_log_append_when_the_file_is_no_audit_log_refuses_writing_nothing(tmp_path):
    path = tmp_path / "README.md"
    path.write_text("# A delta's readme\n\nSome words.\n")
    with pytest.raises(AuditLogError, match="the file is no audit log"):
        AuditLog(path).append([_record(1)])
    assert path.read_text() == "# A delta's readme\n\nSome words.\n"


@pytest.mark.parametrize("zeros", [b"\0" * 512, b"\0" * 100 + b'me":"x","event":"demo"}'])
def test_audit_log_append_when_a_crash_left_zeros_and_a_torn_repair_recovers(log_path, zeros):
    with open(log_path, "ab") as handle:  # zeros end anywhere in a line (blocks, not lines)
        handle.write(zeros + b"\n" + b'{"seq":6,"time":"x","event":"rep')
    AuditLog(log_path).append([_record(7)])
    assert verify_audit_log(log_path, allow_torn_tail=False) == 7


def test_verify_audit_log_when_repair_does_not_match_skipped_bytes_raises(log_path):
    with open(log_path, "ab") as handle:
        handle.write(b"half a line")
    AuditLog(log_path).append([_record(6)])
    data = log_path.read_bytes().replace(b"half a line", b"half a LINE")
    log_path.write_bytes(data)
    with pytest.raises(AuditLogError, match=r"line 6: is not a record and line 7"):
        verify_audit_log(log_path)


def test_audit_log_append_when_file_is_only_a_torn_line_starts_the_chain(tmp_path):
    path = tmp_path / "audit.jsonl"
    path.write_bytes(b'{"seq":1,')
    AuditLog(path).append([_record(1)])
    first_record = json.loads(path.read_bytes().splitlines()[1])
    assert first_record["prev_sha256"] == GENESIS and first_record["seq"] == 1
    assert verify_audit_log(path) == 2


def _append_many(path: str, worker: int, count: int, start) -> None:
    log = AuditLog(path)
    start.wait(timeout=30)
    for i in range(count):
        log.append([{"actor": f"worker-{worker}", "i": i}])


def test_audit_log_append_when_two_processes_append_keeps_one_valid_chain(tmp_path):
    path = tmp_path / "audit.jsonl"
    context = multiprocessing.get_context("spawn")
    start = context.Barrier(2)
    workers = [
        context.Process(target=_append_many, args=(str(path), worker, 150, start))
        for worker in (1, 2)
    ]
    for process in workers:
        process.start()
    for process in workers:
        process.join(timeout=60)
        assert process.exitcode == 0
    assert verify_audit_log(path, allow_torn_tail=False) == 300
    assert check_audit_log(path).head_status == "current"
    records = [json.loads(line) for line in _lines(path)]
    for worker in (1, 2):
        mine = [r["i"] for r in records if r["actor"] == f"worker-{worker}"]
        assert mine == list(range(150))


# --- the chain head: truncation of the last lines ---------------------------------------------


class HeadWriteCrash(Exception):
    """Raised by the test hook just before the head's atomic rename."""


def _crash_before_head_update(name: str) -> None:
    if name == "publish:audit.jsonl.head":
        raise HeadWriteCrash(name)


def test_audit_log_append_when_written_keeps_the_head_at_the_last_record(log_path):
    lines = _lines(log_path)
    head = ChainHead.read(audit_head_path(log_path))
    assert head == ChainHead(
        seq=5,
        sha256=hashlib.sha256(lines[-1]).hexdigest(),
        line=len(lines),
        end=log_path.stat().st_size,
    )
    check = check_audit_log(log_path)
    assert (check.records, check.head_status, check.records_after_head) == (5, "current", 0)


def test_check_audit_log_when_last_lines_removed_reports_truncation_naming_the_head(log_path):
    lines = _lines(log_path)
    _write_lines(log_path, lines[:3])
    expected = f"line 5 with sha256 {hashlib.sha256(lines[4]).hexdigest()}"
    with pytest.raises(AuditLogError, match="truncated") as caught:
        verify_audit_log(log_path)
    message = str(caught.value)
    assert str(log_path) in message and "seq 5" in message and expected in message
    assert "ends at seq 3 (line 3)" in message


def test_check_audit_log_when_cut_inside_a_line_reports_truncation(log_path):
    data = log_path.read_bytes()
    log_path.write_bytes(data[: data.rindex(b"\n", 0, len(data) - 1) + 10])  # a torn last line
    with pytest.raises(AuditLogError, match=r"ends at seq 4 \(line 4\).*seq 5"):
        check_audit_log(log_path)


def test_check_audit_log_when_all_lines_removed_reports_truncation(log_path):
    log_path.write_bytes(b"")
    with pytest.raises(AuditLogError, match=r"truncated: its chain ends at no record"):
        check_audit_log(log_path)


def test_audit_log_append_when_log_truncated_refuses_and_writes_nothing(log_path):
    _write_lines(log_path, _lines(log_path)[:4])
    head_path = audit_head_path(log_path)
    before = (log_path.read_bytes(), head_path.read_bytes())
    with pytest.raises(AuditLogError, match=r"truncated; nothing was appended") as caught:
        AuditLog(log_path).append([_record(6)])
    assert str(head_path) in str(caught.value) and "seq 5" in str(caught.value)
    assert (log_path.read_bytes(), head_path.read_bytes()) == before


def test_audit_log_append_when_log_removed_refuses_and_creates_nothing(log_path):
    log_path.unlink()
    with pytest.raises(AuditLogError, match=r"does not exist, but its head .* seq 5"):
        AuditLog(log_path).append([_record(6)])
    assert not log_path.exists()


def test_check_audit_log_when_cut_and_written_again_names_the_changed_record(log_path):
    head_path = audit_head_path(log_path)
    recorded = head_path.read_bytes()
    _write_lines(log_path, _lines(log_path)[:3])
    head_path.unlink()  # a writer unaware of the head continues the cut log
    AuditLog(log_path).append([_record(7), _record(8), _record(9)])
    head_path.write_bytes(recorded)
    with pytest.raises(AuditLogError, match=r"line 5: seq 5 has sha256 [0-9a-f]{64}, but its head"):
        check_audit_log(log_path)
    with pytest.raises(AuditLogError, match=r"line 5 .* is not the record its head"):
        AuditLog(log_path).append([_record(10)])


def test_audit_log_append_when_crashed_before_head_update_is_accepted_and_caught_up(log_path):
    head_path = audit_head_path(log_path)
    with faults.installed(_crash_before_head_update), pytest.raises(HeadWriteCrash):
        AuditLog(log_path).append([_record(6), _record(7)])
    assert len(_lines(log_path)) == 7  # committed, fsynced
    assert ChainHead.read(head_path).seq == 5  # the head was not moved
    check = check_audit_log(log_path, allow_torn_tail=False)
    assert (check.records, check.head_status, check.records_after_head) == (7, "behind", 2)
    assert "committed after its head" in check.describe()

    AuditLog(log_path).append([_record(8)])

    head = ChainHead.read(head_path)
    assert (head.seq, head.line, head.end) == (8, 8, log_path.stat().st_size)
    assert check_audit_log(log_path).head_status == "current"
    assert [p.name for p in head_path.parent.iterdir() if TEMP_MARKER in p.name] == []


def test_check_audit_log_when_records_after_head_are_forged_reports_the_chain(log_path):
    lines = _lines(log_path)
    forged = json.loads(lines[-1])
    forged["seq"] = 6
    _write_lines(log_path, [*lines, json.dumps(forged).encode()])
    with pytest.raises(AuditLogError, match=r"line 6: prev_sha256"):
        check_audit_log(log_path)


def test_check_audit_log_when_log_has_no_head_accepts_it_and_says_so(log_path):
    head_path = audit_head_path(log_path)
    head_path.unlink()  # as a log written before heads were kept
    check = check_audit_log(log_path)
    assert (check.records, check.head_status, check.head_seq) == (5, "absent", None)
    assert "cannot be detected" in check.describe()
    assert check.to_dict()["head_status"] == "absent"
    assert verify_audit_log(log_path) == 5
    with pytest.raises(AuditLogError, match=re.escape(f"has no head {head_path}")):
        check_audit_log(log_path, require_head=True)

    AuditLog(log_path).append([_record(6)])  # its next append starts a head

    assert ChainHead.read(head_path).line == 6
    assert check_audit_log(log_path, require_head=True).head_status == "current"


def test_audit_log_append_when_torn_tail_repaired_counts_the_head_line(log_path):
    with open(log_path, "ab") as handle:
        handle.write(b'{"seq":6,"ti')
    AuditLog(log_path).append([_record(7)])
    head = ChainHead.read(audit_head_path(log_path))
    assert (head.seq, head.line) == (7, len(_lines(log_path)))
    assert head.line == 8  # 5 records, the torn line, the repair, the record
    assert check_audit_log(log_path).head_status == "current"


@pytest.mark.parametrize(
    ("content", "match"),
    [
        (b"{not json", "not JSON"),
        (b"[5]", "a list"),
        (b'{"seq": 0, "sha256": "' + b"a" * 64 + b'", "line": 1, "end": 9}', "seq is 0"),
        (b'{"seq": 5, "line": 5, "end": 9}', "sha256 is None"),
        (b'{"seq": 5, "sha256": "' + b"a" * 64 + b'", "line": 5, "end": "9"}', "end is '9'"),
    ],
)
def test_check_audit_log_when_head_damaged_raises_naming_it(log_path, content, match):
    head_path = audit_head_path(log_path)
    head_path.write_bytes(content)
    before = log_path.read_bytes()
    with pytest.raises(AuditLogError, match=re.escape(f"{head_path}: the audit log's head is")):
        check_audit_log(log_path)
    with pytest.raises(AuditLogError, match=match):
        check_audit_log(log_path)
    with pytest.raises(AuditLogError, match="damaged"):
        AuditLog(log_path).append([_record(6)])
    assert log_path.read_bytes() == before and head_path.read_bytes() == content


def test_audit_log_append_when_head_cannot_be_written_commits_and_leaves_it_behind(
    log_path, monkeypatch
):
    def refuse(target, data):
        raise PermissionError(13, "read-only", str(target))

    monkeypatch.setattr(audit, "atomic_write_bytes", refuse)
    assert AuditLog(log_path).append([_record(6)]) == 1
    check = check_audit_log(log_path)
    assert (check.records, check.head_status, check.head_seq) == (6, "behind", 5)


def test_check_audit_log_when_log_removed_names_its_head(log_path):
    log_path.unlink()
    with pytest.raises(AuditLogError, match=r"does not exist, but its head .* seq 5"):
        check_audit_log(log_path)


DEEP = b"[" * 100_000 + b"]" * 100_000
"""JSON nested far deeper than Python's recursion limit."""


def test_check_audit_log_when_a_line_is_nested_too_deep_names_that_line(log_path):
    lines = _lines(log_path)
    _write_lines(log_path, [*lines[:2], DEEP, *lines[2:]])
    with pytest.raises(AuditLogError, match=r"audit\.jsonl: line 3: is not a record"):
        check_audit_log(log_path)


def test_audit_log_append_when_the_torn_tail_is_nested_too_deep_covers_it_with_a_repair(
    log_path,
):
    with open(log_path, "ab") as handle:
        handle.write(DEEP)  # a torn last line (no newline)
    AuditLog(log_path).append([_record(9)])
    assert verify_audit_log(log_path) == 7  # five records, the repair, the new one


def test_chain_head_read_when_nested_too_deep_raises_audit_log_error_naming_it(log_path):
    audit_head_path(log_path).write_bytes(DEEP)
    with pytest.raises(AuditLogError, match=r"audit\.jsonl\.head.*damaged.*nested too deep"):
        ChainHead.read(audit_head_path(log_path))


@pytest.mark.parametrize("planted", ["log", "head"])
def test_audit_log_append_when_a_symlink_is_planted_refuses_and_leaves_its_target(
    tmp_path, planted
):
    log = tmp_path / "audit.jsonl"
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    (log if planted == "log" else audit_head_path(log)).symlink_to(precious)
    with pytest.raises(LinkedStateFileError, match=r"audit\.jsonl"):
        AuditLog(log).append([_record(1)])
    assert precious.read_text() == "keep me\n"


def test_check_audit_log_when_the_log_is_a_symlink_refuses_naming_it(log_path, tmp_path):
    alias = tmp_path / "alias.jsonl"
    alias.symlink_to(log_path)
    with pytest.raises(LinkedStateFileError, match=r"alias\.jsonl"):
        check_audit_log(alias)


def test_check_appendable_when_healthy_passes_and_when_not_a_file_refuses_without_blocking(
    tmp_path,
):
    log = tmp_path / "audit.jsonl"
    AuditLog(log).check_appendable()  # no log yet: the first append creates it
    AuditLog(log).append([{"event": "x"}])
    AuditLog(log).check_appendable()
    fifo = tmp_path / "fifo.jsonl"
    os.mkfifo(fifo)  # opening it for reading without a writer would block
    (tmp_path / "folder.jsonl").mkdir()
    for odd in (fifo, tmp_path / "folder.jsonl"):
        with pytest.raises(AuditLogError, match="is not a regular file"):
            AuditLog(odd).check_appendable()

"""Tests of the hash-chained audit log."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
from datetime import UTC, datetime

import pytest

from skewtape_pipeline.audit import GENESIS, AuditLog, verify_audit_log
from skewtape_pipeline.errors import AuditLogError


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
    records = [json.loads(line) for line in _lines(path)]
    for worker in (1, 2):
        mine = [r["i"] for r in records if r["actor"] == f"worker-{worker}"]
        assert mine == list(range(150))

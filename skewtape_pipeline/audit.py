"""An append-only, hash-chained audit log (one JSON line per record).

Each line is a JSON object holding the caller's fields plus ``seq`` (1, 2, ...), ``time`` (UTC,
ISO-8601) and ``prev_sha256``: the sha256 of the previous record's line (its bytes without the
newline; 64 zeros for the first). Editing, removing or reordering a line breaks the chain at the
next line, which :func:`verify_audit_log` reports by line number. (A hash chain cannot tell
that the LAST lines were cut off; keep the last line's sha256 elsewhere to detect that.)

Commit rule and crash policy
----------------------------
A record is committed when its whole line, newline included, has been written and fsynced;
:meth:`AuditLog.append` returns only then. A crash can leave an uncommitted tail: bytes after
the last complete record that are not a complete record line (typically a line without its
newline). Existing bytes are never rewritten, truncated or removed, not even that tail: the next
append leaves it in place, ends it with a newline if needed, and first writes a chained
``repair`` record giving the tail's offset, length and sha256. The evidence thus stays where it
was, the repair is itself an audited, chained event, and the chain continues from the last
committed record. :func:`verify_audit_log` accepts skipped bytes only when a repair record right
after them describes them exactly, and accepts an unterminated tail at the end of the file (the
state a crash leaves until the next append).
"""

from __future__ import annotations

import fcntl
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skewtape_pipeline.errors import AuditLogError
from skewtape_pipeline.fsio import fsync_dir
from skewtape_pipeline.hashing import is_sha256_hex, sha256_bytes

GENESIS = "0" * 64
"""``prev_sha256`` of the first record."""
RESERVED = ("seq", "time", "prev_sha256")
"""Fields the log adds to every record; callers may not set them."""
REPAIR_EVENT = "repair"
REPAIR_ACTOR = "audit-log"
_READ_CHUNK = 1 << 16


@dataclass(frozen=True)
class _Head:
    """The last committed record and where the uncommitted tail (if any) starts."""

    seq: int
    sha256: str
    tail_start: int
    size: int


class AuditLog:
    """An append-only JSON-lines audit log with a sha256 chain; safe across processes.

    Parameters
    ----------
    path
        The log file; created (with its folder) by the first append.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, records: Iterable[Mapping[str, Any]]) -> int:
        """Append one chained line per record; return how many of the caller's records were written.

        Holds an exclusive ``flock`` on the log while it reads the last record and writes, so
        appends from several processes interleave as whole, correctly chained batches. Writes the
        batch with one append, then fsyncs. A torn tail left by a crash is first covered by a
        ``repair`` record (see the module notes); that line is not counted in the return value.

        Raises
        ------
        AuditLogError
            A record is not a mapping, uses a reserved field or is not JSON-able (named by its
            index); nothing is written then.
        """
        bodies = _encode_bodies(records)
        if not bodies:
            return 0
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            head = _find_head(fd, os.fstat(fd).st_size)
            _write_all(fd, _chain_lines(fd, head, bodies))
            os.fsync(fd)
            if head.size == 0:
                fsync_dir(self.path.parent)
        finally:
            os.close(fd)  # releases the lock
        return len(bodies)


def _encode_bodies(records: Iterable[Mapping[str, Any]]) -> list[str]:
    """Each record's fields as a JSON object body (no braces), validated before any write."""
    if isinstance(records, Mapping):
        raise AuditLogError("append takes an iterable of records; got a single mapping")
    bodies = []
    for index, record in enumerate(records):
        if not isinstance(record, Mapping):
            raise AuditLogError(f"record {index} is {type(record).__name__}; expected a mapping")
        clash = [key for key in RESERVED if key in record]
        if clash:
            raise AuditLogError(f"record {index} sets {clash}; the log adds these fields itself")
        try:
            text = _dumps(dict(record))
        except (TypeError, ValueError) as exc:
            raise AuditLogError(f"record {index} is not JSON-able: {exc}") from None
        bodies.append(text[1:-1])
    return bodies


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def _chain_lines(fd: int, head: _Head, bodies: list[str]) -> bytes:
    out = bytearray()
    seq, prev = head.seq, head.sha256
    if head.tail_start < head.size:
        tail = os.pread(fd, head.size - head.tail_start, head.tail_start)
        if not tail.endswith(b"\n"):
            out += b"\n"
        repair = _dumps(
            {
                "event": REPAIR_EVENT,
                "actor": REPAIR_ACTOR,
                "torn_offset": head.tail_start,
                "torn_bytes": len(tail),
                "torn_sha256": sha256_bytes(tail),
                "note": "bytes after the last committed record were left by an interrupted "
                "append; they stay in place and are skipped by the chain",
            }
        )[1:-1]
        bodies = [repair, *bodies]
    now = datetime.now(UTC).isoformat(timespec="microseconds")
    for body in bodies:
        seq += 1
        line = f'{{"seq":{seq},"time":"{now}","prev_sha256":"{prev}"'
        line = (line + ("," + body if body else "") + "}").encode()
        out += line + b"\n"
        prev = sha256_bytes(line)
    return bytes(out)


def _is_repair(record: Mapping[str, Any]) -> bool:
    return record.get("event") == REPAIR_EVENT and record.get("actor") == REPAIR_ACTOR


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _parse_record(line: bytes) -> dict[str, Any] | None:
    """The record on ``line`` if it is one (seq, time and prev_sha256 well formed), else None."""
    try:
        record = json.loads(line)
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(record, dict):
        return None
    seq = record.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return None
    if not isinstance(record.get("time"), str) or not is_sha256_hex(record.get("prev_sha256")):
        return None
    return record


def _find_head(fd: int, size: int) -> _Head:
    """Scan back from the end for the last complete record line."""
    chunk = _READ_CHUNK
    while True:
        start = max(0, size - chunk)
        data = os.pread(fd, size - start, start)
        end = data.rfind(b"\n")  # bytes after it are unterminated
        while end != -1:
            begin = data.rfind(b"\n", 0, end) + 1
            if begin == 0 and start > 0:
                break  # this line may start before the chunk: read more
            line = data[begin:end]
            record = _parse_record(line)
            if record is not None:
                return _Head(record["seq"], sha256_bytes(line), start + end + 1, size)
            end = begin - 1 if begin > 0 else -1
        if start == 0:
            return _Head(0, GENESIS, 0, size)
        chunk *= 2


def verify_audit_log(path: Path, *, allow_torn_tail: bool = True) -> int:
    """Check the whole chain of the log at ``path``; return the number of records.

    Every line must be a record whose ``seq`` follows the previous one and whose
    ``prev_sha256`` is the previous record line's sha256. Bytes that are not a record are
    accepted only when the record right after them is a ``repair`` describing them exactly, or
    (with ``allow_torn_tail``) when they end the file without a newline: an uncommitted tail.

    Raises
    ------
    AuditLogError
        Naming the line (1-based) and what is wrong: a broken chain (a line edited, removed or
        reordered), bytes that are not a record, or a missing file.
    """
    path = Path(path)
    try:
        with open(path, "rb") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            data = handle.read()
    except FileNotFoundError:
        raise AuditLogError(f"{path}: does not exist; expected an audit log") from None
    checker = _ChainChecker(path, data)
    return checker.run(allow_torn_tail=allow_torn_tail)


class _ChainChecker:
    def __init__(self, path: Path, data: bytes):
        self.path, self.data = path, data
        self.seq, self.prev = 0, GENESIS
        self.skipped_at: int | None = None
        self.skipped_line = 0

    def fail(self, line_no: int, what: str) -> AuditLogError:
        return AuditLogError(f"{self.path}: line {line_no}: {what}")

    def run(self, *, allow_torn_tail: bool) -> int:
        data, pos, line_no = self.data, 0, 0
        while pos < len(data):
            line_no += 1
            end = data.find(b"\n", pos)
            if end == -1:
                self._skip(pos, line_no)
                break
            line = data[pos:end]
            record = _parse_record(line)
            if record is None:
                self._skip(pos, line_no)
            else:
                self._check_record(record, line, pos, line_no)
            pos = end + 1
        if self.skipped_at is not None and (not allow_torn_tail or data.endswith(b"\n")):
            raise self.fail(
                self.skipped_line,
                f"is not a record and no repair record covers it (seq {self.seq})",
            )
        return self.seq

    def _skip(self, pos: int, line_no: int) -> None:
        if self.skipped_at is None:
            self.skipped_at, self.skipped_line = pos, line_no

    def _check_record(self, record: dict[str, Any], line: bytes, pos: int, line_no: int) -> None:
        if self.skipped_at is not None:
            self._check_repair(record, pos, line_no)
        elif _is_repair(record):
            raise self.fail(line_no, "records a repair but no skipped bytes precede it")
        if record["seq"] != self.seq + 1:
            raise self.fail(
                line_no,
                f"has seq {record['seq']}; expected {self.seq + 1} (a line removed or reordered?)",
            )
        if record["prev_sha256"] != self.prev:
            raise self.fail(
                line_no,
                f"prev_sha256 is {record['prev_sha256']}; expected {self.prev}, the sha256 of "
                "the record before it (that line was altered, removed or reordered)",
            )
        self.seq, self.prev = record["seq"], sha256_bytes(line)
        self.skipped_at = None

    def _check_repair(self, record: dict[str, Any], pos: int, line_no: int) -> None:
        start = self.skipped_at
        assert start is not None
        size, digest = record.get("torn_bytes"), record.get("torn_sha256")
        covered = (
            _is_repair(record)
            and record.get("torn_offset") == start
            and isinstance(size, int)
            and 0 < size <= pos - start
            and self.data[start + size : pos] in (b"", b"\n")
            and sha256_bytes(self.data[start : start + size]) == digest
        )
        if not covered:
            raise self.fail(
                self.skipped_line,
                f"is not a record and line {line_no} is not a repair record describing it",
            )

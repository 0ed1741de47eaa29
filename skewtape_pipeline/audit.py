"""An append-only, hash-chained audit log (one JSON line per record).

Each line is a JSON object holding the caller's fields plus ``seq`` (1, 2, ...), ``time`` (UTC,
ISO-8601) and ``prev_sha256``: the sha256 of the previous record's line (its bytes without the
newline; 64 zeros for the first). Editing, removing or reordering a line breaks the chain at the
next line, which :func:`verify_audit_log` reports by line number.

The chain head
--------------
A chain cannot tell that its LAST lines were cut off, so the last record's seq, sha256, line
and end offset are also kept apart from the log, in ``<log>.head`` beside it (see
:func:`audit_head_path`). Each append writes it atomically after the lines are fsynced, still
under the log's lock. A sidecar rather than the mirror's local state because the log is shared
by the mirror and the tick archive, and it sits beside the file it describes; apart from the log
because a cut of the log's end leaves it alone. :func:`check_audit_log` reports a log whose
chain stops short of its head, or no longer holds the head's record, as truncated, and
:meth:`AuditLog.append` refuses to extend such a log (appending would overwrite the evidence).
A crash between the append and the head update leaves the head behind the log: committed
records after the head are accepted when they chain correctly, and the next append moves the
head. A log without a head (written before heads were kept) still verifies, and the result says
that its end cannot be checked; its next append starts a head.

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
state a crash leaves until the next append). A whole line after the last record that is neither
the start of a record line nor zeros is no crash's: :meth:`AuditLog.append` and
:meth:`AuditLog.check_appendable` refuse it (an edit, or a file that is no audit log) instead of
covering it with a repair.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import stat
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skewtape_pipeline.errors import AuditLogError, MalformedJsonError, checked_flag
from skewtape_pipeline.fsio import (
    TEMP_MARKER,
    atomic_write_bytes,
    checked_path,
    fsync_dir,
    load_json,
    naming,
    open_state_file,
    read_state_bytes,
)
from skewtape_pipeline.hashing import is_sha256_hex, sha256_bytes

AUDIT_LOG_NAME = "audit.jsonl"
"""The audit log's file name where a command picks the default log (beside the data or the
archive root)."""
GENESIS = "0" * 64
"""``prev_sha256`` of the first record."""
RESERVED = ("seq", "time", "prev_sha256")
"""Fields the log adds to every record; callers may not set them."""
REPAIR_EVENT = "repair"
REPAIR_ACTOR = "audit-log"
HEAD_SUFFIX = ".head"
"""``<log>.head`` holds the log's chain head."""
_READ_CHUNK = 1 << 16


def audit_head_path(log: Path) -> Path:
    """Where the chain head of the audit log ``log`` is kept: ``<log>.head`` beside it."""
    log = Path(log)
    return log.with_name(log.name + HEAD_SUFFIX)


@dataclass(frozen=True)
class ChainHead:
    """The last record an append committed, as recorded in ``<log>.head``.

    ``line`` is its 1-based line number in the log and ``end`` the byte offset just past its
    newline.
    """

    seq: int
    sha256: str
    line: int
    end: int

    def to_json(self) -> bytes:
        fields = {"seq": self.seq, "sha256": self.sha256, "line": self.line, "end": self.end}
        return (json.dumps(fields) + "\n").encode()

    @classmethod
    def read(cls, path: Path) -> ChainHead | None:
        """The head kept at ``path``; None when there is none.

        Raises
        ------
        AuditLogError
            The file is not a head (not JSON, a field missing or of the wrong type), naming it.
        LinkedStateFileError
            The head is a symbolic link.
        """
        data = read_state_bytes(Path(path))
        if data is None:
            return None
        expected = "expected a JSON object with seq, line, end (integers >= 1) and sha256"
        try:
            raw = load_json(data, path)
        except MalformedJsonError as exc:
            raise AuditLogError(
                f"{path}: the audit log's head is damaged: not JSON ({exc.reason}); {expected}"
            ) from None
        if not isinstance(raw, dict):
            raise AuditLogError(
                f"{path}: the audit log's head is damaged: a {type(raw).__name__}; {expected}"
            )
        for name in ("seq", "line", "end"):
            value = raw.get(name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise AuditLogError(
                    f"{path}: the audit log's head is damaged: {name} is {value!r}; {expected}"
                )
        if not is_sha256_hex(raw.get("sha256")):
            raise AuditLogError(
                f"{path}: the audit log's head is damaged: sha256 is {raw.get('sha256')!r}; "
                f"{expected}"
            )
        return cls(raw["seq"], raw["sha256"], raw["line"], raw["end"])

    def describe(self) -> str:
        return f"seq {self.seq} at line {self.line} with sha256 {self.sha256}"


@dataclass(frozen=True)
class _LastRecord:
    """The last committed record and where the uncommitted tail (if any) starts."""

    seq: int
    sha256: str
    tail_start: int
    size: int
    fields: dict[str, Any] | None = None
    """Its fields but those the log adds (:data:`RESERVED`); None when the log holds none."""


class AuditLog:
    """An append-only JSON-lines audit log with a sha256 chain; safe across processes.

    Parameters
    ----------
    path
        The log file; created (with its folder) by the first append.
    """

    def __init__(self, path: Path):
        self.path = Path(path)

    def append(self, records: Iterable[Mapping[str, Any]], *, once: bool = False) -> int:
        """Append one chained line per record; return how many of the caller's records were written.
        With ``once``, a single record that is the log's last record already (its fields but
        those the log adds) is not appended again (0): what a writer killed between appending
        it and noting that it did leaves, for the writer finishing its work.

        Holds an exclusive ``flock`` on the log while it reads the last record and writes, so
        appends from several processes interleave as whole, correctly chained batches. Writes the
        batch with one append, fsyncs, then moves the chain head (``<log>.head``, atomically). A
        torn tail left by a crash is first covered by a ``repair`` record (see the module notes);
        that line is not counted in the return value.

        Raises
        ------
        AuditLogError
            A record is not a mapping, uses a reserved field or is not JSON-able (named by its
            index); the log no longer holds the record its head names (truncated or rewritten),
            or the head is damaged. Nothing is written then.
        LinkedStateFileError
            The log or its head is a symbolic link (its target is left alone).
        """
        bodies = _encode_bodies(records)
        if not bodies:
            return 0
        head_path = audit_head_path(self.path)
        fd = self._open(head_path)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            size = os.fstat(fd).st_size
            recorded = ChainHead.read(head_path)
            if recorded is not None:
                _check_log_holds_head(fd, size, recorded, self.path, head_path)
            last = _find_last_record(fd, size)
            _refuse_complete_lines_after(fd, last, self.path)
            if once and len(bodies) == 1 and last.fields == _fields_of(bodies[0]):
                return 0  # the log ends with it already
            lines, seq, sha = _chain_lines(fd, last, bodies)
            with naming(self.path, self.path):  # a full disk names the log
                _write_all(fd, lines)
                os.fsync(fd)
            if size == 0:
                fsync_dir(self.path.parent)
            _move_head(fd, head_path, recorded, seq=seq, sha256=sha, end=size + len(lines))
        finally:
            os.close(fd)  # releases the lock
        return len(bodies)

    def _open(self, head_path: Path) -> int:
        """The log opened for appending; created unless its head shows it existed."""
        try:
            return open_state_file(self.path, os.O_RDWR | os.O_APPEND)
        except FileNotFoundError:
            _refuse_removed_log(self.path, head_path, ChainHead.read(head_path))
        self.path.parent.mkdir(parents=True, exist_ok=True)
        return open_state_file(self.path, os.O_RDWR | os.O_APPEND | os.O_CREAT)

    def repair_head(self) -> bool:
        """Give a log without a head its head again, and remove the head's stale temporaries
        (``.<log>.head.*.skewtape-tmp``, left by a process killed while writing the head).

        A writer killed after its records were committed but before the head was written
        leaves the log without one, and its rerun may have nothing to append (the work was
        done): every writer calls this first (:meth:`check_appendable` does), so that the
        head is back after any rerun. The head is written only when the whole chain verifies
        (a torn tail after the last record is allowed; the head names that record). Under the
        log's exclusive lock, like every head update; a log absent, empty, or holding a head
        already is left alone. Returns True when a head was written.

        Raises LinkedStateFileError when the log or its head is a symbolic link.
        """
        head_path = audit_head_path(self.path)
        try:
            fd = open_state_file(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return False
        try:
            if not stat.S_ISREG(os.fstat(fd).st_mode):
                return False
            fcntl.flock(fd, fcntl.LOCK_EX)
            _remove_head_temps(head_path)
            size = os.fstat(fd).st_size
            if size == 0 or ChainHead.read(head_path) is not None:
                return False
            try:
                _ChainChecker(self.path, os.pread(fd, size, 0)).run(allow_torn_tail=True)
            except AuditLogError:
                return False  # not ours to mend: audit-verify names the break
            last = _find_last_record(fd, size)
            if last.seq == 0:
                return False
            _move_head(fd, head_path, None, seq=last.seq, sha256=last.sha256, end=last.tail_start)
            return ChainHead.read(head_path) is not None
        finally:
            os.close(fd)  # releases the lock

    def check_appendable(self) -> None:
        """Refuse now, writing nothing but a missing head (:meth:`repair_head`), what would
        make :meth:`append` refuse: the log or its head a symbolic link
        (LinkedStateFileError), a damaged head, a log its head no longer matches (truncated,
        rewritten or removed) or a log that is not a regular file (AuditLogError). An
        operation that must not be refused past its commit point calls it before committing;
        every writer calls it when it starts."""
        self.repair_head()
        head_path = audit_head_path(self.path)
        recorded = ChainHead.read(head_path)
        try:
            fd = open_state_file(self.path, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            _refuse_removed_log(self.path, head_path, recorded)
            return
        try:
            found = os.fstat(fd)
            if not stat.S_ISREG(found.st_mode):
                raise AuditLogError(f"{self.path}: is not a regular file; expected the audit log")
            if recorded is not None:
                _check_log_holds_head(fd, found.st_size, recorded, self.path, head_path)
            _refuse_complete_lines_after(fd, _find_last_record(fd, found.st_size), self.path)
        finally:
            os.close(fd)


def _refuse_removed_log(log: Path, head_path: Path, recorded: ChainHead | None) -> None:
    """Raise AuditLogError when ``log`` is absent but its head records lines in it."""
    if recorded is not None:
        raise AuditLogError(
            f"{log}: does not exist, but its head {head_path} records "
            f"{recorded.describe()}: the log was removed; nothing was appended"
        ) from None


def _check_log_holds_head(fd: int, size: int, head: ChainHead, log: Path, head_path: Path) -> None:
    """Raise AuditLogError unless the record ``head`` names still ends at ``head.end``."""
    if head.end > size:
        raise AuditLogError(
            f"{log}: is {size} bytes, but its head {head_path} records {head.describe()} "
            f"ending at byte {head.end}: the log was truncated; nothing was appended (restore "
            "the missing records from a backup)"
        )
    line = _line_ending_at(fd, head.end)
    if line is None or sha256_bytes(line) != head.sha256:
        raise AuditLogError(
            f"{log}: line {head.line} (ending at byte {head.end}) is not the record its head "
            f"{head_path} names ({head.describe()}): the log was truncated and written again, "
            "or replaced; nothing was appended"
        )


def _line_ending_at(fd: int, end: int) -> bytes | None:
    """The line whose newline is the byte before ``end`` (without it); None if none ends there."""
    if os.pread(fd, 1, end - 1) != b"\n":
        return None
    chunk = _READ_CHUNK
    while True:
        start = max(0, end - 1 - chunk)
        data = os.pread(fd, end - 1 - start, start)
        newline = data.rfind(b"\n")
        if newline != -1:
            return data[newline + 1 :]
        if start == 0:
            return data
        chunk *= 2


def _move_head(
    fd: int, head_path: Path, recorded: ChainHead | None, *, seq: int, sha256: str, end: int
) -> None:
    """Record the line ending at ``end`` as the head, its line counted on from ``recorded``.

    Called once the lines are committed: a head that cannot be written (an OSError) is left
    behind, a state :func:`check_audit_log` accepts and the next append repairs, rather than
    failing an append whose records are already in the log.
    """
    if recorded is None:  # the log's first head: count its lines once
        line = _count_newlines(fd, 0, end)
    else:
        line = recorded.line + _count_newlines(fd, recorded.end, end)
    with contextlib.suppress(OSError):
        _remove_head_temps(head_path)
        atomic_write_bytes(head_path, ChainHead(seq, sha256, line, end).to_json())


def _remove_head_temps(head_path: Path) -> None:
    """Remove the temporaries of ``head_path`` a crash left while writing it; call it under
    the log's exclusive lock (no other head write is then under way)."""
    with contextlib.suppress(OSError):
        for entry in os.scandir(head_path.parent):
            if entry.name.startswith(f".{head_path.name}.") and entry.name.endswith(TEMP_MARKER):
                Path(entry.path).unlink(missing_ok=True)


def _refuse_complete_lines_after(fd: int, last: _LastRecord, log: Path) -> None:
    """AuditLogError, naming the line, when a whole line after the last record is not what a
    crashed append leaves: the start of a record line (each later append ends a torn line
    with a newline before its repair, and may be torn in turn) or zeros (blocks a crash left
    unwritten, ending anywhere in a line). Anything else there is an edit, or the file is no
    audit log: covering it with a repair record would launder it (an edit that keeps a line's
    first bytes ``{"seq":`` is not told from a torn line: ``audit-verify`` names it)."""
    tail = os.pread(fd, last.size - last.tail_start, last.tail_start)
    *whole, _unterminated = tail.split(b"\n")
    for index, line in enumerate(whole):
        torn = line.startswith(_RECORD_START) or _RECORD_START.startswith(line)
        if torn or line.startswith(b"\0"):  # zeros: a block left unwritten, then a line's end
            continue
        number = _count_newlines(fd, 0, last.tail_start) + index + 1
        raise AuditLogError(
            f"{log}: line {number} is not a record, nor the start of one a crash cut short: the "
            "log was edited, or the file is no audit log; nothing was written "
            f"(`skewtape-pipeline audit-verify {log}` names the break)"
        )


_RECORD_START = b'{"seq":'
"""How every record line the appender writes begins (:func:`_chain_lines`)."""


def _count_newlines(fd: int, start: int, stop: int) -> int:
    count = 0
    while start < stop:
        data = os.pread(fd, min(1 << 20, stop - start), start)
        if not data:
            break
        count += data.count(b"\n")
        start += len(data)
    return count


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


def _fields_of(body: str) -> dict[str, Any]:
    """The fields of a record's body as :func:`_encode_bodies` wrote it."""
    return load_json(f"{{{body}}}".encode(), "audit record")


def _dumps(value: dict[str, Any]) -> str:
    return json.dumps(value, ensure_ascii=True, allow_nan=False, separators=(",", ":"))


def _chain_lines(fd: int, last: _LastRecord, bodies: list[str]) -> tuple[bytes, int, str]:
    """The lines to append after ``last`` (a repair first if a torn tail follows it), the seq of
    the last line and its sha256."""
    out = bytearray()
    seq, prev = last.seq, last.sha256
    if last.tail_start < last.size:
        tail = os.pread(fd, last.size - last.tail_start, last.tail_start)
        if not tail.endswith(b"\n"):
            out += b"\n"
        repair = _dumps(
            {
                "event": REPAIR_EVENT,
                "actor": REPAIR_ACTOR,
                "torn_offset": last.tail_start,
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
    return bytes(out), seq, prev


def is_repair(record: Mapping[str, Any]) -> bool:
    """True for a ``repair`` record the log's own appender wrote (over a torn line)."""
    return record.get("event") == REPAIR_EVENT and record.get("actor") == REPAIR_ACTOR


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def parse_record(line: bytes) -> dict[str, Any] | None:
    """The record on ``line`` if it is one (seq, time and prev_sha256 well formed), else None."""
    try:
        record = load_json(line, "audit line")
    except MalformedJsonError:  # not JSON, or nested too deep
        return None
    if not isinstance(record, dict):
        return None
    seq = record.get("seq")
    if not isinstance(seq, int) or isinstance(seq, bool) or seq < 1:
        return None
    if not isinstance(record.get("time"), str) or not is_sha256_hex(record.get("prev_sha256")):
        return None
    return record


def _find_last_record(fd: int, size: int) -> _LastRecord:
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
            record = parse_record(line)
            if record is not None:
                fields = {k: v for k, v in record.items() if k not in RESERVED}
                return _LastRecord(record["seq"], sha256_bytes(line), start + end + 1, size, fields)
            end = begin - 1 if begin > 0 else -1
        if start == 0:
            return _LastRecord(0, GENESIS, 0, size)
        chunk *= 2


@dataclass(frozen=True)
class AuditLogCheck:
    """What :func:`check_audit_log` found: an intact chain, and how it ends against its head."""

    log: Path
    records: int
    """Records in the chain (the last seq; repair records included)."""
    head: Path
    """Where the chain head is kept (``<log>.head``)."""
    head_seq: int | None
    """The seq the head records; None when the log has no head."""

    @property
    def records_after_head(self) -> int:
        """Committed records past the head: an append stopped before it moved the head."""
        return 0 if self.head_seq is None else self.records - self.head_seq

    @property
    def head_status(self) -> str:
        """``"current"`` (the chain ends at its head), ``"behind"`` (committed records after
        it) or ``"absent"`` (no head: a removal of the last lines cannot be detected)."""
        if self.head_seq is None:
            return "absent"
        return "behind" if self.records_after_head else "current"

    def describe(self) -> str:
        """One line for people."""
        intact = f"{self.log}: {self.records} records, chain intact"
        if self.head_status == "current":
            return f"{intact}, ending at its head (seq {self.head_seq})"
        if self.head_status == "behind":
            return (
                f"{intact}; {self.records_after_head} committed after its head (seq "
                f"{self.head_seq}): an append stopped before moving the head; the next one does"
            )
        return (
            f"{intact}; no head ({self.head.name}): a log written before heads were kept, so "
            "the removal of its last lines cannot be detected; the next append starts one"
        )

    def to_dict(self) -> dict[str, Any]:
        return {
            "log": str(self.log),
            "records": self.records,
            "head": str(self.head),
            "head_status": self.head_status,
            "head_seq": self.head_seq,
            "records_after_head": self.records_after_head,
        }


def check_audit_log(
    path: Path, *, allow_torn_tail: bool = True, require_head: bool = False
) -> AuditLogCheck:
    """Check the whole chain of the log at ``path`` and that it still reaches its head.

    Every line must be a record whose ``seq`` follows the previous one and whose
    ``prev_sha256`` is the previous record line's sha256. Bytes that are not a record are
    accepted only when the record right after them is a ``repair`` describing them exactly, or
    (with ``allow_torn_tail``) when they end the file without a newline: an uncommitted tail.
    When ``<log>.head`` exists, the chain must hold the record it names (same seq, same
    sha256); committed records after it are accepted (an append stopped before moving the head).
    A log without a head verifies (``head_status == "absent"``) unless ``require_head``.
    Read-only; reads the log and its head under a shared lock, so appends cannot interleave.

    Raises
    ------
    AuditLogError
        Naming the line (1-based) and what is wrong: a broken chain (a line edited, removed or
        reordered), bytes that are not a record, a missing file; a truncated log (its chain
        stops before the head's seq, or holds another record there: naming the head's seq, line
        and sha256); a damaged head; no head with ``require_head``; a folder given for the log.
    LinkedStateFileError
        The log or its head is a symbolic link.
    """
    path = Path(path)
    if path.is_dir():
        logs = sorted(str(log) for log in path.glob("*.jsonl"))
        hint = f", e.g. {logs[0]}" if logs else ""
        raise AuditLogError(f"{path}: is a folder; expected the audit log file{hint}")
    head_path = audit_head_path(path)
    try:
        with open(open_state_file(path, os.O_RDONLY), "rb") as handle:
            fcntl.flock(handle.fileno(), fcntl.LOCK_SH)
            data = handle.read()
            head = ChainHead.read(head_path)  # under the lock: an append moves both
    except FileNotFoundError:
        recorded = ChainHead.read(head_path)
        removed = f", but its head {head_path} records {recorded.describe()}" if recorded else ""
        raise AuditLogError(f"{path}: does not exist{removed}; expected an audit log") from None
    if head is None and require_head:
        raise AuditLogError(
            f"{path}: has no head {head_path}; expected one: without it the removal of the "
            "log's last lines cannot be detected"
        )
    checker = _ChainChecker(path, data, watch_seq=head.seq if head else None)
    records = checker.run(allow_torn_tail=allow_torn_tail)
    if head is not None:
        checker.check_head(head, head_path)
    return AuditLogCheck(path, records, head_path, head.seq if head else None)


def verify_audit_log(path: Path, *, allow_torn_tail: bool = True) -> int:
    """:func:`check_audit_log` (truncation below the head included); return the record count.

    Raises
    ------
    ConfigError
        ``path`` is no path (None, a number); ``allow_torn_tail`` is not True or False (a truthy
        "no" would allow a torn tail).
    AuditLogError
        As :func:`check_audit_log`.
    """
    path = checked_path(path, "path", "an audit log file")
    checked_flag(allow_torn_tail, "allow_torn_tail")
    return check_audit_log(path, allow_torn_tail=allow_torn_tail).records


class _ChainChecker:
    def __init__(self, path: Path, data: bytes, *, watch_seq: int | None = None):
        self.path, self.data = path, data
        self.seq, self.prev = 0, GENESIS
        self.skipped_at: int | None = None
        self.skipped_line = 0
        self.last_line = 0
        self.watch_seq = watch_seq
        self.watched: tuple[str, int] | None = None
        """sha256 and line number of the record with seq ``watch_seq``, once seen."""

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
            record = parse_record(line)
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

    def check_head(self, head: ChainHead, head_path: Path) -> None:
        """Raise AuditLogError unless the chain holds the record ``head`` names."""
        if self.watched is None:
            ends = f"seq {self.seq} (line {self.last_line})" if self.seq else "no record"
            raise AuditLogError(
                f"{self.path}: truncated: its chain ends at {ends}, but its head {head_path} "
                f"records {head.describe()}: the last {head.seq - self.seq} record(s) were "
                "removed"
            )
        sha, line_no = self.watched
        if sha != head.sha256:
            raise self.fail(
                line_no,
                f"seq {head.seq} has sha256 {sha}, but its head {head_path} records "
                f"{head.describe()}: the log was truncated and written again, or the head "
                "belongs to another log",
            )

    def _skip(self, pos: int, line_no: int) -> None:
        if self.skipped_at is None:
            self.skipped_at, self.skipped_line = pos, line_no

    def _check_record(self, record: dict[str, Any], line: bytes, pos: int, line_no: int) -> None:
        if self.skipped_at is not None:
            self._check_repair(record, pos, line_no)
        elif is_repair(record):
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
        self.skipped_at, self.last_line = None, line_no
        if self.seq == self.watch_seq:
            self.watched = (self.prev, line_no)

    def _check_repair(self, record: dict[str, Any], pos: int, line_no: int) -> None:
        start = self.skipped_at
        assert start is not None
        size, digest = record.get("torn_bytes"), record.get("torn_sha256")
        covered = (
            is_repair(record)
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

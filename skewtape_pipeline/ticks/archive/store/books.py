"""The ``books_and_records`` mode: an archive whose files are write-once.

When a tick archive is a firm's own books and records (not vendor market data), the rules that
govern its preservation allow no silent modification or deletion. In this mode:

- re-tiering writes new consolidated copies and never deletes or overwrites a file (the files
  it supersedes stay on disk, unreachable from the query view, and are counted as retained);
- any attempt to delete an archive file, to overwrite a symbol-day file, or to turn the mode
  off raises :class:`~skewtape_pipeline.errors.WriteOnceError`, and the refusal itself is
  appended to the audit log;
- files written in the mode lose their write permission bits.

The mode is a property of the archive, not of a call: it is recorded once in
``<archive root>/_skewtape_books_and_records.json`` (created without clobbering, never removed),
so no caller can forget it. An archive's :class:`Books` (built once, as ``ArchiveCore.books``)
knows the marker and the audit log: its methods check the mode and append the audit records.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skewtape_pipeline import fsio
from skewtape_pipeline.audit import AUDIT_LOG_NAME, AuditLog
from skewtape_pipeline.errors import (
    ConfigError,
    WriteOnceError,
    location,
)

BOOKS_MARKER = "_skewtape_books_and_records.json"
MODE = "books_and_records"
AUDIT_ACTOR = "tick-archive"
EVENT_ENABLED = "tick-archive-write-once-enabled"
EVENT_REFUSED = "tick-archive-refused"


def default_audit_log(archive_root: Path) -> Path:
    """``<archive root>/../audit.jsonl``: the audit log beside the archive root, the folder the
    root resolves to (so an archive reached through a symbolic link audits, and ``show`` reads,
    the one log beside it, as the mirror's log is beside its resolved data root); the default of
    an ``Archive`` and of the command line. The writers themselves audit only to the log they
    are given."""
    return Path(archive_root).resolve().parent / AUDIT_LOG_NAME


class Books:
    """The books of the archive at ``root``: its write-once mode (the marker
    ``<root>/_skewtape_books_and_records.json``) and its audit log (``audit_log``; None: no
    audit). Built once by ``core.ArchiveCore`` (``core.books``); every check and audit record
    of an archive goes through it, so no caller names the root or the log again."""

    def __init__(self, root: Path, audit_log: Path | None):
        self.root = Path(root)
        self.audit_log = None if audit_log is None else Path(audit_log)

    def __repr__(self) -> str:
        return f"Books({str(self.root)!r}, audit_log={self.audit_log!r})"

    def is_on(self) -> bool:
        """True when the archive is in ``books_and_records`` mode.

        Raises ConfigError when the marker exists but is not the mode's marker.
        """
        marker = self.root / BOOKS_MARKER
        if not marker.exists():
            return False
        try:
            found = fsio.load_json(marker.read_bytes(), marker, error=ConfigError)
        except (OSError, ValueError) as exc:
            raise ConfigError(f"{marker}: unreadable write-once marker ({exc})") from None
        if not isinstance(found, dict) or found.get("mode") != MODE:
            raise ConfigError(f"{marker}: expected {{'mode': {MODE!r}}}, found {found!r}")
        return True

    def enable(self, reason: str = "") -> bool:
        """Put the archive in ``books_and_records`` mode, for good.

        Idempotent: returns True when this call turned the mode on, False when it already was.
        The marker is written to a temporary file and hard-linked into place, so two callers
        cannot clobber each other; the change (with ``reason``) is appended to the audit log.
        """
        if self.is_on():
            return False
        self.root.mkdir(parents=True, exist_ok=True)
        marker = self.root / BOOKS_MARKER
        body = {"mode": MODE, "since": datetime.now(UTC).isoformat(timespec="seconds")}
        temp = fsio.temp_path_for(marker)
        with open(temp, "w", encoding="utf-8") as handle:
            json.dump(body, handle, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        try:
            os.link(temp, marker)
            created = True
        except FileExistsError:
            created = False
        finally:
            temp.unlink(missing_ok=True)
        fsio.fsync_dir(self.root)
        if created:
            fsio.make_read_only(marker)
            archive = str(self.root.absolute())
            self.audit([{"event": EVENT_ENABLED, "archive": archive, "reason": reason}])
        return created

    def disable(self) -> None:
        """Always refused: the mode cannot be turned off (the refusal is audited).

        Raises
        ------
        WriteOnceError
            Always, naming the marker file.
        """
        self._refuse(
            self.root / BOOKS_MARKER,
            operation="disable",
            why="books_and_records mode cannot be turned off once on",
        )

    def check_may_delete(self, path: Path | object, *, why: str = "") -> None:
        """Raise WriteOnceError (audited) if the archive is write-once; else return.

        ``why`` says what the deletion was for; it goes into the refusal.
        """
        if self.is_on():
            self._refuse(
                path,
                operation="delete",
                why="the archive is in books_and_records mode (write-once)"
                + (f": {why}" if why else ""),
            )

    def check_may_write(self, path: Path) -> None:
        """Raise WriteOnceError (audited) if the archive is write-once and ``path`` exists."""
        if Path(path).exists() and self.is_on():
            self._refuse(
                path,
                operation="overwrite",
                why="the archive is in books_and_records mode (write-once) and the file exists",
            )

    def check_appendable(self, *, given: bool) -> None:
        """Before a write: the audit log checked to take records (``AuditLog.check_appendable``:
        its head repaired when a killed writer left none; AuditLogError for a folder, an edited
        log or a file that is none); one ``given`` by the caller (as ``--audit-log``) in a folder
        that does not exist refused (ConfigError), never created. Nothing without a log."""
        if self.audit_log is None:
            return
        if given:
            named = f"audit_log = {str(self.audit_log)!r}"
            fsio.refuse_missing_folder_above(named, self.audit_log, "the audit log is written")
        AuditLog(self.audit_log).check_appendable()

    def audit(self, records: list[Mapping[str, Any]], *, once: bool = False) -> int:
        """Append ``records`` (actor added) to the audit log; returns how many were appended
        (0 when the archive is not audited: no log). With ``once``, one record the log ends
        with already is not appended again (``AuditLog.append``)."""
        if self.audit_log is None:
            return 0
        return AuditLog(self.audit_log).append(
            [{"actor": AUDIT_ACTOR, **record} for record in records], once=once
        )

    def _refuse(self, path: Path | object, *, operation: str, why: str) -> None:
        """Append a refusal record to the audit log, then raise WriteOnceError for ``path``."""
        record = {
            "event": EVENT_REFUSED,
            "archive": str(self.root.absolute()),
            "file": str(location_text(path)),
            "operation": operation,
            "why": why,
        }
        self.audit([record])
        raise WriteOnceError(f"{operation} refused: {why}", path=path, operation=operation)


def location_text(path: Path | object) -> str:
    """How audit records name a file: a local file's absolute path, an object's URI."""
    found = location(path)
    return str(found.absolute() if isinstance(found, Path) else found)


# The archive's audit events (each writer's records name one).

EVENT_WRITE = "tick-archive-write"
"""Audit event: a symbol-day the archive did not hold was compacted into a new hot file."""
EVENT_RECOMPACT = "tick-archive-recompact"
"""Audit event: a symbol-day the archive held was compacted again (its hot file replaced, or its
consolidated copy superseded by a new hot file)."""
EVENT_REMOVE = "tick-archive-remove"
EVENT_REWRITE = "tick-archive-rewrite"
EVENT_COMMIT = "tick-archive-commit"
EVENT_WITHDRAW = "tick-archive-withdraw"
EVENT_REBUILD = "tick-archive-catalog-rebuilt"
EVENT_PRUNE = "tick-archive-versions-pruned"
EVENT_POLICY = "tick-archive-tier-policy-changed"
"""Audit event: the archive's tier policy record replaced by a policy given that moves a tier
holding nothing yet, or reaches a tier through another endpoint (``store.policy_change``)."""

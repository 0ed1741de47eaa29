"""Catch a history folder up with every delta that arrived since its newest snapshot.

Layout: ``history/<YYYY-MM>/`` snapshot folders and ``deltas/<YYYY-MM>/`` delta folders. The
chain is checked whole before anything is applied: the months must follow one another without
a gap, and each delta's parent must be the snapshot the previous step leads to.
"""

from __future__ import annotations

from pathlib import Path

from skewtape_pipeline import fsio, progress
from skewtape_pipeline.audit import AuditLog
from skewtape_pipeline.errors import (
    ApplyInProgressError,
    ChainError,
    ConfigError,
    ManifestError,
    SkewtapeError,
    checked_flag,
)
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.mirror.apply import ApplyResult, apply_locked, lock_file_for
from skewtape_pipeline.mirror.folder_kinds import check_catch_up_folders, month_folders
from skewtape_pipeline.mirror.format import MANIFEST, SnapshotManifest
from skewtape_pipeline.mirror.journal import Journal
from skewtape_pipeline.mirror.months import applied_months
from skewtape_pipeline.mirror.preflight import DeltaHead, read_delta_head

MODES = ("versioned", "in_place")


def next_month(month: str) -> str:
    """The month after ``month`` (YYYY-MM)."""
    year, mon = int(month[:4]), int(month[5:])
    return f"{year + 1:04d}-01" if mon == 12 else f"{year:04d}-{mon + 1:02d}"


def catch_up(
    history: Path,
    deltas: Path,
    *,
    mode: str = "versioned",
    audit_log: Path | None = None,
    lock_timeout: float = 0.0,
    link_sources: bool = True,
) -> list[ApplyResult]:
    """Apply, in month order, every delta later than the newest snapshot in ``history``.

    Parameters
    ----------
    history
        Folder of ``<YYYY-MM>/`` snapshots; the newest one (by folder name) is the start.
    deltas
        Folder of ``<YYYY-MM>/`` deltas.
    mode
        ``versioned``: each month becomes a new folder ``history/<month>/`` (hard links to the
        previous month for unchanged files). ``in_place``: the newest folder is advanced in place
        and keeps its name; the month it holds is read from its manifest, or, when the manifest
        records none, is the month of the delta whose next snapshot it holds.
    audit_log, lock_timeout, link_sources
        As for :func:`~skewtape_pipeline.mirror.apply.apply_delta` (``link_sources`` False:
        every delta's files are copied, never cloned or hard-linked); one lock is held for the
        whole catch-up.

    Returns
    -------
    list[ApplyResult]
        One per delta applied, in order; empty when the history is current.

    Idempotent and resumable: a catch-up interrupted at any point is finished by running it
    again (the interrupted delta is resumed, then the rest applied; a month committed but cut
    before its audit records is finished first, and is the first result). A refusal or Ctrl-C
    removes the history folder's lock file again when this catch-up created it.

    Raises
    ------
    DeltaRefusedError
        A pending delta's manifest or CHECKSUMS.sha256 is unreadable or inconsistent.
    ConfigError
        ``mode`` is not ``versioned`` or ``in_place``, ``lock_timeout`` is negative, not
        finite or not a number, a path argument is no path (None, a number), or
        ``audit_log``'s folder does not exist, named; nothing is written or created.
    MissingPathError
        ``history`` or ``deltas`` is not an existing folder; nothing is created.
    WrongFolderError
        The two folders are the same or swapped, or one is a month's snapshot or delta (or a
        folder of the other kind); nothing is created.
    LinkedStateFileError
        ``audit_log`` (or its head) or the lock file is a symbolic link; nothing is written.
    AuditLogError
        ``audit_log`` could not be appended to (see :meth:`AuditLog.check_appendable`).
    ChainError
        ``history`` holds no snapshot, a month is missing between the current one and a later
        delta, a delta's parent is not the snapshot before it, or a delta's next snapshot is not
        of its folder's month. Raised before anything is written.
    UnreadableFolderError, UnreadableFileError
        ``history`` or one of its month folders cannot be read (a permission refused, a link
        loop), or a month's manifest is a link to nothing (``applied_months``): named with the
        reason before anything is written, never taken for a month not applied (whose delta
        would be applied again). An OS error.
    """
    if mode not in MODES:
        raise ConfigError(f"mode={mode!r}; expected one of {', '.join(MODES)}")
    lock_timeout = fsio.checked_lock_timeout(lock_timeout)
    checked_flag(link_sources, "link_sources")
    history = fsio.require_folder(
        history, "a history folder of <YYYY-MM>/ snapshots", name="history"
    )
    deltas = fsio.checked_path(deltas, "deltas", "a folder of <YYYY-MM>/ deltas")
    if audit_log is not None:
        audit_log = fsio.checked_path(audit_log, "audit_log", "the audit log's file")
        fsio.refuse_missing_folder_above(
            f"audit_log = {str(audit_log)!r}", audit_log, "the audit log is written"
        )
    check_catch_up_folders(history, deltas)
    current_snapshot(history)  # refused before the lock file is created
    deltas = fsio.require_folder(deltas, "a folder of <YYYY-MM>/ deltas")
    if audit_log is not None:
        AuditLog(Path(audit_log)).check_appendable()
    lock = lock_file_for(history / "any-month")
    with (
        fsio.stop_when_disk_full(history, f"catching up from {deltas}"),
        fsio.lock_removed_on(
            lock,
            (SkewtapeError, KeyboardInterrupt),
            timeout=lock_timeout,
            what="catching up",
            held_error=ApplyInProgressError,
        ),
    ):
        current = current_snapshot(history)
        finished = _finish_committed(history, current, deltas, audit_log, link_sources)
        chain = plan_chain(current, deltas)
        results = [] if finished is None else [finished]
        for month, head in chain:
            into = None if mode == "in_place" else history / month
            results.append(apply_locked(current, head.folder, into=into, audit_log=audit_log,
                                        link_sources=link_sources))  # fmt: skip
            progress.report(f"applied {month}", len(results), len(chain), "months")
            current = into if into is not None else current
        return results


def _finish_committed(
    history: Path, current: Path, deltas: Path, audit_log: Path | None, link_sources: bool
) -> ApplyResult | None:
    """Finish the apply that committed ``current`` (renamed into place, or advanced in place)
    but was cut before its audit records and clean-up; None when there is none. Its delta is
    the one of ``deltas`` whose manifest its journal names; ChainError when none is."""
    journal = Journal.find(current, None)
    if journal is None or not journal.committed or journal.finished:
        return None
    wanted = journal.delta_manifest_sha256
    delta = next(
        (deltas / m for m in month_folders(deltas)
         if read_delta_head(deltas / m).manifest_sha256 == wanted),
        None,
    )  # fmt: skip
    if delta is None:
        raise ChainError(
            f"{current} holds a month committed but not finished by the delta whose manifest "
            f"sha256 is {wanted}, and {deltas} holds no such delta; put it back and run again"
        )
    if journal.plan.get("mode") == "in_place":
        return apply_locked(current, delta, audit_log=audit_log, link_sources=link_sources)
    parent_sha = journal.plan["parent_manifest_sha256"]
    manifests = [history / m / MANIFEST for m in applied_months(history)]
    parent = next((path.parent for path in manifests if sha256_file(path) == parent_sha), None)
    if parent is None:
        raise ChainError(
            f"{current} holds a month committed but not finished, and {history} no longer holds "
            f"its parent snapshot (manifest sha256 {parent_sha}); finish it with apply-delta"
        )
    return apply_locked(parent, delta, into=current, audit_log=audit_log, link_sources=link_sources)


def has_pending(history: Path, deltas: Path) -> bool:
    """True when :func:`catch_up` of ``history`` from ``deltas`` has something to do: a month
    committed but not finished, or a delta after the newest snapshot. Read-only; False when
    ``deltas`` is no folder. Raises ChainError as :func:`plan_chain` does."""
    if not deltas.is_dir():
        return False
    current = current_snapshot(history)
    journal = Journal.find(current, None)
    if journal is not None and journal.committed and not journal.finished:
        return True
    return bool(plan_chain(current, deltas))


def current_snapshot(history: Path) -> Path:
    """The newest ``<YYYY-MM>/`` folder of ``history`` with a manifest; ChainError if none,
    UnreadableFolderError or UnreadableFileError as ``applied_months`` raises them (never a
    month taken for one not applied, whose delta would then be applied again)."""
    months = applied_months(history)
    if not months:
        raise ChainError(
            f"{history} holds no snapshot folder <YYYY-MM>/ with a {MANIFEST}; "
            "expected at least the snapshot to start from"
        )
    return history / months[-1]


def chain_tip(history: Path, deltas: Path) -> tuple[str, str]:
    """Where the local chain ends: the newest month the root holds, as a snapshot in
    ``history`` or as a delta in ``deltas`` after it, and the manifest sha256 of the snapshot
    that month leads to (what the next month's delta must name as its parent). Read-only.

    Raises ChainError when ``history`` holds no snapshot or the local deltas do not form a chain.
    """
    current = current_snapshot(history)
    chain = plan_chain(current, deltas)
    if chain:
        month, head = chain[-1]
        return month, head.manifest.next.manifest_sha256
    digest = sha256_file(current / MANIFEST)
    raw = (current / MANIFEST).read_bytes()
    month = SnapshotManifest.parse(raw, source=current / MANIFEST).month
    return month or _month_held(current, deltas, digest), digest


def plan_chain(current: Path, deltas: Path) -> list[tuple[str, DeltaHead]]:
    """The deltas to apply to the snapshot ``current``, in order, checked as one chain.

    Reads only the manifests (no file is hashed here; each apply checks its delta in full).
    Raises :class:`ChainError` on a gap, a broken parent link or a month mismatch.
    """
    raw = (current / MANIFEST).read_bytes()
    expected_parent, expected_from = sha256_file(current / MANIFEST), current
    month = SnapshotManifest.parse(raw, source=current / MANIFEST).month or _month_held(
        current, deltas, expected_parent
    )
    chain: list[tuple[str, DeltaHead]] = []
    held = month
    for delta_month in [m for m in month_folders(deltas) if m > month]:
        wanted = next_month(month)
        if delta_month != wanted:
            reaches = (
                f"holds {held}" if month == held else f"holds {held}, its deltas reach {month}"
            )
            raise ChainError(
                f"{deltas} has no delta for {wanted}: the snapshot {current} {reaches}, and "
                f"the next delta found is {deltas / delta_month}; expected every month in between"
            )
        head = read_delta_head(deltas / delta_month)
        parent = head.manifest.parent
        if parent.manifest_sha256 != expected_parent:
            raise ChainError(
                f"{head.folder}: its parent is {parent.bundle_id} (manifest sha256 "
                f"{parent.manifest_sha256}), but {expected_from} leads to a snapshot whose "
                f"manifest sha256 is {expected_parent}"
            )
        next_month_found = _next_snapshot_month(head)
        if next_month_found not in (None, delta_month):
            raise ChainError(
                f"{head.folder}: leads to a snapshot of {next_month_found}; expected "
                f"{delta_month}, the month its folder is named after"
            )
        chain.append((delta_month, head))
        month, expected_parent = delta_month, head.manifest.next.manifest_sha256
        expected_from = head.folder
    return chain


def _month_held(current: Path, deltas: Path, manifest_sha256: str) -> str:
    """The month ``current`` holds when its manifest records none (the published format does
    not require it): the month of the delta leading to it, if one in ``deltas`` does; else the
    folder's name (``history/<YYYY-MM>/``; an in-place folder keeps the name it started with)."""
    for delta_month in reversed([m for m in month_folders(deltas) if m > current.name]):
        if read_delta_head(deltas / delta_month).manifest.next.manifest_sha256 == manifest_sha256:
            return delta_month
    return current.name


def _next_snapshot_month(head: DeltaHead) -> str | None:
    """The month the next snapshot's manifest records, or None when it records none."""
    source = head.manifest.files[-1].source
    assert source is not None
    path = head.folder / source
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ManifestError(
            f"cannot be read ({exc.strerror}); expected the next snapshot's manifest", path=path
        ) from None
    return SnapshotManifest.parse(raw, source=path).month

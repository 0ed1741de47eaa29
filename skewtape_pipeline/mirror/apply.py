"""Apply a Skewtape delta to a local snapshot: verified first, staged, crash-safe, audited.

Two modes, one procedure:

- in place (``into=None``): ``snapshot`` itself becomes the next snapshot;
- versioned (``into=DIR``): the next snapshot appears as the new folder ``DIR``; the parent is
  never modified.

Either way the next snapshot is first built in a staging folder private to the apply
(:mod:`~skewtape_pipeline.mirror.staging`; in place:
``snapshot/.skewtape/staging/<run>/``; versioned: ``DIR.parent/.<DIR.name>.<run>.partial``):
unchanged files hard-linked from the parent, the delta's whole files linked or copied (hashed as
they are copied), tables merged there. Every check that can fail runs on that staged result,
before the first byte of the parent's published files changes: the delta's checks
(:mod:`skewtape_pipeline.mirror.preflight`), the delta's files again as they are used (a file
rewritten or swapped since its check is refused), and the full verification of the staged
snapshot against the next CHECKSUMS.sha256 and manifest. Then the apply commits: versioned, by
renaming the staging folder to ``DIR``; in place, by saving the journal as committed and moving
the staged files into the snapshot (CHECKSUMS.sha256 then manifest.json last, as the published
procedure does). Past the commit point a rerun always finishes (:mod:`.journal`); before it, a
failure leaves the parent's published files as they were and a rerun starts again.

The apply runs as five steps, usable one by one in separate processes (the orchestration runs
each as its own op); a :class:`StagedApply` (small, JSON-able) carries one step's outcome to
the next, and the journal in the staging folder carries everything else:

1. :func:`check_step`: read the delta's manifest and run every check once; make the staging
   folder and journal the plan (no lock: nothing shared is written);
2. :func:`file_ops_step`: link the parent's files into staging, apply add, replace, delete;
3. :func:`merges_step`: merge the table changes (DuckDB) in staging;
4. :func:`publish_step`: under the history folder's lock, place the seal files, verify the
   staged snapshot, commit, write the audit log, clean up;
5. :func:`applied_step`: what was applied and verified, read back from the journal.

:func:`apply_delta` runs them all under one lock.
"""

from __future__ import annotations

import contextlib
import getpass
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import duckdb

from skewtape_pipeline import faults, fsio, progress
from skewtape_pipeline.audit import AuditLog
from skewtape_pipeline.errors import (
    ApplyInProgressError,
    ConfigError,
    LocalStateError,
    MalformedJsonError,
    MissingPathError,
    SkewtapeError,
    SnapshotMismatchError,
    UnsafePathError,
    VerificationError,
    checked_flag,
)
from skewtape_pipeline.hashing import FileStamp, HashCache, sha256_file
from skewtape_pipeline.mirror import merge
from skewtape_pipeline.mirror.folder_kinds import check_apply_folders
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    LOCAL_STATE_DIR,
    MANIFEST,
    DeltaFileEntry,
)
from skewtape_pipeline.mirror.journal import Journal, journal_path
from skewtape_pipeline.mirror.preflight import (
    CheckedDelta,
    DeltaHead,
    check_change_files,
    check_delta_files,
    read_delta_head,
    refuse_symlinked_components,
    refuse_unusable_path,
)
from skewtape_pipeline.mirror.snapshot import list_folder, read_checksums
from skewtape_pipeline.mirror.staging import (
    STAGING_DIR,
    Stage,
    prune_empty_folders,
    remove_staging,
    same_file,
    staging_folder,
    staging_folders,
)
from skewtape_pipeline.mirror.verify import (
    ParentHash,
    VerifyResult,
    check_parent_files,
    hash_cache_path,
    merged_tables,
    merged_tables_path,
    verify_snapshot,
)

LOCK_FILE = ".skewtape-apply.lock"
"""The apply lock, in the folder that holds the snapshot being written (the history folder)."""


PHASES = ("verify_delta", "file_ops", "merges", "publish", "verify_snapshot")


AUDIT_EVENT = "apply"


@dataclass
class ApplyResult:
    """What one apply did. Lists and counts cover the whole apply, including the part a crashed
    earlier run did (they come from the journal), and bytes and seconds every step of it."""

    parent_bundle_id: str
    next_bundle_id: str
    mode: str
    """``in_place`` or ``versioned``."""
    snapshot: Path
    """Where the next snapshot now is."""
    already_applied: bool
    """True when nothing had to be done (the next snapshot was already there)."""
    files_added: list[str] = field(default_factory=list)
    files_replaced: list[str] = field(default_factory=list)
    files_deleted: list[str] = field(default_factory=list)
    rows_upserted: dict[str, int] = field(default_factory=dict)
    rows_deleted: dict[str, int] = field(default_factory=dict)
    bytes_read: int = 0
    bytes_written: int = 0
    files_linked: int = 0
    files_cloned: int = 0
    """Delta files cloned (copy-on-write: their own inode) where the file system can."""
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the result (for reports and orchestration metadata)."""
        data = asdict(self)
        data["snapshot"] = str(self.snapshot)
        return data


@dataclass(frozen=True)
class ApplyTarget:
    """What an apply works on: the parent snapshot, the delta and, versioned, the new folder."""

    snapshot: Path
    delta: Path
    into: Path | None = None

    @classmethod
    def of(cls, snapshot: Path, delta: Path, into: Path | None = None) -> ApplyTarget:
        return cls(Path(snapshot), Path(delta), Path(into) if into is not None else None)

    @property
    def final(self) -> Path:
        """Where the next snapshot ends up."""
        return self.into if self.into is not None else self.snapshot

    @property
    def mode(self) -> str:
        return "in_place" if self.into is None else "versioned"


@dataclass(frozen=True)
class ApplyOptions:
    """How an apply runs: its audit log, how long to wait for the lock, links or copies."""

    audit_log: Path | None = None
    """Append one record per changed file to this audit log."""
    lock_timeout: float = 0.0
    """Seconds to wait for another apply in the same history folder to finish."""
    link_sources: bool = True
    """Clone the delta's whole files where the file system can, else hard-link them (the
    delta's files then become read-only), instead of copying them (a copy across file
    systems)."""


@dataclass(frozen=True)
class StagedApply:
    """What one step hands to the next: which apply (its run id, naming its staging folder and
    journal) and where it stands. Small and JSON-able (:meth:`to_dict`), with no paths."""

    run_id: str | None
    """None when there is nothing to stage (already applied)."""
    already_applied: bool = False
    committed: bool = False
    """Past the commit point: only publishing's finishing part is left to do."""

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> StagedApply:
        return cls(
            run_id=data["run_id"],
            already_applied=bool(data["already_applied"]),
            committed=bool(data["committed"]),
        )


# --- public entry points ----------------------------------------------------------------------


def apply_delta(
    snapshot: Path,
    delta: Path,
    *,
    into: Path | None = None,
    audit_log: Path | None = None,
    lock_timeout: float = 0.0,
    link_sources: bool = True,
) -> ApplyResult:
    """Bring ``snapshot`` (or a new folder ``into``) to the snapshot the delta leads to.

    Parameters
    ----------
    snapshot
        A snapshot folder holding the delta's parent (or already its next snapshot).
    delta
        The delta folder (``manifest.json``, ``CHECKSUMS.sha256``, ``snapshot/``, ``changes/``).
    into
        None: apply in place. A path: build the next snapshot there, leaving ``snapshot``
        untouched (versioned mode); the folder must not exist yet, or already hold the next
        snapshot.
    audit_log, lock_timeout, link_sources
        As in :class:`ApplyOptions`.

    Returns
    -------
    ApplyResult
        What was done, with timings per phase.

    Idempotent and resumable: applying a delta already applied does nothing (the snapshot is
    verified); a run interrupted before the commit point left the parent as it was, one
    interrupted after it is finished by running the same call again.

    Raises
    ------
    ConfigError
        ``lock_timeout`` is negative, not finite or not a number, a path argument is no
        path (None, a number), or ``audit_log``'s folder does not exist (as the command line's
        ``--audit-log``), named; nothing is written or created.
    MissingPathError
        ``snapshot`` or ``delta`` is not an existing folder, or the folder ``into`` would be
        created in does not exist; nothing is created.
    WrongFolderError
        ``snapshot`` is not a snapshot or ``delta`` not a delta (swapped, a history or deltas
        folder given for one of its months, ...), named with what each is; nothing is created.
    LinkedStateFileError
        ``audit_log`` (or its head), the lock file or a local state file is a symbolic link;
        nothing published.
    AuditLogError
        ``audit_log`` could not be appended to (its head damaged, or no longer matching the
        log); checked before the commit point, so nothing published.
    DeltaRefusedError
        (ManifestError, UnsafePathError, ChecksumMismatchError, ChangeFileError) the delta is
        refused, also when one of its files changed after it was checked; nothing published.
    SnapshotMismatchError
        The snapshot holds neither the delta's parent nor its next snapshot; nothing written.
    ApplyInProgressError
        Another apply holds the lock of this history folder beyond ``lock_timeout``.
    VerificationError
        A parent file the next snapshot carries or merges into was modified locally (named in
        the parent, before anything is staged), or the staged next snapshot does not verify (a
        table whose rows are not the manifest's, ...): nothing published, the staging folder
        removed.
    """
    lock_timeout = fsio.checked_lock_timeout(lock_timeout)
    checked_flag(link_sources, "link_sources")
    snapshot = fsio.require_folder(snapshot, "a snapshot folder", name="snapshot")
    delta = fsio.require_folder(delta, "a delta folder", name="delta")
    if into is not None:
        into = fsio.checked_path(into, "into", "the folder of the next snapshot")
    if audit_log is not None:
        audit_log = fsio.checked_path(audit_log, "audit_log", "the audit log's file")
    check_apply_folders(snapshot, delta)
    target = ApplyTarget.of(snapshot, delta, into)
    _check_into(target)  # before the lock file is created beside it (and the audit log's
    if audit_log is not None:  # folder, which the command line's default puts beside it)
        fsio.refuse_missing_folder_above(
            f"audit_log = {str(audit_log)!r}", audit_log, "the audit log is written"
        )
    _check_audit_log(audit_log)
    options = ApplyOptions(audit_log, lock_timeout, link_sources)
    doing = f"applying {target.delta}"
    with fsio.stop_when_disk_full(target.final, doing), _lock(target, options, doing):
        return _apply_locked(target, options)


def apply_locked(
    snapshot: Path,
    delta: Path,
    *,
    into: Path | None = None,
    audit_log: Path | None = None,
    link_sources: bool = True,
) -> ApplyResult:
    """:func:`apply_delta` for a caller that already holds the history folder's apply lock."""
    return _apply_locked(ApplyTarget.of(snapshot, delta, into), ApplyOptions(
        audit_log=audit_log, link_sources=link_sources))  # fmt: skip


def _apply_locked(target: ApplyTarget, options: ApplyOptions) -> ApplyResult:
    staged = check_step(target)
    if staged.already_applied:
        return _already_applied(target)
    if not staged.committed:
        file_ops_step(target, staged, options)
        merges_step(target, staged, options)
    return _publish_locked(target, staged, options)


def lock_file_for(target: Path) -> Path:
    """The apply lock guarding ``target``: in the real folder that holds it (the history
    folder, every symlink resolved, so that an alias of ``target`` takes the same lock)."""
    return Path(target).resolve().parent / LOCK_FILE


@contextlib.contextmanager
def _lock(target: ApplyTarget, options: ApplyOptions, what: str) -> Iterator[None]:
    """The history folder's apply lock, its file removed again when this apply created it and
    is refused or interrupted (``fsio.lock_removed_on``), as the catch-up's."""
    with fsio.lock_removed_on(
        lock_file_for(target.final),
        (SkewtapeError, KeyboardInterrupt),
        timeout=options.lock_timeout,
        what=what,
        held_error=ApplyInProgressError,
    ):
        faults.checkpoint("locked")
        yield


# --- step 1: check ----------------------------------------------------------------------------


def check_step(target: ApplyTarget) -> StagedApply:
    """Run every check of the delta once; stage the apply (a new staging folder and journal).

    Writes nothing but the new, private staging folder, so it needs no lock. Returns the
    :class:`StagedApply` later steps take: ``already_applied`` when the target already holds
    the next snapshot, ``committed`` when a crashed apply of this delta only needs finishing.
    Raises the refusals :func:`apply_delta` lists; nothing is written then.
    """
    _check_into(target)
    started = time.perf_counter()
    head = read_delta_head(target.delta)
    pending = _pending_commit(target, head.manifest_sha256)
    if pending is not None:
        return StagedApply(pending.run_id, committed=True)
    if _next_already_in_place(target, head):
        return StagedApply(None, already_applied=True)
    con = merge.connect()
    try:
        checked, parent = _preflight(head, target, con)
    finally:
        con.close()
    faults.checkpoint("preflight")
    run_id = uuid.uuid4().hex
    work = staging_folder(target, run_id)
    work.mkdir(parents=True)
    journal = Journal(
        path=journal_path(work),
        delta_manifest_sha256=head.manifest_sha256,
        run_id=run_id,
        plan=_plan(checked, target, parent),
    )
    journal.add_seconds("verify_delta", time.perf_counter() - started)
    try:
        journal.save()
    except OSError:  # a full disk: no staging folder without its journal is left behind
        shutil.rmtree(work, ignore_errors=True)
        raise
    faults.checkpoint("staged")
    return StagedApply(run_id)


def _check_into(target: ApplyTarget) -> None:
    into, snapshot = target.into, target.snapshot
    if into is None:
        return
    resolved, parent = into.resolve(), snapshot.resolve()
    if resolved == parent or resolved.is_relative_to(parent) or parent.is_relative_to(resolved):
        raise ConfigError(
            f"into={into} overlaps the snapshot {snapshot}; expected a new folder beside it"
        )
    if into.name.startswith("."):
        raise ConfigError(f"into={into}: a snapshot folder name may not start with '.'")
    if not into.parent.is_dir():
        raise MissingPathError(
            f"into={into}: its folder {into.parent} does not exist; a versioned apply creates "
            "only the new snapshot folder, never the folders above it (expected a new folder "
            f"beside the snapshot, e.g. {snapshot.parent / 'YYYY-MM'})"
        )


@dataclass(frozen=True)
class _ParentSide:
    """What the check found on the parent's side: the files the staging folder carries, and
    the hashes it computed of the parent's files (for the apply to vouch for them in staging)."""

    files: list[str]
    hashes: dict[str, ParentHash]


def _preflight(
    head: DeltaHead, target: ApplyTarget, con: duckdb.DuckDBPyConnection
) -> tuple[CheckedDelta, _ParentSide]:
    """Every check before a write: delta files, change files, the snapshot side."""
    checked = check_delta_files(head)
    check_change_files(checked, con, base_root=target.snapshot)
    return checked, _check_snapshot_side(target, checked)


def _plan(checked: CheckedDelta, target: ApplyTarget, parent: _ParentSide) -> dict[str, Any]:
    """What the later steps need from the check, as JSON (no absolute paths)."""
    manifest = checked.manifest
    sources = {entry.source for entry in manifest.files if entry.source is not None}
    return {
        "mode": target.mode,
        "parent_bundle_id": manifest.parent.bundle_id,
        "parent_manifest_sha256": manifest.parent.manifest_sha256,
        "next_bundle_id": manifest.next.bundle_id,
        "next_manifest_sha256": manifest.next.manifest_sha256,
        "files": [[e.path, e.op, e.source, e.sha256] for e in manifest.files],
        "stamps": {rel: checked.stamps[rel].to_list() for rel in sorted(sources)},
        "hashed_at_ns": checked.hashed_at_ns,
        "change_stats": {
            rel: [stats.upserts, stats.deletes] for rel, stats in checked.change_stats.items()
        },
        "column_order": {rel: list(names) for rel, names in checked.column_order.items()},
        "table_columns": {
            rel: [list(column) for column in columns]
            for rel, columns in checked.table_columns.items()
        },
        "parent_files": parent.files,
        "parent_hashes": {
            rel: [digest, *stamp.to_list(), hashed_at]
            for rel, (digest, stamp, hashed_at) in parent.hashes.items()
        },
    }


def _manifest_sha(folder: Path) -> str | None:
    path = folder / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    return sha256_file(path)


def _pending_commit(target: ApplyTarget, delta_sha: str) -> Journal | None:
    """The journal of a committed, unfinished apply in the target (refusing another delta's)."""
    if target.into is not None and not target.into.is_dir():
        return None
    journal = Journal.find(target.final, None)
    if journal is None or not journal.committed or journal.finished:
        return None
    if journal.delta_manifest_sha256 != delta_sha:
        raise SnapshotMismatchError(
            f"{target.final} holds an unfinished apply of another delta (manifest sha256 "
            f"{journal.delta_manifest_sha256}); apply that delta again to finish it first"
        )
    return journal


def _next_already_in_place(target: ApplyTarget, head: DeltaHead) -> bool:
    """True when the target already holds the next snapshot; False when the parent is there to
    apply to. Raises :class:`SnapshotMismatchError` naming both bundles otherwise."""
    parent, nxt = head.manifest.parent, head.manifest.next
    snapshot, into = target.snapshot, target.into
    names = (
        f"neither the delta's parent {parent.bundle_id} (manifest sha256 "
        f"{parent.manifest_sha256}) nor its next snapshot {nxt.bundle_id} (manifest sha256 "
        f"{nxt.manifest_sha256})"
    )
    if into is not None and (into.exists() or into.is_symlink()):
        if not into.is_symlink() and _manifest_sha(into) == nxt.manifest_sha256:
            return True
        raise SnapshotMismatchError(
            f"{into} already exists and holds {names}; refusing to overwrite it "
            "(a versioned apply creates a new folder)"
        )
    current = _manifest_sha(snapshot)
    if current == nxt.manifest_sha256:
        if into is None:
            return True
        raise SnapshotMismatchError(
            f"{snapshot} already holds the next snapshot {nxt.bundle_id}, not the parent "
            f"{parent.bundle_id} a versioned apply builds from"
        )
    if current != parent.manifest_sha256:
        found = f"a manifest.json hashing to {current}" if current else "no manifest.json"
        raise SnapshotMismatchError(f"{snapshot} holds {names}; it has {found}")
    return False


def _check_snapshot_side(target: ApplyTarget, checked: CheckedDelta) -> _ParentSide:
    """Refuse links on paths written, paths no file operation here could use, and parent files
    modified locally (a file carried or a table merged into: named in the parent, before
    anything is staged); return the parent's files the staging folder carries.

    In place every file of the folder is carried (so the staged verification sees any file
    the next snapshot does not list); versioned, the files the parent's CHECKSUMS.sha256 lists.
    """
    snapshot = target.snapshot
    local = LOCAL_STATE_DIR if target.into is not None else f"{LOCAL_STATE_DIR}/{STAGING_DIR}"
    refuse_symlinked_components(snapshot, local, source=snapshot, field_name=local)
    deepest = staging_folder(target, uuid.UUID(int=0).hex)  # as long as any run's
    manifest_path = checked.head.folder / MANIFEST
    for index, entry in enumerate(checked.manifest.files):
        refuse_unusable_path(
            deepest, entry.path, source=manifest_path, field_name=f"files[{index}].path"
        )
    if target.into is None:
        for index, entry in enumerate(checked.manifest.files):
            refuse_symlinked_components(
                snapshot, entry.path, source=manifest_path, field_name=f"files[{index}].path"
            )
            _refuse_non_file(snapshot / entry.path, manifest_path, f"files[{index}].path")
        listing = list_folder(snapshot)
        odd = [f"{rel}: is a link; a snapshot holds regular files only" for rel in listing.symlinks]
        odd += [f"{rel}: is not a regular file" for rel in listing.others]
        if odd:
            raise VerificationError(snapshot, odd)
        files = listing.files
    else:
        files = sorted({*read_checksums(snapshot / CHECKSUMS), CHECKSUMS})
        missing = []
        for rel in files:
            refuse_symlinked_components(snapshot, rel, source=snapshot, field_name=rel)
            if not (snapshot / rel).is_file():
                missing.append(f"{rel}: is missing; the parent's {CHECKSUMS} lists it")
        if missing:
            raise VerificationError(snapshot, missing)
    merged_tables(snapshot)  # a damaged record raises LocalStateError before any write
    named = {entry.path for entry in checked.manifest.files}
    changed = [entry.path for entry in checked.manifest.files if entry.op == "change"]
    carried = [rel for rel in files if rel not in named]
    hashes = check_parent_files(snapshot, changed + carried)
    return _ParentSide(files, {rel: hashes[rel] for rel in carried if rel in hashes})


def _refuse_non_file(path: Path, source: Path, field_name: str) -> None:
    if path.exists() and not path.is_file():
        raise UnsafePathError(
            f"{path} exists and is not a regular file; refusing to replace it",
            path=source,
            field=field_name,
        )


# --- steps 2 and 3: file ops and merges, in staging ------------------------------------------


def file_ops_step(target: ApplyTarget, staged: StagedApply, options: ApplyOptions) -> None:
    """Link the parent's files into the staging folder; apply the add, replace and delete
    entries there, in manifest order. Idempotent; no lock (the staging folder is the apply's)."""
    if staged.already_applied or staged.committed:
        return
    with Stage.open(target, staged, options) as stage, stage.phase("file_ops"):
        stage.populate()
        stage.journal_plan()
        entries = stage.entries[:-2]
        for index, entry in enumerate(entries):
            progress.report("file operations", index + 1, len(entries), "entries")
            if entry.op == "change":
                continue
            faults.checkpoint(f"entry[{index}]:{entry.path}:begin")
            if entry.op == "delete":
                stage.delete(entry)
            else:
                stage.place(entry)
            faults.checkpoint(f"entry[{index}]:{entry.path}:end")


def merges_step(target: ApplyTarget, staged: StagedApply, options: ApplyOptions) -> None:
    """Merge the delta's table changes by key (DuckDB) in the staging folder. Idempotent."""
    if staged.already_applied or staged.committed:
        return
    con = merge.connect()
    try:
        with Stage.open(target, staged, options) as stage, stage.phase("merges"):
            changes = [(i, e) for i, e in enumerate(stage.entries[:-2]) if e.op == "change"]
            for merged, (index, entry) in enumerate(changes, start=1):
                progress.report("merging tables", merged, len(changes), "tables")
                faults.checkpoint(f"entry[{index}]:{entry.path}:begin")
                stage.change(entry, con)
                faults.checkpoint(f"entry[{index}]:{entry.path}:end")
    finally:
        con.close()


# --- step 4: publish ------------------------------------------------------------------------


def publish_step(target: ApplyTarget, staged: StagedApply, options: ApplyOptions) -> ApplyResult:
    """Under the history folder's lock: place CHECKSUMS.sha256 and manifest.json in staging,
    verify the staged snapshot, commit it, append the audit records, clean up.

    Raises what :func:`apply_delta` raises; before the commit point nothing was published and
    the staging folder is removed; after it, running the step again finishes the apply.
    """
    if staged.already_applied:
        return _already_applied(target, verify=False)
    with _lock(target, options, f"publishing {target.delta}"):
        return _publish_locked(target, staged, options)


def _publish_locked(target: ApplyTarget, staged: StagedApply, options: ApplyOptions) -> ApplyResult:
    if staged.already_applied:
        return _already_applied(target, verify=False)
    if not staged.committed:
        with Stage.open(target, staged, options) as stage:
            if _manifest_sha(target.final) == stage.plan["next_manifest_sha256"]:
                stage.discard()  # another apply published it first
                return _already_applied(target, verify=False)
            _seal_and_verify(stage)
            try:
                _check_audit_log(options.audit_log)  # now, not once the month is published
            except SkewtapeError:
                stage.discard()
                raise
            _commit(stage)
    journal = _committed_journal(target, staged)
    _finish(target, journal, options)
    return _result_of(target, journal)


def _seal_and_verify(stage: Stage) -> None:
    """Place the next CHECKSUMS.sha256 and manifest.json in staging, verify it all there, and
    (in place) check that the parent's carried files are still those verified."""
    with stage.phase("publish"):
        for entry in stage.entries[-2:]:
            stage.place(entry)
        stage.cache.save()
    faults.checkpoint("sealed")
    with stage.phase("verify_snapshot"):
        verified = verify_snapshot(
            stage.work,
            known_hashes=stage.known_hashes(),
            known_hashed_at_ns=stage.plan["hashed_at_ns"],
            table_columns={
                rel: tuple((name, kind) for name, kind in columns)
                for rel, columns in stage.plan["table_columns"].items()
            },
        )
    stage.journal.verified = {**verified.to_dict(), "snapshot": None}
    faults.checkpoint("verified")
    if stage.target.into is None:
        _check_parent_unchanged(stage)


def _check_parent_unchanged(stage: Stage) -> None:
    """In place, under the lock: the parent is still the parent, and each file carried into
    staging is still the very file (inode) the staged verification checked."""
    snapshot, plan = stage.snapshot, stage.plan
    if _manifest_sha(snapshot) != plan["parent_manifest_sha256"]:
        raise SnapshotMismatchError(
            f"{snapshot} no longer holds the parent {plan['parent_bundle_id']}: it changed "
            "during the apply; nothing was applied"
        )
    written = {entry.path for entry in stage.entries}
    changed = [
        f"{rel}: changed in {snapshot} during the apply; nothing was applied"
        for rel in plan["parent_files"]
        if rel not in written and not same_file(snapshot, stage.work, rel)
    ]
    if changed:
        raise VerificationError(snapshot, changed)


def _commit(stage: Stage) -> None:
    """The commit point: from here on a rerun finishes the apply (see :func:`_finish`)."""
    stage.journal.committed = True
    if stage.target.into is None:
        stage.cache.save()
        stage.journal.save()  # the staging copy, for the record
        stage.journal.path = journal_path(stage.snapshot)
        stage.refuse_rewritten_placements()
        stage.journal.save()
        faults.checkpoint("committed")
        return
    stage.journal.save()
    stage.cache.save()
    faults.checkpoint("before-rename")
    stage.refuse_rewritten_placements()
    os.rename(stage.work, stage.target.into)
    fsio.fsync_dir(stage.target.into.parent)
    stage.journal.path = journal_path(stage.target.into)
    faults.checkpoint("committed")


def _committed_journal(target: ApplyTarget, staged: StagedApply) -> Journal:
    journal = Journal.find(target.final, None)
    if journal is None or journal.run_id != staged.run_id or not journal.committed:
        raise LocalStateError(
            f"{target.final}: holds no committed apply {staged.run_id}; run the apply again"
        )
    return journal


def _finish(target: ApplyTarget, journal: Journal, options: ApplyOptions) -> None:
    """Everything after the commit point; idempotent, so a rerun after a crash finishes it."""
    if journal.finished:
        return
    started = time.perf_counter()
    final = target.final
    cache = HashCache(hash_cache_path(final))
    if target.into is None:
        work = staging_folder(target, journal.run_id)
        if work.is_dir():
            cache.adopt(HashCache(hash_cache_path(work)))
            _move_staged_files(target, journal, work, cache)
        fsio.remove_stale_temps(final)
    for folder in staging_folders(final):
        remove_staging(folder, final, cache)
    cache.save()
    _flush_audit(journal, target, options.audit_log)
    journal.add_seconds("publish", time.perf_counter() - started)
    journal.finished = True
    journal.save()  # the last write of the apply
    faults.checkpoint("finished")


def _move_staged_files(target: ApplyTarget, journal: Journal, work: Path, cache: HashCache) -> None:
    """In place: move each staged file of the delta's entries over the snapshot's, in manifest
    order (so CHECKSUMS.sha256 then manifest.json last), and the merged-table record before the
    seal. Each move is an atomic rename; one done by an interrupted run is skipped."""
    snapshot = target.snapshot
    entries = [DeltaFileEntry(*fields) for fields in journal.plan["files"]]
    for index, entry in enumerate(entries):
        if index == len(entries) - 2:
            _carry_merged_records(work, snapshot)
        rel, staged, dest = entry.path, work / entry.path, snapshot / entry.path
        if entry.op == "delete":
            if fsio.atomic_unlink(dest):
                prune_empty_folders(dest.parent, stop=snapshot)
            cache.forget(rel)
        elif staged.is_file() and not staged.is_symlink():
            was = FileStamp.of(staged)
            dest.parent.mkdir(parents=True, exist_ok=True)
            os.replace(staged, dest)
            fsio.fsync_dir(dest.parent)
            cache.restamp(rel, dest, was=was)
        faults.checkpoint(f"commit:{rel}")
    faults.checkpoint("manifest-in-place")


def _carry_merged_records(work: Path, snapshot: Path) -> None:
    """Make the snapshot's merged-table records those of the staged snapshot (none: none)."""
    staged = merged_tables_path(work)
    if staged.is_file():
        fsio.atomic_write_bytes(merged_tables_path(snapshot), staged.read_bytes())
    else:
        fsio.atomic_unlink(merged_tables_path(snapshot))


# --- step 5: what was applied -------------------------------------------------------------


def applied_step(target: ApplyTarget, staged: StagedApply) -> tuple[ApplyResult, VerifyResult]:
    """What the apply ``staged`` did and the verification of the snapshot it published, from
    the journal (nothing is hashed again). For a month already applied, its verification now.

    Raises :class:`VerificationError` when the target does not hold the next snapshot.
    """
    if staged.already_applied:
        verified = verify_snapshot(target.final)
        return _already_applied(target, verify=False), verified
    journal = _committed_journal(target, staged)
    expected = journal.plan["next_manifest_sha256"]
    if not journal.finished or _manifest_sha(target.final) != expected:
        raise VerificationError(
            target.final, [f"{MANIFEST}: is not the next snapshot's (sha256 {expected})"]
        )
    recorded = dict(journal.verified or {})
    recorded["snapshot"] = target.final
    return _result_of(target, journal), VerifyResult(**recorded)


# --- results and audit ------------------------------------------------------------------------


def _already_applied(target: ApplyTarget, *, verify: bool = True) -> ApplyResult:
    """The result of an apply with nothing to do; the snapshot is verified first."""
    started = time.perf_counter()
    if verify:
        verify_snapshot(target.final, save_cache=False)
    head = read_delta_head(target.delta)
    result = ApplyResult(
        parent_bundle_id=head.manifest.parent.bundle_id,
        next_bundle_id=head.manifest.next.bundle_id,
        mode=target.mode,
        snapshot=target.final,
        already_applied=True,
    )
    result.seconds["verify_snapshot"] = time.perf_counter() - started
    return result


def _result_of(target: ApplyTarget, journal: Journal) -> ApplyResult:
    plan, counters = journal.plan, journal.counters
    result = ApplyResult(
        parent_bundle_id=plan["parent_bundle_id"],
        next_bundle_id=plan["next_bundle_id"],
        mode=target.mode,
        snapshot=target.final,
        already_applied=False,
        bytes_read=counters.get("bytes_read", 0),
        bytes_written=counters.get("bytes_written", 0),
        files_linked=counters.get("files_linked", 0),
        files_cloned=counters.get("files_cloned", 0),
    )
    result.seconds.update(counters.get("seconds", {}))
    lists = {"add": result.files_added, "replace": result.files_replaced,
             "delete": result.files_deleted}  # fmt: skip
    for rel, *_ in plan["files"]:
        started = journal.started.get(rel)
        if started is None:
            continue
        if started.op in lists:
            lists[started.op].append(rel)
        else:
            result.rows_upserted[rel] = started.rows_upserted
            result.rows_deleted[rel] = started.rows_deleted
    return result


def _audit_records(journal: Journal, target: ApplyTarget) -> list[dict[str, Any]]:
    merged = merged_tables(target.final)
    try:
        actor = getpass.getuser()
    except (KeyError, OSError):
        actor = f"uid {os.getuid()}"
    records = []
    for rel, _op, _source, sha256 in journal.plan["files"]:
        started = journal.started.get(rel)
        if started is None:
            continue
        after = merged.get(rel) if started.op == "change" else sha256
        records.append(
            {
                "event": AUDIT_EVENT,
                "actor": actor,
                "apply_id": journal.run_id,
                "delta": str(target.delta.absolute()),
                "delta_manifest_sha256": journal.delta_manifest_sha256,
                "next_bundle_id": journal.plan["next_bundle_id"],
                "snapshot": str(target.final.absolute()),
                "path": rel,
                "op": started.op,
                "sha256_before": started.sha256_before,
                "sha256_after": after,
                "rows_upserted": started.rows_upserted,
                "rows_deleted": started.rows_deleted,
            }
        )
    return records


def _check_audit_log(audit_log: Path | None) -> None:
    """Refuse an audit log that could not take the apply's records (see
    :meth:`AuditLog.check_appendable`); nothing to check without one."""
    if audit_log is not None:
        AuditLog(Path(audit_log)).check_appendable()


def _flush_audit(journal: Journal, target: ApplyTarget, audit_log: Path | None) -> None:
    """Append the journal's changes to the audit log once (skipping any already there)."""
    if journal.audited:
        return
    if audit_log is not None:
        records = _audit_records(journal, target)
        logged = _logged_paths(Path(audit_log), journal.run_id)
        faults.checkpoint("before-audit")
        AuditLog(Path(audit_log)).append([r for r in records if r["path"] not in logged])
        faults.checkpoint("audited")
    journal.audited = True
    journal.save()


def _logged_paths(audit_log: Path, run_id: str) -> set[str]:
    """Paths the audit log already holds for the apply ``run_id`` (a crash after appending)."""
    if not audit_log.exists():
        return set()
    logged: set[str] = set()
    needle = run_id.encode()
    with open(audit_log, "rb") as handle:
        for line in handle:
            if needle not in line:
                continue
            try:
                record = fsio.load_json(line, audit_log)
            except MalformedJsonError:  # not a record of ours (a torn or hostile line)
                continue
            if isinstance(record, dict) and record.get("apply_id") == run_id:
                logged.add(str(record.get("path")))
    return logged

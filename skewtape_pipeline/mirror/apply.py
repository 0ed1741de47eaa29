"""Apply a Skewtape delta to a local snapshot: verified first, crash-safe, resumable, audited.

Two modes:

- in place (``into=None``): ``snapshot`` itself becomes the next snapshot, exactly as the
  published procedure does it (each file replaced atomically, CHECKSUMS.sha256 then
  manifest.json last, so a folder whose manifest is still the parent's is a delta not yet fully
  applied and rerunning finishes it);
- versioned (``into=DIR``): the next snapshot is built in a staging folder
  ``DIR.parent/.<DIR.name>.partial`` whose unchanged files are hard links to the parent's,
  verified there, then published by one atomic rename to ``DIR``. The parent is never modified;
  ``DIR`` either does not exist or holds the whole, verified next snapshot.

Every check of the delta runs before anything is written (see
:mod:`skewtape_pipeline.mirror.preflight`). A journal in the folder being written
(:mod:`skewtape_pipeline.mirror.journal`) makes every step idempotent, so a crash at any point is
finished by running the same call again, and each change is logged to the audit log once.
"""

from __future__ import annotations

import contextlib
import errno
import getpass
import os
import shutil
import time
import uuid
from collections.abc import Iterator, Sequence
from dataclasses import asdict, astuple, dataclass, field, replace
from pathlib import Path
from typing import Any

import duckdb

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.audit import AuditLog
from skewtape_pipeline.errors import (
    ApplyInProgressError,
    ConfigError,
    MalformedJsonError,
    SnapshotMismatchError,
    UnsafePathError,
    VerificationError,
)
from skewtape_pipeline.hashing import FileStamp, HashCache, sha256_file
from skewtape_pipeline.mirror import merge
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    LOCAL_STATE_DIR,
    MANIFEST,
    TABLE_KEYS,
    DeltaFileEntry,
)
from skewtape_pipeline.mirror.journal import Journal, Started
from skewtape_pipeline.mirror.preflight import (
    CheckedDelta,
    DeltaHead,
    check_change_files,
    check_delta_files,
    read_delta_head,
    refuse_symlinked_components,
)
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.verify import (
    hash_cache_path,
    merged_tables,
    record_merged_table,
    verify_snapshot,
)

LOCK_FILE = ".skewtape-apply.lock"
"""The apply lock, in the folder that holds the snapshot being written (the history folder)."""
PHASES = ("verify_delta", "file_ops", "merges", "publish", "verify_snapshot")
STEPS = ("verify_delta", "file_ops", "merges")
"""Where ``apply_delta(stop_after=...)`` may stop; the rest (publish, verify) ends an apply."""
AUDIT_EVENT = "apply"


@dataclass
class ApplyResult:
    """What one :func:`apply_delta` did. Lists and counts cover the whole apply, including the
    part a crashed earlier run did (they come from the journal); bytes and seconds cover this run.
    """

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
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(PHASES, 0.0))
    stopped_after: str | None = None
    """The step this call stopped after (``stop_after``); None when the apply is complete."""

    def to_dict(self) -> dict[str, Any]:
        """A JSON-able dict of the result (for reports and orchestration metadata)."""
        data = asdict(self)
        data["snapshot"] = str(self.snapshot)
        return data


def combine_steps(steps: Sequence[ApplyResult]) -> ApplyResult:
    """One result for an apply run as several calls (``stop_after``): the last call's lists
    (which cover the whole apply), with bytes, links and seconds per phase summed over calls."""
    last = steps[-1]
    seconds = {phase: sum(step.seconds.get(phase, 0.0) for step in steps) for phase in PHASES}
    return replace(
        last,
        bytes_read=sum(step.bytes_read for step in steps),
        bytes_written=sum(step.bytes_written for step in steps),
        files_linked=sum(step.files_linked for step in steps),
        seconds=seconds,
    )


class _Clock:
    def __init__(self, seconds: dict[str, float]):
        self.seconds = seconds

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.seconds[name] += time.perf_counter() - started


# --- public entry points ----------------------------------------------------------------------


def apply_delta(
    snapshot: Path,
    delta: Path,
    *,
    into: Path | None = None,
    audit_log: Path | None = None,
    lock_timeout: float = 0.0,
    link_sources: bool = True,
    prechecked: CheckedDelta | None = None,
    stop_after: str | None = None,
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
    audit_log
        Append one record per changed file to this audit log.
    lock_timeout
        Seconds to wait for another apply in the same history folder to finish.
    link_sources
        Hard-link the delta's whole files into the snapshot instead of copying them (falls back
        to a copy across file systems). The delta's files then become read-only.
    prechecked
        The result of :func:`check_delta` for this delta: its hashes are reused for files
        whose (inode, size, mtime) stamp is unchanged; everything else is checked again.
    stop_after
        Stop after this step (one of :data:`STEPS`: ``file_ops`` applies the add, replace and
        delete entries, ``merges`` also the table changes); a later call without it finishes.
        The steps are journaled, so a pipeline can run them as separate tasks.

    Returns
    -------
    ApplyResult
        What was done, with timings per phase.

    Idempotent and resumable: applying a delta already applied does nothing (the snapshot is
    verified); a run interrupted at any point is finished by running the same call again.

    Raises
    ------
    MissingPathError
        ``snapshot`` or ``delta`` is not an existing folder; nothing is created.
    LinkedStateFileError
        ``audit_log``, the lock file or a local state file is a symbolic link; nothing written.
    DeltaRefusedError
        (ManifestError, UnsafePathError, ChecksumMismatchError, ChangeFileError) the delta is
        refused; nothing was written.
    SnapshotMismatchError
        The snapshot holds neither the delta's parent nor its next snapshot; nothing written.
    ApplyInProgressError
        Another apply holds the lock of this history folder beyond ``lock_timeout``.
    VerificationError
        The result does not verify (a parent file modified locally, ...). In versioned mode
        ``into`` is then absent and the staging folder removed; in place, the snapshot holds
        the next manifest and the error lists what differs.
    """
    snapshot = fsio.require_folder(snapshot, "a snapshot folder")
    delta = fsio.require_folder(delta, "a delta folder")
    fsio.refuse_linked_state(audit_log)
    into = Path(into) if into is not None else None
    with fsio.exclusive_lock(
        lock_file_for(into if into is not None else snapshot),
        timeout=lock_timeout,
        what=f"applying {delta}",
        held_error=ApplyInProgressError,
    ):
        return apply_locked(
            snapshot,
            delta,
            into=into,
            audit_log=audit_log,
            link_sources=link_sources,
            prechecked=prechecked,
            stop_after=stop_after,
        )


def check_delta(
    snapshot: Path, delta: Path, *, into: Path | None = None, lock_timeout: float = 0.0
) -> CheckedDelta | None:
    """Run every check :func:`apply_delta` runs before writing, and write nothing.

    Returns the checked delta (pass it to ``apply_delta(prechecked=...)`` to skip rehashing
    unchanged files), or None when the target already holds the next snapshot. Raises the same
    refusals as :func:`apply_delta`.
    """
    snapshot = fsio.require_folder(snapshot, "a snapshot folder")
    delta = fsio.require_folder(delta, "a delta folder")
    into = Path(into) if into is not None else None
    with fsio.exclusive_lock(
        lock_file_for(into if into is not None else snapshot),
        timeout=lock_timeout,
        what=f"checking {delta}",
        held_error=ApplyInProgressError,
    ):
        _check_into(snapshot, into)
        head = read_delta_head(delta)
        if _next_already_in_place(snapshot, into, head):
            return None
        con = merge.connect()
        try:
            checked, _ = _preflight(head, snapshot, into, con)
        finally:
            con.close()
        return checked


def lock_file_for(target: Path) -> Path:
    """The apply lock guarding ``target``: in the real folder that holds it (the history
    folder, every symlink resolved, so that an alias of ``target`` takes the same lock)."""
    return Path(target).resolve().parent / LOCK_FILE


def staging_folder(into: Path) -> Path:
    """Where a versioned apply builds ``into`` before renaming it into place."""
    return into.parent / f".{into.name}.partial"


def _check_into(snapshot: Path, into: Path | None) -> None:
    if into is None:
        return
    resolved, parent = into.resolve(), snapshot.resolve()
    if resolved == parent or resolved.is_relative_to(parent) or parent.is_relative_to(resolved):
        raise ConfigError(
            f"into={into} overlaps the snapshot {snapshot}; expected a new folder beside it"
        )
    if into.name.startswith("."):
        raise ConfigError(f"into={into}: a snapshot folder name may not start with '.'")


# --- the apply, under the lock ----------------------------------------------------------------


def apply_locked(
    snapshot: Path,
    delta: Path,
    *,
    into: Path | None = None,
    audit_log: Path | None = None,
    link_sources: bool = True,
    prechecked: CheckedDelta | None = None,
    stop_after: str | None = None,
) -> ApplyResult:
    """:func:`apply_delta` for a caller that already holds the history folder's apply lock."""
    if stop_after is not None and stop_after not in STEPS:
        raise ConfigError(f"stop_after is {stop_after!r}; expected one of {', '.join(STEPS)}")
    _check_into(snapshot, into)
    faults.checkpoint("locked")
    target = into if into is not None else snapshot
    result_seconds = dict.fromkeys(PHASES, 0.0)
    clock = _Clock(result_seconds)
    with clock.phase("verify_delta"):
        head = read_delta_head(delta)
        done = _next_already_in_place(snapshot, into, head)
    result = ApplyResult(
        parent_bundle_id=head.manifest.parent.bundle_id,
        next_bundle_id=head.manifest.next.bundle_id,
        mode="in_place" if into is None else "versioned",
        snapshot=target,
        already_applied=done,
        seconds=result_seconds,
    )
    if done:
        with clock.phase("publish"):
            _flush_audit(Journal.load(target, head.manifest_sha256), head, target, audit_log)
        with clock.phase("verify_snapshot"):
            verify_snapshot(target, save_cache=False)
        return result
    con = merge.connect()
    try:
        with clock.phase("verify_delta"):
            checked, parent_files = _preflight(head, snapshot, into, con, trusted=prechecked)
        faults.checkpoint("preflight")
        if stop_after == "verify_delta":
            result.stopped_after = stop_after
            return result
        run = _Run(
            checked,
            snapshot,
            into,
            con,
            result,
            clock,
            link_sources=link_sources,
            hash_before=audit_log is not None,
        )
        run.execute(parent_files, include_changes=stop_after != "file_ops")
        if stop_after is not None:
            run.pause()
            result.stopped_after = stop_after
            return result
        run.publish(audit_log)
    finally:
        con.close()
    return result


def _preflight(
    head: DeltaHead,
    snapshot: Path,
    into: Path | None,
    con: duckdb.DuckDBPyConnection,
    *,
    trusted: CheckedDelta | None = None,
) -> tuple[CheckedDelta, list[str]]:
    """Every check before a write: delta files, change files, the snapshot side."""
    checked = check_delta_files(head, trusted=trusted)
    check_change_files(checked, con, base_root=snapshot)
    return checked, _check_snapshot_side(snapshot, into, checked)


def _manifest_sha(folder: Path) -> str | None:
    path = folder / MANIFEST
    if path.is_symlink() or not path.is_file():
        return None
    return sha256_file(path)


def _next_already_in_place(snapshot: Path, into: Path | None, head: DeltaHead) -> bool:
    """True when the target already holds the next snapshot; False when the parent is there to
    apply to. Raises :class:`SnapshotMismatchError` naming both bundles otherwise."""
    parent, nxt = head.manifest.parent, head.manifest.next
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


def _check_snapshot_side(snapshot: Path, into: Path | None, checked: CheckedDelta) -> list[str]:
    """Refuse links on written paths; in versioned mode return the parent's files to carry."""
    manifest_path = checked.head.folder / MANIFEST
    if into is None:
        refuse_symlinked_components(
            snapshot, LOCAL_STATE_DIR, source=snapshot, field_name=LOCAL_STATE_DIR
        )
        for index, entry in enumerate(checked.manifest.files):
            refuse_symlinked_components(
                snapshot, entry.path, source=manifest_path, field_name=f"files[{index}].path"
            )
            _refuse_non_file(snapshot / entry.path, manifest_path, f"files[{index}].path")
        return []
    parent_manifest, _, _ = read_snapshot(snapshot)
    files = [entry.path for entry in parent_manifest.by_path().values()] + [CHECKSUMS, MANIFEST]
    missing = []
    for rel in files:
        refuse_symlinked_components(snapshot, rel, source=snapshot, field_name=rel)
        if not (snapshot / rel).is_file():
            missing.append(f"{rel}: is missing; the parent's manifest lists it")
    if missing:
        raise VerificationError(snapshot, missing)
    merged_tables(snapshot)  # a damaged record raises LocalStateError before any write
    return files


def _refuse_non_file(path: Path, source: Path, field_name: str) -> None:
    if path.exists() and not path.is_file():
        raise UnsafePathError(
            f"{path} exists and is not a regular file; refusing to replace it",
            path=source,
            field=field_name,
        )


# --- one apply --------------------------------------------------------------------------------


class _Run:
    """The writing part of one apply: populate (versioned), file ops, merges, publish."""

    def __init__(
        self,
        checked: CheckedDelta,
        snapshot: Path,
        into: Path | None,
        con: duckdb.DuckDBPyConnection,
        result: ApplyResult,
        clock: _Clock,
        *,
        link_sources: bool,
        hash_before: bool,
    ):
        self.checked, self.snapshot, self.into = checked, snapshot, into
        self.delta = checked.head.folder
        self.work = staging_folder(into) if into is not None else snapshot
        self.con, self.result, self.clock = con, result, clock
        self.link_sources = link_sources
        self.hash_before = hash_before
        """Hash a file about to be replaced or deleted when no cache vouches (for the audit)."""
        self.known: dict[str, str] = {}
        self.cache: HashCache
        self.journal: Journal

    # -- setting up

    def execute(self, parent_files: list[str], *, include_changes: bool = True) -> None:
        """Prepare the folder being written, journal the plan, apply all entries but the tail.

        ``include_changes=False`` skips the table merges (a later call does them).
        """
        with self.clock.phase("file_ops"):
            self._open_work_folder()
            if self.into is not None:
                self._populate(parent_files)
            self._journal_plan()
        for index, entry in enumerate(self.checked.manifest.files[:-2]):
            if entry.op == "change" and not include_changes:
                continue
            phase = "merges" if entry.op == "change" else "file_ops"
            with self.clock.phase(phase):
                faults.checkpoint(f"entry[{index}]:{entry.path}:begin")
                self._apply_entry(entry)
                faults.checkpoint(f"entry[{index}]:{entry.path}:end")

    def _open_work_folder(self) -> None:
        delta_sha = self.checked.head.manifest_sha256
        if self.into is not None:
            if self.work.exists() and Journal.find(self.work, delta_sha) is None:
                _remove_tree(self.work)  # a staging folder of another delta, or never started
            self.work.mkdir(parents=True, exist_ok=True)
        fsio.remove_stale_temps(self.work)
        self.cache = HashCache(hash_cache_path(self.work))
        self.journal = Journal.load(self.work, delta_sha)
        if self.journal.audited:  # a finished apply of this delta: this is a new one
            self.journal = Journal(path=self.journal.path, delta_manifest_sha256=delta_sha)
        if not self.journal.run_id:
            self.journal.run_id = uuid.uuid4().hex
            self.journal.save()

    def _populate(self, parent_files: list[str]) -> None:
        """Hard-link every file of the parent into the staging folder (copy across devices).

        The staging folder is private until its final rename, so links are made directly and
        each folder is fsynced once at the end rather than once per file.
        """
        if self.journal.populated:
            return
        parent_cache = HashCache(hash_cache_path(self.snapshot))
        folders = {self.work}
        for rel in parent_files:
            source, target = self.snapshot / rel, self.work / rel
            faults.checkpoint(f"populate:{rel}")
            if not (target.is_file() and os.path.samefile(source, target)):
                self._link_private(source, target)
            folders.add(target.parent)
            digest = parent_cache.lookup(rel, source)
            if digest is not None and FileStamp.of(target) == FileStamp.of(source):
                self.cache.record(rel, target, digest)
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            fsio.fsync_dir(folder)
        for rel, digest in merged_tables(self.snapshot).items():
            if rel in parent_files:
                record_merged_table(self.work, rel, digest)
        self.cache.save()
        faults.checkpoint("populated")
        self.journal.populated = True
        self.journal.save()

    def _link_private(self, source: Path, target: Path) -> None:
        """Hard-link ``source`` at ``target`` in the private staging folder (or copy it)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        try:
            os.link(source, target)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
            self._link(source, target, size=source.stat().st_size, allow_link=False)
        else:
            self.result.files_linked += 1

    def _link(self, source: Path, target: Path, *, size: int, allow_link: bool = True) -> bool:
        linked = fsio.atomic_link_or_copy(source, target, allow_link=allow_link)
        if linked:
            self.result.files_linked += 1
        else:
            self.result.bytes_written += size
            self.result.bytes_read += size
        return linked

    # -- the plan

    def _journal_plan(self) -> None:
        """Record, in one durable journal write, every entry that will change a file.

        An entry already journaled by an interrupted run keeps its record (its "before" is the
        state before that run); an entry whose work is already done is not journaled.
        """
        planned = {}
        for entry in self.checked.manifest.files:
            rel = entry.path
            if rel in self.journal.started:
                continue
            target = self.work / rel
            if entry.op == "change":
                stats = self.checked.change_stats[rel]
                planned[rel] = Started(
                    "change",
                    self._sha_of(rel, hash_if_needed=self.hash_before),
                    rows_upserted=stats.upserts,
                    rows_deleted=stats.deletes,
                    stamp_before=list(astuple(FileStamp.of(target))),
                )
            elif entry.op == "delete" and target.is_file():
                planned[rel] = Started("delete", self._sha_of(rel, hash_if_needed=self.hash_before))
            elif entry.op in ("add", "replace") and not self._holds(entry):
                planned[rel] = Started(entry.op, self._sha_of(rel, hash_if_needed=self.hash_before))
        if planned:
            self.journal.started.update(planned)
            self.journal.save()
            faults.checkpoint("journaled")

    # -- the entries

    def _apply_entry(self, entry: DeltaFileEntry) -> None:
        if entry.op in ("add", "replace"):
            self._place(entry)
        elif entry.op == "delete":
            self._delete(entry)
        else:
            self._change(entry)

    def _sha_of(self, rel: str, *, hash_if_needed: bool = True) -> str | None:
        """sha256 of ``rel`` in the work folder: None when absent (or unknown and not hashed)."""
        path = self.work / rel
        if not path.is_file():
            return None
        cached = self.cache.lookup(rel, path)
        if cached is not None or not hash_if_needed:
            return cached
        before, started_ns = FileStamp.of(path), time.time_ns()
        digest = sha256_file(path)
        self.result.bytes_read += before.size
        if FileStamp.of(path) == before:
            self.cache.record(rel, path, digest, hashed_at_ns=started_ns)
        return digest

    def _holds(self, entry: DeltaFileEntry) -> bool:
        """True when the work folder's ``entry.path`` already has the source's bytes."""
        assert entry.source is not None
        source_stamp = self.checked.stamps[entry.source]
        target = self.work / entry.path
        if not target.is_file():
            return False
        stamp = FileStamp.of(target)
        if stamp == source_stamp:  # a hard link to the very file hashed in preflight
            return True
        if stamp.size != source_stamp.size:
            return False
        return self._sha_of(entry.path) == entry.sha256

    def _place(self, entry: DeltaFileEntry) -> None:
        """add/replace: hard-link (or copy) the delta's file over the target, atomically."""
        assert entry.source is not None and entry.sha256 is not None
        rel, source = entry.path, self.delta / entry.source
        source_stamp = self.checked.stamps[entry.source]
        if self._holds(entry):
            if rel in self.journal.started:
                self._trust(rel, entry.sha256, source_stamp)
            return
        target = self.work / rel
        linked = self._link(source, target, size=source_stamp.size, allow_link=self.link_sources)
        fsio.make_read_only(target)
        # Trust the hash taken in preflight only while the bytes provably are those hashed.
        if linked:
            self._trust(rel, entry.sha256, source_stamp)
        elif FileStamp.of(source) == source_stamp:
            self.cache.record(rel, target, entry.sha256, hashed_at_ns=self.checked.hashed_at_ns)
            self.known[rel] = entry.sha256

    def _trust(self, rel: str, digest: str, expected: FileStamp) -> None:
        target = self.work / rel
        if FileStamp.of(target) == expected:
            self.cache.record(rel, target, digest, hashed_at_ns=self.checked.hashed_at_ns)
            self.known[rel] = digest

    def _delete(self, entry: DeltaFileEntry) -> None:
        """delete: remove the target (and folders it leaves empty)."""
        target = self.work / entry.path
        if not target.is_file():
            return
        fsio.atomic_unlink(target)
        self.cache.forget(entry.path)
        _prune_empty_folders(target.parent, stop=self.work)

    def _change(self, entry: DeltaFileEntry) -> None:
        """change: merge the change file's rows into the table (one DuckDB query)."""
        assert entry.source is not None
        rel, target = entry.path, self.work / entry.path
        started = self.journal.started[rel]
        if list(astuple(FileStamp.of(target))) != started.stamp_before:
            # Renamed into place by an interrupted run: a merge writes a new inode.
            self._record_merge(rel, self._sha_of(rel))
            return
        changes = self.delta / entry.source
        self.result.bytes_read += target.stat().st_size + changes.stat().st_size
        merge.merge_table(
            self.con,
            target,
            changes,
            TABLE_KEYS[rel],
            columns=self.checked.column_order.get(rel),
            checkpoint_name=rel,
        )
        fsio.make_read_only(target)
        self._record_merge(rel, self._sha_of(rel))
        self.result.bytes_written += target.stat().st_size

    def _record_merge(self, rel: str, digest: str | None) -> None:
        assert digest is not None
        if merged_tables(self.work).get(rel) != digest:
            record_merged_table(self.work, rel, digest)
        self.known[rel] = digest

    def pause(self) -> None:
        """Save what this call verified, for the call that continues the apply."""
        self.cache.save()

    # -- publishing

    def publish(self, audit_log: Path | None) -> None:
        """Copy CHECKSUMS.sha256 then manifest.json, verify, and (versioned) rename into place."""
        checksums_entry, manifest_entry = self.checked.manifest.files[-2:]
        with self.clock.phase("publish"):
            self._place(checksums_entry)
            self.cache.save()
            faults.checkpoint("before-manifest")
            self._place(manifest_entry)
            self.cache.save()
            faults.checkpoint("manifest-in-place")
            if self.into is None:
                _flush_audit(self.journal, self.checked.head, self.work, audit_log)
        with self.clock.phase("verify_snapshot"):
            self._verify()
        if self.into is not None:
            with self.clock.phase("publish"):
                faults.checkpoint("before-rename")
                os.rename(self.work, self.into)
                fsio.fsync_dir(self.into.parent)
                faults.checkpoint("renamed")
                self.journal.path = self.into / self.journal.path.relative_to(self.work)
                _flush_audit(self.journal, self.checked.head, self.into, audit_log)
        _fill_result(self.result, self.journal, self.checked.manifest.files)

    def _verify(self) -> None:
        try:
            verify_snapshot(
                self.work,
                known_hashes=self.known,
                known_hashed_at_ns=self.checked.hashed_at_ns,
                table_columns=self.checked.table_columns,
            )
        except VerificationError:
            if self.into is not None:
                _remove_tree(self.work)  # DIR stays absent; a rerun starts from the parent
            raise
        faults.checkpoint("verified")


# --- results and audit ------------------------------------------------------------------------


def _fill_result(result: ApplyResult, journal: Journal, files: tuple[DeltaFileEntry, ...]) -> None:
    lists = {"add": result.files_added, "replace": result.files_replaced,
             "delete": result.files_deleted}  # fmt: skip
    for entry in files:
        started = journal.started.get(entry.path)
        if started is None:
            continue
        if started.op in lists:
            lists[started.op].append(entry.path)
        else:
            result.rows_upserted[entry.path] = started.rows_upserted
            result.rows_deleted[entry.path] = started.rows_deleted


def _audit_records(journal: Journal, head: DeltaHead, target: Path) -> list[dict[str, Any]]:
    merged = merged_tables(target)
    try:
        actor = getpass.getuser()
    except (KeyError, OSError):
        actor = f"uid {os.getuid()}"
    records = []
    for entry in head.manifest.files:
        started = journal.started.get(entry.path)
        if started is None:
            continue
        after = merged.get(entry.path) if started.op == "change" else entry.sha256
        records.append(
            {
                "event": AUDIT_EVENT,
                "actor": actor,
                "apply_id": journal.run_id,
                "delta": str(head.folder.absolute()),
                "delta_manifest_sha256": head.manifest_sha256,
                "next_bundle_id": head.manifest.next.bundle_id,
                "snapshot": str(target.absolute()),
                "path": entry.path,
                "op": started.op,
                "sha256_before": started.sha256_before,
                "sha256_after": after,
                "rows_upserted": started.rows_upserted,
                "rows_deleted": started.rows_deleted,
            }
        )
    return records


def _flush_audit(journal: Journal, head: DeltaHead, target: Path, audit_log: Path | None) -> None:
    """Append the journal's changes to the audit log once (skipping any already there)."""
    if journal.audited or not journal.run_id:
        return
    if audit_log is not None:
        records = _audit_records(journal, head, target)
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


# --- small helpers ----------------------------------------------------------------------------


def _prune_empty_folders(folder: Path, *, stop: Path) -> None:
    """Remove ``folder`` and its parents while empty, up to (not including) ``stop``."""
    while folder != stop and stop in folder.parents:
        try:
            folder.rmdir()
        except OSError:
            return
        fsio.fsync_dir(folder.parent)
        folder = folder.parent


def _remove_tree(folder: Path) -> None:
    """Remove a staging folder of ours (hard links only: the parent's files are untouched)."""
    shutil.rmtree(folder)
    fsio.fsync_dir(folder.parent)

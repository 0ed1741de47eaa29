"""An apply's staging folder: where the next snapshot is built before its commit (in place:
``snapshot/.skewtape/staging/<run>/``; versioned: ``DIR.parent/.<DIR.name>.<run>.partial``).

:class:`Stage` is one apply's staging folder with its journal and hash cache, for the steps
before the commit (:mod:`~skewtape_pipeline.mirror.apply`'s file operations and merges, and the
seal and verification its publication runs): the parent's unchanged files hard-linked in, the
delta's whole files linked or copied (hashed as they are copied), each file checked again as it
is used, tables merged. A refused or failed stage is removed; a rerun starts again.

This module does not import dagster.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import time
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import (
    ChecksumMismatchError,
    DeltaRefusedError,
    LocalStateError,
    SnapshotMismatchError,
    UnsafePathError,
    VerificationError,
    quoted_path,
)
from skewtape_pipeline.hashing import FileStamp, HashCache, copy_hashing, sha256_file
from skewtape_pipeline.mirror import merge
from skewtape_pipeline.mirror.format import (
    LOCAL_STATE_DIR,
    MANIFEST,
    TABLE_KEYS,
    DeltaFileEntry,
)
from skewtape_pipeline.mirror.journal import Journal, Started
from skewtape_pipeline.mirror.snapshot import list_folder
from skewtape_pipeline.mirror.verify import (
    hash_cache_path,
    merged_tables,
    record_merged_table,
)

if TYPE_CHECKING:
    from skewtape_pipeline.mirror.apply import ApplyOptions, ApplyTarget, StagedApply


STAGING_DIR = "staging"
"""In place: the staging folders live in ``snapshot/.skewtape/staging/``."""


def staging_folder(target: ApplyTarget, run_id: str) -> Path:
    """Where the apply ``run_id`` builds the next snapshot before committing it."""
    if target.into is not None:
        return target.into.parent / f".{target.into.name}.{run_id}.partial"
    return target.snapshot / LOCAL_STATE_DIR / STAGING_DIR / run_id


def staging_folders(final: Path) -> list[Path]:
    """Every staging folder of an apply whose next snapshot is ``final`` that exists now."""
    final = Path(final)
    versioned = final.parent.glob(f".{final.name}.*.partial")
    in_place = (final / LOCAL_STATE_DIR / STAGING_DIR).glob("*")
    return sorted(folder for folder in [*versioned, *in_place] if folder.is_dir())


class Stage:
    """One apply's staging folder, its journal and hash cache (for the steps before commit)."""

    def __init__(self, target: ApplyTarget, journal: Journal, options: ApplyOptions):
        self.target, self.journal, self.options = target, journal, options
        self.work = staging_folder(target, journal.run_id)
        self.plan = journal.plan
        self.entries = [DeltaFileEntry(*fields) for fields in self.plan["files"]]
        self.cache = HashCache(hash_cache_path(self.work))
        self.discarded = False
        self.parent_cache: HashCache | None = None

    @classmethod
    @contextlib.contextmanager
    def open(cls, target: ApplyTarget, staged: StagedApply, options: ApplyOptions):
        """The stage of ``staged``; on a refusal or a full disk it is removed (a rerun starts
        again; no hidden staging folder is left holding space), and on the way out its journal
        and cache are saved."""
        assert staged.run_id is not None
        work = staging_folder(target, staged.run_id)
        journal = Journal.find(work, None)
        if journal is None or journal.run_id != staged.run_id:
            raise LocalStateError(
                f"{work}: the staging folder of apply {staged.run_id} is gone or damaged "
                "(another apply of the same snapshot finished first?); run the apply again"
            )
        stage = cls(target, journal, options)
        try:
            yield stage
            if not (stage.journal.committed or stage.discarded):
                stage.cache.save()
                stage.journal.save()
        except (DeltaRefusedError, VerificationError, SnapshotMismatchError):
            stage.discard()
            raise
        except OSError as exc:
            if fsio.is_disk_full(exc) and not (stage.journal.committed or stage.discarded):
                with contextlib.suppress(OSError):  # what it can: the first error is the one
                    stage.discard()
            raise

    def discard(self) -> None:
        """Remove the staging folder (a refused apply; a rerun starts again). In place, the
        parent's cached hashes are re-stamped across the unlinking of their staged links."""
        self.discarded = True
        if self.target.into is not None:
            remove_staging(self.work, None, None)
            return
        parent_cache = HashCache(hash_cache_path(self.snapshot))
        carried = [rel for rel in self.carried() if same_file(self.work, self.snapshot, rel)]
        parent_cache.adopt(self.cache, only=carried)  # stamped after the links were made
        remove_staging(self.work, self.snapshot, parent_cache)
        with contextlib.suppress(OSError):
            parent_cache.save()

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        try:
            yield
        finally:
            self.journal.add_seconds(name, time.perf_counter() - started)

    @property
    def snapshot(self) -> Path:
        return self.target.snapshot

    @property
    def delta(self) -> Path:
        return self.target.delta

    def checked_stamp(self, source: str) -> FileStamp:
        stamp = FileStamp.from_list(self.plan["stamps"][source])
        assert stamp is not None
        return stamp

    # -- the parent's files

    def carried(self) -> list[str]:
        """The parent's files the next snapshot takes as they are: every one no entry names."""
        touched = {entry.path for entry in self.entries}
        return [rel for rel in self.plan["parent_files"] if rel not in touched]

    def populate(self) -> None:
        """Hard-link each carried file of the parent into the staging folder (copy across
        devices); files the delta replaces, deletes or changes are not linked at all.

        A link moves the shared inode's ctime, so a hash the parent's cache vouched for just
        before linking is re-stamped right after. The staging folder is private until its
        commit, so each folder is fsynced once at the end rather than once per file.
        """
        if self.journal.populated:
            return
        parent_cache = HashCache(hash_cache_path(self.snapshot))
        folders, carried = {self.work}, self.carried()
        for rel in carried:
            source, target = self.snapshot / rel, self.work / rel
            faults.checkpoint(f"populate:{rel}")
            vouched = parent_cache.lookup_dated(rel, source) or self._checked_hash(rel, source)
            if not (target.is_file() and os.path.samefile(source, target)):
                copied = self._link_private(source, target)
                if copied is not None:
                    vouched = (copied, time.time_ns())
            folders.add(target.parent)
            if vouched is not None:
                self.cache.record(rel, target, vouched[0], hashed_at_ns=vouched[1])
        for folder in sorted(folders, key=lambda f: len(f.parts), reverse=True):
            fsio.fsync_dir(folder)
        for rel, digest in merged_tables(self.snapshot).items():
            if rel in carried:
                record_merged_table(self.work, rel, digest)
        self.cache.save()
        faults.checkpoint("populated")
        self.journal.populated = True
        self.journal.save()

    def _checked_hash(self, rel: str, source: Path) -> tuple[str, int] | None:
        """The sha256 the check computed of the parent's ``rel`` and when, while ``source``
        keeps the stamp it had then (None otherwise: the staged verification hashes it)."""
        found = self.plan.get("parent_hashes", {}).get(rel)
        if found is None or FileStamp.from_list(found[1:-1]) != FileStamp.of(source):
            return None
        return found[0], found[-1]

    def _link_private(self, source: Path, target: Path) -> str | None:
        """Hard-link ``source`` at ``target`` in the private staging folder, directly (its
        folders are fsynced once, at the end); across devices copy it, returning the sha256 of
        the bytes copied (None when linked)."""
        target.parent.mkdir(parents=True, exist_ok=True)
        target.unlink(missing_ok=True)
        if fsio.try_link(source, target):
            self.journal.count("files_linked", 1)
            return None
        copied: list[str] = []
        fsio.atomic_write_with(target, lambda temp: copied.append(copy_hashing(source, temp)))
        self._count_copied(target)
        return copied[0]

    # -- the plan

    def journal_plan(self) -> None:
        """Record, in one durable journal write, every entry that will change a file.

        An entry already journaled by an interrupted step keeps its record; an entry whose work
        is already done is not journaled.
        """
        planned = {}
        hash_before = self.options.audit_log is not None
        stats = self.plan["change_stats"]
        for entry in self.entries:
            rel = entry.path
            if rel in self.journal.started:
                continue
            before = self._parent_sha(rel, hash_if_needed=hash_before)
            if entry.op == "change":
                upserts, deletes = stats[rel]
                planned[rel] = Started("change", before, upserts, deletes)
            elif entry.op == "delete" and (self.snapshot / rel).is_file():
                planned[rel] = Started("delete", before)
            elif entry.op in ("add", "replace") and not self.placed(entry):
                planned[rel] = Started(entry.op, before)
        if planned:
            self.journal.started.update(planned)
            self.journal.save()
            faults.checkpoint("journaled")

    def _parent_sha(self, rel: str, *, hash_if_needed: bool) -> str | None:
        """sha256 of the parent's ``rel``: None when absent (or unknown and not hashed)."""
        path = self.snapshot / rel
        if not path.is_file():
            return None
        if self.parent_cache is None:
            self.parent_cache = HashCache(hash_cache_path(self.snapshot))
        cached = self.parent_cache.lookup(rel, path)
        if cached is not None or not hash_if_needed:
            return cached
        before = FileStamp.of(path)
        digest = sha256_file(path)
        self.journal.count("bytes_read", before.size)
        if FileStamp.of(path) != before:
            return None  # written to while hashed: no "before" worth recording
        return digest

    # -- the entries

    def placed(self, entry: DeltaFileEntry) -> bool:
        """True when this apply already put the source's bytes at ``entry.path``."""
        found = self.journal.written.get(entry.path)
        return found is not None and found[0] == entry.sha256 and self.still_written(entry.path)

    def still_written(self, rel: str) -> bool:
        """True while ``rel`` holds the bytes this apply wrote there (its stamp unchanged)."""
        found = self.journal.written.get(rel)
        path = self.work / rel
        if found is None or not path.is_file():
            return False
        return FileStamp.of(path) == FileStamp.from_list(found[1:])

    def _note_written(self, rel: str, digest: str, *, hashed_at_ns: int) -> None:
        path = self.work / rel
        self.journal.written[rel] = [digest, *FileStamp.of(path).to_list()]
        self.cache.record(rel, path, digest, hashed_at_ns=hashed_at_ns)

    def _recheck_source(self, entry: DeltaFileEntry, source: Path) -> FileStamp:
        """The source changed since the check (its stamp moved): hash it again; refuse it unless
        it still holds the bytes the manifest names. Returns its stamp as hashed."""
        if source.is_symlink() or not source.is_file():
            raise UnsafePathError(
                f"the source {quoted_path(entry.source)} of {quoted_path(entry.path)} is no "
                "longer a regular file",
                path=self.delta / MANIFEST,
                field=entry.path,
            )
        before = FileStamp.of(source)
        digest = sha256_file(source)
        self.journal.count("bytes_read", before.size)
        if digest != entry.sha256 or FileStamp.of(source) != before:
            raise ChecksumMismatchError(
                f"the source {quoted_path(entry.source)} of {quoted_path(entry.path)} changed "
                "after it was "
                f"checked: it now hashes to {digest}; the manifest names {entry.sha256}",
                path=self.delta / MANIFEST,
                field=entry.path,
            )
        return before

    def place(self, entry: DeltaFileEntry) -> None:
        """add/replace: clone, link or copy the delta's file over the target in staging,
        atomically (see :meth:`_share`; with ``link_sources`` off a copy, hashing the bytes
        written); refuse a source that changed since it was checked."""
        assert entry.source is not None and entry.sha256 is not None
        if self.placed(entry):
            return
        rel, source, target = entry.path, self.delta / entry.source, self.work / entry.path
        if self.options.link_sources:
            digest, hashed_at = self._share(entry, source, target)
        else:
            hashed_at, copied = time.time_ns(), []
            fsio.atomic_write_with(target, lambda temp: copied.append(copy_hashing(source, temp)))
            digest = copied[0]
            self._count_copied(target)
        if digest != entry.sha256:
            fsio.atomic_unlink(target)
            raise ChecksumMismatchError(
                f"the source {quoted_path(entry.source)} of {quoted_path(entry.path)} changed "
                "after it was "
                f"checked: the bytes copied hash to {digest}; the manifest names {entry.sha256}",
                path=self.delta / MANIFEST,
                field=rel,
            )
        fsio.make_read_only(target)
        self._note_written(rel, digest, hashed_at_ns=hashed_at)

    def _share(self, entry: DeltaFileEntry, source: Path, target: Path) -> tuple[str, int]:
        """Clone the checked ``source`` at ``target`` (its own inode: a later rewrite of the
        delta's file cannot reach it), else, for a versioned apply, hard-link it (the delta's
        inode, re-checked before the commit), else copy it. In place the file never shares
        the delta's inode: the month being advanced is the one readers use, and a link would
        let a rewrite of the delta's file after the commit change it. Returns the sha256
        ``target`` holds and when it was taken: the checked one, unless the file was copied or
        ``source`` was written to while it was cloned (its stamp moved), when ``target`` is
        hashed."""
        verified = FileStamp.from_stat(source.lstat())
        if verified != self.checked_stamp(entry.source):
            verified = self._recheck_source(entry, source)
        link = self.target.into is not None
        how = fsio.atomic_clone_link_or_copy(source, target, link=link)
        if how == fsio.LINKED:
            self.journal.count("files_linked", 1)
        elif how == fsio.CLONED and FileStamp.from_stat(source.lstat()) == verified:
            self.journal.count("files_cloned", 1)
        else:
            hashed_at = time.time_ns()
            digest = sha256_file(target)
            self._count_copied(target)
            return digest, hashed_at
        return entry.sha256, self.plan["hashed_at_ns"]

    def _count_copied(self, target: Path) -> None:
        size = target.stat().st_size
        self.journal.count("bytes_read", size)
        self.journal.count("bytes_written", size)

    def refuse_rewritten_placements(self) -> None:
        """The last act before the commit: every file this apply placed or merged in staging
        still holds the bytes verified. One whose stamp (ctime included) moved since it was
        placed is hashed again, and refused unless it holds the bytes recorded: a hard-linked
        file is the delta's own inode, so a delta file rewritten in place after the
        verification (size and mtime restored) is caught here, nothing published; another
        link to that inode (two entries with one source) only moves the ctime."""
        sources = {entry.path: entry.source for entry in self.entries}
        for rel, (digest, *_) in self.journal.written.items():
            if self.still_written(rel):
                continue
            path = self.work / rel
            found = sha256_file(path) if path.is_file() and not path.is_symlink() else None
            if found != digest:
                raise ChecksumMismatchError(
                    f"{quoted_path(rel)} (from the delta's {quoted_path(sources.get(rel))}) "
                    "changed after it "
                    f"was verified: it now hashes to {found}, not {digest}; nothing was applied "
                    "(rerun once the delta's files are whole)",
                    path=self.delta / MANIFEST,
                    field=rel,
                )

    def delete(self, entry: DeltaFileEntry) -> None:
        """delete: remove the target in staging (and folders it leaves empty)."""
        target = self.work / entry.path
        if not target.is_file():
            return
        fsio.atomic_unlink(target)
        self.cache.forget(entry.path)
        prune_empty_folders(target.parent, stop=self.work)

    def change(self, entry: DeltaFileEntry, con: duckdb.DuckDBPyConnection) -> None:
        """change: merge the change file's rows into the parent's table, writing the result in
        staging (one DuckDB query); the change file must be the one checked, and neither it
        nor the parent's table may change while the merge reads them."""
        assert entry.source is not None
        rel, base, target = entry.path, self.snapshot / entry.path, self.work / entry.path
        if self.still_written(rel):
            return  # merged by an interrupted step
        changes = self.delta / entry.source
        checked = FileStamp.from_stat(changes.lstat())
        if checked != self.checked_stamp(entry.source):
            checked = self._recheck_source(entry, changes)
        base_before = FileStamp.of(base)
        self.journal.count("bytes_read", base_before.size + checked.size)
        merge.merge_table(
            con,
            base,
            changes,
            TABLE_KEYS[rel],
            out=target,
            columns=self.plan["column_order"].get(rel),
            checkpoint_name=rel,
        )
        if FileStamp.from_stat(changes.lstat()) != checked:
            raise ChecksumMismatchError(
                f"the source {quoted_path(entry.source)} of {quoted_path(rel)} changed while it "
                "was merged",
                path=self.delta / MANIFEST,
                field=rel,
            )
        if FileStamp.of(base) != base_before:
            raise VerificationError(
                self.snapshot, [f"{rel}: changed while it was merged; nothing was applied"]
            )
        fsio.make_read_only(target)
        self._record_merge(rel)
        self.journal.count("bytes_written", target.stat().st_size)

    def _record_merge(self, rel: str) -> None:
        """Hash the merged table as written (nobody else writes the staging folder) and record
        it as ours, so verification accepts its bytes."""
        path = self.work / rel
        before, started_ns = FileStamp.of(path), time.time_ns()
        digest = sha256_file(path)
        self.journal.count("bytes_read", before.size)
        if FileStamp.of(path) != before:
            raise LocalStateError(f"{path}: was written to while it was hashed")
        if merged_tables(self.work).get(rel) != digest:
            record_merged_table(self.work, rel, digest)
        self._note_written(rel, digest, hashed_at_ns=started_ns)

    def known_hashes(self) -> dict[str, str]:
        """{path: sha256} of the files this apply wrote and still holds as written."""
        return {rel: found[0] for rel, found in self.journal.written.items()
                if self.still_written(rel)}  # fmt: skip


def remove_staging(folder: Path, final: Path | None, cache: HashCache | None) -> None:
    """Remove a staging folder (hard links mostly: files elsewhere are untouched). Unlinking a
    link moves the shared inode's ctime, so entries ``cache`` holds for ``final``'s files are
    re-stamped across it."""
    if not folder.is_dir():
        return
    if final is not None and cache is not None:
        for rel in list_folder(folder).files:
            if same_file(folder, final, rel):
                was = FileStamp.of(final / rel)
                (folder / rel).unlink()
                cache.restamp(rel, final / rel, was=was)
    shutil.rmtree(folder)
    fsio.fsync_dir(folder.parent)


def same_file(one: Path, other: Path, rel: str) -> bool:
    """True when ``rel`` is the same regular file (inode) below both folders."""
    a, b = one / rel, other / rel
    return a.is_file() and b.is_file() and os.path.samefile(a, b)


def prune_empty_folders(folder: Path, *, stop: Path) -> None:
    """Remove ``folder`` and its parents while empty, up to (not including) ``stop``."""
    fsio.prune_empty_folders(folder, within=lambda f: f != stop and stop in f.parents)

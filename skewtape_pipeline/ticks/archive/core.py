"""The archive as one object: its root, its resolved tiers, its catalog, its books (write-once
mode and audit log), its version log, its garbage collector (each built once), its one lock.

:class:`ArchiveCore` is what every operation (``ops/``) is handed: built once by the front door
(``handle.Archive``), it holds the archive's address and options, so no operation takes the
root as a path, resolves a policy again or takes the lock another way. It imports ``store/``
only.
"""

from __future__ import annotations

import copy
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from pathlib import Path

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import ArchiveBusyError, ConfigError, TickFormatError, checked_flag
from skewtape_pipeline.locations import refuse_url
from skewtape_pipeline.ticks.archive.store.books import Books, default_audit_log
from skewtape_pipeline.ticks.archive.store.catalog import Catalog, CatalogStore
from skewtape_pipeline.ticks.archive.store.garbage import GarbageCollector
from skewtape_pipeline.ticks.archive.store.layout import (
    ARCHIVE_LOCK_FILE,
    ARCHIVE_MARKER,
    ARCHIVE_ROOT_EXPECTED,
    check_archive_root,
)
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.policy_change import pending_record
from skewtape_pipeline.ticks.archive.store.tiers import (
    ArchiveTiers,
    PolicyRecordWatch,
    check_apart_from_other_archives,
)
from skewtape_pipeline.ticks.archive.store.trust import checked_catalog
from skewtape_pipeline.ticks.archive.store.versions import VersionLog


class _Beside:
    """The type of :data:`BESIDE` (an object no path or string equals)."""

    def __repr__(self) -> str:
        return "BESIDE"


BESIDE = _Beside()
"""``audit_log``'s default: ``audit.jsonl`` beside the archive root (a sentinel, so no path
given, not even one named ``beside``, is taken for it)."""


def archive_lock(lock_file: Path, *, timeout: float, what: str) -> AbstractContextManager[None]:
    """The archive's one exclusive lock, ``lock_file`` (``<root>/.skewtape-archive.lock``:
    ``layout.ARCHIVE_LOCK_FILE``): every writer that publishes, moves or removes archive files,
    the catalog or versions holds it through :meth:`ArchiveCore.locked` (compacting, re-tiering,
    pruning, withdrawing, removing, rebuilding the catalog, recording a version, pruning
    versions), so none of them sees another's half-done work.

    Raises ArchiveBusyError naming the holder (pid, host, ``what`` it is doing) when another
    writer holds it for more than ``timeout`` seconds.
    """
    return fsio.exclusive_lock(lock_file, timeout=timeout, what=what, held_error=ArchiveBusyError)


class ArchiveCore:
    """The tick archive at ``root`` (its hot tier) with its options, validated once (the
    options are :class:`~skewtape_pipeline.ticks.archive.handle.Archive`'s).

    Raises ConfigError when built for a path that is a file or no path (None, a number: for
    ``root`` or ``audit_log``), a ``books_and_records`` that is not a bool, a policy that is
    not a TierPolicy or that changes the recorded one where that is not safe
    (``store.policy_change``: a tier holding files moved, a new endpoint lacking them), tier
    roots that nest, a ``lock_timeout`` that is negative, not finite or not a number. The root
    may not exist yet: a first compaction
    creates it; a root holding no archive yet that is, or lies inside, another archive's root or
    tier root is refused (NotAnArchiveError: ``tiers.check_apart_from_other_archives``).
    """

    def __init__(
        self,
        root: Path | str,
        *,
        policy: TierPolicy | None = None,
        audit_log: Path | str | _Beside | None = BESIDE,
        lock_timeout: float = 0.0,
        books_and_records: bool = False,
    ):
        fsio.checked_path(root, "root", "a tick archive root")  # None: no folder named None
        self.root = Path(refuse_url(root, "archive root", ARCHIVE_ROOT_EXPECTED))
        if self.root.exists() and not self.root.is_dir():
            raise ConfigError(f"{self.root}: not a folder; expected a tick archive root")
        if not fsio.resolved(self.root).name:
            raise ConfigError(
                f"{self.root}: the file system's root; expected a folder of the archive's own "
                "(its warm and cold tiers go beside it), such as /srv/archive"
            )
        if not (self.root / ARCHIVE_MARKER).exists():  # a new archive
            check_apart_from_other_archives(self.root)
        if policy is not None and not isinstance(policy, TierPolicy):
            raise ConfigError(f"policy = {policy!r}: expected a TierPolicy")
        self._policy_watch = PolicyRecordWatch(self.root)
        """The policy record as opened: checked unchanged under the lock (:meth:`locked`)."""
        recorded = self._policy_watch.recorded
        self.catalog = CatalogStore(self.root)
        """The archive's catalog and hot file records (``store.catalog.CatalogStore``)."""
        self.tiers: ArchiveTiers = ArchiveTiers.of(self.root, policy or recorded)
        """The tier policy resolved for this archive, once: its warm and cold stores, each
        tier's writer settings and layout, its catalog paths."""
        self._record = pending_record(self.tiers, policy, recorded)
        """The policy given, to record by the first write that succeeds (:meth:`writing`): to an
        archive that records none, or in place of a record it safely changes; None once
        written, or when there is none."""
        self._audit_given = audit_log is not BESIDE
        """An ``audit_log`` given: a writer refuses it in a folder that does not exist."""
        if audit_log is BESIDE:
            audit_log = default_audit_log(self.root)
        elif audit_log is not None:
            audit_log = fsio.checked_path(audit_log, "audit_log", "a file")
        self.audit_log: Path | None = None if audit_log is None else Path(audit_log)
        self.books = Books(self.root, self.audit_log)
        """The archive's write-once mode and audit log (``books.Books``): every check and audit
        record of an operation goes through it."""
        self.versions = VersionLog(self.root, self.books, self.catalog)
        """The archive's version log (``versions.VersionLog``): every version recorded, read
        or tagged goes through it (its writers under :meth:`locked`)."""
        self.garbage = GarbageCollector(self.tiers, self.books, self.catalog, self.versions)
        """The files leaving the archive (``garbage.GarbageCollector`` over :attr:`tiers`):
        every removal, audited, and what interrupted runs left (its writers under
        :meth:`locked`)."""
        self.lock_timeout = fsio.checked_lock_timeout(lock_timeout)
        self.books_and_records = checked_flag(books_and_records, "books_and_records")

    def __repr__(self) -> str:
        return f"ArchiveCore({str(self.root)!r}, audit_log={self.audit_log!r})"

    @contextmanager
    def locked(self, what: str, *, finish: bool = True) -> Iterator[None]:
        """The archive's one lock (:func:`archive_lock`), waited for up to
        ``lock_timeout`` seconds; ``what`` names the holder's work in a refusal
        (ArchiveBusyError). Once it is held, a policy record another writer replaced since this
        archive was opened is refused (ConfigError: ``PolicyRecordWatch.check_unchanged``), and a
        hot file's publication a killed compaction left between its rename and its audit record is
        finished (:meth:`_finish_publication`), unless ``finish`` is False (a holder that writes
        nothing: ``verify-archive``)."""
        with archive_lock(self.root / ARCHIVE_LOCK_FILE, timeout=self.lock_timeout, what=what):
            self._policy_watch.check_unchanged(self.tiers.record)
            if finish:
                self._finish_publication()
            yield

    def _finish_publication(self) -> None:
        """Append the record and the audit record of a hot file a killed compaction renamed
        into place (``CatalogStore.finish_publication``; the audit record to this archive's
        audit log, none when it has none, nor when the log ends with it: the compaction was
        killed after auditing it), then empty the note of it. While the hot index does
        not read, the note is left for a holder after its repair (``rebuild-catalog`` records
        the file)."""
        publication = self.catalog.publication()
        if publication is not None:
            try:
                published = self.catalog.finish_publication(publication)
            except TickFormatError:
                return
            if published:
                self.books.audit([publication.audit], once=True)
        self.catalog.end_publication()

    def checked_catalog(self) -> Catalog:
        """The committed catalog, once it accounts for every consolidated file on disk: what
        every writer reads before removing or rewriting anything (``trust.checked_catalog``;
        raises CatalogMismatchError naming the files and the repair)."""
        return checked_catalog(self.tiers)

    def waiting(self, seconds: float) -> ArchiveCore:
        """This archive with its writers waiting up to ``seconds`` for the lock instead.
        ConfigError for seconds that are negative or not a number."""
        other = copy.copy(self)
        other.lock_timeout = fsio.checked_lock_timeout(seconds)
        return other

    @contextmanager
    def writing(self, *, creates: bool = False, doing: str = "") -> Iterator[ArchiveCore]:
        """Around every write (a full disk under it stopped at once, ``fsio.stop_when_disk_full``,
        when ``doing`` names the write, as a compaction and a re-tiering do): unless it ``creates``
        the archive (a compaction), a root that holds no archive refused first (NotAnArchiveError:
        ``layout.check_archive_root``; one that holds only the archive's bookkeeping passes), so a
        mistyped root is never made into an empty archive; a policy to record checked first, its S3
        tiers answering (ObjectStoreError naming the tier and its root otherwise, before anything is
        written); the audit log checked to take records (``Books.check_appendable``), so no write is
        refused at its first record; ``books_and_records`` mode turned on first when asked
        (idempotent; audited), so the write is refused what that mode refuses; once the write
        succeeded, the policy given is recorded, first or anew (a record replaced is audited; a
        refused write records nothing)."""
        with fsio.stop_when_disk_full(self.root, doing) if doing else nullcontext():
            if not creates:
                check_archive_root(self.root)
            if self._record is not None:
                self._record.check_usable()
            self.books.check_appendable(given=self._audit_given)
            if self.books_and_records:
                self.root.mkdir(parents=True, exist_ok=True)
                self.books.enable(reason="Archive(books_and_records=True)")
            yield self
            if self._record is not None and self.root.is_dir():
                self._record.write(self.books)
                self._record = None

"""Every archive file checked against the record made when it was written.

Each file of the archive has a record of its size and sha256, made when it was written: a
consolidated file's in the catalog (``CatalogFile``), a hot file's in the hot file records
(``CatalogStore.hot_records``); a hot file whose rows re-tiering moved also has its source stamp
(``SourceStamp``), which serves as its record when the hot file records predate it.

- :func:`hot_record` finds a hot file's record; :func:`record_problems` reads a file whole and
  says how it differs from its record (``verify-archive``, the scrub, reads every file).
- :class:`VerifiedSources` reads the symbol-days a re-tiering rewrite moves, each file read
  whole and checked against its record first.
- :func:`verify_before_reading` (through :class:`VerifiedFiles`) gives readers (``query`` and
  the ``ticks`` view) the mirror's trust model (``hashing.HashCache``, as git's index): a file
  whose stamp (size, inode, mtime, ctime; for an object its size, Last-Modified and ETag:
  ``storage.stamp_of``) has not changed since it was last verified against its record is
  trusted after one ``stat`` (or HEAD request); any other file is read whole and compared with
  its record before the query reads it. What was verified is kept in
  ``<archive root>/.skewtape-verified.json`` (best effort: on read-only media every query
  verifies again). What this cannot see: bytes that change without moving the stamp (bit rot
  on the medium; a writer that restores the mtime cannot restore the ctime without setting the
  clock back), and a file rewritten between its check and DuckDB's read of it; the scheduled
  ``verify-archive``, which ignores the cache, finds the first.

The writers' catalog check, :func:`checked_catalog`, is what every writer (compaction,
re-tiering, pruning, withdrawal and removal) reads the catalog through: it refuses, with
:class:`~skewtape_pipeline.errors.CatalogMismatchError` naming the files, while the catalog is
missing but consolidated files exist, is unreadable, lists a file that is not on disk, or does
not account for a consolidated file on disk. A file the catalog does not list is accounted for
when it was committed and later replaced (its generation is not above the catalog's), or was
written by an interrupted run (the next generation) and holds only symbol-days the archive still
holds elsewhere. Anything else could be the only copy of some ticks, so nothing is removed or
rewritten until the catalog is repaired (``rebuild-catalog``: :func:`repair_hint`).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from datetime import date
from functools import partial
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline import fsio
from skewtape_pipeline.arrow_memory import owned_buffer, owned_reader
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    DamagedFileError,
    SkewtapeError,
    TickFormatError,
)
from skewtape_pipeline.hashing import FileStamp, HashCache, sha256_bytes
from skewtape_pipeline.storage import TierFile, sha256_of, size_of, stamps_of
from skewtape_pipeline.ticks.archive.store.catalog import (
    CATALOG_FILE,
    Catalog,
    CatalogPartition,
    CatalogStore,
    FileRecord,
    FileRows,
    Publication,
    SourceStamp,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import (
    META_CATALOG_GENERATION,
    META_PERIOD,
    META_SYMBOL_DAYS_COUNT,
    META_SYMBOL_DAYS_SHA256,
    META_TIER,
    PartSource,
    read_footer,
    read_symbol_day,
    read_symbol_days,
    symbol_days_digest,
)
from skewtape_pipeline.ticks.archive.store.placement import (
    ArchiveState,
    HotFile,
    hot_rel,
    scan_hot_files,
)
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.parquet_file import (
    CONSOLIDATED,
    META_LAYOUT,
    read_archive_batch,
)

VERIFIED_CACHE = ".skewtape-verified.json"
"""The archive root's cache of files verified against their records (a dot file: globs skip it)."""
WRITTEN_BY_COMPACTION = "the compaction that wrote it"
"""Who recorded a hot file's size and sha256 (in messages: "... recorded <value>")."""


def unrecorded_hint(archive_root: Path) -> str:
    """What to do about a hot file without a record (written before hot files were recorded)."""
    return (
        "it was written before hot files were recorded; check the archive, then record its "
        f"hot files as they are with `skewtape-pipeline rebuild-catalog {archive_root}`, or "
        "compact the symbol-day again"
    )


def hot_record(
    hot: HotFile, catalog: Catalog, records: dict[str, FileRecord], rel: str
) -> FileRecord | None:
    """The record of ``hot`` (its path ``rel``): its latest hot file record, else the catalog's
    source stamp when re-tiering read exactly this file; None when neither exists."""
    found = hot.record if hot.record is not None else records.get(rel)
    if found is not None:
        return found
    entry = catalog.partitions.get(hot.key)
    source = None if entry is None else entry.source
    if source is not None and source.same_file(hot.stamp):
        return FileRecord(source.size, source.sha256)
    return None


def required_hot_record(
    root: Path,
    hot: HotFile,
    catalog: Catalog,
    records: dict[str, FileRecord],
    before: str,
    rel: str | None = None,
) -> FileRecord:
    """:func:`hot_record` of ``hot`` (``rel``: its ``placement.hot_rel``) in the archive at
    ``root``; CatalogMismatchError naming the file and the repair when it has none (it cannot
    be verified before ``before``)."""
    rel = hot_rel(root, hot) if rel is None else rel
    record = hot_record(hot, catalog, records, rel)
    if record is None:
        raise CatalogMismatchError(
            f"{hot.path}: no record of its size and sha256, so it cannot be verified before "
            f"{before}; {unrecorded_hint(root)}",
            paths=[hot.path],
        )
    return record


def current_stamp(root: Path, path: Path) -> FileStamp:
    """The stamp of the hot file ``path`` now (taken before it is read); CatalogMismatchError
    naming it and the repair when the hot index lists it but it is not on disk."""
    try:
        return FileStamp.of(path)
    except FileNotFoundError:
        raise CatalogMismatchError(
            f"{path}: the hot index lists it but it is not on disk (removed behind the "
            "archive's back); restore it from a copy, or compact its symbol-day again, or "
            f"record the hot files as they are with `skewtape-pipeline rebuild-catalog {root}` "
            "(its ticks are then gone from the archive)",
            paths=[path],
        ) from None


def record_problems(
    path: TierFile, record: FileRecord, whose: str, *, found: list[str] | None = None
) -> list[str]:
    """How ``path`` differs from ``record`` (``whose``: who recorded it, for the message):
    its size, else its sha256 (read whole); [] when it matches. The sha256 measured is
    appended to ``found`` when given."""
    size = size_of(path)
    if size != record.size:
        return [f"{path}: size is {size} bytes, {whose} recorded {record.size}"]
    digest = sha256_of(path)
    if found is not None:
        found.append(digest)
    if digest != record.sha256:
        return [f"{path}: sha256 is {digest}, {whose} recorded {record.sha256}"]
    return []


class VerifiedSources:
    """Reads the symbol-days a re-tiering rewrite moves from hot files and consolidated files,
    each verified first: a hot file read whole, its size and sha256 checked against the hot file
    records (read when this is built), then parsed from those bytes; a consolidated file's size
    and sha256 checked against ``catalog`` when the rewrite reaches it (again if it comes back
    after another file), then its footer and the rows of each symbol-day read. Keeps the sources
    read for the rewrite's audit record.

    Raises DamagedFileError (naming the file and the difference) for a file that differs from
    its record or whose pages fail their checksums, CatalogMismatchError for a hot file
    without a record, TickFormatError for a hot file that is no tick archive file."""

    def __init__(self, store: CatalogStore, catalog: Catalog):
        self.root, self.catalog = store.root, catalog
        self.stamps: dict[SymbolDayKey, SourceStamp | None] = {}
        """The stamp of each symbol-day's source once read: its hot file's (the bytes read),
        or its consolidated copy's entry's."""
        self._footers: dict[str, pq.FileMetaData] = {}
        self._rows = FileRows(catalog)
        self._read: dict[str, str] = {}  # catalog path: sha256 of every file read
        self._source: dict[SymbolDayKey, str] = {}  # symbol-day: the catalog path it came from
        self._records = store.hot_records()

    def part(
        self,
        key: SymbolDayKey,
        file: TierFile,
        rel: str,
        *,
        hot: HotFile | None = None,
        entry: CatalogPartition | None = None,
    ) -> PartSource:
        """The symbol-day ``key`` as a part to write (``consolidate.PartSource``), read from
        ``file`` (catalog path ``rel``): the hot file ``hot``, or ``entry``'s rows of a
        consolidated file. Its row count is known now (the hot file's footer, or the entry);
        its ticks are read, verified, when the writer reaches it (its stamp then kept in
        :attr:`stamps`)."""

        def read() -> TickBatch:
            self._source[key] = rel
            if hot is not None:
                batch, self.stamps[key] = self._read_hot(hot, rel)
                return batch
            assert entry is not None
            self.stamps[key] = entry.source
            return self._read_consolidated(file, rel, entry)

        if hot is not None:
            return PartSource(*key, read_footer(hot.path).num_rows, read)
        assert entry is not None
        return PartSource(*key, entry.rows, read)

    def sources_of(self, keys: Iterable[SymbolDayKey]) -> list[dict[str, str]]:
        """The files the symbol-days ``keys`` were read from, each catalog path with its
        sha256, sorted (for the audit record of the file they were written to)."""
        read = sorted({self._source[key] for key in keys})
        return [{"file": rel, "sha256": self._read[rel]} for rel in read]

    def _read_consolidated(self, file: TierFile, rel: str, entry: CatalogPartition) -> TickBatch:
        """The ticks of ``entry``'s symbol-day, from the consolidated ``file`` (catalog path
        ``rel``) once its size and sha256 are the catalog's; its rows alone are read."""
        footer = self._verified_consolidated(file, rel)
        try:
            return read_symbol_day(file, footer, entry.key, self._rows.of(entry))
        except OSError as exc:  # a page that fails its checksum
            raise DamagedFileError(
                f"a page fails its checksum or decoding ({exc}); restore the file from a copy",
                path=file,
            ) from None

    def _read_hot(self, hot: HotFile, rel: str) -> tuple[TickBatch, SourceStamp]:
        """The batch and the stamp (naming ``rel``, its catalog path) of exactly the bytes
        parsed (one open file descriptor), once they are known to be the bytes recorded when
        the file was written."""
        with open(hot.path, "rb") as handle:
            st = os.fstat(handle.fileno())
            data = handle.read()
        digest = sha256_bytes(data)
        self._check_record(hot, FileRecord(st.st_size, digest))
        buffer = owned_buffer(data)
        read_footer(hot.path, buffer)
        try:
            batch = read_archive_batch(owned_reader(buffer))  # type: ignore[arg-type]
        except (TickFormatError, pa.ArrowException) as exc:
            raise TickFormatError(
                f"{hot.path}: does not read as a tick archive file: {exc}"
            ) from None
        except OSError as exc:  # the bytes are in memory: a page that fails its checksum
            raise DamagedFileError(
                f"a page fails its checksum or decoding ({exc}); restore the file from a copy",
                path=hot.path,
            ) from None
        self._read[rel] = digest
        # The file as the hot index knows it (its bytes are the recorded ones, checked above):
        # what ``placement.classified`` compares the stamp with, in a copy of the archive too.
        stamp = hot.stamp
        return batch, SourceStamp(rel, digest, st.st_size, stamp.inode, stamp.mtime_ns)

    def _check_record(self, hot: HotFile, found: FileRecord) -> None:
        """Refuse a hot file whose bytes read differ from its record, or that has none."""
        before = "it is consolidated (nothing was committed)"
        record = required_hot_record(self.root, hot, self.catalog, self._records, before)
        if found != record:
            raise DamagedFileError(
                f"{found.size} bytes with sha256 {found.sha256}, {WRITTEN_BY_COMPACTION} recorded "
                f"{record.size} bytes with sha256 {record.sha256}; the file changed after it was "
                "written (restore it from a copy, or compact the symbol-day again, before "
                "re-tiering); nothing was committed",
                path=hot.path,
            )

    def _verified_consolidated(self, path: TierFile, rel: str) -> pq.FileMetaData:
        """The footer of the consolidated file ``path`` (catalog path ``rel``), once its size
        and sha256 are the catalog's (checked once; DamagedFileError naming the file and the
        difference, else)."""
        if rel not in self._footers:
            listed, found = self.catalog.files[rel], []
            record = FileRecord(listed.bytes, listed.sha256)
            problems = record_problems(path, record, "the catalog", found=found)
            if problems:
                difference = problems[0].removeprefix(f"{path}: ")
                raise DamagedFileError(
                    f"{difference}; the file changed after it was written (restore it from a "
                    "copy before re-tiering)",
                    path=path,
                )
            self._read[rel] = found[0]
            self._footers = {rel: read_footer(path)}  # files are read in turn
        return self._footers[rel]


def noted_publication(catalog: CatalogStore) -> Publication | None:
    """The publication a killed compaction's note describes (``CatalogStore.publication``),
    for a reader to accept its file by; None when there is none or the note is not one to go
    by (unreadable, or not a hot file's publication: writers refuse it, naming it)."""
    try:
        return catalog.publication()
    except (SkewtapeError, OSError):
        return None


class VerifiedFiles:
    """Files of one archive verified against their records, trusted while their stamp holds
    (see the module notes)."""

    def __init__(self, archive_root: Path):
        self.root = Path(archive_root)
        self._records: dict[str, FileRecord] | None = None
        self._cache = HashCache(self.root / VERIFIED_CACHE)
        self._changed = False

    @property
    def records(self) -> dict[str, FileRecord]:
        """The hot file records, read when first needed (``CatalogStore.hot_records``)."""
        if self._records is None:
            self._records = CatalogStore(self.root).hot_records()
        return self._records

    @records.setter
    def records(self, value: dict[str, FileRecord]) -> None:
        self._records = value

    def check_hot(self, hot: HotFile, catalog: Catalog) -> None:
        """Verify ``hot`` against its record unless its stamp is unchanged since it last was.

        Raises CatalogMismatchError when it has no record, DamagedFileError (naming it and
        both sha256) when it differs from its record, read again first (a compaction may have
        replaced the file and appended its record since they were read).
        """
        rel = hot_rel(self.root, hot)
        record = required_hot_record(self.root, hot, catalog, self.records, "it is read", rel)
        stamp = current_stamp(self.root, hot.path)
        try:
            self.check_published(rel, hot.path, stamp, record)
        except DamagedFileError:
            # a compaction may have just replaced it
            self.records = CatalogStore(self.root).hot_records()
            if self.records.get(rel, record) == record:
                raise
            stamp = current_stamp(self.root, hot.path)
            self.check(rel, hot.path, stamp, self.records[rel], WRITTEN_BY_COMPACTION)

    def check_published(
        self,
        rel: str,
        path: TierFile,
        stamp: FileStamp,
        record: FileRecord,
        whose: str = WRITTEN_BY_COMPACTION,
    ) -> None:
        """:meth:`check`, also accepting for a hot file the record of its publication a killed
        compaction left between the file's rename and its record (``CatalogStore.publication``;
        the next holder of the archive's lock appends it): the DamagedFileError of ``record``
        when ``path`` matches neither."""
        try:
            self.check(rel, path, stamp, record, whose)
        except DamagedFileError as differs:
            if whose != WRITTEN_BY_COMPACTION:  # not a hot file of the archive now
                raise
            publication = noted_publication(CatalogStore(self.root))
            if publication is None or publication.rel != rel or publication.record == record:
                raise
            try:
                self.check(rel, path, stamp, publication.record, WRITTEN_BY_COMPACTION)
            except DamagedFileError:
                raise differs from None

    def check(
        self, rel: str, path: TierFile, stamp: FileStamp, record: FileRecord, whose: str
    ) -> None:
        """Verify ``path`` (``rel`` in the archive, ``stamp`` taken before reading it) against
        ``record`` unless the cache vouches for exactly this stamp and sha256.

        Raises DamagedFileError naming the file when it differs from its record.
        """
        known = self._cache.lookup_stamped(rel, stamp)
        if known is not None and known[0] == record.sha256 and stamp.size == record.size:
            return
        started = time.time_ns()
        found: list[str] = []
        problems = record_problems(path, record, whose, found=found)
        if problems:
            raise DamagedFileError(
                f"{problems[0].removeprefix(f'{path}: ')}; it changed after it was written, "
                "so it is not read (run verify-archive; restore it from a copy, or compact a "
                "hot file's symbol-day again)",
                path=path,
            )
        self._cache.record_stamped(rel, stamp, found[0], hashed_at_ns=started)
        self._changed = True

    def save(self) -> None:
        """Write the cache when it changed; a failure (read-only archive) only costs hashing
        again next time."""
        if not self._changed:
            return
        try:
            self._cache.save()
        except OSError:
            return
        self._changed = False


def verify_before_reading(tiers: ArchiveTiers, state: ArchiveState) -> None:
    """Verify every file a reader of ``state`` reads (the live hot files, the catalogued
    consolidated files, found through the archive's resolved ``tiers``) whose stamp changed
    since it was last verified (see the module notes). A file not on disk is left to the
    reader's own check.

    Raises
    ------
    DamagedFileError
        A file's size or sha256 differs from its record (names it and both sha256).
    CatalogMismatchError
        A live hot file has no record (written before hot files were recorded).
    ObjectStoreError
        An object-store tier cannot be used (names the URI).
    """
    verified = VerifiedFiles(tiers.root)
    try:
        for hot in state.hot_live:
            verified.check_hot(hot, state.catalog)
        verify_consolidated(verified, tiers, state)
    finally:
        verified.save()


def verify_consolidated(
    verified: VerifiedFiles, tiers: ArchiveTiers, state: ArchiveState
) -> list[TierFile]:
    """Verify the consolidated files ``state``'s catalog lists against it (see
    :func:`verify_before_reading`); returns the files not on disk, left to the caller's own
    refusal."""
    items = sorted(state.catalog.files.values(), key=lambda f: f.path)
    paths = [tiers.resolve(item.path) for item in items]
    missing = []
    for item, path, stamp in zip(items, paths, stamps_of(paths), strict=True):
        if stamp is None:
            missing.append(path)
            continue
        verified.check(item.path, path, stamp, FileRecord(item.bytes, item.sha256), "the catalog")
    return missing


SETTLE_WAITS = (0.0, 0.005, 0.02, 0.05, 0.1, 0.25, 0.5)
"""Seconds waited before each look at the archive by one read while its files change under it
(about a second in all)."""
_Read = TypeVar("_Read")


class ChangedUnderRead(Exception):
    """A file a read planned changed or went under it (a compaction replacing a hot file, whose
    record follows the rename; a re-tiering or a prune removing a file): read again on a fresh
    look; ``error`` is the refusal if it persists."""

    def __init__(self, error: SkewtapeError):
        super().__init__(str(error))
        self.error = error


def settled(read_once: Callable[[], _Read]) -> _Read:
    """``read_once()``, done again on a fresh look at the archive while it raises
    :class:`ChangedUnderRead` (readers take no lock: a writer may replace a hot file, or a
    version's kept copy with a link to the same bytes, or remove a file), waiting a little
    longer each time; the refusal once a file still differs from its record, or is still
    missing, after about a second."""
    for wait in SETTLE_WAITS:
        if wait:
            time.sleep(wait)
        try:
            return read_once()
        except ChangedUnderRead as changed:
            last = changed
    raise last.error from None


# --- the writers' catalog check -------------------------------------------------------------------


def repair_hint(archive_root: Path) -> str:
    """How to repair a catalog: the rebuild command for this archive."""
    return (
        "rebuild the catalog from the files with "
        f"`skewtape-pipeline rebuild-catalog {archive_root}` (add --tier-policy if the archive "
        "has one)"
    )


@dataclass(frozen=True)
class RecordedSymbolDay:
    """One symbol-day as a consolidated file holds it (a run of its symbol and date columns)."""

    symbol: str
    day: date
    rows: int

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.day)


@dataclass(frozen=True)
class RecordedFile:
    """A consolidated file on disk, what its metadata says and the symbol-days it holds."""

    path: TierFile
    tier: str
    period: str
    generation: int
    rows: int
    symbol_days: tuple[RecordedSymbolDay, ...]


def read_recorded(path: TierFile, tier: str) -> RecordedFile:
    """What the consolidated file ``path`` (found under ``tier``'s root) records and holds.

    Reads the footer and the ``symbol`` and ``date`` columns only; the symbol-days those hold
    must match the metadata's ``skewtape.symbol_days_count`` and ``skewtape.symbol_days_sha256``.

    Raises
    ------
    DamagedFileError
        The footer does not decode.
    TickFormatError
        Not a consolidated tick file, metadata missing or malformed, written for another tier,
        or symbol-days that do not match the recorded digest (names the file and the key).
    """
    footer = read_footer(path)
    meta = {k.decode(): v.decode() for k, v in (footer.metadata or {}).items()}
    if meta.get(META_LAYOUT) != CONSOLIDATED:
        raise TickFormatError(f"{path}: not a consolidated tick file ({META_LAYOUT} missing)")
    try:
        generation = int(meta[META_CATALOG_GENERATION])
        count, digest = int(meta[META_SYMBOL_DAYS_COUNT]), meta[META_SYMBOL_DAYS_SHA256]
        tier_recorded, period = meta[META_TIER], meta[META_PERIOD]
    except (KeyError, ValueError) as exc:
        raise TickFormatError(f"{path}: metadata does not say what it holds ({exc!r})") from None
    if tier_recorded != tier:
        raise TickFormatError(
            f"{path}: metadata {META_TIER} is {tier_recorded}, but the file is in the {tier} root"
        )
    held = read_symbol_days(path, footer)
    found = symbol_days_digest(held)
    if (len(held), found) != (count, digest):
        raise TickFormatError(
            f"{path}: its symbol and date columns hold {len(held)} symbol-days (sha256 {found}), "
            f"its metadata {META_SYMBOL_DAYS_COUNT} and {META_SYMBOL_DAYS_SHA256} record "
            f"{count} ({digest}); the file was changed after it was written; restore it from a "
            "copy or move it away"
        )
    days = tuple(RecordedSymbolDay(symbol, day, rows) for symbol, day, rows in held)
    return RecordedFile(path, tier, period, generation, footer.num_rows, days)


def checked_catalog(tiers: ArchiveTiers) -> Catalog:
    """The catalog of the archive ``tiers`` resolves (``Archive.tiers``), once it is known to
    account for every consolidated file (see the module notes); what writers read before
    removing or rewriting anything. Reads only.

    Raises
    ------
    CatalogMismatchError
        The catalog is missing while consolidated files exist, unreadable, lists files that
        are not on disk, or does not account for files on disk; names them and the repair.
    """
    root, store = tiers.root, CatalogStore(tiers.root)
    where = store.path
    try:
        catalog, unreadable = store.read(), None
    except TickFormatError as exc:
        catalog, unreadable = Catalog(), exc
    listing = tiers.listing()
    if unreadable is not None:  # after the listing: a store that does not answer comes first
        raise CatalogMismatchError(
            f"{where}: the catalog is unreadable ({unreadable}); nothing was changed; "
            f"{repair_hint(root)}",
            paths=[where],
        )
    found = {rel: file for _, file, rel in listing}
    missing = [tiers.resolve(rel) for rel in catalog.files if rel not in found]  # none if absent
    on_disk = [(tier, file) for tier, file, _ in listing]
    if not where.exists():
        _refuse_missing(root, on_disk, "nothing was changed")
    if missing:
        raise CatalogMismatchError(
            f"{where}: the catalog lists {len(missing)} file(s) that are not on disk "
            f"({_names(missing)}); nothing was changed; restore them from a copy, or "
            f"{repair_hint(root)} (their symbol-days are then gone from the archive)",
            paths=missing,
        )
    listed = {found[rel] for rel in catalog.files}
    unaccounted = unaccounted_files(partial(hot_keys_of, root), catalog, on_disk, listed)
    if unaccounted:
        paths = [path for path, _ in unaccounted]
        reasons = "; ".join(f"{path}: {why}" for path, why in unaccounted[:5])
        raise CatalogMismatchError(
            f"{where}: the catalog (generation {catalog.generation}) does not account for "
            f"{len(paths)} consolidated file(s) on disk ({reasons}); nothing was changed; "
            f"{repair_hint(root)}",
            paths=paths,
        )
    return catalog


def check_catalog_present(tiers: ArchiveTiers) -> None:
    """Raise CatalogMismatchError when the catalog is missing but consolidated files exist
    that an empty catalog does not account for (a reader would otherwise answer without
    them); the files of a first re-tiering interrupted before its commit are fine. Reads only.
    """
    tiers.check_reachable()
    if CatalogStore(tiers.root).path.exists():
        return
    _refuse_missing(tiers.root, tiers.consolidated_files(), "the archive cannot be read without it")


def _refuse_missing(root: Path, on_disk: list[tuple[str, TierFile]], consequence: str) -> None:
    """Raise CatalogMismatchError unless an empty catalog accounts for every file on disk."""
    if not on_disk:
        return
    unaccounted = unaccounted_files(partial(hot_keys_of, root), Catalog(), on_disk, set())
    if unaccounted:
        paths = [path for path, _ in unaccounted]
        raise CatalogMismatchError(
            f"{CatalogStore(root).path}: the catalog is missing, but {len(paths)} consolidated "
            f"file(s) are on disk ({_names(paths)}); {consequence}; {repair_hint(root)}",
            paths=paths,
        )


def unaccounted_files(
    hot_keys: Callable[[], Collection[SymbolDayKey]],
    catalog: Catalog,
    on_disk: list[tuple[str, TierFile]],
    listed: Collection[TierFile],
) -> list[tuple[TierFile, str]]:
    """The consolidated files ``on_disk`` (``ArchiveTiers.consolidated_files``) that ``catalog``
    neither lists (``listed``: its files resolved) nor accounts for, with the reason.
    ``hot_keys`` (:func:`hot_keys_of` the archive root) is called at most once, only when a
    file written for the next generation needs its symbol-days looked for in the hot files."""
    hot: set[SymbolDayKey] | None = None
    out = []
    for tier, path in on_disk:
        if path in listed:
            continue
        try:
            recorded = read_recorded(path, tier)
        except (TickFormatError, OSError) as exc:
            out.append((path, f"not a readable consolidated tick file ({exc})"))
            continue
        if recorded.generation <= catalog.generation:
            continue  # committed once, replaced since: a retained or not yet removed copy
        if recorded.generation == catalog.generation + 1:
            if hot is None:
                hot = set(hot_keys())
            held = set(catalog.partitions) | hot
            if all(d.key in held for d in recorded.symbol_days):
                continue  # written by an interrupted run; its rows are still in its sources
        out.append(
            (
                path,
                f"written for catalog generation {recorded.generation}, the catalog is at "
                f"generation {catalog.generation}",
            )
        )
    return out


def hot_keys_of(archive_root: Path) -> set[SymbolDayKey]:
    """The symbol-days of the hot files under ``archive_root`` (live or superseded)."""
    return {h.key for h in scan_hot_files(archive_root)}


def _names(paths: list[TierFile], limit: int = 5) -> str:
    shown = ", ".join(str(p) for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def remove_stale_catalog_temps(root: Path) -> None:
    """Temporary catalog files left by an interrupted commit (never other writers' temps)."""
    for temp in root.glob(f".{Path(CATALOG_FILE).stem}.*{fsio.TEMP_MARKER}"):
        temp.unlink(missing_ok=True)

"""Versions of a tick archive: every committed change can be read again, pinned and pruned.

Every writer that commits a change of the archive (a compaction batch, a re-tiering, a
withdrawal or removal, a catalog rebuild) records a numbered *version* right after its commit,
under the archive's lock (``VersionLog.record``). A version is:

- an immutable, content-named snapshot of what the ``ticks`` view read then: the catalog's
  bytes (``catalogs/<sha256>.pq``) and a manifest of the live hot files
  (``manifests/<sha256>.pq``: ``symbol``, ``date``, ``sha256``, ``size``; mostly a delta of the
  previous version's, its key-value metadata naming that one: a symbol-day's new file, or
  ``size`` -1 for one gone; the whole list every :data:`MAX_DELTA_DEPTH` + 1 versions);
- every live hot file kept under its content name
  (``hot/symbol=<S>/year=/month=/date=/<sha256>.pq``: Parquet, named so that a glob of the
  root's ``**/*.parquet`` never meets it), a hard link to the hot file (no bytes
  copied; a copy where links are not possible): a recompaction that replaces the hot file by a
  rename, a removal or a re-tiering that deletes it leave the version's link in place. The
  current hot layout is untouched, so DuckDB and Spark read the current view as before;
- a record ``records/<number>.json``: ``version``, ``time`` (UTC, ISO), ``time_ns``,
  ``operation``, ``catalog`` and ``manifest`` (the sha256 of the two snapshots), ``generation``,
  ``changed`` (the symbol-days whose copy differs from the previous version's: another hot
  file's content, another consolidated file, hidden or gone), ``sources`` (for symbol-days
  written from the mirror: ``[symbol, date, source bundle id]``) and ``sha256`` (of the JSON of
  the rest: ``version_files.sealed_json``);
- an entry of ``index.bin``: 8 bytes (big-endian ``time_ns``) per version, in number order, so
  looking a version up by number is one seek (O(1)) and by time a binary search over the index
  (O(log versions), times strictly increasing); the number of versions is the index's size / 8.
  Each entry has its sum in ``index.sums`` (8 bytes, written first: ``version_files.entry_sum``),
  checked whenever the entry is read.

Every file read to answer a version is checked before it is believed (a changed byte is a
DamagedFileError naming the file and the repair): the content-named ones against their names,
records and tags against their ``sha256``, index entries against their sums. Files written before
records, tags and the index carried sums are read as before.

All of it lives under ``<archive root>/_skewtape_versions/``. A change that leaves every snapshot
as the latest version's records no version (versions that share every file cost nothing).
Consolidated files are content-named already (``part-<sha256[:16]>.parquet``, locally or in an
S3 tier): a version's catalog names them, and re-tiering keeps every file a kept version's catalog
lists (:meth:`VersionLog.kept_catalog_paths`) until ``prune-versions``
(``ticks.archive.ops.version_pruning``) drops the last version that reads it.

Tags (``tags/<NAME>.json``: ``{"tag", "version", "time", "sha256"}``) pin a version by name;
pruning never removes a tagged version. Versions and tags are audited
(``tick-archive-version``, ``tick-archive-tag``).

Crash safety: the snapshots and links come first (a crash leaves unreferenced files, which
pruning removes), then the record (atomic rename; a record without its index entry is not a
version and is overwritten by the next), then the index entry (its sum first, each appended and
fsynced; a partial entry or sum is cut off by the next append), then the audit record. A crash
after a writer's commit but before its version (or a compaction cut short after publishing some
symbol-days): the next writer, under the lock before it changes anything, records that state as
a version of its own, labelled ``unrecorded changes (found by <writer>)``
(:meth:`VersionLog.record_unrecorded`), then its own.

An archive's :class:`VersionLog` (built once, as ``ArchiveCore.versions``) reads and writes it:
its methods know the log's files, so no caller outside the store names the root. The files
themselves (where each lives, reading one) are ``version_files``'; writing a version or a tag
is ``version_recording``'s.
"""

from __future__ import annotations

import builtins
from collections.abc import Iterable, Mapping
from datetime import UTC, date, datetime, time
from pathlib import Path

from skewtape_pipeline.errors import ConfigError, DamagedFileError, VersionError, quoted
from skewtape_pipeline.ticks.archive.store import version_files as files
from skewtape_pipeline.ticks.archive.store import version_recording as recording
from skewtape_pipeline.ticks.archive.store.books import Books
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogStore,
    FileRecord,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.placement import ArchiveState
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import VerifiedFiles, verify_consolidated
from skewtape_pipeline.ticks.archive.store.version_files import HotEntry, Version

AsOf = int | str | datetime | date
"""What names a version: a number, a time (a date: its midnight UTC), or a tag."""
_CONTENT_NAME = "its content name"


class VersionLog:
    """The version log of the archive at ``root`` (``<root>/_skewtape_versions/``; see the
    module notes). Built once by ``core.ArchiveCore`` (``core.versions``) with the archive's
    ``books`` (the audit log its versions and tags are appended to) and ``catalog`` (what a
    version snapshots); built from a root alone, it audits nothing.

    Its writers (:meth:`record`, :meth:`tag`) take no lock: callers hold the archive's
    (``ArchiveCore.locked``) around them."""

    def __init__(self, root: Path, books: Books | None = None, catalog: CatalogStore | None = None):
        self.root = Path(root)
        self.books = Books(self.root, None) if books is None else books
        self.catalog = CatalogStore(self.root) if catalog is None else catalog
        self.directory = files.versions_dir(self.root)
        """``<root>/_skewtape_versions``."""

    def __repr__(self) -> str:
        return f"VersionLog({str(self.root)!r})"

    # -- writing (under the archive's lock)

    def record(
        self, operation: str, *, sources: Mapping[SymbolDayKey, str] | None = None
    ) -> Version | None:
        """Record the archive's state now as a new version, right after a commit
        (``version_recording.record_version``); None when the state is the latest version's."""
        return recording.record_version(
            self.root, operation, sources=sources, books=self.books, catalog=self.catalog
        )

    def check_writable(self) -> None:
        """Refuse (DamagedFileError naming the index or its sums) a log whose index lost its
        end or whose sums were cut, as recording a version would
        (``version_files.writable_count``): what a writer that writes before it records
        checks first."""
        files.writable_count(self.root)

    def record_unrecorded(self, found_by: str) -> Version | None:
        """Record the changes no version recorded (a writer cut short after it published or
        committed) as a version of their own, labelled ``unrecorded changes (found by
        <found_by>)``: every writer calls it under the lock before it changes anything
        (``version_recording.record_unrecorded``); None when there are none."""
        return recording.record_unrecorded(
            self.root, found_by, books=self.books, catalog=self.catalog
        )

    def tag(self, name: str, *, version: int | None = None) -> int:
        """Pin ``version`` (default: what a read shows now, the latest version once the changes
        no version recorded are recorded) under ``name``; audited
        (``version_recording.tag_version``). Returns the version."""
        return recording.tag_version(
            self.root, name, version=version, books=self.books, catalog=self.catalog
        )

    # -- versions

    def count(self) -> int:
        """How many versions were ever recorded (pruned ones included): the latest number;
        DamagedFileError naming the index when it lost its end (``version_files.checked_count``)."""
        return files.checked_count(self.root)

    def list(self) -> builtins.list[Version]:
        """The kept versions, oldest first (reads every kept record); VersionError or
        DamagedFileError naming a damaged one (``version_files.read_record``)."""
        return files.list_versions(self.root)

    def latest(self) -> Version | None:
        """The latest version (never pruned), None before the first; raises as :meth:`read`."""
        return files.latest_version(self.root)

    def read(self, number: int) -> Version:
        """The record of version ``number``; VersionError when it is not kept, DamagedFileError
        naming it when it is not the bytes its sha256 records (``version_files.read_version``)."""
        return files.read_version(self.root, number)

    def at(self, when: datetime) -> int | None:
        """The number of the latest version committed at or before ``when`` (naive: UTC),
        None when there is none (a binary search over the index); DamagedFileError naming the
        index when an entry it reads fails its sum (``version_files.version_at``)."""
        return files.version_at(self.root, when)

    def resolve_as_of(self, as_of: AsOf) -> Version:
        """The kept version ``as_of`` names: a number (an int, or text of ASCII digits), a time (a
        datetime, a date: its midnight UTC, or ISO text such as ``2026-11-30T17:00:00Z``: the
        latest version at or before it), or a tag name. O(1) for a number or a tag,
        O(log versions) for a time.

        Raises VersionError when it names no kept version (pruned, unknown tag, a time before
        the first version).
        """
        if isinstance(as_of, bool):
            raise VersionError(f"as_of = {quoted(as_of)}: expected a version, a time or a tag")
        if isinstance(as_of, int):
            return self.read(as_of)
        if isinstance(as_of, datetime):
            return self._at_time(as_of)
        if isinstance(as_of, date):  # as the text 2026-12-07 is read: its midnight, UTC
            return self._at_time(datetime.combine(as_of, time(), tzinfo=UTC))
        if not isinstance(as_of, str) or not as_of:
            raise VersionError(f"as_of = {quoted(as_of)}: expected a version, a time or a tag")
        if as_of.isascii() and as_of.isdigit():  # str.isdigit alone takes '²', '١'
            return self.read(int(as_of))
        if files.is_tag_name(as_of):
            return self.read(self._tagged(as_of))
        try:
            when = datetime.fromisoformat(as_of.replace("Z", "+00:00"))
        except ValueError:
            raise VersionError(
                f"as_of = {quoted(as_of)}: not a version number, a time (ISO 8601) or a tag name"
            ) from None
        return self._at_time(when)

    def _at_time(self, when: datetime) -> Version:
        number = self.at(when)
        if number is None:
            utc = when if when.tzinfo else when.replace(tzinfo=UTC)  # naive: UTC, said so
            raise VersionError(f"{self.root}: no version at or before {utc.isoformat()}")
        return self.read(number)

    # -- what a version read

    def state(self, version: Version) -> ArchiveState:
        """Where every symbol-day lived as of ``version`` (``version_files.version_state``);
        VersionError when a kept hot file is missing."""
        return files.version_state(self.root, version)

    def version_catalog(self, version: Version) -> Catalog:
        """The catalog ``version`` read (empty when it had none), its snapshot's bytes checked
        against its name; VersionError when the snapshot is missing, DamagedFileError naming
        it when it changed (``version_files.version_catalog``)."""
        return files.version_catalog(self.root, version)

    def read_manifest(self, version: Version) -> builtins.list[HotEntry]:
        """The live hot files of ``version``, by symbol-day; DamagedFileError naming a manifest
        of its chain that changed or breaks the chain (``version_files.read_manifest``)."""
        return files.read_manifest(self.root, version)

    def manifest_chain(self, digest: str) -> builtins.list[str]:
        """The manifest ``digest`` and the ones its deltas rest on, newest first (at most
        ``MAX_DELTA_DEPTH`` + 1: ``version_files.manifest_chain``)."""
        return files.manifest_chain(self.root, digest)

    def kept_catalogs(self) -> builtins.list[Catalog]:
        """The catalogs of the kept versions (each distinct snapshot once)."""
        seen: dict[str, Catalog] = {}
        for version in self.list():
            if version.catalog is not None and version.catalog not in seen:
                seen[version.catalog] = self.version_catalog(version)
        return builtins.list(seen.values())

    def kept_catalog_paths(self) -> builtins.list[str]:
        """The catalog paths of the consolidated files some kept version reads (repeats
        included), in the order of :meth:`kept_catalogs`."""
        return [item.path for catalog in self.kept_catalogs() for item in catalog.files.values()]

    # -- tags

    def tags(self) -> dict[str, int]:
        """``{tag: version}``, by name; raises as :meth:`read_tag`."""
        return files.list_tags(self.root)

    def problems(self) -> builtins.list[str]:
        """What is damaged in the log's index and tags, one finding per file or entry naming it:
        every index entry against its sum (``version_files.index_problems``), every tag read
        (the records: :meth:`list`, the snapshots: :meth:`state`)."""
        found = files.index_problems(self.root)
        for name in files.tag_names(self.root):
            try:
                files.read_tag(self.root, name)
            except (ConfigError, DamagedFileError) as exc:  # a VersionError is a ConfigError
                found.append(str(exc))
        return found

    def _tagged(self, name: str) -> int:
        """:meth:`read_tag`, refused naming the index when it pins a version past its end."""
        number = self.read_tag(name)
        if number > files.checked_count(self.root):  # a tag pins an indexed version
            raise files.index_cut(self.root, self.count(), whole=True) or VersionError(
                f"{self.root}: tag {name!r} pins version {number}, past the index's end"
            )
        return number

    def read_tag(self, name: str) -> int:
        """The version number the tag ``name`` pins; VersionError when there is no such tag,
        DamagedFileError naming its file when it changed (``version_files.read_tag``)."""
        return files.read_tag(self.root, name)

    # -- where its files are

    def record_path(self, number: int) -> Path:
        """Where version ``number``'s record is."""
        return files.record_path(self.root, number)

    def manifest_path(self, digest: str) -> Path:
        """Where the manifest of sha256 ``digest`` is."""
        return files.manifest_path(self.root, digest)

    def catalog_snapshot_path(self, digest: str) -> Path:
        """Where the catalog snapshot of sha256 ``digest`` is."""
        return files.catalog_snapshot_path(self.root, digest)

    def hot_blobs_dir(self) -> Path:
        """The folder of the hot files versions keep under their content names."""
        return files.hot_blobs_dir(self.root)

    def hot_blob(self, entry: HotEntry) -> Path:
        """Where a version keeps the hot file of ``entry`` (named by its content)."""
        return files.hot_blob(self.root, entry)

    def snapshot_dirs(self) -> builtins.list[Path]:
        """The folders of the content-named files versions read (manifests, catalogs, kept
        hot files), each file in them named ``*`` + ``version_files.SUFFIX``."""
        return files.snapshot_dirs(self.root)


def verify_version(tiers: ArchiveTiers, state: ArchiveState, number: int) -> None:
    """Verify the files of the ``state`` of version ``number`` (hot files by their content
    names, consolidated files by its catalog, found through the archive's resolved ``tiers``)
    unless their stamps are unchanged since they last were; DamagedFileError names a file that
    differs, VersionError a consolidated file that is missing
    (``version_files.missing_version_file``)."""
    root = tiers.root
    verified = VerifiedFiles(root)
    try:
        for hot in state.hot_live:
            digest = hot.path.stem
            record = FileRecord(hot.stamp.size, digest)
            rel = hot.path.relative_to(root).as_posix()
            verified.check(rel, hot.path, hot.stamp, record, _CONTENT_NAME)
        missing = verify_consolidated(verified, tiers, state)
    finally:
        verified.save()
    if missing:
        raise files.missing_version_file(missing[0], number)


# --- what kept versions read --------------------------------------------------------------------


def symbol_days(
    state: ArchiveState, symbols: Iterable[str] | None, start: date | None, end: date | None
) -> ArchiveState:
    """``state`` narrowed to the symbol-days of ``symbols`` (None: all) from ``start`` to
    ``end`` (inclusive; None: open): the hot files and the consolidated files holding one."""

    wanted = None if symbols is None else set(symbols)

    def keep(key: SymbolDayKey) -> bool:
        symbol, day = key
        return (
            (wanted is None or symbol in wanted)
            and (start is None or day >= start)
            and (end is None or day <= end)
        )

    catalog = state.catalog
    files = {p.file for k, p in catalog.partitions.items() if keep(k) and k not in state.hidden}
    partitions = {k: p for k, p in catalog.partitions.items() if p.file in files}
    narrowed = Catalog(
        catalog.generation,
        {path: item for path, item in catalog.files.items() if path in files},
        partitions,
        frozenset(k for k in catalog.withdrawn if k in partitions),
    )
    return ArchiveState(
        narrowed,
        [h for h in state.hot_live if keep(h.key)],
        [],
        frozenset(k for k in state.overridden if k in partitions),
    )

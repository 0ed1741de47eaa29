"""The archive checked and recovered from its own files.

The catalog (``store.catalog``) is an index the files can rebuild: every consolidated file
records its tier, period and catalog generation in its key-value metadata
(``consolidate.META_*``), with a digest of its symbol-day list; the list itself is the file's
own ``symbol`` and ``date`` columns. Hot files are named by their ``symbol=``/``date=`` folders.

The writers' catalog check (``trust.checked_catalog``) reads the same records.

- :func:`rebuild_catalog` writes the catalog from the files, under the archive's lock: each
  file's symbol-days are checked against its metadata's digest (:func:`read_recorded`), its size
  and sha256 measured and checked against its content name (:func:`_vouched_digests`: a damaged
  file is refused, never recorded), byte shares computed from its footer; the newest
  generation's copy of each symbol-day wins, older files holding any of the same symbol-days
  are superseded; a hot file whose ticks (ts, price, quantity, side) equal its symbol-day's
  catalogued copy is superseded (re-tiering moved it), any other hot file is live (a newer
  recompaction hiding the consolidated copy). The generation is one above every generation
  seen; a rebuild that finds what the catalog says (its very bytes but for the generation)
  writes nothing and records no version.
- :func:`verify_archive` compares every archive file with its record (``store.trust``: a
  consolidated file's size and sha256 in the catalog, a hot file's in the hot file records),
  hashes a consolidated file the catalog does not list against its content name (and checks a
  listed one's recorded sha256 against its name: :func:`_record_misnamed`), checks what
  the kept versions read (:func:`_verified_version_files`), every tier root's archive marker,
  the files no record accounts for (``store.archive_checks``: a stray Parquet file in the hot
  tier is a problem, a leftover ``prune`` removes is named apart) and, with ``full``, reads
  every page of every archive file through pyarrow with page checksum verification (DuckDB does
  not check page checksums). What it finds is reported, never raised.

The contracts are the front door's (``Archive.rebuild_catalog``, ``Archive.verify``).

Consolidated files may live in S3 tier roots (``skewtape_pipeline.storage``): every function here
lists and reads them there the same way, after checking that the store answers (else
:class:`~skewtape_pipeline.errors.ObjectStoreError` naming the URI, nothing changed).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from contextlib import ExitStack
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline import fsio, progress
from skewtape_pipeline.errors import (
    ArchiveBusyError,
    CatalogMismatchError,
    DamagedFileError,
    TickFormatError,
    VersionError,
    checked_flag,
    location,
)
from skewtape_pipeline.hashing import FileStamp, sha256_bytes, sha256_file
from skewtape_pipeline.storage import (
    TierFile,
    exists,
    file_text,
    parquet_source,
    sha256_of,
    size_of,
)
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.archive_checks import (
    current_leftovers,
    hot_strays,
    leftover_findings,
    marker_problems,
)
from skewtape_pipeline.ticks.archive.store.books import EVENT_REBUILD
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogFile,
    CatalogPartition,
    FileRecord,
    SourceStamp,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import (
    SymbolDayRows,
    byte_shares,
    consolidated_file_name,
    read_consolidated_file,
    read_footer,
)
from skewtape_pipeline.ticks.archive.store.layout import check_archive_root
from skewtape_pipeline.ticks.archive.store.placement import HotFile, hot_rel, scan_hot_files
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import (
    WRITTEN_BY_COMPACTION,
    RecordedFile,
    check_catalog_present,
    hot_keys_of,
    hot_record,
    noted_publication,
    read_recorded,
    record_problems,
    unaccounted_files,
    unrecorded_hint,
)
from skewtape_pipeline.ticks.archive.store.version_files import SUFFIX
from skewtape_pipeline.ticks.encode.parquet_file import read_archive_batch

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


# --- rebuild ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RebuildResult:
    """What :func:`rebuild_catalog` wrote."""

    archive_root: Path
    generation: int
    files: int
    symbol_days: int
    superseded: list[TierFile] = field(default_factory=list)
    """Consolidated files left out: a newer file holds some of their symbol-days."""
    withdrawn_kept: int = 0
    """Withdrawals carried over from the old catalog (when it was still readable)."""
    hot_files_recorded: int = 0
    """Hot files that had no record of their size and sha256 and were recorded as they are."""

    def to_dict(self) -> dict[str, Any]:
        out = asdict(self)
        out["archive_root"] = str(self.archive_root)
        out["superseded"] = [file_text(p) for p in self.superseded]
        return out


def rebuild_catalog(core: ArchiveCore, *, allow_fewer: bool = False) -> RebuildResult:
    """Write the catalog again from the archive's files (``Archive.rebuild_catalog``)."""
    checked_flag(allow_fewer, "allow_fewer")  # "no" would allow losing symbol-days
    root, tiers = core.root, core.tiers
    with core.writing(), core.locked("rebuilding"):
        # the version log the rebuild records its version in, checked before anything is
        # written: an index that lost its end or sums cut (``VersionLog.check_writable``), the
        # latest record changed (DamagedFileError naming it); else the catalog was written and
        # only its version refused (the catch of :func:`_record_unrecorded` takes those for the
        # damage the rebuild repairs)
        core.versions.check_writable()
        core.versions.latest()
        recorded = _recorded_files(core)
        old = _readable_catalog(core)
        records = _readable_records(core)  # a malformed line is refused before anything changes
        chosen, superseded = _newest_copies(recorded)
        digests = _vouched_digests(tiers, chosen, old)  # damaged bytes are never recorded
        hot = {h.key: h for h in scan_hot_files(root)}
        catalog = _rebuilt(core, chosen, hot, old, recorded, digests)
        if not allow_fewer:
            _refuse_fewer(tiers, old, len(catalog.partitions))
        _record_unrecorded(core)
        catalog, digest, written = _written_if_changed(core, catalog, old, recorded)
        added = _record_unrecorded_hot_files(core, catalog, records, list(hot.values()))
        if written or added:
            _audit_rebuild(core, catalog, digest, superseded, sorted(added))
        core.versions.record("rebuild-catalog")  # none when nothing changed
    return RebuildResult(
        root,
        catalog.generation,
        len(catalog.files),
        len(catalog.partitions),
        [r.path for r in superseded],
        len(catalog.withdrawn),
        len(added),
    )


def _record_unrecorded(core: ArchiveCore) -> None:
    """Record the changes no version recorded (``VersionLog.record_unrecorded``) before the
    rebuild writes, while the catalog accounts for the files (``ArchiveCore.checked_catalog``)
    and the hot index reads; not when either is damaged (a state no version should read back:
    what the rebuild repairs, its own version recording the result)."""
    try:
        core.checked_catalog()
        core.versions.record_unrecorded("rebuild-catalog")
    except (CatalogMismatchError, TickFormatError):
        return


def _written_if_changed(
    core: ArchiveCore, catalog: Catalog, old: Catalog, recorded: list[RecordedFile]
) -> tuple[Catalog, str, bool]:
    """(the catalog in force, the sha256 of its bytes, whether it was written): ``old``, not
    written again, when the rebuilt ``catalog`` with ``old``'s generation has the very bytes
    of the catalog on disk and no file on disk (``recorded``) claims a newer generation (the
    rebuild found what the catalog says: its generation stays); else ``catalog``, written."""
    if all(r.generation <= old.generation for r in recorded):
        raw = fsio.read_state_bytes(core.catalog.path)
        if raw is not None and replace(catalog, generation=old.generation).to_bytes() == raw:
            return old, sha256_bytes(raw), False
    return catalog, core.catalog.write(catalog), True


def _readable_records(core: ArchiveCore) -> dict[str, FileRecord]:
    """The hot file records, from the hot index, or from its log alone when the index's base
    is damaged (what the rebuild replaces)."""
    try:
        return core.catalog.hot_records()
    except TickFormatError as exc:
        if str(hot_index.index_path(core.root)) not in str(exc):
            raise
        records = hot_index.legacy_records(core.root)
        return {rel: FileRecord(size, digest) for rel, (size, digest) in records.items()}


def _recorded_files(core: ArchiveCore) -> list[RecordedFile]:
    """What every consolidated file in the archive's tier roots records (:func:`read_recorded`);
    ObjectStoreError naming the URI of a tier root that cannot be used."""
    core.tiers.check_reachable()
    on_disk = core.tiers.consolidated_files()
    return [read_recorded(path, tier) for tier, path in on_disk]


def _rebuilt(
    core: ArchiveCore,
    chosen: list[RecordedFile],
    hot: dict[SymbolDayKey, HotFile],
    old: Catalog,
    recorded: list[RecordedFile],
    digests: dict[TierFile, str],
) -> Catalog:
    """The catalog of the ``chosen`` files (their partitions' hot copies compared; each file's
    sha256 from ``digests``), keeping the ``old`` catalog's withdrawals of symbol-days still
    held; its generation one above every generation seen (``old``'s and the ``recorded``
    files')."""
    files, partitions = {}, {}
    for item in chosen:
        entry, parts = _catalogued(core.tiers, item, hot, digests[item.path])
        files[entry.path] = entry
        partitions.update((p.key, p) for p in parts)
    withdrawn = frozenset(k for k in old.withdrawn if k in partitions)
    generation = 1 + max([old.generation, *(r.generation for r in recorded)])
    return Catalog(generation, files, partitions, withdrawn)


def _record_unrecorded_hot_files(
    core: ArchiveCore, catalog: Catalog, records: dict[str, FileRecord], hot_files: list[HotFile]
) -> list[str]:
    """Build the hot index again from the hot files on disk (``hot_files``: a listing of the
    root, stamped now), recording the size and sha256 of every one that has no record in
    ``records`` (written before hot files were recorded) as it is now; a recorded file keeps
    its record (a changed one stays reported), and the records of files gone are kept.
    Returns the paths recorded."""
    root, added = core.root, []
    entries: dict[tuple[str, date], hot_index.IndexEntry] = {}
    for rel, record in records.items():
        key = hot_index.key_of_rel(rel)
        if key is not None:
            entries[key] = hot_index.IndexEntry(*key, record.size, record.sha256, None, False, 0)
    for hot in hot_files:
        rel = hot_rel(root, hot)
        record = hot_record(hot, catalog, records, rel)
        if record is None:
            record = FileRecord(hot.stamp.size, sha256_file(hot.path))
            added.append(rel)
        entries[hot.key] = hot_index.IndexEntry(
            *hot.key, record.size, record.sha256, hot.stamp, True, 0
        )
    hot_index.build_base(root, entries.values())
    return added


def _audit_rebuild(
    core: ArchiveCore,
    catalog: Catalog,
    digest: str,
    superseded: list[RecordedFile],
    hot_recorded: list[str],
) -> None:
    """Append the rebuild's record: the new catalog (written with sha256 ``digest``), the files
    left out (``superseded``), the hot files recorded."""
    record = core.catalog.audit_record(EVENT_REBUILD, catalog, digest) | {
        "files": sorted(catalog.files),
        "superseded": [core.tiers.relative(r.path) for r in superseded],
        "hot_files_recorded": hot_recorded,
        "symbol_days": len(catalog.partitions),
        "reason": "catalog rebuilt from the consolidated files",
    }
    core.books.audit([record])


def _vouched_digests(
    tiers: ArchiveTiers, recorded: list[RecordedFile], old: Catalog
) -> dict[TierFile, str]:
    """The sha256 of each consolidated file the catalog will list (``recorded``), vouched for
    by its content name (``part-<the first 16 hex digits of its sha256>.parquet``) or, not so
    named, by the ``old`` catalog's record of it, else by every page read with its checksum.
    DamagedFileError naming the first that differs, and the repair: a rebuild never records a
    damaged file's bytes as the file's own (``verify-archive`` would then pass)."""
    digests = {}
    for item in recorded:
        digest = sha256_of(item.path)
        why = _damage(tiers, item.path, digest, old)
        if why is not None:
            raise DamagedFileError(
                f"{why}: the file changed after it was written; nothing rebuilt. Restore it "
                "from a copy and run the rebuild again (or move it out of its tier and rebuild "
                "with --allow-fewer: its symbol-days are then lost)",
                path=item.path,
            )
        digests[item.path] = digest
    return digests


def _damage(tiers: ArchiveTiers, path: TierFile, digest: str, old: Catalog) -> str | None:
    """How the consolidated file ``path`` of sha256 ``digest`` differs from what vouches for
    it (see :func:`_vouched_digests`); None when it does not."""
    if _CONTENT_NAME.fullmatch(path.name):
        return _unlike_name(path, digest)
    record = old.files.get(tiers.relative(path))
    if record is not None and record.sha256 != digest:
        return f"sha256 is {digest}, the catalog recorded {record.sha256}"
    pages = [] if record is not None else _check_pages(path, full=True)
    return pages[0].removeprefix(f"{path}: ") if pages else None


def _refuse_fewer(tiers: ArchiveTiers, old: Catalog, found: int) -> None:
    """CatalogMismatchError when the files found account for fewer symbol-days than the
    catalog ``old`` does."""
    if found >= len(old.partitions):
        return
    roots = ", ".join(str(location(tiers.roots[tier])) for tier in (WARM, COLD))
    raise CatalogMismatchError(
        f"{tiers.root}: the consolidated files in {roots} hold {found} symbol-days, the catalog "
        f"{len(old.partitions)}; nothing rebuilt. Are the tiers elsewhere (the archive's tier "
        "policy)? Pass allow_fewer (--allow-fewer) to rebuild with the symbol-days lost"
    )


def _readable_catalog(core: ArchiveCore) -> Catalog:
    """The archive's catalog; an empty one when it is unreadable (what the rebuild replaces)."""
    try:
        return core.catalog.read()
    except TickFormatError:
        return Catalog()


def _newest_copies(
    recorded: Iterable[RecordedFile],
) -> tuple[list[RecordedFile], list[RecordedFile]]:
    """(catalogued, superseded): newest generation first, a file loses to any newer holder."""
    claimed: dict[SymbolDayKey, RecordedFile] = {}
    chosen, superseded = [], []
    for item in sorted(recorded, key=lambda r: (-r.generation, str(r.path))):
        holders = {claimed[d.key] for d in item.symbol_days if d.key in claimed}
        if any(h.generation == item.generation for h in holders):
            raise TickFormatError(
                f"{item.path}: holds symbol-days that {next(iter(holders)).path}, of the same "
                f"catalog generation {item.generation}, holds too; move one of them away"
            )
        if holders:
            superseded.append(item)
            continue
        chosen.append(item)
        claimed.update((d.key, item) for d in item.symbol_days)
    return chosen, superseded


def _catalogued(
    tiers: ArchiveTiers, item: RecordedFile, hot: dict[SymbolDayKey, HotFile], digest: str
) -> tuple[CatalogFile, list[CatalogPartition]]:
    rel = tiers.relative(item.path)
    entry = CatalogFile(
        path=rel,
        tier=item.tier,
        period=item.period,
        bytes=size_of(item.path),
        rows=item.rows,
        sha256=digest,
        symbol_days=len(item.symbol_days),
    )
    shares = byte_shares(item.path, [d.rows for d in item.symbol_days])
    copies = _copies_with_hot_files(item, hot)
    parts = [
        CatalogPartition(
            d.symbol,
            d.day,
            item.tier,
            rel,
            d.rows,
            share,
            _superseded_hot(tiers, hot[d.key], copies[d.key]) if d.key in copies else None,
        )
        for d, share in zip(item.symbol_days, shares, strict=True)
    ]
    return entry, parts


def _copies_with_hot_files(
    item: RecordedFile, hot: dict[SymbolDayKey, HotFile]
) -> dict[SymbolDayKey, SymbolDayRows]:
    """The file's rows of each of its symbol-days that has a hot file on disk (the file is
    read only when there is one)."""
    if not any(d.key in hot for d in item.symbol_days):
        return {}
    rows = read_consolidated_file(item.path)
    return {(p.symbol, p.day): p for p in rows if (p.symbol, p.day) in hot}


def _superseded_hot(tiers: ArchiveTiers, hot: HotFile, copy: SymbolDayRows) -> SourceStamp | None:
    """The stamp of the hot file when its ticks equal the consolidated copy (re-tiering
    moved it), None when they differ (a newer recompaction: the hot file is live).

    Raises DamagedFileError naming the hot file when it does not read.
    """
    read_footer(hot.path)
    try:
        batch = read_archive_batch(hot.path)
    except (OSError, pa.ArrowException) as exc:
        raise DamagedFileError(
            f"a page fails its checksum or decoding ({exc}); restore it from a copy or move it "
            "away",
            path=hot.path,
        ) from None
    if batch.first_difference(copy.batch) is not None:
        return None
    digest = sha256_file(hot.path)
    stamp = FileStamp.of(hot.path)
    rel = tiers.relative(hot.path)
    return SourceStamp(rel, digest, stamp.size, stamp.inode, stamp.mtime_ns)


# --- verify -------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ArchiveVerification:
    """What :func:`verify_archive` checked and found (``problems``: one line per finding,
    naming the file)."""

    archive_root: Path
    full: bool
    files_checked: int
    bytes_checked: int
    problems: list[str]
    leftovers: list[str] = field(default_factory=list)
    """Files no read sees, which ``prune`` removes (kept in ``books_and_records`` mode:
    ``archive_checks.leftover_findings``), one line each naming the file: reported, yet not
    problems (``ok`` stays True)."""

    @property
    def ok(self) -> bool:
        return not self.problems

    def to_dict(self) -> dict[str, Any]:
        return {**asdict(self), "archive_root": str(self.archive_root), "ok": self.ok}

    def describe(self) -> str:
        mode = "every page's checksum read" if self.full else "sizes and sha256"
        left = f"; {len(self.leftovers)} leftover file(s), named above" if self.leftovers else ""
        return (
            f"{self.archive_root}: verified {self.files_checked} files, {self.bytes_checked} "
            f"bytes ({mode}){left}"
        )


CONFIRM_WAIT_SECONDS = 600.0
"""How long verification waits for a writer to finish before confirming what it found."""


def verify_archive(core: ArchiveCore, *, full: bool = False) -> ArchiveVerification:
    """Check every archive file against its record; reports what it finds (``Archive.verify``).

    Takes no lock. What a first look finds (or a file gone while it looked) is looked at again
    under the archive's lock, waited for up to :data:`CONFIRM_WAIT_SECONDS` (a writer
    publishing a file before its record, re-tiering removing files it moved), so only what the
    archive shows between writers is reported; the first look's findings when the lock cannot
    be had (a busy or read-only archive). A first look that found only leftovers has them
    confirmed under the lock (``archive_checks.current_leftovers``) without checking every
    file again."""
    checked_flag(full, "full")
    try:
        first: ArchiveVerification | None = _verify_once(core, full=full)
    except FileNotFoundError:
        first = None
    if first is not None and first.ok and not first.leftovers:  # leftovers: not a run's files?
        return first
    with ExitStack() as stack:
        try:
            waiting = core.waiting(CONFIRM_WAIT_SECONDS)
            stack.enter_context(waiting.locked("verifying the archive", finish=False))
        except (ArchiveBusyError, OSError):  # busy for long, or a read-only archive
            return first if first is not None else _verify_once(core, full=full)
        if first is not None and first.ok:  # its leftovers confirmed: no file checked again
            try:
                catalog, retained = core.catalog.read(), core.books.is_on()
                now = current_leftovers(core.tiers, catalog, core.versions, retained=retained)
                return replace(first, leftovers=now)
            except (TickFormatError, VersionError, OSError):  # changed meanwhile: look again
                pass
        return _verify_once(core, full=full)


def _verify_once(core: ArchiveCore, *, full: bool) -> ArchiveVerification:
    """One look at every file against its record (see :func:`verify_archive`)."""
    root, tiers, problems = core.root, core.tiers, []
    checked = checked_bytes = 0
    check_archive_root(root)  # a folder that holds no archive is refused, never "0 files: ok"
    tiers.check_reachable()
    try:
        check_catalog_present(tiers)
        catalog = core.catalog.read()
        records = core.catalog.hot_records()
    except TickFormatError as exc:
        return ArchiveVerification(root, full, 0, 0, [str(exc)])
    listed = set()
    catalogued = sorted(catalog.files.values(), key=lambda f: f.path)
    for index, item in enumerate(catalogued):
        path = tiers.resolve(item.path)
        listed.add(path)
        problems += _check_recorded(path, FileRecord(item.bytes, item.sha256), "the catalog", full)
        problems += _record_misnamed(path, item.sha256)
        if exists(path):
            checked, checked_bytes = checked + 1, checked_bytes + size_of(path)
        progress.report("consolidated files", index + 1, len(catalogued))
    on_disk = tiers.consolidated_files()
    for _, path in on_disk:
        if path not in listed and _CONTENT_NAME.fullmatch(path.name):
            problems += _check_content_named(path, full)
            checked, checked_bytes = checked + 1, checked_bytes + size_of(path)
    unaccounted = unaccounted_files(partial(hot_keys_of, root), catalog, on_disk, listed)
    problems += [f"{path}: {why}" for path, why in unaccounted]
    hot = _verified_hot_files(core, catalog, records, full)
    problems += _index_problems(core, catalog) + hot_strays(root)
    kept = _verified_version_files(core, full, hot.hot, {path for _, path in on_disk})
    problems += hot.problems + kept.problems
    checked, checked_bytes = checked + hot.files, checked_bytes + hot.bytes
    if checked:
        problems += marker_problems(tiers, catalog)
    checked, checked_bytes = checked + kept.files, checked_bytes + kept.bytes
    left = [] if kept.read is None else [path for _, path in on_disk]  # none if versions unread
    left = leftover_findings(
        left, listed, {p for p, _ in unaccounted}, kept.read or (), retained=core.books.is_on()
    )
    return ArchiveVerification(root, full, checked, checked_bytes, problems, left)


@dataclass
class _Checked:
    """What one part of :func:`verify_archive` checked and found; ``hot``: the hot files
    checked against a record, by (device, inode), each with its path and its sha256 when it
    held its recorded bytes (None when it did not)."""

    problems: list[str] = field(default_factory=list)
    files: int = 0
    bytes: int = 0
    hot: dict[tuple[int, int], tuple[Path, str | None]] = field(default_factory=dict)
    read: set[TierFile] | None = None  # the consolidated files kept versions read, once known

    def add(self, size: int, problems: list[str]) -> None:
        self.problems += problems
        self.files, self.bytes = self.files + 1, self.bytes + size


def _verified_hot_files(
    core: ArchiveCore, catalog: Catalog, records: dict[str, FileRecord], full: bool
) -> _Checked:
    """Every hot file against the record its compaction made (``trust.hot_record``; one
    without a record is reported, with the repair), then its footer and, with ``full``, its
    pages."""
    root, checked = core.root, _Checked()
    hot_files = list(scan_hot_files(root))
    publishing = noted_publication(core.catalog)
    for index, hot in enumerate(hot_files):
        rel = hot_rel(root, hot)
        record = hot_record(hot, catalog, records, rel)
        published = publishing.record if publishing and publishing.rel == rel else None
        if record is None and published is None:
            problems = [f"{hot.path}: no record of its size and sha256; {unrecorded_hint(root)}"]
            problems += _check_pages(hot.path, full=full)
        else:
            expected = record or published
            problems = _check_recorded(hot.path, expected, WRITTEN_BY_COMPACTION, full)
            if problems and published not in (None, record):  # a killed compaction's file?
                again = _check_recorded(hot.path, published, WRITTEN_BY_COMPACTION, full)
                problems, expected = (problems, expected) if again else ([], published)
            digest = None if problems else expected.sha256  # known to hold these bytes
            checked.hot[(hot.stamp.device, hot.stamp.inode)] = (hot.path, digest)
        checked.add(hot.stamp.size, problems)
        progress.report("hot files", index + 1, len(hot_files))
    return checked


def _index_problems(core: ArchiveCore, catalog: Catalog) -> list[str]:
    """The hot index against the hot files on disk: a file it lists that is not there (lost,
    or moved by a re-tiering whose clean-up was cut short: :func:`_moved`), a file there it
    does not list (published outside the archive, or a publication cut short); none for an
    archive without an index yet (its first write builds one)."""
    root = core.root
    try:
        index = hot_index.HotIndex.read(root)
    except TickFormatError as exc:
        return [str(exc)]
    if index is None:
        return []
    listed = {e.key: e for e in index.entries()}
    on_disk = {e.key: e for e in hot_index.scan_index(root) if e.present}
    repair = f"record the hot files as they are with `skewtape-pipeline rebuild-catalog {root}`"
    problems = [
        _moved(core, listed[key], catalog)
        or f"{root / listed[key].rel}: the hot index lists it but it is not on disk; restore it "
        f"from a copy, or {repair} (its ticks are then gone)"
        for key in sorted(listed.keys() - on_disk.keys())
    ]
    problems += [
        f"{root / on_disk[key].rel}: on disk but not in the hot index (not published by a "
        f"compaction, or its publication was cut short): readers do not see it; compact its "
        f"symbol-day again, or {repair}"
        for key in sorted(on_disk.keys() - listed.keys())
    ]
    return problems


def _moved(core: ArchiveCore, entry: hot_index.IndexEntry, catalog: Catalog) -> str | None:
    """The finding for the missing hot file of ``entry`` when the committed ``catalog`` holds
    its symbol-day in a consolidated file read from that very file (the partition's source
    stamp: ``SourceStamp.same_file``, or its sha256 for an entry without a stamp): a
    re-tiering moved it, removed it, and was cut short before the hot index said so; its
    ticks are all there. None for any other missing file."""
    root, part = core.root, catalog.partitions.get(entry.key)
    source = None if part is None else part.source
    if source is None:
        return None
    same = source.same_file(entry.stamp) if entry.stamp is not None else None
    if not (same or (same is None and entry.sha256 == source.sha256)):
        return None
    return (
        f"{root / entry.rel}: the hot index lists it but it is not on disk: a re-tiering moved "
        f"its ticks to {part.file} (committed; every read finds them there) and was "
        "interrupted while removing the moved hot files; run `skewtape-pipeline retier "
        f"{root} --as-of DATE` again (or `Archive.prune`) to finish that clean-up"
    )


def _verified_version_files(
    core: ArchiveCore,
    full: bool,
    hot: dict[tuple[int, int], tuple[Path, str | None]],
    on_disk: set[TierFile],
) -> _Checked:
    """What the kept versions of the archive (``core.versions``: its ``VersionLog``) read: its
    records, index and tags (``VersionLog.problems``), every version's snapshots and kept hot
    files present (``VersionLog.state``) and the consolidated files its catalog lists among
    those ``on_disk`` (the stores' listing); every content-named file versions keep
    (``VersionLog.snapshot_dirs``: catalog snapshots, manifests, kept hot files) holding the
    bytes its name records (its sha256), with a readable footer and, with ``full``, pages. A
    kept hot file that is a link to a hot file checked already (``hot``) is not read again."""
    checked, tiers, log = _Checked(core.versions.problems()), core.tiers, core.versions
    try:
        versions = log.list()
    except (VersionError, TickFormatError) as exc:  # a damaged record or a cut index, named
        return _Checked([*checked.problems, *{str(exc)} - set(checked.problems)])
    readers: dict[TierFile, list[int]] = {}
    kept: dict[Path, _KeptHot] = {}
    for version in versions:
        try:
            state = log.state(version)
        except (VersionError, TickFormatError) as exc:
            checked.problems.append(f"version {version.version}: {exc}")
            continue
        for rel in state.catalog.files:
            readers.setdefault(tiers.resolve(rel), []).append(version.version)
        for kept_hot in state.hot_live:
            kept.setdefault(kept_hot.path, _KeptHot(kept_hot)).versions.append(version.version)
    checked.read = set(readers)
    for path, numbers in readers.items():
        if path not in on_disk:
            checked.problems.append(
                f"{path}: missing (kept version(s) {_numbers(numbers)} read it)"
            )
    blobs = [p for folder in log.snapshot_dirs() for p in sorted(folder.rglob(f"*{SUFFIX}"))]
    for index, path in enumerate(blobs):
        stamp = FileStamp.of(path)
        problems = _content_problems(path, stamp, hot, full)
        if problems and path in kept:
            problems = [f"{problems[0]}; {kept[path].repair()}", *problems[1:]]
        checked.add(stamp.size, problems)
        progress.report("version files", index + 1, len(blobs))
    return checked


@dataclass
class _KeptHot:
    """A hot file versions keep (``VersionLog.hot_blob``) and the versions that read it."""

    hot: HotFile
    versions: list[int] = field(default_factory=list)

    def repair(self) -> str:
        """Which versions a damaged copy breaks, and the repair."""
        day = self.hot.day.isoformat()
        return (
            f"version(s) {_numbers(self.versions)} read it; repair: compact {self.hot.symbol} "
            f"{day} again from the same ticks (the rewritten hot file restores this copy when "
            f"its bytes match its name), or restore it from a copy, or prune those versions"
        )


def _content_problems(
    path: Path, stamp: FileStamp, hot: dict[tuple[int, int], tuple[Path, str | None]], full: bool
) -> list[str]:
    """A file versions keep against the sha256 its name records, then its footer and pages;
    not read again when it is a link to a hot file checked already (``hot``): fine when that
    held these very bytes, else named as that file."""
    linked, digest = hot.get((stamp.device, stamp.inode), (None, None))
    if linked is not None and digest == path.stem:
        return []
    if linked is not None and digest is None:
        return [f"{path}: the same file as {linked} (see there): not the bytes its name records"]
    digest = sha256_file(path)
    if digest != path.stem:
        return [
            f"{path}: sha256 is {digest}, its content name records {path.stem} (a file kept "
            "for versions changed after it was written; restore it from a copy)"
        ]
    return _check_pages(path, full=full)


def _numbers(numbers: list[int], limit: int = 5) -> str:
    shown = ", ".join(str(n) for n in numbers[:limit])
    return shown + (f" and {len(numbers) - limit} more" if len(numbers) > limit else "")


def _check_recorded(path: TierFile, record: FileRecord, whose: str, full: bool) -> list[str]:
    """The file against its record (``whose``: who made it), then its footer and pages."""
    if not exists(path):
        return [f"{path}: missing ({whose} lists it)"]
    problems = record_problems(path, record, whose)
    if problems and "size" in problems[0]:
        return problems
    return problems + _check_pages(path, full=full)


_CONTENT_NAME = re.compile(r"part-[0-9a-f]{16}\.parquet")


def _check_content_named(path: TierFile, full: bool) -> list[str]:
    """A consolidated file the catalog does not list (retained, or left by an interrupted run)
    against the record its name is: the first 16 hex digits of its sha256."""
    why = _unlike_name(path, sha256_of(path))
    if why is not None:
        return [f"{path}: {why} (a retained or uncommitted copy changed after it was written)"]
    return _check_pages(path, full=full)


def _record_misnamed(path: TierFile, sha256: str) -> list[str]:
    """A catalogued file whose catalog record is not the sha256 its content name records: the
    record of a damaged file (a rebuild before rebuilds checked names recorded it)."""
    why = _unlike_name(path, sha256) if _CONTENT_NAME.fullmatch(path.name) else None
    if why is None:
        return []
    return [
        f"{path}: the catalog records a sha256 its content name does not ({why}): it vouches "
        "for bytes the file was not written with; restore the file from a copy, then run "
        "rebuild-catalog"
    ]


def _unlike_name(path: TierFile, sha256: str) -> str | None:
    """How ``sha256`` differs from the one the content name of ``path`` records (its first 16
    hex digits); None when the name records it."""
    if consolidated_file_name(sha256) == path.name:
        return None
    return f"sha256 is {sha256}, its content name records {path.name[5:21]}..."


def _check_pages(path: TierFile, *, full: bool) -> list[str]:
    """The footer (always) and, with ``full``, every page's checksum, through pyarrow."""
    try:
        footer = read_footer(path)
    except DamagedFileError as exc:
        return [str(exc)]
    if not full:
        return []
    source, filesystem = parquet_source(path)
    try:
        parquet = pq.ParquetFile(
            source, filesystem=filesystem, metadata=footer, page_checksum_verification=True
        )
    except (OSError, pa.ArrowException) as exc:
        return [f"{path}: does not open as Parquet ({exc})"]
    for group in range(footer.num_row_groups):
        try:
            parquet.read_row_group(group, use_threads=False)
        except (OSError, pa.ArrowException) as exc:
            return [f"{path}: row group {group}: a page fails its checksum or decoding ({exc})"]
    return []

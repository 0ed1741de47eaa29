"""Writing a tick archive's version log (its notes: ``versions``; its files:
``version_files``): a new version recorded after a writer's commit (:func:`record_version`),
the files it keeps (the catalog's snapshot, the manifest of the live hot files, each live hot
file under its content name) and the tags that pin a version (:func:`tag_version`). Called by
the methods of ``versions.VersionLog`` (``VersionLog.record``, ``VersionLog.tag``), under the
lock their callers hold.

Crash safety (``versions``' notes): the snapshots and links first, then the record, then the
index entry, then the audit record.
"""

from __future__ import annotations

import io
import json
import os
import shutil
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager, nullcontext
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import ConfigError, VersionError
from skewtape_pipeline.hashing import FileStamp, sha256_bytes, sha256_file
from skewtape_pipeline.ticks.archive.store.books import Books
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogStore,
    FileRecord,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.hot_index import (
    HotIndex,
    IndexEntry,
    ensure_index,
    fold_if_long,
)
from skewtape_pipeline.ticks.archive.store.placement import (
    ArchiveState,
    HotFile,
    classified,
    hot_file_of,
    hot_files,
)
from skewtape_pipeline.ticks.archive.store.version_files import (
    EVENT_TAG,
    EVENT_VERSION,
    INDEX_ENTRY,
    INDEX_FILE,
    MANIFEST_BASE_KEY,
    MANIFEST_SCHEMA,
    MAX_DELTA_DEPTH,
    SUM_SIZE,
    SUMS_FILE,
    HotEntry,
    Version,
    catalog_snapshot_path,
    check_tag_name,
    checked_count,
    entry_sum,
    hot_blob,
    indexed_times,
    latest_version,
    manifest_chain,
    manifest_header,
    manifest_path,
    manifest_rows,
    read_manifest,
    read_manifest_table,
    read_tag,
    read_version,
    record_path,
    sealed_json,
    tag_path,
    utc_ns,
    version_catalog,
    versions_dir,
    writable_count,
)


def _append_index(root: Path, count: int, time_ns: int) -> None:
    """Append the entry of version ``count + 1``, its sum first (``version_files.entry_sum``):
    a partial entry or sum left by a crash is cut off; entries found without a sum (written
    before sums were) are summed as they are."""
    store = versions_dir(root)
    index, sums = store / INDEX_FILE, store / SUMS_FILE
    with _opened(sums) as handle:
        summed = min(os.fstat(handle.fileno()).st_size // SUM_SIZE, count)
        with open(index, "rb") if summed < count else nullcontext() as old:
            unsummed = [] if old is None else _entries(old, summed, count)
        handle.truncate(summed * SUM_SIZE)
        handle.seek(summed * SUM_SIZE)
        for number, old_ns in enumerate(unsummed, start=summed + 1):
            handle.write(entry_sum(number, old_ns))
        handle.write(entry_sum(count + 1, time_ns))
        handle.flush()
        os.fsync(handle.fileno())
    with _opened(index) as handle:
        handle.truncate(count * INDEX_ENTRY.size)
        handle.seek(count * INDEX_ENTRY.size)
        handle.write(INDEX_ENTRY.pack(time_ns))
        handle.flush()
        os.fsync(handle.fileno())


@contextmanager
def _opened(path: Path) -> Iterator[io.BufferedRandom]:
    """``path`` opened to read and write, made if missing; a full disk names it."""
    fd = fsio.open_state_file(path, os.O_RDWR | os.O_CREAT)
    with fsio.naming(path, path), open(fd, "r+b") as handle:
        yield handle


def _entries(index: io.BufferedReader, start: int, stop: int) -> list[int]:
    """The ``time_ns`` of the index entries of versions ``start + 1`` to ``stop``."""
    index.seek(start * INDEX_ENTRY.size)
    raw = index.read((stop - start) * INDEX_ENTRY.size)
    return [value for (value,) in INDEX_ENTRY.iter_unpack(raw)]


def record_version(
    archive_root: Path,
    operation: str,
    *,
    sources: Mapping[SymbolDayKey, str] | None = None,
    books: Books,
    catalog: CatalogStore,
) -> Version | None:
    """Record the archive's state now as a new version (its ``catalog`` snapshotted, audited
    through its ``books``); call it under the archive's lock, right after a commit. Returns
    the new version, or None when every symbol-day reads from where the latest version's did
    and the catalog lists the same files (nothing written).
    ``sources`` name the source bundle of symbol-days written from the mirror (kept for those
    the version changed).

    What it reads follows what changed: while the catalog is the latest version's, only the
    hot index's lines since that version (``HotIndex.changes_since``) and the catalog entries
    of their symbol-days; otherwise (a re-tiering, a withdrawal, a rebuild, the first version,
    a version recorded before the hot index) every live hot file against the latest version's.

    Raises TickFormatError for a damaged catalog, VersionError for a damaged version log,
    DamagedFileError naming the index (or its sums) when it lost its end, before any record,
    sum or index entry is written (``version_files.writable_count``, once it is known there is
    a version to record: the check lists the records).
    """
    root = Path(archive_root)
    count = checked_count(root)  # two stat; the whole check before the first write below
    index = ensure_index(root)
    raw_catalog = fsio.read_state_bytes(catalog.path)
    catalog_digest = None if raw_catalog is None else sha256_bytes(raw_catalog)
    previous = latest_version(root)
    diff = None
    if previous is not None and previous.catalog == catalog_digest:
        diff = index.changes_since(previous.hot_index)
    if diff is None:
        recorded = _everything(root, catalog, index, previous, catalog_digest)
    else:
        assert previous is not None
        recorded = _what_changed(root, index, previous, diff)
    if recorded is None:
        fold_if_long(index)
        return None
    writable_count(root)  # once per version recorded: it lists the records
    manifest, changed, generation = recorded
    if raw_catalog is not None and catalog_digest is not None:  # snapshot, then the record
        _write_new(catalog_snapshot_path(root, catalog_digest), raw_catalog)
    time_ns = _next_time(root, count)
    version = Version(
        version=count + 1,
        time=datetime.fromtimestamp(time_ns // 1_000_000_000, UTC).replace(
            microsecond=(time_ns // 1000) % 1_000_000
        ),
        time_ns=time_ns,
        operation=operation,
        catalog=catalog_digest,
        manifest=manifest,
        generation=generation,
        changed=changed,
        sources=sorted((s, d, b) for (s, d), b in (sources or {}).items() if (s, d) in changed),
        hot_index=index.mark,
    )
    faults.checkpoint("version-snapshots")
    fsio.atomic_write_bytes(record_path(root, version.version), sealed_json(version.to_dict()))
    faults.checkpoint("version-record")
    _append_index(root, count, time_ns)
    faults.checkpoint("version-indexed")
    books.audit([_audit_record(root, version)])
    fold_if_long(index)
    return version


UNRECORDED = "unrecorded changes"
"""How a version of changes no writer recorded is labelled (:func:`record_unrecorded`)."""


def record_unrecorded(
    archive_root: Path, found_by: str, *, books: Books, catalog: CatalogStore
) -> Version | None:
    """Record the changes since the latest version that no version recorded as a version of
    their own, labelled ``unrecorded changes (found by <found_by>)``: what a writer cut short
    after publishing or committing left (a compaction interrupted part-way, a re-tiering
    killed before its version), or what a compaction running side by side has published so
    far. Called under the archive's lock by every writer before it changes anything, so the
    version it records after holds its own changes alone. The comparison is
    :func:`record_version`'s (while the catalog is the latest version's, the hot index's lines
    since it alone). None when nothing changed, or when an archive without versions holds
    nothing yet (a new one: no empty version)."""
    root = Path(archive_root)
    if writable_count(root) == 0 and _holds_nothing(root, catalog):
        return None
    operation = f"{UNRECORDED} (found by {found_by})"
    return record_version(root, operation, books=books, catalog=catalog)


def _holds_nothing(root: Path, catalog: CatalogStore) -> bool:
    """True when the archive has no catalogued symbol-day and no hot file."""
    return not catalog.read().partitions and not hot_files(root)


def _everything(
    root: Path,
    catalog: CatalogStore,
    index: HotIndex,
    previous: Version | None,
    catalog_digest: str | None,
) -> tuple[str, list[SymbolDayKey], int] | None:
    """(manifest, changed, generation) of the state now (``catalog``'s and the hot files')
    compared whole with ``previous``'s; None when every symbol-day reads from where it did
    and the catalog lists the same files (one that only forgot source stamps, as a re-tiering
    rerun after a kill leaves it, or was rebuilt as it was)."""
    state = classified(catalog.read(), hot_files(root, index))
    entries = [_keep_hot(root, hot, hot.record) for hot in state.hot_live]
    before = [] if previous is None else read_manifest(root, previous)
    if previous is not None and previous.catalog == catalog_digest and before == _by_key(entries):
        return None
    before_catalog = None if previous is None else version_catalog(root, previous)
    changed = _changed(state, entries, before_catalog, before)
    if before_catalog is not None and not changed and _same_files(before_catalog, state.catalog):
        return None
    manifest = _write_manifest(root, entries, previous, before)
    return manifest, changed, state.catalog.generation


def _what_changed(
    root: Path,
    index: HotIndex,
    previous: Version,
    diff: list[tuple[SymbolDayKey, IndexEntry | None, IndexEntry]],
) -> tuple[str, list[SymbolDayKey], int] | None:
    """(manifest, changed, generation) from the hot index's lines since ``previous`` alone,
    the catalog being ``previous``'s: the live hot files they changed (kept under their
    content names) written as a delta of ``previous``'s manifest; None when none changed."""
    catalog = version_catalog(root, previous) if diff else Catalog()
    now: dict[SymbolDayKey, HotEntry | None] = {}
    for key, before, after in diff:
        old, new = _live(catalog, before), _live(catalog, after)
        if old is None and new is None:
            continue
        if new is not None:
            hot = hot_file_of(root, new)
            kept = _keep_hot(root, hot, hot.record)
        else:
            kept = None
        was = None if old is None else HotEntry(*key, old.sha256 or "", old.size or 0)
        if kept != was:
            now[key] = kept
    if not now:
        return None
    rows = [e if e is not None else HotEntry(*k, "", -1) for k, e in sorted(now.items())]
    depth = manifest_header(root, previous.manifest)[1] + 1
    if depth <= MAX_DELTA_DEPTH:
        manifest = _manifest_file(root, rows, (previous.manifest, depth))
    else:
        manifest = _write_manifest_table(root, _merged_manifest(root, previous, rows), ("", 0))
    return manifest, sorted(now), previous.generation


def _merged_manifest(root: Path, previous: Version, rows: list[HotEntry]) -> pa.Table:
    """The whole list of ``previous``'s manifest with the delta ``rows`` applied (what
    :func:`read_manifest` and a dict would give), in Arrow: the deltas of the chain (small)
    merged by key, then applied to its whole list at once, so rewriting the whole list costs
    no object per row."""
    chain = manifest_chain(root, previous.manifest)
    whole = read_manifest_table(root, chain[-1])
    changes: dict[SymbolDayKey, HotEntry] = {}
    for digest in reversed(chain[:-1]):
        changes.update((e.key, e) for e in manifest_rows(read_manifest_table(root, digest)))
    changes.update((e.key, e) for e in rows)
    if not changes:
        return whole
    keys = pa.array([_key_text(s, d) for s, d in changes])
    dates = pc.cast(whole["date"], pa.string())
    kept = whole.filter(
        pc.invert(pc.is_in(pc.binary_join_element_wise(whole["symbol"], dates, "\x00"), keys))
    )
    added = [e for e in changes.values() if e.size >= 0]
    table = pa.concat_tables(
        [kept.select(MANIFEST_SCHEMA.names).cast(MANIFEST_SCHEMA), _manifest_table(added)]
    )
    return table.sort_by([("symbol", "ascending"), ("date", "ascending")])


def _key_text(symbol: str, day: date) -> str:
    return f"{symbol}\x00{day.isoformat()}"


def _live(catalog: Catalog, entry: IndexEntry | None) -> IndexEntry | None:
    """``entry`` when it is a live hot file under ``catalog`` (present, not the source a
    consolidated copy was read from: ``placement.classified``)."""
    if entry is None or not entry.present:
        return None
    part = catalog.partitions.get(entry.key)
    source = None if part is None else part.source
    if source is not None and entry.stamp is not None and source.same_file(entry.stamp):
        return None
    return entry


def _audit_record(root: Path, version: Version) -> dict[str, Any]:
    body = version.to_dict()
    return {
        "event": EVENT_VERSION,
        "archive": str(root.absolute()),
        "version": version.version,
        "operation": version.operation,
        "catalog": version.catalog,
        "manifest": version.manifest,
        "symbol_days_changed": len(version.changed),
        "committed": body["time"],
    }


def _next_time(root: Path, count: int) -> int:
    """Now in ns, later than the latest version's time (times strictly increase)."""
    now = datetime.now(UTC)
    time_ns = utc_ns(now)
    if count:
        with indexed_times(root) as time_of:
            time_ns = max(time_ns, time_of(count) + 1000)
    return time_ns


def _by_key(entries: Iterable[HotEntry]) -> list[HotEntry]:
    return sorted(entries, key=lambda e: e.key)


def _keep_hot(root: Path, hot: HotFile, record: FileRecord | None) -> HotEntry:
    """Keep ``hot`` under its content name (a hard link; a copy where links fail) unless it is
    kept already; its manifest entry. The file is hashed only when no link of it is found
    under the name its ``record`` gives (the same inode).

    A kept file that is a link shares the hot file's bytes, so damage written into the hot
    file in place damages it too. The repair is to compact the symbol-day again: the new hot
    file (same ticks, same bytes, a new inode) finds its content name held by another file,
    and, its own bytes just hashed to that name, replaces it by a link to itself, which
    restores the copy every version that reads it (``verify-archive`` names them and this
    repair) and lets the next version find the link at once. Where links fail, the kept copy
    is replaced only when it no longer holds the bytes its name records."""
    if record is not None:
        entry = HotEntry(hot.symbol, hot.day, record.sha256, record.size)
        try:
            if hot_blob(root, entry).stat().st_ino == hot.stamp.inode:
                return entry
        except FileNotFoundError:
            pass
    entry = HotEntry(hot.symbol, hot.day, sha256_file(hot.path), hot.stamp.size)
    blob = hot_blob(root, entry)
    if _is_file(blob, hot.stamp):
        return entry
    blob.parent.mkdir(parents=True, exist_ok=True)
    fsio.remove_dead_writers_temps(blob.parent)  # a writer killed here before left its own
    temp = fsio.temp_path_for(blob)
    temp.unlink(missing_ok=True)
    try:
        os.link(hot.path, temp)
    except OSError:
        if _holds(blob, entry):
            return entry
        shutil.copyfile(hot.path, temp)
    os.replace(temp, blob)
    temp.unlink(missing_ok=True)  # a rename onto a link of the same file leaves both names
    fsio.fsync_dir(blob.parent)
    return entry


def _is_file(path: Path, stamp: FileStamp) -> bool:
    """True when ``path`` is the file of ``stamp`` (the same inode)."""
    try:
        found = path.stat()
    except FileNotFoundError:
        return False
    return (found.st_dev, found.st_ino) == (stamp.device, stamp.inode)


def _holds(blob: Path, entry: HotEntry) -> bool:
    """True when the kept copy ``blob`` exists with the size and sha256 its name records."""
    try:
        size = blob.stat().st_size
    except FileNotFoundError:
        return False
    return size == entry.size and sha256_file(blob) == entry.sha256


def _write_manifest(
    root: Path, entries: list[HotEntry], previous: Version | None, before: list[HotEntry]
) -> str:
    """Write the manifest of ``entries`` (content-named, if new); its sha256. It is a delta of
    ``previous``'s (``before``: its entries) while that chain is shorter than
    :data:`MAX_DELTA_DEPTH` and the delta is smaller, else the whole list."""
    now = {e.key: e for e in entries}
    old = {e.key: e for e in before}
    depth = 0 if previous is None else manifest_header(root, previous.manifest)[1] + 1
    delta = [now[k] for k in sorted(now) if old.get(k) != now[k]]
    gone = [HotEntry(s, d, "", -1) for s, d in sorted(old.keys() - now.keys())]
    if previous is not None and depth <= MAX_DELTA_DEPTH and len(delta) + len(gone) < len(now):
        rows, header = _by_key(delta + gone), (previous.manifest, depth)
    else:
        rows, header = _by_key(entries), ("", 0)
    return _manifest_file(root, rows, header)


def _manifest_file(root: Path, rows: list[HotEntry], header: tuple[str, int]) -> str:
    """Write the manifest of ``rows`` (sorted; ``header``: the manifest it is a delta of and
    its depth, ("", 0) for a whole list), content-named if new; its sha256."""
    return _write_manifest_table(root, _manifest_table(rows), header)


def _manifest_table(rows: list[HotEntry]) -> pa.Table:
    return pa.table(
        {
            "symbol": [e.symbol for e in rows],
            "date": [e.date for e in rows],
            "sha256": [e.sha256 for e in rows],
            "size": [e.size for e in rows],
        },
        schema=MANIFEST_SCHEMA,
    )


def _write_manifest_table(root: Path, table: pa.Table, header: tuple[str, int]) -> str:
    """Write the manifest ``table`` (sorted, :data:`MANIFEST_SCHEMA`), content-named if new;
    its sha256."""
    table = pa.Table.from_arrays(
        [table[name].combine_chunks() for name in MANIFEST_SCHEMA.names],
        schema=MANIFEST_SCHEMA,
    ).replace_schema_metadata({MANIFEST_BASE_KEY: json.dumps(list(header))})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    raw = sink.getvalue()
    digest = sha256_bytes(raw)
    _write_new(manifest_path(root, digest), raw)
    return digest


def _write_new(path: Path, raw: bytes) -> None:
    if not path.exists():
        fsio.atomic_write_bytes(path, raw)


def _changed(
    state: ArchiveState,
    entries: list[HotEntry],
    previous_catalog: Catalog | None,
    previous_entries: list[HotEntry],
) -> list[SymbolDayKey]:
    """Symbol-days whose copy differs from the previous version's (its catalog and manifest
    entries; all visible ones for the first, ``previous_catalog`` None)."""
    now = _placements(state.catalog, entries)
    before: dict[SymbolDayKey, str] = {}
    if previous_catalog is not None:
        before = _placements(previous_catalog, previous_entries)
    return sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))


def _same_files(before: Catalog, now: Catalog) -> bool:
    """True when two catalogs list the same consolidated files and withdrawn symbol-days."""
    return before.files == now.files and before.withdrawn == now.withdrawn


def _placements(catalog: Catalog, entries: list[HotEntry]) -> dict[SymbolDayKey, str]:
    """``{symbol-day: where its rows are}`` as the view reads them."""
    out = {key: p.file for key, p in catalog.partitions.items() if key not in catalog.withdrawn}
    out.update((e.key, f"hot:{e.sha256}") for e in entries)
    return out


def check_tag_arguments(name: object, version: object) -> None:
    """ConfigError for a bad tag name or a ``version`` that is not an int (nor None): what
    :func:`tag_version` refuses before it reads or writes anything."""
    check_tag_name(name)
    if version is not None and (not isinstance(version, int) or isinstance(version, bool)):
        raise ConfigError(f"version = {version!r}: expected a version number (an int) or None")


def tag_version(
    archive_root: Path,
    name: str,
    *,
    version: int | None = None,
    books: Books,
    catalog: CatalogStore,
) -> int:
    """Pin ``version`` (default: what a read shows now, :func:`_current_version`) under
    ``name``; audited (``books``). Returns the version. Tagging again with the same version
    changes nothing.

    Raises ConfigError for a bad name or a ``version`` that is not an int (nor None),
    VersionError for a version that is not kept or a name that pins another version already
    (tags are never moved).
    """
    root = Path(archive_root)
    check_tag_arguments(name, version)
    checked_count(root, whole=True)  # a tag pins an indexed version
    if version is None:
        version = _current_version(root, name, books, catalog)
    found = read_version(root, version)
    path = tag_path(root, name)
    if path.exists():
        pinned = read_tag(root, name)
        if pinned == version:
            return version
        raise VersionError(f"{root}: tag {name!r} pins version {pinned} already")
    books.audit(
        [{"event": EVENT_TAG, "archive": str(root.absolute()), "tag": name, "version": version}]
    )
    body = {"tag": name, "version": version, "time": found.to_dict()["time"]}
    fsio.atomic_write_bytes(path, sealed_json(body))
    return version


def _current_version(root: Path, name: str, books: Books, catalog: CatalogStore) -> int:
    """The number of the version a tag ``name`` given no version pins: for a new tag, what a
    read of the archive shows now (the latest version once the changes no version recorded
    are recorded: :func:`record_unrecorded`); for a tag that exists (never moved), the latest
    as it is, nothing recorded (the caller returns it if the tag pins it, else refuses).
    VersionError when there is no version and nothing to record."""
    latest = latest_version(root)
    if not tag_path(root, name).exists():
        latest = record_unrecorded(root, "tag", books=books, catalog=catalog) or latest
    if latest is None:
        raise VersionError(f"{root}: no version to tag yet")
    return latest.version

"""Versions of a tick archive: every committed change can be read again, pinned and pruned.

Every writer that commits a change of the archive (a compaction batch, a re-tiering, a
withdrawal or removal, a catalog rebuild) records a numbered *version* right after its commit,
under the archive's lock (:func:`record_version`). A version is:

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
  file's content, another consolidated file, hidden or gone) and ``sources`` (for symbol-days
  written from the mirror: ``[symbol, date, source bundle id]``);
- an entry of ``index.bin``: 8 bytes (big-endian ``time_ns``) per version, in number order, so
  looking a version up by number is one seek (O(1)) and by time a binary search over the index
  (O(log versions), times strictly increasing); the number of versions is the index's size / 8.

All of it lives under ``<archive root>/_skewtape_versions/``. A change that leaves every snapshot
as the latest version's records no version (versions that share every file cost nothing).
Consolidated files are content-named already (``part-<sha256[:16]>.parquet``, locally or in an
S3 tier): a version's catalog names them, and re-tiering keeps every file a kept version's catalog
lists (:func:`kept_catalog_paths`) until ``prune-versions`` (``ticks.archive.ops.version_pruning``)
drops the last version that reads it.

Tags (``tags/<NAME>.json``: ``{"tag", "version", "time"}``) pin a version by name; pruning never
removes a tagged version. Versions and tags are audited (``tick-archive-version``,
``tick-archive-tag``).

Crash safety: the snapshots and links come first (a crash leaves unreferenced files, which
pruning removes), then the record (atomic rename; a record without its index entry is not a
version and is overwritten by the next), then the index entry (appended and fsynced; a partial
entry is cut off by the next append), then the audit record. A crash after a writer's commit but
before its version: the next version (e.g. the rerun of the writer) records the state then.
"""

from __future__ import annotations

import functools
import io
import json
import os
import re
import shutil
import struct
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import ConfigError, VersionError
from skewtape_pipeline.hashing import FileStamp, sha256_bytes, sha256_file
from skewtape_pipeline.storage import TierFile
from skewtape_pipeline.ticks.archive.store.books import audit
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogStore,
    FileRecord,
    SymbolDayKey,
    parse_catalog,
)
from skewtape_pipeline.ticks.archive.store.hot_index import (
    HotIndex,
    IndexEntry,
    IndexMark,
    ensure_index,
    fold_if_long,
)
from skewtape_pipeline.ticks.archive.store.layout import (
    ARCHIVE_LOCK_WAIT_SECONDS,
    archive_lock,
    encode_symbol,
)
from skewtape_pipeline.ticks.archive.store.placement import (
    ArchiveState,
    HotFile,
    classified,
    hot_file_of,
    hot_files,
)
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import VerifiedFiles, verify_consolidated

VERSIONS_DIR = "_skewtape_versions"
INDEX_FILE = "index.bin"
SUFFIX = ".pq"
"""The version store's Parquet files end so, not ``.parquet``: a reader globbing the archive
root's ``**/*.parquet`` (the hot tier's plain layout) never meets them."""
EVENT_VERSION = "tick-archive-version"
EVENT_TAG = "tick-archive-tag"
_ENTRY = struct.Struct(">q")
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,99}")
_MANIFEST_SCHEMA = pa.schema(
    [
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
    ]
)
_CONTENT_NAME = "its content name"
_BASE_KEY = "skewtape_manifest_base"
MAX_DELTA_DEPTH = 15
"""A manifest is a delta of the previous version's at most this many times in a row; then the
whole list is written again (an as-of read applies at most this many small deltas)."""

AsOf = int | str | datetime


@dataclass(frozen=True)
class HotEntry:
    """One live hot file of a version: its symbol-day and content (sha256, size)."""

    symbol: str
    date: date
    sha256: str
    size: int

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.date)


@dataclass(frozen=True)
class Version:
    """One version's record (see the module notes)."""

    version: int
    time: datetime
    time_ns: int
    operation: str
    catalog: str | None
    manifest: str
    generation: int
    changed: list[SymbolDayKey]
    sources: list[tuple[str, date, str]]
    hot_index: IndexMark | None = None
    """Where the hot index stood when the version was taken (the next version reads the lines
    after it: ``hot_index.HotIndex.changes_since``); None for versions recorded before."""

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values (dates as ISO text)."""
        return {
            "hot_index": None if self.hot_index is None else self.hot_index.to_list(),
            "version": self.version,
            "time": self.time.isoformat().replace("+00:00", "Z"),
            "time_ns": self.time_ns,
            "operation": self.operation,
            "catalog": self.catalog,
            "manifest": self.manifest,
            "generation": self.generation,
            "changed": [[s, d.isoformat()] for s, d in self.changed],
            "sources": [[s, d.isoformat(), b] for s, d, b in self.sources],
        }


# --- paths --------------------------------------------------------------------------------------


def versions_dir(archive_root: Path) -> Path:
    """``<archive root>/_skewtape_versions``."""
    return Path(archive_root) / VERSIONS_DIR


def record_path(archive_root: Path, number: int) -> Path:
    """Where version ``number``'s record is: ``records/<number, 10 digits>.json``."""
    return versions_dir(archive_root) / "records" / f"{number:010d}.json"


def catalog_snapshot_path(archive_root: Path, digest: str) -> Path:
    """Where the catalog snapshot of sha256 ``digest`` is: ``catalogs/<digest>.pq``."""
    return versions_dir(archive_root) / "catalogs" / f"{digest}{SUFFIX}"


def manifest_path(archive_root: Path, digest: str) -> Path:
    """Where the manifest of sha256 ``digest`` is: ``manifests/<digest>.pq``."""
    return versions_dir(archive_root) / "manifests" / f"{digest}{SUFFIX}"


def hot_blobs_dir(archive_root: Path) -> Path:
    """The folder of the hot files versions keep under their content names (``hot/``)."""
    return versions_dir(archive_root) / "hot"


def snapshot_dirs(archive_root: Path) -> list[Path]:
    """The folders of the content-named files versions read (``manifests/``, ``catalogs/``,
    ``hot/``), each file in them named ``*`` + :data:`SUFFIX`."""
    store = versions_dir(archive_root)
    return [store / "manifests", store / "catalogs", hot_blobs_dir(archive_root)]


def hot_blob(archive_root: Path, entry: HotEntry) -> Path:
    """Where a version keeps a hot file: Hive folders as the hot tier's, named by content."""
    return _blob(str(hot_blobs_dir(archive_root)), entry)


def _blob(base: str, entry: HotEntry) -> Path:
    """:func:`hot_blob` below the folder ``base`` (one string built, one Path)."""
    day = entry.date
    return Path(
        f"{base}/symbol={_folder_name(entry.symbol)}/year={day.year:04d}"
        f"/month={day.month:02d}/date={day.isoformat()}/{entry.sha256}{SUFFIX}"
    )


@functools.lru_cache(maxsize=4096)
def _folder_name(symbol: str) -> str:
    return encode_symbol(symbol)


def _tag_path(root: Path, name: str) -> Path:
    return versions_dir(root) / "tags" / f"{name}.json"


# --- the index ----------------------------------------------------------------------------------


def version_count(archive_root: Path) -> int:
    """How many versions were ever recorded (pruned ones included): the latest number."""
    try:
        return os.stat(versions_dir(archive_root) / INDEX_FILE).st_size // _ENTRY.size
    except FileNotFoundError:
        return 0


def _time_of(handle: io.BufferedReader, number: int) -> int:
    handle.seek((number - 1) * _ENTRY.size)
    return _ENTRY.unpack(handle.read(_ENTRY.size))[0]


def _append_index(root: Path, count: int, time_ns: int) -> None:
    """Append the entry of version ``count + 1`` (a partial entry left by a crash is cut off)."""
    index = versions_dir(root) / INDEX_FILE
    fd = fsio.open_state_file(index, os.O_RDWR | os.O_CREAT)
    with fsio.naming(index, index), open(fd, "r+b") as handle:  # a full disk names the index
        handle.truncate(count * _ENTRY.size)
        handle.seek(count * _ENTRY.size)
        handle.write(_ENTRY.pack(time_ns))
        handle.flush()
        os.fsync(handle.fileno())


def version_at(archive_root: Path, when: datetime) -> int | None:
    """The number of the latest version committed at or before ``when`` (naive: UTC), None
    when there is none: a binary search over the index (O(log versions) reads of 8 bytes)."""
    wanted = _utc(when)
    count = version_count(archive_root)
    if count == 0:
        return None
    with open(versions_dir(archive_root) / INDEX_FILE, "rb") as handle:
        low, high = 0, count  # versions 1..low are at or before wanted
        while low < high:
            middle = (low + high + 1) // 2
            if _time_of(handle, middle) <= wanted:
                low = middle
            else:
                high = middle - 1
    return low or None


def _utc(when: datetime) -> int:
    moment = when.replace(tzinfo=UTC) if when.tzinfo is None else when
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


# --- records ------------------------------------------------------------------------------------


def read_version(archive_root: Path, number: int) -> Version:
    """The record of version ``number`` (one file read).

    Raises VersionError when there is no such version, or when its record is gone (pruned,
    or missing from a damaged or partial copy: the message names the file).
    """
    count = version_count(archive_root)
    if not 1 <= number <= count:
        raise VersionError(
            f"{archive_root}: version {number}: no such version (the archive has {count})"
        )
    path = record_path(Path(archive_root), number)
    raw = fsio.read_state_bytes(path)
    if raw is None:
        raise VersionError(
            f"{archive_root}: version {number} was pruned or its record is missing ({path}: "
            "prune-versions removes it; a copy of the archive may also have left it out)"
        )
    return _parse_record(fsio.load_json(raw, path, error=VersionError), path)


def _parse_record(body: Any, path: Path) -> Version:
    try:
        return Version(
            version=body["version"],
            time=datetime.fromisoformat(body["time"].replace("Z", "+00:00")),
            time_ns=body["time_ns"],
            operation=body["operation"],
            catalog=body["catalog"],
            manifest=body["manifest"],
            generation=body["generation"],
            changed=[(s, date.fromisoformat(d)) for s, d in body["changed"]],
            sources=[(s, date.fromisoformat(d), b) for s, d, b in body["sources"]],
            hot_index=IndexMark.from_list(body.get("hot_index")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise VersionError(f"{path}: not a version record ({exc!r})") from None


def list_versions(archive_root: Path) -> list[Version]:
    """The kept versions, oldest first (reads every kept record)."""
    root = Path(archive_root)
    out = []
    for number in range(1, version_count(root) + 1):
        raw = fsio.read_state_bytes(record_path(root, number))
        if raw is not None:
            out.append(_parse_record(fsio.load_json(raw, root, error=VersionError), root))
    return out


def latest_version(archive_root: Path) -> Version | None:
    """The latest version (never pruned), None before the first."""
    count = version_count(archive_root)
    return read_version(archive_root, count) if count else None


# --- recording ----------------------------------------------------------------------------------


def record_version(
    archive_root: Path,
    operation: str,
    *,
    sources: Mapping[SymbolDayKey, str] | None = None,
    audit_log: Path | None = None,
) -> Version | None:
    """Record the archive's state now as a new version; call it under the archive's lock,
    right after a commit. Returns the new version, or None when the state is the latest
    version's (nothing written). ``sources`` name the source bundle of symbol-days written
    from the mirror (kept for those the version changed).

    What it reads follows what changed: while the catalog is the latest version's, only the
    hot index's lines since that version (``HotIndex.changes_since``) and the catalog entries
    of their symbol-days; otherwise (a re-tiering, a withdrawal, a rebuild, the first version,
    a version recorded before the hot index) every live hot file against the latest version's.

    Raises TickFormatError for a damaged catalog, VersionError for a damaged version log.
    """
    root = Path(archive_root)
    index = ensure_index(root)
    catalog_digest = _snapshot_catalog(root)
    previous = latest_version(root)
    diff = None
    if previous is not None and previous.catalog == catalog_digest:
        diff = index.changes_since(previous.hot_index)
    if diff is None:
        recorded = _everything(root, index, previous, catalog_digest)
    else:
        assert previous is not None
        recorded = _what_changed(root, index, previous, diff)
    if recorded is None:
        fold_if_long(index)
        return None
    manifest, changed, generation = recorded
    count = version_count(root)
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
    fsio.atomic_write_bytes(record_path(root, version.version), _dumps(version.to_dict()))
    faults.checkpoint("version-record")
    _append_index(root, count, time_ns)
    faults.checkpoint("version-indexed")
    audit(root, audit_log, [_audit_record(root, version)])
    fold_if_long(index)
    return version


def _everything(
    root: Path, index: HotIndex, previous: Version | None, catalog_digest: str | None
) -> tuple[str, list[SymbolDayKey], int] | None:
    """(manifest, changed, generation) of the state now compared whole with ``previous``'s;
    None when they are the same."""
    state = classified(CatalogStore(root).read(), hot_files(root, index))
    entries = [_keep_hot(root, hot, hot.record) for hot in state.hot_live]
    before = [] if previous is None else read_manifest(root, previous)
    if previous is not None and previous.catalog == catalog_digest and before == _by_key(entries):
        return None
    manifest = _write_manifest(root, entries, previous, before)
    changed = _changed(root, previous, state, entries, before)
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
    catalog = _version_catalog(root, previous) if diff else Catalog()
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
    depth = _manifest_header(root, previous.manifest)[1] + 1
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
    whole = _read_manifest_table(root, chain[-1])
    changes: dict[SymbolDayKey, HotEntry] = {}
    for digest in reversed(chain[:-1]):
        changes.update((e.key, e) for e in _manifest_rows(_read_manifest_table(root, digest)))
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
        [kept.select(_MANIFEST_SCHEMA.names).cast(_MANIFEST_SCHEMA), _manifest_table(added)]
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


def commit_version(
    archive_root: Path,
    operation: str,
    *,
    sources: Mapping[SymbolDayKey, str] | None = None,
    audit_log: Path | None = None,
    lock_timeout: float = ARCHIVE_LOCK_WAIT_SECONDS,
) -> Version | None:
    """:func:`record_version` under the archive's lock, for a writer that let it go (a
    compaction batch). ``lock_timeout``: the seconds the writer's own locking waited (a
    compaction passes ``compact.compaction_lock_wait`` of its ``Archive``), so recording its
    version waits as long as its writes did. Raises ArchiveBusyError after ``lock_timeout``
    seconds."""
    with archive_lock(archive_root, timeout=lock_timeout, what="recording a version"):
        return record_version(archive_root, operation, sources=sources, audit_log=audit_log)


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
    time_ns = _utc(now)
    if count:
        with open(versions_dir(root) / INDEX_FILE, "rb") as handle:
            time_ns = max(time_ns, _time_of(handle, count) + 1000)
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
    depth = 0 if previous is None else _manifest_header(root, previous.manifest)[1] + 1
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
        schema=_MANIFEST_SCHEMA,
    )


def _write_manifest_table(root: Path, table: pa.Table, header: tuple[str, int]) -> str:
    """Write the manifest ``table`` (sorted, :data:`_MANIFEST_SCHEMA`), content-named if new;
    its sha256."""
    table = pa.Table.from_arrays(
        [table[name].combine_chunks() for name in _MANIFEST_SCHEMA.names],
        schema=_MANIFEST_SCHEMA,
    ).replace_schema_metadata({_BASE_KEY: json.dumps(list(header))})
    sink = io.BytesIO()
    pq.write_table(table, sink, compression="zstd")
    raw = sink.getvalue()
    digest = sha256_bytes(raw)
    _write_new(manifest_path(root, digest), raw)
    return digest


def _snapshot_catalog(root: Path) -> str | None:
    raw = fsio.read_state_bytes(CatalogStore(root).path)
    if raw is None:
        return None
    digest = sha256_bytes(raw)
    _write_new(catalog_snapshot_path(root, digest), raw)
    return digest


def _write_new(path: Path, raw: bytes) -> None:
    if not path.exists():
        fsio.atomic_write_bytes(path, raw)


def _dumps(body: Any) -> bytes:
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def _changed(
    root: Path,
    previous: Version | None,
    state: ArchiveState,
    entries: list[HotEntry],
    previous_entries: list[HotEntry],
) -> list[SymbolDayKey]:
    """Symbol-days whose copy differs from ``previous``'s (all visible ones for the first)."""
    now = _placements(state.catalog, entries)
    before: dict[SymbolDayKey, str] = {}
    if previous is not None:
        before = _placements(_version_catalog(root, previous), previous_entries)
    return sorted(k for k in now.keys() | before.keys() if now.get(k) != before.get(k))


def _placements(catalog: Catalog, entries: list[HotEntry]) -> dict[SymbolDayKey, str]:
    """``{symbol-day: where its rows are}`` as the view reads them."""
    out = {key: p.file for key, p in catalog.partitions.items() if key not in catalog.withdrawn}
    out.update((e.key, f"hot:{e.sha256}") for e in entries)
    return out


# --- reading a version --------------------------------------------------------------------------


def read_manifest(archive_root: Path, version: Version) -> list[HotEntry]:
    """The live hot files of ``version``, by symbol-day (its manifest's chain of deltas, at most
    :data:`MAX_DELTA_DEPTH` + 1 small files, applied to the whole list it starts from)."""
    chain = manifest_chain(archive_root, version.manifest)
    entries: dict[SymbolDayKey, HotEntry] = {}
    for digest in reversed(chain):
        for entry in _manifest_rows(_read_manifest_table(archive_root, digest)):
            if entry.size < 0:
                entries.pop(entry.key, None)
            else:
                entries[entry.key] = entry
    return [entries[key] for key in sorted(entries)]


def manifest_chain(archive_root: Path, digest: str) -> list[str]:
    """The manifest ``digest`` and the ones its deltas rest on, newest first."""
    chain = [digest]
    while True:
        base, _ = _manifest_header(archive_root, chain[-1])
        if not base:
            return chain
        chain.append(base)


def _read_manifest_table(archive_root: Path, digest: str) -> pa.Table:
    path = manifest_path(Path(archive_root), digest)
    try:
        return pq.read_table(path)
    except (OSError, pa.ArrowException) as exc:
        raise VersionError(f"{path}: a version's manifest: {exc}") from None


def _manifest_header(archive_root: Path, digest: str) -> tuple[str, int]:
    """(the manifest this one is a delta of, "" for a whole list; its depth)."""
    path = manifest_path(Path(archive_root), digest)
    try:
        metadata = pq.read_schema(path).metadata or {}
        base, depth = fsio.load_json(metadata[_BASE_KEY.encode()], path, error=VersionError)
    except (OSError, pa.ArrowException, KeyError, ValueError, TypeError) as exc:
        raise VersionError(f"{path}: a version's manifest: {exc!r}") from None
    return base, depth


def _manifest_rows(table: pa.Table) -> list[HotEntry]:
    return [
        HotEntry(s, d, h, n)
        for s, d, h, n in zip(
            *(table[name].to_pylist() for name in _MANIFEST_SCHEMA.names), strict=True
        )
    ]


_CATALOGS: dict[str, Catalog] = {}
"""Catalog snapshots parsed in this process, by sha256 (content-named: the same bytes in any
archive), the last few kept."""


def _version_catalog(root: Path, version: Version) -> Catalog:
    if version.catalog is None:
        return Catalog()
    cached = _CATALOGS.get(version.catalog)
    if cached is not None:
        return cached
    path = catalog_snapshot_path(root, version.catalog)
    raw = fsio.read_state_bytes(path)
    if raw is None:
        raise VersionError(f"{path}: version {version.version}'s catalog is missing")
    catalog = parse_catalog(path, raw)
    if len(_CATALOGS) >= 4:
        _CATALOGS.pop(next(iter(_CATALOGS)))
    _CATALOGS[version.catalog] = catalog
    return catalog


def version_state(archive_root: Path, version: Version) -> ArchiveState:
    """Where every symbol-day lived as of ``version``: its catalog, its hot files (kept under
    their content names) and the catalogued days those hid.

    Raises VersionError when a kept hot file is missing.
    """
    root = Path(archive_root)
    catalog = _version_catalog(root, version)
    live = []
    base = f"{versions_dir(root)}/hot"
    for entry in read_manifest(root, version):
        blob = _blob(base, entry)
        try:
            stamp = FileStamp.of(blob)
        except FileNotFoundError:
            raise VersionError(
                f"{blob}: version {version.version} reads it but it is missing"
            ) from None
        live.append(HotFile(entry.symbol, entry.date, blob, stamp))
    overridden = frozenset(h.key for h in live if h.key in catalog.partitions)
    return ArchiveState(catalog, live, [], overridden)


def verify_version(tiers: ArchiveTiers, state: ArchiveState) -> None:
    """Verify the files of a version's ``state`` (hot files by their content names,
    consolidated files by its catalog, found through the archive's resolved ``tiers``) unless
    their stamps are unchanged since they last were; DamagedFileError names a file that
    differs."""
    root = tiers.root
    verified = VerifiedFiles(root)
    try:
        for hot in state.hot_live:
            digest = hot.path.stem
            record = FileRecord(hot.stamp.size, digest)
            rel = hot.path.relative_to(root).as_posix()
            verified.check(rel, hot.path, hot.stamp, record, _CONTENT_NAME)
        verify_consolidated(verified, tiers, state)
    finally:
        verified.save()


def resolve_as_of(archive_root: Path, as_of: AsOf) -> Version:
    """The kept version ``as_of`` names: a number (an int, or text of digits), a time (a
    datetime, or ISO text such as ``2026-11-30T17:00:00Z``: the latest version at or before
    it), or a tag name. O(1) for a number or a tag, O(log versions) for a time.

    Raises VersionError when it names no kept version (pruned, unknown tag, a time before the
    first version).
    """
    root = Path(archive_root)
    if isinstance(as_of, bool):
        raise VersionError(f"as_of = {as_of!r}: expected a version, a time or a tag")
    if isinstance(as_of, int):
        return read_version(root, as_of)
    if isinstance(as_of, datetime):
        return _at_time(root, as_of)
    if not isinstance(as_of, str) or not as_of:
        raise VersionError(f"as_of = {as_of!r}: expected a version, a time or a tag")
    if as_of.isdigit():
        return read_version(root, int(as_of))
    if _TAG_NAME.fullmatch(as_of):
        return read_version(root, read_tag(root, as_of))
    try:
        when = datetime.fromisoformat(as_of.replace("Z", "+00:00"))
    except ValueError:
        raise VersionError(
            f"as_of = {as_of!r}: not a version number, a time (ISO 8601) or a tag name"
        ) from None
    return _at_time(root, when)


def _at_time(root: Path, when: datetime) -> Version:
    number = version_at(root, when)
    if number is None:
        raise VersionError(f"{root}: no version at or before {when.isoformat()}")
    return read_version(root, number)


# --- tags ---------------------------------------------------------------------------------------


def check_tag_name(name: object) -> str:
    """``name`` when it is a tag name (a letter, then up to 99 letters, digits, ``.``, ``_``,
    ``-``); ConfigError otherwise."""
    if not isinstance(name, str) or not _TAG_NAME.fullmatch(name):
        raise ConfigError(
            f"tag {name!r}: expected a letter then letters, digits, '.', '_' or '-' "
            "(at most 100 characters)"
        )
    return name


def read_tag(archive_root: Path, name: str) -> int:
    """The version number the tag ``name`` pins; VersionError when there is no such tag."""
    path = _tag_path(Path(archive_root), check_tag_name(name))
    raw = fsio.read_state_bytes(path)
    if raw is None:
        raise VersionError(f"{archive_root}: no tag {name!r}")
    body = fsio.load_json(raw, path, error=VersionError)
    number = body.get("version") if isinstance(body, dict) else None
    if not isinstance(number, int) or isinstance(number, bool):
        raise VersionError(f"{path}: field version: {number!r}, expected a version number")
    return number


def list_tags(archive_root: Path) -> dict[str, int]:
    """``{tag: version}``, by name."""
    folder = versions_dir(archive_root) / "tags"
    names = sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []
    return {name: read_tag(archive_root, name) for name in names}


def tag_version(
    archive_root: Path,
    name: str,
    *,
    version: int | None = None,
    audit_log: Path | None = None,
) -> int:
    """Pin ``version`` (default: the latest) under ``name``; audited. Returns the version.
    Tagging again with the same version changes nothing.

    Raises ConfigError for a bad name, VersionError for a version that is not kept or a name
    that pins another version already (tags are never moved).
    """
    root = Path(archive_root)
    check_tag_name(name)
    if version is None:
        latest = latest_version(root)
        if latest is None:
            raise VersionError(f"{root}: no version to tag yet")
        version = latest.version
    found = read_version(root, version)
    path = _tag_path(root, name)
    if path.exists():
        pinned = read_tag(root, name)
        if pinned == version:
            return version
        raise VersionError(f"{root}: tag {name!r} pins version {pinned} already")
    audit(
        root,
        audit_log,
        [{"event": EVENT_TAG, "archive": str(root.absolute()), "tag": name, "version": version}],
    )
    body = {"tag": name, "version": version, "time": found.to_dict()["time"]}
    fsio.atomic_write_bytes(path, _dumps(body))
    return version


# --- what kept versions read --------------------------------------------------------------------


def kept_catalogs(archive_root: Path) -> list[Catalog]:
    """The catalogs of the kept versions (each distinct snapshot once)."""
    root = Path(archive_root)
    seen: dict[str, Catalog] = {}
    for version in list_versions(root):
        if version.catalog is not None and version.catalog not in seen:
            seen[version.catalog] = _version_catalog(root, version)
    return list(seen.values())


def kept_files(tiers: ArchiveTiers) -> set[TierFile]:
    """The consolidated files some kept version of the archive ``tiers`` resolves
    (``Archive.tiers``) reads (local paths or objects): re-tiering and pruning leave them in
    place."""
    return {tiers.resolve(path) for path in kept_catalog_paths(tiers.root)}


def kept_catalog_paths(archive_root: Path) -> list[str]:
    """The catalog paths of the consolidated files some kept version of the archive at
    ``archive_root`` reads (repeats included), in the order of :func:`kept_catalogs`."""
    return [item.path for catalog in kept_catalogs(archive_root) for item in catalog.files.values()]


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

"""The archive catalog: which consolidated file holds each symbol-day, on disk.

The catalog is one Parquet file, ``<archive root>/_skewtape_catalog.parquet``, read and
written by the archive's :class:`CatalogStore` (``core.catalog``) and replaced atomically
(temporary file, fsync, rename): every re-tiering commits by that one rename, so a reader sees
either the old placement or the new one, never a mixture.

Catalog paths name a file by its tier and its path inside that tier's root:
``WARM/year=2026/month=02/part-<sha256[:16]>.parquet`` is resolved against the archive's WARM
root when read (``tiers.ArchiveTiers.resolve``: a local path, or an object when the root is an
S3 prefix), and a path that is not a plain relative path inside its root is refused. Hot
file paths (the source stamps) are relative to the archive root itself. So an archive and its
tier roots are self-contained: copied or moved together, under any names, the copy reads its own
files.

Catalog version 3 (the file): one row per catalogued symbol-day, sorted by symbol then date:
its consolidated file's catalog path, rows, byte share, withdrawn mark and source stamp; its
key-value metadata ``skewtape_catalog`` holds JSON: the generation and the consolidated files
(path, tier, period, bytes, rows, sha256, symbol-days). The columns and the rules of a row are
``store.catalog_format``'s. Any engine reads it, e.g. DuckDB::

    SELECT * FROM 'archive/_skewtape_catalog.parquet';
    SELECT value FROM parquet_kv_metadata('archive/_skewtape_catalog.parquet');

The catalog is an index, not the only record: every consolidated file carries its tier,
period, catalog generation and symbol-days in its own key-value metadata, so
``ops.integrity.rebuild_catalog`` can rebuild the catalog from the files. Older catalog
versions (2: root-relative ``../`` paths; 1: JSON) are not read: only this project ever wrote
them (an archive of theirs is re-created from its sources).

Hot file records
----------------
Every hot symbol-day file's size and sha256 are recorded when it is published, in the hot
index (``ticks.archive.store.hot_index``): appended (and fsynced) under the archive's lock right
after the file is renamed into place, as a line of ``<archive root>/_skewtape_hot_files.jsonl``
(``{"path", "sha256", "size", "stamp"}``; ``{"path", "gone": true}`` when a file is removed),
which is folded into ``_skewtape_hot_index.pq`` once it grows long and by re-tiering
(:meth:`CatalogStore.settle_hot_records`). The last line of a path wins
(:meth:`CatalogStore.hot_records`). A compaction killed between the rename and the record
leaves its note (:meth:`CatalogStore.begin_publication`), which readers accept the file by
and the next holder of the lock finishes (``ArchiveCore.locked``).
Appending keeps a compaction's cost independent of the archive's size (rewriting the catalog
per file would not). A line cut short by a crash (no final newline) is ignored and cut off by
the next append: its file then has no record, or an older one, and rerunning the compaction
writes both again. An archive written before hot files were recorded has none:
``rebuild-catalog`` records its hot files as they are then
(``ticks.archive.ops.integrity.rebuild_catalog``); until then ``verify-archive``, ``query`` and
``retier`` refuse to vouch for them and say so.
"""

from __future__ import annotations

import bisect
import json
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from functools import cached_property, partial
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.hashing import (
    FileStamp,
    ParsedByStamp,
    is_sha256_hex,
    sha256_bytes,
    sha256_file,
)
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.books import EVENT_COMMIT, Books
from skewtape_pipeline.ticks.archive.store.catalog_format import (
    CATALOG_FORMAT,
    CATALOG_METADATA_KEY,
    CATALOG_VERSION,
    EPOCH_ORDINAL,
    SOURCE_COLUMNS,
    STAMP_COLUMNS,
    catalog_bytes,
    check_header,
    check_rows,
    checked_columns,
    dates,
    hex_digests,
    hot_relpath,
    is_count,
    listed_field,
    read_parquet,
)
from skewtape_pipeline.ticks.archive.store.layout import CATALOG_FILE
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.tiers import inside_path, normalized

HOT_RECORDS_FILE = "_skewtape_hot_files.jsonl"
NOTE_MAX_BYTES = 1 << 20  # the largest publication note read (one is a few hundred bytes)
NOTE_BLOCK = 4096  # notes are padded with spaces to a multiple: all blanked notes are equal
PUBLICATION_FILE = ".skewtape-publishing.json"
"""A hot file's publication under way (:class:`Publication`), in the archive root: written
before the file is renamed into place, blanked once its record and audit record follow."""

SymbolDayKey = tuple[str, date]


@dataclass(frozen=True)
class SourceStamp:
    """The hot symbol-day file a partition's rows were first read from, as it was then."""

    path: str
    sha256: str
    size: int
    inode: int
    mtime_ns: int

    def same_file(self, stamp: FileStamp) -> bool:
        """True when ``stamp`` (of the file at :attr:`path` now) is the file that was read."""
        return (stamp.inode, stamp.size, stamp.mtime_ns) == (self.inode, self.size, self.mtime_ns)


@dataclass(frozen=True)
class FileRecord:
    """What a file held when it was written: its size in bytes and its sha256 (hex)."""

    size: int
    sha256: str


@dataclass(frozen=True)
class Publication:
    """A hot file a compaction renames into place under the lock: its path from the archive
    root, the record it is published with, the audit record of the write."""

    rel: str
    record: FileRecord
    audit: dict[str, Any]


@dataclass(frozen=True)
class CatalogFile:
    """One consolidated file: where (its catalog path: tier, then the path inside the tier's
    root), which tier and period, its size and sha256, and what it holds."""

    path: str
    tier: str
    period: str
    bytes: int
    rows: int
    sha256: str
    symbol_days: int


@dataclass(frozen=True)
class CatalogPartition:
    """Where one symbol-day's rows live in a consolidated file, and its share of the bytes.

    ``byte_share`` is this symbol-day's part of the file's bytes: each row group's bytes split
    by rows among the symbol-days in it, the footer spread over all by rows (largest remainder,
    so the shares of a file add up to its size exactly).
    """

    symbol: str
    date: date
    tier: str
    file: str
    rows: int
    byte_share: int
    source: SourceStamp | None = None

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.date)


@dataclass(frozen=True)
class Catalog:
    """The consolidated files of an archive and the symbol-days they hold (immutable).

    ``withdrawn`` are catalogued symbol-days the publisher has since corrected away (no ticks
    any more): their consolidated copy is hidden until re-tiering rewrites the file without it.
    """

    generation: int = 0
    files: Mapping[str, CatalogFile] = field(default_factory=dict)
    partitions: Mapping[SymbolDayKey, CatalogPartition] = field(default_factory=dict)
    withdrawn: frozenset[SymbolDayKey] = frozenset()

    def to_bytes(self) -> bytes:
        """The catalog file's bytes (Parquet, built in memory; equal catalogs give equal bytes).

        Raises
        ------
        TickFormatError
            The catalog could not be read back: a partition whose file is not listed or has
            another tier, a withdrawn symbol-day that is not catalogued, a bad sha256 or tier,
            a number out of range (names the partition or file and the field).
        """
        return _encode(self)


def _order(partition: CatalogPartition) -> tuple[str, date]:
    return partition.key


# --- paths --------------------------------------------------------------------------------------

_TIER_ROOTS = (WARM, COLD)


def split_catalog_path(relative: str) -> tuple[str, str]:
    """``(tier, path inside the tier root)`` of a consolidated file's catalog path.

    Raises TickFormatError when it does not start with ``WARM/`` or ``COLD/`` or leaves the
    tier's root.
    """
    tier, _, rest = relative.partition("/")
    if tier not in _TIER_ROOTS:
        raise TickFormatError(
            f"catalog path {relative!r}: expected WARM/<path> or COLD/<path> (a tier root)"
        )
    return tier, inside_path(rest, relative).as_posix()


def parse_catalog(path: Path, raw: bytes) -> Catalog:
    """The catalog in ``raw`` (a catalog file's bytes; ``path`` names it in errors), validated
    as :meth:`CatalogStore.read` does. Raises TickFormatError when it is malformed."""
    return _parse(path, raw)


# --- the catalog and the hot file records of one archive ---------------------------------------


class CatalogStore:
    """The catalog file and the hot file records of the archive at ``root``: each method knows
    its file (``ArchiveCore`` builds one, ``core.catalog``)."""

    def __init__(self, root: Path):
        self.root = Path(root)
        self._note = self.root / PUBLICATION_FILE
        self._index: hot_index.HotIndex | None = None
        self._legacy: tuple[FileStamp, dict[str, FileRecord]] | None = None

    def __repr__(self) -> str:
        return f"CatalogStore({str(self.root)!r})"

    @property
    def path(self) -> Path:
        """``<archive root>/_skewtape_catalog.parquet``."""
        return self.root / CATALOG_FILE

    @property
    def hot_records_path(self) -> Path:
        """``<archive root>/_skewtape_hot_files.jsonl``: the hot index's log (see the module
        notes and ``ticks.archive.store.hot_index``)."""
        return self.root / HOT_RECORDS_FILE

    def resolve_hot(self, relative: str) -> Path:
        """The hot file a source stamp's path names, inside the archive root; TickFormatError
        for a path that would leave the root."""
        return normalized(self.root) / inside_path(relative, relative)

    def read(self) -> Catalog:
        """The archive's catalog; an empty one (generation 0) when it has none yet (writers
        call ``trust.checked_catalog``, which refuses when consolidated files exist
        then).

        Every row is validated on reading (column-wise); a partition object is built when it
        is first looked up, so looking up a few symbol-days of a large catalog stays cheap.
        The catalogs parsed in this process are kept by their file's stamp (the catalog is
        only ever replaced by a rename), so a writer reading it per symbol-day parses it once.

        Raises
        ------
        TickFormatError
            The catalog file is unreadable or malformed (names the file, the field or column
            and the row).
        """
        parquet = self.path
        try:
            return _PARSED.read(parquet, partial(_parse, parquet))
        except FileNotFoundError:
            return Catalog()
        except OSError as exc:
            raise TickFormatError(f"{parquet}: cannot read the catalog ({exc.strerror})") from None

    def write(self, catalog: Catalog) -> str:
        """Replace the catalog atomically (temporary file, fsync, rename, fsync the folder);
        returns the sha256 of the bytes written (built once).

        Raises TickFormatError, writing nothing, for a catalog that would not read back
        (see :meth:`Catalog.to_bytes`).
        """
        data = catalog.to_bytes()
        fsio.atomic_write_bytes(self.path, data)
        return sha256_bytes(data)

    def audit_record(self, event: str, catalog: Catalog, digest: str) -> dict[str, Any]:
        """The fields an audit record of a catalog written starts with: ``event``, the archive,
        the catalog's generation and ``digest``, the sha256 :meth:`write` returned."""
        return {
            "event": event,
            "archive": str(self.root.absolute()),
            "generation": catalog.generation,
            "catalog_sha256": digest,
        }

    def commit(self, catalog: Catalog, books: Books, details: Mapping[str, Any]) -> None:
        """Replace the catalog with ``catalog`` (:meth:`write`), then append the commit to the
        audit log of the archive's ``books``: its generation, the sha256 of its bytes and
        ``details``."""
        digest = self.write(catalog)
        books.audit([self.audit_record(EVENT_COMMIT, catalog, digest) | dict(details)])

    def without_gone_source(self, partition: CatalogPartition) -> CatalogPartition:
        """``partition`` without its source stamp when the hot file it names is gone (removed
        after an earlier commit): only a file still there can be the superseded copy; one
        written there later is a newer copy, even should it reuse the inode, size and mtime."""
        source = partition.source
        if source is None or self.resolve_hot(source.path).exists():
            return partition
        return replace(partition, source=None)

    def forget_gone_sources(self, catalog: Catalog, books: Books) -> Catalog:
        """The committed ``catalog`` without the source stamps of hot files that are gone now
        (:meth:`without_gone_source`).

        A stamp only serves while its hot file is on disk (telling the superseded copy from a
        newer one); once removal is done, it is dropped by one more atomic commit (audited in
        ``books``), so the catalog stops carrying a path and a sha256 per symbol-day. That
        commit keeps the generation (no symbol-day changes file: the generation counts the
        commits that move rows). Unchanged (nothing written) when no stamp is stale.
        """
        partitions = {key: self.without_gone_source(p) for key, p in catalog.partitions.items()}
        if all(partitions[key] is p for key, p in catalog.partitions.items()):
            return catalog
        settled = replace(catalog, partitions=partitions)
        faults.checkpoint("forgetting-sources")
        reason = "forget the source stamps of removed hot files"
        self.commit(settled, books, {"reason": reason, "symbol_days_moved": 0})
        return settled

    def hot_records(self) -> dict[str, FileRecord]:
        """``{hot file path relative to the archive root: its latest record}`` (the hot
        index's, or the log's lines when the archive has no index yet); {} when none were
        written yet. A last line without its newline (a crash while appending) is ignored.

        Raises TickFormatError naming the file and the line when a complete line is
        malformed, LinkedStateFileError when the file is a symbolic link.
        """
        index = hot_index.HotIndex.read(self.root)
        records = hot_index.legacy_records(self.root) if index is None else index.records()
        return {rel: FileRecord(size, digest) for rel, (size, digest) in records.items()}

    def hot_record(self, key: SymbolDayKey, rel: str) -> FileRecord | None:
        """The latest record of ``key``'s hot file ``rel`` (its path relative to the root), or
        None when none was written for it. The hot index is kept between calls and brought up
        to date with what was appended since (``HotIndex.refreshed``), and only the base's row
        group that may hold ``key`` is decoded: the cost does not grow with the archive. An
        archive without a hot index: its log's lines (:meth:`hot_records`, read again only when
        the log changed)."""
        index = None if self._index is None else self._index.refreshed()
        self._index = index = index if index is not None else hot_index.HotIndex.read(self.root)
        if index is None:
            try:
                stamp = FileStamp.of(self.hot_records_path)
            except FileNotFoundError:
                return None
            if self._legacy is None or self._legacy[0] != stamp:
                self._legacy = (stamp, self.hot_records())
            return self._legacy[1].get(rel)
        entry = index.get(key)
        if entry is None or entry.rel != rel or entry.sha256 is None or entry.size is None:
            return None
        return FileRecord(entry.size, entry.sha256)

    def append_hot_record(
        self, rel: str, record: FileRecord, stamp: FileStamp | None = None
    ) -> None:
        """Record the hot file ``rel`` just renamed into place (its size and sha256, and its
        stamp now) in the hot index's log and fsync it; call it under the archive's lock,
        after the hot index exists (``hot_index.ensure_index``). Raises LinkedStateFileError
        when the log is a symbolic link."""
        body: dict[str, Any] = {"path": rel, "sha256": record.sha256, "size": record.size}
        if stamp is not None:
            body = hot_index.published_line(rel, record.size, record.sha256, stamp)
        hot_index.append_lines(self.root, [body])

    def begin_publication(self, publication: Publication) -> None:
        """Note ``publication`` in :data:`PUBLICATION_FILE` before its file is renamed into
        place, under the lock (:meth:`end_publication` once the record and audit record are
        appended). Not fsynced (after a power loss the file may lack its record: compact the
        symbol-day again). LinkedStateFileError when the note is a link."""
        body = {"path": publication.rel, "size": publication.record.size,
                "sha256": publication.record.sha256, "audit": publication.audit}  # fmt: skip
        self._write_note(json.dumps(body, sort_keys=True).encode())

    def publication(self) -> Publication | None:
        """The publication a compaction began and did not end (:meth:`begin_publication`);
        None when there is none, or its note was cut short (a crash or a full disk while it
        was written: its file was never renamed). Raises TickFormatError naming the note when
        it holds anything else (a path that is not a hot file's, more than
        :data:`NOTE_MAX_BYTES`) or is not a regular file, LinkedStateFileError when it is a
        symbolic link."""
        try:
            fd = fsio.open_state_file(self._note, os.O_RDONLY | os.O_NONBLOCK)
        except FileNotFoundError:
            return None
        regular, raw = stat.S_ISREG(os.fstat(fd).st_mode), b"?"
        if not regular:
            os.close(fd)
        else:
            with open(fd, "rb") as note:
                raw = note.read(NOTE_MAX_BYTES + 1)
        if len(raw) <= NOTE_MAX_BYTES and not raw.strip():  # none yet, or blanked
            return None
        publication = None
        if regular and len(raw) <= NOTE_MAX_BYTES:
            try:
                body = fsio.load_json(raw, self._note, error=TickFormatError)
            except TickFormatError:
                return None  # cut short while it was written
            publication = _publication_of(body)
        if publication is None:
            raise TickFormatError(
                f"{self._note}: not a hot file's publication (expected a file holding a hot "
                "file's path, size, sha256 and audit record); remove it, then compact the "
                "symbol-day it names again"
            )
        return publication

    def finish_publication(self, publication: Publication) -> bool:
        """Finish ``publication``, left by a killed compaction, under the archive's lock: when
        its file is in place as published, append its record (the stamp now) unless it is
        there and return True, for the caller to append the audit record (unless the log ends
        with it: a kill after the audit) then empty the note; False when the file was never
        renamed into place. TickFormatError when the hot index does not read."""
        rel, record = publication.rel, publication.record
        path, key = self.resolve_hot(rel), hot_index.key_of_rel(rel)
        try:
            stamp = FileStamp.of(path)
        except FileNotFoundError:
            return False
        if key is None or stamp.size != record.size or sha256_file(path) != record.sha256:
            return False
        if self.hot_record(key, rel) != record:
            self.append_hot_record(rel, record, stamp)
        return True

    def end_publication(self) -> None:
        """Blank the note of a publication (:meth:`begin_publication`) when it holds one."""
        try:
            fd = fsio.open_state_file(self._note, os.O_RDWR | os.O_NONBLOCK)
        except FileNotFoundError:
            return
        with fsio.naming(self._note, self._note), open(fd, "r+b") as note:
            if stat.S_ISREG(os.fstat(fd).st_mode) and (held := note.read()).strip():
                os.pwrite(fd, b" " * len(held), 0)

    def _write_note(self, data: bytes) -> None:
        """Put ``data`` padded to :data:`NOTE_BLOCK` bytes over the note's old bytes (an OSError
        names it; truncated and written again cost 0.15 ms a publication on ext4, 0.01)."""
        padded = data.ljust(-(-len(data) // NOTE_BLOCK) * NOTE_BLOCK)
        fd = fsio.open_state_file(self._note, os.O_WRONLY | os.O_CREAT | os.O_NONBLOCK)
        with fsio.naming(self._note, self._note), open(fd, "wb") as note:
            os.pwrite(fd, padded, 0)
            if os.fstat(fd).st_size != len(padded):
                note.truncate(len(padded))

    def settle_hot_records(self) -> None:
        """Fold the hot index's log into its base (``hot_index.fold``) when it holds lines;
        under the archive's lock (re-tiering calls it). The record of a hot file re-tiering
        removed is kept: a byte-identical copy put back is then still recognised."""
        index = hot_index.ensure_index(self.root)
        if index.log_lines:
            hot_index.fold(index)


def _publication_of(body: Any) -> Publication | None:
    """The publication a note's JSON ``body`` describes, or None when it is not one."""
    fields = body if isinstance(body, dict) else {}
    rel, size, digest, audit = (fields.get(k) for k in ("path", "size", "sha256", "audit"))
    if not (isinstance(rel, str) and is_count(size) and is_sha256_hex(digest)):
        return None
    if not isinstance(audit, dict) or hot_index.key_of_rel(rel) is None:  # inside the root
        return None
    return Publication(rel, FileRecord(size, digest), audit)


_PARSED: ParsedByStamp[Catalog] = ParsedByStamp(keep=8)
"""Catalogs parsed in this process, by path, with the stamp of the file they were read from."""


# --- the catalog file (version 3; its columns and row rules: ``store.catalog_format``) ----------


def _encode(catalog: Catalog) -> bytes:
    _check_storable(catalog)
    ordered = sorted(catalog.partitions.values(), key=_order)
    columns: dict[str, list[Any]] = {
        "symbol": [p.symbol for p in ordered],
        "date": [p.date for p in ordered],
        "file": [p.file for p in ordered],
        "rows": [p.rows for p in ordered],
        "byte_share": [p.byte_share for p in ordered],
        "withdrawn": [p.key in catalog.withdrawn for p in ordered],
    }
    sources = [_source_values(p) for p in ordered]
    for i, name in enumerate(SOURCE_COLUMNS):
        columns[name] = [values[i] for values in sources]
    header = {
        "format": CATALOG_FORMAT,
        "version": CATALOG_VERSION,
        "generation": catalog.generation,
        "files": [asdict(f) for f in sorted(catalog.files.values(), key=lambda f: f.path)],
    }
    return catalog_bytes(columns, header, f"catalog generation {catalog.generation}")


def _check_storable(catalog: Catalog) -> None:
    """What reading checks, checked before writing: a catalog is only stored if it reads back."""
    generation = catalog.generation
    if not is_count(generation):
        raise TickFormatError(f"catalog: generation {generation!r}, expected an int >= 0")
    try:
        for path, item in catalog.files.items():
            _check_file(item, where=f"files[{path!r}]")
            if item.path != path:
                raise ValueError(f"files[{path!r}].path: {item.path!r}, expected the same")
        for key, item in catalog.partitions.items():
            where = f"partitions[{item.symbol} {item.date}]"
            listed = catalog.files.get(item.file)
            if item.key != key:
                raise ValueError(f"{where}: stored under the key {key!r}")
            if listed is None:
                raise ValueError(f"{where}.file: {item.file!r} is not a listed file")
            if item.tier != listed.tier:
                raise ValueError(f"{where}.tier: {item.tier!r}, its file is {listed.tier}")
            if not item.symbol:
                raise ValueError(f"{where}.symbol: {item.symbol!r}, expected a symbol")
            _check_counts(item, ("rows", "byte_share"), where)
            if item.source is not None:
                if not is_sha256_hex(item.source.sha256):
                    raise ValueError(
                        f"{where}.source.sha256: {item.source.sha256!r} is not a sha256"
                    )
                _check_counts(item.source, ("size", "inode"), f"{where}.source")
        for symbol, day in sorted(catalog.withdrawn):
            if (symbol, day) not in catalog.partitions:
                raise ValueError(f"withdrawn: {symbol} {day} is not a catalogued symbol-day")
    except ValueError as exc:
        raise TickFormatError(f"catalog generation {generation}: field {exc}") from None


def _check_counts(item: object, names: tuple[str, ...], where: str) -> None:
    for name in names:
        value = getattr(item, name)
        if not is_count(value):
            raise ValueError(f"{where}.{name}: {value!r}, expected an int >= 0")


def _source_values(partition: CatalogPartition) -> tuple[Any, ...]:
    """The ``SOURCE_COLUMNS`` of one row (the path is left out when it is the hot file's)."""
    source = partition.source
    if source is None:
        return (None,) * 5
    derived = hot_relpath(partition.symbol, partition.date)
    path = None if source.path == derived else source.path
    return (path, bytes.fromhex(source.sha256), source.size, source.inode, source.mtime_ns)


def _parse(path: Path, raw: bytes) -> Catalog:
    metadata, table = read_parquet(path, raw)
    generation, files = _parse_header(path, metadata)
    table = checked_columns(path, table)
    check_rows(path, table, files)
    chosen = table.filter(table["withdrawn"])
    withdrawn = frozenset(zip(chosen["symbol"].to_pylist(), dates(chosen["date"]), strict=True))
    tiers = {item.path: item.tier for item in files.values()}
    return Catalog(generation, files, _StoredPartitions(table, tiers), withdrawn)


def _parse_header(
    path: Path, metadata: Mapping[bytes, bytes]
) -> tuple[int, dict[str, CatalogFile]]:
    where = f"{path}: metadata {CATALOG_METADATA_KEY}"
    raw = metadata.get(CATALOG_METADATA_KEY.encode())
    if raw is None:
        raise TickFormatError(f"{where}: missing (not a catalog file)")
    body = fsio.load_json(raw, where, error=TickFormatError)
    generation = check_header(where, body, CATALOG_VERSION)
    try:
        return generation, _file_entries(listed_field(body, "files", where))
    except (ValueError, TypeError, KeyError) as exc:
        raise TickFormatError(f"{where}: field {exc}") from None


def _decode(rows: pa.Table, tiers: Mapping[str, str]) -> dict[SymbolDayKey, CatalogPartition]:
    """The partitions of validated catalog rows (column-wise, then one object per row)."""
    symbols = rows["symbol"].to_pylist()
    days = dates(rows["date"])
    files = rows["file"].to_pylist()
    stamps = zip(
        rows["source_path"].to_pylist(),
        hex_digests(rows["source_sha256"]),
        *(rows[name].to_pylist() for name in STAMP_COLUMNS),
        strict=True,
    )
    sources = [
        None
        if digest is None
        else SourceStamp(hot_relpath(symbol, day) if path is None else path, digest, *stamp)
        for symbol, day, (path, digest, *stamp) in zip(symbols, days, stamps, strict=True)
    ]
    counts, shares = rows["rows"].to_pylist(), rows["byte_share"].to_pylist()
    return {
        (symbol, day): CatalogPartition(symbol, day, tiers[file], file, count, share, source)
        for symbol, day, file, count, share, source in zip(
            symbols, days, files, counts, shares, sources, strict=True
        )
    }


class _StoredPartitions(Mapping[SymbolDayKey, CatalogPartition]):
    """The partitions of a catalog file, built from its validated rows as they are needed.

    A lookup (``get``, ``in``, ``[]``) finds the row by the symbol's run of rows and a bisection
    of its dates; a hit builds that one partition, until hits pass 1/64 of the rows: then, as
    on iterating, all are built, once (so looking up every key costs about that). Read-only.
    """

    def __init__(self, rows: pa.Table, tiers: Mapping[str, str]):
        self._rows = rows
        self._tiers = tiers
        self._single_hits_left = 1 + rows.num_rows // 64
        self._all: dict[SymbolDayKey, CatalogPartition] | None = None

    def __getitem__(self, key: SymbolDayKey) -> CatalogPartition:
        if self._all is None and self._single_hits_left > 0:
            row = self._row_of(key)
            if row is None:
                raise KeyError(key)
            self._single_hits_left -= 1
            (partition,) = _decode(self._rows.slice(row, 1), self._tiers).values()
            return partition
        return self._everything()[key]

    def __contains__(self, key: object) -> bool:
        return self._row_of(key) is not None

    def __iter__(self) -> Iterator[SymbolDayKey]:
        return iter(self._everything())

    def __len__(self) -> int:
        return self._rows.num_rows

    def keys(self):  # type: ignore[override]
        return self._everything().keys()

    def values(self):  # type: ignore[override]
        return self._everything().values()

    def items(self):  # type: ignore[override]
        return self._everything().items()

    def __repr__(self) -> str:
        return f"<{len(self)} catalog partitions>"

    def _everything(self) -> dict[SymbolDayKey, CatalogPartition]:
        if self._all is None:
            self._all = _decode(self._rows, self._tiers)
        return self._all

    @cached_property
    def _index(self) -> tuple[list[int], dict[str, tuple[int, int]]]:
        """The rows' days since 1970 and ``{symbol: (first row, end row)}``."""
        return pc.cast(self._rows["date"], pa.int32()).to_pylist(), _symbol_runs(self._rows)

    def _row_of(self, key: object) -> int | None:
        if not (isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)):
            return None
        symbol, day = key
        if not isinstance(day, date) or isinstance(day, datetime):
            return None
        days, runs = self._index
        start, end = runs.get(symbol, (0, 0))
        wanted = day.toordinal() - EPOCH_ORDINAL
        row = bisect.bisect_left(days, wanted, start, end)
        return row if row < end and days[row] == wanted else None


def _symbol_runs(rows: pa.Table) -> dict[str, tuple[int, int]]:
    """``{symbol: (first row, end row)}`` of rows sorted by symbol."""
    if rows.num_rows == 0:
        return {}
    runs = pc.run_end_encode(rows["symbol"].combine_chunks())
    ends = runs.run_ends.to_pylist()
    return dict(zip(runs.values.to_pylist(), zip([0, *ends[:-1]], ends, strict=True), strict=True))


def _file_entries(entries: list[Any]) -> dict[str, CatalogFile]:
    files: dict[str, CatalogFile] = {}
    for i, entry in enumerate(entries):
        item = CatalogFile(**_fields(entry, CatalogFile, f"files[{i}]"))
        _check_file(item, where=f"files[{i}]")
        if item.path in files:
            raise ValueError(f"files[{i}].path: {item.path!r} listed twice")
        files[item.path] = item
    return files


def _check_file(item: CatalogFile, *, where: str) -> None:
    _check_tier(item.tier, where)
    try:
        tier, _ = split_catalog_path(item.path)
    except TickFormatError as exc:
        raise ValueError(f"{where}.path: {exc}") from None
    if tier != item.tier:
        raise ValueError(f"{where}.path: {item.path!r} is in the {tier} root, its tier {item.tier}")
    if not is_sha256_hex(item.sha256):
        raise ValueError(f"{where}.sha256: {item.sha256!r} is not a sha256")


def _fields(entry: Any, cls: type, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    names = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = sorted(set(entry) - names)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}")
    return dict(entry)


def _check_tier(tier: object, where: str) -> None:
    if tier not in (WARM, COLD):
        raise ValueError(f"{where}.tier: {tier!r}, expected WARM or COLD")


# --- lookups by symbol and by file (readers) ------------------------------------------------


def symbols_of(catalog: Catalog) -> list[str]:
    """The symbols the catalog lists (withdrawn copies included), sorted."""
    parts = catalog.partitions
    if isinstance(parts, _StoredPartitions):
        return sorted(parts._index[1])
    return sorted({symbol for symbol, _ in parts})


def partitions_of(catalog: Catalog, symbol: str) -> list[CatalogPartition]:
    """The catalogued symbol-days of ``symbol``, by date (only that symbol's rows decoded)."""
    parts = catalog.partitions
    if isinstance(parts, _StoredPartitions):
        if parts._all is not None:
            return [p for k, p in parts._all.items() if k[0] == symbol]
        start, end = parts._index[1].get(symbol, (0, 0))
        if start == end:
            return []
        return list(_decode(parts._rows.slice(start, end - start), parts._tiers).values())
    return sorted((p for k, p in parts.items() if k[0] == symbol), key=_order)


class FileRows:
    """Where a catalog's symbol-days are in their consolidated files: ``(first row, rows)`` of
    a partition (:func:`file_rows`, worked out once per file when first asked)."""

    def __init__(self, catalog: Catalog):
        self.catalog = catalog
        self._by_file: dict[str, dict[SymbolDayKey, tuple[int, int]]] = {}

    def of(self, partition: CatalogPartition) -> tuple[int, int]:
        """``(first row, rows)`` of ``partition``'s symbol-day in its file.

        Raises KeyError for a partition its file does not hold in the catalog."""
        rows = self._by_file.get(partition.file)
        if rows is None:
            rows = self._by_file[partition.file] = file_rows(self.catalog, partition.file)
        return rows[partition.key]


def file_rows(catalog: Catalog, file: str) -> dict[SymbolDayKey, tuple[int, int]]:
    """``{symbol-day: (first row, rows)}`` of the consolidated file ``file``: its symbol-days
    are its rows in (symbol, date) order, as the catalog lists them."""
    parts = catalog.partitions
    if isinstance(parts, _StoredPartitions):
        rows = parts._rows
        chosen = rows.filter(pc.equal(rows["file"], file))
        keys = zip(chosen["symbol"].to_pylist(), dates(chosen["date"]), strict=True)
        counts = chosen["rows"].to_pylist()
    else:
        held = sorted((p for p in parts.values() if p.file == file), key=_order)
        keys, counts = (p.key for p in held), [p.rows for p in held]
    out, offset = {}, 0
    for key, count in zip(keys, counts, strict=True):
        out[key] = (offset, count)
        offset += count
    return out

"""The archive catalog: which consolidated file holds each symbol-day, on disk.

The catalog is one Parquet file, ``<archive root>/_skewtape_catalog.parquet``, replaced
atomically (temporary file, fsync, rename): every re-tiering commits by that one rename, so a
reader sees either the old placement or the new one, never a mixture.

Catalog paths name a file by its tier and its path inside that tier's root:
``WARM/year=2026/month=02/part-<sha256[:16]>.parquet`` is resolved against the archive's WARM
root when read (``Archive.resolve``, ``tiers.ArchiveTiers.resolve``: a local path, or an object
when the root is an S3 prefix),
and a path that is not a plain relative path inside its root (``..``, absolute) is refused. Hot
file paths (the source stamps) are relative to the archive root itself. So an archive and its
tier roots are self-contained: copied or moved together, under any names, the copy reads its own
files.

Catalog version 3 (the file): one row per catalogued symbol-day, sorted by symbol then date
(zstd, dictionary-encoded strings), with the columns ``symbol``, ``date``, ``file`` (the catalog
path of its consolidated file), ``rows``, ``byte_share``, ``withdrawn`` and the source stamp
``source_sha256`` (32 bytes), ``source_size``, ``source_inode``, ``source_mtime_ns`` and
``source_path`` (null when it is the symbol-day's own hot file path, as it always is when
re-tiering wrote it); the source columns are all null for a partition without a source. The
Parquet key-value metadata ``skewtape_catalog`` holds JSON: ``format``, ``version``,
``generation`` and ``files`` (the consolidated files: path, tier, period, bytes, rows, sha256,
symbol_days); a partition's tier is its file's. Any engine reads it, e.g. DuckDB::

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
(:func:`settle_hot_records`). The last line of a path wins (:func:`read_hot_records`).
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
from collections.abc import Iterator, Mapping
from dataclasses import asdict, dataclass, field
from datetime import date, datetime
from functools import cached_property
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline import fsio
from skewtape_pipeline.arrow_memory import owned_reader
from skewtape_pipeline.errors import TickFormatError, TickValidationError
from skewtape_pipeline.hashing import FileStamp, is_sha256_hex
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.layout import (
    CATALOG_FILE,
    MAX_SYMBOL_SEGMENT_BYTES,
    PART_FILE_NAME,
    encode_symbol,
)
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.tiers import inside_path, normalized

CATALOG_FORMAT = "skewtape-tick-catalog"
CATALOG_VERSION = 3
CATALOG_METADATA_KEY = "skewtape_catalog"
HOT_RECORDS_FILE = "_skewtape_hot_files.jsonl"

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


def catalog_path(archive_root: Path) -> Path:
    """``<archive root>/_skewtape_catalog.parquet``."""
    return Path(archive_root) / CATALOG_FILE


_TIER_ROOTS = (WARM, COLD)


def resolve_hot(archive_root: Path, relative: str) -> Path:
    """The hot file a source stamp's path names, inside the archive root.

    Raises TickFormatError for a path that would leave the root.
    """
    return normalized(Path(archive_root)) / inside_path(relative, relative)


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


# --- read and write -----------------------------------------------------------------------------


def read_catalog(archive_root: Path) -> Catalog:
    """The archive's catalog; an empty one (generation 0) when it has none yet (writers call
    ``catalog_check.checked_catalog``, which refuses when consolidated files exist then).

    Every row is validated on reading (column-wise); a partition object is built when it is
    first looked up, so looking up a few symbol-days of a large catalog stays cheap. The
    catalogs parsed in this process are kept by their file's stamp (the catalog is only ever
    replaced by a rename), so a writer reading it per symbol-day parses it once.

    Raises
    ------
    TickFormatError
        The catalog file is unreadable or malformed (names the file, the field or column and
        the row).
    """
    parquet = catalog_path(archive_root)
    try:
        with open(parquet, "rb") as handle:
            stamp = FileStamp.from_stat(os.fstat(handle.fileno()))
            cached = _PARSED.get(str(parquet))
            if cached is not None and cached[0] == stamp:
                return cached[1]
            raw = handle.read()
    except FileNotFoundError:
        return Catalog()
    except OSError as exc:
        raise TickFormatError(f"{parquet}: cannot read the catalog ({exc.strerror})") from None
    catalog = _parse(parquet, raw)
    if len(_PARSED) >= 8:
        _PARSED.pop(next(iter(_PARSED)))
    _PARSED[str(parquet)] = (stamp, catalog)
    return catalog


_PARSED: dict[str, tuple[FileStamp, Catalog]] = {}
"""Catalogs parsed in this process, by path, with the stamp of the file they were read from."""


def write_catalog(archive_root: Path, catalog: Catalog) -> None:
    """Replace the catalog atomically (temporary file, fsync, rename, fsync the folder).

    Raises TickFormatError, writing nothing, for a catalog that would not read back
    (see :meth:`Catalog.to_bytes`).
    """
    fsio.atomic_write_bytes(catalog_path(archive_root), catalog.to_bytes())


def parse_catalog(path: Path, raw: bytes) -> Catalog:
    """The catalog in ``raw`` (a catalog file's bytes; ``path`` names it in errors), validated
    as :func:`read_catalog` does. Raises TickFormatError when it is malformed."""
    return _parse(path, raw)


# --- hot file records ----------------------------------------------------------------------------


def hot_records_path(archive_root: Path) -> Path:
    """``<archive root>/_skewtape_hot_files.jsonl``: the hot index's log (see the module notes
    and ``ticks.archive.store.hot_index``)."""
    return Path(archive_root) / HOT_RECORDS_FILE


def read_hot_records(archive_root: Path) -> dict[str, FileRecord]:
    """``{hot file path relative to the archive root: its latest record}`` (the hot index's, or
    the log's lines when the archive has no index yet); {} when none were written yet. A last
    line without its newline (a crash while appending) is ignored.

    Raises TickFormatError naming the file and the line when a complete line is malformed,
    LinkedStateFileError when the file is a symbolic link.
    """
    index = hot_index.HotIndex.read(Path(archive_root))
    records = hot_index.legacy_records(archive_root) if index is None else index.records()
    return {rel: FileRecord(size, digest) for rel, (size, digest) in records.items()}


def append_hot_record(
    archive_root: Path, rel: str, record: FileRecord, stamp: FileStamp | None = None
) -> None:
    """Record the hot file ``rel`` just renamed into place (its size and sha256, and its stamp
    now) in the hot index's log and fsync it; call it under the archive's lock, after the hot
    index exists (``hot_index.ensure_index``). Raises LinkedStateFileError when the log is a
    symbolic link."""
    body: dict[str, Any] = {"path": rel, "sha256": record.sha256, "size": record.size}
    if stamp is not None:
        body = hot_index.published_line(rel, record.size, record.sha256, stamp)
    hot_index.append_lines(Path(archive_root), [body])


def settle_hot_records(archive_root: Path) -> None:
    """Fold the hot index's log into its base (``hot_index.fold``) when it holds lines; under
    the archive's lock (re-tiering calls it). The record of a hot file re-tiering removed is
    kept: a byte-identical copy put back is then still recognised."""
    index = hot_index.ensure_index(Path(archive_root))
    if index.log_lines:
        hot_index.fold(index)


# --- the catalog file (version 3) ---------------------------------------------------------------

CATALOG_SCHEMA = pa.schema(
    [
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("file", pa.string(), nullable=False),
        pa.field("rows", pa.int64(), nullable=False),
        pa.field("byte_share", pa.int64(), nullable=False),
        pa.field("withdrawn", pa.bool_(), nullable=False),
        pa.field("source_path", pa.string()),
        pa.field("source_sha256", pa.binary(32)),
        pa.field("source_size", pa.int64()),
        pa.field("source_inode", pa.uint64()),
        pa.field("source_mtime_ns", pa.int64()),
    ]
)
"""The columns of the catalog file, in order (the source columns are null without a source)."""

_REQUIRED = tuple(f.name for f in CATALOG_SCHEMA if not f.nullable)
_STAMP = ("source_size", "source_inode", "source_mtime_ns")
_SOURCE = ("source_path", "source_sha256", *_STAMP)
_COUNTS = ("rows", "byte_share", "source_size")
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_WRITER_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": ["symbol", "file", "source_path"],
    "column_encoding": {
        name: "DELTA_BINARY_PACKED" for name in ("date", "source_inode", "source_mtime_ns")
    },
    "write_statistics": False,
    "store_schema": False,
}


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
    for i, name in enumerate(_SOURCE):
        columns[name] = [values[i] for values in sources]
    header = {
        "format": CATALOG_FORMAT,
        "version": CATALOG_VERSION,
        "generation": catalog.generation,
        "files": [asdict(f) for f in sorted(catalog.files.values(), key=lambda f: f.path)],
    }
    sink = pa.BufferOutputStream()
    try:
        table = pa.table(columns, schema=CATALOG_SCHEMA)
        with pq.ParquetWriter(sink, CATALOG_SCHEMA, **_WRITER_OPTIONS) as writer:
            writer.write_table(table)
            writer.add_key_value_metadata({CATALOG_METADATA_KEY: _dumps(header)})
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        raise TickFormatError(f"catalog generation {catalog.generation}: {exc}") from None
    return sink.getvalue().to_pybytes()


def _check_storable(catalog: Catalog) -> None:
    """What reading checks, checked before writing: a catalog is only stored if it reads back."""
    generation = catalog.generation
    if not _is_count(generation):
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
        if not _is_count(value):
            raise ValueError(f"{where}.{name}: {value!r}, expected an int >= 0")


def _source_values(partition: CatalogPartition) -> tuple[Any, ...]:
    """The :data:`_SOURCE` columns of one row (the path is left out when it is the hot file's)."""
    source = partition.source
    if source is None:
        return (None,) * 5
    derived = _hot_relpath(partition.symbol, partition.date)
    path = None if source.path == derived else source.path
    return (path, bytes.fromhex(source.sha256), source.size, source.inode, source.mtime_ns)


def _hot_relpath(symbol: str, day: date) -> str | None:
    """The symbol-day's hot file relative to the archive root (as ``partition_file`` names it),
    None when the symbol has no folder name."""
    try:
        folder = encode_symbol(symbol)
    except TickValidationError:
        return None
    return (
        f"symbol={folder}/year={day.year:04d}/month={day.month:02d}/date={day.isoformat()}"
        f"/{PART_FILE_NAME}"
    )


def _dumps(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def _parse(path: Path, raw: bytes) -> Catalog:
    try:
        parquet = pq.ParquetFile(owned_reader(raw))
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise TickFormatError(f"{path}: not a readable Parquet catalog ({exc})") from None
    generation, files = _parse_header(path, parquet.metadata.metadata or {})
    table = _checked_columns(path, table)
    _check_rows(path, table, files)
    chosen = table.filter(table["withdrawn"])
    withdrawn = frozenset(zip(chosen["symbol"].to_pylist(), _dates(chosen["date"]), strict=True))
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
    generation = _check_header(where, body, CATALOG_VERSION)
    try:
        return generation, _file_entries(_list(body, "files", where))
    except (ValueError, TypeError, KeyError) as exc:
        raise TickFormatError(f"{where}: field {exc}") from None


def _checked_columns(path: Path, table: pa.Table) -> pa.Table:
    """The catalog columns in schema order (one chunk each), their names and types checked."""
    found = {column.name: column.type for column in table.schema}
    for wanted in CATALOG_SCHEMA:
        if wanted.name not in found:
            raise TickFormatError(f"{path}: column {wanted.name}: missing")
        if found[wanted.name] != wanted.type:
            raise TickFormatError(
                f"{path}: column {wanted.name}: type {found[wanted.name]}, expected {wanted.type}"
            )
    extra = sorted(set(found) - set(CATALOG_SCHEMA.names))
    if extra:
        raise TickFormatError(f"{path}: column {extra[0]}: not a catalog column")
    return table.select(CATALOG_SCHEMA.names).combine_chunks()


def _check_rows(path: Path, table: pa.Table, files: Mapping[str, CatalogFile]) -> None:
    """Every rule of a row, column-wise; raises naming the column and the first bad row."""

    def refuse(column: str, bad: Any, expected: str, values: Any = None) -> None:
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            value = (table[column] if values is None else values)[row].as_py()
            raise TickFormatError(f"{path}: column {column}, row {row}: {value!r}, {expected}")

    for name in _REQUIRED:
        refuse(name, table[name].is_null(), "expected a value")
    refuse("symbol", pc.equal(pc.binary_length(table["symbol"]), 0), "expected a symbol")
    days = pc.cast(table["date"], pa.int32())
    first, last = 1 - _EPOCH_ORDINAL, date.max.toordinal() - _EPOCH_ORDINAL
    in_range = pc.and_(pc.greater_equal(days, first), pc.less_equal(days, last))
    refuse("date", pc.invert(in_range), "expected a day of years 1 to 9999", values=days)
    for name in _COUNTS:
        refuse(name, pc.fill_null(pc.less(table[name], 0), False), "expected an int >= 0")
    listed = pc.is_in(table["file"], value_set=pa.array(list(files), pa.string()))
    refuse("file", pc.invert(listed), "expected a listed file")
    has_source = table["source_sha256"].is_valid()
    for name in _STAMP:
        refuse(
            name,
            pc.not_equal(table[name].is_valid(), has_source),
            "expected a value exactly where source_sha256 has one",
        )
    refuse(
        "source_path",
        pc.and_(table["source_path"].is_valid(), pc.invert(has_source)),
        "expected null where source_sha256 is null",
    )
    _check_derivable(path, table, has_source)
    _check_order(path, table)


def _check_derivable(path: Path, table: pa.Table, has_source: Any) -> None:
    """A null ``source_path`` stands for the hot file path, which a symbol too long for a
    folder name (more than a third of the limit in UTF-8 bytes may be) does not have."""
    derived = pc.and_(has_source, table["source_path"].is_null())
    long = pc.greater(pc.binary_length(table["symbol"]), MAX_SYMBOL_SEGMENT_BYTES // 3)
    for row in pc.indices_nonzero(pc.and_(derived, long)).to_pylist():
        if _hot_relpath(table["symbol"][row].as_py(), table["date"][row].as_py()) is None:
            raise TickFormatError(
                f"{path}: column source_path, row {row}: None, expected a path (the symbol "
                "has no folder name to derive it from)"
            )


def _check_order(path: Path, table: pa.Table) -> None:
    """Rows sorted by symbol then date, each symbol-day once."""
    n = table.num_rows
    if n < 2:
        return
    symbols, days = table["symbol"], table["date"]
    same_symbol = pc.equal(symbols.slice(1), symbols.slice(0, n - 1))
    later_day = pc.greater(days.slice(1), days.slice(0, n - 1))
    later_symbol = pc.greater(symbols.slice(1), symbols.slice(0, n - 1))
    after = pc.or_(later_symbol, pc.and_(same_symbol, later_day))
    if pc.all(after).as_py():
        return
    row = pc.index(after, False).as_py() + 1
    symbol, day = symbols[row].as_py(), days[row].as_py()
    if (symbol, day) == (symbols[row - 1].as_py(), days[row - 1].as_py()):
        raise TickFormatError(f"{path}: row {row}: {symbol} {day} listed twice")
    raise TickFormatError(
        f"{path}: row {row}: {symbol} {day} out of order (expected rows by symbol then date)"
    )


def _dates(column: pa.ChunkedArray) -> list[date]:
    return [date.fromordinal(d + _EPOCH_ORDINAL) for d in pc.cast(column, pa.int32()).to_pylist()]


def _hex_digests(column: pa.ChunkedArray) -> list[str | None]:
    """The 32-byte digests as lowercase hex (one ``bytes.hex`` for the whole column)."""
    array = column.combine_chunks()
    if array.null_count == len(array):
        return [None] * len(array)
    data = array.buffers()[1].slice(array.offset * 32, len(array) * 32).to_pybytes().hex()
    valid = array.is_valid().to_pylist()
    return [data[64 * i : 64 * i + 64] if ok else None for i, ok in enumerate(valid)]


def _decode(rows: pa.Table, tiers: Mapping[str, str]) -> dict[SymbolDayKey, CatalogPartition]:
    """The partitions of validated catalog rows (column-wise, then one object per row)."""
    symbols = rows["symbol"].to_pylist()
    days = _dates(rows["date"])
    files = rows["file"].to_pylist()
    stamps = zip(
        rows["source_path"].to_pylist(),
        _hex_digests(rows["source_sha256"]),
        *(rows[name].to_pylist() for name in _STAMP),
        strict=True,
    )
    sources = [
        None
        if digest is None
        else SourceStamp(_hot_relpath(symbol, day) if path is None else path, digest, *stamp)
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
        wanted = day.toordinal() - _EPOCH_ORDINAL
        row = bisect.bisect_left(days, wanted, start, end)
        return row if row < end and days[row] == wanted else None


def _symbol_runs(rows: pa.Table) -> dict[str, tuple[int, int]]:
    """``{symbol: (first row, end row)}`` of rows sorted by symbol."""
    if rows.num_rows == 0:
        return {}
    runs = pc.run_end_encode(rows["symbol"].combine_chunks())
    ends = runs.run_ends.to_pylist()
    return dict(zip(runs.values.to_pylist(), zip([0, *ends[:-1]], ends, strict=True), strict=True))


# --- header fields ------------------------------------------------------------------------------


def _check_header(where: str, body: Any, version: int) -> int:
    """Check ``format`` and ``version``; the ``generation``."""
    if not isinstance(body, dict) or body.get("format") != CATALOG_FORMAT:
        raise TickFormatError(f"{where}: field format: expected {CATALOG_FORMAT!r}")
    if body.get("version") != version:
        raise TickFormatError(
            f"{where}: field version: {body.get('version')!r}, expected {version}"
        )
    generation = body.get("generation")
    if not _is_count(generation):
        raise TickFormatError(f"{where}: field generation: {generation!r}, expected an int >= 0")
    return generation


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _list(body: dict[str, Any], name: str, where: str) -> list[Any]:
    value = body.get(name)
    if not isinstance(value, list):
        raise TickFormatError(f"{where}: field {name}: expected a list")
    return value


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


def file_rows(catalog: Catalog, file: str) -> dict[SymbolDayKey, tuple[int, int]]:
    """``{symbol-day: (first row, rows)}`` of the consolidated file ``file``: its symbol-days
    are its rows in (symbol, date) order, as the catalog lists them."""
    parts = catalog.partitions
    if isinstance(parts, _StoredPartitions):
        rows = parts._rows
        chosen = rows.filter(pc.equal(rows["file"], file))
        keys = zip(chosen["symbol"].to_pylist(), _dates(chosen["date"]), strict=True)
        counts = chosen["rows"].to_pylist()
    else:
        held = sorted((p for p in parts.values() if p.file == file), key=_order)
        keys, counts = (p.key for p in held), [p.rows for p in held]
    out, offset = {}, 0
    for key, count in zip(keys, counts, strict=True):
        out[key] = (offset, count)
        offset += count
    return out

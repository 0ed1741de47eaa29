"""The catalog file's format (version 3): its Parquet columns and the rules every row keeps.

What ``store.catalog`` stores and reads back, below its objects: the columns
(:data:`CATALOG_SCHEMA`), the writer's settings, the header's ``format`` and ``version``, and
the checks of a stored table, column-wise, each naming the column and the first bad row. The
catalog's objects (``store.catalog.Catalog`` and its parts) are built from what these checks
passed; this module knows nothing of them.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Collection, Mapping
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline.arrow_memory import owned_reader
from skewtape_pipeline.errors import TickFormatError, TickValidationError
from skewtape_pipeline.ticks.archive.store.layout import (
    MAX_SYMBOL_SEGMENT_BYTES,
    PART_FILE_NAME,
    encode_symbol,
)

CATALOG_FORMAT = "skewtape-tick-catalog"
CATALOG_VERSION = 3
CATALOG_METADATA_KEY = "skewtape_catalog"
HEADER_SHA256_KEY = "skewtape_catalog_sha256"
"""The sha256 of the header's JSON, beside it in the key-value metadata (which page checksums do
not cover): a header changed since it was written (a flipped digit of a file's sha256, which would
blame that sound file) is refused. A catalog written before holds none, and is read as before."""

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
STAMP_COLUMNS = ("source_size", "source_inode", "source_mtime_ns")
SOURCE_COLUMNS = ("source_path", "source_sha256", *STAMP_COLUMNS)
_COUNTS = ("rows", "byte_share", "source_size")
EPOCH_ORDINAL = date(1970, 1, 1).toordinal()
_WRITER_OPTIONS: dict[str, Any] = {
    "compression": "zstd",
    "compression_level": 9,
    "use_dictionary": ["symbol", "file", "source_path"],
    "column_encoding": {
        name: "DELTA_BINARY_PACKED" for name in ("date", "source_inode", "source_mtime_ns")
    },
    "write_statistics": False,
    "store_schema": False,
    "write_page_checksum": True,
}
"""Page checksums: a flipped bit in the catalog's pages is refused when read (zstd alone may
decode it into other dates, rows or sha256s: a withdrawn day back in the view, a sound data
file blamed), never taken as the catalog."""


def catalog_bytes(columns: Mapping[str, list[Any]], header: Mapping[str, Any], where: str) -> bytes:
    """The catalog file's bytes: ``columns`` (:data:`CATALOG_SCHEMA`'s) and the ``header``
    JSON under :data:`CATALOG_METADATA_KEY`. Raises TickFormatError starting with ``where``
    when a value does not fit its column."""
    sink = pa.BufferOutputStream()
    try:
        table = pa.table(dict(columns), schema=CATALOG_SCHEMA)
        with pq.ParquetWriter(sink, CATALOG_SCHEMA, **_WRITER_OPTIONS) as writer:
            writer.write_table(table)
            text = _dumps(header)
            digest = hashlib.sha256(text.encode()).hexdigest()
            writer.add_key_value_metadata({CATALOG_METADATA_KEY: text, HEADER_SHA256_KEY: digest})
    except (pa.ArrowException, OverflowError, TypeError, ValueError) as exc:
        raise TickFormatError(f"{where}: {exc}") from None
    return sink.getvalue().to_pybytes()


def read_parquet(path: Path, raw: bytes) -> tuple[Mapping[bytes, bytes], pa.Table]:
    """The key-value metadata and the table of the catalog file's bytes ``raw`` (``path``
    names it in errors); TickFormatError when they are not readable Parquet, or when the
    header is not the one its sha256 (:data:`HEADER_SHA256_KEY`) records."""
    try:
        parquet = pq.ParquetFile(owned_reader(raw), page_checksum_verification=True)
        table = parquet.read()
    except (pa.ArrowException, OSError) as exc:
        raise TickFormatError(
            f"{path}: not a readable Parquet catalog ({exc}); rebuild it with rebuild-catalog"
        ) from None
    metadata = parquet.metadata.metadata or {}
    recorded = metadata.get(HEADER_SHA256_KEY.encode())
    header = metadata.get(CATALOG_METADATA_KEY.encode(), b"")
    if recorded is not None and hashlib.sha256(header).hexdigest().encode() != recorded:
        raise TickFormatError(
            f"{path}: metadata {CATALOG_METADATA_KEY}: not the bytes its sha256 "
            f"({HEADER_SHA256_KEY}) records, a damaged catalog; rebuild it with rebuild-catalog"
        )
    return metadata, table


def _dumps(body: Any) -> str:
    return json.dumps(body, sort_keys=True, separators=(",", ":"))


def checked_columns(path: Path, table: pa.Table) -> pa.Table:
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


def check_rows(path: Path, table: pa.Table, files: Collection[str]) -> None:
    """Every rule of a row, column-wise (a row's ``file`` among ``files``, the catalog paths
    the header lists); raises naming the column and the first bad row."""

    def refuse(column: str, bad: Any, expected: str, values: Any = None) -> None:
        if pc.any(bad).as_py():
            row = pc.index(bad, True).as_py()
            value = (table[column] if values is None else values)[row].as_py()
            raise TickFormatError(f"{path}: column {column}, row {row}: {value!r}, {expected}")

    for name in _REQUIRED:
        refuse(name, table[name].is_null(), "expected a value")
    refuse("symbol", pc.equal(pc.binary_length(table["symbol"]), 0), "expected a symbol")
    days = pc.cast(table["date"], pa.int32())
    first, last = 1 - EPOCH_ORDINAL, date.max.toordinal() - EPOCH_ORDINAL
    in_range = pc.and_(pc.greater_equal(days, first), pc.less_equal(days, last))
    refuse("date", pc.invert(in_range), "expected a day of years 1 to 9999", values=days)
    for name in _COUNTS:
        refuse(name, pc.fill_null(pc.less(table[name], 0), False), "expected an int >= 0")
    listed = pc.is_in(table["file"], value_set=pa.array(list(files), pa.string()))
    refuse("file", pc.invert(listed), "expected a listed file")
    has_source = table["source_sha256"].is_valid()
    for name in STAMP_COLUMNS:
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
        if hot_relpath(table["symbol"][row].as_py(), table["date"][row].as_py()) is None:
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


def dates(column: pa.ChunkedArray) -> list[date]:
    """The days of a ``date`` column (checked in range by :func:`check_rows`)."""
    return [date.fromordinal(d + EPOCH_ORDINAL) for d in pc.cast(column, pa.int32()).to_pylist()]


def hex_digests(column: pa.ChunkedArray) -> list[str | None]:
    """The 32-byte digests as lowercase hex (one ``bytes.hex`` for the whole column)."""
    array = column.combine_chunks()
    if array.null_count == len(array):
        return [None] * len(array)
    data = array.buffers()[1].slice(array.offset * 32, len(array) * 32).to_pybytes().hex()
    valid = array.is_valid().to_pylist()
    return [data[64 * i : 64 * i + 64] if ok else None for i, ok in enumerate(valid)]


def hot_relpath(symbol: str, day: date) -> str | None:
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


def check_header(where: str, body: Any, version: int) -> int:
    """Check ``format`` and ``version``; the ``generation``."""
    if not isinstance(body, dict) or body.get("format") != CATALOG_FORMAT:
        raise TickFormatError(f"{where}: field format: expected {CATALOG_FORMAT!r}")
    if body.get("version") != version:
        raise TickFormatError(
            f"{where}: field version: {body.get('version')!r}, expected {version}"
        )
    generation = body.get("generation")
    if not is_count(generation):
        raise TickFormatError(f"{where}: field generation: {generation!r}, expected an int >= 0")
    return generation


def is_count(value: object) -> bool:
    """True for an int >= 0 (not a bool)."""
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def listed_field(body: dict[str, Any], name: str, where: str) -> list[Any]:
    """The header's field ``name``; TickFormatError naming it unless it is a list."""
    value = body.get(name)
    if not isinstance(value, list):
        raise TickFormatError(f"{where}: field {name}: expected a list")
    return value

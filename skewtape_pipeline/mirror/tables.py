"""The four reference tables: reading their schema, rows and keys, and checking them.

Shared by sealing, verification, delta building and the applier. Everything here reads; nothing
writes. A Parquet file that does not open raises :class:`~skewtape_pipeline.errors.SnapshotError`
naming the file; a table that breaks its key is reported as problems (one line each), so callers
can collect every finding before they raise.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline.errors import SnapshotError, quoted, quoted_path
from skewtape_pipeline.mirror.format import TABLE_KEYS

Columns = tuple[tuple[str, str], ...]
"""(name, Arrow type as text) of each column, as a snapshot manifest records them."""

SHOWN_KEYS = 3
"""How many offending key values a problem line quotes."""


def is_table(rel: str) -> bool:
    """True when ``rel`` is one of the four reference tables (a root-level path)."""
    return rel in TABLE_KEYS


def table_keys(rel: str) -> tuple[str, ...]:
    """The key columns of the reference table ``rel``; SnapshotError for any other path."""
    try:
        return TABLE_KEYS[rel]
    except KeyError:
        raise SnapshotError(
            f"{quoted_path(rel)} is not a reference table; expected one of "
            f"{', '.join(sorted(TABLE_KEYS))}"
        ) from None


def _parquet_error(path: Path, exc: Exception) -> SnapshotError:
    return SnapshotError(f"{path}: is not a readable Parquet file ({exc})")


def schema_columns(schema: pa.Schema) -> Columns:
    """(name, str(type)) of each field of ``schema``; nullability is not part of it."""
    return tuple((f.name, str(f.type)) for f in schema)


def local_path(path: Path | str) -> str:
    """``path`` as pyarrow must be given a local file: absolute, so that a relative path whose
    first name holds a colon (``mirror:prod/...``) is not parsed as a URI of the scheme
    ``mirror``."""
    return os.path.abspath(path)


def table_columns(path: Path) -> Columns:
    """The Arrow schema of the Parquet file at ``path`` as (name, type) pairs.

    Reads the footer only. Raises :class:`SnapshotError` naming the file if it does not open.
    """
    try:
        return schema_columns(pq.read_schema(local_path(path)))
    except (OSError, pa.ArrowException) as exc:
        raise _parquet_error(path, exc) from None


def parquet_rows(path: Path) -> int:
    """Rows of the Parquet file at ``path``, from its footer; SnapshotError if unreadable."""
    try:
        return pq.ParquetFile(local_path(path)).metadata.num_rows
    except (OSError, pa.ArrowException) as exc:
        raise _parquet_error(path, exc) from None


def read_table(path: Path, *, columns: Sequence[str] | None = None) -> pa.Table:
    """Read a Parquet file (optionally only ``columns``); SnapshotError naming it if unreadable."""
    try:
        columns = list(columns) if columns is not None else None
        return pq.read_table(local_path(path), columns=columns)
    except (OSError, pa.ArrowException) as exc:
        raise _parquet_error(path, exc) from None


def sort_by_keys(table: pa.Table, keys: Sequence[str]) -> pa.Table:
    """``table`` sorted by ``keys`` ascending (nulls last); a stable, deterministic order."""
    if table.num_rows == 0:
        return table
    return table.take(pc.sort_indices(table, sort_keys=[(key, "ascending") for key in keys]))


def key_problems(table: pa.Table, keys: Sequence[str], *, name: str) -> list[str]:
    """Every way ``table`` breaks its key: missing key columns, null keys, duplicate keys.

    Returns one line per finding (empty when the key holds), each naming ``name``.
    """
    missing = [key for key in keys if key not in table.column_names]
    if missing:
        return [f"{name}: has no key column(s) {missing}; expected key {list(keys)}"]
    problems: list[str] = []
    for key in keys:
        nulls = table.column(key).null_count
        if nulls:
            problems.append(
                f"{name}: {nulls} row(s) have a null {quoted(key)}; keys are never null"
            )
    if table.num_rows == 0 or (not problems and strictly_increasing(table, keys)):
        return problems  # sorted and unique: what every merge and the publisher write
    counts = table.select(list(keys)).group_by(list(keys)).aggregate([([], "count_all")])
    duplicated = counts.filter(pc.greater(counts.column("count_all"), 1))
    if duplicated.num_rows:
        shown = _show_keys(duplicated.slice(0, SHOWN_KEYS), keys)
        problems.append(
            f"{name}: {duplicated.num_rows} key value(s) appear more than once, e.g. {shown}; "
            f"expected each {tuple(keys)} once"
        )
    return problems


def strictly_increasing(table: pa.Table, keys: Sequence[str]) -> bool:
    """True when the (null-free) ``keys`` strictly increase row to row: sorted, no duplicates.

    One vectorized pass over adjacent rows; far cheaper than grouping, and exactly the shape of
    a table sorted by key with unique keys.
    """
    if table.num_rows < 2:
        return True
    increasing = None
    for key in reversed(keys):
        column = table.column(key).combine_chunks()
        before, after = column.slice(0, len(column) - 1), column.slice(1)
        try:
            less = pc.less(before, after)
        except pa.ArrowNotImplementedError:  # a key type without an order: let grouping decide
            return False
        increasing = (
            less
            if increasing is None
            else pc.or_(less, pc.and_(pc.equal(before, after), increasing))
        )
    return bool(pc.all(increasing).as_py())


def _show_keys(table: pa.Table, keys: Sequence[str]) -> list[dict[str, str | None]]:
    """Key values as text (ns timestamps and decimals have no exact Python value)."""
    texts = {key: _as_text(table.column(key)) for key in keys}
    return [{key: texts[key][i] for key in keys} for i in range(table.num_rows)]


def _as_text(column: pa.ChunkedArray) -> list[str | None]:
    try:
        return column.cast(pa.string()).to_pylist()
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        return [repr(value) for value in column.to_pylist()]


def check_table(
    path: Path,
    rel: str,
    *,
    columns: Columns | None,
    rows: int | None,
) -> tuple[int | None, list[str]]:
    """Check a reference table against what its manifest entry says.

    Checks that the file opens, its schema equals ``columns`` (names, order and types), its row
    count equals ``rows`` and its key columns are unique and never null. ``None`` skips that
    comparison. Returns (rows found or None if unreadable, problems).
    """
    try:
        found_columns = table_columns(path)
        found_rows = parquet_rows(path)
        keys_table = read_table(
            path, columns=[k for k in table_keys(rel) if k in dict(found_columns)]
        )
    except SnapshotError as exc:
        return None, [f"{rel}: {exc}"]
    problems: list[str] = []
    if columns is not None and found_columns != tuple(columns):
        problems.append(f"{rel}: has columns {list(found_columns)}; expected {list(columns)}")
    if rows is not None and found_rows != rows:
        problems.append(f"{rel}: has {found_rows} rows; expected {rows} (the manifest's)")
    problems.extend(key_problems(keys_table, table_keys(rel), name=rel))
    return found_rows, problems


_SAME_AS = {pa.large_string(): pa.string(), pa.large_binary(): pa.binary()}


def _plain(arrow_type: pa.DataType) -> pa.DataType:
    """``arrow_type`` with the large string and binary types read as their plain forms."""
    return _SAME_AS.get(arrow_type, arrow_type)


def row_misfit(table: pa.Schema, row: pa.StructType) -> tuple[str, str] | None:
    """How a change file's ``row`` struct fails to fit ``table``'s schema, or None if it fits.

    Fitting means the same column names (in any order) with the same Arrow types (nullability
    aside; large and plain strings alike). Returns (column, what is wrong) for the first
    column of the table the row lacks or types differently, else the first one it adds.
    """
    fields = {row.field(i).name: row.field(i).type for i in range(row.num_fields)}
    for name, arrow_type in zip(table.names, table.types, strict=True):
        if name not in fields:
            return name, f"lacks the column {quoted(name)} ({arrow_type}) of the table"
        if _plain(fields[name]) != _plain(arrow_type):
            return name, f"has {quoted(name)} as {fields[name]}; the table has it as {arrow_type}"
    for name, arrow_type in fields.items():
        if name not in table.names:
            return (
                name,
                f"has the column {quoted(name)} ({arrow_type}), which the table does not have",
            )
    return None


def same_rows(left: pa.Table, right: pa.Table, keys: Sequence[str]) -> bool:
    """True when both tables hold the same rows (same column names, types and values).

    Rows are compared sorted by ``keys``; column order, chunking and nullability flags do not
    matter. This is how a merged table is compared with the published one.
    """
    if sorted(left.column_names) != sorted(right.column_names) or left.num_rows != right.num_rows:
        return False
    left, right = sort_by_keys(left, keys), sort_by_keys(right, keys)
    for name in left.column_names:
        a, b = left.column(name), right.column(name)
        if a.type != b.type or not a.combine_chunks().equals(b.combine_chunks()):
            return False
    return True

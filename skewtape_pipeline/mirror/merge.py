"""Apply a change file's rows to one reference table with a single DuckDB query.

Semantics (the published ones): an ``upsert`` row replaces the row with the same key or is
added; a ``delete`` row removes the row with its key. The result is ordered by the key;
``UNION ALL BY NAME`` keeps every column of both sides when the schema gained a column.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import duckdb

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.duckdb_interrupt import interruptible
from skewtape_pipeline.errors import StorageError

DUCKDB_THREADS = 2


def connect() -> duckdb.DuckDBPyConnection:
    """An in-memory DuckDB connection sized for merges (two threads)."""
    return duckdb.connect(config={"threads": DUCKDB_THREADS})


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _sql_string(path: Path) -> str:
    return "'" + str(path).replace("'", "''") + "'"


def merge_query(
    table: Path,
    changes: Path,
    out: Path,
    keys: Sequence[str],
    *,
    columns: Sequence[str] | None = None,
) -> str:
    """The one ``COPY ... TO`` statement that writes the merged table to ``out`` (ZSTD Parquet).

    ``columns`` orders the result's columns (default: the table's, then any new ones).
    """
    key_list = ", ".join(_quote(key) for key in keys)
    selected = ", ".join(_quote(name) for name in columns) if columns else "*"
    return f"""
        COPY (
          SELECT {selected} FROM (
            SELECT base.* FROM read_parquet({_sql_string(table)}) AS base
            ANTI JOIN (SELECT row.* FROM read_parquet({_sql_string(changes)})) AS ch
              USING ({key_list})
            UNION ALL BY NAME
            SELECT row.* FROM read_parquet({_sql_string(changes)}) WHERE op = 'upsert'
          ) ORDER BY {key_list}
        ) TO {_sql_string(out)} (FORMAT PARQUET, COMPRESSION ZSTD)
    """


def merge_table(
    con: duckdb.DuckDBPyConnection,
    table: Path,
    changes: Path,
    keys: Sequence[str],
    *,
    out: Path | None = None,
    columns: Sequence[str] | None = None,
    checkpoint_name: str,
) -> None:
    """Write ``table`` with ``changes`` applied to ``out`` (default: over ``table``), atomically.

    Idempotent in rows (applying the same changes twice gives the same rows). The result is
    written to a temporary file beside ``out`` and renamed over it; a failure or crash leaves
    ``out`` as it was (plus, after a crash, a temporary file that the next run removes).
    DuckDB's I/O errors (a full disk) are raised as :class:`StorageError` naming ``table``;
    Ctrl-C stops the statement at once (``duckdb_interrupt.interruptible``).
    """

    def write(temp: Path) -> None:
        try:
            query = merge_query(table, changes, temp, keys, columns=columns)
            interruptible(con, lambda: con.execute(query))
        except duckdb.IOException as exc:  # a full disk, an I/O error: an OS error, one line
            first_line = str(exc).strip().splitlines()[0]
            raise StorageError(
                f"{table}: the merged table could not be written ({first_line})"
            ) from None
        faults.checkpoint(f"{checkpoint_name}:written")

    fsio.atomic_write_with(out if out is not None else table, write)

"""The archive's reports table: one row per symbol-day a venue-day run looked at.

Each venue-day has one Parquet file, ``<archive>/_skewtape_reports/<YYYY-MM-DD>/<venue>.parquet``
(the venue percent-encoded as a symbol folder is), replaced atomically (temporary file, fsync,
rename) right after the run's symbol-day files are published. A row says what became of one
symbol-day: ``archived`` (its ticks are in the archive, with the compaction report's numbers),
``skipped`` (the venue's month file lists the symbol but it had no trades that day: nothing is
archived for it) or ``removed`` (the publisher corrected its ticks away: its file was removed
or its consolidated copy withdrawn). A run over some symbols of a venue-day (a correction)
replaces only their rows.

DuckDB reads the table directly (``read_parquet('<archive>/_skewtape_reports/*/*.parquet')``);
:func:`reports_view_sql` names it ``tick_reports`` beside the ``ticks`` view, where an archived
row's ``tier`` and ``path`` are where the symbol-day is now (the files keep what the run
reported: re-tiering and withdrawal never rewrite them). The folder starts
with ``_``, so neither the ``ticks`` view nor re-tiering ever reads it as ticks.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.fsio import atomic_write_with, is_temp
from skewtape_pipeline.ticks.archive.store.layout import encode_symbol

REPORTS_DIR = "_skewtape_reports"
REPORTS_VIEW = "tick_reports"
ARCHIVED, SKIPPED, REMOVED = "archived", "skipped", "removed"
STATUSES = (ARCHIVED, SKIPPED, REMOVED)

REPORTS_SCHEMA = pa.schema(
    [
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("venue", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("status", pa.string(), nullable=False),
        pa.field("tick_count", pa.int64(), nullable=False),
        pa.field("tier", pa.string()),
        pa.field("path", pa.string()),
        pa.field("compacted_size_bytes", pa.int64()),
        pa.field("raw_size_bytes", pa.int64()),
        pa.field("raw_size_basis", pa.string()),
        pa.field("compression_ratio", pa.float64()),
        pa.field("target_compression_ratio", pa.float64()),
        pa.field("meets_compression_target", pa.bool_()),
        pa.field("codec", pa.string()),
        pa.field("compression_level", pa.int32()),
        pa.field("reordered_ticks", pa.int64()),
        pa.field("timestamp_unit", pa.string()),
        pa.field("price_scale", pa.int32()),
        pa.field("round_trip_verified", pa.bool_()),
        pa.field("read_back_mismatched_rows", pa.int64(), nullable=False),
        pa.field("source_bundle_id", pa.string(), nullable=False),
        pa.field("source_fills_path", pa.string(), nullable=False),
        pa.field("source_fills_sha256", pa.string()),
        pa.field("venue_departed", pa.bool_(), nullable=False),
        pa.field("batch", pa.string(), nullable=False),
        pa.field("float_noise_normalized", pa.int64()),
        pa.field("unchanged", pa.bool_()),
    ]
)
"""One row per symbol-day. ``path`` is relative to the archive root; ``batch`` names the run
that wrote the row (the Dagster run id under Dagster); ``read_back_mismatched_rows`` counts the
rows DuckDB read back differently from the fills (0 when the file is exact); ``venue_departed``
says the newest snapshot no longer holds the venue's month file, so the symbol-day was read
from the last snapshot that held it (a venue that leaves keeps its ticks);
``float_noise_normalized`` counts the prices and quantities whose float representation noise
was rounded away; ``unchanged`` says whether the archive already held an ``archived``
symbol-day with the very same ticks, so the run wrote nothing for it (a rerun's days; null on
``skipped`` and ``removed`` rows). Both are null in rows written before the column existed."""


@dataclass(frozen=True)
class ReportRow:
    """One row of the reports table (fields as in :data:`REPORTS_SCHEMA`)."""

    symbol: str
    venue: str
    date: date
    status: str
    tick_count: int
    source_bundle_id: str
    source_fills_path: str
    source_fills_sha256: str | None
    batch: str
    venue_departed: bool = False
    read_back_mismatched_rows: int = 0
    tier: str | None = None
    path: str | None = None
    compacted_size_bytes: int | None = None
    raw_size_bytes: int | None = None
    raw_size_basis: str | None = None
    compression_ratio: float | None = None
    target_compression_ratio: float | None = None
    meets_compression_target: bool | None = None
    codec: str | None = None
    compression_level: int | None = None
    reordered_ticks: int | None = None
    timestamp_unit: str | None = None
    price_scale: int | None = None
    round_trip_verified: bool | None = None
    float_noise_normalized: int | None = None
    unchanged: bool | None = None


def reports_dir(archive_root: Path) -> Path:
    """``<archive root>/_skewtape_reports``."""
    return Path(archive_root) / REPORTS_DIR


def reports_file(archive_root: Path, venue: str, day: date) -> Path:
    """The reports file of one venue-day."""
    return reports_dir(archive_root) / day.isoformat() / f"{encode_symbol(venue)}.parquet"


def write_venue_day_reports(
    archive_root: Path, venue: str, day: date, rows: Sequence[ReportRow], *, replace_all: bool
) -> Path:
    """Publish the venue-day's reports file with ``rows``: the whole file when ``replace_all``,
    else the rows of the same symbols replaced and the others kept. Returns the file."""
    target = reports_file(archive_root, venue, day)
    new = _table(rows)
    if not replace_all and target.exists():
        kept = _read_file(target)
        mine = pa.array(sorted({row.symbol for row in rows}), pa.string())
        kept = kept.filter(pc.invert(pc.is_in(kept["symbol"], value_set=mine)))
        new = pa.concat_tables([kept, new])
    new = new.sort_by([("symbol", "ascending")])
    atomic_write_with(target, lambda temp: pq.write_table(new, temp, compression="zstd"))
    return target


def read_venue_day_reports(archive_root: Path, venue: str, day: date) -> pa.Table:
    """The reports of one venue-day (an empty table when it has none)."""
    path = reports_file(archive_root, venue, day)
    return _read_file(path) if path.exists() else REPORTS_SCHEMA.empty_table()


def symbol_day_report(archive_root: Path, symbol: str, day: date) -> dict | None:
    """The reports table's row of ``symbol`` on ``day`` (a dict of :data:`REPORTS_SCHEMA`'s
    fields), None when no venue-day run reported it."""
    folder = reports_dir(archive_root) / day.isoformat()
    for path in sorted(p for p in folder.glob("*.parquet") if not is_temp(p)):
        table = _read_file(path)
        rows = table.filter(pc.equal(table["symbol"], symbol)).to_pylist()
        if rows:
            return rows[0]
    return None


def reports_files(archive_root: Path) -> list[Path]:
    """Every venue-day reports file of the archive, by day then venue."""
    folder = reports_dir(archive_root)
    return sorted(p for p in folder.glob("*/*.parquet") if not is_temp(p))


PLACES_SCHEMA = pa.schema(
    [
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("tier", pa.string(), nullable=False),
        pa.field("path", pa.string(), nullable=False),
    ]
)
"""Where each symbol-day of an archive is now (``path``: a hot file's path relative to the
archive root; a consolidated file's catalog path, ``<TIER>/<path inside the tier root>``):
what :func:`reports_view_sql` puts in the reports' ``tier`` and ``path``."""


def reports_view_sql(
    roots: Iterable[Path], *, name: str = REPORTS_VIEW, places: Sequence[str] | None = None
) -> str:
    """``CREATE OR REPLACE VIEW <name>`` over the reports files of the archives at ``roots``
    (a typed empty view when there are none).

    ``places`` names, for each root in order, a table of :data:`PLACES_SCHEMA` registered on
    the connection: an ``archived`` row's ``tier`` and ``path`` are then where the symbol-day
    is now (null when it is no longer in the view: withdrawn), never a file re-tiering removed.
    Without it they are what the run that wrote the row reported."""
    roots = list(roots)
    columns = ", ".join(f"CAST(NULL AS {_duckdb_type(f.type)}) AS {f.name}" for f in REPORTS_SCHEMA)
    branches = [f"SELECT {columns} WHERE false"]  # every column, whatever the files predate
    for index, root in enumerate(roots):
        files = [str(p.absolute()) for p in reports_files(root)]
        if not files:
            continue
        listed = ", ".join("'" + f.replace("'", "''") + "'" for f in files)
        source = f"read_parquet([{listed}], union_by_name = true)"
        if places is None:
            branches.append(f"SELECT * FROM {source}")
            continue
        now = "CASE WHEN r.status = 'archived' THEN p.{0} ELSE r.{0} END AS {0}"
        branches.append(
            f"SELECT r.* REPLACE ({now.format('tier')}, {now.format('path')}) FROM {source} r "
            f"LEFT JOIN {places[index]} p ON r.symbol = p.symbol AND r.date = p.date"
        )
    return f"CREATE OR REPLACE VIEW {name} AS " + " UNION ALL BY NAME ".join(branches)


def _duckdb_type(kind: pa.DataType) -> str:
    names = {
        pa.string(): "VARCHAR",
        pa.date32(): "DATE",
        pa.int64(): "BIGINT",
        pa.int32(): "INTEGER",
        pa.float64(): "DOUBLE",
        pa.bool_(): "BOOLEAN",
    }
    return names[kind]


def _table(rows: Sequence[ReportRow]) -> pa.Table:
    for row in rows:
        if row.status not in STATUSES:
            raise ValueError(f"report row status {row.status!r}: expected one of {STATUSES}")
    columns = {f.name: [getattr(row, f.name) for row in rows] for f in REPORTS_SCHEMA}
    return pa.table(columns, schema=REPORTS_SCHEMA)


def _read_file(path: Path) -> pa.Table:
    try:
        table = pq.read_table(path)
    except (OSError, pa.ArrowInvalid) as exc:
        raise TickFormatError(f"{path}: reports file does not read ({exc})") from None
    table = _with_later_columns(table)
    if not table.schema.equals(REPORTS_SCHEMA, check_metadata=False):
        raise TickFormatError(
            f"{path}: reports file schema {table.schema} differs from the expected "
            f"{REPORTS_SCHEMA}; remove the file and rerun its venue-day"
        )
    return table


_LATER_COLUMNS = ("float_noise_normalized", "unchanged")
"""Columns added to :data:`REPORTS_SCHEMA` after files were written without them (the last ones)."""


def _with_later_columns(table: pa.Table) -> pa.Table:
    """A file written before a later column existed, with that column as nulls (the columns in
    :data:`REPORTS_SCHEMA`'s order)."""
    missing = [name for name in _LATER_COLUMNS if name not in table.column_names]
    for name in missing:
        field = REPORTS_SCHEMA.field(name)
        table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    if missing and set(table.column_names) == set(REPORTS_SCHEMA.names):
        table = table.select(REPORTS_SCHEMA.names)
    return table

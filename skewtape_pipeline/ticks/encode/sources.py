"""Readers that turn tick files into exact columns, and the canonical CSV form.

Every reader opens its file as a :class:`TickStream` (``open_*``): the file read in bounded
chunks (:mod:`~skewtape_pipeline.ticks.encode.chunked`), one :class:`SourceTicks` per chunk; the
``read_*`` functions read the whole file into one. A :class:`SourceTicks` is a pyarrow table with
the canonical columns
``timestamp_nanos`` (int64 ns, UTC), ``price``, ``quantity`` (exact: decimal or decimal text,
never a float parsed from text), ``side`` (the source's raw side values), optionally ``symbol``,
plus the source's explicit side vocabulary and what is needed to measure its raw size.
:meth:`SourceTicks.to_batch` then scales the numbers to a :class:`TickBatch`.

Timestamps and prices are parsed from strings into integers; nothing passes through a float.

Readers (each mapping documented in the real files' SOURCES.md):

- :func:`open_canonical` (``.csv``/``.parquet``): ``timestamp_nanos,price,quantity,side[,symbol]``
- :func:`open_kalshi_trades`: Kalshi ``GET /markets/trades`` rows (price = yes_price / 100)
- :func:`open_tardis_trades`: a Tardis ``trades`` CSV export (ts = timestamp * 1000)
- :func:`open_lobster_messages`: a LOBSTER message file, executions only (types 4, 5, 6)

Errors are :class:`~skewtape_pipeline.errors.TickValidationError` naming the file, the 0-based
data row (header excluded) and the column; a ``path`` that is no path (None, a number, empty
text) is a ConfigError naming it, before anything is opened.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, time, timedelta
from pathlib import Path
from typing import NamedTuple
from zoneinfo import ZoneInfo

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import SourceLabelError, TickValidationError, quoted
from skewtape_pipeline.ticks.encode.chunked import (
    DEFAULT_BLOCK_BYTES,
    RawChunk,
    ReadState,
    csv_chunks,
    csv_header,
    open_parquet,
    parquet_chunks,
)
from skewtape_pipeline.ticks.encode.exact_columns import (
    first_row_raising,
    first_true,
    int64_of_text,
)
from skewtape_pipeline.ticks.encode.model import SchemaRequest, TickBatch, batch_from_columns
from skewtape_pipeline.ticks.encode.sides import (
    CANONICAL_SIDES,
    EXCHANGE_TAKER_SIDES,
    KALSHI_TAKER_SIDES,
    LOBSTER_CROSS,
    LOBSTER_DIRECTIONS,
)

CANONICAL_COLUMNS = ("timestamp_nanos", "price", "quantity", "side")
CSV_HEADER = ",".join(CANONICAL_COLUMNS) + "\n"
"""The first line of a canonical tick CSV."""
SYMBOL_COLUMN = "symbol"

KALSHI_COLUMNS = ("ticker", "count", "created_time", "yes_price", "no_price", "taker_side")
TARDIS_COLUMNS = ("symbol", "timestamp", "local_timestamp", "side", "price", "amount")
LOBSTER_COLUMNS = ("time", "type", "order_id", "size", "price", "direction")
LOBSTER_EXECUTION_TYPES = ("4", "5", "6")
LOBSTER_NAME_CONVENTION = "TICKER_YYYY-MM-DD_start_end_message_LEVEL.csv"
LOBSTER_NAME_RE = re.compile(
    r"^(?P<ticker>[^_/]+)_(?P<date>\d{4}-\d\d-\d\d)_\d+_\d+_message_\d+\.csv$", re.IGNORECASE
)
"""LOBSTER's message file name, e.g. ``AMZN_2012-06-21_34200000_57600000_message_1.csv``."""

_ISO_UTC_PATTERN = r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?Z$"
_SECONDS_PATTERN = r"^(?P<sec>\d+)(?:\.(?P<frac>\d{1,9}))?$"


@dataclass(frozen=True)
class SourceTicks:
    """Ticks read from one file, still in the source's own units and side vocabulary.

    Attributes
    ----------
    table
        Columns ``timestamp_nanos`` (int64), ``price``, ``quantity``, ``side``, [``symbol``].
    side_map
        The source's side vocabulary (raw value -> BUY/SELL/UNKNOWN).
    path, file_bytes
        The file and its measured size (None when built in memory).
    file_rows
        Data rows in the file before any filtering (LOBSTER keeps executions only).
    row_numbers
        0-based data row in the file of each table row (None: the same as the table row).
    row_bytes
        Measured bytes of each row's line in the file (None when not measurable, e.g. Parquet).
    first_row
        0-based data row in the file of table row 0 when ``row_numbers`` is None (a chunk of a
        :class:`TickStream`).
    fields
        The file's own name of each canonical column it names otherwise (a Kalshi file's
        ``created_time`` for ``timestamp_nanos``): errors name the file's column.
    """

    table: pa.Table
    side_map: Mapping[str, str]
    path: Path | None = None
    file_bytes: int | None = None
    file_rows: int | None = None
    row_numbers: pa.Array | None = None
    row_bytes: pa.Array | None = None
    first_row: int = 0
    fields: Mapping[str, str] = field(default_factory=dict)

    @property
    def symbols(self) -> pa.Array | None:
        """The ``symbol`` column as one array, or None when the source has none."""
        if SYMBOL_COLUMN not in self.table.column_names:
            return None
        return self.table.column(SYMBOL_COLUMN).combine_chunks()

    def file_row(self, row: int | None) -> int | None:
        """The file's 0-based data row of table row ``row``."""
        if row is None:
            return None
        if self.row_numbers is None:
            return self.first_row + row
        return self.row_numbers[row].as_py()

    def filter(self, keep: pa.Array) -> SourceTicks:
        """Only the rows where ``keep`` is True (row numbers and row sizes follow)."""
        rows = pc.indices_nonzero(keep)
        numbers = (
            pc.add(pc.cast(rows, pa.int64()), self.first_row)
            if self.row_numbers is None
            else pc.take(self.row_numbers, rows)
        )
        return replace(
            self,
            table=self.table.filter(keep),
            row_numbers=numbers,
            row_bytes=None if self.row_bytes is None else pc.take(self.row_bytes, rows),
        )

    def to_batch(
        self,
        *,
        price_scale: int | None,
        quantity_scale: int | None = 0,
        side_map: Mapping[str, str] | None = None,
        allow_precision_loss: bool = False,
        timestamp_unit: str | None = "ns",
    ) -> TickBatch:
        """Scale to an exact :class:`TickBatch` (``side_map`` overrides the source's vocabulary)
        whose timestamps are to be stored at ``timestamp_unit``. A scale or unit given as None
        is detected from the data: the smallest exact scale, the coarsest exact unit
        (:func:`~skewtape_pipeline.ticks.encode.model.batch_from_columns`).

        Raises ConfigError, TickValidationError or PrecisionLossError (rows are file rows; a
        timestamp finer than ``timestamp_unit`` is a PrecisionLossError).
        """
        table = self.table
        try:
            return batch_from_columns(
                table,
                SchemaRequest(timestamp_unit, price_scale, quantity_scale),
                side_map=self.side_map if side_map is None else side_map,
                allow_precision_loss=allow_precision_loss,
            )
        except TickValidationError as exc:
            raise self.located(exc) from None

    def located(self, exc: TickValidationError) -> TickValidationError:
        """The same error, naming this source's file, file row and column."""
        where = f"{self.path}: " if self.path else ""
        named = self.fields.get(exc.field, exc.field) if exc.field else exc.field
        return type(exc)(f"{where}{exc.detail}", row=self.file_row(exc.row), field=named)


def source_from_table(
    table: pa.Table,
    *,
    side_map: Mapping[str, str],
    columns: Mapping[str, str] | None = None,
    path: Path | None = None,
) -> SourceTicks:
    """Wrap an in-memory table (e.g. a snapshot's fills month file) as a :class:`SourceTicks`.

    ``columns`` maps canonical names to the table's (e.g. ``{"timestamp_nanos": "ts",
    "side": "taker_side", "symbol": "market_id"}``); unnamed canonical columns are expected
    under their own names. Raw size is then measured as canonical CSV.

    Raises TickValidationError when a named column is missing.
    """
    names = {name: name for name in (*CANONICAL_COLUMNS, SYMBOL_COLUMN)} | dict(columns or {})
    missing = [source for canonical, source in names.items()
               if source not in table.column_names and canonical != SYMBOL_COLUMN]  # fmt: skip
    if missing:
        raise TickValidationError(
            f"{path or 'table'}: missing column(s) {_names(missing)}; found "
            f"{_names(table.column_names)}",
            field=missing[0],
        )
    picked = {c: table.column(s) for c, s in names.items() if s in table.column_names}
    return SourceTicks(table=pa.table(picked), side_map=side_map, path=path)


@dataclass
class TickStream:
    """The ticks of one file, read in bounded chunks
    (:mod:`~skewtape_pipeline.ticks.encode.chunked`).

    :meth:`chunks` reads the file once more each time it is called and yields one
    :class:`SourceTicks` per chunk (rows named by their file row), validated as far as the
    reader checks; ``state`` follows the read (bytes and rows read, whether each row's line
    length was measured). :meth:`read_all` holds the whole file (small files, tests).
    """

    path: Path | None
    side_map: Mapping[str, str]
    file_bytes: int | None
    read: Callable[[ReadState], Iterator[SourceTicks]]
    state: ReadState = field(default_factory=ReadState)
    fields: Mapping[str, str] = field(default_factory=dict)
    """The file's own column names (:attr:`SourceTicks.fields`)."""

    def chunks(self) -> Iterator[SourceTicks]:
        """The file's ticks chunk by chunk, from the start (``state`` starts over)."""
        self.state = ReadState(file_bytes=self.file_bytes or 0)
        yield from self.read(self.state)

    def read_all(self) -> SourceTicks:
        """Every chunk as one :class:`SourceTicks` (the whole file in memory)."""
        parts = list(self.chunks())
        empty = not parts
        numbered = any(part.row_numbers is not None for part in parts)
        measured = self.state.lines_measured and all(p.row_bytes is not None for p in parts)
        return SourceTicks(
            table=pa.concat_tables([p.table for p in parts]) if parts else pa.table({}),
            side_map=self.side_map,
            path=self.path,
            file_bytes=self.file_bytes,
            file_rows=self.state.rows,
            row_numbers=_concat([_file_rows(p) for p in parts]) if numbered else None,
            row_bytes=_concat([p.row_bytes for p in parts]) if measured and not empty else None,
            fields=self.fields,
        )


def _concat(arrays: list) -> pa.Array:
    return pa.concat_arrays(arrays) if arrays else pa.array([], pa.int64())


def _file_rows(part: SourceTicks) -> pa.Array:
    if part.row_numbers is not None:
        return part.row_numbers
    return pc.add(pc.cast(pa.array(range(part.table.num_rows)), pa.int64()), part.first_row)


def stream_of(source: SourceTicks) -> TickStream:
    """An in-memory :class:`SourceTicks` as a one-chunk :class:`TickStream`."""

    def read(state: ReadState) -> Iterator[SourceTicks]:
        state.rows = source.table.num_rows if source.file_rows is None else source.file_rows
        state.lines_measured = source.row_bytes is not None
        state.bytes_read = state.file_bytes
        yield source

    return TickStream(source.path, source.side_map, source.file_bytes, read, fields=source.fields)


Transform = Callable[[pa.Table], tuple[pa.Table, pa.Array | None]]
"""A reader's mapping of one chunk of raw columns to canonical columns: the table, and the
chunk rows it kept (None: every row). Its errors name the chunk's row."""


def source_stream(
    path: Path, chunks: Callable[[ReadState], Iterator[RawChunk]], transform: Transform,
    side_map: Mapping[str, str], fields: Mapping[str, str] | None = None,
) -> TickStream:  # fmt: skip
    """A :class:`TickStream` mapping each raw chunk of ``chunks`` through ``transform``; its
    errors name a canonical column by the file's name for it in ``fields``
    (:attr:`SourceTicks.fields`)."""

    def read(state: ReadState) -> Iterator[SourceTicks]:
        for raw in chunks(state):
            try:
                table, kept = transform(raw.table)
            except TickValidationError as exc:
                row = None if exc.row is None else raw.first_row + exc.row
                raise type(exc)(exc.detail, row=row, field=exc.field) from None
            chunk = _chunk_source(raw, table, kept, path=path, side_map=side_map)
            yield replace(chunk, fields=named)

    named = dict(fields or {})
    return TickStream(path, side_map, path.stat().st_size, read, fields=named)


def _chunk_source(
    raw: RawChunk, table: pa.Table, kept: pa.Array | None, *, path: Path,
    side_map: Mapping[str, str],
) -> SourceTicks:  # fmt: skip
    if kept is None:
        return SourceTicks(table=table, side_map=side_map, path=path, row_bytes=raw.row_bytes,
                           first_row=raw.first_row)  # fmt: skip
    return SourceTicks(
        table=table,
        side_map=side_map,
        path=path,
        row_numbers=pc.add(pc.cast(kept, pa.int64()), raw.first_row),
        row_bytes=None if raw.row_bytes is None else pc.take(raw.row_bytes, kept),
    )


def csv_stream(
    path: Path, names: list[str], transform: Transform, side_map: Mapping[str, str], *,
    header_lines: int = 1, block_bytes: int = DEFAULT_BLOCK_BYTES,
    fields: Mapping[str, str] | None = None,
) -> TickStream:  # fmt: skip
    def chunks(state: ReadState) -> Iterator[RawChunk]:
        return csv_chunks(
            path, names=names, header_lines=header_lines, state=state, block_bytes=block_bytes
        )

    return source_stream(path, chunks, transform, side_map, fields)


# --- canonical form -----------------------------------------------------------------------------


def read_canonical(path: Path | str, *, side_map: Mapping[str, str] | None = None) -> SourceTicks:
    """Read a canonical ``.csv`` or ``.parquet`` tick file whole (see :func:`open_canonical`)."""
    return open_canonical(path, side_map=side_map).read_all()


def open_canonical(
    path: Path | str,
    *,
    side_map: Mapping[str, str] | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> TickStream:
    """A canonical ``.csv`` or ``.parquet`` tick file as a :class:`TickStream` of chunks of
    about ``block_bytes`` (see :func:`open_canonical_csv`, :func:`open_canonical_parquet`)."""
    path = fsio.checked_path(path, "path", "a tick file")
    suffix = path.suffix.lower()
    if suffix == ".csv":
        return open_canonical_csv(path, side_map=side_map, block_bytes=block_bytes)
    if suffix in (".parquet", ".pq"):
        return open_canonical_parquet(path, side_map=side_map, block_bytes=block_bytes)
    raise TickValidationError(f"{path}: expected a .csv or .parquet file of ticks")


def open_canonical_csv(
    path: Path | str,
    *,
    side_map: Mapping[str, str] | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> TickStream:
    """``timestamp_nanos,price,quantity,side[,symbol]`` (header required, any column order).

    Every column is read as text and parsed exactly later. ``side_map`` is the file's side
    vocabulary (default: BUY/SELL/UNKNOWN).

    Raises
    ------
    TickValidationError
        The header cannot be read, a canonical column is missing or an unknown one present;
        reading the chunks: the file cannot be read as CSV or has a line longer than
        ``block_bytes`` (naming its row).
    """
    path = fsio.checked_path(path, "path", "a tick file")
    names = csv_header(path)
    try:
        _check_columns(
            path, names, required=CANONICAL_COLUMNS, optional=(SYMBOL_COLUMN,), strict=True
        )
    except TickValidationError as exc:
        suggested = format_of_columns(names)
        if suggested is None:
            raise
        raise TickValidationError(
            f"{exc.detail}; these are the columns of {suggested[1]}: pass --input-format "
            f"{suggested[0]}",
            field=exc.field,
        ) from None
    present = [n for n in (*CANONICAL_COLUMNS, SYMBOL_COLUMN) if n in names]
    return csv_stream(
        path,
        names,
        lambda raw: (raw.select(present), None),
        CANONICAL_SIDES if side_map is None else side_map,
        block_bytes=block_bytes,
    )


def format_of_columns(names: Sequence[str]) -> tuple[str, str] | None:
    """(``--input-format`` value, what it is) of a CSV header whose columns are those of a
    source format this module reads: Kalshi trades, Tardis trades, or a LOBSTER message file
    (no header: six numbers on its first line); None when none matches."""
    if all(name in names for name in KALSHI_COLUMNS):
        return "kalshi-trades", "a Kalshi trades file"
    if all(name in names for name in TARDIS_COLUMNS):
        return "tardis-trades", "a Tardis trades file"
    if len(names) == len(LOBSTER_COLUMNS) and all(_is_number(name) for name in names):
        return "lobster-messages", "a LOBSTER message file (no header, six numbers)"
    return None


def canonical_columns(path: Path) -> list[str]:
    """The column names of a canonical ``.csv`` file (its header) or ``.parquet`` file (its
    schema); TickValidationError naming the file when it cannot be read as one."""
    if path.suffix.lower() == ".csv":
        return csv_header(path)
    return open_parquet(path).schema_arrow.names


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


PARQUET_ROW_BYTES = 32
"""Bytes per row assumed to size a Parquet chunk from ``block_bytes``."""


def open_canonical_parquet(
    path: Path | str,
    *,
    side_map: Mapping[str, str] | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> TickStream:
    """A Parquet file with the canonical columns (ints, decimals, floats or text), read in
    chunks of ``block_bytes // PARQUET_ROW_BYTES`` rows (a row group is decoded whole)."""
    path = fsio.checked_path(path, "path", "a tick file")
    file = open_parquet(path)
    names = file.schema_arrow.names
    _check_columns(path, names, required=CANONICAL_COLUMNS, optional=(SYMBOL_COLUMN,), strict=True)
    rows = max(block_bytes // PARQUET_ROW_BYTES, 1)

    def chunks(state: ReadState) -> Iterator[RawChunk]:
        return parquet_chunks(open_parquet(path), path, state=state, batch_rows=rows)

    side_map = CANONICAL_SIDES if side_map is None else side_map
    return source_stream(path, chunks, lambda raw: (raw, None), side_map)


def canonical_table(batch: TickBatch) -> pa.Table:
    """The batch as canonical columns: ``timestamp_nanos`` int64, ``price`` decimal(18, P),
    ``quantity`` int64 (scale 0) or decimal(18, Q), ``side`` names."""
    return pa.table(
        {
            "timestamp_nanos": batch.ts_ns,
            "price": units_as_decimal(batch.price, batch.price_scale),
            "quantity": (
                batch.quantity
                if batch.quantity_scale == 0
                else units_as_decimal(batch.quantity, batch.quantity_scale)
            ),
            "side": batch.side_names(),
        }
    )


def units_as_decimal(units: pa.Array, scale: int) -> pa.Array:
    """Zero-copy view of int64 units as decimal64(18, scale)."""
    return pa.Array.from_buffers(
        pa.decimal64(18, scale), len(units), units.buffers(), units.null_count, units.offset
    )


def canonical_csv_bytes(batch: TickBatch) -> bytes:
    """The canonical CSV of ``batch``: the header, then one ``timestamp_nanos,price,quantity,side``
    line per tick, price and quantity with exactly their scale's decimals. Same text as
    :func:`skewtape_pipeline.reference.tkc1.canonical_csv_text` for the same ticks."""
    sink = pa.BufferOutputStream()
    sink.write(CSV_HEADER.encode("ascii"))
    pa_csv.write_csv(
        canonical_table(batch),
        sink,
        pa_csv.WriteOptions(include_header=False, quoting_style="none"),
    )
    return sink.getvalue().to_pybytes()


def canonical_csv_size_bytes(batch: TickBatch) -> int:
    """Bytes of :func:`canonical_csv_bytes`: serialized and measured, never estimated."""
    return len(canonical_csv_bytes(batch))


def write_canonical_csv(batch: TickBatch, path: Path | str) -> None:
    """Write :func:`canonical_csv_bytes` to ``path`` atomically."""
    fsio.atomic_write_bytes(
        fsio.checked_path(path, "path", "a CSV file"), canonical_csv_bytes(batch)
    )


# --- real files ---------------------------------------------------------------------------------


def read_kalshi_trades(path: Path | str) -> SourceTicks:
    """:func:`open_kalshi_trades`, read whole."""
    return open_kalshi_trades(path).read_all()


def open_kalshi_trades(path: Path | str, *, block_bytes: int = DEFAULT_BLOCK_BYTES) -> TickStream:
    """Kalshi trades (``trade_id, ticker, count, created_time, yes_price, no_price,
    taker_side``, as the public trades API returns them), in chunks.

    Mapping: ``timestamp_nanos`` = ``created_time`` (ISO-8601 UTC, fraction padded to 9 digits);
    ``price`` = ``yes_price / 100`` exactly (USD per YES contract: 1 to 99 cents; ``no_price``
    must equal ``100 - yes_price``); ``quantity`` = ``count``; ``side`` = ``taker_side``
    (yes -> BUY, no -> SELL in YES terms); ``symbol`` = ``ticker``.
    """
    path = fsio.checked_path(path, "path", "a tick file")
    names = csv_header(path)
    _check_columns(path, names, required=KALSHI_COLUMNS)

    def transform(raw: pa.Table) -> tuple[pa.Table, None]:
        created = raw.column("created_time").combine_chunks()
        row = first_true(pc.invert(pc.match_substring_regex(created, _ISO_UTC_PATTERN)))
        if row is not None:
            raise TickValidationError(
                f"{path}: created_time {quoted(created[row].as_py())} is not ISO-8601 UTC "
                "(YYYY-MM-DDTHH:MM:SS[.fraction]Z)",
                row=row,
                field="created_time",
            )
        ts = _utc_nanoseconds(created, path)
        yes = int_column(raw, "yes_price", path)
        no = int_column(raw, "no_price", path)
        row = first_true(pc.or_(pc.less(yes, 1), pc.greater(yes, 99)))
        if row is not None:
            raise TickValidationError(
                f"{path}: yes_price {yes[row].as_py()} is no price of a Kalshi contract "
                "(1 to 99 cents)", row=row, field="yes_price",
            )  # fmt: skip
        row = first_true(pc.not_equal(pc.add(yes, no), 100))
        if row is not None:
            raise TickValidationError(
                f"{path}: yes_price {yes[row].as_py()} + no_price {no[row].as_py()} != 100 cents",
                row=row,
                field="no_price",
            )
        columns = {
            "timestamp_nanos": ts,
            "price": units_as_decimal(yes, 2),
            "quantity": int_column(raw, "count", path),
            "side": raw.column("taker_side"),
            "symbol": raw.column("ticker"),
        }
        return pa.table(columns), None

    fields = {"timestamp_nanos": "created_time", "price": "yes_price", "quantity": "count",
              "side": "taker_side", "symbol": "ticker"}  # fmt: skip
    return csv_stream(path, names, transform, KALSHI_TAKER_SIDES, block_bytes=block_bytes,
                      fields=fields)  # fmt: skip


NS_RANGE = "1677-09-21T00:12:43.145224192Z to 2262-04-11T23:47:16.854775807Z"
"""The times int64 nanoseconds since the epoch hold."""


def _utc_nanoseconds(created: pa.Array, path: Path) -> pa.Array:
    """``created_time`` text already of ISO-8601 UTC form as int64 nanoseconds.

    Raises TickValidationError naming the first row whose time does not exist (second 60,
    February 30, hour 25) or lies outside :data:`NS_RANGE` (year 1).
    """

    def to_ns(part: pa.Array) -> pa.Array:
        return pc.cast(part, pa.timestamp("ns", "UTC"))

    try:
        return pc.cast(to_ns(created), pa.int64())
    except pa.ArrowInvalid:
        row = first_row_raising(created, to_ns)
    text = created[row].as_py()
    try:
        datetime.fromisoformat(text[:19])
        problem = f"lies outside the times int64 nanoseconds hold ({NS_RANGE})"
    except ValueError:
        problem = "is no time of the calendar (second 60, February 30, hour 25?)"
    raise TickValidationError(
        f"{path}: created_time {quoted(text)} {problem}", row=row, field="created_time"
    )


def read_tardis_trades(path: Path | str, *, timestamp: str = "exchange") -> SourceTicks:
    """:func:`open_tardis_trades`, read whole."""
    return open_tardis_trades(path, timestamp=timestamp).read_all()


def open_tardis_trades(
    path: Path | str, *, timestamp: str = "exchange", block_bytes: int = DEFAULT_BLOCK_BYTES
) -> TickStream:
    """A Tardis ``trades`` CSV (``exchange, symbol, timestamp, local_timestamp, id, side,
    price, amount``), in chunks.

    Mapping: ``timestamp_nanos`` = ``timestamp * 1000`` (exchange time, µs field) or, with
    ``timestamp="local"``, ``local_timestamp * 1000`` (capture time); ``price`` = ``price`` and
    ``quantity`` = ``amount`` as exact decimal text; ``side`` = ``side`` (buy/sell/unknown);
    ``symbol`` = ``symbol``.
    """
    path = fsio.checked_path(path, "path", "a tick file")
    if timestamp not in ("exchange", "local"):
        raise TickValidationError(f"timestamp = {timestamp!r}: expected 'exchange' or 'local'")
    names = csv_header(path)
    _check_columns(path, names, required=TARDIS_COLUMNS)
    column = "timestamp" if timestamp == "exchange" else "local_timestamp"

    def transform(raw: pa.Table) -> tuple[pa.Table, None]:
        columns = {
            "timestamp_nanos": nanoseconds(int_column(raw, column, path), 1000, column, path),
            "price": raw.column("price"),
            "quantity": raw.column("amount"),
            "side": raw.column("side"),
            "symbol": raw.column("symbol"),
        }
        return pa.table(columns), None

    fields = {"timestamp_nanos": column, "quantity": "amount"}
    return csv_stream(path, names, transform, EXCHANGE_TAKER_SIDES, block_bytes=block_bytes,
                      fields=fields)  # fmt: skip


def lobster_label(
    path: Path | str, *, symbol: str | None = None, session_date: date | None = None
) -> tuple[str, date]:
    """(symbol, session date) of a LOBSTER message file: from its name when it follows LOBSTER's
    convention (``TICKER_YYYY-MM-DD_start_end_message_LEVEL.csv``), else from the options.

    Raises
    ------
    SourceLabelError
        Neither the name nor the options give one of them, the name's date is not a date, or an
        option contradicts the name (naming the file and both values).
    """
    path = fsio.checked_path(path, "path", "a tick file")
    named = LOBSTER_NAME_RE.match(path.name)
    from_name: dict[str, object] = {}
    if named:
        from_name["symbol"] = named["ticker"]
        try:
            from_name["session date"] = date.fromisoformat(named["date"])
        except ValueError:
            raise SourceLabelError(
                f"{path}: the file name's session date {named['date']!r} is not a date"
            ) from None
    given = {"symbol": symbol, "session date": session_date}
    label, lacking = [], []
    for what, option in (("symbol", "--symbol"), ("session date", "--session-date")):
        value, in_name = given[what], from_name.get(what)
        if value is not None and in_name is not None and value != in_name:
            raise SourceLabelError(
                f"{path}: {option} {_text(value)} contradicts the file name's {what} "
                f"{_text(in_name)}"
            )
        if value is None and in_name is None:
            lacking.append((what, option))
        label.append(value if value is not None else in_name)
    if lacking:
        raise SourceLabelError(
            f"{path}: no {' and no '.join(w for w, _ in lacking)}: the name does not follow "
            f"LOBSTER's {LOBSTER_NAME_CONVENTION}; pass {' and '.join(o for _, o in lacking)}"
        )
    return label[0], label[1]


def _text(value: object) -> str:
    return value.isoformat() if isinstance(value, date) else repr(value)


def read_lobster_messages(
    path: Path | str,
    *,
    symbol: str | None = None,
    session_date: date | None = None,
    exchange_timezone: str = "America/New_York",
) -> SourceTicks:
    """:func:`open_lobster_messages`, read whole."""
    return open_lobster_messages(
        path, symbol=symbol, session_date=session_date, exchange_timezone=exchange_timezone
    ).read_all()


def open_lobster_messages(
    path: Path | str,
    *,
    symbol: str | None = None,
    session_date: date | None = None,
    exchange_timezone: str = "America/New_York",
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> TickStream:
    """A LOBSTER message file (no header: ``time, type, order_id, size, price,
    direction``), in chunks, keeping executions only (types 4, 5 and 6).

    ``symbol`` and ``session_date`` come from the file name (LOBSTER's
    ``TICKER_YYYY-MM-DD_start_end_message_LEVEL.csv``) or, for a renamed file, from these
    options (:func:`lobster_label`; SourceLabelError when neither gives one, or they disagree).

    Mapping: ``timestamp_nanos`` = midnight of ``session_date`` in ``exchange_timezone`` (as UTC
    ns) + the decimal seconds parsed as text (fraction padded to 9 digits), which must fall
    within that day (a time at or past its end, 86400 s on most days, is refused naming its
    row: it would be filed under the next day); ``price`` =
    ``price / 10_000`` exactly; ``quantity`` = ``size``; ``side`` = ``direction`` (-1: an
    executed sell order, so the aggressor bought -> BUY; 1 -> SELL); cross trades (type 6) get
    ``"cross"`` -> UNKNOWN (an auction print has no aggressor).
    """
    path = fsio.checked_path(path, "path", "a tick file")
    symbol, session_date = lobster_label(path, symbol=symbol, session_date=session_date)
    try:
        day = SessionDay.of(session_date, exchange_timezone)
    except ValueError as exc:
        raise TickValidationError(f"{path}: {exc}", field="session date") from None

    def transform(raw: pa.Table) -> tuple[pa.Table, pa.Array]:
        kept = pc.is_in(raw.column("type"), value_set=pa.array(LOBSTER_EXECUTION_TYPES))
        rows = pc.cast(pc.indices_nonzero(kept), pa.int64())
        try:
            return _lobster_executions(raw.filter(kept), path, symbol, day), rows
        except TickValidationError as exc:
            row = None if exc.row is None else rows[exc.row].as_py()
            raise TickValidationError(exc.detail, row=row, field=exc.field) from None

    return csv_stream(
        path, list(LOBSTER_COLUMNS), transform, LOBSTER_DIRECTIONS, header_lines=0,
        block_bytes=block_bytes, fields={"timestamp_nanos": "time", "quantity": "size",
                                         "side": "direction"},
    )  # fmt: skip


ONE_DAY = timedelta(days=1)


class SessionDay(NamedTuple):
    """A LOBSTER file's session day: its date, its midnight in the exchange's time zone (as UTC
    ns) and its length in seconds (86400, or 82800 and 90000 on the days clocks change)."""

    day: date
    timezone: str
    midnight_ns: int
    seconds: int

    @classmethod
    def of(cls, day: date, timezone: str) -> SessionDay:
        """The session day of ``day``; ValueError when the day does not fit the nanosecond
        timestamps an archive stores (1677-09-22 to 2262-04-10)."""
        zone = ZoneInfo(timezone)
        try:
            start, end = (
                datetime.combine(d, time(0), zone).timestamp() for d in (day, day + ONE_DAY)
            )
        except OverflowError:
            start = end = float("inf")
        if not -(2**63) < end * 10**9 < 2**63 or not -(2**63) < start * 10**9 < 2**63:
            raise ValueError(
                f"session date {day.isoformat()} is outside the days nanosecond timestamps "
                "hold (1677-09-22 to 2262-04-10)"
            )
        return cls(day, timezone, int(start) * 10**9, int(end - start))


def _lobster_executions(executions: pa.Table, path: Path, symbol: str, day: SessionDay) -> pa.Table:
    """LOBSTER execution rows as canonical columns (errors name the execution's row)."""
    seconds = executions.column("time").combine_chunks()
    parts = pc.extract_regex(pc.utf8_trim_whitespace(seconds), _SECONDS_PATTERN)
    if parts.null_count:
        row = first_true(pc.is_null(parts))
        raise TickValidationError(
            f"{path}: time {quoted(seconds[row].as_py())} is not decimal seconds with at most 9 "
            "fractional digits",
            row=row,
            field="time",
        )
    _refuse_after_the_day(pc.struct_field(parts, "sec"), seconds, path, day)
    whole = pc.cast(pc.struct_field(parts, "sec"), pa.int64())
    nanos = pc.cast(pc.utf8_rpad(pc.struct_field(parts, "frac"), 9, "0"), pa.int64())
    ts = pc.add_checked(pc.add_checked(pc.multiply_checked(whole, 10**9), nanos), day.midnight_ns)
    price = int_column(executions, "price", path)
    size = int_column(executions, "size", path)
    side = pc.if_else(
        pc.equal(executions.column("type"), "6"), LOBSTER_CROSS, executions.column("direction")
    )
    return pa.table(
        {
            "timestamp_nanos": ts,
            "price": units_as_decimal(price, 4),
            "quantity": size,
            "side": side,
            "symbol": pa.array([symbol] * executions.num_rows, pa.string()),
        }
    )


def _refuse_after_the_day(whole: pa.Array, times: pa.Array, path: Path, day: SessionDay) -> None:
    """TickValidationError naming the first row whose whole seconds ``whole`` (digit text)
    reach the end of ``day``; ``times`` is the time column, for the message."""
    late = first_true(pc.greater_equal(pc.cast(whole, pa.float64()), day.seconds))
    if late is not None:
        raise TickValidationError(
            f"{path}: time {quoted(times[late].as_py())} is at or past the end of the session "
            f"day {day.day} ({day.seconds} s after its midnight in {day.timezone}); the file's "
            "name or --session-date states its day",
            row=late,
            field="time",
        )


# --- helpers ------------------------------------------------------------------------------------


def _check_columns(
    path: Path,
    names: list[str],
    *,
    required: tuple[str, ...],
    optional: tuple[str, ...] = (),
    strict: bool = False,
) -> None:
    missing = [name for name in required if name not in names]
    if missing:
        raise TickValidationError(
            f"{path}: missing column(s) {_names(missing)}; found {_names(names)}",
            field=missing[0],
        )
    if strict:
        extra = [name for name in names if name not in (*required, *optional)]
        if extra:
            raise TickValidationError(
                f"{path}: unexpected column(s) {_names(extra)}; the canonical columns are "
                f"{_names((*required, *optional))}",
                field=extra[0],
            )
    if len(set(names)) != len(names):
        raise TickValidationError(f"{path}: duplicate column names in {names}")


def _names(names: Iterable[str]) -> str:
    """Column names for a message, quoted with repr so an invisible character (a byte-order
    mark, a zero-width space, trailing blanks) shows."""
    return ", ".join(repr(name) for name in names)


def nanoseconds(stamps: pa.Array, factor: int | pa.Array, name: str, path: Path) -> pa.Array:
    """Integer timestamps ``stamps`` (of column ``name``) times ``factor`` nanoseconds per unit
    (one for all, or one per row, above 0); TickValidationError naming the first row whose
    product overflows int64."""
    try:
        return pc.multiply_checked(stamps, factor)
    except pa.ArrowInvalid:
        high, low = pc.divide(2**63 - 1, factor), pc.divide(-(2**63), factor)
        row = first_true(pc.or_(pc.greater(stamps, high), pc.less(stamps, low)))
    raise TickValidationError(
        f"{path}: {name} {stamps[row].as_py()} overflows int64 nanoseconds", row=row, field=name
    )


def int_column(table: pa.Table, name: str, path: Path) -> pa.Array:
    """Column ``name`` of integer text as int64 (:func:`~skewtape_pipeline.ticks.encode.model.
    int64_of_text`); its TickValidationError names ``path`` too."""
    try:
        return int64_of_text(table.column(name).combine_chunks(), field=name)
    except TickValidationError as exc:
        raise TickValidationError(f"{path}: {exc.detail}", row=exc.row, field=name) from None

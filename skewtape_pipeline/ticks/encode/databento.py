"""Databento's DBN files (``.dbn``, ``.dbn.zst``) as ticks, read with the ``databento-dbn``
package (Databento's own decoder).

The records of a file are transcoded by ``databento_dbn.Transcoder`` to CSV with their integer
fields as integers (fixed-point prices, nanosecond timestamps) and each instrument's symbol from
the file's symbology, a block of the file at a time, then read as text. Mapping:
``timestamp_nanos`` = ``ts_event`` (the matching engine's time, ns); ``price`` = ``price`` /
10^9 exactly (DBN's fixed-point scale; an undefined price, ``INT64_MAX``, is refused);
``quantity`` = ``size``; ``side`` = ``side`` (``B`` a buyer aggressed -> BUY, ``A`` a seller
-> SELL, ``N`` -> UNKNOWN); ``symbol`` = the symbol the metadata maps the record's
``instrument_id`` to on its day, else the instrument id itself. The trades and TBBO schemas are
trades only; of an MBO file only the trades are kept (``action == 'T'``; its file rows are the
record numbers). Other schemas are refused, naming the schema.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import BinaryIO

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import zstandard

from skewtape_pipeline import fsio
from skewtape_pipeline.arrow_memory import owned_reader
from skewtape_pipeline.errors import TickValidationError
from skewtape_pipeline.ticks.encode.chunked import DEFAULT_BLOCK_BYTES, RawChunk, ReadState
from skewtape_pipeline.ticks.encode.exact_columns import first_true
from skewtape_pipeline.ticks.encode.sides import BAN_SIDES
from skewtape_pipeline.ticks.encode.sources import (
    TickStream,
    int_column,
    source_stream,
    units_as_decimal,
)
from skewtape_pipeline.ticks.encode.zstd_framing import (
    FramingError,
    check_zstd_framing,
    is_zstd_start,
)

DBN_PRICE_SCALE = 9
"""DBN prices are integers in units of 10^-9."""
UNDEF_PRICE = 2**63 - 1
"""DBN's undefined price (``INT64_MAX``)."""
TRADE_SCHEMAS = ("trades", "tbbo", "mbo")
"""The DBN schemas read: trades (every record a trade), TBBO (trades with the book before
them) and MBO (order events, of which the trades, ``action == 'T'``, are kept)."""
TRADE_ACTION = "T"


def is_dbn_name(path: Path) -> bool:
    """True for a ``.dbn`` or ``.dbn.zst`` file name."""
    name = path.name.lower()
    return name.endswith(".dbn") or name.endswith(".dbn.zst")


def open_dbn(path: Path | str, *, block_bytes: int = DEFAULT_BLOCK_BYTES) -> TickStream:
    """A DBN file (zstd-compressed or not) as a :class:`TickStream` of the trades of its
    records, mapped as the module notes say, read ``block_bytes`` of the file at a time.

    Raises TickValidationError naming the file: not DBN, a schema other than
    :data:`TRADE_SCHEMAS`; reading: a record that does not decode, an undefined price or
    timestamp (naming its record), a file cut short (inside a record or a zstd frame).
    """
    import databento_dbn as dbn

    path = fsio.checked_path(path, "path", "a tick file")
    schema = _dbn_schema(path, dbn)
    if schema not in TRADE_SCHEMAS:
        raise TickValidationError(
            f"{path}: DBN schema {schema or 'mixed'!r} holds no trades to read; expected one of "
            f"{', '.join(TRADE_SCHEMAS)}"
        )

    def chunks(state: ReadState) -> Iterator[RawChunk]:
        return _transcoded_chunks(path, state, block_bytes, dbn)

    def transform(raw: pa.Table) -> tuple[pa.Table, pa.Array | None]:
        if schema != "mbo":
            return _trades(raw, path), None
        kept = pc.cast(pc.indices_nonzero(pc.equal(raw["action"], TRADE_ACTION)), pa.int64())
        try:
            return _trades(raw.take(kept), path), kept
        except TickValidationError as exc:
            row = None if exc.row is None else kept[exc.row].as_py()
            raise TickValidationError(exc.detail, row=row, field=exc.field) from None

    return source_stream(path, chunks, transform, BAN_SIDES)


def _trades(raw: pa.Table, path: Path) -> pa.Table:
    """Transcoded trade records as canonical columns (errors name the row of ``raw``)."""
    price = int_column(raw, "price", path)
    row = first_true(pc.equal(price, UNDEF_PRICE))
    if row is not None:
        raise TickValidationError(f"{path}: the trade's price is undefined", row=row, field="price")
    symbol = raw["symbol"]
    mapped = pc.if_else(pc.equal(symbol, ""), raw["instrument_id"], symbol)
    return pa.table(
        {
            "timestamp_nanos": int_column(raw, "ts_event", path),
            "price": units_as_decimal(price, DBN_PRICE_SCALE),
            "quantity": raw["size"],
            "side": raw["side"],
            "symbol": mapped,
        }
    )


def _dbn_schema(path: Path, dbn) -> str | None:
    """The schema the file's metadata names (None: mixed), TickValidationError when it is not
    DBN."""
    decoder = dbn.DBNDecoder()
    with ExitStack() as stack:
        stream = _open(path, stack)
        try:
            while not (records := decoder.decode()):
                block = stream.read(2**16)
                if not block:
                    break
                decoder.write(block)
        except (dbn.DBNError, zstandard.ZstdError, ValueError) as exc:
            raise TickValidationError(f"{path}: cannot read as DBN: {exc}") from None
    if not records:
        raise TickValidationError(f"{path}: cannot read as DBN: no metadata header")
    return records[0].schema


def _open(path: Path, stack: ExitStack) -> BinaryIO:
    """The file's bytes, decompressed (every frame) when it starts as zstd does (a frame, or a
    skippable frame, as pzstd writes first); TickValidationError naming the file when its
    frames are not whole (cut short)."""
    try:
        handle = stack.enter_context(open(path, "rb"))  # noqa: SIM115 (closed by the stack)
        compressed = is_zstd_start(handle.read(4))
        handle.seek(0)
        if compressed:
            check_zstd_framing(handle)
    except OSError as exc:
        raise TickValidationError(f"{path}: cannot read: {exc}") from None
    except FramingError as exc:
        raise TickValidationError(f"{path}: cannot read as zstd: {exc}") from None
    if not compressed:
        return handle
    decompressor = zstandard.ZstdDecompressor()
    return stack.enter_context(decompressor.stream_reader(handle, read_across_frames=True))


def _transcoded_chunks(path: Path, state: ReadState, block_bytes: int, dbn) -> Iterator[RawChunk]:
    """The file's records as text columns, one chunk per ``block_bytes`` read; ``state``
    follows the read (records as rows; bytes as decompressed, at most the file's size)."""
    out = io.BytesIO()
    transcoder = dbn.Transcoder(
        file=out, encoding=dbn.Encoding.CSV, compression=dbn.Compression.NONE,
        pretty_px=False, pretty_ts=False, map_symbols=True,
    )  # fmt: skip
    names: list[str] | None = None
    state.lines_measured = False
    with ExitStack() as stack:
        stream = _open(path, stack)
        while True:
            try:
                block = stream.read(block_bytes)
                if block:
                    transcoder.write(block)
                else:
                    transcoder.flush()
            except (dbn.DBNError, zstandard.ZstdError, OSError) as exc:
                raise TickValidationError(
                    f"{path}: cannot decode DBN after record {state.rows}: {exc}", row=state.rows
                ) from None
            text, names = _take_output(out, names)
            if text:
                table = _csv_table(text, names)
                yield RawChunk(table, state.rows, None)
                state.rows += table.num_rows
            if not block and (left := len(transcoder.buffer())):
                raise TickValidationError(
                    f"{path}: the file ends {left} bytes into a DBN record, after its "
                    f"{state.rows:,} whole records: it is cut short",
                    row=state.rows,
                )
            state.bytes_read = min(state.bytes_read + len(block), state.file_bytes)
            if not block:
                break
    state.bytes_read = state.file_bytes


def _take_output(out: io.BytesIO, names: list[str] | None) -> tuple[bytes, list[str] | None]:
    """The CSV rows the transcoder wrote since the last call (the header line taken off into
    the column names the first time); ``out`` emptied."""
    text = out.getvalue()
    out.seek(0)
    out.truncate()
    if names is None and text:
        header, _, text = text.partition(b"\n")
        names = header.decode("utf-8").split(",")
    return text, names


def _csv_table(text: bytes, names: list[str] | None) -> pa.Table:
    """Transcoded CSV rows as text columns ``names``."""
    return pa_csv.read_csv(
        owned_reader(text),
        read_options=pa_csv.ReadOptions(column_names=names),
        convert_options=pa_csv.ConvertOptions(
            column_types=dict.fromkeys(names or [], pa.string()), strings_can_be_null=False
        ),
    )

"""Binance's public market data files (data.binance.vision) of trades and aggregate trades as
ticks.

Layouts, as Binance publishes them (spot files have no header; futures files may start with
one, with these names):

- trades: ``id, price, qty, quote_qty, time, is_buyer_maker[, is_best_match]``;
- aggTrades: ``agg_trade_id, price, quantity, first_trade_id, last_trade_id, transact_time,
  is_buyer_maker[, is_best_match]``.

Mapping: ``timestamp_nanos`` = ``time`` (``transact_time``) in milliseconds (below 10^14,
x 10^6) or microseconds (Binance spot since 2025, x 10^3), each value by its size; ``price`` =
``price`` and ``quantity`` = ``qty`` (``quantity``) as exact decimal text; ``side`` =
``is_buyer_maker`` (true: the buyer's order rested, the aggressor sold -> SELL; false -> BUY);
``symbol`` from the file name (``<SYMBOL>-trades-<date>.csv``, ``<SYMBOL>-aggTrades-...``) or
``--symbol``. A file is told apart from the others by its first line (:func:`binance_format_of`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import SourceLabelError, TickValidationError
from skewtape_pipeline.ticks.encode.chunked import DEFAULT_BLOCK_BYTES, csv_header
from skewtape_pipeline.ticks.encode.sides import BINANCE_BUYER_MAKER
from skewtape_pipeline.ticks.encode.sources import (
    TickStream,
    csv_stream,
    int_column,
    nanoseconds,
)

TRADES = "binance-trades"
AGG_TRADES = "binance-aggtrades"
LAYOUTS = {
    TRADES: ("id", "price", "qty", "quote_qty", "time", "is_buyer_maker", "is_best_match"),
    AGG_TRADES: ("agg_trade_id", "price", "quantity", "first_trade_id", "last_trade_id",
                 "transact_time", "is_buyer_maker", "is_best_match"),
}  # fmt: skip
"""Each format's columns; the last (``is_best_match``) is absent from futures files."""
TIME_COLUMN = {TRADES: "time", AGG_TRADES: "transact_time"}
QUANTITY_COLUMN = {TRADES: "qty", AGG_TRADES: "quantity"}
MICROSECONDS_FROM = 10**14
"""A timestamp at or above this is in microseconds (10^14 ms is the year 5138, 10^14 µs 1973)."""
NAME_RE = re.compile(r"^(?P<symbol>[A-Za-z0-9]+)-(trades|aggTrades)-\d{4}-\d\d(-\d\d)?\.csv$")
_BOOL = frozenset(BINANCE_BUYER_MAKER)
_DECIMAL_COLUMNS = frozenset({"price", "qty", "quote_qty", "quantity"})


def binance_format_of(fields: Sequence[str]) -> str | None:
    """The Binance format of a CSV whose first line is ``fields``: a header of either layout,
    or a data row with true/false from ``is_buyer_maker`` on and whole numbers in the id and
    time columns before it (trades are tried first); None when it is neither."""
    for name, layout in LAYOUTS.items():
        if list(fields) in (list(layout), list(layout[:-1])):
            return name
    for name, layout in LAYOUTS.items():
        maker = layout.index("is_buyer_maker")
        whole = [f for f, column in zip(fields[:maker], layout, strict=False)
                 if column not in _DECIMAL_COLUMNS]  # fmt: skip
        if (
            len(fields) in (maker + 1, maker + 2)
            and all(f in _BOOL for f in fields[maker:])
            and all(f.isdigit() for f in whole)
        ):
            return name
    return None


def open_binance(
    path: Path | str,
    input_format: str,
    *,
    symbol: str | None = None,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> TickStream:
    """A Binance trades or aggTrades CSV (``input_format``) as a :class:`TickStream`, mapped
    as the module notes say.

    Raises SourceLabelError when neither the file name nor ``symbol`` gives the symbol, and
    TickValidationError naming the file when its first line is not of ``input_format``
    (reading: the row and column of a bad value).
    """
    path = fsio.checked_path(path, "path", "a tick file")
    first = csv_header(path)
    if binance_format_of(first) != input_format:
        raise TickValidationError(
            f"{path}: the first line {','.join(first)!r} is not of a Binance "
            f"{input_format.removeprefix('binance-')} file ({', '.join(LAYOUTS[input_format])})"
        )
    layout = LAYOUTS[input_format]
    header = 1 if first[0] == layout[0] else 0
    names = list(layout[: len(first)])
    symbol = _symbol(path, symbol)
    time, quantity = TIME_COLUMN[input_format], QUANTITY_COLUMN[input_format]

    def transform(raw: pa.Table) -> tuple[pa.Table, None]:
        stamps = int_column(raw, time, path)
        per_unit = pc.if_else(pc.less(stamps, MICROSECONDS_FROM), 10**6, 10**3)
        columns = {
            "timestamp_nanos": nanoseconds(stamps, per_unit, time, path),
            "price": raw["price"],
            "quantity": raw[quantity],
            "side": raw["is_buyer_maker"],
            "symbol": pa.repeat(pa.scalar(symbol, pa.string()), raw.num_rows),
        }
        return pa.table(columns), None

    fields = {"timestamp_nanos": time, "quantity": quantity, "side": "is_buyer_maker"}
    return csv_stream(path, names, transform, BINANCE_BUYER_MAKER, header_lines=header,
                      block_bytes=block_bytes, fields=fields)  # fmt: skip


def _symbol(path: Path, given: str | None) -> str:
    """``given``, else the symbol of Binance's file name; SourceLabelError when neither."""
    named = NAME_RE.match(path.name)
    if given is not None:
        return given
    if named is None:
        raise SourceLabelError(
            f"{path}: no symbol: the name does not follow Binance's "
            "<SYMBOL>-trades-<date>.csv or <SYMBOL>-aggTrades-<date>.csv; pass --symbol"
        )
    return named["symbol"]

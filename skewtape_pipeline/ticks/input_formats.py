"""The input formats of ``compact-ticks``: which reader opens a file, and how a file's format is
detected when none is named.

Each format is read by its own reader, mapped exactly as that reader documents: the canonical
form, the raw files of a field (Kalshi, Tardis, LOBSTER: ``ticks.encode.sources``; Databento
DBN: ``ticks.encode.databento``; Binance trades and aggTrades: ``ticks.encode.binance``) and a
Skewtape mirror's fills (``ticks.fills.snapshot_fills.open_fills``, the tick archive asset's
own mapping). :func:`detect_input_format` names a file's format where its name or schema tells
it unambiguously; every other file is ``canonical``, whose reader names the raw format a
header belongs to (Kalshi, Tardis, LOBSTER: those need ``--input-format``).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import ConfigError

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.encode.model import SchemaRequest
    from skewtape_pipeline.ticks.encode.sources import TickStream

# The readers (pyarrow, DuckDB) are imported where a file is opened: the command line imports
# this module for its list of formats and starts without them.

CANONICAL = "canonical"
SKEWTAPE_FILLS = "skewtape-fills"
LOBSTER = "lobster-messages"
DATABENTO_DBN = "databento-dbn"
BINANCE_TRADES = "binance-trades"
BINANCE_AGG_TRADES = "binance-aggtrades"
INPUT_FORMATS = (
    CANONICAL, "kalshi-trades", "tardis-trades", LOBSTER, DATABENTO_DBN, BINANCE_TRADES,
    BINANCE_AGG_TRADES, SKEWTAPE_FILLS,
)  # fmt: skip
"""``--input-format`` values: the canonical form, a raw file mapped as its source documents,
or a Skewtape mirror's fills month file."""


@dataclass(frozen=True)
class InputOptions:
    """How an input is opened: the side vocabulary given (None: the format's), the symbol of a
    file without one, LOBSTER's session date, the read chunk's bytes and the memory limit."""

    side_map: dict[str, str] | None = None
    symbol: str | None = None
    session_date: date | None = None
    block_bytes: int = 16 * 2**20
    memory_limit: int = 2 * 2**30


def detect_input_format(path: Path | str) -> str:
    """The format of ``path`` when its name or schema tells it unambiguously: ``databento-dbn``
    for a ``.dbn`` or ``.dbn.zst`` name, ``skewtape-fills`` for a Parquet file holding every
    column of a fills month file, ``binance-trades`` or ``binance-aggtrades`` for a CSV whose
    first line is of one of Binance's layouts; else ``canonical``."""
    from skewtape_pipeline.ticks.encode.binance import binance_format_of
    from skewtape_pipeline.ticks.encode.chunked import csv_header, open_parquet
    from skewtape_pipeline.ticks.encode.databento import is_dbn_name
    from skewtape_pipeline.ticks.fills.snapshot_fills import is_fills_file

    path = fsio.checked_path(path, "path", "a tick file")
    suffix = path.suffix.lower()
    if is_dbn_name(path):
        return DATABENTO_DBN
    parquet = suffix in (".parquet", ".pq") and path.is_file()
    if parquet and is_fills_file(open_parquet(path).schema_arrow.names):
        return SKEWTAPE_FILLS
    if suffix == ".csv" and path.is_file():
        return binance_format_of(csv_header(path)) or CANONICAL
    return CANONICAL


def open_input(
    path: Path | str, input_format: str | None = None, options: InputOptions | None = None
) -> TickStream:
    """``path`` opened by the reader of ``input_format`` (None: :func:`detect_input_format`),
    with ``options`` (None: the defaults, ``InputOptions()``).

    Raises ConfigError for an unknown format, options that are no InputOptions, LOBSTER's
    session date given to another format or a canonical file without a symbol column given no
    symbol; the reader's TickValidationError or SourceLabelError for a file it refuses.
    """
    from skewtape_pipeline.ticks.encode import sources
    from skewtape_pipeline.ticks.encode.binance import open_binance
    from skewtape_pipeline.ticks.encode.databento import open_dbn
    from skewtape_pipeline.ticks.fills.snapshot_fills import open_fills

    path = fsio.checked_path(path, "path", "a tick file")
    options = InputOptions() if options is None else options
    if not isinstance(options, InputOptions):
        raise ConfigError(f"options = {options!r}: expected InputOptions (or None)")
    input_format = input_format or detect_input_format(path)
    if input_format not in INPUT_FORMATS:
        raise ConfigError(
            f"--input-format {input_format!r}: expected one of {', '.join(INPUT_FORMATS)}"
        )
    if options.session_date is not None and input_format != LOBSTER:
        raise ConfigError(f"--session-date applies to --input-format {LOBSTER} only")
    block = options.block_bytes
    readers = {
        CANONICAL: lambda: sources.open_canonical(
            path, side_map=options.side_map, block_bytes=block
        ),
        "kalshi-trades": lambda: sources.open_kalshi_trades(path, block_bytes=block),
        "tardis-trades": lambda: sources.open_tardis_trades(path, block_bytes=block),
        LOBSTER: lambda: sources.open_lobster_messages(
            path, symbol=options.symbol, session_date=options.session_date, block_bytes=block
        ),
        DATABENTO_DBN: lambda: open_dbn(path, block_bytes=block),
        BINANCE_TRADES: lambda: open_binance(
            path, BINANCE_TRADES, symbol=options.symbol, block_bytes=block
        ),
        BINANCE_AGG_TRADES: lambda: open_binance(
            path, BINANCE_AGG_TRADES, symbol=options.symbol, block_bytes=block
        ),
        SKEWTAPE_FILLS: lambda: open_fills(path, memory_limit=options.memory_limit),
    }
    stream = readers[input_format]()
    if input_format == CANONICAL and options.symbol is None:
        _refuse_without_symbol(path)
    return stream


def _refuse_without_symbol(path: Path) -> None:
    """ConfigError naming ``--symbol`` for a canonical file without a symbol column, given
    none: its ticks would belong to no symbol (the Python API's own refusal, when compacting,
    names its ``symbol=`` argument)."""
    from skewtape_pipeline.ticks.encode.sources import SYMBOL_COLUMN, canonical_columns

    if SYMBOL_COLUMN not in canonical_columns(path):
        raise ConfigError(f"symbol: {path} has no symbol column; pass --symbol")


def input_schema_request(
    path: Path, input_format: str | None, request: SchemaRequest, *, archive_has_schema: bool
) -> SchemaRequest:
    """The schema to compact ``path`` at: ``request`` as given, except for a fills month file
    inside a snapshot compacted into an archive that records no schema yet, whose free fields
    are fixed at its mirror's schema (``snapshot_fills_schema``), as the tick archive asset
    does, so both write the same schema for the same fills."""
    from skewtape_pipeline.ticks.encode.model import SCHEMA_FIELDS
    from skewtape_pipeline.ticks.fills.snapshot_fills import (
        snapshot_fills_schema,
        snapshot_of_fills_file,
    )

    if archive_has_schema or (input_format or detect_input_format(path)) != SKEWTAPE_FILLS:
        return request
    snapshot = snapshot_of_fills_file(path)
    if snapshot is None:
        return request
    floor = snapshot_fills_schema(snapshot)
    fixed = {name: getattr(request, name) for name in SCHEMA_FIELDS}
    return replace(request, **{k: getattr(floor, k) if v is None else v for k, v in fixed.items()})

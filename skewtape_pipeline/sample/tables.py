"""Arrow types of the sample and its one deterministic Parquet writer."""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline.arrow_memory import owned_buffer
from skewtape_pipeline.fsio import atomic_write_with

PRICE_SCALE = 4
UNITS_PER_DOLLAR = 10**PRICE_SCALE
DECIMAL = pa.decimal128(10, PRICE_SCALE)
"""Prices, fees and other fractions: dollars with 4 decimals (DuckDB's DECIMAL(10,4))."""
TS_US = pa.timestamp("us", tz="UTC")
"""Reference-table times (DuckDB's TIMESTAMP WITH TIME ZONE round-trips them exactly)."""
TS_NS = pa.timestamp("ns", tz="UTC")
"""Trade times and candle buckets (values have microsecond resolution)."""

ROW_GROUP_SIZE = 131_072
COMPRESSION = "zstd"
COMPRESSION_LEVEL = 3


def decimal_array(units: Sequence[int]) -> pa.Array:
    """A ``decimal128(10, 4)`` array from integer units of 1/10_000 of a dollar.

    Built from the raw 16-byte little-endian words, so it is exact and never goes through floats.
    """
    words = array("q", bytes(16 * len(units)))
    words[0::2] = array("q", units)
    words[1::2] = array("q", [-1 if u < 0 else 0 for u in units])
    return pa.Array.from_buffers(DECIMAL, len(units), [None, owned_buffer(words)])


def write_parquet(table: pa.Table, target: Path) -> None:
    """Write ``table`` to ``target`` atomically with fixed settings (same table, same bytes).

    zstd level 3, row groups of :data:`ROW_GROUP_SIZE` rows, pyarrow's default encodings.
    """

    def write(temp: Path) -> None:
        pq.write_table(
            table,
            temp,
            row_group_size=ROW_GROUP_SIZE,
            compression=COMPRESSION,
            compression_level=COMPRESSION_LEVEL,
        )

    atomic_write_with(target, write)

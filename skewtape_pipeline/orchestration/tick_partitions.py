"""The tick archive's partitions: UTC days x symbols (a dynamic dimension), and symbol keys.

Dagster refuses ``|``, ``,``, ``[`` and ``]`` in the keys of a multi-partitioned asset (and
``...`` or control characters in any key), and its UI cannot backfill keys with commas. A symbol
becomes a key by percent-encoding exactly those characters (and ``%`` itself), so keys stay
readable (``kalshi:KXFED-26SEP15-T4.5``) and decode back to the symbol exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from urllib.parse import unquote

import dagster as dg

from skewtape_pipeline.orchestration.partitions import FIRST_MONTH

SYMBOLS = "symbols"
DATE_DIMENSION = "date"
SYMBOL_DIMENSION = "symbol"

symbol_partitions = dg.DynamicPartitionsDefinition(name=SYMBOLS)
"""Symbols that traded in an applied month; applying a month registers its symbols."""

day_partitions = dg.DailyPartitionsDefinition(start_date=f"{FIRST_MONTH}-01")
"""Complete UTC days from the first month on."""

symbol_day_partitions = dg.MultiPartitionsDefinition(
    {DATE_DIMENSION: day_partitions, SYMBOL_DIMENSION: symbol_partitions}
)

_ESCAPED = frozenset("%|,[]")


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))


def symbol_key(symbol: str) -> str:
    """The partition key of ``symbol``: ``% | , [ ]``, control characters and runs of dots
    percent-encoded, everything else kept. Reversed by :func:`symbol_from_key`."""
    out = []
    for index, char in enumerate(symbol):
        in_dot_run = char == "." and (
            symbol[index - 1 : index] == "." or symbol[index + 1 : index + 2] == "."
        )
        if char in _ESCAPED or ord(char) < 0x20 or ord(char) == 0x7F or in_dot_run:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def symbol_from_key(key: str) -> str:
    """The symbol a key made by :func:`symbol_key` stands for."""
    return unquote(key, encoding="utf-8", errors="strict")


def symbol_day_key(symbol: str, day: date) -> dg.MultiPartitionKey:
    """The tick archive partition key of one symbol-day."""
    return dg.MultiPartitionKey(
        {DATE_DIMENSION: day.isoformat(), SYMBOL_DIMENSION: symbol_key(symbol)}
    )


def symbol_day_of(key: str | dg.MultiPartitionKey) -> tuple[str, date]:
    """(symbol, day) of a tick archive partition key."""
    if not isinstance(key, dg.MultiPartitionKey):
        key = symbol_day_partitions.get_partition_key_from_str(key)
    dims = key.keys_by_dimension
    return symbol_from_key(dims[SYMBOL_DIMENSION]), date.fromisoformat(dims[DATE_DIMENSION])


def register_symbols(instance: dg.DagsterInstance, symbols: Iterable[str]) -> list[str]:
    """Add the keys of ``symbols`` not registered yet to the ``symbols`` dimension; returns them."""
    known = set(instance.get_dynamic_partitions(SYMBOLS))
    new = sorted({symbol_key(symbol) for symbol in symbols} - known)
    if new:
        instance.add_dynamic_partitions(SYMBOLS, new)
    return new

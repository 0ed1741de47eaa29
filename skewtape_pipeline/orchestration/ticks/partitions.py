"""The tick archive's partitions: UTC days x venues (a dynamic dimension), and venue keys.

A partition is a *venue-day*: one venue's trades of one UTC day, every symbol-day of it. Keys
grow with days x venues, never with symbols: five years of one venue are 1,827 keys whatever
its number of symbols, so about 54 venues fit Dagster's guidance of 100,000 keys per asset over
five years (:func:`venue_day_key_count`). The symbol-day stays the unit a user reads: each
venue-day's materialization lists its archived symbol-days, and the archive's reports table
has a row per symbol-day (``skewtape_pipeline.ticks.archive.store.reports_table``).

Dagster refuses ``|``, ``,``, ``[`` and ``]`` in the keys of a multi-partitioned asset (and
``...`` or control characters in any key), and its UI cannot backfill keys with commas. A venue
becomes a key by percent-encoding exactly those characters (and ``%`` itself), so keys stay
readable (``kalshi``) and decode back to the venue exactly.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import date
from urllib.parse import unquote

import dagster as dg

from skewtape_pipeline.mirror.format import safe_venue
from skewtape_pipeline.orchestration.shared.partitions import FIRST_MONTH
from skewtape_pipeline.ticks.fills.snapshot_fills import split_symbol

VENUES = "venues"
DATE_DIMENSION = "date"
VENUE_DIMENSION = "venue"
MAX_KEYS_PER_ASSET = 100_000
"""Dagster's documented guidance for the partition keys of one asset."""

venue_partitions = dg.DynamicPartitionsDefinition(name=VENUES)
"""Venues with fills in an applied month; applying a month registers its venues (the venues
sensor removes a key added by hand that no snapshot holds fills of and nothing archived)."""

day_partitions = dg.DailyPartitionsDefinition(start_date=f"{FIRST_MONTH}-01")
"""Complete UTC days from the first month on."""


def venue_day_partitions_over(days: dg.DailyPartitionsDefinition) -> dg.MultiPartitionsDefinition:
    """Days x venues: the tick archive's partitions over ``days`` (the benchmark passes its own)."""
    return dg.MultiPartitionsDefinition({DATE_DIMENSION: days, VENUE_DIMENSION: venue_partitions})


venue_day_partitions = venue_day_partitions_over(day_partitions)


def venue_day_key_count(days: int, venues: int) -> int:
    """Partition keys of ``days`` x ``venues`` (symbols do not count)."""
    return days * venues


_ESCAPED = frozenset("%|,[]")


def _escape(char: str) -> str:
    return "".join(f"%{byte:02X}" for byte in char.encode("utf-8"))


def dimension_key(name: str) -> str:
    """The partition key of a venue (or any name): ``% | , [ ]``, control characters and runs
    of dots percent-encoded, everything else kept. Reversed by :func:`name_from_key`."""
    out = []
    for index, char in enumerate(name):
        in_dot_run = char == "." and (
            name[index - 1 : index] == "." or name[index + 1 : index + 2] == "."
        )
        if char in _ESCAPED or ord(char) < 0x20 or ord(char) == 0x7F or in_dot_run:
            out.append(_escape(char))
        else:
            out.append(char)
    return "".join(out)


def name_from_key(key: str) -> str:
    """The name a key made by :func:`dimension_key` stands for."""
    return unquote(key, encoding="utf-8", errors="strict")


def venue_day_key(venue: str, day: date) -> dg.MultiPartitionKey:
    """The tick archive partition key of one venue-day."""
    return dg.MultiPartitionKey(
        {DATE_DIMENSION: day.isoformat(), VENUE_DIMENSION: dimension_key(venue)}
    )


def venue_day_of(key: str | dg.MultiPartitionKey) -> tuple[str, date]:
    """(venue, day) of a tick archive partition key.

    The venue follows the rule of the venues a snapshot names
    (:func:`~skewtape_pipeline.mirror.format.safe_venue`): a key such as ``..`` raises
    :class:`~skewtape_pipeline.errors.UnsafePathError` naming the key."""
    if not isinstance(key, dg.MultiPartitionKey):
        key = venue_day_partitions.get_partition_key_from_str(key)
    dims = key.keys_by_dimension
    venue = safe_venue(
        name_from_key(dims[VENUE_DIMENSION]), field_name=f"venue partition key {str(key)!r}"
    )
    return venue, date.fromisoformat(dims[DATE_DIMENSION])


def venue_key_of(key: str) -> str | None:
    """The venue dimension's key of the tick archive partition key ``key``
    (``<date>|<venue>``); None for a key that is not two dimension keys (one recorded by hand,
    or under another partitioning), which Dagster would refuse to parse."""
    parts = key.split("|")
    if len(parts) != 2:
        return None
    return venue_day_partitions.get_partition_key_from_str(key).keys_by_dimension[VENUE_DIMENSION]


def venue_keys(symbols: Iterable[str]) -> list[str]:
    """The venue keys (sorted, each once) of ``symbols`` (``<venue>:<market>``)."""
    return sorted({dimension_key(split_symbol(symbol)[0]) for symbol in symbols})

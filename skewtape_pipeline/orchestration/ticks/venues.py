"""Venue registration: the venues of each applied month's fills become keys of the tick
archive's ``venues`` dimension, so their venue-days are partitions of ``tick_archive``.

The tick side registers them, reading the months in ``history/`` (however they were applied:
from the UI, the schedule, a sensor or a backfill): the venues sensor on every tick, and the
corrections sensor before it requests venue-days.

A key can also be added by hand, where no code of ours runs: the launch dialog's "Add
partition" (Dagster's ``addDynamicPartition`` mutation, straight into the instance), or
``instance.add_dynamic_partitions``. A mistyped venue would then stay a partition for good (its
runs are refused: the mirror holds no fills of it). The venues sensor removes, on its next tick,
every key whose venue no applied snapshot holds fills of and no venue-day of which was ever
archived (:func:`stray_venues`), saying so in its tick log (a warning), naming the venue and the
mirror's venues; none while the mirror holds no snapshot at all (missing, not mounted), nor
while a snapshot's ``fills/`` folder cannot be read (the mirror's venues would be seen in part:
each such folder is a warning of the tick, with the reason). A month folder of ``history/`` that
cannot be read skips the tick instead, naming it in a warning (``unreadable_skipped``): which
months are applied cannot be told, so nothing is registered or removed and the cursor stays; so
does a manifest or fills file of a newly applied month that cannot be read (a permission
refused, a folder or a dangling link in its place, a file DuckDB cannot open), named with the
reason: the venues that month brings cannot be told. A materialized partition key that is not
``<date>|<venue>`` protects no venue: the tick names it in one warning and goes on.

A sensor hands Dagster's daemon the keys to add and, per month that brought any, an
observation of ``tick_archive`` (``venues_registered``, ``venues``, ``month``) that the asset's
*Events* list; :func:`register_applied_venues` does the same in process, where no daemon runs
(the demo, the tests).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable, Mapping
from pathlib import Path
from typing import Any, NamedTuple

import dagster as dg

from skewtape_pipeline.mirror.months import applied_months
from skewtape_pipeline.orchestration.ticks.archive_asset import TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.partitions import (
    VENUES,
    dimension_key,
    venue_key_of,
    venue_keys,
    venue_partitions,
)
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols, read_mirror_venues


def new_venues(
    history: Path, months: Iterable[str], known: Collection[str]
) -> dict[str, list[str]]:
    """``{month: venue keys}``: the venues of the fills files each of ``months`` (oldest first)
    added or replaced that ``known`` does not hold, each under the first month bringing it;
    months that bring none are left out. UnreadableFileError or UnreadableFolderError as
    ``new_symbols`` raises them (the sensors skip their tick on either)."""
    seen = set(known)
    found: dict[str, list[str]] = {}
    for month in months:
        fresh = [key for key in venue_keys(new_symbols(history, month)) if key not in seen]
        if fresh:
            found[month] = fresh
            seen.update(fresh)
    return found


def venues_observation(month: str, keys: list[str]) -> dg.AssetObservation:
    """The observation of ``tick_archive`` saying which venue keys ``month`` registered."""
    return dg.AssetObservation(
        TICK_ARCHIVE,
        description=f"{month} registered {len(keys)} venue(s) as partitions: {', '.join(keys)}",
        metadata={
            "month": dg.MetadataValue.text(month),
            "venues_registered": dg.MetadataValue.int(len(keys)),
            "venues": dg.MetadataValue.json(keys),
        },
    )


def registration(by_month: Mapping[str, list[str]]) -> dict[str, Any]:
    """The ``SensorResult`` arguments registering ``by_month`` (from :func:`new_venues`): the
    keys to add (none: no request) and one observation per month."""
    keys = [key for month_keys in by_month.values() for key in month_keys]
    return {
        "dynamic_partitions_requests": [venue_partitions.build_add_request(keys)] if keys else [],
        "asset_events": [venues_observation(month, ks) for month, ks in by_month.items()],
    }


def register_applied_venues(instance: dg.DagsterInstance, history: Path) -> dict[str, list[str]]:
    """Register the venues of every month applied in ``history`` that ``instance`` does not
    know yet, in process (what the daemon does with the venues sensor's result): the keys
    added, each month's observation recorded. Returns ``{month: keys added}``."""
    by_month = new_venues(history, applied_months(history), instance.get_dynamic_partitions(VENUES))
    parts = registration(by_month)
    for request in parts["dynamic_partitions_requests"]:
        instance.add_dynamic_partitions(VENUES, list(request.partition_keys))
    for event in parts["asset_events"]:
        instance.report_runless_asset_event(event)
    return by_month


class Strays(NamedTuple):
    """What :func:`stray_venues` found."""

    keys: list[str]
    """The stray venue keys, sorted (to remove)."""
    held: list[str]
    """The mirror's venues (those with a fills folder in an applied snapshot)."""
    unreadable: list[tuple[Path, str]]
    """``(fills folder, reason)`` of each snapshot's ``fills/`` that could not be read."""
    unparsed: list[str]
    """The materialized ``tick_archive`` keys looked at that are not ``<date>|<venue>``."""


def stray_venues(
    history: Path, registered: Iterable[str], archived: Callable[[], Collection[str]]
) -> Strays:
    """The keys of ``registered`` whose venue no applied snapshot of ``history`` holds fills of
    (``read_mirror_venues``) and of which no venue-day is ``archived`` (materialized
    ``tick_archive`` keys, asked for only when some venue is not the mirror's; a key that is not
    ``<date>|<venue>`` names no venue and is returned in ``unparsed``): a venue typed by hand,
    which nothing could archive. None while the mirror holds no applied snapshot (``history``
    missing, unmounted, another data root), nor while a snapshot's ``fills/`` cannot be read
    (``unreadable``): every key, or some, would look stray, and the venues sensor's cursor is
    past the months that registered them. UnreadableFolderError or UnreadableFileError as
    ``applied_months`` raises them."""
    held, unreadable = read_mirror_venues(history)
    if not held or unreadable:
        return Strays([], held, unreadable, [])
    unknown = set(registered) - {dimension_key(venue) for venue in held}
    unparsed: list[str] = []
    if unknown:
        for key in archived():
            venue = venue_key_of(key)
            if venue is None:
                unparsed.append(key)
            unknown.discard(venue)
    return Strays(sorted(unknown), held, unreadable, sorted(unparsed))


def removal(
    stray: list[str], held: list[str]
) -> tuple[list[dg.DeleteDynamicPartitionsRequest], str]:
    """The request removing the ``stray`` venue keys (none: no request), and what it says."""
    if not stray:
        return [], ""
    said = (
        f"removed venue partition(s) {', '.join(stray)}: no snapshot of the mirror holds fills "
        "of it and no venue-day of it was archived (added by hand, e.g. the launch dialog's "
        f"'Add partition'; the mirror's venues: {', '.join(held) or 'none'})"
    )
    return [venue_partitions.build_delete_request(stray)], said

"""The tick archive's sensors, reading the months applied in ``history/``: the venues sensor
registers each new month's venues as partitions (see
:mod:`~skewtape_pipeline.orchestration.ticks.venues`); the corrections sensor, when a new
snapshot replaces an earlier month's fills file, registers its venues likewise, then requests
exactly the symbol-days whose ticks changed, so the archive never keeps corrected ticks."""

from collections import defaultdict
from collections.abc import Collection
from datetime import date
from pathlib import Path

import dagster as dg

from skewtape_pipeline.errors import quoted
from skewtape_pipeline.mirror.months import applied_months
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.shared.sensor_skips import skipped, unreadable_skipped
from skewtape_pipeline.orchestration.ticks.archive_asset import (
    CORRECTED_BY_TAG,
    TICK_ARCHIVE,
    archive_ticks_job,
)
from skewtape_pipeline.orchestration.ticks.partitions import (
    VENUES,
    day_partitions,
    dimension_key,
    venue_day_key,
)
from skewtape_pipeline.orchestration.ticks.venues import (
    new_venues,
    registration,
    removal,
    stray_venues,
)
from skewtape_pipeline.ticks.fills.snapshot_fills import (
    corrected_symbol_days,
    split_symbol,
)

SYMBOL_DAYS_TAG = "skewtape/symbol_days"


@dg.sensor(
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Registers the venues of each newly applied month's fills (the files it added "
    "or replaced) as partitions of `tick_archive` (its `venues` dimension), however the month "
    "was applied, and records on `tick_archive` an observation per month (`venues_registered`, "
    "`venues`); removes a venue partition added by hand (the launch dialog's 'Add partition') "
    "that no snapshot holds fills of and nothing archived, naming it and the mirror's venues in "
    "its tick log (a warning); none while a snapshot's `fills/` cannot be read, which the tick "
    "warns of. While a month folder of `history/`, or a new month's manifest or fills file, "
    "cannot be read, the tick skips, naming it (a warning), and keeps its cursor. Requests no "
    "run; runs from the start.",
)
@unreadable_skipped
def tick_venues_sensor(context: dg.SensorEvaluationContext, skewtape: SkewtapeHome):
    """Register the venues of the months applied after the cursor (the last month looked at)
    that the instance does not know yet; remove the stray venue keys (``stray_venues``). Each
    ``fills/`` folder that cannot be read, the materialized keys that are not venue-days (once
    per tick) and a removal are warnings of the tick's log, paths named from the data root."""
    cursor = context.cursor or ""
    history = skewtape.history_dir
    known = context.instance.get_dynamic_partitions(VENUES)
    strays = stray_venues(
        history, known, lambda: context.instance.get_materialized_partitions(TICK_ARCHIVE)
    )
    for folder, why in strays.unreadable:
        context.log.warning(
            skewtape.shown(
                f"{folder}: cannot be read ({why}); no venue partition is removed while a "
                "snapshot's fills cannot be read (the mirror's venues would be seen in part)"
            )
        )
    if strays.unparsed:
        context.log.warning(
            f"{len(strays.unparsed)} materialized tick_archive partition key(s) not of the form "
            f"<date>|<venue>, ignored: {', '.join(quoted(k) for k in strays.unparsed[:5])}"
            + (" ..." if len(strays.unparsed) > 5 else "")
        )
    removing, said = removal(strays.keys, strays.held)
    if said:
        context.log.warning(said)
    months = [m for m in applied_months(history) if m > cursor]
    by_month = new_venues(history, months, set(known) - set(strays.keys))
    if not by_month:
        why = f"{', '.join(months)}: no venue new to `tick_archive`" if months else ""
        reason = "; ".join(filter(None, [said, why or "no newly applied month"]))
        return skipped(
            context,
            skewtape,
            reason,
            months[-1] if months else cursor,
            dynamic_partitions_requests=removing,
        )
    for month, keys in by_month.items():
        context.log.info(f"{month}: registering venue(s) {', '.join(keys)}")
    registering = registration(by_month)
    requests = registering.pop("dynamic_partitions_requests") + removing
    return dg.SensorResult(cursor=months[-1], dynamic_partitions_requests=requests, **registering)


def correction_run_config(symbols: list[str]) -> dict:
    """The run config of a tick archive run over only ``symbols`` of its venue-day."""
    return {"ops": {TICK_ARCHIVE.path[-1]: {"config": {"symbols": sorted(symbols)}}}}


@dg.sensor(
    job=archive_ticks_job,
    minimum_interval_seconds=60,
    description="Registers the venues of each newly applied month not registered yet, then "
    "requests a tick archive run per archived venue-day the month corrected "
    "(a replaced fills file of an earlier month; a venue that left corrects nothing), over "
    "exactly the symbol-days whose ticks changed (named in the run config); a venue-day not "
    "archived yet is left to its first run. While a month folder of `history/`, or a new "
    "month's manifest or fills file, cannot be read, the tick skips, naming it (a warning), "
    "and keeps its cursor.",
)
@unreadable_skipped
def tick_corrections_sensor(context: dg.SensorEvaluationContext, skewtape: SkewtapeHome):
    """Compare each newly applied month's fills files with the previous snapshot's.

    The cursor is the last month looked at. The months' venues not registered yet are
    registered first (as the venues sensor does), so no venue-day is missed while that sensor
    has not ticked. The touched symbol-days of one venue-day are one run request (run key
    ``<month>:<partition key>``, the symbols in the run config, the count in a tag); a
    venue-day whose day is not a partition yet is only named in the skip reason. A month folder
    of ``history/``, or a manifest or fills file of a month looked at, that cannot be read skips
    the tick, naming it (``unreadable_skipped``), and the cursor stays: a month passed over
    would never have its corrections requested.
    """
    cursor = context.cursor or ""
    months = [m for m in applied_months(skewtape.history_dir) if m > cursor]
    known = set(context.instance.get_dynamic_partitions(VENUES))
    by_month = new_venues(skewtape.history_dir, months, known)
    known.update(key for keys in by_month.values() for key in keys)
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    archived = context.instance.get_materialized_partitions(TICK_ARCHIVE) if months else set()
    for month in months:
        month_requests, month_notes = _correction_requests(
            skewtape.history_dir, month, known, archived
        )
        requests += month_requests
        notes += month_notes
    cursor = months[-1] if months else cursor
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor, **registration(by_month))
    reason = "; ".join(notes[:20]) or "no newly applied month corrects archived ticks"
    return skipped(context, skewtape, reason, cursor, **registration(by_month))


def _correction_requests(
    history: Path, month: str, venues: Collection[str], archived: Collection[str]
) -> tuple[list[dg.RunRequest], list[str]]:
    """The run requests of the venue-days ``month`` corrected that are ``archived``
    (materialized partitions), and a note for each other one: not a partition (its venue key
    not in ``venues``, or its day not a day partition), or not archived yet (a run over its
    corrected symbols alone would record the venue-day as archived with the rest missing; its
    first run archives every symbol from the corrected fills)."""
    by_venue_day: dict[tuple[str, date], list[str]] = defaultdict(list)
    for symbol, day in corrected_symbol_days(history, month):
        by_venue_day[(split_symbol(symbol)[0], day)].append(symbol)
    requests, notes = [], []
    for (venue, day), symbols in sorted(by_venue_day.items()):
        if dimension_key(venue) not in venues or not day_partitions.has_partition_key(
            day.isoformat()
        ):
            notes.append(f"{venue} {day} (corrected by {month}) is not a partition")
            continue
        key = venue_day_key(venue, day)
        if str(key) not in archived:
            notes.append(f"{venue} {day} (corrected by {month}) is not archived yet")
            continue
        requests.append(
            dg.RunRequest(
                partition_key=key,
                run_key=f"{month}:{key}",
                run_config=correction_run_config(symbols),
                tags={CORRECTED_BY_TAG: month, SYMBOL_DAYS_TAG: str(len(symbols))},
            )
        )
    return requests, notes

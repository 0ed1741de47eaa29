"""The corrections sensor: when a new snapshot replaces an earlier month's fills file, request
exactly the symbol-days whose ticks changed, so the archive never keeps corrected ticks."""

from collections import defaultdict
from datetime import date

import dagster as dg

from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.shared.sensor_skips import skipped
from skewtape_pipeline.orchestration.ticks.archive_asset import TICK_ARCHIVE, archive_ticks_job
from skewtape_pipeline.orchestration.ticks.partitions import (
    VENUES,
    day_partitions,
    dimension_key,
    venue_day_key,
)
from skewtape_pipeline.ticks.fills.snapshot_fills import (
    applied_months,
    corrected_symbol_days,
    split_symbol,
)

CORRECTED_BY_TAG = "skewtape/corrected_by"
SYMBOL_DAYS_TAG = "skewtape/symbol_days"


def correction_run_config(symbols: list[str]) -> dict:
    """The run config of a tick archive run over only ``symbols`` of its venue-day."""
    return {"ops": {TICK_ARCHIVE.path[-1]: {"config": {"symbols": sorted(symbols)}}}}


@dg.sensor(
    job=archive_ticks_job,
    minimum_interval_seconds=60,
    description="Requests a tick archive run per venue-day a newly applied month corrected "
    "(a replaced fills file of an earlier month; a venue that left corrects nothing), over "
    "exactly the symbol-days whose ticks changed (named in the run config).",
)
def tick_corrections_sensor(context: dg.SensorEvaluationContext, skewtape: SkewtapeHome):
    """Compare each newly applied month's fills files with the previous snapshot's.

    The cursor is the last month looked at. The touched symbol-days of one venue-day are one
    run request (run key ``<month>:<partition key>``, the symbols in the run config, the count
    in a tag); a venue-day whose venue is not registered or whose day is not a partition yet
    is only named in the skip reason.
    """
    cursor = context.cursor or ""
    known = set(context.instance.get_dynamic_partitions(VENUES))
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    for month in [m for m in applied_months(skewtape.history_dir) if m > cursor]:
        by_venue_day: dict[tuple[str, date], list[str]] = defaultdict(list)
        for symbol, day in corrected_symbol_days(skewtape.history_dir, month):
            by_venue_day[(split_symbol(symbol)[0], day)].append(symbol)
        for (venue, day), symbols in sorted(by_venue_day.items()):
            if dimension_key(venue) not in known or not day_partitions.has_partition_key(
                day.isoformat()
            ):
                notes.append(f"{venue} {day} (corrected by {month}) is not a partition")
                continue
            key = venue_day_key(venue, day)
            requests.append(
                dg.RunRequest(
                    partition_key=key,
                    run_key=f"{month}:{key}",
                    run_config=correction_run_config(symbols),
                    tags={CORRECTED_BY_TAG: month, SYMBOL_DAYS_TAG: str(len(symbols))},
                )
            )
        cursor = month
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor)
    reason = "; ".join(notes[:20]) or "no newly applied month corrects archived ticks"
    return skipped(context, reason, cursor)

"""The corrections sensor: when a new snapshot replaces an earlier month's fills file, request
exactly the symbol-days whose ticks changed, so the archive never keeps corrected ticks."""

import dagster as dg

from skewtape_pipeline.orchestration.resources import SkewtapeHome
from skewtape_pipeline.orchestration.tick_asset import archive_ticks_job
from skewtape_pipeline.orchestration.tick_partitions import (
    SYMBOLS,
    day_partitions,
    symbol_day_key,
    symbol_key,
)
from skewtape_pipeline.ticks.snapshot_fills import applied_months, corrected_symbol_days


@dg.sensor(
    job=archive_ticks_job,
    minimum_interval_seconds=60,
    description="Requests the tick archive runs of the symbol-days a newly applied month "
    "corrected (a replaced fills file of an earlier month; a venue that left corrects nothing).",
)
def tick_corrections_sensor(context: dg.SensorEvaluationContext, skewtape: SkewtapeHome):
    """Compare each newly applied month's fills files with the previous snapshot's.

    The cursor is the last month looked at. A touched symbol-day is requested once per month
    that touched it (run key ``<month>:<partition key>``); one whose symbol is not registered
    or whose day is not a partition yet is only named in the skip reason.
    """
    cursor = context.cursor or ""
    known = set(context.instance.get_dynamic_partitions(SYMBOLS))
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    for month in [m for m in applied_months(skewtape.history_dir) if m > cursor]:
        for symbol, day in corrected_symbol_days(skewtape.history_dir, month):
            if symbol_key(symbol) not in known or not day_partitions.has_partition_key(
                day.isoformat()
            ):
                notes.append(f"{symbol} {day} (corrected by {month}) is not a partition")
                continue
            key = symbol_day_key(symbol, day)
            requests.append(dg.RunRequest(partition_key=key, run_key=f"{month}:{key}"))
        cursor = month
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor)
    reason = "; ".join(notes[:20]) or "no newly applied month corrects archived ticks"
    return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=cursor)

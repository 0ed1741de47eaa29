"""The daily re-tiering schedule: request the months whose symbol-days have aged into a colder
tier (read-only planning in the tick; the runs do the moving); and the daily verification of
the archive against its catalog."""

from datetime import UTC, datetime

import dagster as dg

from skewtape_pipeline.orchestration.shared.partitions import is_month_partition
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.tier_assets import (
    retier_run_config,
    retier_ticks_job,
    verify_archive_job,
)


@dg.schedule(
    job=retier_ticks_job,
    cron_schedule="0 5 * * *",
    execution_timezone="UTC",
    description="Every day at 05:00 UTC, requests one re-tiering run per month holding "
    "symbol-days due to move (as of the scheduled day), or skips when none is due.",
)
def daily_retier_schedule(
    context: dg.ScheduleEvaluationContext, skewtape: SkewtapeHome, archive: ArchiveSettings
):
    """Plan the moves at the scheduled day and request each month that has some.

    The run key ``<as_of>:<month>`` makes a tick evaluated twice request each month once.
    Months with due symbol-days that are not month partitions are named in the log.
    """
    as_of = (context.scheduled_execution_time or datetime.now(UTC)).date()
    due = archive.open(skewtape).plan_retier(as_of=as_of).months()
    outside = [month for month in due if not is_month_partition(month)]
    if outside:
        context.log.warning(f"symbol-days of {', '.join(outside)} are due but not partitions")
    requests = [
        dg.RunRequest(
            partition_key=month,
            run_key=f"{as_of.isoformat()}:{month}",
            run_config=retier_run_config(as_of),
        )
        for month in due
        if is_month_partition(month)
    ]
    if requests:
        return requests
    reason = f"nothing to re-tier at {as_of.isoformat()}: every symbol-day is in its tier"
    if outside:
        reason = f"symbol-days of {', '.join(outside)} are due, but they are not month partitions"
    return dg.SkipReason(reason)


daily_verify_archive_schedule = dg.ScheduleDefinition(
    name="daily_verify_tick_archive",
    job=verify_archive_job,
    cron_schedule="0 6 * * *",
    execution_timezone="UTC",
    description="Every day at 06:00 UTC (after the re-tiering), verifies the tick archive: "
    "sizes and sha256 against the catalog, every page's checksum.",
)

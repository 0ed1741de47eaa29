"""The monthly schedule: on the 1st, apply the month that just ended, once its delta is here."""

from datetime import UTC, datetime

import dagster as dg

from skewtape_pipeline.mirror.arrivals import inspect_delta
from skewtape_pipeline.mirror.format import MANIFEST
from skewtape_pipeline.orchestration.mirror.jobs import apply_month_job
from skewtape_pipeline.orchestration.mirror.publisher import PublisherSource, remote_month_request
from skewtape_pipeline.orchestration.mirror.sensors import run_key
from skewtape_pipeline.orchestration.shared.partitions import (
    is_month_partition,
    month_of,
    previous_month,
)
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


@dg.schedule(
    job=apply_month_job,
    cron_schedule="0 6 1 * *",
    execution_timezone="UTC",
    description="On the 1st at 06:00 UTC, requests the run of the month that just ended when "
    "its delta has completely arrived, or when the publisher has published it (the run fetches "
    "it first); else skips (the sensors pick it up later).",
)
def monthly_apply_schedule(
    context: dg.ScheduleEvaluationContext, skewtape: SkewtapeHome, publisher: PublisherSource
):
    """Request last month's run; a SkipReason names what is missing when it cannot run yet."""
    moment = context.scheduled_execution_time or datetime.now(UTC)
    month = previous_month(month_of(moment))
    if not is_month_partition(month):
        return dg.SkipReason(f"{month} is not a month partition")
    arrival = inspect_delta(skewtape.delta_dir(month))
    held = skewtape.snapshot_dir(month)
    if not arrival.complete and (held / MANIFEST).is_file():  # the mirror's first month
        return dg.SkipReason(
            skewtape.shown(f"{month} is already held whole in {held}: no delta to apply")
        )
    if not arrival.complete:
        remote = remote_month_request(skewtape, publisher, month)
        if isinstance(remote, dg.RunRequest):
            return remote
        return dg.SkipReason(
            skewtape.shown(
                f"the delta for {month} has not arrived: {arrival.reason}; {remote.skip_message}"
            )
        )
    assert arrival.manifest_sha256 is not None
    return dg.RunRequest(partition_key=month, run_key=run_key(month, arrival.manifest_sha256))

"""The sensor that starts a month's run when its delta has completely arrived in ``deltas/``."""

import dagster as dg

from skewtape_pipeline.mirror.arrivals import delta_months, holds_snapshot, inspect_delta
from skewtape_pipeline.orchestration.mirror.jobs import apply_month_job
from skewtape_pipeline.orchestration.shared.partitions import FIRST_MONTH, is_month_partition
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.shared.sensor_skips import skipped


def run_key(month: str, manifest_sha256: str) -> str:
    """The run key of a month's run: the month and the sha256 of the delta's manifest.json.

    A republished (different) delta for the same month gets a new key, so it runs again.
    """
    return f"{month}:{manifest_sha256}"


@dg.sensor(
    job=apply_month_job,
    minimum_interval_seconds=30,
    description="Requests the month's run when `deltas/<YYYY-MM>/` is complete (its "
    "CHECKSUMS.sha256 lists its manifest and every listed file is present with the right size).",
)
def delta_arrival_sensor(context: dg.SensorEvaluationContext, skewtape: SkewtapeHome):
    """Look at the months after the cursor, oldest first; request each complete delta's run.

    The cursor is the last month handled (requested, or found already applied), so a tick reads
    only new month folders and stays cheap however many entries ``deltas/`` holds. A month that
    is still arriving, or not yet a partition, stops the scan until a later tick.
    """
    cursor = context.cursor or ""
    requests: list[dg.RunRequest] = []
    notes: list[str] = []
    months = delta_months(skewtape.deltas_dir, after=cursor)
    early = [month for month in months if month < FIRST_MONTH]
    if early:
        notes.append(f"{len(early)} delta(s) before the first month {FIRST_MONTH} ignored")
        cursor = early[-1]
    for month in months[len(early) :]:
        if not is_month_partition(month):
            notes.append(f"{month} is not a month partition yet; waiting for the month to start")
            break
        arrival = inspect_delta(skewtape.delta_dir(month))
        if not arrival.complete:
            notes.append(f"deltas/{month} is not complete: {arrival.reason}")
            break
        if holds_snapshot(skewtape.snapshot_dir(month), arrival.next_manifest_sha256):
            notes.append(f"{month} is already applied ({arrival.next_bundle_id})")
        else:
            assert arrival.manifest_sha256 is not None
            requests.append(
                dg.RunRequest(partition_key=month, run_key=run_key(month, arrival.manifest_sha256))
            )
        cursor = month
    if requests:
        return dg.SensorResult(run_requests=requests, cursor=cursor)
    reason = "; ".join(notes) or f"no new delta in {skewtape.deltas_dir}"
    return skipped(context, skewtape, reason, cursor)

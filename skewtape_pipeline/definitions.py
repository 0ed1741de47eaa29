"""The Dagster code location: ``dagster dev -m skewtape_pipeline.definitions`` (or workspace.yaml).

Nothing is read from the environment here: ``SKEWTAPE_HOME`` is resolved by Dagster when a run,
sensor tick or schedule tick starts.
"""

from __future__ import annotations

import dagster as dg

from skewtape_pipeline.orchestration.checks import month_checks
from skewtape_pipeline.orchestration.jobs import apply_month_job
from skewtape_pipeline.orchestration.resources import ArchiveSettings, SkewtapeHome
from skewtape_pipeline.orchestration.schedules import monthly_apply_schedule
from skewtape_pipeline.orchestration.sensors import delta_arrival_sensor
from skewtape_pipeline.orchestration.snapshot_asset import history_snapshot
from skewtape_pipeline.orchestration.tick_asset import archive_ticks_job, tick_archive
from skewtape_pipeline.orchestration.tick_sensors import tick_corrections_sensor
from skewtape_pipeline.orchestration.tier_assets import (
    retier_ticks_job,
    tick_archive_stats,
    tick_archive_tiers,
    tick_archive_verified,
    verify_archive_job,
)
from skewtape_pipeline.orchestration.tier_schedule import (
    daily_retier_schedule,
    daily_verify_archive_schedule,
)
from skewtape_pipeline.orchestration.version_jobs import (
    prune_tick_versions_job,
    weekly_prune_versions_schedule,
)


def build_definitions(
    skewtape: SkewtapeHome,
    archive: ArchiveSettings | None = None,
    executor: dg.ExecutorDefinition = dg.in_process_executor,
) -> dg.Definitions:
    """The definitions, with ``skewtape`` as the data root (the demo passes a fixed folder).

    ``executor`` runs the jobs that do not pin one (``archive_ticks``); ``apply_month`` and
    ``retier_ticks`` always run in process: each is one journaled sequence over one folder."""
    return dg.Definitions(
        assets=[history_snapshot, tick_archive, tick_archive_tiers, tick_archive_stats],
        asset_checks=[*month_checks, tick_archive_verified],
        jobs=[
            apply_month_job,
            archive_ticks_job,
            retier_ticks_job,
            verify_archive_job,
            prune_tick_versions_job,
        ],
        sensors=[delta_arrival_sensor, tick_corrections_sensor],
        schedules=[
            monthly_apply_schedule,
            daily_retier_schedule,
            daily_verify_archive_schedule,
            weekly_prune_versions_schedule,
        ],
        resources={"skewtape": skewtape, "archive": archive or ArchiveSettings()},
        executor=executor,
    )


defs = build_definitions(SkewtapeHome(root=dg.EnvVar("SKEWTAPE_HOME")))

"""The code location's contents, built once: every domain's assets, checks, jobs, sensors and
schedules with their resources (the code locations ``skewtape_pipeline.definitions`` and
``skewtape_pipeline.celery_definitions``, the demo and the tests call :func:`build_definitions`).
"""

from __future__ import annotations

import dagster as dg

from skewtape_pipeline.arrow_memory import use_lean_pool
from skewtape_pipeline.orchestration.mirror.catch_up_job import catch_up_months
from skewtape_pipeline.orchestration.mirror.checks import month_checks
from skewtape_pipeline.orchestration.mirror.jobs import apply_month_job
from skewtape_pipeline.orchestration.mirror.publisher import PublisherSource, publisher_sensor
from skewtape_pipeline.orchestration.mirror.schedules import monthly_apply_schedule
from skewtape_pipeline.orchestration.mirror.sensors import delta_arrival_sensor
from skewtape_pipeline.orchestration.mirror.snapshot_asset import history_snapshot
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import archive_ticks_job, tick_archive
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.schedules import (
    daily_retier_schedule,
    daily_verify_archive_schedule,
)
from skewtape_pipeline.orchestration.ticks.sensors import (
    tick_corrections_sensor,
    tick_venues_sensor,
)
from skewtape_pipeline.orchestration.ticks.tier_assets import (
    retier_ticks_job,
    tick_archive_stats,
    tick_archive_tiers,
    tick_archive_verified,
    verify_archive_job,
)
from skewtape_pipeline.orchestration.ticks.version_jobs import (
    prune_tick_versions_job,
    weekly_prune_versions_schedule,
)


def build_definitions(
    skewtape: SkewtapeHome,
    archive: ArchiveSettings | None = None,
    executor: dg.ExecutorDefinition = dg.in_process_executor,
    publisher: PublisherSource | None = None,
) -> dg.Definitions:
    """The definitions, with ``skewtape`` as the data root (the demo passes a fixed folder) and
    ``publisher`` the source followed (default: the one ``SKEWTAPE_SOURCE`` names at run time).

    ``executor`` runs the jobs that do not pin one (``archive_ticks``); ``apply_month`` and
    ``retier_ticks`` always run in process: each is one journaled sequence over one folder.
    The process loading them allocates Arrow memory from jemalloc (:func:`use_lean_pool`)."""
    use_lean_pool()
    return dg.Definitions(
        assets=[history_snapshot, tick_archive, tick_archive_tiers, tick_archive_stats],
        asset_checks=[*month_checks, tick_archive_verified],
        jobs=[
            apply_month_job,
            catch_up_months,
            archive_ticks_job,
            retier_ticks_job,
            verify_archive_job,
            prune_tick_versions_job,
        ],
        sensors=[
            delta_arrival_sensor,
            publisher_sensor,
            tick_venues_sensor,
            tick_corrections_sensor,
        ],
        schedules=[
            monthly_apply_schedule,
            daily_retier_schedule,
            daily_verify_archive_schedule,
            weekly_prune_versions_schedule,
        ],
        resources={
            "skewtape": skewtape,
            "archive": archive or ArchiveSettings(),
            "publisher": publisher or PublisherSource(),
        },
        executor=executor,
    )

"""Pruning the tick archive's versions from Dagster: the ``prune_tick_versions`` job (run by hand
or by its weekly schedule, which is off by default: pruning is done on purpose), configured with
``keep_last`` or ``older_than`` as ``prune-versions`` is. It runs in the archive pool, so it never
races a compaction or a re-tiering; the core refuses it in ``books_and_records`` mode."""

from datetime import date

import dagster as dg
from pydantic import Field

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.orchestration.shared.keys import QUEUE_TAG
from skewtape_pipeline.orchestration.shared.refusals import refusal_as_failure
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import ARCHIVE_POOL
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings


class PruneVersionsConfig(dg.Config):
    """Which versions to prune: give exactly one of the two."""

    keep_last: int = Field(default=0, description="Keep the N newest versions (0: unset).")
    older_than: str = Field(
        default="", description="Prune versions committed before this day (YYYY-MM-DD)."
    )

    def older_than_date(self) -> date | None:
        """``older_than`` as a date (None when empty); ConfigError when it is not a date."""
        if not self.older_than:
            return None
        try:
            return date.fromisoformat(self.older_than)
        except ValueError:
            raise ConfigError(
                f"older_than = {self.older_than!r}: expected a YYYY-MM-DD date"
            ) from None


@dg.op(pool=ARCHIVE_POOL)
def prune_tick_versions_op(
    context: dg.OpExecutionContext,
    config: PruneVersionsConfig,
    skewtape: SkewtapeHome,
    archive: ArchiveSettings,
) -> dg.Output[None]:
    """Prune the versions the config leaves out, then the files no kept version reads."""
    with refusal_as_failure("prune_tick_versions", skewtape):
        result = archive.open_existing(skewtape).versions.prune(
            keep_last=config.keep_last or None, older_than=config.older_than_date()
        )
    context.log.info(
        f"pruned versions {result.pruned}; kept {len(result.kept)}; "
        f"removed {len(result.files_removed)} files"
    )
    return dg.Output(
        None,
        metadata={
            "versions_pruned": dg.MetadataValue.int(len(result.pruned)),
            "versions_kept": dg.MetadataValue.int(len(result.kept)),
            "files_removed": dg.MetadataValue.int(len(result.files_removed)),
        },
    )


@dg.job(
    name="prune_tick_versions",
    description="Remove old versions of the tick archive (keep_last or older_than), then the "
    "files no kept version reads; tagged versions and the latest are kept.",
    executor_def=dg.in_process_executor,
    tags={QUEUE_TAG: ARCHIVE_POOL},
)
def prune_tick_versions_job():
    prune_tick_versions_op()


weekly_prune_versions_schedule = dg.ScheduleDefinition(
    name="weekly_prune_tick_versions",
    job=prune_tick_versions_job,
    cron_schedule="0 7 * * 0",
    execution_timezone="UTC",
    run_config={"ops": {"prune_tick_versions_op": {"config": {"keep_last": 100}}}},
    default_status=dg.DefaultScheduleStatus.STOPPED,
    description="Sundays at 07:00 UTC, keeps the 100 newest versions of the tick archive (and "
    "every tagged one). Off by default: start it once pruning is wanted.",
)

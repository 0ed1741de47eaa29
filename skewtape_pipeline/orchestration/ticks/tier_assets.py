"""Re-tiering the tick archive by age, and the archive as a whole, as Dagster assets.

``tick_archive_tiers`` is partitioned by month (the keys of ``history_snapshot``): materializing
a month moves that month's symbol-days to the tier their age calls for (the core's
``retier(..., months=...)``: verified copies, one atomic catalog commit, audited removals). A
backfill over months is one run (one lock, one commit). Each month's materialization records
where its moved symbol-days now live; the run's own numbers are shared by every month of it.
A month depends on every symbol-day of its days in ``tick_archive``. Its check
``compression_target_met`` judges the consolidated files the run wrote against the target (the
consolidated tiers are where the target means something; see ``store.file_compression``).

``tick_archive_stats`` (not partitioned) measures the whole archive: bytes, files, ticks and
symbol-days per tier as numbers the UI plots over time, and its versions (kept, tagged, the
latest, the bytes only past versions hold). Both run in the archive pool, so they
never race a compaction (the core also holds a lock of its own).

``tick_archive_verified``, a check on ``tick_archive_stats`` (in the archive pool too), runs
the core's ``verify_archive(full=True)``: every file against the catalog (presence, size,
sha256) and every page's checksum through pyarrow (DuckDB does not check them). It runs after
each re-tiering and daily on its own (``verify_tick_archive``, scheduled in ``schedules``).
Its findings name files relative to their tier root (``ArchiveTiers.relative_text``), never by
the machine's absolute paths.
"""

import warnings
from datetime import UTC, date, datetime

import dagster as dg
from pydantic import Field

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.orchestration.shared.keys import QUEUE_TAG
from skewtape_pipeline.orchestration.shared.metadata import (
    bytes_value,
    listed,
    problems_metadata,
)
from skewtape_pipeline.orchestration.shared.partitions import month_partitions
from skewtape_pipeline.orchestration.shared.refusals import refusal_as_failure
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import ARCHIVE_POOL, TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.metadata import (
    archive_metrics_metadata,
    compression_check_metadata,
    moves_by_month,
    moves_metadata,
    retier_run_metadata,
    versions_metadata,
)
from skewtape_pipeline.orchestration.ticks.partitions import DATE_DIMENSION
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.ticks.archive.store.file_compression import file_compression

TICK_ARCHIVE_TIERS = dg.AssetKey("tick_archive_tiers")
TICK_ARCHIVE_STATS = dg.AssetKey("tick_archive_stats")
TARGET_MET = "compression_target_met"
ARCHIVE_ROOT_NAME = "$SKEWTAPE_HOME/archive"
"""The archive root as the check's findings name it (the data root's ``archive/``)."""


class RetierConfig(dg.Config):
    """Run configuration of a re-tiering."""

    as_of: str = Field(
        default="",
        description="The day ages are counted to (YYYY-MM-DD); empty: today in UTC.",
    )

    def as_of_date(self) -> date:
        """``as_of`` as a date (today in UTC when empty); ConfigError when it is not a date."""
        if not self.as_of:
            return datetime.now(UTC).date()
        try:
            return date.fromisoformat(self.as_of)
        except ValueError:
            raise ConfigError(f"as_of = {self.as_of!r}: expected a YYYY-MM-DD date") from None


def retier_run_config(as_of: date) -> dict:
    """The run configuration of a re-tiering run at ``as_of`` (the schedule's and the demo's)."""
    return {"ops": {TICK_ARCHIVE_TIERS.path[-1]: {"config": {"as_of": as_of.isoformat()}}}}


with warnings.catch_warnings():
    # backfill_policy and MultiToSingleDimensionPartitionMapping are beta in 1.13
    warnings.simplefilter("ignore", dg.BetaWarning)
    _tiers_asset = dg.asset(
        key=TICK_ARCHIVE_TIERS,
        partitions_def=month_partitions,
        deps=[
            dg.AssetDep(
                TICK_ARCHIVE,
                # a month re-tiers the symbol-days of its days (every symbol)
                partition_mapping=dg.MultiToSingleDimensionPartitionMapping(DATE_DIMENSION),
            )
        ],
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=ARCHIVE_POOL,
        group_name="ticks",
        kinds={"parquet"},
        check_specs=[
            dg.AssetCheckSpec(
                TARGET_MET,
                asset=TICK_ARCHIVE_TIERS,
                description="Each warm or cold file the run wrote meets the compression target "
                "(the `archive` resource's `target_ratio`, 5x by default): the canonical CSV "
                "bytes of its symbol-days over its bytes. Files of fewer than `target_min_ticks` "
                "ticks are measured but not judged (their footer and page headers decide their "
                "ratio), nor are hot symbol-day files (one footer per symbol-day, each cheap to "
                "rewrite: the tiers exist because they cannot reach the target). A miss is a "
                "warning: try a higher `compression_level` or larger row groups in the tier "
                "policy.",
            )
        ],
        description="The tick archive's symbol-days of each month in the tier their age calls "
        "for: hot symbol-day files, warm and cold consolidated files (moved, verified row for "
        "row, committed atomically, audited).",
    )


@_tiers_asset
def tick_archive_tiers(
    context: dg.AssetExecutionContext,
    config: RetierConfig,
    skewtape: SkewtapeHome,
    archive: ArchiveSettings,
) -> dg.MaterializeResult:
    with refusal_as_failure("tick_archive_tiers", skewtape):
        tick_archive = archive.open_existing(skewtape)
        result = tick_archive.retier(as_of=config.as_of_date(), months=context.partition_keys)
    context.add_asset_metadata(retier_run_metadata(result))
    for month, moves in moves_by_month(result.moved).items():
        context.add_asset_metadata(
            moves_metadata(moves, tick_archive.tiers.relative), partition_key=month
        )
    measured = [file_compression(path) for path in result.files_written]
    names = [tick_archive.tiers.relative(path) for path in result.files_written]
    checked = compression_check_metadata(
        measured, target=archive.target_ratio, min_ticks=archive.target_min_ticks, names=names
    )
    return dg.MaterializeResult(
        check_results=[
            dg.AssetCheckResult(
                check_name=TARGET_MET,
                passed=checked.passed,
                severity=dg.AssetCheckSeverity.WARN,
                metadata=checked.metadata,
                description=checked.metadata["summary"].value,
            )
        ]
    )


@dg.asset(
    key=TICK_ARCHIVE_STATS,
    deps=[TICK_ARCHIVE, TICK_ARCHIVE_TIERS],
    pool=ARCHIVE_POOL,
    group_name="ticks",
    description="The tick archive as a whole: files, bytes, ticks and symbol-days per tier "
    "(numbers plotted over time), the superseded files retained on disk, the versions kept and "
    "the bytes only past versions hold.",
)
def tick_archive_stats(skewtape: SkewtapeHome, archive: ArchiveSettings) -> dg.MaterializeResult:
    with refusal_as_failure("tick_archive_stats", skewtape):
        tick_archive = archive.open_existing(skewtape)
        versions = versions_metadata(
            kept=len(tick_archive.versions.list()),
            tags=len(tick_archive.versions.tags()),
            past_bytes=tick_archive.versions.past_bytes(),
            latest=tick_archive.core.versions.count(),
        )
        stats = tick_archive.stats()
    return dg.MaterializeResult(metadata=archive_metrics_metadata(stats) | versions)


@dg.asset_check(
    asset=TICK_ARCHIVE_STATS,
    pool=ARCHIVE_POOL,  # never reads while a compaction or re-tiering moves files
    description="Every archive file matches the catalog (presence, size, sha256) and every "
    "Parquet page its checksum (read through pyarrow; DuckDB does not check them); what the kept "
    "versions read is there and holds the bytes its name records. Its findings name files as "
    "the other metadata does: `<TIER>/<path inside the tier root>` for a warm or cold file, a "
    "hot file by its path in the archive root (`$SKEWTAPE_HOME/archive`). Leftovers (files no "
    "read sees, which `prune` removes) are counted and listed apart (`leftovers`, "
    "`leftover_files`) without failing it.",
)
def tick_archive_verified(skewtape: SkewtapeHome, archive: ArchiveSettings) -> dg.AssetCheckResult:
    with refusal_as_failure("tick_archive_verified", skewtape):
        tick_archive = archive.open_existing(skewtape)
        result = tick_archive.verify(full=True)
    problems, leftovers = (
        [tick_archive.tiers.relative_text(p, ARCHIVE_ROOT_NAME) for p in found]
        for found in (result.problems, result.leftovers)
    )
    metadata = {
        **problems_metadata(problems),
        "files_checked": dg.MetadataValue.int(result.files_checked),
        "bytes_checked": bytes_value(result.bytes_checked),
        "leftovers": dg.MetadataValue.int(len(leftovers)),
    }
    if leftovers:  # not problems: files no read sees, which prune removes
        metadata["leftover_files"] = dg.MetadataValue.md(
            "\n".join(f"- {line}" for line in listed(leftovers))
        )
    return dg.AssetCheckResult(passed=result.ok, metadata=metadata)


verify_archive_job = dg.define_asset_job(
    name="verify_tick_archive",
    selection=dg.AssetSelection.checks(tick_archive_verified),
    description="Verify the tick archive against its catalog, reading every page's checksum.",
    executor_def=dg.in_process_executor,
)


retier_ticks_job = dg.define_asset_job(
    name="retier_ticks",
    selection=dg.AssetSelection.assets(TICK_ARCHIVE_TIERS, TICK_ARCHIVE_STATS),
    description="Move the symbol-days of the selected months to the tier their age calls for, "
    "then measure the archive.",
    executor_def=dg.in_process_executor,
    tags={QUEUE_TAG: ARCHIVE_POOL},
)

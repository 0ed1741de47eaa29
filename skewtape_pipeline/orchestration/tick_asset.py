"""The tick archive asset: one partition per symbol-day, compacted from the snapshot's fills.

A run may cover many symbol-days (a backfill runs one day over all symbols in one run); each
gets its own materialization metadata (the report and its source; ``venue_departed`` when the
newest snapshot no longer holds the venue's month file and the ticks, kept, come from the last
snapshot that held it; the tier policy and the encodings, which every symbol-day of a run
shares, are recorded once, on the run's check).
One check per run: DuckDB reads every written file back equal to the fills. (The compression
target is checked where it means something: on the consolidated files re-tiering writes,
``tick_archive_tiers``; a hot symbol-day file carries its own footer.) Runs that
write the archive share one concurrency pool (:data:`ARCHIVE_POOL`): a compaction never races
a re-tiering of the same archive.
"""

import warnings

import dagster as dg

from skewtape_pipeline.orchestration.jobs import HISTORY_SNAPSHOT, QUEUE_TAG
from skewtape_pipeline.orchestration.metadata import (
    problems_metadata,
    run_report_metadata,
    symbol_day_metadata,
)
from skewtape_pipeline.orchestration.resources import ArchiveSettings, SkewtapeHome
from skewtape_pipeline.orchestration.tick_partitions import symbol_day_of, symbol_day_partitions
from skewtape_pipeline.ticks.snapshot_fills import (
    archive_read_back_problems,
    archive_symbol_days,
    today_utc,
)

TICK_ARCHIVE = dg.AssetKey("tick_archive")
ARCHIVE_POOL = "skewtape_archive"
"""The concurrency pool of every asset that writes or measures the tick archive."""
ROUND_TRIP = "round_trip_read_back"

NO_TICKS = {
    "summary": dg.MetadataValue.md("No ticks on this day: nothing archived."),
    "tick_count": dg.MetadataValue.int(0),
    "archived": dg.MetadataValue.bool(False),
}
"""Metadata of every partition of a run; a symbol-day with a report (or a removed file, or a
withdrawn consolidated copy) gets its own on top. Adding per-partition metadata costs Dagster
1.13 a listing of the whole symbol dimension per call, so it is done only for symbol-days that
had something to record."""


with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.BetaWarning)  # backfill_policy is beta in 1.13
    _tick_archive_asset = dg.asset(
        key=TICK_ARCHIVE,
        partitions_def=symbol_day_partitions,
        deps=[HISTORY_SNAPSHOT],
        backfill_policy=dg.BackfillPolicy.single_run(),
        pool=ARCHIVE_POOL,
        group_name="ticks",
        kinds={"parquet"},
        check_specs=[
            dg.AssetCheckSpec(
                ROUND_TRIP,
                asset=TICK_ARCHIVE,
                description="DuckDB reads each written file back equal to the snapshot's fills "
                "(the run's tier policy and encodings are recorded here, once per run).",
            ),
        ],
        description="`archive/symbol=<S>/year=/month=/date=/part-0.parquet`: a symbol-day's "
        "trades, validated, compacted, verified and reported, read from the newest snapshot's "
        "fills.",
    )


@_tick_archive_asset
def tick_archive(
    context: dg.AssetExecutionContext, skewtape: SkewtapeHome, archive: ArchiveSettings
) -> dg.MaterializeResult:
    keys = context.partition_keys
    results = archive_symbol_days(
        skewtape.history_dir,
        [symbol_day_of(key) for key in keys],
        out=archive.prepare(skewtape.archive_dir, audit_log=skewtape.audit_log),
        as_of=today_utc(),
        policy=archive.policy(),
        target_ratio=archive.target_ratio,
        audit_log=skewtape.audit_log,
    )
    context.add_asset_metadata(NO_TICKS)
    for key, result in zip(keys, results, strict=True):
        if result.report is not None or result.removed_file or result.withdrawn:
            extra = {
                "withdrawn": dg.MetadataValue.bool(result.withdrawn),
                "venue_departed": dg.MetadataValue.bool(result.source.departed),
            }
            context.add_asset_metadata(symbol_day_metadata(result) | extra, partition_key=key)
    reports = [result.report for result in results if result.report is not None]
    problems = archive_read_back_problems(results, out=skewtape.archive_dir)
    files = dg.MetadataValue.int(len(reports))
    return dg.MaterializeResult(
        check_results=[
            dg.AssetCheckResult(
                check_name=ROUND_TRIP,
                passed=not problems,
                metadata={
                    **problems_metadata(problems),
                    "files": files,
                    **run_report_metadata(reports),
                },
            ),
        ]
    )


archive_ticks_job = dg.define_asset_job(
    name="archive_ticks",
    selection=dg.AssetSelection.assets(TICK_ARCHIVE),
    description="Compact symbol-days of fills into the tick archive.",
    executor_def=dg.in_process_executor,
    tags={QUEUE_TAG: ARCHIVE_POOL},
)

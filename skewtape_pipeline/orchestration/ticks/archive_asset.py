"""The tick archive asset: one partition per venue-day, its symbol-days compacted from the fills.

The asset is a graph of :data:`SHARDS` archiving ops and one recording op. A run (a backfill
runs a date range over all venues in one run) deals its venue-days out to the shards, which
archive them independently (on as many workers as the executor has: the Celery executor spreads
them), each venue-day publishing its symbol-day files and its rows of the archive's reports
table. Nothing but ``Nothing`` crosses an op boundary: the recording op reads what the shards
did back from the reports table (the run's rows), so no op's output needs a disk another
machine shares besides the data root itself.

The recording op gives each venue-day its materialization metadata (the symbol-days archived,
with tick counts, and how many of them the archive already held unchanged; the ones skipped
because they had no trades, the ones removed; whether the venue left the newest snapshot, its
ticks kept from the last snapshot that held its month file; a run over named symbols, a
correction, records the whole venue-day's as it now stands, saying which symbols it reran)
and runs one check over the run: DuckDB read every written file back equal to the fills (the
run's tier policy is recorded there, once). The compression target is checked where it means
something: on the consolidated files re-tiering writes (``tick_archive_tiers``); a hot
symbol-day file carries its own footer. Runs that write the archive share one concurrency pool
(:data:`ARCHIVE_POOL`) and run-queue tag: a compaction never races a re-tiering of the same
archive.

Run config ``symbols`` (a list of ``<venue>:<market>``) limits a run to those symbol-days of its
venue-days: the corrections sensor reruns exactly the symbol-days a correction touched that way.
Such a run is refused over a venue-day never archived, or of a venue none of the symbols is of:
Dagster would record it as materialized, archived whole; a symbol the venue-day's fills and the
archive do not know is refused as mistyped, except in the sensor's runs (:data:`CORRECTED_BY_TAG`).
"""

import time
import warnings
from collections.abc import Collection
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import Field

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT, QUEUE_TAG
from skewtape_pipeline.orchestration.shared.metadata import problems_metadata
from skewtape_pipeline.orchestration.shared.refusals import refusal_as_failure
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.partitions import venue_day_of, venue_day_partitions
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.venue_day_metadata import venue_day_metadata
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.fills.snapshot_fills import split_symbol, today_utc
from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions, archive_venue_day

TICK_ARCHIVE = dg.AssetKey("tick_archive")
ARCHIVE_POOL = "skewtape_archive"
"""The concurrency pool of every asset that writes or measures the tick archive."""
ROUND_TRIP = "round_trip_read_back"
SHARDS = 4
"""Archiving ops per run: a run's venue-days are dealt out to them in turn."""
CORRECTED_BY_TAG = "skewtape/corrected_by"
"""The tag of a run the corrections sensor requested: the month whose fills corrected the
venue-day. Its named symbols come from the fills' row diff, so one the venue-day's fills and the
archive no longer know (all its rows corrected away) is left out; a user's such symbol is
refused as mistyped."""


class TickArchiveConfig(dg.Config):
    """What a tick archive run covers of its venue-days."""

    symbols: list[str] = Field(
        default_factory=list,
        description="Only these symbols (`<venue>:<market>`) of each venue-day, e.g. the "
        "symbol-days a correction touched; every symbol-day when empty. Each venue-day of the "
        "run must have been archived before and be of a named symbol's venue (else the run "
        "is refused: it would record the venue-day as archived); a symbol neither its fills "
        "nor the archive know is refused as mistyped.",
    )


def shard_of(keys: list[str], shard: int) -> list[str]:
    """The venue-day keys of ``keys`` that shard number ``shard`` archives (sorted, dealt out)."""
    return sorted(keys)[shard::SHARDS]


def _archive_shard_op(shard: int) -> dg.OpDefinition:
    @dg.op(
        name=f"archive_venue_days_{shard}",
        ins={"snapshot": dg.In(dg.Nothing)},
        out=dg.Out(dg.Nothing),
        pool=ARCHIVE_POOL,
    )
    def archive_venue_days(
        context: dg.OpExecutionContext,
        config: TickArchiveConfig,
        skewtape: SkewtapeHome,
        archive: ArchiveSettings,
    ) -> None:
        """Archive this shard's venue-days of the run, one after the other."""
        with refusal_as_failure("tick_archive", skewtape):
            _archive_shard(context, config, skewtape, archive, shard)

    return archive_venue_days


def _archive_shard(
    context: dg.OpExecutionContext,
    config: TickArchiveConfig,
    skewtape: SkewtapeHome,
    archive: ArchiveSettings,
    shard: int,
) -> None:
    """Archive shard number ``shard``'s venue-days of the run, one after the other; a refusal
    met archiving one fails the op naming that venue-day."""
    keys = shard_of(list(context.partition_keys), shard)
    _check_named_run(context, config, skewtape, keys)
    tick_archive = archive.open(skewtape)
    with tick_archive.writing():  # write-once mode first; the policy recorded after
        options = VenueDayOptions(
            archive=tick_archive,
            as_of=today_utc(),
            batch=context.run_id,
            target_ratio=archive.target_ratio,
            memory_limit=archive.memory_limit,
        )
        for key in keys:
            venue, day = venue_day_of(key)
            named = _symbols_of(config, venue)
            with refusal_as_failure(f"tick_archive {key}", skewtape):
                result = archive_venue_day(
                    skewtape.history_dir,
                    (venue, day),
                    options,
                    symbols=named,
                    refuse_unknown=CORRECTED_BY_TAG not in context.run.tags,
                )
            unchanged = sum(bool(row.unchanged) for row in result.archived)
            context.log.info(
                f"{key}: {len(result.archived)} symbol-day(s) archived "
                f"({result.tick_count} ticks; {unchanged} already held unchanged, not "
                f"written), {len(result.skipped)} skipped (no trades), "
                f"{len(result.removed)} removed"
            )


def _check_named_run(
    context: dg.OpExecutionContext,
    config: TickArchiveConfig,
    skewtape: SkewtapeHome,
    keys: list[str],
) -> None:
    """ConfigError naming the venue-day, before anything is written, when ``config`` names
    symbols and a venue-day of ``keys`` was never materialized or its venue has none of them.

    Dagster records every venue-day of a successful run as materialized: the first would show
    as archived with only the named symbol-days in the archive (and the corrections sensor and
    backfills would take it as done), the second as archived with nothing looked at."""
    if not config.symbols:
        return
    archived = context.instance.get_materialized_partitions(TICK_ARCHIVE)
    for key in keys:
        venue, _ = venue_day_of(key)
        with refusal_as_failure(f"tick_archive {key}", skewtape):
            if not _symbols_of(config, venue):
                raise ConfigError(
                    f"none of the named symbols ({', '.join(config.symbols)}) is of venue "
                    f"{venue!r}; name its symbols, or launch the run over the named symbols' "
                    "venue-days only"
                )
            if str(key) not in archived:
                raise ConfigError(
                    "symbols are named, but this venue-day was never archived: run it "
                    "without symbols first (a run over some of its symbols would record it "
                    "as archived with the others missing); nothing archived"
                )


def _symbols_of(config: TickArchiveConfig, venue: str) -> list[str] | None:
    """The named symbols of ``venue`` (None: every symbol-day)."""
    if not config.symbols:
        return None
    return [symbol for symbol in config.symbols if split_symbol(symbol)[0] == venue]


_CHECK_OUTS = {
    "result": dg.Out(dg.Nothing),
    f"tick_archive_{ROUND_TRIP}": dg.Out(dg.Nothing),
}


@dg.op(ins={"archived": dg.In(dg.Nothing)}, out=_CHECK_OUTS, pool=ARCHIVE_POOL)
def record_tick_archive(
    context: dg.AssetExecutionContext,
    config: TickArchiveConfig,
    skewtape: SkewtapeHome,
    archive: ArchiveSettings,
):
    """Read the run's rows of the reports table back: each venue-day's metadata (with
    archive_version, the archive version the run committed, 0 when it committed none; a run
    naming symbols records the whole venue-day's counts as they now stand, saying which it
    reran: `venue_day_metadata`), the checks.

    A symbol-day read back unequal to its fills fails the check and then the op, before the
    asset's output: Dagster records a partition whenever the graph's last op succeeds, so
    raising here is what keeps the run's venue-days from showing as materialized."""
    batches = _batches(context)
    with refusal_as_failure("tick_archive", skewtape):
        tick_archive = archive.open(skewtape)
    day_rows = {key: _day_rows(tick_archive, skewtape, key) for key in context.partition_keys}
    rows_of = {key: _of_batches(rows, batches) for key, rows in day_rows.items()}
    recorded = {batch for rows in rows_of.values() for batch in rows["batch"].to_pylist()}
    with refusal_as_failure("tick_archive", skewtape):
        version = committed_version(context, tick_archive, recorded)
    problems: list[str] = []
    read_back = left = 0
    for key, rows in rows_of.items():
        venue, _ = venue_day_of(key)
        scope = _symbols_of(config, venue)
        whole = rows if scope is None else day_rows[key]  # a correction: the day as it stands
        context.add_asset_metadata(
            venue_day_metadata(whole, scope=scope, run_rows=rows)
            | {"archive_version": dg.MetadataValue.int(version)},
            partition_key=key,
        )
        archived = [row for row in rows.to_pylist() if row["status"] == "archived"]
        in_hot = [row for row in archived if _in_own_file(row)]
        read_back, left = read_back + len(in_hot), left + len(archived) - len(in_hot)
        problems += [_mismatch(row) for row in in_hot if row["read_back_mismatched_rows"]]
    count = {
        "files": dg.MetadataValue.int(read_back),
        "symbol_days_left_consolidated": dg.MetadataValue.int(left),
    }
    yield dg.AssetCheckResult(
        check_name=ROUND_TRIP,
        asset_key=TICK_ARCHIVE,
        passed=not problems,
        metadata={
            **problems_metadata(problems),
            **count,
            "tier_policy": dg.MetadataValue.json(tick_archive.policy.to_dict()),
        },
    )
    if problems:
        raise dg.Failure(
            f"{len(problems)} symbol-day(s) read back unequal to their fills (first: "
            f"{problems[0]}); no venue-day of this run is recorded as materialized",
            metadata=problems_metadata(problems),
        )
    yield dg.Output(None, "result")


def _day_rows(archive: Archive, skewtape: SkewtapeHome, key: str) -> pa.Table:
    """The report rows of venue-day ``key`` as they now stand (every run's)."""
    venue, day = venue_day_of(key)
    with refusal_as_failure(f"tick_archive {key}", skewtape):
        return archive.venue_day_reports(venue, day)


def _of_batches(rows: pa.Table, batches: pa.Array) -> pa.Table:
    """The report rows of ``rows`` that ``batches`` (run ids) wrote."""
    return rows.filter(pc.is_in(rows["batch"], value_set=batches))


def _in_own_file(row: dict) -> bool:
    """True when an archived report row's symbol-day is in its own (hot) file, the one the
    shard read back; False for one left unchanged in its consolidated file, which compaction
    compared with the fills instead (it has no file of its own to read back)."""
    own = partition_file(Path(), row["symbol"], row["date"]).as_posix()
    return row["path"] == own


def _mismatch(row: dict) -> str:
    """The problem a report row whose read-back found rows differing states."""
    return (
        f"{row['symbol']} {row['date']}: {row['read_back_mismatched_rows']} row(s) differ "
        f"between the archive and {row['source_fills_path']}"
    )


def _batches(context: dg.AssetExecutionContext):
    """The run ids whose report rows belong to this run: its own, and those of the runs it
    re-executes (a re-execution from failure skips the shards that succeeded before)."""
    return pa.array(_run_ids(context), pa.string())


def _run_ids(context: dg.AssetExecutionContext) -> list[str]:
    """This run's id and those of the runs it re-executes, sorted."""
    run = context.run
    return sorted({run.run_id, run.parent_run_id, run.root_run_id} - {None})


def committed_version(
    context: dg.AssetExecutionContext, archive: Archive, batches: Collection[str]
) -> int:
    """The archive version the runs whose report rows this run records committed last
    (``batches``: its own id, and that of a run it re-executes from failure whose shards' rows
    are kept): the latest version committed while one of them ran; 0 when none was, i.e. they
    changed nothing. Runs that write the archive share :data:`ARCHIVE_POOL`, so a version
    committed while one of them ran is theirs; one committed between a run and its
    re-execution (e.g. a re-tiering's) is not."""
    records = [context.instance.get_run_record_by_id(batch) for batch in sorted(batches)]
    return max((_committed_while(archive, r) for r in records if r is not None), default=0)


def _committed_while(archive: Archive, record: dg.RunRecord) -> int:
    """The latest version committed while ``record``'s run ran (until now when it has not
    ended), 0 when none was or it never started."""
    if record.start_time is None:
        return 0
    end = record.end_time if record.end_time is not None else time.time()
    last = archive.versions.at(datetime.fromtimestamp(end, UTC))
    if last is None or last == archive.versions.at(datetime.fromtimestamp(record.start_time, UTC)):
        return 0
    return last


with warnings.catch_warnings():
    warnings.simplefilter("ignore", dg.BetaWarning)  # backfill_policy is beta in 1.13

    @dg.graph_asset(
        key=TICK_ARCHIVE,
        partitions_def=venue_day_partitions,
        ins={"snapshot": dg.AssetIn(key=HISTORY_SNAPSHOT, dagster_type=dg.Nothing)},
        backfill_policy=dg.BackfillPolicy.single_run(),
        group_name="ticks",
        kinds={"parquet"},
        config=dg.ConfigMapping(
            config_fn=lambda cfg: {
                **{f"archive_venue_days_{i}": {"config": cfg} for i in range(SHARDS)},
                "record_tick_archive": {"config": cfg},
            },
            config_schema=TickArchiveConfig.to_config_schema(),
        ),
        check_specs=[
            dg.AssetCheckSpec(
                ROUND_TRIP,
                asset=TICK_ARCHIVE,
                description="DuckDB reads each written file back equal to the snapshot's fills "
                "(`files`: the symbol-day files read back; "
                "`symbol_days_left_consolidated`: those the archive already held unchanged in a "
                "warm or cold file, compared with the fills by compaction, not read back). The "
                "run's tier policy is recorded here, once per run.",
            ),
        ],
        description="`archive/symbol=<S>/year=/month=/date=/part-0.parquet` for each symbol-day "
        "of a venue-day with trades, validated, compacted, verified and reported (the reports "
        "table `archive/_skewtape_reports/`), read from the newest snapshot holding the venue's "
        "month of fills.",
    )
    def tick_archive(snapshot):
        shards = [_archive_shard_op(i)(snapshot) for i in range(SHARDS)]
        recorded = record_tick_archive(archived=shards)
        return {
            "result": recorded.result,
            f"tick_archive_{ROUND_TRIP}": getattr(recorded, f"tick_archive_{ROUND_TRIP}"),
        }


archive_ticks_job = dg.define_asset_job(
    name="archive_ticks",
    selection=dg.AssetSelection.assets(TICK_ARCHIVE),
    description="Compact venue-days of fills into the tick archive. Backfill venue-days from "
    "the `tick_archive` asset's page (Materialize: a date range, the venues), not from this "
    "job's page: Dagster 1.13 launches a backfill from a job page of a multi-partitioned asset "
    "as runs that each carry one venue-day's tags (Dagster issue #28861), so it reports "
    "success having built one venue-day.",
    tags={QUEUE_TAG: ARCHIVE_POOL},
)
"""Runs on the code location's executor: in process by default, dagster-celery's workers in
``skewtape_pipeline.celery_definitions`` (each archiving op a Celery task)."""

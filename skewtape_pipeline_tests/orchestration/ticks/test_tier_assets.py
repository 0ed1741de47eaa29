"""Re-tiering under Dagster: the sample archive moves hot -> warm -> cold with every tick read
exactly once, each month records where its symbol-days went, the archive is measured per tier,
the daily schedule requests the months due, and books_and_records refusals fail the run."""

from __future__ import annotations

import json
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pyarrow.parquet as pq

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.schedules import daily_retier_schedule
from skewtape_pipeline.orchestration.ticks.tier_assets import retier_run_config
from skewtape_pipeline.progress import size_text
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.books import BOOKS_MARKER, EVENT_REFUSED
from skewtape_pipeline.ticks.archive.store.placement import locate
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM, TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.fills.snapshot_fills import archive_symbol_days, new_symbols
from skewtape_pipeline_tests.orchestration.conftest import register_venues
from skewtape_pipeline_tests.ticks.conftest import archive_at

DAYS = (date(2026, 9, 25), date(2026, 10, 15), date(2026, 11, 5))
"""Archived days: 41 days apart at most, so one as_of puts all of them in the warm tier."""
MONTHS = ("2026-09", "2026-10", "2026-11")
POLICY = TierPolicy()
TO_WARM = DAYS[-1] + timedelta(days=POLICY.hot_max_age_days + 1)
TO_COLD = DAYS[-1] + timedelta(days=POLICY.warm_max_age_days + 1)
VIEW_TOTALS = "SELECT count(*), sum(quantity), sum(price) FROM ticks"
VIEW_ROWS = "SELECT symbol, date, ts, price, quantity, side FROM ticks ORDER BY ALL"


def symbols_of(history: Path) -> list[str]:
    return sorted({symbol for month in MONTHS for symbol in new_symbols(history, month)})


def archive_days(root: Path, days: tuple[date, ...]) -> Path:
    """Compact every symbol-day of ``days`` from the newest snapshot into ``root/archive``."""
    history = root / "history"
    wanted = [(symbol, day) for day in days for symbol in symbols_of(history)]
    archive_symbol_days(archive_at(root / "archive", POLICY), history, wanted, as_of=max(days))
    return root / "archive"


def fills_totals(root: Path, days: tuple[date, ...]) -> tuple[int, int]:
    """(fills, contracts) of ``days`` in the newest snapshot, read straight from its fills."""
    files = [str(p) for p in sorted((root / "history" / "2026-11").glob("fills/*/*.parquet"))]
    [(count, contracts)] = duckdb.sql(
        "SELECT count(*), sum(quantity) FROM read_parquet($files) "
        "WHERE (ts AT TIME ZONE 'UTC')::DATE IN (SELECT unnest($days::DATE[]))",
        params={"files": files, "days": [d.isoformat() for d in days]},
    ).fetchall()
    return count, contracts


def view_tiers(archive: Path) -> set[str]:
    return {
        row["tier"]
        for row in run_query("SELECT DISTINCT tier FROM ticks", ArchiveCore(archive)).to_pylist()
    }


def materializations(result: dg.ExecuteInProcessResult, node: str) -> dict[str | None, dict]:
    """{partition: metadata values} of the node's materializations in ``result``."""
    return {
        event.partition: {key: value.value for key, value in event.metadata.items()}
        for event in result.asset_materializations_for_node(node)
    }


def failure_message(result: dg.ExecuteInProcessResult) -> str:
    """The error of the run's first failed step (each tick archive shard fails alike)."""
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures, "no step failed"
    return str(failures[0].event_specific_data.error)


def test_retier_ticks_when_months_age_moves_hot_warm_cold_without_losing_or_doubling_ticks(
    applied_chain: Path, instance: dg.DagsterInstance
):
    archive = archive_days(applied_chain, DAYS)
    fills, contracts = fills_totals(applied_chain, DAYS)
    totals = run_query(VIEW_TOTALS, ArchiveCore(archive)).to_pylist()
    rows = run_query(VIEW_ROWS, ArchiveCore(archive))
    assert list(totals[0].values())[:2] == [fills, contracts] and fills > 0
    assert view_tiers(archive) == {HOT}
    job = build_definitions(SkewtapeHome(root=str(applied_chain))).resolve_job_def("retier_ticks")

    for month in MONTHS:  # one run per month, as the schedule requests them
        result = job.execute_in_process(
            partition_key=month, run_config=retier_run_config(TO_WARM), instance=instance
        )
        assert result.success
        [metadata] = materializations(result, "tick_archive_tiers").values()
        assert metadata["symbol_days_moved"] > 0
        tiers = ArchiveTiers.of(archive)
        for name, file in metadata["files"].items():  # relative to the tier root
            assert file["tier"] == WARM and name.startswith(f"{WARM}/")
            assert file["bytes"] <= tiers.resolve(name).stat().st_size
        [stats] = materializations(result, "tick_archive_stats").values()
    assert view_tiers(archive) == {WARM}
    assert run_query(VIEW_TOTALS, ArchiveCore(archive)).to_pylist() == totals
    assert run_query(VIEW_ROWS, ArchiveCore(archive)).equals(rows)
    assert (stats["warm_ticks"], stats["hot_ticks"], stats["cold_ticks"]) == (fills, 0, 0)

    result = job.execute_in_process(  # one run over every month, as a UI backfill runs them
        run_config=retier_run_config(TO_COLD),
        instance=instance,
        tags={
            "dagster/asset_partition_range_start": MONTHS[0],
            "dagster/asset_partition_range_end": MONTHS[-1],
        },
    )
    assert result.success
    by_month = materializations(result, "tick_archive_tiers")
    assert sorted(by_month) == list(MONTHS)
    moved = sum(metadata["symbol_days_moved"] for metadata in by_month.values())
    assert moved == by_month[MONTHS[0]]["run.symbol_days_moved"] > 0
    assert view_tiers(archive) == {COLD}
    assert run_query(VIEW_TOTALS, ArchiveCore(archive)).to_pylist() == totals
    assert run_query(VIEW_ROWS, ArchiveCore(archive)).equals(rows)
    stats = materializations(result, "tick_archive_stats")[None]
    assert (stats["cold_ticks"], stats["warm_ticks"], stats["hot_ticks"]) == (fills, 0, 0)
    assert stats["warm_files"] == 0 and stats["cold_files"] >= 1
    cold_row = next(line for line in stats["summary"].splitlines() if line.startswith("| COLD |"))
    assert cold_row.split(" | ")[2] == size_text(stats["cold_bytes"])  # bytes with their unit


def test_tick_archive_tiers_when_symbol_days_move_records_where_each_now_lives(
    applied_chain: Path, instance: dg.DagsterInstance
):
    archive = archive_days(applied_chain, DAYS[1:2])
    job = build_definitions(SkewtapeHome(root=str(applied_chain))).resolve_job_def("retier_ticks")
    result = job.execute_in_process(
        partition_key="2026-10", run_config=retier_run_config(TO_WARM), instance=instance
    )
    metadata = materializations(result, "tick_archive_tiers")["2026-10"]
    lines = [line for line in metadata["moves"].splitlines() if line.startswith("| ")][1:]
    assert len(lines) == metadata["symbol_days_moved"] > 0
    for line in lines:
        symbol, day, source, target, rows, share, file = (c.strip() for c in line.split("|")[1:-1])
        location = locate(ArchiveTiers.of(archive), symbol, date.fromisoformat(day))
        assert (source, target) == (HOT, WARM)
        assert (location.tier, location.path.name, location.bytes) == (target, file, int(share))
        assert ArchiveTiers.of(archive).relative(location.path) in metadata["files"]
        assert int(rows) > 0
    after = sum(f["bytes"] for f in metadata["files"].values())  # bytes with their unit
    shown = f"{after} bytes" if after < 1000 else f"{size_text(after)} ({after:,} bytes)"
    assert metadata["bytes_after"] == shown and metadata["bytes_before"].endswith(" bytes)")
    rerun = job.execute_in_process(
        partition_key="2026-10", run_config=retier_run_config(TO_WARM), instance=instance
    )
    again = materializations(rerun, "tick_archive_tiers")["2026-10"]
    assert (again["symbol_days_moved"], again["run.files_written"]) == (0, 0)
    assert "bytes_ratio" not in again and "bytes_before" not in again  # no 0/0, no zeros


def test_retier_ticks_when_a_warm_day_was_withdrawn_purges_it_and_reports_it(
    applied_chain: Path, instance: dg.DagsterInstance
):
    archive = archive_days(applied_chain, DAYS[1:2])
    job = build_definitions(SkewtapeHome(root=str(applied_chain))).resolve_job_def("retier_ticks")
    run = {"partition_key": "2026-10", "run_config": retier_run_config(TO_WARM)}
    assert job.execute_in_process(**run, instance=instance).success
    counts = "SELECT symbol, count(*) AS n FROM ticks GROUP BY symbol ORDER BY symbol"
    before = {
        row["symbol"]: row["n"] for row in run_query(counts, ArchiveCore(archive)).to_pylist()
    }
    symbol = min(before)
    Archive(archive, audit_log=None).remove(
        [(symbol, DAYS[1])]
    )  # the publisher corrected the day away

    result = job.execute_in_process(**run, instance=instance)

    metadata = materializations(result, "tick_archive_tiers")["2026-10"]
    assert metadata["run.symbol_days_purged"] == 1
    [stats] = materializations(result, "tick_archive_stats").values()
    assert stats["hidden_symbol_days"] == stats["hidden_ticks"] == 0  # purged, not hidden
    assert locate(ArchiveTiers.of(archive), symbol, DAYS[1]) is None
    after = {row["symbol"]: row["n"] for row in run_query(counts, ArchiveCore(archive)).to_pylist()}
    assert after == {s: n for s, n in before.items() if s != symbol}  # the day held all its ticks


def test_daily_retier_schedule_when_a_month_ages_requests_it_else_skips(applied_chain: Path):
    archive_days(applied_chain, DAYS[2:])
    resources = {"skewtape": SkewtapeHome(root=str(applied_chain)), "archive": ArchiveSettings()}

    def tick(day: date):
        when = datetime(day.year, day.month, day.day, 5, tzinfo=UTC)
        context = dg.build_schedule_context(scheduled_execution_time=when, resources=resources)
        return daily_retier_schedule(context)

    skipped = tick(DAYS[2] + timedelta(days=POLICY.hot_max_age_days))
    assert isinstance(skipped, dg.SkipReason)
    assert "nothing to re-tier" in skipped.skip_message
    [request] = tick(TO_WARM)
    assert request.partition_key == "2026-11"
    assert request.run_key == f"{TO_WARM.isoformat()}:2026-11"
    assert request.run_config == retier_run_config(TO_WARM)


def test_books_and_records_when_a_rerun_would_overwrite_a_retained_file_fails_the_run(
    applied_chain: Path, instance: dg.DagsterInstance
):
    skewtape = SkewtapeHome(root=str(applied_chain))
    defs = build_definitions(skewtape, ArchiveSettings(books_and_records=True))
    register_venues(instance, symbols_of(skewtape.history_dir))
    keys = sorted(instance.get_dynamic_partitions("venues"))
    day = DAYS[2].isoformat()
    range_tags = {
        "dagster/asset_partition_range_start": f"{day}|{keys[0]}",
        "dagster/asset_partition_range_end": f"{day}|{keys[-1]}",
    }
    archive_job = defs.resolve_job_def("archive_ticks")
    assert archive_job.execute_in_process(instance=instance, tags=range_tags).success
    assert (skewtape.archive_dir / BOOKS_MARKER).is_file()
    totals = run_query(VIEW_TOTALS, ArchiveCore(skewtape.archive_dir)).to_pylist()

    retiered = defs.resolve_job_def("retier_ticks").execute_in_process(
        partition_key="2026-11", run_config=retier_run_config(TO_WARM), instance=instance
    )
    metadata = materializations(retiered, "tick_archive_tiers")["2026-11"]
    assert metadata["books_and_records"] is True
    assert metadata["run.files_removed"] == 0 and metadata["run.files_retained"] > 0
    assert view_tiers(skewtape.archive_dir) == {WARM}

    refused = archive_job.execute_in_process(
        instance=instance, tags=range_tags, raise_on_error=False
    )
    assert not refused.success
    message = failure_message(refused)
    assert "overwrite refused" in message and "books_and_records" in message
    assert "part-0.parquet" in message
    assert run_query(VIEW_TOTALS, ArchiveCore(skewtape.archive_dir)).to_pylist() == totals
    audit = [json.loads(line) for line in skewtape.audit_log.read_text().splitlines()]
    assert audit[-1]["event"] == EVENT_REFUSED


def check_evaluations(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {e.check_name: e for e in result.get_asset_check_evaluations()}


def test_tick_archive_verified_when_a_warm_page_is_damaged_fails_naming_the_file_in_its_tier(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """The finding names the file as the moves do (``WARM/<path inside the warm root>``), never
    by its absolute path (the archive moves between machines; the path names home folders)."""
    archive = archive_days(applied_chain, DAYS[2:])
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)))
    retiered = defs.resolve_job_def("retier_ticks").execute_in_process(
        partition_key="2026-11", run_config=retier_run_config(TO_WARM), instance=instance
    )
    passed = check_evaluations(retiered)["tick_archive_verified"]
    assert passed.passed  # runs after re-tiering
    assert passed.metadata["problems"].value == 0 and "details" not in passed.metadata
    assert passed.metadata["leftovers"].value == 0 and "leftover_files" not in passed.metadata
    [warm] = [p for p in archive.with_name("archive-warm").rglob("*.parquet")]
    shutil.copyfile(warm, warm.with_name("copy.parquet"))  # a leftover: listed, not a problem
    verify_job = defs.resolve_job_def("verify_tick_archive")
    with_leftover = check_evaluations(verify_job.execute_in_process(instance=instance))
    left = with_leftover["tick_archive_verified"]
    assert left.passed and left.metadata["leftovers"].value == 1
    copy = f"WARM/{warm.with_name('copy.parquet').relative_to(archive.with_name('archive-warm'))}"
    assert left.metadata["leftover_files"].value.startswith(f"- {copy}: a leftover")
    warm.with_name("copy.parquet").unlink()
    meta = pq.read_metadata(warm)
    chunk = meta.row_group(0).column(meta.schema.names.index("price"))
    offset = (chunk.dictionary_page_offset or chunk.data_page_offset) + chunk.total_compressed_size
    warm.chmod(0o644)
    data = bytearray(warm.read_bytes())
    data[offset - 1] ^= 0x01  # one bit of the last page's data
    warm.write_bytes(bytes(data))

    result = verify_job.execute_in_process(instance=instance, raise_on_error=False)
    evaluation = check_evaluations(result)["tick_archive_verified"]
    assert not evaluation.passed
    assert evaluation.metadata["problems"].value >= 1
    details = evaluation.metadata["details"].value
    warm_root = archive.with_name("archive-warm")
    assert f"WARM/{warm.relative_to(warm_root).as_posix()}" in details, details
    assert str(applied_chain) not in details and str(warm_root) not in details, details


def test_daily_verify_archive_schedule_when_defined_targets_the_verify_job():
    defs = build_definitions(SkewtapeHome(root="unused"))
    schedule = defs.resolve_schedule_def("daily_verify_tick_archive")
    assert schedule.job_name == "verify_tick_archive"
    assert schedule.cron_schedule == "0 6 * * *"


def test_archive_jobs_when_the_data_root_holds_no_archive_fail_naming_it_creating_nothing(
    tmp_path: Path, instance: dg.DagsterInstance
):
    root = tmp_path / "mistyped"
    definitions = build_definitions(SkewtapeHome(root=str(root)))
    runs = {
        "retier_ticks": {"partition_key": MONTHS[0], "run_config": retier_run_config(TO_WARM)},
        "prune_tick_versions": {
            "run_config": {"ops": {"prune_tick_versions_op": {"config": {"keep_last": 3}}}}
        },
    }
    for name, options in runs.items():
        job = definitions.resolve_job_def(name)
        result = job.execute_in_process(instance=instance, raise_on_error=False, **options)
        assert not result.success, name
        message = failure_message(result)
        assert "NotAnArchiveError): $SKEWTAPE_HOME/archive: " in message, message
        assert str(root) not in message, message  # never the machine's folders
    assert not root.exists()  # nothing created: no data root, no audit log, no lock


def test_retier_ticks_when_the_tiers_are_on_s3_records_where_each_day_now_lives(
    applied_chain: Path, instance: dg.DagsterInstance, s3_env, tmp_path
):
    archive = archive_days(applied_chain, DAYS[1:2])
    prefix = f"dagster-{tmp_path.name}"
    policy_file = tmp_path / "tiers.toml"
    policy_file.write_text(
        f'[warm]\nroot = "{s3_env.uri(prefix + "/warm")}"\n'
        f'[cold]\nroot = "{s3_env.uri(prefix + "/cold")}"\n'
    )
    settings = ArchiveSettings(tier_policy_file=str(policy_file))
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)), archive=settings)
    result = defs.resolve_job_def("retier_ticks").execute_in_process(
        partition_key="2026-10", run_config=retier_run_config(TO_WARM), instance=instance
    )

    assert result.success
    metadata = materializations(result, "tick_archive_tiers")["2026-10"]
    assert metadata["symbol_days_moved"] > 0
    assert list(metadata["files"]) and all(name.startswith("WARM/") for name in metadata["files"])
    policy = TierPolicy.load(policy_file)
    assert set(locate_all(archive, policy)) == {WARM}


def locate_all(archive: Path, policy: TierPolicy) -> list[str]:
    """The tier of every symbol-day the archive holds now."""
    table = run_query("SELECT DISTINCT tier FROM ticks", ArchiveCore(archive, policy=policy))
    return table.column("tier").to_pylist()

"""The instance on a real PostgreSQL server: the instance file, the delta sensor, a month
backfill and a tick backfill, each recorded in PostgreSQL."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import psycopg2
import pytest
import yaml
from dagster_postgres import PostgresEventLogStorage, PostgresRunStorage, PostgresScheduleStorage

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.mirror.sensors import delta_arrival_sensor
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.partitions import VENUES
from skewtape_pipeline.orchestration.ticks.venues import register_applied_venues
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols
from skewtape_pipeline_tests.orchestration.conftest import register_venues
from skewtape_pipeline_tests.scale_out.conftest import POSTGRES_INSTANCE_FILE
from skewtape_pipeline_tests.scale_out.servers import PG_PASSWORD

pytestmark = pytest.mark.slow  # starts servers

MONTHS = ("2026-09", "2026-10", "2026-11")


def test_postgres_instance_file_when_read_takes_every_setting_from_the_environment():
    settings = yaml.safe_load(POSTGRES_INSTANCE_FILE.read_text())["storage"]["postgres"]
    db = settings["postgres_db"]
    assert db.pop("scheme") == "postgresql+psycopg2"
    assert all(set(value) == {"env"} for value in db.values()), db
    assert PG_PASSWORD not in POSTGRES_INSTANCE_FILE.read_text()


def test_postgres_instance_when_loaded_stores_runs_events_and_schedules_in_postgres(
    postgres_instance: dg.DagsterInstance,
):
    assert isinstance(postgres_instance.run_storage, PostgresRunStorage)
    assert isinstance(postgres_instance.event_log_storage, PostgresEventLogStorage)
    assert isinstance(postgres_instance.schedule_storage, PostgresScheduleStorage)
    pools = postgres_instance.get_concurrency_config().pool_config
    assert (pools.pool_granularity.value, pools.default_pool_limit) == ("run", 1)


def run_tables(instance: dg.DagsterInstance) -> int:
    """Runs in the instance's PostgreSQL database, counted by SQL (not through Dagster)."""
    url = instance.run_storage.postgres_url.replace("postgresql+psycopg2", "postgresql")
    with psycopg2.connect(url) as connection, connection.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM runs")
        return cursor.fetchone()[0]


def test_delta_sensor_and_month_backfill_when_on_postgres_apply_every_month_in_order(
    sample_root: Path, postgres_instance: dg.DagsterInstance
):
    """The sensor ticks against the PostgreSQL instance; its requests, then the bootstrap month,
    run in order as a backfill launches them (one run per month)."""
    skewtape = SkewtapeHome(root=str(sample_root))
    defs = build_definitions(skewtape)
    context = dg.build_sensor_context(instance=postgres_instance, resources={"skewtape": skewtape})
    requested = delta_arrival_sensor(context).run_requests
    assert [r.partition_key for r in requested][:2] == ["2026-10", "2026-11"]
    job = defs.resolve_job_def("apply_month")
    runs = [("2026-09", {})] + [(r.partition_key, r.tags) for r in requested[:2]]
    for month, tags in runs:
        result = job.execute_in_process(instance=postgres_instance, partition_key=month, tags=tags)
        assert result.success, month
    assert postgres_instance.get_materialized_partitions(HISTORY_SNAPSHOT) == set(MONTHS)
    register_applied_venues(postgres_instance, sample_root / "history")  # as the venues sensor
    assert postgres_instance.get_dynamic_partitions(VENUES)
    assert run_tables(postgres_instance) == 3


def test_tick_backfill_when_on_postgres_records_every_venue_day(
    applied_chain: Path, postgres_instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(postgres_instance, new_symbols(history, month))
    venues = sorted(postgres_instance.get_dynamic_partitions(VENUES))
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)))
    result = defs.resolve_job_def("archive_ticks").execute_in_process(
        instance=postgres_instance,
        tags={
            "dagster/asset_partition_range_start": f"2026-11-04|{venues[0]}",
            "dagster/asset_partition_range_end": f"2026-11-05|{venues[-1]}",
        },
    )
    assert result.success
    expected = {f"{day}|{venue}" for day in ("2026-11-04", "2026-11-05") for venue in venues}
    assert postgres_instance.get_materialized_partitions(TICK_ARCHIVE) == expected
    reports = run_query(
        "SELECT count(*) AS n FROM tick_reports WHERE status = 'archived'",
        ArchiveCore(applied_chain / "archive"),
    ).to_pylist()[0]["n"]
    ticks = run_query(
        "SELECT count(DISTINCT (symbol, date)) AS n FROM ticks",
        ArchiveCore(applied_chain / "archive"),
    )
    assert reports == ticks.to_pylist()[0]["n"] > 0

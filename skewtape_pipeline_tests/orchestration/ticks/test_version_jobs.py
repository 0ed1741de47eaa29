"""Versions under Dagster: runs name the version they committed, the stats asset counts the
versions kept and the bytes only past versions hold, and ``prune_tick_versions`` (its schedule
off by default) prunes them."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from skewtape_pipeline.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.tier_assets import retier_run_config
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.orchestration.ticks.test_tier_assets import (
    DAYS,
    MONTHS,
    TO_COLD,
    TO_WARM,
    VIEW_ROWS,
    archive_days,
    failure_message,
    materializations,
)


def test_retier_and_prune_jobs_when_run_name_versions_and_prune_them(
    applied_chain: Path, instance: dg.DagsterInstance
):
    archive = archive_days(applied_chain, DAYS)
    rows = run_query(VIEW_ROWS, ArchiveCore(archive))
    compacted = VersionLog(archive).count()
    assert [v.operation for v in VersionLog(archive).list()] == ["compact"]
    assert VersionLog(archive).list()[0].sources  # the bundle each symbol-day came from
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)))
    retier_job = defs.resolve_job_def("retier_ticks")
    tags = {
        "dagster/asset_partition_range_start": MONTHS[0],
        "dagster/asset_partition_range_end": MONTHS[-1],
    }
    for as_of in (TO_WARM, TO_COLD):
        result = retier_job.execute_in_process(
            run_config=retier_run_config(as_of), instance=instance, tags=tags
        )
        assert result.success
        by_month = materializations(result, "tick_archive_tiers")
        assert {m["archive_version"] for m in by_month.values()} == {VersionLog(archive).count()}
    stats = materializations(result, "tick_archive_stats")[None]
    assert stats["versions_kept"] == compacted + 2 == stats["archive_version"]
    assert stats["past_version_bytes"] > 0  # the warm files only the second version reads

    prune = defs.resolve_job_def("prune_tick_versions")
    config = {"ops": {"prune_tick_versions_op": {"config": {"keep_last": 1}}}}
    assert prune.execute_in_process(run_config=config, instance=instance).success
    assert [v.version for v in VersionLog(archive).list()] == [compacted + 2]
    assert run_query(VIEW_ROWS, ArchiveCore(archive)).equals(rows)
    result = retier_job.execute_in_process(
        run_config=retier_run_config(TO_COLD), instance=instance, tags=tags
    )
    stats = materializations(result, "tick_archive_stats")[None]
    assert (stats["versions_kept"], stats["past_version_bytes"]) == (1, 0)


def test_prune_tick_versions_schedule_when_defined_is_off_by_default(applied_chain: Path):
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)))
    schedule = defs.resolve_schedule_def("weekly_prune_tick_versions")
    assert schedule.job_name == "prune_tick_versions"
    assert schedule.default_status == dg.DefaultScheduleStatus.STOPPED


def test_prune_tick_versions_job_when_no_rule_given_fails_naming_it(
    applied_chain: Path, instance: dg.DagsterInstance
):
    archive_days(applied_chain, DAYS)
    prune = build_definitions(SkewtapeHome(root=str(applied_chain))).resolve_job_def(
        "prune_tick_versions"
    )
    result = prune.execute_in_process(instance=instance, raise_on_error=False)
    assert not result.success
    assert "exactly one of keep_last and older_than" in failure_message(result)

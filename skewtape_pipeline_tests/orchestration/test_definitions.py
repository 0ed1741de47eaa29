"""The code location loads, and its job, pool and partition mapping are what the runs rely on."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.definitions import defs
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.orchestration.mirror.jobs import APPLY_POOL
from skewtape_pipeline.orchestration.mirror.sensors import delta_arrival_sensor
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import ARCHIVE_POOL, TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.partitions import VENUES
from skewtape_pipeline.orchestration.ticks.tier_assets import TICK_ARCHIVE_STATS, TICK_ARCHIVE_TIERS

REPO = Path(__file__).resolve().parents[2]


def test_definitions_when_loaded_validate_and_expose_jobs_sensors_schedule():
    dg.Definitions.validate_loadable(defs)
    assert defs.resolve_sensor_def("delta_arrival_sensor").job_name == "apply_month"
    assert defs.resolve_schedule_def("monthly_apply_schedule").job_name == "apply_month"
    assert defs.resolve_sensor_def("tick_corrections_sensor").job_name == "archive_ticks"
    assert defs.resolve_sensor_def("tick_venues_sensor").default_status.value == "RUNNING"
    assert defs.resolve_schedule_def("daily_retier_schedule").job_name == "retier_ticks"
    retier_job = defs.resolve_job_def("retier_ticks")
    assert retier_job.asset_layer.executable_asset_keys == {TICK_ARCHIVE_TIERS, TICK_ARCHIVE_STATS}


def test_definitions_when_loaded_every_archive_writer_is_in_the_archive_pool():
    for key in (TICK_ARCHIVE_TIERS, TICK_ARCHIVE_STATS):
        assert defs.resolve_assets_def(key).op.pool == ARCHIVE_POOL
    tick_graph = defs.resolve_assets_def(TICK_ARCHIVE).node_def
    assert {op.pool for op in tick_graph.iterate_op_defs()} == {ARCHIVE_POOL}
    assert ARCHIVE_POOL != APPLY_POOL


def test_definitions_when_loaded_tick_archive_depends_on_the_month_of_its_day():
    asset_graph = defs.resolve_asset_graph()
    assert asset_graph.get(TICK_ARCHIVE).parent_keys == {HISTORY_SNAPSHOT}
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions("venues", ["kalshi"])
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            upstream = asset_graph.get_parent_partition_keys_for_child(
                "2026-10-05|kalshi", HISTORY_SNAPSHOT, TICK_ARCHIVE
            )
    assert set(upstream.partitions_subset.get_partition_keys()) == {"2026-10"}


def test_definitions_when_loaded_every_apply_op_is_in_the_apply_pool():
    job = defs.resolve_job_def("apply_month")
    ops = [
        node.definition
        for node in job.graph.node_dict["history_snapshot"].definition.node_dict.values()
    ]
    assert [op.name for op in ops] == [
        "fetch_delta",
        "verify_delta",
        "apply_file_ops",
        "merge_tables",
        "publish_snapshot",
        "verify_month_snapshot",
    ]
    assert {op.pool for op in ops} == {APPLY_POOL}


def test_definitions_when_loaded_each_month_depends_on_the_previous_month():
    asset_graph = defs.resolve_asset_graph()
    node = asset_graph.get(HISTORY_SNAPSHOT)
    assert node.parent_keys == {HISTORY_SNAPSHOT}
    mapping = asset_graph.get_partition_mapping(HISTORY_SNAPSHOT, HISTORY_SNAPSHOT)
    assert (mapping.start_offset, mapping.end_offset) == (-1, -1)


def test_dagster_yaml_when_loaded_limits_pools_to_one_run_and_disables_telemetry(tmp_path: Path):
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        pools = instance.get_concurrency_config().pool_config
        assert (pools.pool_granularity.value, pools.default_pool_limit) == ("run", 1)
        assert instance.telemetry_enabled is False


def test_dagster_yaml_when_loaded_from_a_new_dagster_home_turns_off_the_community_pop_up(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    """The UI shows Dagster's "Join the community" pop-up when the instance's ``nux_enabled``
    says so (and DAGSTER_HOME/.nux does not record it as seen): the project's dagster.yaml,
    loaded from DAGSTER_HOME as the webserver and the daemon load it, turns it off."""
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.setenv("DAGSTER_HOME", str(tmp_path))
    with dg.DagsterInstance.get() as instance:
        assert not instance.is_ephemeral
        assert instance.nux_enabled is False


def test_dagster_definitions_validate_when_run_on_the_workspace_succeeds(tmp_path: Path):
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path)}
    env.pop("SKEWTAPE_HOME", None)
    command = [sys.executable, "-m", "dagster", "definitions", "validate"]
    completed = subprocess.run(
        [*command, "-w", str(REPO / "workspace.yaml")],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr


def test_definitions_when_loaded_tiers_follow_the_archive_and_each_month_reads_its_days():
    asset_graph = defs.resolve_asset_graph()
    assert asset_graph.get(TICK_ARCHIVE_TIERS).parent_keys == {TICK_ARCHIVE}
    assert asset_graph.get(TICK_ARCHIVE_STATS).parent_keys == {TICK_ARCHIVE, TICK_ARCHIVE_TIERS}
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(VENUES, ["kalshi", "polymarket"])
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            upstream = asset_graph.get_parent_partition_keys_for_child(
                "2026-10", TICK_ARCHIVE, TICK_ARCHIVE_TIERS
            )
            downstream = asset_graph.get_child_partition_keys_of_parent(
                "2026-10-05|kalshi", TICK_ARCHIVE, TICK_ARCHIVE_TIERS
            )
    keys = set(upstream.partitions_subset.get_partition_keys())
    assert (
        len(keys) == 31 * 2 and "2026-10-31|polymarket" in keys and "2026-11-01|kalshi" not in keys
    )
    assert downstream == ["2026-10"]


HOME_SECRET = "Pw7sEcReT4q"


@pytest.mark.parametrize(
    "home", [f"s3://KEY:{HOME_SECRET}@bucket/x", "http://host/x"], ids=["s3", "http"]
)
def test_definitions_when_skewtape_home_is_a_url_refuse_it_naming_the_variable_creating_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, home: str
):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("SKEWTAPE_HOME", home)
    scheme = home.partition(":")[0]
    said = f"SkewtapeHome.root (SKEWTAPE_HOME) '{scheme}://"
    resources = {"skewtape": SkewtapeHome(root=dg.EnvVar("SKEWTAPE_HOME"))}
    with (
        dg.build_sensor_context(resources=resources) as context,
        pytest.raises(ConfigError, match=re.escape(said)) as refused,
    ):
        delta_arrival_sensor(context)
    assert "expected a local folder (the data root)" in str(refused.value)
    assert HOME_SECRET not in str(refused.value)
    with dg.DagsterInstance.ephemeral() as instance:
        instance.add_dynamic_partitions(VENUES, ["kalshi"])
        for job, options in JOB_RUNS.items():
            result = defs.resolve_job_def(job).execute_in_process(
                instance=instance, raise_on_error=False, **options
            )
            assert not result.success
            failures = [e for e in result.all_events if e.is_step_failure]
            assert failures, job
            for failure in failures:  # the reason first, as a refusal: no stack trace
                refused = failure.event_specific_data.user_failure_data
                assert refused is not None, (job, failure.step_key)
                assert "refused (ConfigError): " + said in refused.description, job
                error = failure.event_specific_data.error.to_string()
                assert HOME_SECRET not in error + refused.description
    assert list(tmp_path.iterdir()) == []  # no folder named after the scheme


JOB_RUNS = {
    "apply_month": {"partition_key": "2026-10"},
    "catch_up_months": {},
    "archive_ticks": {"partition_key": "2026-10-05|kalshi"},
    "retier_ticks": {"partition_key": "2026-10"},
    "verify_tick_archive": {},
    "prune_tick_versions": {
        "run_config": {"ops": {"prune_tick_versions_op": {"config": {"keep_last": 1}}}}
    },
}
"""Every job a user runs from the UI, with what one run of it needs."""


def test_job_runs_when_listed_cover_every_job():
    jobs = {job.name for job in defs.resolve_all_job_defs()} - {"__ASSET_JOB"}
    assert jobs == set(JOB_RUNS)

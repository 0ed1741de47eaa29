"""End to end, as a user drives it from the UI: a real ``dagster dev`` (webserver and daemon)
backfills the first sample months over GraphQL, then its delta sensor, switched on, picks up the
next month's delta when the folder is dropped into ``deltas/`` and starts exactly one run.

The months applied are checked against the sample publisher's own full snapshots (the oracle).
"""

from __future__ import annotations

import os
from itertools import pairwise
from pathlib import Path
from typing import Any

import pytest

from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot
from skewtape_pipeline_tests.orchestration.dagster_server import (
    FINISHED,
    LOCATION,
    REPOSITORY,
    DagsterDev,
    running_dagster_dev,
    runs_tagged,
)

BACKFILLED = ("2026-09", "2026-10")
"""Months the backfill applies: the bootstrap month and the first delta."""
DROPPED = "2026-11"
"""The month whose delta arrives while the sensor is on (held out of ``deltas/`` until then)."""
SENSOR = "delta_arrival_sensor"

BACKFILL_TAG = "dagster/backfill"
SENSOR_TAG = "dagster/sensor_name"
PARTITION_TAG = "dagster/partition"

BACKFILL_TIMEOUT = 180.0
"""The backfill daemon looks at a backfill about every 30 s and requests one month per look (a
month waits for the one before it), so two months take two or three looks plus their runs."""
TICK_TIMEOUT = 100.0
"""The sensor ticks at most every 30 s (its minimum interval)."""
RUN_TIMEOUT = 120.0

LAUNCH_BACKFILL = """
mutation ($params: LaunchBackfillParams!) {
  launchPartitionBackfill(backfillParams: $params) {
    __typename
    ... on LaunchBackfillSuccess { backfillId }
    ... on Error { message }
  }
}
"""

BACKFILL_STATUS = """
query ($id: String!) {
  partitionBackfillOrError(backfillId: $id) {
    __typename
    ... on PartitionBackfill { status }
    ... on Error { message }
  }
}
"""

START_SENSOR = """
mutation ($selector: SensorSelector!) {
  startSensor(sensorSelector: $selector) {
    __typename
    ... on Sensor { sensorState { status } }
    ... on Error { message }
  }
}
"""

SENSOR_TICKS = """
query ($selector: SensorSelector!) {
  sensorOrError(sensorSelector: $selector) {
    __typename
    ... on Sensor {
      sensorState {
        ticks(limit: 50) {
          tickId status timestamp runIds skipReason error { message }
          logEvents { events { message } }
        }
      }
    }
    ... on Error { message }
  }
}
"""

MATERIALIZATIONS = """
query ($partitions: [String!]) {
  assetOrError(assetKey: {path: ["history_snapshot"]}) {
    __typename
    ... on Asset { assetMaterializations(partitions: $partitions) { partition runId } }
  }
}
"""

SENSOR_SELECTOR = {
    "repositoryLocationName": LOCATION,
    "repositoryName": REPOSITORY,
    "sensorName": SENSOR,
}


@pytest.mark.slow
def test_dagster_dev_when_months_backfilled_then_delta_dropped_applies_in_order_and_runs_once(
    sample_root: Path, published_full_snapshots: Path, tmp_path: Path
):
    """Backfill 2026-09..10 (the UI's mutation): each month's run starts after the previous one
    finished. Sensor on, 2026-11's delta moved into deltas/: one tick starts one run for it,
    the ticks before and after start none. Every month then equals the published snapshot."""
    deltas = sample_root / "deltas"
    held = hold_back_deltas(deltas, tmp_path / "incoming", after=BACKFILLED[-1])
    workdir = tmp_path / "server"
    workdir.mkdir()
    with running_dagster_dev(sample_root, workdir) as server:
        backfill_id = launch_backfill(server, BACKFILLED)
        backfill_runs = wait_for_runs(server, BACKFILL_TAG, backfill_id, len(BACKFILLED))
        assert_applied_in_order(backfill_runs, BACKFILLED)

        start_sensor(server)
        before = server.wait_for(lambda: finished_ticks(server), TICK_TIMEOUT, "a sensor tick")
        os.rename(held / DROPPED, deltas / DROPPED)  # the whole, complete folder appears at once
        server.wait_for(
            lambda: len(finished_ticks(server)) >= len(before) + 2,
            2 * TICK_TIMEOUT,
            "the tick after the drop and one more",
        )
        assert_one_run_from_one_tick(finished_ticks(server), dropped_after=before[-1])
        assert_skip_reasons_logged(before)
        (sensor_run,) = wait_for_runs(server, SENSOR_TAG, SENSOR, 1)
        assert sensor_run["tags"][PARTITION_TAG] == DROPPED

        expected_runs = {run["tags"][PARTITION_TAG]: run["runId"] for run in backfill_runs}
        expected_runs[DROPPED] = sensor_run["runId"]
        assert materialized_by(server, [*BACKFILLED, DROPPED]) == expected_runs
        assert wait_for_backfill_done(server, backfill_id) == "COMPLETED_SUCCESS"
        assert len(runs_tagged(server, SENSOR_TAG, SENSOR)) == 1, "a later tick started a run"
        assert len(runs_tagged(server, PARTITION_TAG, DROPPED)) == 1, f"{DROPPED} ran twice"

    for month in (*BACKFILLED, DROPPED):
        snapshot = sample_root / "history" / month
        assert verify_snapshot(snapshot, full=True, save_cache=False).problems == []
        assert_same_snapshot(snapshot, published_full_snapshots / month)


def hold_back_deltas(deltas: Path, holding: Path, *, after: str) -> Path:
    """Move every delta of a month after ``after`` from ``deltas`` into ``holding``."""
    holding.mkdir()
    for folder in sorted(deltas.iterdir()):
        if folder.name > after:
            os.rename(folder, holding / folder.name)
    assert (holding / DROPPED).is_dir(), "the sample has no delta for the month to drop"
    return holding


def launch_backfill(server: DagsterDev, months: tuple[str, ...]) -> str:
    """Launch a backfill of the history snapshot's ``months`` the way the UI does; its id."""
    params = {
        "assetSelection": [{"path": ["history_snapshot"]}],
        "partitionNames": list(months),
        "fromFailure": False,
    }
    result = server.graphql(LAUNCH_BACKFILL, {"params": params})["launchPartitionBackfill"]
    assert result["__typename"] == "LaunchBackfillSuccess", result
    return result["backfillId"]


def wait_for_runs(server: DagsterDev, key: str, value: str, count: int) -> list[dict[str, Any]]:
    """Wait until ``count`` runs tagged ``key=value`` have finished; all must have succeeded."""

    def finished() -> list[dict[str, Any]]:
        runs = runs_tagged(server, key, value)
        done = len(runs) >= count and all(run["status"] in FINISHED for run in runs)
        return runs if done else []

    runs = server.wait_for(finished, BACKFILL_TIMEOUT, f"{count} finished run(s) of {key}={value}")
    assert len(runs) == count, runs
    failed = [run for run in runs if run["status"] != "SUCCESS"]
    assert not failed, f"runs did not succeed: {failed}\n{server.log_tail()}"
    return runs


def assert_applied_in_order(runs: list[dict[str, Any]], months: tuple[str, ...]) -> None:
    """One run per month, and each month's run started after the previous month's finished."""
    by_month = {run["tags"][PARTITION_TAG]: run for run in runs}
    assert sorted(by_month) == sorted(months), runs
    for earlier, later in pairwise(months):
        ended, started = by_month[earlier]["endTime"], by_month[later]["startTime"]
        assert started >= ended, f"{later}'s run started before {earlier}'s run finished"


def start_sensor(server: DagsterDev) -> None:
    result = server.graphql(START_SENSOR, {"selector": SENSOR_SELECTOR})["startSensor"]
    assert result["__typename"] == "Sensor", result
    assert result["sensorState"]["status"] == "RUNNING", result


def finished_ticks(server: DagsterDev) -> list[dict[str, Any]]:
    """The sensor's finished ticks, oldest first; AssertionError if one of them failed."""
    data = server.graphql(SENSOR_TICKS, {"selector": SENSOR_SELECTOR})["sensorOrError"]
    assert data["__typename"] == "Sensor", data
    ticks = [t for t in data["sensorState"]["ticks"] if t["status"] != "STARTED"]
    failed = [t for t in ticks if t["status"] == "FAILURE"]
    assert not failed, f"sensor ticks failed: {failed}"
    return sorted(ticks, key=lambda tick: tick["timestamp"])


def assert_one_run_from_one_tick(ticks: list[dict[str, Any]], *, dropped_after: dict) -> None:
    """Exactly one tick requested runs, exactly one run, and it is the first tick after the
    drop; every tick before it and at least one after it skipped."""
    requesting = [i for i, tick in enumerate(ticks) if tick["runIds"]]
    assert len(requesting) == 1, ticks
    (index,) = requesting
    assert len(ticks[index]["runIds"]) == 1, ticks[index]
    assert ticks[index - 1]["tickId"] == dropped_after["tickId"], ticks
    assert all(tick["status"] == "SKIPPED" for tick in ticks[:index]), ticks
    later = ticks[index + 1 :]
    assert later and all(tick["status"] == "SKIPPED" for tick in later), ticks


def assert_skip_reasons_logged(ticks: list[dict[str, Any]]) -> None:
    """Every skipped tick has its skip reason in its logs (the UI's tick dialog shows them)."""
    for tick in ticks:
        logged = [event["message"] for event in tick["logEvents"]["events"]]
        assert tick["skipReason"] and f"skipped: {tick['skipReason']}" in logged, tick


def materialized_by(server: DagsterDev, months: list[str]) -> dict[str, str]:
    """The run id of each month's materialization; AssertionError when one has several."""
    data = server.graphql(MATERIALIZATIONS, {"partitions": months})["assetOrError"]
    assert data["__typename"] == "Asset", data
    events = data["assetMaterializations"]
    assert len(events) == len({event["partition"] for event in events}), events
    return {event["partition"]: event["runId"] for event in events}


def wait_for_backfill_done(server: DagsterDev, backfill_id: str) -> str:
    def status() -> str | None:
        data = server.graphql(BACKFILL_STATUS, {"id": backfill_id})["partitionBackfillOrError"]
        assert data["__typename"] == "PartitionBackfill", data
        return None if data["status"] == "REQUESTED" else data["status"]

    return server.wait_for(status, BACKFILL_TIMEOUT, f"backfill {backfill_id} to finish")

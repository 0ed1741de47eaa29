"""End to end: a real ``dagster dev`` serves the code location; a month's run is launched over
GraphQL and its result is checked on disk and in the materialization's metadata."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster_graphql import DagsterGraphQLClient

from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.orchestration.dagster_server import (
    FINISHED,
    LOCATION,
    DagsterDev,
    running_dagster_dev,
)

RUN_TIMEOUT = 90.0

RUN_TIMES = """
query ($runId: ID!) {
  runOrError(runId: $runId) { ... on Run { stepStats { startTime endTime } } }
}
"""

MATERIALIZATIONS = """
query ($partition: String!) {
  assetOrError(assetKey: {path: ["history_snapshot"]}) {
    ... on Asset {
      assetMaterializations(partitions: [$partition]) {
        runId
        partition
        metadataEntries {
          label
          __typename
          ... on TextMetadataEntry { text }
          ... on IntMetadataEntry { intValue }
          ... on PathMetadataEntry { path }
          ... on BoolMetadataEntry { boolValue }
        }
      }
    }
  }
}
"""


@pytest.fixture
def dagster_dev(sample_root: Path, tmp_path: Path) -> Iterator[DagsterDev]:
    """``dagster dev`` over a copy of the sample chain; stopped by its pid."""
    with running_dagster_dev(sample_root, tmp_path) as server:
        yield server


def metadata_by_label(entries: list[dict]) -> dict[str, object]:
    values: dict[str, object] = {}
    for entry in entries:
        for field in ("text", "intValue", "path", "boolValue"):
            if field in entry:
                values[entry["label"]] = entry[field]
    return values


@pytest.mark.slow
@pytest.mark.filterwarnings("ignore:Using variable_values:DeprecationWarning")
def test_dagster_dev_when_month_launched_twice_over_graphql_applies_once_and_records_metadata(
    dagster_dev: DagsterDev, sample_root: Path
):
    """Two runs of one month (as the schedule and the sensor may both ask): the pool runs them
    one after the other, the first applies the delta, the second finds it applied."""
    server = dagster_dev
    client = DagsterGraphQLClient("127.0.0.1", port_number=server.port)
    run_ids = [
        client.submit_job_execution(
            "apply_month", repository_location_name=LOCATION, tags={"dagster/partition": "2026-10"}
        )
        for _ in range(2)
    ]
    statuses: dict[str, str] = {}

    def finished() -> bool:
        statuses.update({run_id: client.get_run_status(run_id).value for run_id in run_ids})
        return all(s in FINISHED for s in statuses.values())

    server.wait_for(finished, RUN_TIMEOUT, f"runs {run_ids}")
    assert set(statuses.values()) == {"SUCCESS"}, server.log_tail()
    first, second = sorted(run_times(server, run_ids), key=lambda times: times[0])
    assert first[1] <= second[0], "the two applies overlapped; the pool should serialize them"

    snapshot = sample_root / "history" / "2026-10"
    delta = json.loads((sample_root / "deltas" / "2026-10" / "manifest.json").read_text())
    assert verify_snapshot(snapshot).bundle_id == delta["next"]["bundle_id"]
    assert read_snapshot(snapshot)[2] == delta["next"]["manifest_sha256"]

    data = server.graphql(MATERIALIZATIONS, {"partition": "2026-10"})
    materializations = data["assetOrError"]["assetMaterializations"]
    assert sorted(m["runId"] for m in materializations) == sorted(run_ids)
    by_run = {m["runId"]: metadata_by_label(m["metadataEntries"]) for m in materializations}
    applied = [md for md in by_run.values() if md["already_applied"] is False]
    unchanged = [md for md in by_run.values() if md["already_applied"] is True]
    assert len(applied) == len(unchanged) == 1
    metadata = applied[0]
    assert metadata["next_bundle_id"] == delta["next"]["bundle_id"]
    assert metadata["parent_bundle_id"] == delta["parent"]["bundle_id"]
    assert metadata["snapshot"] == "$SKEWTAPE_HOME/history/2026-10"  # not the machine's folders
    changed = sum(int(metadata[k]) for k in ("files_added", "files_replaced", "files_deleted"))
    assert changed > 0
    # an already-applied month records no rows of zeros
    assert not {"files_added", "files_replaced", "files_deleted"} & set(unchanged[0])
    assert unchanged[0]["next_bundle_id"] == delta["next"]["bundle_id"]


def run_times(server: DagsterDev, run_ids: list[str]) -> list[tuple[float, float]]:
    """(first step start, last step end) of each run: the span in which it holds the pool."""
    times = []
    for run_id in run_ids:
        steps = server.graphql(RUN_TIMES, {"runId": run_id})["runOrError"]["stepStats"]
        times.append((min(s["startTime"] for s in steps), max(s["endTime"] for s in steps)))
    return times

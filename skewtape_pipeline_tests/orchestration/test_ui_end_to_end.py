"""End to end: a real ``dagster dev`` serves the code location; a month's run is launched over
GraphQL and its result is checked on disk and in the materialization's metadata."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest
from dagster_graphql import DagsterGraphQLClient

from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.verify import verify_snapshot

REPO = Path(__file__).resolve().parents[2]
LOCATION = "skewtape_pipeline"
START_TIMEOUT = 90.0
RUN_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0

LOCATION_STATUS = """
query {
  workspaceOrError {
    __typename
    ... on Workspace {
      locationEntries { name loadStatus locationOrLoadError { __typename } }
    }
  }
}
"""

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


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(port: int, query: str, variables: dict | None = None) -> dict:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read())["data"]


def location_loaded(port: int) -> bool:
    try:
        data = graphql(port, LOCATION_STATUS)
    except (urllib.error.URLError, ConnectionError, TimeoutError, KeyError):
        return False
    entries = data["workspaceOrError"].get("locationEntries", [])
    for entry in entries:
        if entry["name"] == LOCATION and entry["loadStatus"] == "LOADED":
            kind = entry["locationOrLoadError"]["__typename"]
            if kind != "RepositoryLocation":
                raise AssertionError(f"the code location failed to load: {entry}")
            return True
    return False


def wait_for(condition, timeout: float, what: str, log: Path) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return
        time.sleep(0.5)
    raise AssertionError(f"timed out waiting for {what}; server log:\n{log.read_text()[-4000:]}")


@pytest.fixture
def dagster_dev(sample_root: Path, tmp_path: Path) -> Iterator[tuple[int, Path]]:
    """``dagster dev`` on a free loopback port with a temporary DAGSTER_HOME; stopped by pid."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    port = free_loopback_port()
    log = tmp_path / "dagster-dev.log"
    env = {**os.environ, "DAGSTER_HOME": str(home), "SKEWTAPE_HOME": str(sample_root)}
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(REPO / "workspace.yaml")]
    command += ["-h", "127.0.0.1", "-p", str(port)]
    with open(log, "wb") as output:
        server = subprocess.Popen(
            command,
            cwd=tmp_path,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_interrupt_handling,
        )
    try:
        wait_for(lambda: location_loaded(port), START_TIMEOUT, "the code location", log)
        yield port, log
    finally:
        stop_server(server)


def default_interrupt_handling() -> None:
    """In the child: SIGINT and SIGTERM back to their defaults, even if this runner ignores them
    (a background job's do), so ``dagster dev`` installs its own graceful shutdown handlers."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_server(server: subprocess.Popen) -> None:
    """Stop ``dagster dev`` by its pid (SIGINT, its graceful shutdown), then make sure nothing
    it started is left in its session (the process group whose id is that pid)."""
    if server.poll() is None:
        server.send_signal(signal.SIGINT)
        try:
            server.wait(timeout=STOP_TIMEOUT)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait(timeout=10)
    deadline = time.monotonic() + 10
    while group_alive(server.pid) and time.monotonic() < deadline:
        time.sleep(0.2)
    if group_alive(server.pid):
        os.killpg(server.pid, signal.SIGKILL)


def group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    return True


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
    dagster_dev: tuple[int, Path], sample_root: Path
):
    """Two runs of one month (as the schedule and the sensor may both ask): the pool runs them
    one after the other, the first applies the delta, the second finds it applied."""
    port, log = dagster_dev
    client = DagsterGraphQLClient("127.0.0.1", port_number=port)
    run_ids = [
        client.submit_job_execution(
            "apply_month", repository_location_name=LOCATION, tags={"dagster/partition": "2026-10"}
        )
        for _ in range(2)
    ]
    statuses: dict[str, str] = {}

    def finished() -> bool:
        statuses.update({run_id: client.get_run_status(run_id).value for run_id in run_ids})
        return all(s in ("SUCCESS", "FAILURE", "CANCELED") for s in statuses.values())

    wait_for(finished, RUN_TIMEOUT, f"runs {run_ids}", log)
    assert set(statuses.values()) == {"SUCCESS"}, log.read_text()[-4000:]
    first, second = sorted(run_times(port, run_ids), key=lambda times: times[0])
    assert first[1] <= second[0], "the two applies overlapped; the pool should serialize them"

    snapshot = sample_root / "history" / "2026-10"
    delta = json.loads((sample_root / "deltas" / "2026-10" / "manifest.json").read_text())
    assert verify_snapshot(snapshot).bundle_id == delta["next"]["bundle_id"]
    assert read_snapshot(snapshot)[2] == delta["next"]["manifest_sha256"]

    data = graphql(port, MATERIALIZATIONS, {"partition": "2026-10"})
    materializations = data["assetOrError"]["assetMaterializations"]
    assert sorted(m["runId"] for m in materializations) == sorted(run_ids)
    by_run = {m["runId"]: metadata_by_label(m["metadataEntries"]) for m in materializations}
    applied = [md for md in by_run.values() if md["already_applied"] is False]
    unchanged = [md for md in by_run.values() if md["already_applied"] is True]
    assert len(applied) == len(unchanged) == 1
    metadata = applied[0]
    assert metadata["next_bundle_id"] == delta["next"]["bundle_id"]
    assert metadata["parent_bundle_id"] == delta["parent"]["bundle_id"]
    assert Path(str(metadata["snapshot"])) == snapshot
    changed = sum(int(metadata[k]) for k in ("files_added", "files_replaced", "files_deleted"))
    assert changed > 0
    assert sum(int(unchanged[0][k]) for k in ("files_added", "files_replaced")) == 0


def run_times(port: int, run_ids: list[str]) -> list[tuple[float, float]]:
    """(first step start, last step end) of each run: the span in which it holds the pool."""
    times = []
    for run_id in run_ids:
        steps = graphql(port, RUN_TIMES, {"runId": run_id})["runOrError"]["stepStats"]
        times.append((min(s["startTime"] for s in steps), max(s["endTime"] for s in steps)))
    return times

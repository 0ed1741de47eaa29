"""A real ``dagster dev`` for end-to-end tests: started on a free loopback port with a temporary
DAGSTER_HOME, queried over raw GraphQL, and stopped by its own process id.

``dagster dev`` runs the webserver, a code server and the daemon (run queue, sensors, schedules,
backfills), so what a test launches over GraphQL runs the way it does behind the UI.
"""

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
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

REPO = Path(__file__).resolve().parents[2]
LOCATION = "skewtape_pipeline"
REPOSITORY = "__repository__"
"""The repository name of a code location made of one ``Definitions``."""
START_TIMEOUT = 90.0
STOP_TIMEOUT = 20.0
POLL_SECONDS = 0.5

T = TypeVar("T")

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


@dataclass(frozen=True)
class DagsterDev:
    """A running ``dagster dev``: its port, its DAGSTER_HOME and the file its output goes to."""

    port: int
    home: Path
    log: Path

    def graphql(self, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
        """The ``data`` of a GraphQL request; AssertionError naming the errors when it has any."""
        return graphql(self.port, query, variables)

    def wait_for(self, condition: Callable[[], T], timeout: float, what: str) -> T:
        """Poll ``condition`` until it returns something truthy, and return that; on timeout,
        AssertionError naming ``what`` with the end of the server's log."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            result = condition()
            if result:
                return result
            time.sleep(POLL_SECONDS)
        raise AssertionError(
            f"timed out after {timeout:.0f} s waiting for {what}\n{self.log_tail()}"
        )

    def log_tail(self, chars: int = 4000) -> str:
        return f"server log (last {chars} characters):\n{self.log.read_text()[-chars:]}"


def free_loopback_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def graphql(port: int, query: str, variables: dict[str, Any] | None = None) -> dict[str, Any]:
    """POST ``query`` to the server's /graphql; its ``data``, or AssertionError with its errors."""
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/graphql",
        data=json.dumps({"query": query, "variables": variables or {}}).encode(),
        headers={"Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            body = json.loads(response.read())
    except urllib.error.HTTPError as error:
        raise AssertionError(f"GraphQL HTTP {error.code}: {error.read()[:2000]!r}") from error
    if body.get("errors"):
        raise AssertionError(f"GraphQL errors: {body['errors']}")
    return body["data"]


def location_loaded(port: int) -> bool:
    """True once the code location has loaded; AssertionError when it failed to load."""
    try:
        data = graphql(port, LOCATION_STATUS)
    except (urllib.error.URLError, ConnectionError, TimeoutError):
        return False
    entries = data["workspaceOrError"].get("locationEntries", [])
    for entry in entries:
        if entry["name"] == LOCATION and entry["loadStatus"] == "LOADED":
            kind = entry["locationOrLoadError"]["__typename"]
            if kind != "RepositoryLocation":
                raise AssertionError(f"the code location failed to load: {entry}")
            return True
    return False


@contextmanager
def running_dagster_dev(
    data_root: Path, workdir: Path, *, instance_settings: str = ""
) -> Iterator[DagsterDev]:
    """Run ``dagster dev`` over ``data_root`` (SKEWTAPE_HOME) until the block ends.

    DAGSTER_HOME is a new folder in ``workdir`` holding the project's dagster.yaml followed by
    ``instance_settings`` (YAML for this server only). Yields once the code location has loaded;
    on exit, stops the server by its pid and kills whatever it left in its process group.
    """
    home = workdir / "dagster_home"
    home.mkdir()
    shutil.copy(REPO / "dagster.yaml", home / "dagster.yaml")
    if instance_settings:
        with open(home / "dagster.yaml", "a") as settings:
            settings.write("\n" + instance_settings)
    server = DagsterDev(port=free_loopback_port(), home=home, log=workdir / "dagster-dev.log")
    env = {**os.environ, "DAGSTER_HOME": str(home), "SKEWTAPE_HOME": str(data_root)}
    command = [sys.executable, "-m", "dagster", "dev", "-w", str(REPO / "workspace.yaml")]
    command += ["-h", "127.0.0.1", "-p", str(server.port)]
    with open(server.log, "wb") as output:
        process = subprocess.Popen(
            command,
            cwd=workdir,
            env=env,
            stdout=output,
            stderr=subprocess.STDOUT,
            start_new_session=True,
            preexec_fn=default_interrupt_handling,
        )
    try:
        server.wait_for(lambda: location_loaded(server.port), START_TIMEOUT, "the code location")
        yield server
    finally:
        stop_server(process)


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


# --- runs ------------------------------------------------------------------------------------

RUNS_BY_TAG = """
query ($key: String!, $value: String!) {
  runsOrError(filter: {tags: [{key: $key, value: $value}]}) {
    __typename
    ... on Runs {
      results { runId status startTime endTime tags { key value } }
    }
    ... on PythonError { message }
  }
}
"""

FINISHED = frozenset({"SUCCESS", "FAILURE", "CANCELED"})


def runs_tagged(server: DagsterDev, key: str, value: str) -> list[dict[str, Any]]:
    """Every run whose tag ``key`` is ``value``, each with its tags as a dict."""
    data = server.graphql(RUNS_BY_TAG, {"key": key, "value": value})["runsOrError"]
    assert data["__typename"] == "Runs", data
    return [{**run, "tags": {t["key"]: t["value"] for t in run["tags"]}} for run in data["results"]]

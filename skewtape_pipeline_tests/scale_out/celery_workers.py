"""Celery workers of the tests: real ``celery worker`` processes started as the docs say
(:data:`WORKER_COMMAND`: the app ``skewtape_pipeline.celery_worker``, ``-P threads``: the prefork
pool refuses steps that start processes) on the tests' broker, with the settings of
``deploy/celery/celery.yaml`` (``SKEWTAPE_CELERY_SETTINGS``: a copy with a short visibility
timeout)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from celery import Celery

from skewtape_pipeline.celery_definitions import SETTINGS_VARIABLE

REPO = Path(__file__).resolve().parents[2]
CELERY_FILE = REPO / "deploy" / "celery" / "celery.yaml"
WORKER_COMMAND = "celery -A skewtape_pipeline.celery_worker worker -P threads"
"""How docs/deployment.md starts a worker (the tests add a name, a log level and quiet startup)."""
VISIBILITY_TIMEOUT = 5
"""Seconds before a dead worker's task goes to another worker, in the tests."""


@dataclass
class Workers:
    """Running worker processes by name (``<name>@127.0.0.1`` to Celery)."""

    broker_url: str
    processes: dict[str, subprocess.Popen] = field(default_factory=dict)
    logs: dict[str, Path] = field(default_factory=dict)

    def hostname(self, name: str) -> str:
        return f"{name}@127.0.0.1"

    def kill(self, name: str) -> None:
        """SIGKILL a worker: no shutdown, no acknowledgement, as a lost machine."""
        process = self.processes[name]
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)

    def stop(self) -> None:
        for process in self.processes.values():
            if process.poll() is None:
                process.terminate()
        for process in self.processes.values():
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=30)


def worker_config_file(folder: Path, visibility_timeout: int = VISIBILITY_TIMEOUT) -> Path:
    """The shipped worker settings with ``visibility_timeout`` (short by default)."""
    settings = yaml.safe_load(CELERY_FILE.read_text())
    source = settings["execution"]["config"]["config_source"]
    source["broker_transport_options"]["visibility_timeout"] = visibility_timeout
    path = folder / "celery.yaml"
    path.write_text(yaml.safe_dump(settings))
    return path


def start_workers(
    names: list[str],
    folder: Path,
    *,
    broker_url: str,
    includes: dict[str, str] | None = None,
    visibility_timeout: int = VISIBILITY_TIMEOUT,
) -> Workers:
    """Start one worker per name as the docs do (one thread each: the shipped settings'
    concurrency, checked in its banner); wait until each answers a ping.

    The environment (DAGSTER_HOME, SKEWTAPE_HOME, the broker and PostgreSQL variables) is this
    process's. ``includes`` maps a worker name to a module it imports at start. The default
    ``visibility_timeout`` is the tests' short one; steps longer than it would be redelivered
    to a second worker while the first still runs them (a benchmark passes the shipped hour).
    """
    settings = worker_config_file(folder, visibility_timeout)
    env = {**os.environ, "PYTHONPATH": str(REPO), SETTINGS_VARIABLE: str(settings)}
    celery = Path(sys.executable).parent / "celery"
    workers = Workers(broker_url)
    for name in names:
        command = [
            str(celery), *WORKER_COMMAND.split()[1:],
            "-n", workers.hostname(name), "-l", "INFO", "--without-gossip", "--without-mingle",
        ]  # fmt: skip
        if includes and name in includes:
            command += ["-I", includes[name]]
        log = folder / f"{name}.log"
        workers.logs[name] = log
        with open(log, "wb") as out:
            workers.processes[name] = subprocess.Popen(
                command, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=folder
            )
    try:
        _wait_for_ping(workers, names)
        for name in names:
            assert "concurrency: 1 (thread)" in workers.logs[name].read_text(), name
    except BaseException:
        workers.stop()
        raise
    return workers


def _wait_for_ping(workers: Workers, names: list[str], timeout: float = 60.0) -> None:
    app = Celery(broker=workers.broker_url)
    wanted = {workers.hostname(name) for name in names}
    deadline = time.monotonic() + timeout
    answered: set[str] = set()
    while time.monotonic() < deadline:
        for name, process in workers.processes.items():
            assert process.poll() is None, workers.logs[name].read_text()
        answered = {host for reply in app.control.ping(timeout=1.0) for host in reply}
        if wanted <= answered:
            return
    logs = "\n".join(f"--- {n}\n{log.read_text()[-3000:]}" for n, log in workers.logs.items())
    raise AssertionError(f"workers {sorted(wanted - answered)} never answered a ping\n{logs}")

"""The tick archive on dagster-celery's executor: two real worker processes on a real broker,
the instance on PostgreSQL. A backfill's venue-days spread over the workers; a worker killed in
the middle of a step loses no tick, its task goes to the other worker, and a rerun finishes."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import dagster as dg
import duckdb
import pytest
import yaml
from dagster._core.definitions.reconstruct import ReconstructableRepository

from skewtape_pipeline.celery_definitions import (
    CELERY_SETTINGS,
    SETTINGS_VARIABLE,
    worker_settings,
)
from skewtape_pipeline.celery_definitions import defs as celery_defs
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.mirror.jobs import APPLY_POOL
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.partitions import VENUES
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols
from skewtape_pipeline_tests.orchestration.conftest import register_venues
from skewtape_pipeline_tests.scale_out.celery_workers import (
    CELERY_FILE,
    REPO,
    WORKER_COMMAND,
    Workers,
    start_workers,
)
from skewtape_pipeline_tests.scale_out.servers import BROKER_PASSWORD

pytestmark = pytest.mark.slow  # starts servers

DAYS = ("2026-11-04", "2026-11-05")
RUN_TIMEOUT = 300.0
BROKER_VARIABLES = ("SKEWTAPE_CELERY_BROKER", "SKEWTAPE_CELERY_BACKEND")


@pytest.fixture
def celery_root(
    applied_chain: Path, postgres_instance: dg.DagsterInstance, broker, monkeypatch
) -> Path:
    """The applied chain as SKEWTAPE_HOME, its venues registered, the broker in the env."""
    monkeypatch.setenv("SKEWTAPE_HOME", str(applied_chain))
    monkeypatch.setenv("SKEWTAPE_CELERY_BROKER", broker.url(0))
    monkeypatch.setenv("SKEWTAPE_CELERY_BACKEND", broker.url(1))
    for month in ("2026-09", "2026-10", "2026-11"):
        register_venues(postgres_instance, new_symbols(applied_chain / "history", month))
    return applied_chain


@pytest.fixture
def workers(celery_root: Path, tmp_path: Path, broker, monkeypatch) -> Workers:
    """w1 and w2; w1 stalls at its first hot-file publish, writing ``stall_marker(tmp_path)``."""
    folder = tmp_path / "workers"
    folder.mkdir()
    monkeypatch.setenv("SKEWTAPE_TEST_STALL_MARKER", str(stall_marker(tmp_path)))
    running = start_workers(
        ["w1", "w2"],
        folder,
        broker_url=broker.url(0),
        includes={"w1": "skewtape_pipeline_tests.scale_out.stalling_worker"},
    )
    yield running
    running.stop()


def stall_marker(tmp_path: Path) -> Path:
    return tmp_path / "workers" / "stalled"


def range_tags(instance: dg.DagsterInstance) -> dict[str, str]:
    venues = sorted(instance.get_dynamic_partitions(VENUES))
    return {
        "dagster/asset_partition_range_start": f"{DAYS[0]}|{venues[0]}",
        "dagster/asset_partition_range_end": f"{DAYS[-1]}|{venues[-1]}",
    }


def launch(instance: dg.DagsterInstance) -> tuple[threading.Thread, dict]:
    """Run ``archive_ticks`` of the Celery code location over DAYS x every venue in a thread,
    as the run worker of a UI backfill does; returns the thread and a dict for the result."""
    job = ReconstructableRepository.for_module(
        "skewtape_pipeline.celery_definitions", "defs", working_directory=str(REPO)
    ).get_reconstructable_job("archive_ticks")
    outcome: dict = {}

    def run() -> None:
        with dg.execute_job(job, instance=instance, tags=range_tags(instance)) as result:
            outcome["success"], outcome["run_id"] = result.success, result.run_id

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, outcome


def finish(thread: threading.Thread, outcome: dict) -> dict:
    thread.join(RUN_TIMEOUT)
    assert not thread.is_alive(), f"the run did not finish in {RUN_TIMEOUT} s"
    return outcome


def workers_of(instance: dg.DagsterInstance, run_id: str) -> dict[str, set[str]]:
    """{step key: Celery workers that started it}, from the run's engine events."""
    steps: dict[str, set[str]] = {}
    for record in instance.all_logs(run_id, of_type=dg.DagsterEventType.ENGINE_EVENT):
        data = record.dagster_event.engine_event_data
        worker = data.metadata.get("Celery worker")
        if worker is not None:
            steps.setdefault(record.step_key, set()).add(worker.value)
    return steps


def fills_counts(root: Path) -> dict[tuple[str, str], int]:
    """{(symbol, day): trades} on DAYS in the newest snapshot's fills, counted by DuckDB."""
    files = [str(p) for p in (root / "history" / "2026-11").glob("fills/*/2026-11.parquet")]
    rows = duckdb.sql(
        "SELECT venue || ':' || market_id, strftime((ts AT TIME ZONE 'UTC')::DATE, '%Y-%m-%d'), "
        "count(*) FROM read_parquet($f) WHERE (ts AT TIME ZONE 'UTC')::DATE "
        "BETWEEN $a::DATE AND $b::DATE GROUP BY ALL",
        params={"f": files, "a": DAYS[0], "b": DAYS[-1]},
    ).fetchall()
    return {(symbol, day): n for symbol, day, n in rows}


def archived_counts(root: Path) -> dict[tuple[str, str], int]:
    """{(symbol, day): ticks} on DAYS through the ``ticks`` view."""
    rows = run_query(
        "SELECT symbol, strftime(date, '%Y-%m-%d') AS day, count(*) AS n FROM ticks "
        f"WHERE date BETWEEN DATE '{DAYS[0]}' AND DATE '{DAYS[-1]}' GROUP BY ALL",
        ArchiveCore(root / "archive"),
    ).to_pylist()
    return {(row["symbol"], row["day"]): row["n"] for row in rows}


def test_celery_definitions_when_loaded_keep_applies_in_process_in_their_pool():
    defs = build_definitions(SkewtapeHome(root="unused"))

    assert celery_defs.resolve_job_def("archive_ticks").executor_def.name == "skewtape_celery"
    apply_job = celery_defs.resolve_job_def("apply_month")
    assert apply_job.executor_def.name == defs.resolve_job_def("apply_month").executor_def.name
    assert apply_job.executor_def.name == "in_process"
    ops = apply_job.graph.node_dict["history_snapshot"].definition.iterate_op_defs()
    assert {op.pool for op in ops} == {APPLY_POOL}


def test_celery_settings_when_read_match_the_workers_file_less_what_only_workers_act_on():
    workers_side = yaml.safe_load(CELERY_FILE.read_text())["execution"]["config"]
    transport = workers_side["config_source"].pop("broker_transport_options")
    assert workers_side["config_source"].pop("worker_concurrency") == 1
    assert workers_side == CELERY_SETTINGS
    assert transport["visibility_timeout"] >= 600


def test_celery_backfill_when_a_worker_dies_mid_step_loses_no_tick_and_spreads_over_workers(
    celery_root: Path,
    postgres_home: Path,
    postgres_instance: dg.DagsterInstance,
    workers: Workers,
    tmp_path: Path,
):
    """w1 stalls at its first hot-file publish (written, not renamed) and is killed there; its
    step goes to w2 after the visibility timeout; the run succeeds with every tick once. A
    second run over the same days (a rerun) finishes on the surviving worker, same ticks. The
    broker's password is written nowhere: not under DAGSTER_HOME, not in the workers' logs,
    not in the data root."""
    marker = stall_marker(tmp_path)
    thread, outcome = launch(postgres_instance)
    deadline = time.monotonic() + RUN_TIMEOUT
    while not marker.exists():
        assert time.monotonic() < deadline, "w1 never reached a hot-file publish"
        assert thread.is_alive(), f"the run ended before w1 stalled: {outcome}"
        time.sleep(0.2)
    workers.kill("w1")
    first = finish(thread, outcome)
    assert first["success"]
    steps = workers_of(postgres_instance, first["run_id"])
    shards = {key: hosts for key, hosts in steps.items() if "archive_venue_days" in key}
    stalled = [key for key, hosts in shards.items() if workers.hostname("w1") in hosts]
    assert stalled, steps  # w1 took a shard ...
    assert all(workers.hostname("w2") in shards[key] for key in stalled)  # ... w2 redid it
    expected = fills_counts(celery_root)
    assert expected and archived_counts(celery_root) == expected  # every tick exactly once

    thread, outcome = launch(postgres_instance)
    again = finish(thread, outcome)
    assert again["success"]
    assert archived_counts(celery_root) == expected
    for folder in (postgres_home, tmp_path, celery_root):
        assert files_holding(folder, BROKER_PASSWORD) == []


def files_holding(folder: Path, secret: str) -> list[Path]:
    """The files under ``folder`` whose bytes contain ``secret``."""
    return [p for p in folder.rglob("*") if p.is_file() and secret.encode() in p.read_bytes()]


def test_deployment_docs_when_read_start_workers_as_the_tests_do():
    text = " ".join((REPO / "docs" / "deployment.md").read_text().split())
    assert f"`{WORKER_COMMAND}`" in text


def test_celery_worker_settings_when_the_file_is_missing_name_the_variable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.setenv(SETTINGS_VARIABLE, str(tmp_path / "nowhere.yaml"))
    with pytest.raises(ConfigError, match=f"^{SETTINGS_VARIABLE} = .*nowhere.yaml.*no such file"):
        worker_settings()


@pytest.mark.parametrize("unset", [("SKEWTAPE_CELERY_BROKER",), BROKER_VARIABLES])
def test_celery_worker_settings_when_a_variable_is_unset_name_it(
    unset: tuple[str, ...], monkeypatch: pytest.MonkeyPatch
):
    monkeypatch.delenv(SETTINGS_VARIABLE, raising=False)
    for name in BROKER_VARIABLES:
        monkeypatch.setenv(name, "redis://127.0.0.1:1/0")
    for name in unset:
        monkeypatch.delenv(name)
    with pytest.raises(ConfigError, match=r"celery\.yaml: names ") as refused:
        worker_settings()
    assert f"names {', '.join(unset)}, not set" in str(refused.value)


def test_celery_worker_start_when_the_broker_is_unset_says_so_in_one_line(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k not in BROKER_VARIABLES}
    env = {**env, "PYTHONPATH": str(REPO)}
    env.pop(SETTINGS_VARIABLE, None)
    celery = Path(sys.executable).parent / "celery"
    done = subprocess.run(
        [str(celery), *WORKER_COMMAND.split()[1:]],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert done.stderr.splitlines() == [
        f"error: {CELERY_FILE}: names SKEWTAPE_CELERY_BROKER, SKEWTAPE_CELERY_BACKEND, not set "
        "in this environment; expected every variable the workers' settings name (the broker's "
        "and the result backend's URLs) set"
    ]


def test_celery_worker_settings_when_read_resolve_the_broker_from_the_environment(
    monkeypatch: pytest.MonkeyPatch,
):
    monkeypatch.delenv(SETTINGS_VARIABLE, raising=False)
    monkeypatch.setenv("SKEWTAPE_CELERY_BROKER", "redis://127.0.0.1:1/0")
    monkeypatch.setenv("SKEWTAPE_CELERY_BACKEND", "redis://127.0.0.1:1/1")
    settings = worker_settings()  # the shipped file
    assert (settings["broker"], settings["backend"]) == (
        "redis://127.0.0.1:1/0",
        "redis://127.0.0.1:1/1",
    )
    assert settings["config_source"]["worker_concurrency"] == 1

"""The run queue of an instance configured by dagster.yaml starts one writer of an area at a time.

Dagster's queue daemon decides which queued runs to start in passes; these tests run one pass
(``QueuedRunCoordinatorDaemon._get_runs_to_dequeue``, the daemon's own decision, without
launching anything) over two queued runs of the same job on a fresh instance, the moment a
schedule and a sensor both asking for a month produce. Only one may start.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.remote_origin import (
    RegisteredCodeLocationOrigin,
    RemoteJobOrigin,
    RemoteRepositoryOrigin,
)
from dagster._core.storage.dagster_run import DagsterRunStatus
from dagster._daemon.run_coordinator.queued_run_coordinator_daemon import (
    QueuedRunCoordinatorDaemon,
)

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome

REPO = Path(__file__).resolve().parents[2]
LOCATION = "skewtape_pipeline"


def queue(instance: dg.DagsterInstance, job: dg.JobDefinition, tags: dict[str, str]) -> None:
    """Queue a run of ``job`` as the webserver, a sensor or a schedule does: with the job's tags
    and ``tags``, and the origin the daemon launches from."""
    origin = RemoteJobOrigin(
        RemoteRepositoryOrigin(RegisteredCodeLocationOrigin(LOCATION), "__repository__"),
        job.name,
    )
    instance.create_run_for_job(
        job, tags={**job.tags, **tags}, status=DagsterRunStatus.QUEUED, remote_job_origin=origin
    )


@pytest.mark.parametrize(
    ("job_name", "tags"),
    [
        ("apply_month", {"dagster/partition": "2026-10"}),
        ("retier_ticks", {"dagster/partition": "2026-10"}),
        ("archive_ticks", {"dagster/partition": "2026-10-22|kalshi:A"}),
    ],
)
def test_run_queue_when_two_runs_of_a_writer_are_queued_on_a_fresh_instance_starts_one(
    tmp_path: Path, job_name: str, tags: dict[str, str]
):
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")
    job = build_definitions(SkewtapeHome(root=str(tmp_path / "data"))).resolve_job_def(job_name)
    with dg.DagsterInstance.from_config(str(tmp_path)) as instance:
        if job_name == "archive_ticks":
            instance.add_dynamic_partitions("symbols", ["kalshi:A"])
        for _ in range(2):
            queue(instance, job, tags)
        daemon = QueuedRunCoordinatorDaemon(interval_seconds=1)
        started = daemon._get_runs_to_dequeue(instance, instance.get_concurrency_config(), None)
    assert len(started) == 1


@pytest.mark.parametrize("shipped", ["deploy/postgres/dagster.yaml", "deploy/k8s/dagster.yaml"])
def test_every_shipped_instance_file_queues_runs_as_the_embedded_default(shipped):
    import yaml

    repo = Path(__file__).resolve().parents[2]
    embedded = yaml.safe_load((repo / "dagster.yaml").read_text())
    assert yaml.safe_load((repo / shipped).read_text())["concurrency"] == embedded["concurrency"]

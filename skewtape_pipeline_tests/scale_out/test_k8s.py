"""The Kubernetes configuration, checked offline (no cluster here): the instance file validated
by Dagster's config system with the real K8sRunLauncher, the pod a run launch would create
(captured instead of sent), its container command run locally as the pod would run it, and the
Helm values and the image agreeing with both."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
import yaml
from dagster._config import process_config
from dagster._core.definitions.reconstruct import ReconstructableRepository
from dagster._core.instance.config import dagster_instance_config
from dagster._core.launcher import LaunchRunContext
from dagster._grpc.types import ExecuteRunArgs
from dagster._serdes import deserialize_value
from dagster_k8s import K8sRunLauncher

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.partitions import VENUES
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols
from skewtape_pipeline_tests.orchestration.conftest import register_venues
from skewtape_pipeline_tests.scale_out.conftest import REPO

pytestmark = pytest.mark.slow  # starts servers

K8S = REPO / "deploy" / "k8s"
IMAGE = "skewtape-pipeline:0.1.0"
OFFLINE_KUBECONFIG = {
    "apiVersion": "v1",
    "kind": "Config",
    "clusters": [{"name": "offline", "cluster": {"server": "https://127.0.0.1:9"}}],
    "users": [{"name": "offline", "user": {"token": "offline"}}],
    "contexts": [{"name": "offline", "context": {"cluster": "offline", "user": "offline"}}],
    "current-context": "offline",
}


def instance_settings() -> dict:
    return yaml.safe_load((K8S / "dagster.yaml").read_text())


@pytest.fixture
def k8s_home(postgres_home: Path, tmp_path: Path) -> Path:
    """DAGSTER_HOME with deploy/k8s/dagster.yaml, changed only to load an offline kubeconfig
    instead of the in-cluster one (there is no cluster here)."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(yaml.safe_dump(OFFLINE_KUBECONFIG))
    settings = instance_settings()
    launcher = settings["run_launcher"]["config"]
    launcher.update(load_incluster_config=False, kubeconfig_file=str(kubeconfig))
    (postgres_home / "dagster.yaml").write_text(yaml.safe_dump(settings))
    return postgres_home


def test_k8s_instance_file_when_validated_by_dagster_accepts_instance_and_launcher(
    postgres_home: Path,
):
    shutil.copy(K8S / "dagster.yaml", postgres_home / "dagster.yaml")
    settings, _ = dagster_instance_config(str(postgres_home))
    launcher = settings["run_launcher"]
    assert (launcher["module"], launcher["class"]) == ("dagster_k8s", "K8sRunLauncher")
    checked = process_config(K8sRunLauncher.config_type(), launcher["config"])
    assert checked.success, checked.errors
    assert checked.value["load_incluster_config"] is True
    assert "SKEWTAPE_HOME=/data" in checked.value["env_vars"]


def test_k8s_instance_file_when_loaded_turns_off_telemetry_and_the_community_pop_up(
    k8s_home: Path,
):
    with dg.DagsterInstance.from_config(str(k8s_home)) as instance:
        assert instance.telemetry_enabled is False
        assert instance.nux_enabled is False


def test_k8s_run_launcher_when_a_run_launches_creates_a_pod_whose_command_runs_it(
    k8s_home: Path, applied_chain: Path, monkeypatch
):
    with dg.DagsterInstance.from_config(str(k8s_home)) as instance:
        assert isinstance(instance.run_launcher, K8sRunLauncher)
        for month in ("2026-09", "2026-10", "2026-11"):
            register_venues(instance, new_symbols(applied_chain / "history", month))
        venues = sorted(instance.get_dynamic_partitions(VENUES))
        key = f"2026-11-05|{venues[0]}"
        origin = (
            ReconstructableRepository.for_module(
                "skewtape_pipeline.definitions", "defs", container_image=IMAGE
            )
            .get_reconstructable_job("archive_ticks")
            .get_python_origin()
        )
        job = build_definitions(SkewtapeHome(root="/data")).resolve_job_def("archive_ticks")
        run = instance.create_run_for_job(
            job_def=job,
            job_code_origin=origin,
            tags={"dagster/partition": key, "dagster/partition/date": "2026-11-05",
                  "dagster/partition/venue": venues[0]},
        )  # fmt: skip
        created = []
        monkeypatch.setattr(
            instance.run_launcher._api_client,
            "create_namespaced_job_with_retries",
            lambda body, namespace: created.append((namespace, body)),
        )
        instance.run_launcher.launch_run(LaunchRunContext(dagster_run=run, workspace=None))
        [(namespace, pod_job)] = created
        assert namespace == "skewtape"
        [container] = pod_job.spec.template.spec.containers
        assert container.image == IMAGE
        assert container.args[:3] == ["dagster", "api", "execute_run"]
        arguments = deserialize_value(container.args[3], ExecuteRunArgs)
        assert (arguments.run_id, arguments.job_origin.job_name) == (run.run_id, "archive_ticks")
        pointer = arguments.job_origin.repository_origin.code_pointer
        assert pointer.module == "skewtape_pipeline.definitions"
        env = {e.name: e.value for e in container.env}
        assert env["SKEWTAPE_HOME"] == "/data"
        assert env["DAGSTER_HOME"] == "/opt/dagster/dagster_home"
        assert [s.secret_ref.name for s in container.env_from] == ["skewtape-postgres"]
        assert [(m.name, m.mount_path) for m in container.volume_mounts][-1] == (
            "skewtape-data",
            "/data",
        )
        # The pod's command, run here as the pod would run it (its /data is the applied chain).
        pod_env = {**os.environ, "SKEWTAPE_HOME": str(applied_chain)}
        done = subprocess.run(
            [sys.executable, "-m", *container.args],
            env=pod_env,
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=300,
        )
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert instance.get_run_by_id(run.run_id).status == dg.DagsterRunStatus.SUCCESS
        assert instance.get_materialized_partitions(TICK_ARCHIVE) == {key}


def test_helm_values_when_read_agree_with_the_instance_file_and_the_image():
    values = yaml.safe_load((K8S / "values.yaml").read_text())
    [deployment] = values["dagster-user-deployments"]["deployments"]
    dockerfile = (K8S / "Dockerfile").read_text()
    command = json.loads(dockerfile.split("CMD ", 1)[1].strip())
    assert command[-2:] == deployment["dagsterApiGrpcArgs"]
    assert f"{deployment['image']['repository']}:{deployment['image']['tag']}" == IMAGE
    assert f'-p", "{deployment["port"]}"' in dockerfile.replace("'", '"')
    launcher = values["runLauncher"]["config"]["k8sRunLauncher"]
    instance = instance_settings()["run_launcher"]["config"]
    assert launcher["envVars"] == instance["env_vars"]
    assert launcher["volumes"] == instance["volumes"] == deployment["volumes"]
    assert launcher["volumeMounts"] == instance["volume_mounts"] == deployment["volumeMounts"]
    assert launcher["jobNamespace"] == instance["job_namespace"]
    assert values["postgresql"]["enabled"] is False
    assert "postgresqlPassword" not in values["postgresql"]

"""The code location on Celery workers: ``-m skewtape_pipeline.celery_definitions``.

The same assets, sensors and schedules as :mod:`skewtape_pipeline.definitions`, with the tick
archive's job on dagster-celery's ``celery_executor``: each of a run's archiving ops is a Celery
task that any worker listening on the ``dagster`` queue runs, so a backfill's venue-days spread
over the workers. The executor reads the broker and the result backend from the environment
(``SKEWTAPE_CELERY_BROKER``, ``SKEWTAPE_CELERY_BACKEND``) when a run starts; the workers take the
same settings from ``deploy/celery/celery.yaml`` (:func:`worker_settings`, read by the workers'
app, :mod:`skewtape_pipeline.celery_worker`). Every process must reach the same Dagster
instance (PostgreSQL: ``deploy/postgres/dagster.yaml``) and the same data root
(``SKEWTAPE_HOME``). ``apply_month`` and ``retier_ticks`` stay in process in their run.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import dagster as dg
import yaml
from dagster_celery import celery_executor
from dagster_celery.cli import get_validated_config

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome

CELERY_SETTINGS = {
    "broker": {"env": "SKEWTAPE_CELERY_BROKER"},
    "backend": {"env": "SKEWTAPE_CELERY_BACKEND"},
    "config_source": {
        "task_acks_late": True,
        "task_reject_on_worker_lost": True,
        "worker_prefetch_multiplier": 1,
    },
}
"""The executor's side of ``deploy/celery/celery.yaml`` (the workers' side adds the
visibility timeout and the concurrency, which only the workers act on)."""

SETTINGS_VARIABLE = "SKEWTAPE_CELERY_SETTINGS"
SHIPPED_SETTINGS = Path(__file__).resolve().parents[1] / "deploy" / "celery" / "celery.yaml"
"""The workers' settings shipped with the repository (a clone's; an installed package has none,
so ``SKEWTAPE_CELERY_SETTINGS`` must name a copy)."""


def worker_settings() -> dict[str, Any]:
    """The executor config of the settings file (``execution.config``: broker, backend,
    include, ``config_source``), its ``env`` values resolved from the environment (retries,
    which only the executor acts on, left out).

    Raises ConfigError naming ``SKEWTAPE_CELERY_SETTINGS`` when its file does not exist, and
    naming the file and the variables when it names variables that are not set (the broker's,
    the backend's); dagster-celery's DagsterInvalidConfigError when the file is not valid
    executor config."""
    path = Path(os.environ.get(SETTINGS_VARIABLE) or SHIPPED_SETTINGS)
    if not path.is_file():
        raise ConfigError(
            f"{SETTINGS_VARIABLE} = {str(path)!r}: no such file; expected the workers' "
            "Celery settings (a copy of deploy/celery/celery.yaml)"
        )
    settings = get_validated_config(str(path))
    if settings is None:  # dagster-celery's answer when an ``env:`` value is not set
        unset = ", ".join(_unset_variables(yaml.safe_load(path.read_text()))) or "a variable"
        raise ConfigError(
            f"{path}: names {unset}, not set in this environment; expected every variable "
            "the workers' settings name (the broker's and the result backend's URLs) set"
        )
    return {key: value for key, value in settings.items() if key != "retries"}


def _unset_variables(value: Any) -> list[str]:
    """The names of the ``{env: NAME}`` values anywhere in ``value`` that the environment does
    not set, in the order they appear."""
    if isinstance(value, dict):
        if set(value) == {"env"} and isinstance(value["env"], str):
            return [] if value["env"] in os.environ else [value["env"]]
        return [name for item in value.values() for name in _unset_variables(item)]
    if isinstance(value, list):
        return [name for item in value for name in _unset_variables(item)]
    return []


skewtape_celery_executor = celery_executor.configured(CELERY_SETTINGS, name="skewtape_celery")

defs = build_definitions(
    SkewtapeHome(root=dg.EnvVar("SKEWTAPE_HOME")), executor=skewtape_celery_executor
)

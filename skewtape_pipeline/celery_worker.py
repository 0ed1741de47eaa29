"""The Celery workers' app: ``celery -A skewtape_pipeline.celery_worker worker -P threads``.

dagster-celery's own app (``dagster-celery worker start -A dagster_celery.app -y FILE``) reads its
settings from a Python module that command writes under ``$DAGSTER_HOME`` for every worker it
starts, the broker's URL and password in it, and never removes. This app is dagster-celery's (the
same tasks, queue and routes: what the executor of :mod:`skewtape_pipeline.celery_definitions`
sends) with its settings read when the worker starts and written nowhere
(``celery_definitions.worker_settings``): the broker and the result backend from
``SKEWTAPE_CELERY_BROKER`` and ``SKEWTAPE_CELERY_BACKEND``, the rest from the file
``SKEWTAPE_CELERY_SETTINGS`` names (default: this clone's ``deploy/celery/celery.yaml``).
Importing it builds the app, so those variables must be set.
"""

from __future__ import annotations

from dagster_celery.executor import CeleryExecutor
from dagster_celery.make_app import make_app
from dagster_celery.tasks import create_execute_job_task, create_resume_job_task, create_task

from skewtape_pipeline.celery_definitions import worker_settings
from skewtape_pipeline.errors import ConfigError


def _settings() -> dict:
    """:func:`worker_settings`; a ConfigError (a settings file missing, a variable not set) ends
    the worker's start with its one line, exit 1, instead of Celery's "Unable to load celery
    application" and a traceback."""
    try:
        return worker_settings()
    except ConfigError as exc:
        raise SystemExit(f"error: {exc}") from None


app = make_app(CeleryExecutor.for_cli(**_settings()).app_args())

execute_plan = create_task(app)
execute_job = create_execute_job_task(app)
resume_job = create_resume_job_task(app)

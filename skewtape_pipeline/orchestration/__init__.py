"""Dagster definitions around the core, by domain: thin adapters that call it and turn results
into metadata.

- ``mirror/``: Dagster definitions of the mirror: the monthly history snapshot asset and its
  ``apply_month`` job, its checks, following the publisher, the delta sensor and the monthly
  schedule. Modules: ``jobs``, ``snapshot_asset``, ``checks``, ``metadata``, ``publisher``,
  ``sensors``, ``schedules``. It imports nothing of ``ticks/``.
- ``ticks/``: Dagster definitions of the tick archive: the ``archive`` resource, the venue-day
  asset and its partitions, venue registration, the venues and corrections sensors, re-tiering,
  verification and versions with their schedules. Modules: ``resources``, ``partitions``,
  ``venues``, ``archive_asset``, ``venue_day_metadata``, ``sensors``, ``tier_assets``,
  ``metadata``, ``schedules``, ``version_jobs``.
- ``shared/``: What both domains' definitions use, importing neither: the data root resource,
  month partitions, the keys both name (the history snapshot's asset key, the run-queue tag),
  metadata, sensor skips. Modules: ``keys``, ``metadata``, ``partitions``, ``resources``,
  ``sensor_skips``.

- ``definitions``: :func:`~skewtape_pipeline.orchestration.definitions.build_definitions`, every
  domain's definitions in one ``Definitions`` (the code locations build theirs with it).
- ``demo``: the sample chain run in process (``python -m
  skewtape_pipeline.orchestration.demo``).
- ``ui_port``: a busy UI port refused before ``make ui`` starts Dagster.

Only this package and the code locations (``skewtape_pipeline.definitions``,
``skewtape_pipeline.celery_definitions``) import dagster.
"""

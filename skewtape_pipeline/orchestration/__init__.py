"""Dagster definitions around the core, by domain: thin adapters that call it and turn results
into metadata.

- ``mirror/``: Dagster definitions of the mirror: the monthly history snapshot asset, its
  checks, the delta sensor and the monthly schedule. Modules: ``checks``, ``schedules``,
  ``sensors``, ``snapshot_asset``.
- ``ticks/``: Dagster definitions of the tick archive: the venue-day asset and its partitions,
  the corrections sensor, re-tiering and verification with their schedules. Modules:
  ``archive_asset``, ``partitions``, ``sensors``, ``tier_assets``, ``schedules``,
  ``venue_day_metadata``.
- ``shared/``: What both domains' definitions use: resources, month partitions, the apply job
  and run-queue tag, metadata. Modules: ``jobs``, ``metadata``, ``partitions``, ``resources``,
  ``sensor_skips``.

- ``definitions``: :func:`~skewtape_pipeline.orchestration.definitions.build_definitions`, every
  domain's definitions in one ``Definitions`` (the code locations build theirs with it).
- ``demo``: the sample chain run in process (``python -m
  skewtape_pipeline.orchestration.demo``).
- ``ui_port``: a busy UI port refused before ``make ui`` starts Dagster.

Only this package and the code locations (``skewtape_pipeline.definitions``,
``skewtape_pipeline.celery_definitions``) import dagster.
"""

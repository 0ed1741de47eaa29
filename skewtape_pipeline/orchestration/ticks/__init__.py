"""Dagster definitions of the tick archive: its resource, the venue-day asset and its partitions,
venue registration, the venues and corrections sensors, re-tiering, verification and versions
with their schedules.

Modules:

- ``resources``: the ``archive`` resource (tier policy, targets, write-once mode; opens the run's
  ``Archive``).
- ``partitions``: the tick archive's partitions: UTC days x venues, and venue keys.
- ``venues``: registering the venues of each applied month's fills as partitions.
- ``archive_asset``: the tick archive asset: one partition per venue-day.
- ``venue_day_metadata``: a venue-day's materialization metadata, from the reports table.
- ``sensors``: the venues sensor (registration, running from the start) and the corrections
  sensor (the symbol-days a new snapshot changed).
- ``tier_assets``: re-tiering and the archive as a whole, as assets and a check.
- ``metadata``: re-tiering moves, the archive's versions and metrics, the compression check as
  metadata.
- ``schedules``: the daily re-tiering and verification schedules.
- ``version_jobs``: pruning the archive's old versions, and its weekly schedule.
"""

"""Dagster definitions of the tick archive: the venue-day asset and its partitions, the corrections
sensor, re-tiering and verification with their schedules.

Modules:

- ``archive_asset``: the tick archive asset: one partition per venue-day.
- ``partitions``: the tick archive's partitions: UTC days x venues, and venue keys.
- ``sensors``: the corrections sensor: the symbol-days a new snapshot changed.
- ``tier_assets``: re-tiering and the archive as a whole, as assets and a check.
- ``schedules``: the daily re-tiering and verification schedules.
- ``venue_day_metadata``: a venue-day's materialization metadata, from the reports table.
"""

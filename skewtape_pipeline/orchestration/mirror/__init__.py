"""Dagster definitions of the mirror: the monthly history snapshot asset and its job, its checks,
following the publisher, the delta sensor and the monthly schedule. Imports nothing of the tick
archive's definitions or core.

Modules:

- ``jobs``: the ``apply_month`` job and its concurrency pool.
- ``snapshot_asset``: the monthly history snapshot asset (a graph of the applier's steps).
- ``checks``: the blocking asset checks on each month of the history snapshot.
- ``metadata``: an apply's, a verification's and a bootstrap month's metadata and summary.
- ``publisher``: the publisher resource, the op fetching a month's delta, the polling sensor.
- ``sensors``: the sensor that starts a month's run when its delta has arrived.
- ``schedules``: the monthly schedule that applies the month just ended.
"""

"""Dagster definitions of the mirror: the monthly history snapshot asset, its checks, the delta
sensor and the monthly schedule.

Modules:

- ``checks``: the blocking asset checks on each month of the history snapshot.
- ``schedules``: the monthly schedule that applies the month just ended.
- ``sensors``: the sensor that starts a month's run when its delta has arrived.
- ``snapshot_asset``: the monthly history snapshot asset (a graph of the applier's steps).
"""

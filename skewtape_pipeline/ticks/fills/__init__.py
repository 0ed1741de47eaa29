"""The only ticks code that reads mirror snapshots: a snapshot's fills as symbol-day ticks, and a
venue-day of them into the archive.

Modules:

- ``snapshot_fills``: a snapshot's fills as symbol-day ticks, archived; corrected symbol-days.
- ``venue_days``: a venue-day of fills into the archive (the tick archive asset's unit of work).
"""

"""What both domains' definitions use: resources, month partitions, the apply job and run-queue
tag, metadata.

Modules:

- ``jobs``: the ``apply_month`` job, the history snapshot's asset key, the run-queue tag.
- ``metadata``: the core's result objects as Dagster metadata and markdown summaries.
- ``partitions``: the month partitions and month arithmetic on their keys.
- ``resources``: where the data root and the archive are, read when a run starts.
- ``sensor_skips``: a sensor tick that requests nothing says why, where the UI shows it.
"""

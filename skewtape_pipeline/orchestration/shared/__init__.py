"""What both domains' definitions use, and nothing of either: the data root resource, the
month partitions, the keys both name, metadata values, sensor skips.

Modules:

- ``keys``: the history snapshot's asset key and the run-queue tag.
- ``metadata``: metadata values: seconds, ratios, bytes for a reader, cut lists, problems.
- ``partitions``: the month partitions and month arithmetic on their keys.
- ``resources``: where the data root is (``skewtape``), read when a run starts.
- ``sensor_skips``: a sensor tick that requests nothing says why, where the UI shows it.
"""

"""The keys both domains' definitions name: the history snapshot's asset key (the tick archive
depends on it) and the run tag dagster.yaml's run queue limits runs by."""

from __future__ import annotations

import dagster as dg

HISTORY_SNAPSHOT = dg.AssetKey("history_snapshot")

QUEUE_TAG = "skewtape/pool"
"""The run tag whose value names the pool a job's runs write in (``skewtape_apply``,
``skewtape_archive``): dagster.yaml's run queue starts one run per value at a time, before the
run starts (a pool's own limit is set lazily, so two runs queued together on a fresh instance
could both start)."""

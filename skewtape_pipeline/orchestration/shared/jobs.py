"""The job the schedule, the sensor and the UI launch: one month of the history snapshot."""

from __future__ import annotations

import dagster as dg

HISTORY_SNAPSHOT = dg.AssetKey("history_snapshot")

APPLY_POOL = "skewtape_apply"
"""The concurrency pool of every op of the month's graph (they write to ``deltas/`` and
``history/``)."""

QUEUE_TAG = "skewtape/pool"
"""The run tag whose value names the pool a job's runs write in (``skewtape_apply``,
``skewtape_archive``): dagster.yaml's run queue starts one run per value at a time, before the
run starts (a pool's own limit is set lazily, so two runs queued together on a fresh instance
could both start)."""

apply_month_job = dg.define_asset_job(
    name="apply_month",
    selection=dg.AssetSelection.assets(HISTORY_SNAPSHOT),
    description="Bring `history/<YYYY-MM>/` to the month's snapshot (bootstrap, apply or no-op) "
    "and check it.",
    executor_def=dg.in_process_executor,
    tags={QUEUE_TAG: APPLY_POOL},
)

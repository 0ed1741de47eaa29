"""The job the schedule, the sensors and the UI launch: one month of the history snapshot."""

from __future__ import annotations

import dagster as dg

from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT, QUEUE_TAG

APPLY_POOL = "skewtape_apply"
"""The concurrency pool of every op of the month's graph (they write to ``deltas/`` and
``history/``)."""

apply_month_job = dg.define_asset_job(
    name="apply_month",
    selection=dg.AssetSelection.assets(HISTORY_SNAPSHOT),
    description="Bring `history/<YYYY-MM>/` to the month's snapshot (bootstrap, apply or no-op) "
    "and check it.",
    executor_def=dg.in_process_executor,
    tags={QUEUE_TAG: APPLY_POOL},
)

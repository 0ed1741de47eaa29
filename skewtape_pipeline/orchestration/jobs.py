"""The job the schedule, the sensor and the UI launch: one month of the history snapshot."""

from __future__ import annotations

import dagster as dg

HISTORY_SNAPSHOT = dg.AssetKey("history_snapshot")

apply_month_job = dg.define_asset_job(
    name="apply_month",
    selection=dg.AssetSelection.assets(HISTORY_SNAPSHOT),
    description="Bring history/<month>/ to the month's snapshot (bootstrap, apply or no-op) "
    "and check it.",
    executor_def=dg.in_process_executor,
)

"""A sensor tick that requests nothing says why where the UI shows it."""

from typing import Any

import dagster as dg

from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


def skipped(
    context: dg.SensorEvaluationContext,
    skewtape: SkewtapeHome,
    reason: str,
    cursor: str | None,
    **result: Any,
) -> dg.SensorResult:
    """The tick's result when it requests no run: ``reason`` (its paths under the data root
    named ``$SKEWTAPE_HOME/...``: ``SkewtapeHome.shown``) is its skip reason and, logged
    through the tick's logger, a line of the tick's logs (what the UI's tick dialog shows,
    where the skip reason alone would leave "No logs to display"). ``result`` are further
    ``SensorResult`` arguments (e.g. dynamic partitions to add). ``cursor`` None: a sensor
    that keeps none."""
    reason = skewtape.shown(reason)
    context.log.info(f"skipped: {reason}")
    return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=cursor, **result)

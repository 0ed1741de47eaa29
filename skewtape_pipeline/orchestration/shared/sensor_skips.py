"""A sensor tick that requests nothing says why where the UI shows it."""

import functools
from collections.abc import Callable
from typing import Any

import dagster as dg

from skewtape_pipeline.errors import UnreadableInputError
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


def skipped(
    context: dg.SensorEvaluationContext,
    skewtape: SkewtapeHome,
    reason: str,
    cursor: str | None,
    *,
    warning: bool = False,
    **result: Any,
) -> dg.SensorResult:
    """The tick's result when it requests no run: ``reason`` (its paths under the data root
    named ``$SKEWTAPE_HOME/...``: ``SkewtapeHome.shown``) is its skip reason and, logged
    through the tick's logger, a line of the tick's logs (what the UI's tick dialog shows,
    where the skip reason alone would leave "No logs to display"), a warning when
    ``warning``. ``result`` are further ``SensorResult`` arguments (e.g. dynamic partitions to
    add). ``cursor`` None: a sensor that keeps none."""
    reason = skewtape.shown(reason)
    (context.log.warning if warning else context.log.info)(f"skipped: {reason}")
    return dg.SensorResult(skip_reason=dg.SkipReason(reason), cursor=cursor, **result)


Sensor = Callable[[dg.SensorEvaluationContext, SkewtapeHome], Any]


def unreadable_skipped(evaluate: Sensor) -> Sensor:
    """``evaluate`` (a sensor over the mirror's months) whose tick, when a folder or file of
    the mirror cannot be read (``UnreadableInputError``: a month folder of ``history/``, an
    applied snapshot's manifest or one of its fills files), registers and requests nothing and
    keeps its cursor, saying why in a warning and its skip reason (the folder or file named
    from the data root, no stack trace in the UI); a later tick goes on once it reads. What a
    month brings cannot be told meanwhile: a month passed over would never be looked at
    again."""

    @functools.wraps(evaluate)
    def tick(context: dg.SensorEvaluationContext, skewtape: SkewtapeHome) -> Any:
        try:
            return evaluate(context, skewtape)
        except UnreadableInputError as exc:
            reason = f"{exc}; nothing registered or requested, the cursor kept until it reads"
            return skipped(context, skewtape, reason, context.cursor, warning=True)

    return tick

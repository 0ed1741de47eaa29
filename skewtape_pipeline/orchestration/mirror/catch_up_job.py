"""The ``catch_up_months`` job: every pending delta applied in one run, oldest first.

A backfill of ``history_snapshot`` over many months runs one month per run, and Dagster's
backfill daemon starts the next month's run only on a later cycle (about 30 s each: 60 months
take about half an hour, mostly waiting). This job applies every delta already in ``deltas/``
later than the newest month in ``history/`` in one run, through the core's catch-up (one lock
for all of them, each month verified before it is published, as ``skewtape-pipeline
catch-up`` does), and records a materialization of ``history_snapshot`` for each month it
applied, with the apply's metadata, followed by the month's check results (the month checks'
own code, :func:`~skewtape_pipeline.orchestration.mirror.checks.month_check_evaluations`), as a
month applied alone gets them. It fetches nothing: ``sync``, ``fetch`` or the delta
sensors bring the deltas. A refusal fails the run with its reason (the core checks every pending
delta's manifest before the first is applied); a month applied before a later one was refused
stays applied and is recorded.
"""

import dagster as dg

from skewtape_pipeline.errors import UnreadableInputError
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.months import applied_months
from skewtape_pipeline.orchestration.mirror.checks import month_check_evaluations
from skewtape_pipeline.orchestration.mirror.jobs import APPLY_POOL
from skewtape_pipeline.orchestration.mirror.metadata import apply_metadata
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT, QUEUE_TAG
from skewtape_pipeline.orchestration.shared.refusals import month_refused
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


@dg.op(pool=APPLY_POOL, out=dg.Out(dg.Nothing))
def apply_pending_months(context: dg.OpExecutionContext, skewtape: SkewtapeHome) -> None:
    """Apply every pending delta in month order; one `history_snapshot` materialization per
    month applied, followed by the month checks' results (a month applied before a later one
    was refused is recorded too, with them)."""
    with month_refused(context, skewtape, None):
        before = set(applied_months(skewtape.history_dir))
    try:
        with month_refused(context, skewtape, None):
            results = catch_up(
                skewtape.history_dir,
                skewtape.deltas_dir,
                audit_log=skewtape.audit_log,
                lock_timeout=skewtape.lock_timeout,
                link_sources=skewtape.link_sources,
            )
    except dg.Failure as failure:
        for month in _applied_since(context, skewtape, before):
            note = f"applied by this run before it failed: {failure.description}"
            _record(context, skewtape, month, {"note": dg.MetadataValue.text(note)})
        raise
    for result in results:
        _record(
            context, skewtape, result.snapshot.name, apply_metadata(result, shown=skewtape.shown)
        )
    applied = ", ".join(r.snapshot.name for r in results)
    context.log.info(f"{len(results)} month(s) applied: {applied}" if results else "none pending")


def _applied_since(
    context: dg.OpExecutionContext, skewtape: SkewtapeHome, before: set[str]
) -> list[str]:
    """The months applied now that were not ``before``; none, said in a warning, when
    ``history/`` cannot be read any more (the run fails with its own reason all the same)."""
    try:
        return sorted(set(applied_months(skewtape.history_dir)) - before)
    except UnreadableInputError as exc:
        context.log.warning(skewtape.shown(f"the months this run applied are not recorded: {exc}"))
        return []


def _record(
    context: dg.OpExecutionContext, skewtape: SkewtapeHome, month: str, metadata: dict
) -> None:
    """Log the materialization of ``month``, then its checks' results (after it: they target
    the month's latest materialization)."""
    context.log_event(dg.AssetMaterialization(HISTORY_SNAPSHOT, partition=month, metadata=metadata))
    for evaluation in month_check_evaluations(context.instance, skewtape, month):
        context.log_event(evaluation)


@dg.job(
    description="Apply every delta already in `deltas/` after the newest month of `history/`, "
    "oldest first, in one run (a backfill of `history_snapshot` runs one month per daemon "
    "cycle); records a `history_snapshot` materialization per month applied, with its "
    "checks' results.",
    tags={QUEUE_TAG: APPLY_POOL},
    executor_def=dg.in_process_executor,
)
def catch_up_months():
    apply_pending_months()

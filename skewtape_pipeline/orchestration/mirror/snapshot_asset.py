"""The monthly history snapshot asset: a graph of ops, each month depending on the month before.

fetch_delta -> verify_delta -> apply_file_ops -> merge_tables -> publish_snapshot ->
verify_month_snapshot: fetch_delta fetches the month's delta from the publisher when one is
configured and the delta is not here yet (:mod:`~skewtape_pipeline.orchestration.mirror.publisher`);
the others are each one step of the core's applier (:mod:`skewtape_pipeline.mirror.apply`),
doing its part once: verify_delta reads the delta's manifest and checks every file of it (a
file the fetch verified is not hashed again), the next two build the month in a private staging
folder, publish_snapshot verifies the staged month and commits it under the history folder's
lock, verify_month_snapshot reports what was verified (a bootstrap month or a month already
applied is verified there). What one op hands the next is a small JSON object (the month, its
kind and the apply's run id); the journal in the staging folder carries the rest, so each op
also works in its own process. A failed or killed run is finished by running the month again.
verify_month_snapshot raises when the month does not verify, so a month that did not verify is
never recorded as materialized. All ops share one concurrency pool (run granularity, limit 1 in
dagster.yaml): one apply at a time.
"""

from collections.abc import Callable
from typing import Any

import dagster as dg

from skewtape_pipeline.mirror.apply import (
    ApplyOptions,
    ApplyTarget,
    StagedApply,
    applied_step,
    check_step,
    file_ops_step,
    merges_step,
    publish_step,
)
from skewtape_pipeline.mirror.months import plan_month
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.mirror.jobs import APPLY_POOL
from skewtape_pipeline.orchestration.mirror.metadata import (
    apply_metadata,
    bootstrap_metadata,
    verify_metadata,
)
from skewtape_pipeline.orchestration.mirror.publisher import fetch_delta
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.partitions import month_partitions, previous_month
from skewtape_pipeline.orchestration.shared.refusals import month_refused
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome

MonthStep = dict[str, Any]
"""What an op hands the next: ``{"month": "YYYY-MM", "kind": "bootstrap" | "apply", "apply":
StagedApply.to_dict() or None}``; every folder follows from the month and the data root."""


def _target(skewtape: SkewtapeHome, month: str) -> ApplyTarget:
    """The month's apply: the previous month's snapshot, the month's delta, the month's folder."""
    return ApplyTarget(
        skewtape.snapshot_dir(previous_month(month)),
        skewtape.delta_dir(month),
        into=skewtape.snapshot_dir(month),
    )


def _options(skewtape: SkewtapeHome) -> ApplyOptions:
    return ApplyOptions(
        audit_log=skewtape.audit_log,
        lock_timeout=skewtape.lock_timeout,
        link_sources=skewtape.link_sources,
    )


def _staged(step: MonthStep) -> StagedApply | None:
    return StagedApply.from_dict(step["apply"]) if step["apply"] is not None else None


@dg.op(pool=APPLY_POOL, ins={"after_previous_month": dg.In(dg.Nothing)})
def verify_delta(context: dg.OpExecutionContext, skewtape: SkewtapeHome) -> MonthStep:
    """Decide what the month needs; for a delta to apply, hash and check every file of it.
    A refusal (an earlier month not applied, a delta that does not verify, ...) fails the run
    with the reason as its message."""
    month = context.partition_key
    with month_refused(context, skewtape, month):
        plan = plan_month(skewtape.history_dir, skewtape.deltas_dir, month, previous_month(month))
        staged = check_step(_target(skewtape, month)) if plan.kind == "apply" else None
    if staged is not None:
        state = "already applied" if staged.already_applied else f"staged as {staged.run_id}"
        context.log.info(skewtape.shown(f"{plan.delta}: {state}"))
    context.log.info(skewtape.shown(f"{month}: {plan.kind} ({plan.snapshot})"))
    return {"month": month, "kind": plan.kind, "apply": staged.to_dict() if staged else None}


def _staging_op(name: str, step: Callable[..., object], description: str) -> dg.OpDefinition:
    """An op that runs one staging ``step`` of the core's applier on the month's staged apply
    (nothing for a bootstrap month), a refusal failing the run with its reason."""

    @dg.op(name=name, pool=APPLY_POOL, description=description)
    def staging_op(
        context: dg.OpExecutionContext, skewtape: SkewtapeHome, progress: MonthStep
    ) -> MonthStep:
        staged = _staged(progress)
        if staged is not None:
            with month_refused(context, skewtape, progress["month"]):
                step(_target(skewtape, progress["month"]), staged, _options(skewtape))
        return progress

    return staging_op


apply_file_ops = _staging_op(
    "apply_file_ops",
    file_ops_step,
    "Apply the delta's add, replace and delete entries in manifest order (in staging).",
)
merge_tables = _staging_op(
    "merge_tables", merges_step, "Merge the delta's table changes by key with DuckDB (in staging)."
)


@dg.op(pool=APPLY_POOL)
def publish_snapshot(
    context: dg.OpExecutionContext, skewtape: SkewtapeHome, progress: MonthStep
) -> MonthStep:
    """Place `CHECKSUMS.sha256` then `manifest.json` last, verify the staged month, and commit it
    into `history/<month>/` (under the history folder's lock)."""
    staged = _staged(progress)
    if staged is None or staged.already_applied:
        return progress
    with month_refused(context, skewtape, progress["month"]):
        result = publish_step(_target(skewtape, progress["month"]), staged, _options(skewtape))
    published = StagedApply(
        staged.run_id, already_applied=result.already_applied, committed=not result.already_applied
    )
    return {**progress, "apply": published.to_dict()}


@dg.op(pool=APPLY_POOL, out=dg.Out(dg.Nothing))
def verify_month_snapshot(
    context: dg.OpExecutionContext,
    skewtape: SkewtapeHome,
    progress: MonthStep,
    applied: MonthStep,
) -> None:
    """Report the verification of `history/<month>/`; fail the run (a `dagster.Failure` whose
    message is the VerificationError's) if it does not verify. A month applied by this run
    was verified before it was published (the result is read from its journal); a bootstrap
    month or one already applied is verified here.

    On success, records the apply's (or the bootstrap's) metadata on the materialization.
    """
    month, staged = progress["month"], _staged(applied)
    with month_refused(context, skewtape, month):
        if staged is None:
            verified = verify_snapshot(skewtape.snapshot_dir(month))
            described = bootstrap_metadata(verified, month, shown=skewtape.shown)
        else:
            result, verified = applied_step(_target(skewtape, month), staged)
            described = apply_metadata(result, shown=skewtape.shown)
    context.add_output_metadata({**described, **verify_metadata(verified)})


@dg.graph_asset(
    key=HISTORY_SNAPSHOT,
    partitions_def=month_partitions,
    ins={
        "after_previous_month": dg.AssetIn(
            key=HISTORY_SNAPSHOT,
            dagster_type=dg.Nothing,
            partition_mapping=dg.TimeWindowPartitionMapping(start_offset=-1, end_offset=-1),
        )
    },
    group_name="mirror",
    kinds={"parquet"},
    description="`history/<YYYY-MM>/`: the month's verified snapshot, built from the previous "
    "month's snapshot and the month's delta (the first month is the published full snapshot).",
)
def history_snapshot(after_previous_month):
    progress = verify_delta(fetch_delta(after_previous_month))
    merged = merge_tables(apply_file_ops(progress))
    return verify_month_snapshot(progress, publish_snapshot(merged))

"""The monthly history snapshot asset: a graph of ops, each month depending on the month before.

verify_delta -> apply_file_ops -> merge_tables -> publish_snapshot -> verify_month_snapshot:
each op is one journaled step of the core's applier (``apply_delta(stop_after=...)``), so a
failed or killed run is finished by running the month again. The delta's hashes are taken once
(in verify_delta) and trusted by the later steps while the files' stamps are unchanged. The
last op raises when the new snapshot does not verify, so a month that did not verify is never
recorded as materialized. All ops share one concurrency pool (run granularity, limit 1 in
dagster.yaml): one apply at a time.
"""

from dataclasses import dataclass, field
from typing import Any

import dagster as dg

from skewtape_pipeline.mirror.apply import ApplyResult, apply_delta, check_delta, combine_steps
from skewtape_pipeline.mirror.months import MonthPlan, plan_month
from skewtape_pipeline.mirror.preflight import CheckedDelta
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.jobs import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.metadata import (
    apply_metadata,
    bootstrap_metadata,
    verify_metadata,
)
from skewtape_pipeline.orchestration.partitions import month_partitions, previous_month
from skewtape_pipeline.orchestration.resources import SkewtapeHome
from skewtape_pipeline.orchestration.tick_partitions import register_venues
from skewtape_pipeline.ticks.snapshot_fills import new_symbols

APPLY_POOL = "skewtape_apply"
"""The concurrency pool of every op that writes to ``history/``."""


@dataclass(frozen=True)
class MonthProgress:
    """What the month's run has done so far, handed from op to op."""

    plan: MonthPlan
    checked: CheckedDelta | None = None
    """The verified delta; None when there is nothing to apply (bootstrap, already applied)."""
    steps: tuple[ApplyResult, ...] = field(default=())

    @property
    def applying(self) -> bool:
        return self.plan.kind == "apply" and self.checked is not None

    def then(self, step: ApplyResult) -> "MonthProgress":
        return MonthProgress(self.plan, self.checked, (*self.steps, step))


def _apply_step(skewtape: SkewtapeHome, progress: MonthProgress, **step: Any) -> ApplyResult:
    plan = progress.plan
    assert plan.parent is not None and plan.delta is not None
    return apply_delta(
        plan.parent,
        plan.delta,
        into=plan.snapshot,
        audit_log=skewtape.audit_log,
        lock_timeout=skewtape.lock_timeout,
        link_sources=skewtape.link_sources,
        prechecked=progress.checked,
        **step,
    )


@dg.op(pool=APPLY_POOL, ins={"after_previous_month": dg.In(dg.Nothing)})
def verify_delta(context: dg.OpExecutionContext, skewtape: SkewtapeHome) -> MonthProgress:
    """Decide what the month needs; for a delta to apply, hash and check every file of it."""
    month = context.partition_key
    plan = plan_month(skewtape.history_dir, skewtape.deltas_dir, month, previous_month(month))
    checked = None
    if plan.kind == "apply" and plan.delta is not None and plan.parent is not None:
        checked = check_delta(
            plan.parent, plan.delta, into=plan.snapshot, lock_timeout=skewtape.lock_timeout
        )
        state = "already applied" if checked is None else f"{len(checked.hashes)} files verified"
        context.log.info(f"{plan.delta}: {state}")
    context.log.info(f"{month}: {plan.kind} ({plan.snapshot})")
    return MonthProgress(plan, checked)


@dg.op(pool=APPLY_POOL)
def apply_file_ops(skewtape: SkewtapeHome, progress: MonthProgress) -> MonthProgress:
    """Apply the delta's add, replace and delete entries in manifest order (in staging)."""
    if not progress.applying:
        return progress
    return progress.then(_apply_step(skewtape, progress, stop_after="file_ops"))


@dg.op(pool=APPLY_POOL)
def merge_tables(skewtape: SkewtapeHome, progress: MonthProgress) -> MonthProgress:
    """Merge the delta's table changes by key with DuckDB (in staging)."""
    if not progress.applying:
        return progress
    return progress.then(_apply_step(skewtape, progress, stop_after="merges"))


@dg.op(pool=APPLY_POOL)
def publish_snapshot(skewtape: SkewtapeHome, progress: MonthProgress) -> Any:
    """Copy CHECKSUMS.sha256 then manifest.json last, verify, and rename into history/<month>.

    Returns the combined ``ApplyResult`` of the month's steps; for a month already applied the
    core's no-op result; None for a bootstrap month.
    """
    plan = progress.plan
    if plan.kind != "apply":
        return None
    return combine_steps([*progress.steps, _apply_step(skewtape, progress)])


@dg.op(pool=APPLY_POOL, out=dg.Out(dg.Nothing))
def verify_month_snapshot(
    context: dg.OpExecutionContext,
    skewtape: SkewtapeHome,
    progress: MonthProgress,
    applied: Any,
) -> None:
    """Verify ``history/<month>/``; raise VerificationError (failing the run) if it does not.

    On success, registers the venues of the fills files the month added or replaced (the
    tick archive's ``venues`` dimension) and records the apply's (or the bootstrap's)
    metadata on the materialization.
    """
    plan = progress.plan
    verified = verify_snapshot(plan.snapshot)
    registered = register_venues(context.instance, new_symbols(skewtape.history_dir, plan.month))
    described = apply_metadata(applied) if applied else bootstrap_metadata(verified, plan.month)
    context.add_output_metadata(
        {
            **described,
            **verify_metadata(verified),
            "venues_registered": dg.MetadataValue.int(len(registered)),
        }
    )


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
    description="history/<YYYY-MM>/: the month's verified snapshot, built from the previous "
    "month's snapshot and the month's delta (the first month is the published full snapshot).",
)
def history_snapshot(after_previous_month):
    progress = verify_delta(after_previous_month)
    merged = merge_tables(apply_file_ops(progress))
    return verify_month_snapshot(progress, publish_snapshot(merged))

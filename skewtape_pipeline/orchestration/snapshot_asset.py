"""The monthly history snapshot asset: a graph of ops, each month depending on the month before.

verify_delta -> apply_month_delta -> verify_month_snapshot. The last op raises when the new
snapshot does not verify, so a month that did not verify is never recorded as materialized. All
ops share one concurrency pool (run granularity, limit 1 in dagster.yaml): one apply at a time.
"""

from typing import Any

import dagster as dg

from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.mirror.preflight import check_delta_files, read_delta_head
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.arrivals import holds_snapshot
from skewtape_pipeline.orchestration.fill_ticks import new_symbols
from skewtape_pipeline.orchestration.jobs import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.metadata import (
    apply_metadata,
    bootstrap_metadata,
    verify_metadata,
)
from skewtape_pipeline.orchestration.month_plan import MonthPlan, plan_month
from skewtape_pipeline.orchestration.partitions import month_partitions, previous_month
from skewtape_pipeline.orchestration.resources import SkewtapeHome
from skewtape_pipeline.orchestration.tick_partitions import register_symbols

APPLY_POOL = "skewtape_apply"
"""The concurrency pool of every op that writes to ``history/``."""


@dg.op(pool=APPLY_POOL, ins={"after_previous_month": dg.In(dg.Nothing)})
def verify_delta(context: dg.OpExecutionContext, skewtape: SkewtapeHome) -> MonthPlan:
    """Decide what the month needs; for a delta to apply, hash and check every file of it."""
    month = context.partition_key
    plan = plan_month(skewtape.history_dir, skewtape.deltas_dir, month, previous_month(month))
    if plan.kind == "apply" and plan.delta is not None:
        head = read_delta_head(plan.delta)
        if holds_snapshot(plan.snapshot, head.manifest.next.manifest_sha256):
            context.log.info(f"{plan.snapshot} already holds {head.manifest.next.bundle_id}")
        else:
            checked = check_delta_files(head)
            context.log.info(f"{plan.delta}: {len(checked.hashes)} files match their checksums")
    context.log.info(f"{month}: {plan.kind} ({plan.snapshot})")
    return plan


@dg.op(pool=APPLY_POOL)
def apply_month_delta(
    context: dg.OpExecutionContext, skewtape: SkewtapeHome, plan: MonthPlan
) -> Any:
    """Apply the month's delta into ``history/<month>/`` (a no-op when it is already there).

    Returns the core's ``ApplyResult``, or None when the month has no delta to apply.
    """
    if plan.kind != "apply":
        return None
    assert plan.parent is not None and plan.delta is not None
    return apply_delta(
        plan.parent,
        plan.delta,
        into=plan.snapshot,
        audit_log=skewtape.audit_log,
        lock_timeout=skewtape.lock_timeout,
        link_sources=skewtape.link_sources,
    )


@dg.op(pool=APPLY_POOL, out=dg.Out(dg.Nothing))
def verify_month_snapshot(
    context: dg.OpExecutionContext, skewtape: SkewtapeHome, plan: MonthPlan, applied: Any
) -> None:
    """Verify ``history/<month>/``; raise VerificationError (failing the run) if it does not.

    On success, registers the symbols of the fills files the month added or replaced (the
    tick archive's ``symbols`` dimension) and records the apply's (or the bootstrap's)
    metadata on the materialization.
    """
    verified = verify_snapshot(plan.snapshot)
    registered = register_symbols(context.instance, new_symbols(skewtape.history_dir, plan.month))
    described = apply_metadata(applied) if applied else bootstrap_metadata(verified, plan.month)
    context.add_output_metadata(
        {
            **described,
            **verify_metadata(verified),
            "symbols_registered": dg.MetadataValue.int(len(registered)),
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
    plan = verify_delta(after_previous_month)
    return verify_month_snapshot(plan, apply_month_delta(plan))

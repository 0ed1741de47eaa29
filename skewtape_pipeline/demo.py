"""``python -m skewtape_pipeline.demo ROOT``: the sample chain, run through the definitions.

Publishes the sample into ``ROOT`` if it holds no history yet, then runs the ``apply_month`` job
of the code location in process (no daemon, an ephemeral instance) for every month partition
that has a snapshot or a delta, oldest first, and prints what was materialized and where. Then
it runs the ``archive_ticks`` job for the busiest complete day of each applied month over all
registered symbols (one run per day, as a UI backfill does) and prints the compaction reports.
Rerunning it is safe: months already applied are verified and reported as such, symbol-days
are rewritten in place.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import dagster as dg

from skewtape_pipeline.definitions import build_definitions
from skewtape_pipeline.orchestration.arrivals import delta_months
from skewtape_pipeline.orchestration.fill_ticks import days_by_activity
from skewtape_pipeline.orchestration.partitions import month_partitions
from skewtape_pipeline.orchestration.resources import SkewtapeHome
from skewtape_pipeline.orchestration.tick_partitions import SYMBOLS, day_partitions
from skewtape_pipeline.sample.publisher import publish_sample

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
DEMO_FILLS_PER_VENUE_MONTH = 2_000
"""Fills per venue and month when the demo publishes the sample itself: a few hundred symbols,
so archiving a day over all of them takes seconds (each partition costs Dagster ~10 ms)."""


@dataclass
class MonthOutcome:
    """One month's run: whether it succeeded, its materialization metadata, its checks."""

    month: str
    success: bool
    metadata: dict[str, object] = field(default_factory=dict)
    checks_passed: int = 0
    checks_failed: int = 0
    error: str = ""


def months_to_run(skewtape: SkewtapeHome) -> tuple[list[str], list[str]]:
    """(month partitions with a snapshot or a delta in order, delta months not partitions yet)."""
    keys = month_partitions.get_partition_keys()
    have = {p.name for p in skewtape.history_dir.glob("????-??")}
    have |= set(delta_months(skewtape.deltas_dir))
    return [m for m in keys if m in have], sorted(have - set(keys))


@dataclass
class DemoResult:
    """The months run and the tick archive reports (one dict of metadata per symbol-day)."""

    months: list[MonthOutcome]
    days: list[str] = field(default_factory=list)
    reports: list[dict[str, object]] = field(default_factory=list)
    archive_ok: bool = True


def run_demo(root: Path, *, fills_per_venue_month: int = DEMO_FILLS_PER_VENUE_MONTH) -> DemoResult:
    """Publish the sample into ``root`` if absent, materialize its months in order, then
    archive the busiest complete day of each applied month over all symbols.

    Stops at the first month that fails (later months depend on it). Raises the sample
    publisher's errors if publishing is refused.
    """
    skewtape = SkewtapeHome(root=str(root))
    if not skewtape.history_dir.exists():
        publish_sample(skewtape.root_dir, fills_per_venue_month=fills_per_venue_month)
    defs = build_definitions(skewtape)
    outcomes: list[MonthOutcome] = []
    months, _ = months_to_run(skewtape)
    with dg.DagsterInstance.ephemeral() as instance:
        for month in months:
            result = defs.resolve_job_def("apply_month").execute_in_process(
                partition_key=month, instance=instance, run_config=QUIET_LOGS, raise_on_error=False
            )
            outcomes.append(_outcome(month, result))
            if not result.success:
                return DemoResult(outcomes)
        demo = DemoResult(outcomes)
        archive_job = defs.resolve_job_def("archive_ticks")
        symbols = instance.get_dynamic_partitions(SYMBOLS)
        for month in months:
            day = next(
                (d for d in days_by_activity(skewtape.history_dir, month)
                 if day_partitions.has_partition_key(d.isoformat())),
                None,
            )  # fmt: skip
            if day is None or not symbols:
                continue
            result = archive_job.execute_in_process(
                instance=instance,
                run_config=QUIET_LOGS,
                raise_on_error=False,
                tags={
                    "dagster/asset_partition_range_start": f"{day}|{symbols[0]}",
                    "dagster/asset_partition_range_end": f"{day}|{symbols[-1]}",
                },
            )
            demo.days.append(day.isoformat())
            demo.archive_ok &= result.success
            for event in result.asset_materializations_for_node("tick_archive"):
                metadata = {k: getattr(v, "value", v) for k, v in event.metadata.items()}
                if metadata.get("tick_count"):
                    demo.reports.append(metadata)
    return demo


def _outcome(month: str, result: dg.ExecuteInProcessResult) -> MonthOutcome:
    outcome = MonthOutcome(month=month, success=result.success)
    for event in result.asset_materializations_for_node("history_snapshot"):
        outcome.metadata = {k: getattr(v, "value", v) for k, v in event.metadata.items()}
    for check in result.get_asset_check_evaluations():
        if check.passed:
            outcome.checks_passed += 1
        else:
            outcome.checks_failed += 1
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    if failures:
        error = failures[0].event_specific_data.error
        outcome.error = (error.cause or error).message.strip().splitlines()[-1]
    return outcome


def format_summary(outcomes: Sequence[MonthOutcome], pending: Sequence[str] = ()) -> str:
    """A plain-text table of the outcomes, one line per month, and the months left waiting."""
    header = (
        f"{'month':<8} {'result':<10} {'bundle':<28} {'+files':>6} {'~files':>6} {'-files':>6} "
        f"{'rows up':>8} {'rows del':>8} {'checks':>7}  snapshot"
    )
    lines = [header, "-" * len(header)]
    for o in outcomes:
        md = o.metadata
        result = _result_word(o)
        lines.append(
            f"{o.month:<8} {result:<10} {md.get('next_bundle_id', '')!s:<28} "
            f"{md.get('files_added', 0):>6} {md.get('files_replaced', 0):>6} "
            f"{md.get('files_deleted', 0):>6} {md.get('rows_upserted', 0):>8} "
            f"{md.get('rows_deleted', 0):>8} "
            f"{o.checks_passed}/{o.checks_passed + o.checks_failed:<5}  {md.get('snapshot', '')}"
        )
        if o.error:
            lines.append(f"         error: {o.error}")
    for month in pending:
        lines.append(f"{month:<8} waiting    (not a month partition until the month starts)")
    return "\n".join(lines)


def format_reports(reports: Sequence[dict[str, object]], *, shown: int = 12) -> str:
    """The busiest symbol-days' compaction reports as a table, then totals per day."""
    header = (
        f"{'symbol':<44} {'date':<10} {'ticks':>6} {'raw B':>7} {'packed B':>8} {'ratio':>6} "
        f"{'target':>6} {'tier':<5} {'codec':<9} {'reord':>5}"
    )
    lines = [header, "-" * len(header)]
    busiest = sorted(reports, key=lambda r: (-int(r["tick_count"]), str(r["symbol"])))
    for r in busiest[:shown]:
        lines.append(
            f"{str(r['symbol'])[:44]:<44} {r['date']!s:<10} {r['tick_count']:>6} "
            f"{r['raw_size_bytes']:>7} {r['compacted_size_bytes']:>8} "
            f"{float(r['compression_ratio']):>6.2f} "
            f"{'met' if r['meets_compression_target'] else 'missed':>6} {r['tier']!s:<5} "
            f"{r['codec']!s}-{r['compression_level']!s:<4} {r['reordered_ticks']:>5}"
        )
    by_day: dict[str, list[dict[str, object]]] = {}
    for r in reports:
        by_day.setdefault(str(r["date"]), []).append(r)
    lines.append("")
    for day, group in sorted(by_day.items()):
        raw = sum(int(r["raw_size_bytes"]) for r in group)
        packed = sum(int(r["compacted_size_bytes"]) for r in group)
        met = sum(bool(r["meets_compression_target"]) for r in group)
        lines.append(
            f"{day}: {len(group)} symbol-days, {sum(int(r['tick_count']) for r in group)} ticks, "
            f"{raw} -> {packed} bytes ({raw / packed:.2f}x over all files), "
            f"{met}/{len(group)} meet the target, raw size basis "
            f"{', '.join(sorted({str(r['raw_size_basis']) for r in group}))}"
        )
    return "\n".join(lines)


def _result_word(outcome: MonthOutcome) -> str:
    if not outcome.success:
        return "FAILED"
    mode = outcome.metadata.get("mode")
    if mode == "bootstrap":
        return "bootstrap"
    return "unchanged" if outcome.metadata.get("already_applied") else "applied"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every month materialized, 1 otherwise."""
    parser = argparse.ArgumentParser(prog="python -m skewtape_pipeline.demo", description=__doc__)
    parser.add_argument("root", help="data root (the sample is published here if absent)")
    args = parser.parse_args(argv)
    root = Path(args.root)
    demo = run_demo(root)
    _, pending = months_to_run(SkewtapeHome(root=str(root)))
    print(f"Materialized history_snapshot in process from {root.resolve()}:")
    print(format_summary(demo.months, pending))
    if demo.days:
        archive = SkewtapeHome(root=str(root)).archive_dir
        print(f"\nMaterialized tick_archive for {', '.join(demo.days)} over all symbols "
              f"into {archive}:")  # fmt: skip
        print(format_reports(demo.reports))
    months_ok = bool(demo.months) and all(o.success for o in demo.months)
    return 0 if months_ok and demo.archive_ok else 1


if __name__ == "__main__":
    sys.exit(main())

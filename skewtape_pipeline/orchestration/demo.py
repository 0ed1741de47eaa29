"""``python -m skewtape_pipeline.orchestration.demo ROOT``: the sample chain, run in process.

When ``ROOT`` holds no history yet, publishes the sample into ``ROOT/publisher`` (a local
publisher) and fetches its first snapshot and deltas from there, as ``sync`` does; then runs the
``apply_month`` job of the code location in process (no daemon), recording into the Dagster
instance of ``ROOT/dagster_home`` (the one ``make ui`` opens, so its runs and materializations
show there), for every month partition that has a snapshot or a delta, oldest first, and prints
what was materialized and where. Then it registers the applied months' venues as the venues
sensor would (no daemon runs it here), runs the ``archive_ticks`` job for the busiest complete
day of each applied month over all registered venues (one run per day, as a UI backfill does)
and prints the compaction reports. Last, it runs the ``retier_ticks`` job over those months
twice, as of two days in the future (the newest archived day aged just past the hot, then the
warm limit), so the archived days move hot -> warm -> cold, and prints the tiers and a query
through the ``ticks`` view at each stage. Rerunning it is safe: months already applied are
verified and reported as such, symbol-days are rewritten in place, and re-tiering finds their
rows already moved (the same bytes), so it only removes the rewritten copies.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import date, timedelta
from pathlib import Path

import dagster as dg

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.locations import DATA_ROOT_EXPECTED, refuse_url
from skewtape_pipeline.mirror.arrivals import delta_months
from skewtape_pipeline.mirror.fetch import fetch_deltas, fetch_snapshot
from skewtape_pipeline.mirror.remote import newest_snapshot_month
from skewtape_pipeline.mirror.sources import open_source
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.partitions import month_partitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.partitions import VENUES, day_partitions
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.tier_assets import retier_run_config
from skewtape_pipeline.orchestration.ticks.venues import register_applied_venues
from skewtape_pipeline.sample.publisher import publish_sample
from skewtape_pipeline.ticks.archive.store.policy import TIERS
from skewtape_pipeline.ticks.fills.snapshot_fills import days_by_activity

QUIET_LOGS = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
VIEW_BY_TIER = "SELECT tier, count(*) AS ticks, sum(quantity) AS contracts FROM ticks GROUP BY tier"
VIEW_SYMBOL_DAY = (
    "SELECT tier, count(*) AS ticks, sum(quantity) AS contracts, min(ts) AS first, "
    "max(ts) AS last FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ? GROUP BY tier"
)
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
class TierStage:
    """The archive after one step: its numbers per tier and what the ``ticks`` view returns."""

    name: str
    as_of: str
    success: bool = True
    moved: int = 0
    stats: dict[str, object] = field(default_factory=dict)
    """``tick_archive_stats`` metadata (``hot_files``, ``cold_bytes``, ...)."""
    view: dict[str, tuple[int, int]] = field(default_factory=dict)
    """{tier: (ticks, contracts)} through the view."""
    query: tuple[str, str] = ("", "")
    """(symbol, date) of the busiest archived symbol-day, asked through the view."""
    answer: list[dict[str, object]] = field(default_factory=list)
    """What the view returns for it with :data:`VIEW_SYMBOL_DAY` (one row per tier)."""
    compression: list[dict[str, object]] = field(default_factory=list)
    """The ``compression_target_met`` check's row per consolidated file the run wrote."""


@dataclass
class DemoResult:
    """The months run, the tick archive reports (one ``tick_reports`` row per symbol-day) and the
    re-tiering stages (as archived, then after each re-tiering run)."""

    months: list[MonthOutcome]
    days: list[str] = field(default_factory=list)
    reports: list[dict[str, object]] = field(default_factory=list)
    archive_ok: bool = True
    stages: list[TierStage] = field(default_factory=list)
    fetched: list[str] = field(default_factory=list)
    """What was fetched from the local publisher (one line per month), when the root was new."""

    @property
    def tiers_ok(self) -> bool:
        return all(stage.success for stage in self.stages)


PUBLISHER_DIR = "publisher"
"""The local publisher the demo follows, inside the data root: the sample as published."""


def follow_local_publisher(root: Path, fills_per_venue_month: int) -> list[str]:
    """Publish the sample into ``root/publisher`` (once) and fetch from it what ``sync`` would:
    its first snapshot, then every delta (the apply is left to the month runs); returns one
    line per month fetched."""
    publisher = root / PUBLISHER_DIR
    if not (publisher / "history").exists():
        root.mkdir(exist_ok=True)  # the data root itself, inside an existing folder
        publish_sample(publisher, fills_per_venue_month=fills_per_venue_month)
    first = newest_snapshot_month(open_source(str(publisher)), now="2026-09")
    months = fetch_snapshot(str(publisher), root, first).months
    months += fetch_deltas(str(publisher), root).months
    return [f"{m.folder}: {m.files} files, {m.bytes_fetched} bytes verified" for m in months]


def run_demo(root: Path, *, fills_per_venue_month: int = DEMO_FILLS_PER_VENUE_MONTH) -> DemoResult:
    """Publish the sample into ``root`` if absent, materialize its months in order, then
    archive the busiest complete day of each applied month over all symbols.

    Stops at the first month that fails (later months depend on it). Raises the sample
    publisher's errors if publishing is refused.
    """
    skewtape = SkewtapeHome(root=str(root))
    fetched: list[str] = []
    if not skewtape.history_dir.exists():
        fetched = follow_local_publisher(skewtape.root_dir, fills_per_venue_month)
    defs = build_definitions(skewtape)
    outcomes: list[MonthOutcome] = []
    months, _ = months_to_run(skewtape)
    with open_instance(skewtape) as instance:
        for month in months:
            result = defs.resolve_job_def("apply_month").execute_in_process(
                partition_key=month, instance=instance, run_config=QUIET_LOGS, raise_on_error=False
            )
            outcomes.append(_outcome(month, result))
            if not result.success:
                return DemoResult(outcomes, fetched=fetched)
        demo = DemoResult(outcomes, fetched=fetched)
        register_applied_venues(instance, skewtape.history_dir)
        archive_job = defs.resolve_job_def("archive_ticks")
        venues = sorted(instance.get_dynamic_partitions(VENUES))
        for month in months:
            day = next(
                (d for d in days_by_activity(skewtape.history_dir, month)
                 if day_partitions.has_partition_key(d.isoformat())),
                None,
            )  # fmt: skip
            if day is None or not venues:
                continue
            result = archive_job.execute_in_process(
                instance=instance,
                run_config=QUIET_LOGS,
                raise_on_error=False,
                tags={
                    "dagster/asset_partition_range_start": f"{day}|{venues[0]}",
                    "dagster/asset_partition_range_end": f"{day}|{venues[-1]}",
                },
            )
            demo.days.append(day.isoformat())
            demo.archive_ok &= result.success
            demo.reports += archived_reports(skewtape, day, result.run_id)
        if demo.reports:
            demo.stages = retier_stages(defs, instance, skewtape, demo)
    return demo


def open_instance(skewtape: SkewtapeHome) -> dg.DagsterInstance:
    """The persistent Dagster instance of the data root (``dagster_home/``, created when absent,
    with its ``dagster.yaml`` when ``make`` copied one there): the instance ``make ui`` opens."""
    skewtape.dagster_home.mkdir(parents=True, exist_ok=True)
    return dg.DagsterInstance.from_config(str(skewtape.dagster_home))


def archived_reports(skewtape: SkewtapeHome, day: date, run_id: str) -> list[dict[str, object]]:
    """The reports of the symbol-days a run archived on ``day`` (rows of ``tick_reports``;
    ``path`` made absolute, ``date`` ISO)."""
    sql = (
        "SELECT * FROM tick_reports WHERE date = ? AND batch = ? AND status = 'archived' "
        "ORDER BY symbol"
    )
    rows = ArchiveSettings().open(skewtape).query(sql, parameters=[day, run_id]).to_pylist()
    return [
        row | {"path": str(skewtape.archive_dir / row["path"]), "date": row["date"].isoformat()}
        for row in rows
    ]


def retier_stages(
    defs: dg.Definitions, instance: dg.DagsterInstance, skewtape: SkewtapeHome, demo: DemoResult
) -> list[TierStage]:
    """Re-tier the archived months twice (one ``retier_ticks`` run each, over all of them, as a
    UI backfill does): as of the newest day aged past the hot limit, then past the warm limit.

    Returns the archive as archived and after each run (stopping at a failed run).
    """
    tick_archive = ArchiveSettings().open(skewtape)
    policy = tick_archive.policy
    busiest = max(demo.reports, key=lambda r: (int(r["tick_count"]), str(r["symbol"])))
    symbol_day = (str(busiest["symbol"]), str(busiest["date"]))
    archived = tick_archive.stats().to_dict()
    stages = [_stage(TierStage("archived", "-", stats=archived), skewtape, symbol_day)]
    months = sorted({day[:7] for day in demo.days})
    newest = date.fromisoformat(max(demo.days))
    steps = (("hot -> warm", policy.hot_max_age_days), ("warm -> cold", policy.warm_max_age_days))
    for name, limit in steps:
        stage = _retier_run(defs, instance, months, newest + timedelta(days=limit + 1), name)
        stages.append(_stage(stage, skewtape, symbol_day))
        if not stage.success:
            break
    return stages


def _retier_run(
    defs: dg.Definitions, instance: dg.DagsterInstance, months: list[str], as_of: date, name: str
) -> TierStage:
    """One ``retier_ticks`` run over ``months`` as of ``as_of``: moves counted, stats kept."""
    result = defs.resolve_job_def("retier_ticks").execute_in_process(
        instance=instance,
        run_config={**QUIET_LOGS, **retier_run_config(as_of)},
        raise_on_error=False,
        tags={
            "dagster/asset_partition_range_start": months[0],
            "dagster/asset_partition_range_end": months[-1],
        },
    )
    stage = TierStage(name, as_of.isoformat(), success=result.success)
    for check in result.get_asset_check_evaluations():
        files = check.metadata.get("files")
        stage.compression += [record.data for record in getattr(files, "records", [])]
    for event in result.get_asset_materialization_events():
        materialization = event.materialization
        values = {k: getattr(v, "value", v) for k, v in materialization.metadata.items()}
        if materialization.asset_key.path[-1] == "tick_archive_stats":
            stage.stats = values
        else:
            stage.moved += int(values.get("symbol_days_moved", 0))
    return stage


def _stage(stage: TierStage, skewtape: SkewtapeHome, symbol_day: tuple[str, str]) -> TierStage:
    """``stage`` with what the ``ticks`` view returns now (per tier, and for ``symbol_day``)."""
    tick_archive = ArchiveSettings().open(skewtape)
    rows = tick_archive.query(VIEW_BY_TIER).to_pylist()
    stage.view = {str(r["tier"]): (int(r["ticks"]), int(r["contracts"])) for r in rows}
    symbol, day = stage.query = symbol_day
    stage.answer = tick_archive.query(VIEW_SYMBOL_DAY, parameters=[symbol, day, day]).to_pylist()
    return stage


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
        changes = [r.data["change"] for r in getattr(md.get("tables"), "records", [])]
        if changes and "merged by key" not in changes:
            lines.append(
                "         the reference tables came whole (replaced files, a schema change): "
                "no rows merged"
            )
    for month in pending:
        lines.append(f"{month:<8} waiting    (not a month partition until the month starts)")
    return "\n".join(lines)


SYMBOL_WIDTH = 40


def fit(text: str, width: int) -> str:
    """``text`` cut to ``width`` characters, ending in an ellipsis when it was longer."""
    return text if len(text) <= width else text[: width - 1] + "…"


def format_reports(reports: Sequence[dict[str, object]], *, shown: int = 12) -> str:
    """The busiest symbol-days' compaction reports as a table (saying how many of how many),
    what the numbers mean, then totals per day."""
    header = (
        f"{'symbol':<{SYMBOL_WIDTH}} {'date':<10} {'ticks':>6} {'raw B':>7} {'file B':>7} "
        f"{'ratio':>6}  {'written with':<18} {'reordered':>9}"
    )
    busiest = sorted(reports, key=lambda r: (-int(r["tick_count"]), str(r["symbol"])))
    listed = min(shown, len(busiest))
    lines = [
        f"The {listed} busiest of {len(reports)} symbol-days with ticks (each is listed in the "
        "metadata of its venue-day, a partition of tick_archive in the UI):",
        header,
        "-" * len(header),
    ]
    for r in busiest[:shown]:
        written_with = f"{r['codec']!s}-{r['compression_level']!s} ({str(r['tier']).lower()})"
        lines.append(
            f"{fit(str(r['symbol']), SYMBOL_WIDTH):<{SYMBOL_WIDTH}} {r['date']!s:<10} "
            f"{r['tick_count']:>6} {r['raw_size_bytes']:>7} {r['compacted_size_bytes']:>7} "
            f"{float(r['compression_ratio']):>6.2f}  {written_with:<18} "
            f"{r['reordered_ticks']:>9}"
        )
    lines += [
        "",
        "Each symbol-day is first written as its own file in the hot layout",
        "(archive/symbol=.../date=.../part-0.parquet), with the codec of the tier its age calls",
        'for ("written with": a day over 7 days old gets the warm tier\'s zstd-9).',
    ]
    if any(float(r["compression_ratio"]) < 1 for r in busiest[:shown]):  # not on a rerun's
        lines += [  # reports, which are those of the consolidated copies
            "A file of a few dozen trades is mostly Parquet footer, so it is larger than its CSV",
            "(ratio below 1).",
        ]
    lines += [
        "The compression target is judged on the consolidated files re-tiering writes (below).",
        "",
    ]
    by_day: dict[str, list[dict[str, object]]] = {}
    for r in reports:
        by_day.setdefault(str(r["date"]), []).append(r)
    for day, group in sorted(by_day.items()):
        raw = sum(int(r["raw_size_bytes"]) for r in group)
        packed = sum(int(r["compacted_size_bytes"]) for r in group)
        lines.append(
            f"{day}: {len(group)} symbol-days, {sum(int(r['tick_count']) for r in group)} ticks, "
            f"{raw} -> {packed} bytes ({raw / packed:.2f}x over all files); raw size: "
            f"{', '.join(sorted({str(r['raw_size_basis']) for r in group}))}"
        )
    return "\n".join(lines)


TIER_FOLDERS = {"HOT": "archive/", "WARM": "archive-warm/", "COLD": "archive-cold/"}
"""Where each tier lives under the data root (the default tier policy's roots)."""


def format_stages(stages: Sequence[TierStage]) -> str:
    """The archive per tier and folder after each stage (files, bytes, ticks from
    ``tick_archive_stats``; ticks and contracts through the ``ticks`` view), copies hidden by
    newer hot files, the compression of each consolidated file written, then the busiest
    symbol-day's query."""
    header = (
        f"{'stage':<13} {'as_of':<10} {'moved':>5}  {'tier':<4} {'folder':<14} {'files':>5} "
        f"{'bytes':>8} {'ticks':>6} {'B/tick':>7}  {'view ticks':>10} {'contracts':>9}"
    )
    lines = [header, "-" * len(header)]
    for stage in stages:
        moved = "-" if stage.name == "archived" else str(stage.moved)
        first = f"{stage.name:<13} {stage.as_of:<10} {moved:>5}"
        if not stage.success:
            lines.append(f"{first}  FAILED")
            continue
        for index, tier in enumerate(TIERS):
            prefix = first if index == 0 else " " * len(first)
            name = tier.lower()
            ticks, nbytes = (
                int(stage.stats.get(f"{name}_ticks", 0)),
                int(stage.stats.get(f"{name}_bytes", 0)),
            )
            per_tick = f"{nbytes / ticks:.1f}" if ticks else "-"
            view_ticks, contracts = stage.view.get(tier, (0, 0))
            lines.append(
                f"{prefix}  {tier:<4} {TIER_FOLDERS[tier]:<14} "
                f"{stage.stats.get(f'{name}_files', 0):>5} {nbytes:>8} {ticks:>6} {per_tick:>7}  "
                f"{view_ticks:>10} {contracts:>9}"
            )
        lines += _stage_notes(stage)
    if stages and stages[0].query[0]:
        symbol, day = stages[0].query
        lines += ["", f"{VIEW_SYMBOL_DAY}", f"  with symbol = {symbol!r}, date {day} .. {day}:"]
        for stage in stages:
            answers = "; ".join(
                f"{r['tier']}: {r['ticks']} ticks, {r['contracts']} contracts, "
                f"{r['first']} .. {r['last']}"
                for r in stage.answer
            )
            lines.append(f"  {stage.name:<13} {answers or '(no rows)'}")
    if any(stage.compression for stage in stages):
        settings = ArchiveSettings()
        note = COMPRESSION_NOTE.format(
            target=settings.target_ratio, ticks=settings.target_min_ticks
        )
        lines += ["", note]
    return "\n".join(lines)


def _stage_notes(stage: TierStage) -> list[str]:
    """Indented lines under a stage: hidden copies, and each consolidated file's compression."""
    pad = " " * 16
    notes = []
    hidden = int(stage.stats.get("hidden_ticks", 0))
    if hidden:
        notes.append(
            f"{pad}{hidden} ticks in consolidated files are hidden: their days were compacted "
            f"again (a rerun),\n{pad}and the newer hot copy wins until re-tiering replaces the "
            "old one"
        )
    for row in stage.compression:
        verdict = str(row["verdict"]).replace("not judged (too small)", "not judged, too small")
        notes.append(
            f"{pad}wrote {Path(str(row['file'])).name}: {row['ticks']} ticks, "
            f"{row['csv_bytes']} B of CSV -> {row['bytes']} B ({row['ratio']}x; target {verdict})"
        )
    return notes


COMPRESSION_NOTE = (
    "The compression target ({target:g}x over CSV) is judged on consolidated files of {ticks:,} "
    "ticks or more (the\ncompression_target_met check of tick_archive_tiers): below that, a "
    "file's footer and page headers\ndecide its ratio. The real Kalshi trades file (16,281 "
    "ticks, 2023-2025) re-tiered cold makes three\nyearly files of 2,715 to 9,605 ticks at "
    "6.0x to 6.5x."
)


def next_steps(root: Path) -> str:
    """What to do after the demo: open the UI over ``root``, query the archive's view."""
    cli = Path(sys.executable).parent / "skewtape-pipeline"
    command = _shown_path(cli) if cli.exists() else "skewtape-pipeline"
    skewtape = SkewtapeHome(root=str(root))
    archive = _shown_path(skewtape.archive_dir)
    query = "SELECT tier, count(*) AS ticks, sum(quantity) AS contracts FROM ticks GROUP BY tier"
    return "\n".join(
        [
            "",
            "Next:",
            f"  make ui SKEWTAPE_HOME={_shown_path(Path(root))}",
            "      the Dagster UI over this data root on http://127.0.0.1:3000: the assets, their",
            "      metadata and checks, the runs above (recorded in the instance",
            f"      {_shown_path(skewtape.dagster_home)}); switch sensors and schedules on there",
            f'  {command} query "{query}" \\',
            f"      --archive {archive}",
            "      SQL over the view `ticks`, which spans every tier (any DuckDB SQL works)",
        ]
    )


def _shown_path(path: Path) -> str:
    """``path`` relative to the working folder when it is inside it, else absolute."""
    absolute = path.absolute()
    try:
        return str(absolute.relative_to(Path.cwd()))
    except ValueError:
        return str(absolute)


def _result_word(outcome: MonthOutcome) -> str:
    if not outcome.success:
        return "FAILED"
    mode = outcome.metadata.get("mode")
    if mode == "bootstrap":
        return "bootstrap"
    return "unchanged" if outcome.metadata.get("already_applied") else "applied"


def main(argv: Sequence[str] | None = None) -> int:
    """Run the demo; 0 when every month materialized, 1 otherwise, 2 (one line, nothing
    created) when the root is a ``scheme://`` URL (``make demo``'s SKEWTAPE_HOME)."""
    parser = argparse.ArgumentParser(
        prog="python -m skewtape_pipeline.orchestration.demo", description=__doc__
    )
    parser.add_argument("root", help="data root (the sample is published here if absent)")
    args = parser.parse_args(argv)
    try:
        root = Path(refuse_url(args.root, "root", DATA_ROOT_EXPECTED))
    except ConfigError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    demo = run_demo(root)
    _, pending = months_to_run(SkewtapeHome(root=str(root)))
    if demo.fetched:
        print(f"Fetched from the local publisher {root.resolve() / PUBLISHER_DIR} (what "
              "`skewtape-pipeline sync` does before it applies):")  # fmt: skip
        print("\n".join(f"  {line}" for line in demo.fetched) + "\n")
    home = SkewtapeHome(root=str(root)).dagster_home
    print(f"Materialized history_snapshot in process from {root.resolve()} ($SKEWTAPE_HOME "
          "below, as the UI names it), recording the runs "
          f"in the Dagster instance {home} (the one `make ui` opens):")  # fmt: skip
    print(format_summary(demo.months, pending))
    if demo.days:
        archive = SkewtapeHome(root=str(root)).archive_dir
        print(f"\nMaterialized tick_archive for {', '.join(demo.days)} (the busiest complete day "
              f"of each month) over all symbols into {archive}:")  # fmt: skip
        print(format_reports(demo.reports))
    if demo.stages:
        months = sorted({day[:7] for day in demo.days})
        print(f"\nMaterialized tick_archive_tiers for {months[0]}..{months[-1]} twice (as of the "
              "days the newest one ages past the hot, then the warm limit), each time with "
              "tick_archive_stats (tiers as measured; view: what the `ticks` view "
              "returns):")  # fmt: skip
        print(format_stages(demo.stages))
    print(next_steps(root))
    months_ok = bool(demo.months) and all(o.success for o in demo.months)
    return 0 if months_ok and demo.archive_ok and demo.tiers_ok else 1


if __name__ == "__main__":
    sys.exit(main())

"""Turning the core's result objects into Dagster metadata (and a markdown summary)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import dagster as dg

MAX_LISTED = 50
"""How many paths a metadata list shows before it says how many more there are."""


def _label(table: str) -> str:
    return table.removesuffix(".parquet")


def _paths(paths: Sequence[Any]) -> list[str]:
    shown = [str(path) for path in paths[:MAX_LISTED]]
    if len(paths) > MAX_LISTED:
        shown.append(f"... and {len(paths) - MAX_LISTED} more")
    return shown


def apply_metadata(result: Any) -> dict[str, dg.MetadataValue]:
    """Metadata of an apply: bundle ids, file and row counts, bytes, seconds per phase, path.

    ``result`` is the core's ``ApplyResult``. Per-table and per-phase numbers get their own
    entries (``rows_upserted.markets``, ``seconds.merges``) so the UI can plot them over months.
    """
    metadata: dict[str, dg.MetadataValue] = {
        "parent_bundle_id": dg.MetadataValue.text(result.parent_bundle_id),
        "next_bundle_id": dg.MetadataValue.text(result.next_bundle_id),
        "mode": dg.MetadataValue.text(result.mode),
        "already_applied": dg.MetadataValue.bool(result.already_applied),
        "snapshot": dg.MetadataValue.path(str(result.snapshot)),
        "files_added": dg.MetadataValue.int(len(result.files_added)),
        "files_replaced": dg.MetadataValue.int(len(result.files_replaced)),
        "files_deleted": dg.MetadataValue.int(len(result.files_deleted)),
        "files_linked": dg.MetadataValue.int(result.files_linked),
        "file_changes": dg.MetadataValue.json(
            {
                "added": _paths(result.files_added),
                "replaced": _paths(result.files_replaced),
                "deleted": _paths(result.files_deleted),
            }
        ),
        "rows_upserted": dg.MetadataValue.int(sum(result.rows_upserted.values())),
        "rows_deleted": dg.MetadataValue.int(sum(result.rows_deleted.values())),
        "bytes_read": dg.MetadataValue.int(result.bytes_read),
        "bytes_written": dg.MetadataValue.int(result.bytes_written),
        "seconds": dg.MetadataValue.float(float(sum(result.seconds.values()))),
    }
    metadata |= _per_key("rows_upserted", result.rows_upserted, dg.MetadataValue.int)
    metadata |= _per_key("rows_deleted", result.rows_deleted, dg.MetadataValue.int)
    metadata |= _per_key("seconds", result.seconds, lambda v: dg.MetadataValue.float(float(v)))
    metadata["summary"] = dg.MetadataValue.md(apply_summary(result))
    return metadata


def _per_key(prefix: str, values: Mapping[str, Any], make) -> dict[str, dg.MetadataValue]:
    return {f"{prefix}.{_label(key)}": make(value) for key, value in sorted(values.items())}


def apply_summary(result: Any) -> str:
    """A short markdown summary of an apply (what changed, how long each phase took)."""
    if result.already_applied:
        head = f"`{result.snapshot}` already holds **{result.next_bundle_id}**; nothing was done."
    else:
        head = (
            f"**{result.parent_bundle_id}** -> **{result.next_bundle_id}** ({result.mode}) "
            f"in `{result.snapshot}`: {len(result.files_added)} file(s) added, "
            f"{len(result.files_replaced)} replaced, {len(result.files_deleted)} deleted."
        )
    tables = sorted(set(result.rows_upserted) | set(result.rows_deleted))
    lines = [head, ""]
    if tables:
        lines += ["| table | rows upserted | rows deleted |", "|---|---:|---:|"]
        upserted, deleted = result.rows_upserted, result.rows_deleted
        lines += [
            f"| {table} | {upserted.get(table, 0)} | {deleted.get(table, 0)} |" for table in tables
        ]
        lines.append("")
    if result.seconds:
        lines += ["| phase | seconds |", "|---|---:|"]
        lines += [f"| {phase} | {seconds:.3f} |" for phase, seconds in result.seconds.items()]
    return "\n".join(lines)


def verify_metadata(result: Any) -> dict[str, dg.MetadataValue]:
    """Metadata of a snapshot verification: bundle id, files checked and hashed, table rows."""
    metadata: dict[str, dg.MetadataValue] = {
        "verified_bundle_id": dg.MetadataValue.text(result.bundle_id or ""),
        "files_checked": dg.MetadataValue.int(result.files_checked),
        "files_hashed": dg.MetadataValue.int(result.files_hashed),
        "bytes_hashed": dg.MetadataValue.int(result.bytes_hashed),
        "seconds.verify": dg.MetadataValue.float(float(result.seconds)),
    }
    metadata |= _per_key("table_rows", result.tables, dg.MetadataValue.int)
    return metadata


def bootstrap_metadata(verified: Any, month: str) -> dict[str, dg.MetadataValue]:
    """Metadata of a month whose full snapshot was published (nothing applied, only verified)."""
    return {
        "next_bundle_id": dg.MetadataValue.text(verified.bundle_id or ""),
        "mode": dg.MetadataValue.text("bootstrap"),
        "already_applied": dg.MetadataValue.bool(True),
        "snapshot": dg.MetadataValue.path(str(verified.snapshot)),
        "summary": dg.MetadataValue.md(
            f"`{verified.snapshot}` holds the full snapshot **{verified.bundle_id}** of {month} "
            f"(published whole, not applied from a delta); {verified.files_checked} files verified."
        ),
    }


def problems_metadata(problems: Sequence[str]) -> dict[str, dg.MetadataValue]:
    """Metadata listing the problems a check found (the first ones, and how many in all)."""
    return {
        "problems": dg.MetadataValue.int(len(problems)),
        "details": dg.MetadataValue.md("\n".join(f"- {p}" for p in _paths(list(problems)))),
    }


def symbol_day_metadata(result: Any) -> dict[str, dg.MetadataValue]:
    """Metadata of one archived symbol-day: its source and, when it has ticks, its report.

    ``result`` is a :class:`~skewtape_pipeline.ticks.snapshot_fills.SymbolDayResult`.
    """
    source = result.source
    metadata: dict[str, dg.MetadataValue] = {
        "source_bundle_id": dg.MetadataValue.text(source.bundle_id),
        "source_snapshot": dg.MetadataValue.path(str(source.snapshot)),
        "source_fills_path": dg.MetadataValue.text(source.path),
        "source_fills_sha256": dg.MetadataValue.text(source.sha256 or "(not in the snapshot)"),
    }
    report = result.report
    metadata["removed_file"] = dg.MetadataValue.bool(result.removed_file)
    if report is None:
        return metadata | {
            "tick_count": dg.MetadataValue.int(0),
            "archived": dg.MetadataValue.bool(False),
        }
    metadata["archived"] = dg.MetadataValue.bool(True)
    data = report.to_dict()
    for name in ("encodings", "tier_policy"):
        metadata[name] = dg.MetadataValue.json(data.pop(name))
    metadata["path"] = dg.MetadataValue.path(str(data.pop("path")))
    notes = data.pop("notes")
    if notes:
        metadata["notes"] = dg.MetadataValue.md("\n".join(f"- {note}" for note in notes))
    for name, value in data.items():
        metadata[name] = _scalar(value)
    return metadata


def _scalar(value: Any) -> dg.MetadataValue:
    if isinstance(value, bool):
        return dg.MetadataValue.bool(value)
    if isinstance(value, int):
        return dg.MetadataValue.int(value)
    if isinstance(value, float):
        return dg.MetadataValue.float(value)
    return dg.MetadataValue.text("" if value is None else str(value))


# --- re-tiering and the archive as a whole ------------------------------------------------------

MAX_MOVES_LISTED = 200
"""How many moved symbol-days a partition's ``moves`` table shows (the catalog has them all)."""


def moves_by_month(moves: Sequence[Any]) -> dict[str, list[Any]]:
    """``{YYYY-MM: [PartitionMove, ...]}``: re-tiering moves grouped by the month of their day."""
    by_month: dict[str, list[Any]] = {}
    for move in moves:
        by_month.setdefault(f"{move.date.year:04d}-{move.date.month:02d}", []).append(move)
    return by_month


def retier_run_metadata(result: Any) -> dict[str, dg.MetadataValue]:
    """Metadata every partition of a re-tiering run shares: the run's numbers (``run.*``) and
    zero moves, which :func:`moves_metadata` overrides for the months that moved something.

    ``result`` is the core's ``RetierResult``.
    """
    metrics = result.metrics()
    metadata: dict[str, dg.MetadataValue] = {
        "as_of": dg.MetadataValue.text(result.as_of.isoformat()),
        "books_and_records": dg.MetadataValue.bool(result.books_and_records),
        "catalog_generation": dg.MetadataValue.int(result.generation),
    }
    for name in ("files_written", "files_reused", "files_removed", "files_retained"):
        metadata[f"run.{name}"] = dg.MetadataValue.int(metrics[name])
    metadata["run.symbol_days_moved"] = dg.MetadataValue.int(metrics["symbol_days_moved"])
    metadata["run.symbol_days_held"] = dg.MetadataValue.int(metrics["symbol_days_held"])
    metadata["run.symbol_days_purged"] = dg.MetadataValue.int(metrics["symbol_days_purged"])
    metadata["run.seconds"] = dg.MetadataValue.float(float(metrics["seconds"]))
    return metadata | moves_metadata([])


def moves_metadata(moves: Sequence[Any]) -> dict[str, dg.MetadataValue]:
    """Metadata of one month's moved symbol-days: counts, bytes before and after, the files
    they now live in (``files``: path -> tier, symbol-days, bytes of theirs) and a table of
    where each went (tier, byte share, file name), the first :data:`MAX_MOVES_LISTED` of them.

    ``moves`` are the core's ``PartitionMove`` objects of one month.
    """
    before = sum(m.bytes_before for m in moves)
    after = sum(m.byte_share for m in moves)
    metadata: dict[str, dg.MetadataValue] = {
        "symbol_days_moved": dg.MetadataValue.int(len(moves)),
        "ticks_moved": dg.MetadataValue.int(sum(m.rows for m in moves)),
        "bytes_before": dg.MetadataValue.int(before),
        "bytes_after": dg.MetadataValue.int(after),
        "bytes_ratio": dg.MetadataValue.float(before / after if after else 0.0),
    }
    if not moves:
        return metadata
    files: dict[str, dict[str, Any]] = {}
    for m in moves:
        entry = files.setdefault(m.to_path, {"tier": m.to_tier, "symbol_days": 0, "bytes": 0})
        entry["symbol_days"] += 1
        entry["bytes"] += m.byte_share
    metadata["files"] = dg.MetadataValue.json(files)
    metadata["moves"] = dg.MetadataValue.md(_moves_table(moves))
    return metadata


def _moves_table(moves: Sequence[Any]) -> str:
    lines = [
        "| symbol | date | from | to | rows | byte share | file |",
        "|---|---|---|---|---:|---:|---|",
    ]
    for m in moves[:MAX_MOVES_LISTED]:
        lines.append(
            f"| {m.symbol} | {m.date.isoformat()} | {m.from_tier} | {m.to_tier} | {m.rows} | "
            f"{m.byte_share} | {Path(m.to_path).name} |"
        )
    if len(moves) > MAX_MOVES_LISTED:
        lines.append(
            f"\n... and {len(moves) - MAX_MOVES_LISTED} more (the archive catalog locates every "
            "symbol-day)."
        )
    return "\n".join(lines)


def archive_metrics_metadata(metrics: Any) -> dict[str, dg.MetadataValue]:
    """Numeric metadata of the archive as a whole (``hot_bytes``, ``cold_ticks``, ...), which the
    UI plots over materializations, and a markdown table of the tiers.

    ``metrics`` is the core's ``ArchiveMetrics``.
    """
    flat = metrics.to_dict()
    metadata: dict[str, dg.MetadataValue] = {
        name: dg.MetadataValue.int(value) for name, value in flat.items()
    }
    lines = [
        "| tier | files | bytes | ticks | symbol-days | bytes per tick |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for tier, numbers in metrics.tiers.items():
        per_tick = f"{numbers.bytes / numbers.ticks:.2f}" if numbers.ticks else "-"
        lines.append(
            f"| {tier} | {numbers.files} | {numbers.bytes} | {numbers.ticks} | "
            f"{numbers.symbol_days} | {per_tick} |"
        )
    lines.append(
        f"\n{flat['retained_files']} superseded file(s), {flat['retained_bytes']} bytes, "
        "retained on disk (outside the query view); "
        f"{flat['hidden_symbol_days']} symbol-day(s), {flat['hidden_ticks']} ticks, hidden in "
        "consolidated files (withdrawn, or overridden by a newer hot file) until re-tiering."
    )
    metadata["summary"] = dg.MetadataValue.md("\n".join(lines))
    return metadata

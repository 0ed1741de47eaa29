"""The tick archive's result objects as Dagster metadata: re-tiering moves, the archive's
versions and metrics, the compression check."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from skewtape_pipeline.orchestration.shared.metadata import (
    MAX_LISTED,
    bytes_value,
    ratio_value,
    seconds_value,
)
from skewtape_pipeline.progress import size_text

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
    zero moves, which :func:`moves_metadata` overrides for the months that moved something;
    ``archive_version`` is the archive version the run committed (0: none, nothing changed).

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
    metadata["run.seconds"] = seconds_value(metrics["seconds"])
    metadata["archive_version"] = dg.MetadataValue.int(metrics["version"])
    return metadata | moves_metadata([])


def moves_metadata(
    moves: Sequence[Any], relative: Callable[[Any], str] = str
) -> dict[str, dg.MetadataValue]:
    """Metadata of one month's moved symbol-days: counts; when some moved, their bytes before
    and after (with their unit) and the ratio, the files they now live in (``files``: the
    file's name relative to its tier root, by ``relative`` -> tier, symbol-days, bytes of
    theirs) and a table of where each went (tier, byte share, file name), the first
    :data:`MAX_MOVES_LISTED` of them.

    ``moves`` are the core's ``PartitionMove`` objects of one month.
    """
    metadata: dict[str, dg.MetadataValue] = {
        "symbol_days_moved": dg.MetadataValue.int(len(moves)),
        "ticks_moved": dg.MetadataValue.int(sum(m.rows for m in moves)),
    }
    if not moves:
        return metadata
    before = sum(m.bytes_before for m in moves)
    after = sum(m.byte_share for m in moves)
    metadata["bytes_before"] = bytes_value(before)
    metadata["bytes_after"] = bytes_value(after)
    if after:
        metadata["bytes_ratio"] = ratio_value(before / after)
    files: dict[str, dict[str, Any]] = {}
    for m in moves:
        name = relative(m.to_path)
        entry = files.setdefault(name, {"tier": m.to_tier, "symbol_days": 0, "bytes": 0})
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


def versions_metadata(
    kept: int, tags: int, past_bytes: int, latest: int
) -> dict[str, dg.MetadataValue]:
    """The archive's versions (``store.versions``): how many are kept and tagged, the latest
    number, and the bytes only past versions hold (what ``prune-versions`` could free)."""
    return {
        "versions_kept": dg.MetadataValue.int(kept),
        "versions_tagged": dg.MetadataValue.int(tags),
        "archive_version": dg.MetadataValue.int(latest),
        "past_version_bytes": dg.MetadataValue.int(past_bytes),
    }


def archive_metrics_metadata(metrics: Any) -> dict[str, dg.MetadataValue]:
    """A markdown table of the tiers first (bytes with their unit, as the other assets show
    them), then numeric metadata of the archive as a whole (``hot_bytes``, ``cold_ticks``, ...:
    plain integers, which the UI plots over materializations).

    ``metrics`` is the core's ``ArchiveMetrics``.
    """
    flat = metrics.to_dict()
    lines = [
        "| tier | files | bytes | ticks | symbol-days | bytes per tick |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for tier, numbers in metrics.tiers.items():
        per_tick = f"{numbers.bytes / numbers.ticks:.2f}" if numbers.ticks else "-"
        lines.append(
            f"| {tier} | {numbers.files} | {size_text(numbers.bytes)} | {numbers.ticks} | "
            f"{numbers.symbol_days} | {per_tick} |"
        )
    lines.append(
        f"\n{flat['retained_files']} superseded file(s), {size_text(flat['retained_bytes'])}, "
        "retained on disk (outside the query view); "
        f"{flat['hidden_symbol_days']} symbol-day(s), {flat['hidden_ticks']} ticks, hidden in "
        "consolidated files (withdrawn, or overridden by a newer hot file) until re-tiering."
    )
    metadata: dict[str, dg.MetadataValue] = {"summary": dg.MetadataValue.md("\n".join(lines))}
    return metadata | {name: dg.MetadataValue.int(value) for name, value in flat.items()}


@dataclass(frozen=True)
class CompressionCheck:
    """Whether the consolidated files of a run meet the target, and the metadata saying so."""

    passed: bool
    metadata: dict[str, dg.MetadataValue]


COMPRESSION_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("file", "string", description="<TIER>/<path inside the tier root>"),
        dg.TableColumn("ticks", "int"),
        dg.TableColumn("symbol_days", "int"),
        dg.TableColumn("csv_bytes", "int", description="bytes of canonical CSV"),
        dg.TableColumn("bytes", "int", description="bytes of the file"),
        dg.TableColumn("ratio", "float", description="csv_bytes / bytes, 2 decimals"),
        dg.TableColumn("verdict", "string", description="met, missed, or not judged (too small)"),
    ]
)


def compression_check_metadata(
    measured: Sequence[Any], *, target: float, min_ticks: int, names: Sequence[str] = ()
) -> CompressionCheck:
    """Judge each measured consolidated file (``FileCompression``) of at least ``min_ticks``
    ticks against ``target``; the check passes when none of them misses it. ``names`` are the
    files as listed (default: their paths), e.g. relative to their tier root.

    A check that judged no file says so in its summary and records no counts (plots of a
    constant 0 would say nothing); the target is text, not a number to plot.
    """

    def verdict(m: Any) -> str:
        if not m.judged(min_ticks):
            return "not judged (too small)"
        return "met" if m.ratio >= target else "missed"

    verdicts = [verdict(m) for m in measured]
    judged = sum(v != "not judged (too small)" for v in verdicts)
    missed = verdicts.count("missed")
    if not measured:
        summary = "Judged nothing: this run wrote no warm or cold file."
    elif not judged:
        summary = (
            f"Judged nothing: none of the {len(measured)} consolidated file(s) written holds "
            f"{min_ticks:,} ticks or more (below that, a file's footer decides its ratio); they "
            "are measured below, not judged."
        )
    else:
        summary = (
            f"{judged} of {len(measured)} consolidated file(s) written hold {min_ticks:,} ticks or "
            f"more and were judged against {target:g}x: {missed} missed. Ratio: canonical CSV "
            "bytes of the file's symbol-days over the file's bytes."
        )
    records = [
        dg.TableRecord(
            {
                "file": name,
                "ticks": m.ticks,
                "symbol_days": m.symbol_days,
                "csv_bytes": m.raw_size_bytes,
                "bytes": m.size_bytes,
                "ratio": round(m.ratio, 2),
                "verdict": v,
            }
        )
        for m, v, name in zip(
            measured[:MAX_LISTED], verdicts, names or [str(m.path) for m in measured], strict=False
        )
    ]
    metadata: dict[str, dg.MetadataValue] = {
        "summary": dg.MetadataValue.md(summary),
        "target": dg.MetadataValue.text(f"{target:g}x over CSV, files of {min_ticks:,}+ ticks"),
    }
    if judged:
        metadata["files_judged"] = dg.MetadataValue.int(judged)
        metadata["files_missed"] = dg.MetadataValue.int(missed)
    if records:
        metadata["files"] = dg.MetadataValue.table(records, schema=COMPRESSION_SCHEMA)
    return CompressionCheck(passed=missed == 0, metadata=metadata)

"""Turning the core's result objects into Dagster metadata (and a markdown summary)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg

from skewtape_pipeline.mirror.format import TABLE_KEYS
from skewtape_pipeline.progress import size_text

MAX_LISTED = 50
"""How many paths a metadata list shows before it says how many more there are."""


def _label(table: str) -> str:
    return table.removesuffix(".parquet")


def _paths(paths: Sequence[Any]) -> list[str]:
    shown = [str(path) for path in paths[:MAX_LISTED]]
    if len(paths) > MAX_LISTED:
        shown.append(f"... and {len(paths) - MAX_LISTED} more")
    return shown


def _per_key(prefix: str, values: Mapping[str, Any], make) -> dict[str, dg.MetadataValue]:
    return {f"{prefix}.{_label(key)}": make(value) for key, value in sorted(values.items())}


def seconds_value(seconds: float) -> dg.MetadataValue:
    """Seconds rounded to milliseconds (the ``seconds`` in the key names the unit)."""
    return dg.MetadataValue.float(round(float(seconds), 3))


def ratio_value(ratio: float) -> dg.MetadataValue:
    """A ratio (``x`` times) rounded to two decimals."""
    return dg.MetadataValue.float(round(float(ratio), 2))


def bytes_value(nbytes: int) -> dg.MetadataValue:
    """A byte count for a reader, with its unit: ``812 bytes``, ``651.9 KB (651,939 bytes)``."""
    nbytes = int(nbytes)
    if nbytes < 1000:
        return dg.MetadataValue.text(f"{nbytes} bytes")
    return dg.MetadataValue.text(f"{size_text(nbytes)} ({nbytes:,} bytes)")


TABLES_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("table", "string"),
        dg.TableColumn("change", "string", description="merged by key, or whole"),
        dg.TableColumn("rows_upserted", "int"),
        dg.TableColumn("rows_deleted", "int"),
    ]
)


def table_changes(result: Any) -> list[dict[str, Any]]:
    """One row per reference table the apply changed: how (merged by key from change files, or
    replaced, added or deleted whole as a file) and the rows merged."""
    whole = {
        **dict.fromkeys(result.files_added, "added whole"),
        **dict.fromkeys(result.files_replaced, "replaced whole"),
        **dict.fromkeys(result.files_deleted, "deleted whole"),
    }
    merged = set(result.rows_upserted) | set(result.rows_deleted)
    rows = []
    for table in TABLE_KEYS:
        change = "merged by key" if table in merged else whole.get(table)
        if change is None:
            continue
        rows.append(
            {
                "table": _label(table),
                "change": change,
                "rows_upserted": result.rows_upserted.get(table, 0),
                "rows_deleted": result.rows_deleted.get(table, 0),
            }
        )
    return rows


def apply_metadata(result: Any) -> dict[str, dg.MetadataValue]:
    """Metadata of an apply: a markdown summary first, then bundle ids, file and row counts,
    bytes, seconds (rounded; per phase as ``seconds.<phase>`` so the UI can plot them over
    months), the reference tables it changed (a table) and the snapshot's path.

    A month already applied gets only its summary, bundle ids, mode and path: no rows of
    zeros for work that was not done.

    ``result`` is the core's ``ApplyResult``.
    """
    metadata: dict[str, dg.MetadataValue] = {
        "summary": dg.MetadataValue.md(apply_summary(result)),
        "parent_bundle_id": dg.MetadataValue.text(result.parent_bundle_id),
        "next_bundle_id": dg.MetadataValue.text(result.next_bundle_id),
        "mode": dg.MetadataValue.text(result.mode),
        "already_applied": dg.MetadataValue.bool(result.already_applied),
        "snapshot": dg.MetadataValue.path(str(result.snapshot)),
    }
    if result.already_applied:
        return metadata
    metadata |= {
        "files_added": dg.MetadataValue.int(len(result.files_added)),
        "files_replaced": dg.MetadataValue.int(len(result.files_replaced)),
        "files_deleted": dg.MetadataValue.int(len(result.files_deleted)),
        "files_linked": dg.MetadataValue.int(result.files_linked),
        "files_cloned": dg.MetadataValue.int(result.files_cloned),
        "rows_upserted": dg.MetadataValue.int(sum(result.rows_upserted.values())),
        "rows_deleted": dg.MetadataValue.int(sum(result.rows_deleted.values())),
        "bytes_read": bytes_value(result.bytes_read),
        "bytes_written": bytes_value(result.bytes_written),
        "seconds": seconds_value(sum(result.seconds.values())),
    }
    metadata |= {
        f"seconds.{phase}": seconds_value(seconds) for phase, seconds in result.seconds.items()
    }
    tables = table_changes(result)
    if tables:
        records = [dg.TableRecord(row) for row in tables]
        metadata["tables"] = dg.MetadataValue.table(records, schema=TABLES_SCHEMA)
    metadata["file_changes"] = dg.MetadataValue.json(
        {
            "added": _paths(result.files_added),
            "replaced": _paths(result.files_replaced),
            "deleted": _paths(result.files_deleted),
        }
    )
    return metadata


def apply_summary(result: Any) -> str:
    """A short markdown summary of an apply: what changed, how each table changed (merged by
    key, or whole), bytes and how long each phase took."""
    if result.already_applied:
        return f"`{result.snapshot}` already holds **{result.next_bundle_id}**; nothing was done."
    head = (
        f"**{result.parent_bundle_id}** -> **{result.next_bundle_id}** ({result.mode}) "
        f"in `{result.snapshot}`: {len(result.files_added)} file(s) added, "
        f"{len(result.files_replaced)} replaced, {len(result.files_deleted)} deleted; "
        f"{size_text(result.bytes_read)} read, {size_text(result.bytes_written)} written, "
        f"{result.files_linked} file(s) hard-linked and {result.files_cloned} cloned instead "
        "of copied."
    )
    lines = [head, ""]
    tables = table_changes(result)
    if tables:
        lines += ["| table | change | rows upserted | rows deleted |", "|---|---|---:|---:|"]
        lines += [
            f"| {t['table']} | {t['change']} | {t['rows_upserted']} | {t['rows_deleted']} |"
            for t in tables
        ]
        if not any(t["change"] == "merged by key" for t in tables):
            lines.append(
                "\nEvery changed table came whole (as a file): no rows were merged, so the "
                "row counts are 0."
            )
        lines.append("")
    else:
        lines += ["No reference table changed.", ""]
    if result.seconds:
        lines += ["| phase | seconds |", "|---|---:|"]
        lines += [f"| {phase} | {seconds:.3f} |" for phase, seconds in result.seconds.items()]
    return "\n".join(lines)


def verify_metadata(result: Any) -> dict[str, dg.MetadataValue]:
    """Metadata of a snapshot verification: bundle id, files checked and hashed, bytes hashed
    (with their unit), seconds (rounded) and each reference table's rows
    (``table_rows.<table>``)."""
    metadata: dict[str, dg.MetadataValue] = {
        "verified_bundle_id": dg.MetadataValue.text(result.bundle_id or ""),
        "files_checked": dg.MetadataValue.int(result.files_checked),
        "files_hashed": dg.MetadataValue.int(result.files_hashed),
        "bytes_hashed": bytes_value(result.bytes_hashed),
        "seconds.verify": seconds_value(result.seconds),
    }
    metadata |= _per_key("table_rows", result.tables, dg.MetadataValue.int)
    return metadata


def bootstrap_metadata(verified: Any, month: str) -> dict[str, dg.MetadataValue]:
    """Metadata of a month whose full snapshot was published (nothing applied, only verified)."""
    return {
        "summary": dg.MetadataValue.md(
            f"`{verified.snapshot}` holds the full snapshot **{verified.bundle_id}** of {month} "
            f"(published whole, not applied from a delta); {verified.files_checked} files verified."
        ),
        "next_bundle_id": dg.MetadataValue.text(verified.bundle_id or ""),
        "mode": dg.MetadataValue.text("bootstrap"),
        "already_applied": dg.MetadataValue.bool(True),
        "snapshot": dg.MetadataValue.path(str(verified.snapshot)),
    }


def problems_metadata(problems: Sequence[str]) -> dict[str, dg.MetadataValue]:
    """Metadata listing the problems a check found (the first ones, and how many in all)."""
    return {
        "problems": dg.MetadataValue.int(len(problems)),
        "details": dg.MetadataValue.md("\n".join(f"- {p}" for p in _paths(list(problems)))),
    }


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
        "bytes_ratio": ratio_value(before / after if after else 0.0),
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


def versions_metadata(
    kept: int, tags: int, past_bytes: int, latest: int
) -> dict[str, dg.MetadataValue]:
    """The archive's versions (``ticks.versions``): how many are kept and tagged, the latest
    number, and the bytes only past versions hold (what ``prune-versions`` could free)."""
    return {
        "versions_kept": dg.MetadataValue.int(kept),
        "versions_tagged": dg.MetadataValue.int(tags),
        "archive_version": dg.MetadataValue.int(latest),
        "past_version_bytes": dg.MetadataValue.int(past_bytes),
    }


def archive_metrics_metadata(metrics: Any) -> dict[str, dg.MetadataValue]:
    """A markdown table of the tiers first, then numeric metadata of the archive as a whole
    (``hot_bytes``, ``cold_ticks``, ...), which the UI plots over materializations.

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
            f"| {tier} | {numbers.files} | {numbers.bytes} | {numbers.ticks} | "
            f"{numbers.symbol_days} | {per_tick} |"
        )
    lines.append(
        f"\n{flat['retained_files']} superseded file(s), {flat['retained_bytes']} bytes, "
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

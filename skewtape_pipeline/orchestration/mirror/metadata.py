"""The applier's result objects as Dagster metadata: an apply's (with a markdown summary), a
verification's, a bootstrap month's. Paths are named as ``shown`` (``SkewtapeHome.shown``)
names them: under the data root as ``$SKEWTAPE_HOME/...``, never by the machine's folders."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import dagster as dg

from skewtape_pipeline.mirror.format import TABLE_KEYS
from skewtape_pipeline.orchestration.shared.metadata import bytes_value, listed, seconds_value
from skewtape_pipeline.progress import size_text


def _label(table: str) -> str:
    return table.removesuffix(".parquet")


def _per_key(prefix: str, values: Mapping[str, Any], make) -> dict[str, dg.MetadataValue]:
    return {f"{prefix}.{_label(key)}": make(value) for key, value in sorted(values.items())}


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


Shown = Callable[[str], str]
"""A text as the UI may show it (``SkewtapeHome.shown``: paths under the data root named
``$SKEWTAPE_HOME/...``)."""


def apply_metadata(result: Any, *, shown: Shown) -> dict[str, dg.MetadataValue]:
    """Metadata of an apply: a markdown summary first, then bundle ids, file and row counts,
    bytes, seconds (rounded; per phase as ``seconds.<phase>`` so the UI can plot them over
    months), the reference tables it changed (a table) and the snapshot's path (as ``shown``
    names it, e.g. ``$SKEWTAPE_HOME/history/2026-10``, in the summary too).

    A month already applied gets only its summary, bundle ids, mode and path: no rows of
    zeros for work that was not done.

    ``result`` is the core's ``ApplyResult``.
    """
    metadata: dict[str, dg.MetadataValue] = {
        "summary": dg.MetadataValue.md(apply_summary(result, shown=shown)),
        "parent_bundle_id": dg.MetadataValue.text(result.parent_bundle_id),
        "next_bundle_id": dg.MetadataValue.text(result.next_bundle_id),
        "mode": dg.MetadataValue.text(result.mode),
        "already_applied": dg.MetadataValue.bool(result.already_applied),
        "snapshot": dg.MetadataValue.path(shown(str(result.snapshot))),
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
            "added": listed(result.files_added),
            "replaced": listed(result.files_replaced),
            "deleted": listed(result.files_deleted),
        }
    )
    return metadata


def apply_summary(result: Any, *, shown: Shown) -> str:
    """A short markdown summary of an apply: what changed (in the snapshot named as ``shown``
    names it), how each table changed (merged by key, or whole), bytes and how long each
    phase took."""
    snapshot = shown(str(result.snapshot))
    if result.already_applied:
        return f"`{snapshot}` already holds **{result.next_bundle_id}**; nothing was done."
    head = (
        f"**{result.parent_bundle_id}** -> **{result.next_bundle_id}** ({result.mode}) "
        f"in `{snapshot}`: {len(result.files_added)} file(s) added, "
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


def bootstrap_metadata(verified: Any, month: str, *, shown: Shown) -> dict[str, dg.MetadataValue]:
    """Metadata of a month whose full snapshot was published (nothing applied, only verified);
    the snapshot named as ``shown`` names it."""
    snapshot = shown(str(verified.snapshot))
    return {
        "summary": dg.MetadataValue.md(
            f"`{snapshot}` holds the full snapshot **{verified.bundle_id}** of {month} "
            f"(published whole, not applied from a delta); {verified.files_checked} files verified."
        ),
        "next_bundle_id": dg.MetadataValue.text(verified.bundle_id or ""),
        "mode": dg.MetadataValue.text("bootstrap"),
        "already_applied": dg.MetadataValue.bool(True),
        "snapshot": dg.MetadataValue.path(snapshot),
    }

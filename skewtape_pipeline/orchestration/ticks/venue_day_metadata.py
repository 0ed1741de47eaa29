"""A venue-day's materialization metadata, from its rows of the archive's reports table.

At a glance: how many of the venue-day's symbol-days hold ticks (``symbol_days_archived``),
how many of those the archive already held with the very same ticks, so the run wrote nothing
for them (``symbol_days_unchanged``: all of them on a rerun over the same fills), how many had no
trades and were skipped (nothing written), how many the publisher corrected
away (``symbol_days_removed``), how many prices and quantities carried float noise stored
rounded to the scale (``float_noise_normalized``), and a table of the archived ones with their
tick counts, the busiest first. Every symbol-day's full report is a row of the
``tick_reports`` view.

A run over some symbols of a venue-day (a correction: the corrections sensor's runs, or a
user's run naming ``symbols``) replaces only their rows, and its materialization is the
venue-day's latest: its counts and table are still the whole venue-day's as it now stands
(every row of its reports file), with ``scope`` saying it was a correction of N symbol(s) and
``symbol_days_rerun``/``symbols_rerun`` naming what the run itself looked at; its
``symbol_days_unchanged`` and ``source_*`` are the run's own.
"""

from __future__ import annotations

from collections.abc import Sequence

import dagster as dg
import pyarrow as pa

from skewtape_pipeline.orchestration.shared.metadata import bytes_value, listed, ratio_value
from skewtape_pipeline.ticks.archive.store.reports_table import ARCHIVED, REMOVED, SKIPPED

MAX_SYMBOL_DAYS_LISTED = 500
"""How many archived symbol-days a venue-day's table lists (the reports table has them all)."""

_TABLE_SCHEMA = dg.TableSchema(
    columns=[
        dg.TableColumn("symbol", "string"),
        dg.TableColumn("tick_count", "int"),
        dg.TableColumn("compression_ratio", "float", description="CSV bytes / file bytes"),
    ]
)
"""The symbol-days table: symbol and tick count first. No tier: a materialization's metadata is
fixed when it is recorded, and re-tiering moves symbol-days later; where a day is now (tier and
file) is in the ``tick_reports`` view (``report_query``)."""


def venue_day_metadata(
    rows: pa.Table, *, scope: Sequence[str] | None, run_rows: pa.Table | None = None
) -> dict[str, object]:
    """Metadata of one venue-day: ``rows`` are its reports rows as they now stand (the whole
    venue-day), ``run_rows`` those of them the run wrote (None: all of them, a run over every
    symbol-day).

    ``scope`` is the run's named symbols of this venue (None: every symbol-day was looked at);
    with it, the counts and table stay the whole venue-day's and ``scope``,
    ``symbol_days_rerun`` and ``symbols_rerun`` say what the correction covered.
    """
    records = rows.to_pylist()
    own = records if run_rows is None else run_rows.to_pylist()
    archived = sorted(
        (r for r in records if r["status"] == ARCHIVED),
        key=lambda r: (-r["tick_count"], r["symbol"]),
    )
    counts = {status: sum(r["status"] == status for r in records) for status in (SKIPPED, REMOVED)}
    unchanged = sum(r["status"] == ARCHIVED and bool(r["unchanged"]) for r in own)
    metadata: dict[str, object] = {
        "symbol_days_archived": dg.MetadataValue.int(len(archived)),
        "symbol_days_unchanged": dg.MetadataValue.int(unchanged),
        "symbol_days_skipped_no_trades": dg.MetadataValue.int(counts[SKIPPED]),
        "symbol_days_removed": dg.MetadataValue.int(counts[REMOVED]),
        "tick_count": dg.MetadataValue.int(sum(r["tick_count"] for r in archived)),
        "compacted_bytes": bytes_value(sum(r["compacted_size_bytes"] or 0 for r in archived)),
        "float_noise_normalized": dg.MetadataValue.int(
            sum(r["float_noise_normalized"] or 0 for r in archived)
        ),
        "scope": dg.MetadataValue.text(_scope_text(scope, len(own))),
        "symbol_days": dg.MetadataValue.table(
            records=[
                dg.TableRecord(
                    {
                        "symbol": r["symbol"],
                        "tick_count": r["tick_count"],
                        "compression_ratio": ratio_value(r["compression_ratio"] or 0.0).value,
                    }
                )
                for r in archived[:MAX_SYMBOL_DAYS_LISTED]
            ],
            schema=_TABLE_SCHEMA,
        ),
    }
    if scope is not None:
        metadata["symbol_days_rerun"] = dg.MetadataValue.int(len(own))
        metadata["symbols_rerun"] = dg.MetadataValue.json(listed(sorted(r["symbol"] for r in own)))
    if own or records:
        first = (own or records)[0]
        metadata["source_bundle_id"] = dg.MetadataValue.text(first["source_bundle_id"])
        metadata["source_fills_path"] = dg.MetadataValue.text(first["source_fills_path"])
        metadata["source_fills_sha256"] = dg.MetadataValue.text(
            first["source_fills_sha256"] or "(not in the snapshot)"
        )
        metadata["venue_departed"] = dg.MetadataValue.bool(bool(first["venue_departed"]))
        metadata["report_query"] = dg.MetadataValue.md(
            "Every symbol-day's report, with the tier and file where it is now: "
            '`skewtape-pipeline query "SELECT * FROM tick_reports '
            f"WHERE symbol = '<symbol>' AND date = DATE '{first['date']}'\"`"
        )
    if len(archived) > MAX_SYMBOL_DAYS_LISTED:
        metadata["symbol_days_not_listed"] = dg.MetadataValue.int(
            len(archived) - MAX_SYMBOL_DAYS_LISTED
        )
    return metadata


def _scope_text(scope: Sequence[str] | None, rerun: int) -> str:
    """What ``scope`` says: every symbol-day, or a correction's symbols over the whole day."""
    if scope is None:
        return "every symbol-day"
    return (
        f"correction of {len(scope)} named symbol(s), {rerun} symbol-day(s) rerun; counts and "
        "table: the whole venue-day"
    )

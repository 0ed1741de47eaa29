"""A whole month of a mirror into the tick archive, as the tick archive asset and its
corrections sensor archive it, without Dagster (``skewtape-pipeline archive-month``).

The month's venue-days are its complete UTC days (those before the as-of date, as the asset's
daily partitions end before today) times the venues with a fills file of the month in a snapshot
(the newest holding it, so a venue that left keeps its ticks). Each is archived by
:func:`~skewtape_pipeline.ticks.fills.venue_days.archive_venue_day`, the asset's own unit of
work: its symbol-days with trades compacted, the ones the publisher corrected away withdrawn
and removed, a reports row for each. First, as the corrections sensor does when the month is
applied, the symbol-days of earlier months that the month's snapshot corrected
(``snapshot_fills.corrected_symbol_days``) are archived again, each venue-day over exactly
those symbols. Idempotent: a rerun writes nothing that is already archived as it is.

This module does not import dagster.
"""

from __future__ import annotations

import calendar
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date
from pathlib import Path

from skewtape_pipeline.errors import ChainError
from skewtape_pipeline.mirror.months import applied_months
from skewtape_pipeline.ticks.archive.ops.compact import is_unchanged
from skewtape_pipeline.ticks.fills.snapshot_fills import (
    SymbolDayResult,
    corrected_symbol_days,
    month_files,
    split_symbol,
)
from skewtape_pipeline.ticks.fills.venue_days import (
    VenueDay,
    VenueDayOptions,
    VenueDayResult,
    archive_venue_day,
)


@dataclass(frozen=True)
class MonthResult:
    """What archiving a month did: its venue-days' results, then those of the earlier months'
    venue-days its snapshot corrected."""

    month: str
    venue_days: list[VenueDayResult]
    corrections: list[VenueDayResult]

    def counts(self) -> dict[str, int]:
        """Venue-days, symbol-days archived, skipped (no trades) and removed, ticks, the
        symbol-days archived again for corrections, and the symbol-days the run changed (written
        with other ticks than the archive held, or removed)."""
        every = self.venue_days + self.corrections
        return {
            "venue_days": len(self.venue_days),
            "symbol_days_changed": sum(
                _changed(r) for venue_day in every for r in venue_day.results
            ),
            "symbol_days_archived": sum(len(r.archived) for r in self.venue_days),
            "symbol_days_skipped": sum(len(r.skipped) for r in self.venue_days),
            "symbol_days_removed": sum(len(r.removed) for r in every),
            "ticks": sum(r.tick_count for r in self.venue_days),
            "corrected_symbol_days": sum(len(r.rows) for r in self.corrections),
        }

    def to_dict(self) -> dict[str, object]:
        return {"month": self.month, **self.counts()}


def _changed(result: SymbolDayResult) -> bool:
    if result.report is None:
        return result.removed_file or result.withdrawn
    return not is_unchanged(result.report)


def month_venue_days(history: Path, month: str, as_of: date) -> list[VenueDay]:
    """The month's venue-days: its days before ``as_of`` times the venues with a fills file of
    the month, by day then venue. ChainError naming the month and the snapshots the mirror
    holds when it does not hold ``month``: no snapshot of ``month`` or later is applied (run
    ``sync`` first), or ``month`` is not applied and no snapshot has a fills file of it (a month
    before the mirror's first)."""
    months = applied_months(history)
    if not months or months[-1] < month:
        raise ChainError(
            f"month {month} has no snapshot in {history} yet (newest: "
            f"{months[-1] if months else 'none'}); run `skewtape-pipeline sync` first"
        )
    files = month_files(history, month)
    if month not in months and not files:
        raise ChainError(
            f"month {month} is not in the mirror {history}: it holds the snapshots of "
            f"{months[0]} to {months[-1]}, and none has fills of {month}"
        )
    year, number = (int(part) for part in month.split("-"))
    days = [date(year, number, d) for d in range(1, calendar.monthrange(year, number)[1] + 1)]
    venues = sorted(files)
    return [(venue, day) for day in days if day < as_of for venue in venues]


def corrected_venue_days(history: Path, month: str) -> dict[VenueDay, list[str]]:
    """``{venue-day: symbols}`` of the earlier months' symbol-days the snapshot of ``month``
    corrected, as the corrections sensor requests them."""
    by_venue_day: dict[VenueDay, list[str]] = defaultdict(list)
    for symbol, day in corrected_symbol_days(history, month):
        by_venue_day[(split_symbol(symbol)[0], day)].append(symbol)
    return dict(sorted(by_venue_day.items()))


def archive_month(
    history: Path,
    month: str,
    options: VenueDayOptions,
    *,
    on_progress: Callable[[int, int], None] | None = None,
) -> MonthResult:
    """Archive the month's corrections of earlier months, then each of its venue-days (module
    notes); ``on_progress(done, total)`` after each venue-day. ChainError, archiving nothing,
    when the mirror does not hold the month (:func:`month_venue_days`); else raises what
    ``archive_venue_day`` raises (the venue-days before it stay archived, as runs do)."""
    venue_days = month_venue_days(history, month, options.as_of)
    corrections = corrected_venue_days(history, month)
    results: dict[str, list[VenueDayResult]] = {"corrections": [], "venue_days": []}
    work = [("corrections", key, symbols) for key, symbols in corrections.items()]
    work += [("venue_days", key, None) for key in venue_days]
    for done, (kind, venue_day, symbols) in enumerate(work, start=1):
        results[kind].append(archive_venue_day(history, venue_day, options, symbols=symbols))
        if on_progress is not None:
            on_progress(done, len(work))
    return MonthResult(month, results["venue_days"], results["corrections"])

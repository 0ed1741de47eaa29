"""A venue-day of fills into the tick archive: the unit of work of the tick archive asset.

A *venue-day* is one venue's trades of one UTC day. Its symbol-days are the symbols that traded
that day in the venue's month file (from the snapshot :func:`~skewtape_pipeline.ticks.
fills.snapshot_fills.newest_sources` picks), plus those archived for that day before (so a
symbol-day the publisher corrected away leaves the archive). Each is archived as
:func:`~skewtape_pipeline.ticks.fills.snapshot_fills.archive_symbol_days` does; the symbols the
month file lists that did not trade that day are *skipped*: nothing is written for them. The outcome
of every symbol-day is then published in the archive's reports table
(:mod:`skewtape_pipeline.ticks.archive.store.reports_table`).

Naming ``symbols`` limits the work to those symbols of the venue-day (a correction's rerun); the
reports of the venue-day's other symbols are kept.

This module does not import dagster.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import quote

import duckdb

from skewtape_pipeline.errors import ConfigError, UnreadableFolderError
from skewtape_pipeline.ticks.archive.ops.compact import is_unchanged
from skewtape_pipeline.ticks.archive.ops.compact_plan import DEFAULT_MEMORY_LIMIT
from skewtape_pipeline.ticks.archive.store.layout import PART_FILE_NAME, decode_symbol
from skewtape_pipeline.ticks.archive.store.reports_table import (
    ARCHIVED,
    REMOVED,
    SKIPPED,
    ReportRow,
    write_venue_day_reports,
)
from skewtape_pipeline.ticks.encode.report import DEFAULT_TARGET_RATIO
from skewtape_pipeline.ticks.fills.snapshot_fills import (
    NS_PER_DAY,
    SYMBOL_SEPARATOR,
    FillsSource,
    SymbolDayResult,
    archive_symbol_days,
    fill_symbol,
    newest_sources,
    read_back_mismatches,
    read_mirror_venues,
    reading_fills,
    split_symbol,
    symbols_in,
)

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.handle import Archive

VenueDay = tuple[str, date]


@dataclass(frozen=True)
class VenueDayOptions:
    """How a venue-day is archived: into which archive (its root, policy and audit log), as of
    when, and the batch name its report rows carry (a run id)."""

    archive: Archive
    as_of: date
    batch: str
    target_ratio: float = DEFAULT_TARGET_RATIO
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    """Bytes the venue-day's reads may use (``compact-ticks --memory-limit``)."""


@dataclass(frozen=True)
class VenueDayResult:
    """What archiving one venue-day did: the symbol-days archived or removed, the symbols
    skipped (listed by the month file, no trades that day) and the report rows published."""

    venue: str
    day: date
    source: FillsSource
    results: list[SymbolDayResult]
    skipped: list[str]
    rows: list[ReportRow]
    partial: bool
    """True when only some symbols were asked for (a correction's rerun)."""

    @property
    def archived(self) -> list[ReportRow]:
        return [row for row in self.rows if row.status == ARCHIVED]

    @property
    def removed(self) -> list[ReportRow]:
        return [row for row in self.rows if row.status == REMOVED]

    @property
    def tick_count(self) -> int:
        return sum(row.tick_count for row in self.archived)


def venue_month_source(history: Path, venue: str, month_day: date) -> FillsSource:
    """The month file a venue-day's ticks are read from: the one every symbol-day of the venue
    and month is read from (``newest_sources``, asked for any one of them)."""
    probe = (fill_symbol(venue, "*"), month_day)
    return newest_sources(history, [probe])[probe]


def traded_symbols(fills_file: Path, venue: str, day: date) -> list[str]:
    """Symbols of ``venue`` with a trade on ``day`` in a fills month file, sorted.
    UnreadableFileError naming the file when it cannot be read (``reading_fills``)."""
    start = (day.toordinal() - date(1970, 1, 1).toordinal()) * NS_PER_DAY
    with reading_fills(fills_file, f"which symbols of {venue} traded on {day}"):
        rows = duckdb.sql(
            "SELECT DISTINCT market_id FROM read_parquet($file) WHERE venue = $venue "
            f"AND epoch_ns(ts) >= {start} AND epoch_ns(ts) < {start + NS_PER_DAY} ORDER BY ALL",
            params={"file": str(fills_file), "venue": venue},
        ).fetchall()
    return [fill_symbol(venue, market_id) for (market_id,) in rows]


def archived_symbols(archive: Archive, venue: str, day: date) -> set[str]:
    """Symbols of ``venue`` the archive holds a hot file or a catalogued copy of on ``day``."""
    prefix = quote(venue + SYMBOL_SEPARATOR, safe="", encoding="utf-8")
    pattern = (
        f"symbol={prefix}*/year={day.year:04d}/month={day.month:02d}/date={day.isoformat()}/"
        f"{PART_FILE_NAME}"
    )
    hot = {
        decode_symbol(p.parents[3].name.removeprefix("symbol=")) for p in archive.root.glob(pattern)
    }
    catalogued = {
        symbol
        for symbol, catalogued_day in archive.core.catalog.read().partitions
        if catalogued_day == day and symbol.startswith(venue + SYMBOL_SEPARATOR)
    }
    return hot | catalogued


def archive_venue_day(
    history: Path,
    venue_day: VenueDay,
    options: VenueDayOptions,
    *,
    symbols: Sequence[str] | None = None,
    refuse_unknown: bool = False,
) -> VenueDayResult:
    """Archive one venue-day (all its symbol-days, or only ``symbols``) and publish its rows
    in the reports table. Raises what ``archive_symbol_days`` raises (nothing of the venue-day
    written when its ticks are refused); ConfigError for a symbol of another venue, and with
    ``refuse_unknown``, before anything is written, for a named symbol that neither the venue's
    month of fills lists nor the archive holds on the day (a mistyped symbol: without it, such
    a symbol is left out silently, as a correction's symbol whose rows all went may be)."""
    venue, day = venue_day
    for symbol in symbols or ():
        if split_symbol(symbol)[0] != venue:
            raise ConfigError(f"symbol {symbol!r} is not of venue {venue!r} ({day})")
    _check_venue_known(history, venue, day, options.archive)
    source = venue_month_source(history, venue, day)
    present = source.sha256 is not None
    fills_file = source.snapshot / source.path
    traded = traded_symbols(fills_file, venue, day) if present else []
    out = options.archive.root
    before = archived_symbols(options.archive, venue, day) if out.is_dir() else set()
    wanted = sorted(set(traded) | before)
    listed = symbols_in(fills_file) if present else []
    if symbols is not None:
        chosen = set(symbols)
        wanted = [s for s in wanted if s in chosen]
        listed = [s for s in listed if s in chosen]
        if refuse_unknown:
            _refuse_unknown(sorted(chosen - set(wanted) - set(listed)), venue_day, source)
    results = archive_symbol_days(
        options.archive,
        history,
        [(symbol, day) for symbol in wanted],
        as_of=options.as_of,
        target_ratio=options.target_ratio,
        memory_limit=options.memory_limit,
    )
    checked = read_back_mismatches(
        results, archive=options.archive, memory_limit=options.memory_limit
    )
    mismatched = {symbol: count for symbol, _, count in checked}
    skipped = sorted(set(listed) - set(wanted))
    rows = [_row(result, venue, options, mismatched.get(result.symbol, 0)) for result in results]
    rows += [_skipped_row(symbol, venue, day, source, options) for symbol in skipped]
    if rows or symbols is None:
        write_venue_day_reports(out, venue, day, rows, replace_all=symbols is None)
    return VenueDayResult(venue, day, source, results, skipped, rows, partial=symbols is not None)


def _refuse_unknown(unknown: list[str], venue_day: VenueDay, source: FillsSource) -> None:
    """ConfigError naming the ``unknown`` symbols of ``venue_day`` and where they were looked
    for; nothing when there are none."""
    if unknown:
        raise ConfigError(
            f"symbol(s) {', '.join(unknown)} ({venue_day[1]}): not in {source.path} of "
            f"{source.bundle_id} and not archived on that day; nothing archived"
        )


def _check_venue_known(history: Path, venue: str, day: date, archive: Archive) -> None:
    """ConfigError, before anything is written, for a venue no snapshot of the mirror holds
    fills of and ``archive`` holds nothing of on ``day`` (a venue mistyped, e.g. in a backfill
    dialog): archiving it would archive nothing and say nothing. UnreadableFolderError instead,
    naming the folders and why, when a snapshot's ``fills/`` that cannot be read may hold it."""
    held, unreadable = read_mirror_venues(history)
    if venue in held or (archive.root.is_dir() and archived_symbols(archive, venue, day)):
        return
    if unreadable:
        (folder, why), others = unreadable[0], [str(f) for f, _ in unreadable[1:]]
        also = f", nor can {', '.join(others[:3])}{' ...' if others[3:] else ''}" if others else ""
        raise UnreadableFolderError(
            f"{folder}: cannot be read ({why}){also}; whether the mirror holds fills of venue "
            f"{venue!r} ({day}) cannot be told without it (the venues of the snapshots that "
            f"can be read: {', '.join(held) or 'none'}); nothing archived"
        )
    raise ConfigError(
        f"venue {venue!r} ({day}): no snapshot in {history} holds fills of it (the mirror's "
        f"venues: {', '.join(held) or 'none'}); nothing archived"
    )


def _source_fields(source: FillsSource, batch: str) -> dict[str, object]:
    return {
        "source_bundle_id": source.bundle_id,
        "source_fills_path": source.path,
        "source_fills_sha256": source.sha256,
        "batch": batch,
        "venue_departed": source.departed,
    }


def _row(
    result: SymbolDayResult, venue: str, options: VenueDayOptions, mismatched: int
) -> ReportRow:
    common = _source_fields(result.source, options.batch)
    report = result.report
    if report is None:
        status = REMOVED if result.removed_file or result.withdrawn else SKIPPED
        return ReportRow(result.symbol, venue, result.day, status, 0, **common)
    path = Path(report.path) if report.path else None
    return ReportRow(
        result.symbol,
        venue,
        result.day,
        ARCHIVED,
        report.tick_count,
        **common,
        read_back_mismatched_rows=mismatched,
        tier=report.tier,
        path=_relative(options.archive, path) if path else None,
        compacted_size_bytes=report.compacted_size_bytes,
        raw_size_bytes=report.raw_size_bytes,
        raw_size_basis=report.raw_size_basis,
        compression_ratio=report.compression_ratio,
        target_compression_ratio=report.target_compression_ratio,
        meets_compression_target=report.meets_compression_target,
        codec=report.codec,
        compression_level=report.compression_level,
        reordered_ticks=report.reordered_ticks,
        timestamp_unit=report.timestamp_unit,
        price_scale=report.price_scale,
        round_trip_verified=report.round_trip_verified,
        float_noise_normalized=report.float_noise_normalized,
        unchanged=is_unchanged(report),
    )


def _skipped_row(
    symbol: str, venue: str, day: date, source: FillsSource, options: VenueDayOptions
) -> ReportRow:
    return ReportRow(symbol, venue, day, SKIPPED, 0, **_source_fields(source, options.batch))


def _relative(archive: Archive, path: Path) -> str:
    """``path`` relative to ``archive``'s root (POSIX), else as it is."""
    try:
        return path.absolute().relative_to(archive.root.absolute()).as_posix()
    except ValueError:
        return str(path)

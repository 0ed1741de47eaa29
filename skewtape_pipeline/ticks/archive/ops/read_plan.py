"""What a read touches: where each symbol-day of one state of the archive is (a
:class:`Snapshot` of the catalog and the hot index, now or as of a version) as the
:class:`Piece` to read, and a read's arguments checked. ``reader.ArchiveReader`` carries the
plan out."""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any

from skewtape_pipeline.errors import CatalogMismatchError, ConfigError
from skewtape_pipeline.storage import TierFile
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogPartition,
    FileRecord,
    FileRows,
    SymbolDayKey,
    partitions_of,
    symbols_of,
)
from skewtape_pipeline.ticks.archive.store.policy import HOT
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import WRITTEN_BY_COMPACTION, unrecorded_hint
from skewtape_pipeline.ticks.archive.store.version_files import HotEntry, Version
from skewtape_pipeline.ticks.archive.store.versions import VersionLog

VIEW_COLUMNS = ("symbol", "date", "ts", "price", "quantity", "side", "tier", "year", "month")


@dataclass(frozen=True)
class Piece:
    """One symbol-day to read: from a hot file (``rows`` None) or from ``rows`` (first row,
    count) of a consolidated file, with its tier."""

    key: SymbolDayKey
    tier: str
    file: TierFile
    rel: str
    record: FileRecord
    whose: str
    rows: tuple[int, int] | None = None
    version: int | None = None
    """The version this is read as of, its kept hot file or a consolidated file its catalog
    lists (None: a file of the archive now)."""


class Snapshot:
    """What one state of the archive of ``tiers`` (now, or as of a ``version`` of its ``log``,
    which keeps that version's hot files) says about where symbol-days are: the catalog and the
    live hot files, looked up per symbol."""

    def __init__(
        self,
        tiers: ArchiveTiers,
        catalog: Catalog,
        hot: hot_index.HotIndex | dict[SymbolDayKey, HotEntry] | None,
        *,
        version: Version | None = None,
        log: VersionLog | None = None,
    ):
        self.root, self.catalog, self.version, self.log = tiers.root, catalog, version, log
        self._hot = hot
        self._listed: dict[SymbolDayKey, hot_index.IndexEntry] | None = None
        if hot is None:  # an archive without a hot index: listed once, for this read
            records = hot_index.legacy_records(self.root)
            listed = hot_index.scan_index(self.root, records)
            self._listed = {e.key: e for e in listed if e.present}
        self._rows = FileRows(catalog)
        self._parts: dict[str, list[CatalogPartition]] = {}
        self._files: dict[str, TierFile] = {}
        self._pieces: dict[tuple[str, date | None, date | None], list[Piece]] = {}
        self._symbols: set[str] | None = None

    def symbols(self) -> set[str]:
        """The symbols with at least one visible symbol-day."""
        if self._symbols is None:
            self._symbols = self._all_symbols()
        return self._symbols

    def _all_symbols(self) -> set[str]:
        out = {p.symbol for s in symbols_of(self.catalog) for p in self._visible_catalogued(s)}
        if isinstance(self._hot, hot_index.HotIndex):
            out |= self._hot.symbols()
        elif self._hot is not None:
            out |= {s for s, _ in self._hot}
        else:
            out |= {s for s, _ in self._listed or {}}
        return out

    def _hot_days(self, symbol: str) -> dict[date, Any]:
        if isinstance(self._hot, hot_index.HotIndex):
            return {d: self._hot.present((symbol, d)) for d in self._hot.days(symbol)}
        entries = self._hot if self._hot is not None else self._listed or {}
        return {d: e for (s, d), e in entries.items() if s == symbol}

    def _partitions_of(self, symbol: str) -> list[CatalogPartition]:
        found = self._parts.get(symbol)
        if found is None:
            found = self._parts[symbol] = partitions_of(self.catalog, symbol)
        return found

    def _visible_catalogued(self, symbol: str) -> list[CatalogPartition]:
        withdrawn = self.catalog.withdrawn
        return [p for p in self._partitions_of(symbol) if p.key not in withdrawn]

    def pieces(
        self, tiers: ArchiveTiers, symbol: str, start: date | None, end: date | None
    ) -> list[Piece]:
        """The pieces of ``symbol`` from ``start`` to ``end``, by date (kept for this state)."""
        key = (symbol, start, end)
        found = self._pieces.get(key)
        if found is None:
            found = self._placed(tiers, symbol, start, end)
            if len(self._pieces) >= 4096:
                self._pieces.clear()
            self._pieces[key] = found
        return found

    def _placed(
        self, tiers: ArchiveTiers, symbol: str, start: date | None, end: date | None
    ) -> list[Piece]:
        def wanted(day: date) -> bool:
            return (start is None or day >= start) and (end is None or day <= end)

        hot = {d: e for d, e in self._hot_days(symbol).items() if wanted(d)}
        catalogued = {p.date: p for p in self._partitions_of(symbol) if wanted(p.date)}
        out = []
        for day in sorted(hot.keys() | catalogued.keys()):
            part = catalogued.get(day)
            entry = hot.get(day)
            if entry is not None and not self._superseded(entry, part):
                out.append(self._hot_piece(symbol, day, entry, part))
            elif part is not None and part.key not in self.catalog.withdrawn:
                out.append(self._consolidated_piece(tiers, part))
        return out

    def _superseded(self, entry: Any, part: CatalogPartition | None) -> bool:
        if self.version is not None or part is None or part.source is None:
            return False  # a version's manifest lists its live hot files only
        return entry.stamp is not None and part.source.same_file(entry.stamp)

    def _hot_piece(self, symbol: str, day: date, entry: Any, part: CatalogPartition | None):
        if isinstance(entry, HotEntry):  # a version's: kept under its content name
            assert self.log is not None, "a version's snapshot is built with its log"
            blob = self.log.hot_blob(entry)
            rel = blob.relative_to(self.root).as_posix()
            record = FileRecord(entry.size, entry.sha256)
            number = None if self.version is None else self.version.version
            return Piece((symbol, day), HOT, blob, rel, record, "its content name", version=number)
        rel = entry.rel
        path = Path(f"{self.root}/{rel}")
        if entry.sha256 is None or entry.size is None:
            source = None if part is None else part.source
            if source is None or entry.stamp is None or not source.same_file(entry.stamp):
                raise CatalogMismatchError(
                    f"{path}: no record of its size and sha256, so it cannot be verified before "
                    f"it is read; {unrecorded_hint(self.root)}",
                    paths=[path],
                )
            record = FileRecord(source.size, source.sha256)
        else:
            record = FileRecord(entry.size, entry.sha256)
        return Piece((symbol, day), HOT, path, rel, record, WRITTEN_BY_COMPACTION)

    def _consolidated_piece(self, tiers: ArchiveTiers, part: CatalogPartition) -> Piece:
        item = self.catalog.files[part.file]
        rows = self._rows.of(part)
        record = FileRecord(item.bytes, item.sha256)
        file = self._files.get(part.file)
        if file is None:
            file = self._files[part.file] = tiers.resolve(part.file)
        number = None if self.version is None else self.version.version
        return Piece(part.key, part.tier, file, part.file, record, "the catalog", rows, number)


def check_columns(columns: Collection[str] | None) -> list[str]:
    """``columns`` as a list of the view's columns (all for None); ConfigError for anything
    else, naming them."""
    picked = list(VIEW_COLUMNS) if columns is None else list(columns)
    if isinstance(columns, str) or not picked or any(c not in VIEW_COLUMNS for c in picked):
        raise ConfigError(f"columns = {columns!r}: expected some of {', '.join(VIEW_COLUMNS)}")
    return picked


def check_days(start: object, end: object) -> tuple[date | None, date | None]:
    """``start`` and ``end`` as days (:func:`check_day`); ConfigError naming both when
    ``start`` is after ``end`` (no day lies between: an empty answer would hide the swap)."""
    first, last = check_day(start, "start"), check_day(end, "end")
    if first is not None and last is not None and first > last:
        raise ConfigError(f"start {first} is after end {last}: no day lies between them")
    return first, last


def check_day(value: object, name: str, *, required: bool = False) -> date | None:
    """``value`` as a day: a ``date``, a ``datetime`` or pandas ``Timestamp`` (its UTC day when
    it has a time zone, else its own), or ISO text (``2026-12-01``, or a time); None stays
    None unless ``required``. ConfigError naming ``name`` for anything else."""
    if value is None and not required:
        return None
    if isinstance(value, str):
        text = value.strip()
        try:
            return date.fromisoformat(text)
        except ValueError:
            pass
        try:
            value = datetime.fromisoformat(text.replace("Z", "+00:00"))
        except ValueError:
            raise ConfigError(
                f"{name} = {value!r}: expected a day (YYYY-MM-DD), a date or a datetime"
            ) from None
    to_pydatetime = getattr(value, "to_pydatetime", None)
    if callable(to_pydatetime) and not isinstance(value, date):
        value = to_pydatetime()
    if isinstance(value, datetime):
        if value.tzinfo is not None:
            value = value.astimezone(UTC)
        return value.date()
    if isinstance(value, date):
        return value
    raise ConfigError(f"{name} = {value!r}: expected a day (YYYY-MM-DD), a date or a datetime")


def check_symbols(
    symbols: Iterable[str] | str | None, *, required: bool = False
) -> list[str] | None:
    """``symbols`` (one symbol, or any iterable of them, read once) as a list; None stays
    None unless ``required``. ConfigError naming what is not a symbol."""
    if symbols is None and not required:
        return None
    if isinstance(symbols, str):
        return [symbols]
    try:
        asked = list(symbols)  # type: ignore[arg-type]
    except TypeError:
        raise ConfigError(
            f"symbols = {symbols!r}: expected a symbol or a list of symbols (strings)"
        ) from None
    for symbol in asked:
        if not isinstance(symbol, str):
            raise ConfigError(f"symbols: {symbol!r} is not a symbol (a string)")
    return asked

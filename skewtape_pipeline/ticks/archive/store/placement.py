"""Where each symbol-day's rows live now: the live state of an archive, locations, metrics.

A symbol-day lives in exactly one place, which is what lets the query view return every tick
exactly once while re-tiering copies rows around:

- in a **consolidated file** (warm or cold) when the catalog lists it there, unless a hot file
  newer than the one it was read from exists (a recompaction: the hot file is then the current
  copy, and the consolidated copy is hidden until re-tiering replaces it);
- otherwise in its **hot file** ``<root>/symbol=<S>/year=/month=/date=/part-0.parquet``.

A hot file whose rows were moved (same file, by inode, size and mtime, as the catalog recorded
when it read it) is *superseded*: still on disk until re-tiering removes it (never, in
``books_and_records`` mode), but no longer part of the archive. A catalogued symbol-day the
publisher corrected away (*withdrawn*) has no place: its consolidated copy is hidden until
re-tiering rewrites the file without it.

The catalog (``ticks.archive.store.catalog``) says which consolidated file holds each catalogued
symbol-day (a local file, or an object when its tier root is an S3 prefix), the hot index
(``ticks.archive.store.hot_index``) which hot files the archive holds, each with its record and its
stamp when published; this module reads both, once, into that one placement (no listing of the
root, unless the archive predates the hot index). Whether a hot file is the superseded one
compares the stamp the index recorded with the catalog's source stamp; whether a live one holds
the very ticks of its consolidated copy (re-tiering then records it as that copy's source) is
:class:`ConsolidatedCopies`'s question.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import date
from pathlib import Path

import pyarrow as pa

from skewtape_pipeline.arrow_memory import owned_buffer, owned_reader
from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.hashing import FileStamp, sha256_bytes
from skewtape_pipeline.storage import TierFile, size_of
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogPartition,
    CatalogStore,
    FileRecord,
    FileRows,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import read_footer, read_symbol_day
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, TIERS, WARM
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.parquet_file import read_archive_batch

HOT_GLOB = hot_index.HOT_GLOB


@dataclass(frozen=True)
class HotFile:
    """A symbol-day file of the hot tier: its stamp when it was published (as the hot index
    records it; when listed, for an archive without an index) and its record (size and
    sha256; None when the index has none: a file written before hot files were recorded)."""

    symbol: str
    day: date
    path: Path
    stamp: FileStamp
    record: FileRecord | None = None

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.day)


def hot_rel(archive_root: Path, hot: HotFile) -> str:
    """The hot file's path relative to the archive root (POSIX), as its record names it."""
    path, prefix = hot.path.as_posix(), Path(archive_root).as_posix().rstrip("/") + "/"
    if path.startswith(prefix):  # as listed under the root (a string cut: no path parsing)
        return path[len(prefix) :]
    return hot.path.relative_to(archive_root).as_posix()


def scan_hot_files(archive_root: Path) -> list[HotFile]:
    """Every ``symbol=/year=/month=/date=/part-0.parquet`` under the root, by symbol then day (a
    listing of the root: ``verify-archive`` and the index's rebuild compare it with the index).

    Raises TickFormatError for a partition folder whose name does not decode.
    """
    root = Path(archive_root)
    return [hot_file_of(root, e) for e in hot_index.scan_index(root) if e.present]


def hot_files(archive_root: Path, index: hot_index.HotIndex | None = None) -> list[HotFile]:
    """The hot files the archive holds, by symbol then day: from its hot index (``index``, or
    read now), or a listing of the root when it has none (an archive written before the index;
    its first writer builds one)."""
    root = Path(archive_root)
    if index is None:
        index = hot_index.HotIndex.read(root)
    if index is None:
        records = hot_index.legacy_records(root)
        return [hot_file_of(root, e) for e in hot_index.scan_index(root, records) if e.present]
    return [hot_file_of(root, e) for e in index.entries()]


def hot_file_of(root: Path, entry: hot_index.IndexEntry) -> HotFile:
    """The :class:`HotFile` of an index entry of the archive at ``root``."""
    path = Path(f"{root}/{entry.rel}")
    stamp = entry.stamp
    if stamp is None:  # a line of the older form: stamped now
        try:
            stamp = FileStamp.of(path)
        except FileNotFoundError:
            stamp = FileStamp(0, 0, -1, 0, 0)
    record = None
    if entry.sha256 is not None and entry.size is not None:
        record = FileRecord(entry.size, entry.sha256)
    return HotFile(entry.symbol, entry.day, path, stamp, record)


@dataclass(frozen=True)
class ArchiveState:
    """One consistent reading of where every symbol-day lives (see the module docstring).

    ``hot_live`` are hot files that are the current copy of their symbol-day;
    ``hot_superseded`` hot files whose rows live in a consolidated file now (or were
    withdrawn from it); ``overridden`` the catalogued symbol-days whose consolidated copy is
    hidden by a newer hot file. A withdrawn symbol-day's consolidated copy is hidden too; a
    newer hot file of it (the publisher re-added ticks) is live and the day is also overridden.
    """

    catalog: Catalog
    hot_live: list[HotFile]
    hot_superseded: list[HotFile]
    overridden: frozenset[SymbolDayKey]

    @property
    def withdrawn(self) -> frozenset[SymbolDayKey]:
        """Catalogued symbol-days the publisher corrected away (``Catalog.withdrawn``)."""
        return self.catalog.withdrawn

    @property
    def hidden(self) -> frozenset[SymbolDayKey]:
        """Catalogued symbol-days whose consolidated copy is not part of the archive:
        overridden by a newer hot file, or withdrawn."""
        return self.overridden | self.catalog.withdrawn

    def consolidated_files(self, tier: str) -> list[str]:
        """Catalog paths of ``tier``'s consolidated files, sorted."""
        return sorted(f.path for f in self.catalog.files.values() if f.tier == tier)


def archive_state(archive_root: Path) -> ArchiveState:
    """Read the catalog and the hot index once and classify every hot file against the catalog
    (reads, writes nothing; no listing of the root unless it has no index yet).

    Raises TickFormatError for a damaged catalog or hot index, or an undecodable partition
    folder.
    """
    root = Path(archive_root)
    return classified(CatalogStore(root).read(), hot_files(root))


def classified(catalog: Catalog, files: list[HotFile]) -> ArchiveState:
    """The state of the hot ``files`` against ``catalog`` (see :class:`ArchiveState`)."""
    live, superseded, overridden = [], [], set()
    for hot in files:
        entry = catalog.partitions.get(hot.key)
        if entry is None:
            live.append(hot)
        elif entry.source is not None and entry.source.same_file(hot.stamp):
            superseded.append(hot)
        else:
            live.append(hot)
            overridden.add(hot.key)
    return ArchiveState(catalog, live, superseded, frozenset(overridden))


class ConsolidatedCopies:
    """Compares live hot files with the consolidated copies of their symbol-days (in
    ``files``: the catalog's files resolved; of a copy, its rows alone are read)."""

    def __init__(self, files: Mapping[str, TierFile], catalog: Catalog):
        self.files, self.catalog, self._rows = files, catalog, FileRows(catalog)

    def same_ticks(self, hot: HotFile, entry: CatalogPartition) -> str | None:
        """The sha256 of ``hot`` when it holds the bytes that were moved, or other bytes with
        the very ticks (ts, price, quantity, side) of ``entry``'s consolidated copy (the day
        compacted again unchanged): the hot file is then that copy's source. None when the
        ticks differ (a correction: the hot file is newer), or when its ticks do not read.
        Raises DamagedFileError naming the hot file when its footer does not decode."""
        data = Path(hot.path).read_bytes()
        digest = sha256_bytes(data)
        if entry.source is not None and digest == entry.source.sha256:
            return digest
        buffer = owned_buffer(data)
        if entry.rows != read_footer(hot.path, buffer).num_rows:  # the bytes hashed, not a reread
            return None
        try:
            batch = read_archive_batch(owned_reader(buffer))  # type: ignore[arg-type]
        except (OSError, TickFormatError, pa.ArrowException):
            return None  # unreadable: planned as a newer copy, refused when it is read
        if batch.first_difference(self._copy(entry)) is not None:
            return None
        return digest

    def _copy(self, entry: CatalogPartition) -> TickBatch:
        """The consolidated copy's ticks, its rows alone read (the catalog places them)."""
        path = self.files[entry.file]
        return read_symbol_day(path, read_footer(path), entry.key, self._rows.of(entry))


# --- locations and metrics ----------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Where one symbol-day's rows live now: the file, its tier, the rows and bytes."""

    symbol: str
    date: date
    tier: str
    path: TierFile
    rows: int
    bytes: int
    consolidated: bool


def locate(tiers: ArchiveTiers, symbol: str, day: date) -> Location | None:
    """Where the rows of ``symbol`` on ``day`` live now in the archive whose resolved tiers
    are ``tiers`` (``Archive.tiers``: its root, and the tier roots a catalog path names);
    None when the archive has none (never archived, or withdrawn with no newer hot file).

    For a consolidated file ``bytes`` is the symbol-day's byte share; for a hot file, its size.
    """
    state = archive_state(tiers.root)
    key = (symbol, day)
    for hot in state.hot_live:
        if hot.key == key:
            return _hot_location(hot)
    entry = state.catalog.partitions.get(key)
    if entry is None or key in state.hidden:
        return None
    return _consolidated_location(tiers, entry)


def locations(tiers: ArchiveTiers) -> list[Location]:
    """Where every symbol-day of the archive (whose resolved tiers are ``tiers``) lives now,
    by symbol then date."""
    state = archive_state(tiers.root)
    out = [_hot_location(hot) for hot in state.hot_live]
    out += [
        _consolidated_location(tiers, entry)
        for key, entry in state.catalog.partitions.items()
        if key not in state.hidden
    ]
    return sorted(out, key=lambda loc: (loc.symbol, loc.date))


def _hot_location(hot: HotFile) -> Location:
    rows = read_footer(hot.path).num_rows
    return Location(hot.symbol, hot.day, HOT, hot.path, rows, hot.stamp.size, False)


def _consolidated_location(tiers: ArchiveTiers, entry: CatalogPartition) -> Location:
    path = tiers.resolve(entry.file)
    return Location(entry.symbol, entry.date, entry.tier, path, entry.rows, entry.byte_share, True)


@dataclass(frozen=True)
class TierMetrics:
    """What one tier holds: files, bytes on disk, ticks and symbol-days."""

    tier: str
    files: int = 0
    bytes: int = 0
    ticks: int = 0
    symbol_days: int = 0


@dataclass(frozen=True)
class ArchiveMetrics:
    """The archive as a whole, per tier, plus what is kept on disk but superseded or hidden.

    Per tier, ``files`` and ``bytes`` are what is on disk (a consolidated file counts whole,
    hidden copies inside it included), while ``ticks`` and ``symbol_days`` are what the query
    view returns. ``hidden_*`` count the consolidated copies the view hides (overridden by a
    newer hot file, or withdrawn) that are still inside their files until re-tiering rewrites
    them. ``retained_*`` counts superseded files still on disk: hot files and consolidated
    files whose rows were moved (kept for good in ``books_and_records`` mode, while a kept
    version reads them (``ticks.archive.store.versions``), else until the next re-tiering removes
    them) and uncommitted files left by an interrupted run.
    """

    generation: int
    tiers: Mapping[str, TierMetrics]
    retained_files: int
    retained_bytes: int
    hidden_symbol_days: int = 0
    hidden_ticks: int = 0

    def to_dict(self) -> dict[str, int]:
        """Flat numbers (``hot_bytes``, ``cold_ticks``, ...) for plotting over time."""
        out = {"catalog_generation": self.generation}
        for tier, metrics in self.tiers.items():
            for name in ("files", "bytes", "ticks", "symbol_days"):
                out[f"{tier.lower()}_{name}"] = getattr(metrics, name)
        out["retained_files"] = self.retained_files
        out["retained_bytes"] = self.retained_bytes
        out["hidden_symbol_days"] = self.hidden_symbol_days
        out["hidden_ticks"] = self.hidden_ticks
        out["total_bytes"] = sum(m.bytes for m in self.tiers.values())
        out["total_ticks"] = sum(m.ticks for m in self.tiers.values())
        return out


def archive_metrics(tiers: ArchiveTiers) -> ArchiveMetrics:
    """Bytes, files, ticks and symbol-days per tier of the archive whose resolved tiers are
    ``tiers`` (``Archive.tiers``).

    Hot numbers come from the live hot files (their footers), warm and cold from the catalog:
    bytes and files on disk, ticks and symbol-days visible (see :class:`ArchiveMetrics`).
    The warm and cold roots of ``tiers`` are scanned for retained files. Reads only.
    """
    state = archive_state(tiers.root)
    hot_ticks = sum(read_footer(hot.path).num_rows for hot in state.hot_live)
    per_tier = {
        HOT: TierMetrics(
            HOT,
            files=len(state.hot_live),
            bytes=sum(hot.stamp.size for hot in state.hot_live),
            ticks=hot_ticks,
            symbol_days=len(state.hot_live),
        )
    }
    for tier in (WARM, COLD):
        files = [f for f in state.catalog.files.values() if f.tier == tier]
        shown = [
            p
            for p in state.catalog.partitions.values()
            if p.tier == tier and p.key not in state.hidden
        ]
        per_tier[tier] = TierMetrics(
            tier,
            files=len(files),
            bytes=sum(f.bytes for f in files),
            ticks=sum(p.rows for p in shown),
            symbol_days=len(shown),
        )
    retained = [hot.path for hot in state.hot_superseded]
    retained += uncatalogued_files(tiers, state.catalog)
    hidden = [state.catalog.partitions[key] for key in state.hidden]
    return ArchiveMetrics(
        generation=state.catalog.generation,
        tiers={tier: per_tier[tier] for tier in TIERS},
        retained_files=len(retained),
        retained_bytes=sum(_size(path) for path in retained),
        hidden_symbol_days=len(hidden),
        hidden_ticks=sum(p.rows for p in hidden),
    )


def uncatalogued_files(tiers: ArchiveTiers, catalog: Catalog) -> list[TierFile]:
    """Parquet files under the warm and cold roots of ``tiers`` (``Archive.tiers``; folders or
    S3 prefixes) that the catalog does not list, warm first."""
    return [file for _, file, rel in tiers.listing() if rel not in catalog.files]


def _size(path: TierFile) -> int:
    try:
        return size_of(path)
    except FileNotFoundError:
        return 0

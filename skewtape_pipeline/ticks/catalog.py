"""Where each symbol-day's rows live now: the archive catalog, the live state, the metrics.

A symbol-day lives in exactly one place, which is what lets the query view return every tick
exactly once while re-tiering copies rows around:

- in a **consolidated file** (warm or cold) when the catalog lists it there, unless a hot file
  newer than the one it was read from exists (a recompaction: the hot file is then the current
  copy, and the consolidated copy is hidden until re-tiering replaces it);
- otherwise in its **hot file** ``<root>/symbol=<S>/year=/month=/date=/part-0.parquet``.

A hot file whose rows were moved (same file, by inode, size and mtime, as the catalog recorded
when it read it) is *superseded*: still on disk until re-tiering removes it (never, in
``books_and_records`` mode), but no longer part of the archive.

The catalog is one JSON file, ``<archive root>/_skewtape_catalog.json``, replaced atomically
(temporary file, fsync, rename): every re-tiering commits by that one rename, so a reader sees
either the old placement or the new one, never a mixture. Paths in it are relative to the
archive root (``../<archive>-cold/...``), so the data root can be moved as a whole.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import ConfigError, TickFormatError
from skewtape_pipeline.hashing import FileStamp, is_sha256_hex
from skewtape_pipeline.ticks.parquet_store import PART_FILE_NAME, decode_symbol
from skewtape_pipeline.ticks.tiers import COLD, HOT, TIERS, WARM, TierPolicy

CATALOG_FILE = "_skewtape_catalog.json"
CATALOG_FORMAT = "skewtape-tick-catalog"
CATALOG_VERSION = 1
HOT_GLOB = f"symbol=*/year=*/month=*/date=*/{PART_FILE_NAME}"

SymbolDayKey = tuple[str, date]


@dataclass(frozen=True)
class SourceStamp:
    """The hot symbol-day file a partition's rows were first read from, as it was then."""

    path: str
    sha256: str
    size: int
    inode: int
    mtime_ns: int

    def same_file(self, stamp: FileStamp) -> bool:
        """True when ``stamp`` (of the file at :attr:`path` now) is the file that was read."""
        return (stamp.inode, stamp.size, stamp.mtime_ns) == (self.inode, self.size, self.mtime_ns)


@dataclass(frozen=True)
class CatalogFile:
    """One consolidated file: where, which tier and period, and what it holds."""

    path: str
    tier: str
    period: str
    bytes: int
    rows: int
    sha256: str
    symbol_days: int


@dataclass(frozen=True)
class CatalogPartition:
    """Where one symbol-day's rows live in a consolidated file, and its share of the bytes.

    ``byte_share`` is this symbol-day's part of the file's bytes: each row group's bytes split
    by rows among the symbol-days in it, the footer spread over all by rows (largest remainder,
    so the shares of a file add up to its size exactly).
    """

    symbol: str
    date: date
    tier: str
    file: str
    rows: int
    byte_share: int
    source: SourceStamp | None = None

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.date)


@dataclass(frozen=True)
class Catalog:
    """The consolidated files of an archive and the symbol-days they hold (immutable).

    ``withdrawn`` are catalogued symbol-days the publisher has since corrected away (no ticks
    any more): their consolidated copy is hidden until re-tiering rewrites the file without it.
    """

    generation: int = 0
    files: Mapping[str, CatalogFile] = field(default_factory=dict)
    partitions: Mapping[SymbolDayKey, CatalogPartition] = field(default_factory=dict)
    withdrawn: frozenset[SymbolDayKey] = frozenset()

    def partitions_of(self, file: str) -> list[CatalogPartition]:
        """The partitions held by ``file`` (a catalog path), ordered by symbol then date."""
        return sorted((p for p in self.partitions.values() if p.file == file), key=_order)

    def to_json(self) -> bytes:
        """The catalog file's bytes (sorted, so equal catalogs give equal bytes)."""
        body = {
            "format": CATALOG_FORMAT,
            "version": CATALOG_VERSION,
            "generation": self.generation,
            "files": [asdict(f) for f in sorted(self.files.values(), key=lambda f: f.path)],
            "partitions": [
                {**asdict(p), "date": p.date.isoformat()}
                for p in sorted(self.partitions.values(), key=_order)
            ],
            "withdrawn": [[symbol, day.isoformat()] for symbol, day in sorted(self.withdrawn)],
        }
        return (json.dumps(body, sort_keys=True, separators=(",", ":")) + "\n").encode()


def _order(partition: CatalogPartition) -> tuple[str, date]:
    return partition.key


# --- paths --------------------------------------------------------------------------------------


def catalog_path(archive_root: Path) -> Path:
    """``<archive root>/_skewtape_catalog.json``."""
    return Path(archive_root) / CATALOG_FILE


def relative_to_root(archive_root: Path, path: Path) -> str:
    """``path`` relative to the archive root, POSIX style (may start with ``../``)."""
    return Path(os.path.relpath(Path(path).absolute(), Path(archive_root).absolute())).as_posix()


def resolve(archive_root: Path, relative: str) -> Path:
    """The path a catalog entry names, for the archive at ``archive_root``."""
    return Path(os.path.normpath(Path(archive_root).absolute() / relative))


# --- read and write -----------------------------------------------------------------------------


def read_catalog(archive_root: Path) -> Catalog:
    """The archive's catalog; an empty one (generation 0) when it has none yet.

    Raises
    ------
    TickFormatError
        The catalog file is unreadable or malformed (names the file and the field).
    """
    path = catalog_path(archive_root)
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return Catalog()
    except OSError as exc:
        raise TickFormatError(f"{path}: cannot read the catalog ({exc.strerror})") from None
    try:
        body = json.loads(raw)
    except ValueError as exc:
        raise TickFormatError(f"{path}: not valid JSON ({exc})") from None
    return _parse_catalog(path, body)


def write_catalog(archive_root: Path, catalog: Catalog) -> None:
    """Replace the catalog atomically (temporary file, fsync, rename, fsync the folder)."""
    fsio.atomic_write_bytes(catalog_path(archive_root), catalog.to_json())


def _parse_catalog(path: Path, body: Any) -> Catalog:
    if not isinstance(body, dict) or body.get("format") != CATALOG_FORMAT:
        raise TickFormatError(f"{path}: field format: expected {CATALOG_FORMAT!r}")
    if body.get("version") != CATALOG_VERSION:
        raise TickFormatError(
            f"{path}: field version: {body.get('version')!r}, expected {CATALOG_VERSION}"
        )
    generation = body.get("generation")
    if not isinstance(generation, int) or isinstance(generation, bool) or generation < 0:
        raise TickFormatError(f"{path}: field generation: {generation!r}, expected an int >= 0")
    try:
        files = {}
        for i, entry in enumerate(_list(body, "files", path)):
            item = _file_entry(entry, where=f"files[{i}]")
            files[item.path] = item
        partitions = {}
        for i, entry in enumerate(_list(body, "partitions", path)):
            item = _partition_entry(entry, where=f"partitions[{i}]")
            if item.file not in files:
                raise ValueError(f"partitions[{i}].file: {item.file!r} is not a listed file")
            if item.key in partitions:
                raise ValueError(f"partitions[{i}]: {item.symbol} {item.date} listed twice")
            partitions[item.key] = item
        withdrawn = frozenset(
            _withdrawn_entry(entry, partitions, where=f"withdrawn[{i}]")
            for i, entry in enumerate(body.get("withdrawn", []))
        )
    except (ValueError, TypeError, KeyError) as exc:
        raise TickFormatError(f"{path}: field {exc}") from None
    return Catalog(generation=generation, files=files, partitions=partitions, withdrawn=withdrawn)


def _list(body: dict[str, Any], name: str, path: Path) -> list[Any]:
    value = body.get(name)
    if not isinstance(value, list):
        raise TickFormatError(f"{path}: field {name}: expected a list")
    return value


def _file_entry(entry: Any, *, where: str) -> CatalogFile:
    item = CatalogFile(**_fields(entry, CatalogFile, where))
    _check_tier(item.tier, where)
    if not is_sha256_hex(item.sha256):
        raise ValueError(f"{where}.sha256: {item.sha256!r} is not a sha256")
    return item


def _partition_entry(entry: Any, *, where: str) -> CatalogPartition:
    data = _fields(entry, CatalogPartition, where)
    data["date"] = date.fromisoformat(data["date"])
    source = data.get("source")
    if source is not None:
        data["source"] = SourceStamp(**_fields(source, SourceStamp, f"{where}.source"))
    item = CatalogPartition(**data)
    _check_tier(item.tier, where)
    return item


def _withdrawn_entry(
    entry: Any, partitions: Mapping[SymbolDayKey, CatalogPartition], *, where: str
) -> SymbolDayKey:
    if not (isinstance(entry, list) and len(entry) == 2 and isinstance(entry[0], str)):
        raise ValueError(f"{where}: expected [symbol, date]")
    key = (entry[0], date.fromisoformat(entry[1]))
    if key not in partitions:
        raise ValueError(f"{where}: {entry[0]} {entry[1]} is not a catalogued symbol-day")
    return key


def _fields(entry: Any, cls: type, where: str) -> dict[str, Any]:
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected an object")
    names = set(cls.__dataclass_fields__)  # type: ignore[attr-defined]
    unknown = sorted(set(entry) - names)
    if unknown:
        raise ValueError(f"{where}: unknown keys {unknown}")
    return dict(entry)


def _check_tier(tier: object, where: str) -> None:
    if tier not in (WARM, COLD):
        raise ValueError(f"{where}.tier: {tier!r}, expected WARM or COLD")


# --- the live state -----------------------------------------------------------------------------


@dataclass(frozen=True)
class HotFile:
    """A symbol-day file of the hot tier, and its stamp when it was listed."""

    symbol: str
    day: date
    path: Path
    stamp: FileStamp

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.day)


def scan_hot_files(archive_root: Path) -> list[HotFile]:
    """Every ``symbol=/year=/month=/date=/part-0.parquet`` under the root, by symbol then day.

    Raises TickFormatError for a partition folder whose name does not decode.
    """
    found = []
    for path in Path(archive_root).glob(HOT_GLOB):
        symbol_dir, date_dir = path.parents[3].name, path.parent.name
        try:
            symbol = decode_symbol(symbol_dir.removeprefix("symbol="))
            day = date.fromisoformat(date_dir.removeprefix("date="))
        except (UnicodeDecodeError, ValueError) as exc:
            raise TickFormatError(f"{path}: partition folder does not decode ({exc})") from None
        try:
            stamp = FileStamp.of(path)
        except FileNotFoundError:
            continue  # removed while listing
        found.append(HotFile(symbol, day, path, stamp))
    return sorted(found, key=lambda h: h.key)


@dataclass(frozen=True)
class ArchiveState:
    """One consistent reading of where every symbol-day lives (see the module docstring).

    ``hot_live`` are hot files that are the current copy of their symbol-day;
    ``hot_superseded`` hot files whose rows live in a consolidated file now; ``overridden``
    the catalogued symbol-days whose consolidated copy is hidden by a newer hot file.
    """

    catalog: Catalog
    hot_live: list[HotFile]
    hot_superseded: list[HotFile]
    overridden: frozenset[SymbolDayKey]

    def consolidated_files(self, tier: str) -> list[str]:
        """Catalog paths of ``tier``'s consolidated files, sorted."""
        return sorted(f.path for f in self.catalog.files.values() if f.tier == tier)


def archive_state(archive_root: Path) -> ArchiveState:
    """Read the catalog once and classify every hot file against it (reads, writes nothing).

    Raises TickFormatError for a damaged catalog or an undecodable partition folder.
    """
    root = Path(archive_root)
    catalog = read_catalog(root)
    live, superseded, overridden = [], [], set()
    for hot in scan_hot_files(root):
        entry = catalog.partitions.get(hot.key)
        if entry is None:
            live.append(hot)
        elif entry.source is not None and entry.source.same_file(hot.stamp):
            superseded.append(hot)
        else:
            live.append(hot)
            overridden.add(hot.key)
    return ArchiveState(catalog, live, superseded, frozenset(overridden))


# --- locations and metrics ----------------------------------------------------------------------


@dataclass(frozen=True)
class Location:
    """Where one symbol-day's rows live now: the file, its tier, the rows and bytes."""

    symbol: str
    date: date
    tier: str
    path: Path
    rows: int
    bytes: int
    consolidated: bool


def locate(archive_root: Path, symbol: str, day: date) -> Location | None:
    """Where the rows of ``symbol`` on ``day`` live now; None when the archive has none.

    For a consolidated file ``bytes`` is the symbol-day's byte share; for a hot file, its size.
    """
    state = archive_state(archive_root)
    key = (symbol, day)
    for hot in state.hot_live:
        if hot.key == key:
            return _hot_location(hot)
    entry = state.catalog.partitions.get(key)
    if entry is None:
        return None
    return _consolidated_location(archive_root, entry)


def locations(archive_root: Path) -> list[Location]:
    """Where every symbol-day of the archive lives now, by symbol then date."""
    state = archive_state(archive_root)
    out = [_hot_location(hot) for hot in state.hot_live]
    out += [
        _consolidated_location(archive_root, entry)
        for key, entry in state.catalog.partitions.items()
        if key not in state.overridden
    ]
    return sorted(out, key=lambda loc: (loc.symbol, loc.date))


def _hot_location(hot: HotFile) -> Location:
    rows = pq.read_metadata(hot.path).num_rows
    return Location(hot.symbol, hot.day, HOT, hot.path, rows, hot.stamp.size, False)


def _consolidated_location(archive_root: Path, entry: CatalogPartition) -> Location:
    path = resolve(archive_root, entry.file)
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
    """The archive as a whole, per tier, plus what is kept on disk but superseded.

    ``retained_*`` counts superseded files still on disk: hot files and consolidated files
    whose rows were moved (kept for good in ``books_and_records`` mode, else until the next
    re-tiering removes them) and uncommitted files left by an interrupted run.
    """

    generation: int
    tiers: Mapping[str, TierMetrics]
    retained_files: int
    retained_bytes: int

    def to_dict(self) -> dict[str, int]:
        """Flat numbers (``hot_bytes``, ``cold_ticks``, ...) for plotting over time."""
        out = {"catalog_generation": self.generation}
        for tier, metrics in self.tiers.items():
            for name in ("files", "bytes", "ticks", "symbol_days"):
                out[f"{tier.lower()}_{name}"] = getattr(metrics, name)
        out["retained_files"] = self.retained_files
        out["retained_bytes"] = self.retained_bytes
        out["total_bytes"] = sum(m.bytes for m in self.tiers.values())
        out["total_ticks"] = sum(m.ticks for m in self.tiers.values())
        return out


def archive_metrics(archive_root: Path, *, policy: TierPolicy | None = None) -> ArchiveMetrics:
    """Bytes, files, ticks and symbol-days per tier of the archive at ``archive_root``.

    Hot numbers come from the live hot files (their footers), warm and cold from the catalog.
    ``policy`` names the tier roots scanned for retained files (default: the default policy).
    Reads only.
    """
    root = Path(archive_root)
    policy = TierPolicy() if policy is None else policy
    if not isinstance(policy, TierPolicy):
        raise ConfigError(f"policy = {policy!r}: expected a TierPolicy")
    state = archive_state(root)
    hot_ticks = sum(pq.read_metadata(hot.path).num_rows for hot in state.hot_live)
    tiers = {
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
            if p.tier == tier and p.key not in state.overridden
        ]
        tiers[tier] = TierMetrics(
            tier,
            files=len(files),
            bytes=sum(f.bytes for f in files),
            ticks=sum(p.rows for p in shown),
            symbol_days=len(shown),
        )
    retained = [hot.path for hot in state.hot_superseded]
    retained += uncatalogued_files(root, policy, state.catalog)
    return ArchiveMetrics(
        generation=state.catalog.generation,
        tiers={tier: tiers[tier] for tier in TIERS},
        retained_files=len(retained),
        retained_bytes=sum(_size(path) for path in retained),
    )


def uncatalogued_files(archive_root: Path, policy: TierPolicy, catalog: Catalog) -> list[Path]:
    """Parquet files under the warm and cold roots that the catalog does not list."""
    listed = {resolve(archive_root, f.path) for f in catalog.files.values()}
    found: set[Path] = set()
    for tier in (WARM, COLD):
        folder = policy.root_for(tier, archive_root)
        if folder.exists():
            candidates = (Path(os.path.normpath(p.absolute())) for p in folder.rglob("*.parquet"))
            found.update(p for p in candidates if p not in listed)
    return sorted(found)


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return 0

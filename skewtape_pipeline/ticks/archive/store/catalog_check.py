"""The writers' catalog check: the catalog against the files on disk, before anything changes.

:func:`checked_catalog` is what every writer (compaction, re-tiering, pruning, withdrawal and
removal) reads the catalog through: it refuses, with
:class:`~skewtape_pipeline.errors.CatalogMismatchError` naming the files, while the catalog is
missing but consolidated files exist, is unreadable, lists a file that is not on disk, or does
not account for a consolidated file on disk. A file the catalog does not list is accounted for
when it was committed and later replaced (its generation is not above the catalog's), or was
written by an interrupted run (the next generation) and holds only symbol-days the archive still
holds elsewhere. Anything else could be the only copy of some ticks, so nothing is removed or
rewritten until the catalog is repaired (``rebuild-catalog``: :func:`repair_hint`).
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from dataclasses import dataclass
from datetime import date
from functools import partial
from pathlib import Path

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    TickFormatError,
)
from skewtape_pipeline.storage import TierFile
from skewtape_pipeline.ticks.archive.store.catalog import (
    CATALOG_FILE,
    Catalog,
    CatalogStore,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import (
    META_CATALOG_GENERATION,
    META_PERIOD,
    META_SYMBOL_DAYS_COUNT,
    META_SYMBOL_DAYS_SHA256,
    META_TIER,
    read_footer,
    read_symbol_days,
    symbol_days_digest,
)
from skewtape_pipeline.ticks.archive.store.placement import scan_hot_files
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.encode.parquet_file import (
    CONSOLIDATED,
    META_LAYOUT,
)


def repair_hint(archive_root: Path) -> str:
    """How to repair a catalog: the rebuild command for this archive."""
    return (
        "rebuild the catalog from the files with "
        f"`skewtape-pipeline rebuild-catalog {archive_root}` (add --tier-policy if the archive "
        "has one)"
    )


@dataclass(frozen=True)
class RecordedSymbolDay:
    """One symbol-day as a consolidated file holds it (a run of its symbol and date columns)."""

    symbol: str
    day: date
    rows: int

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.day)


@dataclass(frozen=True)
class RecordedFile:
    """A consolidated file on disk, what its metadata says and the symbol-days it holds."""

    path: TierFile
    tier: str
    period: str
    generation: int
    rows: int
    symbol_days: tuple[RecordedSymbolDay, ...]


def read_recorded(path: TierFile, tier: str) -> RecordedFile:
    """What the consolidated file ``path`` (found under ``tier``'s root) records and holds.

    Reads the footer and the ``symbol`` and ``date`` columns only; the symbol-days those hold
    must match the metadata's ``skewtape.symbol_days_count`` and ``skewtape.symbol_days_sha256``.

    Raises
    ------
    DamagedFileError
        The footer does not decode.
    TickFormatError
        Not a consolidated tick file, metadata missing or malformed, written for another tier,
        or symbol-days that do not match the recorded digest (names the file and the key).
    """
    footer = read_footer(path)
    meta = {k.decode(): v.decode() for k, v in (footer.metadata or {}).items()}
    if meta.get(META_LAYOUT) != CONSOLIDATED:
        raise TickFormatError(f"{path}: not a consolidated tick file ({META_LAYOUT} missing)")
    try:
        generation = int(meta[META_CATALOG_GENERATION])
        count, digest = int(meta[META_SYMBOL_DAYS_COUNT]), meta[META_SYMBOL_DAYS_SHA256]
        tier_recorded, period = meta[META_TIER], meta[META_PERIOD]
    except (KeyError, ValueError) as exc:
        raise TickFormatError(f"{path}: metadata does not say what it holds ({exc!r})") from None
    if tier_recorded != tier:
        raise TickFormatError(
            f"{path}: metadata {META_TIER} is {tier_recorded}, but the file is in the {tier} root"
        )
    held = read_symbol_days(path, footer)
    found = symbol_days_digest(held)
    if (len(held), found) != (count, digest):
        raise TickFormatError(
            f"{path}: its symbol and date columns hold {len(held)} symbol-days (sha256 {found}), "
            f"its metadata {META_SYMBOL_DAYS_COUNT} and {META_SYMBOL_DAYS_SHA256} record "
            f"{count} ({digest}); the file was changed after it was written; restore it from a "
            "copy or move it away"
        )
    days = tuple(RecordedSymbolDay(symbol, day, rows) for symbol, day, rows in held)
    return RecordedFile(path, tier, period, generation, footer.num_rows, days)


def checked_catalog(tiers: ArchiveTiers) -> Catalog:
    """The catalog of the archive ``tiers`` resolves (``Archive.tiers``), once it is known to
    account for every consolidated file (see the module notes); what writers read before
    removing or rewriting anything. Reads only.

    Raises
    ------
    CatalogMismatchError
        The catalog is missing while consolidated files exist, unreadable, lists files that
        are not on disk, or does not account for files on disk; names them and the repair.
    """
    root, store = tiers.root, CatalogStore(tiers.root)
    where = store.path
    try:
        catalog, unreadable = store.read(), None
    except TickFormatError as exc:
        catalog, unreadable = Catalog(), exc
    listing = tiers.listing()
    if unreadable is not None:  # after the listing: a store that does not answer comes first
        raise CatalogMismatchError(
            f"{where}: the catalog is unreadable ({unreadable}); nothing was changed; "
            f"{repair_hint(root)}",
            paths=[where],
        )
    found = {rel: file for _, file, rel in listing}
    missing = [tiers.resolve(rel) for rel in catalog.files if rel not in found]  # none if absent
    on_disk = [(tier, file) for tier, file, _ in listing]
    if not where.exists():
        _refuse_missing(root, on_disk, "nothing was changed")
    if missing:
        raise CatalogMismatchError(
            f"{where}: the catalog lists {len(missing)} file(s) that are not on disk "
            f"({_names(missing)}); nothing was changed; restore them from a copy, or "
            f"{repair_hint(root)} (their symbol-days are then gone from the archive)",
            paths=missing,
        )
    listed = {found[rel] for rel in catalog.files}
    unaccounted = unaccounted_files(partial(hot_keys_of, root), catalog, on_disk, listed)
    if unaccounted:
        paths = [path for path, _ in unaccounted]
        reasons = "; ".join(f"{path}: {why}" for path, why in unaccounted[:5])
        raise CatalogMismatchError(
            f"{where}: the catalog (generation {catalog.generation}) does not account for "
            f"{len(paths)} consolidated file(s) on disk ({reasons}); nothing was changed; "
            f"{repair_hint(root)}",
            paths=paths,
        )
    return catalog


def check_catalog_present(tiers: ArchiveTiers) -> None:
    """Raise CatalogMismatchError when the catalog is missing but consolidated files exist
    that an empty catalog does not account for (a reader would otherwise answer without
    them); the files of a first re-tiering interrupted before its commit are fine. Reads only.
    """
    tiers.check_reachable()
    if CatalogStore(tiers.root).path.exists():
        return
    _refuse_missing(tiers.root, tiers.consolidated_files(), "the archive cannot be read without it")


def _refuse_missing(root: Path, on_disk: list[tuple[str, TierFile]], consequence: str) -> None:
    """Raise CatalogMismatchError unless an empty catalog accounts for every file on disk."""
    if not on_disk:
        return
    unaccounted = unaccounted_files(partial(hot_keys_of, root), Catalog(), on_disk, set())
    if unaccounted:
        paths = [path for path, _ in unaccounted]
        raise CatalogMismatchError(
            f"{CatalogStore(root).path}: the catalog is missing, but {len(paths)} consolidated "
            f"file(s) are on disk ({_names(paths)}); {consequence}; {repair_hint(root)}",
            paths=paths,
        )


def unaccounted_files(
    hot_keys: Callable[[], Collection[SymbolDayKey]],
    catalog: Catalog,
    on_disk: list[tuple[str, TierFile]],
    listed: Collection[TierFile],
) -> list[tuple[TierFile, str]]:
    """The consolidated files ``on_disk`` (``ArchiveTiers.consolidated_files``) that ``catalog``
    neither lists (``listed``: its files resolved) nor accounts for, with the reason.
    ``hot_keys`` (:func:`hot_keys_of` the archive root) is called at most once, only when a
    file written for the next generation needs its symbol-days looked for in the hot files."""
    hot: set[SymbolDayKey] | None = None
    out = []
    for tier, path in on_disk:
        if path in listed:
            continue
        try:
            recorded = read_recorded(path, tier)
        except (TickFormatError, OSError) as exc:
            out.append((path, f"not a readable consolidated tick file ({exc})"))
            continue
        if recorded.generation <= catalog.generation:
            continue  # committed once, replaced since: a retained or not yet removed copy
        if recorded.generation == catalog.generation + 1:
            if hot is None:
                hot = set(hot_keys())
            held = set(catalog.partitions) | hot
            if all(d.key in held for d in recorded.symbol_days):
                continue  # written by an interrupted run; its rows are still in its sources
        out.append(
            (
                path,
                f"written for catalog generation {recorded.generation}, the catalog is at "
                f"generation {catalog.generation}",
            )
        )
    return out


def hot_keys_of(archive_root: Path) -> set[SymbolDayKey]:
    """The symbol-days of the hot files under ``archive_root`` (live or superseded)."""
    return {h.key for h in scan_hot_files(archive_root)}


def _names(paths: list[TierFile], limit: int = 5) -> str:
    shown = ", ".join(str(p) for p in paths[:limit])
    return shown + (f" and {len(paths) - limit} more" if len(paths) > limit else "")


def remove_stale_catalog_temps(root: Path) -> None:
    """Temporary catalog files left by an interrupted commit (never other writers' temps)."""
    for temp in root.glob(f".{Path(CATALOG_FILE).stem}.*{fsio.TEMP_MARKER}"):
        temp.unlink(missing_ok=True)

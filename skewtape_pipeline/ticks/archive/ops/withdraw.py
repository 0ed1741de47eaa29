"""Symbol-days leaving the archive: the publisher corrected all their ticks away.

The archive mirrors its source, so a symbol-day whose ticks were all corrected away must leave
the ``ticks`` view, whatever tier it is in:

- :func:`withdraw_symbol_days` marks a warm or cold copy *withdrawn* in the catalog (one atomic
  write, generation + 1, audited before the catalog is replaced): the view, ``locate`` and the
  metrics leave it out at once, and the next ``retier.retier`` rewrites its consolidated file
  without it;
- :func:`remove_symbol_days` does that and removes the hot file too: what the archivers call
  (:func:`remove_while_writing`, within their caller's ``ArchiveCore.writing``) when a
  corrected source has no ticks left for a symbol-day. Both steps happen under one hold
  of the archive's lock (``ArchiveCore.locked``), so a re-tiering cannot move a hot file being
  removed back into a consolidated file; each removal is audited as re-tiering audits its own
  (``GarbageCollector.remove``, ``tick-archive-remove``).

The contracts are the front door's (``Archive.withdraw``, ``Archive.remove``).

In ``books_and_records`` mode both refuse (audited): records are never removed. Both read the
catalog through ``ArchiveCore.checked_catalog``: while it is missing, unreadable or does not
account for the consolidated files on disk, they refuse and change nothing.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass, replace
from datetime import date, datetime
from typing import TYPE_CHECKING

from skewtape_pipeline import faults
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.store.books import EVENT_WITHDRAW
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.garbage import Garbage
from skewtape_pipeline.ticks.archive.store.hot_index import HotIndex, ensure_index
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.trust import remove_stale_catalog_temps

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


@dataclass(frozen=True)
class Removal:
    """What :func:`remove_symbol_days` did to one symbol-day."""

    symbol: str
    day: date
    removed_file: bool
    """Its hot file existed and was removed."""
    withdrawn: bool
    """Its warm or cold copy was withdrawn from the catalog by this call."""


def remove_symbol_days(core: ArchiveCore, keys: Iterable[SymbolDayKey]) -> list[Removal]:
    """Withdraw symbol-days, then remove their hot files (``Archive.remove``)."""
    wanted = sorted(_check_keys(keys))
    with core.writing():
        return _remove_checked(core, wanted)


def remove_while_writing(core: ArchiveCore, keys: Iterable[SymbolDayKey]) -> list[Removal]:
    """:func:`remove_symbol_days` for a caller already within ``ArchiveCore.writing``
    (``snapshot_fills.archive_symbol_days``, as ``archive-month`` and the asset run it): no
    ``writing`` of its own, whose exit would record the policy given before the caller's own
    writes (and though they then failed)."""
    return _remove_checked(core, sorted(_check_keys(keys)))


def _remove_checked(core: ArchiveCore, wanted: list[SymbolDayKey]) -> list[Removal]:
    """:func:`remove_symbol_days` of the ``wanted`` keys, checked, within ``core.writing``."""
    root = core.root
    catalog = core.checked_catalog()
    for key in wanted:
        hot = partition_file(root, *key)
        if hot.exists() or key in catalog.partitions:
            core.books.check_may_delete(hot, why=_why(key))
    hot_files = [partition_file(root, *key) for key in wanted]
    listed = HotIndex.read(root)
    if (
        not any(hot.exists() for hot in hot_files)
        and not _to_withdraw(catalog, wanted)
        and not (listed is not None and any(listed.present(key) for key in wanted))
    ):
        return [Removal(*key, removed_file=False, withdrawn=False) for key in wanted]
    with core.locked("removing"):
        core.versions.record_unrecorded("remove")  # its version then holds its own changes
        withdrawn = set(_withdraw_locked(core, wanted))
        pairs = list(zip(wanted, hot_files, strict=True))
        index = ensure_index(root)
        gone = [
            Garbage(hot, core.tiers.relative(hot), _why(key))
            for key, hot in pairs
            if hot.exists() or index.present(key) is not None
        ]
        removed = set(core.garbage.remove(gone, unlist_first=True))
        removals = [
            Removal(*key, removed_file=hot in removed, withdrawn=key in withdrawn)
            for key, hot in pairs
        ]
        core.versions.record("remove")
        return removals


def _why(key: SymbolDayKey) -> str:
    return f"{key[0]} {key[1].isoformat()} has no ticks any more"


def withdraw_symbol_days(core: ArchiveCore, keys: Iterable[SymbolDayKey]) -> list[SymbolDayKey]:
    """Hide catalogued symbol-days at once (the contract: ``Archive.withdraw``)."""
    wanted = _check_keys(keys)
    with core.writing():
        if not _to_withdraw(core.checked_catalog(), wanted):
            return []  # nothing to do: no lock taken, nothing written
        with core.locked("withdrawing"):
            withdrawn = _withdraw_locked(core, wanted)
            core.versions.record("withdraw")
            return withdrawn


def _withdraw_locked(core: ArchiveCore, wanted: Collection[SymbolDayKey]) -> list[SymbolDayKey]:
    """:func:`withdraw_symbol_days` once the lock is held."""
    root = core.root
    remove_stale_catalog_temps(root)
    catalog = core.checked_catalog()
    new = _to_withdraw(catalog, wanted)
    if not new:
        return []
    files = sorted({catalog.partitions[key].file for key in new})
    core.books.check_may_delete(
        core.tiers.resolve(files[0]),
        why=f"withdrawing {len(new)} symbol-day(s) from its consolidated copy "
        f"(first: {new[0][0]} {new[0][1].isoformat()})",
    )
    core.versions.record_unrecorded("withdraw")  # none left when removing: recorded first
    updated = replace(
        catalog, generation=catalog.generation + 1, withdrawn=catalog.withdrawn | set(new)
    )
    core.books.audit(
        [
            {
                "event": EVENT_WITHDRAW,
                "archive": str(root.absolute()),
                "generation": updated.generation,
                "symbol_days": [[symbol, day.isoformat()] for symbol, day in new],
                "files": files,
                "reason": "the publisher corrected all their ticks away",
            }
        ],
    )
    faults.checkpoint("audited-withdrawal")
    core.catalog.write(updated)
    return new


def _to_withdraw(catalog: Catalog, keys: Collection[SymbolDayKey]) -> list[SymbolDayKey]:
    return sorted(k for k in keys if k in catalog.partitions and k not in catalog.withdrawn)


def _check_keys(keys: Iterable[SymbolDayKey]) -> set[SymbolDayKey]:
    if not isinstance(keys, Iterable):  # None, a number: not a bare TypeError
        raise ConfigError(f"keys = {keys!r}: expected (symbol, datetime.date) pairs")
    out = set()
    for key in keys:
        ok = isinstance(key, tuple) and len(key) == 2 and isinstance(key[0], str)
        if not ok or isinstance(key[1], datetime) or not isinstance(key[1], date):
            raise ConfigError(f"keys: {key!r} is not a (symbol, datetime.date) pair")
        out.add(key)
    return out

"""The re-tiering plan: where every symbol-day of an archive belongs at ``as_of`` under its tier
policy, and the files that takes (:func:`plan_retier`; writes nothing).

The planner (:class:`_Planner`) compares where every symbol-day lives now
(``placement.archive_state``) with where the policy wants it (``TierPolicy.placement``: its
age's tier and that tier's period, never warmer than a tier it reached). It reads the archive's
resolved tiers once, when it is built: each catalogued file resolved, each consolidated tier's
store, settings and layout. The plan carries them: each source's file and catalog path, each
rewrite's store, settings and layout, each withdrawn hot copy's removal. Carrying the plan out
(``lifecycle.retier``) reads only the plan.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Collection
from dataclasses import dataclass, field
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.storage import TierFile, TierStore
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogPartition,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.garbage import Garbage
from skewtape_pipeline.ticks.archive.store.placement import (
    ArchiveState,
    ConsolidatedCopies,
    HotFile,
    archive_state,
    hot_rel,
)
from skewtape_pipeline.ticks.archive.store.policy import HOT, TierSettings

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore

WITHDRAWN = "withdrawn: the publisher corrected its ticks away"


TargetKey = tuple[str, str]
"""(tier, period) of a consolidated file."""


@dataclass(frozen=True)
class Move:
    """One symbol-day leaving its current file for a file of ``to_tier`` and ``period``."""

    symbol: str
    date: date
    from_tier: str
    to_tier: str
    period: str
    source: TierFile


@dataclass(frozen=True)
class Rewrite:
    """One consolidated file to write: its tier, period, symbol-days and the files it replaces,
    with what its writer needs, read from the archive's resolved tiers when planning: the
    tier's store, settings and layout."""

    tier: str
    period: str
    symbol_days: tuple[SymbolDayKey, ...]
    replaces: tuple[str, ...]
    store: TierStore = field(repr=False, compare=False)
    settings: TierSettings = field(repr=False, compare=False)
    layout: str = field(repr=False, compare=False)


@dataclass(frozen=True)
class SourceFile:
    """A file re-tiering reads, resolved when the plan is made: the file (a hot file, or a
    consolidated file in its tier's store) and its catalog path."""

    file: TierFile
    rel: str


@dataclass(frozen=True)
class Slot:
    """Where a symbol-day belongs after the run (``tier``, ``period``) and where its rows are
    read from: ``source``, resolved when planning, and its hot file or its catalog entry."""

    key: SymbolDayKey
    tier: str
    period: str
    source: SourceFile
    hot: HotFile | None = None
    entry: CatalogPartition | None = None


@dataclass(frozen=True)
class RetierPlan:
    """What ``lifecycle.retier`` would do at ``as_of`` (by :func:`plan_retier`; writes nothing).

    ``dropped`` are catalogued symbol-days whose newer hot file is to stay hot (the consolidated
    copy is removed from its file); ``purged`` withdrawn symbol-days removed from their file
    (``withdrawn_hot``: the removals of superseded hot copies of them, made before the commit);
    ``held`` symbol-days stay in (or, compacted again, go back to) a colder tier than their age
    calls for; ``refreshed`` are hot files found to hold the bytes or the ticks of the
    consolidated copy (their stamp and sha256 are recorded as its source, the file is
    superseded). Every file it names is resolved already (see :class:`_Planner`).
    ``keeps_files``: the archive is in ``books_and_records`` mode, so carrying the plan out
    removes no file (the superseded hot copy of a withdrawn day stays, and so does its day).
    """

    archive_root: Path
    as_of: date
    generation: int
    moves: list[Move]
    rewrites: list[Rewrite]
    emptied: list[str]
    dropped: list[SymbolDayKey]
    held: list[SymbolDayKey]
    refreshed: list[Refresh]
    purged: list[SymbolDayKey] = field(default_factory=list)
    withdrawn_hot: list[Garbage] = field(default_factory=list)
    keeps_files: bool = False
    catalog: Catalog = field(repr=False, default_factory=Catalog)
    slots: dict[TargetKey, list[Slot]] = field(repr=False, default_factory=dict)

    @property
    def moves_by_key(self) -> dict[SymbolDayKey, Move]:
        """The planned moves by symbol-day."""
        return {(m.symbol, m.date): m for m in self.moves}

    @property
    def changes_catalog(self) -> bool:
        """True when running the plan changes where some symbol-day lives (or a stamp)."""
        return bool(self.rewrites or self.emptied or self.refreshed)

    def months(self) -> list[str]:
        """``YYYY-MM`` of the symbol-days the plan moves, drops or purges, sorted: the months a
        run limited by ``months`` must cover to carry the plan out."""
        days = [m.date for m in self.moves] + [day for _, day in self.dropped + self.purged]
        return sorted({f"{day.year:04d}-{day.month:02d}" for day in days})

    def summary(self) -> dict[str, int]:
        """Counts for logs and metadata."""
        return {
            "symbol_days_to_move": len(self.moves),
            "files_to_write": len(self.rewrites),
            "files_to_empty": len(self.emptied),
            "symbol_days_dropped": len(self.dropped),
            "symbol_days_purged": len(self.purged),
            "symbol_days_held": len(self.held),
        }


def plan_retier(
    core: ArchiveCore, *, as_of: date, months: Collection[str] | None = None
) -> RetierPlan:
    """Plan the moves re-tiering at ``as_of`` makes; reads only (``Archive.plan_retier``)."""
    return _Planner(core, as_of, months).plan()


class _Planner:
    """Builds one :class:`RetierPlan`: where every symbol-day belongs at ``as_of`` (its slot),
    the moves, drops, holds and refreshes that takes, then the files to write or empty.

    Planning reads ``archive.tiers`` once, in ``__init__``: each catalogued file resolved
    (``files``), each consolidated tier's store, settings and layout (``writes``: what
    :meth:`_rewrite` hands each rewrite) and the policy (``policy``: each day's tier and period
    from one call, ``TierPolicy.placement``, in :meth:`_wanted`); each hot file's catalog path
    is the one its record names (``hot_rels``: ``placement.hot_rel``). The plan carries them all,
    so carrying it out reads no tiers (after the commit, only the garbage survey does:
    ``GarbageCollector.collect``)."""

    def __init__(self, core: ArchiveCore, as_of: object, months: Collection[str] | None):
        self.as_of, self.eligible = _check_date(as_of), _month_filter(months)
        tiers = core.tiers
        self.root, self.policy, self.keeps_files = core.root, tiers.policy, core.books.is_on()
        self.writes = {
            tier: (store, tiers.settings[tier], tiers.layouts[tier])
            for tier, store in tiers.stores.items()
        }
        self.state = archive_state(core.root)
        self.catalog = self.state.catalog
        self.files = {rel: tiers.resolve(rel) for rel in self.catalog.files}
        hot_files = [*self.state.hot_live, *self.state.hot_superseded]
        self.hot_rels = {hot.key: hot_rel(core.root, hot) for hot in hot_files}
        self.slots: dict[SymbolDayKey, Slot] = {}
        self.moves: list[Move] = []
        self.dropped: list[SymbolDayKey] = []
        self.held: list[SymbolDayKey] = []
        self.refreshed: list[Refresh] = []
        self.purged: set[SymbolDayKey] = set()
        self.withdrawn_hot: list[Garbage] = []

    def _wanted(self, day: date, reached: str | None) -> tuple[str, str | None, bool]:
        """``(tier, period, held)`` for a symbol-day of ``day`` at ``as_of``, having reached
        ``reached`` (``TierPolicy.placement``: the one use of the tier policy while planning).
        ConfigError for a day after ``as_of``."""
        return self.policy.placement(day, _age(day, self.as_of), reached)

    def place_hot_files(self) -> None:
        """Slot every live hot file: refreshed when it holds its consolidated copy's ticks,
        dropped from the catalog when it stays hot, else moved to the tier its age calls for
        (or held in the colder tier its day already reached)."""
        copies = ConsolidatedCopies(self.files, self.catalog)
        for hot in self.state.hot_live:
            source = SourceFile(hot.path, self.hot_rels[hot.key])
            entry = self.catalog.partitions.get(hot.key)
            kept = None if hot.key in self.catalog.withdrawn else entry  # withdrawn: afresh
            if kept is not None and (digest := copies.same_ticks(hot, kept)) is not None:
                self.refreshed.append(Refresh(hot, source.rel, digest))
                continue
            if not self.eligible(hot.day):
                _age(hot.day, self.as_of)  # a day after as_of is refused all the same
                continue
            tier, period, held = self._wanted(hot.day, None if kept is None else kept.tier)
            if held:
                self.held.append(hot.key)  # compacted again: back to the coldest tier reached
            if period is None:
                if entry is not None:
                    self.dropped.append(hot.key)
                continue
            self.slots[hot.key] = Slot(hot.key, tier, period, source, hot=hot)
            self.moves.append(Move(hot.symbol, hot.day, HOT, tier, period, hot.path))

    def place_catalogued(self) -> None:
        """Slot every catalogued symbol-day not slotted from a hot file, dropped or purged:
        where its age calls for (never warmer than its tier: held), or where it is when its
        month is not in this run."""
        keep_hot = self.keeps_files
        self.purged, withdrawn_hot = _purgeable(self.state, self.eligible, keep_hot=keep_hot)
        self.withdrawn_hot = [
            Garbage(h.path, self.hot_rels[h.key], WITHDRAWN) for h in withdrawn_hot
        ]
        dropped = set(self.dropped)
        for key, entry in self.catalog.partitions.items():
            if key in self.slots or key in dropped or key in self.purged:
                continue
            current = (entry.tier, self.catalog.files[entry.file].period)
            source = SourceFile(self.files[entry.file], entry.file)
            tier, period, held = self._wanted(entry.date, entry.tier)
            if held:
                self.held.append(key)  # never back to a warmer tier
            if not self.eligible(entry.date):
                self.slots[key] = Slot(key, *current, source, entry=entry)
                continue
            assert period is not None  # a catalogued day is held in its tier, never HOT
            self.slots[key] = Slot(key, tier, period, source, entry=entry)
            if (tier, period) != current:
                self.moves.append(Move(*key, entry.tier, tier, period, source.file))

    def plan(self) -> RetierPlan:
        """The plan: every symbol-day placed (hot files first), the slots grouped by target
        file, and the files they change."""
        self.place_hot_files()
        self.place_catalogued()
        by_target: dict[TargetKey, list[Slot]] = {}
        for slot in sorted(self.slots.values(), key=lambda s: s.key):
            by_target.setdefault((slot.tier, slot.period), []).append(slot)
        changed, emptied = _file_changes(self.catalog, by_target)
        rewrites = [self._rewrite(*change) for change in changed]
        return RetierPlan(
            archive_root=self.root,
            as_of=self.as_of,
            generation=self.catalog.generation,
            moves=sorted(self.moves, key=lambda m: (m.symbol, m.date)),
            rewrites=rewrites,
            emptied=emptied,
            dropped=sorted(self.dropped),
            held=sorted(self.held),
            refreshed=self.refreshed,
            purged=sorted(self.purged),
            withdrawn_hot=self.withdrawn_hot,
            keeps_files=self.keeps_files,
            catalog=self.catalog,
            slots=by_target,
        )

    def _rewrite(
        self, target: TargetKey, keys: tuple[SymbolDayKey, ...], replaces: tuple[str, ...]
    ) -> Rewrite:
        """The :class:`Rewrite` of ``target``, with its tier's store, settings and layout
        (``writes``, read when planning began)."""
        return Rewrite(*target, keys, replaces, *self.writes[target[0]])


_Change = tuple[TargetKey, tuple[SymbolDayKey, ...], tuple[str, ...]]
"""A target file to write: its (tier, period), its symbol-days and the files it replaces."""


def _file_changes(
    catalog: Catalog, by_target: dict[TargetKey, list[Slot]]
) -> tuple[list[_Change], list[str]]:
    """(changed, emptied): every target whose slots differ from what its current files hold
    (its symbol-days, and the files it replaces); the current files of targets left without
    any slot. Reads no tiers."""
    files_by_target: dict[TargetKey, list[str]] = {}
    for item in catalog.files.values():
        files_by_target.setdefault((item.tier, item.period), []).append(item.path)
    held_now = Counter(p.file for p in catalog.partitions.values())
    changed: list[_Change] = []
    emptied: list[str] = []
    for target in sorted(set(by_target) | set(files_by_target)):
        wanted_slots = by_target.get(target, [])
        current_files = sorted(files_by_target.get(target, []))
        if _unchanged(held_now, wanted_slots, current_files):
            continue
        if wanted_slots:
            changed.append((target, tuple(s.key for s in wanted_slots), tuple(current_files)))
        else:
            emptied += current_files
    return changed, emptied


def _purgeable(
    state: ArchiveState, eligible: Callable[[date], bool], *, keep_hot: bool
) -> tuple[set[SymbolDayKey], list[HotFile]]:
    """Withdrawn symbol-days to leave their file in this run, and their superseded hot copies
    (removed before the commit). A day with a live hot file is planned like any hot day; with
    a superseded hot copy that must be kept (``keep_hot``), the day stays withdrawn."""
    superseded = {hot.key: hot for hot in state.hot_superseded}
    live = {hot.key for hot in state.hot_live}
    purged, hot_copies = set(), []
    for key in state.withdrawn - live:
        if not eligible(key[1]) or (keep_hot and key in superseded):
            continue
        purged.add(key)
        if key in superseded:
            hot_copies.append(superseded[key])
    return purged, sorted(hot_copies, key=lambda h: h.key)


def _unchanged(held_now: Counter[str], slots: list[Slot], files: list[str]) -> bool:
    """True when the target's current files (one, or several for a period past the tier's
    target size) hold exactly these symbol-days already."""
    current = set(files)
    if not current or any(s.entry is None or s.entry.file not in current for s in slots):
        return False
    return sum(held_now[f] for f in current) == len(slots)


@dataclass(frozen=True)
class Refresh:
    """A live hot file of a catalogued symbol-day whose ticks equal the consolidated copy's:
    its stamp, catalog path (``rel``) and sha256 are recorded as the copy's source (the hot
    file is then superseded)."""

    hot: HotFile
    rel: str
    sha256: str

    @property
    def key(self) -> SymbolDayKey:
        return self.hot.key


def _check_date(value: object) -> date:
    if isinstance(value, datetime) or not isinstance(value, date):
        raise ConfigError(f"as_of = {value!r}: expected a datetime.date")
    return value


def _age(day: date, as_of: date) -> int:
    age = (as_of - day).days
    if age < 0:
        raise ConfigError(
            f"as_of = {as_of.isoformat()}: the archive holds ticks dated {day.isoformat()}, "
            "after it; age_days cannot be negative"
        )
    return age  # an int >= 0: what tier_for checks


def _month_filter(months: Collection[str] | None) -> Callable[[date], bool]:
    if months is None:
        return lambda day: True
    if isinstance(months, str):
        raise ConfigError(f"months = {months!r}: expected a collection of YYYY-MM strings")
    wanted = set()
    for month in months:
        try:
            year, mon = (int(part) for part in str(month).split("-"))
            wanted.add((year, mon))
            date(year, mon, 1)
        except ValueError:
            raise ConfigError(f"months: {month!r} is not a YYYY-MM month") from None
    return lambda day: (day.year, day.month) in wanted

"""Re-tiering: symbol-days move to the tier their age calls for, verified, audited, crash-safe.

:func:`plan_retier` compares where every symbol-day lives (``placement.archive_state``)
with where the tier policy wants it at ``as_of``; :func:`retier` carries the plan out, holding the
archive's lock throughout, once the catalog accounts for every consolidated file on disk
(``trust.checked_catalog``; the contract is ``Archive.retier``'s):

1. every consolidated file whose content changes is rewritten whole, from the symbol-days that
   belong in it (read from their hot files or from the consolidated files they are in now, each
   verified first, ``trust.VerifiedSources``: a consolidated file's size and sha256 against the
   catalog, a hot file's against its compaction's record, ``CatalogStore.hot_records``; then
   its footer and pages),
   into a new, content-named file, read back and compared row for row with those symbol-days
   before it appears (``consolidate.write_tier_period``); each rewrite is audited;
2. the catalog is replaced by one atomic rename: from that instant the query view reads the
   new files and ignores the ones they replace (commit, audited);
3. only then are the replaced files removed (hot files only if unchanged since they were read;
   each removal audited before it happens), but a consolidated file a kept version of the
   archive still reads (``ticks.archive.store.versions``) is retained until ``prune-versions`` drops
   the last such version. In ``books_and_records`` mode nothing is removed: the replaced files are
   retained and the result says so; then the version (``VersionLog.record``) is
   recorded. :func:`prune` is step 3 on its own (e.g. after an interrupted run): moved hot
   files, replaced or uncommitted consolidated files that no kept version reads.

Warm and cold roots may be S3 prefixes (``skewtape_pipeline.storage``): a new file is then verified
locally, uploaded under its content name only if that key is absent and read back (size, sha256)
before step 2; the catalog stays local, so its rename is still the one commit point, and objects are
removed in step 3 under the same rules as local files.

The archive's resolved tiers (``Archive.tiers``) are read by the planner (:class:`_Planner`, when
it is built: each catalogued file resolved, each consolidated tier's store, settings and layout)
and, under the lock, by the core's objects: first ``GarbageCollector.remove_leftovers``
(what interrupted runs left) and ``ArchiveCore.checked_catalog`` (re-tiering's and pruning's
check), after the commit the garbage collection. Planning resolves every location once and the plan
carries it: each source's file and catalog path, each rewrite's store, settings and layout, each
withdrawn hot copy's removal. Carrying the plan out reads only the plan; after the commit
``GarbageCollector.collect`` surveys the garbage in one call (each tier's store listed once) and
removes each file by its catalog path.

A crash anywhere leaves the catalog either before or after step 2, so the view returns every
tick exactly once, and rerunning :func:`retier` finishes the move (written files are found again
by their content name; leftover files are removed).

A symbol-day's tier follows its age and never gets warmer: one that a policy change or an
earlier ``as_of`` would move back to a warmer tier stays where it is (``held``), and one compacted
again after it left the hot tier (a correction, a re-run) goes back to the coldest tier it reached
(or colder, if its age says so) at the next re-tiering, also ``held``. Its consolidated file is
rewritten only when the day's ticks changed: a hot file with the very ticks of the consolidated
copy is recorded as that copy's source (superseded, removed like any moved hot file).

Withdrawn symbol-days (``withdraw.withdraw_symbol_days``: the publisher corrected all their ticks
away) are hidden from the view at once; the next re-tiering rewrites their file without them
(``purged``), after which they and their mark leave the catalog. A hot file still holding a
withdrawn day's rows (superseded: moved earlier, not removed yet) is removed before that commit,
so the rows can never become visible again (in ``books_and_records`` mode, where it stays, the
day stays catalogued and withdrawn instead). Each commit also forgets the source stamps of hot
files that are gone (a file written there later is then a newer copy, whatever its inode).

The core never imports dagster: the orchestration layer calls :func:`retier` on a schedule and
as a backfill (``months`` limits a run to the symbol-days of some months), and
``store.placement.archive_metrics`` for the archive-wide metadata.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Collection, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewtape_pipeline import faults, progress
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.storage import TierFile, TierStore, file_text
from skewtape_pipeline.ticks.archive.store.books import EVENT_REWRITE
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    CatalogFile,
    CatalogPartition,
    SourceStamp,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import (
    ConsolidatedFile,
    write_tier_period,
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
from skewtape_pipeline.ticks.archive.store.trust import VerifiedSources

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


# --- the plan ------------------------------------------------------------------------------------

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
    """What :func:`retier` would do at ``as_of`` (by :func:`plan_retier`; writes nothing).

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
    if isinstance(months, str) or not isinstance(months, Collection):  # read twice: no generator
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


# --- carrying it out ----------------------------------------------------------------------------


@dataclass(frozen=True)
class PartitionMove:
    """Where one symbol-day's rows went: the files, tiers, rows and bytes before and after.

    ``byte_share`` is its share of the new file's bytes; ``bytes_before`` the bytes it took
    where it was (its hot file's size, or its share of the file it left).
    """

    symbol: str
    date: date
    from_tier: str
    to_tier: str
    from_path: str
    to_path: str
    rows: int
    byte_share: int
    bytes_before: int


@dataclass(frozen=True)
class RetierResult:
    """What one :func:`retier` run did."""

    archive_root: Path
    as_of: date
    generation: int
    committed: bool
    books_and_records: bool
    moved: list[PartitionMove]
    files_written: list[TierFile]
    files_reused: list[TierFile]
    files_removed: list[TierFile]
    files_retained: list[TierFile]
    held: list[SymbolDayKey]
    seconds: float
    purged: list[SymbolDayKey] = field(default_factory=list)
    """Withdrawn symbol-days this run removed from their consolidated file (and the catalog)."""
    version: int | None = None
    """The archive version this run committed (``store.versions``); None when it changed
    nothing a version records."""

    def metrics(self) -> dict[str, int | float | bool]:
        """Counts and sizes of the run (for logs and orchestration metadata)."""
        return {
            "generation": self.generation,
            "committed": self.committed,
            "books_and_records": self.books_and_records,
            "symbol_days_moved": len(self.moved),
            "ticks_moved": sum(m.rows for m in self.moved),
            "bytes_before": sum(m.bytes_before for m in self.moved),
            "bytes_after": sum(m.byte_share for m in self.moved),
            "files_written": len(self.files_written),
            "files_reused": len(self.files_reused),
            "files_removed": len(self.files_removed),
            "files_retained": len(self.files_retained),
            "symbol_days_held": len(self.held),
            "symbol_days_purged": len(self.purged),
            "version": self.version or 0,
            "seconds": self.seconds,
        }

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready: the metrics plus every move and file."""
        return {
            **self.metrics(),
            "archive_root": str(self.archive_root),
            "as_of": self.as_of.isoformat(),
            "moved": [{**asdict(m), "date": m.date.isoformat()} for m in self.moved],
            "files_written": [file_text(p) for p in self.files_written],
            "files_reused": [file_text(p) for p in self.files_reused],
            "files_removed": [file_text(p) for p in self.files_removed],
            "files_retained": [file_text(p) for p in self.files_retained],
            "purged": [[symbol, day.isoformat()] for symbol, day in self.purged],
        }


def retier(
    core: ArchiveCore, *, as_of: date, months: Collection[str] | None = None
) -> RetierResult:
    """Move every symbol-day to the tier its age at ``as_of`` calls for (``Archive.retier``)."""
    started = time.perf_counter()
    root = core.root
    _check_date(as_of)  # both refused before the lock is taken: its holder note untouched
    _month_filter(months)
    with core.writing(doing="re-tiering it"), core.locked("re-tiering"):
        core.versions.check_writable()  # its version recorded last: refused before any write
        core.garbage.remove_leftovers()
        core.checked_catalog()
        plan = plan_retier(core, as_of=as_of, months=months)
        reader = VerifiedSources(core.catalog, plan.catalog)  # reads the records: refuses first
        removed_first = core.garbage.remove(plan.withdrawn_hot)
        written = _write_rewrites(core, plan, reader)
        core.versions.record_unrecorded("retier")  # before the commit, once the writes verified
        catalog = _commit(core, plan, written)
        removed, retained = core.garbage.collect(retain_all=plan.keeps_files)
        core.catalog.settle_hot_records()
        version = core.versions.record("retier")
    return RetierResult(
        archive_root=root,
        as_of=plan.as_of,
        generation=catalog.generation,
        committed=plan.changes_catalog,
        books_and_records=plan.keeps_files,
        moved=[m for w in written for m in w.moves],
        files_written=[w.file.path for w in written if not w.file.reused],
        files_reused=[w.file.path for w in written if w.file.reused],
        files_removed=removed_first + removed,
        files_retained=retained,
        held=plan.held,
        purged=plan.purged,
        seconds=time.perf_counter() - started,
        version=None if version is None else version.version,
    )


def _write_rewrites(core: ArchiveCore, plan: RetierPlan, reader: VerifiedSources) -> list[_Written]:
    """Write every file the plan rewrites (:func:`_write_rewrite`), reporting progress."""
    written: list[_Written] = []
    for done, rewrite in enumerate(plan.rewrites, start=1):
        written += _write_rewrite(core, plan, rewrite, reader)
        progress.report("re-tiering", done, len(plan.rewrites), "periods written")
    return written


@dataclass(frozen=True)
class _Written:
    """A consolidated file written for ``rewrite``: the file, its catalog path, its
    partitions and the moves into it."""

    rewrite: Rewrite
    file: ConsolidatedFile
    rel: str
    partitions: list[CatalogPartition]
    moves: list[PartitionMove]


def _write_rewrite(
    core: ArchiveCore, plan: RetierPlan, rewrite: Rewrite, reader: VerifiedSources
) -> list[_Written]:
    """Write the consolidated files of one period from its symbol-days' current copies, read
    one symbol-day at a time as the files are written row group by row group (each file
    verified before it appears; a new file once one holds the tier's
    ``consolidated_target_bytes``); audit each. Returns them with their catalog partitions and
    the moves."""
    slots = plan.slots[(rewrite.tier, rewrite.period)]
    parts = [
        reader.part(s.key, s.source.file, s.source.rel, hot=s.hot, entry=s.entry) for s in slots
    ]
    files = write_tier_period(
        parts,
        archive_root=core.root,
        tier=rewrite.tier,
        period=rewrite.period,
        store=rewrite.store,
        settings=rewrite.settings,
        layout=rewrite.layout,
        generation=plan.generation,
    )
    by_key, moved, out = {slot.key: slot for slot in slots}, plan.moves_by_key, []
    for written, rel in files:
        partitions = [
            CatalogPartition(
                symbol, day, rewrite.tier, rel, rows, share, reader.stamps[(symbol, day)]
            )
            for (symbol, day, rows), share in zip(written.parts, written.byte_shares, strict=True)
        ]
        moves = [
            _partition_move(moved[p.key], by_key[p.key], p, written.path)
            for p in partitions
            if p.key in moved
        ]
        sources = reader.sources_of((symbol, day) for symbol, day, _ in written.parts)
        _audit_rewrite(core, rewrite, written, rel, sources)
        faults.checkpoint(f"wrote:{written.path.name}")
        out.append(_Written(rewrite, written, rel, partitions, moves))
    return out


def _audit_rewrite(
    core: ArchiveCore,
    rewrite: Rewrite,
    written: ConsolidatedFile,
    rel: str,
    sources: list[dict[str, str]],
) -> None:
    """Append the rewrite's record (the file ``rel``, what it replaces, its sources)."""
    record = {
        "event": EVENT_REWRITE,
        "archive": str(core.root.absolute()),
        "tier": rewrite.tier,
        "period": rewrite.period,
        "file": rel,
        "sha256": written.sha256,
        "bytes": written.bytes,
        "rows": written.rows,
        "symbol_days": len(written.parts),
        "verified": "row for row against its sources",
        "replaces": list(rewrite.replaces),
        "sources": sources,
    }
    core.books.audit([record])


def _partition_move(
    move: Move, slot: Slot, partition: CatalogPartition, path: TierFile
) -> PartitionMove:
    """Where the planned ``move`` took its symbol-day: from its hot file or consolidated file
    (``move.source``) to ``partition`` of the new file ``path``."""
    if slot.hot is not None:
        before = slot.hot.stamp.size
    else:
        assert slot.entry is not None
        before = slot.entry.byte_share
    return PartitionMove(
        symbol=move.symbol,
        date=move.date,
        from_tier=move.from_tier,
        to_tier=partition.tier,
        from_path=str(move.source),
        to_path=str(path),
        rows=partition.rows,
        byte_share=partition.byte_share,
        bytes_before=before,
    )


def _commit(core: ArchiveCore, plan: RetierPlan, written: Sequence[_Written]) -> Catalog:
    """Replace the catalog with the plan's next one (one atomic rename), then audit the
    commit; returns the catalog now in force (the plan's own when it changes nothing)."""
    if not plan.changes_catalog:
        return plan.catalog
    catalog = _next_catalog(core, plan, written)
    unlisted = {old for w in written for old in w.rewrite.replaces} | set(plan.emptied)
    details = {
        "symbol_days_moved": len(plan.moves),
        "symbol_days_dropped": len(plan.dropped),
        "symbol_days_purged": len(plan.purged),
        "files_written": [w.rel for w in written],
        "files_unlisted": sorted(unlisted),
    }
    core.catalog.commit(catalog, core.books, details)
    faults.checkpoint("committed")
    return catalog


def _next_catalog(core: ArchiveCore, plan: RetierPlan, written: Sequence[_Written]) -> Catalog:
    """The plan's catalog with the written files in place of those they replace, the emptied
    files and dropped symbol-days gone, the refreshed stamps recorded (their catalog paths
    made when planning) and stale stamps dropped; its generation is one up when rows moved."""
    catalog = plan.catalog
    files = dict(catalog.files)
    partitions = dict(catalog.partitions)
    for gone in plan.emptied:
        files.pop(gone, None)
    for key in plan.dropped:
        partitions.pop(key, None)
    for item in written:
        for old in item.rewrite.replaces:
            files.pop(old, None)
        files[item.rel] = CatalogFile(
            path=item.rel,
            tier=item.rewrite.tier,
            period=item.rewrite.period,
            bytes=item.file.bytes,
            rows=item.file.rows,
            sha256=item.file.sha256,
            symbol_days=len(item.partitions),
        )
        partitions.update((partition.key, partition) for partition in item.partitions)
    for refresh in plan.refreshed:
        if (entry := partitions.get(refresh.key)) is not None:
            hot, rel = refresh.hot, refresh.rel
            stamp = SourceStamp(
                rel, refresh.sha256, hot.stamp.size, hot.stamp.inode, hot.stamp.mtime_ns
            )
            partitions[refresh.key] = replace(entry, source=stamp)
    partitions = {
        k: core.catalog.without_gone_source(p) for k, p in partitions.items() if p.file in files
    }
    reread = {slot.key for slots in plan.slots.values() for slot in slots if slot.hot is not None}
    withdrawn = frozenset(k for k in catalog.withdrawn if k in partitions and k not in reread)
    moves_rows = bool(plan.rewrites or plan.emptied)  # else only source stamps are recorded
    return Catalog(
        generation=catalog.generation + moves_rows,
        files=files,
        partitions=partitions,
        withdrawn=withdrawn,
    )


def prune(core: ArchiveCore) -> list[TierFile]:
    """Remove the superseded files no kept version reads (the contract: ``Archive.prune``)."""
    with core.writing(), core.locked("pruning"):
        core.checked_catalog()
        return core.garbage.collect().removed

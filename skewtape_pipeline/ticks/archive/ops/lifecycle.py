"""Re-tiering: symbol-days move to the tier their age calls for, verified, audited, crash-safe.

``retier_plan.plan_retier`` compares where every symbol-day lives (``placement.archive_state``)
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

The archive's resolved tiers (``Archive.tiers``) are read by the planner (``retier_plan``, when it
is built) and, under the lock, by the core's objects: first ``GarbageCollector.remove_leftovers``
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
from collections.abc import Collection, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import date
from pathlib import Path
from typing import TYPE_CHECKING, Any

from skewtape_pipeline import faults, progress
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.storage import TierFile, file_text
from skewtape_pipeline.ticks.archive.ops.retier_plan import (
    Move,
    RetierPlan,
    Rewrite,
    Slot,
    plan_retier,
)
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
from skewtape_pipeline.ticks.archive.store.placement import locate
from skewtape_pipeline.ticks.archive.store.trust import VerifiedSources
from skewtape_pipeline.ticks.encode.parquet_file import read_file_facts
from skewtape_pipeline.ticks.encode.report import TickStorageCompactionReport, compression_ratio

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


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
    with core.locked("re-tiering"):
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
    with core.locked("pruning"):
        core.checked_catalog()
        return core.garbage.collect().removed


# --- reports ------------------------------------------------------------------------------------


def relocated_report(
    report: TickStorageCompactionReport, core: ArchiveCore
) -> TickStorageCompactionReport:
    """``report`` updated to where its symbol-day's rows live now.

    ``path`` and ``tier`` name the file and tier holding the rows; for a consolidated file,
    ``compacted_size_bytes`` is the symbol-day's byte share (see ``CatalogPartition``) and the
    ratio is recomputed from it; codec, level and encodings are read from that file's footer.
    A note says where the rows went. The report is returned unchanged when they are still in
    the file it names.

    Raises ConfigError when the archive holds no rows for the report's symbol-day.
    """
    if report.date is None:
        raise ConfigError(f"report of {report.symbol}: has no date; expected a symbol-day report")
    day = date.fromisoformat(report.date)
    location = locate(core.tiers, report.symbol, day)
    if location is None:
        raise ConfigError(
            f"{report.symbol} {report.date}: the archive at {core.root} holds no rows for it"
        )
    if not location.consolidated:
        return report
    facts = read_file_facts(location.path)
    ratio = compression_ratio(report.raw_size_bytes, location.bytes)
    note = (
        f"rows moved to the {location.tier} consolidated file {location.path}; "
        f"compacted_size_bytes is this symbol-day's share of it ({location.bytes} of "
        f"{facts.size_bytes} bytes: row groups split by rows, footer spread by rows)"
    )
    return replace(
        report,
        tier=location.tier,
        path=str(location.path),
        compacted_size_bytes=location.bytes,
        compression_ratio=ratio,
        meets_compression_target=ratio >= report.target_compression_ratio,
        codec=facts.codec,
        compression_level=facts.compression_level,
        encodings=facts.encodings,
        notes=[*report.notes, note],
    )

"""Compaction: split ticks into symbol-days (UTC), sort each explicitly (counted), validate,
write a verified Parquet file per symbol-day and report on it.

Entry points, each given the archive's core
(:class:`~skewtape_pipeline.ticks.archive.core.ArchiveCore`: its root, tier policy, audit log
and lock timeout) and options objects fixed for the run:
:class:`~skewtape_pipeline.ticks.encode.options.TickEncoding` (how ticks are encoded) and
:class:`CompactionRun` (symbol filter, memory limit, progress callbacks):

- :func:`compact_ticks` -- a canonical CSV/Parquet file -> one report per symbol-day;
- :func:`compact_source` -- the same for any
  :class:`~skewtape_pipeline.ticks.encode.sources.SourceTicks` (the real-file readers);
- :func:`compact_symbol_day` -- one already-built :class:`TickBatch` of one symbol-day, as its
  :class:`SymbolDayWrite` says (the day, its age, the :class:`SourceFacts` measured of its
  input, its encoding);
- :func:`commit_compaction` -- the version the writes made, committed after them (``sources``:
  the bundle each symbol-day came from), waiting for the lock as the writes do.

The contracts are the front door's (``Archive.compact``, ``Archive.compact_symbol_day``).

Bad input changes nothing on disk: every symbol-day of an input is converted and validated
before the first file is written. The input is read in chunks (``compact_plan.plan_stream``) and its
rows routed to symbol-days, those beyond half of ``run.memory_limit`` spilled to the archive's
staging folder (``store.spill``) and read back one symbol-day at a time, so any input compacts
within the limit (plus the largest symbol-day being encoded).

Each symbol-day's file is encoded, written and read back in the staging folder outside the
archive's lock, then published under it, waited for up to :func:`compaction_lock_wait` seconds
(:func:`_published`: the checks, the record readers verify it by, the audit record); the very
ticks the archive holds already are not written again (the report's note: :data:`UNCHANGED`).

The timestamp unit (``ns``, ``us``, ``ms``, ``s``) and the price and quantity scales are the
archive's one schema: the archive root records them and refuses a batch at another one. By
default they are detected: the coarsest unit and the smallest scales that hold the data
exactly (Kalshi stamps in microseconds, Binance exchange time in milliseconds, LOBSTER prices
are multiples of 0.001), widened to the archive's recorded schema when the root already has
one. Data that needs a finer unit or a larger scale than the archive records is refused
before anything is written (:class:`~skewtape_pipeline.errors.ArchiveSchemaError` naming what
it needs), never rounded. A value given explicitly is used as given; a timestamp finer than it
is refused with PrecisionLossError naming the row, never truncated.
"""

from __future__ import annotations

import contextvars
import os
import time
from collections import deque
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from datetime import date
from functools import lru_cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.errors import ConfigError, TickFormatError, TickValidationError, quoted
from skewtape_pipeline.hashing import FileStamp, sha256_file
from skewtape_pipeline.storage import TierFile
from skewtape_pipeline.ticks.archive.ops.compact_plan import (
    DEFAULT_RUN,
    HELD_SHARE,
    CompactionRun,
    PlannedSymbolDay,
    PlanOptions,
    SourceFacts,
    StreamPlan,
    SymbolDayWrite,
    _check_date,
    block_bytes_for,
    check_memory_limit,
    plan_stream,
)
from skewtape_pipeline.ticks.archive.store.books import (
    EVENT_RECOMPACT,
    EVENT_WRITE,
)
from skewtape_pipeline.ticks.archive.store.catalog import (
    FileRecord,
    Publication,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import read_consolidated_file
from skewtape_pipeline.ticks.archive.store.hot_index import ensure_base
from skewtape_pipeline.ticks.archive.store.layout import (
    ARCHIVE_LOCK_WAIT_SECONDS,
    encode_symbol,
    ensure_archive_schema,
    partition_file,
    prepare_archive_file,
    publish_archive_file,
    recorded_schema,
    staging_folder,
)
from skewtape_pipeline.ticks.archive.store.policy import check_age_days
from skewtape_pipeline.ticks.archive.store.spill import (
    SymbolDayRouter,
    new_spill_folder,
    remove_orphaned_staging,
)
from skewtape_pipeline.ticks.encode.model import (
    TickBatch,
)
from skewtape_pipeline.ticks.encode.options import DEFAULT_ENCODING, TickEncoding
from skewtape_pipeline.ticks.encode.parquet_file import (
    META_DATE,
    META_PREFIX,
    META_PRICE_SCALE,
    META_QUANTITY_SCALE,
    META_SYMBOL,
    FileFacts,
    read_archive_batch,
    read_file_facts,
)
from skewtape_pipeline.ticks.encode.report import (
    RAW_SIZE_BASIS_CANONICAL_CSV,
    TickStorageCompactionReport,
    compression_ratio,
)
from skewtape_pipeline.ticks.encode.sources import (
    SourceTicks,
    TickStream,
    canonical_csv_size_bytes,
    open_canonical,
    stream_of,
)
from skewtape_pipeline.ticks.encode.validate import (
    check_within_day,
    validate_batch,
)

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore


def compact_symbol_day(
    core: ArchiveCore, batch: TickBatch, write: SymbolDayWrite
) -> TickStorageCompactionReport:
    """Write one sorted symbol-day, verified (the contract: ``Archive.compact_symbol_day``)."""
    started = time.perf_counter()
    item = _planned(batch, write)
    return _write_symbol_day(core, item, write.encoding.target_ratio, started)


def _planned(batch: TickBatch, write: SymbolDayWrite) -> PlannedSymbolDay:
    """The symbol-day checked as ``Archive.compact_symbol_day`` says (``age_days`` too, before
    anything is written: ``policy.check_age_days``), its batch at the encoding's timestamp unit,
    its raw size the one measured in ``write.source`` or else the canonical CSV's."""
    if not isinstance(write, SymbolDayWrite):
        raise ConfigError(f"write = {quoted(write)}: expected a SymbolDayWrite")
    if not isinstance(batch, TickBatch):
        raise ConfigError(f"batch = {quoted(batch)}: expected a TickBatch")
    check_age_days(write.age_days)
    day = _check_date(write.day, name="day")
    encode_symbol(write.symbol)
    batch = _checked_batch(batch, write.symbol, day, write.encoding.schema.timestamp_unit)
    source = write.source
    raw_size, basis = source.raw_size_bytes, source.basis
    if raw_size is None:
        raw_size, basis = canonical_csv_size_bytes(batch), RAW_SIZE_BASIS_CANONICAL_CSV
    reordered = source.reordered_ticks
    return PlannedSymbolDay(write.symbol, day, batch, reordered, write.age_days, raw_size, basis)


def _checked_batch(
    batch: TickBatch, symbol: str, day: date, timestamp_unit: str | None
) -> TickBatch:
    """``batch`` at ``timestamp_unit`` (None: its own), validated and within ``day``; raises
    as ``Archive.compact_symbol_day`` says for an empty or invalid batch."""
    if len(batch) == 0:
        raise TickValidationError(f"{symbol} {day.isoformat()}: the batch is empty")
    if timestamp_unit is not None:
        batch = batch.with_timestamp_unit(timestamp_unit)
    validate_batch(batch)
    check_within_day(batch, day)
    return batch


def compaction_lock_wait(core: ArchiveCore) -> float:
    """Seconds a compaction waits for the archive's lock: the archive's ``lock_timeout``, at
    least :data:`~skewtape_pipeline.ticks.archive.store.layout.ARCHIVE_LOCK_WAIT_SECONDS`
    (a compaction holds the lock only for its checks and renames, so it waits out a
    re-tiering rather than refusing)."""
    return max(core.lock_timeout, ARCHIVE_LOCK_WAIT_SECONDS)


def _compaction_locked(core: ArchiveCore) -> AbstractContextManager[None]:
    """The archive's lock, taken for a compaction's checks and renames (waiting up to
    :func:`compaction_lock_wait` seconds; ArchiveBusyError after that)."""
    return core.waiting(compaction_lock_wait(core)).locked("compacting")


def _write_symbol_day(
    core: ArchiveCore, item: PlannedSymbolDay, target: float, started: float
) -> TickStorageCompactionReport:
    """Write ``item``'s file into ``archive`` and report on it (measured against ``target``,
    timed from ``started``): the refusals that need no tiers before anything is encoded
    (:func:`_check_before_encoding`), then the file encoded at its tier's settings and
    published (:func:`_published`: the one place compaction reads the tier policy)."""
    path = partition_file(core.root, item.symbol, item.day)
    _check_before_encoding(core, item.batch, path)
    published = _published(core, item, path)
    fields = _report_fields(item, (published.facts.path, published.facts), target, started)
    report = TickStorageCompactionReport(
        **fields, tier=published.tier, tier_policy=published.tier_policy
    )
    rewrite = published.rewrite
    notes = [published.unchanged] if published.unchanged else []
    return report.noted(*notes, *([] if rewrite is None else [recompaction_note(rewrite)]))


def _check_before_encoding(core: ArchiveCore, batch: TickBatch, path: Path) -> None:
    """Under the archive's lock, the refusals that need no tiers, before anything is encoded:
    the batch's schema is the archive's (recorded when the archive has none) and the file at
    ``path`` may be written in books_and_records mode (``Books.check_may_write``). The catalog
    check reads the tiers and runs once, under the lock that publishes (:func:`_published`)."""
    with _compaction_locked(core):
        ensure_archive_schema(
            core.root,
            price_scale=batch.price_scale,
            quantity_scale=batch.quantity_scale,
            timestamp_unit=batch.timestamp_unit,
        )
        core.books.check_may_write(path)


def _report_fields(
    item: PlannedSymbolDay,
    written: tuple[Path, FileFacts],
    target: float,
    started: float,
) -> dict[str, Any]:
    """The compaction report's fields of ``item`` written to ``written`` (its path and the
    facts read back from the file), measured against ``target``, timed from ``started``; all
    but its tier, its tier policy and its notes."""
    path, facts = written
    batch, raw_size_bytes = item.batch, item.raw_size_bytes
    ratio = compression_ratio(raw_size_bytes, facts.size_bytes)
    price_scale = int(facts.metadata[META_PRICE_SCALE])
    quantity_scale = int(facts.metadata[META_QUANTITY_SCALE])
    return dict(
        symbol=item.symbol,
        date=item.day.isoformat(),
        tick_count=facts.num_rows,
        raw_size_bytes=raw_size_bytes,
        raw_size_basis=item.raw_size_basis,
        compacted_size_bytes=facts.size_bytes,
        compression_ratio=ratio,
        target_compression_ratio=target,
        meets_compression_target=ratio >= target,
        archive_format="parquet",
        codec=facts.codec,
        compression_level=facts.compression_level,
        encodings=facts.encodings,
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        price_precision_loss_ticks=batch.price_precision_loss_ticks,
        quantity_precision_loss_ticks=batch.quantity_precision_loss_ticks,
        reordered_ticks=item.reordered_ticks,
        age_days=item.age_days,
        round_trip_verified=True,
        path=str(path),
        seconds=time.perf_counter() - started,
        timestamp_unit=facts.timestamp_unit,
        price_float_noise_normalized=batch.price_float_noise_ticks,
        quantity_float_noise_normalized=batch.quantity_float_noise_ticks,
    )


@dataclass(frozen=True)
class _Published:
    """A symbol-day's file as :func:`_published` published it: its tier, the tier policy that
    chose it (as the report records it), the facts read back and the rewrite's audit record
    (None for a new symbol-day); or, with ``unchanged`` (the report's note), the copy the
    archive already held with the very same ticks, left as it was."""

    tier: str
    tier_policy: dict[str, Any]
    facts: FileFacts
    rewrite: dict | None
    unchanged: str | None = None


UNCHANGED = "unchanged: "
"""How a report's note about a symbol-day the archive already held as it is starts."""
LEFT_IN_COPY = "; left there, no hot file written"
"""How that note ends when the copy held is a consolidated one (warm or cold)."""


def _held_unchanged(
    core: ArchiveCore, item: PlannedSymbolDay, path: Path, staged: FileRecord
) -> _Published | None:
    """The copy the archive already holds of ``item``'s symbol-day when it has ``item``'s very
    ticks (ts, price, quantity, side, at the same schema): its hot file at ``path`` (when it is
    the file its compaction recorded, ``CatalogStore.hot_record``), else its
    catalogued consolidated copy (not withdrawn; its facts then name its catalog path and its
    share of the file's bytes). Same bytes as the ``staged`` file or same ticks read back both
    count. None when there is no such copy: the symbol-day is written.
    Called under the archive's lock, so nothing changes the copy meanwhile."""
    tiers = core.tiers
    if path.exists():
        held = sha256_file(path)
        rel = path.relative_to(core.root).as_posix()
        recorded = core.catalog.hot_record((item.symbol, item.day), rel)
        if recorded is None or recorded.sha256 != held:
            return None  # not the file its compaction recorded (a crash): written again
        if held != staged.sha256 and not _same_ticks(_hot_copy(path), item):
            return None
        where = f"{UNCHANGED}the archive holds these ticks already in its hot file; not rewritten"
        tier = tiers.policy.tier_for(item.age_days)
        return _Published(tier, dict(tiers.record), read_file_facts(path), None, where)
    catalog = core.catalog.read()
    entry = catalog.partitions.get((item.symbol, item.day))
    if entry is None or entry.key in catalog.withdrawn or entry.rows != len(item.batch):
        return None
    moved_bytes = entry.source is not None and entry.source.sha256 == staged.sha256
    if not moved_bytes and not _same_ticks(
        _consolidated_copy(tiers.resolve(entry.file), entry.key), item
    ):
        return None
    where = (
        f"{UNCHANGED}the archive holds these ticks already in its {entry.tier} copy "
        f"{entry.file}{LEFT_IN_COPY}"
    )
    facts = replace(read_file_facts(tiers.resolve(entry.file)), path=Path(entry.file),
                    size_bytes=entry.byte_share, num_rows=entry.rows)  # fmt: skip
    return _Published(entry.tier, dict(tiers.record), facts, None, where)


def _same_ticks(held: TickBatch | None, item: PlannedSymbolDay) -> bool:
    """Whether ``held`` has ``item``'s ticks, in any order of ticks with equal timestamps (a
    read returns those in (price, quantity, side) order, whatever order they were stored in)."""
    if held is None or len(held) != len(item.batch):
        return False
    if held.first_difference(item.batch) is None:
        return True
    same_times = held.ts_ns.equals(item.batch.ts_ns)  # else changed, whatever the ties' order
    return same_times and _in_read_order(held).equals(_in_read_order(item.batch))


def _in_read_order(batch: TickBatch) -> TickBatch:
    """``batch`` sorted by (ts, price, quantity, side): the order a read returns."""
    table = pa.table([batch.ts_ns, batch.price, batch.quantity, batch.side], names=list("tpqs"))
    return batch.take(pc.sort_indices(table, sort_keys=[(name, "ascending") for name in "tpqs"]))


def _hot_copy(path: Path) -> TickBatch | None:
    """The ticks of a hot file; None when it cannot be read (rewriting it repairs it)."""
    try:
        return read_archive_batch(path)
    except (OSError, TickFormatError, pa.ArrowException):
        return None


def held_in_its_tier(report: TickStorageCompactionReport) -> bool:
    """True when compaction found the report's symbol-day held unchanged in a consolidated copy
    (warm or cold), where it stays: no hot file, nothing for a re-tiering to move."""
    return any(n.startswith(UNCHANGED) and n.endswith(LEFT_IN_COPY) for n in report.notes)


def is_unchanged(report: TickStorageCompactionReport) -> bool:
    """True when compaction found the report's symbol-day already held with the same ticks and
    wrote nothing for it."""
    return any(note.startswith(UNCHANGED) for note in report.notes)


@lru_cache(maxsize=2)
def _consolidated_copies(file: TierFile) -> dict[SymbolDayKey, TickBatch]:
    """Every symbol-day's ticks in a consolidated file (content-named, so never stale), the two
    read last kept: a run compacts symbol-days in (symbol, day) order, file after file."""
    return {(rows.symbol, rows.day): rows.batch for rows in read_consolidated_file(file)}


def _consolidated_copy(file: TierFile, key: SymbolDayKey) -> TickBatch:
    return _consolidated_copies(file)[key]


def _published(core: ArchiveCore, item: PlannedSymbolDay, path: Path) -> _Published:
    """Encode, write and verify ``item``'s file for ``path`` in the staging folder, outside the
    archive's lock (``layout.prepare_archive_file``: writers of one archive encode side by
    side), at the writer settings of the tier of the item's age (``TierPolicy.tier_for``,
    which checks ``age_days``); then publish it under the lock, held only for the checks, the
    rename, the file's record (size and sha256, ``CatalogStore.append_hot_record``) and the audit
    record (:data:`EVENT_WRITE` for a new symbol-day, :data:`EVENT_RECOMPACT` for a rewrite,
    each with the report's main numbers). The one function of compaction that reads the
    archive's tiers.

    The checks under the lock: books_and_records mode again (the lock was let go while
    encoding), then, when the file exists, the catalog check (``ArchiveCore.checked_catalog``,
    refusing while the catalog does not account for the files on disk). A refusal publishes
    nothing and the staged file is discarded, as it is whatever happens. The write is audited
    once the rename succeeded."""
    out, tiers = core.root, core.tiers
    tier = tiers.policy.tier_for(item.age_days)
    metadata = {
        META_SYMBOL: item.symbol,
        META_DATE: item.day.isoformat(),
        META_PREFIX + "tier": tier,
    }
    prepared = prepare_archive_file(
        item.batch, path, archive_root=out, settings=tiers.writers[tier], metadata=metadata
    )
    try:
        record = FileRecord(prepared.temp.stat().st_size, sha256_file(prepared.temp))
        with _compaction_locked(core):
            core.books.check_may_write(path)
            if path.exists():
                core.checked_catalog()
            held = _held_unchanged(core, item, path, record)
            if held is not None:
                return held
            fsio.refuse_linked_state(core.catalog.hot_records_path)  # the record follows the rename
            ensure_base(out)  # an archive written before the hot index gets one first
            rewrite = recompaction_record(core, item.symbol, item.day, rows=prepared.facts.num_rows)
            rel = path.relative_to(out).as_posix()
            written = rewrite or written_record(out, item.symbol, item.day)
            audit = written | {"report": _audited_report(item, prepared.facts, tier)}
            core.catalog.begin_publication(Publication(rel, record, audit))
            faults.checkpoint("hot-publishing")
            facts = publish_archive_file(prepared)
            faults.checkpoint("hot-published")  # a crash here: the next lock holder records it
            core.catalog.append_hot_record(rel, record, FileStamp.of(path))
            faults.checkpoint("hot-recorded")  # a crash here: the next lock holder audits it
            core.books.audit([audit])
            faults.checkpoint("hot-audited")  # a crash here: the next lock holder audits nothing
            core.catalog.end_publication()
    finally:
        prepared.discard()
    return _Published(tier, dict(tiers.record), facts, rewrite)


def written_record(out: Path, symbol: str, day: date) -> dict:
    """The :data:`EVENT_WRITE` audit record of a new symbol-day's hot file (its report added
    by the writer)."""
    file = partition_file(out, symbol, day).relative_to(out).as_posix()
    return {"event": EVENT_WRITE, "archive": str(out.absolute()), "symbol": symbol,
            "date": day.isoformat(), "file": file}  # fmt: skip


def _audited_report(item: PlannedSymbolDay, facts: FileFacts, tier: str) -> dict[str, Any]:
    """The compaction report's main numbers, as the audit records of a write carry them."""
    return {
        "tick_count": facts.num_rows,
        "compacted_size_bytes": facts.size_bytes,
        "raw_size_bytes": item.raw_size_bytes,
        "raw_size_basis": item.raw_size_basis,
        "compression_ratio": compression_ratio(item.raw_size_bytes, facts.size_bytes),
        "tier": tier,
        "codec": facts.codec,
        "compression_level": facts.compression_level,
    }


RECOMPACTED = "recompacted: "
"""How a report's note about a recompaction starts (:func:`recompaction_note`)."""
FEWER_TICKS = "fewer than it held"
"""What a recompaction's note says when the symbol-day now holds fewer ticks than the copy it
replaced (a correction, or an input holding only part of the day: each symbol-day of an input
is taken whole)."""


def recompaction_note(record: dict) -> str:
    """The report's note saying what a recompaction (its :data:`EVENT_RECOMPACT` record)
    replaced: the hot file (its bytes and sha256) and/or the consolidated copy it supersedes."""
    what = []
    held = []
    if record.get("replaces"):
        old = record["replaces"]
        rows = "" if old.get("rows") is None else f"{old['rows']} ticks, "
        what.append(
            f"replaced its hot file ({rows}{old['bytes']} bytes, sha256 {old['sha256'][:16]})"
        )
        held.append(old.get("rows"))
    for copy in record.get("supersedes", []):
        kind = "withdrawn " if copy["withdrawn"] else ""
        what.append(
            f"supersedes its {kind}{copy['tier']} copy in {copy['file']} ({copy['rows']} ticks; "
            "re-tiering puts the new one in its place)"
        )
        held.append(copy["rows"])
    most = max((n for n in held if n is not None), default=None)
    if most is not None and record["rows"] < most:
        what.append(f"now {record['rows']} ticks, {most - record['rows']} {FEWER_TICKS}")
    return RECOMPACTED + "; ".join(what)


def recompaction_record(core: ArchiveCore, symbol: str, day: date, *, rows: int) -> dict | None:
    """The :data:`EVENT_RECOMPACT` audit record of writing ``rows`` ticks of a symbol-day the
    archive already holds, or None for a new day: ``replaces`` names its hot file (path,
    sha256, bytes, rows: None when its footer does not read), ``supersedes`` its catalogued
    consolidated copies (tier, file, rows; a withdrawn one too). Read under the archive's lock
    before the write (the hot file's sha256 is that of the file being replaced); append it with
    ``audit`` once the write succeeded, so a failed write leaves no record of a rewrite that did
    not happen."""
    out = core.root
    path = partition_file(out, symbol, day)
    replaces = None
    if path.exists():
        replaces = {
            "file": path.relative_to(out).as_posix(),
            "sha256": sha256_file(path),
            "bytes": path.stat().st_size,
            "rows": _rows_of(path),
        }
    catalog = core.catalog.read()
    copy = catalog.partitions.get((symbol, day))
    supersedes = (
        []
        if copy is None
        else [
            {
                "tier": copy.tier,
                "file": copy.file,
                "rows": copy.rows,
                "withdrawn": (symbol, day) in catalog.withdrawn,
            }
        ]
    )
    if replaces is None and not supersedes:
        return None
    return {
        "event": EVENT_RECOMPACT,
        "archive": str(out.absolute()),
        "symbol": symbol,
        "date": day.isoformat(),
        "file": path.relative_to(out).as_posix(),
        "rows": rows,
        "replaces": replaces,
        "supersedes": supersedes,
    }


def _rows_of(path: Path) -> int | None:
    """The rows a hot file's footer counts; None when it does not read as Parquet."""
    try:
        return pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException):
        return None


def compact_source(
    core: ArchiveCore,
    source: SourceTicks | TickStream,
    *,
    as_of: date,
    encoding: TickEncoding = DEFAULT_ENCODING,
    run: CompactionRun = DEFAULT_RUN,
) -> list[TickStorageCompactionReport]:
    """Compact every symbol-day of ``source`` into the archive (``Archive.compact``)."""
    if not isinstance(source, (SourceTicks, TickStream)):
        raise ConfigError(
            f"source = {source!r}: expected ticks read from a file, such as "
            "ticks.encode.sources.read_canonical(path) (what compact-ticks reads: "
            f"ticks.input_formats.open_input), not a {type(source).__name__}"
        )
    if not isinstance(run, CompactionRun):
        raise ConfigError(f"run = {quoted(run)}: expected a CompactionRun")
    stream = source if isinstance(source, TickStream) else stream_of(source)
    options = PlanOptions(as_of, encoding, run.symbol, archive=recorded_schema(core.root))
    with core.writing(creates=True, doing="compacting ticks into it"):
        with spilling_router(core.root, run.memory_limit) as router:
            plan = plan_stream(stream, options, router, on_read=run.on_read)  # the input checked
            record_unrecorded(core)
            write = partial(compact_planned, core, encoding=encoding)
            reports = _write_symbol_days(plan, write, run.on_progress)
        commit_compaction(core)
    return reports


def compact_committed(
    core: ArchiveCore, batch: TickBatch, write: SymbolDayWrite
) -> TickStorageCompactionReport:
    """:func:`compact_symbol_day`, committed as a version of its own
    (``Archive.compact_symbol_day``): the symbol-day checked first (nothing written for a
    refusal), then the changes no version recorded recorded (:func:`record_unrecorded`)."""
    started = time.perf_counter()
    item = _planned(batch, write)
    with core.writing(creates=True):
        record_unrecorded(core)
        report = _write_symbol_day(core, item, write.encoding.target_ratio, started)
        commit_compaction(core)
    return report


def record_unrecorded(core: ArchiveCore) -> None:
    """Record the changes no version recorded (``VersionLog.record_unrecorded``: an earlier
    compaction cut short, a re-tiering killed before its version) before a compaction
    publishes anything, under the archive's lock (waited for as the writes wait), so the
    version :func:`commit_compaction` records holds the compaction's own changes."""
    with core.waiting(compaction_lock_wait(core)).locked("recording unrecorded changes"):
        core.versions.record_unrecorded("compact")


def commit_compaction(core: ArchiveCore, sources: Mapping[SymbolDayKey, str] | None = None) -> None:
    """Commit the version compaction's writes made (none when they changed nothing), under the
    archive's lock, waiting for it as long as the writes did."""
    with core.waiting(compaction_lock_wait(core)).locked("recording a version"):
        core.versions.record("compact", sources=sources)


ENCODE_WORKERS = max(1, min(2, os.cpu_count() or 1))
"""Symbol-days encoded, written and verified side by side (each outside the archive's lock)."""


def spilling_router(out: Path, memory_limit: int) -> SymbolDayRouter:
    """A router holding routed rows in half of ``memory_limit``, spilling the rest to a folder
    of ``out``'s staging folder; the spill folders and staged files crashed runs left there are
    removed first. Raises ConfigError on a memory limit below :data:`MIN_MEMORY_LIMIT`."""
    limit = check_memory_limit(memory_limit)
    staging = staging_folder(Path(out))
    remove_orphaned_staging(staging)
    return SymbolDayRouter(lambda: new_spill_folder(staging), memory_bytes=limit // HELD_SHARE)


def _write_symbol_days(
    plan: StreamPlan,
    write: Callable[[PlannedSymbolDay], TickStorageCompactionReport],
    on_progress: Callable[[int, int], None] | None,
) -> list[TickStorageCompactionReport]:
    """``write`` each symbol-day of ``plan`` in (symbol, day) order, :data:`ENCODE_WORKERS` at
    a time (one more built meanwhile); reports in that order. The first failure is raised
    once the symbol-days already being written finish."""
    keys, reports = plan.keys, []
    pending: deque[Future] = deque()

    def collect() -> None:
        reports.append(pending.popleft().result())
        if on_progress is not None:
            on_progress(len(reports), len(keys))

    with ThreadPoolExecutor(max_workers=ENCODE_WORKERS) as pool:
        for key in keys:
            item = plan.symbol_day(key)
            plan.router.drop(key)
            # each in a copy of this context: a wait for the lock reports to the caller's line
            pending.append(pool.submit(contextvars.copy_context().run, write, item))
            while len(pending) >= ENCODE_WORKERS:
                collect()
        while pending:
            collect()
    return reports


def compact_planned(
    core: ArchiveCore, item: PlannedSymbolDay, *, encoding: TickEncoding = DEFAULT_ENCODING
) -> TickStorageCompactionReport:
    """:func:`compact_symbol_day` for one symbol-day of a :class:`StreamPlan`."""
    source = SourceFacts(item.raw_size_bytes, item.raw_size_basis, item.reordered_ticks)
    write = SymbolDayWrite(item.symbol, item.day, item.age_days, source, encoding)
    return compact_symbol_day(core, item.batch, write)


def compact_ticks(
    core: ArchiveCore,
    input_path: Path | str,
    *,
    as_of: date,
    encoding: TickEncoding = DEFAULT_ENCODING,
    run: CompactionRun = DEFAULT_RUN,
) -> list[TickStorageCompactionReport]:
    """Compact a canonical tick file into ``archive``; one report per symbol-day.

    The input is CSV or Parquet with ``timestamp_nanos,price,quantity,side[,symbol]``. It is
    split into symbol-days (UTC), each sorted explicitly (the count of moved ticks is
    reported), validated, written atomically, read back and compared, and reported with its
    measured raw size: the whole file's bytes when it holds exactly one symbol-day, else the
    bytes of that symbol-day's CSV lines, else (Parquet) the canonical CSV serialized and
    measured. The tier follows from each day's age at ``as_of`` under the archive's policy.
    Timestamps, prices and quantities are stored at the ``encoding``'s schema: each field left
    None is the data's smallest exact choice widened to the archive's recorded schema (module
    docstring). Idempotent. The file is read in chunks and uses at most about
    ``run.memory_limit`` bytes (:func:`compact_source`) whatever its size; a symbol-day is
    encoded whole.

    Raises
    ------
    ArchiveSchemaError
        The data needs a finer unit or a larger scale than the archive records; nothing is
        written.
    ConfigError
        A vocabulary the data does not follow, no symbol for an input without one, or a
        configuration that differs from the archive's.
    TickValidationError, PrecisionLossError
        Invalid input, named by file, row and column (a timestamp finer than the encoding's
        unit is a PrecisionLossError). Nothing is written for any symbol-day.
    RoundTripError
        A written file did not read back equal (that symbol-day is not published).
    """
    block_bytes = block_bytes_for(run.memory_limit)
    stream = open_canonical(input_path, side_map=encoding.side_map, block_bytes=block_bytes)
    return compact_source(core, stream, as_of=as_of, encoding=encoding, run=run)

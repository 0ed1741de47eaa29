"""From snapshot fills to the tick archive: symbols, symbol-days, corrections, read-back checks.

A *symbol* is ``<venue>:<market_id>``; its ticks on a UTC day are the rows of the month file
``fills/<venue>/<YYYY-MM>.parquet`` with that market id and a ``ts`` on that day. Ticks are read
from the newest snapshot holding the month file, so a correction published by a later delta
(the month file replaced whole) is what gets archived, and a venue that leaves (its month files
deleted, the venue in ``omitted_venues``) keeps its archived ticks (read from the last snapshot
that held them; ``FillsSource.departed``). ``taker_side`` ``yes``/``no`` map to BUY/SELL. The
archive's schema (timestamp unit, price and quantity scales) is the one it records; an archive
without one takes the smallest that holds exactly every fill the mirror holds, venues that
left included (:func:`snapshot_fills_schema`), so its months fit in any order. A later
snapshot with finer fills is refused before anything is written
(:class:`~skewtape_pipeline.errors.ArchiveSchemaError`).

This module does not import dagster: the tick archive asset and the corrections sensor call it.
Everything but :func:`archive_symbol_days` (which writes the archive through the core) reads.
"""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import TYPE_CHECKING

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline.errors import (
    ChainError,
    ConfigError,
    TickValidationError,
    UnreadableFileError,
    UnreadableFolderError,
    os_reason,
    reason,
)
from skewtape_pipeline.fsio import is_hidden
from skewtape_pipeline.mirror.format import MANIFEST, MONTH_RE, SnapshotManifest
from skewtape_pipeline.mirror.months import applied_months
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.ticks.archive.ops.compact import (
    commit_compaction,
    compact_planned,
    compaction_lock_wait,
    record_unrecorded,
    spilling_router,
)
from skewtape_pipeline.ticks.archive.ops.compact_plan import (
    DEFAULT_MEMORY_LIMIT,
    PlanOptions,
    StreamPlan,
    block_bytes_for,
    plan_stream,
    utc_days,
)
from skewtape_pipeline.ticks.archive.ops.withdraw import Removal, remove_while_writing
from skewtape_pipeline.ticks.archive.store.catalog import SymbolDayKey
from skewtape_pipeline.ticks.archive.store.layout import partition_file, recorded_schema
from skewtape_pipeline.ticks.encode.chunked import RawChunk, ReadState, open_parquet, parquet_chunks
from skewtape_pipeline.ticks.encode.exact_columns import (
    coarsest_timestamp_unit,
    smallest_exact_scale,
    timestamps_ns,
)
from skewtape_pipeline.ticks.encode.model import TickSchema, widest_schema
from skewtape_pipeline.ticks.encode.options import TickEncoding
from skewtape_pipeline.ticks.encode.report import DEFAULT_TARGET_RATIO, TickStorageCompactionReport
from skewtape_pipeline.ticks.encode.sources import (
    PARQUET_ROW_BYTES,
    SourceTicks,
    TickStream,
    source_stream,
)

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.handle import Archive

FILLS_SIDE_MAP = {"yes": "BUY", "no": "SELL"}
"""The side vocabulary of fills (``taker_side``)."""
FILLS_ENCODING = TickEncoding(side_map=FILLS_SIDE_MAP)
"""How fills are read into ticks: their sides, every schema field the archive's (or detected)."""
SYMBOL_SEPARATOR = ":"
NS_PER_DAY = 86_400 * 1_000_000_000


def fill_symbol(venue: str, market_id: str) -> str:
    """The archive symbol of a market: ``<venue>:<market_id>``."""
    return f"{venue}{SYMBOL_SEPARATOR}{market_id}"


def split_symbol(symbol: str) -> tuple[str, str]:
    """(venue, market_id) of a symbol made by :func:`fill_symbol`; ConfigError otherwise."""
    venue, sep, market_id = symbol.partition(SYMBOL_SEPARATOR)
    if not sep or not venue or not market_id or "/" in venue:
        raise ConfigError(f"symbol {symbol!r}: expected '<venue>{SYMBOL_SEPARATOR}<market_id>'")
    return venue, market_id


def fills_path(venue: str, month: str) -> str:
    """``fills/<venue>/<YYYY-MM>.parquet``: the snapshot path of a venue's month of fills."""
    return f"fills/{venue}/{month}.parquet"


def month_of_day(day: date) -> str:
    return f"{day.year:04d}-{day.month:02d}"


@dataclass(frozen=True)
class FillsSource:
    """Where a symbol-day's ticks were read: the snapshot, its bundle id, the month file."""

    snapshot: Path
    bundle_id: str
    path: str
    """The month file, relative to the snapshot (``fills/<venue>/<YYYY-MM>.parquet``)."""
    sha256: str | None
    """The month file's sha256 from the snapshot manifest; None when no snapshot holds it."""
    departed: bool = False
    """True when the newest snapshot no longer holds the month file (its venue left, e.g. is
    listed in ``omitted_venues``): the ticks come from the newest snapshot that still holds
    it, so a departure keeps them archived."""


def newest_sources(
    history: Path, wanted: Iterable[SymbolDayKey]
) -> dict[SymbolDayKey, FillsSource]:
    """For each wanted symbol-day, the newest snapshot holding its venue-month file.

    A month file the newest snapshot no longer holds (a venue that left) is read from the
    newest older snapshot that holds it (``departed``); only a republished month file (a
    correction) changes or removes archived ticks. A month file that no snapshot holds gives
    the newest snapshot with ``sha256`` None (no ticks). Each manifest is read at most once.

    Raises ChainError naming the month when a day's month was not applied yet.
    """
    months = applied_months(history)
    newest = months[-1] if months else ""
    wanted = list(wanted)
    late = sorted({month_of_day(day) for _, day in wanted if month_of_day(day) > newest})
    if late:
        raise ChainError(
            f"month {late[0]} has no snapshot in {history} yet (newest: {newest or 'none'}); "
            f"materialize history_snapshot {late[0]} first"
        )
    listings: dict[str, tuple[str, dict]] = {}

    def listing(month: str) -> tuple[str, dict]:
        """(bundle id, entries by path) of a month's snapshot, read once."""
        if month not in listings:
            manifest = read_snapshot(history / month)[0]
            listings[month] = (manifest.bundle_id or month, manifest.by_path())
        return listings[month]

    sources = {}
    for symbol, day in wanted:
        rel = fills_path(split_symbol(symbol)[0], month_of_day(day))
        sources[(symbol, day)] = _newest_holding(history, months, rel, listing)
    return sources


def _newest_holding(
    history: Path, months: Sequence[str], rel: str, listing: Callable[[str], tuple[str, dict]]
) -> FillsSource:
    """The newest snapshot (of a month no earlier than the file's) whose manifest lists
    ``rel``; the newest snapshot, with sha256 None, when none does."""
    for month in reversed(months):
        if month < Path(rel).stem:
            break
        bundle_id, entries = listing(month)
        if rel in entries:
            departed = month != months[-1]
            return FillsSource(history / month, bundle_id, rel, entries[rel].sha256, departed)
    return FillsSource(history / months[-1], listing(months[-1])[0], rel, None)


# --- symbols and corrections -------------------------------------------------------------------


def symbols_in(fills_file: Path) -> list[str]:
    """Distinct symbols of a fills month file, sorted. UnreadableFileError naming the file when
    it cannot be read (:func:`reading_fills`)."""
    with reading_fills(fills_file, "the symbols it holds"):
        rows = duckdb.sql(
            "SELECT DISTINCT venue, market_id FROM read_parquet($file) ORDER BY ALL",
            params={"file": str(fills_file)},
        ).fetchall()
    return [fill_symbol(venue, market_id) for venue, market_id in rows]


@contextmanager
def reading_fills(fills_file: Path, untold: str) -> Iterator[None]:
    """A block reading the mirror's ``fills_file`` with DuckDB, which fails as one
    UnreadableFileError naming the file, the reason and what cannot be told without it
    (``untold``) when the file cannot be opened (a permission refused, a folder or a dangling or
    looping link in its place: the operating system's reason, opened here first, as DuckDB's
    own words would be "No files found that match the pattern") or DuckDB cannot read it as
    Parquet (its reason)."""
    check_opens(fills_file, untold)
    try:
        yield
    except (duckdb.IOException, duckdb.InvalidInputException) as exc:
        raise not_parquet(fills_file, exc, untold) from None


def check_opens(fills_file: Path, untold: str) -> None:
    """UnreadableFileError naming ``fills_file``, the operating system's reason and ``untold``
    when the file cannot be opened for reading; nothing when it can."""
    try:
        with open(fills_file, "rb"):
            pass
    except OSError as exc:
        raise UnreadableFileError(
            f"{fills_file}: cannot be read ({os_reason(exc)}); {untold} cannot be told without it"
        ) from None


def not_parquet(fills_file: Path, exc: Exception, untold: str) -> UnreadableFileError:
    """The error for a fills file that opens but cannot be read as Parquet (``exc``: the
    library's words)."""
    return UnreadableFileError(
        f"{fills_file}: cannot be read as Parquet ({reason(exc)}); {untold} cannot be told "
        "without it"
    )


@dataclass(frozen=True)
class FillsChange:
    """A fills month file that differs between two snapshots (None: absent on that side)."""

    path: str
    old_sha256: str | None
    new_sha256: str | None


def fills_changes(parent: SnapshotManifest | None, snapshot: SnapshotManifest) -> list[FillsChange]:
    """Fills month files added, replaced or deleted from ``parent`` to ``snapshot``, by path."""
    old = {e.path: e.sha256 for e in parent.files} if parent else {}
    new = {e.path: e.sha256 for e in snapshot.files}
    paths = sorted(p for p in old.keys() | new.keys() if p.startswith("fills/"))
    return [FillsChange(p, old.get(p), new.get(p)) for p in paths if old.get(p) != new.get(p)]


def changed_symbol_days(old_file: Path | None, new_file: Path | None) -> list[SymbolDayKey]:
    """Symbol-days whose ticks differ between two versions of a fills month file, sorted.

    Rows are compared as a multiset per symbol-day (count and a sum of row hashes), so a
    reordering alone is no change. A missing side (None) counts as a file without rows.
    UnreadableFileError naming a file that cannot be read (:func:`reading_fills`).
    """
    con = duckdb.connect()
    con.register("old", _fingerprints(con, old_file))
    con.register("new", _fingerprints(con, new_file))
    rows = con.execute(
        """
        SELECT coalesce(o.venue, n.venue), coalesce(o.market_id, n.market_id),
               coalesce(o.day, n.day)
        FROM old AS o FULL OUTER JOIN new AS n
          ON o.venue = n.venue AND o.market_id = n.market_id AND o.day = n.day
        WHERE o.n IS DISTINCT FROM n.n OR o.h IS DISTINCT FROM n.h
        ORDER BY ALL
        """
    ).fetchall()
    epoch = date(1970, 1, 1).toordinal()
    return [(fill_symbol(v, m), date.fromordinal(epoch + int(d))) for v, m, d in rows]


def _fingerprints(con: duckdb.DuckDBPyConnection, path: Path | None) -> pa.Table:
    """(venue, market_id, day number, row count, sum of row hashes) per symbol-day of a file."""
    query = f"""
        SELECT venue, market_id, epoch_ns(ts) // {NS_PER_DAY} AS day, count(*) AS n,
               sum(hash(trade_id, epoch_ns(ts), price::VARCHAR, quantity, taker_side)::HUGEINT)
                 AS h
        FROM read_parquet(?) GROUP BY ALL
    """
    if path is None:
        return pa.table(
            {
                "venue": pa.array([], pa.string()),
                "market_id": pa.array([], pa.string()),
                "day": pa.array([], pa.int64()),
                "n": pa.array([], pa.int64()),
                "h": pa.array([], pa.decimal128(38, 0)),
            }
        )
    with reading_fills(path, "which of its symbol-days changed"):
        return con.sql(query, params=[str(path)]).to_arrow_table()


def corrected_symbol_days(history: Path, month: str) -> list[SymbolDayKey]:
    """Symbol-days of earlier months whose ticks the snapshot of ``month`` corrected.

    Compares each fills file of an earlier month that ``history/<month>/`` replaced with its
    version in the previous month's snapshot. A month file the snapshot no longer holds (its
    venue left) corrects nothing: its symbol-days keep being read from the newest snapshot
    that holds it (:func:`newest_sources`). [] for the first snapshot. UnreadableFileError
    naming a manifest or fills file of either snapshot that cannot be read, as
    :func:`new_symbols` raises it.
    """
    months = applied_months(history)
    if month not in months or months.index(month) == 0:
        return []
    parent_dir, snapshot_dir = history / months[months.index(month) - 1], history / month
    parent, _, _ = read_snapshot(parent_dir)
    snapshot, _, _ = read_snapshot(snapshot_dir)
    touched: set[SymbolDayKey] = set()
    for change in fills_changes(parent, snapshot):
        if change.old_sha256 is None or Path(change.path).stem >= month:
            continue  # a new month file: nothing was archived from it before
        if change.new_sha256 is None:
            continue  # no longer published (a departure): the archived ticks stay
        touched.update(changed_symbol_days(parent_dir / change.path, snapshot_dir / change.path))
    return sorted(touched)


def new_symbols(history: Path, month: str) -> list[str]:
    """Symbols of every fills file the snapshot of ``month`` added or replaced (all for the
    first snapshot): the symbols to register when the month is applied. UnreadableFileError
    naming the snapshot's (or its parent's) manifest or CHECKSUMS.sha256, or one of those fills
    files, when it cannot be read (what the sensors skip a tick on, keeping their cursor);
    UnreadableFolderError as :func:`applied_months` raises it."""
    months = applied_months(history)
    snapshot_dir = history / month
    snapshot, _, _ = read_snapshot(snapshot_dir)
    parent = None
    if month in months and months.index(month) > 0:
        parent, _, _ = read_snapshot(history / months[months.index(month) - 1])
    symbols: set[str] = set()
    for change in fills_changes(parent, snapshot):
        if change.new_sha256 is not None:
            symbols.update(symbols_in(snapshot_dir / change.path))
    return sorted(symbols)


# --- archiving ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class SymbolDayResult:
    """What archiving one symbol-day did: a report, or the removal of a symbol-day with no
    ticks (its hot file removed, its warm or cold copy withdrawn)."""

    symbol: str
    day: date
    source: FillsSource
    report: TickStorageCompactionReport | None
    removed_file: bool = False
    """True when the symbol-day has no ticks any more and its old hot file was removed."""
    withdrawn: bool = False
    """True when the symbol-day has no ticks any more and this call withdrew its consolidated
    (warm or cold) copy from the archive catalog (re-tiering then rewrites the file)."""


def archive_symbol_days(
    archive: Archive,
    history: Path,
    wanted: Sequence[SymbolDayKey],
    *,
    as_of: date,
    target_ratio: float = DEFAULT_TARGET_RATIO,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> list[SymbolDayResult]:
    """Compact each wanted symbol-day's ticks from the newest snapshot holding its month file
    (:func:`newest_sources`) into ``archive``.

    Every wanted symbol-day is read and validated before the first file is written (one
    streaming scan per month file, :func:`open_fills`, in at most about ``memory_limit`` bytes:
    rows beyond it spill to the archive's staging folder, as ``compact-ticks`` does). A
    symbol-day without ticks in its month file leaves the archive (the publisher corrected those
    ticks away): a warm or cold copy of it is withdrawn from the catalog
    (``withdraw.remove_symbol_days``, audited to the archive's audit log), then its hot file is
    removed. One whose month file no snapshot holds (its venue left and the snapshots that held
    it are gone, e.g. a mirror advanced in place) is left as archived. Archiving a symbol-day
    again (e.g. a correction) is audited there too. Reports are measured against
    ``target_ratio``. Idempotent; results follow ``wanted``.

    Raises
    ------
    ChainError
        A wanted day's month has no snapshot yet.
    ConfigError, TickValidationError, PrecisionLossError
        A bad symbol, or invalid ticks (naming the month file and its row); nothing written.
    RoundTripError
        A written file did not read back equal (that symbol-day is not published).
    WriteOnceError
        The archive is in ``books_and_records`` mode and a wanted symbol-day's file exists
        or is catalogued (it would be overwritten, removed or withdrawn); refused before
        anything is written, and audited.
    ArchiveBusyError
        Another writer (e.g. a re-tiering) held the archive's lock for longer than
        ``compact.compaction_lock_wait``.
    ObjectStoreError
        A warm or cold tier in an object store does not answer (endpoint unreachable, bucket
        missing, credentials refused); names its URI, before anything is written.
    """
    sources = newest_sources(history, wanted)
    archive.tiers.check_reachable()  # before the staging folder is made: nothing written
    encoding = TickEncoding(target_ratio=target_ratio)
    with ExitStack() as routers:
        planned = _planned_symbol_days(archive, sources, as_of, memory_limit, routers)
        gone = [key for key in wanted if key not in planned and sources[key].sha256 is not None]
        _check_write_once(archive, wanted, planned, gone)
        record_unrecorded(archive.core)  # the version committed below holds this run's alone
        removals = _removed(archive, gone)
        results = []
        for key in wanted:
            if key in planned:
                report = _compact_held(archive, *planned[key], encoding=encoding)
                results.append(SymbolDayResult(*key, sources[key], report))
            else:  # no removal: no snapshot holds its month file; kept
                results.append(_removal_result(key, sources[key], removals.get(key)))
    commit_compaction(archive.core, {key: sources[key].bundle_id for key in planned})
    return results


HeldSymbolDay = tuple[StreamPlan, int]
"""A symbol-day a plan holds: the plan and its key there."""


def _planned_symbol_days(
    archive: Archive,
    sources: Mapping[SymbolDayKey, FillsSource],
    as_of: date,
    memory_limit: int,
    routers: ExitStack,
) -> dict[SymbolDayKey, HeldSymbolDay]:
    """Read, convert and validate every symbol-day with ticks in its month file, one scan per
    month file, each spilling to the archive's staging folder (its router entered on
    ``routers``) beyond ``memory_limit``; writes nothing to the archive. The schema is the
    archive's recorded one, else the smallest holding every fill the mirror holds
    (:func:`snapshot_fills_schema`)."""
    by_file: dict[FillsSource, list[SymbolDayKey]] = defaultdict(list)
    for key, source in sources.items():
        by_file[source].append(key)
    schema = recorded_schema(archive.root) if by_file else None
    planned: dict[SymbolDayKey, HeldSymbolDay] = {}
    for source, keys in by_file.items():
        if source.sha256 is None:
            continue
        schema = schema or snapshot_fills_schema(source.snapshot)
        stream = open_fills(source.snapshot / source.path, keys, memory_limit=memory_limit)
        router = routers.enter_context(spilling_router(archive.root, memory_limit))
        options = PlanOptions(as_of, FILLS_ENCODING, archive=schema)
        plan = plan_stream(stream, options, router, allow_empty=True)
        planned |= {plan.labels[key]: (plan, key) for key in plan.keys}
        router.spill()  # the next month file's rows get the whole budget
    return planned


def _compact_held(
    archive: Archive, plan: StreamPlan, key: int, *, encoding: TickEncoding
) -> TickStorageCompactionReport:
    """Compact symbol-day ``key`` of ``plan`` into ``archive``, then let the plan drop it."""
    item = plan.symbol_day(key)
    plan.router.drop(key)
    return compact_planned(archive.core, item, encoding=encoding)


def _removed(archive: Archive, gone: Sequence[SymbolDayKey]) -> dict[SymbolDayKey, Removal]:
    """Take the ``gone`` symbol-days out of ``archive`` (``withdraw.remove_while_writing``: the
    policy given is recorded by the caller's ``writing`` once the whole run succeeded), waiting
    for the lock as a compaction does; their removals by symbol-day."""
    removed = remove_while_writing(archive.core.waiting(compaction_lock_wait(archive.core)), gone)
    return {(r.symbol, r.day): r for r in removed}


def _removal_result(
    key: SymbolDayKey, source: FillsSource, removal: Removal | None
) -> SymbolDayResult:
    """The result of a wanted symbol-day without ticks: what its removal did (None: nothing
    was removed)."""
    return SymbolDayResult(
        *key,
        source,
        None,
        removed_file=removal is not None and removal.removed_file,
        withdrawn=removal is not None and removal.withdrawn,
    )


def _check_write_once(
    archive: Archive,
    wanted: Sequence[SymbolDayKey],
    planned: Mapping,
    gone: Sequence[SymbolDayKey],
) -> None:
    """In ``books_and_records`` mode, refuse (audited) before the first write when a planned
    symbol-day's file exists (it would be overwritten), or a ``gone`` one's file exists or is
    catalogued (it would be removed or withdrawn for lack of ticks); in ``wanted`` order."""
    out, books = archive.root, archive.core.books
    if not books.is_on():
        return
    catalogued = archive.core.catalog.read().partitions
    gone_keys = set(gone)
    for key in wanted:
        target = partition_file(out, *key)
        if key in planned:
            books.check_may_write(target)
        elif key in gone_keys and (target.exists() or key in catalogued):
            books.check_may_delete(target, why="the snapshot holds no ticks for it any more")


def read_fills_ticks(fills_file: Path, wanted: Iterable[SymbolDayKey]) -> SourceTicks:
    """The rows of ``fills_file`` on the wanted symbol-days, in file order, as canonical ticks
    (``timestamp_nanos, price, quantity, side, symbol``) naming the file and its rows; the
    whole selection in memory (:func:`open_fills` reads it in chunks)."""
    return open_fills(fills_file, wanted).read_all()


FILLS_COLUMNS = ("ts", "price", "quantity", "taker_side", "venue", "market_id")
"""The columns of a fills month file that become ticks."""
FILLS_FILE_COLUMNS = ("venue", "market_id", "trade_id", *FILLS_COLUMNS[:4])
"""Every column of a fills month file (``fills/<venue>/<YYYY-MM>.parquet``)."""


def open_fills(
    fills_file: Path,
    wanted: Iterable[SymbolDayKey] | None = None,
    *,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> TickStream:
    """The rows of ``fills_file`` on the wanted symbol-days (None: every row) as a stream of
    chunks in file order (``ParquetFile.iter_batches``, chunks sized for ``memory_limit``):
    canonical columns ``timestamp_nanos`` (the ``ts`` column as read), ``price``,
    ``quantity``, ``side`` (``taker_side``) and ``symbol`` (``<venue>:<market_id>``), each row
    named by its file row. The one mapping of fills to ticks: the tick archive asset and
    ``compact-ticks --input-format skewtape-fills`` both read through it.

    Raises TickValidationError naming the file when it cannot be read or lacks a column.
    """
    wanted_keys = None if wanted is None else _symbol_day_keys(wanted)
    file = open_parquet(fills_file)
    missing = [name for name in FILLS_COLUMNS if name not in file.schema_arrow.names]
    if missing:
        raise TickValidationError(
            f"{fills_file}: missing column(s) {missing} of a Skewtape fills file",
            field=missing[0],
        )
    rows = max(block_bytes_for(memory_limit) // PARQUET_ROW_BYTES, 1)

    def chunks(state: ReadState) -> Iterator[RawChunk]:
        reader = open_parquet(fills_file)
        return parquet_chunks(reader, fills_file, state=state, batch_rows=rows,
                              columns=list(FILLS_COLUMNS))  # fmt: skip

    def transform(raw: pa.Table) -> tuple[pa.Table, pa.Array | None]:
        symbols = pc.binary_join_element_wise(raw["venue"], raw["market_id"], SYMBOL_SEPARATOR)
        ns = timestamps_ns(raw["ts"], field="ts")
        columns = {
            "timestamp_nanos": ns,
            "price": raw["price"],
            "quantity": raw["quantity"],
            "side": raw["taker_side"],
            "symbol": symbols,
        }
        if wanted_keys is None:
            return pa.table(columns), None
        keys = pc.binary_join_element_wise(symbols, pc.cast(utc_days(ns), pa.string()), "|")
        kept = pc.cast(pc.indices_nonzero(pc.is_in(keys, value_set=wanted_keys)), pa.int64())
        return pa.table({name: pc.take(column, kept) for name, column in columns.items()}), kept

    return source_stream(fills_file, chunks, transform, FILLS_SIDE_MAP)


def _symbol_day_keys(wanted: Iterable[SymbolDayKey]) -> pa.Array:
    """``<symbol>|<days since 1970>`` of each wanted symbol-day (ConfigError: a bad symbol)."""
    pairs = sorted(set(wanted))
    for symbol, _ in pairs:
        split_symbol(symbol)
    return pa.array([f"{symbol}|{_day_start_ns(day) // NS_PER_DAY}" for symbol, day in pairs])


def is_fills_file(names: Iterable[str]) -> bool:
    """True when a Parquet file's column names include every column of a fills month file."""
    return set(FILLS_FILE_COLUMNS) <= set(names)


def snapshot_of_fills_file(fills_file: Path) -> Path | None:
    """The snapshot folder holding ``fills_file`` as ``fills/<venue>/<YYYY-MM>.parquet`` (its
    manifest beside ``fills/``), or None for a fills file outside a snapshot."""
    path = Path(fills_file).absolute()
    snapshot = path.parents[2] if len(path.parents) > 2 else None
    if snapshot is None or path.parents[1].name != "fills" or not MONTH_RE.match(path.stem):
        return None
    return snapshot if (snapshot / MANIFEST).is_file() else None


def _day_start_ns(day: date) -> int:
    return (day.toordinal() - date(1970, 1, 1).toordinal()) * NS_PER_DAY


def snapshot_fills_schema(snapshot: Path) -> TickSchema:
    """The smallest schema that holds exactly every fill the archive may read from the mirror
    ``snapshot`` belongs to: the coarsest timestamp unit and the smallest price and quantity
    scales over its newest snapshot's fills month files and those of venues that left it,
    read from the newest snapshot holding them (as :func:`month_files` reads them;
    vectorized, three columns read per file, a file hard-linked into several snapshots once).
    The schema of an archive that has none yet, so that every venue and month fits its one
    schema, in whatever order the months are archived (whichever snapshot the first is read
    from); a snapshot outside a mirror's ``history/`` alone."""
    history = snapshot.absolute().parent
    months = applied_months(history)
    snapshots = [history / m for m in reversed(months)] if snapshot.name in months else [snapshot]
    files: dict[str, Path] = {}
    for held in snapshots:
        manifest, _, _ = read_snapshot(held)
        for entry in manifest.files:
            if entry.path.startswith("fills/"):
                files.setdefault(entry.path, held / entry.path)
    same: dict[tuple[int, int], Path] = {}
    for path in files.values():
        check_opens(path, SCHEMA_UNTOLD)
        status = path.stat()
        same.setdefault((status.st_dev, status.st_ino), path)
    return widest_schema([fills_file_schema(path) for path in same.values()])


SCHEMA_UNTOLD = "the schema a new archive of the mirror takes"


def fills_file_schema(fills_file: Path) -> TickSchema:
    """The coarsest timestamp unit and smallest scales holding one fills file exactly.

    Raises UnreadableFileError naming the file when it cannot be opened or read as Parquet;
    TickValidationError naming it when it has no ``ts``/``price``/``quantity`` column or one of
    another kind.
    """
    check_opens(fills_file, SCHEMA_UNTOLD)
    try:
        parquet = pq.ParquetFile(fills_file)
    except (OSError, pa.ArrowException) as exc:
        raise not_parquet(fills_file, exc, SCHEMA_UNTOLD) from None
    try:
        batches = parquet.iter_batches(columns=["ts", "price", "quantity"])
        return widest_schema([_batch_schema(batch) for batch in batches])
    except (OSError, pa.ArrowException) as exc:
        raise TickValidationError(f"{fills_file}: cannot read ts, price, quantity: {exc}") from None
    except TickValidationError as exc:
        raise TickValidationError(f"{fills_file}: {exc.detail}", field=exc.field) from None


def _batch_schema(batch: pa.RecordBatch) -> TickSchema:
    ts = timestamps_ns(batch.column("ts"), field="ts")
    return TickSchema(
        coarsest_timestamp_unit(ts),
        smallest_exact_scale(batch.column("price"), field="price"),
        smallest_exact_scale(batch.column("quantity"), field="quantity"),
    )


def read_mirror_venues(history: Path) -> tuple[list[str], list[tuple[Path, str]]]:
    """``(venues, unreadable)``: the venues with a fills folder in any applied snapshot of
    ``history``, sorted, and ``(fills folder, reason)`` of each snapshot's ``fills/`` that
    exists but cannot be listed (a permission refused, a file of that name, an I/O error):
    while one is there, ``venues`` may miss some. A snapshot without ``fills/`` holds none; a
    dot name in it (``.DS_Store``, a copy tool's ``.tmp`` folder: ``fsio.is_hidden``) is no
    venue. UnreadableFolderError as :func:`applied_months` raises it."""
    venues: set[str] = set()
    unreadable: list[tuple[Path, str]] = []
    for month in applied_months(history):
        fills = history / month / "fills"
        try:
            venues.update(_venue_folders(fills))
        except OSError as exc:
            unreadable.append((fills, os_reason(exc)))
    return sorted(venues), unreadable


def _venue_folders(fills: Path) -> list[str]:
    """The venues of a snapshot's ``fills/`` folder: its sub-folders but dot names
    (``fsio.is_hidden``), sorted; [] when there is no ``fills/``. OSError when it exists but
    cannot be listed."""
    try:
        with os.scandir(fills) as entries:
            return sorted(e.name for e in entries if not is_hidden(e.name) and e.is_dir())
    except FileNotFoundError:
        return []


def month_files(history: Path, month: str) -> dict[str, Path]:
    """``{venue: fills file}`` of ``month``: each venue's month file in the newest snapshot
    holding it (a venue that left the newest snapshot still counts; a dot folder is no venue).
    UnreadableFolderError naming a snapshot's ``fills/`` or venue folder that cannot be read
    (the venue's file would otherwise be taken from an older snapshot, or the venue left out),
    or as :func:`applied_months` raises it."""
    files: dict[str, Path] = {}
    for snapshot_month in reversed(applied_months(history)):
        if snapshot_month < month:
            break
        fills = history / snapshot_month / "fills"
        with _unreadable(fills, f"which venues have {month} fills there"):
            venues = _venue_folders(fills)
        for venue in venues:
            path = fills / venue / f"{month}.parquet"
            with _unreadable(path.parent, f"whether it holds {path.name}"):
                held = _exists(path)
            if held:
                files.setdefault(venue, path)
    return files


@contextmanager
def _unreadable(folder: Path, untold: str) -> Iterator[None]:
    """An OSError in the block as one UnreadableFolderError naming ``folder``, its reason and
    what cannot be told without it (``untold``)."""
    try:
        yield
    except OSError as exc:
        raise UnreadableFolderError(
            f"{folder}: cannot be read ({os_reason(exc)}); {untold} cannot be told without it"
        ) from None


def _exists(path: Path) -> bool:
    """True when there is an entry named ``path`` (a dangling or looping link too: it is read
    as the venue's file, and refused naming it, never taken for a venue without one), False
    when there is none; the OSError when that cannot be told (the ``pathlib`` checks hide
    some, depending on the Python version)."""
    try:
        path.lstat()
    except (FileNotFoundError, NotADirectoryError):
        return False
    return True


def days_by_activity(history: Path, month: str) -> list[date]:
    """The UTC days of ``month`` with fills, busiest first: each venue's month file read from
    the newest snapshot holding it (a venue that left still counts)."""
    files = month_files(history, month)
    if not files:
        return []
    rows = duckdb.sql(
        f"SELECT epoch_ns(ts) // {NS_PER_DAY} AS day, count(*) AS n FROM read_parquet($files) "
        "GROUP BY day ORDER BY n DESC, day",
        params={"files": [str(f) for _, f in sorted(files.items())]},
    ).fetchall()
    epoch = date(1970, 1, 1).toordinal()
    return [date.fromordinal(epoch + int(day)) for day, _ in rows]


def today_utc() -> date:
    """Today's date in UTC (the as-of date of an archive run)."""
    return datetime.now(UTC).date()


# --- read-back check ---------------------------------------------------------------------------


def archive_read_back_problems(
    results: Sequence[SymbolDayResult], *, archive: Archive
) -> list[str]:
    """Read the files written into ``archive`` back with DuckDB (hive partitioning, no code of
    ours) and compare them, row for row, with the snapshot's fills; one line per symbol-day
    that differs.
    """
    return [
        f"{symbol} in {source.path}: {count} row(s) differ between the archive and the fills"
        for symbol, source, count in read_back_mismatches(results, archive=archive)
    ]


def read_back_mismatches(
    results: Sequence[SymbolDayResult],
    *,
    archive: Archive,
    memory_limit: int = DEFAULT_MEMORY_LIMIT,
) -> list[tuple[str, FillsSource, int]]:
    """(symbol, source, rows that differ) of each symbol-day written into ``archive`` DuckDB
    does not read back equal to the snapshot's fills (see :func:`archive_read_back_problems`):
    DuckDB reads both files itself, within ``memory_limit``. A symbol-day left in its
    consolidated copy (its ticks unchanged, compared when compaction skipped it) has no hot
    file to read back."""
    out = archive.root
    written = [
        r for r in results
        if r.report is not None and Path(r.report.path) == partition_file(out, r.symbol, r.day)
    ]  # fmt: skip
    problems = []
    by_file: dict[FillsSource, list[SymbolDayResult]] = defaultdict(list)
    for result in written:
        by_file[result.source].append(result)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(f"SET memory_limit = '{memory_limit // 2**20}MiB'")
    for source, group in by_file.items():
        files = [str(partition_file(out, r.symbol, r.day)) for r in group]
        wanted = pa.table(
            {
                "symbol": [r.symbol for r in group],
                "start_ns": [_day_start_ns(r.day) for r in group],
            }
        )
        con.register("wanted", wanted)
        mismatched = con.execute(
            f"""
            WITH archive AS (
              SELECT symbol, epoch_ns(ts) AS ns, price::DECIMAL(18, 6) AS price,
                     quantity::DECIMAL(18, 6) AS quantity, side::VARCHAR AS side
              FROM read_parquet(?, hive_partitioning = true)
            ), fills AS (
              SELECT w.symbol, epoch_ns(f.ts) AS ns, f.price::DECIMAL(18, 6) AS price,
                     f.quantity::DECIMAL(18, 6) AS quantity,
                     CASE f.taker_side WHEN 'yes' THEN 'BUY' WHEN 'no' THEN 'SELL'
                          ELSE f.taker_side END AS side
              FROM read_parquet(?) AS f
              JOIN wanted AS w
                ON w.symbol = f.venue || '{SYMBOL_SEPARATOR}' || f.market_id
               AND epoch_ns(f.ts) >= w.start_ns AND epoch_ns(f.ts) < w.start_ns + {NS_PER_DAY}
            ), diff AS (
              (SELECT * FROM archive EXCEPT ALL SELECT * FROM fills)
              UNION ALL
              (SELECT * FROM fills EXCEPT ALL SELECT * FROM archive)
            )
            SELECT symbol, count(*) FROM diff GROUP BY symbol ORDER BY symbol
            """,
            [files, str(source.snapshot / source.path)],
        ).fetchall()
        con.unregister("wanted")
        problems += [(symbol, source, count) for symbol, count in mismatched]
    return problems

"""Consolidated tick files: many symbol-days in one Parquet file, for the warm and cold tiers.

Thin symbols make one file per symbol-day expensive (every file carries its own footer), so
older symbol-days are rewritten into one file per archive and period (``month`` or ``year``)::

    <tier root>/year=<YYYY>/month=<MM>/part-<sha256[:16]>.parquet     (layout "month")
    <tier root>/year=<YYYY>/part-<sha256[:16]>.parquet                (layout "year")

Columns: ``symbol`` (string, dictionary), ``date`` (the UTC day, date32), then the archive's
own ``ts`` (at the archive's timestamp unit), ``price``, ``quantity``, ``side`` (see
``ticks.encode.parquet_file``). Rows are sorted by
symbol, then date and time (``sorting_columns`` says so); row groups of about the tier's
``consolidated_row_group_size`` rows end on symbol-day boundaries, and carry min/max
statistics for ``symbol``, ``date`` and ``ts`` only, which is what lets DuckDB skip to a symbol
and a date. Encodings of ``ts``, ``date``, ``price`` and ``quantity`` are measured on a sample
and the smallest kept, as for symbol-day files; ``parquet_file.write_table`` writes the table
in the row groups this module chooses.

Each file also records what it holds, so the catalog can be rebuilt from the files alone
(``ticks.archive.ops.integrity.rebuild_catalog``): ``skewtape.tier``, ``skewtape.period``,
``skewtape.catalog_generation`` (the catalog generation that commits it),
``skewtape.symbol_days_count`` and ``skewtape.symbol_days_sha256``: a few dozen bytes per
file, however many symbol-days it holds. Which symbol-days those are is the file's own
``symbol`` and ``date`` columns (:func:`read_symbol_days`); the digest pins that list (see
:func:`symbol_days_digest`), so a reader can tell the columns from what was written.

A file is named by its content's sha256, written to a temporary name, read back in full and
compared symbol-day by symbol-day with the batches it holds, and only then linked into place, or
uploaded to an S3 tier root and read back (``skewtape_pipeline.storage``; never over an existing
file or object: one of that name must already hold the same bytes).
Writing the same symbol-days again is therefore idempotent and can never overwrite anything.
"""

from __future__ import annotations

import bisect
import hashlib
import itertools
import os
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline import faults, fsio
from skewtape_pipeline.arrow_memory import owned_reader
from skewtape_pipeline.errors import (
    ConfigError,
    DamagedFileError,
    RoundTripError,
    TickFormatError,
    TickValidationError,
)
from skewtape_pipeline.hashing import sha256_bytes, sha256_file
from skewtape_pipeline.storage import (
    LocalTier,
    ObjectFile,
    TierFile,
    TierStore,
    parquet_source,
    reading,
    size_of,
)
from skewtape_pipeline.ticks.archive.store.layout import ensure_archive_schema, recorded_schema
from skewtape_pipeline.ticks.archive.store.policy import TierSettings
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.parquet_file import (
    CONSOLIDATED,
    META_LAYOUT,
    META_PREFIX,
    META_PRICE_SCALE,
    META_QUANTITY_SCALE,
    ConsolidatedWriter,
    FileFacts,
    archive_table,
    read_file_facts,
    stored_timestamp_unit,
    table_batch,
)
from skewtape_pipeline.ticks.encode.validate import check_within_day, validate_batch

META_TIER = META_PREFIX + "tier"
META_PERIOD = META_PREFIX + "period"
META_CATALOG_GENERATION = META_PREFIX + "catalog_generation"
META_SYMBOL_DAYS_COUNT = META_PREFIX + "symbol_days_count"
META_SYMBOL_DAYS_SHA256 = META_PREFIX + "symbol_days_sha256"

Checkpoint = Callable[[str], None]


@dataclass(frozen=True)
class SymbolDayRows:
    """The ticks of one symbol on one UTC day."""

    symbol: str
    day: date
    batch: TickBatch


@dataclass(frozen=True)
class ConsolidatedFile:
    """A written (or found identical) consolidated file and what it holds.

    ``byte_shares[i]`` is the share of the file's bytes of ``parts[i]`` (row groups split by
    rows, the footer spread by rows; they add up to ``bytes``). ``reused`` is True when a file
    with the same content already existed and nothing was written.
    """

    path: Path
    sha256: str
    bytes: int
    rows: int
    parts: list[tuple[str, date, int]]
    byte_shares: list[int]
    facts: FileFacts
    reused: bool


# --- layout -------------------------------------------------------------------------------------


def period_folder(tier_root: Path, period: str) -> Path:
    """``<tier root>/year=YYYY[/month=MM]`` for a period made by ``policy.period_of``."""
    return Path(tier_root) / period_subfolder(period)


def period_subfolder(period: str) -> str:
    """``year=YYYY[/month=MM]`` (POSIX, inside a tier root) for a period made by
    ``policy.period_of``."""
    year, _, month = period.partition("-")
    return f"year={year}/month={month}" if month else f"year={year}"


def consolidated_file_name(sha256: str) -> str:
    """``part-<first 16 hex digits of the content's sha256>.parquet``."""
    return f"part-{sha256[:16]}.parquet"


# --- write --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class PartSource:
    """One symbol-day to write into consolidated files: its key, its row count and how to
    read its ticks (called when the writer reaches it, so at most one symbol-day is held)."""

    symbol: str
    day: date
    rows: int
    read: Callable[[], TickBatch]


def write_consolidated_file(
    parts: Sequence[SymbolDayRows],
    folder: Path | str,
    *,
    settings: TierSettings,
    metadata: Mapping[str, str],
    checkpoint: Checkpoint | None = None,
    store: TierStore | None = None,
) -> ConsolidatedFile:
    """Write ``parts`` (in memory) as one consolidated file in ``folder``, verified before it
    appears: :func:`write_consolidated_files` without a size limit. Raises as it does."""
    check_parts(parts)  # all of them, before anything is written
    sources = [PartSource(p.symbol, p.day, len(p.batch), _held(p.batch)) for p in parts]
    (written,) = write_consolidated_files(
        sources, folder, settings=settings, metadata=metadata, checkpoint=checkpoint,
        store=store, target_bytes=None,
    )  # fmt: skip
    return written


def _held(batch: TickBatch) -> Callable[[], TickBatch]:
    return lambda: batch


def write_consolidated_files(
    parts: Sequence[PartSource],
    folder: Path | str,
    *,
    settings: TierSettings,
    metadata: Mapping[str, str],
    checkpoint: Checkpoint | None = None,
    store: TierStore | None = None,
    target_bytes: int | None = None,
) -> list[ConsolidatedFile]:
    """Write ``parts`` as consolidated files in ``folder``, row group by row group, each file
    verified before it appears; a new file begins at the first symbol-day boundary once a
    file holds ``target_bytes`` (None: one file).

    Memory stays bounded whatever the input: a symbol-day's ticks are read when its first row
    group is written and let go after its last (plus the first ``encoding_sample_rows`` rows,
    on which the encodings are measured, as for one table: the bytes are those of one
    in-memory write of the same parts); each file is read back row group by row group (page
    checksums) and every symbol-day's ticks compared with what was written by digest.

    ``folder`` is a local folder, or with ``store`` (a tier root: a folder or an S3 prefix)
    the folder's POSIX path inside it. ``parts`` must be ordered by symbol then day, one entry
    per symbol-day, all at the same scales. Each file's sha256 names it; it is published
    without replacing anything (``TierStore.publish_new``: hard-linked into a local folder;
    uploaded to an absent key and read back from an object store). Each file's
    ``skewtape.symbol_days_count`` and ``skewtape.symbol_days_sha256`` metadata pin its list of
    symbol-days; ``metadata`` adds the caller's keys (tier, period, catalog generation).
    ``checkpoint(name)`` is called before publishing (crash injection in tests). Idempotent.

    Raises
    ------
    ConfigError
        No parts, parts out of order or repeated, or scales or timestamp units that differ.
    TickValidationError
        A batch that is empty, unsorted, outside its day or of another length than its part
        says.
    RoundTripError
        A file did not read back equal; it is not published.
    TickFormatError
        A different file already has the content-derived name (a sha256 prefix collision).
    ObjectStoreError
        The object store failed (names the URI).
    """
    _check_order(parts)
    if store is None:
        store, folder = LocalTier(Path(folder)), ""
    feed = _PartFeed(parts)
    bounds = row_group_bounds(
        [p.rows for p in parts],
        target=settings.consolidated_row_group_size,
        max_rows=settings.row_group_size,
    )
    sample = feed.sample(settings.encoding_sample_rows or sum(p.rows for p in parts))
    out: list[ConsolidatedFile] = []
    at = 0
    while at < len(bounds):
        with store.staging(str(folder)) as staging:
            temp = staging / f".consolidating.{os.getpid()}{fsio.TEMP_MARKER}"
            try:
                at, held = _write_file(temp, feed, bounds, at, sample, settings, metadata,
                                       target_bytes)  # fmt: skip
                digest = sha256_file(temp)
                facts = read_file_facts(temp)
                shares = byte_shares(temp, [rows for _, _, rows in held])
                name = consolidated_file_name(digest)
                relative = f"{folder}/{name}" if folder else name
                reused = store.publish_new(temp, relative, digest, checkpoint)
            finally:
                temp.unlink(missing_ok=True)
        target = store.file(relative)
        facts = replace(facts, path=target)
        out.append(
            ConsolidatedFile(
                target, digest, facts.size_bytes, facts.num_rows, held, shares, facts, reused
            )
        )
    return out


def write_tier_period(
    parts: Sequence[PartSource],
    *,
    archive_root: Path,
    tier: str,
    period: str,
    store: TierStore,
    settings: TierSettings,
    layout: str,
    generation: int,
) -> list[tuple[ConsolidatedFile, str]]:
    """``parts`` as the consolidated files of ``tier``'s ``period`` in its ``store``, written
    with its ``settings`` (a new file once one holds ``consolidated_target_bytes``) by
    :func:`write_consolidated_files` (raising as it does; ``faults.checkpoint`` before each
    publish); each records the tier, the period, the ``layout`` and the catalog generation
    that lists it (``generation + 1``). The store's archive marker is made to match the scales
    of the archive at ``archive_root`` first (ConfigError when it holds others). Returns each
    file with its catalog path (``<tier>/<path inside the store>``)."""
    schema = recorded_schema(archive_root)
    if schema is not None:
        ensure_archive_schema(
            store,
            price_scale=schema.price_scale,
            quantity_scale=schema.quantity_scale,
            timestamp_unit=schema.timestamp_unit,
        )
    files = write_consolidated_files(
        parts,
        period_subfolder(period),
        store=store,
        settings=settings,
        metadata={
            META_TIER: tier,
            META_PERIOD: period,
            META_PREFIX + "layout_granularity": layout,
            META_CATALOG_GENERATION: str(generation + 1),  # the commit that lists it
        },
        checkpoint=faults.checkpoint,
        target_bytes=settings.consolidated_target_bytes,
    )
    return [(f, f"{tier}/{store.relative(f.path)}") for f in files]


def _check_order(parts: Sequence[PartSource]) -> None:
    if not parts:
        raise ConfigError("parts: a consolidated file needs at least one symbol-day")
    for before, after in itertools.pairwise(parts):
        if (before.symbol, before.day) >= (after.symbol, after.day):
            raise ConfigError(
                f"parts: {after.symbol} {after.day} follows {before.symbol} {before.day}; "
                "expected symbol-days ordered by symbol then day, each once"
            )


class _PartFeed:
    """Hands out the rows of ``parts`` in order, reading each symbol-day when first needed
    (checked: non-empty, sorted, within its day, of its stated length, at the first part's
    scales and unit) and letting it go once its last row is handed out; keeps the digest of
    every part's ticks as handed out."""

    def __init__(self, parts: Sequence[PartSource]):
        self.parts = parts
        self._batches: dict[int, TickBatch] = {}
        self._like: TickBatch | None = None
        self.digests = [hashlib.sha256() for _ in parts]
        self._starts = list(itertools.accumulate([0, *(p.rows for p in parts)]))

    @property
    def like(self) -> TickBatch:
        if self._like is None:
            self._like = self._batch(0)
        return self._like

    def _batch(self, index: int) -> TickBatch:
        batch = self._batches.get(index)
        if batch is None:
            part = self.parts[index]
            batch = part.read()
            check_parts([SymbolDayRows(part.symbol, part.day, batch)])
            if len(batch) != part.rows:
                raise TickValidationError(
                    f"{part.symbol} {part.day}: {len(batch)} ticks, its source said {part.rows}"
                )
            like = self._like or batch
            mine = (batch.price_scale, batch.quantity_scale, batch.timestamp_unit)
            first = (like.price_scale, like.quantity_scale, like.timestamp_unit)
            if mine != first:
                raise ConfigError(
                    f"parts: one file holds one schema; {part.symbol} {part.day} has scales and "
                    f"timestamp units {mine}, the first part {first}"
                )
            self._like = like
            self._batches[index] = batch
        return batch

    def sample(self, rows: int) -> pa.Table:
        """The first ``rows`` rows as a consolidated table (what the encodings are measured
        on); the parts read for it are kept until written."""
        pieces, left, index = [], rows, 0
        while left > 0 and index < len(self.parts):
            batch = self._batch(index)
            pieces.append(SymbolDayRows(self.parts[index].symbol, self.parts[index].day,
                                        batch.slice(0, min(left, len(batch)))))  # fmt: skip
            left -= len(pieces[-1].batch)
            index += 1
        return consolidated_table(pieces)

    def rows(self, start: int, stop: int) -> list[tuple[int, SymbolDayRows]]:
        """Global rows ``start`` .. ``stop`` as (part index, slice) pieces; a part whose last
        row is handed out is let go."""
        out = []
        index = bisect.bisect_right(self._starts, start) - 1
        while start < stop:
            part, first = self.parts[index], self._starts[index]
            batch = self._batch(index)
            lo, hi = start - first, min(stop, first + part.rows) - first
            piece = batch.slice(lo, hi - lo)
            _digest(self.digests[index], piece)
            out.append((index, SymbolDayRows(part.symbol, part.day, piece)))
            if first + hi == first + part.rows:
                self._batches.pop(index, None)
            start = first + hi
            index += 1
        return out

    def part_starts_at(self, row: int) -> bool:
        return row in self._starts


def _digest(hasher: Any, batch: TickBatch) -> None:
    """Feed ``batch``'s ticks (ts, price, quantity, side values) into ``hasher``."""
    for column, width in ((batch.ts_ns, 8), (batch.price, 8), (batch.quantity, 8), (batch.side, 1)):
        array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        data = array.buffers()[1]
        hasher.update(memoryview(data)[array.offset * width : (array.offset + len(array)) * width])


def _write_file(
    temp: Path,
    feed: _PartFeed,
    bounds: list[tuple[int, int]],
    at: int,
    sample: pa.Table,
    settings: TierSettings,
    metadata: Mapping[str, str],
    target_bytes: int | None,
) -> tuple[int, list[tuple[str, date, int]]]:
    """Write the row groups ``bounds[at:]`` to ``temp`` until it holds ``target_bytes`` at a
    symbol-day boundary; fsync it, read it back and compare (RoundTripError). Returns the
    index of the next row group and the file's ``(symbol, day, rows)``."""
    held: list[tuple[int, str, date, int]] = []
    with fsio.naming(temp, temp), ConsolidatedWriter(temp, sample, settings.writer) as writer:
        while at < len(bounds):
            start, stop = bounds[at]
            pieces = feed.rows(start, stop)
            writer.write(consolidated_table([piece for _, piece in pieces]))
            for index, piece in pieces:
                if held and held[-1][0] == index:
                    held[-1] = (index, piece.symbol, piece.day, held[-1][3] + len(piece.batch))
                else:
                    held.append((index, piece.symbol, piece.day, len(piece.batch)))
            at += 1
            full = target_bytes is not None and writer.bytes_written >= target_bytes
            if full and at < len(bounds) and feed.part_starts_at(bounds[at][0]):
                break
        listing = [(symbol, day, rows) for _, symbol, day, rows in held]
        pinned = {**metadata, **symbol_days_metadata(listing)}
        writer.finish(pinned, like=feed.like)
    fsio.fsync_file(temp)
    _verify_written(temp, held, feed)
    return at, listing


def _verify_written(path: Path, held: list[tuple[int, str, date, int]], feed: _PartFeed) -> None:
    """Read ``path`` back row group by row group (page checksums) and compare its symbol-days
    and each one's ticks (by digest) with what was written. RoundTripError naming the first
    symbol-day that differs."""
    try:
        found = _read_back_digests(path)
    except TickFormatError as exc:
        raise RoundTripError(f"{path}: written file does not read back: {exc}") from None
    wanted = [(symbol, day, rows) for _, symbol, day, rows in held]
    keys = [(symbol, day, rows) for symbol, day, rows, _ in found]
    for mine, theirs in zip(wanted, keys, strict=False):
        if mine[:2] == theirs[:2] and mine[2] != theirs[2]:
            raise RoundTripError(
                f"{path}: {mine[0]} {mine[1]}: row counts differ: {mine[2]} written, "
                f"{theirs[2]} read back"
            )
    if [k[:2] for k in keys] != [w[:2] for w in wanted]:
        raise RoundTripError(
            f"{path}: holds {len(keys)} symbol-days, expected {len(wanted)} (missing, "
            "unexpected or out of order)"
        )
    for (index, symbol, day, _), (*_, digest) in zip(held, found, strict=True):
        if feed.digests[index].hexdigest() != digest:
            raise RoundTripError(f"{path}: {symbol} {day}: its ticks read back differ")


def _read_back_digests(path: Path) -> list[tuple[str, date, int, str]]:
    """``(symbol, day, rows, digest of its ticks)`` of each symbol-day of the consolidated
    file ``path``, read row group by row group."""
    footer = read_footer(path)
    try:
        parquet = pq.ParquetFile(
            str(path), metadata=footer, read_dictionary=["symbol", "side"],
            page_checksum_verification=True,
        )  # fmt: skip
        schema = _tick_schema(path, parquet)
        out: list[tuple[str, date, int, Any]] = []
        for group in range(footer.num_row_groups):
            table = parquet.read_row_group(group, use_threads=False)
            for symbol, day, batch in _symbol_days_of(path, table, schema):
                if out and (out[-1][0], out[-1][1]) == (symbol, day):
                    out[-1] = (symbol, day, out[-1][2] + len(batch), out[-1][3])
                else:
                    out.append((symbol, day, len(batch), hashlib.sha256()))
                _digest(out[-1][3], batch)
    except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
        raise TickFormatError(f"{path}: does not read as a consolidated tick file: {exc}") from None
    return [(symbol, day, rows, hasher.hexdigest()) for symbol, day, rows, hasher in out]


def _tick_schema(path: TierFile, parquet: pq.ParquetFile) -> TickSchema:
    """The scales and unit a consolidated file records; TickFormatError when it is none."""
    metadata = {k.decode(): v.decode() for k, v in (parquet.metadata.metadata or {}).items()}
    if metadata.get(META_LAYOUT) != CONSOLIDATED:
        raise TickFormatError(f"{path}: not a consolidated tick file ({META_LAYOUT} missing)")
    timestamp_unit = stored_timestamp_unit(path, parquet.metadata)
    price_scale = int(metadata[META_PRICE_SCALE])
    return TickSchema(timestamp_unit, price_scale, int(metadata[META_QUANTITY_SCALE]))


def _symbol_days_of(
    path: TierFile, table: pa.Table, schema: TickSchema
) -> list[tuple[str, date, TickBatch]]:
    """The runs of one symbol-day in ``table`` (rows of a consolidated file), in order."""
    expected = ["symbol", "date", "ts", "price", "quantity", "side"]
    if table.column_names != expected:
        raise TickFormatError(f"{path}: columns {table.column_names}, expected {expected}")
    batch = table_batch(table, schema, path)
    symbols = pc.cast(table.column("symbol").combine_chunks(), pa.string())
    days = table.column("date").combine_chunks()
    return [
        (symbols[start].as_py(), days[start].as_py(), batch.slice(start, stop - start))
        for start, stop in _runs(symbols, days)
    ]


def read_rows(path: TierFile, footer: pq.FileMetaData, start: int, count: int) -> pa.Table:
    """Rows ``start`` .. ``start + count`` of the consolidated file ``path`` (its ``footer``
    read already), reading only the row groups that hold them (page checksums verified)."""
    groups, first, at = [], None, 0
    for group in range(footer.num_row_groups):
        rows = footer.row_group(group).num_rows
        if at < start + count and at + rows > start:
            groups.append(group)
            first = at if first is None else first
        at += rows
    source, filesystem = parquet_source(path)
    with reading(path):
        parquet = pq.ParquetFile(
            source, filesystem=filesystem, metadata=footer, read_dictionary=["symbol", "side"],
            page_checksum_verification=True,
        )  # fmt: skip
        table = parquet.read_row_groups(groups, use_threads=False)
    return table.slice(start - (first or 0), count)


def read_symbol_day(
    path: TierFile, footer: pq.FileMetaData, key: tuple[str, date], rows: tuple[int, int]
) -> TickBatch:
    """The ticks of the symbol-day ``key`` at ``rows`` (first row, count) of the consolidated
    file ``path``; TickFormatError when those rows hold anything else."""
    try:
        source, filesystem = parquet_source(path)
        with reading(path):
            parquet = pq.ParquetFile(source, filesystem=filesystem, metadata=footer)
        schema = _tick_schema(path, parquet)
        table = read_rows(path, footer, *rows)
        found = _symbol_days_of(path, table, schema)
    except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
        raise TickFormatError(f"{path}: does not read as a consolidated tick file: {exc}") from None
    if [(symbol, day, len(batch)) for symbol, day, batch in found] != [(*key, rows[1])]:
        raise TickFormatError(
            f"{path}: rows {rows[0]} to {rows[0] + rows[1]} do not hold {key[0]} {key[1]} alone "
            "(the catalog and the file disagree); rebuild the catalog from the files"
        )
    return found[0][2]


def symbol_days_metadata(symbol_days: Sequence[tuple[str, date, int]]) -> dict[str, str]:
    """The key-value metadata pinning a file's ``(symbol, day, rows)`` list (file order)."""
    return {
        META_SYMBOL_DAYS_COUNT: str(len(symbol_days)),
        META_SYMBOL_DAYS_SHA256: symbol_days_digest(symbol_days),
    }


def symbol_days_digest(symbol_days: Iterable[tuple[str, date, int]]) -> str:
    """sha256 (hex) of the canonical list: one UTF-8 line ``symbol\\tYYYY-MM-DD\\trows\\n`` per
    symbol-day, in file order."""
    lines = "".join(f"{symbol}\t{day.isoformat()}\t{rows}\n" for symbol, day, rows in symbol_days)
    return sha256_bytes(lines.encode("utf-8"))


def check_parts(parts: Sequence[SymbolDayRows]) -> None:
    """Refuse an empty, unordered or mixed-schema list of symbol-days (see the writer)."""
    if not parts:
        raise ConfigError("parts: a consolidated file needs at least one symbol-day")
    scales = {(p.batch.price_scale, p.batch.quantity_scale) for p in parts}
    if len(scales) != 1:
        raise ConfigError(f"parts: one file holds one schema; found scales {sorted(scales)}")
    units = {p.batch.timestamp_unit for p in parts}
    if len(units) != 1:
        raise ConfigError(
            f"parts: one file holds one schema; found timestamp units {sorted(units)}"
        )
    for before, after in itertools.pairwise(parts):
        if (before.symbol, before.day) >= (after.symbol, after.day):
            raise ConfigError(
                f"parts: {after.symbol} {after.day} follows {before.symbol} {before.day}; "
                "expected symbol-days ordered by symbol then day, each once"
            )
    for part in parts:
        if len(part.batch) == 0:
            raise TickValidationError(f"{part.symbol} {part.day}: the batch is empty")
        validate_batch(part.batch)
        check_within_day(part.batch, part.day)


def consolidated_table(parts: Sequence[SymbolDayRows]) -> pa.Table:
    """The file's columns: symbol and date, then the archive columns of every part in order."""
    batch = concat_batches([p.batch for p in parts])
    lengths = [len(p.batch) for p in parts]
    # Plain strings: the Parquet writer builds each row group's own dictionary of symbols.
    rows_of_part = _repeat_indices(lengths)
    symbols = pc.take(pa.array([p.symbol for p in parts], pa.string()), rows_of_part)
    days = pc.take(pa.array([p.day for p in parts], pa.date32()), rows_of_part)
    table = archive_table(batch)
    table = table.add_column(0, pa.field("date", pa.date32(), nullable=False), days)
    return table.add_column(0, pa.field("symbol", pa.string(), nullable=False), symbols)


def concat_batches(batches: Sequence[TickBatch]) -> TickBatch:
    """One batch holding ``batches`` one after the other (same scales and timestamp unit;
    ConfigError if not)."""
    scales = {(b.price_scale, b.quantity_scale) for b in batches}
    if len(scales) != 1:
        raise ConfigError(f"batches have different scales {sorted(scales)}; expected one")
    units = {b.timestamp_unit for b in batches}
    if len(units) != 1:
        raise ConfigError(f"batches have different timestamp units {sorted(units)}; expected one")
    (price_scale, quantity_scale) = scales.pop()
    return TickBatch(
        ts_ns=pa.concat_arrays([b.ts_ns for b in batches]),
        price=pa.concat_arrays([b.price for b in batches]),
        quantity=pa.concat_arrays([b.quantity for b in batches]),
        side=pa.concat_arrays([b.side for b in batches]),
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        timestamp_unit=units.pop(),
    )


def _repeat_indices(lengths: Sequence[int]) -> pa.Array:
    """0 repeated lengths[0] times, 1 repeated lengths[1] times, ... (int32)."""
    ends = pa.array(list(itertools.accumulate(lengths)), pa.int32())
    values = pa.array(range(len(lengths)), pa.int32())
    return pc.run_end_decode(pa.RunEndEncodedArray.from_arrays(ends, values))


def row_group_bounds(
    lengths: Sequence[int], *, target: int, max_rows: int
) -> list[tuple[int, int]]:
    """Row ranges of the row groups for parts of ``lengths`` rows, in order.

    Whole parts are packed greedily up to ``target`` rows; a part of ``target`` rows or more
    gets row groups of its own of at most ``max_rows`` rows.
    """
    bounds: list[tuple[int, int]] = []
    start = pending = 0
    for n in lengths:
        if pending and (n >= target or pending + n > target):
            bounds.append((start, start + pending))
            start, pending = start + pending, 0
        if n >= target:
            bounds += [(start + o, start + min(n, o + max_rows)) for o in range(0, n, max_rows)]
            start += n
        else:
            pending += n
    if pending:
        bounds.append((start, start + pending))
    return bounds


# --- read and verify ----------------------------------------------------------------------------


def read_footer(path: TierFile, data: pa.Buffer | None = None) -> pq.FileMetaData:
    """The Parquet footer of the archive file ``path`` (of ``data``, its bytes already read into
    a buffer from :func:`~skewtape_pipeline.arrow_memory.owned_buffer`, when given).

    Raises DamagedFileError naming the file when the footer does not decode (a damaged or
    truncated file), OSError when it cannot be read at all (missing, no permission),
    ObjectStoreError naming an object when its store fails (unreachable, refused credentials).
    """
    source, filesystem = (owned_reader(data), None) if data is not None else parquet_source(path)
    try:
        with reading(path):
            return pq.read_metadata(source, filesystem=filesystem)
    except (FileNotFoundError, PermissionError):
        raise
    except (OSError, pa.ArrowException):
        raise DamagedFileError(
            "its Parquet footer does not decode (a damaged or truncated file); restore it "
            "from a copy",
            path=path,
        ) from None


def read_consolidated_file(path: TierFile) -> list[SymbolDayRows]:
    """Every symbol-day in a consolidated file, in file order (page checksums verified).

    Raises TickFormatError when the file is not a consolidated tick file or is damaged.
    """
    path = path if isinstance(path, ObjectFile) else Path(path)
    footer = read_footer(path)
    source, filesystem = parquet_source(path)
    try:
        parquet = pq.ParquetFile(
            source,
            filesystem=filesystem,
            metadata=footer,
            read_dictionary=["symbol", "side"],
            page_checksum_verification=True,
        )
        metadata = {k.decode(): v.decode() for k, v in (parquet.metadata.metadata or {}).items()}
        if metadata.get(META_LAYOUT) != CONSOLIDATED:
            raise TickFormatError(f"{path}: not a consolidated tick file ({META_LAYOUT} missing)")
        price_scale = int(metadata[META_PRICE_SCALE])
        quantity_scale = int(metadata[META_QUANTITY_SCALE])
        timestamp_unit = stored_timestamp_unit(path, parquet.metadata)
        table = parquet.read(use_threads=False)
    except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
        raise TickFormatError(f"{path}: does not read as a consolidated tick file: {exc}") from None
    expected = ["symbol", "date", "ts", "price", "quantity", "side"]
    if table.column_names != expected:
        raise TickFormatError(f"{path}: columns {table.column_names}, expected {expected}")
    batch = table_batch(table, TickSchema(timestamp_unit, price_scale, quantity_scale), path)
    symbols = pc.cast(table.column("symbol").combine_chunks(), pa.string())
    days = table.column("date").combine_chunks()
    return [
        SymbolDayRows(symbols[start].as_py(), days[start].as_py(), batch.slice(start, stop - start))
        for start, stop in _runs(symbols, days)
    ]


def read_symbol_days(path: TierFile, footer: pq.FileMetaData) -> list[tuple[str, date, int]]:
    """``(symbol, day, rows)`` of each run of one symbol-day in the consolidated file ``path``
    (``footer``: its footer), in file order; reads only the ``symbol`` and ``date`` columns
    (page checksums verified).

    Raises TickFormatError naming the file when those columns are missing or do not decode.
    """
    try:
        source, filesystem = parquet_source(path)
        parquet = pq.ParquetFile(
            source, filesystem=filesystem, metadata=footer, page_checksum_verification=True
        )
        table = parquet.read(columns=["symbol", "date"], use_threads=False)
        symbols = pc.cast(table.column("symbol").combine_chunks(), pa.string())
        days = pc.cast(table.column("date").combine_chunks(), pa.date32())
    except (OSError, KeyError, ValueError, pa.ArrowException) as exc:
        raise TickFormatError(
            f"{path}: its symbol and date columns do not read as a consolidated tick file's ({exc})"
        ) from None
    return [
        (symbols[start].as_py(), days[start].as_py(), stop - start)
        for start, stop in _runs(symbols, days)
    ]


def _runs(symbols: pa.Array, days: pa.Array) -> list[tuple[int, int]]:
    """(start, stop) of each run of equal (symbol, date) in file order."""
    n = len(symbols)
    if n == 0:
        return []
    changed = pc.or_(
        pc.not_equal(symbols.slice(1), symbols.slice(0, n - 1)),
        pc.not_equal(days.slice(1), days.slice(0, n - 1)),
    )
    starts = [0, *(i + 1 for i in pc.indices_nonzero(changed).to_pylist()), n]
    return list(itertools.pairwise(starts))


def byte_shares(path: TierFile, lengths: Sequence[int]) -> list[int]:
    """Each part's share of ``path``'s bytes (parts of ``lengths`` rows, in file order).

    A row group's compressed bytes are split by rows among the parts in it; the rest of the
    file (footer, magic numbers) is split by rows over all parts. Rounded by largest remainder,
    so the shares add up to the file size exactly.
    """
    size = size_of(path if isinstance(path, ObjectFile) else Path(path))
    source, filesystem = parquet_source(path)
    meta = pq.read_metadata(source, filesystem=filesystem)
    total_rows = sum(lengths)
    if total_rows != meta.num_rows:
        raise ConfigError(f"{path}: holds {meta.num_rows} rows; the parts have {total_rows}")
    shares = [0.0] * len(lengths)
    grouped = 0
    part, part_left = 0, lengths[0] if lengths else 0
    for g in range(meta.num_row_groups):
        group = meta.row_group(g)
        group_bytes = sum(group.column(c).total_compressed_size for c in range(group.num_columns))
        grouped += group_bytes
        rows_left = group.num_rows
        while rows_left > 0:
            while part_left == 0:
                part += 1
                part_left = lengths[part]
            taken = min(rows_left, part_left)
            shares[part] += group_bytes * taken / group.num_rows
            rows_left -= taken
            part_left -= taken
    overhead = size - grouped
    shares = [s + overhead * n / total_rows for s, n in zip(shares, lengths, strict=True)]
    return _largest_remainder(shares, size)


def _largest_remainder(values: Sequence[float], total: int) -> list[int]:
    floors = [int(v) for v in values]
    order = sorted(range(len(values)), key=lambda i: values[i] - floors[i], reverse=True)
    for i in order[: total - sum(floors)]:
        floors[i] += 1
    return floors

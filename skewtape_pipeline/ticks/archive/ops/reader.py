"""Reading symbol-days straight from their files with pyarrow, at the cost of what is read.

An :class:`ArchiveReader` is built once from an archive's core (``Archive.core``: its catalog
and resolved tiers) and keeps what it has read: the catalog (until the catalog file's stamp
changes), the hot index (brought up to date by the lines appended since:
``hot_index.HotIndex.refreshed``), each version's catalog and manifest (immutable), the
footers of the files it read (by content, so immutable too) and the cache of verified files
(``trust.VerifiedFiles``). A read then:

1. names the files of the wanted symbol-days from the catalog and the hot index alone
   (``read_plan``: no listing of the root, no record of a file it does not read): a
   symbol-day's hot file when it is the live copy, else its consolidated file and, from the
   catalog's row counts, its rows in it (``catalog.FileRows``) and so the row groups that hold
   them;
2. verifies those files only (stamp; sha256 when the stamp changed: ``trust.VerifiedFiles``),
   a file changed behind the archive's back being refused as the ``ticks`` view refuses it;
3. reads the projected columns of those files and row groups (several files side by side:
   pyarrow releases the GIL) and concatenates the symbol-days in (symbol, date) order. Each is
   stored in time order; the rare ties of a timestamp are ordered by price, quantity and side, so
   the table is row for row the one ``SELECT ... FROM ticks ORDER BY symbol, date, ts, price,
   quantity, side`` returns, with the same column types but one: ``side`` stays the dictionary
   it is stored as (:data:`SIDE_TYPE`; pandas reads it as a Categorical), which decoding to
   plain strings made a third of a read's time.
"""

from __future__ import annotations

import difflib
import os
import threading
from bisect import bisect_left, bisect_right
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from datetime import date
from typing import TYPE_CHECKING, Any

import duckdb
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline.arrow_memory import file_reader
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    ConfigError,
    DamagedFileError,
    NotAnArchiveError,
    SkewtapeError,
    UnknownSymbolError,
)
from skewtape_pipeline.hashing import FileStamp
from skewtape_pipeline.storage import exists, parquet_source, reading, stamps_of
from skewtape_pipeline.ticks.archive.ops.read_plan import (
    VIEW_COLUMNS,
    Piece,
    Snapshot,
    check_columns,
    check_days,
    check_symbols,
)
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    SymbolDayKey,
)
from skewtape_pipeline.ticks.archive.store.consolidate import read_footer
from skewtape_pipeline.ticks.archive.store.layout import check_archive_root, recorded_schema
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import (
    ChangedUnderRead,
    VerifiedFiles,
    check_catalog_present,
    repair_hint,
    settled,
)
from skewtape_pipeline.ticks.archive.store.version_files import missing_version_file
from skewtape_pipeline.ticks.archive.store.versions import AsOf
from skewtape_pipeline.ticks.encode.parquet_file import archive_schema

if TYPE_CHECKING:
    from skewtape_pipeline.ticks.archive.core import ArchiveCore

_STORED = ("ts", "price", "quantity", "side")
SIDE_TYPE = pa.dictionary(pa.int32(), pa.string())
"""The type of ``side`` in what a read returns: its few values once each, then an index per
tick (as stored; the ``ticks`` view gives plain strings)."""
_DICTIONARY_READ = ["side"]
_CONSOLIDATED_DICTIONARY_READ = ["side", "symbol"]
"""Read as their dictionaries: ``side`` returned so (:data:`SIDE_TYPE`), a consolidated
file's ``symbol`` only checked (:func:`_check_slice`; not read at all when each symbol-day read
is a row group its statistics place: :func:`_placed_by_statistics`), never decoded."""
_ORDER = [("ts", "ascending"), ("price", "ascending"), ("quantity", "ascending"),
          ("side", "ascending")]  # fmt: skip
READ_WORKERS = max(1, min(4, os.cpu_count() or 1))
"""Files read side by side (pyarrow releases the GIL while it decodes)."""
_PARALLEL_FROM = 4
"""Fewer symbol-days than this are read one after the other (threads cost more than they
save)."""


class ArchiveReader:
    """Reads an archive's symbol-days with pyarrow (see the module notes); one per ``Archive``
    handle, keeping what it has read."""

    def __init__(self, core: ArchiveCore):
        self.core = core
        self.tiers = core.tiers
        self.root = core.root
        self._catalog: tuple[Any, Catalog] | None = None
        self._index: hot_index.HotIndex | None = None
        self._versions: dict[int, Snapshot] = {}
        self._footers: dict[tuple[str, str], pq.FileMetaData] = {}
        self._hot_footers: dict[tuple[str, SymbolDayKey], pq.FileMetaData] = {}
        self._verified: VerifiedFiles | None = None
        self._ties: dict[tuple[str, SymbolDayKey], bool] = {}
        self._empty: pa.Schema | None = None
        self._checked_root = False
        self._current: tuple[Any, Snapshot] | None = None
        self._pool: ThreadPoolExecutor | None = None

    # -- the state

    def snapshot(self, as_of: AsOf | None = None) -> Snapshot:
        """Where every symbol-day is now (the catalog and hot index read again only when their
        files changed), or as of a version (kept once read)."""
        self._check_root()
        if as_of is not None:
            log = self.core.versions
            version = log.resolve_as_of(as_of)
            found = self._versions.get(version.version)
            if found is None:
                entries = {e.key: e for e in log.read_manifest(version)}
                catalog = log.version_catalog(version)
                found = Snapshot(self.tiers, catalog, entries, version=version, log=log)
                if len(self._versions) >= 16:
                    self._versions.pop(next(iter(self._versions)))
                self._versions[version.version] = found
            return found
        # the hot index first: re-tiering commits the catalog, then removes the moved hot files,
        # so an index this old and a catalog as new name each day (the hot file superseded)
        index = self._current_index()
        catalog = self._current_catalog()
        key = (id(catalog), None if index is None else (id(index), index.stamp))
        if index is not None and self._current is not None and self._current[0] == key:
            return self._current[1]
        snapshot = Snapshot(self.tiers, catalog, index)
        self._current = (key, snapshot)
        return snapshot

    def _check_root(self) -> None:
        """NotAnArchiveError unless the root is an archive root (checked once: it stays one)."""
        if self._checked_root:
            return
        try:
            check_archive_root(self.root)
        except ConfigError as exc:
            raise NotAnArchiveError(str(exc)) from None
        self._checked_root = True

    def _current_catalog(self) -> Catalog:
        path = self.core.catalog.path
        try:
            stamp: Any = FileStamp.of(path)
        except FileNotFoundError:
            stamp = None
        if self._catalog is not None and self._catalog[0] == stamp:
            return self._catalog[1]
        if stamp is None:  # consolidated files without a catalog: refused (checked once)
            check_catalog_present(self.tiers)
            catalog = Catalog()
        else:
            catalog = self.core.catalog.read()
        self._catalog = (stamp, catalog)
        return catalog

    def _current_index(self) -> hot_index.HotIndex | None:
        if self._index is not None:
            self._index = self._index.refreshed()
        if self._index is None:
            self._index = hot_index.HotIndex.read(self.root)
        return self._index

    # -- reading

    def read(
        self,
        symbols: Iterable[str] | str | None = None,
        start: object = None,
        end: object = None,
        columns: Collection[str] | None = None,
        as_of: AsOf | None = None,
    ) -> pa.Table:
        """The ticks of ``symbols`` over the days asked (the contract: ``Archive.read``)."""
        picked = check_columns(columns)
        first, last = check_days(start, end)
        asked = check_symbols(symbols)

        def read_once() -> pa.Table:
            snapshot = self.snapshot(as_of)
            wanted = sorted(snapshot.symbols()) if asked is None else sorted(set(asked))
            plans = {s: snapshot.pieces(self.tiers, s, first, last) for s in wanted}
            if asked is not None:
                self._known(snapshot, [s for s, pieces in plans.items() if not pieces])
            return self._concat(
                self._tables([p for pieces in plans.values() for p in pieces], picked), picked
            )

        return settled(read_once)

    def days(self, symbol: object, as_of: AsOf | None = None) -> list[date]:
        """The days ``symbol`` is held on, sorted (the contract: ``Archive.days``)."""
        if not isinstance(symbol, str):
            raise ConfigError(f"symbol = {symbol!r}: expected a symbol (a string)")
        snapshot = self.snapshot(as_of)
        return [piece.key[1] for piece in snapshot.pieces(self.tiers, symbol, None, None)]

    def read_batch(
        self,
        symbols: Sequence[str],
        start: object = None,
        end: object = None,
        columns: Collection[str] | None = None,
        as_of: AsOf | None = None,
    ) -> dict[str, pa.Table]:
        """Each of ``symbols`` read as one batch (the contract: ``Archive.read_batch``)."""
        picked = check_columns(columns)
        first, last = check_days(start, end)
        asked = check_symbols(symbols, required=True) or []

        def read_once() -> dict[str, pa.Table]:
            snapshot = self.snapshot(as_of)
            plans = {s: snapshot.pieces(self.tiers, s, first, last) for s in asked}
            self._known(snapshot, [s for s, pieces in plans.items() if not pieces])
            tables = self._tables([p for pieces in plans.values() for p in pieces], picked)
            out, at = {}, 0
            for symbol, pieces in plans.items():
                out[symbol] = self._concat(tables[at : at + len(pieces)], picked)
                at += len(pieces)
            return out

        return settled(read_once)

    def _known(self, snapshot: Snapshot, symbols: list[str]) -> None:
        """UnknownSymbolError naming the first of ``symbols`` (which gave no rows) that the
        archive does not hold at all, and the nearest symbols it holds."""
        known = None
        for symbol in sorted(set(symbols)):
            if snapshot.pieces(self.tiers, symbol, None, None):
                continue
            if known is None:  # as of a version: a symbol held now is known too (no rows then)
                known = snapshot.symbols()
                if snapshot.version is not None:
                    known = known | self.snapshot(None).symbols()
            if symbol not in known:
                near = symbols_near(symbol, sorted(known))
                hint = f"; nearest: {', '.join(near)}" if near else ""
                raise UnknownSymbolError(
                    f"{self.root}: holds no symbol {symbol!r}{hint}", symbol=symbol, nearest=near
                )

    def _concat(self, tables: list[pa.Table], picked: list[str]) -> pa.Table:
        if not tables:
            return self._empty_table(picked)
        return pa.concat_tables(tables)

    def _tables(self, pieces: list[Piece], picked: list[str]) -> list[pa.Table]:
        """Each piece's table (``picked`` columns), in order, once its file is verified."""
        if not pieces:
            return []
        stamps = self._verify(pieces)
        by_file: dict[str, list[int]] = {}
        for i, piece in enumerate(pieces):
            by_file.setdefault(piece.rel, []).append(i)
        groups = [chunk for indices in by_file.values() for chunk in _chunks(indices)]

        def load(indices: list[int]) -> list[tuple[int, pa.Table]]:
            tables = self._read_file([pieces[i] for i in indices], picked, stamps)
            return list(zip(indices, tables, strict=True))

        def load_run(run: list[list[int]]) -> list[tuple[int, pa.Table]]:
            return [found for group in run for found in load(group)]

        out: list[pa.Table | None] = [None] * len(pieces)
        if len(groups) > 1 and len(pieces) >= _PARALLEL_FROM and READ_WORKERS > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(
                    max_workers=READ_WORKERS, thread_name_prefix="skewtape-read"
                )
            # one task per worker, the groups dealt out in turn (a task per file costs a handoff
            # each, about a tenth of a small file's read)
            runs = [groups[i::READ_WORKERS] for i in range(min(READ_WORKERS, len(groups)))]
            found = [pair for run in self._pool.map(load_run, runs) for pair in run]
        else:
            found = load_run(groups)
        for i, table in found:
            out[i] = table
        return out  # type: ignore[return-value]

    def _verify(self, pieces: list[Piece]) -> dict[str, FileStamp]:
        """Every distinct file of ``pieces`` against its record, unless its stamp is unchanged
        since it last was (``trust.VerifiedFiles``); the stamps verified, by file. A hot file
        differing from its record is :class:`ChangedUnderRead` (a compaction may have just
        replaced it, its record following the rename)."""
        if self._verified is None:
            self._verified = VerifiedFiles(self.root)
        verified = self._verified
        files: dict[str, Piece] = {}
        for piece in pieces:
            files.setdefault(piece.rel, piece)
        stamps = self._stamps(list(files.values()))
        try:
            for piece in files.values():
                stamp, record = stamps[piece.rel], piece.record
                verified.check_published(piece.rel, piece.file, stamp, record, piece.whose)
        except DamagedFileError as exc:
            if piece.rows is None:
                raise ChangedUnderRead(exc) from None
            raise
        except FileNotFoundError:  # gone between its stamp and its hashing
            raise ChangedUnderRead(_missing(self.tiers, piece)) from None
        finally:
            verified.save()
        return stamps

    def _stamps(self, files: list[Piece]) -> dict[str, FileStamp]:
        """The stamp of each piece's file (``storage.stamps_of``: objects asked side by side);
        once every file was asked about, the first not there as :class:`ChangedUnderRead` (a
        writer may have just moved it; its refusal: CatalogMismatchError naming the repair),
        unless its tier's store cannot be used at all (ObjectStoreError naming it: a missing
        bucket answers every request "not there")."""
        stamps = {}
        for piece, stamp in zip(files, stamps_of([p.file for p in files]), strict=True):
            if stamp is None:
                if piece.rows is not None:  # a consolidated file
                    self.tiers.check_reachable()
                raise ChangedUnderRead(_missing(self.tiers, piece))
            stamps[piece.rel] = stamp
        return stamps

    def _read_file(
        self, pieces: list[Piece], picked: list[str], stamps: dict[str, FileStamp]
    ) -> list[pa.Table]:
        """The tables of ``pieces``, all of one file (verified at ``stamps``)."""
        first = pieces[0]
        stored = [c for c in _STORED if c in picked]
        if first.rows is None:  # a hot file: one symbol-day
            return [self._hot_table(first, stored, picked, stamps[first.rel])]
        return self._consolidated_tables(pieces, stored, picked)

    def _hot_table(
        self, piece: Piece, stored: list[str], picked: list[str], verified: FileStamp
    ) -> pa.Table:
        """``piece``'s hot file read whole and decoded in memory, when it is still the file
        verified (its stamp ``verified``), else :class:`ChangedUnderRead`."""
        tie_key = (piece.record.sha256, piece.key)
        read = self._stored_to_read([piece], stored)
        footer = self._hot_footers.get(tie_key)
        try:
            source, status = file_reader(piece.file)
            if not FileStamp.from_stat(status).same_bytes(verified):
                raise ChangedUnderRead(
                    DamagedFileError("changed while it was read", path=piece.file)
                )
            # ParquetFile.read, not read_table: no dataset layer (a third of a small read's
            # time); no pre-buffering of what is in memory already; the footer parsed once
            parquet = pq.ParquetFile(
                source, metadata=footer, read_dictionary=_DICTIONARY_READ, pre_buffer=False
            )
            table = parquet.read(columns=read, use_threads=False)
        except FileNotFoundError:
            raise ChangedUnderRead(_missing(self.tiers, piece)) from None
        except (OSError, pa.ArrowException) as exc:
            raise DamagedFileError(
                f"does not read as a tick file ({exc})", path=piece.file
            ) from None
        if footer is None:
            _remember(self._hot_footers, tie_key, parquet.metadata, _HOT_FOOTERS)
        return self._finish(table, piece, tie_key, picked)

    def _consolidated_tables(
        self, pieces: list[Piece], stored: list[str], picked: list[str]
    ) -> list[pa.Table]:
        first = pieces[0]
        try:
            footer = self._footer(first)
        except FileNotFoundError:
            raise ChangedUnderRead(_missing(self.tiers, first)) from None
        starts, at = [], 0
        for g in range(footer.num_row_groups):
            starts.append(at)
            at += footer.row_group(g).num_rows
        starts.append(at)
        chosen = sorted({g for piece in pieces for g in _row_groups_of(starts, piece)})
        # the symbol and date columns are read only to check a piece its row group's
        # statistics do not already place (the footer is the verified file's)
        checked = not all(_placed_by_statistics(footer, starts, piece) for piece in pieces)
        keys = ["symbol", "date"] if checked else []
        source, filesystem = parquet_source(first.file)
        try:
            with reading(first.file):
                parquet = pq.ParquetFile(
                    source,
                    filesystem=filesystem,
                    metadata=footer,
                    read_dictionary=_CONSOLIDATED_DICTIONARY_READ,
                )
                table = parquet.read_row_groups(
                    chosen,
                    columns=[*keys, *self._stored_to_read(pieces, stored)],
                    use_threads=False,
                )
        except (OSError, pa.ArrowException) as exc:
            if not exists(first.file):  # re-tiering or pruning removed it under the read
                raise ChangedUnderRead(_missing(self.tiers, first)) from None
            raise DamagedFileError(
                f"does not read as a consolidated tick file ({exc})", path=first.file
            ) from None
        offsets, at = {}, 0
        for g in chosen:
            offsets[g] = at
            at += footer.row_group(g).num_rows
        out = []
        for piece in pieces:
            lo, n = piece.rows  # type: ignore[misc]
            group = bisect_right(starts, lo) - 1
            part = table.slice(offsets[group] + lo - starts[group], n)
            if checked:
                _check_slice(self.tiers, part, piece)
                part = part.drop_columns(keys)
            tie_key = (piece.record.sha256, piece.key)
            out.append(self._finish(part, piece, tie_key, picked))
        return out

    def _stored_to_read(self, pieces: list[Piece], stored: list[str]) -> list[str]:
        """The stored columns to read for ``pieces``: those asked for, or all four while some
        piece's timestamp ties are unknown or must be ordered (``ts`` alone for none)."""
        ties = [self._ties.get((p.record.sha256, p.key)) for p in pieces]
        if any(t is None for t in ties) or (stored and any(ties)):
            return list(_STORED)
        return stored or ["ts"]

    def _footer(self, piece: Piece) -> pq.FileMetaData:
        key = (piece.rel, piece.record.sha256)
        footer = self._footers.get(key)
        if footer is None:
            footer = read_footer(piece.file)
            _remember(self._footers, key, footer, _CONSOLIDATED_FOOTERS)
        return footer

    def _finish(
        self, table: pa.Table, piece: Piece, tie_key: tuple[str, SymbolDayKey], picked: list[str]
    ) -> pa.Table:
        """The piece's rows in the view's order, with the view's columns ``picked``."""
        ties = self._ties.get(tie_key)
        if ties is None:
            ts = table["ts"]
            n = len(ts)
            ties = n > 1 and pc.any(pc.equal(ts.slice(1), ts.slice(0, n - 1))).as_py()
            self._ties[tie_key] = bool(ties)
        if ties and all(c in table.column_names for c in _STORED):
            table = table.take(pc.sort_indices(_sides_decoded(table), sort_keys=_ORDER))
        n = table.num_rows
        symbol, day = piece.key
        columns = []
        for name in picked:
            if name in _STORED:
                column = table[name]
                columns.append(column.combine_chunks() if column.num_chunks != 1 else column)
            elif name == "symbol":
                columns.append(pa.repeat(pa.scalar(symbol, pa.string()), n))
            elif name == "date":
                columns.append(pa.repeat(pa.scalar(day, pa.date32()), n))
            elif name == "tier":
                columns.append(pa.repeat(pa.scalar(piece.tier, pa.string()), n))
            else:
                value = day.year if name == "year" else day.month
                columns.append(pa.repeat(pa.scalar(value, pa.int32()), n))
        return pa.table(columns, schema=self._schema_of(table, picked))

    def _schema_of(self, table: pa.Table, picked: list[str]) -> pa.Schema:
        fields = []
        for name in picked:
            if name in _STORED:
                kind = table.schema.field(name).type
                fields.append(pa.field(name, _view_type(kind)))
            else:
                fields.append(pa.field(name, _FIXED[name]))
        return pa.schema(fields)

    def _empty_table(self, picked: list[str]) -> pa.Table:
        """No rows, typed as rows of this archive are (from its recorded schema; as the
        ``ticks`` view types an archive with no files yet when it records none)."""
        if self._empty is None:
            schema = recorded_schema(self.root)
            if schema is not None:
                stored = archive_schema(
                    schema.price_scale, schema.quantity_scale, schema.timestamp_unit
                )
                fields = {f.name: pa.field(f.name, _view_type(f.type)) for f in stored}
                fields.update((name, pa.field(name, kind)) for name, kind in _FIXED.items())
                schema = pa.schema([fields[name] for name in VIEW_COLUMNS])
            else:
                from skewtape_pipeline.ticks.archive.store.layout import empty_ticks_select

                con = duckdb.connect()
                try:
                    con.execute("SET TimeZone = 'UTC'")
                    schema = con.sql(empty_ticks_select([self.root])).to_arrow_table().schema
                finally:
                    con.close()
            side = schema.get_field_index("side")
            self._empty = schema.set(side, pa.field("side", SIDE_TYPE))
        return self._empty.empty_table().select(picked)


_HOT_FOOTERS = 4096
"""Hot files' footers kept (a few kB each), by sha256 and symbol-day: a file is verified
against its record before it is read, so a footer kept under the record's sha256 is the
file's."""
_CONSOLIDATED_FOOTERS = 256
"""Consolidated files' footers kept, by path and sha256."""


_CACHES = threading.Lock()


def _remember(cache: dict, key: Any, value: Any, most: int) -> None:
    """Keep ``value`` under ``key`` in ``cache``, dropping the oldest entry beyond ``most``
    (under a lock: the reading threads keep footers side by side)."""
    with _CACHES:
        if len(cache) >= most:
            cache.pop(next(iter(cache)))
        cache[key] = value


def _chunks(indices: list[int]) -> list[list[int]]:
    """The pieces of one file in runs read side by side: a consolidated file's symbol-days
    split into :data:`READ_WORKERS` runs (each reads its own row groups), a hot file whole."""
    size = -(-len(indices) // READ_WORKERS)
    if len(indices) < 2 * READ_WORKERS:
        return [indices]
    return [indices[i : i + size] for i in range(0, len(indices), size)]


_FIXED = {
    "symbol": pa.string(),
    "date": pa.date32(),
    "tier": pa.string(),
    "year": pa.int32(),
    "month": pa.int32(),
}


def _view_type(kind: pa.DataType) -> pa.DataType:
    """The type a read gives a stored column, the ``ticks`` view's (DuckDB): a timestamp of ms
    or s is a TIMESTAMPTZ (microseconds) there; but ``side``, read as a dictionary, stays one."""
    if pa.types.is_dictionary(kind):
        return SIDE_TYPE
    if pa.types.is_decimal(kind):
        return pa.decimal128(kind.precision, kind.scale)
    if pa.types.is_timestamp(kind) and kind.unit in ("s", "ms"):
        return pa.timestamp("us", tz=kind.tz)
    return kind


def _row_groups_of(starts: list[int], piece: Piece) -> range:
    """The row groups (of a file whose row group ``g`` starts at row ``starts[g]``, the last
    entry its row count) that hold the consolidated ``piece``'s rows."""
    lo, n = piece.rows  # type: ignore[misc]
    return range(bisect_right(starts, lo) - 1, bisect_left(starts, lo + n))


def _placed_by_statistics(footer: pq.FileMetaData, starts: list[int], piece: Piece) -> bool:
    """Whether the consolidated ``piece``'s rows are exactly one row group whose statistics
    (min and max of ``symbol`` and of ``date``) say it holds the piece's symbol-day only: the
    check :func:`_check_slice` makes, from the footer alone."""
    lo, n = piece.rows  # type: ignore[misc]
    g = bisect_left(starts, lo)
    if g + 1 >= len(starts) or starts[g] != lo or starts[g + 1] != lo + n:
        return False
    group, names = footer.row_group(g), footer.schema.names
    for column, value in zip(("symbol", "date"), piece.key, strict=True):
        stats = group.column(names.index(column)).statistics
        if stats is None or not stats.has_min_max or not stats.min == value == stats.max:
            return False
    return True


def _check_slice(tiers: ArchiveTiers, part: pa.Table, piece: Piece) -> None:
    """The rows the catalog names hold its symbol-day only (else the catalog and the file
    disagree: refused, naming the file and the repair of the archive of ``tiers``)."""
    symbol, day = piece.key
    ok = part.num_rows == piece.rows[1] and (  # type: ignore[index]
        part.num_rows == 0
        or (
            pc.unique(part["symbol"]).cast(pa.string()).to_pylist() == [symbol]
            and pc.all(pc.equal(part["date"], pa.scalar(day, pa.date32()))).as_py()
        )
    )
    if not ok:
        raise CatalogMismatchError(
            f"{piece.file}: the catalog places {symbol} {day.isoformat()} at rows "
            f"{piece.rows}, which hold other ticks; {repair_hint(tiers.root)}",
            paths=[piece.file],
        )


def _missing(tiers: ArchiveTiers, piece: Piece) -> SkewtapeError:
    """The refusal of ``piece``'s file, listed but not on disk, naming the repair of the
    archive of ``tiers``: a version's file is refused as every reader of a version refuses it
    (``version_files.missing_version_file``: VersionError)."""
    root = tiers.root
    if piece.version is not None:
        return missing_version_file(piece.file, piece.version)
    if piece.rows is None:
        what = "the hot index lists it"
        fix = (
            "restore it from a copy, or compact its symbol-day again, or record the hot files as "
            f"they are with `skewtape-pipeline rebuild-catalog {root}` (its ticks are then gone)"
        )
    else:
        what = "the catalog lists it"
        fix = f"restore it from a copy, or {repair_hint(root)}"
    return CatalogMismatchError(
        f"{piece.file}: {what} but it is not on disk; {fix}", paths=[piece.file]
    )


VIEW_ORDER = "symbol, date, ts, price, quantity, side"
"""The order :meth:`ArchiveReader.read` returns rows in, as the view's ``ORDER BY``."""


def view_select(
    columns: list[str], symbols: list[str] | None, start: date | None, end: date | None
) -> tuple[str, list[Any]]:
    """The ``SELECT`` over the ``ticks`` view that returns what :meth:`ArchiveReader.read`
    does (placeholders, never spliced values): the reference a read is compared with."""
    where, parameters = [], []
    if symbols is not None:
        where.append(f"symbol IN ({', '.join('?' for _ in symbols)})" if symbols else "false")
        parameters += symbols
    if start is not None:
        where.append("date >= ?")
        parameters.append(start)
    if end is not None:
        where.append("date <= ?")
        parameters.append(end)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {', '.join(columns)} FROM ticks{clause} ORDER BY {VIEW_ORDER}", parameters


def _sides_decoded(table: pa.Table) -> pa.Table:
    """``table`` with its ``side`` column, read as a dictionary, decoded to strings (what a sort
    takes); unchanged without one."""
    if "side" not in table.column_names:
        return table
    i = table.schema.get_field_index("side")
    field = table.schema.field(i)
    if not pa.types.is_dictionary(field.type):
        return table
    return table.set_column(i, field.with_type(pa.string()), table.column(i).cast(pa.string()))


def symbols_near(name: str, symbols: Iterable[str], limit: int = 3) -> list[str]:
    """The known symbols closest to ``name`` (for an unknown symbol's message)."""
    pool = list(symbols)
    near = difflib.get_close_matches(name, pool, n=limit, cutoff=0.5)
    if len(near) < limit:
        lowered = name.lower()
        near += [s for s in pool if lowered in s.lower() and s not in near][: limit - len(near)]
    return near

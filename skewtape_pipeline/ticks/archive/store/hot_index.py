"""The hot tier's index: which symbol-day files the hot tier holds, each with the record it was
published with (size, sha256) and its stamp then, kept up to date at publication.

Readers and writers find hot files here instead of listing the archive root: a read of some
symbol-days looks them up (no directory scan, no stat of files it does not read), a commit
reads what changed since the last version (no scan of every hot file).

On disk, two files in the archive root, both written under the archive's lock:

- ``_skewtape_hot_index.pq``, the *base*: one row per symbol-day that has or had a hot file,
  sorted by symbol then date (``symbol``, ``date``, ``sha256`` (32 bytes), ``size``, the stamp at
  publication ``device``, ``inode``, ``mtime_ns``, ``ctime_ns``, ``present``: the file is in the
  hot tier, and ``seq``: the number of the log line that last set it); its key-value metadata
  ``skewtape_hot_index`` holds JSON: ``format``, ``version``, ``seq`` (the last line folded in)
  and ``log`` (``[inode, lines, sha256]``: the log it folded, how many of its lines, and the
  sha256 of those lines' bytes; a base written before the sha256 was recorded holds two). Replaced
  atomically. Written in row groups of :data:`BASE_GROUP_ROWS`; a reader decodes it only when
  asked: a lookup of a symbol-day decodes the row groups whose statistics (symbols, days) may
  hold it, none for a day newer than all of the base's (what a commit of a backfill asks), and
  whole-archive work (entries, a symbol's days) the whole base.
- ``_skewtape_hot_files.jsonl``, the *log* (the hot file records of ``store.catalog``):
  one JSON object per line, appended and fsynced right after a file is renamed into place
  (``{"path", "sha256", "size", "stamp": [device, inode, size, mtime_ns, ctime_ns]}``) or removed
  (``{"path", "gone": true}``); a line of the older form (``path``, ``sha256``, ``size``) records
  a file without its stamp. The last line of a path wins over the base. When the log grows past
  :data:`FOLD_LINES` lines it is folded into a new base and replaced by an empty log (the base
  first: a crash between leaves lines the base names as folded, which are skipped, only while
  the log is that file with those lines: a log of another file that got its inode number, as a
  copy of the archive may, is read whole).

Every line has a number (``seq``), counted on from the base's: a version records the number it
was taken at, so the next one reads only the lines after it (:meth:`HotIndex.changes_since`).

An archive written before the index existed has no base: readers then list the root as before
(:func:`scan_index`, once per read), and the first writer (compaction, re-tiering, removal, the
catalog rebuild) builds the base from that listing under the lock (:func:`ensure_index`).
``rebuild-catalog`` builds it again from the files on disk; ``verify-archive`` compares it with
them. A line cut short by a crash (no final newline) is ignored and cut off by the next append.
"""

from __future__ import annotations

import bisect
import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import date
from functools import cached_property
from pathlib import Path
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from skewtape_pipeline import fsio
from skewtape_pipeline.arrow_memory import owned_reader
from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.hashing import FileStamp, is_sha256_hex
from skewtape_pipeline.ticks.archive.store.layout import (
    PART_FILE_NAME,
    decode_symbol,
    encode_symbol,
)

INDEX_FILE = "_skewtape_hot_index.pq"
"""Not ``.parquet``: a reader globbing the root's ``**/*.parquet`` (the hot tier's plain layout)
never meets it."""
LOG_FILE = "_skewtape_hot_files.jsonl"
INDEX_FORMAT = "skewtape-hot-index"
INDEX_VERSION = 1
METADATA_KEY = "skewtape_hot_index"
FOLD_LINES = 2048
"""The log is folded into the base once it holds this many lines (so reading it stays cheap,
and folding, which costs the index's size, happens once per this many publications)."""
BASE_GROUP_ROWS = 8192
"""Rows per row group of the base: a lookup of a symbol-day decodes the groups whose statistics
may hold it (:meth:`HotIndex.get`), not the whole base."""
HOT_GLOB = f"symbol=*/year=*/month=*/date=*/{PART_FILE_NAME}"

SymbolDayKey = tuple[str, date]

SCHEMA = pa.schema(
    [
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("sha256", pa.binary(32)),
        pa.field("size", pa.int64()),
        pa.field("device", pa.uint64()),
        pa.field("inode", pa.uint64()),
        pa.field("mtime_ns", pa.int64()),
        pa.field("ctime_ns", pa.int64()),
        pa.field("present", pa.bool_(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
    ]
)
_EPOCH_ORDINAL = date(1970, 1, 1).toordinal()


@dataclass(frozen=True)
class IndexEntry:
    """One symbol-day of the index: its record (size, sha256; None for a file found on disk
    that was never recorded), its stamp when published (None when unknown), whether the hot
    tier holds it now, and the log line that last set it."""

    symbol: str
    day: date
    size: int | None
    sha256: str | None
    stamp: FileStamp | None
    present: bool
    seq: int

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.day)

    @property
    def rel(self) -> str:
        return hot_rel_of(self.symbol, self.day)


@dataclass(frozen=True)
class IndexMark:
    """Where the index stood: the last line's number, and the log's inode and byte length then
    (so the lines after it are read from that offset while the log is the same file)."""

    seq: int
    log_inode: int
    log_offset: int

    def to_list(self) -> list[int]:
        return [self.seq, self.log_inode, self.log_offset]

    @classmethod
    def from_list(cls, value: object) -> IndexMark | None:
        ints = isinstance(value, list) and all(type(n) is int for n in value)
        return cls(*value) if ints and len(value) == 3 else None


def index_path(root: Path) -> Path:
    return Path(root) / INDEX_FILE


def log_path(root: Path) -> Path:
    return Path(root) / LOG_FILE


def hot_rel_of(symbol: str, day: date) -> str:
    """The hot file of a symbol-day, relative to the archive root (``layout.partition_file``)."""
    return (
        f"symbol={_folder(symbol)}/year={day.year:04d}/month={day.month:02d}"
        f"/date={day.isoformat()}/{PART_FILE_NAME}"
    )


_FOLDERS: dict[str, str] = {}


def _folder(symbol: str) -> str:
    folder = _FOLDERS.get(symbol)
    if folder is None:
        folder = encode_symbol(symbol)
        if len(_FOLDERS) < 100_000:
            _FOLDERS[symbol] = folder
    return folder


def key_of_rel(rel: str) -> SymbolDayKey | None:
    """The symbol-day a hot file path (relative to the root) names; None when it names none."""
    parts = rel.split("/")
    if len(parts) != 5 or parts[4] != PART_FILE_NAME:
        return None
    folder, year, month, day = parts[:4]
    if not (folder.startswith("symbol=") and day.startswith("date=")):
        return None
    try:
        symbol = decode_symbol(folder[7:])
        when = date.fromisoformat(day[5:])
    except (UnicodeDecodeError, ValueError):
        return None
    if year != f"year={when.year:04d}" or month != f"month={when.month:02d}" or not symbol:
        return None
    return symbol, when


# --- reading ------------------------------------------------------------------------------------


class HotIndex:
    """The hot index of one archive as read once (base and log), with lookups by symbol-day and
    symbol that build no object per row until asked; :meth:`refreshed` reads only what was
    appended since (see the module notes)."""

    def __init__(
        self,
        root: Path,
        base: pq.ParquetFile,
        base_stamp: FileStamp | None,
        base_seq: int,
        skip: FoldedLog,
    ):
        self.root = Path(root)
        self._parquet = base
        self._base_stamp = base_stamp
        self._base_seq = base_seq
        self._seq = base_seq
        self._skip = skip
        self._log: dict[SymbolDayKey, IndexEntry] = {}
        self._history: list[tuple[int, SymbolDayKey, IndexEntry | None]] = []
        self._decoded: dict[int, IndexEntry] = {}
        self._groups: dict[int, tuple[pa.Table, dict[tuple[str, int], int]]] = {}
        self._log_inode = 0
        self._offset = 0
        self._lines = 0

    # -- building

    @classmethod
    def read(cls, root: Path) -> HotIndex | None:
        """The index of the archive at ``root``; None when it has no base (an archive written
        before the index: see :func:`scan_index`).

        Raises TickFormatError naming the file and the line or column that is malformed.
        """
        path = index_path(root)
        try:
            with open(path, "rb") as handle:
                st = os.fstat(handle.fileno())
                raw = handle.read()
        except FileNotFoundError:
            return None
        except OSError as exc:
            raise TickFormatError(f"{path}: cannot read the hot index ({exc.strerror})") from None
        base, seq, skip = _open_base(path, raw)
        index = cls(root, base, FileStamp.from_stat(st), seq, skip)
        index._read_log()
        return index

    def refreshed(self) -> HotIndex | None:
        """This index brought up to date: the lines appended since it was read, or the whole
        index read again when the base or the log was replaced (None: the base is gone)."""
        try:
            stamp = FileStamp.of(index_path(self.root))
        except FileNotFoundError:
            return None
        if stamp != self._base_stamp:
            return HotIndex.read(self.root)
        try:
            st = os.stat(log_path(self.root))
        except FileNotFoundError:
            st = None
        if st is None:
            if self._log_inode:
                return HotIndex.read(self.root)
            return self
        if self._log_inode and (st.st_ino != self._log_inode or st.st_size < self._offset):
            return HotIndex.read(self.root)
        if st.st_size != self._offset or not self._log_inode:
            self._read_log()
        return self

    def _read_log(self) -> None:
        """Apply the log's complete lines after the offset read so far."""
        path = log_path(self.root)
        try:
            fd = fsio.open_state_file(path, os.O_RDONLY)
        except FileNotFoundError:
            return
        with open(fd, "rb") as handle:
            st = os.fstat(handle.fileno())
            if self._log_inode != st.st_ino:
                self._log_inode, self._offset, self._lines = st.st_ino, 0, 0
            handle.seek(self._offset)
            raw = handle.read()
        end = raw.rfind(b"\n") + 1
        skip_lines = self._skip.lines_in(raw, st.st_ino) if self._offset == 0 else 0
        for line in raw[:end].split(b"\n")[:-1]:
            self._lines += 1
            if self._lines <= skip_lines:
                continue
            self._seq += 1
            entry = _log_entry(line, path, self._lines, self._seq, self._lookup)
            self._history.append((self._seq, entry.key, self._lookup(entry.key)))
            self._log[entry.key] = entry
        self._offset += end

    # -- looking up

    @property
    def seq(self) -> int:
        """The number of the last line read."""
        return self._seq

    @property
    def mark(self) -> IndexMark:
        return IndexMark(self._seq, self._log_inode, self._offset)

    @property
    def stamp(self) -> tuple[Any, ...]:
        """What changes whenever the index does (base stamp, log inode and length read)."""
        return (self._base_stamp, self._log_inode, self._offset)

    def get(self, key: SymbolDayKey) -> IndexEntry | None:
        """The entry of ``key``, present or not; None when the index never had it."""
        return self._lookup(key)

    def present(self, key: SymbolDayKey) -> IndexEntry | None:
        """The entry of ``key`` when the hot tier holds its file now."""
        entry = self._lookup(key)
        return entry if entry is not None and entry.present else None

    def _lookup(self, key: SymbolDayKey) -> IndexEntry | None:
        found = self._log.get(key)
        if found is not None:
            return found
        if "_base" not in self.__dict__:
            return self._lookup_in_groups(key)
        row = self._row_of(key)
        if row is None:
            return None
        entry = self._decoded.get(row)
        if entry is None:
            entry = self._entries_of(row, row + 1)[0]
            self._decoded[row] = entry
        return entry

    def days(self, symbol: str) -> list[date]:
        """The days of ``symbol`` whose hot file the tier holds, sorted."""
        start, end = self._runs.get(symbol, (0, 0))
        present = self._present[start:end]
        days = {
            date.fromordinal(d + _EPOCH_ORDINAL)
            for d, ok in zip(self._days[start:end], present, strict=True)
            if ok
        }
        for (s, day), entry in self._log.items():
            if s == symbol:
                days.discard(day)
                if entry.present:
                    days.add(day)
        return sorted(days)

    def symbols(self) -> set[str]:
        """The symbols with at least one hot file."""
        out = {s for s, (a, b) in self._runs.items() if any(self._present[a:b])}
        changed = {s for s, _ in self._log}
        for symbol in changed:
            out.discard(symbol)
            if self.days(symbol):
                out.add(symbol)
        return out

    def entries(self, *, present_only: bool = True) -> list[IndexEntry]:
        """Every entry (those the hot tier holds, unless ``present_only`` is False), by symbol
        then date (one object per row: for whole-archive work)."""
        merged = {e.key: e for e in self._entries_of(0, self._base.num_rows)}
        merged.update(self._log)
        return [merged[k] for k in sorted(merged) if merged[k].present or not present_only]

    def changes_since(
        self, mark: IndexMark | None
    ) -> list[tuple[SymbolDayKey, IndexEntry | None, IndexEntry]] | None:
        """``(key, before, after)`` of every symbol-day a line after ``mark`` set: its entry at
        the mark (None: the index did not have it) and now; None when that cannot be told from
        the log (no mark, a mark of another history, or lines folded into the base since)."""
        if mark is None or mark.seq < self._base_seq or mark.seq > self._seq:
            return None
        before: dict[SymbolDayKey, IndexEntry | None] = {}
        for seq, key, entry in self._history:
            if seq > mark.seq and key not in before:
                before[key] = entry
        return [(key, before[key], self._log[key]) for key in sorted(before)]

    def records(self) -> dict[str, tuple[int, str]]:
        """``{hot file path: (size, sha256)}`` of every recorded entry, present or not."""
        return {
            e.rel: (e.size, e.sha256)
            for e in self.entries(present_only=False)
            if e.sha256 is not None and e.size is not None
        }

    @property
    def log_lines(self) -> int:
        return self._lines

    def to_table(self) -> pa.Table:
        """The index as a base table (the log applied), sorted: the base's rows the log did
        not change and the log's entries, in Arrow (no object per row of the base)."""
        base = self._base
        if not self._log:
            return base.select(SCHEMA.names).cast(SCHEMA)
        keys = pa.array([f"{s}\x00{d.isoformat()}" for s, d in self._log])
        named = pc.binary_join_element_wise(
            base["symbol"], pc.cast(base["date"], pa.string()), "\x00"
        )
        kept = base.filter(pc.invert(pc.is_in(named, keys)))
        table = pa.concat_tables(
            [kept.select(SCHEMA.names).cast(SCHEMA), _table(self._log.values())]
        )
        return table.sort_by([("symbol", "ascending"), ("date", "ascending")]).combine_chunks()

    # -- the base, decoded when first needed

    @cached_property
    def _base(self) -> pa.Table:
        """The whole base (whole-archive work, or a symbol's days); a lookup of a few
        symbol-days decodes only the row groups that may hold them (:meth:`_lookup_in_groups`)."""
        return _decode(index_path(self.root), self._parquet.read).combine_chunks()

    @cached_property
    def _bounds(self) -> tuple[list[str], list[tuple[str, int, int]], int] | None:
        """From the row groups' statistics: the first symbol of each group (sorted, as the
        base is), its (last symbol, first day, last day) as ordinals, and the last day of all;
        None when a group has none (every group is then read)."""
        meta = self._parquet.metadata
        symbol_col, date_col = SCHEMA.get_field_index("symbol"), SCHEMA.get_field_index("date")
        firsts: list[str] = []
        bounds: list[tuple[str, int, int]] = []
        for i in range(meta.num_row_groups):
            group = meta.row_group(i)
            symbols, days = group.column(symbol_col).statistics, group.column(date_col).statistics
            if symbols is None or days is None or not (symbols.has_min_max and days.has_min_max):
                return None
            if not (isinstance(symbols.min, str) and isinstance(days.min, date)):
                return None
            firsts.append(symbols.min)
            bounds.append((symbols.max, days.min.toordinal(), days.max.toordinal()))
        return firsts, bounds, max((hi for _, _, hi in bounds), default=0)

    def _lookup_in_groups(self, key: SymbolDayKey) -> IndexEntry | None:
        """The base's entry of ``key``, decoding only the row groups whose statistics (symbols
        and days) may hold it (a symbol-day newer than all of the base's: none at all)."""
        symbol, day = key
        wanted = day.toordinal()
        found = self._bounds
        if found is None:
            candidates: Iterable[int] = range(self._parquet.metadata.num_row_groups)
        else:
            firsts, bounds, newest = found
            if wanted > newest:
                return None
            candidates = []
            i = bisect.bisect_right(firsts, symbol) - 1
            while i >= 0 and bounds[i][0] >= symbol:  # sorted: the groups holding the symbol
                if bounds[i][1] <= wanted <= bounds[i][2]:
                    candidates.append(i)
                i -= 1
        for i in candidates:
            rows, where = self._group(i)
            row = where.get((symbol, wanted - _EPOCH_ORDINAL))
            if row is not None:
                return _entries(rows.slice(row, 1))[0]
        return None

    def _group(self, i: int) -> tuple[pa.Table, dict[tuple[str, int], int]]:
        """Row group ``i`` of the base, decoded, and its rows by (symbol, day number)."""
        group = self._groups.get(i)
        if group is None:
            rows = _decode(index_path(self.root), lambda: self._parquet.read_row_group(i))
            days = pc.cast(rows["date"], pa.int32()).to_pylist()
            symbols = rows["symbol"].to_pylist()
            where = {key: n for n, key in enumerate(zip(symbols, days, strict=True))}
            group = self._groups[i] = (rows, where)
        return group

    @cached_property
    def _runs(self) -> dict[str, tuple[int, int]]:
        rows = self._base
        if rows.num_rows == 0:
            return {}
        runs = pc.run_end_encode(rows["symbol"].combine_chunks())
        ends = runs.run_ends.to_pylist()
        return dict(
            zip(runs.values.to_pylist(), zip([0, *ends[:-1]], ends, strict=True), strict=True)
        )

    @cached_property
    def _days(self) -> list[int]:
        return pc.cast(self._base["date"], pa.int32()).to_pylist()

    @cached_property
    def _present(self) -> list[bool]:
        return self._base["present"].to_pylist()

    def _row_of(self, key: SymbolDayKey) -> int | None:
        symbol, day = key
        start, end = self._runs.get(symbol, (0, 0))
        if start == end:
            return None
        wanted = day.toordinal() - _EPOCH_ORDINAL
        row = bisect.bisect_left(self._days, wanted, start, end)
        return row if row < end and self._days[row] == wanted else None

    def _entries_of(self, start: int, stop: int) -> list[IndexEntry]:
        return _entries(self._base.slice(start, stop - start))


def _entries(rows: pa.Table) -> list[IndexEntry]:
    """One entry per row of a base table (its stamp None when a part of it is null)."""
    column = {name: rows[name].to_pylist() for name in SCHEMA.names}
    parts = ("device", "inode", "size", "mtime_ns", "ctime_ns")
    stamps = [
        None if None in s else FileStamp(*s) for s in zip(*map(column.get, parts), strict=True)
    ]
    return list(map(_entry, column["symbol"], column["date"], column["size"], column["sha256"],
                    stamps, column["present"], column["seq"]))  # fmt: skip


def _entry(symbol, day, size, digest, stamp, present, seq) -> IndexEntry:
    return IndexEntry(symbol, day, size, None if digest is None else digest.hex(), stamp,
                      present, seq)  # fmt: skip


_PARSED: dict[bytes, IndexEntry | SymbolDayKey] = {}
"""Log lines parsed in this process, by their bytes (a parse depends on nothing else): a
commit reads the log since the last fold again, and parses only the lines new since."""


def _log_entry(line: bytes, path: Path, number: int, seq: int, previous) -> IndexEntry:
    """The entry one log line sets (``previous(key)``: the entry before it, for a removal)."""
    parsed = _PARSED.get(line)
    if parsed is None:
        parsed = _parse_line(line, path, number)
        if len(_PARSED) >= 4 * FOLD_LINES:
            _PARSED.clear()
        _PARSED[line] = parsed
    if isinstance(parsed, IndexEntry):
        return IndexEntry(parsed.symbol, parsed.day, parsed.size, parsed.sha256, parsed.stamp,
                          True, seq)  # fmt: skip
    before = previous(parsed)
    if before is None:
        return IndexEntry(*parsed, None, None, None, False, seq)
    return IndexEntry(*parsed, before.size, before.sha256, before.stamp, False, seq)


def _parse_line(line: bytes, path: Path, number: int) -> IndexEntry | SymbolDayKey:
    """What one log line says: the entry of a file published (``seq`` 0), or the symbol-day
    of a file removed. Raises TickFormatError naming the line when it is malformed."""
    body = fsio.load_json(line, path, line=number, error=TickFormatError)
    where = f"{path}: line {number}"
    if not isinstance(body, dict) or not isinstance(body.get("path"), str):
        raise TickFormatError(f"{where}: expected an object with a path")
    key = key_of_rel(body["path"])
    if key is None:
        raise TickFormatError(
            f"{where}: {body['path']!r}: expected a hot file path "
            "(symbol=<S>/year=<YYYY>/month=<MM>/date=<YYYY-MM-DD>/part-0.parquet)"
        )
    if set(body) == {"path", "gone"} and body["gone"] is True:
        return key
    keys = set(body)
    if keys not in ({"path", "sha256", "size"}, {"path", "sha256", "size", "stamp"}):
        raise TickFormatError(f"{where}: expected an object with path, sha256 and size")
    digest, size = body["sha256"], body["size"]
    stamp = FileStamp.from_list(body.get("stamp")) if "stamp" in body else None
    if not (is_sha256_hex(digest) and _is_count(size)) or ("stamp" in body and stamp is None):
        raise TickFormatError(
            f"{where}: {body!r}: expected a path inside the archive root, a sha256 (hex) and "
            "a size (an int >= 0)"
        )
    return IndexEntry(*key, size, digest, stamp, True, 0)


def _is_count(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _decode(path: Path, read) -> pa.Table:
    """``read()`` of the base at ``path``; raises TickFormatError when it cannot be decoded."""
    try:
        return read()
    except (pa.ArrowException, OSError) as exc:
        raise TickFormatError(
            f"{path}: not a readable hot index ({exc}); rebuild it with rebuild-catalog"
        ) from None


class FoldedLog(NamedTuple):
    """The log a base folded: its inode, how many lines, their bytes' sha256 ("": an old base)."""

    inode: int
    lines: int
    sha256: str = ""

    def lines_in(self, raw: bytes, inode: int) -> int:
        """How many first lines of the log ``raw`` (read whole, of ``inode``) were folded."""
        end = 0
        for _ in range(self.lines if inode == self.inode else 0):
            end = raw.find(b"\n", end) + 1 or len(raw) + 1
        same = not self.sha256 or hashlib.sha256(raw[:end]).hexdigest() == self.sha256
        return self.lines if inode == self.inode and end <= len(raw) and same else 0


NOTHING_FOLDED = FoldedLog(0, 0)


def _open_base(path: Path, raw: bytes) -> tuple[pq.ParquetFile, int, FoldedLog]:
    """The base's file (its footer read and checked; its rows decoded when asked), the last
    line folded into it and the log it folded."""
    checked = {"page_checksum_verification": True}  # a flipped bit refused, never read
    parquet = _decode(path, lambda: pq.ParquetFile(owned_reader(raw), **checked))
    meta = (parquet.metadata.metadata or {}).get(METADATA_KEY.encode())
    body = None if meta is None else fsio.load_json(meta, path, error=TickFormatError)
    if (
        not isinstance(body, dict)
        or body.get("format") != INDEX_FORMAT
        or body.get("version") != INDEX_VERSION
        or not _is_count(body.get("seq"))
        or not _is_folded_log(body.get("log"))
    ):
        raise TickFormatError(
            f"{path}: metadata {METADATA_KEY}: expected format {INDEX_FORMAT!r}, version "
            f"{INDEX_VERSION}, seq and log; rebuild it with rebuild-catalog"
        )
    schema = _decode(path, lambda: parquet.schema_arrow)
    if schema.remove_metadata() != SCHEMA:
        raise TickFormatError(f"{path}: columns {schema.names}, expected {SCHEMA.names}")
    return parquet, body["seq"], FoldedLog(*body["log"])


def _is_folded_log(log: object) -> bool:
    """Whether ``log`` is a base's ``log``: ``[inode, lines]`` or ``[inode, lines, sha256]``."""
    ok = isinstance(log, list) and len(log) in (2, 3) and all(map(_is_count, log[:2]))
    return ok and (len(log) == 2 or is_sha256_hex(log[2]))


def _table(entries: Iterable[IndexEntry]) -> pa.Table:
    items = sorted(entries, key=lambda e: e.key)
    stamps = [e.stamp for e in items]
    return pa.table(
        {
            "symbol": [e.symbol for e in items],
            "date": [e.day for e in items],
            "sha256": [None if e.sha256 is None else bytes.fromhex(e.sha256) for e in items],
            "size": [e.size for e in items],
            "device": [None if s is None else s.device for s in stamps],
            "inode": [None if s is None else s.inode for s in stamps],
            "mtime_ns": [None if s is None else s.mtime_ns for s in stamps],
            "ctime_ns": [None if s is None else s.ctime_ns for s in stamps],
            "present": [e.present for e in items],
            "seq": [e.seq for e in items],
        },
        schema=SCHEMA,
    )


# --- writing (under the archive's lock) ---------------------------------------------------------


def write_base(root: Path, table: pa.Table, seq: int, log: FoldedLog) -> None:
    """Replace the base atomically with ``table`` (sorted, :data:`SCHEMA`), folded up to line
    ``seq``, the first ``log.lines`` lines of the log ``log`` names in it."""
    folded = list(log) if log.sha256 else list(log[:2])
    body = {"format": INDEX_FORMAT, "version": INDEX_VERSION, "seq": seq, "log": folded}
    table = table.replace_schema_metadata({METADATA_KEY: json.dumps(body, sort_keys=True)})
    sink = pa.BufferOutputStream()
    options = {"compression": "zstd", "use_dictionary": ["symbol"], "write_page_checksum": True}
    pq.write_table(table, sink, row_group_size=BASE_GROUP_ROWS, **options)
    fsio.refuse_linked_state(index_path(root))
    fsio.atomic_write_bytes(index_path(root), sink.getvalue().to_pybytes())


def fold(index: HotIndex) -> HotIndex:
    """Fold the log into a new base, then start an empty log (see the module notes)."""
    root = index.root
    write_base(root, index.to_table(), index.seq, _folded_now(index))
    fsio.refuse_linked_state(log_path(root))
    fsio.atomic_write_bytes(log_path(root), b"")
    folded = HotIndex.read(root)
    assert folded is not None
    return folded


def _folded_now(index: HotIndex) -> FoldedLog:
    """The log ``index`` read (its inode, lines and their sha256), as a fold records it."""
    if not index.log_lines:
        return FoldedLog(index._log_inode, 0)
    with open(fsio.open_state_file(log_path(index.root), os.O_RDONLY), "rb") as handle:
        folded = handle.read(index._offset)
    return FoldedLog(index._log_inode, index.log_lines, hashlib.sha256(folded).hexdigest())


def append_lines(root: Path, bodies: Iterable[Mapping[str, Any]]) -> None:
    """Append one line per body to the log and fsync it (a last line a crash cut short is cut
    off first). Raises LinkedStateFileError when the log is a symbolic link."""
    data = b"".join((json.dumps(b, sort_keys=True, separators=(",", ":")) + "\n").encode()
                    for b in bodies)  # fmt: skip
    if not data:
        return
    path = log_path(root)
    fd = fsio.open_state_file(path, os.O_RDWR | os.O_CREAT)
    with fsio.naming(path, path), open(fd, "r+b") as handle:  # a full disk names the file
        size = os.fstat(handle.fileno()).st_size
        if size:
            handle.seek(size - 1)
            if handle.read(1) != b"\n":
                handle.seek(0)
                raw = handle.read()
                handle.truncate(raw.rfind(b"\n") + 1)
        handle.seek(0, os.SEEK_END)
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())


def published_line(rel: str, size: int, sha256: str, stamp: FileStamp) -> dict[str, Any]:
    """The log line of a hot file just renamed into place."""
    return {"path": rel, "sha256": sha256, "size": size, "stamp": stamp.to_list()}


def gone_line(rel: str) -> dict[str, Any]:
    """The log line of a hot file just removed."""
    return {"path": rel, "gone": True}


def scan_index(
    root: Path, records: Mapping[str, tuple[int, str]] | None = None
) -> list[IndexEntry]:
    """The entries of the hot files on disk under ``root`` (a listing and a stat of each), with
    their records from ``records`` (``{path: (size, sha256)}``; None: unrecorded), plus the
    records of files not on disk (not present). For an archive without a base, and rebuilds.

    Raises TickFormatError for a partition folder whose name does not decode.
    """
    records = records or {}
    found: dict[SymbolDayKey, IndexEntry] = {}
    root = Path(root)
    prefix = root.as_posix().rstrip("/") + "/"
    for path in root.glob(HOT_GLOB):
        rel = path.as_posix()[len(prefix) :] if path.as_posix().startswith(prefix) else None
        key = None if rel is None else key_of_rel(rel)
        if key is None:
            raise TickFormatError(f"{path}: partition folder does not decode")
        try:
            stamp = FileStamp.of(path)
        except FileNotFoundError:
            continue  # removed while listing
        size, digest = records.get(rel, (None, None))
        found[key] = IndexEntry(*key, size, digest, stamp, True, 0)
    for rel, (size, digest) in records.items():
        key = key_of_rel(rel)
        if key is not None and key not in found:
            found[key] = IndexEntry(*key, size, digest, None, False, 0)
    return [found[k] for k in sorted(found)]


def build_base(root: Path, entries: Iterable[IndexEntry]) -> HotIndex:
    """Write a new base of ``entries`` and an empty log (numbering goes on from the old base's
    last line, when there was one); the index as written."""
    try:
        old = HotIndex.read(root)
    except TickFormatError:
        old = None  # a damaged base is what a rebuild replaces
    seq = 1 if old is None else old.seq + 1  # past every mark: the next version compares all
    write_base(root, _table(entries), seq, NOTHING_FOLDED)
    fsio.refuse_linked_state(log_path(root))
    fsio.atomic_write_bytes(log_path(root), b"")
    index = HotIndex.read(root)
    assert index is not None
    return index


def legacy_records(root: Path) -> dict[str, tuple[int, str]]:
    """The records of a log without a base (an archive written before the index): the last
    line of each path. Raises TickFormatError naming a malformed line."""
    path = log_path(root)
    raw = fsio.read_state_bytes(path)
    records: dict[str, tuple[int, str]] = {}
    if not raw:
        return records
    for number, line in enumerate(raw.split(b"\n")[:-1], start=1):
        entry = _log_entry(line, path, number, 0, lambda key: None)
        if entry.present and entry.sha256 is not None and entry.size is not None:
            records[entry.rel] = (entry.size, entry.sha256)
    return records


def ensure_index(root: Path) -> HotIndex:
    """The archive's index, its base built first when it has none (from a listing of the root
    and the records of its log: an archive written before the index); under the lock."""
    index = HotIndex.read(root)
    if index is not None:
        return index
    Path(root).mkdir(parents=True, exist_ok=True)
    return build_base(root, scan_index(root, legacy_records(root)))


def ensure_base(root: Path) -> None:
    """:func:`ensure_index` at the cost of one ``stat`` when the base exists (what a
    publication checks before appending its line); under the lock."""
    if not index_path(root).exists():
        ensure_index(root)


def fold_if_long(index: HotIndex) -> HotIndex:
    """:func:`fold` once the log holds :data:`FOLD_LINES` lines; under the lock."""
    return fold(index) if index.log_lines >= FOLD_LINES else index

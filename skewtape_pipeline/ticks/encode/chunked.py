"""Reading a tick file in bounded chunks: CSV through pyarrow's streaming CSV reader, Parquet
through ``ParquetFile.iter_batches``, every column as the file holds it (CSV: text).

Memory is bounded by the chunk size whatever the file's size: a CSV chunk is one block of the
streaming reader (``block_bytes``), a Parquet chunk ``batch_rows`` rows (a row group is decoded
whole). Each CSV chunk comes with the measured byte length of each of its rows' lines, read by
:class:`LineLengths` beside the CSV reader (the raw size of a symbol-day is the bytes of its
rows' lines). Failures are :class:`~skewtape_pipeline.errors.TickValidationError` naming the
file (and the row, for a line longer than a block, a last line without its newline, or a
Parquet text value that is not UTF-8),
never a reader's traceback; a reader's own words, which may quote the file's bytes, are kept
printable and short (:func:`~skewtape_pipeline.errors.reason`).
"""

from __future__ import annotations

import csv
import errno
import functools
import io
import os
import queue
import re
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pa_csv
import pyarrow.parquet as pq

from skewtape_pipeline.errors import TickValidationError, quoted, reason
from skewtape_pipeline.ticks.encode.zstd_framing import ZSTD_MAGIC

DEFAULT_BLOCK_BYTES = 16 * 2**20
"""Bytes of CSV per chunk (pyarrow's streaming reader's block): also the longest line a tick
CSV may have."""
HEADER_LIMIT_BYTES = 64 * 2**10
"""Longest header line of a tick CSV."""
_NEWLINE = pa.scalar(10, pa.uint8())


@dataclass
class ReadState:
    """How far a chunked read of a file has come (updated as each chunk is handed out).

    ``lines_measured`` turns False once rows and lines are found not to correspond one to one
    (blank lines, quoted newlines): the rows' line lengths are then not the raw size.
    """

    file_bytes: int = 0
    bytes_read: int = 0
    rows: int = 0
    lines_measured: bool = True


@dataclass(frozen=True)
class RawChunk:
    """One chunk of a file: its columns, the file's data row of its first row, and each row's
    line length in bytes (None for Parquet, or once lines stopped matching rows)."""

    table: pa.Table
    first_row: int
    row_bytes: pa.Array | None


_COMPRESSED = {b"\x1f\x8b": "gzip", ZSTD_MAGIC: "zstd", b"BZh": "bzip2",
               b"\xfd7zXZ\x00": "xz", b"PK\x03\x04": "zip"}  # fmt: skip
"""The magic bytes a compressed file starts with, and its compression."""


def csv_header(path: Path) -> list[str]:
    """The column names of a CSV file's first line (a UTF-8 byte-order mark before it is
    skipped, as the CSV reader skips it).

    Raises TickValidationError naming the file: unreadable, compressed (gzip, zstd, bzip2, xz,
    zip: named, to decompress first), empty, or a header line longer than
    :data:`HEADER_LIMIT_BYTES` (e.g. a file without newlines).
    """
    try:
        with open(path, "rb") as handle:
            first = handle.readline(HEADER_LIMIT_BYTES + 1)
        refuse_compressed(path, first)
        text = first.decode("utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise unreadable(path, exc) or TickValidationError(
            f"{path}: cannot read the CSV header: {reason(exc)}"
        ) from None
    if len(first) > HEADER_LIMIT_BYTES:
        raise TickValidationError(
            f"{path}: the header line is longer than {HEADER_LIMIT_BYTES} bytes (a file "
            "without newlines?); expected a header line of column names"
        )
    if not text.strip():
        raise TickValidationError(f"{path}: the file is empty; expected a header line")
    try:
        return next(csv.reader([text]))
    except csv.Error as exc:
        raise TickValidationError(f"{path}: cannot read the CSV header: {reason(exc)}") from None


def refuse_compressed(path: Path, start: bytes) -> None:
    """TickValidationError naming the file and its compression when the file's first bytes
    ``start`` are a compressed file's (:data:`_COMPRESSED`): read as CSV, it would be refused
    as bytes that are not UTF-8 or rows of the wrong width, not said to be compressed."""
    packed = next((name for magic, name in _COMPRESSED.items() if start.startswith(magic)), "")
    if packed:
        raise TickValidationError(
            f"{path}: a {packed}-compressed file; decompress it first and give the CSV"
        )


class LineLengths:
    """Byte length (newline included) of each line of a file after its first ``skip_lines``,
    read in blocks of ``block_bytes`` only as far as they are asked for.

    ``measured`` turns False on an empty line (the CSV reader skips it, so rows and lines no
    longer correspond; an empty CRLF line is found at the end, as a line left over).
    ``position`` is the bytes of the file covered by the lines taken.
    """

    def __init__(self, path: Path, *, skip_lines: int, block_bytes: int = 2**20) -> None:
        self._handle = pa.OSFile(str(path))
        self._block_bytes = block_bytes
        self._pending: list[pa.Array] = []
        self._available = 0
        self._partial = 0
        self._eof = False
        self._taken = 0
        self.measured = True
        self.position = 0
        if skip_lines:
            skipped = self.take(skip_lines)
            self._taken = 0
            if skipped is None:
                self.measured = False

    def close(self) -> None:
        self._handle.close()

    def take(self, count: int) -> pa.Array | None:
        """The next ``count`` line lengths (int64), or None once fewer lines than rows remain
        or ``measured`` turned False."""
        while self._available < count and not self._eof:
            self._read_block()
        if self._available < count:
            self.measured = False
        if not self.measured:
            return None
        pending = pa.concat_arrays(self._pending) if len(self._pending) != 1 else self._pending[0]
        taken, rest = pending.slice(0, count), pending.slice(count)
        self._pending, self._available = [rest], len(rest)
        self._taken += count
        self.position += int(pc.sum(taken).as_py() or 0)
        return taken

    def exhausted(self) -> bool:
        """True when no line is left after those taken (reads to the end of the file)."""
        while not self._eof:
            self._read_block()
        return self._available == 0

    def first_longer_than(self, limit: int) -> int | None:
        """The 0-based index (counted from the first line after the skipped ones) of the first
        line not yet taken that is longer than ``limit`` bytes, or None."""
        seen = 0
        while True:
            for lengths in self._pending:
                long = pc.indices_nonzero(pc.greater(lengths, limit))
                if len(long):
                    return self._taken + seen + long[0].as_py()
                seen += len(lengths)
            if self._partial > limit or self._eof:
                return self._taken + seen if self._partial > limit else None
            self._pending = [pa.concat_arrays(self._pending)] if self._pending else []
            seen = 0
            self._read_block()

    def _read_block(self) -> None:
        data = self._handle.read_buffer(self._block_bytes)
        if not len(data):
            self._eof = True
            if self._partial:
                self._push(pa.array([self._partial], pa.int64()))
                self._partial = 0
            return
        octets = pa.Array.from_buffers(pa.uint8(), len(data), [None, data])
        ends = pc.cast(pc.indices_nonzero(pc.equal(octets, _NEWLINE)), pa.int64())
        if len(ends) == 0:
            self._partial += len(data)
            return
        first = pa.array([ends[0].as_py() + 1 + self._partial], pa.int64())
        lengths = pa.concat_arrays(
            [first, pc.subtract(ends.slice(1), ends.slice(0, len(ends) - 1))]
        )
        self._partial = len(data) - 1 - ends[len(ends) - 1].as_py()
        if pc.min(lengths).as_py() <= 1:
            self.measured = False  # an empty line: the CSV reader skips it
        self._push(lengths)

    def _push(self, lengths: pa.Array) -> None:
        self._pending.append(lengths)
        self._available += len(lengths)


def csv_chunks(
    path: Path,
    *,
    names: list[str],
    header_lines: int,
    state: ReadState,
    block_bytes: int = DEFAULT_BLOCK_BYTES,
) -> Iterator[RawChunk]:
    """The file's rows as text columns ``names``, one chunk per block of the streaming reader,
    each with its rows' line lengths; ``state`` follows the read.

    Raises TickValidationError naming the file: compressed (:func:`refuse_compressed`), not
    readable as CSV, a line longer than ``block_bytes`` (naming its row), or a last line without
    its newline (naming its row; once every row before it was handed out): a file cut short
    mid-line, whose last value may be cut short too, is never read as whole.
    """
    if not header_lines:  # a header's reader refused it already (csv_header)
        with open(path, "rb") as raw:
            refuse_compressed(path, raw.read(8))
    lines = LineLengths(path, skip_lines=header_lines, block_bytes=block_bytes)
    state.bytes_read = lines.position
    try:
        reader = _open_csv(path, names=names, header_lines=header_lines, block_bytes=block_bytes)
        while True:
            try:
                batch = reader.read_next_batch()
            except StopIteration:
                break
            if batch.num_rows == 0:
                continue
            row_bytes = lines.take(batch.num_rows) if state.lines_measured else None
            state.lines_measured = lines.measured
            chunk = RawChunk(pa.Table.from_batches([batch]), state.rows, row_bytes)
            state.rows += batch.num_rows
            state.bytes_read = lines.position if lines.measured else state.bytes_read
            yield chunk
        if state.lines_measured and not lines.exhausted():
            state.lines_measured = False  # quoted newlines: more lines than rows
        if state.rows and not _ends_with_newline(path):
            raise TickValidationError(
                f"{path}: its last line does not end with a newline: the file looks cut short "
                "(a copy or download that did not finish), and its last value may be too; "
                "if the file is whole, end it with a newline",
                row=state.rows - 1,
            )
        state.bytes_read = state.file_bytes
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(path, exc) or _csv_error(
            path, exc, lines, state.rows, block_bytes, len(names), header_lines
        ) from None
    finally:
        lines.close()


def _open_csv(
    path: Path, *, names: list[str], header_lines: int, block_bytes: int
) -> pa_csv.CSVStreamingReader:
    return pa_csv.open_csv(
        path,
        read_options=pa_csv.ReadOptions(
            column_names=names, skip_rows=header_lines, block_size=block_bytes
        ),
        convert_options=pa_csv.ConvertOptions(
            column_types={name: pa.string() for name in names},
            strings_can_be_null=False,
        ),
    )


def _csv_error(
    path: Path,
    exc: Exception,
    lines: LineLengths,
    rows_read: int,
    block_bytes: int,
    width: int,
    header_lines: int,
) -> TickValidationError:
    """A reader's failure as TickValidationError: a line longer than a block names its row, and
    so does a row of more or fewer fields than the header's ``width``."""
    if "straddl" in str(exc) or "block size" in str(exc):
        row = lines.first_longer_than(block_bytes)
        return TickValidationError(
            f"{path}: a line is longer than {block_bytes} bytes, the longest line the streaming "
            "reader takes (a line without its newline?)",
            row=rows_read if row is None else row,
        )
    row, refused = None, None
    if f"Expected {width} columns" in str(exc):
        refused = functools.partial(_width_other_than, width)
    elif "invalid UTF8" in str(exc):
        refused = _not_utf8
    if refused is not None:
        exact = lines.measured and not _quote_before(path, lines.position)
        start = (rows_read, lines.position) if exact else (0, None)
        row = _first_row(path, refused, header_lines, *start)
    return TickValidationError(f"{path}: cannot read as CSV: {reason(exc)}", row=row)


def _ends_with_newline(path: Path) -> bool:
    """Whether the file's last byte ends a line (``\\n``, or a lone ``\\r``): a file whose last
    line lacks it was most likely cut short mid-line, a value of that line with it (a quantity
    ``1.997`` read as ``1.99``)."""
    with open(path, "rb") as raw:
        raw.seek(-1, os.SEEK_END)
        return raw.read(1) in (b"\n", b"\r")


def _quote_before(path: Path, offset: int) -> bool:
    """Whether the file's first ``offset`` bytes hold a double quote (a quoted field may hold a
    newline: its lines and rows then part ways)."""
    with open(path, "rb") as raw:
        while offset > 0:
            block = raw.read(min(offset, DEFAULT_BLOCK_BYTES))
            if not block:
                return False
            if b'"' in block:
                return True
            offset -= len(block)
    return False


def _width_other_than(width: int, record: list[str]) -> bool:
    return len(record) != width


_NOT_UTF8 = re.compile("[\udc80-\udcff]")
"""What bytes that are not UTF-8 are read as (``surrogateescape``)."""


def _not_utf8(record: list[str]) -> bool:
    return any(_NOT_UTF8.search(field) for field in record)


def _first_row(
    path: Path,
    refused: Callable[[list[str]], bool],
    header_lines: int,
    row: int,
    offset: int | None,
) -> int | None:
    """The first row, from ``row`` at byte ``offset`` (None: the first after the header), whose
    fields are ``refused`` (bytes that are not UTF-8 read as surrogates ``\\udc80``-``\\udcff``),
    read with Python's CSV reader (pyarrow's streaming reader does not say which row it
    refused); None when none is found."""
    with open(path, "rb") as raw:
        if offset is None:
            for _ in range(header_lines):
                raw.readline()
        else:
            raw.seek(offset)
        text = io.TextIOWrapper(raw, encoding="utf-8", errors="surrogateescape", newline="")
        try:
            for record in csv.reader(text):
                if not record:  # an empty line, which pyarrow skips too
                    continue
                if refused(record):
                    return row
                row += 1
        except csv.Error:  # a field past Python's limit: no row to name
            return None
    return None


def open_parquet(path: Path) -> pq.ParquetFile:
    """The Parquet file at ``path`` (TickValidationError naming it when it is not one)."""
    try:
        return pq.ParquetFile(path)
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(path, exc) or TickValidationError(
            f"{path}: cannot read as Parquet: {reason(exc)}"
        ) from None


def parquet_chunks(
    file: pq.ParquetFile,
    path: Path,
    *,
    state: ReadState,
    batch_rows: int,
    columns: list[str] | None = None,
) -> Iterator[RawChunk]:
    """The rows of ``file`` (``columns``, default all) in chunks of at most ``batch_rows``;
    ``state`` follows the read (bytes read pro rata of the rows: Parquet has no line per row).

    Raises TickValidationError naming the file: not readable as Parquet, or a value of a text
    or bytes column that is not UTF-8 (naming its row and column: :func:`check_utf8`).
    """
    total = max(file.metadata.num_rows, 1)
    state.lines_measured = False
    try:
        for batch in file.iter_batches(batch_size=batch_rows, columns=columns):
            chunk = RawChunk(pa.Table.from_batches([batch]), state.rows, None)
            check_utf8(chunk.table, path, state.rows)
            state.rows += batch.num_rows
            state.bytes_read = state.file_bytes * state.rows // total
            yield chunk
    except (OSError, pa.ArrowException) as exc:
        raise unreadable(path, exc) or TickValidationError(
            f"{path}: cannot read as Parquet: {reason(exc)}"
        ) from None


_TEXT_TYPES = {
    pa.string(): pa.string(),
    pa.large_string(): pa.large_string(),
    pa.string_view(): pa.string_view(),
    pa.binary(): pa.string(),
    pa.large_binary(): pa.large_string(),
    pa.binary_view(): pa.string_view(),
}
"""The text type each text or bytes type is viewed as to check its values are UTF-8."""


def check_utf8(table: pa.Table, path: Path, first_row: int) -> None:
    """Refuse (TickValidationError naming the file, the row counted from ``first_row`` and the
    column, quoting the bytes) the first value of a text or bytes column of ``table`` that is
    not UTF-8 text: every later step reads these columns as text. Other columns pass."""
    for name, column in zip(table.column_names, table.columns, strict=True):
        row = first_row
        for array in column.chunks:
            bad = first_not_utf8(array)
            if bad is not None:
                value = quoted(_plain(array).slice(bad, 1).cast(pa.large_binary())[0].as_py())
                raise TickValidationError(
                    f"{path}: {name} {value} is not UTF-8 text", row=row + bad, field=name
                )
            row += len(array)


def first_not_utf8(array: pa.Array) -> int | None:
    """The index of the first value of a text or bytes ``array`` (or one dictionary-encoded)
    that is not valid UTF-8; None when each is, or for an array of another type."""
    if pa.types.is_dictionary(array.type):
        if first_not_utf8(array.dictionary) is None:
            return None
        array = _plain(array)
    if array.type not in _TEXT_TYPES or _is_utf8(array):
        return None
    low, high = 0, len(array)  # the first value that is not UTF-8 is in [low, high)
    while high - low > 1:
        middle = (low + high) // 2
        low, high = (middle, high) if _is_utf8(array.slice(low, middle - low)) else (low, middle)
    return low


def _plain(array: pa.Array) -> pa.Array:
    return array.dictionary_decode() if pa.types.is_dictionary(array.type) else array


def _is_utf8(array: pa.Array) -> bool:
    """Whether each value of a text or bytes array is UTF-8 (a text array's full validation
    checks it)."""
    try:
        array.view(_TEXT_TYPES[array.type]).validate(full=True)
    except pa.ArrowInvalid:
        return False
    return True


REFUSED_ERRNOS = frozenset({errno.ENOENT, errno.ENOTDIR, errno.EISDIR})
"""Failures to open an input that are a wrong argument (no such file, a folder given), refused
as input (exit 2); any other OS error reading it is the system's (exit 1)."""


def unreadable(path: Path, exc: BaseException) -> OSError | None:
    """The OS error of reading the input ``path`` (a permission refused, an I/O error) as one
    OSError naming it, which the command line reports as an OS error (exit 1); None for what is
    the input's fault (a missing file, a folder, bytes that are not the format: refused)."""
    if not isinstance(exc, OSError) or exc.errno is None or exc.errno in REFUSED_ERRNOS:
        return None
    return OSError(exc.errno, f"cannot read the input ({os.strerror(exc.errno)})", str(path))


_END = object()
T = TypeVar("T")


def read_ahead(items: Iterator[T], *, depth: int) -> Iterator[T]:
    """``items``, produced by a thread up to ``depth`` items ahead of the consumer (the reading
    of the next chunks overlaps the work on this one). An error of ``items`` is raised where it
    happened in the sequence; closing the iterator stops the thread."""
    handoff: queue.Queue = queue.Queue(maxsize=depth)
    stop = threading.Event()

    def put(entry: tuple) -> bool:
        while not stop.is_set():
            try:
                handoff.put(entry, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def produce() -> None:
        try:
            for item in items:
                if not put((item, None)):
                    return
            put((_END, None))
        except BaseException as exc:  # handed to the consumer, raised there
            put((_END, exc))

    thread = threading.Thread(target=produce, name="read-ahead", daemon=True)
    thread.start()
    try:
        while True:
            item, error = handoff.get()
            if item is _END:
                if error is not None:
                    raise error
                return
            yield item
    finally:
        stop.set()
        thread.join()

"""A compaction planned: a source read into sorted symbol-days within a memory budget.

The run's options (:class:`CompactionRun`: symbol filter, memory limit, progress callbacks;
:class:`SourceFacts` measured of an input; :class:`SymbolDayWrite`, one symbol-day written on
its own), the input read in chunks (:func:`plan_stream`) and routed to symbol-days, the rest
spilled to the archive's staging folder (``store.spill``), and each symbol-day sorted
explicitly (:func:`sort_batch`, counted). Writes nothing into the archive: ``ops.compact``
carries the plan out.
"""

from __future__ import annotations

import itertools
from collections import defaultdict, deque
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from datetime import date, datetime, timedelta

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline.errors import ConfigError, TickValidationError
from skewtape_pipeline.ticks.archive.store.layout import (
    encode_symbol,
)
from skewtape_pipeline.ticks.archive.store.spill import (
    MARKER_COLUMNS,
    Piece,
    SymbolDayRouter,
)
from skewtape_pipeline.ticks.encode.chunked import DEFAULT_BLOCK_BYTES, read_ahead
from skewtape_pipeline.ticks.encode.exact_columns import MAX_UNITS, first_true, rescaled_units
from skewtape_pipeline.ticks.encode.model import (
    SCHEMA_FIELDS,
    SchemaRequest,
    TickBatch,
    TickSchema,
    widest_schema,
)
from skewtape_pipeline.ticks.encode.options import DEFAULT_ENCODING, TickEncoding
from skewtape_pipeline.ticks.encode.report import (
    RAW_SIZE_BASES,
    RAW_SIZE_BASIS_SOURCE_FILE,
    RAW_SIZE_BASIS_SOURCE_ROWS,
    RAW_SIZE_BASIS_SUPPLIED,
    check_raw_size,
)
from skewtape_pipeline.ticks.encode.sources import (
    SourceTicks,
    TickStream,
)
from skewtape_pipeline.ticks.encode.validate import (
    is_sorted,
    validate_values,
)

_DAY_KEY_SHIFT = 2**20
"""Days since 1970 fit in +-2**19 for any int64 nanosecond timestamp."""


_EPOCH = date(1970, 1, 1)


@dataclass(frozen=True)
class PlannedSymbolDay:
    """One symbol-day ready to write: sorted, validated, with its age and measured raw size."""

    symbol: str
    day: date
    batch: TickBatch
    reordered_ticks: int
    age_days: int
    raw_size_bytes: int | None
    raw_size_basis: str | None


def sort_batch(batch: TickBatch) -> tuple[TickBatch, int]:
    """Sort by timestamp (stable: equal timestamps keep their order) and count the ticks moved.

    Returns ``(sorted_batch, reordered_ticks)`` where ``reordered_ticks`` is the number of rows
    whose position changed (0 and the same batch when it was already sorted).
    """
    if is_sorted(batch):
        return batch, 0
    order = pc.sort_indices(batch.ts_ns)
    moved = pc.not_equal(order, _positions(batch.ts_ns))
    return batch.take(order), int(pc.sum(pc.cast(moved, pa.int64())).as_py())


def _positions(column: pa.Array) -> pa.Array:
    """0 .. len(column) - 1 as uint64 (vectorized)."""
    return pc.indices_nonzero(pc.or_(pc.is_valid(column), pc.is_null(column)))


DEFAULT_MEMORY_LIMIT = 2 * 2**30
"""Bytes a compaction may use by default (``--memory-limit``; the Dagster resource's
``memory_limit``)."""


MIN_MEMORY_LIMIT = 2**20


HELD_SHARE = 2
"""Routed rows may hold 1/HELD_SHARE of the memory limit; the rest is for reading a chunk and
encoding one symbol-day."""


def check_memory_limit(limit: object) -> int:
    """Return ``limit`` if it is an int of at least :data:`MIN_MEMORY_LIMIT` bytes, else raise
    ConfigError."""
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < MIN_MEMORY_LIMIT:
        raise ConfigError(
            f"memory_limit = {limit!r}: expected a number of bytes of at least "
            f"{MIN_MEMORY_LIMIT} (1 MiB)"
        )
    return limit


def block_bytes_for(memory_limit: int) -> int:
    """The read chunk for a memory limit: 1/128 of it, within 1 MiB .. 16 MiB."""
    return max(2**20, min(DEFAULT_BLOCK_BYTES, check_memory_limit(memory_limit) // 128))


READ_AHEAD_CHUNKS = 2
"""Chunks read ahead of their conversion (in a reading thread), itself a chunk ahead of the
routing: reading, converting and routing run side by side."""


@dataclass(frozen=True)
class CompactionRun:
    """How one compaction run goes (kept apart from how its ticks are encoded,
    :class:`~skewtape_pipeline.ticks.encode.options.TickEncoding`): ``symbol`` names the
    instrument of an input without a symbol column, or selects that symbol's rows of one that
    has one (None: every symbol); ``memory_limit`` is the bytes it may use (routed rows beyond
    half of it are spilled to the archive's staging folder); ``on_read(bytes_read, file_bytes,
    ticks)`` follows the reading and ``on_progress(done, total)`` the symbol-days written.

    Validated when built: ConfigError naming the field.
    """

    symbol: str | None = None
    memory_limit: int = DEFAULT_MEMORY_LIMIT
    on_progress: Callable[[int, int], None] | None = None
    on_read: ReadProgress | None = None

    def __post_init__(self) -> None:
        if self.symbol is not None and not isinstance(self.symbol, str):
            raise ConfigError(f"symbol = {self.symbol!r}: expected a string")
        check_memory_limit(self.memory_limit)
        for name in ("on_progress", "on_read"):
            if getattr(self, name) is not None and not callable(getattr(self, name)):
                raise ConfigError(f"{name} = {getattr(self, name)!r}: expected a callable")


DEFAULT_RUN = CompactionRun()
"""Every symbol, :data:`DEFAULT_MEMORY_LIMIT`, no progress reported."""


def _checked_basis(raw_size_bytes: int | None, raw_size_basis: str | None) -> str | None:
    """The basis of a supplied raw size (default ``supplied``); ConfigError for a bad size or
    basis, or a basis without a size."""
    if raw_size_bytes is not None:
        check_raw_size(raw_size_bytes)
    basis = raw_size_basis or (RAW_SIZE_BASIS_SUPPLIED if raw_size_bytes is not None else None)
    if basis is not None and (basis not in RAW_SIZE_BASES or raw_size_bytes is None):
        raise ConfigError(
            f"raw_size_basis = {raw_size_basis!r}: expected one of {', '.join(RAW_SIZE_BASES)}, "
            "together with raw_size_bytes"
        )
    return basis


@dataclass(frozen=True)
class SourceFacts:
    """What was measured of the input a symbol-day's batch came from: ``raw_size_bytes``, the
    size of what the archive replaces (None: the canonical CSV is serialized and measured),
    ``raw_size_basis``, what that size is (one of ``RAW_SIZE_BASES``; default ``supplied``
    with a size), and ``reordered_ticks``, the ticks sorting moved (:func:`sort_batch`).

    Validated when built: ConfigError naming the field.
    """

    raw_size_bytes: int | None = None
    raw_size_basis: str | None = None
    reordered_ticks: int = 0

    def __post_init__(self) -> None:
        _checked_basis(self.raw_size_bytes, self.raw_size_basis)
        count = self.reordered_ticks
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ConfigError(f"reordered_ticks = {count!r}: expected a count >= 0")

    @property
    def basis(self) -> str | None:
        """``raw_size_basis``; ``supplied`` for a size given without one."""
        return _checked_basis(self.raw_size_bytes, self.raw_size_basis)


NO_SOURCE_FACTS = SourceFacts()
"""Nothing measured: the raw size is the canonical CSV's, no tick reordered."""


@dataclass(frozen=True)
class SymbolDayWrite:
    """What one symbol-day written on its own is: its ``symbol``, its ``day`` (UTC), its
    ``age_days`` (the tier follows from it under the archive's policy), the :class:`SourceFacts`
    measured of its input (``source``) and how it is encoded (``encoding``). Checked by the
    compaction that writes it (``ops.compact.compact_symbol_day``), before anything is written.
    """

    symbol: str
    day: date
    age_days: int
    source: SourceFacts = NO_SOURCE_FACTS
    encoding: TickEncoding = DEFAULT_ENCODING


@dataclass
class _ChunkFacts:
    """What a chunk's conversion chose, to widen its rows to the final schema later."""

    index: int
    schema: TickSchema
    largest_price: int
    largest_quantity: int


@dataclass
class StreamPlan:
    """Every symbol-day of a stream, read, converted and validated, held by ``router``:
    ``keys`` in (symbol, day) order, all at ``schema``. :meth:`symbol_day` builds one whole."""

    stream: TickStream
    router: SymbolDayRouter
    schema: TickSchema
    as_of: date
    labels: dict[int, tuple[str, date]]
    raw_bytes: dict[int, int]
    measured: bool
    whole_file: bool

    @property
    def keys(self) -> list[int]:
        return sorted(self.labels, key=self.labels.__getitem__)

    def symbol_day(self, key: int) -> PlannedSymbolDay:
        """Symbol-day ``key``: its pieces widened to the schema, in file order, sorted by time
        (stable, the moved ticks counted), with its age and measured raw size."""
        symbol, day = self.labels[key]
        batch, reordered = sort_batch(self._gathered(key))
        raw_size, basis = self._raw_size(key)
        return PlannedSymbolDay(
            symbol=symbol,
            day=day,
            batch=batch,
            reordered_ticks=reordered,
            age_days=(self.as_of - day).days,
            raw_size_bytes=raw_size,
            raw_size_basis=basis,
        )

    def _gathered(self, key: int) -> TickBatch:
        """The symbol-day's pieces in the order they were read, at the plan's schema."""
        columns: dict[str, list[pa.Array]] = {name: [] for name in self.router.schema.names}
        for piece in self.router.pieces(key):
            for name in columns:
                column = piece.batch.column(name)
                if name in ("price", "quantity"):
                    column = rescaled_units(
                        column, getattr(piece, f"{name}_scale"),
                        getattr(self.schema, f"{name}_scale"), name,
                    )  # fmt: skip
                columns[name].append(column)
        whole = {name: pa.concat_arrays(parts) for name, parts in columns.items()}
        for name in MARKER_COLUMNS.names:  # None when no row is marked, as a whole batch has
            if not pc.any(whole[name]).as_py():
                whole[name] = None
        return TickBatch(
            price_scale=self.schema.price_scale,
            quantity_scale=self.schema.quantity_scale,
            timestamp_unit=self.schema.timestamp_unit,
            **whole,
        )

    def _raw_size(self, key: int) -> tuple[int | None, str | None]:
        """The whole file's bytes when it holds this one symbol-day and nothing else, else the
        bytes of its rows' lines when every line was measured, else (None, None): measured
        later from the canonical CSV."""
        if self.whole_file and self.stream.file_bytes:
            return self.stream.file_bytes, RAW_SIZE_BASIS_SOURCE_FILE
        if self.measured and self.raw_bytes.get(key):
            return self.raw_bytes[key], RAW_SIZE_BASIS_SOURCE_ROWS
        return None, None


@dataclass(frozen=True)
class PlanOptions:
    """What :func:`plan_stream` converts with: ``as_of`` (no tick may be dated after it),
    the ``encoding``, the ``symbol`` (see :class:`CompactionRun`) and ``archive``, the schema
    the archive records (None: a new archive). Raises ConfigError when built with an
    ``as_of`` that is not a date or an ``encoding`` that is not a TickEncoding."""

    as_of: date
    encoding: TickEncoding = DEFAULT_ENCODING
    symbol: str | None = None
    archive: TickSchema | None = None

    def __post_init__(self) -> None:
        _check_date(self.as_of, name="as_of")
        if not isinstance(self.encoding, TickEncoding):
            raise ConfigError(f"encoding = {self.encoding!r}: expected a TickEncoding")


def plan_stream(
    stream: TickStream,
    options: PlanOptions,
    router: SymbolDayRouter,
    *,
    on_read: ReadProgress | None = None,
    allow_empty: bool = False,
) -> StreamPlan:
    """Read ``stream`` chunk by chunk: convert each chunk, validate its rows and route them to
    their symbol-days (UTC) in ``router``, measuring each symbol-day's source bytes. Writes
    nothing to the archive (``router`` may spill to its staging folder).

    A unit or scale given as None is detected per chunk; the data's is the widest over the
    chunks, widened to ``options.archive`` (chunks read at a smaller scale are widened when a
    symbol-day is built). ``symbol`` names the instrument of a source without a ``symbol``
    column, or selects one symbol from a source that has one.

    Raises
    ------
    ArchiveSchemaError
        The data needs a finer unit or a larger scale than ``archive`` holds.
    ConfigError
        A bad scale, timestamp unit or vocabulary, no symbol at all, ``as_of`` not a date.
    TickValidationError, PrecisionLossError
        The first invalid row in file order (named by its file row; a timestamp finer than
        ``timestamp_unit`` is a PrecisionLossError), no ticks (unless ``allow_empty``: a plan
        without symbol-days), or ticks dated after ``as_of``.
    """
    routing = _Routing(options, router)
    _route_stream(stream, routing, on_read)
    if routing.ticks == 0 and not allow_empty:
        _refuse_empty(stream, routing)
    request = options.encoding.schema
    schema = request.resolve(widest_schema([f.schema for f in routing.facts]), options.archive)
    _check_widened(stream, options, routing.facts, schema)
    return StreamPlan(
        stream=stream,
        router=router,
        schema=schema,
        as_of=options.as_of,
        labels=routing.labels,
        raw_bytes=routing.raw_bytes,
        measured=stream.state.lines_measured and routing.measured,
        whole_file=len(routing.labels) == 1 and stream.state.rows == routing.ticks,
    )


def _route_stream(stream: TickStream, routing: _Routing, on_read: ReadProgress | None) -> None:
    """Convert each chunk of ``stream`` in a thread of its own, :data:`READ_AHEAD_CHUNKS` read
    ahead, and route the converted chunks in file order, reporting each to ``on_read``. The
    first error of any step is raised once the chunks before it were routed."""

    def route_next() -> None:
        routing.route(*pending.popleft().result())
        if on_read is not None:
            state = stream.state
            on_read(state.bytes_read, state.file_bytes, routing.ticks)

    pending: deque[Future] = deque()
    with ThreadPoolExecutor(max_workers=1) as converter:
        for chunk in read_ahead(stream.chunks(), depth=READ_AHEAD_CHUNKS):
            pending.append(converter.submit(routing.convert, chunk))
            while len(pending) > 1:
                route_next()
        while pending:
            route_next()


def _refuse_empty(stream: TickStream, routing: _Routing) -> None:
    """Raise TickValidationError for a stream that routed no tick, naming the symbol that
    selected none when one did."""
    where = stream.path or "input"
    if routing.selecting:
        raise TickValidationError(
            f"{where}: no ticks of symbol {routing.options.symbol!r}", field="symbol"
        )
    raise TickValidationError(f"{where}: there are no ticks to compact")


class _Routing:
    """The state of one :func:`plan_stream`: symbols seen, symbol-days, their measured bytes."""

    def __init__(self, options: PlanOptions, router: SymbolDayRouter) -> None:
        self.options, self.router = options, router
        self.symbol_ids: dict[str, int] = {}
        self.labels: dict[int, tuple[str, date]] = {}
        self.raw_bytes: dict[int, int] = defaultdict(int)
        self.facts: list[_ChunkFacts] = []
        self.ticks = 0
        self.measured = True
        self.selecting = False
        self.widest: TickSchema | None = None
        self.chunks = 0

    def convert(self, chunk: SourceTicks) -> tuple[SourceTicks, pa.Array, TickBatch | None]:
        """The chunk's selected rows, their symbols and their validated batch (None: no row);
        runs a chunk ahead of :meth:`route`, in another thread."""
        self.selecting = self.options.symbol is not None and chunk.symbols is not None
        chunk, symbols = _select_symbol(chunk, self.options.symbol)
        if chunk.table.num_rows == 0:
            return chunk, symbols, None
        return chunk, symbols, self._converted(chunk)

    def route(self, chunk: SourceTicks, symbols: pa.Array, batch: TickBatch | None) -> None:
        """Route a converted chunk's rows to their symbol-days (chunks in file order)."""
        index, self.chunks = self.chunks, self.chunks + 1
        if batch is None:
            return
        days = utc_days(batch.ts_ns)
        self._check_not_after(chunk, symbols, days)
        keys = pc.add(
            pc.multiply(self._symbol_ids(chunk, symbols), _DAY_KEY_SHIFT),
            pc.add(days, _DAY_KEY_SHIFT // 2),
        )
        self._route_rows(batch, keys, chunk.row_bytes)
        self.facts.append(_chunk_facts(index, batch))
        self.widest = widest_schema([self.widest or batch.schema, batch.schema])
        self.ticks += len(batch)

    def _converted(self, chunk: SourceTicks) -> TickBatch:
        """The chunk converted at the widest schema of the chunks before it where the data
        holds it (one exact conversion, no detection pass), else at its own detected schema.
        The widest schema over the chunks is the same either way."""
        if self.widest is None:
            return _chunk_batch(chunk, self.options)
        hinted = _hinted(self.options, self.widest)
        if hinted == self.options:
            return _chunk_batch(chunk, self.options)
        try:
            return _chunk_batch(chunk, hinted)
        except TickValidationError:  # finer than the hint, or invalid: its own schema decides
            return _chunk_batch(chunk, self.options)

    def _symbol_ids(self, chunk: SourceTicks, symbols: pa.Array) -> pa.Array:
        encoded = pc.dictionary_encode(symbols)
        ids = []
        for name in encoded.dictionary.to_pylist():
            if name not in self.symbol_ids:
                try:
                    encode_symbol(name)
                except TickValidationError as exc:
                    raise chunk.located(TickValidationError(exc.detail, field=exc.field)) from None
                self.symbol_ids[name] = len(self.symbol_ids)
            ids.append(self.symbol_ids[name])
        return pc.take(pa.array(ids, pa.int64()), encoded.indices)

    def _check_not_after(self, chunk: SourceTicks, symbols: pa.Array, days: pa.Array) -> None:
        limit = (self.options.as_of - _EPOCH).days
        if pc.max(days).as_py() <= limit:
            return
        row = first_true(pc.greater(days, limit))
        day = _EPOCH + timedelta(days=days[row].as_py())
        raise chunk.located(
            TickValidationError(
                f"ticks of {symbols[row].as_py()!r} are dated {day.isoformat()} (UTC), after "
                f"as_of {self.options.as_of.isoformat()}; age_days cannot be negative",
                row=row,
                field="timestamp_nanos",
            )
        )

    def _route_rows(self, batch: TickBatch, keys: pa.Array, row_bytes: pa.Array | None) -> None:
        columns = _tick_columns(batch, self.router.schema)
        low, high = pc.min_max(keys).values()
        if low == high:
            starts, sorted_keys = [0, len(keys)], keys
        else:
            dense = pc.dictionary_encode(keys).indices  # a small range: a counting sort
            order = pc.sort_indices(dense)  # stable: each symbol-day keeps the file's order
            sorted_keys, columns = pc.take(keys, order), columns.take(order)
            row_bytes = None if row_bytes is None else pc.take(row_bytes, order)
            starts = [0, *_change_points(sorted_keys), len(keys)]
        self.measured = self.measured and row_bytes is not None
        ends = None if row_bytes is None else pc.cumulative_sum(row_bytes)
        for start, stop in itertools.pairwise(starts):
            key = sorted_keys[start].as_py()
            if key not in self.labels:
                self.labels[key] = self._label(key)
            if ends is not None:
                before = ends[start - 1].as_py() if start else 0
                self.raw_bytes[key] += ends[stop - 1].as_py() - before
            piece = Piece(columns.slice(start, stop - start), batch.price_scale,
                          batch.quantity_scale)  # fmt: skip
            self.router.add(key, piece)

    def _label(self, key: int) -> tuple[str, date]:
        names = {index: name for name, index in self.symbol_ids.items()}
        symbol_id, day_index = divmod(key, _DAY_KEY_SHIFT)
        return names[symbol_id], _EPOCH + timedelta(days=day_index - _DAY_KEY_SHIFT // 2)


def _hinted(options: PlanOptions, widest: TickSchema) -> PlanOptions:
    """``options`` with each schema field it leaves free fixed at ``widest``'s, and no
    rounding allowed (a chunk the hint does not hold exactly is converted at its own)."""
    request = options.encoding.schema
    fixed = SchemaRequest(**{name: _given_or(getattr(request, name), getattr(widest, name))
                             for name in SCHEMA_FIELDS})  # fmt: skip
    encoding = replace(options.encoding, schema=fixed, allow_precision_loss=False)
    return replace(options, encoding=encoding)


def _at_scales(options: PlanOptions, schema: TickSchema) -> PlanOptions:
    """``options`` with the price and quantity scales of ``schema`` fixed."""
    request = replace(options.encoding.schema, price_scale=schema.price_scale,
                      quantity_scale=schema.quantity_scale)  # fmt: skip
    return replace(options, encoding=replace(options.encoding, schema=request))


def _given_or(given, hint):
    return hint if given is None else given


def _chunk_batch(chunk: SourceTicks, options: PlanOptions) -> TickBatch:
    """The chunk as a validated (unsorted) TickBatch at its own schema (errors name file rows)."""
    encoding = options.encoding
    batch = chunk.to_batch(
        price_scale=encoding.schema.price_scale,
        quantity_scale=encoding.schema.quantity_scale,
        side_map=encoding.side_map,
        allow_precision_loss=encoding.allow_precision_loss,
        timestamp_unit=encoding.schema.timestamp_unit,
    )
    try:
        validate_values(batch)
    except TickValidationError as exc:
        raise chunk.located(exc) from None
    return batch


def _tick_columns(batch: TickBatch, schema: pa.Schema) -> pa.RecordBatch:
    """The batch's columns as a record batch of ``schema`` (a marker the batch lacks: False)."""
    columns = []
    for name in schema.names:
        column = getattr(batch, name)
        if column is None:
            column = pa.nulls(len(batch), pa.bool_()).fill_null(False)
        columns.append(column)
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _chunk_facts(index: int, batch: TickBatch) -> _ChunkFacts:
    def largest(units: pa.Array) -> int:
        low, high = pc.min_max(units).values()
        return max(abs(low.as_py()), abs(high.as_py()))

    return _ChunkFacts(index, batch.schema, largest(batch.price), largest(batch.quantity))


def _check_widened(
    stream: TickStream, options: PlanOptions, facts: list[_ChunkFacts], schema: TickSchema
) -> None:
    """Refuse, naming the row, a value that fits 18 digits at its chunk's scale but not at the
    final ``schema``'s: that chunk is read again and converted at ``schema``."""
    for fact in facts:
        fits = all(
            largest * 10 ** (getattr(schema, name) - getattr(fact.schema, name)) <= MAX_UNITS
            for name, largest in (("price_scale", fact.largest_price),
                                  ("quantity_scale", fact.largest_quantity))
        )  # fmt: skip
        if fits:
            continue
        chunk = next(itertools.islice(stream.chunks(), fact.index, None))
        selected = _select_symbol(chunk, options.symbol)[0]
        _chunk_batch(selected, _at_scales(options, schema))  # raises, naming the row
        raise TickValidationError(f"{stream.path or 'input'}: a value needs more than 18 digits")


def utc_days(ts_ns: pa.Array) -> pa.Array:
    """Days since 1970-01-01 (UTC, floored) of each nanosecond timestamp, as int64."""
    timestamps = pa.Array.from_buffers(
        pa.timestamp("ns"), len(ts_ns), ts_ns.buffers(), 0, ts_ns.offset
    )
    return pc.cast(pc.cast(pc.cast(timestamps, pa.date32()), pa.int32()), pa.int64())


def _change_points(sorted_key: pa.Array) -> list[int]:
    if len(sorted_key) < 2:
        return []
    changed = pc.not_equal(sorted_key.slice(1), sorted_key.slice(0, len(sorted_key) - 1))
    return [i + 1 for i in pc.indices_nonzero(changed).to_pylist()]


def _select_symbol(source: SourceTicks, symbol: str | None) -> tuple[SourceTicks, pa.Array]:
    """The rows of ``symbol`` (all rows when None) and their symbols (``symbol`` for a source
    without a symbol column). Raises ConfigError when neither names the symbol, and
    TickValidationError on a missing symbol (naming the file row)."""
    symbols = source.symbols
    if symbols is None:
        if symbol is None:
            raise ConfigError(
                f"symbol: {source.path or 'the input'} has no symbol column; pass symbol= "
                "(--symbol)"
            )
        encode_symbol(symbol)
        return source, pa.repeat(pa.scalar(symbol, pa.string()), source.table.num_rows)
    symbols = pc.cast(symbols, pa.string())
    if symbols.null_count:
        row = first_true(pc.is_null(symbols))
        raise source.located(TickValidationError("symbol is missing", row=row, field="symbol"))
    if symbol is None:
        return source, symbols
    keep = pc.equal(symbols, symbol)
    return source.filter(keep), pc.filter(symbols, keep)


ReadProgress = Callable[[int, int, int], None]
"""``on_read(bytes_read, file_bytes, ticks_read)``, called after each chunk is routed."""


def _check_date(value: object, *, name: str) -> date:
    if isinstance(value, datetime) or not isinstance(value, date):
        raise ConfigError(f"{name} = {value!r}: expected a datetime.date")
    return value

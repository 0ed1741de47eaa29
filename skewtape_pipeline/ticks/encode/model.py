"""TickBatch: ticks as exact pyarrow columns, the schema they are stored at, and a batch built
from a source's columns (each converted by :mod:`~skewtape_pipeline.ticks.encode.exact_columns`).

A :class:`TickBatch` holds four int columns: ``ts_ns`` (nanoseconds since the epoch, UTC),
``price`` and ``quantity`` as integers scaled by ``10**price_scale`` / ``10**quantity_scale``,
and ``side`` codes (0 UNKNOWN, 1 BUY, 2 SELL). Nothing in it is a float. Its
``timestamp_unit`` (``ns``, ``us``, ``ms`` or ``s``) is the precision the archive stores the
timestamps at; every timestamp of the batch is a whole number of that unit (a finer one is
refused with :class:`~skewtape_pipeline.errors.PrecisionLossError`, never truncated).

The conversions turn whatever a source holds into those integers without ever passing a decimal
string or decimal value through a float, vectorized with pyarrow.compute:

- decimal columns and integers are exact: any discarded non-zero digit is loss;
- decimal strings and float columns (through the float's shortest repr) are judged with the
  float-noise rule of :func:`~skewtape_pipeline.ticks.encode.decimals.is_float_noise`:
  ``150.15000000000003`` at 2 or 4 decimals is binary64 representation noise, stored rounded
  to the scale and marked per row (``price_noise``/``quantity_noise``); ``1.23456`` at 4
  decimals is loss;
- loss raises :class:`~skewtape_pipeline.errors.PrecisionLossError` unless allowed; allowed
  loss rounds half to even and is marked per row (``price_lossy``/``quantity_lossy``).

Scaled values must fit 18 decimal digits, the capacity of the archive's ``decimal(18, s)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline.errors import (
    ArchiveSchemaError,
    ConfigError,
    PrecisionLossError,
    TickValidationError,
)
from skewtape_pipeline.ticks.encode.exact_columns import (
    MAX_SCALE,
    ScaledColumn,
    check_scale,
    coarsest_timestamp_unit,
    count_true,
    exact_units,
    first_true,
    rescaled_units,
    side_codes,
    smallest_exact_scale,
    smallest_units,
    smallest_units_scale,
    timestamps_ns,
)
from skewtape_pipeline.ticks.encode.sides import SIDE_NAMES

TIMESTAMP_UNITS: Mapping[str, int] = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000}
"""Timestamp units an archive may store, with their length in nanoseconds (finest first)."""

DEFAULT_TIMESTAMP_UNIT = "ns"


def check_timestamp_unit(unit: object, *, name: str = "timestamp_unit") -> str:
    """Return ``unit`` if it is one of :data:`TIMESTAMP_UNITS`, else raise ConfigError."""
    if not isinstance(unit, str) or unit not in TIMESTAMP_UNITS:
        raise ConfigError(f"{name} = {unit!r}: expected one of {', '.join(TIMESTAMP_UNITS)}")
    return unit


def check_timestamps_fit_unit(
    ts_ns: pa.Array, unit: str, *, field: str = "timestamp_nanos"
) -> None:
    """Refuse nanosecond timestamps that are not whole multiples of ``unit``.

    Raises
    ------
    ConfigError
        ``unit`` is not one of :data:`TIMESTAMP_UNITS`.
    PrecisionLossError
        Naming the first row whose timestamp is finer than ``unit`` (storing it would truncate).
    """
    factor = TIMESTAMP_UNITS[check_timestamp_unit(unit)]
    if factor == 1 or len(ts_ns) == 0:
        return
    as_timestamps = pa.Array.from_buffers(
        pa.timestamp("ns"), len(ts_ns), ts_ns.buffers(), ts_ns.null_count, ts_ns.offset
    )
    try:  # a safe cast refuses truncation, vectorized; the row is found only on failure
        pc.cast(as_timestamps, pa.timestamp(unit), safe=True)
        return
    except pa.ArrowInvalid:
        pass
    finer = pc.not_equal(pc.subtract(ts_ns, pc.multiply(pc.divide(ts_ns, factor), factor)), 0)
    row = first_true(finer)
    count = count_true(finer)
    raise PrecisionLossError(
        f"{field} {ts_ns[row].as_py()} is finer than the timestamp unit {unit!r} "
        f"(not a whole number of {unit}; {count} such row(s)); storing it would truncate. "
        "Configure a finer timestamp_unit",
        row=row,
        field=field,
    )


SCHEMA_FIELDS = ("timestamp_unit", "price_scale", "quantity_scale")


def _unit_is_finer(unit: str, than: str) -> bool:
    return TIMESTAMP_UNITS[unit] < TIMESTAMP_UNITS[than]


@dataclass(frozen=True)
class TickSchema:
    """The one schema of an archive: its timestamp unit and its price and quantity scales.

    Raises ConfigError on an unknown unit or a scale outside 0..18.
    """

    timestamp_unit: str = DEFAULT_TIMESTAMP_UNIT
    price_scale: int = 0
    quantity_scale: int = 0

    def __post_init__(self) -> None:
        check_timestamp_unit(self.timestamp_unit)
        check_scale(self.price_scale, name="price_scale")
        check_scale(self.quantity_scale, name="quantity_scale")

    def holds(self, field: str, needed: object) -> bool:
        """True when a value of ``field`` (``timestamp_unit``, ``price_scale`` or
        ``quantity_scale``) that the data needs is stored exactly at this schema (a unit no
        coarser, a scale no smaller)."""
        if field == "timestamp_unit":
            return not _unit_is_finer(str(needed), self.timestamp_unit)
        return int(needed) <= getattr(self, field)  # type: ignore[call-overload]

    def describe(self) -> str:
        return (
            f"timestamp_unit {self.timestamp_unit!r}, price_scale {self.price_scale}, "
            f"quantity_scale {self.quantity_scale}"
        )


@dataclass(frozen=True)
class SchemaRequest:
    """What a caller fixes of an archive's schema; a field left None is the data's smallest
    exact choice (:func:`coarsest_timestamp_unit`, :func:`smallest_exact_scale`), widened to
    the archive's recorded schema when the archive already has one.

    Raises ConfigError on an unknown unit or a scale outside 0..18.
    """

    timestamp_unit: str | None = None
    price_scale: int | None = None
    quantity_scale: int | None = None

    def __post_init__(self) -> None:
        if self.timestamp_unit is not None:
            check_timestamp_unit(self.timestamp_unit)
        for name in ("price_scale", "quantity_scale"):
            if getattr(self, name) is not None:
                check_scale(getattr(self, name), name=name)

    def resolve(self, needed: TickSchema, archive: TickSchema | None) -> TickSchema:
        """The schema to store ticks that need ``needed`` at: a fixed field as fixed, a free
        field the archive's when the archive holds the data's, else the data's (new archive).

        Raises
        ------
        ArchiveSchemaError
            A free field the data needs finer than ``archive`` records (names the field, what
            the data needs and what the archive holds): storing it would round.
        """
        chosen = {}
        for name in SCHEMA_FIELDS:
            fixed = getattr(self, name)
            if fixed is not None:
                chosen[name] = fixed
            elif archive is None:
                chosen[name] = getattr(needed, name)
            elif archive.holds(name, getattr(needed, name)):
                chosen[name] = getattr(archive, name)
            else:
                want, held = getattr(needed, name), getattr(archive, name)
                raise ArchiveSchemaError(
                    f"the ticks need {name} {want!r}; this archive holds {name} {held!r} (one "
                    f"archive, one schema: {archive.describe()}). Storing them would round: "
                    f"archive them under another root, created with {name} {want!r}",
                    field=name,
                    needed=want,
                    archive=held,
                )
        return TickSchema(**chosen)


def widest_schema(schemas: Sequence[TickSchema]) -> TickSchema:
    """The schema that holds data of every one of ``schemas`` exactly: the finest unit and the
    largest scales (the coarsest schema, ``s`` and scale 0, for none)."""
    units = [s.timestamp_unit for s in schemas]
    return TickSchema(
        min(units, key=TIMESTAMP_UNITS.__getitem__, default="s"),
        max((s.price_scale for s in schemas), default=0),
        max((s.quantity_scale for s in schemas), default=0),
    )


@dataclass(frozen=True, eq=False)
class TickBatch:
    """Exact tick columns of one batch (see the module docstring).

    ``price_lossy``/``quantity_lossy`` mark rows rounded to the scale with loss (only when the
    caller allowed it), ``price_noise``/``quantity_noise`` rows whose discarded digits were
    float noise (stored rounded, not loss); None means no such row. ``timestamp_unit`` is the
    precision the timestamps are stored at (``ts_ns`` stays in nanoseconds). Immutable;
    ``take``/``slice`` return new batches. Raises ConfigError on a bad scale or unit,
    TickValidationError on mismatched columns, PrecisionLossError on a timestamp finer than
    ``timestamp_unit``.
    """

    ts_ns: pa.Array
    price: pa.Array
    quantity: pa.Array
    side: pa.Array
    price_scale: int
    quantity_scale: int
    price_lossy: pa.Array | None = None
    quantity_lossy: pa.Array | None = None
    timestamp_unit: str = DEFAULT_TIMESTAMP_UNIT
    price_noise: pa.Array | None = None
    quantity_noise: pa.Array | None = None

    def __post_init__(self) -> None:
        check_scale(self.price_scale, name="price_scale")
        check_scale(self.quantity_scale, name="quantity_scale")
        check_timestamp_unit(self.timestamp_unit)
        expected = {
            "ts_ns": pa.int64(),
            "price": pa.int64(),
            "quantity": pa.int64(),
            "side": pa.int8(),
            "price_lossy": pa.bool_(),
            "quantity_lossy": pa.bool_(),
            "price_noise": pa.bool_(),
            "quantity_noise": pa.bool_(),
        }
        length = len(self.ts_ns)
        for name, type_ in expected.items():
            column = getattr(self, name)
            if column is None:
                continue
            if isinstance(column, pa.ChunkedArray):
                column = column.combine_chunks()
                object.__setattr__(self, name, column)
            if not isinstance(column, pa.Array) or column.type != type_:
                raise TickValidationError(
                    f"TickBatch.{name} must be a pyarrow {type_} array, got "
                    f"{getattr(column, 'type', type(column).__name__)}",
                    field=name,
                )
            if len(column) != length:
                raise TickValidationError(
                    f"TickBatch.{name} has {len(column)} rows; ts_ns has {length}", field=name
                )
        check_timestamps_fit_unit(self.ts_ns, self.timestamp_unit)

    def __len__(self) -> int:
        return len(self.ts_ns)

    @classmethod
    def from_units(
        cls,
        ts_ns: Sequence[int] | pa.Array,
        price: Sequence[int] | pa.Array,
        quantity: Sequence[int] | pa.Array,
        side: Sequence[int] | pa.Array,
        schema: TickSchema,
    ) -> TickBatch:
        """Build a batch from already-scaled integers and side codes at ``schema`` (its scales
        and timestamp unit; no rounding, no checks beyond types: run
        :func:`~skewtape_pipeline.ticks.encode.validate.validate_batch`)."""
        return cls(
            ts_ns=pa.array(ts_ns, pa.int64()),
            price=pa.array(price, pa.int64()),
            quantity=pa.array(quantity, pa.int64()),
            side=pa.array(side, pa.int8()),
            price_scale=schema.price_scale,
            quantity_scale=schema.quantity_scale,
            timestamp_unit=schema.timestamp_unit,
        )

    def with_timestamp_unit(self, unit: str) -> TickBatch:
        """The same ticks to be stored at timestamp ``unit`` (the batch itself if unchanged).

        Raises
        ------
        ConfigError
            An unknown unit.
        PrecisionLossError
            A timestamp finer than ``unit`` (names the first such row; nothing is truncated).
        """
        if check_timestamp_unit(unit) == self.timestamp_unit:
            return self
        return replace(self, timestamp_unit=unit)

    @property
    def schema(self) -> TickSchema:
        """The batch's timestamp unit and scales."""
        return TickSchema(self.timestamp_unit, self.price_scale, self.quantity_scale)

    def smallest_schema(self) -> TickSchema:
        """The coarsest timestamp unit and smallest scales that hold these ticks exactly."""
        return TickSchema(
            coarsest_timestamp_unit(self.ts_ns),
            smallest_units_scale(self.price, self.price_scale),
            smallest_units_scale(self.quantity, self.quantity_scale),
        )

    def smallest(self) -> TickBatch:
        """The same ticks at :meth:`smallest_schema` (each column divided once)."""
        price_scale, price = smallest_units(self.price, self.price_scale)
        quantity_scale, quantity = smallest_units(self.quantity, self.quantity_scale)
        unit = coarsest_timestamp_unit(self.ts_ns)
        if TickSchema(unit, price_scale, quantity_scale) == self.schema:
            return self
        return replace(
            self,
            price=price,
            quantity=quantity,
            price_scale=price_scale,
            quantity_scale=quantity_scale,
            timestamp_unit=unit,
        )

    def at_schema(self, schema: TickSchema) -> TickBatch:
        """The same ticks at ``schema`` (the batch itself if unchanged): a larger scale
        multiplies the units, a smaller one divides them when that is exact.

        Raises
        ------
        PrecisionLossError
            A timestamp finer than the unit, or a digit the smaller scale would drop.
        TickValidationError
            A value that needs more than 18 digits at the larger scale.
        """
        if schema == self.schema:
            return self
        return replace(
            self,
            price=rescaled_units(self.price, self.price_scale, schema.price_scale, "price"),
            quantity=rescaled_units(
                self.quantity, self.quantity_scale, schema.quantity_scale, "quantity"
            ),
            price_scale=schema.price_scale,
            quantity_scale=schema.quantity_scale,
            timestamp_unit=schema.timestamp_unit,
        )

    @property
    def price_precision_loss_ticks(self) -> int:
        """Rows whose price was rounded to ``price_scale`` (0 unless loss was allowed)."""
        return count_true(self.price_lossy)

    @property
    def quantity_precision_loss_ticks(self) -> int:
        """Rows whose quantity was rounded to ``quantity_scale`` (0 unless loss was allowed)."""
        return count_true(self.quantity_lossy)

    @property
    def price_float_noise_ticks(self) -> int:
        """Rows whose price lost only float noise when rounded to ``price_scale``."""
        return count_true(self.price_noise)

    @property
    def quantity_float_noise_ticks(self) -> int:
        """Rows whose quantity lost only float noise when rounded to ``quantity_scale``."""
        return count_true(self.quantity_noise)

    def take(self, indices: pa.Array) -> TickBatch:
        """The rows at ``indices``, in that order."""
        return self._map(lambda column: pc.take(column, indices))

    def slice(self, offset: int, length: int | None = None) -> TickBatch:
        """Rows ``offset .. offset + length`` (zero-copy)."""
        return self._map(lambda column: column.slice(offset, length))

    def _map(self, fn: Any) -> TickBatch:
        return TickBatch(
            ts_ns=fn(self.ts_ns),
            price=fn(self.price),
            quantity=fn(self.quantity),
            side=fn(self.side),
            price_scale=self.price_scale,
            quantity_scale=self.quantity_scale,
            price_lossy=None if self.price_lossy is None else fn(self.price_lossy),
            quantity_lossy=None if self.quantity_lossy is None else fn(self.quantity_lossy),
            timestamp_unit=self.timestamp_unit,
            price_noise=None if self.price_noise is None else fn(self.price_noise),
            quantity_noise=None if self.quantity_noise is None else fn(self.quantity_noise),
        )

    def side_names(self) -> pa.Array:
        """The side codes as BUY/SELL/UNKNOWN strings."""
        return pc.take(pa.array(SIDE_NAMES, pa.string()), self.side)

    def first_difference(self, other: TickBatch) -> str | None:
        """None when both batches hold the same ticks at the same scales and timestamp unit;
        else what differs first (column and row), for error messages. Ignores the loss
        and noise markers."""
        if (self.price_scale, self.quantity_scale) != (other.price_scale, other.quantity_scale):
            return (
                f"scales differ: price {self.price_scale} vs {other.price_scale}, "
                f"quantity {self.quantity_scale} vs {other.quantity_scale}"
            )
        if self.timestamp_unit != other.timestamp_unit:
            return f"timestamp units differ: {self.timestamp_unit} vs {other.timestamp_unit}"
        if len(self) != len(other):
            return f"row counts differ: {len(self)} vs {len(other)}"
        for name in ("ts_ns", "price", "quantity", "side"):
            mine, theirs = getattr(self, name), getattr(other, name)
            if not mine.equals(theirs):
                row = first_true(pc.fill_null(pc.not_equal(mine, theirs), True))
                row_value = mine[row].as_py() if row is not None else None
                other_value = theirs[row].as_py() if row is not None else None
                return f"column {name} differs first at row {row}: {row_value!r} vs {other_value!r}"
        return None

    def equals(self, other: TickBatch) -> bool:
        """True when both batches hold exactly the same ticks at the same scales."""
        return self.first_difference(other) is None


def batch_from_columns(
    columns: Mapping[str, Any] | pa.Table,
    request: SchemaRequest,
    *,
    side_map: Mapping[str, str] | None = None,
    allow_precision_loss: bool = False,
) -> TickBatch:
    """Build an exact :class:`TickBatch` from raw columns: ``columns`` maps the canonical names
    ``timestamp_nanos``, ``price``, ``quantity`` and ``side`` to pyarrow arrays or Python
    lists (a pyarrow table with those columns will do).

    ``request.timestamp_unit`` is the precision the timestamps will be stored at; a timestamp
    finer than it is refused (``allow_precision_loss`` concerns prices and quantities only). A
    field of ``request`` left None is detected: the smallest exact scale of the column
    (:func:`smallest_exact_scale`), the coarsest exact unit of the timestamps
    (:func:`coarsest_timestamp_unit`).

    Does not check order or signs: run
    :func:`~skewtape_pipeline.ticks.encode.validate.validate_batch` (or sort first with
    :func:`~skewtape_pipeline.ticks.archive.ops.compact_plan.sort_batch`).

    Raises
    ------
    ConfigError
        A bad side vocabulary (a bad scale or unit is refused when ``request`` is built).
    TickValidationError, PrecisionLossError
        As :func:`timestamps_ns`, :func:`exact_units` and :func:`side_codes`; also columns of
        different lengths, or a timestamp finer than ``request.timestamp_unit``.
    """
    ts = timestamps_ns(columns["timestamp_nanos"])
    unit = request.timestamp_unit or coarsest_timestamp_unit(ts)
    check_timestamps_fit_unit(ts, unit)
    price, price_scale = _units_at(
        columns["price"],
        request.price_scale,
        field="price",
        allow_precision_loss=allow_precision_loss,
    )
    quantity, quantity_scale = _units_at(
        columns["quantity"],
        request.quantity_scale,
        field="quantity",
        allow_precision_loss=allow_precision_loss,
    )
    side = side_codes(columns["side"], side_map)
    return TickBatch(
        ts_ns=ts,
        price=price.units,
        quantity=quantity.units,
        side=side,
        price_scale=price_scale,
        quantity_scale=quantity_scale,
        price_lossy=price.lossy,
        quantity_lossy=quantity.lossy,
        timestamp_unit=unit,
        price_noise=price.noise,
        quantity_noise=quantity.noise,
    )


def _units_at(
    values: Any, scale: int | None, *, field: str, allow_precision_loss: bool
) -> tuple[ScaledColumn, int]:
    """:func:`exact_units` at ``scale``, or at the column's smallest scale exact within float
    noise when None (one conversion; a detection the conversion refutes moves up a scale)."""
    if scale is not None:
        scaled = exact_units(
            values, scale=scale, field=field, allow_precision_loss=allow_precision_loss
        )
        return scaled, scale
    scale = smallest_exact_scale(values, field=field)
    while scale < MAX_SCALE:
        try:
            return exact_units(values, scale=scale, field=field), scale
        except PrecisionLossError:
            scale += 1
    scaled = exact_units(
        values, scale=scale, field=field, allow_precision_loss=allow_precision_loss
    )
    return scaled, scale

"""Validation of a TickBatch before anything is encoded (vectorized, no per-tick Python).

Rules (each failure a :class:`~skewtape_pipeline.errors.TickValidationError` naming the row):

- every timestamp is one a reader holds as a finite time: DuckDB reads nanosecond timestamps
  between :data:`MIN_FINITE_TS_NS` (1677-09-22 00:00 UTC) and :data:`MAX_FINITE_TS_NS` (2262-04-11
  23:47:16.854775806 UTC) as such, and the int64 edges as ``infinity``/``-infinity``;
- timestamps never go backwards; duplicates are valid (one aggressor sweeping several resting
  orders). Sorting is an explicit, counted step upstream
  (:func:`~skewtape_pipeline.ticks.archive.ops.compact_plan.sort_batch`), never done silently here;
- quantities are not negative (zero is valid); prices may be negative (WTI, April 2020);
- scaled prices and quantities fit 18 digits (decimal(18, s));
- side codes are 0, 1 or 2; no column has nulls.

Non-finite prices, unmapped sides and precision loss are caught earlier, when raw columns are
turned into exact integers (:mod:`skewtape_pipeline.ticks.encode.model`): a TickBatch cannot hold
them.
"""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline.errors import TickValidationError
from skewtape_pipeline.ticks.encode.exact_columns import MAX_UNITS, first_true
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.sides import SIDE_NAMES

NANOS_PER_DAY = 86_400 * 10**9
MIN_FINITE_TS_NS = -9_223_286_400_000_000_000
"""The earliest finite TIMESTAMP_NS of DuckDB (``test_all_types()``): 1677-09-22 00:00 UTC."""
MAX_FINITE_TS_NS = 2**63 - 2
"""The latest finite TIMESTAMP_NS of DuckDB; ``2**63 - 1`` is its ``infinity``."""


def validate_batch(batch: TickBatch) -> None:
    """Check every rule above; returns None or raises TickValidationError for the first row.

    One min/max pass per value column; a failing row is searched only once a bound fails.
    """
    _check_no_nulls(batch)
    _check_non_decreasing(batch)
    validate_values(batch)


def validate_values(batch: TickBatch) -> None:
    """Every rule above but the order (a chunk of a file, validated before it is sorted)."""
    _check_no_nulls(batch)
    if len(batch) == 0:
        return
    _check_finite_times(batch)
    low, high = _min_max(batch.quantity)
    if low < 0:
        row = first_true(pc.less(batch.quantity, 0))
        value = Decimal(batch.quantity[row].as_py()).scaleb(-batch.quantity_scale)
        raise TickValidationError(
            f"quantity {value:f} is negative; expected >= 0",
            row=row,
            field="quantity",
        )
    bounds = {"quantity": (low, high), "price": _min_max(batch.price)}
    for name in ("price", "quantity"):
        low, high = bounds[name]
        if high <= MAX_UNITS and low >= -MAX_UNITS:
            continue
        column = getattr(batch, name)
        row = first_true(pc.or_(pc.greater(column, MAX_UNITS), pc.less(column, -MAX_UNITS)))
        raise TickValidationError(
            f"{name} {column[row].as_py()} (scaled) needs more than 18 digits",
            row=row,
            field=name,
        )
    low, high = _min_max(batch.side)
    if low < 0 or high > len(SIDE_NAMES) - 1:
        row = first_true(
            pc.or_(pc.less(batch.side, 0), pc.greater(batch.side, len(SIDE_NAMES) - 1))
        )
        raise TickValidationError(
            f"side code {batch.side[row].as_py()} is not 0 (UNKNOWN), 1 (BUY) or 2 (SELL)",
            row=row,
            field="side",
        )


def _check_no_nulls(batch: TickBatch) -> None:
    for name in ("ts_ns", "price", "quantity", "side"):
        column = getattr(batch, name)
        if column.null_count:
            row = first_true(pc.is_null(column))
            raise TickValidationError(f"{name} is null", row=row, field=name)


def _check_finite_times(batch: TickBatch) -> None:
    low, high = _min_max(batch.ts_ns)
    if low >= MIN_FINITE_TS_NS and high <= MAX_FINITE_TS_NS:
        return
    ts = batch.ts_ns
    row = first_true(pc.or_(pc.less(ts, MIN_FINITE_TS_NS), pc.greater(ts, MAX_FINITE_TS_NS)))
    raise TickValidationError(
        f"timestamp {ts[row].as_py()} is not a finite time to readers; expected nanoseconds "
        f"from {MIN_FINITE_TS_NS} (1677-09-22) to {MAX_FINITE_TS_NS} (2262-04-11), "
        "DuckDB's finite TIMESTAMP_NS range",
        row=row,
        field="timestamp_nanos",
    )


def _min_max(column: pa.Array) -> tuple[int, int]:
    """(min, max) of a non-empty integer column without nulls, in one pass."""
    found = pc.min_max(column)
    return found["min"].as_py(), found["max"].as_py()


def _check_non_decreasing(batch: TickBatch) -> None:
    if len(batch) < 2:
        return
    ts = batch.ts_ns
    backwards = pc.less(ts.slice(1), ts.slice(0, len(ts) - 1))
    row = first_true(backwards)
    if row is not None:
        row += 1
        raise TickValidationError(
            f"timestamp {ts[row].as_py()} is before the previous tick's {ts[row - 1].as_py()}; "
            "sort the batch explicitly (sort_batch counts the reordering) before encoding",
            row=row,
            field="timestamp_nanos",
        )


def is_sorted(batch: TickBatch) -> bool:
    """True when the timestamps never go backwards."""
    if len(batch) < 2:
        return True
    ts = batch.ts_ns
    return first_true(pc.less(ts.slice(1), ts.slice(0, len(ts) - 1))) is None


def day_of_ns(ts_ns: int) -> date:
    """The UTC calendar day of a nanosecond timestamp."""
    return datetime.fromtimestamp(ts_ns // NANOS_PER_DAY * 86_400, UTC).date()


def day_start_ns(day: date) -> int:
    """Nanoseconds at 00:00 UTC of ``day``."""
    return (day - date(1970, 1, 1)).days * NANOS_PER_DAY


def check_within_day(batch: TickBatch, day: date) -> None:
    """Every tick falls on ``day`` (UTC); otherwise TickValidationError naming the first row."""
    if len(batch) == 0:
        return
    start = day_start_ns(day)
    low, high = _min_max(batch.ts_ns)
    if low >= start and high < start + NANOS_PER_DAY:
        return
    outside = pc.or_(
        pc.less(batch.ts_ns, start), pc.greater_equal(batch.ts_ns, start + NANOS_PER_DAY)
    )
    row = first_true(outside)
    ts = batch.ts_ns[row].as_py()
    raise TickValidationError(
        f"timestamp {ts} falls on {day_of_ns(ts).isoformat()} (UTC), not on the batch's "
        f"day {day.isoformat()}",
        row=row,
        field="timestamp_nanos",
    )

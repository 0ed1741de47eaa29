"""Exact columns from what a source holds: timestamps as int64 nanoseconds, prices and quantities
as integers scaled to a number of decimals, sides as codes; never through a float.

The rules (which digits are loss, which are float noise) are the model's
(:mod:`~skewtape_pipeline.ticks.encode.model`); each conversion here is vectorized with
pyarrow.compute, falls back to exact Python arithmetic only for rows that need it, and refuses
(naming the field and the first row) a null, text that is no number, a value that does not fit
18 digits, or loss that is not allowed. Also the smallest scale a column holds exactly, and
the row helpers the batch uses (:func:`first_true`, :func:`count_true`).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from decimal import Decimal, InvalidOperation
from typing import Any, NamedTuple

import pyarrow as pa
import pyarrow.compute as pc

from skewtape_pipeline.errors import (
    ConfigError,
    PrecisionLossError,
    TickValidationError,
    quoted,
)
from skewtape_pipeline.ticks.encode.decimals import (
    FLOAT_NOISE,
    FLOAT_NOISE_MAX_UNITS,
    FLOAT_NOISE_ULPS,
    FLOAT_NOISE_UNIT_FRACTION,
    LOSS,
    quantize,
)
from skewtape_pipeline.ticks.encode.sides import CANONICAL_SIDES, resolve_side_map

MAX_SCALE = 18
MAX_DIGITS = 18
MAX_UNITS = 10**MAX_DIGITS - 1
"""Largest magnitude of a scaled value: 18 digits, the capacity of decimal(18, s) on INT64."""
_FLOAT_EXACT_LIMIT = 2.0**52
"""Scaled floats below this many units are judged in float arithmetic (distinct units are
distinct doubles); larger ones are scaled exactly from their shortest repr."""
_NOISE_FREE_CHARS = 13
"""Decimal text of at most this many characters (trailing zeros aside) has at most 12
significant digits: never float noise."""
_NUMBER_PATTERN = r"^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$"
_INTEGER_PATTERN = r"^[+-]?\d+$"
_NON_FINITE_WORDS = {
    "nan",
    "+nan",
    "-nan",
    "inf",
    "+inf",
    "-inf",
    "infinity",
    "+infinity",
    "-infinity",
}


def check_scale(scale: object, *, name: str) -> int:
    """Return ``scale`` if it is an integer in 0..18, else raise ConfigError naming ``name``."""
    if not isinstance(scale, int) or isinstance(scale, bool) or not 0 <= scale <= MAX_SCALE:
        raise ConfigError(f"{name} = {scale!r}: expected an integer in 0..{MAX_SCALE}")
    return scale


def coarsest_timestamp_unit(ts_ns: pa.Array) -> str:
    """The coarsest unit of :data:`TIMESTAMP_UNITS` of which every timestamp is a whole number
    (``s`` for an empty array); vectorized, at most three passes over the column."""
    chosen = "ns"
    for unit in ("us", "ms", "s"):
        if not _timestamps_are_whole(ts_ns, unit):
            break
        chosen = unit
    return chosen


def _timestamps_are_whole(ts_ns: pa.Array, unit: str) -> bool:
    as_timestamps = pa.Array.from_buffers(
        pa.timestamp("ns"), len(ts_ns), ts_ns.buffers(), ts_ns.null_count, ts_ns.offset
    )
    try:  # a safe cast refuses truncation, vectorized
        pc.cast(as_timestamps, pa.timestamp(unit), safe=True)
    except pa.ArrowInvalid:
        return False
    return True


_DETECTION_SAMPLE_ROWS = 4_096


def smallest_units_scale(units: pa.Array, scale: int) -> int:
    """The smallest scale (<= ``scale``) at which int64 ``units`` of ``10**-scale`` are all
    whole (trailing zeros common to every value dropped).

    Vectorized: a leading sample proposes the scale, one pass over the whole column confirms
    it (a sample is never trusted alone; a refuted proposal moves up a digit and is checked
    again)."""
    return smallest_units(units, scale)[0]


def smallest_units(units: pa.Array, scale: int) -> tuple[int, pa.Array]:
    """:func:`smallest_units_scale` and the units at that scale (divided once)."""
    if scale == 0 or len(units) == 0:
        return scale, units
    proposed = _sample_units_scale(units.slice(0, _DETECTION_SAMPLE_ROWS), scale)
    while proposed < scale:
        quotient = _exact_quotient(units, 10 ** (scale - proposed))
        if quotient is not None:
            return proposed, quotient
        proposed += 1
    return scale, units


def _sample_units_scale(units: pa.Array, scale: int) -> int:
    while scale > 0:
        quotient = _exact_quotient(units, 10)
        if quotient is None:
            break
        units, scale = quotient, scale - 1
    return scale


def _exact_quotient(units: pa.Array, step: int) -> pa.Array | None:
    """``units / step`` when every value is a multiple of ``step``, else None."""
    quotient = pc.divide(units, step)
    return quotient if pc.all(pc.equal(pc.multiply(quotient, step), units)).as_py() else None


def _smallest_decimal_scale(values: pa.Array) -> int:
    type_ = values.type
    if type_.precision <= MAX_DIGITS:  # int64 units: exact, and far faster than a rescale
        if type_.bit_width == 64:
            units = pa.Array.from_buffers(
                pa.int64(), len(values), values.buffers(), values.null_count, values.offset
            )
        else:
            units = _decimal_units(values)
        return smallest_units_scale(units, type_.scale)
    scale = type_.scale
    while scale > 0:
        try:  # a safe rescale refuses to drop a non-zero digit
            pc.cast(values, pa.decimal128(38, scale - 1), safe=True)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            break
        scale -= 1
    return scale


def smallest_exact_scale(values: Any, *, field: str) -> int:
    """The smallest scale (0..18) at which a raw numeric column is exact: integers 0; decimals
    their type's scale less the trailing zeros common to every value; decimal text the most
    decimals any value needs once trailing zeros are dropped, float noise ignored; floats the
    fewest decimals of their shortest repr, float noise ignored (both by the rule of
    :func:`~skewtape_pipeline.ticks.encode.decimals.is_float_noise`: ``150.15000000000003`` and
    ``150.2`` give 2). Vectorized; a value that is not a number is left for the conversion to
    name. More than 18 decimals gives 18 (the conversion then refuses the loss)."""
    values = _narrow_floats_as_text(_decode_dictionary(_as_array(values, field=field)))
    type_ = values.type
    if values.null_count or len(values) == 0:
        return 0
    if pa.types.is_decimal(type_):
        return min(_smallest_decimal_scale(values), MAX_SCALE)
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return _smallest_text_scale(values)
    if pa.types.is_floating(type_):
        return _smallest_float_scale(values)
    return 0


def _smallest_text_scale(values: pa.Array) -> int:
    """The fewest decimals holding every text exactly or within float noise: the exact
    decimals of the texts that cannot be noise, then the others checked scale by scale
    through their doubles."""
    text = pc.utf8_trim_whitespace(values)
    decimals, candidates = _text_decimals(text)
    widest = min(pc.max(decimals).as_py() or 0, MAX_SCALE)
    if widest == 0 or not pc.any(candidates).as_py():
        return widest
    shortest = pc.max(pc.filter(decimals, pc.invert(candidates))).as_py() or 0
    rows = pc.indices_nonzero(candidates)
    try:
        doubles = pc.cast(pc.take(text, rows), pa.float64())
    except pa.ArrowInvalid:  # not numbers: the conversion names them
        return widest
    needed = pc.take(decimals, rows)
    for scale in range(shortest, widest):
        if _all_exact_or_noise(doubles, scale, pc.less_equal(needed, scale)):
            return scale
    return widest


_TEXT_NUMBER_PARTS = r"^[+-]?(?P<whole>\d*)\.?(?P<fraction>\d*)(?:[eE](?P<exponent>[+-]?\d+))?$"


def _text_decimals(text: pa.Array) -> tuple[pa.Array, pa.Array]:
    """Exact decimals of each trimmed decimal text once trailing zeros are dropped (0 for a
    text that is not a number), and which texts may be float noise (without an exponent: 13
    or more characters before the trailing zeros, since 12 significant digits never are)."""
    if not pc.any(pc.match_substring_regex(text, "[eE]")).as_py():
        dot = pc.find_substring(text, ".")
        trimmed = pc.utf8_length(pc.utf8_rtrim(text, characters="0"))
        decimals = pc.subtract(trimmed, pc.add(dot, 1))
        decimals = pc.fill_null(pc.if_else(pc.less(dot, 0), 0, decimals), 0)
        return decimals, pc.greater(trimmed, _NOISE_FREE_CHARS)
    parts = pc.extract_regex(text, _TEXT_NUMBER_PARTS)
    fraction = pc.struct_field(parts, "fraction")
    digits = pc.binary_join_element_wise(pc.struct_field(parts, "whole"), fraction, "")
    zeros = pc.subtract(pc.utf8_length(digits), pc.utf8_length(pc.utf8_rtrim(digits, "0")))
    exponent_text = pc.struct_field(parts, "exponent")
    exponent = pc.cast(pc.if_else(pc.equal(exponent_text, ""), "0", exponent_text), pa.int64())
    decimals = pc.subtract(pc.subtract(pc.utf8_length(fraction), exponent), zeros)
    decimals = pc.fill_null(pc.max_element_wise(decimals, 0), 0)
    return decimals, pc.greater(decimals, 0)


def _smallest_float_scale(values: pa.Array) -> int:
    floats = pc.cast(values, pa.float64())
    if not pc.all(pc.is_finite(floats)).as_py():
        return 0
    for scale in range(MAX_SCALE + 1):
        if _all_exact_or_noise(floats, scale):
            return scale
    return MAX_SCALE


def _all_exact_or_noise(doubles: pa.Array, scale: int, exact: pa.Array | None = None) -> bool:
    """True when every value is exact at ``scale`` (``exact``; None: its double is that of its
    rounding) or float noise of its rounding (:func:`float_noise_rows`). A scale where some
    value lies far from any rounding is refused first, in a few cheap passes."""
    power = float(10**scale)
    scaled = pc.multiply(doubles, power)
    units = pc.round(scaled, ndigits=0, round_mode="half_to_even")
    if exact is None:
        exact = pc.equal(doubles, pc.divide(units, power))
    if pc.all(exact).as_py():
        return True
    # Float noise is within 1/100 of a unit of its rounding; scaling errs by under 1e-15.
    slack = pc.add(pc.multiply(pc.abs(scaled), 1e-15), 2 * FLOAT_NOISE_UNIT_FRACTION)
    near = pc.less_equal(pc.abs(pc.subtract(scaled, units)), slack)
    if not pc.all(pc.or_(exact, near)).as_py():
        return False
    return bool(pc.all(pc.or_(exact, float_noise_rows(doubles, units, scale))).as_py())


def _float_rounding(doubles: pa.Array, scale: int) -> tuple[pa.Array, pa.Array, pa.Array]:
    """``(units, exact, noise)`` of float64 ``doubles`` at ``scale``, in float arithmetic:
    ``units`` the nearest whole number of ``10**-scale`` (as float64), ``exact`` where the
    double is that decimal's nearest double, ``noise`` where it is within float noise of it
    (:func:`float_noise_rows`). Exact for units below 2**52; beyond, ``exact`` may be False
    where the decimal rule says True (callers decide those rows exactly)."""
    power = float(10**scale)
    units = pc.round(pc.multiply(doubles, power), ndigits=0, round_mode="half_to_even")
    exact = pc.equal(doubles, pc.divide(units, power))
    if pc.all(exact).as_py():
        return units, exact, pc.invert(exact)
    return units, exact, pc.and_not(float_noise_rows(doubles, units, scale), exact)


def float_noise_rows(doubles: pa.Array, units: pa.Array, scale: int) -> pa.Array:
    """Vectorized :func:`~skewtape_pipeline.ticks.encode.decimals.is_float_noise`: True where the
    double ``doubles[i]`` (a value's nearest binary64) is within float noise of
    ``units[i] / 10**scale`` (int64 or whole float64 units), with the same float operations."""
    magnitude = pc.abs(units)
    eligible = pc.and_(pc.greater(magnitude, 0), pc.less(magnitude, FLOAT_NOISE_MAX_UNITS))
    power = float(10**scale)
    nearest = pc.divide(pc.cast(pc.if_else(eligible, units, 0), pa.float64()), power)
    apart = pc.abs(pc.subtract(_double_bits(doubles), _double_bits(nearest)))
    fraction = pc.multiply(pc.abs(pc.subtract(doubles, nearest)), power)
    return pc.and_(
        eligible,
        pc.and_(
            pc.less_equal(apart, FLOAT_NOISE_ULPS),
            pc.less_equal(fraction, FLOAT_NOISE_UNIT_FRACTION),
        ),
    )


def _double_bits(doubles: pa.Array) -> pa.Array:
    """The int64 bit patterns of float64 values (zero-copy): for two doubles of one sign, their
    difference counts the ulps between them."""
    return pa.Array.from_buffers(
        pa.int64(), len(doubles), doubles.buffers(), doubles.null_count, doubles.offset
    )


def rescaled_units(units: pa.Array, scale: int, to: int, field: str) -> pa.Array:
    """int64 ``units`` of ``10**-scale`` as units of ``10**-to``, exactly (see
    :meth:`TickBatch.at_schema`: TickValidationError past 18 digits, PrecisionLossError on a
    dropped digit; rows are those of ``units``)."""
    if to == scale:
        return units
    if to > scale:
        limit = MAX_UNITS // 10 ** (to - scale)
        row = first_true(pc.or_(pc.greater(units, limit), pc.less(units, -limit)))
        if row is not None:
            _raise_capacity(units[row].as_py(), row=row, scale=to, field=field)
        return pc.multiply(units, 10 ** (to - scale))
    step = 10 ** (scale - to)
    quotient = pc.divide(units, step)
    lossy = pc.not_equal(pc.multiply(quotient, step), units)
    row = first_true(lossy)
    if row is not None:
        raise PrecisionLossError(
            f"{field} {units[row].as_py()} (scale {scale}) has more than {to} decimals; "
            "storing it at that scale would round",
            row=row,
            field=field,
        )
    return quotient


def count_true(mask: pa.Array | None) -> int:
    if mask is None:
        return 0
    return int(pc.sum(pc.cast(mask, pa.int64())).as_py() or 0)


def first_true(mask: pa.Array | pa.ChunkedArray) -> int | None:
    """Index of the first True in a boolean array, or None."""
    if not pc.any(mask).as_py():
        return None
    index = pc.index(mask, True).as_py()
    return None if index < 0 else index


def first_row_raising(values: pa.Array, convert: Callable[[pa.Array], object]) -> int | None:
    """Index of the first value that ``convert`` (a cast, say) refuses with ArrowInvalid, or
    None when it takes them all. ``convert`` must refuse a slice exactly when it refuses one of
    its values; the row is found by halving, about twice the work of one conversion."""

    def refuses(part: pa.Array) -> bool:
        try:
            convert(part)
        except pa.ArrowInvalid:
            return True
        return False

    if not refuses(values):
        return None
    start, length = 0, len(values)
    while length > 1:
        half = length // 2
        if refuses(values.slice(start, half)):
            length = half
        else:
            start, length = start + half, length - half
    return start


def _as_array(values: Any, *, field: str) -> pa.Array:
    if isinstance(values, pa.ChunkedArray):
        return values.combine_chunks()
    if isinstance(values, pa.Array):
        return values
    try:
        return pa.array(values)
    except (pa.ArrowInvalid, pa.ArrowTypeError, TypeError) as exc:
        raise TickValidationError(f"cannot read the {field} column: {exc}", field=field) from None


def _refuse_nulls(values: pa.Array, *, field: str) -> None:
    if values.null_count:
        row = first_true(pc.is_null(values))
        raise TickValidationError(
            f"{field} is missing (null); every tick needs one", row=row, field=field
        )


def _decode_dictionary(values: pa.Array) -> pa.Array:
    return values.dictionary_decode() if pa.types.is_dictionary(values.type) else values


def _narrow_floats_as_text(values: pa.Array) -> pa.Array:
    """A float32 or float16 column as the text of each value's shortest repr in its own type
    (``1.1``, which Arrow's cast writes), which is what the value says; widened to a double it
    would read ``1.100000023841858``, beyond float noise. Other columns as they are."""
    if pa.types.is_floating(values.type) and values.type != pa.float64():
        return pc.cast(values, pa.string())
    return values


# --- timestamps ---------------------------------------------------------------------------------


def timestamps_ns(values: Any, *, field: str = "timestamp_nanos") -> pa.Array:
    """Exact int64 nanoseconds (UTC) from integers, Arrow timestamps or integer strings.

    Raises
    ------
    TickValidationError
        A null, a float column (cannot hold nanoseconds exactly), a non-integer string, a
        value outside int64 or a timestamp outside the nanosecond range (names the row).
    """
    values = _decode_dictionary(_as_array(values, field=field))
    _refuse_nulls(values, field=field)
    type_ = values.type
    if pa.types.is_timestamp(type_):
        return _timestamps_as_ns(values, field=field)
    if pa.types.is_integer(type_):
        return _integers_to_int64(values, field=field)
    if pa.types.is_string(type_) or pa.types.is_large_string(type_):
        return int64_of_text(values, field=field, noun="an integer number of nanoseconds")
    raise TickValidationError(
        f"{field} column has type {type_}; expected integer nanoseconds or a timestamp "
        "(a float cannot hold nanoseconds exactly)",
        field=field,
    )


def _timestamps_as_ns(values: pa.Array, *, field: str) -> pa.Array:
    """Arrow timestamps as int64 nanoseconds; TickValidationError naming the first row outside
    the times int64 nanoseconds hold (a ``timestamp[us]`` of year 3000, say)."""
    unit, tz = values.type.unit, values.type.tz

    def to_ns(part: pa.Array) -> pa.Array:
        return pc.cast(part, pa.timestamp("ns", tz))

    try:
        return pc.cast(to_ns(values), pa.int64())
    except pa.ArrowInvalid:
        row = first_row_raising(values, to_ns)
    count = pc.cast(values.slice(row, 1), pa.int64())[0].as_py()
    raise TickValidationError(
        f"{field} {count} {unit} since the epoch ({values.type}) lies outside the times int64 "
        "nanoseconds hold (1677-09-21 to 2262-04-11 UTC)",
        row=row,
        field=field,
    )


def int64_of_text(values: pa.Array, *, field: str, noun: str = "an integer") -> pa.Array:
    """Integer text (blanks around it ignored) as int64.

    Raises TickValidationError naming the first row that is not ``noun`` or does not fit
    int64 (a DBN ``ts_event`` of UNDEF_TIMESTAMP, 2**64 - 1).
    """
    plain = _plain_int64(values)
    if plain is not None:
        return plain
    text = pc.utf8_trim_whitespace(values)
    bad = first_true(pc.invert(pc.match_substring_regex(text, _INTEGER_PATTERN)))
    if bad is not None:
        raise TickValidationError(
            f"{field} {quoted(values[bad].as_py())} is not {noun}", row=bad, field=field
        )
    unsigned = pc.replace_substring_regex(text, r"^\+", "")  # Arrow's cast takes no '+'
    return _integers_to_int64(unsigned, field=field, shown=values)


def _plain_int64(text: pa.Array) -> pa.Array | None:
    """int64 of text that is only ASCII digits in every row (the common case, one cheap pass
    instead of trimming and a regular expression), else None (the general path decides)."""
    if not pc.all(pc.ascii_is_decimal(text)).as_py():
        return None
    try:
        return pc.cast(text, pa.int64())
    except pa.ArrowInvalid:  # beyond int64: the general path names the row
        return None


def _plain_decimal_units(text: pa.Array, scale: int) -> pa.Array | None:
    """int64 units at ``scale`` of text that is ASCII digits with at most one ``.`` in every
    row and fits 18 digits at ``scale`` without losing a digit (the common case: one decimal64
    cast), else None (the general path decides, names rows and marks loss)."""
    integers = _plain_int64(text)
    if integers is not None:  # whole numbers: an integer cast, then the scale
        limit = MAX_UNITS // 10**scale
        low, high = pc.min_max(integers).values()
        if len(integers) and (high.as_py() > limit or low.as_py() < -limit):
            return None
        return pc.multiply(integers, 10**scale) if scale else integers
    digits = pc.replace_substring(text, ".", "", max_replacements=1)
    if not pc.all(pc.ascii_is_decimal(digits)).as_py():
        return None
    if not _digits_fit(digits, MAX_DIGITS):  # the decimal64 cast would wrap them
        return None
    try:
        exact = pc.cast(text, pa.decimal64(MAX_DIGITS, scale))
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None
    return pa.Array.from_buffers(pa.int64(), len(exact), exact.buffers(), 0, exact.offset)


def _integers_to_int64(values: pa.Array, *, field: str, shown: pa.Array | None = None) -> pa.Array:
    """Integers of any width (or integer text) as int64; TickValidationError naming the first
    that does not fit (a uint64 above INT64_MAX), quoted from ``shown`` (the input as given)
    when ``values`` were cleaned up from it."""
    try:
        return pc.cast(values, pa.int64())
    except pa.ArrowInvalid:
        row = first_row_raising(values, lambda part: pc.cast(part, pa.int64()))
        value = (values if shown is None else shown)[row].as_py()
        raise TickValidationError(
            f"{field} {quoted(value)} does not fit int64", row=row, field=field
        ) from None


# --- exact scaled numbers -----------------------------------------------------------------------


class ScaledColumn(NamedTuple):
    """A column as int64 units of ``10**-scale``. ``lossy`` marks rows rounded with loss (only
    when the caller allowed it), ``noise`` rows whose discarded digits were float noise (stored
    rounded); None: no such row."""

    units: pa.Array
    lossy: pa.Array | None = None
    noise: pa.Array | None = None


def exact_units(
    values: Any, *, scale: int, field: str, allow_precision_loss: bool = False
) -> ScaledColumn:
    """Scale a numeric column to int64 units of ``10**-scale``, exactly.

    Returns a :class:`ScaledColumn`: the units, the rows rounded (half to even) with loss,
    and the rows whose discarded digits were float noise (decimal text and floats only; see
    :func:`~skewtape_pipeline.ticks.encode.decimals.is_float_noise`), each None when no row was.
    Accepts integer, decimal, float and decimal-string columns.

    Raises
    ------
    TickValidationError
        A null, a non-finite or non-numeric value, or a value that needs more than 18 digits
        at ``scale`` (names the row and the value).
    PrecisionLossError
        A value has more decimals than ``scale``, beyond float noise, and
        ``allow_precision_loss`` is False.
    """
    check_scale(scale, name=f"{field} scale")
    values = _narrow_floats_as_text(_decode_dictionary(_as_array(values, field=field)))
    _refuse_nulls(values, field=field)
    type_ = values.type
    if pa.types.is_integer(type_):
        scaled = ScaledColumn(_units_from_integers(values, scale=scale, field=field))
    elif pa.types.is_floating(type_):
        scaled = _units_from_floats(values, scale=scale, field=field)
    elif pa.types.is_decimal(type_):
        scaled = _units_from_decimals(values, scale=scale, field=field)
    elif pa.types.is_string(type_) or pa.types.is_large_string(type_):
        scaled = _units_from_strings(values, scale=scale, field=field)
    else:
        raise TickValidationError(
            f"{field} column has type {type_}; expected integer, decimal, float or decimal text",
            field=field,
        )
    _check_capacity(scaled.units, values, scale=scale, field=field)
    lossy, noise = _none_if_no_row(scaled.lossy), _none_if_no_row(scaled.noise)
    if lossy is not None and not allow_precision_loss:
        row = first_true(lossy)
        raise PrecisionLossError(
            f"{field} {quoted(values[row].as_py())} has more than {scale} decimals "
            f"({count_true(lossy)} such row(s)); raise the {field} scale or allow the loss "
            "explicitly",
            row=row,
            field=field,
        )
    return ScaledColumn(scaled.units, lossy, noise)


def _none_if_no_row(mask: pa.Array | None) -> pa.Array | None:
    return None if mask is None or not pc.any(mask).as_py() else mask


def _check_capacity(units: pa.Array, values: pa.Array, *, scale: int, field: str) -> None:
    out = pc.or_(pc.greater(units, MAX_UNITS), pc.less(units, -MAX_UNITS))
    row = first_true(out)
    if row is not None:
        _raise_capacity(values[row].as_py(), row=row, scale=scale, field=field)


def _raise_capacity(value: Any, *, row: int | None, scale: int, field: str) -> None:
    raise TickValidationError(
        f"{field} {quoted(value)} needs more than {MAX_DIGITS} digits at scale {scale} "
        f"(decimal({MAX_DIGITS}, {scale}))",
        row=row,
        field=field,
    )


def _units_from_integers(values: pa.Array, *, scale: int, field: str) -> pa.Array:
    as_int = _integers_to_int64(values, field=field)
    limit = MAX_UNITS // 10**scale
    row = first_true(pc.or_(pc.greater(as_int, limit), pc.less(as_int, -limit)))
    if row is not None:
        _raise_capacity(values[row].as_py(), row=row, scale=scale, field=field)
    return pc.multiply(as_int, 10**scale)


def _decimal_units(exact: pa.Array) -> pa.Array:
    """Unscaled int64 values of a decimal128 array (whose values fit int64)."""
    raw = pa.Array.from_buffers(
        pa.decimal128(38, 0), len(exact), exact.buffers(), exact.null_count, exact.offset
    )
    return pc.cast(raw, pa.int64())


def _units_from_decimals(
    values: pa.Array, *, scale: int, field: str, original: pa.Array | None = None
) -> ScaledColumn:
    """Decimal values at ``scale``: any discarded digit is loss (a decimal type is exact)."""
    source_scale = values.type.scale
    try:
        work = pc.cast(values, pa.decimal128(38, source_scale))
        lossy = None
        if source_scale > scale:
            rounded = pc.round(work, ndigits=scale, round_mode="half_to_even")
            lossy = pc.not_equal(work, rounded)
            work = rounded
        return ScaledColumn(_decimal_units(pc.cast(work, pa.decimal128(38, scale))), lossy)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return _units_python(values if original is None else original, scale=scale, field=field)


def _units_from_strings(values: pa.Array, *, scale: int, field: str) -> ScaledColumn:
    plain = _plain_decimal_units(values, scale)
    if plain is not None:
        return ScaledColumn(plain)
    text = pc.utf8_trim_whitespace(values)
    bad = first_true(pc.invert(pc.match_substring_regex(text, _NUMBER_PATTERN)))
    if bad is not None:
        raw = values[bad].as_py()
        if raw.strip().lower() in _NON_FINITE_WORDS:
            problem = "is not finite; expected a finite decimal number"
        else:
            problem = "is not a decimal number"
        raise TickValidationError(f"{field} {quoted(raw)} {problem}", row=bad, field=field)
    if not _digits_fit(pc.replace_substring_regex(text, r"[+\-.]|[eE].*$", ""), _ARROW_DIGITS):
        return _units_python(text, scale=scale, field=field)
    exact = pa.decimal128(38, scale)
    try:  # a failing cast parses the whole column: a leading sample answers for most files
        pc.cast(text.slice(0, _DETECTION_SAMPLE_ROWS), exact)
        return ScaledColumn(_decimal_units(pc.cast(text, exact)))
    except pa.ArrowInvalid:
        pass
    noisy = _units_from_noisy_text(text, scale)
    if noisy is not None:
        return noisy
    if scale < MAX_SCALE:
        try:
            wide = pc.cast(text, pa.decimal128(38, MAX_SCALE))
        except pa.ArrowInvalid:
            pass
        else:
            scaled = _units_from_decimals(wide, scale=scale, field=field, original=text)
            return scaled if scaled.noise is not None else _text_noise(text, scaled, scale)
    return _units_python(text, scale=scale, field=field)


_ARROW_DIGITS = 38
"""Digits of a decimal text's mantissa that Arrow's casts to decimal128 hold: its parser wraps a
wider one modulo 2**128 without an error (``2**128 + 5`` casts to 5), as its casts to decimal64
wrap one wider than :data:`MAX_DIGITS` modulo 2**64; such text takes the exact path."""


def _digits_fit(digits: pa.Array, limit: int) -> bool:
    """Whether each of ``digits`` (ASCII decimal digits only) has at most ``limit`` digits past
    its leading zeros (their byte lengths answer for most columns)."""
    if (pc.max(pc.binary_length(digits)).as_py() or 0) <= limit:
        return True
    return (pc.max(pc.binary_length(pc.utf8_ltrim(digits, characters="0"))).as_py() or 0) <= limit


def _units_from_noisy_text(text: pa.Array, scale: int) -> ScaledColumn | None:
    """Text whose only digits past ``scale`` are float noise, vectorized: the texts within the
    scale cast exactly, the others rounded through their doubles (float noise has one rounding,
    the same as the decimal's: see :func:`float_noise_rows`). None when a text past the scale is
    not noise or a value does not cast (the exact path decides, rounds and names it)."""
    decimals, _ = _text_decimals(text)
    beyond = pc.greater(decimals, scale)
    try:
        doubles = pc.cast(pc.filter(text, beyond), pa.float64())
        rounded = pc.round(pc.multiply(doubles, float(10**scale)), round_mode="half_to_even")
        if not pc.all(float_noise_rows(doubles, rounded, scale)).as_py():
            return None
        within = _decimal_units(
            pc.cast(pc.filter(text, pc.invert(beyond)), pa.decimal128(38, scale))
        )
    except pa.ArrowInvalid:
        return None
    zeros = pc.cast(pc.multiply(decimals, 0), pa.int64())
    units = pc.replace_with_mask(zeros, beyond, pc.cast(rounded, pa.int64()))
    return ScaledColumn(pc.replace_with_mask(units, pc.invert(beyond), within), None, beyond)


def _text_noise(text: pa.Array, scaled: ScaledColumn, scale: int) -> ScaledColumn:
    """``scaled`` (decimal text rounded half to even) with its rounded rows split into float
    noise and loss: only the rounded rows are parsed to doubles."""
    lossy = scaled.lossy
    if lossy is None or not pc.any(lossy).as_py():
        return scaled
    rows = pc.indices_nonzero(lossy)
    doubles = pc.cast(pc.take(text, rows), pa.float64())
    noise_rows = float_noise_rows(doubles, pc.take(scaled.units, rows), scale)
    noise = pc.replace_with_mask(lossy, lossy, noise_rows)
    return ScaledColumn(scaled.units, pc.and_not(lossy, noise), noise)


def _units_from_floats(values: pa.Array, *, scale: int, field: str) -> ScaledColumn:
    """Floats at ``scale``, judged by their shortest repr: exact, float noise or loss. Rows
    beyond 2**52 units and lossy rows (whose rounding must be that of the decimal value) are
    decided exactly from the shortest repr."""
    floats = pc.cast(values, pa.float64())
    bad = first_true(pc.invert(pc.is_finite(floats)))
    if bad is not None:
        raise TickValidationError(
            f"{field} {floats[bad].as_py()!r} is not finite; expected a finite number",
            row=bad,
            field=field,
        )
    rounded, exact, noise = _float_rounding(floats, scale)
    magnitude = pc.abs(rounded)
    row = first_true(pc.greater(magnitude, float(MAX_UNITS)))
    if row is not None:
        _raise_capacity(floats[row].as_py(), row=row, scale=scale, field=field)
    units = pc.cast(rounded, pa.int64())
    lossy = pc.invert(pc.or_(exact, noise))
    slow = pc.or_(pc.greater_equal(magnitude, _FLOAT_EXACT_LIMIT), lossy)
    slow_rows = pc.indices_nonzero(slow)
    if len(slow_rows) == 0:
        return ScaledColumn(units, lossy, noise)
    exactly = _units_python(pc.take(floats, slow_rows), scale=scale, field=field)
    return ScaledColumn(
        pc.replace_with_mask(units, slow, exactly.units),
        pc.replace_with_mask(lossy, slow, exactly.lossy),
        pc.replace_with_mask(noise, slow, exactly.noise),
    )


def _units_python(values: pa.Array, *, scale: int, field: str) -> ScaledColumn:
    """Exact per-row fallback for values the vectorized casts cannot hold (error paths, exponents
    with many digits, floats beyond 2**52 units, lossy floats): same rules, names the first bad
    row. Its masks are never None."""
    units: list[int] = []
    outcomes: list[str] = []
    for row, value in enumerate(values.to_pylist()):
        magnitude = _decimal_or_none(value)
        if magnitude is not None and abs(magnitude).scaleb(scale) > MAX_UNITS:
            _raise_capacity(value, row=row, scale=scale, field=field)
        unit, outcome = quantize(value, scale, row=row, field=field)
        if abs(unit) > MAX_UNITS:
            _raise_capacity(value, row=row, scale=scale, field=field)
        units.append(unit)
        outcomes.append(outcome)
    return ScaledColumn(
        pa.array(units, pa.int64()),
        pa.array([outcome == LOSS for outcome in outcomes], pa.bool_()),
        pa.array([outcome == FLOAT_NOISE for outcome in outcomes], pa.bool_()),
    )


def _decimal_or_none(value: Any) -> Decimal | None:
    try:
        number = Decimal(value.strip() if isinstance(value, str) else value)
    except (InvalidOperation, TypeError, ValueError):
        return None
    return number if number.is_finite() else None


# --- sides --------------------------------------------------------------------------------------


def side_codes(
    values: Any, side_map: Mapping[str, str] | None = None, *, field: str = "side"
) -> pa.Array:
    """Map raw side values to codes through an explicit vocabulary (default: the canonical
    BUY/SELL/UNKNOWN names). Integer columns are matched by their decimal text.

    Raises
    ------
    ConfigError
        The vocabulary itself is invalid.
    TickValidationError
        A null, or a value the vocabulary does not list (never defaulted; names the row).
    """
    vocabulary = resolve_side_map(CANONICAL_SIDES if side_map is None else side_map)
    values = _decode_dictionary(_as_array(values, field=field))
    _refuse_nulls(values, field=field)
    if pa.types.is_integer(values.type):
        values = pc.cast(values, pa.string())
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        raise TickValidationError(
            f"{field} column has type {values.type}; expected text", field=field
        )
    keys = list(vocabulary)
    positions = pc.index_in(values, value_set=pa.array(keys, values.type))
    if positions.null_count:
        row = first_true(pc.is_null(positions))
        raise TickValidationError(
            f"{field} {quoted(values[row].as_py())} is not in the side vocabulary "
            f"{sorted(keys)}; map it explicitly (an unmapped side is never defaulted)",
            row=row,
            field=field,
        )
    return pc.take(pa.array(list(vocabulary.values()), pa.int8()), positions)


# --- a whole batch ------------------------------------------------------------------------------

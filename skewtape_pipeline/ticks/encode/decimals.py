"""Exact decimals for tick prices: scaling to integer units at a number of decimals, and back.

Prices are stored as integers scaled by ``10**price_scale``. Rounding a value to the scale has
one of three outcomes (:func:`quantize`):

- ``exact``: no non-zero digit is discarded;
- ``float noise``: the discarded digits are binary64 representation noise
  (:func:`is_float_noise`): ``150.15000000000003`` at 2 or 4 decimals, ``0.1 + 0.2`` at 1 to
  8, ``7.000000000000001`` at 0. Stored rounded to the scale, counted apart, never loss;
- ``loss``: anything else discarded (``1.23456`` at 4 decimals), refused unless allowed.

The noise rule applies to decimal text and to floats (through their shortest repr, the text
a float pipeline writes); a Decimal or int is exact by type, so any discarded digit is loss.
Standard library only.
"""

from __future__ import annotations

import decimal
import struct
from decimal import Decimal

from skewtape_pipeline.errors import ConfigError, TickValidationError

MAX_PRICE_SCALE = 18
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

EXACT, FLOAT_NOISE, LOSS = "exact", "float noise", "loss"
"""The outcomes of rounding a value to a scale (see the module docstring)."""

FLOAT_NOISE_ULPS = 4096
"""Float noise lies within this many binary64 steps (ulps) of its rounding to the scale: one
arithmetic operation is 1 ulp off, a walk of 5,000 additions of 0.05 drifts 666. A discarded
digit of a value of at most 12 significant digits is at least 4,502 ulps away, so such a value
is never taken for noise."""
FLOAT_NOISE_UNIT_FRACTION = 0.01
"""Float noise is also under this fraction of one unit at the scale, so a digit one or two
places past the scale is loss at any magnitude (an 8-decimal quote at 7 decimals included)."""
FLOAT_NOISE_MAX_UNITS = 10**15
"""Float noise needs a rounding of at most 15 significant digits (``|units| < 10**15``), the
digits every binary64 holds: there distinct roundings are distinct doubles."""

_EXACT = decimal.Context(prec=80, traps=[decimal.InvalidOperation])


def check_price_scale(price_scale: object) -> int:
    """Return ``price_scale`` if it is an integer in 0..18, else raise ConfigError."""
    if (
        not isinstance(price_scale, int)
        or isinstance(price_scale, bool)
        or not 0 <= price_scale <= MAX_PRICE_SCALE
    ):
        raise ConfigError(
            f"price_scale = {price_scale!r}: expected an integer in 0..{MAX_PRICE_SCALE}"
        )
    return price_scale


def quantize(
    value: Decimal | float | int | str,
    scale: int,
    *,
    row: int | None = None,
    field: str = "price",
) -> tuple[int, str]:
    """Scale ``value`` to an integer at ``scale`` decimals (round half to even).

    Returns ``(units, outcome)``, the outcome one of :data:`EXACT`, :data:`FLOAT_NOISE` and
    :data:`LOSS`. A float is taken at its shortest repr; a float or a string whose discarded
    digits are binary64 noise (:func:`is_float_noise`) is :data:`FLOAT_NOISE`; for a Decimal
    or int any discarded non-zero digit is :data:`LOSS`. ``field`` names the column in errors.

    Raises
    ------
    TickValidationError
        On a non-finite, non-numeric or out-of-int64 value (names ``row`` and ``field``).
    """
    if isinstance(value, bool):
        raise TickValidationError(f"{field} {value!r} is a bool", row=row, field=field)
    if isinstance(value, int):
        units = value * 10**scale
        check_int64(units, row=row, field=field, what=f"{field} {value!r}")
        return units, EXACT
    number = _decimal_of(value, row=row, field=field)
    if not number.is_finite():
        raise TickValidationError(
            f"{field} {value!r} is not finite; expected a finite number", row=row, field=field
        )
    scaled = _EXACT.scaleb(number, scale)
    rounded = scaled.to_integral_value(rounding=decimal.ROUND_HALF_EVEN, context=_EXACT)
    units = int(rounded)
    check_int64(units, row=row, field=field, what=f"{field} {value!r} at scale {scale}")
    if rounded == scaled:
        return units, EXACT
    if isinstance(value, float | str) and is_float_noise(number, units, scale):
        return units, FLOAT_NOISE
    return units, LOSS


def quantize_price(
    price: Decimal | float | int | str,
    price_scale: int,
    *,
    row: int | None = None,
    field: str = "price",
) -> tuple[int, bool]:
    """:func:`quantize` as ``(units, lossy)``: ``lossy`` is True only for :data:`LOSS` (float
    noise is stored rounded and is not loss)."""
    units, outcome = quantize(price, price_scale, row=row, field=field)
    return units, outcome == LOSS


def is_float_noise(value: Decimal, units: int, scale: int) -> bool:
    """True when ``value``, rounded to ``units`` at ``scale`` decimals, lost only binary64
    representation noise. With ``x`` the double nearest ``value`` and ``q`` the double nearest
    ``units / 10**scale``: ``units`` is non-zero with at most 15 significant digits
    (:data:`FLOAT_NOISE_MAX_UNITS`), ``x`` and ``q`` are at most :data:`FLOAT_NOISE_ULPS` apart,
    and ``|x - q| * 10**scale`` is at most :data:`FLOAT_NOISE_UNIT_FRACTION`. A value that
    rounds to zero is never noise."""
    if units == 0 or abs(units) >= FLOAT_NOISE_MAX_UNITS:
        return False
    power = float(10**scale)
    nearest = float(units) / power  # both exact doubles: one correct rounding
    double = float(value)
    return (
        ulps_apart(double, nearest) <= FLOAT_NOISE_ULPS
        and abs(double - nearest) * power <= FLOAT_NOISE_UNIT_FRACTION
    )


def ulps_apart(a: float, b: float) -> int:
    """How many binary64 steps separate ``a`` and ``b`` (finite, of the same sign)."""
    bits_a, bits_b = struct.unpack("<2q", struct.pack("<2d", a, b))
    return abs(bits_a - bits_b)


def _decimal_of(value: object, *, row: int | None, field: str) -> Decimal:
    if isinstance(value, float):
        return Decimal(repr(value))
    if isinstance(value, Decimal):
        return value
    if isinstance(value, str):
        try:
            return Decimal(value.strip())
        except decimal.InvalidOperation:
            raise TickValidationError(
                f"{field} {value!r} is not a decimal number", row=row, field=field
            ) from None
    raise TickValidationError(
        f"{field} {value!r} has type {type(value).__name__}; expected Decimal, int, float or str",
        row=row,
        field=field,
    )


def units_to_decimal(units: int, scale: int) -> Decimal:
    """The exact Decimal ``units / 10**scale``: ``(7123456789, 4) -> 712345.6789``."""
    return Decimal(units).scaleb(-scale, context=_EXACT)


def format_units(units: int, scale: int) -> str:
    """``units / 10**scale`` as plain decimal text with exactly ``scale`` decimals."""
    digits = str(abs(units)).rjust(scale + 1, "0")
    text = f"{digits[:-scale]}.{digits[-scale:]}" if scale else digits
    return f"-{text}" if units < 0 else text


def check_int64(value: int, *, row: int | None, field: str, what: str) -> None:
    """Raise TickValidationError (naming ``row`` and ``field``) when ``value`` does not fit a
    signed 64-bit integer; ``what`` describes the value in the message."""
    if not INT64_MIN <= value <= INT64_MAX:
        raise TickValidationError(
            f"{what} does not fit a signed 64-bit field", row=row, field=field
        )

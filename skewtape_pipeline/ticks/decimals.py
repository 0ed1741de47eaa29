"""Exact decimals for tick prices: scaling to integer units at a number of decimals, and back.

Prices are stored as integers scaled by ``10**price_scale``. A float price is judged with a
noise bound (``150.15000000000003`` at 4 decimals is representation noise, not loss); a Decimal,
int or decimal string is exact (``"1.23456"`` at 4 decimals is loss). Standard library only.
"""

from __future__ import annotations

import decimal
from decimal import Decimal

from skewtape_pipeline.errors import ConfigError, TickValidationError

MAX_PRICE_SCALE = 18
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1

NOISE_RELATIVE = Decimal("1e-12")
"""Relative part of the float-noise bound, in scaled units (about 4500 double ULPs)."""
NOISE_ABSOLUTE = Decimal("1e-9")
"""Absolute part of the float-noise bound, in scaled units."""

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


def quantize_price(
    price: Decimal | float | int | str,
    price_scale: int,
    *,
    row: int | None = None,
    field: str = "price",
) -> tuple[int, bool]:
    """Scale ``price`` to an integer at ``price_scale`` decimals (round half to even).

    Returns ``(units, lossy)``. A float is taken at its shortest repr and ``lossy`` is True only
    when the discarded fraction exceeds the float-noise bound; for a Decimal, int or string any
    discarded non-zero digit is loss. ``field`` names the column in error messages.

    Raises
    ------
    TickValidationError
        On a non-finite, non-numeric or out-of-int64 value (names ``row`` and ``field``).
    """
    if isinstance(price, bool):
        raise TickValidationError(f"{field} {price!r} is a bool", row=row, field=field)
    if isinstance(price, int):
        units = price * 10**price_scale
        check_int64(units, row=row, field=field, what=f"{field} {price!r}")
        return units, False
    if isinstance(price, float):
        value = Decimal(repr(price))
    elif isinstance(price, Decimal):
        value = price
    elif isinstance(price, str):
        try:
            value = Decimal(price.strip())
        except decimal.InvalidOperation:
            raise TickValidationError(
                f"{field} {price!r} is not a decimal number", row=row, field=field
            ) from None
    else:
        raise TickValidationError(
            f"{field} {price!r} has type {type(price).__name__}; expected Decimal, int, float "
            "or str",
            row=row,
            field=field,
        )
    if not value.is_finite():
        raise TickValidationError(
            f"{field} {price!r} is not finite; expected a finite number", row=row, field=field
        )
    scaled = _EXACT.scaleb(value, price_scale)
    rounded = scaled.to_integral_value(rounding=decimal.ROUND_HALF_EVEN, context=_EXACT)
    residual = abs(_EXACT.subtract(scaled, rounded))
    if isinstance(price, float):
        lossy = residual > abs(scaled) * NOISE_RELATIVE + NOISE_ABSOLUTE
    else:
        lossy = residual != 0
    units = int(rounded)
    check_int64(units, row=row, field=field, what=f"{field} {price!r} at scale {price_scale}")
    return units, lossy


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

"""Exact decimals: a float's representation noise is not loss, a real extra digit is."""

from __future__ import annotations

from decimal import Context, Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewtape_pipeline.ticks.encode.decimals import (
    EXACT,
    FLOAT_NOISE,
    LOSS,
    format_units,
    quantize,
    quantize_price,
    units_to_decimal,
)


@pytest.mark.parametrize("price", [150.0 + 0.05 + 0.05 + 0.05, 0.1 + 0.2, 150.15000000000003])
def test_quantize_when_float_noise_is_not_flagged(price):
    units, lossy = quantize_price(price, 4)
    assert not lossy
    assert units == int(Decimal(repr(price)).quantize(Decimal("0.0001")).scaleb(4))


def test_quantize_when_real_fifth_decimal_at_scale_4_is_flagged():
    assert quantize_price(1.23456, 4) == (12346, True)
    assert quantize_price("1.23456", 4) == (12346, True)
    assert quantize_price(Decimal("1.23456"), 4) == (12346, True)


def test_units_when_formatted_and_converted_back_keep_every_digit():
    assert format_units(-712345, 4) == "-71.2345"
    assert format_units(5, 3) == "0.005"
    assert units_to_decimal(7123456789, 4) == Decimal("712345.6789")


def seed_walk(steps: int) -> list[float]:
    """A price walk built by repeated addition (the seed's: +0.05 twice, -0.05 once)."""
    price, walk = 150.0, []
    for i in range(steps):
        price += 0.05 if (i * 7919) % 3 else -0.05
        walk.append(price)
    return walk


def test_quantize_when_repeated_addition_walk_is_float_noise_never_loss():
    walk = seed_walk(5_000)
    outcomes = {quantize(price, 2)[1] for price in walk} | {
        quantize(repr(price), 2)[1] for price in walk
    }
    assert outcomes == {EXACT, FLOAT_NOISE}
    assert quantize(150.0 + 0.05 + 0.05 + 0.05, 4) == (1_501_500, FLOAT_NOISE)


@pytest.mark.parametrize("value", [0.1 + 0.2, "0.30000000000000004"])
@pytest.mark.parametrize("scale", [1, 2, 4, 8])
def test_quantize_when_point_one_plus_point_two_is_float_noise_at_any_scale(value, scale):
    assert quantize(value, scale) == (3 * 10 ** (scale - 1), FLOAT_NOISE)


@pytest.mark.parametrize("value", [1.23456, "1.23456"])
def test_quantize_when_fifth_decimal_at_scale_4_is_loss_and_at_5_exact(value):
    assert quantize(value, 4) == (12_346, LOSS)
    units, outcome = quantize(value, 5)
    assert outcome == EXACT
    assert units_to_decimal(units, 5) == Decimal("1.23456")


@pytest.mark.parametrize("value", [7.000000000000001, "7.000000000000001", "6.999999999999999"])
def test_quantize_when_quantity_has_float_noise_gives_whole_contracts(value):
    assert quantize(value, 0, field="quantity") == (7, FLOAT_NOISE)


@pytest.mark.parametrize(
    ("value", "scale"),
    [
        ("100000.12345678", 7),  # an 8-decimal quote at 7: a digit one place past the scale
        ("712345.67891", 4),  # a 5-decimal quote at 4, whatever the magnitude
        ("1.2345000001", 4),  # far under a unit, but thousands of times the double's noise
        ("5.551115123125783e-17", 4),  # rounds to zero: noise needs a non-zero rounding
        ("123456789012345.67", 1),  # a rounding of 16 digits: beyond what a double holds
    ],
)
def test_quantize_when_digits_beyond_noise_are_discarded_is_loss(value, scale):
    assert quantize(value, scale)[1] == LOSS


def test_quantize_when_decimal_type_has_noise_like_digits_is_loss():
    # A Decimal states its digits: only text and floats are judged for float noise.
    assert quantize(Decimal("150.15000000000003"), 4) == (1_501_500, LOSS)


EXACT_CONTEXT = Context(prec=1_000)
"""Counts a generated decimal's significant digits without rounding it first (the default
context's 28 digits would round 15624.99...9995004 to 15625, five digits)."""


@settings(max_examples=300, deadline=None)
@given(
    st.decimals(
        min_value=Decimal("-1e6"), max_value=Decimal("1e6"), allow_nan=False, places=None
    ).filter(lambda d: 0 < len(d.normalize(EXACT_CONTEXT).as_tuple().digits) <= 12),
    st.integers(min_value=0, max_value=12),
)
def test_quantize_when_value_has_at_most_12_significant_digits_is_never_taken_for_noise(
    value, scale
):
    units, outcome = quantize(str(value), scale)
    assert outcome != FLOAT_NOISE
    assert (outcome == EXACT) == (units_to_decimal(units, scale) == value)

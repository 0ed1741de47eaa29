"""Exact decimals: a float's representation noise is not loss, a real extra digit is."""

from __future__ import annotations

from decimal import Decimal

import pytest

from skewtape_pipeline.ticks.decimals import format_units, quantize_price, units_to_decimal


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

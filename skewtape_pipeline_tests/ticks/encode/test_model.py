"""Exact conversions into a TickBatch: strings, decimals, floats, integers, timestamps, sides."""

from __future__ import annotations

from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from skewtape_pipeline.errors import ConfigError, PrecisionLossError, TickValidationError
from skewtape_pipeline.ticks.encode.decimals import EXACT, FLOAT_NOISE, LOSS, quantize
from skewtape_pipeline.ticks.encode.exact_columns import exact_units, side_codes, timestamps_ns
from skewtape_pipeline.ticks.encode.model import (
    SchemaRequest,
    TickBatch,
    TickSchema,
    batch_from_columns,
)
from skewtape_pipeline.ticks.encode.sides import (
    BAN_SIDES,
    BSN_SIDES,
    BUY,
    KALSHI_TAKER_SIDES,
    SELL,
    UNKNOWN,
)


def units(values, scale, **kwargs):
    result, lossy, _ = exact_units(values, scale=scale, field="price", **kwargs)
    return result.to_pylist(), None if lossy is None else lossy.to_pylist()


def test_exact_units_when_decimal_strings_parse_exactly():
    values = ["712345.6789", "-37.63", "0.0001", "1e2", "+5", ".5", "5.", " 7 ", "-0"]
    assert units(values, 4) == (
        [7_123_456_789, -376_300, 1, 1_000_000, 50_000, 5_000, 50_000, 70_000, 0],
        None,
    )


def test_exact_units_when_string_has_extra_digit_raises_precision_loss_naming_row():
    with pytest.raises(PrecisionLossError) as info:
        units(["1.2345", "1.23456"], 4)
    assert (info.value.row, info.value.field) == (1, "price")
    assert "1.23456" in str(info.value)


def test_exact_units_when_string_zeros_beyond_scale_are_not_loss():
    assert units(["1.234500000", "2.10"], 4) == ([12_345, 21_000], None)


def test_exact_units_when_text_is_float_noise_stores_rounded_and_marks_noise():
    # What a float pipeline writes (pandas' to_csv): the digits past the scale are noise.
    text = ["150.15000000000003", "0.30000000000000004", "-37.63", "150.14999999999986"]
    result, lossy, noise = exact_units(text, scale=4, field="price")
    assert result.to_pylist() == [1_501_500, 3_000, -376_300, 1_501_500]
    assert lossy is None
    assert noise.to_pylist() == [True, True, False, True]


def test_exact_units_when_loss_allowed_rounds_half_even_and_marks_rows():
    result, lossy = units(["1.00005", "1.00015", "1.23456", "2.5"], 4, allow_precision_loss=True)
    assert result == [10_000, 10_002, 12_346, 25_000]
    assert lossy == [True, True, True, False]


@pytest.mark.parametrize("text", ["NaN", "inf", "-Infinity"])
def test_exact_units_when_string_not_finite_raises(text):
    with pytest.raises(TickValidationError, match="not finite") as info:
        units(["1", text], 2)
    assert info.value.row == 1


@pytest.mark.parametrize("text", ["", "abc", "1,5", "0x10", "1.2.3"])
def test_exact_units_when_string_not_a_number_raises(text):
    with pytest.raises(TickValidationError, match="not a decimal number"):
        units([text], 2)


def test_exact_units_when_floats_with_noise_are_not_flagged():
    walk = 150.0
    for _ in range(3):
        walk += 0.05
    result, lossy, noise = exact_units(
        pa.array([walk, 0.1 + 0.2, 150.15000000000003, -37.63]), scale=4, field="price"
    )
    assert result.to_pylist() == [1_501_500, 3_000, 1_501_500, -376_300]
    assert lossy is None
    assert noise.to_pylist() == [True, True, True, False]


def test_exact_units_when_float_has_real_extra_digit_raises():
    with pytest.raises(PrecisionLossError) as info:
        units(pa.array([1.2345, 1.23456]), 4)
    assert info.value.row == 1


def test_exact_units_when_float_loss_allowed_uses_decimal_value_rounding():
    # 1.00015 is just below ...015 in binary but its shortest repr is a tie: half-even -> 1.0002
    result, lossy = units(pa.array([1.00015, 1.23456]), 4, allow_precision_loss=True)
    assert result == [10_002, 12_346]
    assert lossy == [True, True]


@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_exact_units_when_float_not_finite_raises(value):
    with pytest.raises(TickValidationError, match="not finite"):
        units(pa.array([1.0, value]), 2)


def test_exact_units_when_large_float_is_exact():
    result, lossy = units(pa.array([712345.6789, 99999999999.9999]), 4)
    assert result == [7_123_456_789, 999_999_999_999_999]
    assert lossy is None


def test_exact_units_when_decimal_column_rescales_exactly():
    values = pa.array([Decimal("0.4037"), Decimal("-1.5000")], pa.decimal128(8, 4))
    assert units(values, 6) == ([403_700, -1_500_000], None)
    assert units(values, 2, allow_precision_loss=True) == ([40, -150], [True, False])
    with pytest.raises(PrecisionLossError):
        units(values, 2)


def test_exact_units_when_integers_scale_up():
    assert units(pa.array([99, 1], pa.int64()), 2) == ([9_900, 100], None)


def test_exact_units_when_value_needs_more_than_18_digits_raises():
    with pytest.raises(TickValidationError, match="18 digits") as info:
        units(pa.array([1, 10**15], pa.int64()), 4)
    assert info.value.row == 1
    with pytest.raises(TickValidationError, match="18 digits"):
        units(["12345678901234567890"], 0)


@pytest.mark.parametrize(
    ("text", "scale"),
    [
        (str(2**64 + 1), 0),  # decimal64's cast wraps it to 1
        (str(2**64), 0),
        ("-" + str(2**64 + 7), 0),
        ("99999999999999999999999", 0),
        (str(2**64 + 1) + ".25", 2),
        (str(2**128 + 5), 0),  # decimal128's cast wraps it to 5
        (str(2**128 + 5)[:-2] + "." + str(2**128 + 5)[-2:] + "e2", 2),
        ("0000" + str(2**128 + 5), 0),
    ],
)
def test_exact_units_when_text_is_wider_than_arrows_casts_raises_naming_the_row(text, scale):
    with pytest.raises(TickValidationError, match="needs more than 18 digits") as info:
        units(["1.5", "7", text, "2"], scale)
    assert info.value.row == 2 and text[:20] in str(info.value)


@pytest.mark.parametrize("text", [str(2**64 + 1), str(2**64 + 1) + ".5", "99999999999999999999999"])
def test_exact_units_when_plain_digits_are_wider_than_18_raises_naming_the_row(text):
    with pytest.raises(TickValidationError, match="needs more than 18 digits") as info:
        units(["7", "8", text], 0 if "." not in text else 1)
    assert info.value.row == 2


def test_exact_units_when_null_raises_naming_row():
    with pytest.raises(TickValidationError, match="missing") as info:
        units(pa.array(["1", None]), 2)
    assert info.value.row == 1


def test_exact_units_when_quantity_fractional_keeps_scale():
    result, _, _ = exact_units(["0.001", "23.139"], scale=3, field="quantity")
    assert result.to_pylist() == [1, 23_139]


def test_timestamps_when_strings_ints_and_timestamps_are_exact():
    big = 1_582_329_602_111_000_123
    assert timestamps_ns([str(big), "0"]).to_pylist() == [big, 0]
    assert timestamps_ns(pa.array([big], pa.int64())).to_pylist() == [big]
    assert timestamps_ns(pa.array([big], pa.timestamp("ns", "UTC"))).to_pylist() == [big]
    assert timestamps_ns(pa.array([5], pa.timestamp("us"))).to_pylist() == [5_000]


def test_timestamps_when_float_or_text_raises():
    with pytest.raises(TickValidationError, match="float"):
        timestamps_ns(pa.array([1.0]))
    with pytest.raises(TickValidationError) as info:
        timestamps_ns(["1", "1.5e18"])
    assert info.value.row == 1
    with pytest.raises(TickValidationError, match="int64"):
        timestamps_ns(["99999999999999999999"])


def test_side_codes_when_vocabularies_map_explicitly():
    assert side_codes(["BUY", "SELL", "UNKNOWN"]).to_pylist() == [BUY, SELL, UNKNOWN]
    assert side_codes(["yes", "no"], KALSHI_TAKER_SIDES).to_pylist() == [BUY, SELL]
    assert side_codes(["B", "S", "N"], BSN_SIDES).to_pylist() == [BUY, SELL, UNKNOWN]
    assert side_codes(["B", "A", "N"], BAN_SIDES).to_pylist() == [BUY, SELL, UNKNOWN]
    assert side_codes(pa.array([-1, 1]), {"-1": "BUY", "1": "SELL"}).to_pylist() == [BUY, SELL]


@pytest.mark.parametrize("value", ["S", "buy", "", "YES"])
def test_side_codes_when_value_unmapped_raises_never_defaults(value):
    with pytest.raises(TickValidationError, match="not in the side vocabulary") as info:
        side_codes(["yes", value], KALSHI_TAKER_SIDES)
    assert (info.value.row, info.value.field) == (1, "side")


def test_side_codes_when_vocabulary_invalid_raises_config_error():
    with pytest.raises(ConfigError):
        side_codes(["B"], {"B": "LONG"})
    with pytest.raises(ConfigError):
        side_codes(["B"], {})


def test_side_codes_when_empty_string_mapped_explicitly_is_accepted():
    assert side_codes(["", "B"], {"": "UNKNOWN", "B": "BUY"}).to_pylist() == [UNKNOWN, BUY]


def test_batch_from_columns_when_snapshot_fill_types_builds_exact_batch():
    columns = {
        "timestamp_nanos": pa.array([10, 20], pa.timestamp("ns", "UTC")),
        "price": pa.array([Decimal("0.4037"), Decimal("0.9900")], pa.decimal128(8, 4)),
        "quantity": pa.array([10, 20], pa.int64()),
        "side": pa.array(["yes", "no"]),
    }
    batch = batch_from_columns(
        columns, SchemaRequest("ns", price_scale=4, quantity_scale=0), side_map=KALSHI_TAKER_SIDES
    )
    assert batch.ts_ns.to_pylist() == [10, 20]
    assert batch.price.to_pylist() == [4037, 9900]
    assert batch.side.to_pylist() == [BUY, SELL]
    assert batch.price_precision_loss_ticks == 0


def test_batch_from_columns_when_lengths_differ_raises():
    with pytest.raises(TickValidationError, match="rows"):
        batch_from_columns(
            {"timestamp_nanos": [1, 2], "price": ["1"], "quantity": [1, 2], "side": ["BUY"] * 2},
            SchemaRequest("ns", price_scale=2, quantity_scale=0),
        )


def test_tick_batch_when_scale_out_of_range_raises_config_error():
    with pytest.raises(ConfigError, match="price_scale"):
        TickBatch.from_units([1], [1], [1], [1], TickSchema(price_scale=19))


def test_tick_batch_when_compared_reports_first_difference():
    a = TickBatch.from_units([1, 2], [5, 6], [1, 1], [1, 2], TickSchema(price_scale=2))
    b = TickBatch.from_units([1, 2], [5, 7], [1, 1], [1, 2], TickSchema(price_scale=2))
    assert a.equals(a.take(pa.array([0, 1])))
    assert a.first_difference(b) == "column price differs first at row 1: 6 vs 7"
    c = TickBatch.from_units([1, 2], [5, 6], [1, 1], [1, 2], TickSchema(price_scale=3))
    assert "scales differ" in a.first_difference(c)


def float_pipeline_values(draw_floats: list[float]) -> list[float]:
    """Floats as a float pipeline makes them: sums, products and walks of the drawn values."""
    walk, out = 0.0, []
    for x in draw_floats:
        walk += x
        out += [x, walk, x * 3, x / 7, x + 0.1]
    return out


@settings(max_examples=150, deadline=None)
@given(
    st.lists(
        st.decimals(min_value=-100_000, max_value=100_000, places=4).map(float),
        min_size=1,
        max_size=30,
    ),
    st.integers(min_value=0, max_value=8),
    st.booleans(),
)
def test_exact_units_when_floats_or_their_text_given_matches_the_scalar_rule(draw, scale, text):
    values = float_pipeline_values(draw)
    column = pa.array([repr(v) for v in values]) if text else pa.array(values)
    expected = [quantize(v, scale) for v in values]
    result = exact_units(column, scale=scale, field="price", allow_precision_loss=True)
    assert result.units.to_pylist() == [units for units, _ in expected]
    flagged = [
        "loss" if result.lossy is not None and result.lossy[i].as_py()
        else "noise" if result.noise is not None and result.noise[i].as_py()
        else "exact"
        for i in range(len(values))
    ]  # fmt: skip
    names = {EXACT: "exact", FLOAT_NOISE: "noise", LOSS: "loss"}
    assert flagged == [names[outcome] for _, outcome in expected]


def test_batch_from_columns_when_quantity_has_float_noise_stores_whole_contracts():
    columns = {
        "timestamp_nanos": [1, 2],
        "price": ["150.15000000000003", "0.30000000000000004"],
        "quantity": ["7.000000000000001", "5"],
        "side": ["BUY", "SELL"],
    }
    batch = batch_from_columns(columns, SchemaRequest("ns", price_scale=None, quantity_scale=None))
    assert (batch.price_scale, batch.quantity_scale) == (2, 0)
    assert batch.price.to_pylist() == [15_015, 30]
    assert batch.quantity.to_pylist() == [7, 5]
    assert (batch.price_float_noise_ticks, batch.quantity_float_noise_ticks) == (2, 1)
    assert batch.price_precision_loss_ticks == batch.quantity_precision_loss_ticks == 0
    assert batch.take(pa.array([1])).price_float_noise_ticks == 1

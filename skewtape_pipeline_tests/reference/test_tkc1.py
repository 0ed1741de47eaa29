"""The TKC1 reference model: the seed's whole verification list."""

from __future__ import annotations

import struct
import sys
import zlib
from decimal import Decimal

import pytest

from skewtape_pipeline.errors import (
    ConfigError,
    PrecisionLossError,
    RoundTripError,
    TickFormatError,
    TickValidationError,
)
from skewtape_pipeline.reference import tkc1
from skewtape_pipeline.reference.tkc1 import Tick
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.report import (
    RAW_SIZE_BASIS_CANONICAL_CSV,
    RAW_SIZE_BASIS_SUPPLIED,
)
from skewtape_pipeline.ticks.encode.sides import SIDE_CODES
from skewtape_pipeline.ticks.encode.sources import canonical_csv_bytes

BASE_NS = 1_700_000_000_000_000_000


def edge_ticks() -> list[Tick]:
    return [
        Tick(BASE_NS, 712345.6789, 10, "BUY"),
        Tick(BASE_NS, -37.63, 10**10, "SELL"),
        Tick(BASE_NS + 1, 150.25, 0, "UNKNOWN"),
        Tick(BASE_NS + 1_000_000, Decimal("0.0001"), 3, "BUY"),
    ]


def walk_ticks(n: int = 2_000) -> list[Tick]:
    price = 150.0
    ticks = []
    for i in range(n):
        price += 0.05 if (i * 7919) % 3 else -0.05
        ticks.append(Tick(BASE_NS + i * 1_250 + (i % 5) * 11, price, 100 + (i % 9) * 50,
                          ("BUY", "SELL", "UNKNOWN")[i % 3]))  # fmt: skip
    return ticks


def test_encode_when_edge_values_round_trip_field_for_field():
    ticks = edge_ticks()
    encoded = tkc1.encode_ticks(ticks, price_scale=4)
    decoded = tkc1.decode_ticks(encoded.buffer)
    assert decoded.price_scale == 4
    assert [t.timestamp_nanos for t in decoded.ticks] == [t.timestamp_nanos for t in ticks]
    assert [t.price for t in decoded.ticks] == [
        Decimal("712345.6789"),
        Decimal("-37.63"),
        Decimal("150.25"),
        Decimal("0.0001"),
    ]
    assert [t.quantity for t in decoded.ticks] == [10, 10**10, 0, 3]
    assert {t.side for t in decoded.ticks} == {"BUY", "SELL", "UNKNOWN"}
    assert encoded.price_precision_loss_ticks == 0


def test_encode_when_values_overflow_32_bits_keeps_64_bit_fields():
    encoded = tkc1.encode_ticks(edge_ticks(), price_scale=4)
    n = 4
    prices = struct.unpack_from(f">{n}q", encoded.buffer, tkc1.HEADER_SIZE + 8 * n)
    quantities = struct.unpack_from(f">{n}q", encoded.buffer, tkc1.HEADER_SIZE + 16 * n)
    assert prices[0] == 7_123_456_789 > 2**31
    assert quantities[1] == 10**10 > 2**32


def test_layout_when_encoded_is_14_plus_25_bytes_per_tick_with_header():
    ticks = edge_ticks()
    buffer = tkc1.encode_ticks(ticks, price_scale=4).buffer
    assert len(buffer) == 14 + len(ticks) * 25
    magic, version, scale, count = struct.unpack_from(">4sBBQ", buffer, 0)
    assert (magic, version, scale, count) == (b"TKC1", 1, 4, len(ticks))
    n = len(ticks)
    ts_deltas = struct.unpack_from(f">{n}q", buffer, 14)
    price_deltas = struct.unpack_from(f">{n}q", buffer, 14 + 8 * n)
    assert ts_deltas[0] == BASE_NS
    assert ts_deltas[1:] == (0, 1, 999_999)
    assert price_deltas[0] == 7_123_456_789
    assert price_deltas[1] == -376_300 - 7_123_456_789
    sides = buffer[14 + 24 * n :]
    assert list(sides) == [SIDE_CODES[t.side] for t in ticks]


def test_layout_when_empty_batch_is_header_only_and_decodes_empty():
    buffer = tkc1.encode_ticks([], price_scale=2).buffer
    assert len(buffer) == 14
    assert tkc1.decode_ticks(buffer).ticks == []


def test_columnar_when_same_deltas_row_major_compress_larger_at_same_level():
    buffer = tkc1.encode_ticks(walk_ticks(), price_scale=4).buffer
    row_major = tkc1.repack_row_major(buffer)
    assert len(row_major) == len(buffer)
    assert sorted(row_major) == sorted(buffer)
    assert len(zlib.compress(buffer, 6)) < len(zlib.compress(row_major, 6))


def test_encode_when_fifth_decimal_at_scale_4_raises_precision_loss():
    with pytest.raises(PrecisionLossError) as info:
        tkc1.encode_ticks([Tick(BASE_NS, 1.23456, 1, "BUY")], price_scale=4)
    assert info.value.row == 0
    assert info.value.field == "price"


def test_encode_when_loss_allowed_counts_it():
    ticks = [Tick(BASE_NS, 1.23456, 1, "BUY"), Tick(BASE_NS + 1, 1.2345, 1, "SELL")]
    encoded = tkc1.encode_ticks(ticks, price_scale=4, allow_precision_loss=True)
    assert encoded.price_precision_loss_ticks == 1
    assert tkc1.decode_ticks(encoded.buffer).ticks[0].price == Decimal("1.2346")


def test_encode_when_same_quote_at_scale_5_is_lossless_and_round_trips():
    encoded = tkc1.encode_ticks([Tick(BASE_NS, 1.23456, 1, "BUY")], price_scale=5)
    assert encoded.price_precision_loss_ticks == 0
    assert tkc1.decode_ticks(encoded.buffer).ticks[0].price == Decimal("1.23456")


def test_baseline_when_no_size_given_is_canonical_csv_measured():
    ticks = walk_ticks(300)
    _, report = tkc1.compact_tkc1("SYM", ticks, age_days=3)
    assert report.raw_size_bytes == tkc1.canonical_csv_size_bytes(ticks, price_scale=4)
    assert report.raw_size_basis == RAW_SIZE_BASIS_CANONICAL_CSV


def test_baseline_when_size_supplied_is_that_size_and_basis_differs():
    ticks = walk_ticks(300)
    _, report = tkc1.compact_tkc1("SYM", ticks, age_days=3, raw_size_bytes=123_456)
    assert report.raw_size_bytes == 123_456
    assert report.raw_size_basis == RAW_SIZE_BASIS_SUPPLIED != RAW_SIZE_BASIS_CANONICAL_CSV


def test_baseline_when_rows_differ_in_width_is_not_bytes_per_row_constant():
    short = [Tick(BASE_NS + i, 1, 1, "BUY") for i in range(100)]
    wide = [Tick(BASE_NS + i, 712345.6789, 10**10, "UNKNOWN") for i in range(100)]
    short_size = tkc1.canonical_csv_size_bytes(short)
    wide_size = tkc1.canonical_csv_size_bytes(wide)
    assert short_size != wide_size
    assert short_size / len(short) != wide_size / len(wide)


def test_canonical_csv_when_same_ticks_matches_parquet_side_serializer():
    ticks = edge_ticks()
    text = tkc1.canonical_csv_text(ticks, price_scale=4)
    batch = TickBatch.from_units(
        [t.timestamp_nanos for t in ticks],
        [tkc1.quantize_price(t.price, 4)[0] for t in ticks],
        [t.quantity for t in ticks],
        [SIDE_CODES[t.side] for t in ticks],
        TickSchema(price_scale=4),
    )
    assert canonical_csv_bytes(batch).decode() == text
    assert text.splitlines()[0] == "timestamp_nanos,price,quantity,side"
    assert text.splitlines()[2] == f"{BASE_NS},-37.6300,10000000000,SELL"


def test_target_when_ratio_compared_meets_five_and_fails_one_above():
    ticks = walk_ticks(5_000)
    _, report = tkc1.compact_tkc1("SYM", ticks, age_days=3)
    assert report.compression_ratio > 5.0
    assert report.meets_compression_target is True
    _, stricter = tkc1.compact_tkc1(
        "SYM", ticks, age_days=3, target_ratio=report.compression_ratio + 1
    )
    assert stricter.meets_compression_target is False
    assert stricter.compression_ratio == pytest.approx(report.compression_ratio)


def test_compact_when_report_built_records_codec_tier_and_verification():
    blob, report = tkc1.compact_tkc1("SYM", walk_ticks(50), age_days=40, codec="zlib", level=6)
    assert (blob.codec, blob.level) == ("zlib", 6)
    assert (report.codec, report.compression_level) == ("zlib", 6)
    assert report.tier == "WARM"
    assert report.round_trip_verified
    assert report.compacted_size_bytes == len(blob.data)
    assert report.to_dict()["tier_policy"]["warm_max_age_days"] == 90


def test_compress_when_zstd_asked_records_zstd_and_decompresses():
    payload = tkc1.encode_ticks(walk_ticks(100)).buffer
    blob = tkc1.compress(payload, codec="zstd", level=3)
    assert (blob.codec, blob.level) == ("zstd", 3)
    assert blob.data[:4] == b"\x28\xb5\x2f\xfd"
    assert tkc1.decompress(blob) == payload


def test_compress_when_zstandard_missing_raises_instead_of_falling_back(monkeypatch):
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(ConfigError, match="zstandard"):
        tkc1.compress(b"abc", codec="zstd")
    assert tkc1.compress(b"abc", codec="zlib").codec == "zlib"


@pytest.mark.parametrize(
    ("codec", "level"), [("lz4", None), ("zlib", 10), ("zstd", 0), ("zlib", True)]
)
def test_compress_when_codec_or_level_invalid_raises_config_error(codec, level):
    with pytest.raises(ConfigError):
        tkc1.compress(b"abc", codec=codec, level=level)


def test_encode_when_timestamp_goes_backwards_names_row():
    ticks = [
        Tick(BASE_NS + 5, 1, 1, "BUY"),
        Tick(BASE_NS + 5, 1, 1, "BUY"),
        Tick(BASE_NS, 1, 1, "SELL"),
    ]
    with pytest.raises(TickValidationError) as info:
        tkc1.encode_ticks(ticks)
    assert (info.value.row, info.value.field) == (2, "timestamp_nanos")


@pytest.mark.parametrize("side", ["B", "buy", "", None, "Buy"])
def test_encode_when_side_unrecognized_raises_not_defaults(side):
    with pytest.raises(TickValidationError) as info:
        tkc1.encode_ticks([Tick(BASE_NS, 1, 1, "BUY"), Tick(BASE_NS, 1, 1, side)])
    assert (info.value.row, info.value.field) == (1, "side")


@pytest.mark.parametrize(
    "price", [float("nan"), float("inf"), float("-inf"), "NaN", Decimal("sNaN")]
)
def test_encode_when_price_not_finite_raises(price):
    with pytest.raises(TickValidationError) as info:
        tkc1.encode_ticks([Tick(BASE_NS, price, 1, "BUY")])
    assert info.value.field == "price"


def test_encode_when_quantity_negative_raises():
    with pytest.raises(TickValidationError) as info:
        tkc1.encode_ticks([Tick(BASE_NS, 1, -1, "BUY")])
    assert info.value.field == "quantity"


def test_encode_when_negative_price_is_accepted():
    decoded = tkc1.decode_ticks(tkc1.encode_ticks([Tick(BASE_NS, -37.63, 1, "BUY")]).buffer)
    assert decoded.ticks[0].price == Decimal("-37.63")


def test_compact_when_age_days_missing_raises():
    with pytest.raises(ConfigError, match="age_days"):
        tkc1.compact_tkc1("SYM", edge_ticks(), age_days=None)  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        tkc1.compact_tkc1("SYM", edge_ticks())  # type: ignore[call-arg]
    with pytest.raises(ConfigError):
        tkc1.compact_tkc1("SYM", edge_ticks(), age_days=-1)


@pytest.mark.parametrize("raw_size", [0, -5, True, 1.5])
def test_compact_when_raw_size_not_positive_int_raises(raw_size):
    with pytest.raises(ConfigError, match="raw_size_bytes"):
        tkc1.compact_tkc1("SYM", edge_ticks(), age_days=1, raw_size_bytes=raw_size)


def test_decode_when_magic_bad_raises():
    buffer = bytearray(tkc1.encode_ticks(edge_ticks()).buffer)
    buffer[:4] = b"TKC2"
    with pytest.raises(TickFormatError, match="magic"):
        tkc1.decode_ticks(bytes(buffer))


def test_decode_when_version_unsupported_raises():
    buffer = bytearray(tkc1.encode_ticks(edge_ticks()).buffer)
    buffer[4] = 2
    with pytest.raises(TickFormatError, match="version"):
        tkc1.decode_ticks(bytes(buffer))


def test_decode_when_truncated_raises():
    buffer = tkc1.encode_ticks(edge_ticks()).buffer
    with pytest.raises(TickFormatError, match="truncated"):
        tkc1.decode_ticks(buffer[:-1])
    with pytest.raises(TickFormatError, match="header"):
        tkc1.decode_ticks(buffer[:10])


def test_decode_when_over_long_raises():
    buffer = tkc1.encode_ticks(edge_ticks()).buffer
    with pytest.raises(TickFormatError, match="over-long"):
        tkc1.decode_ticks(buffer + b"\x00")


def test_decode_when_side_code_corrupt_raises():
    buffer = bytearray(tkc1.encode_ticks(edge_ticks()).buffer)
    buffer[-1] = 7
    with pytest.raises(TickFormatError, match="side code"):
        tkc1.decode_ticks(bytes(buffer))


def test_compact_when_blob_does_not_decode_back_raises_round_trip(monkeypatch):
    real = tkc1.decode_ticks

    def tampered(buffer):
        decoded = real(buffer)
        first = decoded.ticks[0]
        decoded.ticks[0] = Tick(first.timestamp_nanos, first.price + 1, first.quantity, first.side)
        return decoded

    monkeypatch.setattr(tkc1, "decode_ticks", tampered)
    with pytest.raises(RoundTripError, match="tick 0"):
        tkc1.compact_tkc1("SYM", edge_ticks(), age_days=1)

"""The compaction report: its notes read from its own fields, in a fixed order."""

from __future__ import annotations

from dataclasses import replace

from skewtape_pipeline.ticks.encode.report import TickStorageCompactionReport

CLEAN = TickStorageCompactionReport(
    symbol="S", date="2026-11-20", tick_count=10, raw_size_bytes=600,
    raw_size_basis="supplied", compacted_size_bytes=100, compression_ratio=6.0,
    target_compression_ratio=5.0, meets_compression_target=True, archive_format="parquet",
    codec="ZSTD", compression_level=1, encodings={}, price_scale=2, quantity_scale=0,
    price_precision_loss_ticks=0, quantity_precision_loss_ticks=0, reordered_ticks=0,
    tier="HOT", age_days=0, tier_policy={}, round_trip_verified=True, path=None, seconds=0.1,
)  # fmt: skip


def test_noted_when_nothing_to_say_keeps_only_the_extra_lines():
    assert CLEAN.noted().notes == []
    assert CLEAN.noted("replaced an older file").notes == ["replaced an older file"]


def test_noted_when_every_field_speaks_says_each_once_in_order_then_the_extra():
    report = replace(
        CLEAN, price_float_noise_normalized=3, quantity_float_noise_normalized=1,
        price_precision_loss_ticks=2, quantity_precision_loss_ticks=4, reordered_ticks=5,
        compression_ratio=4.5, meets_compression_target=False,
    )  # fmt: skip
    notes = report.noted("replaced an older file").notes
    assert notes == [
        "3 price(s) carried float noise beyond 2 decimals (e.g. 150.15000000000003); stored "
        "rounded to the scale, not precision loss",
        "1 quantity(ies) carried float noise beyond 0 decimals (e.g. 150.15000000000003); "
        "stored rounded to the scale, not precision loss",
        "2 price(s) rounded half-even to 2 decimals (loss allowed by the caller; the dropped "
        "digits are not recoverable)",
        "4 quantity(ies) rounded half-even to 0 decimals (loss allowed by the caller)",
        "5 tick(s) moved by the explicit timestamp sort",
        "compression ratio 4.50 is below the target 5.00 (baseline: supplied)",
        "replaced an older file",
    ]
    assert report.notes == []  # the report itself is unchanged

"""The Parquet archive: schema, encodings, checksums, layout, verification, exact round trips."""

from __future__ import annotations

import json
import random
import shutil
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import RoundTripError, TickFormatError
from skewtape_pipeline.ticks.archive import parquet_store
from skewtape_pipeline.ticks.archive.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.parquet_store import (
    decode_symbol,
    encode_symbol,
    partition_file,
    prepare_archive_file,
    publish_archive_file,
    read_archive_batch,
    read_archive_table,
    read_file_facts,
    verify_archive_file,
)
from skewtape_pipeline.ticks.archive.tiers import TierPolicy, TierSettings
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline_tests.ticks.conftest import DAY, DAY_NS, archive_at, day_batch, make_batch

HOT = TierSettings(compression_level=1, encoding_sample_rows=1_000)
DICTIONARY = "RLE_DICTIONARY"
UNCOMPRESSED = TierSettings(compression="none", compression_level=None)


def write_archive_file(batch: TickBatch, target: Path, *, settings, metadata) -> None:
    """Stage and publish ``target`` (``<root>/symbol=/year=/month=/date=/part-0.parquet``)."""
    root = target.parents[4]
    prepared = prepare_archive_file(
        batch, target, archive_root=root, settings=settings, metadata=metadata
    )
    try:
        publish_archive_file(prepared)
    finally:
        prepared.discard()


def write(tmp_path: Path, batch: TickBatch, *, symbol: str = "SYM", settings=HOT) -> Path:
    target = partition_file(tmp_path, symbol, DAY)
    write_archive_file(batch, target, settings=settings, metadata={"skewtape.symbol": symbol})
    return target


def edge_batch(quantity_scale: int = 0) -> TickBatch:
    return make_batch(
        [
            (DAY_NS, 7_123_456_789, 10**10, 1),
            (DAY_NS, -376_300, 1, 2),
            (DAY_NS + 1, 1, 0, 0),
            (DAY_NS + 86_399_999_999_999, 999_999_999_999_999_999, 5, 1),
        ],
        price_scale=4,
        quantity_scale=quantity_scale,
    )


@pytest.mark.parametrize(
    "symbol", ["A/B", "X=Y%Z", ".hidden", "..", "a b", "Ünï", "ES 03-26", "?*:\\", "BTC-USDT"]
)
def test_encode_symbol_when_awkward_is_one_safe_reversible_segment(symbol):
    segment = encode_symbol(symbol)
    assert "/" not in segment and "\\" not in segment and "=" not in segment
    assert not segment.startswith(".")
    assert decode_symbol(segment) == symbol


@pytest.mark.parametrize("symbol", ["", None, "x" * 201])
def test_encode_symbol_when_empty_or_too_long_raises(symbol):
    with pytest.raises(Exception, match="symbol") as info:
        encode_symbol(symbol)
    assert type(info.value).__name__ == "TickValidationError"


def test_layout_when_awkward_symbols_read_back_by_duckdb_and_pyarrow(tmp_path):
    symbols = ["A/B", "X=Y%Z", ".hidden", "Ünï", "a b"]
    for symbol in symbols:
        write(tmp_path, day_batch(5), symbol=symbol)
    got = duckdb.sql(
        f"SELECT DISTINCT symbol, date FROM read_parquet('{tmp_path}/**/*.parquet', "
        "hive_partitioning=true)"
    ).fetchall()
    assert sorted(got) == sorted((s, DAY) for s in symbols)
    table = ds.dataset(tmp_path, partitioning="hive").to_table(columns=["symbol"])
    assert set(table.column("symbol").to_pylist()) == set(symbols)
    path = partition_file(tmp_path, "A/B", DAY)
    assert path.relative_to(tmp_path).parts == (
        "symbol=A%2FB", "year=2026", "month=11", "date=2026-11-20", "part-0.parquet"
    )  # fmt: skip


@pytest.mark.parametrize("quantity_scale", [0, 8])
def test_schema_when_written_is_self_describing_int64_decimals(tmp_path, quantity_scale):
    path = write(tmp_path, edge_batch(quantity_scale))
    schema = pq.ParquetFile(path).schema
    ts, price, quantity, side = (schema.column(i) for i in range(4))
    assert ts.physical_type == "INT64"
    assert json.loads(ts.logical_type.to_json())["isAdjustedToUTC"] is True
    assert json.loads(ts.logical_type.to_json())["timeUnit"] == "nanoseconds"
    assert (price.physical_type, price.precision, price.scale) == ("INT64", 18, 4)
    assert quantity.physical_type == "INT64"
    if quantity_scale:
        assert (quantity.precision, quantity.scale) == (18, quantity_scale)
    else:
        assert str(quantity.logical_type) == "None"
    assert (side.physical_type, str(side.logical_type)) == ("BYTE_ARRAY", "String")
    assert {c.max_definition_level for c in (ts, price, quantity, side)} == {0}


def test_file_when_written_has_checksums_page_index_and_sorting_column(tmp_path):
    path = write(tmp_path, day_batch(200))
    meta = pq.ParquetFile(path).metadata
    group = meta.row_group(0)
    for c in range(group.num_columns):
        assert group.column(c).has_offset_index and group.column(c).has_column_index
    assert read_file_facts(path).sorting_columns == ["ts"]
    encodings = read_file_facts(path).encodings
    assert "DELTA_BINARY_PACKED" in encodings["ts"]
    assert "RLE_DICTIONARY" in encodings["side"]


def test_file_when_a_page_byte_flips_fails_checksum_verification(tmp_path):
    batch = day_batch(2_000)
    path = write(tmp_path, batch, settings=UNCOMPRESSED)
    data = bytearray(path.read_bytes())
    data[200] ^= 0xFF
    broken = tmp_path / "broken.parquet"
    broken.write_bytes(bytes(data))
    with pytest.raises(RoundTripError, match="does not read back"):
        verify_archive_file(broken, batch)
    verify_archive_file(path, batch)


def test_encodings_when_decimals_heavy_tailed_chooses_byte_stream_split_read_exactly(tmp_path):
    rng = random.Random(11)
    rows = [(DAY_NS + i, int(rng.lognormvariate(8, 2)), int(rng.lognormvariate(8, 2)), i % 3)
            for i in range(4_000)]  # fmt: skip
    batch = make_batch(rows, price_scale=4, quantity_scale=3)
    choice = parquet_store.choose_encodings(parquet_store.archive_table(batch), HOT)
    for name in ("price", "quantity"):
        trials = choice.trial_bytes[name]
        assert set(trials) == {"DELTA_BINARY_PACKED", "PLAIN", "BYTE_STREAM_SPLIT", DICTIONARY}
        assert min(trials, key=trials.get) == "BYTE_STREAM_SPLIT"  # measured, not assumed
    path = write(tmp_path, batch)
    encodings = read_file_facts(path).encodings
    assert all("BYTE_STREAM_SPLIT" in encodings[name] for name in ("price", "quantity"))
    column = pq.ParquetFile(path).schema.column(1)
    assert (column.physical_type, column.scale) == ("INT64", 4)
    assert read_archive_batch(path).equals(batch)
    expected = [(Decimal(p).scaleb(-4), Decimal(q).scaleb(-3)) for _, p, q, _ in rows]
    assert duckdb.sql(f"SELECT price, quantity FROM read_parquet('{path}')").fetchall() == expected
    table = pq.read_table(path)
    assert list(zip(table.column("price").to_pylist(), table.column("quantity").to_pylist(),
                    strict=True)) == expected  # fmt: skip


def test_encodings_when_ts_not_sorted_measures_it_else_keeps_delta():
    batch = make_batch([(DAY_NS + (i % 50) * 1_000_003, 1, 1, 1) for i in range(2_000)])
    table = parquet_store.archive_table(batch)
    assert "ts" not in parquet_store.choose_encodings(table, HOT).trial_bytes
    assert parquet_store.choose_encodings(table, HOT).column_encoding["ts"] == "DELTA_BINARY_PACKED"
    measured = parquet_store.choose_encodings(table, HOT, ts_sorted=False)
    trials = measured.trial_bytes["ts"]
    assert set(trials) == {"DELTA_BINARY_PACKED", "PLAIN", "BYTE_STREAM_SPLIT"}
    assert measured.column_encoding["ts"] == min(trials, key=trials.get)


def test_side_dictionary_when_two_sides_present_holds_only_those_names(tmp_path):
    two = make_batch([(DAY_NS + i, 100, 1, 1 + i % 2) for i in range(1_000)])
    three = make_batch([(DAY_NS + i, 100, 1, i % 3) for i in range(1_000)])
    assert parquet_store.side_dictionary(two.side).dictionary.to_pylist() == ["BUY", "SELL"]
    assert parquet_store.side_dictionary(three.side).dictionary.to_pylist() == [
        "UNKNOWN", "BUY", "SELL"
    ]  # fmt: skip
    only_sell = make_batch([(DAY_NS + i, 100, 1, 2) for i in range(10)])
    path = write(tmp_path, only_sell)
    assert read_archive_batch(path).equals(only_sell)
    sides = duckdb.sql(f"SELECT DISTINCT side FROM read_parquet('{path}')").fetchall()
    assert sides == [("SELL",)]
    assert read_archive_batch(write(tmp_path, two, symbol="T")).equals(two)


def test_encodings_when_few_distinct_prices_chooses_dictionary_by_measure(tmp_path):
    rng = random.Random(7)
    cents = make_batch(
        [(DAY_NS + i * 997, rng.randrange(1, 100) * 100, rng.randrange(1, 500), rng.randrange(3))
         for i in range(5_000)]
    )  # fmt: skip
    table = parquet_store.archive_table(cents)
    choice = parquet_store.choose_encodings(table, HOT)
    assert "price" in choice.dictionary_columns
    assert min(choice.trial_bytes["price"], key=choice.trial_bytes["price"].get) == (
        "RLE_DICTIONARY"
    )
    walk = make_batch([(DAY_NS + i, 1_500_000 + i, 1, 1) for i in range(5_000)])
    choice = parquet_store.choose_encodings(parquet_store.archive_table(walk), HOT)
    assert choice.column_encoding["price"] == "DELTA_BINARY_PACKED"


def test_encodings_when_byte_stream_split_disabled_never_offers_it(tmp_path):
    rng = random.Random(3)
    batch = make_batch([(DAY_NS + i, 1, rng.randrange(10**12), 1) for i in range(2_000)])
    table = parquet_store.archive_table(batch)
    offered = parquet_store.choose_encodings(table, HOT).trial_bytes["quantity"]
    assert "BYTE_STREAM_SPLIT" in offered
    strict = TierSettings(compression_level=1, byte_stream_split=False)
    choice = parquet_store.choose_encodings(table, strict)
    assert "BYTE_STREAM_SPLIT" not in choice.trial_bytes["quantity"]
    path = write(tmp_path, batch, settings=strict)
    assert "BYTE_STREAM_SPLIT" not in read_file_facts(path).encodings["quantity"]


def test_round_trip_when_edge_values_read_exactly_by_pyarrow_and_duckdb(tmp_path):
    batch = edge_batch(quantity_scale=8)
    path = write(tmp_path, batch)
    assert read_archive_batch(path).equals(batch)
    table = pq.read_table(path)
    assert table.column("price").to_pylist() == [
        Decimal("712345.6789"), Decimal("-37.63"), Decimal("0.0001"),
        Decimal("99999999999999.9999"),
    ]  # fmt: skip
    assert table.column("quantity").to_pylist()[0] == Decimal("100")
    rows = duckdb.sql(
        f"SELECT epoch_ns(ts), price, quantity, side FROM read_parquet('{path}')"
    ).fetchall()
    assert rows == [
        (DAY_NS, Decimal("712345.6789"), Decimal("100.00000000"), "BUY"),
        (DAY_NS, Decimal("-37.6300"), Decimal("0.00000001"), "SELL"),
        (DAY_NS + 1, Decimal("0.0001"), Decimal("0E-8"), "UNKNOWN"),
        (DAY_NS + 86_399_999_999_999, Decimal("99999999999999.9999"), Decimal("5E-8"), "BUY"),
    ]


def test_write_when_verification_fails_publishes_nothing(tmp_path, monkeypatch):
    batch = day_batch(10)

    def tampered(path):
        table, schema = read_archive_table(path)
        return schema, iter([table.take(pa.array([1, 0, *range(2, table.num_rows)]))])

    monkeypatch.setattr(parquet_store, "read_archive_row_groups", tampered)
    target = partition_file(tmp_path, "SYM", DAY)
    with pytest.raises(RoundTripError, match="differs"):
        write_archive_file(batch, target, settings=HOT, metadata={})
    assert not target.exists()
    assert fsio.remove_stale_temps(tmp_path) == 0


def test_write_when_rewrite_fails_keeps_previous_good_file(tmp_path, monkeypatch):
    first = day_batch(10)
    target = write(tmp_path, first)
    table, schema = read_archive_table(target)
    monkeypatch.setattr(
        parquet_store, "read_archive_row_groups", lambda path: (schema, iter([table]))
    )
    with pytest.raises(RoundTripError):
        write_archive_file(day_batch(12), target, settings=HOT, metadata={})
    monkeypatch.undo()
    assert read_archive_batch(target).equals(first)


def test_write_when_partition_rewritten_replaces_it_and_removes_other_parts(tmp_path):
    target = write(tmp_path, day_batch(10))
    stray = target.parent / "part-1.parquet"
    shutil.copy(target, stray)
    second = day_batch(25)
    write(tmp_path, second)
    assert sorted(p.name for p in target.parent.iterdir()) == ["part-0.parquet"]
    assert read_archive_batch(target).equals(second)


def test_read_archive_batch_when_not_an_archive_file_raises(tmp_path):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"ts": [1]}), path)
    with pytest.raises(TickFormatError, match="not a tick archive"):
        read_archive_batch(path)


def test_report_when_writer_changes_codec_reports_what_file_says(tmp_path, monkeypatch):
    real = parquet_store._write_parquet

    def snappy_writer(table, path, *, settings, choice, key_values):
        real(table, path, settings=TierSettings(compression="snappy", compression_level=None),
             choice=choice, key_values=key_values)  # fmt: skip

    monkeypatch.setattr(parquet_store, "_write_parquet", snappy_writer)
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()), day_batch(30), symbol="SYM", day=DAY, age_days=0
    )
    assert report.codec == "SNAPPY"
    footer = pq.ParquetFile(report.path).metadata.row_group(0)
    assert {footer.column(c).compression for c in range(4)} == {"SNAPPY"}
    assert report.encodings == read_file_facts(Path(report.path)).encodings


def test_report_when_tier_uses_gzip_reads_codec_and_level_from_file(tmp_path):
    policy = TierPolicy(hot=TierSettings(compression="gzip", compression_level=5))
    report = compact_symbol_day(
        archive_at(tmp_path, policy), day_batch(30), symbol="SYM", day=DAY, age_days=1
    )
    meta = pq.ParquetFile(report.path).metadata
    assert report.codec == meta.row_group(0).column(0).compression == "GZIP"
    assert report.compression_level == int(meta.metadata[b"skewtape.compression_level"]) == 5
    assert report.compacted_size_bytes == Path(report.path).stat().st_size
    assert (report.price_scale, report.quantity_scale) == (
        int(meta.metadata[b"skewtape.price_scale"]),
        int(meta.metadata[b"skewtape.quantity_scale"]),
    )


tick_rows = st.lists(
    st.tuples(
        st.integers(0, 86_400 * 10**9 - 1),
        st.integers(-(10**18) + 1, 10**18 - 1),
        st.integers(0, 10**18 - 1),
        st.integers(0, 2),
    ),
    min_size=1,
    max_size=60,
)


@settings(
    max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(rows=tick_rows, price_scale=st.integers(0, 18), quantity_scale=st.integers(0, 18))
def test_round_trip_property_when_any_valid_batch_reads_back_exactly(
    tmp_path, rows, price_scale, quantity_scale
):
    rows = sorted((DAY_NS + ts, p, q, s) for ts, p, q, s in rows)
    batch = make_batch(rows, price_scale=price_scale, quantity_scale=quantity_scale)
    root = tmp_path / f"p{price_scale}-q{quantity_scale}"  # one root holds one schema
    report = compact_symbol_day(
        archive_at(root, TierPolicy()), batch, symbol="P/Q", day=DAY, age_days=0
    )
    assert read_archive_batch(Path(report.path)).equals(batch)
    back = duckdb.sql(
        f"SELECT epoch_ns(ts), price, quantity, side FROM read_parquet('{report.path}')"
    ).fetchall()
    expected = [
        (ts, Decimal(p).scaleb(-price_scale), Decimal(q).scaleb(-quantity_scale),
         ("UNKNOWN", "BUY", "SELL")[s])
        for ts, p, q, s in rows
    ]  # fmt: skip
    assert back == expected

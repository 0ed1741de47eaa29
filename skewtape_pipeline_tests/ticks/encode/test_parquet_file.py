"""One batch as one Parquet file: schema, encodings, checksums, verification, exact round
trips, and the report reading what the file says."""

from __future__ import annotations

import json
import random
from dataclasses import replace
from decimal import Decimal
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewtape_pipeline.errors import RoundTripError, TickFormatError
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.store.consolidate import SymbolDayRows, consolidated_table
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy, TierSettings
from skewtape_pipeline.ticks.encode import parquet_file
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.parquet_file import (
    read_archive_batch,
    read_file_facts,
    verify_archive_file,
    write_verified_file,
)
from skewtape_pipeline.ticks.encode.writer_settings import WriterSettings
from skewtape_pipeline_tests.ticks.conftest import DAY, DAY_NS, archive_at, day_batch, make_batch

HOT = WriterSettings(compression_level=1, encoding_sample_rows=1_000)
DICTIONARY = "RLE_DICTIONARY"
UNCOMPRESSED = WriterSettings(compression="none", compression_level=None)


def write(tmp_path: Path, batch: TickBatch, *, symbol: str = "SYM", settings=HOT) -> Path:
    """Write ``batch`` to ``<tmp_path>/<symbol>/part-0.parquet``, verified."""
    path = tmp_path / symbol / "part-0.parquet"
    write_verified_file(batch, path, settings=settings, metadata={"skewtape.symbol": symbol})
    return path


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
    choice = parquet_file.choose_encodings(parquet_file.archive_table(batch), HOT)
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
    table = parquet_file.archive_table(batch)
    assert "ts" not in parquet_file.choose_encodings(table, HOT).trial_bytes
    assert parquet_file.choose_encodings(table, HOT).column_encoding["ts"] == "DELTA_BINARY_PACKED"
    measured = parquet_file.choose_encodings(table, HOT, ts_sorted=False)
    trials = measured.trial_bytes["ts"]
    assert set(trials) == {"DELTA_BINARY_PACKED", "PLAIN", "BYTE_STREAM_SPLIT"}
    assert measured.column_encoding["ts"] == min(trials, key=trials.get)


def test_side_dictionary_when_two_sides_present_holds_only_those_names(tmp_path):
    two = make_batch([(DAY_NS + i, 100, 1, 1 + i % 2) for i in range(1_000)])
    three = make_batch([(DAY_NS + i, 100, 1, i % 3) for i in range(1_000)])
    assert parquet_file.side_dictionary(two.side).dictionary.to_pylist() == ["BUY", "SELL"]
    assert parquet_file.side_dictionary(three.side).dictionary.to_pylist() == [
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
    table = parquet_file.archive_table(cents)
    choice = parquet_file.choose_encodings(table, HOT)
    assert "price" in choice.dictionary_columns
    assert min(choice.trial_bytes["price"], key=choice.trial_bytes["price"].get) == (
        "RLE_DICTIONARY"
    )
    walk = make_batch([(DAY_NS + i, 1_500_000 + i, 1, 1) for i in range(5_000)])
    choice = parquet_file.choose_encodings(parquet_file.archive_table(walk), HOT)
    assert choice.column_encoding["price"] == "DELTA_BINARY_PACKED"


def test_encodings_when_byte_stream_split_disabled_never_offers_it(tmp_path):
    rng = random.Random(3)
    batch = make_batch([(DAY_NS + i, 1, rng.randrange(10**12), 1) for i in range(2_000)])
    table = parquet_file.archive_table(batch)
    offered = parquet_file.choose_encodings(table, HOT).trial_bytes["quantity"]
    assert "BYTE_STREAM_SPLIT" in offered
    strict = WriterSettings(compression_level=1, byte_stream_split=False)
    choice = parquet_file.choose_encodings(table, strict)
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


def test_read_archive_batch_when_not_an_archive_file_raises(tmp_path):
    path = tmp_path / "other.parquet"
    pq.write_table(pa.table({"ts": [1]}), path)
    with pytest.raises(TickFormatError, match="not a tick archive"):
        read_archive_batch(path)


def test_report_when_writer_changes_codec_reports_what_file_says(tmp_path, monkeypatch):
    real = parquet_file._write_parquet

    def snappy_writer(table, path, *, options, row_groups, key_values):
        snappy = {**options, "compression": "snappy", "compression_level": None}
        real(table, path, options=snappy, row_groups=row_groups, key_values=key_values)

    monkeypatch.setattr(parquet_file, "_write_parquet", snappy_writer)
    report = compact_symbol_day(
        archive_at(tmp_path, TierPolicy()).core,
        day_batch(30),
        SymbolDayWrite(symbol="SYM", day=DAY, age_days=0),
    )
    assert report.codec == "SNAPPY"
    footer = pq.ParquetFile(report.path).metadata.row_group(0)
    assert {footer.column(c).compression for c in range(4)} == {"SNAPPY"}
    assert report.encodings == read_file_facts(Path(report.path)).encodings


def test_report_when_tier_uses_gzip_reads_codec_and_level_from_file(tmp_path):
    policy = TierPolicy(hot=TierSettings(compression="gzip", compression_level=5))
    report = compact_symbol_day(
        archive_at(tmp_path, policy).core,
        day_batch(30),
        SymbolDayWrite(symbol="SYM", day=DAY, age_days=1),
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
        archive_at(root, TierPolicy()).core,
        batch,
        SymbolDayWrite(symbol="P/Q", day=DAY, age_days=0),
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


def _plain_price(monkeypatch) -> list[dict]:
    """Make the writer's encoding choice ask for PLAIN prices; returns the recorded calls."""
    calls: list[dict] = []
    choose = parquet_file.choose_encodings

    def plain_price(table, settings, **options):
        calls.append({"settings": settings, **options})
        choice = choose(table, settings, **options)
        dictionary = [name for name in choice.dictionary_columns if name != "price"]
        encodings = {**choice.column_encoding, "price": "PLAIN"}
        return replace(choice, column_encoding=encodings, dictionary_columns=dictionary)

    monkeypatch.setattr(parquet_file, "choose_encodings", plain_price)
    return calls


def test_writer_when_writing_any_file_encodes_as_choose_encodings_chooses(tmp_path, monkeypatch):
    rng = random.Random(11)
    batch = make_batch([(DAY_NS + i, int(rng.lognormvariate(8, 2)), 1, 1) for i in range(4_000)],
                       price_scale=4)  # fmt: skip
    measured = parquet_file.choose_encodings(parquet_file.archive_table(batch), HOT)
    assert measured.column_encoding["price"] == "BYTE_STREAM_SPLIT"  # what it measures itself
    calls = _plain_price(monkeypatch)

    one_day = read_file_facts(write(tmp_path, batch)).encodings["price"]
    table = consolidated_table([SymbolDayRows("SYM", DAY, batch)])
    many_days = tmp_path / "consolidated.parquet"
    parquet_file.write_table(table, many_days, settings=HOT, row_groups=[(0, len(batch))],
                             like=batch, metadata={})  # fmt: skip

    for encodings in (one_day, pq.ParquetFile(many_days).metadata.row_group(0).column(3).encodings):
        assert "PLAIN" in encodings and "BYTE_STREAM_SPLIT" not in encodings
    assert [call["settings"] for call in calls] == [HOT, HOT]
    assert calls[1]["ts_sorted"] is False and set(calls[1]["more"]) == {"date"}

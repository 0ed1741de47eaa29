"""Readers: the canonical form, and the three real-file mappings on small hand-made files."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import (
    ConfigError,
    PrecisionLossError,
    SourceLabelError,
    TickValidationError,
)
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline.ticks.encode.sides import BUY, SELL, UNKNOWN
from skewtape_pipeline.ticks.input_formats import InputOptions, detect_input_format, open_input
from skewtape_pipeline_tests.ticks.conftest import (
    DAY_NS,
    archive_files,
    compact,
    day_batch,
    make_batch,
    refused_once,
    write_text,
)

CANONICAL = (
    "timestamp_nanos,price,quantity,side,symbol\n"
    "1700000000000000000,712345.6789,10000000000,BUY,BRK.A\n"
    "1700000000000000000,-37.63,1,SELL,CL\n"
    "1700000000000000005,150.25,0,UNKNOWN,CL\n"
)


def test_canonical_csv_when_read_keeps_text_and_measures_each_line(tmp_path):
    path = write_text(tmp_path / "ticks.csv", CANONICAL)
    source = sources.read_canonical(path)
    assert source.table.column_names == ["timestamp_nanos", "price", "quantity", "side", "symbol"]
    assert source.table.column("price").to_pylist() == ["712345.6789", "-37.63", "150.25"]
    lines = CANONICAL.encode().splitlines(keepends=True)
    assert source.row_bytes.to_pylist() == [len(line) for line in lines[1:]]
    assert source.file_bytes == len(CANONICAL.encode())
    batch = source.to_batch(price_scale=4)
    assert batch.price.to_pylist() == [7_123_456_789, -376_300, 1_502_500]
    assert batch.quantity.to_pylist() == [10**10, 1, 0]
    assert batch.side.to_pylist() == [BUY, SELL, UNKNOWN]


def test_canonical_csv_when_crlf_lines_counts_carriage_returns(tmp_path):
    path = tmp_path / "ticks.csv"
    path.write_bytes(CANONICAL.replace("\n", "\r\n").encode())
    source = sources.read_canonical(path)
    assert sum(source.row_bytes.to_pylist()) == path.stat().st_size - len(
        b"timestamp_nanos,price,quantity,side,symbol\r\n"
    )


def test_canonical_csv_when_blank_line_present_gives_no_row_sizes(tmp_path):
    path = write_text(tmp_path / "ticks.csv", CANONICAL.replace("BUY,BRK.A\n", "BUY,BRK.A\n\n"))
    source = sources.read_canonical(path)
    assert source.table.num_rows == 3
    assert source.row_bytes is None


def test_canonical_csv_when_bad_value_names_file_row_and_column(tmp_path):
    path = write_text(tmp_path / "ticks.csv", CANONICAL.replace("150.25", "1.5e"))
    with pytest.raises(TickValidationError) as info:
        sources.read_canonical(path).to_batch(price_scale=4)
    assert (info.value.row, info.value.field) == (2, "price")
    assert str(path) in str(info.value)


def test_canonical_csv_when_extra_digit_raises_precision_loss_with_file(tmp_path):
    path = write_text(tmp_path / "ticks.csv", CANONICAL)
    with pytest.raises(PrecisionLossError) as info:
        sources.read_canonical(path).to_batch(price_scale=2)
    assert info.value.row == 0
    assert str(path) in str(info.value)


@pytest.mark.parametrize(
    ("header", "message"),
    [
        ("timestamp_nanos,price,quantity\n", "missing column"),
        ("timestamp_nanos,price,quantity,side,venue\n", "unexpected column"),
        ("", "empty"),
    ],
)
def test_canonical_csv_when_columns_wrong_raises(tmp_path, header, message):
    path = write_text(tmp_path / "ticks.csv", header)
    with pytest.raises(TickValidationError, match=message):
        sources.read_canonical(path)


def test_read_canonical_when_suffix_unknown_raises(tmp_path):
    with pytest.raises(TickValidationError, match=r"\.csv or \.parquet"):
        sources.read_canonical(write_text(tmp_path / "ticks.json", "{}"))


def test_canonical_parquet_when_floats_with_noise_are_exact(tmp_path):
    path = tmp_path / "ticks.parquet"
    walk = 150.0 + 0.05 + 0.05 + 0.05
    pq.write_table(
        pa.table(
            {
                "timestamp_nanos": pa.array([1, 2], pa.int64()),
                "price": pa.array([walk, 0.1 + 0.2]),
                "quantity": pa.array([1.5, 2.25]),
                "side": pa.array(["BUY", "SELL"]).dictionary_encode(),
            }
        ),
        path,
    )
    source = sources.read_canonical(path)
    assert source.row_bytes is None
    batch = source.to_batch(price_scale=4, quantity_scale=2)
    assert batch.price.to_pylist() == [1_501_500, 3_000]
    assert batch.quantity.to_pylist() == [150, 225]


def test_canonical_csv_bytes_when_batch_serialized_reads_back_equal(tmp_path):
    batch = day_batch(20)
    path = tmp_path / "back.csv"
    sources.write_canonical_csv(batch, path)
    assert path.stat().st_size == sources.canonical_csv_size_bytes(batch)
    back = sources.read_canonical(path).to_batch(price_scale=4)
    assert back.equals(batch)


KALSHI = (
    ",trade_id,ticker,count,created_time,yes_price,no_price,taker_side\n"
    "0,a,KX-1,39,2023-04-07T12:18:35.061031Z,99,1,yes\n"
    "1,b,KX-1,5,2023-04-07T12:18:35.5935Z,40,60,no\n"
    "2,c,KX/2,1,2023-04-07T00:00:00Z,1,99,yes\n"
)


def test_kalshi_reader_when_mapped_keeps_microseconds_and_cents_exact(tmp_path):
    source = sources.read_kalshi_trades(write_text(tmp_path / "k.csv", KALSHI))
    table = source.table
    base = 1_680_825_600 * 10**9  # 2023-04-07T00:00:00Z
    assert table.column("timestamp_nanos").to_pylist() == [
        base + (12 * 3600 + 18 * 60 + 35) * 10**9 + 61_031_000,
        base + (12 * 3600 + 18 * 60 + 35) * 10**9 + 593_500_000,
        base,
    ]
    assert table.column("price").to_pylist() == [Decimal("0.99"), Decimal("0.40"), Decimal("0.01")]
    assert table.column("symbol").to_pylist() == ["KX-1", "KX-1", "KX/2"]
    batch = source.to_batch(price_scale=4)
    assert batch.price.to_pylist() == [9_900, 4_000, 100]
    assert batch.side.to_pylist() == [BUY, SELL, BUY]


def test_kalshi_reader_when_prices_do_not_sum_to_100_names_row(tmp_path):
    path = write_text(tmp_path / "k.csv", KALSHI.replace(",40,60,", ",40,61,"))
    with pytest.raises(TickValidationError, match="100") as info:
        sources.read_kalshi_trades(path)
    assert (info.value.row, info.value.field) == (1, "no_price")


@pytest.mark.parametrize(("yes", "no"), [("150", "-50"), ("0", "100"), ("100", "0")])
def test_kalshi_reader_when_a_price_is_no_contracts_names_row(tmp_path, yes, no):
    path = write_text(tmp_path / "k.csv", KALSHI.replace(",40,60,", f",{yes},{no},"))
    with pytest.raises(TickValidationError, match="1 to 99 cents") as info:
        sources.read_kalshi_trades(path)
    assert (info.value.row, info.value.field) == (1, "yes_price")


def test_kalshi_reader_when_time_not_utc_iso_names_row(tmp_path):
    path = write_text(tmp_path / "k.csv", KALSHI.replace("00:00:00Z", "00:00:00+01:00"))
    with pytest.raises(TickValidationError, match="ISO-8601") as info:
        sources.read_kalshi_trades(path)
    assert info.value.row == 2


@pytest.mark.parametrize(
    ("created", "problem"),
    [("2023-04-07T23:59:60Z", "is no time of the calendar"),
     ("2023-02-30T10:00:00Z", "is no time of the calendar"),
     ("2023-04-07T25:00:00Z", "is no time of the calendar"),
     ("0001-01-01T00:00:00Z", "lies outside the times int64 nanoseconds hold")],
)  # fmt: skip
def test_compact_ticks_when_a_kalshi_time_is_well_formed_but_impossible_refuses_its_row(
    tmp_path, capsys, created, problem
):
    archive = tmp_path / "archive"
    good = write_text(tmp_path / "k.csv", KALSHI)
    assert compact(capsys, good, archive, "--input-format", "kalshi-trades")[0] == 0
    before = archive_files(archive)
    bad = write_text(tmp_path / "bad.csv", KALSHI.replace("2023-04-07T00:00:00Z", created))
    code, err = compact(capsys, bad, archive, "--input-format", "kalshi-trades")
    assert code == 2
    refused_once(err, bad, 2, "created_time")
    assert f"created_time {created!r} {problem}" in err
    assert archive_files(archive) == before


@pytest.mark.parametrize("column", ["timestamp_nanos", "quantity"])
def test_compact_ticks_when_a_uint64_parquet_value_exceeds_int64_refuses_its_row(
    tmp_path, capsys, column
):
    table = {"timestamp_nanos": [DAY_NS + 1, DAY_NS + 2], "price": [1.25, 1.5],
             "quantity": [3, 1], "side": ["BUY", "SELL"], "symbol": ["AAA", "AAA"]}  # fmt: skip
    path = tmp_path / "ticks.parquet"
    pq.write_table(pa.table(table), path)
    archive = tmp_path / "archive"
    assert compact(capsys, path, archive)[0] == 0
    before = archive_files(archive)
    table[column] = pa.array([table[column][0], 2**63 + 5], pa.uint64())
    pq.write_table(pa.table(table), path)
    code, err = compact(capsys, path, archive)
    assert code == 2
    refused_once(err, path, 1, column)
    assert f"{column} {2**63 + 5} does not fit int64" in err
    assert archive_files(archive) == before


def test_compact_ticks_when_a_tardis_timestamp_overflows_nanoseconds_refuses_its_row(
    tmp_path, capsys
):
    archive = tmp_path / "archive"
    assert compact(capsys, write_text(tmp_path / "t.csv", TARDIS), archive,
                   "--input-format", "tardis-trades")[0] == 0  # fmt: skip
    before = archive_files(archive)
    bad = write_text(tmp_path / "bad.csv", TARDIS.replace(",1582329602111000,1582329602418420,",
                                                          ",9999999999999999,1,"))  # fmt: skip
    code, err = compact(capsys, bad, archive, "--input-format", "tardis-trades")
    assert code == 2
    refused_once(err, bad, 1, "timestamp")
    assert "timestamp 9999999999999999 overflows int64 nanoseconds" in err
    assert archive_files(archive) == before


def canonical_parquet(path, ts: pa.Array, side: str = "BUY"):
    table = {"timestamp_nanos": ts, "price": [1.25] * len(ts), "quantity": [3] * len(ts),
             "side": [side] * len(ts), "symbol": ["AAA"] * len(ts)}  # fmt: skip
    pq.write_table(pa.table(table), path)
    return path


def test_compact_ticks_when_a_parquet_timestamp_us_is_beyond_nanoseconds_refuses_its_row(
    tmp_path, capsys
):
    us = DAY_NS // 1000
    path = canonical_parquet(tmp_path / "t.parquet", pa.array([us, us + 1], pa.timestamp("us")))
    archive = tmp_path / "archive"
    assert compact(capsys, path, archive)[0] == 0
    before = archive_files(archive)
    canonical_parquet(path, pa.array([us, us + 1, 2**62], pa.timestamp("us")))
    code, err = compact(capsys, path, archive)
    assert code == 2
    refused_once(err, path, 2, "timestamp_nanos")
    assert f"timestamp_nanos {2**62} us since the epoch" in err
    assert archive_files(archive) == before


def test_compact_ticks_when_a_side_is_megabytes_long_quotes_its_start(tmp_path, capsys):
    side = "B" * 3_000_000
    path = canonical_parquet(tmp_path / "t.parquet", pa.array([DAY_NS], pa.int64()), side)
    code, err = compact(capsys, path, tmp_path / "archive")
    assert code == 2
    refused_once(err, path, 0, "side")
    assert f"side {'B' * 40!r}... (3000000 characters) is not in the side vocabulary" in err
    assert len(err) < 1000 and not (tmp_path / "archive").exists()


def test_compact_ticks_when_a_symbol_is_megabytes_long_prints_a_bounded_line(tmp_path, capsys):
    symbol = "S" * 3_000_000
    text = f"timestamp_nanos,price,quantity,side,symbol\n{DAY_NS},1.5,3,BUY,{symbol}\n"
    path = write_text(tmp_path / "t.csv", text)
    code, err = compact(capsys, path, tmp_path / "archive")
    assert code == 2 and err.count("\n") == 1
    assert len(err) < 1000 and "(3000000 characters)" in err and "fit a folder name" in err


def test_error_line_when_a_message_is_megabytes_long_keeps_its_start_and_end():
    from skewtape_pipeline.cli.output import error_line

    line = error_line(ValueError("start " + "x" * 2_000_000 + " end"))
    assert len(line) < 1000 and line.startswith("start x") and line.endswith("x end")
    assert f"({2_000_010 - 900} characters cut)" in line  # 600 kept at the start, 300 at the end


def test_compact_ticks_when_no_symbol_column_nor_option_names_the_option(tmp_path, capsys):
    path = write_text(
        tmp_path / "t.csv", f"timestamp_nanos,price,quantity,side\n{DAY_NS},1,1,BUY\n"
    )
    code, err = compact(capsys, path, tmp_path / "archive")
    assert code == 2
    assert err == f"error: symbol: {path} has no symbol column; pass --symbol\n"
    assert not (tmp_path / "archive").exists()


def test_kalshi_reader_when_taker_side_unknown_refuses(tmp_path):
    path = write_text(tmp_path / "k.csv", KALSHI.replace(",no\n", ",maybe\n"))
    with pytest.raises(TickValidationError, match="maybe") as info:
        sources.read_kalshi_trades(path).to_batch(price_scale=2)
    assert info.value.row == 1


TARDIS = (
    "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
    "binance-futures,BTCUSDT,1582329602111000,1582329602418379,1,buy,9682,0.132\n"
    "binance-futures,BTCUSDT,1582329602111000,1582329602418420,2,sell,9682.07,23.139\n"
)


def test_tardis_reader_when_mapped_scales_microseconds_and_keeps_decimals(tmp_path):
    path = write_text(tmp_path / "t.csv", TARDIS)
    source = sources.read_tardis_trades(path)
    assert source.table.column("timestamp_nanos").to_pylist() == [1_582_329_602_111_000_000] * 2
    local = sources.read_tardis_trades(path, timestamp="local")
    assert local.table.column("timestamp_nanos").to_pylist()[1] == 1_582_329_602_418_420_000
    batch = source.to_batch(price_scale=2, quantity_scale=3)
    assert batch.price.to_pylist() == [968_200, 968_207]
    assert batch.quantity.to_pylist() == [132, 23_139]
    assert batch.side.to_pylist() == [BUY, SELL]


LOBSTER = (
    "34200.017459617,5,0,1,2238200,-1\n"
    "34200.18960767,1,11885113,21,2238100,1\n"
    "34200.190226476,4,11885113,21,2238100,1\n"
    "34201,6,-1,300,2238000,1\n"
    "34202.5,3,11885113,21,2238100,1\n"
)


def test_lobster_reader_when_mapped_keeps_executions_with_exact_nanoseconds(tmp_path):
    path = write_text(tmp_path / "m.csv", LOBSTER)
    source = sources.read_lobster_messages(path, symbol="AMZN", session_date=date(2012, 6, 21))
    midnight = 1_340_251_200 * 10**9
    assert source.table.column("timestamp_nanos").to_pylist() == [
        midnight + 34_200_017_459_617,
        midnight + 34_200_190_226_476,
        midnight + 34_201 * 10**9,
    ]
    assert source.row_numbers.to_pylist() == [0, 2, 3]
    lines = LOBSTER.encode().splitlines(keepends=True)
    assert source.row_bytes.to_pylist() == [len(lines[0]), len(lines[2]), len(lines[3])]
    assert source.file_rows == 5
    batch = source.to_batch(price_scale=4)
    assert batch.price.to_pylist() == [2_238_200, 2_238_100, 2_238_000]
    assert batch.quantity.to_pylist() == [1, 21, 300]
    assert batch.side.to_pylist() == [BUY, SELL, UNKNOWN]


def test_lobster_reader_when_bad_execution_row_names_file_row(tmp_path):
    path = write_text(
        tmp_path / "m.csv",
        LOBSTER.replace("34200.190226476,4,11885113,21", "34200.190226476,4,11885113,2x"),
    )
    with pytest.raises(TickValidationError) as info:
        sources.read_lobster_messages(path, symbol="AMZN", session_date=date(2012, 6, 21))
    assert (info.value.row, info.value.field) == (2, "size")


def test_lobster_reader_when_time_has_ten_decimals_raises(tmp_path):
    path = write_text(tmp_path / "m.csv", LOBSTER.replace("34201,", "34201.0000000001,"))
    with pytest.raises(TickValidationError, match="9 fractional digits") as info:
        sources.read_lobster_messages(path, symbol="AMZN", session_date=date(2012, 6, 21))
    assert info.value.row == 3


@pytest.mark.parametrize("late", ["86400", "90000.5", "99999999999999999999"])
def test_compact_ticks_when_a_lobster_time_is_past_the_files_day_refuses_its_row(
    tmp_path, capsys, late
):
    """Such a row was filed under the next day, replacing that day's archived hot file."""
    archive = tmp_path / "archive"
    next_day = write_text(tmp_path / "AMZN_2012-06-22_34200000_57600000_message_1.csv", LOBSTER)
    assert compact(capsys, next_day, archive, "--input-format", "lobster-messages")[0] == 0
    before = archive_files(archive)
    path = write_text(tmp_path / "AMZN_2012-06-21_34200000_57600000_message_1.csv",
                      LOBSTER.replace("34201,6,", f"{late},6,"))  # fmt: skip
    code, err = compact(capsys, path, archive, "--input-format", "lobster-messages")
    assert code == 2
    refused_once(err, path, 3, "time")
    assert f"time {late!r} is at or past the end of the session day 2012-06-21 (86400 s" in err
    assert archive_files(archive) == before


def test_lobster_reader_when_a_time_is_just_before_the_days_end_keeps_it(tmp_path):
    path = write_text(tmp_path / "m.csv", LOBSTER.replace("34201,", "86399.999999999,"))
    source = sources.read_lobster_messages(path, symbol="AMZN", session_date=date(2012, 6, 21))
    assert (
        source.table.column("timestamp_nanos")[2].as_py()
        == 1_340_251_200 * 10**9 + 86_400 * 10**9 - 1
    )


LOBSTER_NAME = "GOOG_2013-01-02_34200000_57600000_message_1.csv"
"""LOBSTER's own file name convention: TICKER_YYYY-MM-DD_start_end_message_LEVEL.csv."""


def test_lobster_reader_when_file_has_lobster_name_takes_symbol_and_date_from_it(tmp_path):
    path = write_text(tmp_path / LOBSTER_NAME, LOBSTER)
    source = sources.read_lobster_messages(path)
    midnight = int(datetime(2013, 1, 2, 5, tzinfo=UTC).timestamp()) * 10**9  # EST is UTC-5
    assert source.table.column("timestamp_nanos").to_pylist() == [
        midnight + 34_200_017_459_617,
        midnight + 34_200_190_226_476,
        midnight + 34_201 * 10**9,
    ]
    assert set(source.table.column("symbol").to_pylist()) == {"GOOG"}


def test_lobster_reader_when_neither_name_nor_options_say_refuses_naming_the_file(tmp_path):
    path = write_text(tmp_path / "message.csv", LOBSTER)
    with pytest.raises(SourceLabelError, match="symbol") as info:
        sources.read_lobster_messages(path, session_date=date(2012, 6, 21))
    assert str(path) in str(info.value) and "TICKER_YYYY-MM-DD" in str(info.value)
    with pytest.raises(SourceLabelError, match="session date"):
        sources.read_lobster_messages(path, symbol="AMZN")


def test_lobster_reader_when_options_contradict_the_file_name_refuses(tmp_path):
    path = write_text(tmp_path / LOBSTER_NAME, LOBSTER)
    with pytest.raises(SourceLabelError, match="GOOG"):
        sources.read_lobster_messages(path, symbol="AMZN")
    with pytest.raises(SourceLabelError, match="2013-01-02"):
        sources.read_lobster_messages(path, session_date=date(2013, 1, 3))
    same = sources.read_lobster_messages(path, symbol="GOOG", session_date=date(2013, 1, 2))
    assert same.table.equals(sources.read_lobster_messages(path).table)


def test_lobster_reader_when_name_has_an_impossible_date_refuses(tmp_path):
    path = write_text(tmp_path / "GOOG_2013-02-30_34200000_57600000_message_1.csv", LOBSTER)
    with pytest.raises(SourceLabelError, match="2013-02-30"):
        sources.read_lobster_messages(path)


@pytest.mark.parametrize("day", ["9999-12-31", "2262-04-11"])
def test_compact_ticks_when_a_lobster_date_is_past_nanosecond_time_refuses_naming_it(
    tmp_path, capsys, day
):
    path = write_text(tmp_path / f"AMZN_{day}_34200000_57600000_message_1.csv", LOBSTER)
    code, err = compact(capsys, path, tmp_path / "archive", "--input-format", "lobster-messages")
    assert code == 2 and "Traceback" not in err
    assert f"session date {day} is outside the days nanosecond timestamps hold" in err
    assert not (tmp_path / "archive").exists()


BOM = "\ufeff"


def test_canonical_csv_when_header_starts_with_a_byte_order_mark_reads_it(tmp_path):
    path = write_text(tmp_path / "bom.csv", BOM + CANONICAL)
    plain = sources.read_canonical(write_text(tmp_path / "plain.csv", CANONICAL))
    source = sources.read_canonical(path)
    assert source.table.equals(plain.table)
    assert source.row_bytes.to_pylist() == plain.row_bytes.to_pylist()
    assert source.file_bytes == plain.file_bytes + len(BOM.encode())


def test_lobster_reader_when_file_starts_with_a_byte_order_mark_reads_the_first_row(tmp_path):
    path = write_text(tmp_path / LOBSTER_NAME, BOM + LOBSTER)
    (tmp_path / "plain").mkdir()
    plain = sources.read_lobster_messages(write_text(tmp_path / "plain" / LOBSTER_NAME, LOBSTER))
    assert sources.read_lobster_messages(path).table.equals(plain.table)


def test_canonical_csv_when_column_name_has_invisible_characters_shows_them(tmp_path):
    path = write_text(tmp_path / "zw.csv", CANONICAL.replace("price", "pri\u200bce", 1))
    with pytest.raises(TickValidationError) as info:
        sources.read_canonical(path)
    message = str(info.value)
    assert "'pri\\u200bce'" in message and "missing column(s) 'price'" in message


def test_integer_text_when_signed_with_a_plus_reads_its_value():
    from skewtape_pipeline.ticks.encode.exact_columns import int64_of_text

    values = pa.array(["+7", " -3 ", "12", "+0"])
    assert int64_of_text(values, field="size").to_pylist() == [7, -3, 12, 0]
    with pytest.raises(
        TickValidationError, match=r"row 1, .*'\+99999999999999999999' does not fit"
    ):
        int64_of_text(pa.array(["1", "+99999999999999999999"]), field="size")


def text_parquet(path, column: str, values: list[bytes], as_type: pa.DataType):
    """A canonical Parquet file of ``len(values)`` ticks whose ``column`` holds ``values``
    as ``as_type`` (bytes, or text holding whatever bytes were given)."""
    count = len(values)
    table = {"timestamp_nanos": pa.array(range(DAY_NS, DAY_NS + count), pa.int64()),
             "price": ["1.25"] * count, "quantity": [3] * count, "side": ["BUY"] * count,
             "symbol": ["AAA"] * count}  # fmt: skip
    raw = pa.array(values, pa.binary())
    table[column] = raw if as_type == pa.binary() else raw.view(as_type)
    pq.write_table(pa.table(table), path)
    return path


@pytest.mark.parametrize(
    ("column", "as_type", "good"),
    [
        ("symbol", pa.binary(), b"AAA"),
        ("symbol", pa.string(), b"AAA"),
        ("side", pa.string(), b"BUY"),
        ("price", pa.string(), b"1.25"),
    ],
)
def test_compact_ticks_when_parquet_text_is_not_utf8_refuses_its_row(
    tmp_path, capsys, column, as_type, good
):
    path = text_parquet(tmp_path / "t.parquet", column, [good, good], as_type)
    archive = tmp_path / "archive"
    assert compact(capsys, path, archive)[0] == 0
    before = archive_files(archive)
    text_parquet(path, column, [good, good, b"\xff\xfe"], as_type)
    code, err = compact(capsys, path, archive)
    assert code == 2
    refused_once(err, path, 2, column)
    assert f"{column} b'\\xff\\xfe' is not UTF-8 text" in err
    assert archive_files(archive) == before


def test_canonical_parquet_when_text_is_not_utf8_in_a_later_chunk_names_its_file_row(tmp_path):
    symbols = [b"AAA"] * 1000
    symbols[777] = b"A\xc3("
    path = text_parquet(tmp_path / "t.parquet", "symbol", symbols, pa.string())
    with pytest.raises(TickValidationError) as info:
        sources.open_canonical_parquet(path, block_bytes=64 * sources.PARQUET_ROW_BYTES).read_all()
    assert (info.value.row, info.value.field) == (777, "symbol")


def test_canonical_parquet_when_a_dictionary_side_is_not_utf8_names_its_first_row(tmp_path):
    path = text_parquet(tmp_path / "t.parquet", "symbol", [b"AAA"] * 3, pa.string())
    table = pq.read_table(path)
    words = pa.array([b"BUY", b"\xffSELL"], pa.binary()).view(pa.string())
    side = pa.DictionaryArray.from_arrays(pa.array([0, 1, 1], pa.int32()), words)
    pq.write_table(table.set_column(3, "side", side), path)
    with pytest.raises(TickValidationError) as info:
        sources.read_canonical(path)
    assert (info.value.row, info.value.field) == (1, "side")
    assert "side b'\\xffSELL' is not UTF-8 text" in str(info.value)


def control_free(message: str) -> bool:
    return not [c for c in message if ord(c) < 32 or 127 <= ord(c) < 160]


def test_lobster_reader_when_given_a_parquet_file_quotes_its_bytes_escaped(tmp_path):
    path = text_parquet(tmp_path / "t.parquet", "symbol", [b"\x1b[2J"] * 3, pa.string())
    with pytest.raises(TickValidationError) as info:
        sources.read_lobster_messages(path, symbol="AMZN", session_date=date(2012, 6, 21))
    message = str(info.value)
    assert f"{path}: cannot read as CSV" in message and "PAR1\\x15" in message
    assert control_free(message)


def test_reason_when_a_library_message_is_megabytes_long_keeps_its_start_escaped():
    from skewtape_pipeline.errors import REASON_CHARS, reason

    text = reason(ValueError("got: " + "\x1b[2J" * 1_000_000))
    assert text.startswith("got: \\x1b[2J") and control_free(text)
    assert text.endswith(f"... ({5 + 4_000_000} characters)")
    assert len(text) < 5 * REASON_CHARS


def test_compact_ticks_when_a_csv_line_is_not_utf8_names_its_row(tmp_path, capsys):
    path = tmp_path / "t.csv"
    path.write_bytes(
        b"timestamp_nanos,price,quantity,side,symbol\n"
        + b"".join(f"{DAY_NS + i},1.5,10,BUY,AAA\n".encode() for i in range(5))
        + b"%d,1.5,10,BUY,A\xff\xfeA\n" % (DAY_NS + 5)
    )
    code, err = compact(capsys, path, tmp_path / "archive")
    assert code == 2 and err.startswith(f"error: row 5: {path}: cannot read as CSV: ")
    assert "invalid UTF8" in err and not (tmp_path / "archive").exists()


@pytest.mark.parametrize("path", [None, 5, ""])
@pytest.mark.parametrize(
    "read",
    [
        sources.read_canonical,
        sources.read_kalshi_trades,
        sources.read_tardis_trades,
        sources.read_lobster_messages,
        detect_input_format,
        lambda path: open_input(path, "canonical", InputOptions()),
        lambda path: sources.write_canonical_csv(make_batch([(DAY_NS, 100, 1, 1)]), path),
    ],
    ids=["canonical", "kalshi", "tardis", "lobster", "detect", "open_input", "write_csv"],
)
def test_tick_file_readers_when_the_path_is_no_path_refuse_naming_it(read, path):
    with pytest.raises(ConfigError, match=rf"^path = {path!r}: expected a (tick|CSV) file"):
        read(path)


def test_open_input_without_options_opens_with_the_defaults_and_refuses_other_options(tmp_path):
    """``open_input(path, fmt, None)`` was an AttributeError on ``None.session_date``."""
    path = write_text(tmp_path / "t.csv", CANONICAL)
    assert open_input(path).read_all().symbols.to_pylist() == ["BRK.A", "CL", "CL"]
    with pytest.raises(ConfigError, match=r"^options = \{'symbol': 'X'\}: expected InputOptions"):
        open_input(path, None, {"symbol": "X"})

"""Float noise is not precision: a CSV exported from a float pipeline archives at the scale its
values mean, its noise counted apart (``float_noise_normalized``); real loss stays refused."""

from __future__ import annotations

import json
from datetime import date
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.store.layout import recorded_schema
from skewtape_pipeline.ticks.archive.store.reports_table import (
    REPORTS_SCHEMA,
    ReportRow,
    read_venue_day_reports,
    reports_file,
    reports_view_sql,
    write_venue_day_reports,
)
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline_tests.ticks.conftest import write_text

FLOAT_PIPELINE_CSV = """symbol,timestamp_nanos,price,quantity,side
BRK,1767312000000000000,712345.6789,10000000000,BUY
BRK,1767312000000000000,-37.63,1,SELL
BRK,1767312000000000001,150.15000000000003,5,UNKNOWN
BRK,1767312000000000002,0.30000000000000004,7,BUY
"""
"""What pandas' to_csv writes for float prices (issue 21's file)."""
AS_OF = "2026-01-03"


def compact(tmp_path: Path, capsys, text: str, *flags: str) -> tuple[int, str, str, Path]:
    source = write_text(tmp_path / "ticks.csv", text)
    out = tmp_path / "archive"
    code = main(["compact-ticks", str(source), "--out", str(out), "--as-of", AS_OF, *flags])
    stdout, stderr = capsys.readouterr()
    return code, stdout, stderr, out


def archived(out: Path) -> list[tuple]:
    return duckdb.sql(
        f"SELECT price::VARCHAR, quantity::VARCHAR, side FROM read_parquet('{out}/**/*.parquet', "
        "hive_partitioning = true) ORDER BY ts, price"
    ).fetchall()


EXPECTED_ROWS = [
    ("-37.6300", "1", "SELL"),
    ("712345.6789", "10000000000", "BUY"),
    ("150.1500", "5", "UNKNOWN"),
    ("0.3000", "7", "BUY"),
]


def test_cli_when_float_pipeline_csv_at_price_scale_4_stores_rounded_and_counts_noise(
    tmp_path, capsys
):
    code, stdout, stderr, out = compact(
        tmp_path, capsys, FLOAT_PIPELINE_CSV, "--price-scale", "4", "--json"
    )
    assert code == 0, stderr
    (report,) = [json.loads(line) for line in stdout.splitlines()]
    assert report["float_noise_normalized"] == 2
    assert report["price_float_noise_normalized"] == 2
    assert report["price_precision_loss_ticks"] == report["precision_loss_ticks"] == 0
    assert any("float noise" in note for note in report["notes"])
    assert archived(out) == EXPECTED_ROWS


def test_cli_when_float_pipeline_csv_without_scale_detects_4_decimals(tmp_path, capsys):
    code, stdout, stderr, out = compact(tmp_path, capsys, FLOAT_PIPELINE_CSV)
    assert code == 0, stderr
    assert recorded_schema(out).price_scale == 4
    assert recorded_schema(out).quantity_scale == 0
    assert "float_noise_normalized: 2 value(s)" in stdout
    assert "precision_loss_ticks: 0" in stdout
    assert archived(out) == EXPECTED_ROWS


def test_cli_when_noise_and_a_tenth_given_detects_2_decimals(tmp_path, capsys):
    text = (
        "symbol,timestamp_nanos,price,quantity,side\n"
        "X,1,150.15000000000003,1,BUY\nX,2,150.2,1,BUY\n"
    )
    code, _, stderr, out = compact(tmp_path, capsys, text, "--json")
    assert code == 0, stderr
    assert recorded_schema(out).price_scale == 2
    assert [row[0] for row in archived(out)] == ["150.15", "150.20"]


def test_cli_when_real_fifth_decimal_at_scale_4_refuses_and_counts_when_allowed(tmp_path, capsys):
    text = FLOAT_PIPELINE_CSV + "BRK,1767312000000000003,1.23456,1,SELL\n"
    code, _, stderr, out = compact(tmp_path, capsys, text, "--price-scale", "4")
    assert code == 2
    assert "1.23456" in stderr and "more than 4 decimals (1 such row(s))" in stderr
    assert not out.exists()
    code, stdout, stderr, out = compact(
        tmp_path, capsys, text, "--price-scale", "4", "--allow-precision-loss", "--json"
    )
    assert code == 0, stderr
    (report,) = [json.loads(line) for line in stdout.splitlines()]
    assert (report["price_precision_loss_ticks"], report["float_noise_normalized"]) == (1, 2)


def test_cli_when_fifth_decimal_at_scale_5_is_lossless_and_round_trips(tmp_path, capsys):
    text = "symbol,timestamp_nanos,price,quantity,side\nX,1,1.23456,1,BUY\n"
    code, stdout, stderr, out = compact(tmp_path, capsys, text, "--price-scale", "5", "--json")
    assert code == 0, stderr
    (report,) = [json.loads(line) for line in stdout.splitlines()]
    assert (report["precision_loss_ticks"], report["float_noise_normalized"]) == (0, 0)
    assert archived(out) == [("1.23456", "1", "BUY")]


def test_cli_when_quantity_is_a_float_whole_number_stores_whole_contracts(tmp_path, capsys):
    text = "symbol,timestamp_nanos,price,quantity,side\nX,1,0.55,7.000000000000001,BUY\n"
    code, stdout, stderr, out = compact(tmp_path, capsys, text, "--json")
    assert code == 0, stderr
    (report,) = [json.loads(line) for line in stdout.splitlines()]
    assert report["quantity_float_noise_normalized"] == 1
    assert recorded_schema(out).quantity_scale == 0
    assert archived(out) == [("0.55", "7", "BUY")]


def test_read_tardis_trades_when_export_has_float_noise_rounds_it_and_counts(tmp_path):
    path = write_text(
        tmp_path / "trades.csv",
        "exchange,symbol,timestamp,local_timestamp,id,side,price,amount\n"
        "binance,BTCUSDT,1582329602111000,1582329602418379,1,buy,9682.300000000001,0.132\n"
        "binance,BTCUSDT,1582329602116000,1582329602418420,2,sell,9682.1,0.41200000000000003\n",
    )
    batch = sources.read_tardis_trades(path).to_batch(price_scale=None, quantity_scale=None)
    assert (batch.price_scale, batch.quantity_scale) == (1, 3)
    assert batch.price.to_pylist() == [96_823, 96_821]
    assert batch.quantity.to_pylist() == [132, 412]
    assert (batch.price_float_noise_ticks, batch.quantity_float_noise_ticks) == (1, 1)


def test_read_canonical_parquet_when_float64_columns_have_noise_counts_it(tmp_path):
    path = tmp_path / "ticks.parquet"
    pq.write_table(
        pa.table(
            {
                "timestamp_nanos": pa.array([1, 2, 3], pa.int64()),
                "price": pa.array([150.0 + 0.05 + 0.05 + 0.05, 0.1 + 0.2, 712345.6789]),
                "quantity": pa.array([7.000000000000001, 1e10, 2.0]),
                "side": pa.array(["BUY", "SELL", "UNKNOWN"]),
            }
        ),
        path,
    )
    batch = sources.read_canonical(path).to_batch(price_scale=None, quantity_scale=None)
    assert (batch.price_scale, batch.quantity_scale) == (4, 0)
    assert batch.price.to_pylist() == [1_501_500, 3_000, 7_123_456_789]
    assert batch.quantity.to_pylist() == [7, 10_000_000_000, 2]
    assert (batch.price_float_noise_ticks, batch.quantity_float_noise_ticks) == (2, 1)


DAY = date(2026, 10, 5)


def report_row(symbol: str, venue: str, noise: int | None) -> ReportRow:
    return ReportRow(symbol, venue, DAY, "archived", 3, "bundle", f"fills/{venue}/2026-10.parquet",
                     "ab" * 32, "run-1", float_noise_normalized=noise)  # fmt: skip


def test_reports_table_when_file_predates_the_noise_column_reads_it_as_null(tmp_path):
    write_venue_day_reports(tmp_path, "v", DAY, [report_row("v:a", "v", 2)], replace_all=True)
    write_venue_day_reports(tmp_path, "w", DAY, [report_row("w:a", "w", 0)], replace_all=True)
    older = reports_file(tmp_path, "w", DAY)  # as written before the column existed
    pq.write_table(
        pq.read_table(older).drop_columns(["float_noise_normalized", "unchanged"]), older
    )

    assert read_venue_day_reports(tmp_path, "w", DAY)["float_noise_normalized"].to_pylist() == [
        None
    ]
    con = duckdb.connect()
    con.execute(reports_view_sql([tmp_path]))
    rows = con.execute("SELECT venue, float_noise_normalized FROM tick_reports ORDER BY venue")
    assert rows.fetchall() == [("v", 2), ("w", None)]


def test_reports_view_when_every_file_predates_the_unchanged_column_still_has_it(tmp_path):
    write_venue_day_reports(tmp_path, "w", DAY, [report_row("w:a", "w", 3)], replace_all=True)
    older = reports_file(tmp_path, "w", DAY)  # written after the noise column, before this one
    pq.write_table(pq.read_table(older).drop_columns(["unchanged"]), older)

    table = read_venue_day_reports(tmp_path, "w", DAY)
    assert table.schema.equals(REPORTS_SCHEMA) and table["unchanged"].to_pylist() == [None]
    con = duckdb.connect()
    con.execute(reports_view_sql([tmp_path]))
    rows = con.execute("SELECT symbol, float_noise_normalized, unchanged FROM tick_reports")
    assert rows.fetchall() == [("w:a", 3, None)]
    assert [d[0] for d in con.execute("SELECT * FROM tick_reports").description] == [
        f.name for f in REPORTS_SCHEMA
    ]
    assert [d[0] for d in con.execute("SELECT * FROM tick_reports").description] == [
        f.name for f in REPORTS_SCHEMA
    ]


def test_cli_when_parquet_prices_are_float32_archives_what_each_value_says(tmp_path, capsys):
    path = tmp_path / "ticks.parquet"
    prices = pa.array([1.1, 9682.07, 0.3], pa.float64()).cast(pa.float32(), safe=False)
    pq.write_table(
        pa.table(
            {
                "timestamp_nanos": pa.array([1767312000000000000 + i for i in range(3)]),
                "price": prices,
                "quantity": pa.array([2.5, 1, 3], pa.float32()),
                "side": pa.array(["BUY", "SELL", "UNKNOWN"]),
                "symbol": pa.array(["F32"] * 3),
            }
        ),
        path,
    )
    out = tmp_path / "archive"
    assert main(["compact-ticks", str(path), "--out", str(out), "--as-of", AS_OF]) == 0
    assert archived(out) == [("1.10", "2.5", "BUY"), ("9682.07", "1.0", "SELL"),
                             ("0.30", "3.0", "UNKNOWN")]  # fmt: skip
    assert (recorded_schema(out).price_scale, recorded_schema(out).quantity_scale) == (2, 1)

"""The three real trade files round-trip exactly through the archive (read back with DuckDB).

The expected ticks are mapped here independently of the readers, straight from SOURCES.md,
with the standard library only (csv, Decimal, datetime).
"""

from __future__ import annotations

import bz2
import csv
import gzip
import hashlib
import io
import json
import lzma
import re
import zipfile
from datetime import UTC, date, datetime
from decimal import Decimal

import pytest
import zstandard

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.ops.compact import compact_source
from skewtape_pipeline.ticks.encode import sources
from skewtape_pipeline.ticks.encode.report import (
    RAW_SIZE_BASIS_SOURCE_FILE,
    RAW_SIZE_BASIS_SOURCE_ROWS,
)
from skewtape_pipeline_tests.ticks.conftest import (
    KALSHI_FILE,
    LOBSTER_FILE,
    TARDIS_FILE,
    archive_at,
    archive_rows,
    duckdb_archive,
    encoded,
)

AS_OF = date(2026, 11, 29)


def iso_utc_ns(text: str) -> int:
    assert text.endswith("Z")
    whole, _, fraction = text[:-1].partition(".")
    seconds = datetime.strptime(whole, "%Y-%m-%dT%H:%M:%S").replace(tzinfo=UTC).timestamp()
    return int(seconds) * 10**9 + int(fraction.ljust(9, "0") or "0")


def expected_kalshi() -> list[tuple]:
    with open(KALSHI_FILE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 16_281
    sides = {"yes": "BUY", "no": "SELL"}
    return sorted(
        (
            r["ticker"],
            iso_utc_ns(r["created_time"]),
            Decimal(r["yes_price"]) / 100,
            int(r["count"]),
            sides[r["taker_side"]],
        )
        for r in rows
    )


def expected_tardis() -> list[tuple]:
    with open(TARDIS_FILE, newline="") as handle:
        rows = list(csv.DictReader(handle))
    assert len(rows) == 9_999
    sides = {"buy": "BUY", "sell": "SELL"}
    return sorted(
        (
            r["symbol"],
            int(r["timestamp"]) * 1000,
            Decimal(r["price"]),
            Decimal(r["amount"]),
            sides[r["side"]],
        )
        for r in rows
    )


def expected_lobster() -> list[tuple]:
    midnight_ns = 1_340_251_200_000_000_000
    directions = {"-1": "BUY", "1": "SELL"}
    out = []
    with open(LOBSTER_FILE, newline="") as handle:
        for time_text, kind, _order, size, price, direction in csv.reader(handle):
            if kind not in ("4", "5"):
                assert kind in ("1", "2", "3")
                continue
            whole, _, fraction = time_text.partition(".")
            ts = midnight_ns + int(whole) * 10**9 + int(fraction.ljust(9, "0") or "0")
            out.append(("AMZN", ts, Decimal(price) / 10_000, int(size), directions[direction]))
    assert len(out) == 11_419
    return sorted(out)


@pytest.mark.slow
def test_kalshi_file_when_compacted_reads_back_exactly_with_duckdb(tmp_path, no_fsync):
    source = sources.read_kalshi_trades(KALSHI_FILE)
    reports = compact_source(
        archive_at(tmp_path).core, source, as_of=AS_OF, encoding=encoded(price_scale=2)
    )
    assert sum(r.tick_count for r in reports) == 16_281
    assert len({(r.symbol, r.date) for r in reports}) == len(reports)
    assert {r.raw_size_basis for r in reports} == {RAW_SIZE_BASIS_SOURCE_ROWS}
    header = KALSHI_FILE.open("rb").readline()
    assert sum(r.raw_size_bytes for r in reports) == KALSHI_FILE.stat().st_size - len(header)
    assert sum(r.reordered_ticks for r in reports) > 0  # the file is newest-first per ticker
    assert archive_rows(duckdb_archive(tmp_path)) == expected_kalshi()


def test_tardis_file_when_compacted_reads_back_exactly_with_duckdb(tmp_path):
    source = sources.read_tardis_trades(TARDIS_FILE)
    (report,) = compact_source(
        archive_at(tmp_path).core,
        source,
        as_of=AS_OF,
        encoding=encoded(price_scale=2, quantity_scale=3),
    )
    assert (report.symbol, report.date, report.tick_count) == ("BTCUSDT", "2020-02-22", 9_999)
    assert report.raw_size_basis == RAW_SIZE_BASIS_SOURCE_FILE
    assert report.raw_size_bytes == TARDIS_FILE.stat().st_size
    assert report.reordered_ticks == 0
    assert report.meets_compression_target
    assert archive_rows(duckdb_archive(tmp_path)) == expected_tardis()


def test_lobster_file_when_compacted_reads_back_exactly_with_duckdb(tmp_path):
    source = sources.read_lobster_messages(
        LOBSTER_FILE, symbol="AMZN", session_date=date(2012, 6, 21)
    )
    (report,) = compact_source(
        archive_at(tmp_path).core, source, as_of=AS_OF, encoding=encoded(price_scale=4)
    )
    assert (report.symbol, report.date, report.tick_count) == ("AMZN", "2012-06-21", 11_419)
    assert report.raw_size_basis == RAW_SIZE_BASIS_SOURCE_ROWS
    assert report.raw_size_bytes < LOBSTER_FILE.stat().st_size
    assert archive_rows(duckdb_archive(tmp_path)) == expected_lobster()


def test_tardis_file_when_quantity_scale_too_small_refuses_and_writes_nothing(tmp_path):
    source = sources.read_tardis_trades(TARDIS_FILE)
    with pytest.raises(Exception, match="more than 2 decimals") as info:
        compact_source(
            archive_at(tmp_path / "a").core,
            source,
            as_of=AS_OF,
            encoding=encoded(price_scale=2, quantity_scale=2),
        )
    assert type(info.value).__name__ == "PrecisionLossError"
    assert str(TARDIS_FILE) in str(info.value)
    assert not (tmp_path / "a").exists()


@pytest.mark.slow
@pytest.mark.parametrize(
    ("input_format", "path", "scales", "expected"),
    [
        ("kalshi-trades", KALSHI_FILE, ["--price-scale", "2", "--timestamp-unit", "us"],
         expected_kalshi),
        ("tardis-trades", TARDIS_FILE, ["--price-scale", "2", "--quantity-scale", "3",
                                        "--timestamp-unit", "ms"], expected_tardis),
        ("lobster-messages", LOBSTER_FILE, ["--price-scale", "3", "--symbol", "AMZN",
                                            "--session-date", "2012-06-21"], expected_lobster),
    ],
)  # fmt: skip
def test_cli_compact_ticks_when_real_file_given_round_trips_exactly_through_duckdb(
    tmp_path, no_fsync, capsys, input_format, path, scales, expected
):
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(path), "--input-format", input_format, "--out", str(out),
            "--as-of", AS_OF.isoformat(), "--json", *scales]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    reports = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    assert all(r["round_trip_verified"] for r in reports)
    assert archive_rows(duckdb_archive(out)) == expected()


LOBSTER_NAME = "AMZN_2012-06-21_34200000_57600000_message_1.csv"
"""The name LOBSTER gave the sample (SOURCES.md); the shared copy is renamed."""


def test_cli_compact_ticks_when_lobster_file_renamed_needs_symbol_and_session_date(
    tmp_path, capsys
):
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(LOBSTER_FILE), "--input-format", "lobster-messages",
            "--out", str(out), "--as-of", AS_OF.isoformat(), "--price-scale", "3"]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: ") and str(LOBSTER_FILE) in err and "--symbol" in err
    assert not out.exists()
    assert main([*argv, "--symbol", "AMZN"]) == 2
    assert "--session-date" in capsys.readouterr().err and not out.exists()


def test_cli_compact_ticks_when_lobster_file_has_its_lobster_name_reads_both_from_it(
    tmp_path, capsys
):
    named = tmp_path / LOBSTER_NAME
    named.write_bytes(LOBSTER_FILE.read_bytes())
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(named), "--input-format", "lobster-messages", "--json",
            "--out", str(out), "--as-of", AS_OF.isoformat(), "--price-scale", "4"]  # fmt: skip
    assert main(argv) == 0, capsys.readouterr().err
    assert archive_rows(duckdb_archive(out)) == expected_lobster()


def test_cli_compact_ticks_when_session_date_given_for_another_format_refuses(tmp_path, capsys):
    argv = ["compact-ticks", str(TARDIS_FILE), "--input-format", "tardis-trades",
            "--out", str(tmp_path / "a"), "--as-of", AS_OF.isoformat(), "--price-scale", "2",
            "--session-date", "2020-02-22"]  # fmt: skip
    assert main(argv) == 2
    assert "--session-date" in capsys.readouterr().err and not (tmp_path / "a").exists()


def tree_hashes(root) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def test_cli_compact_ticks_when_real_file_cut_short_mid_value_refuses_naming_its_last_row(
    tmp_path, capsys
):
    lines = TARDIS_FILE.read_bytes().splitlines(keepends=True)
    whole, cut = tmp_path / "whole.csv", tmp_path / "cut.csv"
    whole.write_bytes(b"".join(lines[:2001]))
    cut.write_bytes(b"".join(lines[:2001])[:-2])  # the last amount '1.997' cut to '1.99'
    out = tmp_path / "archive"
    argv = ["--input-format", "tardis-trades", "--out", str(out), "--as-of", AS_OF.isoformat()]
    assert main(["compact-ticks", str(cut), *argv]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: row 1999: ") and str(cut) in err and "newline" in err
    assert len(err.splitlines()) == 1 and not out.exists()
    assert main(["compact-ticks", str(whole), *argv]) == 0, capsys.readouterr().err
    before = tree_hashes(out)
    assert main(["compact-ticks", str(cut), *argv]) == 2
    assert "row 1999" in capsys.readouterr().err and tree_hashes(out) == before


@pytest.mark.parametrize(
    ("input_format", "path", "flags", "column"),
    [
        ("kalshi-trades", KALSHI_FILE, [], "created_time"),
        ("tardis-trades", TARDIS_FILE, [], "timestamp"),
        ("lobster-messages", LOBSTER_FILE, ["--symbol", "AMZN", "--session-date", "2012-06-21"],
         "time"),
    ],
)  # fmt: skip
def test_cli_compact_ticks_when_as_of_before_a_real_files_ticks_names_the_files_own_column(
    tmp_path, capsys, input_format, path, flags, column
):
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(path), "--input-format", input_format, "--out", str(out),
            "--as-of", "2012-01-01", *flags]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert re.match(rf"error: row \d+, field {column}: {re.escape(str(path))}: ticks of ", err)
    assert "after as_of 2012-01-01" in err and not out.exists()


@pytest.mark.parametrize(
    ("input_format", "path", "name", "flags"),
    [
        ("tardis-trades", TARDIS_FILE, "trades.csv.gz", []),
        ("lobster-messages", LOBSTER_FILE, LOBSTER_NAME, []),  # no header: read as rows
        ("canonical", KALSHI_FILE, "trades.csv", ["--symbol", "X"]),
    ],
)  # fmt: skip
def test_cli_compact_ticks_when_real_file_is_gzipped_says_so_and_writes_nothing(
    tmp_path, capsys, input_format, path, name, flags
):
    packed = tmp_path / name
    packed.write_bytes(gzip.compress(path.read_bytes()))
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(packed), "--input-format", input_format, "--out", str(out),
            "--as-of", AS_OF.isoformat(), *flags]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"error: {packed}: a gzip-compressed file; decompress it first and give the CSV\n"
    assert not out.exists()


def _zipped(data: bytes) -> bytes:
    sink = io.BytesIO()
    with zipfile.ZipFile(sink, "w") as archive:
        archive.writestr("trades.csv", data)
    return sink.getvalue()


@pytest.mark.parametrize(
    ("compression", "pack"),
    [
        ("zstd", lambda data: zstandard.ZstdCompressor().compress(data)),
        ("bzip2", bz2.compress),
        ("xz", lzma.compress),
        ("zip", _zipped),
    ],
)
def test_cli_compact_ticks_when_real_file_is_compressed_otherwise_names_the_compression(
    tmp_path, capsys, compression, pack
):
    packed = tmp_path / "trades.csv"
    packed.write_bytes(pack(TARDIS_FILE.read_bytes()))
    out = tmp_path / "archive"
    argv = ["compact-ticks", str(packed), "--input-format", "tardis-trades", "--out", str(out),
            "--as-of", AS_OF.isoformat()]  # fmt: skip
    assert main(argv) == 2
    err = capsys.readouterr().err
    expected = f"a {compression}-compressed file; decompress it first and give the CSV"
    assert err == f"error: {packed}: {expected}\n"
    assert not out.exists()

"""The field's formats through ``compact-ticks``: Databento DBN files written by Databento's own
``databento-dbn`` encoder (trades, TBBO, MBO; plain and zstd), and Binance trades and aggTrades
CSVs built to the published layout; each detected from the file, mapped exactly (prices from
integers or text), and read back by DuckDB."""

from __future__ import annotations

from datetime import timedelta
from decimal import Decimal
from pathlib import Path
from types import SimpleNamespace

import databento_dbn as dbn
import duckdb
import pytest
import zstandard

from skewtape_pipeline_tests.ticks.conftest import (
    DAY,
    DAY_NS,
    archive_files,
    compact,
    refused_once,
    write_text,
)

ES, NQ = 7001, 7002
"""Instrument ids: ES is mapped to a symbol in the metadata, NQ is not."""


def metadata(schema: dbn.Schema) -> bytes:
    mapping = SimpleNamespace(
        raw_symbol="ESZ6",
        intervals=[SimpleNamespace(start_date=DAY, end_date=DAY + timedelta(days=1),
                                   symbol=str(ES))],
    )  # fmt: skip
    return bytes(
        dbn.Metadata(
            dataset="GLBX.MDP3", start=DAY_NS, end=DAY_NS + 86_400 * 10**9,
            stype_in=dbn.SType.RAW_SYMBOL, stype_out=dbn.SType.INSTRUMENT_ID, schema=schema,
            symbols=["ESZ6"], mappings=[mapping],
        )
    )  # fmt: skip


def trade(instrument: int, ts: int, price: int, size: int, side: dbn.Side) -> dbn.TradeMsg:
    return dbn.TradeMsg(publisher_id=1, instrument_id=instrument, ts_event=DAY_NS + ts,
                        price=price, size=size, action=dbn.Action.TRADE, side=side, depth=0,
                        ts_recv=DAY_NS + ts + 50)  # fmt: skip


def mbo(ts: int, price: int, size: int, action: dbn.Action, side: dbn.Side) -> dbn.MBOMsg:
    return dbn.MBOMsg(publisher_id=1, instrument_id=ES, ts_event=DAY_NS + ts, order_id=ts,
                      price=price, size=size, action=action, side=side,
                      ts_recv=DAY_NS + ts + 50)  # fmt: skip


def dbn_file(path: Path, schema: dbn.Schema, records, *, zstd: bool = False) -> Path:
    data = metadata(schema) + b"".join(bytes(r) for r in records)
    path.write_bytes(zstandard.ZstdCompressor().compress(data) if zstd else data)
    return path


def archived(archive: Path) -> list[tuple]:
    """(symbol, ns, price, quantity, side) of every tick DuckDB reads from the archive."""
    return duckdb.sql(
        "SELECT symbol, epoch_ns(ts), price, quantity, side::VARCHAR FROM "
        "read_parquet($glob, hive_partitioning = true) ORDER BY ALL",
        params={"glob": f"{archive}/symbol=*/**/*.parquet"},
    ).fetchall()


TRADES = [
    trade(ES, 100, 4_512_250_000_000, 3, dbn.Side.BID),
    trade(ES, 200, 4_512_000_000_000, 1, dbn.Side.ASK),
    trade(NQ, 300, 21_000_125_000_000, 2, dbn.Side.NONE),
]
EXPECTED = [
    ("7002", DAY_NS + 300, Decimal("21000.125"), 2, "UNKNOWN"),
    ("ESZ6", DAY_NS + 100, Decimal("4512.25"), 3, "BUY"),
    ("ESZ6", DAY_NS + 200, Decimal("4512.0"), 1, "SELL"),
]


@pytest.mark.parametrize("zstd", [False, True], ids=["dbn", "dbn.zst"])
def test_compact_ticks_when_given_a_dbn_trades_file_maps_symbols_prices_and_sides(
    tmp_path: Path, capsys, zstd: bool
):
    name = "glbx-trades.dbn.zst" if zstd else "glbx-trades.dbn"
    source = dbn_file(tmp_path / name, dbn.Schema.TRADES, TRADES, zstd=zstd)
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 0, err
    assert archived(tmp_path / "archive") == EXPECTED


def test_compact_ticks_when_given_a_dbn_mbo_file_keeps_only_its_trades(tmp_path: Path, capsys):
    records = [
        mbo(10, 4_512_250_000_000, 5, dbn.Action.ADD, dbn.Side.ASK),
        mbo(20, 4_512_250_000_000, 2, dbn.Action.TRADE, dbn.Side.BID),
        mbo(30, 4_512_250_000_000, 3, dbn.Action.CANCEL, dbn.Side.ASK),
        mbo(40, 4_511_750_000_000, 4, dbn.Action.TRADE, dbn.Side.ASK),
    ]
    source = dbn_file(tmp_path / "glbx-mbo.dbn", dbn.Schema.MBO, records)
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 0, err
    ticks = [(ns - DAY_NS, str(p), q, side) for _, ns, p, q, side in archived(tmp_path / "archive")]
    assert ticks == [(20, "4512.25", 2, "BUY"), (40, "4511.75", 4, "SELL")]


def test_compact_ticks_when_given_a_dbn_tbbo_file_reads_its_trades(tmp_path: Path, capsys):
    record = dbn.MBP1Msg(publisher_id=1, instrument_id=ES, ts_event=DAY_NS + 5,
                         price=4_512_500_000_000, size=7, action=dbn.Action.TRADE,
                         side=dbn.Side.BID, depth=0, ts_recv=DAY_NS + 9)  # fmt: skip
    source = dbn_file(tmp_path / "glbx-tbbo.dbn", dbn.Schema.TBBO, [record])
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 0, err
    assert archived(tmp_path / "archive") == [("ESZ6", DAY_NS + 5, Decimal("4512.50"), 7, "BUY")]


def test_compact_ticks_when_a_dbn_trade_has_no_price_refuses_naming_the_record(
    tmp_path: Path, capsys
):
    records = [TRADES[0], trade(ES, 150, dbn.UNDEF_PRICE, 1, dbn.Side.BID)]
    source = dbn_file(tmp_path / "bad.dbn", dbn.Schema.TRADES, records)
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 2 and "bad.dbn" in err and "row 1" in err and "price" in err
    assert not (tmp_path / "archive").exists()


def test_compact_ticks_when_a_dbn_ts_event_is_undefined_refuses_naming_the_record(
    tmp_path: Path, capsys
):
    archive = tmp_path / "archive"
    assert compact(capsys, dbn_file(tmp_path / "a.dbn", dbn.Schema.TRADES, TRADES), archive)[0] == 0
    before = archive_files(archive)
    undefined = dbn.TradeMsg(publisher_id=1, instrument_id=ES, ts_event=dbn.UNDEF_TIMESTAMP,
                             price=4_512_250_000_000, size=1, action=dbn.Action.TRADE,
                             side=dbn.Side.BID, depth=0, ts_recv=DAY_NS + 250)  # fmt: skip
    source = dbn_file(tmp_path / "bad.dbn", dbn.Schema.TRADES, [*TRADES[:2], undefined])
    code, err = compact(capsys, source, archive)
    assert code == 2
    refused_once(err, source, 2, "ts_event")
    assert f"ts_event '{dbn.UNDEF_TIMESTAMP}' does not fit int64" in err
    assert archive_files(archive) == before


def test_compact_ticks_when_a_dbn_file_holds_no_trades_refuses_naming_its_schema(
    tmp_path: Path, capsys
):
    source = dbn_file(tmp_path / "ohlcv.dbn", dbn.Schema.OHLCV_1M, [])
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 2 and "ohlcv-1m" in err and "Traceback" not in err


SKIPPABLE = (0x184D2A53).to_bytes(4, "little") + (5).to_bytes(4, "little") + b"notes"
"""A zstd skippable frame (RFC 8878: magic 0x184D2A5?, size, data): no data to decode."""


def cut_inside_a_record(data: bytes) -> bytes:
    return data[:-7]


def cut_inside_the_zstd_frame(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(write_checksum=True).compress(data)[:-9]


def stray_bytes_after_the_frame(data: bytes) -> bytes:
    return zstandard.ZstdCompressor().compress(data) + b"\x00garbage"


@pytest.mark.parametrize(
    "damage", [cut_inside_a_record, cut_inside_the_zstd_frame, stray_bytes_after_the_frame]
)
def test_compact_ticks_when_a_dbn_file_is_cut_short_refuses_it_keeping_the_archived_day(
    tmp_path: Path, capsys, damage
):
    """A download cut short read as a shorter file would replace the day archived whole."""
    whole = dbn_file(tmp_path / "glbx-trades.dbn", dbn.Schema.TRADES, TRADES)
    archive = tmp_path / "archive"
    assert compact(capsys, whole, archive)[0] == 0
    before = archive_files(archive)
    cut = tmp_path / ("again.dbn.zst" if "zstd" in damage.__name__ else "again.dbn")
    cut.write_bytes(damage(whole.read_bytes()))
    code, err = compact(capsys, cut, archive)
    assert code == 2 and cut.name in err, err
    assert ("cut short" in err) != (damage is stray_bytes_after_the_frame), err
    assert "Traceback" not in err
    assert archive_files(archive) == before
    assert archived(archive) == EXPECTED


def test_compact_ticks_when_a_dbn_zst_file_holds_several_frames_reads_every_one(
    tmp_path: Path, capsys
):
    """As ``zstd`` writes files concatenated (``cat a.zst b.zst``), with skippable frames first
    (as pzstd writes) and between; the first frame ends inside a record."""
    data = metadata(dbn.Schema.TRADES) + b"".join(bytes(r) for r in TRADES)
    half = len(data) - 50
    frames = [SKIPPABLE, zstandard.ZstdCompressor().compress(data[:half]), SKIPPABLE,
              zstandard.ZstdCompressor(write_checksum=True).compress(data[half:])]  # fmt: skip
    source = tmp_path / "glbx-trades.dbn.zst"
    source.write_bytes(b"".join(frames))
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 0, err
    assert archived(tmp_path / "archive") == EXPECTED


# --- Binance -------------------------------------------------------------------------------------

MS = DAY_NS // 10**6
"""DAY's midnight in milliseconds."""


def test_compact_ticks_when_given_binance_spot_trades_maps_is_buyer_maker_to_the_side(
    tmp_path: Path, capsys
):
    rows = [  # id, price, qty, quote_qty, time (ms, then µs), is_buyer_maker, is_best_match
        f"101,97000.01000000,0.00150000,145.50001500,{MS + 1},True,True",
        f"102,97000.02000000,0.01000000,970.00020000,{(MS + 2) * 1000 + 7},False,True",
    ]
    source = write_text(tmp_path / "BTCUSDT-trades-2026-11-20.csv", "\n".join(rows) + "\n")
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 0, err
    assert archived(tmp_path / "archive") == [
        ("BTCUSDT", DAY_NS + 10**6, Decimal("97000.01"), Decimal("0.0015"), "SELL"),
        ("BTCUSDT", DAY_NS + 2 * 10**6 + 7000, Decimal("97000.02"), Decimal("0.0100"), "BUY"),
    ]


def test_compact_ticks_when_given_binance_futures_aggtrades_with_header_reads_them(
    tmp_path: Path, capsys
):
    text = (
        "agg_trade_id,price,quantity,first_trade_id,last_trade_id,transact_time,is_buyer_maker\n"
        f"9,3100.5,2.125,40,42,{MS + 5},false\n"
    )
    source = write_text(tmp_path / "ETHUSDT-aggTrades-2026-11.csv", text)
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 0, err
    assert archived(tmp_path / "archive") == [
        ("ETHUSDT", DAY_NS + 5 * 10**6, Decimal("3100.5"), Decimal("2.125"), "BUY")
    ]


def test_compact_ticks_when_a_binance_file_is_renamed_asks_for_the_symbol(tmp_path: Path, capsys):
    source = write_text(tmp_path / "trades.csv", f"1,1.5,2,3,{MS},true,true\n")
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 2 and "pass --symbol" in err
    code, err = compact(capsys, source, tmp_path / "archive", "--symbol", "XRPUSDT")
    assert code == 0, err
    assert archived(tmp_path / "archive")[0][0] == "XRPUSDT"


def test_compact_ticks_when_a_binance_time_overflows_nanoseconds_refuses_naming_the_row(
    tmp_path: Path, capsys
):
    rows = [f"1,1.5,2,3,{MS},true,true", "2,1.5,2,3,99999999999999,true,true"]
    source = write_text(tmp_path / "XRPUSDT-trades-2026-11-20.csv", "\n".join(rows) + "\n")
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 2
    refused_once(err, source, 1, "time")
    assert "time 99999999999999 overflows int64 nanoseconds" in err
    assert not (tmp_path / "archive").exists()


def test_compact_ticks_when_a_binance_price_is_not_a_number_refuses_naming_the_row(
    tmp_path: Path, capsys
):
    rows = [f"1,1.5,2,3,{MS},true,true", f"2,abc,2,3,{MS + 1},true,true"]
    source = write_text(tmp_path / "XRPUSDT-trades-2026-11-20.csv", "\n".join(rows) + "\n")
    code, err = compact(capsys, source, tmp_path / "archive")
    assert code == 2 and "row 1" in err and "price" in err
    assert not (tmp_path / "archive").exists()

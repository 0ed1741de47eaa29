"""The anchors the tick archive is measured against, each storing the same exact integers.

Every anchor takes a list of partitions (one for a whole file; one per symbol-day when split)
and a scratch folder, writes its storage there and returns the bytes it occupies. The caller
times the call, so ticks per second covers encode + write (anchors do not verify).

All anchors get the exact integer columns we store (timestamps in ns, prices and quantities as
scaled int64, side as a string or a 1-byte code where the store has one): the fairest, and
strictest, comparison for our Parquet files.
"""

from __future__ import annotations

import dataclasses
import io
import itertools
import os
import shutil
import struct
import zlib
from collections.abc import Callable
from pathlib import Path

import duckdb
import numpy as np
import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.feather as feather
import pyarrow.parquet as pq
import zstandard
from tick_data import SIDE_NAMES, Ticks, decimal_array

TKC1_MAGIC = b"TKC1"
TKC1_VERSION = 1


@dataclasses.dataclass
class Part:
    """One stored unit: a whole file (``key`` "whole") or one symbol-day."""

    key: str
    symbol: str
    date: str | None
    ticks: Ticks
    with_symbol: bool  # whole multi-symbol file: the symbol column is stored


def allocated_bytes(root: Path) -> int:
    """Bytes the filesystem allocated under ``root`` (st_blocks, like ``du``)."""
    total = 0
    for folder, _dirs, files in os.walk(root):
        for name in files:
            total += os.stat(os.path.join(folder, name)).st_blocks * 512
    return total


def file_bytes(root: Path) -> int:
    """Sum of the apparent sizes of the files under ``root``."""
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


# --- canonical CSV -------------------------------------------------------------------------


def canonical_csv(part: Part) -> bytes:
    """``[symbol,]timestamp_nanos,price,quantity,side`` with exact decimals, one header line."""
    t = part.ticks
    columns: dict[str, pa.Array] = {}
    if part.with_symbol:
        columns["symbol"] = pa.array(t.symbols, type=pa.string())
    columns["timestamp_nanos"] = pa.array(t.ts_ns, type=pa.int64())
    columns["price"] = decimal_array(t.price, t.price_scale)
    if t.quantity_scale:
        columns["quantity"] = decimal_array(t.quantity, t.quantity_scale)
    else:
        columns["quantity"] = pa.array(t.quantity, type=pa.int64())
    columns["side"] = pa.array(np.array(SIDE_NAMES, dtype=object)[t.side], type=pa.string())
    sink = io.BytesIO()
    options = pacsv.WriteOptions(quoting_style="none")
    pacsv.write_csv(pa.table(columns), sink, write_options=options)
    return sink.getvalue()


def csv_plain(parts: list[Part], workdir: Path) -> int:
    for i, part in enumerate(parts):
        (workdir / f"{i}.csv").write_bytes(canonical_csv(part))
    return file_bytes(workdir)


def csv_zstd19(parts: list[Part], workdir: Path) -> int:
    compressor = zstandard.ZstdCompressor(level=19)
    for i, part in enumerate(parts):
        (workdir / f"{i}.csv.zst").write_bytes(compressor.compress(canonical_csv(part)))
    return file_bytes(workdir)


# --- TKC1, the seed's reference model --------------------------------------------------------


TKC1_SIDE_CODES = np.array([1, 2, 0], dtype=np.uint8)  # BUY, SELL, UNKNOWN -> TKC1 codes


def tkc1_blob(t: Ticks) -> bytes:
    """The seed's layout, byte for byte the project's ``tkc1.encode_columns``.

    Header ``>4sBBQ`` (magic, version, price scale, tick count), then big-endian int64 timestamp
    deltas, int64 price deltas (first elements absolute), int64 quantities, and uint8 side codes
    (0 UNKNOWN, 1 BUY, 2 SELL): exactly 14 + 25 n bytes.
    """
    header = TKC1_MAGIC + struct.pack(">BBQ", TKC1_VERSION, t.price_scale, len(t))
    ts_deltas = np.diff(t.ts_ns, prepend=np.int64(0))
    price_deltas = np.diff(t.price, prepend=np.int64(0))
    body = (
        ts_deltas.astype(">i8").tobytes()
        + price_deltas.astype(">i8").tobytes()
        + t.quantity.astype(">i8").tobytes()
        + TKC1_SIDE_CODES[t.side].tobytes()
    )
    return header + body


def tkc1_stream(part: Part) -> bytes:
    """One blob per instrument; a multi-symbol file prefixes a ``symbol,count`` directory."""
    t = part.ticks
    if not part.with_symbol:
        return tkc1_blob(t)
    change = np.flatnonzero(t.symbols[1:] != t.symbols[:-1]) + 1
    bounds = np.concatenate(([0], change, [len(t)]))
    directory, blobs = [], []
    for lo, hi in itertools.pairwise(bounds):
        directory.append(f"{t.symbols[lo]},{hi - lo}\n")
        blobs.append(tkc1_blob(t.take(slice(lo, hi), symbol=str(t.symbols[lo]))))
    head = "".join(directory).encode()
    return struct.pack("<I", len(head)) + head + b"".join(blobs)


def tkc1_zlib6(parts: list[Part], workdir: Path) -> int:
    for i, part in enumerate(parts):
        (workdir / f"{i}.tkc1.z").write_bytes(zlib.compress(tkc1_stream(part), 6))
    return file_bytes(workdir)


def tkc1_zstd19(parts: list[Part], workdir: Path) -> int:
    compressor = zstandard.ZstdCompressor(level=19)
    for i, part in enumerate(parts):
        (workdir / f"{i}.tkc1.zst").write_bytes(compressor.compress(tkc1_stream(part)))
    return file_bytes(workdir)


# --- Parquet: pyarrow defaults and DuckDB --------------------------------------------------


def arrow_table(part: Part) -> pa.Table:
    """The logical table every Parquet anchor writes (scaled int64 price and quantity)."""
    from tick_data import to_arrow

    return to_arrow(part.ticks, with_symbol=part.with_symbol)


def pyarrow_defaults(parts: list[Part], workdir: Path) -> int:
    for i, part in enumerate(parts):
        pq.write_table(arrow_table(part), workdir / f"{i}.parquet")
    return file_bytes(workdir)


def duckdb_zstd(parts: list[Part], workdir: Path) -> int:
    """``COPY ... (FORMAT parquet, COMPRESSION zstd)``; symbol-days via ``PARTITION_BY``."""
    con = duckdb.connect()
    con.execute("SET threads = 1")
    if len(parts) == 1:
        ticks_tbl = arrow_table(parts[0])
        target = str(workdir / "whole.parquet")
        con.execute(f"COPY ticks_tbl TO '{target}' (FORMAT parquet, COMPRESSION zstd)")
    else:
        ticks_tbl = pa.concat_tables(  # noqa: F841
            arrow_table(p).append_column("symbol", pa.array([p.symbol] * len(p.ticks)))
            for p in parts
        )
        con.execute(
            f"COPY (SELECT *, strftime(ts AT TIME ZONE 'UTC', '%Y-%m-%d') AS date FROM ticks_tbl) "
            f"TO '{workdir / 'split'}' "
            "(FORMAT parquet, COMPRESSION zstd, PARTITION_BY (symbol, date))"
        )
    con.close()
    return file_bytes(workdir)


# --- ClickHouse MergeTree with codecs (chdb) ----------------------------------------------

CH_SIDE = "Enum8('BUY' = 0, 'SELL' = 1, 'UNKNOWN' = 2)"
CH_COLUMNS = (
    "symbol LowCardinality(String) CODEC(ZSTD(19)), "
    "ts DateTime64(9, 'UTC') CODEC(DoubleDelta, ZSTD(19)), "
    "price Int64 CODEC(Delta, ZSTD(19)), "
    "quantity Int64 CODEC(T64, ZSTD(19)), "
    f"side {CH_SIDE} CODEC(ZSTD(19))"
)


def clickhouse_codecs(parts: list[Part], workdir: Path) -> int:
    """One MergeTree table ordered by (symbol, ts); split: partitioned by (symbol, UTC date).

    Returns the active parts' ``bytes_on_disk`` after ``OPTIMIZE ... FINAL`` (data, marks,
    primary index, checksums: everything the part keeps).
    """
    from chdb import session

    table = pa.concat_tables(
        arrow_table(p).append_column("symbol", pa.array([p.symbol] * len(p.ticks)))
        if not p.with_symbol
        else arrow_table(p)
        for p in parts
    )
    source = workdir / "input.arrow"
    feather.write_feather(table, str(source), compression="uncompressed")
    db = session.Session(str(workdir / "ch"))
    try:
        partition = "PARTITION BY (symbol, toDate(ts))" if len(parts) > 1 else ""
        db.query("CREATE DATABASE IF NOT EXISTS bench")
        db.query(
            f"CREATE TABLE bench.ticks ({CH_COLUMNS}) ENGINE = MergeTree "
            f"{partition} ORDER BY (symbol, ts)"
        )
        db.query(
            "INSERT INTO bench.ticks SELECT symbol, ts, price, quantity, "
            f"CAST(side AS {CH_SIDE}) FROM file('{source}', 'Arrow') "
            "SETTINGS max_threads = 1, max_insert_threads = 1, max_partitions_per_insert_block = 0"
        )
        db.query("OPTIMIZE TABLE bench.ticks FINAL SETTINGS optimize_throw_if_noop = 0")
        result = db.query(
            "SELECT sum(bytes_on_disk) FROM system.parts "
            "WHERE database = 'bench' AND table = 'ticks' AND active",
            "CSV",
        )
        return int(str(result).strip())
    finally:
        db.close()


def clickhouse_columns(parts: list[Part], workdir: Path) -> dict[str, int]:
    """Compressed bytes per column of the table ``clickhouse_codecs`` left in ``workdir``."""
    from chdb import session

    db = session.Session(str(workdir / "ch"))
    try:
        result = db.query(
            "SELECT name, data_compressed_bytes FROM system.columns "
            "WHERE database = 'bench' AND table = 'ticks'",
            "CSV",
        )
    finally:
        db.close()
    out = {}
    for line in str(result).strip().splitlines():
        name, size = line.split(",")
        out[name.strip('"')] = int(size)
    return out


# --- ArcticDB on LMDB -------------------------------------------------------------------


def arcticdb_lmdb(parts: list[Part], workdir: Path) -> int:
    """One ArcticDB symbol per part (ts as the index); bytes = LMDB blocks allocated by the writes.

    The blocks of the freshly created empty library are subtracted, so only the data's cost counts.
    """
    import arcticdb
    import pandas as pd

    store = workdir / "arctic"
    store.mkdir()
    arctic = arcticdb.Arctic(f"lmdb://{store}?map_size=16GB")
    library = arctic.get_library("ticks", create_if_missing=True)
    empty = allocated_bytes(store)
    for part in parts:
        t = part.ticks
        frame = {"price": t.price, "quantity": t.quantity, "side": t.side}
        if part.with_symbol:
            frame = {"symbol": t.symbols.astype(str), **frame}
        index = pd.DatetimeIndex(t.ts_ns.view("datetime64[ns]"), name="ts")
        name = part.key if part.date is None else f"{part.symbol}/{part.date}"
        library.write(name, pd.DataFrame(frame, index=index), validate_index=False)
    del library, arctic
    return allocated_bytes(store) - empty


# --- pcodec (headroom yardstick; no query engine reads it) ---------------------------------


def pcodec_streams(part: Part) -> list[bytes]:
    import pcodec

    t = part.ticks
    config = pcodec.ChunkConfig(compression_level=12, enable_8_bit=True)
    streams = [
        pcodec.standalone.simple_compress(np.ascontiguousarray(column), config)
        for column in (t.ts_ns, t.price, t.quantity, t.side)
    ]
    if part.with_symbol:
        names, codes = np.unique(t.symbols.astype(str), return_inverse=True)
        streams.append(pcodec.standalone.simple_compress(codes.astype(np.uint32), config))
        streams.append(zstandard.ZstdCompressor(level=19).compress("\n".join(names).encode()))
    return streams


def pcodec_level12(parts: list[Part], workdir: Path) -> int:
    for i, part in enumerate(parts):
        (workdir / f"{i}.pco").write_bytes(b"".join(pcodec_streams(part)))
    return file_bytes(workdir)


Anchor = Callable[[list[Part], Path], int]

ANCHORS: dict[str, Anchor] = {
    "canonical CSV": csv_plain,
    "CSV + zstd-19": csv_zstd19,
    "TKC1 + zlib-6": tkc1_zlib6,
    "TKC1 + zstd-19": tkc1_zstd19,
    "Parquet, pyarrow defaults": pyarrow_defaults,
    "Parquet, DuckDB zstd": duckdb_zstd,
    "ClickHouse codecs + ZSTD(19)": clickhouse_codecs,
    "ArcticDB (LMDB)": arcticdb_lmdb,
}
YARDSTICKS: dict[str, Anchor] = {
    "pcodec level 12 (yardstick)": pcodec_level12,
}


def fresh_dir(path: Path) -> Path:
    if path.exists():
        shutil.rmtree(path)
    path.mkdir(parents=True)
    return path

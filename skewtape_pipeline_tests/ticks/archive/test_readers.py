"""One archive, one schema: an archive spanning hot, warm and cold, read without our code by
Spark, DuckDB, pyarrow and polars, gives the same column types in every tier and exactly the
ticks that went in.

Each reader reads a tier root the way the docs say: Spark ``spark.read.parquet(root)``,
DuckDB ``read_parquet('<root>/**/*.parquet', hive_partitioning = true)``, polars
``scan_parquet('<root>/**/*.parquet', hive_partitioning=True)``, pyarrow
``ds.dataset(root, partitioning=HIVE_PARTITIONING)`` (pyarrow cannot infer a date from a folder
name, so the docs give the partitioning's types).
"""

from __future__ import annotations

from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pytest
from pyspark.sql import SparkSession

from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_ticks
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM, TierPolicy
from skewtape_pipeline.ticks.encode.validate import day_start_ns
from skewtape_pipeline_tests.ticks.conftest import archive_at

pytestmark = pytest.mark.slow

AS_OF = date(2026, 11, 29)
AGES = {HOT: 1, WARM: 30, COLD: 200}
SYMBOLS = ("kalshi:KX-PAY/26", "polymarket:0xAB")
COLUMNS = ("symbol", "date", "ts", "price", "quantity", "side")
HIVE_PARTITIONING = ds.partitioning(
    pa.schema(
        [
            ("symbol", pa.string()),
            ("year", pa.int32()),
            ("month", pa.int32()),
            ("date", pa.date32()),
        ]
    ),
    flavor="hive",
)
"""What the docs tell pyarrow users to pass for the hot tier (folder names carry no type)."""


def _ticks(sizes: str) -> list[tuple[str, date, int, str, str, str]]:
    """(symbol, day, ts_ns, price, quantity, side) rows: µs times, cents, and sizes with 3
    decimals (``sizes`` "decimal") or whole ("whole")."""
    rows = []
    for tier, age in AGES.items():
        day = AS_OF - timedelta(days=age)
        for s, symbol in enumerate(SYMBOLS):
            for i in range(5):
                ts = day_start_ns(day) + 3_600_000_000_000 * (s + 1) + 1_000 * (i * 7 // 2)
                price = f"{0.40 + 0.01 * ((i * 3 + s) % 7) + (0.5 if tier == COLD else 0):.2f}"
                size = f"{1 + i * 0.125:.3f}" if sizes == "decimal" else str(1 + i * 25)
                rows.append((symbol, day, ts, price, size, ["BUY", "SELL"][i % 2]))
    return rows


QUANTITY_TYPES = {
    "decimal": {"spark": "decimal(18,3)", "duckdb": "DECIMAL(18,3)", "pyarrow": "decimal128(18, 3)",
                "polars": "Decimal(precision=18, scale=3)"},
    "whole": {"spark": "bigint", "duckdb": "BIGINT", "pyarrow": "int64", "polars": "Int64"},
}  # fmt: skip
"""The quantity type each reader sees (the docs' table): INT64 at scale 0, else DECIMAL."""


@pytest.fixture(scope="module", params=sorted(QUANTITY_TYPES))
def archive(request, tmp_path_factory) -> tuple[str, dict[str, Path]]:
    """The sizes kind and the tier roots of one archive holding :func:`_ticks`, each tier
    non-empty."""
    sizes = request.param
    folder = tmp_path_factory.mktemp("readers")
    source = folder / "ticks.csv"
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{ts},{p},{q},{side},{symbol}" for symbol, _, ts, p, q, side in _ticks(sizes)]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = folder / "archive"
    policy = TierPolicy()
    compact_ticks(archive_at(out, policy).core, source, as_of=AS_OF)
    Archive(out, policy=policy, audit_log=None).retier(as_of=AS_OF)
    roots = {tier: policy.root_for(tier, out) for tier in (HOT, WARM, COLD)}
    for tier, root in roots.items():
        assert list(root.rglob("*.parquet")), f"the {tier} tier holds no file"
    return sizes, roots


def expected_rows(sizes: str) -> list[tuple]:
    return sorted(
        (symbol, day, ts // 1_000, Decimal(p), Decimal(q), side)
        for symbol, day, ts, p, q, side in _ticks(sizes)
    )


@pytest.fixture(scope="module")
def spark():
    """One local Spark session for the module (the JVM starts once), bound to 127.0.0.1."""
    session = (
        SparkSession.builder.master("local[1]")
        .appName("skewtape-readers")
        .config("spark.ui.enabled", "false")
        .config("spark.driver.host", "127.0.0.1")
        .config("spark.driver.bindAddress", "127.0.0.1")
        .config("spark.driver.memory", "512m")
        .config("spark.sql.shuffle.partitions", "1")
        .config("spark.sql.session.timeZone", "UTC")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    yield session
    session.stop()


def read_spark(spark, root: Path) -> tuple[dict[str, str], list[tuple]]:
    frame = spark.read.parquet(str(root))
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields if f.name in COLUMNS}
    rows = frame.selectExpr(
        "symbol", "date", "unix_micros(ts)", "price", "quantity", "side"
    ).collect()
    return types, [tuple(r) for r in rows]


def read_duckdb(root: Path) -> tuple[dict[str, str], list[tuple]]:
    relation = duckdb.sql(
        f"SELECT * FROM read_parquet('{root}/*=*/**/*.parquet', hive_partitioning = true)"
    )
    types = {n: str(t) for n, t in zip(relation.columns, relation.types, strict=True)}
    rows = duckdb.sql(
        f"SELECT symbol, date, epoch_us(ts), price, quantity, side::VARCHAR "
        f"FROM read_parquet('{root}/*=*/**/*.parquet', hive_partitioning = true)"
    ).fetchall()
    return {n: t for n, t in types.items() if n in COLUMNS}, rows


def read_pyarrow(root: Path) -> tuple[dict[str, str], list[tuple]]:
    dataset = ds.dataset(root, format="parquet", partitioning=HIVE_PARTITIONING)
    table = dataset.to_table()
    types = {f.name: str(f.type) for f in table.schema if f.name in COLUMNS}
    micros = pc.cast(pc.cast(table.column("ts"), pa.timestamp("us", "UTC")), pa.int64())
    table = table.set_column(table.schema.get_field_index("ts"), "ts", micros)
    rows = zip(*(table.column(c).to_pylist() for c in COLUMNS), strict=True)
    return types, list(rows)


def read_polars(root: Path) -> tuple[dict[str, str], list[tuple]]:
    frame = pl.scan_parquet(f"{root}/*=*/**/*.parquet", hive_partitioning=True).collect()
    types = {n: str(t) for n, t in frame.schema.items() if n in COLUMNS}
    frame = frame.with_columns(pl.col("ts").dt.epoch("us"))
    return types, [tuple(r) for r in frame.select(COLUMNS).iter_rows()]


def check_reader(read, reader: str, archive: tuple[str, dict[str, Path]]) -> None:
    sizes, roots = archive
    types = {}
    rows = []
    for tier, root in roots.items():
        types[tier], tier_rows = read(root)
        rows += tier_rows
    assert set(types[HOT]) == set(COLUMNS), types[HOT]
    assert types[WARM] == types[HOT] and types[COLD] == types[HOT], types
    assert types[HOT]["quantity"] == QUANTITY_TYPES[sizes][reader]
    assert sorted(rows) == expected_rows(sizes)


def test_spark_when_reading_every_tier_sees_one_schema_and_exact_ticks(spark, archive):
    check_reader(lambda root: read_spark(spark, root), "spark", archive)


def test_duckdb_when_reading_every_tier_sees_one_schema_and_exact_ticks(archive):
    check_reader(read_duckdb, "duckdb", archive)


def test_pyarrow_when_reading_every_tier_sees_one_schema_and_exact_ticks(archive):
    check_reader(read_pyarrow, "pyarrow", archive)


def test_polars_when_reading_every_tier_sees_one_schema_and_exact_ticks(archive):
    check_reader(read_polars, "polars", archive)


def test_spark_when_archive_holds_true_nanoseconds_reads_them_as_bigint_with_nanos_as_long(
    spark, tmp_path
):
    day = AS_OF - timedelta(days=1)
    stamps = [day_start_ns(day) + 1_000_000_000 + k for k in (1, 7, 7, 123_456_789)]
    source = tmp_path / "ns.csv"
    lines = ["timestamp_nanos,price,quantity,side,symbol"]
    lines += [f"{ts},220.515,100,BUY,AMZN" for ts in stamps]
    source.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out = tmp_path / "archive"
    (report,) = compact_ticks(archive_at(out).core, source, as_of=AS_OF)
    assert report.timestamp_unit == "ns"
    spark.conf.set("spark.sql.legacy.parquet.nanosAsLong", "true")
    try:
        frame = spark.read.parquet(str(out))
        assert dict(frame.dtypes)["ts"] == "bigint"
        assert sorted(r[0] for r in frame.select("ts").collect()) == stamps
    finally:
        spark.conf.unset("spark.sql.legacy.parquet.nanosAsLong")

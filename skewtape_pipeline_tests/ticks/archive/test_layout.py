"""What lives under an archive root: symbol folders, staged files published into place
(never a half-written or unverified file), a rewritten partition holding exactly one file."""

from __future__ import annotations

import shutil
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.dataset as ds
import pytest

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import RoundTripError
from skewtape_pipeline.ticks.archive.store.layout import (
    decode_symbol,
    encode_symbol,
    partition_file,
    prepare_archive_file,
    publish_archive_file,
)
from skewtape_pipeline.ticks.archive.store.policy import TierSettings
from skewtape_pipeline.ticks.encode import parquet_file
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline.ticks.encode.parquet_file import read_archive_batch, read_archive_table
from skewtape_pipeline_tests.ticks.conftest import DAY, day_batch

HOT = TierSettings(compression_level=1, encoding_sample_rows=1_000)


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


def test_encode_symbol_when_megabytes_long_quotes_its_start_in_a_short_error():
    with pytest.raises(Exception, match="symbol") as info:
        encode_symbol("x" * 5_000_000)
    assert len(str(info.value)) < 300 and "5000000 characters" in str(info.value)


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


def test_write_when_verification_fails_publishes_nothing(tmp_path, monkeypatch):
    batch = day_batch(10)

    def tampered(path):
        table, schema = read_archive_table(path)
        return schema, iter([table.take(pa.array([1, 0, *range(2, table.num_rows)]))])

    monkeypatch.setattr(parquet_file, "read_archive_row_groups", tampered)
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
        parquet_file, "read_archive_row_groups", lambda path: (schema, iter([table]))
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

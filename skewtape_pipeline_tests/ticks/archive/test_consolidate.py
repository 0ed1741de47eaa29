"""Consolidated files: row groups on symbol-day boundaries, verification, content names, shares."""

from __future__ import annotations

import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import ConfigError, RoundTripError
from skewtape_pipeline.ticks.archive.store import consolidate
from skewtape_pipeline.ticks.archive.store.consolidate import (
    SymbolDayRows,
    byte_shares,
    period_folder,
    read_consolidated_file,
    row_group_bounds,
    write_consolidated_file,
)
from skewtape_pipeline.ticks.archive.store.policy import TierSettings, period_of
from skewtape_pipeline_tests.ticks.archive_builders import DAYS, SYMBOLS, day_ticks

SETTINGS = TierSettings(compression_level=9, consolidated_row_group_size=8)


def parts(days=DAYS[:3]) -> list[SymbolDayRows]:
    return [SymbolDayRows(s, d, day_ticks(s, d)) for s in SYMBOLS for d in days]


@pytest.mark.parametrize(
    ("lengths", "target", "expected"),
    [
        ([3, 3, 3], 8, [(0, 6), (6, 9)]),
        ([3, 20, 2], 8, [(0, 3), (3, 23), (23, 25)]),
        ([8], 8, [(0, 8)]),
        ([1, 1, 1, 1], 2, [(0, 2), (2, 4)]),
    ],
)
def test_row_group_bounds_when_parts_vary_packs_whole_parts_up_to_target(lengths, target, expected):
    assert row_group_bounds(lengths, target=target, max_rows=1_000) == expected


def test_row_group_bounds_when_part_exceeds_max_rows_splits_it():
    assert row_group_bounds([2, 25], target=8, max_rows=10) == [(0, 2), (2, 12), (12, 22), (22, 27)]


def test_write_consolidated_file_when_read_back_returns_every_symbol_day_exactly(tmp_path):
    written = write_consolidated_file(parts(), tmp_path, settings=SETTINGS, metadata={})
    back = read_consolidated_file(written.path)
    assert [(p.symbol, p.day) for p in back] == [(p.symbol, p.day) for p in parts()]
    assert all(a.batch.equals(b.batch) for a, b in zip(parts(), back, strict=True))
    assert written.path.name == f"part-{written.sha256[:16]}.parquet"
    meta = pq.read_metadata(written.path)
    assert meta.num_row_groups > 1
    assert meta.row_group(0).sorting_columns[0].column_index == 0  # symbol first
    assert not written.path.stat().st_mode & 0o222  # read-only


def test_write_consolidated_file_when_same_parts_again_reuses_the_file(tmp_path):
    first = write_consolidated_file(parts(), tmp_path, settings=SETTINGS, metadata={})
    second = write_consolidated_file(parts(), tmp_path, settings=SETTINGS, metadata={})
    assert (second.path, second.reused, first.reused) == (first.path, True, False)
    assert sorted(p.name for p in tmp_path.iterdir()) == [first.path.name]


def test_write_consolidated_file_when_read_back_differs_publishes_nothing(tmp_path, monkeypatch):
    real = consolidate.consolidated_table
    monkeypatch.setattr(
        consolidate, "consolidated_table", lambda p: real(p).slice(1)
    )  # a writer that drops the first row
    with pytest.raises(RoundTripError, match="row counts differ"):
        write_consolidated_file(parts(), tmp_path, settings=SETTINGS, metadata={})
    assert list(tmp_path.iterdir()) == []


def test_write_consolidated_file_when_parts_unordered_or_repeated_raises(tmp_path):
    items = parts()
    with pytest.raises(ConfigError, match="ordered"):
        write_consolidated_file(items[::-1], tmp_path, settings=SETTINGS, metadata={})
    with pytest.raises(ConfigError, match="ordered"):
        write_consolidated_file([items[0], items[0]], tmp_path, settings=SETTINGS, metadata={})
    with pytest.raises(ConfigError, match="at least one"):
        write_consolidated_file([], tmp_path, settings=SETTINGS, metadata={})
    assert list(tmp_path.iterdir()) == []


def test_byte_shares_when_file_written_add_up_to_its_size_and_follow_rows(tmp_path):
    written = write_consolidated_file(parts(), tmp_path, settings=SETTINGS, metadata={})
    assert sum(written.byte_shares) == written.bytes == written.path.stat().st_size
    lengths = [len(p.batch) for p in parts()]
    assert byte_shares(written.path, lengths) == written.byte_shares
    biggest = max(range(len(lengths)), key=lengths.__getitem__)
    assert written.byte_shares[biggest] == max(written.byte_shares)


def test_period_of_when_layout_month_or_year_names_the_folder(tmp_path):
    assert period_of(DAYS[0], "month") == "2026-01"
    assert period_of(DAYS[0], "year") == "2026"
    assert period_folder(tmp_path, "2026-01") == tmp_path / "year=2026" / "month=01"
    assert period_folder(tmp_path, "2026") == tmp_path / "year=2026"
    with pytest.raises(ConfigError, match="layout"):
        period_of(DAYS[0], "symbol-day")


def many_parts(n: int) -> list[SymbolDayRows]:
    """``n`` symbol-days of one tick each, ordered by symbol then day."""
    symbols = [f"S{i:05d}" for i in range(n)]
    return [SymbolDayRows(s, DAYS[0], day_ticks(s, DAYS[0]).slice(0, 1)) for s in symbols]


def key_value_bytes(path) -> int:
    return sum(len(k) + len(v) for k, v in pq.read_metadata(path).metadata.items())


def test_write_consolidated_file_when_symbol_days_grow_key_value_metadata_stays_the_same(
    tmp_path,
):
    metadata = {"skewtape.tier": "COLD", "skewtape.period": "2026"}
    few = write_consolidated_file(many_parts(10), tmp_path, settings=SETTINGS, metadata=metadata)
    many = write_consolidated_file(
        many_parts(1_000), tmp_path, settings=SETTINGS, metadata=metadata
    )
    assert many.rows == 100 * few.rows
    assert abs(key_value_bytes(many.path) - key_value_bytes(few.path)) <= 4  # the count's digits

"""A consolidated file's compression: its symbol-days' canonical CSV bytes over its own bytes."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewtape_pipeline.errors import TickFormatError
from skewtape_pipeline.ticks.archive.store.consolidate import SymbolDayRows, write_consolidated_file
from skewtape_pipeline.ticks.archive.store.file_compression import (
    MIN_TICKS_JUDGED,
    file_compression,
)
from skewtape_pipeline.ticks.archive.store.policy import TierSettings
from skewtape_pipeline.ticks.encode.sources import write_canonical_csv
from skewtape_pipeline_tests.ticks.archive_builders import DAYS, SYMBOLS, day_ticks


def test_file_compression_when_measured_counts_each_symbol_days_csv_over_the_file(tmp_path: Path):
    parts = [SymbolDayRows(s, d, day_ticks(s, d)) for s in SYMBOLS for d in DAYS[:3]]
    written = write_consolidated_file(
        parts, tmp_path / "cold", settings=TierSettings(compression_level=19), metadata={}
    )
    csv_bytes = 0
    for index, part in enumerate(parts):
        write_canonical_csv(part.batch, tmp_path / f"{index}.csv")
        csv_bytes += (tmp_path / f"{index}.csv").stat().st_size

    measured = file_compression(written.path)

    assert measured.ticks == sum(len(part.batch) for part in parts)
    assert measured.symbol_days == len(parts)
    assert measured.raw_size_bytes == csv_bytes
    assert measured.size_bytes == written.path.stat().st_size
    assert measured.ratio == pytest.approx(csv_bytes / measured.size_bytes)
    assert measured.judged() is (measured.ticks >= MIN_TICKS_JUDGED)
    assert measured.judged(min_ticks=measured.ticks) and not measured.judged(measured.ticks + 1)


def test_file_compression_when_not_a_consolidated_file_names_it(tmp_path: Path):
    path = tmp_path / "part.parquet"
    path.write_bytes(b"not parquet")
    with pytest.raises(TickFormatError, match=r"part\.parquet"):
        file_compression(path)

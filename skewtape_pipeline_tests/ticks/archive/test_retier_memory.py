"""Re-tiering in bounded memory, and consolidated files of at most a target size."""

from __future__ import annotations

import os
import subprocess
import sys
from datetime import date, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

import skewtape_pipeline
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.store.books import EVENT_REWRITE, default_audit_log
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.policy import COLD, TierPolicy, TierSettings
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.validate import day_start_ns
from skewtape_pipeline_tests.ticks.archive.test_reads import assert_reads_as_the_view
from skewtape_pipeline_tests.ticks.archive_builders import audit_events

FIRST = date(2026, 3, 2)
AS_OF = FIRST + timedelta(days=400)
MIB = 2**20


def ticks(seed: int, day: date, n: int) -> TickBatch:
    """``n`` sorted ticks of one day, varied by ``seed`` (arithmetic, no random source)."""
    i = pa.array(range(n), pa.int64())
    wobble = pc.remainder(pc.multiply(i, 7_919 + seed), 1_000)
    return TickBatch.from_units(
        pc.add(pc.add(pc.multiply(i, 1_000_000), wobble), day_start_ns(day)),
        pc.add(pc.remainder(pc.multiply(i, 31 + seed), 97), 10_000),
        pc.add(pc.remainder(pc.multiply(i, 17), 499), 1),
        pc.cast(pc.remainder(pc.add(i, seed), 2), pa.int8()),
        TickSchema(price_scale=2),
    )


def hot_archive(root: Path, symbol_days: int, n: int, policy: TierPolicy) -> Path:
    archive = Archive(root, policy=policy, audit_log=None)
    for i in range(symbol_days):
        day = FIRST + timedelta(days=i // 10)
        compact_symbol_day(
            archive.core, ticks(i, day, n), SymbolDayWrite(symbol=f"S{i % 10}", day=day, age_days=1)
        )
    return root


RETIER = """
import resource, sys
from datetime import date
from pathlib import Path
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
Archive(Path(sys.argv[1]), policy=TierPolicy(), audit_log=None).retier(
    as_of=date.fromisoformat(sys.argv[2])
)
print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss)
"""


def peak_rss_of_retier(root: Path) -> int:
    """Bytes a child process re-tiering ``root`` peaked at (its own ``getrusage``)."""
    project = str(Path(skewtape_pipeline.__file__).resolve().parents[1])
    env = {**os.environ, "PYTHONPATH": project}
    done = subprocess.run(
        [sys.executable, "-c", RETIER, str(root), AS_OF.isoformat()],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout.split()[-1]) * 1024


def test_retier_when_the_input_is_ten_times_larger_peaks_at_the_same_memory(tmp_path, no_fsync):
    small = hot_archive(tmp_path / "small" / "archive", 10, 40_000, TierPolicy())
    large = hot_archive(tmp_path / "large" / "archive", 100, 40_000, TierPolicy())
    small_peak, large_peak = peak_rss_of_retier(small), peak_rss_of_retier(large)
    assert [f.tier for f in CatalogStore(large).read().files.values()] == [COLD]  # one yearly file
    assert large_peak - small_peak < 48 * MIB, (small_peak // MIB, large_peak // MIB)
    assert_reads_as_the_view(Archive(large, audit_log=None), queries=[{}, {"symbols": ["S3"]}])


def split_policy(target: int) -> TierPolicy:
    cold = TierSettings(consolidated_row_group_size=4_096, consolidated_target_bytes=target)
    return TierPolicy(hot_max_age_days=1, warm_max_age_days=2, cold=cold)


def test_retier_when_a_period_exceeds_the_target_size_writes_several_catalogued_files(
    tmp_path, no_fsync
):
    policy = split_policy(16 * 1024)
    root = hot_archive(tmp_path / "archive", 30, 10_000, policy)
    archive = Archive(root, policy=policy, audit_log=None)
    result = archive.retier(as_of=AS_OF)
    catalog = CatalogStore(root).read()
    periods = [(f.tier, f.period) for f in catalog.files.values()]
    assert len(periods) > 2 and set(periods) == {(COLD, "2026")}
    assert len(result.files_written) == len(periods)
    held = [f.symbol_days for f in catalog.files.values()]
    assert sum(held) == 30 and all(n >= 1 for n in held)
    sizes = [f.bytes for f in catalog.files.values()]
    assert max(sizes) < 2 * 16 * 1024  # the target, passed by at most a row group
    assert_reads_as_the_view(archive, queries=[{}, {"symbols": ["S3"]}, {"start": FIRST}])
    again = archive.retier(as_of=AS_OF)  # nothing to move: the files stay as they are
    assert (
        again.files_written == [] and CatalogStore(root).read().files.keys() == catalog.files.keys()
    )


def test_retier_when_a_period_becomes_several_files_audits_each_with_its_own_sources(
    tmp_path, no_fsync
):
    policy = split_policy(16 * 1024)
    root = hot_archive(tmp_path / "archive", 30, 10_000, policy)
    Archive(root, policy=policy, audit_log=default_audit_log(root)).retier(as_of=AS_OF)
    rewrites = [e for e in audit_events(root) if e["event"] == EVENT_REWRITE]
    assert len(rewrites) > 2
    for record in rewrites:  # one hot file per symbol-day: as many sources as symbol-days
        assert len(record["sources"]) == record["symbol_days"], record["file"]
    named = [s["file"] for record in rewrites for s in record["sources"]]
    assert len(named) == len(set(named)) == 30  # each hot file named once, by its own file

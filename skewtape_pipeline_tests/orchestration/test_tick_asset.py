"""The tick archive asset in process: symbols registered by the months, a day over all symbols
in one run with per-partition metadata, and its checks."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.orchestration.tick_asset import ROUND_TRIP, TICK_ARCHIVE
from skewtape_pipeline.orchestration.tick_partitions import SYMBOLS, symbol_day_of, symbol_key
from skewtape_pipeline.ticks.snapshot_fills import new_symbols
from skewtape_pipeline_tests.orchestration.conftest import run_month

DAY = "2026-10-05"


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


@pytest.fixture
def two_months(definitions: dg.Definitions, instance: dg.DagsterInstance) -> dg.Definitions:
    for month in ("2026-09", "2026-10"):
        assert run_month(definitions, month, instance).success
    return definitions


def run_day(defs: dg.Definitions, instance: dg.DagsterInstance, day: str):
    symbols = instance.get_dynamic_partitions(SYMBOLS)
    job = defs.resolve_job_def("archive_ticks")
    return job.execute_in_process(
        instance=instance,
        raise_on_error=False,
        tags={
            "dagster/asset_partition_range_start": f"{day}|{symbols[0]}",
            "dagster/asset_partition_range_end": f"{day}|{symbols[-1]}",
        },
    )


def test_history_snapshot_when_months_applied_registers_the_symbols_of_their_fills(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    history = sample_root / "history"
    expected = {symbol_key(s) for m in ("2026-09", "2026-10") for s in new_symbols(history, m)}
    assert set(instance.get_dynamic_partitions(SYMBOLS)) == expected


def test_tick_archive_when_one_day_runs_over_all_symbols_records_metadata_per_partition(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    result = run_day(two_months, instance, DAY)
    assert result.success
    events = result.asset_materializations_for_node("tick_archive")
    symbols = instance.get_dynamic_partitions(SYMBOLS)
    assert sorted(e.partition for e in events) == sorted(f"{DAY}|{s}" for s in symbols)
    with_ticks = [e for e in events if e.metadata["tick_count"].value > 0]
    assert 0 < len(with_ticks) < len(events)
    for event in with_ticks:
        symbol, day = symbol_day_of(event.partition)
        metadata = {k: v.value for k, v in event.metadata.items()}
        assert (metadata["symbol"], metadata["date"]) == (symbol, day.isoformat())
        assert metadata["source_bundle_id"] == "skewtape-history-2026-10"
        assert metadata["source_fills_path"] == f"fills/{symbol.split(':')[0]}/2026-10.parquet"
        assert Path(metadata["path"]).is_file()
        assert metadata["round_trip_verified"] is True
        assert next(iter(event.metadata)) == "summary" and symbol in metadata["summary"]
        assert isinstance(event.metadata["path"], dg.PathMetadataValue)
        assert metadata["compression_ratio"] == round(metadata["compression_ratio"], 2)
        assert metadata["space_savings_pct"] == round(metadata["space_savings_pct"], 1)
        assert metadata["seconds"] == round(metadata["seconds"], 3)
        assert not {"tier_policy", "encodings"} & set(metadata)  # once per run, on the check
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert set(checks) == {ROUND_TRIP}
    assert checks[ROUND_TRIP].passed
    recorded = {k: v.value for k, v in checks[ROUND_TRIP].metadata.items()}
    assert recorded["tier_policy"]["hot_max_age_days"] == 7
    assert set(recorded["encodings"]) >= {"ts", "price", "quantity", "side"}
    materialized = instance.get_materialized_partitions(TICK_ARCHIVE)
    assert len(materialized) == len(symbols)


def test_tick_archive_when_a_venue_left_keeps_its_ticks_and_says_so(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    for month in ("2026-09", "2026-10", "2026-11", "2026-12"):  # augur leaves in 2026-12
        assert run_month(definitions, month, instance).success
    result = run_day(definitions, instance, DAY)
    assert result.success
    events = result.asset_materializations_for_node("tick_archive")
    augur = [e for e in events if symbol_day_of(e.partition)[0].startswith("augur:")]
    with_ticks = [e for e in augur if e.metadata["tick_count"].value > 0]
    assert with_ticks, "the sample's augur trades on this day"
    for event in with_ticks:
        assert event.metadata["venue_departed"].value is True
        assert event.metadata["source_bundle_id"].value == "skewtape-history-2026-11"
        assert Path(event.metadata["path"].value).is_file()
    others = [e for e in events if "venue_departed" in e.metadata and e not in augur]
    assert others and all(e.metadata["venue_departed"].value is False for e in others)


def test_tick_archive_when_day_month_not_applied_fails_and_records_nothing(
    definitions: dg.Definitions, instance: dg.DagsterInstance
):
    assert run_month(definitions, "2026-09", instance).success
    result = run_day(definitions, instance, DAY)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "materialize history_snapshot 2026-10 first" in str(failure.event_specific_data.error)
    assert instance.get_materialized_partitions(TICK_ARCHIVE) == set()

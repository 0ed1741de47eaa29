"""The corrections sensor: a month that replaces an earlier month's fills requests exactly the
symbol-days whose ticks changed."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.orchestration.resources import SkewtapeHome
from skewtape_pipeline.orchestration.tick_partitions import register_symbols, symbol_day_key
from skewtape_pipeline.orchestration.tick_sensors import tick_corrections_sensor
from skewtape_pipeline.ticks.snapshot_fills import corrected_symbol_days, new_symbols


@pytest.fixture
def instance():
    with dg.DagsterInstance.ephemeral() as ephemeral:
        yield ephemeral


def tick(root: Path, instance: dg.DagsterInstance, cursor: str | None = None):
    context = dg.build_sensor_context(
        cursor=cursor, instance=instance, resources={"skewtape": SkewtapeHome(root=str(root))}
    )
    return tick_corrections_sensor(context)


def test_corrections_sensor_when_a_month_corrects_earlier_fills_requests_exactly_those_days(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    for month in ("2026-09", "2026-10", "2026-11"):
        register_symbols(instance, new_symbols(history, month))
    corrected = corrected_symbol_days(history, "2026-11")
    result = tick(applied_chain, instance)
    expected = [str(symbol_day_key(symbol, day)) for symbol, day in corrected]
    assert [r.partition_key for r in result.run_requests] == expected
    assert [r.run_key for r in result.run_requests] == [f"2026-11:{key}" for key in expected]
    assert result.cursor == "2026-11"
    again = tick(applied_chain, instance, cursor=result.cursor)
    assert again.run_requests == []
    assert again.cursor == "2026-11"


def test_corrections_sensor_when_symbols_not_registered_names_them_instead(
    applied_chain: Path, instance: dg.DagsterInstance
):
    result = tick(applied_chain, instance, cursor="2026-10")
    assert result.run_requests == []
    [(symbol, day), *_] = corrected_symbol_days(applied_chain / "history", "2026-11")
    assert f"{symbol} {day}" in result.skip_reason.skip_message

"""The delta arrival sensor, evaluated with build_sensor_context on the sample's deltas."""

from __future__ import annotations

import os
import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST
from skewtape_pipeline.orchestration.mirror import sensors
from skewtape_pipeline.orchestration.mirror.sensors import delta_arrival_sensor, run_key
from skewtape_pipeline.orchestration.shared.partitions import month_of
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


def tick(skewtape: SkewtapeHome, cursor: str | None = None) -> dg.SensorResult:
    context = dg.build_sensor_context(cursor=cursor, resources={"skewtape": skewtape})
    return delta_arrival_sensor(context)


def manifest_sha(root: Path, month: str) -> str:
    return sha256_file(root / "deltas" / month / MANIFEST)


@pytest.fixture
def two_deltas(sample_root: Path) -> Path:
    """The sample with only the deltas of 2026-10 and 2026-11 (partitions whatever the date)."""
    for folder in (sample_root / "deltas").iterdir():
        if folder.name > "2026-11":
            shutil.rmtree(folder)
    return sample_root


def test_sensor_when_deltas_complete_requests_each_month_in_order_with_manifest_run_keys(
    two_deltas: Path, skewtape: SkewtapeHome
):
    result = tick(skewtape)
    assert [(r.partition_key, r.run_key) for r in result.run_requests] == [
        ("2026-10", run_key("2026-10", manifest_sha(two_deltas, "2026-10"))),
        ("2026-11", run_key("2026-11", manifest_sha(two_deltas, "2026-11"))),
    ]
    assert result.cursor == "2026-11"


def test_sensor_when_delta_still_arriving_skips_saying_why_and_keeps_cursor(
    two_deltas: Path, skewtape: SkewtapeHome
):
    (two_deltas / "deltas" / "2026-11" / CHECKSUMS).unlink()
    first = tick(skewtape, cursor="2026-10")
    assert first.run_requests == []
    assert "2026-11" in first.skip_reason.skip_message
    assert CHECKSUMS in first.skip_reason.skip_message
    assert first.cursor == "2026-10"


def test_sensor_when_a_file_is_half_copied_requests_nothing_until_it_is_whole(
    two_deltas: Path, skewtape: SkewtapeHome, tmp_path: Path
):
    delta = two_deltas / "deltas" / "2026-11"
    listed = [line.split("  ", 1)[1] for line in (delta / CHECKSUMS).read_text().splitlines()]
    big = max((delta / rel for rel in listed), key=lambda path: path.stat().st_size)
    whole = big.read_bytes()
    big.write_bytes(whole[: len(whole) // 3])
    assert tick(skewtape, cursor="2026-10").run_requests == []
    big.write_bytes(whole)
    assert [r.partition_key for r in tick(skewtape, cursor="2026-10").run_requests] == ["2026-11"]


def test_sensor_when_cursor_is_past_every_delta_skips_as_already_seen(
    two_deltas: Path, skewtape: SkewtapeHome
):
    result = tick(skewtape, cursor="2026-11")
    assert result.run_requests == []
    assert result.skip_reason.skip_message == "no new delta in $SKEWTAPE_HOME/deltas"
    assert result.cursor == "2026-11"


def test_sensor_when_month_already_applied_advances_cursor_without_a_run(
    two_deltas: Path, skewtape: SkewtapeHome, published_full_snapshots: Path
):
    shutil.copytree(published_full_snapshots / "2026-10", two_deltas / "history" / "2026-10")
    result = tick(skewtape)
    assert [r.partition_key for r in result.run_requests] == ["2026-11"]
    assert result.cursor == "2026-11"


def test_sensor_when_delta_is_for_a_future_month_waits_without_requesting(
    two_deltas: Path, skewtape: SkewtapeHome
):
    now = datetime.now(UTC)
    future = month_of(datetime(now.year + 1, now.month, 1, tzinfo=UTC))
    shutil.copytree(two_deltas / "deltas" / "2026-11", two_deltas / "deltas" / future)
    result = tick(skewtape, cursor="2026-11")
    assert result.run_requests == []
    assert future in result.skip_reason.skip_message
    assert result.cursor == "2026-11"


def test_sensor_when_deltas_holds_thousands_of_entries_inspects_only_new_months(
    two_deltas: Path, skewtape: SkewtapeHome, monkeypatch: pytest.MonkeyPatch
):
    deltas = two_deltas / "deltas"
    for year in range(1800, 2026):
        for month in range(1, 13):
            os.mkdir(deltas / f"{year}-{month:02d}")
    for index in range(500):
        (deltas / f"stray-{index}.txt").write_text("not a delta")
    inspected: list[str] = []
    real_inspect = sensors.inspect_delta

    def counting_inspect(folder: Path):
        inspected.append(folder.name)
        return real_inspect(folder)

    monkeypatch.setattr(sensors, "inspect_delta", counting_inspect)
    result = tick(skewtape, cursor="2026-10")
    assert inspected == ["2026-11"]
    assert [r.partition_key for r in result.run_requests] == ["2026-11"]

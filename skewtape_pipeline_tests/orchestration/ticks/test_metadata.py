"""What the UI shows of a re-tiering: the compression target judged on consolidated files only,
as a warning, the files named relative to their tier root."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.tier_assets import TARGET_MET, retier_run_config
from skewtape_pipeline_tests.orchestration.ticks.test_tier_assets import DAYS, TO_COLD, archive_days


@pytest.mark.parametrize(
    ("settings", "passed", "verdict"),
    [
        ({}, True, "not judged (too small)"),  # the sample's cold file: 10,000 ticks or fewer
        ({"target_min_ticks": 1, "target_ratio": 1.5}, True, "met"),
        ({"target_min_ticks": 1, "target_ratio": 50.0}, False, "missed"),
    ],
)
def test_compression_check_when_a_consolidated_file_is_written_judges_it_if_big_enough(
    applied_chain: Path, settings: dict, passed: bool, verdict: str
):
    archive_days(applied_chain, DAYS)
    archive = ArchiveSettings(**settings)
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)), archive)
    with dg.DagsterInstance.ephemeral() as instance:
        result = defs.resolve_job_def("retier_ticks").execute_in_process(
            run_config=retier_run_config(TO_COLD),
            instance=instance,
            tags={
                "dagster/asset_partition_range_start": "2026-09",
                "dagster/asset_partition_range_end": "2026-11",
            },
        )
    assert result.success  # a warning, never a failed run
    [check] = [c for c in result.get_asset_check_evaluations() if c.check_name == TARGET_MET]
    assert check.passed == passed
    assert check.severity == dg.AssetCheckSeverity.WARN
    [row] = check.metadata["files"].records
    cold_root = applied_chain / "archive-cold"
    cold = next(cold_root.rglob("*.parquet"))
    shown = f"COLD/{cold.relative_to(cold_root).as_posix()}"  # relative to its tier root
    assert (row.data["file"], row.data["bytes"]) == (shown, cold.stat().st_size)
    assert row.data["ratio"] == round(row.data["csv_bytes"] / row.data["bytes"], 2)
    assert 1.5 < row.data["ratio"] < 50
    assert row.data["verdict"] == verdict
    numbers = {k for k, v in check.metadata.items() if isinstance(v, dg.FloatMetadataValue)}
    assert numbers == set()  # the target is text: no constant to plot
    if verdict == "not judged (too small)":
        assert check.description.startswith("Judged nothing: none of the 1 consolidated file")
        assert "files_judged" not in check.metadata and "files_missed" not in check.metadata
    else:
        assert check.metadata["files_judged"].value == 1
        assert check.metadata["files_missed"].value == (verdict == "missed")

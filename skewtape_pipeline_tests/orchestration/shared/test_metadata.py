"""What the UI shows of a month's apply and of a re-tiering: the summary first, Dagster's typed
metadata values, rounded numbers, the tables of a schema-break month said to come whole, and
the compression target judged on consolidated files only."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.tier_assets import TARGET_MET, retier_run_config
from skewtape_pipeline_tests.orchestration.conftest import run_month
from skewtape_pipeline_tests.orchestration.ticks.test_tier_assets import DAYS, TO_COLD, archive_days


@pytest.fixture(scope="module")
def month_metadata(
    published_sample: Path, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, dict[str, dg.MetadataValue]]:
    """{month: materialization metadata} of the sample's first three months, applied once."""
    root = tmp_path_factory.mktemp("metadata") / "data"
    shutil.copytree(published_sample, root, symlinks=True)
    defs = build_definitions(SkewtapeHome(root=str(root)))
    found = {}
    with dg.DagsterInstance.ephemeral() as instance:
        for month in ("2026-09", "2026-10", "2026-11"):
            result = run_month(defs, month, instance)
            assert result.success, month
            [event] = result.asset_materializations_for_node("history_snapshot")
            found[month] = dict(event.metadata)
    return found


def manifest_ops(root: Path, month: str) -> dict[str, str]:
    manifest = json.loads((root / "deltas" / month / "manifest.json").read_text())
    return {entry["path"]: entry["op"] for entry in manifest["files"]}


def test_apply_metadata_when_a_month_applies_puts_the_summary_first_with_typed_rounded_values(
    month_metadata: dict[str, dict[str, dg.MetadataValue]], published_sample: Path
):
    metadata = month_metadata["2026-10"]
    assert next(iter(metadata)) == "summary"
    assert isinstance(metadata["summary"], dg.MarkdownMetadataValue)
    assert isinstance(metadata["snapshot"], dg.PathMetadataValue)
    assert isinstance(metadata["files_added"], dg.IntMetadataValue)
    assert isinstance(metadata["files_cloned"], dg.IntMetadataValue)
    written = metadata["bytes_written"]
    assert isinstance(written, dg.TextMetadataValue)  # a byte count says its unit
    assert re.fullmatch(r"\d+\.\d (KB|MB) \([\d,]+ bytes\)|\d+ bytes", written.value)
    assert re.fullmatch(r".* \([\d,]+ bytes\)|\d+ bytes", metadata["bytes_hashed"].value)
    seconds = {k: v for k, v in metadata.items() if k.startswith("seconds")}
    assert {"seconds", "seconds.verify_delta", "seconds.merges", "seconds.verify"} <= set(seconds)
    for value in seconds.values():
        assert isinstance(value, dg.FloatMetadataValue)
        assert value.value == round(value.value, 3)
    tables = metadata["tables"]
    assert isinstance(tables, dg.TableMetadataValue)
    assert [c.name for c in tables.schema.columns][:2] == ["table", "change"]
    changed = {
        path.removesuffix(".parquet")
        for path, op in manifest_ops(published_sample, "2026-10").items()
        if op == "change"
    }
    rows = {r.data["table"]: r.data for r in tables.records}
    assert {t for t, r in rows.items() if r["change"] == "merged by key"} == changed
    assert sum(r["rows_upserted"] for r in rows.values()) == metadata["rows_upserted"].value > 0
    assert not [k for k in metadata if k.startswith("rows_upserted.")]


def test_apply_metadata_when_the_tables_come_whole_says_so(
    month_metadata: dict[str, dict[str, dg.MetadataValue]], published_sample: Path
):
    metadata = month_metadata["2026-11"]  # the sample's schema break: tables replaced whole
    ops = manifest_ops(published_sample, "2026-11")
    replaced = {p.removesuffix(".parquet") for p, op in ops.items() if p.endswith(".parquet")}
    rows = {r.data["table"]: r.data for r in metadata["tables"].records}
    assert {"markets", "resolutions", "matched_events", "fees"} <= replaced
    assert {t: r["change"] for t, r in rows.items()} == dict.fromkeys(
        ("markets", "resolutions", "matched_events", "fees"), "replaced whole"
    )
    assert metadata["rows_upserted"].value == 0
    summary = metadata["summary"].value
    assert "came whole" in summary and "replaced whole" in summary


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

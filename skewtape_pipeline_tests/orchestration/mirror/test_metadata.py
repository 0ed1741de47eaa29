"""What the UI shows of a month's apply: the summary first, Dagster's typed metadata values,
rounded numbers, the tables of a schema-break month said to come whole."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline_tests.orchestration.conftest import run_month


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

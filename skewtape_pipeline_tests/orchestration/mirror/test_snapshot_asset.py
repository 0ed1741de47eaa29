"""The history snapshot asset, materialized in process on the sample chain."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline import fsio
from skewtape_pipeline.mirror import apply
from skewtape_pipeline.mirror.format import MANIFEST, TABLE_KEYS, DeltaManifest
from skewtape_pipeline.mirror.snapshot import read_snapshot
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.mirror import snapshot_asset
from skewtape_pipeline.orchestration.mirror.checks import keys_unique, month_check_evaluations
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline_tests.orchestration.conftest import run_month


def delta_manifest(root: Path, month: str) -> dict:
    return json.loads((root / "deltas" / month / MANIFEST).read_bytes())


def materialization(result: dg.ExecuteInProcessResult) -> dg.AssetMaterialization:
    [event] = result.asset_materializations_for_node("history_snapshot")
    return event


def metadata_values(event: dg.AssetMaterialization) -> dict[str, object]:
    return {label: getattr(value, "value", value) for label, value in event.metadata.items()}


def test_history_snapshot_when_first_months_materialized_in_order_reaches_each_snapshot(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    for month in ("2026-09", "2026-10", "2026-11"):
        result = run_month(definitions, month, instance)
        assert result.success, month
        checks = result.get_asset_check_evaluations()
        assert {check.check_name for check in checks} == {
            "checksums_verified",
            "keys_unique",
            "row_counts_match",
            "no_unlisted_files",
        }
        assert all(check.passed for check in checks), [c.metadata for c in checks]
    assert instance.get_materialized_partitions(HISTORY_SNAPSHOT) == {
        "2026-09",
        "2026-10",
        "2026-11",
    }
    for month in ("2026-10", "2026-11"):
        expected = delta_manifest(sample_root, month)["next"]
        snapshot = sample_root / "history" / month
        assert read_snapshot(snapshot)[2] == expected["manifest_sha256"]
        assert verify_snapshot(snapshot, full=True).bundle_id == expected["bundle_id"]


def test_history_snapshot_when_applied_records_apply_metadata(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    bootstrap = metadata_values(materialization(run_month(definitions, "2026-09", instance)))
    assert bootstrap["snapshot"] == "$SKEWTAPE_HOME/history/2026-09"
    assert bootstrap["summary"].startswith("`$SKEWTAPE_HOME/history/2026-09` holds")
    result = run_month(definitions, "2026-10", instance)
    metadata = metadata_values(materialization(result))
    manifest = delta_manifest(sample_root, "2026-10")
    assert metadata["parent_bundle_id"] == manifest["parent"]["bundle_id"]
    assert metadata["next_bundle_id"] == manifest["next"]["bundle_id"]
    assert metadata["already_applied"] is False
    assert metadata["snapshot"] == "$SKEWTAPE_HOME/history/2026-10"  # not the machine's folders
    assert "`$SKEWTAPE_HOME/history/2026-10`:" in metadata["summary"]
    assert str(sample_root) not in str(metadata)
    ops = [entry["op"] for entry in manifest["files"]]
    assert metadata["files_deleted"] == ops.count("delete")
    assert metadata["files_added"] + metadata["files_replaced"] > 0
    changed_tables = {entry["path"] for entry in manifest["files"] if entry["op"] == "change"}
    merged = {
        r.data["table"] for r in metadata["tables"].records if r.data["change"] == "merged by key"
    }
    assert merged >= {table.removesuffix(".parquet") for table in changed_tables}
    for phase in ("verify_delta", "file_ops", "merges", "publish", "verify_snapshot"):
        assert f"seconds.{phase}" in metadata
    assert manifest["next"]["bundle_id"] in metadata["summary"]


def test_history_snapshot_when_month_run_twice_second_run_does_nothing_and_succeeds(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    assert run_month(definitions, "2026-09", instance).success
    assert run_month(definitions, "2026-10", instance).success
    snapshot = sample_root / "history" / "2026-10"
    before = {p: p.stat().st_mtime_ns for p in snapshot.rglob("*") if ".skewtape" not in p.parts}
    again = run_month(definitions, "2026-10", instance)
    assert again.success
    metadata = metadata_values(materialization(again))
    assert metadata["already_applied"] is True
    after = {p: p.stat().st_mtime_ns for p in snapshot.rglob("*") if ".skewtape" not in p.parts}
    assert after == before
    zeros = [k for k, v in metadata.items() if v in (0, 0.0) and not isinstance(v, bool)]
    assert zeros == []  # no rows of zeros for work an applied month did not do


def test_history_snapshot_when_verification_fails_leaves_month_unmaterialized(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    snapshot = sample_root / "history" / "2026-09"
    victim = max(snapshot.glob("fills/*/*.parquet"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[len(data) // 2] ^= 0xFF
    victim.write_bytes(bytes(data))
    result = run_month(definitions, "2026-09", instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failure.step_key.endswith("verify_month_snapshot")
    error = str(failure.event_specific_data.error)
    assert str(victim.relative_to(snapshot)) in error
    assert "$SKEWTAPE_HOME/history/2026-09 does not verify: " in error  # never the machine's
    assert str(sample_root) not in error  # folders
    assert instance.get_materialized_partitions(HISTORY_SNAPSHOT) == set()


def test_history_snapshot_when_previous_month_never_applied_fails_naming_it(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    result = run_month(definitions, "2026-11", instance)
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "materialize 2026-10 first" in str(failure.event_specific_data.error)
    assert not (sample_root / "history" / "2026-11").exists()
    assert instance.get_materialized_partitions(HISTORY_SNAPSHOT) == set()


def test_history_snapshot_when_a_month_is_refused_the_failure_says_why_first(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    result = run_month(definitions, "2026-11", instance)
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    data = failure.event_specific_data
    assert data.error.message.startswith("dagster._core.definitions.events.Failure: 2026-11 ")
    assert data.error.message.splitlines()[0].endswith("refused (ChainError): " + (
        data.user_failure_data.metadata["reason"].value))  # fmt: skip
    assert "materialize 2026-10 first" in data.user_failure_data.description
    assert data.user_failure_data.metadata["refused_by"].value == "ChainError"
    assert data.error.cause is None  # the reason first, not behind a chained traceback
    assert "$SKEWTAPE_HOME/deltas/2026-11" in data.user_failure_data.description
    assert str(sample_root) not in data.error.to_string()  # never the machine's folders
    [logged] = instance.all_logs(result.run_id, of_type=dg.DagsterEventType.ASSET_OBSERVATION)
    observed = logged.dagster_event.asset_observation_data.asset_observation
    assert (observed.asset_key, observed.partition) == (HISTORY_SNAPSHOT, "2026-11")
    assert observed.description == data.user_failure_data.description  # on the asset too


@pytest.fixture
def counted(monkeypatch) -> Counter:
    """How often a month takes the apply lock, parses a delta manifest, runs the preflight
    checks and verifies a snapshot, counted from now on."""
    counts: Counter = Counter()
    real_lock, real_parse = fsio.exclusive_lock, DeltaManifest.parse.__func__
    real_preflight, real_verify = apply._preflight, verify_snapshot

    def lock(lock_file, **options):
        if lock_file.name == apply.LOCK_FILE:
            counts["lock"] += 1
        return real_lock(lock_file, **options)

    def parse(cls, *args, **options):
        counts["parse"] += 1
        return real_parse(cls, *args, **options)

    def preflight(*args, **options):
        counts["preflight"] += 1
        return real_preflight(*args, **options)

    def verify(*args, **options):
        counts["verify"] += 1
        return real_verify(*args, **options)

    monkeypatch.setattr(fsio, "exclusive_lock", lock)
    monkeypatch.setattr(DeltaManifest, "parse", classmethod(parse))
    monkeypatch.setattr(apply, "_preflight", preflight)
    for module in (apply, snapshot_asset):
        monkeypatch.setattr(module, "verify_snapshot", verify)
    return counts


def test_history_snapshot_when_month_applied_each_step_does_its_part_once(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance, counted
):
    assert run_month(definitions, "2026-09", instance).success
    counted.clear()
    result = run_month(definitions, "2026-10", instance)
    assert result.success
    assert counted == {"lock": 1, "parse": 1, "preflight": 1, "verify": 1}


def test_history_snapshot_when_applied_hands_ops_small_location_independent_json(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    assert run_month(definitions, "2026-09", instance).success
    result = run_month(definitions, "2026-10", instance)
    for op in ("verify_delta", "apply_file_ops", "merge_tables", "publish_snapshot"):
        handed = result.output_for_node(f"history_snapshot.{op}")
        text = json.dumps(handed)
        assert json.loads(text) == handed, op
        assert str(sample_root) not in text and len(text) < 1_000, op


def test_history_snapshot_checks_when_a_month_is_refused_say_where_the_reason_is(
    definitions: dg.Definitions, instance: dg.DagsterInstance
):
    result = run_month(definitions, "2026-11", instance)
    assert not result.success
    evaluations = instance.all_logs(
        result.run_id, of_type=dg.DagsterEventType.ASSET_CHECK_EVALUATION
    )
    assert evaluations == []  # Dagster records no check result: what the descriptions explain
    specs = [spec for checks in definitions.asset_checks or [] for spec in checks.check_specs
             if spec.asset_key == HISTORY_SNAPSHOT]  # fmt: skip
    assert specs
    for spec in specs:
        assert "`<month> refused (<error>): <reason>`" in spec.description
        assert "observation on the month's partition" in spec.description


def test_history_snapshot_checks_when_a_month_is_damaged_name_its_files_from_the_data_root(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """The checks' problems name paths under the data root as ``$SKEWTAPE_HOME/...``, never
    by the machine's folders, run as the asset's checks or after a catch-up's month alike."""
    assert run_month(definitions, "2026-09", instance).success
    table = sample_root / "history" / "2026-09" / next(iter(TABLE_KEYS))
    table.write_bytes(b"not a Parquet file")
    shown = f"$SKEWTAPE_HOME/history/2026-09/{table.name}"
    skewtape = SkewtapeHome(root=str(sample_root))

    context = dg.build_op_context(partition_key="2026-09", resources={"skewtape": skewtape})
    checked = keys_unique(context)  # as a run of the asset check runs it
    assert not checked.passed
    assert shown in checked.metadata["details"].value

    logged = month_check_evaluations(instance, skewtape, "2026-09")  # as catch_up_months does
    failed = [e for e in logged if not e.passed]
    assert {e.check_name for e in failed} >= {"checksums_verified", "keys_unique"}
    assert shown in "".join(e.metadata["details"].value for e in failed)
    for result in [checked, *failed]:
        assert str(sample_root) not in result.metadata["details"].value

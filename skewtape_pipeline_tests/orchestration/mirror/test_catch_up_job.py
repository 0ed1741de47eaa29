"""``catch_up_months`` applies every pending month in one run and records each on
``history_snapshot``, as a backfill of it would month by month."""

from __future__ import annotations

import logging
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.errors import ChainError
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.mirror import catch_up_job
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline_tests.orchestration.conftest import run_month

SUCCEEDED = "SUCCEEDED"
"""The status a passed check's execution record holds."""


def test_catch_up_months_when_deltas_are_pending_applies_them_in_one_run_and_records_each(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    assert run_month(definitions, "2026-09", instance).success  # the bootstrap month
    pending = sorted(p.name for p in (sample_root / "deltas").iterdir())
    job = definitions.resolve_job_def("catch_up_months")
    result = job.execute_in_process(instance=instance, raise_on_error=False)
    assert result.success
    assert instance.get_materialized_partitions(HISTORY_SNAPSHOT) == {"2026-09", *pending}
    for month in pending:
        assert verify_snapshot(sample_root / "history" / month).ok
    again = job.execute_in_process(instance=instance, raise_on_error=False)
    assert again.success and again.get_asset_materialization_events() == []  # current: nothing
    said = [e.user_message for e in instance.all_logs(again.run_id) if e.level == logging.INFO]
    assert "none pending" in said and not [m for m in said if "month(s) applied" in m]


def check_results(instance: dg.DagsterInstance, month: str, names: set[str]) -> dict[str, str]:
    """{check name: status} of the latest result of each of history_snapshot's checks
    ``names`` on ``month`` that targets the month's latest materialization, as the UI's check
    partitions show it (a result targeting no materialization shows there as missing)."""
    keys = [dg.AssetCheckKey(HISTORY_SNAPSHOT, name) for name in sorted(names)]
    infos = instance.event_log_storage.get_asset_check_partition_info(keys, partition_keys=[month])
    return {i.check_key.name: i.latest_execution_status.value for i in infos if i.is_current}


def test_catch_up_months_when_months_are_applied_records_each_months_check_results(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """Each month the catch-up applies shows the results of the checks a month applied alone
    (``apply_month``) gets, on its own partition."""
    alone = run_month(definitions, "2026-09", instance)
    assert alone.success
    checks = {e.check_name for e in alone.get_asset_check_evaluations()}
    assert checks and check_results(instance, "2026-09", checks) == dict.fromkeys(checks, SUCCEEDED)
    pending = sorted(p.name for p in (sample_root / "deltas").iterdir())

    result = definitions.resolve_job_def("catch_up_months").execute_in_process(instance=instance)

    assert result.success and len(pending) > 1
    for month in pending:
        assert check_results(instance, month, checks) == dict.fromkeys(checks, SUCCEEDED), month
    evaluated = {(e.check_name, e.partition) for e in result.get_asset_check_evaluations()}
    assert evaluated == {(name, month) for name in checks for month in pending}


def test_catch_up_months_when_a_delta_is_refused_fails_with_the_reason_keeping_earlier_months(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    alone = run_month(definitions, "2026-09", instance)
    assert alone.success
    checks = {e.check_name for e in alone.get_asset_check_evaluations()}
    deltas = sorted((sample_root / "deltas").iterdir())
    damaged = next(f for f in sorted(deltas[-1].rglob("*.parquet")))
    damaged.write_bytes(damaged.read_bytes() + b"damaged after publication")
    result = definitions.resolve_job_def("catch_up_months").execute_in_process(
        instance=instance, raise_on_error=False
    )
    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failure.event_specific_data.user_failure_data.description.startswith(
        "catch-up refused ("
    )
    assert not (sample_root / "history" / deltas[-1].name).exists()
    earlier = {"2026-09", *(d.name for d in deltas[:-1])}
    assert instance.get_materialized_partitions(HISTORY_SNAPSHOT) == earlier
    for month in earlier:  # applied before the refusal: checked as any applied month
        assert check_results(instance, month, checks) == dict.fromkeys(checks, SUCCEEDED), month


def test_catch_up_months_when_link_sources_is_false_copies_every_delta_file(
    sample_root: Path, instance: dg.DagsterInstance
):
    definitions = build_definitions(SkewtapeHome(root=str(sample_root), link_sources=False))
    assert run_month(definitions, "2026-09", instance).success  # the bootstrap month
    result = definitions.resolve_job_def("catch_up_months").execute_in_process(instance=instance)
    assert result.success
    delivered = [p for p in (sample_root / "deltas").rglob("*") if p.is_file()]
    assert delivered and [p for p in delivered if p.stat().st_nlink > 1] == []


@pytest.mark.parametrize(
    ("broken", "said"),
    [
        ("a month folder", "2026-10: cannot be read (Too many levels of symbolic links)"),
        ("a manifest", "2026-10/manifest.json: cannot be read (No such file or directory"),
    ],
)
def test_catch_up_months_when_history_cannot_be_read_after_a_failure_keeps_the_failure(
    definitions: dg.Definitions,
    sample_root: Path,
    instance: dg.DagsterInstance,
    monkeypatch,
    broken: str,
    said: str,
):
    """The months a failed catch-up applied are looked for once it failed; a month folder that
    cannot be read by then (a link loop), or a manifest that is a link to nothing, is a
    warning, and the run fails with the catch-up's own reason."""
    assert run_month(definitions, "2026-09", instance).success
    month = sample_root / "history" / "2026-10"

    def refused(history: Path, deltas: Path, **_: object) -> list:
        if broken == "a month folder":
            month.symlink_to(month.name)  # a link loop: no user can read it
        else:
            month.mkdir()
            (month / "manifest.json").symlink_to("gone.json")
        raise ChainError("the catch-up's own reason")

    monkeypatch.setattr(catch_up_job, "catch_up", refused)
    result = definitions.resolve_job_def("catch_up_months").execute_in_process(
        instance=instance, raise_on_error=False
    )

    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    description = failure.event_specific_data.user_failure_data.description
    assert description == "catch-up refused (ChainError): the catch-up's own reason"
    warned = [
        e.user_message for e in instance.all_logs(result.run_id) if e.level == logging.WARNING
    ]
    prefix = f"the months this run applied are not recorded: $SKEWTAPE_HOME/history/{said}"
    assert [w for w in warned if w.startswith(prefix)], warned

"""Following the publisher from Dagster: the month's graph fetches its delta first, the sensor
polls the publisher for the next month (stopped by default), the resource reads nothing at
import. The publisher is the published sample (a folder laid out as a publisher serves it)."""

from __future__ import annotations

import logging
import re
import shutil
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.mirror.format import MANIFEST
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.mirror.publisher import (
    FETCH_TIME_LIMIT_S,
    PublisherSource,
    publisher_sensor,
)
from skewtape_pipeline.orchestration.shared.keys import HISTORY_SNAPSHOT
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot
from skewtape_pipeline_tests.mirror.publisher_servers import Fault, FaultProxy, start_nginx
from skewtape_pipeline_tests.orchestration.conftest import run_month

NO_SOURCE = PublisherSource(source_variable="SKEWTAPE_TEST_UNSET_SOURCE")


@pytest.fixture
def subscriber(tmp_path: Path, published_sample: Path) -> Path:
    """A data root with the first month's snapshot and an empty ``deltas/``."""
    root = tmp_path / "data"
    first = published_sample / "history" / SAMPLE_FIRST_MONTH
    shutil.copytree(first, root / "history" / SAMPLE_FIRST_MONTH, symlinks=True)
    (root / "deltas").mkdir()
    return root


def sense(root: Path, publisher: PublisherSource):
    resources = {"skewtape": SkewtapeHome(root=str(root)), "publisher": publisher}
    with dg.build_sensor_context(resources=resources) as context:  # disposes of its instance
        return publisher_sensor(context)


def test_backfill_when_deltas_is_empty_fetches_and_applies_each_month_in_order(
    subscriber, published_sample, published_full_snapshots
):
    defs = build_definitions(
        SkewtapeHome(root=str(subscriber)),
        publisher=PublisherSource(source=str(published_sample)),
    )
    with dg.DagsterInstance.ephemeral() as instance:
        for month in ("2026-09", "2026-10", "2026-11", "2026-12"):
            assert run_month(defs, month, instance).success, month
            assert (subscriber / "deltas" / month / MANIFEST).is_file() or month == "2026-09"
        observed = instance.fetch_observations(HISTORY_SNAPSHOT, limit=10).records

    assert_same_snapshot(subscriber / "history" / "2026-12", published_full_snapshots / "2026-12")
    by_month = {r.partition_key: r.asset_observation.metadata for r in observed}
    assert sorted(by_month) == ["2026-10", "2026-11", "2026-12"]
    for month, metadata in by_month.items():
        assert metadata["fetch_folder"].value == f"$SKEWTAPE_HOME/deltas/{month}"
        assert re.fullmatch(
            r"[0-9.]+ [KMG]B \([0-9,]+ bytes\)|[0-9]+ bytes", metadata["fetch_bytes"].value
        )
        assert metadata["fetch_bytes"].value != "0 bytes"
        assert {"fetch_bytes_resumed", "fetch_retries", "fetch_seconds"} <= metadata.keys()
        assert "fetch_mean_rate_mb_per_s" in metadata


def test_month_run_when_no_publisher_is_configured_applies_the_local_delta(
    subscriber, published_sample
):
    shutil.copytree(published_sample / "deltas" / "2026-10", subscriber / "deltas" / "2026-10")
    defs = build_definitions(SkewtapeHome(root=str(subscriber)), publisher=NO_SOURCE)
    with dg.DagsterInstance.ephemeral() as instance:
        assert run_month(defs, "2026-09", instance).success
        assert run_month(defs, "2026-10", instance).success
    assert (subscriber / "history" / "2026-10" / MANIFEST).is_file()


def test_publisher_sensor_when_the_next_month_is_published_requests_its_run(
    subscriber, published_sample
):
    request = sense(subscriber, PublisherSource(source=str(published_sample)))
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key == "2026-10" and request.run_key.startswith("2026-10:published:")


def test_publisher_sensor_when_the_next_month_is_not_published_skips(
    tmp_path, subscriber, published_sample
):
    publisher = tmp_path / "publisher"
    shutil.copytree(published_sample / "history", publisher / "history")  # no delta yet
    skipped = sense(subscriber, PublisherSource(source=str(publisher)))
    assert not skipped.run_requests
    assert "has not published the delta for 2026-10" in skipped.skip_reason.skip_message


def test_publisher_sensor_when_no_publisher_is_configured_skips_naming_the_variable(
    subscriber, capfd: pytest.CaptureFixture[str]
):
    """The reason is a line of the tick's logs too: the UI lists the tick as "0 runs
    requested", and its View logs would otherwise say "No logs to display"."""
    skipped = sense(subscriber, NO_SOURCE)
    reason = skipped.skip_reason.skip_message
    assert "SKEWTAPE_TEST_UNSET_SOURCE" in reason
    assert f"skipped: {reason}" in capfd.readouterr().err


def test_publisher_sensor_when_the_history_holds_no_snapshot_logs_why_it_skips(
    tmp_path, capfd: pytest.CaptureFixture[str]
):
    skipped = sense(tmp_path / "empty", NO_SOURCE)
    reason = skipped.skip_reason.skip_message
    assert "holds no snapshot folder" in reason
    assert f"skipped: {reason}" in capfd.readouterr().err


def test_publisher_sensor_is_stopped_by_default():
    assert publisher_sensor.default_status == dg.DefaultSensorStatus.STOPPED


def test_demo_when_the_root_is_new_fetches_every_month_from_its_local_publisher(tmp_path):
    from skewtape_pipeline.orchestration.demo import PUBLISHER_DIR, follow_local_publisher

    root = tmp_path / "data"
    lines = follow_local_publisher(root, fills_per_venue_month=200)

    assert len(lines) == 4 and (root / PUBLISHER_DIR / "history" / "2026-09").is_dir()
    assert sorted(p.name for p in (root / "deltas").iterdir()) == ["2026-10", "2026-11", "2026-12"]
    assert (root / "history" / "2026-09" / MANIFEST).is_file()


def test_month_run_when_the_publisher_answers_503_once_warns_of_the_retry_in_the_runs_log(
    tmp_path, subscriber, published_sample
):
    nginx = start_nginx(published_sample, tmp_path / "nginx")
    proxy = FaultProxy(nginx.port)
    proxy.add(Fault("503"))  # the first request: the month's CHECKSUMS.sha256
    try:
        defs = build_definitions(
            SkewtapeHome(root=str(subscriber)), publisher=PublisherSource(source=proxy.url)
        )
        with dg.DagsterInstance.ephemeral() as instance:
            assert run_month(defs, "2026-09", instance).success
            result = run_month(defs, "2026-10", instance)
            logs = instance.all_logs(result.run_id)
    finally:
        proxy.close()
        nginx.stop()

    assert result.success and (subscriber / "deltas" / "2026-10" / MANIFEST).is_file()
    warnings = [e.user_message for e in logs if e.level == logging.WARNING]
    assert warnings == [
        f"{proxy.url}/deltas/2026-10/CHECKSUMS.sha256: answered 503; trying again (attempt 2 of 5)"
    ]


def test_publisher_source_gives_every_fetch_a_time_limit_by_default(published_sample):
    settings = PublisherSource(source=str(published_sample)).open().settings
    assert settings.time_limit == FETCH_TIME_LIMIT_S


def test_month_run_when_the_fetch_passes_its_time_limit_fails_naming_the_limit(
    subscriber, published_sample
):
    publisher = PublisherSource(source=str(published_sample), fetch_time_limit_s=1e-6)
    defs = build_definitions(SkewtapeHome(root=str(subscriber)), publisher=publisher)
    with dg.DagsterInstance.ephemeral() as instance:
        assert run_month(defs, "2026-09", instance).success
        result = run_month(defs, "2026-10", instance)

    assert not result.success
    [failure] = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert "ran past its time limit of 1e-06 s" in str(failure.event_specific_data.error)
    assert not (subscriber / "deltas" / "2026-10" / MANIFEST).exists()


@pytest.mark.parametrize(("field", "value"), [("fetch_time_limit_s", 0.0), ("connections", 0)])
def test_publisher_source_when_a_transfer_setting_is_refused_names_the_resources_field(
    published_sample, field, value
):
    publisher = PublisherSource(source=str(published_sample), **{field: value})
    with pytest.raises(ConfigError, match=rf"^publisher resource \(.*{field}={value!r}"):
        publisher.open()

"""The monthly schedule, evaluated with build_schedule_context."""

from __future__ import annotations

import shutil
from datetime import UTC, datetime
from pathlib import Path

import dagster as dg

from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST
from skewtape_pipeline.orchestration.mirror.publisher import PublisherSource
from skewtape_pipeline.orchestration.mirror.schedules import monthly_apply_schedule
from skewtape_pipeline.orchestration.mirror.sensors import run_key
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome


def evaluate(skewtape: SkewtapeHome, when: datetime, publisher: PublisherSource | None = None):
    no_publisher = PublisherSource(source_variable="SKEWTAPE_TEST_UNSET_SOURCE")
    resources = {"skewtape": skewtape, "publisher": publisher or no_publisher}
    context = dg.build_schedule_context(scheduled_execution_time=when, resources=resources)
    return monthly_apply_schedule(context)


def test_schedule_when_last_months_delta_arrived_requests_that_month(
    sample_root: Path, skewtape: SkewtapeHome
):
    request = evaluate(skewtape, datetime(2026, 11, 1, 6, tzinfo=UTC))
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key == "2026-10"
    digest = sha256_file(sample_root / "deltas" / "2026-10" / MANIFEST)
    assert request.run_key == run_key("2026-10", digest)


def test_schedule_when_delta_has_not_arrived_skips_naming_the_month(
    sample_root: Path, skewtape: SkewtapeHome
):
    shutil.rmtree(sample_root / "deltas" / "2026-10")
    skipped = evaluate(skewtape, datetime(2026, 11, 1, 6, tzinfo=UTC))
    assert isinstance(skipped, dg.SkipReason)
    assert "2026-10" in skipped.skip_message
    assert "has not arrived" in skipped.skip_message


def test_schedule_when_delta_is_still_being_copied_skips(sample_root: Path, skewtape: SkewtapeHome):
    (sample_root / "deltas" / "2026-10" / CHECKSUMS).unlink()
    skipped = evaluate(skewtape, datetime(2026, 11, 1, 6, tzinfo=UTC))
    assert isinstance(skipped, dg.SkipReason)
    assert CHECKSUMS in skipped.skip_message


def test_schedule_when_month_is_before_the_first_partition_skips(skewtape: SkewtapeHome):
    skipped = evaluate(skewtape, datetime(2026, 8, 1, 6, tzinfo=UTC))
    assert isinstance(skipped, dg.SkipReason)
    assert "2026-07 is not a month partition" in skipped.skip_message


def test_schedule_when_the_delta_is_only_at_the_publisher_requests_the_month_to_fetch_it(
    sample_root: Path, skewtape: SkewtapeHome, published_sample: Path
):
    shutil.rmtree(sample_root / "deltas" / "2026-10")
    publisher = PublisherSource(source=str(published_sample))
    request = evaluate(skewtape, datetime(2026, 11, 1, 6, tzinfo=UTC), publisher)
    assert isinstance(request, dg.RunRequest)
    assert request.partition_key == "2026-10" and "published" in request.run_key


def test_schedule_when_the_month_is_the_mirrors_first_snapshot_skips_saying_so(
    sample_root: Path, skewtape: SkewtapeHome
):
    first = min(p.name for p in (sample_root / "history").iterdir() if p.name[0] != ".")
    year, month = int(first[:4]), int(first[5:])
    when = datetime(year + month // 12, month % 12 + 1, 1, 6, tzinfo=UTC)
    skipped = evaluate(skewtape, when)
    assert isinstance(skipped, dg.SkipReason)
    assert skipped.skip_message == (
        f"{first} is already held whole in $SKEWTAPE_HOME/history/{first}: no delta to apply"
    )

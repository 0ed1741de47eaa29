"""The tick archive asset in process: a day over all venues in one run with a venue-day's
symbol-days in its metadata and the reports table, and its checks."""

from __future__ import annotations

import re
from datetime import date
from pathlib import Path
from types import SimpleNamespace

import dagster as dg
import duckdb
import pyarrow as pa
import pytest
from dagster._core.storage.partition_status_cache import get_and_update_asset_status_cache_value

from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import (
    CORRECTED_BY_TAG,
    ROUND_TRIP,
    SHARDS,
    TICK_ARCHIVE,
    committed_version,
    shard_of,
    tick_archive,
)
from skewtape_pipeline.orchestration.ticks.partitions import (
    VENUES,
    venue_day_key,
    venue_day_of,
    venue_day_partitions,
)
from skewtape_pipeline.orchestration.ticks.resources import ArchiveSettings
from skewtape_pipeline.orchestration.ticks.venue_day_metadata import venue_day_metadata
from skewtape_pipeline.orchestration.ticks.venues import register_applied_venues
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.placement import locate
from skewtape_pipeline.ticks.archive.store.reports_table import (
    ReportRow,
    read_venue_day_reports,
    reports_dir,
    write_venue_day_reports,
)
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.orchestration.conftest import run_month

DAY = "2026-10-05"


@pytest.fixture
def two_months(
    definitions: dg.Definitions, instance: dg.DagsterInstance, sample_root: Path
) -> dg.Definitions:
    """Two months applied, their venues registered (as the venues sensor would)."""
    for month in ("2026-09", "2026-10"):
        assert run_month(definitions, month, instance).success
    register_applied_venues(instance, sample_root / "history")
    return definitions


def day_range_tags(instance: dg.DagsterInstance, first: str, last: str) -> dict[str, str]:
    """The tags a UI backfill of ``first``..``last`` over every venue gives its single run."""
    venues = sorted(instance.get_dynamic_partitions(VENUES))
    return {
        "dagster/asset_partition_range_start": f"{first}|{venues[0]}",
        "dagster/asset_partition_range_end": f"{last}|{venues[-1]}",
    }


def run_day(defs: dg.Definitions, instance: dg.DagsterInstance, day: str):
    job = defs.resolve_job_def("archive_ticks")
    return job.execute_in_process(
        instance=instance, raise_on_error=False, tags=day_range_tags(instance, day, day)
    )


def fills_counts(history: Path, day: str) -> dict[str, int]:
    """{symbol: trades on ``day``} straight from the snapshot's fills (DuckDB, not our code)."""
    rows = duckdb.sql(
        "SELECT venue || ':' || market_id, count(*) FROM read_parquet($files) "
        "WHERE (ts AT TIME ZONE 'UTC')::DATE = $day::DATE GROUP BY ALL",
        params={"files": [str(p) for p in history.glob("2026-10/fills/*/2026-10.parquet")],
                "day": day},
    ).fetchall()  # fmt: skip
    return dict(rows)


def test_tick_archive_when_one_day_runs_over_all_venues_lists_only_symbol_days_with_trades(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    result = run_day(two_months, instance, DAY)
    assert result.success
    events = result.get_asset_materialization_events()
    venues = instance.get_dynamic_partitions(VENUES)
    assert sorted(e.partition for e in events) == sorted(f"{DAY}|{v}" for v in venues)
    traded = fills_counts(sample_root / "history", DAY)
    listed: dict[str, int] = {}
    for event in events:
        venue, _ = venue_day_of(event.partition)
        metadata = {k: v.value for k, v in event.materialization.metadata.items()}
        table = metadata["symbol_days"]
        rows = {r.data["symbol"]: r.data["tick_count"] for r in table.records}
        ratios = [r.data["compression_ratio"] for r in table.records]
        assert ratios == [round(ratio, 2) for ratio in ratios]
        assert [c.name for c in table.schema.columns] == [
            "symbol",
            "tick_count",
            "compression_ratio",
        ]  # fmt: skip  (no tier: re-tiering moves days after the metadata is recorded)
        assert re.fullmatch(r".* \([\d,]+ bytes\)|\d+ bytes", metadata["compacted_bytes"])
        assert all(symbol.startswith(f"{venue}:") for symbol in rows)
        assert metadata["symbol_days_archived"] == len(rows)
        assert metadata["tick_count"] == sum(rows.values())
        assert metadata["float_noise_normalized"] == 0  # the sample's fills are decimals
        assert metadata["source_fills_path"] == f"fills/{venue}/2026-10.parquet"
        assert metadata["symbol_days_skipped_no_trades"] > 0  # listed markets, no trade that day
        listed |= rows
    assert listed == traded  # exactly the symbol-days with trades, with their tick counts
    checks = {c.check_name: c for c in result.get_asset_check_evaluations()}
    assert checks[ROUND_TRIP].passed
    assert checks[ROUND_TRIP].metadata["files"].value == len(traded)
    assert set(checks) == {ROUND_TRIP}  # compression is judged on consolidated files
    recorded = {k: v.value for k, v in checks[ROUND_TRIP].metadata.items()}
    assert recorded["tier_policy"]["hot_max_age_days"] == 7  # the run's policy, once
    assert len(instance.get_materialized_partitions(TICK_ARCHIVE)) == len(venues)


def archive_versions_reported(result: dg.ExecuteInProcessResult) -> set[int]:
    """The ``archive_version`` values the run's venue-days were materialized with."""
    events = result.get_asset_materialization_events()
    return {e.materialization.metadata["archive_version"].value for e in events}


def test_tick_archive_when_rerun_unchanged_reports_archive_version_0_not_an_earlier_runs(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    first = run_day(two_months, instance, DAY)
    assert first.success
    committed = VersionLog(sample_root / "archive").count()
    assert committed > 0 and archive_versions_reported(first) == {committed}

    again = run_day(two_months, instance, DAY)  # the same fills: nothing changes

    assert again.success and VersionLog(sample_root / "archive").count() == committed
    assert archive_versions_reported(again) == {0}
    assert all(unchanged == 0 for _, unchanged in unchanged_reported(first))
    assert all(unchanged == archived for archived, unchanged in unchanged_reported(again))
    traded = fills_counts(sample_root / "history", DAY)  # DuckDB on the fills, not our code
    assert sum(unchanged for _, unchanged in unchanged_reported(again)) == len(traded)
    assert sorted(a for a, _ in unchanged_reported(again)) == sorted(
        a for a, _ in unchanged_reported(first)
    ) and any(a for a, _ in unchanged_reported(again))


def unchanged_reported(result: dg.ExecuteInProcessResult) -> list[tuple[int, int]]:
    """``(symbol_days_archived, symbol_days_unchanged)`` of each of the run's venue-days."""
    events = result.get_asset_materialization_events()
    return [
        (m["symbol_days_archived"].value, m["symbol_days_unchanged"].value)
        for m in (e.materialization.metadata for e in events)
    ]


def test_tick_archive_when_run_reports_table_answers_one_symbol_day_through_duckdb(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    assert run_day(two_months, instance, DAY).success
    archive = sample_root / "archive"
    traded = fills_counts(sample_root / "history", DAY)
    symbol = max(traded, key=lambda s: (traded[s], s))
    raw = duckdb.sql(
        "SELECT status, tick_count, path FROM read_parquet($glob) WHERE symbol = $s AND "
        "date = $d::DATE",
        params={"glob": str(reports_dir(archive) / "*" / "*.parquet"), "s": symbol, "d": DAY},
    ).fetchall()
    [(status, ticks, path)] = raw
    assert (status, ticks) == ("archived", traded[symbol])
    assert locate(ArchiveTiers.of(archive), symbol, date.fromisoformat(DAY)).rows == ticks
    assert (archive / path).is_file()
    viewed = run_query(
        "SELECT status, count(*) AS n, sum(tick_count) AS ticks FROM tick_reports "
        "GROUP BY status ORDER BY status",
        ArchiveCore(archive),
    ).to_pylist()
    by_status = {row["status"]: row for row in viewed}
    assert by_status["archived"]["n"] == len(traded)
    assert by_status["archived"]["ticks"] == sum(traded.values())
    assert by_status["skipped"]["ticks"] == 0
    ticks_total = run_query("SELECT count(*) AS n FROM ticks", ArchiveCore(archive)).to_pylist()[0][
        "n"
    ]
    assert ticks_total == sum(traded.values())


def test_venue_day_metadata_when_fills_carried_float_noise_sums_it(tmp_path: Path):
    day = date.fromisoformat(DAY)
    source = ("bundle", "fills/v/2026-10.parquet", None, "run-1")
    rows = [
        ReportRow(f"v:{name}", "v", day, "archived", 5, *source, float_noise_normalized=noise)
        for name, noise in (("a", 3), ("b", None), ("c", 4))
    ]
    write_venue_day_reports(tmp_path, "v", day, rows, replace_all=True)
    metadata = venue_day_metadata(read_venue_day_reports(tmp_path, "v", day), scope=None)
    assert metadata["float_noise_normalized"].value == 7


def test_venue_day_metadata_counts_the_symbol_days_held_unchanged(tmp_path: Path):
    day = date.fromisoformat(DAY)
    source = ("bundle", "fills/v/2026-10.parquet", None, "run-1")
    rows = [
        ReportRow(f"v:{name}", "v", day, status, 5, *source, unchanged=unchanged)
        for name, status, unchanged in (
            ("a", "archived", True),
            ("b", "archived", False),
            ("c", "archived", None),  # a row written before the column existed
            ("d", "archived", True),
            ("e", "skipped", None),
        )
    ]
    write_venue_day_reports(tmp_path, "v", day, rows, replace_all=True)
    metadata = venue_day_metadata(read_venue_day_reports(tmp_path, "v", day), scope=None)
    assert (metadata["symbol_days_archived"].value, metadata["symbol_days_unchanged"].value) == (
        4,
        2,
    )


def test_tick_archive_when_one_partition_materialized_backfills_only_that_venue_day(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    venue = sorted(instance.get_dynamic_partitions(VENUES))[0]
    key = venue_day_key(venue, date.fromisoformat(DAY))
    skewtape = SkewtapeHome(root=str(sample_root))
    result = dg.materialize(
        [tick_archive],
        partition_key=str(key),
        instance=instance,
        resources={"skewtape": skewtape, "archive": ArchiveSettings()},
        selection=[TICK_ARCHIVE],
    )
    assert result.success
    assert instance.get_materialized_partitions(TICK_ARCHIVE) == {str(key)}
    traded = {s: n for s, n in fills_counts(sample_root / "history", DAY).items()
              if s.startswith(f"{venue}:")}  # fmt: skip
    rows = run_query(
        "SELECT symbol, tick_count FROM tick_reports WHERE status = 'archived'",
        ArchiveCore(sample_root / "archive"),
    ).to_pylist()
    assert {r["symbol"]: r["tick_count"] for r in rows} == traded


def test_tick_archive_when_a_venue_left_keeps_its_ticks_and_says_so(
    definitions: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    for month in ("2026-09", "2026-10", "2026-11", "2026-12"):  # augur leaves in 2026-12
        assert run_month(definitions, month, instance).success
    register_applied_venues(instance, sample_root / "history")
    assert run_day(definitions, instance, DAY).success
    augur = fills_counts(sample_root / "history", DAY)
    augur = {s: n for s, n in augur.items() if s.startswith("augur:")}
    assert augur, "the sample's augur trades on this day"
    rows = run_query(
        "SELECT symbol, tick_count, venue_departed, source_bundle_id FROM tick_reports "
        "WHERE status = 'archived' ORDER BY symbol",
        ArchiveCore(sample_root / "archive"),
    ).to_pylist()
    kept = {r["symbol"]: r["tick_count"] for r in rows if r["symbol"].startswith("augur:")}
    assert kept == augur
    for row in rows:
        departed = row["symbol"].startswith("augur:")
        assert row["venue_departed"] is departed
        if departed:
            assert row["source_bundle_id"] == "skewtape-history-2026-11"


def test_tick_archive_when_day_month_not_applied_fails_and_records_nothing(
    definitions: dg.Definitions, instance: dg.DagsterInstance, sample_root: Path
):
    assert run_month(definitions, "2026-09", instance).success
    register_applied_venues(instance, sample_root / "history")
    result = run_day(definitions, instance, DAY)
    assert not result.success
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    assert failures
    failed = failures[0].event_specific_data
    assert "materialize history_snapshot 2026-10 first" in str(failed.error)
    venue_day = re.escape(DAY) + r"\|\w+"
    refused = rf"tick_archive {venue_day} refused \(ChainError\): month 2026-10 "
    assert re.match(refused, failed.user_failure_data.description)
    assert str(sample_root) not in str(failed.error)  # paths from $SKEWTAPE_HOME, not the machine
    assert instance.get_materialized_partitions(TICK_ARCHIVE) == set()


def test_shard_of_when_keys_dealt_out_covers_each_key_exactly_once():
    keys = [f"2026-10-{d:02d}|v{n}" for d in range(1, 31) for n in range(3)]
    dealt = [key for shard in range(SHARDS) for key in shard_of(keys, shard)]
    assert sorted(dealt) == sorted(keys)
    assert all(shard_of(keys, shard) for shard in range(SHARDS))


def test_tick_archive_when_instance_holds_old_symbol_day_partitions_ignores_them(
    two_months: dg.Definitions, instance: dg.DagsterInstance
):
    """An instance upgraded from the date x symbol partitions: its old materializations stay in
    the event log, unrecognised, and the partition status the UI shows counts only venue-days."""
    old_partitions = dg.MultiPartitionsDefinition(
        {"date": dg.DailyPartitionsDefinition("2026-09-01"),
         "symbol": dg.DynamicPartitionsDefinition(name="symbols")}
    )  # fmt: skip
    instance.add_dynamic_partitions("symbols", ["kalshi:OLD"])
    old_key = dg.MultiPartitionKey({"date": DAY, "symbol": "kalshi:OLD"})
    instance.report_runless_asset_event(
        dg.AssetMaterialization(TICK_ARCHIVE, partition=old_key, metadata={"tick_count": 3})
    )
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        old_status = get_and_update_asset_status_cache_value(instance, TICK_ARCHIVE, old_partitions)
        old = old_status.deserialize_materialized_partition_subsets(old_partitions)
        assert set(old.get_partition_keys()) == {str(old_key)}  # cached under the old design
    result = run_day(two_months, instance, DAY)
    assert result.success
    status = get_and_update_asset_status_cache_value(instance, TICK_ARCHIVE, venue_day_partitions)
    with dg.partition_loading_context(dynamic_partitions_store=instance):
        materialized = status.deserialize_materialized_partition_subsets(venue_day_partitions)
        keys = set(materialized.get_partition_keys())
    venues = instance.get_dynamic_partitions(VENUES)
    assert keys == {f"{DAY}|{venue}" for venue in venues}
    assert str(old_key) in instance.get_materialized_partitions(TICK_ARCHIVE)  # still logged


def test_tick_archive_when_a_symbol_day_reads_back_unequal_fails_and_records_no_partition(
    two_months: dg.Definitions, instance: dg.DagsterInstance, monkeypatch: pytest.MonkeyPatch
):
    real = Archive.venue_day_reports

    def one_mismatch(archive, venue, day):  # the shards' read-back found 3 rows differing
        rows = real(archive, venue, day)
        mismatched = [3 if s == "archived" else 0 for s in rows["status"].to_pylist()]
        column = rows.schema.get_field_index("read_back_mismatched_rows")
        return rows.set_column(column, rows.schema.field(column), pa.array(mismatched, pa.int64()))

    monkeypatch.setattr(Archive, "venue_day_reports", one_mismatch)
    result = run_day(two_months, instance, DAY)

    assert not result.success
    [check] = result.get_asset_check_evaluations()
    assert check.check_name == ROUND_TRIP and not check.passed
    assert check.metadata["problems"].value > 0
    assert result.get_asset_materialization_events() == []
    assert instance.get_materialized_partitions(TICK_ARCHIVE) == set()


def run_named(defs: dg.Definitions, instance: dg.DagsterInstance, key: str, symbols: list[str]):
    """A run of venue-day ``key`` over ``symbols`` only, as the UI's launchpad launches it."""
    job = defs.resolve_job_def("archive_ticks")
    config = {"ops": {"tick_archive": {"config": {"symbols": symbols}}}}
    return job.execute_in_process(
        instance=instance, partition_key=key, run_config=config, raise_on_error=False
    )


def refusal(result: dg.ExecuteInProcessResult) -> str:
    """The description of the run's first step failure (the line the UI shows first)."""
    failures = [e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE]
    return failures[0].event_specific_data.user_failure_data.description


def traded_symbol(sample_root: Path, venue: str) -> str:
    """A symbol of ``venue`` with trades on DAY (DuckDB on the fills)."""
    return sorted(s for s in fills_counts(sample_root / "history", DAY) if s.startswith(venue))[0]


def test_tick_archive_when_symbols_named_over_a_venue_day_never_archived_refuses_writing_nothing(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """Else the venue-day would show as materialized (archived) with one symbol-day of it."""
    key = f"{DAY}|kalshi"
    result = run_named(two_months, instance, key, [traded_symbol(sample_root, "kalshi:")])

    assert not result.success
    assert refusal(result).startswith(
        f"tick_archive {key} refused (ConfigError): symbols are named, but this venue-day was "
        "never archived"
    )
    assert instance.get_materialized_partitions(TICK_ARCHIVE) == set()
    assert not list((sample_root / "archive").rglob("*.parquet"))


def test_tick_archive_when_no_named_symbol_is_of_the_venue_days_venue_refuses_it(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """Else the venue-day's latest materialization would say 0 archived, nothing looked at."""
    key = f"{DAY}|polymarket"
    assert run_named(two_months, instance, key, []).success  # archived whole first
    [before] = instance.fetch_materializations(TICK_ARCHIVE, limit=10).records

    result = run_named(two_months, instance, key, [traded_symbol(sample_root, "kalshi:")])

    assert not result.success
    assert refusal(result).startswith(
        f"tick_archive {key} refused (ConfigError): none of the named symbols (kalshi:"
    )
    [latest] = instance.fetch_materializations(TICK_ARCHIVE, limit=10).records
    assert latest.storage_id == before.storage_id  # the whole run's metadata still shows


def test_tick_archive_when_symbols_named_over_an_archived_venue_day_shows_the_whole_day(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """The run's materialization is the venue-day's latest: it keeps the whole day's counts
    and table (not only the named symbol's, which made the day look like one symbol) and says
    it was a correction of the named symbol."""
    key = f"{DAY}|kalshi"
    full = run_named(two_months, instance, key, [])
    assert full.success
    symbol = traded_symbol(sample_root, "kalshi:")

    result = run_named(two_months, instance, key, [symbol])

    assert result.success
    [before] = [e.materialization.metadata for e in full.get_asset_materialization_events()]
    [after] = [e.materialization.metadata for e in result.get_asset_materialization_events()]
    for name in ("symbol_days_archived", "symbol_days_skipped_no_trades", "tick_count"):
        assert after[name].value == before[name].value, name
    table = [r.data["symbol"] for r in after["symbol_days"].value.records]
    assert table == [r.data["symbol"] for r in before["symbol_days"].value.records]
    assert len(table) > 1 and symbol in table
    assert after["scope"].value.startswith("correction of 1 named symbol(s)")
    assert after["symbols_rerun"].value == [symbol]
    assert after["symbol_days_rerun"].value == 1
    rows = read_venue_day_reports(sample_root / "archive", "kalshi", date.fromisoformat(DAY))
    assert [r["symbol"] for r in rows.to_pylist() if r["batch"] == result.run_id] == [symbol]


def test_tick_archive_when_a_named_symbol_is_mistyped_refuses_it_keeping_the_venue_day(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """Else the run succeeds and the venue-day's latest metadata says 0 archived."""
    key = f"{DAY}|kalshi"
    assert run_named(two_months, instance, key, []).success
    [before] = instance.fetch_materializations(TICK_ARCHIVE, limit=10).records

    result = run_named(two_months, instance, key, ["kalshi:KXSENATE-TYPO"])

    assert not result.success
    assert refusal(result) == (
        f"tick_archive {key} refused (ConfigError): symbol(s) kalshi:KXSENATE-TYPO ({DAY}): not "
        "in fills/kalshi/2026-10.parquet of skewtape-history-2026-10 and not archived on that "
        "day; nothing archived"
    )
    [latest] = instance.fetch_materializations(TICK_ARCHIVE, limit=10).records
    assert latest.storage_id == before.storage_id


def test_tick_archive_when_the_corrections_sensor_names_a_symbol_gone_from_the_fills_runs(
    two_months: dg.Definitions, instance: dg.DagsterInstance
):
    """All of a symbol's rows corrected away, never archived that day: nothing to do."""
    key = f"{DAY}|kalshi"
    assert run_named(two_months, instance, key, []).success
    job = two_months.resolve_job_def("archive_ticks")
    config = {"ops": {"tick_archive": {"config": {"symbols": ["kalshi:GONE"]}}}}
    result = job.execute_in_process(
        instance=instance,
        partition_key=key,
        run_config=config,
        tags={CORRECTED_BY_TAG: "2026-11"},
    )
    assert result.success


def test_round_trip_check_when_rerun_over_days_already_cold_counts_no_file_read_back(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """A symbol-day held unchanged in a consolidated file has no file of its own that DuckDB
    reads back: the check says so instead of counting it among the files read back."""
    assert run_day(two_months, instance, DAY).success
    Archive(sample_root / "archive").retier(as_of=date(2027, 6, 1))  # every day cold
    traded = fills_counts(sample_root / "history", DAY)

    again = run_day(two_months, instance, DAY)

    assert again.success
    [check] = again.get_asset_check_evaluations()
    assert check.passed
    assert check.metadata["files"].value == 0
    assert check.metadata["symbol_days_left_consolidated"].value == len(traded)


def test_committed_version_when_a_reexecution_changed_nothing_is_0_not_a_later_retierings(
    two_months: dg.Definitions, sample_root: Path, instance: dg.DagsterInstance
):
    """ "Re-execute all" of a run after a re-tiering committed a version: the re-execution's
    rows are its own and changed nothing, so it committed none (it used to report the
    re-tiering's version, counting from the start of the run it re-executes)."""
    first = run_day(two_months, instance, DAY)
    archive = Archive(sample_root / "archive")
    compacted = archive.versions.latest().version
    retiered = archive.retier(as_of=date(2027, 6, 1)).version
    assert retiered > compacted
    again = run_day(two_months, instance, DAY)  # the same fills: commits nothing
    assert again.success and archive.versions.latest().version == retiered
    run = SimpleNamespace(run_id=again.run_id, parent_run_id=first.run_id,
                          root_run_id=first.run_id)  # fmt: skip
    context = SimpleNamespace(run=run, instance=instance)

    assert committed_version(context, archive, {again.run_id}) == 0
    # re-executed from failure, the first run's shards' rows kept: what that run committed
    assert committed_version(context, archive, {first.run_id, again.run_id}) == compacted

"""The tick archive's sensors: the venues sensor registers each applied month's venues (of the
sample chain, and of months the minimal publisher wrote); the corrections sensor, for a month
that replaces an earlier month's fills, registers them too and requests one run per venue-day
it touched, over exactly the symbol-days whose ticks changed."""

from __future__ import annotations

import logging
import os
import shutil
import tempfile
from collections import defaultdict
from pathlib import Path

import dagster as dg
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.mirror.apply import apply_delta
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.orchestration.ticks.archive_asset import CORRECTED_BY_TAG, TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.partitions import (
    VENUES,
    dimension_key,
    venue_day_key,
)
from skewtape_pipeline.orchestration.ticks.sensors import (
    SYMBOL_DAYS_TAG,
    tick_corrections_sensor,
    tick_venues_sensor,
)
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.fills.snapshot_fills import (
    corrected_symbol_days,
    new_symbols,
    split_symbol,
)
from skewtape_pipeline_tests.mirror import minimal_publisher as minimal
from skewtape_pipeline_tests.mirror.test_conformance import month_file
from skewtape_pipeline_tests.orchestration.conftest import register_venues
from skewtape_pipeline_tests.test_unreadable_input import as_nobody, shared_folder

MONTHS = ("2026-09", "2026-10", "2026-11")


def tick(root: Path, instance: dg.DagsterInstance, cursor: str | None = None):
    context = dg.build_sensor_context(
        cursor=cursor, instance=instance, resources={"skewtape": SkewtapeHome(root=str(root))}
    )
    return tick_corrections_sensor(context)


def corrected_by_venue_day(history: Path, month: str) -> dict[str, list[str]]:
    """{venue-day partition key: corrected symbols}, from the core's row diff."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for symbol, day in corrected_symbol_days(history, month):
        grouped[str(venue_day_key(symbol.split(":")[0], day))].append(symbol)
    return {key: sorted(symbols) for key, symbols in grouped.items()}


def test_corrections_sensor_when_a_month_corrects_earlier_fills_requests_exactly_those_days(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    for month in ("2026-09", "2026-10", "2026-11"):
        register_venues(instance, new_symbols(history, month))
    expected = corrected_by_venue_day(history, "2026-11")
    assert expected  # the sample's 2026-11 delta corrects 2026-10 fills
    mark_archived(instance, expected)
    result = tick(applied_chain, instance)
    requested = {
        r.partition_key: r.run_config["ops"]["tick_archive"]["config"]["symbols"]
        for r in result.run_requests
    }
    assert requested == expected
    for request in result.run_requests:
        assert request.run_key == f"2026-11:{request.partition_key}"
        assert request.tags[CORRECTED_BY_TAG] == "2026-11"
        assert request.tags[SYMBOL_DAYS_TAG] == str(len(expected[request.partition_key]))
    assert result.cursor == "2026-11"
    again = tick(applied_chain, instance, cursor=result.cursor)
    assert again.run_requests == []
    assert again.cursor == "2026-11"


def test_corrections_sensor_when_venues_not_registered_registers_them_before_requesting(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """The venues sensor has not ticked yet: the corrections sensor registers the month's
    venues in the same tick (Dagster adds them before it launches the runs)."""
    history = applied_chain / "history"
    mark_archived(instance, corrected_by_venue_day(history, "2026-11"))
    result = tick(applied_chain, instance, cursor="2026-10")
    [add] = result.dynamic_partitions_requests
    assert add.partitions_def_name == VENUES
    assert set(add.partition_keys) == venue_keys(history, ("2026-11",))
    expected = corrected_by_venue_day(history, "2026-11")
    assert {r.partition_key for r in result.run_requests} == set(expected)
    [observation] = result.asset_events
    assert observation.metadata["month"].value == "2026-11"


def mark_archived(instance: dg.DagsterInstance, keys) -> None:
    """Record the venue-days ``keys`` as archived (a materialization of each partition)."""
    for key in keys:
        instance.report_runless_asset_event(
            dg.AssetMaterialization(asset_key=TICK_ARCHIVE, partition=key)
        )


def test_corrections_sensor_when_a_corrected_venue_day_was_never_archived_leaves_it_to_its_run(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    expected = corrected_by_venue_day(history, "2026-11")
    archived, never = sorted(expected)[:1], sorted(expected)[1:]
    mark_archived(instance, archived)

    result = tick(applied_chain, instance)

    assert [r.partition_key for r in result.run_requests] == archived
    never_archived = tick(applied_chain, dg.DagsterInstance.ephemeral())
    assert never_archived.run_requests in (None, []) and never
    assert "is not archived yet" in never_archived.skip_reason.skip_message


def venues_tick(root: Path, instance: dg.DagsterInstance, cursor: str | None = None):
    context = dg.build_sensor_context(
        cursor=cursor, instance=instance, resources={"skewtape": SkewtapeHome(root=str(root))}
    )
    return tick_venues_sensor(context)


def venue_keys(history: Path, months: tuple[str, ...]) -> set[str]:
    """The venue keys of the symbols the months' fills files added or replaced."""
    symbols = {s for month in months for s in new_symbols(history, month)}
    return {dimension_key(split_symbol(s)[0]) for s in symbols}


def test_venues_sensor_when_months_applied_registers_the_venues_of_their_fills(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    result = venues_tick(applied_chain, instance)
    assert result.run_requests in (None, [])
    [add] = result.dynamic_partitions_requests
    assert add.partitions_def_name == VENUES
    assert set(add.partition_keys) == venue_keys(history, MONTHS)
    by_month = {e.metadata["month"].value: e.metadata for e in result.asset_events}
    assert all(e.asset_key == TICK_ARCHIVE for e in result.asset_events)
    assert sum(m["venues_registered"].value for m in by_month.values()) == len(add.partition_keys)
    assert set(by_month["2026-09"]["venues"].value) == venue_keys(history, MONTHS[:1])
    assert result.cursor == "2026-11"


def test_venues_sensor_when_venues_known_or_no_new_month_skips_saying_why(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    known = venues_tick(applied_chain, instance, cursor="2026-09")
    assert not known.dynamic_partitions_requests and not known.asset_events
    assert "2026-10, 2026-11: no venue new" in known.skip_reason.skip_message
    assert known.cursor == "2026-11"
    idle = venues_tick(applied_chain, instance, cursor="2026-11")
    assert idle.skip_reason.skip_message == "no newly applied month"


def test_venues_sensor_when_a_venue_was_added_by_hand_removes_it_naming_the_mirrors_venues(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """A venue typed into the launch dialog's "Add partition" (Dagster's addDynamicPartition
    mutation calls ``instance.add_dynamic_partitions``, no code of ours runs) is removed on the
    sensor's next tick, which names it and the mirror's venues; a venue no snapshot holds any
    more but with an archived venue-day is kept (its ticks are in the archive)."""
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    registered = set(instance.get_dynamic_partitions(VENUES))
    typo, departed = f"{sorted(registered)[0]}x", "departed"
    instance.add_dynamic_partitions(VENUES, [typo, departed])
    instance.report_runless_asset_event(
        dg.AssetMaterialization(TICK_ARCHIVE, partition=f"2026-10-05|{departed}")
    )

    result = venues_tick(applied_chain, instance, cursor="2026-11")

    [delete] = result.dynamic_partitions_requests
    assert isinstance(delete, dg.DeleteDynamicPartitionsRequest)
    assert (delete.partitions_def_name, list(delete.partition_keys)) == (VENUES, [typo])
    said = result.skip_reason.skip_message
    assert f"removed venue partition(s) {typo}: no snapshot of the mirror holds fills" in said
    assert f"the mirror's venues: {', '.join(sorted(registered))})" in said
    for request in result.dynamic_partitions_requests:  # as Dagster's daemon does
        for key in request.partition_keys:
            instance.delete_dynamic_partition(request.partitions_def_name, key)
    assert set(instance.get_dynamic_partitions(VENUES)) == registered | {departed}
    again = venues_tick(applied_chain, instance, cursor="2026-11")
    assert not again.dynamic_partitions_requests
    assert again.skip_reason.skip_message == "no newly applied month"


def test_venues_sensor_when_the_mirror_holds_no_snapshot_removes_no_venue(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """A data root whose history/ is gone for a while (a drive not mounted, the daemon given
    another SKEWTAPE_HOME) makes every venue look stray; the sensor's cursor is past the months
    that registered them, so a removed venue would not come back: nothing is removed."""
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    registered = set(instance.get_dynamic_partitions(VENUES))
    history.rename(applied_chain / "history-unmounted")

    result = venues_tick(applied_chain, instance, cursor="2026-11")

    assert not result.dynamic_partitions_requests
    assert result.skip_reason.skip_message == "no newly applied month"
    assert set(instance.get_dynamic_partitions(VENUES)) == registered


def publish_two_months(out: Path) -> tuple[Path, Path, Path]:
    """Publish with the minimal publisher a 2026-11 snapshot (kalshi, polymarket) and the delta
    to 2026-12 (kalshi's 2026-10 fills replaced and 2026-12 added, a new venue's 2026-12 added,
    polymarket omitted). Returns (the 2026-11 snapshot, the 2026-12 snapshot, the delta)."""
    style = minimal.STYLES["terse"]
    parent_files = {"README.md": b"Skewtape history 2026-11\n"}
    for venue, month in (("kalshi", "2026-10"), ("kalshi", "2026-11"), ("polymarket", "2026-11")):
        parent_files[f"fills/{venue}/{month}.parquet"] = month_file(venue, month, "price", 0)
    next_files = {rel: data for rel, data in parent_files.items() if "/polymarket/" not in rel}
    next_files["fills/kalshi/2026-10.parquet"] = month_file("kalshi", "2026-10", "price", 1)
    for venue in ("kalshi", "augur"):
        next_files[f"fills/{venue}/2026-12.parquet"] = month_file(venue, "2026-12", "price", 0)
    parent, nxt = (
        minimal.publish_snapshot(
            out / "history" / month,
            files,
            bundle_id=f"skewtape-history-{month}",
            venues=venues,
            style=style,
        )
        for month, files, venues in (
            ("2026-11", parent_files, ("kalshi", "polymarket")),
            ("2026-12", next_files, ("kalshi", "augur")),
        )
    )
    delta = minimal.publish_delta(
        parent, nxt, out / "deltas" / "2026-12", omitted_venues=("polymarket",), style=style
    )
    return parent.folder, nxt.folder, delta


def fills_venues(snapshot: Path) -> set[str]:
    """The venues the fills files of a published snapshot hold (their ``venue`` column)."""
    files = sorted(snapshot.glob("fills/*/*.parquet"))
    return {v for f in files for v in pq.read_table(f, columns=["venue"])["venue"].to_pylist()}


def register_as_the_daemon(instance: dg.DagsterInstance, result: dg.SensorResult) -> None:
    """Add the partitions a sensor tick asked for to ``instance``, as Dagster's daemon does."""
    for request in result.dynamic_partitions_requests or []:
        instance.add_dynamic_partitions(request.partitions_def_name, list(request.partition_keys))


def test_venues_sensor_when_minimal_publisher_months_applied_registers_their_fills_venues(
    tmp_path: Path,
):
    """Months this project did not write (the minimal publisher's snapshot and delta), applied
    by the project's applier: the partitions are the venues their fills hold, each under the
    month that first brought it (a venue the delta omits stays registered)."""
    parent, nxt, delta = publish_two_months(tmp_path / "publisher")
    history = tmp_path / "data" / "history"
    shutil.copytree(parent, history / "2026-11")
    apply_delta(history / "2026-11", delta, into=history / "2026-12")
    (tmp_path / "dagster_home").mkdir()
    with dg.DagsterInstance.from_config(str(tmp_path / "dagster_home")) as instance:
        first = venues_tick(tmp_path / "data", instance)
        register_as_the_daemon(instance, first)
        registered = set(instance.get_dynamic_partitions(VENUES))
        again = venues_tick(tmp_path / "data", instance, cursor=first.cursor)
        register_as_the_daemon(instance, again)
        assert set(instance.get_dynamic_partitions(VENUES)) == registered
    assert registered == fills_venues(parent) | fills_venues(nxt)
    by_month = {
        e.metadata["month"].value: set(e.metadata["venues"].value) for e in first.asset_events
    }
    brought = fills_venues(nxt) - fills_venues(parent)
    assert by_month == {"2026-11": fills_venues(parent), "2026-12": brought} and brought
    assert first.cursor == "2026-12"
    assert not again.dynamic_partitions_requests and not again.asset_events
    assert again.skip_reason.skip_message == "no newly applied month"
    assert again.cursor == "2026-12"


def test_venues_sensor_when_loaded_runs_from_the_start_and_requests_no_job():
    assert tick_venues_sensor.default_status == dg.DefaultSensorStatus.RUNNING
    assert not tick_venues_sensor.targets


def test_corrections_sensor_when_request_runs_rewrites_only_the_named_symbol_days(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """The requested run, launched as the daemon would (its partition, run config and tags),
    replaces the report rows of exactly the corrected symbol-days of its venue-day."""
    history = applied_chain / "history"
    for month in ("2026-09", "2026-10", "2026-11"):
        register_venues(instance, new_symbols(history, month))
    defs = build_definitions(SkewtapeHome(root=str(applied_chain)))
    job = defs.resolve_job_def("archive_ticks")
    key = sorted(corrected_by_venue_day(history, "2026-11"))[0]
    full = job.execute_in_process(instance=instance, partition_key=key)  # archived first
    assert full.success
    [request] = tick(applied_chain, instance).run_requests  # the one venue-day archived
    assert request.partition_key == key
    rerun = job.execute_in_process(
        instance=instance,
        partition_key=request.partition_key,
        run_config=request.run_config,
        tags=request.tags,
    )
    assert rerun.success
    named = request.run_config["ops"]["tick_archive"]["config"]["symbols"]
    rows = run_query(
        "SELECT symbol, batch FROM tick_reports", ArchiveCore(applied_chain / "archive")
    )
    rewritten = sorted(r["symbol"] for r in rows.to_pylist() if r["batch"] == rerun.run_id)
    assert rewritten == named
    assert len(rows) > len(named)  # the venue-day's other symbol-days kept their rows
    [event] = rerun.get_asset_materialization_events()
    metadata = event.materialization.metadata
    assert metadata["scope"].value.startswith(f"correction of {len(named)} named symbol(s)")
    assert metadata["symbols_rerun"].value == sorted(rewritten)
    archived = run_query(  # the venue-day's archived symbol-days, as they now stand
        "SELECT symbol FROM tick_reports WHERE status = 'archived' ORDER BY symbol",
        ArchiveCore(applied_chain / "archive"),
    )["symbol"].to_pylist()
    shown = sorted(r.data["symbol"] for r in metadata["symbol_days"].value.records)
    assert shown == archived and metadata["symbol_days_archived"].value == len(archived)


NOBODY = 65534


class Logged(logging.Handler):
    """The records a tick's logger (``context.log``) emits."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def warnings(self) -> list[str]:
        return [r.getMessage() for r in self.records if r.levelno == logging.WARNING]


def logged_venues_tick(root: Path, instance: dg.DagsterInstance, cursor: str):
    """One tick of the venues sensor and what its log said."""
    logged = Logged()
    context = dg.build_sensor_context(
        cursor=cursor, instance=instance, resources={"skewtape": SkewtapeHome(root=str(root))}
    )
    context.log.addHandler(logged)
    return tick_venues_sensor(context), logged


def test_venues_sensor_when_a_snapshots_fills_cannot_be_read_warns_naming_it_and_removes_nothing(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """A ``fills/`` folder the daemon's user cannot list (a permission refused) would hide its
    venues: the tick warns, naming the folder from the data root and why, and removes no venue
    (one seen only there would look stray)."""
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    registered = set(instance.get_dynamic_partitions(VENUES))
    shared = Path(tempfile.mkdtemp())  # the test's own folder is root's alone
    try:
        shared.chmod(0o777)
        root = shared / "data"
        shutil.copytree(applied_chain, root, symlinks=True)
        hidden = sorted((root / "history" / MONTHS[-1] / "fills").iterdir())[0]
        shutil.rmtree(hidden)  # its venue is only in the months that cannot be read
        for month in MONTHS[:-1]:
            (root / "history" / month / "fills").chmod(0)
        os.seteuid(NOBODY)
        try:
            result, logged = logged_venues_tick(root, instance, MONTHS[-1])
        finally:
            os.seteuid(0)
    finally:
        for month in MONTHS[:-1]:
            (shared / "data" / "history" / month / "fills").chmod(0o755)
        shutil.rmtree(shared)

    assert not result.dynamic_partitions_requests
    assert set(instance.get_dynamic_partitions(VENUES)) == registered
    warned = logged.warnings()
    for month in MONTHS[:-1]:
        said = f"$SKEWTAPE_HOME/history/{month}/fills: cannot be read (Permission denied); "
        assert [w for w in warned if w.startswith(said)], warned
    assert not [w for w in warned if str(shared) in w or "removed venue" in w], warned


def test_venues_sensor_when_an_archived_key_is_not_a_venue_day_warns_once_and_goes_on(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """A materialized tick_archive key Dagster cannot parse as ``<date>|<venue>`` (recorded
    by hand, or under another partitioning) used to fail every tick; it protects no venue: the
    tick names it in one warning and removes the stray venue as usual."""
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    typo = f"{sorted(instance.get_dynamic_partitions(VENUES))[0]}x"
    instance.add_dynamic_partitions(VENUES, [typo])
    for key in ("garbage", "a|b|c"):
        instance.report_runless_asset_event(dg.AssetMaterialization(TICK_ARCHIVE, partition=key))

    result, logged = logged_venues_tick(applied_chain, instance, MONTHS[-1])

    [delete] = result.dynamic_partitions_requests
    assert list(delete.partition_keys) == [typo]
    unparsed = [w for w in logged.warnings() if "not of the form <date>|<venue>" in w]
    assert unparsed == [
        "2 materialized tick_archive partition key(s) not of the form <date>|<venue>, ignored: "
        "'a|b|c', 'garbage'"
    ]


def test_venues_sensor_when_it_removes_a_venue_warns_whether_or_not_it_registers_others(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """The removal is a warning of the tick on both of its paths: a tick that registers new
    venues, and one that skips (nothing new)."""
    instance.add_dynamic_partitions(VENUES, ["zzz-typo"])
    registering, first = logged_venues_tick(applied_chain, instance, "")
    register_as_the_daemon(instance, registering)
    instance.delete_dynamic_partition(VENUES, "zzz-typo")  # as the daemon does
    instance.add_dynamic_partitions(VENUES, ["zzz-typo2"])
    skipping, second = logged_venues_tick(applied_chain, instance, MONTHS[-1])

    assert registering.asset_events and skipping.skip_reason  # one tick of each path
    for logged, typo in ((first, "zzz-typo"), (second, "zzz-typo2")):
        assert [w for w in logged.warnings() if w.startswith(f"removed venue partition(s) {typo}:")]


def test_sensors_when_a_month_folder_cannot_be_read_skip_naming_it_keeping_the_cursor(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """A month folder that cannot be read (here a link loop, which root cannot read either) was
    taken for a month not applied: the months after it were read against the wrong parent and
    the cursor moved past it for good. Both sensors skip the tick, naming the folder from the
    data root in a warning and the skip reason (no stack trace in the UI), keep their cursor and
    register or request nothing; once the folder reads, the next tick goes on."""
    history = applied_chain / "history"
    register_venues(instance, new_symbols(history, MONTHS[0]))
    registered = set(instance.get_dynamic_partitions(VENUES))
    moved = history / f".{MONTHS[1]}.moved"
    (history / MONTHS[1]).rename(moved)
    (history / MONTHS[1]).symlink_to(MONTHS[1])
    said = f"$SKEWTAPE_HOME/history/{MONTHS[1]}: cannot be read (Too many levels of symbolic links)"

    venues, logged = logged_venues_tick(applied_chain, instance, MONTHS[0])
    corrections = tick(applied_chain, instance, MONTHS[0])

    for result in (venues, corrections):
        assert result.skip_reason.skip_message.startswith(said)
        assert result.cursor == MONTHS[0] and not result.run_requests
        assert not result.dynamic_partitions_requests and not result.asset_events
    assert [w for w in logged.warnings() if said in w] == [logged.warnings()[-1]]  # said once
    assert logged.warnings()[-1].startswith(f"skipped: {said}")
    assert set(instance.get_dynamic_partitions(VENUES)) == registered
    (history / MONTHS[1]).unlink()
    moved.rename(history / MONTHS[1])
    assert logged_venues_tick(applied_chain, instance, MONTHS[0])[0].cursor == MONTHS[-1]


CORRECTED = f"{MONTHS[-1]}/fills/kalshi/{MONTHS[0]}.parquet"
"""A fills file the newest month replaced (a correction): both sensors read it."""


def break_file(path: Path, how: str) -> Path:
    """Put what root cannot read either in the place of ``path``; returns where it was moved."""
    moved = path.with_name(f".{path.name}.moved")
    path.rename(moved)
    if how == "a folder":
        path.mkdir()
    elif how == "a link loop":
        path.symlink_to(path.name)
    else:
        path.symlink_to("nowhere.parquet")
    return moved


def both_ticks(root: Path, instance: dg.DagsterInstance, cursor: str):
    """One tick of each sensor, and what the venues sensor's log said."""
    venues, logged = logged_venues_tick(root, instance, cursor)
    return venues, tick(root, instance, cursor), logged


@pytest.mark.parametrize(
    ("how", "why"),
    [
        ("a folder", "Is a directory"),
        ("a link loop", "Too many levels of symbolic links"),
        ("a dangling link", "No such file or directory"),
    ],
)
def test_sensors_when_a_new_months_fills_file_cannot_be_read_skip_naming_it_keeping_the_cursor(
    applied_chain: Path, instance: dg.DagsterInstance, how: str, why: str
):
    """A fills file of a newly applied month that cannot be read (here what root cannot read
    either) failed both ticks with DuckDB's error ("No files found that match the pattern"), a
    stack trace in the UI. Both skip instead, naming the file from the data root and the
    operating system's reason, keep their cursor and register or request nothing; once the
    file reads, the next tick goes on."""
    history = applied_chain / "history"
    for month in MONTHS[:-1]:
        register_venues(instance, new_symbols(history, month))
    registered = set(instance.get_dynamic_partitions(VENUES))
    mark_archived(instance, corrected_by_venue_day(history, MONTHS[-1]))
    moved = break_file(history / CORRECTED, how)
    said = f"$SKEWTAPE_HOME/history/{CORRECTED}: cannot be read ({why}); "

    venues, corrections, logged = both_ticks(applied_chain, instance, MONTHS[-2])

    for result in (venues, corrections):
        assert result.skip_reason.skip_message.startswith(said), result.skip_reason
        assert result.skip_reason.skip_message.endswith("the cursor kept until it reads")
        assert str(applied_chain) not in result.skip_reason.skip_message
        assert result.cursor == MONTHS[-2] and not result.run_requests
        assert not result.dynamic_partitions_requests and not result.asset_events
    assert [w for w in logged.warnings() if w.startswith(f"skipped: {said}")], logged.warnings()
    assert set(instance.get_dynamic_partitions(VENUES)) == registered
    if how == "a folder":
        (history / CORRECTED).rmdir()
    else:
        (history / CORRECTED).unlink()
    moved.rename(history / CORRECTED)
    venues, corrections, _ = both_ticks(applied_chain, instance, MONTHS[-2])
    assert venues.cursor == corrections.cursor == MONTHS[-1]
    assert corrections.run_requests


@pytest.mark.parametrize("locked", ["manifest.json", CORRECTED.split("/", 1)[1]])
def test_sensors_when_the_daemons_user_cannot_read_a_new_months_file_skip_naming_it(
    applied_chain: Path, instance: dg.DagsterInstance, locked: str
):
    """A newly applied month's manifest or fills file the daemon's user may not read (a
    permission refused): both ticks skip naming it and why, the cursor kept."""
    with shared_folder() as shared:
        root = shared / "data"
        shutil.copytree(applied_chain, root, symlinks=True)
        (root / "history" / MONTHS[-1] / locked).chmod(0)
        with as_nobody():
            venues, corrections, logged = both_ticks(root, instance, MONTHS[-2])

    said = f"$SKEWTAPE_HOME/history/{MONTHS[-1]}/{locked}: cannot be read (Permission denied)"
    for result in (venues, corrections):
        assert result.skip_reason.skip_message.startswith(said), result.skip_reason
        assert result.cursor == MONTHS[-2] and not result.run_requests
        assert not result.dynamic_partitions_requests and not result.asset_events
    assert [w for w in logged.warnings() if w.startswith(f"skipped: {said}")], logged.warnings()


def test_venues_sensor_when_fills_hold_a_dot_folder_removes_its_key_added_by_hand(
    applied_chain: Path, instance: dg.DagsterInstance
):
    """A dot folder in ``fills/`` (a copy tool's ``.tmp``) is no venue of the mirror: a key of
    that name added by hand is removed as any typo, and the mirror's venues named leave it out."""
    history = applied_chain / "history"
    for month in MONTHS:
        register_venues(instance, new_symbols(history, month))
    venues = sorted(p.name for p in (history / MONTHS[-1] / "fills").iterdir())
    (history / MONTHS[-1] / "fills" / ".tmp").mkdir()
    instance.add_dynamic_partitions(VENUES, [".tmp"])

    result, logged = logged_venues_tick(applied_chain, instance, MONTHS[-1])

    [delete] = result.dynamic_partitions_requests
    assert list(delete.partition_keys) == [".tmp"]
    [removed] = [w for w in logged.warnings() if w.startswith("removed venue partition(s) .tmp:")]
    assert removed.endswith(f"the mirror's venues: {', '.join(venues)})")

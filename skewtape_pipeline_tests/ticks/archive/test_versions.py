"""Versions of the tick archive: reading as of a version, tags, pruning, crash safety."""

from __future__ import annotations

import itertools
import json
import shutil
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from skewtape_pipeline import faults
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ArchiveBusyError, ConfigError, VersionError, WriteOnceError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import (
    commit_compaction,
    compact_symbol_day,
    compact_ticks,
)
from skewtape_pipeline.ticks.archive.ops.compact_plan import CompactionRun, SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query, ticks_view_sql
from skewtape_pipeline.ticks.archive.store.books import Books, default_audit_log
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.version_files import MAX_DELTA_DEPTH
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline_tests.ticks.archive.test_reads import assert_reads_as_the_view
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    Crash,
    crash_at_name,
    day_ticks,
    write_four_day_csv,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at

KEYS = [(symbol, day) for symbol in ("ES", "CL/F") for day in DAYS[:4]]
READS = [
    {},
    {"symbols": ["ES"], "start": DAYS[1]},
    {"symbols": ["CL/F", "ES"], "start": DAYS[0], "end": DAYS[2], "columns": ["ts", "tier"]},
]
"""The reads compared with the view after every operation (``test_reads``)."""
COLUMNS = "symbol, date, ts, price, quantity, side, tier"


def ticks(symbol: str, day: date, variant: int) -> TickBatch:
    """The ticks of a symbol-day as its ``variant``-th publication (0: the first; later ones
    change every price and drop the last tick, as a correction would)."""
    batch = day_ticks(symbol, day)
    if variant == 0:
        return batch
    n = max(1, len(batch) - 1)
    return TickBatch.from_units(
        batch.ts_ns.to_pylist()[:n],
        [p + variant for p in batch.price.to_pylist()[:n]],
        batch.quantity.to_pylist()[:n],
        batch.side.to_pylist()[:n],
        TickSchema(price_scale=2),
    )


def compact(
    root: Path,
    key: tuple[str, date],
    variant: int = 0,
    as_of: date = STAGE_1,
    policy: TierPolicy = POLICY,
):
    """One compaction batch of one symbol-day under ``policy``, committed as a version (as
    ``compact_source`` does after its batch)."""
    symbol, day = key
    core = archive_at(root, policy, audit_log=default_audit_log(root)).core
    compact_symbol_day(
        core,
        ticks(symbol, day, variant),
        SymbolDayWrite(symbol=symbol, day=day, age_days=(as_of - day).days),
    )
    commit_compaction(core)


def rows(root: Path, as_of=None) -> list[tuple]:
    """Every row of the view (now, or as of a version), sorted."""
    table = run_query(
        f"SELECT {COLUMNS} FROM ticks", ArchiveCore(root, policy=POLICY), QueryOptions(as_of=as_of)
    )
    table = table.set_column(2, "ts", table["ts"].cast(pa.int64()))
    return sorted(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))


@pytest.fixture
def archive(tmp_path, no_fsync) -> Path:
    root = tmp_path / "data" / "archive"
    for key in KEYS:
        compact(root, key)
    return root


# --- versions and reading as of them ------------------------------------------------------------


def test_versions_when_each_batch_commits_number_them_with_operation_and_changed_days(archive):
    versions = VersionLog(archive).list()
    assert [v.version for v in versions] == list(range(1, len(KEYS) + 1))
    assert [v.operation for v in versions] == ["compact"] * len(KEYS)
    assert [v.changed for v in versions] == [[key] for key in KEYS]
    assert all(a.time < b.time for a, b in itertools.pairwise(versions))


def test_record_when_nothing_changed_records_no_version(archive):
    assert VersionLog(archive).record("compact") is None
    assert VersionLog(archive).count() == len(KEYS)


def test_read_as_of_when_a_day_was_recompacted_returns_the_ticks_before(archive):
    before = rows(archive)
    compact(archive, KEYS[0], variant=3)
    assert rows(archive) != before
    assert rows(archive, as_of=len(KEYS)) == before
    assert rows(archive, as_of=str(len(KEYS))) == before


def test_read_as_of_when_retier_and_removal_deleted_files_still_reads_them(archive):
    before = rows(archive)
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    Archive(archive, policy=POLICY, audit_log=None).remove([KEYS[1]])
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    assert KEYS[1] not in {(r[0], r[1]) for r in rows(archive)}
    assert rows(archive, as_of=len(KEYS)) == before
    assert [v.operation for v in VersionLog(archive).list()][-3:] == ["retier", "remove", "retier"]


def test_resolve_as_of_when_given_a_time_finds_the_latest_version_at_or_before_it(archive):
    versions = VersionLog(archive).list()
    third = versions[2]
    assert VersionLog(archive).resolve_as_of(third.time).version == 3
    assert VersionLog(archive).resolve_as_of(third.time + timedelta(microseconds=1)).version == 3
    iso = third.time.isoformat().replace("+00:00", "Z")
    assert VersionLog(archive).resolve_as_of(iso).version == 3
    assert VersionLog(archive).at(datetime(2000, 1, 1, tzinfo=UTC)) is None
    with pytest.raises(VersionError, match=r"no version at or before 2000-01-01T00:00:00\+00:00$"):
        VersionLog(archive).resolve_as_of("2000-01-01T00:00:00")  # naive: UTC, and said so


def test_read_as_of_a_date_reads_the_latest_version_by_its_midnight_utc(archive):
    latest = VersionLog(archive).list()[-1]
    day_after = latest.time.date() + timedelta(days=1)
    assert VersionLog(archive).resolve_as_of(day_after).version == latest.version
    assert rows(archive, as_of=day_after) == rows(archive, as_of=day_after.isoformat())
    with pytest.raises(VersionError, match=r"no version at or before 2000-01-01T00:00:00\+00:00$"):
        rows(archive, as_of=date(2000, 1, 1))


def test_resolve_as_of_when_unknown_refuses_naming_what_was_asked(archive):
    with pytest.raises(VersionError, match="version 99: no such version"):
        VersionLog(archive).resolve_as_of(99)
    with pytest.raises(VersionError, match="no tag 'nope'"):
        VersionLog(archive).resolve_as_of("nope")
    with pytest.raises(VersionError, match="not a version number"):
        VersionLog(archive).resolve_as_of("2026-13-45")


def test_long_tag_names_and_as_of_values_when_refused_are_quoted_by_their_start(archive):
    long = "x" * 300
    with pytest.raises(ConfigError, match=r"^tag 'x{40}'\.\.\. \(301 characters\): expected"):
        Archive(archive, audit_log=None).versions.tag(long + "!")
    with pytest.raises(VersionError, match=r"^as_of = '-x{39}'\.\.\. \(301 characters\)"):
        VersionLog(archive).resolve_as_of("-" + long)


def test_view_sql_as_of_a_version_works_on_the_users_own_connection(archive):
    import duckdb

    before = rows(archive)
    compact(archive, KEYS[2], variant=1)
    con = duckdb.connect()
    con.execute("SET TimeZone = 'UTC'")
    con.execute(ticks_view_sql(ArchiveCore(archive, policy=POLICY), as_of=len(KEYS)))
    count = con.execute("SELECT count(*) FROM ticks").fetchone()[0]
    assert count == len(before)


# --- tags ---------------------------------------------------------------------------------------


def test_tag_when_pinned_survives_pruning_and_reads_its_version(archive):
    before = rows(archive)
    assert VersionLog(archive).tag("paper-2026", version=2) == 2
    for variant in (1, 2, 3):
        compact(archive, KEYS[0], variant=variant)
    Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=1)
    kept = [v.version for v in VersionLog(archive).list()]
    assert kept == [2, VersionLog(archive).count()]
    assert VersionLog(archive).tags() == {"paper-2026": 2}
    assert rows(archive, as_of="paper-2026") == rows_of_first_two(before)


def rows_of_first_two(rows_now: list[tuple]) -> list[tuple]:
    return [r for r in rows_now if (r[0], r[1]) in KEYS[:2]]


def test_tag_when_name_pins_another_version_refuses(archive):
    VersionLog(archive).tag("t1", version=1)
    assert VersionLog(archive).tag("t1", version=1) == 1
    with pytest.raises(VersionError, match="pins version 1 already"):
        VersionLog(archive).tag("t1", version=2)
    with pytest.raises(ConfigError, match="tag '1x'"):
        VersionLog(archive).tag("1x")


def test_tags_and_versions_when_made_are_audited(archive):
    VersionLog(archive, Books(archive, default_audit_log(archive))).tag("audited")
    log = archive.parent / "audit.jsonl"
    events = [json.loads(line)["event"] for line in log.read_text().splitlines()]
    assert events.count("tick-archive-version") == len(KEYS)
    assert "tick-archive-tag" in events


# --- pruning ------------------------------------------------------------------------------------


def test_prune_versions_when_keep_last_removes_only_files_no_kept_version_reads(archive):
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)
    compact(archive, KEYS[0], variant=1)
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    assert Archive(archive, policy=POLICY).versions.past_bytes() > 0
    latest = VersionLog(archive).count()
    now = rows(archive)
    result = Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=1)
    assert result.kept == [latest]
    assert result.files_removed
    assert rows(archive) == now
    assert rows(archive, as_of=latest) == now
    assert Archive(archive, policy=POLICY).versions.past_bytes() == 0
    with pytest.raises(VersionError, match="was pruned"):
        VersionLog(archive).resolve_as_of(1)


def test_read_as_of_when_a_version_record_is_missing_names_the_file(archive):
    record = VersionLog(archive).record_path(2)
    record.unlink()  # as a partial copy of the archive would leave it
    with pytest.raises(VersionError, match="was pruned or its record is missing") as error:
        VersionLog(archive).resolve_as_of(2)
    assert str(record) in str(error.value)


def test_prune_versions_when_older_than_keeps_the_latest(archive):
    result = Archive(archive, policy=POLICY, audit_log=None).versions.prune(
        older_than=date(2999, 1, 1)
    )
    assert result.kept == [len(KEYS)]
    assert rows(archive, as_of=len(KEYS)) == rows(archive)


def test_prune_versions_when_books_and_records_refuses(archive):
    Archive(archive, policy=POLICY, audit_log=None).core.books.enable()
    with pytest.raises(WriteOnceError):
        Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=1)
    assert VersionLog(archive).count() == len(VersionLog(archive).list())


def test_prune_versions_when_handle_built_write_once_turns_the_mode_on_and_refuses(archive):
    kept = [v.version for v in VersionLog(archive).list()]
    handle = Archive(archive, policy=POLICY, audit_log=None, books_and_records=True)
    with pytest.raises(WriteOnceError):
        handle.versions.prune(keep_last=1)
    assert [v.version for v in VersionLog(archive).list()] == kept
    with pytest.raises(WriteOnceError):  # the mode is the archive's now, for every handle
        Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=1)


def test_tag_when_another_writer_holds_the_lock_refuses_and_pins_nothing(archive):
    handle = Archive(archive, policy=POLICY, audit_log=None)
    with handle.core.locked("pruning versions"), pytest.raises(ArchiveBusyError, match="pruning"):
        handle.versions.tag("during-prune")
    assert VersionLog(archive).tags() == {}
    assert handle.versions.tag("after-prune") == VersionLog(archive).count()
    assert handle.versions.tags() == {"after-prune": VersionLog(archive).count()}


def test_prune_versions_when_rule_is_missing_or_double_refuses(archive):
    with pytest.raises(ConfigError, match="exactly one"):
        Archive(archive, policy=POLICY, audit_log=None).versions.prune()
    with pytest.raises(ConfigError, match="keep_last = 0"):
        Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=0)


@pytest.mark.parametrize("count", ["0", "-2", "two"])
def test_cli_prune_versions_when_keep_last_is_no_count_exits_2_naming_the_option(
    archive, capsys, count
):
    before = VersionLog(archive).count()
    with pytest.raises(SystemExit) as stopped:
        main(["prune-versions", str(archive), "--keep-last", count])
    err = capsys.readouterr().err
    assert stopped.value.code == 2 and f"--keep-last: '{count}': expected an integer" in err
    assert VersionLog(archive).count() == before


# --- the Python read API ------------------------------------------------------------------------


def test_archive_read_when_filtered_equals_the_view_now_and_as_of_past_versions(archive):
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)
    compact(archive, KEYS[4], variant=2)
    handle = Archive(archive, policy=POLICY)
    for as_of in (None, 3, VersionLog(archive).count() - 1, VersionLog(archive).count()):
        got = handle.read(["CL/F"], start=DAYS[1], end=DAYS[2], as_of=as_of)
        expected = [
            r for r in rows(archive, as_of=as_of) if r[0] == "CL/F" and DAYS[1] <= r[1] <= DAYS[2]
        ]
        got = got.set_column(2, "ts", got["ts"].cast(pa.int64()))
        assert sorted(zip(*(got[c].to_pylist() for c in COLUMNS.split(", ")), strict=True)) == (
            expected
        )
        assert sorted(handle.read(as_of=as_of).to_pylist(), key=str) == sorted(
            run_query(
                "SELECT * FROM ticks",
                ArchiveCore(archive, policy=POLICY),
                QueryOptions(as_of=as_of),
            ).to_pylist(),
            key=str,
        )


def test_archive_read_when_columns_given_returns_only_them_and_refuses_unknown(archive):
    handle = Archive(archive, policy=POLICY)
    assert handle.read("ES", columns=["ts", "price"]).column_names == ["ts", "price"]
    with pytest.raises(ConfigError, match="columns"):
        handle.read(columns=["nope"])


def test_archive_symbols_days_and_versions_describe_the_archive(archive):
    handle = Archive(archive, policy=POLICY)
    assert handle.symbols() == ["CL/F", "ES"]
    assert handle.days("ES") == list(DAYS[:4])
    assert handle.days("ES", as_of=1) == [DAYS[0]]
    assert [v.version for v in handle.versions.list()] == list(range(1, len(KEYS) + 1))
    assert handle.report("ES", DAYS[0]).rows == len(day_ticks("ES", DAYS[0]))


# --- the property -------------------------------------------------------------------------------

OPERATIONS = st.lists(
    st.one_of(
        st.tuples(st.just("compact"), st.sampled_from(KEYS), st.integers(0, 3)),
        st.tuples(st.just("withdraw"), st.sampled_from(KEYS), st.just(0)),
        st.tuples(st.just("remove"), st.sampled_from(KEYS), st.just(0)),
        st.tuples(st.just("retier"), st.sampled_from(KEYS), st.integers(0, 1)),
    ),
    min_size=1,
    max_size=8,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(operations=OPERATIONS)
def test_every_version_reads_as_the_view_read_right_after_it_committed(
    tmp_path_factory, no_fsync, operations
):
    root = tmp_path_factory.mktemp("versions") / "archive"
    for key in KEYS[::3]:
        compact(root, key)
    captured = {VersionLog(root).count(): rows(root)}
    handle = Archive(root, policy=POLICY, audit_log=None)  # kept throughout: revalidates
    for name, key, arg in operations:
        if name == "compact":
            compact(root, key, variant=arg)
        elif name == "withdraw":
            Archive(root, policy=POLICY, audit_log=None).withdraw([key])
        elif name == "remove":
            Archive(root, policy=POLICY, audit_log=None).remove([key])
        else:
            Archive(root, policy=POLICY, audit_log=None).retier(as_of=(STAGE_1, STAGE_2)[arg])
        captured.setdefault(VersionLog(root).count(), rows(root))
        assert_reads_as_the_view(handle, queries=READS)  # the view's rows, in its order
    for number, expected in captured.items():
        assert rows(root, as_of=number) == expected, number
        assert_reads_as_the_view(handle, as_of=number, queries=READS)


# --- crashes ------------------------------------------------------------------------------------

CHECKPOINTS = ["version-snapshots", "version-record", "version-indexed"]


@pytest.mark.parametrize("point", CHECKPOINTS)
def test_recording_a_version_when_crashing_at_a_checkpoint_a_rerun_finishes(archive, point):
    before = {n: rows(archive, as_of=n) for n in range(1, len(KEYS) + 1)}
    with faults.installed(crash_at_name(point)), pytest.raises(Crash):
        compact(archive, KEYS[0], variant=1)
    recorded = VersionLog(archive).count()
    assert recorded == len(KEYS) + (1 if point == "version-indexed" else 0)
    compact(archive, KEYS[0], variant=1)  # the rerun
    assert VersionLog(archive).count() == len(KEYS) + 1
    assert rows(archive, as_of=len(KEYS) + 1) == rows(archive)
    assert {n: rows(archive, as_of=n) for n in before} == before


@pytest.mark.parametrize(
    "point", ["audited-version-pruning", "pruned-version:1", "audited-removals"]
)
def test_prune_versions_when_crashing_keeps_every_kept_version_readable(archive, point):
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)
    compact(archive, KEYS[0], variant=1)
    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    before = {v.version: rows(archive, as_of=v.version) for v in VersionLog(archive).list()}
    with faults.installed(crash_at_name(point)), pytest.raises(Crash):
        Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=2)
    for v in VersionLog(archive).list():
        assert rows(archive, as_of=v.version) == before[v.version]
    Archive(archive, policy=POLICY, audit_log=None).versions.prune(keep_last=2)
    kept = [v.version for v in VersionLog(archive).list()]
    assert len(kept) == 2
    for number in kept:
        assert rows(archive, as_of=number) == before[number]


def test_retier_when_crashing_after_its_commit_a_rerun_records_it_as_unrecorded_first(archive):
    before = rows(archive)
    with faults.installed(crash_at_name("committed")), pytest.raises(Crash):
        Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    assert VersionLog(archive).count() == len(KEYS)
    committed = rows(archive)  # what every read shows: the re-tiering's commit
    result = Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    latest = VersionLog(archive).read(len(KEYS) + 1)
    assert latest.operation == "unrecorded changes (found by retier)"
    assert result.version is None  # its removals and forgotten stamps change no symbol-day
    log = VersionLog(archive)
    assert log.count() == len(KEYS) + 1
    snapshots = {log.catalog_snapshot_path(v.catalog) for v in log.list() if v.catalog}
    assert set(log.catalog_snapshot_path("x").parent.iterdir()) == snapshots  # none unread
    assert rows(archive, as_of=len(KEYS) + 1) == committed
    assert rows(archive, as_of=len(KEYS)) == before


def compact_cut_short(root: Path, source: Path, *, after: int) -> None:
    """``compact-ticks`` of ``source`` into ``root`` stopped (as Ctrl-C stops it) once
    ``after`` symbol-days were written: each published whole, no version recorded."""

    def stop(done: int, total: int) -> None:
        if done == after:
            raise Crash(f"{done} of {total}")

    core = archive_at(root, POLICY).core
    with pytest.raises(Crash):
        compact_ticks(core, source, as_of=STAGE_1, run=CompactionRun(on_progress=stop))


def test_compact_when_cut_short_the_next_writer_records_its_days_first_as_unrecorded(
    archive, tmp_path
):
    before = rows(archive)
    compact_cut_short(archive, write_four_day_csv(tmp_path / "ticks.csv"), after=2)
    shown = rows(archive)  # what a query shows now: some of the compaction's days
    assert shown != before and VersionLog(archive).count() == len(KEYS)

    Archive(archive, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)

    unrecorded, retiered = VersionLog(archive).list()[-2:]
    assert unrecorded.operation == "unrecorded changes (found by retier)"
    assert {symbol for symbol, _ in unrecorded.changed} == {"KX-0", "KX-1"}
    assert retiered.operation == "retier"
    assert rows(archive, as_of=unrecorded.version) == shown
    assert rows(archive, as_of=unrecorded.version - 1) == before


def test_compact_when_rerun_after_being_cut_short_records_only_its_own_days(archive, tmp_path):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    compact_cut_short(archive, source, after=2)
    shown = rows(archive)

    compact_ticks(archive_at(archive, POLICY).core, source, as_of=STAGE_1)

    unrecorded, rerun = VersionLog(archive).list()[-2:]
    assert unrecorded.operation == "unrecorded changes (found by compact)"
    assert rerun.operation == "compact" and rerun.changed
    assert not set(unrecorded.changed) & set(rerun.changed)
    assert len(unrecorded.changed) + len(rerun.changed) == 4  # the input's symbol-days
    assert rows(archive, as_of=unrecorded.version) == shown
    assert rows(archive, as_of=rerun.version) == rows(archive)


def test_tag_when_the_archive_holds_unrecorded_changes_pins_what_a_read_shows(archive, tmp_path):
    handle = archive_at(archive, POLICY)
    assert handle.versions.tag("before") == len(KEYS)
    compact_cut_short(archive, write_four_day_csv(tmp_path / "ticks.csv"), after=2)

    assert handle.versions.tag("before") == len(KEYS)  # a tag never moves: nothing recorded
    assert VersionLog(archive).count() == len(KEYS)

    assert handle.versions.tag("now") == len(KEYS) + 1  # the changes recorded, then pinned
    assert VersionLog(archive).read(len(KEYS) + 1).operation == "unrecorded changes (found by tag)"
    assert rows(archive, as_of="now") == rows(archive)
    assert handle.versions.tag("now") == len(KEYS) + 1  # no change since: the same version
    assert handle.versions.tag("later") == len(KEYS) + 1
    with pytest.raises(VersionError, match="'before' pins version 8 already"):
        handle.versions.tag("before")
    assert VersionLog(archive).count() == len(KEYS) + 1


def test_compact_into_a_new_archive_records_no_empty_version_first(tmp_path, no_fsync):
    root = tmp_path / "archive"
    compact_ticks(
        archive_at(root, POLICY).core, write_four_day_csv(tmp_path / "t.csv"), as_of=STAGE_1
    )
    assert [v.operation for v in VersionLog(root).list()] == ["compact"]


def test_versions_when_archive_is_copied_read_the_copy(archive, tmp_path):
    copy = tmp_path / "copy"
    shutil.copytree(archive.parent, copy)
    assert rows(copy / "archive", as_of=2) == rows(archive, as_of=2)
    assert VersionLog(copy / "archive").directory.is_dir()


# --- the command line ---------------------------------------------------------------------------


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_versions_tag_query_as_of_and_prune_versions(tmp_path, capsys, no_fsync):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "data" / "archive"
    compact_args = ["compact-ticks", str(source), "--out", str(archive), "--price-scale", "2"]
    assert cli(capsys, *compact_args, "--as-of", "2025-12-05")[0] == 0
    count = "SELECT tier, count(*) AS n FROM ticks GROUP BY tier"
    assert cli(capsys, "retier", str(archive), "--as-of", "2027-01-01")[0] == 0
    remove = ["remove-days", str(archive), "--day", "KX-0", "2025-12-01"]
    assert cli(capsys, *remove)[0] == 0

    code, out, err = cli(capsys, "versions", str(archive), "--json")
    assert code == 0, err
    listed = json.loads(out)
    assert [v["operation"] for v in listed] == ["compact", "retier", "remove"]
    assert listed[2]["changed"] == [["KX-0", "2025-12-01"]]
    code, out, err = cli(capsys, "tag", str(archive), "first-run", "--version", "1")
    assert code == 0 and "pins version 1" in out, err

    for as_of, expected in (
        ("first-run", [("HOT", 12)]),
        ("2", [("COLD", 12)]),
        ("3", [("COLD", 9)]),
    ):
        code, out, err = cli(capsys, "query", count, "--archive", str(archive), "--as-of", as_of,
                             "--json")  # fmt: skip
        assert code == 0, err
        assert [(r["tier"], r["n"]) for r in json.loads(out)] == expected
    when = listed[1]["time"]
    code, out, _ = cli(capsys, "query", count, "--archive", str(archive), "--as-of", when, "--json")
    assert [(r["tier"], r["n"]) for r in json.loads(out)] == [("COLD", 12)]

    code, out, err = cli(capsys, "prune-versions", str(archive), "--keep-last", "1", "--json")
    assert code == 0, err
    assert json.loads(out)["pruned"] == [2] and json.loads(out)["kept"] == [1, 3]
    code, _, err = cli(capsys, "query", count, "--archive", str(archive), "--as-of", "2")
    assert code == 2 and "version 2 was pruned" in err
    code, _, err = cli(capsys, "query", count, "--archive", str(archive), "--as-of", "nope")
    assert code == 2 and "no tag 'nope'" in err
    with pytest.raises(SystemExit) as refused:  # argparse: one of the two rules is required
        cli(capsys, "prune-versions", str(archive))
    assert refused.value.code == 2


def test_results_when_the_archive_is_spelled_relative_name_every_file_absolute(
    tmp_path, capsys, no_fsync, monkeypatch
):
    """A re-tiering's result and prune-versions --json name hot files and consolidated files
    alike by their absolute paths (a relative root gave relative hot paths beside absolute
    tier paths)."""
    write_four_day_csv(tmp_path / "ticks.csv")
    monkeypatch.chdir(tmp_path)
    compact_args = ["compact-ticks", "ticks.csv", "--out", "arc", "--price-scale", "2"]
    assert cli(capsys, *compact_args, "--as-of", "2025-12-05")[0] == 0
    moved = Archive("arc").retier(as_of=date(2027, 1, 1)).to_dict()
    assert cli(capsys, "remove-days", "arc", "--day", "KX-0", "2025-12-01")[0] == 0
    assert cli(capsys, "retier", "arc", "--as-of", "2027-01-01")[0] == 0
    code, out, err = cli(capsys, "prune-versions", "arc", "--keep-last", "1", "--json")
    assert code == 0, err
    pruned = json.loads(out)["files_removed"]
    assert moved["files_removed"] and pruned
    named = moved["files_written"] + moved["files_removed"] + pruned
    assert [p for p in named if not Path(p).is_absolute()] == []


# --- S3 tiers -----------------------------------------------------------------------------------


def test_versions_when_tiers_are_on_s3_read_replaced_objects_until_pruned(
    tmp_path, no_fsync, s3_env
):
    from skewtape_pipeline_tests.ticks.archive.test_object_store import (
        new_prefix,
        objects_under,
        s3_policy,
    )

    prefix = new_prefix()
    policy = s3_policy(s3_env, prefix)
    root = tmp_path / "data" / "archive"
    for key in KEYS:
        compact(root, key, policy=policy)

    def view(as_of=None):
        table = run_query(
            f"SELECT {COLUMNS} FROM ticks",
            ArchiveCore(root, policy=policy),
            QueryOptions(as_of=as_of),
        )
        table = table.set_column(2, "ts", table["ts"].cast(pa.int64()))
        return sorted(zip(*(table[c].to_pylist() for c in table.column_names), strict=True))

    captured = {VersionLog(root).count(): view()}
    Archive(root, policy=policy, audit_log=None).retier(as_of=STAGE_1)
    captured[VersionLog(root).count()] = view()
    compact(root, KEYS[0], variant=2, policy=policy)
    Archive(root, policy=policy, audit_log=None).retier(as_of=STAGE_2)
    captured[VersionLog(root).count()] = view()
    Archive(root, policy=policy, audit_log=None).withdraw([KEYS[5]])
    captured[VersionLog(root).count()] = view()
    assert len(captured) == 4
    for number, expected in captured.items():
        assert view(as_of=number) == expected, number
    handle = Archive(root, policy=policy)
    first_tiered = sorted(captured)[1]
    got = handle.read(["ES"], as_of=first_tiered, columns=["symbol", "date", "tier"])
    assert got.to_pylist() and set(got["tier"].to_pylist()) <= {"HOT", "WARM", "COLD"}

    stored = [k for k in objects_under(s3_env, prefix) if k.endswith(".parquet")]
    Archive(root, policy=policy, audit_log=None).versions.prune(keep_last=1)
    left = [k for k in objects_under(s3_env, prefix) if k.endswith(".parquet")]
    assert len(left) < len(stored)
    assert view() == view(as_of=VersionLog(root).count()) == captured[VersionLog(root).count()]


def test_versions_when_manifests_are_deltas_past_their_depth_every_kept_version_reads(archive):
    captured = {VersionLog(archive).count(): rows(archive)}
    for variant in range(1, MAX_DELTA_DEPTH + 4):
        compact(archive, KEYS[variant % 2], variant=variant)
        captured[VersionLog(archive).count()] = rows(archive)
    middle = len(KEYS) + 5
    VersionLog(archive).tag("middle", version=middle)
    Archive(archive, policy=POLICY, audit_log=None).versions.prune(
        keep_last=1
    )  # the middle's delta chain stays
    for number in (middle, VersionLog(archive).count()):
        assert rows(archive, as_of=number) == captured[number]
    stored = list((VersionLog(archive).directory / "manifests").iterdir())
    assert len(stored) <= 2 * (MAX_DELTA_DEPTH + 1)  # the two kept chains, no more
    assert len(stored) < VersionLog(archive).count()


def retier_checkpoints(tmp_path: Path) -> list[str]:
    """The checkpoint names a re-tiering of the versioned archive below passes, in order."""
    root = versioned_archive(tmp_path / "names")
    names: list[str] = []
    with faults.installed(names.append):
        Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    return names


def versioned_archive(folder: Path) -> Path:
    root = folder / "data" / "archive"
    for key in KEYS:
        compact(root, key)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)
    compact(root, KEYS[0], variant=1)
    return root


def test_retier_when_crashing_at_any_checkpoint_every_version_reads_what_it_read(
    tmp_path, no_fsync
):
    names = retier_checkpoints(tmp_path)
    assert "committed" in names and "version-indexed" in names
    base = versioned_archive(tmp_path / "base")
    before = {v.version: rows(base, as_of=v.version) for v in VersionLog(base).list()}
    for point, name in enumerate(names):
        work = tmp_path / f"crash-{point}"
        shutil.copytree(base.parent, work / "data")
        root = work / "data" / "archive"
        with faults.installed(crash_at_name(name)), pytest.raises(Crash):
            Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
        for number, expected in before.items():
            assert rows(root, as_of=number) == expected, f"after a crash at {name}"
        Archive(root, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)  # the rerun finishes
        assert rows(root, as_of=VersionLog(root).count()) == rows(root), name
        for number, expected in before.items():
            assert rows(root, as_of=number) == expected, f"after the rerun, crash at {name}"

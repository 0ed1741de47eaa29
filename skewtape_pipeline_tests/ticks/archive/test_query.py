"""The ticks view: one table over every tier, pruning by symbol and date, run_query."""

from __future__ import annotations

import json
import os
import signal
import threading
from datetime import date, datetime, timedelta
from decimal import Decimal

import duckdb
import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.query import (
    VIEW_COLUMNS,
    QueryOptions,
    open_ticks_view,
    run_query,
    run_query_json,
    run_query_text,
    scan_stats,
    ticks_view_sql,
)
from skewtape_pipeline.ticks.archive.store.placement import archive_state
from skewtape_pipeline.ticks.archive.store.policy import COLD
from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema
from skewtape_pipeline.ticks.encode.validate import day_start_ns
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    SYMBOLS,
    build_archive,
    day_ticks,
    expected_rows,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at

AS_OF = DAYS[-1] + timedelta(days=14)  # every day cold
SYMBOL_DATE = "SELECT * FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ?"


def test_scan_stats_when_hot_tier_filtered_by_symbol_and_date_opens_one_file(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF)
    symbol, day = "CL/F", DAYS[2]
    stats = scan_stats(SYMBOL_DATE, ArchiveCore(root), parameters=[symbol, day, day])
    assert stats.rows == len(day_ticks(symbol, day))
    assert (stats.files_scanned, stats.files_total) == (1, len(SYMBOLS) * len(DAYS))


def test_scan_stats_when_cold_tier_filtered_by_symbol_and_date_skips_row_groups(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=AS_OF)
    symbol, day = "KX-25MAR", DAYS[4]
    stats = scan_stats(SYMBOL_DATE, ArchiveCore(root), parameters=[symbol, day, day])
    assert stats.rows == len(day_ticks(symbol, day))
    # a row group holding the end of one symbol and the start of the next can match too
    assert stats.row_groups_scanned <= 2 < stats.row_groups_total // 2
    cold_files = archive_state(root).consolidated_files(COLD)
    assert stats.files_scanned == stats.files_total == len(cold_files) > 0
    everything = scan_stats("SELECT * FROM ticks", ArchiveCore(root))
    assert everything.row_groups_scanned == stats.row_groups_total


def test_run_query_when_days_in_different_tiers_answers_across_them(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=DAYS[-1] + timedelta(days=1))
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=DAYS[-1] + timedelta(days=1))
    table = run_query(
        "SELECT tier, count(*) AS n FROM ticks WHERE symbol = ? AND date BETWEEN ? AND ? "
        "GROUP BY tier ORDER BY tier",
        ArchiveCore(root),
        QueryOptions(parameters=["ES", DAYS[0], DAYS[-1]]),
    )
    tiers = dict(zip(table.column("tier").to_pylist(), table.column("n").to_pylist(), strict=True))
    assert set(tiers) == {"COLD", "HOT", "WARM"}
    assert sum(tiers.values()) == sum(len(day_ticks("ES", d)) for d in DAYS)


def test_run_query_when_symbol_needs_encoding_returns_exact_values(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=AS_OF)
    table = run_query(
        "SELECT price, quantity, tier FROM ticks WHERE symbol = 'CL/F' ORDER BY ts, price",
        ArchiveCore(root),
    )
    wanted = [r for r in expected_rows(DAYS[:1]) if r[0] == "CL/F"]
    assert sorted(table.column("price").to_pylist()) == sorted(r[3] for r in wanted)
    assert all(isinstance(p, Decimal) for p in table.column("price").to_pylist())
    assert set(table.column("tier").to_pylist()) == {COLD}


def test_open_ticks_view_when_archive_empty_gives_typed_empty_view(tmp_path):
    root = tmp_path / "archive"
    root.mkdir()
    (root / ".skewtape-archive.lock").write_text("")  # a writer came, compacted nothing
    con = duckdb.connect()
    open_ticks_view(con, ArchiveCore(root))
    assert tuple(c[0] for c in con.execute("DESCRIBE ticks").fetchall()) == VIEW_COLUMNS
    assert con.execute("SELECT count(*) FROM ticks").fetchone() == (0,)


def test_run_query_when_sql_or_root_bad_raises_config_error(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    with pytest.raises(ConfigError, match="nope"):
        run_query("SELECT nope FROM ticks", ArchiveCore(root))
    with pytest.raises(ConfigError, match="not a folder"):
        run_query("SELECT 1", ArchiveCore(tmp_path / "missing"))
    with pytest.raises(ConfigError, match="identifier"):
        open_ticks_view(duckdb.connect(), ArchiveCore(root), name="ticks; DROP")


def test_scan_stats_when_many_symbol_days_hidden_still_skips_row_groups(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=AS_OF)
    hidden = [(s, d) for s in SYMBOLS for d in DAYS if (s, d) != ("KX-25MAR", DAYS[4])]
    Archive(root, audit_log=None).withdraw(hidden)
    sql = ticks_view_sql(ArchiveCore(root))
    assert "ANTI JOIN (VALUES" in sql and "symbol = '" not in sql  # one join, no OR-chain
    symbol, day = "KX-25MAR", DAYS[4]
    stats = scan_stats(SYMBOL_DATE, ArchiveCore(root), parameters=[symbol, day, day])
    assert stats.rows == len(day_ticks(symbol, day))
    assert stats.row_groups_scanned <= 2 < stats.row_groups_total // 2
    everything = run_query(
        "SELECT symbol, date, count(*) AS n FROM ticks GROUP BY ALL", ArchiveCore(root)
    )
    assert everything.to_pylist() == [{"symbol": symbol, "date": day, "n": stats.rows}]


def test_scan_stats_when_year_filter_given_skips_cold_files_of_other_years_unopened(
    tmp_path, no_fsync
):
    days = (date(2025, 12, 30), date(2026, 1, 2))
    as_of = days[-1] + timedelta(days=60)
    root = build_archive(tmp_path, as_of=as_of, days=days)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=as_of)
    assert len(archive_state(root).consolidated_files(COLD)) == 2  # one per year
    symbol, day = "ES", days[1]

    stats = scan_stats(
        SYMBOL_DATE + " AND year = ?", ArchiveCore(root), parameters=[symbol, day, day, 2026]
    )

    assert stats.rows == len(day_ticks(symbol, day))
    assert (stats.files_scanned, stats.files_total) == (1, 2)


def test_run_query_when_days_in_every_tier_year_and_month_match_the_date(tmp_path, no_fsync):
    as_of = DAYS[-1] + timedelta(days=1)
    root = build_archive(tmp_path, as_of=as_of)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=as_of)
    table = run_query(
        "SELECT tier, count(*) AS n, count(*) FILTER (year = year(date) AND month = month(date))"
        " AS right FROM ticks GROUP BY tier",
        ArchiveCore(root),
    )
    rows = table.to_pylist()
    assert {r["tier"] for r in rows} == {"HOT", "WARM", "COLD"}
    assert all(r["n"] == r["right"] > 0 for r in rows)


@pytest.mark.parametrize("folder", ["year=2020", "month=07", "venue=kalshi"])
def test_run_query_when_data_folder_name_has_a_view_column_key_returns_every_tick_right(
    tmp_path, no_fsync, folder
):
    as_of = DAYS[-1] + timedelta(days=1)
    root = build_archive(tmp_path / folder, as_of=as_of)
    Archive(root, policy=POLICY, audit_log=None).retier(as_of=as_of)
    Archive(root, audit_log=None).withdraw([("ES", DAYS[0])])
    table = run_query(
        "SELECT symbol, date, tier, year, month, count(*) AS n FROM ticks GROUP BY ALL",
        ArchiveCore(root),
    )
    rows = table.to_pylist()
    assert {r["tier"] for r in rows} == {"HOT", "WARM", "COLD"}
    wanted = [r for r in expected_rows() if (r[0], r[1]) != ("ES", DAYS[0])]
    assert sorted((r["symbol"], r["date"]) for r in rows for _ in range(r["n"])) == sorted(
        (r[0], r[1]) for r in wanted
    )
    assert all((r["year"], r["month"]) == (r["date"].year, r["date"].month) for r in rows)


@pytest.mark.parametrize("folder", ["date=2020-01-01", "symbol=X"])
def test_run_query_when_archive_is_below_a_symbol_or_date_folder_refuses_naming_it(
    tmp_path, no_fsync, folder
):
    root = build_archive(tmp_path / folder / "data", as_of=DAYS[-1], days=DAYS[-1:])
    with pytest.raises(ConfigError, match=f"the folder '{folder}' above the archive"):
        run_query("SELECT count(*) FROM ticks", ArchiveCore(root))


# --- every DuckDB type, printed exactly -----------------------------------------------------------

NS_DAY = date(2012, 6, 21)
NS_OFFSETS = (34_200_017_459_617, 34_200_017_459_617, 57_599_959_000_001)
"""Nanoseconds after midnight of three ticks: true nanosecond digits, no microsecond value."""

EVERY_TYPE = (
    # (DuckDB type it returns, SQL literal, the value as printed)
    ("TIMESTAMP_NS", "TIMESTAMP_NS '2012-06-21 13:30:00.017459617'",
     "2012-06-21 13:30:00.017459617"),
    ("TIMESTAMP WITH TIME ZONE", "TIMESTAMPTZ '2020-01-01 00:00:00.123456+00'",
     "2020-01-01 00:00:00.123456+00"),
    ("TIMESTAMP", "TIMESTAMP '1969-12-31 23:59:59.999999'", "1969-12-31 23:59:59.999999"),
    ("TIMESTAMP_MS", "TIMESTAMP_MS '2020-01-01 00:00:01.5'", "2020-01-01 00:00:01.5"),
    ("TIMESTAMP_S", "TIMESTAMP_S '2020-01-01 00:00:01'", "2020-01-01 00:00:01"),
    ("DATE", "DATE '0044-03-15 (BC)'", "0044-03-15 (BC)"),
    ("DATE", "DATE 'infinity'", "infinity"),
    ("TIME", "TIME '23:59:59.999999'", "23:59:59.999999"),
    ("TIME WITH TIME ZONE", "TIMETZ '12:00:00+02'", "12:00:00+02"),
    ("INTERVAL", "INTERVAL '14 months 3 days 04:05:06.000007'",
     "1 year 2 months 3 days 04:05:06.000007"),
    ("DECIMAL(3,2)", "1.50::DECIMAL(3, 2)", "1.50"),
    ("DECIMAL(38,9)", "12345678901234567890.123456789::DECIMAL(38, 9)",
     "12345678901234567890.123456789"),
    ("HUGEINT", "(-170141183460469231731687303715884105727)::HUGEINT",
     "-170141183460469231731687303715884105727"),
    ("UHUGEINT", "340282366920938463463374607431768211455::UHUGEINT",
     "340282366920938463463374607431768211455"),
    ("BIGINT", "9223372036854775807::BIGINT", "9223372036854775807"),
    ("UBIGINT", "18446744073709551615::UBIGINT", "18446744073709551615"),
    ("UTINYINT", "255::UTINYINT", "255"),
    ("DOUBLE", "0.1::DOUBLE", "0.1"),
    ("DOUBLE", "'-inf'::DOUBLE", "-inf"),
    ("DOUBLE", "'nan'::DOUBLE", "nan"),
    ("FLOAT", "3.5::FLOAT", "3.5"),
    ("BOOLEAN", "true", "true"),
    ("VARCHAR", "'NULL'", "NULL"),
    ("BLOB", "'\\xAA\\x00z'::BLOB", "\\xAA\\x00z"),
    ("BIT", "'0101'::BIT", "0101"),
    ("UUID", "'550e8400-e29b-41d4-a716-446655440000'::UUID",
     "550e8400-e29b-41d4-a716-446655440000"),
    ("INTEGER[]", "[1, 2, NULL]", "[1, 2, NULL]"),
    ("INTEGER[2]", "[1, 2]::INTEGER[2]", "[1, 2]"),
    ("STRUCT(a INTEGER, b DECIMAL(2,1)[])", "{'a': 1, 'b': [1.5]}", "{'a': 1, 'b': [1.5]}"),
    ("MAP(VARCHAR, INTEGER)", "MAP {'k': 1}", "{k=1}"),
    ("UNION(num INTEGER)", "union_value(num := 2)", "2"),
    ("ENUM('a', 'b')", "'b'::ENUM('a', 'b')", "b"),
    ("JSON", "'{\"a\":1}'::JSON", '{"a":1}'),
)  # fmt: skip


def _ns_archive(folder) -> tuple[object, list[str]]:
    """A hot archive of one symbol-day with true nanosecond timestamps, and each tick's ``ts``
    as text computed from the integers (not by DuckDB), in UTC (``+00``)."""
    start = day_start_ns(NS_DAY)
    ts = [start + offset for offset in NS_OFFSETS]
    batch = TickBatch.from_units(
        ts, [22051, 22051, 22603], [100, 5, 7], [0, 1, 2], TickSchema(price_scale=2)
    )
    root = folder / "archive"
    compact_symbol_day(
        archive_at(root, POLICY).core, batch, SymbolDayWrite(symbol="AMZN", day=NS_DAY, age_days=0)
    )
    texts = []
    for offset in NS_OFFSETS:
        seconds, nanos = divmod(offset, 10**9)
        clock = (datetime(2012, 6, 21) + timedelta(seconds=seconds)).strftime("%Y-%m-%d %H:%M:%S")
        texts.append(f"{clock}.{nanos:09d}+00")
    return root, texts


def test_run_query_text_when_timestamps_have_nanoseconds_prints_all_nine_digits(tmp_path):
    root, expected = _ns_archive(tmp_path)
    result = run_query_text("SELECT ts, price FROM ticks ORDER BY ts", ArchiveCore(root))
    assert result.columns == ["ts", "price"]
    assert [row[0] for row in result.rows] == expected
    assert [row[1] for row in result.rows] == ["220.51", "220.51", "226.03"]


def test_run_query_text_when_every_duckdb_type_selected_prints_each_exactly(tmp_path):
    root, _ = _ns_archive(tmp_path)
    select = ", ".join(f"{literal} AS c{i}" for i, (_, literal, _) in enumerate(EVERY_TYPE))
    result = run_query_text(
        f"SELECT {select}, NULL AS none, ts FROM ticks LIMIT 1", ArchiveCore(root)
    )
    assert result.types[: len(EVERY_TYPE)] == [kind for kind, _, _ in EVERY_TYPE]
    [row] = result.rows
    assert list(row[: len(EVERY_TYPE)]) == [text for _, _, text in EVERY_TYPE]
    assert row[-2] is None and result.types[-2] == '"NULL"'


def test_run_query_json_when_every_duckdb_type_selected_keeps_values_exact(tmp_path):
    root, expected = _ns_archive(tmp_path)
    sql = (
        "SELECT ts, price, (-170141183460469231731687303715884105727)::HUGEINT AS big, "
        "[{'a': 1.25::DECIMAL(4, 2)}] AS nested, NULL AS none, 'x' AS x, 'y' AS x "
        "FROM ticks ORDER BY ts"
    )
    rows = json.loads(run_query_json(sql, ArchiveCore(root)), parse_float=Decimal)
    assert [row["ts"] for row in rows] == expected
    assert rows[0]["price"] == Decimal("220.51")
    assert rows[0]["big"] == -170141183460469231731687303715884105727
    assert rows[0]["nested"] == [{"a": Decimal("1.25")}] and rows[0]["none"] is None
    assert (rows[0]["x"], rows[0]["x_1"]) == ("x", "y")  # a repeated name is kept, renamed


def test_run_query_json_when_a_float_is_not_finite_writes_strict_json(tmp_path):
    root, _ = _ns_archive(tmp_path)
    sql = (
        "SELECT 'inf'::DOUBLE AS up, '-inf'::FLOAT AS down, 'nan'::DOUBLE AS nan, "
        "['inf'::DOUBLE, 2.5] AS listed, 'NaN and \"Infinity\"' AS text, price "
        "FROM ticks ORDER BY ts LIMIT 1"
    )

    def refuse(constant: str):
        raise ValueError(f"{constant} is no JSON")

    [row] = json.loads(run_query_json(sql, ArchiveCore(root)), parse_constant=refuse)
    assert (row["up"], row["down"], row["nan"]) == ("Infinity", "-Infinity", "NaN")
    assert row["listed"] == ["Infinity", 2.5] and row["text"] == 'NaN and "Infinity"'
    assert row["price"] == 220.51


def test_run_query_when_root_holds_only_bookkeeping_files_gives_the_empty_view(tmp_path):
    root = tmp_path / "archive"
    archive_at(root).core.books.enable()  # a write-once archive with nothing compacted yet
    (root / ".skewtape-archive.lock").write_text("")
    answer = run_query("SELECT count(*) AS n FROM ticks", ArchiveCore(root))
    assert answer.column("n").to_pylist() == [0]


def test_run_query_when_root_holds_a_killed_writers_marker_temp_gives_the_empty_view(tmp_path):
    root = tmp_path / "archive"
    root.mkdir()
    (root / "._skewtape_archive.json.4242.skewtape-tmp").write_text("{")  # killed mid-write
    answer = run_query("SELECT count(*) AS n FROM ticks", ArchiveCore(root))
    assert answer.column("n").to_pylist() == [0]


@pytest.mark.parametrize("holding", [[], [".hidden"], [".skewtape-staging"]])
def test_run_query_when_root_is_an_empty_folder_refuses_naming_it(tmp_path, holding):
    root = tmp_path / "archive"
    root.mkdir()
    for name in holding:
        (root / name).mkdir()
    with pytest.raises(ConfigError, match="expected a tick archive root") as info:
        run_query("SELECT 1", ArchiveCore(root))
    assert str(root) in str(info.value)
    assert sorted(p.name for p in root.iterdir()) == holding  # nothing created


def test_run_query_when_one_archive_is_given_twice_refuses_naming_both(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    again = tmp_path / "again" / ".." / root.name
    (tmp_path / "again").mkdir()
    with pytest.raises(ConfigError, match="given twice") as info:
        run_query("SELECT count(*) FROM ticks", [ArchiveCore(root), ArchiveCore(again)])
    assert str(root) in str(info.value) and str(again) in str(info.value)
    core = ArchiveCore(root)
    for twice in ([core, core], [core, core.waiting(5)]):  # one object, or a copy of it
        with pytest.raises(ConfigError, match="given twice"):
            run_query("SELECT count(*) FROM ticks", twice)


def test_run_query_when_sql_is_not_utf8_refuses_naming_it(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    sql = "SELECT '\udcff'"  # what Python makes of a byte the command line cannot decode
    with pytest.raises(ConfigError, match="not valid UTF-8 text"):
        run_query(sql, ArchiveCore(root))


@pytest.mark.parametrize("sql", [None, 5, b"SELECT 1"])
def test_run_query_when_sql_is_no_text_refuses_saying_so(tmp_path, no_fsync, sql):
    """A query that is no str was refused as 'not valid UTF-8 text', the wrong reason."""
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    for unrestricted in (False, True):
        with pytest.raises(ConfigError, match=r"^query = .*: expected SQL text \(a str\)$"):
            run_query(sql, ArchiveCore(root), QueryOptions(unrestricted=unrestricted))


def test_run_query_when_root_is_not_an_archive_refuses_naming_it(tmp_path):
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "notes.txt").write_text("x")
    with pytest.raises(ConfigError, match=r"_skewtape_archive\.json") as info:
        run_query("SELECT 1", ArchiveCore(tmp_path / "data"))
    assert str(tmp_path / "data") in str(info.value)


def test_run_query_json_when_statement_has_no_rows_or_parameters_answers_them(tmp_path):
    root, expected = _ns_archive(tmp_path)
    assert (
        run_query_json("SET threads = 1", ArchiveCore(root), QueryOptions(unrestricted=True))
        == "[]"
    )
    sql = "SELECT ts, 1 AS _skewtape_row FROM ticks WHERE symbol = ? ORDER BY ts"
    rows = json.loads(run_query_json(sql, ArchiveCore(root), QueryOptions(parameters=["AMZN"])))
    assert [(r["ts"], r["_skewtape_row"]) for r in rows] == [(ts, 1) for ts in expected]
    assert run_query_text(sql, ArchiveCore(root), QueryOptions(parameters=["NONE"])).rows == []


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"threads": 0}, "threads"),
        ({"threads": "4"}, "threads"),
        ({"parameters": "AMZN"}, "parameters"),
        ({"unrestricted": "yes"}, "unrestricted"),
        ({"as_of": 1.5}, "as_of"),
    ],
)
def test_query_options_when_a_value_is_wrong_refuses_naming_it_before_any_query(options, named):
    with pytest.raises(ConfigError, match=rf"^{named} = "):
        QueryOptions(**options)


@pytest.mark.parametrize("given", ["path", "list holding a path"])
def test_run_query_when_given_a_path_not_an_archive_core_refuses_naming_it(tmp_path, given):
    root = build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1])
    archives = root if given == "path" else [ArchiveCore(root), str(root)]
    with pytest.raises(
        ConfigError, match=r"an archive's core \(Archive\(root\)\.core\)"
    ) as refused:
        run_query("SELECT count(*) FROM ticks", archives)
    assert str(root) in str(refused.value)
    with pytest.raises(ConfigError, match="at least one"):
        run_query("SELECT count(*) FROM ticks", [])


@pytest.mark.parametrize(
    ("call", "named"),
    [
        (lambda core: run_query("SELECT 1", 5), "archives = 5"),
        (lambda core: run_query_text("SELECT 1", None), "archives = None"),
        (lambda core: run_query("SELECT 1", core, "threads=1"), "options = 'threads=1'"),
        (lambda core: run_query_json("SELECT 1", core, 4), "options = 4"),
        (lambda core: ticks_view_sql(core, name=5), "name = 5"),
        (lambda core: open_ticks_view(duckdb.connect(), core, narrow="AMZN"), "narrow = 'AMZN'"),
    ],
)
def test_query_entry_points_given_an_argument_of_another_type_refuse_naming_it(
    tmp_path, call, named
):
    """Each was a bare TypeError or AttributeError."""
    core = ArchiveCore(build_archive(tmp_path, as_of=AS_OF, days=DAYS[:1]))
    with pytest.raises(ConfigError, match=named):
        call(core)


def test_query_options_when_built_fix_parameters_and_the_same_options_serve_every_form(tmp_path):
    root, expected = _ns_archive(tmp_path)
    given = ["AMZN"]
    options = QueryOptions(parameters=given, threads=1)
    given.append("changed after")
    assert options.parameters == ("AMZN",)
    sql = "SELECT ts FROM ticks WHERE symbol = ? ORDER BY ts"
    assert run_query(sql, ArchiveCore(root), options).num_rows == len(expected)
    assert [
        r["ts"] for r in json.loads(run_query_json(sql, ArchiveCore(root), options))
    ] == expected
    assert run_query_text(sql, ArchiveCore(root), options).rows == [(ts,) for ts in expected]


@pytest.mark.parametrize("run", [run_query, run_query_text], ids=["arrow", "text"])
def test_run_query_when_a_writer_removes_a_file_the_view_names_answers_from_a_fresh_view(
    tmp_path, no_fsync, monkeypatch, run
):
    """DuckDB could not open a hot file re-tiering and pruning had just removed ("No files
    found"): a query looks again, as a read does."""
    from skewtape_pipeline.ticks.archive.ops import query

    root = build_archive(tmp_path, as_of=STAGE_1)
    count = "SELECT count(*) AS n, sum(quantity) AS q FROM ticks"
    expected = run(count, ArchiveCore(root))
    original = query._connect

    def racing(*args, **kwargs):
        monkeypatch.setattr(query, "_connect", original)
        con = original(*args, **kwargs)  # the view names today's hot files
        writer = Archive(root, policy=POLICY, audit_log=None)
        writer.retier(as_of=STAGE_1)
        writer.versions.prune(keep_last=1)  # the moved hot files are removed
        return con

    monkeypatch.setattr(query, "_connect", racing)
    assert run(count, ArchiveCore(root)) == expected


def test_query_when_ctrl_c_comes_during_a_long_statement_raises_keyboard_interrupt(tmp_path):
    """Ctrl-C stops the statement (``con.interrupt()``) and is raised as the KeyboardInterrupt
    it is; before, DuckDB noticed it only when its long statement ended (minutes later) and
    raised its own RuntimeError("Query interrupted") instead."""
    archive = Archive(build_archive(tmp_path, as_of=STAGE_1), policy=POLICY)
    slow = "SELECT count(*) FROM range(2000000000) t(i) WHERE md5(i::VARCHAR) LIKE '%abc%'"
    ctrl_c = threading.Timer(1.0, os.kill, (os.getpid(), signal.SIGINT))
    ctrl_c.start()
    try:
        with pytest.raises(KeyboardInterrupt):
            archive.query(slow)
    finally:
        ctrl_c.cancel()
    assert archive.query("SELECT count(*) AS n FROM ticks").column("n").to_pylist()[0] > 0

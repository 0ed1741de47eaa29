"""Reads and writes that cost what they touch: ``Archive.read`` straight from the files the
catalog and the hot index name (row for row the ``ticks`` view's answer), a commit that reads
what it changed, and the read API's refusals."""

from __future__ import annotations

import os
import sys
from dataclasses import replace
from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    ConfigError,
    DamagedFileError,
    NotAnArchiveError,
    SkewtapeError,
    TickFormatError,
    UnknownSymbolError,
)
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops import reader
from skewtape_pipeline.ticks.archive.ops.compact import (
    commit_compaction,
    compact_symbol_day,
    is_unchanged,
)
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.integrity import verify_archive
from skewtape_pipeline.ticks.archive.ops.query import open_ticks_view, run_query
from skewtape_pipeline.ticks.archive.ops.read_plan import VIEW_COLUMNS
from skewtape_pipeline.ticks.archive.ops.reader import SIDE_TYPE, view_select
from skewtape_pipeline.ticks.archive.store import hot_index
from skewtape_pipeline.ticks.archive.store.catalog import CatalogStore, file_rows
from skewtape_pipeline.ticks.archive.store.layout import partition_file
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline.ticks.encode.model import TickBatch
from skewtape_pipeline_tests.ticks.archive.test_integrity import flip_bit_in_data_page, tier_file
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    SYMBOLS,
    build_archive,
    day_ticks,
    expected_rows,
    racy_rule_off,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at


def view_read(archive: Archive, symbols=None, start=None, end=None, columns=None, as_of=None):
    """What ``Archive.read`` must return: the ``ticks`` view (DuckDB), filtered and ordered."""
    picked = list(columns or VIEW_COLUMNS)
    wanted = [symbols] if isinstance(symbols, str) else symbols
    wanted = None if wanted is None else sorted(set(wanted))
    sql, parameters = view_select(picked, wanted, start, end)
    con = duckdb.connect()
    try:
        con.execute("SET TimeZone = 'UTC'")
        open_ticks_view(con, archive.core, as_of=as_of)
        return con.sql(sql, params=parameters or None).to_arrow_table()
    finally:
        con.close()


QUERIES = [
    {},
    {"symbols": ["ES"]},
    {"symbols": "CL/F", "start": DAYS[1], "end": DAYS[3]},
    {"symbols": ["ES", "KX-25MAR"], "start": DAYS[1], "end": DAYS[1], "columns": ["ts", "price"]},
    {"start": DAYS[4], "columns": ["symbol", "date", "tier", "side", "quantity"]},
    {"symbols": ["ES"], "columns": ["year", "month", "ts"]},
]


def assert_reads_as_the_view(archive: Archive, as_of=None, queries=QUERIES) -> None:
    """``Archive.read`` returns what the view does (schema, rows, order) for each query; a
    query naming a symbol the archive holds no day of (as of the version read, nor now) is
    refused naming it."""
    for query in queries:
        expected = view_read(archive, **query, as_of=as_of)
        try:
            got = archive.read(**query, as_of=as_of)
        except UnknownSymbolError as exc:
            assert view_read(archive, exc.symbol, as_of=as_of).num_rows == 0, query
            assert view_read(archive, exc.symbol).num_rows == 0, query
            continue
        assert sides_as_text(got).schema == expected.schema, query
        assert sides_as_text(got).equals(expected), (query, as_of)


def sides_as_text(table: pa.Table) -> pa.Table:
    """``table`` as the view types it: its ``side``, a dictionary as a read returns it
    (checked), as plain strings."""
    if "side" not in table.column_names:
        return table
    i = table.schema.get_field_index("side")
    assert table.schema.field(i).type == SIDE_TYPE
    return table.set_column(i, "side", table.column(i).cast(pa.string()))


@pytest.fixture
def hot(tmp_path, no_fsync) -> Path:
    root = build_archive(tmp_path, as_of=STAGE_1)
    commit_compaction(archive_at(root).core)
    return root


# --- Archive.read is the view's answer -----------------------------------------------------------


def test_read_when_days_move_through_every_tier_equals_the_view_now_and_as_of_each_version(hot):
    handle = Archive(hot, policy=POLICY, audit_log=None)  # one handle throughout: revalidates
    assert_reads_as_the_view(handle)
    handle.retier(as_of=STAGE_1)  # hot, warm and cold
    assert {"HOT", WARM, COLD} <= set(handle.read(columns=["tier"])["tier"].to_pylist())
    assert_reads_as_the_view(handle)
    key = ("ES", DAYS[1])  # recompacted: its new hot file hides the consolidated copy
    batch = day_ticks(*key).take(pa.array([0, 2, 4]))
    compact_symbol_day(
        handle.core,
        batch,
        SymbolDayWrite(symbol=key[0], day=key[1], age_days=(STAGE_1 - key[1]).days),
    )
    commit_compaction(handle.core)
    assert handle.read(["ES"], start=key[1], end=key[1]).num_rows == 3
    assert_reads_as_the_view(handle)
    handle.withdraw([("CL/F", DAYS[2])])
    handle.remove([("KX-25MAR", DAYS[0]), ("KX-25MAR", DAYS[5])])
    assert_reads_as_the_view(handle)
    handle.retier(as_of=STAGE_2)  # every day cold, withdrawn days purged
    handle.prune()
    assert_reads_as_the_view(handle)
    fresh = Archive(hot, policy=POLICY, audit_log=None)
    for number in range(1, VersionLog(hot).count() + 1):
        assert_reads_as_the_view(fresh, as_of=number)
        assert_reads_as_the_view(handle, as_of=number)


def test_read_when_timestamps_tie_orders_them_by_price_quantity_and_side(tmp_path, no_fsync):
    root = tmp_path / "archive"
    day = DAYS[0]
    start = (day - date(1970, 1, 1)).days * 86_400 * 10**9
    from skewtape_pipeline.ticks.encode.model import TickBatch, TickSchema

    batch = TickBatch.from_units(
        [start, start, start, start + 1], [5, 3, 3, 1], [1, 2, 1, 1], [1, 0, 1, 0],
        TickSchema(price_scale=2),
    )  # fmt: skip
    compact_symbol_day(
        archive_at(root).core, batch, SymbolDayWrite(symbol="T", day=day, age_days=1)
    )
    handle = Archive(root, audit_log=None)
    got = handle.read(["T"], columns=["price", "quantity", "side"])
    assert sides_as_text(got).equals(
        view_read(handle, ["T"], columns=["price", "quantity", "side"])
    )
    assert got["quantity"].to_pylist() == [1, 2, 1, 1]  # stored order was 5, 3, 3 at one ts


def test_read_batch_when_given_symbols_equals_a_read_of_each(hot):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    handle.retier(as_of=STAGE_1)
    got = handle.read_batch(["KX-25MAR", "ES"], start=DAYS[1], columns=["date", "ts"])
    assert list(got) == ["KX-25MAR", "ES"]
    for symbol, table in got.items():
        assert table.equals(handle.read([symbol], start=DAYS[1], columns=["date", "ts"]))


# --- no wrong answer -----------------------------------------------------------------------------


def test_read_when_a_hot_file_changed_behind_the_archives_back_refuses_naming_it(hot):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    handle.read(["ES"], start=DAYS[0], end=DAYS[0])  # verified and kept by the handle
    path = partition_file(hot, "ES", DAYS[0])
    flip_bit_in_data_page(path)
    with pytest.raises(DamagedFileError, match="sha256") as caught:
        handle.read(["ES"], start=DAYS[0], end=DAYS[0])
    assert str(path) in str(caught.value)
    with pytest.raises(DamagedFileError):
        Archive(hot, policy=POLICY, audit_log=None).read(["ES"])


def replaced_on_first_call(monkeypatch, name: str, root: Path, day: date) -> TickBatch:
    """Make the reader's first call of its ``name`` (a function it imports) recompact ES on
    ``day`` with other ticks first, as a writer in another process would at that moment;
    return the new ticks."""
    writer = Archive(root, policy=POLICY, audit_log=None)
    ticks = day_ticks("KX-25MAR", day)  # other ticks, another count
    original = getattr(reader, name)

    def racing(*args, **kwargs):
        monkeypatch.setattr(reader, name, original)
        write = SymbolDayWrite(symbol="ES", day=day, age_days=(STAGE_1 - day).days)
        writer.compact_symbol_day(ticks, write)
        return original(*args, **kwargs)

    monkeypatch.setattr(reader, name, racing)
    return ticks


@pytest.mark.parametrize(
    "when", ["file_reader", "stamps_of"], ids=["after-verifying", "before-verifying"]
)
def test_read_when_a_writer_replaces_the_hot_file_under_it_returns_the_new_ticks_whole(
    hot, monkeypatch, when
):
    """Never the new file's bytes read with the old one's footer (rows of neither), never
    the file called damaged: the read looks again and reads the day as it is now."""
    handle = Archive(hot, policy=POLICY, audit_log=None)
    before = handle.read(["ES"], start=DAYS[0], end=DAYS[0])  # the handle keeps its footer
    ticks = replaced_on_first_call(monkeypatch, when, hot, DAYS[0])
    got = handle.read(["ES"], start=DAYS[0], end=DAYS[0])
    assert sides_as_text(got).equals(view_read(handle, ["ES"], DAYS[0], DAYS[0]))
    assert got.num_rows == len(ticks.ts_ns) != before.num_rows


def test_read_as_of_when_a_writer_links_the_kept_copy_under_it_reads_it(hot, monkeypatch):
    """A hard link added to a version's kept hot file (a compaction keeping it again) moves its
    status-change time, not its bytes: not a file changed under the read."""
    handle = Archive(hot, policy=POLICY, audit_log=None)
    first = VersionLog(hot).latest().version
    handle.compact_symbol_day(
        day_ticks("KX-25MAR", DAYS[0]),
        SymbolDayWrite(symbol="ES", day=DAYS[0], age_days=(STAGE_1 - DAYS[0]).days),
    )
    expected = view_read(handle, ["ES"], DAYS[0], DAYS[0], as_of=first)
    original = reader.file_reader

    def linking(path):
        monkeypatch.setattr(reader, "file_reader", original)
        os.link(path, Path(path).with_name("another-link"))
        return original(path)

    monkeypatch.setattr(reader, "file_reader", linking)
    got = handle.read(["ES"], start=DAYS[0], end=DAYS[0], as_of=first)
    assert sides_as_text(got).equals(expected)


def test_read_as_of_when_a_writer_replaces_the_kept_copy_with_the_same_bytes_reads_it(
    hot, monkeypatch
):
    """A day compacted to other ticks and back: the version keeps its copy by linking the new
    hot file of the same bytes in its place (another inode), under a read of that copy."""
    handle = Archive(hot, policy=POLICY, audit_log=None)
    first = VersionLog(hot).latest().version
    expected = view_read(handle, ["ES"], DAYS[0], DAYS[0], as_of=first)
    handle.read(["ES"], start=DAYS[0], end=DAYS[0], as_of=first)  # its copy verified, kept
    writer = Archive(hot, policy=POLICY, audit_log=None)
    write = SymbolDayWrite(symbol="ES", day=DAYS[0], age_days=(STAGE_1 - DAYS[0]).days)
    original = reader.file_reader

    def racing(path):
        monkeypatch.setattr(reader, "file_reader", original)
        writer.compact_symbol_day(day_ticks("KX-25MAR", DAYS[0]), write)
        writer.compact_symbol_day(day_ticks("ES", DAYS[0]), write)  # the first ticks again
        return original(path)

    monkeypatch.setattr(reader, "file_reader", racing)
    got = handle.read(["ES"], start=DAYS[0], end=DAYS[0], as_of=first)
    assert sides_as_text(got).equals(expected)


def test_recording_a_kept_copy_removes_what_a_killed_writer_left_beside_it(hot):
    import subprocess

    from skewtape_pipeline.ticks.archive.store.version_files import hot_blobs_dir

    handle = Archive(hot, policy=POLICY, audit_log=None)
    write = SymbolDayWrite(symbol="ES", day=DAYS[0], age_days=(STAGE_1 - DAYS[0]).days)
    handle.compact_symbol_day(day_ticks("KX-25MAR", DAYS[0]), write)  # a copy kept
    day = f"symbol=ES/year={DAYS[0].year}/month={DAYS[0].month:02d}/date={DAYS[0].isoformat()}"
    folder = hot_blobs_dir(hot) / day
    assert any(folder.glob("*.pq"))
    dead = subprocess.Popen(["true"])
    dead.wait()
    left = folder / f".{'0' * 64}.pq.{dead.pid}{fsio.TEMP_MARKER}"
    live = folder / f".a-live-writers-copy.pq.{os.getpid()}{fsio.TEMP_MARKER}"
    for path in (left, live):
        path.write_bytes(b"half")
    handle.compact_symbol_day(day_ticks("NQ", DAYS[0]), write)  # another copy kept there
    assert not left.exists() and live.exists()


@pytest.mark.parametrize("cached", [False, True], ids=["footer-unread", "footer-kept"])
def test_read_when_retiering_and_pruning_remove_its_consolidated_file_reads_the_new_one(
    hot, monkeypatch, cached
):
    """The file the read planned is gone (its day rewritten elsewhere): not a raw
    FileNotFoundError, not a file called damaged; the read looks again."""
    handle = Archive(hot, policy=POLICY, audit_log=None)
    handle.retier(as_of=STAGE_1)
    if cached:
        handle.read(["ES"])
    writer = Archive(hot, policy=POLICY, audit_log=None)
    write = SymbolDayWrite(symbol="ES", day=DAYS[1], age_days=(STAGE_1 - DAYS[1]).days)
    original = reader.ArchiveReader._consolidated_tables

    def racing(self, *args, **kwargs):
        monkeypatch.setattr(reader.ArchiveReader, "_consolidated_tables", original)
        writer.compact_symbol_day(day_ticks("KX-25MAR", DAYS[1]), write)
        writer.retier(as_of=STAGE_1)
        writer.versions.prune(keep_last=1)  # the file the read planned is removed
        return original(self, *args, **kwargs)

    monkeypatch.setattr(reader.ArchiveReader, "_consolidated_tables", racing)
    got = handle.read(["ES"])
    assert sides_as_text(got).equals(view_read(handle, ["ES"]))


def test_read_when_retiering_commits_between_its_looks_at_catalog_and_index_misses_no_day(
    hot, monkeypatch
):
    """Re-tiering commits the catalog, then removes the moved hot files: a read that saw the
    catalog before and the hot index after saw neither copy of the moved days."""
    handle = Archive(hot, policy=POLICY, audit_log=None)
    writer = Archive(hot, policy=POLICY, audit_log=None)
    looks: list[str] = []

    def between_the_two_looks(name: str) -> None:
        original = getattr(reader.ArchiveReader, name)

        def look(self):
            if len(looks) == 1:
                writer.retier(as_of=STAGE_1)
            looks.append(name)
            return original(self)

        monkeypatch.setattr(reader.ArchiveReader, name, look)

    between_the_two_looks("_current_catalog")
    between_the_two_looks("_current_index")
    got = handle.read()
    assert len(looks) >= 2
    monkeypatch.undo()
    assert sides_as_text(got).equals(view_read(handle))


@pytest.mark.parametrize("tier", [WARM, COLD])
def test_read_when_a_consolidated_file_changed_behind_the_archives_back_refuses(hot, tier):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    handle.retier(as_of=STAGE_1)
    handle.read()
    path = tier_file(hot, tier)
    flip_bit_in_data_page(path)
    with pytest.raises(DamagedFileError) as caught:
        handle.read()
    assert str(path) in str(caught.value)


def test_read_when_the_catalog_places_a_day_on_rows_of_another_refuses_naming_the_file(hot):
    Archive(hot, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    store = CatalogStore(hot)
    catalog = store.read()
    file = next(iter(catalog.files))
    spans = sorted(file_rows(catalog, file).items(), key=lambda item: item[1][0])
    (first, _), (second, _) = spans[0], spans[1]  # neighbours in the file
    moved = {
        first: replace(catalog.partitions[first], rows=catalog.partitions[first].rows + 1),
        second: replace(catalog.partitions[second], rows=catalog.partitions[second].rows - 1),
    }  # the first day's rows now end one row into the next day's
    store.write(replace(catalog, partitions={**catalog.partitions, **moved}))
    with pytest.raises(CatalogMismatchError) as caught:
        Archive(hot, policy=POLICY, audit_log=None).read([first[0]], first[1], first[1])
    assert file.split("/")[-1] in str(caught.value)
    assert "rebuild-catalog" in str(caught.value)


def test_read_when_each_day_is_a_row_group_checks_it_by_statistics_and_refuses_a_renamed_day(hot):
    one_per_group = {tier: replace(getattr(POLICY, tier), consolidated_row_group_size=1)
                     for tier in ("warm", "cold")}  # fmt: skip
    policy = replace(POLICY, **one_per_group)
    handle = Archive(hot, policy=policy, audit_log=None)
    handle.retier(as_of=STAGE_2)
    assert_reads_as_the_view(handle)  # every consolidated day read without its key columns
    store = CatalogStore(hot)
    catalog = store.read()
    file = next(iter(catalog.files))
    (symbol, day), (first_row, rows) = max(file_rows(catalog, file).items(), key=lambda i: i[1])
    footer = pq.read_metadata(handle.tiers.resolve(file))
    starts = [
        sum(footer.row_group(g).num_rows for g in range(i)) for i in range(footer.num_row_groups)
    ]
    assert first_row in starts and footer.row_group(starts.index(first_row)).num_rows == rows
    later = day + timedelta(days=400)  # still the file's last symbol-day in (symbol, date) order
    renamed = replace(catalog.partitions[(symbol, day)], date=later)
    partitions = {k: p for k, p in catalog.partitions.items() if k != (symbol, day)}
    store.write(replace(catalog, partitions={**partitions, (symbol, later): renamed}))
    with pytest.raises(CatalogMismatchError) as caught:  # its row group says another day
        Archive(hot, policy=policy, audit_log=None).read([symbol], later, later)
    assert file.split("/")[-1] in str(caught.value)


def test_read_when_a_hot_file_the_index_lists_is_gone_names_it_and_the_repair(hot):
    path = partition_file(hot, "ES", DAYS[0])
    path.unlink()
    with pytest.raises(SkewtapeError, match="rebuild-catalog") as caught:
        Archive(hot, policy=POLICY, audit_log=None).read(["ES"])
    assert str(path) in str(caught.value)
    assert any(str(path) in p for p in verify_archive(Archive(hot, policy=POLICY).core).problems)


# --- cost follows what is read -------------------------------------------------------------------


class Touches:
    """Files opened (Python's ``open`` audit event), folders listed (``os.scandir``,
    ``os.listdir``) and paths stat'ed (``os.stat``) while on."""

    installed = False
    current: Touches | None = None

    def __init__(self, monkeypatch):
        self.opened: list[str] = []
        self.listed: list[str] = []
        self.stats: list[str] = []
        if not Touches.installed:
            sys.addaudithook(Touches._hook)
            Touches.installed = True
        real_stat = os.stat

        def stat(path, *args, **kwargs):
            if Touches.current is self:
                self.stats.append(os.fspath(path) if not isinstance(path, int) else "<fd>")
            return real_stat(path, *args, **kwargs)

        monkeypatch.setattr(os, "stat", stat)

    @staticmethod
    def _hook(event: str, args: tuple) -> None:
        me = Touches.current
        if me is None:
            return
        if event == "open" and isinstance(args[0], str | bytes | os.PathLike):
            me.opened.append(os.fsdecode(args[0]))
        elif event in ("os.scandir", "os.listdir"):
            me.listed.append(str(args[0]))

    def __enter__(self) -> Touches:
        Touches.current = self
        return self

    def __exit__(self, *exc) -> None:
        Touches.current = None

    def count(self) -> tuple[int, int, int]:
        return len(self.opened), len(self.listed), len(self.stats)


def test_read_of_one_symbol_day_opens_only_that_file(hot, monkeypatch):
    racy_rule_off(monkeypatch)
    handle = Archive(hot, policy=POLICY, audit_log=None)
    handle.read(["ES"], start=DAYS[0], end=DAYS[0])  # the handle reads the catalog and index
    target = str(partition_file(hot, "ES", DAYS[0]))
    with Touches(monkeypatch) as touched:
        table = handle.read(["ES"], start=DAYS[0], end=DAYS[0], columns=["ts", "price"])
    assert table.num_rows == len(day_ticks("ES", DAYS[0]))
    assert touched.opened == [target]  # no other data file, no bookkeeping read again
    assert touched.listed == []  # no folder listed
    archive_files = [s for s in touched.stats if "symbol=" in s]
    assert archive_files == [target]  # stamped once, for the trust check
    with Touches(monkeypatch) as touched:  # a fresh handle: bookkeeping, then that one file
        Archive(hot, policy=POLICY, audit_log=None).read(["ES"], start=DAYS[0], end=DAYS[0])
    assert [p for p in touched.opened if "symbol=" in p] == [target]
    assert touched.listed == [str(hot)] or touched.listed == []  # the root checked once


def grown(folder: Path, n: int, batches: int = 10) -> Path:
    """An archive of ``n`` thin hot symbol-days, committed in ``batches`` versions."""
    root = folder / "archive"
    archive = archive_at(root, POLICY)
    per = n // batches
    for b in range(batches):
        for i in range(per):
            day = DAYS[0] + timedelta(days=b)
            compact_symbol_day(
                archive.core,
                day_ticks("ES", day),
                SymbolDayWrite(symbol=f"S{i:04d}", day=day, age_days=1),
            )
        commit_compaction(archive.core)
    return root


def test_writing_one_more_symbol_day_touches_as_many_files_for_n_and_10n(tmp_path, monkeypatch):
    monkeypatch.setattr(os, "fsync", lambda fd: None)
    counts = []
    for n in (20, 200):
        root = grown(tmp_path / str(n), n)
        archive = archive_at(root, POLICY)
        day = DAYS[0] + timedelta(days=30)
        with Touches(monkeypatch) as touched:
            compact_symbol_day(
                archive.core,
                day_ticks("ES", day),
                SymbolDayWrite(symbol="NEW", day=day, age_days=1),
            )
            commit_compaction(archive.core)
        assert not [p for p in touched.listed if Path(p) == root], "the root was listed"
        counts.append(touched.count())
    assert counts[0] == counts[1], counts
    assert VersionLog(tmp_path / "200" / "archive").count() == 11


def counting_decodes(monkeypatch) -> list[int]:
    """The rows of every part of a hot index base decoded from now on, appended as decoded."""
    decoded: list[int] = []
    real = hot_index._decode

    def counting(path, read):
        out = real(path, read)
        if isinstance(out, pa.Table):
            decoded.append(out.num_rows)
        return out

    monkeypatch.setattr(hot_index, "_decode", counting)
    return decoded


def test_committing_a_new_day_decodes_no_row_of_the_hot_index_base(tmp_path, monkeypatch):
    root = grown(tmp_path, 200)
    folded = hot_index.fold(hot_index.HotIndex.read(root))  # every symbol-day in the base
    assert folded.log_lines == 0 and len(folded.entries()) == 200
    decoded = counting_decodes(monkeypatch)
    archive = archive_at(root, POLICY)
    day = DAYS[0] + timedelta(days=30)
    for symbol in ("S0001", "NEW"):
        compact_symbol_day(
            archive.core, day_ticks("ES", day), SymbolDayWrite(symbol=symbol, day=day, age_days=1)
        )
    commit_compaction(archive.core)
    assert sum(decoded) == 0, decoded  # its footer says the base holds no such day
    assert VersionLog(root).count() == 11
    index = hot_index.HotIndex.read(root)
    assert index is not None and len(index.entries()) == 202 and sum(decoded) == 200


def test_recompacting_changed_days_decodes_as_much_of_the_hot_index_for_1_as_for_3(
    tmp_path, monkeypatch
):
    rows = []
    for rewritten in (["S0001"], ["S0001", "S0002", "S0003"]):
        root = grown(tmp_path / str(len(rewritten)), 200)
        hot_index.fold(hot_index.HotIndex.read(root))  # every symbol-day in the base
        archive = archive_at(root, POLICY)
        day, changed = DAYS[0], day_ticks("NQ", DAYS[0])  # other ticks: each one is rewritten
        with monkeypatch.context() as patched:
            decoded = counting_decodes(patched)
            for symbol in rewritten:
                compact_symbol_day(
                    archive.core, changed, SymbolDayWrite(symbol=symbol, day=day, age_days=1)
                )
            commit_compaction(archive.core)
        rows.append(sum(decoded))
        index = hot_index.HotIndex.read(root)
        assert index is not None
        for symbol in rewritten:  # each rewrite recorded
            assert index.get((symbol, day)).sha256 == sha256_file(partition_file(root, symbol, day))
    assert rows[0] == rows[1], rows  # what a rewrite reads of the index does not add up


def test_query_names_the_indexed_files_without_listing_the_hot_tier(hot, monkeypatch):
    core = Archive(hot, policy=POLICY, audit_log=None).core
    with Touches(monkeypatch) as touched:
        table = run_query("SELECT count(*) AS n FROM ticks", core)
    assert table["n"].to_pylist() == [len(expected_rows())]
    assert not [p for p in touched.listed if "symbol=" in p]  # no folder of the hot tier listed


# --- the hot index -------------------------------------------------------------------------------


def test_archive_without_a_hot_index_reads_by_listing_and_its_first_write_builds_one(
    hot, monkeypatch
):
    records = CatalogStore(hot).hot_records()
    hot_index.index_path(hot).unlink()  # as written before the index existed
    lines = [{"path": rel, "sha256": r.sha256, "size": r.size} for rel, r in records.items()]
    hot_index.log_path(hot).write_bytes(b"")
    hot_index.append_lines(hot, lines)
    handle = Archive(hot, policy=POLICY, audit_log=None)
    assert_reads_as_the_view(handle)
    assert verify_archive(handle.core).ok
    day = DAYS[-1]
    with Touches(monkeypatch) as touched:
        for symbol in SYMBOLS:  # held already (its record in the log): nothing rewritten
            again = SymbolDayWrite(symbol=symbol, day=day, age_days=1)
            assert is_unchanged(compact_symbol_day(handle.core, day_ticks(symbol, day), again))
    log = str(hot_index.log_path(hot))
    assert touched.opened.count(log) == 1  # the log's records read once, not once a day
    assert hot_index.HotIndex.read(hot) is None
    compact_symbol_day(
        handle.core, day_ticks("NEW", day), SymbolDayWrite(symbol="NEW", day=day, age_days=1)
    )
    index = hot_index.HotIndex.read(hot)
    assert index is not None and len(index.entries()) == len(SYMBOLS) * len(DAYS) + 1
    assert_reads_as_the_view(handle)
    assert verify_archive(handle.core).ok


def test_hot_index_when_a_fold_is_cut_short_reads_the_same_and_skips_folded_lines(hot, monkeypatch):
    index = hot_index.HotIndex.read(hot)
    before = [(e.key, e.sha256, e.present) for e in index.entries(present_only=False)]
    real = fsio.atomic_write_bytes

    def crash_on_log(target, data):
        if Path(target) == hot_index.log_path(hot):
            raise OSError("crash")
        real(target, data)

    monkeypatch.setattr(fsio, "atomic_write_bytes", crash_on_log)
    with pytest.raises(OSError, match="crash"):
        hot_index.fold(index)
    monkeypatch.setattr(fsio, "atomic_write_bytes", real)
    again = hot_index.HotIndex.read(hot)
    assert [(e.key, e.sha256, e.present) for e in again.entries(present_only=False)] == before
    assert again.seq == index.seq and again.changes_since(index.mark) == []
    assert_reads_as_the_view(Archive(hot, policy=POLICY, audit_log=None))


def test_hot_index_when_a_copy_gives_its_log_the_folded_logs_inode_reads_every_line(hot, tmp_path):
    """A copy of the archive may give its log the inode number of the log the base folded (a
    number freed when the fold replaced it): its lines are new ones, none folded."""
    log = hot_index.log_path(hot)
    kept = tmp_path / "folded-log"
    os.link(log, kept)  # the folded log's inode kept for the "copy"
    hot_index.fold(hot_index.HotIndex.read(hot))
    day = DAYS[-1]
    compact_symbol_day(
        archive_at(hot, POLICY).core, day_ticks("N", day), SymbolDayWrite("N", day, age_days=1)
    )
    with open(kept, "r+b") as copy:  # the copy's log: the new lines, in that inode
        copy.truncate(0)
        copy.write(log.read_bytes())
    os.replace(kept, log)
    assert hot_index.HotIndex.read(hot).present(("N", day)) is not None
    handle = Archive(hot, policy=POLICY, audit_log=None)
    assert handle.read(["N"]).num_rows == len(day_ticks("N", day))
    assert_reads_as_the_view(handle)


def test_hot_index_when_a_line_was_cut_short_the_next_append_cuts_it_off(hot):
    with open(hot_index.log_path(hot), "ab") as handle:
        handle.write(b'{"path": "symbol=X/year=2026/mo')  # a crash while appending
    assert verify_archive(Archive(hot, policy=POLICY).core).ok
    day = DAYS[-1]
    compact_symbol_day(
        archive_at(hot, POLICY).core,
        day_ticks("N", day),
        SymbolDayWrite(symbol="N", day=day, age_days=1),
    )
    assert hot_index.log_path(hot).read_bytes().endswith(b"\n")
    assert Archive(hot, policy=POLICY, audit_log=None).read(["N"]).num_rows == len(
        day_ticks("N", day)
    )


def test_hot_index_when_a_bit_of_its_base_pages_flipped_refuses_never_reads_other_entries(
    tmp_path,
):
    root = grown(tmp_path, 200)
    expected = hot_index.fold(hot_index.HotIndex.read(root)).entries(present_only=False)
    path = hot_index.index_path(root)
    raw = path.read_bytes()
    pages_end = len(raw) - 8 - int.from_bytes(raw[-8:-4], "little")  # the footer after them
    changed = []
    for offset in range(4, pages_end, 7):
        path.write_bytes(raw[:offset] + bytes([raw[offset] ^ 0x01]) + raw[offset + 1 :])
        try:
            entries = hot_index.HotIndex.read(root).entries(present_only=False)
        except TickFormatError as exc:
            assert str(exc).startswith(f"{path}: not a readable hot index")
            continue
        if entries != expected:
            changed.append(offset)
    assert changed == []


def test_rebuild_catalog_when_the_hot_index_is_damaged_builds_it_again(hot):
    hot_index.index_path(hot).write_bytes(b"not parquet")
    with pytest.raises(SkewtapeError, match="rebuild-catalog"):
        Archive(hot, policy=POLICY, audit_log=None).read()
    Archive(hot, policy=POLICY, audit_log=None).rebuild_catalog()
    assert_reads_as_the_view(Archive(hot, policy=POLICY, audit_log=None))
    assert verify_archive(Archive(hot, policy=POLICY).core).ok


# --- the read API's mistakes (issue 30, item 12) -------------------------------------------------


def test_read_when_the_folder_is_no_archive_raises_a_typed_error_naming_it(tmp_path):
    missing = tmp_path / "data" / "archiv"
    for call in (
        lambda a: a.symbols(),
        lambda a: a.read(["ES"]),
        lambda a: a.days("ES"),
        lambda a: a.query("SELECT count(*) FROM ticks"),
        lambda a: a.open_view(duckdb.connect()),
        lambda a: a.verify(),
    ):
        with pytest.raises(NotAnArchiveError, match=str(missing)):
            call(Archive(missing))
    (tmp_path / "stuff").mkdir()
    (tmp_path / "stuff" / "notes.txt").write_text("hello")
    with pytest.raises(NotAnArchiveError, match="stuff"):
        Archive(tmp_path / "stuff").read()


def test_read_when_a_symbol_is_unknown_names_it_and_the_nearest_known(hot):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    with pytest.raises(UnknownSymbolError, match="'ESS'") as caught:
        handle.read(["ESS"])
    assert caught.value.nearest[0] == "ES" and "nearest: ES" in str(caught.value)
    with pytest.raises(UnknownSymbolError, match="typo"):
        handle.read_batch(["ES", "typo"])
    empty = handle.read(["ES"], start=DAYS[-1] + timedelta(days=100))  # known, no ticks then
    assert empty.num_rows == 0 and empty.column_names == list(VIEW_COLUMNS)
    assert (
        sides_as_text(empty).schema
        == view_read(handle, ["ES"], start=DAYS[-1] + timedelta(days=100)).schema
    )


def test_read_when_one_of_several_symbols_is_unknown_names_it(hot):
    """Not a table of the others with the mistyped symbol left out."""
    handle = Archive(hot, policy=POLICY, audit_log=None)
    with pytest.raises(UnknownSymbolError, match="'ESS'"):
        handle.read(["ES", "ESS"])
    with pytest.raises(UnknownSymbolError, match="'ESS'"):
        handle.read(["ES", "ESS"], start=DAYS[0], end=DAYS[0])


def test_read_batch_when_given_a_generator_reads_every_symbol_it_yields(hot):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    listed = handle.read_batch(["ES", "KX-25MAR"])
    generated = handle.read_batch(s for s in ["ES", "KX-25MAR"])
    assert list(generated) == ["ES", "KX-25MAR"]
    assert all(generated[s].equals(listed[s]) for s in listed)


@pytest.mark.parametrize("symbols", [None, 5, [b"ES"]])
def test_read_batch_and_read_when_symbols_are_no_symbols_refuse_naming_them(hot, symbols):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    with pytest.raises(ConfigError, match="symbols"):
        handle.read_batch(symbols)
    if symbols is not None:
        with pytest.raises(ConfigError, match="symbols"):
            handle.read(symbols)


class Timestamp(datetime):
    """What a pandas ``Timestamp`` is to the reader: a ``datetime`` subclass."""


@pytest.mark.parametrize(
    "start",
    [
        DAYS[1],
        datetime(2026, 1, 30, 15, 0),
        datetime(2026, 1, 30, 23, 30, tzinfo=UTC),
        "2026-01-30",
        "2026-01-30T10:00:00Z",
        Timestamp(2026, 1, 30, tzinfo=UTC),
    ],
)
def test_read_when_days_are_dates_datetimes_iso_text_or_timestamps_takes_their_day(hot, start):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    expected = handle.read(["ES"], start=DAYS[1], end=DAYS[1])
    assert handle.read(["ES"], start=start, end=start).equals(expected)


@pytest.mark.parametrize("start", [42, "yesterday", 3.5, b"2026-01-30"])
def test_read_when_a_day_is_none_of_those_refuses_naming_it(hot, start):
    with pytest.raises(ConfigError, match="start"):
        Archive(hot, policy=POLICY, audit_log=None).read(["ES"], start=start)


def test_read_when_start_is_after_end_refuses_naming_both_instead_of_no_rows(hot):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    swapped = f"start {DAYS[1]} is after end {DAYS[0]}: no day lies between them"
    with pytest.raises(ConfigError, match=swapped):
        handle.read(["ES"], start=DAYS[1], end=DAYS[0])
    with pytest.raises(ConfigError, match=swapped):
        handle.read_batch(["ES"], start=str(DAYS[1]), end=DAYS[0])
    assert handle.read(["ES"], start=DAYS[0], end=DAYS[1]).num_rows > 0


def test_every_read_mistake_is_a_skewtape_error(hot, tmp_path):
    handle = Archive(hot, policy=POLICY, audit_log=None)
    for call in (
        lambda: handle.read(["nope"]),
        lambda: handle.read(columns=["nope"]),
        lambda: handle.read(start="never"),
        lambda: handle.read(as_of=999),
        lambda: handle.read([42]),
        lambda: Archive(tmp_path / "none").read(),
    ):
        with pytest.raises(SkewtapeError):
            call()

"""Every archive file checked against the record made when it was written: hot files recorded
too, verify-archive and retier checking them, query verifying a file whose stamp changed before
reading it, and query reading only the archive's own files, one SELECT at a time."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    ConfigError,
    DamagedFileError,
    LinkedStateFileError,
    TickFormatError,
)
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.integrity import verify_archive
from skewtape_pipeline.ticks.archive.ops.query import QueryOptions, run_query, run_query_text
from skewtape_pipeline.ticks.archive.store import trust
from skewtape_pipeline.ticks.archive.store.books import EVENT_RECOMPACT, EVENT_WRITE
from skewtape_pipeline.ticks.archive.store.catalog import (
    NOTE_MAX_BYTES,
    PUBLICATION_FILE,
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_LOCK_FILE, partition_file
from skewtape_pipeline.ticks.archive.store.placement import archive_state, scan_hot_files
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.archive.test_integrity import flip_bit_in_data_page, tier_file
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    SYMBOLS,
    audit_events,
    day_ticks,
    expected_rows,
    racy_rule_off,
    view_rows,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at

HOT_RECORDS = "_skewtape_hot_files.jsonl"
HOT_INDEX = "_skewtape_hot_index.pq"
SUM_SQL = "SELECT sum(quantity) AS q, sum(price) AS p FROM ticks"


def times_1000(path):
    """Overwrite ``path`` with valid Parquet of the same schema and metadata, every quantity
    multiplied by 1000 (what a careless or hostile writer could leave)."""
    table = pq.read_table(path)
    column = table.schema.get_field_index("quantity")
    scaled = pc.multiply(table["quantity"], 1000).cast(table.schema.field(column).type)
    table = table.set_column(column, table.schema.field(column), scaled)
    metadata = pq.read_metadata(path).metadata
    path.chmod(0o644)
    options = {"write_page_index": True, "write_page_checksum": True, "store_schema": False}
    with pq.ParquetWriter(path, table.schema, **options) as writer:
        writer.write_table(table)
        writer.add_key_value_metadata(metadata)


def flip_bit_in_page_index(path):
    """Flip one bit in the page index (between the last column chunk and the footer)."""
    meta = pq.read_metadata(path)
    data = bytearray(path.read_bytes())
    chunks = [c for g in range(meta.num_row_groups) for c in _columns(meta.row_group(g))]
    end = max((c.dictionary_page_offset or c.data_page_offset) + c.total_compressed_size
              for c in chunks)  # fmt: skip
    footer_start = len(data) - 8 - int.from_bytes(data[-8:-4], "little")
    assert footer_start - end > 8, "the file has a page index"
    data[(end + footer_start) // 2] ^= 0x04
    path.chmod(0o644)
    path.write_bytes(bytes(data))


def _columns(group):
    return [group.column(c) for c in range(group.num_columns)]


def live_hot(root):
    return archive_state(root).hot_live[0].path


# --- 1. hot files recorded and checked ----------------------------------------------------------


@pytest.mark.parametrize("full", [False, True])
def test_verify_archive_when_hot_file_rewritten_with_valid_parquet_reports_it(tiered, full):
    hot = live_hot(tiered)
    times_1000(hot)
    pq.ParquetFile(hot, page_checksum_verification=True).read()  # valid Parquet, pages intact
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY), full=full).problems
    kept = [p for folder in VersionLog(tiered).snapshot_dirs() for p in folder.rglob("*.pq")]
    [link] = [p for p in kept if p.samefile(hot)]  # the version's link: the same bytes
    assert problems and all(str(hot) in p or str(link) in p for p in problems)
    assert f"{trust.WRITTEN_BY_COMPACTION} recorded" in problems[0] and str(hot) in problems[0]
    same = f"{link}: the same file as {hot} (see there): not the bytes its name records"
    assert [p for p in problems if p.startswith(f"{same}; version(s) ")]


def test_verify_archive_full_when_page_index_bit_flipped_reports_the_file(hot_only):
    hot = scan_hot_files(hot_only)[0].path
    flip_bit_in_page_index(hot)
    problems = verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).problems
    assert [p for p in problems if p.startswith(f"{hot}: sha256 is ")]


def test_retier_when_hot_source_rewritten_refuses_naming_it_and_commits_nothing(hot_only):
    before = CatalogStore(hot_only).read()
    hot = scan_hot_files(hot_only)[0].path
    times_1000(hot)
    with pytest.raises(DamagedFileError, match=f"{trust.WRITTEN_BY_COMPACTION} recorded") as raised:
        Archive(hot_only, policy=POLICY, audit_log=None).retier(as_of=STAGE_1)
    assert str(hot) in str(raised.value)
    assert CatalogStore(hot_only).read() == before


def test_verify_archive_when_a_retained_consolidated_file_changed_reports_it(tiered):
    Archive(tiered, policy=POLICY, audit_log=None).core.books.enable(reason="test")
    warm = tier_file(tiered, WARM)
    result = Archive(tiered, policy=POLICY, audit_log=None).retier(
        as_of=STAGE_2
    )  # every day cold; the warm file stays
    assert warm in result.files_retained and verify_archive(ArchiveCore(tiered, policy=POLICY)).ok
    flip_bit_in_data_page(warm)
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY)).problems
    assert len(problems) == 1 and problems[0].startswith(f"{warm}: sha256 is ")


def test_hot_records_when_last_line_cut_short_ignore_it(hot_only):
    records = hot_only / HOT_RECORDS
    with open(records, "ab") as handle:
        handle.write(b'{"path": "symbol=X/year=2026/mo')  # a crash while appending
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY)).ok


def test_hot_records_when_a_line_is_malformed_every_command_refuses_naming_it(tiered, capsys):
    with open(tiered / HOT_RECORDS, "ab") as handle:
        handle.write(b'{"path": "../outside.parquet", "sha256": "00", "size": 1}\n')
    catalog = (tiered / "_skewtape_catalog.parquet").read_bytes()
    where = f"{tiered / HOT_RECORDS}: line {len((tiered / HOT_RECORDS).read_bytes().splitlines())}"
    assert verify_archive(ArchiveCore(tiered, policy=POLICY)).problems[0].startswith(where)
    assert main(["query", SUM_SQL, "--archive", str(tiered)]) == 2
    assert where in capsys.readouterr().err
    with pytest.raises(TickFormatError, match=where):
        Archive(tiered, policy=POLICY, audit_log=None).retier(as_of=STAGE_2)
    with pytest.raises(TickFormatError, match=where):
        Archive(tiered, policy=POLICY, audit_log=None).rebuild_catalog()
    assert (tiered / "_skewtape_catalog.parquet").read_bytes() == catalog


def test_archive_without_hot_records_when_verified_says_how_and_rebuild_records_them(tiered):
    (tiered / HOT_RECORDS).unlink()  # an archive written before hot files were recorded
    (tiered / HOT_INDEX).unlink()  # (and before the hot index)
    live = [h.path for h in archive_state(tiered).hot_live]
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY)).problems
    assert len(problems) == len(live)
    assert all("no record" in p and "rebuild-catalog" in p for p in problems)
    with pytest.raises(CatalogMismatchError, match="rebuild-catalog"):
        run_query(SUM_SQL, ArchiveCore(tiered, policy=POLICY))
    result = Archive(tiered, policy=POLICY, audit_log=None).rebuild_catalog()
    assert result.hot_files_recorded == len(live)
    assert verify_archive(ArchiveCore(tiered, policy=POLICY), full=True).ok
    assert sorted(view_rows(tiered, policy=POLICY)) == sorted(expected_rows())


def test_rebuild_catalog_when_a_recorded_hot_file_changed_keeps_its_record(tiered):
    hot = live_hot(tiered)
    times_1000(hot)
    assert Archive(tiered, policy=POLICY, audit_log=None).rebuild_catalog().hot_files_recorded == 0
    assert [p for p in verify_archive(ArchiveCore(tiered, policy=POLICY)).problems if str(hot) in p]


def test_retier_when_done_leaves_one_record_per_hot_file_path(hot_only):
    symbol, day = "ES", DAYS[-1]
    for ticks in ("CL/F", "KX-25MAR"):  # each recompaction with other ticks appends a record
        compact_symbol_day(
            archive_at(hot_only, POLICY).core,
            day_ticks(ticks, day),
            SymbolDayWrite(symbol=symbol, day=day, age_days=1),
        )
    lines = (hot_only / HOT_RECORDS).read_text().splitlines()
    assert len(lines) == len(SYMBOLS) * len(DAYS) + 2
    Archive(hot_only, policy=POLICY, audit_log=None).retier(
        as_of=STAGE_1
    )  # removes the hot files it moved
    assert (hot_only / HOT_RECORDS).read_text() == ""  # folded into the hot index
    assert len(CatalogStore(hot_only).hot_records()) == len(SYMBOLS) * len(DAYS)  # one per path
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_compact_when_hot_records_file_is_a_link_refuses_before_publishing(hot_only, tmp_path):
    symbol, day = "ES", DAYS[-1]
    hot = live_hot(hot_only)
    target = tmp_path / "elsewhere.jsonl"
    (hot_only / HOT_RECORDS).rename(target)
    (hot_only / HOT_RECORDS).symlink_to(target)
    before = {p: p.read_bytes() for p in hot_only.rglob("*.parquet")}
    with pytest.raises(LinkedStateFileError):
        compact_symbol_day(
            archive_at(hot_only, POLICY).core,
            day_ticks("CL/F", day),
            SymbolDayWrite(symbol=symbol, day=day, age_days=1),
        )
    assert {p: p.read_bytes() for p in hot_only.rglob("*.parquet")} == before and hot.exists()


KILLED_COMPACTION = """
import os, signal, sys
from datetime import date
from pathlib import Path
from skewtape_pipeline import faults
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline_tests.ticks.archive_builders import POLICY, day_ticks

root, symbol, day, source, point, log = sys.argv[1:]
day = date.fromisoformat(day)
options = {} if log == "beside" else {"audit_log": Path(log)}

def kill(name):
    if name == point:
        os.kill(os.getpid(), signal.SIGKILL)

with faults.installed(kill):
    Archive(Path(root), policy=POLICY, **options).compact_symbol_day(
        day_ticks(source, day), SymbolDayWrite(symbol=symbol, day=day, age_days=1)
    )
"""
"""A compaction of ``source``'s ticks as the symbol-day (``symbol``, ``day``) of the archive
``root``, audited to ``log`` (``beside``: its default), killed (SIGKILL) at its checkpoint
``point``."""


def compaction_killed_at(
    point: str, root: Path, symbol: str, day, source: str, log: str = "beside"
) -> None:
    """Run :data:`KILLED_COMPACTION` in a child process; it must die of SIGKILL."""
    argv = [sys.executable, "-c", KILLED_COMPACTION, str(root), symbol, day.isoformat(), source]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[3])}
    done = subprocess.run([*argv, point, log], env=env, capture_output=True, timeout=300)
    assert done.returncode == -signal.SIGKILL, done.stderr.decode()


def ticks_of(root: Path, symbol: str, day) -> int:
    sql = "SELECT count(*) AS n FROM ticks WHERE symbol = ? AND date = ?"
    answer = run_query(sql, ArchiveCore(root), QueryOptions(parameters=[symbol, day]))
    return answer.column("n").to_pylist()[0]


def writes_of(root: Path, symbol: str, day, log: Path | None = None) -> list[str]:
    """The events of the audit records of writes of the symbol-day's hot file, in the audit
    log beside ``root`` (or ``log``)."""
    wrote = (EVENT_WRITE, EVENT_RECOMPACT)
    if log is None:
        events = audit_events(root)
    else:
        verify_audit_log(log)
        events = [json.loads(line) for line in log.read_text().splitlines()]
    return [
        e["event"]
        for e in events
        if e["event"] in wrote and (e["symbol"], e["date"]) == (symbol, day.isoformat())
    ]


def test_compact_when_killed_between_rename_and_record_reads_it_and_the_next_writer_records_it(
    hot_only,
):
    symbol, day = "ES", DAYS[-1]
    hot = partition_file(hot_only, symbol, day)
    newer = day_ticks("CL/F", day)  # other ticks than the file holds
    Archive(hot_only, policy=POLICY).prune()  # an audit log to count in
    compaction_killed_at("hot-published", hot_only, symbol, day, "CL/F")
    assert CatalogStore(hot_only).publication() is not None
    assert ticks_of(hot_only, symbol, day) == len(newer)  # no refusal: the file it published
    assert Archive(hot_only, policy=POLICY).read(symbol, day, day).num_rows == len(newer)
    assert writes_of(hot_only, symbol, day) == []

    Archive(hot_only, policy=POLICY).prune()  # the next holder of the lock finishes it
    rel = hot.relative_to(hot_only).as_posix()
    assert CatalogStore(hot_only).hot_records()[rel].sha256 == sha256_file(hot)
    assert writes_of(hot_only, symbol, day) == [EVENT_RECOMPACT]
    assert CatalogStore(hot_only).publication() is None
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok
    Archive(hot_only, policy=POLICY).prune()  # finished once: no second record
    assert writes_of(hot_only, symbol, day) == [EVENT_RECOMPACT]


def test_compact_when_killed_before_its_rename_keeps_the_old_file_and_records_nothing(hot_only):
    symbol, day = "ES", DAYS[-1]
    hot = partition_file(hot_only, symbol, day)
    before, records = hot.read_bytes(), CatalogStore(hot_only).hot_records()
    Archive(hot_only, policy=POLICY).prune()
    compaction_killed_at("hot-publishing", hot_only, symbol, day, "CL/F")
    assert ticks_of(hot_only, symbol, day) == len(day_ticks(symbol, day))
    Archive(hot_only, policy=POLICY).prune()
    assert hot.read_bytes() == before and CatalogStore(hot_only).hot_records() == records
    assert writes_of(hot_only, symbol, day) == []
    assert CatalogStore(hot_only).publication() is None
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_compact_when_killed_after_renaming_a_new_day_the_next_writer_publishes_it(hot_only):
    symbol, day = "NEW", DAYS[-1]
    Archive(hot_only, policy=POLICY).prune()
    compaction_killed_at("hot-published", hot_only, symbol, day, "CL/F")
    assert ticks_of(hot_only, symbol, day) == 0  # not in the hot index yet: no refusal
    Archive(hot_only, policy=POLICY).prune()
    assert ticks_of(hot_only, symbol, day) == len(day_ticks("CL/F", day))
    assert writes_of(hot_only, symbol, day) == [EVENT_WRITE]
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_compact_when_killed_between_record_and_audit_the_next_writer_audits_it_once(hot_only):
    symbol, day = "ES", DAYS[-1]
    Archive(hot_only, policy=POLICY).prune()
    compaction_killed_at("hot-recorded", hot_only, symbol, day, "CL/F")
    assert writes_of(hot_only, symbol, day) == []
    Archive(hot_only, policy=POLICY).prune()
    Archive(hot_only, policy=POLICY).prune()
    assert writes_of(hot_only, symbol, day) == [EVENT_RECOMPACT]
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_compact_when_killed_between_audit_and_note_the_next_writer_audits_nothing_more(
    hot_only,
):
    symbol, day = "ES", DAYS[-1]
    Archive(hot_only, policy=POLICY).prune()
    compaction_killed_at("hot-audited", hot_only, symbol, day, "CL/F")
    assert writes_of(hot_only, symbol, day) == [EVENT_RECOMPACT]
    assert CatalogStore(hot_only).publication() is not None  # its note not blanked yet
    Archive(hot_only, policy=POLICY).prune()
    assert CatalogStore(hot_only).publication() is None
    assert writes_of(hot_only, symbol, day) == [EVENT_RECOMPACT]  # once, as it happened
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_compact_when_killed_after_its_rename_verify_accepts_it_and_writes_nothing(hot_only):
    """verify-archive (no --audit-log) reads the file as published and leaves the note to the
    next writer, which audits to its own log; one that audits nothing leaves no record."""
    symbol, day, log = "ES", DAYS[-1], hot_only.parent / "custom" / "audit.jsonl"
    log.parent.mkdir()  # an audit log given is written only in a folder that exists
    compaction_killed_at("hot-published", hot_only, symbol, day, "CL/F", str(log))
    assert main(["verify-archive", str(hot_only), "--full"]) == 0
    assert CatalogStore(hot_only).publication() is not None
    assert not (hot_only.parent / "audit.jsonl").exists()
    Archive(hot_only, policy=POLICY, audit_log=log).prune()
    assert writes_of(hot_only, symbol, day, log) == [EVENT_RECOMPACT]
    compaction_killed_at("hot-published", hot_only, symbol, day, "ES", str(log))
    archive_at(hot_only, POLICY).prune()  # audit_log=None: recorded, not audited
    assert writes_of(hot_only, symbol, day, log) == [EVENT_RECOMPACT]
    assert CatalogStore(hot_only).publication() is None
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_rebuild_catalog_when_the_hot_index_is_damaged_and_a_publication_left_records_it(
    hot_only,
):
    symbol, day = "ES", DAYS[-1]
    Archive(hot_only, policy=POLICY).prune()
    compaction_killed_at("hot-published", hot_only, symbol, day, "CL/F")
    (hot_only / HOT_INDEX).write_bytes(b"not parquet")
    Archive(hot_only, policy=POLICY).rebuild_catalog()
    Archive(hot_only, policy=POLICY).prune()  # the note, left by the rebuild, is finished now
    assert writes_of(hot_only, symbol, day) == [EVENT_RECOMPACT]
    assert CatalogStore(hot_only).publication() is None
    assert ticks_of(hot_only, symbol, day) == len(day_ticks("CL/F", day))
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY), full=True).ok


def test_read_when_a_note_names_a_changed_consolidated_file_refuses_it(tiered):
    cold = tier_file(tiered, COLD)
    flip_bit_in_data_page(cold, column="quantity")
    rel = cold.relative_to(cold.parents[1]).as_posix()  # as a catalog path would look
    note = {"path": rel, "size": cold.stat().st_size, "sha256": sha256_file(cold),
            "audit": {}, "audit_log": None}  # fmt: skip
    (tiered / PUBLICATION_FILE).write_text(json.dumps(note))
    with pytest.raises(DamagedFileError, match=str(cold)):
        Archive(tiered, policy=POLICY).read()
    with pytest.raises(TickFormatError, match=PUBLICATION_FILE):
        Archive(tiered, policy=POLICY).prune()


@pytest.mark.parametrize("note", ["list", "folder", "fifo"])
def test_query_when_a_file_differs_and_the_note_is_not_one_names_the_file(hot_only, note):
    hot, path = partition_file(hot_only, "ES", DAYS[-1]), hot_only / PUBLICATION_FILE
    times_1000(hot)
    path.unlink()
    {
        "list": lambda: path.write_bytes(b"[]"),
        "folder": path.mkdir,
        "fifo": lambda: os.mkfifo(path),
    }[note]()
    with pytest.raises(DamagedFileError, match=str(hot)):
        run_query(SUM_SQL, ArchiveCore(hot_only, policy=POLICY))
    with pytest.raises(TickFormatError, match=str(path)):  # not read: a FIFO would block
        Archive(hot_only, policy=POLICY).prune()


@pytest.mark.parametrize(
    "body",
    [
        b"[]",
        b'{"path": "../x", "size": 1}',
        b" " * (NOTE_MAX_BYTES + 1),
        "folder",
    ],
    ids=["list", "no-fields", "oversized", "folder"],
)
def test_writer_when_the_publication_note_holds_something_else_refuses_naming_it(hot_only, body):
    note = hot_only / PUBLICATION_FILE
    if body == "folder":
        note.unlink()
        note.mkdir()
    else:
        note.write_bytes(body)

    def files():  # but the lock file, which names its last holder
        return {p: p.read_bytes() for p in hot_only.rglob("*") if p.is_file() and p != lock}

    lock = hot_only / ARCHIVE_LOCK_FILE
    before = files()
    with pytest.raises(TickFormatError, match=str(note)):
        Archive(hot_only, policy=POLICY).prune()
    assert files() == before


def test_writer_when_the_publication_note_was_cut_short_blanks_it_and_goes_on(hot_only):
    """A note cut short while it was written (a crash, a full disk) is of a file never renamed
    into place: nothing to finish."""
    records, cut = CatalogStore(hot_only).hot_records(), b'{"path": "symbol=ES/year=20'
    (hot_only / PUBLICATION_FILE).write_bytes(cut)
    Archive(hot_only, policy=POLICY).prune()
    assert (hot_only / PUBLICATION_FILE).read_bytes() == b" " * len(cut)
    assert CatalogStore(hot_only).hot_records() == records


def test_writer_when_the_publication_note_is_a_link_refuses_and_leaves_its_target(hot_only):
    target = hot_only.parent / "elsewhere.json"
    target.write_text("{}")
    note = hot_only / PUBLICATION_FILE
    note.unlink(missing_ok=True)  # the empty note the compactions left
    note.symlink_to(target)
    with pytest.raises(LinkedStateFileError):
        Archive(hot_only, policy=POLICY).prune()
    with pytest.raises(LinkedStateFileError):
        compact_symbol_day(
            archive_at(hot_only, POLICY).core,
            day_ticks("CL/F", DAYS[-1]),
            SymbolDayWrite(symbol="ES", day=DAYS[-1], age_days=1),
        )
    assert target.read_text() == "{}"


# --- 2. query verifies a file whose stamp changed ------------------------------------------------


def test_query_when_hot_file_rewritten_refuses_naming_it(tiered):
    hot = live_hot(tiered)
    times_1000(hot)
    with pytest.raises(DamagedFileError, match=f"{trust.WRITTEN_BY_COMPACTION} recorded") as raised:
        run_query(SUM_SQL, ArchiveCore(tiered, policy=POLICY))
    assert str(hot) in str(raised.value)


@pytest.mark.parametrize("tier", [WARM, COLD])
def test_query_when_a_page_bit_flipped_in_a_consolidated_file_refuses_naming_it(tiered, tier):
    path = tier_file(tiered, tier)
    flip_bit_in_data_page(path, column="quantity")
    with pytest.raises(DamagedFileError, match="the catalog recorded") as raised:
        run_query_text(SUM_SQL, ArchiveCore(tiered, policy=POLICY))
    assert str(path) in str(raised.value)


def test_query_when_stamps_unchanged_reads_no_file_twice_to_verify(tiered, monkeypatch):
    hashed = []
    measure = trust.sha256_of
    monkeypatch.setattr(trust, "sha256_of", lambda path: hashed.append(path) or measure(path))
    racy_rule_off(monkeypatch)
    answer = run_query(SUM_SQL, ArchiveCore(tiered, policy=POLICY))
    files = len(archive_state(tiered).hot_live) + len(CatalogStore(tiered).read().files)
    assert len(hashed) == files
    hashed.clear()
    assert run_query(SUM_SQL, ArchiveCore(tiered, policy=POLICY)) == answer
    assert hashed == []
    cold = tier_file(tiered, COLD)
    os.utime(cold, ns=(cold.stat().st_atime_ns, cold.stat().st_mtime_ns))  # moves the ctime
    assert run_query(SUM_SQL, ArchiveCore(tiered, policy=POLICY)) == answer
    assert hashed == [cold]


def test_query_verification_when_a_compaction_replaced_a_hot_file_meanwhile_accepts_it(hot_only):
    symbol, day = "ES", DAYS[-1]
    verified = trust.VerifiedFiles(hot_only)  # the records as a query read them
    compact_symbol_day(
        archive_at(hot_only, POLICY).core,
        day_ticks("CL/F", day),
        SymbolDayWrite(symbol=symbol, day=day, age_days=1),
    )
    [hot] = [h for h in scan_hot_files(hot_only) if h.key == (symbol, day)]
    verified.check_hot(hot, CatalogStore(hot_only).read())  # no DamagedFileError


# --- 3. query reads the archive's own files, one SELECT -----------------------------------------

HOSTILE = {
    "copy over a hot file": "COPY (SELECT 1 AS x) TO '{hot}' (FORMAT parquet)",
    "attach a database": "ATTACH '{root}/evil.duckdb' AS evil",
    "read a file outside": "SELECT * FROM read_text('/etc/passwd')",
    "read Parquet outside": "SELECT * FROM read_parquet('{outside}')",
    "a second statement": "SELECT 1; COPY (SELECT 1 AS x) TO '{root}/second.parquet'",
    "undo the limits": "SET enable_external_access = true",
    "install an extension": "INSTALL httpfs",
    "export the database": "EXPORT DATABASE '{root}/export'",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_query_when_sql_would_write_or_read_outside_refuses_and_changes_nothing(
    tiered, tmp_path, name
):
    hot = live_hot(tiered)
    outside = tmp_path / "outside.parquet"
    shutil.copyfile(hot, outside)
    sql = HOSTILE[name].format(hot=hot, root=tiered, outside=outside)
    before = {p: p.read_bytes() for p in tiered.rglob("*") if p.is_file()}
    with pytest.raises(ConfigError) as raised:
        run_query_text(sql, ArchiveCore(tiered, policy=POLICY))
    assert sql in str(raised.value)
    after = {p: p.read_bytes() for p in tiered.rglob("*") if p.is_file()}
    assert {p: b for p, b in after.items() if p.name != trust.VERIFIED_CACHE} == {
        p: b for p, b in before.items() if p.name != trust.VERIFIED_CACHE
    }


def test_query_when_sql_reads_duckdbs_default_spill_folder_refuses(tiered, tmp_path, monkeypatch):
    here = tmp_path / "here"
    (here / ".tmp").mkdir(parents=True)  # DuckDB's default temp_directory, from the cwd
    (here / ".tmp" / "secret.txt").write_text("top secret")
    monkeypatch.chdir(here)
    with pytest.raises(ConfigError, match=r"secret\.txt"):
        run_query_text("SELECT content FROM read_text('.tmp/secret.txt')", ArchiveCore(tiered))
    sql = "SELECT unnest(current_setting('allowed_directories')) AS folder"
    folders = run_query(sql, ArchiveCore(tiered)).column("folder").to_pylist()
    [spill] = [Path(f) for f in folders if Path(f).name.startswith("skewtape-query-")]
    assert spill.parent == Path(tempfile.gettempdir()) and not spill.exists()
    others = [Path(f) for f in folders if Path(f) != spill]
    assert len(others) == 3 and all(f.is_relative_to(tiered.parent) for f in others)


def test_query_when_reading_the_archives_own_files_answers(tiered):
    catalog = tiered / "_skewtape_catalog.parquet"
    sql = f"SELECT count(*) AS n FROM read_parquet('{catalog}')"
    assert run_query(sql, ArchiveCore(tiered, policy=POLICY)).column("n").to_pylist() == [
        len(CatalogStore(tiered).read().partitions)
    ]


def test_cli_query_when_unrestricted_runs_any_sql(tiered, tmp_path, capsys):
    out = tmp_path / "out.parquet"
    sql = f"COPY (SELECT sum(quantity) AS q FROM ticks) TO '{out}' (FORMAT parquet)"
    assert main(["query", sql, "--archive", str(tiered)]) == 2
    assert "read-only" in capsys.readouterr().err and not out.exists()
    assert main(["query", sql, "--archive", str(tiered), "--unrestricted"]) == 0
    assert pq.read_table(out).num_rows == 1


# --- 11. the tier roots' markers ------------------------------------------------------------------


def test_verify_archive_when_a_tier_roots_marker_deleted_reports_it(tiered):
    marker = tiered.parent / "archive-cold" / "_skewtape_archive.json"
    assert verify_archive(ArchiveCore(tiered, policy=POLICY)).ok
    marker.unlink()
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY)).problems
    assert len(problems) == 1 and problems[0].startswith(f"{marker}: missing")

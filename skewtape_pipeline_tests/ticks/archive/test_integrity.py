"""The archive recoverable and checkable from its own files: the catalog rebuilt from the
consolidated files' metadata, writers refusing while the catalog does not account for the files,
verify-archive (sha256, sizes, page CRCs through pyarrow), damaged footers, relocation."""

from __future__ import annotations

import hashlib
import json
import shutil
from dataclasses import replace

import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline import faults
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import CatalogMismatchError, DamagedFileError, TickFormatError
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops import integrity
from skewtape_pipeline.ticks.archive.ops.compact import compact_symbol_day
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.integrity import verify_archive
from skewtape_pipeline.ticks.archive.ops.query import run_query
from skewtape_pipeline.ticks.archive.store.books import EVENT_REBUILD, default_audit_log
from skewtape_pipeline.ticks.archive.store.catalog import (
    CATALOG_FILE,
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.consolidate import (
    META_CATALOG_GENERATION,
    META_SYMBOL_DAYS_COUNT,
    META_SYMBOL_DAYS_SHA256,
)
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_LOCK_FILE
from skewtape_pipeline.ticks.archive.store.placement import (
    archive_metrics,
    archive_state,
    scan_hot_files,
)
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.archive.store.version_files import EVENT_VERSION
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    STAGE_1,
    STAGE_2,
    SYMBOLS,
    Crash,
    audit_events,
    build_archive,
    crash_at_name,
    day_ticks,
    expected_rows,
    files_under,
    view_rows,
)
from skewtape_pipeline_tests.ticks.conftest import archive_at


def consolidated_paths(root):
    return sorted(
        ArchiveTiers.of(root).resolve(f.path) for f in CatalogStore(root).read().files.values()
    )


def tier_file(root, tier):
    [path] = [
        ArchiveTiers.of(root).resolve(f.path)
        for f in CatalogStore(root).read().files.values()
        if f.tier == tier
    ]
    return path


def flip_bit_in_data_page(path, column="price"):
    """Flip one bit in the last byte of ``column``'s first column chunk (page data, not header)."""
    meta = pq.read_metadata(path)
    chunk = meta.row_group(0).column(meta.schema.names.index(column))
    start = chunk.dictionary_page_offset or chunk.data_page_offset
    offset = start + chunk.total_compressed_size - 1
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    data[offset] ^= 0x01
    path.write_bytes(bytes(data))


def damage_footer(path):
    """Overwrite the Thrift footer's first bytes (the length and magic stay intact)."""
    path.chmod(0o644)
    data = bytearray(path.read_bytes())
    footer_length = int.from_bytes(data[-8:-4], "little")
    start = len(data) - 8 - footer_length
    data[start : start + 16] = b"\xff" * 16
    path.write_bytes(bytes(data))


# --- 1. the catalog is no single point of failure ----------------------------------------------


def test_consolidated_file_when_written_records_its_symbol_days_digest_and_generation(tiered):
    catalog = CatalogStore(tiered).read()
    for item in catalog.files.values():
        path = ArchiveTiers.of(tiered).resolve(item.path)
        key_values = pq.read_metadata(path).metadata
        # oracle: the file's own symbol and date columns, counted by pyarrow
        table = pq.read_table(path, columns=["symbol", "date"])
        counts = table.group_by(["symbol", "date"]).aggregate([("symbol", "count")])
        found = sorted(
            (s, d.isoformat(), n)
            for s, d, n in zip(
                pc.cast(counts["symbol"], "string").to_pylist(),
                counts["date"].to_pylist(),
                counts["symbol_count"].to_pylist(),
                strict=True,
            )
        )
        lines = "".join(f"{s}\t{d}\t{n}\n" for s, d, n in found).encode()
        assert key_values[META_SYMBOL_DAYS_SHA256.encode()].decode() == (
            hashlib.sha256(lines).hexdigest()
        )
        assert int(key_values[META_SYMBOL_DAYS_COUNT.encode()]) == len(found) == item.symbol_days
        assert int(key_values[META_CATALOG_GENERATION.encode()]) == 1  # the commit writing it


def test_retier_when_catalog_deleted_refuses_naming_files_and_removes_nothing(tiered):
    (tiered / CATALOG_FILE).unlink()
    day = DAYS[-1]
    compact_symbol_day(
        archive_at(tiered, POLICY).core,
        day_ticks("NEW", day),
        SymbolDayWrite(symbol="NEW", day=day, age_days=1),
    )
    before = files_under(tiered.parent)
    with pytest.raises(CatalogMismatchError) as raised:
        Archive(tiered, policy=POLICY).retier(as_of=STAGE_2)
    message = str(raised.value)
    assert "rebuild-catalog" in message
    on_disk = sorted(tiered.parent.glob("archive-*/**/*.parquet"))
    assert len(on_disk) == 2 and all(path.name in message for path in on_disk)
    assert files_under(tiered.parent) == before


def test_compact_symbol_day_when_catalog_deleted_refuses_to_rewrite_a_hot_file(tiered):
    (tiered / CATALOG_FILE).unlink()
    [hot, *_] = scan_hot_files(tiered)
    before = hot.path.read_bytes()
    with pytest.raises(CatalogMismatchError, match="rebuild-catalog"):
        compact_symbol_day(
            archive_at(tiered, POLICY).core,
            day_ticks(hot.symbol, hot.day).slice(0, 1),
            SymbolDayWrite(symbol=hot.symbol, day=hot.day, age_days=1),
        )
    assert hot.path.read_bytes() == before


def test_query_when_catalog_deleted_refuses_instead_of_answering_without_it(tiered):
    (tiered / CATALOG_FILE).unlink()
    with pytest.raises(CatalogMismatchError, match="rebuild-catalog"):
        run_query("SELECT count(*) FROM ticks", ArchiveCore(tiered))


def test_remove_days_when_catalog_unreadable_refuses_and_changes_nothing(tiered):
    (tiered / CATALOG_FILE).write_bytes(b"not parquet")
    before = files_under(tiered.parent)
    with pytest.raises(CatalogMismatchError, match="rebuild-catalog"):
        Archive(tiered, policy=POLICY).remove([(SYMBOLS[0], DAYS[-1])])
    assert files_under(tiered.parent) == before


def test_retier_when_catalog_is_an_older_copy_refuses_the_files_it_does_not_list(tiered):
    old = (tiered / CATALOG_FILE).read_bytes()
    old_files = consolidated_paths(tiered)
    Archive(tiered, policy=POLICY).retier(as_of=STAGE_2)  # replaces those files
    Archive(tiered, policy=POLICY).versions.prune(keep_last=1)  # and removes them
    newest = consolidated_paths(tiered)
    (tiered / CATALOG_FILE).chmod(0o644)
    (tiered / CATALOG_FILE).write_bytes(old)
    before = files_under(tiered.parent)
    with pytest.raises(CatalogMismatchError) as raised:  # it lists files that are gone
        Archive(tiered, policy=POLICY).retier(as_of=STAGE_2)
    assert all(path.name in str(raised.value) for path in old_files)
    assert files_under(tiered.parent) == before
    for path in old_files:  # with the old files back, the newer ones are not accounted for
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(b"")
    with pytest.raises(CatalogMismatchError) as raised:
        Archive(tiered, policy=POLICY).retier(as_of=STAGE_2)
    assert all(path.name in str(raised.value) for path in newest)


def test_rebuild_catalog_when_catalog_deleted_restores_view_and_retier(tiered):
    wanted = CatalogStore(tiered).read()
    (tiered / CATALOG_FILE).unlink()
    result = Archive(tiered, policy=POLICY).rebuild_catalog()
    rebuilt = CatalogStore(tiered).read()
    assert rebuilt.files == wanted.files
    assert {k: (p.file, p.rows, p.byte_share) for k, p in rebuilt.partitions.items()} == {
        k: (p.file, p.rows, p.byte_share) for k, p in wanted.partitions.items()
    }
    recorded = [
        int(pq.read_metadata(path).metadata[META_CATALOG_GENERATION.encode()])
        for path in consolidated_paths(tiered)
    ]
    assert rebuilt.generation == result.generation > max(recorded)
    assert result.files == len(wanted.files)
    assert view_rows(tiered) == expected_rows()
    Archive(tiered, policy=POLICY).retier(as_of=STAGE_2)
    assert view_rows(tiered) == expected_rows()


def test_rebuild_catalog_when_replaced_files_remain_keeps_the_newest_copy(tiered, monkeypatch):
    from skewtape_pipeline.ticks.archive.store.garbage import GarbageCollector

    monkeypatch.setattr(GarbageCollector, "remove", lambda *args, **kwargs: [])
    Archive(tiered, policy=POLICY).retier(
        as_of=STAGE_2
    )  # the replaced files and moved hot files stay
    wanted = CatalogStore(tiered).read()
    superseded = [h.key for h in archive_state(tiered).hot_superseded]
    (tiered / CATALOG_FILE).unlink()
    result = Archive(tiered, policy=POLICY).rebuild_catalog()
    assert CatalogStore(tiered).read().files == wanted.files
    assert len(result.superseded) == 2  # the warm and cold files of generation 1
    assert [h.key for h in archive_state(tiered).hot_superseded] == superseded != []
    assert view_rows(tiered) == expected_rows()
    [*_, version, record] = (tiered.parent / "audit.jsonl").read_text().splitlines()
    assert json.loads(version)["event"] == EVENT_VERSION  # the re-tiering's
    # every symbol-day reads from where it did: the rebuild is audited but no version
    event = json.loads(record)
    assert event["event"] == EVENT_REBUILD and event["generation"] == result.generation
    assert event["catalog_sha256"] == sha256_file(tiered / CATALOG_FILE)


@pytest.mark.parametrize("books", [False, True])
def test_rebuild_catalog_when_nothing_is_amiss_writes_and_records_nothing(hot_only, books):
    root = hot_only
    if books:  # every moved hot file and replaced consolidated file stays on disk
        Archive(root, audit_log=default_audit_log(root)).core.books.enable(reason="books")
    Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    Archive(root, policy=POLICY).retier(as_of=STAGE_2)
    catalog = root / CATALOG_FILE
    before, count = catalog.read_bytes(), VersionLog(root).count()
    audited = len(audit_events(root))

    for _ in range(2):
        result = Archive(root, policy=POLICY).rebuild_catalog()
        assert catalog.read_bytes() == before  # not written again: the generation stays
        assert result.generation == CatalogStore(root).read().generation
        assert VersionLog(root).count() == count  # no version: nothing changed
    assert len(audit_events(root)) == audited
    assert view_rows(root) == expected_rows()


def rewrite_metadata(path, **changes):
    """Rewrite the file ``path`` with the same rows and its key-value metadata ``changes``d."""
    table = pq.read_table(path)
    metadata = {**table.schema.metadata, **{k.encode(): v.encode() for k, v in changes.items()}}
    path.chmod(0o644)
    pq.write_table(table.replace_schema_metadata(metadata), path)


def test_rebuild_catalog_when_symbol_days_digest_tampered_refuses_naming_the_file(tiered):
    warm = tier_file(tiered, WARM)
    rewrite_metadata(warm, **{META_SYMBOL_DAYS_SHA256: "0" * 64})
    (tiered / CATALOG_FILE).unlink()
    before = files_under(tiered.parent)
    with pytest.raises(TickFormatError, match=f"{warm.name}: .*symbol_days_sha256"):
        Archive(tiered, policy=POLICY).rebuild_catalog()
    assert files_under(tiered.parent) == before  # no catalog written


def test_rebuild_catalog_when_rows_of_a_symbol_day_dropped_refuses_naming_the_file(tiered):
    cold = tier_file(tiered, COLD)
    table = pq.read_table(cold)
    cold.chmod(0o644)
    pq.write_table(table.slice(1), cold)  # the metadata still pins the full list
    (tiered / CATALOG_FILE).unlink()
    with pytest.raises(TickFormatError, match=f"{cold.name}: .*symbol-days"):
        Archive(tiered, policy=POLICY).rebuild_catalog()
    assert not (tiered / CATALOG_FILE).exists()


def test_rebuild_catalog_when_a_hot_file_was_recompacted_keeps_it_live(tiered):
    symbol, day = SYMBOLS[1], DAYS[3]  # warm at STAGE_1
    assert (symbol, day) in CatalogStore(tiered).read().partitions
    newer = day_ticks(symbol, day).slice(0, 1)
    compact_symbol_day(
        archive_at(tiered, POLICY).core, newer, SymbolDayWrite(symbol=symbol, day=day, age_days=1)
    )
    wanted, rows = archive_state(tiered), view_rows(tiered)
    assert (symbol, day) in wanted.overridden
    assert len([r for r in rows if r[:2] == (symbol, day)]) == 1  # the newer copy only
    (tiered / CATALOG_FILE).unlink()
    Archive(tiered, policy=POLICY).rebuild_catalog()
    state = archive_state(tiered)
    assert state.overridden == wanted.overridden and state.hot_superseded == []
    assert view_rows(tiered) == rows


def test_cli_rebuild_catalog_when_catalog_deleted_exits_0_and_query_answers(tiered, capsys):
    (tiered / CATALOG_FILE).unlink()
    assert main(["query", "SELECT count(*) FROM ticks", "--archive", str(tiered)]) == 2
    assert "rebuild-catalog" in capsys.readouterr().err
    assert main(["rebuild-catalog", str(tiered)]) == 0
    assert main(["query", "SELECT count(*) AS n FROM ticks", "--archive", str(tiered)]) == 0
    assert capsys.readouterr().out.splitlines()[-1] == str(len(expected_rows()))


def file_bytes(folder):
    """Every file below ``folder`` with its bytes, but the lock's (its holder's note)."""
    files = (p for p in sorted(folder.rglob("*")) if p.is_file())
    return {p: p.read_bytes() for p in files if p.name != ARCHIVE_LOCK_FILE}


@pytest.mark.parametrize("catalog", ["kept", "deleted"])
def test_cli_rebuild_catalog_when_a_consolidated_file_is_damaged_exits_2_changing_nothing(
    tiered, capsys, catalog
):
    warm = tier_file(tiered, WARM)
    flip_bit_in_data_page(warm)  # its symbol-days still match its digest: only its bytes differ
    if catalog == "deleted":
        (tiered / CATALOG_FILE).unlink()
    before = file_bytes(tiered.parent)
    assert main(["rebuild-catalog", str(tiered)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {warm}: sha256 is ")
    assert "content name" in err and "Restore it from a copy" in err
    assert file_bytes(tiered.parent) == before
    assert main(["verify-archive", str(tiered)]) == 2  # still reported


def test_rebuild_catalog_when_a_file_not_content_named_fails_a_page_checksum_refuses(tiered):
    warm = tier_file(tiered, WARM)
    flip_bit_in_data_page(warm)
    renamed = warm.rename(warm.with_name("part-restored.parquet"))  # no name vouches for it
    (tiered / CATALOG_FILE).unlink()
    before = file_bytes(tiered.parent)
    with pytest.raises(DamagedFileError, match="page fails its checksum") as refused:
        Archive(tiered, policy=POLICY).rebuild_catalog()
    assert refused.value.path == renamed
    assert file_bytes(tiered.parent) == before


def test_verify_archive_when_the_catalog_records_a_damaged_files_sha256_reports_its_name(
    tiered,
):
    warm = tier_file(tiered, WARM)
    flip_bit_in_data_page(warm)
    store = CatalogStore(tiered)
    catalog = store.read()  # what a rebuild that trusted the damaged bytes recorded
    [rel] = [rel for rel, f in catalog.files.items() if f.tier == WARM]
    damaged = replace(catalog.files[rel], sha256=sha256_file(warm))
    store.write(replace(catalog, files={**catalog.files, rel: damaged}))
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY)).problems
    assert [p for p in problems if p.startswith(f"{warm}: ") and "content name" in p]


# --- 2. checksums: verify-archive, damaged footers ----------------------------------------------


def test_verify_archive_when_intact_finds_no_problem(tiered):
    result = verify_archive(ArchiveCore(tiered, policy=POLICY), full=True)
    kept = [p for folder in VersionLog(tiered).snapshot_dirs() for p in folder.rglob("*.pq")]
    assert result.problems == []
    assert kept  # the versions' catalogs, manifests and hot files are checked too
    assert result.files_checked == len(CatalogStore(tiered).read().files) + len(
        scan_hot_files(tiered)
    ) + len(kept)


def test_verify_archive_when_warm_page_bit_flipped_reports_sha256_and_page_crc(tiered):
    warm = tier_file(tiered, WARM)
    flip_bit_in_data_page(warm)
    with pytest.raises(OSError):  # the oracle: pyarrow's own page checksum verification
        pq.ParquetFile(warm, page_checksum_verification=True).read()
    quick = verify_archive(ArchiveCore(tiered, policy=POLICY))
    assert [p for p in quick.problems if "sha256" in p and warm.name in p]
    full = verify_archive(ArchiveCore(tiered, policy=POLICY), full=True)
    assert [p for p in full.problems if "page" in p and warm.name in p]


def test_verify_archive_full_when_hot_page_bit_flipped_reports_the_file(tiered):
    [hot, *_] = scan_hot_files(tiered)
    flip_bit_in_data_page(hot.path)
    with pytest.raises(OSError):
        pq.ParquetFile(hot.path, page_checksum_verification=True).read()
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY), full=True).problems
    kept = [p for folder in VersionLog(tiered).snapshot_dirs() for p in folder.rglob("*.pq")]
    [link] = [p for p in kept if p.samefile(hot.path)]  # a version's link: the same bytes
    about_hot = [p for p in problems if str(hot.path) in p]
    assert [p for p in about_hot if "sha256" in p] and [p for p in about_hot if "page" in p]
    same = f"{link}: the same file as {hot.path} (see there): not the bytes its name records"
    assert [p for p in problems if p.startswith(f"{same}; version(s) ")]
    assert all(str(hot.path) in p or str(link) in p for p in problems)


@pytest.fixture
def versioned(hot_only):
    """``hot_only`` with a version of its hot files recorded, then re-tiered (as ``tiered``):
    the moved hot files are gone, the version keeps them."""
    VersionLog(hot_only).record("compact")
    Archive(hot_only, policy=POLICY).retier(as_of=STAGE_1)
    return hot_only


def kept_hot_files(root) -> list:
    """The hot files kept for versions only (no live hot file is the same file)."""
    live = [hot.path for hot in scan_hot_files(root)]
    kept = sorted((root / "_skewtape_versions" / "hot").rglob("*.pq"))
    return [p for p in kept if not any(p.samefile(h) for h in live)]


def test_verify_archive_when_a_file_kept_for_versions_changed_names_it(versioned):
    [blob, *_] = kept_hot_files(versioned)  # the hot copy of a day re-tiering moved
    flip_bit_in_data_page(blob)

    problems = verify_archive(ArchiveCore(versioned, policy=POLICY)).problems

    assert [p for p in problems if p.startswith(f"{blob}: sha256 is ")] == [
        p for p in problems if "content name" in p
    ]
    assert len(problems) == 1 and blob.stem in problems[0]


def test_verify_archive_when_what_a_version_reads_is_gone_names_it_and_the_versions(
    versioned,
):
    [blob, *_] = kept_hot_files(versioned)
    blob.unlink()
    warm = tier_file(versioned, WARM)
    warm.unlink()

    problems = verify_archive(ArchiveCore(versioned, policy=POLICY)).problems

    assert [p for p in problems if str(blob) in p and "reads it but it is missing" in p]
    assert [p for p in problems if p.startswith(f"{warm}: missing (kept version(s) ")]


def test_verify_archive_reads_a_version_link_to_a_verified_hot_file_once(tiered, monkeypatch):
    hashed = []
    monkeypatch.setattr(integrity, "sha256_file", lambda p: hashed.append(p) or sha256_file(p))
    live = scan_hot_files(tiered)
    linked = [
        p for folder in VersionLog(tiered).snapshot_dirs() for p in folder.rglob("*.pq")
        if any(p.samefile(hot.path) for hot in live)
    ]  # fmt: skip

    assert verify_archive(ArchiveCore(tiered, policy=POLICY)).ok
    assert linked and not set(linked) & set(hashed)
    assert set(kept_hot_files(tiered)) <= set(hashed)  # the others are read


def test_verify_archive_when_file_missing_or_resized_names_it(tiered):
    cold, warm = tier_file(tiered, COLD), tier_file(tiered, WARM)
    cold.unlink()
    warm.chmod(0o644)
    with open(warm, "ab") as handle:
        handle.write(b"x")
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY)).problems
    assert any("missing" in p and cold.name in p for p in problems)
    assert any("size" in p and warm.name in p for p in problems)


def test_cli_verify_archive_when_damaged_exits_2_naming_the_file(tiered, capsys):
    assert main(["verify-archive", str(tiered), "--full"]) == 0
    warm = tier_file(tiered, WARM)
    flip_bit_in_data_page(warm)
    assert main(["verify-archive", str(tiered)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error:") and warm.name in err


@pytest.mark.parametrize("tier", ["HOT", WARM])
def test_query_when_footer_damaged_raises_typed_error_naming_the_file(tiered, tier):
    path = scan_hot_files(tiered)[0].path if tier == "HOT" else tier_file(tiered, tier)
    damage_footer(path)
    with pytest.raises(DamagedFileError) as raised:
        run_query("SELECT sum(price) FROM ticks", ArchiveCore(tiered))
    assert str(path) in str(raised.value) and "TProtocol" not in str(raised.value)


def test_retier_when_hot_footer_damaged_raises_typed_error_naming_the_file(tmp_path, no_fsync):
    root = build_archive(tmp_path, as_of=STAGE_1)
    [hot, *_] = scan_hot_files(root)
    damage_footer(hot.path)
    with pytest.raises(DamagedFileError) as raised:
        Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert str(hot.path) in str(raised.value) and "TProtocol" not in str(raised.value)


def test_archive_metrics_when_hot_footer_damaged_raises_typed_error_naming_the_file(tiered):
    [hot, *_] = scan_hot_files(tiered)
    damage_footer(hot.path)
    with pytest.raises(DamagedFileError, match=str(hot.path)):
        archive_metrics(ArchiveTiers.of(tiered, POLICY))


def test_retier_when_hot_page_bit_flipped_raises_typed_error_and_commits_nothing(
    tmp_path, no_fsync
):
    root = build_archive(tmp_path, as_of=STAGE_1)
    [hot, *_] = scan_hot_files(root)
    flip_bit_in_data_page(hot.path)
    before = files_under(tmp_path)
    with pytest.raises(DamagedFileError, match="sha256") as raised:  # before its pages
        Archive(root, policy=POLICY).retier(as_of=STAGE_1)
    assert raised.value.path == hot.path
    assert [f for f in files_under(tmp_path) if f.endswith(".parquet")] == [
        f for f in before if f.endswith(".parquet")
    ]
    assert CatalogStore(root).read().generation == 0


def test_verify_archive_when_footer_damaged_reports_the_file(tiered):
    cold = tier_file(tiered, COLD)
    damage_footer(cold)
    problems = verify_archive(ArchiveCore(tiered, policy=POLICY), full=True).problems
    assert any(str(cold) in p and "footer" in p for p in problems)
    assert not any("TProtocol" in p for p in problems)


# --- 3. relocatable ------------------------------------------------------------------------------


def test_copied_archive_when_original_deleted_queries_and_retiers_its_own_files(tiered):
    base = tiered.parent
    copy = base / "copy"
    for suffix in ("", "-warm", "-cold"):
        shutil.copytree(base / f"archive{suffix}", base / f"copy{suffix}")
    for suffix in ("", "-warm", "-cold"):
        shutil.rmtree(base / f"archive{suffix}")
    assert view_rows(copy) == expected_rows()
    assert verify_archive(ArchiveCore(copy, policy=POLICY), full=True).problems == []
    Archive(copy, policy=POLICY).retier(as_of=STAGE_2)
    assert view_rows(copy) == expected_rows()
    for item in CatalogStore(copy).read().files.values():
        assert ArchiveTiers.of(copy).resolve(item.path).is_relative_to(base / "copy-cold")


def test_read_catalog_when_entry_outside_its_tier_root_refuses(tiered):
    catalog = CatalogStore(tiered).read()
    [item] = [f for f in catalog.files.values() if f.tier == WARM]
    outside = item.path.replace("WARM/", "WARM/../../elsewhere/", 1)
    from dataclasses import replace

    files = {p: f for p, f in catalog.files.items() if p != item.path}
    files[outside] = replace(item, path=outside)
    partitions = {
        k: replace(p, file=outside) if p.file == item.path else p
        for k, p in catalog.partitions.items()
    }
    with pytest.raises(TickFormatError, match="outside"):
        CatalogStore(tiered).write(replace(catalog, files=files, partitions=partitions))


def test_verify_when_a_compaction_publishes_while_it_looks_reports_only_what_stays(
    tmp_path, no_fsync
):
    """A compaction had renamed a new day's hot file in and not yet recorded it: the first
    look finds a file the hot index does not list; verification waits for the writer and looks
    again. (A rewritten day's file is vouched for by the compaction's publication note.)"""
    import threading

    from skewtape_pipeline import faults

    root = build_archive(tmp_path, as_of=STAGE_1)
    published, looked = threading.Event(), threading.Event()

    def pause_after_the_rename(name: str) -> None:
        if name == "hot-published":
            published.set()
            looked.wait(30)  # the record is appended once verification looked once

    def compact() -> None:
        with faults.installed(pause_after_the_rename):
            write = SymbolDayWrite(symbol="NEW", day=DAYS[0], age_days=(STAGE_1 - DAYS[0]).days)
            compact_symbol_day(archive_at(root).core, day_ticks("KX-25MAR", DAYS[0]), write)

    writer = threading.Thread(target=compact)
    writer.start()
    try:
        assert published.wait(30)
        once = integrity._verify_once

        def first_look(core, *, full):
            found = once(core, full=full)
            looked.set()
            return found

        integrity._verify_once = first_look
        try:
            assert not once(ArchiveCore(root), full=False).ok  # what a look mid-publish sees
            result = verify_archive(ArchiveCore(root))
        finally:
            integrity._verify_once = once
    finally:
        looked.set()
        writer.join()
    assert result.ok, result.problems


def test_verify_when_the_lock_cannot_be_taken_reports_its_first_look(
    tmp_path, no_fsync, monkeypatch
):
    """An archive on a read-only file system (no lock file can be made): verification still
    reports what it found, never an OSError."""
    root = build_archive(tmp_path, as_of=STAGE_1)
    damaged = next(root.rglob("part-0.parquet"))
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2] ^= 0xFF
    damaged.write_bytes(bytes(data))

    def read_only(self, what, **options):
        raise OSError(30, "Read-only file system", str(self.root / ".skewtape-archive.lock"))

    monkeypatch.setattr(ArchiveCore, "locked", read_only)
    result = verify_archive(ArchiveCore(root))
    assert not result.ok and any(str(damaged) in p for p in result.problems)


# --- 4. an interrupted re-tiering's clean-up ------------------------------------------------------


def test_verify_when_retier_crashed_removing_moved_hot_files_says_rerun_retier(hot_only, capsys):
    with faults.installed(crash_at_name("removed:part-0.parquet")), pytest.raises(Crash):
        Archive(hot_only, policy=POLICY).retier(as_of=STAGE_1)  # committed, then killed
    assert view_rows(hot_only) == expected_rows()  # the moved day reads from its new file

    [problem] = verify_archive(ArchiveCore(hot_only, policy=POLICY)).problems

    assert "re-tiering" in problem and "interrupted" in problem
    assert f"skewtape-pipeline retier {hot_only}" in problem and "prune" in problem
    assert "gone" not in problem and "rebuild-catalog" not in problem
    assert main(["verify-archive", str(hot_only)]) == 2  # a finding, as every other
    assert "interrupted" in capsys.readouterr().err
    Archive(hot_only, policy=POLICY).retier(as_of=STAGE_1)  # the repair it names
    assert verify_archive(ArchiveCore(hot_only, policy=POLICY)).ok
    assert view_rows(hot_only) == expected_rows()


def test_verify_when_a_listed_hot_file_is_lost_still_says_its_ticks_are_gone(hot_only):
    [hot, *_] = scan_hot_files(hot_only)
    hot.path.unlink()  # not moved anywhere: its ticks are lost

    problems = verify_archive(ArchiveCore(hot_only, policy=POLICY)).problems

    [listed] = [p for p in problems if "the hot index lists it" in p]
    assert listed.startswith(str(hot.path)) and "its ticks are then gone" in listed
    assert "interrupted" not in listed

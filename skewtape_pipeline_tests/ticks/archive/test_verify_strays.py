"""``verify-archive`` and the files no record accounts for: a Parquet file in a warm or cold root
that the catalog does not list and no kept version reads is named as a leftover ``prune``
removes, without failing the verification; a stray Parquet file in the hot tier (which no reader
of the archive sees and nothing removes, but a glob of the root reads) is a problem."""

from __future__ import annotations

import shutil
from pathlib import Path

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.ops import integrity
from skewtape_pipeline.ticks.archive.store.catalog import CatalogStore
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline_tests.ticks.archive.test_versions import KEYS, POLICY, STAGE_2
from skewtape_pipeline_tests.ticks.archive.test_versions_damage import archive
from skewtape_pipeline_tests.ticks.conftest import archive_at

__all__ = ["archive"]  # the fixture: versions 1-10, consolidated files in the warm root


def catalogued_file(root: Path) -> Path:
    """A consolidated file the catalog lists (a local one)."""
    rel = sorted(CatalogStore(root).read().files)[0]
    path = ArchiveTiers.of(root, POLICY).resolve(rel)
    assert isinstance(path, Path) and path.is_file()
    return path


def test_verify_when_a_tier_root_holds_a_file_the_catalog_does_not_list_names_it_as_a_leftover(
    archive,
):
    listed = catalogued_file(archive)
    leftover = listed.with_name("copy.parquet")
    shutil.copyfile(listed, leftover)  # a consolidated file of this generation, unlisted
    handle = archive_at(archive, POLICY)
    found = handle.verify()
    assert found.ok and found.problems == []
    assert len(found.leftovers) == 1
    assert found.leftovers[0].startswith(f"{leftover}: a leftover, not in the catalog")
    assert "`prune` removes it" in found.leftovers[0]
    assert "1 leftover file(s)" in found.describe()
    assert leftover in handle.prune()  # what prune does with it: the finding says so
    assert handle.verify().leftovers == []


def test_verify_in_books_and_records_mode_names_a_leftover_as_retained_not_pruned(archive):
    """``prune`` removes nothing in that mode (WriteOnceError): the finding must not say it does."""
    listed = catalogued_file(archive)
    shutil.copyfile(listed, listed.with_name("copy.parquet"))
    handle = archive_at(archive, POLICY, books_and_records=True)
    with handle.writing():  # write-once mode on, for good
        pass
    found = handle.verify()
    assert found.ok and len(found.leftovers) == 1
    assert found.leftovers[0].endswith("; retained: books_and_records mode removes nothing")


def test_verify_when_a_replaced_file_is_kept_for_versions_names_no_leftover(archive):
    before = set(CatalogStore(archive).read().files)
    archive_at(archive, POLICY).retier(as_of=STAGE_2)  # replaces the file version 10 reads
    assert before - set(CatalogStore(archive).read().files)  # kept on disk for versions 9-10
    found = archive_at(archive, POLICY).verify()
    assert found.ok and found.leftovers == []


def test_verify_when_the_hot_tier_holds_a_stray_parquet_file_fails_naming_it(archive):
    symbol, day = KEYS[0]
    folder = archive / f"symbol={symbol}/year={day.year}/month={day.month:02d}/date={day}"
    folder.mkdir(parents=True, exist_ok=True)
    beside = folder / "part-1.parquet"  # where a hot file would be: a glob reads its rows
    in_root = archive / "notes.parquet"
    for stray in (beside, in_root):
        shutil.copyfile(catalogued_file(archive), stray)
    (archive / ".hidden.parquet").write_bytes(b"")  # dot files: readers and globs skip them
    found = archive_at(archive, POLICY).verify()
    assert not found.ok
    strays = [p for p in found.problems if "a stray Parquet file in the hot tier" in p]
    assert [p.split(": ")[0] for p in strays] == [str(in_root), str(beside)]
    assert all("move it out of the archive root" in p for p in strays)
    assert found.leftovers == []


def test_cli_verify_archive_when_a_leftover_is_there_prints_it_and_exits_0(archive, capsys):
    listed = catalogued_file(archive)
    leftover = listed.with_name("copy.parquet")
    shutil.copyfile(listed, leftover)
    assert main(["verify-archive", str(archive)]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[0].startswith(f"{leftover}: a leftover")
    assert out[1].startswith(f"{archive}: verified ") and out[1].endswith(
        "; 1 leftover file(s), named above"
    )


def test_cli_verify_archive_when_a_stray_and_a_leftover_are_there_exits_2_naming_both(
    archive, capsys
):
    listed = catalogued_file(archive)
    shutil.copyfile(listed, listed.with_name("copy.parquet"))
    shutil.copyfile(listed, archive / "notes.parquet")
    assert main(["verify-archive", str(archive)]) == 2
    captured = capsys.readouterr()
    assert captured.out.splitlines()[0].startswith(f"{archive / 'notes.parquet'}: a stray")
    assert "copy.parquet: a leftover" in captured.out
    assert "notes.parquet" in captured.err and "copy.parquet" not in captured.err


def test_verify_when_a_leftover_is_there_checks_each_file_once(archive, monkeypatch):
    """A leftover is confirmed under the lock (not a file a running writer has yet to list)
    without checking every file of the archive again: in books_and_records mode leftovers stay
    for good, so every verification, --full's reading of every page too, ran twice."""
    listed = catalogued_file(archive)
    shutil.copyfile(listed, listed.with_name("copy.parquet"))
    checked: list[object] = []
    check = integrity._check_recorded

    def counted(path, *args, **kwargs):
        checked.append(path)
        return check(path, *args, **kwargs)

    monkeypatch.setattr(integrity, "_check_recorded", counted)
    found = archive_at(archive, POLICY).verify()
    assert found.ok and len(found.leftovers) == 1
    assert checked and len(checked) == len(set(checked))


def test_verify_when_a_leftover_was_removed_meanwhile_names_it_no_more(archive, monkeypatch):
    """What the first look took for a leftover is looked at again under the lock: one removed
    meanwhile (a ``prune`` that held the lock) is named no more."""
    listed = catalogued_file(archive)
    copy = listed.with_name("copy.parquet")
    shutil.copyfile(listed, copy)
    first = integrity._verify_once

    def then_pruned(core, **kwargs):
        found = first(core, **kwargs)
        copy.unlink(missing_ok=True)
        return found

    monkeypatch.setattr(integrity, "_verify_once", then_pruned)
    found = archive_at(archive, POLICY).verify()
    assert found.ok and found.leftovers == []

"""Tests of snapshot verification, the hash cache and merged-table records."""

from __future__ import annotations

import json
import os
import time

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from skewtape_pipeline.errors import LocalStateError, VerificationError
from skewtape_pipeline.hashing import sha256_file
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST
from skewtape_pipeline.mirror.verify import (
    hash_cache_path,
    merged_tables,
    merged_tables_path,
    record_merged_table,
    verify_snapshot,
)
from skewtape_pipeline_tests.conftest import (
    make_snapshot,
    markets_table,
    rewrite_keeping_stamp,
    write_parquet,
)

FILL = "fills/kalshi/2026-11.parquet"


def _problems(snapshot, **options) -> list[str]:
    with pytest.raises(VerificationError) as caught:
        verify_snapshot(snapshot, **options)
    return caught.value.problems


def _date_files(snapshot, *, seconds_ago: int):
    """Set every file's mtime ``seconds_ago`` back; 0: now, so hashes taken now are racy."""
    mtime = time.time_ns() - seconds_ago * 10**9
    for path in snapshot.rglob("*"):
        if path.is_file():
            os.utime(path, ns=(mtime, mtime))
    return snapshot


def _merge_like_duckdb(snapshot, rel: str, query: str) -> str:
    """Rewrite table ``rel`` with DuckDB (new bytes), record the merge, return its sha256."""
    target = snapshot / rel
    out = snapshot / f"{rel}.new"
    duckdb.sql(query.format(src=f"'{target}'")).write_parquet(str(out))
    out.replace(target)
    digest = sha256_file(target)
    record_merged_table(snapshot, rel, digest)
    return digest


def test_verify_snapshot_when_sealed_passes_and_reports_counts(tmp_path):
    snapshot = make_snapshot(tmp_path)
    result = verify_snapshot(snapshot)
    listed = len(json.loads((snapshot / MANIFEST).read_bytes())["files"])
    assert result.ok
    assert result.files_checked == listed
    assert result.files_hashed == listed
    assert result.bytes_hashed > 0
    assert result.tables["markets.parquet"] == markets_table(("kalshi", "polymarket")).num_rows
    assert json.loads(json.dumps(result.to_dict()))["bundle_id"] == "skewtape-history-2026-11"


def test_verify_snapshot_when_run_twice_takes_hashes_from_the_cache(tmp_path):
    snapshot = _date_files(make_snapshot(tmp_path), seconds_ago=3_600)
    verify_snapshot(snapshot)
    again = verify_snapshot(snapshot)
    assert hash_cache_path(snapshot).is_file()
    assert again.files_hashed == 0
    assert again.files_checked > 0


def test_verify_snapshot_when_save_cache_false_writes_no_cache(tmp_path):
    snapshot = make_snapshot(tmp_path)
    verify_snapshot(snapshot, save_cache=False)
    assert not hash_cache_path(snapshot).exists()


def test_verify_snapshot_when_file_missing_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / FILL).unlink()
    assert _problems(snapshot) == [f"{FILL}: is missing"]


def test_verify_snapshot_when_extra_file_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / "fills" / "kalshi" / "2026-12.parquet").write_bytes(b"x")
    problems = _problems(snapshot)
    assert len(problems) == 1
    assert "fills/kalshi/2026-12.parquet" in problems[0] and "extra" in problems[0]


def test_verify_snapshot_when_temp_leftover_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / "fills" / ".2026-12.parquet.42.skewtape-tmp").write_bytes(b"half")
    problems = _problems(snapshot)
    assert len(problems) == 1
    assert "temporary" in problems[0] and "2026-12.parquet.42" in problems[0]


def test_verify_snapshot_when_symlink_present_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    os.symlink(snapshot / "README.md", snapshot / "LINK.md")
    assert any("LINK.md" in p and "link" in p for p in _problems(snapshot))


def test_verify_snapshot_when_local_state_folder_present_ignores_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / ".skewtape").mkdir()
    (snapshot / ".skewtape" / "notes.txt").write_text("local")
    assert verify_snapshot(snapshot).ok


def test_verify_snapshot_when_bytes_change_after_cache_rehashes_and_reports(tmp_path):
    snapshot = make_snapshot(tmp_path)
    verify_snapshot(snapshot)
    path = snapshot / "README.md"
    path.write_text("edited locally\n")
    stat = path.stat()
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns + 1_000_000_000))  # a new stamp
    problems = _problems(snapshot)
    assert len(problems) == 1
    assert problems[0].startswith("README.md: has sha256")


def test_verify_snapshot_when_files_fresh_second_run_rehashes_them(tmp_path):
    snapshot = _date_files(make_snapshot(tmp_path), seconds_ago=0)
    verify_snapshot(snapshot)
    again = verify_snapshot(snapshot)
    assert again.files_hashed == again.files_checked


def test_verify_snapshot_when_racy_file_rewritten_keeping_stamp_rehashes_and_reports(tmp_path):
    snapshot = _date_files(make_snapshot(tmp_path), seconds_ago=0)
    verify_snapshot(snapshot)
    path = snapshot / "README.md"
    rewrite_keeping_stamp(path, path.read_bytes().upper())
    problems = _problems(snapshot)
    assert len(problems) == 1 and problems[0].startswith("README.md: has sha256")


def test_verify_snapshot_when_mtime_restored_the_ctime_reveals_the_change(tmp_path):
    snapshot = _date_files(make_snapshot(tmp_path), seconds_ago=3_600)
    verify_snapshot(snapshot)
    path = snapshot / "README.md"
    original = path.read_bytes()
    time.sleep(0.01)  # let the ctime clock move on (coarse kernel ticks)
    rewrite_keeping_stamp(path, original.upper())  # size, inode and mtime as they were
    problems = _problems(snapshot)
    assert len(problems) == 1 and problems[0].startswith("README.md: has sha256")


def test_verify_snapshot_when_known_hashes_given_trusts_them_unless_full(tmp_path):
    snapshot = make_snapshot(tmp_path)
    real = sha256_file(snapshot / "README.md")
    trusted = verify_snapshot(snapshot, known_hashes={"README.md": real})
    assert trusted.files_hashed == trusted.files_checked - 1
    wrong = {"README.md": "0" * 64}
    assert any(
        p.startswith("README.md: has sha256") for p in _problems(snapshot, known_hashes=wrong)
    )
    assert verify_snapshot(snapshot, known_hashes=wrong, full=True).ok


def test_verify_snapshot_when_known_hash_predates_the_write_next_run_rehashes(tmp_path):
    snapshot = _date_files(make_snapshot(tmp_path), seconds_ago=3_600)
    path = snapshot / "README.md"
    hashed_at = time.time_ns() - 7_200 * 10**9  # the caller hashed before the file's write
    verify_snapshot(
        snapshot, known_hashes={"README.md": sha256_file(path)}, known_hashed_at_ns=hashed_at
    )
    rewrite_keeping_stamp(path, path.read_bytes().upper())
    problems = _problems(snapshot)
    assert len(problems) == 1 and problems[0].startswith("README.md: has sha256")


def test_verify_snapshot_when_manifest_edited_reports_its_checksums_line(tmp_path):
    snapshot = make_snapshot(tmp_path)
    raw = (snapshot / MANIFEST).read_bytes()
    (snapshot / MANIFEST).write_bytes(
        raw.replace(b"skewtape-history-2026-11", b"skewtape-history-2026-10")
    )
    problems = _problems(snapshot)
    assert len(problems) == 1
    assert problems[0].startswith(f"{MANIFEST}: has sha256")


def test_verify_snapshot_when_checksums_disagree_with_manifest_reports_both_sides(tmp_path):
    snapshot = make_snapshot(tmp_path)
    lines = (snapshot / CHECKSUMS).read_text().splitlines()
    kept = [line for line in lines if not line.endswith("  README.md")]
    (snapshot / CHECKSUMS).write_text("\n".join(kept) + "\n")
    problems = _problems(snapshot)
    assert any("README.md" in p and "not in CHECKSUMS.sha256" in p for p in problems)


def test_verify_snapshot_when_several_problems_lists_every_one(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / FILL).unlink()
    (snapshot / "extra.txt").write_text("x")
    (snapshot / "README.md").write_text("changed and longer than before\n")
    problems = _problems(snapshot)
    assert len(problems) == 3
    assert {p.split(":")[0] for p in problems} == {FILL, "extra.txt", "README.md"}


def test_verify_snapshot_when_table_changed_without_merge_record_reports_modified_locally(tmp_path):
    snapshot = make_snapshot(tmp_path)
    target = snapshot / "markets.parquet"
    duckdb.sql(f"SELECT * FROM read_parquet('{target}')").write_parquet(str(tmp_path / "m.parquet"))
    (tmp_path / "m.parquet").replace(target)  # same rows, DuckDB's bytes, no record
    problems = _problems(snapshot)
    assert len(problems) == 1 and "modified locally" in problems[0]


def test_verify_snapshot_when_merged_table_recorded_accepts_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(
        snapshot, "markets.parquet", "SELECT * FROM read_parquet({src}) ORDER BY 1, 2"
    )
    assert verify_snapshot(snapshot, full=True).ok
    assert set(merged_tables(snapshot)) == {"markets.parquet"}


def test_verify_snapshot_when_merged_record_names_other_bytes_reports_modified_locally(tmp_path):
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(snapshot, "markets.parquet", "SELECT * FROM read_parquet({src})")
    record_merged_table(snapshot, "markets.parquet", "1" * 64)
    assert any("modified locally" in p for p in _problems(snapshot))


def test_verify_snapshot_when_merged_table_has_duplicate_keys_reports_them(tmp_path):
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(
        snapshot,
        "markets.parquet",
        "SELECT * FROM read_parquet({src}) UNION ALL (SELECT * FROM read_parquet({src}) LIMIT 1)",
    )
    problems = _problems(snapshot)
    assert any("markets.parquet" in p and "more than once" in p for p in problems)
    assert any("markets.parquet" in p and "rows; expected" in p for p in problems)


def test_verify_snapshot_when_merged_table_has_null_key_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(
        snapshot,
        "fees.parquet",
        "SELECT venue, CASE WHEN category = 'sports' AND venue = 'kalshi' THEN NULL "
        "ELSE category END AS category, * EXCLUDE (venue, category) FROM read_parquet({src})",
    )
    assert any("fees.parquet" in p and "null 'category'" in p for p in _problems(snapshot))


def test_verify_snapshot_when_merged_table_has_wrong_row_count_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(snapshot, "markets.parquet", "SELECT * FROM read_parquet({src}) LIMIT 2")
    problems = _problems(snapshot)
    assert problems == [
        "markets.parquet: has 2 rows; expected "
        f"{markets_table(('kalshi', 'polymarket')).num_rows} (the manifest's)"
    ]


def test_verify_snapshot_when_merged_table_has_wrong_schema_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(
        snapshot, "markets.parquet", "SELECT * REPLACE (CAST(tick_size AS DOUBLE) AS tick_size) "
        "FROM read_parquet({src})"
    )  # fmt: skip
    problems = _problems(snapshot)
    assert len(problems) == 1 and "markets.parquet: has columns" in problems[0]
    assert "double" in problems[0]


def test_verify_snapshot_when_table_unreadable_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / "fees.parquet").write_bytes(b"garbage")
    record_merged_table(snapshot, "fees.parquet", sha256_file(snapshot / "fees.parquet"))
    assert any("fees.parquet" in p and "not a readable Parquet" in p for p in _problems(snapshot))


def test_verify_snapshot_when_manifest_missing_still_checks_files_against_checksums(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / MANIFEST).unlink()
    (snapshot / FILL).unlink()
    problems = _problems(snapshot)
    assert f"{MANIFEST}: is missing" in problems
    assert f"{FILL}: is missing" in problems


@pytest.mark.parametrize("holds", [[], ["notes.txt"], ["notes.txt", "fills/x.parquet"]])
def test_verify_snapshot_when_neither_seal_file_is_there_refuses_writing_no_cache(tmp_path, holds):
    """A folder that is no snapshot at all (a mistyped one) is refused with one problem, and
    no hash cache is written into it."""
    folder = tmp_path / "notes"
    folder.mkdir()
    for rel in holds:
        (folder / rel).parent.mkdir(parents=True, exist_ok=True)
        (folder / rel).write_text("not a snapshot")
    before = sorted(folder.rglob("*"))
    problems = _problems(folder)
    assert len(problems) == 1 and problems[0].startswith(
        f"it holds neither {MANIFEST} nor {CHECKSUMS}, so it is no snapshot; expected a snapshot"
    )
    assert sorted(folder.rglob("*")) == before


def test_verify_snapshot_when_only_checksums_remain_still_verifies_and_caches(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (snapshot / MANIFEST).unlink()
    assert _problems(snapshot) == [f"{MANIFEST}: is missing"]
    assert hash_cache_path(snapshot).is_file()


def test_record_merged_table_when_path_not_a_table_raises_and_writes_nothing(tmp_path):
    snapshot = make_snapshot(tmp_path)
    with pytest.raises(LocalStateError, match=r"README\.md"):
        record_merged_table(snapshot, "README.md", "a" * 64)
    with pytest.raises(LocalStateError, match="hex"):
        record_merged_table(snapshot, "fees.parquet", "xyz")
    assert not merged_tables_path(snapshot).exists()


def test_merged_tables_when_file_damaged_raises_and_verify_reports_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    merged_tables_path(snapshot).parent.mkdir()
    merged_tables_path(snapshot).write_text("[1, 2")
    with pytest.raises(LocalStateError, match=r"merged\.json"):
        merged_tables(snapshot)
    assert any("merged.json" in p for p in _problems(snapshot))


def test_verify_snapshot_when_table_rewritten_with_same_rows_pyarrow_reads_equal(tmp_path):
    """A recorded merge keeps rows equal: the check is by rows, not bytes."""
    snapshot = make_snapshot(tmp_path)
    _merge_like_duckdb(
        snapshot, "markets.parquet", "SELECT * FROM read_parquet({src}) ORDER BY 2 DESC"
    )
    merged = pq.read_table(snapshot / "markets.parquet")
    assert merged.num_rows == markets_table(("kalshi", "polymarket")).num_rows
    assert verify_snapshot(snapshot).ok
    write_parquet(snapshot / "markets.parquet", pa.Table.from_pylist([], schema=merged.schema))
    assert any("modified locally" in p for p in _problems(snapshot))


def test_verify_snapshot_when_checksums_lists_an_unsafe_path_reports_and_skips_it(tmp_path):
    snapshot = make_snapshot(tmp_path)
    (tmp_path / "outside.txt").write_text("not ours")
    (snapshot / MANIFEST).unlink()
    with open(snapshot / CHECKSUMS, "a") as handle:
        handle.write(f"{'0' * 64}  ../../outside.txt\n")
    problems = _problems(snapshot)
    assert any("unsafe path '../../outside.txt'" in p for p in problems)
    assert not any(p.startswith("../../outside.txt") for p in problems)

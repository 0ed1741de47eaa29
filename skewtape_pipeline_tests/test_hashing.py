"""Tests of the verified-hash cache, racily clean entries above all."""

from __future__ import annotations

import json
import os
import time

from skewtape_pipeline.hashing import RACY_WINDOW_NS, FileStamp, HashCache, sha256_file
from skewtape_pipeline_tests.conftest import rewrite_keeping_stamp

REL = "fills/kalshi/2026-11.parquet"
AN_HOUR_NS = 3_600 * 10**9


def _file(tmp_path, data: bytes = b"published bytes\n", *, age_ns: int = 0):
    """A file holding ``data`` whose mtime is ``age_ns`` in the past."""
    path = tmp_path / "snapshot" / REL
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    if age_ns:
        mtime = time.time_ns() - age_ns
        os.utime(path, ns=(mtime, mtime))
    return path


def _reopened(cache: HashCache) -> HashCache:
    cache.save()
    return HashCache(cache.path)


def test_hash_cache_lookup_when_entry_racy_and_stamp_kept_returns_none(tmp_path):
    path = _file(tmp_path)  # written a moment ago: within the racy window
    cache = HashCache(tmp_path / "hashes.json")
    old = sha256_file(path)
    # A rewrite in the same timestamp tick as the hash keeps every field of the stamp; simulate
    # it by recording the old bytes' hash against the stamp the file has after the rewrite.
    rewrite_keeping_stamp(path, b"PUBLISHED BYTES\n")
    cache.record(REL, path, old)
    assert cache.lookup(REL, path) is None
    assert _reopened(cache).lookup(REL, path) is None
    assert sha256_file(path) != old  # what the rehash a miss asks for finds


def test_hash_cache_lookup_when_rewritten_keeping_size_and_mtime_returns_none(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    cache = HashCache(tmp_path / "hashes.json")
    cache.record(REL, path, sha256_file(path))
    time.sleep(0.01)  # let the ctime clock move on (coarse kernel ticks)
    rewrite_keeping_stamp(path, b"PUBLISHED BYTES\n")  # touch -r: the ctime still moves
    assert cache.lookup(REL, path) is None
    assert _reopened(cache).lookup(REL, path) is None


def test_hash_cache_lookup_when_stamp_changed_returns_none(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    cache = HashCache(tmp_path / "hashes.json")
    cache.record(REL, path, sha256_file(path))
    path.write_bytes(b"a longer local edit\n")
    assert cache.lookup(REL, path) is None


def test_hash_cache_record_when_hashed_at_window_after_mtime_trusts_it(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    mtime = FileStamp.of(path).mtime_ns
    digest = sha256_file(path)
    cache = HashCache(tmp_path / "hashes.json")
    cache.record(REL, path, digest, hashed_at_ns=mtime + RACY_WINDOW_NS - 1)
    assert cache.lookup(REL, path) is None
    cache.record(REL, path, digest, hashed_at_ns=mtime + RACY_WINDOW_NS)  # rehashed once old
    assert cache.lookup(REL, path) == digest
    assert _reopened(cache).lookup(REL, path) == digest


def test_hash_cache_record_when_hashed_before_cache_opened_keeps_that_date(tmp_path):
    path = _file(tmp_path)
    hashed_at = time.time_ns()
    digest = sha256_file(path)
    mtime = hashed_at - RACY_WINDOW_NS + 1  # racy as of the hash; long safe as of now
    os.utime(path, ns=(mtime, mtime))
    cache = HashCache(tmp_path / "hashes.json")
    cache.opened_ns = hashed_at + AN_HOUR_NS  # a cache opened long after the hash was taken
    cache.record(REL, path, digest, hashed_at_ns=hashed_at)
    assert cache.lookup(REL, path) is None
    cache.record(REL, path, digest)  # undated: dated by the opening
    assert cache.lookup(REL, path) == digest


def test_hash_cache_load_when_saved_before_the_recorded_date_dates_entries_by_the_save(tmp_path):
    path = _file(tmp_path)
    mtime = FileStamp.of(path).mtime_ns
    cache = HashCache(tmp_path / "hashes.json")
    cache.record(REL, path, sha256_file(path), hashed_at_ns=mtime + AN_HOUR_NS)  # clock ahead
    cache.save()
    os.utime(cache.path, ns=(mtime, mtime + RACY_WINDOW_NS // 2))  # the file system's clock
    assert HashCache(cache.path).lookup(REL, path) is None


def test_hash_cache_load_when_entries_undated_dates_them_by_the_cache_file(tmp_path):
    path = _file(tmp_path)
    stamp, digest = FileStamp.of(path), sha256_file(path)
    cache_file = tmp_path / "hashes.json"
    cache_file.write_text(json.dumps({REL: [*stamp.to_list(), digest]}))
    os.utime(cache_file, ns=(stamp.mtime_ns, stamp.mtime_ns + RACY_WINDOW_NS // 2))
    assert HashCache(cache_file).lookup(REL, path) is None
    os.utime(cache_file, ns=(stamp.mtime_ns, stamp.mtime_ns + RACY_WINDOW_NS))
    assert HashCache(cache_file).lookup(REL, path) == digest


def test_hash_cache_load_when_an_entry_is_malformed_skips_only_it(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    stamp, digest = FileStamp.of(path), sha256_file(path)
    good = [*stamp.to_list(), digest, time.time_ns()]
    cache_file = tmp_path / "hashes.json"
    cache_file.write_text(
        json.dumps(
            {
                REL: good,
                "a.md": [1, 2, 3],
                "b.md": [1, 2, "3", 4, 5, digest, 6],
                "c.md": [1, 2, 3, 4, 5, "not hex", 6],
                "old.md": [stamp.inode, stamp.size, stamp.mtime_ns, digest, time.time_ns()],
                "d.md": {"inode": 1},
            }
        )
    )
    cache = HashCache(cache_file)
    assert cache.lookup(REL, path) == digest
    assert sorted(cache.entries()) == [REL]


def test_hash_cache_load_when_file_is_not_json_starts_empty(tmp_path):
    cache_file = tmp_path / "hashes.json"
    cache_file.write_bytes(b"\xff not json")
    assert HashCache(cache_file).entries() == {}


def test_file_stamp_when_rewritten_keeping_size_and_mtime_differs(tmp_path):
    path = _file(tmp_path, age_ns=3_600 * 10**9)
    before = FileStamp.of(path)
    time.sleep(0.01)  # let the ctime clock move on (coarse kernel ticks)
    rewrite_keeping_stamp(path, path.read_bytes().upper())
    after = FileStamp.of(path)
    assert (after.inode, after.size, after.mtime_ns) == (before.inode, before.size, before.mtime_ns)
    assert after != before


def test_hash_cache_load_when_entry_has_the_old_three_field_stamp_skips_it(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    stamp, digest = FileStamp.of(path), sha256_file(path)
    cache_file = tmp_path / "hashes.json"
    old = [stamp.inode, stamp.size, stamp.mtime_ns, digest, time.time_ns()]
    cache_file.write_text(json.dumps({REL: old}))
    assert HashCache(cache_file).lookup(REL, path) is None


def test_hash_cache_restamp_when_file_linked_keeps_entry_unless_changed_before(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    cache = HashCache(tmp_path / "hashes.json")
    digest = sha256_file(path)
    cache.record(REL, path, digest)
    was = FileStamp.of(path)
    time.sleep(0.01)
    os.link(path, tmp_path / "link")  # moves the ctime of the shared inode
    assert cache.lookup(REL, path) is None
    cache.restamp(REL, path, was=was)
    assert cache.lookup(REL, path) == digest
    time.sleep(0.01)
    rewrite_keeping_stamp(path, b"PUBLISHED BYTES\n")  # a rewrite before the next link
    was = FileStamp.of(path)
    os.unlink(tmp_path / "link")
    cache.restamp(REL, path, was=was)  # the entry vouched for the stamp before the rewrite
    assert cache.entries() == {}

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
    cache.record(REL, path, old)
    rewrite_keeping_stamp(path, b"PUBLISHED BYTES\n")
    assert cache.lookup(REL, path) is None
    assert _reopened(cache).lookup(REL, path) is None
    assert sha256_file(path) != old  # what the rehash a miss asks for finds


def test_hash_cache_lookup_when_entry_not_racy_trusts_the_kept_stamp(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    cache = HashCache(tmp_path / "hashes.json")
    old = sha256_file(path)
    cache.record(REL, path, old)
    rewrite_keeping_stamp(path, b"PUBLISHED BYTES\n")
    # Indistinguishable by its stamp: only a full scrub sees this change.
    assert cache.lookup(REL, path) == old
    assert _reopened(cache).lookup(REL, path) == old


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
    cache_file.write_text(json.dumps({REL: [stamp.inode, stamp.size, stamp.mtime_ns, digest]}))
    os.utime(cache_file, ns=(stamp.mtime_ns, stamp.mtime_ns + RACY_WINDOW_NS // 2))
    assert HashCache(cache_file).lookup(REL, path) is None
    os.utime(cache_file, ns=(stamp.mtime_ns, stamp.mtime_ns + RACY_WINDOW_NS))
    assert HashCache(cache_file).lookup(REL, path) == digest


def test_hash_cache_load_when_an_entry_is_malformed_skips_only_it(tmp_path):
    path = _file(tmp_path, age_ns=AN_HOUR_NS)
    stamp, digest = FileStamp.of(path), sha256_file(path)
    good = [stamp.inode, stamp.size, stamp.mtime_ns, digest, time.time_ns()]
    cache_file = tmp_path / "hashes.json"
    cache_file.write_text(
        json.dumps(
            {
                REL: good,
                "a.md": [1, 2, 3],
                "b.md": [1, 2, "3", digest, 4],
                "c.md": [1, 2, 3, "not hex", 4],
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

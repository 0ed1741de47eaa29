"""Warm and cold tiers on S3: re-tiering, the view, crashes, verification and rebuilds against a
real S3-compatible server (SeaweedFS on loopback; the ``seaweedfs`` fixture)."""

from __future__ import annotations

import uuid
from dataclasses import replace
from datetime import timedelta

import pyarrow as pa
import pytest
from pyarrow import fs

from skewtape_pipeline import faults
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.ticks import storage
from skewtape_pipeline.ticks.catalog import read_catalog
from skewtape_pipeline.ticks.lifecycle import retier
from skewtape_pipeline.ticks.query import run_query
from skewtape_pipeline.ticks.tiers import COLD, HOT, WARM, TierPolicy
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    Crash,
    build_archive,
    copy_data,
    crash_at,
    expected_rows,
    files_under,
    settled_files,
    tiers_by_day,
    view_rows,
)

STAGE_1 = DAYS[-1] + timedelta(days=1)  # ages 16 .. 1: cold, cold, warm, warm, warm, hot
STAGE_2 = DAYS[-1] + timedelta(days=14)  # every day cold


def s3_policy(server, prefix: str) -> TierPolicy:
    """:data:`POLICY` with its warm and cold roots under ``prefix`` in the server's bucket."""
    return replace(
        POLICY,
        warm=replace(POLICY.warm, root=server.uri(f"{prefix}/warm")),
        cold=replace(POLICY.cold, root=server.uri(f"{prefix}/cold")),
    )


def new_prefix() -> str:
    return f"t-{uuid.uuid4().hex[:12]}"


def bucket_filesystem(server) -> fs.S3FileSystem:
    """A plain pyarrow client of the server (not the archive's code), to look at the bucket."""
    environment = server.environment()
    return fs.S3FileSystem(
        access_key=environment["AWS_ACCESS_KEY_ID"],
        secret_key=environment["AWS_SECRET_ACCESS_KEY"],
        endpoint_override=server.endpoint,
        scheme="http",
        region="us-east-1",
    )


def objects_under(server, prefix: str) -> list[str]:
    """Keys (relative to ``prefix``) of every object below it in the bucket."""
    base = f"{server.bucket}/{prefix}"
    selector = fs.FileSelector(base, recursive=True, allow_not_found=True)
    infos = bucket_filesystem(server).get_file_info(selector)
    return sorted(i.path[len(base) + 1 :] for i in infos if i.type == fs.FileType.File)


def copy_objects(server, source: str, target: str) -> None:
    """Copy every object below ``source`` to the same keys below ``target``."""
    client = bucket_filesystem(server)
    for key in objects_under(server, source):
        client.copy_file(f"{server.bucket}/{source}/{key}", f"{server.bucket}/{target}/{key}")


def test_retier_when_tiers_are_on_s3_moves_days_there_and_view_returns_every_tick(
    tmp_path, no_fsync, s3_env
):
    prefix = new_prefix()
    policy = s3_policy(s3_env, prefix)
    root = build_archive(tmp_path, as_of=STAGE_1)
    assert view_rows(root, policy=policy) == expected_rows()

    first = retier(root, as_of=STAGE_1, policy=policy)
    assert first.committed and first.files_written
    assert all(str(f).startswith(f"s3://tiers/{prefix}/") for f in first.files_written)
    assert view_rows(root, policy=policy) == expected_rows()
    tiers = tiers_by_day(root, policy=policy)
    assert {tiers[key] for key in tiers if key[1] == DAYS[0]} == {COLD}
    assert {tiers[key] for key in tiers if key[1] == DAYS[3]} == {WARM}
    assert {tiers[key] for key in tiers if key[1] == DAYS[-1]} == {HOT}
    stored = objects_under(s3_env, prefix)
    assert "warm/_skewtape_archive.json" in stored and "cold/_skewtape_archive.json" in stored
    catalogued = {f.path.lower() for f in read_catalog(root).files.values()}
    assert catalogued == {k.lower() for k in stored if k.endswith(".parquet")}
    assert not (tmp_path / "archive-warm").exists() and not (tmp_path / "archive-cold").exists()

    second = retier(root, as_of=STAGE_2, policy=policy)
    assert set(tiers_by_day(root, policy=policy).values()) == {COLD}
    assert view_rows(root, policy=policy) == expected_rows()
    assert second.files_removed  # the warm objects, once the catalog no longer lists them
    assert [k for k in objects_under(s3_env, f"{prefix}/warm") if k.endswith(".parquet")] == []
    assert retier(root, as_of=STAGE_2, policy=policy).committed is False  # idempotent
    assert HOT not in set(tiers_by_day(root, policy=policy).values())


@pytest.mark.parametrize("stage", [1, 2])
def test_retier_on_s3_when_crashing_at_each_step_keeps_every_tick_once_and_rerun_finishes(
    tmp_path, no_fsync, s3_env, stage
):
    base_prefix = new_prefix()
    base = build_archive(tmp_path / "base", as_of=STAGE_1)
    if stage == 2:
        retier(base, as_of=STAGE_1, policy=s3_policy(s3_env, base_prefix))
    as_of = STAGE_1 if stage == 1 else STAGE_2

    def fresh(name: str):
        """A copy of the base archive, its tier objects copied under a new prefix."""
        prefix = new_prefix()
        copy_objects(s3_env, base_prefix, prefix)
        return copy_data(base.parent, tmp_path / name), prefix

    clean, clean_prefix = fresh("clean")
    names: list[str] = []
    with faults.installed(names.append):
        retier(clean, as_of=as_of, policy=s3_policy(s3_env, clean_prefix))
    assert {"committed", "audited-removals"} <= set(names)
    assert any(n.startswith("uploaded:") for n in names)
    removals = [i for i, n in enumerate(names) if n.startswith("removed:")]
    points = [i for i, n in enumerate(names) if not n.startswith("removed:")]
    points += [removals[0], removals[-1]]

    for point in points:
        work, prefix = fresh(f"crash-{point}")
        policy = s3_policy(s3_env, prefix)
        with pytest.raises(Crash), faults.installed(crash_at(point)):
            retier(work, as_of=as_of, policy=policy)
        assert view_rows(work, policy=policy) == expected_rows(), f"after a crash at {names[point]}"
        retier(work, as_of=as_of, policy=policy)
        assert view_rows(work, policy=policy) == expected_rows()
        assert settled_files(work.parent) == settled_files(clean.parent), (
            f"rerun after a crash at {names[point]} did not finish the move"
        )
        assert objects_under(s3_env, prefix) == objects_under(s3_env, clean_prefix), (
            f"rerun after a crash at {names[point]} left other objects"
        )
        verify_audit_log(work.parent / "audit.jsonl")
    assert files_under(clean.parent)  # the local side holds the hot tier, catalog and audit log


class CountingHandler(fs.FileSystemHandler):
    """A pyarrow filesystem delegating to ``inner`` that counts the files opened for reading and
    the bytes read from them."""

    def __init__(self, inner: fs.FileSystem):
        self.inner = inner
        self.opened: list[str] = []
        self.bytes_read = 0

    def reset(self) -> None:
        self.opened, self.bytes_read = [], 0

    def open_input_file(self, path):
        self.opened.append(path)
        return pa.PythonFile(_CountingReader(self.inner.open_input_file(path), self), mode="r")

    def open_input_stream(self, path):
        self.opened.append(path)
        return pa.PythonFile(_CountingReader(self.inner.open_input_file(path), self), mode="r")

    def get_type_name(self):
        return "counting"

    def normalize_path(self, path):
        return self.inner.normalize_path(path)

    def get_file_info(self, paths):
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector):
        return self.inner.get_file_info(selector)

    def create_dir(self, path, recursive):
        self.inner.create_dir(path, recursive=recursive)

    def delete_dir(self, path):
        self.inner.delete_dir(path)

    def delete_dir_contents(self, path, missing_dir_ok=False):
        self.inner.delete_dir_contents(path, missing_dir_ok=missing_dir_ok)

    def delete_root_dir_contents(self):
        raise NotImplementedError

    def delete_file(self, path):
        self.inner.delete_file(path)

    def move(self, src, dest):
        self.inner.move(src, dest)

    def copy_file(self, src, dest):
        self.inner.copy_file(src, dest)

    def open_output_stream(self, path, metadata):
        return self.inner.open_output_stream(path, metadata=metadata)

    def open_append_stream(self, path, metadata):
        raise NotImplementedError


class _CountingReader:
    """A readable, seekable file object over a pyarrow file, adding what it reads to a count."""

    def __init__(self, native, counter: CountingHandler):
        self.native, self.counter = native, counter
        self.closed = False

    def read(self, n=-1):
        data = self.native.read() if n is None or n < 0 else self.native.read(n)
        self.counter.bytes_read += len(data)
        return data

    def seek(self, offset, whence=0):
        return self.native.seek(offset, whence)

    def tell(self):
        return self.native.tell()

    def size(self):
        return self.native.size()

    def readable(self):
        return True

    def seekable(self):
        return True

    def writable(self):
        return False

    def close(self):
        self.closed = True
        self.native.close()


def test_query_over_s3_tiers_when_filtered_opens_and_reads_less_than_unfiltered(
    tmp_path, no_fsync, s3_env, monkeypatch
):
    prefix = new_prefix()
    policy = replace(s3_policy(s3_env, prefix), warm_max_age_days=30)  # warm: Jan and Feb
    root = build_archive(tmp_path, as_of=STAGE_1)
    retier(root, as_of=STAGE_1, policy=policy)
    months = {f.period for f in read_catalog(root).files.values()}
    assert months == {"2026-01", "2026-02"}

    counting = CountingHandler(storage.object_filesystem(policy.warm.root))
    monkeypatch.setattr(storage, "object_filesystem", lambda uri: fs.PyFileSystem(counting))

    def measured(sql: str) -> tuple[int, int, list]:
        counting.reset()
        rows = run_query(sql, root, policy=policy).to_pylist()
        return len(set(counting.opened)), counting.bytes_read, rows

    every = "SELECT symbol, date, ts, price FROM ticks WHERE tier = 'WARM'"
    opened_all, read_all, rows_all = measured(every)
    opened_month, read_month, rows_month = measured(every + " AND year = 2026 AND month = 1")
    opened_symbol, read_symbol, rows_symbol = measured(every + " AND symbol = 'ES'")

    assert opened_all == 2 and opened_month == 1  # the month=02 object is never opened
    assert read_month < read_all
    assert read_symbol < read_all  # row groups of other symbols skipped by their statistics
    assert rows_month == [r for r in rows_all if r["date"].month == 1]
    assert sorted(rows_symbol, key=str) == sorted(
        (r for r in rows_all if r["symbol"] == "ES"), key=str
    )
    assert rows_symbol

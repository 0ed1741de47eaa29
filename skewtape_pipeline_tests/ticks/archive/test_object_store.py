"""Warm and cold tiers on S3: re-tiering, the view, crashes, verification and rebuilds against a
real S3-compatible server (SeaweedFS on loopback; the ``seaweedfs`` fixture)."""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import replace
from datetime import timedelta

import pyarrow as pa
import pytest
from pyarrow import fs

from skewtape_pipeline import faults, storage
from skewtape_pipeline.audit import verify_audit_log
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import (
    CatalogMismatchError,
    ConfigError,
    DamagedFileError,
    ObjectStoreError,
    WriteOnceError,
)
from skewtape_pipeline.storage import sha256_of
from skewtape_pipeline.ticks.archive.core import ArchiveCore
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops import query
from skewtape_pipeline.ticks.archive.ops.integrity import verify_archive
from skewtape_pipeline.ticks.archive.ops.query import run_query, ticks_view_sql
from skewtape_pipeline.ticks.archive.store import trust
from skewtape_pipeline.ticks.archive.store.books import (
    EVENT_REFUSED,
    default_audit_log,
)
from skewtape_pipeline.ticks.archive.store.catalog import (
    CatalogStore,
)
from skewtape_pipeline.ticks.archive.store.consolidate import read_footer
from skewtape_pipeline.ticks.archive.store.placement import archive_metrics, locate, scan_hot_files
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM, TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import POLICY_RECORD, ArchiveTiers
from skewtape_pipeline.ticks.archive.store.trust import checked_catalog
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.scale_out.servers import free_port
from skewtape_pipeline_tests.ticks.archive.test_reads import assert_reads_as_the_view
from skewtape_pipeline_tests.ticks.archive_builders import (
    DAYS,
    POLICY,
    Crash,
    all_recorded,
    archive_files,
    build_archive,
    copy_data,
    crash_at,
    expected_rows,
    files_under,
    racy_rule_off,
    tiers_by_day,
    view_rows,
    write_four_day_csv,
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

    first = Archive(root, policy=policy).retier(as_of=STAGE_1)
    assert first.committed and first.files_written
    assert all(str(f).startswith(f"s3://tiers/{prefix}/") for f in first.files_written)
    assert view_rows(root, policy=policy) == expected_rows()
    tiers = tiers_by_day(root, policy=policy)
    assert {tiers[key] for key in tiers if key[1] == DAYS[0]} == {COLD}
    assert {tiers[key] for key in tiers if key[1] == DAYS[3]} == {WARM}
    assert {tiers[key] for key in tiers if key[1] == DAYS[-1]} == {HOT}
    stored = objects_under(s3_env, prefix)
    assert "warm/_skewtape_archive.json" in stored and "cold/_skewtape_archive.json" in stored
    catalogued = {f.path.lower() for f in CatalogStore(root).read().files.values()}
    assert catalogued == {k.lower() for k in stored if k.endswith(".parquet")}
    assert not (tmp_path / "archive-warm").exists() and not (tmp_path / "archive-cold").exists()

    second = Archive(root, policy=policy).retier(as_of=STAGE_2)
    assert set(tiers_by_day(root, policy=policy).values()) == {COLD}
    assert view_rows(root, policy=policy) == expected_rows()
    assert second.files_removed  # moved hot files; the warm objects are kept for past versions
    warm = f"{prefix}/warm"
    assert [k for k in objects_under(s3_env, warm) if k.endswith(".parquet")]
    pruned = Archive(root, policy=policy).versions.prune(keep_last=1)  # then no version reads them
    assert any(str(f).startswith(f"s3://tiers/{warm}/") for f in pruned.files_removed)
    assert [k for k in objects_under(s3_env, warm) if k.endswith(".parquet")] == []
    assert Archive(root, policy=policy).retier(as_of=STAGE_2).committed is False  # idempotent
    assert HOT not in set(tiers_by_day(root, policy=policy).values())


@pytest.mark.parametrize("stage", [1, 2])
def test_retier_on_s3_when_crashing_at_each_step_keeps_every_tick_once_and_rerun_finishes(
    tmp_path, no_fsync, s3_env, stage
):
    base_prefix = new_prefix()
    base = build_archive(tmp_path / "base", as_of=STAGE_1)
    if stage == 2:
        Archive(base, policy=s3_policy(s3_env, base_prefix)).retier(as_of=STAGE_1)
    as_of = STAGE_1 if stage == 1 else STAGE_2

    def fresh(name: str):
        """A copy of the base archive, its tier objects copied under a new prefix (the copy
        records no tier policy: its first re-tiering records the new prefix's)."""
        prefix = new_prefix()
        copy_objects(s3_env, base_prefix, prefix)
        root = copy_data(base.parent, tmp_path / name)
        (root / POLICY_RECORD).unlink(missing_ok=True)
        return root, prefix

    clean, clean_prefix = fresh("clean")
    names: list[str] = []
    with faults.installed(names.append):
        Archive(clean, policy=s3_policy(s3_env, clean_prefix)).retier(as_of=as_of)
    assert {"committed", "audited-removals"} <= set(names)
    assert any(n.startswith("uploaded:") for n in names)
    removals = [i for i, n in enumerate(names) if n.startswith("removed:")]
    points = [i for i, n in enumerate(names) if not n.startswith("removed:")]
    points += [removals[0], removals[-1]]

    for point in points:
        work, prefix = fresh(f"crash-{point}")
        policy = s3_policy(s3_env, prefix)
        with pytest.raises(Crash), faults.installed(crash_at(point)):
            Archive(work, policy=policy).retier(as_of=as_of)
        assert view_rows(work, policy=policy) == expected_rows(), f"after a crash at {names[point]}"
        Archive(work, policy=policy).retier(as_of=as_of)
        assert view_rows(work, policy=policy) == expected_rows()
        assert all_recorded(work), f"after the rerun of a crash at {names[point]}"
        assert archive_files(work.parent) == archive_files(clean.parent), (
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
        self.asked: list[str] = []  # the paths asked about one by one (a HEAD each)
        self.listed: list[str] = []  # the folders listed

    def reset(self) -> None:
        self.opened, self.bytes_read, self.asked, self.listed = [], 0, [], []

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
        self.asked += paths
        return self.inner.get_file_info(paths)

    def get_file_info_selector(self, selector):
        self.listed.append(selector.base_dir)
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


def test_catalog_check_on_s3_lists_each_store_once_and_asks_about_no_file_one_by_one(
    tmp_path, no_fsync, s3_env, monkeypatch
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    catalogued = [f.path for f in CatalogStore(root).read().files.values()]
    counting = CountingHandler(storage.object_filesystem(policy.warm.root))
    monkeypatch.setattr(storage, "object_filesystem", lambda uri: fs.PyFileSystem(counting))
    tiers = ArchiveTiers.of(root, policy)
    keys = [tiers.resolve(rel).key for rel in catalogued]

    assert checked_catalog(tiers).files == CatalogStore(root).read().files
    assert len(catalogued) == 2 and set(keys).isdisjoint(counting.asked)
    assert sorted(counting.listed) == sorted(
        tiers.stores[tier].base for tier in (WARM, COLD)
    )  # one listing per store

    counting.reset()
    tiers.resolve(catalogued[0]).filesystem.delete_file(keys[0])
    with pytest.raises(CatalogMismatchError, match=r"lists 1 file.* not on disk") as refused:
        checked_catalog(tiers)
    assert refused.value.paths == [f"s3://{keys[0]}"] and set(keys).isdisjoint(counting.asked)


def test_query_over_s3_tiers_when_filtered_opens_and_reads_less_than_unfiltered(
    tmp_path, no_fsync, s3_env, monkeypatch
):
    prefix = new_prefix()
    policy = replace(s3_policy(s3_env, prefix), warm_max_age_days=30)  # warm: Jan and Feb
    root = build_archive(tmp_path, as_of=STAGE_1)
    Archive(root, policy=policy).retier(as_of=STAGE_1)
    months = {f.period for f in CatalogStore(root).read().files.values()}
    assert months == {"2026-01", "2026-02"}

    counting = CountingHandler(storage.object_filesystem(policy.warm.root))
    monkeypatch.setattr(storage, "object_filesystem", lambda uri: fs.PyFileSystem(counting))
    # What is measured is the scan: verifying the objects first (trust.verify_before_reading,
    # tested on its own) reads every object once it changed, here on each run.
    monkeypatch.setattr(query, "verify_before_reading", lambda *args: None)

    def measured(sql: str) -> tuple[int, int, list]:
        counting.reset()
        rows = run_query(sql, ArchiveCore(root, policy=policy)).to_pylist()
        return len(set(counting.opened)), counting.bytes_read, rows

    every = "SELECT symbol, date, ts, price FROM ticks WHERE tier = 'WARM'"
    opened_all, read_all, rows_all = measured(every)
    opened_month, read_month, rows_month = measured(every + " AND year = 2026 AND month = 1")
    _, read_symbol, rows_symbol = measured(every + " AND symbol = 'ES'")

    assert opened_all == 2 and opened_month == 1  # the month=02 object is never opened
    assert read_month < read_all
    assert read_symbol < read_all  # row groups of other symbols skipped by their statistics
    assert rows_month == [r for r in rows_all if r["date"].month == 1]
    assert sorted(rows_symbol, key=str) == sorted(
        (r for r in rows_all if r["symbol"] == "ES"), key=str
    )
    assert rows_symbol
    with pytest.raises(ConfigError, match="use open_ticks_view"):
        ticks_view_sql(ArchiveCore(root, policy=policy))  # its datasets exist only on a connection


def tiered_on_s3(tmp_path, server):
    """An archive re-tiered once at :data:`STAGE_1` with its warm and cold roots on S3."""
    policy = s3_policy(server, new_prefix())
    root = build_archive(tmp_path, as_of=STAGE_1)
    Archive(root, policy=policy).retier(as_of=STAGE_1)
    return root, policy


def flip_a_byte(server, uri: str) -> None:
    """Overwrite the object at ``uri`` with one byte in its middle changed (same size)."""
    key = uri.removeprefix("s3://")
    client = bucket_filesystem(server)
    with client.open_input_stream(key) as stream:
        data = bytearray(stream.read())
    data[len(data) // 3] ^= 0xFF
    with client.open_output_stream(key) as out:
        out.write(bytes(data))


def test_verify_archive_on_s3_when_an_object_is_corrupted_names_it(tmp_path, no_fsync, s3_env):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    clean = verify_archive(ArchiveCore(root, policy=policy), full=True)
    catalog = CatalogStore(root).read()
    kept = [p for folder in VersionLog(root).snapshot_dirs() for p in folder.rglob("*.pq")]
    assert clean.ok, clean.problems
    assert clean.files_checked == len(catalog.files) + len(scan_hot_files(root)) + len(kept)
    [cold] = [f for f in catalog.files.values() if f.tier == COLD]
    uri = str(ArchiveTiers.of(root, policy).resolve(cold.path))
    assert uri.startswith(f"s3://tiers/{policy.cold.root.split('/')[3]}/cold/year=2026/")

    flip_a_byte(s3_env, uri)

    quick = verify_archive(ArchiveCore(root, policy=policy))
    assert [p for p in quick.problems if p.startswith(uri)] == [
        f"{uri}: sha256 is {sha256_of(ArchiveTiers.of(root, policy).resolve(cold.path))}, "
        f"the catalog recorded {cold.sha256}"
    ]
    full = verify_archive(ArchiveCore(root, policy=policy), full=True)
    assert any(p.startswith(f"{uri}: row group") or "footer" in p for p in full.problems)
    assert len(full.problems) == 2


def test_query_over_s3_when_an_object_is_overwritten_after_a_query_refuses_naming_it(
    tmp_path, no_fsync, s3_env, monkeypatch
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    racy_rule_off(monkeypatch)
    hashed = []
    monkeypatch.setattr(trust, "sha256_of", lambda file: hashed.append(file) or sha256_of(file))
    sql = "SELECT sum(price) AS p, sum(quantity) AS q FROM ticks"
    answer = run_query(sql, ArchiveCore(root, policy=policy))  # verifies every object once
    objects = [f for f in hashed if isinstance(f, storage.ObjectFile)]
    assert len(objects) == len(CatalogStore(root).read().files)
    hashed.clear()
    assert run_query(sql, ArchiveCore(root, policy=policy)) == answer
    assert hashed == []  # trusted by their unchanged stamps
    [cold] = [f for f in CatalogStore(root).read().files.values() if f.tier == COLD]
    uri = str(ArchiveTiers.of(root, policy).resolve(cold.path))

    flip_a_byte(s3_env, uri)  # same size, within the same second: the ETag moves

    with pytest.raises(DamagedFileError, match="the catalog recorded") as raised:
        run_query(sql, ArchiveCore(root, policy=policy))
    assert str(raised.value).startswith(f"{uri}: sha256 is ")


@pytest.mark.parametrize("tier", [WARM, COLD])
def test_verify_archive_on_s3_when_a_tier_marker_object_is_deleted_reports_it(
    tmp_path, no_fsync, s3_env, tier
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    marker = policy.store_for(tier, root).file("_skewtape_archive.json")
    assert storage.exists(marker) and verify_archive(ArchiveCore(root, policy=policy)).ok

    bucket_filesystem(s3_env).delete_file(marker.key)

    problems = verify_archive(ArchiveCore(root, policy=policy)).problems
    assert len(problems) == 1 and problems[0].startswith(f"{marker.uri}: missing")


def test_rebuild_catalog_on_s3_when_the_catalog_is_lost_restores_it(tmp_path, no_fsync, s3_env):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    before = CatalogStore(root).read()
    CatalogStore(root).path.unlink()
    with pytest.raises(CatalogMismatchError, match="s3://tiers/"):
        Archive(root, policy=policy).retier(as_of=STAGE_2)  # the objects are not accounted for

    result = Archive(root, policy=policy).rebuild_catalog()

    after = CatalogStore(root).read()
    assert result.files == len(before.files) and result.symbol_days == len(before.partitions)
    assert after.files == before.files
    assert {k: (p.file, p.rows, p.byte_share) for k, p in after.partitions.items()} == {
        k: (p.file, p.rows, p.byte_share) for k, p in before.partitions.items()
    }
    assert view_rows(root, policy=policy) == expected_rows()
    assert verify_archive(ArchiveCore(root, policy=policy), full=True).ok


@pytest.mark.parametrize("broken", ["unreachable endpoint", "missing bucket", "bad credentials"])
def test_s3_tier_when_store_cannot_be_used_raises_typed_error_naming_uri_changes_nothing(
    tmp_path, no_fsync, s3_env, monkeypatch, broken
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    prefix = policy.warm.root.split("/")[3]
    if broken == "unreachable endpoint":
        warm = s3_env.uri(f"{prefix}/warm", port=free_port())
    elif broken == "missing bucket":
        warm = s3_env.uri(f"{prefix}/warm", bucket="no-such-bucket")
    else:
        warm = policy.warm.root
        monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    broken_policy = replace(policy, warm=replace(policy.warm, root=warm))
    (root / POLICY_RECORD).unlink()  # an archive recording no policy takes the one given
    local, stored = files_under(tmp_path), objects_under(s3_env, prefix)
    named = warm.partition("?")[0]
    [warm_file] = [f.path for f in CatalogStore(root).read().files.values() if f.tier == WARM]

    for attempt in (
        lambda: Archive(root, policy=broken_policy).retier(as_of=STAGE_2),
        lambda: verify_archive(ArchiveCore(root, policy=broken_policy)),
        lambda: Archive(root, policy=broken_policy).rebuild_catalog(),
        lambda: view_rows(root, policy=broken_policy),
        lambda: Archive(root, policy=broken_policy).read(["ES"], start=DAYS[2]),  # warm days
        # a footer read through the broken store: never "damaged"
        lambda: read_footer(ArchiveTiers.of(root, broken_policy).resolve(warm_file)),
    ):
        with pytest.raises(ObjectStoreError) as refused:
            attempt()
        assert refused.value.uri.startswith(named) and refused.value.uri in str(refused.value)
    assert files_under(tmp_path) == local
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", s3_env.environment()["AWS_SECRET_ACCESS_KEY"])
    assert objects_under(s3_env, prefix) == stored


def test_prune_versions_when_the_recorded_s3_tier_refuses_keeps_every_version(
    tmp_path, no_fsync, s3_env, monkeypatch
):
    root, _ = tiered_on_s3(tmp_path, s3_env)  # the archive records its S3 policy
    versions = [v.version for v in Archive(root).versions.list()]
    assert len(versions) > 1  # one to prune
    local = files_under(tmp_path)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    with pytest.raises(ObjectStoreError):
        Archive(root).versions.prune(keep_last=1)
    assert files_under(tmp_path) == local
    assert [v.version for v in Archive(root).versions.list()] == versions


def test_seaweedfs_listens_only_on_the_free_ports_it_was_given(s3_env):
    assert s3_env.listening_ports() == set(s3_env.ports.values())
    fixed = {9333, 9340, 8888, 7333, 8181, 9101, 23646, 19333, 19340, 18888, 18333, 33646}
    assert not s3_env.listening_ports() & fixed


def test_cli_round_trip_when_policy_puts_warm_and_cold_on_s3(tmp_path, s3_env, capsys):
    prefix = new_prefix()
    policy_file = tmp_path / "tiers.toml"
    policy_file.write_text(
        "hot_max_age_days = 2\nwarm_max_age_days = 10\n"
        f'[warm]\nroot = "{s3_env.uri(prefix + "/warm")}"\n'
        f'[cold]\nroot = "{s3_env.uri(prefix + "/cold")}"\n'
    )
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "data" / "archive"
    policy = ["--tier-policy", str(policy_file)]

    def cli(*argv: str) -> tuple[int, str, str]:
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    code, _, err = cli("compact-ticks", str(source), "--out", str(archive), "--as-of", "2025-12-05",
                       "--price-scale", "2", *policy)  # fmt: skip
    assert code == 0, err
    count = "SELECT tier, count(*) AS n, sum(quantity) AS q FROM ticks GROUP BY tier ORDER BY 1"
    code, out, err = cli("retier", str(archive), "--as-of", "2025-12-12", *policy)
    assert code == 0, err
    assert "moved 4 symbol-days" in out
    assert [k for k in objects_under(s3_env, prefix) if k.endswith(".parquet")]
    code, out, err = cli("query", count, "--archive", str(archive), "--json", *policy)
    assert code == 0, err
    assert [(r["tier"], r["n"], r["q"]) for r in json.loads(out)] == [
        ("COLD", 3, 6),
        ("WARM", 9, 18),
    ]
    code, out, err = cli("verify-archive", str(archive), "--full", *policy)
    assert code == 0, err
    kept = [p for folder in VersionLog(archive).snapshot_dirs() for p in folder.rglob("*.pq")]
    assert f"verified {2 + len(kept)} files" in out  # 2 consolidated objects, the versions' files

    bad = tmp_path / "bad.toml"
    bad.write_text(
        policy_file.read_text().replace(f"127.0.0.1:{s3_env.s3_port}", f"127.0.0.1:{free_port()}")
    )
    code, out, err = cli("verify-archive", str(archive), "--tier-policy", str(bad))
    assert code != 0 and "Traceback" not in err
    assert f"s3://tiers/{prefix}/" in err


def test_withdraw_on_s3_hides_the_day_at_once_and_retier_rewrites_its_object_without_it(
    tmp_path, no_fsync, s3_env
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    prefix = policy.cold.root.split("/")[3]
    withdrawn = ("ES", DAYS[1])  # cold at STAGE_1
    [old] = [f.path for f in CatalogStore(root).read().files.values() if f.tier == COLD]
    assert Archive(root, policy=policy).withdraw([withdrawn]) == [withdrawn]
    wanted = [row for row in expected_rows() if (row[0], row[1]) != withdrawn]
    assert view_rows(root, policy=policy) == wanted
    assert locate(ArchiveTiers.of(root, policy), *withdrawn) is None

    result = Archive(root, policy=policy).retier(as_of=STAGE_1)

    assert result.purged == [withdrawn]
    [new] = [f.path for f in CatalogStore(root).read().files.values() if f.tier == COLD]
    assert new != old and withdrawn not in CatalogStore(root).read().partitions
    Archive(root, policy=policy).versions.prune(keep_last=1)  # past versions read the old object
    cold_objects = [k for k in objects_under(s3_env, f"{prefix}/cold") if k.endswith(".parquet")]
    assert cold_objects == [new.removeprefix("COLD/")]  # the old object was removed
    assert view_rows(root, policy=policy) == wanted
    place = locate(ArchiveTiers.of(root, policy), "ES", DAYS[0])
    assert str(place.path) == f"s3://tiers/{prefix}/cold/{new.removeprefix('COLD/')}"
    metrics = archive_metrics(ArchiveTiers.of(root, policy))
    assert metrics.tiers[COLD].bytes == bucket_filesystem(s3_env).get_file_info(place.path.key).size


def test_retier_on_s3_in_books_and_records_mode_retains_replaced_objects(
    tmp_path, no_fsync, s3_env
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    prefix = policy.warm.root.split("/")[3]
    Archive(root, policy=policy, audit_log=default_audit_log(root)).core.books.enable(reason="test")
    warm_before = [k for k in objects_under(s3_env, f"{prefix}/warm") if k.endswith(".parquet")]
    assert warm_before

    result = Archive(root, policy=policy).retier(as_of=STAGE_2)

    assert result.books_and_records and result.files_removed == []
    retained = {str(f) for f in result.files_retained}
    assert {f"s3://tiers/{prefix}/warm/{k}" for k in warm_before} <= retained
    assert [k for k in objects_under(s3_env, f"{prefix}/warm") if k.endswith(".parquet")] == (
        warm_before
    )
    assert view_rows(root, policy=policy) == expected_rows()  # replaced objects never read
    assert set(tiers_by_day(root, policy=policy).values()) == {COLD}
    with pytest.raises(WriteOnceError) as refused:  # withdrawing would rewrite an object
        Archive(root, policy=policy).withdraw([("ES", DAYS[0])])
    assert str(refused.value.path).startswith(f"s3://tiers/{prefix}/cold/year=2026/part-")
    records = [json.loads(line) for line in (tmp_path / "audit.jsonl").read_text().splitlines()]
    [record] = [r for r in records if r["event"] == EVENT_REFUSED]
    assert record["file"] == str(refused.value.path)


def test_archive_read_over_s3_tiers_equals_the_view_and_refuses_an_object_changed_since(
    tmp_path, no_fsync, s3_env
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    handle = Archive(root, policy=policy, audit_log=None)
    assert_reads_as_the_view(handle)
    handle.retier(as_of=STAGE_2)  # every day cold, in the S3 cold root
    assert set(handle.read(columns=["tier"])["tier"].to_pylist()) == {COLD}
    assert_reads_as_the_view(handle)
    assert_reads_as_the_view(handle, as_of=1)  # before: hot, warm and cold
    [cold] = [f for f in CatalogStore(root).read().files.values() if f.tier == COLD]
    uri = str(handle.tiers.resolve(cold.path))
    flip_a_byte(s3_env, uri)
    with pytest.raises(DamagedFileError, match="the catalog recorded") as raised:
        handle.read(["ES"])
    assert uri in str(raised.value)


def test_read_and_query_over_s3_tiers_ask_the_objects_stamps_side_by_side(
    tmp_path, no_fsync, s3_env, monkeypatch
):
    root, policy = tiered_on_s3(tmp_path, s3_env)  # ES: cold and warm objects, a hot file
    handle = Archive(root, policy=policy, audit_log=None)
    objects = {str(handle.tiers.resolve(f.path)) for f in CatalogStore(root).read().files.values()}
    assert len(objects) >= 2
    real_stamp_of = storage.stamp_of

    def first_two_wait_for_each_other(monkeypatch) -> None:
        """The first two objects asked about wait for each other: asked one at a time, the
        first would wait in vain (BrokenBarrierError)."""
        both_asked, waiting = threading.Barrier(2, timeout=20), iter(range(2))

        def stamp_of(file):
            if str(file) in objects and next(waiting, None) is not None:
                both_asked.wait()
            return real_stamp_of(file)

        monkeypatch.setattr(storage, "stamp_of", stamp_of)

    first_two_wait_for_each_other(monkeypatch)
    got = handle.read(["ES"])
    first_two_wait_for_each_other(monkeypatch)
    (count,) = run_query("SELECT count(*) AS n FROM ticks", ArchiveCore(root, policy=policy))[
        "n"
    ].to_pylist()

    assert set(got["tier"].to_pylist()) == {HOT, WARM, COLD}
    assert count == view_rows_count(handle)
    assert_reads_as_the_view(handle)


def view_rows_count(handle: Archive) -> int:
    """Rows of the whole archive, as ``Archive.read`` returns them."""
    return handle.read().num_rows


def test_stamps_of_when_objects_and_local_files_mix_gives_each_its_own_in_order(
    tmp_path, no_fsync, s3_env
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    tiers = ArchiveTiers.of(root, policy)
    objects = [tiers.resolve(f.path) for f in CatalogStore(root).read().files.values()]
    hot = scan_hot_files(root)[0].path
    gone_object = replace(objects[0], uri=objects[0].uri + ".gone", key=objects[0].key + ".gone")
    gone_file = tmp_path / "gone.parquet"
    files = [objects[0], hot, gone_object, gone_file, *objects[1:]]

    found = storage.stamps_of(files)

    expected = [storage.stamp_of(f) for f in (objects[0], hot)] + [None, None]
    assert found == expected + [storage.stamp_of(f) for f in objects[1:]]
    assert storage.stamps_of([]) == []

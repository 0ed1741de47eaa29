"""Fetching from the publisher (``mirror.fetch``) over a real web server (nginx on loopback) and
from a local folder: months discovered without a listing, verified, placed whole, resumed, the
apply trusting what the fetch verified."""

from __future__ import annotations

import itertools
import math
import os
import shutil
from dataclasses import replace
from pathlib import Path

import obstore
import pytest
from obstore.store import LocalStore

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import ChainError, ConfigError
from skewtape_pipeline.hashing import HashCache
from skewtape_pipeline.mirror import transfer as transfer_module
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.mirror.fetch import fetch_deltas, fetch_snapshot
from skewtape_pipeline.mirror.format import MANIFEST
from skewtape_pipeline.mirror.preflight import check_delta_files, read_delta_head
from skewtape_pipeline.mirror.remote import newest_snapshot_month, remote_delta
from skewtape_pipeline.mirror.sources import (
    LowSpeedCheck,
    StalledTransfer,
    TransferSettings,
    open_source,
)
from skewtape_pipeline.mirror.verify import verify_snapshot
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, tree_state
from skewtape_pipeline_tests.mirror.publisher_servers import (
    Fault,
    FaultProxy,
    age_files,
    start_nginx,
)

DELTA_MONTHS = ("2026-10", "2026-11", "2026-12")
FAST = TransferSettings(attempts=3, backoff=0.0, read_timeout=5.0)
ONE_TRY = TransferSettings(attempts=1, connections=1, read_timeout=5.0)


def published_files(folder: Path) -> dict[str, bytes]:
    """{path: bytes} of every file below ``folder``, local state (``.skewtape/``) left out."""
    return {
        p.relative_to(folder).as_posix(): p.read_bytes()
        for p in sorted(folder.rglob("*"))
        if p.is_file() and ".skewtape" not in p.relative_to(folder).parts
    }


def writable_published(month: Path) -> list[str]:
    """The published files of ``month`` (its local state aside) that anyone may write to."""
    return [rel for rel in published_files(month) if (month / rel).stat().st_mode & 0o222]


def test_fetch_deltas_from_nginx_places_every_published_month_byte_for_byte(
    subscriber, publisher, nginx_publisher
):
    result = fetch_deltas(nginx_publisher.url, subscriber, settings=FAST)

    assert [m.month for m in result.months] == list(DELTA_MONTHS)
    assert result.next_unpublished == "2027-01"
    for month in DELTA_MONTHS:
        fetched = subscriber / "deltas" / month
        assert published_files(fetched) == published_files(publisher / "deltas" / month)
    assert [p.name for p in (subscriber / "deltas").iterdir() if p.name.startswith(".")] == []
    assert writable_published(subscriber / "deltas" / DELTA_MONTHS[0]) == []


def test_fetch_then_catch_up_reaches_the_published_snapshot_without_hashing_the_deltas_again(
    subscriber, publisher, nginx_publisher
):
    fetch_deltas(nginx_publisher.url, subscriber, settings=FAST)
    for month in DELTA_MONTHS:
        checked = check_delta_files(read_delta_head(subscriber / "deltas" / month))
        assert checked.bytes_hashed == 0, month

    catch_up(subscriber / "history", subscriber / "deltas")

    assert_same_snapshot(subscriber / "history" / "2026-12", publisher / "history" / "2026-12")


def test_fetch_deltas_when_run_again_downloads_nothing(subscriber, nginx_publisher):
    fetch_deltas(nginx_publisher.url, subscriber, settings=FAST)
    before = tree_state(subscriber)
    proxy = FaultProxy(nginx_publisher.port)
    try:
        again = fetch_deltas(proxy.url, subscriber, settings=FAST)
    finally:
        proxy.close()

    assert again.months == [] and again.next_unpublished == "2027-01"
    assert proxy.bytes_down < 1_000  # one small 404 for the next month
    assert tree_state(subscriber) == before


def test_fetch_deltas_when_dry_run_lists_months_and_bytes_and_writes_nothing(
    subscriber, publisher, nginx_publisher
):
    before = tree_state(subscriber)
    result = fetch_deltas(nginx_publisher.url, subscriber, settings=FAST, dry_run=True)

    assert [m.month for m in result.months] == list(DELTA_MONTHS)
    for month in result.months:
        size = sum(
            len(data) for data in published_files(publisher / "deltas" / month.month).values()
        )
        assert month.bytes == size and month.bytes_fetched == 0
    assert tree_state(subscriber) == before


def test_fetch_deltas_when_the_root_holds_no_snapshot_is_refused(tmp_path, nginx_publisher):
    with pytest.raises(ChainError, match="holds no snapshot"):
        fetch_deltas(nginx_publisher.url, tmp_path / "empty", settings=FAST)
    assert not (tmp_path / "empty").exists()


def test_fetch_deltas_when_the_delta_parent_is_not_the_local_snapshot_refuses_before_any_data(
    tmp_path, publisher, nginx_publisher
):
    root = tmp_path / "mirror"
    shutil.copytree(publisher / "history" / "2026-10", root / "history" / "2026-10")
    (root / "history" / "2026-10" / MANIFEST).write_bytes(b'{"bundle_id": "someone-else"}')
    before = tree_state(root)
    proxy = FaultProxy(nginx_publisher.port)
    try:
        with pytest.raises(ChainError, match="parent's manifest sha256"):
            fetch_deltas(proxy.url, root, settings=FAST)
    finally:
        proxy.close()

    assert tree_state(root) == {**before, "deltas": ("dir",)} or tree_state(root) == before
    assert not any(p.name.startswith(".fetch-") for p in (root / "deltas").glob("*"))
    delta = publisher / "deltas" / "2026-11"
    assert (
        proxy.bytes_down
        < 2
        * sum(  # the checksums and two manifests, no data file
            len(published_files(delta)[name]) for name in ("CHECKSUMS.sha256", MANIFEST)
        )
        + len((delta / "snapshot" / MANIFEST).read_bytes())
        + 4_000
    )


def test_fetch_snapshot_gives_a_new_subscriber_a_verified_first_month_and_then_nothing(
    tmp_path, publisher, nginx_publisher
):
    root = tmp_path / "new"
    result = fetch_snapshot(nginx_publisher.url, root, SAMPLE_FIRST_MONTH, settings=FAST)
    snapshot = root / "history" / SAMPLE_FIRST_MONTH

    assert published_files(snapshot) == published_files(publisher / "history" / SAMPLE_FIRST_MONTH)
    assert result.months[0].bytes_fetched > 0
    assert verify_snapshot(snapshot).files_hashed == 0  # the fetch's hashes are in its cache
    assert writable_published(snapshot) == []  # as apply leaves the months it publishes
    again = fetch_snapshot(nginx_publisher.url, root, SAMPLE_FIRST_MONTH, settings=FAST)
    assert again.months[0].already_present and again.months[0].bytes_fetched == 0


def test_fetch_snapshot_when_another_months_fetch_was_interrupted_removes_its_staging(
    tmp_path, publisher, nginx_publisher
):
    root = tmp_path / "new"
    interrupted = root / "history" / f".fetch-{SAMPLE_FIRST_MONTH}"
    (interrupted / "fills").mkdir(parents=True)  # an interrupted `fetch --snapshot` of another
    (interrupted / "fills" / "part.parquet").write_bytes(b"half")  # month: never resumable now
    fetch_snapshot(nginx_publisher.url, root, "2026-12", settings=FAST)
    assert published_files(root / "history" / "2026-12") == published_files(
        publisher / "history" / "2026-12"
    )
    assert sorted(p.name for p in (root / "history").iterdir()) == ["2026-12"]


def test_fetch_snapshot_when_the_root_holds_another_month_is_refused(subscriber, nginx_publisher):
    before = tree_state(subscriber)
    with pytest.raises(ChainError, match="already holds"):
        fetch_snapshot(nginx_publisher.url, subscriber, "2026-12", settings=FAST)
    assert tree_state(subscriber) == before


def test_newest_snapshot_month_asks_month_by_month_back_from_now(nginx_publisher):
    source = open_source(nginx_publisher.url, FAST)
    assert newest_snapshot_month(source, now="2027-03") == "2026-12"


def test_fetch_from_a_local_folder_places_the_months_as_over_http(subscriber, publisher):
    fetch_deltas(str(publisher), subscriber, settings=FAST)
    for month in DELTA_MONTHS:
        fetched = subscriber / "deltas" / month
        assert published_files(fetched) == published_files(publisher / "deltas" / month)


def test_fetch_asks_for_each_streamed_range_to_be_written_to_disk_as_it_goes(
    subscriber, publisher, monkeypatch
):
    every = 4096
    ranges: dict[str, list[tuple[int, int]]] = {}

    def record(fd: int, offset: int, length: int) -> None:
        staged = os.readlink(f"/proc/self/fd/{fd}")  # deltas/.fetch-<month>/<path>
        ranges.setdefault(staged.partition("/.fetch-")[2], []).append((offset, length))

    monkeypatch.setattr(transfer_module, "WRITEBACK_EVERY", every)
    monkeypatch.setattr(fsio, "start_writeback", record)
    fetch_deltas(str(publisher), subscriber, settings=FAST)

    deltas = publisher / "deltas"
    streamed = [p for p in deltas.rglob("*.parquet") if p.stat().st_size >= 2 * every]
    assert streamed
    for path in streamed:
        asked = ranges[path.relative_to(deltas).as_posix()]
        covered = sum(length for _, length in asked)
        assert asked[0][0] == 0 and path.stat().st_size - covered < every, path
        assert all(a + n == b for (a, n), (b, _) in itertools.pairwise(asked)), path


def cut_after_a_mebibyte(proxy: FaultProxy, subscriber: Path) -> Path:
    """Fetch 2026-12 through ``proxy`` with one try, the connection cut after 1 MiB: the fetch
    fails, its staging folder (returned) holds part of the month."""
    proxy.add(Fault("cut", after=1 << 20))
    with pytest.raises(OSError, match="last retry"):
        fetch_deltas(proxy.url, subscriber, settings=ONE_TRY)
    staged = subscriber / "deltas" / ".fetch-2026-12"
    assert 0 < sum(p.stat().st_size for p in staged.rglob("*.parquet")) < 1 << 20
    return staged


def test_fetch_when_the_remote_file_changes_between_ranges_starts_it_over(
    large_subscriber, large_publisher, tmp_path
):
    served = tmp_path / "served"
    shutil.copytree(large_publisher, served)
    delta = served / "deltas" / "2026-12"
    server = start_nginx(served, tmp_path / "nginx")
    proxy = FaultProxy(server.port)
    try:
        cut_after_a_mebibyte(proxy, large_subscriber)
        age_files(delta, seconds=3_600)  # republished: same bytes, a new version (a new ETag)
        result = fetch_deltas(proxy.url, large_subscriber, settings=FAST)
    finally:
        proxy.close()
        server.stop()

    assert result.months[0].bytes_resumed == 0  # the new version started over, nothing stitched
    assert published_files(large_subscriber / "deltas" / "2026-12") == published_files(delta)


def test_open_source_when_plain_http_goes_beyond_loopback_is_refused():
    with pytest.raises(ConfigError, match="loopback"):
        open_source("http://example.com/skewtape")


@pytest.mark.parametrize(
    "query, environment",
    [
        ("?endpoint_override=127.0.0.1:9&scheme=http", {"AWS_ENDPOINT_URL": "http://[::1"}),
        ("?endpoint_override=[::1]:9&scheme=http", {}),
        ("?endpoint_override=minio.internal&region=eu-west-1", {}),
        ("", {"AWS_ENDPOINT_URL": "HTTPS://s3.example.com:8443/gateway"}),
        ("", {"AWS_ENDPOINT": "http://my_host:9000/"}),
    ],
)
def test_open_source_when_the_s3_endpoint_obstore_uses_is_an_http_url_opens_it(
    monkeypatch, query, environment
):
    """Only the endpoint obstore uses is checked: the URI's, else the environment's."""
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in environment.items():
        monkeypatch.setenv(name, value)
    assert open_source(f"s3://bucket/pub{query}", FAST).url("x") == "s3://bucket/pub/x"


@pytest.mark.parametrize(
    "settings", [FAST, replace(FAST, speed_limit=0)], ids=["streamed", "whole-without-limit"]
)
def test_s3_source_reads_a_large_object_in_gets_of_up_to_a_32nd_of_it(
    tmp_path, monkeypatch, settings
):
    size = 200 << 20
    (tmp_path / "pub").mkdir()
    with open(tmp_path / "pub" / "big.bin", "wb") as out:
        out.truncate(size)
    source = open_source("s3://bucket/pub?endpoint_override=127.0.0.1:9&scheme=http", settings)
    source.store = LocalStore(tmp_path)  # the same client, over a folder
    reads, get = [], obstore.get

    def recorded(store, key, *, options=None):
        start, end = (options or {}).get("range", (0, 0))
        reads.append(end - start)
        return get(store, key, options=options)

    monkeypatch.setattr(obstore, "get", recorded)
    body = source.open_range("big.bin", 0, source.stat("big.bin"))
    assert sum(len(chunk) for chunk in body.chunks) == size

    assert max(reads) == size // 32
    assert len(reads) < 40


def test_s3_signed_read_error_names_the_offset_and_why_never_the_signature():
    from skewtape_pipeline.mirror.object_source import _SignedReadError

    signed = "http://127.0.0.1:9/bucket/pub/big.bin?X-Amz-Credential=AKIA&X-Amz-Signature=f00d"
    error = _SignedReadError(4096, "failed", ConnectionError(f"GET {signed} was reset"))

    assert str(error) == (
        "the ranged read at 4096 failed (ConnectionError: GET "
        "http://127.0.0.1:9/bucket/pub/big.bin?*** was reset)"
    )


@pytest.mark.parametrize("limits", [{"speed_limit": 0}, {"speed_time": 0}])
def test_low_speed_check_when_the_limit_or_its_window_is_0_checks_nothing(limits):
    check = LowSpeedCheck(replace(FAST, **limits))
    check.since -= 3600  # an hour without a byte

    check.received(0)

    assert not check.on


def test_low_speed_check_when_too_few_bytes_came_over_its_window_raises_naming_the_rate():
    check = LowSpeedCheck(replace(FAST, speed_limit=1000, speed_time=2))
    check.received(1500)
    check.since -= 3  # 1,500 bytes over 3 s

    with pytest.raises(StalledTransfer, match=r"^500 bytes/s over 3 s, below .* of 1000 bytes/s"):
        check.received(0)


@pytest.mark.parametrize("value", [-1, math.nan, math.inf, "30"])
@pytest.mark.parametrize("name", ["speed_limit", "speed_time"])
def test_transfer_settings_when_a_speed_setting_is_no_finite_number_of_0_or_more_is_refused(
    name, value
):
    with pytest.raises(ConfigError, match=f"^{name}=.*; expected a finite number, 0 or more"):
        TransferSettings(**{name: value})


def test_remote_delta_when_the_month_is_not_published_is_none(nginx_publisher):
    assert remote_delta(open_source(nginx_publisher.url, FAST), "2031-01") is None


@pytest.mark.parametrize("style", ["terse", "pretty"])
def test_fetch_from_the_minimal_publisher_over_nginx_then_catch_up_gives_its_next_snapshot(
    tmp_path, style
):
    from skewtape_pipeline_tests.mirror.test_conformance import Month, publish_case

    case = publish_case(tmp_path / "published", Month(style=style))
    age_files(case.root)
    server = start_nginx(case.root, tmp_path / "nginx")
    root = tmp_path / "mirror"
    try:
        fetch_snapshot(server.url, root, "2026-11", settings=FAST)
        fetched = fetch_deltas(server.url, root, settings=FAST)
    finally:
        server.stop()
    catch_up(root / "history", root / "deltas")

    assert [m.month for m in fetched.months] == ["2026-12"]
    assert published_files(root / "deltas" / "2026-12") == published_files(case.delta)
    assert_same_snapshot(root / "history" / "2026-12", case.expected)


def test_open_source_when_an_s3_uri_carries_credentials_is_refused():
    with pytest.raises(ConfigError, match="credentials come from the environment") as info:
        open_source("s3://bucket/prefix?access_key=AKIA&secret_key=shh")
    assert "shh" not in str(info.value)


def test_apply_after_fetch_when_a_fetched_file_was_rewritten_hashes_it_and_refuses(
    subscriber, nginx_publisher
):
    from skewtape_pipeline.errors import ChecksumMismatchError
    from skewtape_pipeline_tests.conftest import rewrite_keeping_stamp

    fetch_deltas(nginx_publisher.url, subscriber, settings=FAST)
    delta = subscriber / "deltas" / "2026-10"
    victim = max(delta.rglob("*.parquet"), key=lambda p: p.stat().st_size)
    data = bytearray(victim.read_bytes())
    data[-100] ^= 0xFF
    rewrite_keeping_stamp(victim, bytes(data))

    with pytest.raises(ChecksumMismatchError, match="hashes to"):
        check_delta_files(read_delta_head(delta))


def test_fetch_fsyncs_the_months_files_together_before_renaming_the_month_into_place(
    subscriber, publisher, monkeypatch
):
    events: list[tuple[str, str]] = []
    fsync, rename, record = os.fsync, os.rename, HashCache.record

    def record_fsync(fd):
        events.append(("fsync", os.readlink(f"/proc/self/fd/{fd}")))
        fsync(fd)

    def record_rename(source, target):
        events.append(("rename", str(target)))
        rename(source, target)

    def record_verified(cache, rel, path, *args, **kwargs):
        events.append(("verified", str(path)))
        record(cache, rel, path, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", record_fsync)
    monkeypatch.setattr(os, "rename", record_rename)
    monkeypatch.setattr(HashCache, "record", record_verified)
    fetch_deltas(str(publisher), subscriber, settings=FAST, until="2026-10")

    month = DELTA_MONTHS[0]
    stage = str(subscriber / "deltas" / f".fetch-{month}")
    placed = events.index(("rename", str(subscriber / "deltas" / month)))
    small = {f"{stage}/{rel}" for rel in remote_delta(open_source(str(publisher)), month).small}
    fetched = {path for kind, path in events if kind == "verified"} - small
    synced = [i for i, (kind, path) in enumerate(events) if kind == "fsync" and path in fetched]
    last_verified = max(i for i, event in enumerate(events) if event[0] == "verified")
    assert {events[i][1] for i in synced} == fetched and len(fetched) > 3
    assert last_verified < min(synced) and max(synced) < placed
    assert all(path.startswith(stage) for path in fetched)


def test_fetch_when_the_kept_bytes_are_not_the_files_fetches_it_whole_and_counts_none_resumed(
    large_subscriber, large_publisher, tmp_path
):
    delta = large_publisher / "deltas" / "2026-12"
    server = start_nginx(large_publisher, tmp_path / "nginx")
    proxy = FaultProxy(server.port)
    try:
        staged = cut_after_a_mebibyte(proxy, large_subscriber)
        partial = max(staged.rglob("*.parquet"), key=lambda p: p.stat().st_size)
        with partial.open("r+b") as file:  # same version, same length: other bytes
            file.write(bytes(b ^ 0xFF for b in file.read(64)))
        result = fetch_deltas(proxy.url, large_subscriber, settings=FAST)
    finally:
        proxy.close()
        server.stop()

    assert result.months[0].bytes_resumed == 0  # nothing of what was kept is in the file
    assert published_files(large_subscriber / "deltas" / "2026-12") == published_files(delta)

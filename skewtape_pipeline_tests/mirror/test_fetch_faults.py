"""Faults between the fetch and real servers (nginx, SeaweedFS's S3): a fault-injecting proxy cuts
connections, stalls them or answers 503; a fetch is SIGKILLed at several moments. Every run ends
with the published month, verified, and the bytes sent over all attempts stay within 1.1x of the
delta's size (nothing downloaded twice)."""

from __future__ import annotations

import collections
import logging
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from pyarrow import fs as pafs
from urllib3.util.retry import Retry

from skewtape_pipeline import progress
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import FetchDiskError, PublisherError, TransferError
from skewtape_pipeline.mirror.fetch import fetch_deltas
from skewtape_pipeline.mirror.sources import TransferSettings, open_source
from skewtape_pipeline_tests.conftest import mounted_tmpfs
from skewtape_pipeline_tests.mirror.apply_support import tree_state
from skewtape_pipeline_tests.mirror.conftest import LARGE_NEXT, LARGE_PARENT
from skewtape_pipeline_tests.mirror.publisher_servers import (
    Fault,
    FaultProxy,
    HttpAnswer,
    HttpRules,
)
from skewtape_pipeline_tests.mirror.test_fetch import published_files
from skewtape_pipeline_tests.scale_out.servers import S3_REGION

pytestmark = pytest.mark.slow

DELTA = f"deltas/{LARGE_NEXT}"
SETTINGS = TransferSettings(attempts=5, backoff=0.0, read_timeout=1.0, connect_timeout=2.0)
FAULTS = {
    "cut": Fault("cut", after=3 << 20),
    "stall": Fault("stall", after=2 << 20, seconds=10),
    "503": Fault("503"),
}


def delta_size(publisher: Path) -> int:
    return sum(len(data) for data in published_files(publisher / DELTA).values())


def assert_fetched(root: Path, publisher: Path, proxy: FaultProxy) -> None:
    assert published_files(root / DELTA) == published_files(publisher / DELTA)
    assert not (root / "deltas" / f".fetch-{LARGE_NEXT}").exists()
    assert proxy.bytes_down <= 1.1 * delta_size(publisher)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fetch_over_nginx_when_a_connection_fails_resumes_to_the_verified_month(
    large_subscriber, large_publisher, large_nginx, fault
):
    proxy = FaultProxy(large_nginx.port)
    proxy.add(*[FAULTS[fault]] * 3)  # the first three connections: one carries a large file
    try:
        result = fetch_deltas(proxy.url, large_subscriber, settings=SETTINGS)
    finally:
        proxy.close()

    assert result.months[0].retries >= 1
    assert_fetched(large_subscriber, large_publisher, proxy)


def test_fetch_when_the_server_asks_to_retry_after_an_hour_waits_at_most_backoff_max(
    large_subscriber, large_publisher, large_nginx, monkeypatch
):
    """A 503 with ``Retry-After: 3600`` held the request an hour (urllib3 honours up to six
    hours): a slow or lying publisher could hang the fetch. The wait is capped at
    ``backoff_max``; the fetch then goes on to the verified month."""
    asked: list[float | None] = []
    given = Retry.get_retry_after

    def noted(retry: Retry, response) -> float | None:
        seconds = given(retry, response)
        asked.append(seconds)
        return None if seconds is None else min(seconds, 1.5)  # the test never waits an hour

    monkeypatch.setattr(Retry, "get_retry_after", noted)
    settings = replace(SETTINGS, backoff_max=1.0)
    proxy = FaultProxy(large_nginx.port)
    proxy.add(Fault("503", retry_after="3600"))
    try:
        result = fetch_deltas(proxy.url, large_subscriber, settings=settings)
    finally:
        proxy.close()

    assert result.months[0].retries >= 1 and max(filter(None, asked)) == 1.0
    assert_fetched(large_subscriber, large_publisher, proxy)


def s3_client(server) -> pafs.S3FileSystem:
    """A client of ``server`` that writes what the tests publish (not the fetch's client)."""
    return pafs.S3FileSystem(
        access_key=server.environment()["AWS_ACCESS_KEY_ID"],
        secret_key=server.environment()["AWS_SECRET_ACCESS_KEY"],
        endpoint_override=server.endpoint,
        scheme="http",
        region=S3_REGION,
    )


@pytest.fixture(scope="module")
def s3_publisher(large_publisher, seaweedfs):
    """:func:`large_publisher` uploaded to the SeaweedFS bucket under ``publisher/``."""
    client = s3_client(seaweedfs)
    for path in large_publisher.rglob("*"):
        if path.is_file():
            key = f"{seaweedfs.bucket}/publisher/{path.relative_to(large_publisher).as_posix()}"
            with client.open_output_stream(key) as out:
                out.write(path.read_bytes())
    return seaweedfs


def test_fetch_from_s3_places_the_verified_month(
    large_subscriber, large_publisher, s3_publisher, s3_env
):
    result = fetch_deltas(s3_publisher.uri("publisher"), large_subscriber, settings=SETTINGS)

    assert [m.month for m in result.months] == [LARGE_NEXT]
    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)


@pytest.mark.parametrize("where", ["the query's scheme", "AWS_ENDPOINT_URL"])
def test_fetch_from_s3_when_the_endpoint_scheme_is_upper_case_places_the_verified_month(
    large_subscriber, large_publisher, s3_publisher, s3_env, monkeypatch, where
):
    """Schemes are case-insensitive: ``scheme=HTTP`` or ``AWS_ENDPOINT_URL=HTTP://...`` is the
    plain-HTTP endpoint (not a client refusing HTTP at its first request)."""
    if where == "AWS_ENDPOINT_URL":
        monkeypatch.setenv("AWS_ENDPOINT_URL", f"HTTP://{s3_publisher.endpoint}")
        source = f"s3://{s3_publisher.bucket}/publisher?region={S3_REGION}"
    else:
        source = s3_publisher.uri("publisher").replace("scheme=http", "scheme=HTTP")
    fetch_deltas(source, large_subscriber, settings=SETTINGS)

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)


@pytest.mark.parametrize("fault", sorted(FAULTS))
def test_fetch_over_s3_when_a_connection_fails_resumes_to_the_verified_month(
    large_subscriber, large_publisher, s3_publisher, s3_env, fault
):
    proxy = FaultProxy(s3_publisher.s3_port)
    proxy.add(FAULTS[fault])  # a broken ranged read is read again whole (1 MiB at most)
    try:
        fetch_deltas(s3_publisher.uri("publisher", port=proxy.port), large_subscriber,
                     settings=SETTINGS)  # fmt: skip
    finally:
        proxy.close()

    assert_fetched(large_subscriber, large_publisher, proxy)


def test_s3_source_when_an_object_is_replaced_between_ranged_reads_fails_instead_of_stitching(
    s3_publisher, s3_env
):
    client = s3_client(s3_publisher)
    key = f"{s3_publisher.bucket}/changing/big.bin"
    with client.open_output_stream(key) as out:
        out.write(b"a" * (24 << 20))
    source = open_source(s3_publisher.uri("changing"), SETTINGS)
    body = source.open_range("big.bin", 0, source.stat("big.bin"))
    first = bytearray()
    while len(first) < 1 << 20:  # the first ranged read, in the chunks its stream came in
        first += next(body.chunks)
    assert first == b"a" * (1 << 20)
    with client.open_output_stream(key) as out:  # republished while it is being read
        out.write(b"b" * (24 << 20))

    with pytest.raises(source.transient, match=r"(?i)precondition"):
        for chunk in body.chunks:
            assert set(bytes(chunk)) == {ord("a")}
    assert source.stat("big.bin") != body.remote  # the resume starts the new version over


def test_s3_source_reads_through_presigned_urls_asking_for_its_version_never_showing_them(
    s3_publisher, s3_env, caplog
):
    client = s3_client(s3_publisher)
    key = f"{s3_publisher.bucket}/signed/big.bin"
    with client.open_output_stream(key) as out:
        out.write(b"a" * (24 << 20))
    rules = HttpRules()
    proxy = FaultProxy(s3_publisher.s3_port, http=rules)
    try:
        source = open_source(s3_publisher.uri("signed", port=proxy.port), SETTINGS)
        remote = source.stat("big.bin")
        with caplog.at_level(logging.DEBUG, logger="urllib3"):
            body = source.open_range("big.bin", 0, remote)
            assert bytes(next(body.chunks)) == b"a" * (1 << 20)  # the first GET
            with client.open_output_stream(key) as out:  # republished: its next GETs refused
                out.write(b"b" * (24 << 20))
            with pytest.raises(source.transient) as info:
                for chunk in body.chunks:
                    assert set(bytes(chunk)) == {ord("a")}
    finally:
        proxy.close()

    gets = [a for a in rules.answers if a.method == "GET" and a.path.endswith("/signed/big.bin")]
    asked = [{name.lower(): value for name, value in a.request.items()} for a in gets]
    assert gets[0].status == 206 and 412 in {a.status for a in gets}
    assert all(h["if-match"] == remote.validator and "authorization" not in h for h in asked)
    logged = [r.getMessage() for r in caplog.records if "/signed/big.bin" in r.getMessage()]
    assert any("/signed/big.bin?***" in line for line in logged)  # signed in the query, not shown
    assert not any("x-amz-" in line.lower() for line in logged)
    assert "precondition" in str(info.value).lower() and "x-amz-" not in str(info.value).lower()


def test_fetch_over_s3_when_a_file_gets_no_answer_asks_for_it_attempts_times_in_all(
    large_subscriber, large_publisher, s3_publisher, s3_env
):
    delta = large_publisher / DELTA
    largest = max((p for p in delta.rglob("*") if p.is_file()), key=lambda p: p.stat().st_size)
    stalled = f"/{DELTA}/{largest.relative_to(delta).as_posix()}"

    def no_answer(answer: HttpAnswer) -> None:  # its answer held past the read timeout
        ranged = any(name.lower() == "range" for name in answer.request)
        if answer.method == "GET" and ranged and answer.path.endswith(stalled):
            time.sleep(3 * SETTINGS.read_timeout)

    rules = HttpRules(answer=no_answer)
    proxy = FaultProxy(s3_publisher.s3_port, http=rules)
    notices: list[str] = []
    try:
        with pytest.raises(TransferError, match="after the last retry") as info, \
                progress.noticing(notices.append):  # fmt: skip
            fetch_deltas(s3_publisher.uri("publisher", port=proxy.port), large_subscriber,
                         settings=SETTINGS)  # fmt: skip
    finally:
        proxy.close()

    asked = collections.Counter(
        {k.lower(): v for k, v in a.request.items()}["range"]
        for a in rules.answers
        if a.method == "GET" and a.path.endswith(stalled)
    )  # the blocks read ahead side by side, each asked for
    assert set(asked.values()) == {SETTINGS.attempts}  # not attempts per request and per file
    assert stalled in str(info.value) and "x-amz-" not in str(info.value).lower()
    told = [n for n in notices if stalled in n]  # each signed GET's retries, from its thread
    assert told and all("x-amz-" not in n.lower() and "?" not in n for n in told)  # no signature
    named = f"{s3_publisher.uri('publisher').split('?')[0]}{stalled}: "  # not the endpoint's URL
    assert all(n.startswith(named) for n in told), told
    assert all(re.search(r"\.parquet: (SlowHeadError|ReadTimeoutError): ", n) for n in told)
    assert {n.rsplit("(", 1)[1] for n in told} == {f"attempt {a} of 5)" for a in (2, 3, 4, 5)}


def test_fetch_over_s3_when_a_small_file_gets_no_answer_asks_for_it_attempts_times(
    large_subscriber, s3_publisher, s3_env
):
    stalled = f"/{DELTA}/CHECKSUMS.sha256"

    def no_answer(answer: HttpAnswer) -> None:
        if answer.method == "GET" and answer.path.endswith(stalled):
            time.sleep(3 * SETTINGS.read_timeout)

    rules = HttpRules(answer=no_answer)
    proxy = FaultProxy(s3_publisher.s3_port, http=rules)
    try:
        with pytest.raises(TransferError, match=r"CHECKSUMS\.sha256"):
            fetch_deltas(s3_publisher.uri("publisher", port=proxy.port), large_subscriber,
                         settings=SETTINGS)  # fmt: skip
    finally:
        proxy.close()

    asked = [a for a in rules.answers if a.method == "GET" and a.path.endswith(stalled)]
    assert len(asked) == SETTINGS.attempts


def test_fetch_over_s3_when_a_listed_object_is_missing_is_refused_and_changes_nothing(
    large_subscriber, large_publisher, s3_publisher, s3_env
):
    client = s3_client(s3_publisher)
    delta = large_publisher / DELTA
    files = sorted(p for p in delta.rglob("*") if p.is_file())
    missing = max(files, key=lambda p: p.stat().st_size)
    for path in files:
        if path != missing:
            key = f"{s3_publisher.bucket}/gone/{DELTA}/{path.relative_to(delta).as_posix()}"
            with client.open_output_stream(key) as out:
                out.write(path.read_bytes())
    before = tree_state(large_subscriber)

    with pytest.raises(PublisherError, match="does not have it") as info:
        fetch_deltas(s3_publisher.uri("gone"), large_subscriber, settings=SETTINGS)

    assert missing.relative_to(delta).as_posix() in str(info.value)
    assert tree_state(large_subscriber) == before


@pytest.mark.parametrize("share", [0.0, 0.3, 0.7])
def test_fetch_when_sigkilled_then_run_again_gives_the_month_without_downloading_twice(
    large_subscriber, large_publisher, large_nginx, share
):
    size = delta_size(large_publisher)
    slow = FaultProxy(large_nginx.port, rate=8e6)
    staged = large_subscriber / "deltas" / f".fetch-{LARGE_NEXT}"
    try:
        process = cli_fetch(slow.url, large_subscriber)
        wait_until(lambda: staged.is_dir() and staged_bytes(staged) >= share * size, process)
        os.kill(process.pid, signal.SIGKILL)
        process.wait(timeout=30)
    finally:
        slow.close()
    first = slow.bytes_down
    assert staged.is_dir() and not (large_subscriber / DELTA).exists()

    again = FaultProxy(large_nginx.port)
    try:
        done = cli_fetch(again.url, large_subscriber)
        assert done.wait(timeout=120) == 0, done.stderr.read()
    finally:
        again.close()

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    assert first + again.bytes_down <= 1.1 * size


def cli_fetch(url: str, root: Path) -> subprocess.Popen:
    environment = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])}
    return subprocess.Popen(
        [sys.executable, "-m", "skewtape_pipeline.cli", "fetch", url, "--root", str(root)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=environment,
    )


def staged_bytes(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.rglob("*.parquet") if p.is_file())


def wait_until(condition, process: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        assert process.poll() is None, f"the fetch ended first: {process.stderr.read()}"
        assert time.monotonic() < deadline, "the fetch did not get there in time"
        time.sleep(0.01)


# --- answers that do not resume what was asked (HTTP rules in front of nginx) -----------------


def largest(publisher: Path) -> str:
    """The URL path of the delta's largest file."""
    files = published_files(publisher / DELTA)
    return f"/{DELTA}/{max(files, key=lambda rel: len(files[rel]))}"


ENOUGH = 8
"""Answers to one file after which the rules of :func:`first_body_cut` cut every answer."""


def first_body_cut(path: str, share: float = 0.5):
    """A ``cut_at`` rule: the first answer to ``path`` after its look-up (the first answer) is
    cut at ``share`` of its body; answers after the :data:`ENOUGH`-th are cut at once (a client
    that would ask forever fails instead)."""
    cut: list[int] = []

    def rule(answer: HttpAnswer) -> float | None:
        if answer.path == path and answer.count > ENOUGH:
            return 0.0
        if answer.path != path or answer.count == 0 or cut:
            return None
        cut.append(answer.count)
        return share

    return rule


def via_rules(nginx, subscriber: Path, rules: HttpRules, settings=SETTINGS):
    """Fetch through a proxy with ``rules`` in front of ``nginx``: (result, proxy)."""
    proxy = FaultProxy(nginx.port, http=rules)
    try:
        return fetch_deltas(proxy.url, subscriber, settings=settings), proxy
    finally:
        proxy.close()


def changing_etag(answer: HttpAnswer) -> None:
    """Every answer carries another ETag (as a publisher republishing the file would)."""
    if "Etag" in answer.headers:
        answer.headers["Etag"] = f'"{answer.count}-{answer.headers["Etag"].strip(chr(34))}"'


def without_if_range(method: str, path: str, headers: dict[str, str]) -> None:
    headers.pop("If-Range", None)  # nginx then answers every Range with 206


def test_fetch_when_a_206_carries_another_etag_fetches_the_file_whole_and_verifies(
    large_subscriber, large_publisher, large_nginx
):
    path = largest(large_publisher)
    rules = HttpRules(request=without_if_range, answer=changing_etag,
                      cut_at=first_body_cut(path))  # fmt: skip

    result, _ = via_rules(large_nginx, large_subscriber, rules)

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    assert rules.counts[path] <= 4  # look-up, cut body, the refused 206, the whole file
    assert result.months[0].retries >= 1


def weak_etag_on_206(answer: HttpAnswer) -> None:
    if answer.status == 206 and answer.length > 1:
        answer.headers["Etag"] = f"W/{answer.headers['Etag']}"


def shifted_content_range(answer: HttpAnswer) -> None:
    if answer.status == 206 and answer.length > 1:
        first, _, rest = answer.headers["Content-Range"].removeprefix("bytes ").partition("-")
        answer.headers["Content-Range"] = f"bytes {int(first) + 1}-{rest}"


def without_range(method: str, path: str, headers: dict[str, str]) -> None:
    for name in ("Range", "If-Range"):
        headers.pop(name, None)


@pytest.mark.parametrize(
    "rules",
    [
        pytest.param(
            lambda: {"answer": weak_etag_on_206, "request": without_if_range}, id="weak-etag-on-206"
        ),
        pytest.param(lambda: {"answer": shifted_content_range}, id="content-range-not-asked"),
        pytest.param(lambda: {"request": without_range}, id="server-ignores-range"),
    ],
)
def test_fetch_when_a_resume_is_not_answered_as_asked_fetches_the_file_whole_and_verifies(
    large_subscriber, large_publisher, large_nginx, rules
):
    path = largest(large_publisher)
    rules = HttpRules(cut_at=first_body_cut(path), **rules())

    result, _ = via_rules(large_nginx, large_subscriber, rules)

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    assert result.months[0].retries >= 1


def weak_etag(answer: HttpAnswer) -> None:
    if "Etag" in answer.headers:
        answer.headers["Etag"] = f"W/{answer.headers['Etag']}"


def test_fetch_when_etags_are_weak_never_resumes_with_them_and_verifies(
    large_subscriber, large_publisher, large_nginx
):
    path = largest(large_publisher)
    rules = HttpRules(answer=weak_etag, cut_at=first_body_cut(path))

    result, _ = via_rules(large_nginx, large_subscriber, rules)

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    assert result.months[0].retries >= 1
    asked = [answer.request for answer in rules.answers if answer.path == path]
    assert [request.get("Range") for request in asked] == ["bytes=0-0", None, None]
    assert not any("If-Range" in request for request in asked)


def test_fetch_when_every_answer_changes_and_breaks_fails_after_its_attempts_naming_the_file(
    large_subscriber, large_publisher, large_nginx
):
    path = largest(large_publisher)
    rules = HttpRules(answer=changing_etag, cut_at=lambda a: 0.5 if a.path == path else None)
    settings = replace(SETTINGS, attempts=3)

    with pytest.raises(TransferError, match="last retry failed") as info:
        via_rules(large_nginx, large_subscriber, rules, settings)

    assert path.rsplit("/", 1)[1] in str(info.value)
    assert rules.counts[path] <= 2 * settings.attempts + 1


def test_fetch_when_every_first_answer_is_cut_at_half_reads_small_files_again_and_verifies(
    large_subscriber, large_publisher, large_nginx
):
    rules = HttpRules(cut_at=lambda answer: 0.5 if answer.count == 0 else None)

    result, _ = via_rules(large_nginx, large_subscriber, rules)

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    assert rules.counts[f"/{DELTA}/CHECKSUMS.sha256"] == 2
    assert result.months[0].retries >= len(published_files(large_publisher / DELTA))


# --- a publisher too slow to wait for ------------------------------------------------------------

SLOW = replace(SETTINGS, speed_limit=16_000, speed_time=1.0)
"""A low-speed limit that a slow answer (:data:`SLOW_RATE`) stays under."""
SLOW_RATE = 2_000
SLOW_BYTES = 40_000
"""Where a slow answer ends (20 s at its rate), so that a fetch without the limit ends too."""


def slow(path: str, times: int | None = None, rate: float = SLOW_RATE):
    """``rate`` and ``cut_at`` rules: the first ``times`` answers with a body to ``path`` (all
    when None) come at ``rate`` bytes/s and end after :data:`SLOW_BYTES`."""
    slowed: list[int] = []

    def chosen(answer: HttpAnswer) -> bool:
        if answer.path != path or answer.length <= 1:
            return False
        if answer.count not in slowed and len(slowed) != times:
            slowed.append(answer.count)
        return answer.count in slowed

    return {
        "rate": lambda answer: rate if chosen(answer) else None,
        "cut_at": lambda answer: SLOW_BYTES / answer.length if chosen(answer) else None,
    }


def test_fetch_when_a_body_stalls_below_the_low_speed_limit_resumes_it_and_verifies(
    large_subscriber, large_publisher, large_nginx
):
    path = largest(large_publisher)
    rules = HttpRules(**slow(path, times=1))
    proxy = FaultProxy(large_nginx.port, http=rules)
    try:
        result = fetch_deltas(proxy.url, large_subscriber, settings=SLOW)
    finally:
        proxy.close()

    slowed = [answer for answer in rules.answers if answer.path == path][1]
    assert slowed.sent < SLOW_BYTES  # the fetch let go of it, not the proxy
    assert result.months[0].retries == 1
    assert_fetched(large_subscriber, large_publisher, proxy)


def test_fetch_when_a_body_stays_below_the_low_speed_limit_fails_naming_the_file_and_rate(
    large_subscriber, large_publisher, large_nginx
):
    path = largest(large_publisher)
    rules = HttpRules(**slow(path))

    with pytest.raises(TransferError) as info:
        via_rules(large_nginx, large_subscriber, rules, replace(SLOW, attempts=2))

    message = str(info.value)
    assert "\n" not in message
    assert path.rsplit("/", 1)[1] in message
    assert re.search(r"\d+ bytes/s over \d+ s, below the low-speed limit of 16000 bytes/s", message)


def test_cli_fetch_when_a_body_stays_below_the_speed_limit_flags_exits_1_naming_file_and_rate(
    large_subscriber, large_publisher, large_nginx, capsys
):
    path = largest(large_publisher)
    proxy = FaultProxy(large_nginx.port, http=HttpRules(**slow(path)))
    try:
        code = main(["fetch", proxy.url, "--root", str(large_subscriber),
                     "--speed-limit", "16000", "--speed-time", "1"])  # fmt: skip
    finally:
        proxy.close()

    out, err = capsys.readouterr()
    error = err.splitlines()[-1]  # after any progress line
    assert code == 1 and out == "" and err.count("error:") == 1
    assert error.startswith(f"error: {proxy.url}{path}: the transfer broke off (StalledTransfer: ")
    assert re.search(r"\d+ bytes/s over \d+ s, below the low-speed limit of 16000 bytes/s", error)
    assert not (large_subscriber / DELTA).exists()
    retries = [line for line in err.splitlines() if "trying again" in line]
    assert [line.rsplit("(", 1)[1] for line in retries] == [
        f"attempt {n} of 5)" for n in (2, 3, 4, 5)
    ]
    for line in retries:  # each told as it happens: the file, why, then the attempt to come
        assert line.startswith(f"fetch: {proxy.url}{path}: StalledTransfer: ")
        assert "below the low-speed limit of 16000 bytes/s; trying again" in line


def s3_path(server, path: str) -> str:
    """The request path of a publisher's file (``path``, as :func:`largest` gives it) in the
    ``publisher/`` prefix of ``server``'s bucket."""
    return f"/{server.bucket}/publisher{path}"


def via_s3_rules(server, subscriber: Path, rules: HttpRules, settings):
    """Fetch from ``server``'s ``publisher/`` through a proxy with ``rules``: (result, proxy)."""
    proxy = FaultProxy(server.s3_port, http=rules)
    try:
        uri = server.uri("publisher", port=proxy.port)
        return fetch_deltas(uri, subscriber, settings=settings), proxy
    finally:
        proxy.close()


def test_fetch_over_s3_when_a_ranged_read_stalls_below_the_low_speed_limit_resumes_and_verifies(
    large_subscriber, large_publisher, s3_publisher, s3_env
):
    path = s3_path(s3_publisher, largest(large_publisher))
    rules = HttpRules(**slow(path, times=1))  # the first ranged read of the largest file

    result, proxy = via_s3_rules(s3_publisher, large_subscriber, rules, SLOW)

    slowed = next(answer for answer in rules.answers if answer.path == path and answer.length > 1)
    assert slowed.sent < SLOW_BYTES  # the fetch let go of it, not the proxy
    assert result.months[0].retries == 1
    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    assert proxy.bytes_down <= 1.5 * delta_size(large_publisher)  # the reads ahead, read again


def test_fetch_over_s3_when_a_body_stays_below_the_low_speed_limit_fails_naming_the_file_and_rate(
    large_subscriber, large_publisher, s3_publisher, s3_env
):
    path = largest(large_publisher)
    rules = HttpRules(**slow(s3_path(s3_publisher, path)))

    with pytest.raises(TransferError) as info:
        via_s3_rules(s3_publisher, large_subscriber, rules, replace(SLOW, attempts=2))

    message = str(info.value)
    assert "\n" not in message
    assert message.startswith(f"{s3_publisher.uri('publisher').split('?')[0]}{path}: ")
    assert re.search(r"\d+ bytes/s over \d+ s, below the low-speed limit of 16000 bytes/s", message)
    slowed = [a for a in rules.answers if a.path == s3_path(s3_publisher, path) and a.length > 1]
    assert slowed and all(answer.sent < SLOW_BYTES for answer in slowed)  # let go by the fetch


CHECKSUMS = f"/{DELTA}/CHECKSUMS.sha256"
TRICKLE = 20
"""Bytes/s of a trickling small file (its few hundred bytes would take tens of seconds)."""


def assert_stalled_naming(message: str, path: str) -> None:
    assert "\n" not in message and message.count(path) == 1
    assert message.split(": ", 1)[0].endswith(path)  # the file, named once, first
    assert "the transfer broke off (StalledTransfer: " in message
    assert re.search(r"\d+ bytes/s over \d+ s, below the low-speed limit of 16000 bytes/s", message)


def test_fetch_when_a_checksums_file_trickles_below_the_low_speed_limit_fails_naming_it(
    large_subscriber, large_nginx
):
    rules = HttpRules(**slow(CHECKSUMS, rate=TRICKLE))

    with pytest.raises(TransferError) as info:
        via_rules(large_nginx, large_subscriber, rules, replace(SLOW, attempts=2))

    assert_stalled_naming(str(info.value), CHECKSUMS)
    assert rules.counts[CHECKSUMS] == 2  # read once more, then given up


def test_fetch_over_s3_when_a_checksums_file_trickles_below_the_low_speed_limit_fails_naming_it(
    large_subscriber, s3_publisher, s3_env
):
    path = s3_path(s3_publisher, CHECKSUMS)
    rules = HttpRules(**slow(path, rate=TRICKLE))

    with pytest.raises(TransferError) as info:
        via_s3_rules(s3_publisher, large_subscriber, rules, replace(SLOW, attempts=2))

    assert_stalled_naming(str(info.value), CHECKSUMS)
    assert rules.counts[path] == 2


RESET = "ConnectionResetError: [Errno 104] Connection reset by peer"


def test_cli_fetch_over_s3_when_the_server_resets_a_files_connections_exits_1_naming_the_reset(
    large_subscriber, large_publisher, s3_publisher, s3_env, capsys
):
    """The server resets the largest file's first presigned GET mid-body, then every connection
    asking for it again (RST, ECONNRESET): each GET is asked for again, each retry told (naming
    the s3:// object, not the endpoint's URL the presigned GET goes to), and
    the fetch fails on one line naming the object (no query: its signature) and the reset.
    The client's waits between its retries are no body below the low-speed limit: they were
    reported as one (``StalledTransfer: 0 bytes/s``)."""
    path = s3_path(s3_publisher, largest(large_publisher))
    gets: list[HttpAnswer] = []

    def reset_at(answer: HttpAnswer) -> float | None:  # its GETs: the first mid-body, then all
        if answer.method != "GET" or answer.path != path:
            return None
        gets.append(answer)
        return 0.5 if len(gets) == 1 else 0

    rules = HttpRules(reset_at=reset_at)
    proxy = FaultProxy(s3_publisher.s3_port, http=rules)
    try:
        code = main(["fetch", s3_publisher.uri("publisher", port=proxy.port),
                     "--root", str(large_subscriber), "--speed-limit", "16000",
                     "--speed-time", "1"])  # fmt: skip
    finally:
        proxy.close()

    out, err = capsys.readouterr()
    error = err.splitlines()[-1]
    shown = f"{s3_publisher.uri('publisher').split('?')[0]}{largest(large_publisher)}"
    assert code == 1 and out == "" and err.count("error:") == 1 and "Traceback" not in err
    assert re.fullmatch(
        rf"error: {re.escape(shown)}: the ranged read at \d+ failed after the last retry "
        rf"\({re.escape(RESET)}\)",
        error,
    )
    assert "low-speed" not in err and "Stalled" not in err
    assert "?" not in err and "x-amz-" not in err.lower() and "endpoint_override" not in err
    retries = [line for line in err.splitlines() if "trying again" in line]
    assert retries and all(f"{shown}: {RESET}; trying again (attempt " in line for line in retries)
    assert not [line for line in retries if "http://" in line], retries  # the s3:// object named
    assert any(line.endswith("(attempt 5 of 5)") for line in retries)  # the GETs' own retries
    assert len(gets) > 5
    assert not (large_subscriber / DELTA).exists()


# --- a full disk ---------------------------------------------------------------------------------


@pytest.fixture
def small_disk(tmp_path: Path):
    """A folder on a 12 MiB tmpfs (mounted for the test, as root), too small for the delta."""
    with mounted_tmpfs(tmp_path / "small", "12m") as mount:
        yield mount


def test_fetch_when_the_month_is_larger_than_the_free_space_refuses_before_writing(
    small_disk, large_publisher, large_nginx
):
    root = small_disk / "mirror"
    shutil.copytree(large_publisher / "history" / LARGE_PARENT, root / "history" / LARGE_PARENT)
    before = tree_state(root)
    rules = HttpRules()

    with pytest.raises(FetchDiskError) as info:
        via_rules(large_nginx, root, rules)

    assert str(info.value).startswith(f"{root}: the month {LARGE_NEXT} is ")
    assert str(info.value).endswith(" bytes are free; nothing was fetched")
    assert tree_state(root) == before


def test_fetch_when_the_disk_fills_while_writing_stops_at_once_naming_the_folder(
    tmp_path, large_publisher, large_nginx
):
    with mounted_tmpfs(tmp_path / "disk", "40m") as disk:
        root = disk / "mirror"
        shutil.copytree(large_publisher / "history" / LARGE_PARENT, root / "history" / LARGE_PARENT)
        before = tree_state(root)

        def another_writer_fills_the_disk(answer: HttpAnswer) -> None:
            if answer.length > (1 << 20) and not (disk / "filler").exists():
                free = shutil.disk_usage(disk).free
                (disk / "filler").write_bytes(b"\0" * (free - (1 << 20)))

        rules = HttpRules(answer=another_writer_fills_the_disk)
        with pytest.raises(FetchDiskError) as info:
            via_rules(large_nginx, root, rules)
        (disk / "filler").unlink()

        stage = root / "deltas" / f".fetch-{LARGE_NEXT}"
        assert str(info.value).startswith(f"{stage}: No space left on device while writing ")
        assert tree_state(root) == before
        assert max(rules.counts.values()) <= 3  # looked up, its two halves asked for: no retry


def test_fetch_when_a_change_file_announces_a_terabyte_refuses_before_writing(
    subscriber, nginx_publisher
):
    def endless(answer: HttpAnswer) -> None:  # no manifest sizes a change file
        if "/changes/" in answer.path and answer.status == 206:
            answer.headers["Content-Range"] = "bytes 0-0/1000000000000"

    before = tree_state(subscriber)
    rules = HttpRules(answer=endless)
    with pytest.raises(FetchDiskError) as info:
        via_rules(nginx_publisher, subscriber, rules)

    assert "/changes/" in str(info.value) and "1000000000000 bytes" in str(info.value)
    assert tree_state(subscriber) == before


def test_fetch_over_s3_when_every_first_answer_is_cut_at_half_reads_again_and_verifies(
    large_subscriber, large_publisher, s3_publisher, s3_env
):
    rules = HttpRules(cut_at=lambda answer: 0.5 if answer.count == 0 else None)
    proxy = FaultProxy(s3_publisher.s3_port, http=rules)
    try:
        fetch_deltas(s3_publisher.uri("publisher", port=proxy.port), large_subscriber,
                     settings=SETTINGS)  # fmt: skip
    finally:
        proxy.close()

    assert published_files(large_subscriber / DELTA) == published_files(large_publisher / DELTA)
    checksums = [path for path in rules.counts if path.endswith(f"{DELTA}/CHECKSUMS.sha256")]
    assert checksums and rules.counts[checksums[0]] >= 2


def test_fetch_over_one_connection_reuses_it_for_every_file(
    large_subscriber, large_publisher, large_nginx
):
    proxy = FaultProxy(large_nginx.port)
    try:
        fetch_deltas(proxy.url, large_subscriber, settings=replace(SETTINGS, connections=1))
    finally:
        proxy.close()

    assert_fetched(large_subscriber, large_publisher, proxy)
    assert proxy.connections == 1

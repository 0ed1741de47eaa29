"""A hostile or broken publisher: each case a typed error, and nothing changed on disk (no month,
no staging folder, no folder created, no lock file left, even when the download had begun)."""

from __future__ import annotations

import hashlib
import http.server
import json
import time
from dataclasses import replace
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import (
    ChecksumMismatchError,
    ManifestError,
    PublisherError,
    TLSFailureError,
    TransferError,
    UnsafePathError,
    VerificationError,
)
from skewtape_pipeline.mirror.catchup import next_month
from skewtape_pipeline.mirror.fetch import fetch_deltas, fetch_snapshot
from skewtape_pipeline.mirror.sources import SMALL_FILE_LIMIT, TransferSettings
from skewtape_pipeline_tests.mirror.apply_support import tree_state
from skewtape_pipeline_tests.mirror.publisher_servers import (
    hostile_server,
    self_signed_certificate,
)
from skewtape_pipeline_tests.mirror.test_fetch_faults import s3_client

MONTH = "2026-10"
DELTA = f"deltas/{MONTH}"
SETTINGS = TransferSettings(attempts=2, backoff=0.0, read_timeout=5.0)


def checksums_lines(publisher: Path) -> list[str]:
    return (publisher / DELTA / "CHECKSUMS.sha256").read_text().splitlines()


def write_checksums(publisher: Path, lines: list[str]) -> None:
    (publisher / DELTA / "CHECKSUMS.sha256").write_text("".join(f"{line}\n" for line in lines))


def largest_file(publisher: Path) -> str:
    """The delta's largest listed file (a month file under snapshot/), relative to the delta."""
    lines = [line.split("  ", 1)[1] for line in checksums_lines(publisher)]
    return max(lines, key=lambda rel: (publisher / DELTA / rel).stat().st_size)


def refused(server_url: str, subscriber: Path, error: type[Exception], match: str):
    """Fetch, expecting ``error``; then assert the data root is exactly as it was."""
    before = tree_state(subscriber)
    with pytest.raises(error, match=match) as info:
        fetch_deltas(server_url, subscriber, settings=SETTINGS)
    assert tree_state(subscriber) == before
    return info.value


@pytest.mark.parametrize(
    "listed", ["../outside.parquet", "/etc/passwd", "snapshot\\..\\..\\outside.parquet"]
)
def test_fetch_when_checksums_list_a_path_leaving_the_folder_is_refused(
    tampered, subscriber, listed
):
    """The refusal names the publisher's CHECKSUMS.sha256 by its URL, the line and the path
    (it read "field a line of http://...")."""
    lines = [*checksums_lines(tampered), f"{'0' * 64}  {listed}"]
    write_checksums(tampered, lines)
    with hostile_server(tampered) as server:
        error = refused(server.url, subscriber, UnsafePathError, "refusing the path")
        url = f"{server.url}/{DELTA}/CHECKSUMS.sha256"
    assert str(error).startswith(f"{url}: line {len(lines)}: refusing the path {listed!r}: "), str(
        error
    )
    assert "field" not in str(error)


def test_fetch_when_a_file_is_longer_than_its_recorded_size_is_refused(tampered, subscriber):
    rel = largest_file(tampered)
    data = (tampered / DELTA / rel).read_bytes() + b"\0" * 4096
    with hostile_server(tampered) as server:
        server.answers[f"{DELTA}/{rel}"] = lambda h: answer(h, 200, data)
        refused(server.url, subscriber, PublisherError, "longer than the .* bytes its manifest")


def test_fetch_when_a_file_streams_without_end_is_refused(tampered, subscriber):
    rel = largest_file(tampered)
    with hostile_server(tampered) as server:
        server.answers[f"{DELTA}/{rel}"] = endless
        refused(server.url, subscriber, PublisherError, "no length")


def test_fetch_when_the_checksums_file_streams_without_end_is_refused(tampered, subscriber):
    with hostile_server(tampered) as server:
        server.answers[f"{DELTA}/CHECKSUMS.sha256"] = endless
        refused(server.url, subscriber, PublisherError, f"longer than {SMALL_FILE_LIMIT} bytes")


def trickled_head(handler) -> None:
    """A status line, then one header line every 0.1 s, the head never ending (for 20 s)."""
    handler.wfile.write(b"HTTP/1.1 200 OK\r\nContent-Length: 10\r\n")
    for _ in range(200):
        handler.wfile.flush()
        time.sleep(0.1)
        handler.wfile.write(b"X-Slow: 1\r\n")


def test_fetch_when_an_answers_head_trickles_without_end_fails_naming_the_file(
    tampered, subscriber
):
    settings = replace(SETTINGS, read_timeout=1.0)
    before = tree_state(subscriber)
    with hostile_server(tampered) as server:
        server.answers[f"{DELTA}/CHECKSUMS.sha256"] = trickled_head
        with pytest.raises(TransferError, match="did not all arrive within 1 s") as info:
            fetch_deltas(server.url, subscriber, settings=settings)
    assert f"{DELTA}/CHECKSUMS.sha256" in str(info.value)
    assert tree_state(subscriber) == before


def endless_range(size: int):
    """A 206 answer to the first byte that goes on sending (without a length) for ever."""

    def send(handler) -> None:
        if handler.headers.get("Range") != "bytes=0-0":
            return http.server.SimpleHTTPRequestHandler.do_GET(handler)
        handler.send_response(206)
        handler.send_header("Content-Range", f"bytes 0-0/{size}")
        handler.end_headers()
        while True:
            handler.wfile.write(b"0" * 4096)
            time.sleep(0.01)

    return send


def test_fetch_when_the_first_byte_asked_for_comes_without_end_reads_one_byte(tampered, subscriber):
    rel = largest_file(tampered)
    size = (tampered / DELTA / rel).stat().st_size
    with hostile_server(tampered) as server:
        server.answers[f"{DELTA}/{rel}"] = endless_range(size)
        result = fetch_deltas(server.url, subscriber, settings=SETTINGS)
    assert MONTH in [month.month for month in result.months]
    fetched = subscriber / "deltas" / MONTH / rel
    assert fetched.read_bytes() == (tampered / DELTA / rel).read_bytes()


def test_fetch_when_a_file_does_not_hash_as_listed_is_refused(tampered, subscriber):
    rel = largest_file(tampered)
    path = tampered / DELTA / rel
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(data))
    with hostile_server(tampered) as server:
        error = refused(server.url, subscriber, ChecksumMismatchError, "hashes to")
    assert rel in str(error) and hashlib.sha256(data).hexdigest() in str(error)


def test_fetch_when_checksums_do_not_list_the_manifest_is_refused(tampered, subscriber):
    write_checksums(tampered, [x for x in checksums_lines(tampered) if x[66:] != "manifest.json"])
    with hostile_server(tampered) as server:
        refused(server.url, subscriber, ChecksumMismatchError, "does not list manifest.json")


@pytest.mark.parametrize("elsewhere", ["http://localhost:{port}/", "https://127.0.0.1:{port}/"])
def test_fetch_when_a_file_redirects_to_another_host_or_scheme_is_refused(
    tampered, subscriber, elsewhere
):
    with hostile_server(tampered) as server:
        location = elsewhere.format(port=server.port) + f"{DELTA}/CHECKSUMS.sha256"
        server.answers[f"{DELTA}/CHECKSUMS.sha256"] = lambda h: answer(
            h, 302, b"", {"Location": location}
        )
        refused(server.url, subscriber, PublisherError, "redirects to")


def test_fetch_when_tls_fails_is_refused(tampered, subscriber, tmp_path):
    with hostile_server(tampered, tls=self_signed_certificate(tmp_path)) as server:
        refused(server.url, subscriber, TLSFailureError, "TLS handshake failed")


def test_fetch_when_an_html_page_comes_with_status_200_is_refused(tampered, subscriber):
    rel = largest_file(tampered)
    page = b"<!DOCTYPE html><html><body>Not found</body></html>"
    with hostile_server(tampered) as server:
        server.answers[f"{DELTA}/{rel}"] = lambda h: answer(
            h, 200, page, {"Content-Type": "text/html; charset=utf-8"}
        )
        refused(server.url, subscriber, PublisherError, "HTML page")


def test_fetch_when_listed_files_are_missing_is_refused(tampered, subscriber):
    rel = largest_file(tampered)
    (tampered / DELTA / rel).unlink()
    with hostile_server(tampered) as server:
        refused(server.url, subscriber, PublisherError, "does not have it")


# --- answers written by hand ------------------------------------------------------------------


def answer(handler, status: int, body: bytes, headers: dict[str, str] | None = None) -> None:
    handler.send_response(status)
    for name, value in {"Content-Length": str(len(body)), **(headers or {})}.items():
        handler.send_header(name, value)
    handler.end_headers()
    handler.wfile.write(body)


def endless(handler) -> None:
    """A chunked 200 answer that never ends (until the client hangs up)."""
    handler.protocol_version = "HTTP/1.1"
    handler.send_response(200)
    handler.send_header("Transfer-Encoding", "chunked")
    handler.end_headers()
    block = b"0" * 65536
    while True:
        handler.wfile.write(b"%x\r\n%s\r\n" % (len(block), block))


# --- names this file system cannot hold -----------------------------------------------------------


def list_extra(publisher: Path, server, files: dict[str, bytes]) -> None:
    """List ``files`` ({path in the delta: bytes}) in the delta's CHECKSUMS.sha256, each
    answered by hand."""
    lines = [f"{hashlib.sha256(data).hexdigest()}  {rel}" for rel, data in files.items()]
    write_checksums(publisher, [*checksums_lines(publisher), *lines])
    for rel, data in files.items():
        server.answers[f"{DELTA}/{rel}"] = lambda h, data=data: answer(h, 200, data)


def test_fetch_when_a_listed_name_is_longer_than_the_file_system_holds_is_refused(
    tampered, subscriber
):
    name = f"snapshot/{'n' * 300}.parquet"
    with hostile_server(tampered) as server:
        list_extra(tampered, server, {name: b"a month file"})
        error = refused(server.url, subscriber, PublisherError, "a name of 308 bytes")
    assert name in str(error) and "CHECKSUMS.sha256" in str(error)


def test_cli_fetch_when_a_listed_file_is_also_a_listed_folder_exits_2_naming_both(
    tampered, subscriber, capsys
):
    before = tree_state(subscriber)
    with hostile_server(tampered) as server:
        list_extra(tampered, server, {"zz": b"a file", "zz/inner.bin": b"inside"})
        code = main(["fetch", server.url, "--root", str(subscriber)])
    err = capsys.readouterr().err

    assert code == 2
    assert err.count("\n") == 1 and "Traceback" not in err
    assert "'zz' as a file and as the folder of 'zz/inner.bin'" in err
    assert tree_state(subscriber) == before


def forbidden(handler) -> None:
    """403, as an S3 bucket without list permission answers for a key it does not hold."""
    handler.send_response(403)
    handler.send_header("Content-Length", "0")
    handler.end_headers()


def test_sync_when_a_later_month_fails_applies_the_months_fetched_then_reports_it(
    tampered, subscriber, capsys
):
    published = sorted(p.name for p in (tampered / "deltas").iterdir())
    following = next_month(published[-1])
    with hostile_server(tampered) as server:
        server.answers[f"deltas/{following}/CHECKSUMS.sha256"] = forbidden
        code = main(["sync", server.url, "--root", str(subscriber), "--no-audit"])
    out, err = capsys.readouterr()

    assert code == 1
    assert err.startswith("error: ") and f"deltas/{following}/CHECKSUMS.sha256" in err
    assert "HTTP 403" in err and "Traceback" not in err
    applied = sorted(p.name for p in (subscriber / "history").iterdir() if p.name[0] != ".")
    assert applied[-len(published) :] == published  # every month fetched, applied
    assert f"history/{published[-1]}" in out


# --- which publisher a refusal is of --------------------------------------------------------------


def relist(publisher: Path, rel: str, data: bytes) -> None:
    """Write the delta's ``rel`` as ``data`` and list it in CHECKSUMS.sha256 with its sha256."""
    (publisher / DELTA / rel).write_bytes(data)
    lines = [line for line in checksums_lines(publisher) if line.split("  ", 1)[1] != rel]
    write_checksums(publisher, [*lines, f"{hashlib.sha256(data).hexdigest()}  {rel}"])


def next_seal_changed(publisher: Path) -> None:
    manifest = json.loads((publisher / DELTA / "manifest.json").read_bytes())
    manifest["next"]["manifest_sha256"] = "0" * 64
    relist(publisher, "manifest.json", json.dumps(manifest).encode())


SPOILED = {
    "a manifest that is not JSON": (
        lambda publisher: relist(publisher, "manifest.json", b"{not json"),
        "manifest.json: is not valid JSON",
    ),
    "a CHECKSUMS.sha256 line that is none": (
        lambda publisher: write_checksums(publisher, [*checksums_lines(publisher), "garbage"]),
        "CHECKSUMS.sha256: line ",
    ),
    "a next seal that is not the manifest's": (
        next_seal_changed,
        "manifest.json, field files[",
    ),
}


@pytest.mark.parametrize("case", sorted(SPOILED))
def test_cli_fetch_when_a_publishers_file_is_refused_names_the_publisher_with_the_path(
    tampered, subscriber, capsys, case
):
    """A user following several publishers reads which one served the file: the refusal names
    it by the source's URL, not by its path at the publisher alone (``deltas/2026-10/...``)."""
    spoil, refusal = SPOILED[case]
    spoil(tampered)
    before = tree_state(subscriber)
    with hostile_server(tampered) as server:
        code = main(["fetch", server.url, "--root", str(subscriber)])
    err = capsys.readouterr().err

    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"error: {server.url}/{DELTA}/{refusal}")
    assert err.count(f"{DELTA}/") == err.count(f"{server.url}/{DELTA}/")  # never without it
    assert tree_state(subscriber) == before


def test_fetch_snapshot_when_its_seals_disagree_names_the_publishers_folder(tampered, tmp_path):
    history = tampered / "history" / MONTH
    lines = (history / "CHECKSUMS.sha256").read_text().splitlines()
    dropped = next(line for line in lines if line.endswith(".parquet"))
    (history / "CHECKSUMS.sha256").write_text("".join(f"{x}\n" for x in lines if x != dropped))
    root = tmp_path / "new"
    with hostile_server(tampered) as server, pytest.raises(VerificationError) as info:
        fetch_snapshot(server.url, root, MONTH, settings=SETTINGS)

    rel = dropped.split("  ", 1)[1]
    assert str(info.value) == (
        f"{server.url}/history/{MONTH} does not verify: {rel}: is in manifest.json but not in "
        "CHECKSUMS.sha256"
    )
    assert not root.exists()


def test_fetch_from_s3_when_a_publishers_file_is_refused_names_the_bucket_and_prefix_not_the_query(
    tampered, subscriber, s3_env
):
    relist(tampered, "manifest.json", b"{not json")
    client = s3_client(s3_env)
    for path in (tampered / DELTA).rglob("*"):
        if path.is_file():
            key = f"{s3_env.bucket}/spoiled/{path.relative_to(tampered).as_posix()}"
            with client.open_output_stream(key) as out:
                out.write(path.read_bytes())
    source = s3_env.uri("spoiled")
    before = tree_state(subscriber)

    with pytest.raises(ManifestError) as info:
        fetch_deltas(source, subscriber, settings=SETTINGS)

    assert str(info.value).startswith(
        f"s3://{s3_env.bucket}/spoiled/{DELTA}/manifest.json: is not valid JSON"
    )
    assert source.split("?")[1] not in str(info.value) and "?" not in str(info.value)
    assert tree_state(subscriber) == before

"""``fetch`` and ``sync`` on the command line, against nginx on loopback: a new subscriber's
mirror made current by one command, dry runs, JSON, progress, exit codes and one-line errors."""

from __future__ import annotations

import hashlib
import io
import json
import os
import re
import shutil
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.cli.mirror_commands import TransferProgress
from skewtape_pipeline.errors import ManifestError, VerificationError
from skewtape_pipeline.mirror.fetch import TransferStats, fetch_deltas, fetch_snapshot
from skewtape_pipeline.mirror.format import CHECKSUMS, MANIFEST
from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.mirror.apply_support import assert_same_snapshot, tree_state
from skewtape_pipeline_tests.mirror.publisher_servers import start_nginx
from skewtape_pipeline_tests.scale_out.servers import free_port


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def test_cli_sync_when_the_root_is_new_makes_a_current_verified_mirror(
    tmp_path, publisher, nginx_publisher, capsys
):
    root = tmp_path / "new"
    code, out, err = run(
        capsys, "sync", nginx_publisher.url, "--root", str(root), "--snapshot", SAMPLE_FIRST_MONTH
    )

    assert code == 0, err
    assert "2027-01 is not published yet" in out
    assert_same_snapshot(root / "history" / "2026-12", publisher / "history" / "2026-12")
    code, out, err = run(capsys, "sync", nginx_publisher.url, "--root", str(root))
    assert code == 0 and "already current" in out


def test_cli_fetch_when_json_prints_each_month_with_its_transfer_metadata(
    subscriber, nginx_publisher, capsys
):
    code, out, err = run(capsys, "fetch", nginx_publisher.url, "--root", str(subscriber), "--json")

    assert code == 0, err
    result = json.loads(out)
    assert [m["month"] for m in result["months"]] == ["2026-10", "2026-11", "2026-12"]
    for month in result["months"]:
        assert month["bytes_fetched"] == month["bytes"] > 0
        assert {"bytes_resumed", "retries", "seconds", "mean_rate"} <= month.keys()


def test_cli_fetch_when_dry_run_prints_months_and_bytes_and_writes_nothing(
    subscriber, nginx_publisher, capsys
):
    before = tree_state(subscriber)
    code, out, _ = run(capsys, "fetch", nginx_publisher.url, "--root", str(subscriber), "--dry-run")

    assert code == 0
    assert "deltas/2026-10: would fetch" in out and "bytes" in out
    assert tree_state(subscriber) == before


def test_cli_fetch_when_the_publisher_is_unreachable_exits_1_with_one_line(subscriber, capsys):
    url = f"http://127.0.0.1:{free_port()}"
    code, out, err = run(capsys, "fetch", url, "--root", str(subscriber), "--connections", "1")

    *retries, error = err.splitlines()
    assert code == 1 and out == "" and err.endswith("\n")
    assert error.startswith(f"error: {url}/deltas/2026-10/CHECKSUMS.sha256: ")
    assert [line.rsplit("; ", 1)[1] for line in retries] == [
        f"trying again (attempt {n} of 5)" for n in (2, 3, 4, 5)
    ]  # each retry told first, naming the file and why
    assert all(
        line.startswith(f"fetch: {url}/deltas/2026-10/CHECKSUMS.sha256: ") for line in retries
    )
    assert all("Connection refused" in line for line in retries)


def test_cli_fetch_when_the_source_is_plain_http_elsewhere_exits_2(subscriber, capsys):
    code, _, err = run(capsys, "fetch", "http://example.com/x", "--root", str(subscriber))
    assert code == 2 and "loopback" in err and err.count("\n") == 1


def test_cli_fetch_when_the_snapshot_month_is_malformed_exits_2(tmp_path, nginx_publisher, capsys):
    code, _, err = run(capsys, "fetch", nginx_publisher.url, "--root", str(tmp_path / "r"),
                       "--snapshot", "2026-13")  # fmt: skip
    assert code == 2 and "--snapshot '2026-13'" in err


@pytest.mark.parametrize("command", ["fetch", "sync"])
@pytest.mark.parametrize(
    "flag, value",
    [("--speed-limit", "-1"), ("--speed-limit", "fast"), ("--speed-limit", "inf"),
     ("--speed-time", "nan"), ("--speed-time", "-0.5"), ("--speed-time", "")],
)  # fmt: skip
def test_cli_fetch_and_sync_when_a_speed_flag_is_no_number_of_0_or_more_exit_2_changing_nothing(
    subscriber, nginx_publisher, capsys, command, flag, value
):
    before = tree_state(subscriber)
    code, out, err = run(capsys, command, nginx_publisher.url, "--root", str(subscriber),
                         flag, value)  # fmt: skip

    assert code == 2 and out == ""
    assert (
        err.startswith(f"error: {flag} {value!r}: expected a number of ") and err.count("\n") == 1
    )
    assert "0 turns the low-speed limit off" in err
    assert tree_state(subscriber) == before


def test_cli_fetch_when_the_speed_flags_are_0_fetches_without_a_low_speed_limit(
    subscriber, nginx_publisher, capsys
):
    code, out, err = run(capsys, "fetch", nginx_publisher.url, "--root", str(subscriber),
                         "--speed-limit", "0", "--speed-time", "0", "--json")  # fmt: skip

    assert code == 0, err
    assert [m["month"] for m in json.loads(out)["months"]] == ["2026-10", "2026-11", "2026-12"]


NOT_HTTP = "its endpoint is not a valid http(s) URL with a host[:port]"
BAD_ENDPOINTS = {
    "unclosed [ipv6": ("?endpoint_override=[::1&scheme=http", {}, "endpoint_override", NOT_HTTP),
    "a space in the host": ("?endpoint_override=a%20b", {}, "endpoint_override", NOT_HTTP),
    "a port past 65535": (
        "?endpoint_override=h:99999&scheme=http", {}, "endpoint_override", NOT_HTTP
    ),
    "an ftp scheme": ("?endpoint_override=127.0.0.1:9&scheme=ftp", {}, "endpoint_override",
                      NOT_HTTP),
    "a scheme in endpoint_override": (
        "?endpoint_override=http://127.0.0.1:9&scheme=http",
        {},
        "scheme=",
        "its endpoint_override holds a scheme (give it as scheme=)",
    ),
    "AWS_ENDPOINT_URL": ("", {"AWS_ENDPOINT_URL": "http://[::1"}, "AWS_ENDPOINT_URL", NOT_HTTP),
    "AWS_ENDPOINT_URL empty": ("", {"AWS_ENDPOINT_URL": ""}, "AWS_ENDPOINT_URL", NOT_HTTP),
    "AWS_ENDPOINT without scheme": ("", {"AWS_ENDPOINT": "127.0.0.1:9"}, "AWS_ENDPOINT",
                                    NOT_HTTP),
}  # fmt: skip


@pytest.mark.parametrize("command", ["fetch", "sync"])
@pytest.mark.parametrize("case", sorted(BAD_ENDPOINTS))
def test_cli_fetch_and_sync_when_the_s3_endpoint_is_no_http_url_exit_2_creating_nothing(
    tmp_path, capsys, monkeypatch, command, case
):
    """obstore takes any endpoint and panics building the first request (an invalid URI): the
    endpoint is checked when the source is opened, and never shown."""
    query, environment, named, why = BAD_ENDPOINTS[case]
    for name in ("AWS_ENDPOINT_URL", "AWS_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    for name, value in {"AWS_ACCESS_KEY_ID": "k", "AWS_SECRET_ACCESS_KEY": "s",
                        "AWS_EC2_METADATA_DISABLED": "true", **environment}.items():  # fmt: skip
        monkeypatch.setenv(name, value)
    root = tmp_path / "root"
    code, out, err = run(capsys, command, f"s3://bucket/pub{query}", "--root", str(root),
                         "--snapshot", SAMPLE_FIRST_MONTH)  # fmt: skip

    assert (code, out) == (2, "")
    assert err.startswith(
        f"error: source 's3://bucket/pub': not a usable S3 source ({why}; expected "
    )
    assert named in err and err.count("\n") == 1
    shown = (*environment.values(), "::1", "99999", "ftp", "127.0.0.1", "http://")
    assert not [v for v in shown if v and v in err]
    assert not root.exists()


@pytest.mark.parametrize("command", ["fetch", "sync"])
def test_cli_fetch_when_metadata_is_disabled_and_no_s3_keys_are_set_exits_2_naming_them(
    tmp_path, capsys, monkeypatch, command
):
    """The S3 client ignores AWS_EC2_METADATA_DISABLED and would ask the instance-metadata
    address (off this machine) for a role: refused before any request, naming what is missing."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", "AWS_SKIP_SIGNATURE"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_EC2_METADATA_DISABLED", "true")
    root = tmp_path / "root"
    code, out, err = run(capsys, command, "s3://bucket/pub?endpoint_override=127.0.0.1:9&scheme=http",
                         "--root", str(root), "--snapshot", SAMPLE_FIRST_MONTH)  # fmt: skip

    assert (code, out) == (2, "")
    assert err == (
        "error: source s3://bucket: no S3 credentials: AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY are not set, and AWS_EC2_METADATA_DISABLED=true rules out the "
        "instance's role; set the keys (or AWS_SKIP_SIGNATURE=true for a public bucket)\n"
    )
    assert not root.exists()


NO_BUCKET_RUNS = {
    "sync, a new root": ("sync", []),
    "sync --snapshot, a new root": ("sync", ["--snapshot", SAMPLE_FIRST_MONTH]),
    "fetch --snapshot, a new root": ("fetch", ["--snapshot", SAMPLE_FIRST_MONTH]),
    "fetch, a mirror": ("fetch", None),
    "sync, a mirror": ("sync", None),
}
"""How each command meets the publisher first: asking for the newest snapshot (HEADs), for a
chosen snapshot (a GET) or for the next delta (a GET); None: on a mirror holding a month."""


@pytest.mark.parametrize("case", sorted(NO_BUCKET_RUNS))
def test_cli_fetch_and_sync_when_the_s3_bucket_does_not_exist_exit_2_naming_it_changing_nothing(
    tmp_path, subscriber, capsys, s3_env, case
):
    command, start = NO_BUCKET_RUNS[case]
    root = subscriber if start is None else tmp_path / "new"
    before = tree_state(root) if root.exists() else None
    source = s3_env.uri("pub", bucket="no-such-bucket")
    code, out, err = run(capsys, command, source, "--root", str(root), *(start or []))

    assert (code, out) == (2, "")
    assert err == (
        "error: s3://no-such-bucket/pub: the bucket 'no-such-bucket' does not exist on the S3 "
        "server; check the source's bucket name and endpoint (nothing was fetched)\n"
    )
    assert s3_env.environment()["AWS_SECRET_ACCESS_KEY"] not in err
    assert (tree_state(root) if root.exists() else None) == before


class Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_transfer_progress_on_a_terminal_draws_a_bar_with_rate_and_time_left(monkeypatch):
    monkeypatch.setenv("COLUMNS", "120")  # a narrower terminal cuts the stage
    stream = Terminal()
    shown = TransferProgress(stream)
    stats = TransferStats(
        bytes_total=1_000_000_000, bytes_done=400_000_000, bytes_fetched=400_000_000
    )
    shown.update(stats)
    shown.finish()

    drawn = stream.getvalue()
    assert drawn.startswith("\r[############------------------] ")
    assert "MB/s" in drawn and "s left" in drawn and "400.0 MB of 1.00 GB" in drawn
    assert drawn.endswith("\n")


def test_transfer_progress_in_a_pipe_prints_lines_not_a_bar():
    stream = io.StringIO()
    shown = TransferProgress(stream, interval=0.0)
    shown.update(TransferStats(bytes_total=10_000_000, bytes_done=5_000_000))
    shown.finish()

    line = stream.getvalue()
    assert line.startswith("fetch: ") and "5.0 MB of 10.0 MB (50%)" in line and "\r" not in line


def test_cli_fetch_when_the_scheme_is_upper_case_fetches_as_from_the_lower_case_url(
    subscriber, nginx_publisher, capsys
):
    url = nginx_publisher.url.replace("http://", "HTTP://")
    code, out, err = run(capsys, "fetch", url, "--root", str(subscriber), "--json")

    assert code == 0, err
    result = json.loads(out)
    assert result["source"] == nginx_publisher.url.rstrip("/")
    assert [m["month"] for m in result["months"]] == ["2026-10", "2026-11", "2026-12"]


def _listing(folder) -> list[str]:
    """Every path below ``folder``, hidden ones (lock files, staging folders) included."""
    return sorted(str(path.relative_to(folder)) for path in folder.rglob("*"))


def test_cli_sync_when_a_carried_file_was_modified_locally_names_it_and_changes_nothing(
    subscriber, nginx_publisher, capsys
):
    """A file the next month carries from its parent, modified locally (size and mtime
    restored): one error line naming the parent month's file as modified locally (not a
    staging folder gone when it is read), exit 2, no month applied, no lock file left."""
    code, _, err = run(capsys, "fetch", nginx_publisher.url, "--root", str(subscriber))
    assert code == 0, err
    license_file = subscriber / "history" / SAMPLE_FIRST_MONTH / "LICENSE.txt"
    was = license_file.stat()
    license_file.chmod(0o644)
    license_file.write_bytes(license_file.read_bytes().replace(b"a", b"b", 1))
    os.utime(license_file, ns=(was.st_atime_ns, was.st_mtime_ns))
    before = _listing(subscriber)

    code, out, err = run(capsys, "sync", nginx_publisher.url, "--root", str(subscriber))

    assert code == 2 and "already current" not in out
    assert err.count("\n") == 1 and err.startswith(
        f"error: {license_file.parent} does not verify: LICENSE.txt: modified locally"
    ), err
    assert ".partial" not in err
    assert _listing(subscriber) == before


@pytest.fixture
def served_tampered(tampered, tmp_path):
    """nginx serving :func:`tampered` (a private copy of the publisher a test may change)."""
    server = start_nginx(tampered, tmp_path / "nginx")
    try:
        yield server
    finally:
        server.stop()


def _lengthen(tampered, month: str) -> None:
    """Make a file of ``month``'s delta longer than its manifest records (refused at fetch)."""
    path = tampered / "deltas" / month / "snapshot" / "fills" / "kalshi" / f"{month}.parquet"
    path.chmod(0o644)
    with path.open("ab") as handle:
        handle.write(b"garbage\n")


def test_cli_sync_when_the_first_delta_is_refused_exits_2_changing_nothing(
    subscriber, tampered, served_tampered, capsys
):
    """The fetch of the first pending month refused, nothing pending: exit 2 with the one
    error line, nothing printed as "already current", no deltas/ folder or lock file made."""
    _lengthen(tampered, "2026-10")
    before = _listing(subscriber)

    code, out, err = run(capsys, "sync", served_tampered.url, "--root", str(subscriber))

    assert code == 2 and out == "", out
    assert err.count("\n") == 1 and "deltas/2026-10" in err and "longer" in err, err
    assert _listing(subscriber) == before


def test_cli_sync_when_a_later_delta_is_refused_reports_the_months_fetched_and_applied(
    subscriber, tampered, served_tampered, capsys
):
    """2026-11 refused: 2026-10 was fetched and applied before it, and both the text and the
    JSON say so (its fetch line, its apply), then the refusal's one error line (exit 2)."""
    _lengthen(tampered, "2026-11")
    again = subscriber.parent / "again"
    shutil.copytree(subscriber, again)

    code, out, err = run(capsys, "sync", served_tampered.url, "--root", str(subscriber))

    assert code == 2 and err.count("\n") == 1 and "deltas/2026-11" in err, err
    assert f"{subscriber / 'deltas' / '2026-10'}: " in out and "files verified" in out
    assert f"{subscriber / 'history' / '2026-10'}: " in out and "already current" not in out
    assert (subscriber / "history" / "2026-10").is_dir()
    code, out, err = run(capsys, "sync", served_tampered.url, "--root", str(again), "--json")
    assert code == 2
    result = json.loads(out)
    assert [month["month"] for month in result["fetch"]["months"]] == ["2026-10"]
    assert [applied["next_bundle_id"] for applied in result["catch_up"]] == [
        "skewtape-history-2026-10"
    ]


def test_cli_fetch_when_a_later_delta_is_refused_reports_the_months_it_placed(
    subscriber, tampered, served_tampered, capsys
):
    _lengthen(tampered, "2026-11")
    code, out, err = run(capsys, "fetch", served_tampered.url, "--root", str(subscriber))
    assert code == 2 and err.count("\n") == 1 and "deltas/2026-11" in err, err
    assert f"{subscriber / 'deltas' / '2026-10'}: " in out and "files verified" in out
    assert (subscriber / "deltas" / "2026-10").is_dir()
    assert not (subscriber / "deltas" / "2026-11").exists()


def test_cli_sync_when_snapshot_names_another_month_than_the_roots_exits_2_applying_nothing(
    subscriber, publisher, capsys
):
    assert run(capsys, "fetch", str(publisher), "--root", str(subscriber))[0] == 0  # pending
    before = sorted(p.name for p in (subscriber / "history").iterdir())
    code, out, err = run(capsys, "sync", str(publisher), "--root", str(subscriber),
                         "--snapshot", "2026-10")  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1, err
    assert sorted(p.name for p in (subscriber / "history").iterdir()) == before


def test_cli_sync_when_current_and_the_audit_log_takes_no_records_exits_2_naming_it(
    subscriber, publisher, capsys
):
    assert run(capsys, "sync", str(publisher), "--root", str(subscriber))[0] == 0
    logs = subscriber / "logs"
    logs.mkdir()
    code, out, err = run(capsys, "sync", str(publisher), "--root", str(subscriber),
                         "--audit-log", str(logs))  # fmt: skip
    assert code == 2 and out == "" and err.count("\n") == 1 and str(logs) in err, err


# --- a month whose manifest.json and CHECKSUMS.sha256 disagree: refused before it is placed ---


def reseal(folder: Path, changed: str, data: bytes) -> None:
    """Write ``folder/changed`` and give it its right line in ``folder``'s CHECKSUMS.sha256."""
    (folder / changed).write_bytes(data)
    checksums = folder / "CHECKSUMS.sha256"
    lines = [line for line in checksums.read_text().splitlines() if line[66:] != changed]
    lines.append(f"{hashlib.sha256(data).hexdigest()}  {changed}")
    checksums.write_text("".join(f"{line}\n" for line in lines))


def list_stray_file(snapshot: Path) -> None:
    reseal(snapshot, "stray.txt", b"stray\n")


def unlist_readme(snapshot: Path) -> None:
    checksums = snapshot / "CHECKSUMS.sha256"
    lines = checksums.read_text().splitlines()
    checksums.write_text("".join(f"{x}\n" for x in lines if x[66:] != "README.md"))


def misdate_readme(snapshot: Path) -> None:
    """The manifest gives README.md another sha256 than CHECKSUMS.sha256 (and its bytes) do."""
    manifest = json.loads((snapshot / "manifest.json").read_bytes())
    entry = next(e for e in manifest["files"] if e["path"] == "README.md")
    entry["sha256"] = "0" * 64
    reseal(snapshot, "manifest.json", json.dumps(manifest, indent=2).encode())


IN_ONE_ONLY = "{}: is in {} but not in {}"
SEAL_DISAGREEMENTS = {  # what `verify` says of the month once placed
    "a stray file": (list_stray_file, IN_ONE_ONLY.format("stray.txt", CHECKSUMS, MANIFEST)),
    "a file left out": (unlist_readme, IN_ONE_ONLY.format("README.md", MANIFEST, CHECKSUMS)),
    "another sha256": (misdate_readme, f"README.md: {MANIFEST} says sha256 {'0' * 64} but "),
}


@pytest.mark.parametrize("case", sorted(SEAL_DISAGREEMENTS))
def test_cli_fetch_snapshot_when_its_manifest_and_checksums_disagree_exits_2_placing_nothing(
    tmp_path, tampered, capsys, case
):
    tamper, problem = SEAL_DISAGREEMENTS[case]
    tamper(tampered / "history" / SAMPLE_FIRST_MONTH)
    root = tmp_path / "new"
    server = start_nginx(tampered, tmp_path / "nginx")
    try:
        with pytest.raises(VerificationError, match=re.escape(problem)):
            fetch_snapshot(server.url, root, SAMPLE_FIRST_MONTH)
        for command in ("fetch", "sync"):
            code, out, err = run(capsys, command, server.url, "--root", str(root),
                                 "--snapshot", SAMPLE_FIRST_MONTH)  # fmt: skip
            assert code == 2 and out == "", (command, err)
            folder = f"{server.url}/history/{SAMPLE_FIRST_MONTH}"  # the publisher's, by its URL
            assert err.startswith(f"error: {folder} does not verify: {problem}")
            assert err.count("\n") == 1
    finally:
        server.stop()
    assert not root.exists()  # no month, no staging folder, no lock file


def list_stray_file_in_next_snapshot(delta: Path) -> None:
    """The next snapshot's CHECKSUMS.sha256, as the delta ships it, lists a file its manifest
    does not; the delta's manifest and CHECKSUMS.sha256 vouch for it all the same."""
    shipped = delta / "snapshot" / "CHECKSUMS.sha256"
    data = shipped.read_bytes() + f"{'1' * 64}  stray.txt\n".encode()
    reseal(delta, "snapshot/CHECKSUMS.sha256", data)
    manifest = json.loads((delta / "manifest.json").read_bytes())
    manifest["files"][-2]["sha256"] = hashlib.sha256(data).hexdigest()
    reseal(delta, "manifest.json", json.dumps(manifest, indent=2).encode())


def test_cli_sync_when_a_deltas_next_checksums_disagree_with_its_manifest_refuses_at_the_fetch(
    tmp_path, tampered, subscriber, capsys
):
    list_stray_file_in_next_snapshot(tampered / "deltas" / "2026-11")
    problem = (
        "deltas/2026-11/snapshot/manifest.json, field files: has no entry for 'stray.txt'; "
        f"the next snapshot's CHECKSUMS.sha256 lists {'1' * 64}"
    )
    server = start_nginx(tampered, tmp_path / "nginx")
    try:
        with pytest.raises(ManifestError, match=re.escape(problem)):
            fetch_deltas(server.url, subscriber)  # 2026-10 placed, then 2026-11 refused
        assert sorted(p.name for p in (subscriber / "deltas").iterdir()) == ["2026-10"]
        code, out, err = run(capsys, "sync", server.url, "--root", str(subscriber))
    finally:
        server.stop()

    assert code == 2 and err == f"error: {server.url}/{problem}\n"  # the publisher's file
    assert "history/2026-10: skewtape-history-2026-09 -> skewtape-history-2026-10" in out
    assert sorted(p.name for p in (subscriber / "deltas").iterdir()) == ["2026-10"]
    history = [p.name for p in (subscriber / "history").iterdir() if p.is_dir()]
    assert sorted(history) == ["2026-09", "2026-10"]  # nor a staging folder of 2026-11

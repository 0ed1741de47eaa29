"""Fixtures of the scale-out tests: a PostgreSQL server and a broker for the session, a Dagster
instance on PostgreSQL (from ``deploy/postgres/dagster.yaml``) per test, and the applied sample
chain of the orchestration tests."""

from __future__ import annotations

import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline_tests.orchestration.conftest import (  # noqa: F401 (fixtures)
    applied_chain,
    applied_chain_once,
)
from skewtape_pipeline_tests.scale_out.servers import PostgresServer, start_broker, start_postgres

REPO = Path(__file__).resolve().parents[2]
POSTGRES_INSTANCE_FILE = REPO / "deploy" / "postgres" / "dagster.yaml"


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = start_postgres()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def broker(tmp_path_factory: pytest.TempPathFactory):
    server = start_broker(tmp_path_factory.mktemp("broker"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_home(
    postgres_server: PostgresServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Path:
    """A DAGSTER_HOME holding the PostgreSQL instance file, its variables set for a new,
    empty database of this test."""
    home = tmp_path / "dagster_home"
    home.mkdir()
    shutil.copy(POSTGRES_INSTANCE_FILE, home / "dagster.yaml")
    database = postgres_server.create_database(f"dagster_{uuid.uuid4().hex[:12]}")
    for name, value in postgres_server.environment(database).items():
        monkeypatch.setenv(name, value)
    monkeypatch.setenv("DAGSTER_HOME", str(home))
    return home


@pytest.fixture
def postgres_instance(postgres_home: Path) -> Iterator[dg.DagsterInstance]:
    with dg.DagsterInstance.from_config(str(postgres_home)) as instance:
        yield instance

"""Fixtures of the fetch tests: the sample chain laid out as a publisher serves it, nginx
serving it for the session, and a subscriber's data root holding the first month."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from skewtape_pipeline_tests.conftest import SAMPLE_FIRST_MONTH
from skewtape_pipeline_tests.mirror import minimal_publisher as minimal
from skewtape_pipeline_tests.mirror.publisher_servers import age_files, publisher_tree, start_nginx

LARGE_PARENT, LARGE_NEXT = "2026-11", "2026-12"


@pytest.fixture(scope="session")
def publisher(published_chain, tmp_path_factory) -> Path:
    """The sample chain as a publisher serves it: ``history/<month>/`` of every month beside
    ``deltas/<month>/`` (never modified; copy it to tamper with it)."""
    root, full = published_chain
    return publisher_tree(root, full, tmp_path_factory.mktemp("publisher") / "pub")


@pytest.fixture(scope="session")
def nginx_publisher(publisher, tmp_path_factory):
    """nginx serving :func:`publisher` on 127.0.0.1 for the session."""
    server = start_nginx(publisher, tmp_path_factory.mktemp("nginx"))
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def subscriber(tmp_path, publisher) -> Path:
    """A data root holding the publisher's first month as its only snapshot."""
    root = tmp_path / "mirror"
    shutil.copytree(
        publisher / "history" / SAMPLE_FIRST_MONTH, root / "history" / SAMPLE_FIRST_MONTH
    )
    return root


@pytest.fixture
def tampered(tmp_path, publisher) -> Path:
    """A private copy of :func:`publisher` that a test may change."""
    copy = tmp_path / "tampered"
    shutil.copytree(publisher, copy)
    return copy


@pytest.fixture(scope="session")
def large_publisher(tmp_path_factory) -> Path:
    """A publisher (written by the minimal publisher) whose one delta, ``deltas/2026-12``, is
    a few MB of whole files, so that a cut, a stall or a kill lands inside a file's body."""
    out = tmp_path_factory.mktemp("large") / "pub"
    draw = random.Random(22).randbytes
    kept = {"fills/kalshi/2026-10.parquet": draw(1 << 20), "README.md": b"Skewtape history\n"}
    parent_files = {**kept, "fills/kalshi/2026-11.parquet": draw(1 << 20)}
    next_files = {**kept, "fills/kalshi/2026-11.parquet": draw(8 << 20),
                  "fills/kalshi/2026-12.parquet": draw(16 << 20),
                  "candles/kalshi/2026-12.parquet": draw(6 << 20)}  # fmt: skip
    style = minimal.STYLES["terse"]
    parent = minimal.publish_snapshot(
        out / "history" / LARGE_PARENT, parent_files, bundle_id="skewtape-history-2026-11",
        venues=("kalshi",), style=style,
    )  # fmt: skip
    nxt = minimal.publish_snapshot(
        out / "history" / LARGE_NEXT, next_files, bundle_id="skewtape-history-2026-12",
        venues=("kalshi",), style=style,
    )  # fmt: skip
    minimal.publish_delta(parent, nxt, out / "deltas" / LARGE_NEXT, style=style)
    age_files(out)
    return out


@pytest.fixture
def large_subscriber(tmp_path, large_publisher) -> Path:
    """A data root holding :func:`large_publisher`'s parent month as its only snapshot."""
    root = tmp_path / "mirror"
    shutil.copytree(large_publisher / "history" / LARGE_PARENT, root / "history" / LARGE_PARENT)
    return root


@pytest.fixture(scope="session")
def large_nginx(large_publisher, tmp_path_factory):
    """nginx serving :func:`large_publisher` for the session."""
    server = start_nginx(large_publisher, tmp_path_factory.mktemp("nginx-large"))
    try:
        yield server
    finally:
        server.stop()

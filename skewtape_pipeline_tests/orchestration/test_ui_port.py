"""`make ui` refuses a busy port before starting anything, naming a free one to choose."""

from __future__ import annotations

import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from skewtape_pipeline.orchestration.ui_port import main, port_is_free

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def busy_port():
    """A port a listening socket holds for the test."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        yield server.getsockname()[1]


def test_ui_port_when_the_port_is_busy_exits_2_naming_a_free_one(busy_port, capsys):
    assert main([str(busy_port)]) == 2
    err = capsys.readouterr().err.strip()
    prefix = f"error: port {busy_port} on 127.0.0.1 is in use by another program; choose a free "
    assert err.startswith(prefix + "one: make ui UI_PORT=")
    assert port_is_free(int(err.rsplit("=", 1)[1]))


def test_ui_port_when_the_port_is_free_exits_0_silently(busy_port, capsys):
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        free = probe.getsockname()[1]
    assert main([str(free)]) == 0
    assert capsys.readouterr().err == ""


def test_make_ui_when_the_port_is_busy_refuses_before_starting_anything(busy_port, tmp_path):
    make = shutil.which("make")
    assert make, "make is needed to run `make ui`"
    venv = Path(sys.executable).parent.parent
    home = tmp_path / "home"
    completed = subprocess.run(
        [make, "-s", "-C", str(REPO), "-o", f"{venv}/.installed", "ui", f"VENV={venv}",
         f"UI_PORT={busy_port}", f"SKEWTAPE_HOME={home}"],
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert completed.returncode != 0
    assert f"error: port {busy_port} on 127.0.0.1 is in use by another program" in completed.stderr
    assert not home.exists()

"""`make ui` refuses a busy port before starting anything, naming a free one to choose, and
stops its daemon and webserver however its shell ends."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.request
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


def group_members(group: int) -> dict[int, str]:
    """The live processes of process group ``group``: pid to command line."""
    members = {}
    for entry in Path("/proc").iterdir():
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            if fields[0] != "Z" and int(fields[2]) == group:
                command = (entry / "cmdline").read_bytes().replace(b"\0", b" ")
                members[int(entry.name)] = command.decode(errors="replace")
        except (OSError, ValueError, IndexError):
            continue
    return members


def wait_until(predicate, seconds: float) -> bool:
    """Whether ``predicate()`` came true within ``seconds`` (polled)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.5)
    return predicate()


def daemon_started(group: int) -> bool:
    return any("dagster-daemon" in command for command in group_members(group).values())


def answers(port: int) -> bool:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/server_info", timeout=2):
            return True
    except OSError:
        return False


@pytest.mark.parametrize("how", ["shell-terminated", "ctrl-c"])
def test_make_ui_when_its_shell_is_terminated_or_interrupted_stops_daemon_and_webserver(
    tmp_path, how
):
    make = shutil.which("make")
    assert make, "make is needed to run `make ui`"
    venv = Path(sys.executable).parent.parent
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    ui = subprocess.Popen(
        [make, "-s", "-C", str(REPO), "-o", f"{venv}/.installed", "ui", f"VENV={venv}",
         f"UI_PORT={port}", f"SKEWTAPE_HOME={tmp_path / 'home'}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True,
    )  # fmt: skip
    try:
        assert wait_until(lambda: answers(port) and daemon_started(ui.pid), 240), (
            "make ui never answered with its daemon started",
            group_members(ui.pid),
        )  # the webserver may answer before the daemon's process is there (a loaded machine)
        members = group_members(ui.pid)
        if how == "ctrl-c":  # the terminal signals the whole foreground group
            os.killpg(ui.pid, signal.SIGINT)
        else:  # the recipe's shell alone
            shell = [p for p, c in members.items() if c.startswith("/bin/sh -c")]
            assert len(shell) == 1, members
            os.kill(shell[0], signal.SIGTERM)
        assert wait_until(lambda: not group_members(ui.pid), 120), group_members(ui.pid)
        assert not answers(port)
    finally:
        if group_members(ui.pid):
            os.killpg(ui.pid, signal.SIGKILL)
        ui.wait(timeout=30)

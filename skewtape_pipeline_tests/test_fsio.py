"""The file system primitives: locks that name their holder and never follow a link, the one
JSON loader, and OS errors that name the file they concern."""

from __future__ import annotations

import errno
import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from skewtape_pipeline import fsio, progress
from skewtape_pipeline.errors import (
    ApplyInProgressError,
    ArchiveBusyError,
    LinkedStateFileError,
    LockHeldError,
    MalformedJsonError,
)

DEEP = b"[" * 100_000 + b"]" * 100_000
"""JSON nested far deeper than Python's recursion limit."""

HOLDER = """
import sys, time
from pathlib import Path
from skewtape_pipeline import fsio
with fsio.exclusive_lock(Path(sys.argv[1]), what="re-tiering"):
    Path(sys.argv[2]).touch()
    time.sleep(60)
"""


def hold_in_another_process(lock: Path, flag: Path) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, "-c", HOLDER, str(lock), str(flag)])
    deadline = time.monotonic() + 60
    while not flag.exists():
        assert process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    return process


def test_exclusive_lock_when_lock_path_is_a_symlink_refuses_and_leaves_the_target(tmp_path):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    lock = tmp_path / "history" / ".skewtape-apply.lock"
    lock.parent.mkdir()
    lock.symlink_to(target)
    with (
        pytest.raises(LinkedStateFileError, match=r"\.skewtape-apply\.lock"),
        fsio.exclusive_lock(lock),
    ):
        pass
    assert target.read_text() == "keep me\n"


def test_exclusive_lock_when_held_by_another_process_names_the_operation_pid_host_and_since(
    tmp_path,
):
    lock = tmp_path / ".skewtape-archive.lock"
    process = hold_in_another_process(lock, tmp_path / "held")
    try:
        busy = fsio.exclusive_lock(lock, held_error=ArchiveBusyError, what="compacting")
        with pytest.raises(ArchiveBusyError) as raised, busy:
            pass
    finally:
        process.kill()
        process.wait()
    message = str(raised.value)
    assert isinstance(raised.value, LockHeldError)
    assert not isinstance(raised.value, ApplyInProgressError)
    assert str(lock) in message and "re-tiering" in message
    assert f"process {process.pid}" in message and socket.gethostname() in message
    assert "since 20" in message  # an ISO-8601 time


def test_exclusive_lock_when_waiting_reports_each_second_and_the_holder_as_progress(tmp_path):
    lock = tmp_path / ".skewtape-archive.lock"
    process = hold_in_another_process(lock, tmp_path / "held")
    reports: list[tuple[int, int, str, str]] = []
    try:
        busy = fsio.exclusive_lock(lock, timeout=4, held_error=ArchiveBusyError, what="pruning")
        with (
            progress.reporting(lambda *report: reports.append(report)),
            pytest.raises(ArchiveBusyError),
            busy,
        ):
            pass
    finally:
        process.kill()
        process.wait()
    waited = [done for done, _, _, _ in reports]
    assert waited and waited == sorted(set(waited)) and waited[0] >= 1 and waited[-1] <= 4
    assert {(total, unit) for _, total, _, unit in reports} == {(4, "s")}
    stage = reports[0][2]
    assert str(lock) in stage and "re-tiering" in stage and f"process {process.pid}" in stage


def test_exclusive_lock_when_the_wait_ends_reports_the_lock_taken(tmp_path):
    lock = tmp_path / ".skewtape-archive.lock"
    process = hold_in_another_process(lock, tmp_path / "held")
    reports: list[tuple[int, int, str, str]] = []

    def seen(*report) -> None:  # the holder goes once the wait was reported, however slow
        reports.append(report)
        process.kill()

    try:
        with progress.reporting(seen), fsio.exclusive_lock(lock, timeout=60, what="pruning"):
            pass
    finally:
        process.kill()
        process.wait()
    done, total, stage, unit = reports[-1]
    assert stage == f"took {lock} after {done} s" and done == total and unit == "s"
    assert [r[2] for r in reports[:-1]] and all("waiting" in r[2] for r in reports[:-1])


def test_exclusive_lock_when_its_holder_removes_the_file_locks_the_file_there_now(
    tmp_path, monkeypatch
):
    lock = tmp_path / ".skewtape-fetch.lock"
    opened = fsio.open_state_file

    def open_then_lose_it(path, flags, mode=0o644):
        fd = opened(path, flags, mode)
        if opened_files.append(path) or len(opened_files) == 1:
            fsio.remove_lock_file(lock)  # as a holder does before letting go
        return fd

    opened_files: list[Path] = []
    monkeypatch.setattr(fsio, "open_state_file", open_then_lose_it)
    with fsio.exclusive_lock(lock, what="fetching"):
        assert lock.is_file()  # the lock held is the file a newcomer opens, not a removed one
        assert "fetching" in lock.read_text()
    assert len(opened_files) == 2


def test_atomic_write_bytes_when_a_symlink_is_planted_at_the_temp_name_leaves_its_target(
    tmp_path,
):
    target = tmp_path / "precious.txt"
    target.write_text("keep me\n")
    journal = tmp_path / "journal.json"
    fsio.temp_path_for(journal).symlink_to(target)
    fsio.atomic_write_bytes(journal, b"{}")
    assert journal.read_bytes() == b"{}" and not journal.is_symlink()
    assert target.read_text() == "keep me\n"


def test_read_state_bytes_when_path_is_a_symlink_refuses_naming_it(tmp_path):
    target = tmp_path / "precious.json"
    target.write_text("{}")
    cache = tmp_path / "hashes.json"
    cache.symlink_to(target)
    with pytest.raises(LinkedStateFileError, match=r"hashes\.json"):
        fsio.read_state_bytes(cache)
    assert fsio.read_state_bytes(tmp_path / "absent.json") is None
    assert fsio.read_state_bytes(target) == b"{}"


def test_load_json_when_nested_deeper_than_the_stack_raises_a_typed_error_naming_the_file():
    with pytest.raises(MalformedJsonError, match=r"x/journal\.json, line 7: .*nested too deep"):
        fsio.load_json(DEEP, Path("x/journal.json"), line=7)


@pytest.mark.parametrize("data", [b"{", b"\xff\xfe", b"[1, 2"])
def test_load_json_when_not_json_raises_the_error_asked_for(data):
    class Refused(Exception):
        pass

    with pytest.raises(Refused, match=r"m\.json: is not valid JSON"):
        fsio.load_json(data, "m.json", error=Refused)


def test_load_json_when_valid_returns_the_value():
    assert fsio.load_json(b'{"a": [1, {"b": null}]}', "m.json") == {"a": [1, {"b": None}]}


def test_atomic_copy_when_the_disk_is_full_names_the_file(tmp_path, monkeypatch):
    source = tmp_path / "source.parquet"
    source.write_bytes(b"x" * 100)
    target = tmp_path / "snapshot" / "fills.parquet"

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(OSError) as raised:
        fsio.atomic_copy(source, target)
    assert raised.value.errno == errno.ENOSPC
    assert str(target) in str(raised.value)
    assert not target.exists() and list(target.parent.iterdir()) == []


def test_atomic_write_bytes_when_the_disk_is_full_names_the_file(tmp_path, monkeypatch):
    target = tmp_path / "manifest.json"

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match=r"No space left on device: .*manifest\.json"):
        fsio.atomic_write_bytes(target, b"{}")
    assert list(tmp_path.iterdir()) == []


def test_atomic_clone_link_or_copy_when_the_copy_fallback_hits_a_full_disk_names_the_file(
    tmp_path, monkeypatch
):
    source = tmp_path / "source.parquet"
    source.write_bytes(b"x" * 100)
    target = tmp_path / "fills.parquet"

    def cross_device(*args, **kwargs):
        raise OSError(errno.EXDEV, os.strerror(errno.EXDEV))

    def full(*args, **kwargs):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "link", cross_device)
    monkeypatch.setattr(shutil, "copyfile", full)
    with pytest.raises(OSError, match=r"fills\.parquet"):
        fsio.atomic_clone_link_or_copy(source, target)


def test_atomic_clone_link_or_copy_when_the_folder_fsync_hits_a_full_disk_names_the_folder(
    tmp_path, monkeypatch
):
    source = tmp_path / "source.parquet"
    source.write_bytes(b"x" * 100)
    target = tmp_path / "snapshot" / "fills.parquet"

    def full(fd):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "fsync", full)
    with pytest.raises(OSError, match=r"No space left on device: .*snapshot"):
        fsio.atomic_clone_link_or_copy(source, target)


def test_orphaned_temps_when_a_writer_died_lists_its_temp_not_a_live_ones(tmp_path):
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)  # fmt: skip
    live = tmp_path / fsio.unique_temp_name("part-0.parquet")
    live.write_bytes(b"being written")
    host = socket.gethostname().replace(".", "_")
    orphan = tmp_path / f".part-0.parquet.{host}.{dead.stdout.strip()}.1.0{fsio.TEMP_MARKER}"
    orphan.write_bytes(b"left by a crash")
    elsewhere = tmp_path / f".part-0.parquet.otherhost.{dead.stdout.strip()}.1.0{fsio.TEMP_MARKER}"
    elsewhere.write_bytes(b"another host's writer: its pid means nothing here")

    assert fsio.orphaned_temps(tmp_path) == [orphan]
    assert fsio.orphaned_temps(tmp_path / "missing") == []


def test_create_staged_file_when_the_folder_vanishes_once_makes_it_again(tmp_path, monkeypatch):
    temp = tmp_path / "staging" / f"part.parquet{fsio.TEMP_MARKER}"
    create = fsio._create_temp
    calls = []

    def vanished_once(path):
        calls.append(path)
        if len(calls) == 1:
            path.parent.rmdir()  # another writer pruned the empty folder meanwhile
        return create(path)

    monkeypatch.setattr(fsio, "_create_temp", vanished_once)
    fsio.create_staged_file(temp)
    assert temp.is_file() and temp.stat().st_size == 0
    assert len(calls) == 2


def test_start_writeback_keeps_the_bytes_and_ignores_a_descriptor_it_cannot_use(tmp_path):
    path = tmp_path / "streamed.bin"
    data = os.urandom(3 << 16)
    fd = os.open(path, os.O_CREAT | os.O_WRONLY)
    try:
        os.write(fd, data)
        fsio.start_writeback(fd, 0, len(data))
        os.fsync(fd)
    finally:
        os.close(fd)

    fsio.start_writeback(fd, 0, len(data))  # closed: a hint that cannot apply is dropped

    assert path.read_bytes() == data

"""Crash-safe file system primitives: atomic writes, directory fsync, an exclusive lock.

Every write goes to a temporary file in the destination's own folder, is fsynced, renamed over
the destination and the folder is fsynced. A crash therefore leaves either the old file or the
new one, plus at most a stray temporary file that :func:`remove_stale_temps` cleans up.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import shutil
import time
from collections.abc import Callable, Iterator
from pathlib import Path

from skewtape_pipeline.errors import ApplyInProgressError

TEMP_MARKER = ".skewtape-tmp"
"""Every temporary file's name contains this marker, so leftovers of a crash are recognisable."""


def temp_path_for(target: Path) -> Path:
    """A temporary path in ``target``'s folder, unique to this process."""
    return target.with_name(f".{target.name}.{os.getpid()}{TEMP_MARKER}")


def is_temp(path: Path) -> bool:
    """True when ``path`` names a temporary file of this module."""
    return path.name.startswith(".") and path.name.endswith(TEMP_MARKER)


def fsync_dir(folder: Path) -> None:
    """fsync a folder so that a rename or unlink inside it survives a power loss."""
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_publish_hook: Callable[[Path, Path], None] | None = None


def set_publish_hook(
    hook: Callable[[Path, Path], None] | None,
) -> Callable[[Path, Path], None] | None:
    """Install ``hook(temp, target)``, called just before every atomic rename; returns the old one.

    A testing seam for crash injection: a hook that raises leaves the written temporary file
    behind, exactly as a crash between writing and renaming would. ``None`` removes the hook.
    """
    global _publish_hook
    previous, _publish_hook = _publish_hook, hook
    return previous


def _publish(temp: Path, target: Path) -> None:
    if _publish_hook is not None:
        _publish_hook(temp, target)
    os.replace(temp, target)
    fsync_dir(target.parent)


def atomic_write_bytes(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically (temp file, fsync, rename, fsync the folder)."""
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(target)
    with open(temp, "wb") as handle:
        handle.write(data)
        handle.flush()
        os.fsync(handle.fileno())
    _publish(temp, target)


def atomic_write_with(target: Path, write: Callable[[Path], None]) -> None:
    """Let ``write(temp_path)`` create the file, then fsync it and rename it over ``target``.

    Used for writers that want a path (DuckDB ``COPY``, pyarrow). If ``write`` raises, the
    temporary file is removed and ``target`` is untouched.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(target)
    try:
        write(temp)
        fd = os.open(temp, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except BaseException:
        temp.unlink(missing_ok=True)
        raise
    _publish(temp, target)


def atomic_copy(source: Path, target: Path) -> None:
    """Copy ``source`` over ``target`` atomically; ``target`` gets a new inode."""

    def copy(temp: Path) -> None:
        shutil.copyfile(source, temp)

    atomic_write_with(target, copy)


def atomic_link_or_copy(source: Path, target: Path, *, allow_link: bool = True) -> bool:
    """Make ``target`` a hard link to ``source`` (or a copy across file systems), atomically.

    Returns True when a hard link was made, False when the bytes were copied. An existing
    ``target`` is replaced by rename, never written through, so files sharing its inode are safe.
    """
    if allow_link:
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = temp_path_for(target)
        temp.unlink(missing_ok=True)
        try:
            os.link(source, temp)
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
                raise
        else:
            _publish(temp, target)
            return True
    atomic_copy(source, target)
    return False


def atomic_unlink(target: Path) -> bool:
    """Remove ``target`` if present and fsync its folder. Returns True when a file was removed."""
    try:
        target.unlink()
    except FileNotFoundError:
        return False
    fsync_dir(target.parent)
    return True


def remove_stale_temps(root: Path) -> int:
    """Remove temporary files left below ``root`` by an interrupted run. Returns how many."""
    removed = 0
    if not root.exists():
        return 0
    for path in root.rglob(f"*{TEMP_MARKER}"):
        if is_temp(path) and (path.is_file() or path.is_symlink()):
            path.unlink()
            removed += 1
    return removed


def make_read_only(path: Path) -> None:
    """Clear the write bits of ``path`` (shared by every hard link to it)."""
    mode = path.stat().st_mode
    path.chmod(mode & ~0o222)


@contextlib.contextmanager
def exclusive_lock(lock_file: Path, *, timeout: float = 0.0, what: str = "") -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` for the duration of the block.

    Waits up to ``timeout`` seconds (0: do not wait), then raises
    :class:`~skewtape_pipeline.errors.ApplyInProgressError` naming the lock file and the pid that
    holds it. The lock dies with the process, so a crash never leaves a stale lock behind.
    """
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(lock_file, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    holder = os.pread(fd, 64, 0).decode(errors="replace").strip() or "unknown"
                    raise ApplyInProgressError(
                        f"{lock_file} is held by process {holder}"
                        f"{' (' + what + ')' if what else ''}; another apply is running here. "
                        "Wait for it to finish or pass a longer lock timeout."
                    ) from None
                time.sleep(0.05)
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        yield
    finally:
        os.close(fd)

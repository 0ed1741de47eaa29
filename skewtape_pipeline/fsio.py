"""Crash-safe file system primitives: atomic writes, directory fsync, an exclusive lock, and
the one place JSON is parsed.

Every write goes to a temporary file in the destination's own folder, is fsynced, renamed over
the destination and the folder is fsynced. A crash therefore leaves either the old file or the
new one, plus at most a stray temporary file that :func:`remove_stale_temps` cleans up. An OS
error while writing names the destination. Temporary files, lock files and local state files
(journals, caches, the audit log) are opened without following a symbolic link, so a link
planted at one of their paths never gets its target written.
"""

from __future__ import annotations

import contextlib
import ctypes
import errno
import fcntl
import itertools
import json
import math
import os
import re
import shutil
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from skewtape_pipeline import progress
from skewtape_pipeline.errors import (
    ConfigError,
    DiskFullError,
    LinkedStateFileError,
    LockHeldError,
    MalformedJsonError,
    MissingPathError,
    SkewtapeError,
)

TEMP_MARKER = ".skewtape-tmp"
"""Every temporary file's name contains this marker, so leftovers of a crash are recognisable."""


def temp_path_for(target: Path) -> Path:
    """A temporary path in ``target``'s folder, unique to this process."""
    return target.with_name(f".{target.name}.{os.getpid()}{TEMP_MARKER}")


def is_hidden(name: str) -> bool:
    """True for a dot name (``.skewtape/``, a staging ``.<month>.<run>.partial`` folder, a
    temporary file, a file manager's ``.DS_Store``, a copy tool's ``.tmp`` leftovers): local
    state or another tool's, never a month, a venue or a symbol folder of the data."""
    return name.startswith(".")


def is_temp(path: Path) -> bool:
    """True when ``path`` names a temporary file of this module."""
    return is_hidden(path.name) and path.name.endswith(TEMP_MARKER)


def fsync_dir(folder: Path) -> None:
    """fsync a folder so that a rename or unlink inside it survives a power loss.

    An OSError (an I/O error, a full disk) names ``folder``.
    """
    fd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    except OSError as exc:
        raise OSError(exc.errno, exc.strerror, str(folder)) from exc
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


def publish(temp: Path, target: Path) -> None:
    """Rename the finished, fsynced ``temp`` over ``target`` (same file system) and fsync the
    folder; the publish hook (:func:`set_publish_hook`) is called first."""
    if _publish_hook is not None:
        _publish_hook(temp, target)
    os.replace(temp, target)
    fsync_dir(target.parent)


_unique_names = itertools.count()


def unique_temp_name(name: str) -> str:
    """A temporary file name for ``name`` unique to this call on this host: the host, the
    process, the thread and a counter (writers sharing a folder, threads of one process
    included, never collide)."""
    writer = f"{_host_label()}.{os.getpid()}.{threading.get_ident()}.{next(_unique_names)}"
    return f".{name}.{writer}{TEMP_MARKER}"


def _host_label() -> str:
    """This host's name as one segment of a dotted file name."""
    return socket.gethostname().replace(".", "_")


def orphaned_temps(folder: Path) -> list[Path]:
    """Temporary files in ``folder`` named by :func:`unique_temp_name` on this host whose
    process is gone (left by a crash); files of live processes and other hosts are not listed."""
    host = _host_label()
    found = []
    for path in Path(folder).glob(f".*{TEMP_MARKER}") if Path(folder).is_dir() else ():
        parts = path.name.removesuffix(TEMP_MARKER).rsplit(".", 4)
        ours = len(parts) == 5 and parts[1] == host and parts[2].isdigit()
        if ours and not _process_alive(int(parts[2])):
            found.append(path)
    return sorted(found)


def remove_dead_writers_temps(folder: Path) -> None:
    """Remove the temporary files :func:`temp_path_for` named in ``folder`` (not below it)
    whose process is gone from this host (left by a crash); a live process's are kept."""
    for path in Path(folder).glob(f".*{TEMP_MARKER}") if Path(folder).is_dir() else ():
        pid = path.name.removesuffix(TEMP_MARKER).rsplit(".", 1)[-1]
        if pid.isdigit() and not _process_alive(int(pid)):
            path.unlink(missing_ok=True)


def _process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # someone else's process
    return True


def fsync_file(path: Path) -> None:
    """fsync the file at ``path`` (opened without following a link)."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


_SYNC_FILE_RANGE_WRITE = 2


def _sync_file_range() -> Callable[[int, int, int, int], int] | None:
    """Linux's ``sync_file_range`` from the C library, or None where there is none."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_SYNC_RANGE = _sync_file_range()


def start_writeback(fd: int, offset: int, length: int) -> None:
    """Ask the kernel to start writing ``length`` bytes of ``fd`` from ``offset`` to disk now,
    without waiting for it (Linux ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, as PostgreSQL
    does for its writes). A file written in one stream then reaches disk while it is written,
    and its final ``fsync`` has little left to wait for. Durability still comes only from that
    ``fsync``: this is a hint, a no-op where the platform has no such call, and its failure is
    ignored."""
    if _SYNC_RANGE is not None:
        _SYNC_RANGE(fd, offset, length, _SYNC_FILE_RANGE_WRITE)


def atomic_write_bytes(target: Path, data: bytes) -> None:
    """Write ``data`` to ``target`` atomically (temp file, fsync, rename, fsync the folder).

    An OSError (a full disk, ...) names ``target`` and leaves it as it was.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(target)
    with naming(target, temp):
        fd = _create_temp(temp)
        try:
            with open(fd, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        publish(temp, target)


def atomic_write_with(target: Path, write: Callable[[Path], None]) -> None:
    """Let ``write(temp_path)`` create the file, then fsync it and rename it over ``target``.

    Used for writers that want a path (DuckDB ``COPY``, pyarrow). If ``write`` raises, the
    temporary file is removed and ``target`` is untouched. An OSError names ``target``.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(target)
    with naming(target, temp):
        temp.unlink(missing_ok=True)  # a stale temp, or a link planted at its name
        try:
            write(temp)
            fsync_file(temp)
        except BaseException:
            temp.unlink(missing_ok=True)
            raise
        publish(temp, target)


def _create_temp(temp: Path) -> int:
    """A new temporary file at ``temp``, replacing a stale one (never writing through a link)."""
    temp.unlink(missing_ok=True)
    return os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)


@contextlib.contextmanager
def naming(target: Path, temp: Path) -> Iterator[None]:
    """Re-raise an OSError that names no file (pyarrow's ``Error writing bytes to file`` on a
    full disk), or our temporary file (a copy's error names its source first, then the
    temporary it was writing), as naming ``target``."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, SkewtapeError) or exc.errno is None:
            raise
        ours = exc.filename is None or temp in (Path(exc.filename), Path(exc.filename2 or ""))
        if not ours:
            raise
        raise OSError(exc.errno, exc.strerror, str(target)) from exc


DISK_FULL = (errno.ENOSPC, errno.EDQUOT)
"""The errors of a full disk (or quota): never retried, the command stops at once."""


def is_disk_full(exc: OSError) -> bool:
    """True for the error of a full disk or quota (DuckDB's, which carries no errno, by its
    words)."""
    return exc.errno in DISK_FULL or "no space left on device" in str(exc).lower()


@contextlib.contextmanager
def stop_when_disk_full(folder: Path, doing: str) -> Iterator[None]:
    """Re-raise the error of a full disk inside the block as one
    :class:`~skewtape_pipeline.errors.DiskFullError` naming ``folder``, what the command was
    ``doing`` and the file it was writing (when the error names one), never a bare ``[Errno
    28]``; other errors pass as they are."""
    try:
        yield
    except OSError as exc:
        if isinstance(exc, DiskFullError) or not is_disk_full(exc):
            raise
        detail = exc.filename or (str(exc) if isinstance(exc, SkewtapeError) else None)
        writing = f", writing {detail}" if detail else ""
        raise DiskFullError(
            f"{folder}: no space left on the device while {doing}{writing}; stopped at once "
            "(nothing half-written is published): free space, then run the command again to "
            "finish or start over"
        ) from None


def atomic_copy(source: Path, target: Path) -> None:
    """Copy ``source`` over ``target`` atomically; ``target`` gets a new inode."""

    def copy(temp: Path) -> None:
        shutil.copyfile(source, temp)

    atomic_write_with(target, copy)


CLONED, LINKED, COPIED = "cloned", "linked", "copied"
"""How :func:`atomic_clone_link_or_copy` placed a file."""
FICLONE = 0x40049409
"""Linux's ioctl making a file a copy-on-write clone of another (``linux/fs.h``)."""
_NO_CLONE = (errno.EOPNOTSUPP, errno.ENOTTY, errno.EXDEV, errno.EINVAL, errno.ENOSYS)


def atomic_clone_link_or_copy(source: Path, target: Path, *, link: bool = True) -> str:
    """Make ``target`` hold ``source``'s bytes, atomically, sharing what the file system can.

    Where it clones files (XFS, Btrfs: ``FICLONE``), ``target`` is a copy-on-write clone: its
    own inode, so a later write to ``source`` never reaches it. Elsewhere a hard link (the same
    inode as ``source``; never without ``link``), and across file systems (or without ``link``)
    a copy. A clone or a copy keeps ``source``'s modification time, as a link does (so a hash
    taken of it is not one of a file written a moment ago). Returns :data:`CLONED`,
    :data:`LINKED` or :data:`COPIED`. An existing ``target`` is replaced by rename, never
    written through, so files sharing its inode are safe.
    """
    target.parent.mkdir(parents=True, exist_ok=True)
    temp = temp_path_for(target)
    times = os.stat(source)
    with naming(target, temp):  # an ioctl's error names no file
        cloned = _clone(source, temp)
    if cloned:
        os.utime(temp, ns=(times.st_atime_ns, times.st_mtime_ns))
        publish(temp, target)
        return CLONED
    temp.unlink(missing_ok=True)  # a stale temp, or a link planted at its name
    if link and try_link(source, temp):
        publish(temp, target)
        return LINKED

    def copy(temp: Path) -> None:
        shutil.copyfile(source, temp)
        os.utime(temp, ns=(times.st_atime_ns, times.st_mtime_ns))

    atomic_write_with(target, copy)
    return COPIED


def try_link(source: Path, target: Path) -> bool:
    """Hard-link ``source`` at ``target``; False where the file system cannot link it there
    (another device, links not supported or not permitted, too many links)."""
    try:
        os.link(source, target)
    except OSError as exc:
        if exc.errno not in (errno.EXDEV, errno.EPERM, errno.EMLINK, errno.ENOTSUP):
            raise
        return False
    return True


def _clone(source: Path, temp: Path) -> bool:
    """Make ``temp`` a copy-on-write clone of ``source``, fsynced; False (and no ``temp``)
    where the file system or the platform cannot clone."""
    if not sys.platform.startswith("linux"):
        return False
    source_fd = os.open(source, os.O_RDONLY | os.O_NOFOLLOW)
    try:
        fd = _create_temp(temp)
        try:
            fcntl.ioctl(fd, FICLONE, source_fd)
            os.fsync(fd)
        except OSError as exc:
            temp.unlink(missing_ok=True)
            if exc.errno in _NO_CLONE:
                return False
            raise
        finally:
            os.close(fd)
    finally:
        os.close(source_fd)
    return True


def atomic_unlink(target: Path) -> bool:
    """Remove ``target`` if present and fsync its folder. Returns True when a file was removed.

    A path below a file (``README.md/x``) is absent too: nothing to remove."""
    try:
        target.unlink()
    except (FileNotFoundError, NotADirectoryError):
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


def create_staged_file(temp: Path, *, attempts: int = 3) -> None:
    """Create ``temp`` empty, and its folder if missing, for a writer that wants a path.

    A folder that another writer's :func:`prune_empty_folders` removes between the two steps
    (it removes only empty folders: once ``temp`` exists the folder stays) is made again, up
    to ``attempts`` times.
    """
    for attempt in range(attempts):
        temp.parent.mkdir(parents=True, exist_ok=True)
        try:
            os.close(_create_temp(temp))
            return
        except FileNotFoundError:
            if attempt == attempts - 1:
                raise


def prune_empty_folders(folder: Path, *, within: Callable[[Path], bool]) -> None:
    """Remove ``folder``, then each parent, while it is empty and ``within(it)`` holds, fsyncing
    the parent after each removal; stops at the first folder that is not empty."""
    while within(folder):
        try:
            folder.rmdir()
        except OSError:
            return
        fsync_dir(folder.parent)
        folder = folder.parent


def folded(path: Path | str) -> Path:
    """``path`` absolute, ``.`` and ``..`` folded as the file system takes them: the part up to
    its last ``..`` resolved (a ``..`` after a symbolic link leaves the folder the link leads
    to, not the link's), the rest as spelled (a link there is kept, never followed). How paths
    of an archive's files are compared and named. ConfigError naming ``path``, on one line,
    when the links before a ``..`` loop."""
    parts = Path(path).absolute().parts
    if ".." not in parts:
        return Path(os.path.normpath(Path(*parts)))
    last = len(parts) - parts[::-1].index("..")
    head = resolved(Path(*parts[:last]), named=path)
    return Path(os.path.normpath(head.joinpath(*parts[last:])))


def resolved(path: Path | str, *, named: Path | str | None = None) -> Path:
    """``path`` absolute, every symbolic link in it followed (it need not exist: the part that
    does is followed). ConfigError naming ``named`` (default: ``path``), on one line, when its
    links loop or cannot be read."""
    try:
        return Path(path).resolve()
    except (RuntimeError, OSError) as exc:  # RuntimeError: a loop of symbolic links
        shown = path if named is None else named
        raise ConfigError(f"{shown}: cannot follow its symbolic links ({exc})") from None


def checked_path(value: object, name: str, expected: str) -> Path:
    """``value`` as a Path; ConfigError naming the argument ``name`` unless it is a ``str`` or
    an ``os.PathLike`` (None or a number would otherwise fail deep inside, or become a
    folder named ``None``). ``expected`` says what the path should name."""
    if not isinstance(value, str | os.PathLike) or value == "":
        raise ConfigError(f"{name} = {value!r}: expected {expected} (a path)")
    return Path(value)


def refuse_missing_folder_above(named: str, path: Path, made: str) -> None:
    """ConfigError naming ``named`` (an argument or option and its value, as the caller shows
    it) when the folder ``path`` would be made in does not exist: a missing folder is refused,
    never created; ``made`` says what is made only inside one. The command line's options and
    the Python entry points' arguments alike."""
    folder = Path(path).absolute().parent
    if not folder.is_dir():
        raise ConfigError(
            f"{named}: its folder {folder} does not exist; {made} only inside an existing "
            "folder (a missing folder is refused, never created)"
        )


def require_folder(folder: Path, what: str, *, name: str = "folder") -> Path:
    """``folder`` if it is an existing folder; else :class:`MissingPathError` naming it
    (ConfigError naming the argument ``name`` for a value that is no path: :func:`checked_path`).

    Commands check the folders they were given with this before they take a lock or create
    anything, so that a refusal writes nothing. ``what`` says what the folder should be.
    """
    checked_path(folder, name, what)
    if not Path(folder).is_dir():
        found = "is not a folder" if Path(folder).exists() else "does not exist"
        raise MissingPathError(f"{folder}: {found}; expected {what}")
    return Path(folder)


def make_read_only(path: Path) -> None:
    """Clear the write bits of ``path`` (shared by every hard link to it)."""
    mode = path.stat().st_mode
    path.chmod(mode & ~0o222)


# --- local state files: never through a link -----------------------------------------------


def open_state_file(path: Path, flags: int, mode: int = 0o644) -> int:
    """``os.open`` a lock, journal, cache or audit file without following a final symlink.

    Raises
    ------
    LinkedStateFileError
        ``path`` is a symbolic link (its target is left alone).
    OSError
        Any other failure (FileNotFoundError when absent and not created).
    """
    try:
        return os.open(path, flags | os.O_NOFOLLOW, mode)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            refuse_linked_state(path)
        raise


def refuse_linked_state(path: Path | None) -> None:
    """Raise :class:`~skewtape_pipeline.errors.LinkedStateFileError` if ``path`` is a symlink.

    Operations that will write a state file (the audit log) call this before their first
    write, so that the refusal leaves everything as it was.
    """
    if path is not None and Path(path).is_symlink():
        raise LinkedStateFileError(
            f"{path}: is a symbolic link (to {os.readlink(path)}); expected a regular file "
            "of our own. Refused so that its target is never written; remove the link"
        )


def read_state_bytes(path: Path) -> bytes | None:
    """The bytes of the local state file ``path``; None when it does not exist.

    Raises :class:`~skewtape_pipeline.errors.LinkedStateFileError` when ``path`` is a link.
    """
    try:
        fd = open_state_file(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with open(fd, "rb") as handle:
        return handle.read()


# --- JSON ------------------------------------------------------------------------------------


JSON_MAX_BYTES = 256 << 20
"""The largest JSON text :func:`load_json` parses (a manifest of a million files is ~200 MB)."""
JSON_MAX_DEPTH = 64
"""The deepest nesting of arrays and objects :func:`load_json` parses (the package's own files
nest 4 levels at most): a file nested deeper is refused before the parser meets it, so no
input, however deep, reaches Python's recursion limit."""
_JSON_STRING = re.compile(rb'"(?:[^"\\]|\\.)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_STEPS = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}
_DEPTH_STEPS = [_STEPS.get(b, 0) for b in range(256)]


def json_depth(data: bytes) -> int:
    """The deepest nesting of arrays and objects in the JSON text ``data`` (brackets inside
    strings do not count), found without parsing it. :func:`load_json` first counts every
    bracket (strings included: fast), and only when that passes the limit this exact count."""
    return _bracket_depth(_JSON_STRING.sub(b"", data))


def _bracket_depth(data: bytes) -> int:
    brackets = data.translate(None, _NOT_BRACKETS)
    return max(itertools.accumulate(map(_DEPTH_STEPS.__getitem__, brackets)), default=0)


def load_json(
    data: bytes | str,
    source: Path | str,
    *,
    line: int | None = None,
    error: Callable[[str], Exception] | type[MalformedJsonError] = MalformedJsonError,
    max_bytes: int = JSON_MAX_BYTES,
    max_depth: int = JSON_MAX_DEPTH,
) -> Any:
    """The JSON value in ``data``, read from ``source`` (its ``line``, for a JSON-lines file).

    The one place the package parses JSON: every JSON text from outside (manifests, publisher
    files, records read back, markers, locks) goes through it, with two limits checked before
    the parser runs: at most ``max_bytes`` bytes and ``max_depth`` levels of nesting. Anything
    past them or that does not parse (bad syntax, bytes that are not UTF-8) raises
    ``error(message)`` (by default :class:`~skewtape_pipeline.errors.MalformedJsonError`), the
    message naming ``source`` (and ``line``) and what is wrong; never a RecursionError.
    """
    raw = data.encode("utf-8", "surrogatepass") if isinstance(data, str) else bytes(data)
    reason = None
    if len(raw) > max_bytes:
        reason = f"{len(raw)} bytes; at most {max_bytes} are read"
    elif _bracket_depth(raw) > max_depth and (depth := json_depth(raw)) > max_depth:
        reason = f"nested too deep to parse: {depth} levels; at most {max_depth}"
    else:
        try:
            return json.loads(raw)
        except RecursionError:
            reason = "nested too deep to parse"
        except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError
            reason = str(exc)
    malformed = MalformedJsonError(source, reason, line=line)
    if error is MalformedJsonError:
        raise malformed
    raise error(str(malformed))


def read_json_file(
    path: Path,
    *,
    error: Callable[[str], Exception] | type[MalformedJsonError] = MalformedJsonError,
    max_bytes: int = JSON_MAX_BYTES,
) -> Any:
    """The JSON value of the file ``path`` through :func:`load_json`, reading at most
    ``max_bytes`` + 1 bytes of it (a larger file is refused without being read whole).
    OSError as the file system raises it."""
    with open(path, "rb") as handle:
        data = handle.read(max_bytes + 1)
    return load_json(data, path, error=error, max_bytes=max_bytes)


# --- the exclusive lock ----------------------------------------------------------------------


LOCK_FIRST_PAUSE = 0.001
LOCK_LONGEST_PAUSE = 0.05
"""A waiter retries the lock after 1 ms, doubling the pause up to 50 ms: writers that hold it
for a fraction of a millisecond (a compaction's rename) hand it on at once, long holders cost
a waiter at most 20 tries a second."""


def checked_lock_timeout(seconds: object) -> float:
    """``seconds`` as a float; ConfigError naming ``lock_timeout`` unless a finite number >= 0
    (``nan`` or ``inf`` would wait for ever): every entry point taking a ``lock_timeout``
    (the archive's, the mirror's apply, catch-up and fetch) checks it before anything is
    written or requested."""
    if isinstance(seconds, bool) or not isinstance(seconds, int | float):
        raise ConfigError(f"lock_timeout = {seconds!r}: expected seconds (a number)")
    if not 0 <= seconds < math.inf:
        raise ConfigError(f"lock_timeout = {seconds!r}: expected seconds >= 0, finite")
    return float(seconds)


@contextlib.contextmanager
def exclusive_lock(
    lock_file: Path,
    *,
    timeout: float = 0.0,
    what: str = "",
    held_error: Callable[[str], Exception] = LockHeldError,
) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``lock_file`` for the duration of the block.

    The lock is taken in the real folder (``lock_file``'s folder with every symlink resolved),
    so two aliases of one folder share one lock, and the lock file itself is never a link. While
    held, the file records ``what`` (the operation), the process id, the host and since when.
    Waits up to ``timeout`` seconds (0: do not wait), then raises ``held_error`` (a
    :class:`~skewtape_pipeline.errors.LockHeldError` by default) naming the lock file and what
    holds it. The lock dies with the process, so a crash never leaves a stale lock behind.
    A holder may remove the lock file before it lets go (:func:`remove_lock_file`): a process
    that opened the file before it was removed finds, once it has the lock, that the path no
    longer names its file, and locks the file now there (a new one) instead.

    Raises
    ------
    LinkedStateFileError
        ``lock_file`` is a symbolic link; its target is left alone.
    """
    lock_file.parent.mkdir(parents=True, exist_ok=True)
    lock_file = Path(os.path.realpath(lock_file.parent)) / lock_file.name
    deadline = time.monotonic() + timeout
    while True:
        fd = open_state_file(lock_file, os.O_RDWR | os.O_CREAT)
        try:
            _wait_for_flock(fd, lock_file, deadline, what, held_error)
        except BaseException:
            os.close(fd)
            raise
        if _names(lock_file, fd):
            break
        os.close(fd)  # its holder removed it: lock the file the path names now
    try:
        with naming(lock_file, lock_file):  # a full disk names the lock file
            os.ftruncate(fd, 0)
            os.pwrite(fd, _holder_record(what), 0)
        yield
    finally:
        os.close(fd)


@contextlib.contextmanager
def lock_removed_on(
    lock_file: Path, errors: tuple[type[BaseException], ...], **lock: Any
) -> Iterator[None]:
    """:func:`exclusive_lock` on ``lock_file`` (``lock``: its keywords), whose file is removed
    again, while held, when this call created it and the block raises one of ``errors``: a
    refused operation leaves the folder as it found it."""
    created = not os.path.lexists(lock_file)
    with exclusive_lock(lock_file, **lock):
        try:
            yield
        except errors:
            if created:
                remove_lock_file(lock_file)
            raise


def _wait_for_flock(fd: int, lock_file: Path, deadline: float, what: str, held_error) -> None:
    """Take the lock on ``fd`` by ``deadline`` (monotonic seconds), reporting the wait as
    progress once a second (``progress.report``: seconds waited of the seconds allowed, and
    what holds the lock), else raise ``held_error`` naming the holder."""
    pause, started, reported = LOCK_FIRST_PAUSE, time.monotonic(), 0
    while True:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            if reported:  # the wait shown as over, not left as the last word
                waited = math.ceil(time.monotonic() - started)
                progress.report(f"took {lock_file} after {waited} s", waited, waited, "s")
            return
        except BlockingIOError:
            now = time.monotonic()
            left = deadline - now
            if left <= 0:
                raise held_error(_held_message(lock_file, fd, what)) from None
            if int(now - started) > reported:
                reported = int(now - started)
                holder = _describe_holder(os.pread(fd, 4096, 0))
                stage = f"waiting for {lock_file}, held by {holder}"
                progress.report(stage, reported, math.ceil(deadline - started), "s")
            time.sleep(min(pause, left))
            pause = min(pause * 2, LOCK_LONGEST_PAUSE)


def _names(path: Path, fd: int) -> bool:
    """True when ``path`` is the file open as ``fd`` (not removed or replaced since)."""
    try:
        there = os.stat(path, follow_symlinks=False)
    except FileNotFoundError:
        return False
    mine = os.fstat(fd)
    return (there.st_dev, there.st_ino) == (mine.st_dev, mine.st_ino)


def remove_lock_file(lock_file: Path) -> None:
    """Remove ``lock_file`` while holding its :func:`exclusive_lock` (a process waiting for it
    then locks a new file; see there)."""
    (Path(os.path.realpath(lock_file.parent)) / lock_file.name).unlink(missing_ok=True)


def _holder_record(what: str) -> bytes:
    holder = {
        "operation": what,
        "pid": os.getpid(),
        "host": socket.gethostname(),
        "since": datetime.now(UTC).isoformat(timespec="seconds"),
    }
    return (json.dumps(holder) + "\n").encode()


def _held_message(lock_file: Path, fd: int, what: str) -> str:
    holder = _describe_holder(os.pread(fd, 4096, 0))
    refused = f"; refused {what}" if what else ""
    return (
        f"{lock_file} is held by {holder}{refused}. "
        "Wait for it to finish or pass a longer lock timeout (--wait)."
    )


def _describe_holder(raw: bytes) -> str:
    """What the lock file's content (:func:`_holder_record`) says holds it."""
    try:
        found = load_json(raw.decode(errors="replace").strip(), "lock")
    except MalformedJsonError:
        found = None
    if not isinstance(found, dict):
        return "another process (which did not record itself yet)"
    operation = str(found.get("operation") or "another operation")
    return (
        f"{operation} (process {found.get('pid', '?')} on {found.get('host', '?')}, "
        f"since {found.get('since', '?')})"
    )

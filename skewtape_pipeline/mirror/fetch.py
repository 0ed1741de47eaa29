"""Follow the publisher: fetch its monthly deltas, and a new subscriber's first snapshot.

The publisher's layout is ``history/<YYYY-MM>/`` (whole snapshots) beside ``deltas/<YYYY-MM>/``
(the delta that leads to that month). Nothing relies on a directory listing: a month is
discovered by reading its ``CHECKSUMS.sha256`` (absent: not published yet), and what is fetched
is what that file lists.

What a fetch promises
---------------------
- **Only verified, complete months appear.** A month's files download into a staging folder
  beside the target (``deltas/.fetch-<YYYY-MM>/``, ``history/.fetch-<YYYY-MM>/``); every file's
  sha256 is computed while it streams and checked against the month's ``CHECKSUMS.sha256`` (and,
  for a delta, against its manifest's entries); the folder is renamed into place only once every
  file verified and the month's files were fsynced together (once, not file by file). A delta's
  ``CHECKSUMS.sha256`` and manifest are read first, and the delta is refused before any of it
  is written when its parent is not the snapshot the local chain ends at (by manifest sha256),
  or when its next snapshot's CHECKSUMS.sha256 and manifest disagree as the apply refuses them;
  a snapshot, when its CHECKSUMS.sha256 and manifest disagree as ``verify`` refuses them.
- **Resumable and idempotent.** A fetch stopped at any point keeps its staging folder; run again,
  it resumes each partial file with a ranged request from where the file ends, provided the
  remote file is still the version it started (a strong ETag, or its Last-Modified; size and
  modification time for a folder; the versions are kept in ``.skewtape/fetch.json`` in the
  staging folder) and the answer is the range asked for of that version; otherwise the file
  starts over, never stitching two versions (see :mod:`~skewtape_pipeline.mirror.transfer`).
  A staged file already whole is verified from disk, not downloaded again. A month already in
  place is not fetched at all. Each file has ``attempts`` (broken, stalled below the low-speed
  limit, or not resumed), then the fetch fails naming it.
- **No byte hashed twice.** The hashes the fetch verified are recorded in the month folder's hash
  cache (``.skewtape/hashes.json``, see :mod:`skewtape_pipeline.hashing`), which the apply
  (:func:`~skewtape_pipeline.mirror.preflight.check_delta_files`) and ``verify`` consult, so
  applying a fetched delta reads its files once, to merge them. Each file's modification time
  is set to the publisher's (Last-Modified; an object's or a file's mtime), as ``curl -R`` and
  ``rclone`` do, so the cache's racy-entry rule trusts a hash taken a moment after the file was
  written; without a publisher's time the apply hashes that file again.
- **A refusal changes nothing.** A publisher that serves something the format does not allow
  (a path leaving the folder, a sha256 mismatch, a CHECKSUMS.sha256 without the manifest, an
  HTML page, a redirect elsewhere, a file longer than the size recorded for it or without a
  length, a listed file that is not there, a name the file system cannot hold) gets a typed
  error, and the month's staging folder and the fetch's lock file (when this fetch created it)
  are removed, as they are when a write fails (a full disk: :class:`FetchDiskError`, at once,
  never retried); a network failure after the last retry (:class:`TransferError`) keeps them
  for a rerun.

This module does not import dagster.
"""

from __future__ import annotations

import contextlib
import errno
import functools
import hashlib
import json
import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_EXCEPTION, ThreadPoolExecutor, wait
from dataclasses import KW_ONLY, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from skewtape_pipeline import fsio, progress
from skewtape_pipeline.errors import (
    ChainError,
    ChecksumMismatchError,
    ConfigError,
    DeltaRefusedError,
    FetchDiskError,
    FetchError,
    LockHeldError,
    MalformedJsonError,
    PublisherError,
    StorageError,
    TransferError,
    checked_flag,
    quoted_path,
)
from skewtape_pipeline.hashing import (
    BLOCK,
    FileStamp,
    HashCache,
    sha256_bytes,
)
from skewtape_pipeline.mirror.catchup import chain_tip, month_folders, next_month
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    LOCAL_STATE_DIR,
    MANIFEST,
    checked_month,
)
from skewtape_pipeline.mirror.remote import (
    DELTAS,
    HISTORY,
    Kind,
    RemoteMonth,
    check_size,
    remote_delta,
    remote_snapshot,
    stat_listed,
)
from skewtape_pipeline.mirror.sources import (
    RemoteFile,
    Source,
    TransferSettings,
    open_source,
)
from skewtape_pipeline.mirror.transfer import Cancelled, FileTransfer, Hooks
from skewtape_pipeline.mirror.verify import hash_cache_path

STAGING_PREFIX = ".fetch-"
JOURNAL = "fetch.json"
LOCK_NAME = ".skewtape-fetch.lock"
REFUSALS = (PublisherError, DeltaRefusedError, ChainError)
"""What a publisher's month is refused with (it changes nothing on disk)."""
DISCARDED = (*REFUSALS, FetchDiskError)
"""What removes a month's staging folder (and the lock file this fetch created): a refusal,
or a disk that could not hold the month's files (a full disk is not waited out)."""
NAME_ERRNOS = frozenset({errno.ENAMETOOLONG, errno.ENOTDIR, errno.EISDIR, errno.EEXIST})
"""What writing a listed file fails with when the file system cannot hold its name."""
Progress = Callable[["TransferStats"], None]


# --- results -----------------------------------------------------------------------------------


@dataclass
class TransferCounts:
    """What a fetch moved: ``bytes_fetched`` came over the network (restarts included),
    ``bytes_resumed`` were kept from an earlier, interrupted run, ``bytes_hashed`` were read to
    hash them (streamed bytes included), ``files_present`` were found whole in the staging
    folder (verified from disk, not downloaded again)."""

    _: KW_ONLY
    bytes_fetched: int = 0
    bytes_resumed: int = 0
    bytes_hashed: int = 0
    retries: int = 0
    files_fetched: int = 0
    files_present: int = 0

    def counters(self) -> dict[str, int]:
        """The byte, file and retry counts (for a month's result)."""
        return {counter.name: getattr(self, counter.name) for counter in fields(TransferCounts)}


@dataclass
class TransferStats(TransferCounts):
    """Running totals of one fetch, safe to update from its transfer threads: its counts, and
    ``bytes_total``, the size of every file to be in place at the end, ``bytes_done``, how much
    of it is on disk now."""

    bytes_total: int = 0
    bytes_done: int = 0
    started: float = field(default_factory=time.monotonic)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False, compare=False)
    listener: Progress | None = field(default=None, repr=False, compare=False)

    def add(self, **counts: int) -> None:
        with self._lock:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)
        if self.listener is not None:
            self.listener(self)

    @property
    def seconds(self) -> float:
        return time.monotonic() - self.started


@dataclass
class FetchedMonth(TransferCounts):
    """One month a fetch placed (or found in place, or, in a dry run, would fetch), and what
    its transfer moved."""

    month: str
    kind: Kind
    folder: Path
    files: int
    bytes: int
    already_present: bool = False
    seconds: float = 0.0

    @property
    def mean_rate(self) -> float:
        """Bytes fetched per second (0 when nothing was fetched)."""
        return self.bytes_fetched / self.seconds if self.seconds > 0 else 0.0

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["folder"] = str(self.folder)
        data["mean_rate"] = round(self.mean_rate, 1)
        return data


@dataclass
class FetchResult:
    """What :func:`fetch_deltas` or :func:`fetch_snapshot` did, month by month.

    ``next_unpublished`` is the first month the publisher has no delta for yet (deltas only).
    """

    source: str
    months: list[FetchedMonth]
    dry_run: bool = False
    next_unpublished: str | None = None

    @property
    def bytes_fetched(self) -> int:
        return sum(month.bytes_fetched for month in self.months)

    def to_dict(self) -> dict[str, Any]:
        return {
            "source": self.source,
            "dry_run": self.dry_run,
            "next_unpublished": self.next_unpublished,
            "months": [month.to_dict() for month in self.months],
        }


def _refuse_unholdable_names(source: Source, remote: RemoteMonth, stage: Path) -> None:
    """PublisherError naming the first listed path whose name (a part longer than this file
    system's NAME_MAX) or whole path in ``stage`` (longer than PATH_MAX) it cannot hold."""
    existing = next(folder for folder in (stage, *stage.parents) if folder.is_dir())
    name_max = os.pathconf(existing, "PC_NAME_MAX")
    path_max = os.pathconf(existing, "PC_PATH_MAX")
    for rel in sorted(remote.listed):
        longest = max(rel.split("/"), key=lambda part: len(os.fsencode(part)))
        if len(os.fsencode(longest)) > name_max:
            why = f"a name of {len(os.fsencode(longest))} bytes; this file system holds {name_max}"
        elif len(os.fsencode(stage / rel)) >= path_max:
            why = f"a path longer than this file system's {path_max} bytes in {stage}"
        else:
            continue
        raise PublisherError(
            f"lists {quoted_path(rel)}, {why}", url=source.url(f"{remote.folder}/{CHECKSUMS}")
        )


# --- the two commands --------------------------------------------------------------------------


def fetch_deltas(
    source: str | Source,
    root: Path,
    *,
    settings: TransferSettings | None = None,
    dry_run: bool = False,
    until: str | None = None,
    on_progress: Progress | None = None,
    lock_timeout: float = 0.0,
    on_month: Callable[[FetchedMonth], None] | None = None,
) -> FetchResult:
    """Fetch every published delta after the newest local month into ``root/deltas/``.

    Months are fetched in order, each only once its manifest names as parent the snapshot the
    local chain leads to, stopping at the first month the publisher has not published (or after
    the month ``until``, when given). With ``dry_run``, nothing is written: the result lists
    what would be fetched and its bytes. ``lock_timeout``: seconds to wait for another fetch
    into ``root`` to finish (a month it placed meanwhile is not fetched again). ``on_month`` is
    called with each month once it is in place, so a caller knows what was fetched before a
    later month failed.

    Idempotent: a rerun resumes an interrupted month and fetches nothing that is in place.

    Raises
    ------
    ChainError
        ``root/history`` holds no snapshot (fetch one with :func:`fetch_snapshot` first), or a
        published delta's parent is not the snapshot the local chain ends at.
    PublisherError, ChecksumMismatchError, UnsafePathError, ManifestError
        The publisher served something the format does not allow (nothing changed on disk).
    TransferError
        The network failed after the last retry (a rerun resumes).
    LockHeldError
        Another fetch into ``root`` is still running after ``lock_timeout`` seconds.
    ConfigError
        ``lock_timeout`` is negative, not finite or not a number, ``until`` is not a month
        ``YYYY-MM``, ``root`` is no path, a file or in a folder that does not exist, or
        ``source`` is neither a location nor a Source, ``settings`` no TransferSettings
        (nothing requested or written).
    """
    if until is not None:
        checked_month(until, f"until = {until!r}")
    source, root, lock_timeout = _checked_arguments(source, settings, root, lock_timeout, dry_run)
    if not holds_snapshot(root):
        raise ChainError(
            f"{root / HISTORY} holds no snapshot to follow the publisher from; start the mirror "
            f"with `skewtape-pipeline sync SOURCE --root {root}` (the newest snapshot, then its "
            f"deltas) or `skewtape-pipeline fetch SOURCE --root {root} --snapshot YYYY-MM`"
        )
    month, parent = chain_tip(root / HISTORY, root / DELTAS)
    result = FetchResult(source.location, [], dry_run=dry_run)
    while until is None or month < until:
        month, mark = next_month(month), source.retries
        remote = remote_delta(source, month)
        if remote is None:
            result.next_unpublished = month
            return result
        if remote.parent_manifest_sha256 != parent:
            raise ChainError(
                f"{source.url(remote.folder + '/' + MANIFEST)}: its parent's manifest sha256 "
                f"is {remote.parent_manifest_sha256}; the local chain in {root} ends at "
                f"{parent}. Nothing was fetched."
            )
        placed = _place_month(source, remote, root, dry_run, on_progress, lock_timeout)
        placed.retries += source.retries - mark
        result.months.append(placed)
        if on_month is not None:
            on_month(placed)
        parent = remote.next_manifest_sha256 or ""
    return result


def fetch_snapshot(
    source: str | Source,
    root: Path,
    month: str,
    *,
    settings: TransferSettings | None = None,
    dry_run: bool = False,
    on_progress: Progress | None = None,
    lock_timeout: float = 0.0,
) -> FetchResult:
    """Fetch the publisher's whole snapshot of ``month`` into ``root/history/<month>/``: a new
    subscriber's start (``lock_timeout`` as for :func:`fetch_deltas`).

    Idempotent: run again, it finishes an interrupted download, and once the snapshot is in
    place it does nothing. The snapshot's hash cache is filled with what was verified, so
    ``verify`` reads no file again.

    Raises
    ------
    ChainError
        ``root/history`` already holds another month (nothing fetched).
    VerificationError
        The snapshot's manifest and CHECKSUMS.sha256 disagree (a file in only one of them, or
        with two sha256), worded as ``verify`` words it; checked before anything is written.
    PublisherError, ChecksumMismatchError, UnsafePathError, TransferError, LockHeldError
        As for :func:`fetch_deltas`.
    ConfigError
        ``month`` is not a month ``YYYY-MM`` (``2026-13``, None), or an argument is refused
        as :func:`fetch_deltas` refuses it (nothing requested or written).
    """
    checked_month(month, f"month = {month!r}")
    source, root, lock_timeout = _checked_arguments(source, settings, root, lock_timeout, dry_run)
    history = root / HISTORY
    target = history / month
    if (target / MANIFEST).is_file():  # placed only once verified whole
        present = FetchedMonth(month, "snapshot", target, 0, 0, already_present=True)
        return FetchResult(source.location, [present], dry_run=dry_run)
    others = [m for m in month_folders(history) if m != month]
    if others:
        raise ChainError(
            f"{history} already holds {history / others[-1]}; a first snapshot is fetched only "
            "into an empty history (later months come as deltas: fetch without --snapshot)"
        )
    mark = source.retries
    remote = remote_snapshot(source, month)
    placed = _place_month(source, remote, root, dry_run, on_progress, lock_timeout)
    placed.retries += source.retries - mark
    return FetchResult(source.location, [placed], dry_run=dry_run)


def _checked_arguments(
    source: object,
    settings: TransferSettings | None,
    root: object,
    lock_timeout: object,
    dry_run: object,
) -> tuple[Source, Path, float]:
    """The fetch's arguments checked before any request or write (ConfigError naming the one
    refused), the source opened: ``root`` a path to a folder that exists or is created inside
    one that exists, as the command line's ``--root``."""
    lock_timeout = fsio.checked_lock_timeout(lock_timeout)
    checked_flag(dry_run, "dry_run")
    if settings is not None and not isinstance(settings, TransferSettings):
        raise ConfigError(f"settings = {settings!r}: expected a TransferSettings or None")
    root = fsio.checked_path(root, "root", "the data root folder")
    if root.exists() and not root.is_dir():
        raise ConfigError(f"root = {str(root)!r}: is a file; expected the data root folder")
    fsio.refuse_missing_folder_above(f"root = {str(root)!r}", root, "the data root is created")
    if isinstance(source, str):
        return open_source(source, settings), root, lock_timeout
    if not all(hasattr(source, name) for name in ("location", "read_small", "retries")):
        raise ConfigError(
            f"source = {source!r}: expected a publisher's URL, S3 URI or folder (a str), or a "
            "Source (mirror.sources.open_source)"
        )
    return source, root, lock_timeout  # type: ignore[return-value]


def holds_snapshot(root: Path) -> bool:
    """True when ``root/history`` holds a snapshot (a month folder with its manifest)."""
    history = Path(root) / HISTORY
    return any((history / month / MANIFEST).is_file() for month in month_folders(history))


def _staging_name(month: str) -> str:
    return f"{STAGING_PREFIX}{month}"


# --- one month ---------------------------------------------------------------------------------


def _place_month(
    source: Source,
    remote: RemoteMonth,
    root: Path,
    dry_run: bool,
    on_progress: Progress | None,
    lock_timeout: float,
) -> FetchedMonth:
    """Fetch ``remote`` into its staging folder, verify it whole, rename it into place (the
    root's fetch lock waited for up to ``lock_timeout`` seconds)."""
    target = root / remote.folder
    _refuse_unholdable_names(source, remote, target.parent / _staging_name(remote.month))
    stats = TransferStats(listener=on_progress)
    large = {rel: digest for rel, digest in remote.listed.items() if rel not in remote.small}
    remotes = stat_listed(source, remote, large)
    size = sum(r.size for r in remotes.values()) + sum(len(f.data) for f in remote.small.values())
    placed = FetchedMonth(remote.month, remote.kind, target, len(remote.listed) + 1, size)
    if dry_run:
        return placed
    stats.add(bytes_total=size)
    # The lock is taken (its file created) only now: a refusal before this changes nothing.
    with _fetch_lock(root, lock_timeout):
        if (target / MANIFEST).is_file():  # another fetch placed it meanwhile
            return replace(placed, already_present=True)
        _check_room(source, remote, target, remotes, size)
        _stage_and_place(source, remote, target, remotes, stats)
    counters = stats.counters()
    return FetchedMonth(
        remote.month, remote.kind, target, placed.files, size, seconds=stats.seconds, **counters
    )


def _check_room(
    source: Source, remote: RemoteMonth, target: Path, remotes: dict[str, RemoteFile], size: int
) -> None:
    """FetchDiskError, before anything is written, when the month's ``size`` bytes (what the
    publisher announces, less what an interrupted fetch already staged) exceed the free space
    where it is staged: an honest month too large fails at once, and a file announcing an
    endless length (one no manifest sizes, such as a change file) cannot fill the disk."""
    folder = target.parent
    while not folder.exists():
        folder = folder.parent
    stage = target.parent / _staging_name(remote.month)
    staged = sum(p.stat().st_size for p in stage.rglob("*") if p.is_file()) if stage.is_dir() else 0
    free = shutil.disk_usage(folder).free
    if size - staged <= free:
        return
    rel, largest = max(remotes.items(), key=lambda item: item[1].size, default=("", None))
    shown = source.url(f"{remote.folder}/{rel}")
    biggest = f"; the largest, {shown}, {largest.size} bytes" if largest else ""
    raise FetchDiskError(
        f"{folder}: the month {remote.month} is {size} bytes ({size - staged} still to fetch"
        f"{biggest}) and {free} bytes are free; nothing was fetched"
    )


def _stage_and_place(
    source: Source,
    remote: RemoteMonth,
    target: Path,
    remotes: dict[str, RemoteFile],
    stats: TransferStats,
) -> None:
    """Download into the staging folder beside ``target``, verify, make the published files
    read-only (never rewritten in place: a snapshot's are hard-linked into the next months),
    rename it into place."""
    stage = target.parent / _staging_name(remote.month)
    with _discarded_on_refusal(stage):
        with _writing(source, remote, stage, "its small files"):
            fsio.remove_stale_temps(stage)  # a killed fetch's half-written small file
            _write_small(stage, remote, stats)
        month = _StagedMonth(stage, source, remote, stats)
        month.fetch_all(remotes)
        with _writing(source, remote, stage, "its files' permissions"):
            month.make_read_only()
        with _writing(source, remote, stage, "its hash cache"):
            month.cache.save()
            (stage / LOCAL_STATE_DIR / JOURNAL).unlink(missing_ok=True)
            fsio.fsync_dir(stage)
        os.rename(stage, target)
        fsio.fsync_dir(target.parent)
    if remote.kind == "snapshot":
        _remove_other_snapshot_stagings(target.parent)


def _remove_other_snapshot_stagings(history: Path) -> None:
    """Remove the staging folders of other months' first snapshots in ``history`` (under the
    fetch lock): an interrupted ``fetch --snapshot`` of another month can never be resumed
    once the history holds a snapshot (a first snapshot is fetched only into an empty one)."""
    for stage in history.glob(f"{STAGING_PREFIX}*"):
        if stage.is_dir() and not stage.is_symlink():
            shutil.rmtree(stage, ignore_errors=True)


@contextlib.contextmanager
def _fetch_lock(root: Path, timeout: float) -> Iterator[None]:
    """Hold the data root's fetch lock; a refusal or an interruption (Ctrl-C) removes its file
    again when this fetch created it, so a refused fetch leaves the root as it found it. The
    lock is an ``flock``: one left by a process that died (killed, the machine stopped) is
    taken over by the next fetch, as the archive's lock is."""
    with fsio.lock_removed_on(
        root / LOCK_NAME,
        (*DISCARDED, KeyboardInterrupt),
        timeout=timeout,
        what="fetching",
        held_error=LockHeldError,
    ):
        yield


@contextlib.contextmanager
def _discarded_on_refusal(stage: Path) -> Iterator[None]:
    """Remove ``stage`` (and its parent folder when this created it and it is left empty) when
    the block refuses what the publisher served (a typed refusal) or the disk cannot hold it
    (:class:`FetchDiskError`); any other failure (the network, an interruption) keeps it for
    a resume."""
    created = not stage.parent.exists()
    with _writing_folder(stage):
        stage.mkdir(parents=True, exist_ok=True)
    try:
        yield
    except DISCARDED:
        shutil.rmtree(stage, ignore_errors=True)
        if created:
            with contextlib.suppress(OSError):
                stage.parent.rmdir()
        raise


@contextlib.contextmanager
def _writing(source: Source, remote: RemoteMonth, stage: Path, what: str) -> Iterator[None]:
    """A disk error in the block as what it means, never retried: a listed name this file
    system cannot hold is the publisher's (PublisherError); anything else (no space left, a
    quota, an I/O error) a FetchDiskError naming ``stage`` and ``what`` was being written."""
    try:
        yield
    except (FetchError, StorageError):
        raise
    except OSError as exc:
        if exc.errno in NAME_ERRNOS and what in remote.listed:
            raise PublisherError(
                f"lists {quoted_path(what)}, a name this file system cannot hold ({exc.strerror})",
                url=source.url(f"{remote.folder}/{CHECKSUMS}"),
            ) from None
        raise _disk_error(exc, stage, what) from None


@contextlib.contextmanager
def _writing_folder(folder: Path) -> Iterator[None]:
    try:
        yield
    except OSError as exc:
        raise _disk_error(exc, folder, "the folder itself") from None


def _disk_error(error: OSError, stage: Path, what: str) -> FetchDiskError:
    return FetchDiskError(
        f"{stage}: {error.strerror or error} while writing {what}; the fetch stopped and removed "
        "the staging folder (nothing was placed)"
    )


def _write_small(stage: Path, remote: RemoteMonth, stats: TransferStats) -> None:
    """Write the month's small files, already read and verified, dated as the publisher's."""
    for rel, small in remote.small.items():
        fsio.atomic_write_bytes(stage / rel, small.data)
        if small.mtime_ns is not None:
            os.utime(stage / rel, ns=(small.mtime_ns, small.mtime_ns))
        size = len(small.data)
        stats.add(bytes_done=size, bytes_fetched=size, bytes_hashed=size)


class _StagedMonth:
    """A month's staging folder: its files, the remote versions they were started from
    (``.skewtape/fetch.json``) and the hash cache of what verified."""

    def __init__(self, stage: Path, source: Source, remote: RemoteMonth, stats: TransferStats):
        started_ns = time.time_ns()  # the small files were hashed before; dated no later
        self.stage, self.source, self.remote, self.stats = stage, source, remote, stats
        self.journal_path = stage / LOCAL_STATE_DIR / JOURNAL
        self.versions: dict[str, str] = _load_versions(self.journal_path)
        self.cache = HashCache(hash_cache_path(stage))
        self.lock = threading.Lock()
        self.cancel = threading.Event()
        limit = source.settings.time_limit
        self.deadline = None if limit is None else time.monotonic() + limit
        for rel, small in remote.small.items():  # verified as read: hashed again only when
            digest = remote.listed.get(rel) or sha256_bytes(small.data)  # nothing lists it
            self.cache.record(rel, stage / rel, digest, hashed_at_ns=started_ns)

    def fetch_all(self, remotes: dict[str, RemoteFile]) -> None:
        """Fetch every file (largest first, ``connections`` at a time), then fsync them all
        together; the first failure stops the others and is raised once they stopped."""
        started = {rel: self.versions.get(rel) for rel in remotes}  # what the files were of
        with _writing(self.source, self.remote, self.stage, "its journal"):
            self._remember_versions({rel: remote.validator for rel, remote in remotes.items()})
        order = sorted(remotes, key=lambda rel: remotes[rel].size, reverse=True)
        fetch_file = progress.carrying_notices(self.fetch_file)
        with ThreadPoolExecutor(max_workers=self.source.settings.connections) as pool:
            futures = [pool.submit(fetch_file, rel, remotes[rel], started[rel]) for rel in order]
            try:
                wait(futures, return_when=FIRST_EXCEPTION)
            finally:
                self.cancel.set()
                wait(futures)
            errors = [f.exception() for f in futures if f.exception() is not None]
            real = [e for e in errors if not isinstance(e, Cancelled)]
            if real:
                raise real[0]
            with _writing(self.source, self.remote, self.stage, "the fetched files"):
                list(pool.map(fsio.fsync_file, [self.stage / rel for rel in order]))

    def fetch_file(self, rel: str, remote: RemoteFile, started_from: str | None) -> None:
        """Make ``stage/rel`` the verified file: kept when whole, resumed, or fetched."""
        path = self.stage / rel
        expected = self.remote.listed[rel]
        started_ns = time.time_ns()
        with _writing(self.source, self.remote, self.stage, rel):
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() and not os.access(path, os.W_OK):  # sealed by a fetch killed
                path.chmod(path.stat().st_mode | 0o200)  # before its rename (hashed again)
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            kept = self._kept(rel, fd, remote, started_from)
            if kept == remote.size and self._verified_on_disk(rel, path, expected):
                self.stats.add(files_present=1, bytes_done=kept, bytes_resumed=kept)
                return
            kept = kept if kept < remote.size else 0
            digest, remote = self._download(rel, fd, remote, kept)
            if digest != expected and kept:  # the kept bytes were not the file's
                self.stats.add(bytes_done=-remote.size, bytes_resumed=-kept)
                digest, remote = self._download(rel, fd, remote, 0)
        finally:
            os.close(fd)
        if digest != expected:
            raise ChecksumMismatchError(
                f"{self.source.url(f'{self.remote.folder}/{rel}')} hashes to {digest}; the "
                f"month's {CHECKSUMS} lists {expected}",
                field=rel,
            )
        with _writing(self.source, self.remote, self.stage, "its hash cache"):
            self._record(rel, path, digest, started_ns, remote.mtime_ns)
        self.stats.add(files_fetched=1)

    def _kept(self, rel: str, fd: int, remote: RemoteFile, started_from: str | None) -> int:
        """Bytes of ``fd`` a resume can keep: all of them when it was started from the same
        remote version (one that can be resumed) and is not longer than it; else 0."""
        same = started_from == remote.validator and remote.resumable
        size = os.fstat(fd).st_size
        return size if same and size <= remote.size else 0

    def _verified_on_disk(self, rel: str, path: Path, expected: str) -> bool:
        digest = self.cache.lookup(rel, path)
        if digest is None:
            started_ns = time.time_ns()
            digest = _hash_file(path, self.stats)
            if digest == expected:
                with self.lock:
                    self.cache.record(rel, path, digest, hashed_at_ns=started_ns)
        return digest == expected

    def _download(self, rel: str, fd: int, remote: RemoteFile, kept: int) -> tuple[str, RemoteFile]:
        """Fill ``fd`` with the file after its first ``kept`` bytes; returns the sha256 of the
        whole file and the version fetched (see :mod:`.transfer`)."""
        url = self.source.url(f"{self.remote.folder}/{rel}")
        writing = functools.partial(_writing, self.source, self.remote, self.stage, rel)

        def new_version(found: RemoteFile) -> None:
            check_size(url, found, self.remote.sizes.get(rel))
            with writing():
                self._remember_versions({rel: found.validator})

        hooks = Hooks(self.stats.add, writing, lambda: self._check_deadline(url), new_version,
                      self.cancel)  # fmt: skip
        transfer = FileTransfer(self.source, f"{self.remote.folder}/{rel}", url, fd, hooks)
        return transfer.run(remote, kept)

    def _check_deadline(self, url: str) -> None:
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise TransferError(
                f"the month's transfer ran past its time limit of "
                f"{self.source.settings.time_limit:g} s; a rerun resumes it",
                url=url,
            )

    def _remember_versions(self, versions: dict[str, str]) -> None:
        with self.lock:
            if all(self.versions.get(rel) == found for rel, found in versions.items()):
                return
            self.versions.update(versions)
            fsio.atomic_write_bytes(self.journal_path, _dump_versions(self.versions))

    def make_read_only(self) -> None:
        """Clear the write bits of every published file of the month (as apply leaves the
        months it publishes), each keeping its verified hash: a mode change is no change of
        its bytes (``HashCache.restamp``)."""
        for rel in sorted(set(self.remote.small) | set(self.remote.listed)):
            path = self.stage / rel
            was = FileStamp.of(path)
            fsio.make_read_only(path)
            self.cache.restamp(rel, path, was=was)

    def _record(self, rel: str, path: Path, digest: str, started_ns: int, mtime_ns: int | None):
        """Give ``path`` the publisher's modification time and record its verified hash (the
        cache is saved once the month's files are all in)."""
        if mtime_ns is not None:
            os.utime(path, ns=(mtime_ns, mtime_ns))
        with self.lock:
            self.cache.record(rel, path, digest, hashed_at_ns=started_ns)


def _hash_file(path: Path, stats: TransferStats) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while chunk := handle.read(BLOCK):
            digest.update(chunk)
            stats.add(bytes_hashed=len(chunk))
    return digest.hexdigest()


def _load_versions(path: Path) -> dict[str, str]:
    """{path: remote version} of ``fetch.json``; {} when it is absent or damaged (every
    partial file is then started over)."""
    try:
        data = fsio.read_json_file(path)
    except (OSError, MalformedJsonError):
        return {}
    if not isinstance(data, dict):
        return {}
    return {k: v for k, v in data.items() if isinstance(k, str) and isinstance(v, str)}


def _dump_versions(versions: dict[str, str]) -> bytes:
    return json.dumps(versions, sort_keys=True).encode()

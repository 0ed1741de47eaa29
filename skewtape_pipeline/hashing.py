"""sha256 of files (in parallel), CHECKSUMS.sha256 files, and a cache of verified hashes.

The cache follows git's index: a file whose stamp (device, inode, size, mtime_ns, ctime_ns) has
not changed since it was hashed keeps its hash; anything else is hashed again. A full scrub
ignores the cache. The ctime is what a rewrite cannot hide: ``touch -r``, ``rsync --inplace -t``
or ``os.utime`` restore a file's mtime after writing it, but every write and every ``utime`` moves
the ctime to now. Linking, unlinking and renaming a file move its ctime too, so code that does
that to a file it vouches for re-stamps it right after (:meth:`HashCache.restamp`).

Racily clean entries
--------------------
A file's mtime moves in steps of its file system's timestamp granularity: a kernel clock tick
(a few ms) on local disks, 1 s or 2 s on some file systems. A file rewritten with the same size
within one step of its previous write keeps its stamp, so a hash taken in that window may vouch
for bytes that are gone; git calls such an entry "racily clean". Each entry is therefore dated
no later than the moment reading the file for it began, and :meth:`HashCache.lookup` trusts it
only when the file's mtime is at least :data:`RACY_WINDOW_NS` older than that date. A racy
entry is a miss: the caller rehashes, and the new record, the file being old by then, is
trusted from then on. Entries read from disk are also dated no later than the cache file's own
mtime (git's rule, on the file system's clock), so a wall clock running ahead of the file
system's cannot make a fresh file look old; caches written before entries carried a date are
dated by that mtime alone.

Results hashed within one run
-----------------------------
The rule guards the *cache*, which carries hashes from one run to the next past writers the
engine cannot see. A result an operation hashed itself a moment ago (an apply's hashes of the
delta's files and of the tables it merged, handed to the final verification as known hashes)
can be trusted for the rest of that same operation without the cache, even when the files are
fresh enough to fall in the window, because a racy rewrite needs a writer the operation
excludes: the stamp is taken before the file is read and compared again where the result is
used (so any write that moves the mtime by one tick, the size or the inode is seen); the folder
written is under the apply's lock (a versioned apply's folder is private until its rename); the
engine's own writes replace files by rename, which gives a new inode; and a delta is applied
only once it has completely arrived, when nothing writes its files any more. That trust must
end with the operation: a result recorded for later runs is dated by ``hashed_at_ns`` (when
reading began), so it meets the racy rule on the next lookup like any other entry. A record
without ``hashed_at_ns`` is dated when the cache was opened, which is exact for a caller that
opens the cache and then hashes, and too generous for a hash taken before the cache was opened.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO, Generic, TypeVar

from skewtape_pipeline import progress
from skewtape_pipeline.errors import ChecksumLineError, MalformedJsonError
from skewtape_pipeline.fsio import atomic_write_bytes, load_json, open_state_file

BLOCK = 1 << 20
RACY_WINDOW_NS = 2_000_000_000
"""How much older than its hash an entry's mtime must be for the entry to be trusted (2 s)."""
_HEX = frozenset("0123456789abcdef")


def sha256_bytes(data: bytes) -> str:
    """Hex sha256 of ``data``."""
    return hashlib.sha256(data).hexdigest()


def sha256_file(path: Path) -> str:
    """Hex sha256 of the file at ``path``, read in 1 MiB blocks (hashlib releases the GIL)."""
    digest = hashlib.sha256()
    with open(path, "rb", buffering=0) as handle:
        buffer = bytearray(BLOCK)
        view = memoryview(buffer)
        while n := handle.readinto(buffer):
            digest.update(view[:n])
    return digest.hexdigest()


def sha256_stream(stream: BinaryIO) -> str:
    """Hex sha256 of what ``stream`` reads until its end (an object store's input stream), in
    blocks of :data:`BLOCK` bytes."""
    digest = hashlib.sha256()
    while chunk := stream.read(BLOCK):
        digest.update(chunk)
    return digest.hexdigest()


def copy_hashing(source: Path, target: Path) -> str:
    """Copy ``source`` to ``target`` (created or truncated) and return the sha256 of the bytes
    written: what was copied is what was hashed, whatever happens to ``source`` meanwhile."""
    digest = hashlib.sha256()
    with open(source, "rb", buffering=0) as reader, open(target, "wb") as writer:
        buffer = bytearray(BLOCK)
        view = memoryview(buffer)
        while n := reader.readinto(buffer):
            digest.update(view[:n])
            writer.write(view[:n])
    return digest.hexdigest()


def sha256_files(paths: Iterable[Path], *, workers: int | None = None) -> dict[Path, str]:
    """sha256 of many files at once on a thread pool (one thread per core by default); the
    bytes hashed so far are reported (:func:`progress.report`) as each file's hash arrives."""
    # Largest first keeps the threads busy until the end.
    sizes = {path: path.stat().st_size for path in paths}
    ordered = sorted(sizes, key=sizes.__getitem__, reverse=True)
    workers = workers or os.cpu_count() or 1
    total, done, found = sum(sizes.values()), 0, {}
    with contextlib.ExitStack() as stack:
        if workers == 1 or len(ordered) <= 1:
            digests = map(sha256_file, ordered)
        else:
            pool = stack.enter_context(ThreadPoolExecutor(max_workers=workers))
            digests = pool.map(sha256_file, ordered)
        for path, digest in zip(ordered, digests, strict=True):
            found[path], done = digest, done + sizes[path]
            progress.report("hashing", done, total, "bytes")
    return found


def is_sha256_hex(value: object) -> bool:
    """True for a 64-character lowercase hex string."""
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def parse_checksums(data: bytes, *, source: Path) -> dict[str, str]:
    """{path: lowercase hex} of CHECKSUMS.sha256 text, read as GNU ``sha256sum -c`` reads it.

    Accepted, as coreutils writes them: text lines ``<hex>  <path>`` and binary lines
    ``<hex> *<path>``; hex in either case; the escaped form (the line starts with ``\\`` and
    the path spells a backslash ``\\\\``, a newline ``\\n``, a carriage return ``\\r``);
    ``\\r\\n`` line ends; a missing final newline. Only ``\\n`` ends a line. As ``sha256sum -c``
    does, empty lines and lines starting with ``#`` are skipped, and leading blanks and a tab
    after the hex are allowed. Every other line (BSD ``--tag`` lines included) raises
    :class:`ChecksumLineError` naming ``source`` and the line, as does a path listed twice or
    a line that is not UTF-8.
    """
    return {rel: digest for rel, (digest, _) in checksum_entries(data, source=source).items()}


def checksum_entries(data: bytes, *, source: Path) -> dict[str, tuple[str, int]]:
    """{path: (lowercase hex, 1-based line number)} of CHECKSUMS.sha256 text, read and refused
    as :func:`parse_checksums` reads it: what names the line of a path refused later."""
    listed: dict[str, tuple[str, int]] = {}
    for number, raw in enumerate(data.split(b"\n"), start=1):
        raw = raw[:-1] if raw.endswith(b"\r") else raw
        if not raw or raw.startswith(b"#"):
            continue
        try:
            line = raw.decode("utf-8", errors="strict")
        except UnicodeDecodeError as exc:
            raise ChecksumLineError(
                f"is not UTF-8 text ({exc.reason} at byte {exc.start})", path=source, line=number
            ) from None
        rel, digest = _checksum_line(line, number, source)
        if rel in listed:
            raise ChecksumLineError(f"lists {rel!r} a second time", path=source, line=number)
        listed[rel] = (digest, number)
    return listed


def _checksum_line(line: str, number: int, source: Path) -> tuple[str, str]:
    """(path, lowercase hex) of one non-empty, non-comment line; ChecksumLineError otherwise."""
    match = _CHECKSUM_LINE.match(line)
    rel = match and (_unescape(match["name"]) if match["escaped"] else match["name"])
    if not rel:
        raise ChecksumLineError(
            f"is {line[:80]!r}; expected '<64 hex digits>  <path>' or '<64 hex digits> *<path>' "
            "(as sha256sum writes them)",
            path=source,
            line=number,
        )
    return rel, match["hex"].lower()


_CHECKSUM_LINE = re.compile(
    r"[ \t]*(?P<escaped>\\?)(?P<hex>[0-9A-Fa-f]{64})[ \t][ *](?P<name>.*)", re.DOTALL
)
_ESCAPES = {"\\": "\\", "n": "\n", "r": "\r"}


def _unescape(name: str) -> str | None:
    """A name in sha256sum's escaped form, unescaped; None when it holds an unknown escape."""
    out, chars = [], iter(name)
    for char in chars:
        if char == "\\":
            char = _ESCAPES.get(next(chars, ""))
            if char is None:
                return None
        out.append(char)
    return "".join(out)


def format_checksums(hashes: Mapping[str, str]) -> bytes:
    """sha256sum-format text for {path: hex}, sorted by path, byte for byte as coreutils writes
    it: ``<hex>  <path>`` lines, and a name holding a backslash, newline or carriage return in
    the escaped form (``\\<hex>  <escaped path>``)."""
    lines = []
    for rel in sorted(hashes):
        if any(char in rel for char in "\\\n\r"):
            escaped = rel.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
            lines.append(f"\\{hashes[rel]}  {escaped}\n")
        else:
            lines.append(f"{hashes[rel]}  {rel}\n")
    return "".join(lines).encode()


@dataclass(frozen=True)
class FileStamp:
    """What identifies an unchanged file, as git's index has it: device, inode, size, and the
    modification and status-change times in ns."""

    device: int
    inode: int
    size: int
    mtime_ns: int
    ctime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        """The stamp of ``path`` now (following a final symbolic link, as ``stat`` does)."""
        return cls.from_stat(path.stat())

    @classmethod
    def from_stat(cls, st: os.stat_result) -> FileStamp:
        return cls(st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns, st.st_ctime_ns)

    def same_bytes(self, other: FileStamp) -> bool:
        """Whether ``other`` stamps the very file this one does, unwritten since: device,
        inode, size and modification time (not the status-change time, which a hard link
        added or removed elsewhere moves)."""
        return (self.device, self.inode, self.size, self.mtime_ns) == (
            other.device, other.inode, other.size, other.mtime_ns,
        )  # fmt: skip

    def to_list(self) -> list[int]:
        """The stamp as a JSON-able list (see :meth:`from_list`)."""
        return [self.device, self.inode, self.size, self.mtime_ns, self.ctime_ns]

    @classmethod
    def from_list(cls, fields: object) -> FileStamp | None:
        """The stamp :meth:`to_list` wrote, or None for anything else."""
        if not isinstance(fields, list) or len(fields) != STAMP_FIELDS:
            return None
        if not all(isinstance(n, int) and not isinstance(n, bool) for n in fields):
            return None
        return cls(*fields)


STAMP_FIELDS = 5
_T = TypeVar("_T")


class ParsedByStamp(Generic[_T]):
    """What files parsed to, by path, each kept with the stamp of the file its bytes were read
    from (the last ``keep`` files): a file whose stamp holds is not read again; one whose stamp
    moved (replaced, rewritten, changed behind the reader's back) is read and parsed again."""

    def __init__(self, keep: int):
        self.keep = keep
        self._kept: dict[str, tuple[FileStamp, _T]] = {}

    def read(self, path: Path, parse: Callable[[bytes], _T]) -> _T:
        """``parse`` of the bytes of ``path`` (one open file: the stamp is of the bytes read),
        or what it gave for the file of the same stamp. Raises what ``open`` and ``parse``
        raise (FileNotFoundError when ``path`` is not there); nothing is kept then."""
        with open(path, "rb") as handle:
            stamp = FileStamp.from_stat(os.fstat(handle.fileno()))
            kept = self._kept.get(str(path))
            if kept is not None and kept[0] == stamp:
                return kept[1]
            raw = handle.read()
        value = parse(raw)
        if len(self._kept) >= self.keep:
            self._kept.pop(next(iter(self._kept)))
        self._kept[str(path)] = (stamp, value)
        return value


@dataclass(frozen=True)
class _Entry:
    stamp: FileStamp
    sha256: str
    dated_ns: int
    """No later than the moment reading the file for ``sha256`` began (ns since the epoch)."""

    def is_racy(self) -> bool:
        """True when the file may have been rewritten since, keeping its stamp."""
        return self.stamp.mtime_ns + RACY_WINDOW_NS > self.dated_ns


class HashCache:
    """Verified sha256 of files, keyed by relative path and trusted while their stamp holds.

    The cache is a JSON file; :meth:`save` writes it atomically. Entries whose stamp no longer
    matches the file, and racily clean entries (see the module notes), are ignored by
    :meth:`lookup`, so a locally modified file is always rehashed. A damaged cache file or
    entry only costs rehashing.
    """

    def __init__(self, path: Path):
        self.path = path
        self.opened_ns = time.time_ns()
        """When this cache was opened: the date of records made without ``hashed_at_ns``."""
        self._entries = _load_entries(path)

    def lookup(self, rel: str, file: Path) -> str | None:
        """The cached sha256 of ``file`` if its stamp is unchanged and the entry is not racy."""
        found = self.lookup_dated(rel, file)
        return found[0] if found is not None else None

    def lookup_dated(self, rel: str, file: Path) -> tuple[str, int] | None:
        """:meth:`lookup`, with the entry's date (pass it on when recording the same bytes
        under another name, so the racy rule keeps applying to the original hash)."""
        if self._trusted(rel) is None:
            return None
        try:
            stamp = FileStamp.of(file)
        except FileNotFoundError:
            return None
        return self.lookup_stamped(rel, stamp)

    def lookup_stamped(self, rel: str, stamp: FileStamp) -> tuple[str, int] | None:
        """:meth:`lookup_dated` for a file whose stamp the caller took (before reading it; an
        object's, which ``stat`` cannot take)."""
        entry = self._trusted(rel)
        return (
            (entry.sha256, entry.dated_ns) if entry is not None and entry.stamp == stamp else None
        )

    def _trusted(self, rel: str) -> _Entry | None:
        entry = self._entries.get(rel)
        return None if entry is None or entry.is_racy() else entry

    def restamp(self, rel: str, file: Path, *, was: FileStamp) -> None:
        """Keep the entry of ``rel`` across a link, unlink or rename the caller just made.

        ``was`` is the stamp the caller took right before that operation: if the entry vouched
        for exactly that stamp, it now vouches for ``file``'s new stamp (same hash, same date);
        otherwise the entry is dropped and the file is hashed again when next needed.
        """
        entry = self._entries.get(rel)
        if entry is None or entry.stamp != was:
            self.forget(rel)
            return
        try:
            stamp = FileStamp.of(file)
        except FileNotFoundError:
            self.forget(rel)
            return
        self._entries[rel] = _Entry(stamp, entry.sha256, entry.dated_ns)

    def record(self, rel: str, file: Path, digest: str, *, hashed_at_ns: int | None = None) -> None:
        """Remember that ``file`` (as it is now) hashes to ``digest``.

        ``hashed_at_ns`` (``time.time_ns()``) is when reading the file for ``digest`` began;
        pass it for a hash taken before this cache was opened. By default the entry is dated
        :attr:`opened_ns`.
        """
        self.record_stamped(rel, FileStamp.of(file), digest, hashed_at_ns=hashed_at_ns)

    def record_stamped(
        self, rel: str, stamp: FileStamp, digest: str, *, hashed_at_ns: int | None = None
    ) -> None:
        """:meth:`record` with the stamp the caller took before reading the file."""
        dated = self.opened_ns if hashed_at_ns is None else hashed_at_ns
        self._entries[rel] = _Entry(stamp, digest, dated)

    def adopt(self, other: HashCache, *, only: Iterable[str] | None = None) -> None:
        """Take the entries of ``other`` (the cache of a staged copy of the same files): all of
        them, or those of the paths ``only``."""
        names = other._entries.keys() if only is None else set(only) & other._entries.keys()
        self._entries.update({rel: other._entries[rel] for rel in names})

    def forget(self, rel: str) -> None:
        """Drop the entry of ``rel`` (no error when there is none)."""
        self._entries.pop(rel, None)

    def entries(self) -> dict[str, tuple[FileStamp, str]]:
        """Every entry, racy or not, as {rel: (stamp, sha256)}."""
        return {rel: (entry.stamp, entry.sha256) for rel, entry in self._entries.items()}

    def save(self) -> None:
        """Write the cache file atomically."""
        raw = {
            rel: [*e.stamp.to_list(), e.sha256, e.dated_ns]
            for rel, e in sorted(self._entries.items())
        }
        atomic_write_bytes(self.path, json.dumps(raw, separators=(",", ":")).encode())


def _load_entries(path: Path) -> dict[str, _Entry]:
    """The entries of the cache file at ``path``; {} when it is absent or not a JSON object.

    Raises :class:`~skewtape_pipeline.errors.LinkedStateFileError` when it is a symbolic link.
    """
    try:
        with open(open_state_file(path, os.O_RDONLY), "rb") as handle:
            saved_ns = os.fstat(handle.fileno()).st_mtime_ns
            raw = load_json(handle.read(), path)
    except (FileNotFoundError, MalformedJsonError):  # absent, not JSON, nested too deep
        return {}
    if not isinstance(raw, dict):
        return {}
    entries = {}
    for rel, fields in raw.items():
        entry = _parse_entry(fields, saved_ns)
        if entry is not None:
            entries[rel] = entry
    return entries


def _parse_entry(fields: object, saved_ns: int) -> _Entry | None:
    """``[*stamp, sha256, dated_ns]`` (undated: no date) or None.

    Entries of an older cache, whose stamp lacks the device and ctime, are None: such a stamp
    cannot tell a rewrite with its mtime restored, so those files are hashed again once.
    """
    if not isinstance(fields, list) or len(fields) not in (STAMP_FIELDS + 1, STAMP_FIELDS + 2):
        return None
    stamp = FileStamp.from_list(fields[:STAMP_FIELDS])
    digest, *dated = fields[STAMP_FIELDS:]
    if stamp is None or not is_sha256_hex(digest):
        return None
    if not all(isinstance(n, int) and not isinstance(n, bool) for n in dated):
        return None
    return _Entry(stamp, digest, min([*dated, saved_ns]))

"""sha256 of files (in parallel), CHECKSUMS.sha256 files, and a cache of verified hashes.

The cache follows git's index: a file whose (inode, size, mtime_ns) has not changed since it was
hashed keeps its hash; anything else is hashed again. A full scrub ignores the cache.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from skewtape_pipeline.errors import ManifestError
from skewtape_pipeline.fsio import atomic_write_bytes

BLOCK = 1 << 20
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


def sha256_files(paths: Iterable[Path], *, workers: int | None = None) -> dict[Path, str]:
    """sha256 of many files at once on a thread pool (one thread per core by default)."""
    paths = list(paths)
    workers = workers or os.cpu_count() or 1
    if workers == 1 or len(paths) <= 1:
        return {path: sha256_file(path) for path in paths}
    # Largest first keeps the threads busy until the end.
    ordered = sorted(paths, key=lambda p: p.stat().st_size, reverse=True)
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return dict(zip(ordered, pool.map(sha256_file, ordered), strict=True))


def is_sha256_hex(value: object) -> bool:
    """True for a 64-character lowercase hex string."""
    return isinstance(value, str) and len(value) == 64 and set(value) <= _HEX


def parse_checksums(data: bytes, *, source: Path) -> dict[str, str]:
    """Parse sha256sum-format text (``<hex>  <path>`` per line) into {path: hex}.

    Raises :class:`ManifestError` naming the line on a malformed line or a path listed twice.
    """
    listed: dict[str, str] = {}
    for number, line in enumerate(data.decode("utf-8", errors="strict").splitlines(), start=1):
        if not line.strip():
            continue
        digest, sep, rel = line.partition("  ")
        if not sep or not is_sha256_hex(digest) or not rel:
            raise ManifestError(
                f"line {number} is {line[:80]!r}; expected '<64 hex digits>  <path>'", path=source
            )
        if rel.startswith("*"):  # sha256sum's binary-mode marker
            rel = rel[1:]
        if rel in listed:
            raise ManifestError(f"line {number} lists {rel!r} a second time", path=source)
        listed[rel] = digest
    return listed


def format_checksums(hashes: Mapping[str, str]) -> bytes:
    """sha256sum-format text for {path: hex}, sorted by path."""
    return "".join(f"{hashes[rel]}  {rel}\n" for rel in sorted(hashes)).encode()


@dataclass(frozen=True)
class FileStamp:
    """What identifies an unchanged file: inode, size and modification time in ns."""

    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp:
        st = path.stat()
        return cls(st.st_ino, st.st_size, st.st_mtime_ns)


class HashCache:
    """Verified sha256 of files, keyed by relative path and trusted while their stamp holds.

    The cache is a JSON file; :meth:`save` writes it atomically. Entries whose stamp no longer
    matches the file are ignored by :meth:`lookup`, so a locally modified file is always rehashed.
    """

    def __init__(self, path: Path):
        self.path = path
        self._entries: dict[str, tuple[FileStamp, str]] = {}
        if path.exists():
            try:
                raw = json.loads(path.read_bytes())
                for rel, (inode, size, mtime_ns, digest) in raw.items():
                    self._entries[rel] = (FileStamp(inode, size, mtime_ns), digest)
            except (ValueError, TypeError):
                self._entries = {}  # a damaged cache only costs rehashing

    def lookup(self, rel: str, file: Path) -> str | None:
        """The cached sha256 of ``file`` if its stamp is unchanged, else None."""
        entry = self._entries.get(rel)
        if entry is None:
            return None
        try:
            stamp = FileStamp.of(file)
        except FileNotFoundError:
            return None
        return entry[1] if entry[0] == stamp else None

    def record(self, rel: str, file: Path, digest: str) -> None:
        """Remember that ``file`` (as it is now) hashes to ``digest``."""
        self._entries[rel] = (FileStamp.of(file), digest)

    def forget(self, rel: str) -> None:
        self._entries.pop(rel, None)

    def entries(self) -> dict[str, tuple[FileStamp, str]]:
        return dict(self._entries)

    def save(self) -> None:
        raw = {
            rel: [stamp.inode, stamp.size, stamp.mtime_ns, digest]
            for rel, (stamp, digest) in sorted(self._entries.items())
        }
        atomic_write_bytes(self.path, json.dumps(raw, separators=(",", ":")).encode())

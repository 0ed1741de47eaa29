"""What the publisher holds, read before anything is written: a month's CHECKSUMS.sha256, its
manifest (and a delta's next seal), each small file checked against its listed sha256 and the
two seals against each other, and the version and size of every file still to fetch; the newest
month it has a whole snapshot of. Each refusal names the publisher's file by its URL (the
source's, redacted: :class:`PublisherFile`, its publisher-relative path at the end) and, for a
parsed file, the field.

This module does not import dagster.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Literal

from skewtape_pipeline import progress
from skewtape_pipeline.errors import (
    ChecksumMismatchError,
    PublisherError,
    VerificationError,
    quoted_path,
)
from skewtape_pipeline.hashing import sha256_bytes
from skewtape_pipeline.locations import redacted
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    MANIFEST,
    DeltaManifest,
    SnapshotManifest,
    safe_checksums,
)
from skewtape_pipeline.mirror.preflight import check_next_snapshot
from skewtape_pipeline.mirror.sources import RemoteFile, SmallFile, Source
from skewtape_pipeline.mirror.verify import seal_disagreements

HISTORY, DELTAS = "history", "deltas"
Kind = Literal["delta", "snapshot"]


@dataclass(frozen=True)
class PublisherFile:
    """A file or folder at the publisher as a refusal names it: ``source``'s URL of the
    publisher-relative path ``rel`` (``https://host/pub/deltas/2026-11/manifest.json``,
    ``s3://bucket/prefix/...``, a local source's absolute path), redacted (no credentials, no
    query), so a user following several publishers reads which one served it. Joined as a
    path is (``folder / MANIFEST``), which is all the format's checks do with the file they
    name."""

    source: Source
    rel: str

    def __truediv__(self, name: str) -> PublisherFile:
        return PublisherFile(self.source, f"{self.rel}/{name}")

    def __str__(self) -> str:
        return redacted(self.source.url(self.rel))


@dataclass(frozen=True)
class RemoteMonth:
    """A published month, read as far as its small files: ``listed`` is its CHECKSUMS.sha256
    ({path in the month's folder: sha256}), ``small`` the bytes of the files already read
    whole (verified), ``sizes`` the sizes a manifest records ({path: bytes}; may be empty)."""

    month: str
    kind: Kind
    listed: dict[str, str]
    small: dict[str, SmallFile]
    sizes: dict[str, int]
    next_manifest_sha256: str | None = None
    parent_manifest_sha256: str | None = None

    @property
    def folder(self) -> str:
        """The month's folder at the publisher (and in the local root)."""
        return f"{DELTAS if self.kind == 'delta' else HISTORY}/{self.month}"


def remote_delta(source: Source, month: str) -> RemoteMonth | None:
    """The publisher's delta of ``month`` (its CHECKSUMS.sha256, its manifest, and the next
    snapshot's CHECKSUMS.sha256 and manifest read and cross-checked, the next snapshot's as the
    apply checks them: :func:`~skewtape_pipeline.mirror.preflight.check_next_snapshot`), or
    None when it has not published it. Writes nothing.

    Raises ChecksumMismatchError (a CHECKSUMS.sha256 that does not list the manifest, a file
    that does not hash as listed), ManifestError (the next snapshot's CHECKSUMS.sha256 and
    manifest disagree, or disagree with the delta's entries), UnsafePathError, PublisherError.
    """
    folder = f"{DELTAS}/{month}"
    sums = source.read_small(f"{folder}/{CHECKSUMS}")
    if sums is None:
        return None
    listed = _listed(source, folder, sums.data)
    manifest = _read_listed(source, folder, MANIFEST, listed)
    manifest_raw = manifest.data
    at = PublisherFile(source, folder)
    parsed = DeltaManifest.parse(manifest_raw, source=at / MANIFEST)
    for index, entry in enumerate(parsed.files):
        if entry.source is not None and listed.get(entry.source) != entry.sha256:
            raise ChecksumMismatchError(
                f"files[{index}] ships {quoted_path(entry.source)} with sha256 {entry.sha256}; "
                f"{source.url(folder + '/' + CHECKSUMS)} lists {listed.get(entry.source)}",
                field=f"files[{index}].sha256",
            )
    small = {CHECKSUMS: sums, MANIFEST: manifest}
    for rel in (entry.source for entry in parsed.files[-2:] if entry.source):  # the next seal
        small[rel] = _read_listed(source, folder, rel, listed)
    recorded, _ = check_next_snapshot(parsed, at, lambda rel: small[rel].data)
    shipped = {e.path: e.source for e in parsed.files if e.op in ("add", "replace")}
    sizes = {
        shipped[path]: entry.bytes
        for path, entry in recorded.by_path().items()
        if path in shipped and entry.bytes is not None
    }
    return RemoteMonth(
        month,
        "delta",
        listed,
        small,
        sizes,
        next_manifest_sha256=parsed.next.manifest_sha256,
        parent_manifest_sha256=parsed.parent.manifest_sha256,
    )


def remote_snapshot(source: Source, month: str) -> RemoteMonth:
    """The publisher's whole snapshot of ``month`` (CHECKSUMS.sha256 and manifest read, and
    compared as ``verify`` compares them). Writes nothing.

    Raises PublisherError when the publisher has no such snapshot; VerificationError (its
    problems as ``verify`` words them, each naming a file) when the manifest lists files that
    CHECKSUMS.sha256 does not list, or lists with another sha256, or the reverse; otherwise as
    :func:`remote_delta`.
    """
    folder = f"{HISTORY}/{month}"
    sums = source.read_small(f"{folder}/{CHECKSUMS}")
    if sums is None:
        raise PublisherError(
            f"the publisher has no snapshot of {month} (no {CHECKSUMS})",
            url=source.url(f"{folder}/{CHECKSUMS}"),
        )
    listed = _listed(source, folder, sums.data)
    manifest = _read_listed(source, folder, MANIFEST, listed)
    at = PublisherFile(source, folder)
    parsed = SnapshotManifest.parse(manifest.data, source=at / MANIFEST)
    problems = seal_disagreements(parsed, listed)
    if problems:
        raise VerificationError(str(at), problems)
    recorded = parsed.by_path()
    sizes = {path: e.bytes for path, e in recorded.items() if e.bytes is not None}
    return RemoteMonth(month, "snapshot", listed, {CHECKSUMS: sums, MANIFEST: manifest}, sizes)


def _listed(source: Source, folder: str, raw: bytes) -> dict[str, str]:
    """{path: sha256} of a month's CHECKSUMS.sha256, every path safe, the manifest listed."""
    url = source.url(f"{folder}/{CHECKSUMS}")
    at = PublisherFile(source, folder) / CHECKSUMS
    listed = safe_checksums(raw, source=at)  # "<url>: line 3: refusing the path '../x': ..."
    _refuse_file_and_folder(url, listed)
    if MANIFEST not in listed:
        raise ChecksumMismatchError(
            f"{url} does not list {MANIFEST}; a month's checksums vouch for its manifest",
            field=MANIFEST,
        )
    return listed


def _refuse_file_and_folder(url: str, listed: dict[str, str]) -> None:
    """PublisherError when a listed path is also the folder of another listed path (no file
    system holds both ``zz`` and ``zz/inner.bin``)."""
    folders = {parent.as_posix(): rel for rel in listed for parent in PurePosixPath(rel).parents}
    for rel in sorted(listed):
        if rel in folders:
            raise PublisherError(
                f"lists {quoted_path(rel)} as a file and as the folder of "
                f"{quoted_path(folders[rel])}; no file system holds both",
                url=url,
            )


def _read_listed(source: Source, folder: str, rel: str, listed: dict[str, str]) -> SmallFile:
    """A small listed file, its bytes checked against its listed sha256."""
    url = source.url(f"{folder}/{rel}")
    if rel not in listed:
        raise ChecksumMismatchError(f"{url} is not listed in the month's {CHECKSUMS}", field=rel)
    data = source.read_small(f"{folder}/{rel}")
    if data is None:
        raise PublisherError(f"is listed in the month's {CHECKSUMS} but is not there", url=url)
    found = sha256_bytes(data.data)
    if found != listed[rel]:
        raise ChecksumMismatchError(
            f"{url} hashes to {found}; the month's {CHECKSUMS} lists {listed[rel]}", field=rel
        )
    return data


SNAPSHOT_LOOKBACK = 36
"""How many months back from now :func:`newest_snapshot_month` asks for a snapshot."""


def newest_snapshot_month(source: Source, *, now: str | None = None) -> str:
    """The newest month the publisher has a whole snapshot of, found by asking for
    ``history/<YYYY-MM>/CHECKSUMS.sha256`` from the current month (``now``, default: today in
    UTC) backwards, one small request per month, at most :data:`SNAPSHOT_LOOKBACK` months.

    Raises PublisherError when none of those months has one.
    """
    month = now or time.strftime("%Y-%m", time.gmtime())
    for _ in range(SNAPSHOT_LOOKBACK):
        if source.stat(f"{HISTORY}/{month}/{CHECKSUMS}") is not None:
            return month
        month = previous_month(month)
    raise PublisherError(
        f"has no snapshot in the {SNAPSHOT_LOOKBACK} months up to {now or 'now'} (asked for "
        f"{HISTORY}/<YYYY-MM>/{CHECKSUMS}); pass the month to start from",
        url=source.location,
    )


def previous_month(month: str) -> str:
    """The month before ``month`` (YYYY-MM)."""
    year, mon = int(month[:4]), int(month[5:])
    return f"{year - 1:04d}-12" if mon == 1 else f"{year:04d}-{mon - 1:02d}"


def stat_listed(
    source: Source, remote: RemoteMonth, large: dict[str, str]
) -> dict[str, RemoteFile]:
    """{path: the remote version} of every listed file not read yet; a file that is not there,
    or longer or shorter than its recorded size, is refused."""
    settings = source.settings

    def one(rel: str) -> RemoteFile:
        url = source.url(f"{remote.folder}/{rel}")
        found = source.stat(f"{remote.folder}/{rel}")
        if found is None:
            raise PublisherError(
                f"is listed in the month's {CHECKSUMS} but the publisher does not have it",
                url=url,
            )
        check_size(url, found, remote.sizes.get(rel))
        return found

    names = sorted(large)
    with ThreadPoolExecutor(max_workers=settings.connections) as pool:
        return dict(zip(names, pool.map(progress.carrying_notices(one), names), strict=True))


def check_size(url: str, found: RemoteFile, recorded: int | None) -> None:
    if recorded is not None and found.size != recorded:
        longer = "longer" if found.size > recorded else "shorter"
        raise PublisherError(
            f"is {found.size} bytes, {longer} than the {recorded} bytes its manifest records",
            url=url,
        )

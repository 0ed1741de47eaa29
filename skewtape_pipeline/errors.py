"""The exception tree of skewtape_pipeline.

Every error the package raises on purpose is a :class:`SkewtapeError`. Messages name the file,
the field or row, the value found (:func:`quoted`) and what was expected, so a user can act on one
line of stderr.
Raising one of these never leaves a half-written file behind: the code that raises has either not
touched the disk yet or rolls forward on the next run.
"""

from __future__ import annotations

import re
from collections.abc import Sized
from pathlib import Path


class SkewtapeError(Exception):
    """Base class of every deliberate error in skewtape_pipeline."""


QUOTED_CHARS = 40
"""Characters of an input's text value an error message quotes at most."""
PATH_CHARS = 4096
"""Characters of a path an error message quotes at most: no file system holds a longer one."""


def quoted(value: object, limit: int = QUOTED_CHARS) -> str:
    """``repr(value)`` for an error message; text longer than ``limit`` characters is quoted by
    its first ones and its length, any other value whose ``repr`` is longer than twice that by
    the start of its ``repr``, its type and size (an input's value can be megabytes long, an
    error is one line)."""
    if isinstance(value, str) and len(value) > limit:
        return f"{value[:limit]!r}... ({len(value)} characters)"
    text = repr(value)
    if isinstance(value, str) or len(text) <= 2 * limit:
        return text
    size = f"{len(value)} items" if isinstance(value, Sized) else f"{len(text)} characters"
    return f"{text[:limit]}... (a {type(value).__name__} of {size})"


def quoted_path(value: object) -> str:
    """:func:`quoted` for a path an input names: whole up to :data:`PATH_CHARS` characters."""
    return quoted(value, PATH_CHARS)


REASON_CHARS = 300
"""Characters of a library's error message an error message keeps at most (the library may
quote the input: a CSV line, the bytes of a file that is not CSV)."""
_CONTROL = re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f]")


def printable(text: str) -> str:
    """``text`` with each control character but the newline written as its escape (``\\x1b``):
    a terminal shown the raw character would obey it (clear the screen, retitle the window)."""
    return _CONTROL.sub(lambda match: f"\\x{ord(match.group()):02x}", text)


def reason(exc: BaseException) -> str:
    """A library's error message as part of one of ours: :func:`printable`, and a message
    longer than :data:`REASON_CHARS` characters kept by its start and its length."""
    text = str(exc)
    if len(text) <= REASON_CHARS:
        return printable(text)
    return f"{printable(text[:REASON_CHARS])}... ({len(text)} characters)"


# --- the mirror: deltas and snapshots -------------------------------------------------------


class DeltaRefusedError(SkewtapeError):
    """A delta was refused before anything was written. Subclasses say why.

    Parameters
    ----------
    message
        What is wrong and what was expected.
    path
        The delta file (or folder) the problem is in, when there is one: a local path, or a
        publisher's URL (kept as text: :func:`location`).
    field
        The manifest field or entry concerned, e.g. ``files[3].path``.
    """

    def __init__(self, message: str, *, path: Path | str | None = None, field: str | None = None):
        self.path = location(path) if path is not None else None
        self.field = field
        where = ", ".join(
            part
            for part in (f"{self.path}" if self.path else "", f"field {field}" if field else "")
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class ManifestError(DeltaRefusedError):
    """A manifest is missing a field, has a field of the wrong type or breaks the format's rules."""


class ChecksumLineError(ManifestError):
    """A line of a CHECKSUMS.sha256 file is not one ``sha256sum -c`` reads, or lists a path a
    second time. ``line`` is its 1-based number; the message names the file and the line."""

    def __init__(self, message: str, *, path: Path | str | None = None, line: int):
        self.line = line
        super().__init__(f"line {line} {message}", path=path)


class UnsafePathError(DeltaRefusedError):
    """A path leaves its folder, is absolute, has backslashes or a drive letter, or is a link."""


class ChecksumMismatchError(DeltaRefusedError):
    """A file's sha256 differs from the one its CHECKSUMS.sha256 line or manifest entry names."""


class ChangeFileError(DeltaRefusedError):
    """A ``changes/<table>.parquet`` file lacks ``op``/``row``, has an unknown op or null keys."""


class SnapshotMismatchError(SkewtapeError):
    """The snapshot folder holds neither the delta's parent nor its next snapshot."""


class VerificationError(SkewtapeError):
    """A snapshot does not match its CHECKSUMS.sha256 and manifest.

    ``problems`` lists every finding (one line each); the message shows the first few.
    ``snapshot`` is a local folder, or a publisher's URL (kept as text: :func:`location`).
    """

    def __init__(self, snapshot: Path | str, problems: list[str]):
        self.snapshot = location(snapshot)
        self.problems = list(problems)
        shown = "; ".join(self.problems[:5])
        more = f" (+{len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__(f"{self.snapshot} does not verify: {shown}{more}")


class SnapshotError(SkewtapeError):
    """A snapshot folder cannot be sealed or read: a Parquet file that does not open, a table
    without its key columns. The message names the file."""


class LocalStateError(SnapshotError):
    """A snapshot's local state folder (``.skewtape/``) holds a damaged file or is given an
    invalid update (e.g. a merged-table record for a path that is not a reference table)."""


class DeltaBuildError(SkewtapeError):
    """A delta cannot be built: the output folder is not empty, is a file or lies inside a
    snapshot; a table to ship whole holds locally merged bytes; rows cannot be compared."""


class LockHeldError(SkewtapeError):
    """Another process holds a lock this operation needs; the message names the lock file and
    what holds it (the operation, process id, host and since when, as the holder recorded)."""


class ApplyInProgressError(LockHeldError):
    """Another process holds the apply lock of this history folder."""


class LinkedStateFileError(SkewtapeError):
    """A lock file, journal, cache or audit log is a symbolic link. Refused, so that the link's
    target is never written through; nothing was changed."""


class MalformedJsonError(SkewtapeError):
    """A JSON file (or a JSON line) does not parse, or is nested too deep to parse; the message
    names the file (and the line). ``reason`` is what the parser found."""

    def __init__(self, source: Path | str, reason: str, *, line: int | None = None):
        self.source, self.reason, self.line = source, reason, line
        where = f"{source}, line {line}" if line is not None else f"{source}"
        super().__init__(f"{where}: is not valid JSON ({reason})")


class MissingPathError(SkewtapeError):
    """A folder or file a command was given does not exist; nothing was created."""


class UnreadableInputError(SkewtapeError, OSError):
    """A folder or file of the mirror exists but cannot be read: :class:`UnreadableFolderError`
    or :class:`UnreadableFileError`. The message names it, the reason and what could not be
    decided without it; nothing was written. An OS error: the CLI exits 1, a Dagster run fails
    with it (retryable), a sensor over the mirror's months skips its tick keeping its cursor."""


class UnreadableFolderError(UnreadableInputError):
    """A folder of the mirror exists but cannot be read (listed or looked into): a permission
    refused, a file where the folder should be, a link loop, an I/O error. The message names the
    folder, the operating system's reason (:func:`os_reason`) and what could not be decided
    without it, never taking the folder for an empty or missing one; nothing was written. An
    OS error: the CLI exits 1, a Dagster run fails with it (retryable)."""


class UnreadableFileError(UnreadableInputError):
    """A file of an applied snapshot (its manifest, its CHECKSUMS.sha256, a fills file) cannot
    be read: a permission refused, a folder or a dangling or looping link where the file should
    be, an I/O error, a fills file DuckDB cannot open as Parquet. The message names the file,
    the reason (the operating system's, or DuckDB's) and what could not be decided without it;
    nothing was written. An OS error: the CLI exits 1."""


class UnreadableSealFileError(ManifestError, UnreadableFileError):
    """A snapshot's manifest.json or CHECKSUMS.sha256 exists but cannot be read (a permission
    refused, a folder of that name, an I/O error): a :class:`ManifestError`, as any manifest a
    snapshot cannot be taken from, and an :class:`UnreadableFileError` (an OS error, exit 1)."""


def os_reason(exc: OSError) -> str:
    """The operating system's words for ``exc`` (``Permission denied``), or its message when it
    has none."""
    return exc.strerror or reason(exc)


class StorageError(SkewtapeError, OSError):
    """The operating system failed a write (a full disk, an I/O error) in a library that does
    not raise an :class:`OSError` itself (DuckDB); names the file. An OS error: the CLI exits 1."""


class DiskFullError(StorageError):
    """The disk filled up (no space left on the device, or the quota) while a command was
    writing: it stopped at once, naming the folder and what it was writing; what it had not
    finished was not published (a rerun once there is space resumes or starts over)."""


class WrongFolderError(SkewtapeError):
    """A folder given as a snapshot, a delta, a history folder or a deltas folder is another of
    these (arguments swapped, a month's folder for the folder of months, or the reverse); the
    message names what it is and what to give instead. Nothing was written."""


class ChainError(SkewtapeError):
    """A chain of deltas has a gap, or a delta's parent is not the current snapshot."""


class AuditLogError(SkewtapeError):
    """The audit log is malformed or its hash chain is broken (a line was altered or removed)."""


# --- the tick archive ------------------------------------------------------------------------


class TickError(SkewtapeError):
    """Base class of tick archive errors."""


class ArchiveBusyError(LockHeldError, TickError):
    """Another writer (compacting, re-tiering, pruning, withdrawing, removing, rebuilding the
    catalog, recording a version, pruning versions) holds the archive's one lock
    (``ticks.archive.core.archive_lock``) for longer than the refused writer waits."""


class TickValidationError(TickError):
    """A batch of ticks breaks a validation rule; names the row, the field and the value.

    Parameters
    ----------
    message
        What is wrong and what was expected.
    row
        0-based index of the offending row in the batch as given, when there is one.
    field
        The column concerned (``timestamp_nanos``, ``price``, ``quantity``, ``side`` ...).
    """

    def __init__(self, message: str, *, row: int | None = None, field: str | None = None):
        self.detail = message
        self.row = row
        self.field = field
        where = ", ".join(
            part
            for part in (f"row {row}" if row is not None else "", f"field {field}" if field else "")
            if part
        )
        super().__init__(f"{where}: {message}" if where else message)


class PrecisionLossError(TickValidationError):
    """A price or quantity has more decimals than the configured scale and loss was not allowed."""


class SourceLabelError(TickError):
    """A tick file does not say which symbol or session its ticks belong to (e.g. a LOBSTER
    file not named by LOBSTER's convention, and no option gives them), or its name and the
    options disagree. The message names the file and what to pass."""


class RoundTripError(TickError):
    """A written archive file did not read back equal to the ticks that were written."""


class TickFormatError(TickError):
    """A tick archive file is malformed: a Parquet file that is not a tick file of this archive
    (metadata, types, digest), a catalog, hot-file record or reports table that does not parse,
    an S3 listing that cannot be read as the tier's files. The message names the file (and the
    line or field)."""


class DamagedFileError(TickFormatError):
    """An archive file is damaged: its Parquet footer does not decode, a page fails its
    checksum, or its size or sha256 differs from the catalog's record (for a file a version
    keeps, from the sha256 its content name records; for a version record, a tag or an entry
    of the versions' index, from the sha256 it carries). ``path`` names it."""

    def __init__(self, message: str, *, path: Path | str | object):
        self.path = location(path)
        super().__init__(f"{self.path}: {message}")


class CatalogMismatchError(TickFormatError):
    """The archive's catalog is missing, unreadable, or does not account for the files on disk;
    writers refuse to remove or rewrite anything. ``paths`` names the files concerned; the
    message says how to repair (rebuilding the catalog from the files)."""

    def __init__(self, message: str, *, paths: list[Path | object] | None = None):
        self.paths = [location(p) for p in paths or []]
        super().__init__(message)


class ObjectStoreError(TickError):
    """The object store of a tier root (``s3://``) cannot be used: the endpoint is unreachable,
    the bucket is missing or the credentials are refused. ``uri`` names it; nothing changed."""

    def __init__(self, message: str, *, uri: str):
        self.uri = uri
        super().__init__(message)


def location(path: Path | str | object) -> Path | str:
    """A file's location as errors keep it: a Path for a local file, the URI text for an
    object or a publisher's file (``s3://bucket/key``, ``https://host/...``, which a Path
    would fold to ``s3:/``, ``https:/``); anything else by its text."""
    text = str(path)
    return text if "://" in text else Path(text)


class ArchiveVerificationError(TickError):
    """A tick archive does not verify against its catalog (``verify-archive``).

    ``problems`` lists every finding (one line each, naming the file); the message shows the
    first few.
    """

    def __init__(self, archive: Path | str, problems: list[str]):
        self.archive = Path(archive)
        self.problems = list(problems)
        shown = "; ".join(self.problems[:5])
        more = f" (+{len(self.problems) - 5} more)" if len(self.problems) > 5 else ""
        super().__init__(f"{self.archive} does not verify: {shown}{more}")


class WriteOnceError(TickError):
    """An archive in ``books_and_records`` mode refused to delete or overwrite a file.

    Parameters
    ----------
    message
        What was attempted and why it is refused.
    path
        The archive file the attempt concerned.
    operation
        ``delete``, ``overwrite`` or ``disable`` (turning the mode off).
    """

    def __init__(
        self, message: str, *, path: Path | str | object | None = None, operation: str = ""
    ):
        self.path = location(path) if path is not None else None
        self.operation = operation
        super().__init__(f"{self.path}: {message}" if self.path else message)


class ConfigError(SkewtapeError):
    """An invalid configuration value; the message names the key, the value and what is allowed.

    Raised when options are built, never halfway through a run.
    """


def checked_flag(value: object, name: str) -> bool:
    """``value`` when it is True or False; else ConfigError naming ``name`` (a truthy "no"
    or 0.5 from a settings file would otherwise switch the behaviour on)."""
    if not isinstance(value, bool):
        raise ConfigError(f"{name} = {value!r}: expected True or False")
    return value


class NotAnArchiveError(ConfigError):
    """A folder given as a tick archive root is none (missing, a file, a tier folder, or a
    folder holding other files); the message names it."""


class UnknownSymbolError(ConfigError):
    """A symbol asked for that the tick archive does not hold (at the version read); the
    message names it and the nearest symbols it holds (``nearest``)."""

    def __init__(self, message: str, *, symbol: str, nearest: list[str]):
        self.symbol = symbol
        self.nearest = nearest
        super().__init__(message)


class ArchiveSchemaError(ConfigError):
    """A batch needs a finer timestamp unit or a larger scale than the archive's one schema
    holds; refused before anything is written (storing it would round).

    ``field`` is ``timestamp_unit``, ``price_scale`` or ``quantity_scale``; ``needed`` what the
    batch needs, ``archive`` what the archive records.
    """

    def __init__(self, message: str, *, field: str, needed: object, archive: object):
        self.field = field
        self.needed = needed
        self.archive = archive
        super().__init__(message)


class VersionError(ConfigError):
    """A version, time or tag that names no kept version of a tick archive (unknown, pruned,
    before the first version), a tag that pins another version already, or a damaged or
    missing version record, or a missing snapshot (a snapshot, record, tag or index entry
    whose bytes are not the ones its sha256 records is a :class:`DamagedFileError`); the
    message names the archive and what was asked for, or the file."""


# --- the sample publisher ----------------------------------------------------------------------


class SampleRootError(SkewtapeError):
    """The sample publisher refused its root: it already holds a history or deltas (or the
    snapshots folder already holds one of the months). Nothing was written."""


# --- following the publisher -------------------------------------------------------------------


class FetchError(SkewtapeError):
    """Fetching from a publisher failed. ``url`` names the remote file (or the source) concerned;
    nothing verified was changed on disk and no partial month appeared."""

    def __init__(self, message: str, *, url: str):
        self.url = url
        super().__init__(f"{url}: {message}")


class PublisherError(FetchError):
    """The publisher served something the published format does not allow: an HTML page for a
    data file, a redirect to another scheme or host, a file longer than its listed size or
    without a length, a file its CHECKSUMS.sha256 lists but that is not there, a delta whose
    parent is not the newest local snapshot. The month's staging folder is removed."""


class MissingBucketError(FetchError):
    """An ``s3://`` source's bucket does not exist on its S3 server (a mistyped bucket or
    endpoint): refused before anything is written (exit 2), never taken for a publisher that
    has published nothing. ``url`` names the source, redacted."""


class TransferError(FetchError, OSError):
    """The network failed after the last retry (a refused or reset connection, a timeout, a 5xx
    answer), or the server answered with an unexpected status. An operating-system error (exit
    1): a rerun resumes what was already downloaded."""


class FetchDiskError(StorageError):
    """Writing a fetched file failed on the local disk (no space left, a quota, an I/O error):
    the fetch stopped at once, without retrying, and removed the month's staging folder; the
    message names the folder and the file it was writing. An OS error: the CLI exits 1."""


class TLSFailureError(TransferError):
    """The TLS handshake with an ``https://`` source failed (an untrusted certificate, a wrong
    host name, no common protocol)."""

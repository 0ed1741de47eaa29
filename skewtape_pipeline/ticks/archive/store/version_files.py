"""The files of a tick archive's version log, under ``<archive root>/_skewtape_versions/``
(what they hold and why: the notes of ``versions``): where each lives, and reading one (the
index, a version's record, its manifest's chain of deltas, its catalog snapshot, its state, the
tags).

Every file read to answer a version is checked before it is believed: the content-named ones
(manifests, catalog snapshots, kept hot files) against the sha256 their names record; a record
and a tag against the sha256 it carries (:data:`SEAL_KEY`, :func:`sealed_json`); an index entry
against its sum in ``index.sums`` (:func:`entry_sum`). A changed byte is a DamagedFileError
naming the file and the repair. Files written before these sums (a record or tag without
:data:`SEAL_KEY`, index entries past the end of ``index.sums``) are read as before. An index
that lost its end, or sums deleted or cut, is refused too (:func:`checked_count`,
:func:`sums_cut`): the number of versions is the index's length.

The functions here take the archive root: they are the store's own, called by
``versions.VersionLog`` (the log an ``ArchiveCore`` builds once), by ``version_recording`` (the
writing half) and by the store's other modules.
"""

from __future__ import annotations

import functools
import hashlib
import io
import json
import os
import re
import struct
from collections.abc import Callable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from datetime import UTC, date, datetime
from pathlib import Path
from typing import Any, TypeVar

import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline import fsio
from skewtape_pipeline.arrow_memory import owned_reader
from skewtape_pipeline.errors import (
    ConfigError,
    DamagedFileError,
    TickFormatError,
    VersionError,
    quoted,
)
from skewtape_pipeline.hashing import FileStamp, ParsedByStamp, sha256_bytes
from skewtape_pipeline.storage import TierFile
from skewtape_pipeline.ticks.archive.store.catalog import (
    Catalog,
    SymbolDayKey,
    parse_catalog,
)
from skewtape_pipeline.ticks.archive.store.hot_index import IndexMark
from skewtape_pipeline.ticks.archive.store.layout import encode_symbol
from skewtape_pipeline.ticks.archive.store.placement import ArchiveState, HotFile

VERSIONS_DIR = "_skewtape_versions"
INDEX_FILE = "index.bin"
SUFFIX = ".pq"
"""The version store's Parquet files end so, not ``.parquet``: a reader globbing the archive
root's ``**/*.parquet`` (the hot tier's plain layout) never meets them."""
EVENT_VERSION = "tick-archive-version"
EVENT_TAG = "tick-archive-tag"
INDEX_ENTRY = struct.Struct(">q")
"""An entry of the index: a version's ``time_ns``, 8 bytes big-endian."""
SUMS_FILE = "index.sums"
"""Beside the index, one 8-byte sum per entry, in number order (:func:`entry_sum`); written
before the entry it checks. An archive written before holds none, or fewer than its entries: the
entries past its end are read unchecked, as before, until the next version is recorded (which
sums every entry it finds unsummed)."""
SUM_SIZE = 8
"""The size of a sum in :data:`SUMS_FILE` (:func:`entry_sum`)."""
SEAL_KEY = "sha256"
"""The field of a version record and a tag holding the sha256 of the rest of it
(:func:`sealed_json`)."""
RECORD_FIELDS = frozenset(
    {"version", "time", "time_ns", "operation", "catalog", "manifest", "generation", "changed"}
    | {"sources", "hot_index"}
)
"""The fields of a version record written before records carried :data:`SEAL_KEY`."""
TAG_FIELDS = frozenset({"tag", "version", "time"})
"""The fields of a tag written before tags carried :data:`SEAL_KEY`."""
_TAG_NAME = re.compile(r"[A-Za-z][A-Za-z0-9._-]{0,99}")
MANIFEST_SCHEMA = pa.schema(
    [
        pa.field("symbol", pa.string(), nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("sha256", pa.string(), nullable=False),
        pa.field("size", pa.int64(), nullable=False),
    ]
)
MANIFEST_BASE_KEY = "skewtape_manifest_base"
"""The manifest's key-value metadata naming what it is a delta of: ``[base sha256 or "",
depth]``."""
MAX_DELTA_DEPTH = 15
"""A manifest is a delta of the previous version's at most this many times in a row; then the
whole list is written again (an as-of read applies at most this many small deltas)."""


@dataclass(frozen=True)
class HotEntry:
    """One live hot file of a version: its symbol-day and content (sha256, size)."""

    symbol: str
    date: date
    sha256: str
    size: int

    @property
    def key(self) -> SymbolDayKey:
        return (self.symbol, self.date)


@dataclass(frozen=True)
class Version:
    """One version's record (see the notes of ``versions``)."""

    version: int
    time: datetime
    time_ns: int
    operation: str
    catalog: str | None
    manifest: str
    generation: int
    changed: list[SymbolDayKey]
    sources: list[tuple[str, date, str]]
    hot_index: IndexMark | None = None
    """Where the hot index stood when the version was taken (the next version reads the lines
    after it: ``hot_index.HotIndex.changes_since``); None for versions recorded before."""

    def to_dict(self) -> dict[str, Any]:
        """The record as JSON-ready values (dates as ISO text)."""
        return {
            "hot_index": None if self.hot_index is None else self.hot_index.to_list(),
            "version": self.version,
            "time": self.time.isoformat().replace("+00:00", "Z"),
            "time_ns": self.time_ns,
            "operation": self.operation,
            "catalog": self.catalog,
            "manifest": self.manifest,
            "generation": self.generation,
            "changed": [[s, d.isoformat()] for s, d in self.changed],
            "sources": [[s, d.isoformat(), b] for s, d, b in self.sources],
        }


# --- paths --------------------------------------------------------------------------------------


def versions_dir(archive_root: Path) -> Path:
    """``<archive root>/_skewtape_versions``."""
    return Path(archive_root) / VERSIONS_DIR


def record_path(archive_root: Path, number: int) -> Path:
    """Where version ``number``'s record is: ``records/<number, 10 digits>.json``."""
    return versions_dir(archive_root) / "records" / f"{number:010d}.json"


def catalog_snapshot_path(archive_root: Path, digest: str) -> Path:
    """Where the catalog snapshot of sha256 ``digest`` is: ``catalogs/<digest>.pq``."""
    return versions_dir(archive_root) / "catalogs" / f"{digest}{SUFFIX}"


def manifest_path(archive_root: Path, digest: str) -> Path:
    """Where the manifest of sha256 ``digest`` is: ``manifests/<digest>.pq``."""
    return versions_dir(archive_root) / "manifests" / f"{digest}{SUFFIX}"


def hot_blobs_dir(archive_root: Path) -> Path:
    """The folder of the hot files versions keep under their content names (``hot/``)."""
    return versions_dir(archive_root) / "hot"


def snapshot_dirs(archive_root: Path) -> list[Path]:
    """The folders of the content-named files versions read (``manifests/``, ``catalogs/``,
    ``hot/``), each file in them named ``*`` + :data:`SUFFIX`."""
    store = versions_dir(archive_root)
    return [store / "manifests", store / "catalogs", hot_blobs_dir(archive_root)]


def hot_blob(archive_root: Path, entry: HotEntry) -> Path:
    """Where a version keeps a hot file: Hive folders as the hot tier's, named by content."""
    return _blob(str(hot_blobs_dir(archive_root)), entry)


def _blob(base: str, entry: HotEntry) -> Path:
    """:func:`hot_blob` below the folder ``base`` (one string built, one Path)."""
    day = entry.date
    return Path(
        f"{base}/symbol={_folder_name(entry.symbol)}/year={day.year:04d}"
        f"/month={day.month:02d}/date={day.isoformat()}/{entry.sha256}{SUFFIX}"
    )


@functools.lru_cache(maxsize=4096)
def _folder_name(symbol: str) -> str:
    return encode_symbol(symbol)


def tag_path(root: Path, name: str) -> Path:
    """Where the tag ``name`` is: ``tags/<name>.json``."""
    return versions_dir(root) / "tags" / f"{name}.json"


# --- the index ----------------------------------------------------------------------------------


def version_count(archive_root: Path) -> int:
    """How many versions were ever recorded (pruned ones included): the latest number, as the
    index's length gives it, unchecked (readers and writers take :func:`checked_count`)."""
    try:
        return os.stat(versions_dir(archive_root) / INDEX_FILE).st_size // INDEX_ENTRY.size
    except FileNotFoundError:
        return 0


def checked_count(archive_root: Path, *, whole: bool = False) -> int:
    """:func:`version_count`, once nothing shows the index lost its end (:func:`index_cut`;
    ``whole``: every record's and tag's number too, what a writer checks). A finding is
    checked against the index read again: a writer appending meanwhile (a sum, then a record
    of the next number, are written only after the entry before them) moves the count on."""
    count = version_count(archive_root)
    while (cut := index_cut(archive_root, count, whole=whole)) is not None:
        count, before = version_count(archive_root), count
        if count == before:
            raise cut
    return count


def index_cut(archive_root: Path, count: int, *, whole: bool = False) -> DamagedFileError | None:
    """The refusal naming the index when the log holds a version past its ``count`` entries
    (it lost its end: a partial copy, an older index restored), else None. Two ``stat``:
    :data:`SUMS_FILE` holding more than one sum past the end, or exactly one (a crash between
    version ``count + 1``'s sum and its entry leaves it) without that version's record (written
    before the sum); the record of version ``count + 2`` (a crash before the entry leaves the
    record of ``count + 1`` alone, which the next version overwrites). ``whole`` (writers,
    ``verify-archive``): every record's name and every tag's version (a tag pins an indexed
    version) too. Pruned records (old numbers) are no finding."""
    root = Path(archive_root)
    sums = _sums_held(root)
    if sums > count + 1:
        return _cut(root, count, f"{SUMS_FILE} holds {sums} sums")
    if sums == count + 1 and not record_path(root, count + 1).exists():
        return _cut(root, count, f"{SUMS_FILE} holds version {count + 1}'s sum, not its record")
    later = _record_numbers(versions_dir(root)) if whole else [count + 2]
    for number in later:
        if number > count + 1 and record_path(root, number).exists():
            return _cut(root, count, f"records/ holds version {number}'s record")
    for name in tag_names(root) if whole else []:
        try:
            pinned = read_tag(root, name)
        except (ConfigError, DamagedFileError):  # named by the tags' own check
            continue
        if pinned > count:
            return _cut(root, count, f"the tag {name!r} pins version {pinned}")
    return None


def _record_numbers(root: Path) -> list[int]:
    """The numbers of the records in ``records/`` (their files' names), highest first."""
    try:
        found = (re.fullmatch(r"([0-9]{1,18})\.json", n) for n in os.listdir(root / "records"))
    except FileNotFoundError:
        return []
    return sorted((int(m[1]) for m in found if m is not None), reverse=True)


def _cut(root: Path, count: int, found: str) -> DamagedFileError:
    return DamagedFileError(
        f"holds {count} entr{'y' if count == 1 else 'ies'}, but {found}: the index lost its "
        "end (a partial copy, an older index restored), so the log looks shorter than it is: "
        "a look-up would answer another version, and the next version recorded would "
        f"overwrite a later one's record; refused. Restore the folder {VERSIONS_DIR}/ from a "
        "copy of the archive (`verify-archive` checks it)",
        path=versions_dir(root) / INDEX_FILE,
    )


def sums_cut(archive_root: Path, count: int, summed: int) -> DamagedFileError | None:
    """The refusal naming :data:`SUMS_FILE` when it holds ``summed`` sums, fewer than the
    index's ``count`` entries, though the latest record carries :data:`SEAL_KEY` (the version
    that wrote it summed every entry; no writer removes a sum): it was deleted or cut. None
    otherwise (written before the sums). Reads the latest record only when sums are short."""
    if summed >= count or not _sealed(record_path(Path(archive_root), count)):
        return None
    return DamagedFileError(
        f"holds {summed} sum(s) for the {count} entries of {INDEX_FILE}, though version "
        f"{count}'s record was written with them (it carries its {SEAL_KEY}): it was deleted "
        "or lost its end, so the entries past it would be read unchecked; refused. Restore "
        f"the folder {VERSIONS_DIR}/ from a copy of the archive (`verify-archive` checks it)",
        path=versions_dir(archive_root) / SUMS_FILE,
    )


def _sealed(path: Path) -> bool:
    """True when the record ``path`` is a JSON object carrying :data:`SEAL_KEY`."""
    raw = fsio.read_state_bytes(path)
    try:
        body = None if raw is None else fsio.load_json(raw, path, error=VersionError)
    except VersionError:  # unreadable: named by the records' own check
        return False
    return isinstance(body, dict) and SEAL_KEY in body


def writable_count(archive_root: Path) -> int:
    """:func:`checked_count` (``whole``), and sums cut refused (:func:`sums_cut`): what a
    writer of a version checks (it would sum the unsummed entries as it finds them)."""
    count = checked_count(archive_root, whole=True)
    cut = sums_cut(archive_root, count, _sums_held(archive_root))
    if cut is not None:
        raise cut
    return count


def _sums_held(root: Path) -> int:
    try:
        return os.stat(versions_dir(root) / SUMS_FILE).st_size // SUM_SIZE
    except FileNotFoundError:
        return 0


def entry_sum(number: int, time_ns: int) -> bytes:
    """The sum of version ``number``'s index entry ``time_ns`` in :data:`SUMS_FILE`: the first
    8 bytes of the sha256 of the two, 8 bytes big-endian each (an entry moved to another
    number fails its sum too)."""
    return hashlib.sha256(INDEX_ENTRY.pack(number) + INDEX_ENTRY.pack(time_ns)).digest()[:8]


@contextmanager
def indexed_times(archive_root: Path) -> Iterator[Callable[[int], int]]:
    """Within the block, a function giving version ``number``'s ``time_ns`` as the index holds
    it (one seek, and one in :data:`SUMS_FILE` to check it).

    The function raises DamagedFileError naming the index when the entry is not the one its
    sum records (one of the two files changed after it was written); an entry past the sums'
    end (written before them) is read unchecked. Entering the block raises DamagedFileError
    naming :data:`SUMS_FILE` when it was deleted or cut short (:func:`sums_cut`).
    """
    store = versions_dir(archive_root)
    with ExitStack() as stack:
        handle = stack.enter_context(open(store / INDEX_FILE, "rb"))
        try:
            sums: io.BufferedReader | None = stack.enter_context(open(store / SUMS_FILE, "rb"))
        except FileNotFoundError:
            sums = None
        count = os.fstat(handle.fileno()).st_size // INDEX_ENTRY.size  # before the sums
        summed = 0 if sums is None else os.fstat(sums.fileno()).st_size // SUM_SIZE
        cut = sums_cut(archive_root, count, summed)
        if cut is not None:
            raise cut

        def time_of(number: int) -> int:
            handle.seek((number - 1) * INDEX_ENTRY.size)
            time_ns = INDEX_ENTRY.unpack(handle.read(INDEX_ENTRY.size))[0]
            if sums is not None and number <= summed:
                sums.seek((number - 1) * 8)
                if sums.read(8) != entry_sum(number, time_ns):
                    raise _damaged_index(archive_root, number)
            return time_ns

        yield time_of


def _damaged_index(archive_root: Path, number: int) -> DamagedFileError:
    return DamagedFileError(
        f"entry {number} (version {number}'s time) is not the one its sum in {SUMS_FILE} "
        "records: one of the two changed after it was written, so a version looked up by time "
        "could be another. Read by version number or tag meanwhile (they do not read the "
        f"index's entries); restore {INDEX_FILE} and {SUMS_FILE} of {VERSIONS_DIR}/ from a copy",
        path=versions_dir(archive_root) / INDEX_FILE,
    )


def index_problems(archive_root: Path) -> list[str]:
    """One finding when the index lost its end (:func:`index_cut`, ``whole``) or its sums
    were cut (:func:`sums_cut`), one for each entry that is not the one its sum records
    (:func:`indexed_times`); none for an archive without versions."""
    try:
        count, found = checked_count(archive_root, whole=True), []
    except DamagedFileError as exc:
        count, found = version_count(archive_root), [str(exc)]
    if count:
        try:
            with indexed_times(archive_root) as time_of:
                for number in range(1, count + 1):
                    try:
                        time_of(number)
                    except DamagedFileError as exc:
                        found.append(str(exc))
        except DamagedFileError as exc:  # the sums cut
            found.append(str(exc))
    return found


def version_at(archive_root: Path, when: datetime) -> int | None:
    """The number of the latest version committed at or before ``when`` (naive: UTC), None
    when there is none: a binary search over the index (O(log versions) reads of 8 bytes, each
    checked against its sum: :func:`indexed_times`; a search reads only entries checked, so it
    finds the version an intact index gives)."""
    wanted = utc_ns(when)
    count = checked_count(archive_root)
    if count == 0:
        return None
    with indexed_times(archive_root) as time_of:
        low, high = 0, count  # versions 1..low are at or before wanted
        while low < high:
            middle = (low + high + 1) // 2
            if time_of(middle) <= wanted:
                low = middle
            else:
                high = middle - 1
    return low or None


def utc_ns(when: datetime) -> int:
    """``when`` (naive: UTC) in ns since the epoch, to the microsecond."""
    moment = when.replace(tzinfo=UTC) if when.tzinfo is None else when
    return int(moment.timestamp()) * 1_000_000_000 + moment.microsecond * 1000


# --- records ------------------------------------------------------------------------------------


def read_version(archive_root: Path, number: int) -> Version:
    """The record of version ``number`` (one file read), checked (:func:`read_record`).

    Raises VersionError when there is no such version, or when its record is gone (pruned,
    or missing from a damaged or partial copy: the message names the file); as
    :func:`read_record` when it is damaged; DamagedFileError naming the index when it lost
    its end (:func:`checked_count`, and a record asked for found past that end).
    """
    count = checked_count(archive_root)
    if number > count + 1 and record_path(Path(archive_root), number).exists():
        count = checked_count(archive_root)  # as :func:`checked_count`: read again
        if number > count + 1:
            raise _cut(Path(archive_root), count, f"records/ holds version {number}'s record")
    if not 1 <= number <= count:
        raise VersionError(
            f"{archive_root}: version {number}: no such version (the archive has {count})"
        )
    path = record_path(Path(archive_root), number)
    raw = fsio.read_state_bytes(path)
    if raw is None:
        raise VersionError(
            f"{archive_root}: version {number} was pruned or its record is missing ({path}: "
            "prune-versions removes it; a copy of the archive may also have left it out)"
        )
    return read_record(raw, path, number)


_RECORD_REPAIR = (
    "restore it from a copy of the archive (the other versions still read; verify-archive "
    "checks every record)"
)


def read_record(raw: bytes, path: Path, number: int) -> Version:
    """Version ``number``'s record from the bytes ``raw`` of its file ``path``, once they are
    the ones written (:func:`unsealed_json`) and name that version.

    Raises VersionError when they do not parse as a record, DamagedFileError naming the file
    when they are not the bytes its sha256 records, or name another version.
    """
    body = unsealed_json(raw, path, RECORD_FIELDS, _RECORD_REPAIR)
    try:
        version = Version(
            version=body["version"],
            time=datetime.fromisoformat(body["time"].replace("Z", "+00:00")),
            time_ns=body["time_ns"],
            operation=body["operation"],
            catalog=body["catalog"],
            manifest=body["manifest"],
            generation=body["generation"],
            changed=[(s, date.fromisoformat(d)) for s, d in body["changed"]],
            sources=[(s, date.fromisoformat(d), b) for s, d, b in body["sources"]],
            hot_index=IndexMark.from_list(body.get("hot_index")),
        )
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise VersionError(f"{path}: not a version record ({exc!r}); {_RECORD_REPAIR}") from None
    if version.version != number:
        raise DamagedFileError(
            f"the record of version {version.version}, in version {number}'s place; "
            f"{_RECORD_REPAIR}",
            path=path,
        )
    return version


def list_versions(archive_root: Path) -> list[Version]:
    """The kept versions, oldest first (reads every kept record); raises as :func:`read_record`
    for a damaged one, DamagedFileError naming the index when it lost its end
    (:func:`checked_count`, ``whole``: the names of the records are read anyway)."""
    root = Path(archive_root)
    out = []
    for number in range(1, checked_count(root, whole=True) + 1):
        path = record_path(root, number)
        raw = fsio.read_state_bytes(path)
        if raw is not None:
            out.append(read_record(raw, path, number))
    return out


# --- records and tags carry their sha256 --------------------------------------------------------


def sealed_json(body: Mapping[str, Any]) -> bytes:
    """The bytes a version record or a tag ``body`` (JSON-ready, without :data:`SEAL_KEY`) is
    written as: its JSON (keys sorted, one per line) with :data:`SEAL_KEY`, the sha256 of the
    JSON of ``body`` alone, among its keys. :func:`unsealed_json` reads it back."""
    return _json_bytes({**body, SEAL_KEY: sha256_bytes(_json_bytes(body))})


def _json_bytes(body: Mapping[str, Any]) -> bytes:
    return (json.dumps(body, sort_keys=True, indent=1) + "\n").encode()


def unsealed_json(raw: bytes, path: Path, old_fields: frozenset[str], repair: str) -> Any:
    """The JSON value of the record or tag bytes ``raw`` (of the file ``path``), without its
    :data:`SEAL_KEY`, once ``raw`` are the very bytes :func:`sealed_json` writes for it (any
    byte changed since, in its fields, its sha256 or its layout, is refused). A JSON object
    without :data:`SEAL_KEY` (written before) is taken as it is when its fields are among
    ``old_fields``.

    Raises VersionError (ending with ``repair``, what to do) when ``raw`` is not JSON,
    DamagedFileError naming ``path`` (and ``repair``) when it is not the bytes written.
    """
    body = fsio.load_json(raw, path, error=lambda message: VersionError(f"{message}; {repair}"))
    if not isinstance(body, dict):
        return body
    if SEAL_KEY not in body:
        unknown = sorted(set(body) - old_fields)
        if not unknown:
            return body
        found = f"field {unknown[0]!r}, which no record without its {SEAL_KEY} holds"
    else:
        recorded = body.pop(SEAL_KEY)
        if sealed_json(body) == raw:
            return body
        found = f"not the bytes its {SEAL_KEY} ({recorded!r}) records"
    raise DamagedFileError(f"{found}: it changed after it was written; {repair}", path=path)


def latest_version(archive_root: Path) -> Version | None:
    """The latest version (never pruned), None before the first; raises as
    :func:`read_version`."""
    count = checked_count(archive_root)
    return read_version(archive_root, count) if count else None


# --- reading a version --------------------------------------------------------------------------


def read_manifest(archive_root: Path, version: Version) -> list[HotEntry]:
    """The live hot files of ``version``, by symbol-day (its manifest's chain of deltas, at most
    :data:`MAX_DELTA_DEPTH` + 1 small files, applied to the whole list it starts from).

    Raises VersionError when a manifest is missing, DamagedFileError naming one that is not the
    bytes its name records or whose chain is not one the format writes (:func:`manifest_chain`).
    """
    chain = manifest_chain(archive_root, version.manifest)
    entries: dict[SymbolDayKey, HotEntry] = {}
    for digest in reversed(chain):
        for entry in manifest_rows(read_manifest_table(archive_root, digest)):
            if entry.size < 0:
                entries.pop(entry.key, None)
            else:
                entries[entry.key] = entry
    return [entries[key] for key in sorted(entries)]


def manifest_chain(archive_root: Path, digest: str) -> list[str]:
    """The manifest ``digest`` and the ones its deltas rest on, newest first, each read checked
    against its name: at most :data:`MAX_DELTA_DEPTH` + 1, as the format writes them (a delta
    1 to :data:`MAX_DELTA_DEPTH` deep rests on one a level less deep, a whole list, depth 0,
    on none).

    Raises DamagedFileError naming a manifest whose header breaks that (a chain that would
    loop or run longer), and as :func:`read_manifest_table`.
    """
    chain = [digest]
    base, depth = manifest_header(archive_root, digest)
    while True:
        if not 0 <= depth <= MAX_DELTA_DEPTH or (depth == 0) != (base == ""):
            raise _off_chain(archive_root, chain[-1], f"a delta of {base or 'none'} {depth} deep")
        if not base:
            return chain
        chain.append(base)
        base, below = manifest_header(archive_root, base)
        if below != depth - 1:
            raise _off_chain(archive_root, chain[-2], f"{depth} deep on one {below} deep")
        depth = below


def _off_chain(archive_root: Path, digest: str, found: str) -> DamagedFileError:
    return DamagedFileError(
        f"a version's manifest, {found}: the format writes deltas 1 to {MAX_DELTA_DEPTH} deep, "
        "each on one a level less deep, down to a whole list (0 deep); restore the version "
        "files from a copy",
        path=manifest_path(Path(archive_root), digest),
    )


def read_manifest_table(archive_root: Path, digest: str) -> pa.Table:
    """The manifest ``digest`` (one file), read once its bytes are the ones its name records;
    the last few read are kept in this process while their file's stamp holds
    (:func:`read_snapshot`).

    Raises VersionError when it is missing, DamagedFileError naming it when its bytes are not
    the ones its name records or do not read as a manifest.
    """
    path = manifest_path(Path(archive_root), digest)
    return read_snapshot(_MANIFESTS, path, _parse_manifest, "a version's manifest is missing")


def _parse_manifest(path: Path, raw: bytes) -> pa.Table:
    try:
        return pq.read_table(owned_reader(raw))
    except (OSError, pa.ArrowException) as exc:
        raise TickFormatError(f"{path}: not a Parquet manifest ({exc})") from None


def manifest_header(archive_root: Path, digest: str) -> tuple[str, int]:
    """(the manifest this one is a delta of, "" for a whole list; its depth); raises as
    :func:`read_manifest_table`."""
    table = read_manifest_table(archive_root, digest)
    path = manifest_path(Path(archive_root), digest)
    try:
        metadata = table.schema.metadata or {}
        base, depth = fsio.load_json(metadata[MANIFEST_BASE_KEY.encode()], path, error=VersionError)
        if not isinstance(base, str) or not isinstance(depth, int):
            raise TypeError(f"[{base!r}, {depth!r}]")
    except (KeyError, ValueError, TypeError, VersionError) as exc:
        raise DamagedFileError(
            f"a version's manifest without its header {MANIFEST_BASE_KEY} ({exc!r})", path=path
        ) from None
    return base, depth


def manifest_rows(table: pa.Table) -> list[HotEntry]:
    """The rows of a manifest ``table`` as entries (``size`` -1: a symbol-day gone)."""
    return [
        HotEntry(s, d, h, n)
        for s, d, h, n in zip(
            *(table[name].to_pylist() for name in MANIFEST_SCHEMA.names), strict=True
        )
    ]


_T = TypeVar("_T")
_CATALOGS: ParsedByStamp[Catalog] = ParsedByStamp(keep=4)
"""Catalog snapshots parsed in this process, by path, while their file's stamp holds."""
_MANIFESTS: ParsedByStamp[pa.Table] = ParsedByStamp(keep=2 * (MAX_DELTA_DEPTH + 1))
"""Manifests read in this process, likewise (two chains' worth)."""


def version_catalog(root: Path, version: Version) -> Catalog:
    """The catalog ``version`` read (its snapshot; empty when it had none), parsed once its
    bytes are the ones its name records; the last few parsed are kept in this process while
    their file's stamp holds (:func:`read_snapshot`).

    Raises VersionError when the snapshot is missing, DamagedFileError naming it when its
    bytes are not the ones its name records or do not read as a catalog.
    """
    if version.catalog is None:
        return Catalog()
    path = catalog_snapshot_path(root, version.catalog)
    missing = f"version {version.version}'s catalog is missing"
    return read_snapshot(_CATALOGS, path, parse_catalog, missing)


def read_snapshot(
    kept: ParsedByStamp[_T], path: Path, parse: Callable[[Path, bytes], _T], missing: str
) -> _T:
    """``parse`` of the bytes of the content-named file ``path``, once their sha256 is the one
    its name records, or what it gave for the file of the same stamp (``kept``): a file changed
    since it was parsed is read and checked again.

    Raises VersionError ``missing`` when it is not there, DamagedFileError naming it when its
    bytes are not the ones its name records or do not parse (``parse`` raising
    TickFormatError).
    """

    def checked(raw: bytes) -> _T:
        found = sha256_bytes(raw)
        if found != path.stem:
            raise DamagedFileError(
                f"{len(raw)} bytes of sha256 {found}, not the bytes its content name records; "
                "it changed after it was written, so no version reads it (run verify-archive; "
                "restore it from a copy)",
                path=path,
            )
        try:
            return parse(path, raw)
        except TickFormatError as exc:  # the bytes named, yet unreadable: damaged when written
            raise DamagedFileError(str(exc).removeprefix(f"{path}: "), path=path) from None

    try:
        return kept.read(path, checked)
    except FileNotFoundError:
        raise VersionError(f"{path}: {missing}") from None


def missing_version_file(file: TierFile, number: int) -> VersionError:
    """The refusal of a read as of version ``number`` whose file ``file`` is missing (a kept
    hot file, or a consolidated file its catalog lists; every reader of a version's files
    raises this one): what reads it, and the repair. The copy is the version's own:
    rebuilding the catalog does not bring it back."""
    return VersionError(
        f"{file}: version {number} reads it but it is missing; restore it from a copy (named by "
        "its content; `verify-archive` names every version that reads it), or read a version "
        "that does not read it"
    )


def version_state(archive_root: Path, version: Version) -> ArchiveState:
    """Where every symbol-day lived as of ``version``: its catalog, its hot files (kept under
    their content names) and the catalogued days those hid.

    Raises VersionError when a kept hot file is missing.
    """
    root = Path(archive_root)
    catalog = version_catalog(root, version)
    live = []
    base = f"{versions_dir(root)}/hot"
    for entry in read_manifest(root, version):
        blob = _blob(base, entry)
        try:
            stamp = FileStamp.of(blob)
        except FileNotFoundError:
            raise missing_version_file(blob, version.version) from None
        live.append(HotFile(entry.symbol, entry.date, blob, stamp))
    overridden = frozenset(h.key for h in live if h.key in catalog.partitions)
    return ArchiveState(catalog, live, [], overridden)


# --- tags ---------------------------------------------------------------------------------------


def is_tag_name(text: str) -> bool:
    """True when ``text`` has a tag name's form (:func:`check_tag_name`)."""
    return _TAG_NAME.fullmatch(text) is not None


def check_tag_name(name: object) -> str:
    """``name`` when it is a tag name (a letter, then up to 99 letters, digits, ``.``, ``_``,
    ``-``); ConfigError otherwise."""
    if not isinstance(name, str) or not _TAG_NAME.fullmatch(name):
        raise ConfigError(
            f"tag {quoted(name)}: expected a letter then letters, digits, '.', '_' or '-' "
            "(at most 100 characters)"
        )
    return name


def read_tag(archive_root: Path, name: str) -> int:
    """The version number the tag ``name`` pins, its file checked (:func:`unsealed_json`).

    Raises VersionError when there is no such tag or its file does not parse as one,
    DamagedFileError naming the file when it is not the bytes its sha256 records or is
    another tag's.
    """
    path = tag_path(Path(archive_root), check_tag_name(name))
    raw = fsio.read_state_bytes(path)
    if raw is None:
        raise VersionError(f"{archive_root}: no tag {name!r}")
    repair = (
        "restore it from a copy of the archive, or delete it and tag the version again "
        "(`skewtape-pipeline tag ARCHIVE NAME --version N`)"
    )
    body = unsealed_json(raw, path, TAG_FIELDS, repair)
    number = body.get("version") if isinstance(body, dict) else None
    if not isinstance(number, int) or isinstance(number, bool):
        raise VersionError(f"{path}: field version: {number!r}, expected a version number")
    if body.get("tag", name) != name:
        raise DamagedFileError(
            f"the tag {body['tag']!r}, in the place of {name!r}; {repair}", path=path
        )
    return number


def list_tags(archive_root: Path) -> dict[str, int]:
    """``{tag: version}``, by name; raises as :func:`read_tag` for a damaged tag."""
    return {name: read_tag(archive_root, name) for name in tag_names(archive_root)}


def tag_names(archive_root: Path) -> list[str]:
    """The names of the tags, sorted (their files' names)."""
    folder = versions_dir(archive_root) / "tags"
    return sorted(p.stem for p in folder.glob("*.json")) if folder.is_dir() else []

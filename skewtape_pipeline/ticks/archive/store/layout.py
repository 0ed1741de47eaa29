"""What lives under a tick archive root, and where: the symbol-day files' layout, the archive
marker that pins the root's schema, the lock, the staging folder, and the check that a folder
is an archive root.

Layout (Hive style, one file per symbol-day; the date is the UTC calendar day)::

    <root>/symbol=<S>/year=<YYYY>/month=<MM>/date=<YYYY-MM-DD>/part-0.parquet

``<S>`` is the symbol percent-encoded (RFC 3986, UTF-8): every byte except ``A-Z a-z 0-9 - _ .
~`` becomes ``%XX``, and a leading ``.`` becomes ``%2E`` so no folder is hidden or special.
The encoding is reversible (:func:`decode_symbol`) and is what DuckDB, pyarrow and Spark decode
in Hive partition values, so ``symbol`` reads back as the original string.

Beside the partitions: ``_skewtape_archive.json`` (the schema, :func:`ensure_archive_schema`),
``_skewtape_catalog.parquet`` (``ticks.archive.store.catalog``), ``.skewtape-archive.lock`` (the
archive's one lock, taken through the core: ``ticks.archive.core.archive_lock``) and
``.skewtape-staging/`` (files written and verified before they are published). What a file
holds and how it is written is ``ticks.encode.parquet_file``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import date
from pathlib import Path
from urllib.parse import quote, unquote

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import (
    ConfigError,
    NotAnArchiveError,
    TickValidationError,
    location,
    quoted,
)
from skewtape_pipeline.fsio import load_json
from skewtape_pipeline.locations import refuse_url
from skewtape_pipeline.storage import LocalTier, ObjectTier, TierStore
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM
from skewtape_pipeline.ticks.encode.model import (
    DEFAULT_TIMESTAMP_UNIT,
    TickBatch,
    TickSchema,
    check_timestamp_unit,
)
from skewtape_pipeline.ticks.encode.parquet_file import (
    ARCHIVE_FORMAT,
    ARCHIVE_FORMAT_VERSION,
    FileFacts,
    write_verified_file,
)
from skewtape_pipeline.ticks.encode.writer_settings import WriterSettings

PART_FILE_NAME = "part-0.parquet"
ARCHIVE_MARKER = "_skewtape_archive.json"
ARCHIVE_LOCK_FILE = ".skewtape-archive.lock"
"""In the archive root: held by every writer that publishes, moves or removes archive files,
the catalog or versions (``core.archive_lock``), so a re-tiering never removes a hot file that a
compaction has just replaced."""
ARCHIVE_LOCK_WAIT_SECONDS = 600.0
"""How long a compaction waits at least for another writer to release the lock
(``compact.compaction_lock_wait``)."""


ARCHIVE_ROOT_EXPECTED = (
    "a local folder (the hot tier; a warm or cold tier's root may be s3://bucket/prefix in the "
    "tier policy)"
)
"""What an archive root given as a URL is told it should be (:func:`check_archive_root`)."""

CATALOG_FILE = "_skewtape_catalog.parquet"
"""The archive's catalog, in the archive root (``ticks.archive.store.catalog``)."""
MAX_SYMBOL_SEGMENT_BYTES = 200


def encode_symbol(symbol: str) -> str:
    """Percent-encode ``symbol`` for a path segment (see the module docstring).

    Raises TickValidationError for an empty or non-string symbol, or one whose encoding is
    longer than 200 bytes.
    """
    if not isinstance(symbol, str) or not symbol:
        raise TickValidationError(
            f"symbol {quoted(symbol)}: expected a non-empty string", field="symbol"
        )
    encoded = quote(symbol, safe="", encoding="utf-8")
    if encoded.startswith("."):
        encoded = "%2E" + encoded[1:]
    if len(encoded) > MAX_SYMBOL_SEGMENT_BYTES:
        raise TickValidationError(
            f"symbol {quoted(symbol)} encodes to {len(encoded)} bytes; at most "
            f"{MAX_SYMBOL_SEGMENT_BYTES} fit a folder name",
            field="symbol",
        )
    return encoded


def decode_symbol(segment: str) -> str:
    """The symbol a path segment made by :func:`encode_symbol` stands for."""
    return unquote(segment, encoding="utf-8", errors="strict")


def partition_dir(root: Path, symbol: str, day: date) -> Path:
    """``<root>/symbol=<S>/year=<YYYY>/month=<MM>/date=<YYYY-MM-DD>``."""
    return (
        Path(root)
        / f"symbol={encode_symbol(symbol)}"
        / f"year={day.year:04d}"
        / f"month={day.month:02d}"
        / f"date={day.isoformat()}"
    )


def partition_file(root: Path, symbol: str, day: date) -> Path:
    """The archive file of one symbol-day."""
    return partition_dir(root, symbol, day) / PART_FILE_NAME


def ensure_archive_schema(
    root: Path | TierStore,
    *,
    price_scale: int,
    quantity_scale: int,
    timestamp_unit: str = DEFAULT_TIMESTAMP_UNIT,
) -> None:
    """Record the archive's scales and timestamp unit in ``<root>/_skewtape_archive.json``, or
    check them against it; ``root`` a folder or a tier's store (a folder or an S3 prefix).

    One archive root holds one schema: a reader globbing ``**/*.parquet`` takes the first file's
    types and casts the rest to them, so a root mixing ``decimal(18, 2)`` and ``decimal(18, 4)``
    prices, or ``timestamp[ms]`` and ``timestamp[ns]`` times, would silently round. The first
    writer creates the marker without clobbering (``TierStore.create_or_read``: a hard link of
    a finished temp file, or a PUT to an absent key); later writers must match it. A marker
    written before timestamp units existed means ``ns``. The name starts with ``_`` so Parquet
    readers and globs skip it.

    Raises
    ------
    ConfigError
        The root already holds an archive with other scales or another timestamp unit (or an
        unreadable marker), or ``timestamp_unit`` is unknown.
    """
    store = root if isinstance(root, LocalTier | ObjectTier) else LocalTier(Path(root))
    marker = store.file(ARCHIVE_MARKER)
    wanted = {
        "format": ARCHIVE_FORMAT,
        "format_version": ARCHIVE_FORMAT_VERSION,
        "price_scale": price_scale,
        "quantity_scale": quantity_scale,
        "timestamp_unit": check_timestamp_unit(timestamp_unit),
    }
    stored = store.create_or_read(ARCHIVE_MARKER, json.dumps(wanted, sort_keys=True).encode())
    found = parse_archive_marker(location(marker), stored)
    if found != wanted:
        raise ConfigError(
            f"{marker}: this archive holds price_scale {found.get('price_scale')!r}, "
            f"quantity_scale {found.get('quantity_scale')!r} and timestamp_unit "
            f"{found.get('timestamp_unit')!r}; the batch has {price_scale}, {quantity_scale} "
            f"and {timestamp_unit!r}. One root holds one schema (readers would cast silently): "
            "use the same configuration or another root"
        )


def read_archive_marker(root: Path) -> dict[str, object]:
    """The configuration recorded in ``<root>/_skewtape_archive.json`` (``timestamp_unit``
    filled in as ``ns`` for a marker that predates it).

    Raises ConfigError when the marker is missing or unreadable.
    """
    marker = Path(root) / ARCHIVE_MARKER
    try:
        raw = marker.read_bytes()
    except OSError as exc:
        raise ConfigError(f"{marker}: unreadable archive marker ({exc})") from None
    return parse_archive_marker(marker, raw)


def parse_archive_marker(marker: Path | str, raw: bytes) -> dict[str, object]:
    """The configuration in the bytes ``raw`` of the marker ``marker`` (a file or an object).

    Raises ConfigError naming the marker when it is not a JSON object.
    """
    try:
        found = fsio.load_json(raw, marker, error=ConfigError)
    except ValueError as exc:
        raise ConfigError(f"{marker}: unreadable archive marker ({exc})") from None
    if not isinstance(found, dict):
        raise ConfigError(f"{marker}: unreadable archive marker (not a JSON object)")
    found.setdefault("timestamp_unit", DEFAULT_TIMESTAMP_UNIT)
    return found


def recorded_schema(root: Path) -> TickSchema | None:
    """The schema ``<root>/_skewtape_archive.json`` records, or None when the root holds no
    archive yet.

    Raises ConfigError when the marker exists but is unreadable or invalid.
    """
    if not (Path(root) / ARCHIVE_MARKER).exists():
        return None
    found = read_archive_marker(root)
    try:
        return TickSchema(found["timestamp_unit"], found["price_scale"], found["quantity_scale"])
    except KeyError as exc:
        raise ConfigError(f"{Path(root) / ARCHIVE_MARKER}: no {exc.args[0]} recorded") from None


def check_archive_root(root: Path | str, *, empty_ok: bool = True) -> Path:
    """``root`` as a Path when it is a tick archive root (the hot tier: the folder holding
    ``_skewtape_archive.json``, the catalog and the ``symbol=`` folders); NotAnArchiveError (a
    ConfigError) naming it otherwise, touching nothing.

    Refused: a path that is not a folder, a warm or cold tier folder (consolidated ``year=``
    folders, no catalog: the message names the archive root it likely belongs to), and a
    folder holding files of its own but no archive marker. A folder holding the archive's
    bookkeeping and nothing else (``_skewtape*`` markers, ``.skewtape*`` lock and staging, a
    marker's temporary file: an archive with nothing compacted yet) passes only with
    ``empty_ok``; an empty folder, or one holding only other dot files or an empty staging
    folder (what a run refused or failed before publishing anything leaves), holds no archive
    and is refused.
    """
    path = Path(refuse_url(root, "archive root", ARCHIVE_ROOT_EXPECTED))
    if not path.is_dir():
        raise NotAnArchiveError(f"{path}: not a folder; expected a tick archive root")
    names = _names_held(path)
    if ARCHIVE_MARKER not in names:
        if empty_ok and _only_bookkeeping(names):
            return path
        what = "holds no tick archive yet" if not names else f"holds no {ARCHIVE_MARKER}"
        raise NotAnArchiveError(f"{path}: {what}; expected a tick archive root")
    if _looks_like_tier_folder(names):
        base, _, tier = path.name.rpartition("-")
        hint = path.with_name(base) if base and tier.upper() in (WARM, COLD) else None
        raise NotAnArchiveError(
            f"{path}: is a warm or cold tier folder (consolidated files, no catalog), not an "
            f"archive root; pass the archive root (its hot tier)"
            + (f", e.g. {hint}" if hint else "")
        )
    return path


def holds_nothing(folder: Path) -> bool:
    """``folder`` (an existing folder) is empty, or holds only an empty staging folder: no
    archive, only what a run refused or failed before publishing anything leaves. Reads only:
    the staging folder is never removed here (a writer of another day may be about to use it)."""
    return not _names_held(folder)


def _names_held(folder: Path) -> set[str]:
    """The names in ``folder``, less an empty staging folder when it holds no archive marker
    (it holds no part of an archive; an archive's own staging folder is never listed, so a
    read lists nothing but the root)."""
    names = {child.name for child in folder.iterdir()}
    if ARCHIVE_MARKER in names:
        return names
    if STAGING_FOLDER in names and _empty_folder(folder / STAGING_FOLDER):
        names.discard(STAGING_FOLDER)
    return names


def _empty_folder(folder: Path) -> bool:
    """``folder`` is a folder (not a link) holding nothing, or was removed meanwhile."""
    if folder.is_symlink():
        return False
    try:
        return not any(folder.iterdir())
    except FileNotFoundError:
        return True
    except NotADirectoryError:
        return False


def _only_bookkeeping(names: set[str]) -> bool:
    """``names`` are some of an archive's own bookkeeping files and nothing else."""
    return bool(names) and all(n.startswith(_BOOKKEEPING) for n in names)


_BOOKKEEPING = ("_skewtape", ".skewtape", "._skewtape")
"""How an archive's own bookkeeping files are named: markers, lock and staging, and the
temporary file a writer killed while writing a marker leaves (``fsio.temp_path_for``)."""


def _looks_like_tier_folder(names: set[str]) -> bool:
    """Consolidated ``year=`` folders without the catalog or any hot ``symbol=`` folder."""
    return (
        CATALOG_FILE not in names
        and any(n.startswith("year=") for n in names)
        and not any(n.startswith("symbol=") for n in names)
    )


STAGING_FOLDER = ".skewtape-staging"
"""Folder of the archive root where symbol-day files are written and verified before they are
published (renamed into their partition folder under the archive's lock)."""


@dataclass
class PreparedFile:
    """A symbol-day file written and verified in the archive's staging folder, not yet published:
    :func:`publish_archive_file` renames it into place, :meth:`discard` removes it."""

    temp: Path
    target: Path
    facts: FileFacts

    def discard(self) -> None:
        """Remove the staged file (nothing once it was published)."""
        self.temp.unlink(missing_ok=True)


def staging_folder(archive_root: Path) -> Path:
    """``<archive root>/.skewtape-staging`` (a dot folder: readers, globs and views skip it)."""
    return Path(archive_root) / STAGING_FOLDER


def prepare_archive_file(
    batch: TickBatch,
    target: Path,
    *,
    archive_root: Path,
    settings: WriterSettings,
    metadata: Mapping[str, str],
) -> PreparedFile:
    """Write ``batch`` for ``target`` to a new file in the archive's staging folder, fsynced,
    read back in full (page checksums checked) and compared field for field with ``batch``
    (``ticks.encode.parquet_file.write_verified_file``).

    Needs no lock: the staged name is unique to this call (host, process, thread, a counter),
    and nothing but :func:`publish_archive_file` moves it into the archive. The caller
    publishes or discards it.

    Raises
    ------
    RoundTripError
        The file did not read back equal; it is removed and nothing is published.
    OSError
        Writing failed (a full disk): names ``target``; the staged file is removed, and the
        staging folder too when no other file is staged there.
    """
    folder = staging_folder(archive_root)
    temp = folder / fsio.unique_temp_name(target.name)
    try:
        with fsio.naming(target, temp):
            facts = write_verified_file(batch, temp, settings=settings, metadata=metadata)
    except BaseException:
        temp.unlink(missing_ok=True)
        fsio.prune_empty_folders(folder, within=lambda path: path == folder)
        raise
    return PreparedFile(temp=temp, target=target, facts=facts)


def publish_archive_file(prepared: PreparedFile) -> FileFacts:
    """Rename a staged file over its target (creating the partition folders), then remove any
    other ``*.parquet`` of that folder, so a rewritten partition holds exactly this file. Call
    it under the archive's lock. Returns the facts read from the very bytes now at the target.
    """
    target = prepared.target
    target.parent.mkdir(parents=True, exist_ok=True)
    fsio.publish(prepared.temp, target)
    for other in target.parent.glob("*.parquet"):
        if other.name != target.name:
            fsio.atomic_unlink(other)
    return replace(prepared.facts, path=target)


def empty_ticks_select(roots: list[Path]) -> str:
    """A typed, empty select for an archive with no files yet (scales and timestamp unit from
    its marker)."""
    price_scale, quantity_scale, timestamp_unit = 0, 0, "ns"
    for root in roots:
        marker = root / ARCHIVE_MARKER
        if marker.exists():
            found = load_json(marker.read_bytes(), marker, error=ConfigError)
            price_scale, quantity_scale = found["price_scale"], found["quantity_scale"]
            timestamp_unit = found.get("timestamp_unit", "ns")
            break
    quantity = "BIGINT" if quantity_scale == 0 else f"DECIMAL(18, {quantity_scale})"
    ts_type = "TIMESTAMP_NS" if timestamp_unit == "ns" else "TIMESTAMPTZ"
    return (
        "SELECT NULL::VARCHAR AS symbol, NULL::DATE AS date, "
        f"NULL::{ts_type} AS ts, "
        f"NULL::DECIMAL(18, {price_scale}) AS price, NULL::{quantity} AS quantity, "
        "NULL::VARCHAR AS side, NULL::VARCHAR AS tier, NULL::INTEGER AS year, "
        "NULL::INTEGER AS month WHERE false"
    )

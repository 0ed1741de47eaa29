"""The Skewtape snapshot and delta formats: constants, safe paths and parsed manifests.

Published (the seed), and all the engine requires: a delta folder holds ``manifest.json``
(``parent`` and ``next`` with ``bundle_id`` and ``manifest_sha256``, ``next.venues``,
``next.omitted_venues``, ``schema_break``, and ``files`` entries with ``path``, ``op``,
``source``, ``sha256``), ``CHECKSUMS.sha256``, ``snapshot/<path>`` whole files and
``changes/<table>.parquet`` row changes. :meth:`DeltaManifest.parse` validates those fields up
front and raises :class:`~skewtape_pipeline.errors.ManifestError` or
:class:`~skewtape_pipeline.errors.UnsafePathError` naming the field; unknown fields are ignored.
A snapshot's ``manifest.json`` is, to the engine, a file named by its sha256:
:class:`SnapshotManifest` holds what we use of it when present and never refuses it. Nothing
here touches disk.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any, Literal

from skewtape_pipeline.errors import (
    ConfigError,
    MalformedJsonError,
    ManifestError,
    UnsafePathError,
    quoted,
    quoted_path,
)
from skewtape_pipeline.fsio import TEMP_MARKER, load_json
from skewtape_pipeline.hashing import checksum_entries, is_sha256_hex

MANIFEST = "manifest.json"
CHECKSUMS = "CHECKSUMS.sha256"
LOCAL_STATE_DIR = ".skewtape"
"""Folder inside a snapshot for local bookkeeping (hash cache); never published, never listed."""

TABLE_KEYS: dict[str, tuple[str, ...]] = {
    "markets.parquet": ("venue", "market_id"),
    "resolutions.parquet": ("venue", "market_id", "seq"),
    "matched_events.parquet": ("event_id",),
    "fees.parquet": ("venue", "category", "effective_from"),
}
"""The four reference tables and their keys, as published."""

Op = Literal["add", "replace", "delete", "change"]
OPS: tuple[str, ...] = ("add", "replace", "delete", "change")

MONTH_RE = re.compile(r"^\d{4}-(0[1-9]|1[0-2])$")


def checked_month(value: object, named: str) -> str:
    """``value`` when it is a month ``YYYY-MM``; else ConfigError ``<named>: expected a month
    YYYY-MM`` (``named``: the argument or option and the value given, as the caller shows it)."""
    if not isinstance(value, str) or not MONTH_RE.match(value):
        raise ConfigError(f"{named}: expected a month YYYY-MM")
    return value


_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def safe_relpath(rel: object, *, field_name: str, source: Path | None = None) -> str:
    """Return ``rel`` if it is a safe relative POSIX path inside its folder, else refuse it.

    Refused: non-strings, empty strings, absolute paths, drive letters, backslashes, NUL, empty,
    ``.`` or ``..`` parts, our local state folder and our temporary file names.
    Raises :class:`UnsafePathError` naming ``field_name``.
    """

    why = path_refusal(rel)
    if why is not None:
        raise UnsafePathError(
            f"refusing the path {quoted_path(rel)}: {why}", path=source, field=field_name
        )
    return rel


def path_refusal(rel: object) -> str | None:
    """Why :func:`safe_relpath` refuses ``rel``, or None when it is safe."""
    if not isinstance(rel, str) or not rel:
        return "expected a non-empty relative path"
    if "\\" in rel or "\x00" in rel:
        return "backslashes and NUL are not allowed"
    if rel.startswith("/") or _DRIVE_RE.match(rel):
        return "absolute paths and drive letters are not allowed"
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        return "empty, '.' and '..' parts are not allowed"
    if parts[0] == LOCAL_STATE_DIR or any(part.endswith(TEMP_MARKER) for part in parts):
        return f"{LOCAL_STATE_DIR}/ and temporary names are reserved for local state"
    return None


def safe_checksums(data: bytes, *, source: Path | object) -> dict[str, str]:
    """{path: sha256} of CHECKSUMS.sha256 text (``hashing.checksum_entries``: ChecksumLineError
    for a bad line), every path one :func:`safe_relpath` takes; UnsafePathError naming the file
    ``source``, the line and the first path it refuses: ``<source>: line 3: refusing the path
    '../x': <why>``."""
    entries = checksum_entries(data, source=source)
    for rel, (_, number) in entries.items():
        why = path_refusal(rel)
        if why is not None:
            raise UnsafePathError(
                f"line {number}: refusing the path {quoted_path(rel)}: {why}", path=source
            )
    return {rel: digest for rel, (digest, _) in entries.items()}


def safe_venue(name: object, *, field_name: str, source: Path | None = None) -> str:
    """Return ``name`` if it may name a venue, else refuse it.

    A venue names the folder of its month files (``fills/<venue>/<YYYY-MM>.parquet``), so it is
    one part of a path :func:`safe_relpath` accepts: no ``/``, not ``.`` or ``..``, none of
    what that function refuses. Raises :class:`UnsafePathError` naming ``field_name``.
    """
    if isinstance(name, str) and "/" in name:
        raise UnsafePathError(
            f"refusing the venue {quoted_path(name)}: a venue is one path part, without '/'",
            path=source,
            field=field_name,
        )
    return safe_relpath(name, field_name=field_name, source=source)


def _require(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, src: Path):
    if key not in raw:
        raise ManifestError(f"missing; expected {_kind_name(kind)}", path=src, field=where + key)
    value = raw[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(
            f"is {quoted(value)}; expected {_kind_name(kind)}", path=src, field=where + key
        )
    return value


def _kind_name(kind: type | tuple[type, ...]) -> str:
    kinds = kind if isinstance(kind, tuple) else (kind,)
    return " or ".join({"str": "a string", "int": "an integer", "bool": "true or false",
                        "list": "a list", "dict": "an object"}.get(k.__name__, k.__name__)
                       for k in kinds)  # fmt: skip


def _require_sha(raw: dict[str, Any], key: str, where: str, src: Path) -> str:
    value = _require(raw, key, str, where, src)
    if not is_sha256_hex(value):
        raise ManifestError(
            f"is {quoted(value)}; expected 64 lowercase hex digits", path=src, field=where + key
        )
    return value


def _load_json_object(raw: bytes, source: Path) -> dict[str, Any]:
    data = load_json(raw, source, error=ManifestError)
    if not isinstance(data, dict):
        raise ManifestError("expected a JSON object at the top level", path=source)
    return data


def _string_list(raw: dict[str, Any], key: str, where: str, src: Path) -> tuple[str, ...]:
    values = _require(raw, key, list, where, src)
    if not all(isinstance(v, str) and v for v in values):
        raise ManifestError(
            f"is {quoted(values)}; expected a list of names", path=src, field=where + key
        )
    return tuple(values)


# --- the delta manifest ---------------------------------------------------------------------


@dataclass(frozen=True)
class BundleRef:
    """A snapshot named by its bundle id and the sha256 of its manifest.json."""

    bundle_id: str
    manifest_sha256: str


@dataclass(frozen=True)
class NextBundle(BundleRef):
    """The snapshot a delta leads to, with its venues and the venues it omits."""

    venues: tuple[str, ...] = ()
    omitted_venues: tuple[str, ...] = ()


@dataclass(frozen=True)
class DeltaFileEntry:
    """One entry of a delta manifest's ``files``: what to do to ``path`` of the snapshot."""

    path: str
    op: Op
    source: str | None
    sha256: str | None

    @property
    def is_table_change(self) -> bool:
        return self.op == "change"


@dataclass(frozen=True)
class DeltaManifest:
    """A parsed, validated delta manifest.

    Use :meth:`parse`; it enforces every rule of the format that can be checked without
    reading other files, and raises :class:`ManifestError`/:class:`UnsafePathError` otherwise.
    """

    parent: BundleRef
    next: NextBundle
    schema_break: bool
    files: tuple[DeltaFileEntry, ...]

    @classmethod
    def parse(cls, raw: bytes, *, source: Path) -> DeltaManifest:
        data = _load_json_object(raw, source)
        parent_raw = _require(data, "parent", dict, "", source)
        next_raw = _require(data, "next", dict, "", source)
        parent = BundleRef(
            bundle_id=_require(parent_raw, "bundle_id", str, "parent.", source),
            manifest_sha256=_require_sha(parent_raw, "manifest_sha256", "parent.", source),
        )
        nxt = NextBundle(
            bundle_id=_require(next_raw, "bundle_id", str, "next.", source),
            manifest_sha256=_require_sha(next_raw, "manifest_sha256", "next.", source),
            venues=_string_list(next_raw, "venues", "next.", source),
            omitted_venues=_string_list(next_raw, "omitted_venues", "next.", source)
            if "omitted_venues" in next_raw
            else (),
        )
        schema_break = data.get("schema_break", False)
        if not isinstance(schema_break, bool):
            raise ManifestError(
                f"is {quoted(schema_break)}; expected true or false",
                path=source,
                field="schema_break",
            )
        entries = _require(data, "files", list, "", source)
        files = tuple(_parse_delta_entry(e, i, source) for i, e in enumerate(entries))
        _check_delta_files(files, source)
        return cls(parent=parent, next=nxt, schema_break=schema_break, files=files)

    def to_json(self) -> bytes:
        """Canonical JSON bytes of this manifest (as the sample publisher writes it)."""
        data = {
            "parent": asdict(self.parent),
            "next": {**asdict(self.next), "venues": list(self.next.venues),
                     "omitted_venues": list(self.next.omitted_venues)},
            "schema_break": self.schema_break,
            "files": [
                {k: v for k, v in asdict(entry).items() if v is not None} for entry in self.files
            ],
        }  # fmt: skip
        return (json.dumps(data, indent=2) + "\n").encode()


def _parse_delta_entry(raw: object, index: int, source: Path) -> DeltaFileEntry:
    where = f"files[{index}]."
    if not isinstance(raw, dict):
        raise ManifestError(
            f"is {quoted(raw)}; expected an object", path=source, field=f"files[{index}]"
        )
    path = safe_relpath(raw.get("path"), field_name=where + "path", source=source)
    op = _require(raw, "op", str, where, source)
    if op not in OPS:
        raise ManifestError(
            f"is {quoted(op)} for {quoted_path(path)}; expected one of {', '.join(OPS)}",
            path=source,
            field=where + "op",
        )
    if op == "delete":
        if raw.get("source") is not None:
            raise ManifestError(
                f"a delete of {quoted_path(path)} has a source; deletes have none",
                path=source,
                field=where + "source",
            )
        return DeltaFileEntry(path=path, op="delete", source=None, sha256=None)
    src = safe_relpath(raw.get("source"), field_name=where + "source", source=source)
    digest = _require_sha(raw, "sha256", where, source)
    if op == "change" and path not in TABLE_KEYS:
        raise ManifestError(
            f"a change of {quoted_path(path)}, which has no known key; "
            f"changes apply to {', '.join(sorted(TABLE_KEYS))}",
            path=source,
            field=where + "path",
        )
    return DeltaFileEntry(path=path, op=op, source=src, sha256=digest)


def _check_delta_files(files: tuple[DeltaFileEntry, ...], source: Path) -> None:
    seen: dict[str, int] = {}
    for index, entry in enumerate(files):
        if entry.path in seen:
            raise ManifestError(
                f"{quoted_path(entry.path)} appears twice (also files[{seen[entry.path]}])",
                path=source,
                field=f"files[{index}].path",
            )
        seen[entry.path] = index
    tail = [entry.path for entry in files[-2:]]
    if tail != [CHECKSUMS, MANIFEST]:
        raise ManifestError(
            f"the last two entries are {quoted_path(tail)}; expected {CHECKSUMS!r} then "
            f"{MANIFEST!r}",
            path=source,
            field="files",
        )
    for index, entry in enumerate(files[-2:], start=len(files) - 2):
        if entry.op not in ("add", "replace"):
            raise ManifestError(
                f"{quoted_path(entry.path)} has op {quoted(entry.op)}; expected add or replace",
                path=source,
                field=f"files[{index}].op",
            )


# --- the snapshot manifest ------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotFileEntry:
    """One file of a snapshot: its path and sha256, with its size, rows and columns when known."""

    path: str
    sha256: str
    bytes: int | None = None
    rows: int | None = None
    columns: tuple[tuple[str, str], ...] | None = None
    """(name, Arrow type) of each column, for the four reference tables."""


@dataclass(frozen=True)
class SnapshotManifest:
    """What a snapshot's manifest.json tells us, as far as we understand it.

    The published format names a snapshot by its manifest's sha256 and publishes nothing of its
    content. So every field here is optional: it is ``None`` (``()`` for ``omitted_venues``)
    when the manifest lacks it *or* holds it in a shape other than the one documented below,
    exactly as an unknown field is ignored. ``files`` is all or nothing: every entry an object
    with a safe ``path`` and a sha256, optional ``bytes``/``rows`` counts and ``columns``
    pairs, no path twice; otherwise the manifest is taken to list no files (the snapshot's
    CHECKSUMS.sha256 lists them). What the sample publisher writes fills every field.
    """

    bundle_id: str | None = None
    month: str | None = None
    venues: tuple[str, ...] | None = None
    omitted_venues: tuple[str, ...] = ()
    schema_version: int | None = None
    files: tuple[SnapshotFileEntry, ...] | None = None

    def by_path(self) -> dict[str, SnapshotFileEntry]:
        """{path: entry} of ``files``; empty when the manifest lists none."""
        return {entry.path: entry for entry in self.files or ()}

    def with_listed_files(self, listed: dict[str, str]) -> SnapshotManifest:
        """This manifest, with ``files`` taken from ``listed`` ({path: sha256}, as the
        snapshot's CHECKSUMS.sha256 gives them, seal files left out) when it lists none."""
        if self.files is not None:
            return self
        entries = tuple(
            SnapshotFileEntry(path=rel, sha256=digest)
            for rel, digest in sorted(listed.items())
            if rel not in (MANIFEST, CHECKSUMS)
        )
        return replace(self, files=entries)

    @classmethod
    def parse(cls, raw: bytes, *, source: Path) -> SnapshotManifest:
        """Read what we understand of a snapshot manifest's bytes. Never refuses: bytes that are
        not a JSON object (or nest too deeply to parse) tell nothing, and give a manifest with
        no field set. ``source`` is kept for the signature's symmetry with the delta's parse."""
        try:
            data = load_json(raw, source)
        except MalformedJsonError:
            return cls()
        if not isinstance(data, dict):
            return cls()
        month = data.get("month")
        omitted = _names_or_none(data.get("omitted_venues"))
        return cls(
            bundle_id=_name_or_none(data.get("bundle_id")),
            month=month if isinstance(month, str) and MONTH_RE.match(month) else None,
            venues=_names_or_none(data.get("venues")),
            omitted_venues=omitted or (),
            schema_version=_count_or_none(data.get("schema_version")),
            files=_snapshot_entries_or_none(data.get("files")),
        )

    def to_json(self) -> bytes:
        """Canonical JSON bytes (files in the order given, fixed indent); unset fields left out."""
        data: dict[str, Any] = {
            "bundle_id": self.bundle_id,
            "month": self.month,
            "venues": list(self.venues) if self.venues is not None else None,
            "omitted_venues": list(self.omitted_venues),
            "schema_version": self.schema_version,
            "files": [_snapshot_entry_json(e) for e in self.files]
            if self.files is not None
            else None,
        }
        data = {key: value for key, value in data.items() if value is not None}
        return (json.dumps(data, indent=2) + "\n").encode()


def _snapshot_entry_json(entry: SnapshotFileEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"path": entry.path, "sha256": entry.sha256}
    if entry.bytes is not None:
        out["bytes"] = entry.bytes
    if entry.rows is not None:
        out["rows"] = entry.rows
    if entry.columns is not None:
        out["columns"] = [list(column) for column in entry.columns]
    return out


def _name_or_none(value: object) -> str | None:
    return value if isinstance(value, str) and value else None


def _names_or_none(value: object) -> tuple[str, ...] | None:
    if isinstance(value, list) and all(isinstance(v, str) and v for v in value):
        return tuple(value)
    return None


def _count_or_none(value: object) -> int | None:
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    return None


def _columns_or_none(value: object) -> tuple[tuple[str, str], ...] | None:
    if isinstance(value, list) and all(
        isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c) for c in value
    ):
        return tuple((name, kind) for name, kind in value)
    return None


def _snapshot_entries_or_none(value: object) -> tuple[SnapshotFileEntry, ...] | None:
    """The manifest's ``files`` if every entry is understood (see SnapshotManifest), else None."""
    if not isinstance(value, list):
        return None
    entries = []
    for raw in value:
        entry = _snapshot_entry_or_none(raw)
        if entry is None:
            return None
        entries.append(entry)
    if len({entry.path for entry in entries}) != len(entries):
        return None
    return tuple(entries)


def _snapshot_entry_or_none(raw: object) -> SnapshotFileEntry | None:
    if not isinstance(raw, dict):
        return None
    path, digest = raw.get("path"), raw.get("sha256")
    if isinstance(digest, str):
        digest = digest.lower()
    if not is_sha256_hex(digest) or path in (MANIFEST, CHECKSUMS):
        return None
    try:
        path = safe_relpath(path, field_name="files")
    except UnsafePathError:
        return None
    return SnapshotFileEntry(
        path=path,
        sha256=digest,
        bytes=_count_or_none(raw.get("bytes")),
        rows=_count_or_none(raw.get("rows")),
        columns=_columns_or_none(raw.get("columns")),
    )

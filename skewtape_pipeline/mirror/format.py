"""The Skewtape snapshot and delta formats: constants, safe paths and parsed manifests.

Published (the seed): a delta folder holds ``manifest.json``, ``CHECKSUMS.sha256``,
``snapshot/<path>`` whole files and ``changes/<table>.parquet`` row changes. Ours to fix (see
the design notes): the snapshot manifest's fields and the snapshot layout. Parsing validates
everything up front and raises :class:`~skewtape_pipeline.errors.ManifestError` or
:class:`~skewtape_pipeline.errors.UnsafePathError` naming the field; nothing here touches disk.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from skewtape_pipeline.errors import ManifestError, UnsafePathError
from skewtape_pipeline.fsio import TEMP_MARKER
from skewtape_pipeline.hashing import is_sha256_hex

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
_DRIVE_RE = re.compile(r"^[A-Za-z]:")


def safe_relpath(rel: object, *, field_name: str, source: Path | None = None) -> str:
    """Return ``rel`` if it is a safe relative POSIX path inside its folder, else refuse it.

    Refused: non-strings, empty strings, absolute paths, drive letters, backslashes, NUL, empty,
    ``.`` or ``..`` parts, our local state folder and our temporary file names.
    Raises :class:`UnsafePathError` naming ``field_name``.
    """

    def refuse(why: str) -> UnsafePathError:
        return UnsafePathError(f"refusing the path {rel!r}: {why}", path=source, field=field_name)

    if not isinstance(rel, str) or not rel:
        raise refuse("expected a non-empty relative path")
    if "\\" in rel or "\x00" in rel:
        raise refuse("backslashes and NUL are not allowed")
    if rel.startswith("/") or _DRIVE_RE.match(rel):
        raise refuse("absolute paths and drive letters are not allowed")
    parts = rel.split("/")
    if any(part in ("", ".", "..") for part in parts):
        raise refuse("empty, '.' and '..' parts are not allowed")
    if parts[0] == LOCAL_STATE_DIR or any(part.endswith(TEMP_MARKER) for part in parts):
        raise refuse(f"{LOCAL_STATE_DIR}/ and temporary names are reserved for local state")
    return rel


def _require(raw: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str, src: Path):
    if key not in raw:
        raise ManifestError(f"missing; expected {_kind_name(kind)}", path=src, field=where + key)
    value = raw[key]
    if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
        raise ManifestError(
            f"is {value!r}; expected {_kind_name(kind)}", path=src, field=where + key
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
            f"is {value!r}; expected 64 lowercase hex digits", path=src, field=where + key
        )
    return value


def _load_json_object(raw: bytes, source: Path) -> dict[str, Any]:
    try:
        data = json.loads(raw)
    except (ValueError, UnicodeDecodeError) as exc:
        raise ManifestError(f"is not valid JSON ({exc})", path=source) from None
    if not isinstance(data, dict):
        raise ManifestError("expected a JSON object at the top level", path=source)
    return data


def _string_list(raw: dict[str, Any], key: str, where: str, src: Path) -> tuple[str, ...]:
    values = _require(raw, key, list, where, src)
    if not all(isinstance(v, str) and v for v in values):
        raise ManifestError(f"is {values!r}; expected a list of names", path=src, field=where + key)
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
                f"is {schema_break!r}; expected true or false", path=source, field="schema_break"
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
        raise ManifestError(f"is {raw!r}; expected an object", path=source, field=f"files[{index}]")
    path = safe_relpath(raw.get("path"), field_name=where + "path", source=source)
    op = _require(raw, "op", str, where, source)
    if op not in OPS:
        raise ManifestError(
            f"is {op!r} for {path!r}; expected one of {', '.join(OPS)}",
            path=source,
            field=where + "op",
        )
    if op == "delete":
        if raw.get("source") is not None:
            raise ManifestError(
                f"a delete of {path!r} has a source; deletes have none",
                path=source,
                field=where + "source",
            )
        return DeltaFileEntry(path=path, op="delete", source=None, sha256=None)
    src = safe_relpath(raw.get("source"), field_name=where + "source", source=source)
    digest = _require_sha(raw, "sha256", where, source)
    if op == "change" and path not in TABLE_KEYS:
        raise ManifestError(
            f"a change of {path!r}, which has no known key; "
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
                f"{entry.path!r} appears twice (also files[{seen[entry.path]}])",
                path=source,
                field=f"files[{index}].path",
            )
        seen[entry.path] = index
    tail = [entry.path for entry in files[-2:]]
    if tail != [CHECKSUMS, MANIFEST]:
        raise ManifestError(
            f"the last two entries are {tail!r}; expected {CHECKSUMS!r} then {MANIFEST!r}",
            path=source,
            field="files",
        )
    for index, entry in enumerate(files[-2:], start=len(files) - 2):
        if entry.op not in ("add", "replace"):
            raise ManifestError(
                f"{entry.path!r} has op {entry.op!r}; expected add or replace",
                path=source,
                field=f"files[{index}].op",
            )


# --- the snapshot manifest ------------------------------------------------------------------


@dataclass(frozen=True)
class SnapshotFileEntry:
    """One file of a snapshot: its path, sha256 and size, with rows and columns for Parquet."""

    path: str
    sha256: str
    bytes: int
    rows: int | None = None
    columns: tuple[tuple[str, str], ...] | None = None
    """(name, Arrow type) of each column, for the four reference tables."""


@dataclass(frozen=True)
class SnapshotManifest:
    """A parsed, validated snapshot manifest (every file but manifest.json and CHECKSUMS)."""

    bundle_id: str
    month: str
    venues: tuple[str, ...]
    omitted_venues: tuple[str, ...]
    schema_version: int
    files: tuple[SnapshotFileEntry, ...] = field(default=())

    def by_path(self) -> dict[str, SnapshotFileEntry]:
        return {entry.path: entry for entry in self.files}

    @classmethod
    def parse(cls, raw: bytes, *, source: Path) -> SnapshotManifest:
        data = _load_json_object(raw, source)
        month = _require(data, "month", str, "", source)
        if not MONTH_RE.match(month):
            raise ManifestError(f"is {month!r}; expected YYYY-MM", path=source, field="month")
        entries = _require(data, "files", list, "", source)
        files = tuple(_parse_snapshot_entry(e, i, source) for i, e in enumerate(entries))
        paths = [entry.path for entry in files]
        if len(set(paths)) != len(paths):
            raise ManifestError("lists a path twice", path=source, field="files")
        return cls(
            bundle_id=_require(data, "bundle_id", str, "", source),
            month=month,
            venues=_string_list(data, "venues", "", source),
            omitted_venues=_string_list(data, "omitted_venues", "", source)
            if "omitted_venues" in data
            else (),
            schema_version=_require(data, "schema_version", int, "", source),
            files=files,
        )

    def to_json(self) -> bytes:
        """Canonical JSON bytes (files in the order given, fixed indent)."""
        data = {
            "bundle_id": self.bundle_id,
            "month": self.month,
            "venues": list(self.venues),
            "omitted_venues": list(self.omitted_venues),
            "schema_version": self.schema_version,
            "files": [_snapshot_entry_json(entry) for entry in self.files],
        }
        return (json.dumps(data, indent=2) + "\n").encode()


def _snapshot_entry_json(entry: SnapshotFileEntry) -> dict[str, Any]:
    out: dict[str, Any] = {"path": entry.path, "sha256": entry.sha256, "bytes": entry.bytes}
    if entry.rows is not None:
        out["rows"] = entry.rows
    if entry.columns is not None:
        out["columns"] = [list(column) for column in entry.columns]
    return out


def _parse_snapshot_entry(raw: object, index: int, source: Path) -> SnapshotFileEntry:
    where = f"files[{index}]."
    if not isinstance(raw, dict):
        raise ManifestError(f"is {raw!r}; expected an object", path=source, field=f"files[{index}]")
    path = safe_relpath(raw.get("path"), field_name=where + "path", source=source)
    if path in (MANIFEST, CHECKSUMS):
        raise ManifestError(f"lists {path!r}, which never lists itself", path=source, field=where)
    rows = raw.get("rows")
    if rows is not None and (not isinstance(rows, int) or isinstance(rows, bool) or rows < 0):
        raise ManifestError(f"is {rows!r}; expected a count", path=source, field=where + "rows")
    columns = raw.get("columns")
    if columns is not None:
        if not isinstance(columns, list) or not all(
            isinstance(c, list) and len(c) == 2 and all(isinstance(x, str) for x in c)
            for c in columns
        ):
            raise ManifestError(
                "expected a list of [name, type] pairs", path=source, field=where + "columns"
            )
        columns = tuple((name, kind) for name, kind in columns)
    size = _require(raw, "bytes", int, where, source)
    return SnapshotFileEntry(
        path=path,
        sha256=_require_sha(raw, "sha256", where, source),
        bytes=size,
        rows=rows,
        columns=columns,
    )

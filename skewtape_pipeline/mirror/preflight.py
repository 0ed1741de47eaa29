"""Checks that run before a delta touches anything: the delta's integrity and safety.

Nothing in this module writes to disk. Every check raises a typed
:class:`~skewtape_pipeline.errors.DeltaRefusedError` subclass naming the delta file or manifest
entry, the value found and what was expected.
"""

from __future__ import annotations

import os
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import duckdb
import pyarrow as pa
import pyarrow.parquet as pq

from skewtape_pipeline.duckdb_interrupt import interruptible
from skewtape_pipeline.errors import (
    ChangeFileError,
    ChecksumMismatchError,
    ManifestError,
    UnsafePathError,
    quoted,
    quoted_path,
)
from skewtape_pipeline.hashing import (
    FileStamp,
    HashCache,
    parse_checksums,
    sha256_bytes,
    sha256_files,
)
from skewtape_pipeline.mirror.format import (
    CHECKSUMS,
    MANIFEST,
    TABLE_KEYS,
    DeltaManifest,
    SnapshotManifest,
    safe_relpath,
)
from skewtape_pipeline.mirror.tables import Columns, local_path, row_misfit, schema_columns
from skewtape_pipeline.mirror.verify import hash_cache_path

CHANGE_OPS = ("upsert", "delete")


@dataclass(frozen=True)
class ChangeStats:
    """How many rows a change file upserts and deletes."""

    upserts: int
    deletes: int


@dataclass(frozen=True)
class DeltaHead:
    """A delta's manifest and CHECKSUMS.sha256, read and cross-checked (cheap: no file hashing)."""

    folder: Path
    manifest: DeltaManifest
    manifest_sha256: str
    listed: dict[str, str]
    """{delta-relative path: sha256} from the delta's CHECKSUMS.sha256."""


@dataclass
class CheckedDelta:
    """A delta whose every file was hashed and checked; what the applier needs to proceed."""

    head: DeltaHead
    hashes: dict[str, str]
    """{delta-relative path: sha256} of every file listed in CHECKSUMS.sha256, as hashed."""
    stamps: dict[str, FileStamp]
    """The stamp (device, inode, size, mtime, ctime) of each hashed file, taken before it was
    hashed: the applier compares it again where it uses the file."""
    next_manifest: SnapshotManifest | None = None
    """What we understand of the next snapshot's manifest, as the delta ships it."""
    next_listed: dict[str, str] = field(default_factory=dict)
    """{path: sha256} of the next snapshot's CHECKSUMS.sha256, manifest.json left out."""
    table_columns: dict[str, Columns] = field(default_factory=dict)
    """{table path: the columns it must have after the apply} for every ``change`` entry of a
    delta without ``schema_break`` whose next manifest records none: the parent table's."""
    change_stats: dict[str, ChangeStats] = field(default_factory=dict)
    """{table path in the snapshot: row counts} for every ``change`` entry."""
    column_order: dict[str, tuple[str, ...]] = field(default_factory=dict)
    """{table path: the next manifest's column order} for every ``change`` entry."""
    bytes_hashed: int = 0
    hashed_at_ns: int = 0
    """No later than the moment hashing the files began (``time.time_ns()``): the date of
    these hashes in a hash cache."""

    @property
    def manifest(self) -> DeltaManifest:
        return self.head.manifest


def _regular_file(path: Path, *, what: str, field_name: str, source: Path) -> os.stat_result:
    """lstat ``path``; refuse a symlink, a missing file or anything but a regular file."""
    try:
        st = path.lstat()
    except FileNotFoundError:
        raise ManifestError(
            f"{what} {path} does not exist", path=source, field=field_name
        ) from None
    if stat.S_ISLNK(st.st_mode):
        raise UnsafePathError(
            f"{what} {path} is a symbolic link; expected a regular file",
            path=source,
            field=field_name,
        )
    if not stat.S_ISREG(st.st_mode):
        raise ManifestError(f"{what} {path} is not a regular file", path=source, field=field_name)
    return st


def read_delta_head(delta: Path) -> DeltaHead:
    """Read the delta's manifest.json and CHECKSUMS.sha256 and check they agree.

    Raises
    ------
    ManifestError
        A file is missing or malformed.
    ChecksumMismatchError
        CHECKSUMS.sha256 does not list manifest.json, or lists another sha256 for it.
    UnsafePathError
        Either file is a symbolic link, or CHECKSUMS.sha256 lists an unsafe path.
    """
    if not delta.is_dir():
        raise ManifestError("is not a delta folder (no such directory)", path=delta)
    manifest_path, checksums_path = delta / MANIFEST, delta / CHECKSUMS
    _regular_file(manifest_path, what="the delta's", field_name=MANIFEST, source=delta)
    _regular_file(checksums_path, what="the delta's", field_name=CHECKSUMS, source=delta)
    raw = manifest_path.read_bytes()
    listed = parse_checksums(checksums_path.read_bytes(), source=checksums_path)
    for rel in listed:
        field_name = f"line for {quoted_path(rel)}"
        safe_relpath(rel, field_name=field_name, source=checksums_path)
        refuse_unusable_path(delta, rel, source=checksums_path, field_name=field_name)
    actual = sha256_bytes(raw)
    if MANIFEST not in listed:
        raise ChecksumMismatchError(
            f"does not list {MANIFEST}; expected a line '{actual}  {MANIFEST}'",
            path=checksums_path,
            field=MANIFEST,
        )
    if listed[MANIFEST] != actual:
        raise ChecksumMismatchError(
            f"lists {MANIFEST} with sha256 {listed[MANIFEST]}, but the file hashes to {actual}",
            path=checksums_path,
            field=MANIFEST,
        )
    manifest = DeltaManifest.parse(raw, source=manifest_path)
    return DeltaHead(folder=delta, manifest=manifest, manifest_sha256=actual, listed=listed)


def refuse_symlinks_in(folder: Path) -> None:
    """Refuse any symbolic link anywhere below ``folder`` (files and folders alike)."""
    for root, dirs, files in os.walk(folder, followlinks=False):
        for name in (*dirs, *files):
            path = Path(root, name)
            if path.is_symlink():
                rel = path.relative_to(folder).as_posix()
                raise UnsafePathError(
                    f"{quoted_path(rel)} is a symbolic link; a delta holds regular files only",
                    path=folder,
                    field=rel,
                )


def check_delta_files(head: DeltaHead) -> CheckedDelta:
    """Hash every file the delta lists (once each, in parallel) and check every entry.

    Checks, in order: no symbolic link in the delta; every entry's source exists, is a regular
    file and is listed in CHECKSUMS.sha256; every listed file exists; every file hashes to its
    CHECKSUMS.sha256 line and to its manifest entry; the next snapshot's manifest.json hashes to
    ``next.manifest_sha256`` and names ``next.bundle_id`` if it names any; its CHECKSUMS.sha256
    parses and lists that manifest with that sha256 (and agrees with the manifest's ``files``
    when it has them); every entry agrees with that CHECKSUMS.sha256 (a whole file with the
    same sha256, a changed table listed, a deleted path unlisted).
    """
    delta, manifest, listed = head.folder, head.manifest, head.listed
    manifest_path = delta / MANIFEST
    refuse_symlinks_in(delta)
    for index, entry in enumerate(manifest.files):
        if entry.source is None:
            continue
        where = f"files[{index}].source"
        refuse_unusable_path(delta, entry.source, source=manifest_path, field_name=where)
        _regular_file(
            delta / entry.source, what="the source", field_name=where, source=manifest_path
        )
        if entry.source not in listed:
            raise ChecksumMismatchError(
                f"the source {quoted_path(entry.source)} of {quoted_path(entry.path)} is not "
                f"listed in {CHECKSUMS}",
                path=manifest_path,
                field=where,
            )
    paths = {rel: delta / rel for rel in listed if rel != MANIFEST}
    for rel, path in paths.items():
        _regular_file(path, what="the listed file", field_name=rel, source=delta / CHECKSUMS)
    started_ns = time.time_ns()
    stamps = {rel: FileStamp.of(path) for rel, path in paths.items()}
    hashes, dated_ns = _cached_hashes(delta, paths)
    unknown = {rel: path for rel, path in paths.items() if rel not in hashes}
    by_path = sha256_files(unknown.values())
    hashes.update({rel: by_path[path] for rel, path in unknown.items()})
    hashes[MANIFEST] = head.manifest_sha256
    for rel, digest in hashes.items():
        if digest != listed[rel]:
            raise ChecksumMismatchError(
                f"{quoted_path(rel)} hashes to {digest}; {CHECKSUMS} lists {listed[rel]}",
                path=delta / CHECKSUMS,
                field=rel,
            )
    for index, entry in enumerate(manifest.files):
        if entry.source is not None and hashes[entry.source] != entry.sha256:
            raise ChecksumMismatchError(
                f"the source {quoted_path(entry.source)} of {quoted_path(entry.path)} hashes to "
                f"{hashes[entry.source]}; the manifest names {entry.sha256}",
                path=manifest_path,
                field=f"files[{index}].sha256",
            )
    next_manifest, next_listed = check_next_snapshot(
        manifest, delta, lambda rel: (delta / rel).read_bytes()
    )
    return CheckedDelta(
        head=head,
        hashes=hashes,
        stamps=stamps,
        next_manifest=next_manifest,
        next_listed=next_listed,
        bytes_hashed=sum(stamps[rel].size for rel in unknown),
        hashed_at_ns=min([started_ns, *dated_ns]),
    )


def _cached_hashes(delta: Path, paths: dict[str, Path]) -> tuple[dict[str, str], list[int]]:
    """{path: sha256} of the files the delta's own hash cache vouches for (the hashes a fetch
    verified as the files arrived: ``.skewtape/hashes.json`` in the delta, trusted while each
    file's stamp holds, racy entries excepted), and the dates of those hashes."""
    cache = HashCache(hash_cache_path(delta))
    found = {rel: cache.lookup_dated(rel, path) for rel, path in paths.items()}
    vouched = {rel: entry for rel, entry in found.items() if entry is not None}
    return {rel: entry[0] for rel, entry in vouched.items()}, [e[1] for e in vouched.values()]


def _check_entries_against_next(
    manifest: DeltaManifest, next_listed: dict[str, str], source: Path
) -> None:
    """Every entry agrees with the next snapshot's CHECKSUMS.sha256 (``next_listed``): a deleted
    path is not listed, any other path is, and a whole file ships with its listed sha256."""
    for index, entry in enumerate(manifest.files[:-2]):
        where = f"files[{index}]"
        listed = next_listed.get(entry.path)
        if entry.op == "delete" and listed is not None:
            raise ManifestError(
                f"deletes {quoted_path(entry.path)}, which the next snapshot's {CHECKSUMS} still "
                "lists",
                path=source,
                field=where + ".path",
            )
        if entry.op != "delete" and listed is None:
            raise ManifestError(
                f"{entry.op}s {quoted_path(entry.path)}, which the next snapshot's {CHECKSUMS} "
                "does not list",
                path=source,
                field=where + ".path",
            )
        if entry.op in ("add", "replace") and listed != entry.sha256:
            raise ManifestError(
                f"ships {quoted_path(entry.path)} with sha256 {entry.sha256}; the next snapshot's "
                f"{CHECKSUMS} lists {listed}",
                path=source,
                field=where + ".sha256",
            )


def check_next_snapshot(
    manifest: DeltaManifest, delta: Path, read: Callable[[str], bytes]
) -> tuple[SnapshotManifest, dict[str, str]]:
    """The next snapshot's manifest (what we understand of it) and CHECKSUMS.sha256 as the
    delta ships them (``read``: the bytes of a delta-relative path; nothing is hashed), checked
    against each other and against the delta's entries. ``delta`` names the files in errors.

    Refuses (a :class:`ManifestError`, or :class:`UnsafePathError` for a path leaving the
    folder; each naming the file and the field or path concerned) a next manifest
    whose sha256 is not ``next.manifest_sha256`` or whose bundle id, when it records one, is
    not ``next.bundle_id``; a next CHECKSUMS.sha256 that is malformed, lists an unsafe path,
    or does not list that manifest with that sha256; a next manifest whose ``files``, when it
    lists them, disagree with that CHECKSUMS.sha256; and an entry that disagrees with it
    (:func:`_check_entries_against_next`). The apply runs it before anything is written, and
    the fetch before it places a delta.
    """
    next_manifest, next_listed = _check_next_snapshot_files(manifest, delta, read)
    _check_entries_against_next(manifest, next_listed, delta / MANIFEST)
    return next_manifest, next_listed


def _check_next_snapshot_files(
    manifest: DeltaManifest, delta: Path, read: Callable[[str], bytes]
) -> tuple[SnapshotManifest, dict[str, str]]:
    """The next snapshot's manifest and CHECKSUMS.sha256, checked as :func:`check_next_snapshot`
    says (all but the entries)."""
    manifest_path = delta / MANIFEST
    checksums_entry, manifest_entry = manifest.files[-2], manifest.files[-1]
    last = len(manifest.files) - 1
    if manifest_entry.sha256 != manifest.next.manifest_sha256:
        raise ManifestError(
            f"the next snapshot's {MANIFEST} has sha256 {manifest_entry.sha256}, but "
            f"next.manifest_sha256 is {manifest.next.manifest_sha256}; they must be equal",
            path=manifest_path,
            field=f"files[{last}].sha256",
        )
    assert manifest_entry.source is not None and checksums_entry.source is not None
    next_manifest_path = delta / manifest_entry.source
    next_manifest = SnapshotManifest.parse(read(manifest_entry.source), source=next_manifest_path)
    if next_manifest.bundle_id not in (None, manifest.next.bundle_id):
        raise ManifestError(
            f"is {quoted(next_manifest.bundle_id)}; the delta's next.bundle_id is "
            f"{quoted(manifest.next.bundle_id)}",
            path=next_manifest_path,
            field="bundle_id",
        )
    next_checksums = delta / checksums_entry.source
    listed = parse_checksums(read(checksums_entry.source), source=next_checksums)
    for rel in listed:
        safe_relpath(rel, field_name=f"line for {quoted_path(rel)}", source=next_checksums)
    if listed.get(MANIFEST) != manifest.next.manifest_sha256:
        raise ManifestError(
            f"lists {MANIFEST} with sha256 {listed.get(MANIFEST)}; expected the delta's "
            f"next.manifest_sha256 {manifest.next.manifest_sha256}",
            path=next_checksums,
            field=MANIFEST,
        )
    next_listed = {rel: digest for rel, digest in listed.items() if rel != MANIFEST}
    _check_next_manifest_files(next_manifest, next_listed, next_manifest_path)
    return next_manifest, next_listed


def _check_next_manifest_files(
    next_manifest: SnapshotManifest, next_listed: dict[str, str], source: Path
) -> None:
    """When the next manifest lists files, refuse the first that CHECKSUMS.sha256 lists
    differently (or not at all), and the first file it lists that the manifest does not."""
    if next_manifest.files is None:
        return
    described = next_manifest.by_path()
    for rel in sorted(described.keys() | next_listed.keys()):
        entry, listed = described.get(rel), next_listed.get(rel)
        if entry is None or entry.sha256 != listed:
            found = f"sha256 {entry.sha256}" if entry is not None else "no entry"
            raise ManifestError(
                f"has {found} for {quoted_path(rel)}; the next snapshot's {CHECKSUMS} lists "
                f"{listed}",
                path=source,
                field="files",
            )


# --- change files -------------------------------------------------------------------------------


def merged_columns(columns: Columns) -> Columns:
    """``columns`` as a DuckDB merge writes them back to Parquet: it keeps names, order and
    types, but writes large strings and binaries as plain ones and dictionaries as their values
    (Arrow-only distinctions a Parquet file without pyarrow's schema metadata does not carry)."""
    return tuple((name, _plain_type(kind)) for name, kind in columns)


def _plain_type(kind: str) -> str:
    if kind.startswith("dictionary<values="):
        kind = kind[len("dictionary<values=") :].split(", indices=")[0]
    return {"large_string": "string", "large_binary": "binary", "large_utf8": "string"}.get(
        kind, kind
    )


def check_change_files(
    checked: CheckedDelta, con: duckdb.DuckDBPyConnection, *, base_root: Path
) -> None:
    """Validate every ``change`` entry's file and the table it applies to; fill ``change_stats``.

    A change file must have an ``op`` string column holding only ``upsert``/``delete`` and a
    ``row`` struct column holding the table's key columns, never null, each key at most once.
    The table must exist in ``base_root`` with the same key columns, of the same kind; without
    ``schema_break``, a file that upserts must have exactly the table's columns and types in its
    ``row`` struct (:func:`~skewtape_pipeline.mirror.tables.row_misfit`); and the merge must give
    the columns the next snapshot's manifest lists for the table. Where that manifest lists none
    and the delta has no ``schema_break``, the table's columns after the merge must be the parent
    table's (recorded in ``table_columns`` for the final verification).
    Raises :class:`ChangeFileError` naming the file, the column or row and the value.
    """
    expected = checked.next_manifest.by_path() if checked.next_manifest else {}
    for index, entry in enumerate(checked.manifest.files):
        if entry.op != "change":
            continue
        assert entry.source is not None
        changes = checked.head.folder / entry.source
        keys = TABLE_KEYS[entry.path]
        row_type = _check_change_schema(changes, keys)
        base = _check_base_table(base_root / entry.path, row_type, keys, changes, index)
        stats = _check_change_rows(con, changes, keys)
        if stats.upserts and not checked.manifest.schema_break:
            misfit = row_misfit(base, row_type)
            if misfit is not None:
                column, why = misfit
                raise ChangeFileError(
                    f"upserts rows that do not fit the table {entry.path}: the row {why}; "
                    "without schema_break an upsert row holds exactly the table's columns, "
                    "with their types",
                    path=changes,
                    field=f"row.{column}",
                )
        merged = list(base.names) + [
            row_type.field(i).name
            for i in range(row_type.num_fields)
            if row_type.field(i).name not in base.names
        ]
        columns = expected[entry.path].columns if entry.path in expected else None
        if columns is not None:
            names = tuple(name for name, _ in columns)
            if sorted(names) != sorted(merged):
                raise ChangeFileError(
                    f"merging it into {entry.path} gives the columns {merged}; the next "
                    f"snapshot's manifest lists {list(names)}",
                    path=changes,
                    field="row",
                )
            checked.column_order[entry.path] = names
        elif not checked.manifest.schema_break:
            checked.table_columns[entry.path] = merged_columns(schema_columns(base))
        checked.change_stats[entry.path] = stats


def _check_change_schema(changes: Path, keys: tuple[str, ...]) -> pa.StructType:
    try:
        schema = pq.read_schema(local_path(changes))
    except (pa.ArrowException, OSError) as exc:
        raise ChangeFileError(f"is not a readable Parquet file ({exc})", path=changes) from None
    for name in ("op", "row"):
        if schema.get_field_index(name) < 0:
            raise ChangeFileError(
                f"has columns {schema.names}; expected an 'op' and a 'row' column",
                path=changes,
                field=name,
            )
    op_type, row_type = schema.field("op").type, schema.field("row").type
    if not (pa.types.is_string(op_type) or pa.types.is_large_string(op_type)):
        raise ChangeFileError(f"has type {op_type}; expected a string", path=changes, field="op")
    if not pa.types.is_struct(row_type):
        raise ChangeFileError(f"has type {row_type}; expected a struct", path=changes, field="row")
    names = {row_type.field(i).name for i in range(row_type.num_fields)}
    missing = [key for key in keys if key not in names]
    if missing:
        raise ChangeFileError(
            f"lacks the key columns {missing}; expected the keys {list(keys)} in the row struct",
            path=changes,
            field="row",
        )
    return row_type


def _kind(arrow_type: pa.DataType) -> str:
    for name, test in (
        ("integer", pa.types.is_integer),
        ("string", lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)),
        ("timestamp", pa.types.is_timestamp),
        ("date", pa.types.is_date),
        ("number", lambda t: pa.types.is_floating(t) or pa.types.is_decimal(t)),
    ):
        if test(arrow_type):
            return name
    return str(arrow_type)


def _check_base_table(
    table: Path, row_type: pa.StructType, keys: tuple[str, ...], changes: Path, index: int
) -> pa.Schema:
    if table.is_symlink() or not table.is_file():
        raise ChangeFileError(
            f"changes the table {table}, which the snapshot does not hold as a regular file",
            path=changes,
            field=f"files[{index}].path",
        )
    try:
        schema = pq.read_schema(local_path(table))
    except (pa.ArrowException, OSError) as exc:
        raise ChangeFileError(
            f"changes the table {table}, which is not a readable Parquet file ({exc})",
            path=changes,
        ) from None
    for key in keys:
        if schema.get_field_index(key) < 0:
            raise ChangeFileError(
                f"changes the table {table}, which has no key column {quoted(key)}",
                path=changes,
                field=f"row.{key}",
            )
        base_kind, change_kind = _kind(schema.field(key).type), _kind(row_type.field(key).type)
        if base_kind != change_kind:
            raise ChangeFileError(
                f"has the key {quoted(key)} as {row_type.field(key).type}; the table {table} "
                f"has it as {schema.field(key).type}",
                path=changes,
                field=f"row.{key}",
            )
    return schema


def _quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _one_row(con: duckdb.DuckDBPyConnection, sql: str, parameters: dict) -> tuple | None:
    """The first row of ``sql`` on ``con``, a statement Ctrl-C stops at once."""
    return interruptible(con, lambda: con.execute(sql, parameters).fetchone())


def _check_change_rows(
    con: duckdb.DuckDBPyConnection, changes: Path, keys: tuple[str, ...]
) -> ChangeStats:
    key_nulls = " OR ".join(f"row.{_quote(key)} IS NULL" for key in keys)
    which_null = " ".join(f"WHEN row.{_quote(key)} IS NULL THEN '{key}'" for key in keys)
    upserts, deletes, bad_op_row, bad_op, null_key_row, null_key = _one_row(
        con,
        f"""
        SELECT
          count(*) FILTER (WHERE op = 'upsert'),
          count(*) FILTER (WHERE op = 'delete'),
          min(file_row_number) FILTER (WHERE op IS NULL OR op NOT IN ('upsert', 'delete')),
          arg_min(coalesce(op, '<null>'), file_row_number)
            FILTER (WHERE op IS NULL OR op NOT IN ('upsert', 'delete')),
          min(file_row_number) FILTER (WHERE row IS NULL OR {key_nulls}),
          arg_min(CASE WHEN row IS NULL THEN 'row' {which_null} END, file_row_number)
            FILTER (WHERE row IS NULL OR {key_nulls})
        FROM read_parquet($changes, file_row_number = true)
        """,
        {"changes": str(changes)},
    )
    if bad_op_row is not None:
        raise ChangeFileError(
            f"row {bad_op_row} has op {quoted(bad_op)}; expected one of {', '.join(CHANGE_OPS)}",
            path=changes,
            field="op",
        )
    if null_key_row is not None:
        raise ChangeFileError(
            f"row {null_key_row} has a null {quoted(null_key)}; every row needs the keys "
            f"{list(keys)}",
            path=changes,
            field="row",
        )
    key_list = ", ".join(f"row.{_quote(key)}::VARCHAR" for key in keys)
    duplicate = _one_row(
        con,
        f"""
        SELECT [{key_list}], list(file_row_number ORDER BY file_row_number)
        FROM read_parquet($changes, file_row_number = true)
        GROUP BY ALL HAVING count(*) > 1 LIMIT 1
        """,
        {"changes": str(changes)},
    )
    if duplicate is not None:
        raise ChangeFileError(
            f"the key {dict(zip(keys, duplicate[0], strict=True))} appears in rows "
            f"{duplicate[1][:5]}; each key may change once per delta",
            path=changes,
            field="row",
        )
    return ChangeStats(upserts=int(upserts), deletes=int(deletes))


# --- the snapshot side ----------------------------------------------------------------------------


def refuse_unusable_path(root: Path, rel: str, *, source: Path, field_name: str) -> None:
    """Refuse ``rel`` when a file operation at ``root / rel`` could not be carried out on this
    system, so that no such operation first fails past an apply's commit point.

    ``root`` is the deepest folder the path is used below (a staging folder, which need not
    exist yet; the file system's limits are read at its nearest existing folder). Refused: a
    path this system's file name encoding cannot hold (a lone surrogate such as ``\ud800``),
    a part longer than the file system's name limit, and a whole path longer than its path
    limit. Raises :class:`UnsafePathError` naming ``field_name``.
    """

    def refuse(why: str) -> UnsafePathError:
        return UnsafePathError(
            f"refusing the path {quoted_path(rel)}: {why}", path=source, field=field_name
        )

    try:
        encoded = os.fsencode(rel)
    except UnicodeEncodeError as exc:
        raise refuse(
            f"{quoted(exc.object[exc.start : exc.end])} cannot be encoded as a file name here "
            f"({sys.getfilesystemencoding()})"
        ) from None
    existing = next(folder for folder in (root, *root.parents) if folder.is_dir())
    name_max = os.pathconf(existing, "PC_NAME_MAX")
    for part in encoded.split(b"/"):
        if len(part) > name_max:
            raise refuse(f"a name of {len(part)} bytes; this file system allows {name_max}")
    path_max = os.pathconf(existing, "PC_PATH_MAX")
    full = len(os.fsencode(root.absolute())) + 1 + len(encoded)
    if full >= path_max:
        raise refuse(f"{full} bytes as a full path; this file system allows {path_max - 1}")


def refuse_symlinked_components(root: Path, rel: str, *, source: Path, field_name: str) -> None:
    """Refuse ``rel`` if any existing component of ``root / rel`` is a symbolic link."""
    current = root
    for part in rel.split("/"):
        current = current / part
        if current.is_symlink():
            raise UnsafePathError(
                f"{current} is a symbolic link; refusing to write {quoted_path(rel)} through it",
                path=source,
                field=field_name,
            )
        if not current.exists():
            return

"""A second Skewtape publisher, written from the published delta format (the seed) alone.

It shares no code with ``skewtape_pipeline`` (neither the sample publisher nor the engine): it
imports only the standard library, pyarrow and its own constants. It writes exactly what the
seed publishes and nothing more, spelled its own way:

- a snapshot folder: the files given, a ``manifest.json`` that is, as far as the seed goes, a
  file named by its sha256 (here: a bundle id and, in some styles, fields nobody else knows),
  and a ``CHECKSUMS.sha256`` of every file but itself;
- a delta folder: ``manifest.json`` with only the published fields (``parent``/``next`` with
  ``bundle_id`` and ``manifest_sha256``, ``next.venues``, ``next.omitted_venues``,
  ``schema_break``, ``files`` with ``path``, ``op``, ``source``, ``sha256``), in its own key
  order and JSON formatting; ``CHECKSUMS.sha256`` of every delta file; ``snapshot/<path>``
  whole files; ``changes/<table>.parquet`` with an ``op`` and a ``row`` column.

Month and text files that differ are added, replaced or deleted whole; a reference table whose
bytes differ is a ``change`` (upserts of new or changed rows, deletes by key for rows gone),
or, on a ``schema_break``, ships whole with ``replace``. The next snapshot's CHECKSUMS.sha256
and manifest.json come last. :class:`Style` chooses the spelling: JSON indent and separators,
key order, entry order, and CHECKSUMS lines (binary ``*`` lines, uppercase hex, CRLF, no final
newline), all forms ``sha256sum -c`` reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

KEYS = {
    "markets.parquet": ("venue", "market_id"),
    "resolutions.parquet": ("venue", "market_id", "seq"),
    "matched_events.parquet": ("event_id",),
    "fees.parquet": ("venue", "category", "effective_from"),
}
MANIFEST = "manifest.json"
CHECKSUMS = "CHECKSUMS.sha256"

Content = dict[str, bytes | pa.Table]
"""A snapshot's files: {path: bytes} for month and text files, {table path: rows} for tables."""


@dataclass(frozen=True)
class Style:
    """How the publisher spells its files. Every choice is one the seed allows."""

    indent: int | None = None
    separators: tuple[str, str] = (",", ":")
    reverse_keys: bool = True
    """JSON keys in the reverse of the seed's order (``files`` first, ``path`` last)."""
    entries_descending: bool = True
    """Delta entries (before the two seal files) in descending path order."""
    binary_lines: bool = True
    upper_hex: bool = True
    crlf: bool = True
    final_newline: bool = False
    unknown_fields: bool = False
    """Add fields the seed does not name (a reader must ignore them)."""
    changes_columns_reversed: bool = True
    """``row`` before ``op`` in change files, deletes before upserts."""


STYLES = {
    "terse": Style(),
    "pretty": Style(
        indent=4,
        separators=(", ", " : "),
        reverse_keys=False,
        entries_descending=False,
        binary_lines=False,
        upper_hex=False,
        crlf=False,
        final_newline=True,
        unknown_fields=True,
        changes_columns_reversed=False,
    ),
    "mixed": Style(indent=1, separators=(",", ": "), upper_hex=False, unknown_fields=True),
}


@dataclass(frozen=True)
class Published:
    """A snapshot this publisher wrote: where, its bundle id, its manifest's sha256, venues."""

    folder: Path
    bundle_id: str
    manifest_sha256: str
    venues: tuple[str, ...]


def sha256_hex(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(1 << 20):
            digest.update(block)
    return digest.hexdigest()


def _json(data: dict, style: Style) -> bytes:
    ordered = _reordered(data) if style.reverse_keys else data
    return json.dumps(ordered, indent=style.indent, separators=style.separators).encode()


def _reordered(value):
    if isinstance(value, dict):
        return {key: _reordered(value[key]) for key in reversed(list(value))}
    if isinstance(value, list):
        return [_reordered(item) for item in value]
    return value


def _checksum_line(rel: str, digest: str, style: Style) -> str:
    """One line as ``sha256sum`` writes it (escaped form for a backslash or newline)."""
    digest = digest.upper() if style.upper_hex else digest
    mark = "*" if style.binary_lines else " "
    if "\\" in rel or "\n" in rel or "\r" in rel:
        name = rel.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r")
        return f"\\{digest} {mark}{name}"
    return f"{digest} {mark}{rel}"


def _checksums(lines: list[str], style: Style) -> bytes:
    end = "\r\n" if style.crlf else "\n"
    return (end.join(lines) + (end if style.final_newline else "")).encode()


def _files_below(folder: Path) -> dict[str, Path]:
    found = {}
    for dirpath, _, names in os.walk(folder):
        for name in names:
            path = Path(dirpath, name)
            found[path.relative_to(folder).as_posix()] = path
    return found


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def _table_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="snappy")
    return sink.getvalue().to_pybytes()


# --- snapshots ---------------------------------------------------------------------------------


def publish_snapshot(
    folder: Path,
    content: Content,
    *,
    bundle_id: str,
    venues: tuple[str, ...],
    style: Style,
    manifest_fields: dict | None = None,
) -> Published:
    """Write ``content`` into the new folder ``folder`` and seal it (manifest, CHECKSUMS).

    ``manifest_fields`` are added to the manifest as given (fields the seed does not define:
    a reader must not depend on them)."""
    folder.mkdir(parents=True)
    for rel, value in content.items():
        _write(folder / rel, _table_bytes(value) if isinstance(value, pa.Table) else value)
    return seal_folder(
        folder, bundle_id=bundle_id, venues=venues, style=style, manifest_fields=manifest_fields
    )


def seal_folder(
    folder: Path,
    *,
    bundle_id: str,
    venues: tuple[str, ...],
    style: Style,
    manifest_fields: dict | None = None,
) -> Published:
    """Seal the files already in ``folder`` as a snapshot: write its manifest.json, then a
    CHECKSUMS.sha256 of every file but itself. See :func:`publish_snapshot`."""
    manifest: dict = {"bundle_id": bundle_id}
    if style.unknown_fields:
        manifest |= {"publisher": {"name": "minimal", "spec": "seed"}, "venue_count": len(venues)}
    manifest |= manifest_fields or {}
    raw = _json(manifest, style)
    _write(folder / MANIFEST, raw)
    files = _files_below(folder)
    order = sorted(files, reverse=style.entries_descending)
    lines = [_checksum_line(rel, sha256_of(files[rel]), style) for rel in order]
    _write(folder / CHECKSUMS, _checksums(lines, style))
    return Published(folder, bundle_id, sha256_hex(raw), venues)


# --- deltas ------------------------------------------------------------------------------------


def publish_delta(
    parent: Published,
    nxt: Published,
    out: Path,
    *,
    omitted_venues: tuple[str, ...] = (),
    schema_break: bool = False,
    style: Style,
) -> Path:
    """Write the delta taking ``parent`` to ``nxt`` into the new folder ``out``; returns it."""
    out.mkdir(parents=True)
    old = {k: v for k, v in _files_below(parent.folder).items() if k not in (MANIFEST, CHECKSUMS)}
    new = {k: v for k, v in _files_below(nxt.folder).items() if k not in (MANIFEST, CHECKSUMS)}
    entries = []
    for rel in sorted(old.keys() | new.keys(), reverse=style.entries_descending):
        entry = _entry(rel, old.get(rel), new.get(rel), out, schema_break, style)
        if entry is not None:
            entries.append(entry)
    for rel in (CHECKSUMS, MANIFEST):
        entries.append(_ship(rel, nxt.folder / rel, "replace", out, style))
    manifest = {
        "parent": {"bundle_id": parent.bundle_id, "manifest_sha256": parent.manifest_sha256},
        "next": {
            "bundle_id": nxt.bundle_id,
            "manifest_sha256": nxt.manifest_sha256,
            "venues": list(nxt.venues),
            "omitted_venues": list(omitted_venues),
        },
        "schema_break": schema_break,
        "files": entries,
    }
    if style.unknown_fields:
        manifest["published_at"] = "2026-12-01T00:00:00Z"
        manifest["next"]["notes"] = {"nested": [1, {"deeper": True}]}
    raw = _json(manifest, style)
    _write(out / MANIFEST, raw)
    _seal_delta(out, raw, style)
    return out


def _entry(rel: str, old: Path | None, new: Path | None, out: Path, schema_break, style):
    if new is None:
        entry = {"path": rel, "op": "delete"}
        return entry | {"reason": "gone"} if style.unknown_fields else entry
    if old is None:
        return _ship(rel, new, "add", out, style)
    if sha256_of(old) == sha256_of(new):
        return None
    if rel in KEYS and not schema_break:
        return _change(rel, pq.read_table(old), pq.read_table(new), out, style)
    return _ship(rel, new, "replace", out, style)


def _ship(rel: str, file: Path, op: str, out: Path, style: Style) -> dict:
    source = f"snapshot/{rel}"
    (out / source).parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(file, out / source)
    entry = {"path": rel, "op": op, "source": source, "sha256": sha256_of(out / source)}
    return entry | {"bytes": file.stat().st_size} if style.unknown_fields else entry


def _change(rel: str, old: pa.Table, new: pa.Table, out: Path, style: Style) -> dict:
    """A change entry: upserts of new or changed rows, deletes (keys only) of rows gone."""
    upserted, deleted = _changed_rows(old, new, KEYS[rel])
    columns = []
    for field in new.schema:
        tail = (
            deleted[field.name] if field.name in KEYS[rel] else pa.nulls(len(deleted), field.type)
        )
        columns.append(pa.concat_arrays([_array(upserted[field.name]), _array(tail)]))
    rows = pa.StructArray.from_arrays(columns, fields=[f.with_nullable(True) for f in new.schema])
    ops = pa.array(["upsert"] * len(upserted) + ["delete"] * len(deleted), pa.string())
    changes = pa.table({"op": ops, "row": rows})
    if style.changes_columns_reversed:
        order = list(range(len(upserted), len(ops))) + list(range(len(upserted)))
        changes = changes.select(["row", "op"]).take(pa.array(order, pa.int64()))
    source = f"changes/{rel}"
    _write(out / source, _table_bytes(changes))
    return {"path": rel, "op": "change", "source": source, "sha256": sha256_of(out / source)}


def _array(column) -> pa.Array:
    return column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column


def _changed_rows(old: pa.Table, new: pa.Table, keys: tuple[str, ...]):
    """(rows of ``new`` that are new or differ from ``old``, keys of ``old`` rows gone)."""
    marked = old.append_column("__old_row", pa.array(range(old.num_rows), pa.int64()))
    joined = new.join(marked, list(keys), join_type="left outer", right_suffix="__old",
                      use_threads=False)  # fmt: skip
    differs = pc.is_null(joined["__old_row"])
    for name in new.column_names:
        if name in keys:
            continue
        a, b = joined[name], joined[name + "__old"]
        same = pc.or_(pc.fill_null(pc.equal(a, b), False), pc.and_(pc.is_null(a), pc.is_null(b)))
        differs = pc.or_(differs, pc.invert(same))
    upserted = joined.filter(differs).select(new.column_names)
    deleted = old.join(new.select(list(keys)), list(keys), join_type="left anti",
                       use_threads=False).select(list(keys))  # fmt: skip
    by_key = [(key, "ascending") for key in keys]
    return upserted.sort_by(by_key), deleted.sort_by(by_key)


def _seal_delta(out: Path, manifest_raw: bytes, style: Style) -> None:
    """CHECKSUMS.sha256 of every file of the delta. The manifest's own line is a lowercase text
    line: the seed's reference applier looks for exactly ``<sha256>  manifest.json``."""
    files = _files_below(out)
    order = sorted((rel for rel in files if rel != MANIFEST), reverse=style.entries_descending)
    lines = [_checksum_line(rel, sha256_of(files[rel]), style) for rel in order]
    lines.insert(len(lines) // 2, f"{sha256_hex(manifest_raw)}  {MANIFEST}")
    _write(out / CHECKSUMS, _checksums(lines, style))

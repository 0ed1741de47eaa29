"""The published reference applier, verbatim from the Skewtape delta format (the seed).

The only adaptation: the seed's last line, which applies ``deltas/2026-12`` to
``history/2026-11`` in the working folder, is left out, so that importing this module runs
nothing. Tests call :func:`apply_delta` as the oracle our applier must agree with.
"""

# ruff: noqa
# fmt: off

import hashlib
import json
import pathlib
import shutil

import duckdb

KEYS = {
    "markets.parquet": ["venue", "market_id"],
    "resolutions.parquet": ["venue", "market_id", "seq"],
    "matched_events.parquet": ["event_id"],
    "fees.parquet": ["venue", "category", "effective_from"],
}


def sha256(path):
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def inside(root, rel):
    """root / rel, refusing a path that would leave root."""
    parts = pathlib.PurePosixPath(rel).parts
    if not parts or rel.startswith("/") or ".." in parts:
        raise ValueError(f"refusing the path {rel!r}")
    return root.joinpath(*parts)


def apply_delta(snapshot, delta):
    snapshot, delta = pathlib.Path(snapshot), pathlib.Path(delta)
    raw = (delta / "manifest.json").read_bytes()
    listed = (delta / "CHECKSUMS.sha256").read_text().splitlines()
    if f"{hashlib.sha256(raw).hexdigest()}  manifest.json" not in listed:
        raise ValueError("the delta's CHECKSUMS.sha256 does not list its manifest.json")
    manifest = json.loads(raw)
    parent, nxt = manifest["parent"], manifest["next"]
    if sha256(snapshot / "manifest.json") not in (parent["manifest_sha256"], nxt["manifest_sha256"]):
        raise ValueError(f"{snapshot} holds neither {parent['bundle_id']} nor {nxt['bundle_id']}")
    con = duckdb.connect()
    for f in manifest["files"]:
        target = inside(snapshot, f["path"])
        if f["op"] == "delete":
            target.unlink(missing_ok=True)
            continue
        source = inside(delta, f["source"])
        if sha256(source) != f["sha256"]:
            raise ValueError(f"{source} is not the file the delta's manifest names")
        if f["op"] in ("add", "replace"):
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(source, target)
        elif f["op"] == "change":
            keys = ", ".join(KEYS[f["path"]])
            new = target.with_name(target.name + ".new")
            con.sql(
                f"""
                SELECT * FROM (
                  SELECT base.* FROM read_parquet($target) AS base
                  ANTI JOIN (SELECT row.* FROM read_parquet($changes)) AS ch USING ({keys})
                  UNION ALL BY NAME
                  SELECT row.* FROM read_parquet($changes) WHERE op = 'upsert'
                ) ORDER BY {keys}
                """,
                params={"target": str(target), "changes": str(source)},
            ).write_parquet(str(new))
            new.replace(target)
        else:
            raise ValueError(f"unknown op {f['op']!r} for {f['path']}")

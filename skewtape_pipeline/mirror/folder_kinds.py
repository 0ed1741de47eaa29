"""What a folder given to a command is: a snapshot, a delta, a history folder of month snapshots
or a folder of month deltas, so that a mistaken argument is refused naming the mistake.

A delta is told from a snapshot by its ``manifest.json``: the published delta format gives it a
``parent`` and a ``next`` object, which no snapshot manifest has. Read-only; only manifests
are read, nothing is hashed.
"""

from __future__ import annotations

from pathlib import Path

from skewtape_pipeline.errors import MalformedJsonError, WrongFolderError
from skewtape_pipeline.fsio import read_json_file
from skewtape_pipeline.mirror.format import MANIFEST, MONTH_RE

SNAPSHOT, DELTA = "snapshot", "delta"
HISTORY, DELTAS = "history", "deltas"
OTHER = "other"

DESCRIBED = {
    SNAPSHOT: "a snapshot",
    DELTA: "a delta (its manifest.json names a parent and a next snapshot)",
    HISTORY: "a history folder of <YYYY-MM>/ snapshots",
    DELTAS: "a folder of <YYYY-MM>/ deltas",
}
NAMED = {
    SNAPSHOT: "a snapshot",
    DELTA: "a delta",
    HISTORY: "a history folder",
    DELTAS: "a deltas folder",
}


def month_folders(folder: Path) -> list[str]:
    """Names of the ``YYYY-MM`` sub-folders of ``folder``, sorted (other names skipped)."""
    if not folder.is_dir():
        return []
    return sorted(p.name for p in folder.iterdir() if p.is_dir() and MONTH_RE.match(p.name))


def folder_kind(folder: Path) -> str:
    """:data:`SNAPSHOT` or :data:`DELTA` for a folder with a ``manifest.json``; :data:`HISTORY`
    or :data:`DELTAS` for a folder whose first month folder is one of those; else
    :data:`OTHER` (a missing, empty or unrelated folder, left to the caller's own checks, as
    is a folder that cannot be read: ``applied_months`` names a month folder of them)."""
    folder = Path(folder)
    manifest = folder / MANIFEST
    if _is_manifest_file(manifest):
        return _manifest_kind(manifest)
    try:
        months = month_folders(folder)
    except OSError:
        return OTHER
    for month in months:
        kind = folder_kind(folder / month)
        if kind in (SNAPSHOT, DELTA):
            return HISTORY if kind == SNAPSHOT else DELTAS
    return OTHER


def _is_manifest_file(path: Path) -> bool:
    """True for a manifest that is a file, not a link; False when there is none or whether
    there is one cannot be told (a folder that cannot be read), left to the caller's checks."""
    try:
        return path.is_file() and not path.is_symlink()
    except OSError:
        return False


def _manifest_kind(path: Path) -> str:
    """:data:`DELTA` for a delta's manifest, :data:`SNAPSHOT` for another JSON object, and
    :data:`OTHER` for a manifest that does not read (through the guarded reader: too large,
    too deep, not JSON), left to the caller's own checks, which name what is wrong with it."""
    try:
        manifest = read_json_file(path)
    except (OSError, MalformedJsonError):
        return OTHER
    if not isinstance(manifest, dict):
        return OTHER
    return DELTA if "parent" in manifest and "next" in manifest else SNAPSHOT


def _first_month(folder: Path, kind: str) -> Path:
    """The newest month snapshot of a history folder, the oldest month delta of a deltas one."""
    months = month_folders(folder)
    return folder / (months[-1] if kind == HISTORY else months[0])


def check_apply_folders(snapshot: Path, delta: Path) -> None:
    """Refuse (:class:`WrongFolderError`) a ``snapshot`` that is not a snapshot or a ``delta``
    that is not a delta, naming what each is; a folder of neither kind is left to the apply's
    own checks."""
    kinds = folder_kind(snapshot), folder_kind(delta)
    if kinds == (DELTA, SNAPSHOT):
        raise WrongFolderError(
            f"{snapshot} is {DESCRIBED[DELTA]} and {delta} is a snapshot: the snapshot and the "
            "delta are swapped (the snapshot comes first)"
        )
    if kinds[0] not in (SNAPSHOT, OTHER):
        raise WrongFolderError(_not_a(snapshot, kinds[0], SNAPSHOT))
    if kinds[1] not in (DELTA, OTHER):
        raise WrongFolderError(_not_a(delta, kinds[1], DELTA))


def check_snapshot_folder(snapshot: Path) -> None:
    """Refuse (:class:`WrongFolderError`) a ``snapshot`` that is a delta, a history folder or a
    deltas folder, naming what it is."""
    kind = folder_kind(snapshot)
    if kind not in (SNAPSHOT, OTHER):
        raise WrongFolderError(_not_a(snapshot, kind, SNAPSHOT))


def check_catch_up_folders(history: Path, deltas: Path) -> None:
    """Refuse (:class:`WrongFolderError`) a catch-up over the wrong folders: the same folder
    twice, the two swapped, a month's snapshot or delta for the folder of months, or a folder of
    the other kind; an empty ``deltas`` folder is a deltas folder with nothing pending."""
    if Path(history).resolve() == Path(deltas).resolve():
        raise WrongFolderError(
            f"{history} is given as both the history and the deltas folder; expected the "
            "history folder of <YYYY-MM>/ snapshots, then the folder of <YYYY-MM>/ deltas"
        )
    kinds = folder_kind(history), folder_kind(deltas)
    if kinds == (DELTAS, HISTORY):
        raise WrongFolderError(
            f"{history} is {DESCRIBED[DELTAS]} and {deltas} is {DESCRIBED[HISTORY]}: the two "
            "are swapped (the history folder comes first)"
        )
    if kinds[0] not in (HISTORY, OTHER):
        raise WrongFolderError(_not_a(history, kinds[0], HISTORY))
    if kinds[1] not in (DELTAS, OTHER):
        raise WrongFolderError(_not_a(deltas, kinds[1], DELTAS))


def _not_a(folder: Path, kind: str, expected: str) -> str:
    """``folder is <kind>, not <expected>`` and what to give instead."""
    message = f"{folder} is {DESCRIBED[kind]}, not {NAMED[expected]}"
    if {kind, expected} in ({SNAPSHOT, HISTORY}, {DELTA, DELTAS}):
        if kind in (HISTORY, DELTAS):
            return f"{message}; name one month's folder in it, e.g. {_first_month(folder, kind)}"
        return f"{message}; give the folder that holds it, {Path(folder).parent}"
    return message

"""What a month's run has to do, decided from the data root alone (no dagster here).

A month is one of:

- ``bootstrap``: no delta for it, but ``history/<month>/`` holds a full snapshot published whole;
  the run only verifies it;
- ``apply``: ``deltas/<month>/`` exists, and ``history/<previous month>/`` is there to apply it
  to or ``history/<month>/`` already holds the delta's result (the core's applier then reports
  it as already applied and does nothing).

Anything else is refused with a :class:`~skewtape_pipeline.errors.ChainError` that says which
month to materialize first.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from skewtape_pipeline.errors import (
    ChainError,
    UnreadableFileError,
    UnreadableFolderError,
    os_reason,
)
from skewtape_pipeline.mirror.arrivals import holds_snapshot
from skewtape_pipeline.mirror.format import MANIFEST, MONTH_RE
from skewtape_pipeline.mirror.preflight import read_delta_head

Kind = Literal["bootstrap", "apply"]


@dataclass(frozen=True)
class MonthPlan:
    """The decision for one month: what kind of run, and the folders involved."""

    month: str
    kind: Kind
    snapshot: Path
    """``history/<month>/``: where the month's snapshot is (or will be)."""
    parent: Path | None = None
    """``history/<previous month>/``, the snapshot the delta applies to (apply only)."""
    delta: Path | None = None
    """``deltas/<month>/`` when there is one."""


def applied_months(history: Path) -> list[str]:
    """Months of ``history/`` that hold a snapshot (a manifest.json), oldest first; [] when
    ``history`` does not exist or is no folder (a data root not set up or not mounted). A
    ``<YYYY-MM>`` entry without a manifest (an empty folder, a file) is no snapshot.

    Raises
    ------
    UnreadableFolderError
        ``history``, or one of its ``<YYYY-MM>`` folders, exists but cannot be read (a
        permission refused, a link loop, an I/O error): the error names the folder and the
        reason. Such a month is never taken for one not applied, which a catch-up would apply
        again, a sensor pass over and ``archive-month`` read from an older snapshot.
    UnreadableFileError
        A month's manifest.json is a link to nothing: named, for the same reason.
    """
    try:
        with os.scandir(history) as entries:
            names = [entry.name for entry in entries if MONTH_RE.match(entry.name)]
    except (FileNotFoundError, NotADirectoryError):
        return []
    except OSError as exc:
        raise UnreadableFolderError(
            f"{history}: cannot be read ({os_reason(exc)}); expected the history folder of "
            "<YYYY-MM>/ snapshots (which months are applied cannot be told without it)"
        ) from None
    return sorted(name for name in names if _holds_manifest(history / name))


def _holds_manifest(month: Path) -> bool:
    """True when the month folder holds a manifest.json file; False when it holds none or is
    no folder; UnreadableFolderError naming it when that cannot be told, UnreadableFileError
    naming its manifest when that is a link to nothing (never taken for a month not applied)."""
    manifest = month / MANIFEST
    try:
        return stat.S_ISREG(manifest.stat().st_mode)
    except (FileNotFoundError, NotADirectoryError) as exc:
        if not manifest.is_symlink():
            return False
        raise UnreadableFileError(
            f"{manifest}: cannot be read ({os_reason(exc)}: a link to nothing); whether "
            f"{month.name} holds an applied snapshot cannot be told without it"
        ) from None
    except OSError as exc:
        raise UnreadableFolderError(
            f"{month}: cannot be read ({os_reason(exc)}); expected a month's snapshot folder "
            f"(whether it holds an applied snapshot, a {MANIFEST}, cannot be told without it)"
        ) from None


def plan_month(history: Path, deltas: Path, month: str, previous: str) -> MonthPlan:
    """Decide what the run of ``month`` does; read-only.

    Raises
    ------
    ChainError
        There is neither a delta nor a snapshot for ``month``, or the delta's parent month
        ``previous`` was never applied (the message names the month to materialize first).
    ManifestError, ChecksumMismatchError, UnsafePathError
        The delta's manifest or CHECKSUMS.sha256 cannot be read (only when the previous month
        is missing and the plan depends on the manifest).
    """
    snapshot, delta, parent = history / month, deltas / month, history / previous
    if not delta.is_dir():
        if (snapshot / MANIFEST).is_file():
            return MonthPlan(month, "bootstrap", snapshot)
        raise ChainError(
            f"month {month}: there is no delta {delta} and no full snapshot {snapshot}; "
            f"expected one of them"
        )
    can_apply = (parent / MANIFEST).is_file() or holds_snapshot(
        snapshot, read_delta_head(delta).manifest.next.manifest_sha256
    )
    if can_apply:
        return MonthPlan(month, "apply", snapshot, parent=parent, delta=delta)
    raise ChainError(
        f"month {month}: its delta {delta} applies to {parent}, the snapshot of {previous}, "
        f"which was never applied; materialize {previous} first (a backfill only waits for "
        f"months inside the backfill)"
    )

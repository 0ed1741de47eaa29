"""The apply journal: what an apply has started, so a rerun after a crash finishes it exactly once.

It lives in the folder being written (``.skewtape/apply-journal.json``). Before the first file
changes, one atomic write records every change the apply will make, with each file's sha256
before it (and a table's stamp, which tells a finished merge from one still to do). The audit log
is written from the journal, so every change is logged once even when a crash split the run.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import MalformedJsonError
from skewtape_pipeline.mirror.format import LOCAL_STATE_DIR

JOURNAL = "apply-journal.json"
VERSION = 1


@dataclass(frozen=True)
class Started:
    """A change that was started: its op, the file's sha256 before it (None: absent or not
    hashed) and, for a table change, the rows it upserts and deletes."""

    op: str
    sha256_before: str | None
    rows_upserted: int = 0
    rows_deleted: int = 0
    stamp_before: list[int] | None = None
    """A table change: the table's (inode, size, mtime_ns) before the merge. The merge renames a
    new file into place, so a different stamp means an interrupted run already merged it."""


@dataclass
class Journal:
    """The journal of one delta applied to one folder. Use :meth:`load`, then :meth:`save`."""

    path: Path
    delta_manifest_sha256: str
    run_id: str = ""
    """Names this apply in the audit log, so records written before a crash are not repeated."""
    populated: bool = False
    """Versioned mode: the staging folder holds every file of the parent."""
    started: dict[str, Started] = field(default_factory=dict)
    audited: bool = False
    """The audit log holds every change of ``started`` (or no audit log was asked for)."""

    @classmethod
    def load(cls, folder: Path, delta_manifest_sha256: str) -> Journal:
        """The journal of ``folder`` for this delta; a fresh one if absent, damaged or another's."""
        found = cls.find(folder, delta_manifest_sha256)
        if found is not None:
            return found
        return cls(path=journal_path(folder), delta_manifest_sha256=delta_manifest_sha256)

    @classmethod
    def find(cls, folder: Path, delta_manifest_sha256: str) -> Journal | None:
        """The journal of ``folder`` if it is a readable journal of this delta, else None.

        A damaged or unreadable journal (not JSON, nested too deep, a field missing) is None; a
        journal that is a symbolic link raises
        :class:`~skewtape_pipeline.errors.LinkedStateFileError`.
        """
        path = journal_path(folder)
        try:
            raw = fsio.read_state_bytes(path)
            if raw is None:
                return None
            data = fsio.load_json(raw, path)
            if data.get("version") != VERSION or data.get("delta") != delta_manifest_sha256:
                return None
            return cls(
                path=path,
                delta_manifest_sha256=delta_manifest_sha256,
                run_id=str(data["run_id"]),
                populated=bool(data["populated"]),
                started={rel: Started(**item) for rel, item in data["started"].items()},
                audited=bool(data["audited"]),
            )
        except (OSError, MalformedJsonError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def save(self) -> None:
        """Write the journal atomically."""
        data = {
            "version": VERSION,
            "delta": self.delta_manifest_sha256,
            "run_id": self.run_id,
            "populated": self.populated,
            "started": {rel: asdict(item) for rel, item in self.started.items()},
            "audited": self.audited,
        }
        fsio.atomic_write_bytes(self.path, (json.dumps(data, indent=1) + "\n").encode())


def journal_path(folder: Path) -> Path:
    """Where the apply journal of ``folder`` lives."""
    return folder / LOCAL_STATE_DIR / JOURNAL

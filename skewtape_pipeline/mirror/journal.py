"""The apply journal: what an apply checked, planned and did, so each step can run in its own
process and a rerun after a crash finishes the apply exactly once.

Before the commit point it lives in the apply's staging folder (``<staging>/.skewtape/``); it
records the plan the check step made (the delta's entries, the stamps of its checked files, row
counts), every change started with each file's sha256 before it, the files the apply wrote with
the sha256 of the bytes it wrote, and what each step measured. The commit point is the journal
saved with ``committed`` set where the next snapshot lives (``<target>/.skewtape/``): from then on
a rerun finishes the apply from the journal alone. The audit log is written from it, once.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import MalformedJsonError
from skewtape_pipeline.mirror.format import LOCAL_STATE_DIR

JOURNAL = "apply-journal.json"
VERSION = 2


@dataclass(frozen=True)
class Started:
    """A change that was started: its op, the file's sha256 before it (None: absent or not
    hashed) and, for a table change, the rows it upserts and deletes."""

    op: str
    sha256_before: str | None
    rows_upserted: int = 0
    rows_deleted: int = 0


@dataclass
class Journal:
    """The journal of one apply of one delta; :meth:`load` or :meth:`find` it, :meth:`save` it."""

    path: Path
    delta_manifest_sha256: str
    run_id: str = ""
    """Names this apply (its staging folder, its audit records)."""
    plan: dict[str, Any] = field(default_factory=dict)
    """What the check step found and later steps need (JSON; paths relative to the delta and
    the snapshot)."""
    populated: bool = False
    """The staging folder holds every file of the parent."""
    started: dict[str, Started] = field(default_factory=dict)
    written: dict[str, list[Any]] = field(default_factory=dict)
    """{path: [sha256, *stamp]} of files this apply wrote into the staging folder, hashed from
    the bytes written (or checked in the delta and linked); trusted while the stamp holds."""
    counters: dict[str, Any] = field(default_factory=dict)
    """Bytes read and written, files linked and seconds per phase, summed over the steps."""
    verified: dict[str, Any] | None = None
    """The verification of the staged next snapshot (``VerifyResult.to_dict()``)."""
    committed: bool = False
    """Past the commit point: the staged snapshot verified; a rerun finishes the apply."""
    audited: bool = False
    """The audit log holds every change of ``started`` (or no audit log was asked for)."""
    finished: bool = False
    """Nothing is left to do: files in place, audit written, staging removed."""

    @classmethod
    def load(cls, folder: Path, delta_manifest_sha256: str) -> Journal:
        """The journal of ``folder`` for this delta; a fresh one if absent, damaged or another's."""
        found = cls.find(folder, delta_manifest_sha256)
        if found is not None:
            return found
        return cls(path=journal_path(folder), delta_manifest_sha256=delta_manifest_sha256)

    @classmethod
    def find(cls, folder: Path, delta_manifest_sha256: str | None) -> Journal | None:
        """The journal of ``folder`` if it is a readable journal of this delta (of any delta when
        ``delta_manifest_sha256`` is None), else None.

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
            if data.get("version") != VERSION:
                return None
            if delta_manifest_sha256 is not None and data.get("delta") != delta_manifest_sha256:
                return None
            return cls(
                path=path,
                delta_manifest_sha256=str(data["delta"]),
                run_id=str(data["run_id"]),
                plan=dict(data["plan"]),
                populated=bool(data["populated"]),
                started={rel: Started(**item) for rel, item in data["started"].items()},
                written=dict(data["written"]),
                counters=dict(data["counters"]),
                verified=data["verified"],
                committed=bool(data["committed"]),
                audited=bool(data["audited"]),
                finished=bool(data["finished"]),
            )
        except (OSError, MalformedJsonError, ValueError, TypeError, KeyError, AttributeError):
            return None

    def save(self) -> None:
        """Write the journal atomically."""
        data = {
            "version": VERSION,
            "delta": self.delta_manifest_sha256,
            "run_id": self.run_id,
            "plan": self.plan,
            "populated": self.populated,
            "started": {rel: asdict(item) for rel, item in self.started.items()},
            "written": self.written,
            "counters": self.counters,
            "verified": self.verified,
            "committed": self.committed,
            "audited": self.audited,
            "finished": self.finished,
        }
        fsio.atomic_write_bytes(self.path, (json.dumps(data, indent=1) + "\n").encode())

    def count(self, name: str, amount: int) -> None:
        """Add ``amount`` to the counter ``name`` (bytes_read, bytes_written, files_linked)."""
        self.counters[name] = self.counters.get(name, 0) + amount

    def add_seconds(self, phase: str, seconds: float) -> None:
        spent = self.counters.setdefault("seconds", {})
        spent[phase] = spent.get(phase, 0.0) + seconds


def journal_path(folder: Path) -> Path:
    """Where the apply journal of ``folder`` lives."""
    return folder / LOCAL_STATE_DIR / JOURNAL

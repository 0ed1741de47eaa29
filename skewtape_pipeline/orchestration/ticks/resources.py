"""The tick archive's resource: how the archive writes and re-tiers, read when a run starts."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact_plan import DEFAULT_MEMORY_LIMIT
from skewtape_pipeline.ticks.archive.store.file_compression import MIN_TICKS_JUDGED
from skewtape_pipeline.ticks.archive.store.layout import (
    ARCHIVE_LOCK_WAIT_SECONDS,
    check_archive_root,
)
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy


class ArchiveSettings(dg.ConfigurableResource):
    """How the tick archive writes and re-tiers: the tier policy (explicit, recorded in every
    report), the compression target each report is measured against and the fewest ticks a
    consolidated file is judged on, the write-once mode, the memory an archiving op may use,
    and how long the run's writers wait for the archive's lock."""

    tier_policy_file: str | None = Field(
        default=None,
        description="A TOML or JSON tier policy; when not given, the one the archive recorded "
        "when first given one, else the built-in defaults.",
    )
    target_ratio: float = Field(
        default=5.0,
        description="Compression ratio each report is measured against, and the re-tiering's "
        "`compression_target_met` check asks of each consolidated file it writes.",
    )
    target_min_ticks: int = Field(
        default=MIN_TICKS_JUDGED,
        description="Fewest ticks a consolidated file must hold for `compression_target_met` "
        "to judge it (smaller files are measured, not judged).",
    )
    books_and_records: bool = Field(
        default=False,
        description="Put the archive in books_and_records mode (write-once, for good) before "
        "compacting or re-tiering: superseded files are retained, and any overwrite or "
        "deletion is refused (and audited). False does not turn the mode off: an archive "
        "already in it stays write-once.",
    )
    memory_limit: int = Field(
        default=DEFAULT_MEMORY_LIMIT,
        description="Bytes an archiving op may use reading a venue-day's fills (as "
        "`compact-ticks --memory-limit`): rows beyond half of it spill to the archive's staging "
        "folder; DuckDB's read-back check runs within it too.",
    )
    lock_timeout: float = Field(
        default=60.0,
        description="Seconds each writer of the run's Archive (compacting, re-tiering, "
        "removing, recording a version) waits for another writer of the same archive (e.g. "
        "started from the command line) to release the archive's lock; compaction waits at "
        f"least {ARCHIVE_LOCK_WAIT_SECONDS:g} seconds.",
    )

    def open(self, skewtape: SkewtapeHome) -> Archive:
        """The one ``Archive`` of a run: the data root's archive and audit log, with this
        resource's policy (default: the one the archive records), lock timeout and
        ``books_and_records`` mode (turned on before its first write). ConfigError naming the
        policy file when it is invalid or contradicts the recorded one."""
        return Archive(
            skewtape.archive_dir,
            policy=TierPolicy.load(Path(self.tier_policy_file)) if self.tier_policy_file else None,
            audit_log=skewtape.audit_log,
            lock_timeout=self.lock_timeout,
            books_and_records=self.books_and_records,
        )

    def open_existing(self, skewtape: SkewtapeHome) -> Archive:
        """:meth:`open` for the ops that work on an archive already written (re-tiering, its
        statistics and check, pruning versions): NotAnArchiveError naming the data root's
        archive folder when it holds no archive (a mistyped or missing data root), before
        anything is created, as the command line refuses it."""
        check_archive_root(skewtape.archive_dir, empty_ok=False)
        return self.open(skewtape)

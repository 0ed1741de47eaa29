"""Resources: where the data root is, read from configuration when a run starts, never at import."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from skewtape_pipeline.audit import AUDIT_LOG_NAME
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.file_compression import MIN_TICKS_JUDGED
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.tiers import TierPolicy

DAGSTER_HOME_NAME = "dagster_home"
"""The Dagster instance's folder under the data root (the one ``make ui`` and the demo use)."""


class SkewtapeHome(dg.ConfigurableResource):
    """The data root: `history/<YYYY-MM>/` snapshots, `deltas/<YYYY-MM>/` arriving deltas,
    the tick archive and the audit log. Everything a run writes lives under it.

    Configure it with `SkewtapeHome(root=dg.EnvVar("SKEWTAPE_HOME"))`; the variable is read when
    a run, sensor tick or schedule tick starts. (Markdown, not RST: the UI shows this text.)
    """

    root: str = Field(description="The data root folder (SKEWTAPE_HOME).")
    lock_timeout: float = Field(
        default=60.0,
        description="Seconds an apply waits for another apply of the same history to finish.",
    )
    link_sources: bool = Field(
        default=True,
        description="Hard-link unchanged and delivered files instead of copying them.",
    )

    @property
    def root_dir(self) -> Path:
        """The data root as an absolute path; ConfigError when it is empty."""
        if not self.root.strip():
            raise ConfigError("SkewtapeHome.root is empty; expected the data root folder")
        return Path(self.root).expanduser().absolute()

    @property
    def history_dir(self) -> Path:
        return self.root_dir / "history"

    @property
    def deltas_dir(self) -> Path:
        return self.root_dir / "deltas"

    @property
    def archive_dir(self) -> Path:
        return self.root_dir / "archive"

    @property
    def audit_log(self) -> Path:
        return self.root_dir / AUDIT_LOG_NAME

    @property
    def dagster_home(self) -> Path:
        """``dagster_home/``: the Dagster instance ``make ui`` opens (runs, materializations)."""
        return self.root_dir / DAGSTER_HOME_NAME

    def snapshot_dir(self, month: str) -> Path:
        """``history/<month>/``: the snapshot of ``month`` (it may not exist yet)."""
        return self.history_dir / month

    def delta_dir(self, month: str) -> Path:
        """``deltas/<month>/``: the delta leading to ``month`` (it may not exist yet)."""
        return self.deltas_dir / month


class ArchiveSettings(dg.ConfigurableResource):
    """How the tick archive writes and re-tiers: the tier policy (explicit, recorded in every
    report), the compression target each report is measured against, and the write-once mode."""

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
        default=2 * 2**30,
        description="Bytes an archiving op may use reading a venue-day's fills (as "
        "`compact-ticks --memory-limit`): rows beyond half of it spill to the archive's staging "
        "folder; DuckDB's read-back check runs within it too.",
    )
    lock_timeout: float = Field(
        default=60.0,
        description="Seconds a re-tiering waits for another one of the same archive (e.g. "
        "started from the command line) to finish.",
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

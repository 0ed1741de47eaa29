"""Resources: where the data root is, read from configuration when a run starts, never at import."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
from pydantic import Field

from skewtape_pipeline.audit import AUDIT_LOG_NAME
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.locations import (
    DATA_ROOT_EXPECTED,
    HOME_VARIABLE,
    home_relative,
    refuse_url,
)

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
        description="Share a delta's delivered files with the snapshot (a clone, or a hard "
        "link in a versioned apply, which leaves them read-only) instead of copying them; "
        "unchanged files are hard-linked from the month before either way.",
    )

    @property
    def root_dir(self) -> Path:
        """The data root as an absolute path; ConfigError when it is empty or a ``scheme://``
        URL (named redacted, with SKEWTAPE_HOME: never a folder named after the scheme)."""
        if not self.root.strip():
            raise ConfigError("SkewtapeHome.root is empty; expected the data root folder")
        named = f"SkewtapeHome.root ({HOME_VARIABLE})"
        return Path(refuse_url(self.root, named, DATA_ROOT_EXPECTED)).expanduser().absolute()

    def shown(self, text: str) -> str:
        """``text`` as the UI may show it: every path under the data root named
        ``$SKEWTAPE_HOME/<path inside it>`` (the root as given, and with its links resolved),
        never by the machine's folders; a path outside it kept as it is (``home_relative``).
        ``text`` unchanged when the root itself is invalid (:attr:`root_dir` refuses it)."""
        try:
            root = self.root_dir
        except ConfigError:
            return text
        return home_relative(text, str(root), str(root.resolve()))

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

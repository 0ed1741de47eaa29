"""``Archive``: one tick archive, read as it is now or as of any kept version.

Built once from the archive root and its tier policy (validated when built)::

    from skewtape_pipeline.ticks.archive.handle import Archive

    archive = Archive("archive")
    table = archive.read(["polymarket|0xabc"], start=date(2026, 11, 2), end=date(2026, 11, 6),
                         columns=["ts", "price"])           # a pyarrow Table
    frame = archive.read(as_of="paper-2026").to_pandas()  # as of a tag, a version or a time

``read`` prunes through the catalog first (only the hot files and consolidated files holding a
wanted symbol-day are named, so only they are verified and opened), then through the row groups'
``symbol``/``date`` statistics (DuckDB's scan); its rows are the ``ticks`` view's for the same
filters, ordered by symbol, date, ts, price, quantity and side. The verbs that change the archive
delegate to the writers (``lifecycle.retier``, ``withdraw.remove_symbol_days``,
``version_pruning.prune_versions``), passing the handle's policy and audit log.
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import date
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.catalog import SymbolDayKey
from skewtape_pipeline.ticks.archive.lifecycle import RetierResult, retier
from skewtape_pipeline.ticks.archive.placement import ArchiveState, Location, archive_state, locate
from skewtape_pipeline.ticks.archive.query import VIEW_COLUMNS, check_archive_root, open_ticks_view
from skewtape_pipeline.ticks.archive.tiers import TierPolicy
from skewtape_pipeline.ticks.archive.version_pruning import PruneResult, prune_versions
from skewtape_pipeline.ticks.archive.versions import (
    AsOf,
    Version,
    list_versions,
    resolve_as_of,
    symbol_days,
    tag_version,
    version_state,
)
from skewtape_pipeline.ticks.archive.withdraw import Removal, remove_symbol_days

_ORDER = "symbol, date, ts, price, quantity, side"


@dataclass(frozen=True)
class Archive:
    """A tick archive at ``root`` (its hot tier), with its tier ``policy`` (default: the
    default policy) and ``audit_log`` (default: ``<root>/../audit.jsonl``).

    Raises ConfigError when built for a path that is not a tick archive root or a policy that
    is not a TierPolicy.
    """

    root: Path
    policy: TierPolicy
    audit_log: Path | None

    def __init__(
        self,
        root: Path | str,
        policy: TierPolicy | None = None,
        audit_log: Path | None = None,
    ):
        policy = TierPolicy() if policy is None else policy
        if not isinstance(policy, TierPolicy):
            raise ConfigError(f"policy = {policy!r}: expected a TierPolicy")
        object.__setattr__(self, "root", check_archive_root(root))
        object.__setattr__(self, "policy", policy)
        object.__setattr__(self, "audit_log", audit_log)

    # --- reading ---------------------------------------------------------------------------

    def read(
        self,
        symbols: Iterable[str] | str | None = None,
        start: date | None = None,
        end: date | None = None,
        columns: Collection[str] | None = None,
        as_of: AsOf | None = None,
    ) -> pa.Table:
        """The ticks of ``symbols`` (None: all) on the days ``start`` to ``end`` (inclusive;
        None: open), as of a version (``as_of``: a number, a time, a tag; None: now), with
        ``columns`` of the view (None: all), as an Arrow table (``.to_pandas()``; polars:
        ``polars.from_arrow``).

        Raises ConfigError for an unknown column, VersionError for an ``as_of`` that names no
        kept version, and what the ``ticks`` view raises (``query.ticks_view_sql``).
        """
        wanted = [symbols] if isinstance(symbols, str) else symbols
        wanted = None if wanted is None else sorted(set(wanted))
        picked = list(VIEW_COLUMNS) if columns is None else list(columns)
        unknown = [c for c in picked if c not in VIEW_COLUMNS]
        if unknown or not picked:
            raise ConfigError(f"columns = {columns!r}: expected some of {', '.join(VIEW_COLUMNS)}")
        sql, parameters = _select(picked, wanted, start, end)
        con = duckdb.connect()
        try:
            con.execute("SET TimeZone = 'UTC'")
            open_ticks_view(
                con,
                self.root,
                policy=self.policy,
                as_of=as_of,
                narrow=lambda state: symbol_days(state, wanted, start, end),
            )
            return con.sql(sql, params=parameters or None).to_arrow_table()
        finally:
            con.close()

    def state(self, as_of: AsOf | None = None) -> ArchiveState:
        """Where every symbol-day lives (now, or as of a version)."""
        if as_of is None:
            return archive_state(self.root)
        return version_state(self.root, resolve_as_of(self.root, as_of))

    def symbols(self, as_of: AsOf | None = None) -> list[str]:
        """The symbols with at least one visible symbol-day, sorted."""
        return sorted({symbol for symbol, _ in self._keys(as_of)})

    def days(self, symbol: str, as_of: AsOf | None = None) -> list[date]:
        """The days of ``symbol`` the archive holds, sorted."""
        return sorted(day for s, day in self._keys(as_of) if s == symbol)

    def _keys(self, as_of: AsOf | None) -> set[SymbolDayKey]:
        state = self.state(as_of)
        keys = {h.key for h in state.hot_live}
        keys |= {k for k in state.catalog.partitions if k not in state.hidden}
        return keys

    def report(self, symbol: str, day: date) -> Location | None:
        """Where ``symbol`` on ``day`` lives now (tier, file, rows, bytes); None when the
        archive does not hold it."""
        return locate(self.root, symbol, day, policy=self.policy)

    def versions(self) -> list[Version]:
        """The kept versions, oldest first."""
        return list_versions(self.root)

    # --- changing ----------------------------------------------------------------------------

    def tag(self, name: str, version: int | None = None) -> int:
        """Pin ``version`` (default: the latest) as ``name``; returns the version."""
        return tag_version(self.root, name, version=version, audit_log=self.audit_log)

    def prune_versions(
        self, *, keep_last: int | None = None, older_than: date | None = None
    ) -> PruneResult:
        """``version_pruning.prune_versions`` on this archive."""
        return prune_versions(
            self.root,
            keep_last=keep_last,
            older_than=older_than,
            policy=self.policy,
            audit_log=self.audit_log,
        )

    def retier(self, *, as_of: date, **options: Any) -> RetierResult:
        """``lifecycle.retier`` on this archive."""
        return retier(self.root, as_of=as_of, policy=self.policy, audit_log=self.audit_log,
                      **options)  # fmt: skip

    def remove(self, keys: Iterable[SymbolDayKey]) -> list[Removal]:
        """``withdraw.remove_symbol_days`` on this archive."""
        return remove_symbol_days(self.root, keys, audit_log=self.audit_log, policy=self.policy)


def _select(
    columns: list[str], symbols: list[str] | None, start: date | None, end: date | None
) -> tuple[str, list[Any]]:
    """The SELECT over the view for the filters (placeholders, never spliced values)."""
    where, parameters = [], []
    if symbols is not None:
        where.append(f"symbol IN ({', '.join('?' for _ in symbols)})" if symbols else "false")
        parameters += symbols
    if start is not None:
        where.append("date >= ?")
        parameters.append(start)
    if end is not None:
        where.append("date <= ?")
        parameters.append(end)
    clause = f" WHERE {' AND '.join(where)}" if where else ""
    return f"SELECT {', '.join(columns)} FROM ticks{clause} ORDER BY {_ORDER}", parameters

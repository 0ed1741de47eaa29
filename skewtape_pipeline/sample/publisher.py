"""Publish a realistic sample: a full first snapshot and a chain of monthly deltas.

``publish_sample(root)`` writes ``root/history/<first month>/`` (sealed) and
``root/deltas/<month>/`` for every later month, exactly as the dataset publishes them: every
month's full snapshot is written, sealed, and the delta between consecutive snapshots is built
by the mirror's own delta builder (which picks the ops). With ``snapshots_dir`` every month's
full snapshot is kept there as the oracle that applying the chain must reproduce.

What each month exercises (index 0 = the first month; four months by default):

====  =================================================================================
 0    Full snapshot: four venues (kalshi, polymarket, predictit, augur), the four
      reference tables, fills and candles of the month, README.md, LICENSE.txt,
      CHANGELOG.md and KNOWN_ISSUES.md.
 1    ``add`` of every venue's new fills/candles; ``replace`` of README.md and CHANGELOG.md;
      ``delete`` of KNOWN_ISSUES.md; ``change`` of all four tables with upserts (new markets,
      status moves, amended titles, new resolution seqs, a fee with a new effective_from,
      newly matched and reviewed events) and deletes (withdrawn listings, false matches).
 2    ``replace`` of a corrected closed month: kalshi's fills and candles of month 0 come
      again with trades repriced, resized, removed and added (same trade ids where kept);
      ``schema_break``: markets.parquet gains ``settlement_source``, so all four tables ship
      whole with ``replace`` (schema version 2).
 3    augur leaves: it is listed in ``omitted_venues``, every month file of it gets a
      ``delete``, and its markets, resolutions and fees rows are deletes by key inside the
      ``change`` files, beside the month's ordinary upserts and deletes.
 4+   Ordinary months: ``add`` month files, ``replace`` text files, ``change`` tables.
====  =================================================================================

Deterministic: the same options give the same bytes. Each venue-month and each listing month
draws from its own generator seeded by the seed and the month, so a longer chain starts with
the same months as a shorter one.
"""

from __future__ import annotations

import os
import shutil
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from skewtape_pipeline.errors import ConfigError, SampleRootError
from skewtape_pipeline.fsio import TEMP_MARKER, atomic_write_bytes, checked_path, fsync_dir
from skewtape_pipeline.mirror.diff import build_delta
from skewtape_pipeline.mirror.snapshot import seal_snapshot
from skewtape_pipeline.sample.fills import Fills, candles_from, correct_fills, generate_fills
from skewtape_pipeline.sample.markets import Universe
from skewtape_pipeline.sample.months import month_end_us, month_start_us
from skewtape_pipeline.sample.plan import KNOWN_ISSUES_FILE, ChainPlan
from skewtape_pipeline.sample.tables import write_parquet
from skewtape_pipeline.sample.texts import KNOWN_ISSUES_TEXT, LICENSE_TEXT, changelog, readme
from skewtape_pipeline.sample.venues import VENUES

MIN_FILLS = 100
TRADES_PER_TOPIC = 30
"""One topic is listed per this many trades of a venue-month (how thin markets are)."""
MIN_TOPICS = 24
WORK_PREFIX = ".sample."


@dataclass
class SampleSummary:
    """What :func:`publish_sample` wrote.

    ``rows`` maps each month to the rows of every Parquet file written new for that month (its
    month files, a republished month's files and the four reference tables); ``delta_ops`` maps
    each delta month to how many entries of each op its manifest has.
    """

    root: Path
    months: list[str]
    first_snapshot: Path
    deltas: list[Path]
    snapshots: list[Path] = field(default_factory=list)
    rows: dict[str, dict[str, int]] = field(default_factory=dict)
    delta_ops: dict[str, dict[str, int]] = field(default_factory=dict)
    schema_break_months: list[str] = field(default_factory=list)
    omitted_venues: dict[str, list[str]] = field(default_factory=dict)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready form (paths as strings)."""
        return {
            "root": str(self.root),
            "months": list(self.months),
            "first_snapshot": str(self.first_snapshot),
            "deltas": [str(p) for p in self.deltas],
            "snapshots": [str(p) for p in self.snapshots],
            "rows": {m: dict(r) for m, r in self.rows.items()},
            "delta_ops": {m: dict(o) for m, o in self.delta_ops.items()},
            "schema_break_months": list(self.schema_break_months),
            "omitted_venues": {m: list(v) for m, v in self.omitted_venues.items()},
        }


def publish_sample(
    root: Path,
    *,
    seed: int = 7,
    first_month: str = "2026-09",
    months: int = 4,
    fills_per_venue_month: int = 20_000,
    snapshots_dir: Path | None = None,
) -> SampleSummary:
    """Write a sample history and its chain of deltas under ``root``.

    Everything is built in a work folder inside ``root`` and moved into place at the end, so
    a failure leaves no history or deltas behind; work folders left by a killed run are
    removed first. Not safe to run twice at once on the same root.

    Parameters
    ----------
    root
        Data root: gets ``history/<first_month>/`` and ``deltas/<month>/`` for later months.
    seed
        Seed of every random draw; the same options give the same bytes.
    first_month
        ``YYYY-MM`` of the first (full) snapshot.
    months
        Number of months, at least 4 (the first snapshot and three deltas).
    fills_per_venue_month
        Trades per venue and month (at least 100).
    snapshots_dir
        When given, every month's full sealed snapshot is kept as ``<snapshots_dir>/<month>/``.

    Raises
    ------
    ConfigError
        ``root`` is no path (None, a number) or an option is invalid (nothing is written).
    SampleRootError
        The folder that would hold ``root`` does not exist,
        ``root/history`` or ``root/deltas`` already holds something, or ``snapshots_dir``
        already holds one of the months (nothing is written).
    """
    plan = ChainPlan.build(first_month=first_month, months=months)
    _check_options(seed, fills_per_venue_month)
    root = checked_path(root, "root", "the folder to publish into")
    _refuse_existing(root, plan, snapshots_dir)
    topics = max(MIN_TOPICS, fills_per_venue_month // TRADES_PER_TOPIC)
    universe = Universe.build(plan, seed=seed, topics_per_month=topics)
    root.mkdir(parents=True, exist_ok=True)
    for stale in root.glob(f"{WORK_PREFIX}*{TEMP_MARKER}"):
        shutil.rmtree(stale, ignore_errors=True)
    work = root / f"{WORK_PREFIX}{os.getpid()}{TEMP_MARKER}"
    try:
        summary = _publish(work, universe, seed=seed, fills=fills_per_venue_month)
        return _move_into_place(work, root, plan, summary, snapshots_dir)
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _check_options(seed: object, fills: object) -> None:
    if not isinstance(seed, int) or isinstance(seed, bool):
        raise ConfigError(f"option seed is {seed!r}; expected an integer")
    if not isinstance(fills, int) or isinstance(fills, bool) or fills < MIN_FILLS:
        raise ConfigError(
            f"option fills_per_venue_month is {fills!r}; expected an integer >= {MIN_FILLS}"
        )


def _refuse_existing(root: Path, plan: ChainPlan, snapshots_dir: Path | None) -> None:
    if root.exists() and not root.is_dir():
        raise SampleRootError(f"{root} is a file; expected a data root folder")
    if not root.absolute().parent.is_dir():
        raise SampleRootError(
            f"{root}: its folder {root.absolute().parent} does not exist; the data root is "
            "created only inside an existing folder (a missing folder is refused, never created)"
        )
    for sub in ("history", "deltas"):
        folder = root / sub
        if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
            raise SampleRootError(
                f"{folder} already holds data; expected an empty or missing folder "
                "(the sample publisher never writes over a history)"
            )
    if snapshots_dir is not None:
        taken = [m for m in plan.months if (Path(snapshots_dir) / m).exists()]
        if taken:
            raise SampleRootError(
                f"{snapshots_dir} already holds the months {taken}; expected none of them"
            )


# --- building every snapshot and delta in the work folder --------------------------------------


def _publish(work: Path, universe: Universe, *, seed: int, fills: int) -> SampleSummary:
    plan = universe.plan
    snapshots = [work / "snapshots" / month for month in plan.months]
    deltas = [work / "deltas" / month for month in plan.months[1:]]
    summary = SampleSummary(work, list(plan.months), snapshots[0], deltas, snapshots)
    writer = _SnapshotWriter(universe, seed=seed, fills=fills)
    for index, folder in enumerate(snapshots):
        previous = snapshots[index - 1] if index else None
        summary.rows[plan.months[index]] = writer.write(folder, index, previous)
        seal_snapshot(
            folder,
            bundle_id=plan.bundle_id(index),
            month=plan.months[index],
            venues=plan.venues_at(index),
            omitted_venues=plan.omitted_at(index),
            schema_version=plan.schema_version_at(index),
        )
        if previous is None:
            continue
        delta = build_delta(previous, folder, deltas[index - 1], verify_inputs=False)
        month = plan.months[index]
        summary.delta_ops[month] = dict(sorted(Counter(e.op for e in delta.files).items()))
        if delta.schema_break:
            summary.schema_break_months.append(month)
        if delta.next.omitted_venues:
            summary.omitted_venues[month] = list(delta.next.omitted_venues)
    return summary


class _SnapshotWriter:
    """Writes the files of each month's full snapshot (before sealing)."""

    def __init__(self, universe: Universe, *, seed: int, fills: int):
        self.universe, self.plan, self.seed, self.fills = universe, universe.plan, seed, fills
        self.correction_note = ""

    def write(self, folder: Path, index: int, previous: Path | None) -> dict[str, int]:
        """Write snapshot ``index`` into ``folder``; rows of each Parquet file written new."""
        rows: dict[str, int] = {}
        if previous is not None:
            self._carry_month_files(previous, folder, index)
        month = self.plan.months[index]
        for venue in self.plan.venues_at(index):
            rows.update(self._write_month(folder, venue, month, self._fills(venue, index)))
        if index == self.plan.correction_at:
            rows.update(self._write_correction(folder))
        for rel, table in self.universe.tables(index).items():
            write_parquet(table, folder / rel)
            rows[rel] = table.num_rows
        self._write_texts(folder, index)
        return rows

    def _carry_month_files(self, previous: Path, folder: Path, index: int) -> None:
        """Copy the closed months of the venues that stay (fresh copies, no shared inodes)."""
        for venue in self.plan.venues_at(index):
            for kind in ("fills", "candles"):
                source_dir = previous / kind / venue
                for source in sorted(source_dir.glob("*.parquet")):
                    target = folder / kind / venue / source.name
                    target.parent.mkdir(parents=True, exist_ok=True)
                    shutil.copyfile(source, target)

    def _fills(self, venue: str, index: int) -> Fills:
        month = self.plan.months[index]
        return generate_fills(
            seed=self.seed,
            venue=VENUES[venue],
            month=month,
            window_us=(month_start_us(month), month_end_us(month)),
            markets=self.universe.live_markets(venue, index),
            count=self.fills,
        )

    def _write_month(self, folder: Path, venue: str, month: str, fills: Fills) -> dict[str, int]:
        fills_rel = f"fills/{venue}/{month}.parquet"
        candles_rel = f"candles/{venue}/{month}.parquet"
        candles = candles_from(fills)
        write_parquet(fills.to_table(), folder / fills_rel)
        write_parquet(candles, folder / candles_rel)
        return {fills_rel: len(fills), candles_rel: candles.num_rows}

    def _write_correction(self, folder: Path) -> dict[str, int]:
        venue, at = self.plan.corrected_venue, self.plan.corrected_month_at
        month = self.plan.months[at]
        original = self._fills(venue, at)
        ticks = {m.market_id: m.tick for m in self.universe.markets if m.venue == venue}
        corrected, change = correct_fills(
            original, seed=self.seed, ticks=ticks, month_end_us=month_end_us(month)
        )
        self.correction_note = (
            f"{len(change.repriced)} trades repriced, {len(change.resized)} resized, "
            f"{len(change.removed)} removed as busted, {len(change.added)} reported late"
        )
        return self._write_month(folder, venue, month, corrected)

    def _write_texts(self, folder: Path, index: int) -> None:
        texts = {
            "README.md": readme(self.plan, index),
            "LICENSE.txt": LICENSE_TEXT,
            "CHANGELOG.md": changelog(self.plan, index, correction_note=self.correction_note),
        }
        if index < self.plan.text_delete_at:
            texts[KNOWN_ISSUES_FILE] = KNOWN_ISSUES_TEXT
        for rel, text in texts.items():
            atomic_write_bytes(folder / rel, text.encode())


# --- moving the result into place --------------------------------------------------------------


def _move_into_place(
    work: Path, root: Path, plan: ChainPlan, summary: SampleSummary, snapshots_dir: Path | None
) -> SampleSummary:
    """Copy the first snapshot to history/, move the deltas (and the oracle snapshots)."""
    first = root / "history" / plan.months[0]
    shutil.copytree(summary.first_snapshot, first)
    fsync_dir(first.parent)
    deltas = []
    for staged in summary.deltas:
        target = root / "deltas" / staged.name
        target.parent.mkdir(parents=True, exist_ok=True)
        os.replace(staged, target)
        deltas.append(target)
    fsync_dir(root / "deltas")
    snapshots = []
    if snapshots_dir is not None:
        Path(snapshots_dir).mkdir(parents=True, exist_ok=True)
        for staged in summary.snapshots:
            snapshots.append(Path(shutil.move(staged, Path(snapshots_dir) / staged.name)))
    summary.root, summary.first_snapshot = root, first
    summary.deltas, summary.snapshots = deltas, snapshots
    return summary

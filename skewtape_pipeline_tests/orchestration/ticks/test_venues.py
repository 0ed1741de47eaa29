"""Venue registration on the tick side: the venues of each applied month's fills become keys of
the tick archive's ``venues`` dimension, with an observation of ``tick_archive`` per month."""

from __future__ import annotations

from pathlib import Path

import dagster as dg

from skewtape_pipeline.orchestration.ticks.archive_asset import TICK_ARCHIVE
from skewtape_pipeline.orchestration.ticks.partitions import VENUES, dimension_key
from skewtape_pipeline.orchestration.ticks.venues import new_venues, register_applied_venues
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols, split_symbol

MONTHS = ("2026-09", "2026-10", "2026-11")


def venue_keys(history: Path, months: tuple[str, ...]) -> set[str]:
    """The venue keys of the symbols the months' fills files added or replaced."""
    symbols = {s for month in months for s in new_symbols(history, month)}
    return {dimension_key(split_symbol(s)[0]) for s in symbols}


def observed(instance: dg.DagsterInstance) -> dict[str, list[str]]:
    """{month: venues} of the ``tick_archive`` observations recorded, oldest first."""
    records = instance.fetch_observations(TICK_ARCHIVE, limit=100, ascending=True).records
    metadata = [r.asset_observation.metadata for r in records]
    assert all(m["venues_registered"].value == len(m["venues"].value) for m in metadata)
    return {m["month"].value: m["venues"].value for m in metadata}


def test_register_applied_venues_when_months_applied_registers_the_venues_of_their_fills(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    registered = register_applied_venues(instance, history)
    assert set(instance.get_dynamic_partitions(VENUES)) == venue_keys(history, MONTHS)
    assert observed(instance) == registered
    assert sorted(k for keys in registered.values() for k in keys) == sorted(
        venue_keys(history, MONTHS)
    )


def test_register_applied_venues_when_run_again_adds_and_records_nothing(
    applied_chain: Path, instance: dg.DagsterInstance
):
    history = applied_chain / "history"
    first = register_applied_venues(instance, history)
    assert register_applied_venues(instance, history) == {}
    assert observed(instance) == first


def test_new_venues_when_some_known_lists_each_new_key_once_under_its_first_month(
    applied_chain: Path,
):
    history = applied_chain / "history"
    first = venue_keys(history, MONTHS[:1])
    known = sorted(first)[:1]
    found = new_venues(history, MONTHS, known)
    listed = [key for keys in found.values() for key in keys]
    assert len(listed) == len(set(listed))
    assert set(listed) == venue_keys(history, MONTHS) - set(known)
    assert set(found["2026-09"]) == first - set(known)

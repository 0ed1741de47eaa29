"""Venue-day partition keys: reversible, free of what Dagster refuses in keys, and few enough for
five years of a venue with 10,000 symbols a day."""

from __future__ import annotations

from datetime import date

import dagster as dg
import pytest
from hypothesis import given
from hypothesis import strategies as st

from skewtape_pipeline.errors import UnsafePathError
from skewtape_pipeline.orchestration.ticks.partitions import (
    MAX_KEYS_PER_ASSET,
    VENUES,
    dimension_key,
    name_from_key,
    venue_day_key,
    venue_day_key_count,
    venue_day_of,
    venue_day_partitions_over,
)
from skewtape_pipeline_tests.orchestration.conftest import register_venues

REFUSED_CHARACTERS = set("|,[]")
REFUSED_SUBSTRINGS = ["...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0"]


@given(st.text(min_size=1))
def test_dimension_key_when_any_text_round_trips_and_holds_no_refused_character(name: str):
    key = dimension_key(name)
    assert name_from_key(key) == name
    assert not REFUSED_CHARACTERS & set(key)
    assert not any(bad in key for bad in REFUSED_SUBSTRINGS)


def test_dimension_key_when_venue_is_plain_keeps_it_readable():
    assert dimension_key("kalshi") == "kalshi"
    assert dimension_key("a,b|c[1]%") == "a%2Cb%7Cc%5B1%5D%25"


def test_venue_day_key_when_parsed_back_gives_venue_and_day():
    key = venue_day_key("odd,|venue", date(2026, 10, 5))
    assert venue_day_of(str(key)) == ("odd,|venue", date(2026, 10, 5))


def test_register_venues_when_some_known_adds_only_new_venue_keys():
    with dg.DagsterInstance.ephemeral() as instance:
        assert register_venues(instance, ["v:a", "v:b", "w,x:c"]) == ["v", "w%2Cx"]
        assert register_venues(instance, ["v:z", "u:d"]) == ["u"]
        assert sorted(instance.get_dynamic_partitions(VENUES)) == ["u", "v", "w%2Cx"]


def test_venue_day_partitions_when_five_years_of_a_10000_symbol_venue_stay_within_guidance():
    """The key count Dagster itself computes over five years (2021-2025, 1,826 days) of one
    venue: the same whatever the venue's number of symbols (10,000 here: they are not keys)."""
    days = dg.DailyPartitionsDefinition(start_date="2021-01-01", end_date="2026-01-01")
    symbols = [f"kalshi:KX{n:05d}" for n in range(10_000)]
    with dg.DagsterInstance.ephemeral() as instance:
        register_venues(instance, symbols)
        with dg.partition_loading_context(dynamic_partitions_store=instance):
            count = venue_day_partitions_over(days).get_num_partitions()
    assert count == venue_day_key_count(1_826, 1) == 1_826
    assert count <= MAX_KEYS_PER_ASSET
    assert venue_day_key_count(1_826, 54) <= MAX_KEYS_PER_ASSET  # 54 such venues still fit


@pytest.mark.parametrize("venue_key", ["..", ".", "%2E%2E", "a%2Fb", ".skewtape", "a\\b"])
def test_venue_day_of_when_venue_key_names_no_snapshot_venue_refuses_naming_the_key(venue_key):
    """A venue key follows the rule of the venues a snapshot names (one safe path part)."""
    key = dg.MultiPartitionKey({"date": "2026-10-05", "venue": venue_key})
    with pytest.raises(UnsafePathError) as refused:
        venue_day_of(key)
    assert "venue partition key" in str(refused.value)
    assert repr(str(key)) in str(refused.value)

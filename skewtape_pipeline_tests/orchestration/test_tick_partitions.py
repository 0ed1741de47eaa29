"""Symbol partition keys: reversible, and free of what Dagster refuses in keys."""

from __future__ import annotations

from datetime import date

import dagster as dg
from hypothesis import given
from hypothesis import strategies as st

from skewtape_pipeline.orchestration.tick_partitions import (
    SYMBOLS,
    register_symbols,
    symbol_day_key,
    symbol_day_of,
    symbol_from_key,
    symbol_key,
)

REFUSED_CHARACTERS = set("|,[]")
REFUSED_SUBSTRINGS = ["...", "\a", "\b", "\f", "\n", "\r", "\t", "\v", "\0"]


@given(st.text(min_size=1))
def test_symbol_key_when_any_text_round_trips_and_holds_no_refused_character(symbol: str):
    key = symbol_key(symbol)
    assert symbol_from_key(key) == symbol
    assert not REFUSED_CHARACTERS & set(key)
    assert not any(bad in key for bad in REFUSED_SUBSTRINGS)


def test_symbol_key_when_symbol_is_plain_keeps_it_readable():
    assert symbol_key("kalshi:KXFED-26SEP15-T4.5") == "kalshi:KXFED-26SEP15-T4.5"
    assert symbol_key("a,b|c[1]%") == "a%2Cb%7Cc%5B1%5D%25"


def test_symbol_day_key_when_parsed_back_gives_symbol_and_day():
    key = symbol_day_key("venue:odd,|name", date(2026, 10, 5))
    assert symbol_day_of(str(key)) == ("venue:odd,|name", date(2026, 10, 5))


def test_register_symbols_when_some_known_adds_only_new_keys():
    with dg.DagsterInstance.ephemeral() as instance:
        assert register_symbols(instance, ["v:a", "v:b,c"]) == ["v:a", "v:b%2Cc"]
        assert register_symbols(instance, ["v:a", "v:d"]) == ["v:d"]
        assert sorted(instance.get_dynamic_partitions(SYMBOLS)) == ["v:a", "v:b%2Cc", "v:d"]

"""TickEncoding: how ticks are encoded, validated when built; ``compact-ticks --side-map``."""

from __future__ import annotations

import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.encode.model import SchemaRequest
from skewtape_pipeline.ticks.encode.options import DEFAULT_ENCODING, TickEncoding
from skewtape_pipeline.ticks.encode.report import DEFAULT_TARGET_RATIO
from skewtape_pipeline_tests.ticks.conftest import (
    DAY_NS,
    archive_files,
    archive_rows,
    compact,
    duckdb_archive,
    write_text,
)


def test_tick_encoding_when_defaulted_detects_every_schema_field_and_allows_no_rounding():
    assert DEFAULT_ENCODING.schema == SchemaRequest()
    assert DEFAULT_ENCODING.side_map is None
    assert DEFAULT_ENCODING.allow_precision_loss is False
    assert DEFAULT_ENCODING.target_ratio == DEFAULT_TARGET_RATIO


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"schema": {"price_scale": 2}}, "schema"),
        ({"side_map": {}}, "side_map"),
        ({"side_map": {"B": "BOUGHT"}}, "side_map"),
        ({"allow_precision_loss": "yes"}, "allow_precision_loss"),
        ({"target_ratio": 0}, "target_ratio"),
        ({"target_ratio": float("inf")}, "target_ratio"),
    ],
)
def test_tick_encoding_when_a_field_is_bad_refuses_when_built_naming_it(options, field):
    with pytest.raises(ConfigError, match=field):
        TickEncoding(**options)


def test_tick_encoding_when_schema_request_is_bad_refuses_naming_the_field():
    with pytest.raises(ConfigError, match="price_scale"):
        TickEncoding(SchemaRequest(price_scale=19))


YES_NO = f"timestamp_nanos,price,quantity,side\n{DAY_NS + 1},1.5,3,yes\n{DAY_NS + 2},1.5,3,no\n"


@pytest.mark.parametrize("side_map", ["yes=BUY,no=SELL,yes=SELL", "yes=SELL,no=SELL,yes=BUY"])
def test_compact_ticks_when_the_side_map_gives_a_value_two_sides_refuses_naming_it(
    tmp_path, capsys, side_map
):
    """The Python API's side_map is a mapping: it cannot give one value twice."""
    source, archive = write_text(tmp_path / "t.csv", YES_NO), tmp_path / "archive"
    assert (
        compact(capsys, source, archive, "--symbol", "X", "--side-map", "yes=BUY,no=SELL")[0] == 0
    )
    before = archive_files(archive)
    code, err = compact(capsys, source, archive, "--symbol", "X", "--side-map", side_map)
    first, last = side_map.split(",")[0][4:], side_map.split(",")[2][4:]
    assert (code, err) == (2, f"error: --side-map maps 'yes' to both {first} and {last}; map "
                              "each raw value to one side\n")  # fmt: skip
    assert archive_files(archive) == before


def test_compact_ticks_when_the_side_map_repeats_an_entry_takes_it_once(tmp_path, capsys):
    source, archive = write_text(tmp_path / "t.csv", YES_NO), tmp_path / "archive"
    code, err = compact(capsys, source, archive, "--symbol", "X", "--side-map",
                        "yes=BUY,no=SELL,yes=BUY")  # fmt: skip
    assert code == 0, err
    assert [row[4] for row in archive_rows(duckdb_archive(archive))] == ["BUY", "SELL"]

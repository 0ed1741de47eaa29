"""TickEncoding: how ticks are encoded, validated when built."""

from __future__ import annotations

import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.encode.model import SchemaRequest
from skewtape_pipeline.ticks.encode.options import DEFAULT_ENCODING, TickEncoding
from skewtape_pipeline.ticks.encode.report import DEFAULT_TARGET_RATIO


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

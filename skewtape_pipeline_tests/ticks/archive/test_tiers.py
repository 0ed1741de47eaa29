"""Tier policy: thresholds, settings per tier, loading from TOML/JSON, validation."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date

import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.storage import LocalTier
from skewtape_pipeline.ticks.archive.store.policy import COLD, HOT, WARM, TierPolicy, TierSettings
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline.ticks.encode.sides import resolve_side_map


def test_tier_for_when_ages_cross_thresholds_assigns_inclusive_bounds():
    policy = TierPolicy(hot_max_age_days=7, warm_max_age_days=90)
    assert [policy.tier_for(age) for age in (0, 7, 8, 90, 91, 5000)] == [
        HOT, HOT, WARM, WARM, COLD, COLD
    ]  # fmt: skip


@pytest.mark.parametrize("age", [None, -1, 1.5, True, "3"])
def test_tier_for_when_age_missing_or_invalid_raises(age):
    with pytest.raises(ConfigError, match="age_days"):
        TierPolicy().tier_for(age)


def test_policy_when_thresholds_inverted_raises():
    with pytest.raises(ConfigError, match="warm_max_age_days"):
        TierPolicy(hot_max_age_days=30, warm_max_age_days=30)
    with pytest.raises(ConfigError, match="hot_max_age_days"):
        TierPolicy(hot_max_age_days=-1)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"compression": "lzma"},
        {"compression": "zstd", "compression_level": 23},
        {"compression": "snappy", "compression_level": 1},
        {"compression": "gzip", "compression_level": None},
        {"encoding_sample_rows": -1},
        {"row_group_size": 0},
    ],
)
def test_settings_when_invalid_raises_config_error(kwargs):
    with pytest.raises(ConfigError):
        TierSettings(**kwargs)


def test_load_when_toml_overrides_some_keys_keeps_defaults_for_rest(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text(
        "hot_max_age_days = 2\nwarm_max_age_days = 30\n"
        '[cold]\ncompression = "zstd"\ncompression_level = 12\nencoding_sample_rows = 0\n'
    )
    policy = TierPolicy.load(path)
    assert (policy.hot_max_age_days, policy.warm_max_age_days) == (2, 30)
    assert policy.settings_for(COLD) == replace(
        TierPolicy().cold, compression_level=12, encoding_sample_rows=0
    )
    assert policy.settings_for(HOT) == TierPolicy().hot
    assert policy.tier_for(31) == COLD


def test_load_when_a_table_leaves_keys_out_they_keep_that_tiers_defaults(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text('[warm]\nlayout = "year"\n[cold]\nroot = "cold-elsewhere"\n')
    policy = TierPolicy.load(path)
    assert policy.cold == replace(TierPolicy().cold, root="cold-elsewhere")
    assert (policy.cold.compression_level, policy.cold.consolidated_row_group_size) == (19, 8192)
    assert policy.warm == replace(TierPolicy().warm, layout="year")
    assert policy.warm.compression_level == 9


def test_load_when_a_table_names_another_codec_without_a_level_takes_its_general_level(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text('[cold]\ncompression = "gzip"\n[warm]\ncompression = "zstd"\n')
    policy = TierPolicy.load(path)
    assert (policy.cold.compression, policy.cold.compression_level) == ("gzip", 3)
    assert policy.cold.consolidated_row_group_size == 8192
    assert (policy.warm.compression, policy.warm.compression_level) == ("zstd", 9)


def test_load_when_a_table_names_a_codec_without_levels_and_no_level_takes_none(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text('[hot]\ncompression = "lz4"\n[warm]\ncompression = "none"\n')
    policy = TierPolicy.load(path)
    assert (policy.hot.compression, policy.hot.compression_level) == ("lz4", None)
    assert (policy.warm.compression, policy.warm.compression_level) == ("none", None)
    path.write_text('[hot]\ncompression = "lz4"\ncompression_level = 1\n')
    with pytest.raises(ConfigError, match=r"\[hot\]: compression_level = 1: lz4 takes no level"):
        TierPolicy.load(path)


def test_load_when_json_round_trips_to_dict(tmp_path):
    policy = TierPolicy(hot_max_age_days=1, warm_max_age_days=10,
                        warm=TierSettings(compression="gzip", compression_level=6))  # fmt: skip
    path = tmp_path / "tiers.json"
    path.write_text(json.dumps(policy.to_dict()))
    assert TierPolicy.load(path) == policy


@pytest.mark.parametrize("text", ['[hot]\ncompression = ["zstd"]\n', "[cold]\ncompression = 19\n"])
def test_load_when_the_codec_is_not_a_name_names_it(tmp_path, text):
    path = tmp_path / "tiers.toml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"tiers\.toml: \[(hot|cold)\]: compression = "):
        TierPolicy.load(path)


def test_load_when_the_file_is_not_utf8_names_it(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_bytes(b"\xff\xfe = 1\n")
    with pytest.raises(ConfigError, match=r"tiers\.toml: not UTF-8 text"):
        TierPolicy.load(path)


def test_load_when_unknown_key_names_file_and_key(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text("[hot]\nlevel = 3\n")
    with pytest.raises(ConfigError, match=r"tiers.toml.*\[hot\].*level"):
        TierPolicy.load(path)


def test_from_dict_when_top_level_key_unknown_names_it_and_the_expected_keys_sorted():
    with pytest.raises(ConfigError) as raised:
        TierPolicy.from_dict({"hot_max_age": 3}, source="tiers.toml")
    expected = "cold, hot, hot_max_age_days, warm, warm_max_age_days"
    assert str(raised.value) == f"tiers.toml: unknown key(s) hot_max_age; expected {expected}"


def test_load_when_bad_value_names_file(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text('hot_max_age_days = "seven"\n')
    with pytest.raises(ConfigError, match=r"tiers\.toml.*hot_max_age_days"):
        TierPolicy.load(path)


def test_load_when_file_missing_or_not_parseable_raises(tmp_path):
    with pytest.raises(ConfigError, match="cannot read"):
        TierPolicy.load(tmp_path / "absent.toml")
    bad = tmp_path / "bad.json"
    bad.write_text("{")
    with pytest.raises(ConfigError, match="not valid JSON"):
        TierPolicy.load(bad)
    other = tmp_path / "tiers.yaml"
    other.write_text("a: 1")
    with pytest.raises(ConfigError, match=r"\.toml or \.json"):
        TierPolicy.load(other)


def test_settings_for_when_tier_unknown_raises():
    with pytest.raises(ConfigError, match="tier"):
        TierPolicy().settings_for("LUKEWARM")


def test_resolve_side_map_when_value_not_a_side_name_raises():
    assert resolve_side_map({"yes": "BUY", "no": "SELL"}) == {"yes": 1, "no": 2}
    with pytest.raises(ConfigError, match="'x'"):
        resolve_side_map({"x": "buy"})
    with pytest.raises(ConfigError, match="keys must be strings"):
        resolve_side_map({1: "BUY"})


@pytest.mark.parametrize(
    ("root", "refused"),
    [
        ("s3://tiers/warm?access_key=k&secret_key=s", "'access_key' is not allowed"),
        ("s3://tiers/warm?session_token=t", "'session_token' is not allowed"),
        ("s3:///warm", "expected s3://<bucket>"),
        ("s3://tiers/../other", "expected s3://<bucket>"),
    ],
)
def test_policy_when_s3_root_carries_a_credential_or_is_malformed_raises_naming_it(
    tmp_path, root, refused
):
    policy_file = tmp_path / "tiers.toml"
    policy_file.write_text(f'[warm]\nroot = "{root}"\n')
    with pytest.raises(ConfigError, match=refused) as error:
        TierPolicy.load(policy_file)
    assert str(policy_file) in str(error.value)


@pytest.mark.parametrize(
    "root",
    [
        "s3://AKIAEXAMPLE:SUPERSECRET@tiers/warm",
        "s3://tiers/warm?endpoint_override=AKIAEXAMPLE:SUPERSECRET@127.0.0.1:9&scheme=http",
        "s3://tiers/warm?endpoint_override=AKIAEXAMPLE:SUPERSECRET%40127.0.0.1:9&scheme=http",
    ],
    ids=["user-part", "in-an-option", "percent-encoded"],
)
def test_policy_when_s3_root_holds_credentials_refuses_it_without_showing_them(tmp_path, root):
    policy_file = tmp_path / "tiers.toml"
    policy_file.write_text(f'[warm]\nroot = "{root}"\n')
    with pytest.raises(ConfigError, match="holding '@'") as error:
        TierPolicy.load(policy_file)
    assert "SUPERSECRET" not in str(error.value) and "AKIAEXAMPLE" not in str(error.value)


@pytest.mark.parametrize("tier", ["warm", "cold"])
@pytest.mark.parametrize(
    ("endpoint", "why"),
    [
        ("http://minio.internal:9000", "its endpoint_override holds a scheme (give it as scheme=)"),
        ("HTTPS://minio.internal", "its endpoint_override holds a scheme (give it as scheme=)"),
        (
            "http%3A%2F%2Fminio.internal",
            "its endpoint_override holds a scheme (give it as scheme=)",
        ),
        ("minio.internal:99999", "its endpoint is not a valid http(s) URL with a host[:port]"),
    ],
)
def test_policy_when_an_s3_roots_endpoint_is_no_host_and_port_refuses_it_naming_tier_and_option(
    tmp_path, tier, endpoint, why
):
    """pyarrow takes ``endpoint_override=http://host:9000`` and fails later, or connects
    elsewhere: refused as the mirror's S3 sources refuse it, when the policy is read, naming
    the tier and the options to use (never the endpoint)."""
    policy_file = tmp_path / "tiers.toml"
    uri = f"s3://tiers/{tier}?endpoint_override={endpoint}&scheme=http"
    policy_file.write_text(f'[{tier}]\nroot = "{uri}"\n')

    with pytest.raises(ConfigError) as error:
        TierPolicy.load(policy_file)

    assert str(error.value) == (
        f"{policy_file}: [{tier}]: root = 's3://tiers/{tier}': {why}; expected "
        "endpoint_override=host[:port] and scheme=http or https"
    )
    assert list(tmp_path.iterdir()) == [policy_file]


def test_root_for_when_warm_root_is_s3_keeps_the_uri_and_hot_stays_local(tmp_path):
    uri = "s3://tiers/warm?endpoint_override=127.0.0.1:9&scheme=http&region=us-east-1"
    policy = TierPolicy(warm=TierSettings(root=uri))
    assert policy.root_for(WARM, tmp_path / "archive") == uri
    assert policy.store_for(WARM, tmp_path / "archive").root == "s3://tiers/warm"
    assert policy.root_for(HOT, tmp_path / "archive") == tmp_path / "archive"
    with pytest.raises(ConfigError, match="hot files live in the archive root"):
        TierPolicy(hot=TierSettings(root="s3://tiers/hot"))


def test_store_for_and_root_for_when_tier_is_hot_agree_on_the_archive_root(tmp_path):
    archive = tmp_path / "archive"
    store = TierPolicy().store_for(HOT, archive)
    assert isinstance(store, LocalTier)
    assert store.folder == TierPolicy().root_for(HOT, archive) == archive


@pytest.mark.parametrize("method", ["store_for", "root_for"])
def test_store_for_and_root_for_when_tier_unknown_raise_config_error_naming_it(tmp_path, method):
    with pytest.raises(ConfigError, match="'LUKEWARM'"):
        getattr(TierPolicy(), method)("LUKEWARM", tmp_path / "archive")


def test_archive_tiers_resolve_writers_for_every_tier_the_rest_for_consolidated_tiers(tmp_path):
    policy = TierPolicy(warm=TierSettings(layout="year", root="warm"))
    tiers = ArchiveTiers.of(tmp_path / "archive", policy)
    assert list(tiers.writers) == [HOT, WARM, COLD]
    assert tiers.writers[HOT] == policy.hot.writer
    for resolved in (tiers.stores, tiers.settings, tiers.layouts, tiers.roots):
        assert list(resolved) == [WARM, COLD]
    assert tiers.settings[WARM] is policy.warm
    assert tiers.layouts == {WARM: "year", COLD: "year"}
    assert tiers.roots == {WARM: tmp_path / "warm", COLD: tmp_path / "archive-cold"}


def test_placement_when_aged_or_already_colder_gives_tier_period_and_whether_held():
    policy = TierPolicy(hot_max_age_days=3, warm_max_age_days=30)
    day = date(2026, 3, 14)
    assert policy.placement(day, 2) == (HOT, None, False)
    assert policy.placement(day, 10) == (WARM, "2026-03", False)
    assert policy.placement(day, 400) == (COLD, "2026", False)
    assert policy.placement(day, 10, reached=COLD) == (COLD, "2026", True)  # never warmer
    assert policy.placement(day, 400, reached=WARM) == (COLD, "2026", False)
    with pytest.raises(ConfigError, match="age_days"):
        policy.placement(day, -1)

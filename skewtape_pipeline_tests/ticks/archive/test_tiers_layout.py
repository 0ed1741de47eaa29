"""Tier layouts, consolidated row groups and storage roots (additions to the tier policy)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.policy import (
    COLD,
    HOT,
    WARM,
    TierPolicy,
    TierSettings,
    is_colder,
)
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers


def test_layout_for_when_unset_uses_tier_defaults():
    policy = TierPolicy()
    assert [policy.layout_for(t) for t in (HOT, WARM, COLD)] == ["symbol-day", "month", "year"]
    assert TierPolicy(warm=TierSettings(layout="year")).layout_for(WARM) == "year"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"hot": TierSettings(layout="month")}, r"\[hot\] layout"),
        ({"hot": TierSettings(root="elsewhere")}, r"\[hot\] root"),
        ({"warm": TierSettings(layout="symbol-day")}, r"\[warm\] layout"),
        ({"cold": TierSettings(layout="symbol-day")}, r"\[cold\] layout"),
    ],
)
def test_policy_when_layout_or_root_does_not_fit_tier_raises(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        TierPolicy(**kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [{"layout": "week"}, {"consolidated_row_group_size": 0}, {"root": ""}, {"root": 3}],
)
def test_settings_when_new_keys_invalid_raises(kwargs):
    with pytest.raises(ConfigError):
        TierSettings(**kwargs)


def test_root_for_when_unset_relative_or_absolute_resolves_from_archive_parent(tmp_path):
    archive = tmp_path / "data" / "archive"
    policy = TierPolicy(
        warm=TierSettings(root="tiers/warm"), cold=TierSettings(root=str(tmp_path / "cold"))
    )
    assert TierPolicy().root_for(COLD, archive) == tmp_path / "data" / "archive-cold"
    assert policy.root_for(HOT, archive) == archive
    assert policy.root_for(WARM, archive) == tmp_path / "data" / "tiers" / "warm"
    assert policy.root_for(COLD, archive) == tmp_path / "cold"


def test_load_when_toml_sets_layouts_round_trips_through_json(tmp_path):
    path = tmp_path / "tiers.toml"
    path.write_text(
        '[warm]\nlayout = "year"\nconsolidated_row_group_size = 512\nroot = "w"\n'
        '[cold]\nlayout = "year"\n'
    )
    policy = TierPolicy.load(path)
    assert policy.warm.consolidated_row_group_size == 512
    again = tmp_path / "tiers.json"
    again.write_text(json.dumps(policy.to_dict()))
    assert TierPolicy.load(again) == policy
    assert policy.root_for(WARM, Path("/x/archive")) == Path("/x/w")


def test_is_colder_when_compared_follows_tier_order():
    assert is_colder(COLD, WARM) and is_colder(WARM, HOT)
    assert not is_colder(HOT, WARM) and not is_colder(COLD, COLD)


@pytest.mark.parametrize(
    ("warm", "cold", "named"),
    [
        ("archive/warm", None, "WARM root"),  # inside the archive root (HOT)
        ("archive", None, "WARM root"),  # the archive root itself
        ("tiers", "tiers/cold", "COLD root"),  # cold inside warm
        ("tiers/./x", "tiers/x", "COLD root"),  # the same folder, spelled twice
        ("s3://bucket/tiers", "s3://bucket/tiers/cold", "COLD root"),
        ("s3://bucket/t?endpoint_override=h:1", "s3://bucket/t/c?endpoint_override=h:1", "COLD"),
    ],
)
def test_archive_when_tier_roots_nest_refuses_naming_both(tmp_path, warm, cold, named):
    policy = TierPolicy(warm=TierSettings(root=warm), cold=TierSettings(root=cold))
    root = tmp_path / "archive"
    with pytest.raises(ConfigError, match=f"{named}.*one is, or lies inside, the other"):
        Archive(root, policy=policy)
    with pytest.raises(ConfigError, match="lies inside"):
        ArchiveTiers.of(root, policy)
    assert not root.exists()


@pytest.mark.parametrize(
    ("warm", "cold"),
    [
        ("tiers/warm", "tiers/cold"),  # siblings under one folder
        ("s3://bucket/warm", "s3://bucket/warm-cold"),  # a prefix of the name, not a folder
        ("s3://bucket/t?endpoint_override=h:1", "s3://bucket/t/c?endpoint_override=h:2"),
        ("s3://bucket/archive", None),  # an S3 warm root never nests in a local folder
    ],
)
def test_archive_when_tier_roots_apart_builds(tmp_path, warm, cold):
    policy = TierPolicy(warm=TierSettings(root=warm), cold=TierSettings(root=cold))
    assert Archive(tmp_path / "archive", policy=policy).policy == policy


def test_relative_text_when_a_finding_names_files_names_them_by_tier_not_by_place(tmp_path):
    archive = tmp_path / "home" / "alice" / "data" / "archive"
    tiers = ArchiveTiers.of(archive)
    warm, cold = tiers.roots[WARM], tiers.roots[COLD]
    text = (
        f"{warm}/2026/10/a.parquet: row group 0: a page fails; "
        f"{archive}/symbol=k%3AX/date=2026-10-01/part-0.parquet: missing; "
        f"{cold}: missing; run `skewtape-pipeline rebuild-catalog {archive}`"
    )
    shown = tiers.relative_text(text, root_name="$SKEWTAPE_HOME/archive")
    assert shown == (
        "WARM/2026/10/a.parquet: row group 0: a page fails; "
        "symbol=k%3AX/date=2026-10-01/part-0.parquet: missing; "
        "the COLD root: missing; run `skewtape-pipeline rebuild-catalog $SKEWTAPE_HOME/archive`"
    )
    assert str(tmp_path) not in shown
    beside = f"{archive.with_name('archive-old')}/x.parquet"  # not under any root: kept
    assert tiers.relative_text(beside) == beside


def test_relative_text_when_a_root_is_inside_a_longer_path_or_spelled_relative_keeps_it_whole(
    tmp_path, monkeypatch
):
    """A root is found where messages name files (absolute, ``storage.file_text``) and only
    whole: a path that merely holds the root's text (``/mnt/<root>/...``) is not cut, a root
    spelled relative never matches a word of the text, and a root ending a sentence is named."""
    archive = tmp_path / "my data (1)+" / "archive"
    archive.mkdir(parents=True)
    monkeypatch.chdir(archive.parent)
    tiers = ArchiveTiers.of("archive")
    mounted = f"/mnt{archive}/x.parquet: missing"
    assert tiers.relative_text(mounted) == mounted
    assert tiers.relative_text("the archive root holds 2 files") == "the archive root holds 2 files"
    assert tiers.relative_text(f"{archive}/x.parquet: missing") == "x.parquet: missing"
    ending = tiers.relative_text(f"nothing rebuilt under {archive}.", root_name="$H")
    assert ending == "nothing rebuilt under $H."


def test_relative_text_when_the_cold_root_is_an_s3_uri_names_its_objects_by_tier(tmp_path):
    cold = "s3://bucket/cold?endpoint_override=localhost:9000&scheme=http"
    tiers = ArchiveTiers.of(tmp_path / "archive", TierPolicy(cold=TierSettings(root=cold)))
    text = "s3://bucket/cold/2026/a.parquet: missing; s3://bucket/cold2/b.parquet; s3://bucket/cold"
    shown = "COLD/2026/a.parquet: missing; s3://bucket/cold2/b.parquet; the COLD root"
    assert tiers.relative_text(text) == shown

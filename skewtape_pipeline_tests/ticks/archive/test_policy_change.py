"""The archive's record of its tier policy: never a policy whose S3 tier cannot be used. Local
folders here, and a real S3-compatible server (SeaweedFS on loopback; the ``s3_env``
fixture)."""

from __future__ import annotations

from pathlib import Path

import pytest

from skewtape_pipeline import storage
from skewtape_pipeline.cli import main
from skewtape_pipeline.errors import ObjectStoreError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import recorded_policy
from skewtape_pipeline_tests.scale_out.servers import free_port
from skewtape_pipeline_tests.ticks.archive.test_object_store import new_prefix
from skewtape_pipeline_tests.ticks.archive_builders import (
    files_under,
    write_four_day_csv,
)


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def policy_file(path: Path, warm: str, cold: str, extra: str = "") -> Path:
    """A policy file placing the warm and cold tiers at ``warm`` and ``cold`` (ages of the four
    day CSV: hot 2 days, warm 10)."""
    path.write_text(
        f'hot_max_age_days = 2\nwarm_max_age_days = 10\n[warm]\nroot = "{warm}"\n{extra}'
        f'[cold]\nroot = "{cold}"\n'
    )
    return path


def compact_ticks(capsys, tmp_path: Path, *flags: str) -> tuple[int, str, str]:
    """``compact-ticks`` of the four-day CSV into ``<tmp>/data/archive``."""
    source = tmp_path / "ticks.csv"
    if not source.exists():
        write_four_day_csv(source)
    archive = tmp_path / "data" / "archive"
    return cli(capsys, "compact-ticks", str(source), "--out", str(archive), "--as-of",
               "2025-12-05", "--price-scale", "2", *flags)  # fmt: skip


# --- a policy whose S3 tier cannot be used is never recorded ------------------------------------


def broken_root(server, kind: str, monkeypatch) -> str:
    """A warm root on the server that cannot be used, as ``kind`` says."""
    prefix = f"{new_prefix()}/warm"
    if kind == "unreachable endpoint":
        return server.uri(prefix, port=free_port())
    if kind == "missing bucket":
        return server.uri(prefix, bucket="no-such-bucket")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "not-the-secret")
    return server.uri(prefix)


@pytest.mark.parametrize("kind", ["unreachable endpoint", "missing bucket", "bad credentials"])
def test_compact_ticks_with_a_policy_whose_s3_tier_cannot_be_used_refuses_and_writes_nothing(
    tmp_path, s3_env, monkeypatch, capsys, kind
):
    warm = broken_root(s3_env, kind, monkeypatch)
    tiers = policy_file(tmp_path / "tiers.toml", warm, "cold")
    write_four_day_csv(tmp_path / "ticks.csv")
    before = files_under(tmp_path)

    code, out, err = compact_ticks(capsys, tmp_path, "--tier-policy", str(tiers))

    assert code == 2 and out == "" and err.count("\n") == 1 and "Traceback" not in err, err
    shown = warm.partition("?")[0]
    assert f"puts WARM at {shown}, which cannot be used" in err, err
    assert "nothing was written and the policy was not recorded" in err
    assert "not-the-secret" not in err and s3_env.environment()["AWS_SECRET_ACCESS_KEY"] not in err
    assert files_under(tmp_path) == before  # no archive, no hot file, no record, no audit log
    archive = Archive(tmp_path / "data" / "archive", policy=TierPolicy.load(tiers))
    with pytest.raises(ObjectStoreError, match="which cannot be used"), archive.writing():
        pytest.fail("the write ran")  # the Dagster asset's and archive-month's way in
    assert files_under(tmp_path) == before


def test_a_first_policy_with_local_tiers_is_recorded_without_listing_or_asking_any_store(
    tmp_path, capsys, monkeypatch
):
    def refuse(*_args, **_kwargs):
        raise AssertionError("a store was asked")

    for name in ("check_reachable", "parquet_files"):
        monkeypatch.setattr(storage.ObjectTier, name, refuse)
    monkeypatch.setattr(storage.LocalTier, "parquet_files", refuse)
    tiers = policy_file(tmp_path / "tiers.toml", "tiers/warm", "tiers/cold")
    code, _, err = compact_ticks(capsys, tmp_path, "--tier-policy", str(tiers))
    assert code == 0, err
    assert recorded_policy(tmp_path / "data" / "archive") == TierPolicy.load(tiers)

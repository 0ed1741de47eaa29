"""The archive's record of its tier policy: never a policy whose S3 tier cannot be used, and
changed when that is safe (a tier that holds nothing yet moved, an S3 server's new endpoint),
audited; refused, naming both roots, otherwise. Local folders here, and a real S3-compatible
server (SeaweedFS on loopback; the ``s3_env`` fixture)."""

from __future__ import annotations

import json
from dataclasses import replace
from datetime import date
from pathlib import Path

import pytest

from skewtape_pipeline import storage
from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ConfigError, ObjectStoreError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.catalog import CatalogStore
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM, TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import POLICY_RECORD, recorded_policy
from skewtape_pipeline_tests.mirror.publisher_servers import FaultProxy
from skewtape_pipeline_tests.scale_out.servers import free_port
from skewtape_pipeline_tests.ticks.archive.test_object_store import (
    STAGE_1,
    STAGE_2,
    bucket_filesystem,
    new_prefix,
    s3_policy,
    tiered_on_s3,
)
from skewtape_pipeline_tests.ticks.archive_builders import (
    audit_events,
    build_archive,
    expected_rows,
    files_under,
    view_rows,
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


POLICY_CHANGED = "tick-archive-tier-policy-changed"
"""The audit event of a record replaced (``books.EVENT_POLICY``)."""


def policy_events(root: Path) -> list[dict]:
    return [e for e in audit_events(root) if e["event"] == POLICY_CHANGED]


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


# --- a policy given replaces the record when that is safe ---------------------------------------


def test_a_policy_moving_tiers_that_hold_nothing_yet_replaces_the_record_audited(tmp_path, capsys):
    first = policy_file(tmp_path / "first.toml", "tiers/warm", "tiers/cold")
    second = policy_file(tmp_path / "second.toml", "elsewhere/warm", "elsewhere/cold",
                         extra='layout = "year"\n')  # fmt: skip
    archive = tmp_path / "data" / "archive"
    assert compact_ticks(capsys, tmp_path, "--tier-policy", str(first))[0] == 0
    assert recorded_policy(archive) == TierPolicy.load(first)

    code, _, err = compact_ticks(capsys, tmp_path, "--tier-policy", str(second))

    assert code == 0, err
    assert recorded_policy(archive) == TierPolicy.load(second)
    [event] = policy_events(archive)
    data = tmp_path / "data"
    assert event["record"] == str((archive / POLICY_RECORD).absolute())
    assert [
        (t["tier"], t["change"], t["from"]["root"], t["to"]["root"]) for t in event["tiers"]
    ] == [
        (WARM, "placement", str(data / "tiers" / "warm"), str(data / "elsewhere" / "warm")),
        (COLD, "placement", str(data / "tiers" / "cold"), str(data / "elsewhere" / "cold")),
    ]
    assert event["tiers"][0]["to"]["layout"] == "year"
    code, out, err = cli(capsys, "retier", str(archive), "--as-of", "2025-12-12")  # the record
    assert code == 0 and "moved 4 symbol-days" in out, err
    assert not (data / "tiers").exists() and list((data / "elsewhere").rglob("*.parquet"))


@pytest.mark.parametrize("change", ["root", "layout"])
def test_a_policy_moving_a_tier_that_holds_files_is_refused_naming_both_places(
    tmp_path, capsys, change
):
    first = policy_file(tmp_path / "first.toml", "tiers/warm", "tiers/cold")
    archive = tmp_path / "data" / "archive"
    assert compact_ticks(capsys, tmp_path, "--tier-policy", str(first))[0] == 0
    assert cli(capsys, "retier", str(archive), "--as-of", "2027-01-01")[0] == 0  # all cold
    if change == "root":
        other = policy_file(tmp_path / "other.toml", "elsewhere/warm", "elsewhere/cold")
    else:
        other = tmp_path / "other.toml"
        other.write_text(first.read_text() + 'layout = "month"\n')  # [cold]'s
    record, before = (archive / POLICY_RECORD).read_bytes(), files_under(tmp_path)

    code, _, err = cli(capsys, "retier", str(archive), "--as-of", "2027-01-01",
                       "--tier-policy", str(other))  # fmt: skip

    data = tmp_path / "data"
    where = data / ("elsewhere" if change == "root" else "tiers") / "cold"
    layout = "year" if change == "root" else "month"
    assert code == 2 and err.count("\n") == 1, err
    assert (
        f"puts COLD at {where} (layout {layout}) but the archive {archive} records "
        f"{data / 'tiers' / 'cold'} (layout year) in {archive / POLICY_RECORD}, and 1 file(s) "
        f"({data / 'tiers' / 'cold'}/year=2025/"
    ) in err, err
    assert ".parquet) are placed there; a tier moves only while nothing is placed in it" in err
    assert (archive / POLICY_RECORD).read_bytes() == record and files_under(tmp_path) == before


def test_a_policy_moving_a_tier_into_a_root_holding_other_files_is_refused(tmp_path, capsys):
    other = build_archive(tmp_path / "other", as_of=STAGE_1)  # other symbols
    taken = str(tmp_path / "other" / "cold")
    Archive(other, policy=TierPolicy.load(policy_file(tmp_path / "o.toml", "w", taken))).retier(
        as_of=STAGE_2
    )
    first = policy_file(tmp_path / "first.toml", "tiers/warm", "tiers/cold")
    assert compact_ticks(capsys, tmp_path, "--tier-policy", str(first))[0] == 0
    archive = tmp_path / "data" / "archive"
    record = (archive / POLICY_RECORD).read_bytes()
    into = TierPolicy.load(policy_file(tmp_path / "into.toml", "tiers/warm", taken))

    with pytest.raises(ConfigError) as refused:
        Archive(archive, policy=into)

    assert f"puts COLD at {taken} (layout year)" in str(refused.value)
    assert "which holds 1 file(s) the archive does not account for" in str(refused.value)
    assert (archive / POLICY_RECORD).read_bytes() == record


def test_a_write_cut_before_it_recorded_its_new_policy_records_it_when_given_again(
    tmp_path, capsys
):
    first = policy_file(tmp_path / "first.toml", "tiers/warm", "tiers/cold")
    second = TierPolicy.load(policy_file(tmp_path / "second.toml", "new/warm", "new/cold"))
    archive = tmp_path / "data" / "archive"
    assert compact_ticks(capsys, tmp_path, "--tier-policy", str(first))[0] == 0
    record = (archive / POLICY_RECORD).read_bytes()
    Archive(archive, policy=second, audit_log=None).retier(as_of=date(2027, 1, 1))
    (archive / POLICY_RECORD).write_bytes(record)  # as if cut after its commit, before its record
    assert all(f.path.startswith(COLD) for f in CatalogStore(archive).read().files.values())

    Archive(archive, policy=second).retier(as_of=date(2027, 1, 1))

    assert recorded_policy(archive) == second
    [event] = policy_events(archive)
    assert event["tiers"][1]["to"]["root"] == str(tmp_path / "data" / "new" / "cold")


# --- S3: a recorded tier that cannot be used, a server that moved -------------------------------


def test_a_recorded_policy_whose_bucket_does_not_exist_is_replaced_by_one_that_answers(
    tmp_path, no_fsync, s3_env
):
    good = s3_policy(s3_env, new_prefix())
    missing = replace(good, warm=replace(good.warm, root=s3_env.uri("w", bucket="no-such-bucket")))
    root = build_archive(tmp_path, as_of=STAGE_1)
    (root / POLICY_RECORD).write_text(json.dumps(missing.to_dict()))  # as written before the fix

    Archive(root, policy=good).retier(as_of=STAGE_1)

    assert recorded_policy(root) == good
    assert view_rows(root) == expected_rows()  # through the record
    assert [t["change"] for e in policy_events(root) for t in e["tiers"]] == ["placement"]


def test_a_recorded_tier_whose_endpoint_is_down_moves_only_to_a_new_endpoint_of_its_prefix(
    tmp_path, no_fsync, s3_env
):
    prefix = new_prefix()
    good = s3_policy(s3_env, prefix)
    down = s3_env.uri(f"{prefix}/warm", port=free_port())
    root = build_archive(tmp_path, as_of=STAGE_1)
    (root / POLICY_RECORD).write_text(
        json.dumps(replace(good, warm=replace(good.warm, root=down)).to_dict())
    )
    record = (root / POLICY_RECORD).read_bytes()
    elsewhere = s3_policy(s3_env, new_prefix())

    with pytest.raises(
        ConfigError, match="the recorded root cannot be listed to show that nothing"
    ):
        Archive(root, policy=elsewhere)  # it may hold the tier's files: unknown, refused
    assert (root / POLICY_RECORD).read_bytes() == record

    Archive(root, policy=good).retier(as_of=STAGE_1)  # the same prefix, the endpoint that answers

    assert recorded_policy(root) == good
    [event] = policy_events(root)
    assert [(t["tier"], t["change"]) for t in event["tiers"]] == [(WARM, "endpoint")]
    assert event["tiers"][0]["to"]["endpoint"]["endpoint_override"] == s3_env.endpoint


def through(policy: TierPolicy, endpoint: str, port: int) -> TierPolicy:
    """``policy`` with its S3 tiers reached at ``127.0.0.1:<port>`` instead of ``endpoint``."""
    moved = {
        name: replace(settings, root=settings.root.replace(endpoint, f"127.0.0.1:{port}"))
        for name, settings in (("warm", policy.warm), ("cold", policy.cold))
    }
    return replace(policy, **moved)


def test_a_new_endpoint_of_the_same_bucket_and_prefix_is_recorded_when_it_holds_the_files(
    tmp_path, no_fsync, s3_env
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    proxy = FaultProxy(s3_env.s3_port)  # the server, moved to another address
    try:
        moved = through(policy, s3_env.endpoint, proxy.port)
        Archive(root, policy=moved).retier(as_of=STAGE_2)
        assert recorded_policy(root) == moved
        assert view_rows(root) == expected_rows()  # through the record: the new endpoint
        assert proxy.connections > 0
    finally:
        proxy.close()
    [event] = policy_events(root)
    changes = [(t["tier"], t["change"]) for t in event["tiers"]]
    assert changes == [(WARM, "endpoint"), (COLD, "endpoint")]
    assert event["tiers"][0]["from"]["root"] == event["tiers"][0]["to"]["root"]
    assert event["tiers"][0]["to"]["endpoint"]["endpoint_override"] == f"127.0.0.1:{proxy.port}"


def test_a_new_endpoint_lacking_a_file_or_another_prefix_is_refused_naming_both(
    tmp_path, no_fsync, s3_env, capsys
):
    root, policy = tiered_on_s3(tmp_path, s3_env)
    record, prefix = (root / POLICY_RECORD).read_bytes(), policy.warm.root.split("/")[3]
    [warm] = [f.path for f in CatalogStore(root).read().files.values() if f.tier == WARM]
    key = f"{s3_env.bucket}/{prefix}/warm/{warm.removeprefix('WARM/')}"
    client = bucket_filesystem(s3_env)
    client.move(key, f"{key}.away")  # the server the new endpoint reaches lacks it
    proxy = FaultProxy(s3_env.s3_port)
    try:
        moved = through(policy, s3_env.endpoint, proxy.port)
        tiers = policy_file(tmp_path / "moved.toml", moved.warm.root, moved.cold.root)
        code, _, err = cli(capsys, "retier", str(root), "--as-of", str(STAGE_2),
                           "--tier-policy", str(tiers))  # fmt: skip
    finally:
        proxy.close()
        client.move(f"{key}.away", key)
    assert code == 2 and err.count("\n") == 1, err
    assert (
        f"reaches WARM at s3://{s3_env.bucket}/{prefix}/warm through endpoint_override=127.0.0.1:"
        f"{proxy.port}, region=us-east-1, scheme=http but the archive {root} records "
        f"endpoint_override={s3_env.endpoint}, region=us-east-1, scheme=http in "
        f"{root / POLICY_RECORD}, where 1 of the 1 file(s) the catalog and the kept versions "
        f"read in WARM are not found (s3://{key})"
    ) in err, err
    other = new_prefix()
    with pytest.raises(ConfigError) as refused:
        Archive(root, policy=s3_policy(s3_env, other))
    assert (
        f"puts WARM at s3://{s3_env.bucket}/{other}/warm (layout month) "
        f"but the archive {root} records s3://{s3_env.bucket}/{prefix}/warm (layout month)"
    ) in str(refused.value)
    assert "placed there" in str(refused.value)
    assert (root / POLICY_RECORD).read_bytes() == record


def test_a_writer_opened_before_another_changed_the_policy_refuses_instead_of_writing_under_it(
    tmp_path, capsys
):
    first = policy_file(tmp_path / "first.toml", "tiers/warm", "tiers/cold")
    second = policy_file(tmp_path / "second.toml", "elsewhere/warm", "elsewhere/cold")
    archive, data = tmp_path / "data" / "archive", tmp_path / "data"
    assert compact_ticks(capsys, tmp_path, "--tier-policy", str(first))[0] == 0
    opened = Archive(archive)  # the first policy, from its record
    assert compact_ticks(capsys, tmp_path, "--tier-policy", str(second))[0] == 0  # another writer
    catalog, rows = CatalogStore(archive).path, view_rows(archive)

    with pytest.raises(ConfigError, match="another writer changed the archive's tier policy"):
        opened.retier(as_of=date(2025, 12, 12))

    assert not (data / "tiers").exists() and not catalog.exists()  # nothing under the old one
    again = Archive(archive).retier(as_of=date(2025, 12, 12))  # opened again: the new policy
    assert len(again.moved) == 4 and list((data / "elsewhere").rglob("*.parquet"))
    assert not (data / "tiers").exists()
    assert view_rows(archive) == rows

"""An archive reached through a symbolic link (to its root, to a folder above it, or spelled
with ``..`` after a link) keeps its warm and cold tiers beside the folder the link leads to:
every spelling writes and reads the same tiers, every tick once, and no folder appears beside
a link."""

from __future__ import annotations

import os
from datetime import date
from pathlib import Path

import pyarrow as pa
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.policy import COLD, WARM, TierPolicy, TierSettings
from skewtape_pipeline.ticks.archive.store.tiers import ArchiveTiers
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

AS_OF = "2026-03-02"
"""Re-tiering date at which 2025-12-01 is cold and 2025-12-02 .. 04 are warm (default policy)."""

TIERS_NOW = ["COLD\t3", "WARM\t9"]
"""``tier, count(*)`` of the four days' 12 trades once re-tiered at :data:`AS_OF`."""


@pytest.fixture
def spellings(tmp_path: Path) -> dict[str, Path]:
    """The four days' trades compacted into ``real/arc``, and the ways to name that root: the
    real path, a link to it elsewhere, a link to the folder above it, ``..`` after a link."""
    real = tmp_path / "real" / "arc"
    source = write_four_day_csv(tmp_path / "trades.csv")
    compact = ["compact-ticks", str(source), "--out", str(real), "--price-scale", "2"]
    assert main([*compact, "--as-of", "2025-12-05"]) == 0
    for folder in ("elsewhere", "up"):
        (tmp_path / folder).mkdir()
    (tmp_path / "elsewhere" / "arc").symlink_to(Path("..", "real", "arc"), True)
    (tmp_path / "above").symlink_to("real", target_is_directory=True)
    (tmp_path / "up" / "in").symlink_to(Path("..", "real", "arc"), True)
    return {
        "real": real,
        "link": tmp_path / "elsewhere" / "arc",
        "parent link": tmp_path / "above" / "arc",
        "dotdot": tmp_path / "up" / "in" / ".." / "arc",  # as spelled: up/arc, not there
    }


def cli(capsys, *argv: str) -> tuple[int, str, str]:
    """``(exit code, stdout, stderr)`` of the command line run with ``argv``."""
    capsys.readouterr()
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def trades(tmp_path: Path) -> list[int]:
    """The timestamps of every trade in ``trades.csv`` (and ``more.csv`` when written)."""
    found = []
    for name in ("trades.csv", "more.csv"):
        if (tmp_path / name).exists():
            lines = (tmp_path / name).read_text().splitlines()[1:]
            found += [int(line.split(",")[0]) for line in lines]
    return sorted(set(found))


def assert_reads_every_tick_once(capsys, root: Path, tmp_path: Path, tiers: list[str]) -> None:
    """``query``, ``verify-archive`` and ``Archive.read`` through ``root`` succeed, read each
    trade once, count ``tiers`` by tier, and name no folder beside a link."""
    sql = "SELECT tier, count(*) FROM ticks GROUP BY ALL ORDER BY ALL"
    code, out, err = cli(capsys, "query", sql, "--archive", str(root))
    assert (code, err, out.splitlines()[1:]) == (0, "", tiers), root
    code, out, err = cli(capsys, "verify-archive", str(root))
    assert (code, err) == (0, ""), root
    read = Archive(root, audit_log=None).read().column("ts").cast(pa.int64()).to_pylist()
    assert sorted(read) == trades(tmp_path), root
    assert_nothing_beside_links(tmp_path)


def assert_nothing_beside_links(tmp_path: Path) -> None:
    """Only the links themselves beside the links; the tiers beside the real root."""
    assert sorted(os.listdir(tmp_path / "elsewhere")) == ["arc"]
    assert sorted(os.listdir(tmp_path / "up")) == ["in"]
    assert {"above", "elsewhere", "real", "up"} <= set(os.listdir(tmp_path))
    assert not [name for name in os.listdir(tmp_path) if name.startswith(("arc", "in"))]


@pytest.mark.parametrize("via", ["link", "parent link", "dotdot", "real"])
def test_retier_through_any_spelling_then_every_spelling_reads_every_tick_once(
    spellings, via, tmp_path, capsys
):
    code, out, err = cli(capsys, "retier", str(spellings[via]), "--as-of", AS_OF)
    assert (code, err) == (0, ""), err
    assert "elsewhere" not in out.replace(str(spellings["link"]), "")
    real = spellings["real"]
    assert {p.name for p in real.parent.iterdir()} >= {"arc", "arc-warm", "arc-cold"}
    for spelling in spellings.values():
        assert_reads_every_tick_once(capsys, spelling, tmp_path, TIERS_NOW)


@pytest.mark.parametrize("via", ["link", "dotdot"])
def test_compact_ticks_through_a_link_into_warm_and_cold_tiers_reads_every_tick_once(
    spellings, via, tmp_path, capsys
):
    assert cli(capsys, "retier", str(spellings["real"]), "--as-of", AS_OF)[0] == 0
    first = (tmp_path / "trades.csv").read_text()
    later = int(first.splitlines()[1].split(",")[0]) + 7  # 2025-12-01: in the cold tier
    (tmp_path / "more.csv").write_text(first + f"{later},0.60,4,SELL,KX-0\n")
    argv = ["compact-ticks", str(tmp_path / "more.csv"), "--out", str(spellings[via])]
    code, out, err = cli(capsys, *argv, "--price-scale", "2", "--as-of", AS_OF)
    assert (code, err) == (0, ""), err
    assert "1 symbol-days changed; 3 already held with the same ticks" in out  # cold one hidden
    for spelling in spellings.values():
        assert_reads_every_tick_once(capsys, spelling, tmp_path, ["HOT\t4", "WARM\t9"])


def test_relative_tier_roots_given_through_a_link_lie_beside_the_real_root(
    spellings, tmp_path, capsys
):
    policy = tmp_path / "policy.toml"
    policy.write_text('[warm]\nroot = "tiers/warm"\n[cold]\nroot = "tiers/cold"\n')
    argv = ["compact-ticks", str(tmp_path / "trades.csv"), "--out", str(spellings["link"])]
    options = ["--price-scale", "2", "--as-of", "2025-12-05", "--tier-policy", str(policy)]
    code, _, err = cli(capsys, *argv, *options)
    assert (code, err) == (0, ""), err
    assert cli(capsys, "retier", str(spellings["link"]), "--as-of", AS_OF)[0] == 0
    tiers = tmp_path / "real" / "tiers"
    assert sorted(os.listdir(tiers)) == ["cold", "warm"]
    for spelling in spellings.values():
        assert_reads_every_tick_once(capsys, spelling, tmp_path, TIERS_NOW)


def test_a_policy_naming_the_recorded_tier_root_through_a_link_moves_no_tier(spellings, tmp_path):
    real = spellings["real"]
    Archive(real, policy=TierPolicy(), audit_log=None).retier(as_of=date.fromisoformat(AS_OF))
    for tier in ("warm", "cold"):
        (tmp_path / f"{tier}-link").symlink_to(real.parent / f"arc-{tier}", True)
    linked = TierPolicy(
        warm=TierSettings(root=str(tmp_path / "warm-link")),
        cold=TierSettings(root=str(tmp_path / "cold-link")),
    )
    for spelling in spellings.values():
        read = Archive(spelling, policy=linked, audit_log=None).read()
        assert sorted(read.column("ts").cast(pa.int64()).to_pylist()) == trades(tmp_path)


def test_tiers_of_an_archive_reached_through_a_link_are_beside_the_real_root(spellings):
    real = spellings["real"]
    for spelling in spellings.values():
        tiers = ArchiveTiers.of(spelling)
        assert tiers.roots == {WARM: real.with_name("arc-warm"), COLD: real.with_name("arc-cold")}
        assert tiers.root == spelling


def test_a_warm_root_linked_into_the_archive_root_is_refused_as_nested(spellings, tmp_path):
    (tmp_path / "warm-link").symlink_to(spellings["real"] / "warm", True)
    policy = TierPolicy(warm=TierSettings(root=str(tmp_path / "warm-link")))
    with pytest.raises(ConfigError, match=r"^the WARM root .* lies inside, the other"):
        ArchiveTiers.of(spellings["real"], policy)


def test_an_archive_root_in_a_loop_of_links_is_refused_on_one_line(tmp_path, capsys):
    (tmp_path / "loop").symlink_to("loop")
    code, out, err = cli(capsys, "retier", str(tmp_path / "loop"), "--as-of", AS_OF)
    assert code == 2 and out == "" and len(err.splitlines()) == 1, err
    assert "Traceback" not in err

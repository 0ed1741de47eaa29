"""A hot file damaged in place damages its kept version's copy (a hard link to it): the repair
``verify-archive`` names (compact the symbol-day again from the same ticks) restores the copy
too, so every version reads again, and ``verify-archive`` names the versions affected."""

from __future__ import annotations

from pathlib import Path

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.ticks.archive.store.versions import VersionLog
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

DAY = "date=2025-12-01"
COUNT = "SELECT symbol, count(*) AS n, sum(quantity) AS q FROM ticks GROUP BY symbol ORDER BY 1"


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def damage_in_place(path: Path) -> None:
    """Flip four bytes inside ``path``, writing through its inode (no rename)."""
    with open(path, "r+b") as handle:
        handle.seek(200)
        data = handle.read(4)
        handle.seek(200)
        handle.write(bytes(b ^ 0xFF for b in data))


def test_recompacting_a_damaged_hot_file_restores_the_copy_its_versions_read(tmp_path, capsys):
    ticks = write_four_day_csv(tmp_path / "ticks.csv")
    first_day = tmp_path / "first-day.csv"
    first_day.write_text("".join(ticks.read_text().splitlines(keepends=True)[:4]))
    archive = tmp_path / "archive"
    compact = ("compact-ticks", "--out", str(archive), "--as-of", "2025-12-05", "--price-scale",
               "2", "--json")  # fmt: skip
    assert run(capsys, compact[0], str(ticks), *compact[1:])[0] == 0
    assert run(capsys, "tag", str(archive), "first")[0] == 0
    code, before, _ = run(capsys, "query", COUNT, "--archive", str(archive), "--as-of", "first")
    assert code == 0
    hot = next(archive.glob(f"symbol=KX-0/*/*/{DAY}/part-0.parquet"))
    damage_in_place(hot)

    code, _, err = run(capsys, "verify-archive", str(archive))
    assert code == 2
    assert "version(s) 1 read it; repair: compact KX-0 2025-12-01 again" in err

    assert run(capsys, compact[0], str(first_day), *compact[1:])[0] == 0
    code, _, err = run(capsys, "verify-archive", str(archive), "--full")
    assert code == 0, err
    code, after, err = run(capsys, "query", COUNT, "--archive", str(archive), "--as-of", "first")
    assert code == 0, err
    assert after == before
    kept = next(VersionLog(archive).hot_blobs_dir().glob(f"symbol=KX-0/*/*/{DAY}/*.pq"))
    assert kept.stat().st_ino == hot.stat().st_ino  # a link to the rewritten hot file again


def test_tag_when_another_writer_holds_the_lock_waits_with_wait_as_its_refusal_says(
    tmp_path, capsys
):
    import threading

    from skewtape_pipeline.ticks.archive.handle import Archive

    archive = tmp_path / "archive"
    ticks = write_four_day_csv(tmp_path / "ticks.csv")
    argv = ("compact-ticks", str(ticks), "--out", str(archive), "--as-of", "2025-12-05")
    assert run(capsys, *argv, "--price-scale", "2")[0] == 0
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with Archive(archive).core.locked("holding for a test"):
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold)
    holder.start()
    try:
        assert held.wait(30)
        code, _, err = run(capsys, "tag", str(archive), "busy")
        assert code == 2 and "(--wait)" in err
        threading.Timer(0.5, release.set).start()
        assert run(capsys, "tag", str(archive), "patient", "--wait", "30")[0] == 0
    finally:
        release.set()
        holder.join()
    assert VersionLog(archive).read_tag("patient") == VersionLog(archive).latest().version

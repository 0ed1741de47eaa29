"""The ``Archive`` handle: options fixed and validated when built, the tier policy recorded by
the archive (every command finds the tiers without ``--tier-policy``), no audit meaning no
audit, and a catalog rebuild that would lose symbol-days refused."""

from __future__ import annotations

import json
from dataclasses import fields
from datetime import UTC, date, datetime, time, timedelta
from decimal import Decimal
from pathlib import Path

import duckdb
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ArchiveBusyError, ConfigError, NotAnArchiveError
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.ops.compact_plan import SymbolDayWrite
from skewtape_pipeline.ticks.archive.ops.show import relocated_report
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.archive.store.tiers import POLICY_RECORD, ArchiveTiers
from skewtape_pipeline.ticks.encode.model import SchemaRequest
from skewtape_pipeline.ticks.encode.options import TickEncoding
from skewtape_pipeline.ticks.encode.sources import read_canonical
from skewtape_pipeline.ticks.encode.writer_settings import WriterSettings
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv
from skewtape_pipeline_tests.ticks.conftest import make_batch

COUNT = "SELECT count(*) AS n FROM ticks"
PRICE_SCALE_2 = TickEncoding(SchemaRequest(price_scale=2))


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def _retiered_with_policy(tmp_path: Path, capsys, tiers: str = "tiers") -> tuple[Path, Path]:
    """An archive compacted, then re-tiered to COLD with a policy placing the tiers in
    ``<tiers>/`` beside it; returns (archive, policy file)."""
    tmp_path.mkdir(parents=True, exist_ok=True)
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = tmp_path / "data" / "archive"
    policy = tmp_path / "tiers.toml"
    policy.write_text(f'[warm]\nroot = "{tiers}/warm"\n[cold]\nroot = "{tiers}/cold"\n')
    code, _, err = run(capsys, "compact-ticks", str(source), "--out", str(archive),
                       "--as-of", "2025-12-05", "--price-scale", "2")  # fmt: skip
    assert code == 0, err
    code, out, err = run(
        capsys, "retier", str(archive), "--as-of", "2027-01-01", "--tier-policy", str(policy)
    )
    assert code == 0 and "moved 4 symbol-days" in out, err
    return archive, policy


def _count(capsys, archive: Path, *extra: str) -> int:
    code, out, err = run(capsys, "query", COUNT, "--archive", str(archive), "--json", *extra)
    assert code == 0, err
    return json.loads(out)[0]["n"]


def test_cli_rebuild_catalog_after_retier_with_a_policy_finds_the_tiers_without_it(
    tmp_path, capsys
):
    archive, _ = _retiered_with_policy(tmp_path, capsys)
    code, out, err = run(capsys, "rebuild-catalog", str(archive), "--json")
    assert code == 0, err
    assert json.loads(out)["symbol_days"] == 4
    assert _count(capsys, archive) == 12
    code, out, err = run(capsys, "verify-archive", str(archive), "--json")
    assert code == 0 and json.loads(out)["problems"] == [], err


def test_cli_query_over_two_archives_reads_each_through_the_policy_it_records(tmp_path, capsys):
    first, _ = _retiered_with_policy(tmp_path / "first", capsys)
    second, _ = _retiered_with_policy(tmp_path / "second", capsys, tiers="elsewhere")
    assert _count(capsys, first) == _count(capsys, second) == 12
    assert _count(capsys, first, "--archive", str(second)) == 24
    assert _count(capsys, second, "--archive", str(first)) == 24


def test_cli_a_policy_placing_the_tiers_elsewhere_than_recorded_is_refused_naming_both(
    tmp_path, capsys
):
    archive, _ = _retiered_with_policy(tmp_path, capsys)
    other = tmp_path / "other.toml"
    other.write_text('[warm]\nroot = "tiers/warm"\n[cold]\nroot = "elsewhere"\n')
    before = sorted(str(p) for p in tmp_path.rglob("*"))
    for argv in (
        ["rebuild-catalog", str(archive)],
        ["retier", str(archive), "--as-of", "2027-01-01"],
        ["query", COUNT, "--archive", str(archive)],
    ):
        code, _, err = run(capsys, *argv, "--tier-policy", str(other))
        assert code == 2, argv
        assert "elsewhere" in err and "tiers/cold" in err and POLICY_RECORD in err, err
    assert sorted(str(p) for p in tmp_path.rglob("*")) == before


def test_cli_rebuild_catalog_that_would_hold_fewer_symbol_days_refuses_unless_allowed(
    tmp_path, capsys
):
    archive, _ = _retiered_with_policy(tmp_path, capsys)
    (archive / POLICY_RECORD).unlink()  # an archive that predates the record: default roots
    catalog = sorted(p.name for p in archive.iterdir())
    code, _, err = run(capsys, "rebuild-catalog", str(archive))
    assert code == 2
    assert "0 symbol-days, the catalog 4" in err and "--allow-fewer" in err, err
    assert sorted(p.name for p in archive.iterdir()) == catalog
    code, out, err = run(capsys, "rebuild-catalog", str(archive), "--allow-fewer", "--json")
    assert code == 0 and json.loads(out)["symbol_days"] == 0, err


def test_archive_with_no_audit_log_writes_none_and_by_default_audits_beside_the_root(tmp_path):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    quiet = Archive(tmp_path / "quiet" / "archive", audit_log=None)
    quiet.compact(read_canonical(source), as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    quiet.retier(as_of=date(2027, 1, 1))
    assert not (tmp_path / "quiet" / "audit.jsonl").exists()
    audited = Archive(tmp_path / "audited" / "archive")
    audited.compact(read_canonical(source), as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    audited.retier(as_of=date(2027, 1, 1))
    assert audited.audit_log == (tmp_path / "audited" / "audit.jsonl").absolute()
    assert audited.audit_log.exists()


def test_archive_when_audit_log_is_a_file_named_beside_audits_to_that_file(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive = Archive(tmp_path / "archive", audit_log="beside")
    archive.compact(read_canonical(source), as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    archive.retier(as_of=date(2027, 1, 1))
    assert archive.audit_log == Path("beside")
    assert (tmp_path / "beside").read_text().count("\n") > 0
    assert not (tmp_path / "audit.jsonl").exists()


@pytest.mark.parametrize(
    ("options", "named"),
    [
        ({"lock_timeout": -1}, "lock_timeout"),
        ({"lock_timeout": "soon"}, "lock_timeout"),
        ({"lock_timeout": float("nan")}, "lock_timeout"),  # would wait for ever
        ({"lock_timeout": float("inf")}, "lock_timeout"),
        ({"policy": {"hot_max_age_days": 3}}, "policy"),
        ({"audit_log": 5}, "audit_log = 5"),
        ({"books_and_records": "no"}, "books_and_records = 'no'"),  # was write-once for good
    ],
)
def test_archive_when_built_with_a_bad_option_raises_config_error_naming_it(
    tmp_path, options, named
):
    with pytest.raises(ConfigError, match=named):
        Archive(tmp_path / "archive", **options)


def test_archive_writer_with_an_audit_log_in_a_missing_folder_is_refused_creating_nothing(
    tmp_path,
):
    """The command line refuses ``--audit-log`` there; a compaction created the folder."""
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive = Archive(tmp_path / "archive", audit_log=tmp_path / "missing" / "audit.jsonl")
    with pytest.raises(ConfigError, match=r"audit_log = .*: its folder .* does not exist"):
        archive.compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ticks.csv"]


def test_archive_verbs_given_arguments_of_the_wrong_type_refuse_naming_them_writing_nothing(
    tmp_path,
):
    """``withdraw(None)`` and ``remove(5)`` were bare TypeErrors, ``open_view(None)`` an
    AttributeError after the files were verified (and their cache written), and
    ``rebuild_catalog(allow_fewer="no")`` allowed losing symbol-days, ``verify(full="no")``
    scrubbed every page, ``days(None)`` answered no days, ``versions.at("2026-01-01")`` was an
    AttributeError, ``retier(months=5)`` a TypeError (and months in a generator moved nothing),
    ``compact_symbol_day`` given no
    SymbolDayWrite and ``compact(run=None)`` AttributeErrors."""
    archive = Archive(tmp_path / "archive")
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive.compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    before = sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
    batch = make_batch([(1_764_547_200 * 10**9, 70, 1, 1)], price_scale=2)
    write = SymbolDayWrite(symbol="KX-0", day=date(2025, 12, 1), age_days=4)

    def again():
        return read_canonical(tmp_path / "ticks.csv")

    for call, named in [
        (lambda: archive.withdraw(None), "keys = None"),
        (lambda: archive.remove(5), "keys = 5"),
        (lambda: archive.open_view(None), "con = None"),
        (lambda: archive.rebuild_catalog(allow_fewer="no"), "allow_fewer = 'no'"),
        (lambda: archive.verify(full="no"), "full = 'no'"),
        (lambda: archive.days(None), "symbol = None"),
        (lambda: archive.days(["KX-0"]), r"symbol = \['KX-0'\]"),
        (lambda: archive.versions.at("2026-01-01"), "when = '2026-01-01'"),
        (lambda: archive.versions.at(None), "when = None"),
        (lambda: archive.retier(as_of=date(2025, 12, 5), months=5), "months = 5"),
        (lambda: archive.plan_retier(as_of=date(2025, 12, 5), months=5), "months = 5"),
        (  # read twice (checked, then planned): a generator retiered nothing
            lambda: archive.retier(as_of=date(2026, 3, 1), months=(m for m in ["2025-12"])),
            "months = <generator",
        ),
        (lambda: archive.compact_symbol_day(batch, None), "write = None"),
        (lambda: archive.compact_symbol_day(None, write), "batch = None"),
        (lambda: archive.compact(again(), as_of=date(2025, 12, 5), run=None), "run = None"),
    ]:
        with pytest.raises(ConfigError, match=named):
            call()
    assert [
        item
        for item in sorted((p, p.stat().st_mtime_ns) for p in tmp_path.rglob("*"))
        if not item[0].name.endswith(".lock")
    ] == [item for item in before if not item[0].name.endswith(".lock")]


def test_archive_versions_at_a_date_answers_as_at_its_midnight_utc(tmp_path):
    archive = Archive(tmp_path / "archive")
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive.compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    committed = archive.versions.latest().time.date()
    after, before = committed + timedelta(days=1), committed - timedelta(days=1)

    assert archive.versions.at(after) == archive.versions.latest().version
    assert archive.versions.at(after) == archive.versions.at(datetime.combine(after, time(), UTC))
    assert archive.versions.at(before) is None


@pytest.mark.parametrize("root", [None, 5, ""])
def test_archive_built_for_a_root_that_is_no_path_is_refused_making_no_folder(
    tmp_path, monkeypatch, root
):
    """None or a number was taken as a folder named ``None`` or ``5`` in the working folder,
    created by the first compaction."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(ConfigError, match=f"root = {root!r}: expected a tick archive root"):
        Archive(root)
    assert list(tmp_path.iterdir()) == []


def test_archive_at_the_file_systems_root_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "top").symlink_to("/")
    for root in ("/", str(tmp_path / "top"), str(tmp_path / "top" / "..")):
        with pytest.raises(ConfigError, match="the file system's root; expected a folder"):
            Archive(root)
        assert main(["query", "SELECT 1", "--archive", root]) == 2
        err = capsys.readouterr().err
        assert err.startswith(f"error: {root}: the file system's root; expected a folder")
        assert len(err.splitlines()) == 1


def test_archive_given_a_policy_records_it_only_once_a_write_succeeded(tmp_path):
    policy = TierPolicy(hot_max_age_days=3, warm_max_age_days=30)
    archive = Archive(tmp_path / "archive", policy=policy)
    assert not (tmp_path / "archive").exists()
    source = write_four_day_csv(tmp_path / "ticks.csv")
    archive.compact(read_canonical(source), as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    assert Archive(tmp_path / "archive").policy == policy


@pytest.mark.parametrize(
    "verb",
    [
        lambda a: a.prune(),
        lambda a: a.withdraw([("KX-1", date(2025, 12, 1))]),
        lambda a: a.remove([("KX-0", date(2025, 12, 1))]),
        lambda a: a.rebuild_catalog(allow_fewer=True),
        lambda a: a.versions.tag("first"),
        lambda a: a.versions.prune(keep_last=1),
    ],
    ids=["prune", "withdraw", "remove", "rebuild_catalog", "tag", "prune_versions"],
)
def test_archive_given_a_policy_records_it_after_any_writing_verb_succeeded(tmp_path, verb):
    source = write_four_day_csv(tmp_path / "ticks.csv")
    Archive(tmp_path / "archive").compact(
        read_canonical(source), as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2
    )
    assert not (tmp_path / "archive" / POLICY_RECORD).exists()  # none given, none recorded
    policy = TierPolicy(hot_max_age_days=3, warm_max_age_days=30)
    verb(Archive(tmp_path / "archive", policy=policy))
    assert Archive(tmp_path / "archive").policy == policy


WRITERS = {
    "retier": lambda a: a.retier(as_of=date(2025, 12, 5)),
    "prune": lambda a: a.prune(),
    "withdraw": lambda a: a.withdraw([("KX-1", date(2025, 12, 1))]),
    "remove": lambda a: a.remove([("KX-0", date(2025, 12, 1))]),
    "rebuild_catalog": lambda a: a.rebuild_catalog(allow_fewer=True),
    "tag": lambda a: a.versions.tag("first"),
    "prune_versions": lambda a: a.versions.prune(keep_last=1),
}


@pytest.mark.parametrize("verb", sorted(WRITERS))
@pytest.mark.parametrize("root", ["missing", "foreign"])
def test_archive_writer_other_than_a_compaction_refuses_a_root_without_archive_creating_nothing(
    tmp_path, verb, root
):
    folder = tmp_path / "archiv"  # a mistyped root
    if root == "foreign":
        folder.mkdir()
        (folder / "notes.txt").write_text("not an archive\n")
    before = sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*"))

    with pytest.raises(NotAnArchiveError, match=f"^{folder}: "):
        WRITERS[verb](Archive(folder, policy=TierPolicy(hot_max_age_days=3)))
    assert sorted(p.relative_to(tmp_path) for p in tmp_path.rglob("*")) == before


def test_archive_writers_over_an_archive_with_nothing_compacted_yet_succeed(tmp_path):
    root = tmp_path / "archive"
    root.mkdir()
    (root / POLICY_RECORD).write_text(json.dumps(TierPolicy(hot_max_age_days=3).to_dict()))
    assert Archive(root).retier(as_of=date(2025, 12, 5)).moved == []  # bookkeeping alone


def test_archive_compact_symbol_day_when_it_succeeded_commits_a_version_readable_as_of_it(
    tmp_path,
):
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive = Archive(tmp_path / "archive")
    archive.compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    before = [v.version for v in archive.versions.list()]
    day, start = date(2025, 12, 1), 1_764_547_200 * 10**9
    one = archive.read(["KX-0"], start=day, end=day)
    batch = make_batch([(start + i, 70 + i, i + 1, 1) for i in range(3)], price_scale=2)
    archive.compact_symbol_day(batch, SymbolDayWrite(symbol="KX-0", day=day, age_days=4))
    after = [v.version for v in archive.versions.list()]
    assert after == [*before, before[-1] + 1]
    changed = archive.read(["KX-0"], start=day, end=day)
    assert changed["price"].to_pylist() == [Decimal("0.70"), Decimal("0.71"), Decimal("0.72")]
    assert archive.read(["KX-0"], start=day, end=day, as_of=before[-1]) == one


def test_archive_maps_catalog_paths_through_its_policy_tier_roots_both_ways(tmp_path):
    policy = TierPolicy.from_dict({"warm": {"root": "tiers/warm"}}, source="test")
    archive = Archive(tmp_path / "data" / "archive", policy=policy)
    warm = archive.tiers.resolve("WARM/year=2026/part-0123456789abcdef.parquet")
    assert warm == tmp_path / "data" / "tiers" / "warm" / "year=2026" / warm.name
    assert archive.tiers.relative(warm) == "WARM/year=2026/part-0123456789abcdef.parquet"
    hot = archive.tiers.resolve("symbol=ES/date=2026-11-20/part.parquet")
    assert hot == archive.root / "symbol=ES" / "date=2026-11-20" / "part.parquet"
    assert archive.tiers.relative(hot) == "symbol=ES/date=2026-11-20/part.parquet"


def test_archive_resolves_its_tier_policy_into_stores_once_for_every_verb(tmp_path, monkeypatch):
    resolved: list[str] = []
    store_for = TierPolicy.store_for

    def counted(policy: TierPolicy, tier: str, root: Path):
        resolved.append(tier)
        return store_for(policy, tier, root)

    monkeypatch.setattr(TierPolicy, "store_for", counted)
    archive = Archive(tmp_path / "archive")
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    archive.compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    assert archive.retier(as_of=date(2027, 1, 1)).moved
    archive.waiting(1).compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    archive.prune()
    archive.rebuild_catalog()
    assert resolved == ["WARM", "COLD"]
    assert archive.tiers.writers["COLD"] == WriterSettings(
        **{f.name: getattr(archive.policy.cold, f.name) for f in fields(WriterSettings)}
    )
    assert type(archive.tiers.writers["COLD"]) is WriterSettings


def test_archive_reading_verbs_read_the_tiers_it_resolved_and_resolve_no_policy_again(
    tmp_path, monkeypatch
):
    policy = TierPolicy.from_dict({"cold": {"root": "tiers/cold"}}, source="test")
    archive = Archive(tmp_path / "data" / "archive", policy=policy, audit_log=None)
    source = read_canonical(write_four_day_csv(tmp_path / "ticks.csv"))
    reports = archive.compact(source, as_of=date(2025, 12, 5), encoding=PRICE_SCALE_2)
    assert archive.retier(as_of=date(2027, 1, 1)).moved
    assert archive.tiers.root == archive.root  # resolved once, before the reads
    resolving = []
    for name in ("store_for", "root_for", "layout_for", "or_default"):
        monkeypatch.setattr(TierPolicy, name, lambda *a, name=name: resolving.append(name))
    monkeypatch.setattr(ArchiveTiers, "of", lambda *a: resolving.append("ArchiveTiers.of"))

    assert archive.query(COUNT).to_pylist() == [{"n": 12}]
    assert archive.read(columns=["tier"]).column("tier").unique().to_pylist() == ["COLD"]
    symbol, day = reports[0].symbol, date.fromisoformat(reports[0].date)
    assert archive.report(symbol, day).path.is_relative_to(tmp_path / "data" / "tiers" / "cold")
    assert archive.verify(full=True).problems == []
    assert archive.stats().tiers["COLD"].ticks == 12
    con = archive.open_view(duckdb.connect())
    assert con.execute(COUNT).fetchall() == [(12,)]
    assert relocated_report(reports[0], archive.core).tier == "COLD"
    assert resolving == []


def test_archive_locked_refuses_a_second_holder_after_its_lock_timeout_naming_the_first(
    tmp_path,
):
    archive = Archive(tmp_path / "archive")
    archive.root.mkdir()
    contender = Archive(archive.root, lock_timeout=0.1)
    refused = pytest.raises(ArchiveBusyError, match=r"held by re-tiering .*refused pruning")
    with archive.core.locked("re-tiering"), refused, contender.core.locked("pruning"):
        pass
    with contender.core.locked("pruning"):  # released: taken again
        pass


def test_compact_when_given_a_path_refuses_naming_the_readers_and_writes_nothing(tmp_path):
    from skewtape_pipeline.ticks.input_formats import InputOptions, open_input

    csv = write_four_day_csv(tmp_path / "ticks.csv")
    root = tmp_path / "archive"
    for path in (str(csv), csv):
        with pytest.raises(ConfigError, match="read_canonical") as caught:
            Archive(root).compact(path, as_of=date(2025, 12, 5))
        assert "not a str" in str(caught.value) or "Path" in str(caught.value)
    assert not root.exists()
    options = InputOptions()
    reports = Archive(root).compact(open_input(str(csv), None, options), as_of=date(2025, 12, 5))
    from_reader = Archive(tmp_path / "again").compact(read_canonical(csv), as_of=date(2025, 12, 5))
    assert [r.symbol for r in reports] == [r.symbol for r in from_reader]

"""No credential is ever printed, logged or written: every command that takes a source or a
root, and the Dagster fetch, given every spelling of a URL that carries a secret (a user part,
a ``?token=``, a ``#fragment``, upper-case schemes, ``S3://KEY:PW@``, ``ftp://``), exits with
one line naming it redacted (``https://***@host/path``), and no output, log line, event,
metadata value or file written holds the secret. A URL-shaped tier root is refused when the
policy is read, before anything is written."""

from __future__ import annotations

import ast
import gc
import io
import json
import logging
import os
from pathlib import Path

import dagster as dg
import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.errors import ConfigError
from skewtape_pipeline.locations import parse_location, redact_urls
from skewtape_pipeline.mirror.sources import open_source
from skewtape_pipeline.orchestration.definitions import build_definitions
from skewtape_pipeline.orchestration.mirror.publisher import PublisherSource, publisher_sensor
from skewtape_pipeline.orchestration.shared.resources import SkewtapeHome
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.layout import ARCHIVE_MARKER
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy, TierSettings
from skewtape_pipeline.ticks.archive.store.tiers import POLICY_RECORD
from skewtape_pipeline_tests.orchestration.conftest import run_month
from skewtape_pipeline_tests.ticks.archive_builders import write_four_day_csv

SECRET = "Pw7sEcReT4q"
"""The password, token or fragment every spelling carries (found nowhere afterwards)."""

SPELLINGS = (
    f"https://user:{SECRET}@127.0.0.1:9/pub",
    f"https://127.0.0.1:9/pub?token={SECRET}",
    f"https://127.0.0.1:9/pub#{SECRET}",
    f"HTTPS://user:{SECRET}@127.0.0.1:9/pub",
    f"HTTP://user:{SECRET}@127.0.0.1:9/pub",
    f"S3://KEY:{SECRET}@bucket/pub",
    f"s3://KEY:{SECRET}@bucket/pub",
    f"s3://bucket/pub?token={SECRET}",
    f"ftp://user:{SECRET}@127.0.0.1/pub",
    f"https://user:pa/{SECRET}@127.0.0.1:9/pub",
)


def found_secret(folder: Path) -> list[str]:
    """Every file below ``folder`` whose name or bytes hold :data:`SECRET`."""
    hits = []
    for dirpath, dirnames, filenames in os.walk(folder):
        for name in dirnames + filenames:
            path = Path(dirpath, name)
            if SECRET in str(path) or (path.is_file() and SECRET.encode() in path.read_bytes()):
                hits.append(str(path))
    return hits


def listing(folder: Path) -> dict[str, bytes | None]:
    return {
        str(path.relative_to(folder)): path.read_bytes() if path.is_file() else None
        for path in sorted(folder.rglob("*"))
    }


def policy_files(folder: Path, spec: str) -> list[Path]:
    """Tier policies (TOML and JSON) whose warm tier's root is ``spec``."""
    toml = folder / "tiers.toml"
    toml.write_text(f'[warm]\nroot = "{spec}"\n', encoding="utf-8")
    as_json = folder / "tiers.json"
    as_json.write_text(json.dumps({"cold": {"root": spec}}), encoding="utf-8")
    return [toml, as_json]


def commands(spec: str, work: Path) -> list[list[str]]:
    """Every command of the CLI given ``spec`` where it takes a source, a root, a folder, a
    file or a tier policy's root."""
    csv = str(write_four_day_csv(work / "ticks.csv"))
    archive = str(work / "archive")
    root = str(work / "root")
    runs = [
        ["fetch", spec, "--root", root],
        ["fetch", spec, "--root", root, "--json"],
        ["fetch", spec, "--root", root, "--dry-run"],
        ["fetch", spec, "--root", root, "--snapshot", "2026-09"],
        ["fetch", "publisher", "--root", root, "--snapshot", spec],
        ["fetch", "publisher", "--root", spec],
        ["sync", spec, "--root", root],
        ["sync", spec, "--root", root, "--json", "--in-place"],
        ["apply-delta", spec, spec],
        ["apply-delta", str(work), str(work), "--into", spec],
        ["apply-delta", str(work), str(work), "--audit-log", spec],
        ["verify", spec],
        ["catch-up", spec, spec],
        ["sample", spec],
        ["diff", spec, spec, spec],
        ["audit-verify", spec],
        ["compact-ticks", csv, "--out", spec, "--as-of", "2025-12-05"],
        ["compact-ticks", spec, "--out", archive, "--as-of", "2025-12-05"],
        ["retier", spec, "--as-of", "2025-12-05"],
        ["remove-days", spec, "--day", "KX-0", "2025-12-01"],
        ["query", "SELECT count(*) FROM ticks", "--archive", spec],
        ["verify-archive", spec],
        ["rebuild-catalog", spec],
        ["versions", spec],
        ["tag", spec, "v1"],
        ["prune-versions", spec, "--keep-last", "1"],
        ["show", spec, "KX-0", "2025-12-01"],
        ["verify-archive", spec, "extra-argument"],
    ]
    inputs = work.parent / "inputs"  # the policies hold the secret, by design
    inputs.mkdir(exist_ok=True)
    for policy in policy_files(inputs, spec):
        runs += [
            ["compact-ticks", csv, "--out", archive, "--as-of", "2025-12-05", "--price-scale",
             "2", "--tier-policy", str(policy)],
            ["retier", archive, "--as-of", "2025-12-05", "--tier-policy", str(policy)],
            ["query", "SELECT count(*) FROM ticks", "--archive", archive, "--tier-policy",
             str(policy)],
            ["verify-archive", archive, "--tier-policy", str(policy)],
        ]  # fmt: skip
    return runs


@pytest.mark.parametrize("spec", SPELLINGS)
def test_every_command_when_given_a_secret_url_refuses_it_redacted_and_writes_nothing(
    spec, tmp_path, monkeypatch, capsys, caplog
):
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    caplog.set_level(logging.DEBUG)
    for argv in commands(spec, work):
        before = listing(work)
        try:
            code = main(argv)
        except SystemExit as exc:  # argparse's usage error
            code = exc.code
        out, err = capsys.readouterr()
        assert SECRET not in out + err + caplog.text, (argv, out, err)
        assert code == 2, (argv, out, err)
        errors = [line for line in err.splitlines() if "error:" in line]
        assert len(errors) == 1 and "Traceback" not in err, (argv, err)  # after any usage
        assert listing(work) == before, argv
    assert found_secret(work) == [], spec


def test_every_message_when_a_source_carries_a_secret_names_it_redacted():
    shown = {
        f"https://user:{SECRET}@h/p?token=x#f": "https://***@h/p",
        f"HTTPS://u:{SECRET}@h:8443/a/b": "https://***@h:8443/a/b",
        f"S3://KEY:{SECRET}@bucket/pub": "s3://***@bucket/pub",
        f"ftp://user:{SECRET}@host/x": "ftp://***@host/x",
        f"https://h/x?token={SECRET}": "https://h/x",
        f"https://h/x#{SECRET}": "https://h/x",
        "data/history": "data/history",
    }
    for text, expected in shown.items():
        where = parse_location(text)
        assert str(where) == f"{where}" == expected and SECRET not in repr(where)
    assert redact_urls(f"at HTTPS://u:{SECRET}@h/x: gone") == "at https://***@h/x: gone"


MISTYPED = (
    f" https://user:{SECRET}@127.0.0.1:9/pub",  # a space before it
    f"https:/user:{SECRET}@127.0.0.1:9/pub",  # one slash
    f"//user:{SECRET}@127.0.0.1:9/pub",  # no scheme
    f"https:/user:pa/{SECRET}@127.0.0.1:9/pub",  # a password holding a "/"
    f"https:/user:{SECRET}/@x@127.0.0.1:9/pub",  # ... a "/" and an "@"
    f" https://user:pa/{SECRET}@127.0.0.1:9/pub",
    f"https:user:{SECRET}@127.0.0.1:9/pub",  # no slash
    f"HTTPS:user:pa/{SECRET}@127.0.0.1:9/pub",
    f"(https:user:{SECRET}@127.0.0.1:9/pub)",  # glued to the words around it
    f"source=https:user:{SECRET}@127.0.0.1:9/pub",
    f"x,https:user:{SECRET}@127.0.0.1:9/pub",
)


@pytest.mark.parametrize("spec", MISTYPED)
def test_a_mistyped_url_carrying_a_secret_is_refused_without_showing_it(spec, tmp_path, capsys):
    (tmp_path / "mirror").mkdir()
    for argv in (["sync", spec, "--root", str(tmp_path / "mirror")],
                 ["fetch", spec, "--root", str(tmp_path / "mirror")],
                 ["sync", "pub", "--root", spec]):  # fmt: skip
        code = main(argv)
        out, err = capsys.readouterr()
        assert code == 2 and err.startswith("error: "), (argv, err)
        assert SECRET not in out + err, (argv, err)
        assert "***@127.0.0.1" in err, (argv, err)
    assert str(parse_location(spec)).count(SECRET) == 0


@pytest.mark.parametrize(
    "word", ["y" * 1_000_000, "a:" * 500_000, "=" * 1_000_000, "(" * 1_000_000, "k=v&" * 250_000,
             "=a:" * 300_000, "1a" * 500_000 + "://x", ("a" * 50 + "://") * 20_000,
             "/a:" * 300_000 + "@", "/a" * 500_000 + ":@", "/" * 1_000_000 + "a:@",
             "/a@" * 300_000],
)  # fmt: skip
def test_redact_urls_when_a_line_is_one_long_word_returns_it_in_one_pass(word):
    hostile = "snapshot/" + word  # a checksums line's path, echoed in an error
    assert SECRET not in redact_urls(hostile + f" https://u:{SECRET}@h/x")
    assert redact_urls(hostile).startswith("snapshot/")  # before: a scan from every character


@pytest.mark.parametrize(
    "glued",
    ["...https://h/?token={s}", "1https://h/?token={s}", "-https://h/#{s}", "(s3://K:{s}@b/p)"],
)
def test_redact_urls_when_a_url_is_glued_to_other_characters_redacts_it(glued):
    assert SECRET not in redact_urls(glued.format(s=SECRET))


@pytest.mark.parametrize("mark", [";", ",", ".", ")"])
def test_redact_urls_when_a_url_ends_a_clause_keeps_the_sentence_mark(mark):
    text = f"redirects to https://cdn.example/sig?X-Amz-Signature={SECRET}#frag{mark} a publisher"
    assert redact_urls(text) == f"redirects to https://cdn.example/sig{mark} a publisher"


@pytest.mark.parametrize(
    "text",
    ["symbol binance:BTC@PERP", "at 12:30:01@host", "C:\\Users\\bob@corp", "kalshi:KX-1",
     "binance:BTC@PERP/x", "at 1:2@h"],
)  # fmt: skip
def test_redact_urls_when_text_only_looks_like_a_user_part_leaves_it(text):
    assert redact_urls(text) == text


@pytest.mark.parametrize("spec", SPELLINGS)
def test_open_source_when_the_url_carries_a_secret_raises_naming_it_redacted(spec):
    with pytest.raises(ConfigError) as caught:
        open_source(spec)
    assert SECRET not in str(caught.value) and SECRET not in repr(caught.value)
    assert caught.value.__context__ is None or caught.value.__suppress_context__


def test_a_source_with_an_upper_case_scheme_is_the_same_source():
    assert open_source("HTTP://127.0.0.1:9/pub/").location == "http://127.0.0.1:9/pub"
    assert open_source("S3://bucket/pub").location == "s3://bucket/pub"


@pytest.mark.parametrize("spec", SPELLINGS)
def test_a_tier_root_url_other_than_s3_is_refused_when_the_policy_is_read(spec, tmp_path):
    for policy in policy_files(tmp_path, spec):
        with pytest.raises(ConfigError) as caught:
            TierPolicy.load(policy)
        assert SECRET not in str(caught.value), policy
    with pytest.raises(ConfigError):
        TierSettings(root=spec)


def test_a_tier_root_with_an_upper_case_s3_scheme_is_kept_in_lower_case():
    assert TierSettings(root="S3://bucket/warm").root == "s3://bucket/warm"


def test_an_archive_whose_recorded_policy_holds_a_url_root_is_refused_redacted(tmp_path):
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / ARCHIVE_MARKER).write_text("{}")
    record = TierPolicy().to_dict()
    record["warm"]["root"] = f"https://user:{SECRET}@host/warm"
    (archive / POLICY_RECORD).write_text(json.dumps(record))
    with pytest.raises(ConfigError) as caught:
        Archive(archive, audit_log=None)
    assert SECRET not in str(caught.value) and "https://***@host/warm" in str(caught.value)
    with pytest.raises(ConfigError, match=r"https://\*\*\*@host/x"):
        Archive(f"https://u:{SECRET}@host/x", audit_log=None)


@pytest.mark.parametrize("spec", SPELLINGS[:6])
def test_dagster_fetch_when_skewtape_source_carries_a_secret_fails_naming_it_redacted(
    spec, tmp_path, sample_root, monkeypatch, capfd, caplog
):
    monkeypatch.setenv("SKEWTAPE_TEST_SECRET_SOURCE", spec)
    caplog.set_level(logging.DEBUG)
    publisher = PublisherSource(source_variable="SKEWTAPE_TEST_SECRET_SOURCE")
    defs = build_definitions(SkewtapeHome(root=str(sample_root)), publisher=publisher)
    with dg.DagsterInstance.ephemeral() as instance:
        result = run_month(defs, "2026-10", instance)
        assert not result.success
        events = [dg.serialize_value(e) for e in instance.all_logs(result.run_id)]
        failure = next(e for e in result.all_events if e.is_step_failure)
    refused = failure.step_failure_data.user_failure_data.description  # the reason, first
    assert refused.startswith("2026-10 refused (ConfigError): ") and "source '" in refused
    assert not any(SECRET in event for event in events)
    out, err = capfd.readouterr()
    assert SECRET not in out + err + caplog.text
    assert SECRET not in str(sensor_refusal(sample_root, publisher))
    assert found_secret(tmp_path) == []


def sensor_refusal(root: Path, publisher: PublisherSource) -> ConfigError:
    """The publisher sensor's refusal of ``publisher``'s source, evaluated in a sensor context
    closed before returning: the context builds its resources with an ephemeral Dagster instance
    (SQLite connections) that only its ``__exit__`` disposes of. Left open, the refusal's
    traceback keeps it alive until a later garbage collection disposes of it and SQLAlchemy logs
    ``Cannot operate on a closed database`` with a traceback from whatever code the collector
    interrupted. When that is an ``ast.parse``/``compile``, formatting the traceback parses again
    (3.11's caret anchors) and CPython 3.11.7's AST constructor, whose depth counter is shared
    (gh-106905, fixed in 3.11.8), fails with ``SystemError: AST constructor recursion depth
    mismatch``."""
    resources = {"skewtape": SkewtapeHome(root=str(root)), "publisher": publisher}
    with (
        dg.build_sensor_context(resources=resources) as context,
        pytest.raises(ConfigError) as caught,
    ):
        publisher_sensor(context)
    return caught.value


def test_sensor_refusals_when_collected_later_inside_a_parse_leave_compile_working(
    sample_root, monkeypatch
):
    monkeypatch.setenv("SKEWTAPE_TEST_SECRET_SOURCE", SPELLINGS[0])
    publisher = PublisherSource(source_variable="SKEWTAPE_TEST_SECRET_SOURCE")
    source = "\n".join(f"v{i} = f(a[{i}], b.c, (d + {i}) * e)" for i in range(400))
    shown = io.StringIO()
    handler = logging.StreamHandler(shown)  # formats tracebacks, as any deployed handler does
    logging.getLogger().addHandler(handler)
    thresholds = gc.get_threshold()
    try:
        gc.collect()  # the same generations whatever ran before
        for _ in range(3):
            assert SECRET not in str(sensor_refusal(sample_root, publisher))
        gc.set_threshold(10, 5, 10)  # frequent collections, some inside the AST construction
        trees = [ast.parse(source) for _ in range(5)]
        gc.set_threshold(*thresholds)
        gc.collect()
    finally:
        gc.set_threshold(*thresholds)
        logging.getLogger().removeHandler(handler)
    assert [len(tree.body) for tree in trees] == [400] * 5
    assert shown.getvalue() == ""  # nothing was left for the collector to dispose of
    namespace: dict = {}
    exec(compile("x = 1", "<t>", "exec"), namespace)
    assert namespace["x"] == 1

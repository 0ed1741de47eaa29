"""The README's snippets run as written: every ``sh`` block of ``skewtape-pipeline`` commands
(placeholders aside: a synopsis is not a command), every ``python`` block and every ``sql`` block
(in plain DuckDB, without our code), from a folder whose
``data/`` is the sample chain, applied, with a few days archived and re-tiered cold (the state
``make demo`` leaves)."""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import tomllib
from datetime import date, timedelta
from pathlib import Path

import pytest

from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.sample.publisher import publish_sample
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.policy import TierPolicy
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols, split_symbol
from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions, archive_venue_day

REPO = Path(__file__).resolve().parents[1]
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
PLACEHOLDER = re.compile(r"\[.*|[A-Z][A-Z_]{2,}|YYYY-MM-DD|[A-Z]")
DAYS = (date(2026, 9, 30), date(2026, 10, 23), date(2026, 11, 28))
"""Days ``make demo`` archives (the busiest complete day of each month): the README's examples
name its symbol-days, so they print rows here as they do after the demo."""
DEMO_FILLS = 2_000
"""Fills per venue and month of the sample ``make demo`` publishes (its
``DEMO_FILLS_PER_VENUE_MONTH``): the same seed and size give the same symbols and days."""


def readme_blocks() -> list[tuple[str, str]]:
    """(language, text) of every fenced block of README.md, in order."""
    text = (REPO / "README.md").read_text()
    return [(match[1], match[2]) for match in FENCE.finditer(text)]


def commands(block: str) -> list[list[str]]:
    """The block's commands as argument lists (continuation lines joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    return [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]


def runnable(argv_list: list[list[str]]) -> bool:
    """A block of skewtape-pipeline commands without placeholders (a synopsis has them)."""
    argv_list = [argv for argv in argv_list if argv]
    return bool(argv_list) and all(
        argv[0] == "skewtape-pipeline" and not any(PLACEHOLDER.fullmatch(a) for a in argv[1:])
        for argv in argv_list
    )


def snippets() -> list[tuple[str, object]]:
    """("sh", [argv, ...]), ("python", code) and ("sql", query) of every runnable README block."""
    found: list[tuple[str, object]] = []
    for language, text in readme_blocks():
        if language in ("python", "sql"):
            found.append((language, text))
        elif language == "sh" and runnable(commands(text)):
            found.append(("sh", [argv for argv in commands(text) if argv]))
    return found


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with ``data/``: the demo's sample applied, three of the days it archives
    archived, all re-tiered cold."""
    folder = tmp_path_factory.mktemp("readme")
    root = folder / "data"
    publish_sample(root, fills_per_venue_month=DEMO_FILLS)
    history = root / "history"
    catch_up(history, root / "deltas")
    months = ("2026-09", "2026-10", "2026-11")
    venues = sorted({split_symbol(s)[0] for month in months for s in new_symbols(history, month)})
    policy = TierPolicy()
    archive = Archive(root / "archive", policy=policy, audit_log=None)
    options = VenueDayOptions(archive=archive, as_of=max(DAYS), batch="readme")
    for day in DAYS:  # as the demo's runs do: every venue-day, with its rows of tick_reports
        for venue in venues:
            archive_venue_day(history, (venue, day), options)
    as_of = max(DAYS) + timedelta(days=policy.warm_max_age_days + 1)
    Archive(root / "archive", policy=policy, audit_log=None).retier(as_of=as_of)
    return folder


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


def test_readme_when_read_has_runnable_snippets_of_both_kinds():
    kinds = [kind for kind, _ in snippets()]
    assert kinds.count("sh") >= 2 and kinds.count("python") >= 1
    synopsis = [text for language, text in readme_blocks() if "apply-delta SNAPSHOT" in text]
    assert synopsis and not runnable(commands(synopsis[0]))


@pytest.mark.parametrize(
    ("index", "kind"), list(enumerate(kind for kind, _ in snippets())), ids=lambda v: str(v)
)
def test_readme_snippet_when_run_on_the_sample_succeeds_and_prints(
    workdir: Path, index: int, kind: str
):
    _, snippet = snippets()[index]
    if kind == "python":
        outputs = [run([sys.executable, "-c", str(snippet)], workdir)]
    elif kind == "sql":
        query = "import duckdb, sys; rows = duckdb.sql(sys.argv[1]).fetchall(); print(rows or '')"
        outputs = [run([sys.executable, "-c", query, str(snippet)], workdir)]
    else:
        cli = [sys.executable, "-m", "skewtape_pipeline.cli"]
        outputs = [run(cli + argv[1:], workdir) for argv in snippet]  # type: ignore[union-attr]
    for done in outputs:
        assert done.returncode == 0, done.stderr
        assert done.stdout.strip()
        assert "error" not in done.stderr.lower()
    if kind == "sh":
        queries = [o for o, argv in zip(outputs, snippet, strict=True) if argv[1] == "query"]
        assert all(len(o.stdout.splitlines()) >= 2 for o in queries)  # rows, not a header alone


def test_readme_tier_policy_example_when_loaded_is_the_default_policy():
    [example] = [text for language, text in readme_blocks() if language == "toml"]
    assert TierPolicy.from_dict(tomllib.loads(example)) == TierPolicy()


def test_readme_tier_query_when_everything_is_cold_counts_every_tick(workdir: Path):
    [first] = [s for kind, s in snippets() if kind == "sh" and "GROUP BY tier" in str(s)][:1]
    argv = first[0]  # type: ignore[index]
    done = run([sys.executable, "-m", "skewtape_pipeline.cli", *argv[1:]], workdir)
    rows = dict(line.split("\t") for line in done.stdout.strip().splitlines()[1:])
    assert set(rows) == {"COLD"} and int(rows["COLD"]) > 0

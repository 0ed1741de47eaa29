"""The README's and the docs' snippets run as written, and what they show matches the code.

- Every ``sh`` block of ``skewtape-pipeline`` commands (placeholders aside: a synopsis is not a
  command), every ``python`` block and every ``sql`` block (in plain DuckDB, without our code) of
  the README and of ``docs/`` runs from a folder whose ``data/`` is the sample chain, applied,
  with a few days archived and re-tiered cold (the state ``make demo`` leaves).
- A *first session* (a section so named) runs in order in a fresh folder instead: its
  ``skewtape-pipeline`` commands, the local publisher it serves with ``python -m http.server``
  (on a free port) and its Python, as a newcomer types them.
- Every command line the pages show names a command of the parser and options of that command;
  the command-line reference the site renders (``docs/hooks/cli_reference.py``) holds every
  command and option of the parser.
- The README stays short and links every docs page, and its links resolve.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shlex
import socket
import subprocess
import sys
import time
import tomllib
import unicodedata
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from datetime import date, timedelta
from pathlib import Path

import pytest

from skewtape_pipeline.cli.parser import build_parser
from skewtape_pipeline.mirror.catchup import catch_up
from skewtape_pipeline.sample.publisher import publish_sample
from skewtape_pipeline.ticks.archive.handle import Archive
from skewtape_pipeline.ticks.archive.store.policy import TierPolicy
from skewtape_pipeline.ticks.fills.snapshot_fills import new_symbols, split_symbol
from skewtape_pipeline.ticks.fills.venue_days import VenueDayOptions, archive_venue_day

REPO = Path(__file__).resolve().parents[1]
DOCS = REPO / "docs"
README = REPO / "README.md"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^(#{1,6}) (.+)$", re.MULTILINE)
PLACEHOLDER = re.compile(r"\[.*|[A-Z][A-Z_]{2,}|YYYY-MM-DD|[A-Z]")
SESSION = re.compile(r"(a )?first session( on the command line)?", re.IGNORECASE)
SERVER = re.compile(r"python -m http\.server (\d+) --bind 127\.0\.0\.1 --directory (\S+) &")
README_MAX_LINES = 200
DAYS = (date(2026, 9, 30), date(2026, 10, 23), date(2026, 11, 28))
"""Days ``make demo`` archives (the busiest complete day of each month): the docs' examples
name its symbol-days, so they print rows here as they do after the demo."""
DEMO_FILLS = 2_000
"""Fills per venue and month of the sample ``make demo`` publishes (its
``DEMO_FILLS_PER_VENUE_MONTH``): the same seed and size give the same symbols and days."""


def pages() -> list[Path]:
    """The README and every page of the site."""
    return [README, *sorted(p for p in DOCS.rglob("*.md") if "hooks" not in p.parts)]


def page_id(page: Path) -> str:
    return str(page.relative_to(REPO))


def sections(page: Path) -> list[tuple[str, str]]:
    """(heading, text) of each section of ``page`` (the text before the first heading: '')."""
    text = page.read_text()
    cuts = [(m.start(), m[2]) for m in HEADING.finditer(text) if not _in_fence(text, m.start())]
    starts = [0, *(start for start, _ in cuts)]
    names = ["", *(name for _, name in cuts)]
    ends = [*starts[1:], len(text)]
    return [(n, text[s:e]) for n, s, e in zip(names, starts, ends, strict=True)]


def _in_fence(text: str, position: int) -> bool:
    return any(m.start() < position < m.end() for m in FENCE.finditer(text))


def blocks(page: Path, *, session: bool) -> list[tuple[str, str]]:
    """(language, text) of the fenced blocks of ``page``: those of its first-session sections
    (``session``), or all the others."""
    return [
        (m[1], m[2])
        for heading, text in sections(page)
        if bool(SESSION.fullmatch(heading)) == session
        for m in FENCE.finditer(text)
    ]


def commands(block: str) -> list[list[str]]:
    """The block's commands as argument lists (continuation lines joined, comments dropped)."""
    joined = block.replace("\\\n", " ")
    lines = [shlex.split(line, comments=True) for line in joined.splitlines() if line.strip()]
    return [argv for argv in lines if argv]


def runnable(argv_list: list[list[str]]) -> bool:
    """A block of skewtape-pipeline commands without placeholders (a synopsis has them)."""
    return bool(argv_list) and all(
        argv[0] == "skewtape-pipeline" and not any(PLACEHOLDER.fullmatch(a) for a in argv[1:])
        for argv in argv_list
    )


def snippets() -> list[tuple[str, str, object]]:
    """(page, kind, snippet) of every runnable block outside the first sessions: ("sh",
    [argv, ...]), ("python", code), ("sql", query)."""
    found: list[tuple[str, str, object]] = []
    for page in pages():
        for language, text in blocks(page, session=False):
            if language in ("python", "sql"):
                found.append((page_id(page), language, text))
            elif language == "sh" and runnable(commands(text)):
                found.append((page_id(page), "sh", commands(text)))
    return found


def demo_state(folder: Path) -> Path:
    """``folder/data``: the demo's sample applied, three of the days it archives archived, all
    re-tiered cold; returns ``folder``."""
    root = folder / "data"
    publish_sample(root, fills_per_venue_month=DEMO_FILLS)
    history = root / "history"
    catch_up(history, root / "deltas")
    months = ("2026-09", "2026-10", "2026-11")
    venues = sorted({split_symbol(s)[0] for month in months for s in new_symbols(history, month)})
    policy = TierPolicy()
    archive = Archive(root / "archive", policy=policy, audit_log=None)
    options = VenueDayOptions(archive=archive, as_of=max(DAYS), batch="docs")
    for day in DAYS:  # as the demo's runs do: every venue-day, with its rows of tick_reports
        for venue in venues:
            archive_venue_day(history, (venue, day), options)
    as_of = max(DAYS) + timedelta(days=policy.warm_max_age_days + 1)
    Archive(root / "archive", policy=policy, audit_log=None).retier(as_of=as_of)
    return folder


@pytest.fixture(scope="module")
def workdir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return demo_state(tmp_path_factory.mktemp("docs"))


def run(argv: list[str], cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=300)


CLI = [sys.executable, "-m", "skewtape_pipeline.cli"]


def check_ran(done: subprocess.CompletedProcess[str]) -> None:
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip()
    assert "error" not in done.stderr.lower()


def test_docs_when_read_have_runnable_snippets_of_every_kind():
    kinds = [kind for _, kind, _ in snippets()]
    assert kinds.count("sh") >= 4 and kinds.count("python") >= 3
    on_pages = {page for page, _, _ in snippets()}
    assert {"docs/archive/querying.md", "docs/archive/versions.md"} <= on_pages
    synopsis = [t for p in pages() for lang, t in blocks(p, session=False) if "--into DIR" in t]
    assert synopsis and not runnable(commands(synopsis[0]))


@pytest.mark.parametrize(
    ("index", "kind"),
    list(enumerate(kind for _, kind, _ in snippets())),
    ids=[f"{page}-{i}-{kind}" for i, (page, kind, _) in enumerate(snippets())],
)
def test_docs_snippet_when_run_on_the_sample_succeeds_and_prints(
    workdir: Path, index: int, kind: str
):
    _, _, snippet = snippets()[index]
    if kind == "python":
        outputs = [run([sys.executable, "-c", str(snippet)], workdir)]
    elif kind == "sql":
        query = "import duckdb, sys; rows = duckdb.sql(sys.argv[1]).fetchall(); print(rows or '')"
        outputs = [run([sys.executable, "-c", query, str(snippet)], workdir)]
    else:
        outputs = [run(CLI + argv[1:], workdir) for argv in snippet]  # type: ignore[union-attr]
    for done in outputs:
        check_ran(done)
    if kind == "sh":
        queries = [o for o, argv in zip(outputs, snippet, strict=True) if argv[1] == "query"]
        assert all(len(o.stdout.splitlines()) >= 2 for o in queries)  # rows, not a header alone


def test_docs_tier_policy_example_when_loaded_is_the_default_policy():
    examples = [t for p in pages() for lang, t in blocks(p, session=False) if lang == "toml"]
    assert examples
    assert all(TierPolicy.from_dict(tomllib.loads(example)) == TierPolicy() for example in examples)


def test_docs_tier_query_when_everything_is_cold_counts_every_tick(workdir: Path):
    [first] = [s for _, kind, s in snippets() if kind == "sh" and "GROUP BY tier" in str(s)][:1]
    argv = first[0]  # type: ignore[index]
    done = run([*CLI, *argv[1:]], workdir)
    rows = dict(line.split("\t") for line in done.stdout.strip().splitlines()[1:])
    assert set(rows) == {"COLD"} and int(rows["COLD"]) > 0


def test_docs_verify_output_when_verify_runs_on_the_sample_is_printed_as_shown(workdir: Path):
    """verify.md's example of ``verify`` on a merged month: its lines as ``verify`` prints them
    (the count of files hashed aside, which depends on the hash cache)."""
    [shown] = [
        t for lang, t in blocks(DOCS / "mirror" / "verify.md", session=False) if " verified (" in t
    ]
    done = run([*CLI, "verify", "data/history/2026-12"], workdir)
    check_ran(done)
    hashed = re.compile(r"\d+ hashed")
    printed = [hashed.sub("N hashed", line) for line in done.stdout.splitlines()]
    assert printed == [hashed.sub("N hashed", f"data/{line}") if i == 0 else line
                       for i, line in enumerate(shown.splitlines())]  # fmt: skip


# --- first sessions ------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextmanager
def served(folder: Path, directory: str, port: int) -> Iterator[None]:
    """``python -m http.server`` over ``directory`` on ``port``, as the session starts it."""
    argv = [sys.executable, "-m", "http.server", str(port), "--bind", "127.0.0.1"]
    server = subprocess.Popen(
        [*argv, "--directory", directory],
        cwd=folder,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline and server.poll() is None, "no server"
                time.sleep(0.1)
        yield
    finally:
        server.terminate()
        server.wait(timeout=30)


def session_pages() -> list[Path]:
    return [page for page in pages() if blocks(page, session=True)]


def test_docs_when_read_have_first_sessions_in_the_readme_and_the_fetch_page():
    assert {README, DOCS / "mirror" / "fetch.md"} <= set(session_pages())


@pytest.mark.parametrize("page", session_pages(), ids=page_id)
def test_first_session_when_run_in_order_in_a_new_folder_succeeds(page: Path, tmp_path: Path):
    """The session's blocks in order: its server started first when it serves a publisher (the
    port it names replaced by a free one everywhere), every other line a command of ours."""
    session = blocks(page, session=True)
    port = free_port()
    text = "\n".join(t for _, t in session)
    servers = SERVER.findall(text)
    assert len(servers) <= 1
    steps: list[tuple[str, object]] = []
    for language, block in session:
        if servers:
            block = block.replace(f"127.0.0.1:{servers[0][0]}", f"127.0.0.1:{port}")
        if language == "python":
            steps.append(("python", block))
        elif language == "sh":
            for line in block.replace("\\\n", " ").splitlines():
                serve = SERVER.fullmatch(line.split("#")[0].strip())
                if serve:
                    steps.append(("serve", serve[2]))
                elif commands(line):
                    steps.append(("sh", commands(line)[0]))
    ran = 0
    with ExitStack() as stack:
        for kind, step in steps:
            if kind == "serve":
                stack.enter_context(served(tmp_path, str(step), port))
                continue
            if kind == "python":
                done = run([sys.executable, "-c", str(step)], tmp_path)
            else:
                argv: list[str] = step  # type: ignore[assignment]
                assert argv[0] == "skewtape-pipeline", f"not a command of ours: {argv}"
                done = run(CLI + argv[1:], tmp_path)
            check_ran(done)
            ran += 1
    assert ran >= 2


# --- the command line as the pages show it ------------------------------------------------------


def cli_reference():
    hook = DOCS / "hooks" / "cli_reference.py"
    spec = importlib.util.spec_from_file_location("cli_reference", hook)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_cli_reference_when_rendered_holds_every_command_and_option():
    reference = cli_reference()
    parser = build_parser()
    rendered = reference.render(parser)
    for name, sub in reference.subcommands(parser).items():
        section = rendered.split(f"## {name}\n", 1)[1].split("\n## ", 1)[0]
        assert sub.description in section
        for action in sub._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            for option in action.option_strings:
                assert f"`{option}" in section or f", {option}" in section, (name, option)
            if not action.option_strings:
                assert f"`{action.metavar or action.dest}`" in section, (name, action.dest)
    page = (DOCS / "reference" / "cli.md").read_text()
    assert reference.MARKER in page


def shown_command_lines(page: Path) -> list[str]:
    """Every ``skewtape-pipeline ...`` line of a code block and every inline code span that
    starts with it."""
    text = page.read_text()
    lines = []
    for match in FENCE.finditer(text):
        joined = match[2].replace("\\\n", " ")
        lines += [line.strip() for line in joined.splitlines() if "skewtape-pipeline " in line]
    prose = FENCE.sub("", text)
    lines += re.findall(r"`(skewtape-pipeline [^`]+)`", prose.replace("\n", " "))
    return lines


def options_of(sub) -> set[str]:
    return {option for action in sub._actions for option in action.option_strings}


@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_docs_command_lines_when_checked_use_the_parsers_commands_and_options(page: Path):
    commands_by_name = cli_reference().subcommands(build_parser())
    for line in shown_command_lines(page):
        words = line.split("#")[0].replace("`", " ").split()  # a command quoted in output too
        at = words.index("skewtape-pipeline")
        name = words[at + 1]
        if PLACEHOLDER.fullmatch(name):
            continue  # `skewtape-pipeline COMMAND ...`
        assert name in commands_by_name, f"{page_id(page)}: {line}"
        allowed = options_of(commands_by_name[name])
        for word in words[at + 2 :]:
            option = word.strip("[]|.,;)(").split("=")[0]
            if option.startswith("--"):
                assert option in allowed, f"{page_id(page)}: {option} in {line}"


PATH_SPAN = re.compile(r"`((?:skewtape_pipeline\w*|benchmarks|deploy)/[^`\s]*)`")
TEST_SPAN = re.compile(r"`((?:\w+/)*test_\w+\.py)`")


@pytest.mark.parametrize("page", pages(), ids=page_id)
def test_docs_paths_when_named_exist(page: Path):
    """Every repository path a page names in code (``benchmarks/fetch.py``), and every test file
    it names relative to the tests' folder (``mirror/test_fetch.py``), is there."""
    text = page.read_text()
    for path in PATH_SPAN.findall(text):
        assert (REPO / path).exists(), f"{page_id(page)}: {path}"
    tests = REPO / "skewtape_pipeline_tests"
    for path in TEST_SPAN.findall(text):
        assert (tests / path).exists() or (REPO / path).exists(), f"{page_id(page)}: {path}"


# --- the README's size and links ----------------------------------------------------------------


def slug(heading: str) -> str:
    """The anchor MkDocs (Python-Markdown's toc) gives a heading."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).replace("`", "")
    text = unicodedata.normalize("NFKD", text).encode("ascii", "ignore").decode("ascii")
    text = re.sub(r"[^\w\s-]", "", text).strip().lower()
    return re.sub(r"[-\s]+", "-", text)


def links(page: Path) -> list[str]:
    return re.findall(r"\]\(([^)\s]+)\)", FENCE.sub("", page.read_text()))


def test_readme_when_read_is_short_and_links_every_docs_page():
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    linked = {(REPO / link.split("#")[0]).resolve() for link in links(README) if "://" not in link}
    assert set(pages()[1:]) <= linked


def test_readme_links_when_followed_reach_a_file_and_its_heading():
    for link in links(README):
        if "://" in link:
            continue
        path, _, anchor = link.partition("#")
        target = REPO / path if path else README
        assert target.exists(), link
        if anchor:
            headings = [slug(name) for name, _ in sections(target)[1:]]
            assert anchor in headings, link

"""The command line's text: help that reads as written (no RST markup, no bare placeholders),
and one ``error:`` line whatever the error's own message looks like."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from skewtape_pipeline.cli.app import main
from skewtape_pipeline.cli.parser import build_parser
from skewtape_pipeline_tests.markup import markup_problems


def help_texts() -> dict[str, str]:
    """``--help`` of the program and of every command."""
    parser = build_parser()
    texts = {"skewtape-pipeline": parser.format_help()}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                texts[name] = sub.format_help()
    return texts


def test_cli_help_when_printed_has_no_rst_markup():
    texts = help_texts()
    assert len(texts) > 10
    problems = [p for name, text in texts.items() for p in markup_problems(name, text)]
    assert problems == []


def test_cli_help_when_compact_ticks_names_the_tier_policy_formats():
    text = help_texts()["compact-ticks"]
    assert "TOML or JSON" in " ".join(text.split())


def test_cli_query_when_duckdb_rejects_the_sql_prints_one_error_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
):
    (tmp_path / "archive").mkdir()
    code = main(["query", "SELEC count(*) FROM ticks", "--archive", str(tmp_path / "archive")])
    err = capsys.readouterr().err
    assert code == 2
    assert err.count("\n") == 1 and err.startswith("error: ")
    assert "SELEC" in err and "syntax error" in err.lower()

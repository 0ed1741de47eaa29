"""MkDocs hook: the command-line reference, rendered from the parser itself.

``docs/reference/cli.md`` holds the marker ``<!-- cli-reference -->``; at build time it is
replaced by one section per command of ``skewtape_pipeline.cli.parser.build_parser()`` (its summary,
its usage line and every argument with its help and default), so the reference cannot drift from
the parser. ``skewtape_pipeline_tests/test_docs.py`` renders it too and checks it whole.
"""

from __future__ import annotations

import argparse

MARKER = "<!-- cli-reference -->"
WIDTH = 96
"""Columns of the usage lines (argparse would otherwise take the terminal's)."""


def subcommands(parser: argparse.ArgumentParser) -> dict[str, argparse.ArgumentParser]:
    """Every command of ``parser`` by name, in the order they were added."""
    [group] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(group.choices)


def _argument(parser: argparse.ArgumentParser, action: argparse.Action) -> str:
    """One argument as a list item: spelled as argparse's help spells it, with its help and its
    default where the help does not say it."""
    spelled = parser._get_formatter()._format_action_invocation(action)
    text = f"- `{spelled}`"
    if action.help:
        text += f": {action.help}"
    if action.required and action.option_strings:
        text += " (required)"
    shown = action.option_strings and action.nargs != 0 and "default" not in (action.help or "")
    if shown and action.default not in (None, argparse.SUPPRESS):
        text += f" (default: `{action.default}`)"
    return text


def render(parser: argparse.ArgumentParser) -> str:
    """The reference of every command of ``parser``, as Markdown."""
    sections = []
    for name, sub in subcommands(parser).items():
        sub.formatter_class = lambda prog: argparse.HelpFormatter(prog, width=WIDTH)
        usage = sub.format_usage().strip()
        arguments = [
            _argument(sub, action)
            for action in sub._actions
            if not isinstance(action, argparse._HelpAction)
        ]
        sections.append(
            f"## {name}\n\n{sub.description}\n\n```text\n{usage}\n```\n\n" + "\n".join(arguments)
        )
    return "\n\n".join(sections) + "\n"


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Replace the marker of the command-line page with the rendered reference."""
    if MARKER not in markdown:
        return markdown
    from skewtape_pipeline.cli.parser import build_parser

    return markdown.replace(MARKER, render(build_parser()))

"""What a description must not contain to render as written in Dagster's UI (markdown, HTML
allowed) and in a terminal: a ``<word>`` outside a code span (the UI takes it for an HTML tag and
drops it) and RST double backticks (shown literally by both)."""

from __future__ import annotations

import re

CODE_SPAN = re.compile(r"`[^`\n]+`")
TAG_LIKE = re.compile(r"<[A-Za-z/][^<>]*>")


def markup_problems(where: str, text: str | None) -> list[str]:
    """One line per problem in ``text`` (named by ``where``); none for an empty text."""
    if not text:
        return []
    problems = []
    if "``" in text:
        problems.append(f"{where}: RST double backticks in {text!r}")
    for tag in TAG_LIKE.findall(CODE_SPAN.sub("", text.replace("``", ""))):
        problems.append(f"{where}: {tag} outside a code span in {text!r}")
    return problems

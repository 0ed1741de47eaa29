"""MkDocs hook: the Sphinx roles some docstrings use (``:class:`TierPolicy```, ``:meth:``...)
shown as plain code in the rendered Python API (mkdocstrings would print the role's name)."""

from __future__ import annotations

import re

ROLE = re.compile(r":(?:class|meth|func|attr|data|mod|exc|obj):<code>~?")


def on_page_content(html: str, page, config, files) -> str:
    """The page's HTML with each role dropped before its ``<code>`` (and a leading ``~``)."""
    return ROLE.sub("<code>", html)

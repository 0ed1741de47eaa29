"""Where a source or a root is, as one value whose text never holds a secret.

A publisher's source or a tier root given as text may carry credentials (``https://user:PW@host/``,
``s3://KEY:SECRET@bucket/``), a token in its query (``?token=PW``) or anything in a fragment.
:func:`parse_location` reads such a text once into a :class:`Location`, whose text form (``str``,
``repr``, f-strings) is redacted: the scheme in lower case, ``***@`` in place of any user part,
then the host and the path, without the query and the fragment (``https://***@host/path``). Only
that form goes into a message, a log line, a metadata value, an audit record, a JSON result or
an exception; the text as given (:attr:`Location.raw`) is for connecting alone.

Schemes compare case-insensitively (``HTTPS://`` is ``https://``). A text without a
``scheme://`` is a local path, shown as it is.

This module imports only the standard library and ``skewtape_pipeline.errors``.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field

from skewtape_pipeline.errors import ConfigError

_SCHEME = re.compile(r"^([A-Za-z][A-Za-z0-9+.\-]*)://")
REDACTED = "***"


@dataclass(frozen=True)
class Location:
    """A source or root read by :func:`parse_location`. Its text form is :attr:`shown`."""

    scheme: str
    """The scheme in lower case (``https``, ``s3``, ...); "" for a local path."""
    shown: str
    """The redacted text: no user part (``***@`` instead), no query, no fragment."""
    raw: str = field(repr=False, compare=False)
    """The text as given, its scheme in lower case: for connecting only, never shown."""
    secret: bool = field(default=False, compare=False)
    """True when the text carried a user part, a query or a fragment (left out of ``shown``)."""

    def __str__(self) -> str:
        return self.shown

    def __repr__(self) -> str:
        return f"Location({self.shown!r})"

    @property
    def is_url(self) -> bool:
        """True for a ``scheme://`` text, False for a local path."""
        return bool(self.scheme)


def parse_location(text: str | Location) -> Location:
    """``text`` as a :class:`Location` (see the module notes); a Location is returned as is."""
    if isinstance(text, Location):
        return text
    text = str(text)
    found = _SCHEME.match(text)
    if found is None:  # a local path; or a URL mistyped (a space before it, one slash)
        shown = _without_user_parts(text)
        return Location("", shown, text, shown != text)
    scheme = found.group(1).lower()
    rest = text[found.end() :]
    before_query = re.split(r"[?#]", rest, maxsplit=1)[0]
    secret = before_query != rest
    # Everything up to the last "@" before the query is a user part, even when it holds a "/"
    # (an unencoded password may): shown as ***, never guessed at.
    _user, at, place = before_query.rpartition("@")
    if at:
        secret = True
    shown = f"{scheme}://{REDACTED + '@' if at else ''}{place}"
    return Location(scheme, shown, f"{scheme}://{rest}", secret)


def redacted(text: str | Location) -> str:
    """The redacted text form of ``text`` (:attr:`Location.shown`)."""
    return parse_location(text).shown


_SCHEME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+.-")
_LETTERS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz")
_STOPS = r"\s'\"<>"
"""What ends a word of a message, and a URL in it: a space, a quote, an angle bracket."""
_URL_END = re.compile(f"[{_STOPS}]")
_SENTENCE_MARKS = frozenset(";,.)")
"""Marks that end a URL's run of characters in a message but belong to the sentence around it
(``redirects to URL; a publisher's ...``): kept as they are, never redacted with its query."""
_WORD = re.compile(f"[^{_STOPS}]+")
"""A word of a message: a run of characters without a stop."""
_USER_START = re.compile(
    rf"(?:(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]*:|/)(?=[^{_STOPS}/@:]+:)"
)
"""A scheme and its ``:`` (starting a word, or after a ``(``, ``=``, ``,`` ...), or a ``/``,
before a user name and its ``:``: where a mistyped URL's user part starts (the match ends
there)."""


def _without_user_parts(text: str) -> str:
    """``text`` with each ``user:password@`` outside any ``scheme://`` that follows a ``/``
    or a word's scheme (a URL mistyped: ``http:/u:PW@host``, ``//u:PW@host``,
    ``https:u:PW@host``, or a path made of one: a space before it) shown as ``***@``: in each
    word holding an ``@``, from the first such user name to its last ``@``, so a password
    holding a ``/``, a ``:`` or an ``@`` is never shown in part. A user name needs its ``:``
    and a ``/`` or a scheme before it, so that a symbol (``binance:BTC@PERP``) or a time
    (``12:30:01@``) is left as it is. Linear in the text's length: each character is looked
    at a bounded number of times."""

    def word(found: re.Match[str]) -> str:
        text = found.group()
        at = text.rfind("@")
        start = _USER_START.search(text, 0, at) if at > 0 else None
        return text if start is None else text[: start.end()] + REDACTED + text[at:]

    return _WORD.sub(word, text)


def redact_urls(text: str) -> str:
    """``text`` with every ``scheme://...`` in it redacted (:func:`redacted`), wherever it
    starts (``1https://...``, ``...https://...``), and every ``user:password@`` right after a
    ``/`` replaced by ``***@``: the last guard of a message whose words came from elsewhere (a
    library's error, an argument parser's, a mistyped URL). Linear in the text's length: a
    hostile file's line of 300,000 characters is one pass."""
    out, done = [], 0
    for start, end in _urls_in(text):
        out += [text[done:start], redacted(text[start:end])]
        done = end
    out.append(text[done:])
    return _without_user_parts("".join(out))


def _urls_in(text: str) -> Iterator[tuple[int, int]]:
    """(start, end) of each ``scheme://...`` in ``text``: from each ``://`` back over the scheme
    characters before it (never past the previous ``://`` or URL) to the first letter, and on
    to the next space, quote or angle bracket, less the sentence's marks before it. Each
    character is looked at a bounded number of times (a regular expression trying every start
    in a long run is quadratic)."""
    floor = 0
    for separator in re.finditer("://", text):
        at = separator.start()
        if at < floor:  # inside the URL found last
            continue
        start = at
        while start > floor and text[start - 1] in _SCHEME_CHARS:
            start -= 1
        floor = separator.end()
        while start < at and text[start] not in _LETTERS:
            start += 1
        if start == at:  # no scheme before it
            continue
        found = _URL_END.search(text, floor)
        end = len(text) if found is None else found.start()
        while end > floor and text[end - 1] in _SENTENCE_MARKS:  # the message's, not the URL's
            end -= 1
        yield start, end
        floor = end


HOME_VARIABLE = "SKEWTAPE_HOME"
"""The environment variable naming the data root: the command line's default ``--root`` and the
Dagster ``SkewtapeHome`` resource's ``root``."""
DATA_ROOT_EXPECTED = "a local folder (the data root)"
"""What a data root given as a URL is told it should be."""


def refuse_url(text: str | Location, what: str, expected: str) -> str:
    """``text`` when it is a local path; otherwise raise ConfigError naming ``what`` and the
    redacted location, and saying what was ``expected``. Nothing is written either way."""
    where = parse_location(text)
    if where.is_url:
        raise ConfigError(
            f"{what} {where.shown!r}: {where.scheme}:// locations are not supported here; "
            f"expected {expected}"
        )
    return where.raw


def named_roots(text: str, roots: Mapping[str, tuple[str, str]]) -> str:
    """``text`` with every path it names under one of ``roots`` named from that root instead:
    ``roots`` maps a root as messages name it (absolute, an S3 URI without its query) to
    ``(inside, itself)``: a path inside the root is shown as ``inside`` followed by the path
    inside it (``inside`` ends with ``/``, or is "" for the path alone), the root itself as
    ``itself``. What may be shown where the roots' place must not be (a UI: it names the
    machine's folders). A root is matched whole: not inside a longer path (``/mnt/<root>``,
    ``<root>.bak``, ``<root>b/x``), the longest root first; a root given with a trailing
    ``/`` is the same root, an empty one (``/``) names nothing; other text is kept."""
    named = {root.rstrip("/"): shown for root, shown in roots.items() if root.rstrip("/")}
    if not named:
        return text
    alternatives = "|".join(re.escape(root) for root in sorted(named, key=len, reverse=True))
    found = re.compile(rf"(?<![\w/.~-])({alternatives})(/|(?=$|[\s:;,`'\")]|\.(?:\s|$)))")

    def name(match: re.Match[str]) -> str:
        inside, itself = named[match[1]]
        return inside if match[2] else itself

    return found.sub(name, text)


HOME_SHOWN = f"${HOME_VARIABLE}"
"""How the data root is named where its place must not be shown (``$SKEWTAPE_HOME``)."""


def home_relative(text: str, *roots: str) -> str:
    """``text`` with every path under the data root (each of ``roots``: the data root as
    given, e.g. also with its links resolved) named ``$SKEWTAPE_HOME/<path inside it>``, the
    root itself ``$SKEWTAPE_HOME`` (:func:`named_roots`: whole roots only); a path outside it
    is kept as it is, so nothing is lost."""
    return named_roots(text, dict.fromkeys(roots, (f"{HOME_SHOWN}/", HOME_SHOWN)))

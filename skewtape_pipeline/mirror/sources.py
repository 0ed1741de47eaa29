"""Where a publisher's files come from: a local folder, an ``https://`` URL or an S3 prefix.

:func:`open_source` gives one object with the same small interface for the three kinds:

- :meth:`read_small` reads a small file whole (a ``CHECKSUMS.sha256``, a manifest), or None when
  the publisher does not have it (how a month is discovered: no listing is ever requested);
- :meth:`stat` says how large a file is and what identifies its version (an ETag, else its
  Last-Modified; an object's ETag; a file's size and modification time);
- :meth:`open_range` streams a file from a byte offset. When the remote file is no longer the
  version the caller started from, the :class:`Body` starts at 0 again with the new version
  (over HTTP an ``If-Range`` request does this; the caller then starts over, never stitching
  two versions together).

HTTP goes through urllib3's connection pool, whose :class:`~urllib3.util.Retry` retries refused
connections, timeouts, resets and 5xx answers with exponential backoff; the same ``Retry``
object also budgets and paces the resumes after a transfer broken mid-body
(:func:`next_attempt`). ``http://`` is accepted for loopback hosts only (tests, a local
publisher). Redirects are followed only within the same scheme, host and port. S3 goes through
obstore (Rust's ``object_store``) in :mod:`skewtape_pipeline.mirror.object_source`, configured
as the tick archive's S3 tiers are (endpoint and region in the URI's query or the environment,
credentials from the environment only), with its own retries; a large object's ranged GETs go
to presigned URLs read as an HTTP body is (urllib3, a reused buffer) when the store can sign.
The low-speed limit (:class:`LowSpeedCheck`) watches both.

Nothing here writes to disk.
"""

from __future__ import annotations

import contextlib
import http.client
import ipaddress
import math
import os
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from email.utils import parsedate_to_datetime
from pathlib import Path
from typing import Protocol
from urllib.parse import quote, urljoin, urlsplit

import urllib3
import urllib3.connection
from urllib3.exceptions import HTTPError, MaxRetryError, ProtocolError, SSLError
from urllib3.util import Retry, Timeout

from skewtape_pipeline import progress
from skewtape_pipeline.errors import ConfigError, PublisherError, TLSFailureError, TransferError
from skewtape_pipeline.hashing import BLOCK
from skewtape_pipeline.locations import Location, parse_location

SMALL_FILE_LIMIT = 16 << 20
"""The most a CHECKSUMS.sha256 or manifest may hold (a stream that goes on is cut here)."""
MAX_REDIRECTS = 5
REDIRECT_STATUSES = frozenset({301, 302, 303, 307, 308})
ABSENT_STATUSES = frozenset({404, 410})
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
HTML_SUFFIXES = (".html", ".htm")


@dataclass(frozen=True)
class TransferSettings:
    """How hard a transfer tries: ``attempts`` per request (and per file: a broken body, a
    stalled one or an answer that does not resume the file each use one), backoff between them
    (``backoff`` s, doubling up to ``backoff_max``), timeouts in seconds, the number of
    parallel connections, the low-speed limit (a body slower than ``speed_limit`` bytes/s over
    ``speed_time`` seconds is a broken transfer, as curl's ``--speed-limit``/``--speed-time``)
    and ``time_limit``, the seconds a month's transfer may take in all (None: no limit).
    Validated when built."""

    connections: int = 4
    attempts: int = 5
    backoff: float = 0.5
    backoff_max: float = 20.0
    connect_timeout: float = 10.0
    read_timeout: float = 60.0
    ca_certs: str | None = None
    """A CA bundle to trust for ``https://`` (default: the system's)."""
    speed_limit: float = 1024.0
    speed_time: float = 30.0
    time_limit: float | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.connections, int) or not 1 <= self.connections <= 64:
            raise ConfigError(f"connections={self.connections!r}; expected 1 to 64")
        if not isinstance(self.attempts, int) or self.attempts < 1:
            raise ConfigError(f"attempts={self.attempts!r}; expected at least 1")
        for name in ("speed_limit", "speed_time"):
            value = getattr(self, name)
            if not isinstance(value, int | float) or not 0 <= value < math.inf:
                raise ConfigError(f"{name}={value!r}; expected a finite number, 0 or more")
        if self.time_limit is not None and not self.time_limit > 0:
            raise ConfigError(f"time_limit={self.time_limit!r}; expected seconds above 0")

    def retry(self) -> Retry:
        """The urllib3 retry policy of these settings (also the budget of resumed bodies):
        each retry told as a notice (:class:`NoticedRetry`); a server's ``Retry-After`` is
        honoured up to ``backoff_max`` seconds (urllib3 would wait up to six hours on it)."""
        retries = self.attempts - 1
        return NoticedRetry(
            total=retries,
            connect=retries,
            read=retries,
            status=retries,
            other=0,
            redirect=False,
            allowed_methods=frozenset({"GET", "HEAD"}),
            status_forcelist=RETRY_STATUSES,
            backoff_factor=self.backoff,
            backoff_max=self.backoff_max,
            raise_on_status=True,
            respect_retry_after_header=True,
            retry_after_max=self.backoff_max,
        )


class NoticedRetry(Retry):
    """urllib3's :class:`~urllib3.util.Retry` that tells each retry as a notice
    (``progress.notice``: the URL without its query, or the one it was given to name, why, the
    attempt to come), so a user waiting on a stalled or failing publisher reads what is
    happening instead of a quiet bar; and, when given one (:meth:`telling`), calls :attr:`told`
    too, from the retrying thread."""

    told: Callable[[], None] | None = None
    shown: str | None = None
    """What the notices name (None: the request's URL without its query)."""

    def telling(self, told: Callable[[], None], *, shown: str | None = None) -> NoticedRetry:
        """This policy, calling ``told()`` at each retry too and naming ``shown`` (the
        ``s3://`` object a presigned GET reads, never the endpoint's URL) in its notices, as the
        policies it leads to do."""
        retry = self.new()
        retry.told, retry.shown = told, shown
        return retry

    def new(self, **kw) -> NoticedRetry:
        retry = super().new(**kw)
        retry.told, retry.shown = self.told, self.shown
        return retry

    def increment(self, method=None, url=None, response=None, error=None, _pool=None, **kw):
        retry = super().increment(method, url, response, error, _pool, **kw)
        attempt = len(retry.history) + 1
        progress.notice(
            f"{self.shown or _retried_url(url, _pool)}: {_retry_reason(response, error)}; "
            f"trying again (attempt {attempt} of {attempt + (retry.total or 0)})"
        )
        if retry.told is not None:
            retry.told()
        return retry


def _retried_url(url: str | None, pool) -> str:
    """The URL a retry is of, without its query (a signed GET's signature): ``url`` whole, or
    the request target ``url`` on ``pool``'s host."""
    url = (url or "").split("?", 1)[0]
    if "://" in url or pool is None:
        return url
    port = "" if pool.port in (None, 80, 443) else f":{pool.port}"
    return f"{pool.scheme}://{pool.host}{port}{url}"


def _retry_reason(response, error: BaseException | None) -> str:
    """Why a request is tried again: the broken connection's own error (:func:`error_reason`),
    or the status answered."""
    if error is None:
        return f"answered {getattr(response, 'status', '?')}"
    return error_reason(error)


@dataclass(frozen=True)
class RemoteFile:
    """One version of a remote file: its size, what identifies the version (``validator``), and
    its modification time in ns when the publisher says (Last-Modified)."""

    size: int
    validator: str
    mtime_ns: int | None = None

    @property
    def resumable(self) -> bool:
        """True when a partial copy of this version may be resumed: it has a strong validator
        (a weak ``W/`` ETag, or none, never vouches for bytes at an offset)."""
        return bool(self.validator) and not self.validator.startswith("W/")


@dataclass(frozen=True)
class SmallFile:
    """A small file read whole, and its modification time in ns when the publisher says."""

    data: bytes
    mtime_ns: int | None = None


def small_file(url: str, data: bytes, mtime_ns: int | None) -> SmallFile:
    """``data`` as a :class:`SmallFile`; PublisherError when it went past the limit."""
    refuse_large(url, len(data))
    return SmallFile(data, mtime_ns)


def refuse_large(url: str, size: int) -> None:
    """PublisherError when a small file of ``size`` bytes is past :data:`SMALL_FILE_LIMIT`."""
    if size > SMALL_FILE_LIMIT:
        raise PublisherError(
            f"is longer than {SMALL_FILE_LIMIT} bytes; a checksums or manifest file is small",
            url=url,
        )


@dataclass
class Body:
    """A response's bytes from offset ``start`` of ``remote``. ``chunks`` ends at
    ``remote.size``; iterate it to the end or call ``close``. A chunk (bytes, or a memoryview
    of a reused buffer) is valid until the next one is asked for."""

    start: int
    remote: RemoteFile
    chunks: Iterator[bytes | memoryview]
    close: Callable[[], None] = field(default=lambda: None, repr=False)
    watched: bool = False
    """True when ``chunks`` applies the low-speed limit itself (raising
    :class:`StalledTransfer`): the reader then checks nothing more."""


class Source(Protocol):
    """A publisher's root, wherever it is (see the module notes)."""

    location: str
    settings: TransferSettings
    transient: tuple[type[BaseException], ...]
    """Errors of a body broken mid-transfer that a resumed request may get past."""
    retries: int
    """Requests the client library retried so far (HTTP, and S3's presigned GETs: urllib3's
    count; 0 for the others, whose library keeps its count to itself)."""

    def url(self, rel: str) -> str: ...
    def read_small(self, rel: str) -> SmallFile | None: ...
    def stat(self, rel: str) -> RemoteFile | None: ...
    def open_range(self, rel: str, start: int, expected: RemoteFile) -> Body: ...


def open_source(spec: str | Location, settings: TransferSettings | None = None) -> Source:
    """The source named by ``spec``: an ``https://`` (or loopback ``http://``) URL, an
    ``s3://bucket/prefix`` URI, or a local folder. Schemes compare case-insensitively.

    ``spec`` is read once into a :class:`~skewtape_pipeline.locations.Location`: every message
    (and the source's ``location``) names it redacted, never with its credentials, query or
    fragment.

    Raises ConfigError for an ``http://`` URL to another host, a URL with credentials, a query
    or a fragment, another scheme, an unusable S3 URI, or a folder that does not exist.
    """
    settings = settings or TransferSettings()
    where = parse_location(spec)
    if where.scheme in ("http", "https"):
        return HttpSource(where, settings)
    if where.scheme == "s3":
        from skewtape_pipeline.mirror.object_source import ObjectSource  # obstore: S3 only

        return ObjectSource(where, settings)
    if where.is_url:
        raise ConfigError(f"source {where.shown!r}: expected https://, s3:// or a local folder")
    return FolderSource(Path(where.raw), settings)


def next_attempt(retry: Retry, url: str, error: BaseException) -> Retry:
    """The retry policy after one more broken transfer of ``url``, having slept its backoff.

    Raises TransferError naming ``url`` and ``error`` once the attempts are used up.
    """
    try:  # a broken body of any client counts as a read error (urllib3 gives "other" errors 0)
        retry = retry.increment(method="GET", url=url, error=ProtocolError(error_reason(error)))
    except MaxRetryError:
        raise TransferError(
            f"the transfer broke off ({error_reason(error)}) and the last retry failed too",
            url=url,
        ) from None
    retry.sleep()
    return retry


class StalledTransfer(OSError):
    """A body that came slower than the low-speed limit: a broken transfer (resumed)."""


class LowSpeedCheck:
    """curl's ``--speed-limit``/``--speed-time``: :meth:`received` raises
    :class:`StalledTransfer` when fewer than ``limit`` bytes/s arrived over a window of
    ``window`` seconds (a limit or a window of 0 checks nothing). ``received(0)`` checks the
    window without new bytes (a body that sends nothing)."""

    def __init__(self, settings: TransferSettings):
        self.limit, self.window = settings.speed_limit, settings.speed_time
        self.restart()

    def restart(self) -> None:
        """Begin a new window now, no byte in it yet."""
        self.since, self.bytes = time.monotonic(), 0

    @property
    def on(self) -> bool:
        return bool(self.limit and self.window)

    def received(self, size: int) -> None:
        self.bytes += size
        elapsed = time.monotonic() - self.since
        if elapsed < self.window or not self.on:
            return
        rate = self.bytes / elapsed
        if rate < self.limit:
            raise StalledTransfer(
                f"{rate:.0f} bytes/s over {elapsed:.0f} s, below the low-speed limit of "
                f"{self.limit:.0f} bytes/s"
            )
        self.restart()


def read_watched(chunks: Iterable[bytes], settings: TransferSettings) -> bytes:
    """A small file's bytes from ``chunks`` as they come, checked against ``settings``'
    low-speed limit (StalledTransfer), and at most one byte past :data:`SMALL_FILE_LIMIT`
    (the rest is not read: :func:`small_file` refuses it)."""
    speed, data = LowSpeedCheck(settings), bytearray()
    for chunk in chunks:
        data += chunk
        if len(data) > SMALL_FILE_LIMIT:
            break
        speed.received(len(chunk))
    return bytes(data[: SMALL_FILE_LIMIT + 1])


def error_reason(error: BaseException) -> str:
    """``Type: message`` of ``error`` (its type alone without a message); urllib3's
    ``ProtocolError``, which only wraps what broke a connection, as what it wraps
    (``ConnectionResetError: [Errno 104] Connection reset by peer``)."""
    if isinstance(error, ProtocolError) and error.args:
        inner = error.args[-1]
        return error_reason(inner) if isinstance(inner, BaseException) else str(inner)
    return f"{type(error).__name__}: {error}" if str(error) else type(error).__name__


def _is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def _origin(url: str) -> tuple[str, str, int | None]:
    parts = urlsplit(url)
    port = parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    return parts.scheme, (parts.hostname or "").lower(), port


# --- HTTP(S) -------------------------------------------------------------------------------------


class HttpSource:
    """A publisher's root URL, read through urllib3 (see the module notes)."""

    def __init__(self, base_url: str | Location, settings: TransferSettings):
        where = parse_location(base_url)
        shown = where.shown
        try:
            parts = urlsplit(where.raw)
            parts.port  # noqa: B018 (raises ValueError for a port that is no number)
        except ValueError:
            raise ConfigError(f"source {shown!r}: expected https://host[:port]/path") from None
        if parts.username or parts.password or parts.query or parts.fragment or where.secret:
            raise ConfigError(
                f"source {shown!r}: expected a URL without credentials, query or fragment "
                "(what it held is not shown)"
            )
        if not parts.hostname:
            raise ConfigError(f"source {shown!r}: expected a host name")
        if parts.scheme == "http" and not _is_loopback(parts.hostname):
            raise ConfigError(
                f"source {shown!r}: plain http:// is accepted only for a loopback host "
                "(127.0.0.1, localhost); use https://"
            )
        base_url = where.raw
        self.location = base_url.rstrip("/")
        self.settings = settings
        self.origin = _origin(base_url)
        self.transient = (HTTPError, OSError, http.client.HTTPException)
        self.retries = 0
        self._count = threading.Lock()
        self.pool = urllib3.PoolManager(
            num_pools=4,
            maxsize=settings.connections,
            retries=settings.retry(),
            timeout=Timeout(connect=settings.connect_timeout, read=socket_read_timeout(settings)),
            ca_certs=settings.ca_certs,
        )
        self.pool.pool_classes_by_scheme = pools_with_head_deadline(socket_read_timeout(settings))

    def url(self, rel: str) -> str:
        return f"{self.location}/{quote(rel)}"

    def read_small(self, rel: str) -> SmallFile | None:
        def read(url: str, response) -> SmallFile:
            chunks = iter(lambda: response.read1(BLOCK), b"")
            return small_file(url, read_watched(chunks, self.settings), _mtime_ns(response))

        return self._read_answer(rel, {}, (200,), read)

    def stat(self, rel: str) -> RemoteFile | None:
        def read(url: str, response) -> RemoteFile:
            if response.status == 206:  # the byte asked for: the connection stays reusable
                response.read(1)  # (a body that goes on is not read: its connection closes)
            return _remote_file(url, response)

        return self._read_answer(rel, {"Range": "bytes=0-0"}, (200, 206), read)

    def _read_answer(self, rel: str, headers: dict[str, str], allowed: tuple[int, ...], read):
        """``read(url, response)`` of the answer to GET ``rel``, or None when the publisher
        does not have it; a body broken on the way or below the low-speed limit is asked for
        again (as a large file's is resumed, within ``attempts``)."""
        retry = self.settings.retry()
        while True:
            url, response = self._get(rel, headers)
            try:
                if response.status in ABSENT_STATUSES:
                    return None
                self._check_answer(url, rel, response, allowed)
                return read(url, response)
            except (HTTPError, StalledTransfer) as exc:
                retry = next_attempt(retry, url, exc)
                with self._count:
                    self.retries += 1
            finally:
                finish_response(response)

    def open_range(self, rel: str, start: int, expected: RemoteFile) -> Body:
        """The file from ``start`` when the answer resumes ``expected`` exactly (a 206 whose
        Content-Range is the range asked for and whose strong validator is ``expected``'s,
        asked with ``If-Range``); otherwise the whole file from 0, asked without a Range (a
        weak or missing validator never resumes)."""
        resume = start > 0 and expected.resumable
        headers = {"Range": f"bytes={start}-", "If-Range": expected.validator} if resume else {}
        url, response = self._get(rel, headers)
        try:
            self._check_body_answer(url, rel, response)
            remote = _remote_file(url, response)
            if response.status == 206 and not _resumes(response, remote, start, expected):
                if not resume:
                    raise PublisherError(
                        f"answered 206 with Content-Range "
                        f"{response.headers.get('Content-Range')!r} to a request for all of it",
                        url=url,
                    )
                finish_response(response)
                return self.open_range(rel, 0, expected)
            begins = start if response.status == 206 else 0
        except BaseException:
            finish_response(response)
            raise
        return Body(begins, remote, _read_body(response, remote.size - begins), response.close)

    def _check_body_answer(self, url: str, rel: str, response) -> None:
        if response.status in ABSENT_STATUSES:
            raise PublisherError(
                f"is listed in its folder's CHECKSUMS.sha256 but the publisher answered "
                f"{response.status}",
                url=url,
            )
        self._check_answer(url, rel, response, (200, 206))

    def _get(self, rel: str, headers: dict[str, str]) -> tuple[str, urllib3.BaseHTTPResponse]:
        """GET ``rel`` (following same-origin redirects only): (final URL, unread response)."""
        url = self.url(rel)
        for _ in range(MAX_REDIRECTS + 1):
            try:
                response = self.pool.request(
                    "GET", url, headers=headers, preload_content=False, redirect=False
                )
            except MaxRetryError as exc:
                raise _failed(url, exc.reason or exc) from None
            except HTTPError as exc:
                raise _failed(url, exc) from None
            if response.retries is not None and response.retries.history:
                with self._count:
                    self.retries += len(response.retries.history)
            if response.status not in REDIRECT_STATUSES:
                return url, response
            finish_response(response)
            location = urljoin(url, response.headers.get("Location", ""))
            if _origin(location) != self.origin:
                raise PublisherError(
                    f"redirects to {location}; a publisher's files are read only from "
                    f"{self.origin[0]}://{self.origin[1]} (no other scheme or host)",
                    url=url,
                )
            url = location
        raise PublisherError(f"redirects more than {MAX_REDIRECTS} times", url=url)

    @staticmethod
    def _check_answer(url: str, rel: str, response, allowed: tuple[int, ...]) -> None:
        if response.status not in allowed:
            raise TransferError(f"the publisher answered HTTP {response.status}", url=url)
        kind = response.headers.get("Content-Type", "").split(";")[0].strip().lower()
        if kind in ("text/html", "application/xhtml+xml") and not rel.endswith(HTML_SUFFIXES):
            raise PublisherError(
                f"the publisher answered {response.status} with an HTML page ({kind}); expected "
                "the file itself",
                url=url,
            )


def socket_read_timeout(settings: TransferSettings) -> float:
    """Seconds a read may wait for its next byte: ``read_timeout``, at most ``speed_time`` when
    a low-speed limit is set (a silent socket is the slowest body)."""
    if settings.speed_limit and settings.speed_time:
        return min(settings.read_timeout, max(settings.speed_time, 1.0))
    return settings.read_timeout


def _failed(url: str, error: BaseException) -> TransferError:
    if isinstance(error, SSLError):
        return TLSFailureError(f"the TLS handshake failed ({error})", url=url)
    return TransferError(
        f"the request failed after the last retry ({error_reason(error)})", url=url
    )


def finish_response(response) -> None:
    """Give the connection back, closing it first when its body was not read to the end (its
    length left, or no length: a body that goes on until the connection closes)."""
    if not response.closed and response.length_remaining != 0:
        response.close()
    response.release_conn()


def pools_with_head_deadline(seconds: float) -> dict[str, type]:
    """urllib3's connection pools for http and https whose connections give up on an answer
    whose status line and headers have not all arrived ``seconds`` after the request was sent:
    a read waits at most the read timeout for its next byte, so a publisher sending one
    header line every few seconds would otherwise hold a fetch for ever (the socket is shut
    then, and the request fails as a broken connection would, and is retried)."""

    class Connection(_HeadDeadline, urllib3.connection.HTTPConnection):
        head_deadline = seconds

    class SecureConnection(_HeadDeadline, urllib3.connection.HTTPSConnection):
        head_deadline = seconds

    class Pool(urllib3.HTTPConnectionPool):
        ConnectionCls = Connection

    class SecurePool(urllib3.HTTPSConnectionPool):
        ConnectionCls = SecureConnection

    return {"http": Pool, "https": SecurePool}


class _HeadDeadline:
    """A connection whose :meth:`getresponse` shuts its socket once :attr:`head_deadline`
    seconds passed without the whole answer head (see :func:`pools_with_head_deadline`)."""

    head_deadline: float

    def getresponse(self):
        deadline = _Deadline(self.sock, self.head_deadline)  # type: ignore[attr-defined]
        try:
            response = super().getresponse()  # type: ignore[misc]
        except (OSError, http.client.HTTPException):
            if not deadline.end():
                raise
            response = None
        if deadline.end():  # a head cut short by the shut reads as complete: never trusted
            raise SlowHeadError(
                f"the answer's status line and headers did not all arrive within "
                f"{self.head_deadline:g} s"
            )
        return response


class _Deadline:
    """Shuts ``sock`` ``seconds`` from now unless :meth:`end` came first; the two decide under
    one lock, so the socket is never shut once ``end`` has returned (it may be carrying the
    body, or the next request) and ``end`` tells whether it was."""

    def __init__(self, sock, seconds: float):
        self.sock, self.lock = sock, threading.Lock()
        self.ended = self.fired = False
        self.timer = threading.Timer(seconds, self._fire)
        self.timer.daemon = True
        self.timer.start()

    def _fire(self) -> None:
        with self.lock:
            if not self.ended:
                self.fired = True
                _shut(self.sock)

    def end(self) -> bool:
        """Stop the deadline; True when it had shut the socket."""
        with self.lock:
            self.ended = True
        self.timer.cancel()
        return self.fired


class SlowHeadError(http.client.HTTPException):
    """An answer's head that did not all arrive in time (:class:`_HeadDeadline`): a broken
    answer, retried as one."""


def _shut(sock) -> None:
    """End every read on ``sock`` now (a blocked one returns at once)."""
    with contextlib.suppress(OSError):  # closed already
        sock.shutdown(socket.SHUT_RDWR)


def _remote_file(url: str, response) -> RemoteFile:
    """The version a 200 or 206 answer is of: its full size, ETag or Last-Modified, mtime."""
    size = _full_size(response)
    if size is None:
        raise PublisherError(
            "the publisher sent no length for it (no Content-Length or Content-Range); a file "
            "is fetched only when its size is known",
            url=url,
        )
    validator = response.headers.get("ETag") or response.headers.get("Last-Modified") or ""
    return RemoteFile(size, validator, _mtime_ns(response))


def _mtime_ns(response) -> int | None:
    """The answer's Last-Modified in ns since the epoch, or None."""
    modified = response.headers.get("Last-Modified")
    try:
        return int(parsedate_to_datetime(modified).timestamp()) * 1_000_000_000
    except (TypeError, ValueError):
        return None


def _full_size(response) -> int | None:
    if response.status == 206:
        total = response.headers.get("Content-Range", "").rpartition("/")[2]
        return int(total) if total.isdigit() else None
    length = response.headers.get("Content-Length", "")
    if "chunked" in response.headers.get("Transfer-Encoding", "").lower():
        return None
    return int(length) if length.isdigit() else None


def _resumes(response, remote: RemoteFile, start: int, expected: RemoteFile) -> bool:
    """True when a 206 answer is the rest of ``expected`` from ``start``: its Content-Range is
    exactly the range asked for and its strong validator is the one sent in If-Range."""
    wanted = f"bytes {start}-{expected.size - 1}/{expected.size}"
    same_range = response.headers.get("Content-Range", "").strip() == wanted
    return same_range and remote.resumable and remote == expected


def _read_body(response, length: int) -> Iterator[bytes | memoryview]:
    """The body's blocks, ``length`` bytes in all (IncompleteRead when it ends short), each
    what arrived (a cut loses nothing read). Without a content coding, the socket's bytes are
    read into one reused buffer (``readinto1`` of the connection's buffered reader, below
    urllib3's and http.client's responses; the latter is closed once the body is read whole,
    as it closes itself, so the connection is reused), so no block is allocated: each block
    yielded is valid until the next is asked for."""
    try:
        left = length
        stdlib, buffer = unencoded_response(response), memoryview(bytearray(min(BLOCK, length)))
        while left > 0:
            if stdlib is not None:
                chunk = buffer[: stdlib.fp.readinto1(buffer[: min(BLOCK, left)])]
            else:
                chunk = response.read1(min(BLOCK, left))
            if not chunk:
                raise urllib3.exceptions.IncompleteRead(length - left, left)
            left -= len(chunk)
            yield chunk
        if stdlib is not None:
            stdlib.close()  # the body was read whole: the connection can serve the next request
    finally:
        finish_response(response)


def unencoded_response(response) -> http.client.HTTPResponse | None:
    """The standard library's response under urllib3's when the body comes as it is stored
    (no Content-Encoding to decode) and its buffered reader can read into a buffer; else None
    (urllib3 reads and decodes it)."""
    coding = response.headers.get("Content-Encoding", "identity").strip().lower()
    stdlib = getattr(response, "_fp", None)
    usable = isinstance(stdlib, http.client.HTTPResponse) and hasattr(stdlib.fp, "readinto1")
    return stdlib if coding == "identity" and usable else None


# --- a local folder ---------------------------------------------------------------------------


def _read_handle(handle, length: int, block: int) -> Iterator[bytes]:
    """``length`` bytes of an open file or object in blocks; OSError when it ends short."""
    try:
        left = length
        while left > 0:
            chunk = handle.read(min(block, left))
            if not chunk:
                raise OSError(f"the file ended {left} bytes early")
            left -= len(chunk)
            yield chunk
    finally:
        handle.close()


class FolderSource:
    """A publisher's root that is a local folder (a mounted share, a copy on disk)."""

    def __init__(self, folder: Path, settings: TransferSettings):
        if not folder.is_dir():
            raise ConfigError(f"source {str(folder)!r}: no such folder, and not a URL")
        self.folder = Path(os.path.realpath(folder))
        self.location = str(self.folder)
        self.settings = settings
        self.transient = (OSError,)
        self.retries = 0

    def url(self, rel: str) -> str:
        return str(self.folder / rel)

    def _path(self, rel: str) -> Path:
        """The file of ``rel``; PublisherError when a link takes it out of the folder."""
        path = Path(os.path.realpath(self.folder / rel))
        if not path.is_relative_to(self.folder):
            raise PublisherError(f"leads out of {self.folder} (a link)", url=self.url(rel))
        return path

    def read_small(self, rel: str) -> SmallFile | None:
        try:
            with open(self._path(rel), "rb") as handle:
                data = handle.read(SMALL_FILE_LIMIT + 1)
                mtime_ns = os.fstat(handle.fileno()).st_mtime_ns
        except (FileNotFoundError, NotADirectoryError, IsADirectoryError):
            return None
        return small_file(self.url(rel), data, mtime_ns)

    def stat(self, rel: str) -> RemoteFile | None:
        try:
            st = self._path(rel).stat()
        except (FileNotFoundError, NotADirectoryError):
            return None
        return RemoteFile(st.st_size, f"{st.st_size}-{st.st_mtime_ns}", st.st_mtime_ns)

    def open_range(self, rel: str, start: int, expected: RemoteFile) -> Body:
        remote = self.stat(rel)
        if remote is None:
            raise PublisherError(
                "is listed in its folder's CHECKSUMS.sha256 but is not there", url=self.url(rel)
            )
        begins = start if remote == expected else 0
        handle = open(self._path(rel), "rb")  # noqa: SIM115 (closed by the body)
        handle.seek(begins)
        return Body(begins, remote, _read_handle(handle, remote.size - begins, BLOCK), handle.close)

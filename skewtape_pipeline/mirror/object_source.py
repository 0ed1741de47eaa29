"""A publisher's root in an S3 bucket (``s3://bucket/prefix``), read through obstore (Rust's
``object_store``) for :mod:`skewtape_pipeline.mirror.sources`, whose ``open_source`` gives it.

An object is read in ranged GETs, :data:`S3_DEPTH` in flight, each asking for the version the
transfer started from (``If-Match``), and the bytes of all of them in flight are counted against
the low-speed limit while the transfer waits (:func:`_read_ahead`), so a server that trickles is
let go of as over HTTP. When the client can sign, each GET goes to a presigned URL (signed by
obstore, for :data:`S3_SIGNED_FOR`, again at each resume) through urllib3 as an HTTP source's
body does: the socket's bytes read into a few buffers reused GET after GET, no allocation per
read. The signed URL is a secret: it is never shown, and a message names the ``s3://`` object.
Otherwise (a store that cannot sign) each GET is obstore's stream under a low-speed limit, or
read whole into the client's buffer without one (no copy in Python).

Nothing here writes to disk.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import http.client
import itertools
import logging
import os
import re
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor, wait
from datetime import timedelta
from urllib.parse import parse_qsl, urlsplit

import obstore
import urllib3
from obstore import exceptions as obstore_errors
from urllib3.exceptions import HTTPError, MaxRetryError
from urllib3.util import Timeout

from skewtape_pipeline import progress
from skewtape_pipeline.errors import (
    ConfigError,
    FetchError,
    MissingBucketError,
    PublisherError,
    TransferError,
)
from skewtape_pipeline.hashing import BLOCK
from skewtape_pipeline.locations import Location, parse_location
from skewtape_pipeline.mirror.sources import (
    Body,
    LowSpeedCheck,
    RemoteFile,
    SmallFile,
    TransferSettings,
    error_reason,
    finish_response,
    next_attempt,
    pools_with_head_deadline,
    read_watched,
    refuse_large,
    small_file,
    socket_read_timeout,
    unencoded_response,
)
from skewtape_pipeline.storage import (
    NOT_HTTP_ENDPOINT,
    S3_SCHEME,
    check_object_uri,
    endpoint_problem,
    is_http_url,
)

S3_BLOCK = 2 * BLOCK
"""Bytes of the largest ranged read (one GET) of an object up to 64 MiB."""
S3_BLOCK_MAX = 16 * BLOCK
"""Bytes of the largest ranged read of any object."""
S3_GETS_PER_OBJECT = 32
"""A larger object's GETs are at most 1/32 of it (so a GET retried costs at most that again),
between :data:`S3_BLOCK` and :data:`S3_BLOCK_MAX` bytes."""
S3_DEPTH = 4
"""Ranged reads of one object in flight at once."""
OBJECT_ABSENT = (FileNotFoundError, obstore_errors.NotFoundError)
"""What obstore raises for an object that is not there."""
OBJECT_BROKEN = (obstore_errors.GenericError, OSError)
"""What obstore raises for an answer broken on the way (read again), not a refusal."""
_CLIENT_RETRIED = re.compile(r"\bafter \d+ retries\b")
"""How obstore's error says its own retries were used up (``Error after 4 retries in ...``):
an answer that did not begin (a silent server), not one broken on the way."""
S3_REQUEST_LIMIT = timedelta(hours=1)
"""The longest one request may take (``read_timeout`` catches a silent one and the low-speed
limit a slow one long before)."""
S3_STREAM_CHUNK = 1
"""obstore's ``min_chunk_size`` of a stream (a small file, or a ranged read under a low-speed limit
from a store that cannot sign): each read of the socket is handed over as it comes (hundreds of
KiB at a time from a fast server), so the limit sees every byte that arrived, and a read given
up stops at the next one. A larger size would keep the reading thread waiting for a trickle to
fill it, every byte unseen. (Each chunk is a new Python ``bytes``: 6% to 13% more CPU than one
buffer per GET handed over without a copy, measured over loopback SeaweedFS, whatever the chunk
size; without a limit, a GET is read whole that way.)"""
S3_LEAST_BACKOFF = 0.001
"""Seconds of the shortest backoff (object_store's jitter needs a backoff above 0)."""
S3_SIGNED_FOR = timedelta(hours=1)
"""How long a presigned URL of a body's GETs is valid (a body still reading past it gets 403,
a broken transfer: the resume signs again)."""
NO_SUCH_BUCKET = "<Code>NoSuchBucket</Code>"
"""How an S3 server's 404 answer to a GET says that the bucket, not only the key, is missing (the
error document obstore's error quotes; a HEAD's 404 has no body to say it)."""
_SIGNED_QUERY = re.compile(r"\?[^\s'\"]*X-Amz-[^\s'\"]*", re.IGNORECASE)
"""A presigned URL's query (its signature), wherever a text may carry it."""


class ObjectSource:
    """A publisher's root in an S3 bucket, read through obstore (Rust's ``object_store``).

    The endpoint and region come from the URI's query (``endpoint_override``, ``scheme``,
    ``region``, as for the S3 tiers) or the environment (``AWS_ENDPOINT_URL``, ``AWS_REGION``);
    credentials only from the environment (``AWS_ACCESS_KEY_ID``, ``AWS_SECRET_ACCESS_KEY``,
    ``AWS_SESSION_TOKEN``, or the instance's role). An object's version is its ETag: every
    ranged read asks for that ETag (``If-Match``), so an object replaced between two reads
    fails the read instead of being stitched, and the resume starts it over. Listing, HEAD and
    small files go through obstore; a large object's GETs through presigned URLs and urllib3
    (``pool``) when the store signs (see the module notes).
    """

    def __init__(self, uri: str | Location, settings: TransferSettings):
        where = parse_location(uri)
        uri = where.raw
        try:
            check_object_uri(uri)
        except ConfigError as exc:  # "root ...: why": named here as the source, redacted
            raise ConfigError(f"source {where.shown!r}: {str(exc).partition(': ')[2]}") from None
        parts = urlsplit(uri)
        self.bucket = parts.netloc
        self.bucket_seen = False
        """Whether an answer showed the bucket exists (an absent object is then only absent)."""
        self.prefix = parts.path.strip("/")
        self.location = f"{S3_SCHEME}{parts.netloc}/{self.prefix}".rstrip("/")
        self.settings = settings
        options = dict(parse_qsl(parts.query))
        _check_endpoint(options, where.shown)
        self.store = _object_store(parts.netloc, options, settings)
        self.transient = (obstore_errors.BaseError, OSError, HTTPError, http.client.HTTPException)
        self.retries = 0
        self.signs: bool | None = None
        """Whether the store signs URLs (None: not yet asked; False: GETs go through obstore)."""
        self._count = threading.Lock()
        self.pool = urllib3.PoolManager(
            num_pools=2,
            maxsize=settings.connections * S3_DEPTH,
            retries=settings.retry(),
            timeout=Timeout(connect=settings.connect_timeout, read=socket_read_timeout(settings)),
            ca_certs=settings.ca_certs,
        )
        self.pool.pool_classes_by_scheme = pools_with_head_deadline(socket_read_timeout(settings))

    def url(self, rel: str) -> str:
        return f"{self.location}/{rel}"

    def _key(self, rel: str) -> str:
        return f"{self.prefix}/{rel}" if self.prefix else rel

    def read_small(self, rel: str) -> SmallFile | None:
        """The object read whole, streamed under the low-speed limit (a read broken on the way
        or too slow read again within ``attempts``, as a large object's is resumed), or None
        when there is no such object."""
        retry = self.settings.retry()
        while True:
            with _object_errors(self.url(rel), "reading it"):
                try:
                    result = obstore.get(self.store, self._key(rel))
                    remote = _object_version(result.meta)
                    refuse_large(self.url(rel), remote.size)
                    data = read_watched(result.stream(S3_STREAM_CHUNK), self.settings)
                except OBJECT_ABSENT as exc:
                    self._check_bucket(exc)
                    return None
                except OBJECT_BROKEN as exc:  # an answer cut on the way, asked for again here,
                    if _CLIENT_RETRIED.search(str(exc)):  # unless the client's own retries
                        raise  # already asked for it ``attempts`` times
                    retry = next_attempt(retry, self.url(rel), exc)
                    continue
            return small_file(self.url(rel), data, remote.mtime_ns)

    def stat(self, rel: str) -> RemoteFile | None:
        with _object_errors(self.url(rel), "looking it up"):
            try:
                return _object_version(obstore.head(self.store, self._key(rel)))
            except OBJECT_ABSENT:
                if not self.bucket_seen:  # a HEAD's 404 does not say which is missing: a GET's does
                    self._check_bucket_with_get(self._key(rel))
                return None

    def _check_bucket(self, absent: BaseException) -> None:
        """MissingBucketError naming the source when the 404 ``absent`` (a GET's) says the bucket
        does not exist; otherwise the bucket is known to exist from then on."""
        if NO_SUCH_BUCKET in str(absent):
            raise MissingBucketError(
                f"the bucket {self.bucket!r} does not exist on the S3 server; check the source's "
                "bucket name and endpoint (nothing was fetched)",
                url=self.location,
            )
        self.bucket_seen = True

    def _check_bucket_with_get(self, key: str) -> None:
        """:meth:`_check_bucket` through a GET of ``key``, which a HEAD found absent (its body is
        never read: a 404 says all)."""
        try:
            obstore.get(self.store, key)
        except OBJECT_ABSENT as exc:
            self._check_bucket(exc)
        else:
            self.bucket_seen = True  # the key appeared meanwhile: the bucket exists

    def open_range(self, rel: str, start: int, expected: RemoteFile) -> Body:
        remote = self.stat(rel)
        if remote is None:
            raise PublisherError(
                "is listed in its folder's CHECKSUMS.sha256 but the bucket has no such object",
                url=self.url(rel),
            )
        begins = start if remote == expected and remote.resumable else 0
        speed, largest = LowSpeedCheck(self.settings), _largest_get(remote.size)
        signed = self._signed(self._key(rel))
        if signed is not None:
            buffers = _Buffers(min(largest, remote.size))
            read = functools.partial(
                self._signed_block_at, (signed, self.url(rel)), remote.validator, buffers
            )
            chunks = _read_ahead(read, begins, remote.size, largest, speed, buffers.give)
        else:
            read = functools.partial(
                _block_at if speed.on else _whole_block_at,
                self.store,
                self._key(rel),
                remote.validator,
            )
            chunks = _read_ahead(read, begins, remote.size, largest, speed)
        return Body(begins, remote, chunks, chunks.close, watched=True)

    def _signed(self, key: str) -> str | None:
        """A presigned GET URL of ``key`` (valid for :data:`S3_SIGNED_FOR`; a secret, never
        shown), or None when the store cannot sign (its GETs then go through obstore)."""
        if self.signs is False:
            return None
        try:
            url = obstore.sign(self.store, "GET", key, S3_SIGNED_FOR)
        except (obstore_errors.BaseError, TypeError, ValueError, OSError, RuntimeError):
            self.signs = False
            return None
        self.signs = True
        return url

    def _signed_block_at(
        self,
        urls: tuple[str, str],
        version: str,
        buffers: _Buffers,
        offset: int,
        size: int,
        arrived: _Arrivals,
        stop: threading.Event,
    ) -> list:
        """:func:`_block_at` through the presigned URL (``urls``: it and the object's URL to
        show): ``size`` bytes at ``offset`` read into one of ``buffers`` as they come (each
        read told to ``arrived``, the GET given up at the next read once ``stop`` is set), only
        from the version ``version`` (``If-Match``; 412 otherwise): the buffer's :data:`BLOCK`
        slices. A GET whose answer did not begin within the retries (``attempts``: the pool's
        own, each told to ``arrived`` until the answer begins, and a notice naming the object's
        ``s3://`` URL) is TransferError naming the object and why (a reset connection, a
        timeout), as over HTTP, not retried again per file; no error or notice names the
        presigned URL."""
        url, shown = urls
        headers = {"Range": f"bytes={offset}-{offset + size - 1}"}
        if version:
            headers["If-Match"] = version
        retries = self.settings.retry().telling(
            functools.partial(arrived.retrying, offset), shown=shown
        )
        failed = None  # raised outside the handler: urllib3's error (its URL) is not its context
        try:
            response = self.pool.request(
                "GET", url, headers=headers, preload_content=False, redirect=False, retries=retries
            )
        except MaxRetryError as exc:
            reason = without_signature(error_reason(exc.reason or exc))
            failed = TransferError(
                f"the ranged read at {offset} failed after the last retry ({reason})", url=shown
            )
        except HTTPError as exc:
            failed = _SignedReadError(offset, "failed", exc)
        finally:
            arrived.answered(offset)
        if failed is not None:
            raise failed
        if response.retries is not None and response.retries.history:
            with self._count:
                self.retries += len(response.retries.history)
        try:
            _check_signed_answer(response, offset, size, version)
            return _read_into(response, buffers.take(), offset, size, arrived.add, stop)
        except HTTPError as exc:
            failed = _SignedReadError(offset, "broke off", exc)
        finally:
            finish_response(response)
        raise failed


def _object_store(bucket: str, options: dict[str, str], settings: TransferSettings):
    """The obstore S3 client of ``bucket``: where the server is from ``options`` (the URI's
    query) or the environment, credentials from the environment only, ``settings``' timeouts,
    and the client's own retries (``attempts``, exponential backoff)."""
    from obstore.store import S3Store

    _check_credentials_possible(bucket)
    config = {"region": options["region"]} if "region" in options else {}
    scheme = options.get("scheme", "https").lower()  # case-insensitive, as the URI's own
    if "endpoint_override" in options:
        config["endpoint"] = f"{scheme}://{options['endpoint_override']}"
    client = {
        "connect_timeout": timedelta(seconds=settings.connect_timeout),
        "read_timeout": timedelta(seconds=socket_read_timeout(settings)),
        "timeout": S3_REQUEST_LIMIT,
        "allow_http": scheme == "http" or _http_endpoint_in_environment(),
    }
    retry = {
        "max_retries": settings.attempts - 1,
        "backoff": {
            "init_backoff": timedelta(seconds=max(settings.backoff, S3_LEAST_BACKOFF)),
            "max_backoff": timedelta(seconds=max(settings.backoff_max, S3_LEAST_BACKOFF)),
            "base": 2.0,
        },
        "retry_timeout": S3_REQUEST_LIMIT,
    }
    try:
        return S3Store(bucket, config=config, client_options=client, retry_config=retry)
    except (obstore_errors.BaseError, ValueError) as exc:
        raise ConfigError(f"source {S3_SCHEME}{bucket}: not a usable S3 source ({exc})") from None


CREDENTIAL_SOURCES = (
    "AWS_ACCESS_KEY_ID",
    "AWS_WEB_IDENTITY_TOKEN_FILE",
    "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
    "AWS_CONTAINER_CREDENTIALS_FULL_URI",
)
"""The environment variables of a credential source other than the instance's role."""


def _check_credentials_possible(bucket: str) -> None:
    """ConfigError, before any request, when ``AWS_EC2_METADATA_DISABLED`` rules out the
    instance's role and no other source of credentials is set (nor ``AWS_SKIP_SIGNATURE``, a
    public bucket): the S3 client would ask the instance-metadata address anyway (it ignores
    that variable) and fail with that address's answer instead of saying what is missing."""
    if os.environ.get("AWS_EC2_METADATA_DISABLED", "").strip().lower() != "true":
        return
    if any(os.environ.get(name) for name in CREDENTIAL_SOURCES):
        return
    if os.environ.get("AWS_SKIP_SIGNATURE", "").strip().lower() in ("true", "1"):
        return
    raise ConfigError(
        f"source {S3_SCHEME}{bucket}: no S3 credentials: AWS_ACCESS_KEY_ID and "
        "AWS_SECRET_ACCESS_KEY are not set, and AWS_EC2_METADATA_DISABLED=true rules out the "
        "instance's role; set the keys (or AWS_SKIP_SIGNATURE=true for a public bucket)"
    )


ENDPOINT_ENV = ("AWS_ENDPOINT_URL", "AWS_ENDPOINT")
"""The environment variables obstore takes the endpoint from when the URI's query names none."""


def _check_endpoint(options: dict[str, str], shown: str) -> None:
    """Refuse (ConfigError naming the source ``shown``, not the endpoint) an endpoint that is no
    ``http(s)://host[:port][/path]`` URL: the URI's ``endpoint_override`` (with its ``scheme``:
    ``storage.endpoint_problem``, the tier roots' rule), else each of :data:`ENDPOINT_ENV` set in
    the environment, which obstore reads then. obstore takes any text and panics when it builds
    the first request (an invalid URI); checked when the source is opened, before anything is
    written."""
    if "endpoint_override" in options:
        problem = endpoint_problem(options)
    else:
        problem = next(
            (
                f"{NOT_HTTP_ENDPOINT}; expected {name}=http(s)://host[:port] in the environment"
                for name in ENDPOINT_ENV
                if name in os.environ and not is_http_url(os.environ[name])
            ),
            None,
        )
    if problem is not None:
        raise ConfigError(f"source {shown!r}: not a usable S3 source ({problem})")


def _http_endpoint_in_environment() -> bool:
    return os.environ.get("AWS_ENDPOINT_URL", "").lower().startswith("http://")


def _object_version(meta) -> RemoteFile:
    """The version an object's metadata describes: its size, ETag ("" when the store sends
    none: a resume then starts the object over) and modification time."""
    modified = meta["last_modified"]
    mtime_ns = int(modified.timestamp()) * 1_000_000_000 + modified.microsecond * 1000
    return RemoteFile(meta["size"], meta.get("e_tag") or "", mtime_ns)


@contextlib.contextmanager
def _object_errors(url: str, doing: str) -> Iterator[None]:
    """The client's failures (after its own retries) as TransferError naming ``url`` (a
    FetchError, which names its file already, as it is)."""
    try:
        yield
    except FetchError:
        raise
    except (obstore_errors.BaseError, OSError) as exc:
        raise TransferError(f"{doing} failed ({_first_line(exc)})", url=url) from None


def _first_line(error: BaseException) -> str:
    return error_reason(error).splitlines()[0]


def _largest_get(size: int) -> int:
    """Bytes of the largest ranged GET of an object of ``size`` bytes: 1/32 of it, at least
    :data:`S3_BLOCK`, at most :data:`S3_BLOCK_MAX`. Fewer, larger GETs of a large object cost
    the server and the client less per byte (each is a signed request and a lookup)."""
    return min(S3_BLOCK_MAX, max(S3_BLOCK, size // S3_GETS_PER_OBJECT))


def _read_ahead(
    read: Callable[..., list],
    start: int,
    end: int,
    largest: int,
    speed: LowSpeedCheck,
    recycle: Callable[[list], None] | None = None,
):
    """The bytes of an object from ``start`` to ``end`` in ranged GETs (``read(offset, size,
    arrived, stop)``: a GET's buffers, each counted by ``arrived`` (:class:`_Arrivals`) as it
    comes; the GET given up once ``stop`` is set), :data:`S3_DEPTH` of them in flight at once,
    yielded in order while the caller writes and hashes. The GETs grow from :data:`BLOCK` to
    ``largest`` bytes (a broken GET that the client retries costs what it had received, so the
    first ones are small). One that fails for good raises, and the caller resumes after the
    blocks it received.

    While waiting for the next GET, the bytes all GETs in flight received go to ``speed`` (the
    low-speed limit over the whole body, as for one HTTP body), which raises StalledTransfer
    when they come too slowly; the GETs still in flight are then given up at their next
    read of the socket (a silent one at the read timeout). While a GET is in its client's
    retries (a connection reset or refused, a timeout, a 5xx answer: the wait between two
    attempts is no slow body), the limit waits: those retries end, within ``attempts``, in an
    answer or in an error saying why. Once a GET's buffers were all yielded (the caller done
    with them), they go to ``recycle``, when given."""
    ranges = iter(_growing_ranges(start, end, largest))
    arrived, stop = _Arrivals(), threading.Event()
    read = progress.carrying_notices(read)
    with ThreadPoolExecutor(max_workers=S3_DEPTH) as pool:
        pending = collections.deque(
            pool.submit(read, *span, arrived, stop) for span in itertools.islice(ranges, S3_DEPTH)
        )
        try:
            while pending:
                chunks = _watched_result(pending[0], arrived, speed)
                pending.popleft()
                span = next(ranges, None)
                if span is not None:
                    pending.append(pool.submit(read, *span, arrived, stop))
                yield from chunks
                if recycle is not None:
                    recycle(chunks)
        finally:
            stop.set()
            for future in pending:
                future.cancel()


class _Arrivals:
    """What the GETs of one body did (told from their threads) that the low-speed limit has
    not yet been told of: the bytes they received, and whether one was in its client's retries
    (from a retry, :meth:`retrying`, until its answer begins, :meth:`answered`)."""

    def __init__(self) -> None:
        self._lock, self._bytes = threading.Lock(), 0
        self._retrying: set[int] = set()
        self._retried = False

    def add(self, size: int) -> None:
        with self._lock:
            self._bytes += size

    def retrying(self, offset: int) -> None:
        """The GET at ``offset`` is asked for again by its client."""
        with self._lock:
            self._retrying.add(offset)
            self._retried = True

    def answered(self, offset: int) -> None:
        """The GET at ``offset`` has its answer (or failed for good): no longer retrying."""
        with self._lock:
            self._retrying.discard(offset)

    def take(self) -> tuple[int, bool]:
        """The bytes received since the last take, and whether a GET was in its client's
        retries meanwhile."""
        with self._lock:
            taken = self._bytes, self._retried or bool(self._retrying)
            self._bytes, self._retried = 0, False
        return taken


def _watched_result(future: Future, arrived: _Arrivals, speed: LowSpeedCheck) -> list:
    """``future``'s result; while it is not there, ``speed`` is told of the bytes ``arrived``
    every quarter of its window (at most 1 s apart), and raises when they are too few; its
    window begins again instead while a GET was in its client's retries (bounded by
    ``attempts``, they end in an error that says why: a reset is no slow body)."""
    poll = min(1.0, max(speed.window / 4, 0.05)) if speed.on else None
    while not wait([future], timeout=poll).done:
        size, retried = arrived.take()
        if retried:
            speed.restart()
        speed.received(size)
    return future.result()


def _growing_ranges(start: int, end: int, largest: int) -> Iterator[tuple[int, int]]:
    """(offset, size) of the GETs covering [start, end): BLOCK, doubling up to ``largest``."""
    size = BLOCK
    while start < end:
        yield start, min(size, end - start)
        start += size
        size = min(2 * size, largest)


def _block_at(
    store,
    key: str,
    version: str,
    offset: int,
    size: int,
    arrived: _Arrivals,
    stop: threading.Event,
) -> list:
    """``size`` bytes of object ``key`` at ``offset``: the buffers of the GET's stream as they
    came (:data:`S3_STREAM_CHUNK`), each told to ``arrived``, only from the version whose ETag
    is ``version`` (obstore's PreconditionError otherwise). Once ``stop`` is set the GET is
    given up (its connection closed) at the next buffer, raising OSError."""
    stream = obstore.get(store, key, options=_range(offset, size, version)).stream(S3_STREAM_CHUNK)
    chunks, received = [], 0
    for chunk in stream:
        if stop.is_set():
            raise OSError(f"the ranged read at {offset} was given up")
        chunks.append(chunk)
        received += len(chunk)
        arrived.add(len(chunk))
    _check_length(offset, size, received)
    return chunks


def _whole_block_at(store, key: str, version: str, offset: int, size: int, *_) -> list:
    """:func:`_block_at` without a low-speed limit: the GET's bytes in the client's one buffer
    (no copy in Python, the cheapest read), told to no one when they arrive."""
    chunk = obstore.get(store, key, options=_range(offset, size, version)).bytes()
    _check_length(offset, size, len(chunk))
    return [chunk]


def _range(offset: int, size: int, version: str) -> dict:
    return {"range": (offset, offset + size), "if_match": version or None}


def _check_length(offset: int, size: int, received: int) -> None:
    if received != size:
        raise OSError(f"a ranged read at {offset} returned {received} of {size} bytes")


class _Buffers:
    """The buffers of one body's signed GETs, ``size`` bytes each: taken by a GET, given back
    once the caller is done with its bytes, and taken again (no allocation per GET)."""

    def __init__(self, size: int) -> None:
        self.size, self._free, self._lock = size, [], threading.Lock()

    def take(self) -> memoryview:
        with self._lock:
            buffer = self._free.pop() if self._free else None
        return memoryview(bytearray(self.size) if buffer is None else buffer)

    def give(self, chunks: list) -> None:
        if chunks and isinstance(chunks[0], memoryview):
            with self._lock:
                self._free.append(chunks[0].obj)


class _SignedReadError(OSError):
    """A signed GET that failed, naming its offset and why, never its URL."""

    def __init__(self, offset: int, what: str, reason: object) -> None:
        why = error_reason(reason) if isinstance(reason, BaseException) else str(reason)
        super().__init__(f"the ranged read at {offset} {what} ({without_signature(why)})")


def without_signature(text: str) -> str:
    """``text`` with any presigned URL's query (its signature) replaced by ``?***``."""
    return _SIGNED_QUERY.sub("?***", text)


def _check_signed_answer(response, offset: int, size: int, version: str) -> None:
    """OSError unless ``response`` is the 206 of exactly the range asked, of ``version``."""
    if response.status == 412:
        raise _SignedReadError(offset, "was refused", "PreconditionFailed: the object changed")
    if response.status != 206:
        raise _SignedReadError(offset, "was answered", f"HTTP {response.status}")
    wanted = f"bytes {offset}-{offset + size - 1}/"
    if not response.headers.get("Content-Range", "").strip().startswith(wanted):
        raise _SignedReadError(offset, "was answered", "another range than the one asked for")
    etag = response.headers.get("ETag")
    if version and etag is not None and etag != version:
        raise _SignedReadError(offset, "was answered", "PreconditionFailed: another version")


def _read_into(
    response,
    buffer: memoryview,
    offset: int,
    size: int,
    arrived: Callable[[int], None],
    stop: threading.Event,
) -> list:
    """``size`` bytes of ``response``'s body read into ``buffer`` as the socket gives them
    (``readinto1`` of the connection's reader, as an HTTP source's body), each read told to
    ``arrived``; the GET given up once ``stop`` is set: its :data:`BLOCK` slices."""
    stdlib, view, got = unencoded_response(response), buffer[:size], 0
    while got < size:
        if stop.is_set():
            raise OSError(f"the ranged read at {offset} was given up")
        if stdlib is not None:
            read = stdlib.fp.readinto1(view[got:])
        else:
            read = response.readinto(view[got:])
        if not read:
            raise OSError(f"a ranged read at {offset} returned {got} of {size} bytes")
        got += read
        arrived(read)
    if stdlib is not None:
        stdlib.close()  # the body was read whole: the connection can serve the next request
    return [view[at : at + BLOCK] for at in range(0, size, BLOCK)]


class _NoSignatureInLogs(logging.Filter):
    """urllib3's log lines name a request's URL (its debug line, a retry's warning): that of a
    signed GET is shown without its query."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        if "x-amz-" in message.lower():
            record.msg, record.args = without_signature(message), None
        return True


for _logger in ("urllib3.connectionpool", "urllib3.util.retry", "urllib3.response"):
    logging.getLogger(_logger).addFilter(_NoSignatureInLogs())

"""Where a warm or cold tier keeps its consolidated files: a local folder or an S3 prefix.

A tier root is a folder (the default) or an ``s3://bucket/prefix`` URI, read and written
through pyarrow's filesystem layer. :func:`tier_store` gives the one object every module uses
for a tier root (:class:`LocalTier` or :class:`ObjectTier`: list, publish without replacing,
delete, the schema marker), and a file in it is a :data:`TierFile`: a ``Path`` for a local
file, an :class:`ObjectFile` for an object. The functions below (:func:`size_of`,
:func:`sha256_of`, :func:`parquet_source`, :func:`delete`, ...) take either.

An S3 URI's endpoint and options come from the URI's query (``endpoint_override``,
``scheme``, ``region``: not secrets) or the environment (``AWS_ENDPOINT_URL``,
``AWS_REGION``); credentials only from the environment (``AWS_ACCESS_KEY_ID``,
``AWS_SECRET_ACCESS_KEY``, or the SDK's other sources), never from a URI (refused).

Object stores have no atomic rename, so an object is published whole or not at all by one
PUT: :meth:`ObjectTier.publish_new` uploads a finished, verified local file under its
content-derived key only if that key is absent (the archive's lock excludes other writers; a
present key must already hold the same sha256), then reads the stored object back (size and
sha256) before the caller commits the catalog, which stays a local file replaced by an atomic
rename: the commit point. An upload cut short leaves no object (an incomplete multipart
upload is invisible; a bucket lifecycle rule cleans those up).

An unreachable endpoint, a missing bucket or refused credentials raise
:class:`~skewtape_pipeline.errors.ObjectStoreError` naming the URI.
"""

from __future__ import annotations

import contextlib
import functools
import ipaddress
import os
import re
import shutil
import tempfile
from collections.abc import Callable, Iterator, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import parse_qsl, unquote, urlsplit

import pyarrow as pa
from pyarrow import fs as pafs

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import (
    ConfigError,
    DamagedFileError,
    ObjectStoreError,
    TickFormatError,
)
from skewtape_pipeline.hashing import BLOCK, FileStamp, sha256_bytes, sha256_file, sha256_stream
from skewtape_pipeline.locations import parse_location, redacted

S3_SCHEME = "s3://"
URI_OPTIONS = ("endpoint_override", "scheme", "region")
"""The query parameters an S3 tier root may carry (where the server is; never credentials)."""
CREDENTIAL_ENV = ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN")

Checkpoint = Callable[[str], None]


def is_object_uri(root: object) -> bool:
    """True when ``root`` is an ``s3://`` URI (a tier root in an object store)."""
    return isinstance(root, str) and root.startswith(S3_SCHEME)


def check_object_uri(uri: str) -> str:
    """``uri`` when it is a usable S3 tier root: a bucket, no ``..``, only :data:`URI_OPTIONS`,
    no ``@``.

    Raises ConfigError otherwise, naming the URI without its query (whose values may be
    secrets). A URI holding ``@`` (``s3://KEY:SECRET@bucket/warm``: credentials in its user
    part, or in an option's value) is refused without being echoed at all: credentials come
    from the environment only, so no message, record or log ever holds one.
    """
    if "@" in unquote(uri):  # percent-encoded (%40) too: pyarrow decodes the options' values
        raise ConfigError(
            "root: an s3:// URI holding '@' (credentials in its user part, s3://KEY:SECRET@..., "
            "or in an option) is refused and not shown; give credentials in the environment: "
            f"{', '.join(CREDENTIAL_ENV[:2])}"
        )
    shown = redacted(uri)
    try:
        parts = urlsplit(uri)
    except ValueError:
        raise ConfigError(f"root = {shown!r}: expected s3://<bucket>[/<prefix>]") from None
    bucket, _, prefix = (parts.netloc + parts.path).partition("/")
    if not bucket or ".." in prefix.split("/") or parts.fragment:
        raise ConfigError(f"root = {shown!r}: expected s3://<bucket>[/<prefix>]")
    for key, _ in parse_qsl(parts.query, keep_blank_values=True):
        if key not in URI_OPTIONS:
            raise ConfigError(
                f"root = {shown!r}: query parameter {key!r} is not allowed; expected only "
                f"{', '.join(URI_OPTIONS)} (credentials come from the environment: "
                f"{', '.join(CREDENTIAL_ENV[:2])})"
            )
    return uri


def check_tier_root(root: str) -> str:
    """A warm or cold tier's ``root`` setting as the archive keeps it: a folder path as it is,
    an S3 URI (any case of ``s3://``) checked by :func:`check_object_uri` and
    :func:`endpoint_problem` and written with ``s3://`` in lower case. Any other ``scheme://``
    root (``https://...``, ``ftp://...``) is refused with ConfigError naming it redacted (no user
    part, query or fragment): a URL is never taken for a relative folder, and no credential
    reaches a recorded policy."""
    where = parse_location(root)
    if where.scheme == "s3":
        uri = check_object_uri(where.raw)
        problem = endpoint_problem(dict(parse_qsl(urlsplit(uri).query)))
        if problem is not None:
            raise ConfigError(f"root = {where.shown!r}: {problem}")
        return uri
    if where.is_url:
        raise ConfigError(
            f"root = {where.shown!r}: {where.scheme}:// tier roots are not supported; expected "
            "a folder path or s3://<bucket>[/<prefix>] (credentials come from the environment: "
            f"{', '.join(CREDENTIAL_ENV[:2])})"
        )
    return root


NOT_HTTP_ENDPOINT = "its endpoint is not a valid http(s) URL with a host[:port]"
"""Why an endpoint given for an S3 URI (a tier root, a mirror's source) is refused."""
ENDPOINT_GIVEN = "endpoint_override=host[:port] and scheme=http or https"
"""How an S3 URI's query names its endpoint."""


def endpoint_problem(options: Mapping[str, str]) -> str | None:
    """Why the endpoint an S3 URI's query names (``endpoint_override``, with ``scheme``) is no
    ``http(s)://host[:port][/path]`` URL, in words that never show it (``endpoint_override``
    holding a scheme, ``http://host:9000``, said as such: the scheme goes in ``scheme=``); None
    when it names none or a usable one. The one rule of the tier roots (pyarrow would take such
    an endpoint, and fail or connect elsewhere later) and of the mirror's S3 sources (obstore
    would panic at its first request)."""
    override = options.get("endpoint_override")
    if override is None:
        return None
    if "://" in override:
        return (
            f"its endpoint_override holds a scheme (give it as scheme=); expected {ENDPOINT_GIVEN}"
        )
    if not is_http_url(f"{options.get('scheme', 'https')}://{override}"):
        return f"{NOT_HTTP_ENDPOINT}; expected {ENDPOINT_GIVEN}"
    return None


_URL_CHARS = re.compile(r"[!-~]*")
_AUTHORITY = re.compile(r"(?:[A-Za-z0-9._~-]+|\[(?P<ipv6>[0-9A-Fa-f:.]+)\])(?::(?P<port>\d+))?")
"""A host name, an IPv4 address or an [IPv6] one, then any port (its range checked apart); a
colon with no port after it is none (``https://http:host``: a scheme in ``endpoint_override``)."""
_URL_PATH = re.compile(r"[A-Za-z0-9._~!$&'()*+,;=:@%/-]*")


def is_http_url(text: str) -> bool:
    """True when ``text`` is ``http(s)://host[:port][/path]``: a host name, an IPv4 address or
    an IPv6 one in brackets, a port of 0 to 65535; printable ASCII without spaces, and no user
    part, query or fragment."""
    if not _URL_CHARS.fullmatch(text) or "?" in text or "#" in text:
        return False
    try:
        parts = urlsplit(text)
    except ValueError:  # an unclosed or invalid [IPv6] host
        return False
    found = _AUTHORITY.fullmatch(parts.netloc)
    return (
        parts.scheme in ("http", "https")
        and found is not None
        and (found["ipv6"] is None or _is_ipv6(found["ipv6"]))
        and int(found["port"] or 0) <= 65535
        and bool(_URL_PATH.fullmatch(parts.path))
    )


def _is_ipv6(text: str) -> bool:
    try:
        ipaddress.IPv6Address(text)
    except ValueError:
        return False
    return True


# --- files --------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ObjectFile:
    """An object in an object store: its URI (what messages name), its key in ``filesystem``."""

    uri: str
    key: str
    filesystem: pafs.FileSystem = field(compare=False, repr=False)

    @property
    def name(self) -> str:
        """The last segment of the key (``part-<sha16>.parquet``)."""
        return self.key.rpartition("/")[2]

    def __str__(self) -> str:
        return self.uri


TierFile = Path | ObjectFile
"""A consolidated file: a local path, or an object."""


def file_text(file: TierFile) -> str:
    """``file`` as results name it: a local file by its absolute path (however its archive root
    was spelled), an object by its URI."""
    return str(file) if isinstance(file, ObjectFile) else str(Path(file).absolute())


def parquet_source(file: TierFile) -> tuple[str, pafs.FileSystem | None]:
    """``(source, filesystem)`` for pyarrow's readers (``pq.read_metadata(source,
    filesystem=...)``, ``pq.ParquetFile``): the path and None for a local file."""
    if isinstance(file, ObjectFile):
        return file.key, file.filesystem
    return str(file), None


def exists(file: TierFile) -> bool:
    """True when ``file`` is there (a regular file, an object)."""
    if isinstance(file, ObjectFile):
        with _store_errors(file.uri, "looking it up"):
            return file.filesystem.get_file_info(file.key).type == pafs.FileType.File
    return Path(file).is_file()


def size_of(file: TierFile) -> int:
    """Its size in bytes; FileNotFoundError when it is not there."""
    if isinstance(file, ObjectFile):
        with _store_errors(file.uri, "looking it up"):
            info = file.filesystem.get_file_info(file.key)
        if info.type != pafs.FileType.File:
            raise FileNotFoundError(f"{file.uri}: no such object")
        return info.size
    return Path(file).stat().st_size


def stamp_of(file: TierFile) -> FileStamp:
    """What tells whether ``file`` changed since it was last verified, without reading it: a
    local file's :class:`~skewtape_pipeline.hashing.FileStamp`; for an object, from one HEAD
    request, its size, its Last-Modified (``mtime_ns`` and ``ctime_ns``) and, in place of the
    inode, the first 8 bytes of the sha256 of its ETag (which every PUT changes, within the
    same second too). FileNotFoundError when it is not there."""
    if not isinstance(file, ObjectFile):
        return FileStamp.of(Path(file))
    with (
        _store_errors(file.uri, "looking it up"),
        file.filesystem.open_input_file(file.key) as handle,
    ):
        size, headers = handle.size(), handle.metadata() or {}
    tag = int(sha256_bytes(bytes(headers.get("ETag", b"")))[:16], 16)
    mtime = _epoch_ns(bytes(headers.get("Last-Modified", b"")).decode("ascii", "replace"))
    return FileStamp(device=0, inode=tag, size=size, mtime_ns=mtime, ctime_ns=mtime)


HEAD_REQUESTS = 16
"""Objects whose stamps :func:`stamps_of` asks for side by side (HEAD requests mostly wait)."""


def stamps_of(files: Sequence[TierFile]) -> list[FileStamp | None]:
    """:func:`stamp_of` of each of ``files``, in order (None for one that is not there), the
    objects' HEAD requests made side by side, a local file's ``stat`` in turn.

    Raises ObjectStoreError naming the URI of an object store that cannot be used, as soon as
    one request fails (the requests not yet sent are dropped)."""
    objects = [i for i, file in enumerate(files) if isinstance(file, ObjectFile)]
    found: dict[int, FileStamp | None] = {}
    if len(objects) > 1:
        with ThreadPoolExecutor(min(len(objects), HEAD_REQUESTS)) as heads:
            asked = {i: heads.submit(_stamp_or_none, files[i]) for i in objects}
            try:
                found = {i: request.result() for i, request in asked.items()}
            except BaseException:
                heads.shutdown(wait=False, cancel_futures=True)
                raise
    return [found[i] if i in found else _stamp_or_none(file) for i, file in enumerate(files)]


def _stamp_or_none(file: TierFile) -> FileStamp | None:
    try:
        return stamp_of(file)
    except FileNotFoundError:
        return None


def _epoch_ns(iso: str) -> int:
    """An ISO 8601 time (``2026-12-03T07:34:57Z``) in ns since the epoch; 0 when unreadable."""
    try:
        return int(datetime.fromisoformat(iso).timestamp()) * 1_000_000_000
    except ValueError:
        return 0


def sha256_of(file: TierFile) -> str:
    """sha256 (hex) of its bytes, read in full."""
    if isinstance(file, ObjectFile):
        with (
            _store_errors(file.uri, "reading it"),
            file.filesystem.open_input_stream(file.key) as stream,
        ):
            return sha256_stream(stream)
    return sha256_file(Path(file))


def read_bytes(file: TierFile) -> bytes:
    """All its bytes; FileNotFoundError when it is not there."""
    if isinstance(file, ObjectFile):
        with (
            _store_errors(file.uri, "reading it"),
            file.filesystem.open_input_stream(file.key) as stream,
        ):
            return stream.read()
    return Path(file).read_bytes()


def delete(file: TierFile) -> bool:
    """Remove ``file``; True when it was there. A local file's emptied ``key=value`` folders
    go too (an object store has no folders)."""
    if isinstance(file, ObjectFile):
        if not exists(file):
            return False
        with _store_errors(file.uri, "deleting it"):
            file.filesystem.delete_file(file.key)
        return True
    removed = fsio.atomic_unlink(file)
    _remove_empty_partition_folders(file.parent)
    return removed


def _remove_empty_partition_folders(folder: Path) -> None:
    """Remove ``folder`` and its parents while they are empty ``key=value`` folders."""
    fsio.prune_empty_folders(folder, within=lambda f: "=" in f.name)


# --- tier roots ---------------------------------------------------------------------------------


class LocalTier:
    """A tier root that is a local folder (files published by hard link, never replaced)."""

    def __init__(self, folder: Path):
        self.folder = fsio.folded(folder)

    @property
    def root(self) -> str:
        return str(self.folder)

    def file(self, relative: str) -> Path:
        """The file at ``relative`` (POSIX) inside the root."""
        return self.folder / relative

    def relative(self, file: TierFile) -> str | None:
        """``file``'s POSIX path inside the root; None when it is not inside."""
        if isinstance(file, ObjectFile):
            return None
        target = fsio.folded(file)
        return (
            target.relative_to(self.folder).as_posix()
            if target.is_relative_to(self.folder)
            else None
        )

    def parquet_files(self) -> list[Path]:
        """Every ``*.parquet`` file under the root, sorted."""
        if not self.folder.is_dir():
            return []
        return sorted(
            Path(os.path.normpath(p)) for p in self.folder.rglob("*.parquet") if p.is_file()
        )

    def check_reachable(self) -> None:
        """Nothing to check for a local folder (a missing one is an empty tier)."""

    @contextlib.contextmanager
    def staging(self, relative: str) -> Iterator[Path]:
        """The local folder to write a file for ``relative`` in: its own folder (so the
        finished file is linked into place on the same file system). When the block fails
        (a full disk), the folders it left empty below the root are removed."""
        folder = self.folder / relative
        folder.mkdir(parents=True, exist_ok=True)
        try:
            yield folder
        except BaseException:
            fsio.prune_empty_folders(folder, within=lambda path: self.folder in path.parents)
            raise

    def publish_new(
        self, temp: Path, relative: str, digest: str, checkpoint: Checkpoint | None = None
    ) -> bool:
        """Link the finished ``temp`` to ``relative`` without replacing anything (fsynced, read
        only); True when it already existed with the same sha256.

        Raises TickFormatError when a file of that name holds other bytes (nothing replaced).
        """
        target = self.file(relative)
        if checkpoint is not None:
            checkpoint(f"publish:{target.name}")
        try:
            os.link(temp, target)
        except FileExistsError:
            _refuse_collision(target, digest)
            return True
        fsio.fsync_dir(target.parent)
        fsio.make_read_only(target)
        return False

    def create_or_read(self, relative: str, data: bytes) -> bytes:
        """Create ``relative`` holding ``data`` unless it exists (no clobbering: hard link of a
        finished temporary file); return what it holds then."""
        target = self.file(relative)
        if not target.exists():
            self.folder.mkdir(parents=True, exist_ok=True)
            temp = fsio.temp_path_for(target)
            with open(temp, "wb") as handle:
                handle.write(data)
                handle.flush()
                os.fsync(handle.fileno())
            try:
                os.link(temp, target)
            except FileExistsError:
                pass
            finally:
                temp.unlink(missing_ok=True)
            fsio.fsync_dir(self.folder)
        return target.read_bytes()

    def remove_stale_temps(self) -> None:
        """Temporary files left by an interrupted write under the root."""
        fsio.remove_stale_temps(self.folder)


class ObjectTier:
    """A tier root that is an S3 prefix (see the module notes for the publish protocol)."""

    def __init__(self, uri: str):
        check_object_uri(uri)
        parts = urlsplit(uri)
        self.uri = uri
        self.base = (parts.netloc + parts.path).rstrip("/")
        self.bucket = parts.netloc

    @functools.cached_property
    def filesystem(self) -> pafs.FileSystem:
        """The prefix's pyarrow filesystem, made on first use (``object_filesystem``: pyarrow
        may ask the network for the bucket's region, so building a store asks nothing).
        ConfigError naming the URI when pyarrow refuses it."""
        return object_filesystem(self.uri)

    @property
    def root(self) -> str:
        return f"{S3_SCHEME}{self.base}"

    def file(self, relative: str) -> ObjectFile:
        key = f"{self.base}/{relative}"
        return ObjectFile(f"{S3_SCHEME}{key}", key, self.filesystem)

    def relative(self, file: TierFile) -> str | None:
        if not isinstance(file, ObjectFile) or not file.key.startswith(self.base + "/"):
            return None
        return file.key[len(self.base) + 1 :]

    def parquet_files(self) -> list[ObjectFile]:
        """Every ``*.parquet`` object under the prefix, sorted."""
        self.check_reachable()
        selector = pafs.FileSelector(self.base, recursive=True, allow_not_found=True)
        with _store_errors(self.root, "listing it"):
            infos = self.filesystem.get_file_info(selector)
        keys = sorted(
            i.path for i in infos if i.type == pafs.FileType.File and i.path.endswith(".parquet")
        )
        return [ObjectFile(f"{S3_SCHEME}{k}", k, self.filesystem) for k in keys]

    def check_reachable(self) -> None:
        """Raise ObjectStoreError naming the URI unless the bucket answers (endpoint reachable,
        bucket present, credentials accepted)."""
        _check_bucket(self.filesystem, self.bucket, self.root)

    def bucket_exists(self) -> bool:
        """True when the bucket answers, False when the server says it does not exist;
        ObjectStoreError naming the URI when the server cannot tell (endpoint unreachable,
        credentials refused)."""
        return _bucket_found(self.filesystem, self.bucket, self.root)

    @contextlib.contextmanager
    def staging(self, relative: str) -> Iterator[Path]:
        """A private local folder to write a file in before it is uploaded (removed after)."""
        with tempfile.TemporaryDirectory(prefix="skewtape-upload-") as folder:
            yield Path(folder)

    def publish_new(
        self, temp: Path, relative: str, digest: str, checkpoint: Checkpoint | None = None
    ) -> bool:
        """Upload the finished ``temp`` to ``relative`` unless that key exists, then confirm
        the stored object (size and sha256 read back); True when it already existed with the
        same sha256.

        Raises TickFormatError when the key holds other bytes (nothing replaced),
        DamagedFileError when the stored object does not read back as uploaded (it is
        deleted again).
        """
        target = self.file(relative)
        if checkpoint is not None:
            checkpoint(f"publish:{target.name}")
        if exists(target):
            _refuse_collision(target, digest)
            return True
        with (
            _store_errors(target.uri, "uploading it"),
            self.filesystem.open_output_stream(target.key) as out,
            open(temp, "rb") as src,
        ):
            shutil.copyfileobj(src, out, BLOCK)
        if checkpoint is not None:
            checkpoint(f"uploaded:{target.name}")
        size, found = size_of(target), sha256_of(target)
        if (size, found) != (temp.stat().st_size, digest):
            delete(target)  # never left for a rerun to take as a name collision
            raise DamagedFileError(
                f"the stored object reads back as {size} bytes with sha256 {found}; "
                f"{temp.stat().st_size} bytes with sha256 {digest} were uploaded (nothing was "
                "committed)",
                path=target.uri,
            )
        return False

    def create_or_read(self, relative: str, data: bytes) -> bytes:
        """Create the object ``relative`` holding ``data`` unless it exists; return what it
        holds then."""
        target = self.file(relative)
        if not exists(target):
            with (
                _store_errors(target.uri, "writing it"),
                self.filesystem.open_output_stream(target.key) as out,
            ):
                out.write(data)
        return read_bytes(target)

    def remove_stale_temps(self) -> None:
        """Nothing: files are staged in private local folders, never under the prefix."""


TierStore = LocalTier | ObjectTier


def parquet_files_of(stores: Mapping[str, TierStore]) -> list[tuple[str, TierFile, str]]:
    """``(name, file, path inside its store)`` of every ``*.parquet`` file of each of
    ``stores``, store by store in the mapping's order, sorted within a store, once every store
    is known to answer (checked in that order): one listing per store (for an S3 prefix, a
    request per thousand keys, never one per file). ObjectStoreError naming the URI of the
    first store that does not answer or cannot be listed."""
    for store in stores.values():
        store.check_reachable()
    listed = []
    for name, store in stores.items():
        for file in store.parquet_files():
            inside = store.relative(file)
            assert inside is not None  # listed under the store's root
            listed.append((name, file, inside))
    return listed


def placed_files(store: TierStore) -> list[TierFile]:
    """Every ``*.parquet`` file of ``store``, sorted; none when its folder or bucket does not
    exist (nothing can have been placed there). ObjectStoreError naming the URI when an S3
    store cannot tell (endpoint unreachable, credentials refused)."""
    if isinstance(store, ObjectTier) and not store.bucket_exists():
        return []
    return list(store.parquet_files())


def endpoint_options(root: Path | str) -> dict[str, str]:
    """How the store of the tier root ``root`` is reached: an S3 URI's query options
    (:data:`URI_OPTIONS`: where its server is, never a secret); none for a folder, or for a URI
    that leaves them to the environment (``AWS_ENDPOINT_URL``)."""
    if not is_object_uri(root):
        return {}
    return dict(parse_qsl(urlsplit(str(root)).query, keep_blank_values=True))


def tier_store(root: Path | str) -> TierStore:
    """The store of a tier root: an :class:`ObjectTier` for an ``s3://`` URI, else a
    :class:`LocalTier`."""
    return ObjectTier(root) if is_object_uri(root) else LocalTier(Path(root))


def object_filesystem(uri: str) -> pafs.FileSystem:
    """The pyarrow filesystem of an S3 URI (its query options, credentials from the
    environment), one per URI and set of credentials.

    Raises ConfigError naming the URI when pyarrow refuses it.
    """
    return _filesystem(
        uri, tuple(os.environ.get(name) for name in (*CREDENTIAL_ENV, "AWS_ENDPOINT_URL"))
    )


@functools.lru_cache(maxsize=32)
def _filesystem(uri: str, _environment: tuple[str | None, ...]) -> pafs.FileSystem:
    try:
        filesystem, _ = pafs.FileSystem.from_uri(uri)
    except (pa.ArrowException, OSError) as exc:
        raise ConfigError(f"root = {uri!r}: not a usable S3 URI ({exc})") from None
    return filesystem


def _refuse_collision(target: TierFile, digest: str) -> None:
    found = sha256_of(target)
    if found != digest:
        raise TickFormatError(
            f"{target}: exists with sha256 {found}; the new content's is {digest} "
            "(a name collision); nothing was replaced"
        )


def reading(file: TierFile) -> contextlib.AbstractContextManager[None]:
    """Around a pyarrow read of ``file``: for an object, the store's failures (its bucket
    missing included) become ObjectStoreError naming it (a damaged file's ``ArrowInvalid`` and
    a missing object's FileNotFoundError pass through); nothing for a local file."""
    if isinstance(file, ObjectFile):
        return _reading_object(file)
    return contextlib.nullcontext()


@contextlib.contextmanager
def _reading_object(file: ObjectFile) -> Iterator[None]:
    try:
        with _store_errors(file.uri, "reading it"):
            yield
    except FileNotFoundError:
        _check_bucket(file.filesystem, file.key.partition("/")[0], file.uri)
        raise


def _check_bucket(filesystem: pafs.FileSystem, bucket: str, uri: str) -> None:
    """Raise ObjectStoreError naming ``uri`` unless ``bucket`` answers (endpoint reachable,
    bucket present, credentials accepted)."""
    if not _bucket_found(filesystem, bucket, uri):
        raise ObjectStoreError(
            f"{uri}: the bucket {bucket!r} does not exist; create it first", uri=uri
        )


def _bucket_found(filesystem: pafs.FileSystem, bucket: str, uri: str) -> bool:
    """Whether ``bucket`` exists; ObjectStoreError naming ``uri`` when the store does not say
    (endpoint unreachable, credentials refused: never taken for a missing bucket)."""
    with _store_errors(uri, "reaching its bucket"):
        return filesystem.get_file_info(bucket).type != pafs.FileType.NotFound


@contextlib.contextmanager
def _store_errors(uri: str, doing: str) -> Iterator[None]:
    """Turn the object store's failures (network, missing bucket, refused credentials: pyarrow
    raises OSError for them) into ObjectStoreError naming ``uri``; a missing object stays
    FileNotFoundError."""
    try:
        yield
    except FileNotFoundError:
        raise
    except OSError as exc:
        raise ObjectStoreError(
            f"{uri}: the object store failed while {doing}: {exc}", uri=uri
        ) from None

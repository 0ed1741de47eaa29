"""One file's transfer into a month's staging folder (for :mod:`skewtape_pipeline.mirror.fetch`).

How the bytes move
------------------
- **One stream, one copy.** A file is received in one stream from where its kept bytes end;
  each block the source hands over (over HTTP, and over S3 through presigned URLs, a reused
  buffer the socket's bytes are read into; over S3 from a store that cannot sign, a piece of
  obstore's stream, or its one buffer per GET without a low-speed limit)
  is written to the file and hashed from that same buffer while it is still in the CPU's cache:
  no byte is copied in Python between the client and the file.
- **No fsync here.** The caller fsyncs the month's files together once all arrived, before the
  month folder is renamed into place (a crash before that leaves only the staging folder).
- **Bounded.** Every broken or stalled body, and every answer that does not continue the file
  (another version, a range not the one asked for), uses one of the settings' ``attempts``;
  a body slower than the low-speed limit is a broken one (checked here as the bytes are
  written, or by the body itself: an S3 body counts its ranged reads in flight). A disk error
  is never retried.

Ranged parallel parts of one file were measured (``benchmarks/fetch.py``, loopback nginx and
SeaweedFS): they cost more CPU than they saved, the client's CPU (sha256) being the bottleneck,
not the server, so a file is one stream.

Resuming
--------
Bytes kept from an earlier run of the same remote version are hashed from disk first, then the
rest is asked for. When the source answers with the whole file instead (another version, or a
server that ignores ranges), the kept bytes are dropped and that answer is read from 0, never
stitching two versions.

This module does not import dagster.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass

from skewtape_pipeline import fsio
from skewtape_pipeline.errors import FetchError, StorageError
from skewtape_pipeline.hashing import BLOCK
from skewtape_pipeline.mirror.sources import Body, LowSpeedCheck, RemoteFile, Source, next_attempt

WRITEBACK_EVERY = 8 << 20
"""Bytes written between two requests that the kernel start writing them to disk
(:func:`~skewtape_pipeline.fsio.start_writeback`), so the month's final fsync finds little left
to write."""


class Cancelled(Exception):
    """The transfer was told to stop (another file of the month failed)."""


class NotResumed(OSError):
    """The source answered with the whole file instead of the rest asked for; ``body`` is that
    answer, read from 0 by the restart."""

    def __init__(self, start: int, body: Body, changed: bool):
        self.body = body
        super().__init__(
            f"asked for the file from byte {start}, the publisher sent all of "
            f"{'another version' if changed else 'it'}"
        )


@dataclass
class Hooks:
    """What a transfer reports to and asks of its caller: ``add(**counts)`` (the fetch's
    counters), ``writing()`` (a context turning a disk error into the caller's typed error),
    ``deadline()`` (raises past the time limit), ``new_version(remote)`` (checks and records a
    version the source sent instead), ``cancel`` (set when the month stops)."""

    add: Callable[..., None]
    writing: Callable[[], contextlib.AbstractContextManager]
    deadline: Callable[[], None]
    new_version: Callable[[RemoteFile], None]
    cancel: threading.Event


class FileTransfer:
    """Receive one file of ``source`` (``rel``, shown as ``url``) into the open file ``fd``."""

    def __init__(self, source: Source, rel: str, url: str, fd: int, hooks: Hooks) -> None:
        self.source, self.rel, self.url, self.fd, self.hooks = source, rel, url, fd, hooks
        self.retry = source.settings.retry()

    def run(self, remote: RemoteFile, kept: int) -> tuple[str, RemoteFile]:
        """Fill the file with ``remote``'s bytes after its first ``kept`` bytes (hashed from
        disk first, counted as resumed): (sha256 of the whole file, the version fetched)."""
        with self.hooks.writing():
            digest = self._hash_kept(kept)
        self.hooks.add(bytes_resumed=kept, bytes_done=kept)
        at, body = kept, None
        while at < remote.size:
            self.hooks.deadline()
            body = body or self.source.open_range(self.rel, at, remote)
            if (body.start, body.remote) != (at, remote):
                body, remote, at = self._restart(body, remote, at)
                digest = hashlib.sha256()
            try:
                at = self._stream(body, at, digest)
            except (FetchError, StorageError, Cancelled):
                body.close()
                raise
            except self.source.transient as exc:
                body.close()
                at = os.fstat(self.fd).st_size  # what was written before the break is hashed too
                self._next_attempt(exc)
            body = None
        return digest.hexdigest(), remote

    def _hash_kept(self, kept: int):
        """A sha256 object fed the file's first ``kept`` bytes (the file cut there)."""
        os.ftruncate(self.fd, kept)
        digest, at, buffer = hashlib.sha256(), 0, memoryview(bytearray(min(kept, BLOCK)))
        while at < kept:
            size = os.preadv(self.fd, [buffer[: kept - at]], at)
            if size <= 0:
                raise OSError(f"the file ended at {at} of its {kept} kept bytes")
            digest.update(buffer[:size])
            at += size
        self.hooks.add(bytes_hashed=kept)
        return digest

    def _restart(self, body: Body, remote: RemoteFile, at: int):
        """Start the file over with ``body``, the whole file from 0 (of ``remote`` or another
        version): (body, its version, 0). Uses an attempt unless nothing was kept
        and the version is only new (nothing to stitch)."""
        if body.start != 0:
            body.close()
            raise FetchError(f"answered from byte {body.start}, asked from {at}", url=self.url)
        try:
            if at:
                self._next_attempt(NotResumed(at, body, body.remote != remote))
            if body.remote != remote:
                self.hooks.new_version(body.remote)
            with self.hooks.writing():
                os.ftruncate(self.fd, 0)
        except BaseException:
            body.close()
            raise
        self.hooks.add(bytes_done=-at)
        return body, body.remote, 0

    def _stream(self, body: Body, at: int, digest) -> int:
        """Write and hash ``body``'s chunks from ``at``; returns where they end. A body slower
        than the low-speed limit raises StalledTransfer (checked here unless the body checks it
        itself, as an S3 body does over its reads in flight)."""
        flushed = at
        speed = None if body.watched else LowSpeedCheck(self.source.settings)
        for chunk in body.chunks:
            if self.hooks.cancel.is_set():
                raise Cancelled()
            size = len(chunk)
            with self.hooks.writing():
                _write_at(self.fd, chunk, at)
                if at + size - flushed >= WRITEBACK_EVERY:
                    fsio.start_writeback(self.fd, flushed, at + size - flushed)
                    flushed = at + size
            digest.update(chunk)
            at += size
            self.hooks.add(bytes_fetched=size, bytes_done=size, bytes_hashed=size)
            if speed is not None:
                speed.received(size)
            self.hooks.deadline()
        return at

    def _next_attempt(self, error: BaseException) -> None:
        self.retry = next_attempt(self.retry, self.url, error)
        self.hooks.add(retries=1)


def _write_at(fd: int, chunk, offset: int) -> None:
    view = memoryview(chunk)
    while view:
        done = os.pwrite(fd, view, offset)
        view, offset = view[done:], offset + done

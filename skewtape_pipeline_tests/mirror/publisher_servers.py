"""A publisher's files served to the fetch tests, on 127.0.0.1, started and stopped by the tests.

- :func:`start_nginx`: Debian's ``nginx`` (ranges, ETag, If-Range, Last-Modified as a real web
  server does them), one foreground process with no privilege change (``master_process off``)
  and a generated config, on a free port, serving a folder;
- :class:`FaultProxy`: a TCP proxy in front of any server that, connection by connection, cuts
  the stream after N bytes, stalls, or answers 503 itself, and counts the bytes it forwarded;
  with :class:`HttpRules` it reads the HTTP it forwards and edits it answer by answer (headers
  changed, a body cut at a share or sent slowly, a connection reset: a TCP RST);
- :class:`HostileServer`: the standard library's file server with chosen paths answered by hand
  (an HTML page, a redirect, an endless stream...): a publisher that misbehaves on purpose;
- :func:`publisher_tree`: the layout a publisher serves (``history/<YYYY-MM>/`` beside
  ``deltas/<YYYY-MM>/``) from the sample chain, its files dated a day back as published files
  are.
"""

from __future__ import annotations

import collections
import contextlib
import http.server
import os
import shutil
import socket
import ssl
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path

from skewtape_pipeline_tests.scale_out.servers import free_port

PUBLISHED_AGE_S = 86_400
"""How long ago the served files were published (their mtime): older than any racy window."""


def publisher_tree(published: Path, full: Path, out: Path) -> Path:
    """``out/history/<month>/`` from every full snapshot in ``full`` and ``out/deltas/<month>/``
    from ``published/deltas``, hard-linked copies (local state folders left out), every file
    dated :data:`PUBLISHED_AGE_S` back."""
    ignore = shutil.ignore_patterns(".skewtape")
    shutil.copytree(full, out / "history", ignore=ignore)
    shutil.copytree(published / "deltas", out / "deltas", ignore=ignore)
    age_files(out)
    return out


def age_files(folder: Path, seconds: int = PUBLISHED_AGE_S) -> None:
    """Date every file below ``folder`` ``seconds`` back."""
    when = time.time() - seconds
    for path in folder.rglob("*"):
        if path.is_file():
            os.utime(path, (when, when))


# --- nginx -------------------------------------------------------------------------------------

NGINX_CONF = """\
daemon off;
master_process off;
worker_processes 1;
pid {state}/nginx.pid;
error_log {state}/error.log warn;
events {{ worker_connections 256; }}
http {{
    access_log off;
    client_body_temp_path {state}/body;
    proxy_temp_path {state}/proxy;
    fastcgi_temp_path {state}/fastcgi;
    uwsgi_temp_path {state}/uwsgi;
    scgi_temp_path {state}/scgi;
    default_type application/octet-stream;
    types {{ application/json json; text/plain sha256 md; }}
    sendfile on;
    server {{
        listen 127.0.0.1:{port};
        root {root};
        autoindex {autoindex};
    }}
}}
"""


def nginx_binary() -> str:
    """Debian's nginx, or AssertionError saying what to install (``make nginx``)."""
    found = shutil.which("nginx") or (
        "/usr/sbin/nginx" if Path("/usr/sbin/nginx").is_file() else None
    )
    assert found, "nginx is not installed: apt-get install nginx (or: make nginx)"
    return found


@dataclass
class NginxServer:
    """A running nginx of the tests serving ``root``."""

    root: Path
    state: Path
    port: int
    process: subprocess.Popen

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(timeout=30)


def start_nginx(root: Path, state: Path, *, listings: bool = False) -> NginxServer:
    """nginx serving ``root`` on a free 127.0.0.1 port, its config, pid and logs in ``state``;
    with ``listings``, folders answer with an index page (what ``rclone``'s http backend reads;
    our fetch never asks for one)."""
    state.mkdir(parents=True, exist_ok=True)
    port = free_port()
    conf = state / "nginx.conf"
    autoindex = "on" if listings else "off"
    conf.write_text(
        NGINX_CONF.format(state=state, port=port, root=root.resolve(), autoindex=autoindex)
    )
    process = subprocess.Popen(
        [nginx_binary(), "-p", str(state), "-c", str(conf), "-e", str(state / "error.log")],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.STDOUT,
    )
    server = NginxServer(root, state, port, process)
    try:
        wait_for_port(port, process, state / "error.log")
    except BaseException:
        server.stop()
        raise
    return server


def wait_for_port(port: int, process: subprocess.Popen, log: Path, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if process.poll() is not None:
            text = log.read_text() if log.exists() else ""
            raise AssertionError(f"the server exited ({process.returncode}): {text}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.05)
    raise AssertionError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")


# --- the fault-injecting proxy ---------------------------------------------------------------


@dataclass(frozen=True)
class Fault:
    """What the proxy does to one connection: ``cut`` it after ``after`` bytes from the server,
    ``stall`` it there (``seconds``, then close), or answer ``503`` without forwarding (with a
    ``Retry-After: <retry_after>`` header when given)."""

    kind: str
    after: int = 0
    seconds: float = 30.0
    retry_after: str | None = None


@dataclass
class HttpAnswer:
    """One answer's head as an :class:`HttpRules` hook sees it: the request's method, path (its
    query left out) and headers, the answer's status line and headers (change ``headers`` in
    place), and ``count``, how many answers to that path came before this one; ``sent``, the
    bytes of its body sent so far."""

    method: str
    path: str
    request: dict[str, str]
    status: int
    headers: dict[str, str]
    count: int
    sent: int = 0

    @property
    def length(self) -> int:
        """The body's length (none after a HEAD request, a 204 or a 304)."""
        if self.method == "HEAD" or self.status in (204, 304):
            return 0
        return int(self.headers.get("Content-Length", "0"))


@dataclass
class HttpRules:
    """How the proxy edits the HTTP it forwards (HTTP/1.1, bodies of a known length):
    ``request`` may change a request's headers ({name: value}; method and path passed too),
    ``answer`` an answer's headers (:class:`HttpAnswer`); ``cut_at`` gives the share of an answer's
    body after which its connection is cut (None: whole); ``rate`` the bytes/s an answer's body
    is sent at (None: as fast as it comes); ``reset_at`` the share of an answer's body after
    which its connection is reset with a TCP RST, the client's read failing with ECONNRESET
    (0: reset instead of the answer, its head unsent; None: not reset). ``answers`` keeps every
    answer forwarded."""

    request: Callable[[str, str, dict[str, str]], None] | None = None
    answer: Callable[[HttpAnswer], None] | None = None
    cut_at: Callable[[HttpAnswer], float | None] | None = None
    reset_at: Callable[[HttpAnswer], float | None] | None = None
    rate: Callable[[HttpAnswer], float | None] | None = None
    counts: collections.Counter = field(default_factory=collections.Counter)
    answers: list[HttpAnswer] = field(default_factory=list)


@dataclass
class FaultProxy:
    """A TCP proxy on a free 127.0.0.1 port in front of ``upstream_port``. Each new connection
    takes the next queued :class:`Fault` (none left: forwarded as is). ``bytes_down`` counts
    every byte sent to the client; ``rate`` (bytes/s) throttles what it forwards. With ``http``
    (:class:`HttpRules`) it reads the HTTP it forwards, answer by answer, and edits it."""

    upstream_port: int
    rate: float | None = None
    http: HttpRules | None = None
    faults: collections.deque = field(default_factory=collections.deque)
    bytes_down: int = 0
    connections: int = 0
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _closing: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        threading.Thread(target=self._accept, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def add(self, *faults: Fault) -> None:
        self.faults.extend(faults)

    def close(self) -> None:
        self._closing.set()
        self.listener.close()

    def _accept(self) -> None:
        while not self._closing.is_set():
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
                fault = self.faults.popleft() if self.faults else None
            threading.Thread(target=self._serve, args=(client, fault), daemon=True).start()

    def _serve(self, client: socket.socket, fault: Fault | None) -> None:
        with client:
            if fault is not None and fault.kind == "503":
                _read_request_head(client)
                body = b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n"
                if fault.retry_after is not None:
                    body += f"Retry-After: {fault.retry_after}\r\n".encode()
                client.sendall(body + b"Connection: close\r\n\r\n")
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.upstream_port))
            except OSError:
                return
            with upstream:
                if self.http is not None:
                    self._serve_http(client, upstream)
                    return
                threading.Thread(target=_pump, args=(client, upstream), daemon=True).start()
                self._forward_down(upstream, client, fault)

    def _forward_down(self, upstream: socket.socket, client: socket.socket, fault) -> None:
        sent = 0
        limit = fault.after if fault is not None else None
        while True:
            try:
                data = upstream.recv(1 << 16)
            except OSError:
                return
            if not data:
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_WR)
                return
            if limit is not None and sent + len(data) >= limit:
                data = data[: limit - sent]
            try:
                client.sendall(data)
            except OSError:
                return
            sent += len(data)
            self._count(len(data))
            if self.rate:
                time.sleep(len(data) / self.rate)
            if limit is not None and sent >= limit:
                if fault.kind == "stall":
                    self._closing.wait(fault.seconds)
                with contextlib.suppress(OSError):
                    client.shutdown(socket.SHUT_RDWR)
                return

    def _count(self, size: int) -> None:
        with self._lock:
            self.bytes_down += size

    # --- HTTP, answer by answer ---

    def _serve_http(self, client: socket.socket, upstream: socket.socket) -> None:
        asked: collections.deque = collections.deque()
        arrived = threading.Condition()
        threading.Thread(
            target=self._pump_requests, args=(client, upstream, asked, arrived), daemon=True
        ).start()
        down = _Reader(upstream)
        with contextlib.suppress(OSError):
            while (head := down.head()) is not None:
                with arrived:
                    arrived.wait_for(lambda: asked or self._closing.is_set(), timeout=30)
                    if not asked:
                        return
                    method, path, request = asked.popleft()
                if not self._answer(client, down, head, method, path, request):
                    client.shutdown(socket.SHUT_RDWR)
                    return
            client.shutdown(socket.SHUT_WR)

    def _pump_requests(self, client, upstream, asked, arrived) -> None:
        """Forward each request head (GET and HEAD carry no body), edited by the rules."""
        up = _Reader(client)
        with contextlib.suppress(OSError):
            while (head := up.head()) is not None:
                first, headers = _parse_head(head)
                method, target, _ = first.split(" ", 2)
                path = target.partition("?")[0]  # a presigned request's query is its signature
                if self.http.request is not None:
                    self.http.request(method, path, headers)
                with arrived:
                    asked.append((method, path, dict(headers)))
                    arrived.notify()
                upstream.sendall(_build_head(first, headers))
        with contextlib.suppress(OSError):
            upstream.shutdown(socket.SHUT_WR)

    def _answer(self, client, down: _Reader, head: bytes, method, path, request) -> bool:
        """Forward one answer (edited, maybe cut or slowed); False when the connection ends."""
        first, headers = _parse_head(head)
        rules = self.http
        with self._lock:
            count = rules.counts[path]
            rules.counts[path] += 1
            answer = HttpAnswer(method, path, request, int(first.split(" ")[1]), headers, count)
            rules.answers.append(answer)
        if "chunked" in headers.get("Transfer-Encoding", "").lower():
            client.sendall(head)  # not edited: forwarded as it comes to the end
            while data := down.some():
                client.sendall(data)
            return False
        length = answer.length
        if rules.answer is not None:
            rules.answer(answer)
        share = rules.cut_at(answer) if rules.cut_at is not None else None
        reset = rules.reset_at(answer) if rules.reset_at is not None else None
        share = share if reset is None else reset
        rate = rules.rate(answer) if rules.rate is not None else None
        if reset == 0:
            _reset(client)
            return False
        client.sendall(_build_head(first, answer.headers))
        left = length if share is None else min(length, int(length * share))
        while left > 0:
            data = down.some(min(left, _piece(rate)))
            if not data:
                return False
            client.sendall(data)
            self._count(len(data))
            answer.sent += len(data)
            left -= len(data)
            if rate and self._closing.wait(len(data) / rate):
                return False
        if reset is not None:
            _reset(client)
        return share is None


def _piece(rate: float | None) -> int:
    """Bytes sent at once: 64 KiB, or a tenth of a second's worth at a slow rate."""
    return 1 << 16 if not rate else max(1, min(1 << 16, int(rate / 10)))


class _Reader:
    """Heads and bodies read from a socket, what was read past a head kept for the body."""

    def __init__(self, sock: socket.socket):
        self.sock, self.buffer = sock, b""

    def head(self) -> bytes | None:
        while b"\r\n\r\n" not in self.buffer:
            data = self.sock.recv(1 << 16)
            if not data:
                return None
            self.buffer += data
        head, _, self.buffer = self.buffer.partition(b"\r\n\r\n")
        return head + b"\r\n\r\n"

    def some(self, most: int = 1 << 16) -> bytes:
        if not self.buffer:
            self.buffer = self.sock.recv(1 << 16)
        data, self.buffer = self.buffer[:most], self.buffer[most:]
        return data


def _parse_head(head: bytes) -> tuple[str, dict[str, str]]:
    lines = head.decode("latin-1").split("\r\n")
    headers = {}
    for line in lines[1:]:
        if line:
            name, _, value = line.partition(":")
            headers[name.strip().title()] = value.strip()
    return lines[0], headers


def _build_head(first: str, headers: dict[str, str]) -> bytes:
    lines = [first, *(f"{name}: {value}" for name, value in headers.items()), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _reset(sock: socket.socket) -> None:
    """Close ``sock`` with a TCP RST instead of a FIN (``SO_LINGER`` on, 0 s), as a server or a
    middlebox dropping a connection does: the peer's next read fails with ECONNRESET. Its
    reading side is shut first (which sends nothing), so that the thread reading requests from
    it lets go of it and this close is the last (the RST goes out then)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.shutdown(socket.SHUT_RD)
        sock.close()


def _pump(source: socket.socket, target: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := source.recv(1 << 16):
            target.sendall(data)


def _read_request_head(client: socket.socket) -> None:
    head = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in head:
            data = client.recv(4096)
            if not data:
                return
            head += data


# --- a hostile publisher ---------------------------------------------------------------------

Answer = Callable[[http.server.BaseHTTPRequestHandler], None]


class HostileServer:
    """The standard library's threaded file server over ``folder`` on a free 127.0.0.1 port,
    with the paths in ``answers`` ({path: function writing the response}) answered by hand.
    With ``tls`` (a (certificate, key) pair of files) it speaks https."""

    def __init__(self, folder: Path, *, tls: tuple[Path, Path] | None = None):
        self.answers: dict[str, Answer] = {}
        answers = self.answers

        class Handler(http.server.SimpleHTTPRequestHandler):
            def __init__(self, *args, **kwargs):
                super().__init__(*args, directory=str(folder), **kwargs)

            def do_GET(self):
                answer = answers.get(self.path.lstrip("/").split("?")[0])
                if answer is None:
                    return super().do_GET()
                with contextlib.suppress(OSError):
                    answer(self)

            def log_message(self, *args):
                pass

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        if tls is not None:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            context.load_cert_chain(*map(str, tls))
            self.httpd.socket = context.wrap_socket(self.httpd.socket, server_side=True)
        self.port = self.httpd.server_address[1]
        self.scheme = "https" if tls else "http"
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.port}"

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextlib.contextmanager
def hostile_server(folder: Path, **options) -> Iterator[HostileServer]:
    server = HostileServer(folder, **options)
    try:
        yield server
    finally:
        server.stop()


def self_signed_certificate(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 that no system trusts, and its key (``openssl``)."""
    cert, key = folder / "cert.pem", folder / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
         "-subj", "/CN=127.0.0.1", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True, timeout=60,
    )  # fmt: skip
    return cert, key

"""The /metrics HTTP(S) endpoint, configured by a web-config file (:mod:`acceptmon.exporter.webconfig`).

A scrape must get through while other clients misbehave (:class:`Limits`): at most
64 connections; a client has 5 s to send its whole request head (a trickle of bytes
does not extend it). Right credentials are always served, even from an address that
guesses: an address has one password check running at a time, and after 5 failed
checks in 10 s its failures are answered 429, each held 1 s first. When every
connection is taken, one is dropped to make room for the new one: a failure being
held, else the one waiting longest for its request head, else one waiting for its
address's turn (the newest, of the address holding the most connections).
"""

from __future__ import annotations

import io
import socket
import ssl
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from acceptmon.errors import InputError
from acceptmon.exporter.webconfig import BasicAuth, HTTPServerConfig, TLSServerConfig, WebConfig, load_web_config
from acceptmon.version import __version__

__all__ = [
    "CONTENT_TYPE",
    "HTTPServerConfig",
    "Limits",
    "MetricsServer",
    "TLSServerConfig",
    "WebConfig",
    "load_web_config",
]

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"


@dataclass(frozen=True)
class Limits:
    """How much a client may take from the server; see the module docstring."""

    max_connections: int = 64
    request_timeout: float = 5.0
    """Seconds from the connection (or, on a kept-alive one, the request's first byte) to its last header."""
    idle_timeout: float = 30.0
    """Seconds a kept-alive connection may wait for its next request."""
    write_timeout: float = 10.0
    auth_failures: int = 5
    auth_window: float = 10.0
    auth_clients: int = 1024
    """Addresses whose failures are remembered; the least recently seen is forgotten first."""
    auth_delay: float = 1.0
    """Seconds a failure past the limit is held before its 429 (a correct password is never held)."""


class _Conn:
    """One open connection: the deadline of its current read, and whether it may be dropped to make room."""

    def __init__(self, sock: socket.socket, limits: Limits, client: str = "") -> None:
        self.sock, self.limits, self.client = sock, limits, client
        self.since = time.monotonic()
        self.deadline = self.since + limits.request_timeout
        self.idle = False  # a kept-alive connection between requests
        self.busy = False  # its request head is in; it is being answered
        self.parked: str | None = None  # being answered, but "queued" for its address's turn or a "held" failure

    def wait_for_next(self) -> None:
        self.busy, self.idle, self.since = False, True, time.monotonic()
        self.deadline = self.since + self.limits.idle_timeout


class _DeadlineReader(io.RawIOBase):
    """Socket reads bounded by the connection's deadline, however slowly the client trickles bytes."""

    def __init__(self, conn: _Conn) -> None:
        super().__init__()
        self.conn = conn

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        conn = self.conn
        left = conn.deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the request did not arrive in time")
        conn.sock.settimeout(left)
        n = conn.sock.recv_into(buffer)
        if n and conn.idle:  # the next request has begun: its head has request_timeout from now
            conn.idle, conn.deadline = False, time.monotonic() + conn.limits.request_timeout
        return n


def _hang_up(sock: socket.socket) -> bool:
    """End a connection from another thread (its blocked read returns at once); False if it was already gone."""
    try:
        socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the plain socket's: an SSLSocket's drops its TLS state
    except OSError:
        return False
    return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    errors = 0
    dropped = 0

    def __init__(
        self,
        address: tuple[str, int],
        render: Callable[[], bytes],
        web: WebConfig,
        tls: ssl.SSLContext | None,
        limits: Limits,
    ) -> None:
        self.address_family = socket.AF_INET6 if ":" in address[0] else socket.AF_INET
        self.render, self.tls, self.limits = render, tls, limits
        self.auth = BasicAuth(web.basic_auth_users, limits.auth_failures, limits.auth_window, limits.auth_clients)
        self.extra_headers = dict(web.http_server_config.headers)
        self.conns: dict[socket.socket, _Conn] = {}
        self.lock = threading.Lock()
        super().__init__(address, _Handler)

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = self.socket.accept()
        try:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # else a kept-alive scrape waits ~40 ms
        except OSError:
            sock.close()
            raise
        if self.tls is not None:
            # The handshake runs in the request's own thread, so a slow client cannot stall accept().
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def process_request(self, request: Any, client_address: Any) -> None:
        """At the cap, drop one connection to make room (:meth:`_victim`); if every one is being answered, refuse."""
        with self.lock:
            if len(self.conns) >= self.limits.max_connections:
                victim = self._victim()
                if victim is not None:
                    del self.conns[victim.sock]
                    self.dropped += _hang_up(victim.sock)
            full = len(self.conns) >= self.limits.max_connections
            if not full:
                self.conns[request] = _Conn(request, self.limits, str(client_address[0]))
        if full:
            self.dropped += 1
            self.shutdown_request(request)
        else:
            super().process_request(request, client_address)

    def _victim(self) -> _Conn | None:
        """The connection to drop for a new one (see the module docstring); None if every one is being answered."""
        conns = list(self.conns.values())
        held = [c for c in conns if c.parked == "held"]
        if held:
            return held[0]
        waiting = [c for c in conns if not c.busy]
        if waiting:
            return min(waiting, key=lambda c: c.since)
        queued = [c for c in conns if c.parked == "queued"]
        if not queued:
            return None
        per_address = Counter(c.client for c in conns)
        return max(queued, key=lambda c: (per_address[c.client], c.since))

    def shutdown_request(self, request: Any) -> None:
        with self.lock:  # taken out before it closes, so _hang_up never reaches a closed (reused) descriptor
            self.conns.pop(request, None)
        super().shutdown_request(request)

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors += 1  # a client that went away or failed the handshake: not the exporter's problem


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server: _Server

    def setup(self) -> None:
        with self.server.lock:
            self.conn = self.server.conns.get(self.request) or _Conn(self.request, self.server.limits)
        if isinstance(self.request, ssl.SSLSocket):
            self.request.settimeout(max(0.001, self.conn.deadline - time.monotonic()))
            self.request.do_handshake()
        super().setup()
        self.rfile.close()
        self.rfile = io.BufferedReader(_DeadlineReader(self.conn))

    def parse_request(self) -> bool:
        ok = super().parse_request()  # reads the headers, within the connection's deadline
        self.conn.busy = True
        self.request.settimeout(self.server.limits.write_timeout)
        return ok

    def handle_one_request(self) -> None:
        super().handle_one_request()
        self.conn.wait_for_next()

    def version_string(self) -> str:
        return f"acceptmon/{__version__}"

    def do_GET(self) -> None:
        self._answer(head=False)

    def do_HEAD(self) -> None:
        self._answer(head=True)

    def _park(self, state: str | None) -> bool:
        """Mark the connection droppable while ``state`` ("queued", "held"), or not (None); False if it was dropped."""
        with self.server.lock:
            if self.server.conns.get(self.request) is not self.conn:
                return False
            self.conn.parked = state
            return True

    def _answer(self, head: bool) -> None:
        path = self.path.split("?", 1)[0]
        status, wait = self.server.auth.check(
            self.headers.get("Authorization"),
            self.client_address[0],
            lambda waiting: self._park("queued" if waiting else None),
        )
        if status == 429:
            if not self._park("held"):
                return
            time.sleep(self.server.limits.auth_delay)  # a guesser waits; a scraper with the password never does
            if not self._park(None):
                return  # dropped meanwhile to make room
            self._send(429, b"Too Many Requests\n", "text/plain", head, {"Retry-After": str(wait)})
        elif status == 401:
            self._send(401, b"Unauthorized\n", "text/plain", head, {"WWW-Authenticate": 'Basic realm="acceptmon"'})
        elif path == "/metrics":
            self._send(200, self.server.render(), CONTENT_TYPE, head)
        elif path == "/":
            page = b'<html><body><h1>acceptmon</h1><p><a href="/metrics">Metrics</a></p></body></html>\n'
            self._send(200, page, "text/html", head)
        else:
            self._send(404, b"Not Found\n", "text/plain", head)

    def _send(self, code: int, body: bytes, ctype: str, head: bool, extra: dict[str, str] | None = None) -> None:
        self.send_response(code)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        for k, v in {**self.server.extra_headers, **(extra or {})}.items():
            self.send_header(k, v)
        self.end_headers()
        if not head:  # HEAD: the same headers as GET, no body
            self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: a scrape every few seconds would flood the exporter's stderr."""


class MetricsServer:
    """Serves ``render()`` at /metrics in background threads."""

    def __init__(
        self,
        render: Callable[[], bytes],
        host: str = "127.0.0.1",
        port: int = 9464,
        *,
        web: WebConfig | None = None,
        tls: ssl.SSLContext | None = None,
        limits: Limits = Limits(),
    ) -> None:
        if not 0 <= port <= 65535:
            raise InputError(f"{host}:{port}", "cannot listen: the port must be 0-65535")
        try:
            self.httpd = _Server((host, port), render, web or WebConfig(), tls, limits)
        except (OSError, OverflowError, ValueError) as exc:
            reason = getattr(exc, "strerror", None) or str(exc)
            raise InputError(f"{host}:{port}", f"cannot listen: {reason}") from None
        self.scheme = "https" if tls else "http"
        self._thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.2}, daemon=True)

    @property
    def address(self) -> tuple[str, int]:
        host, port = self.httpd.server_address[:2]
        return str(host), int(port)

    @property
    def url(self) -> str:
        host, port = self.address
        shown = f"[{host}]" if ":" in host else host
        return f"{self.scheme}://{shown}:{port}/metrics"

    def open_sockets(self) -> list[socket.socket]:
        """The server's end of each open connection (for checks of what the server holds)."""
        with self.httpd.lock:
            return list(self.httpd.conns)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        with self.httpd.lock:  # their threads are blocked in reads; end them now rather than at their deadlines
            for sock in self.httpd.conns:
                _hang_up(sock)
        self.httpd.server_close()

"""The /metrics HTTP(S) endpoint, configured by a Prometheus exporter-toolkit web-config file.

The web-config format is the one node_exporter and every exporter-toolkit
exporter read (``--web.config.file``)::

    tls_server_config:
      cert_file: server.crt        # paths are relative to the config file
      key_file: server.key
      client_ca_file: ca.crt       # optional, with client_auth_type
      client_auth_type: RequireAndVerifyClientCert
      min_version: TLS12
    http_server_config:
      headers: {X-Frame-Options: deny}
    basic_auth_users:
      prometheus: $2y$10$...       # bcrypt hash (htpasswd -nBC 10 "" | tr -d ':\\n')

Unknown keys are an error, as in exporter-toolkit, so a typo never silently turns
TLS or authentication off. Successful password checks are cached (bcrypt is slow
on purpose; a scraper sends the same credentials every time).
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import socket
import ssl
import threading
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, Literal

import bcrypt
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from acceptmon.errors import InputError

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_TLS_VERSIONS = {
    "TLS10": ssl.TLSVersion.TLSv1,
    "TLS11": ssl.TLSVersion.TLSv1_1,
    "TLS12": ssl.TLSVersion.TLSv1_2,
    "TLS13": ssl.TLSVersion.TLSv1_3,
}
ClientAuth = Literal[
    "NoClientCert",
    "RequestClientCert",
    "RequireAnyClientCert",
    "VerifyClientCertIfGiven",
    "RequireAndVerifyClientCert",
]


class TLSServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    cert_file: str
    key_file: str
    client_ca_file: str | None = None
    client_auth_type: ClientAuth = "NoClientCert"
    min_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS12"
    max_version: Literal["TLS10", "TLS11", "TLS12", "TLS13"] = "TLS13"


class HTTPServerConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    http2: bool = True
    """Accepted for compatibility; this server speaks HTTP/1.1."""
    headers: dict[str, str] = {}


class WebConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    tls_server_config: TLSServerConfig | None = None
    http_server_config: HTTPServerConfig = HTTPServerConfig()
    basic_auth_users: dict[str, str] = {}

    @field_validator("basic_auth_users")
    @classmethod
    def _bcrypt_hashes(cls, users: dict[str, str]) -> dict[str, str]:
        for user, hashed in users.items():
            if not (hashed.startswith(("$2a$", "$2b$", "$2y$")) and len(hashed) == 60):
                raise ValueError(f"the password of {user!r} is not a bcrypt hash ($2y$...); plain text is refused")
        return users


def load_web_config(path: Path) -> tuple[WebConfig, ssl.SSLContext | None]:
    """Read and check a web-config file, and build its TLS context; one-line errors name the file."""
    import yaml

    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise InputError(str(path), f"cannot read web config: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise InputError(str(path), f"not valid YAML: {' '.join(str(exc).split())}") from None
    try:
        config = WebConfig.model_validate(data or {})
    except ValidationError as exc:
        err = exc.errors()[0]
        key = ".".join(str(p) for p in err["loc"]) or "-"
        raise InputError(str(path), f"{key}: {err['msg'].removeprefix('Value error, ')}") from None
    return config, _tls_context(config, path)


def _tls_context(config: WebConfig, path: Path) -> ssl.SSLContext | None:
    tls = config.tls_server_config
    if tls is None:
        return None
    base = path.parent

    def resolve(p: str) -> str:
        return str((base / p) if not Path(p).is_absolute() else Path(p))

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.minimum_version = _TLS_VERSIONS[tls.min_version]
    ctx.maximum_version = _TLS_VERSIONS[tls.max_version]
    try:
        ctx.load_cert_chain(resolve(tls.cert_file), resolve(tls.key_file))
    except (OSError, ssl.SSLError) as exc:
        raise InputError(str(path), f"tls_server_config: cannot load cert_file/key_file: {exc}") from None
    if tls.client_auth_type != "NoClientCert":
        if tls.client_ca_file is None and "Verify" in tls.client_auth_type:
            raise InputError(str(path), f"tls_server_config: {tls.client_auth_type} needs client_ca_file")
        if tls.client_ca_file is not None:
            try:
                ctx.load_verify_locations(resolve(tls.client_ca_file))
            except (OSError, ssl.SSLError) as exc:
                raise InputError(str(path), f"tls_server_config: cannot load client_ca_file: {exc}") from None
        required = tls.client_auth_type in ("RequireAnyClientCert", "RequireAndVerifyClientCert")
        ctx.verify_mode = ssl.CERT_REQUIRED if required else ssl.CERT_OPTIONAL
    return ctx


class _Auth:
    """Basic-auth check against bcrypt hashes, caching successes."""

    def __init__(self, users: dict[str, str]) -> None:
        self.users = {u: h.encode() for u, h in users.items()}
        self._ok: set[bytes] = set()
        self._lock = threading.Lock()

    def check(self, header: str | None) -> bool:
        if not self.users:
            return True
        if not header or not header.startswith("Basic "):
            return False
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return False
        hashed = self.users.get(user)
        if hashed is None:
            return False
        key = hashlib.sha256(hashed + b"\0" + password.encode()).digest()
        with self._lock:
            if any(hmac.compare_digest(key, k) for k in self._ok):
                return True
        if not bcrypt.checkpw(password.encode(), hashed):
            return False
        with self._lock:
            if len(self._ok) > 64:
                self._ok.clear()
            self._ok.add(key)
        return True


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    allow_reuse_address = True
    request_queue_size = 128
    tls: ssl.SSLContext | None = None
    errors = 0

    def get_request(self) -> tuple[Any, Any]:
        sock, addr = self.socket.accept()
        if self.tls is not None:
            # The handshake runs in the request's own thread, so a slow client cannot stall accept().
            sock = self.tls.wrap_socket(sock, server_side=True, do_handshake_on_connect=False)
        return sock, addr

    def handle_error(self, request: Any, client_address: Any) -> None:
        self.errors += 1  # a client that went away or failed the handshake: not the exporter's problem


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
    ) -> None:
        web = web or WebConfig()
        auth = _Auth(web.basic_auth_users)
        headers = dict(web.http_server_config.headers)

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            server_version = "acceptmon"

            def setup(self) -> None:
                self.request.settimeout(30)
                if isinstance(self.request, ssl.SSLSocket):
                    self.request.do_handshake()
                super().setup()

            def do_GET(self) -> None:
                path = self.path.split("?", 1)[0]
                if not auth.check(self.headers.get("Authorization")):
                    self._send(401, b"Unauthorized\n", "text/plain", {"WWW-Authenticate": 'Basic realm="acceptmon"'})
                elif path == "/metrics":
                    self._send(200, render(), CONTENT_TYPE)
                elif path == "/":
                    page = b'<html><body><h1>acceptmon</h1><p><a href="/metrics">Metrics</a></p></body></html>\n'
                    self._send(200, page, "text/html")
                else:
                    self._send(404, b"Not Found\n", "text/plain")

            def _send(self, code: int, body: bytes, ctype: str, extra: dict[str, str] | None = None) -> None:
                self.send_response(code)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(body)))
                for k, v in {**headers, **(extra or {})}.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                """No access log: a scrape every few seconds would flood the exporter's stderr."""

        server_cls = type("_Server", (_Server,), {"address_family": socket.AF_INET6 if ":" in host else socket.AF_INET})
        try:
            self.httpd = server_cls((host, port), Handler)
        except OSError as exc:
            raise InputError(f"{host}:{port}", f"cannot listen: {exc.strerror or exc}") from None
        self.httpd.tls = tls
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

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()

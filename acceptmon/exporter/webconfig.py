"""The Prometheus exporter-toolkit web-config file: the /metrics endpoint's TLS context and basic-auth check.

The format is the one node_exporter and every exporter-toolkit exporter read
(``--web.config.file``)::

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
TLS or authentication off. Successful password checks are cached (bcrypt is slow on
purpose; a scraper sends the same credentials every time). An unknown user costs the
same bcrypt check as a known one, so answers do not tell which users exist; failed
checks are rate-limited per client address, so guessing cannot take the CPU.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import math
import secrets
import ssl
import threading
import time
from collections import OrderedDict
from pathlib import Path
from typing import Any, Literal

import bcrypt
from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from acceptmon.errors import InputError

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
            cost = hashed[4:6]
            cost_ok = cost.isascii() and cost.isdigit() and 4 <= int(cost) <= 31
            if not (hashed.startswith(("$2a$", "$2b$", "$2y$")) and len(hashed) == 60 and cost_ok):
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


class BasicAuth:
    """Basic-auth check against bcrypt hashes, caching successes and rate-limiting failures per address."""

    def __init__(self, users: dict[str, str], failures: int = 5, window: float = 10.0, clients: int = 1024) -> None:
        self.users = {u: h.encode() for u, h in users.items()}
        cost = max((int(h[4:6]) for h in users.values()), default=4)
        self._dummy = bcrypt.hashpw(secrets.token_hex(16).encode(), bcrypt.gensalt(cost)) if users else b""
        self._ok: set[bytes] = set()
        self._failed: OrderedDict[str, list[float]] = OrderedDict()
        self.failures, self.window, self.clients = failures, window, clients
        self._lock = threading.Lock()

    def check(self, header: str | None, client: str) -> tuple[int, int]:
        """(200, 0) to serve, (401, 0) to ask for credentials, (429, seconds) when ``client`` must wait."""
        if not self.users:
            return 200, 0
        if not header or not header.startswith("Basic "):
            return 401, 0
        try:
            user, _, password = base64.b64decode(header[6:], validate=True).decode().partition(":")
        except (ValueError, UnicodeDecodeError):
            return 401, 0
        hashed = self.users.get(user)
        key = hashlib.sha256((hashed or self._dummy) + b"\0" + password.encode()).digest()
        with self._lock:
            if hashed is not None and any(hmac.compare_digest(key, k) for k in self._ok):
                return 200, 0
            wait = self._attempt(client)
        if wait:
            return 429, wait
        try:
            ok = bcrypt.checkpw(password.encode(), hashed or self._dummy) and hashed is not None
        except ValueError:  # longer than bcrypt's 72 bytes: it cannot be the password
            ok = False
        if not ok:
            return 401, 0
        with self._lock:
            if times := self._failed.get(client):
                times.pop()  # this attempt succeeded
            if len(self._ok) > 64:
                self._ok.clear()
            self._ok.add(key)
        return 200, 0

    def _attempt(self, client: str) -> int:
        """Count an attempt before running bcrypt (so a burst cannot outrun the limit); seconds to wait if over it."""
        now = time.monotonic()
        times = [t for t in self._failed.pop(client, []) if now - t < self.window]
        if len(times) >= self.failures:
            self._failed[client] = times
            return max(1, math.ceil(times[0] + self.window - now))
        self._failed[client] = [*times, now]
        while len(self._failed) > self.clients:
            self._failed.popitem(last=False)
        return 0

    def tracked_clients(self) -> int:
        return len(self._failed)

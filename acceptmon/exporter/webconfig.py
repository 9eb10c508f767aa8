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
same bcrypt check as a known one, so answers do not tell which users exist.

Right credentials are never refused, however many wrong ones come from the same address
(behind NAT or a proxy, that is Prometheus's address too). Guessing is slowed instead:
every guess costs the hash's full time, an address has one check running at a time, and
the addresses past the limit of failures share one more, so guessing takes a core at most
beyond each address's first few failures; those past the limit are answered 429 (and the
server holds each of those answers a while, see :mod:`acceptmon.exporter.http`).
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
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass, field
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


@dataclass
class _Address:
    """What is kept per client address: its turn to have a password checked, and its latest failures."""

    failed: deque[float]
    turn: threading.Lock = field(default_factory=threading.Lock)


Waiting = Callable[[bool], bool]
"""Told True while a check waits for a turn, False once it has one; returns False if the connection is gone."""


class BasicAuth:
    """Basic-auth check against bcrypt hashes: successes cached, checks taken in turns, failures counted.

    An address has one check running at a time; the addresses past the limit (``failures``
    failures in the last ``window`` seconds) share one more turn, so guessing from any number
    of them takes one core. Right credentials are served whatever the count.
    """

    def __init__(self, users: dict[str, str], failures: int = 5, window: float = 10.0, clients: int = 1024) -> None:
        self.users = {u: h.encode() for u, h in users.items()}
        cost = max((int(h[4:6]) for h in users.values()), default=4)
        self._dummy = bcrypt.hashpw(secrets.token_hex(16).encode(), bcrypt.gensalt(cost)) if users else b""
        self._ok: set[bytes] = set()
        self._addresses: OrderedDict[str, _Address] = OrderedDict()
        self._past_turn = threading.Lock()
        self.failures, self.window, self.clients = max(1, failures), window, clients
        self._lock = threading.Lock()

    def check(self, header: str | None, client: str, waiting: Waiting = lambda _waiting: True) -> tuple[int, int]:
        """(200, 0) to serve, (401, 0) to ask for credentials, (429, seconds) for a failure past the limit.

        The seconds say when ``client`` is no longer past it. ``waiting`` hears when the check
        waits for its turn (:data:`Waiting`); if the connection is gone, no check runs.
        """
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
            address = self._address(client)
        if not _take(address.turn, waiting):
            return 401, 0  # nobody is listening for the answer
        try:
            if not self._past(address, time.monotonic()):
                return self._verify(key, password, hashed, address, waiting)
            if not _take(self._past_turn, waiting):
                return 401, 0
            try:
                return self._verify(key, password, hashed, address, waiting)
            finally:
                self._past_turn.release()
        finally:
            address.turn.release()

    def _address(self, client: str) -> _Address:
        """The client's entry, most recently seen last; the least recently seen is forgotten past ``clients``."""
        address = self._addresses.pop(client, None) or _Address(deque(maxlen=self.failures))
        self._addresses[client] = address
        while len(self._addresses) > self.clients:
            self._addresses.popitem(last=False)
        return address

    def _past(self, address: _Address, now: float) -> bool:
        return len(address.failed) == self.failures and now - address.failed[0] < self.window

    def _verify(
        self, key: bytes, password: str, hashed: bytes | None, address: _Address, waiting: Waiting
    ) -> tuple[int, int]:
        """Run bcrypt (the address's turn is held); cache a success, count a failure."""
        if not waiting(False):
            return 401, 0
        try:
            ok = bcrypt.checkpw(password.encode(), hashed or self._dummy) and hashed is not None
        except ValueError:  # longer than bcrypt's 72 bytes: it cannot be the password
            ok = False
        if ok:
            with self._lock:
                if len(self._ok) > 64:
                    self._ok.clear()
                self._ok.add(key)
            return 200, 0
        now = time.monotonic()
        past = self._past(address, now)
        address.failed.append(now)
        return (429, max(1, math.ceil(address.failed[0] + self.window - now))) if past else (401, 0)

    def tracked_clients(self) -> int:
        return len(self._addresses)


def _take(turn: threading.Lock, waiting: Waiting) -> bool:
    """Acquire ``turn``, waiting as long as the connection is there; False once it is gone."""
    if turn.acquire(blocking=False):
        return True
    while waiting(True):
        if turn.acquire(timeout=0.05):
            return True
    return False

"""The /metrics server under bad ports, password guessing, slow or idle clients, keep-alive and HEAD."""

from __future__ import annotations

import base64
import http.client
import select
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import bcrypt
import pytest

from acceptmon import __version__
from acceptmon.errors import InputError
from acceptmon.exporter.http import HTTPServerConfig, Limits, MetricsServer, WebConfig
from acceptmon.exporter.webconfig import BasicAuth
from tests.serving import wait_for

PAGE = b"acceptmon_up 1\n"


@contextmanager
def serving(render: Callable[[], bytes] = lambda: PAGE, **kw: object) -> Iterator[MetricsServer]:
    server = MetricsServer(render, "127.0.0.1", 0, **kw)  # type: ignore[arg-type]
    server.start()
    try:
        yield server
    finally:
        server.stop()


def request(
    server: MetricsServer, path: str = "/metrics", headers: dict[str, str] | None = None, method: str = "GET"
) -> tuple[int, dict[str, str], bytes]:
    conn = http.client.HTTPConnection(*server.address, timeout=10)
    try:
        conn.request(method, path, headers=headers or {})
        resp = conn.getresponse()
        return resp.status, dict(resp.getheaders()), resp.read()
    finally:
        conn.close()


def basic(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def users(cost: int = 5) -> WebConfig:
    return WebConfig(basic_auth_users={"prometheus": bcrypt.hashpw(b"s3cret", bcrypt.gensalt(cost)).decode()})


def hung_up(sock: socket.socket) -> bool:
    """Whether the server has closed this connection (looked at without waiting)."""
    poll = select.poll()
    poll.register(sock, select.POLLIN)
    if not poll.poll(0):
        return False
    try:
        return sock.recv(1, socket.MSG_PEEK) == b""
    except ConnectionResetError:
        return True


@pytest.fixture
def checks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The hashes bcrypt.checkpw is run against, in order."""
    seen: list[bytes] = []
    real = bcrypt.checkpw

    def spy(password: bytes, hashed: bytes) -> bool:
        seen.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", spy)  # the one module every caller reaches it through
    return seen


# -- ports ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("port", [99999, -1, 65536])
def test_port_out_of_range_is_one_line_error(port: int) -> None:
    with pytest.raises(InputError) as err:
        MetricsServer(lambda: PAGE, "127.0.0.1", port)
    assert str(err.value) == f"127.0.0.1:{port}: cannot listen: the port must be 0-65535"


def test_port_in_use_names_host_and_port() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        with pytest.raises(InputError) as err:
            MetricsServer(lambda: PAGE, "127.0.0.1", port)
    assert str(err.value) == f"127.0.0.1:{port}: cannot listen: Address already in use"


@pytest.mark.integration
def test_serve_with_port_out_of_range_prints_one_line(tmp_path) -> None:
    cmd = [sys.executable, "-m", "acceptmon", "serve", str(tmp_path / "s.log"), "--port", "99999"]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=30)
    assert r.returncode == 2
    assert r.stderr.strip().splitlines() == [
        "acceptmon: error: 127.0.0.1:99999: cannot listen: the port must be 0-65535"
    ]


# -- basic auth ----------------------------------------------------------------------------------------


def test_unknown_user_costs_the_same_bcrypt_check_as_a_known_one(checks: list[bytes]) -> None:
    web = users(cost=5)
    with serving(web=web) as server:
        assert request(server, headers=basic("nobody", "s3cret"))[0] == 401
        assert request(server, headers=basic("prometheus", "wrong"))[0] == 401
    assert len(checks) == 2
    assert checks[0] != web.basic_auth_users["prometheus"].encode()
    assert checks[0][:7] == b"$2b$05$" and checks[1][4:7] == b"05$"


def test_failures_past_the_limit_are_429_held_a_while_and_the_right_password_is_still_200(checks: list[bytes]) -> None:
    with serving(web=users(), limits=Limits(auth_failures=5, auth_window=30.0, auth_delay=0.5)) as server:
        assert [request(server, headers=basic("prometheus", f"guess{i}"))[0] for i in range(5)] == [401] * 5
        for user in ("prometheus", "nobody"):
            start = time.monotonic()
            status, headers, body = request(server, headers=basic(user, "guess"))
            assert (status, body) == (429, b"Too Many Requests\n")
            assert 1 <= int(headers["Retry-After"]) <= 30
            assert time.monotonic() - start >= 0.5  # held: a guesser waits
        assert request(server, headers=basic("prometheus", "guess"), method="HEAD")[::2] == (429, b"")
        assert len(checks) == 8  # every guess costs its bcrypt check
        start = time.monotonic()
        assert request(server, headers=basic("prometheus", "s3cret"))[::2] == (200, PAGE)  # never refused
        assert time.monotonic() - start < 0.5  # and never held
        assert len(checks) == 9
        assert request(server, headers=basic("prometheus", "s3cret"))[::2] == (200, PAGE)  # cached success
        assert request(server)[0] == 401  # no credentials: nothing to guess, no bcrypt
    assert len(checks) == 9


def test_the_limit_lifts_when_the_oldest_failure_leaves_the_window(checks: list[bytes]) -> None:
    with serving(web=users(cost=4), limits=Limits(auth_failures=2, auth_window=2.0, auth_delay=0.1)) as server:
        assert request(server, headers=basic("prometheus", "x"))[0] == 401
        first = time.monotonic()  # the oldest failure was counted by now (before its answer, which may come late)
        assert [request(server, headers=basic("prometheus", "x"))[0] for _ in range(2)] == [401, 429]
        time.sleep(max(0.0, first + 2.3 - time.monotonic()))
        assert request(server, headers=basic("prometheus", "x"))[0] == 401
    assert len(checks) == 4


@pytest.fixture
def running(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """The most bcrypt checks that ran at once, as one number in a list."""
    most, now, lock = [0], [0], threading.Lock()
    real = bcrypt.checkpw

    def spy(password: bytes, hashed: bytes) -> bool:
        with lock:
            now[0] += 1
            most[0] = max(most[0], now[0])
        try:
            return real(password, hashed)
        finally:
            with lock:
                now[0] -= 1

    monkeypatch.setattr(bcrypt, "checkpw", spy)
    return most


def test_a_burst_of_guesses_from_one_address_runs_one_bcrypt_at_a_time(running: list[int]) -> None:
    statuses: list[int] = []
    with serving(web=users(cost=6), limits=Limits(auth_failures=5, auth_window=30.0, auth_delay=0.0)) as server:
        start = threading.Barrier(20)

        def guess() -> None:
            start.wait()
            statuses.append(request(server, headers=basic("prometheus", "wrong"))[0])

        threads = [threading.Thread(target=guess) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert sorted(statuses) == [401] * 5 + [429] * 15
    assert running == [1]


def test_addresses_past_the_limit_share_one_turn(running: list[int]) -> None:
    auth = BasicAuth(users(cost=6).basic_auth_users, failures=2, window=60.0)
    wrong = basic("prometheus", "wrong")["Authorization"]
    clients = [f"10.0.0.{i}" for i in range(8)]
    for client in clients:  # each one's own failures first, one at a time
        assert [auth.check(wrong, client)[0] for _ in range(2)] == [401, 401]
    results: list[int] = []
    start = threading.Barrier(16)

    def guess(client: str) -> None:
        start.wait()
        results.append(auth.check(wrong, client)[0])

    threads = [threading.Thread(target=guess, args=(c,)) for c in clients * 2]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert results == [429] * 16 and running == [1]
    assert auth.check(basic("prometheus", "s3cret")["Authorization"], clients[0]) == (200, 0)


def test_held_failures_are_dropped_first_to_make_room_for_a_scrape() -> None:
    with serving(web=users(cost=4), limits=Limits(max_connections=4, auth_failures=1, auth_delay=10.0)) as server:
        assert request(server, headers=basic("prometheus", "x"))[0] == 401
        # its connection let go by the server too: until the server reads the client's close it holds one of the
        # 4 places, and a busy machine let a held guesser be dropped for the 4th (3 held, never 4)
        assert wait_for(lambda: not server.open_sockets()), server.open_sockets()
        guessers = []
        for _ in range(4):  # every connection holds a failure past the limit
            s = socket.create_connection(server.address, timeout=5)
            s.sendall(
                b"GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: "
                + basic("prometheus", "y")["Authorization"].encode()
                + b"\r\n\r\n"
            )
            guessers.append(s)

        def held() -> int:
            return sum(c.parked == "held" for c in list(server.httpd.conns.values()))  # a copy: threads change it

        try:
            assert wait_for(lambda: held() == 4), f"4 held failures awaited, {held()} held"
            start = time.monotonic()
            assert request(server, headers=basic("prometheus", "s3cret"))[::2] == (200, PAGE)
            assert time.monotonic() - start < 5
            assert sum(map(hung_up, guessers)) == 1  # the one dropped to make room
        finally:
            for s in guessers:
                s.close()


def test_failures_are_remembered_for_a_bounded_number_of_addresses() -> None:
    auth = BasicAuth(users(cost=4).basic_auth_users, clients=8)
    header = basic("prometheus", "wrong")["Authorization"]
    assert [auth.check(header, f"10.0.0.{i}") for i in range(30)] == [(401, 0)] * 30
    assert auth.tracked_clients() == 8


def test_bcrypt_cost_out_of_range_is_refused() -> None:
    with pytest.raises(ValueError, match="is not a bcrypt hash"):
        WebConfig(basic_auth_users={"p": "$2y$1x$" + "a" * 53})


# -- slow clients ----------------------------------------------------------------------------------------


def test_a_flood_of_slow_connections_does_not_keep_scrapes_out() -> None:
    slow: list[socket.socket] = []
    with serving(limits=Limits(request_timeout=60.0)) as server:  # only the cap frees slots here
        try:
            for _ in range(150):
                s = socket.create_connection(server.address, timeout=5)
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")  # the head never ends
                slow.append(s)
            assert wait_for(lambda: sum(map(hung_up, slow)) >= 150 - 64), "connections beyond the cap stay open"
            assert len(server.open_sockets()) == 64
            for _ in range(3):
                assert request(server)[::2] == (200, PAGE)
            assert 150 - 64 <= sum(map(hung_up, slow)) <= 150 - 64 + 3  # each scrape displaces one at most
        finally:
            for s in slow:
                s.close()


def test_when_every_connection_is_being_answered_a_new_one_is_closed_at_once() -> None:
    release, rendering = threading.Event(), []

    def slow_render() -> bytes:
        rendering.append(1)
        release.wait(20)
        return PAGE

    results: list[tuple[int, dict[str, str], bytes]] = []
    with serving(slow_render, limits=Limits(max_connections=4)) as server:
        busy = [threading.Thread(target=lambda: results.append(request(server))) for _ in range(4)]
        for t in busy:
            t.start()
        assert wait_for(lambda: len(rendering) == 4)  # every connection is being answered
        with socket.create_connection(server.address, timeout=5) as extra:
            assert wait_for(lambda: hung_up(extra), timeout=15), "the connection past the cap closed"  # < release
        release.set()
        for t in busy:
            t.join(20)
    assert [r[::2] for r in results] == [(200, PAGE)] * 4


@pytest.mark.parametrize("trickle", [b"", b"X"])
def test_a_client_that_does_not_finish_its_request_head_is_dropped_at_the_deadline(trickle: bytes) -> None:
    with serving(limits=Limits(request_timeout=1.0)) as server:
        with socket.create_connection(server.address, timeout=5) as s:
            start = time.monotonic()
            s.sendall(b"GET /metrics HTTP/1.1\r\n")
            closed_after = None
            deadline = start + 30  # generous: a busy machine may check the 1 s deadline late
            while time.monotonic() < deadline:  # a byte every 0.1 s (or nothing)
                time.sleep(0.1)
                try:
                    s.sendall(trickle)
                except OSError:
                    closed_after = time.monotonic() - start
                    break
                if hung_up(s):
                    closed_after = time.monotonic() - start
                    break
        assert closed_after is not None, "still open after 30 s"
        assert closed_after >= 0.9
        assert request(server)[::2] == (200, PAGE)


def test_a_kept_alive_connection_may_idle_longer_than_the_request_deadline() -> None:
    with serving(limits=Limits(request_timeout=0.5)) as server:
        conn = http.client.HTTPConnection(*server.address, timeout=5)
        try:
            for pause in (0.0, 1.0):
                time.sleep(pause)
                conn.request("GET", "/metrics")
                resp = conn.getresponse()
                assert (resp.status, resp.read()) == (200, PAGE)
        finally:
            conn.close()


# -- keep-alive, headers, HEAD ---------------------------------------------------------------------------------


def test_accepted_sockets_have_nagle_off() -> None:
    with serving() as server:
        conn = http.client.HTTPConnection(*server.address, timeout=5)
        try:
            conn.request("GET", "/metrics")
            assert conn.getresponse().read() == PAGE
            [sock] = server.open_sockets()
            assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
        finally:
            conn.close()


@pytest.mark.parametrize("path", ["/metrics", "/"])
def test_head_has_the_headers_of_get_and_no_body(path: str) -> None:
    web = WebConfig(http_server_config=HTTPServerConfig(headers={"X-Frame-Options": "deny"}))
    with serving(web=web) as server:
        get_status, get_headers, get_body = request(server, path)
        head_status, head_headers, head_body = request(server, path, method="HEAD")
    assert (get_status, head_status) == (200, 200)
    assert get_body and head_body == b""
    for key in ("Content-Type", "Content-Length", "X-Frame-Options"):
        assert head_headers[key] == get_headers[key]
    assert int(head_headers["Content-Length"]) == len(get_body)


def test_server_header_names_acceptmon_only() -> None:
    with serving(web=users(cost=4)) as server:
        for method in ("GET", "HEAD"):
            status, headers, body = request(server, method=method)
            assert (status, headers["Server"]) == (401, f"acceptmon/{__version__}")
            assert headers["WWW-Authenticate"] == 'Basic realm="acceptmon"'
            assert body == (b"Unauthorized\n" if method == "GET" else b"")

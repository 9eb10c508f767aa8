"""Benchmarks of the /metrics HTTP server (figures for its latency and robustness goals).

1. Kept-alive scrape latency: N GETs on one connection, p50/p99, with TCP_NODELAY on the
   server's socket (as served) and, for comparison, with it turned back off.
2. Basic-auth timing: a known user with a wrong password against an unknown user (bcrypt
   cost 10); the two should take the same time, so usernames cannot be told apart.
3. Scrape latency while slow clients hold sockets open (a request head that never ends).

    python benchmarks/bench_http.py [--requests 200] [--slow 300]
"""

from __future__ import annotations

import argparse
import base64
import http.client
import socket
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import bcrypt

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from acceptmon.exporter.http import MetricsServer, WebConfig

PAGE = b"".join(b'acceptmon_decode_batches_total{file="/var/log/s%d.log"} 1234\n' % i for i in range(300))


def ms(samples: list[float]) -> str:
    ordered = sorted(samples)
    p99 = ordered[min(len(ordered) - 1, int(len(ordered) * 0.99))]
    return f"p50 {statistics.median(ordered) * 1e3:7.2f} ms   p99 {p99 * 1e3:7.2f} ms"


def timed(conn: http.client.HTTPConnection, headers: dict[str, str] | None = None) -> tuple[float, int]:
    start = time.perf_counter()
    conn.request("GET", "/metrics", headers=headers or {})
    resp = conn.getresponse()
    resp.read()
    return time.perf_counter() - start, resp.status


def keepalive(requests: int) -> None:
    server = MetricsServer(lambda: PAGE, "127.0.0.1", 0)
    server.start()
    try:
        for nodelay in (1, 0):
            conn = http.client.HTTPConnection(*server.address, timeout=10)
            timed(conn)
            for sock in server.open_sockets():
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, nodelay)
            samples = [timed(conn)[0] for _ in range(requests)]
            conn.close()
            print(f"kept-alive scrape, TCP_NODELAY={nodelay}:   {ms(samples)}")
    finally:
        server.stop()


def auth_timing(requests: int) -> None:
    hashed = bcrypt.hashpw(b"s3cret", bcrypt.gensalt(10)).decode()
    server = MetricsServer(lambda: PAGE, "127.0.0.1", 0, web=WebConfig(basic_auth_users={"prometheus": hashed}))
    server.start()
    try:
        for user in ("prometheus", "nobody"):
            token = base64.b64encode(f"{user}:wrong".encode()).decode()
            samples = []
            for _ in range(min(requests, 5)):  # 5 failures: the per-address limit
                conn = http.client.HTTPConnection(*server.address, timeout=10)
                samples.append(timed(conn, {"Authorization": f"Basic {token}"})[0])
                conn.close()
            print(f"wrong password, user {user!r:12}   {ms(samples)}")
            time.sleep(10.5)  # let the rate limit's window pass before the next user
    finally:
        server.stop()


def under_slow_clients(slow: int, requests: int) -> None:
    server = MetricsServer(lambda: PAGE, "127.0.0.1", 0)
    server.start()
    held: list[socket.socket] = []
    try:
        for _ in range(slow):
            s = socket.create_connection(server.address, timeout=5)
            s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
            held.append(s)
        samples, failed = [], 0
        for _ in range(requests):
            conn = http.client.HTTPConnection(*server.address, timeout=10)
            try:
                samples.append(timed(conn)[0])
            except OSError:
                failed += 1
            conn.close()
        print(f"scrape with {slow} slow sockets open:  {ms(samples)}   failed {failed}/{requests}")
    finally:
        for s in held:
            s.close()
        server.stop()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--slow", type=int, default=300)
    args = ap.parse_args()
    steps: list[Callable[[], None]] = [
        lambda: keepalive(args.requests),
        lambda: auth_timing(args.requests),
        lambda: under_slow_clients(args.slow, min(args.requests, 50)),
    ]
    for step in steps:
        step()


if __name__ == "__main__":
    main()

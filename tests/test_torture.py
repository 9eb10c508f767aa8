"""Reliability of `acceptmon serve` under a busy writer: rotation torture, scrapers, hostile input.

The writer runs at about 5,000 lines/s. After each phase the exporter's
``acceptmon_decode_batches_total`` must equal the number of decode lines written,
exactly: nothing lost through rotation, nothing counted twice.
"""

from __future__ import annotations

import os
import random
import threading
import time
from pathlib import Path

import pytest

from tests.serving import Serve, decode_line, launch_line, value, wait_for

pytestmark = pytest.mark.integration
RATE = 5000  # lines per second


class Writer:
    """Appends decode lines at RATE lines/s to whatever file `path` currently names."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.written = 0
        self.f = path.open("a")
        self.lock = threading.Lock()

    def burst(self, seconds: float) -> None:
        batch = RATE // 100
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            with self.lock:
                self.f.write("".join(decode_line(self.written + i, acc=2.5) + "\n" for i in range(batch)))
                self.f.flush()
                self.written += batch
            time.sleep(0.01)

    def reopen(self) -> None:
        with self.lock:
            self.f.close()
            self.f = self.path.open("a")


def settled(serve: Serve, expected: int, timeout: float = 45.0) -> float | None:
    """The decode count once it equals ``expected`` (and stays so), or the last count seen."""
    wait_for(lambda: value(serve.metrics(), "acceptmon_decode_batches_total") == expected, timeout=timeout)
    time.sleep(0.3)  # nothing more may arrive: no double counting
    return value(serve.metrics(), "acceptmon_decode_batches_total")


@pytest.mark.parametrize("mode", ["inotify", "poll", "glob"])
def test_rotation_torture(tmp_path, mode):
    log = tmp_path / "server.log"
    log.write_text(launch_line() + "\n")
    args = [str(tmp_path / "*.log") if mode == "glob" else str(log)] + (["--poll"] if mode == "poll" else [])
    serve = Serve(*args)
    w = Writer(log)
    try:
        serve.wait_listening()
        w.burst(1.0)
        assert settled(serve, w.written) == w.written, "steady append"

        w.burst(0.3)
        os.rename(log, tmp_path / "server.log.1")  # rename + create
        w.burst(0.2)  # the writer still holds the old file for a moment, as loggers do
        w.reopen()
        w.burst(0.7)
        assert settled(serve, w.written) == w.written, "rename + create"

        w.burst(0.3)
        log.unlink()  # delete + recreate
        w.reopen()
        w.burst(0.7)
        assert settled(serve, w.written) == w.written, "delete + recreate"

        # copytruncate: lines written after the follower's last read and before the
        # truncation are gone for any reader (logrotate's own caveat), so the writer
        # pauses until they were read, as its copy step would take a moment.
        w.burst(0.5)
        assert settled(serve, w.written) == w.written
        with open(log, "r+") as f:
            f.truncate(0)
        w.burst(1.0)  # the writer's O_APPEND handle goes on from offset 0
        assert settled(serve, w.written) == w.written, "copytruncate"

        with w.lock:
            line = decode_line(w.written, acc=2.5)
            w.f.write(line[:50])  # a partial line is held until its newline
            w.f.flush()
        time.sleep(0.5)
        assert value(serve.metrics(), "acceptmon_decode_batches_total") == w.written
        with w.lock:
            w.f.write(line[50:] + "\n")
            w.f.flush()
            w.written += 1
        assert settled(serve, w.written) == w.written, "held partial line"
    finally:
        w.f.close()
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr


def _rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def test_hostile_input_and_deleted_file(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(launch_line() + "\n")
    serve = Serve(str(log))
    try:
        serve.wait_listening()
        rng = random.Random(7)
        with log.open("ab") as f:
            f.write(decode_line(0).encode() + b"\n")
            f.write(b"x" * (10 << 20) + b"\n")  # a 10 MB line
            f.write(bytes(rng.randrange(256) for _ in range(1 << 20)).replace(b"\n", b" ") + b"\n")
            f.write(b"[2026-02-26 14:09:45 TP0] Decode batch, #running-req: \xff\xfe, accept len: \xc3\n")
            f.write(decode_line(1, acc=1.5).encode() + b"\n")
        assert settled(serve, 2) == 2
        m = serve.metrics()
        assert value(m, "acceptmon_accept_length") == 1.5
        assert value(m, "acceptmon_lines_total", kind="oversized") == 1
        assert value(m, "acceptmon_lines_total", kind="unrecognized") == 1
        rss = _rss_mib(serve.proc.pid)
        assert rss < 100, f"RSS {rss:.0f} MiB after a 10 MB line"
        log.unlink()  # deleted under it: keeps serving what it has, waits for a new file
        time.sleep(0.5)
        assert value(serve.metrics(), "acceptmon_decode_batches_total") == 2
        log.write_text(decode_line(2) + "\n")
        assert settled(serve, 3) == 3
    finally:
        assert serve.stop() == 0
    assert "Traceback" not in serve.stderr


def scrape_load(port: int, scrapers: int, scrapes: int) -> tuple[int, list[float]]:
    """`scrapers` threads, each with its own keep-alive connection, `scrapes` GETs each."""
    import http.client

    errors, latencies = [0], []
    lock = threading.Lock()

    def one() -> None:
        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
        mine = []
        for _ in range(scrapes):
            t = time.perf_counter()
            try:
                conn.request("GET", "/metrics")
                resp = conn.getresponse()
                body = resp.read()
                ok = resp.status == 200 and b"acceptmon_decode_batches_total" in body
            except OSError:
                ok = False
                conn.close()
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
            mine.append(time.perf_counter() - t)
            if not ok:
                with lock:
                    errors[0] += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=one) for _ in range(scrapers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return errors[0], latencies


def test_concurrent_scrapers_while_following(tmp_path):
    log = tmp_path / "server.log"
    log.write_text(launch_line() + "\n")
    serve = Serve(str(log))
    w = Writer(log)
    stop = threading.Event()

    def keep_writing() -> None:
        while not stop.is_set():
            w.burst(0.1)

    writer = threading.Thread(target=keep_writing)
    try:
        serve.wait_listening()
        writer.start()
        started = time.monotonic()
        errors, latencies = scrape_load(serve.port, 50, 2000)
        elapsed = time.monotonic() - started
        stop.set()
        writer.join()
        assert errors == 0
        assert len(latencies) == 100_000
        latencies.sort()
        p99 = latencies[int(len(latencies) * 0.99)]
        print(f"\n50 scrapers x 2,000 scrapes in {elapsed:.1f} s while following {w.written:,} lines: "
              f"p50 {latencies[len(latencies) // 2] * 1e3:.1f} ms, p99 {p99 * 1e3:.1f} ms")  # fmt: skip
        assert settled(serve, w.written) == w.written
    finally:
        stop.set()
        w.f.close()
        assert serve.stop() == 0

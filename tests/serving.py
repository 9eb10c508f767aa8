"""Helpers for tests that run `acceptmon serve` as a real process and scrape it."""

from __future__ import annotations

import base64
import os
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections import defaultdict
from collections.abc import Callable, Sequence
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from acceptmon.parse.parser import Parser, Tally
from acceptmon.parse.records import Record

LAUNCH = (
    "[{ts}] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', tp_size=1, dp_size=1, "
    "speculative_algorithm='{algo}', speculative_draft_model_path='d/e3', speculative_num_steps={steps}, "
    "speculative_eagle_topk=1, speculative_num_draft_tokens={tokens}, speculative_accept_threshold_single=1.0)"
)
DECODE = (
    "[{ts} {rank}] Decode batch, #running-req: {running}, #token: 4521, token usage: 0.02, accept len: {acc:.2f}, "
    "accept rate: 0.47, cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: {queued}"
)


def launch_line(ts: str = "2026-02-26 14:00:00", algo: str = "EAGLE3", steps: int = 3, tokens: int = 4) -> str:
    return LAUNCH.format(ts=ts, algo=algo, steps=steps, tokens=tokens)


def decode_line(
    i: int = 0,
    *,
    rank: str = "TP0",
    acc: float = 2.85,
    tput: float = 94.12,
    running: int = 3,
    queued: int = 0,
    ts: str | None = None,
) -> str:
    ts = ts or f"2026-02-26 14:{(i // 60) % 60:02d}:{i % 60:02d}"
    return DECODE.format(ts=ts, rank=rank, acc=acc, tput=tput, running=running, queued=queued)


class Clock:
    """A settable clock for LiveStats and DashboardState."""

    def __init__(self, now: float = 1_800_000_000.0) -> None:
        self.now = now

    def __call__(self) -> float:
        return self.now


def feed(sink: Callable[[str, list[Record], Tally], None], parser: Parser, *lines: str) -> None:
    """Parse ``lines`` and hand the records to a live sink (LiveStats.update, DashboardState.add)."""
    sink(parser.file, parser.feed(("\n".join(lines) + "\n").encode()), parser.tally)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Serve:
    """`acceptmon serve` in a subprocess, stopped with SIGTERM."""

    def __init__(
        self,
        *args: str,
        port: int | None = None,
        cwd: Path | None = None,
        scheme: str = "http",
        prefix: Sequence[str] = (),
    ) -> None:
        """``prefix`` runs serve through another command (``unshare ... sh -c '...; exec "$@"' sh``)."""
        self.port = port or free_port()
        self.scheme = scheme
        cmd = [*prefix, sys.executable, "-m", "acceptmon", "serve", "--port", str(self.port), *args]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=cwd, env={**os.environ}
        )
        self.stderr = ""
        self.url = f"{scheme}://127.0.0.1:{self.port}/metrics"

    def wait_listening(self, timeout: float = 30.0, **kw: object) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise AssertionError(f"serve exited early: {self.proc.communicate()[1]}")
            try:
                self.get(**kw)  # type: ignore[arg-type]
                return
            except urllib.error.HTTPError:
                return  # listening (e.g. 401 without credentials)
            except OSError:
                time.sleep(0.05)
        raise AssertionError("serve did not start listening")

    def get(self, user: str | None = None, password: str | None = None, context: ssl.SSLContext | None = None) -> str:
        return fetch(self.url, user, password, context)

    def metrics(self, **kw: object) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
        return parse_metrics(self.get(**kw))  # type: ignore[arg-type]

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 15.0) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        try:
            _, self.stderr = self.proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            _, self.stderr = self.proc.communicate()
            raise AssertionError("serve did not stop on signal") from None
        return int(self.proc.returncode)


def fetch(url: str, user: str | None = None, password: str | None = None, context: ssl.SSLContext | None = None) -> str:
    """GET a metrics page, with basic auth when a user is given."""
    req = urllib.request.Request(url)
    if user is not None:
        token = base64.b64encode(f"{user}:{password}".encode()).decode()
        req.add_header("Authorization", f"Basic {token}")
    with urllib.request.urlopen(req, timeout=10, context=context) as resp:
        return str(resp.read().decode())


def parse_metrics(text: str) -> dict[str, dict[tuple[tuple[str, str], ...], float]]:
    """{sample name: {sorted label pairs: value}}."""
    out: dict[str, dict[tuple[tuple[str, str], ...], float]] = defaultdict(dict)
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[s.name][tuple(sorted(s.labels.items()))] = s.value
    return out


def value(metrics: dict[str, dict[tuple[tuple[str, str], ...], float]], name: str, **labels: str) -> float | None:
    want = tuple(sorted(labels.items()))
    for key, v in metrics.get(name, {}).items():
        if all(item in key for item in want):
            return v
    return None


def wait_for(predicate, timeout: float = 30.0, interval: float = 0.02):  # type: ignore[no-untyped-def]
    """``predicate()``'s first true value, polled until ``timeout`` (generous: a busy CI machine is slow, and
    a condition that holds returns at once); its last value, false, when the time is up."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = predicate()
        if last:
            return last
        time.sleep(interval)
    return last

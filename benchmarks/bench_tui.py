"""Benchmarks of the dashboard in a real terminal (tmux): first frame on a 1 GB log, key latency under load.

1. `acceptmon tail` on a ~1 GB log: time to the first frame (the header is drawn) and to
   the first numbers (the current run's back-fill has reached the screen).
2. While a writer appends 5,000 lines/s: time from sending `p` to the screen showing
   PAUSED (and back), over N presses.

    python benchmarks/bench_tui.py [--gb 1] [--presses 20]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.bench_parse import OUT, generate  # noqa: E402
from tests.serving import decode_line, launch_line  # noqa: E402

ENV = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "LINES")}


class Term:
    def __init__(self, command: str) -> None:
        self.sock = f"acceptmon-bench-{uuid.uuid4().hex[:6]}"
        self.t0 = time.perf_counter()
        self.run("new-session", "-d", "-s", "b", "-x", "140", "-y", "45", command)

    def run(self, *args: str) -> str:
        return subprocess.run(["tmux", "-L", self.sock, *args], capture_output=True, text=True, env=ENV).stdout

    def screen(self) -> str:
        return self.run("capture-pane", "-p", "-t", "b")

    def until(self, predicate, timeout: float = 60.0) -> float:  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        while time.perf_counter() - start < timeout:
            if predicate(self.screen()):
                return time.perf_counter()
            time.sleep(0.005)
        raise SystemExit(f"timed out; screen:\n{self.screen()}")

    def close(self) -> None:
        self.run("kill-server")


def big_log(gb: int) -> Path:
    base = OUT / "bench_256mb.log"
    OUT.mkdir(exist_ok=True)
    if not base.exists():
        print(f"generating {base} ...", flush=True)
        generate(base, 256)
    path = OUT / f"bench_{gb}gb.log"
    if not path.exists():
        with path.open("wb") as out:
            for _ in range(4 * gb):
                with base.open("rb") as f:
                    shutil.copyfileobj(f, out, 1 << 24)
    return path


def first_frame(log: Path) -> tuple[float, float]:
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm cache, as a live log is
    term = Term(f"{sys.executable} -m acceptmon tail {log}")
    try:
        frame = term.until(lambda s: "acceptmon" in s and "accept len" in s) - term.t0
        numbers = term.until(lambda s: "window mean 2." in s, timeout=120) - term.t0
    finally:
        term.close()
    return frame, numbers


def key_latency(tmp: Path, presses: int) -> list[float]:
    log = tmp / "live.log"
    log.write_text(launch_line() + "\n")
    stop = threading.Event()
    written = [0]

    chunk = "".join(decode_line(i, rank=f"DP{i % 8} TP{i % 8}") + "\n" for i in range(50))

    def writer() -> None:  # 50 lines every 10 ms: 5,000 lines/s
        next_at = time.monotonic()
        with log.open("a") as f:
            while not stop.is_set():
                f.write(chunk)
                f.flush()
                written[0] += 50
                next_at += 0.01
                time.sleep(max(0.0, next_at - time.monotonic()))

    term = Term(f"{sys.executable} -m acceptmon tail {log}")
    t = threading.Thread(target=writer)
    out = []
    try:
        term.until(lambda s: "window mean" in s)
        t.start()
        began = time.perf_counter()
        time.sleep(1.0)
        for i in range(presses):
            paused = i % 2 == 0
            start = time.perf_counter()
            term.run("send-keys", "-t", "b", "p")
            end = term.until(lambda s, paused=paused: ("PAUSED" in s) == paused)
            out.append(end - start)
            time.sleep(0.2)
    finally:
        stop.set()
        t.join()
        term.close()
    print(f"  writer appended {written[0]:,} lines at {written[0] / (time.perf_counter() - began):,.0f} lines/s")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--gb", type=int, default=1)
    ap.add_argument("--presses", type=int, default=20)
    a = ap.parse_args()
    log = big_log(a.gb)
    frame, numbers = first_frame(log)
    print(f"tail on {log.stat().st_size / 2**30:.2f} GiB: first frame {frame:.2f} s (goal <= 1 s); "
          f"current run's numbers on screen {numbers:.2f} s")  # fmt: skip
    import tempfile

    with tempfile.TemporaryDirectory() as d:
        lat = sorted(key_latency(Path(d), a.presses))
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(f"key 'p' -> screen while following 5,000 lines/s: n={len(lat)} p50 {statistics.median(lat) * 1e3:.0f} ms "
          f"p99 {p99 * 1e3:.0f} ms (includes tmux capture polling)")  # fmt: skip


if __name__ == "__main__":
    main()

"""Benchmarks of `acceptmon serve` following a live log (figures for the live pipeline's goals).

1. Append-to-visible latency: a decode line is appended; how long until /metrics shows it
   (p50/p99 over N appends), with inotify and with --poll; and a line written to ``serve -``'s
   standard input (a pipe, as ``kubectl logs -f POD | acceptmon serve -``): goal p99 <= 100 ms.
2. CPU while following 1,000 lines/s for a while: process CPU time / wall time; one file, and 30 files
   (1,000 lines/s in total) beside ``tail -F | mawk`` over the same files, with serve's RSS.
3. RSS while following 10 M lines (rotated every 1 M lines to keep the disk small):
   sampled after each million, to see that it stays flat.

    python benchmarks/bench_live.py [--appends 200] [--cpu-seconds 30] [--lines 10000000] [--only stdin,...]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from tests.serving import Serve, decode_line, fetch, free_port, launch_line, parse_metrics, value

TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICKS


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def latency(tmp: Path, appends: int, poll: bool) -> list[float]:
    log = tmp / f"latency_{'poll' if poll else 'inotify'}.log"
    log.write_text(launch_line() + "\n")
    serve = Serve(str(log), *(["--poll"] if poll else []))
    serve.wait_listening()
    out = []
    try:
        with log.open("a") as f:
            for i in range(1, appends + 1):
                time.sleep(0.02)
                f.write(decode_line(i, running=i) + "\n")
                f.flush()
                t0 = time.perf_counter()
                while value(parse_metrics(serve.get()), "acceptmon_running_requests") != i:
                    time.sleep(0.001)
                out.append(time.perf_counter() - t0)
    finally:
        serve.stop()
    return out


def stdin_latency(appends: int) -> list[float]:
    """``serve -`` fed through a pipe: from a line's write to /metrics showing it."""
    port = free_port()
    proc = subprocess.Popen(
        [sys.executable, "-m", "acceptmon", "serve", "-", "--port", str(port)],
        stdin=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    assert proc.stdin is not None
    url = f"http://127.0.0.1:{port}/metrics"
    out = []
    try:
        proc.stdin.write((launch_line() + "\n").encode())
        proc.stdin.flush()
        deadline = time.monotonic() + 30
        while True:
            try:
                if value(parse_metrics(fetch(url)), "acceptmon_log_file_present") == 1:
                    break
            except OSError:
                pass
            if time.monotonic() > deadline:
                raise SystemExit("serve - did not start")
            time.sleep(0.05)
        for i in range(1, appends + 1):
            time.sleep(0.02)
            proc.stdin.write((decode_line(i, running=i) + "\n").encode())
            proc.stdin.flush()
            t0 = time.perf_counter()
            while value(parse_metrics(fetch(url)), "acceptmon_running_requests") != i:
                time.sleep(0.001)
            out.append(time.perf_counter() - t0)
    finally:
        proc.stdin.close()
        proc.terminate()
        proc.wait(timeout=15)
    return out


def _percentiles(label: str, lat: list[float], goal_ms: int) -> None:
    lat = sorted(lat)
    p99 = lat[min(len(lat) - 1, int(len(lat) * 0.99))]
    print(
        f"latency {label}: n={len(lat)} p50 {statistics.median(lat) * 1e3:.1f} ms  p99 {p99 * 1e3:.1f} ms  "
        f"max {lat[-1] * 1e3:.1f} ms (goal p99 <= {goal_ms} ms)",
        flush=True,
    )


def cpu_at_rate(tmp: Path, seconds: float, rate: int = 1000) -> tuple[float, int]:
    log = tmp / "cpu.log"
    log.write_text(launch_line() + "\n")
    serve = Serve(str(log))
    serve.wait_listening()
    written = 0
    try:
        time.sleep(1.0)
        c0, t0 = cpu_seconds(serve.proc.pid), time.monotonic()
        with log.open("a") as f:
            batch = rate // 100
            next_at = time.monotonic()
            while time.monotonic() - t0 < seconds:
                f.write("".join(decode_line(written + k) + "\n" for k in range(batch)))
                f.flush()
                written += batch
                next_at += 0.01
                time.sleep(max(0.0, next_at - time.monotonic()))
        busy = cpu_seconds(serve.proc.pid) - c0
        wall = time.monotonic() - t0
        assert value(parse_metrics(serve.get()), "acceptmon_decode_batches_total") is not None
    finally:
        serve.stop()
    return 100 * busy / wall, written


def many_files(tmp: Path, seconds: float, files: int = 30, rate: int = 1000) -> dict[str, float]:
    """``serve 'dir/*.log'`` over ``files`` logs written at ``rate`` lines/s in total (round robin, every
    10 ms), beside ``tail -F | mawk`` following the same files: CPU % of one core of each, serve's RSS at
    the start and end of the window, and whether every line was counted."""
    d = tmp / "many"
    d.mkdir()
    logs = [d / f"pod{i:02d}.log" for i in range(files)]
    for log in logs:
        log.write_text(launch_line() + "\n")
    serve = Serve(str(d / "*.log"), "--max-series", "4096")
    serve.wait_listening()
    awk = subprocess.Popen(
        f"tail -q -n 0 -F {d}/*.log | mawk '/accept len/ {{n++}} END {{print n}}'",
        shell=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        start_new_session=True,
    )
    written = 0
    handles = [log.open("a") for log in logs]
    try:
        time.sleep(1.5)
        pids = [
            int(p) for p in subprocess.run(["pgrep", "-s", str(awk.pid)], capture_output=True, text=True).stdout.split()
        ]
        r0, c0, a0, t0 = (
            rss_mib(serve.proc.pid),
            cpu_seconds(serve.proc.pid),
            sum(map(cpu_seconds, pids)),
            time.monotonic(),
        )
        batch = max(1, rate // 100)
        next_at = time.monotonic()
        r_quarter = None
        while time.monotonic() - t0 < seconds:
            if r_quarter is None and time.monotonic() - t0 >= seconds / 4:
                r_quarter = rss_mib(serve.proc.pid)
            for k in range(batch):
                f = handles[(written + k) % files]
                f.write(decode_line(written + k, running=1 + (written + k) % 7) + "\n")
            for f in handles:
                f.flush()
            written += batch
            next_at += 0.01
            time.sleep(max(0.0, next_at - time.monotonic()))
        wall = time.monotonic() - t0
        busy, ref = cpu_seconds(serve.proc.pid) - c0, sum(map(cpu_seconds, pids)) - a0
        r1 = rss_mib(serve.proc.pid)
        last_write = time.monotonic()
        deadline = last_write + 10
        counted = 0.0
        while time.monotonic() < deadline:
            m = parse_metrics(serve.get())
            counted = sum(m.get("acceptmon_decode_batches_total", {}).values())
            if counted >= written:
                break
            time.sleep(0.01)
        caught = time.monotonic() - last_write
    finally:
        for f in handles:
            f.close()
        serve.stop()
        os.killpg(awk.pid, 15)
        awk.wait(timeout=10)
    return {"cpu": 100 * busy / wall, "awk_cpu": 100 * ref / wall, "rss_start": r0, "rss_quarter": r_quarter or r0, "rss_end": r1,
            "written": written, "counted": counted, "caught_ms": 1000 * caught}  # fmt: skip


def rss_over_lines(tmp: Path, total: int, per_file: int = 1_000_000) -> list[tuple[int, float]]:
    log = tmp / "rss.log"
    log.write_text(launch_line() + "\n")
    serve = Serve(str(log))
    serve.wait_listening()
    chunk_lines = [decode_line(i, rank=f"DP{i % 8} TP{i % 8}", acc=2 + (i % 100) / 100) for i in range(10_000)]
    chunk = ("\n".join(chunk_lines) + "\n").encode()
    samples = []
    written = 0
    try:
        f = log.open("ab")
        while written < total:
            f.write(chunk)
            written += len(chunk_lines)
            if written % per_file == 0:
                f.close()
                deadline = time.monotonic() + 120
                while (value(parse_metrics(serve.get()), "acceptmon_lines_total", kind="decode") or 0) < written:
                    if time.monotonic() > deadline:
                        raise SystemExit("the exporter fell behind by more than 2 minutes")
                    time.sleep(0.05)
                samples.append((written, rss_mib(serve.proc.pid)))
                print(f"  {written:>12,} lines  RSS {samples[-1][1]:6.1f} MiB", flush=True)
                os.rename(log, tmp / "rss.log.1")  # rotate; the old one is drained, then deleted
                f = log.open("ab")
                time.sleep(0.3)
                os.unlink(tmp / "rss.log.1")
        f.close()
    finally:
        serve.stop()
    return samples


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--appends", type=int, default=200)
    ap.add_argument("--cpu-seconds", type=float, default=30)
    ap.add_argument("--lines", type=int, default=10_000_000)
    ap.add_argument("--only", default="files,stdin,cpu,files30,rss", help="cases to run, comma-separated")
    a = ap.parse_args()
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)  # serve as installed: its bytecode cached after the first start
    cases = set(a.only.split(","))
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        for poll in (False, True) if "files" in cases else ():
            label = f"append->/metrics ({'poll 100ms' if poll else 'inotify'})"
            _percentiles(label, latency(tmp, a.appends, poll), 250)
        if "stdin" in cases:
            _percentiles("stdin write->/metrics (serve -)", stdin_latency(a.appends), 100)
        if "cpu" in cases:
            pct, n = cpu_at_rate(tmp, a.cpu_seconds)
            print(f"CPU following 1,000 lines/s for {a.cpu_seconds:.0f} s ({n:,} lines): {pct:.1f} % of one core "
                  "(goal <= 5 %)", flush=True)  # fmt: skip
        if "files30" in cases:
            r = many_files(tmp, a.cpu_seconds)
            print(f"30 files, 1,000 lines/s in total for {a.cpu_seconds:.0f} s ({r['written']:,} lines, "
                  f"{r['counted']:,.0f} counted): serve {r['cpu']:.1f} % of one core (goal <= 5 %), "
                  f"tail -F | mawk {r['awk_cpu']:.1f} %; serve RSS {r['rss_start']:.1f} -> {r['rss_quarter']:.1f} "
                  f"(a quarter in) -> {r['rss_end']:.1f} MiB "
                  f"(goal flat); every line on /metrics {r['caught_ms']:.0f} ms after the last write", flush=True)  # fmt: skip
        if "rss" in cases:
            print(f"RSS while following {a.lines:,} lines:")
            samples = rss_over_lines(tmp, a.lines)
            rss = [r for _, r in samples]
            print(
                f"RSS: first {rss[0]:.1f} MiB, last {rss[-1]:.1f} MiB, max {max(rss):.1f} MiB (goal flat, <= 100 MiB)"
            )


if __name__ == "__main__":
    main()

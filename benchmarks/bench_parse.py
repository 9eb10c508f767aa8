"""Benchmark: `acceptmon parse LOG -o out.csv` against grep+awk on a generated 256 MB+ log.

Prints wall time, throughput and peak memory for both, and checks that they produce
the same number of decode rows. Memory is sampled from /proc every 20 ms over the
whole acceptmon process tree (main process plus workers), and also read as the
largest single process's peak (getrusage).

    python benchmarks/bench_parse.py [--mb 256] [--jobs N]
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

OUT = Path(__file__).resolve().parent / "out"
AWK = (
    "grep -F 'Decode batch' {log} | {awk} -F', ' '{{ for (i = 1; i <= NF; i++) {{ n = split($i, kv, \": \"); "
    'if (n == 2) v[kv[1]] = kv[2] }} print $1 "," v["accept len"] "," v["accept rate"] "," '
    'v["gen throughput (token/s)"] "," v["#running-req"] "," v["#queue-req"] "," v["token usage"] "," '
    'v["#token"] "," v["cuda graph"]; delete v }}\' > {out}'
)


def generate(path: Path, megabytes: int) -> None:
    """A busy 8-rank DP-attention EAGLE3 server: decode, prefill, HTTP access lines, warnings, restarts."""
    r = random.Random(42)
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "scripts"))
    from make_sample_logs import NOISE_WARNINGS, server_args

    args = server_args(
        "Qwen/Qwen3-30B-A3B", {"algo": "EAGLE3", "draft": "d/e3", "steps": 3, "topk": 1, "tokens": 4}, 8, 8, 8
    )
    target = megabytes << 20
    size, sec = 0, 0
    with path.open("w") as f:
        while size < target:
            lines = []
            ts = f"2026-02-26 {10 + sec // 3600 % 10:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
            if sec % 20000 == 0:
                lines.append(f"[{ts}] {args}")
            for d in range(8):
                rank = f"DP{d} TP{d} EP{d}"
                acc = r.uniform(2.6, 3.0)
                lines.append(
                    f"[{ts} {rank}] Decode batch, #running-req: {r.randint(2, 40)}, #token: {r.randint(1000, 90000)}, "
                    f"token usage: {r.random():.2f}, accept len: {acc:.2f}, accept rate: {(acc - 1) / 3:.2f}, "
                    f"cuda graph: True, gen throughput (token/s): {r.uniform(80, 900):.2f}, #queue-req: {r.randint(0, 3)}"
                )
            for _ in range(10):
                rank = f"DP{r.randrange(8)} TP0 EP0"
                lines.append(
                    f"[{ts} {rank}] Prefill batch, #new-seq: 1, #new-token: {r.randint(50, 3000)}, #cached-token: "
                    f"{r.randint(0, 900)}, token usage: {r.random():.2f}, #running-req: {r.randint(0, 40)}, "
                    f"#queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): {r.uniform(1e3, 9e3):.2f}"
                )
                lines.append(f'[{ts}] INFO:     127.0.0.1:{r.randint(30000, 60000)} - "POST /generate HTTP/1.1" 200 OK')
            if sec % 13 == 0:
                lines.append(f"[{ts} DP0 TP0 EP0] {r.choice(NOISE_WARNINGS)}")
            chunk = "\n".join(lines) + "\n"
            f.write(chunk)
            size += len(chunk)
            sec += 1


def tree_rss(pid: int) -> int:
    """Resident set size (bytes) of a process and all its descendants."""
    total, todo = 0, [pid]
    while todo:
        p = todo.pop()
        try:
            for line in Path(f"/proc/{p}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1]) * 1024
            for task in Path(f"/proc/{p}/task").iterdir():
                todo += [int(c) for c in (task / "children").read_text().split()]
        except (OSError, ValueError):
            continue
    return total


def timed(cmd: str | list[str], shell: bool = False) -> tuple[float, int, int]:
    """Wall seconds, peak tree RSS (sampled), peak single-process RSS (rusage) of one command."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, shell=shell, stderr=subprocess.PIPE)
    peak = 0
    done = threading.Event()

    def sample() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, tree_rss(proc.pid))
            time.sleep(0.02)

    t = threading.Thread(target=sample)
    t.start()
    _, err = proc.communicate()
    wall = time.perf_counter() - start
    done.set()
    t.join()
    if proc.returncode:
        sys.exit(f"command failed: {cmd}\n{err.decode()}")
    single = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, peak, max(single, before) * 1024


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    OUT.mkdir(exist_ok=True)
    log = OUT / f"bench_{a.mb}mb.log"
    if not log.exists():
        print(f"generating {log} ...", flush=True)
        generate(log, a.mb)
    size = log.stat().st_size
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache for both
    acceptmon = [sys.executable, "-m", "acceptmon", "parse", str(log), "-o", str(OUT / "out.csv"), "-j", str(a.jobs)]
    # `awk` is mawk on some systems and gawk on others, and mawk runs this pipeline 3-4x faster: time each present.
    awks = {f"grep+{name}": name for name in ("mawk", "gawk") if shutil.which(name)} or {"grep+awk": "awk"}
    results: dict[str, list[tuple[float, int, int]]] = {name: [] for name in [*awks, "acceptmon"]}
    for _ in range(a.repeat):
        for name, awk in awks.items():
            results[name].append(timed(AWK.format(log=log, out=OUT / "awk.txt", awk=awk), shell=True))
        results["acceptmon"].append(timed(acceptmon))
    rows_awk = sum(1 for _ in (OUT / "awk.txt").open())
    rows_am = sum(1 for _ in (OUT / "out.csv").open()) - 1
    print(f"log: {size / 2**20:.0f} MiB, {sum(1 for _ in log.open()):,} lines; jobs={a.jobs}; best of {a.repeat}")
    best = {}
    for name, runs in results.items():
        wall, tree, single = min(runs)
        best[name] = wall
        print(
            f"{name:10} {wall:6.2f} s  {size / wall / 1e6:6.0f} MB/s  peak RSS tree {tree / 2**20:5.0f} MiB, "
            f"largest process {single / 2**20:5.0f} MiB"
        )
    print(f"rows: grep+awk {rows_awk:,}  acceptmon {rows_am:,}  {'SAME' if rows_awk == rows_am else 'DIFFERENT'}")
    for name in awks:
        print(f"acceptmon / {name} wall time: {best['acceptmon'] / best[name]:.2f}x (goal <= 0.5x)")


if __name__ == "__main__":
    main()

"""Benchmark: peak memory and wall time of `acceptmon compare` and `doctor` on a log of many decode lines.

Generates (or takes) an SGLang log of ``--decode`` decode lines (default 1.5 M) from an 8-rank EAGLE3
server, in ``--runs`` launches (default 2, so `compare LOG#1 LOG#2` has two sides), with a prefill line
and an HTTP access line every second and a warning now and then. Then, in one run and on the same file,
times `grep -c accept` and an awk mean of the accept lengths (the floor: reading the file once), then

    acceptmon compare LOG#1 LOG#2     (one run against another)
    acceptmon compare LOG LOG         (whole-file sides)
    acceptmon doctor LOG

and prints, per command, wall time and peak resident memory: summed over the process tree (main
process and workers, VmRSS sampled every 20 ms) and of the largest single process (getrusage of the
children, what `/usr/bin/time -v` prints as "Maximum resident set size"). The goal: under 300 MiB
each for 1.5 M decode lines.

    python benchmarks/bench_memory.py [--decode 1500000] [--runs 2] [--log FILE] [--keep FILE] [--jobs N]
        [--repeat 1] [--only compare,doctor] [--save-outputs DIR] [--against DIR]

``--against DIR`` also runs each acceptmon command from another checkout (say an older commit's
``git archive``), alternating with this one's, as ``NAME@old``: before and after under the same load.

``--save-outputs DIR`` writes each acceptmon command's stdout (table/text and ``--format json``) to DIR,
to diff two versions' outputs on the big log.
"""

from __future__ import annotations

import argparse
import os
import random
import resource
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(ROOT)}
GOAL_MIB = 300
RANKS = 8


def generate(path: Path, decode_lines: int, runs: int = 2) -> None:
    """``decode_lines`` decode lines of an 8-rank server in ``runs`` launches: per second one decode line per
    rank, one prefill line, one HTTP line, and every 13 s a warning. Each run drifts its accept length a little
    (the second drafts better), and #queue-req is mostly 0 so most batches are steady."""
    r = random.Random(42)
    sys.path.insert(0, str(ROOT / "scripts"))
    from make_sample_logs import NOISE_WARNINGS, server_args

    args = server_args(
        "Qwen/Qwen3-30B-A3B", {"algo": "EAGLE3", "draft": "d/e3", "steps": 3, "topk": 1, "tokens": 4}, 8, 8, 8
    )
    seconds = -(-decode_lines // RANKS)
    per_run = -(-seconds // max(1, runs))
    written = 0
    with path.open("w") as f:
        for sec in range(seconds):
            ts = f"2026-02-{1 + sec // 86400 % 28:02d} {sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
            lines = []
            run = sec // per_run
            if sec % per_run == 0:
                lines.append(f"[{ts}] {args}")
            low = 2.5 + 0.2 * run
            for d in range(min(RANKS, decode_lines - written)):
                acc = r.uniform(low, low + 0.5)
                lines.append(
                    f"[{ts} DP{d} TP{d} EP{d}] Decode batch, #running-req: {r.randint(2, 40)}, #token: "
                    f"{r.randint(1000, 90000)}, token usage: {r.random():.2f}, accept len: {acc:.2f}, accept rate: "
                    f"{(acc - 1) / 3:.2f}, cuda graph: True, gen throughput (token/s): {r.uniform(80, 900):.2f}, "
                    f"#queue-req: {0 if r.random() < 0.8 else r.randint(1, 3)}"
                )
                written += 1
            lines.append(
                f"[{ts} DP{r.randrange(RANKS)} TP0 EP0] Prefill batch, #new-seq: 1, #new-token: {r.randint(50, 3000)}, "
                f"#cached-token: {r.randint(0, 900)}, token usage: {r.random():.2f}, #running-req: {r.randint(0, 40)}, "
                f"#queue-req: 0, #pending-token: 0, cuda graph: False, input throughput (token/s): "
                f"{r.uniform(1e3, 9e3):.2f}"
            )
            lines.append(f'[{ts}] INFO:     127.0.0.1:{r.randint(30000, 60000)} - "POST /generate HTTP/1.1" 200 OK')
            if sec % 13 == 0:
                lines.append(f"[{ts} DP0 TP0 EP0] {r.choice(NOISE_WARNINGS)}")
            f.write("\n".join(lines) + "\n")


def tree_rss(pid: int) -> int:
    """Resident set size (bytes) summed over a process and all its descendants."""
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


def timed(cmd: str | list[str], shell: bool = False, env: dict[str, str] = ENV) -> tuple[float, int, int]:
    """Wall seconds, peak summed tree RSS (sampled) and peak RSS of the largest process of one command
    (its own process tree's, measured in a fresh child so earlier commands do not count)."""
    probe = [sys.executable, "-c", _PROBE, "1" if shell else "0", *([cmd] if shell else cmd)]
    start = time.perf_counter()
    where = env["PYTHONPATH"]  # `python -m` looks in its working directory first: the checkout to run
    proc = subprocess.Popen(probe, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env, cwd=where)
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
    largest = int(err.decode().strip().rsplit("\n", 1)[-1])
    return wall, peak, largest


_PROBE = """
import resource, subprocess, sys
shell = sys.argv[1] == "1"
cmd = sys.argv[2] if shell else sys.argv[2:]
rc = subprocess.run(cmd, shell=shell).returncode
if rc:
    sys.exit(rc)
print(resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024, file=sys.stderr)
"""
"""Runs one command and prints the largest max RSS of its descendants (bytes) on stderr; the probe's own
Python process is not among them (it is the parent), but it counts in the summed tree figure (about 10 MiB)."""


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--decode", type=int, default=1_500_000, help="decode lines to generate (default 1.5 M)")
    ap.add_argument("--runs", type=int, default=2, help="launches in the generated log (default 2)")
    ap.add_argument("--log", type=Path, help="use this log instead of generating one (it needs 2 runs)")
    ap.add_argument("--keep", type=Path, help="write the generated log here and keep it")
    ap.add_argument("--jobs", type=int, help="acceptmon -j (default: its own default)")
    ap.add_argument("--repeat", type=int, default=1)
    ap.add_argument("--only", default="grep,awk,compare,compare-files,doctor", help="commands to run, by name")
    ap.add_argument("--save-outputs", type=Path, metavar="DIR", help="write acceptmon's outputs (text and json) here")
    ap.add_argument("--against", type=Path, metavar="DIR", help="also run acceptmon from this checkout, alternating")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acceptmon-bench-mem-"))
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp)


def run(a: argparse.Namespace, tmp: Path) -> None:
    log = (a.log or a.keep or tmp / "decode.log").resolve()
    if a.log is None:
        print(f"generating {log} ({a.decode:,} decode lines, {a.runs} runs) ...", flush=True)
        generate(log, a.decode, a.runs)
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache for all
    py = [sys.executable, "-m", "acceptmon"]
    jobs = ["-j", str(a.jobs)] if a.jobs else []
    commands: dict[str, tuple[str | list[str], bool]] = {
        "grep": (f"grep -c accept {log}", True),
        "awk": (f"awk -F'accept len: ' 'NF > 1 {{ s += $2; n++ }} END {{ print s / n, n }}' {log}", True),
        "compare": ([*py, "compare", f"{log}#1", f"{log}#2", *jobs], False),
        "compare-files": ([*py, "compare", str(log), str(log), *jobs], False),
        "doctor": ([*py, "doctor", str(log), *jobs], False),
    }
    wanted = a.only.split(",")
    commands = {k: v for k, v in commands.items() if k in wanted}
    envs = {name: ENV for name in commands}
    if a.against:  # each acceptmon command next to its run from the other checkout
        old = ENV | {"PYTHONPATH": str(a.against.resolve())}
        both: dict[str, tuple[str | list[str], bool]] = {}
        for name, (cmd, shell) in commands.items():
            both[name] = (cmd, shell)
            if not shell:
                both[f"{name}@old"], envs[f"{name}@old"] = (cmd, shell), old
        commands = both
    for env in {e["PYTHONPATH"]: e for e in envs.values()}.values():  # bytecode written once
        subprocess.run([*py, "--version"], env=env, cwd=env["PYTHONPATH"], capture_output=True, check=False)
    if a.save_outputs:
        save_outputs(a.save_outputs, commands, envs)
    size = log.stat().st_size
    results: dict[str, list[tuple[float, int, int]]] = {name: [] for name in commands}
    for i in range(a.repeat):
        for name in list(commands)[:: 1 if i % 2 == 0 else -1]:
            cmd, shell = commands[name]
            results[name].append(timed(cmd, shell=shell, env=envs[name]))
    print(f"log: {size / 2**20:.0f} MiB, {sum(1 for _ in log.open()):,} lines; {a.repeat} run(s); goal {GOAL_MIB} MiB")
    for name, got in results.items():
        walls = sorted(w for w, _, _ in got)
        tree, largest = max(m for _, m, _ in got), max(m for _, _, m in got)
        mark = "" if commands[name][1] else ("  OK" if tree < GOAL_MIB << 20 else "  OVER")
        print(
            f"{name:18} {walls[0]:7.2f} s (range {walls[0]:.2f}-{walls[-1]:.2f})  peak RSS summed over processes "
            f"{tree / 2**20:6.0f} MiB, largest process {largest / 2**20:6.0f} MiB{mark}"
        )
    own = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(f"(this script's own peak: {own:.0f} MiB)")


def save_outputs(out: Path, commands: dict[str, tuple[str | list[str], bool]], envs: dict[str, dict[str, str]]) -> None:
    """Each acceptmon command's stdout, as it prints it and with --format json, into ``out``."""
    out.mkdir(parents=True, exist_ok=True)
    for name, (cmd, shell) in commands.items():
        if shell:
            continue
        assert isinstance(cmd, list)
        for fmt in ("", "json"):
            extra = ["--format", fmt] if fmt else []
            with (out / f"{name}.{fmt or 'txt'}").open("wb") as f:
                env = envs[name]
                subprocess.run([*cmd, *extra], stdout=f, env=env, cwd=env["PYTHONPATH"], check=True)


if __name__ == "__main__":
    main()

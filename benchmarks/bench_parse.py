"""Benchmark: `acceptmon parse LOG -o out.csv` against grep+awk on a generated 256 MiB log.

One run, commands in alternating order (the machine may be shared: look at the range, not
only the best). Prints, per command, wall time (best and range), throughput and peak memory
summed over the whole process tree (main process plus workers, VmRSS sampled every 20 ms);
the ratio of acceptmon to each awk (mawk and gawk where installed); whether the rows are the
same (every field grep+awk pulls, compared as numbers); and acceptmon's start-up time on a
two-line log. Generated files live in a temporary directory that is deleted at the end.

    python benchmarks/bench_parse.py [--mb 256] [--jobs N] [--repeat 3] [--pure] [--server vllm] [--format jsonl]
    python benchmarks/bench_parse.py --shape all|NAME [--mib 8] [--repeat 3] [--jobs N]

``--shape`` times one line shape each (``benchmarks/parse_shapes.py``: SGLang's older `Decode batch.`, its
newest, DP attention on Ascend, a hybrid model's, vLLM 0.10 DP, vLLM 0.20+ with 15 per-position rates,
vLLM v0) on a generated log of ``--mib`` MiB (8 for a quick look; the goal is 256) and prints one table:
acceptmon's wall time and memory against grep+mawk's (each awk present) pulling the same fields, in the
same run, and whether the rows are the same.

acceptmon runs as a normal install would: its bytecode cached (PYTHONDONTWRITEBYTECODE is
dropped) by a first run, whose start-up is printed apart.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(Path(__file__).resolve().parent))
from parse_shapes import SHAPES, Shape  # noqa: E402
from parse_shapes import awk as shape_awk  # noqa: E402
from parse_shapes import generate as generate_shape  # noqa: E402

OUT = Path(tempfile.gettempdir()) / "acceptmon-bench"
"""Where the other benchmarks keep a generated log between runs (outside the repository)."""
AWK = (
    "grep -F 'Decode batch' {log} | {awk} -F', ' '{{ for (i = 1; i <= NF; i++) {{ n = split($i, kv, \": \"); "
    'if (n == 2) v[kv[1]] = kv[2] }} print $1 "," v["accept len"] "," v["accept rate"] "," '
    'v["gen throughput (token/s)"] "," v["#running-req"] "," v["#queue-req"] "," v["token usage"] "," '
    'v["#token"] "," v["cuda graph"]; delete v }}\' > {out}'
)
ENV = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"} | {"PYTHONPATH": str(ROOT)}
"""Every command's environment: acceptmon runs as installed, its bytecode cached after the first run."""
AWK_COLUMNS = ("accept_len", "accept_rate", "gen_throughput", "running_req", "queue_req", "token_usage", "num_tokens")
VLLM_AWK = (
    "grep -F 'SpecDecoding metrics: ' {log} | {awk} -F', ' '{{ sub(/.*SpecDecoding metrics: /, \"\"); "
    'for (i = 1; i <= NF; i++) {{ n = split($i, kv, ": "); if (n == 2) v[kv[1]] = kv[2] }} '
    'print "-," v["Mean acceptance length"] "," v["Accepted"] + 0 "," v["Drafted"] + 0; delete v }}\' > {out}'
)
VLLM_COLUMNS = ("accept_len", "accepted_tokens", "drafted_tokens")


def generate_vllm(path: Path, megabytes: int) -> None:
    """A vLLM 0.10.2 data-parallel EAGLE3 server with 4 engines: the bundled sample's launch, then every 10 s
    one throughput line per engine, one SpecDecoding line per engine and HTTP access lines."""
    r = random.Random(42)
    sample = (ROOT / "sample_logs" / "vllm_v1_0.10.2_dp.log").read_text().splitlines()
    first = next(i for i, x in enumerate(sample) if "Engine 000:" in x)
    head = [re.sub("\x1b\\[[0-9;]*m", "", line) for line in sample[:first]]  # as written to a file: no colour
    target, size, sec = megabytes << 20, 0, 0
    with path.open("w") as f:
        f.write("\n".join(head) + "\n")
        while size < target:
            ts = f"{1 + sec // 86400 % 28:02d} {sec // 3600 % 24:02d}:{sec // 60 % 60:02d}:{sec % 60:02d}"
            ts = f"{1 + sec // (86400 * 28) % 12:02d}-{ts}"
            lines = []
            for e in range(4):
                lines.append(
                    f"(APIServer pid=3051) INFO {ts} [loggers.py:123] Engine {e:03d}: Avg prompt throughput: "
                    f"{r.uniform(0, 1500):.1f} tokens/s, Avg generation throughput: {r.uniform(90, 300):.1f} tokens/s, "
                    f"Running: {r.randint(0, 48)} reqs, Waiting: {r.randint(0, 3)} reqs, GPU KV cache usage: "
                    f"{r.uniform(0, 40):.1f}%, Prefix cache hit rate: {r.uniform(0, 60):.1f}%"
                )
                first = r.uniform(0.6, 0.95)
                positions = [round(first * r.uniform(0.6, 0.9) ** k, 3) for k in range(3)]  # falling, as drafts do
                drafted = 3 * r.randint(700, 950)
                accepted = round(drafted * sum(positions) / 3)
                rates = ", ".join(f"{p:.3f}" for p in positions)
                lines.append(
                    f"(APIServer pid=3051) INFO {ts} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: "
                    f"{1 + 3 * accepted / drafted:.2f}, Accepted throughput: {accepted / 10:.2f} tokens/s, Drafted "
                    f"throughput: {drafted / 10:.2f} tokens/s, Accepted: {accepted} tokens, Drafted: {drafted} tokens, "
                    f"Per-position acceptance rate: {rates}, Avg Draft acceptance rate: {100 * accepted / drafted:.1f}%"
                )
            for _ in range(r.randint(0, 3)):
                lines.append(f'(APIServer pid=3051) INFO:     10.1.0.7:{r.randint(30000, 60000)} - "POST '
                             '/v1/chat/completions HTTP/1.1" 200 OK')  # fmt: skip
            chunk = "\n".join(lines) + "\n"
            f.write(chunk)
            size += len(chunk)
            sec += 10


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


def timed(cmd: str | list[str], shell: bool = False) -> tuple[float, int]:
    """Wall seconds and peak summed tree RSS (sampled) of one command."""
    start = time.perf_counter()
    proc = subprocess.Popen(cmd, shell=shell, stderr=subprocess.PIPE, env=ENV)
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
    return wall, peak


def _texts(row: dict[str, object]) -> dict[str, str]:
    """A JSONL row's values as the CSV writes them (numbers as text, null as empty)."""
    return {k: "" if v is None else str(v) for k, v in row.items()}


def same_rows(awk_out: Path, csv_out: Path, server: str) -> tuple[int, int, bool]:
    """Row counts, and whether every field grep+awk pulls equals acceptmon's (numbers as numbers;
    vLLM: its spec rows)."""
    names = AWK_COLUMNS if server == "sglang" else VLLM_COLUMNS
    with awk_out.open() as a, csv_out.open(newline="") as c:
        table = csv.DictReader(c) if csv_out.suffix == ".csv" else (_texts(json.loads(line)) for line in c)
        rows = (row for row in table if server == "sglang" or row["kind"] == "spec")
        n_awk = n_am = 0
        equal = True
        for theirs, ours in zip(a, rows, strict=False):
            n_awk, n_am = n_awk + 1, n_am + 1
            fields = theirs.rstrip("\n").split(",")[1:]
            for name, text in zip(names, fields, strict=False):
                if float(text or "nan") != float(ours[name] or "nan") and (text or ours[name]):
                    equal = False
        n_awk += sum(1 for _ in a)
        n_am += sum(1 for _ in rows)
    return n_awk, n_am, equal and n_awk == n_am


def startup(tmp: Path, python: str) -> list[float]:
    """Wall seconds of `acceptmon parse` on a two-line log, six times (the first may write bytecode;
    the others warm)."""
    two = tmp / "two.log"
    two.write_text(
        "[2026-02-26 10:00:00 TP0] Decode batch, #running-req: 3, #token: 37048, token usage: 0.24, accept len: 2.86, "
        "accept rate: 0.62, cuda graph: True, gen throughput (token/s): 194.42, #queue-req: 0\nhello\n"
    )
    return [timed([python, "-m", "acceptmon", "parse", str(two), "-o", str(tmp / "two.csv")])[0] for _ in range(6)]


def lane(pure: bool) -> str:
    """Which path the acceptmon runs took: the compiled fast lane or the general parser."""
    if pure:
        return "general parser (ACCEPTMON_PURE_PYTHON=1: no fast lane)"
    found = subprocess.run(
        [sys.executable, "-c", "from acceptmon.parse.fast import native; print(native.load() is not None)"],
        env=ENV, capture_output=True, text=True, check=True,
    )  # fmt: skip
    return "compiled matcher (cmatch)" if found.stdout.strip() == "True" else "general parser (cmatch not built)"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=256)
    ap.add_argument("--jobs", type=int, help="acceptmon -j (default: its own default)")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--pure", action="store_true", help="time the general parser alone (ACCEPTMON_PURE_PYTHON=1)")
    ap.add_argument("--server", choices=("sglang", "vllm"), default="sglang", help="which server's log to generate")
    ap.add_argument("--format", choices=("csv", "jsonl"), default="csv", help="acceptmon's output format")
    ap.add_argument("--shape", choices=("all", *SHAPES), help="time line shapes (see parse_shapes.py) instead")
    ap.add_argument("--mib", type=float, default=8, help="with --shape: each log's size")
    ap.add_argument(
        "--kind", action="store_true", help="with --shape: acceptmon writes the awk's kind alone (parse --kind KIND)"
    )
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acceptmon-bench-"))
    try:
        if a.shape:
            run_shapes(a, tmp)
        else:
            run(a, tmp)
    finally:
        shutil.rmtree(tmp)


def run_shapes(a: argparse.Namespace, tmp: Path) -> None:
    """One table: per shape, acceptmon and each awk in alternating order, ``--repeat`` times."""
    names = list(SHAPES) if a.shape == "all" else [a.shape]
    awks = [name for name in ("mawk", "gawk") if shutil.which(name)] or ["awk"]
    startup(tmp, sys.executable)  # bytecode written, as an installed acceptmon has it
    if a.pure:
        ENV["ACCEPTMON_PURE_PYTHON"] = "1"
    rows = []
    for name in names:
        shape, log = SHAPES[name], tmp / f"{name}.log"
        generate_shape(shape, log, a.mib)
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # the page cache warm for all
        out = tmp / f"out.{a.format}"
        acceptmon = [sys.executable, "-m", "acceptmon", "parse", str(log), "-o", str(out)]
        acceptmon += ["-j", str(a.jobs)] if a.jobs else []
        acceptmon += ["--kind", shape.kind] if a.kind else []
        commands: dict[str, tuple[str | list[str], bool]] = {"acceptmon": (acceptmon, False)}
        commands |= {f"grep+{w}": (shape_awk(shape, log, tmp / "awk.txt", w), True) for w in awks}
        results: dict[str, list[tuple[float, int]]] = {n: [] for n in commands}
        for i in range(a.repeat):
            for n in list(commands)[:: 1 if i % 2 == 0 else -1]:
                results[n].append(timed(*commands[n]))
        n_awk, n_am, equal = same_shape_rows(shape, tmp / "awk.txt", out)
        rows.append((name, log.stat().st_size, results, (n_awk, n_am, equal)))
        log.unlink()
    print(f"{a.mib:g} MiB per log, {a.repeat} runs each, best wall time; memory: peak RSS summed over processes")
    kind = " --kind KIND (the awk's: decode or spec)" if a.kind else ""
    jobs = f" -j {a.jobs}" if a.jobs else ""
    print(f"lane: {lane(a.pure)}; acceptmon parse LOG -o out.{a.format}{jobs}{kind}")
    head = f"{'shape':14} {'MiB':>5} {'acceptmon':>10} {'MiB':>5}"
    for w in awks:
        head += f" {'grep+' + w:>10} {'MiB':>5} {'ratio':>6}"
    print(head + f" {'rows':>9}  same")
    for name, size, results, (n_awk, n_am, equal) in rows:
        best = {n: min(w for w, _ in r) for n, r in results.items()}
        peak = {n: max(m for _, m in r) / 2**20 for n, r in results.items()}
        line = f"{name:14} {size / 2**20:5.0f} {best['acceptmon']:9.2f}s {peak['acceptmon']:5.0f}"
        for w in awks:
            n = f"grep+{w}"
            line += f" {best[n]:9.2f}s {peak[n]:5.0f} {best['acceptmon'] / best[n]:5.2f}x"
        print(line + f" {n_am:9,}  {'SAME' if equal else f'DIFFERENT ({n_awk:,} awk rows)'}")


def same_shape_rows(shape: Shape, awk_out: Path, out: Path) -> tuple[int, int, bool]:
    """Row counts, and whether every field grep+awk pulls equals acceptmon's (its CSV or JSON Lines, as numbers; a
    per-position list by its first rate, which is what awk's split on ', ' leaves it)."""
    with awk_out.open() as a, out.open(newline="") as c:
        rows = map(_json_row, c) if out.suffix == ".jsonl" else csv.DictReader(c)
        ours = (row for row in rows if row["kind"] == shape.kind)
        n_awk = n_am = 0
        equal = True
        for theirs, row in zip(a, ours, strict=False):
            n_awk, n_am = n_awk + 1, n_am + 1
            for (_, column, scale), text in zip(shape.fields, theirs.rstrip("\n").split(",")[1:], strict=True):
                mine = float((row[column] or "nan").split(";")[0])
                if abs(float(text) * scale - mine) > 1e-9 * max(1.0, abs(mine)):
                    equal = False
        n_awk += sum(1 for _ in a)
        n_am += sum(1 for _ in ours)
    return n_awk, n_am, equal and n_awk == n_am


def _json_row(line: str) -> dict[str, str]:
    """A JSON Lines row with its values as a CSV row writes them (a list ';'-joined, null empty)."""
    row = json.loads(line)
    return {k: ";".join(map(str, v)) if isinstance(v, list) else "" if v is None else str(v) for k, v in row.items()}


def run(a: argparse.Namespace, tmp: Path) -> None:
    log = tmp / f"bench_{a.mb}mb.log"
    print(f"generating {log} ...", flush=True)
    (generate if a.server == "sglang" else generate_vllm)(log, a.mb)
    size = log.stat().st_size
    subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache for all
    first, *warm = startup(tmp, sys.executable)  # also the warm-up: bytecode written
    if a.pure:
        ENV["ACCEPTMON_PURE_PYTHON"] = "1"
    out = tmp / f"out.{a.format}"
    acceptmon = [sys.executable, "-m", "acceptmon", "parse", str(log), "-o", str(out)]
    acceptmon += ["-j", str(a.jobs)] if a.jobs else []
    # `awk` is mawk on some systems and gawk on others, and mawk runs this pipeline 3-4x faster: time each present.
    awks = {f"grep+{name}": name for name in ("mawk", "gawk") if shutil.which(name)} or {"grep+awk": "awk"}
    commands: dict[str, tuple[str | list[str], bool]] = {
        name: ((AWK if a.server == "sglang" else VLLM_AWK).format(log=log, out=tmp / "awk.txt", awk=awk), True)
        for name, awk in awks.items()
    }
    commands["acceptmon"] = (acceptmon, False)
    results: dict[str, list[tuple[float, int]]] = {name: [] for name in commands}
    for i in range(a.repeat):
        for name in list(commands)[:: 1 if i % 2 == 0 else -1]:
            cmd, shell = commands[name]
            results[name].append(timed(cmd, shell=shell))
    n_awk, n_am, equal = same_rows(tmp / "awk.txt", out, a.server)
    print(
        f"log: {a.server}, {size / 2**20:.0f} MiB, {sum(1 for _ in log.open()):,} lines; {' '.join(acceptmon[3:])}; {a.repeat} runs"
    )
    for name, runs in results.items():
        walls = sorted(w for w, _ in runs)
        print(
            f"{name:10} {walls[0]:6.2f} s (range {walls[0]:.2f}-{walls[-1]:.2f})  {size / walls[0] / 1e6:6.0f} MB/s  "
            f"peak RSS summed over processes {max(m for _, m in runs) / 2**20:5.0f} MiB"
        )
    print(f"rows: grep+awk {n_awk:,}  acceptmon {n_am:,}  {'SAME' if equal else 'DIFFERENT'}")
    for name in awks:
        ratios = sorted(am[0] / aw[0] for am, aw in zip(results["acceptmon"], results[name], strict=True))
        best = min(w for w, _ in results["acceptmon"]) / min(w for w, _ in results[name])
        print(f"acceptmon / {name} wall time: {best:.2f}x best-to-best, per run {ratios[0]:.2f}-{ratios[-1]:.2f}x "
              "(must <= 1.0, aim 0.5)")  # fmt: skip
    warm.sort()
    print(f"start-up (2-line log): {first:.2f} s the first time, then {warm[0]:.2f} s best, "
          f"{warm[len(warm) // 2]:.2f} s median")  # fmt: skip
    print(f"lane: {lane(a.pure)}")


if __name__ == "__main__":
    main()

"""Benchmark: `acceptmon parse -j 2 -o x.parquet` against `acceptmon parse --ray -o DIR` on a local 2-CPU Ray cluster.

Generates --size MiB (default 1024) over 8 files, half SGLang, half vLLM (bench_parse.py's generators:
launch lines inside the files, so ranges start in the middle of runs), then times

  local  `python -m acceptmon parse -j 2 FILES -o x.parquet` (a subprocess)
  ray    `parse --ray FILES -o DIR` in this process, on a Ray cluster started here with `ray.init(num_cpus=2)`
         (its start-up timed apart: a cluster is started once, not per parse)

checks that both give the same rows (sorted by file and line, every column), and prints each wall time,
rows/s and MB/s per core, Ray's overhead (its wall time over the local one, less 1: the goal is <= 25 %),
and the core-hours 1 TB would take at the Ray run's speed per core. Files live in a temporary directory
that is deleted at the end.

    python benchmarks/bench_scale.py [--size 1024] [--files 8] [--range-mb 4] [--repeat 1]
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("RAY_ENABLE_UV_RUN_RUNTIME_ENV", "0")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")

from bench_parse import ENV, generate, generate_vllm  # noqa: E402

CORES = 2


def make_logs(tmp: Path, size_mb: int, files: int) -> list[Path]:
    each = max(1, size_mb // files)
    logs = []
    for k in range(files):
        log = tmp / f"{'sglang' if k % 2 == 0 else 'vllm'}_{k}.log"
        (generate if k % 2 == 0 else generate_vllm)(log, each)
        logs.append(log)
    return logs


def local(logs: list[Path], out: Path) -> float:
    cmd = [sys.executable, "-m", "acceptmon", "parse", "-j", str(CORES), *map(str, logs), "-o", str(out)]
    started = time.monotonic()
    subprocess.run(cmd, check=True, env=ENV, stderr=subprocess.DEVNULL)
    return time.monotonic() - started


def on_ray(logs: list[Path], out: Path, range_mb: int) -> float:
    from acceptmon.cli import main
    from acceptmon.pipeline import batch

    batch.RANGE_BYTES = range_mb << 20
    started = time.monotonic()
    if main(["parse", "--ray", *map(str, logs), "-o", str(out)]) != 0:
        raise SystemExit("parse --ray failed")
    return time.monotonic() - started


def same_rows(parquet: Path, dataset: Path) -> tuple[int, bool]:
    import pyarrow.dataset as pads
    import pyarrow.parquet as pq

    keys = [("file", "ascending"), ("line", "ascending")]
    a = pq.read_table(parquet).sort_by(keys)
    b = pads.dataset(dataset, format="parquet").to_table().sort_by(keys)
    return a.num_rows, a.schema == b.schema and a.equals(b)


def _up() -> int:
    return 0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--size", type=int, default=1024, help="MiB in all (default 1024)")
    ap.add_argument("--files", type=int, default=8)
    ap.add_argument("--range-mb", type=int, default=4, help="Ray task size (default 4: -j's)")
    ap.add_argument(
        "--repeat", type=int, default=1, help="runs of each, in alternating order (the machine may be shared)"
    )
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acceptmon-scale-"))
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp)


def run(a: argparse.Namespace, tmp: Path) -> None:
    import ray

    print(f"generating {a.size} MiB over {a.files} files ...", flush=True)
    logs = make_logs(tmp, a.size, a.files)
    size = sum(p.stat().st_size for p in logs)
    subprocess.run(["cat", *map(str, logs)], stdout=subprocess.DEVNULL, check=True)  # warm the page cache
    subprocess.run([sys.executable, "-m", "acceptmon", "parse", str(logs[0]), "-o", str(tmp / "warm.csv"),
                    "-j", "1"], check=True, env=ENV, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL)  # fmt: skip
    started = time.monotonic()
    ray.init(num_cpus=CORES, include_dashboard=False, logging_level="WARNING")
    ray.get(ray.remote(_up).remote())  # a worker up
    start = time.monotonic() - started
    walls: dict[str, list[float]] = {"local": [], "ray": []}
    try:
        for i in range(a.repeat):
            for name in ("local", "ray")[:: 1 if i % 2 == 0 else -1]:
                if name == "ray":
                    shutil.rmtree(tmp / "dataset", ignore_errors=True)  # a run writes the dataset anew
                wall = local(logs, tmp / "x.parquet") if name == "local" else on_ray(logs, tmp / "dataset", a.range_mb)
                walls[name].append(wall)
                print(f"  {name}: {wall:.2f} s", flush=True)
    finally:
        ray.shutdown()
    t_local, t_ray = min(walls["local"]), min(walls["ray"])
    rows, equal = same_rows(tmp / "x.parquet", tmp / "dataset")
    files = len(list((tmp / "dataset").iterdir()))
    print(f"input: {size / 2**20:.0f} MiB in {a.files} files (SGLang and vLLM), {rows:,} rows; {CORES} cores")
    for name, wall, runs in (("local -j 2", t_local, walls["local"]), (f"--ray ({files} tasks)", t_ray, walls["ray"])):
        print(f"{name:22} {wall:7.2f} s best (range {min(runs):.1f}-{max(runs):.1f})  {rows / wall / CORES:9,.0f} rows/s/core  "
              f"{size / wall / CORES / 1e6:6.2f} MB/s/core")  # fmt: skip
    print(f"ray cluster start (apart): {start:.2f} s")
    pairs = sorted(r / loc - 1 for r, loc in zip(walls["ray"], walls["local"], strict=True))
    print(f"Ray's overhead: {100 * (t_ray / t_local - 1):+.1f} % of the local wall time best to best, per pair "
          f"{100 * pairs[0]:+.0f} to {100 * pairs[-1]:+.0f} % (goal <= 25 %)")  # fmt: skip
    print(f"1 TB at the --ray speed: {1e12 / (size / t_ray / CORES) / 3600:,.0f} core-hours")
    print(f"rows: {'SAME' if equal else 'DIFFERENT'}")


if __name__ == "__main__":
    main()

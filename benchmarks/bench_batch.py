"""The batch commands against ``parse`` and grep+awk on each line shape: wall time and memory.

    python benchmarks/bench_batch.py [--shape all|NAME] [--mib 8] [--repeat 2] [--jobs N]

Per shape of ``benchmarks/parse_shapes.py`` (a generated log of ``--mib`` MiB), the same run times
``acceptmon parse LOG -o out.csv``, ``acceptmon runs LOG``, ``acceptmon doctor LOG`` and grep+awk
pulling the stats line's fields, in alternating order, and prints the best wall time of each, the
peak RSS summed over processes, and ``runs`` / ``doctor`` as multiples of ``parse`` (the goal: at most
2x, memory at most 200 MiB on 256 MiB logs).
"""

from __future__ import annotations

import argparse
import shlex
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_parse import startup, timed
from parse_shapes import SHAPES
from parse_shapes import awk as shape_awk
from parse_shapes import generate as generate_shape


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--shape", default="all", choices=("all", *SHAPES))
    ap.add_argument("--mib", type=float, default=8, help="each log's size (the goal is 256)")
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--jobs", type=int, help="acceptmon -j (default: its own default)")
    a = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="acceptmon-bench-batch-"))
    try:
        run(a, tmp)
    finally:
        shutil.rmtree(tmp)


def run(a: argparse.Namespace, tmp: Path) -> None:
    names = list(SHAPES) if a.shape == "all" else [a.shape]
    awk = "mawk" if shutil.which("mawk") else "awk"
    startup(tmp, sys.executable)
    jobs = ["-j", str(a.jobs)] if a.jobs else []
    print(f"{a.mib:g} MiB per log, {a.repeat} runs each, best wall time; MiB: peak RSS summed over processes")
    print(
        f"{'shape':14} {'parse':>13} {'runs':>13} {'doctor':>13} {'grep+' + awk:>13} {'runs/parse':>10} {'doctor/parse':>12}"
    )
    for name in names:
        shape, log = SHAPES[name], tmp / f"{name}.log"
        generate_shape(shape, log, a.mib)
        subprocess.run(["cat", str(log)], stdout=subprocess.DEVNULL, check=True)  # the page cache warm for all
        am = shlex.join([sys.executable, "-m", "acceptmon"])
        j = shlex.join(jobs)
        commands: dict[str, tuple[str | list[str], bool]] = {  # stdout to /dev/null: what is timed is the work
            "parse": (f"{am} parse {shlex.quote(str(log))} -o {shlex.quote(str(tmp / 'out.csv'))} {j}", True),
            "runs": (f"{am} runs {shlex.quote(str(log))} {j} > /dev/null", True),
            "doctor": (f"{am} doctor {shlex.quote(str(log))} {j} > /dev/null", True),
            "awk": (shape_awk(shape, log, tmp / "awk.txt", awk), True),
        }
        results: dict[str, list[tuple[float, int]]] = {n: [] for n in commands}
        for i in range(a.repeat):
            for n in list(commands)[:: 1 if i % 2 == 0 else -1]:
                results[n].append(timed(*commands[n]))
        best = {n: min(w for w, _ in r) for n, r in results.items()}
        peak = {n: max(m for _, m in r) / 2**20 for n, r in results.items()}
        cells = " ".join(f"{best[n]:7.2f}s {peak[n]:4.0f}" for n in commands)
        print(f"{name:14} {cells} {best['runs'] / best['parse']:9.1f}x {best['doctor'] / best['parse']:11.1f}x")
        log.unlink()


if __name__ == "__main__":
    main()

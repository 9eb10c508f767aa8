"""What the columnar ``steps`` of each detector saves over its ``stats`` fed line by line, on one core.

Builds 200k stats lines of one speculative run (accept lengths around 2 with stretches stuck at 1.00, batches of
1-64 requests with a queue at the cap, CUDA graphs off above 48, a retraction now and then, per-position rates,
sequence lengths past a draft window) and, for every built-in rule whose detector reads stats lines, times a fresh
detector fed the lines by :meth:`Detector.steps` (the reference: ``stats`` line by line) and by its own ``steps``,
in parts of ``--part`` lines as the engine hands them. Both must end in the same state.

    python benchmarks/bench_detector_steps.py [--lines 200000] [--part 4096] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from acceptmon.diagnose.detector import Detector, Lines  # noqa: E402
from acceptmon.diagnose.rules import load_rules  # noqa: E402
from acceptmon.diagnose.signatures import SIGNATURES  # noqa: E402
from acceptmon.diagnose.state import RunState, Steps  # noqa: E402
from acceptmon.parse.records import LaunchConfig, WarningRecord  # noqa: E402


def columns(n: int, seed: int = 1) -> tuple[dict[str, list[Any]], dict[str, list[Any]]]:
    """Columns of ``n`` stats lines, and the record fields the detectors read."""
    rnd = random.Random(seed)
    running = [min(48, max(1, int(rnd.gauss(30, 15)))) if i % 5000 < 4000 else rnd.randint(49, 64) for i in range(n)]
    stuck = [i % 20_000 < 300 for i in range(n)]
    accept = [1.0 if s else round(rnd.uniform(1.5, 3.0), 2) for s in stuck]
    tokens = [r * rnd.randint(500, 6000) for r in running]
    cols = {
        "line": list(range(100, 100 + 3 * n, 3)),
        "warm": [i >= 5 for i in range(n)],
        "steady": [i % 7 != 0 for i in range(n)],
        "seq_len": [t / r for t, r in zip(tokens, running, strict=True)],
        "accept_len": accept,
        "accept_rate": [round((a - 1) / 3, 3) for a in accept],
        "running_req": running,
        "num_tokens": tokens,
        "token_usage": [round(rnd.uniform(0.2, 0.95), 2) for _ in range(n)],
    }
    values = {
        "cuda_graph": [r <= 48 for r in running],
        "queue_req": [rnd.randint(0, 9) if r == 48 else 0 for r in running],
        "retracted_req": [rnd.randint(1, 3) if i % 9973 == 0 else 0 for i in range(n)],
        "position_accept_rates": [[0.8, 0.5, round(rnd.uniform(0.0, 0.4), 2)] for _ in range(n)],
    }
    return cols, values


def parts(cols: dict[str, list[Any]], values: dict[str, list[Any]], size: int) -> list[Steps]:
    n = len(cols["line"])
    return [
        Steps(
            **{k: v[lo : lo + size] for k, v in cols.items()},
            speculative_from=0,
            values={k: v[lo : lo + size] for k, v in values.items()},
        )
        for lo in range(0, n, size)
    ]


def state(det: Detector[Any]) -> dict[str, Any]:
    return {k: (v.count, v.lines) if isinstance(v, Lines) else v for k, v in vars(det).items()}


def timed(feed: Any, make: Any, steps: list[Steps], run: RunState, repeat: int) -> tuple[float, Detector[Any]]:
    best, det = float("inf"), None
    for _ in range(repeat):
        det = make()
        start = time.perf_counter()
        for part in steps:
            feed(det, part, run)
        best = min(best, time.perf_counter() - start)
    assert det is not None
    return best, det


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--lines", type=int, default=200_000)
    ap.add_argument("--part", type=int, default=4096)
    ap.add_argument("--repeat", type=int, default=3)
    a = ap.parse_args()
    cols, values = columns(a.lines)
    steps = parts(cols, values, a.part)
    launch = LaunchConfig(
        model_path="Qwen2.5-7B",
        spec_algorithm="EAGLE3",
        spec_num_steps=3,
        spec_eagle_topk=1,
        extra={"cuda_graph_max_bs": 48, "max_running_requests": 48},
    )
    run = RunState("bench.log", 1, launch=launch, launch_line=1)
    warnings = [
        WarningRecord(line=2, code="is greater than the derived context_length", value=32768.0, limit=2048.0),
        WarningRecord(line=3, code="Max running requests is reset to", value=48.0),
    ]
    print(f"{a.lines:,} lines in parts of {a.part}; best of {a.repeat}; one core")
    print(f"  {'rule':5} {'detector':12} {'row by row':>12} {'steps':>10} {'µs/line':>14} {'gain':>7}")
    for rule in load_rules():
        sig = SIGNATURES[rule.signature]
        if "stats" not in sig.detector.__dict__:  # type: ignore[attr-defined]
            continue

        def make(sig: Any = sig, params: Any = rule.params) -> Detector[Any]:
            det: Detector[Any] = sig.detector(params)
            for w in warnings:
                det.warning(w, run)
            return det

        slow, reference = timed(Detector.steps, make, steps, run, a.repeat)
        fast, columnar = timed(lambda d, p, r: d.steps(p, r), make, steps, run, a.repeat)
        assert state(columnar) == state(reference), rule.id
        per = f"{slow / a.lines * 1e6:.2f} -> {fast / a.lines * 1e6:.3f}"
        name = type(reference).__name__
        print(f"  {rule.id:5} {name:12} {slow:10.3f} s {fast:8.4f} s {per:>14} {slow / fast:6.0f}x")


if __name__ == "__main__":
    main()

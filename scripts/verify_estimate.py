"""How far the verify-step estimate of SGLang decode lines is from the runs' accept length, per sample log.

``serve``'s ``acceptmon_verify_steps_total`` / ``acceptmon_generated_tokens_total`` estimate an SGLang
decode line's window as ``decode_log_interval`` x ``#running-req`` steps (:mod:`acceptmon.measure.verify`);
vLLM spec lines count them. For every speculative run of ``sample_logs/`` this prints the counters'
tokens / steps beside the run's mean accept length as ``acceptmon runs`` gives it (a mean over decode
lines), and, where the log has request lines (``--log-requests``), the requests' own completion tokens /
verify steps (what the server really generated per step for those requests).

    python scripts/verify_estimate.py [LOG...]
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections import defaultdict
from pathlib import Path

from acceptmon.measure.normalize import Normalizer, run_key
from acceptmon.measure.verify import COUNTED, window
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser

ROOT = Path(__file__).resolve().parent.parent


def counters(path: Path) -> tuple[dict[tuple[str, int], list[float]], dict[tuple[str, int], list[float]]]:
    """Per (source, run): [steps, tokens] of the counters, and [verify steps, completion tokens] of requests."""
    parser = Parser(load_grammars(), str(path))
    normalizer = Normalizer()
    launches: dict[tuple[str, str, int], object] = {}
    sums: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    requests: dict[tuple[str, int], list[float]] = defaultdict(lambda: [0.0, 0.0])
    raw: dict[tuple[str, str, int, str], dict[str, float]] = {}
    for fact in normalizer.feed(parser.feed(path.read_bytes())):
        r = fact.record
        kind = KINDS[r.kind]
        where = (getattr(r, "source", ""), r.run)
        if kind.starts_run:
            launches[run_key(r)] = getattr(r, "config", None)
        elif kind.request and getattr(r, "verify_ct", None) and getattr(r, "completion_tokens", None):
            requests[where][0] += r.verify_ct  # type: ignore[attr-defined]
            requests[where][1] += r.completion_tokens  # type: ignore[attr-defined]
        elif kind.acceptance:
            increase = None
            if getattr(r, "cumulative", False):  # vLLM v0: the increase since the engine's previous line
                unit = (*run_key(r), getattr(r, "engine", "") or "")
                now = {name: float(v) for name in COUNTED if (v := getattr(r, name)) is not None}
                before = raw.get(unit, {})
                raw[unit] = now  # a counter the line does not log (llama.cpp: emitted tokens) stays out
                increase = {name: v - before.get(name, 0.0) for name, v in now.items()}
            w = window(r, launches.get(run_key(r)), increase)  # type: ignore[arg-type]
            if w is not None:
                sums[where][0] += w.steps
                sums[where][1] += w.tokens
    return sums, requests


def main(argv: list[str]) -> int:
    logs = [Path(a) for a in argv] or sorted((ROOT / "sample_logs").glob("*.log"))
    print(
        "| sample | run | spec | batches | runs: mean accept len | counters: tokens/steps | error | requests: tokens/steps |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for log in logs:
        out = subprocess.run(
            [sys.executable, "-m", "acceptmon", "runs", str(log), "--format", "json"],
            capture_output=True,
            check=True,
            text=True,
        ).stdout
        sums, requests = counters(log)
        for run in json.loads(out):
            steps, tokens = sums.get((run["source"], run["run"]), (0.0, 0.0))
            mean = run["accept_len_mean"]
            if not steps or mean is None:
                continue
            ratio = tokens / steps
            req = requests.get((run["source"], run["run"]))
            exact = f"{req[1] / req[0]:.3f} ({(ratio / (req[1] / req[0]) - 1) * 100:+.1f} %)" if req else "-"
            spec = f"{run['spec_algorithm']} {run['spec_num_steps']}/{run['spec_eagle_topk']}/{run['spec_num_draft_tokens']}"
            print(
                f"| {log.name} | {run['run']} | {spec} | {run['batches']} | {mean:.4f} | {ratio:.4f} | "
                f"{(ratio / mean - 1) * 100:+.2f} % | {exact} |"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

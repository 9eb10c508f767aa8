"""Logs for the compare goldens, built from SGLang 0.5.9+ decode/prefill line formats, and their goldens.

The logs are written at test time (deterministic, seeded), so only the goldens are
committed. Rewrite the goldens after a deliberate output change, then review the diff:

    python -m tests.data.compare.make
"""

from __future__ import annotations

import argparse
import io
import json
import random
import tempfile
from contextlib import redirect_stdout
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parent / "golden"
SEED_LOG = ROOT / "sample_logs" / "seed_eagle3_moe.log"
RANKS = [f"DP{i} TP{i} EP{i}" for i in range(4)]

SCENARIOS: dict[str, tuple[str, str]] = {
    # name: (A, B); bare names are files written by write_logs, others are relative to ROOT
    "seed_broken_vs_fixed": ("sample_logs/seed_eagle3_moe.log#1", "sample_logs/seed_eagle3_moe.log#2"),
    "spec_vs_baseline": ("baseline_89.log", "eagle3_94.log#1"),
    "regression": ("baseline_83.log#1", "eagle3_tree_60.log"),
    "healthy_halves": ("healthy_first.log", "healthy_second.log"),
}


def _launch(spec: tuple[int, int, int] | None) -> str:
    model = "Qwen/Qwen3-30B-A3B"
    fields = f"model_path='{model}', tokenizer_path='{model}', tp_size=4, dp_size=4, ep_size=4, "
    if spec is None:
        fields += "speculative_algorithm=None, speculative_num_steps=None, speculative_eagle_topk=None, "
        fields += "speculative_num_draft_tokens=None"
    else:
        steps, topk, tokens = spec
        fields += "speculative_algorithm='EAGLE3', speculative_draft_model_path='Tengyunw/qwen3_30b_moe_eagle3', "
        fields += f"speculative_num_steps={steps}, speculative_eagle_topk={topk}, speculative_num_draft_tokens={tokens}"
    return f"server_args=ServerArgs({fields})"


def run_lines(seed: int, spec: tuple[int, int, int] | None, tput: float, accept: float, intervals: int) -> list[str]:
    """One launch: decode lines of 4 ranks (AR(1) throughput noise, load-dependent), prefills, queueing."""
    r = random.Random(seed)
    t = datetime(2026, 3, 2, 10, 0, 0)
    lines = [f"[{t:%Y-%m-%d %H:%M:%S}] {_launch(spec)}"]
    noise = dict.fromkeys(RANKS, 0.0)
    for _ in range(intervals):
        t += timedelta(seconds=r.uniform(0.8, 1.5))
        for rank in RANKS:
            stamp = f"[{t:%Y-%m-%d %H:%M:%S} {rank}]"
            running = r.randint(2, 6)
            if r.random() < 0.3:
                lines.append(
                    f"{stamp} Prefill batch, #new-seq: 1, #new-token: {r.randint(60, 2400)}, #cached-token: "
                    f"{r.randint(0, 900)}, token usage: 0.01, #running-req: {running}, #queue-req: 0, "
                    f"#pending-token: 0, cuda graph: False, input throughput (token/s): {r.uniform(2000, 9000):.2f}"
                )
            noise[rank] = 0.7 * noise[rank] + r.gauss(0, 0.8)
            value = tput * (1 + 0.01 * (running - 4)) + noise[rank]
            fields = ""
            if spec is not None:
                acc = accept + r.uniform(-0.1, 0.1)
                fields = f"accept len: {acc:.2f}, accept rate: {(acc - 1) / (spec[2] - 1):.2f}, "
            tokens = running * r.randint(900, 1600)
            lines.append(
                f"{stamp} Decode batch, #running-req: {running}, #token: {tokens}, token usage: "
                f"{tokens / 900000:.2f}, {fields}cuda graph: True, gen throughput (token/s): {value:.2f}, "
                f"#queue-req: {r.choice([0, 0, 0, 1, 2])}"
            )
    return lines


def write_logs(directory: Path) -> None:
    """Write the scenario logs into ``directory``."""
    eagle3 = (3, 1, 4)
    logs = {
        "baseline_89.log": run_lines(15, None, 89.0, 0, 40),
        "eagle3_94.log": run_lines(20, eagle3, 94.25, 2.85, 40),
        "baseline_83.log": run_lines(13, None, 83.0, 0, 40),
        "eagle3_tree_60.log": run_lines(14, (5, 8, 32), 60.0, 2.3, 40),
    }
    healthy = run_lines(30, eagle3, 94.0, 2.85, 60)
    half = 1 + (len(healthy) - 1) // 2
    logs["healthy_first.log"], logs["healthy_second.log"] = healthy[:half], healthy[half:]
    for name, lines in logs.items():
        (directory / name).write_text("\n".join(lines) + "\n", encoding="utf-8")


def resolve(ref: str, logs: Path) -> str:
    return str(ROOT / ref) if ref.startswith("sample_logs/") else str(logs / ref)


def render(name: str, logs: Path, fmt: str) -> str:
    """The compare output of one scenario, as the CLI prints it."""
    from acceptmon.cli import compare as compare_cmd

    parser = argparse.ArgumentParser()
    sub = parser.add_subparsers(parser_class=argparse.ArgumentParser)
    compare_cmd.add_parsers(sub)
    a, b = (resolve(ref, logs) for ref in SCENARIOS[name])
    args = parser.parse_args(["compare", a, b, "--format", fmt, "-j", "1"])
    out = io.StringIO()
    with redirect_stdout(out):
        assert args.func(args) == 0
    return out.getvalue()


def main() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        write_logs(Path(tmp))
        for name in SCENARIOS:
            (GOLDEN / f"{name}.txt").write_text(render(name, Path(tmp), "table"))
            text = render(name, Path(tmp), "json")
            json.loads(text)
            (GOLDEN / f"{name}.json").write_text(text)
            print("wrote", name)


if __name__ == "__main__":
    main()

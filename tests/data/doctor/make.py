"""Logs for the doctor goldens: one scenario per pattern, built from doctor.md §2's exact strings and §4's thresholds.

Decode, prefill and launch lines use SGLang 0.5.9+ formats (log-formats.md §1.2, §1.6); warnings
are quoted verbatim, with and without the ``[time]`` prefix (server arguments resolve before
logging is configured). The logs are written at test time (deterministic), so only the goldens
are committed. Rewrite them after a deliberate output change, then review the diff:

    python -m tests.data.doctor.make
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]
GOLDEN = Path(__file__).resolve().parent / "golden"
LLAMA = "meta-llama/Llama-3.1-8B-Instruct"
EAGLE3_DRAFT = "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B"


class Log:
    """A server log, line by line, with a clock."""

    def __init__(self, seed: int = 0) -> None:
        self.r = random.Random(seed)
        self.t = datetime(2026, 3, 2, 10, 0, 0)
        self.lines: list[str] = []

    def raw(self, text: str) -> None:
        self.lines.append(text)

    def msg(self, text: str, rank: str | None = None) -> None:
        self.t += timedelta(seconds=1)
        self.lines.append(f"[{self.t:%Y-%m-%d %H:%M:%S}{' ' + rank if rank else ''}] {text}")

    def launch(self, algo: str | None = "EAGLE3", draft: str | None = EAGLE3_DRAFT, steps: int | None = 3,
               topk: int | None = 1, tokens: int | None = 4, model: str = LLAMA, **extra: object) -> None:  # fmt: skip
        if algo is None:
            draft = steps = topk = tokens = None
        spec = {"speculative_algorithm": algo, "speculative_draft_model_path": draft, "speculative_num_steps": steps,
                "speculative_eagle_topk": topk, "speculative_num_draft_tokens": tokens}  # fmt: skip
        fields = {"model_path": model, "tokenizer_path": model, "tp_size": 1, "page_size": 1,
                  "max_running_requests": None, "cuda_graph_max_bs": None, "disable_cuda_graph": False,
                  "disable_overlap_schedule": False, "disable_radix_cache": False, **spec,
                  "speculative_accept_threshold_single": 1.0, **extra}  # fmt: skip
        self.msg("server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields.items()) + ")")

    def decode(self, n: int, *, running: int = 4, accept: float | None = 3.0, tput: float = 300.0, queue: int = 0,
               seq: int = 1000, graph: bool = True, rank: str = "TP0", jitter: float = 0.02,
               tput_jitter: float = 0.01) -> None:  # fmt: skip
        """``n`` decode lines: accept len and throughput jitter by a few hundredths, seeded."""
        for _ in range(n):
            parts = [
                f"#running-req: {running}",
                f"#token: {running * seq}",
                f"token usage: {running * seq / 400000:.2f}",
            ]
            if accept is not None:
                parts.append(f"accept len: {max(1.0, accept + self.r.uniform(-jitter, jitter)):.2f}")
            rate = tput * (1 + self.r.uniform(-tput_jitter, tput_jitter))
            parts += [f"cuda graph: {graph}", f"gen throughput (token/s): {rate:.2f}", f"#queue-req: {queue}"]
            self.msg("Decode batch, " + ", ".join(parts), rank)

    def prefill(self, running: int = 4, rank: str = "TP0") -> None:
        self.msg(f"Prefill batch, #new-seq: 1, #new-token: 512, #cached-token: 0, token usage: 0.01, "
                 f"#running-req: {running}, #queue-req: 0, cuda graph: False, input throughput (token/s): 4000.00", rank)  # fmt: skip

    def text(self) -> str:
        return "\n".join(self.lines) + "\n"


def p01_eagle_on_eagle3() -> Log:
    log = Log(1)
    log.launch(algo="EAGLE", draft=EAGLE3_DRAFT)
    log.decode(12, accept=1.0, jitter=0.0)
    return log


def p01_stuck_without_name() -> Log:
    log = Log(2)
    log.launch(algo="EAGLE", draft="org/llama31-draft-head")
    log.decode(8, accept=1.0, jitter=0.0)
    return log


def p02_mismatch() -> Log:
    log = Log(3)
    log.launch(model="Qwen/Qwen2.5-7B-Instruct", draft="yuhuili/EAGLE3-LLaMA3.1-Instruct-8B")
    log.decode(20, accept=1.04)
    return log


def p02_weak() -> Log:
    log = Log(4)
    log.launch()
    log.decode(20, accept=1.3)
    return log


def p04_window() -> Log:
    log = Log(5)
    log.launch(context_length=32768)
    log.msg("Warning: Target model's context_length (32768) is greater than the derived context_length (2048). This "
            "may lead to incorrect model outputs or CUDA errors. Note that the derived context_length may differ from "
            "max_position_embeddings in the model's config.", "TP0")  # fmt: skip
    log.msg("Overriding the draft model's max_position_embeddings to 32768.", "TP0")
    log.decode(10, accept=2.9, seq=1200)
    log.decode(10, accept=1.6, seq=6000)
    return log


def p04_decay() -> Log:
    log = Log(6)
    log.launch()
    log.decode(10, accept=3.0, seq=1000)
    log.decode(10, accept=1.9, seq=16000)
    return log


def p05_large_batch() -> Log:
    log = Log(7)
    log.launch(algo="EAGLE", draft="lmsys/sglang-EAGLE-llama2-chat-7B", steps=5, topk=8, tokens=64)
    log.decode(20, running=32, accept=3.4, tput=900.0)
    return log


def p06_cuda_graph() -> Log:
    log = Log(8)
    log.launch(cuda_graph_max_bs=8)
    log.decode(14, running=6, accept=3.0, graph=True)
    log.decode(6, running=12, accept=3.0, graph=False)
    return log


def p07_cap_48() -> Log:
    log = Log(9)
    log.launch()
    log.decode(10, running=6, accept=3.0)
    log.raw("Max running requests is reset to 48 for speculative decoding. You can override this by explicitly "
            "setting --max-running-requests.")  # fmt: skip
    log.launch()
    log.decode(6, running=30, accept=3.0)
    log.decode(14, running=48, accept=3.0, queue=20)
    return log


def p08_overlap() -> Log:
    log = Log(10)
    log.raw("Overlap scheduler is disabled because of using eagle speculative decoding.")
    log.launch()
    log.decode(10, accept=3.0)
    return log


def p09_page_size() -> Log:
    log = Log(11)
    log.raw("speculative_eagle_topk is adjusted to 1 when page_size > 1")
    log.launch(algo="EAGLE", draft="lmsys/sglang-EAGLE-llama2-chat-7B", steps=5, topk=8, tokens=64, page_size=16)
    log.decode(10, accept=3.0)
    return log


def p09_refused() -> Log:
    log = Log(12)
    log.raw("Traceback (most recent call last):")
    log.raw("ValueError: speculative_eagle_topk > 1 with page_size > 1 is only supported on ('flashinfer', 'fa3', "
            "'triton'); got attention_backend='torch_native'. Use page_size == 1 or one of those backends.")  # fmt: skip
    return log


def p10_retract() -> Log:
    log = Log(13)
    log.launch()
    log.decode(10, running=40, accept=3.0, seq=9000)
    log.msg("KV cache pool is full. Retract requests. #retracted_reqs: 3, #new_tokens_gained: 1536, "
            "#new_token_ratio: 0.4120 -> 0.5120", "TP0")  # fmt: skip
    log.decode(5, running=37, accept=3.0, seq=9000)
    return log


def p13_chain() -> Log:
    log = Log(14)
    log.launch(steps=7, tokens=8)
    log.decode(20, accept=2.4)
    return log


def p14_ngram() -> Log:
    log = Log(15)
    log.launch(algo="NGRAM", draft=None, steps=4, topk=1, tokens=5)
    log.decode(20, accept=1.2)
    return log


def p16_capture() -> Log:
    log = Log(16)
    log.launch()
    log.msg("Capture cuda graph begin. This can take up to several minutes.", "TP0")
    log.msg("Scheduler hit an exception: Traceback (most recent call last):", "TP0")
    log.raw('  File "/usr/lib/python3.11/site-packages/sglang/srt/model_executor/cuda_graph_runner.py", line 310')
    log.raw("Exception: Capture cuda graph failed: CUDA out of memory. Tried to allocate 2.00 GiB.")
    log.raw("Possible solutions:")
    log.raw("1. set --mem-fraction-static to a smaller value (e.g., 0.8 or 0.7)")
    log.raw("2. set --cuda-graph-max-bs to a smaller value (e.g., 16)")
    return log


def p17_expected() -> Log:
    log = Log(17)
    log.launch()
    log.decode(20, running=4, accept=2.0)
    return log


def p18_loses() -> Log:
    """A baseline run at 83 tok/s, then speculation at 60, same file, same load."""
    log = Log(18)
    log.launch(algo=None)
    log.decode(20, running=4, accept=None, tput=83.0)
    log.launch(algo="EAGLE", draft="lmsys/sglang-EAGLE-llama2-chat-7B", steps=5, topk=8, tokens=64)
    log.decode(20, running=4, accept=2.6, tput=60.0)
    return log


def base_89() -> Log:
    log = Log(19)
    log.launch(algo=None)
    log.decode(20, running=4, accept=None, tput=89.0)
    return log


def p18_pays() -> Log:
    """Speculation at 94 tok/s; the baseline (89) is another file: --baseline base_89.log."""
    log = Log(20)
    log.launch()
    log.decode(20, running=4, accept=2.85, tput=94.0)
    return log


def healthy() -> Log:
    log = Log(21)
    log.launch()
    for _ in range(5):
        log.prefill()
        log.decode(6, accept=3.0)
    return log


LOGS: dict[str, Callable[[], Log]] = {f.__name__: f for f in (
    p01_eagle_on_eagle3, p01_stuck_without_name, p02_mismatch, p02_weak, p04_window, p04_decay, p05_large_batch,
    p06_cuda_graph, p07_cap_48, p08_overlap, p09_page_size, p09_refused, p10_retract, p13_chain, p14_ngram,
    p16_capture, p17_expected, p18_loses, base_89, p18_pays, healthy,
)}  # fmt: skip


@dataclass(frozen=True)
class Scenario:
    files: tuple[str, ...]
    """Written by :func:`write_logs` (bare names) or relative to the repository."""
    baseline: str | None = None
    expected: float | None = None


SCENARIOS: dict[str, Scenario] = {name: Scenario((f"{name}.log",)) for name in LOGS if name != "base_89"}
SCENARIOS["p17_expected"] = Scenario(("p17_expected.log",), expected=3.0)
SCENARIOS["p18_pays"] = Scenario(("p18_pays.log",), baseline="base_89.log")
SCENARIOS["seed"] = Scenario(("sample_logs/seed_eagle3_moe.log",))
SCENARIOS["seed_vs_baseline"] = Scenario(
    ("sample_logs/seed_eagle3_moe.log",), baseline="sample_logs/baseline_nospec.log"
)


def write_logs(directory: Path) -> None:
    for name, build in LOGS.items():
        (directory / f"{name}.log").write_text(build().text())


def where(name: str, directory: Path) -> str:
    return str(ROOT / name) if "/" in name else str(directory / name)


def render(name: str, directory: Path) -> str:
    """The doctor's JSON for a scenario, with file paths shown as the scenario names them."""
    from acceptmon.diagnose.depth import DepthInputs, recommend
    from acceptmon.diagnose.read import diagnose
    from acceptmon.diagnose.report import to_json
    from acceptmon.diagnose.rules import load_rules
    from acceptmon.parse.load import load_grammars

    sc = SCENARIOS[name]
    baseline = where(sc.baseline, directory) if sc.baseline else None
    depth = DepthInputs()
    doctor = diagnose([where(f, directory) for f in sc.files], load_grammars(), load_rules(),
                      expected_accept_len=sc.expected, baseline=baseline, depth=depth)  # fmt: skip
    text = to_json(doctor.findings(), recommend(doctor, depth, doctor.reports()))
    return text.replace(str(directory) + "/", "").replace(str(ROOT) + "/", "")


if __name__ == "__main__":
    GOLDEN.mkdir(exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        write_logs(Path(tmp))
        for scenario in SCENARIOS:
            (GOLDEN / f"{scenario}.json").write_text(render(scenario, Path(tmp)) + "\n")
            print("wrote", scenario)

"""Write sample_logs/*.log: realistic SGLang logs built from the documented line formats.

Deterministic (seeded), so the committed logs and tests/golden/*.jsonl only change
when this script does. Each log mixes stats lines with the noise real logs carry:
HTTP access lines, request logs, warnings, tracebacks and server_args dumps.

    python scripts/make_sample_logs.py          # rewrite sample_logs/
"""

from __future__ import annotations

import random
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "sample_logs"

NOISE_WARNINGS = [
    "Some requests timed out when bootstrapping, which means prefill instances fail to receive the KV "
    "indices from the decode instance of this request. If a greater mean TTFT is acceptable, you can "
    "'export SGLANG_DISAGGREGATION_BOOTSTRAP_TIMEOUT=600' (10 minutes) to relax the timeout condition. ",
    "Grammar accept_token failed for req 5799660f79fd4dc481ac2226d5b97102 with token 151643: invalid token",
    "DFLASH Triton accept/bonus failed; falling back to eager path: out of resources",
]
TRACEBACK = """Traceback (most recent call last):
  File "/usr/lib/python3.11/site-packages/sglang/srt/managers/tokenizer_manager.py", line 812, in handle_loop
    await self.send_to_scheduler.send_pyobj(obj)
ConnectionResetError: [Errno 104] Connection reset by peer"""


def server_args(
    model: str, spec: dict[str, object] | None, tp: int, dp: int, ep: int, *, dict_form: bool = False
) -> str:
    """A long server_args dump with the speculative fields in the 0.4.7+ order."""
    spec = spec or {}
    fields: list[tuple[str, object]] = [
        ("model_path", model), ("tokenizer_path", model), ("tokenizer_mode", "auto"),
        ("skip_tokenizer_init", False), ("load_format", "auto"), ("trust_remote_code", True),
        ("dtype", "auto"), ("kv_cache_dtype", "auto"), ("quantization", None), ("context_length", None),
        ("device", "cuda"), ("served_model_name", model), ("chat_template", None), ("is_embedding", False),
        ("mem_fraction_static", 0.85), ("max_running_requests", None), ("max_total_tokens", None),
        ("chunked_prefill_size", 8192), ("max_prefill_tokens", 16384), ("schedule_policy", "fcfs"),
        ("schedule_conservativeness", 1.0), ("cpu_offload_gb", 0), ("tp_size", tp), ("pp_size", 1),
        ("stream_interval", 1), ("random_seed", 1234), ("watchdog_timeout", 300), ("log_level", "info"),
        ("log_requests", False), ("decode_log_interval", 40), ("api_key", None), ("dp_size", dp),
        ("load_balance_method", "round_robin"), ("ep_size", ep), ("enable_dp_attention", dp > 1),
        ("cuda_graph_bs", [1, 2, 4, 8, 16, 24, 32]), ("json_model_override_args", "{}"),
        ("speculative_algorithm", spec.get("algo")), ("speculative_draft_model_path", spec.get("draft")),
        ("speculative_num_steps", spec.get("steps")), ("speculative_eagle_topk", spec.get("topk")),
        ("speculative_num_draft_tokens", spec.get("tokens")), ("speculative_accept_threshold_single", 1.0),
        ("speculative_accept_threshold_acc", 1.0), ("speculative_token_map", None),
        ("speculative_attention_mode", "prefill"), ("enable_metrics", True), ("attention_backend", "fa3"),
        ("sampling_backend", "flashinfer"), ("disable_radix_cache", False), ("enable_torch_compile", False),
        ("torch_compile_max_bs", 32), ("disaggregation_mode", "null"), ("forward_hooks", None),
    ]  # fmt: skip
    if dict_form:
        return "server_args={" + ", ".join(f"{k!r}: {v!r}" for k, v in fields) + "}"
    return "server_args=ServerArgs(" + ", ".join(f"{k}={v!r}" for k, v in fields) + ")"


class Log:
    """Accumulates lines with a moving clock."""

    def __init__(self, start: datetime, seed: int, *, ms: bool = False) -> None:
        self.t = start
        self.rng = random.Random(seed)
        self.ms = ms
        self.lines: list[str] = []

    def stamp(self, ranks: str = "") -> str:
        ts = self.t.strftime("%Y-%m-%d %H:%M:%S")
        if self.ms:
            ts += f".{self.t.microsecond // 1000:03d}"
        return f"[{ts}{' ' + ranks if ranks else ''}]"

    def tick(self, seconds: float) -> None:
        self.t += timedelta(seconds=seconds)

    def add(self, msg: str, ranks: str = "") -> None:
        self.lines.append(f"{self.stamp(ranks)} {msg}")

    def raw(self, text: str) -> None:
        self.lines.extend(text.splitlines())

    def access(self) -> None:
        port = self.rng.randint(30000, 60000)
        self.add(f'INFO:     127.0.0.1:{port} - "POST /generate HTTP/1.1" 200 OK')

    def write(self, name: str) -> None:
        (OUT / name).write_text("\n".join(self.lines) + "\n", encoding="utf-8")


def decode_new(r: random.Random, running: int, accept: float | None, draft: int, tput: float) -> str:
    """0.5.9+ decode line (no trailing separator), new accept-rate definition."""
    spec = ""
    if accept is not None:
        rate = (accept - 1) / (draft - 1)
        spec = f"accept len: {accept:.2f}, accept rate: {rate:.2f}, "
    tokens = running * r.randint(900, 1600)
    return (
        f"Decode batch, #running-req: {running}, #token: {tokens}, token usage: {tokens / 900000:.2f}, "
        f"{spec}cuda graph: True, gen throughput (token/s): {tput:.2f}, #queue-req: {r.choice([0, 0, 0, 1, 2])}"
    )


def prefill_new(r: random.Random, running: int) -> str:
    new = r.randint(60, 2400)
    return (
        f"Prefill batch, #new-seq: 1, #new-token: {new}, #cached-token: {r.randint(0, 900)}, token usage: "
        f"{r.random() * 0.05:.2f}, #running-req: {running}, #queue-req: 0, #pending-token: 0, cuda graph: False, "
        f"input throughput (token/s): {r.uniform(2000, 9000):.2f}"
    )


def launch(log: Log, args: str) -> None:
    log.add("Using default HuggingFace chat template with detected content format: string")
    log.add(args)
    log.tick(40)
    log.add("Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=21.34 GB", "TP0 EP0")
    log.add("Capture cuda graph begin. This can take up to several minutes.", "TP0 EP0")
    log.tick(30)
    log.add("The server is fired up and ready to roll!")


def phase(
    log: Log,
    ranks: list[str],
    intervals: int,
    accept: Callable[[], float] | None,
    draft: int,
    tput: Callable[[], float],
    noise_every: int = 7,
) -> None:
    r = log.rng
    for i in range(intervals):
        for rank in ranks:
            running = r.randint(2, 6)
            if r.random() < 0.3:
                log.add(prefill_new(r, running), rank)
                log.access()
            log.add(decode_new(r, running, accept() if accept else None, draft, tput()), rank)
            log.tick(r.uniform(0.05, 0.3))
        if i % noise_every == noise_every - 1:
            log.add(r.choice(NOISE_WARNINGS), ranks[0])
        log.tick(r.uniform(0.8, 1.5))


def seed_scenario() -> None:
    """8-rank MoE with DP attention and EAGLE3: broken launch, fixed launch, then a steps sweep."""
    log = Log(datetime(2026, 2, 26, 13, 50, 0), seed=1)
    r = log.rng
    ranks = [f"DP{i} TP{i} EP{i}" for i in range(8)]
    model, draft = "Qwen/Qwen3-30B-A3B", "Tengyunw/qwen3_30b_moe_eagle3"

    def eagle(steps: int) -> dict[str, object]:
        return {"algo": "EAGLE3", "draft": draft, "steps": steps, "topk": 1, "tokens": steps + 1}

    # 1. wrong hidden-state layer ids: drafts almost never accepted, throughput below baseline
    launch(log, server_args(model, eagle(3), 8, 8, 8))
    phase(log, ranks, 12, lambda: r.uniform(1.05, 1.2), 4, lambda: r.uniform(70, 80))
    log.raw(f"{log.stamp()} {TRACEBACK}")
    log.add("Received sigterm=15, shutting down")
    log.tick(120)
    # 2. fixed config
    launch(log, server_args(model, eagle(3), 8, 8, 8))
    phase(log, ranks, 12, lambda: r.uniform(2.75, 2.95), 4, lambda: r.uniform(90, 98))
    log.add("avg_spec_accept_length=2.8521", "DP0 TP0 EP0")
    log.raw("Accept length:                           2.85      ")
    # 3. speculative_num_steps sweep
    for steps, (lo, hi), (tlo, thi) in (
        (1, (1.7, 1.9), (88, 93)),
        (2, (2.3, 2.5), (92, 97)),
        (5, (3.1, 3.4), (84, 90)),
    ):
        log.add("Received sigterm=15, shutting down")
        log.tick(90)
        launch(log, server_args(model, eagle(steps), 8, 8, 8))
        phase(
            log,
            ranks,
            8,
            lambda lo=lo, hi=hi: r.uniform(lo, hi),
            steps + 1,
            lambda a=tlo, b=thi: r.uniform(a, b),
        )
    log.write("seed_eagle3_moe.log")


def baseline() -> None:
    """Same model without speculation: decode lines carry no accept fields."""
    log = Log(datetime(2026, 2, 26, 12, 0, 0), seed=2)
    r = log.rng
    launch(log, server_args("Qwen/Qwen3-30B-A3B", None, 8, 8, 8))
    phase(log, [f"DP{i} TP{i} EP{i}" for i in range(8)], 15, None, 1, lambda: r.uniform(86, 92))
    log.write("baseline_nospec.log")


def dp_attention_057() -> None:
    """0.5.7 format: DP PP TP EP order, 'Decode batch,' with trailing ', ', forward iterations on."""
    log = Log(datetime(2025, 12, 1, 9, 0, 0), seed=3)
    r = log.rng
    launch(
        log,
        server_args(
            "deepseek-ai/DeepSeek-V3",
            {"algo": "EAGLE", "draft": "lmsys/DeepSeek-V3-NextN", "steps": 3, "topk": 1, "tokens": 4},
            8,
            4,
            8,
        ),
    )
    it = 4000
    for _ in range(30):
        for d in range(4):
            it += 40
            acc = r.uniform(2.9, 3.3)
            log.add(
                f"Decode batch [{it}], #running-req: {r.randint(8, 20)}, #token: {r.randint(20000, 60000)}, "
                f"token usage: {r.uniform(0.1, 0.4):.2f}, accept len: {acc:.2f}, accept rate: {acc / 4:.2f}, "
                f"cuda graph: True, gen throughput (token/s): {r.uniform(600, 900):.2f}, #queue-req: 0, ",
                f"DP{d} PP0 TP{d} EP{d}",
            )
            log.tick(0.2)
        log.access()
        log.tick(1.0)
    log.write("dp_attention_0.5.7.log")


def pd_decode() -> None:
    """PD disaggregation, decode side, 0.5.3 format with the disaggregation block and trailing ', '."""
    log = Log(datetime(2025, 9, 20, 11, 58, 0), seed=4)
    r = log.rng
    launch(
        log,
        server_args(
            "meta-llama/Llama-3.1-70B-Instruct",
            {
                "algo": "EAGLE3",
                "draft": "yuhuili/EAGLE3-LLaMA3.1-Instruct-70B",
                "steps": 5,
                "topk": 4,
                "tokens": 8,
            },
            4,
            1,
            1,
        ),
    )
    for i in range(60):
        acc = r.uniform(2.4, 3.0)
        log.add(
            f"Decode batch. #running-req: {r.randint(16, 40)}, #token: {r.randint(40000, 90000)}, token usage: "
            f"{r.uniform(0.2, 0.45):.2f}, accept len: {acc:.2f}, pre-allocated usage: {r.uniform(0.05, 0.2):.2f}, "
            f"#prealloc-req: {r.randint(0, 3)}, #transfer-req: {r.randint(0, 2)}, #retracted-req: 0, cuda graph: True, "
            f"gen throughput (token/s): {r.uniform(1800, 2400):.2f}, #queue-req: 0, ",
            "TP0",
        )
        if i % 11 == 10:
            log.add(NOISE_WARNINGS[0], "TP0")
        log.tick(1.1)
    log.write("pd_decode_0.5.3.log")


def old_04x() -> None:
    """0.4.4 format: 'Decode batch.', largest-len, trailing ', ', always a TP prefix, old arg order."""
    log = Log(datetime(2025, 3, 14, 2, 0, 0), seed=5)
    r = log.rng
    log.add(
        "server_args=ServerArgs(model_path='meta-llama/Llama-2-7b-chat-hf', tokenizer_path='meta-llama/Llama-2-7b-chat-hf', "
        "tokenizer_mode='auto', tp_size=1, dp_size=1, speculative_draft_model_path='lmsys/sglang-EAGLE-llama2-chat-7B', "
        "speculative_algorithm='EAGLE', speculative_num_steps=5, speculative_num_draft_tokens=64, speculative_eagle_topk=8)"
    )
    log.tick(60)
    for _ in range(50):
        if r.random() < 0.5:
            log.add(
                f"Prefill batch. #new-seq: 1, #new-token: {r.randint(40, 900)}, #cached-token: 0, token usage: 0.01, "
                f"#running-req: {r.randint(0, 8)}, #queue-req: 0, ",
                "TP0",
            )
            log.add(f'INFO:     127.0.0.1:{r.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK')
        log.add(
            f"Decode batch. #running-req: {r.randint(4, 32)}, #token: {r.randint(2000, 12000)}, token usage: "
            f"{r.uniform(0.01, 0.05):.2f}, accept len: {r.uniform(3.0, 3.6):.2f}, gen throughput (token/s): "
            f"{r.uniform(600, 900):.2f}, largest-len: 0, #queue-req: 0, ",
            "TP0",
        )
        log.tick(1.3)
    log.write("old_0.4.4.log")


def newest() -> None:
    """0.5.23 format: ms timestamps, iteration numbers, cap len, occupancy suffix, dict server_args."""
    log = Log(datetime(2026, 9, 1, 11, 59, 0, 250000), seed=6, ms=True)
    r = log.rng
    log.add(
        server_args(
            "meta-llama/Llama-3.1-8B-Instruct",
            {
                "algo": "EAGLE3",
                "draft": "jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B",
                "steps": 3,
                "topk": 1,
                "tokens": 4,
            },
            1,
            1,
            1,
            dict_form=True,
        )
    )
    log.tick(45.123)
    it = 20000
    for _ in range(50):
        it += 40
        acc = r.uniform(2.8, 3.2)
        log.add(
            f"Decode batch [{it}], #running-req: {r.randint(4, 12)}, #token: {r.randint(2000, 9000)}, token usage: "
            f"{r.uniform(0.01, 0.05):.2f}, accept len: {acc:.2f}, accept rate: {(acc - 1) / 3:.2f}, cap len: "
            f"{acc + 0.3:.2f}, cuda graph: True, gen throughput (token/s): {r.uniform(650, 750):.2f}, #queue-req: 0, "
            f"fwd occupancy: {r.uniform(85, 95):.2f}%, fwd+idle occupancy: {r.uniform(97, 99.9):.2f}%",
            "TP0",
        )
        if r.random() < 0.2:
            log.add(
                "Finish: obj=GenerateReqInput(rid='5799660f79fd4dc481ac2226d5b97102', ...), out={'meta_info': "
                "{'id': '5799660f79fd4dc481ac2226d5b97102', 'prompt_tokens': 23, 'completion_tokens': 417, "
                f"'spec_accept_rate': {r.uniform(0.5, 0.7):.2f}, 'spec_accept_length': {acc:.2f}, 'spec_verify_ct': 147}}}}"
            )
        log.tick(r.uniform(0.4, 0.6))
    log.write("newest_0.5.23.log")


def hybrid() -> None:
    """Hybrid models: Mamba (0.5.7, '#full token', 'mamba usage') and SWA (0.5.1) in one log."""
    log = Log(datetime(2025, 12, 1, 12, 0, 0), seed=7)
    r = log.rng
    launch(
        log,
        server_args(
            "Qwen/Qwen3-Next-80B-A3B-Instruct",
            {"algo": "NEXTN", "draft": None, "steps": 3, "topk": 1, "tokens": 4},
            4,
            1,
            4,
        ),
    )
    for _ in range(40):
        acc = r.uniform(2.9, 3.2)
        log.add(
            f"Decode batch, #running-req: {r.randint(4, 12)}, #full token: {r.randint(8000, 16000)}, full token usage: "
            f"{r.uniform(0.01, 0.03):.2f}, mamba num: {r.randint(20, 48)}, mamba usage: {r.uniform(0.4, 0.7):.2f}, "
            f"accept len: {acc:.2f}, accept rate: {acc / 4:.2f}, cuda graph: True, gen throughput (token/s): "
            f"{r.uniform(20, 30):.2f}, #queue-req: {r.randint(0, 2)}, "
        )
        log.tick(2.0)
    log.add("Received sigterm=15, shutting down")
    launch(
        log,
        server_args(
            "google/gemma-3-27b-it",
            {"algo": "EAGLE", "draft": "some/gemma-eagle", "steps": 2, "topk": 1, "tokens": 3},
            2,
            1,
            1,
        ),
    )
    for _ in range(30):
        log.add(
            f"Decode batch. #running-req: {r.randint(2, 6)}, #full token: {r.randint(4000, 9000)}, full token usage: "
            f"{r.uniform(0.03, 0.06):.2f}, #swa token: {r.randint(2000, 4096)}, swa token usage: {r.uniform(0.1, 0.2):.2f}, "
            f"accept len: {r.uniform(2.2, 2.6):.2f}, cuda graph: True, gen throughput (token/s): {r.uniform(250, 330):.2f}, "
            "#queue-req: 0, ",
            "TP0",
        )
        log.tick(2.0)
    log.write("hybrid_mamba_swa.log")


def main() -> None:
    OUT.mkdir(exist_ok=True)
    for make in (seed_scenario, baseline, dp_attention_057, pd_decode, old_04x, newest, hybrid):
        make()


if __name__ == "__main__":
    main()

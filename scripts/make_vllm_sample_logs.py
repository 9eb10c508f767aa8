"""Write sample_logs/vllm_*.log: realistic vLLM logs built from vLLM's own format strings.

Deterministic (seeded). Each format string below is copied from the vLLM release named in
the log (file:line in the envelope is the real call site). Speculation is simulated per
verify step, so the v0 counters keep vLLM's semantics (accepted = every accepted position,
emitted = accepted prefix + 1) and the v1 per-position rates sum to accepted / drafts.

    python scripts/make_vllm_sample_logs.py [--expect-dir DIR]   # rewrite sample_logs/vllm_*.log
"""

from __future__ import annotations

import argparse
import json
import random
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path

OUT = Path(__file__).resolve().parent.parent / "sample_logs"
CYAN, RESET = "\x1b[1;36m", "\x1b[0;0m"


@dataclass
class Run:
    """What a correct parser must find for one server start."""

    start: str
    version: str
    method: str | None
    draft: str | None
    k: int
    spec_lines: int = 0
    accepted: int = 0
    drafted: int = 0
    drafts: int = 0
    emitted: int = 0


@dataclass
class Log:
    """Lines of one log plus the clock, envelope style and the per-run truth."""

    style: str  # "v06" | "v08" | "v010"
    now: datetime
    rng: random.Random
    lines: list[str] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    counts: dict[str, int] = field(default_factory=lambda: {"spec": 0, "throughput": 0, "launch": 0})

    def emit(self, where: str, msg: str, level: str = "INFO", proc: str = "") -> None:
        ts = self.now.strftime("%m-%d %H:%M:%S")
        if self.style == "v06":
            self.lines.append(f"{level} {ts} {where}] {msg}")
        elif self.style == "v08":
            self.lines.append(f"{level} {ts} [{where}] {msg}")
        else:
            self.lines.append(f"{CYAN}({proc}){RESET} {level} {ts} [{where}] {msg}")

    def raw(self, text: str, proc: str = "") -> None:
        self.lines.append(f"{CYAN}({proc}){RESET} {text}" if proc else text)

    def tick(self, seconds: float) -> None:
        self.now += timedelta(seconds=seconds)


def verify(rng: random.Random, drafts: int, q: list[float]) -> tuple[int, list[int], int, int]:
    """Simulate verify steps: v1 accepted (prefix), per-position counts, v0 accepted, emitted."""
    prefix_total, v0_accepted, per_pos = 0, 0, [0] * len(q)
    for _ in range(drafts):
        ok = [rng.random() < p for p in q]
        prefix = next((i for i, hit in enumerate(ok) if not hit), len(q))
        prefix_total += prefix
        v0_accepted += sum(ok)
        for i in range(prefix):
            per_pos[i] += 1
    return prefix_total, per_pos, v0_accepted, prefix_total + drafts


def quality(i: int, drop: range, healthy: float) -> list[float]:
    base = 0.42 if i in drop else healthy
    return [base, base * 0.93, base * 0.86, base * 0.8][:4]


def noise_v06(log: Log) -> None:
    rid = f"cmpl-{log.rng.getrandbits(128):032x}"
    pick = log.rng.random()
    if pick < 0.4:
        log.emit("async_llm_engine.py:209", f"Added request {rid}.")
        log.raw(f'INFO:     10.0.4.{log.rng.randint(2, 60)}:{log.rng.randint(30000, 60000)} - "POST /v1/completions HTTP/1.1" 200 OK')  # fmt: skip
    elif pick < 0.75:
        log.emit("async_llm_engine.py:177", f"Finished request {rid}.")
    elif pick < 0.9:
        log.raw(f'INFO:     10.0.4.{log.rng.randint(2, 60)}:{log.rng.randint(30000, 60000)} - "GET /metrics HTTP/1.1" 200 OK')  # fmt: skip
    else:
        log.emit("scheduler.py:1484", f"Sequence group {rid} is preempted by PreemptionMode.RECOMPUTE mode because there is not enough KV cache space. This can affect the end-to-end performance. Increase gpu_memory_utilization or tensor_parallel_size to provide more KV cache memory. total_num_cumulative_preemption=50", "WARNING")  # fmt: skip


def launch_v06(log: Log, model: str, draft: str, k: int) -> Run:
    start = log.now.strftime("%m-%d %H:%M:%S")
    log.emit("api_server.py:528", "vLLM API server version 0.6.3")
    log.emit("api_server.py:529", f"args: Namespace(host='0.0.0.0', port=8000, uvicorn_log_level='info', allow_credentials=False, allowed_origins=['*'], allowed_methods=['*'], allowed_headers=['*'], api_key=None, lora_modules=None, prompt_adapters=None, chat_template=None, response_role='assistant', ssl_keyfile=None, ssl_certfile=None, root_path=None, middleware=[], return_tokens_as_token_ids=False, disable_frontend_multiprocessing=False, enable_auto_tool_choice=False, tool_call_parser=None, model={model!r}, tokenizer=None, skip_tokenizer_init=False, revision=None, tokenizer_mode='auto', trust_remote_code=False, download_dir=None, load_format='auto', dtype='auto', kv_cache_dtype='auto', max_model_len=8192, distributed_executor_backend=None, pipeline_parallel_size=1, tensor_parallel_size=4, max_parallel_loading_workers=None, block_size=16, enable_prefix_caching=True, swap_space=4, gpu_memory_utilization=0.9, max_num_seqs=256, enforce_eager=False, use_v2_block_manager=True, num_lookahead_slots=0, seed=0, num_gpu_blocks_override=None, speculative_model={draft!r}, speculative_model_quantization=None, num_speculative_tokens={k}, speculative_disable_mqa_scorer=False, speculative_draft_tensor_parallel_size=1, speculative_max_model_len=None, speculative_disable_by_batch_size=None, ngram_prompt_lookup_max=None, ngram_prompt_lookup_min=None, spec_decoding_acceptance_method='rejection_sampler', typical_acceptance_sampler_posterior_threshold=None, typical_acceptance_sampler_posterior_alpha=None, disable_log_requests=False, max_log_len=None, disable_fastapi_docs=False, enable_prompt_tokens_details=False)")  # fmt: skip
    log.tick(4)
    log.emit("llm_engine.py:237", f"Initializing an LLM engine (v0.6.3) with config: model={model!r}, speculative_config=SpeculativeConfig(draft_model={draft!r}, num_spec_tokens={k}), tokenizer={model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, override_neuron_config=None, rope_scaling=None, rope_theta=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=8192, download_dir=None, load_format=LoadFormat.AUTO, tensor_parallel_size=4, pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, quantization_param_path=None, device_config=cuda, decoding_config=DecodingConfig(guided_decoding_backend='outlines'), observability_config=ObservabilityConfig(otlp_traces_endpoint=None, collect_model_forward_time=False, collect_model_execute_time=False), seed=0, served_model_name={model}, use_v2_block_manager=True, num_scheduler_steps=1, chunked_prefill_enabled=False multi_step_stream_outputs=True, enable_prefix_caching=True, use_async_output_proc=False, use_cached_outputs=True, mm_processor_kwargs=None)")  # fmt: skip
    log.tick(41)
    log.emit("distributed_gpu_executor.py:57", "# GPU blocks: 28342, # CPU blocks: 3276")
    log.emit("spec_decode_worker.py:181", "[Speculative Decoding] Configuring SpecDecodeWorker with sampler=<class 'vllm.model_executor.layers.rejection_sampler.RejectionSampler'>")  # fmt: skip
    log.raw("INFO:     Started server process [1417]")
    log.raw("INFO:     Uvicorn running on http://0.0.0.0:8000 (Press CTRL+C to quit)")
    log.counts["launch"] += 1
    return Run(start, "0.6.3", "draft_model", draft, k)  # vLLM infers the method from the draft


def v0_interval(log: Log, run: Run, q: list[float], first: bool) -> None:
    """One 5 s LoggingStatLogger interval: throughput, prefix cache and cumulative spec line."""
    k = run.k
    seqs = 0 if first else log.rng.randint(450, 650)
    _acc1, _pos, acc0, emitted = verify(log.rng, seqs, q)
    run.accepted, run.drafted, run.emitted = run.accepted + acc0, run.drafted + seqs * k, run.emitted + emitted
    run.drafts += seqs
    prompt = log.rng.uniform(600, 2400) if first else log.rng.uniform(0, 900)
    log.emit("metrics.py:345", f"Avg prompt throughput: {prompt:.1f} tokens/s, Avg generation throughput: {emitted / 5:.1f} tokens/s, Running: {log.rng.randint(18, 40)} reqs, Swapped: 0 reqs, Pending: {log.rng.choice([0, 0, 0, 2, 5])} reqs, GPU KV cache usage: {log.rng.uniform(8, 45):.1f}%, CPU KV cache usage: 0.0%.")  # fmt: skip
    log.emit("metrics.py:361", f"Prefix cache hit rate: GPU: {log.rng.uniform(20, 60):.2f}%, CPU: 0.00%")
    log.counts["throughput"] += 1
    rate = f"{run.accepted / run.drafted:.3f}" if run.drafted else "nan"
    eff = f"{run.emitted / (run.drafts * (k + 1)):.3f}" if run.drafts else "nan"
    log.emit("metrics.py:367", f"Speculative metrics: Draft acceptance rate: {rate}, System efficiency: {eff}, Number of speculative tokens: {k}, Number of accepted tokens: {run.accepted}, Number of draft tokens: {run.drafted}, Number of emitted tokens: {run.emitted}.")  # fmt: skip
    log.counts["spec"] += 1
    run.spec_lines += 1


def make_v06() -> Log:
    log = Log("v06", datetime(2024, 10, 16, 19, 0, 1), random.Random(6))
    run = launch_v06(log, "meta-llama/Meta-Llama-3.1-70B-Instruct", "meta-llama/Llama-3.2-1B-Instruct", 3)
    log.runs.append(run)
    for i in range(42):
        log.tick(5.0 + log.rng.random() * 0.05)
        v0_interval(log, run, quality(i, range(24, 31), 0.86)[:3], i == 0)
        for _ in range(log.rng.randint(0, 2)):
            noise_v06(log)
    return log


def launch_v085(log: Log) -> Run:
    model, draft, k = "meta-llama/Llama-3.1-8B-Instruct", "yuhuili/EAGLE-LLaMA3.1-Instruct-8B", 3
    spec = {"method": "eagle", "model": draft, "num_speculative_tokens": k}
    start = log.now.strftime("%m-%d %H:%M:%S")
    log.emit("api_server.py:1043", "vLLM API server version 0.8.5")
    log.emit("api_server.py:1044", f"args: Namespace(subparser='serve', model_tag={model!r}, config='', host='0.0.0.0', port=8000, uvicorn_log_level='info', disable_uvicorn_access_log=False, allow_credentials=False, allowed_origins=['*'], allowed_methods=['*'], allowed_headers=['*'], api_key=None, lora_modules=None, prompt_adapters=None, chat_template=None, chat_template_content_format='auto', response_role='assistant', ssl_keyfile=None, ssl_certfile=None, ssl_ca_certs=None, enable_ssl_refresh=False, ssl_cert_reqs=0, root_path=None, middleware=[], return_tokens_as_token_ids=False, disable_frontend_multiprocessing=False, enable_request_id_headers=False, enable_auto_tool_choice=False, tool_call_parser=None, tool_parser_plugin='', model={model!r}, task='auto', tokenizer=None, hf_config_path=None, skip_tokenizer_init=False, revision=None, code_revision=None, tokenizer_revision=None, tokenizer_mode='auto', trust_remote_code=False, allowed_local_media_path=None, load_format='auto', download_dir=None, model_loader_extra_config={{}}, use_tqdm_on_load=True, config_format=<ConfigFormat.AUTO: 'auto'>, dtype='auto', max_model_len=16384, guided_decoding_backend='auto', reasoning_parser=None, logits_processor_pattern=None, model_impl='auto', distributed_executor_backend=None, pipeline_parallel_size=1, tensor_parallel_size=1, data_parallel_size=1, enable_expert_parallel=False, max_parallel_loading_workers=None, ray_workers_use_nsight=False, disable_custom_all_reduce=False, block_size=None, gpu_memory_utilization=0.9, swap_space=4, kv_cache_dtype='auto', num_gpu_blocks_override=None, enable_prefix_caching=None, prefix_caching_hash_algo='builtin', cpu_offload_gb=0, calculate_kv_scales=False, disable_sliding_window=False, use_v2_block_manager=True, seed=None, max_logprobs=20, disable_log_stats=False, quantization=None, rope_scaling=None, rope_theta=None, hf_token=None, hf_overrides=None, enforce_eager=False, max_seq_len_to_capture=8192, tokenizer_pool_size=0, tokenizer_pool_type='ray', tokenizer_pool_extra_config={{}}, limit_mm_per_prompt={{}}, mm_processor_kwargs=None, disable_mm_preprocessor_cache=False, enable_lora=None, enable_prompt_adapter=None, device='auto', speculative_config={spec!r}, ignore_patterns=[], served_model_name=None, qlora_adapter_name_or_path=None, show_hidden_metrics_for_version=None, otlp_traces_endpoint=None, collect_detailed_traces=None, disable_async_output_proc=False, max_num_batched_tokens=None, max_num_seqs=None, max_num_partial_prefills=1, max_long_partial_prefills=1, long_prefill_token_threshold=0, num_lookahead_slots=0, scheduler_delay_factor=0.0, enable_chunked_prefill=None, multi_step_stream_outputs=True, scheduling_policy='fcfs', disable_chunked_mm_input=False, scheduler_cls='vllm.core.scheduler.Scheduler', override_neuron_config=None, override_pooler_config=None, compilation_config=None, kv_transfer_config=None, worker_cls='auto', worker_extension_cls='', generation_config='auto', override_generation_config=None, enable_sleep_mode=False, additional_config=None, enable_reasoning=False, disable_cascade_attn=False, disable_log_requests=False, max_log_len=None, disable_fastapi_docs=False, enable_prompt_tokens_details=False, enable_server_load_tracking=False, dispatch_function=<function ServeSubcommand.cmd at 0x7f3c2a1b5e40>)")  # fmt: skip
    log.tick(6)
    log.emit("core.py:58", f'Initializing a V1 LLM engine (v0.8.5) with config: model={model!r}, speculative_config=SpeculativeConfig(method=\'eagle\', model={draft!r}, num_spec_tokens={k}), tokenizer={model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, override_neuron_config=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=16384, download_dir=None, load_format=LoadFormat.AUTO, tensor_parallel_size=1, pipeline_parallel_size=1, disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto,  device_config=cuda, decoding_config=DecodingConfig(guided_decoding_backend=\'auto\', reasoning_backend=None), observability_config=ObservabilityConfig(show_hidden_metrics=False, otlp_traces_endpoint=None, collect_model_forward_time=False, collect_model_execute_time=False), seed=None, served_model_name={model}, num_scheduler_steps=1, multi_step_stream_outputs=True, enable_prefix_caching=True, chunked_prefill_enabled=True, use_async_output_proc=True, disable_mm_preprocessor_cache=False, mm_processor_kwargs=None, pooler_config=None, compilation_config={{"level":3,"custom_ops":["none"],"splitting_ops":["vllm.unified_attention","vllm.unified_attention_with_output"],"use_inductor":true,"compile_sizes":[],"use_cudagraph":true,"cudagraph_num_of_warmups":1,"max_capture_size":512}}')  # fmt: skip
    log.tick(38)
    log.emit("kv_cache_utils.py:634", "GPU KV cache size: 412,736 tokens")
    log.emit("kv_cache_utils.py:637", "Maximum concurrency for 16,384 tokens per request: 25.19x")
    log.raw("INFO:     Started server process [20911]")
    log.counts["launch"] += 1
    return Run(start, "0.8.5", "eagle", draft, k)


def v1_interval(log: Log, run: Run, q: list[float], secs: float, engine: int, proc: str = "") -> None:
    """One v1 LoggingStatLogger.log(): Engine NNN throughput line, then its SpecDecoding line."""
    drafts = log.rng.randint(600, 900)
    acc, pos, _acc0, emitted = verify(log.rng, drafts, q)
    drafted = drafts * run.k
    run.spec_lines, run.accepted, run.drafted, run.drafts = (
        run.spec_lines + 1,
        run.accepted + acc,
        run.drafted + drafted,
        run.drafts + drafts,
    )
    run.emitted += emitted
    where = "loggers.py:111" if run.version == "0.8.5" else "loggers.py:123"
    log.emit(where, f"Engine {engine:03d}: Avg prompt throughput: {log.rng.uniform(0, 1500):.1f} tokens/s, Avg generation throughput: {emitted / secs:.1f} tokens/s, Running: {log.rng.randint(10, 48)} reqs, Waiting: {log.rng.choice([0, 0, 0, 3])} reqs, GPU KV cache usage: {log.rng.uniform(5, 40):.1f}%, Prefix cache hit rate: {log.rng.uniform(30, 70):.1f}%", proc=proc)  # fmt: skip
    rates = ", ".join(f"{c / drafts:.3f}" for c in pos)
    if run.version == "0.8.5":
        msg = f"SpecDecoding metrics: Draft acceptance rate: {acc / drafted * 100:.1f}%, Mean acceptance length: {acc / drafts:.2f}, Accepted: {acc} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}"
        log.emit("metrics.py:82", msg)
    else:
        msg = f"SpecDecoding metrics: Mean acceptance length: {1 + acc / drafts:.2f}, Accepted throughput: {acc / secs:.2f} tokens/s, Drafted throughput: {drafted / secs:.2f} tokens/s, Accepted: {acc} tokens, Drafted: {drafted} tokens, Per-position acceptance rate: {rates}, Avg Draft acceptance rate: {acc / drafted * 100:.1f}%"
        log.emit("metrics.py:96", msg, proc=proc)
    log.counts["throughput"] += 1
    log.counts["spec"] += 1


def make_v085() -> Log:
    log = Log("v08", datetime(2025, 5, 2, 9, 14, 3), random.Random(85))
    run = launch_v085(log)
    log.runs.append(run)
    for i in range(55):
        log.tick(5.0 + log.rng.random() * 0.02)
        v1_interval(log, run, quality(i, range(30, 38), 0.84)[:3], 5.0, 0)
        if log.rng.random() < 0.5:
            log.emit("async_llm.py:252", f"Added request chatcmpl-{log.rng.getrandbits(128):032x}.")
            log.raw(f'INFO:     172.17.0.1:{log.rng.randint(30000, 60000)} - "POST /v1/chat/completions HTTP/1.1" 200 OK')  # fmt: skip
    return log


def launch_v0102(log: Log, k: int, pid: int) -> Run:
    """One 0.10.2 server start with two data-parallel engine cores (each logs its own config)."""
    model, draft = "Qwen/Qwen3-8B", "Tengyunw/qwen3_8b_eagle3"
    spec = {"method": "eagle3", "model": draft, "num_speculative_tokens": k}
    api, start = f"APIServer pid={pid}", log.now.strftime("%m-%d %H:%M:%S")
    log.emit("api_server.py:1896", "vLLM API server version 0.10.2", proc=api)
    log.emit("utils.py:328", f"non-default args: {{'model_tag': {model!r}, 'host': '0.0.0.0', 'model': {model!r}, 'max_model_len': 16384, 'data_parallel_size': 2, 'speculative_config': {spec!r}}}", proc=api)  # fmt: skip
    log.emit("__init__.py:742", "Resolved architecture: Qwen3ForCausalLM", proc=api)
    log.tick(7)
    for dp in (0, 1):
        log.emit("core.py:76", f'Initializing a V1 LLM engine (v0.10.2) with config: model={model!r}, speculative_config=SpeculativeConfig(method=\'eagle3\', model={draft!r}, num_spec_tokens={k}), tokenizer={model!r}, skip_tokenizer_init=False, tokenizer_mode=auto, revision=None, tokenizer_revision=None, trust_remote_code=False, dtype=torch.bfloat16, max_seq_len=16384, download_dir=None, load_format=auto, tensor_parallel_size=1, pipeline_parallel_size=1, data_parallel_size=2, disable_custom_all_reduce=False, quantization=None, enforce_eager=False, kv_cache_dtype=auto, device_config=cuda, decoding_config=DecodingConfig(backend=\'auto\', disable_fallback=False, disable_any_whitespace=False, disable_additional_properties=False, reasoning_backend=\'\'), observability_config=ObservabilityConfig(show_hidden_metrics_for_version=None, otlp_traces_endpoint=None, collect_detailed_traces=None), seed=0, served_model_name={model}, enable_prefix_caching=True, chunked_prefill_enabled=True, use_async_output_proc=True, pooler_config=None, compilation_config={{"level":3,"debug_dump_path":"","use_cudagraph":true,"cudagraph_num_of_warmups":1,"max_capture_size":512}}', proc=f"EngineCore_DP{dp} pid={pid + 61 + dp}")  # fmt: skip
    log.tick(44)
    for dp in (0, 1):
        log.emit("kv_cache_utils.py:1028", "GPU KV cache size: 398,224 tokens", proc=f"EngineCore_DP{dp} pid={pid + 61 + dp}")  # fmt: skip
    log.emit("api_server.py:1971", "Starting vLLM API server 0 on http://0.0.0.0:8000", proc=api)
    log.raw(f"INFO:     Started server process [{pid}]", proc=api)
    log.counts["launch"] += 1
    return Run(start, "0.10.2", "eagle3", draft, k)


def serve_v0102(log: Log, run: Run, pid: int, intervals: int, drop: range) -> None:
    api = f"APIServer pid={pid}"
    for i in range(intervals):
        log.tick(10.0 + log.rng.random() * 0.03)
        healthy = 0.9 if run.k == 3 else 0.87
        for engine in (0, 1):
            v1_interval(log, run, quality(i, drop, healthy)[: run.k], 10.0, engine, api)
        if i % 3 == 0:
            port = log.rng.randint(30000, 60000)
            log.raw(f'INFO:     10.1.0.7:{port} - "POST /v1/chat/completions HTTP/1.1" 200 OK', proc=api)
        if i == intervals // 2:
            log.emit("api_server.py:887", "To indicate that Score API is not part of standard OpenAI API, we have moved it to `/score`. Please update your client accordingly.", "WARNING", proc=api)  # fmt: skip


def make_v0102_dp() -> Log:
    log = Log("v010", datetime(2025, 12, 31, 23, 41, 2), random.Random(102))
    run = launch_v0102(log, 3, 3051)
    log.runs.append(run)
    serve_v0102(log, run, 3051, 30, range(18, 23))
    log.tick(10.0)
    log.emit("loggers.py:123", "Engine 000: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 52.4%", proc="APIServer pid=3051")  # fmt: skip
    log.emit("loggers.py:123", "Engine 001: Avg prompt throughput: 0.0 tokens/s, Avg generation throughput: 0.0 tokens/s, Running: 0 reqs, Waiting: 0 reqs, GPU KV cache usage: 0.0%, Prefix cache hit rate: 49.8%", proc="APIServer pid=3051")  # fmt: skip
    log.counts["throughput"] += 2
    log.tick(95)
    log.emit("launcher.py:101", "Shutting down FastAPI HTTP server.", proc="APIServer pid=3051")
    log.raw("INFO:     Shutting down", proc="APIServer pid=3051")
    log.tick(600)
    run2 = launch_v0102(log, 4, 4410)
    log.runs.append(run2)
    serve_v0102(log, run2, 4410, 16, range(0))
    return log


def summary(log: Log, name: str) -> dict[str, object]:
    runs = [
        {"start": r.start, "version": r.version, "spec_method": r.method, "spec_draft_model": r.draft,
         "num_speculative_tokens": r.k, "spec_lines": r.spec_lines, "accepted_tokens": r.accepted,
         "drafted_tokens": r.drafted, "num_drafts": r.drafts, "emitted_tokens": r.emitted,
         "accept_rate": round(r.accepted / r.drafted, 6), "accept_len": round(r.emitted / r.drafts, 6)}
        for r in log.runs
    ]  # fmt: skip
    return {"log": name, "lines": len(log.lines), "spec_lines": log.counts["spec"],
            "throughput_lines": log.counts["throughput"], "launches": log.counts["launch"], "runs": runs}  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--expect-dir", type=Path, help="also write <log>.expect.json here")
    args = ap.parse_args()
    for name, make in (
        ("vllm_v0_0.6.log", make_v06),
        ("vllm_v1_0.8.5.log", make_v085),
        ("vllm_v1_0.10.2_dp.log", make_v0102_dp),
    ):
        log = make()
        (OUT / name).write_text("\n".join(log.lines) + "\n")
        if args.expect_dir:
            text = json.dumps(summary(log, name), indent=2) + "\n"
            (args.expect_dir / f"{name}.expect.json").write_text(text)
        print(f"{name}: {len(log.lines)} lines")


if __name__ == "__main__":
    main()

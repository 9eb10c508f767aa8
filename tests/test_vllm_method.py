"""vLLM's method inference: launch lines without a method are the method vLLM ran, per release, everywhere.

The table holds real launch lines of the releases named (the envelopes and ``file:lineno``
are the releases' own; the middle of each config is cut, acceptmon reads keys, not
positions), each parsed by the shipped grammars. An ``args``/``non-default args`` line does
not carry the version: in a log it comes from another line of the same server start, so the
case opens the launch with that version first, as the line before it would.
"""

from __future__ import annotations

import pytest

from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.records import LaunchConfig
from tests.conftest import SAMPLES
from tests.test_cli import acceptmon

CYAN, RESET = "\x1b[1;36m", "\x1b[0;0m"
V063 = "INFO 10-16 19:00:05 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: "
V085_ARGS = ("INFO 05-02 09:14:03 [api_server.py:1044] args: Namespace(subparser='serve', model_tag='meta-llama/"
             "Llama-3.1-8B-Instruct', model='meta-llama/Llama-3.1-8B-Instruct', tensor_parallel_size=1, ")  # fmt: skip
V092 = "INFO 07-08 10:00:00 [cli_args.py:325] non-default args: {"
API = f"{CYAN}(APIServer pid=3051){RESET} INFO 09-20 10:00:00 [utils.py:328] non-default args: {{"
QWEN = "'model_tag': 'Qwen/Qwen3-8B', 'model': 'Qwen/Qwen3-8B', "
V011 = f"{CYAN}(APIServer pid=77){RESET} INFO 10-03 10:00:00 [utils.py:233] non-default args: {{"
DSV31 = "'model_tag': 'deepseek-ai/DeepSeek-V3.1', 'model': 'deepseek-ai/DeepSeek-V3.1', 'tensor_parallel_size': 8, "

CASES = [
    # (version from another line of the start, launch line, the method vLLM ran, how acceptmon knows it)
    pytest.param(None, V063 + "model='meta-llama/Llama-3.1-70B-Instruct', speculative_config=SpeculativeConfig("
                 "draft_model='meta-llama/Llama-3.2-1B-Instruct', num_spec_tokens=3), tokenizer='meta-llama/Llama-3.1-"
                 "70B-Instruct', tensor_parallel_size=4, seed=0)", "draft_model", "inferred", id="1-0.6.3-draft"),
    pytest.param(None, V063 + "model='meta-llama/Llama-2-7b-chat-hf', speculative_config=SpeculativeConfig("
                 "draft_model='[ngram]', num_spec_tokens=5), tokenizer='meta-llama/Llama-2-7b-chat-hf', "
                 "tensor_parallel_size=1, seed=0)", "ngram", "logged", id="2-0.6.3-ngram"),
    pytest.param(None, "INFO 10-16 19:00:01 api_server.py:529] args: Namespace(host='0.0.0.0', port=8000, model='meta-"
                 "llama/Meta-Llama-3-70B-Instruct', tensor_parallel_size=4, speculative_model='ibm-ai-platform/llama3-"
                 "70b-accelerator', num_speculative_tokens=None, ngram_prompt_lookup_max=None, spec_decoding_acceptance_"
                 "method='rejection_sampler')", "mlp_speculator", "inferred", id="3-args-accelerator"),
    pytest.param(None, "INFO 12-20 08:00:00 llm_engine.py:234] Initializing an LLM engine (v0.6.6) with config: model="
                 "'meta-llama/Meta-Llama-3-8B-Instruct', speculative_config=SpeculativeConfig(draft_model='abhigoyal/"
                 "vllm-eagle-llama-68m-random', num_spec_tokens=4), tokenizer='meta-llama/Meta-Llama-3-8B-Instruct', "
                 "tensor_parallel_size=1, use_cached_outputs=False, ", "eagle", "inferred", id="4-0.6.6-eagle-name"),
    pytest.param(None, "INFO 02-21 10:00:00 llm_engine.py:234] Initializing a V0 LLM engine (v0.7.3) with config: "
                 "model='deepseek-ai/DeepSeek-R1', speculative_config=SpeculativeConfig(draft_model='deepseek-ai/"
                 "DeepSeek-R1', num_spec_tokens=1), tokenizer='deepseek-ai/DeepSeek-R1', tensor_parallel_size=8, "
                 "use_cached_outputs=True, ", "deepseek_mtp", "inferred", id="5-0.7.3-draft-is-target"),
    pytest.param(None, "INFO 03-28 10:00:00 [llm_engine.py:241] Initializing a V0 LLM engine (v0.8.2) with config: "
                 "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig(draft_model='yuhuili/"
                 "EAGLE-LLaMA3.1-Instruct-8B', num_spec_tokens=3), tokenizer='meta-llama/Llama-3.1-8B-Instruct', "
                 "tensor_parallel_size=1, use_cached_outputs=True, ", "eagle", "inferred", id="6-0.8.2-eagle-name"),
    pytest.param("0.8.4", V085_ARGS.replace("1044]", "1043]") + "speculative_config={'method': 'eagle', 'model': "
                 "'my-org/llama3.1-8b-draft-head', 'num_speculative_tokens': 3})", "draft_model", "inferred",
                 id="7-0.8.4-detection-overrides-eagle"),
    pytest.param("0.8.5", V085_ARGS + "speculative_config={'model': 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', "
                 "'num_speculative_tokens': 3})", "eagle", "inferred", id="8-0.8.5-eagle3-name-runs-eagle"),
    pytest.param(None, V085_ARGS + "speculative_config={'model': 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', "
                 "'num_speculative_tokens': 3})", "eagle3", "inferred", id="8b-no-version-eagle3-name"),
    pytest.param("0.8.5", V085_ARGS + "speculative_config={'model': 'ngram', 'num_speculative_tokens': 5, "
                 "'prompt_lookup_max': 4})", "ngram", "inferred", id="9-0.8.5-ngram-as-model"),
    pytest.param(None, "INFO 05-02 09:14:09 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model="
                 "'meta-llama/Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig(method='ngram', model=None, "
                 "num_spec_tokens=5), tokenizer='meta-llama/Llama-3.1-8B-Instruct', tensor_parallel_size=1, ",
                 "ngram", "logged", id="10-0.8.5-engine-ngram"),
    pytest.param("0.9.2", V092 + "'model': 'deepseek-ai/DeepSeek-V3', 'tensor_parallel_size': 8, 'speculative_config': "
                 "{'num_speculative_tokens': 1}}", "deepseek_mtp", "inferred", id="11-0.9.2-k-only-mtp"),
    pytest.param("0.9.2", V092 + "'model': 'lmsys/vicuna-7b-v1.3', 'speculative_config': {'model': 'abhigoyal/vllm-"
                 "medusa-vicuna-7b-v1.3', 'num_speculative_tokens': 5}}", "medusa", "inferred", id="12-0.9.2-medusa"),
    pytest.param("0.10.1", API.replace("328]", "326]").replace("09-20", "08-20") + QWEN + "'speculative_config': "
                 "{'model': 'AngelSlim/Qwen3-8B_eagle3', 'num_speculative_tokens': 3}}", "draft_model", "inferred",
                 id="13-0.10.1-eagle3-suffix-is-a-draft"),
    pytest.param("0.10.2", API + QWEN + "'speculative_config': {'model': 'AngelSlim/Qwen3-8B_eagle3', "
                 "'num_speculative_tokens': 3}}", "eagle3", "inferred", id="14-0.10.2-eagle3-anywhere"),
    pytest.param("0.10.2", API + "'model_tag': 'Qwen/Qwen3-Next-80B-A3B-Instruct', 'model': 'Qwen/Qwen3-Next-80B-A3B-"
                 "Instruct', 'tensor_parallel_size': 4, 'speculative_config': {'num_speculative_tokens': 2}}",
                 "qwen3_next_mtp", "inferred", id="15-0.10.2-qwen3-next-mtp"),
    pytest.param(None, f"{CYAN}(EngineCore_DP0 pid=3112){RESET} INFO 09-20 10:00:07 [core.py:76] Initializing a V1 LLM "
                 "engine (v0.10.2) with config: model='Qwen/Qwen3-8B', speculative_config=SpeculativeConfig(method="
                 "'eagle3', model='Tengyunw/qwen3_8b_eagle3', num_spec_tokens=3), tokenizer='Qwen/Qwen3-8B', "
                 "tensor_parallel_size=1, data_parallel_size=2, ", "eagle3", "logged", id="16-0.10.2-engine-eagle3"),
    pytest.param("0.11.0", V011 + DSV31 + "'speculative_config': {'method': 'deepseek_mtp', 'num_speculative_tokens': "
                 "1}}", "mtp", "inferred", id="17-0.11-deepseek_mtp-is-mtp"),
    pytest.param("0.11.0", V011 + DSV31 + "'speculative_config': {'num_speculative_tokens': 1}}", None, None,
                 id="18-0.11-k-only-is-refused"),
    pytest.param("0.11.0", V011 + "'model_tag': 'meta-llama/Meta-Llama-3-8B-Instruct', 'model': 'meta-llama/Meta-"
                 "Llama-3-8B-Instruct', 'speculative_config': {'model': 'yuhuili/EAGLE-LLaMA3-Instruct-8B', "
                 "'num_speculative_tokens': 5}}", "eagle", "inferred", id="19-0.11-eagle-name"),
    pytest.param(None, "(APIServer pid=123) INFO 11-30 02:30:00 [startup.py:96] non-default args: {" + QWEN +
                 "'speculative_config': {'method': 'draft_model', 'model': 'Qwen/Qwen3-0.6B', 'num_speculative_tokens':"
                 " 4}}", "draft_model", "inferred", id="20-0.33-draft_model-given"),
]  # fmt: skip


def _launch(grammars, line: str, version: str | None = None) -> LaunchConfig:
    opened = LaunchConfig(version=version) if version else None
    state = ParseState(year=2025, launch=opened, launch_open="vllm" if version else None)
    records = Parser(grammars, "v.log", state).feed((line + "\n").encode())
    (launch,) = [r for r in records if r.kind == "launch"]
    return launch.config  # type: ignore[attr-defined,no-any-return]


@pytest.mark.parametrize(("version", "line", "method", "source"), CASES)
def test_the_method_vllm_ran(grammars, version, line, method, source):
    config = _launch(grammars, line, version)
    assert (config.spec_algorithm, config.spec_algorithm_source) == (method, source)
    assert config.method == method
    assert config.spec_draft_model_path not in ("ngram", "[ngram]")


def test_a_later_engine_line_resolves_an_earlier_guess(grammars):
    """0.8.5 args without a method guess EAGLE-3 (newest rules); the engine line's repr says what ran."""
    args = (
        V085_ARGS + "speculative_config={'model': 'yuhuili/EAGLE3-LLaMA3.1-Instruct-8B', 'num_speculative_tokens': 3})"
    )
    engine = ("INFO 05-02 09:14:09 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: model='meta-llama/"
              "Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig(method='eagle', model='yuhuili/EAGLE3-"
              "LLaMA3.1-Instruct-8B', num_spec_tokens=3), tensor_parallel_size=1, ")  # fmt: skip
    records = Parser(grammars, "v.log", ParseState(year=2025)).feed(f"{args}\n{engine}\n".encode())
    first, merged = (r.config for r in records)  # type: ignore[attr-defined]
    assert (first.spec_algorithm, first.spec_algorithm_source) == ("eagle3", "inferred")
    assert (merged.spec_algorithm, merged.spec_algorithm_source, merged.version) == ("eagle", "logged", "0.8.5")
    assert [r.run for r in records] == [1, 1]


def test_a_later_engine_line_without_a_method_redoes_the_guess_with_its_version(grammars):
    """0.8.2 prints no method: its version decides (an EAGLE-3 name is a plain draft there, EAGLE-3 today)."""
    args = V085_ARGS + "speculative_config={'model': 'org/EAGLE3-head', 'num_speculative_tokens': 3})"
    engine = ("INFO 03-28 10:00:00 [llm_engine.py:241] Initializing a V0 LLM engine (v0.8.2) with config: model="
              "'meta-llama/Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig(draft_model='org/EAGLE3-head', "
              "num_spec_tokens=3), tensor_parallel_size=1, ")  # fmt: skip
    records = Parser(grammars, "v.log", ParseState(year=2025)).feed(f"{args}\n{engine}\n".encode())
    assert [r.config.spec_algorithm for r in records] == ["eagle3", "draft_model"]  # type: ignore[attr-defined]


def test_sglang_launches_are_not_inferred(grammars):
    line = "[2026-01-02 03:04:00] server_args=ServerArgs(model_path='m', speculative_draft_model_path='d')"
    config = Parser(grammars, "s.log").parse_line(line).config  # type: ignore[union-attr]
    assert (config.spec_algorithm, config.spec_algorithm_source, config.method) == (None, None, None)


# --- the command line: a launch with a draft model and no method is speculation -----------------

STATS = (
    "INFO 05-02 09:{m:02d}:{s:02d} [loggers.py:111] Engine 000: Avg prompt throughput: 488.3 tokens/s, Avg generation "
    "throughput: {tput} tokens/s, Running: {running} reqs, Waiting: 0 reqs, GPU KV cache usage: 27.8%, Prefix cache hit "
    "rate: 43.3%\n"
    "INFO 05-02 09:{m:02d}:{s:02d} [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 65.7%, Mean acceptance "
    "length: 1.97, Accepted: 1289 tokens, Drafted: 1962 tokens, Per-position acceptance rate: 0.829, 0.654, 0.488\n"
)  # fmt: skip


def _no_method_log(tmp_path):
    """A vLLM 0.8.5 start whose speculative_config names a draft model and k but no method (and no engine line)."""
    args = (
        V085_ARGS + "speculative_config={'model': 'yuhuili/EAGLE-LLaMA3.1-Instruct-8B', 'num_speculative_tokens': 3})"
    )
    intervals = [
        STATS.format(m=15 + i // 6, s=(i % 6) * 10, tput=380.0 + i, running=16 + 8 * (i % 3)) for i in range(24)
    ]
    log = tmp_path / "nomethod.log"
    log.write_text(args + "\n" + "".join(intervals))
    return log


def test_runs_shows_the_inferred_method(tmp_path):
    p = acceptmon("runs", _no_method_log(tmp_path), "--year", "2025")
    assert p.returncode == 0, p.stderr
    head, row = p.stdout.decode().splitlines()
    at = head.index(" spec ") + 1  # the columns are aligned: the cell starts where its heading does
    assert row[at:].split()[0] == "eagle"


def test_doctor_refuses_it_as_the_baseline(tmp_path):
    log = _no_method_log(tmp_path)
    p = acceptmon("doctor", SAMPLES / "vllm_v1_0.8.5.log", "--baseline", log, "--year", "2025")
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and lines == [f"acceptmon: error: {log}: no run without speculation to use as a baseline"]
    assert p.stdout == b""

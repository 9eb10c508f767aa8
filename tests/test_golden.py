"""Each sample log against its golden JSONL, and hand-checked facts about each scenario."""

from __future__ import annotations

import json
import os

import pytest

from acceptmon.pipeline.batch import run
from acceptmon.sinks.runs_table import StatsJob
from tests.conftest import GOLDEN, ROOT, SAMPLES
from tests.update_goldens import golden_text

LOGS = sorted(p.stem for p in SAMPLES.glob("*.log"))


def test_every_sample_log_has_a_golden():
    assert LOGS == sorted(p.stem for p in GOLDEN.glob("*.jsonl"))
    assert len(LOGS) >= 10
    assert {"vllm_v0_0.6", "vllm_v1_0.8.5", "vllm_v1_0.10.2_dp"} <= set(LOGS)


@pytest.mark.parametrize("name", LOGS)
def test_sample_log_matches_golden(name, monkeypatch):
    monkeypatch.chdir(ROOT)
    got = golden_text(SAMPLES / f"{name}.log").decode().splitlines()
    want = (GOLDEN / f"{name}.jsonl").read_text().splitlines()
    assert len(got) == len(want)
    for g, w in zip(got, want, strict=True):
        assert json.loads(g) == json.loads(w)


VLLM_STATS = ("] SpecDecoding metrics: ", "] Speculative metrics: ", "] Avg prompt throughput: ", "] Engine 0",
              "] Prefix cache hit rate: GPU: ")  # fmt: skip
LLAMACPP_STATS = (" statistics ", " draft tokens, new n_tokens = ", "|        eval time = ")


@pytest.mark.parametrize("name", LOGS)
def test_golden_rows_equal_decode_lines(name):
    """Independent oracle: one row per line whose message starts with 'Decode batch' (vLLM: a stats message)."""
    lines = (SAMPLES / f"{name}.log").read_text().splitlines()
    if name.startswith("vllm_"):
        decode = [i + 1 for i, line in enumerate(lines) if any(m in line for m in VLLM_STATS)]
    elif name.startswith("llamacpp_"):  # statistics rows, verify-step lines and each request's decode speed
        decode = [i + 1 for i, line in enumerate(lines) if any(m in line for m in LLAMACPP_STATS)]
    else:
        decode = [i + 1 for i, line in enumerate(lines) if "] Decode batch" in line or line.startswith("Decode batch")]
    rows = [json.loads(line)["line"] for line in (GOLDEN / f"{name}.jsonl").read_text().splitlines()]
    assert rows == decode


def _runs(name, grammars):
    job = StatsJob()
    run([os.fspath(SAMPLES / f"{name}.log")], grammars, job)
    return job.stats.summaries()


def test_seed_scenario_runs(grammars):
    runs = _runs("seed_eagle3_moe", grammars)
    assert [r.run for r in runs] == [1, 2, 3, 4, 5]
    assert [r.spec_num_steps for r in runs] == [3, 3, 1, 2, 5]
    assert [r.spec_num_draft_tokens for r in runs] == [4, 4, 2, 3, 6]
    assert all(r.spec_algorithm == "EAGLE3" and r.ranks == 8 for r in runs)
    broken, fixed = runs[0], runs[1]
    assert 1.05 <= broken.accept_len_mean <= 1.2  # wrong hidden-state layer ids
    assert 2.75 <= fixed.accept_len_mean <= 2.95
    assert broken.gen_throughput_per_rank < 80 < 90 < fixed.gen_throughput_per_rank
    assert broken.batches == fixed.batches == 96
    assert fixed.draft_accept_rate_mean == pytest.approx((fixed.accept_len_mean - 1) / 3, abs=0.002)


def test_baseline_has_null_accept_values(grammars):
    (run_,) = _runs("baseline_nospec", grammars)
    assert run_.spec_algorithm is None
    assert run_.batches == 120
    assert run_.accept_len_mean is None and run_.accept_rate_mean is None and run_.draft_accept_rate_mean is None
    assert 86 < run_.gen_throughput_per_rank < 92


def test_hybrid_log_has_two_launches(grammars):
    mamba, swa = _runs("hybrid_mamba_swa", grammars)
    assert (mamba.spec_algorithm, mamba.batches, swa.spec_algorithm, swa.batches) == (
        "NEXTN",
        40,
        "EAGLE",
        30,
    )
    assert swa.accept_rate_mean is None  # 0.5.1 logged no accept rate

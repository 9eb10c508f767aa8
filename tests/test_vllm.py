"""vLLM logs: one run per server start, year-less timestamps across New Year, nan lines, and run figures."""

from __future__ import annotations

import io
import json
import os
from datetime import datetime
from pathlib import Path

import pytest

from acceptmon.cli.args import YearSource
from acceptmon.parse import prescan
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.parse.values import to_yearless
from acceptmon.pipeline import batch as pipeline
from acceptmon.pipeline.batch import run
from acceptmon.sinks.runs_table import StatsJob
from acceptmon.sinks.table import TableJob
from tests.conftest import SAMPLES

DATA = Path(__file__).parent / "data"
ARGS = (
    "INFO 05-02 09:14:03 [api_server.py:1044] args: Namespace(model='meta-llama/Llama-3.1-8B-Instruct', "
    "tensor_parallel_size=1, data_parallel_size=1, speculative_config={'method': 'eagle', "
    "'model': 'yuhuili/EAGLE-LLaMA3.1-Instruct-8B', 'num_speculative_tokens': 3})\n"
)
ENGINE = (
    "INFO 05-02 09:14:09 [core.py:58] Initializing a V1 LLM engine (v0.8.5) with config: "
    "model='meta-llama/Llama-3.1-8B-Instruct', speculative_config=SpeculativeConfig(method='eagle', "
    "model='yuhuili/EAGLE-LLaMA3.1-Instruct-8B', num_spec_tokens=3), tensor_parallel_size=2, \n"
)
STATS = (
    "INFO 05-02 09:14:52 [loggers.py:111] Engine 000: Avg prompt throughput: 488.3 tokens/s, Avg generation "
    "throughput: 388.6 tokens/s, Running: 19 reqs, Waiting: 0 reqs, GPU KV cache usage: 27.8%, Prefix cache hit rate: "
    "43.3%\n"
    "INFO 05-02 09:14:52 [metrics.py:82] SpecDecoding metrics: Draft acceptance rate: 65.7%, Mean acceptance length: "
    "1.97, Accepted: 1289 tokens, Drafted: 1962 tokens, Per-position acceptance rate: 0.829, 0.654, 0.488\n"
)


def _parser(grammars, year: int = 2025) -> Parser:
    return Parser(grammars, "v.log", ParseState(year=year, month=5))


def test_launch_lines_of_one_start_are_one_run_with_merged_config(grammars):
    records = _parser(grammars).feed((ARGS + ENGINE + STATS).encode())
    launches = [r for r in records if r.kind == "launch"]
    assert [r.run for r in launches] == [1, 1]
    config = launches[1].config
    assert (config.version, config.spec_algorithm, config.spec_num_steps, config.spec_num_draft_tokens) == (
        "0.8.5", "eagle", 3, 4)  # fmt: skip
    assert (config.tp_size, config.dp_size, config.model_path) == (2, 1, "meta-llama/Llama-3.1-8B-Instruct")
    assert [r.run for r in records if r.kind != "launch"] == [1, 1]


def test_a_stats_line_between_launch_lines_starts_a_new_run(grammars):
    records = _parser(grammars).feed((ARGS + STATS + ENGINE + STATS).encode())
    assert [(r.kind, r.run) for r in records] == [
        ("launch", 1), ("throughput", 1), ("spec", 1), ("launch", 2), ("throughput", 2), ("spec", 2)]  # fmt: skip


def test_sglang_launches_never_merge(grammars):
    line = "[2026-01-02 03:04:00] server_args=ServerArgs(model_path='m', speculative_algorithm='EAGLE')\n"
    records = Parser(grammars, "s.log").feed((line + line).encode())
    assert [r.run for r in records] == [1, 2]


def test_0_8_5_mean_acceptance_length_gets_its_bonus_token(grammars):
    spec = _parser(grammars).feed(STATS.encode())[1]
    assert (spec.accept_len, spec.accept_len_source) == (2.97, "logged")
    assert spec.accept_rate == spec.draft_accept_rate == round(1289 / 1962, 6)
    later = STATS.replace("1.97", "2.97")  # 0.9+ prints the same counts with a bonus-inclusive mean
    assert _parser(grammars).feed(later.encode())[1].accept_len == 2.97


def test_0_8_3_accept_length_is_derived_from_the_launch_k(grammars):
    line = "INFO 04-08 10:00:10 [metrics.py:53] SpecDecoding metrics: Draft acceptance rate: 62.5%, Accepted: 1250 tokens, Drafted: 2000 tokens\n"
    alone = _parser(grammars).feed(line.encode())[0]
    assert (alone.accept_len, alone.accept_len_source, alone.accept_rate) == (None, None, 0.625)
    spec = _parser(grammars).feed((ENGINE + line).encode())[1]
    assert (spec.accept_len, spec.accept_len_source, spec.spec_num_draft_tokens) == (1 + 1250 * 3 / 2000, "derived", 4)


@pytest.mark.parametrize(
    "line",
    [
        "INFO 10-16 19:00:51 metrics.py:367] Speculative metrics: Draft acceptance rate: nan, System efficiency: nan, "
        "Number of speculative tokens: 3, Number of accepted tokens: 0, Number of draft tokens: 0, Number of emitted "
        "tokens: 0.",
        "INFO 04-08 10:00:20 [metrics.py:53] SpecDecoding metrics: Draft acceptance rate: nan%, Accepted: 0 tokens, "
        "Drafted: 0 tokens",
        "(APIServer pid=1) INFO 11-30 02:35:10 [metrics.py:120] SpecDecoding metrics: Mean acceptance length: nan, "
        "Accepted throughput: 0.00 tokens/s, Drafted throughput: 0.00 tokens/s, Accepted: 0 tokens, Drafted: 0 tokens, "
        "Per-position acceptance rate: nan, nan, Avg Draft acceptance rate: nan%",
    ],
)
def test_nan_values_are_empty_not_errors(grammars, line):
    parser = _parser(grammars)
    spec = parser.parse_line(line)
    assert spec is not None and spec.kind == "spec"
    assert spec.accept_rate is None and spec.accept_len is None and spec.drafted_tokens == 0
    assert parser.tally.kinds["unrecognized"] == 0


def test_timestamps_roll_over_at_new_year_and_the_state_carries_the_year(grammars):
    lines = [f"INFO {md} [loggers.py:1] Engine 000: Avg prompt throughput: 1.0 tokens/s, Avg generation throughput: "
             "2.0 tokens/s, Running: 1 reqs, Waiting: 0 reqs, GPU KV cache usage: 1.0%\n"
             for md in ("12-31 23:59:50", "01-01 00:00:05", "12-31 23:59:59", "01-01 00:00:15")]  # fmt: skip
    saved, grammars.year_for = grammars.year_for, YearSource(2025)
    try:
        parser = Parser(grammars, "v.log")
        first = parser.feed("".join(lines[:2]).encode())
        state = parser.state
        rest = Parser(grammars, "v.log", state).feed("".join(lines[2:]).encode())
    finally:
        grammars.year_for = saved
    assert [r.timestamp for r in first + rest] == [
        datetime(2025, 12, 31, 23, 59, 50), datetime(2026, 1, 1, 0, 0, 5),
        datetime(2025, 12, 31, 23, 59, 59), datetime(2026, 1, 1, 0, 0, 15)]  # fmt: skip
    assert (state.year, state.month) == (2026, 1)


def test_the_default_year_is_the_latest_not_after_the_file_time(tmp_path):
    log = tmp_path / "v.log"
    log.write_text("x\n")
    os.utime(log, (datetime(2027, 1, 5).timestamp(),) * 2)
    source = YearSource()
    assert source(str(log), to_yearless("12-31 23:41:02")) == 2026
    assert source(str(log), to_yearless("01-01 00:02:09")) == 2027
    assert "file modification time" in source.describe()
    assert YearSource(2019)(str(log), to_yearless("12-31 23:41:02")) == 2019


@pytest.mark.parametrize("name", ["vllm_v0_0.6", "vllm_v1_0.8.5", "vllm_v1_0.10.2_dp"])
def test_run_figures_equal_the_expected(grammars, name):
    want = json.loads((DATA / f"{name}.log.expect.json").read_text())
    job = StatsJob()
    result = run([os.fspath(SAMPLES / f"{name}.log")], grammars, job)
    assert result.tally.kinds["spec"] == want["spec_lines"]
    assert result.tally.kinds["launch"] >= want["launches"]
    runs = job.stats.summaries()
    assert len(runs) == want["launches"]
    for got, exp in zip(runs, want["runs"], strict=True):
        assert got.start is not None and got.start.strftime("%m-%d %H:%M:%S") == exp["start"]
        assert (got.version, got.spec_algorithm, got.spec_draft_model, got.spec_num_steps) == (
            exp["version"], exp["spec_method"], exp["spec_draft_model"], exp["num_speculative_tokens"])  # fmt: skip
        assert got.spec_num_draft_tokens == exp["num_speculative_tokens"] + 1
        assert got.batches == exp["spec_lines"]
        assert (got.accepted_tokens, got.drafted_tokens, got.emitted_tokens) == (
            exp["accepted_tokens"], exp["drafted_tokens"], exp["emitted_tokens"])  # fmt: skip
        assert got.num_drafts == pytest.approx(exp["num_drafts"])
        assert got.accept_rate_by_tokens == pytest.approx(exp["accept_rate"], abs=1e-6)
        assert got.draft_accept_rate_mean == got.accept_rate_mean
        assert got.accept_len_by_tokens == pytest.approx(exp["accept_len"], abs=1e-6)
        assert got.gen_throughput_per_rank is not None and got.gen_throughput_total is not None
        assert got.gen_throughput_total >= got.gen_throughput_per_rank > 0


@pytest.mark.parametrize("year", [None, 2025])
def test_parallel_ranges_date_like_one_reader(tmp_path, grammars, monkeypatch, year):
    """-j N: each byte range's first timestamp gets the year one reader gives it, across New Year."""
    big = tmp_path / "dp.log"
    big.write_bytes((SAMPLES / "vllm_v1_0.10.2_dp.log").read_bytes() * 30)  # 30 New Years
    os.utime(big, (datetime(2026, 6, 1).timestamp(),) * 2)
    saved, grammars.year_for = grammars.year_for, YearSource(year, grammars)
    outputs = []
    try:
        for jobs, min_bytes in ((1, 1 << 40), (2, 1)):
            monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", min_bytes)
            monkeypatch.setattr(pipeline, "RANGE_BYTES", 1 << 16)
            out = io.BytesIO()
            run([os.fspath(big)], grammars, TableJob("jsonl", out), jobs=jobs)
            outputs.append([(r["line"], r["timestamp"]) for r in map(json.loads, out.getvalue().splitlines())])
    finally:
        grammars.year_for = saved
    assert outputs[0] == outputs[1]
    assert {stamp[:4] for _, stamp in outputs[0]} == {"2025", "2026"}


def test_states_chained_over_ranges_number_runs_like_one_reader(grammars):
    """A range may begin inside a launch group: ParseState.then joins it to the launch before."""
    data = (SAMPLES / "vllm_v1_0.10.2_dp.log").read_bytes() * 2
    starts = [i + 1 for i, b in enumerate(data) if b == 10][:-1]
    whole = Parser(grammars, "dp.log", ParseState(year=2025)).feed(data)
    for cut in starts[:14] + starts[220:232]:  # around each launch group
        head, tail = data[:cut], data[cut:]
        scans = []
        for part in (head, tail):
            scan = Parser(grammars, "dp.log", ParseState(year=2025))
            prescan.scan_block(scan, part)
            scans.append(scan.state)
        state = ParseState().then(scans[0])
        assert state.line == scans[0].line == len(head.splitlines())
        worker = Parser(grammars, "dp.log", ParseState(state.line, state.run, state.launch, 2025, None,
                                                        state.launch_open))  # fmt: skip
        got = Parser(grammars, "dp.log", ParseState(year=2025)).feed(head) + worker.feed(tail)
        assert [(r.line, r.run) for r in got] == [(r.line, r.run) for r in whole], cut
        assert state.then(scans[1]).run == whole[-1].run == 4


# --- vLLM v0: counters since server start -------------------------------------------------------


def _v0_log(path: Path, rates: list[float]) -> Path:
    """A vLLM 0.6.3 log whose spec lines count since start; interval i accepts ``rates[i]`` of 1000 drafted tokens."""
    lines = ["INFO 10-16 19:00:05 llm_engine.py:237] Initializing an LLM engine (v0.6.3) with config: model='m', "
             "speculative_config=SpeculativeConfig(draft_model='d', num_spec_tokens=3), tokenizer='m'"]  # fmt: skip
    acc = drafted = emitted = 0
    for i, rate in enumerate(rates):
        t = f"10-16 19:{1 + i // 12:02d}:{(i % 12) * 5:02d}"
        acc, drafted, emitted = acc + int(1000 * rate), drafted + 1000, emitted + int(1000 * rate) + 333
        lines.append(f"INFO {t} metrics.py:367] Speculative metrics: Draft acceptance rate: {acc / drafted:.3f}, "
                     f"System efficiency: 0.500, Number of speculative tokens: 3, Number of accepted tokens: {acc}, "
                     f"Number of draft tokens: {drafted}, Number of emitted tokens: {emitted}.")  # fmt: skip
    path.write_text("\n".join(lines) + "\n")
    return path


def test_intervals_of_counters_since_start():
    from acceptmon.measure.tokens import Intervals

    seen, unseen = Intervals(), Intervals()
    seen.launch(("a.log", "", 1))
    # (accepted, drafted, emitted, k): 900 of 1000 accepted, 1233 emitted over 1000 / 3 drafts, then 100 of 1000
    assert seen.close(("a.log", "", 1, ""), (900, 1000, 1233, 3)) == (3.699, 0.9)  # from zero: the launch was seen
    assert seen.close(("a.log", "", 1, ""), (1000, 2000, 1666, 3)) == (1.299, 0.1)
    assert seen.close(("a.log", "", 1, ""), (1000, 2000, 1666, 3)) == (None, None)  # no drafts in the interval
    assert seen.close(("a.log", "", 1, ""), (10, 20, 16, 3)) == (None, None)  # counters went back: unknown
    assert unseen.close(("b.log", "", 1, ""), (900, 1000, 1233, 3)) == (None, None)  # since a start not in the log
    assert unseen.close(("b.log", "", 1, ""), (1000, 2000, 1666, 3)) == (1.299, 0.1)
    # an emitted count missing at one end: the interval's length from its accepted tokens (1 + 100 x 3 / 1000)
    assert unseen.close(("b.log", "", 1, ""), (1100, 3000, None, 3)) == (1.3, 0.1)
    assert unseen.close(("b.log", "", 1, ""), (1200, 4000, 3000, 3)) == (1.3, 0.1)


def test_v0_counters_since_start_are_judged_per_interval(tmp_path, capsys):
    """runs' quantiles, compare's means and doctor's accept len are over intervals, not running averages."""
    from acceptmon.cli import main

    a = _v0_log(tmp_path / "a.log", [0.9] * 20 + [0.1] * 20)  # 3.699 per draft, then 1.299
    b = _v0_log(tmp_path / "b.log", [0.5] * 40)  # 2.499 throughout: the same totals as a
    assert main(["runs", "--format", "json", str(a)]) == 0
    (run,) = json.loads(capsys.readouterr().out)
    assert (run["accept_len_mean"], run["accept_len_p10"], run["accept_len_p90"]) == (2.499, 1.299, 3.699)
    assert main(["compare", str(b), str(a), "--format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["a"]["accept_len"]["mean"] == out["b"]["accept_len"]["mean"] == 2.499  # were 2.50 and 3.32
    assert main(["doctor", str(a)]) == 0
    # all 40 intervals: 2.499; judged past the warm-up: (18 x 3.699 + 20 x 1.299) / 38
    assert "accept len 2.50, judged 2.44 over 38 past warm-up" in capsys.readouterr().out

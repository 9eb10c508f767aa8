"""Per-position acceptance and the recommended draft depth: hand-computed predictions, the seed sweep,
"do not speculate", vLLM's per-position rates and SGLang's request histograms."""

from __future__ import annotations

import argparse
import ast
import json
import math
import re

import pytest

from acceptmon.cli import doctor as doctor_cli
from acceptmon.measure.depth import Point, plan, step_cost
from acceptmon.measure.positions import Positions, conditionals, decay, from_lengths, pooled
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from tests.conftest import ROOT, SAMPLES
from tests.data.doctor.make import Log


def _doctor(capsys, *argv: str) -> str:
    parser = argparse.ArgumentParser()
    doctor_cli.add_parsers(parser.add_subparsers())
    args = parser.parse_args(["doctor", *argv, "-j", "1"])
    assert args.func(args) == 0
    return capsys.readouterr().out


def _runs(capsys, *argv: str) -> dict[int, dict]:
    out = json.loads(_doctor(capsys, *argv, "--format", "json"))
    return {r["run"]: r for r in out["runs"]}


# The pure module, on figures worked out by hand


def test_histogram_gives_the_share_of_steps_with_each_prefix_accepted():
    p = Positions()
    p.add_histogram([20, 31, 40, 56])  # 147 steps: 20 accepted nothing, 56 all three drafts
    assert p.steps == 147
    assert p.reached == [127, 96, 56]  # at least 1, 2, 3 drafts accepted
    assert conditionals(p.marginals()) == pytest.approx([127 / 147, 96 / 127, 56 / 96])
    p.add_histogram([0, 0, 3])  # a request that ran at depth 2 adds to its positions only
    assert (p.steps, p.reached) == (150, [130, 99, 56])


def test_vllm_rates_are_weighted_by_drafts():
    p = Positions()
    p.add_rates([0.8, 0.6, 0.4], drafts=100)
    p.add_rates([0.9, 0.7, 0.5], drafts=300)
    assert p.marginals() == pytest.approx([(80 + 270) / 400, (60 + 210) / 400, (40 + 150) / 400])


def test_pooled_conditionals_use_the_runs_that_drafted_that_far():
    a, b = Positions(), Positions()
    a.add_rates([0.8, 0.6], drafts=100)  # depth 2
    b.add_rates([0.9, 0.72, 0.36], drafts=100)  # depth 3
    # c1 = (80 + 90) / 200, c2 = (60 + 72) / (80 + 90), c3 = 36 / 72 (only b drafted 3)
    c1, c2, c3 = 170 / 200, 132 / 170, 0.5
    assert pooled([a, b]) == pytest.approx([c1, c1 * c2, c1 * c2 * c3])


def test_accept_lengths_of_a_decode_only_sweep_give_the_positions():
    # depths 1, 2 and 4: a1 = 0.8, a2 = 0.6, and between 2 and 4 one conditional c: 0.6 (c + c^2) = 0.45 -> c = 0.5
    assert from_lengths([(1, 1.8), (2, 2.4), (4, 2.85)]) == pytest.approx([0.8, 0.6, 0.3, 0.15])
    assert from_lengths([(2, 2.44)]) == pytest.approx([0.8, 0.64])  # c + c^2 = 1.44 -> c = 0.8


def test_decay_is_the_least_squares_slope_of_log_conditional_and_never_rises():
    # log c at i = 1, 2, 3: ln 0.8, ln 0.75, ln 0.75; slope = ((-1)(ln .8 - m) + (ln .75 - m)) / 2
    m = sum(math.log(c) for c in (0.8, 0.75, 0.75)) / 3
    slope = (-(math.log(0.8) - m) + (math.log(0.75) - m)) / 2
    assert decay([0.8, 0.75, 0.75]) == pytest.approx(math.exp(slope))
    assert decay([0.5, 0.6, 0.7]) == 1.0
    assert decay([0.7]) == 1.0


def test_step_cost_is_linear_between_depths_run_and_extended_by_the_fitted_slope():
    points = [(1, 1.6), (3, 2.4), (4, 2.9)]
    assert step_cost(points, 2) == pytest.approx(2.0)
    # least-squares slope over (1, 1.6), (3, 2.4), (4, 2.9): mean d 8/3, mean R 6.9/3
    sxy = (1 - 8 / 3) * (1.6 - 2.3) + (3 - 8 / 3) * (2.4 - 2.3) + (4 - 8 / 3) * (2.9 - 2.3)
    sxx = (1 - 8 / 3) ** 2 + (3 - 8 / 3) ** 2 + (4 - 8 / 3) ** 2
    assert step_cost(points, 6) == pytest.approx(2.9 + 2 * sxy / sxx)
    assert step_cost([(3, 2.4)], 2) is None


def test_predictions_and_recommendation_from_hand_computed_rates():
    rates = Positions()
    rates.add_rates([0.8, 0.6, 0.45], drafts=1000)  # c = 0.8, 0.75, 0.75
    points = [
        Point(run=1, depth=1, accept_len=1.8, step_cost=1.6, tok_s=112.0, tok_s_ci=(111.0, 113.0)),
        Point(run=2, depth=3, accept_len=2.85, step_cost=2.4, tok_s=118.0, tok_s_ci=(117.0, 119.0), positions=rates),
    ]
    got = plan(points, reference_tok_s=100.0, baseline=True)
    rows = {r.depth: r for r in got.depths}
    assert [r.depth for r in got.depths] == [1, 2, 3, 4, 5, 6]  # 3 past the deepest run, extrapolated
    assert [r.basis for r in got.depths] == ["measured", "predicted", "measured"] + ["extrapolated"] * 3
    assert [rows[d].predicted_accept_len for d in (1, 2, 3)] == pytest.approx([1.8, 2.4, 2.85])
    # R: 1.6 at 1, 2.4 at 3, so 2.0 at 2; S = L / R; tok/s = S x 100
    assert rows[1].predicted_speedup == pytest.approx(1.8 / 1.6)
    assert rows[2].predicted_speedup == pytest.approx(1.2)
    assert rows[2].predicted_tok_s == pytest.approx(120.0)
    assert rows[3].predicted_tok_s == pytest.approx(2.85 / 2.4 * 100, abs=0.01)
    # depth 4: c4 = 0.75 x decay, a4 = 0.45 c4; R(4) = 2.4 + 0.4 (the slope through 1.6 at 1 and 2.4 at 3)
    c4 = 0.75 * decay([0.8, 0.75, 0.75])
    assert rows[4].predicted_accept_len == pytest.approx(2.85 + 0.45 * c4, abs=1e-4)
    assert rows[4].predicted_speedup == pytest.approx((2.85 + 0.45 * c4) / 2.8, abs=1e-4)
    assert (got.depth, got.basis, got.advice) == (2, "predicted", "speculative_num_steps 2")
    assert got.predicted_tok_s == pytest.approx(120.0)
    assert got.tied == []  # the depth recommended was not run: no measured CI to be tied with
    # leave-one-out: run 1 predicted from run 2's positions and the baseline's R(0) = 1 with run 2's R
    check = {c.run: c for c in got.checks}
    assert check[1].predicted_accept_len == pytest.approx(1.8)
    assert check[1].predicted_tok_s == pytest.approx(1.8 / (1 + 1.4 / 3) * 100, abs=0.01)
    assert check[1].tok_s_within_ci is False


def test_no_depth_beating_the_baseline_is_do_not_speculate():
    points = [
        Point(run=1, depth=1, accept_len=1.2, step_cost=1.5),
        Point(run=2, depth=2, accept_len=1.3, step_cost=2.0),
    ]
    got = plan(points, reference_tok_s=100.0, baseline=True)
    assert got.depth is None and got.basis is None and got.predicted_tok_s is None
    assert (
        got.advice
        == "do not speculate: no depth is predicted to beat the baseline (best speculative_num_steps 1, S = 0.80)"
    )


def test_one_depth_without_a_baseline_recommends_nothing():
    got = plan([Point(run=1, depth=3, accept_len=2.8, step_cost=2.8)], reference_tok_s=100.0, baseline=False)
    assert got.depth is None
    assert got.advice.startswith("no depth to recommend: one depth run and no baseline")


# The seed sweep: runs 2-5 are EAGLE3 at steps 3, 1, 2, 5; run 1 is the broken launch


def test_seed_sweep_recommends_two_steps_tied_with_three(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    runs = _runs(capsys, "sample_logs/seed_eagle3_moe.log", "--baseline", "sample_logs/baseline_nospec.log")
    rec = runs[2]["recommendation"]
    assert rec["sweep_runs"] == [3, 4, 2, 5]
    assert [x["run"] for x in rec["left_out"]] == [1]
    assert rec["positions_from"].startswith("the sweep's accept lengths at depths 1 (run 3), 2 (run 4), 3 (run 2)")
    # positions from the accept lengths 1.8066 (1), 2.4083 (2), 2.8366 (3): a1, a2 and a3 are their steps
    a = [0.8066, 2.4083 - 1.8066, 2.8366 - 2.4083]
    assert [p["reached"] for p in rec["positions"]] == pytest.approx(a, abs=1e-4)
    assert [p["conditional"] for p in rec["positions"]] == pytest.approx([a[0], a[1] / a[0], a[2] / a[1]], abs=1e-4)
    assert (rec["depth"], rec["basis"], rec["advice"]) == (2, "measured", "speculative_num_steps 2")
    assert rec["tied"] == [3]
    by_depth = {d["depth"]: d for d in rec["depths"]}
    # a depth run is predicted at its own accept len and the break-even's speedup
    for run in (2, 3, 4, 5):
        row = by_depth[runs[run]["recommendation"]["positions"][-1]["position"]]
        assert row["run"] == run and row["basis"] == "measured"
        assert row["predicted_speedup"] == runs[run]["break_even"]["speedup"]
        assert row["predicted_accept_len"] == pytest.approx(runs[run]["accept_len_mean"], abs=1e-4)
    assert rec["predicted_speedup"] == runs[4]["break_even"]["speedup"]
    assert rec["predicted_tok_s"] == pytest.approx(rec["predicted_speedup"] * rec["reference_tok_s"], abs=0.01)
    assert [by_depth[d]["basis"] for d in (4, 6, 7, 8)] == ["predicted", "extrapolated", "extrapolated", "extrapolated"]
    assert all(runs[n]["recommendation"]["depth"] == 2 for n in range(1, 6))


def test_seed_sweep_leave_one_out_against_the_runs_ci(capsys, monkeypatch):
    """Each depth run, predicted from the other runs: how far off, and whether inside the run's 95 % CI
    (compare's block bootstrap of side A). Only depth 2 lands inside for accept len; none for tok/s."""
    monkeypatch.chdir(ROOT)
    runs = _runs(capsys, "sample_logs/seed_eagle3_moe.log", "--baseline", "sample_logs/baseline_nospec.log")
    checks = {c["depth"]: c for c in runs[2]["recommendation"]["checks"]}
    assert sorted(checks) == [1, 2, 3, 5]
    assert checks[5]["basis"] == "extrapolated" and checks[2]["basis"] == "predicted"
    for c in checks.values():
        inside = c["accept_len_ci_low"] <= c["predicted_accept_len"] <= c["accept_len_ci_high"]
        assert c["accept_len_within_ci"] is inside
        assert abs(c["accept_len_error"]) < 0.05
    assert [checks[d]["accept_len_within_ci"] for d in (1, 2, 3, 5)] == [False, True, False, False]
    assert [checks[d]["tok_s_within_ci"] for d in (1, 2, 3, 5)] == [False, False, False, False]
    assert all(abs(checks[d]["tok_s_error_pct"]) < 10 for d in checks)
    # the CI is the one compare prints for the run as side A
    compare = json.loads(_compare(capsys, "sample_logs/seed_eagle3_moe.log#4", "sample_logs/seed_eagle3_moe.log#2"))
    assert checks[2]["accept_len_ci_low"] == compare["a"]["accept_len"]["ci_low"]
    assert checks[2]["tok_s_ci_high"] == pytest.approx(compare["a"]["gen_throughput"]["ci_high"], abs=0.005)
    assert compare["verdict"] == "no difference"  # steps 2 and 3 are tied, as the recommendation says


def _compare(capsys, *argv: str) -> str:
    from acceptmon.cli import compare as compare_cli

    parser = argparse.ArgumentParser()
    compare_cli.add_parsers(parser.add_subparsers())
    args = parser.parse_args(["compare", *argv, "--format", "json"])
    assert args.func(args) == 0
    return capsys.readouterr().out


def test_seed_sweep_text_block(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    text = _doctor(capsys, "sample_logs/seed_eagle3_moe.log", "--baseline", "sample_logs/baseline_nospec.log")
    run1, run2 = text.split("\n\n")[:2]
    assert "  depth: conditional acceptance by position 0.11, 0.11, 0.11 (from this run's accept length alone" in run1
    assert "    steps      1      2      3      4      5      6      7      8\n" in run1
    assert "    accept len 1.81   2.41   2.84   3.10~  3.27   3.36+  3.41+  3.43+\n" in run1
    assert (
        "  recommended: speculative_num_steps 2 (measured, run 4): accept len 2.41, 94.6 tok/s/rank, S = 1.05\n" in run1
    )
    assert "as fast within the 95 % CIs: 3" in run1
    assert "check, each depth run predicted from the other runs (depths 1, 2, 3, 5)" in run1
    assert "  depth: conditional acceptance by position 0.81, 0.75, 0.71 (from the sweep's accept lengths" in run2
    assert "(per-depth table under run 1)" in run2 and "steps      1" not in run2
    assert all(len(line) <= 100 for line in text.splitlines() if not line.startswith("sample_logs/"))


def test_a_sweep_where_nothing_beats_the_baseline_says_do_not_speculate(tmp_path, capsys):
    base, spec = Log(31), Log(32)
    base.launch(algo=None)
    base.decode(24, accept=None, tput=100.0)
    for steps, accept, tput in ((1, 1.3, 90.0), (2, 1.4, 82.0), (3, 1.45, 74.0)):
        spec.launch(steps=steps, tokens=steps + 1)
        spec.decode(24, accept=accept, tput=tput)
    (tmp_path / "base.log").write_text(base.text())
    (tmp_path / "spec.log").write_text(spec.text())
    runs = _runs(capsys, str(tmp_path / "spec.log"), "--baseline", str(tmp_path / "base.log"))
    rec = runs[1]["recommendation"]
    assert rec["sweep_runs"] == [1, 2, 3]
    assert rec["depth"] is None and rec["predicted_tok_s"] is None and rec["basis"] is None
    assert rec["advice"].startswith(
        "do not speculate: no depth is predicted to beat the baseline (best speculative_num_steps 1"
    )
    assert all(d["predicted_speedup"] < 1 for d in rec["depths"])
    text = _doctor(capsys, str(tmp_path / "spec.log"), "--baseline", str(tmp_path / "base.log"))
    assert "  recommended: do not speculate: no depth is predicted to beat the baseline" in text


# vLLM's per-position rates and SGLang's request histograms


def test_vllm_per_position_rates_are_the_runs_positions(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    runs = _runs(capsys, "sample_logs/vllm_v1_0.8.5.log", "--year", "2025")
    rec = runs[1]["recommendation"]
    # each line's rates weighted by its drafts (drafted tokens / k), as `runs` gives position_accept_rates
    lines = [ln for ln in (SAMPLES / "vllm_v1_0.8.5.log").read_text().splitlines() if "SpecDecoding metrics" in ln]
    drafts = [int(re.search(r"Drafted: (\d+)", ln)[1]) / 3 for ln in lines]
    rates = [[float(x) for x in ln.partition("Per-position acceptance rate: ")[2].split(", ")] for ln in lines]
    a = [sum(r[i] * d for r, d in zip(rates, drafts, strict=True)) / sum(drafts) for i in range(3)]
    assert rec["parameter"] == "num_speculative_tokens"
    assert rec["positions_from"] == "this run's per-position rates"
    assert [p["reached"] for p in rec["positions"]] == pytest.approx(a, abs=1e-4)
    assert [p["conditional"] for p in rec["positions"]] == pytest.approx([a[0], a[1] / a[0], a[2] / a[1]], abs=1e-4)
    lengths = [d["predicted_accept_len"] for d in rec["depths"]]
    assert lengths[:2] == pytest.approx([1 + a[0], 1 + a[0] + a[1]], abs=1e-4)
    assert lengths[2] == runs[1]["accept_len_mean"]  # the depth run, as measured (1 + sum(a) by tokens is 2.7838)
    assert 1 + sum(a) == pytest.approx(2.7838, abs=1e-4)
    assert [d["basis"] for d in rec["depths"]] == ["predicted", "predicted", "measured"] + ["extrapolated"] * 3
    assert rec["depth"] is None  # one depth and no baseline: nothing to weigh the step cost by


def test_vllm_sweep_pools_positions_and_checks_each_depth(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    runs = _runs(capsys, "sample_logs/vllm_v1_0.10.2_dp.log", "--year", "2025")
    r1, r2 = runs[1]["recommendation"], runs[2]["recommendation"]
    assert r1["sweep_runs"] == [1, 2] and r1["positions_from"] == "this run's per-position rates"
    assert [p["reached"] for p in r1["positions"]] == pytest.approx([0.822035, 0.657719, 0.498605], abs=1e-4)
    assert [p["reached"] for p in r2["positions"]] == pytest.approx([0.874226, 0.707376, 0.530296, 0.372224], abs=1e-4)
    assert r1["reference"] == "run 1 of the sweep" and r1["baseline"] is False
    checks = {c["depth"]: c for c in r1["checks"]}
    assert checks[4]["basis"] == "extrapolated" and checks[3]["basis"] == "predicted"
    # depth 3 from run 2's rates alone: 1 + its first three positions
    assert checks[3]["predicted_accept_len"] == pytest.approx(1 + 0.874226 + 0.707376 + 0.530296, abs=1e-4)


def test_sglang_request_histograms_are_the_runs_positions(capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    runs = _runs(capsys, "sample_logs/request_0.5.23.log")
    rec = runs[1]["recommendation"]
    total = [0, 0, 0, 0]
    for line in (SAMPLES / "request_0.5.23.log").read_text().splitlines():
        m = re.search(r"'spec_correct_drafts_histogram': (\[[0-9, ]*\])", line)
        if m:
            total = [t + h for t, h in zip(total, ast.literal_eval(m[1]), strict=True)]
    steps = sum(total)
    a = [sum(total[1:]) / steps, sum(total[2:]) / steps, total[3] / steps]
    assert rec["positions_from"] == "this run's request acceptance histograms"
    assert [p["reached"] for p in rec["positions"]] == pytest.approx(a, abs=1e-4)


def test_request_lines_keep_the_histogram_under_both_names():
    parser = Parser(load_grammars(), "x.log")
    old = "[2026-03-01 12:30:01] Finish: obj=GenerateReqInput(rid='a'), out={'meta_info': {'id': 'a', 'spec_accept_length': 2.8, 'spec_verify_ct': 147, 'spec_accept_histogram': [20, 31, 40, 56]}}\n"
    new = "[2026-09-01 12:00:07] Finish: obj=GenerateReqInput(rid='b'), out={'meta_info': {'id': 'b', 'spec_accept_length': 3.2, 'spec_verify_ct': 20, 'spec_correct_drafts_histogram': [2, 3, 5, 10]}}\n"
    bad = "[2026-09-01 12:00:08] Finish: obj=GenerateReqInput(rid='c'), out={'meta_info': {'id': 'c', 'spec_verify_ct': 20, 'spec_correct_drafts_histogram': [2, -3]}}\n"
    records = [r for r in parser.feed((old + new + bad).encode()) if r.kind == "request"]
    assert [r.accept_histogram for r in records] == [[20, 31, 40, 56], [2, 3, 5, 10]]
    assert parser.tally.kinds["unrecognized"] == 1  # a negative count: the line is not a request

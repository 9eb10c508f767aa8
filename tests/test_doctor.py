"""`acceptmon doctor`: one log per pattern against its golden, hand-checked findings, break-even, live updates."""

from __future__ import annotations

import argparse
import ast
import json
from pathlib import Path

import pytest

from acceptmon.cli import doctor as doctor_cli
from acceptmon.diagnose.engine import Doctor
from acceptmon.diagnose.read import diagnose
from acceptmon.diagnose.report import event_line, to_text
from acceptmon.diagnose.rules import load_rules
from acceptmon.errors import InputError
from acceptmon.parse.parser import Parser
from tests.conftest import ROOT, SAMPLES
from tests.data.doctor.make import GOLDEN, SCENARIOS, Log, render, write_logs

EXPECTED: dict[str, set[tuple[int, str, str]]] = {
    "healthy": set(),
    "p01_eagle_on_eagle3": {(1, "P1", "error")},  # P2 is suppressed: P1 explains it
    "p01_stuck_without_name": {(1, "P1", "error")},
    "p02_mismatch": {(1, "P2", "error")},
    "p02_weak": {(1, "P2", "warning")},
    "p04_window": {(1, "P4", "warning")},
    "p04_decay": {(1, "P4", "warning")},
    "p05_large_batch": {(1, "P5", "warning")},
    "p06_cuda_graph": {(1, "P6", "warning")},
    "p07_cap_48": {(2, "P7", "warning")},  # printed before run 2's launch line: it belongs to run 2
    "p08_overlap": {(1, "P8", "info")},
    "p09_page_size": {(1, "P9", "warning"), (1, "P5", "warning")},  # topk 8 / 64 draft tokens at B = 4
    "p09_refused": {(0, "P9", "error")},
    "p10_retract": {(1, "P10", "warning")},
    "p13_chain": {(1, "P13", "warning")},
    "p14_ngram": {(1, "P14", "warning")},
    "p16_capture": {(1, "P16", "error")},
    "p17_expected": {(1, "P17", "warning"), (1, "P12", "info")},
    "p18_loses": {(2, "P18", "warning")},
    "p18_pays": set(),
    "seed": {(1, "P2", "warning")},
    "seed_vs_baseline": {(1, "P2", "warning"), (1, "P18", "warning"), (3, "P18", "info"), (5, "P18", "warning")},
}


@pytest.fixture(scope="module")
def logs(tmp_path_factory):
    directory = tmp_path_factory.mktemp("doctor")
    write_logs(directory)
    return directory


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def _run(paths, grammars, rules, **kw):
    return diagnose([str(p) for p in paths], grammars, rules, **kw)


def test_every_scenario_has_a_golden_and_an_expectation():
    assert sorted(SCENARIOS) == sorted(p.stem for p in GOLDEN.glob("*.json")) == sorted(EXPECTED)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_golden(logs, name):
    got = json.loads(render(name, logs))
    assert got == json.loads((GOLDEN / f"{name}.json").read_text())
    assert {(f["run"], f["rule"], f["severity"]) for f in got["findings"]} == EXPECTED[name]


def test_json_shape_is_pinned(logs):
    got = json.loads(render("p07_cap_48", logs))
    assert list(got) == ["findings", "runs"]
    assert [list(f) for f in got["findings"]] == [["rule", "severity", "file", "run", "evidence", "message", "fix"]]
    evidence = got["findings"][0]["evidence"]
    assert evidence["lines"][0] == 12 and evidence["values"]["cap"] == 48.0  # the bare warning, then the lines at 48
    assert "Sources: sglang server_args.py" in got["findings"][0]["fix"]


def test_p1_fires_from_the_launch_line_alone(grammars, rules):
    log = Log(1)
    log.launch(algo="EAGLE", draft="jamesliu1/sglang-EAGLE3-Llama-3.1-Instruct-8B")
    doctor = Doctor(rules)
    doctor.feed(Parser(grammars, "a.log").feed(log.text().encode()))
    (f,) = doctor.findings()
    assert (f.rule, f.severity, f.evidence.lines, f.evidence.values["algorithm"]) == ("P1", "error", [1], "EAGLE")


def test_seed_broken_launch_points_at_the_fixed_one(grammars, rules):
    doctor = _run([SAMPLES / "seed_eagle3_moe.log"], grammars, rules)
    (f,) = doctor.findings()
    assert (f.run, f.rule, f.severity) == (1, "P2", "warning")
    assert f.evidence.values["accept_len_mean"] == pytest.approx(1.13, abs=0.01)
    assert "Run 2 of this file, with the same model and speculative settings, averaged accept len 2.84" in f.message
    reports = doctor.reports()
    assert [r.findings for r in reports] == [1, 0, 0, 0, 0]
    assert "Cannot check from logs: the chat template" in f.message


def test_seed_against_the_baseline(grammars, rules):
    doctor = _run([SAMPLES / "seed_eagle3_moe.log"], grammars, rules, baseline=str(SAMPLES / "baseline_nospec.log"))
    be = {r.run: r.break_even for r in doctor.reports()}
    assert [be[n].verdict for n in range(1, 6)] == ["loses", "pays", "marginal", "pays", "loses"]
    assert be[1].speedup == pytest.approx(0.828, abs=0.001)
    assert be[1].step_cost_ratio == pytest.approx(be[1].accept_len / be[1].speedup, rel=1e-3)
    assert be[2].baseline == "baseline_nospec.log" and len(be[2].buckets) == 5


def test_spec_60_vs_baseline_83_loses(logs, grammars, rules):
    doctor = _run([logs / "p18_loses.log"], grammars, rules)
    be = doctor.reports()[1].break_even
    assert be.verdict == "loses"
    assert be.speedup == pytest.approx(60 / 83, abs=0.01)
    assert be.step_cost_ratio == pytest.approx(be.accept_len * 83 / 60, rel=0.02)  # R = L * G_base / G_spec
    assert be.baseline.endswith("p18_loses.log run 1")


def test_spec_94_vs_baseline_89_pays(logs, grammars, rules):
    doctor = _run([logs / "p18_pays.log"], grammars, rules, baseline=str(logs / "base_89.log"))
    be = doctor.reports()[0].break_even
    assert (be.verdict, be.baseline) == ("pays", "base_89.log")
    assert be.speedup == pytest.approx(94 / 89, abs=0.01)
    assert doctor.findings() == []


def test_without_baseline_the_break_even_statement(logs, grammars, rules):
    doctor = _run([logs / "healthy.log"], grammars, rules)
    be = doctor.reports()[0].break_even
    assert be.verdict is None and be.running_req == 4
    assert be.verify_efficiency == pytest.approx(0.75, abs=0.01) and be.verify_tokens == 16
    assert be.statement.startswith("speculation pays only if the no-spec server made less than 30")
    assert "verify efficiency L/N = 0.75 at B·N = 16 tokens per step" in be.statement


def test_baseline_errors(logs, grammars, rules):
    with pytest.raises(InputError, match="no run 3 with stats lines"):
        _run([logs / "healthy.log"], grammars, rules, baseline=f"{logs / 'p18_loses.log'}#3")
    with pytest.raises(InputError, match="run 2 speculates"):
        _run([logs / "healthy.log"], grammars, rules, baseline=f"{logs / 'p18_loses.log'}#2")
    with pytest.raises(InputError, match="no run without speculation"):
        _run([logs / "healthy.log"], grammars, rules, baseline=str(logs / "healthy.log"))


def test_live_updates_say_what_started_and_stopped_holding(grammars, rules):
    log = Log(1)
    log.launch(algo="EAGLE", draft="org/draft")
    log.decode(4, accept=1.0, jitter=0.0)  # warm-up 2 + 2 stuck lines: not yet 5
    first = len(log.lines)
    log.decode(3, accept=1.0, jitter=0.0)
    second = len(log.lines)
    log.launch(algo="EAGLE", draft="org/draft")  # relaunch, fixed
    log.decode(6, accept=3.0)
    parser, doctor = Parser(grammars, "live.log"), Doctor(rules)
    chunks = [log.lines[:first], log.lines[first:second], log.lines[second:]]
    events = [doctor.update(parser.feed(("\n".join(c) + "\n").encode())) for c in chunks]
    assert events[0] == []
    assert [(e.event, e.finding.rule, e.finding.run) for e in events[1]] == [("new", "P1", 1)]
    assert [(e.event, e.finding.rule, e.finding.run) for e in events[2]] == [("cleared", "P1", 1)]
    assert doctor.holding() == [] and [f.rule for f in doctor.findings()] == ["P1"]
    assert doctor.labels() == set()
    assert event_line(events[1][0]) == (
        "P1 error (run 1): EAGLE algorithm on an EAGLE-3 draft - accept len <= 1.02 on 5 consecutive batches"
    )
    assert event_line(events[2][0]) == "cleared P1 error (run 1): EAGLE algorithm on an EAGLE-3 draft"


def test_labels_are_the_holding_findings(logs, grammars, rules):
    doctor = _run([logs / "p16_capture.log", logs / "p07_cap_48.log"], grammars, rules)
    assert doctor.labels() == {
        (str(logs / "p16_capture.log"), "P16", "error"),
        (str(logs / "p07_cap_48.log"), "P7", "warning"),
    }


def test_text_report_says_no_finding_and_colours_only_when_asked(logs, grammars, rules):
    doctor = _run([logs / "healthy.log", logs / "p16_capture.log"], grammars, rules)
    plain = to_text(doctor.findings(), doctor.reports())
    assert "healthy.log run 1: meta-llama/Llama-3.1-8B-Instruct, EAGLE3 steps 3, topk 1, draft 4" in plain
    assert "  no finding" in plain and "[error] P16 CUDA graph capture failed with speculation" in plain
    assert "evidence: Capture cuda graph failed CUDA out of memory. Tried to allocate 2.00 GiB. (line 5)" in plain
    assert "\x1b[" not in plain
    assert "\x1b[1;31m[error]\x1b[0m" in to_text(doctor.findings(), doctor.reports(), colour=True)
    assert all(len(line) <= 100 for line in plain.splitlines() if not line.startswith(str(logs)))


def test_command_prints_json(logs, capsys):
    parser = argparse.ArgumentParser()
    doctor_cli.add_parsers(parser.add_subparsers())
    args = parser.parse_args(["doctor", str(logs / "p02_weak.log"), "--format", "json", "-j", "1"])
    assert args.func(args) == 0
    out = json.loads(capsys.readouterr().out)
    assert [(f["rule"], f["severity"]) for f in out["findings"]] == [("P2", "warning")]


def test_doctor_core_does_no_io():
    pure = ["model", "state", "breakeven", "detector", "detect_accept", "detect_context", "detect_serving", "detect_load", "signatures",
            "engine"]  # fmt: skip
    for name in pure:
        tree = ast.parse((ROOT / "acceptmon" / "diagnose" / f"{name}.py").read_text())
        imported = {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
        imported |= {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
        assert imported & {"os", "io", "pathlib", "tomllib", "gzip", "subprocess", "socket"} == set(), name
        assert "acceptmon.pipeline" not in Path(ROOT / "acceptmon" / "diagnose" / f"{name}.py").read_text()


def test_p2_cites_family_and_size_the_paths_name(logs, grammars, rules):
    (f,) = _run([logs / "p02_mismatch.log"], grammars, rules).findings()
    assert (
        "Names: the draft path names llama, the model path qwen; the draft path names size 8B, the model path 7B."
        in (f.message)
    )


def test_run_state_launch_values_follow_a_replaced_launch():
    from acceptmon.diagnose.state import RunState
    from acceptmon.parse.records import LaunchConfig

    run = RunState("f", 1)
    assert (run.algorithm, run.speculative, run.draft_tokens, run.steps) == (None, False, None, None)
    run.launch = LaunchConfig(spec_algorithm="eagle3", spec_num_steps=3, spec_eagle_topk=1)
    assert (run.algorithm, run.speculative, run.draft_tokens, run.steps) == ("EAGLE3", True, 4, 3)
    run.launch = LaunchConfig(model_path="m")  # a relaunch of the run without speculation
    assert (run.algorithm, run.speculative, run.draft_tokens, run.steps) == (None, False, None, None)
    run.launch = None
    run.spec_lines = 1
    assert (run.algorithm, run.speculative) == (None, True)


def test_run_state_step_and_buckets_from_decode_and_spec_lines():
    from acceptmon.diagnose.state import RunState
    from acceptmon.measure.normalize import Normalizer
    from acceptmon.parse.records import DecodeStats, SpecStats

    run, facts = RunState("f", 1), Normalizer(warmup=1)
    steps = [
        run.stats(facts.fact(DecodeStats(line=n, rank="TP0", running_req=running, queue_req=0, gen_throughput=100.0,
                                         accept_len=length, accept_rate=0.5, num_tokens=34 * running)))
        for n, running, length in ((1, 17, 2.0), (2, 17, 3.0), (3, 18, None), (4, 40, 2.5))
    ]  # fmt: skip
    spec = run.stats(facts.fact(SpecStats(line=5, accept_rate=0.25, accept_len=1.5)))  # no engine, no load line
    assert [(s.warm, s.steady, s.seq_len, s.line, s.running_req) for s in steps] == [
        (False, False, 34.0, 1, 17), (True, True, 34.0, 2, 17), (True, True, 34.0, 3, 18), (True, True, 34.0, 4, 40)
    ]  # fmt: skip
    assert (steps[2].accept_len, steps[2].accept_rate, steps[2].speculative) == (None, 0.5, True)
    assert (spec.steady, spec.seq_len, spec.running_req) == (False, None, None)  # no load line for its engine
    assert (spec.accept_len, spec.accept_rate) == (1.5, 0.25)
    assert {k: (b.lines, b.running, b.accept_len.count) for k, b in run.buckets.items()} == {
        (16, 19): (2, 35, 1), (40, 47): (1, 40, 1)
    }  # fmt: skip
    assert (run.stats_lines, run.spec_lines, run.accept_len.count, run.accept_lines) == (5, 5, 3, (2, 5))
    assert (run.figures.batches, run.figures.gen_throughput_per_rank) == (5, 100.0)
    assert (run.throughput.count, run.first_line, run.last_line) == (4, 1, 5)


def test_a_spec_line_with_nan_per_position_rates_is_judged_without_them(grammars, rules):
    """`Per-position acceptance rate: nan, nan, nan` (nothing drafted): the entries are empty, not a crash."""
    line = ("(APIServer pid=1) INFO 11-30 02:35:{:02d} [metrics.py:120] SpecDecoding metrics: Mean acceptance "
            "length: 2.50, Accepted: 0 tokens, Drafted: 0 tokens, Per-position acceptance rate: nan, nan, nan, "
            "Avg Draft acceptance rate: nan%\n")  # fmt: skip
    records = Parser(grammars, "v.log").feed("".join(line.format(i) for i in range(12)).encode())
    assert len(records) == 12 and records[0].position_accept_rates == [None, None, None]
    doctor = Doctor(rules)
    doctor.feed(records)
    assert [f.rule for f in doctor.findings()] == []

"""Doctor rules as data: thresholds at their boundaries, rule files checked at load, user overrides and new rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from acceptmon.diagnose.engine import Doctor
from acceptmon.diagnose.read import diagnose
from acceptmon.diagnose.rules import RuleError, load_rules
from acceptmon.parse.parser import Parser
from tests.conftest import SAMPLES
from tests.data.doctor.make import Log


@pytest.fixture(scope="module")
def rules():
    return load_rules()


def _findings(log, grammars, rules, **kw):
    doctor = Doctor(rules, **kw)
    doctor.feed(Parser(grammars, "b.log").feed(log.text().encode()))
    doctor.finish()
    return {(f.run, f.rule): f for f in doctor.findings()}, doctor


def _stuck(lines):
    log = Log(1)
    log.launch(algo="EAGLE", draft="org/draft")
    log.decode(2 + lines, accept=1.0, jitter=0.0)
    log.decode(3, accept=2.5, jitter=0.0)
    return log


@pytest.mark.parametrize(("lines", "fires"), [(4, False), (5, True)])
def test_p1_needs_five_consecutive_lines_at_1(grammars, rules, lines, fires):
    found, _ = _findings(_stuck(lines), grammars, rules)
    assert ((1, "P1") in found) is fires


@pytest.mark.parametrize(
    ("accept", "steps", "severity"),
    [(1.09, 3, "error"), (1.10, 3, "warning"), (1.49, 3, "warning"), (1.49, 2, None), (1.50, 3, None)],
)
def test_p2_tiers_at_their_boundaries(grammars, rules, accept, steps, severity):
    log = Log(2)
    log.launch(steps=steps, tokens=steps + 1)
    log.decode(7, accept=accept, jitter=0.0)
    found, _ = _findings(log, grammars, rules)
    assert (found[1, "P2"].severity if (1, "P2") in found else None) == severity


@pytest.mark.parametrize(("off", "fires"), [(5, False), (6, True)])
def test_p6_more_than_five_percent_without_graphs(grammars, rules, off, fires):
    log = Log(3)
    log.launch()
    log.decode(100 - off, running=6, graph=True)
    log.decode(off, running=12, graph=False)
    found, _ = _findings(log, grammars, rules)
    assert ((1, "P6") in found) is fires
    if fires:
        assert "Graphs run up to 6 running requests and stop from 12" in found[1, "P6"].message


@pytest.mark.parametrize(("at_cap", "fires"), [(3, False), (4, True)])
def test_p7_twenty_percent_of_lines_at_the_cap(grammars, rules, at_cap, fires):
    log = Log(4)
    log.raw("Max running requests is reset to 48 for speculative decoding.")
    log.launch()
    log.decode(20 - at_cap, running=30)
    log.decode(at_cap, running=48, queue=5)
    found, _ = _findings(log, grammars, rules)
    assert ((1, "P7") in found) is fires


@pytest.mark.parametrize(("accept", "fires"), [(2.2, False), (2.19, True)])
def test_p13_per_step_rate_below_0_3(grammars, rules, accept, fires):
    log = Log(5)
    log.launch(steps=4, tokens=5)
    log.decode(8, accept=accept, jitter=0.0)
    found, _ = _findings(log, grammars, rules)
    assert ((1, "P13") in found) is fires


@pytest.mark.parametrize(("accept", "fires"), [(2.55, False), (2.54, True)])
def test_p17_below_85_percent_of_expected(grammars, rules, accept, fires):
    log = Log(6)
    log.launch()
    log.decode(8, accept=accept, jitter=0.0)
    found, _ = _findings(log, grammars, rules, expected_accept_len=3.0)
    assert ((1, "P17") in found) is fires


@pytest.mark.parametrize(("running", "fires"), [(3, False), (4, True)])
def test_p5_verify_tokens_at_least_256(grammars, rules, running, fires):
    log = Log(7)
    log.launch(algo="EAGLE", draft="org/draft", steps=5, topk=8, tokens=64)
    log.decode(7, running=running, accept=3.0, jitter=0.0)
    found, _ = _findings(log, grammars, rules)
    assert ((1, "P5") in found) is fires


@pytest.mark.parametrize(("over", "severity"), [(4, "info"), (5, "warning")])
def test_p4_five_lines_beyond_the_draft_window(grammars, rules, over, severity):
    log = Log(8)
    log.launch()
    log.msg("Warning: User-specified context_length (16384) is greater than the derived context_length (4096). "
            "This may lead to incorrect model outputs or CUDA errors.", "TP0")  # fmt: skip
    log.decode(10, accept=3.0, seq=1000)
    log.decode(over, accept=3.0, seq=5000)
    found, _ = _findings(log, grammars, rules)
    assert found[1, "P4"].severity == severity
    assert found[1, "P4"].evidence.values["draft_context"] == 4096


@pytest.mark.parametrize(("spec", "verdict"), [(99.0, "loses"), (100.0, "marginal"), (102.9, "marginal"),
                                               (103.0, "pays")])  # fmt: skip
def test_speedup_verdicts_at_their_boundaries(grammars, rules, spec, verdict):
    log = Log(9)
    log.launch(algo=None)
    log.decode(12, accept=None, tput=100.0, tput_jitter=0.0)
    log.launch()
    log.decode(12, accept=3.0, tput=spec, tput_jitter=0.0)
    _, doctor = _findings(log, grammars, rules)
    assert doctor.reports()[1].break_even.verdict == verdict


def test_user_rules_move_a_threshold_disable_a_rule_and_add_one(grammars, tmp_path):
    extra = tmp_path / "mine.toml"
    extra.write_text(
        '[[rule]]\nid = "P18"\nparams = { marginal_below = 1.10 }\n\n'
        '[[rule]]\nid = "P2"\nenabled = false\n\n'
        '[[rule]]\nid = "X1"\ntitle = "Below our fleet\'s usual"\nsignature = "accept_len_low"\n'
        'reads = ["launch", "decode"]\nseverity = "info"\nmessage = "Lower than the fleet."\nfix = "Ask."\n'
        'params = { tiers = [{ below = 2.9, severity = "info" }] }\n'
    )
    rules = load_rules([extra])
    assert next(r for r in rules if r.id == "P18").params.loses_below == 1.0  # untouched keys keep their value
    doctor = diagnose([str(SAMPLES / "seed_eagle3_moe.log")], grammars, rules,
                      baseline=str(SAMPLES / "baseline_nospec.log"))  # fmt: skip
    found = {(f.run, f.rule, f.severity) for f in doctor.findings()}
    assert (2, "P18", "info") in found  # S = 1.05 is marginal under 1.10
    assert not any(rule == "P2" for _, rule, _ in found)
    assert {(n, "X1", "info") for n in (1, 2, 3, 4)} <= found and (5, "X1", "info") not in found


@pytest.mark.parametrize(
    ("text", "key", "words"),
    [
        ('[[rule]]\nid = "P1"\ncolour = "red"\n', "rule.0.colour", "Extra inputs are not permitted"),
        ('[[rule]]\nid = "P1"\nparams = { nope = 1 }\n', "rule.0.params.nope", "Extra inputs are not permitted"),
        ('[[rule]]\nid = "P2"\nparams = { tiers = [{ below = "x", severity = "error" }] }\n',
         "rule.0.params.tiers.0.below", "valid number"),
        ('[[rule]]\nid = "P7"\nseverity = "fatal"\n', "rule.0.severity", "'error', 'warning' or 'info'"),
        ('[[rule]]\nid = "X2"\nsignature = "accept_len_low"\n', "rule.0.title", "a new rule needs title"),
        ('[[rule]]\nid = "P1"\nsignature = "crystal_ball"\n', "rule.0.signature", "unknown signature 'crystal_ball'"),
        ('[[rule]]\nid = "P1"\nreads = ["tea"]\n', "rule.0.reads", "unknown record kind(s) ['tea']"),
        ('[[rule]]\nid = "P 1"\n', "rule.0.id", "should match pattern"),
        ("rule = [\n", "-", "not valid TOML"),
        ("", "rule", "Field required"),
    ],
)  # fmt: skip
def test_bad_rule_file_names_file_key_and_reason(tmp_path, text, key, words):
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(RuleError) as err:
        load_rules([path])
    assert (err.value.file, err.value.key) == (str(path), key)
    assert words in err.value.reason


def test_every_built_in_rule_has_sources_and_reads_what_its_signature_needs(rules):
    assert [r.id for r in rules] == ["P1", "P2", "P3", "P4", "P5", "P6", "P7", "P8", "P9", "P10", "P12", "P13", "P14",
                                     "P15", "P16", "P17", "P18"]  # fmt: skip
    assert all(r.sources and r.fix and r.message for r in rules)
    readers = {"long_context", "cuda_graph_off", "queue_at_cap", "launch_signal", "retractions"}
    assert all("warning" in r.reads for r in rules if r.signature in readers)


def test_p6_batches_above_the_captured_size_without_a_graph_field(grammars, rules):
    log = Log(10)
    log.launch(cuda_graph_bs=[1, 2, 4, 8])
    log.decode(10, running=6)
    log.decode(2, running=12)
    log.lines = [line.replace("cuda graph: True, ", "") for line in log.lines]  # sglang <= 0.4.6
    found, _ = _findings(log, grammars, rules)
    assert found[1, "P6"].evidence.values == {"captured_batch": 8, "lines_above": 2}
    assert found[1, "P6"].evidence.lines == [12, 13]


@pytest.mark.parametrize(
    ("extra", "spec", "rule", "fires"),
    [
        ({"disable_overlap_schedule": True}, True, "P8", True),
        ({"disable_overlap_schedule": True}, False, "P8", False),
        ({"page_size": 16}, True, "P9", True),  # with speculative_eagle_topk 8
        ({"page_size": 1}, True, "P9", False),
    ],
)
def test_launch_signals_from_server_args_alone(grammars, rules, extra, spec, rule, fires):
    log = Log(11)
    if spec:
        log.launch(algo="EAGLE", draft="org/draft", steps=5, topk=8, tokens=64, **extra)
    else:
        log.launch(algo=None, **extra)
    found, _ = _findings(log, grammars, rules)
    assert ((1, rule) in found) is fires


def test_capture_failure_without_speculation_is_not_p16(grammars, rules):
    log = Log(12)
    log.launch(algo=None)
    log.raw("Exception: Capture cuda graph failed: CUDA out of memory.")
    found, _ = _findings(log, grammars, rules)
    assert found == {}


def test_list_rules_names_every_rule_with_its_thresholds_and_merges_rules_files(tmp_path):
    import json

    from tests.test_cli import acceptmon

    mine = tmp_path / "mine.toml"
    mine.write_text('[[rule]]\nid = "P18"\nparams = { marginal_below = 1.25 }\n')
    text = acceptmon("doctor", "--list-rules", "--rules", mine).stdout.decode().splitlines()
    ids = [line.split()[0] for line in text[::2]]
    assert ids == sorted({r.id for r in load_rules()}, key=lambda i: int(i[1:]))  # P2 before P10
    p18 = text[ids.index("P18") * 2 :][:2]
    assert p18[0].split()[:3] == ["P18", "warning", "speedup"] and p18[0].endswith("Speculation does not pay")
    assert "marginal_below=1.25" in p18[1]
    rows = json.loads(acceptmon("doctor", "--list-rules", "--format", "json").stdout)
    p1 = next(r for r in rows if r["id"] == "P1")
    assert p1["thresholds"]["stuck_at_most"] == 1.02 and p1["severity"] == "error" and "decode" in p1["reads"]


def test_doctor_without_files_or_list_rules_is_one_line_exit_2():
    from tests.test_cli import acceptmon

    p = acceptmon("doctor")
    assert p.returncode == 2
    assert p.stderr.decode().strip().splitlines() == [
        "acceptmon: error: doctor: give at least one FILE, or --list-rules (see acceptmon doctor --help)"
    ]


def test_docs_rules_md_is_generated_from_the_rules():
    from acceptmon.diagnose.catalog import rules_markdown

    doc = (Path(__file__).parent.parent / "docs" / "rules.md").read_text()
    assert doc == rules_markdown(load_rules()), "docs/rules.md is stale: run python scripts/rules_doc.py"
    assert all(f"## {r.id}: {r.title}" in doc for r in load_rules())

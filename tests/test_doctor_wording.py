"""What `doctor` says, word for word: line stretches, plurals, one unit for both servers, tree drafts."""

from __future__ import annotations

from acceptmon.diagnose.read import diagnose
from acceptmon.diagnose.report import to_text
from acceptmon.diagnose.rules import load_rules
from tests.conftest import SAMPLES
from tests.data.doctor.make import Log
from tests.test_cli import acceptmon


def _text(paths, grammars, rules, **kw):
    doctor = diagnose([str(p) for p in paths], grammars, rules, **kw)
    return to_text(doctor.findings(), doctor.reports())


def _rules(tmp_path, text):
    path = tmp_path / "mine.toml"
    path.write_text(text)
    return load_rules([path])


def test_a_stretch_of_lines_reads_as_a_range_and_each_line_as_itself(grammars):
    text = _text([SAMPLES / "seed_eagle3_moe.log"], grammars, load_rules())
    assert "    evidence: mean accept len 1.13 over 94 batches (< 1.5) (lines 8–158)\n" in text  # was "lines 8, 158"
    assert text.endswith("\n\n5 runs: 0 errors, 1 warning, 0 info")  # was "5 run(s): ... 0 infos"
    old = _text([SAMPLES / "old_0.4.4.log"], grammars, load_rules())
    assert "(lines\n      6, 9, 10, 13, 14, 17, 18, 21)" in old  # the first lines of 48, not a stretch
    assert old.endswith("\n\n1 run: 0 errors, 1 warning, 0 info")


def test_counts_of_one_are_singular(tmp_path, grammars):
    """One judged batch at one running request, one retraction of one request."""
    log = Log(5)
    log.launch()
    log.decode(3, running=1, accept=1.04, jitter=0.0, tput_jitter=0.0)  # 2 warm-up batches, then 1 judged
    log.msg("KV cache pool is full. Retract requests. #retracted_reqs: 1, #new_tokens_gained: 512, "
            "#new_token_ratio: 0.4120 -> 0.5120", "TP0")  # fmt: skip
    (tmp_path / "one.log").write_text(log.text())
    rules = _rules(tmp_path, '[[rule]]\nid = "P2"\nparams = { min_lines = 1 }\n')
    text = _text([tmp_path / "one.log"], grammars, rules)
    assert "evidence: mean accept len 1.04 over 1 batch (< 1.1) (line 4)" in text  # was "over 1 decode lines"
    assert "evidence: 1 retraction, 1 request retracted, at token usage 0.00 (line 5)" in text  # was "(s)"
    assert "made less than 300.0 tok/s at 1 running request (one verify step" in " ".join(text.split())
    assert text.endswith("\n\n1 run: 1 error, 1 warning, 0 info")  # was "1 run(s): ... 0 infos"


def test_a_vllm_runs_spec_lines_are_batches_as_sglangs_decode_lines(tmp_path):
    """The same words for both servers: a vLLM finding counted its spec lines as "decode lines"."""
    rules = tmp_path / "mine.toml"
    rules.write_text('[[rule]]\nid = "P2"\nparams = { tiers = [{ below = 5.0, severity = "warning" }] }\n')
    p = acceptmon("doctor", SAMPLES / "vllm_v1_0.8.5.log", "--rules", rules)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "    evidence: mean accept len 2.77 over 53 batches (< 5.0) (lines 14–176)\n" in out
    assert "decode line" not in out and "55 batches" in out.splitlines()[0]


def test_a_tree_drafts_low_verify_efficiency_is_explained_where_it_is_shown(grammars):
    """topk 8, 64 draft tokens: one path of at most 6 is accepted, so L/N = 0.05 next to accept len 3.36."""
    text = " ".join(_text([SAMPLES / "old_0.4.4.log"], grammars, load_rules()).split())
    why = (
        "with a tree draft (topk 8) each step verifies all N = 64 draft tokens but accepts one path of at most "
        "k + 1 = 6, so L/N is at most 0.09 by design, however good the draft"
    )
    assert f"verify efficiency L/N = 0.05 at B·N = 1680 tokens per step; {why}" in text  # break-even
    assert f"baseline decides). W{why[1:]}: the cost is the B·N tokens verified per step. try:" in text  # P5
    chain = " ".join(_text([SAMPLES / "newest_0.5.23.log"], grammars, load_rules()).split())
    assert "verify efficiency L/N = 0.76 at B·N = 32 tokens per step 1 run:" in chain and "tree" not in chain


def test_a_small_tree_is_capped_too(grammars):
    """topk 4 with 8 draft tokens and 5 steps: L/N at most 6/8."""
    text = " ".join(_text([SAMPLES / "pd_decode_0.5.3.log"], grammars, load_rules()).split())
    assert "(topk 4) each step verifies all N = 8 draft tokens but accepts one path of at most k + 1 = 6" in text
    assert "so L/N is at most 0.75 by design" in text

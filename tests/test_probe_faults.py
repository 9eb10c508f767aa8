"""What a fault probe of compare, doctor, parse and the vLLM values found, each pinned by a test."""

from __future__ import annotations

import ast
import json
import re
import subprocess
import sys
import warnings

import pytest

from acceptmon.parse.pairs import literal
from acceptmon.parse.parser import Parser
from tests.conftest import ROOT, SAMPLES
from tests.test_cli import DECODE, acceptmon

SEED = SAMPLES / "seed_eagle3_moe.log"
VLLM_DP = SAMPLES / "vllm_v1_0.10.2_dp.log"


def test_parse_refuses_to_write_over_its_input(tmp_path):
    log = tmp_path / "victim.log"
    log.write_bytes(SEED.read_bytes())
    p = acceptmon("parse", log, "-o", log, "--format", "csv")
    assert p.returncode == 2 and "is also an input" in p.stderr.decode()
    assert log.read_bytes() == SEED.read_bytes()


def test_parse_to_a_directory_is_one_line(tmp_path):
    p = acceptmon("parse", SEED, "-o", tmp_path, "--format", "csv")
    err = p.stderr.decode().strip()
    assert p.returncode == 2 and err.endswith("is a directory; name an output file") and "\n" not in err


def test_nan_and_inf_are_missing_values_never_aggregated(tmp_path, grammars):
    odd = DECODE.replace(b"accept len: 2.85", b"accept len: nan").replace(b"94.12", b"inf")
    (record,) = Parser(grammars, "x.log").feed(odd)
    assert record.accept_len is None and record.gen_throughput is None
    log = tmp_path / "odd.log"
    log.write_bytes(DECODE + odd)
    runs = acceptmon("runs", log, "--format", "json").stdout.decode()
    assert "NaN" not in runs and "Infinity" not in runs
    assert json.loads(runs)[0]["accept_len_mean"] == 2.85


@pytest.mark.parametrize(
    ("old", "new"),
    [
        ("Accepted: 1696 tokens", "Accepted: -1696 tokens"),  # a count cannot be negative
        ("0.888, 0.731, 0.548", "0.888,, 0.548"),  # an empty entry would shift the positions
        ("Prefix cache hit rate: 35.9%", "Prefix cache hit rate: 250%"),  # a percentage above 100
    ],
)
def test_impossible_vllm_values_make_the_line_unrecognized(grammars, old, new):
    lines = [line for line in VLLM_DP.read_text().splitlines() if old in line]
    assert lines, old
    parser = Parser(grammars, "v.log")
    assert parser.feed((lines[0].replace(old, new) + "\n").encode()) == []
    assert parser.tally.kinds["unrecognized"] == 1


@pytest.mark.parametrize("year", ["0", "-1", "99999", "1969"])
def test_a_year_outside_what_a_log_can_have_is_refused(year):
    p = acceptmon("parse", VLLM_DP, "--year", year)
    assert p.returncode == 2 and "a year from 1970 to 9999" in p.stderr.decode()


def _vllm_without_speculation(tmp_path):
    """The first server start of the DP sample as if speculation were off: no spec lines, no spec config."""
    nospec = tmp_path / "nospec.log"
    first_run = "non-default args".join(VLLM_DP.read_text().split("non-default args")[0:2])
    kept = "".join(line for line in first_run.splitlines(keepends=True) if "SpecDecoding metrics" not in line)
    kept = re.sub(r"speculative_config=SpeculativeConfig\([^)]*\)", "speculative_config=None", kept)
    nospec.write_text(kept.replace("'speculative_config'", "'other_config'"))
    return nospec


def test_doctor_takes_a_vllm_run_without_speculation_as_baseline(tmp_path):
    p = acceptmon("doctor", VLLM_DP, "--baseline", _vllm_without_speculation(tmp_path), "--format", "json")
    assert p.returncode == 0, p.stderr
    runs = json.loads(p.stdout)["runs"]
    assert all(r["break_even"]["verdict"] in ("pays", "marginal", "loses") for r in runs)


def test_compare_takes_a_vllm_run_without_speculation_as_a_side(tmp_path):
    nospec = _vllm_without_speculation(tmp_path)
    p = acceptmon("compare", nospec, f"{VLLM_DP}#1", "--format", "json")
    assert p.returncode == 0, p.stderr
    got = json.loads(p.stdout)
    assert got["a"]["accept_len"]["mean"] is None and got["a"]["gen_throughput"]["mean"] > 0


def test_compare_names_a_vllm_draft_model_run_as_speculation():
    p = acceptmon("compare", SAMPLES / "vllm_v0_0.6.log", SEED, "--format", "json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["a"]["spec"] == "draft_model steps 3, draft 4"  # inferred as vLLM does


def test_a_file_named_twice_is_counted_once(tmp_path):
    runs = json.loads(acceptmon("runs", SEED, SEED, "--format", "json").stdout)
    assert [r["batches"] for r in runs] == [96, 96, 64, 64, 64]


def test_a_clock_that_goes_back_gives_no_negative_duration(tmp_path):
    log = tmp_path / "back.log"
    later = DECODE.replace(b"14:09:45", b"14:19:45")
    log.write_bytes(later + DECODE)
    (run,) = json.loads(acceptmon("runs", log, "--format", "json").stdout)
    assert run["duration_s"] == 600.0


def test_tail_refuses_a_bad_rule_file_at_once(tmp_path):
    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nid = "P2"\nenabled = "yes"\n')
    p = acceptmon("tail", "--plain", SEED, "--rules", rules)
    assert p.returncode == 2 and "rule.0.enabled" in p.stderr.decode()


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["--expected-accept-len", "inf"], "must be a finite number above zero"),
        (["--rules", "RULES"], "Input should be a finite number"),
    ],
)
def test_doctor_refuses_values_that_cannot_be_thresholds(tmp_path, args, words):
    rules = tmp_path / "r.toml"
    rules.write_text('[[rule]]\nid = "P2"\n[rule.params]\ntiers = [{ below = nan, severity = "warning" }]\n')
    p = acceptmon("doctor", SEED, *[str(rules) if a == "RULES" else a for a in args])
    assert p.returncode == 2 and words in p.stderr.decode()


@pytest.mark.parametrize(("name", "words"), [("out.gz", "'.gz' alone"), ("out", "no suffix"), ("o.txt", "'.txt'")])
def test_an_output_name_without_a_format_says_what_it_has(tmp_path, name, words):
    p = acceptmon("parse", SEED, "-o", tmp_path / name)
    assert p.returncode == 2 and f"cannot tell the format from {words}" in p.stderr.decode()


def test_a_glob_matching_nothing_says_it_waits(tmp_path, grammars):
    from acceptmon.pipeline.live import LiveSource

    notes: list[str] = []
    source = LiveSource([str(tmp_path / "*.log")], grammars, lambda *a: None, note=notes.append)
    source.discover()
    source.close()
    assert notes == [f"{tmp_path / '*.log'}: no file matches yet; waiting for one"]


# -- values a launch line may carry, rule files a user may write ------------------------------

ODD_LAUNCH = (
    b"[2026-02-26 13:50:00] server_args=ServerArgs(model_path='Qwen/Qwen3-8B', a=1if, b=0x1for, c=1.else, "
    b"d='\\d+', speculative_algorithm='EAGLE3', speculative_num_steps=3, speculative_eagle_topk=1, "
    b"speculative_num_draft_tokens=4)\n"
)


def test_odd_launch_and_request_values_print_no_python_warning(tmp_path):
    request = next(line for line in (SAMPLES / "request_0.5.23.log").read_bytes().splitlines() if b"meta_info" in line)
    odd_request = re.sub(rb"'id': '\w+'", rb"'id': 'a\\d'", request, count=1) + b"\n"
    assert odd_request != request + b"\n"
    log = tmp_path / "odd.log"
    log.write_bytes(ODD_LAUNCH + DECODE + odd_request)
    # -W default shows the DeprecationWarning Python 3.11 gives for '\d', as 3.12 shows its SyntaxWarning.
    cmd = [sys.executable, "-W", "default", "-m", "acceptmon", "runs", str(log), "--format", "json"]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0 and "Warning" not in p.stderr, p.stderr
    (run,) = json.loads(p.stdout)
    assert (run["spec_algorithm"], run["spec_num_steps"], run["accept_len_mean"]) == ("EAGLE3", 3, 2.85)
    assert run["requests"] == 1


TOKENIZER_WARNS = [
    "1if",
    "1.if",
    "0x1for",
    "0b1or",
    "0o7and",
    "1jif",
    "1e5if",
    "1_0else",
    "1é",
    "'a'1if",
    "'\\d'",
    "b'\\q'",
]


@pytest.mark.parametrize("text", TOKENIZER_WARNS)
def test_a_value_python_would_warn_about_reads_as_before_and_quietly(text):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            before = ast.literal_eval(text)
        except SyntaxError:
            before = text
        expected = before if isinstance(before, str) else text
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert literal(text) == expected
    assert caught == []


@pytest.mark.parametrize(
    "command",
    [["doctor", SEED], ["tail", "--plain", SEED], ["serve", "--port", "0", SEED]],
    ids=["doctor", "tail", "serve"],
)
def test_a_deeply_nested_rule_file_is_one_line_and_exit_2(tmp_path, command):
    rules = tmp_path / "deep.toml"
    rules.write_text('[[rule]]\nid = "P2"\n[rule.params]\nx = ' + "[" * 100_000 + "]" * 100_000 + "\n")
    p = acceptmon(*command, "--rules", rules)
    assert p.returncode == 2
    assert p.stderr.decode().splitlines() == [f"acceptmon: error: {rules}: not valid TOML: nested too deeply to read"]

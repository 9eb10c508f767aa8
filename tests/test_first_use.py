"""What a first-time user hits: output formats by suffix, nothing written on failure, honest labels, help."""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import signal
import subprocess
import sys
import time

import pytest

from acceptmon.cli import _build_parser, main
from acceptmon.cli.args import size
from acceptmon.sinks.table import columns
from tests.conftest import ROOT, SAMPLES
from tests.test_cli import DECODE, acceptmon

OLD = SAMPLES / "old_0.4.4.log"


@pytest.mark.parametrize(
    ("name", "opener", "first"),
    [
        ("out.csv", open, "file,line,timestamp"),
        ("out.csv.gz", gzip.open, "file,line,timestamp"),
        ("out.jsonl", open, '{"file":'),
        ("out.JSONL.gz", gzip.open, '{"file":'),
        ("out.ndjson", open, '{"file":'),
    ],
)
def test_output_format_follows_the_suffix(tmp_path, name, opener, first):
    out = tmp_path / name
    p = acceptmon("parse", OLD, "-o", out)
    assert p.returncode == 0, p.stderr
    with opener(out, "rt") as f:
        lines = f.read().splitlines()
    assert lines[0].startswith(first)
    assert len(lines) == 50 + (name.lower().startswith("out.csv"))  # CSV has a header line


def test_an_unknown_suffix_is_one_line_and_writes_nothing(tmp_path):
    p = acceptmon("parse", OLD, "-o", tmp_path / "out.xlsx")
    assert p.returncode == 2 and p.stdout == b""
    err = p.stderr.decode().strip()
    assert err.count("\n") == 0 and "out.xlsx: cannot tell the format from '.xlsx'" in err
    assert list(tmp_path.iterdir()) == []
    assert acceptmon("parse", OLD, "-o", tmp_path / "out.xlsx", "--format", "jsonl").returncode == 0


def test_a_failed_parse_writes_no_header_and_no_file(tmp_path):
    bad = tmp_path / "broken.gz"
    bad.write_bytes(gzip.compress(DECODE * 100)[:-30])
    p = acceptmon("parse", bad)
    assert p.returncode == 2 and p.stdout == b""  # not even the CSV header
    p = acceptmon("parse", bad, "-o", tmp_path / "out.csv")
    assert p.returncode == 2
    assert sorted(x.name for x in tmp_path.iterdir()) == ["broken.gz"]  # no out.csv, no temporary file


def test_ctrl_c_says_so_and_leaves_no_file(tmp_path):
    out = tmp_path / "out.csv"
    proc = subprocess.Popen(
        [sys.executable, "-m", "acceptmon", "parse", "-", "-o", str(out)],
        stdin=subprocess.PIPE,
        stderr=subprocess.PIPE,
        cwd=ROOT,
    )
    assert proc.stdin is not None
    proc.stdin.write(DECODE * 1000)
    proc.stdin.flush()
    deadline = time.monotonic() + 20
    while not any(tmp_path.iterdir()) and time.monotonic() < deadline:  # the temporary file exists: it is reading
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130
    assert f"interrupted; nothing written to {out}" in err.decode()
    assert list(tmp_path.iterdir()) == []


def test_runs_says_unknown_when_no_launch_was_seen(tmp_path):
    log = tmp_path / "nolaunch.log"
    log.write_bytes(DECODE * 3)
    table = acceptmon("runs", log).stdout.decode().splitlines()
    assert table[1].split()[4] == "unknown"  # start is one word: awk counts the columns right
    (run,) = json.loads(acceptmon("runs", log, "--format", "json").stdout)
    assert run["launch_seen"] is False and run["spec_algorithm"] is None
    runs = json.loads(acceptmon("runs", SAMPLES / "baseline_nospec.log", "--format", "json").stdout)
    assert [(r["launch_seen"], r["spec_algorithm"]) for r in runs] == [(True, None)]
    assert acceptmon("runs", SAMPLES / "baseline_nospec.log").stdout.decode().splitlines()[1].split()[4] == "none"


@pytest.mark.parametrize("command", ["parse", "runs"])
def test_no_decode_lines_gives_a_hint(tmp_path, command):
    log = tmp_path / "app.log"
    log.write_text("hello\nworld\n")
    p = acceptmon(command, log)
    assert p.returncode == 0
    assert (
        f"acceptmon: no decode or spec lines found in {log}: is this an SGLang or vLLM server log?" in p.stderr.decode()
    )
    assert "no decode lines" not in acceptmon(command, OLD).stderr.decode()


def test_a_kind_the_log_lacks_gives_the_kinds_it_has():
    p = acceptmon("parse", OLD, "--kind", "spec")
    assert p.returncode == 0
    hint = p.stderr.decode().splitlines()[-1]
    assert (
        hint
        == f"acceptmon: no spec lines found in {OLD}; it has 50 decode, 26 prefill lines (--kind writes any one of them)"
    )
    assert "is this an SGLang or vLLM server log" not in p.stderr.decode()


def test_bare_acceptmon_lists_the_commands(capsys):
    assert main([]) == 0
    out = capsys.readouterr().out
    for command in ("parse", "runs", "compare", "grammars", "serve", "tail", "demo"):
        assert f"    {command} " in out


def test_parse_help_defines_the_acceptance_columns_and_lists_every_column():
    out = acceptmon("parse", "--help").stdout.decode()
    assert "accept_len         tokens per verify step per request, the bonus token included" in out
    assert "accept_rate        SGLang: exactly as logged; its definition changed across server versions" in out
    flat = " ".join(out.split())
    assert "vLLM: recomputed as accepted / drafted tokens of the line, a 0-1 fraction with 6 decimals" in flat
    assert "SGLang: (accept_len - 1) / (draft tokens - 1)" in flat
    assert "vLLM: accepted / drafted, the same value as accept_rate" in flat
    assert "Columns, in order: " + ", ".join(columns()) in " ".join(out.split())


def test_every_argument_has_help():
    parser = _build_parser()
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [f"{name} {a.dest}" for name, p in sub.choices.items() for a in p._actions if not a.help]
    assert missing == []


def test_demo_sample_lists_the_samples_and_takes_a_prefix():
    out = " ".join(acceptmon("demo", "--help").stdout.decode().split())
    assert "seed_eagle3_moe.log" in out and "baseline_nospec.log" in out
    p = acceptmon("demo", "--sample", "nosuch", "--plain")
    assert p.returncode == 2 and "names no bundled sample log (there are: baseline_nospec.log" in p.stderr.decode()
    p = acceptmon("demo", "--sample", "old", "--plain", "--speed", "1000")
    assert p.returncode == 0 and "replaying old_0.4.4.log" in p.stderr.decode()


@pytest.mark.parametrize(
    ("text", "value"), [("4096", 4096), ("64K", 65536), ("1M", 1 << 20), ("2g", 2 << 30), ("1MiB", 1 << 20)]
)
def test_sizes(text, value):
    assert size(text) == value


def test_max_bytes_takes_a_size():
    full = acceptmon("runs", OLD, "--format", "json")
    cut = acceptmon("runs", OLD, "--format", "json", "--max-bytes", "4K")
    assert cut.returncode == 0
    assert json.loads(cut.stdout)[0]["batches"] < json.loads(full.stdout)[0]["batches"]
    assert acceptmon("runs", OLD, "--max-bytes", "lots").returncode == 2


def test_grammars_check_takes_a_bundled_grammar_and_an_edited_copy(tmp_path):
    bundled = ROOT / "grammars" / "sglang_decode.toml"
    p = acceptmon("grammars", "check", bundled)
    assert p.returncode == 0 and p.stdout.decode().strip() == f"{bundled}: ok"
    copy = tmp_path / "mine.toml"
    shutil.copy(bundled, copy)
    assert acceptmon("grammars", "check", copy).returncode == 0
    copy.write_text(copy.read_text().replace("expect = {", "expect = { iteration = 99999, ", 1))
    p = acceptmon("grammars", "check", copy)
    assert p.returncode == 2 and "expected 99999" in p.stderr.decode()


def test_no_stray_files_at_the_top_level():
    assert not list(ROOT.glob("*.whl"))

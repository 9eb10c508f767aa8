"""The acceptmon command as a user runs it: real processes, exit codes, one-line errors."""

from __future__ import annotations

import csv
import gzip
import io
import json
import os
import subprocess
import sys

import pytest

from acceptmon.cli import main
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.streams import STREAM_FIELDS
from acceptmon.pipeline import batch as pipeline
from acceptmon.pipeline.batch import run
from acceptmon.sinks.table import TableJob, columns
from tests.conftest import GOLDEN, ROOT, SAMPLES

SEED = SAMPLES / "seed_eagle3_moe.log"
DECODE = (
    b"[2026-02-26 14:09:45 TP0] Decode batch, #running-req: 3, #token: 4521, token usage: 0.02, accept len: 2.85, "
    b"accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0\n"
)


def acceptmon(*args, stdin=None, cwd=ROOT):
    return subprocess.run(
        [sys.executable, "-m", "acceptmon", *map(str, args)],
        input=stdin,
        capture_output=True,
        cwd=cwd,
        timeout=120,
    )


def test_parse_csv_columns_and_summary(tmp_path):
    out = tmp_path / "out.csv"
    p = acceptmon("parse", SEED, "-o", out)
    assert p.returncode == 0, p.stderr
    rows = list(csv.DictReader(out.open()))
    decode = [c for c in KINDS["decode"].columns if c not in STREAM_FIELDS]
    assert list(rows[0])[: len(decode)] == decode  # other table kinds' columns follow, empty on decode rows
    assert list(rows[0])[-4:] == list(STREAM_FIELDS) == ["source", "namespace", "pod", "container"]  # then these
    assert rows[0]["source"] == rows[0]["pod"] == ""  # a plain file's lines
    assert list(rows[0]) == list(columns()) and rows[0]["engine"] == rows[0]["position_accept_rates"] == ""
    assert list(rows[0])[:8] == ["file", "line", "timestamp", "rank", "server", "kind", "accept_len", "accept_rate"]
    assert len(rows) == 384
    assert rows[0]["rank"] == "DP0 TP0 EP0" and rows[0]["run"] == "1" and rows[0]["spec_algorithm"] == "EAGLE3"
    summary = p.stderr.decode().strip().splitlines()[-1]
    assert summary.startswith(
        "acceptmon: 668 lines read, 384 decode, 0 spec, 0 throughput, 122 prefill, 5 launch, 0 unrecognized, "
        "0 oversized ("
    )
    assert summary.endswith(
        f"s); 384 rows -> {out}; 11 lines mention 'accept' but are not acceptance lines (grep accept would count them)"
    )


def test_parse_jsonl_from_suffix_matches_golden(tmp_path):
    out = tmp_path / "out.jsonl"
    assert acceptmon("parse", "sample_logs/old_0.4.4.log", "-o", out).returncode == 0
    assert out.read_text() == (GOLDEN / "old_0.4.4.jsonl").read_text()


def test_parse_gz_stdin_and_several_files(tmp_path):
    gz = tmp_path / "old.log.gz"
    gz.write_bytes(gzip.compress((SAMPLES / "old_0.4.4.log").read_bytes()))
    p = acceptmon("parse", gz, "-", "--format", "jsonl", stdin=DECODE * 2)
    assert p.returncode == 0, p.stderr
    rows = [json.loads(line) for line in p.stdout.decode().splitlines()]
    assert len(rows) == 52
    assert {r["file"] for r in rows} == {str(gz), "-"}
    assert [r["line"] for r in rows[-2:]] == [1, 2]


def test_runs_json_keys(tmp_path):
    p = acceptmon("runs", SEED, "--format", "json")
    runs = json.loads(p.stdout)
    assert [r["run"] for r in runs] == [1, 2, 3, 4, 5]
    for key in (
        "run",
        "spec_algorithm",
        "spec_num_steps",
        "spec_num_draft_tokens",
        "batches",
        "accept_len_mean",
    ):
        assert key in runs[0]
    assert runs[0]["accept_len_mean"] < 1.2 < 2.75 < runs[1]["accept_len_mean"]


def test_runs_table_reads_as_a_sweep():
    p = acceptmon("runs", SEED)
    lines = p.stdout.decode().splitlines()
    assert lines[0].split()[:5] == ["file", "run", "start", "model", "spec"]
    assert len(lines) == 6
    assert "EAGLE3" in lines[1] and "Qwen3-30B-A3B" in lines[1]


def test_grammars_list_and_check(tmp_path):
    p = acceptmon("grammars")
    assert p.returncode == 0 and b"sglang_decode" in p.stdout
    good = acceptmon("grammars", "check", ROOT / "tests/data/bad_grammars/../../../grammars/sglang_decode.toml")
    assert good.returncode == 0  # a bundled grammar checks against the others, standing in for itself
    bad = acceptmon("grammars", "check", ROOT / "tests/data/bad_grammars/wrong_value.toml")
    ok = tmp_path / "ok.toml"
    ok.write_text(
        (ROOT / "tests/data/bad_grammars/wrong_value.toml")
        .read_text()
        .replace("9.99", "2.85")
        .replace("priority = 1", "priority = 200")
    )
    fine = acceptmon("grammars", "check", ok)
    assert fine.returncode == 0 and fine.stdout.decode().strip() == f"{ok}: ok"
    twin = tmp_path / "twin.toml"
    twin.write_text(ok.read_text())
    both = acceptmon("grammars", "check", ok, twin)
    assert both.returncode == 2 and b"already loaded" in both.stderr
    assert bad.returncode == 2
    assert bad.stderr.decode().strip().endswith("samples.0.expect.accept_len: expected 9.99, got 2.85")


@pytest.mark.parametrize(
    ("make", "words"),
    [
        (lambda d: d / "missing.log", "no such file"),
        (lambda d: d, "is a directory"),
        (lambda d: _bad_gzip(d), "corrupt gzip data"),
    ],
)
def test_bad_input_is_one_line_exit_2(tmp_path, make, words):
    path = make(tmp_path)
    p = acceptmon("parse", path)
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2
    assert len(err) == 1 and "Traceback" not in p.stderr.decode()
    assert err[0].startswith(f"acceptmon: error: {path}: ") and words in err[0]


def test_bad_grammar_option_is_one_line(tmp_path):
    p = acceptmon("parse", SEED, "--grammar", ROOT / "tests/data/bad_grammars/bad_regex.toml")
    assert p.returncode == 2
    assert p.stderr.decode().count("\n") == 1 and "pattern: does not compile" in p.stderr.decode()


def test_huge_line_random_bytes_and_invalid_utf8(tmp_path):
    log = tmp_path / "hostile.log"
    with log.open("wb") as f:
        f.write(DECODE)
        f.write(b"x" * (10 << 20) + b"Decode batch" + b"\n")  # 10 MB line
        f.write(os.urandom(4096).replace(b"\n", b" ") + b"\n")
        f.write(b"\xff\xfe invalid \x80 utf-8\n")
        f.write(DECODE)
    p = acceptmon("parse", log, "--format", "jsonl")
    assert p.returncode == 0
    assert [json.loads(line)["line"] for line in p.stdout.decode().splitlines()] == [1, 5]
    assert "1 oversized" in p.stderr.decode()


@pytest.mark.parametrize("limit", [None, 3_000_017])
def test_parallel_output_is_identical_to_sequential(tmp_path, grammars, monkeypatch, limit):
    big = tmp_path / "big.log"
    data = SEED.read_bytes()
    big.write_bytes(data * 40)  # 5 MB, 200 launches, cut into many ranges
    if limit is not None:
        limit = (data * 40).rfind(b"\n", 0, limit) + 1  # a line start, as a live start is
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", 1 << 18)
    ranges: list[int] = []
    split = pipeline.split_ranges

    def spy(*args, **kwargs):
        out = split(*args, **kwargs)
        ranges.append(len(out))
        return out

    monkeypatch.setattr(pipeline, "split_ranges", spy)
    outs = []
    for jobs in (1, 2):
        buf = io.BytesIO()
        result = run([str(big)], grammars, TableJob("csv", buf), jobs=jobs, limit=limit)
        outs.append((buf.getvalue(), dict(result.tally.kinds), result.tally.accept_noise))
    assert ranges and ranges[0] >= 10  # the parallel run really was cut into many ranges
    assert outs[0] == outs[1]
    lines = outs[0][0].decode().splitlines()
    if limit is None:
        assert outs[0][1]["decode"] == 384 * 40
        last = lines[-1].split(",")
        assert last[1] == str(668 * 40) and last[15] == "200"  # line number and run index carried across ranges
    else:
        head = (data * 40)[:limit]
        assert outs[0][1]["decode"] == head.count(b"] Decode batch")
        assert sum(outs[0][1].values()) == head.count(b"\n")


def test_a_rank_glued_to_the_time_is_read_alike_on_5_mib_and_on_a_small_copy(tmp_path):
    """`[... 12:00:00TP0]` is no envelope: the fast lane (files of 4 MiB or more) reads it as `-j 1`
    reads a small copy, not as a row of its own."""
    glued = DECODE.replace(b"14:09:45 TP0]", b"14:09:45TP0]")
    small, big = tmp_path / "small.log", tmp_path / "big.log"
    small.write_bytes(DECODE + glued * 3)
    big.write_bytes(small.read_bytes() * (5 * (1 << 20) // len(small.read_bytes()) + 1))
    assert big.stat().st_size >= 5 << 20 >= pipeline.FAST_MIN_BYTES
    one, many = acceptmon("parse", small, "-j", "1"), acceptmon("parse", big)
    assert one.returncode == many.returncode == 0
    rows = one.stdout.splitlines()
    assert len(rows) == 2  # the header and the spaced line
    copies = big.stat().st_size // small.stat().st_size
    values = [row.split(b",", 2)[2] for row in many.stdout.splitlines()]  # without file and line
    assert values == [rows[0].split(b",", 2)[2], *[rows[1].split(b",", 2)[2]] * copies]


def test_unreadable_file_is_one_line_exit_2(tmp_path, monkeypatch, capsys):
    path = tmp_path / "secret.log"
    path.write_bytes(DECODE)
    path.chmod(0)
    if os.access(path, os.R_OK):  # root reads anything: make open() fail as it does for a user
        real_open = open

        def refuse(file, *a, **k):
            if str(file) == str(path):
                raise PermissionError(13, "Permission denied", str(file))
            return real_open(file, *a, **k)

        monkeypatch.setattr("builtins.open", refuse)
    assert main(["parse", str(path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == [f"acceptmon: error: {path}: Permission denied"] or err == [
        f"acceptmon: error: {path}: permission denied"
    ]


def _bad_gzip(d):
    p = d / "broken.log.gz"
    p.write_bytes(gzip.compress(DECODE * 1000)[:200])
    return p


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (["tail", "--window", "banana", "x.log"], "acceptmon tail: error: argument --window: not a duration: 'banana'"),
        (["serve"], "acceptmon serve: error: the following arguments are required: FILE"),
        (["frobnicate"], "acceptmon: error: argument COMMAND: invalid choice: 'frobnicate'"),
        (["demo", "--sample", "nope.log"], "acceptmon: error: nope.log: names no bundled sample log (there are: "),
        (["serve", "acceptmon"], "acceptmon: error: acceptmon: is a directory, not a log file"),
        (["demo", "--speed", "0"], "acceptmon demo: error: argument --speed: must be a finite number above zero: '0'"),
        (["tail", "--plain", "tests"], "acceptmon: error: tests: is a directory, not a log file"),
        (
            ["serve", "x.log", "--state-file", "no/such/dir/state.json"],
            "acceptmon: error: no/such/dir/state.json: cannot write",
        ),
        (
            ["serve", "x.log", "--state-file", "pyproject.toml"],
            "acceptmon: error: pyproject.toml: not an acceptmon state file",
        ),
    ],
)
def test_bad_arguments_are_one_line_exit_2(args, words):
    p = acceptmon(*args)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1 and lines[0].startswith(words), p.stderr


def test_demo_without_a_terminal_prints_lines_then_the_sweep_table():
    p = acceptmon("demo", "--speed", "1000")
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode().splitlines()
    decode = [line for line in out if " accept_len=" in line]
    logged = [line[1:20] for line in SEED.read_text().splitlines() if "] Decode batch" in line]
    assert len(decode) == len(logged) == 384  # every decode batch of the seed log, in order
    assert [line[:19] for line in decode] == logged
    table = out[out.index("") + 1 :]
    assert [row.split()[1] for row in table[1:]] == ["1", "2", "3", "4", "5"]
    at = table[0].split().index("accept_len")  # one word per header and per cell: the header names the column
    assert [row.split()[at] for row in table[1:]] == ["1.13", "2.84", "1.81", "2.41", "3.27"]


def test_runs_max_bytes_reads_only_the_start():
    data = SEED.read_bytes()
    third_launch = [i for i in range(len(data)) if data.startswith(b"server_args=", i)][2]
    cut = data.rfind(b"\n", 0, third_launch) + 1
    p = acceptmon("runs", SEED, "--format", "json", "--max-bytes", cut)
    assert p.returncode == 0, p.stderr
    runs = json.loads(p.stdout)
    whole = json.loads(acceptmon("runs", SEED, "--format", "json").stdout)
    assert len(whole) == 5 and runs == whole[:2]  # the runs before the cut, exactly as from the whole file
    assert [round(r["accept_len_mean"], 2) for r in runs] == [1.13, 2.84]


def test_compare_names_the_runs_there_are(capsys):
    assert main(["compare", f"{SEED}#9", str(SEED)]) == 2
    assert capsys.readouterr().err.strip() == f"acceptmon: error: {SEED}#9: no run 9 (runs there: 1-5)"

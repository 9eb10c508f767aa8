"""What a new user reads: output formats by name, one-word table cells, the stderr summary's wording,
the year note, tree drafts explained, a binary file called so, and serve's stop line."""

from __future__ import annotations

import gzip
import json
import os
import random
import re
import shutil
import subprocess
from datetime import datetime

import pytest

from acceptmon.cli import main
from acceptmon.pipeline import batch as pipeline
from tests.conftest import GOLDEN, ROOT, SAMPLES
from tests.serving import Serve, value, wait_for
from tests.test_cli import acceptmon

OLD = SAMPLES / "old_0.4.4.log"
OLD_AS_GOLDEN = "sample_logs/old_0.4.4.log"  # as the goldens name it (the commands run in the checkout)
SEED = SAMPLES / "seed_eagle3_moe.log"
VLLM = SAMPLES / "vllm_v1_0.10.2_dp.log"
V0 = SAMPLES / "vllm_v0_0.6.log"


def _golden_rows(name: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in (GOLDEN / name).read_text().splitlines()]


@pytest.fixture
def cli(capsys, monkeypatch):
    """The command line in this process (as `acceptmon ARGS` runs it, in the checkout): (exit code, stdout,
    stderr). Most tests here use it, the process start of each run would cost more than the run."""
    monkeypatch.chdir(ROOT)

    def run(*args: object) -> tuple[int, str, str]:
        capsys.readouterr()
        try:
            code = main([str(a) for a in args])
        except SystemExit as exc:  # an argument error
            code = int(exc.code or 0)
        got = capsys.readouterr()
        return code, got.out, got.err

    return run


@pytest.mark.parametrize("name", ["out.json", "out.JSON.gz"])
def test_a_json_output_is_one_array_that_json_load_reads(tmp_path, name):
    out = tmp_path / name
    p = acceptmon("parse", OLD_AS_GOLDEN, "-o", out)
    assert p.returncode == 0, p.stderr
    opener = gzip.open if name.endswith(".gz") else open
    with opener(out, "rt") as f:
        text = f.read()
    assert json.loads(text) == _golden_rows("old_0.4.4.jsonl")  # the JSON Lines rows, as one array
    lines = text.splitlines()
    assert lines[0] == "[" and lines[-1] == "]" and len(lines) == 50 + 2  # still one row per line


def test_jsonl_stays_json_lines_and_format_json_goes_to_stdout_too(tmp_path, cli):
    out = tmp_path / "out.jsonl"
    assert cli("parse", OLD_AS_GOLDEN, "-o", out)[0] == 0
    assert [json.loads(line) for line in out.read_text().splitlines()] == _golden_rows("old_0.4.4.jsonl")
    code, text, _ = cli("parse", OLD_AS_GOLDEN, "--format", "json")
    assert code == 0 and json.loads(text) == _golden_rows("old_0.4.4.jsonl")
    assert cli("parse", OLD, "--kind", "request", "--format", "json")[:2] == (0, "[]\n")  # no request line


@pytest.mark.parametrize(
    ("name", "fmt", "means", "rename"),
    [
        ("out.json", "jsonl", "json (one JSON array)", "out.jsonl"),
        ("out.jsonl.gz", "json", "jsonl (JSON Lines)", "out.json.gz"),
        ("out.csv", "jsonl", "csv (CSV)", "out.jsonl"),
    ],
)
def test_format_and_suffix_must_agree(tmp_path, cli, name, fmt, means, rename):
    out = tmp_path / name
    code, text, err = cli("parse", OLD, "-o", out, "--format", fmt)
    assert code == 2 and text == ""
    suffix = name.removesuffix(".gz")[name.index(".") :]
    assert err == (
        f"acceptmon: error: {out}: --format {fmt}, but the suffix {suffix} means {means}: "
        f"name the file {tmp_path / rename}, or leave out --format\n"
    )
    assert list(tmp_path.iterdir()) == []  # nothing written
    assert cli("parse", OLD, "-o", out, "--format", name.split(".")[1].lower())[0] == 0  # agreeing


def test_a_json_array_is_the_same_through_the_fast_lane_and_workers(tmp_path, monkeypatch, capsys):
    """Rows the fast lane writes, and rows from several processes, are joined into one array too."""
    big = tmp_path / "big.log"
    big.write_bytes(SEED.read_bytes() * 4 + VLLM.read_bytes())
    monkeypatch.setattr(pipeline, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(pipeline, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(pipeline, "RANGE_BYTES", 1 << 16)
    arrays = []
    for jobs in ("1", "2"):
        assert main(["parse", str(big), "-o", str(tmp_path / f"rows{jobs}.json"), "-j", jobs, "--year", "2025"]) == 0
        arrays.append(json.loads((tmp_path / f"rows{jobs}.json").read_text()))
    assert main(["parse", str(big), "-o", str(tmp_path / "rows.jsonl"), "-j", "1", "--year", "2025"]) == 0
    lines = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    capsys.readouterr()
    assert arrays[0] == arrays[1] == lines and len(lines) == 384 * 4 + 186


def test_every_runs_header_and_cell_is_one_word(cli):
    """`awk '{print $10}'` and `column -t` read the table: as many words in each row as in the header."""
    logs = sorted(SAMPLES.glob("*.log"))
    code, text, err = cli("runs", *logs, "--year", "2025")
    assert code == 0, err
    rows = [line.split() for line in text.splitlines()]
    head = rows[0]
    assert len(head) == 19 and head[2] == "start" and head[-1] == "req_len_p10/p50/p90"
    assert len(rows) > len(logs) and all(len(r) == len(head) for r in rows)
    seed = [dict(zip(head, r, strict=True)) for r in rows if r[0] == "seed_eagle3_moe.log"]
    assert [(r["run"], r["start"], r["accept_len"]) for r in seed[:2]] == [
        ("1", "2026-02-26T13:50:00", "1.13"),
        ("2", "2026-02-26T13:53:38", "2.84"),
    ]
    if shutil.which("column"):
        aligned = subprocess.run(["column", "-t"], input=text, capture_output=True, text=True)
        assert [line.split() for line in aligned.stdout.splitlines()] == rows


def test_vllm_accept_rate_is_accepted_over_drafted_not_the_logged_percent(cli):
    """The value `parse --help` now describes (it said "exactly as logged")."""
    text = cli("parse", VLLM, "--format", "jsonl", "--year", "2025")[1]
    spec = [r for r in map(json.loads, text.splitlines()) if r["kind"] == "spec"]
    first = spec[0]  # "Accepted: 1696 tokens, Drafted: 2349 tokens, ... Avg Draft acceptance rate: 72.2%"
    assert (first["accepted_tokens"], first["drafted_tokens"]) == (1696, 2349)
    assert first["accept_rate"] == first["draft_accept_rate"] == round(1696 / 2349, 6) == 0.722009 != 0.722
    assert all(r["accept_rate"] == round(r["accepted_tokens"] / r["drafted_tokens"], 6) for r in spec)


def _summary(err: str) -> str:
    (line,) = [x for x in err.splitlines() if " lines read, " in x]
    return re.sub(r" \(\d+\.\d\ds\)", " (T)", line)


def test_the_summary_has_one_wording_for_both_servers_and_says_what_grep_would_count(tmp_path, cli):
    sglang = _summary(acceptmon("parse", SEED, "-o", tmp_path / "s.csv").stderr.decode())  # a real process, once
    assert sglang == (
        "acceptmon: 668 lines read, 384 decode, 0 spec, 0 throughput, 122 prefill, 5 launch, 0 unrecognized, "
        f"0 oversized (T); 384 rows -> {tmp_path / 's.csv'}; 11 lines mention 'accept' but are not acceptance "
        "lines (grep accept would count them)"
    )
    grep = subprocess.run(["grep", "-c", "accept", SEED], capture_output=True)
    assert int(grep.stdout) == 384 + 11  # grep's count: the decode rows and the 11 that are none
    vllm = _summary(cli("parse", VLLM, "--year", "2025")[2])
    assert vllm == (
        "acceptmon: 224 lines read, 0 decode, 92 spec, 94 throughput, 0 prefill, 6 launch, 0 unrecognized, "
        "0 oversized (T); 186 rows; 0 lines mention 'accept' but are not acceptance lines (grep accept would "
        "count them)"
    )
    one = tmp_path / "one.log"
    one.write_bytes(OLD.read_bytes() + b"INFO: the client did not accept the cookie\n")
    assert _summary(cli("parse", one)[2]).endswith(
        "; 50 rows; 1 line mentions 'accept' but is not an acceptance line (grep accept would count it)"
    )


def test_the_year_note_names_each_file(tmp_path, cli):
    a, b = tmp_path / "a.log", tmp_path / "b.log"
    shutil.copy(VLLM, a)
    shutil.copy(V0, b)
    os.utime(a, (datetime(2025, 12, 31, 23, 59, 59).timestamp(),) * 2)
    os.utime(b, (datetime(2026, 12, 31, 23, 59, 59).timestamp(),) * 2)
    for command in ("parse", "runs"):
        notes = [x for x in cli(command, a, b)[2].splitlines() if "year of" in x]
        assert notes == [
            f"acceptmon: year of year-less timestamps: 2025 (file modification time of {a}), "
            f"2026 (file modification time of {b}); --year sets it"
        ]


def test_compare_takes_year_like_the_other_commands(tmp_path, cli):
    log = tmp_path / "v.log"
    shutil.copy(VLLM, log)
    os.utime(log, (datetime(2025, 12, 31, 23, 59, 59).timestamp(),) * 2)
    both = (f"{log}#1", f"{log}#2", "--format", "json", "--resamples", "100")
    code, given, err = cli("compare", *both, "--year", "2024")
    assert code == 0, err
    assert err.splitlines() == ["acceptmon: year of year-less timestamps: 2024 (--year)"]
    code, default, err = cli("compare", *both)
    assert err.splitlines() == [
        f"acceptmon: year of year-less timestamps: 2025 (file modification time of {log}); --year sets it"
    ]
    assert json.loads(given) == json.loads(default)  # no timestamp in the comparison
    code, _, err = cli("compare", *both, "--year", "20x5")
    assert code == 2 and "--year: not a year: '20x5'" in err


TREE = (
    "tree drafts ({which}: topk 8, 64 draft tokens): verification accepts one path of the tree, so {rate} is low "
    "by design; judge by {length}"
)


def test_runs_explains_a_tree_drafts_low_draft_rate_under_the_table(cli):
    code, text, err = cli("runs", OLD, SEED)
    assert code == 0, err
    head, row = (line.split() for line in text.splitlines()[:2])
    cells = dict(zip(head, row, strict=True))
    assert (cells["topk"], cells["draft"], cells["draft_rate"], cells["accept_len"]) == ("8", "64", "0.04", "3.36")
    note = "acceptmon: " + TREE.format(which="old_0.4.4.log#1", rate="draft_rate", length="accept_len")
    assert note in err.splitlines() and note not in text  # on stderr: the table stays rows only
    assert "tree drafts" not in cli("runs", SEED)[2]  # topk 1: no note
    assert "tree drafts" not in cli("runs", OLD, "--format", "json")[2]


def test_compare_explains_a_tree_drafts_low_accept_rate(cli):
    code, out, err = cli("compare", OLD, f"{SEED}#2", "--resamples", "100")
    assert code == 0, err
    text = " ".join(out.split("\n  "))  # wrapped at 100 columns, continued with an indent
    assert TREE.format(which="A", rate="accept rate (draft)", length="accept len") in text.splitlines()
    assert all(len(line) <= 100 for line in out.splitlines())
    assert "tree drafts" not in cli("compare", f"{SEED}#1", f"{SEED}#2", "--resamples", "100")[1]


def test_a_binary_file_is_called_binary_in_one_line(tmp_path, cli):
    """A binary file has no decode line, as a text log without one: a hint, exit 0 (see --help)."""
    elf = tmp_path / "prog.log"
    elf.write_bytes(b"\x7fELF\x02\x01\x01\x00" + bytes(range(256)) * 600 + b"\nDecode batch\n" * 300)
    noise = tmp_path / "noise.log"
    noise.write_bytes(random.Random(1).randbytes(100_000).replace(b"\0", b"\1"))
    packed = tmp_path / "prog.log.gz"
    packed.write_bytes(gzip.compress(elf.read_bytes()))
    text = tmp_path / "app.log"
    text.write_text("hello\nwörld \x1b[1mbold\x1b[0m\n")  # text (colour codes too): the plain hint
    cases = (
        (elf, "NUL bytes in its first 64 KiB"),
        (noise, r"\d\d % non-text characters in its first 64 KiB"),
        (packed, "NUL bytes in its first 64 KiB"),  # judged by what it holds, not by its gzip bytes
    )
    p = acceptmon("runs", elf)  # a real process, once
    assert p.returncode == 0 and p.stderr.decode() == (
        f"acceptmon: {elf} looks binary (NUL bytes in its first 64 KiB), not a text log: no decode or spec lines found\n"
    )
    for command in ("parse", "runs"):
        code, _, err = cli(command, *(path for path, _ in cases), text)
        assert code == 0
        hints = [x for x in err.splitlines() if "no decode" in x]
        assert len(hints) == 4
        for (path, why), hint in zip(cases, hints, strict=False):
            pattern = rf"acceptmon: {re.escape(str(path))} looks binary \({why}\), not a text log: no decode or spec lines found"
            assert re.fullmatch(pattern, hint), hint
        assert hints[3] == f"acceptmon: no decode or spec lines found in {text}: is this an SGLang or vLLM server log?"


@pytest.mark.integration
def test_serve_stop_line_counts_vllm_spec_lines(tmp_path):
    log = tmp_path / "v.log"
    shutil.copy(VLLM, log)
    serve = Serve(str(log), "--from-start", "--year", "2025")
    try:
        serve.wait_listening()
        assert wait_for(lambda: value(serve.metrics(), "acceptmon_lines_total", kind="throughput") == 94, 20)
    finally:
        serve.stop()
    stopped = [x for x in serve.stderr.splitlines() if "stopped: " in x]
    assert stopped == [
        f"acceptmon: stopped: {log}: 224 lines read, 0 decode, 92 spec, 94 throughput, 0 prefill, 6 launch, "
        "0 unrecognized, 0 oversized"
    ]

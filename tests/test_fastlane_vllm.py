"""vLLM's lines on the fast lane: the same bytes and tallies as the general parser, and most rows from the lane.

Inputs: every vLLM line of the reference format samples (which lane each takes), and generated vLLM logs
(every sample shape, numbers in every spelling, per-position lists of 1 to 15 rates, process prefixes and
colour, New Year and a late line from before it inside one block, 29 February, impossible dates, launches,
noise; lines with no logging prefix, before and after dated ones), read sequentially and on small parallel ranges.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import pytest

from acceptmon.parse.fast import lane as fastlane
from acceptmon.parse.fast import native
from acceptmon.parse.parser import Parser
from acceptmon.pipeline import batch
from acceptmon.sinks.table import TableJob
from tests.conftest import SAMPLES
from tests.test_fastlane import GRAMMARS, _run, _same

REFERENCE = Path(__file__).parent / "data" / "vllm_reference_lines.jsonl"
"""vLLM's reference line of each release family (label, line), as its logging code prints it."""

LANES = {
    "VLLM-V0a": "fast",
    "VLLM-V0b": "fast",
    "VLLM-V1a": "fast",  # no envelope: rows with no timestamp and no rank
    "VLLM-V1b": "fast",  # the same
    "VLLM-V1c": "fast",
    "VLLM-V1x": "fast",
    "VLLM-V1d": "fast",
    "VLLM-T0": "fast",
    "VLLM-T1": "fast",
    "VLLM-T2": "fast",
}
"""The lane each vLLM line of the reference samples takes once its shape was seen (by its label)."""


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    """Every input takes the lane, the compiled matcher is there, the year is fixed (a common year)."""
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    monkeypatch.setattr(fastlane, "LEARN_PIECE", 1 << 10)
    monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
    monkeypatch.setattr(GRAMMARS, "year_for", lambda file, stamp: 2025)
    assert native.load() is not None


def _reference() -> list[tuple[str, str]]:
    return [(r["label"], r["line"]) for r in map(json.loads, REFERENCE.read_text().splitlines())]


def _built(monkeypatch, path: Path, fmt: str = "csv") -> tuple[list[int], tuple]:
    """Line numbers of the rows the general parser built while the lane read ``path``, and the output."""
    built: list[int] = []
    feed = Parser.feed

    def spy(self, block):
        records = feed(self, block)
        built.extend(r.line for r in records if r.kind in ("spec", "throughput"))
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    out = _run(path, fmt, fast=True)
    monkeypatch.setattr(Parser, "feed", feed)
    return built, out


def test_which_lane_each_vllm_reference_line_takes(tmp_path, monkeypatch):
    samples = _reference()
    assert {label for label, _ in samples} == set(LANES)
    for i, (label, line) in enumerate(samples):
        path = tmp_path / f"{i}.log"
        path.write_text((line + "\n") * 40)
        for fmt in ("csv", "jsonl"):
            built, out = _built(monkeypatch, path, fmt)
            assert out == _run(path, fmt, fast=False), (label, fmt)  # byte for byte, tallies too
            lane = "fast" if max(built) < 20 else "parser"  # the first lines teach the lane, the rest are its
            assert (label, fmt, lane) == (label, fmt, LANES[label])


# ---- generated logs ---------------------------------------------------------------------------

LAUNCH = (
    "(APIServer pid=7) INFO 12-31 23:40:00 [utils.py:328] non-default args: {'model': 'Qwen/Qwen3-8B', "
    "'speculative_config': {'method': 'eagle3', 'model': 'x/eagle3', 'num_speculative_tokens': 3}}"
)
SHAPES = [
    s.line
    for g in GRAMMARS.records
    if g.spec.server == "vllm" and not g.spec.record == "launch"
    for s in g.spec.samples
    if re.match(r"(\(\w+ pid=\d+\) )?[A-Z]+ \d\d-\d\d ", s.line)
]
NUMBERS = ["0", "7", "12", "007", "2.50", "0.000", "1.00", "nan", "1e5", "12345678901234567890", "65536", "3.1"]
PERCENTS = ["57.3%", "0.0%", "100.0%", "nan%", "5%", "101.0%", "99.99%", "057.3%"]
PREFIXES = ["", "(APIServer pid=3051) ", "\x1b[1;36m(APIServer pid=3051)\x1b[0;0m ", "(EngineCore_DP1 pid=9) ",
            "(pid=4, ip=10.0.0.1) ", "(APIServer pid=1) (EngineCore_DP0 pid=2) ", "vllm-1  | ", "(Api Server pid=1) "]  # fmt: skip
LEVELS = ["INFO", "DEBUG", "WARNING", "INFO", "INFO"]
SOURCES = ["[metrics.py:96]", "metrics.py:367]", "[v1/spec_decode/metrics.py:96]", "[loggers.py:127]"]
NOISE = [
    "(APIServer pid=1) INFO 12-31 23:59:00 [logger.py:43] Received request: accepted tokens are fine",
    'INFO:     127.0.0.1:41452 - "POST /v1/completions HTTP/1.1" 200 OK',
    "(APIServer pid=1) INFO 12-31 23:59:00 [metrics.py:96] SpecDecoding metrics: Mean acceptance length: x",
]


def _message(line: str) -> str:
    return re.sub(r"^(\(\w+ pid=\d+\) )?[A-Z]+ \d\d-\d\d \d\d:\d\d:\d\d \[?[\w./]+:\d+\] ", "", line)


def _vary(message: str, r: random.Random) -> str:
    """A message with new numbers (now and then an odd spelling) and a per-position list of 1 to 15 rates."""
    n = r.choice([1, 3, 3, 5, 15])
    rates = ", ".join(f"{r.random():.3f}" for _ in range(n))
    message = re.sub(r"(Per-position acceptance rate: )[0-9., ]+?(?=, [A-Z]|$)", lambda m: m.group(1) + rates, message)

    def number(m: re.Match[str]) -> str:
        if r.random() < 0.02:
            return r.choice(PERCENTS if m.group(0).endswith("%") else NUMBERS)
        if m.group(0).endswith("%"):
            return f"{r.uniform(0, 100):.1f}%"
        return f"{r.uniform(0, 900):.2f}" if "." in m.group(0) else str(r.randint(0, 9000))

    head, sep, body = message.partition(": ")
    return head + sep + re.sub(r"(?<![\w.])[0-9]+(?:\.[0-9]+)?%?(?![\w.])", number, body)


def _stamp(t: int) -> str:
    """Seconds from 12-31 23:50:00 as vLLM's year-less time (New Year at 600)."""
    if t < 600:
        return f"12-31 23:{50 + t // 60:02d}:{t % 60:02d}"
    t -= 600
    return f"01-01 00:{t // 60 % 60:02d}:{t % 60:02d}"


def _line(t: int, r: random.Random) -> str:
    roll = r.random()
    if roll < 0.03:
        return r.choice(NOISE)
    stamp = _stamp(t)
    if roll < 0.05:
        stamp = r.choice(["12-31 23:59:58", "02-29 10:00:00", "02-30 10:00:00", "13-01 00:00:00", "01-01 24:00:00"])
    prefix = r.choice(PREFIXES) if r.random() < 0.2 else PREFIXES[1]
    level = r.choice(LEVELS)
    message = _vary(_message(r.choice(SHAPES)), r)
    return f"{prefix}{level} {stamp} {r.choice(SOURCES) if r.random() < 0.2 else SOURCES[0]} {message}"


def _log(tmp_path: Path, seed: int, n: int = 1500) -> Path:
    r = random.Random(seed)
    lines = [LAUNCH]
    for i in range(n):
        lines.append(_line(i * 1200 // n, r))
        if r.random() < 0.002:
            lines.append(LAUNCH.replace("12-31 23:40:00", _stamp(i * 1200 // n)))
    path = tmp_path / f"vllm_{seed}.log"
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_generated_vllm_logs(tmp_path, monkeypatch, seed):
    path = _log(tmp_path, seed)
    for fmt in ("csv", "jsonl"):
        _same(path, fmt)
    built, out = _built(monkeypatch, path)
    rows = out[0].count(b"\n") - 1
    assert rows > 1000 and len(built) < rows // 6  # not vacuous: most rows are the lane's
    assert b"2026-01-01T00:" in out[0] and b"2025-12-31T23:5" in out[0]  # New Year, inside one block


def test_generated_vllm_logs_on_small_parallel_ranges(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 16 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 8 << 10)
    path = _log(tmp_path, 4, n=800)
    for fmt in ("csv", "jsonl"):
        want = _run(path, fmt, fast=False)
        assert _run(path, fmt, fast=True, jobs=2) == want


def test_a_late_line_and_new_year_inside_one_block_date_as_the_parser_does(tmp_path, monkeypatch):
    """12-31, then 01-01 (New Year: the year goes on), then a late 12-31 line (last year's), then 01-01."""
    line = (
        "(APIServer pid=1) INFO {} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.72, "
        "Accepted: 4125 tokens, Drafted: 7200 tokens, Per-position acceptance rate: 0.812, 0.566, 0.341"
    )
    stamps = ["12-31 23:59:50"] * 30 + ["01-01 00:00:01", "12-31 23:59:59", "01-01 00:00:02"] * 10 + ["06-30 12:00:00"]
    path = tmp_path / "newyear.log"
    path.write_text("".join(line.format(s) + "\n" for s in stamps))
    built, out = _built(monkeypatch, path)
    assert out == _run(path, "csv", fast=False)
    assert max(built) < 10  # the lane dated the rest
    dates = re.findall(rb",(\d{4})-(\d\d)-\d\dT", out[0])
    assert dates[29:33] == [(b"2025", b"12"), (b"2026", b"01"), (b"2025", b"12"), (b"2026", b"01")]
    assert dates[-1] == (b"2026", b"06")


def test_aggregated_engines_lines_take_the_lane(tmp_path, monkeypatch):
    """``N Engines Aggregated`` is engine ``all`` whatever N: the head's number is read loose, the value constant."""
    line = (
        "(APIServer pid=7) INFO 01-15 08:00:{:02d} [loggers.py:257] {} Engines Aggregated: Avg prompt throughput: "
        "1200.0 tokens/s, Avg generation throughput: 1640.2 tokens/s, Running: {} reqs, Waiting: 4 reqs, "
        "Preemptions: 2, GPU KV cache usage: 22.5%, Prefix cache hit rate: 38.0%"
    )
    path = tmp_path / "aggregated.log"
    path.write_text("".join(line.format(i % 60, 2 + i % 7, i) + "\n" for i in range(60)))
    built, out = _built(monkeypatch, path)
    assert out == _run(path, "csv", fast=False)
    assert max(built) < 20 and out[0].count(b",all,") == 60


BARE = [
    "Speculative metrics: Draft acceptance rate: {r:.3f}, Number of accepted tokens: {a}, Number of draft tokens: {d}, ",
    "SpecDecoding metrics: Draft acceptance rate: {p:.1f}%, Accepted: {a} tokens, Drafted: {d} tokens",
]
"""vLLM's v1 lines as a custom logging format prints them (no prefix: the message starts the line)."""
BARE_ODD = ["\x1b[0m", "vllm-1  | ", "(APIServer pid=1) ", " ", "progress\r", "x "]
"""What may come before such a message: colour, a stream prefix, a process prefix with no level, a blank, a redrawn
progress bar, a word (some the parser reads, some it does not: the lane says the parser's either way)."""


def _bare_line(i: int, r: random.Random) -> str:
    a, d = r.randint(0, 900), r.randint(0, 900)
    line = r.choice(BARE).format(r=r.random(), p=r.uniform(0, 100), a=a, d=d)
    roll = r.random()
    if roll < 0.05:
        return r.choice(BARE_ODD) + line
    if roll < 0.15:  # a dated line now and then (the first one gives the file its year)
        return f"(APIServer pid=1) INFO {_stamp(i)} [metrics.py:96] {line}"
    if roll < 0.17:
        return r.choice(NOISE)
    return line


@pytest.mark.parametrize("seed", [1, 2])
def test_lines_with_no_envelope_take_the_lane_before_and_after_dated_lines(tmp_path, monkeypatch, seed):
    """Rows with no timestamp, from the first line on (before any dated line gives the year), around New Year."""
    r = random.Random(seed)
    path = tmp_path / f"bare_{seed}.log"
    path.write_text("\n".join([*(r.choice(BARE).format(r=0.5, p=50.0, a=i, d=9) for i in range(60)), LAUNCH]
                              + [_bare_line(i * 1200 // 1500, r) for i in range(1500)]) + "\n")  # fmt: skip
    for fmt in ("csv", "jsonl"):
        _same(path, fmt)
    built, out = _built(monkeypatch, path)
    rows = out[0].count(b"\n") - 1
    assert rows > 1400 and len(built) < rows // 6  # most rows are the lane's, the undated ones too
    undated = [row for row in out[0].splitlines()[1:] if row.split(b",")[2] == b""]
    assert len(undated) > 1200 and b"2026-01-01T00:" in out[0]


def test_lines_with_no_envelope_on_small_parallel_ranges(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 16 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 8 << 10)
    r = random.Random(9)
    path = tmp_path / "bare.log"
    path.write_text("\n".join(_bare_line(i * 1200 // 1500, r) for i in range(1500)) + "\n")
    for fmt in ("csv", "jsonl"):
        want = _run(path, fmt, fast=False)
        assert _run(path, fmt, fast=True, jobs=2) == want


def test_a_year_less_log_is_scanned_once_a_block(tmp_path, monkeypatch):
    """Once the year-less matcher said a block, the next is tried with it first: no block of a vLLM log is scanned
    again, before, in vain, by the matcher of SGLang's envelope (on every block it would be a second full pass)."""
    monkeypatch.setattr(batch, "FAST_BLOCK", 8 << 10)
    line = (
        "INFO 01-15 08:{:02d}:{:02d} [metrics.py:96] SpecDecoding metrics: Mean acceptance length: 2.72, "
        "Accepted: {} tokens, Drafted: 7200 tokens, Per-position acceptance rate: 0.812, 0.566, 0.341"
    )
    path = tmp_path / "v1.log"
    path.write_text(LAUNCH + "\n" + "".join(line.format(i // 60 % 60, i % 60, i) + "\n" for i in range(2000)))
    scans = {"dated": 0, "year-less": 0}
    quick, scan = fastlane.FastLane._quick, fastlane.Yearless._scan

    def dated(self, *args):
        scans["dated"] += 1
        return quick(self, *args)

    def yearless(self, *args):
        scans["year-less"] += 1
        return scan(self, *args)

    monkeypatch.setattr(fastlane.FastLane, "_quick", dated)
    monkeypatch.setattr(fastlane.Yearless, "_scan", yearless)
    for fmt in ("csv", "jsonl"):
        scans.update(dict.fromkeys(scans, 0))
        _same(path, fmt)
        blocks = path.stat().st_size // (8 << 10)
        assert scans["year-less"] >= blocks > 20  # each block read by the lane, not the general parser
        assert scans["dated"] <= 5, scans  # the first blocks only, until the year-less matcher said one


def test_one_lane_reads_vllm_and_sglang_files_in_turn(tmp_path, monkeypatch):
    """One ``parse`` of a vLLM file, an SGLang file and the vLLM file again: the lane, which tries first the matcher
    that said the last stretch, turns to the other where it cannot, and the rows are the general parser's."""
    monkeypatch.setattr(batch, "FAST_BLOCK", 8 << 10)
    vllm, sglang = _log(tmp_path, 5), SAMPLES / "old_0.4.4.log"
    paths = [str(vllm), str(sglang), str(vllm)]

    def run(fast: bool) -> bytes:
        out = io.BytesIO()
        batch.run(paths, GRAMMARS, TableJob("csv", out), fast="csv" if fast else None)
        return out.getvalue()

    want = run(False)
    assert want.count(b"\n") > 2500 and b"TP0" in want  # rows of both servers
    assert run(True) == want

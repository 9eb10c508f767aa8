"""The fast lane against the general parser: the same bytes and the same tallies, whatever the log.

Inputs: every sample log, every grammar sample line, and generated logs (every template,
random key orders and aliases, numbers in every spelling, odd timestamps and ranks, unknown
keys, drift, noise, launches, CRLF, a BOM, a last line without its newline), read both
sequentially and on parallel ranges cut small enough to split them.
"""

from __future__ import annotations

import io
import itertools
import os
import pickle
import random
from dataclasses import replace

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from acceptmon.parse.fast import native
from acceptmon.parse.fast.lane import FastLane
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from acceptmon.pipeline import batch
from acceptmon.sinks.table import TableJob, columns, format_records
from tests.conftest import SAMPLES

GRAMMARS = load_grammars()
LOGS = sorted(SAMPLES.glob("*.log"))
V0_SPEC = (
    "INFO 10-16 19:{m:02d}:{s:02d} metrics.py:367] Speculative metrics: Draft acceptance rate: 0.648, System efficiency: "
    "0.736, Number of speculative tokens: 3, Number of accepted tokens: 15{i:03d}, Number of draft tokens: 24{i:03d}, "
    "Number of emitted tokens: 23{i:03d}."
)
V0_THROUGHPUT = (
    "INFO 10-16 19:{m:02d}:{s:02d} metrics.py:345] Avg prompt throughput: 401.5 tokens/s, Avg generation throughput: "
    "2{i:02d}.7 tokens/s, Running: 17 reqs, Swapped: 0 reqs, Pending: 2 reqs, GPU KV cache usage: 56.1%, CPU KV cache "
    "usage: 0.0%."
)
DECODE = (
    "[2026-02-26 10:{m:02d}:{s:02d} TP0] Decode batch. #running-req: {i}, #token: 8190, token usage: 0.40, accept len: 2.85, "
    "accept rate: 0.47, cuda graph: True, gen throughput (token/s): 94.12, #queue-req: 0"
)


@pytest.fixture(autouse=True)
def _fast_lane_on_small_inputs(monkeypatch):
    """Small inputs skip the fast lane in normal use; here every input takes it (the compiled matcher,
    ``cmatch*.c``: the lane has no other)."""
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)
    monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
    assert native.load() is not None


def _run(path, fmt, fast, jobs=1, kinds=None):
    out = io.BytesIO()
    job = TableJob(fmt, out, kinds)
    result = batch.run([str(path)], GRAMMARS, job, jobs=jobs, fast=fmt if fast else None)
    t = result.tally
    return out.getvalue(), (dict(t.kinds), t.accept_noise, t.unrecognized, job.records)


def _same(path, fmt, jobs=1, kinds=None):
    want = _run(path, fmt, fast=False, kinds=kinds)
    got = _run(path, fmt, fast=True, jobs=jobs, kinds=kinds)
    assert got[0] == want[0]
    assert got[1] == want[1]
    return want


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_sample_logs(log, fmt):
    rows, tally = _same(log, fmt)
    assert tally[3] > 0 and rows


ROW_KINDS = sorted(k for k, v in KINDS.items() if not v.starts_run)
"""``parse --kind``'s choices."""


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_sample_logs_of_each_kind(log):
    """``parse --kind K``: the lane writes K's rows, in K's own columns, as the general parser does."""
    written = {}
    for kind in ROW_KINDS:
        for fmt in ("csv", "jsonl"):
            rows, tally = _same(log, fmt, kinds=(KINDS[kind],))
            written[kind] = tally[3]
            assert rows.count(b"\n") == tally[3] + (fmt == "csv" and tally[3] > 0)  # a header with the first row
    assert sum(written.values()) > 0


@pytest.mark.parametrize(
    ("kind", "line"),
    [("spec", V0_SPEC), ("throughput", V0_THROUGHPUT), ("decode", DECODE)],
    ids=["spec", "throughput", "decode"],
)
def test_a_kind_of_its_own_rides_the_lane(kind, line, monkeypatch, tmp_path):
    """``parse --kind K`` on a log of K's lines: the general parser builds the first few (the lane learns their
    shape from them: its first piece), the lane writes the rest, in K's columns."""
    path = tmp_path / "k.log"
    path.write_text("".join(line.format(i=i, m=i // 60, s=i % 60) + "\n" for i in range(200)))
    kinds = (KINDS[kind],)
    want = _run(path, "csv", fast=False, kinds=kinds)
    built = []
    feed = Parser.feed

    def spy(self, block):
        records = feed(self, block)
        built.extend(r.line for r in records if r.kind == kind)
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    assert _run(path, "csv", fast=True, kinds=kinds) == want
    assert want[1][3] == 200
    assert want[0].split(b"\r\n", 1)[0].decode().split(",") == list(columns(kinds))
    assert built == list(range(1, len(built) + 1)) and len(built) < 50  # the first lines; the lane the rest


@pytest.mark.parametrize("kind", [None, "prefill"])
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_sample_logs_on_small_parallel_ranges(fmt, kind, monkeypatch, tmp_path):
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 3 << 10)
    log = tmp_path / "all.log"
    # vLLM logs date their year-less timestamps from the file (first stamp, modification time): one calendar
    # per file, so logs of different dates are not concatenated; each is checked on its own below.
    log.write_bytes(b"".join(p.read_bytes() for p in LOGS if not p.name.startswith("vllm_")))
    assert _same(log, fmt, jobs=2, kinds=(KINDS[kind],) if kind else None)[1][3] > 0


@pytest.mark.parametrize("name", ["vllm_v1_0.10.2_dp.log", "vllm_v0_0.6.log", "vllm_v1_0.8.5.log"])
def test_a_vllm_log_on_small_parallel_ranges_dates_and_numbers_runs_like_one_reader(name, monkeypatch, tmp_path):
    """Across New Year and launch groups: ranges start in the right year and run, as ``acceptmon parse`` dates them."""
    from acceptmon.cli.args import YearSource
    from tests.conftest import SAMPLES

    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 4 << 10)
    monkeypatch.setattr(GRAMMARS, "year_for", YearSource(None, GRAMMARS))
    log = tmp_path / name
    log.write_bytes((SAMPLES / name).read_bytes())
    for fmt in ("csv", "jsonl"):
        want = _run(log, fmt, fast=False)
        assert _run(log, fmt, fast=False, jobs=2) == want
        assert _run(log, fmt, fast=True, jobs=2) == want


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_log_without_fast_lines_is_read_in_pieces_like_one_reader(fmt, monkeypatch):
    """A vLLM log has no fast template: its segments go to the parser in pieces cut at newlines."""
    from acceptmon.parse.fast import lane as fastlane
    from tests.conftest import SAMPLES

    monkeypatch.setattr(fastlane, "PIECE", 700)  # a few lines a piece; lines longer than it too
    for name in ("vllm_v1_0.10.2_dp.log", "vllm_v1_0.8.5.log"):
        rows, tally = _same(SAMPLES / name, fmt)
        assert tally[3] > 50 and rows.count(b"\n") > 50


def test_the_fast_lane_writes_the_rows_of_the_sample_logs(monkeypatch):
    """Not a vacuous comparison: the general parser builds only the rows of templates the fast lane
    has none for (values holding ', ', hybrid ``full=`` counts)."""
    built = []
    feed = Parser.feed
    monkeypatch.setattr(Parser, "feed", lambda self, block: _spy(feed, built, self, block))
    total = 0
    for log in LOGS:
        total += _run(log, "csv", fast=True)[1][3]
    slow = sum(1 for r in built if r.kind == "decode")
    assert total > 800 and slow < total // 4


def _spy(feed, built, parser, block):
    records = feed(parser, block)
    built.extend(records)
    return records


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_every_grammar_sample_line(fmt, tmp_path):
    lines = [s.line for g in GRAMMARS.all for s in g.spec.samples]
    lines += [c for g in GRAMMARS.all for c in g.spec.counter_samples]
    log = tmp_path / "samples.log"
    log.write_text("\n".join(lines + lines[::-1]) + "\n")
    _same(log, fmt)


# ---- generated logs ---------------------------------------------------------------------------

RECORD_SAMPLES = [s.line for g in GRAMMARS.records for s in g.spec.samples]
INTS = ["0", "7", "12", "65536", "007", "-1", "", "12345678901234567890", "1.5"]
FLOATS = ["2.50", "2.5", "0.05", "0.0", "1.00", "3.000000", "0.0001", "123456789.123456", "0.123456", "10.0",
          "0.00001", "1e5", "1234567890.5", "3.14159265358979", "7", "nan", "-0.5", ""]  # fmt: skip
NUMBERS = INTS + FLOATS
STAMPS = ["2026-02-26 10:00:00", "2026-02-26 10:00:00.000", "2026-02-26 10:00:00.123", "2026-02-26 10:00:00,123",
          "2026-02-26T23:59:59.5", "2024-02-29 12:00:00", "2026-02-29 12:00:00", "2026-02-30 12:00:00",
          "2026-13-01 00:00:00", "2026-04-31 00:00:00", "2026-12-31 24:00:00", "0000-01-01 00:00:00"]  # fmt: skip
RANKS = ["", " TP0", " DP0 TP0 EP0", "  TP0", " ATTN_CP0 TP1", " tp0", " TP0 ", "TP0", "DP0 TP0", " TP0TP1"]
EXTRAS = [
    "largest-len: 0",
    "fwd occupancy: 91.20%",
    "accept foo: 1",
    "x: a: b",
    "weird key: ",
    "k: v ",
    "Prefill batch: 1",
]


def _mostly(options, first=1):
    """One of ``options``, the first ``first`` of them (the usual forms) most of the time."""
    return st.one_of(st.sampled_from(options[:first]), st.sampled_from(options[:first]), st.sampled_from(options))


@st.composite
def stats_line(draw):
    """A sample line taken apart and put together again, differently."""
    line = draw(st.sampled_from(RECORD_SAMPLES))
    _, sep, body = line.partition("] ")
    if not sep or ": " not in body:
        return line
    words = body.split(", ")
    keep = 1 if ": " in words[0] else 2  # the message head and the first key stay in front
    first, rest = ", ".join(words[:keep]), words[keep:]
    rest = draw(st.permutations(rest)) if draw(st.integers(0, 5)) == 0 else rest
    rest = [w.replace("cuda graph", draw(st.sampled_from(["cpu graph", "npu graph", "cuda graph"]))) for w in rest]
    out = []
    for w in rest:
        key, s, value = w.partition(": ")
        if s and value[:1].isdigit() and draw(st.integers(0, 3)) == 0:
            value = draw(_mostly(FLOATS, 10) if "." in value else _mostly(INTS, 4))
        elif s and draw(st.integers(0, 9)) == 0:
            value = draw(st.sampled_from([*NUMBERS, "True", "False", "true"]))
        out.append(key + s + value)
    if draw(st.integers(0, 5)) == 0:
        out.insert(draw(st.integers(0, len(out))), draw(st.sampled_from(EXTRAS)))
    stamp = draw(_mostly(STAMPS, 3))
    rank = draw(_mostly(RANKS, 3))
    prefix = draw(_mostly(["[", "    [", "[pod/x/y] [", "> ["]))
    tail = draw(_mostly(["", ", ", ",", " ", "\t"], 2))
    return f"{prefix}{stamp}{rank}] " + ", ".join([first, *out]) + tail


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_every_value_spelling_in_every_sample_position(fmt, tmp_path):
    """Each number spelling in each numeric value of each sample, each timestamp and rank in each envelope."""
    lines = []
    for line in RECORD_SAMPLES:
        head, sep, body = line.partition("] ")
        pieces = body.split(", ")
        for i, piece in enumerate(pieces):
            key, s, value = piece.rpartition(": ")
            if s and value[:1].isdigit():
                lines += [head + sep + ", ".join([*pieces[:i], key + s + v, *pieces[i + 1 :]]) for v in NUMBERS]
        if sep and line.startswith("["):
            stamp = head[1:20]
            lines += [line.replace(stamp, other, 1) for other in STAMPS]
            lines += ["[" + stamp + rank + sep + body for rank in RANKS]
    log = tmp_path / "spellings.log"
    log.write_text("\n".join(lines) + "\n")
    assert _same(log, fmt)[1][3] > 500


RANK_TOKENS = ["TP0", "DP12", "ATTN_CP0", "EP_X3", "TP", "tp0", "_A1"]
RANK_GAPS = ["", " ", "  ", "\t"]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_the_lane_and_the_envelope_agree_on_glued_and_spaced_rank_tokens(fmt, tmp_path):
    """Every one or two rank tokens, each behind no space, one, two or a tab, behind every stamp shape:
    ``12:00:00TP0]`` is no SGLang envelope for the grammar, so it is none for the lane either."""
    decode = next(line for line in RECORD_SAMPLES if line.startswith("[") and "Decode batch" in line)
    _, sep, body = decode.partition("] ")
    lines = []
    for stamp in ("2025-10-20 12:00:00", "2025-10-20 12:00:00.123", "2025-10-20T12:00:00"):
        for a, b in itertools.product(RANK_GAPS, RANK_GAPS):
            for t1, t2 in itertools.product(RANK_TOKENS, ["", *RANK_TOKENS]):
                rank = a + t1 + (b + t2 if t2 else "")
                lines.append(f"[{stamp}{rank}{sep}{body}")
    log = tmp_path / "ranks.log"
    log.write_text("\n".join(lines) + "\n")
    kinds = _same(log, fmt)[1][0]
    assert 0 < kinds.get("decode", 0) < len(lines)


NOISE = [
    '[2026-02-26 10:00:00] INFO:     127.0.0.1:4242 - "POST /generate HTTP/1.1" 200 OK',
    "[2026-02-26 10:00:00 TP0] Grammar accept_token failed for req 1",
    "[2026-02-26 10:00:00 TP0] Decode batch looks slow: accept len: 1.12",
    "$ grep 'Decode batch' server.log | tail",
    "Traceback (most recent call last):",
    "",
    "\x1b[32m[2026-02-26 10:00:00 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.01, #queue-req: 0\x1b[0m",
    '{"log":"[2026-02-26 10:00:00 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.01, #queue-req: 0\\n"}',
    "progress 50%\r[2026-02-26 10:00:00 TP0] Decode batch, #running-req: 1, #token: 5, token usage: 0.50, #queue-req: 0",
]
LAUNCHES = [s.line for g in GRAMMARS.records if g.spec.record == "launch" for s in g.spec.samples]

LINE = st.one_of(
    stats_line(), stats_line(), stats_line(), st.sampled_from(NOISE), st.sampled_from(LAUNCHES), st.text(max_size=40)
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    lines=st.lists(LINE, min_size=5, max_size=40),
    crlf=st.booleans(),
    bom=st.booleans(),
    last_newline=st.booleans(),
    fmt=st.sampled_from(["csv", "jsonl"]),
    cut=st.integers(0, 1 << 12),
    kind=st.sampled_from([None, None, "decode", "prefill", "spec", "throughput"]),
)
def test_generated_logs(tmp_path, lines, crlf, bom, last_newline, fmt, cut, kind):
    """(``kind``: ``parse --kind``'s rows; the lane counts the other kinds' lines, learning from them too.)"""
    end = "\r\n" if crlf else "\n"
    text = end.join(lines) + (end if last_newline and lines else "")
    data = (b"\xef\xbb\xbf" if bom else b"") + text.encode("utf-8", "surrogatepass")
    log = tmp_path / f"gen-{random.random()}.log"
    log.write_bytes(data)
    kinds = (KINDS[kind],) if kind else None
    _same(log, fmt, kinds=kinds)
    lane = FastLane(GRAMMARS, fmt, kinds or ())
    lane.learn(data[: data.rfind(b"\n", 0, cut % 2000) + 1])  # keeps the templates seen there; others go careful
    wanted = frozenset([kind]) if kind else None
    for size in (cut % 97 + 1, len(data) + 1):  # blocks of any size, cut anywhere between lines
        want, got = Parser(GRAMMARS, "x", records=wanted), Parser(GRAMMARS, "x", records=wanted)
        block = data[: data.rfind(b"\n") + 1] if b"\n" in data else b""
        pieces, pos = [], 0
        while pos < len(block):
            stop = block.find(b"\n", min(pos + size, len(block) - 1)) + 1
            pieces.append(block[pos:stop])
            pos = stop
        slow = b"".join(format_records(want.feed(p), fmt, kinds) for p in pieces)
        fast = b"".join(
            part[1] for p in pieces for part in lane.feed(got, p, lambda r: (len(r), format_records(r, fmt, kinds)))
        )
        assert fast == slow
        assert (got.tally.kinds, got.tally.accept_noise, got.tally.unrecognized, got.line) == (
            want.tally.kinds, want.tally.accept_noise, want.tally.unrecognized, want.line
        )  # fmt: skip


TOY_ENVELOPE = """
name = "toy_envelope"
kind = "envelope"
server = "toy"
pattern = '''TOY (?P<timestamp>\\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d) \\| '''
[fields]
timestamp = { kind = "timestamp" }
[[samples]]
line = "TOY 2026-02-26 10:00:00 | Toy batch, #running-req: 3"
expect = { timestamp = 2026-02-26T10:00:00 }
"""
TOY_RECORD = """
name = "toy_decode"
server = "toy"
record = "decode"
anchor = "Toy batch"
starts_like = '''Toy batch\\b'''
pattern = '''Toy batch, (?P<body>#running-req: \\d+.*)$'''
body = "pairs"
[keys]
"#running-req" = { field = "running_req", kind = "int" }
"accept len" = { field = "accept_len", kind = "float" }
[[samples]]
line = "TOY 2026-02-26 10:00:00 | Toy batch, #running-req: 3, accept len: 2.50"
expect = { running_req = 3, accept_len = 2.5 }
"""


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_a_template_is_matched_only_behind_its_own_servers_envelope(fmt, tmp_path):
    """Another server's message behind an SGLang envelope is no record for the parser: nor for the fast lane."""
    (tmp_path / "toy_envelope.toml").write_text(TOY_ENVELOPE)
    (tmp_path / "toy_decode.toml").write_text(TOY_RECORD)
    grammars = load_grammars([tmp_path / "toy_envelope.toml", tmp_path / "toy_decode.toml"])
    lines = [
        "[2026-02-26 10:00:00 TP0] Toy batch, #running-req: 3, accept len: 2.50",
        "TOY 2026-02-26 10:00:00 | Toy batch, #running-req: 4, accept len: 2.75",
        RECORD_SAMPLES[0],
    ]
    block = ("\n".join(lines * 3) + "\n").encode()
    want, got = Parser(grammars, "x"), Parser(grammars, "x")
    lane = FastLane(grammars, fmt)
    slow = format_records(want.feed(block), fmt)
    fast = b"".join(part[1] for part in lane.feed(got, block, lambda r: (len(r), format_records(r, fmt))))
    assert fast == slow and slow.count(b"\n") == 6
    assert (got.tally.kinds, got.tally.accept_noise) == (want.tally.kinds, want.tally.accept_noise)


def test_a_fast_stats_line_ends_a_launch_group(tmp_path):
    """Two launch lines of one merging server with a stats line between them are two runs, as the
    parser counts them, when the fast lane reads that stats line (found by Hypothesis)."""
    launch = (
        "INFO 06-14 10:56:26 llm_engine.py:161] Initializing an LLM engine (v0.5.0) with config: model='m', "
        "speculative_config=SpeculativeConfig(draft_model='[ngram]', num_spec_tokens=5), tensor_parallel_size=1, seed=0)"
    )
    decode = (
        "[2026-02-26 10:00:00] Decode batch. #running-req: 8, #token: 3180, token usage: 0.01, accept len: 3.42, "
        "gen throughput (token/s): 655.31, #queue-req: 0"
    )
    log = tmp_path / "runs.log"
    log.write_text("\n".join([decode, launch, decode, launch, decode]) + "\n")
    rows, _ = _same(log, "csv")
    assert [row.split(b",")[15] for row in rows.splitlines()[1:]] == [b"0", b"1", b"2"]


_NO_CMATCH = (
    "import runpy, sys\n"
    "sys.modules['acceptmon.parse.fast.cmatch'] = None  # its import fails, as where no C compiler built it\n"
    "sys.argv = ['acceptmon', *sys.argv[1:]]\n"
    "runpy.run_module('acceptmon', run_name='__main__', alter_sys=True)\n"
)


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_without_the_compiled_matcher_parse_is_the_general_parsers_and_says_so_once(fmt, tmp_path):
    """A stream takes the fast lane whatever its size; where the compiled matcher does not import, the general
    parser reads it, the same bytes, and `parse` says so in one line."""
    import subprocess
    import sys

    log = (SAMPLES / "newest_0.5.23.log").read_bytes() * 3
    runs = {}
    for name, head in (("compiled", ["-m", "acceptmon"]), ("general", ["-c", _NO_CMATCH])):
        out = tmp_path / f"{name}.{fmt}"
        done = subprocess.run(
            [sys.executable, *head, "parse", "-", "-o", str(out), "-j", "1"], input=log, capture_output=True, check=True
        )
        runs[name] = (out.read_bytes(), done.stderr.decode())
    assert runs["general"][0] == runs["compiled"][0] and runs["compiled"][0].count(b"\n") > 10
    assert f"acceptmon: {batch.SLOW_NOTE}\n" in runs["general"][1]
    assert runs["general"][1].count("fast lane") == 1
    assert "fast lane" not in runs["compiled"][1]
    asked = subprocess.run(  # the general parser by request (ACCEPTMON_PURE_PYTHON): nothing to tell
        [sys.executable, "-m", "acceptmon", "parse", "-", "-o", str(tmp_path / f"asked.{fmt}"), "-j", "1"],
        input=log,
        capture_output=True,
        check=True,
        env={**os.environ, "ACCEPTMON_PURE_PYTHON": "1"},
    )
    assert "fast lane" not in asked.stderr.decode()
    assert (tmp_path / f"asked.{fmt}").read_bytes() == runs["compiled"][0]


def test_a_range_with_an_equal_launch_takes_the_plans_made_for_it():
    """Each range of ``-j`` starts from its own copy of the parser state: a launch equal to one the lane made row
    plans for takes those plans (building them again cost a millisecond a range), and another launch gets its own."""
    lane = FastLane(GRAMMARS, "csv")
    log = SAMPLES / "old_0.4.4.log"
    first = Parser(GRAMMARS, str(log))
    first.feed(log.read_bytes())
    assert first.launch is not None
    copy = Parser(GRAMMARS, str(log), pickle.loads(pickle.dumps(first.state)))
    assert copy.launch == first.launch and copy.launch is not first.launch
    made = lane._plans(first)
    assert lane._plans(copy)[1:] == made[1:] and lane._plans(copy)[2] is made[2]
    other = Parser(
        GRAMMARS, str(log), replace(first.state, launch=first.launch.model_copy(update={"spec_num_steps": 9}))
    )
    assert lane._plans(other)[2] is not made[2]

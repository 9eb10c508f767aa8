"""SGLang's lines on the fast lane: which lane each reference line takes, and the same bytes and tallies as the
general parser for the shapes that reached the lane last (values holding ', ', the Ray actor prefix).

Inputs: every SGLang line of the reference format samples (``tests/data/sglang_reference_lines.jsonl``: label,
line, the sample's note and source), and generated logs of those shapes with numbers in every spelling, unknown
keys, fallback keys and rank prefixes, read sequentially and on small parallel ranges.
"""

from __future__ import annotations

import json
import random
import re
from pathlib import Path

import pytest

from acceptmon.parse.fast import lane as fastlane
from acceptmon.parse.parser import Parser
from acceptmon.pipeline import batch
from tests.test_fastlane import FLOATS, GRAMMARS, INTS, _fast_lane_on_small_inputs, _run, _same  # noqa: F401

REFERENCE = Path(__file__).parent / "data" / "sglang_reference_lines.jsonl"
"""SGLang's reference line of each release family and variant (label, line, note, source)."""

LAUNCH = "parser"  # a launch line starts a run: the general parser reads it, and the lane takes the run from it
LANES = {
    **dict.fromkeys(["SGLANG-D0", "SGLANG-D1", "SGLANG-D2a", "SGLANG-D2b", "SGLANG-D3", "SGLANG-D4"], "fast"),
    **dict.fromkeys(["SGLANG-D5a", "SGLANG-D5b", "SGLANG-D6a", "SGLANG-D6b", "SGLANG-D6c", "SGLANG-D7"], "fast"),
    **dict.fromkeys(["SGLANG-D8a", "SGLANG-D8b", "SGLANG-D8c", "SGLANG-D8d", "SGLANG-D9/D10", "SGLANG-D9"], "fast"),
    **dict.fromkeys(["SGLANG-D10a", "SGLANG-D10b", "SGLANG-D10c", "SGLANG-D10d", "SGLANG-D11a"], "fast"),
    **dict.fromkeys(["SGLANG-D11b", "SGLANG-ray", "SGLANG-Pa", "SGLANG-Pb", "SGLANG-Pc", "SGLANG-Pd"], "fast"),
    **dict.fromkeys(["SGLANG-launcha", "SGLANG-launchb", "SGLANG-launchc", "SGLANG-launchd"], LAUNCH),
    **dict.fromkeys([f"NOISE{c}" for c in "acdefg"], "fast"),
    "NOISEb": "parser",  # a request record: its body is a dict repr, which no fast template reads
}
"""The lane each SGLang line of the reference samples takes (by its label): D5b holds ``#token: full=8192, swa=4096``,
D11a ``est uncap acc len: 3.31 [3.12, 3.50]``, SGLANG-ray a Ray actor's ``(SchedulerActor pid=4242, ip=...) ``."""
REPEAT = 40
FIRST = 20
"""The first lines of a file teach the lane (the general parser reads them); the lane reads every line after them."""


@pytest.fixture(autouse=True)
def _small(monkeypatch):
    monkeypatch.setattr(fastlane, "LEARN_PIECE", 1 << 10)


def _reference() -> list[tuple[str, str]]:
    return [(r["label"], r["line"]) for r in map(json.loads, REFERENCE.read_text().splitlines())]


def _fed(monkeypatch, path: Path, fmt: str = "csv", jobs: int = 1) -> tuple[int, tuple]:
    """The last line number the general parser read while the lane read ``path`` (0 for none), and the output."""
    last = [0]
    feed = Parser.feed

    def spy(self, block):
        first = self.line
        records = feed(self, block)
        if block.strip():
            last[0] = max(last[0], first + block.count(b"\n"))
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    out = _run(path, fmt, fast=True, jobs=jobs)
    monkeypatch.setattr(Parser, "feed", feed)
    return last[0], out


def test_which_lane_each_sglang_reference_line_takes(tmp_path, monkeypatch):
    samples = _reference()
    assert sorted(label for label, _ in samples) == sorted(LANES)
    for i, (label, line) in enumerate(samples):
        path = tmp_path / f"{i}.log"
        path.write_text((line + "\n") * REPEAT)
        for fmt in ("csv", "jsonl"):
            last, out = _fed(monkeypatch, path, fmt)
            assert out == _run(path, fmt, fast=False), (label, fmt)  # byte for byte, tallies too
            lane = "fast" if last < FIRST else "parser"
            assert (label, fmt, lane) == (label, fmt, LANES[label])


def test_every_reference_line_at_once_on_small_parallel_ranges(tmp_path, monkeypatch):
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 8 << 10)
    monkeypatch.setattr(batch, "FAST_BLOCK", 3 << 10)
    r = random.Random(5)
    lines = [line for _, line in _reference() for _ in range(12)]
    r.shuffle(lines)
    path = tmp_path / "all.log"
    path.write_text("\n".join(lines) + "\n")
    for fmt in ("csv", "jsonl"):
        for jobs in (1, 2):
            _same(path, fmt, jobs=jobs)


# ---- values holding ', ' and the Ray actor prefix, generated ------------------------------------

SWA = (
    "[2025-07-01 12:00:{s:02d} TP0] Decode batch. #running-req: 4, #token: full={a}, swa={b}, token usage: "
    "full={c}, swa={d}, accept len: {e}, cuda graph: True, gen throughput (token/s): 310.22, #queue-req: 0"
)
ESTIMATE = (
    "[2026-09-01 12:00:{s:02d} TP0] Decode batch, #running-req: 8, #token: 4000, token usage: 0.02, accept len: 3.05, "
    "accept rate: 0.68, cap len: 3.40, block accept len: 3.20, est uncap acc len: {e} [{a}, {b}], cuda graph: True, "
    "gen throughput (token/s): 700.12, #queue-req: {c}, fwd occupancy: {d}%, fwd+idle occupancy: 99.80%"
)
RAY = "(SchedulerActor pid={a}, ip=10.0.{b}.5) [2025-12-01 12:00:{s:02d} DP0 TP0] Decode batch, #running-req: {c}, "
RAY += (
    "#token: 4000, token usage: 0.02, accept len: {e}, accept rate: 0.76, cuda graph: True, gen throughput (token/s): "
)
RAY += "700.12, #queue-req: 0, "
SHAPES = [SWA, ESTIMATE, RAY]
ODD = [*INTS, *FLOATS, "full=3", "x", "1, 2", "1: 2", "nan"]
INSERTS = ["largest-len: 0", "!odd key: 1", "#full token: 77", "x: a: b", "accept foo: 1", "Prefill batch: 1", "k: "]
PREFIXES = ["", "(SchedulerActor pid=1) ", "(Scheduler Actor pid=1) ", "(pid=1) ", "(SchedulerActor pid=1, ip=::1) "]


def _number(r: random.Random, kind: str) -> str:
    if r.random() < 0.02:
        return r.choice(ODD)
    return str(r.randint(0, 90000)) if kind == "int" else f"{r.uniform(0, 9):.{r.choice([2, 2, 3, 6])}f}"


def _line(r: random.Random, i: int) -> str:
    shape = r.choice(SHAPES)
    line = shape.format(
        s=i % 60, a=_number(r, "int"), b=_number(r, "int"), c=_number(r, "float" if shape is SWA else "int"),
        d=_number(r, "float"), e=_number(r, "float"),
    )  # fmt: skip
    if r.random() < 0.1:
        head, sep, body = line.partition("#running-req")
        pieces = body.split(", ")
        pieces.insert(r.randint(1, len(pieces) - 1), r.choice(INSERTS))
        line = head + sep + ", ".join(pieces)
    if r.random() < 0.1:
        line = r.choice(PREFIXES) + line[line.index("[") :]
    return line


@pytest.mark.parametrize("seed", [1, 2])
def test_generated_logs_of_the_last_shapes(tmp_path, monkeypatch, seed):
    r = random.Random(seed)
    path = tmp_path / f"last_{seed}.log"
    path.write_text("\n".join(_line(r, i) for i in range(1500)) + "\n")
    for fmt in ("csv", "jsonl"):
        _same(path, fmt)
    out, built = _decode_built(monkeypatch, path, "csv")
    rows = out[0].count(b"\n") - 1
    assert rows > 1200 and built < rows // 4  # not vacuous: most rows are the lane's


def _decode_built(monkeypatch, path: Path, fmt: str) -> tuple[tuple, int]:
    """The lane's output of ``path`` and how many decode records the general parser built meanwhile."""
    built = [0]
    feed = Parser.feed

    def spy(self, block):
        records = feed(self, block)
        built[0] += sum(1 for x in records if x.kind == "decode")
        return records

    monkeypatch.setattr(Parser, "feed", spy)
    out = _run(path, fmt, fast=True)
    monkeypatch.setattr(Parser, "feed", feed)
    return out, built[0]


def test_a_value_holding_a_comma_is_read_by_its_own_pattern_in_every_spelling(tmp_path):
    """Each number of the joined values in each spelling the tests know, the others as logged."""
    lines = []
    for shape in (SWA, ESTIMATE):
        for key in "abcde":
            for value in ODD:
                numbers = {k: "7" for k in "abcde"} | {key: value, "e": "2.90" if key != "e" else value}
                lines.append(shape.format(s=len(lines) % 60, **numbers))
    path = tmp_path / "spellings.log"
    path.write_text("\n".join(lines * 2) + "\n")
    for fmt in ("csv", "jsonl"):
        _same(path, fmt)
    assert re.search(rb",7,", _run(path, "csv", fast=True)[0])


DECODE = "[2025-12-01 12:00:00 DP0 TP0] Decode batch, #running-req: 8, #token: 4000, token usage: 0.02, #queue-req: 0"


@pytest.mark.parametrize(
    ("lead", "steps"),
    [
        ("", ()),
        (
            "(SchedulerActor pid=4242, ip=10.0.0.5) ",
            ("(SchedulerActor pid=", 0, ", ip=", 0, ".", 0, ".", 0, ".", 0, ") "),
        ),
        ("(Other_Actor pid=1) ", ("(Other_Actor pid=", 0, ") ")),
        ("2026-02-26T14:09:45Z ", None),  # --timestamps' time: \d{4}, \d\d (other numbers of digits are no time)
        ("Feb 26 14:09:45 gpu-node-3 python3[81234]: ", None),  # journald: the same
        ("sglang-decode-1  | ", None),  # a compose stream: its name is the rows' source
        ("[pod/sglang-0/sglang] ", None),  # kubectl's stream: the same
    ],
)
def test_a_lead_is_text_that_fills_no_field_and_reads_alike_with_other_numbers(lead, steps):
    from acceptmon.parse.fast import templates

    shape, _ = templates.build_templates(GRAMMARS)
    assert shape is not None and len(shape.leads) == 1  # the Ray actor's, from the grammar samples
    g = next(g for g in templates._fast_grammars(GRAMMARS) if g.name == "sglang_decode")
    m = templates.split_of(GRAMMARS, g).match(lead + DECODE)
    got = None if m is None else templates.lead_of(g, m, templates._envelope_kinds(GRAMMARS), shape)
    want = None if steps is None else tuple(("lint", -1) if s == 0 else ("lit", s.encode()) for s in steps)
    assert got == want


def test_a_counted_kinds_sample_bodies_take_each_head_its_samples_show(tmp_path, monkeypatch):
    """Prefill lines (counted, no row to learn a shape by) of every sample body behind every head the samples show,
    `Prefill batch.`, `Prefill batch,` and one no sample has (`Prefill batch [7],`, read by the parser alone)."""
    prefill = next(g for g in GRAMMARS.records if g.name == "sglang_prefill")
    lines = []
    for sample in prefill.spec.samples:
        head, _, body = sample.line.partition("Prefill batch")
        for other in (".", ",", " [7],"):
            lines.append(head + "Prefill batch" + other + body[1:] if body[0] in ".," else head + sample.line)
    path = tmp_path / "prefill.log"
    path.write_text("".join(line + "\n" for line in lines for _ in range(REPEAT)))
    for fmt in ("csv", "jsonl"):
        _same(path, fmt)
    fed: list[int] = []
    feed = Parser.feed

    def spy(self, block):
        first = self.line
        fed.extend(range(first + 1, first + block.count(b"\n") + 1))
        return feed(self, block)

    monkeypatch.setattr(Parser, "feed", spy)
    tally = _run(path, "csv", fast=True)[1]
    assert tally[0]["prefill"] == len(lines) * REPEAT
    bracketed = {i for i, line in enumerate(lines) if "[7]" in line}
    assert {(n - 1) // REPEAT for n in fed} >= bracketed  # the head no sample has is the parser's
    assert max(n for n in fed if (n - 1) // REPEAT not in bracketed) < FIRST  # the others the lane's, past the first


# ---- unknown keys: the JSONL row's extra object, written by C ---------------------------------------------------

KEYS = [b"fwd occupancy", b'k"q', b"b\\s", b"t\tab", b"caf\xc3\xa9", b"bad\xff\xfe", b"bad\xfe", b"\xf0\x9f\x98\x80x"]
KEYS += [b"del\x7f", b"ctl\x01", b"ed\xed\xa0\x80", b" sp", b"x"]
VALUES = [
    b"91.20%",
    b'a"b',
    b"c\\d",
    b"\xc3\xa9t\xc3\xa9",
    b"\xff",
    b"\x7f\x02",
    b"v: w",
    b"\xe2\x82",
    b"\xf0\x9f\x98\x80",
]


def test_unknown_keys_reach_jsonl_as_the_parser_writes_them(tmp_path, monkeypatch):
    """A line's unknown keys in every spelling JSON escapes (quotes, backslashes, control bytes, DEL, UTF-8 of one
    to four bytes, invalid UTF-8, a surrogate's bytes) and a key said twice (the dict keeps its first place and last
    value): the lane's JSONL rows are the general parser's, byte for byte, and the lane writes most of them (a
    block's lines of a shape learned in it are the parser's: small blocks here)."""
    monkeypatch.setattr(batch, "FAST_BLOCK", 4 << 10)
    r = random.Random(3)
    head = b"[2026-09-01 12:00:%02d TP0] Decode batch, #running-req: 8, #token: 4000, token usage: 0.02, accept len: "
    lines = []
    for i in range(600):
        pairs = [r.choice(KEYS) + b": " + r.choice(VALUES) for _ in range(r.choice([1, 2, 2, 3]))]
        lines.append(head % (i % 60) + b"3.05, cuda graph: True, gen throughput (token/s): 7.1, " + b", ".join(pairs))
    path = tmp_path / "keys.log"
    path.write_bytes(b"".join(line + b"\n" for line in lines))
    out, built = _decode_built(monkeypatch, path, "jsonl")
    assert out == _run(path, "jsonl", fast=False)
    assert built < 60  # of 600
    extras = [json.loads(row)["extra"] for row in out[0].splitlines()]
    assert len(extras) == 600 and sum(len(e) == 3 for e in extras) > 50  # one of each key said three times
    assert {"caf\u00e9", "bad\ufffd\ufffd", "\U0001f600x", "del\x7f", 'k"q'} <= {k for e in extras for k in e}

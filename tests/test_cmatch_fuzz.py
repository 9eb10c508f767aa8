"""A bounded fuzz of the compiled lane: the same bytes and tallies as the general parser, whatever the bytes.

Logs made from the sample logs' own lines, mutated (bytes flipped, inserted, dropped and repeated, numbers
respelled, NULs, invalid UTF-8, stray CRs, commas and tabs, anchors, unknown keys), with random lines between them,
cut into blocks at random line ends (so that every kind of line meets a block's edge), and a line of 10 MB. Each
goes through the fast lane with the compiled matcher and through the general parser alone, as CSV and as JSONL
(whose rows hold the unknown keys' ``extra`` object, which C writes as ``json.dumps`` does). Seeded, so a
failure names the case that shows it. ``scripts/sanitize_cmatch.py`` runs this under ASan and UBSan.
"""

from __future__ import annotations

import io
import random

import pytest

from acceptmon.parse.fast import native
from acceptmon.parse.fast.lane import FastLane
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser
from acceptmon.sinks.table import TableJob
from tests.conftest import SAMPLES

GRAMMARS = load_grammars()
LOGS = sorted(p for p in SAMPLES.glob("*.log") if not p.name.startswith("vllm_"))
"""SGLang logs (the vLLM ones, whose year-less times need a fixed year here, are fuzzed apart below)."""
CASES_PER_LOG = 10
ODD = [b"\x00", b"\xff", b"\xc3", b"\xed\xa0\x80", b"\xf0\x9f\x98", b"\r", b"\t", b",", b", ", b" ", b"\x1b[0m", b":"]
WORDS = [b"accept", b"accept len: ", b"Decode batch", b"TP0", b"[2026-02-26 10:00:00] ", b"server_args=", b"True"]
WORDS += [
    b", fwd occupancy: 91.2%",
    b', k"\\\xc3\xa9\x7f: v\t"\xff',
    b", x: 1, x: 2",
    b", Preemptions: 0",
]  # unknown keys


@pytest.fixture(autouse=True)
def _compiled(monkeypatch):
    monkeypatch.delenv("ACCEPTMON_PURE_PYTHON", raising=False)
    assert native.load() is not None, "the compiled matcher is not built"


def _number(rng: random.Random) -> bytes:
    digits = "".join(rng.choice("0123456789") for _ in range(rng.choice([1, 1, 2, 5, 19, 31])))
    if rng.random() < 0.5:
        digits += "." + "".join(rng.choice("0000123456789") for _ in range(rng.choice([0, 1, 2, 4, 7])))
    return digits.encode()


def _mutate(line: bytes, rng: random.Random) -> bytes:
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        at = rng.randrange(len(line) + 1)
        what = rng.randrange(7)
        if what == 0 and line:
            line = line[:at] + bytes([rng.randrange(256)]) + line[at + 1 :]
        elif what == 1:
            line = line[:at] + rng.choice(ODD) + line[at:]
        elif what == 2:
            line = line[:at] + line[at + rng.randrange(1, 8) :]
        elif what == 3:
            line = line[:at] + line[at : at + rng.randrange(1, 30)] + line[at:]
        elif what == 4:
            start = next((i for i in range(at, len(line)) if line[i : i + 1].isdigit()), None)
            if start is not None:
                end = start
                while end < len(line) and (line[end : end + 1].isdigit() or line[end : end + 1] == b"."):
                    end += 1
                line = line[:start] + _number(rng) + line[end:]
        elif what == 5:
            line = line[:at]
        else:
            line = line[:at] + rng.choice(WORDS) + line[at:]
    return line.replace(b"\n", b"")


def _random_line(rng: random.Random) -> bytes:
    alphabet = b"[]0123456789-:. ,TPDEacceptlnr#\r\t\x00\xff"
    head = b"[2026-02-26 10:00:00 TP0] " if rng.random() < 0.5 else b""
    return head + bytes(rng.choice(alphabet) for _ in range(rng.randrange(0, 80)))


def _log(source: bytes, rng: random.Random) -> bytes:
    out = []
    for line in source.split(b"\n")[:-1]:
        roll = rng.random()
        out.append(_mutate(line, rng) if roll < 0.4 else line)
        if roll > 0.9:
            out.append(_random_line(rng))
    return b"".join(line + b"\n" for line in out)


def _blocks(data: bytes, rng: random.Random) -> list[bytes]:
    """``data`` cut after newlines, into blocks of a few lines to a few kB."""
    out, pos = [], 0
    while pos < len(data):
        cut = data.find(b"\n", pos + rng.randrange(1, 4096))
        cut = len(data) if cut < 0 else cut + 1
        out.append(data[pos:cut])
        pos = cut
    return out


def _lane_and_parser(data: bytes, blocks: list[bytes], fmt: str) -> tuple[tuple[bytes, tuple], tuple[bytes, tuple]]:
    """(rows, tally) through the fast lane (compiled matcher) and through the general parser alone."""
    lane = FastLane(GRAMMARS, fmt)  # type: ignore[arg-type]
    assert lane.native is not None
    lane.learn(data[: 1 << 20])
    runs = []
    for fast in (True, False):
        job = TableJob(fmt, io.BytesIO())  # type: ignore[arg-type]
        parser = Parser(GRAMMARS, "fuzz.log", records=job.records_wanted)
        rows = b""
        for block in blocks:
            parts = lane.feed(parser, block, job.chunk) if fast else [job.chunk(parser.feed(block))]
            rows += b"".join(part[1] for part in parts)
        t = parser.tally
        runs.append((rows, (dict(t.kinds), t.accept_noise, t.unrecognized, parser.line)))
    return runs[0], runs[1]


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_mutated_sample_logs_give_the_general_parsers_bytes(log):
    source = log.read_bytes()
    for case in range(CASES_PER_LOG):
        rng = random.Random(f"{log.name}:{case}")
        data = _log(source, rng)
        fast, general = _lane_and_parser(data, _blocks(data, rng), ("csv", "jsonl")[case % 2])
        assert fast == general, f"{log.name} case {case}"


def test_a_10_mb_line_and_lines_at_the_edges_of_blocks():
    """A decode line of 10 MB (a number, an unknown key's value, plain text) between lines that match."""
    line = next(x for x in (SAMPLES / "old_0.4.4.log").read_bytes().split(b"\n") if b"accept len" in x)
    head = line[: line.index(b"accept len")]
    huge = [head + b"accept len: " + b"7" * 10_000_000, line + b", big: " + b"x" * 10_000_000, b"z" * 10_000_000]
    for big in huge:
        data = b"".join(x + b"\n" for x in [line, line, big, line])
        cuts = [data[: len(line) + 1], data[len(line) + 1 :]]  # the long line in a block of its own lines
        for fmt in ("csv", "jsonl"):
            fast, general = _lane_and_parser(data, cuts, fmt)
            assert fast == general, fmt
        assert fast[1][3] == 4 and fast[0].count(b"\n") >= 3


VLLM_LOGS = sorted(SAMPLES.glob("vllm_*.log"))


@pytest.mark.parametrize("log", VLLM_LOGS, ids=lambda p: p.stem)
def test_mutated_vllm_sample_logs_give_the_general_parsers_bytes(log, monkeypatch):
    """vLLM's envelope (process prefixes, colour, year-less times) and values, mutated, as the parser reads them."""
    from acceptmon.parse.fast import lane as fastlane

    monkeypatch.setattr(fastlane, "LEARN_PIECE", 1 << 10)  # the lane learns within the first lines
    monkeypatch.setattr(GRAMMARS, "year_for", lambda file, stamp: 2025)
    source = log.read_bytes()
    for case in range(CASES_PER_LOG // 2):  # three logs: the job's time stays the SGLang fuzz's
        rng = random.Random(f"{log.name}:{case}")
        data = _log(source, rng)
        fast, general = _lane_and_parser(data, _blocks(data, rng), ("csv", "jsonl")[case % 2])
        assert fast == general, f"{log.name} case {case}"


def test_a_10_mb_vllm_line_between_lines_that_match(monkeypatch):
    """A spec line with a per-position list, a count and a process name of 10 MB each, between lines that match."""
    from acceptmon.parse.fast import lane as fastlane

    monkeypatch.setattr(fastlane, "LEARN_PIECE", 1 << 10)
    monkeypatch.setattr(GRAMMARS, "year_for", lambda file, stamp: 2025)
    line = next(x for x in (SAMPLES / "vllm_v1_0.8.5.log").read_bytes().split(b"\n") if b"Per-position" in x)
    rates = line.index(b"Per-position acceptance rate: ") + len(b"Per-position acceptance rate: ")
    huge = [
        line[:rates] + b"0.5, " * 2_000_000 + b"0.5",
        line.replace(b"Accepted: ", b"Accepted: " + b"7" * 10_000_000),
        b"(" + b"A" * 10_000_000 + b" pid=1) " + line,
    ]
    for big in huge:
        data = b"".join(x + b"\n" for x in [line] * 40 + [big, line])
        cuts = [data[: len(line) * 40], data[len(line) * 40 :]]
        cuts = [cuts[0][: cuts[0].rfind(b"\n") + 1], data[cuts[0].rfind(b"\n") + 1 :]]
        for fmt in ("csv", "jsonl"):
            fast, general = _lane_and_parser(data, cuts, fmt)
            assert fast == general, fmt
        assert fast[1][3] == 42 and fast[0].count(b"\n") >= 41

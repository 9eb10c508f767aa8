"""The parallel pre-scan ends a byte range in the state a full parse of it ends in.

Launch groups split by stats lines, a stats-like line that does not parse (it must not end the
group), launch and stats lines longer than the reader's limit (skipped, as the reader skips
them), a byte-order mark, a last line without its newline: for every cut, the pre-scan (with
``bytes`` methods or the compiled searches, of the whole range or of the reader's blocks) ends in
the state of the parser fed the whole range. ``acceptmon parse -j 2`` on such a file writes what ``-j 1`` writes.
"""

from __future__ import annotations

import io

import pytest

from acceptmon.inputs.files import MAX_LINE, OVERSIZED, iter_blocks
from acceptmon.parse import prescan
from acceptmon.parse.fast import native
from acceptmon.parse.parser import Parser, ParseState
from acceptmon.pipeline import batch
from acceptmon.sinks.table import TableJob
from tests.conftest import SAMPLES

ARGS = "[2026-02-26 10:00:00] server_args=ServerArgs(model_path='m{pad}', speculative_algorithm='EAGLE3', speculative_num_steps={n}, speculative_eagle_topk=1, speculative_num_draft_tokens=4, tp_size=1)"
DECODE = "[2026-02-26 10:00:0{s} TP0] Decode batch, #running-req: 3, #token: 37048, token usage: 0.24, accept len: 2.86, accept rate: 0.62, cuda graph: True, gen throughput (token/s): 194.42, #queue-req: 0"
DRIFT = "[2026-02-26 10:00:01 TP0] Decode batch, #running-req: 3, accept len: twelve"
NOISE = '[2026-02-26 10:00:01] INFO:     127.0.0.1:4000 - "POST /generate HTTP/1.1" 200 OK'


def _log() -> bytes:
    lines = [
        ARGS.format(n=3, pad=""), NOISE, DECODE.format(s=1), DECODE.format(s=2),
        ARGS.format(n=4, pad=""), DRIFT, ARGS.format(n=5, pad=""), NOISE,  # a drift line does not end the group
        DECODE.format(s=3), "x" * (MAX_LINE + 10) + " Decode batch", NOISE,  # an oversized stats line
        ARGS.format(n=6, pad="y" * MAX_LINE), DECODE.format(s=4), ARGS.format(n=8, pad=""),  # oversized: skipped
        DECODE.format(s=4), ARGS.format(n=7, pad=""), NOISE, DECODE.format(s=5),
    ]  # fmt: skip
    text = "\n".join(lines).encode()
    return b"\xef\xbb\xbf" + (SAMPLES / "seed_eagle3_moe.log").read_bytes() + text  # no newline at the end


def _truth(grammars, data: bytes, start: int, end: int) -> ParseState:
    parser = Parser(grammars, "t.log", ParseState())
    for block in iter_blocks(io.BytesIO(data[start:end])):
        if block is OVERSIZED:
            parser.skip_oversized()
        else:
            parser.feed(block)  # type: ignore[arg-type]
    return _key(parser.state)


def _key(state: ParseState) -> tuple[object, ...]:
    """What the chained states are made of (:meth:`ParseState.then`)."""
    return (state.line, state.run, state.launch, state.launch_open, state.closed, state.lead)


def _cuts(data: bytes) -> list[int]:
    starts = [0] + [i + 1 for i, b in enumerate(data) if b == 10]
    return sorted(set(starts[::7] + starts[-12:] + [len(data)]))


@pytest.mark.parametrize("finder", ["python", "compiled"])
@pytest.mark.parametrize("how", ["whole", "blocks"])
def test_a_range_ends_in_the_state_a_full_parse_ends_in(grammars, finder, how):
    """``whole``: the range as one buffer (lines over the limit skipped by the scan); ``blocks``: as the
    pipeline reads it, the reader's blocks (which skip those lines themselves)."""
    data = _log()
    find = native.finder() if finder == "compiled" else prescan.BYTES
    assert find is not None
    cuts = _cuts(data)
    for start, end in [(0, c) for c in cuts] + [(c, len(data)) for c in cuts]:
        if start >= len(data):
            continue
        parser = Parser(grammars, "t.log", ParseState())
        if how == "whole":
            prescan.scan(parser, data[start:end], (0, end - start), find, MAX_LINE, at_start=start == 0)
        else:
            for block in iter_blocks(io.BytesIO(data[start:end])):
                if block is OVERSIZED:
                    parser.skip_oversized()
                else:
                    prescan.scan_block(parser, block, find)  # type: ignore[arg-type]
        assert _key(parser.state) == _truth(grammars, data, start, end), (start, end)


def test_the_cases_are_there(grammars):
    """Not vacuous: the whole log has the runs, the skipped lines and the open group it is built to have."""
    lines, run, launch, *_ = _truth(grammars, _log(), 0, len(_log()))
    assert lines > 100 and run >= 5 and launch is not None and launch.spec_num_steps == 7  # type: ignore[attr-defined]


@pytest.mark.parametrize("compiled", [True, False])
def test_parse_on_parallel_ranges_writes_what_one_reader_writes(grammars, tmp_path, monkeypatch, compiled):
    if not compiled:
        monkeypatch.setenv("ACCEPTMON_PURE_PYTHON", "1")
    path = tmp_path / "t.log"
    path.write_bytes(_log())
    monkeypatch.setattr(batch, "FAST_MIN_BYTES", 0)

    def parse(jobs: int) -> tuple[bytes, dict[str, int]]:
        out = io.BytesIO()
        result = batch.run([str(path)], grammars, TableJob("csv", out), jobs=jobs, fast="csv")
        return out.getvalue(), dict(result.tally.kinds)

    one = parse(1)
    monkeypatch.setattr(batch, "PARALLEL_MIN_BYTES", 1)
    monkeypatch.setattr(batch, "RANGE_BYTES", 2 << 10)
    assert parse(2) == one
    assert one[1]["oversized"] == 2 and one[0].count(b"\n") > 100

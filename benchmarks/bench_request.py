"""Benchmark: parsing finished-request lines whose prompt makes them very long.

Builds, in memory, blocks of ``Finish: obj=...`` lines as SGLang's request logger writes
them at --log-requests-level 3 (the whole prompt and output on the line), with the prompt
cut to 1, 200 and 500 kB, with and without speculative fields, and times ``Parser.feed``
on each (CPU time of this process, best of --repeat), in blocks of the file reader's size (lines over ``MAX_LINE``, 1 MiB, are skipped before parsing). Linear parsing shows as a flat cost per MB across line lengths; the anchor
prefilter shows as lines without speculative fields costing about as much as a byte scan.

    python benchmarks/bench_request.py [--lines 200] [--repeat 3]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acceptmon.inputs.files import BLOCK_SIZE
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser

WORDS = "the draft model ' proposes \" tokens { and } the target ( verifies ) them [ in ] one pass".split()


def prompt(r: random.Random, size: int) -> str:
    words: list[str] = []
    n = 0
    while n < size:
        w = r.choice(WORDS)
        words.append(w)
        n += len(w) + 1
    return " ".join(words)[:size]


def finish(r: random.Random, size: int, *, spec: bool) -> str:
    meta = "{'id': 'r', 'finish_reason': {'type': 'stop', 'matched': 2}, 'prompt_tokens': 9000, "
    meta += "'completion_tokens': 300, 'cached_tokens': 0, 'e2e_latency': 4.2"
    if spec:
        meta += ", 'spec_accept_rate': 0.63, 'spec_accept_length': 2.9, 'spec_num_correct_drafts': 197, "
        meta += (
            "'spec_num_proposed_drafts': 310, 'spec_verify_ct': 103, 'spec_correct_drafts_histogram': [5, 20, 40, 38]"
        )
    text = prompt(r, size)
    return (
        f"[2026-09-01 12:00:00] Finish: obj=GenerateReqInput(rid='r', text={text!r}, sampling_params="
        f"{{'max_new_tokens': 300}}, stream=False), out={{'text': {prompt(r, 1200)!r}, 'output_ids': "
        f"{list(range(300))}, 'meta_info': {meta}}}}}"
    )


def blocks(lines: list[bytes]) -> list[bytes]:
    """Whole lines in blocks of about BLOCK_SIZE, as the file reader hands them to the parser."""
    out: list[bytes] = []
    cur: list[bytes] = []
    size = 0
    for line in lines:
        cur.append(line)
        size += len(line)
        if size >= BLOCK_SIZE:
            out.append(b"".join(cur))
            cur, size = [], 0
    if cur:
        out.append(b"".join(cur))
    return out


def bench(grammars: GrammarSet, parts: list[bytes], repeat: int) -> tuple[float, int]:
    best = float("inf")
    got = 0
    for _ in range(repeat):
        parser = Parser(grammars, "bench.log")
        start = time.process_time()
        got = sum(len(parser.feed(b)) for b in parts)
        best = min(best, time.process_time() - start)
    return best, got


def scan(parts: list[bytes], repeat: int) -> float:
    """The floor: decoding the bytes and counting lines."""
    best = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        for b in parts:
            b.decode("utf-8", "replace").count("\n")
        best = min(best, time.process_time() - start)
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--lines", type=int, default=200)
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    grammars = load_grammars()
    r = random.Random(7)
    print(
        f"{'prompt':>8} {'spec':>5} {'MB':>7} {'records':>8} {'parse s':>8} {'MB/s':>8} {'µs/line':>9} {'floor s':>8}"
    )
    for kb in (1, 200, 500):
        for spec in (True, False):
            parts = blocks([(finish(r, kb * 1000, spec=spec) + "\n").encode() for _ in range(args.lines)])
            seconds, records = bench(grammars, parts, args.repeat)
            mb = sum(map(len, parts)) / 1e6
            print(
                f"{kb:>6}kB {spec!s:>5} {mb:7.1f} {records:8d} {seconds:8.3f} {mb / seconds:8.0f} "
                f"{seconds / args.lines * 1e6:9.0f} {scan(parts, args.repeat):8.3f}"
            )


if __name__ == "__main__":
    main()

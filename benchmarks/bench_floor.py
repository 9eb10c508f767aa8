"""Where parse time goes: the cost of each stage per decode line, on one core, in this CPython.

Takes the first 32 MiB of the bench_parse log and times, each alone:
  1. decode the bytes and split them into lines;
  2. keep the lines holding the literal anchor 'Decode batch';
  3. the decode grammar's regex on each of them (map, no Python loop);
  4. splitting each body into key/value pairs (dict of str, no typing);
  5. the real parser (typed records) and the CSV sink on the same data;
  6. the fast lane (rows straight from the text, no records) on the same data.
It shows how far below the current parser a pipeline with typed records could go, and
why the 0.5x-of-grep+awk goal needs something other than per-line Python.

    python benchmarks/bench_floor.py [--mb 32]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from acceptmon.parse.fast.lane import FastLane  # noqa: E402
from acceptmon.parse.load import load_grammars  # noqa: E402
from acceptmon.parse.parser import Parser  # noqa: E402
from acceptmon.sinks.table import format_records  # noqa: E402
from benchmarks.bench_parse import OUT, generate  # noqa: E402


def timed(label: str, n: int, fn):  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    out = fn()
    took = time.perf_counter() - start
    print(f"  {label:52} {took:6.3f} s  {took / max(n, 1) * 1e6:6.2f} µs per decode line")
    return out


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=int, default=32)
    a = ap.parse_args()
    log = OUT / "bench_256mb.log"
    if not log.exists():
        OUT.mkdir(exist_ok=True)
        generate(log, 256)
        print(f"(generated {log}; delete it when done)")
    with log.open("rb") as f:
        data = f.read(a.mb << 20)
    data = data[: data.rfind(b"\n") + 1]
    grammars = load_grammars()
    decode = next(g for g in grammars.records if g.spec.record == "decode")
    assert decode.regex is not None
    n = data.count(b"Decode batch")
    newlines = data.count(b"\n")
    print(f"{len(data) / 2**20:.0f} MiB, {newlines:,} lines, {n:,} decode lines; one core")
    lines = timed("1. decode + split into lines", n, lambda: data.decode("utf-8", "replace").split("\n"))
    cand = timed("2. keep lines with the literal anchor", n, lambda: [x for x in lines if "Decode batch" in x])
    matches = timed("3. grammar regex on each (map)", n, lambda: list(map(decode.regex.match, cand)))
    timed("4. body into a dict of str pairs", n,
          lambda: [dict(p.split(": ", 1) for p in m.group("body").split(", ") if ": " in p) for m in matches if m])  # fmt: skip
    parser = Parser(grammars, "bench.log", records=frozenset({"decode"}))
    records = timed("5a. the parser: typed records (all lines)", n, lambda: parser.feed(data))
    timed("5b. the CSV sink on those records", n, lambda: format_records(records, "csv"))
    lane = FastLane(grammars, "csv")
    lane.learn(data[: data.rfind(b"\n", 0, 1 << 20) + 1])
    fast = Parser(grammars, "bench.log", records=frozenset({"decode"}))
    blocks, pos = [], 0
    while pos < len(data):
        end = data.rfind(b"\n", pos, pos + (1 << 20)) + 1 or len(data)
        blocks.append(data[pos:end])
        pos = end
    timed("6. the fast lane, 1 MiB blocks (rows, no records)", n,
          lambda: [lane.feed(fast, b, lambda r: (len(r), format_records(r, "csv"))) for b in blocks])  # fmt: skip


if __name__ == "__main__":
    main()

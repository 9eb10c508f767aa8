"""Benchmark: crafted lines against the grammars, and the cost of the load-time pattern check.

For each crafted line family and size, prints the time the grammar regexes take on it
without a time bound (what the parser once spent on one line) and the time
``Parser.classify`` takes now, with the line kind it returns. Then the cost of
``redos.check_grammar`` over every grammar, and what the per-match time bound costs
on an ordinary decode line.

    python benchmarks/bench_redos.py [--sizes 262144,1048576] [--grammars DIR] [--cap 20]

``--grammars DIR`` loads the grammars of DIR instead of the built-in ones (e.g. an older
checkout's ``grammars/``, to compare); ``--cap`` bounds each unbounded match, in seconds.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

import regex

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from acceptmon.parse.checks import check_grammar
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.load import load_grammars
from acceptmon.parse.parser import Parser

CRAFTED: dict[str, Callable[[int], str]] = {
    "'[a] ' repeated": lambda n: "[a] " * (n // 4) + "Decode batch, x",
    "rank tokens": lambda n: "[2025-01-01 00:00:00" + " TP1" * (n // 4) + " Decode batch",
    "timestamp + spaces": lambda n: "2025-01-01 00:00:00" + " " * n + "Decode batch",
    "ServerArgs( + ') '": lambda n: "server_args=ServerArgs(" + ") " * (n // 2) + "x",
    "'[ts' repeated": lambda n: "[2025-01-01 00:00:00" * (n // 20) + " Decode batch, x",
    "digits": lambda n: "1" * n + " Decode batch, x",
    "'key: value, ' pairs": lambda n: (
        "[2025-01-01 00:00:00] Decode batch, #running-req: 1, " + "key: value, " * (n // 12)
    ),
    "'a, ' pieces": lambda n: "[2025-01-01 00:00:00] Decode batch, #running-req: 1, " + "a, " * (n // 3),
}
DECODE = (
    "[2026-02-26 10:00:00 DP1 TP1 EP1] Decode batch, #running-req: 2, #token: 3000, token usage: 0.20, "
    "accept len: 2.80, accept rate: 0.60, cuda graph: True, gen throughput (token/s): 300.00, #queue-req: 0"
)


def unbounded(gset: GrammarSet, line: str, cap: float) -> str:
    """CPU time of every candidate grammar's regex and starts_like on ``line``, as the parser ran them."""
    start = time.process_time()
    for g in gset.records:
        if g.anchor and g.anchor in line:
            for pattern in (g.regex, g.starts_like):
                try:
                    if pattern is not None:
                        pattern.match(line, timeout=cap)
                except TimeoutError:
                    return f"> {cap:g} s"
    return f"{time.process_time() - start:.3f} s"


def bounded(gset: GrammarSet, line: str) -> str:
    parser = Parser(gset, "crafted.log")
    start = time.process_time()
    kind, _ = parser.classify(line)
    return f"{time.process_time() - start:.3f} s ({kind})"


def check_cost(gset: GrammarSet) -> None:
    """CPU time of check_grammar over every grammar: the first run (as at start-up) and the best of five."""
    runs = []
    for _ in range(5):
        start = time.process_time()
        reasons = [check_grammar(g) for g in gset.all]
        runs.append(time.process_time() - start)
    refused = [r for r in reasons if r is not None]
    print(
        f"\ncheck_grammar over {len(gset.all)} grammars: {runs[0] * 1000:.1f} ms CPU first, "
        f"{min(runs) * 1000:.1f} ms best of 5; refused: {refused or 'none'}"
    )


def timeout_overhead(gset: GrammarSet) -> None:
    pattern: regex.Pattern[str] | None = next(g.regex for g in gset.records if g.anchor == "Decode batch")
    assert pattern is not None
    rounds = 100_000
    results = {}
    for label, kwargs in (("no bound", {}), ("timeout=0.05", {"timeout": 0.05})):
        best = float("inf")
        for _ in range(3):
            start = time.perf_counter()
            for _ in range(rounds):
                pattern.match(DECODE, **kwargs)
            best = min(best, time.perf_counter() - start)
        results[label] = best / rounds * 1e6
    print("decode-line match: " + ", ".join(f"{k} {v:.2f} us" for k, v in results.items()))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="262144,1048576", help="line lengths in characters, comma-separated")
    ap.add_argument("--grammars", type=Path, help="load the grammars of this directory instead of the built-in ones")
    ap.add_argument("--cap", type=float, default=20.0, help="seconds an unbounded match may take before giving up")
    args = ap.parse_args()
    gset = load_grammars(sorted(args.grammars.glob("*.toml")), builtin=False) if args.grammars else load_grammars()
    sizes = [int(s) for s in args.sizes.split(",")]
    print(f"{'crafted line':24s} {'size':>9s}  {'regexes, unbounded':>20s}  {'Parser.classify now':>30s}")
    for name, make in CRAFTED.items():
        for size in sizes:
            line = make(size)
            print(
                f"{name:24s} {len(line):9,d}  {unbounded(gset, line, args.cap):>20s}  {bounded(gset, line):>30s}",
                flush=True,
            )
    check_cost(gset)
    timeout_overhead(gset)


if __name__ == "__main__":
    main()

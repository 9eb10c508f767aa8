"""Signature types that compare acceptance with something else: the expected value, sequence length. Pure."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from itertools import chain, compress, repeat
from operator import add, gt, le
from typing import Any

from pydantic import Field

from acceptmon.diagnose.detector import (
    Context,
    Detector,
    Lines,
    Params,
    every,
    hit,
    known,
    picked,
    r6,
    run_lines,
    tested,
)
from acceptmon.diagnose.model import Hit, plural
from acceptmon.diagnose.state import RunState, Step, Steps
from acceptmon.measure.plain import added, where_each
from acceptmon.parse.fast import native
from acceptmon.parse.records import Record, WarningRecord


def log2_sums(
    seqs: Sequence[float], lengths: Sequence[float], totals: dict[int, float]
) -> list[tuple[int, int, float, int]]:
    """Per log2 bucket of the sequence length (``int(seq).bit_length()``), in the order first seen: its key, its lines,
    their lengths added in order to ``totals.get(key, 0.0)``, and the place of its first line. The compiled module's
    ``log2_sums`` where it is built and takes the values, else :func:`python_log2_sums`: the same additions."""
    module = native.load()
    got = None if module is None else module.log2_sums(seqs, lengths, totals)
    return got if got is not None else python_log2_sums(seqs, lengths, totals)


def python_log2_sums(
    seqs: Sequence[float], lengths: Sequence[float], totals: dict[int, float]
) -> list[tuple[int, int, float, int]]:
    """:func:`log2_sums` in Python: each bucket's lines marked at once (:func:`where_each`), then added."""
    return [
        (key, mine.count(1), reduce(add, compress(lengths, mine), totals.get(key, 0.0)), mine.index(1))
        for key, mine in where_each(list(map(int.bit_length, map(int, seqs))))
    ]


class ExpectedParams(Params):
    ratio: float = 0.85
    max_running: int = 8
    """Judge batches with at most this many running requests (small batches) when there are any."""
    min_lines: int = 5
    algorithms: list[str] = Field(default_factory=list)


class Expected(Detector[ExpectedParams]):
    """P17, P12: accept length under the value the draft's card or paper gives (--expected-accept-len)."""

    def __init__(self, params: ExpectedParams) -> None:
        super().__init__(params)
        self.small = 0.0
        self.small_lines = Lines()
        self.max_running = params.max_running

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        length, running = step.accept_len, step.running_req
        if length is not None and running is not None and running <= self.max_running and step.warm:
            self.small += length
            self.small_lines.add(step.line)

    def steps(self, steps: Steps, run: RunState) -> None:
        """Warm lines with an accept length at most ``max_running`` running requests: counted, lengths added in
        order."""
        small = every(steps.warm, known(steps.accept_len), tested(steps.running_req, le, self.max_running))
        lengths = list(compress(steps.accept_len, small))
        if lengths:
            self.small = added(lengths, self.small)
            self.small_lines.extend(compress(steps.line, small))

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        want = ctx.expected_accept_len
        algos = [a.upper() for a in self.p.algorithms]
        if want is None or not run.speculative or (algos and (run.algorithm or "") not in algos):
            return None
        n, mean = self.small_lines.count, None
        lines: list[int] | tuple[int, ...]
        if n >= self.p.min_lines:
            running = plural(self.p.max_running, "running request", "running requests")
            mean, lines, at = self.small / n, self.small_lines.lines, f"at <= {running}"
        else:
            mean, n, at = run.accept_len.mean, run.accept_len.count, "at any batch size"
            lines = run_lines(run)
        if mean is None or n < self.p.min_lines or r6(mean) >= r6(self.p.ratio * want):
            return None
        text = f"mean accept len {mean:.2f} {at} is {mean / want:.0%} of the expected {want:g} (< {self.p.ratio:.0%})"
        return hit(text, lines, accept_len_mean=mean, expected=want, line_count=n)


class ContextParams(Params):
    codes: list[str] = Field(default_factory=lambda: ["is greater than the derived context_length"])
    """Warnings whose ``limit`` is a derived context length (the smallest is the draft's window)."""
    over_lines: int = 5
    drop: float = 0.25
    min_bucket_lines: int = 5


class LongContext(Detector[ContextParams]):
    """P4: sequences longer than the draft was trained for, or L falling as sequences grow."""

    def __init__(self, params: ContextParams) -> None:
        super().__init__(params)
        self.window: float | None = None
        self.window_line = 0
        self.over = Lines()
        self.longest = 0.0
        self.by_length: dict[int, list[Any]] = {}  # log2 bucket -> [lines, sum L, first line]

    def warning(self, r: WarningRecord, run: RunState) -> None:
        if r.code in self.p.codes and r.limit is not None and (self.window is None or r.limit < self.window):
            self.window, self.window_line = r.limit, r.line

    def stats(self, r: Record, run: RunState, step: Step) -> None:
        length, seq = step.accept_len, step.seq_len
        if length is None or seq is None or not step.warm:
            return
        if seq > self.longest:
            self.longest = seq
        if self.window is not None and seq > self.window:
            self.over.add(step.line)
        key = int(seq).bit_length()
        bucket = self.by_length.get(key)
        if bucket is None:
            bucket = self.by_length[key] = [0, 0.0, step.line]
        bucket[0] += 1
        bucket[1] += length

    def steps(self, steps: Steps, run: RunState) -> None:
        """Warm lines with an accept length and a sequence length: the longest sequence, the lines beyond the
        draft's window, and per log2 bucket of the sequence length (``int(seq).bit_length()``) its lines, their
        accept lengths added in order, and its first line."""
        judged = every(steps.warm, known(steps.accept_len), known(steps.seq_len))
        seqs = picked(steps.seq_len, judged)
        if not seqs:
            return
        lines, lengths = list(compress(steps.line, judged)), picked(steps.accept_len, judged)
        self.longest = max(chain((self.longest,), seqs))
        if self.window is not None:
            self.over.extend(compress(lines, map(gt, seqs, repeat(self.window))))
        for key, count, total, first in log2_sums(seqs, lengths, {k: b[1] for k, b in self.by_length.items()}):
            bucket = self.by_length.get(key)
            if bucket is None:
                bucket = self.by_length[key] = [0, 0.0, lines[first]]
            bucket[0] += count
            bucket[1] = total

    def hit(self, run: RunState, ctx: Context) -> Hit | None:
        if not run.speculative:
            return None
        if self.window is not None and self.over.count >= self.p.over_lines:
            text = (
                f"{plural(self.over.count, 'batch', 'batches')} with #token/#running-req above the draft's "
                f"context length {self.window:g} (longest {self.longest:.0f})"
            )
            return hit(
                text,
                [self.window_line, *self.over.lines],
                draft_context=self.window,
                lines_over=self.over.count,
                longest_seq=self.longest,
            )
        full = sorted((k, v) for k, v in self.by_length.items() if v[0] >= self.p.min_bucket_lines)
        if len(full) >= 2:
            (short_k, short), (long_k, long) = full[0], full[-1]
            short_len, long_len = short[1] / short[0], long[1] / long[0]
            if r6(long_len) <= r6((1 - self.p.drop) * short_len):
                text = (
                    f"accept len {long_len:.2f} at sequences of {1 << (long_k - 1)}+ tokens vs {short_len:.2f} "
                    f"at {1 << max(short_k - 1, 0)}-{(1 << short_k) - 1}"
                )
                return hit(text, [short[2], long[2]], short_accept_len=short_len, long_accept_len=long_len)
        if self.window is not None:
            text = f"the draft's derived context length is {self.window:g}; sequences so far reach {self.longest:.0f}"
            return hit(text, [self.window_line], "info", draft_context=self.window, longest_seq=self.longest)
        return None

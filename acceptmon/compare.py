"""Is B better than A? Means with block-bootstrap confidence intervals, and a verdict; no I/O.

Neighbouring decode lines are correlated (same requests, same load), so an i.i.d.
bootstrap over batches would give intervals that are too narrow. Each side is
resampled with the circular block bootstrap: ``k = ceil(n / L)`` blocks of ``L =
ceil(n^(1/3))`` consecutive batches (wrapping at the end) start at uniformly drawn
positions; the last block is cut so a replicate has ``n`` batches again. Block sums
come from prefix sums, so one replicate costs ``k`` look-ups, not ``n``. Only the
stdlib ``random`` is used, seeded, so results are reproducible.

The two sides are resampled independently (own generators, same resample count);
the relative throughput change of replicate ``i`` is ``mean_B_i / mean_A_i - 1``,
and its 2.5/97.5 percentiles are the CI. The verdict is ``better``/``worse`` when
that CI excludes 0, else ``no difference``.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import accumulate
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from acceptmon.stats import Series

Verdict: TypeAlias = Literal["better", "worse", "no difference"]
RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_BUCKET_BATCHES = 2
"""A running-request bucket is used when each side has at least this many steady batches in it."""
MIN_MATCHED_BATCHES = 10
"""Matched-load comparison needs at least this many steady batches per side in shared buckets."""


@dataclass(frozen=True, slots=True)
class Batch:
    """One decode line, reduced to what a comparison uses."""

    accept_len: float | None
    accept_rate: float | None
    """The normalized (draft) accept rate."""
    gen_throughput: float | None
    running_req: int | None
    steady: bool
    """``#queue-req`` 0 and no prefill line since this rank's previous decode line."""


@dataclass(frozen=True)
class Side:
    label: str
    batches: Sequence[Batch]
    spec: str = ""
    """The speculative config, for people (``EAGLE3 steps 3, topk 1, draft 4``)."""


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Estimate(_Frozen):
    mean: float | None
    ci_low: float | None
    ci_high: float | None


class AcceptLenEstimate(Estimate):
    p10: float | None
    p50: float | None
    p90: float | None


class SideResult(_Frozen):
    label: str
    spec: str
    batches: int
    block_length: int
    """Batches per bootstrap block: ceil(batches^(1/3))."""
    accept_len: AcceptLenEstimate
    accept_rate: Estimate
    """Normalized accept rate: accepted drafts / proposed drafts."""
    gen_throughput: Estimate


class Bucket(_Frozen):
    running_req: str
    """``#running-req`` value, or ``lo-hi`` range above 16."""
    a_batches: int
    b_batches: int
    a_gen_throughput: float
    b_gen_throughput: float


class Matched(_Frozen):
    comparable: bool
    gen_throughput_pct: float | None
    """100 x (weighted mean of per-bucket B/A throughput ratios - 1), weights: batches of both sides."""
    a_batches: int
    b_batches: int
    note: str
    buckets: list[Bucket]


class Change(_Frozen):
    gen_throughput_diff: float | None
    gen_throughput_pct: float | None
    gen_throughput_pct_ci_low: float | None
    gen_throughput_pct_ci_high: float | None
    accept_len_diff: float | None
    accept_len_pct: float | None
    accept_rate_diff: float | None
    accept_rate_pct: float | None
    matched: Matched


class Comparison(_Frozen):
    a: SideResult
    b: SideResult
    change: Change
    verdict: Verdict
    reason: str


def block_length(n: int) -> int:
    """``ceil(n ** (1/3))`` in exact integer arithmetic (at least 1)."""
    length = max(1, round(math.pow(n, 1 / 3)))
    while length**3 < n:
        length += 1
    while length > 1 and (length - 1) ** 3 >= n:
        length -= 1
    return length


def bootstrap_means(
    columns: Sequence[Sequence[float | None]], rng: random.Random, resamples: int
) -> list[list[float | None]]:
    """Circular block bootstrap of each column's mean; all columns share the drawn blocks.

    Columns have one value per batch (None: not logged). Returns, per column, one mean
    per replicate (None when a replicate drew no value of that column).
    """
    n = len(columns[0]) if columns else 0
    if n == 0:
        return [[None] * resamples for _ in columns]
    length = block_length(n)
    blocks = -(-n // length)
    tail = n - (blocks - 1) * length
    tables = [_block_sums(col, length, tail) for col in columns]
    positions = range(n)
    out: list[list[float | None]] = [[] for _ in columns]
    for _ in range(resamples):
        starts = rng.choices(positions, k=blocks)
        last = starts.pop()
        for (sums, tails, counts, tail_counts), means in zip(tables, out, strict=True):
            total = sum(map(sums.__getitem__, starts)) + tails[last]
            count = n if counts is None else sum(map(counts.__getitem__, starts)) + tail_counts[last]
            means.append(total / count if count else None)
    return out


_Tables: TypeAlias = tuple[list[float], list[float], list[int] | None, list[int]]


def _block_sums(column: Sequence[float | None], length: int, tail: int) -> _Tables:
    """Sum (and count, if values are missing) of the block of ``length`` and of ``tail`` from each start."""
    n = len(column)
    values = [0.0 if v is None else v for v in column]
    prefix = list(accumulate(values + values, initial=0.0))
    sums = [prefix[i + length] - prefix[i] for i in range(n)]
    tails = [prefix[i + tail] - prefix[i] for i in range(n)]
    if all(v is not None for v in column):
        return sums, tails, None, []
    present = [0 if v is None else 1 for v in column]
    cprefix = list(accumulate(present + present, initial=0))
    counts = [cprefix[i + length] - cprefix[i] for i in range(n)]
    return sums, tails, counts, [cprefix[i + tail] - cprefix[i] for i in range(n)]


def percentile(values: Sequence[float], q: float) -> float:
    """Linear-interpolation percentile (``q`` in 0..1) of a non-empty sequence."""
    s = sorted(values)
    pos = q * (len(s) - 1)
    lo = int(pos)
    hi = min(lo + 1, len(s) - 1)
    return s[lo] + (s[hi] - s[lo]) * (pos - lo)


def interval(replicates: Sequence[float | None], confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Percentile interval of the replicates that have a value."""
    have = [v for v in replicates if v is not None]
    if not have:
        return None, None
    tail = (1 - confidence) / 2
    return percentile(have, tail), percentile(have, 1 - tail)


def _mean(values: Sequence[float | None]) -> float | None:
    have = [v for v in values if v is not None]
    return sum(have) / len(have) if have else None


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits) + 0.0  # + 0.0: no "-0.0"


def summarize(side: Side, rng: random.Random, resamples: int) -> tuple[SideResult, list[list[float | None]]]:
    """Means, CIs and accept-length percentiles of one side, and its bootstrap replicates."""
    b = side.batches
    cols = [[x.accept_len for x in b], [x.accept_rate for x in b], [x.gen_throughput for x in b]]
    present = [c for c in cols if any(v is not None for v in c)]
    reps = iter(bootstrap_means(present, rng, resamples))
    none: list[float | None] = [None] * resamples
    replicates = [next(reps) if any(v is not None for v in c) else none for c in cols]
    est = []
    for col, rep in zip(cols, replicates, strict=True):
        lo, hi = interval(rep)
        est.append({"mean": _r(_mean(col)), "ci_low": _r(lo), "ci_high": _r(hi)})
    series = Series(keep_values=True)
    for v in cols[0]:
        series.add(v)
    q = {f"p{p}": series.quantile(p / 100) for p in (10, 50, 90)}
    result = SideResult(
        label=side.label,
        spec=side.spec,
        batches=len(b),
        block_length=block_length(len(b)),
        accept_len=AcceptLenEstimate(**est[0], **q),
        accept_rate=Estimate(**est[1]),
        gen_throughput=Estimate(**est[2]),
    )
    return result, replicates


def bucket_of(running_req: int) -> tuple[int, int]:
    """Exact up to 16, then ranges a quarter of the power of two below (16-19, 20-23, ..., 32-39)."""
    if running_req <= 16:
        return running_req, running_req
    step = (1 << (running_req.bit_length() - 1)) // 4
    lo = running_req - running_req % step
    return lo, lo + step - 1


def matched_load(a: Sequence[Batch], b: Sequence[Batch]) -> Matched:
    """Throughput ratio B/A within shared ``#running-req`` buckets of steady batches."""
    sides: list[dict[tuple[int, int], list[float]]] = [defaultdict(list), defaultdict(list)]
    for batches, buckets in zip((a, b), sides, strict=True):
        for x in batches:
            if x.steady and x.running_req and x.gen_throughput is not None:
                buckets[bucket_of(x.running_req)].append(x.gen_throughput)
    shared = sorted(k for k in sides[0].keys() & sides[1].keys() if min(len(s[k]) for s in sides) >= MIN_BUCKET_BATCHES)
    rows = [
        Bucket(
            running_req=str(lo) if lo == hi else f"{lo}-{hi}",
            a_batches=len(sides[0][(lo, hi)]),
            b_batches=len(sides[1][(lo, hi)]),
            a_gen_throughput=round(sum(sides[0][(lo, hi)]) / len(sides[0][(lo, hi)]), 4),
            b_gen_throughput=round(sum(sides[1][(lo, hi)]) / len(sides[1][(lo, hi)]), 4),
        )
        for lo, hi in shared
    ]
    na, nb = sum(r.a_batches for r in rows), sum(r.b_batches for r in rows)
    usable = [r for r in rows if r.a_gen_throughput > 0]
    if min(na, nb) < MIN_MATCHED_BATCHES or not usable:
        note = (
            f"too few steady batches at shared #running-req to compare: {len(rows)} buckets, "
            f"{na} vs {nb} batches (need {MIN_MATCHED_BATCHES} per side)"
        )
        return Matched(comparable=False, gen_throughput_pct=None, a_batches=na, b_batches=nb, note=note, buckets=rows)
    weights = [r.a_batches + r.b_batches for r in usable]
    ratio = sum(w * r.b_gen_throughput / r.a_gen_throughput for w, r in zip(weights, usable, strict=True))
    pct = _r(100 * (ratio / sum(weights) - 1), 2)
    note = f"{len(rows)} shared #running-req buckets, {na} vs {nb} steady batches"
    return Matched(comparable=True, gen_throughput_pct=pct, a_batches=na, b_batches=nb, note=note, buckets=rows)


def _diff(a: float | None, b: float | None) -> tuple[float | None, float | None]:
    if a is None or b is None:
        return None, None
    return _r(b - a), (_r(100 * (b / a - 1), 2) if a else None)


def compare(a: Side, b: Side, *, resamples: int = RESAMPLES, seed: int = 0) -> Comparison:
    """Compare B against A (independent bootstraps seeded ``seed`` and ``seed + 1``)."""
    ra, reps_a = summarize(a, random.Random(seed), resamples)
    rb, reps_b = summarize(b, random.Random(seed + 1), resamples)
    pct_reps = [
        100 * (y / x - 1) if x is not None and y is not None and x > 0 else None
        for x, y in zip(reps_a[2], reps_b[2], strict=True)
    ]
    lo, hi = interval(pct_reps)
    tput_diff, tput_pct = _diff(ra.gen_throughput.mean, rb.gen_throughput.mean)
    len_diff, len_pct = _diff(ra.accept_len.mean, rb.accept_len.mean)
    rate_diff, rate_pct = _diff(ra.accept_rate.mean, rb.accept_rate.mean)
    change = Change(
        gen_throughput_diff=tput_diff,
        gen_throughput_pct=tput_pct,
        gen_throughput_pct_ci_low=_r(lo, 2) if tput_pct is not None else None,
        gen_throughput_pct_ci_high=_r(hi, 2) if tput_pct is not None else None,
        accept_len_diff=len_diff,
        accept_len_pct=len_pct,
        accept_rate_diff=rate_diff,
        accept_rate_pct=rate_pct,
        matched=matched_load(a.batches, b.batches),
    )
    verdict, reason = _verdict(ra, rb, change)
    return Comparison(a=ra, b=rb, change=change, verdict=verdict, reason=reason)


def _verdict(a: SideResult, b: SideResult, c: Change) -> tuple[Verdict, str]:
    def length(s: SideResult) -> str:
        return "none" if s.accept_len.mean is None else f"{s.accept_len.mean:.2f}"

    lengths = f"accept len {length(b)} vs {length(a)}"
    pct, lo, hi = c.gen_throughput_pct, c.gen_throughput_pct_ci_low, c.gen_throughput_pct_ci_high
    if pct is None or lo is None or hi is None:
        missing = "A" if not a.gen_throughput.mean else "B"
        return "no difference", f"no throughput change to measure: {missing} has no gen throughput above 0; {lengths}"
    verdict: Verdict = "better" if lo > 0 else "worse" if hi < 0 else "no difference"
    ci = f"CI {lo:+.1f} … {hi:+.1f} %{', includes 0' if verdict == 'no difference' else ''}"
    matched = c.matched.gen_throughput_pct
    at_load = f"; at matched #running-req {matched:+.1f} %" if matched is not None else ""
    return verdict, f"B {pct:+.1f} % tok/s ({ci}), {lengths}{at_load}"

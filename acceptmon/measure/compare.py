"""Is B better than A? Means with block-bootstrap confidence intervals, and a verdict; no I/O.

Neighbouring decode lines are correlated, so each side is resampled with the circular block
bootstrap: ``k = ceil(n / L)`` blocks of ``L = ceil(n^(1/3))`` consecutive batches (wrapping)
start at uniform positions, the last cut so a replicate has ``n`` batches; block sums come
from prefix sums (``k`` look-ups per replicate, not ``n``). Stdlib ``random``, seeded. Sides
are resampled independently; the throughput-change CI is the 2.5/97.5 percentiles of
``mean_B_i / mean_A_i - 1``. Verdict: ``better``/``worse`` when it excludes 0, else ``no difference``.
"""

from __future__ import annotations

import random
import sys
from array import array
from collections import Counter, defaultdict, deque
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import accumulate
from operator import itemgetter
from typing import Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict

from acceptmon.measure.aggregate import Series
from acceptmon.measure.figures import RunFigures
from acceptmon.measure.normalize import Fact

Verdict: TypeAlias = Literal["better", "worse", "no difference"]
_Tables: TypeAlias = tuple[list[float], list[float], list[int] | None, list[int]]
RESAMPLES = 2000
CONFIDENCE = 0.95
MIN_BUCKET_BATCHES = 2  # a #running-req bucket is used when each side has this many steady batches in it
MIN_MATCHED_BATCHES = 10  # matched load needs this many steady batches per side in shared buckets


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
    spec: str = ""  # the speculative config, for people: "EAGLE3 steps 3, topk 1, draft 4"
    loads: Sequence[float] | None = None
    """The logged rate of each load line, where load lines are not the batches (vLLM's throughput lines):
    the throughput estimate is their mean, bootstrapped on its own. None: the batches' own throughput."""
    figures: dict[str, Any] = field(default_factory=dict)
    """The figures every command reports for a run (:mod:`acceptmon.measure.figures`), and the side's source."""


class Sample:
    """One side's batches, from normalized facts (:mod:`acceptmon.measure.normalize`), as every comparison
    takes them: ``compare``'s sides and the dashboard's run against run.

    A batch is a fact with a :class:`~acceptmon.measure.normalize.Batch` (its unit's load, its ``steady``
    mark). Where the load lines are not the batches (vLLM's throughput lines), their rates are the
    throughput estimate; a side without batches (vLLM without speculation) compares its load lines.
    ``keep``: only the latest this many of each are kept (None: all).
    """

    def __init__(self, keep: int | None = None) -> None:
        self.figures = RunFigures()
        self.batches: deque[Batch] = deque(maxlen=keep)
        self.load_batches: deque[Batch] = deque(maxlen=keep)
        """Load lines as batches of their own, for a side with no batch."""
        self.loads: deque[float] = deque(maxlen=keep)
        self.own_loads = True
        """Every load line is also a batch (SGLang): the batches' throughput is the load lines'."""

    def add(self, fact: Fact) -> None:
        b, load = fact.batch, fact.load
        if b is None and load is None:
            return
        self.figures.add(fact)
        if b is not None:
            self.batches.append(Batch(b.accept_len, b.accept_rate, b.gen_throughput, b.running_req, b.steady))
        if load is not None:
            self.own_loads = self.own_loads and b is not None
            if load.gen_throughput is not None:
                self.loads.append(load.gen_throughput)
            if b is None:
                self.load_batches.append(Batch(None, None, load.gen_throughput, load.running_req, load.steady))

    def __len__(self) -> int:
        """Batches to compare: the batches, else the load lines."""
        return len(self.batches) or len(self.load_batches)

    def side(self, label: str, spec: str = "", extra: dict[str, Any] | None = None) -> Side:
        """The side to :func:`compare`, with the shared figures (less the batch count) and ``extra``."""
        figures: dict[str, Any] = self.figures.as_dict()
        figures.pop("batches")
        return Side(
            label=label,
            batches=list(self.batches or self.load_batches),
            spec=spec,
            loads=None if self.own_loads else list(self.loads),
            figures={**figures, **(extra or {})},
        )


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
    """Mean over the side's load lines of the rate each rank or engine logged (``gen_throughput_per_rank``)."""
    accept_len_mean: float | None = None
    gen_throughput_per_rank: float | None = None
    gen_throughput_total: float | None = None
    source: str = ""
    pod: str = ""
    container: str = ""


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
    length = 1
    while length**3 < n:
        length += 1
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
    out: list[list[float | None]] = [[] for _ in columns]
    for _ in range(resamples):
        starts = draw_starts(rng, n, blocks)
        last = starts.pop()
        full = itemgetter(n, n, *starts)  # index n is a 0 pad: always >= 2 items, so a tuple comes back
        for (sums, tails, counts, tail_counts), means in zip(tables, out, strict=True):
            total = sum(full(sums)) + tails[last]
            count = n if counts is None else sum(full(counts)) + tail_counts[last]
            means.append(total / count if count else None)
    return out


def draw_starts(rng: random.Random, n: int, k: int) -> list[int]:
    """``k`` uniform positions in ``range(n)``: 64 random bits each, reduced mod n (bias below 1e-14)."""
    draws = array("Q", rng.randbytes(8 * k))
    if sys.byteorder == "big":
        draws.byteswap()
    return list(map(n.__rmod__, draws))


def _block_sums(column: Sequence[float | None], length: int, tail: int) -> _Tables:
    """Sum (and count, if values are missing) of the block of ``length`` and of ``tail`` from each start."""
    n = len(column)
    values = [0.0 if v is None else v for v in column]
    prefix = list(accumulate(values + values, initial=0.0))
    sums = [prefix[i + length] - prefix[i] for i in range(n)] + [0.0]
    tails = [prefix[i + tail] - prefix[i] for i in range(n)]
    if all(v is not None for v in column):
        return sums, tails, None, []
    present = [0 if v is None else 1 for v in column]
    cprefix = list(accumulate(present + present, initial=0))
    counts = [cprefix[i + length] - cprefix[i] for i in range(n)] + [0]
    return sums, tails, counts, [cprefix[i + tail] - cprefix[i] for i in range(n)]


def interval(replicates: Sequence[float | None], confidence: float = CONFIDENCE) -> tuple[float | None, float | None]:
    """Percentile interval (linear interpolation between ranks) of the replicates that have a value."""
    s = sorted(v for v in replicates if v is not None)
    if not s:
        return None, None
    positions = ((1 - confidence) / 2 * (len(s) - 1), (1 + confidence) / 2 * (len(s) - 1))
    lo, hi = (s[int(p)] + (s[min(int(p) + 1, len(s) - 1)] - s[int(p)]) * (p - int(p)) for p in positions)
    return lo, hi


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits) + 0.0  # + 0.0: no "-0.0"


def summarize(side: Side, rng: random.Random, resamples: int) -> tuple[SideResult, list[list[float | None]]]:
    """Means, CIs and accept-length percentiles of one side, and its bootstrap replicates."""
    b = side.batches
    own: list[float | None] = [x.gen_throughput for x in b] if side.loads is None else [None] * len(b)
    cols = [[x.accept_len for x in b], [x.accept_rate for x in b], own]
    has = [any(v is not None for v in c) for c in cols]  # a column of None costs no resampling
    reps = iter(bootstrap_means([c for c, h in zip(cols, has, strict=True) if h], rng, resamples))
    replicates: list[list[float | None]] = [next(reps) if h else [None] * resamples for h in has]
    if side.loads:  # load lines of their own (vLLM): their mean, resampled in blocks of their own
        cols[2] = list(side.loads)
        replicates[2] = bootstrap_means([cols[2]], rng, resamples)[0]
    est = []
    for col, rep in zip(cols, replicates, strict=True):
        lo, hi = interval(rep)
        have = [v for v in col if v is not None]
        est.append({"mean": _r(sum(have) / len(have) if have else None), "ci_low": _r(lo), "ci_high": _r(hi)})
    series = Series(keep_values=True, values=Counter(v for v in cols[0] if v is not None))
    q = {f"p{p}": series.quantile(p / 100) for p in (10, 50, 90)}
    result = SideResult(
        label=side.label,
        spec=side.spec,
        batches=len(b),
        block_length=block_length(len(b)),
        accept_len=AcceptLenEstimate(**est[0], **q),
        accept_rate=Estimate(**est[1]),
        gen_throughput=Estimate(**est[2]),
        **side.figures,
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
    rows = [_bucket(lo, hi, sides[0][lo, hi], sides[1][lo, hi]) for lo, hi in shared]
    na, nb = sum(r.a_batches for r in rows), sum(r.b_batches for r in rows)
    usable = [r for r in rows if r.a_gen_throughput > 0]
    counts = {"a_batches": na, "b_batches": nb, "buckets": rows}
    if min(na, nb) < MIN_MATCHED_BATCHES or not usable:
        note = f"too few steady batches at shared #running-req to compare: {len(rows)} buckets, {na} vs {nb} batches"
        return Matched.model_validate({"comparable": False, "gen_throughput_pct": None, "note": note, **counts})
    weights = [r.a_batches + r.b_batches for r in usable]
    ratio = sum(w * r.b_gen_throughput / r.a_gen_throughput for w, r in zip(weights, usable, strict=True))
    note = f"{len(rows)} shared #running-req buckets, {na} vs {nb} steady batches"
    pct = _r(100 * (ratio / sum(weights) - 1), 2)
    return Matched.model_validate({"comparable": True, "gen_throughput_pct": pct, "note": note, **counts})


def _bucket(lo: int, hi: int, a: list[float], b: list[float]) -> Bucket:
    return Bucket(
        running_req=str(lo) if lo == hi else f"{lo}-{hi}",
        a_batches=len(a),
        b_batches=len(b),
        a_gen_throughput=round(sum(a) / len(a), 4),
        b_gen_throughput=round(sum(b) / len(b), 4),
    )


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
    fields: dict[str, object] = {"matched": matched_load(a.batches, b.batches)}
    for name in ("gen_throughput", "accept_len", "accept_rate"):
        diff, pct = _diff(getattr(ra, name).mean, getattr(rb, name).mean)
        fields |= {f"{name}_diff": diff, f"{name}_pct": pct}
    ci = (_r(lo, 2), _r(hi, 2)) if fields["gen_throughput_pct"] is not None else (None, None)
    fields |= dict(zip(("gen_throughput_pct_ci_low", "gen_throughput_pct_ci_high"), ci, strict=True))
    change = Change.model_validate(fields)
    verdict, reason = _verdict(ra, rb, change)
    return Comparison(a=ra, b=rb, change=change, verdict=verdict, reason=reason)


def _verdict(a: SideResult, b: SideResult, c: Change) -> tuple[Verdict, str]:
    lengths = "accept len " + " vs ".join(
        "none" if s.accept_len.mean is None else f"{s.accept_len.mean:.2f}" for s in (b, a)
    )
    pct, lo, hi = c.gen_throughput_pct, c.gen_throughput_pct_ci_low, c.gen_throughput_pct_ci_high
    if pct is None or lo is None or hi is None:
        missing = "A" if not a.gen_throughput.mean else "B"
        return "no difference", f"no throughput change to measure: {missing} has no gen throughput above 0; {lengths}"
    verdict: Verdict = "better" if lo > 0 else "worse" if hi < 0 else "no difference"
    ci = f"CI {lo:+.1f} … {hi:+.1f} %{', includes 0' if verdict == 'no difference' else ''}"
    matched = c.matched.gen_throughput_pct
    at_load = f"; at matched #running-req {matched:+.1f} %" if matched is not None else ""
    return verdict, f"B {pct:+.1f} % tok/s ({ci}), {lengths}{at_load}"

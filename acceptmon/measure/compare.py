"""Is B better than A? Means with block-bootstrap confidence intervals, and a verdict; no I/O.

Neighbouring decode lines are correlated, so each side is resampled with the circular block
bootstrap (:mod:`acceptmon.measure.bootstrap`: blocks of ``ceil(n^(1/3))`` consecutive batches). Sides
are resampled independently; the throughput-change CI is the 2.5/97.5 percentiles of
``mean_B_i / mean_A_i - 1``. Verdict: ``better``/``worse`` when it excludes 0, else ``no difference``.
"""

from __future__ import annotations

import random
from array import array
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from acceptmon.measure.aggregate import Series
from acceptmon.measure.bootstrap import RESAMPLES, block_length, bootstrap_means, interval
from acceptmon.measure.columns import Batch, Batches, Floats, missing, present
from acceptmon.measure.figures import RunFigures
from acceptmon.measure.normalize import Fact
from acceptmon.measure.plain import present as logged
from acceptmon.measure.speedup import bucket_label, bucket_of, shared, steady_buckets, weighted_speedup
from acceptmon.parse.kinds import KINDS

if TYPE_CHECKING:
    from acceptmon.measure.facts import Facts

__all__ = [
    "RESAMPLES",
    "Batch",
    "Batches",
    "Comparison",
    "Sample",
    "Side",
    "bootstrap_means",
    "bucket_of",
    "compare",
    "matched_load",
]

Verdict: TypeAlias = Literal["better", "worse", "no difference", "too few batches"]
MIN_VERDICT_BATCHES = 10
"""Batches each side needs for a verdict: below it the bootstrap has too few blocks (ceil(n^(1/3)) batches
each) to give a confidence interval that means anything (2 batches gave a zero-width one)."""


@dataclass(frozen=True)
class Side:
    label: str
    batches: Sequence[Batch]
    """Kept as :class:`~acceptmon.measure.columns.Batches` (columns; a sequence of batches is turned into them)."""
    spec: str = ""  # the speculative config, for people: "EAGLE3 steps 3, topk 1, draft 4"
    loads: Sequence[float] | None = None
    """The logged rate of each load line, where load lines are not the batches (vLLM's throughput lines):
    the throughput estimate is their mean, bootstrapped on its own. None: the batches' own throughput."""
    figures: dict[str, Any] = field(default_factory=dict)
    """The figures every command reports for a run (:mod:`acceptmon.measure.figures`), and the side's source."""
    unit: str = "batches"
    """What its batches are: ``batches``, or ``finished requests`` for a side of request lines alone."""

    def __post_init__(self) -> None:
        object.__setattr__(self, "batches", Batches.of(self.batches))
        if self.loads is not None and not isinstance(self.loads, array):
            object.__setattr__(self, "loads", array("d", self.loads))

    @property
    def columns(self) -> Batches:
        assert isinstance(self.batches, Batches)
        return self.batches


class Sample:
    """One side's batches, from normalized facts (:mod:`acceptmon.measure.normalize`), as every comparison
    takes them: ``compare``'s sides and the dashboard's run against run.

    A batch is a fact with a :class:`~acceptmon.measure.normalize.Batch` (its unit's load, its ``steady``
    mark). Where the load lines are not the batches (vLLM's throughput lines), their rates are the
    throughput estimate; a side without batches (vLLM without speculation) compares its load lines.
    ``keep``: only the latest this many of each are kept (None: all). Batches are kept as columns
    (:mod:`acceptmon.measure.columns`): a few machine numbers a batch, not objects.
    """

    def __init__(self, keep: int | None = None) -> None:
        self.figures = RunFigures()
        self.batches = Batches(keep)
        self.load_batches = Batches(keep)
        """Load lines as batches of their own, for a side with no batch."""
        self._loads = Floats(keep)
        self._marks: bytearray | None = bytearray() if keep is None else None
        """While every load line is also a batch (SGLang) and all are kept: a byte per batch, 1 where its
        throughput is a load line's rate. The rates are read from the batches when they are wanted
        (a load line without a batch: vLLM), instead of being kept twice."""
        self.own_loads = True
        """Every load line is also a batch (SGLang): the batches' throughput is the load lines'."""
        self.requests = Batches(keep)
        """Finished requests' accept length and rate, as batches of their own: a side's batches where it has no
        per-batch line (llama.cpp's default level), its load lines (if any) its throughput."""

    @property
    def loads(self) -> Floats:
        """The logged rate of every load line, in order."""
        if self._marks is None:
            return self._loads
        return Floats(None, compress(self.batches.gen_throughput, self._marks))

    def add(self, fact: Fact) -> None:
        b, load = fact.batch, fact.load
        if b is None and load is None:
            if KINDS[fact.record.kind].request:
                values = fact.record.__dict__
                self.requests.add(values.get("accept_len"), values.get("accept_rate"), None, None, False)
            return
        self.figures.add(fact)
        tput = load.gen_throughput if load is not None else None
        if self._marks is not None and load is not None and (b is None or tput != b.gen_throughput):
            self._loads, self._marks = self.loads, None  # from here on, load lines are kept as they come
        if b is not None:
            self.batches.add(b.accept_len, b.accept_rate, b.gen_throughput, b.running_req, b.steady)
            if self._marks is not None:
                self._marks.append(tput is not None)
        if load is not None:
            self.own_loads = self.own_loads and b is not None
            if tput is not None and self._marks is None:
                self._loads.append(tput)
            if b is None:
                self.load_batches.add(None, None, tput, load.running_req, load.steady)

    def fold(self, facts: Facts) -> None:
        """What :meth:`add` does with each stats line of ``facts`` (their facts as columns), in order."""
        tputs = self.figures.fold(facts)
        batch, load, n = facts.batch, facts.load, len(facts)
        cut = n  # (a load line without a batch: from it on, load lines are kept as they come)
        if self._marks is not None and not all(batch):
            cut = next((i for i, (b, ld) in enumerate(zip(batch, load, strict=True)) if ld and not b), n)
        self._lines(facts, tputs, 0, cut)
        if cut < n:
            self._loads, self._marks = self.loads, None
            self._lines(facts, tputs, cut, n)

    def _lines(self, facts: Facts, tputs: Sequence[float | None], lo: int, hi: int) -> None:
        """:meth:`fold` of the lines ``lo`` to ``hi``, where load lines are kept one way throughout."""
        if lo >= hi:
            return
        batch, load, rates = facts.batch[lo:hi], facts.load[lo:hi], tputs[lo:hi]
        if any(batch):
            picks = [facts.accept_len, facts.values["draft_accept_rate"], facts.gen_throughput, facts.running_req]
            every = all(batch)
            cols = [c[lo:hi] if every else list(compress(c[lo:hi], batch)) for c in [*picks, facts.steady]]
            self.batches.extend(*cols)
            if self._marks is not None:
                self._marks.extend(ld and t is not None for b, ld, t in zip(batch, load, rates, strict=True) if b)
        if not any(load):
            return
        self.own_loads = self.own_loads and all(b for b, ld in zip(batch, load, strict=True) if ld)
        if self._marks is None:
            self._loads.extend(logged(rates))  # (None where the line is no load line)
        alone = [ld and not b for b, ld in zip(batch, load, strict=True)]
        if any(alone):
            k = sum(alone)
            running = list(compress(facts.running_req[lo:hi], alone))
            steady = list(compress(facts.steady[lo:hi], alone))
            self.load_batches.extend([None] * k, [None] * k, list(compress(rates, alone)), running, steady)

    def __len__(self) -> int:
        """Batches to compare: the batches, else the finished requests, else the load lines."""
        return len(self.batches) or len(self.requests) or len(self.load_batches)

    @property
    def by_request(self) -> bool:
        """The side's batches are its finished requests (it has no per-batch line)."""
        return not len(self.batches) and bool(len(self.requests))

    def side(self, label: str, spec: str = "", extra: dict[str, Any] | None = None, *, copy: bool = True) -> Side:
        """The side to :func:`compare`, with the shared figures (less the batch count) and ``extra``.
        ``copy=False``: the side takes this sample's columns (no batch may be added after)."""
        figures: dict[str, Any] = self.figures.as_dict()
        figures.pop("batches")
        batches = self.batches if len(self.batches) else self.requests if self.by_request else self.load_batches
        return Side(
            label=label,
            batches=batches.copy() if copy else batches,
            spec=spec,
            loads=None if self.own_loads else self.loads.array(),
            figures={**figures, **(extra or {})},
            unit="finished requests" if self.by_request else "batches",
        )


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class Estimate(_Frozen):
    mean: float | None
    ci_low: float | None
    ci_high: float | None

    @property
    def ci_tuple(self) -> tuple[float | None, float | None]:
        return self.ci_low, self.ci_high


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
    unrecognized: int = 0
    """Lines of the side that start like a stats line but that no grammar reads (a format change)."""
    unit: str = Field(default="batches", exclude=True)
    """What ``batches`` counts (:attr:`Side.unit`), for the table."""


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


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits) + 0.0  # + 0.0: no "-0.0"


def summarize(side: Side, rng: random.Random, resamples: int) -> tuple[SideResult, list[list[float | None]]]:
    """Means, CIs and accept-length percentiles of one side, and its bootstrap replicates."""
    b = side.columns
    own = b.column("gen_throughput") if side.loads is None else None
    cols: list[Sequence[float] | None] = [b.column("accept_len"), b.column("accept_rate"), own]
    has = [c is not None and missing(c) < len(c) for c in cols]  # a column of None costs no resampling
    drawn = [c for c, h in zip(cols, has, strict=True) if h and c is not None]
    reps = iter(bootstrap_means(drawn, rng, resamples))
    replicates: list[list[float | None]] = [next(reps) if h else [None] * resamples for h in has]
    if side.loads:  # load lines of their own (vLLM): their mean, resampled in blocks of their own
        cols[2] = side.loads
        replicates[2] = bootstrap_means([side.loads], rng, resamples)[0]
    est = []
    for col, rep in zip(cols, replicates, strict=True):
        lo, hi = interval(rep)
        est.append({"mean": _r(_mean(col)), "ci_low": _r(lo), "ci_high": _r(hi)})
    series = Series(keep_values=True, values=Counter(present(cols[0] or ())))
    q = {f"p{p}": series.quantile(p / 100) for p in (10, 50, 90)}
    result = SideResult(
        label=side.label,
        spec=side.spec,
        batches=len(b),
        block_length=block_length(len(b)),
        accept_len=AcceptLenEstimate(**est[0], **q),
        accept_rate=Estimate(**est[1]),
        gen_throughput=Estimate(**est[2]),
        unit=side.unit,
        **side.figures,
    )
    return result, replicates


def throughput_interval(side: Side, seed: int, resamples: int) -> tuple[float | None, float | None]:
    """The 95 % interval of the side's mean throughput that :func:`summarize` gives with ``Random(seed)``."""
    return intervals(side, seed, resamples, ("gen_throughput",))[0]


def intervals(side: Side, seed: int, resamples: int, names: Sequence[str]) -> list[tuple[float | None, float | None]]:
    """The 95 % intervals of the side's means of ``names`` (``accept_len``, ``accept_rate``, ``gen_throughput``)
    that :func:`summarize` gives with ``Random(seed)``, those columns alone drawn: the blocks a replicate draws
    depend on the batch count only, not on the columns, and the load lines' (drawn after the batches' columns) on
    whether any batch column was drawn."""
    columns: dict[str, Sequence[float] | None] = {name: side.columns.column(name) for name in _NAMES}
    loads = side.loads is not None and "gen_throughput" in names
    if side.loads is not None:
        columns["gen_throughput"] = None  # the load lines' of their own instead
    logged = [name for name, c in columns.items() if c is not None and missing(c) < len(c)]
    drawn = [name for name in logged if name in names]
    if loads and side.loads and logged and not drawn:
        drawn = logged[:1]  # summarize drew the batches' blocks before the loads': so must this
    rng = random.Random(seed)
    got = dict(zip(drawn, bootstrap_means([columns[n] or () for n in drawn], rng, resamples), strict=True))
    if loads and side.loads:
        got["gen_throughput"] = bootstrap_means([side.loads], rng, resamples)[0]
    return [tuple(map(_r, interval(got[n]))) if n in got else (None, None) for n in names]  # type: ignore[misc]


_NAMES = ("accept_len", "accept_rate", "gen_throughput")
"""The columns :func:`summarize` draws, in its order."""


def _mean(column: Sequence[float] | None) -> float | None:
    """The mean of the logged values (the sum in column order, as over a list of them)."""
    if column is None:
        return None
    count = len(column) - missing(column)
    return sum(present(column)) / count if count else None


def matched_load(a: Sequence[Batch], b: Sequence[Batch]) -> Matched:
    """Throughput ratio B/A within shared ``#running-req`` buckets of steady batches
    (:func:`acceptmon.measure.speedup.weighted_speedup`: the doctor's break-even rule)."""
    sides = steady_buckets(Batches.of(a)), steady_buckets(Batches.of(b))
    keys = shared({k: len(v) for k, v in sides[0].items()}, {k: len(v) for k, v in sides[1].items()})
    rows = [_bucket(k, sides[0][k], sides[1][k]) for k in keys]
    na, nb = sum(r.a_batches for r in rows), sum(r.b_batches for r in rows)
    ratio = weighted_speedup([(r.b_batches, r.b_gen_throughput, r.a_batches, r.a_gen_throughput) for r in rows])
    counts = {"a_batches": na, "b_batches": nb, "buckets": rows}
    if ratio is None:
        note = f"too few steady batches at shared #running-req to compare: {len(rows)} buckets, {na} vs {nb} batches"
        return Matched.model_validate({"comparable": False, "gen_throughput_pct": None, "note": note, **counts})
    note = f"{len(rows)} shared #running-req buckets, {na} vs {nb} steady batches"
    pct = _r(100 * (ratio - 1), 2)
    return Matched.model_validate({"comparable": True, "gen_throughput_pct": pct, "note": note, **counts})


def _bucket(key: tuple[int, int], a: Sequence[float], b: Sequence[float]) -> Bucket:
    return Bucket(
        running_req=bucket_label(key),
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
    if min(a.batches, b.batches) < MIN_VERDICT_BATCHES:
        counts = f"A has {a.batches}, B {b.batches}; a verdict needs {MIN_VERDICT_BATCHES} a side"
        return "too few batches", f"too few batches to judge ({counts}); {lengths}"
    if pct is None or lo is None or hi is None:
        missing = "A" if not a.gen_throughput.mean else "B"
        return "no difference", f"no throughput change to measure: {missing} has no gen throughput above 0; {lengths}"
    verdict: Verdict = "better" if lo > 0 else "worse" if hi < 0 else "no difference"
    ci = f"CI {lo:+.1f} … {hi:+.1f} %{', includes 0' if verdict == 'no difference' else ''}"
    matched = c.matched.gen_throughput_pct
    at_load = f"; at matched #running-req {matched:+.1f} %" if matched is not None else ""
    return verdict, f"B {pct:+.1f} % tok/s ({ci}), {lengths}{at_load}"

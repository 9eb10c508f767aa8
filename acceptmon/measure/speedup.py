"""Does speculation pay? The speedup against a baseline without speculation, with a confidence interval. Pure.

doctor.md §3.3: in steady state at the same ``#running-req``, one verify step takes about
``B·L/G_spec`` and a plain step ``B/G_base``, so the speedup is ``S = G_spec/G_base``. It is measured
within shared ``#running-req`` buckets of steady batches (exact up to 16, then ranges) and weighted by
the batches of both sides: the one rule ``compare``'s matched load, the doctor's break-even and
``runs --baseline`` use. Its 95 % interval comes from compare's circular block bootstrap
(:func:`acceptmon.measure.bootstrap.bootstrap_means`), each side resampled on its own over all its
batches (a bucket's mean of a replicate is the mean of the steady batches it drew there), the shared
buckets and their weights held as observed (a bucket a replicate drew no steady batch of is left out of
that replicate, the others' weights renormalized). The verdict is the doctor's: ``loses`` below
``loses_below``, ``marginal`` below ``marginal_below``, else ``pays``.
"""

from __future__ import annotations

import math
import random
from array import array
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from typing import Literal, TypeAlias, TypeVar

from pydantic import BaseModel, ConfigDict

from acceptmon.errors import InputError
from acceptmon.measure.bootstrap import RESAMPLES, bootstrap_means, interval
from acceptmon.measure.columns import NONE_INT, Batches, missing, present
from acceptmon.parse.records import LaunchConfig

Key: TypeAlias = tuple[int, int]
K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
Verdict: TypeAlias = Literal["pays", "marginal", "loses"]

MIN_BUCKET_BATCHES = 2
"""A ``#running-req`` bucket is used when each side has this many steady batches in it."""
MIN_MATCHED_BATCHES = 10
"""Matched load needs this many steady batches per side in shared buckets."""
LOSES_BELOW = 1.0
MARGINAL_BELOW = 1.03
"""The doctor's defaults (its rule file may set others): below 1.0 speculation loses, below 1.03 it is marginal."""


def bucket_of(running_req: int) -> Key:
    """Exact up to 16, then ranges a quarter of the power of two below (16-19, 20-23, ..., 32-39)."""
    if running_req <= 16:
        return running_req, running_req
    step = (1 << (running_req.bit_length() - 1)) // 4
    lo = running_req - running_req % step
    return lo, lo + step - 1


def shared(spec: Mapping[K, int], base: Mapping[K, int]) -> list[K]:
    """The buckets both sides have at least :data:`MIN_BUCKET_BATCHES` steady batches in (sorted), from
    each side's count of batches per bucket."""
    both = spec.keys() & base.keys()
    return sorted(k for k in both if min(spec[k], base[k]) >= MIN_BUCKET_BATCHES)  # type: ignore[type-var]


def weighted_speedup(rows: Sequence[tuple[int, float, int, float]]) -> float | None:
    """S over shared buckets, each a (spec batches, spec mean tok/s, base batches, base mean tok/s): the
    per-bucket ratios weighted by the batches of both sides, over the buckets whose base made tokens.
    None below :data:`MIN_MATCHED_BATCHES` steady batches a side in them all."""
    if min(sum(r[0] for r in rows), sum(r[2] for r in rows)) < MIN_MATCHED_BATCHES:
        return None
    usable = [(ns + nb, ms / mb) for ns, ms, nb, mb in rows if mb > 0]
    weights = sum(w for w, _ in usable)
    return sum(w * ratio for w, ratio in usable) / weights if weights else None


UNMATCHED = "neither run logs its running requests, so no load to match: the ratio of their mean throughputs"


def unmatched_speedup(spec: float | None, base: float | None, logged: bool) -> float | None:
    """S where there is no load to match by: the ratio of the runs' mean throughputs, when neither run's lines
    log running requests (``logged`` False: llama.cpp's per-request decode speed), else None (match the load)."""
    return spec / base if not logged and spec and base else None


def verdict(speedup: float, loses_below: float = LOSES_BELOW, marginal_below: float = MARGINAL_BELOW) -> Verdict:
    s = round(speedup, 6)
    return "loses" if s < loses_below else "marginal" if s < marginal_below else "pays"


def steady_buckets(batches: Batches) -> dict[Key, array[float]]:
    """The throughput of each steady batch that logs a ``#running-req`` above 0, by bucket."""
    out: dict[Key, array[float]] = defaultdict(lambda: array("d"))
    for running, tput in batches.steady_loads():
        out[bucket_of(running)].append(tput)
    return dict(out)


def choose_baseline(model: str | None, plain: Sequence[T], model_of: Callable[[T], str | None]) -> list[T]:
    """The baseline of a run of ``model`` among runs without speculation: those of the same model, else all."""
    same = [p for p in plain if model_of(p) == model]
    return same or list(plain)


class BucketSpeedup(BaseModel):
    model_config = ConfigDict(frozen=True)

    running_req: str
    spec_batches: int
    base_batches: int
    spec_tok_s: float
    base_tok_s: float


class Speedup(BaseModel):
    """A run's speedup against its baseline: S with its 95 % interval, or why there is none."""

    model_config = ConfigDict(frozen=True)

    speedup: float | None
    ci_low: float | None
    ci_high: float | None
    spec_batches: int
    """Steady batches of the run in the shared buckets."""
    base_batches: int
    buckets: list[BucketSpeedup]
    note: str


def bucket_label(key: Key) -> str:
    lo, hi = key
    return str(lo) if lo == hi else f"{lo}-{hi}"


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits) + 0.0


class Reference:
    """A baseline's batches, its steady buckets, and (once a run is measured against it) the bootstrap replicates
    of every bucket's mean: drawn once for all the runs of a sweep. A bucket's replicates do not depend on the
    other buckets drawn with it (the blocks are drawn from the batch count alone), so they are the same as
    drawn for any run's shared buckets."""

    def __init__(self, batches: Batches, *, resamples: int = RESAMPLES, seed: int = 1) -> None:
        self.batches, self.resamples, self.seed = batches, resamples, seed
        self.buckets = steady_buckets(batches)
        self._replicates: dict[Key, list[float | None]] | None = None

    def replicates(self, keys: Sequence[Key]) -> list[list[float | None]]:
        if self._replicates is None:
            every = sorted(self.buckets)
            draws = bootstrap_means(_bucket_columns(self.batches, every), random.Random(self.seed), self.resamples)
            self._replicates = dict(zip(every, draws, strict=True))
        return [self._replicates[k] for k in keys]


def speedup(spec: Batches, base: Batches | Reference, *, resamples: int = RESAMPLES, seed: int = 0) -> Speedup:
    """S of ``spec`` against ``base`` over matched buckets, and its block-bootstrap interval (seeds
    ``seed`` and ``seed + 1``, as compare's sides; a :class:`Reference` keeps its own)."""
    ref = base if isinstance(base, Reference) else Reference(base, resamples=resamples, seed=seed + 1)
    sides = steady_buckets(spec), ref.buckets
    keys = shared({k: len(v) for k, v in sides[0].items()}, {k: len(v) for k, v in sides[1].items()})
    rows = [
        (len(sides[0][k]), _mean(sides[0][k]), len(sides[1][k]), _mean(sides[1][k])) for k in keys
    ]  # means as compare shows them
    buckets = [
        BucketSpeedup(
            running_req=bucket_label(k),
            spec_batches=ns,
            base_batches=nb,
            spec_tok_s=ms,
            base_tok_s=mb,
        )
        for k, (ns, ms, nb, mb) in zip(keys, rows, strict=True)
    ]
    ns, nb = sum(r[0] for r in rows), sum(r[2] for r in rows)
    point = weighted_speedup(rows)
    counts = f"{len(keys)} shared #running-req buckets, {ns} vs {nb} steady batches"
    if point is None:
        enough = min(ns, nb) >= MIN_MATCHED_BATCHES
        note = (
            f"the baseline made no tokens at the shared #running-req: {counts}"
            if enough
            else f"too few steady batches at shared #running-req to compare: {counts}"
        )
        return Speedup(
            speedup=None, ci_low=None, ci_high=None, spec_batches=ns, base_batches=nb, buckets=buckets, note=note
        )
    own = bootstrap_means(_bucket_columns(spec, keys), random.Random(seed), ref.resamples)
    weights = [ns_ + nb_ for ns_, _, nb_, _ in rows]
    theirs = ref.replicates(keys)
    replicates = [_replicate(own, theirs, weights, i) for i in range(ref.resamples)]
    lo, hi = interval(replicates)
    return Speedup(
        speedup=_r(point), ci_low=_r(lo), ci_high=_r(hi), spec_batches=ns, base_batches=nb, buckets=buckets, note=counts
    )


def unmatched(spec: Sequence[float], base: Sequence[float], *, resamples: int = RESAMPLES, seed: int = 0) -> Speedup:
    """S where neither run logs running requests (:data:`UNMATCHED`): the ratio of the mean throughputs of their
    lines (NaN: not logged), with the interval of compare's throughput change (each side bootstrapped on its own,
    seeds ``seed`` and ``seed + 1``)."""
    means = [_plain_mean(spec), _plain_mean(base)]
    counts = len(spec) - missing(spec), len(base) - missing(base)
    point = unmatched_speedup(means[0], means[1], False)
    if point is None:
        note = f"{UNMATCHED}, and a side has no throughput above 0"
        return Speedup(
            speedup=None,
            ci_low=None,
            ci_high=None,
            spec_batches=counts[0],
            base_batches=counts[1],
            buckets=[],
            note=note,
        )
    draws = [bootstrap_means([col], random.Random(seed + i), resamples)[0] for i, col in enumerate((spec, base))]
    lo, hi = interval([x / y if x is not None and y else None for x, y in zip(*draws, strict=True)])
    return Speedup(
        speedup=_r(point),
        ci_low=_r(lo),
        ci_high=_r(hi),
        spec_batches=counts[0],
        base_batches=counts[1],
        buckets=[],
        note=UNMATCHED,
    )


def running_logged(batches: Batches) -> bool:
    """Some batch logs its running requests (llama.cpp's lines log none)."""
    return any(r != NONE_INT for r in batches.running_req)


def _plain_mean(values: Sequence[float]) -> float | None:
    count = len(values) - missing(values)
    return sum(present(values)) / count if count else None


def _mean(values: Sequence[float]) -> float:
    return round(sum(values) / len(values), 4)


def _bucket_columns(batches: Batches, keys: Sequence[Key]) -> list[array[float]]:
    """Per shared bucket, a column over all the batches: the throughput where a steady batch is in it, else NaN."""
    index = {k: i for i, k in enumerate(keys)}
    columns = [array("d", [math.nan]) * len(batches) for _ in keys]
    for i, load in enumerate(batches.loads()):
        if load is not None:
            j = index.get(bucket_of(load[0]))
            if j is not None:
                columns[j][i] = load[1]
    return columns


def _replicate(
    spec: list[list[float | None]], base: list[list[float | None]], weights: list[int], i: int
) -> float | None:
    """One replicate's S: the buckets where both sides drew a steady batch and the base made tokens."""
    total = weight = 0.0
    for s, b, w in zip(spec, base, weights, strict=True):
        ms, mb = s[i], b[i]
        if ms is not None and mb is not None and mb > 0:
            total += w * ms / mb
            weight += w
    return total / weight if weight else None


def speculates(launch: LaunchConfig | None, spec_lines: int) -> bool:
    """Speculation is on: by the launch line, or (no launch line) by accept lengths in the run's lines."""
    return spec_lines > 0 if launch is None else bool(launch.method)


def baseline_runs(ref: str, number: int | None, runs: Mapping[int, bool]) -> list[int]:
    """The run numbers a baseline reference ``FILE`` or ``FILE#N`` names, from its runs with stats lines (by
    number: whether it speculates): run ``N``, or every run without speculation. An unusable one: one line."""
    if number is not None:
        if number not in runs:
            there = ", ".join(map(str, sorted(runs))) or "none with stats lines"
            raise InputError(ref, f"no run {number} with stats lines (runs there: {there})")
        if runs[number]:
            raise InputError(ref, f"run {number} speculates; a baseline is a run with speculation off")
        return [number]
    plain = [n for n, spec in sorted(runs.items()) if not spec]
    if not plain:
        raise InputError(ref, "no run without speculation to use as a baseline")
    return plain

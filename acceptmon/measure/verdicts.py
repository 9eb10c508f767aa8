"""Which run of a sweep should I run? Each run's speedup against a baseline, a verdict, and the best. Pure.

What ``acceptmon runs --baseline`` adds to each run's summary: ``speedup`` S with its 95 % interval
(:func:`acceptmon.measure.speedup.speedup`, the doctor's break-even rule), the doctor's ``verdict``,
and, over the runs listed, ``best`` (the highest mean throughput per rank) and ``tied_with_best`` (a run
whose throughput interval, compare's block bootstrap with seed 0, overlaps the best's). A speculative
run's baseline is the runs without speculation offered (:func:`~acceptmon.measure.speedup.choose_baseline`:
those of its model, else all), their batches joined in order.
"""

from __future__ import annotations

from array import array
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain

from acceptmon.display import number_ranges
from acceptmon.measure.columns import Batches
from acceptmon.measure.compare import RESAMPLES, Sample, Side, throughput_interval
from acceptmon.measure.speedup import (
    LOSES_BELOW,
    MARGINAL_BELOW,
    Reference,
    Verdict,
    choose_baseline,
    running_logged,
    speedup,
    unmatched,
    verdict,
)
from acceptmon.measure.summary import RunSummary

__all__ = ["Baseline", "SweepRun", "sweep_verdicts"]


class SweepRun(RunSummary):
    """A run's summary with its speedup against the baseline and its place in the sweep."""

    baseline: str | None = None
    """What the speedup is measured against (the baseline runs); None for a run without speculation."""
    speedup: float | None = None
    """S = G_spec / G_base over matched ``#running-req`` buckets of steady batches."""
    speedup_ci_low: float | None = None
    speedup_ci_high: float | None = None
    verdict: Verdict | None = None
    speedup_note: str = ""
    """The shared buckets and batches S is measured over, or why there is no S."""
    gen_throughput_ci_low: float | None = None
    """The 95 % interval of the mean throughput per rank (``gen_throughput_per_rank``)."""
    gen_throughput_ci_high: float | None = None
    best: bool = False
    """The run of the highest mean throughput per rank among those listed."""
    tied_with_best: bool = False
    """Not the best, but its throughput interval overlaps the best's."""


@dataclass(frozen=True)
class Baseline:
    """A run without speculation that may be a baseline."""

    file: str
    """The file's name, as reports give it."""
    run: int
    model: str | None
    side: Side
    """Its batches (its load lines where it has no batch: vLLM, llama.cpp) and throughput."""


def sweep_verdicts(
    runs: Sequence[tuple[RunSummary, Sample | None, bool]],
    baselines: Sequence[Baseline],
    *,
    thresholds: tuple[float, float] = (LOSES_BELOW, MARGINAL_BELOW),
    resamples: int = RESAMPLES,
    seed: int = 0,
) -> list[SweepRun]:
    """Each run (its summary, its batches, whether it speculates) with its speedup and place in the sweep."""
    references: dict[tuple[int, ...], tuple[str, Reference]] = {}
    out = []
    for summary, sample, speculative in runs:
        fields: dict[str, object] = {}
        if sample is not None and len(sample):
            side = sample.side("", copy=False)
            lo, hi = throughput_interval(side, seed, resamples)
            fields |= {"gen_throughput_ci_low": lo, "gen_throughput_ci_high": hi}
            chosen = choose_baseline(summary.model, baselines, lambda b: b.model) if speculative else []
            if speculative and not chosen:
                fields["speedup_note"] = "no run without speculation to measure the speedup against"
            elif chosen:
                key = tuple(map(id, chosen))
                if key not in references:  # one reference (its replicates drawn once) per set of baseline runs
                    joined = Batches.joined([c.side.columns for c in chosen])
                    references[key] = _label(chosen), Reference(joined, resamples=resamples, seed=seed + 1)
                label, ref = references[key]
                s = speedup(side.columns, ref, seed=seed)
                logged = running_logged(side.columns), running_logged(ref.batches)
                if s.speedup is None and not any(logged):
                    base = array("d", chain.from_iterable(_throughput(c.side) for c in chosen))
                    s = unmatched(_throughput(side), base, resamples=resamples, seed=seed)
                elif s.speedup is None and logged[0] != logged[1]:
                    who = "the baseline" if logged[0] else "this run"
                    s = s.model_copy(update={"note": f"{who} logs no running requests: no load to match by"})
                fields |= {"baseline": label, "speedup_note": s.note}
                if s.speedup is not None:
                    fields |= {
                        "speedup": s.speedup,
                        "speedup_ci_low": s.ci_low,
                        "speedup_ci_high": s.ci_high,
                        "verdict": verdict(s.speedup, *thresholds),
                    }
        out.append(SweepRun(**summary.model_dump(), **fields))
    return _ranked(out)


def _throughput(side: Side) -> Sequence[float]:
    """The side's throughput estimate's values: its load lines' rates, else its batches' (NaN: not logged)."""
    return side.loads if side.loads is not None else side.columns.column("gen_throughput")


def _label(chosen: Sequence[Baseline]) -> str:
    """``base.log#1-3, other.log#2``: the baseline runs by file."""
    files: dict[str, list[int]] = {}
    for c in chosen:
        files.setdefault(c.file, []).append(c.run)
    return ", ".join(f"{name}#{number_ranges(sorted(runs))}" for name, runs in files.items())


def _ranked(runs: list[SweepRun]) -> list[SweepRun]:
    """``best`` and ``tied_with_best`` marked."""
    rated = [r for r in runs if r.gen_throughput_per_rank is not None]
    if not rated:
        return runs
    top = max(rated, key=lambda r: r.gen_throughput_per_rank or 0.0)
    lo, hi = top.gen_throughput_ci_low, top.gen_throughput_ci_high

    def tied(r: SweepRun) -> bool:
        if r is top or None in (lo, hi, r.gen_throughput_ci_low, r.gen_throughput_ci_high):
            return False
        return r.gen_throughput_ci_low <= hi and lo <= r.gen_throughput_ci_high  # type: ignore[operator]

    return [r.model_copy(update={"best": r is top, "tied_with_best": tied(r)}) for r in runs]

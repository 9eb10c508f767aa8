"""The doctor's depth recommendation: what the runs of a sweep give :mod:`acceptmon.measure.depth`.

A sweep is the speculative chain-draft runs (topk 1) of one file with the same model, method and
draft model; at a depth run more than once, the run with the highest mean accept length stands for
it (the others are listed as left out: same settings, less accepted, something the logs do not show
differed). Per run, :class:`DepthInputs` keeps what the engine does not: each batch's accept length
and throughput (for compare's block-bootstrap CIs), vLLM's per-position rates weighted by drafts, and
SGLang's per-request acceptance histograms. Step costs are the break-even's (``R`` over matched
``#running-req`` buckets, :mod:`acceptmon.diagnose.breakeven`).
"""

from __future__ import annotations

import math
from array import array
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from itertools import compress
from typing import Any, cast

from acceptmon.diagnose.breakeven import Buckets, matched
from acceptmon.diagnose.engine import Doctor, RunReport
from acceptmon.diagnose.state import RunState
from acceptmon.measure.columns import NONE_INT, Batches, extend_floats
from acceptmon.measure.compare import RESAMPLES, Side, intervals
from acceptmon.measure.depth import LeftOut, Point, Recommendation, plan, position_rows
from acceptmon.measure.facts import Facts
from acceptmon.measure.normalize import Fact
from acceptmon.measure.plain import present
from acceptmon.measure.positions import Positions, from_lengths
from acceptmon.measure.tokens import counters, width
from acceptmon.parse.fast import native
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import Record

CI_TEXT = "95 % circular block bootstrap over the run's batches, as compare gives its side A (seed 0)"
_COUNTS = ("num_spec_tokens", "spec_num_steps", "drafted_tokens")
PARAMETER = {"sglang": "speculative_num_steps", "vllm": "num_speculative_tokens", "llamacpp": "--draft-max"}


@dataclass
class _RunInputs:
    server: str = "sglang"
    accept: array[float] = field(default_factory=lambda: array("d"))
    batch_tok_s: array[float] = field(default_factory=lambda: array("d"))
    loads: array[float] = field(default_factory=lambda: array("d"))
    own_loads: bool = True
    rates: Positions = field(default_factory=Positions)
    """vLLM's per-position rates, weighted by each line's drafts (llama.cpp's per request, by its verify steps)."""
    histograms: Positions = field(default_factory=Positions)
    """SGLang's per-request histograms."""

    def side(self) -> Side:
        """The run as compare's side, for its block-bootstrap CIs: its columns as they are (NaN: not logged, as
        :class:`Batches` keeps them), not a :class:`Batch` per batch to turn back into columns."""
        n = len(self.accept)
        columns = Batches()
        columns.accept_len, columns.gen_throughput = self.accept, self.batch_tok_s
        columns.accept_rate = array("d", [math.nan]) * n
        columns.running_req = array("q", [NONE_INT]) * n
        columns.steady = bytearray(n)
        return Side(label="", batches=columns, loads=None if self.own_loads else self.loads)


def _drafts_each(
    rates: Sequence[Any],
    cumulative: Sequence[Any],
    batch: Sequence[bool],
    tokens: Sequence[Any],
    steps: Sequence[Any],
    drafted: Sequence[Any],
) -> tuple[list[Any], list[float]]:
    """The lines whose per-position rates are weighed (batches with rates, counting per interval, of a known width
    ``k``: :func:`~acceptmon.measure.tokens.width`) and their drafts, ``(drafted or 0) / k``; the compiled module's
    ``drafts_each`` where it is built and every value is of the lane's types."""
    module = native.load()
    got = None if module is None else module.drafts_each(rates, cumulative, batch, tokens, drafted)
    if got is not None:
        return cast("tuple[list[Any], list[float]]", got)
    kept, drafts = [], []
    for row, since, is_batch, count, step, drafts_of in zip(
        rates, cumulative, batch, tokens, steps, drafted, strict=True
    ):
        k = width(count, row, step)
        if row and is_batch and not since and k:
            kept.append(row)
            drafts.append((drafts_of or 0) / k)
    return kept, drafts


class DepthInputs:
    """Per run, what the depth prediction reads and the engine does not keep."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, int], _RunInputs] = {}
        self.request_lines: dict[tuple[str, str, int], int] = {}
        """Finished-request lines by (file, source, run), read or not by a rule."""
        self._last: tuple[str, int, _RunInputs] | None = None
        """The run :meth:`_of` gave last: the next record is most likely of the same run."""

    def _of(self, r: Record) -> _RunInputs:
        file, number = r.file, r.__dict__.get("run", 0)  # a kind without a run: no pydantic attribute fallback
        last = self._last
        if last is not None and last[1] == number and last[0] == file:  # most records follow one of their run
            return last[2]
        got = self.runs.get((file, number))
        if got is None:
            got = self.runs[file, number] = _RunInputs(server=r.server)
        self._last = (file, number, got)
        return got

    def take(self, facts: Iterable[Fact]) -> None:
        """Normalized facts, as the engine takes them."""
        for fact in facts:
            b, load = fact.batch, fact.load
            if b is None and load is None:
                self._positions(fact.record)
                continue
            inputs = self._of(fact.record)
            if b is not None:
                inputs.accept.append(math.nan if b.accept_len is None else b.accept_len)
                inputs.batch_tok_s.append(math.nan if b.gen_throughput is None else b.gen_throughput)
                values = fact.record.__dict__
                rates = values.get("position_accept_rates")
                if rates and not values.get("cumulative"):
                    _, drafted, _, k = counters(fact.record)  # type: ignore[arg-type]  # a spec line: it has rates
                    if k:
                        inputs.rates.add_rates(rates, drafted / k)
            if load is not None:
                inputs.own_loads = inputs.own_loads and b is not None
                if load.gen_throughput is not None:
                    inputs.loads.append(load.gen_throughput)

    def fold(self, facts: Facts) -> None:
        """Consecutive stats lines of one run, normalized, as columns (as :meth:`take` takes their facts)."""
        file, _, number = facts.key
        got = self.runs.get((file, number))
        if got is None:
            got = self.runs[file, number] = _RunInputs(server=facts.values["server"][0])
        self._last = None
        batch, load, tput = facts.batch, facts.load, facts.gen_throughput
        every = all(batch)
        lengths = facts.accept_len if every else list(compress(facts.accept_len, batch))
        tputs = tput if every else list(compress(tput, batch))
        extend_floats(got.accept, lengths)
        extend_floats(got.batch_tok_s, tputs)
        rates = facts.values["position_accept_rates"]
        if any(rates):
            since = facts.values["cumulative"]
            got.rates.add_each(*_drafts_each(rates, since, batch, *map(facts.values.__getitem__, _COUNTS)))
        if any(load):
            got.own_loads = got.own_loads and all(compress(batch, load))
            got.loads.extend(present(tput if all(load) else list(compress(tput, load))))

    def _positions(self, r: Record) -> None:
        """A request's per-position rates on a line of their own (``positions`` role), weighted by its verify steps."""
        if KINDS[r.kind].positions:
            rates, steps = getattr(r, "position_accept_rates", None), getattr(r, "verify_ct", None)
            if rates and steps:
                self._of(r).rates.add_rates(rates, steps)

    def requests(self, records: Iterable[Record]) -> None:
        """Finished-request records: their acceptance histograms."""
        for r in records:
            histogram = getattr(r, "accept_histogram", None)
            if histogram and len(histogram) > 1 and sum(histogram) > 0:
                self._of(r).histograms.add_histogram(histogram)


def _steady_tok_s(buckets: Buckets) -> float | None:
    lines = sum(b.lines for b in buckets.values())
    return sum(b.throughput for b in buckets.values()) / lines if lines else None


def _sweeps(doctor: Doctor) -> list[list[RunState]]:
    groups: dict[tuple[Any, ...], list[RunState]] = {}
    for s in doctor.states():
        c = s.launch
        if c is None or not s.speculative or not s.spec_lines or not s.steps or (c.spec_eagle_topk or 1) > 1:
            continue
        groups.setdefault((s.file, c.model_path, s.algorithm, c.spec_draft_model_path), []).append(s)
    return list(groups.values())


def _summary(inputs: _RunInputs | None) -> tuple[tuple[float | None, float | None], tuple[float | None, float | None]]:
    if inputs is None:
        return (None, None), (None, None)
    accept, tok = intervals(inputs.side(), 0, RESAMPLES, ("accept_len", "gen_throughput"))  # summarize's, Random(0)
    return accept, tok


def recommend(doctor: Doctor, inputs: DepthInputs, reports: Sequence[RunReport]) -> list[RunReport]:
    """Each speculative chain run's report with its :class:`Recommendation` (the rest as they are)."""
    found: dict[tuple[str, int], Recommendation] = {}
    for sweep in _sweeps(doctor):
        found.update(_sweep(doctor, inputs, sweep))
    return [r.model_copy(update={"recommendation": found.get((r.file, r.run))}) for r in reports]


def _sweep(doctor: Doctor, inputs: DepthInputs, sweep: list[RunState]) -> dict[tuple[str, int], Recommendation]:
    best, left = _stand_ins(sweep)
    chosen = sorted(best.values(), key=lambda s: s.steps or 0)
    base, label = doctor._baseline(chosen[0])  # the break-even's baseline: the same runs, the same buckets
    has_baseline = base is not None
    if base is None:
        ref = max(chosen, key=lambda s: sum(b.lines for b in s.buckets.values()))
        base, label = ref.buckets, f"run {ref.run} of the sweep"
    points = [_point(s, inputs.runs.get((s.file, s.run)), base, _unmatched(doctor, s, has_baseline)) for s in chosen]
    server = next((inputs.runs[s.file, s.run].server for s in chosen if (s.file, s.run) in inputs.runs), "sglang")
    parameter = PARAMETER.get(server, "speculative_num_steps")
    ref_tok_s = _steady_tok_s(base)
    unmatched = ref_tok_s is None and has_baseline and any(p.step_cost for p in points)
    if unmatched:  # no steady buckets, and S the ratio of mean throughputs: the baseline's mean is the reference
        ref_tok_s = doctor._plain_load(chosen[0])[0]
    result = plan(
        points, reference_tok_s=ref_tok_s, baseline=has_baseline, parameter=parameter, loses_below=doctor.thresholds[0]
    )
    shared = result.model_dump(include={"depth", "predicted_accept_len", "predicted_tok_s", "predicted_speedup"})
    shared |= {"basis": result.basis, "advice": result.advice, "tied": result.tied}
    shared |= {"depths": result.depths, "checks": result.checks, "left_out": left, "ci": CI_TEXT}
    shared |= {"parameter": parameter, "reference": label, "baseline": has_baseline, "reference_unmatched": unmatched}
    shared |= {
        "reference_tok_s": None if ref_tok_s is None else round(ref_tok_s, 2),
        "sweep_runs": [p.run for p in points],
    }
    out = {}
    for s in sweep:
        own = next((p.positions for p in points if p.run == s.run and p.positions is not None), None)
        if own is not None:
            marginals, source = own.marginals(), "this run's " + _own_source(inputs, s)
        elif best[s.steps or 0] is s:
            marginals, source = result.marginals, _positions_from(points)
        else:  # left out: its own accept length, one conditional acceptance over its positions
            marginals = from_lengths([(s.steps or 0, s.figures.accept_len_mean or 1.0)])
            source = "this run's accept length alone, one conditional acceptance over its positions"
        positions = position_rows(marginals, s.steps or 0)
        out[s.file, s.run] = Recommendation(**shared, positions_from=source, positions=positions)
    return out


def _stand_ins(sweep: list[RunState]) -> tuple[dict[int, RunState], list[LeftOut]]:
    """The run standing for each depth (the highest mean accept length), and the runs left out."""
    best: dict[int, RunState] = {}
    for s in sweep:
        have = best.get(s.steps or 0)
        if have is None or (s.figures.accept_len_mean or 0) > (have.figures.accept_len_mean or 0):
            best[s.steps or 0] = s
    left = []
    for s in sweep:
        stand = best[s.steps or 0]
        if stand is not s:
            there, here = stand.figures.accept_len_mean or 0, s.figures.accept_len_mean or 0
            reason = f"depth {s.steps} stands for run {stand.run}, accept len {there:.2f} against {here:.2f} here"
            left.append(LeftOut(run=s.run, reason=reason))
    return best, left


def _unmatched(doctor: Doctor, s: RunState, has_baseline: bool) -> float | None:
    """The break-even's S where it has no load to match by (neither run logs running requests)."""
    be = doctor.break_even(s) if has_baseline else None
    return be.speedup if be is not None and be.speedup is not None and not be.buckets else None


def _point(s: RunState, inputs: _RunInputs | None, base: Buckets, unmatched: float | None = None) -> Point:
    _, speedup, _ = matched(s.buckets, base)  # the break-even's S: a depth run is predicted at it
    speedup = speedup if speedup is not None else unmatched
    length = s.figures.accept_len_mean
    cost = length / speedup if speedup and length else None
    accept_ci, tok_ci = _summary(inputs)
    positions = None
    if inputs is not None:
        positions = inputs.rates if inputs.rates.depth else inputs.histograms if inputs.histograms.depth else None
    return Point(
        run=s.run,
        depth=s.steps or 0,
        accept_len=s.figures.accept_len_mean or 1.0,
        accept_len_ci=accept_ci,
        tok_s=s.figures.gen_throughput_per_rank,
        tok_s_ci=tok_ci,
        step_cost=cost,
        positions=positions,
    )


def _own_source(inputs: DepthInputs, s: RunState) -> str:
    got = inputs.runs.get((s.file, s.run))
    return "per-position rates" if got is not None and got.rates.depth else "request acceptance histograms"


def _positions_from(points: Sequence[Point]) -> str:
    if any(p.positions is not None for p in points):
        runs = ", ".join(str(p.run) for p in points if p.positions is not None)
        return f"per-position figures of run {runs}"
    depths = ", ".join(f"{p.depth} (run {p.run})" for p in points)
    return f"the sweep's accept lengths at depths {depths}"

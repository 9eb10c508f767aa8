"""Per-position acceptance and a recommended draft depth for a sweep of runs. Pure: numbers in, numbers out.

The accept length of each depth comes from :mod:`acceptmon.measure.positions`.

Step cost: ``R = L/S`` of each run of the sweep, one verify step in plain steps, with ``S`` the doctor's
break-even speedup ``G_spec/G_ref`` over matched ``#running-req`` buckets (without a baseline, against a
reference run of the sweep, so ``R`` is in its units); so a depth run is predicted at its measured
``S``. Between depths run ``R`` is interpolated linearly, beyond them extended with the least-squares
slope of the runs; a speculative step has a fixed overhead a plain one lacks, so the baseline's
``R(0) = 1`` gives the slope only where a single depth was run. A depth that was run is given at its
own mean accept length (``measured``); the curve predicts the others. Predicted speedup ``S(d) = L(d)/R(d)``,
predicted throughput ``S(d) · G_ref``. The recommendation is the depth of the highest predicted
throughput, or "do not speculate" when, against a baseline, no depth reaches ``loses_below``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from itertools import pairwise
from typing import Literal, TypeAlias

from pydantic import BaseModel, ConfigDict, Field

from acceptmon.measure.positions import Positions, accept_length, conditionals, extend, from_lengths, pooled

Basis: TypeAlias = Literal["measured", "predicted", "extrapolated"]
EXTRAPOLATE = 3
"""Depths predicted past the deepest one a run logged."""


def step_cost(points: Sequence[tuple[int, float]], depth: int) -> float | None:
    """R at ``depth``: linear between the depths measured, past them along the least-squares slope."""
    pts = sorted(dict(points).items())
    if not pts:
        return None
    if len(pts) == 1:
        return pts[0][1] if pts[0][0] == depth else None
    for (d0, r0), (d1, r1) in pairwise(pts):
        if d0 <= depth <= d1:
            return r0 + (r1 - r0) * (depth - d0) / (d1 - d0)
    mx = sum(d for d, _ in pts) / len(pts)
    my = sum(r for _, r in pts) / len(pts)
    slope = sum((d - mx) * (r - my) for d, r in pts) / sum((d - mx) ** 2 for d, _ in pts)
    d_end, r_end = pts[0] if depth < pts[0][0] else pts[-1]
    return r_end + slope * (depth - d_end)


@dataclass(frozen=True)
class Point:
    """One run of a sweep, at its depth."""

    run: int
    depth: int
    accept_len: float
    accept_len_ci: tuple[float | None, float | None] = (None, None)
    tok_s: float | None = None
    tok_s_ci: tuple[float | None, float | None] = (None, None)
    step_cost: float | None = None
    """R: one verify step in plain steps (with a baseline), else in the reference run's units."""
    positions: Positions | None = None


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True)


class DepthRow(_Frozen):
    depth: int
    predicted_accept_len: float
    predicted_tok_s: float | None
    predicted_speedup: float | None
    """Against the reference: the baseline, or (without one) the reference run of the sweep."""
    basis: Basis
    run: int | None = None
    """The run at this depth, where one was: its measured figures follow."""
    measured_accept_len: float | None = None
    measured_accept_len_ci_low: float | None = None
    measured_accept_len_ci_high: float | None = None
    measured_tok_s: float | None = None
    measured_tok_s_ci_low: float | None = None
    measured_tok_s_ci_high: float | None = None


class Check(_Frozen):
    """A run's depth predicted from the sweep's other runs, against what the run measured (95 % CI)."""

    run: int
    depth: int
    basis: Basis
    predicted_accept_len: float
    measured_accept_len: float
    accept_len_ci_low: float | None
    accept_len_ci_high: float | None
    accept_len_error: float
    accept_len_within_ci: bool | None
    predicted_tok_s: float | None
    measured_tok_s: float | None
    tok_s_ci_low: float | None
    tok_s_ci_high: float | None
    tok_s_error_pct: float | None
    tok_s_within_ci: bool | None


class Plan(_Frozen):
    """The sweep's per-position acceptance, per-depth predictions and recommended depth."""

    depth: int | None
    """Recommended depth; None: do not speculate, or no throughput to predict."""
    predicted_accept_len: float | None
    predicted_tok_s: float | None
    predicted_speedup: float | None
    basis: Basis | None
    advice: str
    marginals: list[float]
    """``a_i`` of every position predicted (known ones first, then extrapolated)."""
    conditionals: list[float]
    known_positions: int
    """Positions ``1 .. known_positions`` come from the logs; the rest are extrapolated."""
    tied: list[int]
    """Other depths run whose measured throughput CI overlaps the recommended depth's (measured) one."""
    depths: list[DepthRow]
    checks: list[Check]


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits) + 0.0


def curve(points: Sequence[Point]) -> tuple[list[float], int]:
    """The sweep's marginals and how many positions are known: from per-position figures where any run has
    them, else from the accept lengths at the depths run."""
    with_positions = [p.positions for p in points if p.positions is not None and p.positions.depth]
    if with_positions:
        marginals = pooled(with_positions)
    else:
        marginals = from_lengths([(p.depth, p.accept_len) for p in points])
    return marginals, len(marginals)


def plan(
    points: Sequence[Point],
    *,
    reference_tok_s: float | None,
    baseline: bool,
    parameter: str = "speculative_num_steps",
    loses_below: float = 1.0,
    extra: int = EXTRAPOLATE,
    checks: bool = True,
) -> Plan:
    """Predictions for depths 1 .. deepest known + ``extra``, the recommendation, and leave-one-out checks."""
    marginals, known = curve(points)
    by_depth = {p.depth: p for p in points}
    deepest = max([known, *(p.depth for p in points)])
    marginals = extend(marginals, deepest + extra)
    costs = [(p.depth, p.step_cost) for p in points if p.step_cost is not None]
    if baseline and len(costs) == 1:
        costs.append((0, 1.0))  # one depth run: its step cost and the plain step give the slope
    rows = []
    for d in range(1, deepest + extra + 1):
        length = by_depth[d].accept_len if d in by_depth else accept_length(marginals, d)  # a depth run: as measured
        cost = step_cost(costs, d)
        speedup = length / cost if cost else None
        tok_s = speedup * reference_tok_s if speedup is not None and reference_tok_s is not None else None
        basis: Basis = "measured" if d in by_depth else "predicted" if d <= deepest else "extrapolated"
        p = by_depth.get(d)
        rows.append(
            DepthRow(
                depth=d,
                predicted_accept_len=round(length, 4),
                predicted_tok_s=_r(tok_s, 2),
                predicted_speedup=_r(speedup),
                basis=basis,
                run=p.run if p else None,
                measured_accept_len=_r(p.accept_len) if p else None,
                measured_accept_len_ci_low=_r(p.accept_len_ci[0]) if p else None,
                measured_accept_len_ci_high=_r(p.accept_len_ci[1]) if p else None,
                measured_tok_s=_r(p.tok_s, 2) if p else None,
                measured_tok_s_ci_low=_r(p.tok_s_ci[0], 2) if p else None,
                measured_tok_s_ci_high=_r(p.tok_s_ci[1], 2) if p else None,
            )
        )
    best = max(
        (r for r in rows if r.predicted_speedup is not None), key=lambda r: r.predicted_speedup or 0.0, default=None
    )
    loo = [c for p in points if (c := _check(p, points, reference_tok_s, baseline, parameter)) is not None]
    comparable = sum(r.predicted_speedup is not None for r in rows)
    depth, advice = _advice(best if baseline or comparable > 1 else None, baseline, loses_below, parameter)
    chosen = best if depth is not None else None
    return Plan(
        depth=depth,
        predicted_accept_len=chosen.predicted_accept_len if chosen else None,
        predicted_tok_s=chosen.predicted_tok_s if chosen else None,
        predicted_speedup=chosen.predicted_speedup if chosen else None,
        basis=chosen.basis if chosen else None,
        advice=advice,
        marginals=[round(a, 4) for a in marginals],
        conditionals=[round(c, 4) for c in conditionals(marginals)],
        known_positions=known,
        tied=_tied(chosen, rows),
        depths=rows,
        checks=loo if checks else [],
    )


def _tied(chosen: DepthRow | None, rows: Sequence[DepthRow]) -> list[int]:
    if chosen is None or chosen.measured_tok_s_ci_low is None or chosen.measured_tok_s_ci_high is None:
        return []
    lo, hi = chosen.measured_tok_s_ci_low, chosen.measured_tok_s_ci_high
    return [
        r.depth
        for r in rows
        if r is not chosen
        and r.measured_tok_s_ci_low is not None
        and r.measured_tok_s_ci_high is not None
        and r.measured_tok_s_ci_low <= hi
        and lo <= r.measured_tok_s_ci_high
    ]


def _advice(best: DepthRow | None, baseline: bool, loses_below: float, parameter: str) -> tuple[int | None, str]:
    if best is None or best.predicted_speedup is None:
        return None, (
            "no depth to recommend: one depth run and no baseline, so no step cost for other depths "
            "(give --baseline FILE, or run another depth)"
        )
    if baseline and round(best.predicted_speedup, 6) < loses_below:
        return None, (
            f"do not speculate: no depth is predicted to beat the baseline "
            f"(best {parameter} {best.depth}, S = {best.predicted_speedup:.2f})"
        )
    return best.depth, f"{parameter} {best.depth}"


def _check(
    left: Point, points: Sequence[Point], reference_tok_s: float | None, baseline: bool, parameter: str
) -> Check | None:
    """``left``'s depth predicted by the sweep without it."""
    others = [p for p in points if p is not left]
    if not others:
        return None
    rest = plan(others, reference_tok_s=reference_tok_s, baseline=baseline, parameter=parameter, checks=False)
    row = next((r for r in rest.depths if r.depth == left.depth), None)
    if row is None:
        return None
    lo, hi = left.accept_len_ci
    tlo, thi = left.tok_s_ci
    tok = row.predicted_tok_s
    return Check(
        run=left.run,
        depth=left.depth,
        basis="extrapolated" if left.depth > max(p.depth for p in others) else "predicted",
        predicted_accept_len=row.predicted_accept_len,
        measured_accept_len=round(left.accept_len, 4),
        accept_len_ci_low=_r(lo),
        accept_len_ci_high=_r(hi),
        accept_len_error=round(row.predicted_accept_len - left.accept_len, 4) + 0.0,
        accept_len_within_ci=None if lo is None or hi is None else lo <= row.predicted_accept_len <= hi,
        predicted_tok_s=tok,
        measured_tok_s=_r(left.tok_s, 2),
        tok_s_ci_low=_r(tlo, 2),
        tok_s_ci_high=_r(thi, 2),
        tok_s_error_pct=_r(100 * (tok / left.tok_s - 1), 2) if tok is not None and left.tok_s else None,
        tok_s_within_ci=None if tok is None or tlo is None or thi is None else tlo <= tok <= thi,
    )


class PositionRow(_Frozen):
    position: int
    conditional: float
    """Acceptance of this position given every earlier one was accepted."""
    reached: float
    """Share of verify steps whose drafts up to this position were all accepted."""


class LeftOut(_Frozen):
    run: int
    reason: str


class Recommendation(_Frozen):
    """A run's per-position acceptance and its sweep's recommended depth, with what each figure rests on."""

    parameter: str
    """``speculative_num_steps`` (SGLang) or ``num_speculative_tokens`` (vLLM)."""
    depth: int | None
    predicted_accept_len: float | None
    predicted_tok_s: float | None
    predicted_speedup: float | None
    basis: Basis | None
    advice: str
    tied: list[int]
    """Other depths run whose measured throughput CI overlaps the recommended depth's."""
    reference: str | None
    """What the speedups are against: the baseline, or the sweep's reference run."""
    baseline: bool
    """The reference is a run without speculation (else speedups are against a run of the sweep)."""
    reference_tok_s: float | None
    """The reference's mean steady throughput per rank: predicted tok/s = speedup x this."""
    reference_unmatched: bool = Field(default=False, exclude=True)
    """``reference_tok_s`` is the mean over all the reference's lines: its lines log no running requests."""
    sweep_runs: list[int]
    left_out: list[LeftOut]
    positions_from: str
    positions: list[PositionRow]
    """This run's draft positions, up to its depth."""
    depths: list[DepthRow]
    checks: list[Check]
    ci: str
    """How the measured CIs were made."""


def position_rows(marginals: Sequence[float], depth: int) -> list[PositionRow]:
    cond = conditionals(marginals)
    return [
        PositionRow(position=i + 1, conditional=round(c, 4), reached=round(a, 4))
        for i, (c, a) in enumerate(zip(cond[:depth], marginals[:depth], strict=True))
    ]

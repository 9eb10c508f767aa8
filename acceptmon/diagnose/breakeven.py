"""Does speculation pay? Speedup against a baseline, or the break-even numbers without one. Pure.

doctor.md §3.3: in steady state at the same ``#running-req``, one verify step takes about
``B·L/G_spec`` and a plain step ``B/G_base``, so the speedup is ``S = G_spec/G_base`` and the
step-cost ratio ``R = L·G_base/G_spec`` (break-even accept length ``L* = R``). Buckets and the
steady rule are those of ``acceptmon compare``; the per-bucket ratios are weighted by the lines
of both sides, as there. Without a baseline: "speculation pays only if the no-spec server made
less than G tok/s at B requests", and the verify efficiency ``L/N`` next to ``B·N`` (§3.4).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TypeAlias

from pydantic import BaseModel, ConfigDict

from acceptmon.diagnose.model import plural
from acceptmon.diagnose.state import BucketStats, RunState
from acceptmon.measure.speedup import (
    LOSES_BELOW,
    MARGINAL_BELOW,
    UNMATCHED,
    Verdict,
    bucket_label,
    shared,
    unmatched_speedup,
    verdict,
    weighted_speedup,
)

Buckets: TypeAlias = Mapping[tuple[int, int], BucketStats]


class BucketRow(BaseModel):
    model_config = ConfigDict(frozen=True)

    running_req: str
    spec_lines: int
    base_lines: int
    spec_tok_s: float
    base_tok_s: float
    speedup: float | None


class BreakEven(BaseModel):
    """One speculative run's verdict (with a baseline) or break-even statement (without)."""

    model_config = ConfigDict(frozen=True)

    baseline: str | None
    verdict: Verdict | None
    speedup: float | None
    """S = G_spec / G_base, weighted over matched #running-req buckets."""
    step_cost_ratio: float | None
    """R = L · G_base / G_spec: one speculative step in plain steps."""
    accept_len: float | None
    running_req: float | None
    """B: mean #running-req of the run's most common steady bucket."""
    break_even_tok_s: float | None
    """Without a baseline: the no-spec throughput at B below which speculation pays."""
    step_ms: float | None
    """B · L / G_spec: the implied time of one verify step."""
    verify_efficiency: float | None
    """L / N: the share of verified tokens kept."""
    verify_tokens: float | None
    """B · N: tokens verified per step."""
    buckets: list[BucketRow]
    statement: str


def _r(value: float | None, digits: int = 4) -> float | None:
    return None if value is None else round(value, digits) + 0.0


def label(lo: int, hi: int) -> str:
    return bucket_label((lo, hi))


def matched(spec: Buckets, base: Buckets) -> tuple[list[BucketRow], float | None, float | None]:
    """Rows of the shared buckets, the weighted speedup (:func:`acceptmon.measure.speedup.weighted_speedup`),
    and the spec accept length over the buckets it weighs."""
    keys = shared({k: b.lines for k, b in spec.items()}, {k: b.lines for k, b in base.items()})
    rows, length = [], BucketStats().accept_len
    for key in keys:
        s, b = spec[key], base[key]
        speedup = s.mean_throughput / b.mean_throughput if b.mean_throughput > 0 else None
        rows.append(
            BucketRow(
                running_req=label(*key),
                spec_lines=s.lines,
                base_lines=b.lines,
                spec_tok_s=round(s.mean_throughput, 2),
                base_tok_s=round(b.mean_throughput, 2),
                speedup=_r(speedup),
            )
        )
        if speedup is not None:
            length.merge(s.accept_len)
    pairs = [(spec[k].lines, spec[k].mean_throughput, base[k].lines, base[k].mean_throughput) for k in keys]
    return rows, weighted_speedup(pairs), length.mean


def break_even(
    run: RunState,
    base: Buckets | None,
    base_label: str | None,
    *,
    loses_below: float = LOSES_BELOW,
    marginal_below: float = MARGINAL_BELOW,
    base_load: tuple[float | None, bool] | None = None,
) -> BreakEven:
    """The verdict against ``base`` (steady buckets of no-spec runs), else the break-even statement.
    ``base_load``: the baseline's mean throughput and whether its lines log running requests; where neither
    run logs them there is no load to match, and S is the ratio of the mean throughputs (said so)."""
    typical = max(run.buckets.items(), key=lambda kv: (kv[1].lines, -kv[0][0]), default=None)
    length = run.accept_len.mean
    n = run.draft_tokens
    b = typical[1].mean_running if typical else None
    g = typical[1].mean_throughput if typical else None
    typical_len = typical[1].accept_len.mean if typical else None
    step_len = typical_len if typical_len is not None else length
    values: dict[str, float | None] = {
        "accept_len": _r(length),
        "running_req": _r(b, 2),
        "break_even_tok_s": _r(g, 2),
        "step_ms": _r(1000 * b * step_len / g, 2) if b and g and step_len else None,
        "verify_efficiency": _r(length / n) if length and n else None,
        "verify_tokens": _r(b * n, 1) if b and n else None,
    }
    rows, speedup, spec_len = matched(run.buckets, base) if base is not None else ([], None, None)
    how = f"over {plural(len(rows), 'matched #running-req bucket', 'matched #running-req buckets')}"
    if speedup is None and base_load is not None and not rows:
        speedup = unmatched_speedup(run.throughput.mean, base_load[0], run.running_logged or base_load[1])
        spec_len, how = length, f"unmatched ({UNMATCHED})"
    if speedup is None:
        text = _statement(values, rows, base_label, tree_note(run))
        return BreakEven(
            baseline=base_label,
            verdict=None,
            speedup=None,
            step_cost_ratio=None,
            buckets=rows,
            statement=text,
            **values,
        )
    v = verdict(speedup, loses_below, marginal_below)
    ratio = spec_len / speedup if spec_len else None
    text = f"speculation {v}: S = G_spec/G_base = {speedup:.2f} {how} against {base_label}"
    if ratio is not None and spec_len is not None:
        text += f"; a step costs R = {ratio:.2f} plain steps for L = {spec_len:.2f} tokens (break-even L* = R)"
    values["accept_len"] = _r(spec_len) if spec_len is not None else values["accept_len"]
    return BreakEven(
        baseline=base_label,
        verdict=v,
        speedup=_r(speedup),
        step_cost_ratio=_r(ratio),
        buckets=rows,
        statement=text,
        **values,
    )


def tree_note(run: RunState) -> str:
    """Why L/N is low by design for a tree draft (topk > 1): verification accepts one path. Empty for a chain."""
    _, n, k, topk = run.spec_params()
    if topk <= 1 or not n or not k or k + 1 >= n:
        return ""
    return (
        f"with a tree draft (topk {topk}) each step verifies all N = {n} draft tokens but accepts one path "
        f"of at most k + 1 = {k + 1}, so L/N is at most {(k + 1) / n:.2f} by design, however good the draft"
    )


def _statement(values: dict[str, float | None], rows: list[BucketRow], base_label: str | None, tree: str) -> str:
    parts = []
    if base_label is not None:
        lines = f"{sum(r.spec_lines for r in rows)} vs {sum(r.base_lines for r in rows)}"
        parts.append(f"baseline {base_label}: too few steady batches at shared #running-req ({lines}) to compare")
    b, g = values["running_req"], values["break_even_tok_s"]
    if b is None or g is None:
        parts.append("no steady batches (#queue-req 0, no prefill since the rank's previous line) to judge")
        return "; ".join(parts)
    running = plural(b, "running request", "running requests")
    text = f"speculation pays only if the no-spec server made less than {g:.1f} tok/s at {running}"
    if values["step_ms"] is not None:
        text += f" (one verify step takes about {values['step_ms']:.1f} ms)"
    parts.append(text)
    if values["verify_efficiency"] is not None and values["verify_tokens"] is not None:
        parts.append(
            f"verify efficiency L/N = {values['verify_efficiency']:.2f} "
            f"at B·N = {values['verify_tokens']:g} tokens per step"
        )
        if tree:
            parts.append(tree)
    return "; ".join(parts)

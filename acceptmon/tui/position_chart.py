"""The per-position acceptance chart's numbers: what share of drafts got how far, this run and lately. Pure.

vLLM 0.9+ logs, per spec line, the fraction of drafts whose first 1, 2, ... k tokens
were accepted. The live state keeps each engine's run sums weighted by drafts
(:attr:`~acceptmon.live.series.RankSeries.position_means`); here the engines are
added up the same way, so a busy engine weighs more, as its drafts do.
"""

from __future__ import annotations

from collections.abc import Sequence

from acceptmon.live.series import RankSeries
from acceptmon.tui.view import Position


def positions(series: Sequence[RankSeries]) -> tuple[Position, ...]:
    """Per position: the run's mean over all ``series`` (one file's current spec series), and the latest intervals'.

    Empty when no series holds per-position rates (SGLang, vLLM before 0.9, v0's cumulative lines).
    """
    runs = [s for s in series if s.drafts > 0 and s.position_sums]
    if not runs:
        return ()
    k = max(len(s.position_sums) for s in runs)
    drafts = sum(s.drafts for s in runs)
    means = [sum(s.position_sums[i] for s in runs if i < len(s.position_sums)) / drafts for i in range(k)]
    last = _latest([s.last for s in runs], k)
    return tuple(Position(i + 1, round(means[i], 4), last[i]) for i in range(k))


def _latest(records: Sequence[object], k: int) -> list[float | None]:
    """Each engine's latest per-position rates, weighted by that line's drafts (equally if none says)."""
    sums, weights = [0.0] * k, [0.0] * k
    for r in records:
        rates: list[float | None] = getattr(r, "position_accept_rates", None) or []
        drafted = getattr(r, "drafted_tokens", None)
        weight = drafted / len(rates) if drafted and rates else 1.0
        for i, p in enumerate(rates[:k]):
            if p is not None:
                sums[i] += p * weight
                weights[i] += weight
    return [round(sums[i] / weights[i], 4) if weights[i] else None for i in range(k)]

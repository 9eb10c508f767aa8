"""Token counts of a run's speculative-decoding lines (vLLM), aggregated by drafts rather than by lines.

A spec line counts accepted and drafted tokens either since server start (vLLM v0:
the run's figure is the counters' increase) or per logging interval (v1: the figure
is their sum). Accept rate is accepted / drafted; accept length is emitted tokens per
draft (a draft is one verify step: k drafted tokens, plus the bonus token); the
per-position rates are weighted by each line's drafts. Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acceptmon.records import SpecStats


@dataclass
class SpecTotals:
    """Token counts of a run's spec lines: accept rate and length weighted by drafts, not by lines."""

    accepted: int = 0
    drafted: int = 0
    emitted: int = 0
    drafts: float = 0.0
    positions: list[float] = field(default_factory=list)
    first: tuple[int, int, int, int] | None = None
    """First and last cumulative counters (accepted, drafted, emitted, k): their increase is the run's."""
    last: tuple[int, int, int, int] | None = None
    since_start: bool = False
    """The run's launch was seen: cumulative counters count from zero at its start."""

    def add(self, r: SpecStats) -> None:
        k = r.num_spec_tokens or (len(r.position_accept_rates or ()) or None) or r.spec_num_steps
        acc, drafted, emitted = r.accepted_tokens or 0, r.drafted_tokens or 0, r.emitted_tokens
        if r.cumulative:
            self.last = (acc, drafted, emitted or 0, k or 0)
            self.first = self.first or self.last
            return
        drafts = drafted / k if k else 0.0
        self.accepted += acc
        self.drafted += drafted
        self.emitted += emitted if emitted is not None else round(acc + drafts)
        self.drafts += drafts
        rates = r.position_accept_rates or []
        self.positions += [0.0] * (len(rates) - len(self.positions))
        for i, p in enumerate(rates):
            self.positions[i] += (p or 0.0) * drafts

    def merge(self, other: SpecTotals) -> None:
        for name in ("accepted", "drafted", "emitted", "drafts"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.positions += [0.0] * (len(other.positions) - len(self.positions))
        for i, p in enumerate(other.positions):
            self.positions[i] += p
        self.first, self.last = self.first or other.first, other.last or self.last

    def totals(self) -> tuple[int, int, int, float]:
        """accepted, drafted, emitted, drafts: interval sums plus the cumulative counters' increase."""
        acc, drafted, emitted, drafts = self.accepted, self.drafted, self.emitted, self.drafts
        if self.last is not None and self.first is not None:
            base = (0, 0, 0) if self.since_start else self.first[:3]
            acc, drafted, emitted = (
                acc + self.last[0] - base[0],
                drafted + self.last[1] - base[1],
                emitted + self.last[2] - base[2],
            )
            drafts += (self.last[1] - base[1]) / self.last[3] if self.last[3] else 0.0
        return acc, drafted, emitted, drafts

    def fill(self, out: dict[str, object]) -> None:
        """The run summary's figures, when the run had spec lines with drafts."""
        acc, drafted, emitted, drafts = self.totals()
        out.update(accepted_tokens=acc, drafted_tokens=drafted, emitted_tokens=emitted, num_drafts=round(drafts, 3))
        if drafted and drafts:
            rate = round(acc / drafted, 6)
            out.update(accept_rate_mean=rate, draft_accept_rate_mean=rate, accept_len_mean=round(emitted / drafts, 6))
        if self.positions and self.drafts:
            out["position_accept_rates"] = [round(p / self.drafts, 6) for p in self.positions]

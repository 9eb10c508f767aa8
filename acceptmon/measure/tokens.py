"""Token counts of a run's speculative-decoding lines (vLLM), aggregated by drafts rather than by lines.

A spec line counts accepted and drafted tokens either since server start (vLLM v0:
the run's figure is the counters' increase, and :class:`Intervals` gives each line's
interval) or per logging interval (v1: the figure is their sum). Accept rate is
accepted / drafted; accept length is emitted tokens per draft (a draft is one verify
step: k drafted tokens, plus the bonus token); the
per-position rates are weighted by each line's drafts. Pure: no I/O.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from acceptmon.measure.amend import amended
from acceptmon.parse.fast import native
from acceptmon.parse.records import Record, SpecStats

Counters = tuple[int, int, int | None, int | None]
"""A spec line's accepted, drafted and emitted tokens, and draft width k (tokens per draft)."""
CounterKey = tuple[str, str, int, str]
"""Whose counters since start a line carries: file, source, run and unit (:meth:`Intervals.key`)."""


def counters(r: SpecStats) -> Counters:
    k = width(r.num_spec_tokens, r.position_accept_rates, r.spec_num_steps)
    return r.accepted_tokens or 0, r.drafted_tokens or 0, r.emitted_tokens, k


def width(tokens: int | None, rates: list[Any] | None, steps: int | None) -> int | None:
    """Tokens per draft (k): the line's count of speculative tokens, else its per-position rates, else the launch's
    steps."""
    return tokens or (len(rates or ()) or None) or steps


@dataclass
class SpecTotals:
    """Token counts of a run's spec lines: accept rate and length weighted by drafts, not by lines."""

    accepted: int = 0
    drafted: int = 0
    emitted: int = 0
    drafts: float = 0.0
    positions: list[float] = field(default_factory=list)
    first: tuple[int, int, int, int] | None = None
    """First and last cumulative counters (accepted, drafted, emitted, k): their increase is the run's
    (emitted -1 where a line counts none: llama.cpp's statistics rows)."""
    last: tuple[int, int, int, int] | None = None
    since_start: bool = False
    """The run's launch was seen: cumulative counters count from zero at its start."""

    def add(self, r: SpecStats) -> None:
        acc, drafted, emitted, k = counters(r)
        if r.cumulative:
            self.last = (acc, drafted, emitted if emitted is not None else -1, k or 0)
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
        """Fold in a later part's counts: interval sums add up, cumulative counters run from this part's first to the
        later part's last."""
        self.first = self.first or other.first
        self.last = other.last or self.last
        self.accepted += other.accepted
        self.drafted += other.drafted
        self.emitted += other.emitted
        self.drafts += other.drafts
        self.positions += [0.0] * (len(other.positions) - len(self.positions))
        for i, p in enumerate(other.positions):
            self.positions[i] += p

    def totals(self) -> tuple[int, int, int, float]:
        """accepted, drafted, emitted, drafts: interval sums plus the cumulative counters' increase."""
        acc, drafted, emitted, drafts = self.accepted, self.drafted, self.emitted, self.drafts
        if self.last is not None and self.first is not None:
            base = (0, 0, 0) if self.since_start else self.first[:3]
            more = (self.last[1] - base[1]) / self.last[3] if self.last[3] else 0.0
            if self.last[2] < 0 or base[2] < 0:  # counters without emitted tokens: each draft's accepted + 1
                emitted += round(self.last[0] - base[0] + more)
            else:
                emitted += self.last[2] - base[2]
            acc, drafted = acc + self.last[0] - base[0], drafted + self.last[1] - base[1]
            drafts += more
        return acc, drafted, emitted, drafts

    def fill(self, out: dict[str, object]) -> None:
        """The run summary's token figures, when the run had spec lines with drafts: accept rate and length
        over all the run's drafts (the per-batch means are the shared figures, :mod:`acceptmon.measure.figures`)."""
        acc, drafted, emitted, drafts = self.totals()
        out.update(accepted_tokens=acc, drafted_tokens=drafted, emitted_tokens=emitted, num_drafts=round(drafts, 3))
        if drafted and drafts:
            out.update(accept_rate_by_tokens=round(acc / drafted, 6), accept_len_by_tokens=round(emitted / drafts, 6))
        if self.positions and self.drafts:
            out["position_accept_rates"] = [round(p / self.drafts, 6) for p in self.positions]


class Intervals:
    """Cumulative spec lines (vLLM v0 counts tokens since server start) as the interval each closes:
    its counters less those of the line before it (same file, run and engine). A run's first line
    counts from zero if the run's launch was seen; otherwise its interval is unknown (no values).
    Means over lines (``compare``, ``doctor``) are then means over intervals, not of running averages."""

    def __init__(self) -> None:
        self._last: dict[CounterKey, tuple[int, int, int | None]] = {}
        self._launched: set[tuple[str, str, int]] = set()

    def launch(self, run: tuple[str, str, int]) -> None:
        """A run (file, source, run) starts: its counters count from zero."""
        self._launched.add(run)

    @staticmethod
    def key(r: Record, engine: str | None) -> CounterKey:
        """The counters a cumulative line continues: its file's, source's (a process of a stream), run's and
        unit's (``engine``: the record's, or the one it takes from its file's last line that named one)."""
        return r.file, getattr(r, "source", ""), r.run, engine or getattr(r, "rank", None) or ""

    def take_last(self, later: Intervals) -> None:
        """Take the counters and launches of a later part of the same files read on its own (a line after that part
        continues the counters it saw last)."""
        self._last.update(later._last)
        self._launched |= later._launched

    def close(self, key: CounterKey, now: Counters) -> tuple[float | None, float | None]:
        """(accept_len, accept_rate) over the interval a cumulative line with counters ``now`` closes."""
        return self.close_each(key, (now,))[0]

    def close_each(self, key: CounterKey, lines: Iterable[Counters]) -> list[tuple[float | None, float | None]]:
        """:meth:`close` of each of these lines of one key's counters, in order (one loop: the runs' fold of a part's
        lines as columns)."""
        out: list[tuple[float | None, float | None]] = []
        before = self._last.get(key)
        known = before is not None or key[:3] in self._launched  # a line before, or the launch: from zero
        now = None
        for acc, drafted, emitted, k in lines:
            now = (acc, drafted, emitted)
            if not known:
                out.append((None, None))
                before, known = now, True
                continue
            b_acc, b_drafted, b_emitted = before or (0, 0, 0)
            before = now
            d_acc, d_drafted = acc - b_acc, drafted - b_drafted
            if d_drafted <= 0 or d_acc < 0 or not k:
                out.append((None, None))  # no drafts in the interval, or counters went back (a restart not logged)
                continue
            d_emitted = emitted - b_emitted if emitted is not None and b_emitted is not None else None
            if d_emitted is not None and d_emitted >= 0:
                length = d_emitted * k / d_drafted
            else:  # no emitted count at one end (or it went back): from the accepted tokens
                length = 1 + d_acc * k / d_drafted
            out.append((round(length, 6), round(d_acc / d_drafted, 6)))
        if now is not None:
            self._last[key] = now
        return out

    def close_columns(
        self, key: CounterKey, columns: tuple[Sequence[int], Sequence[int], Sequence[int | None], Sequence[int | None]]
    ) -> list[tuple[float | None, float | None]]:
        """:meth:`close_each` of the lines of ``columns`` (accepted, drafted, emitted, widths): in the compiled module
        where it is built, the same numbers (ints that doubles hold exactly; any other, this loop)."""
        accepted, drafted, emitted, widths = columns
        module = native.load()
        if module is not None and accepted:
            before = self._last.get(key)
            known = before is not None or key[:3] in self._launched
            got: list[tuple[float | None, float | None]] | None = module.intervals(
                accepted, drafted, emitted, widths, before, known
            )
            if got is not None:
                self._last[key] = (accepted[-1], drafted[-1], emitted[-1])
                return got
        return self.close_each(key, zip(accepted, drafted, emitted, widths, strict=True))

    def record(self, r: Record) -> Record:
        """A cumulative spec line with its interval's accept_len and rates; any other record as it is."""
        if not getattr(r, "cumulative", None):
            return r
        length, rate = self.close(self.key(r, getattr(r, "engine", None)), counters(r))  # type: ignore[arg-type]
        update: dict[str, Any] = {"accept_len": length, "accept_rate": rate, "draft_accept_rate": rate}
        return amended(r, update)

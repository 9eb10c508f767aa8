"""One live series (the latest record of a kind from one rank of one file, with its counters) and a file's info.

The records the live state keeps: :class:`RankSeries` folds a kind's records as its
``series`` metrics say (counter, histogram of one field, run-start baseline, per-position
means for vLLM spec lines); :class:`FileInfo` is what is known of one followed file.
Pure: no I/O.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime

from acceptmon.measure.aggregate import Baseline
from acceptmon.parse.kinds import SeriesMetrics
from acceptmon.parse.records import LaunchConfig, Record


@dataclass
class RankSeries:
    """The latest record of one kind from one rank in one file, and its counters."""

    file: str
    rank: str
    kind: str
    metrics: SeriesMetrics
    last: Record
    seen: float
    """Clock time (``LiveStats.clock``) when the last line of this series was read."""
    batches: int = 0
    hist_sum: float = 0.0
    buckets: list[int] = field(default_factory=list)
    """Per-bucket (not cumulative) counts of the histogram's field; the last one is +Inf."""
    run: int = -1
    start: Baseline = field(default_factory=Baseline)
    """The current run's first ten minutes."""
    totals: dict[str, float] = field(default_factory=dict)
    """Sums of the kind's ``totals`` fields since this process began (counters: never reset)."""
    raw: dict[str, float] = field(default_factory=dict)
    """Last value of each cumulative ``totals`` field in the current run (its increase is added)."""
    position_sums: list[float] = field(default_factory=list)
    """Per draft position, acceptance x drafts over the current run (see :attr:`position_means`)."""
    drafts: float = 0.0

    def __post_init__(self) -> None:
        if self.metrics.histogram is not None and not self.buckets:
            self.buckets = [0] * (len(self.metrics.histogram.buckets) + 1)

    @property
    def baseline(self) -> float | None:
        """Mean of the baseline field over the current run's first ten minutes."""
        mean = self.start.mean
        return None if mean is None else round(mean, 4)

    @property
    def position_means(self) -> list[float]:
        """Per draft position, the current run's acceptance weighted by drafts (the tail's bar chart)."""
        return [round(p / self.drafts, 4) for p in self.position_sums] if self.drafts else []

    def add(self, r: Record, now: float, run: int = 0, run_start: datetime | None = None) -> None:
        if self.metrics.sticky and self.last is not r:  # keep fields this line does not carry
            r = self.last.model_copy(update={k: v for k, v in r.__dict__.items() if v is not None})
        self.last, self.seen = r, now
        self.batches += 1
        if run != self.run:
            self.run = run
            self.start.restart(run_start or r.timestamp)
            self.raw, self.position_sums, self.drafts = {}, [], 0.0
        if self.metrics.totals:
            self._count(r)
        if self.metrics.baseline is not None:
            self.start.add(getattr(r, self.metrics.baseline.field), r.timestamp)
        hist = self.metrics.histogram
        if hist is not None:
            value = getattr(r, hist.field)
            if value is not None:
                self.hist_sum += value
                self.buckets[bisect.bisect_left(hist.buckets, value)] += 1  # first bound >= value; past: +Inf

    def _count(self, r: Record) -> None:
        cumulative = getattr(r, "cumulative", False)
        for total in self.metrics.totals:
            value = getattr(r, total.field, None)
            if value is None:
                continue
            prev = self.raw.get(total.field)
            increase = value - prev if cumulative and prev is not None and value >= prev else value
            if cumulative:
                self.raw[total.field] = value
            self.totals[total.field] = self.totals.get(total.field, 0.0) + increase
        rates, drafted = getattr(r, "position_accept_rates", None), getattr(r, "drafted_tokens", None)
        if rates and drafted and not cumulative:
            drafts = drafted / len(rates)
            self.position_sums += [0.0] * (len(rates) - len(self.position_sums))
            for i, p in enumerate(rates):
                self.position_sums[i] += (p or 0.0) * drafts
            self.drafts += drafts

    def copy(self) -> RankSeries:
        return replace(
            self,
            buckets=list(self.buckets),
            start=replace(self.start, values=replace(self.start.values)),
            totals=dict(self.totals),
            raw=dict(self.raw),
            position_sums=list(self.position_sums),
        )


@dataclass
class FileInfo:
    """What is known of one followed file."""

    file: str
    lines: Counter[str] = field(default_factory=Counter)
    launches: int = 0
    launch: LaunchConfig | None = None
    launch_time: datetime | None = None
    run: int = 0
    """The current run: the run of the file's latest launch or stats line, numbered as ``acceptmon runs``
    numbers them (per file, in launch order; 0 before any launch)."""
    launch_run: int | None = None
    """The run of the last launch line read: a later launch line of that run continues its launch."""
    waiting: bool = False
    """True while the path does not exist."""
    last_seen: float | None = None
    """Clock time when the last series record (a decode line) of this file was read."""

    def copy(self) -> FileInfo:
        return replace(self, lines=Counter(self.lines))

"""Every running aggregate, in one place; no I/O.

:class:`Mean` is the one running count-and-sum (with removal, for sliding windows);
:class:`Series` adds the distribution, :class:`Baseline` a run's first ten minutes.
:class:`Stats` is fed records in file order and answers "what did each launch
achieve": batches, accept length mean and percentiles, raw and normalized accept
rate, throughput, duration. Percentiles are exact: accept lengths are logged with
two decimals, so a counter of distinct values stays small whatever the log size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime

from acceptmon.measure.summary import RunSummary
from acceptmon.measure.tokens import SpecTotals
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import DecodeStats, LaunchConfig, Record, RequestStats, SpecStats, ThroughputStats

__all__ = ["BASELINE_SECONDS", "Baseline", "Mean", "RunStats", "RunSummary", "Series", "Stats"]

BASELINE_SECONDS = 600.0
"""The start of a run whose mean accept length later batches are compared with (log time)."""


@dataclass(slots=True)
class Mean:
    """Running count and sum of one value; values can be taken out again (sliding windows)."""

    count: int = 0
    total: float = 0.0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.count += 1
            self.total += value

    def remove(self, other: Mean) -> None:
        self.count -= other.count
        self.total -= other.total

    def merge(self, other: Mean) -> None:
        self.count += other.count
        self.total += other.total

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count > 0 else None

    @property
    def rounded(self) -> float | None:
        """The mean to four decimals, as reports show it."""
        return round(self.total / self.count, 4) if self.count > 0 else None


@dataclass
class Series(Mean):
    """A :class:`Mean` that also keeps the distribution of its values (for quantiles)."""

    keep_values: bool = False
    values: Counter[float] = field(default_factory=Counter)

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.count += 1
        self.total += value
        if self.keep_values:
            self.values[value] += 1

    def merge(self, other: Mean) -> None:
        super().merge(other)
        if isinstance(other, Series):
            self.values.update(other.values)

    def quantile(self, q: float) -> float | None:
        """Nearest-rank quantile (``q`` in 0..1) over the kept values."""
        n = sum(self.values.values())
        if not n:
            return None
        rank = max(1, math.ceil(q * n - 1e-9))
        seen = 0
        for value in sorted(self.values):
            seen += self.values[value]
            if seen >= rank:
                return value
        return max(self.values)


@dataclass
class Baseline:
    """Mean of a value over a run's first :data:`BASELINE_SECONDS` of log time: the collapse reference."""

    start: datetime | None = None
    values: Mean = field(default_factory=Mean)

    def restart(self, start: datetime | None) -> None:
        self.start, self.values = start, Mean()

    def add(self, value: float | None, ts: datetime | None) -> None:
        if value is None:
            return
        if self.start is None or ts is None or (ts - self.start).total_seconds() <= BASELINE_SECONDS:
            self.values.add(value)

    @property
    def count(self) -> int:
        return self.values.count

    @property
    def mean(self) -> float | None:
        return self.values.mean


@dataclass
class RunStats:
    """Running aggregate of one run."""

    file: str
    run: int
    launch: LaunchConfig | None = None
    start: datetime | None = None
    end: datetime | None = None
    batches: int = 0
    ranks: set[str] = field(default_factory=set)
    accept_len: Series = field(default_factory=lambda: Series(keep_values=True))
    accept_rate: Series = field(default_factory=Series)
    draft_accept_rate: Series = field(default_factory=Series)
    gen_throughput: Series = field(default_factory=Series)
    requests: int = 0
    request_accept_len: Series = field(default_factory=lambda: Series(keep_values=True))
    """Per finished request (``--log-requests``): its accept length, to two decimals."""
    spec: SpecTotals | None = None
    """vLLM spec lines' token counts (None for a run without any)."""
    engines: dict[str, Mean] = field(default_factory=dict)
    """Generation throughput per engine, from throughput lines (vLLM)."""

    def add_spec(self, r: SpecStats) -> None:
        self.spec = self.spec or SpecTotals(since_start=self.launch is not None)
        self.spec.add(r)
        self.batches += 1
        self._seen(r)
        if not r.cumulative:  # a running average since start: its interval's length is taken at the summary
            self.accept_len.add(r.accept_len)

    def add_throughput(self, r: ThroughputStats) -> None:
        self.engines.setdefault(r.engine or "", Mean()).add(r.gen_throughput)
        self.ranks.add(r.engine or "")
        self._seen(r)

    def _seen(self, r: Record) -> None:
        """The run's span: its earliest and latest log time (a log whose clock went back gives no negative span)."""
        t = r.timestamp
        if t is not None:
            self.start = t if self.start is None else min(self.start, t)
            self.end = t if self.end is None else max(self.end, t)

    def add(self, r: DecodeStats) -> None:
        self.batches += 1
        self.ranks.add(r.rank or "")
        self._seen(r)
        self.accept_len.add(r.accept_len)
        self.accept_rate.add(r.accept_rate)
        self.draft_accept_rate.add(r.draft_accept_rate)
        self.gen_throughput.add(r.gen_throughput)

    def merge(self, other: RunStats) -> None:
        """Fold in the same run's aggregate from a later part of the file."""
        self.launch = other.launch or self.launch  # a later launch line of the run carries the merged config
        self.start = min((t for t in (self.start, other.start) if t is not None), default=None)
        self.end = max((t for t in (self.end, other.end) if t is not None), default=None)
        self.batches += other.batches
        self.ranks |= other.ranks
        self.requests += other.requests
        for name in ("accept_len", "accept_rate", "draft_accept_rate", "gen_throughput", "request_accept_len"):
            getattr(self, name).merge(getattr(other, name))
        if other.spec is not None:
            if self.spec is None:
                self.spec = other.spec
                self.spec.since_start |= self.launch is not None  # the launch was in an earlier part
            else:
                self.spec.merge(other.spec)
        for engine, mean in other.engines.items():
            self.engines.setdefault(engine, Mean()).merge(mean)

    def summary(self) -> RunSummary:
        cfg = self.launch or LaunchConfig()
        duration = (self.end - self.start).total_seconds() if self.start and self.end else None
        lengths = self.accept_len
        if self.spec is not None and self.spec.points:
            lengths = Series(keep_values=True)
            lengths.merge(self.accept_len)
            for length in self.spec.interval_lengths():
                lengths.add(length)
        figures: dict[str, object] = dict(
            accept_len_mean=lengths.rounded,
            accept_rate_mean=self.accept_rate.rounded,
            draft_accept_rate_mean=self.draft_accept_rate.rounded,
            gen_throughput_mean=self.gen_throughput.rounded,
        )
        if self.spec is not None:
            self.spec.fill(figures)
        if self.engines:  # the server's rate: the engines' means added up
            means = [m.mean for m in self.engines.values() if m.mean is not None]
            figures["gen_throughput_mean"] = round(sum(means), 4) if means else None
        return RunSummary(
            file=self.file,
            run=self.run,
            start=self.start,
            end=self.end,
            duration_s=duration,
            model=cfg.model_path,
            spec_algorithm=cfg.spec_algorithm,
            spec_num_steps=cfg.spec_num_steps,
            spec_eagle_topk=cfg.spec_eagle_topk,
            spec_num_draft_tokens=cfg.spec_num_draft_tokens,
            batches=self.batches,
            ranks=len(self.ranks),
            accept_len_p10=lengths.quantile(0.1),
            accept_len_p50=lengths.quantile(0.5),
            accept_len_p90=lengths.quantile(0.9),
            launch_seen=self.launch is not None,
            requests=self.requests,
            request_accept_len_p10=self.request_accept_len.quantile(0.1),
            request_accept_len_p50=self.request_accept_len.quantile(0.5),
            request_accept_len_p90=self.request_accept_len.quantile(0.9),
            version=cfg.version,
            spec_draft_model=cfg.spec_draft_model_path,
            **figures,
        )


class Stats:
    """Runs of every file fed so far, in order of appearance."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, int], RunStats] = {}

    def update(self, records: Iterable[Record]) -> None:
        for r in records:
            kind = KINDS[r.kind]
            if not (kind.starts_run or isinstance(r, DecodeStats | RequestStats | SpecStats | ThroughputStats)):
                continue  # other kinds (warnings, prefill) make no run of their own
            key = (r.file, r.run)
            run = self.runs.get(key)
            if run is None:
                run = self.runs[key] = RunStats(r.file, r.run)
            if kind.starts_run:  # a launch line; a later one of the same run continues it
                run.launch = getattr(r, "config", None)
                run.start = run.start or r.timestamp
            elif isinstance(r, DecodeStats):
                run.add(r)
            elif isinstance(r, RequestStats):
                run.requests += 1
                run.request_accept_len.add(None if r.accept_len is None else round(r.accept_len, 2))
            elif isinstance(r, SpecStats):
                run.add_spec(r)
            elif isinstance(r, ThroughputStats):
                run.add_throughput(r)

    def merge(self, other: Stats) -> None:
        """Fold in the aggregate of a later part of the same files."""
        for key, run in other.runs.items():
            mine = self.runs.get(key)
            if mine is None:
                self.runs[key] = run
            else:
                mine.merge(run)

    def summaries(self) -> list[RunSummary]:
        """Every launch, plus a run 0 where stats lines came before any launch."""
        return [s.summary() for s in self.runs.values() if s.run > 0 or s.batches]

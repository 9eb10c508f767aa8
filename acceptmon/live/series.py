"""One live series (the latest record of a kind from one rank of one source, with its counters) and a file's info.

The records the live state keeps: :class:`RankSeries` folds a kind's records as its
``series`` metrics say (counter, histogram of one field, run-start baseline, per-position
means for vLLM spec lines, the verify steps and tokens of :mod:`acceptmon.measure.verify`);
:class:`FileInfo` is what is known of one followed file, and :class:`SourceInfo` of each source
in it (the file's plain lines, or a process a stream prefix names: :mod:`acceptmon.parse.streams`).
Pure: no I/O.
"""

from __future__ import annotations

import bisect
from collections import Counter
from dataclasses import dataclass, field, replace
from datetime import datetime

from acceptmon.measure.aggregate import Baseline
from acceptmon.measure.amend import amended
from acceptmon.measure.verify import COUNTED, window
from acceptmon.parse.kinds import KINDS, SeriesMetrics
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.parse.streams import path_origin


def origin_labels(source: str, namespace: str, pod: str, container: str) -> tuple[str, str, str]:
    """The (namespace, pod, container) labels of a source: as its lines or path name them; a source that
    names no pod or container (a journald unit) has its name as the container, so that two of them in one
    file stay two series."""
    if not (pod or container):
        container = source
    return namespace, pod, container


@dataclass
class RankSeries:
    """The latest record of one kind from one rank of one source in one file, and its counters."""

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
    source: str = ""
    """The source within the file (``Record.source``: empty for the file's plain lines)."""
    origin: tuple[str, str, str] = ("", "", "")
    """The source's namespace, pod and container labels (:func:`origin_labels`)."""
    steps: float = 0.0
    """Verify steps of the windows this series' lines covered since this process began (a counter)."""
    tokens: float = 0.0
    """Generated tokens (bonus tokens included) of those windows (a counter)."""
    windows: int = 0
    """Lines that covered a window (:func:`acceptmon.measure.verify.window`): 0 leaves the counters out."""

    counted: tuple[str, ...] = field(init=False, repr=False, compare=False)
    """The token counts :meth:`_count` reads: the kind's ``totals`` fields and :data:`COUNTED` (once each)."""
    acceptance: bool = field(init=False, repr=False, compare=False)
    """Whether the kind has the ``acceptance`` role (its lines cover a window)."""

    def __post_init__(self) -> None:
        if self.metrics.histogram is not None and not self.buckets:
            self.buckets = [0] * (len(self.metrics.histogram.buckets) + 1)
        self.counted = tuple(dict.fromkeys((*(t.field for t in self.metrics.totals), *COUNTED)))
        kind = KINDS.get(self.kind)
        self.acceptance = kind is not None and kind.acceptance

    @property
    def baseline(self) -> float | None:
        """Mean of the baseline field over the current run's first ten minutes."""
        mean = self.start.mean
        return None if mean is None else round(mean, 4)

    @property
    def position_means(self) -> list[float]:
        """Per draft position, the current run's acceptance weighted by drafts (the tail's bar chart)."""
        return [round(p / self.drafts, 4) for p in self.position_sums] if self.drafts else []

    def add(
        self, r: Record, now: float, run: int = 0, run_start: datetime | None = None, launch: LaunchConfig | None = None
    ) -> None:
        """Fold in a record of run ``run`` (which started at ``run_start``, launched with ``launch``)."""
        if self.metrics.sticky and self.last is not r:  # keep fields this line does not carry
            r = amended(self.last, {k: v for k, v in r.__dict__.items() if v is not None})
        self.last, self.seen = r, now
        self.batches += 1
        if run != self.run:
            self.run = run
            self.start.restart(run_start or r.timestamp)
            self.raw, self.position_sums, self.drafts = {}, [], 0.0
        increase = self._count(r) if self.metrics.totals else None
        if self.acceptance:
            w = window(r, launch, increase)
            if w is not None:
                self.steps += w.steps
                self.tokens += w.tokens
                self.windows += 1
        if self.metrics.baseline is not None:
            self.start.add(getattr(r, self.metrics.baseline.field), r.timestamp)
        hist = self.metrics.histogram
        if hist is not None:
            value = getattr(r, hist.field)
            if value is not None:
                self.hist_sum += value
                self.buckets[bisect.bisect_left(hist.buckets, value)] += 1  # first bound >= value; past: +Inf

    def _count(self, r: Record) -> dict[str, float]:
        """Add the record's token counts (their increase, when cumulative); return the window's counts."""
        cumulative = getattr(r, "cumulative", False)
        added: dict[str, float] = {}
        values = r.__dict__
        for name in self.counted:
            value = values.get(name)
            if value is None:
                continue
            prev = self.raw.get(name)
            added[name] = value - prev if cumulative and prev is not None and value >= prev else value
            if cumulative:
                self.raw[name] = value
        for total in self.metrics.totals:
            if total.field in added:
                self.totals[total.field] = self.totals.get(total.field, 0.0) + added[total.field]
        rates, drafted = getattr(r, "position_accept_rates", None), getattr(r, "drafted_tokens", None)
        if rates and drafted and not cumulative:
            drafts = drafted / len(rates)
            self.position_sums += [0.0] * (len(rates) - len(self.position_sums))
            for i, p in enumerate(rates):
                self.position_sums[i] += (p or 0.0) * drafts
            self.drafts += drafts
        return added

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
class SourceInfo:
    """What is known of one source of a file: its labels and its current run's launch."""

    source: str
    origin: tuple[str, str, str]
    """Namespace, pod and container labels (:func:`origin_labels`)."""
    launch: LaunchConfig | None = None
    launch_time: datetime | None = None
    run: int = 0
    """The source's current run (its latest launch or stats line's), numbered as ``acceptmon runs`` does."""
    launch_run: int | None = None
    """The run of the source's last launch line: a later launch line of that run continues its launch."""


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
    sources: dict[str, SourceInfo] = field(default_factory=dict)
    """The file's sources by ``Record.source``, in order of appearance (the fields above: its latest launch's)."""
    origin: tuple[str, str, str] | None = None
    """Namespace, pod and container its path names (a Kubernetes log file), the labels of per-file series."""

    def __post_init__(self) -> None:
        if self.origin is None:
            o = path_origin(self.file)
            self.origin = (o.namespace, o.pod, o.container)

    def source(self, r: Record) -> SourceInfo:
        """The info of a record's source (new: no run yet)."""
        name = getattr(r, "source", "")
        info = self.sources.get(name)
        if info is None:
            origin = origin_labels(
                name, getattr(r, "namespace", ""), getattr(r, "pod", ""), getattr(r, "container", "")
            )
            info = self.sources[name] = SourceInfo(name, origin)
        return info

    def copy(self) -> FileInfo:
        return replace(self, lines=Counter(self.lines), sources={k: replace(v) for k, v in self.sources.items()})

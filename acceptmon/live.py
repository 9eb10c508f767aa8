"""The live view of followed logs: latest values per (file, rank), counters, run config; no I/O.

:class:`LiveStats` is fed records as the follower reads them and answers, at any
moment, with a consistent :class:`Snapshot` (taken under a lock, so a scrape or a
screen refresh in another thread never sees half an update). It is what both the
Prometheus collector and the dashboard read.

Memory stays bounded whatever the log size: one :class:`RankSeries` per (file,
rank) up to ``max_series`` (records for further series are counted in
``overflow``, not kept), a fixed set of histogram buckets, and counters.
"""

from __future__ import annotations

import bisect
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime

from acceptmon.parse import Tally
from acceptmon.records import LINE_KINDS, DecodeStats, LaunchConfig, Record, ServerLaunch

ACCEPT_BUCKETS: tuple[float, ...] = (1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0, 7.0, 8.0)
"""Upper bounds of the accept-length histogram (tokens per verify step); +Inf follows."""
BASELINE_SECONDS = 600.0
"""The start of a run whose mean accept length later batches are compared with (log time)."""
DEFAULT_MAX_SERIES = 512


@dataclass
class Baseline:
    """Mean accept length over a run's first :data:`BASELINE_SECONDS` of log time: the collapse reference."""

    start: datetime | None = None
    total: float = 0.0
    count: int = 0

    def restart(self, start: datetime | None) -> None:
        self.start, self.total, self.count = start, 0.0, 0

    def add(self, accept_len: float | None, ts: datetime | None) -> None:
        if accept_len is None:
            return
        if self.start is None or ts is None or (ts - self.start).total_seconds() <= BASELINE_SECONDS:
            self.total += accept_len
            self.count += 1

    @property
    def mean(self) -> float | None:
        return self.total / self.count if self.count else None


@dataclass
class RankSeries:
    """The latest decode values of one rank in one file, and its counters."""

    file: str
    rank: str
    last: DecodeStats
    seen: float
    """Clock time (``LiveStats.clock``) when the last line of this series was read."""
    batches: int = 0
    accept_count: int = 0
    accept_sum: float = 0.0
    buckets: list[int] = field(default_factory=lambda: [0] * (len(ACCEPT_BUCKETS) + 1))
    """Per-bucket (not cumulative) counts of accept lengths; the last one is +Inf."""
    run: int = -1
    start: Baseline = field(default_factory=Baseline)
    """The current run's first ten minutes."""

    @property
    def baseline(self) -> float | None:
        """Mean accept length over the current run's first ten minutes."""
        mean = self.start.mean
        return None if mean is None else round(mean, 4)

    def add(self, r: DecodeStats, now: float, run: int = 0, run_start: datetime | None = None) -> None:
        self.last, self.seen = r, now
        self.batches += 1
        if run != self.run:
            self.run = run
            self.start.restart(run_start or r.timestamp)
        a = r.accept_len
        self.start.add(a, r.timestamp)
        if a is not None:
            self.accept_count += 1
            self.accept_sum += a
            self.buckets[bisect.bisect_left(ACCEPT_BUCKETS, a)] += 1  # first bound >= a; past the last: +Inf

    def copy(self) -> RankSeries:
        return replace(self, buckets=list(self.buckets), start=replace(self.start))


@dataclass
class FileInfo:
    """What is known of one followed file."""

    file: str
    lines: Counter[str] = field(default_factory=Counter)
    launches: int = 0
    launch: LaunchConfig | None = None
    launch_time: datetime | None = None
    run: int = 0
    """Launches seen by this process: the current run's key (not the file's run index)."""
    waiting: bool = False
    """True while the path does not exist."""
    last_decode_seen: float | None = None

    def copy(self) -> FileInfo:
        return replace(self, lines=Counter(self.lines))


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of the live state at one moment."""

    taken: float
    series: list[RankSeries]
    files: list[FileInfo]
    overflow: int
    version: int


class LiveStats:
    """Thread-safe live aggregate of everything the followers read."""

    def __init__(self, *, max_series: int = DEFAULT_MAX_SERIES, clock: Callable[[], float] = time.monotonic) -> None:
        self.max_series = max_series
        self.clock = clock
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str], RankSeries] = {}
        self._files: dict[str, FileInfo] = {}
        self._overflow = 0
        self.version = 0
        """Increments on every change, so a reader can tell whether anything is new."""

    def add_file(self, file: str) -> None:
        with self._lock:
            self._file(file)
            self.version += 1

    def update(self, file: str, records: Iterable[Record], tally: Tally | None = None) -> None:
        """Take one batch of records read from ``file`` and its parser's cumulative tally."""
        now = self.clock()
        with self._lock:
            info = self._file(file)
            for r in records:
                if isinstance(r, DecodeStats):
                    self._decode(info, r, now)
                elif isinstance(r, ServerLaunch):
                    info.launches += 1
                    info.run += 1
                    info.launch = r.config
                    info.launch_time = r.timestamp
            if tally is not None:
                info.lines = Counter(tally.kinds)
            self.version += 1

    def set_waiting(self, file: str, waiting: bool) -> None:
        with self._lock:
            info = self._file(file)
            if info.waiting != waiting:
                info.waiting = waiting
                self.version += 1

    def forget(self, file: str) -> None:
        """Drop a file that is gone for good, with its series (its metrics disappear, as its file did)."""
        with self._lock:
            self._files.pop(file, None)
            for key in [k for k in self._series if k[0] == file]:
                del self._series[key]
            self.version += 1

    def snapshot(self) -> Snapshot:
        with self._lock:
            return Snapshot(
                taken=self.clock(),
                series=[s.copy() for s in self._series.values()],
                files=[f.copy() for f in self._files.values()],
                overflow=self._overflow,
                version=self.version,
            )

    def _file(self, file: str) -> FileInfo:
        info = self._files.get(file)
        if info is None:
            info = self._files[file] = FileInfo(file)
            for kind in LINE_KINDS:
                info.lines[kind] += 0
        return info

    def _decode(self, info: FileInfo, r: DecodeStats, now: float) -> None:
        key = (info.file, r.rank or "")
        series = self._series.get(key)
        if series is None:
            if len(self._series) >= self.max_series:
                self._overflow += 1
                return
            series = self._series[key] = RankSeries(info.file, key[1], r, now)
        series.add(r, now, info.run, info.launch_time)
        info.last_decode_seen = now

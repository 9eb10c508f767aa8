"""The one live state of followed logs: latest record per (file, source, kind, rank), counters, run config; no I/O.

:class:`LiveStats` is fed records as the live pipeline reads them and answers, at any
moment, with a consistent :class:`Snapshot` (taken under a lock, so a scrape or a
screen refresh in another thread never sees half an update). It is what both the
Prometheus collector and the dashboard read. It owns the live side's one
:class:`~acceptmon.measure.normalize.Normalizer`: :meth:`LiveStats.update` returns the facts it made,
so the dashboard and the doctor read those and nothing normalizes twice (a spec line has its
engine, a vLLM v0 line the interval it closes). How a record is folded in is its kind's declaration
(:mod:`acceptmon.parse.kinds`): a launch starts a run, a kind with ``series`` keeps its latest record
per rank or engine, with a counter, a histogram and the run-start baseline of the field its metrics
name. A file's current run is its records' run, which the live start makes the number ``acceptmon
runs`` gives it (:mod:`acceptmon.pipeline.start`). Series and runs are per *source*: a file's plain
lines, or each process a stream prefix names (two pods in one ``kubectl logs --prefix`` stream both
logging ``TP0`` are two series, each with its own run and launch config).

Memory stays bounded whatever the log size: one :class:`RankSeries` per (file, source, kind,
rank) up to ``max_series`` (records for further series are counted in ``overflow``,
not kept), a fixed set of histogram buckets, and counters. Each file known has a fair
share of the cap, ``max(MIN_FILE_SHARE, max_series // files)``: a file at its share gets
no new series, and when the cap is full a file below its share takes the least recently
seen series of the file holding the most, if that one is above its share.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from acceptmon.live.doctor import DOCTOR_SECONDS, FindingSource, LiveDoctor
from acceptmon.live.series import FileInfo, RankSeries, SourceInfo
from acceptmon.measure.normalize import WARMUP_BATCHES, Fact, Normalizer
from acceptmon.parse.kinds import KINDS, RecordKind, SeriesMetrics, line_kinds
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import Record

__all__ = [
    "DEFAULT_MAX_SERIES",
    "DOCTOR_SECONDS",
    "FileInfo",
    "FindingSource",
    "LiveStats",
    "RankSeries",
    "Snapshot",
    "SourceInfo",
]

DEFAULT_MAX_SERIES = 512
MIN_FILE_SHARE = 16
"""Series every file may keep, however many files there are (while the cap allows)."""


@dataclass(frozen=True)
class Snapshot:
    """A consistent copy of the live state at one moment."""

    taken: float
    series: list[RankSeries]
    files: list[FileInfo]
    overflow: int
    version: int
    findings: frozenset[tuple[str, str, str]] = frozenset()
    """(file, rule, severity) of every doctor finding holding for a file's current run."""


class LiveStats:
    """Thread-safe live aggregate of everything the followers read."""

    def __init__(
        self,
        *,
        max_series: int = DEFAULT_MAX_SERIES,
        clock: Callable[[], float] = time.monotonic,
        doctor: FindingSource | None = None,
    ) -> None:
        """``doctor``: judges the records as they come; its holding findings are part of every snapshot."""
        self.max_series = max_series
        self.clock = clock
        self.doctor = LiveDoctor(doctor, clock) if doctor is not None else None
        """Judged apart from this state's lock: see :mod:`acceptmon.live.doctor`."""
        self._lock = threading.Lock()
        self._series: dict[tuple[str, str, str, str], RankSeries] = {}
        """By (file, source, kind, rank or engine)."""
        self._files: dict[str, FileInfo] = {}
        self._overflow = 0
        self._per_file: Counter[str] = Counter()
        """Series held per file, valid for the FileInfo object recorded in ``_counted``."""
        self._counted: dict[str, FileInfo] = {}
        self.normalizer = Normalizer(doctor.warmup if doctor is not None else WARMUP_BATCHES)
        """The live side's one normalizer: every consumer of these records reads the facts it makes."""
        self.version = 0
        """Increments on every change, so a reader can tell whether anything is new."""

    def add_file(self, file: str) -> None:
        with self._lock:
            self._file(file)
            self.version += 1

    def update(self, file: str, records: Iterable[Record], tally: Tally | None = None) -> list[Fact]:
        """Take one batch of records read from ``file`` and its parser's cumulative tally; return their facts."""
        now = self.clock()
        with self._lock:
            info = self._file(file)
            facts = self.normalizer.feed(records)
            if self.doctor is not None:
                self.doctor.feed(facts)
            for fact in facts:
                r = fact.record  # normalized: vLLM v0 gauges show the latest interval, a spec line has its engine
                kind = KINDS[r.kind]
                if kind.starts_run:
                    self._launch(info, r)
                elif kind.series is not None:
                    self._add_series(info, kind, kind.series, r, now)
            if tally is not None:
                info.lines = Counter(tally.kinds)
            self.version += 1
            return facts

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

    def start_doctor(self, stop: threading.Event) -> None:
        """Judge in the doctor's own thread until ``stop``: no reader or update waits for a judgement."""
        if self.doctor is not None:
            self.doctor.start(stop)

    def take_changes(self) -> list[Any]:
        """Doctor findings that started or cleared since the last call (``Change`` objects), oldest first."""
        return self.doctor.take_changes() if self.doctor is not None else []

    def snapshot(self) -> Snapshot:
        findings = self.doctor.findings() if self.doctor is not None else frozenset()
        with self._lock:
            return Snapshot(
                taken=self.clock(),
                series=[s.copy() for s in self._series.values()],
                files=[f.copy() for f in self._files.values()],
                overflow=self._overflow,
                version=self.version,
                findings=frozenset(f for f in findings if f[0] in self._files),
            )

    def _file(self, file: str) -> FileInfo:
        info = self._files.get(file)
        if info is None:
            info = self._files[file] = FileInfo(file)
            for kind in line_kinds():
                info.lines[kind] += 0
        return info

    def _launch(self, info: FileInfo, r: Record) -> None:
        src = info.source(r)
        src.launch = info.launch = getattr(r, "config", None)  # the parser merged one start's launch lines into it
        src.run = info.run = r.run
        if r.run == src.launch_run:
            return  # a later launch line of the same server start
        info.launches += 1
        src.launch_run = info.launch_run = r.run
        src.launch_time = info.launch_time = r.timestamp

    def _add_series(self, info: FileInfo, kind: RecordKind, metrics: SeriesMetrics, r: Record, now: float) -> None:
        src: SourceInfo = info.source(r)
        src.run = info.run = r.run  # the current run, whether or not the series cap leaves room for this one
        key = (info.file, src.source, kind.name, getattr(r, kind.unit_field, None) or "")
        series = self._series.get(key)
        if series is None:
            if not self._room_for(info.file):
                self._overflow += 1
                return
            series = RankSeries(info.file, key[3], kind.name, metrics, r, now, source=src.source, origin=src.origin)
            self._series[key] = series
            self._per_file[info.file] += 1
        launched = src.launch_run == r.run
        series.add(r, now, r.run, src.launch_time if launched else None, src.launch if launched else None)
        info.last_seen = now

    def _room_for(self, file: str) -> bool:
        """Whether ``file`` may start one more series; makes room by evicting from a file above its share."""
        share = min(self.max_series, max(MIN_FILE_SHARE, self.max_series // max(1, len(self._files))))
        if self._held(file) >= share:
            return False
        if len(self._series) < self.max_series:
            return True
        victim = max(self._files, key=self._held)
        if self._held(victim) <= share:
            return False
        oldest = min((s for k, s in self._series.items() if k[0] == victim), key=lambda s: s.seen)
        del self._series[(victim, oldest.source, oldest.kind, oldest.rank)]
        self._per_file[victim] -= 1
        return True

    def _held(self, file: str) -> int:
        """Series of ``file``, counted again after the file was forgotten and came back."""
        info = self._files.get(file)
        if self._counted.get(file) is not info:
            self._counted = {f: i for f, i in self._counted.items() if f in self._files}
            self._per_file = Counter({f: n for f, n in self._per_file.items() if f in self._files})
            self._per_file[file] = sum(1 for k in self._series if k[0] == file)
            if info is not None:
                self._counted[file] = info
        return self._per_file[file]

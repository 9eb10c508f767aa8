"""What the dashboard shows, computed from records; no I/O and no UI library.

:class:`DashboardState` is fed by the live source (any thread) and read by the UI
through :meth:`DashboardState.view`, a plain immutable :class:`View`. Keeping it
here, apart from Textual, means the numbers on screen are tested without a
screen, and the UI only lays them out.

The window is measured in log time (the timestamps SGLang wrote), so a back-filled
or replayed log shows the same window as a live one. A new launch clears the
window of its file: the plots and tiles describe the current run, and the previous
run's mean becomes the reference line.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Literal

from acceptmon.live import Baseline
from acceptmon.parse import Tally
from acceptmon.records import DecodeStats, LaunchConfig, Record, ServerLaunch
from acceptmon.stats import RunSummary, Stats

Level = Literal["info", "warn", "bad"]
Health = Literal["good", "warn", "bad", "none"]
DROP = 0.7
"""Collapse: window mean below this fraction of the run's first-ten-minutes mean."""
MIN_POINTS = 5
"""Batches needed in the window before acceptance is judged."""
MAX_EVENTS = 500


@dataclass(frozen=True)
class Event:
    seen: float
    """Wall-clock time (time.time()) when it was noticed."""
    level: Level
    text: str
    file: str = ""


class _Sum:
    """Running sum and count of one value."""

    __slots__ = ("n", "total")

    def __init__(self) -> None:
        self.total, self.n = 0.0, 0

    def add(self, value: float | None) -> None:
        if value is not None:
            self.total += value
            self.n += 1

    def remove(self, other: _Sum) -> None:
        self.total -= other.total
        self.n -= other.n

    @property
    def mean(self) -> float | None:
        return self.total / self.n if self.n > 0 else None


class _Bucket:
    __slots__ = ("accept", "draft", "key", "ranks", "tput")

    def __init__(self, key: int) -> None:
        self.key = key
        self.accept, self.draft, self.tput = _Sum(), _Sum(), _Sum()
        self.ranks: dict[str, _Sum] = {}


class Window:
    """Means over the last ``seconds`` of log time, kept as time buckets with running totals.

    Adding a batch and reading a mean cost the same at 10 or 10,000 lines a second:
    memory is at most ``buckets`` buckets per file, whatever the rate.
    """

    def __init__(self, seconds: float, buckets: int = 120) -> None:
        self.width = max(1.0, seconds / buckets)
        self.span = max(1, round(seconds / self.width))
        self.clear()

    def clear(self) -> None:
        self.buckets: deque[_Bucket] = deque()
        self.accept, self.draft, self.tput = _Sum(), _Sum(), _Sum()
        self.ranks: dict[str, _Sum] = {}

    def add(self, t: float, rank: str, accept: float | None, draft: float | None, tput: float | None) -> None:
        key = int(t // self.width)
        bucket = self._bucket(key)
        for agg in (bucket, self):
            agg.accept.add(accept)
            agg.draft.add(draft)
            agg.tput.add(tput)
            per_rank = agg.ranks.get(rank)
            if per_rank is None:
                per_rank = agg.ranks[rank] = _Sum()
            per_rank.add(accept)

    def _bucket(self, key: int) -> _Bucket:
        b = self.buckets
        if not b or key > b[-1].key:
            b.append(_Bucket(key))
            while b[0].key < key - self.span:
                self._drop(b.popleft())
            return b[-1]
        for bucket in reversed(b):  # a line logged a second earlier than the last one (ranks interleave)
            if bucket.key <= key:
                return bucket
        return b[0]

    def _drop(self, bucket: _Bucket) -> None:
        self.accept.remove(bucket.accept)
        self.draft.remove(bucket.draft)
        self.tput.remove(bucket.tput)
        for rank, agg in bucket.ranks.items():
            self.ranks[rank].remove(agg)

    def rank_mean(self, rank: str) -> float | None:
        agg = self.ranks.get(rank)
        return agg.mean if agg is not None else None

    def series(self, attr: str) -> list[tuple[float, float]]:
        """(seconds since the first bucket, mean) per bucket holding a value."""
        if not self.buckets:
            return []
        first = self.buckets[0].key
        out = []
        for b in self.buckets:
            mean = getattr(b, attr).mean
            if mean is not None:
                out.append(((b.key - first) * self.width, round(mean, 3)))
        return out


@dataclass
class _Rank:
    file: str
    rank: str
    last: DecodeStats
    seen: float


@dataclass
class _File:
    file: str
    launch: LaunchConfig | None = None
    launch_time: datetime | None = None
    run: int = 0
    """Launches read live (history adds ``runs_before``)."""
    runs_before: int = 0
    window: Window = field(default_factory=lambda: Window(300.0))
    last_t: float | None = None
    baseline: Baseline = field(default_factory=Baseline)
    """The current run's first ten minutes; its start is the run's start."""
    last_seen: float | None = None
    last: DecodeStats | None = None
    collapsed: bool = False
    stale: bool = False
    unrecognized: int = 0
    waiting: bool = False
    lines: int = 0


@dataclass(frozen=True)
class RankRow:
    file: str
    rank: str
    accept_len: float | None
    window_mean: float | None
    throughput: float | None
    running: int | None
    queued: int | None
    seen_ago: float


@dataclass(frozen=True)
class Tiles:
    accept_len_last: float | None = None
    accept_len_mean: float | None = None
    draft_accept_rate: float | None = None
    accept_rate: float | None = None
    throughput: float | None = None
    running: int | None = None
    queued: int | None = None
    token_usage: float | None = None
    health: Health = "none"


@dataclass(frozen=True)
class View:
    """Everything on the screen, at one moment."""

    files: tuple[str, ...]
    waiting: tuple[str, ...]
    launch: LaunchConfig | None
    run: int
    run_start: datetime | None
    last_decode_ago: float | None
    last_decode_time: datetime | None
    tiles: Tiles
    accept_series: tuple[tuple[float, float], ...]
    """(seconds since the window's start, mean accept length over ranks) per bucket."""
    throughput_series: tuple[tuple[float, float], ...]
    """(seconds, mean per-rank generation throughput) per bucket."""
    accept_reference: float | None
    accept_reference_label: str
    throughput_reference: float | None
    throughput_reference_label: str
    ranks: tuple[RankRow, ...]
    history: tuple[RunSummary, ...]
    current_run_key: tuple[str, int] | None
    events: tuple[Event, ...]
    lines: int
    backfill: float | None
    """Fraction of the start-up back-fill done, None once live."""
    version: int


def _epoch(ts: datetime | None, fallback: float) -> float:
    return ts.timestamp() if ts is not None else fallback


class DashboardState:
    """Thread-safe model of the dashboard."""

    def __init__(
        self,
        *,
        window: float = 300.0,
        alert_below: float | None = None,
        stale_after: float = 30.0,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self.window = window
        self.alert_below = alert_below
        self.stale_after = stale_after
        self.clock = clock
        self._lock = threading.Lock()
        self._files: dict[str, _File] = {}
        self._ranks: dict[tuple[str, str], _Rank] = {}
        self._stats = Stats()
        self._history: dict[str, list[RunSummary]] = {}
        self._events: deque[Event] = deque(maxlen=MAX_EVENTS)
        self._last_file: str | None = None
        self.backfill: Callable[[], float | None] = lambda: None
        self.version = 0

    # -- input (any thread) ------------------------------------------------------------

    def add(self, file: str, records: Iterable[Record], tally: Tally | None = None) -> None:
        now = self.clock()
        with self._lock:
            f = self._file(file)
            records = list(records)
            self._stats.update(records)
            for r in records:
                if isinstance(r, DecodeStats):
                    self._decode(f, r, now)
                elif isinstance(r, ServerLaunch):
                    self._launch(f, r, now)
            if tally is not None:
                f.lines = tally.lines
                self._unrecognized(f, tally, now)
            self.version += 1

    def set_waiting(self, file: str, waiting: bool) -> None:
        with self._lock:
            f = self._file(file)
            if waiting and not f.waiting:
                self._event("warn", f"{file}: does not exist (yet); waiting for it", file)
            f.waiting = waiting
            self.version += 1

    def set_history(self, file: str, runs: list[RunSummary]) -> None:
        """Runs read from the part of ``file`` before the live start (by a background worker)."""
        with self._lock:
            f = self._file(file)
            f.runs_before = max((r.run for r in runs), default=0)
            self._history[file] = runs
            self.version += 1

    def note(self, text: str) -> None:
        """An informational event (start position, back-fill, resumed state)."""
        with self._lock:
            self._event("info", text)
            self.version += 1

    def reset_window(self) -> None:
        with self._lock:
            for f in self._files.values():
                f.window.clear()
            self.version += 1

    def check(self) -> None:
        """Time-driven events: staleness (no decode line while requests are queued)."""
        now = self.clock()
        with self._lock:
            for f in self._files.values():
                if f.last_seen is None:
                    continue
                queued = sum(r.last.queue_req or 0 for r in self._ranks.values() if r.file == f.file)
                stale = now - f.last_seen > self.stale_after and queued > 0
                if stale and not f.stale:
                    self._event(
                        "bad",
                        f"{f.file}: no decode line for {now - f.last_seen:.0f} s while {queued} requests are queued",
                        f.file,
                    )
                    self.version += 1
                f.stale = stale

    # -- output --------------------------------------------------------------------------

    def view(self) -> View:
        now = self.clock()
        with self._lock:
            files = tuple(self._files)
            cur = self._files.get(self._last_file or "") if self._last_file else None
            ranks = sorted(self._ranks.values(), key=lambda r: (r.file, r.rank))
            rows = tuple(
                RankRow(
                    file=r.file,
                    rank=r.rank,
                    accept_len=r.last.accept_len,
                    window_mean=_round(self._files[r.file].window.rank_mean(r.rank)),
                    throughput=r.last.gen_throughput,
                    running=r.last.running_req,
                    queued=r.last.queue_req,
                    seen_ago=max(0.0, now - r.seen),
                )
                for r in ranks
            )
            tiles = self._tiles(cur, ranks)
            history = self._history_rows()
            accept_ref, accept_label, tput_ref, tput_label = self._references(cur, history)
            last_ts = cur.last_t if cur else None
            return View(
                files=files,
                waiting=tuple(f.file for f in self._files.values() if f.waiting),
                launch=cur.launch if cur else None,
                run=(cur.runs_before + cur.run) if cur else 0,
                run_start=cur.baseline.start if cur else None,
                last_decode_ago=(now - cur.last_seen) if cur and cur.last_seen is not None else None,
                last_decode_time=datetime.fromtimestamp(last_ts) if last_ts is not None else None,
                tiles=tiles,
                accept_series=tuple(cur.window.series("accept")) if cur else (),
                throughput_series=tuple(cur.window.series("tput")) if cur else (),
                accept_reference=accept_ref,
                accept_reference_label=accept_label,
                throughput_reference=tput_ref,
                throughput_reference_label=tput_label,
                ranks=rows,
                history=tuple(history),
                current_run_key=(cur.file, cur.runs_before + cur.run) if cur else None,
                events=tuple(self._events),
                lines=sum(f.lines for f in self._files.values()),
                backfill=self.backfill(),
                version=self.version,
            )

    # -- internals (under the lock) -----------------------------------------------------

    def _file(self, file: str) -> _File:
        f = self._files.get(file)
        if f is None:
            f = self._files[file] = _File(file, window=Window(self.window))
        return f

    def _event(self, level: Level, text: str, file: str = "") -> None:
        self._events.append(Event(self.clock(), level, text, file))

    def _launch(self, f: _File, r: ServerLaunch, now: float) -> None:
        f.run += 1
        f.launch, f.launch_time = r.config, r.timestamp
        f.baseline.restart(r.timestamp)
        f.window.clear()
        f.last = None
        f.collapsed = False
        for key in [k for k in self._ranks if k[0] == f.file]:
            del self._ranks[key]
        c = r.config
        spec = (
            f"{c.spec_algorithm} steps {c.spec_num_steps} topk {c.spec_eagle_topk} draft {c.spec_num_draft_tokens}"
            if c.spec_algorithm
            else "no speculation"
        )
        self._event("info", f"launch: {c.model_path or 'model ?'}, {spec}", f.file)
        self._last_file = f.file

    def _decode(self, f: _File, r: DecodeStats, now: float) -> None:
        self._last_file = f.file
        f.last_seen, f.last = now, r
        t = _epoch(r.timestamp, now)
        if f.baseline.start is None:
            f.baseline.start = r.timestamp  # decode lines before any launch: the run starts with them
        rank = r.rank or ""
        self._ranks[(f.file, rank)] = _Rank(f.file, rank, r, now)
        f.last_t = t
        f.window.add(t, rank, r.accept_len, r.draft_accept_rate, r.gen_throughput)
        f.baseline.add(r.accept_len, r.timestamp)
        self._judge(f)

    def _judge(self, f: _File) -> None:
        acc = f.window.accept
        if acc.n < MIN_POINTS:
            return
        mean = acc.total / acc.n
        reason = None
        if self.alert_below is not None and mean < self.alert_below:
            reason = f"below {self.alert_below:g}"
        elif (base := f.baseline.mean) is not None and f.baseline.count >= MIN_POINTS and mean < DROP * base:
            reason = f"{100 * (1 - mean / base):.0f}% below the run's start"
        if reason and not f.collapsed:
            self._event("bad", f"acceptance collapse: window mean accept len {mean:.2f}, {reason}", f.file)
        elif not reason and f.collapsed:
            self._event("info", f"acceptance recovered: window mean accept len {mean:.2f}", f.file)
        f.collapsed = reason is not None

    def _unrecognized(self, f: _File, tally: Tally, now: float) -> None:
        n = tally.kinds.get("unrecognized", 0)
        if n > f.unrecognized:
            kept = [u for u in tally.unrecognized if u[0] == f.file]
            sample = f": line {kept[-1][1]}: {kept[-1][2][:100]}" if kept else ""
            self._event("warn", f"format drift: {n - f.unrecognized} unrecognized stats-like line(s){sample}", f.file)
            f.unrecognized = n

    def _tiles(self, cur: _File | None, ranks: list[_Rank]) -> Tiles:
        if cur is None:
            return Tiles()
        mine = [r for r in ranks if r.file == cur.file]
        last = cur.last
        mean = cur.window.accept.mean
        health: Health = "none"
        if mean is not None:
            health = "good"
            base = cur.baseline.mean
            if cur.collapsed:
                health = "bad"
            elif base is not None and mean < 0.85 * base:
                health = "warn"
        tputs = [r.last.gen_throughput for r in mine if r.last.gen_throughput is not None]
        usage = [r.last.token_usage for r in mine if r.last.token_usage is not None]
        return Tiles(
            accept_len_last=last.accept_len if last else None,
            accept_len_mean=_round(mean),
            draft_accept_rate=_round(cur.window.draft.mean),
            accept_rate=last.accept_rate if last else None,
            throughput=round(sum(tputs), 2) if tputs else None,
            running=_sum_int(r.last.running_req for r in mine),
            queued=_sum_int(r.last.queue_req for r in mine),
            token_usage=max(usage) if usage else None,
            health=health,
        )

    def _history_rows(self) -> list[RunSummary]:
        rows: list[RunSummary] = []
        for file in self._files:
            before = self._history.get(file, [])
            offset = self._files[file].runs_before
            rows.extend(before)
            for s in self._stats.summaries():
                if s.file != file:
                    continue
                if s.run == 0 and s.batches and offset:
                    continue  # decode lines ahead of the first live launch belong to the last history run
                rows.append(s.model_copy(update={"run": s.run + offset}))
        return rows

    def _references(self, cur: _File | None, history: list[RunSummary]) -> tuple[float | None, str, float | None, str]:
        if cur is None:
            return None, "", None, ""
        runs = [h for h in history if h.file == cur.file]
        current = cur.runs_before + cur.run
        earlier = [h for h in runs if h.run < current and h.batches]
        prev = earlier[-1] if earlier else None
        accept_ref = prev.accept_len_mean if prev else None
        accept_label = f"run {prev.run} mean" if prev and accept_ref is not None else ""
        base = [h for h in earlier if h.spec_algorithm is None and h.gen_throughput_mean is not None]
        if base:
            return accept_ref, accept_label, base[-1].gen_throughput_mean, f"no-spec run {base[-1].run} mean"
        if prev and prev.gen_throughput_mean is not None:
            return accept_ref, accept_label, prev.gen_throughput_mean, f"run {prev.run} mean"
        return accept_ref, accept_label, None, ""


def _round(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _sum_int(values: Iterable[int | None]) -> int | None:
    got = [v for v in values if v is not None]
    return sum(got) if got else None

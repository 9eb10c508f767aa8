"""What the dashboard shows, computed from records; no I/O and no UI library.

:class:`DashboardState` is fed by the live source (any thread) and read by the UI
through :meth:`DashboardState.view`, a plain immutable :class:`View`. The latest
record per rank and each file's launch, run and waiting state live in the one live
state the exporter reads too (:class:`~acceptmon.live.state.LiveStats`); this
adds only what the screen needs on top: the window, the run-start baseline,
events and the run history. Keeping it
here, apart from Textual, means the numbers on screen are tested without a
screen, and the UI only lays them out.

Records are normalized once, by the live state
(:meth:`~acceptmon.live.state.LiveStats.update` returns the facts), and everything here reads
those facts: acceptance comes from records whose kind has the ``acceptance`` role (SGLang
decode lines, vLLM spec lines), load (throughput, running, queued, KV) from the ``load`` role
(decode lines, vLLM throughput lines); rows are ranks or engines (see :mod:`acceptmon.tui.tiles`).
Runs are numbered as ``acceptmon runs`` numbers them (the live start gives the parser the
file's run there), in the header, the history and the exporter alike. The window is measured
in log time (the timestamps the server wrote), so a back-filled or replayed log shows the same
window as a live one. A new launch clears the
window of its file: the plots and tiles describe the current run, and the previous
run's mean becomes the reference line. Events carry the log time of the record
behind them (None for notes about acceptmon itself), and a file whose input has
ended (a finished replay) is never called stalled. Of several files, the view describes one
(:attr:`View.shown`): the one :meth:`DashboardState.select` chose, else the newest run among the
files with data in their current run.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from datetime import datetime

from acceptmon.live.state import FileInfo, LiveStats, RankSeries
from acceptmon.measure.aggregate import RunSummary, Stats
from acceptmon.measure.window import Window
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.tui.filestate import FileState
from acceptmon.tui.history import References, history_rows, launch_text, references, same_config_text
from acceptmon.tui.position_chart import positions
from acceptmon.tui.tiles import accepts, loads, rank_rows, tiles, unit
from acceptmon.tui.verdict import judge
from acceptmon.tui.view import Event, Level, Tiles, View, finding_event

DROP = 0.7
"""Collapse: window mean below this fraction of the run's first-ten-minutes mean."""
MIN_POINTS = 5
"""Batches needed in the window before acceptance is judged."""
MAX_EVENTS = 500


class DashboardState:
    """Thread-safe model of the dashboard, over the shared live state."""

    def __init__(
        self,
        *,
        window: float = 300.0,
        alert_below: float | None = None,
        stale_after: float = 30.0,
        clock: Callable[[], float] = time.time,
        live: LiveStats | None = None,
    ) -> None:
        """``live``: the live state to fold records into and read from (the exporter's, when both run)."""
        self.window = window
        self.alert_below = alert_below
        self.stale_after = stale_after
        self.clock = clock
        self.live = live if live is not None else LiveStats(clock=clock)
        self._lock = threading.Lock()
        self._files: dict[str, FileState] = {}
        self._stats = Stats()
        self._history: dict[str, list[RunSummary]] = {}
        self._events: deque[Event] = deque(maxlen=MAX_EVENTS)
        self._selected: str | None = None
        """The file the user chose to see (``select``); None: the newest run with data."""
        self._starts = 0
        """Runs started so far, over all files: each file's current run is numbered by it (newest highest)."""
        self._ended: set[str] = set()
        """Files no more input will come from (a finished replay): their silence is not a stall."""
        self.backfill: Callable[[], float | None] = lambda: None
        self.version = 0

    # -- input (any thread) ------------------------------------------------------------

    def add(self, file: str, records: Iterable[Record], tally: Tally | None = None) -> None:
        now = self.clock()
        with self._lock:
            facts = self.live.update(file, records, tally)  # normalized once, there
            f = self._file(file)
            self._stats.fold(facts)
            for fact in facts:
                r = fact.record
                if KINDS[r.kind].starts_run:
                    self._launch(f, r)
                    continue
                if not f.started:  # stats lines before any launch line: the run starts with them
                    f.started = self._start()
                f.add(fact, now)
                if fact.batch is not None:
                    self._judge(f, r.timestamp)
            if tally is not None:
                self._unrecognized(f, tally)
            self._findings()
            self.version += 1

    def set_waiting(self, file: str, waiting: bool) -> None:
        with self._lock:
            self._file(file)
            info = self._info(file)
            if waiting and not (info is not None and info.waiting):
                self._event("warn", f"{file}: does not exist (yet); waiting for it", file)
            self.live.set_waiting(file, waiting)
            self.version += 1

    def set_history(self, file: str, runs: list[RunSummary]) -> None:
        """Runs read from the part of ``file`` before the live start (by a background worker)."""
        with self._lock:
            self._file(file)
            self._history[file] = runs
            self.version += 1

    def note(self, text: str) -> None:
        """An informational event (start position, back-fill, resumed state)."""
        with self._lock:
            self._event("info", text)
            self.version += 1

    def end_of_input(self, file: str) -> None:
        """Nothing more will be written to ``file`` (the demo's replay finished): no stall alarms for it."""
        with self._lock:
            self._ended.add(file)
            self.version += 1

    def select(self, file: str | None) -> None:
        """Show ``file`` in the tiles, plots and header; None: the newest run with data (the default)."""
        with self._lock:
            self._selected = file
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
            load = [s for s in self._current() if loads(s)]
            for f in self._files.values():
                if f.last_seen is None or f.file in self._ended:
                    continue
                queued = sum(getattr(r.last, "queue_req", None) or 0 for r in load if r.file == f.file)
                stale = now - f.last_seen > self.stale_after and queued > 0
                if stale and not f.stale:
                    last = f" (last logged {datetime.fromtimestamp(f.last_t):%H:%M:%S})" if f.last_t else ""
                    kind = f.last.kind if f.last else "decode"
                    text = f"no {kind} line for {now - f.last_seen:.0f} s{last} while {queued} requests are queued"
                    self._event("bad", f"{f.file}: {text}", f.file)
                    self.version += 1
                f.stale = stale

    # -- output --------------------------------------------------------------------------

    def view(self) -> View:
        now = self.clock()
        with self._lock:
            files = tuple(self._files)
            current = [s for s in self._current() if accepts(s) or loads(s)]
            cur = self._shown({s.file for s in current})
            info = self._info(cur.file) if cur else None
            rows = tuple(rank_rows(current, {f: x.window for f, x in self._files.items()}, now))
            mine = [s for s in current if cur is not None and s.file == cur.file]
            history = self._history_rows()
            run = info.run if info else 0
            refs = self._references(cur, history, run, unit(mine))
            last_ts = cur.last_t if cur else None
            infos = {i.file: i for i in self.live.snapshot().files}
            return View(
                files=files,
                shown=cur.file if cur else None,
                waiting=tuple(f for f in files if f in infos and infos[f].waiting),
                launch=info.launch if info else None,
                run=run,
                run_start=cur.baseline.start if cur else None,
                last_decode_ago=(now - cur.last_seen) if cur and cur.last_seen is not None else None,
                last_decode_time=datetime.fromtimestamp(last_ts) if last_ts is not None else None,
                tiles=self._tiles(cur, [s for s in mine if loads(s)]),
                accept_series=tuple(cur.window.series("accept")) if cur else (),
                throughput_series=tuple(cur.window.series("tput")) if cur else (),
                accept_reference=refs.accept,
                accept_reference_label=refs.accept_label,
                throughput_reference=refs.throughput,
                throughput_reference_label=refs.throughput_label,
                ranks=rows,
                unit=unit(mine),
                positions=positions(mine),
                stats_kind=cur.last.kind if cur and cur.last else "decode",
                history=tuple(history),
                current_run_key=(cur.file, run) if cur else None,
                events=tuple(self._events),
                lines=sum(sum(i.lines.values()) for f, i in infos.items() if f in self._files),
                backfill=self.backfill(),
                version=self.version,
            )

    # -- internals (under the lock) -----------------------------------------------------

    def _file(self, file: str) -> FileState:
        f = self._files.get(file)
        if f is None:
            f = self._files[file] = FileState(file, window=Window(self.window))
        return f

    def _start(self) -> int:
        self._starts += 1
        return self._starts

    def _shown(self, with_data: set[str]) -> FileState | None:
        """The file the screen describes: the one selected, else the newest run among files with data in it.

        A file without any (a launch and nothing after it yet, a server that failed to start) is shown
        only when no file has data, so one file's silence never blanks another's tiles; "newest" is in
        the order runs started as read, so two files both logging never take turns."""
        chosen = self._files.get(self._selected) if self._selected is not None else None
        if chosen is not None:
            return chosen
        pool = [f for f in self._files.values() if f.file in with_data] or list(self._files.values())
        return max(pool, key=lambda f: f.started, default=None)  # ties: the first file named

    def _info(self, file: str) -> FileInfo | None:
        return next((i for i in self.live.snapshot().files if i.file == file), None)

    def _current(self) -> list[RankSeries]:
        """The series (latest record per kind and rank or engine) of each file's current run."""
        snap = self.live.snapshot()
        runs = {i.file: i.run for i in snap.files}
        return [s for s in snap.series if s.run == runs.get(s.file)]

    def compare_runs(self) -> None:
        """Judge each file's current run against its previous one (slow: call off the UI thread)."""
        with self._lock:
            work = [(f, f.pair.sides(), f.last.timestamp if f.last else None) for f in self._files.values()]
        for f, sides, at in work:
            if sides is None:
                continue
            verdict, text = judge(*sides)
            with self._lock:
                key = (sides[0], sides[2], verdict)
                if f.pair.judged != key:
                    f.pair.judged = key
                    self._event("bad" if verdict == "worse" else "info", text, f.file, at)
                    self.version += 1

    def _findings(self) -> None:
        """Doctor findings that started or cleared, as events at their file's latest log time."""
        for change in self.live.take_changes():
            f = self._files.get(change.finding.file)
            self._events.append(finding_event(change, f.last.timestamp if f and f.last else None))

    def _event(self, level: Level, text: str, file: str = "", at: datetime | None = None) -> None:
        self._events.append(Event(at, level, text, file))

    def _launch(self, f: FileState, r: Record) -> None:
        if not f.launch(r):
            return
        c: LaunchConfig = f.config or LaunchConfig()
        same_as = r.run - 1 if f.same_config else None
        self._event("info", launch_text(c, same_as), f.file, r.timestamp)
        f.started = self._start()

    def _judge(self, f: FileState, at: datetime | None) -> None:
        acc = f.window.accept
        if acc.count < MIN_POINTS:
            return
        mean = acc.total / acc.count
        if f.same_config:
            f.same_config = False
            text = same_config_text(self._history_rows(), f.file, f.run or 0, mean)
            self._event("info", text, f.file, at)
        reason = None
        if self.alert_below is not None and mean < self.alert_below:
            reason = f"below {self.alert_below:g}"
        elif (base := f.baseline.mean) is not None and f.baseline.count >= MIN_POINTS and mean < DROP * base:
            reason = f"{100 * (1 - mean / base):.0f}% below the run's start"
        if reason and not f.collapsed:
            self._event("bad", f"acceptance collapse: window mean accept len {mean:.2f}, {reason}", f.file, at)
        elif not reason and f.collapsed:
            self._event("info", f"acceptance recovered: window mean accept len {mean:.2f}", f.file, at)
        f.collapsed = reason is not None

    def _unrecognized(self, f: FileState, tally: Tally) -> None:
        n = tally.kinds.get("unrecognized", 0)
        if n > f.unrecognized:
            kept = [u for u in tally.unrecognized if u[0] == f.file]
            sample = f": line {kept[-1][1]}: {kept[-1][2][:100]}" if kept else ""
            self._event("warn", f"format drift: {n - f.unrecognized} unrecognized stats-like line(s){sample}", f.file)
            f.unrecognized = n

    def _tiles(self, cur: FileState | None, load: list[RankSeries]) -> Tiles:
        if cur is None:
            return Tiles()
        return tiles(cur.window, cur.baseline.mean, cur.collapsed, cur.last, load)

    def _history_rows(self) -> list[RunSummary]:
        return history_rows({f: self._history.get(f, []) for f in self._files}, self._stats.summaries())

    def _references(self, cur: FileState | None, history: list[RunSummary], run: int, rows: str) -> References:
        if cur is None:
            return References()
        return references(history, cur.file, run, rows)

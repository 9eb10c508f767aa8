"""What the dashboard keeps per followed file on top of the shared live state. Pure.

A file's rows are its ranks (SGLang decode lines) or its engines (vLLM): a record is
named by the field its kind's live series names (:attr:`acceptmon.parse.kinds.SeriesMetrics.rank_field`),
and a record without one belongs to the last engine its file named, as in the live
state (a vLLM spec line follows its engine's throughput line).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from acceptmon.measure.aggregate import Baseline
from acceptmon.measure.window import Window
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import DecodeStats, LaunchConfig, Record, SpecStats, ThroughputStats
from acceptmon.tui.verdict import RunPair

Accept = DecodeStats | SpecStats
"""A record with the acceptance of one interval: an SGLang decode line or a vLLM spec line."""


@dataclass
class FileState:
    """The window, baseline, collapse state and run bookkeeping of one file."""

    file: str
    runs_before: int = 0
    """Launches in the history read before the live start (the live state counts those read live)."""
    window: Window = field(default_factory=lambda: Window(300.0))
    last_t: float | None = None
    baseline: Baseline = field(default_factory=Baseline)
    """The current run's first ten minutes; its start is the run's start."""
    last_seen: float | None = None
    last: Accept | None = None
    collapsed: bool = False
    stale: bool = False
    unrecognized: int = 0
    launches: int = 0
    """Launches read live; the current run is ``runs_before + launches``."""
    launch_at: tuple[int, int] = (0, 0)
    """(run index, line) of the last launch line: a later line of the same run continues that launch."""
    config: LaunchConfig | None = None
    same_config: bool = False
    """The current run repeats the previous run's config; said with both means once this one is known."""
    pair: RunPair = field(default_factory=RunPair)
    engine: str | None = None
    """The engine of the file's last record that named one."""
    load: dict[str, ThroughputStats] = field(default_factory=dict)
    """Per engine of the current run, its latest throughput line (fields a line lacks kept from earlier ones)."""

    def rank_of(self, r: Record) -> str:
        """The row a record belongs to: its rank, or its engine (none named: the file's last engine)."""
        metrics = KINDS[r.kind].series
        name_field = KINDS[r.kind].unit_field if metrics is not None else "rank"
        name = getattr(r, name_field, None)
        if name_field != "rank":
            self.engine = name = name or self.engine
        return name or ""

    def throughput(self, r: ThroughputStats, now: float) -> None:
        """An engine's load line: its throughput goes into the window, the rest waits for its spec line."""
        engine = self.rank_of(r)
        prev = self.load.get(engine)
        merged = r if prev is None else prev.model_copy(update={k: v for k, v in r.__dict__.items() if v is not None})
        self.load[engine] = merged
        if r.gen_throughput is not None:  # v0's prefix-cache line carries none
            self.window.add(epoch(r.timestamp, now), engine, None, None, r.gen_throughput)

    def accept(self, r: Accept, now: float) -> None:
        """A decode or spec line: acceptance (and, for decode, throughput) of one interval of one row."""
        rank = self.rank_of(r)
        self.last_seen, self.last = now, r
        self.last_t = t = epoch(r.timestamp, now)
        if self.baseline.start is None:
            self.baseline.start = r.timestamp  # stats lines before any launch: the run starts with them
        tput = r.gen_throughput if isinstance(r, DecodeStats) else None
        self.window.add(t, rank, r.accept_len, r.draft_accept_rate, tput)
        self.baseline.add(r.accept_len, r.timestamp)
        self.pair.add(r, self.runs_before + self.launches, self.load.get(rank))

    def launch(self, r: Record) -> bool:
        """A launch line; False when it continues the current launch (one server start logs several)."""
        if r.run == self.launch_at[0] and r.line > self.launch_at[1]:
            self.launch_at = (r.run, r.line)
            return False
        self.launch_at = (r.run, r.line)
        self.baseline.restart(r.timestamp)
        self.window.clear()
        self.last, self.collapsed, self.load = None, False, {}
        c: LaunchConfig = getattr(r, "config", LaunchConfig())
        self.launches += 1
        self.pair.launch(self.runs_before + self.launches)
        self.same_config = c == self.config
        self.config = c
        return True


def epoch(ts: datetime | None, fallback: float) -> float:
    return ts.timestamp() if ts is not None else fallback

"""What the dashboard keeps per followed file on top of the shared live state. Pure.

It reads normalized facts (:mod:`acceptmon.measure.normalize`), never records as logged: a
fact's batch or load names its unit (a rank, or a vLLM engine: a spec line has its engine's
name already), and a batch carries its unit's load and its ``steady`` mark. A file's run is
its records' run, numbered as ``acceptmon runs`` numbers it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from acceptmon.measure.aggregate import Baseline
from acceptmon.measure.normalize import Fact
from acceptmon.measure.window import Window
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.tui.verdict import RunPair


@dataclass
class FileState:
    """The window, baseline, collapse state and run bookkeeping of one file."""

    file: str
    window: Window = field(default_factory=lambda: Window(300.0))
    last_t: float | None = None
    baseline: Baseline = field(default_factory=Baseline)
    """The current run's first ten minutes; its start is the run's start."""
    last_seen: float | None = None
    last: Record | None = None
    """The latest record with the ``acceptance`` role (a decode line, a vLLM spec line)."""
    collapsed: bool = False
    stale: bool = False
    unrecognized: int = 0
    run: int | None = None
    """The run of the last launch line read live (None before one)."""
    config: LaunchConfig | None = None
    same_config: bool = False
    """The current run repeats the previous run's config; said with both means once this one is known."""
    pair: RunPair = field(default_factory=RunPair)
    started: int = 0
    """When the current run started, as read (the dashboard's count over all files); 0 before any line of it."""

    def add(self, fact: Fact, now: float) -> None:
        """A batch (acceptance) or a load line: into the window, the run's baseline and the run pair."""
        b, load, r = fact.batch, fact.load, fact.record
        t = epoch(r.timestamp, now)
        tput = load.gen_throughput if load is not None else None
        if b is not None:
            self.last_seen, self.last, self.last_t = now, r, t
            if self.baseline.start is None:
                self.baseline.start = r.timestamp  # stats lines before any launch: the run starts with them
            self.baseline.add(b.accept_len, r.timestamp)
            self.window.add(t, b.unit, b.accept_len, b.accept_rate, tput)
        elif load is not None and tput is not None:  # a load line of its own (vLLM): its rate, once
            self.window.add(t, load.unit, None, None, tput)
        self.pair.add(fact)

    def launch(self, r: Record) -> bool:
        """A launch line; False when it continues the current launch (one server start logs several)."""
        c: LaunchConfig = getattr(r, "config", None) or LaunchConfig()
        if r.run == self.run:
            self.config = c  # the parser merged the start's launch lines: the config so far
            return False
        self.run = r.run
        self.baseline.restart(r.timestamp)
        self.window.clear()
        self.last, self.collapsed = None, False
        self.pair.launch(r.run)
        self.same_config = c == self.config
        self.config = c
        return True


def epoch(ts: datetime | None, fallback: float) -> float:
    return ts.timestamp() if ts is not None else fallback

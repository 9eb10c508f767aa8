"""What the dashboard keeps per followed file on top of the shared live state. Pure."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from acceptmon.records import DecodeStats, LaunchConfig
from acceptmon.stats import Baseline
from acceptmon.tui.verdict import RunPair
from acceptmon.window import Window


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
    last: DecodeStats | None = None
    collapsed: bool = False
    stale: bool = False
    unrecognized: int = 0
    launches: int = 0
    """Launches read live; the current run is ``runs_before + launches``."""
    config: LaunchConfig | None = None
    same_config: bool = False
    """The current run repeats the previous run's config; said with both means once this one is known."""
    pair: RunPair = field(default_factory=RunPair)


def epoch(ts: datetime | None, fallback: float) -> float:
    return ts.timestamp() if ts is not None else fallback

"""What one dashboard frame holds: plain immutable values, computed by :mod:`acceptmon.tui.model`."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from acceptmon.records import LaunchConfig
from acceptmon.stats import RunSummary

Level = Literal["info", "warn", "bad"]
Health = Literal["good", "warn", "bad", "none"]


@dataclass(frozen=True)
class Event:
    seen: float
    """Wall-clock time (time.time()) when it was noticed."""
    level: Level
    text: str
    file: str = ""


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

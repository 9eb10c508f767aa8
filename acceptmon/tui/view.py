"""What one dashboard frame holds (plain immutable values, computed by :mod:`acceptmon.tui.model`) and its words.

The text helpers here (header parts, event lines) are pure, so what the screen says
is tested without a screen; :mod:`acceptmon.tui.app` only lays them out.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from acceptmon.display import number, short_model
from acceptmon.measure.aggregate import RunSummary
from acceptmon.parse.records import LaunchConfig

Level = Literal["info", "warn", "bad"]
Health = Literal["good", "warn", "bad", "none"]


Part = tuple[str, str]
"""A run of header text and its Rich style."""
NO_LOG_TIME = "--:--:--"
"""The time column of an event with no log time (a note about acceptmon itself, not about a log line)."""


@dataclass(frozen=True)
class Event:
    at: datetime | None
    """Log time of the record that caused it; None for notes with no log line behind them."""
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
class Position:
    """One bar of the per-position acceptance chart (vLLM 0.9+ logs the rates per draft position)."""

    position: int
    """1 for the first draft token."""
    mean: float | None
    """The current run's fraction of drafts accepted up to this position, weighted by drafts (all engines)."""
    last: float | None
    """The same over each engine's latest interval."""


@dataclass(frozen=True)
class Tiles:
    accept_len_last: float | None = None
    accept_len_mean: float | None = None
    draft_accept_rate: float | None = None
    accept_rate: float | None = None
    throughput: float | None = None
    throughput_ranks: int = 0
    """Ranks whose latest gen throughput is in ``throughput`` (a sum)."""
    unit: str = "rank"
    """What the file's rows are: ``rank`` (SGLang ranks) or ``engine`` (vLLM engines)."""
    running: int | None = None
    queued: int | None = None
    token_usage: float | None = None
    health: Health = "none"


@dataclass(frozen=True)
class View:
    """Everything on the screen, at one moment."""

    files: tuple[str, ...]
    shown: str | None
    """The file the tiles, plots, header run and the history's ``*`` are for (one of ``files``)."""
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
    unit: str
    """What the current file's rank rows are: ``rank`` or ``engine``."""
    positions: tuple[Position, ...]
    """Per draft position acceptance of the current file's run; empty when its server logs none."""
    stats_kind: str
    """The kind of the current file's acceptance lines (``decode``, ``spec``): the header's "last decode"."""
    history: tuple[RunSummary, ...]
    current_run_key: tuple[str, int] | None
    events: tuple[Event, ...]
    lines: int
    backfill: float | None
    """Fraction of the start-up back-fill done, None once live."""
    version: int


def ago(seconds: float | None, suffix: str = " ago") -> str:
    if seconds is None:
        return "-"
    if seconds < 60:
        return f"{seconds:.0f}s{suffix}"
    if seconds < 3600:
        return f"{seconds / 60:.0f}m{suffix}"
    return f"{seconds / 3600:.1f}h{suffix}"


def header_parts(v: View, label: str, *, paused: bool, narrow: bool) -> list[Part]:
    """What the run is, then how reading goes; PAUSED first, so it shows at any width. Shorter when narrow."""
    parts: list[Part] = [(" PAUSED " if narrow else " PAUSED: p resumes ", "bold reverse red")] if paused else []
    parts += [] if narrow else [("acceptmon", "bold")]
    parts.append((label or ", ".join(f.rsplit("/", 1)[-1] for f in v.files), "bold"))
    if len(v.files) > 1 and v.shown is not None:  # the tiles, plots and run below are one file's
        parts.append((f"showing {v.shown.rsplit('/', 1)[-1]} (f: next{'' if narrow else ' file'})", "bold reverse"))
    if v.run:
        start = (
            "?" if v.run_start is None else f"{v.run_start:%H:%M:%S}" if narrow else f"{v.run_start:%Y-%m-%d %H:%M:%S}"
        )
        parts.append((f"run {v.run} {'since' if narrow else 'started'} {start}", ""))
    cfg = v.launch
    if cfg is not None:
        parts.append((short_model(cfg.model_path or "?"), ""))
        spec, gap = "no speculation", " " if narrow else "  "
        if cfg.method:
            spec = gap.join(
                (
                    cfg.method,
                    f"steps {number(cfg.spec_num_steps)}",
                    f"topk {number(cfg.spec_eagle_topk)}",
                    f"draft{'' if narrow else ' tokens'} {number(cfg.spec_num_draft_tokens)}",
                )
            )
        parts.append((spec, "bold"))
    if v.last_decode_time is None:
        parts.append((f"no {v.stats_kind} line yet", ""))
    else:
        parts.append((f"last {v.stats_kind} {v.last_decode_time:%H:%M:%S} (read {ago(v.last_decode_ago)})", ""))
    parts.append((f"{v.lines:,} lines", ""))
    if v.waiting:
        parts.append((f"waiting for {', '.join(v.waiting)} to appear", "bold yellow"))
    if v.backfill is not None:
        parts.append((f"back-filling the current run {100 * v.backfill:.0f}%", "bold cyan"))
    return parts


def event_line(e: Event, many_files: bool) -> tuple[str, str]:
    """(time column, text) of one event: log time, or ``--:--:--`` when no log line caused it."""
    stamp = f"{e.at:%H:%M:%S}" if e.at is not None else NO_LOG_TIME
    where = f"{e.file.rsplit('/', 1)[-1]}: " if e.file and many_files else ""
    return stamp, where + e.text.removeprefix(e.file + ": ")


_LEVELS: dict[str, Level] = {"error": "bad", "warning": "warn"}
"""Doctor severities as event levels (info stays info)."""


def finding_event(change: Any, at: datetime | None) -> Event:
    """A doctor finding that started or cleared (an ``acceptmon.diagnose.engine.Change``), as an event."""
    level: Level = "info" if change.event == "cleared" else _LEVELS.get(change.finding.severity, "info")
    return Event(at, level, f"doctor: {change.line}", change.finding.file)

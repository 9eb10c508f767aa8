"""The dashboard's tiles and rank rows, from a file's window and its rows' latest records. Pure.

A row is a rank (SGLang: its decode line carries acceptance and load) or an engine
(vLLM: acceptance from its spec lines, load from its throughput lines); the fields say
which record gives what, so one rule serves both.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from acceptmon.live.state import RankSeries
from acceptmon.measure.window import Window
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import DecodeStats, Record, SpecStats
from acceptmon.tui.view import Health, RankRow, Tiles

ACCEPT_KINDS = ("decode", "spec")
"""Kinds whose records carry one interval's acceptance (accept len, rates)."""
LOAD_KINDS = ("decode", "throughput")
"""Kinds whose records carry one interval's load (gen throughput, running, queued, KV usage)."""


def tiles(
    window: Window,
    baseline: float | None,
    collapsed: bool,
    last: DecodeStats | SpecStats | None,
    load: Sequence[RankSeries],
) -> Tiles:
    """The big numbers of the current file: latest and window means, throughput summed over its rows."""
    mean = window.accept.mean
    health: Health = "none"
    if mean is not None:
        health = "good"
        if collapsed:
            health = "bad"
        elif baseline is not None and mean < 0.85 * baseline:
            health = "warn"
    mine = [s.last for s in load]
    tputs = [v for v in _values(mine, "gen_throughput") if v is not None]
    usage = [v for v in _values(mine, "token_usage") if v is not None]
    return Tiles(
        accept_len_last=last.accept_len if last else None,
        accept_len_mean=round_or_none(mean),
        draft_accept_rate=round_or_none(window.draft.mean),
        accept_rate=last.accept_rate if last else None,
        throughput=round(sum(tputs), 2) if tputs else None,
        throughput_ranks=len(tputs),
        unit=unit(load),
        running=_sum_int(_values(mine, "running_req")),
        queued=_sum_int(_values(mine, "queue_req")),
        token_usage=max(usage) if usage else None,
        health=health,
    )


def unit(series: Iterable[RankSeries]) -> str:
    """``engine`` when the rows are named by an engine field (vLLM), else ``rank``."""
    return "engine" if any(KINDS[s.kind].unit_field == "engine" for s in series) else "rank"


def rank_rows(series: Sequence[RankSeries], windows: Mapping[str, Window], now: float) -> list[RankRow]:
    """One row per (file, rank or engine): acceptance from its decode or spec series, load from decode or throughput."""
    groups: dict[tuple[str, str], list[RankSeries]] = {}
    for s in series:
        if s.kind in ACCEPT_KINDS + LOAD_KINDS and s.file in windows:
            groups.setdefault((s.file, s.rank), []).append(s)
    rows = []
    for (file, rank), group in sorted(groups.items()):
        accept = next((s.last for s in group if s.kind in ACCEPT_KINDS), None)
        load = next((s.last for s in group if s.kind in LOAD_KINDS), None)
        rows.append(
            RankRow(
                file=file,
                rank=rank,
                accept_len=getattr(accept, "accept_len", None),
                window_mean=round_or_none(windows[file].rank_mean(rank)) if accept is not None else None,
                throughput=getattr(load, "gen_throughput", None),
                running=getattr(load, "running_req", None),
                queued=getattr(load, "queue_req", None),
                seen_ago=max(0.0, now - max(s.seen for s in group)),
            )
        )
    return rows


def round_or_none(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _values(records: Iterable[Record], name: str) -> list[float | None]:
    return [getattr(r, name, None) for r in records]


def _sum_int(values: Iterable[float | None]) -> int | None:
    got = [int(v) for v in values if v is not None]
    return sum(got) if got else None

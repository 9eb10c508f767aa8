"""The dashboard's tiles and rank rows, from a file's window and its rows' latest records. Pure.

A row is a rank (SGLang: its decode line carries acceptance and load) or an engine
(vLLM: acceptance from its spec lines, load from its throughput lines); which series gives
what is its kind's declared role (:mod:`acceptmon.parse.kinds`: ``acceptance``, ``load``), so
one rule serves both, and a new kind with a role needs nothing here. The throughput tile is
the window's total as ``runs`` defines a run's: the sum over rows of their mean logged rate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence

from acceptmon.live.state import RankSeries
from acceptmon.measure.window import Window
from acceptmon.parse.kinds import KINDS
from acceptmon.parse.records import Record
from acceptmon.tui.view import Health, RankRow, Tiles

DIGITS = re.compile(r"(\d+)")


def accepts(s: RankSeries) -> bool:
    """The series' records carry one interval's acceptance (accept len, rates): the ``acceptance`` role."""
    return KINDS[s.kind].acceptance


def loads(s: RankSeries) -> bool:
    """The series' records carry one interval's load (gen throughput, running, queued, KV): the ``load`` role."""
    return KINDS[s.kind].load


def tiles(
    window: Window,
    baseline: float | None,
    collapsed: bool,
    last: Record | None,
    load: Sequence[RankSeries],
) -> Tiles:
    """The big numbers of the current file: latest and window means; throughput, the window's total."""
    mean = window.accept.mean
    health: Health = "none"
    if mean is not None:
        health = "good"
        if collapsed:
            health = "bad"
        elif baseline is not None and mean < 0.85 * baseline:
            health = "warn"
    mine = [s.last for s in load]
    usage = [v for v in _values(mine, "token_usage") if v is not None]
    return Tiles(
        accept_len_last=getattr(last, "accept_len", None),
        accept_len_mean=round_or_none(mean),
        draft_accept_rate=round_or_none(window.draft.mean),
        accept_rate=getattr(last, "accept_rate", None),
        throughput=round_or_none(window.throughput_total),
        throughput_ranks=sum(1 for m in window.tputs.values() if m.count > 0),
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
        if (accepts(s) or loads(s)) and s.file in windows:
            groups.setdefault((s.file, s.rank), []).append(s)
    rows = []
    for (file, rank), group in sorted(groups.items(), key=lambda item: (natural(item[0][0]), natural(item[0][1]))):
        accept = next((s.last for s in group if accepts(s)), None)
        load = next((s.last for s in group if loads(s)), None)
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


def natural(text: str) -> tuple[str | int, ...]:
    """A sort key reading numbers as numbers: DP2 before DP10 (text and digit runs alternate, text first)."""
    return tuple(int(part) if i % 2 else part for i, part in enumerate(DIGITS.split(text)))


def round_or_none(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _values(records: Iterable[Record], name: str) -> list[float | None]:
    return [getattr(r, name, None) for r in records]


def _sum_int(values: Iterable[float | None]) -> int | None:
    got = [int(v) for v in values if v is not None]
    return sum(got) if got else None

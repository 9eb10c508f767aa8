"""The dashboard's tiles and rank rows, from a file's window and its ranks' latest records. Pure."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from acceptmon.records import DecodeStats
from acceptmon.sinks.livestate import RankSeries
from acceptmon.tui.view import Health, RankRow, Tiles
from acceptmon.window import Window


def tiles(
    window: Window, baseline: float | None, collapsed: bool, last: DecodeStats | None, mine: Sequence[DecodeStats]
) -> Tiles:
    """The big numbers of the current file: latest and window means, throughput summed over its ranks."""
    mean = window.accept.mean
    health: Health = "none"
    if mean is not None:
        health = "good"
        if collapsed:
            health = "bad"
        elif baseline is not None and mean < 0.85 * baseline:
            health = "warn"
    tputs = [r.gen_throughput for r in mine if r.gen_throughput is not None]
    usage = [r.token_usage for r in mine if r.token_usage is not None]
    return Tiles(
        accept_len_last=last.accept_len if last else None,
        accept_len_mean=round_or_none(mean),
        draft_accept_rate=round_or_none(window.draft.mean),
        accept_rate=last.accept_rate if last else None,
        throughput=round(sum(tputs), 2) if tputs else None,
        throughput_ranks=len(tputs),
        running=_sum_int(r.running_req for r in mine),
        queued=_sum_int(r.queue_req for r in mine),
        token_usage=max(usage) if usage else None,
        health=health,
    )


def rank_row(r: RankSeries, window: Window, now: float) -> RankRow:
    last = r.last
    assert isinstance(last, DecodeStats)
    return RankRow(
        file=r.file,
        rank=r.rank,
        accept_len=last.accept_len,
        window_mean=round_or_none(window.rank_mean(r.rank)),
        throughput=last.gen_throughput,
        running=last.running_req,
        queued=last.queue_req,
        seen_ago=max(0.0, now - r.seen),
    )


def round_or_none(value: float | None, digits: int = 2) -> float | None:
    return None if value is None else round(value, digits)


def _sum_int(values: Iterable[int | None]) -> int | None:
    got = [v for v in values if v is not None]
    return sum(got) if got else None

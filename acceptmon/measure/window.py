"""A sliding window of means over log time, kept as time buckets with running totals. Pure.

Part of the aggregates core (with :mod:`acceptmon.measure.aggregate`, whose :class:`~acceptmon.measure.aggregate.Mean`
it is made of): the dashboard's window mean, per-rank means and plot series.
"""

from __future__ import annotations

from collections import deque

from acceptmon.measure.figures import per_unit, total
from acceptmon.measure.mean import Mean


class _Bucket:
    __slots__ = ("accept", "draft", "key", "ranks", "tput", "tputs")

    def __init__(self, key: int) -> None:
        self.key = key
        self.accept, self.draft, self.tput = Mean(), Mean(), Mean()
        self.ranks: dict[str, Mean] = {}
        self.tputs: dict[str, Mean] = {}


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
        self.accept, self.draft, self.tput = Mean(), Mean(), Mean()
        """Over the window: accept length, draft accept rate, and every logged rate (tok/s of one rank or engine)."""
        self.ranks: dict[str, Mean] = {}
        """Accept length per rank or engine."""
        self.tputs: dict[str, Mean] = {}
        """Logged rate per rank or engine."""

    def add(self, t: float, rank: str, accept: float | None, draft: float | None, tput: float | None) -> None:
        key = int(t // self.width)
        bucket = self._bucket(key)
        for agg in (bucket, self):
            agg.accept.add(accept)
            agg.draft.add(draft)
            agg.tput.add(tput)
            per_rank = agg.ranks.get(rank)
            if per_rank is None:
                per_rank = agg.ranks[rank] = Mean()
            per_rank.add(accept)
            if tput is not None:
                rate = agg.tputs.get(rank)
                if rate is None:
                    rate = agg.tputs[rank] = Mean()
                rate.add(tput)

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
        for rank, agg in bucket.tputs.items():
            self.tputs[rank].remove(agg)

    @property
    def throughput_per_rank(self) -> float | None:
        """Over the window, as ``runs`` gives a run's: the mean of the logged rates."""
        return per_unit(self.tputs.values())

    @property
    def throughput_total(self) -> float | None:
        """Over the window, as ``runs`` gives a run's: the sum over ranks or engines of their mean rate."""
        return total(m for m in self.tputs.values() if m.count > 0)

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

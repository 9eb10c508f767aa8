"""The current live run against the previous one, by ``acceptmon compare``'s verdict rule. Pure.

Each file keeps the decode batches of its last two runs read live (the most recent
:data:`KEEP` of each, consecutive, as the block bootstrap wants them). :func:`judge`
runs :func:`acceptmon.measure.compare.compare` on them, so the dashboard says ``better``,
``worse`` or ``no difference`` exactly when ``acceptmon compare FILE#A FILE#B`` would
on the same batches.

A vLLM server logs no decode batches: each engine logs a throughput line and then a spec
line per interval (5 or 10 s). One spec line is one batch here: its accept len and rate,
with the gen throughput and running requests of its engine's latest throughput line (the
same interval's), steady when that line shows no waiting request. vLLM has no prefill
line to tell a decode-only stretch, so "steady" means only "nothing queued" for it.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

from acceptmon.measure.compare import Batch, Side, compare
from acceptmon.parse.records import DecodeStats, SpecStats, ThroughputStats

KEEP = 2000
"""Batches kept per run (the latest): bounds memory and the cost of one judgement."""
MIN_BATCHES = 20
"""Batches each run needs before it is judged."""


@dataclass
class RunBatches:
    run: int
    batches: deque[Batch] = field(default_factory=lambda: deque(maxlen=KEEP))


@dataclass
class RunPair:
    """The previous and the current run of one file, as read live."""

    previous: RunBatches | None = None
    current: RunBatches | None = None
    judged: tuple[int, int, str] | None = None
    """(previous run, current run, verdict) last reported, so a verdict is announced once per change."""
    after_prefill: dict[str, bool] = field(default_factory=dict)
    """Per rank of the current run: a prefill line came since its last decode line (unseen ranks: True)."""

    def launch(self, run: int) -> None:
        if self.current is not None and self.current.batches:
            self.previous = self.current
        self.current = RunBatches(run)
        self.after_prefill = {}

    def prefill(self, rank: str) -> None:
        self.after_prefill[rank] = True

    def add(self, r: DecodeStats | SpecStats, run: int, load: ThroughputStats | None = None) -> None:
        """A decode batch; steady as ``compare`` says: no queue, no prefill since the rank's last decode line.

        A spec line (vLLM) takes throughput, running and queue from ``load``, its engine's latest throughput line.
        """
        if self.current is None:
            self.current = RunBatches(run)
        if isinstance(r, SpecStats):
            tput, running, queued = (load.gen_throughput, load.running_req, load.queue_req) if load else (None,) * 3
            batch = Batch(r.accept_len, r.draft_accept_rate, tput, running, queued == 0)
            self.current.batches.append(batch)
            return
        rank = r.rank or ""
        steady = r.queue_req == 0 and not self.after_prefill.get(rank, True)
        self.after_prefill[rank] = False
        self.current.batches.append(Batch(r.accept_len, r.draft_accept_rate, r.gen_throughput, r.running_req, steady))

    def sides(self) -> tuple[int, list[Batch], int, list[Batch]] | None:
        """Copies of both runs' batches when each has enough to judge."""
        p, c = self.previous, self.current
        if p is None or c is None or len(p.batches) < MIN_BATCHES or len(c.batches) < MIN_BATCHES:
            return None
        return p.run, list(p.batches), c.run, list(c.batches)


def judge(previous: int, a: list[Batch], current: int, b: list[Batch]) -> tuple[str, str]:
    """(verdict, one line saying why) for run ``current`` against run ``previous``."""
    result = compare(Side(f"run {previous}", a), Side(f"run {current}", b))
    reason = result.reason.replace("B ", f"run {current} ", 1)
    return result.verdict, f"run {current} vs run {previous}: {result.verdict}. {reason}"

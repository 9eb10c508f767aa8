"""The current live run against the previous one, by ``acceptmon compare``'s verdict rule. Pure.

Each file keeps the batches of its last two runs read live (the most recent :data:`KEEP` of
each, consecutive, as the block bootstrap wants them), as a
:class:`~acceptmon.measure.compare.Sample` of normalized facts: the same batches, load lines
and ``steady`` marks ``compare`` reads (an SGLang decode line; a vLLM spec line with its
engine's latest throughput line). :func:`judge` runs :func:`acceptmon.measure.compare.compare`
on them, so the dashboard says ``better``, ``worse`` or ``no difference`` exactly when
``acceptmon compare FILE#A FILE#B`` would on the same batches.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from acceptmon.measure.compare import Sample, Side, compare
from acceptmon.measure.normalize import Fact

KEEP = 2000
"""Batches kept per run (the latest): bounds memory and the cost of one judgement."""
MIN_BATCHES = 20
"""Batches each run needs before it is judged."""


@dataclass
class RunBatches:
    run: int
    sample: Sample = field(default_factory=lambda: Sample(KEEP))


@dataclass
class RunPair:
    """The previous and the current run of one file, as read live."""

    previous: RunBatches | None = None
    current: RunBatches | None = None
    judged: tuple[int, int, str] | None = None
    """(previous run, current run, verdict) last reported, so a verdict is announced once per change."""

    def launch(self, run: int) -> None:
        if self.current is not None and len(self.current.sample):
            self.previous = self.current
        self.current = RunBatches(run)

    def add(self, fact: Fact) -> None:
        """A fact of the current run (a batch, a load line; anything else is left out)."""
        if self.current is None:
            self.current = RunBatches(fact.record.run)
        self.current.sample.add(fact)

    def sides(self) -> tuple[int, Side, int, Side] | None:
        """Both runs as sides of a comparison, when each has enough to judge."""
        p, c = self.previous, self.current
        if p is None or c is None or len(p.sample) < MIN_BATCHES or len(c.sample) < MIN_BATCHES:
            return None
        return p.run, p.sample.side(f"run {p.run}"), c.run, c.sample.side(f"run {c.run}")


def judge(previous: int, a: Side, current: int, b: Side) -> tuple[str, str]:
    """(verdict, one line saying why) for run ``current`` against run ``previous``."""
    result = compare(a, b)
    reason = result.reason.replace("B ", f"run {current} ", 1)
    return result.verdict, f"run {current} vs run {previous}: {result.verdict}. {reason}"

"""One side of a comparison: every batch of a file, or of one run of it, read and normalized. Pure wiring.

``acceptmon compare`` and the library's :func:`acceptmon.compare` read their sides here: the
records (parsed in workers too, sent back packed) normalized in file order
(:mod:`acceptmon.measure.normalize`) into a :class:`~acceptmon.measure.compare.Sample`, with the runs
seen, the side's source, and what the normalize step left out; the caller says it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from acceptmon.display import number_ranges, requests_only
from acceptmon.errors import InputError
from acceptmon.measure.columns import Packed, pack, unpack
from acceptmon.measure.compare import Sample, Side
from acceptmon.measure.normalize import READS, Normalizer
from acceptmon.measure.summary import config_text
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, with_role
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.pipeline.batch import run

__all__ = ["SideRead", "read_side"]


@dataclass(frozen=True)
class SideRead:
    """A side, with what its reading found."""

    side: Side
    configs: list[LaunchConfig | None]
    """The launch configs of the runs it holds."""
    tally: Tally
    """The file's tally (every line of it, by kind; the unrecognized ones by run)."""
    invalid_values: int
    refused_configs: int
    """Impossible values and refused launch configs the normalize step left out of the side."""
    requests_only: int = 0
    """Finished-request lines of a side without batches (its load lines compared): its accept length is not."""


class _SideJob:
    """One side's records (parsed in workers too), normalized in file order (:mod:`acceptmon.measure.normalize`).

    A batch is a record with the ``acceptance`` role: an SGLang decode line (acceptance and
    throughput at once), or a vLLM spec line with the load of its engine's latest throughput
    line. The throughput is the mean of the load lines, as ``runs`` reports it. ``tail`` and
    ``doctor`` read the same batches.
    """

    from_lane = True
    """Reads no record's ``extra``: the fast lane's records do (:class:`acceptmon.pipeline.batch.Job`)."""

    def __init__(self, run_no: int | None) -> None:
        self.run_no = run_no
        self.records_wanted = with_role("acceptance") | with_role("load") | with_role("prefill") | with_role("request")
        self.normalizer = Normalizer()
        self.requests = 0
        """Finished-request lines of the side: counted, not compared (they say what a side without batches has)."""
        self.sample = Sample()
        self.runs: dict[int, LaunchConfig | None] = {}
        self.sources: dict[str, tuple[str, str]] = {}
        self.invalid_values = self.refused_configs = 0
        """Impossible values and refused launch configs the normalize step left out."""

    def chunk(self, records: list[Record]) -> tuple[Packed, set[int]]:
        """The side's records as what the normalizer reads (packed: :func:`~acceptmon.measure.columns.pack`),
        and the numbers of the other runs with stats lines."""
        if self.run_no is None:
            return pack(records, READS), set()
        mine = [r for r in records if r.run == self.run_no or KINDS[r.kind].starts_run]
        return pack(mine, READS), {r.run for r in records if r.run != self.run_no}

    def collect(self, part: tuple[Packed, set[int]]) -> None:
        mine, others = part
        for number in others:
            self.runs.setdefault(number, None)
        for fact in map(self.normalizer.fact, unpack(mine, READS)):
            r = fact.record
            if KINDS[r.kind].request:
                if self.run_no is None or r.run == self.run_no:
                    self.requests += 1
                    self.sample.add(fact)  # the side's batches where it has no per-batch line
                continue
            if self.run_no is None or r.run == self.run_no:
                self.invalid_values += fact.invalid
                self.refused_configs += bool(fact.refused)
            if KINDS[r.kind].starts_run:
                self.runs[r.run] = getattr(r, "config", None)
                continue
            b, load = fact.batch, fact.load
            if b is None and load is None:
                continue
            self.runs.setdefault(r.run, None)
            if self.run_no is not None and r.run != self.run_no:
                continue
            self.sample.add(fact)
            self.sources.setdefault(getattr(r, "source", ""), (getattr(r, "pod", ""), getattr(r, "container", "")))

    def source_of(self) -> dict[str, Any]:
        """The side's source (one source, or several joined by commas)."""
        names = sorted(self.sources)
        one = self.sources[names[0]] if len(names) == 1 else ("", "")
        return {"source": ",".join(names), "pod": one[0], "container": one[1]}


def _unrecognized(tally: Tally, run_no: int | None) -> int:
    """The side's lines no grammar reads: the file's, or its run's."""
    return sum(n for (_, _, number), n in tally.unrecognized_runs.items() if run_no is None or number == run_no)


def read_side(path: str, run_no: int | None, grammars: GrammarSet, jobs: int = 1) -> SideRead:
    """Every batch of ``path`` (or of its run ``run_no``) as one side of a comparison."""
    job = _SideJob(run_no)
    tally = run([path], grammars, job, jobs=jobs).tally
    name = Path(path).name if path != "-" else "stdin"
    label = name if run_no is None else f"{name}#{run_no}"
    if run_no is not None and run_no not in job.runs:
        there = f"runs there: {number_ranges(sorted(job.runs))}" if job.runs else "it has no runs"
        raise InputError(f"{path}#{run_no}", f"no run {run_no} ({there})")
    if not len(job.sample):
        what = f"{requests_only(job.requests)} to compare" if job.requests else "no decode lines to compare"
        raise InputError(path if run_no is None else f"{path}#{run_no}", what)
    wanted = [job.runs[run_no]] if run_no is not None else list(job.runs.values())
    extra = {**job.source_of(), "unrecognized": _unrecognized(tally, run_no)}
    side = job.sample.side(label, _spec(wanted), extra, copy=False)
    alone = 0 if len(job.sample.batches) else job.requests
    return SideRead(side, wanted, tally, job.invalid_values, job.refused_configs, alone)


def _spec(configs: Sequence[LaunchConfig | None]) -> str:
    texts = {config_text(c) for c in configs}
    if len(texts) == 1:
        return texts.pop()
    return f"{len(configs)} runs, mixed configs"

"""One side of a comparison: every batch of a file, or of one run of it, read and normalized. Pure wiring.

``acceptmon compare`` and the library's :func:`acceptmon.compare` read their sides here: the
records (parsed in workers too, sent back packed) normalized in file order
(:mod:`acceptmon.measure.normalize`) into a :class:`~acceptmon.measure.compare.Sample`, with the runs
seen, the side's source, and what the normalize step left out; the caller says it. The lane's plain stats
rows reach it unmade (from a worker as their values: :func:`~acceptmon.pipeline.workers.ship`) and are added as
columns (:func:`~acceptmon.measure.facts.plain_facts`, :meth:`~acceptmon.measure.compare.Sample.fold`), as the
doctor takes them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from acceptmon.display import number_ranges, requests_only
from acceptmon.errors import InputError
from acceptmon.measure.compare import Sample, Side
from acceptmon.measure.facts import plain_facts
from acceptmon.measure.normalize import READS, Normalizer, plain_kinds
from acceptmon.measure.summary import config_text
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, with_role
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.parse.unmade import Unmade
from acceptmon.pipeline.batch import run
from acceptmon.pipeline.workers import Shipped, in_worker, landed, ship

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

    @property
    def takes_unmade(self) -> frozenset[str]:
        """Takes the lane's rows of these kinds as records not made yet (:class:`~acceptmon.parse.unmade.Unmade`):
        plain stats lines are normalized and added as columns (:func:`~acceptmon.measure.facts.plain_facts`)."""
        return plain_kinds()

    def chunk(self, records: Sequence[Record | Unmade]) -> tuple[Sequence[Record | Unmade] | Shipped, set[int]]:
        """The side's records and rows (from a worker: :func:`~acceptmon.pipeline.workers.ship`, the records packed
        as what the normalizer reads), and the numbers of the other runs with stats lines."""
        mine, others = self._mine(records)
        return (ship(mine, READS) if in_worker() else mine), others

    def _mine(self, records: Sequence[Record | Unmade]) -> tuple[Sequence[Record | Unmade], set[int]]:
        """The records and rows of the side's run (and every launch), and the numbers of the other runs."""
        if self.run_no is None:
            return records, set()
        mine: list[Record | Unmade] = []
        others: set[int] = set()
        for r in records:
            if type(r) is Unmade:
                runs = set(r.column("run"))
                if self.run_no in runs and len(runs) > 1:  # rows of several runs: as records
                    made = r.made()
                    mine += [m for m in made if m.run == self.run_no]
                    others |= {m.run for m in made if m.run != self.run_no}
                elif self.run_no in runs:
                    mine.append(r)
                else:
                    others |= runs
                continue
            if r.run == self.run_no or KINDS[r.kind].starts_run:
                mine.append(r)
            if r.run != self.run_no:
                others.add(r.run)
        return mine, others

    def collect(self, part: tuple[Sequence[Record | Unmade] | Shipped, set[int]]) -> None:
        got, others = part
        for number in others:
            self.runs.setdefault(number, None)
        held: list[Record] = []
        items: Iterable[list[Record] | Record | Unmade] = (
            landed(got, READS) if type(got) is Shipped else cast("Sequence[Record | Unmade]", got)
        )
        for item in items:
            if isinstance(item, list):
                held += item
            elif isinstance(item, Unmade):
                self._records(held)
                held = []
                self._rows(item)
            else:
                held.append(item)
        self._records(held)

    def _rows(self, rows: Unmade) -> None:
        """Rows of the side's run, as columns where :func:`plain_facts` takes them, else as their records."""
        facts = plain_facts(self.normalizer, rows)
        if facts is None:
            self._records(rows.made())
            return
        _, source, number = facts.key
        self.runs.setdefault(number, None)
        self.invalid_values += facts.invalid
        self.sample.fold(facts)
        self.sources.setdefault(source, (facts.values["pod"][0], facts.values["container"][0]))

    def _records(self, records: list[Record]) -> None:
        for fact in map(self.normalizer.fact, records):
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

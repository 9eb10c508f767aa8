"""Reading files into the doctor: the batch pipeline feeds the engine; baselines come from other files.

The engine is fed in file order on the main process (``collect``); workers only parse. A
baseline given as ``FILE`` or ``FILE#N`` is read through the same pipeline with no rules, and
its runs without speculation become the reference the engine matches buckets against.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import cast

from pydantic import BaseModel

from acceptmon.diagnose.depth import DepthInputs, recommend
from acceptmon.diagnose.engine import Doctor, RunReport
from acceptmon.diagnose.model import Finding, Rule
from acceptmon.diagnose.state import RunState
from acceptmon.inputs.refs import parse_ref
from acceptmon.measure.facts import plain_facts
from acceptmon.measure.normalize import Fact, plain_kinds
from acceptmon.measure.speedup import baseline_runs
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, with_role
from acceptmon.parse.records import Record
from acceptmon.parse.unmade import Unmade
from acceptmon.pipeline.batch import run
from acceptmon.pipeline.workers import Shipped, in_worker, landed, ship


class DoctorJob:
    """Parse in chunks (any process), feed the engine in file order (main process); with ``depth``, also the
    depth recommendation's inputs (the same facts, and the finished-request records the engine does not read).

    A worker's records wait in this process until their turn: they come packed
    (:func:`~acceptmon.measure.columns.pack`, a quarter of the memory of record objects) and are
    fed one at a time. Records parsed in this process are fed as they are."""

    from_lane = True
    """Reads no record's ``extra``: the fast lane's records do (:class:`acceptmon.pipeline.batch.Job`)."""
    ahead = 0
    """Ranges' results ``-j`` holds ahead (:data:`acceptmon.pipeline.workers.AHEAD` is for CSV bytes): none, so this
    process never reads a range itself while a worker's is pending. Collecting (the engine) is the slower half here:
    one worker read all 128 ranges of 256 MiB in 2.5 s while this process collected; a range read here delayed the
    collecting by as much. 256 MiB, ``-j 2``, against 2, alternating: SGLang 0.5.23 4.85–4.98 → 4.47–4.66 s, SGLang
    ``Decode batch.`` 5.12–5.28 → 4.44–4.76 s, vLLM 15 positions 5.29–5.35 → 4.49–4.50 s, vLLM v0 5.14–5.23 →
    4.54–4.84 s, vLLM DP 5.25–6.21 → 4.93–5.55 s; this process's peak RSS 137 → 120 MiB (SGLang)."""
    queued = 8
    """Ranges each worker has queued (:data:`acceptmon.pipeline.workers.QUEUED`): collecting a range (the detectors)
    takes about as long as reading one, and with 2 a worker was idle half the time. 256 MiB, ``-j 2``, alternating
    pairs: SGLang 0.5.23 5.10–5.54 → 4.72–4.93 s, vLLM 0.10 DP 5.96–6.45 → 5.46–5.75 s; summed peak RSS 142–147 →
    143–148 MiB. 8 was slower for ``parse`` (1.23 → 1.41 s) and ``runs`` (1.75 → 2.10 s; it takes 4)."""

    def __init__(self, doctor: Doctor, depth: DepthInputs | None = None) -> None:
        self.doctor, self.depth = doctor, depth
        roles = ("starts_run", "acceptance", "load", "prefill", "warning")  # every server's stats lines, and more
        wanted = {k for role in roles for k in with_role(role)} | {kind for rule in doctor.rules for kind in rule.reads}
        self.requests = frozenset(with_role("request")) - wanted if depth is not None else frozenset()
        if depth is not None:  # per-position lines: the normalizer weighs them by the request line before
            wanted |= with_role("positions")
        self.records_wanted = frozenset(k for k in wanted | self.requests if k in KINDS)

    @property
    def takes_unmade(self) -> frozenset[str]:
        """Takes the lane's rows of these kinds as records not made yet (:class:`~acceptmon.parse.unmade.Unmade`):
        in this process, plain stats lines are normalized and folded as columns (:func:`plain_facts`)."""
        return plain_kinds()

    def chunk(self, records: Sequence[Record | Unmade]) -> Sequence[Record | Unmade] | Shipped:
        """The records as they are in this process; from a worker, records packed and the rows that
        :func:`plain_facts` takes as their values alone (:meth:`~acceptmon.parse.unmade.Unmade.shipped`)."""
        return ship(records) if in_worker() else records

    def collect(self, part: Sequence[Record | Unmade] | Shipped) -> None:
        if type(part) is Shipped:
            for each in landed(part):
                self.collect([each] if isinstance(each, Unmade) else each)
            return
        held: list[Record] = []
        for item in cast("Sequence[Record | Unmade]", part):
            if not isinstance(item, Unmade):
                held.append(item)
                continue
            self._feed(held)
            held = []
            facts = plain_facts(self.doctor.normalizer, item)  # (never None for rows a worker shipped)
            if facts is None:
                self._feed(item.made())
                continue
            self.doctor.fold(facts)
            if self.depth is not None:
                self.depth.fold(facts)
        self._feed(held)

    def _feed(self, records: list[Record]) -> None:
        if not records:
            return
        if self.depth is None:
            self.doctor.feed(records)
        else:
            self.doctor.take(self._facts(iter(records), self.depth))

    def _facts(self, records: Iterator[Record], depth: DepthInputs) -> Iterator[Fact]:
        """The facts of ``records``, one at a time, the depth inputs taking each too (and the requests)."""
        for r in records:
            fact = self.doctor.normalizer.fact(r)
            if KINDS[r.kind].request:
                where = (r.file, getattr(r, "source", ""), r.run)
                depth.request_lines[where] = depth.request_lines.get(where, 0) + 1
            if r.kind in self.requests:
                depth.requests((fact.record,))
                continue
            depth.take((fact,))
            yield fact


def diagnose(
    paths: Sequence[str],
    grammars: GrammarSet,
    rules: Sequence[Rule],
    *,
    expected_accept_len: float | None = None,
    baseline: str | None = None,
    jobs: int = 1,
    depth: DepthInputs | None = None,
) -> Doctor:
    """Read every path (and the baseline, if any) and return the engine holding the findings; ``depth``, if
    given, is filled with what :func:`acceptmon.diagnose.depth.recommend` reads."""
    base, label = read_baseline(baseline, grammars, jobs) if baseline else ([], None)
    doctor = Doctor(rules, expected_accept_len=expected_accept_len, baseline=base, baseline_label=label)
    doctor.tally = run(list(paths), grammars, DoctorJob(doctor, depth), jobs=jobs).tally
    doctor.finish()
    return doctor


class DoctorResult(BaseModel):
    """What ``acceptmon doctor`` reports: ``model_dump(mode="json")`` is its JSON."""

    findings: list[Finding]
    runs: list[RunReport]


def examine(
    paths: Sequence[str],
    grammars: GrammarSet,
    rules: Sequence[Rule],
    *,
    expected_accept_len: float | None = None,
    baseline: str | None = None,
    jobs: int = 1,
) -> tuple[DoctorResult, Doctor]:
    """The doctor's report on ``paths`` (findings, and every run with its break-even, depth advice and
    unrecognized lines), and the engine that made it."""
    depth = DepthInputs()
    doctor = diagnose(
        paths, grammars, rules, expected_accept_len=expected_accept_len, baseline=baseline, jobs=jobs, depth=depth
    )
    counts, requests = doctor.tally.unrecognized_runs, depth.request_lines
    runs = [
        r.model_copy(
            update={
                "unrecognized": counts.get((r.file, r.source, r.run), 0),
                "requests": requests.get((r.file, r.source, r.run), 0),
            }
        )
        for r in recommend(doctor, depth, doctor.reports())
    ]
    return DoctorResult(findings=doctor.findings(), runs=runs), doctor


def read_baseline(ref: str, grammars: GrammarSet, jobs: int = 1) -> tuple[list[RunState], str]:
    """The runs without speculation of a baseline reference, and a label for reports."""
    path, number = parse_ref(ref)
    reader = Doctor([])
    run([path], grammars, DoctorJob(reader), jobs=jobs)
    reader.finish()
    states = [s for s in reader.states() if s.stats_lines]
    name = Path(path).name if path != "-" else "stdin"
    chosen = baseline_runs(ref, number, {s.run: s.speculative for s in states})
    return [s for s in states if s.run in chosen], name if number is None else f"{name}#{number}"

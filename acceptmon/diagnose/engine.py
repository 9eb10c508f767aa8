"""The rule engine: feed records in file order, ask which findings hold, learn what changed. Pure.

Every run (one launch in one file) gets a :class:`~acceptmon.diagnose.state.RunState` and one detector
per rule. :meth:`Doctor.feed` routes each record to the detectors whose rule reads its kind; a run's
consecutive stats lines are gathered and folded as one stretch, as columns (:meth:`Doctor.fold` takes such a
stretch as it is: :mod:`acceptmon.measure.facts`), any other line breaks the stretch and is taken alone;
:meth:`Doctor.findings` asks every run's detectors (batch), :meth:`Doctor.holding` only each file's
current run (live), and :meth:`Doctor.update` feeds and returns what started or stopped holding since
the last call, for ``tail``'s event log and ``serve``'s ``acceptmon_doctor_finding`` gauge.

Warnings printed while server arguments resolve come *before* their launch line. Codes that
rules mark ``before_launch`` wait until the next line of the file: a launch takes them into
its run, any other stats line gives them to the run they were printed in.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from acceptmon.diagnose.breakeven import BreakEven, break_even
from acceptmon.diagnose.detector import Detector
from acceptmon.diagnose.model import Finding, Hit, Rule
from acceptmon.diagnose.rules import speedup_thresholds
from acceptmon.diagnose.signatures import SIGNATURES
from acceptmon.diagnose.state import BucketStats, RunState
from acceptmon.measure.depth import Recommendation
from acceptmon.measure.facts import Facts
from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import WARMUP_BATCHES, Fact, Normalizer
from acceptmon.measure.speedup import choose_baseline
from acceptmon.measure.summary import config_text
from acceptmon.parse.kinds import KINDS, RecordKind
from acceptmon.parse.parser import Tally
from acceptmon.parse.records import Record, WarningRecord


@dataclass
class _Index:
    """Runs by (file, config) and each file's runs without speculation, with break-even results, as of one feed."""

    fed: int
    by_config: dict[tuple[str, Any], list[RunState]]
    plain: dict[str, list[RunState]]
    break_even: dict[tuple[str, int], BreakEven] = field(default_factory=dict)


@dataclass(frozen=True)
class Change:
    """A finding that started (``new``) or stopped (``cleared``) holding."""

    event: Literal["new", "cleared"]
    finding: Finding

    @property
    def line(self) -> str:
        """For a live event log: ``P1 error (run 2): EAGLE algorithm on ... - evidence``, or ``cleared P1 ...``."""
        f = self.finding
        head = f"{f.rule} {f.severity} (run {f.run}): {f.message.partition(': ')[0]}"
        return f"cleared {head}" if self.event == "cleared" else f"{head} - {f.evidence.text}"


class RunReport(BaseModel):
    """One run in the report, with or without findings."""

    model_config = ConfigDict(frozen=True)

    file: str
    run: int
    model: str | None
    spec: str
    source: str = ""
    batches: int
    """Stats lines with acceptance, as ``runs`` counts them."""
    accept_len_mean: float | None
    """Over all the batches, as ``runs`` gives it."""
    gen_throughput_per_rank: float | None
    gen_throughput_total: float | None
    judged_batches: int
    """Batches with an accept length past each run's warm-up: what the accept-length rules judge."""
    judged_accept_len_mean: float | None
    findings: int
    break_even: BreakEven | None
    recommendation: Recommendation | None = None
    """Per-position acceptance and the sweep's recommended depth (:mod:`acceptmon.diagnose.depth`, batch only)."""
    unrecognized: int = 0
    """Lines of the run that start like a stats line but that no grammar reads (a format change)."""
    too_few_to_judge: bool = False
    """A speculative run with fewer batches past warm-up than the accept-length rules need (their smallest
    ``min_lines``): "no finding" would read as "healthy" where nothing was judged."""
    requests: int = Field(default=0, exclude=True)
    """Finished-request lines of the run (the batch doctor): a run of those alone is told what its log lacks.
    Not in the JSON, whose runs keep their keys."""


@dataclass
class _Run:
    state: RunState
    detectors: list[tuple[Rule, Detector[Any]]] = field(default_factory=list)
    _feeders: dict[tuple[str, str], list[Any]] = field(default_factory=dict)
    _stats: dict[frozenset[str], list[tuple[Detector[Any], frozenset[str]]]] = field(default_factory=dict)
    judged: tuple[int, tuple[Finding, ...]] | None = None
    """The findings of the last judgement, with the file's :attr:`Doctor.touched` then."""

    def feeders(self, method: str, kind: str) -> list[Any]:
        """Bound ``method`` of the detectors whose rule reads ``kind`` and whose type implements it."""
        found = self._feeders.get((method, kind))
        if found is None:
            base = getattr(Detector, method)
            found = self._feeders[method, kind] = [
                getattr(det, method)
                for rule, det in self.detectors
                if kind in rule.reads and getattr(type(det), method) is not base
            ]
        return found

    def stats_feeders(self, kinds: frozenset[str]) -> list[tuple[Detector[Any], frozenset[str]]]:
        """The detectors that read stats lines of any of these kinds, each with the kinds it reads of them."""
        found = self._stats.get(kinds)
        if found is None:
            found = self._stats[kinds] = [
                (det, kinds & rule.reads)
                for rule, det in self.detectors
                if kinds & rule.reads
                and (type(det).stats is not Detector.stats or type(det).steps is not Detector.steps)
            ]
        return found

    def fold(self, facts: Facts) -> None:
        """Consecutive stats lines of the run: its state folds them in, then each detector that reads their kinds
        is given the lines it reads."""
        steps = self.state.fold(facts)
        kinds = frozenset(facts.kinds)
        for det, reads in self.stats_feeders(kinds):
            det.steps(steps if reads == kinds else steps.kept([k in reads for k in facts.kinds]), self.state)


class Doctor:
    """Incremental rule engine over any number of files."""

    def __init__(
        self,
        rules: Sequence[Rule],
        *,
        expected_accept_len: float | None = None,
        baseline: Sequence[RunState] = (),
        baseline_label: str | None = None,
        warmup: int = WARMUP_BATCHES,
    ) -> None:
        self.rules = list(rules)
        needs = [getattr(r.params, k, None) for r in self.rules for k in ("min_lines", "stuck_lines")]
        self.min_judged = min((n for n in needs if isinstance(n, int)), default=0)
        """Batches past warm-up the accept-length rules need at the least (``min_lines`` of their params)."""
        self.tally = Tally()
        """What the reading of the files counted (:func:`acceptmon.diagnose.read.diagnose` sets it)."""
        self.expected = expected_accept_len
        self.baseline, self.baseline_label = list(baseline), baseline_label
        self.warmup = warmup
        self.before_launch = frozenset(c for r in self.rules for c in SIGNATURES[r.signature].before_launch(r.params))
        self.thresholds = speedup_thresholds(self.rules)
        self.runs: dict[tuple[str, int], _Run] = {}
        self.current: dict[str, tuple[str, int]] = {}
        self.pending: dict[str, list[WarningRecord]] = {}
        self._held: dict[tuple[str, int, str, str], Finding] = {}
        self._held_fed = -1
        """``_fed`` when ``_held`` was judged: until more is fed, :meth:`labels` reads it, not judging again."""
        self._fed, self.normalizer = 0, Normalizer(warmup)
        self._cache: _Index | None = None
        self._last: tuple[str, int, _Run] | None = None
        """The run :meth:`_run` gave last in this feed: the next record is most likely of the same run."""
        self._stretch: list[Fact] = []
        """Stats lines of :attr:`_stretch_run` not folded yet: a run's consecutive ones are folded together."""
        self._stretch_run: _Run | None = None
        self.touched: dict[str, int] = {}
        """By file: ``_fed`` when a record last reached one of its runs. A run is judged with its file's other
        runs (same config, baseline) and fixed inputs, so its findings hold until its file is touched again."""

    @property
    def expected_accept_len(self) -> float | None:
        return self.expected

    def feed(self, records: Iterable[Record]) -> None:
        """Take records in file order (files may interleave), one at a time: none is kept."""
        self.take(map(self.normalizer.fact, records))

    def take(self, facts: Iterable[Fact]) -> None:
        """Take records already normalized (the live state's facts: one normalizer for every live consumer)."""
        self._fed, self._last = self._fed + 1, None
        for fact in facts:
            r = fact.record
            kind = KINDS[r.kind]
            if kind.starts_run:
                self._fold()
                self._launch(r)
                self._run(r.file, r.run, r.source).state.figures.add(fact)  # a refused config
            elif kind.warning and r.__dict__.get("code") in self.before_launch:
                self.pending.setdefault(r.file, []).append(r)  # type: ignore[arg-type]  # the warning role's model
            else:
                self._record(fact, kind)
        self._fold()

    def fold(self, facts: Facts) -> None:
        """Take consecutive stats lines of one run, normalized, as columns (as :meth:`take` takes their facts)."""
        self._fed, self._last = self._fed + 1, None
        file, source, number = facts.key
        run = self._run(file, number, source)
        if self.pending:
            for w in self.pending.pop(file, ()):
                self._warning(self._run(w.file, w.run), w)
        run.fold(facts)

    def finish(self) -> None:
        """End of input: warnings still waiting belong to the run they were printed in."""
        self._fed, self._last = self._fed + 1, None
        self._fold()
        for file, waiting in list(self.pending.items()):
            for w in waiting:
                self._warning(self._run(w.file, w.run), w)
            self.pending.pop(file, None)

    def update(self, records: Iterable[Record]) -> list[Change]:
        """Feed, then say which current-run findings started or stopped holding."""
        self.feed(records)
        now: dict[tuple[str, int, str, str], Finding] = {(f.file, f.run, f.rule, f.severity): f for f in self.holding()}
        changes = [Change("cleared", f) for k, f in self._held.items() if k not in now]
        changes += [Change("new", f) for k, f in now.items() if k not in self._held]
        self._held, self._held_fed = now, self._fed
        return changes

    def findings(self) -> list[Finding]:
        """Every run's findings, in order of files, runs and rules."""
        return [f for run in self.runs.values() for f in self._evaluate(run)]

    def holding(self) -> list[Finding]:
        """Findings of each file's current run (a relaunch clears the previous run's)."""
        return [f for key in self.current.values() for f in self._evaluate(self.runs[key])]

    def labels(self) -> set[tuple[str, str, str]]:
        """``(file, rule, severity)`` of every holding finding: the ``acceptmon_doctor_finding`` series set to 1."""
        held = self._held.values() if self._held_fed == self._fed else self.holding()
        return {(f.file, f.rule, f.severity) for f in held}

    def states(self) -> list[RunState]:
        return [run.state for run in self.runs.values()]

    def reports(self) -> list[RunReport]:
        """Every run that has a launch line or stats lines, with its finding count and break-even."""
        out = []
        for run in self.runs.values():
            s = run.state
            found = len(self._evaluate(run))
            if s.launch is None and not s.stats_lines and not found:
                continue
            out.append(
                RunReport(
                    file=s.file,
                    run=s.run,
                    model=s.launch.model_path if s.launch else None,
                    spec=spec_text(s),
                    source=s.source,
                    **s.figures.as_dict(),
                    judged_batches=s.accept_len.count,
                    judged_accept_len_mean=s.accept_len.rounded,
                    findings=found,
                    break_even=self.break_even(s),
                    too_few_to_judge=s.speculative and s.accept_len.count < self.min_judged,
                )
            )
        return out

    # Context for detectors

    def same_config(self, run: RunState) -> list[RunState]:
        key = run.config_key()
        same = self._index().by_config.get((run.file, key), []) if key is not None else []
        return [s for s in same if s is not run]

    def break_even(self, run: RunState) -> BreakEven | None:
        if not run.speculative or not run.stats_lines:
            return None
        cached = self._index().break_even.get((run.file, run.run))
        if cached is None:
            base, label = self._baseline(run)
            loses, marginal = self.thresholds
            plain = self._plain_load(run) if base is not None else None
            cached = break_even(run, base, label, loses_below=loses, marginal_below=marginal, base_load=plain)
            self._index().break_even[run.file, run.run] = cached
        return cached

    def _index(self) -> _Index:
        """Runs by file (without speculation) and by config, rebuilt after each feed: evaluation is linear."""
        if self._cache is None or self._cache.fed != self._fed:
            plain: dict[str, list[RunState]] = {}
            by_key: dict[tuple[str, Any], list[RunState]] = {}
            for r in self.runs.values():
                s = r.state
                if s.stats_lines and not s.speculative:
                    plain.setdefault(s.file, []).append(s)
                by_key.setdefault((s.file, s.config_key()), []).append(s)
            self._cache = _Index(self._fed, by_key, plain)
        return self._cache

    def _plain_load(self, run: RunState) -> tuple[float | None, bool]:
        """The baseline runs' mean throughput, and whether any of their lines logs running requests."""
        chosen = self._chosen(run)
        pooled = Mean()
        for s in chosen:
            pooled.merge(s.throughput)
        return pooled.mean, any(s.running_logged for s in chosen)

    def _chosen(self, run: RunState) -> list[RunState]:
        """The runs without speculation that are ``run``'s baseline."""
        pool = self.baseline or self._index().plain.get(run.file, [])
        plain = [s for s in pool if s.stats_lines and not s.speculative]
        model = run.launch.model_path if run.launch else None
        return choose_baseline(model, plain, lambda s: s.launch.model_path if s.launch else "")  # "": no launch

    def _baseline(self, run: RunState) -> tuple[dict[tuple[int, int], BucketStats] | None, str | None]:
        external = bool(self.baseline)
        chosen = self._chosen(run)
        if not chosen:
            return None, None
        merged: dict[tuple[int, int], BucketStats] = {}
        for s in chosen:
            for key, b in s.buckets.items():
                merged.setdefault(key, BucketStats()).merge(b)
        runs = ", ".join(str(s.run) for s in chosen)
        label = self.baseline_label if external and self.baseline_label else f"{chosen[0].file} run {runs}"
        return merged, label

    # Routing

    def _run(self, file: str, number: int, source: str = "") -> _Run:
        last = self._last
        if last is not None and last[1] == number and last[0] == file:  # most records follow one of their run
            return last[2]
        key = (file, number)
        run = self.runs.get(key)
        if run is None:
            state = RunState(file, number, source=source)
            run = self.runs[key] = _Run(state, [(r, SIGNATURES[r.signature].detector(r.params)) for r in self.rules])
        if number >= self.current.get(file, (file, -1))[1]:
            self.current[file] = key
        self._last, self.touched[file] = (file, number, run), self._fed
        return run

    def _launch(self, r: Record) -> None:
        run = self._run(r.file, r.run, getattr(r, "source", ""))
        run.state.launch = getattr(r, "config", None)
        run.state.launch_line = r.line
        run.state.record(r)
        for feed in run.feeders("launch", r.kind):
            feed(r, run.state)
        for w in self.pending.pop(r.file, []):
            self._warning(run, w)

    def _record(self, fact: Fact, kind: RecordKind) -> None:
        r = fact.record
        run = self._run(r.file, r.run, r.source)
        stats = fact.batch is not None or fact.load is not None
        if run is not self._stretch_run or not stats or self.pending:  # (a warning waits: it comes before the line)
            self._fold()
        if self.pending:  # (a stats line between a warning and its launch is rare: no list per record)
            for w in self.pending.pop(r.file, ()):
                self._warning(self._run(w.file, w.run), w)
        if kind.warning:
            self._warning(run, r)  # type: ignore[arg-type]  # the warning role's model
        elif kind.prefill:
            run.state.prefill(r)
            for feed in run.feeders("prefill", r.kind):
                feed(r, run.state)
        elif stats:
            self._stretch_run = run
            self._stretch.append(fact)
        else:
            run.state.record(r)

    def _fold(self) -> None:
        """Fold the stats lines held (:attr:`_stretch`) into their run."""
        if self._stretch_run is not None:
            self._stretch_run.fold(Facts.of(self._stretch))
            self._stretch, self._stretch_run = [], None

    def _warning(self, run: _Run, w: WarningRecord) -> None:
        run.state.warnings += 1
        run.state.record(w)
        for feed in run.feeders("warning", "warning"):
            feed(w, run.state)

    def _evaluate(self, run: _Run) -> tuple[Finding, ...]:
        """The run's findings: judged again only once a record reached its file since the last judgement."""
        touched = self.touched.get(run.state.file, -1)
        if run.judged is not None and run.judged[0] == touched:
            return run.judged[1]
        hits = [(rule, h) for rule, det in run.detectors if (h := det.hit(run.state, self)) is not None]
        held = {rule.id for rule, _ in hits}
        found = tuple(finding(rule, run.state, h) for rule, h in hits if not rule.suppressed_by & held)
        run.judged = (touched, found)
        return found


def finding(rule: Rule, run: RunState, h: Hit) -> Finding:
    """A rule's words around a detector's hit."""
    message = f"{rule.title}: {rule.message}" + (f" {h.note}" if h.note else "")
    if rule.cannot_check:
        message += f" Cannot check from logs: {rule.cannot_check}"
    fix = rule.fix + (f" Sources: {', '.join(rule.sources)}." if rule.sources else "")
    return Finding(
        rule=rule.id,
        severity=h.severity or rule.severity,
        file=run.file,
        run=run.run,
        evidence=h.evidence,
        message=message,
        fix=fix,
    )


def spec_text(run: RunState) -> str:
    """The speculative config in a few words (:func:`~acceptmon.measure.summary.config_text`); a run with no
    launch line whose lines carry acceptance is ``speculative (no launch line)``."""
    if run.launch is None and run.speculative:
        return "speculative (no launch line)"
    return config_text(run.launch)

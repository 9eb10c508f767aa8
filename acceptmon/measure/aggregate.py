"""Every running aggregate, in one place; no I/O.

:class:`Mean` (:mod:`acceptmon.measure.mean`) is the one running count-and-sum;
:class:`Series` adds the distribution, :class:`Baseline` a run's first ten minutes.
:class:`Stats` is fed records in file order, normalizes them and answers "what did each
launch achieve": the shared figures (:mod:`acceptmon.measure.figures`), accept length
percentiles, raw and normalized accept rate, duration. Percentiles are exact: accept lengths are logged with
two decimals, so a counter of distinct values stays small whatever the log size.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from acceptmon.measure.figures import RunFigures
from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import Fact, Normalizer, RunKey, plain_kinds
from acceptmon.measure.parts import made
from acceptmon.measure.plain import (
    Plain,
    logged_rates,
    moves_on,
    plain_columns,
    present,
    stamps,
    summed,
    token_totals,
)
from acceptmon.measure.positions import Positions
from acceptmon.measure.summary import RunSummary
from acceptmon.measure.tokens import SpecTotals
from acceptmon.parse.kinds import KINDS, RecordKind
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.parse.unmade import Unmade

__all__ = ["BASELINE_SECONDS", "Baseline", "Mean", "RunStats", "RunSummary", "Series", "Stats"]

BASELINE_SECONDS = 600.0
"""The start of a run whose mean accept length later batches are compared with (log time)."""


@dataclass
class Series(Mean):
    """A :class:`Mean` that also keeps the distribution of its values (for quantiles)."""

    keep_values: bool = False
    values: Counter[float] = field(default_factory=Counter)

    def add(self, value: float | None) -> None:
        if value is None:
            return
        self.count += 1
        self.total += value
        if self.keep_values:
            self.values[value] += 1

    def merge(self, other: Mean) -> None:
        super().merge(other)
        if isinstance(other, Series):
            self.values.update(other.values)

    def quantile(self, q: float) -> float | None:
        """Nearest-rank quantile (``q`` in 0..1) over the kept values."""
        n = sum(self.values.values())
        if not n:
            return None
        rank = max(1, math.ceil(q * n - 1e-9))
        seen = 0
        for value in sorted(self.values):
            seen += self.values[value]
            if seen >= rank:
                return value
        return max(self.values)


@dataclass
class Baseline:
    """Mean of a value over a run's first :data:`BASELINE_SECONDS` of log time: the collapse reference."""

    start: datetime | None = None
    values: Mean = field(default_factory=Mean)

    def restart(self, start: datetime | None) -> None:
        self.start, self.values = start, Mean()

    def add(self, value: float | None, ts: datetime | None) -> None:
        if value is None:
            return
        if self.start is None or ts is None or (ts - self.start).total_seconds() <= BASELINE_SECONDS:
            self.values.add(value)

    @property
    def count(self) -> int:
        return self.values.count

    @property
    def mean(self) -> float | None:
        return self.values.mean


@dataclass
class RunStats:
    """Running aggregate of one run, from its normalized facts (:mod:`acceptmon.measure.normalize`)."""

    file: str
    run: int
    source: str = ""
    pod: str = ""
    container: str = ""
    launch: LaunchConfig | None = None
    start: datetime | None = None
    end: datetime | None = None
    figures: RunFigures = field(default_factory=RunFigures)
    """batches, accept_len_mean, gen_throughput_per_rank and _total: the figures every command shares."""
    ranks: set[str] = field(default_factory=set)
    accept_len: Series = field(default_factory=lambda: Series(keep_values=True))
    accept_rate: Series = field(default_factory=Series)
    """``accept_rate`` as the acceptance lines give it (SGLang: as logged)."""
    draft_accept_rate: Series = field(default_factory=Series)
    requests: int = 0
    request_accept_len: Series = field(default_factory=lambda: Series(keep_values=True))
    """Per finished request (``--log-requests``): its accept length, to two decimals."""
    spec: SpecTotals | None = None
    """Token counts of lines that carry them (vLLM; None for a run without any)."""
    positions: Positions = field(default_factory=Positions)
    """Finished requests' per-position rates (llama.cpp's ``acc per pos``), weighted by their verify steps."""

    def add(self, fact: Fact) -> None:
        b, load = fact.batch, fact.load
        if b is None and load is None:  # only stats lines have either: the common case first
            self._line(fact)
            return
        r = fact.record
        self.figures.add(fact)
        if b is not None:
            self.ranks.add(b.unit)
        if load is not None:
            self.ranks.add(load.unit)
        self._seen(r)
        if b is not None:
            values = r.__dict__  # .get: a kind without the field has None (getattr would raise inside pydantic first)
            self.accept_len.add(b.accept_len)
            self.accept_rate.add(values.get("accept_rate"))
            self.draft_accept_rate.add(b.accept_rate)
            if values.get("drafted_tokens") is not None:
                self._spec().add(r)  # type: ignore[arg-type]

    def plain(
        self, r: Record, kind: RecordKind, unit: str, gen_throughput: float | None, interval: tuple[Any, Any] | None
    ) -> None:
        """What :meth:`add` does with the fact of a record :meth:`Normalizer.plain` took (``unit``,
        ``gen_throughput`` and ``interval``: its batch's or load's, and the interval a line counting since start
        closes, which the fact's record holds): a batch, a unit's load or both, no value left out."""
        values = r.__dict__
        get = values.get
        if not kind.acceptance:
            self.figures.logged(unit, gen_throughput)
            self.ranks.add(unit)
            self._seen(r)
            return
        length, rate, draft = (
            (get("accept_len"), get("accept_rate"), get("draft_accept_rate"))
            if interval is None
            else (*interval, interval[1])
        )
        self.figures.batch(length, unit, gen_throughput)  # None without the load role: no rate
        self.ranks.add(unit)
        self._seen(r)
        self.accept_len.add(length)
        self.accept_rate.add(rate)
        self.draft_accept_rate.add(draft)
        if get("drafted_tokens") is not None:
            self._spec().add(r)  # type: ignore[arg-type]

    def plain_rows(self, rows: Plain, intervals: list[tuple[Any, Any]] | None) -> None:
        """What :meth:`plain` does with each of these rows (:func:`~acceptmon.measure.plain.plain_columns`), in
        order: sums of floats added one by one, from the running totals; ``intervals``, the (accept_len, rate) of
        the interval each row that counts since start closes (:func:`~acceptmon.measure.plain.moves_on`)."""
        figures = self.figures
        for piece in rows.pieces:
            columns = piece.columns
            if piece.kind.acceptance:
                if intervals is None:
                    lengths, rates = (present(columns.get(name)) for name in ("accept_len", "accept_rate"))
                    drafts = present(columns.get("draft_accept_rate"))
                else:
                    lengths, rates = (present(list(column)) for column in zip(*intervals, strict=True))
                    drafts = rates
                figures.batches += piece.rows.size
                summed(figures.accept_len, lengths)
                summed(self.accept_len, lengths)
                self.accept_len.values.update(lengths)
                summed(self.accept_rate, rates)
                summed(self.draft_accept_rate, drafts)
                if present(columns.get("drafted_tokens")):
                    token_totals(self._spec(), piece.rows)
            for unit, rates in logged_rates(piece):
                mean = figures.units.get(unit)
                if mean is None:
                    mean = figures.units[unit] = Mean()
                summed(mean, rates)
        self.ranks.update(rows.units)
        times = stamps(rows)
        if times:
            low, high = min(times), max(times)
            if self.start is None or low < self.start:
                self.start = low
            if self.end is None or high > self.end:
                self.end = high

    def _line(self, fact: Fact) -> None:
        """A fact without batch or load: a launch, a finished request, a request's per-position rates."""
        r = fact.record
        kind = KINDS[r.kind]
        self.figures.add(fact)  # counts a refused config, or impossible values
        if kind.starts_run:  # a launch line; a later one of the same run continues it
            self.launch = getattr(r, "config", None)
            self.start = self.start or r.timestamp
        elif kind.request:
            self.requests += 1
            length = getattr(r, "accept_len", None)
            self.request_accept_len.add(None if length is None else round(length, 2))
        elif kind.positions:
            rates, steps = getattr(r, "position_accept_rates", None), getattr(r, "verify_ct", None)
            if rates and steps:
                self.positions.add_rates(rates, steps)

    def merge(self, other: RunStats) -> None:
        """Fold in the same run's aggregate from a later, order-free part of the file
        (:func:`~acceptmon.measure.parts.order_free`)."""
        self.launch = other.launch or self.launch  # a later launch line of the run carries the merged config
        self.start = min((t for t in (self.start, other.start) if t is not None), default=None)
        self.end = max((t for t in (self.end, other.end) if t is not None), default=None)
        self.figures.merge(other.figures)
        self.ranks |= other.ranks
        self.requests += other.requests
        for name in ("accept_len", "accept_rate", "draft_accept_rate", "request_accept_len"):
            getattr(self, name).merge(getattr(other, name))
        if other.spec is not None:
            self._spec().merge(other.spec)

    def _spec(self) -> SpecTotals:
        """The run's token counts, begun at its first line that has them (from zero if its launch was seen)."""
        if self.spec is None:
            self.spec = SpecTotals(since_start=self.launch is not None)
        return self.spec

    def _seen(self, r: Record) -> None:
        """The run's span: its earliest and latest log time (a log whose clock went back gives no negative span)."""
        t = r.timestamp
        if t is not None:
            if self.start is None or t < self.start:
                self.start = t
            if self.end is None or t > self.end:
                self.end = t

    def summary(self) -> RunSummary:
        cfg = self.launch or LaunchConfig()
        duration = (self.end - self.start).total_seconds() if self.start and self.end else None
        figures: dict[str, object] = {
            **self.figures.as_dict(),
            "accept_rate_mean": self.accept_rate.rounded,
            "draft_accept_rate_mean": self.draft_accept_rate.rounded,
        }
        if self.spec is not None:
            self.spec.fill(figures)
        if figures.get("position_accept_rates") is None and self.positions.depth:
            figures["position_accept_rates"] = [round(a, 6) for a in self.positions.marginals()]
        lengths = self.accept_len
        return RunSummary(
            file=self.file,
            run=self.run,
            source=self.source,
            pod=self.pod,
            container=self.container,
            start=self.start,
            end=self.end,
            duration_s=duration,
            model=cfg.model_path,
            spec_algorithm=cfg.spec_algorithm,
            spec_num_steps=cfg.spec_num_steps,
            spec_eagle_topk=cfg.spec_eagle_topk,
            spec_num_draft_tokens=cfg.spec_num_draft_tokens,
            ranks=len(self.ranks),
            accept_len_p10=lengths.quantile(0.1),
            accept_len_p50=lengths.quantile(0.5),
            accept_len_p90=lengths.quantile(0.9),
            launch_seen=self.launch is not None,
            requests=self.requests,
            request_accept_len_p10=self.request_accept_len.quantile(0.1),
            request_accept_len_p50=self.request_accept_len.quantile(0.5),
            request_accept_len_p90=self.request_accept_len.quantile(0.9),
            version=cfg.version,
            spec_draft_model=cfg.spec_draft_model_path,
            invalid_values=self.figures.invalid_values,
            refused_configs=self.figures.refused_configs,
            **figures,
        )


class Stats:
    """Runs of every file fed so far, in order of appearance; fed records in file order."""

    def __init__(self) -> None:
        self.runs: dict[RunKey, RunStats] = {}
        self.normalizer = Normalizer()

    def update(self, records: Iterable[Record | Unmade]) -> None:
        """Normalize and fold records in file order; those :meth:`Normalizer.plain` takes (most SGLang decode lines)
        without making their facts, and records not made yet (the fast lane's) as columns where they are all such
        (:meth:`fold_values`)."""
        normalizer, kinds = self.normalizer, plain_kinds()
        fact, plain = normalizer.fact, normalizer.plain
        for r in records:
            if type(r) is Unmade:
                if not (r.kinds <= kinds and self.fold_values(r)):
                    self.update(r.made())
                continue
            if r.kind in kinds:
                kind = KINDS[r.kind]
                got = plain(r, kind)
                if got is not None:
                    self.run_of(r.__dict__).plain(r, kind, *got)
                    continue
            self.fold((fact(r),))

    def fold_values(self, rows: Unmade) -> bool:
        """Fold records not made yet of plain kinds as columns, as they would be folded one by one, made
        (:mod:`acceptmon.measure.plain`); False, nothing changed, where :func:`~acceptmon.measure.plain.plain_columns`
        does not take them."""
        plain = plain_columns(rows, self.normalizer.last_named)
        if plain is None:
            return False
        intervals = moves_on(self.normalizer, plain)
        first = rows.parts()[0]
        self._run(plain.key, first.column("pod")[0], first.column("container")[0]).plain_rows(plain, intervals)
        return True

    def run_of(self, values: dict[str, Any]) -> RunStats:
        """The run of a record (its values), begun if it is new."""
        return self._run((values["file"], values["source"], values["run"]), values["pod"], values["container"])

    def _run(self, key: RunKey, pod: str, container: str) -> RunStats:
        """The run of ``key`` (file, source, run), begun with these names if it is new."""
        run = self.runs.get(key)
        if run is None:
            run = self.runs[key] = RunStats(key[0], key[2], key[1], pod, container)
        return run

    def fold(self, facts: Iterable[Fact]) -> None:
        """Take facts normalized elsewhere (the live state's: one normalizer per live state)."""
        for fact in facts:
            r = fact.record
            if fact.batch is None and fact.load is None:
                kind = KINDS[r.kind]
                if not (kind.starts_run or kind.request or kind.positions):
                    continue  # other kinds (warnings, prefill) make no run of their own
            self._run(fact.key, r.pod, r.container).add(fact)

    @classmethod
    def part(cls, records: Sequence[Record | Unmade], start: int) -> Stats:
        """The aggregate of ``records[start:]`` (:func:`~acceptmon.measure.parts.order_free`), its normalizer told
        what the records before name and count."""
        stats = cls()
        stats.normalizer.feed(made(records[:start]))
        stats.update(records[start:] if start else records)
        return stats

    def merge(self, other: Stats) -> None:
        """Fold in the aggregate of a later, order-free part of the same files."""
        self.normalizer.take_last(other.normalizer)
        for key, run in other.runs.items():
            mine = self.runs.get(key)
            if mine is None:
                self.runs[key] = run
            else:
                mine.merge(run)

    def summaries(self) -> list[RunSummary]:
        """Every launch, plus a run 0 where stats lines came before any launch."""
        return [s.summary() for s in self.runs.values() if s.run > 0 or s.figures.batches or s.figures.units]

"""The figures every command reports for a run, under the same names and from the same facts. Pure.

``runs``, each side of ``compare``, each run of ``doctor`` and the dashboard fold the
normalized facts of a run (:mod:`acceptmon.measure.normalize`) into one :class:`RunFigures`,
so they cannot disagree:

- ``batches``: stats lines with acceptance (records whose kind has the ``acceptance`` role);
- ``accept_len_mean``: the mean accept length over those batches (a vLLM v0 line: over the
  interval it closes);
- ``gen_throughput_per_rank``: the mean, over the run's load lines, of the rate each rank or
  engine logged; ``gen_throughput_total``: the sum over ranks or engines of their means, what
  the server made. The dashboard's window applies the same two definitions (:func:`per_unit`,
  :func:`total`) to its last minutes.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from acceptmon.measure.mean import Mean
from acceptmon.measure.normalize import Fact
from acceptmon.measure.plain import grouped, masked, present, summed

if TYPE_CHECKING:
    from acceptmon.measure.facts import Facts


def per_unit(units: Iterable[Mean]) -> float | None:
    """Throughput per rank or engine: the mean of every rate the units logged (``units``: one mean each)."""
    every = Mean()
    for mean in units:
        every.merge(mean)
    return every.rounded


def total(units: Iterable[Mean]) -> float | None:
    """Throughput of the server: the sum over ranks or engines of their mean logged rate."""
    means = [m.mean for m in units if m.mean is not None]
    return round(sum(means), 4) if means else None


@dataclass
class RunFigures:
    """Running figures of one run."""

    batches: int = 0
    accept_len: Mean = field(default_factory=Mean)
    units: dict[str, Mean] = field(default_factory=dict)
    """Logged generation throughput per rank or engine."""
    invalid_values: int = 0
    """Impossible values left out of the figures (:data:`acceptmon.measure.normalize.VALID`)."""
    refused_configs: int = 0
    """Launch lines whose config was refused as implausible (:data:`~acceptmon.measure.normalize.CONFIG_LIMITS`)."""

    def add(self, fact: Fact) -> None:
        self.invalid_values += fact.invalid
        self.refused_configs += bool(fact.refused)
        b = fact.batch
        if b is not None:
            self.batches += 1
            self.accept_len.add(b.accept_len)
        load = fact.load
        if load is not None:
            self.logged(load.unit, load.gen_throughput)

    def fold(self, facts: Facts) -> Sequence[float | None]:
        """What :meth:`add` does with each stats line of ``facts`` (their facts as columns), in order; returns each
        line's load rate (None where the line is no load line)."""
        batch = facts.batch
        self.invalid_values += facts.invalid
        self.batches += len(batch) if all(batch) else sum(batch)
        summed(self.accept_len, present(facts.accept_len))  # None where the line is no batch
        tputs = facts.gen_throughput if all(facts.load) else masked(facts.gen_throughput, facts.load)
        self.loads(facts.unit, tputs)
        return tputs

    def batch(self, accept_len: float | None, unit: str, gen_throughput: float | None) -> None:
        """A fact with a batch and its unit's load (``gen_throughput`` None: none, or not logged): what :meth:`add`
        does with it."""
        self.batches += 1
        self.accept_len.add(accept_len)
        self.logged(unit, gen_throughput)

    def logged(self, unit: str, gen_throughput: float | None) -> None:
        """A unit's logged throughput (None: none yet)."""
        if gen_throughput is not None:
            mean = self.units.get(unit)
            if mean is None:
                mean = self.units[unit] = Mean()
            mean.add(gen_throughput)

    def loads(self, units: Sequence[str], gen_throughput: Sequence[float | None]) -> None:
        """:meth:`logged` of each line's unit and throughput, in order."""
        if not units:
            return
        by_unit: dict[str, Sequence[float]]
        if units.count(units[0]) == len(units):  # one unit (a rank, an engine): its rates, in C
            by_unit = {units[0]: present(gen_throughput)}
        else:
            by_unit = dict(grouped(units, gen_throughput))
        for unit, rates in by_unit.items():
            if not rates:
                continue
            mean = self.units.get(unit)
            if mean is None:
                mean = self.units[unit] = Mean()
            summed(mean, rates)

    def merge(self, other: RunFigures) -> None:
        self.batches += other.batches
        self.invalid_values += other.invalid_values
        self.refused_configs += other.refused_configs
        self.accept_len.merge(other.accept_len)
        for unit, mean in other.units.items():
            self.units.setdefault(unit, Mean()).merge(mean)

    @property
    def accept_len_mean(self) -> float | None:
        return self.accept_len.rounded

    @property
    def gen_throughput_per_rank(self) -> float | None:
        return per_unit(self.units.values())

    @property
    def gen_throughput_total(self) -> float | None:
        return total(self.units.values())

    def as_dict(self) -> dict[str, float | int | None]:
        """The four figures, by their names in every command's JSON."""
        return {
            "batches": self.batches,
            "accept_len_mean": self.accept_len_mean,
            "gen_throughput_per_rank": self.gen_throughput_per_rank,
            "gen_throughput_total": self.gen_throughput_total,
        }

"""Every run of the files as one side of a comparison, keyed as ``runs`` keys them, and their speedups. Wiring.

``acceptmon runs --baseline`` reads its runs here, beside the run statistics in the same reading
(:class:`Both`): per run (file, source, launch number), the batches normalized in file order
(:mod:`acceptmon.measure.normalize`) into a :class:`~acceptmon.measure.compare.Sample`, and its
launch config. A baseline reference (``FILE`` or ``FILE#N``) is read the same way
(:func:`read_runs`).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, Generic, TypeVar

from acceptmon.inputs.files import check_path
from acceptmon.inputs.refs import parse_ref
from acceptmon.measure.columns import Packed, missing, pack, unpack
from acceptmon.measure.compare import Sample
from acceptmon.measure.normalize import READS, Normalizer
from acceptmon.measure.speedup import LOSES_BELOW, MARGINAL_BELOW, baseline_runs, speculates
from acceptmon.measure.summary import RunSummary
from acceptmon.measure.verdicts import Baseline, sweep_verdicts
from acceptmon.parse.grammar import GrammarSet
from acceptmon.parse.kinds import KINDS, with_role
from acceptmon.parse.records import LaunchConfig, Record
from acceptmon.pipeline.batch import Job, RunResult, run

__all__ = ["Both", "RunKey", "RunSides", "read_runs", "with_speedups"]

RunKey = tuple[str, str, int]
"""A run as ``runs`` names it: its file, its stream source ("" for a plain file) and its launch number."""
A = TypeVar("A")
B = TypeVar("B")


class RunSides:
    """Per run, its batches as a :class:`~acceptmon.measure.compare.Sample` and its launch config."""

    from_lane = True
    """Reads no record's ``extra``: the fast lane's records do (:class:`acceptmon.pipeline.batch.Job`)."""

    def __init__(self) -> None:
        self.records_wanted = with_role("acceptance") | with_role("load") | with_role("prefill")
        self.normalizer = Normalizer()
        self.samples: dict[RunKey, Sample] = {}
        self.configs: dict[RunKey, LaunchConfig | None] = {}

    def chunk(self, records: list[Record]) -> Packed:
        return pack(records, READS)

    def collect(self, part: Packed) -> None:
        for fact in map(self.normalizer.fact, unpack(part, READS)):
            r = fact.record
            key = (r.file, getattr(r, "source", ""), r.run)
            if KINDS[r.kind].starts_run:
                self.configs[key] = getattr(r, "config", None)
            elif fact.batch is not None or fact.load is not None:
                self.configs.setdefault(key, None)
                sample = self.samples.get(key)
                if sample is None:
                    sample = self.samples[key] = Sample()
                sample.add(fact)


class Both(Generic[A, B]):
    """Two jobs fed by one reading: each gets the records of the kinds it wants."""

    def __init__(self, first: Job[A], second: Job[B]) -> None:
        self.first, self.second = first, second
        self.records_wanted = first.records_wanted | second.records_wanted
        self.from_lane = getattr(first, "from_lane", False) and getattr(second, "from_lane", False)

    def chunk(self, records: list[Record]) -> tuple[A, B]:
        return (
            self.first.chunk([r for r in records if r.kind in self.first.records_wanted or _always(r)]),
            self.second.chunk([r for r in records if r.kind in self.second.records_wanted or _always(r)]),
        )

    def collect(self, part: tuple[A, B]) -> None:
        self.first.collect(part[0])
        self.second.collect(part[1])


def _always(r: Record) -> bool:
    """Records every job is handed whatever it wants: those that start a run."""
    return KINDS[r.kind].starts_run


def read_runs(paths: Sequence[str], grammars: GrammarSet, jobs: int = 1, **how: Any) -> tuple[RunSides, RunResult]:
    """The runs of ``paths`` as sides."""
    sides = RunSides()
    return sides, run(paths, grammars, sides, jobs=jobs, **how)


def with_speedups(
    summaries: Sequence[RunSummary],
    sides: RunSides,
    ref: str,
    grammars: GrammarSet,
    jobs: int = 1,
    thresholds: tuple[float, float] = (LOSES_BELOW, MARGINAL_BELOW),
) -> tuple[list[RunSummary], bool]:
    """Each run with its speedup against the baseline runs (``ref``: ``FILE`` or ``FILE#N``; empty: the runs
    without speculation among ``sides``), its verdict, and the best of them (:mod:`acceptmon.measure.verdicts`);
    and whether there was a baseline run. A baseline reference that names no run without speculation: one line."""
    if ref:
        path, number = parse_ref(ref)
        check_path(path)
        base_sides, _ = read_runs([path], grammars, jobs)
        chosen = baseline_runs(ref, number, _speculating(base_sides))
        baselines = _baselines(base_sides, lambda key: key[2] in chosen)
    else:
        baselines = _baselines(sides, lambda key: True)
    runs = [(s, sides.samples.get(k := (s.file, s.source, s.run)), _spec(sides, k)) for s in summaries]
    return list(sweep_verdicts(runs, baselines, thresholds=thresholds)), bool(baselines)


def _spec(sides: RunSides, key: RunKey) -> bool:
    """Whether the run speculates (:func:`acceptmon.measure.speedup.speculates`)."""
    lengths = sides.samples[key].batches.column("accept_len") if key in sides.samples else ()
    return speculates(sides.configs.get(key), len(lengths) - missing(lengths))


def _speculating(sides: RunSides) -> dict[int, bool]:
    """The runs with stats lines, by number: whether each speculates (a number that one source runs without
    speculation counts as plain: the baseline takes that source's run)."""
    runs: dict[int, bool] = {}
    for key in sides.samples:
        runs[key[2]] = runs.get(key[2], True) and _spec(sides, key)
    return runs


def _baselines(sides: RunSides, keep: Callable[[RunKey], bool]) -> list[Baseline]:
    """The runs without speculation that ``keep`` takes, as baselines."""
    out = []
    for key, sample in sides.samples.items():
        if keep(key) and not _spec(sides, key):
            config = sides.configs.get(key)
            name = Path(key[0]).name if key[0] != "-" else "stdin"
            out.append(Baseline(name, key[2], config.model_path if config else None, sample.side("", copy=False)))
    return out
